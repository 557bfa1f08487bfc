//! Name lookups before a create, shared by a fleet.
//!
//! Before creating a deployment the operator checks that no deployment of
//! the workspace already has its name (docs/control-plane-api.md: no
//! idempotency key; the Go CLI lists with the exact `name` filter and
//! `name_contains`, and matches the name exactly, as this module does). One lookup per create is one extra request per
//! resource; when many resources of one control plane are created together
//! (a fleet rollout), a single paged listing of the workspace answers all of
//! them instead.
//!
//! - A lookup after an interrupted create (the create-pending marker is set)
//!   is always an exact, fresh listing by name: crash safety rests on it.
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
use crate::controlplane::{ControlPlaneClient, Error as CpError};

/// How long a listing of the workspace answers lookups.
pub const INDEX_TTL: Duration = Duration::from_secs(10);
/// Lookups within [`INDEX_TTL`] from which one listing is cheaper than one
/// request per lookup.
pub const BURST_LOOKUPS: usize = 5;

#[derive(Default)]
struct Index {
    listed_at: Option<Instant>,
    names: std::collections::HashSet<String>,
    lookups: VecDeque<Instant>,
}

/// One control plane's index: the listing (held while it is refreshed, so
/// concurrent lookups share it) and the names created since, recorded
/// without waiting for a listing in progress.
#[derive(Default)]
struct PlaneIndex {
    listing: tokio::sync::Mutex<Index>,
    created: Mutex<HashMap<String, Instant>>,
}

/// The name indexes of every control plane (one per operator, in the
/// context).
#[derive(Default)]
pub struct NameIndexes {
    planes: Mutex<HashMap<String, Arc<PlaneIndex>>>,
}

impl std::fmt::Debug for NameIndexes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NameIndexes")
    }
}

impl NameIndexes {
    fn index(&self, plane: &str) -> Arc<PlaneIndex> {
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
        let mut idx = index.listing.lock().await;
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
            return cp.deployments_named(name).await;
        }
        if !fresh {
            // Held while listing: concurrent lookups wait for this listing
            // instead of sending their own.
            let started = Instant::now();
            let all = cp.list_all_deployments(&Default::default()).await?;
            idx.names = all
                .into_iter()
                .filter(|d| !d.preview())
                .map(|d| d.name)
                .collect();
            idx.listed_at = Some(started);
            // Names created before this listing began are in it.
            index
                .created
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .retain(|_, at| *at >= started);
        }
        let known = idx.names.contains(name)
            || index
                .created
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains_key(name);
        drop(idx);
        if known {
            cp.deployments_named(name).await
        } else {
            Ok(Vec::new())
        }
    }

    /// Drops the listings older than [`INDEX_TTL`] and the names created
    /// before that: no lookup reads them again (a lookup lists afresh, or
    /// asks for the exact name, before it reads a stale index, and a new
    /// listing drops the names created before it). Called by every pass
    /// that runs, so that a rollout's listings (every name of each workspace) do not
    /// stay in memory once it is over. A listing in progress is left alone.
    pub fn expire(&self) {
        let planes: Vec<Arc<PlaneIndex>> = self
            .planes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        let now = Instant::now();
        let stale = |t: &Instant| now.saturating_duration_since(*t) > INDEX_TTL;
        for index in planes {
            let Ok(mut idx) = index.listing.try_lock() else {
                continue;
            };
            if !idx.listed_at.as_ref().is_some_and(stale) {
                continue;
            }
            idx.listed_at = None;
            idx.names = Default::default();
            let mut created = index.created.lock().unwrap_or_else(|p| p.into_inner());
            created.retain(|_, at| !stale(at));
            created.shrink_to_fit();
        }
    }

    /// Records a deployment this operator just created, so that the index
    /// knows its name until a listing that includes it.
    pub fn created(&self, plane: &str, deployment: &Deployment) {
        self.index(plane)
            .created
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(deployment.name.clone(), Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controlplane::ClientConfig;
    use crate::controlplane::types::{DeploymentCreate, SourceConfig, SourceRevisionConfig};
    use control_plane_emulator::{
        self as emulator, DEMO_API_KEY, DEMO_WORKSPACE_ID, EmulatorConfig,
    };

    fn body(name: &str) -> DeploymentCreate {
        DeploymentCreate {
            name: name.to_owned(),
            source: "github".into(),
            source_config: SourceConfig {
                integration_id: Some("7d8b2f5e-3c1a-4e2b-9f6d-2a1b3c4d5e6f".into()),
                repo_url: Some("https://github.com/acme/agent".into()),
                deployment_type: Some("dev".into()),
                build_on_push: Some(false),
                ..Default::default()
            },
            source_revision_config: SourceRevisionConfig {
                repo_ref: Some("main".into()),
                langgraph_config_path: Some("langgraph.json".into()),
                ..Default::default()
            },
            secrets: Vec::new(),
            secret_references: Vec::new(),
            display_name: None,
        }
    }

    fn lists(running: &emulator::RunningEmulator) -> u64 {
        running.state().request_counts()["routes"]["GET /v2/deployments"]
            .as_object()
            .map(|m| m.values().filter_map(serde_json::Value::as_u64).sum())
            .unwrap_or(0)
    }

    #[tokio::test]
    async fn a_burst_of_lookups_shares_one_listing_and_conflicts_are_confirmed() {
        let running = emulator::spawn(EmulatorConfig {
            listen_addr: "127.0.0.1:0".parse().unwrap(),
            step_duration: Duration::ZERO,
            ..EmulatorConfig::default()
        })
        .await
        .expect("emulator starts");
        let cp = ControlPlaneClient::new(ClientConfig::new(
            running.base_url(),
            DEMO_WORKSPACE_ID,
            DEMO_API_KEY.to_owned().into(),
        ))
        .unwrap();
        let taken = cp.create_deployment(&body("taken")).await.unwrap();
        let names = NameIndexes::default();
        // A lone lookup is one exact listing.
        assert!(names.lookup("p", &cp, "a-0").await.unwrap().is_empty());
        assert_eq!(lists(&running), 1);
        // A burst of 40 creates: a handful of exact lookups, then one
        // listing answers the rest.
        for i in 1..40 {
            let name = format!("a-{i}");
            assert!(names.lookup("p", &cp, &name).await.unwrap().is_empty());
            let d = cp.create_deployment(&body(&name)).await.unwrap();
            names.created("p", &d);
        }
        assert!(lists(&running) <= 6, "{} listings", lists(&running));
        // A name that exists is found and confirmed by an exact listing.
        let before = lists(&running);
        let found = names.lookup("p", &cp, "taken").await.unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].id, taken.id);
        assert_eq!(lists(&running), before + 1);
        // So is one this operator created since the listing.
        assert_eq!(names.lookup("p", &cp, "a-39").await.unwrap().len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn expire_drops_a_stale_listing_and_the_names_created_before_it() {
        let names = NameIndexes::default();
        let index = names.index("p");
        {
            let mut idx = index.listing.lock().await;
            idx.listed_at = Some(Instant::now());
            idx.names = ["listed".to_owned()].into();
        }
        let created = |name: &str| {
            index
                .created
                .lock()
                .unwrap()
                .insert(name.to_owned(), Instant::now());
        };
        created("old");
        names.expire();
        assert!(
            index.listing.lock().await.names.contains("listed"),
            "a fresh listing is kept"
        );
        tokio::time::advance(INDEX_TTL + Duration::from_secs(1)).await;
        created("new");
        names.expire();
        let idx = index.listing.lock().await;
        assert!(idx.names.is_empty() && idx.listed_at.is_none());
        let kept = index.created.lock().unwrap();
        assert!(kept.contains_key("new") && !kept.contains_key("old"));
    }
}
