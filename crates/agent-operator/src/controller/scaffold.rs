//! The controller scaffold every kind rests on (kaniop, controller-rs): the
//! one runner of every kind ([`run_in_scope`]: one controller per watched
//! namespace, bounded concurrency, graceful shutdown, readiness), what a
//! kind wires per namespace ([`Wiring`]: its controller over the store of
//! its choosing, its pass, its error policy), the shared error policy
//! ([`requeue_after_error`]) and the timing and counting of a pass
//! ([`observed`]), on the watches of [`super::watch`] (re-exported here).
//! The pass itself, generic over the kind (its report, the one write order,
//! the finalizer wrapper), is [`super::kind`]; the error-to-reason table is
//! in [`super::report`] ([`super::report::ReasonTable`]).
//!
//! A kind's own module adds only what is its own: its trigger mapping (which
//! objects a Secret or an AgentControlPlane wakes), its concurrency, its
//! reconcile and its reasons row. AgentControlPlane and AgentListener each
//! wire in a dozen lines; AgentDeployment adds its compact store, its
//! extra watches and fair admission per control plane before the timed
//! pass (`deployment/runner.rs`).

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use kube::Resource;
use kube::runtime::controller::{Action, Controller};
use tracing::debug;

use super::context::{Context, Shared};
use super::error::Error;
use super::requeue::{IN_USE_RECHECK, jittered, object_key};
pub use super::watch::{
    GONE_WITHOUT_BACKOFF_EVERY, LAST_APPLIED_ANNOTATION, Scope, own_kind_stream, ready_counts,
    relist_at_once, scoped_api, strip_managed_fields, synced_store,
};

/// Wraps a reconcile function so that each pass is timed and counted in
/// `ctx.metrics` under `kind` (`blocked` when it reported the object
/// `Stalled`, [`crate::metrics::track_pass`]).
pub fn observed<K, S, F, Fut>(
    kind: &'static str,
    reconcile: F,
) -> impl FnMut(
    std::sync::Arc<K>,
    std::sync::Arc<Context<S>>,
) -> futures::future::BoxFuture<'static, Result<Action, Error>>
where
    F: Fn(std::sync::Arc<K>, std::sync::Arc<Context<S>>) -> Fut + Copy + Send + 'static,
    Fut: std::future::Future<Output = Result<Action, Error>> + Send + 'static,
    K: Send + Sync + 'static,
    S: Send + Sync + 'static,
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

/// What a controller can watch and store: a kind's objects (or a compact
/// form of them, the AgentDeployment's `CachedDeployment`), as kube's
/// `Controller` needs them.
pub trait Watched:
    Resource<DynamicType = ()>
    + Clone
    + serde::de::DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
}

impl<K> Watched for K where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static
{
}

/// The common tail of every controller: runs `controller` (its watches
/// already added) with at most `concurrency` passes at once (0: unbounded,
/// when the kind bounds its passes itself), until `shutdown` resolves (then
/// lets in-flight passes finish), with the pass and error policy of its
/// [`Wiring`]. Each result is logged at debug level with `kind`.
fn drive<K, S>(
    controller: Controller<K>,
    kind: &'static str,
    concurrency: u16,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
    pass: Pass<K, S>,
    error_policy: ErrorPolicy<K, S>,
    ctx: Arc<Context<S>>,
) -> impl Future<Output = ()> + Send
where
    K: Watched,
    S: Send + Sync + 'static,
{
    controller
        .with_config(kube::runtime::controller::Config::default().concurrency(concurrency))
        .graceful_shutdown_on(shutdown)
        .run(pass, error_policy, ctx)
        .for_each(move |res| async move {
            match res {
                Ok((obj, _)) => debug!(kind, object = %obj, "reconciled"),
                Err(e) => debug!(kind, error = %e, "reconcile failed"),
            }
        })
}

/// The pass a controller runs: the kind's pass, or an admission before it
/// (the AgentDeployment's fair share per control plane).
pub type Pass<K, S> =
    Box<dyn FnMut(Arc<K>, Arc<Context<S>>) -> BoxFuture<'static, Result<Action, Error>> + Send>;

/// A controller's requeue after a failed pass.
pub type ErrorPolicy<K, S> = Box<dyn Fn(Arc<K>, &Error, Arc<Context<S>>) -> Action + Send + Sync>;

/// What a kind's `build` makes for one namespace: the controller with its
/// watches (over a store of the kind's choosing: its own objects, or a
/// compact form of them), the pass it runs and its error policy, and the
/// readiness of its stores.
pub struct Wiring<K, S>
where
    K: Watched,
{
    controller: Controller<K>,
    pass: Pass<K, S>,
    error_policy: ErrorPolicy<K, S>,
    synced: Option<BoxFuture<'static, bool>>,
}

impl<K, S> Wiring<K, S>
where
    K: Watched,
    S: Send + Sync + 'static,
{
    /// `controller` running the kind's `reconcile`, timed and counted as
    /// `kind` ([`observed`]), with the shared [`error_policy`]: the wiring
    /// of every kind without a fleet of its own to pace.
    pub fn new<R, Fut>(kind: &'static str, controller: Controller<K>, reconcile: R) -> Self
    where
        R: Fn(Arc<K>, Arc<Context<S>>) -> Fut + Copy + Send + 'static,
        Fut: Future<Output = Result<Action, Error>> + Send + 'static,
    {
        Self::with_pass(controller, observed(kind, reconcile), error_policy)
    }

    /// `controller` running `pass` (which times and counts the kind's pass
    /// itself, after whatever admission it makes first) and `error_policy`.
    pub fn with_pass<F, Fut, P>(controller: Controller<K>, mut pass: F, error_policy: P) -> Self
    where
        F: FnMut(Arc<K>, Arc<Context<S>>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<Action, Error>> + Send + 'static,
        P: Fn(Arc<K>, &Error, Arc<Context<S>>) -> Action + Send + Sync + 'static,
    {
        Self {
            controller,
            pass: Box::new(move |obj, ctx| pass(obj, ctx).boxed()),
            error_policy: Box::new(error_policy),
            synced: None,
        }
    }

    /// Readiness: `synced` resolves to true once the stores the controller
    /// reads have listed (false: a watch stopped first).
    pub fn synced(mut self, synced: impl Future<Output = bool> + Send + 'static) -> Self {
        self.synced = Some(synced.boxed());
        self
    }
}

/// The one runner of every kind: one controller per watched namespace of
/// `scope` (`build` wires it for a namespace; `None`: all namespaces, or a
/// cluster-scoped kind), each run by [`drive`] with `concurrency` (0:
/// unbounded, when the kind's pass bounds itself), until `shutdown`.
/// `synced` is called once, when every controller's stores have listed
/// ([`Wiring::synced`]; a controller that says nothing counts as listed).
/// Returns when every controller has stopped.
pub async fn run_in_scope<K, S, B>(
    ctx: Arc<Context<S>>,
    scope: Scope,
    kind: &'static str,
    concurrency: u16,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
    build: B,
    synced: impl FnOnce() + Send + 'static,
) where
    K: Watched,
    S: Send + Sync + 'static,
    B: Fn(Option<&str>) -> Wiring<K, S>,
{
    let shutdown = Box::pin(shutdown).shared();
    let mut ready = Vec::new();
    let mut controllers = Vec::new();
    for namespace in scope.targets() {
        let w = build(namespace);
        ready.extend(w.synced);
        controllers.push(drive(
            w.controller,
            kind,
            concurrency,
            shutdown.clone(),
            w.pass,
            w.error_policy,
            ctx.clone(),
        ));
    }
    let readiness = tokio::spawn(async move {
        if futures::future::join_all(ready)
            .await
            .into_iter()
            .all(|ok| ok)
        {
            debug!(kind, "controller watches synced");
            synced();
        }
    });
    futures::future::join_all(controllers).await;
    readiness.abort();
}

/// The requeue after a failed pass of most kinds: the service's
/// `Retry-After` if longer, else exponential backoff per object (capped at
/// `max_backoff`).
pub fn error_policy<K: Resource<DynamicType = ()>, S>(
    obj: Arc<K>,
    error: &Error,
    ctx: Arc<Context<S>>,
) -> Action {
    requeue_after_error(&ctx, obj.as_ref(), error)
}

/// The requeue of a failed pass, shared by every `error_policy`: the
/// service's `Retry-After` if longer, else the per-object exponential backoff
/// (capped at `max_backoff`); logs the failure with its fixed reason.
pub fn requeue_after_error<K: kube::Resource<DynamicType = ()>>(
    ctx: &Shared,
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
