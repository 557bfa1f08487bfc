//! Leader election on a `coordination.k8s.io/v1` Lease, so that of several
//! replicas only one runs the controllers.
//!
//! The lease itself is managed by [`kube_lease_manager`] (0.13: kube 5,
//! k8s-openapi 0.29; `kube-leader-election` 0.44 still needs kube 4 and
//! `kubert` 0.25 kube 1.1). It acquires a free or expired Lease with a
//! server-side apply of `holderIdentity` (two candidates applying at once
//! conflict, one wins), and renews it `grace` seconds before it expires.
//!
//! On top of it this module adds a *renew deadline*, which the crate lacks: a
//! leader whose renewal fails or hangs would otherwise go on believing it
//! leads after the Lease expired and another replica took it. A watchdog
//! watches the Lease object and declares the leadership lost when the holder
//! changes, when the Lease is deleted, or when it has not been renewed by
//! `expiry − grace/4` (renewTime and expiry are this replica's own clock, as
//! it wrote renewTime itself). A follower only takes over after `expiry` by
//! its clock plus a random 0.1–1 s, so the old leader has stopped by then,
//! up to a clock skew of `grace/4` between nodes.
//!
//! What the operator does on loss (see `agent-operator run`): it exits with an
//! error at once, cancelling in-flight reconciles, and Kubernetes restarts the
//! container as a standby. Exiting is the simplest way to be sure that no
//! task of the old term survives.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::watch_object;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

/// Default name of the Lease.
pub const DEFAULT_LEASE_NAME: &str = "agent-operator";
/// Default lease duration, seconds.
pub const DEFAULT_LEASE_DURATION_SECONDS: u64 = 15;
/// Longest wait between two attempts after a Lease API error.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(30);
/// Upper bound of releasing the Lease on shutdown.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// Errors of the leader election settings.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The lease duration must be at least 2 whole seconds.
    #[error("lease duration must be at least 2 seconds, got {0}")]
    InvalidDuration(u64),
    /// A Lease name or namespace is empty.
    #[error("the lease {0} must not be empty")]
    Empty(&'static str),
    /// A call of the Lease API failed.
    #[error("lease API: {0}")]
    Lease(#[source] kube_lease_manager::LeaseManagerError),
}

/// Which Lease to hold, as whom, for how long.
#[derive(Clone, Debug)]
pub struct LeaderConfig {
    lease_name: String,
    namespace: String,
    identity: String,
    duration_seconds: u64,
}

impl LeaderConfig {
    /// Validated settings: `duration_seconds` ≥ 2 is how long a Lease lasts
    /// without renewal (the failover time after a leader dies).
    ///
    /// Errors: [`Error::InvalidDuration`], [`Error::Empty`].
    pub fn new(
        lease_name: impl Into<String>,
        namespace: impl Into<String>,
        identity: impl Into<String>,
        duration_seconds: u64,
    ) -> Result<Self, Error> {
        let config = Self {
            lease_name: lease_name.into(),
            namespace: namespace.into(),
            identity: identity.into(),
            duration_seconds,
        };
        if duration_seconds < 2 {
            return Err(Error::InvalidDuration(duration_seconds));
        }
        for (what, value) in [
            ("name", &config.lease_name),
            ("namespace", &config.namespace),
            ("identity", &config.identity),
        ] {
            if value.is_empty() {
                return Err(Error::Empty(what));
            }
        }
        Ok(config)
    }

    /// This replica's identity (the Lease's `holderIdentity` while it leads).
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Seconds before expiry at which the leader renews: a third of the
    /// duration, at least 1 (always less than the duration).
    pub fn grace_seconds(&self) -> u64 {
        (self.duration_seconds / 3).max(1)
    }

    /// How long before expiry a leader that has not renewed steps down.
    fn step_down_margin(&self) -> Duration {
        Duration::from_secs(self.grace_seconds()) / 4
    }
}

/// The identity of this replica: `POD_NAME`, else the host name with a random
/// suffix (several local runs on one host stay distinct).
pub fn default_identity() -> String {
    if let Some(pod) = std::env::var("POD_NAME").ok().filter(|p| !p.is_empty()) {
        return pod;
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()))
        .unwrap_or_else(|| "agent-operator".to_owned());
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    format!("{host}-{suffix}")
}

/// The namespace of the Lease by default: `POD_NAMESPACE`, else `default`.
pub fn default_namespace() -> String {
    std::env::var("POD_NAMESPACE")
        .ok()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".to_owned())
}

/// Waits until this replica holds the Lease (creating the Lease if absent)
/// and returns the leadership. Lease API errors are logged and retried with
/// backoff (1 s doubling to 30 s), so this only returns as leader; drop the
/// future to give up (a Lease acquired meanwhile then simply expires).
pub async fn acquire(client: kube::Client, config: LeaderConfig) -> Leadership {
    let manager = Arc::new(
        retrying("creating the lease manager", || {
            LeaseManagerBuilder::new(client.clone(), &config.lease_name)
                .with_namespace(&config.namespace)
                .with_identity(&config.identity)
                .with_duration(config.duration_seconds)
                .with_grace(config.grace_seconds())
                .with_field_manager(format!("agent-operator-{}", config.identity))
                .build()
        })
        .await,
    );
    info!(
        lease = %config.lease_name,
        namespace = %config.namespace,
        identity = %config.identity,
        "waiting for the leader lease"
    );
    let mut delay = Duration::from_secs(1);
    loop {
        match manager.changed().await {
            Ok(true) => break,
            Ok(false) => {}
            Err(e) => {
                warn!(error = %e, retry_in_s = delay.as_secs(), "leader lease API error");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(MAX_RETRY_DELAY);
            }
        }
    }
    info!(lease = %config.lease_name, identity = %config.identity, "acquired the leader lease");
    Leadership::start(client, manager, config)
}

async fn retrying<T, F, Fut>(what: &str, mut attempt: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube_lease_manager::LeaseManagerError>>,
{
    let mut delay = Duration::from_secs(1);
    loop {
        match attempt().await {
            Ok(v) => return v,
            Err(e) => {
                warn!(error = %e, retry_in_s = delay.as_secs(), "{what}");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(MAX_RETRY_DELAY);
            }
        }
    }
}

/// The Lease held by this replica: renewed in the background until
/// [`Leadership::release`] or drop. [`Leadership::lost`] resolves when the
/// leadership ended or is in doubt.
pub struct Leadership {
    manager: Arc<LeaseManager>,
    config: LeaderConfig,
    lost: watch::Receiver<Option<String>>,
    tasks: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Leadership {
    fn start(client: kube::Client, manager: Arc<LeaseManager>, config: LeaderConfig) -> Self {
        let (tx, lost) = watch::channel(None);
        let tx = Arc::new(tx);
        let renewer = {
            let manager = manager.clone();
            let tx = tx.clone();
            tokio::spawn(async move {
                // `changed()` renews while we hold the lease and only returns
                // when that changes or an API call failed.
                let reason = match manager.changed().await {
                    Ok(_) => "the lease is held by another replica".to_owned(),
                    Err(e) => format!("renewing the lease failed: {e}"),
                };
                declare_lost(&tx, reason);
            })
        };
        let watchdog = tokio::spawn(watchdog(client, config.clone(), tx));
        Self {
            manager,
            config,
            lost,
            tasks: vec![renewer, watchdog],
        }
    }

    /// Resolves with a reason (for logs) once the leadership is lost or in
    /// doubt: the Lease changed holder or was deleted, a renewal failed, or
    /// it was not renewed in time.
    pub fn lost(&self) -> impl Future<Output = String> + Send + Sync + 'static {
        let mut lost = self.lost.clone();
        async move {
            match lost.wait_for(Option::is_some).await {
                Ok(reason) => reason.clone().unwrap_or_default(),
                Err(_) => "the lease tasks stopped".to_owned(),
            }
        }
    }

    /// Stops renewing and clears the Lease's holder so that another replica
    /// can take over at once (instead of after expiry).
    ///
    /// Errors: [`Error::Lease`] if the Lease API refused or did not answer
    /// within 5 s (the Lease then expires by itself).
    pub async fn release(mut self) -> Result<(), Error> {
        for task in self.tasks.drain(..) {
            task.abort();
            let _ = task.await;
        }
        match tokio::time::timeout(RELEASE_TIMEOUT, self.manager.release()).await {
            Ok(Ok(())) => {
                info!(lease = %self.config.lease_name, "released the leader lease");
                Ok(())
            }
            Ok(Err(e)) => Err(Error::Lease(e)),
            Err(_) => Err(Error::Lease(
                kube_lease_manager::LeaseManagerError::InconsistentState(
                    "release timed out".to_owned(),
                ),
            )),
        }
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

fn declare_lost(tx: &watch::Sender<Option<String>>, reason: String) {
    tx.send_if_modified(|current| {
        if current.is_none() {
            warn!(%reason, "leadership lost");
            *current = Some(reason);
            true
        } else {
            false
        }
    });
}

/// The renew deadline (see the module docs): watches the Lease and declares
/// the leadership lost when another holder appears, the Lease is deleted, or
/// `renewTime + duration − margin` passes without a renewal.
async fn watchdog(
    client: kube::Client,
    config: LeaderConfig,
    tx: Arc<watch::Sender<Option<String>>>,
) {
    let api: Api<Lease> = Api::namespaced(client, &config.namespace);
    let margin = config.step_down_margin();
    let mut deadline = tokio::time::Instant::now()
        + Duration::from_secs(config.duration_seconds).saturating_sub(margin);
    let events = watch_object(api, &config.lease_name).default_backoff();
    let mut events = std::pin::pin!(events);
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => {
                declare_lost(&tx, "the lease was not renewed before its deadline".to_owned());
                return;
            }
            event = events.next() => match event {
                Some(Ok(Some(lease))) => {
                    let spec = lease.spec.unwrap_or_default();
                    if spec.holder_identity.as_deref() != Some(config.identity.as_str()) {
                        declare_lost(
                            &tx,
                            format!("the lease is now held by {:?}", spec.holder_identity),
                        );
                        return;
                    }
                    if let (Some(renew), Some(seconds)) =
                        (spec.renew_time, spec.lease_duration_seconds)
                    {
                        let expiry = SystemTime::from(renew.0)
                            + Duration::from_secs(u64::try_from(seconds).unwrap_or(0));
                        let left = expiry
                            .duration_since(SystemTime::now())
                            .unwrap_or(Duration::ZERO)
                            .saturating_sub(margin);
                        deadline = tokio::time::Instant::now() + left;
                        debug!(left_s = left.as_secs_f64(), "leader lease renewed");
                    }
                }
                Some(Ok(None)) => {
                    declare_lost(&tx, "the lease was deleted".to_owned());
                    return;
                }
                Some(Err(e)) => debug!(error = %e, "lease watch error (retrying)"),
                // The watch never ends by itself; keep the deadline anyway.
                None => {
                    tokio::time::sleep_until(deadline).await;
                    declare_lost(&tx, "the lease was not renewed before its deadline".to_owned());
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_is_validated() {
        assert!(matches!(
            LeaderConfig::new("l", "ns", "me", 1),
            Err(Error::InvalidDuration(1))
        ));
        assert!(matches!(
            LeaderConfig::new("", "ns", "me", 15),
            Err(Error::Empty("name"))
        ));
        assert!(matches!(
            LeaderConfig::new("l", "ns", "", 15),
            Err(Error::Empty("identity"))
        ));
    }

    #[test]
    fn grace_is_a_third_of_the_duration_and_below_it() {
        for (duration, grace) in [(2, 1), (4, 1), (6, 2), (15, 5), (60, 20)] {
            let c = LeaderConfig::new("l", "ns", "me", duration).unwrap();
            assert_eq!(c.grace_seconds(), grace, "duration {duration}");
            assert!(c.grace_seconds() < duration);
            assert!(c.step_down_margin() < Duration::from_secs(c.grace_seconds()));
        }
    }

    #[test]
    fn identity_is_never_empty() {
        assert!(!default_identity().is_empty());
    }
}
