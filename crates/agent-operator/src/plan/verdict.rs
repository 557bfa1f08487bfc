//! The pure decisions of the follow step, once the revision is known: its
//! outcome, the progress deadline, `UNUSED`, whether the failure log is
//! read, the events of a change of revision, the report of a revision made
//! outside the operator, the Warning of a pass, and the requeue. No IO here; each function is a table of cases in the tests.
//! Sources: docs/control-plane-api.md "Revision" (statuses), "Logs",
//! "Unused deployments", "Polling".

use super::logtail::FailureLog;
use super::status::{Outcome, revision_outcome};
use crate::api::conditions::reason;
use crate::api::deployment::{AgentDeploymentStatus, PAUSED_ANNOTATION};
use crate::controlplane::types::RevisionStatus;

/// Deployment status of a deployment without traffic for a long time
/// (docs/control-plane-api.md "Deployment": `status`; "Unused deployments").
pub const UNUSED: &str = "UNUSED";

/// The deployment statuses of a deployment being deleted (docs/control-plane-api.md
/// "Deployment": `AWAITING_DELETE`, and `AWAITING_FINAL_DELETE` listed by
/// the Terraform provider; docs/control-plane-api.md, "Deployment").
pub const DELETING_STATUSES: [&str; 2] = ["AWAITING_DELETE", "AWAITING_FINAL_DELETE"];

/// True when a deployment `status` says the deployment is being deleted
/// ([`DELETING_STATUSES`]).
pub fn is_deleting(status: Option<&str>) -> bool {
    status.is_some_and(|s| DELETING_STATUSES.contains(&s))
}

/// True when the AgentControlPlane's API key may be sent to the deployment
/// URL: only when the control plane chose that URL. A `customUrl` set in the
/// spec (`external_docker`) is a URL anyone who may edit the resource picks,
/// and the control plane key must not travel there: such a deployment sends
/// no key unless `spec.verify.apiKeySecretRef` names one.
pub fn control_plane_key_allowed(spec: &crate::api::AgentDeploymentSpec) -> bool {
    spec.source_config
        .custom_url
        .as_deref()
        .is_none_or(|u| u.trim().is_empty())
}

/// What the status and the Warning event say about an `UNUSED` deployment.
pub const UNUSED_NOTE: &str = "the control plane shows it UNUSED (no traffic for a long time); \
     the service removes cloud deployments that stay unused";

/// The failure reasons of a verification, as stored in
/// `status.verification.outcome`.
pub const VERIFICATION_FAILURE_REASONS: [&str; 12] = [
    reason::AGENT_SERVER_UNREACHABLE,
    reason::AGENT_SERVER_UNAUTHORIZED,
    reason::ASSISTANTS_MISSING,
    reason::ASSISTANT_NOT_FOUND,
    reason::RUN_FAILED,
    reason::EXPECTATION_NOT_MET,
    reason::SUITE_FAILED,
    reason::DATASET_UNAVAILABLE,
    reason::SUITE_UNREADABLE,
    reason::REVISION_NOT_ACTIVE,
    reason::SECRET_NOT_FOUND,
    reason::HOST_NOT_ALLOWED,
];

/// True for the reasons whose Warning event `Pass::verify` publishes
/// itself (`VerificationFailed`, once per failure), not `finish`: `Verifying`
/// and the [`VERIFICATION_FAILURE_REASONS`].
pub fn is_verification_reason(r: &str) -> bool {
    r == reason::VERIFYING || VERIFICATION_FAILURE_REASONS.contains(&r)
}

/// The outcome of the latest revision `latest` in `status` (`None`: not
/// known, as for a revision this pass started).
pub fn outcome(latest: Option<&str>, status: Option<&RevisionStatus>) -> Outcome {
    match (latest, status) {
        (Some(rid), Some(RevisionStatus::Skipped)) => Outcome::Progressing {
            reason: reason::REVISION_IN_PROGRESS,
            message: format!("revision {rid} was SKIPPED; waiting for the newer revision"),
        },
        (Some(rid), Some(s)) => revision_outcome(rid, s),
        (Some(rid), None) => Outcome::Progressing {
            reason: reason::REVISION_IN_PROGRESS,
            message: format!("revision {rid} started"),
        },
        _ => Outcome::Progressing {
            reason: reason::REVISION_IN_PROGRESS,
            message: "the deployment has no revision yet".into(),
        },
    }
}

/// `Stalled/ProgressDeadlineExceeded` when the revision `latest` is still in
/// progress `age_s` seconds after its creation at `created_at`, more than
/// `deadline_s` (`spec.progressDeadlineSeconds`); `None` otherwise. The
/// message does not change while the revision's status does not, so a
/// steady overdue revision causes no status write.
pub fn overdue(
    latest: Option<&str>,
    status: Option<&RevisionStatus>,
    created_at: Option<&str>,
    age_s: Option<f64>,
    deadline_s: u32,
    slow_poll_s: u64,
) -> Option<Outcome> {
    let (Some(rid), Some(s)) = (latest, status) else {
        return None;
    };
    if !s.is_in_progress() || !age_s.is_some_and(|age| age > f64::from(deadline_s)) {
        return None;
    }
    Some(Outcome::Stalled {
        reason: reason::PROGRESS_DEADLINE_EXCEEDED,
        message: format!(
            "revision {rid} is still {s} more than {deadline_s} s after it was created \
             at {} (spec.progressDeadlineSeconds); still polled, every {slow_poll_s} s, until \
             it ends",
            created_at.unwrap_or("?"),
        ),
    })
}

/// A deployment the control plane shows `UNUSED`: its Ready message says so,
/// and a Warning event tells it once, when it becomes `UNUSED`.
pub fn unused(
    outcome: Outcome,
    id: &str,
    now: Option<&str>,
    before: Option<&str>,
) -> (Outcome, Option<Note>) {
    let unused = now == Some(UNUSED);
    let outcome = match outcome {
        Outcome::Ready { reason, message } if unused => Outcome::Ready {
            reason,
            message: format!("{message}; {UNUSED_NOTE}"),
        },
        other => other,
    };
    let event = (unused && before != Some(UNUSED)).then(|| {
        (
            EventType::Warning,
            "DeploymentUnused",
            format!("remote deployment {id}: {UNUSED_NOTE}"),
        )
    });
    (outcome, event)
}

/// The log that explains a failed revision, read once, by the pass that
/// first sees the failure (`previous` still shows another revision or
/// status); `None`: later passes keep the message.
pub fn failure_log(
    outcome: &Outcome,
    previous: &AgentDeploymentStatus,
    latest: Option<&str>,
    status: Option<&RevisionStatus>,
) -> Option<FailureLog> {
    if outcome.reason() != reason::REVISION_FAILED || !matches!(outcome, Outcome::Stalled { .. }) {
        return None;
    }
    let newly_ended = previous.latest_revision_id.as_deref() != latest
        || previous.revision_status.as_deref() != status.map(|s| s.as_str());
    latest?;
    status.and_then(FailureLog::of).filter(|_| newly_ended)
}

/// True for the outcome of a revision that failed or was interrupted.
pub fn failed(outcome: &Outcome) -> bool {
    matches!(
        outcome,
        Outcome::Stalled { reason, .. }
            if *reason == reason::REVISION_FAILED || *reason == reason::REVISION_INTERRUPTED
    )
}

/// The Normal event of a revision that became DEPLOYED, or the Warning of
/// one that failed, when the revision or its status changed.
pub fn revision_event(outcome: &Outcome, revision_changed: bool) -> Option<Note> {
    if !revision_changed {
        return None;
    }
    match outcome {
        Outcome::Ready { message, .. } => {
            Some((EventType::Normal, "RevisionDeployed", message.clone()))
        }
        Outcome::Stalled { message, .. } if failed(outcome) => {
            Some((EventType::Warning, "RevisionFailed", message.clone()))
        }
        _ => None,
    }
}

/// The event of the first revision of a deployment this resource created,
/// which is the create's one event (the create publishes none of its own):
/// `event` with its note naming the deployment `id` (`name`) first.
pub fn of_created(event: Note, id: &str, name: &str) -> Note {
    let (type_, reason, note) = event;
    (
        type_,
        reason,
        format!("created remote deployment {id} ({name}); {note}"),
    )
}

/// True while the first revision of a deployment this resource created is
/// in progress: this pass created it (`created`), or the status last
/// written says `Creating` (`previous_reason`, the reason of its `Ready`
/// condition).
pub fn first_revision(created: bool, previous_reason: Option<&str>) -> bool {
    created || previous_reason == Some(reason::CREATING)
}

/// The outcome of a pass while the first revision of a deployment this
/// resource created is in progress ([`first_revision`]): a revision in
/// progress reads `Creating`, naming the deployment (`id`, `name`), so the
/// STATUS column says what happens, and the pass that sees the revision end
/// knows its event is the create's ([`of_created`]). Any other outcome is
/// kept.
pub fn creating(outcome: Outcome, first: bool, id: &str, name: &str) -> Outcome {
    match outcome {
        Outcome::Progressing { reason: r, message }
            if first && r == reason::REVISION_IN_PROGRESS =>
        {
            Outcome::Progressing {
                reason: reason::CREATING,
                message: format!("created remote deployment {id} ({name}); {message}"),
            }
        }
        other => other,
    }
}

/// Reason of the Normal event of a revision made outside the operator that
/// it follows (see [`followed_outside`]).
pub const OUT_OF_BAND_REVISION: &str = "OutOfBandRevision";

/// How a revision made outside the operator is named in its messages.
const OUTSIDE: &str = "which the operator did not make (a rollback or a redeploy from agentctl, \
     the UI or the CLI)";

/// The outcome of the pass that re-applies the spec over revision `over`,
/// made outside the operator (`decide::After::Reapply`): `outcome`, its
/// message extended with the revision it replaces and how to keep such a
/// revision (pause the resource, or put its configuration in the spec).
/// Only this pass says so; the following polls report the new revision.
pub fn reapplied(outcome: Outcome, over: &str) -> Outcome {
    let note = |m: String| {
        format!(
            "{m}; it re-applies the spec over revision {over}, {OUTSIDE}; to keep a rollback, \
             set the annotation {PAUSED_ANNOTATION}: \"true\" before it, or put its \
             configuration in the spec"
        )
    };
    match outcome {
        Outcome::Ready { reason, message } => Outcome::Ready {
            reason,
            message: note(message),
        },
        Outcome::Progressing { reason, message } => Outcome::Progressing {
            reason,
            message: note(message),
        },
        Outcome::Stalled { reason, message } => Outcome::Stalled {
            reason,
            message: note(message),
        },
        paused @ Outcome::Paused { .. } => paused,
    }
}

/// The note of the `DriftCorrected` event of a PATCH that re-applies the
/// spec (`fields`) of remote deployment `id` over revision `over`, made
/// outside the operator; `new_revision`: the PATCH starts a revision
/// (`desired::creates_revision`).
pub fn reapplied_note(fields: &[&str], id: &str, over: &str, new_revision: bool) -> String {
    format!(
        "{} of remote deployment {id} changed by revision {over}, {OUTSIDE}; restored: the \
         spec is re-applied{}",
        fields.join(", "),
        if new_revision {
            ", which starts a new revision"
        } else {
            ""
        }
    )
}

/// The Normal event of a revision `rid` made outside the operator on a
/// deployment that equals the spec (a redeploy, or a rollback to the
/// spec's configuration; `decide::After::FollowOutside`): it is followed
/// like the operator's own.
pub fn followed_outside(rid: &str) -> Note {
    (
        EventType::Normal,
        OUT_OF_BAND_REVISION,
        format!(
            "revision {rid} was made outside the operator (a redeploy, or a rollback from \
             agentctl, the UI or the CLI); the remote deployment equals the spec, so it is \
             followed"
        ),
    )
}

/// The Warning event of a pass ending with `outcome`, once: none when
/// `shown(reason, message)` says the object already shows it, nor for the
/// reasons that have events of their own or are no problem.
pub fn warning(
    outcome: &Outcome,
    shown: impl Fn(&str, &str) -> bool,
) -> Option<(&'static str, String)> {
    match outcome {
        Outcome::Stalled { reason, message } | Outcome::Progressing { reason, message }
            if !shown(reason, message) =>
        {
            (*reason != reason::REVISION_IN_PROGRESS
                && *reason != reason::CREATING
                && *reason != reason::REMOTE_DELETED
                && *reason != reason::REVISION_FAILED
                && *reason != reason::REVISION_INTERRUPTED
                && !is_verification_reason(reason))
            .then(|| (*reason, message.clone()))
        }
        _ => None,
    }
}

/// An event a pass publishes after its writes: type, reason, note.
pub type Note = (EventType, &'static str, String);

/// The type of an event: Kubernetes' `Normal` or `Warning`. The plan's own,
/// so that `plan/` imports nothing of Kubernetes; the event written at the
/// edge (`controller::report::core_event`) carries its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// Something went as intended.
    Normal,
    /// Something a person may need to look at.
    Warning,
}

/// When the follow step looks again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Verification set the delay.
    Verify,
    /// A revision in progress: poll on its backoff.
    Poll,
    /// A revision past its deadline: poll slowly.
    Slow,
    /// Steady: the drift check of the resync period.
    Resync,
}

/// The requeue after a pass ending with `outcome`.
pub fn next(outcome: &Outcome, overdue: bool, verify_wait: bool) -> Next {
    match outcome {
        _ if verify_wait => Next::Verify,
        Outcome::Progressing { .. } => Next::Poll,
        _ if overdue => Next::Slow,
        _ => Next::Resync,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready() -> Outcome {
        outcome(Some("r1"), Some(&RevisionStatus::Deployed))
    }

    #[test]
    fn outcome_of_the_revision() {
        assert_eq!(ready().reason(), reason::REVISION_DEPLOYED);
        let skipped = outcome(Some("r1"), Some(&RevisionStatus::Skipped));
        assert!(skipped.message().contains("SKIPPED"));
        assert_eq!(outcome(Some("r1"), None).message(), "revision r1 started");
        assert_eq!(
            outcome(None, None).message(),
            "the deployment has no revision yet"
        );
        let failed_ = outcome(Some("r1"), Some(&RevisionStatus::BuildFailed));
        assert!(failed(&failed_));
    }

    #[test]
    fn deadline_only_in_progress_and_past_it() {
        let building = RevisionStatus::Building;
        let cases = [
            (Some(&building), Some(601.0), true),
            (Some(&building), Some(599.0), false),
            (Some(&building), None, false),
            (Some(&RevisionStatus::Deployed), Some(9999.0), false),
            (None, Some(9999.0), false),
        ];
        for (status, age, stalled) in cases {
            let o = overdue(Some("r1"), status, Some("t"), age, 600, 120);
            assert_eq!(o.is_some(), stalled, "{status:?} {age:?}");
        }
        let o = overdue(
            Some("r1"),
            Some(&building),
            Some("t"),
            Some(700.0),
            600,
            120,
        )
        .unwrap();
        assert_eq!(o.reason(), reason::PROGRESS_DEADLINE_EXCEEDED);
        assert!(o.message().contains("every 120 s"));
    }

    #[test]
    fn unused_is_told_once_and_noted_on_ready() {
        let (o, e) = unused(ready(), "d1", Some(UNUSED), Some("DEPLOYED"));
        assert!(o.message().ends_with(UNUSED_NOTE));
        assert_eq!(e.map(|e| e.1), Some("DeploymentUnused"));
        let (_, e) = unused(ready(), "d1", Some(UNUSED), Some(UNUSED));
        assert!(e.is_none(), "not repeated");
        let (o, e) = unused(ready(), "d1", Some("DEPLOYED"), None);
        assert!(!o.message().contains(UNUSED_NOTE));
        assert!(e.is_none());
    }

    #[test]
    fn failure_log_is_read_by_the_first_pass_that_sees_it() {
        let failed_ = outcome(Some("r1"), Some(&RevisionStatus::BuildFailed));
        let before = AgentDeploymentStatus {
            latest_revision_id: Some("r1".into()),
            revision_status: Some("BUILDING".into()),
            ..Default::default()
        };
        let s = Some(&RevisionStatus::BuildFailed);
        assert_eq!(
            failure_log(&failed_, &before, Some("r1"), s),
            Some(FailureLog::Build)
        );
        let seen = AgentDeploymentStatus {
            revision_status: Some("BUILD_FAILED".into()),
            ..before.clone()
        };
        assert_eq!(failure_log(&failed_, &seen, Some("r1"), s), None);
        assert_eq!(failure_log(&ready(), &before, Some("r1"), s), None);
    }

    #[test]
    fn events_of_a_revision_change() {
        assert_eq!(
            revision_event(&ready(), true).map(|e| e.1),
            Some("RevisionDeployed")
        );
        assert!(revision_event(&ready(), false).is_none());
        let f = outcome(Some("r1"), Some(&RevisionStatus::DeployFailed));
        assert_eq!(
            revision_event(&f, true).map(|e| e.1),
            Some("RevisionFailed")
        );
        assert!(revision_event(&outcome(Some("r1"), None), true).is_none());
        let first = revision_event(&ready(), true).map(|e| of_created(e, "d1", "app"));
        let (type_, reason, note) = first.expect("an event");
        assert_eq!((type_, reason), (EventType::Normal, "RevisionDeployed"));
        assert!(
            note.starts_with("created remote deployment d1 (app); revision "),
            "{note}"
        );
    }

    #[test]
    fn warnings_once_and_not_for_progress() {
        let never = |_: &str, _: &str| false;
        let stalled = Outcome::Stalled {
            reason: reason::INVALID_SPEC,
            message: "m".into(),
        };
        assert_eq!(
            warning(&stalled, never).map(|w| w.0),
            Some(reason::INVALID_SPEC)
        );
        assert!(warning(&stalled, |_, _| true).is_none(), "already shown");
        assert!(warning(&outcome(Some("r1"), None), never).is_none());
        let f = outcome(Some("r1"), Some(&RevisionStatus::DeployFailed));
        assert!(warning(&f, never).is_none(), "RevisionFailed has its own");
        assert!(warning(&ready(), never).is_none());
    }

    #[test]
    fn a_revision_made_outside_is_named_when_the_spec_is_re_applied() {
        let started = reapplied(outcome(Some("r4"), None), "r3");
        assert_eq!(started.reason(), reason::REVISION_IN_PROGRESS);
        for words in [
            "revision r4 started; it re-applies the spec over revision r3",
            "which the operator did not make (a rollback",
            "agentserver.dev/paused: \"true\"",
            "put its configuration in the spec",
        ] {
            assert!(
                started.message().contains(words),
                "{words}: {}",
                started.message()
            );
        }
        let paused = Outcome::Paused {
            message: "m".into(),
        };
        assert_eq!(reapplied(paused.clone(), "r3"), paused);

        let note = reapplied_note(&["source_revision_config"], "d1", "r3", true);
        for words in [
            "source_revision_config of remote deployment d1 changed by revision r3",
            "which the operator did not make",
            "the spec is re-applied, which starts a new revision",
        ] {
            assert!(note.contains(words), "{words}: {note}");
        }
        let note = reapplied_note(&["source_config.build_on_push"], "d1", "r3", false);
        assert!(note.ends_with("the spec is re-applied"), "{note}");

        let (kind, why, note) = followed_outside("r5");
        assert_eq!((kind, why), (EventType::Normal, OUT_OF_BAND_REVISION));
        assert!(
            note.contains("revision r5") && note.contains("followed"),
            "{note}"
        );
    }

    #[test]
    fn requeue_after_follow() {
        let progressing = outcome(Some("r1"), None);
        assert_eq!(next(&progressing, false, false), Next::Poll);
        assert_eq!(next(&ready(), false, true), Next::Verify);
        assert_eq!(next(&ready(), false, false), Next::Resync);
        let late = Outcome::Stalled {
            reason: reason::PROGRESS_DEADLINE_EXCEEDED,
            message: "m".into(),
        };
        assert_eq!(next(&late, true, false), Next::Slow);
    }

    #[test]
    fn the_first_revision_of_a_create_reads_creating_until_it_ends() {
        assert!(first_revision(true, None));
        assert!(first_revision(false, Some(reason::CREATING)));
        assert!(!first_revision(false, Some(reason::REVISION_IN_PROGRESS)));
        assert!(!first_revision(false, None));
        let in_progress = || Outcome::Progressing {
            reason: reason::REVISION_IN_PROGRESS,
            message: "revision r1 is BUILDING".into(),
        };
        match creating(in_progress(), true, "d-1", "agent") {
            Outcome::Progressing { reason: r, message } => {
                assert_eq!(r, reason::CREATING);
                assert_eq!(
                    message,
                    "created remote deployment d-1 (agent); revision r1 is BUILDING"
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            creating(in_progress(), false, "d-1", "agent"),
            in_progress()
        );
        let ready = Outcome::Ready {
            reason: reason::REVISION_DEPLOYED,
            message: "revision r1 is DEPLOYED".into(),
        };
        assert_eq!(creating(ready.clone(), true, "d-1", "agent"), ready);
    }
}
