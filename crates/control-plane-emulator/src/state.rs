//! Shared state of a running emulator: configuration, store, scenario rules,
//! faults, request counts and log.
//!
//! [`EmulatorState`] composes the pieces, each owned by the module that
//! uses it: the fault middleware's `Faults` (in `faults`), the counting
//! middleware's `Stats` (in `stats`), the shutdown signal (in `sync`), and
//! the start configuration the authentication middleware reads. A middleware
//! takes only its piece (see [`super::router`]), so none of them imports
//! this module.

use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::config::EmulatorConfig;
use super::faults::{FaultConfig, FaultInjector, Faults};
use super::scenario::ScenarioRule;
use super::stats::Stats;
use super::store::{Now, Store, rfc3339};
use super::sync::{Shutdown, lock};
use super::workspace::same_workspace;
use control_plane_wire::types::{Listener, ListenerComputeConfig};

/// The state behind [`super::router`]: cheap to clone (an `Arc`).
#[derive(Clone)]
pub struct EmulatorState {
    inner: Arc<Inner>,
}

struct Inner {
    config: Arc<EmulatorConfig>,
    public_url: String,
    /// Seeded listeners with their workspace.
    listeners: Vec<(String, Listener)>,
    store: Mutex<Store>,
    /// The commit each (repository URL, ref) of a `github` source points at:
    /// what a revision built from it records as `repo_commit_sha`.
    heads: Mutex<std::collections::HashMap<(String, String), String>>,
    /// Assistants created on the built-in agent servers, by deployment.
    assistants: Mutex<crate::agent_store::Assistants>,
    /// Crons created on the built-in agent servers, by deployment.
    crons: Mutex<crate::agent_store::Crons>,
    /// LangSmith datasets and their examples, by workspace.
    datasets: Mutex<crate::dataset_store::Datasets>,
    scenarios: Mutex<Vec<ScenarioRule>>,
    faults: Faults,
    stats: Stats,
    shutdown: Shutdown,
    /// API keys revoked at run time ([`EmulatorState::revoke_api_key`]).
    revoked_keys: Arc<Mutex<std::collections::HashSet<String>>>,
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
        Self {
            inner: Arc::new(Inner {
                scenarios: Mutex::new(config.scenarios.clone()),
                faults: Faults::new(config.faults.clone()),
                config: Arc::new(config),
                public_url,
                listeners,
                store: Mutex::new(Store::default()),
                revoked_keys: Arc::new(Mutex::new(std::collections::HashSet::new())),
                heads: Mutex::new(std::collections::HashMap::new()),
                assistants: Mutex::new(Default::default()),
                crons: Mutex::new(Default::default()),
                datasets: Mutex::new(Default::default()),
                stats: Stats::default(),
                shutdown: Shutdown::new(),
            }),
        }
    }

    /// Runs `f` on the assistants of the built-in agent servers.
    pub(crate) fn with_assistants<T>(
        &self,
        f: impl FnOnce(&mut crate::agent_store::Assistants) -> T,
    ) -> T {
        f(&mut self
            .inner
            .assistants
            .lock()
            .unwrap_or_else(|p| p.into_inner()))
    }

    /// Runs `f` on the LangSmith datasets of every workspace.
    pub(crate) fn with_datasets<T>(
        &self,
        f: impl FnOnce(&mut crate::dataset_store::Datasets) -> T,
    ) -> T {
        f(&mut lock(&self.inner.datasets))
    }

    /// Runs `f` on the crons of the built-in agent servers.
    pub(crate) fn with_crons<T>(&self, f: impl FnOnce(&mut crate::agent_store::Crons) -> T) -> T {
        f(&mut self.inner.crons.lock().unwrap_or_else(|p| p.into_inner()))
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
        self.inner.faults.current()
    }

    /// Replaces the faults. Errors: see [`FaultConfig::validate`].
    pub fn set_faults(&self, faults: FaultConfig) -> Result<(), String> {
        faults.validate()?;
        self.inner.faults.replace(faults);
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
        lock(&self.inner.heads).clear();
        self.inner.stats.reset();
        self.inner.faults.clear_limits();
        *lock(&self.inner.scenarios) = self.inner.config.scenarios.clone();
        self.inner.faults.replace(self.inner.config.faults.clone());
        lock(&self.inner.revoked_keys).clear();
    }

    /// The commit `repo_ref` of `repo_url` points at: a fresh fake sha the
    /// first time it is asked for, then the same until [`Self::push`] moves it
    /// (an emulator model of a Git remote; docs/control-plane-api.md
    /// "Revision": `repo_commit_sha` is set by the service).
    pub fn head(&self, repo_url: &str, repo_ref: &str) -> String {
        lock(&self.inner.heads)
            .entry((repo_url.to_owned(), repo_ref.to_owned()))
            .or_insert_with(crate::store::fake_commit_sha)
            .clone()
    }

    /// Moves `repo_ref` of `repo_url` to a new commit (as a push would) and
    /// returns it; revisions built afterwards record it.
    pub fn push(&self, repo_url: &str, repo_ref: &str) -> String {
        let sha = crate::store::fake_commit_sha();
        lock(&self.inner.heads).insert((repo_url.to_owned(), repo_ref.to_owned()), sha.clone());
        sha
    }

    /// Request counts as served by `GET /_emulator/requests`:
    /// `{"total", "during_retry_after", "routes"}` (see [`super::stats`]).
    pub fn request_counts(&self) -> Value {
        self.inner.stats.to_json()
    }

    /// The request log as served by `GET /_emulator/requests/log`:
    /// `{"capacity", "dropped", "entries": [{"t_ms", "route",
    /// "deployment_id", "listener_id", "status"}]}`, oldest first, at most
    /// [`super::stats::REQUEST_LOG_CAPACITY`] entries (see [`super::stats`]).
    pub fn request_log(&self) -> Value {
        self.inner.stats.log_json()
    }

    /// The store as served by `GET /_emulator/store`.
    pub fn dump(&self) -> Value {
        self.with_store(|s, now| s.dump(now))
    }

    /// Asks hung requests to finish and the server to stop.
    pub fn signal_shutdown(&self) {
        self.inner.shutdown.raise();
    }

    /// Resolves once [`EmulatorState::signal_shutdown`] was called.
    pub async fn shutdown_requested(&self) {
        self.inner.shutdown.raised().await;
    }

    /// The authentication middleware's piece: the start configuration and
    /// the revoked keys.
    pub(crate) fn auth(&self) -> crate::auth::Auth {
        crate::auth::Auth {
            config: self.inner.config.clone(),
            revoked: self.inner.revoked_keys.clone(),
        }
    }

    /// Revokes the API key (or bearer token) `key`: from now on every
    /// request carrying it is answered 401, as one carrying an unknown key
    /// (a key deleted in the LangSmith settings). [`EmulatorState::reset`]
    /// forgets it.
    pub fn revoke_api_key(&self, key: &str) {
        lock(&self.inner.revoked_keys).insert(key.to_owned());
    }

    /// The counting middleware's piece: the request counts and log.
    pub(crate) fn stats(&self) -> Stats {
        self.inner.stats.clone()
    }

    /// The fault middleware's piece: the faults, the request counts and the
    /// shutdown signal.
    pub(crate) fn fault_injector(&self) -> FaultInjector {
        FaultInjector {
            faults: self.inner.faults.clone(),
            stats: self.inner.stats.clone(),
            shutdown: self.inner.shutdown.clone(),
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
}

/// Deployment `id` in a dump of the store ([`EmulatorState::dump`], `GET
/// /_emulator/store`: `{"workspaces": {ws: {"deployments": [...]}}}`): what
/// the emulator stored, not the shaped answer. `None` when absent.
pub fn deployment_in_dump(dump: &Value, id: &str) -> Option<Value> {
    dump["workspaces"]
        .as_object()
        .into_iter()
        .flat_map(|ws| ws.values())
        .flat_map(|w| w["deployments"].as_array().cloned().unwrap_or_default())
        .find(|d| d["id"] == id)
}
