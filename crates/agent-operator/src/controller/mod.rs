//! Reconcilers, one module per reconciled kind, and what they share: the
//! context, the error type with its classification, and the requeue policy.
//!
//! Each pass is observe → decide → act → report ([`kind`]): the pure middle
//! lives in [`crate::plan`], the IO edges in [`deployment`] and [`resolve`].

pub mod assistant;
pub(crate) mod child;
pub mod cluster_control_plane;
pub mod control_plane;
pub mod cron;
pub mod deployment;
pub mod error;
#[cfg(test)]
mod fake_api;
pub mod hash_key;
pub mod integrations;
pub mod kind;
pub mod listener;
pub mod placement;
pub mod planes;
pub mod report;
pub mod resolve;
pub mod scaffold;
pub mod secrets;
#[cfg(test)]
mod sequence_tests;
pub mod server_changes;
pub mod unmanaged;

use std::time::Duration;

use kube::runtime::controller::Action;
use kube::runtime::events::Reporter;

/// Settings of the operator that shape reconcile timing.
#[derive(Clone, Debug)]
pub struct OperatorConfig {
    /// Delay between polls of a revision in progress (first poll), seconds-scale.
    pub poll_interval: Duration,
    /// Longest delay between polls of a revision whose status does not change.
    pub max_poll_interval: Duration,
    /// Delay between drift checks of a steady (Ready or Stalled) resource.
    pub resync_interval: Duration,
    /// Delay before re-checking a resource blocked on missing input (a Secret,
    /// an AgentControlPlane); watches usually wake it sooner.
    pub blocked_interval: Duration,
    /// Per-request timeout of control plane calls.
    pub request_timeout: Duration,
    /// Longest delay of the per-object error backoff.
    pub max_backoff: Duration,
    /// Settings of `spec.verify` (agent server checks).
    pub verify: crate::agentserver::limits::VerifyConfig,
    /// The hosts requests may go to (`--allowed-hosts`): control planes and
    /// agent servers. Default [`crate::allowlist::DEFAULT_ALLOWED_HOSTS`].
    pub allowed_hosts: crate::allowlist::HostAllowlist,
    /// Which objects this operator reconciles (`--shard`; default: the
    /// objects without the shard label). Every watch of the operator's kinds
    /// is restricted to it, and an AgentControlPlane of another shard is
    /// never used ([`crate::shard`]).
    pub shard: crate::shard::Shard,
    /// The data-plane pod policy the operator enforces itself
    /// (`--pod-policy` and its lists): an AgentDeployment or AgentListener
    /// it refuses is `Stalled` (`PodPolicyRefused`) before any request.
    /// `None` (the default): not enforced.
    pub pod_policy: Option<crate::pod_policy::PodPolicy>,
    /// The namespaces the controllers watch (`--namespace`; default every
    /// namespace): where the AgentControlPlane controller reads the
    /// AgentDeployments whose claims its unmanaged report leaves out.
    pub scope: scaffold::Scope,
}

impl Default for OperatorConfig {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(2),
            max_poll_interval: Duration::from_secs(30),
            resync_interval: Duration::from_secs(300),
            blocked_interval: Duration::from_secs(60),
            request_timeout: Duration::from_secs(30),
            max_backoff: Duration::from_secs(300),
            verify: Default::default(),
            allowed_hosts: Default::default(),
            shard: Default::default(),
            pod_policy: None,
            scope: scaffold::Scope::AllNamespaces,
        }
    }
}

/// Shared state of every reconcile pass.
pub struct Context {
    /// Kubernetes client.
    pub client: kube::Client,
    /// Who publishes events (core/v1, `controller::report::publish`): `agent-operator`, with the pod
    /// name as instance.
    pub reporter: Reporter,
    /// Timing settings.
    pub config: OperatorConfig,
    /// What the operator remembers of each object between its passes
    /// ([`ObjectMemory`]), keyed by [`memory_key`] of its
    /// [`object_key`]; an object's entry goes when it holds nothing, and
    /// when the object is deleted ([`Context::forget`]).
    pub objects: std::sync::Mutex<std::collections::HashMap<u64, ObjectMemory>>,
    /// The objects ([`memory_key`]) that had a pass since the operator
    /// started (the cold start: [`Context::is_first_pass`]). Apart from
    /// [`Self::objects`] so that an object at rest costs 8 bytes here, not
    /// a whole [`ObjectMemory`].
    pub seen: std::sync::Mutex<std::collections::HashSet<u64>>,
    /// One control plane client per AgentControlPlane, shared by all its users.
    pub planes: planes::ClientCache,
    /// The metadata-only Secret watch and the cache of referenced Secrets.
    pub secrets: secrets::Secrets,
    /// Prometheus metrics (reconciles, control plane requests, time to Ready).
    pub metrics: std::sync::Arc<crate::metrics::Metrics>,
    /// What the operator learned of each control plane ([`PlaneMemory`]),
    /// keyed by its client's key (`deployment::plane_key`).
    pub plane_memory: std::sync::Mutex<std::collections::HashMap<String, PlaneMemory>>,
    /// Name lookups before creates, shared by a fleet of one control plane.
    pub names: deployment::names::NameIndexes,
    /// GitHub integration and repository lists (for
    /// `sourceConfig.integrationRef`), shared by a fleet of one control plane.
    pub integrations: integrations::IntegrationCache,
    /// The bounds of agent server calls (`spec.verify`, AgentAssistants,
    /// AgentCrons): a rate per agent server and a process-wide concurrency
    /// cap, apart from every control plane budget.
    pub verifier: crate::agentserver::limits::Limits,
    /// The key of `status.secretsHash` ([`hash_key`]): a random one until
    /// the operator sets the one of its Secret ([`hash_key::load_or_create`])
    /// before the controllers start.
    pub hash_key: hash_key::HashKey,
    /// The remote deletes in progress of this process's AgentDeployments
    /// ([`deployment::deleting`]).
    pub deletes: deployment::deleting::Deletes,
    /// Held from the count of live previews to the end of the pass that
    /// creates one, so that two passes cannot both take the last place
    /// under `spec.previews.maxLive` ([`deployment::previews`]).
    pub previews: tokio::sync::Mutex<()>,
    /// The image registries of `spec.imagePolicy` (one budget per registry
    /// host, shared by every AgentDeployment).
    pub registry: crate::registry::RegistryClient,
    /// What the AgentDeployment watch tells the AgentAssistant and AgentCron
    /// controllers: which agent servers changed ([`server_changes`]).
    pub server_changes: server_changes::ServerChanges,
    /// Every AgentDeployment store, where a target of `spec.promotion`
    /// finds its source, and the changes of what sources serve
    /// ([`deployment::promotion`]).
    pub promotions: deployment::promotion::Promotions,
    /// Every AgentDeployment store, read as the claims on a remote
    /// deployment when a decision needs them: one owner per remote
    /// deployment ([`deployment::claims`]).
    pub claims: deployment::claims::ClaimIndex,
}

/// Least time between two PATCHes of one object that a change of Secret
/// values alone causes: each is a new revision (a build and a rollout on the
/// real service, docs/control-plane-api.md "Requests"), so a Secret rewritten every second by a
/// broken rotation costs one revision per interval, carrying the latest
/// value, not one per write. A spec change is never held back.
pub const SECRETS_PATCH_INTERVAL: std::time::Duration = std::time::Duration::from_secs(30);

/// Objects of one control plane that poll their revisions while nothing is
/// learned about how long revisions take; the others wait for what the
/// scouts learn instead of each polling early.
pub const SCOUTS: usize = 4;

/// When a pass polls the revision it follows ([`Context::poll_wait`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PollDue {
    /// Poll now.
    Now,
    /// Poll now, as one of the plane's [`SCOUTS`] while nothing is learned
    /// of it: the pass's report remembers it ([`Context::scout`]).
    Scout,
    /// Wait this long, with no request.
    In(Duration),
}

/// What the operator remembers of one object between its passes (every
/// kind: the error backoff; AgentDeployment: the rest). Lost on restart
/// by design: each field says what a cold start does without it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ObjectMemory {
    /// Consecutive failed passes, for the error backoff.
    pub failures: u32,
    /// The (revision, status) last polled and how many polls saw it
    /// unchanged, for the polling backoff.
    pub poll: Option<(String, u32)>,
    /// The revision its last mutation started, and when.
    pub revision_started: Option<(String, std::time::Instant)>,
    /// When its last PATCH that carried Secret values was sent
    /// ([`Context::secrets_due_in`]).
    pub secrets_sent: Option<std::time::Instant>,
}

impl ObjectMemory {
    /// Nothing is remembered (the entry can go).
    fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// What the operator learned of one control plane.
#[derive(Clone, Debug, Default)]
pub struct PlaneMemory {
    /// How long its revisions take from creation to DEPLOYED, seconds
    /// (exponentially weighted mean of recent revisions); `None` until one
    /// was seen.
    pub revision_seconds: Option<f64>,
    /// While nothing is learned: the objects ([`memory_key`]) allowed to
    /// poll early ([`Context::poll_wait`]).
    pub scouts: std::collections::HashSet<u64>,
}

/// The key of an object in [`Context::objects`]: a hash of its
/// [`object_key`] (`Kind/namespace/name`), so that objects of different
/// kinds with one name never share an entry.
pub fn memory_key(key: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    h.finish()
}

impl Context {
    /// Builds a context with a recorder reporting as `agent-operator`.
    pub fn new(client: kube::Client, config: OperatorConfig) -> Self {
        let reporter = Reporter {
            controller: "agent-operator".into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        let verifier = crate::agentserver::limits::Limits::new(&config.verify);
        let planes = planes::ClientCache::default();
        planes.set_allowed_hosts(config.allowed_hosts.clone());
        planes.set_shard(config.shard.clone());
        Self {
            reporter,
            client,
            verifier,
            config,
            objects: Default::default(),
            seen: Default::default(),
            planes,
            secrets: Default::default(),
            metrics: Default::default(),
            plane_memory: Default::default(),
            names: Default::default(),
            integrations: Default::default(),
            hash_key: hash_key::HashKey::random(),
            deletes: Default::default(),
            previews: Default::default(),
            registry: Default::default(),
            server_changes: Default::default(),
            promotions: Default::default(),
            claims: Default::default(),
        }
    }

    /// Runs `f` on the memory of the object `key` ([`object_key`]; a
    /// default one when there is none), and drops the entry once it holds
    /// nothing.
    fn with_object<R>(&self, key: &str, f: impl FnOnce(&mut ObjectMemory) -> R) -> R {
        let id = memory_key(key);
        let mut objects = self.objects.lock().unwrap_or_else(|p| p.into_inner());
        let entry = objects.entry(id).or_default();
        let r = f(entry);
        if entry.is_empty() {
            objects.remove(&id);
        }
        r
    }

    /// What `f` reads of the memory of the object `key`; `None` when
    /// nothing is remembered of it.
    fn recall<R>(&self, key: &str, f: impl FnOnce(&ObjectMemory) -> Option<R>) -> Option<R> {
        let objects = self.objects.lock().unwrap_or_else(|p| p.into_inner());
        objects.get(&memory_key(key)).and_then(f)
    }

    /// Records that a PATCH carrying secret values of `key` was sent now.
    pub fn secrets_sent(&self, key: &str) {
        self.with_object(key, |m| m.secrets_sent = Some(std::time::Instant::now()));
    }

    /// How long a change of Secret values alone must wait before `key` may
    /// be patched again ([`SECRETS_PATCH_INTERVAL`] after the last such
    /// PATCH); `None` when it may be sent now.
    pub fn secrets_due_in(&self, key: &str) -> Option<std::time::Duration> {
        let sent = self.recall(key, |m| m.secrets_sent)?;
        let wait = SECRETS_PATCH_INTERVAL.checked_sub(sent.elapsed())?;
        (!wait.is_zero()).then_some(wait)
    }

    /// True while `key` had no pass since the operator started (or since
    /// it was forgotten): the cold start of its pass. Reads only; the pass
    /// remembers it ([`Context::passed`]) once its writes are done.
    pub fn is_first_pass(&self, key: &str) -> bool {
        !self
            .seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&memory_key(key))
    }

    /// Remembers that `key` had a pass ([`Context::is_first_pass`]).
    pub fn passed(&self, key: &str) {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(memory_key(key));
    }

    /// Records that a mutation of `key` started revision `rid` just now.
    pub fn revision_started(&self, key: &str, rid: &str) {
        let started = (rid.to_owned(), std::time::Instant::now());
        self.with_object(key, |m| m.revision_started = Some(started));
    }

    /// When `key` polls revision `rid` of control plane `plane`: now, now
    /// as a scout, or after a wait without any request. Reads only: a
    /// scout is remembered by the pass's report ([`Context::scout`]).
    ///
    /// Only for a revision this operator started (its start time is known):
    /// when revisions of the plane have a learned duration, the poll waits
    /// for the expected end, at most until the longest poll interval after
    /// the start (a revision in progress is read at least that often); when
    /// nothing is learned yet, up to [`SCOUTS`]
    /// objects poll and the others check again after `poll_interval`
    /// (a wake-up with no request) until the scouts have learned it.
    pub fn poll_wait(&self, key: &str, plane: &str, rid: &str) -> PollDue {
        let Some(since) = self.recall(key, |m| match &m.revision_started {
            Some((r, at)) if r == rid => Some(at.elapsed()),
            _ => None,
        }) else {
            return PollDue::Now;
        };
        if let Some(expected) = self.expected_seconds(plane) {
            // Never longer than the longest poll interval after the start:
            // a revision in progress is read at least that often.
            let cap = self
                .config
                .max_poll_interval
                .saturating_sub(since)
                .as_secs_f64();
            let left = (expected - since.as_secs_f64()).min(cap);
            return if left > 0.5 {
                PollDue::In(Duration::from_secs_f64(left))
            } else {
                PollDue::Now
            };
        }
        let id = memory_key(key);
        let planes = self.plane_memory.lock().unwrap_or_else(|p| p.into_inner());
        let scouts = planes.get(plane).map(|p| &p.scouts);
        if scouts.is_none_or(|s| s.contains(&id) || s.len() < SCOUTS) {
            PollDue::Scout
        } else {
            PollDue::In(self.config.poll_interval)
        }
    }

    /// Remembers `key` among the scouts of `plane` ([`PollDue::Scout`]),
    /// while there is room ([`SCOUTS`]).
    pub fn scout(&self, key: &str, plane: &str) {
        let id = memory_key(key);
        let mut planes = self.plane_memory.lock().unwrap_or_else(|p| p.into_inner());
        let scouts = &mut planes.entry(plane.to_owned()).or_default().scouts;
        if scouts.len() < SCOUTS {
            scouts.insert(id);
        }
    }

    /// Forgets that `key` follows a revision (it ended, or was deleted).
    pub fn revision_ended(&self, key: &str) {
        self.with_object(key, |m| m.revision_started = None);
        self.drop_scout(memory_key(key));
    }

    /// Forgets every per-object state of `key` (the object was deleted):
    /// its entry, and its place among the scouts of any plane.
    pub fn forget(&self, key: &str) {
        let id = memory_key(key);
        self.objects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        self.drop_scout(id);
    }

    /// Removes the object `id` ([`memory_key`]) from the scouts of every
    /// plane.
    fn drop_scout(&self, id: u64) {
        let mut planes = self.plane_memory.lock().unwrap_or_else(|p| p.into_inner());
        for plane in planes.values_mut() {
            plane.scouts.remove(&id);
        }
    }

    /// Learns from a revision that reached DEPLOYED how long revisions of the
    /// control plane `plane` take (`updated_at - created_at`, weight 0.3 for
    /// the newest). Other statuses and unparsable times are ignored.
    pub fn learn_revision(&self, plane: &str, revision: &crate::controlplane::types::Revision) {
        use crate::controlplane::types::RevisionStatus;
        if revision.status != RevisionStatus::Deployed {
            return;
        }
        let parse = |t: &Option<String>| t.as_deref()?.parse::<k8s_openapi::jiff::Timestamp>().ok();
        let (Some(created), Some(updated)) =
            (parse(&revision.created_at), parse(&revision.updated_at))
        else {
            return;
        };
        let seconds = updated.duration_since(created).as_secs_f64();
        if !(0.0..86_400.0).contains(&seconds) {
            return;
        }
        let mut planes = self.plane_memory.lock().unwrap_or_else(|p| p.into_inner());
        let learned = &mut planes.entry(plane.to_owned()).or_default().revision_seconds;
        let mean = learned.get_or_insert(seconds);
        *mean = 0.7 * *mean + 0.3 * seconds;
    }

    /// How long revisions of `plane` are expected to take: the learned
    /// duration plus 10 %; `None` while nothing is learned.
    pub fn expected_duration(&self, plane: &str) -> Option<Duration> {
        self.expected_seconds(plane)
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
    }

    /// How long revisions of `plane` are expected to take: the learned
    /// duration plus 10 %, seconds; `None` while nothing is learned.
    fn expected_seconds(&self, plane: &str) -> Option<f64> {
        self.plane_memory
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(plane)?
            .revision_seconds
            .map(|s| s * 1.1)
    }

    /// The time left until a revision of `plane` is expected to end
    /// ([`Context::expected_seconds`]), counted from the revision's
    /// `created_at` (RFC 3339; `None`: it started just now). `None` when
    /// nothing was learned yet or the expected end has passed.
    pub fn expected_left(&self, plane: &str, created_at: Option<&str>) -> Option<Duration> {
        let expected = self.expected_seconds(plane)?;
        let age = match created_at {
            None => 0.0,
            Some(t) => {
                let created: k8s_openapi::jiff::Timestamp = t.parse().ok()?;
                k8s_openapi::jiff::Timestamp::now()
                    .duration_since(created)
                    .as_secs_f64()
            }
        };
        Duration::try_from_secs_f64(expected - age).ok()
    }

    /// Records one more failure of `key` and returns the backoff delay:
    /// 1 s doubling to `max_backoff`, with ±20 % jitter.
    pub fn backoff(&self, key: &str) -> Duration {
        let n = self.with_object(key, |m| {
            m.failures = m.failures.saturating_add(1);
            m.failures
        });
        backoff_delay(n, self.config.max_backoff)
    }

    /// Delay before the next poll of a revision in progress: `poll_interval`
    /// while the (revision, status) pair keeps changing, growing by half each
    /// unchanged poll up to `max_poll_interval`.
    pub fn poll_delay(&self, key: &str, revision_state: &str) -> Duration {
        let (delay, unchanged) = self.next_poll(key, revision_state);
        self.record_poll(key, revision_state, unchanged);
        delay
    }

    /// What [`Context::poll_delay`] decides, without recording it: the delay
    /// and how many polls will have seen `revision_state` unchanged
    /// (recorded by [`Context::record_poll`] once the pass's writes are done).
    pub fn next_poll(&self, key: &str, revision_state: &str) -> (Duration, u32) {
        let unchanged = self
            .recall(key, |m| match &m.poll {
                Some((state, n)) if state == revision_state => Some(n.saturating_add(1)),
                _ => None,
            })
            .unwrap_or(0);
        let delay = poll_delay(
            self.config.poll_interval,
            self.config.max_poll_interval,
            unchanged,
        );
        (delay, unchanged)
    }

    /// Records that `key` polled `revision_state`, seen `unchanged` times
    /// in a row before ([`Context::next_poll`]).
    pub fn record_poll(&self, key: &str, revision_state: &str, unchanged: u32) {
        let poll = (revision_state.to_owned(), unchanged);
        self.with_object(key, |m| m.poll = Some(poll));
    }

    /// The control plane client of the AgentControlPlane `name` in
    /// `namespace`, as every controller asks for it: the operator's request
    /// timeout and its metrics observer ([`planes::ClientCache::client_for`]).
    /// `Ok(Err(Blocked))`: the plane is missing, not ready, refused or its
    /// Secret is missing. Errors: Kubernetes API failures other than 404.
    pub async fn plane_client(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Result<crate::controlplane::ControlPlaneClient, resolve::Blocked>, Error> {
        self.planes
            .client_for(
                &self.client,
                namespace,
                name,
                self.config.request_timeout,
                Some(self.metrics.request_observer()),
            )
            .await
    }

    /// The client of the control plane `plane` names, for an object of
    /// `namespace`: its AgentControlPlane ([`Context::plane_client`]), or a
    /// ClusterAgentControlPlane the namespace may use
    /// ([`planes::ClientCache::client_for_cluster`]).
    ///
    /// Returns `Ok(Err(Blocked))` as [`Context::plane_client`] does, and
    /// with [`crate::api::conditions::reason::CONTROL_PLANE_NOT_ALLOWED`] when the namespace may
    /// not use the cluster plane (nothing is sent). Errors: Kubernetes API
    /// failures.
    pub async fn plane_client_for(
        &self,
        namespace: &str,
        plane: &crate::api::control_plane::ControlPlaneRef,
    ) -> Result<Result<crate::controlplane::ControlPlaneClient, resolve::Blocked>, Error> {
        if !plane.is_cluster() {
            return self.plane_client(namespace, &plane.name).await;
        }
        if let Some(refused) = self.cluster_plane_refused(namespace, &plane.name).await? {
            return Ok(Err(refused));
        }
        self.planes
            .client_for_cluster(
                &self.client,
                &plane.name,
                self.config.request_timeout,
                Some(self.metrics.request_observer()),
            )
            .await
    }

    /// Why an object of `namespace` may not use the ClusterAgentControlPlane
    /// `name` ([`crate::api::conditions::reason::CONTROL_PLANE_NOT_ALLOWED`], naming the plane and
    /// how to allow the namespace); `None`: it may (or the plane does not
    /// exist, which its client reports). Read from the watch stores, else
    /// from the API server. Errors: Kubernetes API failures.
    async fn cluster_plane_refused(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<resolve::Blocked>, Error> {
        use crate::api::cluster_control_plane::{AllowedNamespaces, ClusterAgentControlPlane};
        let plane = match self.planes.cached_cluster_plane(name) {
            Some(p) => p.spec.namespaces.clone(),
            None => {
                let api: kube::Api<ClusterAgentControlPlane> = kube::Api::all(self.client.clone());
                match api.get_opt(name).await.map_err(Error::Kube)? {
                    Some(p) => p.spec.namespaces,
                    None => return Ok(None),
                }
            }
        };
        let labels = match self.planes.cached_namespace_labels(namespace) {
            Some(l) => l,
            None => {
                let api: kube::Api<k8s_openapi::api::core::v1::Namespace> =
                    kube::Api::all(self.client.clone());
                api.get_metadata_opt(namespace)
                    .await
                    .map_err(Error::Kube)?
                    .and_then(|n| n.metadata.labels)
                    .unwrap_or_default()
            }
        };
        if plane.allows(namespace, &labels) {
            return Ok(None);
        }
        Ok(Some(resolve::Blocked {
            reason: crate::api::conditions::reason::CONTROL_PLANE_NOT_ALLOWED,
            message: format!(
                "namespace {namespace} may not use ClusterAgentControlPlane {name}; nothing is sent. The platform team can {}",
                AllowedNamespaces::how_to_allow(namespace, name)
            ),
        }))
    }

    /// Forgets the polling state of `key` (the revision ended).
    pub fn reset_polls(&self, key: &str) {
        self.with_object(key, |m| m.poll = None);
    }

    /// Forgets the failures of `key` after a successful pass.
    pub fn reset_backoff(&self, key: &str) {
        self.with_object(key, |m| m.failures = 0);
    }
}

/// `Kind/namespace/name` of an object: the key of its backoff and polling
/// state in [`Context`].
pub fn object_key<K: kube::Resource<DynamicType = ()>>(obj: &K) -> String {
    format!(
        "{}/{}/{}",
        K::kind(&()),
        obj.meta().namespace.as_deref().unwrap_or_default(),
        obj.meta().name.as_deref().unwrap_or_default()
    )
}

/// `d` ± 25 % (uniform), so that many objects do not re-check in lockstep:
/// a fleet that became Ready within a few minutes spreads its drift checks
/// over half a period within a few periods, instead of checking in bursts
/// (the mean interval stays `d`).
pub fn jittered(d: Duration) -> Duration {
    d.mul_f64(rand::random_range(0.75..1.25))
}

/// How often an AgentControlPlane being deleted lists the AgentDeployments
/// that still use it (one list of its namespace, nothing remote), ±25 %.
pub const IN_USE_RECHECK: Duration = Duration::from_secs(2);

/// The requeue of a failed pass, shared by every `error_policy`: the
/// service's `Retry-After` if longer, else the per-object exponential backoff
/// (capped at `max_backoff`); logs the failure with its fixed reason.
pub fn requeue_after_error<K: kube::Resource<DynamicType = ()>>(
    ctx: &Context,
    obj: &K,
    error: &Error,
) -> Action {
    if let Error::InUse(message) = error {
        // Not a failure: the plane waits for its users' deletions, which take
        // as long as the control plane's asynchronous deletes.
        tracing::debug!(%message, "kept for the AgentDeployments that use it");
        return Action::requeue(jittered(IN_USE_RECHECK));
    }
    let backoff = ctx.backoff(&object_key(obj));
    let delay = error.retry_after().map_or(backoff, |r| r.max(backoff));
    tracing::warn!(
        kind = %K::kind(&()),
        namespace = obj.meta().namespace.as_deref().unwrap_or_default(),
        name = obj.meta().name.as_deref().unwrap_or_default(),
        reason = error.reason(),
        error = %error,
        retry_in_s = delay.as_secs_f64(),
        "reconcile failed"
    );
    Action::requeue(delay)
}

/// An `Api` of a namespaced kind in `namespace` (`None`: all namespaces).
pub fn scoped_api<K>(client: &kube::Client, namespace: Option<&str>) -> kube::Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespace {
        None => kube::Api::all(client.clone()),
        Some(ns) => kube::Api::namespaced(client.clone(), ns),
    }
}

/// Wraps a reconcile function so that each pass is timed and counted in
/// `ctx.metrics` under `kind` (`blocked` when it reported the object
/// `Stalled`, [`crate::metrics::track_pass`]).
pub fn observed<K, F, Fut>(
    kind: &'static str,
    reconcile: F,
) -> impl FnMut(
    std::sync::Arc<K>,
    std::sync::Arc<Context>,
) -> futures::future::BoxFuture<'static, Result<Action, Error>>
where
    F: Fn(std::sync::Arc<K>, std::sync::Arc<Context>) -> Fut + Copy + Send + 'static,
    Fut: std::future::Future<Output = Result<Action, Error>> + Send + 'static,
    K: Send + Sync + 'static,
{
    move |obj, ctx| {
        Box::pin(async move {
            let start = std::time::Instant::now();
            let (result, blocked) = crate::metrics::track_pass(reconcile(obj, ctx.clone())).await;
            ctx.metrics.observe_reconcile(
                kind,
                result.as_ref().err().map(Error::reason),
                blocked,
                start.elapsed(),
            );
            result
        })
    }
}

/// `base * 1.5^unchanged`, capped at `max`.
pub fn poll_delay(base: Duration, max: Duration, unchanged: u32) -> Duration {
    base.mul_f64(1.5f64.powi(unchanged.min(30) as i32))
        .min(max.max(base))
}

/// Exponential backoff: `2^(attempt-1)` seconds capped at `max`, with ±20 %
/// jitter so that many objects failing together do not retry in lockstep.
pub fn backoff_delay(attempt: u32, max: Duration) -> Duration {
    let base = Duration::from_secs(1u64 << attempt.saturating_sub(1).min(20)).min(max);
    let jitter = rand::random_range(0.8..1.2);
    base.mul_f64(jitter).min(max)
}

pub use error::{Error, ErrorKind};

#[cfg(test)]
mod tests {
    use super::*;

    /// A context whose Kubernetes client is never called.
    fn context() -> Context {
        let service = tower::service_fn(|_: http::Request<kube::client::Body>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(kube::client::Body::from(
                Vec::new(),
            )))
        });
        Context::new(
            kube::Client::new(service, "default"),
            OperatorConfig::default(),
        )
    }

    fn entries(ctx: &Context) -> usize {
        ctx.objects.lock().unwrap().len()
    }

    /// One entry per object, whatever it remembers; none once it holds
    /// nothing, or once the object is forgotten; objects of two kinds with
    /// one name never share one.
    #[tokio::test]
    async fn the_memory_of_an_object_is_one_entry_until_forgotten() {
        let ctx = context();
        let (agd, acp) = ("AgentDeployment/ns/a", "AgentControlPlane/ns/a");
        assert!(ctx.is_first_pass(agd));
        ctx.passed(agd);
        assert!(!ctx.is_first_pass(agd));
        ctx.backoff(agd);
        ctx.secrets_sent(agd);
        ctx.revision_started(agd, "r1");
        ctx.record_poll(agd, "r1/BUILDING", 2);
        assert_eq!(entries(&ctx), 1);
        assert_eq!(ctx.next_poll(agd, "r1/BUILDING").1, 3);
        assert!(ctx.secrets_due_in(agd).is_some());
        // A failure of another kind's object of the same name is its own.
        ctx.backoff(acp);
        assert_eq!(entries(&ctx), 2);
        ctx.reset_backoff(acp);
        assert_eq!(entries(&ctx), 1, "an entry that holds nothing goes");
        assert_eq!(ctx.poll_wait(agd, "plane", "r1"), PollDue::Scout);
        ctx.scout(agd, "plane");
        ctx.forget(agd);
        assert_eq!(entries(&ctx), 0);
        assert!(ctx.secrets_due_in(agd).is_none());
        assert_eq!(ctx.next_poll(agd, "r1/BUILDING").1, 0);
        assert!(
            ctx.is_first_pass(agd),
            "a new object of that name starts cold"
        );
        let planes = ctx.plane_memory.lock().unwrap();
        assert!(planes["plane"].scouts.is_empty(), "no longer a scout");
    }

    /// A learned duration longer than the longest poll interval does not
    /// put the first read of a revision off beyond that interval.
    #[tokio::test]
    async fn a_long_learned_revision_is_still_read_within_the_longest_poll_interval() {
        let ctx = context();
        let agd = "AgentDeployment/ns/a";
        let hour: crate::controlplane::types::Revision =
            serde_json::from_value(serde_json::json!({
            "id": "r0", "status": "DEPLOYED",
            "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T01:00:00Z"}))
            .expect("a revision");
        ctx.learn_revision("plane", &hour);
        ctx.revision_started(agd, "r1");
        let PollDue::In(wait) = ctx.poll_wait(agd, "plane", "r1") else {
            panic!("a wait");
        };
        assert!(
            wait <= ctx.config.max_poll_interval,
            "{wait:?} beyond {:?}",
            ctx.config.max_poll_interval
        );
        assert!(wait > ctx.config.max_poll_interval / 2, "{wait:?}");
    }

    #[test]
    fn polling_backs_off_to_the_cap() {
        let base = Duration::from_secs(2);
        let max = Duration::from_secs(30);
        assert_eq!(poll_delay(base, max, 0), base);
        assert_eq!(poll_delay(base, max, 1), Duration::from_secs(3));
        assert!(poll_delay(base, max, 3) > poll_delay(base, max, 2));
        assert_eq!(poll_delay(base, max, 50), max);
    }

    #[test]
    fn error_backoff_grows_with_jitter_and_caps() {
        let max = Duration::from_secs(300);
        let first = backoff_delay(1, max);
        assert!(first >= Duration::from_millis(800) && first <= Duration::from_millis(1200));
        let fifth = backoff_delay(5, max);
        assert!(fifth >= Duration::from_millis(12_800) && fifth <= Duration::from_millis(19_200));
        assert!(backoff_delay(40, max) <= max);
    }
}
