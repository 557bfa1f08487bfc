//! What every kind's passes share ([`Shared`]: the clients, the budgets,
//! the recorder, the configuration, the error backoff of each object) and
//! the context of one kind's passes ([`Context`]: the shared part and the
//! kind's own state, as kaniop's `Context<K>`). A kind keeps what only it
//! needs in its state (the AgentDeployment's: `deployment::context`), so
//! that no kind's module reads another's.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::events::Reporter;

use super::error::Error;
use super::{planes, resolve, secrets, server_changes};

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
    pub scope: super::watch::Scope,
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
            scope: super::watch::Scope::AllNamespaces,
        }
    }
}

/// What every kind's passes share: one per operator process, held by
/// every kind's [`Context`].
pub struct Shared {
    /// Kubernetes client.
    pub client: kube::Client,
    /// Who publishes events (core/v1, `controller::report::publish`): `agent-operator`, with the pod
    /// name as instance.
    pub reporter: Reporter,
    /// Timing settings.
    pub config: OperatorConfig,
    /// Consecutive failed passes of each object, for the error backoff
    /// ([`Shared::backoff`]), keyed by [`memory_key`] of its
    /// [`super::requeue::object_key`]; an entry goes when its count is
    /// reset, and when the object is deleted ([`Shared::forget`]).
    pub failures: std::sync::Mutex<std::collections::HashMap<u64, u32>>,
    /// One control plane client per AgentControlPlane, shared by all its users.
    pub planes: planes::ClientCache,
    /// The metadata-only Secret watch and the cache of referenced Secrets.
    pub secrets: secrets::Secrets,
    /// Prometheus metrics (reconciles, control plane requests, time to Ready).
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The bounds of agent server calls (`spec.verify`, AgentAssistants,
    /// AgentCrons): a rate per agent server and a process-wide concurrency
    /// cap, apart from every control plane budget.
    pub verifier: crate::agentserver::limits::Limits,
    /// What the AgentDeployment watch tells the AgentAssistant and AgentCron
    /// controllers: which agent servers changed ([`server_changes`]).
    pub server_changes: server_changes::ServerChanges,
}

/// The context of one kind's passes: what every kind shares
/// ([`Shared`], reached through `Deref`) and the kind's own state `S`
/// (`()` for the kinds that keep none; [`super::kind::Kind::State`]).
pub struct Context<S = ()> {
    /// What every kind shares.
    pub shared: Arc<Shared>,
    /// What this kind keeps between its passes.
    pub state: S,
}

impl<S> std::ops::Deref for Context<S> {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.shared
    }
}

impl<S> Context<S> {
    /// The context of a kind whose state is `state`, over `shared`.
    pub fn new(shared: Arc<Shared>, state: S) -> Self {
        Self { shared, state }
    }
}

impl Context {
    /// The context of a kind that keeps no state of its own.
    pub fn of(shared: Arc<Shared>) -> Self {
        Self::new(shared, ())
    }
}

/// The key of an object in the in-process memory ([`Shared::failures`],
/// a kind's state): a hash of its [`super::requeue::object_key`]
/// (`Kind/namespace/name`), so that objects of different kinds with one
/// name never share an entry.
pub fn memory_key(key: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    h.finish()
}

impl Shared {
    /// Builds what every kind shares, with a recorder reporting as
    /// `agent-operator`.
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
            failures: Default::default(),
            planes,
            secrets: Default::default(),
            metrics: Default::default(),
            server_changes: Default::default(),
        }
    }

    /// Records one more failure of `key` and returns the backoff delay:
    /// 1 s doubling to `max_backoff`, with ±20 % jitter.
    pub fn backoff(&self, key: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let n = failures.entry(memory_key(key)).or_default();
        *n = n.saturating_add(1);
        super::requeue::backoff_delay(*n, self.config.max_backoff)
    }

    /// Forgets the failures of `key` after a successful pass.
    pub fn reset_backoff(&self, key: &str) {
        self.forget(key);
    }

    /// Forgets what every kind keeps of `key` (the object was deleted): its
    /// failures. A kind forgets its own state ([`super::kind::Kind::forget`]).
    pub fn forget(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&memory_key(key));
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
    /// `namespace`: its AgentControlPlane ([`Shared::plane_client`]), or a
    /// ClusterAgentControlPlane the namespace may use
    /// ([`planes::ClientCache::client_for_cluster`]).
    ///
    /// Returns `Ok(Err(Blocked))` as [`Shared::plane_client`] does, and
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
}

#[cfg(test)]
impl Shared {
    /// A shared part whose Kubernetes client is never called (unit tests
    /// of the in-process memory).
    pub(crate) fn offline() -> Self {
        let service = tower::service_fn(|_: http::Request<kube::client::Body>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(kube::client::Body::from(
                Vec::new(),
            )))
        });
        Self::new(
            kube::Client::new(service, "default"),
            OperatorConfig::default(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The failures of an object are its own entry (objects of two kinds
    /// with one name never share one), gone once reset or forgotten.
    #[tokio::test]
    async fn failures_are_one_entry_per_object_until_reset() {
        let ctx = Shared::offline();
        let (agd, acp) = ("AgentDeployment/ns/a", "AgentControlPlane/ns/a");
        let entries = |ctx: &Shared| ctx.failures.lock().unwrap().len();
        ctx.backoff(agd);
        ctx.backoff(agd);
        ctx.backoff(acp);
        assert_eq!(entries(&ctx), 2);
        assert_eq!(ctx.failures.lock().unwrap()[&memory_key(agd)], 2);
        ctx.reset_backoff(acp);
        assert_eq!(entries(&ctx), 1, "an entry that holds nothing goes");
        ctx.forget(agd);
        assert_eq!(entries(&ctx), 0);
    }
}
