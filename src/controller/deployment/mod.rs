//! Reconciler of `AgentDeployment`: creates, patches and deletes the remote
//! deployment on the control plane and follows its latest revision.
//!
//! Each pass is observe → compute → act → report (spec "Endpoints", rule 2
//! "Recommended client flow"; facts "Requests" and "Revision"):
//! - observe: the AgentControlPlane, the referenced Secrets, the remote
//!   deployment (found or created by [`obtain`]);
//! - compute: the minimal PATCH ([`crate::controller::desired`]);
//! - act: PATCH, redeploy on request, read the latest revision;
//! - report: status and conditions ([`crate::controller::status`]), events.
//!
//! Deletion DELETEs the remote deployment (404 counts as done) and keeps the
//! finalizer until GET answers 404, since delete is asynchronous.

mod obtain;
mod report;

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use kube::{Api, ResourceExt};
use tracing::info;

use self::obtain::{Obtained, create_pending, obtain, set_annotation};
use self::report::{
    publish, report, report_blocked, report_cp_error, report_stalled, write_status,
};
use super::status::{Outcome, conditions, revision_outcome};
use super::{Context, Error, desired, jittered, object_key, requeue_after_error};
use super::{placement, resolve};
use crate::api::conditions::reason;
use crate::api::deployment::{
    AgentDeployment, AgentDeploymentStatus, CREATE_PENDING_ANNOTATION, DeletionPolicy, FINALIZER,
    PAUSED_ANNOTATION, REDEPLOY_ANNOTATION, RemoteDeletionPolicy,
};
use crate::controlplane::types::RevisionStatus;
use crate::controlplane::{ControlPlaneClient, Error as CpError};

/// True when the object carries `agentserver.dev/paused: "true"`.
pub fn is_paused(obj: &AgentDeployment) -> bool {
    obj.annotations()
        .get(PAUSED_ANNOTATION)
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// One reconcile pass: the finalizer helper dispatches to [`apply`] or
/// [`cleanup`].
///
/// Errors: Kubernetes API failures and transient control plane failures
/// (status is written before they are returned); input problems are reported
/// in status and are not errors.
#[tracing::instrument(skip_all, fields(namespace = obj.namespace().unwrap_or_default(), name = obj.name_any()))]
pub async fn reconcile(obj: Arc<AgentDeployment>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = obj
        .namespace()
        .ok_or(Error::MissingObjectKey("namespace"))?;
    let key = object_key(obj.as_ref());
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
    requeue_after_error(&ctx, obj.as_ref(), error)
}

/// True when `previous` was written by a pass that made the remote equal to
/// the spec of its `observedGeneration` and went on to follow the revision.
/// Passes that stopped early (paused, a missing input, a control plane error)
/// also record the generation, so a difference found after them comes from
/// the spec, not from a change made outside.
fn converged_before(previous: &AgentDeploymentStatus) -> bool {
    crate::api::conditions::find(&previous.conditions, crate::api::conditions::READY).is_some_and(
        |c| {
            [
                reason::REVISION_DEPLOYED,
                reason::REVISION_FAILED,
                reason::REVISION_INTERRUPTED,
                reason::REVISION_IN_PROGRESS,
            ]
            .contains(&c.reason.as_str())
        },
    )
}

async fn report_paused(api: &Api<AgentDeployment>, obj: &AgentDeployment) -> Result<(), Error> {
    report(
        api,
        obj,
        &Outcome::Paused {
            message: format!(
                "paused by the annotation {PAUSED_ANNOTATION}; no remote call is made"
            ),
        },
    )
    .await
}

async fn control_plane(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    ctx: &Context,
) -> Result<Result<ControlPlaneClient, Action>, Error> {
    let ns = obj
        .namespace()
        .ok_or(Error::MissingObjectKey("namespace"))?;
    match ctx
        .planes
        .client_for(
            &ctx.client,
            &ns,
            &obj.spec.control_plane_ref.name,
            ctx.config.request_timeout,
            Some(ctx.metrics.request_observer()),
        )
        .await?
    {
        Ok(cp) => Ok(Ok(cp)),
        Err(blocked) => report_blocked(api, obj, ctx, blocked).await.map(Err),
    }
}

/// Makes the remote deployment equal to the spec and follows its revision.
async fn apply(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    ctx: &Context,
) -> Result<Action, Error> {
    if is_paused(obj) {
        report_paused(api, obj).await?;
        return Ok(Action::await_change());
    }
    let ns = obj
        .namespace()
        .ok_or(Error::MissingObjectKey("namespace"))?;
    let key = object_key(obj);
    let previous = obj.status.clone().unwrap_or_default();
    if previous.deployment_id.is_some() && create_pending(obj) {
        // The id was recorded before a restart removed the marker.
        set_annotation(api, obj, CREATE_PENDING_ANNOTATION, None).await?;
    }

    // Observe the inputs. Nothing remote happens while one is missing.
    let cp = match control_plane(api, obj, ctx).await? {
        Ok(cp) => cp,
        Err(action) => return Ok(action),
    };
    let secrets = match resolve::deployment_secrets(&ctx.client, &ns, &obj.spec).await? {
        Ok(s) => s,
        Err(blocked) => return report_blocked(api, obj, ctx, blocked).await,
    };
    let mut body = desired::create_body(&obj.remote_name(), &obj.spec, secrets);
    if previous.deployment_id.is_none() {
        // Placement is checked before the create (listener fields are
        // immutable afterwards).
        match placement::resolve_listener(ctx, &cp, &ns, &obj.spec).await? {
            Ok(Some(listener_id)) => body.source_config.listener_id = Some(listener_id),
            Ok(None) => {}
            Err(blocked) => return report_blocked(api, obj, ctx, blocked).await,
        }
    }
    let salt = previous
        .secrets_hash
        .as_deref()
        .and_then(desired::salt_of)
        .map(str::to_owned)
        .unwrap_or_else(desired::new_salt);
    let secrets_hash = desired::secrets_hash(&salt, &body.secrets);

    // Observe the remote deployment, obtaining one if this resource has none.
    let mut stored_hash = previous.secrets_hash.clone();
    let mut created = false;
    let remote = match &previous.deployment_id {
        None => match obtain(api, obj, ctx, &cp, &body, &secrets_hash).await? {
            Obtained::Remote(d) => {
                created = create_pending(obj) || obj.spec.deployment_id.is_none();
                if created {
                    stored_hash = Some(secrets_hash.clone());
                }
                *d
            }
            Obtained::Stop(action) => return Ok(action),
        },
        Some(id) => match cp.get_deployment(id).await {
            Ok(d) if d.status.as_deref() == Some("AWAITING_DELETE") => {
                report(
                    api,
                    obj,
                    &Outcome::Progressing {
                        reason: reason::REMOTE_DELETED,
                        message: format!(
                            "remote deployment {id} is being deleted outside the operator"
                        ),
                    },
                )
                .await?;
                return Ok(Action::requeue(ctx.config.poll_interval));
            }
            Ok(d) => d,
            Err(CpError::NotFound { .. }) => return remote_deleted(api, obj, ctx, id).await,
            Err(e) => return report_cp_error(api, obj, ctx, "get deployment", e).await,
        },
    };

    // Compute and act: only what differs from the spec.
    let send_secrets = stored_hash.as_deref() != Some(secrets_hash.as_str());
    let patch = desired::compute_patch(&body, &remote, send_secrets && !created);
    let mut remote = remote;
    if !patch.is_empty() {
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
                let drift = previous.observed_generation == obj.metadata.generation
                    && previous.deployment_id.is_some()
                    && !created
                    && converged_before(&previous);
                let (event_reason, verb) = if drift {
                    ("DriftCorrected", "changed outside the operator; restored")
                } else {
                    ("Patched", "patched")
                };
                publish(
                    ctx,
                    obj,
                    EventType::Normal,
                    event_reason,
                    format!("{} of remote deployment {} {verb}", fields.join(", "), d.id),
                )
                .await;
                remote = d;
            }
            Err(e) => return report_cp_error(api, obj, ctx, "patch deployment", e).await,
        }
    }
    if patch.secrets.is_some() || created {
        stored_hash = Some(secrets_hash);
    }

    // Redeploy on a new value of the annotation (like `kubectl rollout restart`).
    let mut last_redeploy = previous.last_redeploy_requested_at.clone();
    let mut latest_revision_id = remote.latest_revision_id.clone();
    if let Some(requested) = obj.annotations().get(REDEPLOY_ANNOTATION)
        && last_redeploy.as_ref() != Some(requested)
    {
        if created || desired::creates_revision(&patch) {
            // This pass already started a new revision.
        } else {
            match cp.redeploy(&remote.id).await {
                Ok(revision) => {
                    publish(
                        ctx,
                        obj,
                        EventType::Normal,
                        "Redeployed",
                        format!(
                            "redeploy requested at {requested}: new revision {}",
                            revision.id
                        ),
                    )
                    .await;
                    latest_revision_id = Some(revision.id);
                }
                Err(e) => return report_cp_error(api, obj, ctx, "redeploy", e).await,
            }
        }
        last_redeploy = Some(requested.clone());
    }

    // Follow the latest revision. A revision that ended is not read again
    // until a new one exists.
    let known_ended = previous.latest_revision_id == latest_revision_id
        && previous
            .revision_status
            .clone()
            .map(RevisionStatus::from)
            .is_some_and(|s| !s.is_in_progress() && s != RevisionStatus::Skipped);
    let revision_status = match &latest_revision_id {
        None => None,
        Some(_) if known_ended => previous.revision_status.clone().map(RevisionStatus::from),
        Some(rid) => match cp.get_revision(&remote.id, rid).await {
            Ok(rev) => Some(rev.status),
            Err(e) => return report_cp_error(api, obj, ctx, "get revision", e).await,
        },
    };
    let outcome = match (&latest_revision_id, &revision_status) {
        (Some(rid), Some(RevisionStatus::Skipped)) => Outcome::Progressing {
            reason: reason::REVISION_IN_PROGRESS,
            message: format!("revision {rid} was SKIPPED; waiting for the newer revision"),
        },
        (Some(rid), Some(s)) => revision_outcome(rid, s),
        _ => Outcome::Progressing {
            reason: reason::REVISION_IN_PROGRESS,
            message: "the deployment has no revision yet".into(),
        },
    };

    // Report.
    let failed = matches!(outcome, Outcome::Stalled { .. });
    let status = AgentDeploymentStatus {
        observed_generation: obj.metadata.generation,
        deployment_id: Some(remote.id.clone()),
        latest_revision_id: latest_revision_id.clone(),
        revision_status: revision_status.as_ref().map(|s| s.to_string()),
        active_revision_id: remote.active_revision_id.clone(),
        deployment_status: remote.status.clone(),
        url: remote.source_config.custom_url.clone(),
        last_failed_revision_id: if failed {
            latest_revision_id.clone()
        } else {
            previous.last_failed_revision_id.clone()
        },
        last_failed_revision_status: if failed {
            revision_status.as_ref().map(|s| s.to_string())
        } else {
            previous.last_failed_revision_status.clone()
        },
        secrets_hash: stored_hash,
        last_redeploy_requested_at: last_redeploy,
        conditions: conditions(&previous.conditions, &outcome, obj.metadata.generation),
    };
    let revision_changed = previous.revision_status != status.revision_status
        || previous.latest_revision_id != status.latest_revision_id;
    if matches!(outcome, Outcome::Ready { .. })
        && let Some(seconds) = time_to_ready(obj)
    {
        ctx.metrics.observe_time_to_ready(seconds);
    }
    write_status(api, obj, status).await?;
    if revision_changed {
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
            Outcome::Stalled { message, .. } => {
                publish(
                    ctx,
                    obj,
                    EventType::Warning,
                    "RevisionFailed",
                    message.clone(),
                )
                .await
            }
            Outcome::Progressing { .. } | Outcome::Paused { .. } => {}
        }
    }

    Ok(match (&outcome, &latest_revision_id, &revision_status) {
        (Outcome::Progressing { .. }, rid, status) => {
            let state = format!(
                "{}/{}",
                rid.as_deref().unwrap_or(""),
                status.as_ref().map_or("", |s| s.as_str())
            );
            Action::requeue(ctx.poll_delay(&key, &state))
        }
        _ => {
            ctx.reset_polls(&key);
            Action::requeue(jittered(ctx.config.resync_interval))
        }
    })
}

/// Seconds from the start of the change (the `Reconciling=True` transition,
/// or the creation) to now, when the object was not Ready before; `None` when
/// it already was.
fn time_to_ready(obj: &AgentDeployment) -> Option<f64> {
    use crate::api::conditions::{READY, TRUE, find};
    let conditions = obj
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    if find(conditions, READY).is_some_and(|c| c.status == TRUE) {
        return None;
    }
    let since = find(conditions, super::status::RECONCILING)
        .filter(|c| c.status == TRUE)
        .map(|c| c.last_transition_time.0)
        .or_else(|| obj.metadata.creation_timestamp.as_ref().map(|t| t.0))?;
    let elapsed = k8s_openapi::jiff::Timestamp::now().duration_since(since);
    Some(elapsed.as_secs_f64().max(0.0))
}

/// The remote deployment answered 404 although status names it: it was
/// deleted outside the operator. Recreate it or stall, per
/// `spec.remoteDeletionPolicy`.
async fn remote_deleted(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    ctx: &Context,
    id: &str,
) -> Result<Action, Error> {
    if obj.spec.remote_deletion_policy == RemoteDeletionPolicy::Stall
        || obj.spec.deployment_id.is_some()
    {
        return report_stalled(
            api,
            obj,
            ctx,
            reason::REMOTE_DELETED,
            format!(
                "remote deployment {id} was deleted outside the operator; delete and re-create this resource (or set spec.remoteDeletionPolicy: Recreate without spec.deploymentId) to create a new one"
            ),
        )
        .await;
    }
    publish(
        ctx,
        obj,
        EventType::Warning,
        "RemoteDeleted",
        format!("remote deployment {id} was deleted outside the operator; creating it again"),
    )
    .await;
    // Forget the old id and secrets hash; the next pass creates a new one.
    let mut status = obj.status.clone().unwrap_or_default();
    status.deployment_id = None;
    status.latest_revision_id = None;
    status.revision_status = None;
    status.active_revision_id = None;
    status.secrets_hash = None;
    status.conditions = conditions(
        &status.conditions,
        &Outcome::Progressing {
            reason: reason::CREATING,
            message: format!(
                "remote deployment {id} was deleted outside the operator; creating it again"
            ),
        },
        obj.metadata.generation,
    );
    write_status(api, obj, status).await?;
    Ok(Action::requeue(Duration::from_millis(100)))
}

/// Deletes the remote deployment (per `spec.deletionPolicy`); the finalizer
/// is removed only once GET answers 404.
async fn cleanup(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    ctx: &Context,
) -> Result<Action, Error> {
    if obj.spec.deletion_policy == DeletionPolicy::Orphan {
        if let Some(id) = obj.status.as_ref().and_then(|s| s.deployment_id.as_deref()) {
            publish(
                ctx,
                obj,
                EventType::Normal,
                "Orphaned",
                format!("left remote deployment {id} running (deletionPolicy: Orphan)"),
            )
            .await;
        }
        return Ok(Action::await_change());
    }
    if is_paused(obj) {
        report_paused(api, obj).await?;
        return Err(Error::DeletionBlocked(format!(
            "paused by the annotation {PAUSED_ANNOTATION}"
        )));
    }
    let known_id = obj.status.as_ref().and_then(|s| s.deployment_id.clone());
    if known_id.is_none() && !create_pending(obj) {
        return Ok(Action::await_change());
    }
    let cp = match control_plane(api, obj, ctx).await? {
        Ok(cp) => cp,
        Err(_) => {
            let message = obj
                .status
                .as_ref()
                .and_then(|s| crate::api::conditions::find(&s.conditions, super::status::STALLED))
                .map(|c| c.message.clone())
                .unwrap_or_default();
            return Err(Error::DeletionBlocked(format!(
                "{message}; set spec.deletionPolicy: Orphan to release the resource without deleting the remote deployment"
            )));
        }
    };
    let id = match known_id {
        Some(id) => id,
        None => {
            // A create was interrupted: look the name up before leaving.
            let name = obj.remote_name();
            match cp.find_deployment_by_name(&name).await {
                Ok(Some(d)) => d.id,
                Ok(None) => return Ok(Action::await_change()),
                Err(e) => {
                    return Err(Error::ControlPlane {
                        operation: "look up deployment by name",
                        source: e,
                    });
                }
            }
        }
    };
    match cp.delete_deployment(&id).await {
        Ok(()) | Err(CpError::NotFound { .. }) => {}
        Err(e) => {
            let outcome = report::error_outcome("delete deployment", &e);
            report(api, obj, &outcome).await?;
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
