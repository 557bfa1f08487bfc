//! The watches every controller rests on: where they watch ([`Scope`], one
//! kube `Controller` per namespace), the watch of a kind's own objects
//! ([`own_kind_stream`]: a pass on a new generation, never on the
//! operator's own writes), the hygiene of every stream ([`relist_at_once`],
//! [`strip_managed_fields`]) and readiness of the stores ([`synced_store`],
//! [`ready_counts`]). Nothing here holds a context: the caches of
//! [`super::context::Shared`] and the runners of [`super::scaffold`] build
//! on it.

use std::time::Duration;

use futures::StreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{Predicate, WatchStreamExt, watcher};
use kube::{Api, Resource};
use tracing::info;

use crate::metrics::ReadyCounts;

/// Where the controllers watch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Scope {
    /// Every namespace (one controller, cluster-wide watches).
    #[default]
    AllNamespaces,
    /// One namespace.
    Namespace(String),
    /// Several namespaces: one controller per namespace (kube's `Controller`
    /// watches one `Api`), sharing the context and the concurrency bound. An
    /// empty list means every namespace.
    Namespaces(Vec<String>),
}

impl Scope {
    /// The scope of a list of namespaces (the repeated `--namespace` flag):
    /// empty means all namespaces; duplicates and blank names are dropped.
    pub fn from_namespaces(namespaces: impl IntoIterator<Item = String>) -> Self {
        let mut list: Vec<String> = Vec::new();
        for ns in namespaces {
            let ns = ns.trim().to_owned();
            if !ns.is_empty() && !list.contains(&ns) {
                list.push(ns);
            }
        }
        match list.len() {
            0 => Scope::AllNamespaces,
            1 => Scope::Namespace(list.remove(0)),
            _ => Scope::Namespaces(list),
        }
    }

    /// One entry per controller to run: `None` is every namespace.
    pub fn targets(&self) -> Vec<Option<&str>> {
        match self {
            Scope::AllNamespaces => vec![None],
            Scope::Namespace(ns) => vec![Some(ns.as_str())],
            Scope::Namespaces(list) if list.is_empty() => vec![None],
            Scope::Namespaces(list) => list.iter().map(|ns| Some(ns.as_str())).collect(),
        }
    }
}

/// The watch of a controller's own kind and the store it fills: a pass is
/// triggered by a new generation (a spec change, or the deletion of an
/// object with finalizers) or a change of its finalizers (the one added by
/// the finalizer helper), never by the controller's own status writes,
/// which would each cost a control plane request (the brief: "our own writes
/// must never cause a remote call by themselves"). Secrets and other kinds
/// trigger through `watches`, and steady objects are re-checked by the
/// controller's own requeue. Only the objects of `shard` are watched
/// ([`crate::shard::Shard::watch`]).
pub fn own_kind_stream<K>(
    kind: &'static str,
    api: Api<K>,
    shard: &crate::shard::Shard,
) -> (
    Store<K>,
    impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let (store, writer) = reflector::store::<K>();
    let stream = relist_at_once(
        kind,
        watcher(api, shard.watch(watcher::Config::default().any_semantic())),
    )
    .default_backoff()
    .modify(strip_managed_fields)
    .reflect(writer)
    .applied_objects()
    .predicate_filter(
        // The finalizers too: the finalizer helper adds its own and waits for
        // that change to run the first real pass.
        (kube::runtime::predicates::generation as fn(&K) -> Option<u64>)
            .combine(kube::runtime::predicates::finalizers as fn(&K) -> Option<u64>),
        Default::default(),
    );
    (store, stream)
}

/// Counts the objects of `store` by the status of their `Ready` condition
/// (`ready` reads it, owned: a cached AgentDeployment parses it from its
/// status JSON).
pub fn ready_counts<K>(store: &Store<K>, ready: impl Fn(&K) -> Option<String>) -> ReadyCounts
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    let mut counts = ReadyCounts::default();
    for obj in store.state() {
        counts.add(ready(&obj).as_deref());
    }
    counts
}

/// Waits until `store` has listed once; false if its writer was dropped first.
///
/// `Store::wait_until_ready` wakes only the last task that polled it (the
/// value sits behind one `futures` oneshot receiver, which keeps one waker),
/// and the controller's own applier waits on the same store; so each wait
/// here is bounded and retried, which re-registers this task's waker.
pub async fn synced_store<K>(store: &Store<K>) -> bool
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    loop {
        if let Ok(result) =
            tokio::time::timeout(Duration::from_millis(200), store.wait_until_ready()).await
        {
            return result.is_ok();
        }
    }
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

/// How long after a `410 Gone` of a watch the next one goes through the
/// backoff again (see [`relist_at_once`]): 10 s, so that apiserver restarts
/// a few seconds apart each re-list at once (with 60 s, the second of three
/// restarts 20 s apart waited for the grown backoff: 95.6 s to converge),
/// while a server answering 410 in a loop costs at most one list per 10 s.
pub const GONE_WITHOUT_BACKOFF_EVERY: Duration = Duration::from_secs(10);

/// Takes the `410 Gone` errors out of the stream of a watcher of `kind`, so that the
/// backoff after it does not pause the re-list.
///
/// A 410 means the watch's resourceVersion is no longer served (etcd
/// compacted it, or the API server restarted with an empty watch cache); the
/// watcher has already reset itself to list again. Passed on as an error,
/// it made kube's backoff sleep, and after an API server outage that
/// backoff had grown to 30–60 s: the re-list, and every change made while
/// the operator was disconnected, waited that long once more (a partition
/// of 8 s took 128 s to converge). client-go re-lists at once too.
///
/// Only one 410 per [`GONE_WITHOUT_BACKOFF_EVERY`] is taken out; a second
/// one sooner goes through the backoff as before, so a server that answers
/// 410 again and again is not listed in a loop. Each one is logged.
pub fn relist_at_once<K, S>(
    kind: &'static str,
    stream: S,
) -> impl futures::Stream<Item = S::Item> + Send
where
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
    K: Send,
{
    let mut last_gone: Option<std::time::Instant> = None;
    stream.filter_map(move |item| {
        let pass = match &item {
            Err(watcher::Error::WatchError(status)) if status.code == 410 => {
                let now = std::time::Instant::now();
                let recent =
                    last_gone.is_some_and(|t| now.duration_since(t) < GONE_WITHOUT_BACKOFF_EVERY);
                last_gone = Some(now);
                info!(
                    kind,
                    message = %status.message,
                    backoff = recent,
                    "watch expired (410 Gone); listing again"
                );
                recent.then_some(item)
            }
            _ => Some(item),
        };
        std::future::ready(pass)
    })
}

/// The annotation `kubectl apply` (client-side) writes: a second copy of
/// the whole object as last applied, which the operator never reads.
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops what the operator never reads before an object enters a store:
/// `metadata.managedFields` and the [`LAST_APPLIED_ANNOTATION`] (together
/// often larger than the rest of the object; an annotation map left empty
/// becomes absent). Every reflector of the operator's own kinds and of
/// AgentControlPlanes goes through it; the Secret metadata watch has its
/// own, stricter trim.
pub fn strip_managed_fields<K: Resource>(obj: &mut K) {
    let meta = obj.meta_mut();
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED_ANNOTATION);
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Secret;

    use super::*;

    fn owned(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn stores_keep_no_managed_fields_nor_last_applied_copy() {
        let mut secret = Secret::default();
        let meta = &mut secret.metadata;
        meta.managed_fields = Some(vec![Default::default()]);
        meta.annotations = Some(
            [
                (LAST_APPLIED_ANNOTATION.to_owned(), "{\"big\":1}".to_owned()),
                ("agentserver.dev/paused".to_owned(), "true".to_owned()),
            ]
            .into(),
        );
        strip_managed_fields(&mut secret);
        assert_eq!(secret.metadata.managed_fields, None);
        assert_eq!(
            secret.metadata.annotations,
            Some([("agentserver.dev/paused".to_owned(), "true".to_owned())].into())
        );
        let mut only_last_applied = Secret::default();
        only_last_applied.metadata.annotations =
            Some([(LAST_APPLIED_ANNOTATION.to_owned(), "{}".to_owned())].into());
        strip_managed_fields(&mut only_last_applied);
        assert_eq!(only_last_applied.metadata.annotations, None);
    }

    #[test]
    fn namespaces_flag_maps_to_scopes() {
        assert_eq!(Scope::from_namespaces(owned(&[])), Scope::AllNamespaces);
        assert_eq!(Scope::from_namespaces(owned(&[" "])), Scope::AllNamespaces);
        assert_eq!(
            Scope::from_namespaces(owned(&["a", "a"])),
            Scope::Namespace("a".into())
        );
        assert_eq!(
            Scope::from_namespaces(owned(&["a", "b", "a"])),
            Scope::Namespaces(owned(&["a", "b"]))
        );
    }

    fn gone() -> Result<watcher::Event<Secret>, watcher::Error> {
        Err(watcher::Error::WatchError(
            kube::core::Status::failure("too old", "Expired")
                .with_code(410)
                .boxed(),
        ))
    }

    #[tokio::test]
    async fn a_410_skips_the_backoff_once_per_interval() {
        let other = || {
            Err::<watcher::Event<Secret>, _>(watcher::Error::WatchError(
                kube::core::Status::failure("boom", "InternalError")
                    .with_code(500)
                    .boxed(),
            ))
        };
        let items = vec![
            Ok(watcher::Event::Init),
            gone(),
            Ok(watcher::Event::InitDone),
            gone(),
            other(),
        ];
        let out: Vec<_> = relist_at_once("Secret", futures::stream::iter(items))
            .collect()
            .await;
        assert_eq!(out.len(), 4, "only the first 410 is taken out");
        assert!(matches!(out[0], Ok(watcher::Event::Init)));
        assert!(matches!(out[1], Ok(watcher::Event::InitDone)));
        assert!(
            matches!(&out[2], Err(watcher::Error::WatchError(s)) if s.code == 410),
            "a second 410 within the interval goes through the backoff"
        );
        assert!(matches!(&out[3], Err(watcher::Error::WatchError(s)) if s.code == 500));
    }

    #[test]
    fn one_controller_per_namespace() {
        assert_eq!(Scope::AllNamespaces.targets(), vec![None]);
        assert_eq!(Scope::Namespaces(vec![]).targets(), vec![None]);
        assert_eq!(
            Scope::Namespaces(owned(&["a", "b"])).targets(),
            vec![Some("a"), Some("b")]
        );
    }
}
