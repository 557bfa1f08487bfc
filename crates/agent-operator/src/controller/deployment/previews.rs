//! The cap on live previews of an AgentControlPlane
//! (`spec.previews.maxLive`): before an AgentDeployment with `spec.expiry`
//! obtains its remote deployment, the previews of its namespace are
//! counted on a fresh list from the API server (never the watch cache: the
//! count decides a create), and one over the cap waits with no request.
//! The decision is [`crate::plan::expiry::over_cap`]'s.

use crate::controller::kind::Requeue;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use tokio::sync::MutexGuard;

use super::report::{Flow, Report};
use crate::api::conditions::reason;
use crate::api::control_plane::AgentControlPlane;
use crate::api::deployment::{AgentDeployment, DEPLOYMENT_ID_ANNOTATION};
use crate::controller::deployment::context::DeploymentContext;
use crate::controller::error::Error;
use crate::controller::kind::already_reported;
use crate::controller::requeue::jittered;
use crate::plan::expiry::{self, Preview};
use crate::plan::status::Outcome;
use crate::plan::verdict::EventType;

/// `spec.previews.maxLive` of the plane `plane` names for an object of
/// `namespace` (read from the API server: the count decides a create).
/// Errors: the Kubernetes API's.
async fn max_live(
    ctx: &DeploymentContext,
    namespace: &str,
    plane: &crate::api::control_plane::ControlPlaneRef,
) -> Result<Option<u32>, Error> {
    let previews = if plane.is_cluster() {
        let api: Api<crate::api::ClusterAgentControlPlane> = Api::all(ctx.client.clone());
        let found = api.get_opt(&plane.name).await.map_err(Error::Kube)?;
        found.and_then(|p| p.spec.plane.previews)
    } else {
        let api: Api<AgentControlPlane> = Api::namespaced(ctx.client.clone(), namespace);
        let found = api.get_opt(&plane.name).await.map_err(Error::Kube)?;
        found.and_then(|p| p.spec.previews)
    };
    Ok(previews.and_then(|p| p.max_live))
}

/// What the cap sees of `d` (named `namespace/name`).
fn preview(d: &AgentDeployment) -> Preview<'_> {
    let status = d.status.as_ref();
    Preview {
        name: format!(
            "{}/{}",
            d.metadata.namespace.as_deref().unwrap_or_default(),
            d.metadata.name.as_deref().unwrap_or_default()
        ),
        plane: &d.spec.control_plane_ref.name,
        has_expiry: d.spec.expiry.is_some(),
        holds_remote: status.is_some_and(|s| s.deployment_id.is_some())
            || d.annotations().contains_key(DEPLOYMENT_ID_ANNOTATION)
            || d.create_pending(),
        expired: status.is_some_and(|s| s.expired_at.is_some()),
    }
}

/// Admits `obj` to obtain its remote deployment: `Ok(None)` when no cap
/// applies (no `spec.expiry`, no `maxLive` on its plane, or a create to
/// recover, which already counts), `Ok(Some(guard))` below the cap (hold
/// the guard until the create is recorded), `Err` a report that waits:
/// `Reconciling` with reason `PreviewLimitReached`, looked at again every
/// blocked interval (jittered).
///
/// Errors: the Kubernetes API's, on the read of the plane or the list.
pub async fn admit<'c>(
    obj: &AgentDeployment,
    ctx: &'c DeploymentContext,
) -> Flow<Option<MutexGuard<'c, ()>>> {
    if obj.spec.expiry.is_none() || obj.create_pending() {
        return Ok(None);
    }
    let ns = obj
        .namespace()
        .ok_or(Error::MissingObjectKey("namespace"))?;
    let plane_ref = &obj.spec.control_plane_ref;
    let plane = &plane_ref.name;
    let max_live = max_live(ctx, &ns, plane_ref).await?;
    if max_live.is_none() {
        return Ok(None);
    }
    let guard = ctx.state.previews.lock().await;
    // A cluster plane's cap counts the previews of every namespace on it.
    let all: Api<AgentDeployment> = if plane_ref.is_cluster() {
        Api::all(ctx.client.clone())
    } else {
        Api::namespaced(ctx.client.clone(), &ns)
    };
    let listed = all
        .list(&ListParams::default())
        .await
        .map_err(Error::Kube)?;
    let me = format!("{ns}/{}", obj.name_any());
    let on_plane = listed
        .items
        .iter()
        .filter(|d| d.spec.control_plane_ref.kind == plane_ref.kind);
    let Some(live) = expiry::over_cap(max_live, plane, &me, on_plane.map(preview)) else {
        return Ok(Some(guard));
    };
    let message = format!(
        "{live} previews of {} are live, its spec.previews.maxLive is {}: waiting, with no request, until one expires or is deleted",
        plane_ref.shown(&ns),
        max_live.unwrap_or_default()
    );
    let repeated = already_reported(obj, reason::PREVIEW_LIMIT_REACHED, &message);
    let mut report = Report::outcome(
        obj,
        &Outcome::Progressing {
            reason: reason::PREVIEW_LIMIT_REACHED,
            message: message.clone(),
        },
        Requeue::after(jittered(ctx.config.blocked_interval)),
    );
    if !repeated {
        report
            .events
            .push((EventType::Normal, reason::PREVIEW_LIMIT_REACHED, message));
    }
    Err(report)
}
