//! Pure computation of kstatus conditions from the outcome of a reconcile pass.
//!
//! Conditions: `Ready` (True only when the latest revision is DEPLOYED and the
//! remote configuration equals the spec), `Reconciling` (a change or a revision
//! is in progress) and `Stalled` (progress needs a human). Source of the
//! revision semantics: docs/control-plane-api.md "Revision".

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::api::conditions::{FALSE, READY, TRUE, condition, reason};
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

/// The three kstatus conditions for an outcome, keeping transition times from
/// `previous` where a condition's status did not change.
pub fn conditions(
    previous: &[Condition],
    outcome: &Outcome,
    generation: Option<i64>,
) -> Vec<Condition> {
    let (ready, reconciling, stalled) = match outcome {
        Outcome::Ready { .. } => (TRUE, FALSE, FALSE),
        Outcome::Progressing { .. } => (FALSE, TRUE, FALSE),
        Outcome::Stalled { .. } => (FALSE, FALSE, TRUE),
        Outcome::Paused { .. } => (FALSE, FALSE, FALSE),
    };
    let (reason, message) = (outcome.reason(), outcome.message());
    vec![
        condition(previous, READY, ready, reason, message, generation),
        condition(
            previous,
            RECONCILING,
            reconciling,
            reason,
            message,
            generation,
        ),
        condition(previous, STALLED, stalled, reason, message, generation),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::conditions::find;

    #[test]
    fn deployed_is_ready_failed_is_stalled_in_progress_is_reconciling() {
        let ready = conditions(
            &[],
            &revision_outcome("r1", &RevisionStatus::Deployed),
            Some(3),
        );
        assert_eq!(find(&ready, READY).unwrap().status, TRUE);
        assert_eq!(find(&ready, READY).unwrap().observed_generation, Some(3));
        let failed = revision_outcome("r1", &RevisionStatus::BuildFailed);
        assert_eq!(failed.reason(), reason::REVISION_FAILED);
        let c = conditions(&ready, &failed, Some(3));
        assert_eq!(find(&c, STALLED).unwrap().status, TRUE);
        assert_eq!(find(&c, READY).unwrap().status, FALSE);
        assert!(find(&c, READY).unwrap().message.contains("BUILD_FAILED"));
        let c = conditions(&[], &revision_outcome("r2", &RevisionStatus::Unknown), None);
        assert_eq!(find(&c, RECONCILING).unwrap().status, TRUE);
        let c = conditions(
            &[],
            &revision_outcome("r2", &RevisionStatus::Interrupted),
            None,
        );
        assert_eq!(
            find(&c, STALLED).unwrap().reason,
            reason::REVISION_INTERRUPTED
        );
    }
}
