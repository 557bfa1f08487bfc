//! Shared state of a running emulator: configuration, store, scenario rules,
//! faults, request counts and log.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::watch;

use super::config::{EmulatorConfig, same_workspace};
use super::faults::{FaultConfig, RateLimiter};
use super::scenario::ScenarioRule;
use super::stats::{REQUEST_LOG_CAPACITY, RequestInfo, RequestStats};
use super::store::{Now, Store, rfc3339};
use control_plane_wire::types::{Listener, ListenerComputeConfig};

/// Locks a mutex, recovering the data if a previous holder panicked (the
/// emulator never answers 500 because of a poisoned lock).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The state behind [`super::router`]: cheap to clone (an `Arc`).
#[derive(Clone)]
pub struct EmulatorState {
    inner: Arc<Inner>,
}

struct Inner {
    config: EmulatorConfig,
    public_url: String,
    /// Seeded listeners with their workspace.
    listeners: Vec<(String, Listener)>,
    store: Mutex<Store>,
    scenarios: Mutex<Vec<ScenarioRule>>,
    faults: Mutex<FaultConfig>,
    limiter: Mutex<RateLimiter>,
    stats: Mutex<RequestStats>,
    shutdown: watch::Sender<bool>,
}

impl std::fmt::Debug for EmulatorState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmulatorState")
            .field("public_url", &self.inner.public_url)
            .finish_non_exhaustive()
    }
}

impl EmulatorState {
    /// Builds the state. `public_url` is the base of every service-chosen
    /// `custom_url` (`{public_url}/agents/{id}`), without a trailing slash;
    /// [`EmulatorConfig::public_url`] wins over it when set.
    pub fn new(config: EmulatorConfig, public_url: impl Into<String>) -> Self {
        let public_url = config
            .public_url
            .clone()
            .unwrap_or_else(|| public_url.into())
            .trim_end_matches('/')
            .to_owned();
        let created = rfc3339(Now::current().wall);
        let listeners = config
            .listeners
            .iter()
            .map(|l| {
                (
                    l.workspace_id.clone(),
                    Listener {
                        id: l.id.to_string(),
                        compute_type: "k8s".into(),
                        compute_id: l.compute_id.clone(),
                        compute_config: ListenerComputeConfig {
                            k8s_namespaces: l.k8s_namespaces.clone(),
                        },
                        version: None,
                        created_at: created.clone(),
                        updated_at: created.clone(),
                    },
                )
            })
            .collect();
        let (shutdown, _) = watch::channel(false);
        Self {
            inner: Arc::new(Inner {
                scenarios: Mutex::new(config.scenarios.clone()),
                faults: Mutex::new(config.faults.clone()),
                config,
                public_url,
                listeners,
                store: Mutex::new(Store::default()),
                limiter: Mutex::new(RateLimiter::default()),
                stats: Mutex::new(RequestStats::new(Instant::now(), REQUEST_LOG_CAPACITY)),
                shutdown,
            }),
        }
    }

    /// The configuration the emulator was started with.
    pub fn config(&self) -> &EmulatorConfig {
        &self.inner.config
    }

    /// Base URL of the built-in agent servers (no trailing slash).
    pub fn public_url(&self) -> &str {
        &self.inner.public_url
    }

    /// The current faults.
    pub fn faults(&self) -> FaultConfig {
        lock(&self.inner.faults).clone()
    }

    /// Replaces the faults. Errors: see [`FaultConfig::validate`].
    pub fn set_faults(&self, faults: FaultConfig) -> Result<(), String> {
        faults.validate()?;
        *lock(&self.inner.faults) = faults;
        lock(&self.inner.limiter).clear();
        Ok(())
    }

    /// The current scenario rules.
    pub fn scenarios(&self) -> Vec<ScenarioRule> {
        lock(&self.inner.scenarios).clone()
    }

    /// Replaces the scenario rules (they apply to revisions created later).
    pub fn set_scenarios(&self, rules: Vec<ScenarioRule>) {
        *lock(&self.inner.scenarios) = rules;
    }

    /// Forgets every deployment, request count, logged request and pending
    /// `Retry-After`, and restores the scenario rules and faults of the start
    /// configuration. Logged times stay relative to the emulator's start.
    pub fn reset(&self) {
        lock(&self.inner.store).clear();
        lock(&self.inner.stats).reset();
        lock(&self.inner.limiter).clear();
        *lock(&self.inner.scenarios) = self.inner.config.scenarios.clone();
        *lock(&self.inner.faults) = self.inner.config.faults.clone();
    }

    /// Request counts as served by `GET /_emulator/requests`:
    /// `{"total", "during_retry_after", "routes"}` (see [`super::stats`]).
    pub fn request_counts(&self) -> Value {
        lock(&self.inner.stats).to_json()
    }

    /// The request log as served by `GET /_emulator/requests/log`:
    /// `{"capacity", "dropped", "entries": [{"t_ms", "route",
    /// "deployment_id", "listener_id", "status"}]}`, oldest first, at most
    /// [`REQUEST_LOG_CAPACITY`] entries (see [`super::stats`]).
    pub fn request_log(&self) -> Value {
        lock(&self.inner.stats).log_json()
    }

    /// The store as served by `GET /_emulator/store`.
    pub fn dump(&self) -> Value {
        self.with_store(|s, now| s.dump(now))
    }

    /// Asks hung requests to finish and the server to stop.
    pub fn signal_shutdown(&self) {
        self.inner.shutdown.send_replace(true);
    }

    /// Resolves once [`EmulatorState::signal_shutdown`] was called.
    pub async fn shutdown_requested(&self) {
        let mut rx = self.inner.shutdown.subscribe();
        let _ = rx.wait_for(|stop| *stop).await;
    }

    /// Sleeps `d`, or less if shutdown is requested.
    pub(crate) async fn wait_or_shutdown(&self, d: Duration) {
        tokio::select! {
            _ = tokio::time::sleep(d) => {}
            _ = self.shutdown_requested() => {}
        }
    }

    /// Runs `f` on the store at the current moment, after removing
    /// deployments whose deletion is over.
    pub(crate) fn with_store<R>(&self, f: impl FnOnce(&mut Store, &Now) -> R) -> R {
        let now = Now::current();
        let mut store = lock(&self.inner.store);
        store.purge(&now, self.inner.config.delete_duration);
        f(&mut store, &now)
    }

    /// The seeded GitHub integrations of a workspace, with their GitHub
    /// installation ids (1000, 1001, ... in seeding order: an emulator
    /// choice).
    pub(crate) fn integrations_of(
        &self,
        workspace_id: &str,
    ) -> Vec<(u64, &super::config::IntegrationSeed)> {
        self.inner
            .config
            .integrations
            .iter()
            .zip(1000u64..)
            .filter(|(i, _)| same_workspace(&i.workspace_id, workspace_id))
            .map(|(i, n)| (n, i))
            .collect()
    }

    /// The listeners of a workspace.
    pub(crate) fn listeners_of(&self, workspace_id: &str) -> Vec<&Listener> {
        self.inner
            .listeners
            .iter()
            .filter(|(ws, _)| same_workspace(ws, workspace_id))
            .map(|(_, l)| l)
            .collect()
    }

    /// Counts and logs one request (see [`super::stats`]).
    pub(crate) fn record_request(&self, req: &RequestInfo, status: &str) {
        lock(&self.inner.stats).record(req, status);
    }

    /// Notes a request of `workspace` arriving at `at` (counted when a
    /// `Retry-After` sent to the workspace still runs).
    pub(crate) fn note_arrival(&self, workspace: &str, at: Instant) {
        lock(&self.inner.stats).arrival(workspace, at);
    }

    /// Notes a `Retry-After` sent to `workspace`, running until `until`.
    pub(crate) fn note_retry_after(&self, workspace: &str, until: Instant) {
        lock(&self.inner.stats).retry_after_sent(workspace, until);
    }

    /// Takes a rate-limit token of `workspace` (see [`RateLimiter::take`]).
    pub(crate) fn take_token(&self, workspace: &str, rps: f64, burst: f64) -> Result<(), Duration> {
        lock(&self.inner.limiter).take(workspace, rps, burst, Instant::now())
    }
}
