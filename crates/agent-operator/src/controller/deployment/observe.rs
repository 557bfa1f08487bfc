//! The "observe" step of the AgentDeployment pass ([`Step::Observe`]):
//! everything read before any control plane request (a fresh read when a
//! risky decision is ahead, the preflight rules, the AgentControlPlane, the
//! referenced Secrets, the listener, the image's registry), and the desired
//! state built from it ([`Observed`]). Nothing remote happens while an input
//! is missing: the step ends the pass with `Stalled`. It writes nothing
//! (the finalizer, the pause and the expiry are steps of their own:
//! [`super::step`]).
//!
//! [`Step::Observe`]: super::step::Step::Observe

use crate::controller::kind::Requeue;
use kube::{Api, ResourceExt};
use tracing::debug;

use super::plane::control_plane;
use super::promotion;
use super::report::{Flow, Report};
use crate::api::conditions::reason;
use crate::api::deployment::{
    AgentDeployment, AgentDeploymentStatus, ManagementPolicy, REDEPLOY_ANNOTATION, ResolvedImage,
};
use crate::api::preflight;
use crate::controller::deployment::context::DeploymentContext;
use crate::controller::error::Error;
use crate::controller::requeue::seconds_until;
use crate::controller::{hash_key, placement, resolve};
use crate::controlplane::ControlPlaneClient;
use crate::controlplane::types::DeploymentCreate;
use crate::plan::promotion::{Hold, Step, Take};
use crate::plan::status::Outcome;
use crate::plan::{decide, desired, image};
use crate::registry::docker_config::DOCKER_CONFIG_KEY;
use crate::registry::{Credentials, Error as RegistryError};

/// What a pass knows before its first control plane request.
pub struct Observed {
    /// The object read fresh from the API server, when the pass is about to
    /// decide on it (no recorded id yet); `None`: the cached one is used.
    pub fresh: Option<Box<AgentDeployment>>,
    /// `namespace/name` of the object.
    pub key: String,
    /// The first pass of this object since the operator started.
    pub first_pass: bool,
    /// The control plane of `spec.controlPlaneRef`.
    pub cp: ControlPlaneClient,
    /// The status as last written (the old secrets-hash format rewritten).
    pub previous: AgentDeploymentStatus,
    /// The desired deployment (secret values resolved, the listener id set).
    pub body: DeploymentCreate,
    /// Keyed hash of the secret values ([`hash_key`]).
    pub secrets_hash: String,
    /// The redeploy annotation's value, when not yet acted on.
    pub redeploy: Option<String>,
    /// Fingerprint of the desired state ([`desired::fingerprint`]).
    pub fingerprint: String,
    /// The secret values differ from those last sent.
    pub secrets_changed: bool,
    /// When the waits of this object end, read from the in-process memory
    /// and the clock at observation time.
    pub waits: Waits,
    /// `status.resolvedImage` to report (`spec.imagePolicy`): the record
    /// used or made by this pass; `None` under `Never`.
    pub resolved_image: Option<ResolvedImage>,
    /// The tag named another digest than the record: `(old, new)`.
    pub image_moved: Option<(String, String)>,
    /// `spec.promotion`: what the source serves that this pass deploys (in
    /// `body` already), or what it keeps deploying while it holds.
    pub promotion: Option<Take>,
    /// `spec.promotion` takes nothing new on this pass (a wait or a
    /// refusal) of an object that holds a remote deployment: the pass goes
    /// on with its reads, and reports the hold ([`Hold`]).
    pub promotion_hold: Option<Hold>,
}

/// When the waits of an object end, as observed: seconds (negative when
/// past) until a rejected request may be sent again, until a change of
/// Secret values may be sent, until a remote delete in progress outside
/// the operator is read again.
#[derive(Clone, Copy, Debug, Default)]
pub struct Waits {
    /// Until `status.rejectedRequest.retryAfterTime`, seconds.
    pub rejection_due_in: Option<f64>,
    /// Until the next PATCH carrying only Secret values may go.
    pub secrets_due_in: Option<std::time::Duration>,
    /// Until the remote deployment being deleted is read again.
    pub remote_deleting_due_in: Option<std::time::Duration>,
}

impl Waits {
    /// The waits of the object `key` whose status is `previous`, read from
    /// `ctx` and the clock now.
    fn observe(ctx: &DeploymentContext, key: &str, previous: &AgentDeploymentStatus) -> Self {
        Self {
            rejection_due_in: previous
                .rejected_request
                .as_ref()
                .and_then(|r| seconds_until(&r.retry_after_time)),
            secrets_due_in: ctx.secrets_due_in(key),
            remote_deleting_due_in: previous
                .deployment_id
                .as_deref()
                .and_then(|id| ctx.state.deletes.known(key, id))
                .filter(|k| k.accepted)
                .and_then(|k| k.due_in),
        }
    }
}

impl Observed {
    /// A promotion needs one new revision of an existing `github`
    /// deployment (the source's commit, same ref).
    pub fn promotion_redeploy(&self) -> bool {
        self.promotion.as_ref().is_some_and(|t| t.new_revision)
    }

    /// The promotion takes another revision of the source than status
    /// records: a change made here, not drift.
    pub fn promotion_moved(&self) -> bool {
        self.promotion.as_ref().is_some_and(|t| t.changed)
    }

    /// The facts [`decide::before_remote`] decides on about `obj` (the
    /// object observed, or its fresh read). Pure.
    pub fn known<'a>(&'a self, obj: &AgentDeployment) -> decide::Known<'a> {
        decide::Known {
            generation: obj.metadata.generation,
            status: &self.previous,
            fingerprint: &self.fingerprint,
            secrets_changed: self.secrets_changed,
            redeploy_requested: self.redeploy.is_some() || self.promotion_redeploy(),
            image_moved: self.image_moved.is_some() || self.promotion_moved(),
            first_pass: self.first_pass,
            rejection_due_in: self.waits.rejection_due_in,
            secrets_due_in: self.waits.secrets_due_in,
            remote_deleting_due_in: self.waits.remote_deleting_due_in,
            display_name_due: obj.spec.display_name.is_some()
                && obj.spec.display_name != self.previous.display_name,
        }
    }
}

/// Reads the inputs of `obj` (the [`Step::Observe`](super::step::Step::Observe)
/// of its pass `key`, `first_pass` as the pass saw it at its start);
/// `Err`: the pass ends there (stalled on a spec or input, or the object
/// is gone). Writes nothing.
pub async fn read(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    ctx: &DeploymentContext,
    key: String,
    first_pass: bool,
) -> Flow<Observed> {
    let last = last_written(api, obj).await?;
    let o = last.fresh.as_deref().unwrap_or(obj);
    let wanted = match wanted(api, o, ctx, &last.previous).await {
        Ok(w) => w,
        Err(r) => return Err(r.on(last.fresh.as_deref())),
    };
    let mut seen = desired_state(
        o,
        ctx,
        key,
        first_pass,
        wanted.cp,
        wanted.body,
        last.previous,
    );
    seen.promotion = wanted.take;
    seen.promotion_hold = wanted.hold;
    seen.fresh = last.fresh;
    seen.resolved_image = wanted.resolved_image;
    seen.image_moved = wanted.image_moved;
    Ok(seen)
}

/// The status a pass decides on ([`last_written`]), and the fresh read it
/// was taken from when the object names no deployment yet.
struct LastWritten {
    /// The fresh read of the object, when made.
    fresh: Option<Box<AgentDeployment>>,
    /// The status as last written.
    previous: AgentDeploymentStatus,
}

/// The last status of `obj`: a decision to create, recover or declare a
/// conflict is made on a fresh read of the object, never on a cache that
/// may predate the operator's own last write (its create-pending marker or
/// recorded id). `Err`: the object is gone or being deleted (the pass ends
/// without a write).
async fn last_written(api: &Api<AgentDeployment>, obj: &AgentDeployment) -> Flow<LastWritten> {
    let previous = obj.status.clone().unwrap_or_default();
    if previous.deployment_id.is_some() {
        return Ok(LastWritten {
            fresh: None,
            previous,
        });
    }
    match api.get_opt(&obj.name_any()).await.map_err(Error::Kube)? {
        Some(o) if o.metadata.deletion_timestamp.is_none() => Ok(LastWritten {
            previous: o.status.clone().unwrap_or_default(),
            fresh: Some(Box::new(o)),
        }),
        _ => Err(Report::end(Requeue::await_change())),
    }
}

/// What `obj` asks for, read from Kubernetes and the registry: its
/// control plane, the desired deployment (the image and the promotion's
/// source applied), and the image record and promotion it comes from.
struct Wanted {
    cp: ControlPlaneClient,
    body: DeploymentCreate,
    take: Option<Take>,
    hold: Option<Hold>,
    resolved_image: Option<ResolvedImage>,
    image_moved: Option<(String, String)>,
}

/// The promotion source (from the watch cache), the inputs and the image
/// of `obj` ([`promoted`], [`inputs`], [`image()`]): a missing input, or a
/// promotion that holds an object with no remote deployment yet, ends the
/// pass before any control plane request.
async fn wanted(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    ctx: &DeploymentContext,
    previous: &AgentDeploymentStatus,
) -> Flow<Wanted> {
    let (take, hold) = promoted(obj, ctx, previous)?;
    let has_id = previous.deployment_id.is_some();
    let (cp, mut body) = inputs(api, obj, ctx, has_id).await?;
    // The image policy asks the registry (not the control plane) before
    // any control plane request.
    let (resolved_image, image_moved) = match image(obj, ctx, previous).await? {
        Some((record, moved)) => {
            body.source_revision_config.image_uri = Some(record.pinned.clone());
            (Some(record), moved)
        }
        None => (None, None),
    };
    if let Some(t) = &take {
        if let Some(image) = &t.image_uri {
            body.source_revision_config.image_uri = Some(image.clone());
        }
        if let Some(repo_ref) = &t.repo_ref {
            body.source_revision_config.repo_ref = Some(repo_ref.clone());
        }
    }
    Ok(Wanted {
        cp,
        body,
        take,
        hold,
        resolved_image,
        image_moved,
    })
}

/// What `spec.promotion` of `obj` deploys ([`promotion::step`]), and the
/// hold of a pass that deploys nothing new; `(None, None)` without it. An
/// object that holds a remote deployment keeps what it took last while it
/// holds, and its pass goes on with its reads, so that its status never
/// goes stale ([`Hold`]). `Err`: an object with no remote deployment yet
/// ends its pass before any remote call, `Stalled` on a refusal,
/// `PromotionWaiting` (requeued at the end of the soak, else on the resync
/// interval, and woken by a change of the source) on a wait.
fn promoted(
    obj: &AgentDeployment,
    ctx: &DeploymentContext,
    previous: &AgentDeploymentStatus,
) -> Flow<(Option<Take>, Option<Hold>)> {
    let redeploy_requested = obj
        .annotations()
        .get(REDEPLOY_ANNOTATION)
        .is_some_and(|r| previous.last_redeploy_requested_at.as_ref() != Some(r));
    let Some(step) = promotion::step(&ctx.state.promotions, obj, previous, redeploy_requested)
    else {
        return Ok((None, None));
    };
    if let Step::Deploy(take) = step {
        return Ok((Some(*take), None));
    }
    let Some(hold) = Hold::of(&step) else {
        return Ok((None, None));
    };
    if previous.deployment_id.is_some() {
        let kept = crate::plan::promotion::kept(obj.spec.source, previous);
        return Ok((kept, Some(hold)));
    }
    if hold.refused {
        return Err(Report::stalled(obj, ctx, hold.reason, hold.message));
    }
    let after = hold
        .recheck_in
        .map(|d| d + std::time::Duration::from_secs(1))
        .unwrap_or_else(|| crate::controller::requeue::jittered(ctx.config.resync_interval));
    Err(Report::outcome(
        obj,
        &Outcome::Progressing {
            reason: reason::PROMOTION_WAITING,
            message: hold.message,
        },
        Requeue::after(after),
    ))
}

/// The image `obj` sends under `spec.imagePolicy` ([`image::step`]): the
/// record of status, or a new resolution through the registry (with the
/// credentials of `spec.imagePullSecretRef`) and the digests of a moved tag;
/// `None` under `Never`. `Err`: the pass ends before any control plane
/// request: `Stalled` on an image that cannot be deployed (no
/// `linux/amd64`, unknown, credentials refused), the error backoff on a
/// registry that cannot be reached.
async fn image(
    obj: &AgentDeployment,
    ctx: &DeploymentContext,
    previous: &AgentDeploymentStatus,
) -> Flow<Option<(ResolvedImage, Option<(String, String)>)>> {
    let policy = obj.spec.image_policy();
    let Some(written) = obj.spec.source_revision_config.image_uri.as_deref() else {
        return Ok(None);
    };
    let recorded = previous.resolved_image.as_deref();
    let age = recorded
        .and_then(|r| seconds_until(&r.resolved_at))
        .map(|s| std::time::Duration::from_secs_f64((-s).max(0.0)));
    match image::step(
        policy,
        Some(written),
        obj.metadata.generation,
        recorded,
        age,
        ctx.config.resync_interval,
    ) {
        image::ImageStep::AsWritten => return Ok(None),
        image::ImageStep::Recorded(_) => return Ok(recorded.map(|r| (r.clone(), None))),
        image::ImageStep::Resolve => {}
    }
    registry_allowed(obj, ctx, written)?;
    let credentials = match pull_credentials(obj, ctx, written).await? {
        Ok(c) => c,
        Err((reason, message)) => return Err(Report::stalled(obj, ctx, reason, message)),
    };
    match ctx
        .state
        .registry
        .resolve(written, credentials.as_ref())
        .await
    {
        Ok(resolved) => {
            let now = jiff::Timestamp::now().to_string();
            let record = image::record(
                written,
                obj.metadata.generation,
                &resolved.digest,
                &resolved.pinned,
                &now,
            );
            let moved = image::moved(recorded, &record);
            debug!(digest = %record.digest, policy = policy.as_str(), "image tag resolved");
            Ok(Some((record, moved)))
        }
        Err(e) => Err(registry_failure(obj, ctx, e)),
    }
}

/// `Err` (`Stalled`, `HostNotAllowed`) when the registry of `image` is
/// not on --allowed-hosts: it is a host the operator sends requests to,
/// like every other (docs/CONFIGURATION.md).
fn registry_allowed(obj: &AgentDeployment, ctx: &DeploymentContext, image: &str) -> Flow<()> {
    let host = crate::registry::request_host_of(image).unwrap_or_default();
    let scheme = if crate::registry::is_loopback(&host) {
        "http"
    } else {
        "https"
    };
    ctx.config
        .allowed_hosts
        .check(
            &format!("{scheme}://{host}/"),
            "the registry of spec.sourceRevisionConfig.imageUri (spec.imagePolicy)",
        )
        .map_err(|refused| Report::stalled(obj, ctx, reason::HOST_NOT_ALLOWED, refused.0))
}

/// The credentials of `spec.imagePullSecretRef` for the registry of
/// `image`; `Ok(None)`: none set, or no entry for that registry
/// (anonymous). The inner `Err` is the reason and message of a `Stalled`
/// (a missing Secret or key, an unusable `.dockerconfigjson`).
async fn pull_credentials(
    obj: &AgentDeployment,
    ctx: &DeploymentContext,
    image: &str,
) -> Result<Result<Option<Credentials>, (&'static str, String)>, Box<Report>> {
    let Some(secret) = obj.spec.image_pull_secret_ref.as_ref() else {
        return Ok(Ok(None));
    };
    let ns = obj
        .namespace()
        .ok_or(Error::MissingObjectKey("namespace"))?;
    let json = match resolve::secret_value(
        &ctx.secrets,
        &ctx.client,
        &ns,
        &secret.name,
        DOCKER_CONFIG_KEY,
    )
    .await?
    {
        Ok(v) => v,
        Err(blocked) => return Ok(Err((blocked.reason, blocked.message))),
    };
    let registry = crate::registry::registry_of(image).unwrap_or_default();
    Ok(
        crate::registry::credentials_for(json.as_bytes(), &registry).map_err(|e| {
            (
                reason::REGISTRY_UNAUTHORIZED,
                format!("spec.imagePullSecretRef {}: {e}", secret.name),
            )
        }),
    )
}

/// The report of a failed resolution: `Stalled` with the reason of the
/// table below, or, for a registry that cannot be reached now, `Reconciling`
/// and the error backoff. Nothing was sent to the control plane.
fn registry_failure(
    obj: &AgentDeployment,
    ctx: &DeploymentContext,
    e: RegistryError,
) -> Box<Report> {
    let stalled = match &e {
        RegistryError::WrongPlatform { .. } => Some(reason::IMAGE_PLATFORM_UNSUPPORTED),
        RegistryError::NotFound { .. } | RegistryError::InvalidReference { .. } => {
            Some(reason::IMAGE_NOT_FOUND)
        }
        RegistryError::Unauthorized { .. } => Some(reason::REGISTRY_UNAUTHORIZED),
        RegistryError::Unavailable { .. }
        | RegistryError::Budget { .. }
        | RegistryError::Other { .. } => None,
    };
    match stalled {
        Some(reason) => Report::stalled(obj, ctx, reason, e.to_string()),
        None => Report::outcome(
            obj,
            &Outcome::Progressing {
                reason: reason::REGISTRY_UNAVAILABLE,
                message: format!(
                    "{e}; retried with backoff, nothing is sent to the control plane meanwhile"
                ),
            },
            Requeue::await_change(),
        )
        .then(Err::<Requeue, _>(Error::Registry(e))),
    }
}

/// The preflight rules, the control plane, the Secrets and the listener of
/// `obj`: the desired deployment without its fingerprint.
async fn inputs(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    ctx: &DeploymentContext,
    has_id: bool,
) -> Flow<(ControlPlaneClient, DeploymentCreate)> {
    let ns = obj
        .namespace()
        .ok_or(Error::MissingObjectKey("namespace"))?;
    if let Some(report) = refused(obj, ctx) {
        return Err(report);
    }
    // Nothing remote happens while an input is missing.
    let cp = match control_plane(obj, ctx).await {
        Ok(cp) => cp,
        Err(report) => return Err(unless_deleting(api, obj, report).await),
    };
    let secrets =
        match resolve::deployment_secrets(&ctx.secrets, &ctx.client, &ns, &obj.spec).await? {
            Ok(s) => s,
            Err(blocked) => {
                return Err(unless_deleting(api, obj, Report::blocked(obj, ctx, blocked)).await);
            }
        };
    let mut body = desired::create_body(&obj.remote_name(), &obj.spec, secrets);
    if !has_id {
        // The listener is part of the desired state (and of its
        // fingerprint); its namespace is checked on the control plane only
        // when the pass goes on to obtain a deployment.
        match placement::listener_id(ctx, &ns, &obj.spec).await? {
            Ok(Some(listener_id)) => body.source_config.listener_id = Some(listener_id),
            Ok(None) => {}
            Err(blocked) => return Err(Report::blocked(obj, ctx, blocked)),
        }
    }
    Ok((cp, body))
}

/// The `Stalled` report of a spec refused before any request (clearing a
/// rejection recorded for an earlier spec: [`Report::refused_here`]);
/// `None`: the spec may be sent.
fn refused(obj: &AgentDeployment, ctx: &DeploymentContext) -> Option<Box<Report>> {
    // A spec the control plane would refuse stops here, before any request
    // (rules the schema cannot express, or an object stored before a rule).
    if let Err(message) = preflight::check(&obj.remote_name(), &obj.spec) {
        return Some(Report::refused_here(
            obj,
            ctx,
            reason::INVALID_SPEC,
            message,
        ));
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
        return Some(Report::refused_here(
            obj,
            ctx,
            reason::HOST_NOT_ALLOWED,
            refused.0,
        ));
    }
    // The data-plane pod policy (--pod-policy), also for an object stored
    // while the admission policy was absent.
    if let Some(policy) = &ctx.config.pod_policy
        && let Err(message) = policy.check_deployment(&obj.spec)
    {
        return Some(Report::refused_here(
            obj,
            ctx,
            reason::POD_POLICY_REFUSED,
            message,
        ));
    }
    None
}

/// `report` of a missing input, unless the object turns out to be deleted:
/// when deleting a bundle or a namespace, the Secrets go first and their
/// events start passes of objects whose own deletion follows a moment
/// later. Before a new Warning is published, the object is read fresh; if
/// it is being deleted (or gone), the pass ends without a write and the
/// deletion pass follows.
async fn unless_deleting(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    report: Box<Report>,
) -> Box<Report> {
    if report.events.is_empty() {
        return report;
    }
    match api.get_opt(&obj.name_any()).await {
        Ok(Some(o)) if o.metadata.deletion_timestamp.is_none() => report,
        Ok(_) => Report::end(Requeue::await_change()),
        Err(e) => Report::failed(Error::Kube(e)),
    }
}

/// The hash of the secrets, the redeploy request and the fingerprint of the
/// desired state (pure but for the debug lines).
fn desired_state(
    obj: &AgentDeployment,
    ctx: &DeploymentContext,
    key: String,
    first_pass: bool,
    cp: ControlPlaneClient,
    body: DeploymentCreate,
    mut previous: AgentDeploymentStatus,
) -> Observed {
    let secrets_hash = secrets_hash(ctx, &body, &mut previous);
    let redeploy = obj
        .annotations()
        .get(REDEPLOY_ANNOTATION)
        .filter(|r| previous.last_redeploy_requested_at.as_ref() != Some(*r))
        .cloned();
    let fingerprint = fingerprint(obj, &cp, &body, &secrets_hash, redeploy.as_deref());
    // Under Observe nothing is sent: the values are compared with the ones
    // the control plane returns, on each read.
    let secrets_changed = obj.spec.management_policy == ManagementPolicy::Manage
        && previous.deployment_id.is_some()
        && previous.secrets_hash.as_deref() != Some(secrets_hash.as_str());
    let waits = Waits::observe(ctx, &key, &previous);
    Observed {
        fresh: None,
        key,
        first_pass,
        cp,
        previous,
        body,
        secrets_hash,
        redeploy,
        fingerprint,
        secrets_changed,
        waits,
        resolved_image: None,
        image_moved: None,
        promotion: None,
        promotion_hold: None,
    }
}

/// The keyed hash of the secret values of `body` ([`hash_key`]). A hash
/// in `previous` of the old salted format that still matches is taken as
/// unchanged, and rewritten as the HMAC by this pass's status write (no
/// PATCH).
fn secrets_hash(
    ctx: &DeploymentContext,
    body: &DeploymentCreate,
    previous: &mut AgentDeploymentStatus,
) -> String {
    let secrets_hash = ctx.state.hash_key.secrets_hash(&body.secrets);
    match previous.secrets_hash.as_deref() {
        Some(stored)
            if ctx.state.hash_key.check(stored, &body.secrets)
                == hash_key::Stored::LegacyMatches =>
        {
            debug!("status.secretsHash in the old format matches; rewriting it as an HMAC");
            previous.secrets_hash = Some(secrets_hash.clone());
        }
        Some(stored) if ctx.state.hash_key.is_of_another_key(stored) => {
            debug!(
                "status.secretsHash was made with another key (rotated): the secrets are sent once"
            );
        }
        _ => {}
    }
    secrets_hash
}

/// The fingerprint of the desired state of `obj` ([`desired::fingerprint`]):
/// the body, the secrets hash, the control plane, the pending redeploy
/// request, and `integrationRef`'s name. (It is resolved to
/// `integration_id` only before a create, so its name stands for it; added
/// only when set, so the fingerprints of other resources stay what they
/// were.)
fn fingerprint(
    obj: &AgentDeployment,
    cp: &ControlPlaneClient,
    body: &DeploymentCreate,
    secrets_hash: &str,
    redeploy: Option<&str>,
) -> String {
    let mut extra = vec![cp.base_url(), cp.workspace_id(), redeploy.unwrap_or("")];
    if let Some(r) = &obj.spec.source_config.integration_ref {
        extra.push(r.name.as_str());
    }
    desired::fingerprint(body, secrets_hash, &extra)
}
