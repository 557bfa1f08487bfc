//! One control plane client per `AgentControlPlane`, shared by every resource
//! that uses it.
//!
//! [`ClientCache`] keeps one [`ControlPlaneClient`] per (namespace,
//! AgentControlPlane name), so that every AgentDeployment and AgentListener of
//! a control plane goes through the same client, hence the same client-side
//! rate-limit bucket (`spec.requestsPerSecond`, `spec.burst`). Each lookup reads
//! the AgentControlPlane and its Secrets from the Kubernetes API and rebuilds
//! the client when one of them changed: the AgentControlPlane's uid or
//! generation (its spec), or the `resourceVersion` of the API key Secret or of
//! the CA bundle Secret. A rotated API key is therefore used by the next
//! reconcile, without restarting the operator.
//!
//! The AgentControlPlane's `resourceVersion` is deliberately not part of the
//! fingerprint: status writes change it, and rebuilding on each of them would
//! reset the shared rate-limit bucket for nothing.
//!
//! Source: docs/control-plane-api.md "Hosts and headers" (the key and
//! workspace headers, self-hosted hosts), "Rate limits" (nothing published
//! for the control plane) and "Errors" (429, `Retry-After`).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, ResourceExt};
use secrecy::SecretString;

use super::resolve::Blocked;
use crate::api::SecretKeyRef;
use crate::api::cluster_control_plane::ClusterAgentControlPlane;
use crate::api::conditions::reason;
use crate::api::control_plane::{AgentControlPlane, AgentControlPlaneSpec};
use crate::controller::error::Error;
use crate::controlplane::{
    Budget, ClientConfig, ControlPlaneClient, PlaneLabel, RateLimit, RequestObserver,
};
use crate::metrics::PlaneSample;
use secrecy::ExposeSecret;

/// What a cached client was built from; a difference means "rebuild".
#[derive(Clone, Debug, PartialEq, Eq)]
struct Fingerprint {
    /// uid of the AgentControlPlane (a deleted and re-created one is new).
    uid: Option<String>,
    /// `metadata.generation` of the AgentControlPlane (its spec).
    generation: Option<i64>,
    /// `resourceVersion` of the API key Secret.
    api_key_version: Option<String>,
    /// `resourceVersion` of the CA bundle Secret, if one is referenced.
    ca_bundle_version: Option<String>,
    /// Per-request timeout the client was built with.
    request_timeout: Duration,
}

struct Entry {
    fingerprint: Fingerprint,
    observer: Option<Arc<dyn RequestObserver>>,
    client: ControlPlaneClient,
    /// The buckets every request of `client` takes a token from: the
    /// budget of its (base URL, credential), then its caps.
    buckets: Vec<Budget>,
}

/// Which budget a control plane's requests draw from: its base URL and a
/// SHA-256 digest of its credential (the service limits per API key,
/// docs/control-plane-api.md "Rate limits"). The digest never leaves the
/// process: no `Debug`, no metric label, no log.
#[derive(Clone, PartialEq, Eq, Hash)]
struct BudgetKey {
    base_url: String,
    credential: [u8; 32],
}

impl BudgetKey {
    fn new(base_url: &str, bearer: bool, credential: &str) -> Self {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        h.update([u8::from(bearer)]);
        h.update(credential.as_bytes());
        Self {
            base_url: base_url.trim_end_matches('/').to_owned(),
            credential: h.finalize().into(),
        }
    }
}

/// What one AgentControlPlane contributes to the budget of its key.
struct BudgetUser {
    key: BudgetKey,
    workspace: String,
    limit: Option<RateLimit>,
}

/// The budgets of every control plane the operator talks to.
#[derive(Default)]
struct Budgets {
    /// One adaptive budget per (base URL, credential), kept for the life
    /// of the process (a deleted and re-created AgentControlPlane finds its
    /// learned rate and a pending `Retry-After` again).
    by_key: HashMap<BudgetKey, Budget>,
    /// The AgentControlPlanes using each key, by (namespace, name).
    users: HashMap<(String, String), BudgetUser>,
    /// A declared `requestsPerSecond` as the fixed share of its workspace
    /// on a key that serves several workspaces or a larger declared rate.
    shares: HashMap<(BudgetKey, String), Budget>,
    /// One fixed ceiling per base URL for the whole operator.
    hosts: HashMap<String, Budget>,
}

impl Budgets {
    /// The adaptive budget of `key`, its ceiling set to `declared`.
    fn of_key(&mut self, key: &BudgetKey, declared: Option<RateLimit>) -> Budget {
        let budget = self
            .by_key
            .entry(key.clone())
            .or_insert_with(|| Budget::new(declared))
            .clone();
        budget.set_limit(declared);
        budget
    }

    /// The fixed share of `workspace` on `key` at `limit`; `None` (no
    /// share needed) drops the one it had.
    fn share(
        &mut self,
        key: &BudgetKey,
        workspace: &str,
        limit: Option<RateLimit>,
    ) -> Option<Budget> {
        let share_key = (key.clone(), workspace.to_owned());
        let Some(l) = limit else {
            self.shares.remove(&share_key);
            return None;
        };
        let share = self
            .shares
            .entry(share_key)
            .or_insert_with(|| Budget::new(Some(l)))
            .clone();
        share.set_limit(Some(l));
        Some(share)
    }

    /// The ceiling of all requests to `base_url`, set to `ceiling`.
    fn host(&mut self, base_url: &str, ceiling: RateLimit) -> Budget {
        let host = self
            .hosts
            .entry(base_url.to_owned())
            .or_insert_with(|| Budget::new(Some(ceiling)))
            .clone();
        host.set_limit(Some(ceiling));
        host
    }
}

/// The largest of `limits`, rate and burst each on its own; `None` when
/// there is none.
fn largest(limits: impl Iterator<Item = RateLimit>) -> Option<RateLimit> {
    limits.reduce(|a, l| RateLimit {
        requests_per_second: a.requests_per_second.max(l.requests_per_second),
        burst: a.burst.max(l.burst),
    })
}

/// Default ceiling of all requests to one base URL, requests per second:
/// everything the operator sends leaves from one address, and the service
/// also limits per client address (docs/control-plane-api.md "Rate
/// limits": 2000 requests per 10 s per IP on the routes that limit by
/// address, 2000 per minute per key on all routes).
pub const DEFAULT_HOST_CEILING: f64 = 100.0;

/// How long a request of a reconcile pass waits for its budget before the
/// pass gives up and requeues ([`crate::controlplane::ClientConfig::max_token_wait`]).
pub const MAX_TOKEN_WAIT: Duration = Duration::from_secs(5);

/// The admission of one AgentControlPlane's reconcile passes: a cap on the
/// reconcile permits its passes hold at once, and counts for
/// `agent_operator_reconcile_queue`.
#[derive(Debug)]
pub struct PlaneGate {
    /// Permits of this control plane's passes (the cap).
    pub permits: Arc<tokio::sync::Semaphore>,
    /// Passes holding a reconcile permit.
    pub running: std::sync::atomic::AtomicI64,
    /// Passes waiting for a permit.
    pub waiting: std::sync::atomic::AtomicI64,
    /// Objects requeued until the control plane can send again, with the
    /// instant they run again.
    deferred: Mutex<HashMap<String, tokio::time::Instant>>,
    /// Passes put off so far.
    pub deferred_total: std::sync::atomic::AtomicU64,
    /// Passes put off because [`Self::queue_bound`] passes already wait
    /// ([`Self::admit`]), woken in their order as the queue drains.
    parked: Mutex<Parked>,
    /// How many passes may wait for this control plane's permits at once:
    /// [`QUEUE_PER_PERMIT`] per permit.
    queue_bound: usize,
}

/// Passes of one control plane that may wait for its permits at once, per
/// permit: beyond `QUEUE_PER_PERMIT × permits` a pass is parked
/// ([`PlaneGate::admit`]) until one of those waiting takes its permit.
///
/// Why a bound: every waiting pass is a task that kube-runtime's runner
/// (5.0, `controller/future_hash_map.rs`) polls each time any pass ends, so
/// thousands of waiting passes (a fleet applied at once) cost CPU that
/// grows with the square of the fleet, and memory for each task. A parked
/// pass is one entry in a queue and nothing in the runner.
///
/// Why this many: the waiting passes are the permits' reserve, refilled as
/// each takes its permit, so eight rounds of passes are ready whenever a
/// permit frees.
pub const QUEUE_PER_PERMIT: usize = 8;

/// How long a woken pass keeps its place among the waiting ones
/// ([`PlaneGate::admit`]): one that never comes (its object was deleted
/// meanwhile) gives the place back after this.
pub const WOKEN_FOR: Duration = Duration::from_secs(10);

/// The parked passes of one control plane ([`PlaneGate::admit`]).
#[derive(Default)]
struct Parked {
    /// Keys of parked objects in their order, each with what wakes it.
    queue: std::collections::VecDeque<(String, Waker)>,
    /// The keys in `queue` (an object is parked once).
    keys: std::collections::HashSet<String>,
    /// Objects woken and not yet back, with when they were woken: each
    /// holds a place among the waiting passes for [`WOKEN_FOR`].
    woken: HashMap<String, tokio::time::Instant>,
}

impl fmt::Debug for Parked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Parked")
            .field("parked", &self.queue.len())
            .field("woken", &self.woken.len())
            .finish()
    }
}

/// What wakes a parked pass: it asks its controller to run the object's
/// pass now.
pub type Waker = Box<dyn FnOnce() + Send>;

impl Parked {
    /// Pops the objects to wake so that `waiting` plus the woken reach
    /// `bound`, and records them as woken.
    fn take(&mut self, waiting: usize, bound: usize) -> Vec<Waker> {
        let now = tokio::time::Instant::now();
        self.woken
            .retain(|_, at| now.duration_since(*at) < WOKEN_FOR);
        let room = bound.saturating_sub(waiting + self.woken.len());
        let mut wakes = Vec::new();
        while wakes.len() < room {
            let Some((key, wake)) = self.queue.pop_front() else {
                break;
            };
            self.keys.remove(&key);
            self.woken.insert(key, now);
            wakes.push(wake);
        }
        wakes
    }
}

impl PlaneGate {
    fn new(cap: usize) -> Self {
        let cap = cap.max(1);
        Self {
            permits: Arc::new(tokio::sync::Semaphore::new(cap)),
            running: Default::default(),
            waiting: Default::default(),
            deferred: Default::default(),
            deferred_total: Default::default(),
            parked: Default::default(),
            queue_bound: cap.saturating_mul(QUEUE_PER_PERMIT),
        }
    }

    fn parked(&self) -> std::sync::MutexGuard<'_, Parked> {
        self.parked.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn waiting_now(&self) -> usize {
        usize::try_from(self.waiting.load(std::sync::atomic::Ordering::Relaxed)).unwrap_or(0)
    }

    /// Admits the pass of `object` among those waiting for this control
    /// plane's permits (counted in [`Self::waiting`]; the caller takes a
    /// permit, then calls [`Self::took_permit`]), or parks it: `false`, and
    /// `wake` is called when its turn comes.
    ///
    /// A pass is admitted when it was woken (it takes the place kept for
    /// it), or when nothing is parked and fewer than the bound
    /// ([`QUEUE_PER_PERMIT`] per permit) wait. Otherwise it is parked
    /// behind the others, first come, first served (an object already
    /// parked keeps its place). Parked passes hold no task, no permit and
    /// nothing of the object.
    pub fn admit(&self, object: &str, wake: impl FnOnce() + Send + 'static) -> bool {
        use std::sync::atomic::Ordering;
        {
            let mut parked = self.parked();
            let woken = parked.woken.remove(object).is_some();
            let room = self.waiting_now() + parked.woken.len() < self.queue_bound;
            if woken || (parked.queue.is_empty() && room) {
                self.waiting.fetch_add(1, Ordering::Relaxed);
                return true;
            }
            if parked.keys.insert(object.to_owned()) {
                parked.queue.push_back((object.to_owned(), Box::new(wake)));
                self.deferred_total.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.refill();
        false
    }

    /// Records that an admitted pass left the waiting ones (it took its
    /// permit, or was put off), and wakes the parked passes that now have
    /// room.
    pub fn took_permit(&self) {
        self.waiting
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        self.refill();
    }

    /// Wakes the parked passes that have room among the waiting ones (the
    /// wakes are called with the lock released).
    fn refill(&self) {
        let wakes = self.parked().take(self.waiting_now(), self.queue_bound);
        wakes.into_iter().for_each(|w| w());
    }

    /// Parked passes (not yet woken).
    pub fn parked_now(&self) -> usize {
        self.parked().queue.len()
    }

    /// Records that the pass of `object` was put off for `by`.
    pub fn defer(&self, object: &str, by: Duration) {
        use std::sync::atomic::Ordering;
        self.deferred_total.fetch_add(1, Ordering::Relaxed);
        let mut d = self.deferred.lock().unwrap_or_else(|p| p.into_inner());
        let now = tokio::time::Instant::now();
        d.retain(|_, until| *until > now);
        d.insert(object.to_owned(), now + by);
    }

    /// Records that `object` runs now (no longer deferred).
    pub fn resume(&self, object: &str) {
        self.deferred
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(object);
    }

    /// Objects whose deferral has not ended yet, the parked ones
    /// ([`Self::admit`]) included.
    pub fn deferred_now(&self) -> usize {
        let now = tokio::time::Instant::now();
        let deferred = self
            .deferred
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|until| **until > now)
            .count();
        deferred + self.parked_now()
    }
}

/// The reflector stores of one controller: AgentControlPlanes and Secret
/// metadata.
type WatchStores = (Store<AgentControlPlane>, Store<PartialObjectMeta<Secret>>);

/// Which control plane object a client serves: the key of its cache entry,
/// budget user, admission gate and metric labels (`(namespace, name)` of an
/// AgentControlPlane; `("", name)` of a ClusterAgentControlPlane, a name no
/// namespace has), how messages name it, and the namespace of its Secrets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// `(namespace, name)`; `("", name)` for a cluster plane.
    pub key: (String, String),
    /// `AgentControlPlane NS/NAME` or `ClusterAgentControlPlane NAME`.
    pub shown: String,
    /// Where its Secrets (key, CA bundle) are read.
    pub secret_namespace: String,
}

impl Origin {
    /// The AgentControlPlane `namespace`/`name` (its Secrets in its own
    /// namespace).
    pub fn namespaced(namespace: &str, name: &str) -> Self {
        Self {
            key: (namespace.to_owned(), name.to_owned()),
            shown: format!("AgentControlPlane {namespace}/{name}"),
            secret_namespace: namespace.to_owned(),
        }
    }

    /// The ClusterAgentControlPlane `name`, its Secrets in the cluster
    /// resource namespace `secrets`.
    pub fn cluster(name: &str, secrets: &str) -> Self {
        Self {
            key: (String::new(), name.to_owned()),
            shown: format!("ClusterAgentControlPlane {name}"),
            secret_namespace: secrets.to_owned(),
        }
    }

    /// The plane a `controlPlaneRef` of an object of `namespace` names
    /// (`secrets`: the cluster resource namespace, for a cluster plane).
    pub fn of_ref(
        namespace: &str,
        plane: &crate::api::control_plane::ControlPlaneRef,
        secrets: &str,
    ) -> Self {
        if plane.is_cluster() {
            Self::cluster(&plane.name, secrets)
        } else {
            Self::namespaced(namespace, &plane.name)
        }
    }
}

/// Cache of control plane clients keyed by (namespace, AgentControlPlane
/// name). Cheap to share: one per operator, in [`super::context::Shared`].
#[derive(Default)]
pub struct ClientCache {
    entries: Mutex<HashMap<(String, String), Entry>>,
    /// The budgets, kept apart from the clients so that a client rebuilt
    /// after a spec change keeps the bucket, its learned rate and a
    /// pending `Retry-After`.
    budgets: Mutex<Budgets>,
    /// Ceiling of all requests to one base URL (default
    /// [`DEFAULT_HOST_CEILING`]).
    host_ceiling: Mutex<Option<RateLimit>>,
    /// The hosts a control plane URL may name (`--allowed-hosts`; default
    /// [`crate::allowlist::DEFAULT_ALLOWED_HOSTS`]): a client is never built
    /// for another.
    allowed_hosts: Mutex<crate::allowlist::HostAllowlist>,
    /// This operator's shard (`--shard`): an AgentControlPlane of another
    /// shard, read by name, is never used (its budget is another process's).
    shard: Mutex<crate::shard::Shard>,
    /// The admission gate of each AgentControlPlane, by (namespace, name).
    gates: Mutex<HashMap<(String, String), Arc<PlaneGate>>>,
    /// Reconcile permits one AgentControlPlane's passes may hold at once
    /// (0: unset, see [`ClientCache::set_plane_permits`]).
    plane_permits: std::sync::atomic::AtomicUsize,
    /// Reflector stores of AgentControlPlanes and of Secret metadata filled
    /// by the controllers' watches: when a cached client's fingerprint still
    /// matches them, a pass reads nothing from the Kubernetes API.
    stores: Mutex<Vec<WatchStores>>,
    /// The ClusterAgentControlPlane stores (their watch, when the operator
    /// watches every namespace).
    cluster_stores: Mutex<Vec<Store<ClusterAgentControlPlane>>>,
    /// Where the Secrets of ClusterAgentControlPlanes are
    /// (`--cluster-resource-namespace`).
    cluster_resource_namespace: Mutex<String>,
    /// The metadata of every Namespace (their labels decide which may use a
    /// ClusterAgentControlPlane), when the operator watches them.
    namespaces: Mutex<Option<Store<PartialObjectMeta<k8s_openapi::api::core::v1::Namespace>>>>,
}

impl fmt::Debug for ClientCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries = self.lock();
        f.debug_struct("ClientCache")
            .field("planes", &entries.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The client-side rate limit of a control plane: `requestsPerSecond` with
/// `burst` (default: `requestsPerSecond` rounded up, at least 1); `None` when
/// `requestsPerSecond` is unset or not a positive finite number.
pub fn rate_limit(spec: &AgentControlPlaneSpec) -> Option<RateLimit> {
    let rps = spec
        .requests_per_second
        .filter(|r| r.is_finite() && *r > 0.0)?;
    let default_burst = rps.ceil().clamp(1.0, f64::from(u32::MAX)) as u32;
    Some(RateLimit {
        requests_per_second: rps,
        burst: spec.burst.unwrap_or(default_burst).max(1),
    })
}

/// What a control plane client is built from, read from the Secrets an
/// AgentControlPlane references (`Debug` is not derived: the key is inside).
struct Credentials {
    /// The API key or bearer token, trimmed, never empty.
    api_key: SecretString,
    /// `resourceVersion` of its Secret.
    api_key_version: Option<String>,
    /// The CA bundle (PEM bytes), if `caBundleSecretRef` is set.
    ca_bundle: Option<Vec<u8>>,
    /// `resourceVersion` of the CA bundle Secret.
    ca_bundle_version: Option<String>,
}

/// Reads the credential (`apiKeySecretRef` or `bearerTokenSecretRef`) and
/// the CA bundle of `plane` (from the Secrets of `origin`) with
/// [`read_secret`].
///
/// `Ok(Err(Blocked))`: neither reference is set ([`reason::INVALID_SPEC`]),
/// or a Secret or key is missing or the credential is empty
/// ([`reason::SECRET_NOT_FOUND`]). Errors: Kubernetes API failures other
/// than 404. Messages never hold a value.
async fn read_credentials(
    kube: &kube::Client,
    plane: &AgentControlPlane,
    origin: &Origin,
) -> Result<Result<Credentials, Blocked>, Error> {
    let shown = &origin.shown;
    let namespace = origin.secret_namespace.as_str();
    let Some(credential_ref) = plane.spec.credential_ref() else {
        return Ok(Err(Blocked {
            reason: reason::INVALID_SPEC,
            message: format!("{shown}: sets neither apiKeySecretRef nor bearerTokenSecretRef"),
        }));
    };
    let what = if plane.spec.uses_bearer_token() {
        "bearer token"
    } else {
        "API key"
    };
    let (api_key, api_key_version) =
        match read_secret(kube, namespace, shown, what, credential_ref).await? {
            Ok(v) => v,
            Err(blocked) => return Ok(Err(blocked)),
        };
    let (ca_bundle, ca_bundle_version) = match &plane.spec.ca_bundle_secret_ref {
        None => (None, None),
        Some(r) => match read_secret(kube, namespace, shown, "CA bundle", r).await? {
            Ok((pem, version)) => (Some(pem), version),
            Err(blocked) => return Ok(Err(blocked)),
        },
    };
    let api_key = String::from_utf8_lossy(&api_key).trim().to_owned();
    if api_key.is_empty() {
        let r = credential_ref;
        return Ok(Err(Blocked {
            reason: reason::SECRET_NOT_FOUND,
            message: format!(
                "{shown}: {what} Secret {namespace}/{} key {:?} is empty",
                r.name, r.key
            ),
        }));
    }
    Ok(Ok(Credentials {
        api_key: SecretString::from(api_key),
        api_key_version,
        ca_bundle,
        ca_bundle_version,
    }))
}

/// Reads `key` of the Secret `r` in `namespace`: its bytes and the Secret's
/// `resourceVersion`. `shown` names the plane and `what` the Secret's role
/// in the messages (e.g. `API key`). A missing Secret or key is `Ok(Err(Blocked))` with
/// [`reason::SECRET_NOT_FOUND`]; other API errors are `Err`. The messages
/// never contain the value.
async fn read_secret(
    client: &kube::Client,
    namespace: &str,
    shown: &str,
    what: &str,
    r: &SecretKeyRef,
) -> Result<Result<(Vec<u8>, Option<String>), Blocked>, Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let missing = |detail: String| Blocked {
        reason: reason::SECRET_NOT_FOUND,
        message: format!("{shown}: {what} {detail}"),
    };
    let Some(secret) = api.get_opt(&r.name).await.map_err(Error::Kube)? else {
        return Ok(Err(missing(format!(
            "Secret {namespace}/{} not found",
            r.name
        ))));
    };
    let value = secret
        .data
        .as_ref()
        .and_then(|d| d.get(&r.key))
        .map(|b| b.0.clone())
        .or_else(|| {
            secret
                .string_data
                .as_ref()
                .and_then(|d| d.get(&r.key))
                .map(|s| s.as_bytes().to_vec())
        });
    Ok(match value {
        Some(v) => Ok((v, secret.resource_version())),
        None => Err(missing(super::resolve::missing_key(
            namespace,
            &r.name,
            &r.key,
            super::resolve::key_names(&secret),
        ))),
    })
}

/// True when an entry built with `built` may serve a caller that passes
/// `wanted`: a caller without an observer accepts any entry; a caller with one
/// needs an entry built with the same observer (same allocation).
fn observer_fits(
    built: &Option<Arc<dyn RequestObserver>>,
    wanted: &Option<Arc<dyn RequestObserver>>,
) -> bool {
    match (built, wanted) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some(b), Some(w)) => std::ptr::addr_eq(Arc::as_ptr(b), Arc::as_ptr(w)),
    }
}

impl ClientCache {
    /// Sets the hosts a control plane URL may name (`--allowed-hosts`),
    /// before the first client is built.
    pub fn set_allowed_hosts(&self, hosts: crate::allowlist::HostAllowlist) {
        *self.allowed_hosts.lock().unwrap_or_else(|p| p.into_inner()) = hosts;
    }

    /// The hosts a control plane URL may name.
    pub fn allowed_hosts(&self) -> crate::allowlist::HostAllowlist {
        self.allowed_hosts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// `Some` ([`reason::HOST_NOT_ALLOWED`], naming the field, the host and
    /// the flag) when `plane`'s URL (or the host of its region) is outside
    /// [`ClientCache::allowed_hosts`]; `None` when allowed or when the spec
    /// names no URL at all.
    fn host_refused(&self, plane: &AgentControlPlane, origin: &Origin) -> Option<Blocked> {
        let base_url = plane.spec.base_url()?;
        let field = if plane.spec.url.is_some() {
            "spec.url"
        } else {
            "spec.region"
        };
        let refused = self
            .allowed_hosts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .check(&base_url, field)
            .err()?;
        Some(Blocked {
            reason: reason::HOST_NOT_ALLOWED,
            message: format!("{}: {refused}", origin.shown),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The client of the AgentControlPlane `name` in `namespace`, from the
    /// cache or (re)built when the AgentControlPlane or its Secrets changed.
    ///
    /// `request_timeout` is the per-request timeout of the client (part of
    /// the cache key's fingerprint); `observer` receives one observation per
    /// request (a caller with an observer never gets a client built with
    /// another one; a caller without one takes whatever is cached).
    ///
    /// Returns `Ok(Err(Blocked))` when the AgentControlPlane does not exist,
    /// reports `Stalled=True` (wrong key, forbidden workspace) or is not usable
    /// (reason [`reason::CONTROL_PLANE_NOT_READY`]), its host is not allowed
    /// ([`reason::HOST_NOT_ALLOWED`]) or a referenced Secret or key is
    /// missing ([`reason::SECRET_NOT_FOUND`]). Errors: Kubernetes API
    /// failures other than 404. Nothing returned ever contains the API key.
    pub async fn client_for(
        &self,
        kube: &kube::Client,
        namespace: &str,
        name: &str,
        request_timeout: Duration,
        observer: Option<Arc<dyn RequestObserver>>,
    ) -> Result<Result<ControlPlaneClient, Blocked>, Error> {
        if let Some(client) = self.cached_by_stores(namespace, name, request_timeout, &observer) {
            return Ok(Ok(client));
        }
        let api: Api<AgentControlPlane> = Api::namespaced(kube.clone(), namespace);
        let Some(plane) = api.get_opt(name).await.map_err(Error::Kube)? else {
            self.forget(namespace, name);
            return Ok(Err(Blocked {
                reason: reason::CONTROL_PLANE_NOT_READY,
                message: format!("AgentControlPlane {namespace}/{name} not found"),
            }));
        };
        let origin = Origin::namespaced(namespace, name);
        if let Some(blocked) = self.not_usable(&plane, &origin) {
            return Ok(Err(blocked));
        }
        Ok(self
            .client_for_origin(kube, &plane, &origin, request_timeout, observer)
            .await?
            .map_err(as_users_see_it))
    }

    /// Why the AgentControlPlane `plane` (read as `namespace`/`name`) is
    /// not usable by this process now, checked in this order: another shard
    /// keeps its budget, its host is not allowed, it is stalled, or its own
    /// probe has not judged its current spec and key yet; `None`: usable.
    fn not_usable(&self, plane: &AgentControlPlane, origin: &Origin) -> Option<Blocked> {
        let shown = &origin.shown;
        let foreign = self
            .shard
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .foreign_plane(plane.labels());
        if let Some(why) = foreign {
            // Its budget is kept by another process: using it here would
            // let two shards spend one workspace's limit.
            return Some(Blocked {
                reason: reason::CONTROL_PLANE_NOT_READY,
                message: format!("{shown} is not usable here: {why}"),
            });
        }
        if let Some(refused) = self.host_refused(plane, origin) {
            return Some(refused);
        }
        if let Some(why) = stalled(plane) {
            // Its AgentDeployments wait with a reason pointing at it instead
            // of each failing against the control plane.
            return Some(Blocked {
                reason: reason::CONTROL_PLANE_NOT_READY,
                message: format!("{shown} is not ready: {why}"),
            });
        }
        // Nothing is sent for a plane before its own probe has judged its
        // current spec and key: a refused key would otherwise cost one
        // refused request per AgentDeployment.
        (!checked(plane)).then(|| not_checked(origin))
    }

    /// Like [`ClientCache::client_for`] (without the `Stalled` check), for an AgentControlPlane already
    /// read. Blocked reasons are from the control plane's own point of view:
    /// [`reason::SECRET_NOT_FOUND`] for a missing Secret or key, and
    /// [`reason::INVALID_SPEC`] when no client can be built from the spec (no
    /// region or url, a URL that does not parse or is plain HTTP to a
    /// non-loopback host, a CA bundle that is not PEM, an API key that is
    /// empty or not a valid header value).
    pub async fn client_for_plane(
        &self,
        kube: &kube::Client,
        plane: &AgentControlPlane,
        request_timeout: Duration,
        observer: Option<Arc<dyn RequestObserver>>,
    ) -> Result<Result<ControlPlaneClient, Blocked>, Error> {
        let namespace = plane
            .namespace()
            .ok_or(Error::MissingObjectKey("namespace"))?;
        let origin = Origin::namespaced(&namespace, &plane.name_any());
        self.client_for_origin(kube, plane, &origin, request_timeout, observer)
            .await
    }

    /// [`ClientCache::client_for_plane`] for the plane `plane` of `origin`
    /// (an AgentControlPlane, or a ClusterAgentControlPlane read as one:
    /// [`crate::api::cluster_control_plane::ClusterAgentControlPlane::as_plane`]).
    pub async fn client_for_origin(
        &self,
        kube: &kube::Client,
        plane: &AgentControlPlane,
        origin: &Origin,
        request_timeout: Duration,
        observer: Option<Arc<dyn RequestObserver>>,
    ) -> Result<Result<ControlPlaneClient, Blocked>, Error> {
        let invalid = |message: String| Blocked {
            reason: reason::INVALID_SPEC,
            message: format!("{}: {message}", origin.shown),
        };
        let Some(base_url) = plane.spec.base_url() else {
            return Ok(Err(invalid("sets neither region nor url".into())));
        };
        // Before anything is read or sent: a host outside the operator's
        // list gets no request at all.
        if let Some(refused) = self.host_refused(plane, origin) {
            return Ok(Err(refused));
        }
        let credentials = match read_credentials(kube, plane, origin).await? {
            Ok(c) => c,
            Err(blocked) => return Ok(Err(blocked)),
        };
        Ok(self
            .cached_or_built(
                origin.key.clone(),
                plane,
                base_url,
                credentials,
                request_timeout,
                observer,
            )
            .map_err(|e| invalid(e.to_string())))
    }

    /// The cached client of `plane` (cache key `key`) when it was built
    /// from the same fingerprint and fits `observer`, else a new one,
    /// cached. Errors: the client cannot be built from the spec (the entry
    /// is dropped).
    fn cached_or_built(
        &self,
        key: (String, String),
        plane: &AgentControlPlane,
        base_url: String,
        credentials: Credentials,
        request_timeout: Duration,
        observer: Option<Arc<dyn RequestObserver>>,
    ) -> Result<ControlPlaneClient, crate::controlplane::Error> {
        let fingerprint = Fingerprint {
            uid: plane.uid(),
            generation: plane.metadata.generation,
            api_key_version: credentials.api_key_version.clone(),
            ca_bundle_version: credentials.ca_bundle_version.clone(),
            request_timeout,
        };
        let mut entries = self.lock();
        if let Some(entry) = entries.get(&key)
            && entry.fingerprint == fingerprint
            && observer_fits(&entry.observer, &observer)
        {
            return Ok(entry.client.clone());
        }
        let (config, buckets) = self.configure(
            &key,
            plane,
            base_url,
            credentials,
            request_timeout,
            observer.clone(),
        );
        let client = match ControlPlaneClient::new(config) {
            Ok(c) => c,
            Err(e) => {
                entries.remove(&key);
                return Err(e);
            }
        };
        tracing::debug!(namespace = %key.0, name = %key.1, "built control plane client");
        entries.insert(
            key,
            Entry {
                fingerprint,
                observer,
                client: client.clone(),
                buckets,
            },
        );
        Ok(client)
    }

    /// The configuration of the client of `plane` (cache key `key`) and the
    /// request budgets it draws from (its own, then the shared caps).
    fn configure(
        &self,
        key: &(String, String),
        plane: &AgentControlPlane,
        base_url: String,
        credentials: Credentials,
        request_timeout: Duration,
        observer: Option<Arc<dyn RequestObserver>>,
    ) -> (ClientConfig, Vec<Budget>) {
        let mut config = ClientConfig::new(
            base_url.clone(),
            plane.spec.workspace_id.clone(),
            credentials.api_key,
        );
        config.bearer = plane.spec.uses_bearer_token();
        config.timeout = request_timeout;
        config.ca_bundle_pem = credentials.ca_bundle;
        let buckets = self.budgets_for(
            key,
            BudgetKey::new(&base_url, config.bearer, config.api_key.expose_secret()),
            &plane.spec.workspace_id,
            rate_limit(&plane.spec),
        );
        config.budget = buckets.first().cloned();
        config.caps = buckets.iter().skip(1).cloned().collect();
        config.max_token_wait = Some(MAX_TOKEN_WAIT);
        config.plane = Some(PlaneLabel {
            namespace: key.0.clone(),
            name: key.1.clone(),
        });
        config.observer = observer;
        (config, buckets)
    }

    /// Registers the reflector stores of one controller (one per watched
    /// namespace), read by [`ClientCache::client_for`].
    pub fn register_stores(
        &self,
        planes: Store<AgentControlPlane>,
        secrets: Store<PartialObjectMeta<Secret>>,
    ) {
        self.stores
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((planes, secrets));
    }

    /// Sets the namespace of the Secrets of ClusterAgentControlPlanes
    /// (`--cluster-resource-namespace`), before the first client is built.
    pub fn set_cluster_resource_namespace(&self, namespace: &str) {
        *self
            .cluster_resource_namespace
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = namespace.to_owned();
    }

    /// The namespace of the Secrets of ClusterAgentControlPlanes.
    pub fn cluster_resource_namespace(&self) -> String {
        self.cluster_resource_namespace
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Registers the store of the Namespace metadata watch.
    pub fn register_namespace_store(
        &self,
        store: Store<PartialObjectMeta<k8s_openapi::api::core::v1::Namespace>>,
    ) {
        *self.namespaces.lock().unwrap_or_else(|p| p.into_inner()) = Some(store);
    }

    /// The labels of namespace `name` as the Namespace watch holds them;
    /// `None` when there is no such watch or it does not hold it.
    pub fn cached_namespace_labels(
        &self,
        name: &str,
    ) -> Option<std::collections::BTreeMap<String, String>> {
        let store = self.namespaces.lock().unwrap_or_else(|p| p.into_inner());
        let ns = store.as_ref()?.get(&ObjectRef::new(name))?;
        Some(ns.metadata.labels.clone().unwrap_or_default())
    }

    /// Registers the store of the ClusterAgentControlPlane watch.
    pub fn register_cluster_store(&self, store: Store<ClusterAgentControlPlane>) {
        self.cluster_stores
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(store);
    }

    /// The ClusterAgentControlPlane `name` as the watch store holds it.
    pub fn cached_cluster_plane(&self, name: &str) -> Option<Arc<ClusterAgentControlPlane>> {
        let stores = self
            .cluster_stores
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let plane_ref = ObjectRef::<ClusterAgentControlPlane>::new(name);
        stores.iter().find_map(|s| s.get(&plane_ref))
    }

    /// The client of the ClusterAgentControlPlane `name` (its Secrets in
    /// the cluster resource namespace), as [`ClientCache::client_for`] is
    /// for an AgentControlPlane: from the cache while the stores show the
    /// plane and its Secrets unchanged, else read and (re)built. Whether a
    /// namespace may use it is the caller's check
    /// ([`super::context::Shared::plane_client_for`]). Errors: as
    /// [`ClientCache::client_for`].
    pub async fn client_for_cluster(
        &self,
        kube: &kube::Client,
        name: &str,
        request_timeout: Duration,
        observer: Option<Arc<dyn RequestObserver>>,
    ) -> Result<Result<ControlPlaneClient, Blocked>, Error> {
        let secrets = self.cluster_resource_namespace();
        let origin = Origin::cluster(name, &secrets);
        let cached = self.cached_cluster_plane(name);
        if let Some(plane) = &cached
            && let Some(client) = self.cached_for_view(
                &plane.as_plane(&secrets),
                &origin,
                request_timeout,
                &observer,
            )
        {
            return Ok(Ok(client));
        }
        let plane = match cached {
            Some(p) => (*p).clone(),
            None => {
                let api: Api<ClusterAgentControlPlane> = Api::all(kube.clone());
                let Some(p) = api.get_opt(name).await.map_err(Error::Kube)? else {
                    self.forget("", name);
                    return Ok(Err(Blocked {
                        reason: reason::CONTROL_PLANE_NOT_READY,
                        message: format!("ClusterAgentControlPlane {name} not found"),
                    }));
                };
                p
            }
        };
        let view = plane.as_plane(&secrets);
        if let Some(blocked) = self.not_usable(&view, &origin) {
            return Ok(Err(blocked));
        }
        Ok(self
            .client_for_origin(kube, &view, &origin, request_timeout, observer)
            .await?
            .map_err(as_users_see_it))
    }

    /// The AgentControlPlane `namespace`/`name` as the watch stores hold
    /// it; `None` when no store has it.
    pub fn cached_plane(&self, namespace: &str, name: &str) -> Option<Arc<AgentControlPlane>> {
        let stores = self.stores.lock().unwrap_or_else(|p| p.into_inner());
        let plane_ref = ObjectRef::<AgentControlPlane>::new(name).within(namespace);
        stores.iter().find_map(|(p, _)| p.get(&plane_ref))
    }

    /// The cached client of `namespace`/`name` when the stores show the
    /// AgentControlPlane and its Secrets unchanged since it was built (and
    /// not stalled); `None` means "read them from the API".
    fn cached_by_stores(
        &self,
        namespace: &str,
        name: &str,
        request_timeout: Duration,
        observer: &Option<Arc<dyn RequestObserver>>,
    ) -> Option<ControlPlaneClient> {
        let plane = self.cached_plane(namespace, name)?;
        self.cached_for_view(
            &plane,
            &Origin::namespaced(namespace, name),
            request_timeout,
            observer,
        )
    }

    /// The cached client of `plane` (of `origin`) when the Secret stores
    /// show its Secrets unchanged since it was built, and it is checked
    /// and not stalled; `None` means "read them from the API".
    fn cached_for_view(
        &self,
        plane: &AgentControlPlane,
        origin: &Origin,
        request_timeout: Duration,
        observer: &Option<Arc<dyn RequestObserver>>,
    ) -> Option<ControlPlaneClient> {
        if stalled(plane).is_some() || !checked(plane) {
            return None;
        }
        let namespace = origin.secret_namespace.as_str();
        let stores = self.stores.lock().unwrap_or_else(|p| p.into_inner());
        let version = |r: &SecretKeyRef| {
            stores.iter().find_map(|(_, secrets)| {
                secrets
                    .get(&ObjectRef::new(&r.name).within(namespace))
                    .and_then(|m| m.resource_version())
            })
        };
        let fingerprint = Fingerprint {
            uid: plane.uid(),
            generation: plane.metadata.generation,
            api_key_version: Some(version(plane.spec.credential_ref()?)?),
            ca_bundle_version: match &plane.spec.ca_bundle_secret_ref {
                None => None,
                Some(r) => Some(version(r)?),
            },
            request_timeout,
        };
        drop(stores);
        let entries = self.lock();
        let entry = entries.get(&origin.key)?;
        (entry.fingerprint == fingerprint && observer_fits(&entry.observer, observer))
            .then(|| entry.client.clone())
    }

    /// The buckets of the AgentControlPlane `plane` (namespace, name) on
    /// `key` and `workspace`, with its declared `limit`: first the adaptive
    /// budget of the key, then (when the key serves other workspaces or a
    /// larger declared rate) the fixed share of its workspace, then the
    /// ceiling of the base URL.
    ///
    /// The key's budget takes the largest `requestsPerSecond` declared by
    /// the AgentControlPlanes that use it as its ceiling, or the adaptive
    /// default when none declares one.
    fn budgets_for(
        &self,
        plane: &(String, String),
        key: BudgetKey,
        workspace: &str,
        limit: Option<RateLimit>,
    ) -> Vec<Budget> {
        let host_ceiling = self.host_ceiling();
        let mut b = self.budgets.lock().unwrap_or_else(|p| p.into_inner());
        b.users.insert(
            plane.clone(),
            BudgetUser {
                key: key.clone(),
                workspace: workspace.to_owned(),
                limit,
            },
        );
        let users: Vec<&BudgetUser> = b.users.values().filter(|u| u.key == key).collect();
        let declared = largest(users.iter().filter_map(|u| u.limit));
        let shared_across_workspaces = users.iter().any(|u| u.workspace != workspace);
        let needs_share = limit.is_some_and(|l| {
            shared_across_workspaces
                || declared.is_some_and(|d| d.requests_per_second > l.requests_per_second)
        });
        let mut buckets = vec![b.of_key(&key, declared)];
        buckets.extend(b.share(&key, workspace, limit.filter(|_| needs_share)));
        buckets.push(b.host(&key.base_url, host_ceiling));
        buckets
    }

    /// The ceiling of all requests to one base URL.
    fn host_ceiling(&self) -> RateLimit {
        self.host_ceiling
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .unwrap_or(RateLimit {
                requests_per_second: DEFAULT_HOST_CEILING,
                burst: DEFAULT_HOST_CEILING as u32,
            })
    }

    /// Sets the ceiling of all requests to one base URL (the operator's
    /// `--max-requests-per-second-per-host`); applies to clients built
    /// afterwards.
    pub fn set_host_ceiling(&self, limit: RateLimit) {
        *self.host_ceiling.lock().unwrap_or_else(|p| p.into_inner()) = Some(limit);
    }

    /// Sets this operator's shard (`--shard`); applies to the
    /// AgentControlPlanes read afterwards.
    pub fn set_shard(&self, shard: crate::shard::Shard) {
        *self.shard.lock().unwrap_or_else(|p| p.into_inner()) = shard;
    }

    /// Sets how many reconcile permits one AgentControlPlane's passes may
    /// hold at once (at least 1); applies to gates created afterwards.
    pub fn set_plane_permits(&self, permits: usize) {
        self.plane_permits
            .store(permits.max(1), std::sync::atomic::Ordering::Relaxed);
    }

    /// The admission gate of the AgentControlPlane `namespace`/`name`
    /// (created on first use).
    pub fn gate(&self, namespace: &str, name: &str) -> Arc<PlaneGate> {
        let cap = match self
            .plane_permits
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            0 => usize::from(u16::MAX),
            n => n,
        };
        self.gates
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry((namespace.to_owned(), name.to_owned()))
            .or_insert_with(|| Arc::new(PlaneGate::new(cap)))
            .clone()
    }

    /// How long until the AgentControlPlane `namespace`/`name` can send a
    /// request of `priority` (zero: now, or no client built yet): the
    /// longest wait of its buckets.
    pub fn ready_in(
        &self,
        namespace: &str,
        name: &str,
        priority: crate::controlplane::Priority,
    ) -> Duration {
        self.lock()
            .get(&(namespace.to_owned(), name.to_owned()))
            .map(|e| {
                e.buckets
                    .iter()
                    .map(|b| b.ready_in(priority))
                    .max()
                    .unwrap_or_default()
            })
            .unwrap_or_default()
    }

    /// The figures of every AgentControlPlane with a client or a gate, for
    /// the `agent_operator_control_plane_*` and
    /// `agent_operator_reconcile_queue` metrics.
    pub fn samples(&self) -> Vec<PlaneSample> {
        use std::sync::atomic::Ordering;
        let mut out: std::collections::BTreeMap<(String, String), PlaneSample> = Default::default();
        let blank = |k: &(String, String)| PlaneSample {
            plane: PlaneLabel {
                namespace: k.0.clone(),
                name: k.1.clone(),
            },
            rate: None,
            ceiling: None,
            pause_seconds: 0.0,
            running: 0,
            waiting: 0,
            deferred: 0,
            deferred_total: 0,
        };
        for (k, e) in self.lock().iter() {
            let s = out.entry(k.clone()).or_insert_with(|| blank(k));
            if let Some(b) = e.buckets.first() {
                s.rate = Some(b.rate());
                s.ceiling = Some(b.ceiling());
            }
            s.pause_seconds = e
                .buckets
                .iter()
                .map(|b| b.pause_left().as_secs_f64())
                .fold(0.0, f64::max);
        }
        for (k, g) in self.gates.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let s = out.entry(k.clone()).or_insert_with(|| blank(k));
            s.running = g.running.load(Ordering::Relaxed);
            s.waiting = g.waiting.load(Ordering::Relaxed);
            s.deferred = g.deferred_now() as i64;
            s.deferred_total = g.deferred_total.load(Ordering::Relaxed);
        }
        out.into_values().collect()
    }

    /// Drops the cached client of `namespace`/`name`, if any (e.g. after
    /// the AgentControlPlane was deleted). Its budget stays: it belongs to
    /// the (base URL, credential), and a re-created AgentControlPlane with
    /// the same key finds its rate and a pending `Retry-After` again.
    pub fn forget(&self, namespace: &str, name: &str) {
        let key = (namespace.to_owned(), name.to_owned());
        self.lock().remove(&key);
        self.budgets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .users
            .remove(&key);
    }

    /// The client last built for the AgentControlPlane `namespace`/`name`,
    /// whatever changed since (its API key Secret deleted, the plane being
    /// deleted): only the deletion of an AgentDeployment uses it, so that a
    /// bundle deleted in one command (Secret, AgentControlPlane and
    /// AgentDeployments together) still deletes its remote deployments. The
    /// key stays in this process only as long as the cached client did
    /// before (until the plane is forgotten or the process ends).
    pub fn retained(&self, namespace: &str, name: &str) -> Option<ControlPlaneClient> {
        self.lock()
            .get(&(namespace.to_owned(), name.to_owned()))
            .map(|e| e.client.clone())
    }

    /// Number of cached clients.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when no client is cached.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}

/// True when the AgentControlPlane's own probe has judged its current spec:
/// its `Ready` condition was written for its current generation. A plane
/// being deleted counts as checked once it ever was: the API server bumps the
/// generation when it sets `deletionTimestamp`, which changes no spec.
fn checked(plane: &AgentControlPlane) -> bool {
    use crate::api::conditions::{READY, find};
    plane
        .status
        .as_ref()
        .and_then(|s| find(&s.conditions, READY))
        .is_some_and(|c| {
            c.observed_generation == plane.metadata.generation
                || plane.metadata.deletion_timestamp.is_some()
        })
}

/// The wait of an AgentDeployment whose plane has not been checked yet.
fn not_checked(origin: &Origin) -> Blocked {
    Blocked {
        reason: reason::CONTROL_PLANE_NOT_CHECKED,
        message: format!(
            "waiting for {} to check its spec and API key; nothing is sent until it has",
            origin.shown
        ),
    }
}

/// A refusal of a plane as its users see it: a missing Secret and a host
/// not allowed keep their reasons, any other is `ControlPlaneNotReady`.
fn as_users_see_it(mut blocked: Blocked) -> Blocked {
    if blocked.reason != reason::SECRET_NOT_FOUND && blocked.reason != reason::HOST_NOT_ALLOWED {
        blocked.reason = reason::CONTROL_PLANE_NOT_READY;
    }
    blocked
}

/// `"<reason>: <message>"` of an AgentControlPlane that reports
/// `Stalled=True` for its current generation (wrong key, forbidden workspace).
fn stalled(plane: &AgentControlPlane) -> Option<String> {
    use crate::api::conditions::{TRUE, find};
    let status = plane.status.as_ref()?;
    let stalled = find(&status.conditions, crate::plan::status::STALLED)?;
    (stalled.status == TRUE && stalled.observed_generation == plane.metadata.generation)
        .then(|| format!("{}: {}", stalled.reason, stalled.message))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gate of one permit (a bound of [`QUEUE_PER_PERMIT`] waiting) and
    /// the log of the objects woken.
    fn parking_gate() -> (PlaneGate, Arc<Mutex<Vec<String>>>) {
        (PlaneGate::new(1), Default::default())
    }

    fn admit(gate: &PlaneGate, log: &Arc<Mutex<Vec<String>>>, object: &str) -> bool {
        let (log, name) = (log.clone(), object.to_owned());
        gate.admit(object, move || log.lock().unwrap().push(name))
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_queue_parks_passes_and_wakes_them_in_order_as_it_drains() {
        let (gate, log) = parking_gate();
        for i in 0..QUEUE_PER_PERMIT {
            assert!(admit(&gate, &log, &format!("o{i}")), "room for o{i}");
        }
        for i in 0..3 {
            assert!(!admit(&gate, &log, &format!("p{i}")), "p{i} parked");
        }
        // Parked once, in place: a second trigger of p0 does not queue it
        // again, nor move it.
        assert!(!admit(&gate, &log, "p0"));
        assert_eq!((gate.parked_now(), gate.deferred_now()), (3, 3));
        assert!(log.lock().unwrap().is_empty(), "nothing woken while full");
        // One waiting pass takes its permit: the first parked is woken,
        // and its place is kept for it: a newcomer parks behind.
        gate.took_permit();
        assert_eq!(*log.lock().unwrap(), ["p0"]);
        assert!(!admit(&gate, &log, "late"));
        assert!(admit(&gate, &log, "p0"), "the woken pass takes its place");
        gate.took_permit();
        gate.took_permit();
        assert_eq!(*log.lock().unwrap(), ["p0", "p1", "p2"]);
        assert!(admit(&gate, &log, "p2"));
        assert!(admit(&gate, &log, "p1"));
        gate.took_permit();
        assert_eq!(*log.lock().unwrap(), ["p0", "p1", "p2", "late"]);
        assert_eq!(gate.parked_now(), 0);
        assert_eq!(
            gate.deferred_total
                .load(std::sync::atomic::Ordering::Relaxed),
            4
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_woken_pass_that_never_comes_gives_its_place_back() {
        let (gate, log) = parking_gate();
        for i in 0..QUEUE_PER_PERMIT {
            assert!(admit(&gate, &log, &format!("o{i}")));
        }
        assert!(!admit(&gate, &log, "gone"));
        assert!(!admit(&gate, &log, "next"));
        gate.took_permit();
        assert_eq!(*log.lock().unwrap(), ["gone"]);
        // "gone" was deleted and never comes back: its place is held for
        // WOKEN_FOR, then the next parked pass has it.
        assert!(!admit(&gate, &log, "newcomer"));
        assert_eq!(*log.lock().unwrap(), ["gone"]);
        tokio::time::advance(WOKEN_FOR).await;
        assert!(!admit(&gate, &log, "newcomer"), "still behind `next`");
        assert_eq!(*log.lock().unwrap(), ["gone", "next"]);
    }

    fn spec(rps: Option<f64>, burst: Option<u32>) -> AgentControlPlaneSpec {
        AgentControlPlaneSpec {
            region: Some("us".into()),
            url: None,
            workspace_id: "ws".into(),
            bearer_token_secret_ref: None,
            api_key_secret_ref: Some(SecretKeyRef {
                name: "k".into(),
                key: "api-key".into(),
            }),
            ca_bundle_secret_ref: None,
            requests_per_second: rps,
            burst,
            previews: None,
        }
    }

    #[test]
    fn rate_limit_maps_the_spec_with_a_one_second_default_burst() {
        assert_eq!(rate_limit(&spec(None, None)), None);
        assert_eq!(rate_limit(&spec(None, Some(3))), None);
        assert_eq!(rate_limit(&spec(Some(0.0), None)), None);
        assert_eq!(rate_limit(&spec(Some(f64::NAN), None)), None);
        assert_eq!(
            rate_limit(&spec(Some(2.0), Some(1))),
            Some(RateLimit {
                requests_per_second: 2.0,
                burst: 1
            })
        );
        assert_eq!(rate_limit(&spec(Some(2.5), None)).unwrap().burst, 3);
        assert_eq!(rate_limit(&spec(Some(0.2), None)).unwrap().burst, 1);
        assert_eq!(rate_limit(&spec(Some(5.0), Some(0))).unwrap().burst, 1);
    }

    use crate::controlplane::budget::DECLARED_MARGIN;

    fn limit(rps: f64) -> Option<RateLimit> {
        Some(RateLimit {
            requests_per_second: rps,
            burst: rps as u32,
        })
    }

    fn plane(ns: &str, name: &str) -> (String, String) {
        (ns.to_owned(), name.to_owned())
    }

    #[test]
    fn planes_with_one_key_share_one_budget_kept_across_a_re_create() {
        let cache = ClientCache::default();
        let key = || BudgetKey::new("https://cp.example/", false, "key-1");
        let a = cache.budgets_for(&plane("team-a", "cp"), key(), "ws", None);
        let b = cache.budgets_for(&plane("team-b", "cp"), key(), "ws", None);
        assert_eq!(a.len(), 2, "key budget and host ceiling: {a:?}");
        a[0].on_throttled(Some(Duration::from_secs(60)));
        assert!(b[0].paused(), "one budget for one key");
        let other = cache.budgets_for(
            &plane("team-c", "cp"),
            BudgetKey::new("https://cp.example", false, "key-2"),
            "ws",
            None,
        );
        assert!(!other[0].paused(), "another key, another budget");
        assert!(other[1].paused() == a[1].paused(), "one host ceiling");
        cache.forget("team-a", "cp");
        let again = cache.budgets_for(&plane("team-a", "cp"), key(), "ws", None);
        assert!(
            again[0].paused(),
            "a re-created plane keeps the pending pause"
        );
    }

    #[test]
    fn a_declared_rate_caps_its_workspace_share_of_a_shared_key() {
        let cache = ClientCache::default();
        let key = || BudgetKey::new("https://cp.example", false, "org-key");
        let one = cache.budgets_for(&plane("a", "cp"), key(), "ws-1", limit(10.0));
        assert_eq!(one.len(), 2, "alone: the key budget is the declared one");
        assert_eq!(one[0].ceiling(), 10.0 * DECLARED_MARGIN);
        let two = cache.budgets_for(&plane("b", "cp"), key(), "ws-2", limit(4.0));
        assert_eq!(two.len(), 3, "a share for ws-2 on a key of two workspaces");
        assert_eq!(
            two[0].ceiling(),
            10.0 * DECLARED_MARGIN,
            "the largest declared"
        );
        assert_eq!(two[1].ceiling(), 4.0 * DECLARED_MARGIN);
        let host = cache.budgets_for(&plane("c", "cp"), key(), "ws-3", None);
        assert_eq!(host.len(), 2, "undeclared: no share");
        assert_eq!(host[1].ceiling(), DEFAULT_HOST_CEILING * DECLARED_MARGIN);
    }

    #[test]
    fn the_budget_key_hides_the_credential_and_tells_bearer_from_key() {
        let k = BudgetKey::new("https://x", false, "secret-value");
        assert!(!format!("{:?}", k.credential).contains("secret-value"));
        assert!(BudgetKey::new("https://x", true, "secret-value") != k);
        assert!(BudgetKey::new("https://x/", false, "secret-value") == k);
    }

    struct Counting;
    impl RequestObserver for Counting {
        fn observe(&self, _: &'static str, _: &'static str, _: Duration) {}
    }

    #[test]
    fn a_caller_with_an_observer_never_gets_another_observers_client() {
        let a: Arc<dyn RequestObserver> = Arc::new(Counting);
        let b: Arc<dyn RequestObserver> = Arc::new(Counting);
        assert!(observer_fits(&None, &None));
        assert!(observer_fits(&Some(a.clone()), &None));
        assert!(!observer_fits(&None, &Some(a.clone())));
        assert!(observer_fits(&Some(a.clone()), &Some(a.clone())));
        assert!(!observer_fits(&Some(a), &Some(b)));
    }
}
