//! Name lookups before a create, shared by a fleet.
//!
//! Before creating a deployment the operator checks that no deployment of
//! the workspace already has its name (facts "Requests": no exact-name filter
//! and no idempotency key, so official clients list with `name_contains` and
//! match the name exactly). One lookup per create is one extra request per
//! resource; when many resources of one control plane are created together
//! (a fleet rollout), a single paged listing of the workspace answers all of
//! them instead.
//!
//! - A lookup after an interrupted create (the create-pending marker is set)
//!   is always an exact, fresh `name_contains` listing: crash safety rests on
//!   it.
//! - Otherwise, when at least [`BURST_LOOKUPS`] lookups of the control plane
//!   happened within [`INDEX_TTL`], the index (every deployment of the
//!   workspace, listed at most once per [`INDEX_TTL`], plus the ones created
//!   since) answers; else an exact listing does.
//! - A name found in the index is confirmed by an exact listing before the
//!   resource is declared in conflict, so a conflict always rests on a fresh
//!   read.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::controlplane::types::Deployment;
use crate::controlplane::{ControlPlaneClient, Error as CpError, ListDeployments};

/// How long a listing of the workspace answers lookups.
pub const INDEX_TTL: Duration = Duration::from_secs(10);
/// Lookups within [`INDEX_TTL`] from which one listing is cheaper than one
/// request per lookup.
pub const BURST_LOOKUPS: usize = 5;

#[derive(Default)]
struct Index {
    listed_at: Option<Instant>,
    names: HashMap<String, Vec<Deployment>>,
    lookups: VecDeque<Instant>,
}

/// The name indexes of every control plane (one per operator, in the
/// context).
#[derive(Default)]
pub struct NameIndexes {
    planes: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Index>>>>,
}

impl std::fmt::Debug for NameIndexes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NameIndexes")
    }
}

/// Every remote deployment whose name is exactly `name` (one fresh
/// `name_contains` listing).
pub async fn exact(cp: &ControlPlaneClient, name: &str) -> Result<Vec<Deployment>, CpError> {
    let found = cp
        .list_all_deployments(&ListDeployments {
            name_contains: Some(name.to_owned()),
            ..Default::default()
        })
        .await?;
    Ok(found.into_iter().filter(|d| d.name == name).collect())
}

impl NameIndexes {
    fn index(&self, plane: &str) -> Arc<tokio::sync::Mutex<Index>> {
        self.planes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(plane.to_owned())
            .or_default()
            .clone()
    }

    /// The deployments named exactly `name` on the control plane `plane`
    /// (see the module documentation for when this is one request, a share
    /// of a listing, or none). A non-empty answer always comes from a fresh
    /// exact listing.
    pub async fn lookup(
        &self,
        plane: &str,
        cp: &ControlPlaneClient,
        name: &str,
    ) -> Result<Vec<Deployment>, CpError> {
        let index = self.index(plane);
        let mut idx = index.lock().await;
        let now = Instant::now();
        while idx
            .lookups
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) > INDEX_TTL)
        {
            idx.lookups.pop_front();
        }
        idx.lookups.push_back(now);
        let fresh = idx
            .listed_at
            .is_some_and(|t| now.saturating_duration_since(t) <= INDEX_TTL);
        if !fresh && idx.lookups.len() < BURST_LOOKUPS {
            drop(idx);
            return exact(cp, name).await;
        }
        if !fresh {
            // Held while listing: concurrent lookups wait for this listing
            // instead of sending their own.
            let all = cp.list_all_deployments(&Default::default()).await?;
            idx.names.clear();
            for d in all {
                idx.names.entry(d.name.clone()).or_default().push(d);
            }
            idx.listed_at = Some(Instant::now());
        }
        let known = idx.names.contains_key(name);
        drop(idx);
        if known {
            exact(cp, name).await
        } else {
            Ok(Vec::new())
        }
    }

    /// Records a deployment this operator just created, so that the index
    /// knows its name until the next listing.
    pub fn created(&self, plane: &str, deployment: &Deployment) {
        let index = self.index(plane);
        if let Ok(mut idx) = index.try_lock() {
            idx.names
                .entry(deployment.name.clone())
                .or_default()
                .push(deployment.clone());
        } else {
            // A listing is running; it started before this create, so drop
            // it rather than miss the name.
            let index = index.clone();
            tokio::spawn(async move {
                index.lock().await.listed_at = None;
            });
        }
    }
}
