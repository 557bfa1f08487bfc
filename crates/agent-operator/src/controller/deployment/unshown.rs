//! The status a create pass kept in memory instead of writing it
//! ([`crate::plan::steps::status_unshown`]): after the create, the
//! annotation write that replaces the create-pending marker with the id
//! annotation is the durable record, and the status is first written when
//! a user would read something from it (Ready, a failure, a revision still
//! in progress after the longest poll interval). The passes in between take the kept
//! status as the one last written
//! ([`crate::plan::steps::unwritten_status_holds`]); a restart loses it,
//! and the id annotation leads back to the deployment.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::api::deployment::AgentDeploymentStatus;

/// The unwritten statuses of this process's AgentDeployments, by
/// `namespace/name`.
///
/// A status is kept as its JSON (one allocation of a few hundred bytes),
/// not as the struct with its strings (1.5–2 KiB in some 30 allocations):
/// a fleet applied at once keeps thousands of them between their creates
/// and Ready (docs/BENCHMARKS.md, S6, "Unwritten statuses as JSON"). The
/// table is shrunk once it is mostly empty ([`Unshown::forget`]): a
/// rollout of N creates grows it to N slots.
#[derive(Default)]
pub struct Unshown(Mutex<HashMap<String, (Json, Instant)>>);

/// A status serialized as JSON.
type Json = Box<[u8]>;

impl Unshown {
    /// Keeps `status` as the status of `key`, unwritten, since the first
    /// status kept (the create's).
    pub fn keep(&self, key: &str, status: AgentDeploymentStatus) {
        // Serializing a status (strings, numbers, booleans and maps with
        // string keys) cannot fail; were it to, nothing is kept and the
        // next pass writes the status as if never kept.
        let Ok(json) = serde_json::to_vec(&status) else {
            return self.forget(key);
        };
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let since = kept.get(key).map_or_else(Instant::now, |(_, at)| *at);
        kept.insert(key.to_owned(), (json.into_boxed_slice(), since));
    }

    /// The unwritten status of `key`, if one is kept (read back from the
    /// JSON [`Self::keep`] wrote: field for field the status kept, its
    /// times in whole seconds as the API server would keep them).
    pub fn get(&self, key: &str) -> Option<AgentDeploymentStatus> {
        let kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        serde_json::from_slice(&kept.get(key)?.0).ok()
    }

    /// How long the status of `key` has been kept unwritten (zero when
    /// none is).
    pub fn elapsed(&self, key: &str) -> Duration {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .map_or(Duration::ZERO, |(_, at)| at.elapsed())
    }

    /// Forgets the status of `key` (written, or the object deleted); the
    /// table gives its memory back once at most a quarter of it is used
    /// (after a rollout, when every status kept has been written).
    pub fn forget(&self, key: &str) {
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if kept.remove(key).is_some() && kept.len() * 4 <= kept.capacity() {
            kept.shrink_to_fit();
        }
    }

    /// The slots the table holds (for the tests of its memory).
    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_status_reads_back_field_for_field() {
        use crate::api::deployment::{RevisionSummary, ServingRevision};
        let status = AgentDeploymentStatus {
            observed_generation: Some(3),
            deployment_id: Some("d".into()),
            latest_revision_id: Some("r2".into()),
            revision_status: Some("DEPLOYING".into()),
            serving: Some(ServingRevision {
                revision_id: "r1".into(),
                verified: true,
                ..Default::default()
            }),
            revisions: vec![RevisionSummary {
                id: "r2".into(),
                status: "DEPLOYING".into(),
                verified: Some(false),
                ..Default::default()
            }],
            conditions: vec![crate::api::conditions::condition(
                &[],
                crate::api::conditions::READY,
                crate::api::conditions::FALSE,
                "RevisionInProgress",
                "revision r2 is DEPLOYING",
                Some(3),
            )],
            ..Default::default()
        };
        let unshown = Unshown::default();
        unshown.keep("ns/a", status.clone());
        // Times read back in whole seconds, as the API server keeps them
        // (`metav1.Time`): the status as it will read once written.
        let mut written = status.clone();
        written.conditions[0].last_transition_time = serde_json::from_value(
            serde_json::to_value(&status.conditions[0].last_transition_time).unwrap(),
        )
        .unwrap();
        assert_eq!(unshown.get("ns/a"), Some(written));
        assert_eq!(unshown.get("ns/b"), None);
    }

    #[test]
    fn a_rollout_written_leaves_no_table_behind() {
        let unshown = Unshown::default();
        let status = AgentDeploymentStatus {
            deployment_id: Some("d".into()),
            ..Default::default()
        };
        for i in 0..1000 {
            unshown.keep(&format!("ns/agent-{i}"), status.clone());
        }
        assert!(unshown.capacity() >= 1000);
        assert_eq!(
            unshown.get("ns/agent-7").and_then(|s| s.deployment_id),
            Some("d".into())
        );
        for i in 0..990 {
            unshown.forget(&format!("ns/agent-{i}"));
        }
        assert!(
            unshown.capacity() < 100,
            "{} slots kept for 10 statuses",
            unshown.capacity()
        );
        assert!(unshown.get("ns/agent-995").is_some());
        assert!(unshown.get("ns/agent-7").is_none());
    }
}
