//! The write-sequence tier shared by every kind (the tier of kube-rs
//! controller-rs `fixtures.rs`): a fake Kubernetes API server that serves
//! the objects a pass reads and records every write it makes, and a
//! [`Scenario`] that runs one kind's pass ([`kind::reconcile`]) against it
//! and the in-process control plane emulator. Each kind's scenarios pin the
//! exact writes of each pass, in order: the status (with its `Ready`
//! reason), the annotations (`+` set, `-` removed), the events, the
//! finalizer.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use control_plane_emulator::{DEMO_API_KEY, DEMO_WORKSPACE_ID, EmulatorConfig, RunningEmulator};
use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{Value, json};

use super::kind::{self, Kind};
use crate::controller::context::{Context, OperatorConfig, Shared};
use crate::controller::deployment::context::{DeploymentContext, State};

/// The namespace of every scenario.
pub const NS: &str = "default";
/// Where the kinds of the operator live in the API.
pub const GROUP: &str = "/apis/agentserver.dev/v1alpha1/namespaces/default";
/// The path of the seeded AgentControlPlane `default`.
pub const PLANE: &str =
    "/apis/agentserver.dev/v1alpha1/namespaces/default/agentcontrolplanes/default";
/// The path of the seeded Secret `key` (the emulator's demo key).
pub const KEY_SECRET: &str = "/api/v1/namespaces/default/secrets/key";

/// The objects the fake API server holds (by path) and the writes it saw.
#[derive(Default)]
pub struct ApiServer {
    /// The objects, by their path.
    pub objects: Mutex<BTreeMap<String, Value>>,
    /// The writes seen since the last [`Scenario::pass_of`], in order.
    pub writes: Mutex<Vec<String>>,
}

impl ApiServer {
    /// Answers one request: GET of an object or of a collection from
    /// `objects`; a status apply, a metadata merge patch (annotations, and
    /// finalizers with a resourceVersion precondition), a finalizer JSON
    /// patch and an event POST are recorded in `writes` and applied.
    fn answer(&self, method: &Method, path: &str, content_type: &str, body: &[u8]) -> (u16, Value) {
        let parsed: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        if *method == Method::GET {
            return self.read(path);
        }
        if *method == Method::POST && path.ends_with("/events") {
            self.write(format!(
                "event {} {}",
                parsed["type"].as_str().unwrap_or(""),
                parsed["reason"].as_str().unwrap_or("")
            ));
            return (201, parsed);
        }
        if *method != Method::PATCH {
            self.write(format!("unexpected {method} {path}"));
            return (405, not_found());
        }
        if let Some(object_path) = path.strip_suffix("/status") {
            return self.patch_status(object_path, &parsed);
        }
        if content_type.contains("json-patch") {
            return self.patch_finalizers(path, &parsed);
        }
        self.patch_annotations(path, &parsed)
    }

    fn write(&self, w: String) {
        self.writes.lock().unwrap().push(w);
    }

    /// An object, or the list of the objects right under `path`.
    fn read(&self, path: &str) -> (u16, Value) {
        let objects = self.objects.lock().unwrap();
        if let Some(o) = objects.get(path) {
            return (200, o.clone());
        }
        let prefix = format!("{path}/");
        let segments = path.trim_start_matches('/').split('/').count();
        let group_segments = if path.starts_with("/apis/") { 3 } else { 2 };
        let items: Vec<Value> = if segments == group_segments + 1 {
            // Every namespace: `<group>/namespaces/<ns>/<kind>/<name>`.
            let (group, kind) = path.rsplit_once('/').unwrap_or_default();
            objects
                .iter()
                .filter(|(p, _)| {
                    let rest = p.strip_prefix(&format!("{group}/namespaces/"));
                    let parts: Vec<&str> = rest.map(|r| r.split('/').collect()).unwrap_or_default();
                    parts.len() == 3 && parts[1] == kind
                })
                .map(|(_, o)| o.clone())
                .collect()
        } else {
            objects
                .iter()
                .filter(|(p, _)| p.strip_prefix(&prefix).is_some_and(|r| !r.contains('/')))
                .map(|(_, o)| o.clone())
                .collect()
        };
        let collection = segments == group_segments + 1 || segments == group_segments + 3;
        if !collection {
            return (404, not_found());
        }
        (
            200,
            json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items}),
        )
    }

    fn patch_status(&self, path: &str, parsed: &Value) -> (u16, Value) {
        let mut objects = self.objects.lock().unwrap();
        let Some(o) = objects.get_mut(path) else {
            return (404, not_found());
        };
        o["status"] = parsed["status"].clone();
        bump(o);
        let ready = o["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
            .map(|c| c["reason"].as_str().unwrap_or("").to_owned())
            .unwrap_or_default();
        self.write(format!("status {ready}"));
        (200, o.clone())
    }

    /// The finalizer helper adds its finalizer or removes it.
    fn patch_finalizers(&self, path: &str, parsed: &Value) -> (u16, Value) {
        let mut objects = self.objects.lock().unwrap();
        let Some(o) = objects.get_mut(path) else {
            return (404, not_found());
        };
        let ops = parsed.as_array().cloned().unwrap_or_default();
        let removes = ops.iter().any(|op| op["op"] == "remove");
        let added = ops
            .iter()
            .find(|op| op["op"] == "add")
            .map(|op| match &op["value"] {
                Value::Array(list) => list.clone(),
                one => vec![one.clone()],
            })
            .unwrap_or_default();
        o["metadata"]["finalizers"] = if removes { json!([]) } else { json!(added) };
        bump(o);
        self.write(format!(
            "finalizer {}",
            if removes { "removed" } else { "added" }
        ));
        (200, o.clone())
    }

    /// A JSON merge patch of the metadata: annotations set (`+`) or
    /// removed (`-`), and the finalizers, written whole with the
    /// resourceVersion they were read at (409 when it moved on).
    fn patch_annotations(&self, path: &str, parsed: &Value) -> (u16, Value) {
        let mut objects = self.objects.lock().unwrap();
        let Some(o) = objects.get_mut(path) else {
            return (404, not_found());
        };
        let expected = &parsed["metadata"]["resourceVersion"];
        if !expected.is_null() && *expected != o["metadata"]["resourceVersion"] {
            self.write("conflict".into());
            return (409, conflict());
        }
        bump(o);
        let mut changes = Vec::new();
        let mut what = "annotations";
        if let Some(finalizers) = parsed["metadata"].get("finalizers") {
            o["metadata"]["finalizers"] = finalizers.clone();
            changes.push("+finalizer".to_owned());
            what = "metadata";
        }
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
        self.write(format!("{what} {}", changes.join(" ")));
        (200, o.clone())
    }
}

/// The object's resourceVersion moves on with every write.
fn bump(o: &mut Value) {
    let rv: u64 = o["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    o["metadata"]["resourceVersion"] = json!((rv + 1).to_string());
}

fn conflict() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409, "message": "the object has been modified"})
}

fn not_found() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404, "message": "not found"})
}

/// One scenario: the emulator, the fake API server holding the Secret `key`
/// (the emulator's demo key) and the AgentControlPlane `default` (already
/// checked: Ready), and the operator's context over it.
pub struct Scenario {
    /// The control plane.
    pub emulator: RunningEmulator,
    /// The fake API server.
    pub api: Arc<ApiServer>,
    /// The AgentDeployment controller's context, on a client of the fake
    /// API server.
    pub ctx: Arc<DeploymentContext>,
    /// The context of the kinds that keep no state, over the same
    /// [`Shared`].
    pub kinds: Arc<Context>,
    /// How many entries of the emulator's request log [`Scenario::requests`]
    /// has returned.
    requests_seen: Mutex<usize>,
}

impl Scenario {
    /// A scenario over an emulator started with `config`.
    pub async fn with(config: EmulatorConfig) -> Self {
        let emulator = control_plane_emulator::spawn(config)
            .await
            .expect("emulator");
        let api = Arc::new(ApiServer::default());
        let ctx = context(api.clone());
        let s = Self {
            kinds: Arc::new(Context::of(ctx.shared.clone())),
            ctx,
            emulator,
            api,
            requests_seen: Mutex::new(0),
        };
        s.put(
            KEY_SECRET,
            json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "key", "namespace": NS, "resourceVersion": "1"},
                "data": {"api-key": base64_of(DEMO_API_KEY)}}),
        );
        s.put(
            PLANE,
            json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentControlPlane",
                "metadata": {"name": "default", "namespace": NS, "uid": "u-plane", "generation": 1,
                    "resourceVersion": "1", "finalizers": [crate::api::control_plane::IN_USE_FINALIZER]},
                "spec": {"url": s.emulator.base_url(), "workspaceId": DEMO_WORKSPACE_ID,
                    "apiKeySecretRef": {"name": "key", "key": "api-key"}},
                // Checked by its own probe: its users may send.
                "status": {"observedGeneration": 1, "conditions": [{"type": "Ready",
                    "status": "True", "reason": "Authenticated", "message": "",
                    "observedGeneration": 1, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}),
        );
        s
    }

    /// A restart of the operator: a fresh context (no in-process memory)
    /// over the same API server and emulator, with the same hash key (a
    /// real replica reads it from its Secret).
    pub fn restart(&mut self) {
        let key = self.ctx.state.hash_key.clone();
        self.ctx = context_with(self.api.clone(), Some(key));
        self.kinds = Arc::new(Context::of(self.ctx.shared.clone()));
    }

    /// Stores `object` at `path` (a user's create).
    pub fn put(&self, path: &str, object: Value) {
        self.api
            .objects
            .lock()
            .unwrap()
            .insert(path.to_owned(), object);
    }

    /// Deletes the object at `path` (a user's delete, finalizers done).
    pub fn remove(&self, path: &str) {
        self.api.objects.lock().unwrap().remove(path);
    }

    /// The object at `path` as the API server holds it (what the watch would
    /// deliver).
    pub fn object_at<K: serde::de::DeserializeOwned>(&self, path: &str) -> K {
        let objects = self.api.objects.lock().unwrap();
        serde_json::from_value(objects[path].clone()).expect("object")
    }

    /// Changes the stored object at `path` with `f` (a user's edit).
    pub fn edit_at(&self, path: &str, f: impl FnOnce(&mut Value)) {
        let mut objects = self.api.objects.lock().unwrap();
        f(objects.get_mut(path).expect("object"));
    }

    /// One pass of kind `K` on the object stored at `path`: the writes it
    /// made, in order.
    pub async fn pass_of<K: Kind>(&self, path: &str) -> Vec<String> {
        let _ = kind::reconcile(Arc::new(self.object_at::<K>(path)), self.ctx_of::<K>()).await;
        std::mem::take(&mut *self.api.writes.lock().unwrap())
    }

    /// The context of kind `K`'s passes: [`Self::ctx`] for an
    /// AgentDeployment, [`Self::kinds`] for the kinds that keep no state.
    pub fn ctx_of<K: Kind>(&self) -> Arc<Context<K::State>> {
        let any: Arc<dyn std::any::Any + Send + Sync> =
            if std::any::TypeId::of::<K::State>() == std::any::TypeId::of::<State>() {
                self.ctx.clone()
            } else {
                self.kinds.clone()
            };
        any.downcast()
            .expect("a kind's state is () or the AgentDeployment's")
    }

    /// The control plane (and agent server) requests the emulator logged
    /// since the last call, in order: `METHOD route-template status`, e.g.
    /// `GET /v2/deployments/{deployment_id} 200`.
    pub fn requests(&self) -> Vec<String> {
        let log = self.emulator.state().request_log();
        let entries = log["entries"].as_array().cloned().unwrap_or_default();
        let mut seen = self.requests_seen.lock().unwrap();
        let new: Vec<String> = entries
            .iter()
            .skip(*seen)
            .map(|e| {
                format!(
                    "{} {}",
                    e["route"].as_str().unwrap_or(""),
                    e["status"].as_str().unwrap_or("")
                )
            })
            .collect();
        *seen = entries.len();
        new
    }
}

/// The operator's context on a client whose every request `api` answers.
fn context(api: Arc<ApiServer>) -> Arc<DeploymentContext> {
    context_with(api, None)
}

/// [`context`], with `hash_key` instead of a random one when given.
fn context_with(
    api: Arc<ApiServer>,
    hash_key: Option<crate::plan::secrets_hash::HashKey>,
) -> Arc<DeploymentContext> {
    let service = tower::service_fn(move |req: Request<Body>| {
        let server = api.clone();
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
        poll_interval: std::time::Duration::from_millis(100),
        // A revision a create started shows no status for this long.
        max_poll_interval: std::time::Duration::from_millis(500),
        ..OperatorConfig::default()
    };
    let shared = Arc::new(Shared::new(client, config));
    let state = hash_key.map_or_else(State::default, State::with_hash_key);
    Arc::new(Context::new(shared, state))
}

/// `s` in base64 (a Secret's data).
pub fn base64_of(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}
