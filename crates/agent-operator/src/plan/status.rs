//! Pure computation of kstatus conditions from the outcome of a reconcile pass.
//!
//! Conditions: `Ready` (True only when the latest revision is DEPLOYED and the
//! remote configuration equals the spec), `Reconciling` (a change or a revision
//! is in progress) and `Stalled` (progress needs a human). Source of the
//! revision semantics: docs/control-plane-api.md "Revision".

use crate::api::conditions::{FALSE, READY, TRUE, reason};
use crate::controlplane::types::RevisionStatus;

/// Condition type: a change or a revision is in progress.
pub const RECONCILING: &str = "Reconciling";
/// Condition type: progress needs a human.
pub const STALLED: &str = "Stalled";

/// What a reconcile pass concluded about one object.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Fully reconciled.
    Ready {
        /// Reason, e.g. `RevisionDeployed`.
        reason: &'static str,
        /// Human-readable message.
        message: String,
    },
    /// Work is under way; will progress without human action.
    Progressing {
        /// Reason, e.g. `RevisionInProgress`.
        reason: &'static str,
        /// Human-readable message.
        message: String,
    },
    /// Paused by annotation: no remote call is made.
    Paused {
        /// Human-readable message.
        message: String,
    },
    /// Cannot progress until a human acts (fix a spec, create a Secret, ...).
    Stalled {
        /// Reason, e.g. `SecretNotFound`.
        reason: &'static str,
        /// Human-readable message naming what to fix.
        message: String,
    },
}

impl Outcome {
    /// The reason of the outcome.
    pub fn reason(&self) -> &'static str {
        match self {
            Outcome::Ready { reason, .. }
            | Outcome::Progressing { reason, .. }
            | Outcome::Stalled { reason, .. } => reason,
            Outcome::Paused { .. } => reason::PAUSED,
        }
    }

    /// The message of the outcome.
    pub fn message(&self) -> &str {
        match self {
            Outcome::Ready { message, .. }
            | Outcome::Progressing { message, .. }
            | Outcome::Stalled { message, .. }
            | Outcome::Paused { message } => message,
        }
    }
}

/// The outcome of an expired preview (`spec.expiry`): `Stalled` with
/// reason `Expired`, a terminal state: kstatus reads it as `Failed` and the
/// Argo CD health script as `Degraded` (the preview no longer serves, and
/// only a person brings it back, by re-creating the object), never as in
/// progress, so that a wait ends.
pub fn expired(message: String) -> Outcome {
    Outcome::Stalled {
        reason: reason::EXPIRED,
        message,
    }
}

/// The outcome of following a revision with the given status.
pub fn revision_outcome(revision_id: &str, status: &RevisionStatus) -> Outcome {
    match status {
        RevisionStatus::Deployed => Outcome::Ready {
            reason: reason::REVISION_DEPLOYED,
            message: format!("revision {revision_id} is DEPLOYED"),
        },
        s if s.is_failed() => Outcome::Stalled {
            reason: reason::REVISION_FAILED,
            message: format!(
                "revision {revision_id} ended in {s}; change the spec or request a redeploy"
            ),
        },
        RevisionStatus::Interrupted => Outcome::Stalled {
            reason: reason::REVISION_INTERRUPTED,
            message: format!(
                "revision {revision_id} was INTERRUPTED; change the spec or request a redeploy"
            ),
        },
        s => Outcome::Progressing {
            reason: reason::REVISION_IN_PROGRESS,
            message: format!("revision {revision_id} is {s}"),
        },
    }
}

impl Outcome {
    /// The kstatus conditions for this outcome, as `(type, status)`:
    /// `Ready` always (`True` or `False`), then `Reconciling` and `Stalled`
    /// only while `True` (`Paused`: `Ready=False` alone). Reconciling and
    /// Stalled are "abnormal-true" conditions: kstatus, Flux and the Argo CD
    /// health script read an absent one as `False`, and Flux's own
    /// controllers remove them rather than write them `False`. Leaving them
    /// out keeps each status write, watch event and cached object two
    /// conditions smaller (docs/BEHAVIOUR.md, "AgentDeployment";
    /// docs/BENCHMARKS.md, "Capacity"). The conditions
    /// themselves, with their transition times, are built by the report
    /// edge (`controller::report::conditions`).
    pub fn kstatus(&self) -> impl Iterator<Item = (&'static str, &'static str)> + use<> {
        let (ready, reconciling, stalled) = match self {
            Outcome::Ready { .. } => (TRUE, FALSE, FALSE),
            Outcome::Progressing { .. } => (FALSE, TRUE, FALSE),
            Outcome::Stalled { .. } => (FALSE, FALSE, TRUE),
            Outcome::Paused { .. } => (FALSE, FALSE, FALSE),
        };
        [
            (READY, ready),
            (RECONCILING, reconciling),
            (STALLED, stalled),
        ]
        .into_iter()
        .filter(|(type_, status)| *type_ == READY || *status == TRUE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The status of `type_`, `False` when absent (as kstatus reads it).
    fn status_of(outcome: &Outcome, type_: &str) -> &'static str {
        outcome
            .kstatus()
            .find(|(t, _)| *t == type_)
            .map_or(FALSE, |(_, s)| s)
    }

    /// The types written for `outcome`, in order.
    fn types_of(outcome: &Outcome) -> Vec<&'static str> {
        outcome.kstatus().map(|(t, _)| t).collect()
    }

    #[test]
    fn deployed_is_ready_failed_is_stalled_in_progress_is_reconciling() {
        let ready = revision_outcome("r1", &RevisionStatus::Deployed);
        assert_eq!(status_of(&ready, READY), TRUE);
        assert_eq!(status_of(&ready, STALLED), FALSE);
        let failed = revision_outcome("r1", &RevisionStatus::BuildFailed);
        assert_eq!(failed.reason(), reason::REVISION_FAILED);
        assert_eq!(status_of(&failed, STALLED), TRUE);
        assert_eq!(status_of(&failed, READY), FALSE);
        assert!(failed.message().contains("BUILD_FAILED"));
        let unknown = revision_outcome("r2", &RevisionStatus::Unknown);
        assert_eq!(status_of(&unknown, RECONCILING), TRUE);
        let interrupted = revision_outcome("r2", &RevisionStatus::Interrupted);
        assert_eq!(interrupted.reason(), reason::REVISION_INTERRUPTED);
        assert_eq!(status_of(&interrupted, STALLED), TRUE);
        let paused = Outcome::Paused {
            message: "paused".into(),
        };
        assert!(paused.kstatus().all(|(_, s)| s == FALSE));
        // Ready always; the abnormal-true conditions only while True.
        assert_eq!(types_of(&paused), [READY]);
        assert_eq!(types_of(&ready), [READY]);
        assert_eq!(types_of(&unknown), [READY, RECONCILING]);
        assert_eq!(types_of(&failed), [READY, STALLED]);
    }

    #[test]
    fn an_expired_preview_is_stalled_not_ready() {
        let expired = expired("expired at 2026-01-01T00:00:00Z".into());
        assert_eq!(expired.reason(), reason::EXPIRED);
        assert_eq!(status_of(&expired, STALLED), TRUE);
        assert_eq!(status_of(&expired, READY), FALSE);
        assert_eq!(status_of(&expired, RECONCILING), FALSE);
    }
}
