//! The guard of the remote steps of the AgentDeployment pass (Poll and
//! Change): the deployment it holds must still be on the control plane the
//! object names ([`same_plane`]), or the pass ends before any mutation.
//! Sources: docs/control-plane-api.md "Requests".

use crate::controller::kind::Requeue;

use super::pass::Pass;
use super::report::Flow;
use crate::controller::requeue::jittered;

/// `Ok` when the remote deployment of `pass` lives on the control plane its
/// AgentControlPlane leads to now: the one recorded in
/// `status.controlPlane` (or none recorded yet), or another one where a
/// read finds the same deployment (the same service under another URL:
/// the new plane is recorded by this pass). `Err` ends the pass: `Stalled`
/// (`ControlPlaneChanged`) when the deployment is not there, with nothing
/// sent or created (a create there would be a second deployment, and the
/// first one would run on unmanaged); the error backoff when the read
/// fails.
pub(super) async fn same_plane(pass: &mut Pass<'_>) -> Flow<()> {
    use crate::plan::claims::PlaneId;
    let Some(recorded) = pass.previous.control_plane.as_ref() else {
        return Ok(());
    };
    let was = PlaneId::new(&recorded.url, &recorded.workspace_id);
    let now = PlaneId::new(pass.cp.base_url(), pass.cp.workspace_id());
    if was == now {
        return Ok(());
    }
    let id = pass.previous.deployment_id.clone().unwrap_or_default();
    match pass.cp.get_deployment(&id).await {
        Ok(_) => Ok(()),
        Err(e) if e.is_transient() => Err(pass.fail("get deployment on the new control plane", e)),
        Err(_) => {
            let message = plane_changed_message(&id, &was, &now);
            let resync = Requeue::after(jittered(pass.ctx.config.resync_interval));
            Err(pass.finish(
                &crate::plan::status::Outcome::Stalled {
                    reason: crate::api::conditions::reason::CONTROL_PLANE_CHANGED,
                    message,
                },
                Ok(resync),
            ))
        }
    }
}

/// The message of `ControlPlaneChanged`: remote deployment `id` lives on
/// `was`, the AgentControlPlane leads to `now`. Pure.
pub fn plane_changed_message(
    id: &str,
    was: &crate::plan::claims::PlaneId,
    now: &crate::plan::claims::PlaneId,
) -> String {
    format!(
        "remote deployment {id} lives on {was} (status.controlPlane), but the AgentControlPlane now leads to {now}, where it does not exist; nothing is sent and no second deployment is created. Point the AgentControlPlane back at {was}, or move the deployment as docs/RENAME-AND-MOVE.md says (a new AgentDeployment on the new plane, this one deleted by its deletionPolicy)"
    )
}
