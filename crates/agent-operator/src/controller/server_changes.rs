//! One AgentDeployment watch for three controllers: the AgentDeployment
//! controller's watch tells the AgentAssistant and AgentCron controllers
//! when an agent server they depend on changes, instead of each opening a
//! watch of its own (issue "Light on the Kubernetes API server": every
//! AgentDeployment write used to be encoded and sent to three watches, and
//! decoded three times here).
//!
//! What an assistant or cron depends on is [`server_identity`]: the Ready
//! status, URL and remote id of its AgentDeployment, and whether it is
//! paused or being deleted. The deployment controller's watch calls
//! [`ServerChanges::observe`] with every event before it reaches the store;
//! each subscriber ([`ServerChanges::subscribe`]) receives the reference of
//! every AgentDeployment whose identity changed (or that was seen for the
//! first time) and maps it to its own objects.
//!
//! kube-runtime's shared reflector (`store_shared` and `ReflectHandle`,
//! behind its `unstable-runtime-subscribe` feature) would fan out every
//! applied object instead, with a bounded channel that stops the
//! deployment watch while any subscriber lags; the few identity changes
//! here go through unbounded channels and never hold the watch back.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use futures::channel::mpsc;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

use crate::api::AgentDeployment;
use crate::api::conditions::{READY, find};

/// The last [`server_identity`] of every AgentDeployment the deployment
/// controller's watches saw, and the subscribers told of its changes.
///
/// Memory: one entry of two `u64` per AgentDeployment (keyed by a hash of
/// its namespace and name, not by its name: the table lives as long as the
/// object, for every object of the fleet). A collision of two keys (odds
/// about 2⁻⁶⁴ per pair) could only hide one change from the subscribers
/// until their own resync.
#[derive(Default)]
pub struct ServerChanges {
    last: Mutex<HashMap<u64, u64>>,
    subscribers: Mutex<Vec<mpsc::UnboundedSender<ObjectRef<AgentDeployment>>>>,
}

impl std::fmt::Debug for ServerChanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerChanges")
            .field("tracked", &lock(&self.last).len())
            .field("subscribers", &lock(&self.subscribers).len())
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ServerChanges {
    /// A stream of the AgentDeployments whose [`server_identity`] changed
    /// from now on (every namespace this process watches: a subscriber maps
    /// them to its own objects and ignores the others). It never ends while
    /// the [`ServerChanges`] lives.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<ObjectRef<AgentDeployment>> {
        let (tx, rx) = mpsc::unbounded();
        lock(&self.subscribers).push(tx);
        rx
    }

    /// Takes one event of an AgentDeployment watch: an applied object whose
    /// identity differs from the last one seen (or is new) is sent to every
    /// subscriber; a deleted object is forgotten. Subscribers that are gone
    /// are dropped.
    pub fn observe(&self, event: &watcher::Event<AgentDeployment>) {
        match event {
            watcher::Event::Apply(dep) | watcher::Event::InitApply(dep) => {
                let identity = server_identity(dep);
                let changed = lock(&self.last).insert(object_key(dep), identity) != Some(identity);
                if changed {
                    let reference = ObjectRef::from_obj(dep);
                    lock(&self.subscribers)
                        .retain(|tx| tx.unbounded_send(reference.clone()).is_ok());
                }
            }
            watcher::Event::Delete(dep) => {
                lock(&self.last).remove(&object_key(dep));
            }
            watcher::Event::Init | watcher::Event::InitDone => {}
        }
    }

    /// How many AgentDeployments are tracked (for tests and Debug).
    pub fn tracked(&self) -> usize {
        lock(&self.last).len()
    }
}

/// The table key of `dep` in the per-object tables of the AgentDeployment
/// watch (here and in promotion's): a hash of its namespace and name, a
/// `u64` instead of an `ObjectRef` per object of the fleet.
pub fn object_key(dep: &AgentDeployment) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    dep.metadata.namespace.hash(&mut h);
    dep.metadata.name.hash(&mut h);
    h.finish()
}

/// What of an AgentDeployment its assistants and crons depend on (Ready,
/// URL, remote id, paused, being deleted), hashed: other status writes wake
/// none of them.
pub fn server_identity(dep: &AgentDeployment) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let status = dep.status.as_ref();
    status
        .and_then(|s| find(&s.conditions, READY))
        .map(|c| c.status.as_str())
        .hash(&mut h);
    status.and_then(|s| s.url.as_deref()).hash(&mut h);
    status.and_then(|s| s.deployment_id.as_deref()).hash(&mut h);
    dep.metadata.deletion_timestamp.is_some().hash(&mut h);
    (dep.paused() == Ok(true)).hash(&mut h);
    h.finish()
}

/// The objects of `store` whose AgentDeployment is `dep` (same namespace,
/// `deployment_of` naming it): what a subscriber reconciles when `dep`
/// changes.
pub fn dependents<K>(
    store: &kube::runtime::reflector::Store<K>,
    dep: &ObjectRef<AgentDeployment>,
    deployment_of: impl Fn(&K) -> &str,
) -> Vec<ObjectRef<K>>
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Default + Eq + Hash + Clone,
{
    store
        .state()
        .into_iter()
        .filter(|o| o.namespace() == dep.namespace && deployment_of(o) == dep.name)
        .map(|o| ObjectRef::from_obj(o.as_ref()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use serde_json::json;

    fn deployment(name: &str, ready: &str, url: Option<&str>, message: &str) -> AgentDeployment {
        serde_json::from_value(json!({
            "apiVersion": "agentserver.dev/v1alpha1",
            "kind": "AgentDeployment",
            "metadata": {"name": name, "namespace": "team"},
            "spec": {
                "controlPlaneRef": {"name": "plane"},
                "source": "external_docker",
                "sourceRevisionConfig": {"imageUri": "registry.example/agent:1"}
            },
            "status": {
                "url": url,
                "conditions": [{
                    "type": "Ready", "status": ready, "reason": "R", "message": message,
                    "lastTransitionTime": "2026-11-27T00:00:00Z"
                }]
            }
        }))
        .expect("a valid AgentDeployment")
    }

    fn drain(rx: &mut mpsc::UnboundedReceiver<ObjectRef<AgentDeployment>>) -> Vec<String> {
        let mut names = Vec::new();
        while let Ok(r) = rx.try_recv() {
            names.push(r.name);
        }
        names
    }

    #[test]
    fn subscribers_hear_of_identity_changes_only() {
        let changes = ServerChanges::default();
        let mut a = changes.subscribe();
        let mut b = changes.subscribe();
        let apply = |d| changes.observe(&watcher::Event::Apply(d));

        // First sight: a change.
        changes.observe(&watcher::Event::InitApply(deployment(
            "x", "False", None, "building",
        )));
        // Another status write (a message) is not.
        apply(deployment("x", "False", None, "still building"));
        // Ready and a URL are.
        apply(deployment("x", "True", Some("https://x.example"), "ok"));
        apply(deployment(
            "x",
            "True",
            Some("https://x.example"),
            "ok again",
        ));
        apply(deployment("y", "True", None, "ok"));
        assert_eq!(drain(&mut a), ["x", "x", "y"]);
        assert_eq!(drain(&mut b), ["x", "x", "y"]);
        assert_eq!(changes.tracked(), 2);

        // A deleted object is forgotten; seen again, it is new.
        changes.observe(&watcher::Event::Delete(deployment("y", "True", None, "ok")));
        assert_eq!(changes.tracked(), 1);
        apply(deployment("y", "True", None, "ok"));
        assert_eq!(drain(&mut a), ["y"]);

        // A subscriber that is gone is dropped; the others still hear.
        drop(b);
        apply(deployment(
            "x",
            "False",
            Some("https://x.example"),
            "failed",
        ));
        assert_eq!(lock(&changes.subscribers).len(), 1);
        assert_eq!(drain(&mut a), ["x"]);
    }

    #[tokio::test]
    async fn a_subscription_is_a_stream_that_waits_for_the_next_change() {
        let changes = std::sync::Arc::new(ServerChanges::default());
        let mut rx = changes.subscribe();
        let c = changes.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            c.observe(&watcher::Event::Apply(deployment(
                "late", "True", None, "ok",
            )));
        });
        let next = tokio::time::timeout(std::time::Duration::from_secs(5), rx.next())
            .await
            .expect("woken by the change");
        assert_eq!(next.map(|r| r.name).as_deref(), Some("late"));
    }
}
