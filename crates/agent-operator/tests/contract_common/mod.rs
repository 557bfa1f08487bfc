//! Helpers of the contract tests: the control plane emulator served in
//! process on loopback with a request log (arrival time, finish time, status
//! and `Retry-After` of every request, as the server saw it), typed clients,
//! the emulator's admin routes, and an observer that records every attempt.
#![allow(dead_code)] // each test binary uses a different subset of these helpers

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_operator::controlplane::types::{
    DeploymentCreate, Revision, RevisionStatus, SecretValue, SourceConfig, SourceRevisionConfig,
};
use agent_operator::controlplane::{
    ClientConfig, ControlPlaneClient, Error, RequestObserver, RetryPolicy,
};
use axum::extract::Request;
use axum::middleware::Next;
use control_plane_emulator::{
    self as emulator, DEMO_API_KEY, DEMO_WORKSPACE_ID, EmulatorConfig, EmulatorState,
};
use reqwest::Method;
use secrecy::SecretString;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// Longest a poll loop waits before the test fails (a safety net, not a
/// timing assertion).
pub const POLL_LIMIT: Duration = Duration::from_secs(20);

/// One request as the emulator saw it.
#[derive(Clone, Debug)]
pub struct Arrival {
    /// When the request reached the server.
    pub at: Instant,
    /// When the server had its answer (head) ready.
    pub done: Instant,
    /// HTTP method.
    pub method: String,
    /// Path, without the query.
    pub path: String,
    /// Answer status.
    pub status: u16,
    /// `Retry-After` of the answer, if any.
    pub retry_after: Option<String>,
}

/// The emulator on a free loopback port, with a request log.
pub struct Emu {
    /// `http://127.0.0.1:PORT`
    pub base_url: String,
    /// The emulator's state (to change faults from inside an observer).
    pub state: EmulatorState,
    log: Arc<Mutex<Vec<Arrival>>>,
    admin: reqwest::Client,
    _task: JoinHandle<std::io::Result<()>>,
}

impl Drop for Emu {
    fn drop(&mut self) {
        // Releases hung requests and stops the server.
        self.state.signal_shutdown();
    }
}

/// Revision steps of 40 ms and deletes of 300 ms: lifecycles end quickly.
pub fn fast_config() -> EmulatorConfig {
    EmulatorConfig {
        step_duration: Duration::from_millis(40),
        delete_duration: Duration::from_millis(300),
        ..Default::default()
    }
}

/// Retries of the tests: 4 attempts, 10 ms doubling to 40 ms.
pub fn fast_retries() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 4,
        max_elapsed: Duration::from_secs(30),
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(40),
    }
}

async fn record(
    log: Arc<Mutex<Vec<Arrival>>>,
    req: Request,
    next: Next,
) -> axum::response::Response {
    let at = Instant::now();
    let method = req.method().to_string();
    let path = req.uri().path().to_owned();
    let res = next.run(req).await;
    let arrival = Arrival {
        at,
        done: Instant::now(),
        method,
        path,
        status: res.status().as_u16(),
        retry_after: res
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    };
    log.lock().unwrap().push(arrival);
    res
}

impl Emu {
    /// Serves the emulator with `config` (its `listen_addr` is ignored).
    pub async fn start(config: EmulatorConfig) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base_url = format!("http://{}", listener.local_addr().expect("addr"));
        let state = EmulatorState::new(config, base_url.clone());
        let log = Arc::new(Mutex::new(Vec::new()));
        let layer_log = log.clone();
        let app = emulator::router(state.clone()).layer(axum::middleware::from_fn(
            move |req: Request, next: Next| record(layer_log.clone(), req, next),
        ));
        let stop = state.clone();
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.shutdown_requested().await })
                .await
        });
        agent_operator::controlplane::client::install_crypto_provider();
        Self {
            base_url,
            state,
            log,
            admin: reqwest::Client::new(),
            _task: task,
        }
    }

    /// [`Emu::start`] with [`fast_config`].
    pub async fn fast() -> Self {
        Self::start(fast_config()).await
    }

    /// A client config of the demo workspace with [`fast_retries`].
    pub fn config(&self) -> ClientConfig {
        let mut c = ClientConfig::new(
            &self.base_url,
            DEMO_WORKSPACE_ID,
            SecretString::from(DEMO_API_KEY),
        );
        c.retry = fast_retries();
        c.timeout = Duration::from_secs(10);
        c
    }

    /// A client of the demo workspace.
    pub fn client(&self) -> ControlPlaneClient {
        ControlPlaneClient::new(self.config()).expect("client")
    }

    /// A client built from [`Emu::config`] changed by `f`.
    pub fn client_with(&self, f: impl FnOnce(&mut ClientConfig)) -> ControlPlaneClient {
        let mut c = self.config();
        f(&mut c);
        ControlPlaneClient::new(c).expect("client")
    }

    /// Every logged request of the control plane API (admin routes excluded),
    /// in arrival order.
    pub fn log(&self) -> Vec<Arrival> {
        let mut v: Vec<Arrival> = self
            .log
            .lock()
            .unwrap()
            .iter()
            .filter(|a| !a.path.starts_with("/_emulator"))
            .cloned()
            .collect();
        v.sort_by_key(|a| a.at);
        v
    }

    /// Forgets the request log.
    pub fn clear_log(&self) {
        self.log.lock().unwrap().clear();
    }

    /// Calls an admin route (`/_emulator{path}`) and returns status and JSON.
    pub async fn admin(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = self
            .admin
            .request(method, format!("{}/_emulator{path}", self.base_url));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.expect("admin request");
        let status = res.status().as_u16();
        let text = res.text().await.expect("admin body");
        let json = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).expect("admin JSON")
        };
        (status, json)
    }

    /// Replaces the faults (`PUT /_emulator/faults`).
    pub async fn set_faults(&self, faults: Value) {
        let (status, body) = self.admin(Method::PUT, "/faults", Some(faults)).await;
        assert_eq!(status, 200, "{body}");
    }

    /// Replaces the scenario rules (`PUT /_emulator/scenarios`).
    pub async fn set_scenarios(&self, rules: Value) {
        let (status, body) = self.admin(Method::PUT, "/scenarios", Some(rules)).await;
        assert_eq!(status, 200, "{body}");
    }

    /// Forces a revision's status (`POST /_emulator/deployments/.../status`).
    pub async fn force_status(&self, deployment_id: &str, revision_id: &str, status: &str) {
        let (code, body) = self
            .admin(
                Method::POST,
                &format!("/deployments/{deployment_id}/revisions/{revision_id}/status"),
                Some(serde_json::json!({ "status": status })),
            )
            .await;
        assert_eq!(code, 200, "{body}");
    }

    /// The emulator's count of `route` (e.g. `GET /v2/deployments/{deployment_id}`)
    /// answered with `status` (`"200"`, `"hung"`, `"dropped"`), from
    /// `GET /_emulator/requests`.
    pub async fn count(&self, route: &str, status: &str) -> u64 {
        let (_, counts) = self.admin(Method::GET, "/requests", None).await;
        counts["routes"][route][status].as_u64().unwrap_or(0)
    }

    /// Every count of `route`: status → count.
    pub async fn counts(&self, route: &str) -> Value {
        let (_, counts) = self.admin(Method::GET, "/requests", None).await;
        counts["routes"][route].clone()
    }
}

/// A valid `github` create body named `name`.
pub fn github(name: &str) -> DeploymentCreate {
    DeploymentCreate {
        name: name.to_owned(),
        source: "github".into(),
        source_config: SourceConfig {
            integration_id: Some("3c90c3cc-0d44-4b50-8888-8dd25736052a".into()),
            repo_url: Some("https://github.com/acme/agent".into()),
            deployment_type: Some("dev".into()),
            build_on_push: Some(false),
            resource_spec: Some(serde_json::json!({"min_scale": 1, "max_scale": 2, "cpu": 1})),
            ..Default::default()
        },
        source_revision_config: SourceRevisionConfig {
            repo_ref: Some("main".into()),
            langgraph_config_path: Some("langgraph.json".into()),
            ..Default::default()
        },
        secrets: vec![SecretValue::new("OPENAI_API_KEY", "sk-test-value")],
        secret_references: Vec::new(),
        display_name: None,
    }
}

/// Polls a revision with the client until it is no longer in progress;
/// returns every distinct status seen, in order.
pub async fn poll_revision(
    c: &ControlPlaneClient,
    deployment_id: &str,
    revision_id: &str,
) -> Vec<RevisionStatus> {
    let deadline = Instant::now() + POLL_LIMIT;
    let mut seen: Vec<RevisionStatus> = Vec::new();
    loop {
        let r: Revision = c
            .get_revision(deployment_id, revision_id)
            .await
            .expect("get_revision");
        if seen.last() != Some(&r.status) {
            seen.push(r.status.clone());
        }
        if !r.status.is_in_progress() {
            return seen;
        }
        assert!(Instant::now() < deadline, "revision still {}", r.status);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Polls GET until the deployment is gone (404); returns the statuses seen.
pub async fn poll_until_gone(c: &ControlPlaneClient, id: &str) -> Vec<String> {
    let deadline = Instant::now() + POLL_LIMIT;
    let mut seen = Vec::new();
    loop {
        match c.get_deployment(id).await {
            Ok(d) => {
                let s = d.status.unwrap_or_default();
                if seen.last() != Some(&s) {
                    seen.push(s);
                }
            }
            Err(Error::NotFound { detail }) => {
                assert!(detail.contains(id), "404 names the id: {detail}");
                return seen;
            }
            Err(e) => panic!("unexpected error while polling: {e}"),
        }
        assert!(Instant::now() < deadline, "deployment {id} never went away");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One observed attempt.
#[derive(Clone, Debug)]
pub struct Observed {
    /// Operation name.
    pub operation: &'static str,
    /// Status class.
    pub class: &'static str,
    /// When the observer was called (the attempt's end).
    pub at: Instant,
    /// The attempt's duration.
    pub elapsed: Duration,
}

impl Observed {
    /// When the attempt was sent (its end minus its duration).
    pub fn sent(&self) -> Instant {
        self.at - self.elapsed
    }
}

type Hook = Box<dyn Fn(&Observed) + Send + Sync>;

/// A [`RequestObserver`] that records every attempt and may run a hook.
#[derive(Default)]
pub struct Recorder {
    events: Mutex<Vec<Observed>>,
    hook: Option<Hook>,
}

impl Recorder {
    /// A recorder that also calls `hook` on each attempt.
    pub fn with_hook(hook: impl Fn(&Observed) + Send + Sync + 'static) -> Self {
        Self {
            events: Mutex::default(),
            hook: Some(Box::new(hook)),
        }
    }

    /// Every attempt so far.
    pub fn events(&self) -> Vec<Observed> {
        self.events.lock().unwrap().clone()
    }

    /// Forgets the attempts so far.
    pub fn clear(&self) {
        self.events.lock().unwrap().clear();
    }
}

impl RequestObserver for Recorder {
    fn observe(&self, operation: &'static str, status_class: &'static str, elapsed: Duration) {
        let o = Observed {
            operation,
            class: status_class,
            at: Instant::now(),
            elapsed,
        };
        if let Some(h) = &self.hook {
            h(&o);
        }
        self.events.lock().unwrap().push(o);
    }
}
