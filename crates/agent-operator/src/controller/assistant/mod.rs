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

use act::Observed;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::controller::{Action, Controller};
use kube::{Api, ResourceExt};

use super::child::{self, Child, ChildStatus};
use super::kind::{Flow, Kind, Report};
use super::report::ReasonTable;
use super::scaffold::{Scope, Wiring, own_kind_stream, run_in_scope};
use super::server_changes::dependents;
use crate::api::assistant::{AgentAssistant, AgentAssistantStatus, AssistantDeletionPolicy};
use crate::api::conditions::reason;
use crate::api::deployment::{ManagementPolicy, PAUSED_ANNOTATION};
use crate::controller::context::Context;
use crate::controller::scaffold::scoped_api;
use crate::plan::assistant::{Known, Step, assistant_id, decide};
use crate::plan::status::Outcome;

/// The finalizer of an AgentAssistant: kept while the assistant may exist
/// on an agent server.
pub const FINALIZER: &str = "agentserver.dev/assistant-cleanup";

/// How long a pass waits for a deployment that is missing or not Ready yet
/// before looking again (a change of the deployment wakes it sooner).
pub const WAIT_FOR_DEPLOYMENT: Duration = Duration::from_secs(30);

impl Kind for AgentAssistant {
    type State = ();
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

impl Child for AgentAssistant {
    const NOUN: &'static str = "assistant";
    const WAIT: Duration = WAIT_FOR_DEPLOYMENT;
    const REJECTED: &'static str = reason::ASSISTANT_REJECTED;
    // The assistant's id comes from the spec and the UID: with no agent
    // server recorded, no request ever reached one.
    const FOUND_BY_TAG: bool = false;

    fn deployment_name(&self) -> &str {
        &self.spec.deployment_ref.name
    }

    fn policy(&self) -> ManagementPolicy {
        self.spec.management_policy
    }

    fn orphans(&self) -> bool {
        self.spec.deletion_policy == AssistantDeletionPolicy::Orphan
    }
}

/// The pass's inputs; a deployment that is not there, not Ready, paused,
/// or a budget that is spent ends the pass without an agent server
/// request.
async fn observe(obj: &AgentAssistant, ctx: &Context) -> Flow<Observed, AgentAssistant> {
    let server = child::reachable(obj, ctx).await?;
    if server.paused {
        // An assistant has nothing to pause: it waits, with no request,
        // until its deployment is unpaused (which wakes it).
        let outcome = Outcome::Progressing {
            reason: reason::DEPLOYMENT_PAUSED,
            message: format!(
                "AgentDeployment {} is paused (annotation {PAUSED_ANNOTATION}); \
                 the assistant waits for it, no request is made",
                obj.spec.deployment_ref.name
            ),
        };
        return Err(child::report(
            obj,
            None,
            &outcome,
            Ok(Action::await_change()),
        ));
    }
    let permit = child::admit(obj, ctx, &server.deployment_id)?;
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
        |namespace| {
            Wiring::new(
                "AgentAssistant",
                build(namespace),
                super::kind::reconcile::<AgentAssistant>,
            )
        },
        || {},
    )
    .await;
}
