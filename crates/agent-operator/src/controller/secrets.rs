//! Least privilege with Secrets: one metadata-only watch of Secrets per
//! watched scope, shared by every controller, and a small cache of the data
//! of the Secrets that resources reference.
//!
//! - **The watch** lists and watches Secrets as metadata only
//!   (`PartialObjectMetadata`, never `data`), in pages
//!   of [`LIST_PAGE_SIZE`], and strips annotations (`kubectl apply` copies a
//!   Secret's data into `kubectl.kubernetes.io/last-applied-configuration`),
//!   labels, owner references and managed fields before an object enters
//!   the store: what stays is name, namespace, uid and resourceVersion. The
//!   operator never receives the data of a Secret nothing references.
//! - **The cache** holds the data of a referenced Secret with the
//!   resourceVersion it was read at. A read is served from it while the
//!   watch's store shows the same resourceVersion; otherwise the Secret is
//!   read once from the API server (`GET`) and cached again. A Secret the
//!   watch sees change or disappear leaves the cache at once.
//! - **Triggers**: a Secret event reaches the controllers (through
//!   [`Secrets::subscribe`]) only when it can change a decision: the values
//!   of the keys that AgentDeployments or AgentControlPlanes reference
//!   changed (a digest of them is kept, never the values), the Secret was
//!   deleted, or it appeared after the first list. A label edit, an
//!   External Secrets refresh with the same values, or a relist after a
//!   `410 Gone` triggers nothing.
//!
//! Why not kube's shared reflector (`store_shared`/`subscribe`): its
//! subscribers are not told about deletions, and a deleted Secret must stop
//! its AgentDeployments at once (`SecretNotFound`). The fan-out below is a
//! `tokio::sync::broadcast` channel; a subscriber that lags loses events
//! and is caught up by the controllers' periodic requeue.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Secret;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use tokio::sync::broadcast;

use crate::api::SecretKeyRef;
use crate::controller::error::Error;

/// Objects per page of the Secret list. A page is read whole before it is
/// decoded, and the kube client copies its body twice on the way (into
/// one buffer, then into a `String`), so a page of Secrets applied with
/// kubectl (their data again in an annotation: 50 KB each in the fleet
/// benchmark's S5) costs about three times its size at once; glibc keeps
/// much of that as RSS after the list. At 10 per page a page of such
/// Secrets is about 0.5 MB (at 50, 2.5 MB: S5 started at 41.3 MiB where
/// the same operator without the Secrets started at 23.6). The cost: one
/// LIST per 10 Secrets at start and after a `410 Gone` (100 for S5's
/// 1,000), each small and served from kube-apiserver's watch cache.
pub const LIST_PAGE_SIZE: u32 = 10;

/// Set on the copy of a Secret's metadata that [`Secrets::subscribe`]
/// forwards (never written to the cluster) when the watch sees a
/// referenced Secret for the first time after its first list: it may have
/// just been created (AgentDeployments blocked on `SecretNotFound` should
/// run), or its digest was simply not known yet (steady ones need not).
pub const FIRST_SIGHT_ANNOTATION: &str = "agent-operator.internal/first-sight";

/// True for a forwarded Secret seen for the first time
/// ([`FIRST_SIGHT_ANNOTATION`]).
pub fn is_first_sight(secret: &PartialObjectMeta<Secret>) -> bool {
    secret.annotations().contains_key(FIRST_SIGHT_ANNOTATION)
}

/// Events buffered per subscriber before a slow one starts losing them.
const FANOUT_BUFFER: usize = 1024;

/// The data of one cached Secret: key → bytes. No `Debug`: values never
/// reach a log.
struct Cached {
    resource_version: Option<String>,
    data: BTreeMap<String, Vec<u8>>,
}

/// One watch of Secrets (one per watched namespace, or one for all).
struct Watch {
    store: Store<PartialObjectMeta<Secret>>,
    events: broadcast::Sender<PartialObjectMeta<Secret>>,
}

/// (namespace, name) of a Secret.
type SecretId = (String, String);

/// A kind whose objects read keys of Secrets of their own namespace. A
/// store of it registered with [`Secrets::register`] tells the Secret watch
/// which keys to follow: a new kind that reads Secrets implements this next
/// to its controller and registers its store.
pub trait ReferencesSecrets:
    kube::Resource<DynamicType = ()> + Clone + Send + Sync + 'static
{
    /// The Secret keys (of the object's namespace) the object reads (a
    /// key the spec implies, such as the `.dockerconfigjson` of an image
    /// pull Secret, is owned).
    fn secret_refs(&self) -> Vec<std::borrow::Cow<'_, SecretKeyRef>>;
}

/// Adds the keys of the Secret `namespace/name` that an object reads.
type Referrer = Box<dyn Fn(&str, &str, &mut BTreeSet<String>) + Send + Sync>;

/// The registered stores, each as the function that adds the keys its
/// objects reference.
#[derive(Default)]
struct Referrers(Vec<Referrer>);

/// What the operator knows of referenced Secrets, under one lock: shared
/// by the watch tasks and the passes.
#[derive(Default)]
struct Known {
    /// The data of referenced Secrets, by the resourceVersion read.
    cache: HashMap<SecretId, Cached>,
    /// Digest of the referenced keys' values per Secret, as last seen (a
    /// SHA-256 of name=value pairs; never the values).
    digests: HashMap<SecretId, [u8; 32]>,
    referrers: Referrers,
}

impl Known {
    /// Caches the data of `secret` (the Secret `id`) and records the digest
    /// of its referenced keys: replacing the one known (`replace`: the
    /// watch saw a change) or only when none is known (a pass read it: what
    /// it used is what a later change is compared with). Returns (the digest
    /// known before, the new one), or `None` when nothing references it.
    fn remember(
        &mut self,
        id: &SecretId,
        secret: &Secret,
        replace: bool,
    ) -> Option<(Option<[u8; 32]>, [u8; 32])> {
        let data = data_of(secret);
        let keys = referenced_keys(&self.referrers, &id.0, &id.1);
        let digests = (!keys.is_empty()).then(|| {
            let now = digest(&data, &keys);
            let before = self.digests.get(id).copied();
            if replace || before.is_none() {
                self.digests.insert(id.clone(), now);
            }
            (before, now)
        });
        self.cache.insert(
            id.clone(),
            Cached {
                resource_version: secret.resource_version(),
                data,
            },
        );
        digests
    }
}

/// Shared state of the Secret watch and cache; one per operator, in
/// [`super::context::Shared`].
#[derive(Default)]
pub struct Secrets {
    watches: Mutex<HashMap<Option<String>, Watch>>,
    known: Arc<Mutex<Known>>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("cached", &lock(&self.known).cache.len())
            .finish_non_exhaustive()
    }
}

/// What the Secret watch passes on of one event about `obj` (`initial`:
/// from the first list; `deleted`: a deletion): the object when a
/// referenced Secret changed, appeared or went (marked on first sight),
/// `None` when nothing that a pass reads changed. Reads the Secret's data
/// only when something references it.
async fn changed(
    known: &Mutex<Known>,
    client: &kube::Client,
    obj: PartialObjectMeta<Secret>,
    initial: bool,
    deleted: bool,
) -> Option<PartialObjectMeta<Secret>> {
    let key = (obj.namespace().unwrap_or_default(), obj.name_any());
    let referenced = {
        let mut k = lock(known);
        let stale = k
            .cache
            .get(&key)
            .is_some_and(|c| c.resource_version != obj.resource_version());
        if deleted || stale {
            k.cache.remove(&key);
        }
        !referenced_keys(&k.referrers, &key.0, &key.1).is_empty()
    };
    let mut first_sight = false;
    let changed = if deleted {
        lock(known).digests.remove(&key).is_some() || referenced
    } else if !referenced {
        // Nothing references it: its data is never read.
        false
    } else {
        let api: Api<Secret> = Api::namespaced(client.clone(), &key.0);
        match api.get_opt(&key.1).await {
            Ok(Some(secret)) => match lock(known).remember(&key, &secret, true) {
                Some((Some(before), now)) => before != now,
                // First sight: maybe new, unless it is the
                // first list.
                Some((None, _)) => {
                    first_sight = !initial;
                    !initial
                }
                // No longer referenced.
                None => false,
            },
            // Gone meanwhile: its Delete event follows.
            Ok(None) => false,
            Err(e) => {
                tracing::debug!(error = %e, "reading a referenced Secret after a change");
                true
            }
        }
    };
    if !changed {
        return None;
    }
    let mut obj = obj;
    if first_sight {
        obj.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(FIRST_SIGHT_ANNOTATION.to_owned(), "true".to_owned());
    }
    Some(obj)
}

fn lock(known: &Mutex<Known>) -> std::sync::MutexGuard<'_, Known> {
    known.lock().unwrap_or_else(|p| p.into_inner())
}

/// A Secret's metadata as the watch decodes it, trimmed while it is
/// decoded: what [`strip_secret_metadata`] keeps is read, and the rest
/// (annotations, where `kubectl apply` copies a Secret's whole data into
/// `last-applied-configuration`; labels, owner references, finalizers,
/// managed fields) is skipped by the JSON parser without being allocated.
/// A list page of Secrets applied with kubectl is mostly those
/// annotations: decoded whole, a page of 50 Secrets of 50 KB held 2.5 MB
/// in 50 KB strings only to drop them (docs/BENCHMARKS.md, S5).
/// Requests are metadata-only (`as=PartialObjectMetadata`), like
/// `PartialObjectMeta<Secret>`'s, into which each event is unwrapped
/// before the store.
#[derive(Clone, Debug)]
pub struct TrimmedSecretMeta(pub PartialObjectMeta<Secret>);

impl<'de> serde::Deserialize<'de> for TrimmedSecretMeta {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
        use kube::core::PartialObjectMetaExt;
        /// Unknown fields (everything else) are ignored without allocating.
        #[derive(serde::Deserialize)]
        struct Object {
            #[serde(default)]
            metadata: Meta,
        }
        #[derive(serde::Deserialize, Default)]
        #[serde(default, rename_all = "camelCase")]
        struct Meta {
            name: Option<String>,
            namespace: Option<String>,
            uid: Option<String>,
            resource_version: Option<String>,
            generation: Option<i64>,
            creation_timestamp: Option<Time>,
            deletion_timestamp: Option<Time>,
            deletion_grace_period_seconds: Option<i64>,
        }
        let m = Object::deserialize(d)?.metadata;
        let meta = ObjectMeta {
            name: m.name,
            namespace: m.namespace,
            uid: m.uid,
            resource_version: m.resource_version,
            generation: m.generation,
            creation_timestamp: m.creation_timestamp,
            deletion_timestamp: m.deletion_timestamp,
            deletion_grace_period_seconds: m.deletion_grace_period_seconds,
            ..ObjectMeta::default()
        };
        Ok(Self(meta.into_response_partial::<Secret>()))
    }
}

impl kube::Resource for TrimmedSecretMeta {
    type DynamicType = ();
    type Scope = <Secret as kube::Resource>::Scope;

    fn metadata_api() -> bool {
        true
    }
    fn kind(dt: &()) -> std::borrow::Cow<'_, str> {
        <Secret as kube::Resource>::kind(dt)
    }
    fn group(dt: &()) -> std::borrow::Cow<'_, str> {
        <Secret as kube::Resource>::group(dt)
    }
    fn version(dt: &()) -> std::borrow::Cow<'_, str> {
        <Secret as kube::Resource>::version(dt)
    }
    fn plural(dt: &()) -> std::borrow::Cow<'_, str> {
        <Secret as kube::Resource>::plural(dt)
    }
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &self.0.metadata
    }
    fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &mut self.0.metadata
    }
}

/// The event of a trimmed Secret as the event of its metadata.
fn untrimmed(
    event: watcher::Event<TrimmedSecretMeta>,
) -> watcher::Event<PartialObjectMeta<Secret>> {
    match event {
        watcher::Event::Apply(o) => watcher::Event::Apply(o.0),
        watcher::Event::Delete(o) => watcher::Event::Delete(o.0),
        watcher::Event::InitApply(o) => watcher::Event::InitApply(o.0),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

/// Strips a Secret's metadata to what the operator uses: name, namespace,
/// uid, resourceVersion (and the deletion timestamp).
pub fn strip_secret_metadata(obj: &mut PartialObjectMeta<Secret>) {
    let m = &mut obj.metadata;
    m.annotations = None;
    m.labels = None;
    m.managed_fields = None;
    m.owner_references = None;
    m.finalizers = None;
}

/// The keys of `namespace/name` that the objects of `referrers` reference
/// ([`ReferencesSecrets`]). Pure apart from reading the stores.
fn referenced_keys(referrers: &Referrers, namespace: &str, name: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    for add in &referrers.0 {
        add(namespace, name, &mut keys);
    }
    keys
}

/// The keys of `namespace/name` that the objects of `store` reference.
fn keys_in_store<K: ReferencesSecrets>(
    store: &Store<K>,
    namespace: &str,
    name: &str,
    keys: &mut BTreeSet<String>,
) {
    for o in store.state() {
        if o.namespace().as_deref() != Some(namespace) {
            continue;
        }
        for r in o.secret_refs() {
            if r.name == name {
                keys.insert(r.key.clone());
            }
        }
    }
}

/// SHA-256 over `key=value` of `keys` in `data` (a missing key counts as
/// absent, which differs from empty).
fn digest(data: &BTreeMap<String, Vec<u8>>, keys: &BTreeSet<String>) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for k in keys {
        h.update((k.len() as u64).to_le_bytes());
        h.update(k.as_bytes());
        match data.get(k) {
            Some(v) => {
                h.update([1]);
                h.update((v.len() as u64).to_le_bytes());
                h.update(v);
            }
            None => h.update([0]),
        }
    }
    h.finalize().into()
}

/// The value of `key` in `data`, or the names of the keys it has instead.
fn key_of(data: &BTreeMap<String, Vec<u8>>, key: &str) -> Result<Vec<u8>, Vec<String>> {
    data.get(key)
        .cloned()
        .ok_or_else(|| data.keys().cloned().collect())
}

/// The data of a Secret as key → bytes (`data`, then `stringData`).
fn data_of(secret: &Secret) -> BTreeMap<String, Vec<u8>> {
    let mut out: BTreeMap<String, Vec<u8>> = secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    for (k, v) in secret.string_data.iter().flatten() {
        out.entry(k.clone())
            .or_insert_with(|| v.as_bytes().to_vec());
    }
    out
}

impl Secrets {
    /// Like [`Secrets::register`], for cluster-scoped objects whose Secrets
    /// are all in `namespace` (a ClusterAgentControlPlane's, in the
    /// cluster resource namespace).
    pub fn register_in<K: ReferencesSecrets>(&self, store: Store<K>, namespace: String) {
        let referrer: Referrer = Box::new(move |ns, name, keys| {
            if ns != namespace {
                return;
            }
            for o in store.state() {
                for r in o.secret_refs() {
                    if r.name == name {
                        keys.insert(r.key.clone());
                    }
                }
            }
        });
        lock(&self.known).referrers.0.push(referrer);
    }

    /// Registers a store of a kind that reads Secrets: the Secret keys its
    /// objects reference ([`ReferencesSecrets`]) are watched for changes.
    pub fn register<K: ReferencesSecrets>(&self, store: Store<K>) {
        let referrer: Referrer =
            Box::new(move |namespace, name, keys| keys_in_store(&store, namespace, name, keys));
        lock(&self.known).referrers.0.push(referrer);
    }

    /// The metadata store of the Secret watch of `namespace` (`None`: all
    /// namespaces) and a stream of the Secret events that can change a
    /// decision (see the module docs). The first call for a scope starts its
    /// watch; later calls share it.
    pub fn subscribe(
        &self,
        client: &kube::Client,
        namespace: Option<&str>,
    ) -> (
        Store<PartialObjectMeta<Secret>>,
        impl Stream<Item = Result<PartialObjectMeta<Secret>, watcher::Error>> + Send + 'static,
    ) {
        let mut watches = self.watches.lock().unwrap_or_else(|p| p.into_inner());
        let watch = watches
            .entry(namespace.map(str::to_owned))
            .or_insert_with(|| self.start(client, namespace));
        let store = watch.store.clone();
        let rx = watch.events.subscribe();
        let events = futures::stream::unfold(rx, |mut rx| async move {
            loop {
                match rx.recv().await {
                    Ok(obj) => return Some((Ok(obj), rx)),
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(lost = n, "Secret events lost by a slow controller");
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        });
        (store, events)
    }

    /// Starts the watch of one scope (a background task for the life of
    /// the process).
    fn start(&self, client: &kube::Client, namespace: Option<&str>) -> Watch {
        // kube 5 sends metadata-only requests (`as=PartialObjectMetadata`)
        // for a type whose `metadata_api()` is true: `data` never leaves
        // the API server (its deprecated `metadata_watcher` does the same),
        // and the annotations are skipped while decoding.
        let api: Api<TrimmedSecretMeta> = crate::controller::watch::scoped_api(client, namespace);
        let (store, writer) = reflector::store::<PartialObjectMeta<Secret>>();
        let (tx, _) = broadcast::channel(FANOUT_BUFFER);
        let stream = super::watch::relist_at_once(
            "Secret",
            watcher(api, watcher::Config::default().page_size(LIST_PAGE_SIZE)).map_ok(untrimmed),
        )
        .default_backoff()
        .modify(strip_secret_metadata)
        .reflect(writer);
        let (events, client, known) = (tx.clone(), client.clone(), self.known.clone());
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            let mut listed = false;
            while let Some(event) = stream.next().await {
                let (obj, initial, deleted) = match event {
                    Ok(watcher::Event::Apply(o)) => (o, false, false),
                    Ok(watcher::Event::InitApply(o)) => (o, !listed, false),
                    Ok(watcher::Event::Delete(o)) => (o, false, true),
                    Ok(watcher::Event::InitDone) => {
                        listed = true;
                        continue;
                    }
                    Ok(watcher::Event::Init) => continue,
                    Err(e) => {
                        tracing::debug!(error = %e, "Secret watch error (retrying)");
                        continue;
                    }
                };
                if let Some(obj) = changed(&known, &client, obj, initial, deleted).await {
                    let _ = events.send(obj);
                }
            }
        });
        Watch { store, events: tx }
    }

    /// The value of `key` of the Secret `namespace/name`, from the cache
    /// when the watch shows it unchanged, else read from the API server
    /// (and cached). `Ok(None)`: the Secret does not exist;
    /// `Ok(Some(Err(keys)))`: it has no such key, and these keys (names
    /// only, sorted).
    ///
    /// Errors: API failures other than 404.
    pub async fn value(
        &self,
        client: &kube::Client,
        namespace: &str,
        name: &str,
        key: &str,
    ) -> Result<Option<Result<Vec<u8>, Vec<String>>>, Error> {
        let id = (namespace.to_owned(), name.to_owned());
        let watched = self.watched_version(namespace, name);
        if let Some(version) = &watched
            && let Some(c) = lock(&self.known).cache.get(&id)
            && c.resource_version.as_ref() == Some(version)
        {
            return Ok(Some(key_of(&c.data, key)));
        }
        let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
        let Some(secret) = api.get_opt(name).await.map_err(Error::Kube)? else {
            lock(&self.known).cache.remove(&id);
            return Ok(None);
        };
        // Cached only while a watch covers it (else nothing would tell
        // when it changes).
        if watched.is_none() {
            return Ok(Some(key_of(&data_of(&secret), key)));
        }
        let mut k = lock(&self.known);
        k.remember(&id, &secret, false);
        Ok(Some(
            k.cache
                .get(&id)
                .map_or_else(|| Err(Vec::new()), |c| key_of(&c.data, key)),
        ))
    }

    /// The resourceVersion of `namespace/name` in a watch's store, if a
    /// watch covers it and has seen it.
    fn watched_version(&self, namespace: &str, name: &str) -> Option<String> {
        let r = ObjectRef::<PartialObjectMeta<Secret>>::new(name).within(namespace);
        self.watches
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .find_map(|w| w.store.get(&r))
            .and_then(|m| m.resource_version())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_covers_only_the_referenced_keys() {
        let mut data = BTreeMap::new();
        data.insert("a".to_owned(), b"1".to_vec());
        data.insert("b".to_owned(), b"2".to_vec());
        let keys: BTreeSet<String> = ["a".to_owned()].into();
        let before = digest(&data, &keys);
        data.insert("b".to_owned(), b"changed".to_vec());
        assert_eq!(digest(&data, &keys), before, "an unreferenced key");
        data.insert("a".to_owned(), b"changed".to_vec());
        assert_ne!(digest(&data, &keys), before, "a referenced key");
        data.remove("a");
        let absent = digest(&data, &keys);
        data.insert("a".to_owned(), Vec::new());
        assert_ne!(digest(&data, &keys), absent, "absent is not empty");
    }

    #[test]
    fn a_trimmed_secret_decodes_what_stripping_keeps_and_nothing_else() {
        let json = serde_json::json!({
            "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
            "metadata": {
                "name": "s", "namespace": "ns", "uid": "u-1", "resourceVersion": "7",
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration":
                    format!("{{\"stringData\":{{\"blob\":\"{}\"}}}}", "x".repeat(50_000))},
                "labels": {"a": "b"},
                "finalizers": ["f/x"],
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u"}],
                "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update"}]
            }
        });
        let trimmed: TrimmedSecretMeta = serde_json::from_value(json.clone()).unwrap();
        let mut full: PartialObjectMeta<Secret> = serde_json::from_value(json).unwrap();
        strip_secret_metadata(&mut full);
        assert_eq!(trimmed.0.metadata, full.metadata);
        assert_eq!(trimmed.0.metadata.uid.as_deref(), Some("u-1"));
        // A list page decodes item by item.
        let page: kube::core::ObjectList<TrimmedSecretMeta> = serde_json::from_value(
            serde_json::json!({"metadata": {"resourceVersion": "9"}, "items": [
                {"metadata": {"name": "a", "annotations": {"k": "v"}}},
                {"metadata": {"name": "b"}}
            ]}),
        )
        .unwrap();
        let names: Vec<_> = page.items.iter().map(|s| s.0.name_any()).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(<TrimmedSecretMeta as kube::Resource>::metadata_api());
        assert_eq!(
            <TrimmedSecretMeta as kube::Resource>::plural(&()),
            "secrets"
        );
    }

    #[test]
    fn stripping_keeps_only_identity() {
        let mut m = PartialObjectMeta::<Secret>::default();
        m.metadata.name = Some("s".into());
        m.metadata.resource_version = Some("7".into());
        m.metadata.annotations = Some(
            [(
                "kubectl.kubernetes.io/last-applied-configuration".to_owned(),
                "{\"data\":{\"k\":\"c2VjcmV0\"}}".to_owned(),
            )]
            .into(),
        );
        m.metadata.labels = Some([("a".to_owned(), "b".to_owned())].into());
        strip_secret_metadata(&mut m);
        assert_eq!(m.metadata.annotations, None);
        assert_eq!(m.metadata.labels, None);
        assert_eq!(m.metadata.name.as_deref(), Some("s"));
        assert_eq!(m.metadata.resource_version.as_deref(), Some("7"));
    }
}
