//! The Change step of the AgentDeployment pass ([`super::step::Step::Change`],
//! and an adopted or recovered deployment of the Obtain step): one read of
//! the deployment and at most one mutation (a PATCH, a redeploy) chosen by
//! [`decide::after_read`]; hands the deployment and revision it knows to the
//! follow step ([`Acted`]) or ends the pass with a [`Report`].
//! Sources: docs/control-plane-api.md "Requests".

use crate::controller::kind::Requeue;
use crate::plan::verdict::EventType;

use super::deleting;
use super::pass::{Acted, Pass, RemoteView};
use super::report::{Flow, Report};
use crate::api::conditions::reason;
use crate::api::deployment::{AgentDeployment, ManagementPolicy};
use crate::controller::deployment::context::DeploymentContext;
use crate::controller::report::conditions;
use crate::controller::requeue::jittered;
use crate::controller::requeue::object_key;
use crate::controlplane::Error as CpError;
use crate::controlplane::types::{Deployment, DeploymentCreate, DeploymentPatch};
use crate::plan::decide::{self, After};
use crate::plan::desired;
use crate::plan::fight;
use crate::plan::policy;
use crate::plan::rollback;
use crate::plan::shapes::{self, Memory};
use crate::plan::status::Outcome;
use crate::plan::steps::{self, RemoteGone};
use crate::plan::verdict::{self, UNUSED};

/// GETs the deployment and makes it equal to the spec (see
/// [`change`]).
pub(super) async fn read_and_change(pass: &mut Pass<'_>) -> Flow<Acted> {
    let id = pass.status.deployment_id.clone().unwrap_or_default();
    let remote = match pass.cp.get_deployment(&id).await {
        Ok(d) => d,
        Err(CpError::NotFound { .. }) => return Err(remote_deleted(pass.obj, pass.ctx, &id)),
        Err(e) => return Err(pass.fail("get deployment", e)),
    };
    let body = &pass.seen.body;
    change(pass, remote, body, false).await
}

/// Decides on the deployment read ([`decide::after_read`]) and sends at
/// most one mutation: the PATCH, or the redeploy.
pub(super) async fn change(
    pass: &mut Pass<'_>,
    remote: Deployment,
    body: &DeploymentCreate,
    obtained_now: bool,
) -> Flow<Acted> {
    let secrets_hash = pass.seen.secrets_hash.as_str();
    let key = object_key(pass.obj);
    let policy = pass.obj.spec.management_policy;
    let observe = policy == ManagementPolicy::Observe;
    let changed_here = secrets_changed_here(pass, &remote, observe);
    let patch = minimal_patch(pass, &remote, body, changed_here, observe);
    pass.status.display_name = remote.display_name.clone();
    let patch_fingerprint = desired::patch_fingerprint(&patch, secrets_hash);
    // What `fight::carried` left of the corrections of drift.
    let corrections = pass.status.drift_corrections.clone();
    let read = decide::Read {
        patch: &patch,
        patch_fingerprint: &patch_fingerprint,
        status: pass.previous,
        generation: pass.obj.metadata.generation,
        secrets_changed_here: changed_here && pass.previous.secrets_hash.is_some(),
        image_moved_here: pass.seen.image_moved.is_some() || pass.seen.promotion_moved(),
        redeploy_requested: pass.seen.redeploy.is_some() || pass.seen.promotion_redeploy(),
        obtained_now,
        remote_deleting: deleting::is_deleting(remote.status.as_deref()),
        drift_corrections: &corrections,
        latest_revision_id: remote.latest_revision_id.as_deref(),
    };
    if !read.remote_deleting {
        let key = key.clone();
        pass.remember
            .push(move |ctx| ctx.state.deletes.forget(&key));
    }
    if observe {
        // What Manage would send, listed instead of sent.
        pass.status.drift = policy::drift(body, &remote, &patch);
    }
    let held = rollback::holds(
        pass.previous.rollback.as_deref(),
        pass.obj.metadata.generation,
        remote.latest_revision_id.as_deref(),
    );
    let changed = read.secrets_changed_here || read.image_moved_here || read.redeploy_requested;
    let step = rollback::held_back(decide::after_read(&read), held, changed);
    let sent = Sent {
        patch,
        fingerprint: patch_fingerprint,
    };
    carry_out(pass, policy::after(policy, step), remote, body, sent).await
}

/// Whether the pass's secret values count as changed here
/// ([`decide::secrets_changed_here`]); never under Observe, which sends
/// nothing. A deployment adopted, recovered or handed over that already
/// holds the desired values records them as sent, with no PATCH.
fn secrets_changed_here(pass: &mut Pass<'_>, remote: &Deployment, observe: bool) -> bool {
    if observe {
        return false;
    }
    let hash = pass.seen.secrets_hash.as_str();
    let remote_values =
        desired::remote_secrets_compare(&pass.ctx.state.hash_key, hash, &remote.secrets);
    let last_sent = pass.previous.secrets_hash.as_deref();
    if last_sent.is_none() && remote_values == Some(false) {
        pass.status.secrets_hash = Some(hash.to_owned());
    }
    decide::secrets_changed_here(last_sent, hash, remote_values)
}

/// The minimal PATCH of a pass and its fingerprint
/// ([`desired::patch_fingerprint`]).
struct Sent {
    patch: DeploymentPatch,
    fingerprint: String,
}

/// Carries out the decision `after` on the deployment read (`remote`):
/// at most one mutation, or the end of the pass.
async fn carry_out(
    pass: &mut Pass<'_>,
    after: After,
    remote: Deployment,
    body: &DeploymentCreate,
    sent: Sent,
) -> Flow<Acted> {
    let Sent {
        patch,
        fingerprint: patch_fingerprint,
    } = sent;
    let resync = Requeue::after(jittered(pass.ctx.config.resync_interval));
    match after {
        After::RemoteDeleting => Err(remote_deleting(pass, &remote.id)),
        After::Fight { fields } => {
            // The other writer, when it is an object of this cluster.
            let found = pass
                .ctx
                .state
                .claims
                .about(&pass.ctx.planes, None, Some(&remote.id));
            let me = super::claims::claim_of(pass.obj, None).key;
            let others = crate::plan::claims::others_on(&found, &me, &remote.id);
            let outcome = Outcome::Stalled {
                reason: reason::DRIFT_FIGHT,
                message: fight::message(&remote.id, &fields, &others),
            };
            Err(pass.finish(&outcome, Ok(resync)))
        }
        After::Unheld => {
            let outcome = unheld_outcome(&remote.id, &patch);
            pass.status.unheld_patch = Some(patch_fingerprint);
            Err(pass.finish(&outcome, Ok(resync)))
        }
        After::Reapply { revision } => {
            pass.reapplied_over = Some(revision);
            send_patch(pass, &remote.id, body, patch, true).await
        }
        After::Patch { drift } => send_patch(pass, &remote.id, body, patch, drift).await,
        After::Redeploy => redeploy(pass, &remote).await,
        After::FollowOutside { revision } => Ok(follow_remote(pass, remote, body, Some(revision))),
        After::Follow => Ok(follow_remote(pass, remote, body, None)),
    }
}

/// Nothing to send: the desired state is what the remote holds, or what
/// was last sent where the read does not tell; a revision made outside the
/// operator (`outside`) is followed with its event.
fn follow_remote(
    pass: &mut Pass<'_>,
    remote: Deployment,
    body: &DeploymentCreate,
    outside: Option<String>,
) -> Acted {
    match outside {
        Some(revision) => pass.events.push(verdict::followed_outside(&revision)),
        None if pass.previous.observed_generation != pass.obj.metadata.generation => {
            pass.status.unheld_patch = None;
        }
        None => {}
    }
    // Under Observe nothing was sent: the digest of what was sent stays.
    if pass.obj.spec.management_policy == ManagementPolicy::Manage {
        pass.status.unechoed_hash = Some(shapes::unechoed_hash(body));
    }
    Acted {
        view: RemoteView::of(&remote),
        revision: None,
    }
}

/// The minimal PATCH from `remote` to `body` ([`desired::compute_patch`]).
/// Secret values are sent when they changed here (`changed_here`: the
/// referenced Secrets), or on the control plane (the values the service
/// returns, compared by keyed hash, only on this read: no extra
/// request), paced by [`decide::correct_outside_change`]; under `Observe`
/// (`observe`, nothing is sent) only when the returned values differ.
fn minimal_patch(
    pass: &mut Pass<'_>,
    remote: &Deployment,
    body: &DeploymentCreate,
    changed_here: bool,
    observe: bool,
) -> DeploymentPatch {
    let secrets_hash = pass.seen.secrets_hash.as_str();
    let differs =
        desired::remote_secrets_differ(&pass.ctx.state.hash_key, secrets_hash, &remote.secrets);
    let changed_outside = decide::correct_outside_change(
        changed_here,
        differs,
        pass.previous.unheld_patch.is_some(),
        pass.ctx.secrets_due_in(&object_key(pass.obj)).is_some(),
    );
    let memory = Memory {
        // Under Observe: whether the values the service returns differ.
        send_secrets: if observe {
            differs
        } else {
            changed_here || changed_outside
        },
        sent: pass.previous.unechoed_hash.as_deref(),
    };
    (pass.status.source_commit, pass.status.built_image) = shapes::provenance(remote);
    desired::compute_patch(body, remote, &memory)
}

/// The remote deployment `id` is being deleted outside the operator:
/// `Reconciling/RemoteDeleted`, read again on the backoff of a delete in
/// progress ([`deleting`]).
fn remote_deleting(pass: &mut Pass<'_>, id: &str) -> Box<Report> {
    let outcome = Outcome::Progressing {
        reason: reason::REMOTE_DELETED,
        message: format!("remote deployment {id} is being deleted outside the operator"),
    };
    let wait = pass.deleting_elsewhere(id);
    pass.finish(&outcome, Ok(Requeue::after(wait)))
}

/// Requests the redeploy of `remote`; its answer is the revision it
/// started.
async fn redeploy(pass: &mut Pass<'_>, remote: &Deployment) -> Flow<Acted> {
    let revision = match pass.cp.redeploy(&remote.id).await {
        Ok(revision) => revision,
        Err(e) => return Err(pass.fail("redeploy", e)),
    };
    let why = match (&pass.seen.redeploy, &pass.seen.promotion) {
        (Some(at), _) => format!("redeploy requested at {at}"),
        (None, Some(take)) => format!(
            "promotion of commit {} from {}/{}",
            take.record.commit_sha.as_deref().unwrap_or_default(),
            take.record.namespace,
            take.record.name
        ),
        (None, None) => "redeploy requested".to_owned(),
    };
    pass.events.push((
        EventType::Normal,
        "Redeployed",
        format!("{why}: new revision {}", revision.id),
    ));
    pass.status.rejected_request = None;
    pass.served_redeploy();
    let mut view = RemoteView::of(remote);
    view.latest_revision_id = Some(revision.id.clone());
    Ok(Acted {
        view,
        revision: Some(revision),
    })
}

/// PATCHes the deployment `id` with `patch` and reads the answer back: a
/// value the service drops or normalizes in a way no answer-shape rule
/// explains would differ again on the next pass, forever, so it stalls
/// with `DriftNotConverging` instead.
async fn send_patch(
    pass: &mut Pass<'_>,
    id: &str,
    body: &DeploymentCreate,
    patch: DeploymentPatch,
    drift: bool,
) -> Flow<Acted> {
    let secrets_hash = pass.seen.secrets_hash.as_str();
    let d = match pass.cp.patch_deployment(id, &patch).await {
        Ok(d) => d,
        Err(e) => return Err(pass.fail("patch deployment", e)),
    };
    patched_event(pass, &patch, &d.id, drift);
    if patch.secrets.is_some() {
        pass.status.secrets_hash = Some(secrets_hash.to_owned());
        // The next PATCH of Secret values alone waits its interval,
        // once this one's status (its secrets hash) is written.
        let key = object_key(pass.obj);
        pass.remember.push(move |ctx| ctx.secrets_sent(&key));
    }
    if desired::creates_revision(&patch) {
        pass.served_redeploy();
    }
    let unechoed = shapes::unechoed_hash(body);
    pass.status.display_name = d.display_name.clone();
    pass.status.rejected_request = None;
    pass.status.unechoed_hash = Some(unechoed.clone());
    (pass.status.source_commit, pass.status.built_image) = shapes::provenance(&d);
    let again = desired::patch_read_back(
        &pass.ctx.state.hash_key,
        body,
        &d,
        secrets_hash,
        Some(&unechoed),
    );
    if let Some(unheld) = steps::unheld(&again, secrets_hash) {
        pass.status.unheld_patch = Some(unheld);
        let outcome = unheld_outcome(&d.id, &again);
        pass.status.latest_revision_id = d.latest_revision_id.clone();
        pass.status.deployment_id = Some(d.id.clone());
        let resync = Requeue::after(jittered(pass.ctx.config.resync_interval));
        return Err(pass.finish(&outcome, Ok(resync)));
    }
    pass.status.unheld_patch = None;
    Ok(Acted {
        view: RemoteView::of(&d),
        revision: None,
    })
}

/// The event of the PATCH `patch` of deployment `id`: `Patched`, or
/// `DriftCorrected` for a correction of `drift` (remembered in
/// `status.driftCorrections`, [`fight::remember`]), or the re-apply over a
/// revision made outside the operator.
fn patched_event(pass: &mut Pass<'_>, patch: &DeploymentPatch, id: &str, drift: bool) {
    let fields = desired::patch_fields(patch);
    let (event_reason, verb) = if drift {
        pass.status.drift_corrections = fight::remember(
            &pass.status.drift_corrections.clone(),
            &fields,
            k8s_openapi::jiff::Timestamp::now(),
        );
        ("DriftCorrected", "changed outside the operator; restored")
    } else {
        ("Patched", "patched")
    };
    let note = match &pass.reapplied_over {
        Some(over) => verdict::reapplied_note(&fields, id, over, desired::creates_revision(patch)),
        None => format!("{} of remote deployment {id} {verb}", fields.join(", ")),
    };
    pass.events.push((EventType::Normal, event_reason, note));
}

/// The outcome of a change the service accepted but does not hold.
fn unheld_outcome(id: &str, patch: &DeploymentPatch) -> Outcome {
    Outcome::Stalled {
        reason: reason::DRIFT_NOT_CONVERGING,
        message: format!(
            "the control plane does not hold {} of remote deployment {id} (it drops or normalizes the value, so the deployment read back still differs); not patched again until the spec changes",
            desired::patch_fields(patch).join(", ")
        ),
    }
}

/// The remote deployment answered 404 although status names it: it was
/// deleted outside the operator. Recreate it or stall, per
/// `spec.remoteDeletionPolicy`.
fn remote_deleted(obj: &AgentDeployment, ctx: &DeploymentContext, id: &str) -> Box<Report> {
    // A deployment last seen UNUSED was most likely removed by the service
    // itself (docs/control-plane-api.md "Unused deployments"): say so.
    let was_unused = obj
        .status
        .as_ref()
        .and_then(|s| s.deployment_status.as_deref())
        == Some(UNUSED);
    let how = if was_unused {
        "was removed by the control plane after it was shown UNUSED (no traffic for a long time)"
    } else {
        "was deleted outside the operator"
    };
    let policy = obj.spec.remote_deletion_policy;
    // Observe never creates: the resource stops, whatever the policy.
    if obj.spec.management_policy == ManagementPolicy::Observe
        || steps::remote_deleted(policy, obj.spec.deployment_id.is_some()) == RemoteGone::Stall
    {
        return Report::stalled(
            obj,
            ctx,
            reason::REMOTE_DELETED,
            format!(
                "remote deployment {id} {how}; delete and re-create this resource (or set spec.remoteDeletionPolicy: Recreate without spec.deploymentId) to create a new one"
            ),
        );
    }
    // Forget the old id and secrets hash; the next pass creates a new one.
    let mut status = obj.status.clone().unwrap_or_default();
    status.deployment_id = None;
    status.latest_revision_id = None;
    status.revision_status = None;
    status.active_revision_id = None;
    status.secrets_hash = None;
    status.drift_corrections.clear();
    status.conditions = conditions(
        &status.conditions,
        &Outcome::Progressing {
            reason: reason::CREATING,
            message: format!("remote deployment {id} {how}; creating it again"),
        },
        obj.metadata.generation,
    );
    status.deployment_status = None;
    let mut report = Report::end(Requeue::after(std::time::Duration::from_millis(100)));
    let key = object_key(obj);
    report
        .remember
        .push(move |ctx| ctx.state.deletes.forget(&key));
    report.status = crate::controller::kind::changed(obj, status);
    report.events.push((
        EventType::Warning,
        "RemoteDeleted",
        format!(
            "remote deployment {id} {how}; creating it again (spec.remoteDeletionPolicy: Recreate)"
        ),
    ));
    report
}
