//! Reconcilers, one module per reconciled kind, and what they share: the
//! context, the error type with its classification, and the requeue policy.
//!
//! Each pass is observe → compute → act → report: the pure middle lives in
//! [`desired`] and [`status`], the IO edges in [`deployment`] and [`resolve`].

pub mod deployment;
pub mod desired;
pub mod resolve;
pub mod runner;
pub mod status;

use std::time::Duration;

use kube::runtime::events::{Recorder, Reporter};

/// Settings of the operator that shape reconcile timing.
#[derive(Clone, Debug)]
pub struct OperatorConfig {
    /// Delay between polls of a revision in progress (first poll), seconds-scale.
    pub poll_interval: Duration,
    /// Delay between drift checks of a steady (Ready or Stalled) resource.
    pub resync_interval: Duration,
    /// Delay before re-checking a resource blocked on missing input (a Secret,
    /// an AgentControlPlane); watches usually wake it sooner.
    pub blocked_interval: Duration,
    /// Per-request timeout of control plane calls.
    pub request_timeout: Duration,
    /// Longest delay of the per-object error backoff.
    pub max_backoff: Duration,
}

impl Default for OperatorConfig {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(2),
            resync_interval: Duration::from_secs(300),
            blocked_interval: Duration::from_secs(60),
            request_timeout: Duration::from_secs(30),
            max_backoff: Duration::from_secs(300),
        }
    }
}

/// Shared state of every reconcile pass.
pub struct Context {
    /// Kubernetes client.
    pub client: kube::Client,
    /// Event recorder (events.k8s.io).
    pub recorder: Recorder,
    /// Timing settings.
    pub config: OperatorConfig,
    /// Consecutive failures per object, for the error backoff.
    pub failures: std::sync::Mutex<std::collections::HashMap<String, u32>>,
}

impl Context {
    /// Builds a context with a recorder reporting as `agent-operator`.
    pub fn new(client: kube::Client, config: OperatorConfig) -> Self {
        let reporter = Reporter {
            controller: "agent-operator".into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            config,
            failures: Default::default(),
        }
    }

    /// Records one more failure of `key` and returns the backoff delay:
    /// 1 s doubling to `max_backoff`, with ±20 % jitter.
    pub fn backoff(&self, key: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let n = failures.entry(key.to_owned()).or_insert(0);
        *n = n.saturating_add(1);
        backoff_delay(*n, self.config.max_backoff)
    }

    /// Forgets the failures of `key` after a successful pass.
    pub fn reset_backoff(&self, key: &str) {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        failures.remove(key);
    }
}

/// Exponential backoff: `2^(attempt-1)` seconds capped at `max`, with ±20 %
/// jitter so that many objects failing together do not retry in lockstep.
pub fn backoff_delay(attempt: u32, max: Duration) -> Duration {
    let base = Duration::from_secs(1u64 << attempt.saturating_sub(1).min(20)).min(max);
    let jitter = rand::random_range(0.8..1.2);
    base.mul_f64(jitter).min(max)
}

/// Errors of a reconcile pass.
///
/// Errors of the input (missing Secret, invalid spec) are not here: they are
/// written to status and the pass returns normally.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes API call failed.
    #[error("kubernetes API: {0}")]
    Kube(#[source] kube::Error),
    /// A control plane call failed.
    #[error("control plane {operation}: {source}")]
    ControlPlane {
        /// The operation, e.g. `create deployment`.
        operation: &'static str,
        /// The client error.
        #[source]
        source: crate::controlplane::Error,
    },
    /// The finalizer helper failed to add or remove the finalizer.
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<Error>>),
    /// The remote deployment is still being deleted; check again soon.
    #[error("remote deployment {0} is still being deleted")]
    DeletionPending(String),
    /// The object lacks a namespace or name (should not happen for namespaced kinds).
    #[error("object has no {0}")]
    MissingObjectKey(&'static str),
}

impl Error {
    /// A fixed, bounded reason for events and metric labels.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Kube(_) => "KubeError",
            Error::ControlPlane { .. } => "ControlPlaneError",
            Error::Finalizer(_) => "FinalizerError",
            Error::DeletionPending(_) => "DeletionPending",
            Error::MissingObjectKey(_) => "InvalidObject",
        }
    }

    /// The delay the control plane asked for, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::ControlPlane { source, .. } => source.retry_after(),
            _ => None,
        }
    }
}
