//! Wiring of the AgentDeployment controller on the shared scaffold
//! ([`crate::controller::scaffold`]): its watches (its own kind, Secrets,
//! AgentControlPlanes), the trigger hashes and mappers, the fair admission
//! of passes per control plane, readiness of its stores.

use std::sync::Arc;
use std::time::Duration;

use futures::channel::mpsc;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Secret;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, ResourceExt};
use tokio::sync::Semaphore;
use tracing::debug;

use super::cached::{CachedDeployment, cached_event, full};
use super::plane_watch::{is_blocked, plane_trigger_hash, plane_wave_hash};
use crate::api::conditions::{READY, find};
use crate::api::control_plane::AgentControlPlane;
use crate::api::deployment::AgentDeployment;
use crate::controller::deployment::context::{DeploymentContext, State};
use crate::controller::error::Error;
use crate::controller::kind;
use crate::controller::requeue::object_key;
use crate::controller::scaffold::observed;
use crate::controller::scaffold::requeue_after_error;
use crate::controller::scaffold::scoped_api;
use crate::controller::scaffold::{
    Scope, Wiring, ready_counts, relist_at_once, run_in_scope, strip_managed_fields, synced_store,
};
use crate::controller::secrets::ReferencesSecrets;

/// `kind` label of the AgentDeployment controller's metrics.
pub const DEPLOYMENT_KIND: &str = "AgentDeployment";
/// `kind` label of AgentControlPlane metrics.
pub const CONTROL_PLANE_KIND: &str = "AgentControlPlane";

/// Runs the `AgentDeployment` controllers until `shutdown` resolves (then
/// lets in-flight reconciles finish).
///
/// Same as [`run_with`] without a readiness callback.
pub async fn run(
    ctx: Arc<DeploymentContext>,
    scope: Scope,
    concurrency: u16,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    run_with(ctx, scope, concurrency, shutdown, || {}).await;
}

/// Runs one `AgentDeployment` controller per namespace of `scope` until
/// `shutdown` resolves (then lets in-flight reconciles finish).
///
/// Besides its own kind each controller watches Secrets (an AgentDeployment
/// is reconciled when a Secret it references, directly or through its
/// AgentControlPlane's API key, changes or appears) and AgentControlPlanes.
///
/// - `concurrency` bounds the reconciles running at once across every
///   namespace (0: unbounded).
/// - Every pass is counted in `ctx.metrics` (kind, outcome, error reason,
///   duration), and the stores feed `agent_operator_resources` at scrape time.
/// - `synced` is called once, when the AgentDeployment and AgentControlPlane
///   watches of every namespace have listed (the `/readyz` signal).
pub async fn run_with(
    ctx: Arc<DeploymentContext>,
    scope: Scope,
    concurrency: u16,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
    synced: impl FnOnce() + Send + 'static,
) {
    let permits = (concurrency > 0).then(|| Arc::new(Semaphore::new(usize::from(concurrency))));
    // One plane's passes hold at most half of the permits (rounded up), so
    // that another tenant always finds some.
    if concurrency > 0 {
        ctx.planes
            .set_plane_permits(usize::from(concurrency).div_ceil(2));
    }
    {
        let weak = Arc::downgrade(&ctx);
        ctx.metrics.track_planes(move || {
            weak.upgrade()
                .map(|c| c.planes.samples())
                .unwrap_or_default()
        });
    }
    // Unbounded (0): the permits of [`observed_reconcile`] bound the passes
    // that run, while passes waiting for their plane's turn must not take
    // the controller's slots from other planes.
    let build = |namespace: Option<&str>| wiring(ctx.clone(), namespace, permits.clone());
    run_in_scope(
        ctx.clone(),
        scope,
        DEPLOYMENT_KIND,
        0,
        shutdown,
        build,
        synced,
    )
    .await;
}

/// One reconcile pass ([`kind::reconcile`]): the finalizer helper
/// dispatches to [`kind::Kind::apply`] or [`kind::Kind::cleanup`] (both the [`super::machine`]
/// of steps), and the report they return is written ([`kind::write`]).
///
/// Errors: Kubernetes API failures and transient control plane failures
/// (status is written before they are returned); input problems are reported
/// in status and are not errors.
///
/// An object with `spec.expiry` runs again at its expiry instant at the
/// latest ([`kind::Kind::wake_in`]), without polling before.
pub async fn reconcile(
    obj: Arc<AgentDeployment>,
    ctx: Arc<DeploymentContext>,
) -> Result<Action, Error> {
    kind::reconcile(obj, ctx).await
}

/// Requeue policy for failed passes: the service's `Retry-After` if longer,
/// else exponential backoff per object; a pending deletion is read again
/// when its backoff says ([`super::deleting::Deletes::due_in`]).
pub fn error_policy(
    obj: Arc<AgentDeployment>,
    error: &Error,
    ctx: Arc<DeploymentContext>,
) -> Action {
    if let Error::DeletionPending(_) = error {
        let due = ctx
            .state
            .deletes
            .due_in(&object_key(obj.as_ref()))
            .unwrap_or(ctx.config.poll_interval);
        // Never a requeue at once: the pass that records a read sets the
        // next one at least the poll interval (jittered) ahead.
        return Action::requeue(due.max(DELETE_REQUEUE_FLOOR));
    }
    requeue_after_error(&ctx, obj.as_ref(), error)
}

/// Shortest requeue of a pending deletion (a guard against a zero delay).
const DELETE_REQUEUE_FLOOR: Duration = Duration::from_millis(100);

/// `agent_operator_drifted_deployments` of one store: per AgentControlPlane
/// with an AgentDeployment under `managementPolicy: Observe`, how many of
/// those report `Drifted=True`.
fn drift_samples(store: &Store<CachedDeployment>) -> Vec<crate::metrics::DriftSample> {
    use crate::api::conditions::{DRIFTED, TRUE};
    use crate::api::deployment::ManagementPolicy;
    let mut by_plane = std::collections::BTreeMap::new();
    for o in store.state() {
        if o.spec.management_policy != ManagementPolicy::Observe {
            continue;
        }
        let plane_ref = &o.spec.control_plane_ref;
        let plane = crate::controlplane::PlaneLabel {
            namespace: if plane_ref.is_cluster() {
                String::new()
            } else {
                o.namespace().unwrap_or_default()
            },
            name: plane_ref.name.clone(),
        };
        let drifted = o.condition_status(DRIFTED).is_some_and(|s| s == TRUE);
        *by_plane.entry(plane).or_insert(0) += i64::from(drifted);
    }
    by_plane
        .into_iter()
        .map(|(plane, drifted)| crate::metrics::DriftSample { plane, drifted })
        .collect()
}

/// A plane whose budget allows the next request only later than this puts
/// its passes off instead of letting them wait with a permit held.
pub const DEFER_AFTER: Duration = Duration::from_secs(1);

/// The requeue of a parked pass in case its wake never comes: it is
/// woken long before when its plane's queue moves; when it comes back
/// still parked, it keeps its place.
pub const PARKED_FOR: Duration = Duration::from_secs(60);

/// One pass, admitted fairly, with the concurrency permit held, timed and
/// counted.
///
/// Admission, in this order, so that a throttled tenant never holds the
/// permits every tenant shares (docs/RELIABILITY.md, "Many tenants"):
/// 1. when the AgentControlPlane's budget is paused by a `Retry-After` or
///    allows the next request only after [`DEFER_AFTER`], the pass is put
///    off: the object is requeued for when the plane can send again,
///    holding nothing;
/// 2. when [`crate::controller::planes::QUEUE_PER_PERMIT`] passes per
///    permit already wait for the plane, the pass is parked
///    ([`crate::controller::planes::PlaneGate::admit`]): it returns at once,
///    holding nothing, and `wake` runs it again when one of the waiting
///    passes takes its permit, in the order the passes were parked (a
///    [`PARKED_FOR`] requeue in case no wake comes);
/// 3. the pass takes one of its plane's permits (at most half the reconcile
///    permits per plane, see [`run_with`]), then one of the shared
///    reconcile permits; both queues are first come, first served, so the
///    planes' passes take turns;
/// 4. if the plane was paused meanwhile, the pass is put off after all.
///
/// Inside the pass a request waits at most
/// [`crate::controller::planes::MAX_TOKEN_WAIT`] for a token (then the pass fails with
/// a transient, not-sent error and is requeued).
async fn observed_reconcile(
    cached: Arc<CachedDeployment>,
    ctx: Arc<DeploymentContext>,
    permits: Option<Arc<Semaphore>>,
    wake: mpsc::UnboundedSender<ObjectRef<CachedDeployment>>,
) -> Result<Action, Error> {
    use std::sync::atomic::Ordering;
    // The plane's key: (namespace, name), ("", name) for a cluster plane.
    let (ns, plane) = crate::controller::planes::Origin::of_ref(
        &cached.namespace().unwrap_or_default(),
        &cached.spec.control_plane_ref,
        "",
    )
    .key;
    let gate = ctx.planes.gate(&ns, &plane);
    let key = crate::controller::requeue::object_key(cached.as_ref());
    let deferral = || {
        let wait = ctx
            .planes
            .ready_in(&ns, &plane, crate::controlplane::Priority::Read);
        (wait > DEFER_AFTER).then(|| {
            let by = wait + crate::controller::requeue::jittered(Duration::from_secs(1)).min(wait / 10);
            gate.defer(&key, by);
            debug!(object = %key, retry_in_s = by.as_secs_f64(), "control plane budget short: pass put off");
            Action::requeue(by)
        })
    };
    if let Some(action) = deferral() {
        return Ok(action);
    }
    let object = ObjectRef::new(&cached.name_any()).within(&ns);
    if !gate.admit(&key, move || {
        let _ = wake.unbounded_send(object);
    }) {
        debug!(object = %key, "control plane queue full: pass parked");
        return Ok(Action::requeue(PARKED_FOR));
    }
    let plane_permit = gate.permits.clone().acquire_owned().await.ok();
    let permit = match permits {
        Some(p) => p.acquire_owned().await.ok(),
        None => None,
    };
    gate.took_permit();
    if let Some(action) = deferral() {
        return Ok(action);
    }
    gate.resume(&key);
    gate.running.fetch_add(1, Ordering::Relaxed);
    // The name listings of a rollout that is over go (a few lock checks;
    // a pass put off or parked above does not get here).
    ctx.state.names.expire();
    // The pass reads its object whole: the store keeps the status as JSON.
    let obj = full(&cached);
    drop(cached);
    let result = observed(DEPLOYMENT_KIND, reconcile)(obj, ctx.clone()).await;
    gate.running.fetch_sub(1, Ordering::Relaxed);
    drop((permit, plane_permit));
    result
}

/// The controller of one namespace (`None`: all): its watches, its pass
/// behind the fair admission per control plane ([`observed_reconcile`]),
/// the metrics of its stores, and their readiness.
fn wiring(
    ctx: Arc<DeploymentContext>,
    namespace: Option<&str>,
    permits: Option<Arc<Semaphore>>,
) -> Wiring<CachedDeployment, State> {
    let deployments: Api<AgentDeployment> = scoped_api(&ctx.client, namespace);
    let (plane_store, plane_trigger, secret_trigger) = plane_and_secret_watches(&ctx, namespace);
    let (store, trigger) = deployment_watch(deployments, &ctx.config.shard, ctx.clone());
    ctx.secrets.register(store.clone());
    ctx.state.promotions.register(store.clone());
    ctx.state.claims.register(store.clone());
    let promotion_changes = ctx.state.promotions.changes();
    let promotion_store = store.clone();
    ctx.secrets.register(plane_store.clone());
    // The passes parked by a full control plane queue come back through
    // this channel ([`observed_reconcile`]).
    let (wake, woken) = mpsc::unbounded();
    let controller = Controller::for_stream(trigger, store.clone()).reconcile_on(woken);
    let deployment_store = store.clone();
    let secret_store = store.clone();
    let cluster_store = store.clone();
    let plane_store_for_secrets = plane_store.clone();
    let controller = controller
        .watches_stream(secret_trigger, move |secret: PartialObjectMeta<Secret>| {
            referencing_secret(&secret_store, &plane_store_for_secrets, &secret)
        })
        .watches_stream(plane_trigger, plane_mapper(store, plane_store.clone()))
        // A source of `spec.promotion` that serves something else wakes
        // its targets of this namespace (or of every one, for a
        // cluster-wide controller).
        .watches_stream(promotion_changes, move |source: AgentDeployment| {
            super::promotion::targets_of(&promotion_store, &source)
        });
    let controller =
        super::plane_watch::cluster_watches(controller, &ctx, namespace, cluster_store);
    track_stores(&ctx, &deployment_store, &plane_store);
    Wiring::with_pass(
        controller,
        move |obj, ctx| observed_reconcile(obj, ctx, permits.clone(), wake.clone()),
        |obj: Arc<CachedDeployment>, error: &Error, ctx| error_policy(full(&obj), error, ctx),
    )
    .synced(async move {
        synced_store(&deployment_store).await && synced_store(&plane_store).await
    })
}

/// The gauges read from one controller's stores at scrape time: Ready
/// AgentDeployments and AgentControlPlanes, and the drifted deployments.
fn track_stores(
    ctx: &DeploymentContext,
    deployments: &Store<CachedDeployment>,
    planes: &Store<AgentControlPlane>,
) {
    let d = deployments.clone();
    ctx.metrics.track_ready(DEPLOYMENT_KIND, move || {
        ready_counts(&d, |o: &CachedDeployment| o.condition_status(READY))
    });
    let d = deployments.clone();
    ctx.metrics.track_drift(move || drift_samples(&d));
    let p = planes.clone();
    ctx.metrics.track_ready(CONTROL_PLANE_KIND, move || {
        ready_counts(&p, |o: &AgentControlPlane| {
            find(&o.status.as_ref()?.conditions, READY).map(|c| c.status.clone())
        })
    });
}

/// The AgentControlPlane watch of one namespace (`None`: all) with its
/// store, and the operator's one metadata-only Secret watch of this
/// scope, shared with the AgentControlPlane controller: only events that
/// can change a decision come through (see `crate::controller::secrets`).
/// Both stores go to the client cache (the Secret store's
/// resourceVersions tell it that an API key is unchanged).
#[allow(clippy::type_complexity)]
fn plane_and_secret_watches(
    ctx: &DeploymentContext,
    namespace: Option<&str>,
) -> (
    Store<AgentControlPlane>,
    impl futures::Stream<Item = Result<AgentControlPlane, watcher::Error>> + Send + 'static,
    impl futures::Stream<Item = Result<PartialObjectMeta<Secret>, watcher::Error>> + Send + 'static,
) {
    let planes: Api<AgentControlPlane> = scoped_api(&ctx.client, namespace);
    let (plane_store, plane_trigger) = plane_watch(planes, &ctx.config.shard);
    let (secret_meta_store, secret_trigger) = ctx.secrets.subscribe(&ctx.client, namespace);
    ctx.planes
        .register_stores(plane_store.clone(), secret_meta_store);
    (plane_store, plane_trigger, secret_trigger)
}

/// The watch of AgentDeployments of a controller and its store: the store
/// keeps every object (without managedFields, its status as JSON:
/// [`CachedDeployment`]); a pass is triggered only by
/// what a user controls (see [`deployment_trigger_hash`]), never by the
/// operator's own status, annotation or event writes. Only the objects of
/// `shard` are watched. It is the process's only AgentDeployment watch of
/// its scope: every event also goes to `ctx.server_changes`, which tells
/// the AgentAssistant and AgentCron controllers which agent servers changed
/// ([`crate::controller::server_changes`]), and every applied object to
/// `ctx.state.promotions`, which tells the targets of a promotion source what it
/// serves ([`super::promotion::Promotions::observe`]).
fn deployment_watch(
    deployments: Api<AgentDeployment>,
    shard: &crate::shard::Shard,
    ctx: Arc<DeploymentContext>,
) -> (
    Store<CachedDeployment>,
    impl futures::Stream<Item = Result<CachedDeployment, watcher::Error>> + Send + 'static,
) {
    let (store, mut writer) = reflector::store::<CachedDeployment>();
    let offers = ctx.clone();
    let filter = Arc::new(super::trigger::TriggerFilter::default());
    let forget = filter.clone();
    let trigger = relist_at_once(
        DEPLOYMENT_KIND,
        watcher(
            deployments,
            shard.watch(watcher::Config::default().any_semantic()),
        ),
    )
    .default_backoff()
    .modify(strip_managed_fields)
    .inspect_ok(move |event| ctx.server_changes.observe(event))
    // The store keeps the cached form ([`CachedDeployment`]: the status as
    // its JSON); the stream goes on with the whole objects.
    .inspect_ok(move |event| writer.apply_watcher_event(&cached_event(event)))
    .inspect_ok(move |event| forget.observe(event))
    .applied_objects()
    .inspect(move |o| {
        if let Ok(o) = o {
            offers.state.promotions.observe(o);
        }
    })
    // kube-runtime's `predicate_filter`, with a cache of two hashes per
    // object instead of three strings ([`super::trigger`]).
    .try_filter(move |o| std::future::ready(filter.passes(o, deployment_trigger_hash(o))))
    // The controller keys its queue by the trigger's reference, and each
    // requeue keeps a copy of it until it runs (two per object at rest):
    // without the uid and resourceVersion, which the reference carries but
    // never compares, that is two strings less per copy. The pass reads
    // the object from the store, never the trigger.
    .map_ok(|mut o| {
        o.metadata.uid = None;
        o.metadata.resource_version = None;
        CachedDeployment::trigger(o)
    });
    (store, trigger)
}

/// The one watch of AgentControlPlanes of a controller and its store: it
/// fills the store the Secret mapper reads (which Secret holds which control
/// plane's API key) and triggers the AgentDeployments of a control plane
/// when its spec or readiness changes, or when it is deleted (not on its
/// other status writes). A deleted object has left the store once `reflect`
/// saw its deletion, so its hash differs from its last one and the deletion
/// passes the filter. Only the AgentControlPlanes of `shard` are watched
/// (a workspace belongs to one shard).
fn plane_watch(
    planes: Api<AgentControlPlane>,
    shard: &crate::shard::Shard,
) -> (
    Store<AgentControlPlane>,
    impl futures::Stream<Item = Result<AgentControlPlane, watcher::Error>> + Send + 'static,
) {
    let (plane_store, plane_writer) = reflector::store::<AgentControlPlane>();
    let present = plane_store.clone();
    let trigger = relist_at_once(
        CONTROL_PLANE_KIND,
        watcher(planes, shard.watch(watcher::Config::default())),
    )
    .default_backoff()
    .modify(strip_managed_fields)
    .reflect(plane_writer)
    .touched_objects()
    .predicate_filter(
        move |p: &AgentControlPlane| {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            plane_trigger_hash(p).hash(&mut h);
            present.get(&ObjectRef::from_obj(p)).is_some().hash(&mut h);
            Some(h.finish())
        },
        Default::default(),
    );
    (plane_store, trigger)
}

/// Maps an event of an AgentControlPlane to the AgentDeployments of
/// `deployments` that use it ([`referencing_plane`]); `wave` is true when
/// its [`plane_wave_hash`] or its presence in `planes` changed since the
/// last event of that plane.
fn plane_mapper(
    deployments: Store<CachedDeployment>,
    planes: Store<AgentControlPlane>,
) -> impl Fn(AgentControlPlane) -> Vec<ObjectRef<CachedDeployment>> + Send + Sync + 'static {
    let seen = std::sync::Mutex::new(std::collections::HashMap::new());
    move |plane: AgentControlPlane| {
        let key = ObjectRef::from_obj(&plane);
        let now = (plane_wave_hash(&plane), planes.get(&key).is_some());
        let before = seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, now);
        let wave = before.is_some_and(|b| b != now);
        referencing_plane(&deployments, &plane, wave)
    }
}

/// Hash of what may require a pass of an AgentDeployment: its generation
/// (the spec), whether it is being deleted, and the annotations a user sets
/// to pause it or request a redeploy, and the hand-over of a remote
/// deployment by the object that held it (`deployment::claims::hand_over`,
/// so that the new holder takes it at once). Status, the finalizer (the pass adds
/// it itself and goes on: `Kind::finalizer_with_first_write`), the
/// create-pending marker and other metadata written by the operator are
/// left out, so its own writes never trigger a pass (and so never a remote
/// call) by themselves.
pub fn deployment_trigger_hash(obj: &AgentDeployment) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    obj.metadata.generation.hash(&mut h);
    obj.metadata.deletion_timestamp.is_some().hash(&mut h);
    for key in [
        crate::api::deployment::PAUSED_ANNOTATION,
        crate::api::deployment::REDEPLOY_ANNOTATION,
        crate::api::deployment::HANDED_OVER_FROM_ANNOTATION,
    ] {
        obj.annotations().get(key).hash(&mut h);
    }
    Some(h.finish())
}

/// AgentDeployments that reference `secret` in `spec.secrets` or
/// `spec.verify`, and the blocked ones ([`is_blocked`]) whose
/// AgentControlPlane's credential it holds. A new API key rebuilds the
/// plane's client on its next use; it triggers no pass of steady objects.
fn referencing_secret(
    deployments: &Store<CachedDeployment>,
    planes: &Store<AgentControlPlane>,
    secret: &PartialObjectMeta<Secret>,
) -> Vec<ObjectRef<CachedDeployment>> {
    let ns = secret.namespace();
    let name = secret.name_any();
    // Seen for the first time: it may unblock objects waiting for it; the
    // steady ones already used its value.
    let first_sight = crate::controller::secrets::is_first_sight(secret);
    let key_of: Vec<String> = planes
        .state()
        .iter()
        .filter(|p| p.namespace() == ns && p.spec.credential_ref().is_some_and(|r| r.name == name))
        .map(|p| p.name_any())
        .collect();
    deployments
        .state()
        .iter()
        .filter(|d| d.namespace() == ns)
        .filter(|d| {
            let direct = d.secret_refs().iter().any(|r| r.name == name);
            let of_plane = !d.spec.control_plane_ref.is_cluster()
                && key_of.contains(&d.spec.control_plane_ref.name);
            (direct && (!first_sight || is_blocked(d))) || (of_plane && is_blocked(d))
        })
        .map(|d| ObjectRef::from_obj(d.as_ref()))
        .collect()
}

/// AgentDeployments on the AgentControlPlane `plane`: all of them when
/// `wave` (its spec, `Stalled` or presence changed), else only the blocked
/// ones ([`is_blocked`]), which a `Ready` flip may unblock.
fn referencing_plane(
    deployments: &Store<CachedDeployment>,
    plane: &AgentControlPlane,
    wave: bool,
) -> Vec<ObjectRef<CachedDeployment>> {
    let ns = plane.namespace();
    let name = plane.name_any();
    deployments
        .state()
        .iter()
        .filter(|d| {
            d.namespace() == ns
                && !d.spec.control_plane_ref.is_cluster()
                && d.spec.control_plane_ref.name == name
        })
        .filter(|d| wave || is_blocked(d))
        .map(|d| ObjectRef::from_obj(d.as_ref()))
        .collect()
}
