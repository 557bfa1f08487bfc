//! The status a create pass kept in memory instead of writing it
//! ([`crate::plan::steps::status_unshown`]): after the create, the
//! annotation write that replaces the create-pending marker with the id
//! annotation is the durable record, and the status is first written when
//! a user would read something from it (Ready, a failure, a revision still
//! in progress after a few polls). The passes in between take the kept
//! status as the one last written
//! ([`crate::plan::steps::unwritten_status_holds`]); a restart loses it,
//! and the id annotation leads back to the deployment.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::api::deployment::AgentDeploymentStatus;

/// The unwritten statuses of this process's AgentDeployments, by
/// `namespace/name`.
#[derive(Default)]
pub struct Unshown(Mutex<HashMap<String, AgentDeploymentStatus>>);

impl Unshown {
    /// Keeps `status` as the status of `key`, unwritten.
    pub fn keep(&self, key: &str, status: AgentDeploymentStatus) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.to_owned(), status);
    }

    /// The unwritten status of `key`, if one is kept.
    pub fn get(&self, key: &str) -> Option<AgentDeploymentStatus> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned()
    }

    /// Forgets the status of `key` (written, or the object deleted).
    pub fn forget(&self, key: &str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(key);
    }
}
