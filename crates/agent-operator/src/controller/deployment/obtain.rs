//! Finding or creating the remote deployment of a resource that has no
//! `status.deploymentId` yet: adoption, restore, name conflicts and
//! crash-safe create. Always called on a fresh read of the object.
//!
//! The control plane has no idempotency key on create and no exact-name filter
//! (docs/control-plane-api.md "Requests"), so a create that may have happened is never repeated
//! blindly. Following the pattern of external-resource operators (Crossplane's
//! `external-create-pending`), the operator:
//! 1. persists the [`CREATE_PENDING_ANNOTATION`] on the object, with the
//!    finalizer when the object has none yet, in one metadata write (the
//!    only write before a remote call),
//! 2. POSTs the deployment,
//! 3. replaces the marker with the [`DEPLOYMENT_ID_ANNOTATION`] (the
//!    durable record of the id); the status that records
//!    `status.deploymentId` is written in the same pass only when the
//!    revision is worth showing, else by the pass that sees it Ready
//!    ([`crate::plan::steps::status_unshown`]).
//!
//! If it dies between 1 and 3, the next pass sees the marker without an id
//! and resolves it by exact-name lookup (list with `name_contains`, then an
//! exact match): one match is the deployment it created; none means the POST
//! never landed; several cannot be told apart and stop with `Stalled`. A
//! resource restored from a backup without status (Velero's default) finds
//! its deployment through the id annotation.

use crate::controller::kind::Requeue;
use crate::plan::verdict::EventType;
use kube::ResourceExt;
use tracing::info;

use super::pass::Pass;
use super::report::Flow;
use crate::api::conditions::reason;
use crate::api::deployment::{
    CREATE_PENDING_ANNOTATION, DEPLOYMENT_ID_ANNOTATION, FINALIZER, ManagementPolicy,
};
use crate::controller::jittered;
use crate::controller::kind::set_metadata;
use crate::controlplane::Error as CpError;
use crate::controlplane::types::{Deployment, DeploymentCreate};
use crate::plan::adoption;
use crate::plan::policy;
use crate::plan::status::Outcome;
use crate::plan::steps::{self, ByName};
use crate::plan::verdict::Note;

/// A deployment found or created by [`obtain`].
pub struct ObtainedDeployment {
    /// The remote deployment.
    pub deployment: Box<Deployment>,
    /// This pass created it (its first revision has just started).
    pub created: bool,
    /// Found after an interrupted create, or through the id annotation.
    pub recovered: bool,
}

fn found(deployment: Deployment, created: bool, recovered: bool) -> Flow<ObtainedDeployment> {
    Ok(ObtainedDeployment {
        deployment: Box::new(deployment),
        created,
        recovered,
    })
}

/// Ends the pass with `Stalled` (`reason`, `message`), checked again on the
/// slow resync or when the object changes.
fn stall(pass: &mut Pass<'_>, reason: &'static str, message: String) -> Flow<ObtainedDeployment> {
    let resync = Requeue::after(jittered(pass.ctx.config.resync_interval));
    Err(pass.finish(&Outcome::Stalled { reason, message }, Ok(resync)))
}

/// Finds or creates the remote deployment of `pass.obj` (which has no
/// `status.deploymentId`).
pub async fn obtain(pass: &mut Pass<'_>, body: &DeploymentCreate) -> Flow<ObtainedDeployment> {
    let obj = pass.obj;
    let cp = pass.cp;
    let observe = obj.spec.management_policy == ManagementPolicy::Observe;
    // Adoption of an explicitly named deployment.
    if let Some(id) = &obj.spec.deployment_id {
        return adopt(pass, body, id).await;
    }

    // Restored without status: the id annotation names the deployment.
    if let Some(id) = obj.annotations().get(DEPLOYMENT_ID_ANNOTATION) {
        match cp.get_deployment(id).await {
            Ok(remote) if remote.name == body.name => {
                pass.events.push((
                    EventType::Normal,
                    "CreateRecovered",
                    format!(
                        "status had no deployment id; recorded remote deployment {id} named by the annotation {DEPLOYMENT_ID_ANNOTATION}"
                    ),
                ));
                return found(remote, false, true);
            }
            // Gone, or renamed: fall through to the name lookup.
            Ok(_) | Err(CpError::NotFound { .. }) => {}
            Err(e) => {
                return Err(pass.fail("get deployment named by the annotation", e));
            }
        }
    }

    if observe {
        return observe_by_name(pass, body).await;
    }
    by_name(pass, body).await
}

/// Adopts the deployment `id` named by `spec.deploymentId`: stalls when
/// it does not exist, or when a field the service cannot change differs
/// (it could never be converged: said so instead of reporting a match).
async fn adopt(pass: &mut Pass<'_>, body: &DeploymentCreate, id: &str) -> Flow<ObtainedDeployment> {
    let obj = pass.obj;
    let observe = obj.spec.management_policy == ManagementPolicy::Observe;
    match pass.cp.get_deployment(id).await {
        Ok(remote) => {
            let differ = adoption::mismatches(body, &remote, obj.spec.name.is_some());
            if !differ.is_empty() {
                return stall(
                    pass,
                    reason::ADOPTION_MISMATCH,
                    adoption::mismatch_message(&remote.name, id, &differ),
                );
            }
            pass.events.push(adopted(id, &remote.name, observe));
            found(remote, false, false)
        }
        Err(CpError::NotFound { .. }) if observe => stall(
            pass,
            reason::NOTHING_TO_OBSERVE,
            format!(
                "spec.deploymentId {id} does not exist on the control plane; nothing is created while spec.managementPolicy is Observe"
            ),
        ),
        Err(CpError::NotFound { .. }) => stall(
            pass,
            reason::ADOPTION_FAILED,
            format!("spec.deploymentId {id} does not exist on the control plane"),
        ),
        Err(e) => Err(pass.fail("get deployment to adopt", e)),
    }
}

/// The event of an adoption of `id` (`name`): converged to the spec, or
/// only observed.
fn adopted(id: &str, name: &str, observe: bool) -> Note {
    let then = if observe {
        "observing it (managementPolicy: Observe): nothing is changed, differences are listed in status.drift"
    } else {
        "converging it to the spec"
    };
    (
        EventType::Normal,
        "Adopted",
        format!("adopted remote deployment {id} ({name}); {then}"),
    )
}

/// `spec.managementPolicy: Observe` without a deployment id: adopts the
/// one deployment with the resource's name ([`policy::by_name`]); never
/// creates one.
async fn observe_by_name(pass: &mut Pass<'_>, body: &DeploymentCreate) -> Flow<ObtainedDeployment> {
    let cp = pass.cp;
    let plane = super::plane_key(cp);
    let existing = match pass.ctx.names.lookup(&plane, cp, &body.name).await {
        Ok(found) => found,
        Err(e) => return Err(pass.fail("look up deployment by name", e)),
    };
    match (policy::by_name(existing.len()), existing.first()) {
        (policy::ByName::Adopt, Some(remote)) => {
            let differ = adoption::mismatches(body, remote, true);
            if !differ.is_empty() {
                return stall(
                    pass,
                    reason::ADOPTION_MISMATCH,
                    adoption::mismatch_message(&remote.name, &remote.id, &differ),
                );
            }
            pass.events.push(adopted(&remote.id, &remote.name, true));
            found(remote.clone(), false, false)
        }
        (policy::ByName::Ambiguous(many), _) => stall(
            pass,
            reason::NAME_CONFLICT,
            format!(
                "{many} remote deployments are named {}; set spec.deploymentId to the one to observe",
                body.name
            ),
        ),
        _ => stall(
            pass,
            reason::NOTHING_TO_OBSERVE,
            format!(
                "no remote deployment is named {}; nothing is created while spec.managementPolicy is Observe (set spec.deploymentId or spec.name to the deployment to observe, or set it to Manage to create one)",
                body.name
            ),
        ),
    }
}

/// Finds the deployment by its name (after an interrupted create, the one
/// it made), or creates it when there is none; a name taken by others, or
/// several matches after an interrupted create, stall.
async fn by_name(pass: &mut Pass<'_>, body: &DeploymentCreate) -> Flow<ObtainedDeployment> {
    let cp = pass.cp;
    let pending = pass.obj.create_pending();
    // After an interrupted create, an exact fresh listing (crash safety);
    // otherwise a lookup a fleet of creates can share.
    let plane = super::plane_key(cp);
    let lookup = if pending {
        cp.deployments_named(&body.name).await
    } else {
        pass.ctx.names.lookup(&plane, cp, &body.name).await
    };
    let existing = match lookup {
        Ok(found) => found,
        Err(e) => {
            return Err(pass.fail("look up deployment by name", e));
        }
    };
    match (steps::by_name(existing.len(), pending), existing.first()) {
        (ByName::Create, _) | (_, None) => create(pass, body).await,
        (ByName::Recovered, Some(remote)) => {
            info!(deployment_id = %remote.id, "resolved an interrupted create by name");
            pass.events.push((
                EventType::Normal,
                "CreateRecovered",
                format!(
                    "a create was interrupted; found remote deployment {} named {} and recorded it instead of creating another",
                    remote.id, remote.name
                ),
            ));
            found(remote.clone(), false, true)
        }
        (ByName::Conflict, Some(remote)) => stall(
            pass,
            reason::NAME_CONFLICT,
            format!(
                "a remote deployment named {} ({}) already exists and was not created by this resource; set spec.deploymentId to adopt it, or choose another spec.name",
                remote.name, remote.id
            ),
        ),
        (ByName::CreateOutcomeUnknown(many), _) => stall(
            pass,
            reason::CREATE_OUTCOME_UNKNOWN,
            format!(
                "a create was interrupted and {many} remote deployments are named {}; check them on the control plane, delete the duplicates, set spec.deploymentId to the one to keep and remove the annotation {CREATE_PENDING_ANNOTATION}",
                body.name
            ),
        ),
        (ByName::ConflictMany(many), _) => stall(
            pass,
            reason::NAME_CONFLICT,
            format!(
                "{many} remote deployments named {} already exist and none was created by this resource; set spec.deploymentId to adopt one, or choose another spec.name",
                body.name
            ),
        ),
    }
}

/// Marker (with the finalizer, when the object has none yet), POST; the
/// marker is replaced by the id annotation, the pass's durable record of
/// the id, and the status is written when a user reads something from it
/// ([`steps::status_unshown`]).
async fn create(pass: &mut Pass<'_>, body: &DeploymentCreate) -> Flow<ObtainedDeployment> {
    if !pass.obj.create_pending() {
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        // An object that names no deployment gets its finalizer here
        // (`Kind::finalizer_with_first_write`); any other got it before
        // the pass's first request.
        let finalizer = super::finalizer_with_marker(pass.obj).then_some(FINALIZER);
        set_metadata(
            pass.api,
            pass.obj,
            finalizer,
            &[(CREATE_PENDING_ANNOTATION, Some(&now))],
        )
        .await?;
    }
    let remote = match pass.cp.create_deployment(body).await {
        Ok(d) => d,
        Err(e) => {
            // An answer from the service (4xx) means nothing was created. No
            // answer, or a 5xx, leaves the outcome unknown: keep the marker so
            // the next pass looks the name up instead of creating again.
            let nothing_created = steps::nothing_created(e.status());
            let mut report = pass.fail("create deployment", e);
            if nothing_created {
                // After the status: the marker goes.
                report.annotations = vec![(CREATE_PENDING_ANNOTATION, None)];
            }
            return Err(report);
        }
    };
    info!(deployment_id = %remote.id, "created remote deployment");
    let (plane, made) = (super::plane_key(pass.cp), remote.clone());
    pass.remember
        .push(move |ctx| ctx.names.created(&plane, &made));
    // No event of its own: the outcome of the revision it started is the
    // deployment's one event (`RevisionDeployed`, or a Warning).
    found(remote, true, false)
}
