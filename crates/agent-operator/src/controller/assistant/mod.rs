//! The AgentAssistant controller, on the generic pass ([`super::kind`]):
//! observe reads the referenced AgentDeployment (Ready with a URL, else
//! the pass waits without a request), the key its `spec.verify` would send,
//! and `GET /assistants/{id}`; decide is [`crate::plan::assistant::decide`];
//! act makes at most one request ([`act`]). Deletion: `DELETE
//! /assistants/{id}` under `deletionPolicy: Delete`. Under
//! `managementPolicy: Observe` only the `GET` is sent: the drift is
//! reported (`status.drift`, `Drifted`), and deletion sends nothing.
//!
//! Every agent server request draws from the budget of its agent server
//! (one token bucket per deployment, which its `spec.verify` and AgentCrons
//! draw from too; `--verify-*` flags), apart from the control plane
//! budgets. Steady objects are checked for drift on
//! the jittered resync period.
//!
//! Source: docs/control-plane-api.md "Assistants", "Agent server" (the key).

mod act;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::controller::{Action, Controller};
use kube::{Api, ResourceExt};
use secrecy::SecretString;

use super::kind::{Flow, Kind, Report};
use super::report::ReasonTable;
use super::scaffold::{Scope, own_kind_stream, run_in_scope};
use super::server_changes::dependents;
use super::{Context, Error, scoped_api};
use crate::agentserver::{AgentServerClient, Assistant};
use crate::api::assistant::{AgentAssistant, AgentAssistantStatus};
use crate::api::conditions::{READY, TRUE, find, reason};
use crate::api::deployment::{AgentDeployment, PAUSED_ANNOTATION};
use crate::plan::assistant::{Known, Step, assistant_id, decide};
use crate::plan::status::Outcome;

/// The finalizer of an AgentAssistant: kept while the assistant may exist
/// on an agent server.
pub const FINALIZER: &str = "agentserver.dev/assistant-cleanup";

/// How long a pass waits for a deployment that is missing or not Ready yet
/// before looking again (a change of the deployment wakes it sooner).
pub const WAIT_FOR_DEPLOYMENT: Duration = Duration::from_secs(30);

/// Agent server calls one pass may make (a GET and one mutation).
pub(crate) const CALLS_PER_PASS: u32 = 2;

/// What a pass observed before it decides.
pub struct Observed {
    /// The agent server client of the deployment.
    client: AgentServerClient,
    /// The remote id of the deployment.
    deployment_id: String,
    /// The assistant id.
    id: String,
    /// `GET /assistants/{id}`; `None`: 404.
    current: Option<Assistant>,
    /// The budget's permit, held until the pass ends.
    _permit: super::deployment::verify::Permit,
}

impl Kind for AgentAssistant {
    crate::kind_status!(AgentAssistantStatus);
    const FINALIZER: Option<&'static str> = Some(FINALIZER);
    const REASONS: ReasonTable = ReasonTable::ASSISTANT;
    type Observed = Observed;
    type Decision = Step;

    fn observe(
        _api: &Api<Self>,
        obj: &Self,
        ctx: &Context,
    ) -> impl Future<Output = Flow<Observed, Self>> + Send {
        observe(obj, ctx)
    }

    fn decide(obj: &Self, seen: &Observed) -> Step {
        decide(&Known {
            spec: &obj.spec,
            object_name: &obj.name_any(),
            generation: obj.metadata.generation,
            id: &seen.id,
            current: seen.current.as_ref(),
            rejected: obj
                .status
                .as_ref()
                .and_then(|s| s.rejected_request.as_ref()),
            policy: obj.spec.management_policy,
        })
    }

    fn act(
        _api: &Api<Self>,
        obj: &Self,
        ctx: &Context,
        seen: Observed,
        decision: Step,
    ) -> impl Future<Output = Box<Report<Self>>> + Send {
        act::act(obj, ctx, seen, decision)
    }

    fn cleanup(
        _api: &Api<Self>,
        obj: &Self,
        ctx: &Context,
    ) -> impl Future<Output = Box<Report<Self>>> + Send {
        act::cleanup(obj, ctx)
    }
}

/// The deployment's agent server, reachable now: its client and remote id.
pub(crate) struct Server {
    /// The client, with the key the deployment's `spec.verify` sends.
    pub(crate) client: AgentServerClient,
    /// The deployment's remote id.
    pub(crate) deployment_id: String,
    /// The deployment is paused (its annotation `agentserver.dev/paused` is
    /// `"true"`): its crons are disabled, its assistants wait.
    pub(crate) paused: bool,
}

/// Why there is no agent server to talk to.
pub(crate) enum NoServer {
    /// The AgentDeployment does not exist (or is being deleted).
    Missing(String),
    /// It exists but is not Ready with a URL and an id yet.
    NotReady(String),
    /// Its URL or key is not usable: the outcome to report.
    Blocked(Outcome),
}

/// The agent server of the AgentDeployment `obj` names, as its
/// `spec.verify` reaches it: the URL in its status (checked against
/// `--allowed-hosts`), and the key it would send (the AgentControlPlane's
/// API key where the control plane chose the URL, else
/// `spec.verify.apiKeySecretRef`, else none). Errors: Kubernetes API
/// failures.
pub(crate) async fn server(
    obj: &AgentAssistant,
    ctx: &Context,
) -> Result<Result<Server, NoServer>, Error> {
    let ns = obj
        .namespace()
        .ok_or(Error::MissingObjectKey("namespace"))?;
    server_of(ctx, &ns, &obj.spec.deployment_ref.name).await
}

/// The agent server of the AgentDeployment `ns/name` (see [`server`]); the
/// AgentCron's passes use it too. Errors: Kubernetes API failures.
pub(crate) async fn server_of(
    ctx: &Context,
    ns: &str,
    name: &str,
) -> Result<Result<Server, NoServer>, Error> {
    let deployments: Api<AgentDeployment> = Api::namespaced(ctx.client.clone(), ns);
    let dep = match deployments.get_opt(name).await.map_err(Error::Kube)? {
        Some(d) if d.metadata.deletion_timestamp.is_none() => d,
        _ => {
            return Ok(Err(NoServer::Missing(format!(
                "AgentDeployment {ns}/{name} does not exist"
            ))));
        }
    };
    let status = dep.status.clone().unwrap_or_default();
    // A paused deployment reports `Ready=False` (`Paused`) and keeps its URL
    // and id: its agent server still serves and is still reached.
    let paused = dep.paused() == Ok(true);
    let ready = paused || find(&status.conditions, READY).is_some_and(|c| c.status == TRUE);
    let (true, Some(url), Some(deployment_id)) = (ready, status.url, status.deployment_id) else {
        return Ok(Err(NoServer::NotReady(format!(
            "waiting for AgentDeployment {name} to be Ready with an agent server URL"
        ))));
    };
    let stalled =
        |reason, message| Ok(Err(NoServer::Blocked(Outcome::Stalled { reason, message })));
    let field = format!("the agent server URL of AgentDeployment {name}");
    if let Err(refused) = ctx.config.allowed_hosts.check(&url, &field) {
        return stalled(reason::HOST_NOT_ALLOWED, refused.0);
    }
    let key = match key(ctx, ns, &dep).await? {
        Ok(k) => k,
        Err(b) => return stalled(b.reason, b.message),
    };
    let timeout = ctx
        .config
        .request_timeout
        .min(super::deployment::verify::CALL_TIMEOUT_CAP);
    match super::deployment::verify::agent_server_client(url, key, timeout) {
        Ok(client) => Ok(Ok(Server {
            client,
            deployment_id,
            paused,
        })),
        Err(e) => stalled(
            reason::AGENT_SERVER_UNREACHABLE,
            format!("agent server client: {e}"),
        ),
    }
}

/// The key the deployment's `spec.verify` sends (see [`server`]).
async fn key(
    ctx: &Context,
    ns: &str,
    dep: &AgentDeployment,
) -> Result<Result<Option<SecretString>, super::resolve::Blocked>, Error> {
    let secret_ref = dep
        .spec
        .verify
        .as_ref()
        .and_then(|v| v.api_key_secret_ref.as_ref());
    if let Some(r) = secret_ref {
        return Ok(super::resolve::secret_value(ctx, ns, &r.name, &r.key)
            .await?
            .map(|v| Some(SecretString::from(v.trim().to_owned()))));
    }
    if !crate::plan::verdict::control_plane_key_allowed(&dep.spec) {
        return Ok(Ok(None));
    }
    Ok(
        match ctx
            .plane_client(ns, &dep.spec.control_plane_ref.name)
            .await?
        {
            Ok(cp) if !cp.uses_bearer() => Ok(Some(cp.api_key().clone())),
            Ok(_) => Ok(None),
            Err(b) => Err(b),
        },
    )
}

/// The pass's inputs; a deployment that is not there, not Ready, or a
/// budget that is spent ends the pass without an agent server request.
async fn observe(obj: &AgentAssistant, ctx: &Context) -> Flow<Observed, AgentAssistant> {
    let server = match server(obj, ctx).await? {
        Ok(s) => s,
        Err(NoServer::Missing(message)) => {
            return Err(act::report(
                obj,
                None,
                &Outcome::Progressing {
                    reason: reason::DEPLOYMENT_NOT_FOUND,
                    message,
                },
                Ok(Action::requeue(WAIT_FOR_DEPLOYMENT)),
            ));
        }
        Err(NoServer::NotReady(message)) => {
            return Err(act::report(
                obj,
                None,
                &Outcome::Progressing {
                    reason: reason::WAITING_FOR_DEPLOYMENT,
                    message,
                },
                Ok(Action::requeue(WAIT_FOR_DEPLOYMENT)),
            ));
        }
        Err(NoServer::Blocked(outcome)) => {
            return Err(act::report(
                obj,
                None,
                &outcome,
                Ok(Action::requeue(super::jittered(ctx.config.resync_interval))),
            ));
        }
    };
    if server.paused {
        // An assistant has nothing to pause: it waits, with no request,
        // until its deployment is unpaused (which wakes it).
        return Err(act::report(
            obj,
            None,
            &Outcome::Progressing {
                reason: reason::DEPLOYMENT_PAUSED,
                message: format!(
                    "AgentDeployment {} is paused (annotation {PAUSED_ANNOTATION}); \
                     the assistant waits for it, no request is made",
                    obj.spec.deployment_ref.name
                ),
            },
            Ok(Action::await_change()),
        ));
    }
    let permit = match ctx.verifier.admit(
        &super::object_key(obj),
        &server.deployment_id,
        CALLS_PER_PASS,
    ) {
        Ok(p) => p,
        Err(super::deployment::verify::Deferred(wait)) => {
            return Err(Report::end(Action::requeue(wait)));
        }
    };
    let id = assistant_id(&obj.spec, obj.uid().as_deref().unwrap_or_default());
    match server.client.get_assistant(&id).await {
        Ok(current) => Ok(Observed {
            client: server.client,
            deployment_id: server.deployment_id,
            id,
            current,
            _permit: permit,
        }),
        Err(e) => Err(act::failed(
            obj,
            Some(&server.deployment_id),
            "GET /assistants/{id}",
            &e,
            ctx,
        )),
    }
}

/// Runs the AgentAssistant controllers of `scope` until `shutdown`: a pass
/// on a new generation, on a change of the referenced AgentDeployment's
/// Ready condition, URL or remote id, and on the jittered resync period.
pub async fn run(
    ctx: Arc<Context>,
    scope: Scope,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let client = ctx.client.clone();
    let build = |namespace: Option<&str>| {
        let (store, own) = own_kind_stream(
            "AgentAssistant",
            scoped_api::<AgentAssistant>(&client, namespace),
            &ctx.config.shard,
        );
        let assistants = store.clone();
        let changed = ctx.server_changes.subscribe().flat_map(move |dep| {
            futures::stream::iter(dependents(&assistants, &dep, |a: &AgentAssistant| {
                a.spec.deployment_ref.name.as_str()
            }))
        });
        Controller::for_stream(own, store).reconcile_on(changed)
    };
    run_in_scope(
        ctx.clone(),
        scope,
        "AgentAssistant",
        4,
        shutdown,
        build,
        super::kind::reconcile::<AgentAssistant>,
    )
    .await;
}
