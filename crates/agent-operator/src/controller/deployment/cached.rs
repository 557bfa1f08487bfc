//! The AgentDeployment as the controller's store keeps it
//! ([`CachedDeployment`]): metadata and spec as read, the status as its
//! JSON text, compressed, and the annotations and labels as a short list.
//!
//! Every AgentDeployment of the fleet stays in the store for the life of
//! the process, so its size is the operator's memory per resource (issue
//! "Light on the Kubernetes API server and on memory": at most 6 KiB per
//! AgentDeployment). The deserialized status is the larger half of an
//! object: a 784-byte struct held inline (most of it absent optional
//! fields) plus some 20 allocations for its strings and lists, where its
//! JSON text is one allocation of about 1.4 KB, and that text compressed
//! (raw DEFLATE, level 1) one of about 600 bytes: a Ready status says the
//! same revision id, commit and image three or four times. A pass reads the status of
//! its own object once, at its start ([`CachedDeployment::to_full`]); the
//! mappers and metrics that read a condition of many objects parse only
//! the conditions ([`CachedDeployment::conditions`]). Measured in
//! docs/BENCHMARKS.md, "Capacity".
//!
//! The annotations and labels are a boxed list of pairs, not the
//! `BTreeMap` of `ObjectMeta`: a map of one entry allocates a whole B-tree
//! leaf (eleven keys and values, about 540 bytes), for the id annotation
//! every deployed object carries. Only the pass reads them ([`CachedDeployment::to_full`]
//! puts them back), and the claims ([`CachedDeployment::annotation`]).
//!
//! Compressing the status costs a few microseconds per watch event, and
//! inflating it as much per read (a pass, a mapper, a metrics scrape).
//!
//! The status goes through JSON without loss: its fields are strings,
//! integers, booleans and RFC 3339 times in whole seconds, as the API
//! server stores them, so a pass decides on the same status as the one
//! written (a status is rewritten only when it changed, `kind::changed`).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use kube::Resource;
use kube::runtime::watcher;
use serde::Deserialize;

use crate::api::deployment::{AgentDeployment, AgentDeploymentSpec, AgentDeploymentStatus};

/// An AgentDeployment in the controller's store: metadata (already
/// trimmed, `crate::controller::scaffold::strip_managed_fields`) and spec
/// as the API server sent them, except the annotations and labels, kept
/// apart as lists of pairs, and the status as its JSON text compressed. It reads from
/// an AgentDeployment's JSON (kube-runtime's controller asks its kind to):
/// the whole object is read, then cached.
#[derive(Clone, Debug, Deserialize)]
#[serde(from = "AgentDeployment")]
pub struct CachedDeployment {
    /// `metadata`, as read, without its annotations and labels (`None`
    /// here: read them with [`CachedDeployment::annotation`], or from the
    /// whole object).
    pub metadata: ObjectMeta,
    /// `metadata.annotations`, as (key, value) pairs in key order.
    annotations: Pairs,
    /// `metadata.labels`, as (key, value) pairs in key order.
    labels: Pairs,
    /// `spec`, as read.
    pub spec: AgentDeploymentSpec,
    /// `status` serialized as JSON, then compressed (raw DEFLATE; `None`:
    /// no status).
    status: Option<Box<[u8]>>,
}

impl Resource for CachedDeployment {
    type DynamicType = ();
    type Scope = <AgentDeployment as Resource>::Scope;

    fn kind(dt: &()) -> std::borrow::Cow<'_, str> {
        AgentDeployment::kind(dt)
    }
    fn group(dt: &()) -> std::borrow::Cow<'_, str> {
        AgentDeployment::group(dt)
    }
    fn version(dt: &()) -> std::borrow::Cow<'_, str> {
        AgentDeployment::version(dt)
    }
    fn plural(dt: &()) -> std::borrow::Cow<'_, str> {
        AgentDeployment::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl From<AgentDeployment> for CachedDeployment {
    fn from(obj: AgentDeployment) -> Self {
        let status = packed(obj.status.as_ref());
        Self::without_status(obj.metadata, obj.spec).with(status)
    }
}

/// A string map of `ObjectMeta` as a boxed list of pairs (empty: no
/// allocation).
type Pairs = Box<[(Box<str>, Box<str>)]>;

/// `map` as [`Pairs`], in its (key) order.
fn pairs(map: Option<BTreeMap<String, String>>) -> Pairs {
    map.into_iter()
        .flatten()
        .map(|(k, v)| (k.into_boxed_str(), v.into_boxed_str()))
        .collect()
}

/// [`Pairs`] as the map again; `None` when empty (the API server omits an
/// empty map, so none is lost).
fn map(pairs: &Pairs) -> Option<BTreeMap<String, String>> {
    (!pairs.is_empty()).then(|| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    })
}

/// DEFLATE level of the kept status: 1 (the fastest) compresses a Ready
/// status to within 5 % of level 9.
const LEVEL: u8 = 1;

/// `status` serialized as JSON, then compressed. Serializing a status
/// (strings, numbers, booleans, times) cannot fail; were it to, the object
/// is cached without one, as if none had been written yet, and its pass
/// decides on the status it reads fresh before any create.
fn packed(status: Option<&AgentDeploymentStatus>) -> Option<Box<[u8]>> {
    let json = serde_json::to_vec(status?).ok()?;
    Some(miniz_oxide::deflate::compress_to_vec(&json, LEVEL).into_boxed_slice())
}

/// Only the fields of a status that tell what the object holds (the
/// others are skipped unread).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Holding {
    /// `status.deploymentId`.
    pub deployment_id: Option<String>,
    /// `status.expiredAt` is set: an expired preview holds nothing.
    pub expired: bool,
}

/// Only the conditions of a status (the other fields are skipped unread).
#[derive(Deserialize)]
struct ConditionsOnly {
    #[serde(default)]
    conditions: Vec<Condition>,
}

impl CachedDeployment {
    /// The cached form of `obj`: its metadata and spec cloned, its status
    /// serialized.
    pub fn of(obj: &AgentDeployment) -> Self {
        Self::without_status(obj.metadata.clone(), obj.spec.clone())
            .with(packed(obj.status.as_ref()))
    }

    /// `metadata` and `spec` cached, without status.
    fn without_status(mut metadata: ObjectMeta, spec: AgentDeploymentSpec) -> Self {
        let annotations = pairs(metadata.annotations.take());
        let labels = pairs(metadata.labels.take());
        Self {
            metadata,
            annotations,
            labels,
            spec,
            status: None,
        }
    }

    /// `self` with the status `status` (packed).
    fn with(mut self, status: Option<Box<[u8]>>) -> Self {
        self.status = status;
        self
    }

    /// `metadata` with its annotations and labels, as read.
    pub fn whole_metadata(&self) -> ObjectMeta {
        let mut metadata = self.metadata.clone();
        metadata.annotations = map(&self.annotations);
        metadata.labels = map(&self.labels);
        metadata
    }

    /// The value of the annotation `key`, if present.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations
            .iter()
            .find(|(k, _)| &**k == key)
            .map(|(_, v)| &**v)
    }

    /// `obj` as a controller trigger: only its reference is ever read
    /// (kube-runtime queues `ObjectRef::from_obj` of it), so the status is
    /// left out rather than serialized.
    pub fn trigger(obj: AgentDeployment) -> Self {
        Self::without_status(obj.metadata, obj.spec)
    }

    /// The whole AgentDeployment again, its status parsed from the JSON
    /// (what a pass reads). A status that does not parse (it cannot: it
    /// was serialized from the same type) reads as none.
    pub fn to_full(&self) -> AgentDeployment {
        AgentDeployment {
            metadata: self.whole_metadata(),
            spec: self.spec.clone(),
            status: self.status(),
        }
    }

    /// The status's JSON text, inflated (`None`: no status, or one that
    /// does not inflate, which cannot be: it was deflated here).
    fn json(&self) -> Option<Vec<u8>> {
        miniz_oxide::inflate::decompress_to_vec(self.status.as_deref()?).ok()
    }

    /// The status, parsed from the JSON.
    pub fn status(&self) -> Option<AgentDeploymentStatus> {
        serde_json::from_slice(&self.json()?).ok()
    }

    /// The conditions of the status, parsed alone (empty without status).
    pub fn conditions(&self) -> Vec<Condition> {
        self.json()
            .and_then(|s| serde_json::from_slice::<ConditionsOnly>(&s).ok())
            .map(|c| c.conditions)
            .unwrap_or_default()
    }

    /// What the status says the object holds ([`Holding`]), parsed alone.
    pub fn holding(&self) -> Holding {
        #[derive(Deserialize)]
        struct Wrapper {
            #[serde(default, rename = "deploymentId")]
            deployment_id: Option<String>,
            #[serde(default, rename = "expiredAt")]
            expired_at: Option<serde::de::IgnoredAny>,
        }
        self.json()
            .and_then(|s| serde_json::from_slice::<Wrapper>(&s).ok())
            .map(|w| Holding {
                deployment_id: w.deployment_id,
                expired: w.expired_at.is_some(),
            })
            .unwrap_or_default()
    }

    /// The `status` of the condition `type_`, if present.
    pub fn condition_status(&self, type_: &str) -> Option<String> {
        crate::api::conditions::find(&self.conditions(), type_).map(|c| c.status.clone())
    }
}

/// The cached form of a watch event of AgentDeployments (for the store's
/// writer: the event itself goes on with the whole objects).
pub fn cached_event(event: &watcher::Event<AgentDeployment>) -> watcher::Event<CachedDeployment> {
    use watcher::Event;
    match event {
        Event::Apply(o) => Event::Apply(CachedDeployment::of(o)),
        Event::Delete(o) => Event::Delete(CachedDeployment::of(o)),
        Event::Init => Event::Init,
        Event::InitApply(o) => Event::InitApply(CachedDeployment::of(o)),
        Event::InitDone => Event::InitDone,
    }
}

/// A pass's object: the cached one made whole ([`CachedDeployment::to_full`]).
pub fn full(obj: &CachedDeployment) -> Arc<AgentDeployment> {
    Arc::new(obj.to_full())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::reflector::ObjectRef;

    /// A status as the API server returns it (times in whole seconds),
    /// with the fields a Ready AgentDeployment carries.
    fn ready_object() -> AgentDeployment {
        serde_json::from_str(
            &serde_json::json!({
                "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentDeployment",
                "metadata": {"name": "a", "namespace": "ns", "generation": 2,
                    "resourceVersion": "7", "uid": "u-1",
                    "annotations": {"agentserver.dev/deployment-id": "d-1", "b": "2"},
                    "labels": {"app": "a"},
                    "finalizers": ["agentserver.dev/remote-deployment"]},
                "spec": {
                    "controlPlaneRef": {"name": "default"},
                    "source": "github",
                    "sourceConfig": {"repoUrl": "https://github.com/acme/a", "deploymentType": "dev",
                        "resourceSpec": {"minScale": 1}},
                    "sourceRevisionConfig": {"repoRef": "main", "langgraphConfigPath": "langgraph.json"},
                    "secrets": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]
                },
                "status": {
                    "observedGeneration": 2, "deploymentId": "d-1", "latestRevisionId": "r-1",
                    "revisionStatus": "DEPLOYED", "activeRevisionId": "r-1",
                    "deploymentStatus": "READY", "url": "http://127.0.0.1:1/agents/d-1",
                    "secretsHash": "hmac-sha256:1:ab",
                    "serving": {"revisionId": "r-1", "commitSha": "c0ffee", "short": "c0ffee",
                        "verified": false, "since": "2026-11-28T02:02:27.482049633Z"},
                    "revisions": [{"id": "r-1", "status": "DEPLOYED",
                        "createdAt": "2026-11-28T02:02:23.418749Z"}],
                    "conditions": [{"type": "Ready", "status": "True", "reason": "RevisionDeployed",
                        "message": "revision r-1 is DEPLOYED", "observedGeneration": 2,
                        "lastTransitionTime": "2026-11-28T02:02:27Z"}]
                }
            })
            .to_string(),
        )
        .unwrap()
    }

    #[test]
    fn a_cached_object_reads_back_whole() {
        let obj = ready_object();
        let cached = CachedDeployment::of(&obj);
        assert_eq!(cached.metadata.annotations, None);
        assert_eq!(
            cached.annotation("agentserver.dev/deployment-id"),
            Some("d-1")
        );
        assert_eq!(cached.annotation("b"), Some("2"));
        assert_eq!(cached.annotation("c"), None);
        let back = cached.to_full();
        assert_eq!(back.metadata, obj.metadata);
        assert_eq!(back.spec, obj.spec);
        assert_eq!(back.status, obj.status);
        // And once more: the JSON it writes reads back the same.
        assert_eq!(CachedDeployment::of(&back).to_full().status, obj.status);

        let mut bare = obj.clone();
        bare.status = None;
        assert_eq!(CachedDeployment::of(&bare).to_full().status, None);
    }

    #[test]
    fn the_kept_status_is_compressed() {
        let obj = ready_object();
        let json = serde_json::to_vec(&obj.status).unwrap().len();
        let kept = CachedDeployment::of(&obj).status.unwrap().len();
        assert!(kept * 10 < json * 7, "{kept} bytes kept for {json} of JSON");
    }

    #[test]
    fn conditions_are_read_without_the_rest_of_the_status() {
        let cached = CachedDeployment::of(&ready_object());
        assert_eq!(cached.condition_status("Ready").as_deref(), Some("True"));
        assert_eq!(cached.condition_status("Stalled"), None);
        assert_eq!(cached.conditions().len(), 1);
        let mut bare = ready_object();
        bare.status = None;
        assert!(CachedDeployment::of(&bare).conditions().is_empty());
    }

    #[test]
    fn a_trigger_keeps_the_reference_only() {
        let obj = ready_object();
        let trigger = CachedDeployment::trigger(obj.clone());
        let (kept, read) = (ObjectRef::from_obj(&trigger), ObjectRef::from_obj(&obj));
        assert_eq!((kept.name, kept.namespace), (read.name, read.namespace));
        assert_eq!(trigger.status(), None);
    }
}
