//! What the operator tests observe and wait for: the emulator's admin
//! routes (request counts, store, faults, scenarios), events about an
//! object, conditions, manifests, and generic polling waits. The test's
//! world itself is [`super::Harness`] (`harness.rs`).

use std::time::{Duration, Instant};

use agent_operator::api::AgentDeployment;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use super::EmulatorProcess;
pub use test_support::manifests::AgentDeploymentManifest;

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

    /// `POST /_emulator/api-keys/revoke`: `key` is answered 401 from now on
    /// (a key deleted in the LangSmith settings).
    pub async fn revoke_api_key(&self, key: &str) {
        self.admin_send(
            admin_http()
                .post(self.admin_url("api-keys/revoke"))
                .json(&serde_json::json!({"key": key})),
            "api-keys/revoke",
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

    /// Makes deployment `id` a preview (`is_preview: true`), as the
    /// platform's pull-request previews are.
    pub async fn mark_preview(&self, id: &str) {
        self.admin_send(
            admin_http()
                .post(self.admin_url(&format!("deployments/{id}/preview")))
                .json(&json!({ "is_preview": true })),
            "mark preview",
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
    /// Rollback: a new revision with an earlier revision's configuration.
    pub const REDEPLOY_REVISION: &str =
        "POST /v2/deployments/{deployment_id}/revisions/{revision_id}/redeploy";
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
    control_plane_emulator::state::deployment_in_dump(dump, id)
        .unwrap_or_else(|| panic!("deployment {id} stored"))
}

/// A `github` AgentDeployment manifest named `name` on the control plane
/// `default`, building `repo_ref`, without secrets
/// ([`AgentDeploymentManifest::github`]). Tests add fields to it.
pub fn github_deployment(name: &str, repo_ref: &str) -> Value {
    AgentDeploymentManifest::github(name, repo_ref).build()
}

/// The wire create body of [`github_deployment`]
/// ([`test_support::manifests::github_create_body`]), for deployments made
/// outside the operator with the control plane client.
pub fn github_create_body(
    name: &str,
    repo_ref: &str,
) -> agent_operator::controlplane::types::DeploymentCreate {
    serde_json::from_value(test_support::manifests::github_create_body(name, repo_ref))
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

/// The note of `event`, or `""` without one.
pub fn note_of(event: &Event) -> &str {
    event.note.as_deref().unwrap_or("")
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

/// Waits until the event of the first revision of the remote deployment
/// `id`, created by the AgentDeployment `name`, exists (the create has no
/// event of its own: the first `RevisionDeployed` names the deployment),
/// and returns it.
pub async fn wait_for_created_event(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    id: &str,
    timeout: Duration,
) -> Event {
    let created = format!("created remote deployment {id} ");
    eventually(
        timeout,
        &format!("a RevisionDeployed event naming {id} about {name}"),
        || async {
            events_about(client, namespace, name)
                .await
                .into_iter()
                .find(|e| {
                    e.reason.as_deref() == Some("RevisionDeployed")
                        && note_of(e).starts_with(&created)
                })
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
