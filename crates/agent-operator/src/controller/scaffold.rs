//! The controller scaffold every kind rests on (kaniop, controller-rs): the
//! common tail of a controller ([`drive`], [`run_in_scope`]: bounded
//! concurrency, graceful shutdown, the shared error policy
//! [`requeue_after_error`], each result logged and counted [`observed`]),
//! on the watches of [`super::watch`] (re-exported here). The pass itself, generic over the kind (its report, the
//! one write order, the finalizer wrapper), is [`super::kind`]; the
//! error-to-reason table is in [`super::report`]
//! ([`super::report::ReasonTable`]); the per-pass metrics in
//! [`observed`].
//!
//! A kind's own module adds only what is its own: its trigger mapping (which
//! objects a Secret or an AgentControlPlane wakes), its concurrency, its
//! reconcile and its reasons row. AgentControlPlane and AgentListener each
//! wire in a dozen lines; AgentDeployment adds fair admission per control
//! plane (`deployment/runner.rs`).

use std::future::Future;
use std::sync::Arc;

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

/// The common tail of every controller: runs `controller` (its watches
/// already added) with at most `concurrency` passes at once (0: unbounded,
/// when the kind bounds its passes itself), until `shutdown` resolves (then
/// lets in-flight passes finish). `reconcile` is the kind's pass, usually
/// wrapped in [`observed`]; `error_policy` its requeue after an error
/// (most kinds: [`error_policy`]). Each result is logged at debug level with
/// `kind`.
pub fn drive<K, S, F, Fut, P>(
    controller: Controller<K>,
    kind: &'static str,
    concurrency: u16,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
    reconcile: F,
    error_policy: P,
    ctx: Arc<Context<S>>,
) -> impl Future<Output = ()> + Send
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    S: Send + Sync + 'static,
    F: FnMut(Arc<K>, Arc<Context<S>>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<Action, Error>> + Send + 'static,
    P: Fn(Arc<K>, &Error, Arc<Context<S>>) -> Action + Send + Sync + 'static,
{
    controller
        .with_config(kube::runtime::controller::Config::default().concurrency(concurrency))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(move |res| async move {
            match res {
                Ok((obj, _)) => debug!(kind, object = %obj, "reconciled"),
                Err(e) => debug!(kind, error = %e, "reconcile failed"),
            }
        })
}

/// One controller of `kind` per watched namespace of `scope` (`build` makes
/// it for a namespace; `None`: all namespaces), each run by [`drive`] with
/// `concurrency`, the timed and counted `reconcile` ([`observed`]) and the
/// shared [`error_policy`], until `shutdown`. Returns when every one has
/// stopped. The whole `run` of a kind without a fleet of its own to pace
/// (AgentControlPlane, AgentListener).
pub async fn run_in_scope<K, S, B, R, Fut>(
    ctx: Arc<Context<S>>,
    scope: Scope,
    kind: &'static str,
    concurrency: u16,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
    build: B,
    reconcile: R,
) where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    S: Send + Sync + 'static,
    B: Fn(Option<&str>) -> Controller<K>,
    R: Fn(Arc<K>, Arc<Context<S>>) -> Fut + Copy + Send + 'static,
    Fut: Future<Output = Result<Action, Error>> + Send + 'static,
{
    let shutdown = Box::pin(shutdown).shared();
    let controllers = scope.targets().into_iter().map(|namespace| {
        drive(
            build(namespace),
            kind,
            concurrency,
            shutdown.clone(),
            observed(kind, reconcile),
            error_policy,
            ctx.clone(),
        )
    });
    futures::future::join_all(controllers).await;
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
