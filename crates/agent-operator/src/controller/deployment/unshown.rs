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
#[derive(Default)]
pub struct Unshown(Mutex<HashMap<String, (AgentDeploymentStatus, Instant)>>);

impl Unshown {
    /// Keeps `status` as the status of `key`, unwritten, since the first
    /// status kept (the create's).
    pub fn keep(&self, key: &str, status: AgentDeploymentStatus) {
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let since = kept.get(key).map_or_else(Instant::now, |(_, at)| *at);
        kept.insert(key.to_owned(), (status, since));
    }

    /// The unwritten status of `key`, if one is kept.
    pub fn get(&self, key: &str) -> Option<AgentDeploymentStatus> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .map(|(s, _)| s.clone())
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

    /// Forgets the status of `key` (written, or the object deleted).
    pub fn forget(&self, key: &str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(key);
    }
}
