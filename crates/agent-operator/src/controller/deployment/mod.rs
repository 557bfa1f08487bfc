//! Reconciler of `AgentDeployment`: creates, patches and deletes the remote
//! deployment on the control plane and follows its latest revision.
//!
//! A pass is a pipeline of step files with typed hand-offs
//! (docs/control-plane-api.md "Polling": the documented client flow;
//! "Requests" and "Revision"):
//! 1. [`observe`] → [`observe::Observed`]: the inputs read from Kubernetes
//!    and the desired state built from them;
//! 2. [`decide`] (pure): the one step to take before any request;
//! 3. [`act`](mod@act) → [`pass::Acted`]: at most one read and one mutation of the
//!    control plane (finding or creating the deployment: [`obtain`]);
//! 4. [`follow`]: the latest revision, decided by
//!    [`verdict`](crate::plan::verdict) (pure);
//! 5. [`report`]: every step ends with one [`report::Report`] (status,
//!    annotations, events, requeue) that only [`reconcile`] writes
//!    ([`kind::write`]), in the one order of every path and every kind.
//!
//! Deletion ([`cleanup`]) DELETEs the remote deployment (404 counts as done)
//! and keeps the finalizer until GET answers 404, since delete is
//! asynchronous; meanwhile the deployment is read on a backoff and DELETE is
//! not sent again unless the delete did not take ([`deleting`]).

mod act;
pub mod cached;
pub mod claims;
pub mod cleanup;
pub mod deleting;
pub mod expire;
mod follow;
pub mod names;
pub mod observe;
mod obtain;
pub mod pass;
pub mod plane;
mod plane_watch;
pub mod previews;
pub mod promotion;
pub mod report;
pub mod runner;
#[cfg(test)]
mod sequence_tests;
pub mod trigger;
pub mod verify;

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::controller::kind::Requeue;
use kube::Api;
use kube::runtime::controller::Action;
use tracing::debug;

use self::observe::Observed;
use self::pass::Pass;
use self::report::{Flow, Report};
use super::kind::{self, Kind};
use super::report::ReasonTable;
use super::secrets::ReferencesSecrets;
use super::{Context, Error, object_key, requeue_after_error};
use crate::api::SecretKeyRef;
use crate::api::deployment::{
    AgentDeployment, AgentDeploymentStatus, DEPLOYMENT_ID_ANNOTATION, FINALIZER, ImagePolicy,
};
use crate::controlplane::ControlPlaneClient;
use crate::plan::decide::{self, Before};
use crate::plan::policy;
use crate::plan::steps;
use crate::registry::docker_config::DOCKER_CONFIG_KEY;
use kube::ResourceExt;

impl Kind for AgentDeployment {
    crate::kind_status!(AgentDeploymentStatus);
    const FINALIZER: Option<&'static str> = Some(FINALIZER);
    const REASONS: ReasonTable = ReasonTable::DEPLOYMENT;
    type Observed = Observed;
    type Decision = Before;

    fn observe(
        api: &Api<Self>,
        obj: &Self,
        ctx: &Context,
    ) -> impl Future<Output = Flow<Observed>> + Send {
        observe::observe(api, obj, ctx)
    }

    /// [`decide::before_remote`] on the object the pass decides on (its
    /// fresh read when there is one), under its management policy
    /// ([`policy::before`]).
    fn decide(obj: &Self, seen: &Observed) -> Before {
        let obj = seen.fresh.as_deref().unwrap_or(obj);
        let step = decide::before_remote(&seen.known(obj));
        policy::before(
            obj.spec.management_policy,
            step,
            seen.previous.deployment_id.is_some(),
        )
    }

    fn act(
        api: &Api<Self>,
        obj: &Self,
        ctx: &Context,
        seen: Observed,
        step: Before,
    ) -> impl Future<Output = Box<Report>> + Send {
        act_and_follow(api, obj, ctx, seen, step)
    }

    fn cleanup(
        api: &Api<Self>,
        obj: &Self,
        ctx: &Context,
    ) -> impl Future<Output = Box<Report>> + Send {
        cleanup::cleanup(api, obj, ctx)
    }

    /// Forgets the remote delete that was in progress.
    fn forget(ctx: &Context, obj: &Self) {
        ctx.deletes.forget(&object_key(obj));
    }

    /// The pass adds the finalizer itself: with the create-pending marker
    /// for an object that names no deployment yet
    /// ([`steps::finalizer_with_marker`]), alone at the start of its pass
    /// for any other ([`observe::observe`]). No pass waits for the write of
    /// the finalizer to trigger the next one.
    fn finalizer_with_first_write(&self) -> bool {
        true
    }

    /// At its expiry instant at the latest ([`expire::wake_in`]).
    fn wake_in(&self) -> Option<Duration> {
        expire::wake_in(self)
    }
}

/// The Secret values of `spec.secrets[].valueFrom`, the agent server key
/// of `spec.verify.apiKeySecretRef`, and the `.dockerconfigjson` of
/// `spec.imagePullSecretRef` while an image policy resolves the tag.
impl ReferencesSecrets for AgentDeployment {
    fn secret_refs(&self) -> Vec<Cow<'_, SecretKeyRef>> {
        secret_refs_of(&self.spec)
    }
}

/// The same keys, read from the store's cached form (the spec as read).
impl ReferencesSecrets for cached::CachedDeployment {
    fn secret_refs(&self) -> Vec<Cow<'_, SecretKeyRef>> {
        secret_refs_of(&self.spec)
    }
}

/// The Secret keys `spec` reads ([`ReferencesSecrets`]).
fn secret_refs_of(
    spec: &crate::api::deployment::AgentDeploymentSpec,
) -> Vec<Cow<'_, SecretKeyRef>> {
    let values = spec.secrets.iter();
    let verify = spec.verify.as_ref();
    let pull = spec
        .image_pull_secret_ref
        .as_ref()
        .filter(|_| spec.image_policy() != ImagePolicy::Never)
        .map(|r| {
            Cow::Owned(SecretKeyRef {
                name: r.name.clone(),
                key: DOCKER_CONFIG_KEY.to_owned(),
            })
        });
    values
        .filter_map(|s| s.value_from.as_ref().map(|f| &f.secret_key_ref))
        .chain(verify.and_then(|v| v.api_key_secret_ref.as_ref()))
        .map(Cow::Borrowed)
        .chain(pull)
        .collect()
}

/// One reconcile pass ([`kind::reconcile`]): the finalizer helper
/// dispatches to [`Kind::apply`] or [`cleanup::cleanup`], and the report they
/// return is written ([`kind::write`]).
///
/// Errors: Kubernetes API failures and transient control plane failures
/// (status is written before they are returned); input problems are reported
/// in status and are not errors.
///
/// An object with `spec.expiry` runs again at its expiry instant at the
/// latest ([`Kind::wake_in`]), without polling before.
pub async fn reconcile(obj: Arc<AgentDeployment>, ctx: Arc<Context>) -> Result<Action, Error> {
    kind::reconcile(obj, ctx).await
}

/// Requeue policy for failed passes: the service's `Retry-After` if longer,
/// else exponential backoff per object; a pending deletion is read again
/// when its backoff says ([`deleting::Deletes::due_in`]).
pub fn error_policy(obj: Arc<AgentDeployment>, error: &Error, ctx: Arc<Context>) -> Action {
    if let Error::DeletionPending(_) = error {
        let due = ctx
            .deletes
            .due_in(&object_key(obj.as_ref()))
            .unwrap_or(ctx.config.poll_interval);
        // Never a requeue at once: the pass that records a read sets the
        // next one at least the poll interval (jittered) ahead.
        return Action::requeue(due.max(DELETE_REQUEUE_FLOOR));
    }
    requeue_after_error(&ctx, obj.as_ref(), error)
}

/// Shortest requeue of a pending deletion (a guard against a zero delay).
const DELETE_REQUEUE_FLOOR: Duration = Duration::from_millis(100);

/// Makes the remote deployment equal to the spec and follows its revision:
/// act on `step` (at most one remote mutation) on the object the pass
/// decided on, then follow, ending with the one report of the pass.
async fn act_and_follow(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    ctx: &Context,
    seen: Observed,
    step: Before,
) -> Box<Report> {
    let fresh = seen.fresh.as_deref();
    // The fresh read names a deployment the cached object did not (its
    // finalizer was left to the create-pending marker): the finalizer
    // goes first, before any request.
    if let Some(obj) = fresh
        && let Err(e) = add_finalizer_alone(api, obj).await
    {
        return Report::failed(e).on(fresh);
    }
    let obj = fresh.unwrap_or(obj);
    let mut pass = Pass::new(api, obj, ctx, &seen);
    let acted = match act(&mut pass, step).await {
        Ok(acted) => acted,
        Err(report) => return report.on(fresh),
    };
    follow::follow(&mut pass, acted).await.on(fresh)
}

/// The act step chosen by [`decide::before_remote`]: a wait ends the pass
/// without a request.
async fn act(pass: &mut Pass<'_>, step: Before) -> Flow<pass::Acted> {
    let wait = match step {
        Before::WaitRejected(delay) => {
            debug!(
                retry_in_s = delay.as_secs(),
                "a rejected request is not due yet"
            );
            delay
        }
        Before::WaitSecrets(delay) => {
            debug!(
                retry_in_s = delay.as_secs(),
                "a change of Secret values waits for the last one's interval"
            );
            delay
        }
        Before::WaitRemoteDeleting(delay) => {
            debug!(
                read_in_s = delay.as_secs_f64(),
                "the remote deployment is being deleted outside the operator"
            );
            delay
        }
        Before::SpreadColdStart => return Err(cold_start(pass)),
        Before::PollRevision(rid) => {
            same_plane(pass).await?;
            return act::poll_revision(pass, &rid).await;
        }
        Before::Obtain => return act::find_or_create(pass).await,
        Before::ReadDeployment => {
            same_plane(pass).await?;
            return act::read_and_change(pass).await;
        }
    };
    Err(Report::end(Requeue::after(wait)))
}

/// The end of the first pass after a restart of an object that had
/// converged on its generation: its drift check, spread at random over the
/// resync period.
fn cold_start(pass: &Pass<'_>) -> Box<Report> {
    let delay = pass
        .ctx
        .config
        .resync_interval
        .mul_f64(rand::random_range(0.0..1.0));
    debug!(check_in_s = delay.as_secs(), "converged before the restart");
    // A replica killed between the status write that recorded the id and
    // the annotation write after it left status without the annotation:
    // write it now (no request), by the rule every report follows, so that
    // a restore without status still leads back to the deployment.
    let mut report = Report::end(Requeue::after(delay));
    report.annotations = crate::plan::steps::id_annotations(
        pass.obj
            .status
            .as_ref()
            .and_then(|s| s.deployment_id.as_deref()),
        pass.obj.create_pending(),
        pass.obj
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(DEPLOYMENT_ID_ANNOTATION))
            .map(String::as_str),
    );
    report
}

/// `Ok` when the remote deployment of `pass` lives on the control plane its
/// AgentControlPlane leads to now: the one recorded in
/// `status.controlPlane` (or none recorded yet), or another one where a
/// read finds the same deployment (the same service under another URL:
/// the new plane is recorded by this pass). `Err` ends the pass: `Stalled`
/// (`ControlPlaneChanged`) when the deployment is not there, with nothing
/// sent or created (a create there would be a second deployment, and the
/// first one would run on unmanaged); the error backoff when the read
/// fails.
async fn same_plane(pass: &mut Pass<'_>) -> Flow<()> {
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
            let resync = Requeue::after(super::jittered(pass.ctx.config.resync_interval));
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

/// Adds the finalizer to `obj` alone, when it lacks it and names a
/// deployment (one that names none gets it with the create-pending
/// marker). Errors: the Kubernetes API error (409 when `obj` is not the
/// object as stored).
pub(crate) async fn add_finalizer_alone(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
) -> Result<(), Error> {
    if kind::has_finalizer(obj, FINALIZER) || finalizer_with_marker(obj) {
        return Ok(());
    }
    kind::set_metadata(api, obj, Some(FINALIZER), &[]).await
}

/// True when `obj` names no deployment, so it gets its finalizer with the
/// create-pending marker ([`steps::finalizer_with_marker`]).
fn finalizer_with_marker(obj: &AgentDeployment) -> bool {
    steps::finalizer_with_marker(
        obj.status
            .as_ref()
            .is_some_and(|s| s.deployment_id.is_some()),
        obj.spec.deployment_id.is_some(),
        obj.annotations().contains_key(DEPLOYMENT_ID_ANNOTATION),
        obj.create_pending(),
    )
}

/// The key of the learned revision duration: the control plane's base URL
/// and workspace.
fn plane_key(cp: &ControlPlaneClient) -> String {
    format!("{} {}", cp.base_url(), cp.workspace_id())
}

/// Seconds from now until `rfc3339` (negative when past); `None` if it
/// does not parse.
fn seconds_until(rfc3339: &str) -> Option<f64> {
    let t: k8s_openapi::jiff::Timestamp = rfc3339.parse().ok()?;
    let now = k8s_openapi::jiff::Timestamp::now();
    Some(t.duration_since(now).as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Secret watch triggers a pass on a change of the image pull
    /// Secret only while an image policy reads it.
    #[test]
    fn the_image_pull_secret_is_referenced_while_a_policy_resolves_the_tag() {
        let with = |policy: Option<&str>| -> AgentDeployment {
            let mut spec = serde_json::json!({
                "source": "external_docker",
                "sourceRevisionConfig": {"imageUri": "ghcr.io/acme/agent:v1"},
                "imagePullSecretRef": {"name": "regcred"},
                "secrets": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "env", "key": "a"}}}]
            });
            if let Some(p) = policy {
                spec["imagePolicy"] = serde_json::json!(p);
            }
            serde_json::from_value(serde_json::json!({
                "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentDeployment",
                "metadata": {"name": "a", "namespace": "n"},
                "spec": spec
            }))
            .unwrap()
        };
        for (policy, want) in [
            (None, vec![("env", "a")]),
            (Some("Never"), vec![("env", "a")]),
            (
                Some("Pin"),
                vec![("env", "a"), ("regcred", DOCKER_CONFIG_KEY)],
            ),
            (
                Some("Follow"),
                vec![("env", "a"), ("regcred", DOCKER_CONFIG_KEY)],
            ),
        ] {
            let obj = with(policy);
            let refs = obj.secret_refs();
            let got: Vec<(&str, &str)> = refs
                .iter()
                .map(|r| (r.name.as_str(), r.key.as_str()))
                .collect();
            assert_eq!(got, want, "{policy:?}");
        }
    }
}
