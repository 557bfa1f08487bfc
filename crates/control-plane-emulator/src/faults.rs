//! Fault injection on the control plane routes: latency with jitter, a rate
//! of 5xx answers (optionally with `Retry-After`), a per-workspace rate limit
//! answered 429 with `Retry-After`, throttled workspaces (every request of a
//! named workspace answered 429 with a fixed `Retry-After`, to test how a
//! client behaves through a long pause), dropped connections, hung requests,
//! and routes refused with a fixed status (to test how a client handles a
//! permanent refusal of, say, a redeploy).
//!
//! Those are decided before the handler runs, so nothing is stored. The
//! commit faults (`commit_drop_rate`, `commit_hang_rate`,
//! `commit_error_rate`) and `latency_after_ms` act on POST, PATCH and
//! DELETE *after* the handler: the create, change or delete is stored, and
//! then the answer is lost, held, or replaced by a 5xx, as when a service
//! commits and its answer never reaches the client (docs/control-plane-api.md
//! "Requests": the service gives no idempotency key, so a client must find
//! out by reading).
//!
//! An emulator feature: nothing is published about the control plane's
//! rate limits (docs/control-plane-api.md "Rate limits"), and a 429 or 503
//! may carry `Retry-After` ("Errors"). Off by default; set at start with flags or at run time
//! with `PUT /_emulator/faults`. Admin and agent server routes are never
//! faulted.
//!
//! The middleware's state is a `FaultInjector`: the faults in force with
//! their rate-limit buckets (`Faults`, this module's piece of the
//! emulator's state), the request counts (a hung request is counted when it
//! starts hanging) and the shutdown signal (which releases hung requests).

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{MatchedPath, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rand::Rng;
use serde::{Deserialize, Serialize};

use super::errors::ApiError;
use super::stats::{FaultMark, RequestInfo, Stats};
use super::sync::{Shutdown, lock};
use super::workspace::{Tenant, same_workspace};

/// Which faults to inject. JSON shape of `PUT /_emulator/faults`; every field
/// is optional there (missing fields take the defaults below).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FaultConfig {
    /// Fixed delay added to every control plane request, in milliseconds.
    pub latency_ms: u64,
    /// Extra random delay, uniform in `0..=jitter_ms` milliseconds.
    pub jitter_ms: u64,
    /// Fraction (0–1) of requests answered with `error_status`.
    pub error_rate: f64,
    /// Status of injected errors, 500–599. Default 503.
    pub error_status: u16,
    /// Requests per second allowed per workspace (token bucket); `None` = no
    /// limit. Excess requests get 429 with `Retry-After` in whole seconds.
    pub rate_limit_per_second: Option<f64>,
    /// Bucket size of the rate limit; `None` = one second's worth (at least 1).
    pub rate_limit_burst: Option<u32>,
    /// Fraction (0–1) of requests whose connection is closed without an answer.
    pub drop_rate: f64,
    /// Fraction (0–1) of requests that hang for `hang_ms` (or until shutdown),
    /// then get 504.
    pub hang_rate: f64,
    /// How long a hung request hangs, in milliseconds. Default 600 000 (10 min).
    pub hang_ms: u64,
    /// `Retry-After` (whole seconds) sent with the injected `error_status`
    /// answers; `None` (default) sends none.
    pub error_retry_after_seconds: Option<u64>,
    /// Routes refused every time, first match wins (after the rate limit and
    /// latency, before the random faults). Default none.
    pub reject: Vec<RejectRule>,
    /// `resource_spec` keys the emulator accepts on create and PATCH but does
    /// not store, as a service version that ignores a field would (pydantic
    /// drops keys it does not know). Default none.
    pub ignored_resource_spec_keys: Vec<String>,
    /// Deployment answers show every secret value as `****`, as a service
    /// that does not return secret values would (docs/control-plane-api.md "Deployment" list
    /// `secrets` as `[{name, value}]` without saying whether values come
    /// back). Default false: values are returned as stored.
    pub masked_secret_values: bool,
    /// Workspaces whose every control plane request is answered 429 with a
    /// fixed `Retry-After`, before the rate limit and latency; first match
    /// wins. Default none.
    pub throttled_workspaces: Vec<ThrottleRule>,
    /// Delay after the handler of a POST, PATCH or DELETE ran (its effect
    /// is stored) and before its answer is sent, in milliseconds. Default 0.
    pub latency_after_ms: u64,
    /// Fraction (0–1) of POST, PATCH and DELETE requests that are carried
    /// out and stored, then whose connection is closed without the answer
    /// (logged as `<status>, then dropped`).
    pub commit_drop_rate: f64,
    /// Fraction (0–1) of POST, PATCH and DELETE requests that are carried
    /// out and stored, then hang for `hang_ms` and get 504 (logged as
    /// `<status>, then hung` when they start hanging).
    pub commit_hang_rate: f64,
    /// Fraction (0–1) of POST, PATCH and DELETE requests that are carried
    /// out and stored, then answered `error_status` (with
    /// `error_retry_after_seconds`) instead of their answer (logged as
    /// `<status>, then <error_status>`).
    pub commit_error_rate: f64,
}

/// A workspace the emulator throttles: every control plane request of it is
/// answered 429 with `Retry-After: <retry_after_seconds>`, e.g.
/// `{"workspace": "00000000-0000-4000-8000-000000000001",
/// "retry_after_seconds": 30}`. On the command line:
/// `--throttle-workspace WORKSPACE:SECONDS` (see [`ThrottleRule::from_str`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThrottleRule {
    /// The workspace id, as authenticated (`X-Tenant-Id`); a uuid matches in
    /// any of its spellings (case, hyphens). Must not be empty.
    pub workspace: String,
    /// The `Retry-After` sent with each 429, in whole seconds (0 allowed).
    pub retry_after_seconds: u64,
    /// Requests of the workspace answered as usual after the rule was put
    /// in force, before the throttle begins (a service that answers once,
    /// then throttles). Default 0: throttled from the first request.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub after_requests: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl ThrottleRule {
    /// True when the rule names `workspace` (the authenticated workspace id).
    pub fn matches(&self, workspace: &str) -> bool {
        same_workspace(&self.workspace, workspace)
    }
}

impl FromStr for ThrottleRule {
    type Err = String;

    /// Parses `WORKSPACE:SECONDS` (split at the last `:`), e.g.
    /// `00000000-0000-4000-8000-000000000001:30`.
    ///
    /// Errors: no `:`, an empty workspace, or SECONDS not a whole number of
    /// seconds >= 0.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const SHAPE: &str = "expected WORKSPACE:SECONDS";
        let (workspace, secs) = s.rsplit_once(':').ok_or(SHAPE)?;
        let workspace = workspace.trim();
        if workspace.is_empty() {
            return Err(format!("{SHAPE}: the workspace is empty"));
        }
        let retry_after_seconds = secs
            .trim()
            .parse()
            .map_err(|e| format!("{SHAPE}: seconds {secs:?}: {e}"))?;
        Ok(Self {
            workspace: workspace.to_owned(),
            retry_after_seconds,
            after_requests: 0,
        })
    }
}

/// A route the emulator refuses with a fixed status, e.g. `{"route": "POST
/// /v2/deployments/{deployment_id}/revisions", "status": 400}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RejectRule {
    /// `"METHOD /route/{template}"` as counted by `GET /_emulator/requests`,
    /// without the `/api-host` prefix (it matches both the cloud and the
    /// self-hosted route).
    pub route: String,
    /// The status answered, 400-599.
    pub status: u16,
    /// The `detail` of the answer; default `Rejected by the emulator (fault
    /// injection).`.
    #[serde(default)]
    pub detail: Option<String>,
    /// The whole body of the answer, sent as `text/plain` instead of the JSON
    /// `{"detail": ...}`: an answer that is not the service's error shape
    /// (an HTML error page of a proxy, an internal service's text), to test
    /// that a client does not copy it into what it reports. Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_body: Option<String>,
}

impl Default for FaultConfig {
    fn default() -> Self {
        Self {
            latency_ms: 0,
            jitter_ms: 0,
            error_rate: 0.0,
            error_status: 503,
            rate_limit_per_second: None,
            rate_limit_burst: None,
            drop_rate: 0.0,
            hang_rate: 0.0,
            hang_ms: 600_000,
            error_retry_after_seconds: None,
            reject: Vec::new(),
            ignored_resource_spec_keys: Vec::new(),
            masked_secret_values: false,
            throttled_workspaces: Vec::new(),
            latency_after_ms: 0,
            commit_drop_rate: 0.0,
            commit_hang_rate: 0.0,
            commit_error_rate: 0.0,
        }
    }
}

impl FaultConfig {
    /// Checks the ranges: rates in 0–1, `error_status` in 500–599, a positive
    /// rate limit, rejection statuses in 400–599, throttled workspaces with a
    /// name. The error names the bad field.
    pub fn validate(&self) -> Result<(), String> {
        for (name, rate) in [
            ("error_rate", self.error_rate),
            ("drop_rate", self.drop_rate),
            ("hang_rate", self.hang_rate),
            ("commit_drop_rate", self.commit_drop_rate),
            ("commit_hang_rate", self.commit_hang_rate),
            ("commit_error_rate", self.commit_error_rate),
        ] {
            if !(0.0..=1.0).contains(&rate) {
                return Err(format!("{name} must be between 0 and 1, got {rate}"));
            }
        }
        if !(500..=599).contains(&self.error_status) {
            return Err(format!(
                "error_status must be 500-599, got {}",
                self.error_status
            ));
        }
        if let Some(rps) = self.rate_limit_per_second
            && !(rps > 0.0 && rps.is_finite())
        {
            return Err(format!("rate_limit_per_second must be > 0, got {rps}"));
        }
        for rule in &self.reject {
            if !(400..=599).contains(&rule.status) {
                return Err(format!(
                    "reject status must be 400-599, got {} for {:?}",
                    rule.status, rule.route
                ));
            }
        }
        if self
            .throttled_workspaces
            .iter()
            .any(|rule| rule.workspace.trim().is_empty())
        {
            return Err("throttled_workspaces: workspace must not be empty".to_owned());
        }
        Ok(())
    }

    /// True when no fault is configured (the middleware then does nothing).
    pub fn is_off(&self) -> bool {
        self.latency_ms == 0
            && self.jitter_ms == 0
            && self.error_rate <= 0.0
            && self.rate_limit_per_second.is_none()
            && self.drop_rate <= 0.0
            && self.hang_rate <= 0.0
            && self.reject.is_empty()
            && self.throttled_workspaces.is_empty()
            && self.latency_after_ms == 0
            && self.commit_drop_rate <= 0.0
            && self.commit_hang_rate <= 0.0
            && self.commit_error_rate <= 0.0
    }

    /// The commit fault for one POST, PATCH or DELETE from three uniform
    /// rolls in `[0, 1)`: drop, then hang, then error.
    pub(crate) fn decide_commit(&self, rolls: [f64; 3]) -> Option<Fault> {
        if rolls[0] < self.commit_drop_rate {
            Some(Fault::Drop)
        } else if rolls[1] < self.commit_hang_rate {
            Some(Fault::Hang)
        } else if rolls[2] < self.commit_error_rate {
            Some(Fault::Error)
        } else {
            None
        }
    }

    /// The rule throttling `workspace` (the authenticated workspace id), if
    /// any.
    pub fn throttle(&self, workspace: &str) -> Option<&ThrottleRule> {
        self.throttled_workspaces
            .iter()
            .find(|rule| rule.matches(workspace))
    }

    /// The rule refusing `route` (`"METHOD /route/{template}"`, without the
    /// `/api-host` prefix), if any.
    pub fn rejection(&self, route: &str) -> Option<&RejectRule> {
        self.reject.iter().find(|r| r.route == route)
    }
}

/// A fault chosen for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    Drop,
    Hang,
    Error,
}

/// Picks the fault for one request from three uniform rolls in `[0, 1)`:
/// drop, then hang, then error.
pub(crate) fn decide(cfg: &FaultConfig, rolls: [f64; 3]) -> Option<Fault> {
    if rolls[0] < cfg.drop_rate {
        Some(Fault::Drop)
    } else if rolls[1] < cfg.hang_rate {
        Some(Fault::Hang)
    } else if rolls[2] < cfg.error_rate {
        Some(Fault::Error)
    } else {
        None
    }
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

/// Token buckets, one per workspace.
#[derive(Debug, Default)]
pub(crate) struct RateLimiter {
    buckets: HashMap<String, Bucket>,
}

impl RateLimiter {
    /// Takes one token from `key`'s bucket (`rps` tokens per second, at most
    /// `burst`); `Err` carries the wait until a token is available. A
    /// non-positive or non-finite `rps` means no limit.
    pub fn take(&mut self, key: &str, rps: f64, burst: f64, now: Instant) -> Result<(), Duration> {
        if !(rps > 0.0 && rps.is_finite()) {
            return Ok(());
        }
        let burst = if burst.is_finite() {
            burst.max(1.0)
        } else {
            1.0
        };
        let b = self.buckets.entry(key.to_owned()).or_insert(Bucket {
            tokens: burst,
            last: now,
        });
        let refill = now.saturating_duration_since(b.last).as_secs_f64() * rps;
        b.tokens = (b.tokens + refill).min(burst);
        b.last = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::try_from_secs_f64((1.0 - b.tokens) / rps)
                .unwrap_or(Duration::from_secs(1)))
        }
    }

    /// Forgets every bucket.
    pub fn clear(&mut self) {
        self.buckets.clear();
    }
}

/// The faults in force and the rate-limit buckets of one emulator, shared
/// (cheap to clone) by the fault middleware, the admin routes and the
/// emulator's state.
#[derive(Clone, Debug)]
pub(crate) struct Faults(Arc<FaultsInner>);

#[derive(Debug)]
struct FaultsInner {
    config: Mutex<FaultConfig>,
    limiter: Mutex<RateLimiter>,
    /// Requests each throttled workspace was answered since its rule was
    /// put in force ([`ThrottleRule::after_requests`]).
    answered_before_throttle: Mutex<HashMap<String, u64>>,
}

impl Faults {
    /// `config` in force, every bucket full. `config` is not validated here
    /// (see [`FaultConfig::validate`]).
    pub fn new(config: FaultConfig) -> Self {
        Self(Arc::new(FaultsInner {
            config: Mutex::new(config),
            limiter: Mutex::new(RateLimiter::default()),
            answered_before_throttle: Mutex::new(HashMap::new()),
        }))
    }

    /// The faults in force.
    pub fn current(&self) -> FaultConfig {
        lock(&self.0.config).clone()
    }

    /// Puts `config` in force and refills every bucket, without checking it.
    pub fn replace(&self, config: FaultConfig) {
        *lock(&self.0.config) = config;
        lock(&self.0.limiter).clear();
        lock(&self.0.answered_before_throttle).clear();
    }

    /// True when `rule` throttles this request of `workspace`: once
    /// `rule.after_requests` of its requests were let through (this one
    /// counted when it is let through).
    pub fn throttles(&self, rule: &ThrottleRule, workspace: &str) -> bool {
        if rule.after_requests == 0 {
            return true;
        }
        let mut answered = lock(&self.0.answered_before_throttle);
        let n = answered.entry(workspace.to_owned()).or_default();
        if *n >= rule.after_requests {
            return true;
        }
        *n += 1;
        false
    }

    /// Refills every bucket (forgets the pending rate-limit waits).
    pub fn clear_limits(&self) {
        lock(&self.0.limiter).clear();
    }

    /// Takes a rate-limit token of `workspace` (see [`RateLimiter::take`]).
    pub fn take_token(&self, workspace: &str, rps: f64, burst: f64) -> Result<(), Duration> {
        lock(&self.0.limiter).take(workspace, rps, burst, Instant::now())
    }
}

/// The state of the fault middleware: the faults, where a hung request is
/// counted, and the signal that releases hung requests.
#[derive(Clone, Debug)]
pub(crate) struct FaultInjector {
    /// The faults in force and the rate-limit buckets.
    pub faults: Faults,
    /// The request counts and log.
    pub stats: Stats,
    /// The emulator's shutdown signal.
    pub shutdown: Shutdown,
}

/// A response whose body fails at once: hyper then closes the connection
/// before the buffered head is flushed, so the client sees a dropped
/// connection.
fn dropped_response() -> Response {
    let stream = futures::stream::once(async {
        Err::<Bytes, std::io::Error>(std::io::Error::other("injected fault: connection dropped"))
    });
    let mut res = Body::from_stream(stream).into_response();
    res.extensions_mut().insert(FaultMark::Dropped);
    res
}

/// The injected `error_status` answer (with `error_retry_after_seconds`).
fn injected_error(cfg: &FaultConfig) -> Response {
    let error = ApiError::new(
        StatusCode::from_u16(cfg.error_status)
            .ok()
            .filter(StatusCode::is_server_error)
            .unwrap_or(StatusCode::SERVICE_UNAVAILABLE),
        "Injected fault: the control plane is unavailable.",
    );
    match cfg.error_retry_after_seconds {
        Some(secs) => error.with_retry_after(secs),
        None => error,
    }
    .into_response()
}

/// Hangs for `hang_ms` (or until shutdown), then answers 504; the request
/// is logged as `status` when it starts hanging.
async fn hang(
    injector: &FaultInjector,
    cfg: &FaultConfig,
    info: &RequestInfo,
    status: &str,
) -> Response {
    injector.stats.record(info, status);
    injector
        .shutdown
        .sleep(Duration::from_millis(cfg.hang_ms))
        .await;
    let mut res = ApiError::new(
        StatusCode::GATEWAY_TIMEOUT,
        format!("Injected fault: the request hung for {} ms.", cfg.hang_ms),
    )
    .into_response();
    res.extensions_mut().insert(FaultMark::Counted);
    res
}

/// Runs the handler of a POST, PATCH or DELETE (its effect is stored), waits
/// `latency_after_ms`, then loses the answer as `commit` says, if at all.
async fn run_then_fault(
    injector: &FaultInjector,
    cfg: &FaultConfig,
    info: RequestInfo,
    commit: Option<Fault>,
    req: Request,
    next: Next,
) -> Response {
    let res = next.run(req).await;
    if cfg.latency_after_ms > 0 {
        tokio::time::sleep(Duration::from_millis(cfg.latency_after_ms)).await;
    }
    let committed = res.status().as_u16();
    let mut faulted = match commit {
        None => return res,
        Some(Fault::Drop) => dropped_response(),
        Some(Fault::Hang) => {
            return hang(injector, cfg, &info, &format!("{committed}, then hung")).await;
        }
        Some(Fault::Error) => injected_error(cfg),
    };
    let logged = match commit {
        Some(Fault::Drop) => format!("{committed}, then dropped"),
        _ => format!("{committed}, then {}", faulted.status().as_u16()),
    };
    faulted.extensions_mut().insert(FaultMark::As(logged));
    faulted
}

/// Middleware on the control plane routes (after authentication, so the
/// workspace is known).
pub(crate) async fn inject_faults(
    State(injector): State<FaultInjector>,
    req: Request,
    next: Next,
) -> Response {
    let cfg = injector.faults.current();
    if cfg.is_off() {
        return next.run(req).await;
    }
    let workspace = req
        .extensions()
        .get::<Tenant>()
        .map(|t| t.0.clone())
        .unwrap_or_default();
    if let Some(res) = throttled(&injector, &cfg, &workspace) {
        return res;
    }
    let (jitter, rolls) = roll(&cfg);
    let delay = Duration::from_millis(cfg.latency_ms.saturating_add(jitter));
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let info = req.extensions().get::<RequestInfo>().cloned();
    if let Some(res) = info.as_ref().and_then(|i| rejected(&cfg, i)) {
        return res;
    }
    let info = info.unwrap_or_else(|| unlogged_info(&req));
    match decide(&cfg, rolls) {
        None => run_unfaulted(&injector, &cfg, info, req, next).await,
        Some(Fault::Drop) => dropped_response(),
        Some(Fault::Error) => injected_error(&cfg),
        Some(Fault::Hang) => hang(&injector, &cfg, &info, "hung").await,
    }
}

/// The 429 of a request the workspace's throttle rule refuses, or that
/// exceeds the workspace's token bucket (`rate_limit_per_second`), with its
/// Retry-After; `None` when neither refuses it.
///
/// Counted and logged as a 429 by the stats middleware, which also notes
/// the Retry-After (requests sent before it ends are `during_retry_after`).
fn throttled(injector: &FaultInjector, cfg: &FaultConfig, workspace: &str) -> Option<Response> {
    if let Some(rule) = cfg.throttle(workspace)
        && injector.faults.throttles(rule, workspace)
    {
        let secs = rule.retry_after_seconds;
        return Some(
            ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "Rate limit exceeded for workspace {workspace}. Retry after {secs} seconds."
                ),
            )
            .with_retry_after(secs)
            .into_response(),
        );
    }
    let rps = cfg.rate_limit_per_second?;
    let burst = cfg.rate_limit_burst.map(f64::from).unwrap_or(rps);
    let wait = injector.faults.take_token(workspace, rps, burst).err()?;
    let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
    Some(
        ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!("Rate limit exceeded for workspace {workspace}. Retry after {secs} seconds."),
        )
        .with_retry_after(secs)
        .into_response(),
    )
}

/// The random draws of one request: its jitter in milliseconds (uniform in
/// `0..=jitter_ms`, drawn only when that is not 0), then the three rolls
/// of [`decide`].
fn roll(cfg: &FaultConfig) -> (u64, [f64; 3]) {
    let mut rng = rand::rng();
    let jitter = if cfg.jitter_ms > 0 {
        rng.random_range(0..=cfg.jitter_ms)
    } else {
        0
    };
    (
        jitter,
        [
            rng.random::<f64>(),
            rng.random::<f64>(),
            rng.random::<f64>(),
        ],
    )
}

/// The answer of a reject rule on the request's route, if one matches: the
/// rule's status with its raw text body, else with its detail (or a
/// default one) as an API error.
fn rejected(cfg: &FaultConfig, info: &RequestInfo) -> Option<Response> {
    let rule = cfg.rejection(&info.cloud_route())?.clone();
    let status = StatusCode::from_u16(rule.status).unwrap_or(StatusCode::BAD_REQUEST);
    if let Some(body) = rule.raw_body {
        return Some(
            (
                status,
                [(
                    axum::http::header::CONTENT_TYPE,
                    "text/plain; charset=utf-8",
                )],
                body,
            )
                .into_response(),
        );
    }
    Some(
        ApiError::new(
            StatusCode::from_u16(rule.status).unwrap_or(StatusCode::BAD_REQUEST),
            rule.detail
                .unwrap_or_else(|| "Rejected by the emulator (fault injection).".to_owned()),
        )
        .into_response(),
    )
}

/// What a request the stats middleware did not describe is logged as: its
/// method and matched route (`<unmatched>` when none).
fn unlogged_info(req: &Request) -> RequestInfo {
    RequestInfo {
        at: Instant::now(),
        route: format!(
            "{} {}",
            req.method(),
            req.extensions()
                .get::<MatchedPath>()
                .map(|m| m.as_str())
                .unwrap_or("<unmatched>")
        ),
        deployment_id: None,
        listener_id: None,
        workspace: None,
    }
}

/// A request the faults spared: a read runs as is; a POST, PATCH or DELETE
/// runs, then may still lose its answer ([`FaultConfig::decide_commit`],
/// [`run_then_fault`]).
async fn run_unfaulted(
    injector: &FaultInjector,
    cfg: &FaultConfig,
    info: RequestInfo,
    req: Request,
    next: Next,
) -> Response {
    let mutation = matches!(
        *req.method(),
        axum::http::Method::POST | axum::http::Method::PATCH | axum::http::Method::DELETE
    );
    if !mutation {
        return next.run(req).await;
    }
    let commit = {
        let mut rng = rand::rng();
        cfg.decide_commit([
            rng.random::<f64>(),
            rng.random::<f64>(),
            rng.random::<f64>(),
        ])
    };
    run_then_fault(injector, cfg, info, commit, req, next).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_off_and_valid() {
        let f = FaultConfig::default();
        assert!(f.is_off());
        assert!(f.validate().is_ok());
        assert_eq!(decide(&f, [0.0, 0.0, 0.0]), None);
    }

    #[test]
    fn validation_names_the_field() {
        let f = FaultConfig {
            drop_rate: 1.5,
            ..Default::default()
        };
        assert!(f.validate().unwrap_err().contains("drop_rate"));
        let f = FaultConfig {
            error_status: 404,
            ..Default::default()
        };
        assert!(f.validate().unwrap_err().contains("error_status"));
        let f = FaultConfig {
            rate_limit_per_second: Some(0.0),
            ..Default::default()
        };
        assert!(f.validate().is_err());
    }

    #[test]
    fn reject_rules_match_routes_and_are_validated() {
        let redeploy = "POST /v2/deployments/{deployment_id}/revisions";
        let f: FaultConfig = serde_json::from_value(serde_json::json!({
            "reject": [{"route": redeploy, "status": 400, "detail": "no"}],
            "error_retry_after_seconds": 3
        }))
        .unwrap();
        assert!(!f.is_off());
        assert!(f.validate().is_ok());
        assert_eq!(f.rejection(redeploy).map(|r| r.status), Some(400));
        assert_eq!(f.rejection("GET /v2/deployments"), None);
        assert_eq!(f.error_retry_after_seconds, Some(3));
        let f = FaultConfig {
            reject: vec![RejectRule {
                route: redeploy.into(),
                status: 302,
                detail: None,
                raw_body: None,
            }],
            ..Default::default()
        };
        assert!(f.validate().unwrap_err().contains("reject status"));
    }

    #[test]
    fn decide_uses_the_rates() {
        let f = FaultConfig {
            error_rate: 0.5,
            drop_rate: 0.1,
            ..Default::default()
        };
        assert!(!f.is_off());
        assert_eq!(decide(&f, [0.05, 0.9, 0.9]), Some(Fault::Drop));
        assert_eq!(decide(&f, [0.5, 0.9, 0.4]), Some(Fault::Error));
        assert_eq!(decide(&f, [0.5, 0.9, 0.6]), None);
    }

    #[test]
    fn throttle_rules_parse_match_and_are_validated() {
        let ws = "7B6A3C1E-5D4F-4A2B-8C9D-0E1F2A3B4C5D";
        let rule: ThrottleRule = format!("{ws}:30").parse().unwrap();
        assert_eq!(rule.workspace, ws);
        assert_eq!(rule.retry_after_seconds, 30);
        assert!(
            rule.matches("7b6a3c1e5d4f4a2b8c9d0e1f2a3b4c5d"),
            "any uuid spelling"
        );
        assert!(!rule.matches("ws-other"));
        for bad in ["ws-1", ":30", "ws-1:", "ws-1:-1", "ws-1:1.5"] {
            assert!(bad.parse::<ThrottleRule>().is_err(), "{bad}");
        }
        let f: FaultConfig = serde_json::from_value(serde_json::json!({
            "throttled_workspaces": [{"workspace": "ws-1", "retry_after_seconds": 7}]
        }))
        .unwrap();
        assert!(!f.is_off(), "a throttled workspace is a fault");
        assert!(f.validate().is_ok());
        assert_eq!(f.throttle("ws-1").map(|r| r.retry_after_seconds), Some(7));
        assert_eq!(f.throttle("ws-2"), None);
        assert!(
            serde_json::from_value::<FaultConfig>(serde_json::json!({
                "throttled_workspaces": [{"workspace": "ws-1", "retry_after_seconds": 7, "x": 1}]
            }))
            .is_err(),
            "unknown fields are refused"
        );
        let f = FaultConfig {
            throttled_workspaces: vec![ThrottleRule {
                after_requests: 0,
                workspace: " ".into(),
                retry_after_seconds: 1,
            }],
            ..Default::default()
        };
        assert!(f.validate().unwrap_err().contains("throttled_workspaces"));
    }

    #[test]
    fn token_bucket_limits_and_refills() {
        let mut rl = RateLimiter::default();
        let t0 = Instant::now();
        assert!(rl.take("w", 2.0, 2.0, t0).is_ok());
        assert!(rl.take("w", 2.0, 2.0, t0).is_ok());
        let wait = rl.take("w", 2.0, 2.0, t0).unwrap_err();
        assert_eq!(wait, Duration::from_millis(500));
        assert!(
            rl.take("other", 2.0, 2.0, t0).is_ok(),
            "buckets are per workspace"
        );
        assert!(
            rl.take("w", 2.0, 2.0, t0 + Duration::from_millis(500))
                .is_ok()
        );
    }

    mod over_http {
        use axum::body::{Body, to_bytes};
        use axum::http::{Request, header};
        use tower::ServiceExt;

        use super::*;
        use crate::{ApiKey, EmulatorConfig, EmulatorState, router};

        const THROTTLED: &str = "7b6a3c1e-5d4f-4a2b-8c9d-0e1f2a3b4c5d";
        const OTHER: &str = "00000000-0000-4000-8000-0000000000aa";

        fn state(faults: FaultConfig) -> EmulatorState {
            EmulatorState::new(
                EmulatorConfig {
                    api_keys: vec![ApiKey::new("k1", THROTTLED), ApiKey::new("k2", OTHER)],
                    faults,
                    ..Default::default()
                },
                "http://emu",
            )
        }

        async fn get(state: &EmulatorState, key: &str, workspace: &str, path: &str) -> Response {
            let req = Request::builder()
                .uri(path)
                .header("x-api-key", key)
                .header("x-tenant-id", workspace)
                .body(Body::empty())
                .unwrap();
            router(state.clone()).oneshot(req).await.unwrap()
        }

        #[tokio::test]
        async fn a_throttled_workspace_gets_429_with_retry_after_and_others_do_not() {
            let state = state(FaultConfig {
                throttled_workspaces: vec![ThrottleRule {
                    // Upper case: matched as the same uuid.
                    workspace: THROTTLED.to_uppercase(),
                    retry_after_seconds: 30,
                    after_requests: 0,
                }],
                // Never reached for the throttled workspace (checked first);
                // the other workspace stays under it.
                rate_limit_per_second: Some(100.0),
                ..Default::default()
            });
            for path in ["/v2/deployments", "/api-host/v2/deployments"] {
                let res = get(&state, "k1", THROTTLED, path).await;
                assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS, "{path}");
                assert_eq!(res.headers()[header::RETRY_AFTER], "30", "{path}");
                let body = to_bytes(res.into_body(), 1 << 16).await.unwrap();
                let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
                assert_eq!(
                    body["detail"],
                    format!(
                        "Rate limit exceeded for workspace {THROTTLED}. Retry after 30 seconds."
                    )
                );
            }
            let res = get(&state, "k2", OTHER, "/v2/deployments").await;
            assert_eq!(res.status(), StatusCode::OK, "another workspace");
            assert!(!res.headers().contains_key(header::RETRY_AFTER));

            // Counted and logged like the rate limiter's 429s; the second
            // request came during the first one's Retry-After.
            let counts = state.request_counts();
            assert_eq!(
                counts["routes"]["GET /v2/deployments"]["429"], 1,
                "{counts}"
            );
            assert_eq!(
                counts["routes"]["GET /v2/deployments"]["200"], 1,
                "{counts}"
            );
            assert_eq!(counts["routes"]["GET /api-host/v2/deployments"]["429"], 1);
            assert_eq!(counts["during_retry_after"], 1, "{counts}");
            let log = state.request_log();
            let statuses: Vec<&str> = log["entries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["status"].as_str().unwrap())
                .collect();
            assert_eq!(statuses, ["429", "429", "200"]);

            // Lifting the throttle at run time lets the workspace through.
            state.set_faults(FaultConfig::default()).unwrap();
            let res = get(&state, "k1", THROTTLED, "/v2/deployments").await;
            assert_eq!(res.status(), StatusCode::OK);
        }

        #[tokio::test]
        async fn a_throttle_after_requests_answers_them_then_throttles() {
            let rule = ThrottleRule {
                workspace: THROTTLED.into(),
                retry_after_seconds: 30,
                after_requests: 2,
            };
            let state = state(FaultConfig {
                throttled_workspaces: vec![rule.clone()],
                ..Default::default()
            });
            let mut statuses = vec![];
            for _ in 0..4 {
                statuses.push(
                    get(&state, "k1", THROTTLED, "/v2/deployments")
                        .await
                        .status(),
                );
            }
            assert_eq!(
                statuses,
                [
                    StatusCode::OK,
                    StatusCode::OK,
                    StatusCode::TOO_MANY_REQUESTS,
                    StatusCode::TOO_MANY_REQUESTS
                ]
            );
            // Put in force again: the count starts again.
            state
                .set_faults(FaultConfig {
                    throttled_workspaces: vec![rule],
                    ..Default::default()
                })
                .unwrap();
            let res = get(&state, "k1", THROTTLED, "/v2/deployments").await;
            assert_eq!(res.status(), StatusCode::OK);
            // The JSON form: the field is optional.
            let parsed: ThrottleRule =
                serde_json::from_str(r#"{"workspace": "w", "retry_after_seconds": 1}"#).unwrap();
            assert_eq!(parsed.after_requests, 0);
        }

        async fn send(
            state: &EmulatorState,
            method: &str,
            path: &str,
            body: Option<serde_json::Value>,
        ) -> Response {
            let req = Request::builder()
                .method(method)
                .uri(path)
                .header("x-api-key", "k1")
                .header("x-tenant-id", THROTTLED)
                .header(header::CONTENT_TYPE, "application/json")
                .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
                .unwrap();
            router(state.clone()).oneshot(req).await.unwrap()
        }

        fn create_body(name: &str) -> serde_json::Value {
            serde_json::json!({
                "name": name,
                "source": "github",
                "source_config": {
                    "integration_id": "7d8b2f5e-3c1a-4e2b-9f6d-2a1b3c4d5e6f",
                    "repo_url": "https://github.com/acme/support-agent",
                    "deployment_type": "dev",
                    "build_on_push": false
                },
                "source_revision_config": {"repo_ref": "main", "langgraph_config_path": "langgraph.json"},
                "secrets": []
            })
        }

        async fn names(state: &EmulatorState) -> Vec<String> {
            let res = send(state, "GET", "/v2/deployments", None).await;
            assert_eq!(res.status(), StatusCode::OK);
            let body = to_bytes(res.into_body(), 1 << 20).await.unwrap();
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
            body["resources"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d["name"].as_str().unwrap().to_owned())
                .collect()
        }

        fn statuses(state: &EmulatorState) -> Vec<String> {
            state.request_log()["entries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["status"].as_str().unwrap().to_owned())
                .collect()
        }

        /// Sets `faults`, then POSTs the create of a deployment `name`.
        async fn create_under(state: &EmulatorState, faults: FaultConfig, name: &str) -> Response {
            state.set_faults(faults).unwrap();
            send(state, "POST", "/v2/deployments", Some(create_body(name))).await
        }

        /// The commit faults store first and lose the answer after, unlike
        /// the faults decided before the handler, which store nothing.
        #[tokio::test]
        async fn commit_faults_store_the_create_and_lose_its_answer() {
            let state = state(FaultConfig {
                commit_error_rate: 1.0,
                error_status: 502,
                ..Default::default()
            });
            let res = send(
                &state,
                "POST",
                "/v2/deployments",
                Some(create_body("errored")),
            )
            .await;
            assert_eq!(res.status(), StatusCode::BAD_GATEWAY);

            let drop = FaultConfig {
                commit_drop_rate: 1.0,
                ..Default::default()
            };
            let res = create_under(&state, drop, "dropped").await;
            assert!(
                to_bytes(res.into_body(), 1 << 16).await.is_err(),
                "the connection is closed without an answer"
            );

            let hang = FaultConfig {
                commit_hang_rate: 1.0,
                hang_ms: 50,
                ..Default::default()
            };
            let res = create_under(&state, hang, "hung").await;
            assert_eq!(res.status(), StatusCode::GATEWAY_TIMEOUT);
            // GETs are never commit-faulted.
            let mut stored = names(&state).await;
            stored.sort();
            assert_eq!(stored, ["dropped", "errored", "hung"]);

            // Decided before the handler: nothing stored.
            let error = FaultConfig {
                error_rate: 1.0,
                ..Default::default()
            };
            let res = create_under(&state, error, "refused").await;
            assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
            state.set_faults(FaultConfig::default()).unwrap();
            assert_eq!(names(&state).await.len(), 3);

            assert_eq!(
                statuses(&state),
                [
                    "201, then 502",
                    "201, then dropped",
                    "201, then hung",
                    "200",
                    "503",
                    "200"
                ]
            );
        }

        /// `latency_after_ms` holds the answer of a mutation after it is
        /// stored: a client that gives up meanwhile has created it anyway.
        #[tokio::test]
        async fn latency_after_holds_a_stored_answer() {
            let state = state(FaultConfig {
                latency_after_ms: 300,
                ..Default::default()
            });
            let started = Instant::now();
            let pending = tokio::spawn({
                let state = state.clone();
                async move { send(&state, "POST", "/v2/deployments", Some(create_body("slow"))).await }
            });
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert_eq!(names(&state).await, ["slow"], "stored before the answer");
            assert!(!pending.is_finished());
            assert_eq!(pending.await.unwrap().status(), StatusCode::CREATED);
            assert!(started.elapsed() >= Duration::from_millis(300));
        }

        #[tokio::test]
        async fn an_empty_throttled_workspace_is_refused() {
            let state = state(FaultConfig::default());
            let err = state
                .set_faults(FaultConfig {
                    throttled_workspaces: vec![ThrottleRule {
                        workspace: String::new(),
                        retry_after_seconds: 5,
                        after_requests: 0,
                    }],
                    ..Default::default()
                })
                .unwrap_err();
            assert!(err.contains("throttled_workspaces"), "{err}");
            assert!(state.faults().is_off(), "the faults are unchanged");
        }
    }
}
