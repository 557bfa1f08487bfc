//! The deletion pass of an AgentDeployment: DELETEs the remote deployment
//! (per `spec.deletionPolicy`); the finalizer is removed only once GET
//! answers 404. DELETE is sent once, and again only when a read shows the
//! deployment not being deleted; reads follow the backoff of [`deleting`],
//! and a pass before the next read is due sends nothing. Like the apply
//! pass, it returns one [`Report`] that `reconcile` writes.

use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};
use tracing::{debug, info};

use super::deleting;
use super::observe::{control_plane, paused_outcome};
use super::obtain::create_pending;
use super::report::{Flow, Report, changed, error_outcome};
use crate::api::conditions::reason;
use crate::api::deployment::{
    AgentDeployment, DEPLOYMENT_ID_ANNOTATION, DeletionPolicy, PAUSED_ANNOTATION,
};
use crate::controller::status::{Outcome, STALLED, conditions};
use crate::controller::{Context, Error, object_key};
use crate::controlplane::{ControlPlaneClient, Error as CpError};

/// The deletion pass of `obj`.
pub async fn cleanup(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    ctx: &Context,
) -> Box<Report> {
    if obj.spec.deletion_policy == DeletionPolicy::Orphan {
        let mut report = Report::end(Action::await_change());
        if let Some(id) = obj.status.as_ref().and_then(|s| s.deployment_id.as_deref()) {
            report.events.push((
                EventType::Normal,
                "Orphaned",
                format!("left remote deployment {id} running (deletionPolicy: Orphan)"),
            ));
        }
        return report;
    }
    match obj.paused() {
        Ok(true) => {
            return Report::outcome(obj, &paused_outcome(), Action::await_change()).then(Err(
                Error::DeletionBlocked(format!("paused by the annotation {PAUSED_ANNOTATION}")),
            ));
        }
        Ok(false) => {}
        Err(message) => {
            let outcome = Outcome::Stalled {
                reason: reason::INVALID_ANNOTATION,
                message: message.clone(),
            };
            return Report::outcome(obj, &outcome, Action::await_change())
                .then(Err(Error::DeletionBlocked(message)));
        }
    }
    // Giving the remote deployment up (removing the finalizer without a
    // DELETE) is decided on a fresh read, never on a cache that may predate
    // the operator's own last write; the id annotation survives a restore
    // without status.
    let mut fresh = None;
    if id_of(obj).is_none() && !create_pending(obj) {
        match api.get_opt(&obj.name_any()).await {
            Ok(Some(o)) => fresh = Some(o),
            Ok(None) => return Report::end(Action::await_change()),
            Err(e) => return Report::failed(Error::Kube(e)),
        }
    }
    let obj = fresh.as_ref().unwrap_or(obj);
    delete(obj, ctx)
        .await
        .unwrap_or_else(|r| r)
        .on(fresh.as_ref())
}

/// The remote deployment id of `o`: in status, or in the id annotation.
fn id_of(o: &AgentDeployment) -> Option<String> {
    o.status
        .as_ref()
        .and_then(|s| s.deployment_id.clone())
        .or_else(|| o.annotations().get(DEPLOYMENT_ID_ANNOTATION).cloned())
}

/// The DELETE (when due) and the read that tells whether it is done.
async fn delete(obj: &AgentDeployment, ctx: &Context) -> Flow<Box<Report>> {
    let known_id = id_of(obj);
    if known_id.is_none() && !create_pending(obj) {
        return Ok(Report::end(Action::await_change()));
    }
    let key = object_key(obj);
    // What this process remembers of the delete; after a restart, the status
    // written by the last read tells whether the deployment was deleting.
    let step = match &known_id {
        Some(id) => deleting::before(
            ctx.deletes.known(&key, id).unwrap_or(deleting::Known {
                accepted: deleting::is_deleting(
                    obj.status
                        .as_ref()
                        .and_then(|s| s.deployment_status.as_deref()),
                ),
                due_in: None,
            }),
        ),
        None => deleting::Step::Delete,
    };
    if let (deleting::Step::Wait(wait), Some(id)) = (step, &known_id) {
        debug!(deployment_id = %id, read_in_s = wait.as_secs_f64(), "remote delete in progress");
        return Err(Report::failed(Error::DeletionPending(id.clone())));
    }
    let cp = plane(obj, ctx).await?;
    let id = match known_id {
        Some(id) => id,
        None => {
            // A create was interrupted: look the name up before leaving.
            match cp.find_deployment_by_name(&obj.remote_name()).await {
                Ok(Some(d)) => d.id,
                Ok(None) => return Ok(Report::end(Action::await_change())),
                Err(e) => return Err(cp_failed("look up deployment by name", e)),
            }
        }
    };
    if step == deleting::Step::Delete {
        match cp.delete_deployment(&id).await {
            Ok(()) | Err(CpError::NotFound { .. }) => {}
            Err(e) => {
                let outcome = error_outcome("delete deployment", &e);
                return Err(
                    Report::outcome(obj, &outcome, Action::await_change()).then(Err(
                        Error::ControlPlane {
                            operation: "delete deployment",
                            source: e,
                        },
                    )),
                );
            }
        }
    }
    match cp.get_deployment(&id).await {
        Err(CpError::NotFound { .. }) => {
            ctx.deletes.forget(&key);
            info!(deployment_id = %id, "remote deployment deleted");
            let mut report = Report::end(Action::await_change());
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

/// The control plane client; a missing or unready plane blocks the
/// deletion (with the message of the object's `Stalled` condition).
async fn plane(obj: &AgentDeployment, ctx: &Context) -> Flow<ControlPlaneClient> {
    control_plane(obj, ctx).await.map_err(|report| {
        if report.then.is_err() {
            return report;
        }
        let message = obj
            .status
            .as_ref()
            .and_then(|s| crate::api::conditions::find(&s.conditions, STALLED))
            .map(|c| c.message.clone())
            .unwrap_or_default();
        report.then(Err(Error::DeletionBlocked(format!(
            "{message}; set spec.deletionPolicy: Orphan to release the resource without deleting the remote deployment"
        ))))
    })
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
    ctx: &Context,
    key: &str,
    id: String,
    remote_status: Option<String>,
) -> Box<Report> {
    let is_deleting = deleting::is_deleting(remote_status.as_deref());
    let wait = ctx.deletes.read(
        key,
        &id,
        is_deleting,
        ctx.config.poll_interval,
        ctx.config.max_poll_interval,
    );
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
    let mut report = Report::end(Action::await_change()).then(Err(Error::DeletionPending(id)));
    report.status = changed(obj, status);
    report
}
