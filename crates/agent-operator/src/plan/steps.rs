//! The small rules of the AgentDeployment pass's steps, each a pure
//! function with its table of cases: what a name lookup before a create
//! means (`obtain`), whether a failed create left nothing behind, what a
//! remote delete outside the operator leads to, what a PATCH read back
//! leaves unheld, whether the latest revision is read (`follow`), the
//! bookkeeping of a rejected request (the clock is an input), and the id
//! and annotations of the report (`finish`).
//! Sources: docs/control-plane-api.md "Requests", "Polling", "Revision".

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::decide::rejection_backoff;
use super::desired;
use crate::api::deployment::{
    CREATE_PENDING_ANNOTATION, DEPLOYMENT_ID_ANNOTATION, RejectedRequest, RemoteDeletionPolicy,
};
use crate::controlplane::types::{DeploymentPatch, RevisionStatus};

/// What the deployments found by name before a create mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByName {
    /// None: create it.
    Create,
    /// One, after an interrupted create (the marker is set): the deployment
    /// that create made.
    Recovered,
    /// One, without a create pending: a name taken by someone else.
    Conflict,
    /// Several after an interrupted create: which one it made is unknown.
    CreateOutcomeUnknown(usize),
    /// Several without a create pending: a name taken by others.
    ConflictMany(usize),
}

/// The meaning of `found` deployments with the wanted name, when a create
/// is `pending` (the create-pending marker is on the object) or not.
pub fn by_name(found: usize, pending: bool) -> ByName {
    match (found, pending) {
        (0, _) => ByName::Create,
        (1, true) => ByName::Recovered,
        (1, false) => ByName::Conflict,
        (n, true) => ByName::CreateOutcomeUnknown(n),
        (n, false) => ByName::ConflictMany(n),
    }
}

/// True when a failed create certainly created nothing: the service
/// answered with a 4xx other than 429. No answer, a 429 or a 5xx leave the
/// outcome unknown (the create-pending marker stays).
pub fn nothing_created(http_status: Option<u16>) -> bool {
    matches!(http_status, Some(s) if (400..500).contains(&s) && s != 429)
}

/// What a pass does when the remote deployment it names answers 404.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemoteGone {
    /// Stop with `Stalled/RemoteDeleted` until a human decides.
    Stall,
    /// Forget the id and create a new deployment on the next pass.
    Recreate,
}

/// The policy for a remote deployment deleted outside the operator: an
/// adopted deployment (`spec.deploymentId`) is never re-created, whatever
/// `spec.remoteDeletionPolicy` says.
pub fn remote_deleted(policy: RemoteDeletionPolicy, adopted: bool) -> RemoteGone {
    if policy == RemoteDeletionPolicy::Stall || adopted {
        RemoteGone::Stall
    } else {
        RemoteGone::Recreate
    }
}

/// The fingerprint of what a PATCH read back does not hold (`again`, the
/// PATCH still needed after its answer), recorded as `status.unheldPatch`;
/// `None` when the service holds every value sent.
pub fn unheld(again: &DeploymentPatch, secrets_hash: &str) -> Option<String> {
    (!again.is_empty()).then(|| desired::patch_fingerprint(again, secrets_hash))
}

/// Where the follow step takes the latest revision from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatestFrom {
    /// The deployment has no revision yet.
    None,
    /// The revision the act step read or a redeploy answered with.
    Given,
    /// Status shows it ended (not SKIPPED): not read again.
    KnownEnded,
    /// This pass started it: its next poll reads it.
    StartedHere,
    /// GET it.
    Read,
}

/// What the follow step knows of the latest revision before any request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LatestKnown<'a> {
    /// The deployment's latest revision id, as the act step knows it.
    pub latest: Option<&'a str>,
    /// The id of the revision the act step read or started, if any.
    pub given: Option<&'a str>,
    /// `status.latestRevisionId` as last written.
    pub recorded: Option<&'a str>,
    /// `status.revisionStatus` as last written.
    pub recorded_status: Option<&'a str>,
}

impl LatestKnown<'_> {
    /// A revision the pass's mutation started, without an answer that
    /// carries it (a PATCH or a create): a new latest id.
    pub fn started_here(&self) -> bool {
        self.given.is_none() && self.latest.is_some() && self.latest != self.recorded
    }

    /// The revision started by the pass, with or without an answer that
    /// carries it: remembered for the poll timing.
    pub fn started(&self) -> Option<&str> {
        if self.started_here() {
            self.latest
        } else {
            self.given.filter(|g| Some(*g) != self.recorded)
        }
    }

    /// Where the latest revision comes from ([`LatestFrom`]).
    pub fn source(&self) -> LatestFrom {
        let known_ended = self.recorded == self.latest
            && self
                .recorded_status
                .map(|s| RevisionStatus::from(s.to_owned()))
                .is_some_and(|s| !s.is_in_progress() && s != RevisionStatus::Skipped);
        match self.latest {
            None => LatestFrom::None,
            Some(rid) if self.given == Some(rid) => LatestFrom::Given,
            Some(_) if known_ended => LatestFrom::KnownEnded,
            Some(_) if self.started_here() => LatestFrom::StartedHere,
            Some(_) => LatestFrom::Read,
        }
    }
}

/// The record of a definite rejection of `operation` with the desired
/// state's `fingerprint` at `now`, and the delay before it may be sent
/// again: the attempts count on from the `previous` record of the same
/// fingerprint, and start again at 1 for another one.
pub fn rejection(
    previous: Option<&RejectedRequest>,
    operation: &str,
    fingerprint: &str,
    now: Timestamp,
) -> (RejectedRequest, Duration) {
    let attempts = previous
        .filter(|r| r.fingerprint == fingerprint)
        .map_or(1, |r| r.attempts.saturating_add(1));
    let delay = rejection_backoff(attempts);
    let seconds = i64::try_from(delay.as_secs()).unwrap_or(i64::MAX);
    let retry_at = now
        .checked_add(SignedDuration::from_secs(seconds))
        .unwrap_or(now);
    let record = RejectedRequest {
        operation: operation.to_owned(),
        fingerprint: fingerprint.to_owned(),
        attempts,
        retry_after_time: retry_at.to_string(),
    };
    (record, delay)
}

/// The id a status may carry: a pass never drops an id the object already
/// had (server-side apply would remove it); a pass that forgets the id
/// writes its status without this rule.
pub fn kept_id(decided: Option<String>, previous: Option<&str>) -> Option<String> {
    decided.or_else(|| previous.map(str::to_owned))
}

/// The annotation changes of a report: once the id is known (in the status
/// the report writes first), the create-pending marker is replaced by the
/// id annotation; an object that already names `id` and has no marker keeps
/// its annotations.
pub fn id_annotations(
    id: Option<&str>,
    create_pending: bool,
    annotated: Option<&str>,
) -> Vec<(&'static str, Option<String>)> {
    match id {
        Some(id) if create_pending || annotated != Some(id) => vec![
            (CREATE_PENDING_ANNOTATION, None),
            (DEPLOYMENT_ID_ANNOTATION, Some(id.to_owned())),
        ],
        _ => Vec::new(),
    }
}

/// True when an AgentDeployment without its finalizer gets it in the
/// metadata write that sets the create-pending marker, before the POST it
/// guards, instead of in a write of its own: the object names no
/// deployment (no `status.deploymentId`, no `spec.deploymentId`, no id
/// annotation, no marker), so nothing remote is to be cleaned up until
/// that create. Otherwise the finalizer is added alone, before any request
/// of the pass.
pub fn finalizer_with_marker(
    recorded_id: bool,
    adopts: bool,
    annotated_id: bool,
    create_pending: bool,
) -> bool {
    !(recorded_id || adopts || annotated_id || create_pending)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_lookup_before_a_create_is_read_with_the_marker() {
        let cases = [
            (0, false, ByName::Create),
            (0, true, ByName::Create),
            (1, true, ByName::Recovered),
            (1, false, ByName::Conflict),
            (3, true, ByName::CreateOutcomeUnknown(3)),
            (2, false, ByName::ConflictMany(2)),
        ];
        for (found, pending, want) in cases {
            assert_eq!(
                by_name(found, pending),
                want,
                "{found} found, pending {pending}"
            );
        }
    }

    #[test]
    fn only_an_answered_4xx_other_than_429_created_nothing() {
        let cases = [
            (None, false),
            (Some(400), true),
            (Some(409), true),
            (Some(422), true),
            (Some(429), false),
            (Some(499), true),
            (Some(500), false),
            (Some(503), false),
            (Some(302), false),
        ];
        for (status, want) in cases {
            assert_eq!(nothing_created(status), want, "{status:?}");
        }
    }

    #[test]
    fn an_adopted_or_stall_policy_deployment_is_never_recreated() {
        use RemoteDeletionPolicy::{Recreate, Stall};
        let cases = [
            (Recreate, false, RemoteGone::Recreate),
            (Recreate, true, RemoteGone::Stall),
            (Stall, false, RemoteGone::Stall),
            (Stall, true, RemoteGone::Stall),
        ];
        for (policy, adopted, want) in cases {
            assert_eq!(
                remote_deleted(policy, adopted),
                want,
                "{policy:?} {adopted}"
            );
        }
    }

    #[test]
    fn a_read_back_with_nothing_left_is_held() {
        let held = DeploymentPatch::default();
        assert_eq!(unheld(&held, "h"), None);
        let again = DeploymentPatch {
            secrets: Some(Vec::new()),
            ..Default::default()
        };
        let fingerprint = unheld(&again, "h").expect("a value left is unheld");
        assert_eq!(fingerprint, desired::patch_fingerprint(&again, "h"));
        assert_ne!(unheld(&again, "other hash"), Some(fingerprint));
    }

    fn known<'a>(
        latest: Option<&'a str>,
        given: Option<&'a str>,
        recorded: Option<&'a str>,
        recorded_status: Option<&'a str>,
    ) -> LatestKnown<'a> {
        LatestKnown {
            latest,
            given,
            recorded,
            recorded_status,
        }
    }

    /// Asserts where each case's latest revision is known from, and the
    /// revision started by this pass, if any.
    fn assert_latest(cases: Vec<(LatestKnown<'_>, LatestFrom, Option<&str>)>) {
        for (k, from, started) in cases {
            assert_eq!(k.source(), from, "{k:?}");
            assert_eq!(k.started(), started, "{k:?}");
        }
    }

    /// Not read: there is none, the act step gave it, or the status shows
    /// it ended.
    #[test]
    fn the_latest_revision_is_not_read_when_given_or_known_ended() {
        assert_latest(vec![
            // No revision at all.
            (known(None, None, None, None), LatestFrom::None, None),
            // The act step read it (a poll) or a redeploy answered with it.
            (
                known(Some("r2"), Some("r2"), Some("r1"), Some("DEPLOYED")),
                LatestFrom::Given,
                Some("r2"),
            ),
            (
                known(Some("r1"), Some("r1"), Some("r1"), Some("BUILDING")),
                LatestFrom::Given,
                None,
            ),
            // Status shows it ended: not read again.
            (
                known(Some("r1"), None, Some("r1"), Some("DEPLOYED")),
                LatestFrom::KnownEnded,
                None,
            ),
            (
                known(Some("r1"), None, Some("r1"), Some("BUILD_FAILED")),
                LatestFrom::KnownEnded,
                None,
            ),
        ]);
    }

    /// Read: a SKIPPED or in-progress one, one started here (by its next
    /// poll), or a newer one than the act step read.
    #[test]
    fn the_latest_revision_is_read_only_when_nothing_else_tells() {
        assert_latest(vec![
            // A SKIPPED or in-progress one is read.
            (
                known(Some("r1"), None, Some("r1"), Some("SKIPPED")),
                LatestFrom::Read,
                None,
            ),
            (
                known(Some("r1"), None, Some("r1"), Some("DEPLOYING")),
                LatestFrom::Read,
                None,
            ),
            (
                known(Some("r1"), None, Some("r1"), None),
                LatestFrom::Read,
                None,
            ),
            // A PATCH or a create started a new one: its next poll reads it.
            (
                known(Some("r2"), None, Some("r1"), Some("DEPLOYED")),
                LatestFrom::StartedHere,
                Some("r2"),
            ),
            (
                known(Some("r1"), None, None, None),
                LatestFrom::StartedHere,
                Some("r1"),
            ),
            // The act step read an older one than the latest: read it.
            (
                known(Some("r3"), Some("r2"), Some("r3"), Some("BUILDING")),
                LatestFrom::Read,
                Some("r2"),
            ),
        ]);
    }

    #[test]
    fn rejections_of_one_fingerprint_count_on_and_back_off_from_now() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let previous = |fingerprint: &str, attempts| RejectedRequest {
            operation: "patch deployment".into(),
            fingerprint: fingerprint.into(),
            attempts,
            retry_after_time: String::new(),
        };
        let cases = [
            (None, 1),
            (Some(previous("f", 1)), 2),
            (Some(previous("f", 4)), 5),
            (Some(previous("other", 4)), 1),
            (Some(previous("f", u32::MAX)), u32::MAX),
        ];
        for (prev, attempts) in cases {
            let (record, delay) = rejection(prev.as_ref(), "create deployment", "f", now);
            assert_eq!(record.attempts, attempts, "{prev:?}");
            assert_eq!(record.operation, "create deployment");
            assert_eq!(record.fingerprint, "f");
            assert_eq!(delay, rejection_backoff(attempts));
            let secs = i64::try_from(delay.as_secs()).unwrap();
            let at = now.checked_add(SignedDuration::from_secs(secs)).unwrap();
            assert_eq!(record.retry_after_time, at.to_string());
        }
    }

    #[test]
    fn an_id_is_kept_and_the_marker_swapped_only_once_the_id_is_known() {
        assert_eq!(kept_id(None, Some("d1")), Some("d1".into()));
        assert_eq!(kept_id(Some("d2".into()), Some("d1")), Some("d2".into()));
        assert_eq!(kept_id(None, None), None);
        let swap = |id: &str| {
            vec![
                (CREATE_PENDING_ANNOTATION, None),
                (DEPLOYMENT_ID_ANNOTATION, Some(id.to_owned())),
            ]
        };
        let cases = [
            (None, true, None, vec![]),
            (None, false, Some("d1"), vec![]),
            (Some("d1"), true, None, swap("d1")),
            (Some("d1"), true, Some("d1"), swap("d1")),
            (Some("d1"), false, None, swap("d1")),
            (Some("d2"), false, Some("d1"), swap("d2")),
            (Some("d1"), false, Some("d1"), vec![]),
        ];
        for (id, pending, annotated, want) in cases {
            assert_eq!(
                id_annotations(id, pending, annotated),
                want,
                "{id:?} {pending} {annotated:?}"
            );
        }
    }

    #[test]
    fn only_an_object_that_names_no_deployment_defers_its_finalizer_to_the_marker() {
        let cases = [
            ((false, false, false, false), true),
            ((true, false, false, false), false),
            ((false, true, false, false), false),
            ((false, false, true, false), false),
            ((false, false, false, true), false),
            ((true, true, true, true), false),
        ];
        for ((recorded, adopts, annotated, pending), want) in cases {
            assert_eq!(
                finalizer_with_marker(recorded, adopts, annotated, pending),
                want,
                "{recorded} {adopts} {annotated} {pending}"
            );
        }
    }
}
