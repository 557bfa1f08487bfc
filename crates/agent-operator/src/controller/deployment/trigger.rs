//! Which AgentDeployment watch events trigger a pass ([`TriggerFilter`]).
//!
//! kube-runtime's `predicate_filter` does the same job, keyed by each
//! object's name, namespace and uid as three strings: about 270 bytes per
//! AgentDeployment for as long as it exists (its table slot and the three
//! allocations), where the fleet's memory target is 6 KiB per resource
//! (docs/BENCHMARKS.md, "Capacity"). This filter keeps one
//! 64-bit hash of those three per object, and the 64-bit hash of what
//! triggers a pass ([`super::runner::deployment_trigger_hash`]): about 20
//! bytes per object. It forgets an object on its deletion (kube's filter
//! keeps an entry an hour after it was last seen); the uid in the key
//! makes an object re-created under the same name new, even when the
//! deletion was missed while the watch re-listed.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use kube::runtime::watcher;

use crate::api::deployment::AgentDeployment;

/// The trigger hash last let through, per object (see the module
/// documentation). A collision of two keys (odds about 2⁻⁶⁴ per pair)
/// could only hold back one trigger of one of them until its next change
/// or requeue.
#[derive(Default)]
pub struct TriggerFilter {
    last: Mutex<HashMap<u64, u64>>,
}

/// Hash of the namespace, name and uid of `obj`.
fn key(obj: &AgentDeployment) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    obj.metadata.namespace.hash(&mut h);
    obj.metadata.name.hash(&mut h);
    obj.metadata.uid.hash(&mut h);
    h.finish()
}

impl TriggerFilter {
    /// Takes every event of the watch: a deleted object is forgotten.
    pub fn observe(&self, event: &watcher::Event<AgentDeployment>) {
        if let watcher::Event::Delete(obj) = event {
            self.lock().remove(&key(obj));
        }
    }

    /// True when `obj` triggers a pass: seen for the first time, or its
    /// `trigger` hash differs from the last one let through (`None`: no
    /// hash, always let through, as kube-runtime's filter does).
    pub fn passes(&self, obj: &AgentDeployment, trigger: Option<u64>) -> bool {
        let Some(hash) = trigger else {
            return true;
        };
        self.lock().insert(key(obj), hash) != Some(hash)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, u64>> {
        self.last.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(name: &str, uid: &str, generation: i64) -> AgentDeployment {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentDeployment",
            "metadata": {"name": name, "namespace": "ns", "uid": uid, "generation": generation},
            "spec": {"source": "external_docker",
                "sourceRevisionConfig": {"imageUri": "docker.io/acme/agent:1"}}
        }))
        .unwrap()
    }

    #[test]
    fn only_first_sight_and_changes_pass_and_a_deletion_is_forgotten() {
        let filter = TriggerFilter::default();
        let a = object("a", "u1", 1);
        assert!(filter.passes(&a, Some(1)), "first sight");
        assert!(!filter.passes(&a, Some(1)), "unchanged");
        assert!(
            filter.passes(&object("b", "u2", 1), Some(1)),
            "another object"
        );
        assert!(filter.passes(&a, Some(2)), "changed");
        assert!(!filter.passes(&a, Some(2)));
        assert!(filter.passes(&a, None), "no hash: always");
        // Re-created under the same name: a new uid is a new object.
        assert!(filter.passes(&object("a", "u3", 1), Some(2)));
        // Deleted, then the same object seen again: first sight.
        filter.observe(&watcher::Event::Delete(object("b", "u2", 1)));
        assert!(filter.passes(&object("b", "u2", 1), Some(1)));
        assert_eq!(filter.lock().len(), 3);
    }
}
