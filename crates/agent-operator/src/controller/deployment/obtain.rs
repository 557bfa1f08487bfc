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
//!    durable record of the id, which a restore without status keeps),
//!    then writes the status that records `status.deploymentId` (so that
//!    the fields the control plane cannot change are locked at admission
//!    from then on). Written in this order, the annotation's write is
//!    admitted before the lock exists, without its comparison of the
//!    whole spec; if the status write fails, the next pass finds the id in
//!    the annotation.
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

use super::change::change;
use super::pass::{Acted, Pass, RemoteView};
use super::plane::plane_key;
use super::report::{Flow, Report};
use crate::api::conditions::reason;
use crate::api::deployment::{
    AdoptionPolicy, AgentDeployment, CREATE_PENDING_ANNOTATION, DEPLOYMENT_ID_ANNOTATION,
    FINALIZER, HANDED_OVER_FROM_ANNOTATION, ManagementPolicy,
};
use crate::controller::kind::set_metadata;
use crate::controller::requeue::jittered;
use crate::controller::{integrations, placement};
use crate::controlplane::Error as CpError;
use crate::controlplane::types::{Deployment, DeploymentCreate};
use crate::plan::adoption;
use crate::plan::claims::{self, Holder, PlaneId};
use crate::plan::policy;
use crate::plan::shapes;
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

    // Restored without status, or handed over by the object that held it:
    // the id annotation names the deployment.
    if let Some(id) = obj.annotations().get(DEPLOYMENT_ID_ANNOTATION) {
        one_owner(pass, id, None, reason::ALREADY_OWNED).await?;
        match cp.get_deployment(id).await {
            Ok(remote) if remote.name == body.name => {
                let differ = adoption::mismatches(body, &remote, true);
                if !differ.is_empty() {
                    return stall(
                        pass,
                        reason::ADOPTION_MISMATCH,
                        adoption::mismatch_message(&remote.name, id, &differ),
                    );
                }
                let event = taken_over(pass.obj, id, &remote.name).unwrap_or_else(|| {
                    (
                        EventType::Normal,
                        "CreateRecovered",
                        format!(
                            "status had no deployment id; recorded remote deployment {id} named by the annotation {DEPLOYMENT_ID_ANNOTATION}"
                        ),
                    )
                });
                pass.events.push(event);
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
    // A deployment another object holds is not adopted: refused before
    // any request.
    one_owner(pass, id, None, reason::ALREADY_OWNED).await?;
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
            let event = taken_over(obj, id, &remote.name)
                .unwrap_or_else(|| adopted(id, &remote.name, observe));
            pass.events.push(event);
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
    let plane = super::plane::plane_key(cp);
    let existing = match pass.ctx.state.names.lookup(&plane, cp, &body.name).await {
        Ok(found) => found,
        Err(e) => return Err(pass.fail("look up deployment by name", e)),
    };
    match (policy::by_name(existing.len()), existing.first()) {
        (policy::ByName::Adopt, Some(remote)) => {
            one_owner(pass, &remote.id, Some(&remote.name), reason::NAME_CONFLICT).await?;
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
    let plane = super::plane::plane_key(cp);
    let lookup = if pending {
        cp.deployments_named(&body.name).await
    } else {
        pass.ctx.state.names.lookup(&plane, cp, &body.name).await
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
        (ByName::Conflict, Some(remote)) => {
            let remote = remote.clone();
            taken(pass, body, remote).await
        }
        (ByName::CreateOutcomeUnknown(many), _) => stall(
            pass,
            reason::CREATE_OUTCOME_UNKNOWN,
            format!(
                "a create was interrupted and {many} remote deployments are named {}; check them on the control plane, delete the duplicates, set spec.deploymentId to the one to keep and remove the annotation {CREATE_PENDING_ANNOTATION}",
                body.name
            ),
        ),
        (ByName::ConflictMany(many), _) => {
            let held = held_among(pass, &existing);
            stall(
                pass,
                reason::NAME_CONFLICT,
                format!(
                    "{many} remote deployments named {} already exist and none was created by this resource{held}; set spec.deploymentId to adopt one no other AgentDeployment holds, or choose another spec.name",
                    body.name
                ),
            )
        }
    }
}

/// The one deployment named like this resource exists and this resource
/// did not create it: held by another AgentDeployment of the cluster, it is
/// a `NameConflict` naming it (or a wait for its hand-over, when that one
/// is being deleted); being deleted on the control plane, a wait before
/// the create; held by none, adopted under `spec.adoptionPolicy: ByName`
/// (its fixed fields compared first), else a `NameConflict` that says how
/// to adopt it.
async fn taken(
    pass: &mut Pass<'_>,
    body: &DeploymentCreate,
    remote: Deployment,
) -> Flow<ObtainedDeployment> {
    one_owner(pass, &remote.id, Some(&remote.name), reason::NAME_CONFLICT).await?;
    if super::deleting::is_deleting(remote.status.as_deref()) {
        let shown = remote.status.as_deref().unwrap_or_default();
        let message = format!(
            "a remote deployment named {} ({}) is being deleted on the control plane ({shown}); this resource creates its own once it is gone",
            remote.name, remote.id
        );
        let wait = pass.deleting_elsewhere(&remote.id);
        return Err(pass.finish(
            &Outcome::Progressing {
                reason: reason::NAME_RELEASING,
                message,
            },
            Ok(Requeue::after(wait)),
        ));
    }
    if pass.obj.spec.adoption_policy == AdoptionPolicy::ByName {
        let differ = adoption::mismatches(body, &remote, true);
        if !differ.is_empty() {
            return stall(
                pass,
                reason::ADOPTION_MISMATCH,
                adoption::mismatch_message(&remote.name, &remote.id, &differ),
            );
        }
        pass.events.push((
            EventType::Normal,
            "Adopted",
            format!(
                "adopted remote deployment {} ({}) by name (spec.adoptionPolicy: ByName; no other AgentDeployment holds it); converging it to the spec",
                remote.id, remote.name
            ),
        ));
        return found(remote, false, false);
    }
    stall(
        pass,
        reason::NAME_CONFLICT,
        format!(
            "a remote deployment named {} ({}) already exists and was not created by this resource; {}",
            remote.name,
            remote.id,
            claims::unheld_advice(&remote.id)
        ),
    )
}

/// `Ok` when no other AgentDeployment of the cluster holds the remote
/// deployment `id` (named `name` when known), as the claims show it and a
/// fresh read of the holder confirms ([`claims::holder`]). `Err` ends the
/// pass with no request: `Stalled` with `conflict` naming a live holder,
/// or `Reconciling`/`HandOverPending` while the holder is being deleted
/// (read again soon; its hand-over triggers this object at once).
async fn one_owner(
    pass: &mut Pass<'_>,
    id: &str,
    name: Option<&str>,
    conflict: &'static str,
) -> Flow<()> {
    let plane = PlaneId::new(pass.cp.base_url(), pass.cp.workspace_id());
    let me = super::claims::claim_of(pass.obj, Some(plane.clone()));
    let found = pass
        .ctx
        .state
        .claims
        .about(&pass.ctx.planes, name, Some(id));
    let candidate = match claims::holder(&found, &me, &plane, id, name) {
        Holder::None => return Ok(()),
        Holder::Live(c) | Holder::Releasing(c) => c.key.clone(),
    };
    let Some((_, fresh)) = super::claims::fresh(pass.ctx, &candidate).await? else {
        return Ok(());
    };
    let shown = name.unwrap_or(&me.name);
    match claims::holder(std::slice::from_ref(&fresh), &me, &plane, id, name) {
        Holder::None => Ok(()),
        Holder::Live(h) => {
            stall(pass, conflict, claims::held_message(id, shown, &h.key)).map(|_| ())
        }
        Holder::Releasing(h) => {
            let message = claims::releasing_message(id, shown, &h.key);
            let wait = jittered(pass.ctx.config.poll_interval);
            Err(pass.finish(
                &Outcome::Progressing {
                    reason: reason::HAND_OVER_PENDING,
                    message,
                },
                Ok(Requeue::after(wait)),
            ))
        }
    }
}

/// The event of a deployment `id` (`name`) handed over to `obj` by the
/// object its [`HANDED_OVER_FROM_ANNOTATION`] names, once that annotation
/// and the id annotation name it; `None` otherwise.
fn taken_over(obj: &AgentDeployment, id: &str, name: &str) -> Option<Note> {
    let annotations = obj.annotations();
    let from = annotations.get(HANDED_OVER_FROM_ANNOTATION)?;
    annotations
        .get(DEPLOYMENT_ID_ANNOTATION)
        .filter(|a| a.eq_ignore_ascii_case(id))?;
    Some((
        EventType::Normal,
        reason::HANDED_OVER,
        format!(
            "took over remote deployment {id} ({name}) from AgentDeployment {from}, which held it and was deleted; nothing was deleted or created"
        ),
    ))
}

/// `" (ID held by AgentDeployment NS/NAME, ...)"` for those of `existing`
/// that an AgentDeployment of the cluster holds; empty when none is.
fn held_among(pass: &Pass<'_>, existing: &[Deployment]) -> String {
    let plane = PlaneId::new(pass.cp.base_url(), pass.cp.workspace_id());
    let me = super::claims::claim_of(pass.obj, Some(plane.clone()));
    let name = existing.first().map(|d| d.name.as_str());
    let found = pass.ctx.state.claims.about(&pass.ctx.planes, name, None);
    let held: Vec<String> = existing
        .iter()
        .filter_map(
            |d| match claims::holder(&found, &me, &plane, &d.id, Some(&d.name)) {
                Holder::Live(h) | Holder::Releasing(h) => {
                    Some(format!("{} held by AgentDeployment {}", d.id, h.key))
                }
                Holder::None => None,
            },
        )
        .collect();
    if held.is_empty() {
        String::new()
    } else {
        format!(" ({})", held.join(", "))
    }
}

/// Marker (with the finalizer, when the object has none yet), POST; the
/// pass's report writes the status with the id, then the id annotation in
/// place of the marker.
async fn create(pass: &mut Pass<'_>, body: &DeploymentCreate) -> Flow<ObtainedDeployment> {
    if !pass.obj.create_pending() {
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        // An object that names no deployment gets its finalizer here
        // (`Kind::finalizer_with_first_write`); any other got it before
        // the pass's first request.
        let finalizer = super::step::finalizer_with_marker(pass.obj).then_some(FINALIZER);
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
    let (plane, made) = (super::plane::plane_key(pass.cp), remote.clone());
    pass.remember
        .push(move |ctx| ctx.state.names.created(&plane, &made));
    // No event of its own: the outcome of the revision it started is the
    // deployment's one event (`RevisionDeployed`, or a Warning).
    found(remote, true, false)
}

/// No deployment id yet: checks the placement and the integration, then
/// adopts, recovers or creates the deployment ([`obtain`]).
pub(super) async fn find_or_create(pass: &mut Pass<'_>) -> Flow<Acted> {
    let (obj, ctx, cp) = (pass.obj, pass.ctx, pass.cp);
    // A preview over its control plane's cap waits, before any request;
    // the admission holds until this pass recorded its create.
    let _admitted = super::previews::admit(obj, ctx).await?;
    let mut body = pass.seen.body.clone();
    // Placement is checked before the create (listener fields are
    // immutable afterwards).
    if let Some(listener_id) = &body.source_config.listener_id
        && let Err(blocked) =
            placement::check_listener_namespace(cp, listener_id, &obj.spec).await?
    {
        return Err(Report::blocked(obj, ctx, blocked));
    }
    // A named integration is resolved, and the repository checked,
    // before a create (not for an explicit adoption, which creates
    // nothing): `integration_id` is immutable afterwards.
    if obj.spec.deployment_id.is_none() {
        match integrations::resolve(&ctx.state.integrations, &plane_key(cp), cp, &obj.spec).await? {
            Ok(Some(id)) => body.source_config.integration_id = Some(id),
            Ok(None) => {}
            Err(blocked) => return Err(Report::blocked(obj, ctx, blocked)),
        }
    }
    let obtained = obtain(pass, &body).await?;
    if obtained.created {
        pass.created = true;
        pass.status.secrets_hash = Some(pass.seen.secrets_hash.clone());
        pass.status.unechoed_hash = Some(shapes::unechoed_hash(&body));
        pass.served_redeploy();
        // The create started the first revision.
        return Ok(Acted {
            view: RemoteView::of(&obtained.deployment),
            revision: None,
        });
    }
    // Adopted or recovered: converge it like any other pass.
    pass.status.deployment_id = Some(obtained.deployment.id.clone());
    change(pass, *obtained.deployment, &body, obtained.recovered).await
}
