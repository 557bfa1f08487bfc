//! The "report" step of the AgentDeployment pass: the reports of its
//! outcomes ([`Report`], the AgentDeployment's [`kind::Report`], written by
//! [`kind::write`] in the one order of every kind: annotations, status,
//! events), and what a control plane error means for an AgentDeployment
//! (docs/control-plane-api.md "Errors").

use crate::controller::kind::Requeue;
use crate::plan::verdict::EventType;
use kube::ResourceExt;

use crate::api::conditions::reason;
use crate::api::deployment::{AgentDeployment, AgentDeploymentStatus};
use crate::controller::deployment::context::DeploymentContext;
use crate::controller::kind::{self, Kind, already_reported, changed};
use crate::controller::report::conditions;
use crate::controller::report::error_outcome;
use crate::controller::resolve::Blocked;
use crate::controlplane::Error as CpError;
use crate::plan::status::Outcome;

/// A step's result: `Err` ends the pass with this report
/// ([`kind::Flow`]).
pub type Flow<T> = kind::Flow<T, AgentDeployment>;

/// The one value of an AgentDeployment pass
/// ([`kind::Report`]).
pub type Report = kind::Report<AgentDeployment>;

impl Report {
    /// Writes `outcome` to the conditions of `obj`, keeping the other status
    /// fields; requeues with `action`.
    pub fn outcome(obj: &AgentDeployment, outcome: &Outcome, action: Requeue) -> Box<Self> {
        let mut r = Self::end(action);
        r.status = changed(obj, outcome_status(obj, outcome));
        r
    }

    /// A stalled state: the conditions, a Warning event unless the object
    /// already shows it, and the slow requeue used while waiting for a
    /// human or a watch event.
    pub fn stalled(
        obj: &AgentDeployment,
        ctx: &DeploymentContext,
        reason: &'static str,
        message: String,
    ) -> Box<Self> {
        let repeated = already_reported(obj, reason, &message);
        let mut r = Self::outcome(
            obj,
            &Outcome::Stalled {
                reason,
                message: message.clone(),
            },
            Requeue::after(ctx.config.blocked_interval),
        );
        if !repeated {
            r.events.push((EventType::Warning, reason, message));
        }
        r
    }

    /// A spec refused here, before any request ([`Self::stalled`]): a
    /// rejection the control plane answered to an earlier spec
    /// (`status.rejectedRequest`) no longer applies, and goes, so that the
    /// status never shows a retry time for a request that is not sent.
    pub fn refused_here(
        obj: &AgentDeployment,
        ctx: &DeploymentContext,
        reason: &'static str,
        message: String,
    ) -> Box<Self> {
        let mut r = Self::stalled(obj, ctx, reason, message.clone());
        if obj
            .status
            .as_ref()
            .is_some_and(|s| s.rejected_request.is_some())
        {
            let mut status = outcome_status(obj, &Outcome::Stalled { reason, message });
            status.rejected_request = None;
            r.status = changed(obj, status);
        }
        r
    }

    /// A missing input (Secret, AgentControlPlane, listener).
    pub fn blocked(obj: &AgentDeployment, ctx: &DeploymentContext, blocked: Blocked) -> Box<Self> {
        Self::stalled(obj, ctx, blocked.reason, blocked.message)
    }
}

/// The status of `obj` with `outcome` in its conditions.
pub(super) fn outcome_status(obj: &AgentDeployment, outcome: &Outcome) -> AgentDeploymentStatus {
    let mut status = obj.status.clone().unwrap_or_default();
    if status.observed_generation != obj.metadata.generation {
        // A new generation ends any drift fight (`super::fight`).
        status.drift_corrections.clear();
    }
    status.observed_generation = obj.metadata.generation;
    let previous = std::mem::take(&mut status.conditions);
    status.conditions = conditions(&previous, outcome, obj.metadata.generation);
    super::verify::set_condition(&mut status, &previous, obj);
    if obj.spec.management_policy != crate::api::deployment::ManagementPolicy::Observe {
        // Switched to Manage: the drift of an observed deployment is gone
        // with the policy, even before the pass that converges it.
        status
            .conditions
            .retain(|c| c.type_ != crate::api::conditions::DRIFTED);
        status.drift.clear();
    }
    status
}

/// `outcome` (of a definite rejection: 400, 409, 422) with what happens to
/// the refused request: it is not sent again until the desired state
/// changes (the spec, or a value of a Secret it uses) or until `retry_at`
/// (`status.rejectedRequest.retryAfterTime`, RFC 3339). Pure.
pub fn not_resent_until(outcome: Outcome, retry_at: &str) -> Outcome {
    let note = format!(
        "; not sent again until the spec or a Secret it uses changes, or until {retry_at} \
         (status.rejectedRequest.retryAfterTime)"
    );
    match outcome {
        Outcome::Stalled { reason, message } => Outcome::Stalled {
            reason,
            message: message + &note,
        },
        Outcome::Progressing { reason, message } => Outcome::Progressing {
            reason,
            message: message + &note,
        },
        other => other,
    }
}

/// The outcome of a control plane error in an apply pass of `obj`: as
/// [`error_outcome`] with the AgentDeployment's [`Kind::REASONS`]
/// (`ReasonTable::DEPLOYMENT`: 401/403 → Unauthorized, 409 → NameConflict,
/// other → InvalidSpec, transient → progressing), except that a refused key (401) is the
/// AgentControlPlane's problem, not this object's: it waits for its plane
/// like any blocked object (`ControlPlaneNotReady`), and a plane or key
/// Secret change retries it. (Its pass may run before the plane's own probe
/// has marked the plane Stalled.)
pub fn apply_error_outcome(obj: &AgentDeployment, operation: &str, e: &CpError) -> Outcome {
    if !matches!(e, CpError::Unauthorized { .. }) {
        return error_outcome(&AgentDeployment::REASONS, operation, e);
    }
    Outcome::Stalled {
        reason: reason::CONTROL_PLANE_NOT_READY,
        message: format!(
            "{} is not ready: Unauthorized: {operation}: {e}",
            obj.spec
                .control_plane_ref
                .shown(&obj.namespace().unwrap_or_default())
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::report::ReasonTable;

    /// An observed AgentDeployment whose last full pass found drift.
    fn observed_with_drift(policy: &str) -> AgentDeployment {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentDeployment",
            "metadata": {"name": "a", "namespace": "n", "generation": 2},
            "spec": {
                "controlPlaneRef": {"name": "cp"},
                "managementPolicy": policy,
                "source": "external_docker",
                "sourceRevisionConfig": {"imageUri": "docker.io/acme/agent:1"},
            },
            "status": {
                "deploymentId": "d-1",
                "drift": [{"field": "source_revision_config.image_uri",
                           "desired": "\"docker.io/acme/agent:1\"",
                           "remote": "\"docker.io/acme/agent:0\""}],
                "conditions": [
                    {"type": "Ready", "status": "True", "reason": "Deployed", "message": "ok",
                     "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 2},
                    {"type": "Drifted", "status": "True", "reason": "RemoteDiffers",
                     "message": "remote deployment d-1 differs", "observedGeneration": 2,
                     "lastTransitionTime": "2026-01-01T00:00:00Z"},
                ],
            },
        }))
        .unwrap()
    }

    /// Passes that stop before reading the remote (paused, a missing
    /// Secret) carry the `Drifted` condition and `status.drift` forward
    /// unchanged; under `Manage` neither is kept.
    #[test]
    fn passes_that_stop_early_keep_the_drifted_condition() {
        use crate::api::conditions::{DRIFTED, find};
        let obj = observed_with_drift("Observe");
        let before = find(&obj.status.as_ref().unwrap().conditions, DRIFTED)
            .unwrap()
            .clone();
        let missing_secret = Outcome::Stalled {
            reason: reason::SECRET_NOT_FOUND,
            message: "Secret env not found".into(),
        };
        for outcome in [super::super::ending::paused_outcome(), missing_secret] {
            let status = outcome_status(&obj, &outcome);
            assert_eq!(
                find(&status.conditions, DRIFTED),
                Some(&before),
                "{}",
                outcome.reason()
            );
            assert_eq!(status.drift, obj.status.as_ref().unwrap().drift);
            assert_eq!(
                find(&status.conditions, "Ready").map(|c| c.reason.as_str()),
                Some(outcome.reason())
            );
        }
        let managed = observed_with_drift("Manage");
        let status = outcome_status(&managed, &super::super::ending::paused_outcome());
        assert!(find(&status.conditions, DRIFTED).is_none());
        assert!(status.drift.is_empty());
    }

    #[test]
    fn control_plane_errors_map_to_reasons() {
        let o = error_outcome(
            &ReasonTable::DEPLOYMENT,
            "create deployment",
            &CpError::Unauthorized {
                detail: "bad key".into(),
            },
        );
        assert_eq!(o.reason(), reason::UNAUTHORIZED);
        let o = error_outcome(
            &ReasonTable::DEPLOYMENT,
            "create deployment",
            &CpError::Conflict {
                detail: "exists".into(),
            },
        );
        assert_eq!(o.reason(), reason::NAME_CONFLICT);
        let o = error_outcome(
            &ReasonTable::DEPLOYMENT,
            "get deployment",
            &CpError::Timeout,
        );
        assert!(matches!(o, Outcome::Progressing { .. }));
        let o = error_outcome(
            &ReasonTable::DEPLOYMENT,
            "patch deployment",
            &CpError::BadRequest {
                detail: "name is immutable".into(),
            },
        );
        assert_eq!(o.reason(), reason::INVALID_SPEC);
        assert!(o.message().contains("name is immutable"));
    }

    /// The refused requests of [`refused_requests_say_why_and_when_they_are_sent_again`].
    fn refused_cases() -> Vec<(CpError, &'static str, &'static str)> {
        use crate::controlplane::types::ValidationError;
        let v = |loc: &[&str], msg: &str, kind: &str| ValidationError {
            loc: loc.iter().map(|l| serde_json::json!(l)).collect(),
            msg: msg.into(),
            kind: kind.into(),
        };
        vec![
            (
                // A 422 whose detail is a string.
                CpError::from_response(
                    reqwest::StatusCode::UNPROCESSABLE_ENTITY,
                    None,
                    br#"{"detail": "image_uri: registry not allowed"}"#,
                ),
                reason::INVALID_SPEC,
                "create deployment: validation failed (422): image_uri: registry not allowed; not \
                 sent again until the spec or a Secret it uses changes, or until \
                 2026-11-26T17:40:00Z (status.rejectedRequest.retryAfterTime)",
            ),
            (
                CpError::Validation {
                    errors: vec![
                        v(
                            &["body", "source_config", "repo_url"],
                            "Field required",
                            "missing",
                        ),
                        v(&[], "", "unknown"),
                        v(&["body", ""], "too long", ""),
                    ],
                },
                reason::INVALID_SPEC,
                "create deployment: validation failed (422): body.source_config.repo_url: Field \
                 required (missing); body: too long; not sent again until the spec or a Secret it \
                 uses changes, or until 2026-11-26T17:40:00Z \
                 (status.rejectedRequest.retryAfterTime)",
            ),
            (
                CpError::Validation { errors: vec![] },
                reason::INVALID_SPEC,
                "create deployment: validation failed (422): the service gave no detail; not sent \
                 again until the spec or a Secret it uses changes, or until 2026-11-26T17:40:00Z \
                 (status.rejectedRequest.retryAfterTime)",
            ),
            (
                CpError::Conflict {
                    detail: "Deployment name already exists.".into(),
                },
                reason::NAME_CONFLICT,
                "create deployment: conflict (409): Deployment name already exists.; not sent \
                 again until the spec or a Secret it uses changes, or until 2026-11-26T17:40:00Z \
                 (status.rejectedRequest.retryAfterTime)",
            ),
        ]
    }

    /// The messages of refused requests, as the condition shows them: the
    /// service's location and message without empty parts, and when the
    /// request may be sent again.
    #[test]
    fn refused_requests_say_why_and_when_they_are_sent_again() {
        let at = "2026-11-26T17:40:00Z";
        let cases = refused_cases();
        for (e, want_reason, want) in cases {
            assert!(e.is_rejection(), "{e}");
            let o = not_resent_until(
                error_outcome(&ReasonTable::DEPLOYMENT, "create deployment", &e),
                at,
            );
            assert_eq!(o.reason(), want_reason, "{e}");
            assert_eq!(o.message(), want, "{e}");
        }
    }
}
