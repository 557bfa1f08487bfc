//! Helpers of the `operator_*` tests: the emulator's admin routes (request
//! counts, store, faults, scenarios), events about an object, manifests,
//! generic polling waits, and [`Harness`], which checks the test's request
//! budget when it is dropped (see [`super::budget`]).

use std::time::{Duration, Instant};

use agent_operator::api::AgentDeployment;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use super::EmulatorProcess;
use super::budget::Budget;

/// An HTTP client for the emulator's admin routes (10 s timeout).
pub use test_support::admin_http;

impl EmulatorProcess {
    fn admin_url(&self, path: &str) -> String {
        format!("{}/_emulator/{path}", self.base_url)
    }

    async fn admin_send(&self, request: reqwest::RequestBuilder, what: &str) -> Value {
        let response = request
            .send()
            .await
            .unwrap_or_else(|e| panic!("emulator admin {what}: {e}"));
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        assert!(
            status.is_success(),
            "emulator admin {what}: {status} {text}"
        );
        if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("emulator admin {what}: {e}: {text}"))
        }
    }

    /// `GET /_emulator/requests`: what the control plane was asked so far.
    pub async fn requests(&self) -> RequestCounts {
        RequestCounts(
            self.admin_send(admin_http().get(self.admin_url("requests")), "requests")
                .await,
        )
    }

    /// `GET /_emulator/store`: every deployment with its revisions.
    pub async fn store(&self) -> Value {
        self.admin_send(admin_http().get(self.admin_url("store")), "store")
            .await
    }

    /// `PUT /_emulator/faults`, e.g. `{"latency_ms": 3000}`; missing fields
    /// take their defaults, so `{}` turns every fault off.
    pub async fn set_faults(&self, faults: Value) {
        self.admin_send(
            admin_http().put(self.admin_url("faults")).json(&faults),
            "faults",
        )
        .await;
    }

    /// `PUT /_emulator/scenarios` with a JSON array of rules, e.g.
    /// `{"field": "repo_ref", "equals": "broken", "outcome": "BUILD_FAILED"}`.
    pub async fn set_scenarios(&self, rules: Value) {
        self.admin_send(
            admin_http().put(self.admin_url("scenarios")).json(&rules),
            "scenarios",
        )
        .await;
    }

    /// Shows deployment `id` with `status` (e.g. `UNUSED`) from now on.
    pub async fn force_deployment_status(&self, id: &str, status: &str) {
        self.admin_send(
            admin_http()
                .post(self.admin_url(&format!("deployments/{id}/status")))
                .json(&json!({ "status": status })),
            "force deployment status",
        )
        .await;
    }

    /// Freezes revision `rid` of deployment `id` at `status`.
    pub async fn force_revision_status(&self, id: &str, rid: &str, status: &str) {
        self.admin_send(
            admin_http()
                .post(self.admin_url(&format!("deployments/{id}/revisions/{rid}/status")))
                .json(&json!({ "status": status })),
            "force revision status",
        )
        .await;
    }
}

/// Route templates as counted by `GET /_emulator/requests`.
pub mod route {
    /// Create a deployment.
    pub const CREATE: &str = "POST /v2/deployments";
    /// List deployments (name lookups, and the AgentControlPlane probe).
    pub const LIST: &str = "GET /v2/deployments";
    /// Read one deployment.
    pub const GET: &str = "GET /v2/deployments/{deployment_id}";
    /// Patch one deployment.
    pub const PATCH: &str = "PATCH /v2/deployments/{deployment_id}";
    /// Delete one deployment.
    pub const DELETE: &str = "DELETE /v2/deployments/{deployment_id}";
    /// Redeploy: a new revision with the current configuration.
    pub const REDEPLOY: &str = "POST /v2/deployments/{deployment_id}/revisions";
    /// Read one revision.
    pub const GET_REVISION: &str = "GET /v2/deployments/{deployment_id}/revisions/{revision_id}";
    /// Read one listener.
    pub const GET_LISTENER: &str = "GET /v2/listeners/{listener_id}";
    /// List the workspace's GitHub integrations.
    pub const INTEGRATIONS: &str = "GET /v1/integrations/github/install";
    /// List the repositories of one GitHub integration.
    pub const INTEGRATION_REPOS: &str = "GET /v1/integrations/github/{integration_id}/repos";
    /// Read the build log of a revision (docs/control-plane-api.md "Logs").
    pub const BUILD_LOGS: &str =
        "POST /v1/projects/{deployment_id}/revisions/{revision_id}/build_logs";
}

/// The answer of `GET /_emulator/requests`.
#[derive(Clone, Debug)]
pub struct RequestCounts(pub Value);

impl RequestCounts {
    /// Requests of `route` (a [`route`] constant), whatever their status.
    pub fn count(&self, route: &str) -> u64 {
        self.0["routes"][route]
            .as_object()
            .map(|by_status| by_status.values().filter_map(Value::as_u64).sum())
            .unwrap_or(0)
    }

    /// Requests that arrived from a workspace while a `Retry-After` the
    /// emulator had sent it (a 429, or a 503 with `Retry-After`) was still
    /// running: a client that honours `Retry-After` keeps this at 0.
    pub fn during_retry_after(&self) -> u64 {
        self.0["during_retry_after"].as_u64().unwrap_or(0)
    }

    /// Requests about deployments other than the list (which the
    /// AgentControlPlane probe also uses): reads, creates, patches, deletes,
    /// revisions.
    pub fn deployment_calls(&self) -> u64 {
        self.0["routes"]
            .as_object()
            .map(|routes| {
                routes
                    .iter()
                    .filter(|(r, _)| r.contains("/v2/deployments") && r.as_str() != route::LIST)
                    .filter_map(|(_, by_status)| by_status.as_object())
                    .flat_map(|by_status| by_status.values().filter_map(Value::as_u64))
                    .sum()
            })
            .unwrap_or(0)
    }
}

/// Polls `check` every 100 ms until it returns `Some`, or panics after
/// `timeout` naming `what`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The condition `type_` of the object, if present.
pub fn condition(obj: &AgentDeployment, type_: &str) -> Option<Condition> {
    agent_operator::api::conditions::find(&obj.status.as_ref()?.conditions, type_).cloned()
}

/// True when `Stalled=True` with `reason` describes the current generation.
pub fn is_stalled_with(obj: &AgentDeployment, reason: &str) -> bool {
    condition(obj, "Stalled").is_some_and(|c| {
        c.status == "True" && c.reason == reason && c.observed_generation == obj.metadata.generation
    })
}

/// Deployment `id` in a dump of the emulator's store (`GET
/// /_emulator/store`, or `EmulatorState::dump`): what it stored, not the
/// shaped answer, for the fields the service does not read back
/// (docs/control-plane-api.md, "Answer shapes"). Panics when it is absent.
pub fn stored_deployment(dump: &Value, id: &str) -> Value {
    dump["workspaces"]
        .as_object()
        .into_iter()
        .flat_map(|ws| ws.values())
        .flat_map(|w| w["deployments"].as_array().cloned().unwrap_or_default())
        .find(|d| d["id"] == id)
        .unwrap_or_else(|| panic!("deployment {id} stored"))
}

/// A `github` AgentDeployment manifest named `name` on the control plane
/// `default`, building `repo_ref`, without secrets. Tests add fields to it.
pub fn github_deployment(name: &str, repo_ref: &str) -> Value {
    json!({
        "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentDeployment",
        "metadata": {"name": name},
        "spec": {
            "source": "github",
            "sourceConfig": {
                "integrationId": "7d8b2f5e-3c1a-4e2b-9f6d-2a1b3c4d5e6f",
                "repoUrl": "https://github.com/acme/support-agent",
                "deploymentType": "dev",
                "buildOnPush": false
            },
            "sourceRevisionConfig": {"repoRef": repo_ref, "langgraphConfigPath": "langgraph.json"}
        }
    })
}

/// The wire create body of [`github_deployment`], for deployments made
/// outside the operator with the control plane client.
pub fn github_create_body(
    name: &str,
    repo_ref: &str,
) -> agent_operator::controlplane::types::DeploymentCreate {
    serde_json::from_value(json!({
        "name": name,
        "source": "github",
        "source_config": {
            "integration_id": "7d8b2f5e-3c1a-4e2b-9f6d-2a1b3c4d5e6f",
            "repo_url": "https://github.com/acme/support-agent",
            "deployment_type": "dev",
            "build_on_push": false
        },
        "source_revision_config": {"repo_ref": repo_ref, "langgraph_config_path": "langgraph.json"},
        "secrets": []
    }))
    .expect("a valid create body")
}

/// JSON-merge-patches the AgentDeployment `name`.
pub async fn merge_patch(api: &Api<AgentDeployment>, name: &str, patch: Value) {
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("patching {name} with {patch}: {e}"));
}

/// Events (events.k8s.io/v1) in `namespace` regarding the AgentDeployment
/// `name`, oldest first.
pub async fn events_about(client: &kube::Client, namespace: &str, name: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    let mut events: Vec<Event> = api
        .list(&Default::default())
        .await
        .expect("listing events")
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().is_some_and(|r| {
                r.name.as_deref() == Some(name) && r.kind.as_deref() == Some("AgentDeployment")
            })
        })
        .collect();
    events.sort_by(|a, b| a.event_time.cmp(&b.event_time));
    events
}

/// The reasons of [`events_about`].
pub async fn event_reasons(client: &kube::Client, namespace: &str, name: &str) -> Vec<String> {
    events_about(client, namespace, name)
        .await
        .into_iter()
        .filter_map(|e| e.reason)
        .collect()
}

/// Waits until an event with `reason` regarding the AgentDeployment `name`
/// exists, and returns it.
pub async fn wait_for_event(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    reason: &str,
    timeout: Duration,
) -> Event {
    eventually(
        timeout,
        &format!("an event {reason} about {name}"),
        || async {
            events_about(client, namespace, name)
                .await
                .into_iter()
                .find(|e| e.reason.as_deref() == Some(reason))
        },
    )
    .await
}

/// Waits until the AgentDeployment `name` no longer exists.
pub async fn wait_until_gone(api: &Api<AgentDeployment>, name: &str, timeout: Duration) {
    eventually(timeout, &format!("{name} to be gone"), || async {
        api.get_opt(name)
            .await
            .expect("reading the AgentDeployment")
            .is_none()
            .then_some(())
    })
    .await
}

/// One test's world: a namespace with the AgentControlPlane `default`, an
/// emulator, its client, and an operator watching the namespace.
///
/// When it is dropped at the end of a test that did not panic, it checks the
/// emulator's request log against [`Harness::budget`] and panics with the
/// violations (see [`super::budget`]), then scans for leaked secret values
/// (see [`super::leaks`]).
pub struct Harness {
    /// Kubernetes client (cluster-admin).
    pub client: kube::Client,
    /// The test's namespace.
    pub ns: String,
    /// AgentDeployments of the namespace.
    pub api: Api<AgentDeployment>,
    /// The emulator.
    pub emulator: EmulatorProcess,
    /// A control plane client of the test workspace (acts "outside").
    pub cp: agent_operator::controlplane::ControlPlaneClient,
    /// The operator, unless the test stopped it.
    pub operator: Option<super::OperatorProcess>,
    /// The request budget checked when the harness is dropped; default
    /// [`Budget::default`] (20 requests per route and resource, 60 per route
    /// without an id, 600 in all, per minute), widened by the loops the
    /// operator's flags ask for ([`Budget::allowing_operator_flags`]). A
    /// test may tighten or loosen it.
    pub budget: Budget,
    /// The cluster-admin kubeconfig, for the secret scan at the end.
    pub kubeconfig: std::path::PathBuf,
}

impl Drop for Harness {
    /// Checks [`Harness::budget`], then scans the namespace's Events and
    /// statuses and the operator and emulator logs for secret values
    /// ([`super::leaks::check_namespace_blocking`]). When the test is
    /// already failing, the budget is not checked and the scan still runs
    /// without panicking ([`super::leaks::scan_namespace_after_panic`]).
    fn drop(&mut self) {
        if std::thread::panicking() {
            super::leaks::scan_namespace_after_panic(&self.kubeconfig, &self.ns);
        } else {
            super::budget::check_budget_blocking(&self.emulator.base_url, &self.budget);
            super::leaks::check_namespace_blocking(&self.kubeconfig, &self.ns);
        }
    }
}

/// Builds a [`Harness`] on the shared envtest API server: a fresh
/// namespace named after the test, the emulator with [`Self::emulator`]
/// flags, and an operator with [`Self::operator`] flags (none with
/// [`Self::without_operator`]). The one setup of the operator tests, e.g.
/// `Harness::builder("op-drift").emulator(&["--step-seconds", "0.2"]).start().await`.
pub struct HarnessBuilder {
    test: String,
    emulator: Vec<String>,
    operator: Option<Vec<String>>,
}

impl HarnessBuilder {
    /// Flags of the emulator, as the binary takes them (default: none).
    pub fn emulator(mut self, args: &[&str]) -> Self {
        self.emulator = args.iter().map(|a| (*a).to_owned()).collect();
        self
    }

    /// Flags of the operator process (default: none).
    pub fn operator(mut self, args: &[&str]) -> Self {
        self.operator = Some(args.iter().map(|a| (*a).to_owned()).collect());
        self
    }

    /// Start no operator (the test starts its own, or none).
    pub fn without_operator(mut self) -> Self {
        self.operator = None;
        self
    }

    /// Creates the namespace, starts the emulator and the operator.
    pub async fn start(self) -> Harness {
        let env = crate::common::shared_env();
        let client = env.client().await;
        let ns = crate::common::test_namespace(&client, &self.test).await;
        let emulator: Vec<&str> = self.emulator.iter().map(String::as_str).collect();
        let operator: Option<Vec<&str>> = self
            .operator
            .as_ref()
            .map(|o| o.iter().map(String::as_str).collect());
        Harness::start(
            client,
            ns,
            env.kubeconfig_path(),
            &self.test,
            &emulator,
            operator.as_deref(),
        )
        .await
    }
}

impl Harness {
    /// A [`HarnessBuilder`] for the test `test` (also the namespace prefix
    /// and the log file names).
    pub fn builder(test: &str) -> HarnessBuilder {
        HarnessBuilder {
            test: test.to_owned(),
            emulator: Vec::new(),
            operator: Some(Vec::new()),
        }
    }

    /// Starts the emulator with `emulator_args`, installs the control plane
    /// in `ns`, and starts an operator with `operator_args` (unless `None`).
    pub async fn start(
        client: kube::Client,
        ns: String,
        kubeconfig: &std::path::Path,
        test: &str,
        emulator_args: &[&str],
        operator_args: Option<&[&str]>,
    ) -> Self {
        let emulator = EmulatorProcess::start_with(test, emulator_args).await;
        let cp = emulator.client();
        super::install_control_plane(&client, &ns, &emulator).await;
        let operator =
            operator_args.map(|args| super::OperatorProcess::start(test, kubeconfig, &ns, args));
        Self {
            api: Api::namespaced(client.clone(), &ns),
            client,
            ns,
            emulator,
            cp,
            operator,
            budget: Budget::default().allowing_operator_flags(operator_args.unwrap_or_default()),
            kubeconfig: kubeconfig.to_owned(),
        }
    }

    /// Waits until `name` is `Ready=True` for its current generation.
    pub async fn wait_ready(&self, name: &str, timeout: Duration) -> AgentDeployment {
        super::wait_for(&self.api, name, timeout, "Ready=True", |o| {
            super::is_ready_now(o).then(|| o.clone())
        })
        .await
    }

    /// Waits until `name` is `Stalled=True` with `reason` for its current
    /// generation.
    pub async fn wait_stalled(
        &self,
        name: &str,
        reason: &str,
        timeout: Duration,
    ) -> AgentDeployment {
        super::wait_for(
            &self.api,
            name,
            timeout,
            &format!("Stalled {reason}"),
            |o| is_stalled_with(o, reason).then(|| o.clone()),
        )
        .await
    }

    /// Server-side applies a manifest (field manager `tests`).
    pub async fn apply(&self, manifest: Value) -> AgentDeployment {
        let name = manifest["metadata"]["name"]
            .as_str()
            .expect("metadata.name")
            .to_owned();
        super::apply_json(&self.api, &name, manifest).await
    }

    /// Every remote deployment of the workspace.
    pub async fn remote_deployments(&self) -> Vec<agent_operator::controlplane::types::Deployment> {
        self.cp
            .list_all_deployments(&Default::default())
            .await
            .expect("listing remote deployments")
    }

    /// Requests the emulator logged about remote deployment `id` (any
    /// route with `{deployment_id}` = `id`: reads, patches, revisions), the
    /// test's own included.
    pub async fn requests_about(&self, id: &str) -> usize {
        self.emulator
            .request_log()
            .await
            .entries
            .iter()
            .filter(|r| r.deployment_id.as_deref() == Some(id))
            .count()
    }

    /// The AgentDeployment passes the harness's operator has finished so far
    /// (`agent_operator_reconciles_total{kind="AgentDeployment"}`, any
    /// outcome). Panics without an operator.
    pub async fn deployment_passes(&self) -> f64 {
        let operator = self.operator.as_ref().expect("the harness's operator");
        super::metric(
            &operator.metrics().await,
            "agent_operator_reconciles_total",
            &[("kind", "AgentDeployment")],
        )
        .unwrap_or(0.0)
    }

    /// The revisions of remote deployment `id`, newest first.
    pub async fn revisions(&self, id: &str) -> Vec<agent_operator::controlplane::types::Revision> {
        self.cp
            .list_all_revisions(id, &Default::default())
            .await
            .expect("listing revisions")
    }
}
