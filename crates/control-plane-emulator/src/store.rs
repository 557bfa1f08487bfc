//! The in-memory store of deployments and their revisions.
//!
//! Statuses are computed when read, from timestamps and each revision's
//! [`Plan`]: nothing runs in the background. Every function takes the current
//! moment ([`Now`]) so the logic is testable without waiting.
//!
//! Sources: docs/control-plane-api.md "Deployment", "Revision" and
//! "Requests" (Delete is asynchronous; revisions newest first).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};
use uuid::Uuid;

use super::shape::{AnswerFacts, Quirk, ServiceShape, answer};
use super::timeline::Plan;
use control_plane_wire::types::{
    Deployment, Revision, RevisionStatus, SecretReference, SecretValue, SourceConfig,
    SourceRevisionConfig,
};

/// A moment: a monotonic instant (for the timeline) and the wall-clock time
/// shown in `created_at` / `updated_at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Now {
    pub at: Instant,
    pub wall: DateTime<Utc>,
}

impl Now {
    /// The current moment.
    pub fn current() -> Self {
        Self {
            at: Instant::now(),
            wall: Utc::now(),
        }
    }

    /// The moment `d` later (capped far in the future instead of
    /// overflowing).
    pub fn after(&self, d: Duration) -> Self {
        let d = d.min(FAR_FUTURE);
        Self {
            at: self.at.checked_add(d).unwrap_or(self.at),
            wall: chrono::Duration::from_std(d)
                .ok()
                .and_then(|cd| self.wall.checked_add_signed(cd))
                .unwrap_or(self.wall),
        }
    }

    /// Time elapsed since `earlier` (zero if `earlier` is later).
    pub fn since(&self, earlier: &Now) -> Duration {
        self.at.saturating_duration_since(earlier.at)
    }
}

/// Longest offset [`Now::after`] adds: about 100 years.
const FAR_FUTURE: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// RFC 3339 with microseconds and `Z`, as the service writes timestamps.
pub(crate) fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// One revision as stored.
#[derive(Clone, Debug)]
pub(crate) struct StoredRevision {
    pub id: Uuid,
    pub created: Now,
    pub source: String,
    pub config: SourceRevisionConfig,
    pub plan: Plan,
    /// A status fixed by a newer revision (`SKIPPED`) or by the admin API.
    pub frozen: Option<(RevisionStatus, Now)>,
}

impl StoredRevision {
    /// The status at `now` and the wall time it began.
    pub fn status(&self, now: &Now) -> (RevisionStatus, DateTime<Utc>) {
        if let Some((s, at)) = &self.frozen {
            return (s.clone(), at.wall);
        }
        let (s, offset) = self.plan.status_at(now.since(&self.created));
        (s, self.created.after(offset).wall)
    }

    /// The wire view (docs/control-plane-api.md "Revision").
    pub fn view(&self, now: &Now) -> Revision {
        let (status, since) = self.status(now);
        Revision {
            id: self.id.to_string(),
            status,
            created_at: Some(rfc3339(self.created.wall)),
            updated_at: Some(rfc3339(since)),
            source: Some(self.source.clone()),
            source_revision_config: Some(self.config.clone()),
        }
    }

    /// The wire view as JSON, absent optional fields sent as null.
    pub fn json(&self, now: &Now) -> Value {
        let mut v = serde_json::to_value(self.view(now)).unwrap_or(Value::Null);
        fill_nulls(
            &mut v["source_revision_config"],
            SOURCE_REVISION_CONFIG_KEYS,
        );
        v
    }

    /// The revision as the control plane answers it: under
    /// [`Quirk::GithubRefs`], a `github` revision carries the image built
    /// from its commit.
    pub fn answer(&self, now: &Now, shape: &ServiceShape) -> Value {
        let mut v = self.json(now);
        if shape.has(Quirk::GithubRefs)
            && self.source == "github"
            && let Some(sha) = &self.config.repo_commit_sha
        {
            v["source_revision_config"]["image_uri"] = Value::String(built_image(sha));
        }
        v
    }
}

/// The image the emulator says it built from commit `sha`.
fn built_image(sha: &str) -> String {
    format!(
        "registry.emulator.invalid/agents:{}",
        &sha[..sha.len().min(12)]
    )
}

/// One deployment as stored.
#[derive(Clone, Debug)]
pub(crate) struct StoredDeployment {
    pub id: Uuid,
    /// Creation order (list order, newest first).
    pub seq: u64,
    pub tenant_id: String,
    pub name: String,
    pub source: String,
    pub source_config: SourceConfig,
    pub secrets: Vec<SecretValue>,
    /// Data plane Secret references (docs/control-plane-api.md "Deployment": `secret_references`).
    pub secret_references: Vec<SecretReference>,
    /// Oldest first; never empty.
    pub revisions: Vec<StoredRevision>,
    pub created: Now,
    pub updated: Now,
    /// When DELETE was received.
    pub deleted: Option<Now>,
    /// Id of the default assistant of the built-in agent server.
    pub assistant_id: Uuid,
    /// A deployment status set by the admin API (`UNUSED`,
    /// `AWAITING_FINAL_DELETE`, ...), shown instead of the computed one.
    pub forced_status: Option<String>,
    /// A preview deployment (set by the admin API, as the platform's
    /// pull-request previews are made outside this API): shown with
    /// `is_preview: true`, and its name does not count as taken.
    pub preview: bool,
    /// `display_name`, set by PATCH only (not accepted on create; cannot be
    /// cleared once set: docs/control-plane-api.md, "Answer shapes").
    pub display_name: Option<String>,
}

const SOURCE_CONFIG_KEYS: &[&str] = &[
    "integration_id",
    "repo_url",
    "deployment_type",
    "build_on_push",
    "custom_url",
    "resource_spec",
    "listener_id",
    "listener_config",
];

const SOURCE_REVISION_CONFIG_KEYS: &[&str] = &[
    "repo_ref",
    "langgraph_config_path",
    "image_uri",
    "repo_commit_sha",
];

/// Adds `null` for every absent key, as FastAPI serializes optional fields.
fn fill_nulls(v: &mut Value, keys: &[&str]) {
    if let Value::Object(map) = v {
        for k in keys {
            map.entry(*k).or_insert(Value::Null);
        }
    }
}

/// A fresh fake commit sha (40 hex digits) for a `github` revision.
pub(crate) fn fake_commit_sha() -> String {
    rand::random::<[u8; 20]>()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl StoredDeployment {
    /// The newest revision.
    pub fn latest(&self) -> Option<&StoredRevision> {
        self.revisions.last()
    }

    /// The revision serving: the newest one that is `DEPLOYED` at `now`.
    pub fn active(&self, now: &Now) -> Option<&StoredRevision> {
        self.revisions
            .iter()
            .rev()
            .find(|r| r.status(now).0 == RevisionStatus::Deployed)
    }

    /// The revision with this id.
    pub fn revision(&self, id: &Uuid) -> Option<&StoredRevision> {
        self.revisions.iter().find(|r| r.id == *id)
    }

    /// Deployment status (docs/control-plane-api.md "Deployment"): the one forced by the admin
    /// API, else `AWAITING_DELETE` after DELETE, else `READY` (the database
    /// step is not emulated).
    pub fn status(&self) -> &str {
        if let Some(forced) = &self.forced_status {
            forced
        } else if self.deleted.is_some() {
            "AWAITING_DELETE"
        } else {
            "READY"
        }
    }

    /// Adds a revision with `config` and `plan` (a `github` revision records
    /// `config.repo_commit_sha`, or a fresh commit when it is `None`); every older revision still in
    /// progress at `now` becomes `SKIPPED` (docs/control-plane-api.md "Revision"). Returns the new
    /// revision's id.
    pub fn add_revision(&mut self, mut config: SourceRevisionConfig, plan: Plan, now: Now) -> Uuid {
        for r in &mut self.revisions {
            if r.status(&now).0.is_in_progress() {
                r.frozen = Some((RevisionStatus::Skipped, now));
            }
        }
        // The caller names the commit (the head of the ref, or an earlier
        // revision's for a rollback); a fresh one otherwise.
        if self.source == "github" {
            config.repo_commit_sha.get_or_insert_with(fake_commit_sha);
        } else {
            config.repo_commit_sha = None;
        }
        let id = Uuid::new_v4();
        self.revisions.push(StoredRevision {
            id,
            created: now,
            source: self.source.clone(),
            config,
            plan,
            frozen: None,
        });
        self.updated = now;
        id
    }

    /// The wire view (docs/control-plane-api.md "Deployment").
    pub fn view(&self, now: &Now) -> Deployment {
        let latest = self.latest();
        Deployment {
            id: self.id.to_string(),
            tenant_id: Some(self.tenant_id.clone()),
            name: self.name.clone(),
            display_name: self.display_name.clone(),
            is_preview: Some(self.preview),
            source: Some(self.source.clone()),
            source_config: self.source_config.clone(),
            source_revision_config: latest.map(|r| r.config.clone()).unwrap_or_default(),
            secrets: self.secrets.clone(),
            secret_references: self.secret_references.clone(),
            status: Some(self.status().to_owned()),
            latest_revision_id: latest.map(|r| r.id.to_string()),
            active_revision_id: self.active(now).map(|r| r.id.to_string()),
            image_version: None,
            created_at: Some(rfc3339(self.created.wall)),
            updated_at: Some(rfc3339(self.updated.wall)),
        }
    }

    /// The wire view as JSON, absent optional fields sent as null: what was
    /// stored, as the admin API shows it.
    pub fn json(&self, now: &Now) -> Value {
        let mut v = serde_json::to_value(self.view(now)).unwrap_or(Value::Null);
        fill_nulls(&mut v["source_config"], SOURCE_CONFIG_KEYS);
        fill_nulls(
            &mut v["source_revision_config"],
            SOURCE_REVISION_CONFIG_KEYS,
        );
        if v.get("display_name").is_none() {
            v["display_name"] = Value::Null;
        }
        v
    }

    /// The deployment as the control plane answers it: [`Self::json`]
    /// reshaped by every quirk of `shape` (see [`crate::shape`]).
    pub fn answer(&self, now: &Now, shape: &ServiceShape) -> Value {
        let mut v = self.json(now);
        let latest = self.latest();
        let resolved_commit = latest.and_then(|r| r.config.repo_commit_sha.as_deref());
        let facts = AnswerFacts {
            source: &self.source,
            configured_ref: latest.and_then(|r| r.config.repo_ref.as_deref()),
            resolved_commit,
            built_image: resolved_commit.map(built_image),
            ever_deployed: self.active(now).is_some(),
        };
        answer(&mut v, &facts, shape);
        v
    }
}

/// Every deployment of every workspace, keyed by id.
#[derive(Debug, Default)]
pub(crate) struct Store {
    deployments: HashMap<Uuid, StoredDeployment>,
    next_seq: u64,
    deleting: usize,
}

impl Store {
    /// Removes deployments deleted more than `delete_after` before `now`.
    pub fn purge(&mut self, now: &Now, delete_after: Duration) {
        if self.deleting == 0 {
            return;
        }
        self.deployments
            .retain(|_, d| d.deleted.is_none_or(|t| now.since(&t) < delete_after));
        self.deleting = self
            .deployments
            .values()
            .filter(|d| d.deleted.is_some())
            .count();
    }

    /// The next creation sequence number.
    pub fn next_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    /// Stores a new deployment.
    pub fn insert(&mut self, d: StoredDeployment) {
        self.deployments.insert(d.id, d);
    }

    /// The deployment `id` of workspace `tenant` (another workspace's
    /// deployment is invisible).
    pub fn get(&self, tenant: &str, id: &Uuid) -> Option<&StoredDeployment> {
        self.deployments.get(id).filter(|d| d.tenant_id == tenant)
    }

    /// Mutable [`Store::get`].
    pub fn get_mut(&mut self, tenant: &str, id: &Uuid) -> Option<&mut StoredDeployment> {
        self.deployments
            .get_mut(id)
            .filter(|d| d.tenant_id == tenant)
    }

    /// The deployment `id` of any workspace (agent server).
    pub fn get_any(&self, id: &Uuid) -> Option<&StoredDeployment> {
        self.deployments.get(id)
    }

    /// The deployment `id` of any workspace (admin API).
    pub fn get_any_mut(&mut self, id: &Uuid) -> Option<&mut StoredDeployment> {
        self.deployments.get_mut(id)
    }

    /// True when workspace `tenant` has a deployment named `name` (including
    /// one being deleted).
    pub fn name_taken(&self, tenant: &str, name: &str) -> bool {
        self.deployments
            .values()
            .any(|d| d.tenant_id == tenant && d.name == name && !d.preview)
    }

    /// Marks a deployment deleted at `now` (no-op if it already is).
    pub fn mark_deleted(&mut self, tenant: &str, id: &Uuid, now: Now) -> bool {
        match self.get_mut(tenant, id) {
            Some(d) => {
                if d.deleted.is_none() {
                    d.deleted = Some(now);
                    d.updated = now;
                    self.deleting += 1;
                }
                true
            }
            None => false,
        }
    }

    /// The deployments of `tenant`, newest first.
    pub fn list(&self, tenant: &str) -> Vec<&StoredDeployment> {
        let mut v: Vec<_> = self
            .deployments
            .values()
            .filter(|d| d.tenant_id == tenant)
            .collect();
        v.sort_by_key(|d| std::cmp::Reverse(d.seq));
        v
    }

    /// Every deployment, grouped by workspace, newest first (admin dump).
    pub fn dump(&self, now: &Now) -> Value {
        let mut all: Vec<_> = self.deployments.values().collect();
        all.sort_by_key(|d| std::cmp::Reverse(d.seq));
        let mut by_ws = serde_json::Map::new();
        for d in all {
            let mut v = d.json(now);
            v["revisions"] = Value::Array(d.revisions.iter().rev().map(|r| r.json(now)).collect());
            let entry = by_ws
                .entry(d.tenant_id.clone())
                .or_insert_with(|| json!({ "deployments": [] }));
            if let Some(list) = entry["deployments"].as_array_mut() {
                list.push(v);
            }
        }
        json!({ "workspaces": by_ws })
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        *self = Store::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::Outcome;

    const STEP: Duration = Duration::from_secs(1);

    fn deployment(now: Now, source: &str) -> StoredDeployment {
        let mut d = StoredDeployment {
            id: Uuid::new_v4(),
            seq: 1,
            tenant_id: "ws".into(),
            name: "app".into(),
            source: source.into(),
            source_config: SourceConfig::default(),
            secrets: vec![],
            secret_references: vec![],
            revisions: vec![],
            created: now,
            updated: now,
            deleted: None,
            assistant_id: Uuid::new_v4(),
            forced_status: None,
            preview: false,
            display_name: None,
        };
        let builds = source == "github";
        d.add_revision(
            SourceRevisionConfig::default(),
            Plan::new(Outcome::Deployed, builds, STEP),
            now,
        );
        d
    }

    #[test]
    fn active_revision_follows_the_last_deployed() {
        let t0 = Now::current();
        let mut d = deployment(t0, "github");
        let first = d.revisions[0].id;
        assert_eq!(d.view(&t0).active_revision_id, None);
        assert_eq!(d.view(&t0).latest_revision_id, Some(first.to_string()));
        let t5 = t0.after(STEP * 5);
        assert_eq!(d.view(&t5).active_revision_id, Some(first.to_string()));
        let second = d.add_revision(
            SourceRevisionConfig::default(),
            Plan::new(Outcome::Deployed, true, STEP),
            t5,
        );
        // The first stays active while the second rolls out.
        assert_eq!(d.view(&t5).active_revision_id, Some(first.to_string()));
        let t10 = t5.after(STEP * 5);
        assert_eq!(d.view(&t10).active_revision_id, Some(second.to_string()));
        assert_eq!(d.revisions[0].status(&t10).0, RevisionStatus::Deployed);
    }

    #[test]
    fn a_new_revision_skips_older_ones_in_progress() {
        let t0 = Now::current();
        let mut d = deployment(t0, "github");
        let t1 = t0.after(STEP + STEP / 2);
        assert_eq!(d.revisions[0].status(&t1).0, RevisionStatus::Building);
        d.add_revision(
            SourceRevisionConfig::default(),
            Plan::new(Outcome::Deployed, true, STEP),
            t1,
        );
        let later = t1.after(STEP * 10);
        let (status, since) = d.revisions[0].status(&later);
        assert_eq!(status, RevisionStatus::Skipped);
        assert_eq!(since, t1.wall);
        assert_eq!(d.revisions[1].status(&later).0, RevisionStatus::Deployed);
    }

    #[test]
    fn revision_updated_at_is_the_start_of_its_status() {
        let t0 = Now::current();
        let d = deployment(t0, "external_docker");
        let v = d.revisions[0].view(&t0.after(STEP + STEP / 2));
        assert_eq!(v.status, RevisionStatus::Deploying);
        assert_eq!(v.updated_at, Some(rfc3339(t0.after(STEP).wall)));
        assert!(v.source_revision_config.unwrap().repo_commit_sha.is_none());
    }

    #[test]
    fn deleted_deployments_are_purged_after_the_delay() {
        let t0 = Now::current();
        let mut s = Store::default();
        let d = deployment(t0, "github");
        let id = d.id;
        s.insert(d);
        assert!(
            s.get("other", &id).is_none(),
            "other workspaces do not see it"
        );
        assert!(s.mark_deleted("ws", &id, t0));
        s.purge(&t0.after(STEP), STEP * 2);
        assert_eq!(
            s.get("ws", &id).map(|d| d.status()),
            Some("AWAITING_DELETE")
        );
        assert!(s.name_taken("ws", "app"));
        s.purge(&t0.after(STEP * 2), STEP * 2);
        assert!(s.get("ws", &id).is_none());
        assert!(!s.name_taken("ws", "app"));
    }

    #[test]
    fn far_future_moments_do_not_overflow() {
        let t0 = Now::current();
        let t = t0.after(Duration::MAX);
        assert!(t.at > t0.at);
        assert!(t.wall > t0.wall);
    }

    #[test]
    fn json_view_sends_nulls_and_secrets() {
        let t0 = Now::current();
        let mut d = deployment(t0, "github");
        d.secrets = vec![SecretValue::new("K", "v")];
        let v = d.json(&t0);
        assert_eq!(v["source_config"]["listener_id"], Value::Null);
        assert!(
            v["source_config"]
                .as_object()
                .unwrap()
                .contains_key("resource_spec")
        );
        assert_eq!(v["secrets"], json!([{"name": "K", "value": "v"}]));
        assert_eq!(v["status"], "READY");
        assert_eq!(v["image_version"], Value::Null);
        assert_eq!(
            v["source_revision_config"]["repo_commit_sha"]
                .as_str()
                .map(str::len),
            Some(40)
        );
    }
}
