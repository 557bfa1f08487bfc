//! The control plane client of an AgentDeployment's `controlPlaneRef`, or
//! the report of why there is none: shared by the pass's observe and the
//! expiry step.

use crate::controller::kind::Requeue;
use kube::ResourceExt;

use super::report::{Flow, Report};
use crate::api::conditions::reason;
use crate::api::deployment::AgentDeployment;
use crate::controller::deployment::context::DeploymentContext;
use crate::controller::error::Error;
use crate::controller::requeue::jittered;
use crate::controlplane::ControlPlaneClient;
use crate::plan::status::Outcome;

/// How soon an AgentDeployment whose plane has not been checked yet looks
/// again (±25 %), in case the plane's check lands before this object's
/// status shows the wait (the plane's change then triggers nothing here).
/// Costs no remote call.
pub const NOT_CHECKED_RECHECK: std::time::Duration = std::time::Duration::from_secs(2);

/// The control plane client of `spec.controlPlaneRef`; `Err`: the plane is
/// missing or not ready (`Stalled`).
pub async fn control_plane(
    obj: &AgentDeployment,
    ctx: &DeploymentContext,
) -> Flow<ControlPlaneClient> {
    let ns = obj
        .namespace()
        .ok_or(Error::MissingObjectKey("namespace"))?;
    match ctx
        .plane_client_for(&ns, &obj.spec.control_plane_ref)
        .await?
    {
        Ok(cp) => Ok(cp),
        // Not a problem to report: the plane's first check is under way and
        // its result triggers this object again.
        Err(blocked) if blocked.reason == reason::CONTROL_PLANE_NOT_CHECKED => {
            Err(Report::outcome(
                obj,
                &Outcome::Progressing {
                    reason: blocked.reason,
                    message: blocked.message,
                },
                Requeue::after(jittered(NOT_CHECKED_RECHECK).min(ctx.config.blocked_interval)),
            ))
        }
        Err(blocked) => Err(Report::blocked(obj, ctx, blocked)),
    }
}

/// The key of the learned revision duration: the control plane's base URL
/// and workspace.
pub(super) fn plane_key(cp: &ControlPlaneClient) -> String {
    format!("{} {}", cp.base_url(), cp.workspace_id())
}
