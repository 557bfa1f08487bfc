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
/// A status is boxed, so that the table's slots stay small: a rollout of N
/// creates grows the table to N slots, which stay allocated after their
/// statuses are written (an unboxed status is about half a KiB per slot);
/// the table is also shrunk once it is mostly empty ([`Unshown::forget`]).
#[derive(Default)]
pub struct Unshown(Mutex<HashMap<String, (Box<AgentDeploymentStatus>, Instant)>>);

impl Unshown {
    /// Keeps `status` as the status of `key`, unwritten, since the first
    /// status kept (the create's).
    pub fn keep(&self, key: &str, status: AgentDeploymentStatus) {
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let since = kept.get(key).map_or_else(Instant::now, |(_, at)| *at);
        kept.insert(key.to_owned(), (Box::new(status), since));
    }

    /// The unwritten status of `key`, if one is kept.
    pub fn get(&self, key: &str) -> Option<AgentDeploymentStatus> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .map(|(s, _)| AgentDeploymentStatus::clone(s))
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
