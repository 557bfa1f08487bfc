//! The scaffold proved with a fourth kind that exists only in this test:
//! `AgentEcho` (group `scaffold.agentserver.dev`) asks its
//! AgentControlPlane's control plane one question (a list of one
//! deployment) and reports the answer. Everything else, the finalizer, the
//! one write order, the reason table, the backoff and the memory of a
//! deleted object, is the operator's generic pass (`controller::kind`) and
//! its wiring (`controller::scaffold::run_in_scope`). Against the real
//! kube-apiserver: it becomes Ready, then is deleted through its finalizer.
//!
//! The kind is the part between `// The kind` and `// The test` (its CRD
//! types, its `impl Kind`, its reason-table row and its `run`).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_operator::controller::kind::{self, Flow, Kind, Report};
use agent_operator::controller::report::{ReasonTable, error_outcome};
use agent_operator::controller::scaffold::{Scope, Wiring, own_kind_stream, run_in_scope};
use agent_operator::controller::{Context, Error, OperatorConfig, scoped_api};
use agent_operator::controlplane::{ControlPlaneClient, ListDeployments};
use agent_operator::plan::status::Outcome;
use control_plane_emulator::{self as emulator, DEMO_API_KEY, DEMO_WORKSPACE_ID, EmulatorConfig};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::{Api, CustomResource, CustomResourceExt, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::common;
use crate::support::apply_json;

// The kind.

/// Asks the control plane of `controlPlaneRef` one question.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "scaffold.agentserver.dev",
    version = "v1alpha1",
    kind = "AgentEcho",
    namespaced,
    status = "AgentEchoStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct AgentEchoSpec {
    /// The AgentControlPlane of the namespace to ask.
    pub control_plane_ref: String,
}

/// What the last pass saw.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentEchoStatus {
    /// The generation the conditions are about.
    pub observed_generation: Option<i64>,
    /// `Ready`, `Reconciling`, `Stalled`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

impl Kind for AgentEcho {
    type State = ();
    agent_operator::kind_status!(AgentEchoStatus);
    const FINALIZER: Option<&'static str> = Some("scaffold.agentserver.dev/cleanup");
    /// Its row of the reason table: the AgentControlPlane's.
    const REASONS: ReasonTable = ReasonTable::CONTROL_PLANE;
    type Observed = ControlPlaneClient;
    type Decision = ();

    fn observe(
        _api: &Api<Self>,
        obj: &Self,
        ctx: &Context,
    ) -> impl Future<Output = Flow<ControlPlaneClient, Self>> + Send {
        observe(obj, ctx)
    }

    fn decide(_obj: &Self, _cp: &ControlPlaneClient) {}

    fn act(
        _api: &Api<Self>,
        obj: &Self,
        _ctx: &Context,
        cp: ControlPlaneClient,
        _decision: (),
    ) -> impl Future<Output = Box<Report<Self>>> + Send {
        ask(obj, cp)
    }
}

/// The client of the plane; a plane not usable yet ends the pass.
async fn observe(obj: &AgentEcho, ctx: &Context) -> Flow<ControlPlaneClient, AgentEcho> {
    let ns = obj.namespace().unwrap_or_default();
    match ctx.plane_client(&ns, &obj.spec.control_plane_ref).await? {
        Ok(cp) => Ok(cp),
        Err(b) => {
            let outcome = Outcome::Progressing {
                reason: b.reason,
                message: b.message,
            };
            Err(report(
                obj,
                &outcome,
                Ok(Action::requeue(Duration::from_secs(1))),
            ))
        }
    }
}

/// The one question, and its report.
async fn ask(obj: &AgentEcho, cp: ControlPlaneClient) -> Box<Report<AgentEcho>> {
    let one = ListDeployments {
        limit: Some(1),
        ..Default::default()
    };
    let outcome = match cp.list_deployments(&one).await {
        Ok(_) => Outcome::Ready {
            reason: "Answered",
            message: "the control plane answered".into(),
        },
        Err(e) => error_outcome(&AgentEcho::REASONS, "list deployments", &e),
    };
    report(obj, &outcome, Ok(Action::await_change()))
}

fn report(
    obj: &AgentEcho,
    outcome: &Outcome,
    then: Result<Action, Error>,
) -> Box<Report<AgentEcho>> {
    Report::outcome_with(obj, outcome, then, |observed_generation, conditions| {
        AgentEchoStatus {
            observed_generation,
            conditions,
        }
    })
}

/// Runs the AgentEcho controllers of `scope` on the scaffold.
async fn run(ctx: Arc<Context>, scope: Scope) {
    let client = ctx.client.clone();
    let build = |namespace: Option<&str>| {
        let (store, own) = own_kind_stream(
            "AgentEcho",
            scoped_api(&client, namespace),
            &ctx.config.shard,
        );
        Controller::for_stream(own, store)
    };
    let shutdown = futures::future::pending();
    run_in_scope(
        ctx.clone(),
        scope,
        "AgentEcho",
        2,
        shutdown,
        |namespace| Wiring::new("AgentEcho", build(namespace), kind::reconcile::<AgentEcho>),
        || {},
    )
    .await;
}

// The test.

/// Polls until `check` holds of `name` (or of its absence), for 60 s.
async fn wait_for(api: &Api<AgentEcho>, name: &str, check: impl Fn(Option<&AgentEcho>) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let obj = api.get_opt(name).await.expect("reading");
        if check(obj.as_ref()) {
            return;
        }
        assert!(Instant::now() < deadline, "timed out; last: {obj:#?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn ready(obj: Option<&AgentEcho>) -> bool {
    let conditions = obj
        .and_then(|o| o.status.as_ref())
        .map(|s| s.conditions.as_slice());
    conditions
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True" && c.reason == "Answered")
}

/// Installs the CRD of the test kind (once per API server) and waits until
/// it is served.
async fn install_crd(client: &kube::Client, ns: &str) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = AgentEcho::crd();
    crds.patch(
        &crd.name_any(),
        &PatchParams::apply("tests").force(),
        &Patch::Apply(&crd),
    )
    .await
    .expect("installing the CRD");
    let echoes: Api<AgentEcho> = Api::namespaced(client.clone(), ns);
    let deadline = Instant::now() + Duration::from_secs(30);
    while echoes.list(&Default::default()).await.is_err() {
        assert!(Instant::now() < deadline, "the CRD is not served");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_fourth_kind_on_the_scaffold_becomes_ready_and_is_deleted_through_its_finalizer() {
    let client = common::client().await;
    let ns = common::test_namespace(&client, "scaffold").await;
    install_crd(&client, &ns).await;
    let emulator = emulator::spawn(EmulatorConfig::default())
        .await
        .expect("emulator");
    let config = OperatorConfig {
        allowed_hosts: agent_operator::allowlist::HostAllowlist::parse(["127.0.0.1"]).unwrap(),
        ..Default::default()
    };
    let shared = Arc::new(agent_operator::controller::Shared::new(
        client.clone(),
        config,
    ));
    let ctx = Arc::new(Context::of(shared));
    let scope = Scope::Namespace(ns.clone());
    let planes = tokio::spawn(agent_operator::controller::control_plane::run(
        ctx.clone(),
        scope.clone(),
        futures::future::pending(),
    ));
    let echoes_controller = tokio::spawn(run(ctx.clone(), scope));
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), &ns);
    apply_json(
        &secrets,
        "key",
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "key"},
            "stringData": {"api-key": DEMO_API_KEY}}),
    )
    .await;
    apply_json(
        &Api::<agent_operator::api::AgentControlPlane>::namespaced(client.clone(), &ns),
        "default",
        json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentControlPlane",
            "metadata": {"name": "default"},
            "spec": {"url": emulator.base_url(), "workspaceId": DEMO_WORKSPACE_ID,
                "apiKeySecretRef": {"name": "key", "key": "api-key"}}}),
    )
    .await;
    let echoes: Api<AgentEcho> = Api::namespaced(client.clone(), &ns);
    apply_json(
        &echoes,
        "echo",
        json!({"apiVersion": "scaffold.agentserver.dev/v1alpha1", "kind": "AgentEcho",
            "metadata": {"name": "echo"}, "spec": {"controlPlaneRef": "default"}}),
    )
    .await;
    wait_for(&echoes, "echo", ready).await;
    let finalizers = echoes
        .get("echo")
        .await
        .expect("reading")
        .finalizers()
        .to_vec();
    assert_eq!(finalizers, ["scaffold.agentserver.dev/cleanup"]);

    echoes
        .delete("echo", &DeleteParams::default())
        .await
        .expect("deleting");
    wait_for(&echoes, "echo", |o| o.is_none()).await;

    // Request budget: the plane's probe and the echo's one question, each
    // once or twice (a watch restart may repeat a pass), nothing for the
    // deletion.
    let counts = emulator.state().request_counts();
    let lists = counts["routes"]["GET /v2/deployments"]["200"].as_u64();
    assert!(
        counts["total"].as_u64().unwrap_or(u64::MAX) <= 4,
        "{counts:#}"
    );
    assert!(matches!(lists, Some(2..=4)), "{counts:#}");
    echoes_controller.abort();
    planes.abort();
}
