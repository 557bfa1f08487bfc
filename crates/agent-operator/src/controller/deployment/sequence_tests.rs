//! Write-sequence tests of the AgentDeployment pass, without a cluster
//! (the tier of kube-rs controller-rs `fixtures.rs`): one scenario per path
//! (create, poll, patch, drift, rejection, stall, delete) runs
//! [`reconcile`] against the in-process control plane emulator and a fake
//! Kubernetes API that serves the objects the pass reads and records every
//! write it makes. Each test pins the exact writes of each pass, in order:
//! the status (with its `Ready` reason), the annotations (`+` set, `-`
//! removed), the events, the finalizer.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use control_plane_emulator::{
    DEMO_API_KEY, DEMO_WORKSPACE_ID, EmulatorConfig, FaultConfig, RejectRule, RunningEmulator,
};
use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{Value, json};

use super::reconcile;
use crate::api::deployment::{AgentDeployment, FINALIZER};
use crate::controller::{Context, OperatorConfig};

const NS: &str = "default";
const NAME: &str = "app";
const ADS: &str = "/apis/agentserver.dev/v1alpha1/namespaces/default/agentdeployments";

/// The objects the fake API server holds (by path) and the writes it saw.
#[derive(Default)]
struct ApiServer {
    objects: Mutex<BTreeMap<String, Value>>,
    writes: Mutex<Vec<String>>,
}

impl ApiServer {
    /// Answers one request: GET from `objects`; a status apply, an
    /// annotation merge patch, a finalizer JSON patch and an event POST are
    /// recorded in `writes` and applied.
    fn answer(&self, method: &Method, path: &str, content_type: &str, body: &[u8]) -> (u16, Value) {
        let mut objects = self.objects.lock().unwrap();
        let parsed: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let write = |w: String| self.writes.lock().unwrap().push(w);
        if *method == Method::GET {
            return match objects.get(path) {
                Some(o) => (200, o.clone()),
                None => (404, not_found()),
            };
        }
        if *method == Method::POST && path.ends_with("/events") {
            write(format!(
                "event {} {}",
                parsed["type"].as_str().unwrap_or(""),
                parsed["reason"].as_str().unwrap_or("")
            ));
            return (201, parsed);
        }
        if *method != Method::PATCH {
            write(format!("unexpected {method} {path}"));
            return (405, not_found());
        }
        if let Some(object_path) = path.strip_suffix("/status") {
            let Some(o) = objects.get_mut(object_path) else {
                return (404, not_found());
            };
            o["status"] = parsed["status"].clone();
            let ready = o["status"]["conditions"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
                .map(|c| c["reason"].as_str().unwrap_or("").to_owned())
                .unwrap_or_default();
            write(format!("status {ready}"));
            return (200, o.clone());
        }
        let Some(o) = objects.get_mut(path) else {
            return (404, not_found());
        };
        if content_type.contains("json-patch") {
            // The finalizer helper adds or removes the finalizer.
            let removes = parsed.to_string().contains("\"remove\"");
            o["metadata"]["finalizers"] = if removes {
                json!([])
            } else {
                json!([FINALIZER])
            };
            write(format!(
                "finalizer {}",
                if removes { "removed" } else { "added" }
            ));
            return (200, o.clone());
        }
        let mut changes = Vec::new();
        if let Some(map) = parsed["metadata"]["annotations"].as_object() {
            for (k, v) in map {
                let short = k.rsplit('/').next().unwrap_or(k);
                if v.is_null() {
                    if let Some(a) = o["metadata"]["annotations"].as_object_mut() {
                        a.remove(k);
                    }
                    changes.push(format!("-{short}"));
                } else {
                    o["metadata"]["annotations"][k] = v.clone();
                    changes.push(format!("+{short}"));
                }
            }
        }
        write(format!("annotations {}", changes.join(" ")));
        (200, o.clone())
    }
}

fn not_found() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404, "message": "not found"})
}

/// One scenario: the emulator, the fake API server and the operator's
/// context over it.
struct Scenario {
    emulator: RunningEmulator,
    api: Arc<ApiServer>,
    ctx: Arc<Context>,
}

impl Scenario {
    /// A scenario whose revisions spend `step` in each in-progress status
    /// and whose deletes take `delete`.
    async fn new(step: Duration, delete: Duration) -> Self {
        let emulator = control_plane_emulator::spawn(EmulatorConfig {
            step_duration: step,
            delete_duration: delete,
            ..EmulatorConfig::default()
        })
        .await
        .expect("emulator");
        let api = Arc::new(ApiServer::default());
        {
            let mut objects = api.objects.lock().unwrap();
            objects.insert(
                format!("/api/v1/namespaces/{NS}/secrets/key"),
                json!({"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": "key", "namespace": NS, "resourceVersion": "1"},
                    "data": {"api-key": base64_of(DEMO_API_KEY)}}),
            );
            objects.insert(
                format!("/apis/agentserver.dev/v1alpha1/namespaces/{NS}/agentcontrolplanes/default"),
                json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentControlPlane",
                    "metadata": {"name": "default", "namespace": NS, "uid": "u-plane", "generation": 1, "resourceVersion": "1"},
                    "spec": {"url": emulator.base_url(), "workspaceId": DEMO_WORKSPACE_ID,
                        "apiKeySecretRef": {"name": "key", "key": "api-key"}},
                    // Checked by its own probe: its AgentDeployments may send.
                    "status": {"observedGeneration": 1, "conditions": [{"type": "Ready",
                        "status": "True", "reason": "Authenticated", "message": "",
                        "observedGeneration": 1, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}),
            );
            objects.insert(
                format!("{ADS}/{NAME}"),
                json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentDeployment",
                    "metadata": {"name": NAME, "namespace": NS, "uid": "u-app", "generation": 1,
                        "resourceVersion": "1", "finalizers": [FINALIZER], "annotations": {}},
                    "spec": {"source": "external_docker",
                        "sourceRevisionConfig": {"imageUri": "registry.example.com/acme/app:1"}}}),
            );
        }
        let server = api.clone();
        let service = tower::service_fn(move |req: Request<Body>| {
            let server = server.clone();
            async move {
                let (parts, body) = req.into_parts();
                let bytes = body.collect_bytes().await.unwrap_or_default();
                let content_type = parts
                    .headers
                    .get(http::header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_owned();
                let (status, value) =
                    server.answer(&parts.method, parts.uri.path(), &content_type, &bytes);
                let response = Response::builder()
                    .status(StatusCode::from_u16(status).unwrap_or(StatusCode::OK))
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(Body::from(serde_json::to_vec(&value).unwrap_or_default()))
                    .expect("response");
                Ok::<_, Infallible>(response)
            }
        });
        let client = kube::Client::new(service, NS);
        let config = OperatorConfig {
            allowed_hosts: crate::allowlist::HostAllowlist::parse(["127.0.0.1"]).expect("hosts"),
            // A delete in progress is read again after this (jittered).
            poll_interval: Duration::from_millis(100),
            ..OperatorConfig::default()
        };
        let ctx = Arc::new(Context::new(client, config));
        Self { emulator, api, ctx }
    }

    /// The object as the API server holds it (what the watch would deliver).
    fn object(&self) -> AgentDeployment {
        let objects = self.api.objects.lock().unwrap();
        serde_json::from_value(objects[&format!("{ADS}/{NAME}")].clone()).expect("object")
    }

    /// Changes the stored object with `f` (a user's edit).
    fn edit(&self, f: impl FnOnce(&mut Value)) {
        let mut objects = self.api.objects.lock().unwrap();
        f(objects.get_mut(&format!("{ADS}/{NAME}")).expect("object"));
    }

    /// One pass on the stored object: the writes it made, in order.
    async fn pass(&self) -> Vec<String> {
        let _ = reconcile(Arc::new(self.object()), self.ctx.clone()).await;
        std::mem::take(&mut *self.api.writes.lock().unwrap())
    }

    /// The id of the remote deployment recorded in status.
    fn deployment_id(&self) -> String {
        let o = self.object();
        o.status
            .and_then(|s| s.deployment_id)
            .expect("deployment id")
    }

    /// Changes the remote deployment's image from outside the operator.
    async fn change_remote_image(&self, image: &str) {
        let url = format!(
            "{}/v2/deployments/{}",
            self.emulator.base_url(),
            self.deployment_id()
        );
        let answer = reqwest::Client::new()
            .patch(url)
            .header("X-Api-Key", DEMO_API_KEY)
            .header("X-Tenant-Id", DEMO_WORKSPACE_ID)
            .json(&json!({"source_revision_config": {"image_uri": image}}))
            .send()
            .await
            .expect("outside PATCH");
        assert!(answer.status().is_success(), "{}", answer.status());
    }

    /// Redeploys the remote deployment from outside the operator (as
    /// `agentctl redeploy` or the UI would).
    async fn redeploy_outside(&self) {
        let url = format!(
            "{}/v2/deployments/{}/revisions",
            self.emulator.base_url(),
            self.deployment_id()
        );
        let answer = reqwest::Client::new()
            .post(url)
            .header("X-Api-Key", DEMO_API_KEY)
            .header("X-Tenant-Id", DEMO_WORKSPACE_ID)
            .send()
            .await
            .expect("outside redeploy");
        assert!(answer.status().is_success(), "{}", answer.status());
    }
}

fn base64_of(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// Long enough that a revision stays in progress for the whole test.
const FOREVER: Duration = Duration::from_secs(3600);
/// Short enough that a revision is DEPLOYED by the next pass.
const QUICK: Duration = Duration::from_millis(5);

/// Waits for the emulator's revisions (or deletes) to move on.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(200)).await;
}

#[tokio::test]
async fn create_writes_the_marker_then_status_then_the_id_then_events() {
    let s = Scenario::new(FOREVER, FOREVER).await;
    assert_eq!(
        s.pass().await,
        [
            "annotations +create-pending",
            "status RevisionInProgress",
            "annotations -create-pending +deployment-id",
            "event Normal Created",
        ]
    );
}

/// The REVISION column (`status.revisionStatus`) is filled by the first
/// status write after the create, without a read of the revision, and the
/// next pass reads the revision's real status.
#[tokio::test]
async fn the_first_status_write_after_a_create_fills_the_revision_column() {
    let s = Scenario::new(FOREVER, FOREVER).await;
    s.pass().await;
    let status = s.object().status.expect("status");
    assert!(status.latest_revision_id.is_some());
    assert_eq!(status.revision_status.as_deref(), Some("CREATING"));
    s.pass().await;
    let read = s.object().status.unwrap().revision_status.unwrap();
    assert_ne!(read, "CREATING", "the poll reads the revision");
}

#[tokio::test]
async fn poll_writes_status_only_when_the_revision_status_changes() {
    let s = Scenario::new(FOREVER, FOREVER).await;
    s.pass().await;
    assert_eq!(
        s.pass().await,
        ["status RevisionInProgress"],
        "first read of the revision"
    );
    assert_eq!(s.pass().await, Vec::<String>::new(), "nothing changed");
}

#[tokio::test]
async fn patch_writes_status_and_one_event() {
    let s = Scenario::new(QUICK, FOREVER).await;
    s.pass().await;
    settle().await;
    assert_eq!(
        s.pass().await,
        ["status RevisionDeployed", "event Normal RevisionDeployed"]
    );
    s.edit(|o| {
        o["spec"]["sourceRevisionConfig"]["imageUri"] = json!("registry.example.com/acme/app:2");
        o["metadata"]["generation"] = json!(2);
    });
    assert_eq!(
        s.pass().await,
        ["status RevisionInProgress", "event Normal Patched"]
    );
}

#[tokio::test]
async fn drift_is_corrected_with_one_status_write_and_one_event() {
    let s = Scenario::new(QUICK, FOREVER).await;
    s.pass().await;
    settle().await;
    s.pass().await;
    s.change_remote_image("registry.example.com/acme/other:9")
        .await;
    assert_eq!(
        s.pass().await,
        ["status RevisionInProgress", "event Normal DriftCorrected"]
    );
}

#[tokio::test]
async fn a_redeploy_from_outside_is_followed_with_one_status_write_and_one_event() {
    let s = Scenario::new(QUICK, FOREVER).await;
    s.pass().await;
    settle().await;
    s.pass().await;
    s.redeploy_outside().await;
    assert_eq!(
        s.pass().await,
        [
            "status RevisionInProgress",
            "event Normal OutOfBandRevision"
        ]
    );
}

#[tokio::test]
async fn rejection_writes_status_removes_the_marker_and_warns_once() {
    let s = Scenario::new(FOREVER, FOREVER).await;
    s.emulator
        .state()
        .set_faults(FaultConfig {
            reject: vec![RejectRule {
                route: "POST /v2/deployments".into(),
                status: 400,
                detail: Some("no".into()),
                raw_body: None,
            }],
            ..FaultConfig::default()
        })
        .expect("faults");
    assert_eq!(
        s.pass().await,
        [
            "annotations +create-pending",
            "status InvalidSpec",
            "annotations -create-pending",
            "event Warning InvalidSpec",
        ]
    );
    assert_eq!(s.pass().await, Vec::<String>::new(), "not sent again");
}

#[tokio::test]
async fn stall_on_a_missing_plane_writes_status_and_warns_once() {
    let s = Scenario::new(FOREVER, FOREVER).await;
    s.edit(|o| o["spec"]["controlPlaneRef"] = json!({"name": "missing"}));
    assert_eq!(
        s.pass().await,
        [
            "status ControlPlaneNotReady",
            "event Warning ControlPlaneNotReady"
        ]
    );
    assert_eq!(s.pass().await, Vec::<String>::new(), "already reported");
}

#[tokio::test]
async fn delete_writes_deleting_then_the_event_and_the_finalizer() {
    let s = Scenario::new(QUICK, Duration::from_millis(100)).await;
    s.pass().await;
    s.edit(|o| o["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z"));
    assert_eq!(s.pass().await, ["status Deleting"]);
    settle().await;
    settle().await;
    assert_eq!(
        s.pass().await,
        ["event Normal Deleted", "finalizer removed"]
    );
}
