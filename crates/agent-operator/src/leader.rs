//! Leader election on a `coordination.k8s.io/v1` Lease, so that of several
//! replicas only one runs the controllers.
//!
//! The lease itself is managed by [`kube_lease_manager`] (0.13: kube 5,
//! k8s-openapi 0.29; `kube-leader-election` 0.44 still needs kube 4 and
//! `kubert` 0.25 kube 1.1). It acquires a free or expired Lease with a
//! server-side apply of `holderIdentity` (two candidates applying at once
//! conflict, one wins), and renews it `grace` seconds before it expires.
//! This module sets `grace` to `duration − 2 s`, so the leader renews every
//! [`RETRY_PERIOD`] (2 s), as client-go's leader election does.
//!
//! The crate needs wrapping in three ways, each a defect seen with it alone:
//! - **A renew deadline**, which the crate lacks: a leader whose renewal
//!   fails or hangs would otherwise go on believing it leads after the Lease
//!   expired and another replica took it. A watchdog watches the Lease
//!   object and declares the leadership lost when the holder changes, when
//!   the Lease is deleted, or when it has not been renewed by
//!   `renewTime + renew deadline` ([`LeaderConfig::renew_deadline`]:
//!   `duration − max(1 s, duration/5)`, 12 s of a 15 s Lease; renewTime is
//!   this replica's own clock, as it wrote renewTime itself). A follower only
//!   takes over after `expiry` by its clock plus a random 0.1–1 s, so the
//!   old leader has stopped by then, up to a clock skew of `duration/5`.
//! - **Renewals retried until that deadline**: `LeaseManager::changed`
//!   returns on the first failed API call (anything but a conflict); one
//!   failed call is not a lost Lease (client-go retries until its renew
//!   deadline too), so the renewer calls it again, with a short backoff,
//!   and only the watchdog's deadline or another holder ends the term. A
//!   short apiserver stall (up to `renew deadline − RETRY_PERIOD`, 10 s of
//!   a 15 s Lease) is ridden out.
//! - **A restart with the holder's own identity** (the kubelet restarts a
//!   container in the same pod, so `POD_NAME` is the same): the crate sees
//!   the Lease as held by itself at once, although its `renewTime` may be
//!   long past. The watchdog counts its deadline from the moment of
//!   acquisition as well as from `renewTime`, so the first renewal (sent at
//!   once for a stale Lease) is awaited instead of declaring the term lost
//!   within milliseconds.
//!
//! What the operator does on a real loss (see `agent-operator run`): it
//! exits with an error at once, cancelling in-flight reconciles, and
//! Kubernetes restarts the container, which campaigns again as a standby
//! (and, with the same identity, takes its own Lease over cleanly). Exiting
//! rather than campaigning in-process is the simplest way to be sure that no
//! task, watch or cache of the old term survives into the next.

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
/// How often the leader renews (and a failed renewal is retried within the
/// renew deadline), as client-go's `RetryPeriod`.
pub const RETRY_PERIOD: Duration = Duration::from_secs(2);
/// First wait before calling the lease manager again after an API error
/// while leading (doubling up to [`RETRY_PERIOD`]).
const RENEW_RETRY_MIN: Duration = Duration::from_millis(250);

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

    /// Seconds before expiry at which the leader renews: the duration less
    /// [`RETRY_PERIOD`], at least 1 (always less than the duration), so a
    /// renewal is sent every 2 s.
    pub fn grace_seconds(&self) -> u64 {
        self.duration_seconds
            .saturating_sub(RETRY_PERIOD.as_secs())
            .max(1)
    }

    /// How long before expiry a leader that has not renewed steps down:
    /// a fifth of the duration, at least 1 s.
    fn step_down_margin(&self) -> Duration {
        Duration::from_secs(self.duration_seconds / 5).max(Duration::from_secs(1))
    }

    /// How long after its last renewal (or after acquiring the Lease) a
    /// leader that could not renew steps down: the duration less
    /// [`Self::step_down_margin`] (12 s of a 15 s Lease).
    pub fn renew_deadline(&self) -> Duration {
        Duration::from_secs(self.duration_seconds).saturating_sub(self.step_down_margin())
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

/// How long after its last successful read of the Lease a standby stays
/// ready ([`lease_readable`]): five of its reads, one every
/// [`RETRY_PERIOD`], so one slow or failed read does not flap readiness.
pub const STANDBY_READ_WINDOW: Duration = Duration::from_secs(10);

/// When this process, waiting for the Lease, last read it successfully.
static LAST_LEASE_READ: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);

pub(crate) fn lease_read_now() {
    *LAST_LEASE_READ.lock().unwrap_or_else(|p| p.into_inner()) = Some(std::time::Instant::now());
}

/// True when this process, waiting for the Lease in [`acquire`], read it
/// successfully within [`STANDBY_READ_WINDOW`]: a standby that cannot read
/// it (its RBAC removed, the API server unreachable) could not take over,
/// so `/readyz` says it is not ready. False before the first read.
pub fn lease_readable() -> bool {
    LAST_LEASE_READ
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .is_some_and(|at| at.elapsed() <= STANDBY_READ_WINDOW)
}

/// Reads the Lease every [`RETRY_PERIOD`] (each read bounded by it) and
/// notes each success for [`lease_readable`]; never returns.
async fn probe_lease(leases: Api<Lease>, name: String) {
    let mut tick = tokio::time::interval(RETRY_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match tokio::time::timeout(RETRY_PERIOD, leases.get_opt(&name)).await {
            Ok(Ok(_)) => lease_read_now(),
            Ok(Err(e)) => debug!(error = %e, "cannot read the leader lease"),
            Err(_) => debug!("reading the leader lease timed out"),
        }
    }
}

/// Waits until this replica holds the Lease (creating the Lease if absent)
/// and returns the leadership. Lease API errors are logged and retried with
/// backoff (1 s doubling to 30 s), so this only returns as leader; drop the
/// future to give up (a Lease acquired meanwhile then simply expires).
/// Meanwhile the Lease is read every [`RETRY_PERIOD`] for
/// [`lease_readable`] (the standby's readiness).
pub async fn acquire(client: kube::Client, config: LeaderConfig) -> Leadership {
    let probe = probe_lease(
        Api::namespaced(client.clone(), &config.namespace),
        config.lease_name.clone(),
    );
    tokio::select! {
        leadership = campaign(client, config) => leadership,
        () = probe => unreachable!("the lease probe never returns"),
    }
}

async fn campaign(client: kube::Client, config: LeaderConfig) -> Leadership {
    let build = || async {
        Arc::new(
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
        )
    };
    let mut manager = build().await;
    info!(
        lease = %config.lease_name,
        namespace = %config.namespace,
        identity = %config.identity,
        "waiting for the leader lease"
    );
    let mut delay = Duration::from_secs(1);
    // A standby also watches the Lease: the lease manager waits for a held
    // Lease to expire on the state it read last, so a Lease released by a
    // leader's clean shutdown (holder cleared) would wait out the old term.
    // On such a release a new manager (a fresh read) takes it at once.
    let leases: Api<Lease> = Api::namespaced(client.clone(), &config.namespace);
    let released = watch_object(leases, &config.lease_name)
        .default_backoff()
        .filter_map(|event| async move {
            match event {
                Ok(Some(lease)) if is_released(&lease) => Some(()),
                _ => None,
            }
        });
    let mut released = std::pin::pin!(released);
    loop {
        tokio::select! {
            changed = manager.changed() => match changed {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => {
                    warn!(error = %e, retry_in_s = delay.as_secs(), "leader lease API error");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(MAX_RETRY_DELAY);
                }
            },
            Some(()) = released.next() => {
                debug!(lease = %config.lease_name, "the leader released the lease; asking for it now");
                manager = build().await;
            }
        }
    }
    info!(lease = %config.lease_name, identity = %config.identity, "acquired the leader lease");
    Leadership::start(client, manager, config)
}

/// True when nobody holds `lease`: its holder is unset or empty (what a
/// leader's release writes). Pure.
fn is_released(lease: &Lease) -> bool {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .is_none_or(str::is_empty)
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

/// When this process last acquired or renewed the leader lease.
static LAST_RENEWAL: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);

pub(crate) fn renewed_now() {
    *LAST_RENEWAL.lock().unwrap_or_else(|p| p.into_inner()) = Some(std::time::Instant::now());
}

/// Time since this process last acquired or renewed the leader lease
/// (`agent_operator_leader_lease_renewal_age_seconds`); `None` before it
/// first led, or without leader election.
pub fn renewal_age() -> Option<Duration> {
    LAST_RENEWAL
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .map(|at| at.elapsed())
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
        renewed_now();
        let renewer = {
            let manager = manager.clone();
            let tx = tx.clone();
            tokio::spawn(async move {
                // `changed()` renews while we hold the lease and returns when
                // that changes or an API call failed. A failed call is
                // retried (the watchdog's renew deadline bounds how long);
                // only another holder ends the term here.
                let mut delay = RENEW_RETRY_MIN;
                loop {
                    match manager.changed().await {
                        Ok(true) => {
                            renewed_now();
                            delay = RENEW_RETRY_MIN;
                        }
                        Ok(false) => {
                            declare_lost(&tx, "the lease is held by another replica".to_owned());
                            return;
                        }
                        Err(e) => {
                            warn!(error = %e, retry_in_ms = delay.as_millis() as u64, "renewing the leader lease failed; retrying until the renew deadline");
                            tokio::time::sleep(delay).await;
                            delay = (delay * 2).min(RETRY_PERIOD);
                        }
                    }
                }
            })
        };
        let watchdog = tokio::spawn(watchdog(
            client,
            config.clone(),
            tx,
            tokio::time::Instant::now(),
        ));
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

/// Declares the leadership lost for `reason`, once (the first reason is
/// kept), with a warning.
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

/// The deadline of a term from what the Lease says: `renewTime + duration −
/// margin`, but never before `acquired + renew deadline` (a Lease this
/// replica took over with a stale `renewTime` of its own, after a restart
/// with the same identity, gets time for its first renewal). Pure.
fn term_deadline(
    config: &LeaderConfig,
    acquired: tokio::time::Instant,
    now: tokio::time::Instant,
    left_by_lease: Duration,
) -> tokio::time::Instant {
    (now + left_by_lease).max(acquired + config.renew_deadline())
}

/// The renew deadline (see the module docs): watches the Lease and declares
/// the leadership lost when another holder appears, the Lease is deleted, or
/// the term's deadline ([`term_deadline`]) passes without a renewal.
async fn watchdog(
    client: kube::Client,
    config: LeaderConfig,
    tx: Arc<watch::Sender<Option<String>>>,
    acquired: tokio::time::Instant,
) {
    let api: Api<Lease> = Api::namespaced(client, &config.namespace);
    let mut term = Term {
        config: &config,
        acquired,
        deadline: acquired + config.renew_deadline(),
        last_renew: None,
    };
    let events = watch_object(api, &config.lease_name).default_backoff();
    let mut events = std::pin::pin!(events);
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(term.deadline) => {
                declare_lost(&tx, "the lease was not renewed before its deadline".to_owned());
                return;
            }
            event = events.next() => match event {
                Some(Ok(Some(lease))) => {
                    if let Err(reason) = term.seen(lease) {
                        declare_lost(&tx, reason);
                        return;
                    }
                }
                Some(Ok(None)) => {
                    declare_lost(&tx, "the lease was deleted".to_owned());
                    return;
                }
                Some(Err(e)) => debug!(error = %e, "lease watch error (retrying)"),
                // The watch never ends by itself; keep the deadline anyway.
                None => {
                    tokio::time::sleep_until(term.deadline).await;
                    declare_lost(&tx, "the lease was not renewed before its deadline".to_owned());
                    return;
                }
            }
        }
    }
}

/// The [`watchdog`]'s view of this replica's term.
struct Term<'a> {
    /// The election settings.
    config: &'a LeaderConfig,
    /// When the lease was acquired.
    acquired: tokio::time::Instant,
    /// When the term ends without a renewal.
    deadline: tokio::time::Instant,
    /// The Lease's `renewTime` last seen.
    last_renew: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime>,
}

impl Term<'_> {
    /// Takes in one version of the Lease: a new `renewTime` of ours is a
    /// renewal (its age reset), and the deadline moves to what the Lease
    /// now says ([`term_deadline`]).
    ///
    /// Errors: the reason the leadership is lost, when another identity
    /// holds the Lease.
    fn seen(&mut self, lease: Lease) -> Result<(), String> {
        let spec = lease.spec.unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Err(format!(
                "the lease is now held by {:?}",
                spec.holder_identity
            ));
        }
        let (Some(renew), Some(seconds)) = (spec.renew_time, spec.lease_duration_seconds) else {
            return Ok(());
        };
        // A new renewTime of ours is a successful renewal: the lease manager
        // reports only changes of holder, not each renewal, so the age of
        // the last renewal (the metric the stale-lease alert reads) is reset
        // here.
        if self.last_renew.as_ref() != Some(&renew) {
            renewed_now();
            self.last_renew = Some(renew.clone());
        }
        let expiry =
            SystemTime::from(renew.0) + Duration::from_secs(u64::try_from(seconds).unwrap_or(0));
        let left = expiry
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO)
            .saturating_sub(self.config.step_down_margin());
        let now = tokio::time::Instant::now();
        self.deadline = term_deadline(self.config, self.acquired, now, left);
        debug!(
            left_s = (self.deadline - now).as_secs_f64(),
            "leader lease renewed"
        );
        Ok(())
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
    fn renewals_every_two_seconds_and_a_deadline_before_expiry() {
        for (duration, grace, deadline) in
            [(2, 1, 1), (4, 2, 3), (6, 4, 5), (15, 13, 12), (60, 58, 48)]
        {
            let c = LeaderConfig::new("l", "ns", "me", duration).unwrap();
            assert_eq!(c.grace_seconds(), grace, "duration {duration}");
            assert!(c.grace_seconds() < duration);
            assert_eq!(c.renew_deadline(), Duration::from_secs(deadline));
            assert!(c.renew_deadline() < Duration::from_secs(duration));
        }
        // The shipped 15 s Lease rides out a stall of 10 s after a renewal.
        let c = LeaderConfig::new("l", "ns", "me", 15).unwrap();
        let period = Duration::from_secs(c.duration_seconds - c.grace_seconds());
        assert!(c.renew_deadline() - period >= Duration::from_secs(8));
    }

    #[test]
    fn a_stale_lease_of_its_own_gets_time_for_its_first_renewal() {
        let c = LeaderConfig::new("l", "ns", "me", 15).unwrap();
        let acquired = tokio::time::Instant::now();
        // The Lease says it expired long ago (a restart with the same
        // identity): the deadline is the acquisition's, 12 s on.
        let d = term_deadline(&c, acquired, acquired, Duration::ZERO);
        assert_eq!(d, acquired + Duration::from_secs(12));
        // A fresh renewal later moves it on.
        let later = acquired + Duration::from_secs(20);
        let d = term_deadline(&c, acquired, later, Duration::from_secs(12));
        assert_eq!(d, later + Duration::from_secs(12));
        // An old renewal seen later, past the acquisition's deadline: the
        // term ends now.
        let d = term_deadline(&c, acquired, later, Duration::ZERO);
        assert_eq!(d, later);
    }

    #[test]
    fn identity_is_never_empty() {
        assert!(!default_identity().is_empty());
    }
}
