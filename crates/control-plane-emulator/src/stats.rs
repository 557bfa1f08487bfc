//! What the control plane was asked, for tests to judge how a client behaved
//! (how many polls, retries, 429s). An emulator feature, served by the admin
//! routes (`admin`):
//!
//! - `GET /_emulator/requests`: counts per route template and status, and
//!   `during_retry_after`, the number of requests that arrived from a
//!   workspace while a `Retry-After` the emulator had sent to that workspace
//!   (a 429 or a 503) was still running;
//! - `GET /_emulator/requests/log`: the last [`REQUEST_LOG_CAPACITY`]
//!   requests, oldest first, one entry each (see [`RequestStats::log_json`]).
//!
//! Every request except the admin routes is counted and logged once: when
//! it is answered (its status), when its connection is dropped (`dropped`),
//! or when it starts hanging (`hung`). A request's time is its arrival.
//!
//! The counting middleware's state is `Stats`, this module's own piece of
//! the emulator's state: it needs nothing else (the fault middleware marks
//! a response it lost with a `FaultMark`, defined here).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use serde_json::{Value, json};
use uuid::Uuid;

use super::sync::lock;

/// Most entries the request log keeps: 200,000 (under 30 MB). When it is
/// full, the oldest entry is dropped for each new one, and the log's
/// `dropped` count says how many were.
pub const REQUEST_LOG_CAPACITY: usize = 200_000;

/// The route prefix of the self-hosted control plane routes.
const SELF_HOSTED_PREFIX: &str = "/api-host";

/// One counted request, as the outermost middleware saw it arrive. Put in the
/// request extensions so that inner middleware (the hang fault) can count the
/// request itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RequestInfo {
    /// Arrival.
    pub at: Instant,
    /// `"METHOD /route/{template}"`, e.g. `GET /v2/deployments/{deployment_id}`
    /// (`/api-host/...` for the self-hosted routes, `<unmatched>` when no
    /// route matched).
    pub route: String,
    /// The `{deployment_id}` path segment, as sent.
    pub deployment_id: Option<String>,
    /// The `{listener_id}` path segment, as sent.
    pub listener_id: Option<String>,
    /// The `X-Tenant-Id` header (a uuid in its lowercase hyphenated form),
    /// whether or not the request was authenticated.
    pub workspace: Option<String>,
}

impl RequestInfo {
    /// The route without the self-hosted prefix: `GET /v2/deployments` for
    /// both `GET /v2/deployments` and `GET /api-host/v2/deployments`.
    pub fn cloud_route(&self) -> String {
        match self.route.split_once(' ') {
            Some((method, path)) => match path.strip_prefix(SELF_HOSTED_PREFIX) {
                Some(rest) if rest.starts_with('/') => format!("{method} {rest}"),
                _ => self.route.clone(),
            },
            None => self.route.clone(),
        }
    }
}

/// The segments of `path` where `template` has `{deployment_id}` and
/// `{listener_id}`.
fn path_ids(template: &str, path: &str) -> (Option<String>, Option<String>) {
    let mut ids = (None, None);
    for (t, p) in template.split('/').zip(path.split('/')) {
        match t {
            "{deployment_id}" => ids.0 = Some(p.to_owned()),
            "{listener_id}" => ids.1 = Some(p.to_owned()),
            _ => {}
        }
    }
    ids
}

/// The workspace a request names in `X-Tenant-Id`.
fn workspace_of(headers: &HeaderMap) -> Option<String> {
    let raw = headers.get("x-tenant-id")?.to_str().ok()?.trim();
    if raw.is_empty() {
        return None;
    }
    Some(match Uuid::parse_str(raw) {
        Ok(id) => id.hyphenated().to_string(),
        Err(_) => raw.to_owned(),
    })
}

/// The `Retry-After` of a 429 or 503 answer, in whole seconds (the only form
/// the emulator sends).
fn retry_after(res: &Response) -> Option<Duration> {
    if !matches!(
        res.status(),
        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
    ) {
        return None;
    }
    let secs: u64 = res
        .headers()
        .get(header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(secs))
}

/// One entry of the request log.
#[derive(Clone, Debug)]
struct LogEntry {
    /// Milliseconds from the emulator's start to the arrival.
    t_ms: u64,
    route: Arc<str>,
    deployment_id: Option<Box<str>>,
    listener_id: Option<Box<str>>,
    /// The `X-Tenant-Id` (interned: a bounded set).
    workspace: Option<Arc<str>>,
    status: Arc<str>,
}

/// The counts of one workspace (its `X-Tenant-Id`) in `GET /_emulator/requests`.
#[derive(Clone, Debug, Default, serde::Serialize)]
struct WorkspaceCounts {
    /// Requests naming the workspace.
    total: u64,
    /// Of those, the ones that arrived while a `Retry-After` sent to the
    /// workspace ran.
    during_retry_after: u64,
    /// Status (a number, or `dropped` / `hung`) → count.
    statuses: BTreeMap<String, u64>,
}

/// Counts, the request log and the pending `Retry-After`s of each workspace.
#[derive(Debug)]
pub(crate) struct RequestStats {
    /// Origin of the log's `t_ms` (the emulator's start; kept by
    /// [`RequestStats::reset`]).
    started: Instant,
    total: u64,
    /// `"METHOD /route/{template}"` → status → count.
    routes: BTreeMap<String, BTreeMap<String, u64>>,
    /// Requests that arrived while their workspace had a `Retry-After` running.
    during_retry_after: u64,
    /// Workspace → its own counts (requests naming no workspace are not
    /// counted here).
    workspaces: BTreeMap<String, WorkspaceCounts>,
    /// Workspace → end of the last `Retry-After` sent to it.
    retry_after_until: HashMap<String, Instant>,
    log: VecDeque<LogEntry>,
    capacity: usize,
    /// Log entries dropped because the log was full.
    dropped: u64,
    /// One shared copy of each route and status string (a bounded set).
    interned: HashMap<String, Arc<str>>,
}

impl Default for RequestStats {
    fn default() -> Self {
        Self::new(Instant::now(), REQUEST_LOG_CAPACITY)
    }
}

impl RequestStats {
    /// Empty stats whose log starts at `started` and keeps at most `capacity`
    /// entries (at least 1).
    pub fn new(started: Instant, capacity: usize) -> Self {
        Self {
            started,
            total: 0,
            routes: BTreeMap::new(),
            during_retry_after: 0,
            workspaces: BTreeMap::new(),
            retry_after_until: HashMap::new(),
            log: VecDeque::new(),
            capacity: capacity.max(1),
            dropped: 0,
            interned: HashMap::new(),
        }
    }

    /// Forgets counts, log and pending `Retry-After`s; times stay relative
    /// to the emulator's start.
    pub fn reset(&mut self) {
        *self = Self::new(self.started, self.capacity);
    }

    fn intern(&mut self, s: &str) -> Arc<str> {
        if let Some(a) = self.interned.get(s) {
            return a.clone();
        }
        let a: Arc<str> = Arc::from(s);
        self.interned.insert(s.to_owned(), a.clone());
        a
    }

    /// Counts and logs one request answered with `status` (a number, or
    /// `dropped` / `hung`).
    pub fn record(&mut self, req: &RequestInfo, status: &str) {
        self.total += 1;
        if let Some(ws) = &req.workspace {
            let counts = self.workspaces.entry(ws.clone()).or_default();
            counts.total += 1;
            *counts.statuses.entry(status.to_owned()).or_default() += 1;
        }
        *self
            .routes
            .entry(req.route.clone())
            .or_default()
            .entry(status.to_owned())
            .or_default() += 1;
        let entry = LogEntry {
            t_ms: u64::try_from(req.at.saturating_duration_since(self.started).as_millis())
                .unwrap_or(u64::MAX),
            route: self.intern(&req.route),
            deployment_id: req.deployment_id.as_deref().map(Box::from),
            listener_id: req.listener_id.as_deref().map(Box::from),
            workspace: req.workspace.as_deref().map(|ws| self.intern(ws)),
            status: self.intern(status),
        };
        if self.log.len() >= self.capacity {
            self.log.pop_front();
            self.dropped += 1;
        }
        self.log.push_back(entry);
    }

    /// Notes a request of `workspace` arriving at `at`: counted in
    /// `during_retry_after` when a `Retry-After` sent to the workspace runs
    /// past `at`.
    pub fn arrival(&mut self, workspace: &str, at: Instant) {
        if self
            .retry_after_until
            .get(workspace)
            .is_some_and(|until| at < *until)
        {
            self.during_retry_after += 1;
            self.workspaces
                .entry(workspace.to_owned())
                .or_default()
                .during_retry_after += 1;
        }
    }

    /// Notes a `Retry-After` sent to `workspace` that runs until `until` (a
    /// shorter one does not shorten a longer one still running).
    pub fn retry_after_sent(&mut self, workspace: &str, until: Instant) {
        let end = self
            .retry_after_until
            .entry(workspace.to_owned())
            .or_insert(until);
        *end = (*end).max(until);
    }

    /// `{"total": N, "during_retry_after": M, "routes": {"GET /v2/deployments":
    /// {"200": 3}}, "workspaces": {"<uuid>": {"total": N, "during_retry_after":
    /// M, "statuses": {"200": 3, "429": 1}}}}`.
    pub fn to_json(&self) -> Value {
        json!({
            "total": self.total,
            "during_retry_after": self.during_retry_after,
            "routes": self.routes,
            "workspaces": self.workspaces,
        })
    }

    /// The log, oldest first: `{"capacity": 200000, "dropped": 0, "entries":
    /// [{"t_ms": 1520, "route": "GET /v2/deployments/{deployment_id}",
    /// "deployment_id": "…", "listener_id": null, "workspace": "…", "status":
    /// "200"}]}`.
    /// `t_ms` is the arrival in milliseconds since the emulator started;
    /// `dropped` counts the oldest entries dropped because the log was full.
    pub fn log_json(&self) -> Value {
        let entries: Vec<Value> = self
            .log
            .iter()
            .map(|e| {
                json!({
                    "t_ms": e.t_ms,
                    "route": &*e.route,
                    "deployment_id": e.deployment_id.as_deref(),
                    "listener_id": e.listener_id.as_deref(),
                    "workspace": e.workspace.as_deref(),
                    "status": &*e.status,
                })
            })
            .collect();
        json!({ "capacity": self.capacity, "dropped": self.dropped, "entries": entries })
    }
}

/// Marks a response the counting middleware must not count by its status
/// (set by the fault middleware on a response it lost or held).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FaultMark {
    /// The connection was dropped: counted as `dropped`.
    Dropped,
    /// Already counted (as `hung`) when the request started hanging.
    Counted,
    /// Counted and logged with this status (a commit fault, e.g. `201,
    /// then dropped`).
    As(String),
}

/// The request counts and log of one emulator, shared (cheap to clone) by
/// the counting middleware, the fault middleware (a hung request is counted
/// when it starts hanging) and the admin routes.
#[derive(Clone, Debug, Default)]
pub(crate) struct Stats(Arc<Mutex<RequestStats>>);

impl Stats {
    /// See [`RequestStats::record`].
    pub fn record(&self, req: &RequestInfo, status: &str) {
        lock(&self.0).record(req, status);
    }

    /// See [`RequestStats::arrival`].
    pub fn arrival(&self, workspace: &str, at: Instant) {
        lock(&self.0).arrival(workspace, at);
    }

    /// See [`RequestStats::retry_after_sent`].
    pub fn retry_after_sent(&self, workspace: &str, until: Instant) {
        lock(&self.0).retry_after_sent(workspace, until);
    }

    /// See [`RequestStats::reset`].
    pub fn reset(&self) {
        lock(&self.0).reset();
    }

    /// See [`RequestStats::to_json`].
    pub fn to_json(&self) -> Value {
        lock(&self.0).to_json()
    }

    /// See [`RequestStats::log_json`].
    pub fn log_json(&self) -> Value {
        lock(&self.0).log_json()
    }
}

/// Outermost middleware: counts and logs every request except the admin
/// routes, tracks the `Retry-After`s sent to each workspace, and logs method,
/// route template, status and duration (never headers or bodies).
pub(crate) async fn count_requests(
    State(stats): State<Stats>,
    mut req: Request,
    next: Next,
) -> Response {
    if req.uri().path().starts_with("/_emulator") {
        return next.run(req).await;
    }
    let at = Instant::now();
    let template = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_owned());
    let (deployment_id, listener_id) = template
        .as_deref()
        .map(|t| path_ids(t, req.uri().path()))
        .unwrap_or_default();
    let info = RequestInfo {
        at,
        route: format!(
            "{} {}",
            req.method(),
            template.as_deref().unwrap_or("<unmatched>")
        ),
        deployment_id,
        listener_id,
        workspace: workspace_of(req.headers()),
    };
    if let Some(ws) = &info.workspace {
        stats.arrival(ws, at);
    }
    req.extensions_mut().insert(info.clone());
    let res = next.run(req).await;
    if let (Some(ws), Some(wait)) = (&info.workspace, retry_after(&res)) {
        stats.retry_after_sent(ws, Instant::now() + wait);
    }
    let status = match res.extensions().get::<FaultMark>() {
        Some(FaultMark::Counted) => None,
        Some(FaultMark::Dropped) => Some("dropped".to_owned()),
        Some(FaultMark::As(status)) => Some(status.clone()),
        None => Some(res.status().as_u16().to_string()),
    };
    if let Some(status) = status {
        tracing::debug!(
            request = %info.route,
            %status,
            elapsed_ms = at.elapsed().as_millis() as u64,
            "request"
        );
        stats.record(&info, &status);
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(at: Instant, route: &str, deployment_id: Option<&str>) -> RequestInfo {
        RequestInfo {
            at,
            route: route.to_owned(),
            deployment_id: deployment_id.map(str::to_owned),
            listener_id: None,
            workspace: Some("ws".to_owned()),
        }
    }

    #[test]
    fn counts_by_route_and_status() {
        let mut s = RequestStats::default();
        let now = Instant::now();
        s.record(&info(now, "GET /v2/deployments", None), "200");
        s.record(&info(now, "GET /v2/deployments", None), "200");
        s.record(&info(now, "GET /v2/deployments", None), "429");
        assert_eq!(
            s.to_json(),
            json!({"total": 3, "during_retry_after": 0,
                   "routes": {"GET /v2/deployments": {"200": 2, "429": 1}},
                   "workspaces": {"ws": {"total": 3, "during_retry_after": 0,
                                         "statuses": {"200": 2, "429": 1}}}})
        );
    }

    #[test]
    fn the_log_keeps_the_last_entries_with_times_and_ids() {
        let t0 = Instant::now();
        let mut s = RequestStats::new(t0, 2);
        let get = "GET /v2/deployments/{deployment_id}";
        s.record(&info(t0, "POST /v2/deployments", None), "201");
        s.record(
            &info(t0 + Duration::from_millis(1500), get, Some("d-1")),
            "200",
        );
        s.record(
            &info(t0 + Duration::from_millis(2250), get, Some("d-2")),
            "hung",
        );
        assert_eq!(
            s.log_json(),
            json!({"capacity": 2, "dropped": 1, "entries": [
                {"t_ms": 1500, "route": get, "deployment_id": "d-1", "listener_id": null, "workspace": "ws", "status": "200"},
                {"t_ms": 2250, "route": get, "deployment_id": "d-2", "listener_id": null, "workspace": "ws", "status": "hung"},
            ]})
        );
        assert_eq!(s.to_json()["total"], 3, "counts keep what the log drops");
        s.reset();
        assert_eq!(
            s.log_json(),
            json!({"capacity": 2, "dropped": 0, "entries": []})
        );
        s.record(&info(t0 + Duration::from_secs(3), get, Some("d-1")), "200");
        assert_eq!(
            s.log_json()["entries"][0]["t_ms"],
            3000,
            "times stay relative to the start after a reset"
        );
    }

    #[test]
    fn requests_during_a_retry_after_are_counted_per_workspace() {
        let t0 = Instant::now();
        let mut s = RequestStats::new(t0, 10);
        s.arrival("a", t0);
        s.retry_after_sent("a", t0 + Duration::from_secs(2));
        s.retry_after_sent("a", t0 + Duration::from_secs(1));
        s.arrival("a", t0 + Duration::from_millis(500));
        s.arrival("b", t0 + Duration::from_millis(500));
        s.arrival("a", t0 + Duration::from_millis(1999));
        s.arrival("a", t0 + Duration::from_secs(2));
        assert_eq!(s.to_json()["during_retry_after"], 2);
        assert_eq!(s.to_json()["workspaces"]["a"]["during_retry_after"], 2);
        assert!(s.to_json()["workspaces"].get("b").is_none());
        s.reset();
        assert_eq!(s.to_json()["during_retry_after"], 0);
        s.arrival("a", t0 + Duration::from_millis(500));
        assert_eq!(
            s.to_json()["during_retry_after"],
            0,
            "the reset forgets pending Retry-Afters"
        );
    }

    #[test]
    fn ids_come_from_the_template() {
        assert_eq!(
            path_ids(
                "/api-host/v2/deployments/{deployment_id}/revisions/{revision_id}",
                "/api-host/v2/deployments/abc/revisions/def"
            ),
            (Some("abc".to_owned()), None)
        );
        assert_eq!(
            path_ids("/v2/listeners/{listener_id}", "/v2/listeners/l-1"),
            (None, Some("l-1".to_owned()))
        );
        assert_eq!(path_ids("/v2/deployments", "/v2/deployments"), (None, None));
        let i = info(Instant::now(), "GET /api-host/v2/deployments", None);
        assert_eq!(i.cloud_route(), "GET /v2/deployments");
        let i = info(Instant::now(), "GET /v2/deployments", None);
        assert_eq!(i.cloud_route(), "GET /v2/deployments");
    }

    #[test]
    fn workspaces_are_normalized_uuids() {
        let mut h = HeaderMap::new();
        assert_eq!(workspace_of(&h), None);
        h.insert(
            "x-tenant-id",
            "7B6A3C1E5D4F4A2B8C9D0E1F2A3B4C5D".parse().unwrap(),
        );
        assert_eq!(
            workspace_of(&h).as_deref(),
            Some("7b6a3c1e-5d4f-4a2b-8c9d-0e1f2a3b4c5d")
        );
        h.insert("x-tenant-id", "ws-1".parse().unwrap());
        assert_eq!(workspace_of(&h).as_deref(), Some("ws-1"));
    }

    mod over_http {
        use axum::body::Body;
        use axum::http::Request;
        use tower::ServiceExt;

        use super::*;
        use crate::{
            DEMO_API_KEY, DEMO_WORKSPACE_ID, EmulatorConfig, EmulatorState, FaultConfig,
            RejectRule, router,
        };

        fn request(method: &str, path: &str) -> Request<Body> {
            Request::builder()
                .method(method)
                .uri(path)
                .header("x-api-key", DEMO_API_KEY)
                .header("x-tenant-id", DEMO_WORKSPACE_ID)
                .header("content-type", "application/json")
                .body(Body::from(if method == "POST" { "{}" } else { "" }))
                .unwrap()
        }

        async fn send(state: &EmulatorState, method: &str, path: &str) -> Response {
            router(state.clone())
                .oneshot(request(method, path))
                .await
                .unwrap()
        }

        #[tokio::test]
        async fn every_request_is_logged_with_its_ids_except_admin_ones() {
            let state = EmulatorState::new(EmulatorConfig::default(), "http://emu");
            let id = Uuid::new_v4();
            let listener = Uuid::new_v4();
            let res = send(&state, "GET", &format!("/v2/deployments/{id}")).await;
            assert_eq!(res.status(), StatusCode::NOT_FOUND);
            send(&state, "GET", &format!("/api-host/v2/listeners/{listener}")).await;
            send(&state, "GET", "/_emulator/requests").await;
            send(&state, "GET", "/nowhere").await;
            let log = state.request_log();
            let entries = log["entries"].as_array().unwrap();
            assert_eq!(entries.len(), 3, "{log}");
            assert_eq!(entries[0]["route"], "GET /v2/deployments/{deployment_id}");
            assert_eq!(entries[0]["deployment_id"], id.to_string());
            assert_eq!(entries[0]["status"], "404");
            assert_eq!(
                entries[1]["route"],
                "GET /api-host/v2/listeners/{listener_id}"
            );
            assert_eq!(entries[1]["listener_id"], listener.to_string());
            assert_eq!(entries[1]["deployment_id"], Value::Null);
            assert_eq!(entries[1]["status"], "403");
            assert_eq!(entries[2]["route"], "GET <unmatched>");
            assert!(entries[0]["t_ms"].as_u64().is_some());
            assert_eq!(log["capacity"], REQUEST_LOG_CAPACITY);
            state.reset();
            assert_eq!(state.request_log()["entries"], json!([]));
        }

        #[tokio::test]
        async fn requests_during_a_rate_limit_retry_after_are_counted() {
            let state = EmulatorState::new(
                EmulatorConfig {
                    faults: FaultConfig {
                        rate_limit_per_second: Some(0.1),
                        rate_limit_burst: Some(1),
                        ..Default::default()
                    },
                    ..Default::default()
                },
                "http://emu",
            );
            assert_eq!(
                send(&state, "GET", "/v2/deployments").await.status(),
                StatusCode::OK
            );
            let limited = send(&state, "GET", "/v2/deployments").await;
            assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
            assert!(limited.headers().contains_key(header::RETRY_AFTER));
            assert_eq!(
                state.request_counts()["during_retry_after"],
                0,
                "the first 429 arrived before any Retry-After"
            );
            send(&state, "GET", "/v2/deployments").await;
            send(&state, "GET", "/api-host/v2/deployments").await;
            assert_eq!(state.request_counts()["during_retry_after"], 2);
            state.reset();
            send(&state, "GET", "/v2/deployments").await;
            assert_eq!(state.request_counts()["during_retry_after"], 0);
        }

        #[tokio::test]
        async fn injected_errors_with_retry_after_and_rejected_routes() {
            let state = EmulatorState::new(EmulatorConfig::default(), "http://emu");
            let redeploy = "POST /v2/deployments/{deployment_id}/revisions";
            state
                .set_faults(FaultConfig {
                    reject: vec![RejectRule {
                        route: redeploy.into(),
                        status: 409,
                        detail: Some("no redeploys".into()),
                        raw_body: None,
                    }],
                    ..Default::default()
                })
                .unwrap();
            let id = Uuid::new_v4();
            for prefix in ["", "/api-host"] {
                let path = format!("{prefix}/v2/deployments/{id}/revisions");
                let res = send(&state, "POST", &path).await;
                assert_eq!(res.status(), StatusCode::CONFLICT, "{path}");
            }
            assert_eq!(
                send(&state, "GET", &format!("/v2/deployments/{id}"))
                    .await
                    .status(),
                StatusCode::NOT_FOUND,
                "other routes are not rejected"
            );

            state
                .set_faults(FaultConfig {
                    error_rate: 1.0,
                    error_retry_after_seconds: Some(30),
                    ..Default::default()
                })
                .unwrap();
            let res = send(&state, "GET", "/v2/deployments").await;
            assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(res.headers()[header::RETRY_AFTER], "30");
            send(&state, "GET", "/v2/deployments").await;
            assert_eq!(state.request_counts()["during_retry_after"], 1);
        }
    }
}
