//! The edges of `spec.promotion` (the decision is `plan::promotion`):
//! - [`Promotions`], in the context: every AgentDeployment store of the
//!   operator (one per watched namespace), so that a target finds its
//!   source in the watch cache, in its namespace or another, without a
//!   request; and the channel on which a source that starts serving
//!   something else wakes its targets;
//! - [`offer_hash`]: what of a source its targets decide on (what it
//!   serves, its grants, its kind and repository): only a change of it
//!   wakes them, never a status write that changes nothing of it;
//! - [`step`]: the step of a target's pass, read from the cache and the
//!   clock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

use super::cached::{CachedDeployment, full};
use crate::api::deployment::{AgentDeployment, AgentDeploymentStatus};
use crate::controller::server_changes::object_key;
use crate::plan::promotion::{self, Serving, SourceView, Step, Target};

/// Capacity of the channel of changed sources: a controller that lags
/// behind it wakes every promoted target of its namespace instead.
const CHANGES_CAPACITY: usize = 256;

/// The AgentDeployment stores of the operator and the changes of what the
/// sources among them offer (one per operator, in the context).
///
/// Cost for a fleet (issue "Light on the Kubernetes API server and on
/// memory"): while no AgentDeployment has a `spec.promotion`, an applied
/// object costs one set lookup and wakes nothing; otherwise each object
/// costs two `u64` (the hash of its namespace and name, and of its offer),
/// not a copy of its name.
pub struct Promotions {
    stores: Mutex<Vec<Store<CachedDeployment>>>,
    /// The offer hash last seen per object, keyed by [`object_key`] (a collision could only hide one change
    /// from the targets until their own requeue).
    offered: Mutex<HashMap<u64, u64>>,
    /// The objects seen with a `spec.promotion` ([`object_key`]); a deleted
    /// target stays until the process restarts (it only makes a source's
    /// changes be sent to a mapper that finds no target).
    targets: Mutex<std::collections::HashSet<u64>>,
    changes: tokio::sync::broadcast::Sender<AgentDeployment>,
}

impl Default for Promotions {
    fn default() -> Self {
        Self {
            stores: Mutex::default(),
            offered: Mutex::default(),
            targets: Mutex::default(),
            changes: tokio::sync::broadcast::channel(CHANGES_CAPACITY).0,
        }
    }
}

impl std::fmt::Debug for Promotions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Promotions")
    }
}

impl Promotions {
    /// Adds a controller's AgentDeployment store to the ones sources are
    /// looked up in.
    pub fn register(&self, store: Store<CachedDeployment>) {
        self.stores
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(store);
    }

    /// The AgentDeployment `namespace/name` from the watch cache, if the
    /// operator watches it (made whole from its cached form).
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<AgentDeployment>> {
        let key = ObjectRef::new(name).within(namespace);
        let cached = self
            .stores
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find_map(|s| s.get(&key))?;
        Some(full(&cached))
    }

    /// Called with every object the AgentDeployment watch applies: when
    /// what it offers to targets ([`offer_hash`]) changed since the last
    /// time (or it is seen for the first time), it is sent to every
    /// controller, whose mapper wakes its targets ([`targets_of`]).
    pub fn observe(&self, obj: &AgentDeployment) {
        let key = object_key(obj);
        {
            let mut targets = self.targets.lock().unwrap_or_else(|p| p.into_inner());
            if obj.spec.promotion.is_some() {
                targets.insert(key);
            } else {
                targets.remove(&key);
            }
            if targets.is_empty() {
                // No promotion in the fleet: nothing to wake, nothing to keep.
                return;
            }
        }
        let hash = offer_hash(obj);
        let before = self
            .offered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, hash);
        if before != Some(hash) {
            // No receiver (no controller yet): nothing to wake.
            let _ = self.changes.send(obj.clone());
        }
    }

    /// A stream of the sources whose offer changed, for one controller's
    /// `watches_stream`. A receiver that lagged yields nothing for the
    /// lost items (their targets are woken by the next change, or by their
    /// own requeue).
    pub fn changes(
        &self,
    ) -> impl futures::Stream<Item = Result<AgentDeployment, kube::runtime::watcher::Error>> + Send + use<>
    {
        let rx = self.changes.subscribe();
        futures::stream::unfold(rx, |mut rx| async move {
            loop {
                match rx.recv().await {
                    Ok(obj) => return Some((Ok(obj), rx)),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                }
            }
        })
    }
}

/// Hash of what targets decide on about `obj` as a source: its kind,
/// repository, `spec.verify` present, grants, and what it serves
/// ([`serving_of`]) but not since when: the end of a soak is the target's
/// own requeue. Its other status writes (polls, verification times,
/// conditions) leave it unchanged.
pub fn offer_hash(obj: &AgentDeployment) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let view = view_of(obj);
    view.source.as_str().hash(&mut h);
    view.repo_url.hash(&mut h);
    view.grants.hash(&mut h);
    view.verifies.hash(&mut h);
    if let Some(s) = &view.serving {
        (
            s.revision_id,
            s.commit_sha,
            s.image_digest,
            s.image_uri,
            s.repo_ref,
            s.verified,
        )
            .hash(&mut h);
    }
    obj.metadata.deletion_timestamp.is_some().hash(&mut h);
    h.finish()
}

/// The AgentDeployments of `store` whose `spec.promotion.from` names
/// `source`.
pub fn targets_of(
    store: &Store<CachedDeployment>,
    source: &AgentDeployment,
) -> Vec<ObjectRef<CachedDeployment>> {
    let ns = source.metadata.namespace.as_deref().unwrap_or_default();
    let name = source.metadata.name.as_deref().unwrap_or_default();
    store
        .state()
        .iter()
        .filter(|d| {
            d.spec.promotion.as_ref().is_some_and(|p| {
                let target_ns = d.metadata.namespace.as_deref().unwrap_or_default();
                p.from.name == name && p.from.namespace.as_deref().unwrap_or(target_ns) == ns
            })
        })
        .map(|d| ObjectRef::from_obj(d.as_ref()))
        .collect()
}

/// What `obj` serves, from its `status.serving`: the revision, its
/// identity, whether it is verified now, and since when it serves (the
/// start of the soak: a revision verified now that has served for the
/// soak has been watched that long).
pub fn serving_of(status: &AgentDeploymentStatus) -> Option<Serving<'_>> {
    let s = status.serving.as_ref()?;
    Some(Serving {
        revision_id: &s.revision_id,
        commit_sha: s.commit_sha.as_deref(),
        image_digest: s.image_digest.as_deref(),
        image_uri: s.image_uri.as_deref(),
        repo_ref: s.repo_ref.as_deref(),
        verified: s.verified,
        soak_from: s.since.as_deref().and_then(|t| t.parse().ok()),
    })
}

/// `obj` as a source.
fn view_of(obj: &AgentDeployment) -> SourceView<'_> {
    SourceView {
        namespace: obj.metadata.namespace.as_deref().unwrap_or_default(),
        name: obj.metadata.name.as_deref().unwrap_or_default(),
        source: obj.spec.source,
        repo_url: obj.spec.source_config.repo_url.as_deref(),
        grants: obj
            .spec
            .promotion_grants
            .iter()
            .map(|g| g.namespace.as_str())
            .collect(),
        verifies: obj.spec.verify.is_some(),
        serving: obj.status.as_ref().and_then(serving_of),
    }
}

/// The promotion step of `obj` (`None`: no `spec.promotion`), its source
/// read from `promotions` and the time now; `previous` is the status the
/// pass starts from, `redeploy_requested` a redeploy annotation not yet
/// acted on.
pub fn step(
    promotions: &Promotions,
    obj: &AgentDeployment,
    previous: &AgentDeploymentStatus,
    redeploy_requested: bool,
) -> Option<Step> {
    let spec = obj.spec.promotion.as_ref()?;
    let namespace = obj.namespace().unwrap_or_default();
    let (src_ns, src_name) = promotion::source_key(spec, &namespace);
    let source = promotions
        .get(&src_ns, &src_name)
        .filter(|s| s.metadata.deletion_timestamp.is_none());
    let view = source.as_deref().map(view_of);
    let name = obj.name_any();
    let target = Target {
        namespace: &namespace,
        name: &name,
        source: obj.spec.source,
        repo_url: obj.spec.source_config.repo_url.as_deref(),
        promotion: spec,
        status: previous,
        generation: obj.metadata.generation,
        redeploy_requested,
    };
    Some(promotion::decide(
        &target,
        view.as_ref(),
        jiff::Timestamp::now(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::deployment::{PromotionGrant, ServingRevision, VerificationStatus};

    /// A named change of a source object.
    type Change = (&'static str, fn(&mut AgentDeployment));

    fn source() -> AgentDeployment {
        let mut obj: AgentDeployment = serde_json::from_value(serde_json::json!({
            "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentDeployment",
            "metadata": {"name": "staging", "namespace": "agents-staging"},
            "spec": {
                "source": "external_docker",
                "sourceRevisionConfig": {"imageUri": "registry.example/acme/agent:1"},
                "verify": {"assistants": {"graphId": "agent"}}
            }
        }))
        .unwrap();
        obj.status = Some(AgentDeploymentStatus {
            active_revision_id: Some("r1".into()),
            serving: Some(ServingRevision {
                revision_id: "r1".into(),
                image_digest: Some("sha256:aa".into()),
                image_uri: Some("registry.example/acme/agent@sha256:aa".into()),
                verified: true,
                verified_at: Some("2026-11-27T12:00:00Z".into()),
                since: Some("2026-11-27T11:59:00Z".into()),
                ..Default::default()
            }),
            ..Default::default()
        });
        obj
    }

    /// A fleet without promotions sends nothing and keeps nothing; once a
    /// target exists, a source's first sight and each change of its offer
    /// are sent once, and a status write that changes nothing is not.
    #[tokio::test]
    async fn sources_are_sent_only_when_a_promotion_exists_and_their_offer_changes() {
        use futures::StreamExt;
        let promotions = Promotions::default();
        let mut changes = Box::pin(promotions.changes());
        let mut target = source();
        target.metadata.name = Some("production".into());
        target.spec.promotion = Some(
            serde_json::from_value(
                serde_json::json!({"from": {"name": "staging", "namespace": "agents-staging"}}),
            )
            .unwrap(),
        );
        let received = |changes: &mut std::pin::Pin<Box<_>>| {
            let mut names = Vec::new();
            while let Some(Some(Ok::<AgentDeployment, _>(obj))) =
                futures::FutureExt::now_or_never(StreamExt::next(changes))
            {
                names.push(obj.metadata.name.unwrap_or_default());
            }
            names
        };

        promotions.observe(&source());
        promotions.observe(&source());
        assert!(
            received(&mut changes).is_empty(),
            "no promotion: nothing sent"
        );
        assert!(
            promotions.offered.lock().unwrap().is_empty(),
            "nothing kept"
        );

        promotions.observe(&target);
        promotions.observe(&source());
        promotions.observe(&source());
        let mut moved = source();
        moved
            .status
            .as_mut()
            .unwrap()
            .serving
            .as_mut()
            .unwrap()
            .image_digest = Some("sha256:bb".into());
        promotions.observe(&moved);
        assert_eq!(received(&mut changes), ["production", "staging", "staging"]);
        assert_eq!(promotions.offered.lock().unwrap().len(), 2);
    }

    /// Only what targets decide on wakes them: the source's other status
    /// writes (a re-verification, a poll, conditions) leave the hash as it
    /// was, so they cost its targets no pass and no request.
    #[test]
    fn a_source_s_other_status_writes_leave_its_hash() {
        let base = offer_hash(&source());
        let unchanged: Vec<Change> = vec![
            ("re-verified later", |o| {
                let s = o.status.as_mut().unwrap();
                s.serving.as_mut().unwrap().verified_at = Some("2026-11-27T13:00:00Z".into());
                s.verification = Some(Box::new(VerificationStatus {
                    revision_id: "r1".into(),
                    outcome: "Verified".into(),
                    last_run_time: "2026-11-27T13:00:00Z".into(),
                    ..Default::default()
                }));
            }),
            ("a poll", |o| {
                o.status.as_mut().unwrap().revision_status = Some("DEPLOYED".into())
            }),
            ("serving since moved", |o| {
                o.status.as_mut().unwrap().serving.as_mut().unwrap().since =
                    Some("2026-11-27T12:30:00Z".into())
            }),
        ];
        for (what, change) in unchanged {
            let mut o = source();
            change(&mut o);
            assert_eq!(offer_hash(&o), base, "{what}");
        }
    }

    /// What targets decide on changes the hash: the digest, the revision,
    /// the verdict, the grants, `spec.verify`, what is served at all.
    #[test]
    fn only_what_a_source_offers_changes_its_hash() {
        let base = offer_hash(&source());
        let changed: Vec<Change> = vec![
            ("another digest", |o| {
                o.status
                    .as_mut()
                    .unwrap()
                    .serving
                    .as_mut()
                    .unwrap()
                    .image_digest = Some("sha256:bb".into())
            }),
            ("another revision", |o| {
                o.status
                    .as_mut()
                    .unwrap()
                    .serving
                    .as_mut()
                    .unwrap()
                    .revision_id = "r2".into()
            }),
            ("no longer verified", |o| {
                o.status
                    .as_mut()
                    .unwrap()
                    .serving
                    .as_mut()
                    .unwrap()
                    .verified = false
            }),
            ("a grant", |o| {
                o.spec.promotion_grants = vec![PromotionGrant {
                    namespace: "agents-production".into(),
                }]
            }),
            ("verify removed", |o| o.spec.verify = None),
            ("nothing served", |o| {
                o.status.as_mut().unwrap().serving = None
            }),
        ];
        for (what, change) in changed {
            let mut o = source();
            change(&mut o);
            assert_ne!(offer_hash(&o), base, "{what}");
        }
    }

    #[test]
    fn the_targets_of_a_source_are_those_naming_it() {
        let (store, mut writer) = kube::runtime::reflector::store::<CachedDeployment>();
        let target = |name: &str, ns: &str, from: serde_json::Value| -> AgentDeployment {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentDeployment",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"source": "external_docker", "promotion": {"from": from}}
            }))
            .unwrap()
        };
        for obj in [
            target(
                "production",
                "agents-production",
                serde_json::json!({"name": "staging", "namespace": "agents-staging"}),
            ),
            target(
                "canary",
                "agents-staging",
                serde_json::json!({"name": "staging"}),
            ),
            target(
                "other",
                "agents-production",
                serde_json::json!({"name": "staging"}),
            ),
            source(),
        ] {
            writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(
                CachedDeployment::of(&obj),
            ));
        }
        let mut names: Vec<String> = targets_of(&store, &source())
            .into_iter()
            .map(|r| format!("{}/{}", r.namespace.unwrap_or_default(), r.name))
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["agents-production/production", "agents-staging/canary"]
        );
    }
}
