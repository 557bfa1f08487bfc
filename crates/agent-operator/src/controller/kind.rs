//! The pass of every kind, generic over the kind (kaniop's per-kind
//! `reconcile` on one shared context; Stackable's steps that return values):
//! the [`Kind`] trait says what differs per kind, [`Report`] is the one value
//! a pass returns (status, annotations, events, requeue), [`write`](fn@write)
//! writes it in one order for every kind and every path (annotations, then
//! status, then events), and [`reconcile`] wraps a kind's pass in its
//! finalizer, if it has one, and forgets the in-process memory of an object
//! once its deletion is done.
//!
//! Steps build reports, never write them: only [`reconcile`] calls
//! [`write`](fn@write). The one write a step may make itself is a marker that must be
//! stored before the remote call it guards (the AgentDeployment's
//! create-pending annotation, with its finalizer when the object has none
//! yet, through [`set_metadata`]).

use std::future::Future;
use std::sync::Arc;

use crate::plan::verdict::EventType;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::context::Context;
use super::error::Error;
use super::report::conditions;
use super::report::{ReasonTable, apply_status, publish};
use super::requeue::object_key;
use crate::api::conditions::{READY, find};
use crate::plan::status::Outcome;
use crate::plan::verdict::Note;

/// The scope of a reconciled kind: how its pass reaches its objects
/// (namespaced kinds in their namespace, cluster-scoped kinds across the
/// cluster).
pub trait KindScope {
    /// The API of objects of `K` in `namespace` (ignored for a
    /// cluster-scoped kind). Errors: a namespaced kind without a namespace.
    fn api<K>(client: kube::Client, namespace: Option<&str>) -> Result<Api<K>, Error>
    where
        K: Resource<DynamicType = (), Scope = Self>;
}

impl KindScope for k8s_openapi::NamespaceResourceScope {
    fn api<K>(client: kube::Client, namespace: Option<&str>) -> Result<Api<K>, Error>
    where
        K: Resource<DynamicType = (), Scope = Self>,
    {
        let ns = namespace.ok_or(Error::MissingObjectKey("namespace"))?;
        Ok(Api::namespaced(client, ns))
    }
}

impl KindScope for k8s_openapi::ClusterResourceScope {
    fn api<K>(client: kube::Client, _namespace: Option<&str>) -> Result<Api<K>, Error>
    where
        K: Resource<DynamicType = (), Scope = Self>,
    {
        Ok(Api::all(client))
    }
}

/// What differs from one reconciled kind to the next; the rest of a pass
/// (the finalizer, the order of the writes, the backoff bookkeeping) is
/// [`reconcile`]'s.
pub trait Kind:
    Resource<DynamicType = (), Scope: KindScope>
    + Clone
    + DeserializeOwned
    + Serialize
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    /// What the kind keeps between its passes, in its [`Context`]'s
    /// `state` (`()`: nothing; the AgentDeployment's:
    /// [`super::deployment::context::State`]).
    type State: Send + Sync + 'static;

    /// The status subresource of the kind.
    type Status: Serialize + PartialEq + Clone + Default + std::fmt::Debug + Send + Sync;

    /// The finalizer the kind keeps while it has something to clean up
    /// (`<group>/<purpose>`); `None`: the kind has no cleanup.
    const FINALIZER: Option<&'static str>;

    /// The status of `self`, if any.
    fn status(&self) -> Option<&Self::Status>;

    /// The conditions of `status`.
    fn conditions(status: &Self::Status) -> &[Condition];

    /// The kind's row of the one error-to-reason table.
    const REASONS: ReasonTable;

    /// What a pass reads before it decides: its inputs from Kubernetes,
    /// the in-process memory and the clock.
    type Observed: Send;

    /// The one step a pass decides to take.
    type Decision: Send;

    /// Reads the inputs of `obj`; `Err`: the pass ends with that report (an
    /// input is missing, the object is paused or gone).
    fn observe(
        api: &Api<Self>,
        obj: &Self,
        ctx: &Context<Self::State>,
    ) -> impl Future<Output = Flow<Self::Observed, Self>> + Send;

    /// The step to take on what was observed. Pure.
    fn decide(obj: &Self, seen: &Self::Observed) -> Self::Decision;

    /// Takes the step `decision` (at most one remote mutation) and builds
    /// the pass's report; writes nothing.
    fn act(
        api: &Api<Self>,
        obj: &Self,
        ctx: &Context<Self::State>,
        seen: Self::Observed,
        decision: Self::Decision,
    ) -> impl Future<Output = Box<Report<Self>>> + Send;

    /// The pass of an object that is not being deleted: observe, decide,
    /// act, ending in one report.
    fn apply(
        api: &Api<Self>,
        obj: &Self,
        ctx: &Context<Self::State>,
    ) -> impl Future<Output = Box<Report<Self>>> + Send {
        async move {
            match Self::observe(api, obj, ctx).await {
                Ok(seen) => {
                    let decision = Self::decide(obj, &seen);
                    Self::act(api, obj, ctx, seen, decision).await
                }
                Err(report) => report,
            }
        }
    }

    /// The pass of an object being deleted (only with a [`Self::FINALIZER`]):
    /// `Ok(Action::await_change())` lets the finalizer go. Default: nothing
    /// to clean up.
    fn cleanup(
        _api: &Api<Self>,
        _obj: &Self,
        _ctx: &Context<Self::State>,
    ) -> impl Future<Output = Box<Report<Self>>> + Send {
        std::future::ready(Report::end(Action::await_change()))
    }

    /// True when the pass of `obj`, which lacks its [`Self::FINALIZER`] and
    /// is not being deleted, adds it itself ([`set_metadata`]) before its
    /// first remote mutation (for an object with nothing to clean up yet,
    /// in the metadata write that precedes that mutation), instead of
    /// [`reconcile`] adding it alone and ending the pass, to be triggered
    /// again by that write. Default: false.
    fn finalizer_with_first_write(&self) -> bool {
        false
    }

    /// Forgets what this kind keeps in its state about `obj`, once its
    /// deletion is done (the error backoff, [`super::context::Shared`]'s,
    /// is forgotten for every kind). Default: nothing.
    fn forget(_ctx: &Context<Self::State>, _obj: &Self) {}

    /// How soon a pass of `self` must run again at the latest, whatever
    /// its report says (an AgentDeployment's expiry instant): [`write`](fn@write)
    /// requeues at the sooner of the two ([`Requeue::sooner`]). Default:
    /// `None`, the report's requeue stands.
    fn wake_in(&self) -> Option<std::time::Duration> {
        None
    }
}

/// When the pass of an object runs again, as its report says: after a
/// delay, or on its next change. Unlike kube's [`Action`], whose delay is
/// private, it tells its delay, so that a kind's wake-up
/// ([`Kind::wake_in`]) is compared with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requeue {
    /// After this delay; `None`: on the object's next change only.
    Known(Option<std::time::Duration>),
    /// A kube [`Action`], its delay unknown: built by kinds without a
    /// wake-up ([`Kind::wake_in`]); a wake-up takes its place.
    Opaque(Action),
}

impl Requeue {
    /// Runs again after `delay`.
    pub fn after(delay: std::time::Duration) -> Self {
        Self::Known(Some(delay))
    }

    /// Runs again on the object's next change only.
    pub fn await_change() -> Self {
        Self::Known(None)
    }

    /// This requeue, or `wake` when that comes sooner (a requeue whose delay
    /// is unknown gives way to `wake`).
    pub fn sooner(self, wake: Option<std::time::Duration>) -> Self {
        match (wake, &self) {
            (None, _) => self,
            (Some(wake), Self::Known(Some(after))) if *after <= wake => self,
            (Some(wake), _) => Self::after(wake),
        }
    }
}

impl From<Action> for Requeue {
    fn from(action: Action) -> Self {
        Self::Opaque(action)
    }
}

impl From<Requeue> for Action {
    fn from(requeue: Requeue) -> Self {
        match requeue {
            Requeue::Known(Some(delay)) => Action::requeue(delay),
            Requeue::Known(None) => Action::await_change(),
            Requeue::Opaque(action) => action,
        }
    }
}

/// The status items of an `impl Kind` whose object keeps its status in
/// `status: Option<S>` and its conditions in `S::conditions` (every kind
/// of the operator): `type Status = S`, [`Kind::status`] and
/// [`Kind::conditions`].
#[macro_export]
macro_rules! kind_status {
    ($status:ty) => {
        type Status = $status;

        fn status(&self) -> Option<&$status> {
            self.status.as_ref()
        }

        fn conditions(
            status: &$status,
        ) -> &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition] {
            &status.conditions
        }
    };
}

/// A step's result: `Err` ends the pass with this report (nothing after it
/// runs); a Kubernetes error converts into a report that writes nothing.
pub type Flow<T, K> = Result<T, Box<Report<K>>>;

/// Everything one pass writes, and what it returns once written.
#[derive(Debug)]
pub struct Report<K: Kind> {
    /// The object the pass decided on when it read it fresh (the writes and
    /// events name that one); `None`: the object the pass was given.
    pub object: Option<Box<K>>,
    /// The new status, only when it differs from the object's.
    pub status: Option<Box<K::Status>>,
    /// Annotations to set, or to remove (`None`), in one merge patch; empty:
    /// no metadata write.
    pub annotations: Vec<(&'static str, Option<String>)>,
    /// Events, published after the writes, in this order.
    pub events: Vec<Note>,
    /// Changes of the in-process memory (the kind's [`Context`]) that this pass's
    /// writes make true, applied only once they succeeded: a failed write
    /// leaves the memory as it was, like the object.
    pub remember: Remember<K::State>,
    /// The requeue, or the error that `error_policy` backs off from.
    pub then: Result<Requeue, Error>,
}

/// One change of the in-process memory of a kind whose state is `S`.
type Change<S> = Box<dyn FnOnce(&Context<S>) + Send + Sync>;

/// Changes of the in-process memory carried by a [`Report`], in order.
pub struct Remember<S>(Vec<Change<S>>);

impl<S> Default for Remember<S> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<S> Remember<S> {
    /// Adds `change`, applied after the report's Kubernetes writes.
    pub fn push(&mut self, change: impl FnOnce(&Context<S>) + Send + Sync + 'static) {
        self.0.push(Box::new(change));
    }

    /// Moves the changes of `other` after these.
    pub fn append(&mut self, other: &mut Remember<S>) {
        self.0.append(&mut other.0);
    }

    /// Applies every change to `ctx`, in order.
    fn apply(self, ctx: &Context<S>) {
        for change in self.0 {
            change(ctx);
        }
    }
}

impl<S> std::fmt::Debug for Remember<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Remember({} changes)", self.0.len())
    }
}

impl<K: Kind> From<Error> for Box<Report<K>> {
    fn from(e: Error) -> Self {
        Report::failed(e)
    }
}

impl<K: Kind> Report<K> {
    /// A pass that writes nothing and requeues with `action`.
    pub fn end(action: impl Into<Requeue>) -> Box<Self> {
        Box::new(Self {
            object: None,
            status: None,
            annotations: Vec::new(),
            events: Vec::new(),
            remember: Remember::default(),
            then: Ok(action.into()),
        })
    }

    /// A pass that writes nothing and returns `e`.
    pub fn failed(e: Error) -> Box<Self> {
        let mut r = Self::end(Requeue::await_change());
        r.then = Err(e);
        r
    }

    /// The report of a kind whose pass ends in one [`Outcome`]: the status
    /// `build(observedGeneration, conditions)` (the conditions from the
    /// object's and `outcome`, `lastTransitionTime` kept when the status of
    /// a condition did not change) when it differs from the object's, the
    /// event of a `Ready` change ([`transition_event`]), and `then`.
    pub fn outcome_with(
        obj: &K,
        outcome: &Outcome,
        then: Result<impl Into<Requeue>, Error>,
        build: impl FnOnce(Option<i64>, Vec<Condition>) -> K::Status,
    ) -> Box<Self> {
        let previous = obj.status().map(K::conditions).unwrap_or_default();
        let generation = obj.meta().generation;
        let status = build(generation, conditions(previous, outcome, generation));
        let mut r = Self::end(Requeue::await_change()).then(then);
        r.status = changed(obj, status);
        r.events.extend(transition_event(previous, outcome));
        r
    }

    /// Returns `then` after the writes instead.
    pub fn then(mut self: Box<Self>, then: Result<impl Into<Requeue>, Error>) -> Box<Self> {
        self.then = then.map(Into::into);
        self
    }

    /// The writes name `fresh` (a fresh read of the object) when set.
    pub fn on(mut self: Box<Self>, fresh: Option<&K>) -> Box<Self> {
        if self.object.is_none() {
            self.object = fresh.map(|o| Box::new(o.clone()));
        }
        self
    }
}

/// `status` when it differs from the status of `obj` (a write is due).
pub fn changed<K: Kind>(obj: &K, status: K::Status) -> Option<Box<K::Status>> {
    (obj.status() != Some(&status)).then(|| Box::new(status))
}

/// True when the object already shows `reason` and `message` on its `Ready`
/// condition (so a Warning event is not repeated on every pass).
pub fn already_reported<K: Kind>(obj: &K, reason: &str, message: &str) -> bool {
    obj.status()
        .and_then(|s| find(K::conditions(s), READY))
        .is_some_and(|c| c.reason == reason && c.message == message)
}

/// The event of a change of the `Ready` condition (status, reason or
/// message) from `previous` to `outcome`: Normal when it became True,
/// Warning otherwise; `None` when it did not change. Pure.
pub fn transition_event(previous: &[Condition], outcome: &Outcome) -> Option<Note> {
    let now_ready = matches!(outcome, Outcome::Ready { .. });
    let unchanged = find(previous, READY).is_some_and(|c| {
        (c.status == "True") == now_ready
            && c.reason == outcome.reason()
            && c.message == outcome.message()
    });
    let type_ = if now_ready {
        EventType::Normal
    } else {
        EventType::Warning
    };
    (!unchanged).then(|| (type_, outcome.reason(), outcome.message().to_owned()))
}

/// Sets or removes (`None`) annotations of `obj` with one JSON merge patch.
/// Errors: the Kubernetes API error.
pub async fn set_annotations<K: Kind>(
    api: &Api<K>,
    obj: &K,
    annotations: &[(&str, Option<&str>)],
) -> Result<(), Error> {
    set_metadata(api, obj, None, annotations).await
}

/// Sets or removes (`None`) annotations of `obj` and, with `finalizer` that
/// `obj` lacks, adds it, all in one JSON merge patch. With the finalizer
/// the patch carries the resourceVersion of `obj` and its whole list of
/// finalizers, so it applies only to the object as read (the API server
/// answers 409 Conflict otherwise, and the pass is retried on a fresh
/// read): another controller's finalizer added meanwhile is never lost.
/// Errors: the Kubernetes API error.
pub async fn set_metadata<K: Kind>(
    api: &Api<K>,
    obj: &K,
    finalizer: Option<&str>,
    annotations: &[(&str, Option<&str>)],
) -> Result<(), Error> {
    let map: serde_json::Map<String, serde_json::Value> = annotations
        .iter()
        .map(|(k, v)| ((*k).to_owned(), serde_json::json!(v)))
        .collect();
    let mut metadata = serde_json::Map::new();
    if !map.is_empty() {
        metadata.insert("annotations".into(), map.into());
    }
    if let Some(name) = finalizer.filter(|f| !has_finalizer(obj, f)) {
        let mut finalizers = obj.finalizers().to_vec();
        finalizers.push(name.to_owned());
        metadata.insert("finalizers".into(), serde_json::json!(finalizers));
        metadata.insert(
            "resourceVersion".into(),
            serde_json::json!(obj.resource_version()),
        );
    }
    if metadata.is_empty() {
        return Ok(());
    }
    let patch = serde_json::json!({ "metadata": metadata });
    api.patch(
        &obj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(Error::Kube)?;
    Ok(())
}

/// True when `obj` carries the finalizer `name`.
pub fn has_finalizer<K: Kind>(obj: &K, name: &str) -> bool {
    obj.finalizers().iter().any(|f| f == name)
}

/// Writes `report` about `obj` (or the fresh read it names): annotations,
/// then status, then the changes of the in-process memory it carries, then
/// events; returns its `then`, or the wake-up of `obj` when that comes
/// sooner ([`Kind::wake_in`]). A failed write returns the Kubernetes error,
/// and what follows it is neither written nor remembered.
pub async fn write<K: Kind>(
    api: &Api<K>,
    ctx: &Context<K::State>,
    obj: &K,
    report: Box<Report<K>>,
) -> Result<Action, Error> {
    let Report {
        object,
        status,
        annotations,
        events,
        remember,
        then,
    } = *report;
    let wake = obj.wake_in();
    let obj = object.as_deref().unwrap_or(obj);
    // The `blocked` outcome of the reconcile metric: the pass leaves the
    // object `Stalled` (the status it writes, or the one it keeps). Noted
    // here, the one write of every kind, so that plan/ stays pure.
    let conditions = status.as_deref().or(obj.status()).map(K::conditions);
    crate::metrics::note_pass_outcome(conditions.is_some_and(|c| {
        find(c, crate::plan::status::STALLED)
            .is_some_and(|s| s.status == crate::api::conditions::TRUE)
    }));
    // Annotations first: the AgentDeployment's admission lock compares
    // the whole spec on every write once `status.deploymentId` is set
    // (crds/, the root rule), so the id annotation of a create, written
    // while the status holds no id yet, skips that comparison; the status
    // write that follows sets the lock. A failed status write leaves the
    // id in the annotation, which the next pass reads
    // (docs/BEHAVIOUR.md, "AgentDeployment").
    if !annotations.is_empty() {
        let pairs: Vec<(&str, Option<&str>)> = annotations
            .iter()
            .map(|(k, v)| (*k, v.as_deref()))
            .collect();
        set_annotations(api, obj, &pairs).await?;
    }
    if let Some(status) = status {
        apply_status(api, &obj.name_any(), &*status).await?;
    }
    remember.apply(ctx);
    for (type_, reason, note) in events {
        publish(ctx, obj, type_, reason, note).await;
    }
    then.map(|next| next.sooner(wake).into())
}

/// One reconcile pass of any kind: the finalizer helper (with a
/// [`Kind::FINALIZER`]) dispatches to [`Kind::apply`] or [`Kind::cleanup`],
/// and the report they return is written ([`write`](fn@write)). Once written: a
/// finished deletion forgets the object's in-process memory (the
/// shared error backoff and [`Kind::forget`]); any other success resets the
/// object's error backoff.
///
/// Errors: Kubernetes API failures and the errors the pass returns (status
/// is written before they are returned).
#[tracing::instrument(skip_all, fields(namespace = obj.namespace().unwrap_or_default(), name = obj.name_any()))]
pub async fn reconcile<K: Kind>(obj: Arc<K>, ctx: Arc<Context<K::State>>) -> Result<Action, Error> {
    let key = object_key(obj.as_ref());
    let deleted = obj.meta().deletion_timestamp.is_some();
    let api: Api<K> = <K::Scope as KindScope>::api(ctx.client.clone(), obj.namespace().as_deref())?;
    let result = match K::FINALIZER {
        None => {
            let report = K::apply(&api, &obj, &ctx).await;
            write(&api, &ctx, &obj, report).await
        }
        Some(name) => with_finalizer(&api, name, obj.clone(), &ctx).await,
    };
    match &result {
        Ok(action) if deleted && *action == Action::await_change() => {
            ctx.forget(&key);
            K::forget(&ctx, &obj);
        }
        Ok(_) => ctx.reset_backoff(&key),
        Err(_) => {}
    }
    result
}

/// The pass inside kube's finalizer helper: it adds `name` before the first
/// apply (in a write of its own, the pass ending there: the write starts
/// the next one) and removes it after a cleanup that succeeded. An object
/// whose kind adds the finalizer itself
/// ([`Kind::finalizer_with_first_write`]) goes straight to its pass.
async fn with_finalizer<K: Kind>(
    api: &Api<K>,
    name: &str,
    obj: Arc<K>,
    ctx: &Context<K::State>,
) -> Result<Action, Error> {
    if obj.meta().deletion_timestamp.is_none()
        && !has_finalizer(obj.as_ref(), name)
        && obj.finalizer_with_first_write()
    {
        let report = K::apply(api, &obj, ctx).await;
        return write(api, ctx, &obj, report).await;
    }
    let result = match finalizer_pass(api, name, obj.clone(), ctx).await {
        // kube's helper adds the finalizer with a JSON patch that first
        // tests the finalizer list it read: a 422 without causes is that
        // test failing, because the cached object predates a write of the
        // list (this pass's own finalizer, added by the pass just before,
        // when another change woke this one first). The pass goes on with
        // a fresh read instead of failing into the error backoff.
        Err(kube::runtime::finalizer::Error::AddFinalizer(kube::Error::Api(status)))
            if stale_finalizer_list(&status) =>
        {
            match api.get_opt(&obj.name_any()).await.map_err(Error::Kube)? {
                Some(fresh) => finalizer_pass(api, name, Arc::new(fresh), ctx).await,
                None => return Ok(Action::await_change()),
            }
        }
        other => other,
    };
    result.map_err(|e| match e {
        kube::runtime::finalizer::Error::ApplyFailed(e)
        | kube::runtime::finalizer::Error::CleanupFailed(e) => e,
        other => Error::Finalizer(Box::new(other)),
    })
}

/// One pass through kube's finalizer helper: [`Kind::apply`] or
/// [`Kind::cleanup`], and the write of its report.
async fn finalizer_pass<K: Kind>(
    api: &Api<K>,
    name: &str,
    obj: Arc<K>,
    ctx: &Context<K::State>,
) -> Result<Action, kube::runtime::finalizer::Error<Error>> {
    finalizer(api, name, obj, |event| async {
        let (obj, report) = match event {
            FinalizerEvent::Apply(obj) => {
                let report = K::apply(api, &obj, ctx).await;
                (obj, report)
            }
            FinalizerEvent::Cleanup(obj) => {
                let report = K::cleanup(api, &obj, ctx).await;
                (obj, report)
            }
        };
        write(api, ctx, &obj, report).await
    })
    .await
}

/// True for the answer to a JSON patch whose `test` operation failed: 422
/// without field causes (a schema or CEL refusal names its fields).
fn stale_finalizer_list(status: &kube::core::Status) -> bool {
    status.code == 422 && status.details.as_ref().is_none_or(|d| d.causes.is_empty())
}

#[cfg(test)]
mod tests {
    use super::stale_finalizer_list;

    fn status(v: serde_json::Value) -> kube::core::Status {
        serde_json::from_value(v).expect("a Status")
    }

    /// A kind's wake-up takes the place of a later requeue, of a wait for
    /// a change, and of a requeue whose delay is unknown; a sooner requeue
    /// stands; without a wake-up every requeue stands.
    #[test]
    fn the_wake_up_wins_only_when_sooner() {
        use super::Requeue;
        use kube::runtime::controller::Action;
        use std::time::Duration;
        let s = Duration::from_secs;
        let five = Some(s(5));
        assert_eq!(Requeue::after(s(300)).sooner(five), Requeue::after(s(5)));
        assert_eq!(Requeue::after(s(2)).sooner(five), Requeue::after(s(2)));
        assert_eq!(Requeue::after(s(5)).sooner(five), Requeue::after(s(5)));
        assert_eq!(Requeue::await_change().sooner(five), Requeue::after(s(5)));
        let opaque = Requeue::from(Action::requeue(s(1)));
        assert_eq!(opaque.clone().sooner(five), Requeue::after(s(5)));
        assert_eq!(opaque.clone().sooner(None), opaque);
        assert_eq!(
            Requeue::await_change().sooner(None),
            Requeue::await_change()
        );
        assert_eq!(Action::from(Requeue::after(s(2))), Action::requeue(s(2)));
        assert_eq!(
            Action::from(Requeue::await_change()),
            Action::await_change()
        );
    }

    #[test]
    fn only_a_failed_patch_test_counts_as_a_stale_finalizer_list() {
        // What kube-apiserver answered in the agents fleet bench.
        let failed_test = status(serde_json::json!({"status": "Failure", "code": 422,
            "reason": "Invalid", "message": "the server rejected our request",
            "details": {"causes": []}}));
        assert!(stale_finalizer_list(&failed_test));
        let no_details = status(serde_json::json!({"code": 422, "reason": "Invalid"}));
        assert!(stale_finalizer_list(&no_details));
        // A schema or CEL refusal names its fields: a real error.
        let invalid = status(serde_json::json!({"code": 422, "reason": "Invalid",
            "details": {"causes": [{"reason": "FieldValueInvalid", "field": "spec.schedule"}]}}));
        assert!(!stale_finalizer_list(&invalid));
        let conflict = status(serde_json::json!({"code": 409, "reason": "Conflict"}));
        assert!(!stale_finalizer_list(&conflict));
    }
}
