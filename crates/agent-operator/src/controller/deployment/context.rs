//! The AgentDeployment controller's own state ([`State`], its
//! [`Context`]'s `state`): what it remembers of each object and of each
//! control plane between passes (polling, scouts, Secret PATCH pacing, the
//! first pass since start), and the caches and indexes only its passes read
//! (name lookups, GitHub integrations, deletes in progress, previews, image
//! registries, promotion sources, claims). Every kind's share is
//! [`crate::controller::context::Shared`], reached through the context's `Deref`.

use std::time::Duration;

use super::{claims, deleting, names, promotion};
use crate::controller::context::{Context, memory_key};
use crate::controller::{hash_key, integrations, requeue};

/// The context of AgentDeployment passes.
pub type DeploymentContext = Context<State>;

/// What only the AgentDeployment controller keeps ([`DeploymentContext`]).
pub struct State {
    /// What the operator remembers of each AgentDeployment between its
    /// passes ([`Memory`]), keyed by [`memory_key`]; an entry goes when it
    /// holds nothing, and when the object is deleted
    /// ([`DeploymentContext::forget`]).
    pub objects: std::sync::Mutex<std::collections::HashMap<u64, Memory>>,
    /// The objects ([`memory_key`]) that had a pass since the operator
    /// started (the cold start: [`DeploymentContext::is_first_pass`]). Apart
    /// from [`Self::objects`] so that an object at rest costs 8 bytes here,
    /// not a whole [`Memory`].
    pub seen: std::sync::Mutex<std::collections::HashSet<u64>>,
    /// What the operator learned of each control plane ([`PlaneMemory`]),
    /// keyed by its client's key (`deployment::plane_key`).
    pub plane_memory: std::sync::Mutex<std::collections::HashMap<String, PlaneMemory>>,
    /// Name lookups before creates, shared by a fleet of one control plane.
    pub names: names::NameIndexes,
    /// GitHub integration and repository lists (for
    /// `sourceConfig.integrationRef`), shared by a fleet of one control plane.
    pub integrations: integrations::IntegrationCache,
    /// The key of `status.secretsHash` ([`hash_key`]): a random one until
    /// the operator sets the one of its Secret ([`hash_key::load_or_create`])
    /// before the controllers start.
    pub hash_key: hash_key::HashKey,
    /// The remote deletes in progress of this process's AgentDeployments
    /// ([`deleting`]).
    pub deletes: deleting::Deletes,
    /// Held from the count of live previews to the end of the pass that
    /// creates one, so that two passes cannot both take the last place
    /// under `spec.previews.maxLive` ([`super::previews`]).
    pub previews: tokio::sync::Mutex<()>,
    /// The image registries of `spec.imagePolicy` (one budget per registry
    /// host, shared by every AgentDeployment).
    pub registry: crate::registry::RegistryClient,
    /// Every AgentDeployment store, where a target of `spec.promotion`
    /// finds its source, and the changes of what sources serve
    /// ([`promotion`]).
    pub promotions: promotion::Promotions,
    /// Every AgentDeployment store, read as the claims on a remote
    /// deployment when a decision needs them: one owner per remote
    /// deployment ([`claims`]).
    pub claims: claims::ClaimIndex,
}

impl State {
    /// A state with `hash_key` (the operator's, read from its Secret) and
    /// nothing remembered.
    pub fn with_hash_key(hash_key: hash_key::HashKey) -> Self {
        Self {
            objects: Default::default(),
            seen: Default::default(),
            plane_memory: Default::default(),
            names: Default::default(),
            integrations: Default::default(),
            hash_key,
            deletes: Default::default(),
            previews: Default::default(),
            registry: Default::default(),
            promotions: Default::default(),
            claims: Default::default(),
        }
    }
}

/// Nothing remembered, and a random hash key (until the operator's is
/// read: [`State::with_hash_key`]).
impl Default for State {
    fn default() -> Self {
        Self::with_hash_key(hash_key::HashKey::random())
    }
}

/// Least time between two PATCHes of one object that a change of Secret
/// values alone causes: each is a new revision (a build and a rollout on the
/// real service, docs/control-plane-api.md "Requests"), so a Secret rewritten every second by a
/// broken rotation costs one revision per interval, carrying the latest
/// value, not one per write. A spec change is never held back.
pub const SECRETS_PATCH_INTERVAL: std::time::Duration = std::time::Duration::from_secs(30);

/// Objects of one control plane that poll their revisions while nothing is
/// learned about how long revisions take; the others wait for what the
/// scouts learn instead of each polling early.
pub const SCOUTS: usize = 4;

/// When a pass polls the revision it follows ([`DeploymentContext::poll_wait`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PollDue {
    /// Poll now.
    Now,
    /// Poll now, as one of the plane's [`SCOUTS`] while nothing is learned
    /// of it: the pass's report remembers it ([`DeploymentContext::scout`]).
    Scout,
    /// Wait this long, with no request.
    In(Duration),
}

/// What the operator remembers of one AgentDeployment between its passes
/// (the error backoff is [`crate::controller::context::Shared::failures`], every kind's). Lost on
/// restart by design: each field says what a cold start does without it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Memory {
    /// The (revision, status) last polled and how many polls saw it
    /// unchanged, for the polling backoff.
    pub poll: Option<(String, u32)>,
    /// The revision its last mutation started, and when.
    pub revision_started: Option<(String, std::time::Instant)>,
    /// When its last PATCH that carried Secret values was sent
    /// ([`DeploymentContext::secrets_due_in`]).
    pub secrets_sent: Option<std::time::Instant>,
}

impl Memory {
    /// Nothing is remembered (the entry can go).
    fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// What the operator learned of one control plane.
#[derive(Clone, Debug, Default)]
pub struct PlaneMemory {
    /// How long its revisions take from creation to DEPLOYED, seconds
    /// (exponentially weighted mean of recent revisions); `None` until one
    /// was seen.
    pub revision_seconds: Option<f64>,
    /// While nothing is learned: the objects ([`memory_key`]) allowed to
    /// poll early ([`DeploymentContext::poll_wait`]).
    pub scouts: std::collections::HashSet<u64>,
}

impl DeploymentContext {
    /// Runs `f` on the memory of the object `key` ([`requeue::object_key`]; a
    /// default one when there is none), and drops the entry once it holds
    /// nothing.
    fn with_object<R>(&self, key: &str, f: impl FnOnce(&mut Memory) -> R) -> R {
        let id = memory_key(key);
        let mut objects = self.state.objects.lock().unwrap_or_else(|p| p.into_inner());
        let entry = objects.entry(id).or_default();
        let r = f(entry);
        if entry.is_empty() {
            objects.remove(&id);
        }
        r
    }
    /// What `f` reads of the memory of the object `key`; `None` when
    /// nothing is remembered of it.
    fn recall<R>(&self, key: &str, f: impl FnOnce(&Memory) -> Option<R>) -> Option<R> {
        let objects = self.state.objects.lock().unwrap_or_else(|p| p.into_inner());
        objects.get(&memory_key(key)).and_then(f)
    }
    /// Records that a PATCH carrying secret values of `key` was sent now.
    pub fn secrets_sent(&self, key: &str) {
        self.with_object(key, |m| m.secrets_sent = Some(std::time::Instant::now()));
    }
    /// How long a change of Secret values alone must wait before `key` may
    /// be patched again ([`SECRETS_PATCH_INTERVAL`] after the last such
    /// PATCH); `None` when it may be sent now.
    pub fn secrets_due_in(&self, key: &str) -> Option<std::time::Duration> {
        let sent = self.recall(key, |m| m.secrets_sent)?;
        let wait = SECRETS_PATCH_INTERVAL.checked_sub(sent.elapsed())?;
        (!wait.is_zero()).then_some(wait)
    }
    /// True while `key` had no pass since the operator started (or since
    /// it was forgotten): the cold start of its pass. Reads only; the pass
    /// remembers it ([`DeploymentContext::passed`]) once its writes are done.
    pub fn is_first_pass(&self, key: &str) -> bool {
        !self
            .state
            .seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&memory_key(key))
    }
    /// Remembers that `key` had a pass ([`DeploymentContext::is_first_pass`]).
    pub fn passed(&self, key: &str) {
        self.state
            .seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(memory_key(key));
    }
    /// Records that a mutation of `key` started revision `rid` just now.
    pub fn revision_started(&self, key: &str, rid: &str) {
        let started = (rid.to_owned(), std::time::Instant::now());
        self.with_object(key, |m| m.revision_started = Some(started));
    }
    /// When `key` polls revision `rid` of control plane `plane`: now, now
    /// as a scout, or after a wait without any request. Reads only: a
    /// scout is remembered by the pass's report ([`DeploymentContext::scout`]).
    ///
    /// Only for a revision this operator started (its start time is known):
    /// when revisions of the plane have a learned duration, the poll waits
    /// for the expected end, at most until the longest poll interval after
    /// the start (a revision in progress is read at least that often); when
    /// nothing is learned yet, up to [`SCOUTS`]
    /// objects poll and the others check again after `poll_interval`
    /// (a wake-up with no request) until the scouts have learned it.
    pub fn poll_wait(&self, key: &str, plane: &str, rid: &str) -> PollDue {
        let Some(since) = self.recall(key, |m| match &m.revision_started {
            Some((r, at)) if r == rid => Some(at.elapsed()),
            _ => None,
        }) else {
            return PollDue::Now;
        };
        if let Some(expected) = self.expected_seconds(plane) {
            // Never longer than the longest poll interval after the start:
            // a revision in progress is read at least that often.
            let cap = self
                .config
                .max_poll_interval
                .saturating_sub(since)
                .as_secs_f64();
            let left = (expected - since.as_secs_f64()).min(cap);
            return if left > 0.5 {
                PollDue::In(Duration::from_secs_f64(left))
            } else {
                PollDue::Now
            };
        }
        let id = memory_key(key);
        let planes = self
            .state
            .plane_memory
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let scouts = planes.get(plane).map(|p| &p.scouts);
        if scouts.is_none_or(|s| s.contains(&id) || s.len() < SCOUTS) {
            PollDue::Scout
        } else {
            PollDue::In(self.config.poll_interval)
        }
    }
    /// Remembers `key` among the scouts of `plane` ([`PollDue::Scout`]),
    /// while there is room ([`SCOUTS`]).
    pub fn scout(&self, key: &str, plane: &str) {
        let id = memory_key(key);
        let mut planes = self
            .state
            .plane_memory
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let scouts = &mut planes.entry(plane.to_owned()).or_default().scouts;
        if scouts.len() < SCOUTS {
            scouts.insert(id);
        }
    }
    /// Forgets that `key` follows a revision (it ended, or was deleted).
    pub fn revision_ended(&self, key: &str) {
        self.with_object(key, |m| m.revision_started = None);
        self.drop_scout(memory_key(key));
    }
    /// Forgets every per-object state of `key` (the object was deleted):
    /// its entry, and its place among the scouts of any plane.
    pub fn forget(&self, key: &str) {
        self.shared.forget(key);
        let id = memory_key(key);
        self.state
            .objects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        self.state
            .seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        self.drop_scout(id);
    }
    /// Removes the object `id` ([`memory_key`]) from the scouts of every
    /// plane.
    fn drop_scout(&self, id: u64) {
        let mut planes = self
            .state
            .plane_memory
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        for plane in planes.values_mut() {
            plane.scouts.remove(&id);
        }
    }
    /// Learns from a revision that reached DEPLOYED how long revisions of the
    /// control plane `plane` take (`updated_at - created_at`, weight 0.3 for
    /// the newest). Other statuses and unparsable times are ignored.
    pub fn learn_revision(&self, plane: &str, revision: &crate::controlplane::types::Revision) {
        use crate::controlplane::types::RevisionStatus;
        if revision.status != RevisionStatus::Deployed {
            return;
        }
        let parse = |t: &Option<String>| t.as_deref()?.parse::<k8s_openapi::jiff::Timestamp>().ok();
        let (Some(created), Some(updated)) =
            (parse(&revision.created_at), parse(&revision.updated_at))
        else {
            return;
        };
        let seconds = updated.duration_since(created).as_secs_f64();
        if !(0.0..86_400.0).contains(&seconds) {
            return;
        }
        let mut planes = self
            .state
            .plane_memory
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let learned = &mut planes.entry(plane.to_owned()).or_default().revision_seconds;
        let mean = learned.get_or_insert(seconds);
        *mean = 0.7 * *mean + 0.3 * seconds;
    }
    /// How long revisions of `plane` are expected to take: the learned
    /// duration plus 10 %; `None` while nothing is learned.
    pub fn expected_duration(&self, plane: &str) -> Option<Duration> {
        self.expected_seconds(plane)
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
    }
    /// How long revisions of `plane` are expected to take: the learned
    /// duration plus 10 %, seconds; `None` while nothing is learned.
    fn expected_seconds(&self, plane: &str) -> Option<f64> {
        self.state
            .plane_memory
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(plane)?
            .revision_seconds
            .map(|s| s * 1.1)
    }
    /// The time left until a revision of `plane` is expected to end
    /// ([`DeploymentContext::expected_seconds`]), counted from the revision's
    /// `created_at` (RFC 3339; `None`: it started just now). `None` when
    /// nothing was learned yet or the expected end has passed.
    pub fn expected_left(&self, plane: &str, created_at: Option<&str>) -> Option<Duration> {
        let expected = self.expected_seconds(plane)?;
        let age = match created_at {
            None => 0.0,
            Some(t) => {
                let created: k8s_openapi::jiff::Timestamp = t.parse().ok()?;
                k8s_openapi::jiff::Timestamp::now()
                    .duration_since(created)
                    .as_secs_f64()
            }
        };
        Duration::try_from_secs_f64(expected - age).ok()
    }
    /// Delay before the next poll of a revision in progress: `poll_interval`
    /// while the (revision, status) pair keeps changing, growing by half each
    /// unchanged poll up to `max_poll_interval`.
    pub fn poll_delay(&self, key: &str, revision_state: &str) -> Duration {
        let (delay, unchanged) = self.next_poll(key, revision_state);
        self.record_poll(key, revision_state, unchanged);
        delay
    }
    /// What [`DeploymentContext::poll_delay`] decides, without recording it: the delay
    /// and how many polls will have seen `revision_state` unchanged
    /// (recorded by [`DeploymentContext::record_poll`] once the pass's writes are done).
    pub fn next_poll(&self, key: &str, revision_state: &str) -> (Duration, u32) {
        let unchanged = self
            .recall(key, |m| match &m.poll {
                Some((state, n)) if state == revision_state => Some(n.saturating_add(1)),
                _ => None,
            })
            .unwrap_or(0);
        let delay = requeue::poll_delay(
            self.config.poll_interval,
            self.config.max_poll_interval,
            unchanged,
        );
        (delay, unchanged)
    }
    /// Records that `key` polled `revision_state`, seen `unchanged` times
    /// in a row before ([`DeploymentContext::next_poll`]).
    pub fn record_poll(&self, key: &str, revision_state: &str, unchanged: u32) {
        let poll = (revision_state.to_owned(), unchanged);
        self.with_object(key, |m| m.poll = Some(poll));
    }
    /// Forgets the polling state of `key` (the revision ended).
    pub fn reset_polls(&self, key: &str) {
        self.with_object(key, |m| m.poll = None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::context::Shared;
    use std::sync::Arc;

    /// A context whose Kubernetes client is never called.
    fn context() -> DeploymentContext {
        Context::new(Arc::new(Shared::offline()), State::default())
    }

    fn entries(ctx: &DeploymentContext) -> usize {
        ctx.state.objects.lock().unwrap().len()
    }

    /// One entry per object, whatever it remembers; none once the object
    /// is forgotten, with its failures (kept in [`Shared`]) and its place
    /// among the scouts.
    #[tokio::test]
    async fn the_memory_of_an_object_is_one_entry_until_forgotten() {
        let ctx = context();
        let agd = "AgentDeployment/ns/a";
        assert!(ctx.is_first_pass(agd));
        ctx.passed(agd);
        assert!(!ctx.is_first_pass(agd));
        ctx.backoff(agd);
        ctx.secrets_sent(agd);
        ctx.revision_started(agd, "r1");
        ctx.record_poll(agd, "r1/BUILDING", 2);
        assert_eq!(entries(&ctx), 1);
        assert_eq!(ctx.next_poll(agd, "r1/BUILDING").1, 3);
        assert!(ctx.secrets_due_in(agd).is_some());
        ctx.reset_polls(agd);
        ctx.revision_ended(agd);
        ctx.revision_started(agd, "r1");
        assert_eq!(entries(&ctx), 1, "still its Secret PATCH");
        assert_eq!(ctx.poll_wait(agd, "plane", "r1"), PollDue::Scout);
        ctx.scout(agd, "plane");
        ctx.forget(agd);
        assert_eq!(entries(&ctx), 0);
        assert!(
            ctx.failures.lock().unwrap().is_empty(),
            "its failures, every kind's, go too"
        );
        assert!(ctx.secrets_due_in(agd).is_none());
        assert_eq!(ctx.next_poll(agd, "r1/BUILDING").1, 0);
        assert!(
            ctx.is_first_pass(agd),
            "a new object of that name starts cold"
        );
        let planes = ctx.state.plane_memory.lock().unwrap();
        assert!(planes["plane"].scouts.is_empty(), "no longer a scout");
    }

    /// A learned duration longer than the longest poll interval does not
    /// put the first read of a revision off beyond that interval.
    #[tokio::test]
    async fn a_long_learned_revision_is_still_read_within_the_longest_poll_interval() {
        let ctx = context();
        let agd = "AgentDeployment/ns/a";
        let hour: crate::controlplane::types::Revision =
            serde_json::from_value(serde_json::json!({
            "id": "r0", "status": "DEPLOYED",
            "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T01:00:00Z"}))
            .expect("a revision");
        ctx.learn_revision("plane", &hour);
        ctx.revision_started(agd, "r1");
        let PollDue::In(wait) = ctx.poll_wait(agd, "plane", "r1") else {
            panic!("a wait");
        };
        assert!(
            wait <= ctx.config.max_poll_interval,
            "{wait:?} beyond {:?}",
            ctx.config.max_poll_interval
        );
        assert!(wait > ctx.config.max_poll_interval / 2, "{wait:?}");
    }
}
