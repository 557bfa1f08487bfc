//! The deletion pass of an AgentDeployment: DELETEs the remote deployment
//! (per `spec.deletionPolicy`); the finalizer is removed only once GET
//! answers 404. DELETE is sent once, and again only when a read shows the
//! deployment not being deleted; reads follow the backoff of [`deleting`],
//! and a pass before the next read is due sends nothing. Like the apply
//! pass, it returns one [`Report`] that `reconcile` writes.

use crate::controller::kind::Requeue;
use crate::plan::verdict::EventType;
use kube::{Api, ResourceExt};
use tracing::{debug, info};

use super::deleting;
use super::report::{Flow, Report};
use crate::api::conditions::reason;
use crate::api::deployment::{
    AgentDeployment, DEPLOYMENT_ID_ANNOTATION, DeletionPolicy, ManagementPolicy, PAUSED_ANNOTATION,
};
use crate::controller::deployment::context::DeploymentContext;
use crate::controller::error::Error;
use crate::controller::kind::changed;
use crate::controller::report::conditions;
use crate::controller::requeue::object_key;
use crate::controlplane::{ControlPlaneClient, Error as CpError};
use crate::plan::status::Outcome;

/// The deletion pass of `obj`.
pub async fn cleanup(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    ctx: &DeploymentContext,
) -> Box<Report> {
    // An expired preview's remote deployment was deleted once (or
    // orphaned) at its expiry: nothing is sent again.
    if obj.status.as_ref().is_some_and(|s| s.expired_at.is_some()) {
        return Report::end(Requeue::await_change());
    }
    // Another live object claims the deployment (the new name of a rename,
    // the object of a move, applied before this one was pruned): it is
    // handed over, whatever the deletion policy, with no request.
    match hand_over(api, obj, ctx).await {
        Ok(Some(report)) => return report,
        Ok(None) => {}
        Err(e) => return Report::failed(e),
    }
    let observe = obj.spec.management_policy == ManagementPolicy::Observe;
    if obj.spec.deletion_policy == DeletionPolicy::Orphan || observe {
        let mut report = Report::end(Requeue::await_change());
        if let Some(id) = obj.status.as_ref().and_then(|s| s.deployment_id.as_deref()) {
            let why = if observe {
                "managementPolicy: Observe"
            } else {
                "deletionPolicy: Orphan"
            };
            report.events.push((
                EventType::Normal,
                "Orphaned",
                format!("left remote deployment {id} running ({why})"),
            ));
        }
        return report;
    }
    if let Some(report) = paused(obj, ctx) {
        return report;
    }
    // Giving the remote deployment up (removing the finalizer without a
    // DELETE) is decided on a fresh read, never on a cache that may predate
    // the operator's own last write; the id annotation survives a restore
    // without status. So is a DELETE this process has no memory of: a pass
    // queued before the last one removed the finalizer (and forgot the
    // object) may hold a cached copy of an object that is already gone.
    let remembered =
        id_of(obj).is_some_and(|id| ctx.state.deletes.known(&object_key(obj), &id).is_some());
    let mut fresh = None;
    if !remembered {
        match api.get_opt(&obj.name_any()).await {
            Ok(Some(o)) => fresh = Some(o),
            Ok(None) => return Report::end(Requeue::await_change()),
            Err(e) => return Report::failed(Error::Kube(e)),
        }
    }
    let obj = fresh.as_ref().unwrap_or(obj);
    delete(obj, ctx)
        .await
        .unwrap_or_else(|r| r)
        .on(fresh.as_ref())
}

/// Hands the deployment `obj` holds over to the object that claims it
/// ([`claims::successor`](crate::plan::claims::successor)), decided on fresh
/// reads of both: writes the claimant's id annotation
/// ([`super::claims::hand_over`]), then ends the deletion without a DELETE
/// (the finalizer goes), with a Normal event naming the claimant. `None`:
/// nothing to hand over (no id, a DELETE of this process under way, or no
/// claimant), the deletion goes on by its policy. Errors: the Kubernetes
/// API error (409 when the claimant changed since it was read).
async fn hand_over(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    ctx: &DeploymentContext,
) -> Result<Option<Box<Report>>, Error> {
    use crate::plan::claims;
    let Some(id) = id_of(obj) else {
        return Ok(None);
    };
    let key = object_key(obj);
    if ctx.state.deletes.known(&key, &id).is_some() {
        return Ok(None);
    }
    let plane = plane_id_of(obj, ctx);
    let me = super::claims::claim_of(obj, plane.clone());
    let Some(plane) = plane else {
        return Ok(None);
    };
    let name = me.name.clone();
    let found = ctx.state.claims.about(&ctx.planes, Some(&name), Some(&id));
    let Some(candidate) = claims::successor(&found, &me, &plane, &id, &name) else {
        return Ok(None);
    };
    // Both sides read fresh: the holder still holds it, the claimant is
    // still live and still claims it.
    let Some(fresh) = api.get_opt(&obj.name_any()).await.map_err(Error::Kube)? else {
        return Ok(Some(Report::end(Requeue::await_change())));
    };
    if id_of(&fresh).as_deref() != Some(id.as_str()) {
        return Ok(None);
    }
    let Some((to, claim)) = super::claims::fresh(ctx, &candidate.key).await? else {
        return Ok(None);
    };
    let me = super::claims::claim_of(&fresh, Some(plane.clone()));
    let Some(to_key) = claims::successor(std::slice::from_ref(&claim), &me, &plane, &id, &name)
        .map(|c| c.key.clone())
    else {
        return Ok(None);
    };
    super::claims::hand_over(ctx, &to, &id, &me.key).await?;
    info!(deployment_id = %id, to = %to_key, "remote deployment handed over");
    let mut report = Report::end(Requeue::await_change());
    report.events.push((
        EventType::Normal,
        reason::HANDED_OVER,
        format!(
            "handed remote deployment {id} ({name}) over to AgentDeployment {to_key}, which claims it; nothing was deleted"
        ),
    ));
    Ok(Some(report.on(Some(&fresh))))
}

/// The control plane of `obj`: its AgentControlPlane in the watch cache,
/// else the client this process last built for it (the plane is gone with
/// its namespace); `None` when neither is known.
fn plane_id_of(
    obj: &AgentDeployment,
    ctx: &DeploymentContext,
) -> Option<crate::plan::claims::PlaneId> {
    let ns = obj.namespace()?;
    let plane = &obj.spec.control_plane_ref;
    if let Some(id) = super::claims::cached_plane_id(&ctx.planes, &ns, plane) {
        return Some(id);
    }
    let origin = origin_of(ctx, &ns, plane);
    let cp = ctx.planes.retained(&origin.key.0, &origin.key.1)?;
    Some(crate::plan::claims::PlaneId::new(
        cp.base_url(),
        cp.workspace_id(),
    ))
}

/// The report of a deletion held by the pause annotation (or a value of it
/// that does not parse); `None`: the deletion goes on.
fn paused(obj: &AgentDeployment, ctx: &DeploymentContext) -> Option<Box<Report>> {
    match obj.paused() {
        Ok(true) => {
            let fix = format!(
                "remove the annotation (kubectl annotate agd {} {PAUSED_ANNOTATION}-) to let the deletion go on",
                obj.name_any()
            );
            Some(blocked(
                obj,
                ctx,
                &format!(
                    "paused by the annotation {PAUSED_ANNOTATION}: nothing is sent, the DELETE included"
                ),
                &fix,
            ))
        }
        Ok(false) => None,
        Err(message) => Some(blocked(
            obj,
            ctx,
            &message,
            "fix the annotation's value (\"true\" or \"false\")",
        )),
    }
}

/// The remote deployment id of `o`: in status, or in the id annotation.
fn id_of(o: &AgentDeployment) -> Option<String> {
    o.status
        .as_ref()
        .and_then(|s| s.deployment_id.clone())
        .or_else(|| o.annotations().get(DEPLOYMENT_ID_ANNOTATION).cloned())
}

/// The step of the delete of `key` (remote id `known_id`) before any
/// request ([`deleting::before`]).
fn delete_step(
    obj: &AgentDeployment,
    ctx: &DeploymentContext,
    key: &str,
    known_id: Option<&str>,
) -> deleting::Step {
    // What this process remembers of the delete; after a restart, the status
    // written by the last read tells whether the deployment was deleting.
    match known_id {
        Some(id) => deleting::before(
            ctx.state.deletes.known(key, id).unwrap_or(deleting::Known {
                accepted: deleting::is_deleting(
                    obj.status
                        .as_ref()
                        .and_then(|s| s.deployment_status.as_deref()),
                ),
                due_in: None,
            }),
        ),
        None => deleting::Step::Delete,
    }
}

/// The DELETE (when due) and the read that tells whether it is done.
async fn delete(obj: &AgentDeployment, ctx: &DeploymentContext) -> Flow<Box<Report>> {
    let known_id = id_of(obj);
    if known_id.is_none() && !obj.create_pending() {
        return Ok(Report::end(Requeue::await_change()));
    }
    let key = object_key(obj);
    let step = delete_step(obj, ctx, &key, known_id.as_deref());
    if let (deleting::Step::Wait(wait), Some(id)) = (step, &known_id) {
        debug!(deployment_id = %id, read_in_s = wait.as_secs_f64(), "remote delete in progress");
        return Err(Report::failed(Error::DeletionPending(id.clone())));
    }
    let cp = plane(obj, ctx).await?;
    same_plane(obj, ctx, &cp)?;
    let id = match known_id {
        Some(id) => id,
        None => {
            // A create was interrupted: look the name up before leaving.
            match cp.find_deployment_by_name(&obj.remote_name()).await {
                Ok(Some(d)) => d.id,
                Ok(None) => return Ok(Report::end(Requeue::await_change())),
                Err(e) => return Err(cp_failed("look up deployment by name", e)),
            }
        }
    };
    if step == deleting::Step::Delete {
        match cp.delete_deployment(&id).await {
            Ok(()) | Err(CpError::NotFound { .. }) => {}
            Err(e) if e.is_transient() => return Err(cp_failed("delete deployment", e)),
            Err(e) => {
                return Err(blocked(
                    obj,
                    ctx,
                    &format!("the control plane refused the DELETE: {e}"),
                    "check the AgentControlPlane's API key and the deployment on the control plane",
                ));
            }
        }
    }
    match cp.get_deployment(&id).await {
        Err(CpError::NotFound { .. }) => {
            info!(deployment_id = %id, "remote deployment deleted");
            let mut report = Report::end(Requeue::await_change());
            report
                .remember
                .push(move |ctx| ctx.state.deletes.forget(&key));
            report.events.push((
                EventType::Normal,
                "Deleted",
                format!("deleted remote deployment {id}"),
            ));
            Ok(report)
        }
        Ok(remote) => Ok(still_there(obj, ctx, &key, id, remote.status)),
        Err(e) => Err(cp_failed("get deployment", e)),
    }
}

/// `Err` (`DeletionBlocked`) when the deployment of `obj` lives on another
/// plane (`status.controlPlane`) than the one `cp` sends to: it is not
/// deleted there (a 404 would be taken for "gone", and the deployment left
/// running unmanaged).
fn same_plane(obj: &AgentDeployment, ctx: &DeploymentContext, cp: &ControlPlaneClient) -> Flow<()> {
    let Some(recorded) = obj.status.as_ref().and_then(|s| s.control_plane.as_ref()) else {
        return Ok(());
    };
    let was = crate::plan::claims::PlaneId::new(&recorded.url, &recorded.workspace_id);
    let now = crate::plan::claims::PlaneId::new(cp.base_url(), cp.workspace_id());
    if was == now {
        return Ok(());
    }
    Err(blocked(
        obj,
        ctx,
        &format!(
            "it lives on {was} (status.controlPlane), but the AgentControlPlane now leads to {now}"
        ),
        &format!("point the AgentControlPlane back at {was} so that the deletion can finish"),
    ))
}

/// The control plane client of a deletion: the plane's client as for any
/// pass or, when the plane or its API key Secret is gone or being deleted
/// (a bundle, a prune or a namespace deleted in one go), the client this
/// process last built for it ([`ClientCache::retained`](crate::controller::planes::ClientCache::retained)). Without
/// either, the deletion is blocked ([`blocked`]).
async fn plane(obj: &AgentDeployment, ctx: &DeploymentContext) -> Flow<ControlPlaneClient> {
    let ns = obj
        .namespace()
        .ok_or(Error::MissingObjectKey("namespace"))?;
    let plane_ref = &obj.spec.control_plane_ref;
    let origin = origin_of(ctx, &ns, plane_ref);
    let retained = ctx.planes.retained(&origin.key.0, &origin.key.1);
    match ctx.plane_client_for(&ns, plane_ref).await? {
        Ok(cp) => Ok(cp),
        Err(why) => match retained {
            Some(cp) => {
                debug!(
                    reason = why.reason,
                    "deleting with the control plane client built before"
                );
                Ok(cp)
            }
            None if namespace_terminating(ctx, &ns).await => {
                let id = id_of(obj).unwrap_or_else(|| obj.remote_name());
                let cause = format!(
                    "{}; namespace {ns} is being deleted, so they cannot be re-created there, and this operator never held the key (it was not running when they went)",
                    why.message
                );
                let fix = format!(
                    "nothing in the cluster can finish it: delete remote deployment {id} on the control plane yourself if it should go (it shows in the unmanaged report, status.unmanaged, of any AgentControlPlane on its workspace)"
                );
                Err(blocked(obj, ctx, &cause, &fix))
            }
            None => {
                let fix = format!(
                    "re-create what is missing (the {} and its API key Secret in namespace {}) so that the deletion can finish",
                    origin.shown, origin.secret_namespace
                );
                Err(blocked(obj, ctx, &why.message, &fix))
            }
        },
    }
}

/// The plane `plane` names for an object of `namespace`
/// ([`crate::controller::planes::Origin`]).
fn origin_of(
    ctx: &DeploymentContext,
    namespace: &str,
    plane: &crate::api::control_plane::ControlPlaneRef,
) -> crate::controller::planes::Origin {
    crate::controller::planes::Origin::of_ref(
        namespace,
        plane,
        &ctx.planes.cluster_resource_namespace(),
    )
}

/// True when the namespace `ns` is being deleted (`deletionTimestamp`);
/// false when it is not, or cannot be read (the operator of a
/// `--namespace` install has no right to read namespaces).
async fn namespace_terminating(ctx: &DeploymentContext, ns: &str) -> bool {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(ctx.client.clone());
    matches!(
        api.get_opt(ns).await,
        Ok(Some(n)) if n.metadata.deletion_timestamp.is_some()
    )
}

/// A deletion that cannot go on until a human acts: `Stalled` with reason
/// `DeletionBlocked`, a message with the `cause`, the `fix` and the way
/// out that always works (`deletionPolicy: Orphan`), a Warning event once,
/// and [`Error::DeletionBlocked`] for the backoff.
fn blocked(obj: &AgentDeployment, ctx: &DeploymentContext, cause: &str, fix: &str) -> Box<Report> {
    let message = deletion_blocked_message(obj, cause, fix);
    Report::stalled(obj, ctx, reason::DELETION_BLOCKED, message.clone())
        .then(Err::<Requeue, _>(Error::DeletionBlocked(message)))
}

/// The message of a blocked deletion of `obj`. Pure.
pub fn deletion_blocked_message(obj: &AgentDeployment, cause: &str, fix: &str) -> String {
    let remote = match id_of(obj) {
        Some(id) => format!("remote deployment {id}"),
        None => format!("the remote deployment named {}", obj.remote_name()),
    };
    format!(
        "cannot delete {remote}: {cause}. Fix: {fix}, or release this resource without deleting the remote deployment: kubectl patch agd {} --type merge -p '{{\"spec\":{{\"deletionPolicy\":\"Orphan\"}}}}'",
        obj.name_any()
    )
}

/// A control plane error of the deletion: returned for the backoff.
fn cp_failed(operation: &'static str, e: CpError) -> Box<Report> {
    Report::failed(Error::ControlPlane {
        operation,
        source: e,
    })
}

/// The deployment still exists after the DELETE: `Reconciling/Deleting`,
/// read again on the backoff of [`deleting`].
fn still_there(
    obj: &AgentDeployment,
    ctx: &DeploymentContext,
    key: &str,
    id: String,
    remote_status: Option<String>,
) -> Box<Report> {
    let is_deleting = deleting::is_deleting(remote_status.as_deref());
    let read = ctx.state.deletes.read(
        key,
        &id,
        is_deleting,
        ctx.config.poll_interval,
        ctx.config.max_poll_interval,
    );
    let wait = read.delay;
    debug!(deployment_id = %id, deleting = is_deleting, read_in_s = wait.as_secs_f64(), "remote delete in progress");
    let shown = remote_status.as_deref().unwrap_or("unknown");
    let message = if is_deleting {
        format!("waiting for remote deployment {id} to be deleted (status {shown})")
    } else {
        format!(
            "remote deployment {id} is not being deleted (status {shown}): the delete did not take; sending DELETE again"
        )
    };
    let mut status = obj.status.clone().unwrap_or_default();
    status.deployment_status = remote_status;
    status.conditions = conditions(
        &status.conditions,
        &Outcome::Progressing {
            reason: reason::DELETING,
            message,
        },
        obj.metadata.generation,
    );
    let mut report =
        Report::end(Requeue::await_change()).then(Err::<Requeue, _>(Error::DeletionPending(id)));
    report.status = changed(obj, status);
    report
        .remember
        .push(move |ctx| ctx.state.deletes.record(read));
    report
}
