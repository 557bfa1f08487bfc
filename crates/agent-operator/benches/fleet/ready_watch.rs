//! The readiness of a fleet as one cluster-wide watch of AgentDeployments
//! keeps it, the way `kubectl wait`, Argo CD and Flux follow objects,
//! instead of listing the fleet again and again: a list of 10,000 is tens
//! of MB that kube-apiserver encodes on the cores the operator shares (6 to
//! 7 % of its CPU during S6 at 10,000 on the 2-core machine, by its own
//! profile), where the watch's events are the ones the operator's watch is
//! sent anyway (kube-apiserver encodes each event once for all watchers).
//! It also times a workspace's last Ready to the event, not to the next
//! list.
//!
//! The watch's own requests (its LISTs, each WATCH that ended) are counted,
//! so that the Kubernetes figures take them out. kube-apiserver counts a
//! request in `apiserver_request_total` when it ends, so the WATCH still
//! open when the figures are read is in neither count.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::TryStreamExt;
use kube::Resource;
use kube::api::{ListParams, WatchEvent, WatchParams};

use agent_operator::api::AgentDeployment;

use super::{Readiness, ReadinessList};

/// A WATCH asks kube-apiserver to end it after this many seconds (under
/// its 5-minute cap); the next one resumes from the last resourceVersion.
const WATCH_TIMEOUT_SECONDS: u32 = 290;

/// (namespace, name) → Ready on at least the generation asked for.
type States = HashMap<(String, String), bool>;

/// A running watch of every AgentDeployment of the cluster: which are Ready
/// (`Ready=True` on their current generation, at least `min_generation`).
pub struct ReadyWatch {
    states: Arc<Mutex<States>>,
    lists: Arc<AtomicU64>,
    /// WATCHes that ended (the open one is not counted yet).
    watches: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl ReadyWatch {
    /// Starts the watch: one LIST, then WATCHes from its resourceVersion
    /// (again after a timeout; a LIST again only when kube-apiserver says
    /// the version is gone).
    pub fn start(client: kube::Client, min_generation: i64) -> Self {
        let states = Arc::new(Mutex::new(States::new()));
        let lists = Arc::new(AtomicU64::new(0));
        let watches = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(follow(
            client,
            min_generation,
            states.clone(),
            lists.clone(),
            watches.clone(),
        ));
        Self {
            states,
            lists,
            watches,
            task,
        }
    }

    /// Ready AgentDeployments per namespace, now (counted by reference:
    /// this runs every 200 ms over the whole fleet, on the cores the
    /// operator and kube-apiserver share).
    pub fn ready_by_namespace(&self) -> HashMap<String, usize> {
        let states = self.states.lock().unwrap_or_else(|p| p.into_inner());
        let mut ready: HashMap<&str, usize> = HashMap::new();
        for ((namespace, _), is_ready) in states.iter() {
            if *is_ready {
                *ready.entry(namespace).or_default() += 1;
            }
        }
        ready
            .into_iter()
            .map(|(ns, n)| (ns.to_owned(), n))
            .collect()
    }

    /// The LISTs this watch has sent and its WATCHes that ended, as
    /// kube-apiserver has counted them: read these while the watch runs,
    /// before kube-apiserver's figures.
    pub fn requests(&self) -> (f64, f64) {
        (
            self.lists.load(Ordering::Relaxed) as f64,
            self.watches.load(Ordering::Relaxed) as f64,
        )
    }
}

impl Drop for ReadyWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn key(o: &Readiness) -> (String, String) {
    (
        o.metadata.namespace.clone().unwrap_or_default(),
        o.metadata.name.clone().unwrap_or_default(),
    )
}

async fn follow(
    client: kube::Client,
    min_generation: i64,
    states: Arc<Mutex<States>>,
    lists: Arc<AtomicU64>,
    watches: Arc<AtomicU64>,
) {
    let url = AgentDeployment::url_path(&(), None);
    loop {
        lists.fetch_add(1, Ordering::Relaxed);
        let Ok(mut version) = list(&client, &url, min_generation, &states).await else {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        // WATCHes from `version` until it is gone (410: list again).
        loop {
            let ended = watch(&client, &url, &mut version, min_generation, &states).await;
            watches.fetch_add(1, Ordering::Relaxed);
            if let Err(Gone) = ended {
                break;
            }
        }
    }
}

/// Replaces the states with a fresh LIST; its resourceVersion.
async fn list(
    client: &kube::Client,
    url: &str,
    min_generation: i64,
    states: &Mutex<States>,
) -> Result<String, kube::Error> {
    let request = kube::core::Request::new(url)
        .list(&ListParams::default().match_any())
        .map_err(kube::Error::BuildRequest)?;
    let list: ReadinessList = client.request(request).await?;
    let fresh = list
        .items
        .iter()
        .map(|o| (key(o), o.is_ready(min_generation)))
        .collect();
    *states.lock().unwrap_or_else(|p| p.into_inner()) = fresh;
    Ok(list.metadata.resource_version.unwrap_or_default())
}

/// The resourceVersion of a WATCH is gone: list again.
struct Gone;

/// One WATCH from `version`, applied to the states until it ends; `version`
/// follows the events and bookmarks. A failed request is tried again
/// after a second from the same version.
async fn watch(
    client: &kube::Client,
    url: &str,
    version: &mut String,
    min_generation: i64,
    states: &Mutex<States>,
) -> Result<(), Gone> {
    let params = WatchParams::default().timeout(WATCH_TIMEOUT_SECONDS);
    let Ok(request) = kube::core::Request::new(url).watch(&params, version) else {
        return Err(Gone);
    };
    let Ok(stream) = client.request_events::<Readiness>(request).await else {
        tokio::time::sleep(Duration::from_secs(1)).await;
        return Ok(());
    };
    let mut stream = std::pin::pin!(stream);
    while let Ok(Some(event)) = stream.try_next().await {
        let mut states = states.lock().unwrap_or_else(|p| p.into_inner());
        match event {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                if let Some(v) = &o.metadata.resource_version {
                    version.clone_from(v);
                }
                states.insert(key(&o), o.is_ready(min_generation));
            }
            WatchEvent::Deleted(o) => {
                if let Some(v) = &o.metadata.resource_version {
                    version.clone_from(v);
                }
                states.remove(&key(&o));
            }
            WatchEvent::Bookmark(b) => version.clone_from(&b.metadata.resource_version),
            WatchEvent::Error(e) if e.code == 410 => return Err(Gone),
            WatchEvent::Error(_) => return Ok(()),
        }
    }
    Ok(())
}
