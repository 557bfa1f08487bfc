//! Reconciler of `AgentDeployment`: creates, patches and deletes the remote
//! deployment on the control plane and follows its latest revision.
//!
//! Flow (spec "Endpoints", rule 2 "Recommended client flow"): create the
//! deployment and record its id at once; follow `latest_revision_id` until
//! DEPLOYED or failed; on a spec change PATCH only what differs and follow the
//! new revision; on delete DELETE it (404 counts as done) and keep the
//! finalizer until GET answers 404 (facts "Requests": delete is asynchronous).

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use kube::{Api, Resource, ResourceExt};
use tracing::{info, warn};

use super::resolve::{self, Blocked};
use super::status::{Outcome, conditions, revision_outcome};
use super::{Context, Error, desired};
use crate::api::FIELD_MANAGER;
use crate::api::conditions::reason;
use crate::api::deployment::{AgentDeployment, AgentDeploymentStatus, FINALIZER};
use crate::controlplane::types::{Deployment, RevisionStatus};
use crate::controlplane::{ControlPlaneClient, Error as CpError};

fn object_key(obj: &AgentDeployment) -> String {
    format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any())
}

/// One reconcile pass: the finalizer helper dispatches to [`apply`] or
/// [`cleanup`].
#[tracing::instrument(skip_all, fields(namespace = obj.namespace().unwrap_or_default(), name = obj.name_any()))]
pub async fn reconcile(obj: Arc<AgentDeployment>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = obj
        .namespace()
        .ok_or(Error::MissingObjectKey("namespace"))?;
    let key = object_key(&obj);
    let api: Api<AgentDeployment> = Api::namespaced(ctx.client.clone(), &ns);
    let result = finalizer(&api, FINALIZER, obj, |event| async {
        match event {
            FinalizerEvent::Apply(obj) => apply(&api, &obj, &ctx).await,
            FinalizerEvent::Cleanup(obj) => cleanup(&api, &obj, &ctx).await,
        }
    })
    .await
    .map_err(|e| match e {
        kube::runtime::finalizer::Error::ApplyFailed(e)
        | kube::runtime::finalizer::Error::CleanupFailed(e) => e,
        other => Error::Finalizer(Box::new(other)),
    });
    if result.is_ok() {
        ctx.reset_backoff(&key);
    }
    result
}

/// Requeue policy for failed passes: the service's `Retry-After` if longer,
/// else exponential backoff per object; a pending deletion is polled.
pub fn error_policy(obj: Arc<AgentDeployment>, error: &Error, ctx: Arc<Context>) -> Action {
    if let Error::DeletionPending(_) = error {
        return Action::requeue(ctx.config.poll_interval);
    }
    let backoff = ctx.backoff(&object_key(&obj));
    let delay = error.retry_after().map_or(backoff, |r| r.max(backoff));
    warn!(
        namespace = obj.namespace().unwrap_or_default(),
        name = obj.name_any(),
        reason = error.reason(),
        error = %error,
        retry_in_s = delay.as_secs_f64(),
        "reconcile failed"
    );
    Action::requeue(delay)
}

fn jittered(d: Duration) -> Duration {
    d.mul_f64(rand::random_range(0.9..1.1))
}

async fn publish(
    ctx: &Context,
    obj: &AgentDeployment,
    type_: EventType,
    reason: &str,
    note: String,
) {
    let event = Event {
        type_,
        reason: reason.to_owned(),
        note: Some(note),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &obj.object_ref(&())).await {
        warn!(error = %e, "cannot publish event");
    }
}

async fn write_status(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    status: AgentDeploymentStatus,
) -> Result<(), Error> {
    if obj.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let patch = serde_json::json!({
        "apiVersion": AgentDeployment::api_version(&()),
        "kind": AgentDeployment::kind(&()),
        "status": status,
    });
    api.patch_status(
        &obj.name_any(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(Error::Kube)?;
    Ok(())
}

/// Writes `outcome` to the conditions, keeping the other status fields.
async fn report(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    outcome: &Outcome,
) -> Result<(), Error> {
    let mut status = obj.status.clone().unwrap_or_default();
    status.observed_generation = obj.metadata.generation;
    status.conditions = conditions(&status.conditions, outcome, obj.metadata.generation);
    write_status(api, obj, status).await
}

/// Reports a missing input and waits for a watch (or the blocked interval).
async fn report_blocked(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    ctx: &Context,
    blocked: Blocked,
) -> Result<Action, Error> {
    let was_same = obj
        .status
        .as_ref()
        .and_then(|s| crate::api::conditions::find(&s.conditions, super::status::STALLED))
        .is_some_and(|c| c.message == blocked.message && c.status == "True");
    if !was_same {
        publish(
            ctx,
            obj,
            EventType::Warning,
            blocked.reason,
            blocked.message.clone(),
        )
        .await;
    }
    report(
        api,
        obj,
        &Outcome::Stalled {
            reason: blocked.reason,
            message: blocked.message,
        },
    )
    .await?;
    Ok(Action::requeue(ctx.config.blocked_interval))
}

/// Maps a control plane error to a status outcome. Transient errors are
/// reported as progressing and returned as errors (backoff); others stall.
fn error_outcome(operation: &str, e: &CpError) -> Outcome {
    let message = format!("{operation}: {e}");
    match e {
        CpError::Unauthorized { .. } | CpError::Forbidden { .. } => Outcome::Stalled {
            reason: reason::UNAUTHORIZED,
            message,
        },
        CpError::Conflict { .. } => Outcome::Stalled {
            reason: reason::NAME_CONFLICT,
            message,
        },
        e if e.is_transient() => Outcome::Progressing {
            reason: reason::CONTROL_PLANE_UNAVAILABLE,
            message,
        },
        _ => Outcome::Stalled {
            reason: reason::INVALID_SPEC,
            message,
        },
    }
}

/// Reports a control plane error; transient errors are returned for backoff.
async fn report_cp_error(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    ctx: &Context,
    operation: &'static str,
    e: CpError,
) -> Result<Action, Error> {
    let outcome = error_outcome(operation, &e);
    publish(
        ctx,
        obj,
        EventType::Warning,
        outcome.reason(),
        format!("{operation}: {e}"),
    )
    .await;
    report(api, obj, &outcome).await?;
    if e.is_transient() {
        Err(Error::ControlPlane {
            operation,
            source: e,
        })
    } else {
        Ok(Action::requeue(jittered(ctx.config.resync_interval)))
    }
}

/// Creates the remote deployment and records its id in status at once.
async fn create(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    ctx: &Context,
    cp: &ControlPlaneClient,
    body: &crate::controlplane::types::DeploymentCreate,
) -> Result<Result<Deployment, Action>, Error> {
    let remote = match cp.create_deployment(body).await {
        Ok(d) => d,
        Err(e) => {
            return report_cp_error(api, obj, ctx, "create deployment", e)
                .await
                .map(Err);
        }
    };
    info!(deployment_id = %remote.id, "created remote deployment");
    let mut status = obj.status.clone().unwrap_or_default();
    status.deployment_id = Some(remote.id.clone());
    status.latest_revision_id = remote.latest_revision_id.clone();
    status.url = remote.source_config.custom_url.clone();
    status.observed_generation = obj.metadata.generation;
    status.conditions = conditions(
        &status.conditions,
        &Outcome::Progressing {
            reason: reason::CREATING,
            message: format!("created remote deployment {}", remote.id),
        },
        obj.metadata.generation,
    );
    write_status(api, obj, status).await?;
    publish(
        ctx,
        obj,
        EventType::Normal,
        "Created",
        format!("created remote deployment {} ({})", remote.id, remote.name),
    )
    .await;
    Ok(Ok(remote))
}

/// Makes the remote deployment equal to the spec and follows its revision.
async fn apply(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    ctx: &Context,
) -> Result<Action, Error> {
    let ns = obj
        .namespace()
        .ok_or(Error::MissingObjectKey("namespace"))?;
    let previous = obj.status.clone().unwrap_or_default();

    let cp = match resolve::control_plane_client(
        &ctx.client,
        &ns,
        &obj.spec.control_plane_ref.name,
        ctx.config.request_timeout,
    )
    .await?
    {
        Ok(cp) => cp,
        Err(blocked) => return report_blocked(api, obj, ctx, blocked).await,
    };
    let secrets = match resolve::deployment_secrets(&ctx.client, &ns, &obj.spec).await? {
        Ok(s) => s,
        Err(blocked) => return report_blocked(api, obj, ctx, blocked).await,
    };
    let body = desired::create_body(&obj.remote_name(), &obj.spec, secrets);

    // Observe: the remote deployment, created if this resource has none yet.
    let remote = match &previous.deployment_id {
        None => match create(api, obj, ctx, &cp, &body).await? {
            Ok(d) => d,
            Err(action) => return Ok(action),
        },
        Some(id) => {
            match cp.get_deployment(id).await {
                Ok(d) => d,
                Err(CpError::NotFound { .. }) => {
                    publish(
                    ctx,
                    obj,
                    EventType::Warning,
                    "RemoteDeleted",
                    format!("remote deployment {id} was deleted outside the operator; creating it again"),
                )
                .await;
                    match create(api, obj, ctx, &cp, &body).await? {
                        Ok(d) => d,
                        Err(action) => return Ok(action),
                    }
                }
                Err(e) => return report_cp_error(api, obj, ctx, "get deployment", e).await,
            }
        }
    };

    // Act: patch only what differs from the spec.
    let patch = desired::compute_patch(&body, &remote);
    let remote = if patch.is_empty() {
        remote
    } else {
        match cp.patch_deployment(&remote.id, &patch).await {
            Ok(d) => {
                let fields: Vec<&str> = [
                    patch.source_config.as_ref().map(|_| "source_config"),
                    patch
                        .source_revision_config
                        .as_ref()
                        .map(|_| "source_revision_config"),
                    patch.secrets.as_ref().map(|_| "secrets"),
                ]
                .into_iter()
                .flatten()
                .collect();
                publish(
                    ctx,
                    obj,
                    EventType::Normal,
                    "Patched",
                    format!(
                        "patched {} of remote deployment {}",
                        fields.join(", "),
                        d.id
                    ),
                )
                .await;
                d
            }
            Err(e) => return report_cp_error(api, obj, ctx, "patch deployment", e).await,
        }
    };

    // Follow the latest revision (a SKIPPED one is superseded by the
    // deployment's newer latest revision, which this reads).
    let (outcome, revision_status) = match &remote.latest_revision_id {
        Some(rid) => match cp.get_revision(&remote.id, rid).await {
            Ok(rev) => (revision_outcome(rid, &rev.status), Some(rev.status)),
            Err(e) => return report_cp_error(api, obj, ctx, "get revision", e).await,
        },
        None => (
            Outcome::Progressing {
                reason: reason::REVISION_IN_PROGRESS,
                message: "the deployment has no revision yet".into(),
            },
            None,
        ),
    };
    let outcome = match (&outcome, &revision_status) {
        (Outcome::Progressing { .. }, Some(RevisionStatus::Skipped)) => Outcome::Progressing {
            reason: reason::REVISION_IN_PROGRESS,
            message: "the latest revision was SKIPPED; waiting for the next one".into(),
        },
        _ => outcome,
    };

    // Report.
    let status = AgentDeploymentStatus {
        observed_generation: obj.metadata.generation,
        deployment_id: Some(remote.id.clone()),
        latest_revision_id: remote.latest_revision_id.clone(),
        revision_status: revision_status.as_ref().map(|s| s.to_string()),
        active_revision_id: remote.active_revision_id.clone(),
        deployment_status: remote.status.clone(),
        url: remote.source_config.custom_url.clone(),
        conditions: conditions(&previous.conditions, &outcome, obj.metadata.generation),
    };
    let changed_revision_state = previous.revision_status != status.revision_status
        || previous.latest_revision_id != status.latest_revision_id;
    write_status(api, obj, status).await?;
    if changed_revision_state {
        match &outcome {
            Outcome::Ready { message, .. } => {
                publish(
                    ctx,
                    obj,
                    EventType::Normal,
                    "RevisionDeployed",
                    message.clone(),
                )
                .await
            }
            Outcome::Stalled { reason, message } => {
                publish(ctx, obj, EventType::Warning, reason, message.clone()).await
            }
            Outcome::Progressing { .. } => {}
        }
    }

    Ok(match outcome {
        Outcome::Progressing { .. } => Action::requeue(ctx.config.poll_interval),
        Outcome::Ready { .. } | Outcome::Stalled { .. } => {
            Action::requeue(jittered(ctx.config.resync_interval))
        }
    })
}

/// Deletes the remote deployment; the finalizer is removed only once GET
/// answers 404.
async fn cleanup(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    ctx: &Context,
) -> Result<Action, Error> {
    let ns = obj
        .namespace()
        .ok_or(Error::MissingObjectKey("namespace"))?;
    let Some(id) = obj.status.as_ref().and_then(|s| s.deployment_id.clone()) else {
        return Ok(Action::await_change());
    };
    let cp = match resolve::control_plane_client(
        &ctx.client,
        &ns,
        &obj.spec.control_plane_ref.name,
        ctx.config.request_timeout,
    )
    .await?
    {
        Ok(cp) => cp,
        Err(blocked) => {
            report_blocked(api, obj, ctx, blocked.clone()).await?;
            return Err(Error::ControlPlane {
                operation: "delete deployment",
                source: CpError::InvalidEndpoint(blocked.message),
            });
        }
    };
    match cp.delete_deployment(&id).await {
        Ok(()) | Err(CpError::NotFound { .. }) => {}
        Err(e) => {
            return Err(Error::ControlPlane {
                operation: "delete deployment",
                source: e,
            });
        }
    }
    match cp.get_deployment(&id).await {
        Err(CpError::NotFound { .. }) => {
            info!(deployment_id = %id, "remote deployment deleted");
            publish(
                ctx,
                obj,
                EventType::Normal,
                "Deleted",
                format!("deleted remote deployment {id}"),
            )
            .await;
            Ok(Action::await_change())
        }
        Ok(remote) => {
            let mut status = obj.status.clone().unwrap_or_default();
            status.deployment_status = remote.status.clone();
            status.conditions = conditions(
                &status.conditions,
                &Outcome::Progressing {
                    reason: reason::DELETING,
                    message: format!(
                        "waiting for remote deployment {id} to be deleted (status {})",
                        remote.status.as_deref().unwrap_or("unknown")
                    ),
                },
                obj.metadata.generation,
            );
            write_status(api, obj, status).await?;
            Err(Error::DeletionPending(id))
        }
        Err(e) => Err(Error::ControlPlane {
            operation: "get deployment",
            source: e,
        }),
    }
}
