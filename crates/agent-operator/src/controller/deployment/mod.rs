//! Reconciler of `AgentDeployment`: creates, patches and deletes the remote
//! deployment on the control plane and follows its latest revision.
//!
//! Each pass is observe → compute → act → report (docs/control-plane-api.md
//! "Polling": the documented client flow; "Requests" and "Revision"):
//! - observe: the AgentControlPlane, the referenced Secrets, the remote
//!   deployment (found or created by [`obtain`]);
//! - compute: the minimal PATCH ([`crate::controller::desired`]);
//! - act: PATCH, redeploy on request, read the latest revision;
//! - report: status and conditions ([`crate::controller::status`]), events.
//!
//! Deletion DELETEs the remote deployment (404 counts as done) and keeps the
//! finalizer until GET answers 404, since delete is asynchronous; meanwhile
//! the deployment is read on a backoff and DELETE is not sent again unless
//! the delete did not take ([`deleting`]).

pub mod decide;
pub mod deleting;
pub mod fight;
pub mod logtail;
pub mod names;
mod obtain;
mod report;
pub mod verify;

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use kube::{Api, ResourceExt};
use tracing::{debug, info};

use self::decide::{After, Before};
use self::logtail::FailureLog;
use self::obtain::{Obtained, create_pending, obtain, set_annotations};
use self::report::{
    already_reported, error_outcome, publish, report, report_blocked, report_stalled, write_status,
};
use super::shapes::{self, Memory};
use super::status::{Outcome, conditions, revision_outcome};
use super::{Context, Error, desired, jittered, object_key, requeue_after_error};
use super::{hash_key, integrations, placement, resolve};
use crate::api::conditions::reason;
use crate::api::conditions::{READY, find};
use crate::api::deployment::{
    AgentDeployment, AgentDeploymentStatus, CREATE_PENDING_ANNOTATION,
    DEFAULT_PROGRESS_DEADLINE_SECONDS, DEPLOYMENT_ID_ANNOTATION, DeletionPolicy, FINALIZER,
    PAUSED_ANNOTATION, REDEPLOY_ANNOTATION, REVISION_HISTORY_LIMIT, RejectedRequest,
    RemoteDeletionPolicy, RevisionSummary,
};
use crate::api::rules;
use crate::controlplane::types::{
    Deployment, DeploymentCreate, DeploymentPatch, LogOrder, LogQuery, Revision, RevisionStatus,
};
use crate::controlplane::{ControlPlaneClient, Error as CpError};
use secrecy::SecretString;

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
    let deleted = obj.metadata.deletion_timestamp.is_some();
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
    match &result {
        Ok(action) if deleted && *action == Action::await_change() => {
            ctx.forget(&key);
            deleting::DELETES.forget(&key);
        }
        Ok(_) => ctx.reset_backoff(&key),
        Err(_) => {}
    }
    result
}

/// Requeue policy for failed passes: the service's `Retry-After` if longer,
/// else exponential backoff per object; a pending deletion is read again
/// when its backoff says ([`deleting::Deletes::due_in`]).
pub fn error_policy(obj: Arc<AgentDeployment>, error: &Error, ctx: Arc<Context>) -> Action {
    if let Error::DeletionPending(_) = error {
        let due = deleting::DELETES
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

/// What the pass knows about the remote deployment for its report.
struct RemoteView {
    id: String,
    latest_revision_id: Option<String>,
    active_revision_id: Option<String>,
    deployment_status: Option<String>,
    url: Option<String>,
    /// Read from the deployment by this pass (not taken from status).
    read: bool,
}

impl RemoteView {
    fn of(d: &Deployment) -> Self {
        Self {
            id: d.id.clone(),
            latest_revision_id: d.latest_revision_id.clone(),
            active_revision_id: d.active_revision_id.clone(),
            deployment_status: d.status.clone(),
            url: d.source_config.custom_url.clone(),
            read: true,
        }
    }

    fn from_status(s: &AgentDeploymentStatus, id: &str) -> Self {
        Self {
            id: id.to_owned(),
            latest_revision_id: s.latest_revision_id.clone(),
            active_revision_id: s.active_revision_id.clone(),
            deployment_status: s.deployment_status.clone(),
            url: s.url.clone(),
            read: false,
        }
    }
}

/// Makes the remote deployment equal to the spec and follows its revision:
/// observe → decide ([`decide`]) → act (at most one remote mutation) →
/// report (one status write, at the end).
async fn apply(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    ctx: &Context,
) -> Result<Action, Error> {
    let key = object_key(obj);
    let first_pass = ctx.first_pass(&key);
    match obj.paused() {
        Ok(true) => {
            report_paused(api, obj).await?;
            return Ok(Action::await_change());
        }
        Ok(false) => {}
        // A value that is neither "true" nor "false" (a typo of a pause,
        // most likely): nothing is sent until it is one of them.
        Err(message) => {
            return report_stalled(api, obj, ctx, reason::INVALID_ANNOTATION, message).await;
        }
    }
    // A decision to create, recover or declare a conflict is made on a
    // fresh read of the object, never on a cache that may predate the
    // operator's own last write (its create-pending marker or recorded id).
    let fresh;
    let obj = if obj
        .status
        .as_ref()
        .and_then(|s| s.deployment_id.as_ref())
        .is_none()
    {
        match api.get_opt(&obj.name_any()).await.map_err(Error::Kube)? {
            Some(o) if o.metadata.deletion_timestamp.is_none() => {
                fresh = o;
                &fresh
            }
            _ => return Ok(Action::await_change()),
        }
    } else {
        obj
    };
    let ns = obj
        .namespace()
        .ok_or(Error::MissingObjectKey("namespace"))?;
    let mut previous = obj.status.clone().unwrap_or_default();

    // A spec the control plane would refuse stops here, before any request
    // (rules the schema cannot express, or an object stored before a rule).
    if let Err(message) = rules::preflight(&obj.remote_name(), &obj.spec) {
        return report_stalled(api, obj, ctx, reason::INVALID_SPEC, message).await;
    }
    // An agent server URL outside the operator's --allowed-hosts: nothing is
    // created for it (it would be the deployment's URL, and the target of
    // spec.verify).
    if let Some(url) = obj
        .spec
        .source_config
        .custom_url
        .as_deref()
        .filter(|u| !u.trim().is_empty())
        && let Err(refused) = ctx
            .config
            .allowed_hosts
            .check(url, "spec.sourceConfig.customUrl")
    {
        return report_stalled(api, obj, ctx, reason::HOST_NOT_ALLOWED, refused.0).await;
    }

    // Observe the inputs (Kubernetes only). Nothing remote happens while one
    // is missing.
    let cp = match control_plane(api, obj, ctx).await? {
        Ok(cp) => cp,
        Err(action) => return Ok(action),
    };
    let secrets = match resolve::deployment_secrets(ctx, &ns, &obj.spec).await? {
        Ok(s) => s,
        Err(blocked) => return report_blocked(api, obj, ctx, blocked).await,
    };
    let mut body = desired::create_body(&obj.remote_name(), &obj.spec, secrets);
    if previous.deployment_id.is_none() {
        // The listener is part of the desired state (and of its
        // fingerprint); its namespace is checked on the control plane only
        // when the pass goes on to obtain a deployment.
        match placement::listener_id(ctx, &ns, &obj.spec).await? {
            Ok(Some(listener_id)) => body.source_config.listener_id = Some(listener_id),
            Ok(None) => {}
            Err(blocked) => return report_blocked(api, obj, ctx, blocked).await,
        }
    }
    let secrets_hash = ctx.hash_key.secrets_hash(&body.secrets);
    match previous.secrets_hash.as_deref() {
        // The old salted format, still matching: taken as unchanged, and
        // rewritten as the HMAC by this pass's status write (no PATCH).
        Some(stored)
            if ctx.hash_key.check(stored, &body.secrets) == hash_key::Stored::LegacyMatches =>
        {
            debug!("status.secretsHash in the old format matches; rewriting it as an HMAC");
            previous.secrets_hash = Some(secrets_hash.clone());
        }
        Some(stored) if ctx.hash_key.is_of_another_key(stored) => {
            debug!(
                "status.secretsHash was made with another key (rotated): the secrets are sent once"
            );
        }
        _ => {}
    }
    let redeploy = obj
        .annotations()
        .get(REDEPLOY_ANNOTATION)
        .filter(|r| previous.last_redeploy_requested_at.as_ref() != Some(*r))
        .cloned();
    // `integrationRef` is resolved to `integration_id` only before a create,
    // so its name stands for it in the fingerprint (added only when set, so
    // the fingerprints of other resources stay what they were).
    let mut extra = vec![
        cp.base_url(),
        cp.workspace_id(),
        redeploy.as_deref().unwrap_or(""),
    ];
    if let Some(r) = &obj.spec.source_config.integration_ref {
        extra.push(r.name.as_str());
    }
    let fingerprint = desired::fingerprint(&body, &secrets_hash, &extra);
    let secrets_changed = previous.deployment_id.is_some()
        && previous.secrets_hash.as_deref() != Some(secrets_hash.as_str());

    // Decide what to read.
    let known = decide::Known {
        generation: obj.metadata.generation,
        status: &previous,
        fingerprint: &fingerprint,
        secrets_changed,
        redeploy_requested: redeploy.is_some(),
        first_pass,
        rejection_due_in: previous
            .rejected_request
            .as_ref()
            .and_then(|r| seconds_until(&r.retry_after_time)),
        secrets_due_in: ctx.secrets_due_in(&key),
        remote_deleting_due_in: previous
            .deployment_id
            .as_deref()
            .and_then(|id| deleting::DELETES.known(&key, id))
            .filter(|k| k.accepted)
            .and_then(|k| k.due_in),
    };
    let mut pass = Pass {
        api,
        obj,
        ctx,
        cp: &cp,
        previous: &previous,
        status: previous.clone(),
        fingerprint: &fingerprint,
        secret_values: body.secrets.iter().map(|s| s.value.clone()).collect(),
        events: Vec::new(),
        marker_set: false,
        clear_marker: false,
        redeploy_done: false,
    };
    pass.status.drift_corrections =
        fight::carried(&previous, obj.metadata.generation, redeploy.is_some());
    pass.status.observed_generation = obj.metadata.generation;
    let (view, revision) = match decide::before_remote(&known) {
        Before::WaitRejected(delay) => {
            debug!(
                retry_in_s = delay.as_secs(),
                "a rejected request is not due yet"
            );
            return Ok(Action::requeue(delay));
        }
        Before::WaitSecrets(delay) => {
            debug!(
                retry_in_s = delay.as_secs(),
                "a change of Secret values waits for the last one's interval"
            );
            return Ok(Action::requeue(delay));
        }
        Before::WaitRemoteDeleting(delay) => {
            debug!(
                read_in_s = delay.as_secs_f64(),
                "the remote deployment is being deleted outside the operator"
            );
            return Ok(Action::requeue(delay));
        }
        Before::SpreadColdStart => {
            let delay = ctx
                .config
                .resync_interval
                .mul_f64(rand::random_range(0.0..1.0));
            debug!(check_in_s = delay.as_secs(), "converged before the restart");
            return Ok(Action::requeue(delay));
        }
        Before::PollRevision(rid) => {
            if let Some(wait) = ctx.poll_wait(&key, &plane_key(&cp), &rid) {
                return Ok(Action::requeue(wait));
            }
            let id = previous.deployment_id.clone().unwrap_or_default();
            match cp.get_revision(&id, &rid).await {
                Ok(rev) if rev.status != RevisionStatus::Skipped => {
                    ctx.learn_revision(&plane_key(&cp), &rev);
                    let mut view = RemoteView::from_status(&previous, &id);
                    if rev.status == RevisionStatus::Deployed {
                        view.active_revision_id = Some(rid.clone());
                    }
                    (view, Some(rev))
                }
                // A SKIPPED revision points at a newer one, a 404 at a
                // deployment deleted outside: read the deployment.
                Ok(_) | Err(CpError::NotFound { .. }) => {
                    match pass
                        .read_and_change(&body, &secrets_hash, redeploy.as_deref())
                        .await?
                    {
                        Ok(v) => v,
                        Err(action) => return Ok(action),
                    }
                }
                Err(e) => return pass.fail("get revision", e).await,
            }
        }
        Before::Obtain => {
            // Placement is checked before the create (listener fields are
            // immutable afterwards).
            if let Some(listener_id) = &body.source_config.listener_id
                && let Err(blocked) =
                    placement::check_listener_namespace(&cp, listener_id, &obj.spec).await?
            {
                return report_blocked(api, obj, ctx, blocked).await;
            }
            // A named integration is resolved, and the repository checked,
            // before a create (not for an explicit adoption, which creates
            // nothing): `integration_id` is immutable afterwards.
            if obj.spec.deployment_id.is_none() {
                match integrations::resolve(&ctx.integrations, &plane_key(&cp), &cp, &obj.spec)
                    .await?
                {
                    Ok(Some(id)) => body.source_config.integration_id = Some(id),
                    Ok(None) => {}
                    Err(blocked) => return report_blocked(api, obj, ctx, blocked).await,
                }
            }
            let obtained = match obtain(&mut pass, &body).await? {
                Obtained::Remote(d) => d,
                Obtained::Stop(action) => return Ok(action),
            };
            if obtained.created {
                pass.status.secrets_hash = Some(secrets_hash.clone());
                pass.status.unechoed_hash = Some(shapes::unechoed_hash(&body));
                pass.redeploy_done = true;
                // The create started the first revision.
                let view = RemoteView::of(&obtained.deployment);
                (view, None)
            } else {
                // Adopted or recovered: converge it like any other pass.
                pass.status.deployment_id = Some(obtained.deployment.id.clone());
                match pass
                    .change(
                        *obtained.deployment,
                        &body,
                        &secrets_hash,
                        redeploy.as_deref(),
                        obtained.recovered,
                    )
                    .await?
                {
                    Ok(v) => v,
                    Err(action) => return Ok(action),
                }
            }
        }
        Before::ReadDeployment => {
            match pass
                .read_and_change(&body, &secrets_hash, redeploy.as_deref())
                .await?
            {
                Ok(v) => v,
                Err(action) => return Ok(action),
            }
        }
    };
    pass.follow(view, revision, &key).await
}

/// One pass in progress: what it read and the status it will write once.
struct Pass<'a> {
    api: &'a Api<AgentDeployment>,
    obj: &'a AgentDeployment,
    ctx: &'a Context,
    cp: &'a ControlPlaneClient,
    previous: &'a AgentDeploymentStatus,
    /// The status written at the end of the pass.
    status: AgentDeploymentStatus,
    fingerprint: &'a str,
    /// The secret values sent with the deployment: removed from the log
    /// lines the pass shows.
    secret_values: Vec<SecretString>,
    /// Events published after the status write: (type, reason, note).
    events: Vec<(EventType, &'static str, String)>,
    /// This pass set the create-pending marker.
    marker_set: bool,
    /// A create was definitely rejected: remove the marker.
    clear_marker: bool,
    /// The pending redeploy request was served (by a redeploy, a PATCH that
    /// started a revision, or the create).
    redeploy_done: bool,
}

impl Pass<'_> {
    /// GETs the deployment and makes it equal to the spec (see
    /// [`Pass::change`]). `Err(action)`: the pass ended (status written).
    async fn read_and_change(
        &mut self,
        body: &DeploymentCreate,
        secrets_hash: &str,
        redeploy: Option<&str>,
    ) -> Result<Result<(RemoteView, Option<Revision>), Action>, Error> {
        let id = self.status.deployment_id.clone().unwrap_or_default();
        let remote = match self.cp.get_deployment(&id).await {
            Ok(d) => d,
            Err(CpError::NotFound { .. }) => {
                return remote_deleted(self.api, self.obj, self.ctx, &id)
                    .await
                    .map(Err);
            }
            Err(e) => return self.fail("get deployment", e).await.map(Err),
        };
        self.change(remote, body, secrets_hash, redeploy, false)
            .await
    }

    /// Decides on the deployment read ([`decide::after_read`]) and sends at
    /// most one mutation: the PATCH, or the redeploy.
    async fn change(
        &mut self,
        remote: Deployment,
        body: &DeploymentCreate,
        secrets_hash: &str,
        redeploy: Option<&str>,
        obtained_now: bool,
    ) -> Result<Result<(RemoteView, Option<Revision>), Action>, Error> {
        // Values changed here (the referenced Secrets), or on the control
        // plane (the values the service returns, compared by keyed hash,
        // only on this read: no extra request). A correction of values
        // changed outside is paced like a change here, so a fight with
        // another writer costs at most one revision per interval; not when
        // the status holds a PATCH the service did not hold (it is not sent
        // anyway, and the pass must keep reporting it, not flap to Ready).
        let changed_here = self.previous.secrets_hash.as_deref() != Some(secrets_hash);
        let changed_outside = !changed_here
            && desired::remote_secrets_differ(&self.ctx.hash_key, secrets_hash, &remote.secrets)
            && (self.previous.unheld_patch.is_some()
                || self.ctx.secrets_due_in(&object_key(self.obj)).is_none());
        let unechoed = shapes::unechoed_hash(body);
        let memory = Memory {
            send_secrets: changed_here || changed_outside,
            sent: self.previous.unechoed_hash.as_deref(),
        };
        let patch = desired::compute_patch(body, &remote, &memory);
        (self.status.source_commit, self.status.built_image) = shapes::provenance(&remote);
        let patch_fingerprint = desired::patch_fingerprint(&patch, secrets_hash);
        // What `fight::carried` left of the corrections of drift.
        let corrections = self.status.drift_corrections.clone();
        let read = decide::Read {
            patch: &patch,
            patch_fingerprint: &patch_fingerprint,
            status: self.previous,
            generation: self.obj.metadata.generation,
            secrets_changed_here: changed_here && self.previous.secrets_hash.is_some(),
            redeploy_requested: redeploy.is_some(),
            obtained_now,
            remote_deleting: deleting::is_deleting(remote.status.as_deref()),
            drift_corrections: &corrections,
        };
        if !read.remote_deleting {
            deleting::DELETES.forget(&object_key(self.obj));
        }
        let mut view = RemoteView::of(&remote);
        match decide::after_read(&read) {
            After::RemoteDeleting => {
                let outcome = Outcome::Progressing {
                    reason: reason::REMOTE_DELETED,
                    message: format!(
                        "remote deployment {} is being deleted outside the operator",
                        remote.id
                    ),
                };
                self.finish(&outcome).await?;
                // Read again on the backoff of a delete in progress.
                let wait = deleting::DELETES.read(
                    &object_key(self.obj),
                    &remote.id,
                    true,
                    self.ctx.config.poll_interval,
                    self.ctx.config.max_poll_interval,
                );
                Ok(Err(Action::requeue(wait)))
            }
            After::Fight { fields } => {
                let outcome = Outcome::Stalled {
                    reason: reason::DRIFT_FIGHT,
                    message: fight::message(&remote.id, &fields),
                };
                self.finish(&outcome).await?;
                Ok(Err(Action::requeue(jittered(
                    self.ctx.config.resync_interval,
                ))))
            }
            After::Unheld => {
                let outcome = unheld_outcome(&remote.id, &patch);
                self.status.unheld_patch = Some(patch_fingerprint);
                self.finish(&outcome).await?;
                Ok(Err(Action::requeue(jittered(
                    self.ctx.config.resync_interval,
                ))))
            }
            After::Patch { drift } => match self.cp.patch_deployment(&remote.id, &patch).await {
                Ok(d) => {
                    let fields = desired::patch_fields(&patch).join(", ");
                    let (event_reason, verb) = if drift {
                        self.status.drift_corrections = fight::remember(
                            &corrections,
                            &desired::patch_fields(&patch),
                            k8s_openapi::jiff::Timestamp::now(),
                        );
                        ("DriftCorrected", "changed outside the operator; restored")
                    } else {
                        ("Patched", "patched")
                    };
                    self.events.push((
                        EventType::Normal,
                        event_reason,
                        format!("{fields} of remote deployment {} {verb}", d.id),
                    ));
                    if patch.secrets.is_some() {
                        self.status.secrets_hash = Some(secrets_hash.to_owned());
                        self.ctx.secrets_sent(&object_key(self.obj));
                    }
                    if desired::creates_revision(&patch) {
                        self.redeploy_done = true;
                    }
                    self.status.rejected_request = None;
                    self.status.unechoed_hash = Some(unechoed.clone());
                    (self.status.source_commit, self.status.built_image) = shapes::provenance(&d);
                    // Read back: a value the service drops or normalizes in
                    // a way no answer-shape rule explains would differ again
                    // on the next pass, forever.
                    let again = desired::compute_patch(
                        body,
                        &d,
                        &Memory {
                            send_secrets: desired::remote_secrets_differ(
                                &self.ctx.hash_key,
                                secrets_hash,
                                &d.secrets,
                            ),
                            sent: Some(&unechoed),
                        },
                    );
                    view = RemoteView::of(&d);
                    if !again.is_empty() {
                        self.status.unheld_patch =
                            Some(desired::patch_fingerprint(&again, secrets_hash));
                        let outcome = unheld_outcome(&d.id, &again);
                        self.status.latest_revision_id = d.latest_revision_id.clone();
                        self.status.deployment_id = Some(d.id.clone());
                        self.finish(&outcome).await?;
                        return Ok(Err(Action::requeue(jittered(
                            self.ctx.config.resync_interval,
                        ))));
                    }
                    self.status.unheld_patch = None;
                    Ok(Ok((view, None)))
                }
                Err(e) => self.fail("patch deployment", e).await.map(Err),
            },
            After::Redeploy => match self.cp.redeploy(&remote.id).await {
                Ok(revision) => {
                    self.events.push((
                        EventType::Normal,
                        "Redeployed",
                        format!(
                            "redeploy requested at {}: new revision {}",
                            redeploy.unwrap_or_default(),
                            revision.id
                        ),
                    ));
                    self.status.rejected_request = None;
                    self.redeploy_done = true;
                    view.latest_revision_id = Some(revision.id.clone());
                    Ok(Ok((view, Some(revision))))
                }
                Err(e) => self.fail("redeploy", e).await.map(Err),
            },
            After::Follow => {
                if self.previous.observed_generation != self.obj.metadata.generation {
                    self.status.unheld_patch = None;
                }
                // Nothing to send: the desired state is what the remote
                // holds, or what was last sent where the read does not tell.
                self.status.unechoed_hash = Some(unechoed);
                Ok(Ok((view, None)))
            }
        }
    }

    /// Reports a control plane error: a definite rejection (400, 409, 422)
    /// is recorded with its fingerprint and not sent again until the desired
    /// state changes or its backoff passes; a transient error is returned for
    /// the per-object backoff. Status is written once.
    async fn fail(&mut self, operation: &'static str, e: CpError) -> Result<Action, Error> {
        let mut outcome = error_outcome(operation, &e);
        if matches!(e, CpError::Unauthorized { .. }) {
            // A refused key is the AgentControlPlane's problem, not this
            // object's: it waits for its plane like any blocked object, and
            // a plane or key Secret change retries it. (Its pass may run
            // before the plane's own probe has marked the plane Stalled.)
            outcome = Outcome::Stalled {
                reason: reason::CONTROL_PLANE_NOT_READY,
                message: format!(
                    "AgentControlPlane {}/{} is not ready: Unauthorized: {operation}: {e}",
                    self.obj.namespace().unwrap_or_default(),
                    self.obj.spec.control_plane_ref.name
                ),
            };
        }
        if e.is_transient() {
            self.finish(&outcome).await?;
            return Err(Error::ControlPlane {
                operation,
                source: e,
            });
        }
        let mut delay = jittered(self.ctx.config.resync_interval);
        if e.is_rejection() {
            let attempts = self
                .previous
                .rejected_request
                .as_ref()
                .filter(|r| r.fingerprint == self.fingerprint)
                .map_or(1, |r| r.attempts.saturating_add(1));
            delay = decide::rejection_backoff(attempts);
            let retry_at = k8s_openapi::jiff::Timestamp::now()
                .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(
                    delay.as_secs() as i64,
                ))
                .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now());
            self.status.rejected_request = Some(RejectedRequest {
                operation: operation.to_owned(),
                fingerprint: self.fingerprint.to_owned(),
                attempts,
                retry_after_time: retry_at.to_string(),
            });
        }
        self.finish(&outcome).await?;
        Ok(Action::requeue(delay))
    }

    /// Writes the status with `outcome` (once), then removes the
    /// create-pending marker if asked, then publishes the events.
    async fn finish(&mut self, outcome: &Outcome) -> Result<(), Error> {
        self.status.observed_generation = self.obj.metadata.generation;
        self.status.conditions = conditions(
            &self.previous.conditions,
            outcome,
            self.obj.metadata.generation,
        );
        verify::set_condition(&mut self.status, &self.previous.conditions, self.obj);
        // Never apply a status that lacks an id the object already had
        // (server-side apply would remove it) unless the pass decided so.
        if self.status.deployment_id.is_none() && self.previous.deployment_id.is_some() {
            self.status.deployment_id = self.previous.deployment_id.clone();
        }
        let warn = match outcome {
            Outcome::Stalled { reason, message } | Outcome::Progressing { reason, message }
                if !already_reported(self.obj, reason, message) =>
            {
                (*reason != reason::REVISION_IN_PROGRESS
                    && *reason != reason::CREATING
                    && *reason != reason::REMOTE_DELETED
                    && *reason != reason::REVISION_FAILED
                    && *reason != reason::REVISION_INTERRUPTED
                    && !verify::is_verification_reason(reason))
                .then(|| (*reason, message.clone()))
            }
            _ => None,
        };
        let id = self.status.deployment_id.clone();
        if self.redeploy_done {
            self.status.last_redeploy_requested_at =
                self.obj.annotations().get(REDEPLOY_ANNOTATION).cloned();
        }
        write_status(self.api, self.obj, std::mem::take(&mut self.status)).await?;
        // Then the metadata: the marker is replaced by the id annotation only
        // once the id is in status.
        let marker = self.marker_set || create_pending(self.obj);
        match id {
            Some(id)
                if marker || self.obj.annotations().get(DEPLOYMENT_ID_ANNOTATION) != Some(&id) =>
            {
                set_annotations(
                    self.api,
                    self.obj,
                    &[
                        (CREATE_PENDING_ANNOTATION, None),
                        (DEPLOYMENT_ID_ANNOTATION, Some(&id)),
                    ],
                )
                .await?;
            }
            None if marker && self.clear_marker => {
                set_annotations(self.api, self.obj, &[(CREATE_PENDING_ANNOTATION, None)]).await?;
            }
            _ => {}
        }
        if let Some((reason, message)) = warn {
            publish(self.ctx, self.obj, EventType::Warning, reason, message).await;
        }
        for (type_, reason, note) in std::mem::take(&mut self.events) {
            publish(self.ctx, self.obj, type_, reason, note).await;
        }
        Ok(())
    }

    /// Follows the latest revision and reports: a revision this pass started
    /// is not read (it has just begun); one that ended is not read again.
    async fn follow(
        mut self,
        view: RemoteView,
        revision: Option<Revision>,
        key: &str,
    ) -> Result<Action, Error> {
        let previous = self.previous;
        let ctx = self.ctx;
        let latest = view.latest_revision_id.clone();
        let started_here =
            revision.is_none() && latest.is_some() && latest != previous.latest_revision_id;
        if let Some(rid) = latest.as_deref().filter(|_| started_here) {
            ctx.revision_started(key, rid);
        } else if let Some(rev) = revision
            .as_ref()
            .filter(|r| Some(&r.id) != previous.latest_revision_id.as_ref())
        {
            // A redeploy answered with the revision it started.
            ctx.revision_started(key, &rev.id);
        }
        let known_ended = previous.latest_revision_id == latest
            && previous
                .revision_status
                .clone()
                .map(RevisionStatus::from)
                .is_some_and(|s| !s.is_in_progress() && s != RevisionStatus::Skipped);
        // When the revision followed was created (None: just now).
        let mut created_at: Option<String> = None;
        // The revision read by this pass, for the history in status.
        let mut read: Option<Revision> = None;
        let revision_status = match (&latest, revision) {
            (None, _) => None,
            (Some(rid), Some(rev)) if &rev.id == rid => {
                created_at = rev.created_at.clone();
                let status = rev.status.clone();
                read = Some(rev);
                Some(status)
            }
            (Some(_), _) if known_ended => {
                previous.revision_status.clone().map(RevisionStatus::from)
            }
            (Some(_), _) if started_here => None,
            (Some(rid), _) => match self.cp.get_revision(&view.id, rid).await {
                Ok(rev) => {
                    ctx.learn_revision(&plane_key(self.cp), &rev);
                    created_at = rev.created_at.clone();
                    let status = rev.status.clone();
                    read = Some(rev);
                    Some(status)
                }
                Err(e) => return self.fail("get revision", e).await,
            },
        };
        let outcome = match (&latest, &revision_status) {
            (Some(rid), Some(RevisionStatus::Skipped)) => Outcome::Progressing {
                reason: reason::REVISION_IN_PROGRESS,
                message: format!("revision {rid} was SKIPPED; waiting for the newer revision"),
            },
            (Some(rid), Some(s)) => revision_outcome(rid, s),
            (Some(rid), None) => Outcome::Progressing {
                reason: reason::REVISION_IN_PROGRESS,
                message: format!("revision {rid} started"),
            },
            _ => Outcome::Progressing {
                reason: reason::REVISION_IN_PROGRESS,
                message: "the deployment has no revision yet".into(),
            },
        };
        // A revision in progress past `spec.progressDeadlineSeconds`.
        let deadline = self
            .obj
            .spec
            .progress_deadline_seconds
            .unwrap_or(DEFAULT_PROGRESS_DEADLINE_SECONDS);
        let slow_poll = ctx.config.max_poll_interval * 4;
        let overdue = match (&latest, &revision_status) {
            (Some(rid), Some(s)) if s.is_in_progress() => created_at
                .as_deref()
                .and_then(seconds_until)
                .map(|until| -until)
                .filter(|age| *age > f64::from(deadline))
                .map(|_| (rid.clone(), s.clone())),
            _ => None,
        };
        // The message does not change while the revision's status does not,
        // so a steady overdue revision causes no status write.
        let outcome = match &overdue {
            Some((rid, s)) => Outcome::Stalled {
                reason: reason::PROGRESS_DEADLINE_EXCEEDED,
                message: format!(
                    "revision {rid} is still {s} more than {deadline} s after it was created \
                     at {} (spec.progressDeadlineSeconds); still polled, every {} s, until it \
                     ends",
                    created_at.as_deref().unwrap_or("?"),
                    slow_poll.as_secs()
                ),
            },
            None => outcome,
        };
        // A deployment the control plane shows UNUSED (docs/control-plane-api.md "Unused
        // deployments": cloud deployments without traffic for a long time are
        // shown UNUSED, then removed by the service).
        let unused = view.deployment_status.as_deref() == Some(UNUSED);
        let outcome = match outcome {
            Outcome::Ready { reason, message } if unused => Outcome::Ready {
                reason,
                message: format!("{message}; {UNUSED_NOTE}"),
            },
            other => other,
        };
        if unused && previous.deployment_status.as_deref() != Some(UNUSED) {
            self.events.push((
                EventType::Warning,
                "DeploymentUnused",
                format!("remote deployment {}: {UNUSED_NOTE}", view.id),
            ));
        }
        // A failed build or deploy is explained by the end of its log, read
        // once, by the pass that first sees the failure (docs/control-plane-api.md "Logs"); later
        // passes keep the message.
        let outcome = match outcome {
            Outcome::Stalled { reason: r, message } if r == reason::REVISION_FAILED => {
                let newly_ended = previous.latest_revision_id != latest
                    || previous.revision_status.as_deref()
                        != revision_status.as_ref().map(|s| s.as_str());
                let log = revision_status.as_ref().and_then(FailureLog::of);
                let message = match (newly_ended, latest.as_deref(), log) {
                    (true, Some(rid), Some(log)) => {
                        let read = self.log_tail(&view.id, rid, log).await;
                        logtail::explained(&message, log, read)
                    }
                    _ => logtail::kept(
                        &message,
                        find(&previous.conditions, READY).map(|c| c.message.as_str()),
                    ),
                };
                Outcome::Stalled { reason: r, message }
            }
            other => other,
        };
        // (Its Warning event comes from `finish`, as for every Stalled.)
        let failed = matches!(
            outcome,
            Outcome::Stalled { reason, .. }
                if reason == reason::REVISION_FAILED || reason == reason::REVISION_INTERRUPTED
        );
        let s = &mut self.status;
        s.deployment_id = Some(view.id.clone());
        s.latest_revision_id = latest.clone();
        s.revision_status = revision_status.as_ref().map(|s| s.to_string());
        s.active_revision_id = view.active_revision_id.clone();
        s.deployment_status = view.deployment_status.clone();
        s.url = view.url.clone().or_else(|| previous.url.clone());
        if failed {
            s.last_failed_revision_id = latest.clone();
            s.last_failed_revision_status = s.revision_status.clone();
        }
        if let Some(rev) = &read {
            record_revision(&mut s.revisions, rev);
            if rev.source.as_deref() == Some("github") {
                (s.source_commit, s.built_image) = shapes::revision_provenance(rev);
            }
        }
        let revision_changed = previous.revision_status != s.revision_status
            || previous.latest_revision_id != s.latest_revision_id;
        if revision_changed {
            match &outcome {
                Outcome::Ready { message, .. } => {
                    self.events
                        .push((EventType::Normal, "RevisionDeployed", message.clone()));
                }
                Outcome::Stalled { message, .. } if failed => {
                    self.events
                        .push((EventType::Warning, "RevisionFailed", message.clone()));
                }
                Outcome::Stalled { .. } => {}
                Outcome::Progressing { .. } | Outcome::Paused { .. } => {}
            }
        }
        let (outcome, verify_wait) = self.verified(outcome, &view, latest.as_deref()).await?;
        if matches!(outcome, Outcome::Ready { .. })
            && let Some(seconds) = time_to_ready(self.obj)
        {
            ctx.metrics.observe_time_to_ready(seconds);
        }
        self.finish(&outcome).await?;
        if let Some(wait) = verify_wait {
            ctx.reset_polls(key);
            ctx.revision_ended(key);
            return Ok(Action::requeue(wait));
        }
        Ok(match &outcome {
            Outcome::Progressing { .. } => {
                let state = format!(
                    "{}/{}",
                    latest.as_deref().unwrap_or(""),
                    revision_status.as_ref().map_or("", |s| s.as_str())
                );
                let backoff = ctx.poll_delay(key, &state);
                let expected_left = if started_here {
                    ctx.expected_left(&plane_key(self.cp), None)
                } else {
                    created_at
                        .as_deref()
                        .and_then(|t| ctx.expected_left(&plane_key(self.cp), Some(t)))
                };
                Action::requeue(decide::next_poll(
                    backoff,
                    expected_left,
                    ctx.config.max_poll_interval,
                ))
            }
            _ if overdue.is_some() => Action::requeue(jittered(slow_poll)),
            _ => {
                ctx.reset_polls(key);
                ctx.revision_ended(key);
                Action::requeue(jittered(ctx.config.resync_interval))
            }
        })
    }
}

impl Pass<'_> {
    /// The tail of the log that explains a failed revision, secret-free
    /// ([`logtail::tail`]); `Err` with the reason when it cannot be read
    /// (not retried: the message says so).
    async fn log_tail(
        &self,
        id: &str,
        rid: &str,
        log: FailureLog,
    ) -> Result<Option<String>, String> {
        let query = LogQuery {
            limit: Some(logtail::TAIL_LINES),
            order: Some(LogOrder::Desc),
            ..Default::default()
        };
        let page = match log {
            FailureLog::Build => self.cp.build_logs(id, rid, &query).await,
            FailureLog::Deploy => self.cp.deploy_logs(id, Some(rid), &query).await,
        };
        page.map(|p| logtail::tail(&p.logs, &self.secret_values))
            .map_err(|e| e.to_string())
    }
}

/// Deployment status of a deployment without traffic for a long time (docs/control-plane-api.md
/// "Deployment": `status`; "Unused deployments").
const UNUSED: &str = "UNUSED";

/// What the status and the Warning event say about an `UNUSED` deployment.
const UNUSED_NOTE: &str = "the control plane shows it UNUSED (no traffic for a long time); \
     the service removes cloud deployments that stay unused";

/// Puts `rev` at the front of `history` (replacing an older entry with its
/// id), newest first, keeping at most [`REVISION_HISTORY_LIMIT`].
fn record_revision(history: &mut Vec<RevisionSummary>, rev: &Revision) {
    let config = rev.source_revision_config.as_ref();
    let ended = !rev.status.is_in_progress();
    let entry = RevisionSummary {
        id: rev.id.clone(),
        status: rev.status.to_string(),
        created_at: rev.created_at.clone(),
        finished_at: rev.updated_at.clone().filter(|_| ended),
        repo_ref: config.and_then(|c| c.repo_ref.clone()),
        image_uri: config.and_then(|c| c.image_uri.clone()),
    };
    let position = history.iter().position(|r| r.id == rev.id);
    match position {
        Some(i) => history[i] = entry,
        None => history.insert(0, entry),
    }
    // Newest first by creation time (RFC 3339 strings of one service sort).
    history.sort_by(|a, b| b.created_at.cmp(&a.created_at));
    history.truncate(REVISION_HISTORY_LIMIT);
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
    if obj.spec.remote_deletion_policy == RemoteDeletionPolicy::Stall
        || obj.spec.deployment_id.is_some()
    {
        return report_stalled(
            api,
            obj,
            ctx,
            reason::REMOTE_DELETED,
            format!(
                "remote deployment {id} {how}; delete and re-create this resource (or set spec.remoteDeletionPolicy: Recreate without spec.deploymentId) to create a new one"
            ),
        )
        .await;
    }
    publish(
        ctx,
        obj,
        EventType::Warning,
        "RemoteDeleted",
        format!(
            "remote deployment {id} {how}; creating it again (spec.remoteDeletionPolicy: Recreate)"
        ),
    )
    .await;
    deleting::DELETES.forget(&object_key(obj));
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
    write_status(api, obj, status).await?;
    Ok(Action::requeue(Duration::from_millis(100)))
}

/// Deletes the remote deployment (per `spec.deletionPolicy`); the finalizer
/// is removed only once GET answers 404. DELETE is sent once, and again only
/// when a read shows the deployment not being deleted; reads follow the
/// backoff of [`deleting`], and a pass before the next read is due sends
/// nothing.
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
    match obj.paused() {
        Ok(true) => {
            report_paused(api, obj).await?;
            return Err(Error::DeletionBlocked(format!(
                "paused by the annotation {PAUSED_ANNOTATION}"
            )));
        }
        Ok(false) => {}
        Err(message) => {
            report(
                api,
                obj,
                &Outcome::Stalled {
                    reason: reason::INVALID_ANNOTATION,
                    message: message.clone(),
                },
            )
            .await?;
            return Err(Error::DeletionBlocked(message));
        }
    }
    // Giving the remote deployment up (removing the finalizer without a
    // DELETE) is decided on a fresh read, never on a cache that may predate
    // the operator's own last write; the id annotation survives a restore
    // without status.
    let fresh;
    let id_of = |o: &AgentDeployment| {
        o.status
            .as_ref()
            .and_then(|s| s.deployment_id.clone())
            .or_else(|| o.annotations().get(DEPLOYMENT_ID_ANNOTATION).cloned())
    };
    let obj = if id_of(obj).is_none() && !create_pending(obj) {
        match api.get_opt(&obj.name_any()).await.map_err(Error::Kube)? {
            Some(o) => {
                fresh = o;
                &fresh
            }
            None => return Ok(Action::await_change()),
        }
    } else {
        obj
    };
    let known_id = id_of(obj);
    if known_id.is_none() && !create_pending(obj) {
        return Ok(Action::await_change());
    }
    let key = object_key(obj);
    // What this process remembers of the delete; after a restart, the status
    // written by the last read tells whether the deployment was deleting.
    let step = match &known_id {
        Some(id) => deleting::before(
            deleting::DELETES
                .known(&key, id)
                .unwrap_or(deleting::Known {
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
        return Err(Error::DeletionPending(id.clone()));
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
    if step == deleting::Step::Delete {
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
    }
    match cp.get_deployment(&id).await {
        Err(CpError::NotFound { .. }) => {
            deleting::DELETES.forget(&key);
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
            let remote_status = remote.status.as_deref();
            let is_deleting = deleting::is_deleting(remote_status);
            let wait = deleting::DELETES.read(
                &key,
                &id,
                is_deleting,
                ctx.config.poll_interval,
                ctx.config.max_poll_interval,
            );
            debug!(deployment_id = %id, deleting = is_deleting, read_in_s = wait.as_secs_f64(), "remote delete in progress");
            let message = if is_deleting {
                format!(
                    "waiting for remote deployment {id} to be deleted (status {})",
                    remote_status.unwrap_or("unknown")
                )
            } else {
                format!(
                    "remote deployment {id} is not being deleted (status {}): the delete did not take; sending DELETE again",
                    remote_status.unwrap_or("unknown")
                )
            };
            let mut status = obj.status.clone().unwrap_or_default();
            status.deployment_status = remote.status.clone();
            status.conditions = conditions(
                &status.conditions,
                &Outcome::Progressing {
                    reason: reason::DELETING,
                    message,
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
