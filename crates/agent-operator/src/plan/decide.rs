//! The pure middle of an AgentDeployment pass: from what is known (spec,
//! status, inputs, and what was read from the control plane) to the one step
//! to take. No IO here; every function is a table of cases in the tests.
//!
//! A pass decides twice, because what it reads depends on what it knows:
//! - [`before_remote`]: before any control plane request: wait (paused, a
//!   rejection not yet due for retry, a cold-start drift check spread over
//!   the resync period), obtain a deployment (create, adopt, recover), poll
//!   only the revision, or read the deployment;
//! - [`after_read`]: once the deployment was read: patch, redeploy, follow
//!   the revision, name a revision made outside the operator
//!   ([`made_outside`]) in what the pass reports, or stall on a change the
//!   service does not hold or on a fight with another writer
//!   ([`super::fight`]).
//!
//! Sources: docs/control-plane-api.md "Polling" (the documented client
//! flow), "Requests" (what creates a revision) and "Revision" (statuses).

use std::time::Duration;

use super::desired;
use super::fight;
use crate::api::conditions::{READY, TRUE, find, reason};
use crate::api::deployment::{AgentDeploymentStatus, DriftCorrection};
use crate::controlplane::types::{DeploymentPatch, RevisionStatus};

/// First retry of a definitely rejected request with an unchanged desired
/// state: 10 minutes after the rejection.
pub const REJECTION_RETRY_BASE: Duration = Duration::from_secs(600);
/// Cap of the rejection backoff (doubling from [`REJECTION_RETRY_BASE`]).
pub const REJECTION_RETRY_MAX: Duration = Duration::from_secs(7200);

/// The wait before resending a request rejected `attempts` times:
/// 10 min, 20 min, 40 min, 80 min, then 2 h.
pub fn rejection_backoff(attempts: u32) -> Duration {
    REJECTION_RETRY_BASE
        .saturating_mul(1u32 << attempts.saturating_sub(1).min(10))
        .min(REJECTION_RETRY_MAX)
}

/// Whether a PATCH corrects secret values changed on the control plane
/// (its answer's keyed hashes differ from the values here, `differs`) when
/// they did not change here (`changed_here`). Such a correction is paced
/// like a change here (`wait`: the last PATCH of values is younger than
/// `controller::SECRETS_PATCH_INTERVAL`), so a fight with another writer
/// costs at most one revision per interval; not when the status holds a
/// PATCH the service did not hold (`unheld`: it is not sent anyway, and the
/// pass must keep reporting it, not flap to Ready).
pub fn correct_outside_change(changed_here: bool, differs: bool, unheld: bool, wait: bool) -> bool {
    !changed_here && differs && (unheld || !wait)
}

/// Whether the desired secret values count as changed here, so that a
/// PATCH carries them: when this object sent values before (`last_sent`,
/// `status.secretsHash`), a hash other than `desired`; when it never did
/// (a deployment adopted, recovered or handed over by the object that held
/// it), only when the values the service returns differ (`remote`:
/// `Some(true)`) or cannot be compared (`None`): a deployment that already
/// holds the desired values gets no new revision for them.
pub fn secrets_changed_here(last_sent: Option<&str>, desired: &str, remote: Option<bool>) -> bool {
    match last_sent {
        Some(sent) => sent != desired,
        None => remote != Some(false),
    }
}

/// What a pass knows before any control plane request.
#[derive(Clone, Debug)]
pub struct Known<'a> {
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// The status as last written (a fresh read when it matters).
    pub status: &'a AgentDeploymentStatus,
    /// Fingerprint of the desired state (see `desired::fingerprint`).
    pub fingerprint: &'a str,
    /// True when the secret values differ from those last sent.
    pub secrets_changed: bool,
    /// A redeploy annotation value not yet acted on.
    pub redeploy_requested: bool,
    /// The image tag names another digest than the one last sent
    /// (`spec.imagePolicy: Follow`): the deployment is read and patched, not
    /// only its revision polled.
    pub image_moved: bool,
    /// The first pass of this object since the operator started.
    pub first_pass: bool,
    /// Seconds from now to the rejection's retry time (negative: due), if
    /// the status holds a rejection.
    pub rejection_due_in: Option<f64>,
    /// Time left before a change of Secret values alone may be sent (see
    /// `controller::SECRETS_PATCH_INTERVAL`); `None`: it may be sent now.
    pub secrets_due_in: Option<Duration>,
    /// The last read found the remote deployment being deleted outside the
    /// operator, and its next read is due in this time (the backoff of
    /// `deleting::Deletes`); `None`: not deleting, or due now.
    pub remote_deleting_due_in: Option<Duration>,
    /// `spec.displayName` is set and differs from the remote's as last
    /// read or set (`status.displayName`): the deployment is read, and the
    /// PATCH that sets it follows (right after a create, which cannot
    /// carry it).
    pub display_name_due: bool,
}

/// The step a pass takes before any control plane request.
#[derive(Clone, Debug, PartialEq)]
pub enum Before {
    /// A request with this desired state was rejected and is not due yet:
    /// send nothing, check again after this delay (or on a change).
    WaitRejected(Duration),
    /// Cold start: the resource converged on its generation before the
    /// restart; its first drift check is spread over the resync period.
    SpreadColdStart,
    /// No deployment id yet: adopt, recover or create (on a fresh read).
    Obtain,
    /// The remote deployment is being deleted outside the operator and its
    /// next read is not due: send nothing, look again after this delay.
    WaitRemoteDeleting(Duration),
    /// A revision is in progress and nothing changed: GET only the revision.
    PollRevision(String),
    /// Only Secret values changed, and the last PATCH that carried them is
    /// too recent: send nothing, look again after this delay.
    WaitSecrets(Duration),
    /// Read the deployment (drift check, spec change, redeploy), then
    /// [`after_read`].
    ReadDeployment,
}

/// True when the status says the resource converged on `generation`: the
/// remote equals the spec and its revision ended (Ready, or stalled on a
/// failed revision, a change the service does not hold, or a drift fight).
pub fn converged_on(status: &AgentDeploymentStatus, generation: Option<i64>) -> bool {
    status.deployment_id.is_some()
        && status.observed_generation == generation
        && find(&status.conditions, READY).is_some_and(|c| {
            c.observed_generation == generation
                && (c.status == TRUE
                    || [
                        reason::REVISION_FAILED,
                        reason::REVISION_INTERRUPTED,
                        reason::DRIFT_NOT_CONVERGING,
                        reason::DRIFT_FIGHT,
                        reason::ROLLED_BACK,
                    ]
                    .contains(&c.reason.as_str()))
        })
}

/// The latest revision `latest` of the deployment read, when the operator
/// neither made nor followed it: not the revision the status follows, nor
/// one of the history it keeps (`status.revisions`). Every revision the
/// operator starts (create, PATCH, redeploy) is in its answer and so in
/// status, so an unknown one was made outside: a rollback or a redeploy
/// from `agentctl`, the UI or the CLI, or a change in the UI. `None` as
/// well when the status follows no revision yet (nothing to compare).
/// Costs no request: `latest` comes from the read the pass makes anyway.
pub fn made_outside<'a>(
    status: &AgentDeploymentStatus,
    latest: Option<&'a str>,
) -> Option<&'a str> {
    let rid = latest?;
    let known = status.latest_revision_id.as_deref()?;
    (rid != known && !status.revisions.iter().any(|r| r.id == rid)).then_some(rid)
}

/// The revision the status follows, when it has not ended: in progress,
/// skipped (the newer one is read), or started by the pass that wrote the
/// status and not read yet (no status).
fn revision_in_progress(status: &AgentDeploymentStatus) -> Option<&str> {
    let rid = status.latest_revision_id.as_deref()?;
    let Some(s) = status.revision_status.clone() else {
        return Some(rid);
    };
    let s = RevisionStatus::from(s);
    (s.is_in_progress() || s == RevisionStatus::Skipped).then_some(rid)
}

/// The step before any control plane request (see [`Before`]).
pub fn before_remote(k: &Known<'_>) -> Before {
    if let Some(rejected) = &k.status.rejected_request
        && rejected.fingerprint == k.fingerprint
        && let Some(due_in) = k.rejection_due_in
        && due_in > 0.0
    {
        return Before::WaitRejected(Duration::from_secs_f64(due_in));
    }
    if k.status.deployment_id.is_none() {
        return Before::Obtain;
    }
    // Nothing can change a deployment being deleted: no read before due.
    if let Some(due) = k.remote_deleting_due_in {
        return Before::WaitRemoteDeleting(due);
    }
    if k.display_name_due {
        return Before::ReadDeployment;
    }
    let same_generation = k.status.observed_generation == k.generation;
    // A change of Secret values alone waits for its interval; meanwhile the
    // pass behaves as if nothing changed (a revision in progress is polled).
    let secrets_held =
        k.secrets_changed && same_generation && !k.redeploy_requested && k.secrets_due_in.is_some();
    let secrets_changed = (k.secrets_changed && !secrets_held) || k.image_moved;
    if k.first_pass
        && same_generation
        && !k.redeploy_requested
        && !secrets_changed
        && converged_on(k.status, k.generation)
    {
        return Before::SpreadColdStart;
    }
    if same_generation
        && !k.redeploy_requested
        && !secrets_changed
        && k.status.rejected_request.is_none()
        && let Some(rid) = revision_in_progress(k.status)
    {
        return Before::PollRevision(rid.to_owned());
    }
    match k.secrets_due_in {
        Some(due) if secrets_held => Before::WaitSecrets(due),
        _ => Before::ReadDeployment,
    }
}

/// What a pass knows once the deployment was read.
#[derive(Clone, Debug)]
pub struct Read<'a> {
    /// The minimal PATCH that makes the remote equal to the spec.
    pub patch: &'a DeploymentPatch,
    /// Its fingerprint (see `desired::patch_fingerprint`).
    pub patch_fingerprint: &'a str,
    /// The status as last written.
    pub status: &'a AgentDeploymentStatus,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// The desired secret values changed since they were last sent (a
    /// referenced Secret was edited): a PATCH carrying them is not a drift
    /// correction.
    pub secrets_changed_here: bool,
    /// This pass found that the image tag names another digest
    /// (`spec.imagePolicy`): a PATCH carrying the new digest is not a drift
    /// correction.
    pub image_moved_here: bool,
    /// A redeploy annotation value not yet acted on.
    pub redeploy_requested: bool,
    /// This pass created or adopted the deployment.
    pub obtained_now: bool,
    /// The remote deployment is being deleted outside the operator.
    pub remote_deleting: bool,
    /// The corrections of drift remembered for this generation
    /// ([`fight::carried`]).
    pub drift_corrections: &'a [DriftCorrection],
    /// The deployment's `latest_revision_id`, as read.
    pub latest_revision_id: Option<&'a str>,
}

/// The step once the deployment was read.
#[derive(Clone, Debug, PartialEq)]
pub enum After {
    /// The remote deployment is being deleted outside: wait for it.
    RemoteDeleting,
    /// The same PATCH was sent before and the service did not hold it:
    /// report, and send nothing until the spec changes.
    Unheld,
    /// The PATCH would correct fields another writer keeps changing
    /// ([`fight::fought`]): report `DriftFight`, send nothing until the spec
    /// changes or a redeploy is requested.
    Fight {
        /// The fields fought over, sorted.
        fields: Vec<String>,
    },
    /// Send the PATCH (`drift`: the spec did not change since the last
    /// converged pass, so the difference was made outside).
    Patch {
        /// A correction of a change made outside the operator.
        drift: bool,
    },
    /// The latest revision was made outside the operator ([`made_outside`])
    /// and the deployment differs from the spec (a rollback, or a change in
    /// the UI): send the PATCH as a correction of drift (like
    /// `Patch { drift: true }`), whose event and condition name that
    /// revision and say that the spec is re-applied over it.
    Reapply {
        /// The revision made outside.
        revision: String,
    },
    /// POST a new revision (the redeploy annotation changed).
    Redeploy,
    /// The latest revision was made outside the operator (a redeploy, or a
    /// rollback to the spec's configuration) and the deployment equals the
    /// spec: follow it, with a Normal event naming it.
    FollowOutside {
        /// The revision made outside.
        revision: String,
    },
    /// Nothing to change: follow the latest revision.
    Follow,
}

/// The step once the deployment was read (see [`After`]).
pub fn after_read(r: &Read<'_>) -> After {
    if r.remote_deleting {
        return After::RemoteDeleting;
    }
    // A revision nobody here asked for: not after a change of the spec, of
    // Secret values, a create or adoption, or a redeploy request.
    let unknown = (!r.obtained_now
        && !r.secrets_changed_here
        && !r.image_moved_here
        && !r.redeploy_requested
        && r.status.observed_generation == r.generation)
        .then(|| made_outside(r.status, r.latest_revision_id))
        .flatten();
    if !r.patch.is_empty() {
        if r.status.unheld_patch.as_deref() == Some(r.patch_fingerprint)
            && r.status.observed_generation == r.generation
        {
            return After::Unheld;
        }
        // Not caused by a change here (the spec, Secret values, a create or
        // an adoption): the difference was made outside.
        let outside = !r.obtained_now
            && !r.secrets_changed_here
            && !r.image_moved_here
            && r.status.observed_generation == r.generation;
        if outside {
            let fields = fight::fought(r.drift_corrections, &desired::patch_fields(r.patch));
            if !fields.is_empty() {
                return After::Fight { fields };
            }
        }
        if let Some(rid) = unknown {
            return After::Reapply {
                revision: rid.to_owned(),
            };
        }
        let drift = outside && converged_on(r.status, r.generation);
        return After::Patch { drift };
    }
    if r.redeploy_requested && !r.obtained_now {
        return After::Redeploy;
    }
    match unknown {
        Some(rid) => After::FollowOutside {
            revision: rid.to_owned(),
        },
        None => After::Follow,
    }
}

/// The delay before the next poll of a revision in progress: the backoff
/// delay, or the time left until the revision is expected to end (learned
/// from recent revisions of the same control plane), whichever is later,
/// within `[min, max]`.
pub fn next_poll(backoff: Duration, expected_left: Option<Duration>, max: Duration) -> Duration {
    let wait = expected_left.map_or(backoff, |left| backoff.max(left));
    wait.min(max.max(backoff.min(max)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::conditions::condition;
    use crate::api::deployment::{RejectedRequest, RevisionSummary};
    use crate::controlplane::types::{SourceConfig, SourceRevisionConfig};

    fn status(reason: &str, ready: &str, revision: Option<&str>) -> AgentDeploymentStatus {
        AgentDeploymentStatus {
            observed_generation: Some(1),
            deployment_id: Some("d".into()),
            latest_revision_id: Some("r".into()),
            revision_status: revision.map(str::to_owned),
            conditions: vec![condition(&[], READY, ready, reason, "m", Some(1))],
            ..Default::default()
        }
    }

    fn known<'a>(s: &'a AgentDeploymentStatus) -> Known<'a> {
        Known {
            generation: Some(1),
            status: s,
            fingerprint: "f",
            secrets_changed: false,
            redeploy_requested: false,
            image_moved: false,
            first_pass: false,
            rejection_due_in: None,
            secrets_due_in: None,
            remote_deleting_due_in: None,
            display_name_due: false,
        }
    }

    /// A ready deployment: its revision DEPLOYED.
    fn ready_status() -> AgentDeploymentStatus {
        status(reason::REVISION_DEPLOYED, TRUE, Some("DEPLOYED"))
    }

    /// A deployment whose revision is BUILDING.
    fn building_status() -> AgentDeploymentStatus {
        status(reason::REVISION_IN_PROGRESS, "False", Some("BUILDING"))
    }

    /// No deployment yet, its create refused (fingerprint `f`).
    fn rejected_status() -> AgentDeploymentStatus {
        AgentDeploymentStatus {
            rejected_request: Some(Box::new(RejectedRequest {
                operation: "create deployment".into(),
                fingerprint: "f".into(),
                attempts: 1,
                retry_after_time: String::new(),
            })),
            ..Default::default()
        }
    }

    /// Asserts the step [`before_remote`] takes in each case.
    fn assert_before(cases: Vec<(&str, Known<'_>, Before)>) {
        for (what, k, want) in cases {
            assert_eq!(before_remote(&k), want, "{what}");
        }
    }

    #[test]
    fn before_remote_a_converged_deployment_is_read_or_its_first_read_spread() {
        let ready = ready_status();
        let none = AgentDeploymentStatus::default();
        assert_before(vec![
            ("no id: obtain", known(&none), Before::Obtain),
            (
                "ready, steady: drift check",
                known(&ready),
                Before::ReadDeployment,
            ),
            (
                "ready, first pass after a restart: spread",
                Known {
                    first_pass: true,
                    ..known(&ready)
                },
                Before::SpreadColdStart,
            ),
            (
                "first pass with a new generation: at once",
                Known {
                    first_pass: true,
                    generation: Some(2),
                    ..known(&ready)
                },
                Before::ReadDeployment,
            ),
            (
                "first pass with a redeploy request: at once",
                Known {
                    first_pass: true,
                    redeploy_requested: true,
                    ..known(&ready)
                },
                Before::ReadDeployment,
            ),
        ]);
    }

    #[test]
    fn before_remote_a_revision_in_progress_is_polled_unless_something_changed() {
        let ready = ready_status();
        let building = building_status();
        let started = status(reason::REVISION_IN_PROGRESS, "False", None);
        assert_before(vec![
            (
                "building: one GET of the revision",
                known(&building),
                Before::PollRevision("r".into()),
            ),
            (
                "building, but the image tag moved (Follow): read and patch",
                Known {
                    image_moved: true,
                    ..known(&building)
                },
                Before::ReadDeployment,
            ),
            (
                "first pass, converged, but the image tag moved: at once",
                Known {
                    first_pass: true,
                    image_moved: true,
                    ..known(&ready)
                },
                Before::ReadDeployment,
            ),
            (
                "a revision started by the last pass, not read yet: one GET of it",
                known(&started),
                Before::PollRevision("r".into()),
            ),
            (
                "building but the spec changed: read the deployment",
                Known {
                    generation: Some(2),
                    ..known(&building)
                },
                Before::ReadDeployment,
            ),
            (
                "building but a secret changed: read the deployment",
                Known {
                    secrets_changed: true,
                    ..known(&building)
                },
                Before::ReadDeployment,
            ),
        ]);
    }

    #[test]
    fn before_remote_waits_for_secrets_changed_too_soon_and_a_deletion_outside() {
        let ready = ready_status();
        let building = building_status();
        assert_before(vec![
            (
                "a secret changed again too soon after the last: wait",
                Known {
                    secrets_changed: true,
                    secrets_due_in: Some(Duration::from_secs(20)),
                    ..known(&ready)
                },
                Before::WaitSecrets(Duration::from_secs(20)),
            ),
            (
                "a secret changed too soon while building: poll the revision",
                Known {
                    secrets_changed: true,
                    secrets_due_in: Some(Duration::from_secs(20)),
                    ..known(&building)
                },
                Before::PollRevision("r".into()),
            ),
            (
                "a secret changed too soon, but so did the spec: read",
                Known {
                    generation: Some(2),
                    secrets_changed: true,
                    secrets_due_in: Some(Duration::from_secs(20)),
                    ..known(&ready)
                },
                Before::ReadDeployment,
            ),
            (
                "being deleted outside, read not due: wait, even for a new generation",
                Known {
                    generation: Some(2),
                    remote_deleting_due_in: Some(Duration::from_secs(8)),
                    ..known(&building)
                },
                Before::WaitRemoteDeleting(Duration::from_secs(8)),
            ),
        ]);
    }

    #[test]
    fn before_remote_a_rejected_request_waits_until_due_or_changed() {
        let building = building_status();
        let rejected = rejected_status();
        assert_before(vec![
            (
                "a display name not set yet while the create's revision builds: read",
                Known {
                    display_name_due: true,
                    ..known(&building)
                },
                Before::ReadDeployment,
            ),
            (
                "a display name not set yet, rejected and not due: wait",
                Known {
                    display_name_due: true,
                    rejection_due_in: Some(30.0),
                    ..known(&rejected)
                },
                Before::WaitRejected(Duration::from_secs(30)),
            ),
            (
                "rejected, same fingerprint, not due: wait",
                Known {
                    rejection_due_in: Some(30.0),
                    ..known(&rejected)
                },
                Before::WaitRejected(Duration::from_secs(30)),
            ),
            (
                "rejected, due: try again",
                Known {
                    rejection_due_in: Some(-1.0),
                    ..known(&rejected)
                },
                Before::Obtain,
            ),
            (
                "rejected, fingerprint changed: try again",
                Known {
                    fingerprint: "g",
                    rejection_due_in: Some(30.0),
                    ..known(&rejected)
                },
                Before::Obtain,
            ),
        ]);
    }

    /// A read of the deployment at `generation` that found `patch` to send,
    /// the latest revision the one the status follows, nothing else known.
    fn read<'a>(
        patch: &'a DeploymentPatch,
        status: &'a AgentDeploymentStatus,
        generation: Option<i64>,
    ) -> Read<'a> {
        Read {
            patch,
            patch_fingerprint: "p",
            status,
            generation,
            secrets_changed_here: false,
            image_moved_here: false,
            redeploy_requested: false,
            obtained_now: false,
            remote_deleting: false,
            drift_corrections: &[],
            latest_revision_id: Some("r"),
        }
    }

    /// A [`read`] at generation 1 whose latest revision is `latest`.
    fn read_latest<'a>(
        patch: &'a DeploymentPatch,
        status: &'a AgentDeploymentStatus,
        latest: Option<&'a str>,
    ) -> Read<'a> {
        Read {
            latest_revision_id: latest,
            ..read(patch, status, Some(1))
        }
    }

    /// A PATCH of `source_config.build_on_push`.
    fn build_on_push_patch() -> DeploymentPatch {
        DeploymentPatch {
            source_config: Some(SourceConfig {
                build_on_push: Some(false),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// The PATCH that puts back the spec's ref after a rollback outside.
    fn rolled_back_patch() -> DeploymentPatch {
        DeploymentPatch {
            source_revision_config: Some(SourceRevisionConfig {
                repo_ref: Some("broken".into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// Three corrections of `field` within the hour: a fight.
    fn fought(field: &str) -> Vec<DriftCorrection> {
        let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        (0..3).fold(Vec::new(), |h, _| fight::remember(&h, &[field], now))
    }

    /// Asserts the step [`after_read`] takes in each case.
    fn assert_after(cases: Vec<(&str, Read<'_>, After)>) {
        for (what, r, want) in cases {
            assert_eq!(after_read(&r), want, "{what}");
        }
    }

    #[test]
    fn after_read_an_equal_deployment_is_followed_and_a_differing_one_patched() {
        let ready = ready_status();
        let empty = DeploymentPatch::default();
        let some = build_on_push_patch();
        assert_after(vec![
            (
                "equal: follow",
                read(&empty, &ready, Some(1)),
                After::Follow,
            ),
            (
                "differs on a converged generation: drift",
                read(&some, &ready, Some(1)),
                After::Patch { drift: true },
            ),
            (
                "differs because a referenced Secret changed: patch, not drift",
                Read {
                    secrets_changed_here: true,
                    ..read(&some, &ready, Some(1))
                },
                After::Patch { drift: false },
            ),
            (
                "differs after a spec change: patch",
                read(&some, &ready, Some(2)),
                After::Patch { drift: false },
            ),
            (
                "differs because the image tag moved (Follow): patch, not drift",
                Read {
                    image_moved_here: true,
                    ..read(&some, &ready, Some(1))
                },
                After::Patch { drift: false },
            ),
        ]);
    }

    #[test]
    fn after_read_a_patch_not_held_or_fought_over_stops_the_corrections() {
        let ready = ready_status();
        let building = building_status();
        let fighting = status(reason::DRIFT_FIGHT, "False", Some("DEPLOYED"));
        let unheld = AgentDeploymentStatus {
            unheld_patch: Some("p".into()),
            ..ready_status()
        };
        let some = build_on_push_patch();
        let fought = fought("source_config.build_on_push");
        let fight_over_it = After::Fight {
            fields: vec!["source_config.build_on_push".into()],
        };
        assert_after(vec![
            (
                "the same patch was not held: stop",
                read(&some, &unheld, Some(1)),
                After::Unheld,
            ),
            (
                "not held, but the spec changed since: patch",
                read(&some, &unheld, Some(2)),
                After::Patch { drift: false },
            ),
            (
                "corrected 3 times within the hour: a fight, not a fourth PATCH",
                Read {
                    drift_corrections: &fought,
                    ..read(&some, &ready, Some(1))
                },
                fight_over_it.clone(),
            ),
            (
                "a fight stays one when the status no longer says converged",
                Read {
                    drift_corrections: &fought,
                    ..read(&some, &building, Some(1))
                },
                fight_over_it,
            ),
            (
                "stalled on a fight, memory cleared by a redeploy request: a correction of drift again",
                read(&some, &fighting, Some(1)),
                After::Patch { drift: true },
            ),
        ]);
    }

    #[test]
    fn after_read_a_fight_gives_way_to_a_change_made_here() {
        let ready = ready_status();
        let some = build_on_push_patch();
        let fought = fought("source_config.build_on_push");
        assert_after(vec![
            (
                "fought over, but the image tag moved: patch",
                Read {
                    drift_corrections: &fought,
                    image_moved_here: true,
                    ..read(&some, &ready, Some(1))
                },
                After::Patch { drift: false },
            ),
            (
                "fought over, but a referenced Secret changed: patch",
                Read {
                    drift_corrections: &fought,
                    secrets_changed_here: true,
                    ..read(&some, &ready, Some(1))
                },
                After::Patch { drift: false },
            ),
            (
                "fought over, but the spec changed: patch",
                Read {
                    drift_corrections: &fought,
                    ..read(&some, &ready, Some(2))
                },
                After::Patch { drift: false },
            ),
        ]);
    }

    #[test]
    fn after_read_redeploys_and_a_deletion_outside() {
        let ready = ready_status();
        let empty = DeploymentPatch::default();
        let some = build_on_push_patch();
        assert_after(vec![
            (
                "redeploy requested",
                Read {
                    redeploy_requested: true,
                    ..read(&empty, &ready, Some(1))
                },
                After::Redeploy,
            ),
            (
                "redeploy on the pass that created it: already a new revision",
                Read {
                    redeploy_requested: true,
                    obtained_now: true,
                    ..read(&empty, &ready, Some(1))
                },
                After::Follow,
            ),
            (
                "being deleted outside",
                Read {
                    remote_deleting: true,
                    ..read(&some, &ready, Some(1))
                },
                After::RemoteDeleting,
            ),
        ]);
    }

    // Revisions made outside the operator (a rollback, a redeploy from
    // agentctl, the UI or the CLI): named when the spec is re-applied or
    // the revision followed.

    #[test]
    fn after_read_a_revision_made_outside_is_named_when_the_spec_is_reapplied() {
        let ready = ready_status();
        let building = building_status();
        let failed = status(reason::REVISION_FAILED, "False", Some("BUILD_FAILED"));
        let rolled_back = rolled_back_patch();
        let fought = fought("source_revision_config");
        let reapply = After::Reapply {
            revision: "r9".into(),
        };
        assert_after(vec![
            (
                "rolled back after a failed build: re-apply, naming the revision",
                read_latest(&rolled_back, &failed, Some("r9")),
                reapply.clone(),
            ),
            (
                "changed in the UI while Ready (a new revision): the same",
                read_latest(&rolled_back, &ready, Some("r9")),
                reapply.clone(),
            ),
            (
                "rolled back while the operator's revision was building: the same",
                read_latest(&rolled_back, &building, Some("r9")),
                reapply,
            ),
            (
                "fought over: the cap holds, nothing is re-applied",
                Read {
                    drift_corrections: &fought,
                    ..read_latest(&rolled_back, &ready, Some("r9"))
                },
                After::Fight {
                    fields: vec!["source_revision_config".into()],
                },
            ),
        ]);
    }

    #[test]
    fn after_read_a_revision_known_or_unread_is_drift_as_before() {
        let ready = ready_status();
        let in_history = AgentDeploymentStatus {
            revisions: vec![RevisionSummary {
                id: "r8".into(),
                ..Default::default()
            }],
            ..ready_status()
        };
        let rolled_back = rolled_back_patch();
        assert_after(vec![
            (
                "a revision of the kept history is known: drift as before",
                read_latest(&rolled_back, &in_history, Some("r8")),
                After::Patch { drift: true },
            ),
            (
                "the same revision the status follows: drift as before",
                read_latest(&rolled_back, &ready, Some("r")),
                After::Patch { drift: true },
            ),
            (
                "no latest revision read: drift as before",
                read_latest(&rolled_back, &ready, None),
                After::Patch { drift: true },
            ),
        ]);
    }

    #[test]
    fn after_read_a_change_made_here_wins_over_a_revision_made_outside() {
        let ready = ready_status();
        let empty = DeploymentPatch::default();
        let rolled_back = rolled_back_patch();
        assert_after(vec![
            (
                "a redeploy from outside (equal to the spec): follow it, noted",
                read_latest(&empty, &ready, Some("r9")),
                After::FollowOutside {
                    revision: "r9".into(),
                },
            ),
            (
                "the spec changed since: the spec wins, no report",
                Read {
                    generation: Some(2),
                    ..read_latest(&rolled_back, &ready, Some("r9"))
                },
                After::Patch { drift: false },
            ),
            (
                "a referenced Secret changed: patch, no report",
                Read {
                    secrets_changed_here: true,
                    ..read_latest(&rolled_back, &ready, Some("r9"))
                },
                After::Patch { drift: false },
            ),
            (
                "a redeploy is requested here: redeploy, no report",
                Read {
                    redeploy_requested: true,
                    ..read_latest(&empty, &ready, Some("r9"))
                },
                After::Redeploy,
            ),
            (
                "created or adopted by this pass: its revisions are not outside",
                Read {
                    obtained_now: true,
                    ..read_latest(&empty, &ready, Some("r9"))
                },
                After::Follow,
            ),
        ]);
    }

    #[test]
    fn made_outside_is_a_latest_revision_neither_made_nor_followed() {
        let mut s = status(reason::REVISION_DEPLOYED, TRUE, Some("DEPLOYED"));
        s.revisions = vec![RevisionSummary {
            id: "r0".into(),
            ..Default::default()
        }];
        assert_eq!(made_outside(&s, Some("r9")), Some("r9"));
        assert_eq!(made_outside(&s, Some("r")), None, "followed");
        assert_eq!(made_outside(&s, Some("r0")), None, "in the history");
        assert_eq!(made_outside(&s, None), None, "no revision read");
        s.latest_revision_id = None;
        assert_eq!(made_outside(&s, Some("r9")), None, "nothing known yet");
    }

    #[test]
    fn rejection_backoff_doubles_to_its_cap() {
        assert_eq!(rejection_backoff(1), Duration::from_secs(600));
        assert_eq!(rejection_backoff(2), Duration::from_secs(1200));
        assert_eq!(rejection_backoff(5), REJECTION_RETRY_MAX);
        assert_eq!(rejection_backoff(60), REJECTION_RETRY_MAX);
    }

    #[test]
    fn polls_wait_for_the_expected_end_within_bounds() {
        let s = Duration::from_secs;
        assert_eq!(next_poll(s(2), None, s(30)), s(2));
        assert_eq!(next_poll(s(2), Some(s(9)), s(30)), s(9));
        assert_eq!(next_poll(s(5), Some(s(1)), s(30)), s(5));
        assert_eq!(next_poll(s(2), Some(s(600)), s(30)), s(30));
    }

    #[test]
    fn values_changed_outside_are_corrected_at_the_pace_of_a_change() {
        // (changed here, remote differs, unheld, wait) → correct
        let cases = [
            ((false, true, false, false), true),
            ((false, true, false, true), false),
            ((false, true, true, true), true),
            ((true, true, false, false), false),
            ((false, false, false, false), false),
        ];
        for ((here, differs, unheld, wait), want) in cases {
            assert_eq!(
                correct_outside_change(here, differs, unheld, wait),
                want,
                "{here} {differs} {unheld} {wait}"
            );
        }
    }

    #[test]
    fn secrets_never_sent_by_this_object_are_sent_only_when_the_service_differs_or_cannot_tell() {
        let cases = [
            ((Some("h1"), "h1", None), false),
            ((Some("h1"), "h2", Some(false)), true),
            ((Some("h1"), "h1", Some(true)), false),
            ((None, "h1", None), true),
            ((None, "h1", Some(true)), true),
            ((None, "h1", Some(false)), false),
        ];
        for ((sent, desired, remote), want) in cases {
            assert_eq!(
                secrets_changed_here(sent, desired, remote),
                want,
                "{sent:?} {desired} {remote:?}"
            );
        }
    }
}
