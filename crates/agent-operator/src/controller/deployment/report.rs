//! The "report" edge of the AgentDeployment reconciler: status writes (only
//! when changed, server-side apply), events, and the mapping of control plane
//! errors to conditions.

use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};

use crate::api::conditions::{READY, find, reason};
use crate::api::deployment::{AgentDeployment, AgentDeploymentStatus};
use crate::controller::resolve::Blocked;
use crate::controller::status::{Outcome, conditions};
use crate::controller::{Context, Error};
use crate::controlplane::Error as CpError;

/// Publishes an event about `obj`; a failure to publish is logged, not fatal.
pub async fn publish(
    ctx: &Context,
    obj: &AgentDeployment,
    type_: EventType,
    reason: &str,
    note: String,
) {
    crate::controller::report::publish(ctx, obj, type_, reason, note).await;
}

/// Writes `status` with server-side apply, unless it equals the current one.
pub async fn write_status(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    status: AgentDeploymentStatus,
) -> Result<(), Error> {
    if obj.status.as_ref() == Some(&status) {
        return Ok(());
    }
    crate::controller::report::apply_status(api, &obj.name_any(), &status).await
}

/// Writes `outcome` to the conditions, keeping the other status fields.
pub async fn report(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    outcome: &Outcome,
) -> Result<(), Error> {
    let mut status = obj.status.clone().unwrap_or_default();
    if status.observed_generation != obj.metadata.generation {
        // A new generation ends any drift fight (`super::fight`).
        status.drift_corrections.clear();
    }
    status.observed_generation = obj.metadata.generation;
    let previous = std::mem::take(&mut status.conditions);
    status.conditions = conditions(&previous, outcome, obj.metadata.generation);
    super::verify::set_condition(&mut status, &previous, obj);
    write_status(api, obj, status).await
}

/// True when the object already shows `reason` and `message` on its
/// conditions (so a Warning event is not repeated on every pass).
pub fn already_reported(obj: &AgentDeployment, reason: &str, message: &str) -> bool {
    obj.status
        .as_ref()
        .and_then(|s| find(&s.conditions, READY))
        .is_some_and(|c| c.reason == reason && c.message == message)
}

/// Reports a stalled state (Warning event once, conditions) and returns the
/// slow requeue used while waiting for a human or a watch event.
pub async fn report_stalled(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    ctx: &Context,
    reason: &'static str,
    message: String,
) -> Result<Action, Error> {
    let repeated = already_reported(obj, reason, &message);
    report(
        api,
        obj,
        &Outcome::Stalled {
            reason,
            message: message.clone(),
        },
    )
    .await?;
    if !repeated {
        publish(ctx, obj, EventType::Warning, reason, message).await;
    }
    Ok(Action::requeue(ctx.config.blocked_interval))
}

/// Reports a missing input (Secret, AgentControlPlane, listener).
pub async fn report_blocked(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    ctx: &Context,
    blocked: Blocked,
) -> Result<Action, Error> {
    report_stalled(api, obj, ctx, blocked.reason, blocked.message).await
}

/// Maps a control plane error to a status outcome: 401/403 → Unauthorized,
/// 409 → NameConflict, transient → progressing (retried), other → InvalidSpec.
pub fn error_outcome(operation: &str, e: &CpError) -> Outcome {
    use crate::controller::report::{ErrorClass, classify, transient_summary};
    let message = format!("{operation}: {e}");
    use crate::controlplane::error::Refusal;
    let reason = match classify(e) {
        ErrorClass::Forbidden if e.refusal() == Some(Refusal::WorkspaceRequired) => {
            reason::WORKSPACE_REQUIRED
        }
        ErrorClass::Forbidden if e.refusal() == Some(Refusal::DeploymentNotEnabled) => {
            reason::DEPLOYMENT_NOT_ENABLED
        }
        ErrorClass::Unauthorized | ErrorClass::Forbidden => reason::UNAUTHORIZED,
        ErrorClass::Rejected if matches!(e, CpError::Conflict { .. }) => reason::NAME_CONFLICT,
        ErrorClass::Transient => {
            return Outcome::Progressing {
                reason: reason::CONTROL_PLANE_UNAVAILABLE,
                message: format!("{operation}: {}", transient_summary(e)),
            };
        }
        ErrorClass::Rejected | ErrorClass::NotFound | ErrorClass::Other => reason::INVALID_SPEC,
    };
    Outcome::Stalled { reason, message }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_plane_errors_map_to_reasons() {
        let o = error_outcome(
            "create deployment",
            &CpError::Unauthorized {
                detail: "bad key".into(),
            },
        );
        assert_eq!(o.reason(), reason::UNAUTHORIZED);
        let o = error_outcome(
            "create deployment",
            &CpError::Conflict {
                detail: "exists".into(),
            },
        );
        assert_eq!(o.reason(), reason::NAME_CONFLICT);
        let o = error_outcome("get deployment", &CpError::Timeout);
        assert!(matches!(o, Outcome::Progressing { .. }));
        let o = error_outcome(
            "patch deployment",
            &CpError::BadRequest {
                detail: "name is immutable".into(),
            },
        );
        assert_eq!(o.reason(), reason::INVALID_SPEC);
        assert!(o.message().contains("name is immutable"));
    }
}
