//! Finding or creating the remote deployment of a resource that has no
//! `status.deploymentId` yet: adoption, name conflicts and crash-safe create.
//!
//! The control plane has no idempotency key on create and no exact-name filter
//! (facts "Requests"), so a create that may have happened is never repeated
//! blindly. Following the pattern of external-resource operators (Crossplane's
//! `external-create-pending`), the operator:
//! 1. persists the [`CREATE_PENDING_ANNOTATION`] on the object,
//! 2. POSTs the deployment,
//! 3. writes `status.deploymentId`,
//! 4. removes the annotation.
//!
//! If it dies between 1 and 3, the next pass sees the annotation without an
//! id and resolves it by exact-name lookup (list with `name_contains`, then an
//! exact match): one match is the deployment it created; none means the POST
//! never landed; several cannot be told apart and stop with `Stalled`.

use kube::Api;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use tracing::info;

use super::report::{publish, report_cp_error, report_stalled, write_status};
use crate::api::conditions::reason;
use crate::api::deployment::{AgentDeployment, CREATE_PENDING_ANNOTATION};
use crate::controller::status::{Outcome, conditions};
use crate::controller::{Context, Error};
use crate::controlplane::types::{Deployment, DeploymentCreate};
use crate::controlplane::{ControlPlaneClient, Error as CpError, ListDeployments};

/// Result of [`obtain`]: the remote deployment, or the action to return
/// because the pass cannot go on (status already written).
pub enum Obtained {
    /// The remote deployment, recorded in status.
    Remote(Box<Deployment>),
    /// Stop this pass with this action.
    Stop(Action),
}

/// Sets or removes (`None`) an annotation with a JSON merge patch.
pub async fn set_annotation(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    key: &str,
    value: Option<&str>,
) -> Result<(), Error> {
    let patch = serde_json::json!({"metadata": {"annotations": {key: value}}});
    api.patch(
        &obj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(Error::Kube)?;
    Ok(())
}

/// True when the create-pending marker is on the object.
pub fn create_pending(obj: &AgentDeployment) -> bool {
    obj.annotations().contains_key(CREATE_PENDING_ANNOTATION)
}

/// Records `remote` as this resource's deployment in status at once.
async fn record(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    remote: &Deployment,
    secrets_hash: Option<String>,
    message: String,
) -> Result<(), Error> {
    let mut status = obj.status.clone().unwrap_or_default();
    status.deployment_id = Some(remote.id.clone());
    status.latest_revision_id = remote.latest_revision_id.clone();
    status.url = remote.source_config.custom_url.clone();
    status.deployment_status = remote.status.clone();
    status.observed_generation = obj.metadata.generation;
    if secrets_hash.is_some() {
        status.secrets_hash = secrets_hash;
    }
    status.conditions = conditions(
        &status.conditions,
        &Outcome::Progressing {
            reason: reason::CREATING,
            message,
        },
        obj.metadata.generation,
    );
    write_status(api, obj, status).await
}

/// Every remote deployment whose name is exactly `name`.
async fn named(cp: &ControlPlaneClient, name: &str) -> Result<Vec<Deployment>, CpError> {
    let found = cp
        .list_all_deployments(&ListDeployments {
            name_contains: Some(name.to_owned()),
            ..Default::default()
        })
        .await?;
    Ok(found.into_iter().filter(|d| d.name == name).collect())
}

/// Finds or creates the remote deployment of `obj` (which has no
/// `status.deploymentId`). `secrets_hash` is the hash of `body.secrets`,
/// stored with the id when this pass creates the deployment.
pub async fn obtain(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    ctx: &Context,
    cp: &ControlPlaneClient,
    body: &DeploymentCreate,
    secrets_hash: &str,
) -> Result<Obtained, Error> {
    // Adoption of an explicitly named deployment.
    if let Some(id) = &obj.spec.deployment_id {
        return match cp.get_deployment(id).await {
            Ok(remote) => {
                record(
                    api,
                    obj,
                    &remote,
                    None,
                    format!("adopted remote deployment {id}"),
                )
                .await?;
                publish(
                    ctx,
                    obj,
                    EventType::Normal,
                    "Adopted",
                    format!(
                        "adopted remote deployment {id} ({}); converging it to the spec",
                        remote.name
                    ),
                )
                .await;
                Ok(Obtained::Remote(Box::new(remote)))
            }
            Err(CpError::NotFound { .. }) => report_stalled(
                api,
                obj,
                ctx,
                reason::ADOPTION_FAILED,
                format!("spec.deploymentId {id} does not exist on the control plane"),
            )
            .await
            .map(Obtained::Stop),
            Err(e) => report_cp_error(api, obj, ctx, "get deployment to adopt", e)
                .await
                .map(Obtained::Stop),
        };
    }

    let pending = create_pending(obj);
    let existing = match named(cp, &body.name).await {
        Ok(found) => found,
        Err(e) => {
            return report_cp_error(api, obj, ctx, "look up deployment by name", e)
                .await
                .map(Obtained::Stop);
        }
    };
    match (existing.as_slice(), pending) {
        ([], _) => create(api, obj, ctx, cp, body, secrets_hash).await,
        ([remote], true) => {
            info!(deployment_id = %remote.id, "resolved an interrupted create by name");
            record(
                api,
                obj,
                remote,
                None,
                format!("found remote deployment {} created before a restart", remote.id),
            )
            .await?;
            set_annotation(api, obj, CREATE_PENDING_ANNOTATION, None).await?;
            publish(
                ctx,
                obj,
                EventType::Normal,
                "CreateRecovered",
                format!(
                    "a create was interrupted; found remote deployment {} named {} and recorded it instead of creating another",
                    remote.id, remote.name
                ),
            )
            .await;
            Ok(Obtained::Remote(Box::new(remote.clone())))
        }
        ([remote], false) => report_stalled(
            api,
            obj,
            ctx,
            reason::NAME_CONFLICT,
            format!(
                "a remote deployment named {} ({}) already exists and was not created by this resource; set spec.deploymentId to adopt it, or choose another spec.name",
                remote.name, remote.id
            ),
        )
        .await
        .map(Obtained::Stop),
        (many, true) => report_stalled(
            api,
            obj,
            ctx,
            reason::CREATE_OUTCOME_UNKNOWN,
            format!(
                "a create was interrupted and {} remote deployments are named {}; check them on the control plane, delete the duplicates, set spec.deploymentId to the one to keep and remove the annotation {CREATE_PENDING_ANNOTATION}",
                many.len(),
                body.name
            ),
        )
        .await
        .map(Obtained::Stop),
        (many, false) => report_stalled(
            api,
            obj,
            ctx,
            reason::NAME_CONFLICT,
            format!(
                "{} remote deployments named {} already exist and none was created by this resource; set spec.deploymentId to adopt one, or choose another spec.name",
                many.len(),
                body.name
            ),
        )
        .await
        .map(Obtained::Stop),
    }
}

/// Marker, POST, status, unmark.
async fn create(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    ctx: &Context,
    cp: &ControlPlaneClient,
    body: &DeploymentCreate,
    secrets_hash: &str,
) -> Result<Obtained, Error> {
    if !create_pending(obj) {
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        set_annotation(api, obj, CREATE_PENDING_ANNOTATION, Some(&now)).await?;
    }
    let remote = match cp.create_deployment(body).await {
        Ok(d) => d,
        Err(e) => {
            // An answer from the service (4xx) means nothing was created. No
            // answer, or a 5xx, leaves the outcome unknown: keep the marker so
            // the next pass looks the name up instead of creating again.
            let definite = matches!(e.status(), Some(s) if (400..500).contains(&s) && s != 429);
            if definite {
                set_annotation(api, obj, CREATE_PENDING_ANNOTATION, None).await?;
            }
            return report_cp_error(api, obj, ctx, "create deployment", e)
                .await
                .map(Obtained::Stop);
        }
    };
    info!(deployment_id = %remote.id, "created remote deployment");
    record(
        api,
        obj,
        &remote,
        Some(secrets_hash.to_owned()),
        format!("created remote deployment {}", remote.id),
    )
    .await?;
    set_annotation(api, obj, CREATE_PENDING_ANNOTATION, None).await?;
    publish(
        ctx,
        obj,
        EventType::Normal,
        "Created",
        format!("created remote deployment {} ({})", remote.id, remote.name),
    )
    .await;
    Ok(Obtained::Remote(Box::new(remote)))
}
