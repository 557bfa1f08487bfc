//! The AgentCron controller, on the generic pass ([`super::kind`]):
//! observe reads the referenced AgentDeployment (Ready with a URL, else the
//! pass waits without a request), the AgentAssistant of `assistantRef`
//! (with an `assistantId`, else it waits), and `POST /runs/crons/search`
//! by the object's UID tag; decide is [`crate::plan::cron::decide`]; act
//! makes at most one request ([`act`]). Deletion: `DELETE
//! /runs/crons/{id}` under `deletionPolicy: Delete`. Under
//! `managementPolicy: Observe` only reads are sent (the search, the newest
//! run): the drift is reported (`status.drift`, `Drifted`), and deletion
//! sends nothing.
//!
//! The search by the UID tag on every pass is what makes a create
//! crash-safe (the server has no idempotency key): a cron whose create
//! answer was lost is found and adopted by the next pass instead of being
//! created again. Every agent server request draws from the budget of its
//! agent server, which the deployment's `spec.verify` and AgentAssistants
//! draw from too ([`crate::agentserver::limits::Limits`]).
//!
//! Source: docs/control-plane-api.md "Crons", "Agent server" (the key, the
//! cron facts, `end_time` on the pinned server).

mod act;

use act::{Observed, WAIT_FOR_INPUTS};

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};

use super::child::{self, Child, ChildStatus};
use super::kind::{Flow, Kind, Report};
use super::report::ReasonTable;
use super::scaffold::{Scope, Wiring, own_kind_stream, run_in_scope};
use super::server_changes::dependents;
use crate::api::assistant::AgentAssistant;
use crate::api::conditions::{READY, TRUE, find, reason};
use crate::api::cron::{AgentCron, AgentCronStatus, CronDeletionPolicy};
use crate::api::deployment::ManagementPolicy;
use crate::controller::context::Context;
use crate::controller::error::Error;
use crate::controller::scaffold::scoped_api;
use crate::plan::cron::{Known, Step, decide};
use crate::plan::status::Outcome;

/// The finalizer of an AgentCron: kept while the cron may exist on an
/// agent server.
pub const FINALIZER: &str = "agentserver.dev/cron-cleanup";

impl Kind for AgentCron {
    type State = ();
    crate::kind_status!(AgentCronStatus);
    const FINALIZER: Option<&'static str> = Some(FINALIZER);
    const REASONS: ReasonTable = ReasonTable::CRON;
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
        let status = obj.status.clone().unwrap_or_default();
        // What status remembers is of the agent server that held the cron:
        // a deployment re-created under a new id is a new, empty server.
        let same_server = status.deployment_id.as_deref() == Some(seen.deployment_id.as_str());
        decide(&Known {
            spec: &obj.spec,
            uid: obj.metadata.uid.as_deref().unwrap_or_default(),
            generation: obj.metadata.generation,
            now: seen.now,
            paused: seen.paused,
            assistant: &seen.assistant,
            found: &seen.found,
            known_id: status.cron_id.as_deref().filter(|_| same_server),
            applied_hash: status.applied_hash.as_deref().filter(|_| same_server),
            rejected: obj.status().and_then(ChildStatus::rejected_request),
            policy: obj.policy(),
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

impl Child for AgentCron {
    const NOUN: &'static str = "cron";
    const WAIT: Duration = WAIT_FOR_INPUTS;
    const REJECTED: &'static str = reason::CRON_REJECTED;
    const FOUND_BY_TAG: bool = true;

    fn deployment_name(&self) -> &str {
        &self.spec.deployment_ref.name
    }

    fn policy(&self) -> ManagementPolicy {
        self.spec.management_policy
    }

    fn orphans(&self) -> bool {
        self.spec.deletion_policy == CronDeletionPolicy::Orphan
    }
}

/// `spec.webhook`, when set, names a host of the operator's
/// `--allowed-hosts` (the agent server would send each run's output there);
/// else the pass is `Stalled`, `HostNotAllowed`, before any request.
fn webhook_allowed(obj: &AgentCron, ctx: &Context) -> Flow<(), AgentCron> {
    let Some(hook) = &obj.spec.webhook else {
        return Ok(());
    };
    ctx.config
        .allowed_hosts
        .check(hook, "spec.webhook")
        .map_err(|refused| {
            let outcome = Outcome::Stalled {
                reason: reason::HOST_NOT_ALLOWED,
                message: refused.0,
            };
            child::until_resync(obj, ctx, None, outcome)
        })
}

/// The id the cron runs: the AgentAssistant's `assistantId` once it is
/// Ready on the agent server of `deployment_id` (a re-created or moved
/// deployment is a new server, where the assistant is created again first),
/// or the graph id; `Err`: the pass waits for the assistant.
async fn assistant(obj: &AgentCron, ctx: &Context, deployment_id: &str) -> Flow<String, AgentCron> {
    let Some(r) = &obj.spec.assistant_ref else {
        return Ok(obj.spec.graph_id.clone().unwrap_or_default());
    };
    let ns = obj
        .namespace()
        .ok_or(Error::MissingObjectKey("namespace"))?;
    let api: Api<AgentAssistant> = Api::namespaced(ctx.client.clone(), &ns);
    let found = api.get_opt(&r.name).await.map_err(Error::Kube)?;
    let status = found.as_ref().and_then(|a| a.status.as_ref());
    let on_this_server = status.is_some_and(|s| {
        s.deployment_id.as_deref() == Some(deployment_id)
            && find(&s.conditions, READY).is_some_and(|c| c.status == TRUE)
    });
    match status
        .and_then(|s| s.assistant_id.clone())
        .filter(|_| on_this_server)
    {
        Some(id) => Ok(id),
        None => Err(child::waiting(
            obj,
            reason::WAITING_FOR_ASSISTANT,
            format!(
                "waiting for AgentAssistant {} to be Ready on the agent server of \
                 deployment {deployment_id}",
                r.name
            ),
        )),
    }
}

/// The pass's inputs; a deployment or assistant that is not ready, or a
/// budget that is spent, ends the pass without an agent server request.
async fn observe(obj: &AgentCron, ctx: &Context) -> Flow<Observed, AgentCron> {
    webhook_allowed(obj, ctx)?;
    let server = child::reachable(obj, ctx).await?;
    let assistant = assistant(obj, ctx, &server.deployment_id).await?;
    let permit = child::admit(obj, ctx, &server.deployment_id)?;
    let uid = obj.metadata.uid.as_deref().unwrap_or_default();
    match server
        .client
        .search_crons(&crate::plan::cron::search(uid))
        .await
    {
        Ok(found) => Ok(Observed {
            client: server.client,
            deployment_id: server.deployment_id,
            assistant,
            found,
            now: Timestamp::now(),
            paused: server.paused,
            _permit: permit,
        }),
        Err(e) => Err(act::failed(
            obj,
            Some(&server.deployment_id),
            "POST /runs/crons/search",
            &e,
            ctx,
        )),
    }
}

/// Runs the AgentCron controllers of `scope` until `shutdown`: a pass on
/// a new generation, on a change of the referenced AgentDeployment's Ready
/// condition, URL or remote id, on a change of an AgentAssistant's
/// `assistantId`, and on the jittered resync period (or at `endTime`).
pub async fn run(
    ctx: Arc<Context>,
    scope: Scope,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    run_in_scope(
        ctx.clone(),
        scope,
        "AgentCron",
        4,
        shutdown,
        |namespace| {
            let controller = controller(&ctx, namespace);
            Wiring::new("AgentCron", controller, super::kind::reconcile::<AgentCron>)
        },
        || {},
    )
    .await;
}

/// The controller of one namespace (`None`: all): its own objects, the
/// AgentAssistants its crons name, and the changes of agent servers.
fn controller(ctx: &Context, namespace: Option<&str>) -> Controller<AgentCron> {
    let client = &ctx.client;
    let shard = &ctx.config.shard;
    let (store, own) = own_kind_stream(
        "AgentCron",
        scoped_api::<AgentCron>(client, namespace),
        shard,
    );
    let assistants = watcher(
        scoped_api::<AgentAssistant>(client, namespace),
        shard.watch(watcher::Config::default().any_semantic()),
    )
    .default_backoff()
    .applied_objects()
    .predicate_filter(
        assistant_identity as fn(&AgentAssistant) -> Option<u64>,
        Default::default(),
    );
    let by_deployment = store.clone();
    let by_assistant = store.clone();
    let changed = ctx.server_changes.subscribe().flat_map(move |dep| {
        futures::stream::iter(dependents(&by_deployment, &dep, |c: &AgentCron| {
            c.spec.deployment_ref.name.as_str()
        }))
    });
    Controller::for_stream(own, store)
        .reconcile_on(changed)
        .watches_stream(assistants, move |a| {
            let ns = a.namespace();
            let name = a.name_any();
            by_assistant
                .state()
                .into_iter()
                .filter(|c| {
                    c.namespace() == ns
                        && c.spec
                            .assistant_ref
                            .as_ref()
                            .is_some_and(|r| r.name == name)
                })
                .map(|c| ObjectRef::from_obj(c.as_ref()))
                .collect::<Vec<_>>()
        })
}

/// What of an AgentAssistant its crons depend on (its `assistantId`, its
/// Ready condition, the deployment id it is Ready on), hashed: other status
/// writes wake no cron.
fn assistant_identity(a: &AgentAssistant) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let status = a.status.as_ref();
    status.and_then(|s| s.assistant_id.clone()).hash(&mut h);
    status.and_then(|s| s.deployment_id.clone()).hash(&mut h);
    status
        .and_then(|s| find(&s.conditions, READY))
        .map(|c| c.status.clone())
        .hash(&mut h);
    Some(h.finish())
}
