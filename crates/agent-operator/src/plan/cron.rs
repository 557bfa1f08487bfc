//! The pure core of reconciling an `AgentCron`: the create and patch
//! bodies (with the UID tag in `metadata`, never `end_time`), the digest of
//! what was sent, and the one step of a pass ([`decide`]) on the crons the
//! UID tag finds.
//!
//! Source: docs/control-plane-api.md "Agent server" (`POST /runs/crons` has
//! no idempotency key; `POST /runs/crons/search` matches exact metadata
//! pairs; `PATCH` merges `metadata`; `end_time` breaks the pinned server's
//! scheduler), "Crons" (what the controller sends).

use agent_server_wire::{Cron, CronCreate, CronPatch, CronSearch, ThreadSearch};
use jiff::Timestamp;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::api::assistant::RejectedAssistantRequest;
use crate::api::conditions::reason;
use crate::api::cron::{AgentCronSpec, UID_METADATA_KEY};
use crate::api::deployment::{DriftField, ManagementPolicy, PAUSED_ANNOTATION};
use crate::plan::policy::drift_field;

/// Most crons one search asks for: one is expected; more are duplicates,
/// deleted one per pass.
pub const SEARCH_LIMIT: u32 = 20;

/// The search that finds the object's cron: its UID tag.
pub fn search(uid: &str) -> CronSearch {
    CronSearch {
        metadata: Some(tag(uid)),
        limit: Some(SEARCH_LIMIT),
        ..Default::default()
    }
}

/// The search of the cron's newest run: the newest thread carrying the
/// UID tag (`limit: 1`, by `created_at` descending, four fields).
pub fn last_run_search(uid: &str) -> ThreadSearch {
    ThreadSearch {
        metadata: Some(tag(uid)),
        limit: Some(1),
        offset: None,
        sort_by: Some("created_at".to_owned()),
        sort_order: Some("desc".to_owned()),
        select: Some(
            ["thread_id", "created_at", "updated_at", "status"]
                .map(str::to_owned)
                .to_vec(),
        ),
    }
}

/// `{agentserver.dev/uid: uid}`.
fn tag(uid: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(UID_METADATA_KEY.to_owned(), Value::String(uid.to_owned()));
    m
}

/// Whether `spec.endTime` has passed at `now`.
pub fn ended(spec: &AgentCronSpec, now: Timestamp) -> bool {
    spec.end_time.as_ref().is_some_and(|t| t.0 <= now)
}

/// Whether the cron should run: not suspended, not ended, and its
/// AgentDeployment not `paused`.
pub fn want_enabled(spec: &AgentCronSpec, now: Timestamp, paused: bool) -> bool {
    !spec.suspend && !ended(spec, now) && !paused
}

/// The reason and message of a cron that is as the spec says, in this
/// order: `endTime` has passed (`CronCompleted`), the AgentDeployment is
/// paused (`DeploymentPaused`), `spec.suspend` (`CronSuspended`), else
/// `CronReady` with the next run (`next`, "unknown" when the server shows
/// none). `id`: the cron's id ("none" when none was created); `what`: the
/// message's tail (the request sent, or the observed note). Pure.
pub fn ready_reason(
    spec: &AgentCronSpec,
    now: Timestamp,
    paused: bool,
    id: &str,
    next: Option<&str>,
    what: &str,
) -> (&'static str, String) {
    if ended(spec, now) {
        return (
            reason::CRON_COMPLETED,
            format!("endTime has passed: cron {id} is disabled{what}"),
        );
    }
    if paused {
        return (
            reason::DEPLOYMENT_PAUSED,
            format!(
                "AgentDeployment {} is paused (annotation {PAUSED_ANNOTATION}): cron {id} is \
                 disabled (enabled: false) until it is unpaused{what}",
                spec.deployment_ref.name
            ),
        );
    }
    if spec.suspend {
        return (
            reason::CRON_SUSPENDED,
            format!("cron {id} is suspended (enabled: false){what}"),
        );
    }
    let next = next.unwrap_or("unknown");
    (
        reason::CRON_READY,
        format!(
            "cron {id} runs on {:?}, next run {next}{what}",
            spec.schedule
        ),
    )
}

/// The cron's metadata: the spec's, with the UID tag (which wins).
fn metadata(spec: &AgentCronSpec, uid: &str) -> Map<String, Value> {
    let mut m = spec.metadata.clone().unwrap_or_default();
    m.extend(tag(uid));
    m
}

/// The body of `POST /runs/crons`: `assistant` is the AgentAssistant's id
/// or the graph id; `paused`: the AgentDeployment is paused (the cron is
/// created disabled). Never carries `end_time`.
pub fn create_body(
    spec: &AgentCronSpec,
    uid: &str,
    assistant: &str,
    now: Timestamp,
    paused: bool,
) -> CronCreate {
    let p = patch_body(spec, uid, now, paused);
    CronCreate {
        assistant_id: assistant.to_owned(),
        schedule: spec.schedule.clone(),
        timezone: p.timezone,
        end_time: None,
        input: p.input,
        metadata: p.metadata,
        config: p.config,
        context: p.context,
        webhook: p.webhook,
        on_run_completed: p.on_run_completed,
        enabled: p.enabled,
    }
}

/// The whole desired state as one `PATCH /runs/crons/{id}` body (every
/// field the spec sets, `enabled` from `suspend`, `endTime` and whether the
/// AgentDeployment is `paused`). Never carries `end_time`.
pub fn patch_body(spec: &AgentCronSpec, uid: &str, now: Timestamp, paused: bool) -> CronPatch {
    CronPatch {
        schedule: Some(spec.schedule.clone()),
        timezone: spec.timezone.clone(),
        end_time: None,
        input: spec.input.clone(),
        metadata: Some(metadata(spec, uid)),
        config: spec.config.clone().map(Value::Object),
        context: spec.context.clone().map(Value::Object),
        webhook: spec.webhook.clone(),
        on_run_completed: Some(spec.on_run_completed.wire().to_owned()),
        enabled: Some(want_enabled(spec, now, paused)),
    }
}

/// Digest (hex SHA-256, 16 bytes) of a body: what `status.appliedHash`
/// records of the last create or PATCH.
pub fn digest(body: &CronPatch) -> String {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    Sha256::digest(&bytes)[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The one step of a pass on the agent server.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// No cron carries the UID tag: `POST /runs/crons`.
    Create(Box<CronCreate>),
    /// The cron differs from the spec (a spec change, or `schedule`,
    /// `enabled` or a metadata key changed outside): one `PATCH
    /// /runs/crons/{id}` with the whole desired state.
    Patch(String, Box<CronPatch>),
    /// More than one cron carries the UID tag (made outside, or by an
    /// operator older than the tag search): `DELETE /runs/crons/{id}` of
    /// one that is not kept.
    DeleteDuplicate(String),
    /// The cron is as the spec says (or there is none and `endTime` has
    /// passed: nothing to create).
    Nothing,
    /// The request this pass would make was refused for this generation:
    /// not sent again until the spec changes.
    Held(RejectedAssistantRequest),
    /// `managementPolicy: Observe`: nothing is sent; the kept cron differs
    /// from the spec in these fields (none: it equals the spec).
    Observe(Vec<DriftField>),
    /// `managementPolicy: Observe` and no cron carries the UID tag: nothing
    /// is created.
    NothingToObserve,
}

impl Step {
    /// The request the step makes, as it is named in status and messages.
    pub fn request(&self) -> &'static str {
        match self {
            Step::Create(_) => "POST /runs/crons",
            Step::Patch(..) => "PATCH /runs/crons/{id}",
            Step::DeleteDuplicate(_) => "DELETE /runs/crons/{id}",
            Step::Nothing | Step::Held(_) | Step::Observe(_) | Step::NothingToObserve => "",
        }
    }
}

/// What [`decide`] knows.
#[derive(Clone, Debug)]
pub struct Known<'a> {
    /// The spec.
    pub spec: &'a AgentCronSpec,
    /// The object's UID (the metadata tag).
    pub uid: &'a str,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// Now (for `endTime`).
    pub now: Timestamp,
    /// The AgentDeployment is paused: the cron is disabled.
    pub paused: bool,
    /// The assistant id (from the AgentAssistant) or graph id to create
    /// the cron with.
    pub assistant: &'a str,
    /// The crons `POST /runs/crons/search` found by the UID tag.
    pub found: &'a [Cron],
    /// `status.cronId`.
    pub known_id: Option<&'a str>,
    /// `status.appliedHash`.
    pub applied_hash: Option<&'a str>,
    /// `status.rejectedRequest`.
    pub rejected: Option<&'a RejectedAssistantRequest>,
    /// `spec.managementPolicy`.
    pub policy: ManagementPolicy,
}

/// The cron kept among those found: the one `status.cronId` names, else
/// the oldest (by `created_at`, then id). `None` when none was found.
pub fn kept<'a>(found: &'a [Cron], known_id: Option<&str>) -> Option<&'a Cron> {
    found
        .iter()
        .find(|c| Some(c.cron_id.as_str()) == known_id)
        .or_else(|| {
            found
                .iter()
                .min_by(|a, b| (&a.created_at, &a.cron_id).cmp(&(&b.created_at, &b.cron_id)))
        })
}

/// Whether `cron` differs from `want` where the server's answer shows it:
/// `schedule`, `enabled`, and each metadata key of `want` (the server
/// merges metadata, so keys it holds besides are no difference).
fn drifted(cron: &Cron, want: &CronPatch) -> bool {
    want.schedule.as_deref() != Some(cron.schedule.as_str())
        || want.enabled != Some(cron.enabled)
        || want
            .metadata
            .iter()
            .flatten()
            .any(|(k, v)| cron.metadata.get(k) != Some(v))
}

/// The fields of `cron` that differ from `want` where the server's answer
/// shows them ([`drifted`]): `schedule`, `enabled`, and `metadata` (the
/// keys of `want` only), each with both values as JSON. Pure.
pub fn drift(cron: &Cron, want: &CronPatch) -> Vec<DriftField> {
    let mut out = Vec::new();
    if let Some(s) = &want.schedule
        && *s != cron.schedule
    {
        out.push(drift_field("schedule", s, &cron.schedule));
    }
    if let Some(e) = want.enabled
        && e != cron.enabled
    {
        out.push(drift_field("enabled", &e, &cron.enabled));
    }
    if let Some(m) = &want.metadata
        && m.iter().any(|(k, v)| cron.metadata.get(k) != Some(v))
    {
        let held: Map<String, Value> = m
            .keys()
            .map(|k| {
                (
                    k.clone(),
                    cron.metadata.get(k).cloned().unwrap_or(Value::Null),
                )
            })
            .collect();
        out.push(drift_field("metadata", m, &held));
    }
    out
}

/// The step of a pass. Duplicates go first (one per pass), then the
/// create or the PATCH; a step whose request was refused for this
/// generation is [`Step::Held`]. Under `managementPolicy: Observe` nothing
/// is sent (no create, PATCH or duplicate delete, not even at `endTime`):
/// the kept cron's drift is listed ([`Step::Observe`]), or
/// [`Step::NothingToObserve`] when none carries the tag. Pure.
pub fn decide(k: &Known<'_>) -> Step {
    let want = patch_body(k.spec, k.uid, k.now, k.paused);
    if k.policy == ManagementPolicy::Observe {
        return match kept(k.found, k.known_id) {
            None => Step::NothingToObserve,
            Some(keep) => Step::Observe(drift(keep, &want)),
        };
    }
    let step = match kept(k.found, k.known_id) {
        None if ended(k.spec, k.now) => Step::Nothing,
        None => Step::Create(Box::new(create_body(
            k.spec,
            k.uid,
            k.assistant,
            k.now,
            k.paused,
        ))),
        Some(keep) => {
            if let Some(extra) = k.found.iter().find(|c| c.cron_id != keep.cron_id) {
                Step::DeleteDuplicate(extra.cron_id.clone())
            } else if k.applied_hash != Some(digest(&want).as_str()) || drifted(keep, &want) {
                Step::Patch(keep.cron_id.clone(), Box::new(want))
            } else {
                Step::Nothing
            }
        }
    };
    match (k.rejected, &step) {
        (Some(r), Step::Create(_) | Step::Patch(..))
            if Some(r.generation) == k.generation && r.request == step.request() =>
        {
            Step::Held(r.clone())
        }
        _ => step,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const UID: &str = "0b8e7c9e-1111-4000-8000-000000000001";

    fn spec(extra: Value) -> AgentCronSpec {
        let mut base =
            json!({"deploymentRef": {"name": "d"}, "graphId": "agent", "schedule": "* * * * *"});
        base.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        serde_json::from_value(base).unwrap()
    }

    fn now() -> Timestamp {
        "2026-11-27T05:00:00Z".parse().unwrap()
    }

    fn remote(id: &str, created: &str, v: Value) -> Cron {
        let mut base = json!({"cron_id": id, "schedule": "* * * * *", "enabled": true,
            "metadata": {UID_METADATA_KEY: UID}, "created_at": created});
        base.as_object_mut()
            .unwrap()
            .extend(v.as_object().unwrap().clone());
        serde_json::from_value(base).unwrap()
    }

    fn rejected(generation: i64, request: &str) -> RejectedAssistantRequest {
        RejectedAssistantRequest {
            generation,
            request: request.into(),
            reason: "CronRejected".into(),
            message: "422 Invalid cron schedule".into(),
        }
    }

    #[test]
    fn a_ready_cron_reports_completed_then_paused_then_suspended_then_ready() {
        let ended = json!({"endTime": "2026-11-27T04:00:00Z", "suspend": true});
        let later = json!({"endTime": "2026-11-28T00:00:00Z"});
        // (spec, paused, next, reason, message)
        let table = [
            (
                ended.clone(),
                true,
                Some("t"),
                "CronCompleted",
                "endTime has passed: cron c1 is disabled (x)",
            ),
            (
                later.clone(),
                true,
                Some("t"),
                "DeploymentPaused",
                "AgentDeployment d is paused (annotation agentserver.dev/paused): cron c1 is disabled \
                 (enabled: false) until it is unpaused (x)",
            ),
            (
                json!({"suspend": true}),
                false,
                Some("t"),
                "CronSuspended",
                "cron c1 is suspended (enabled: false) (x)",
            ),
            (
                later,
                false,
                Some("t"),
                "CronReady",
                "cron c1 runs on \"* * * * *\", next run t (x)",
            ),
            (
                json!({}),
                false,
                None,
                "CronReady",
                "cron c1 runs on \"* * * * *\", next run unknown (x)",
            ),
        ];
        for (extra, paused, next, want_reason, want_message) in table {
            let (reason, message) =
                ready_reason(&spec(extra.clone()), now(), paused, "c1", next, " (x)");
            assert_eq!(
                (reason, message.as_str()),
                (want_reason, want_message),
                "{extra} paused={paused}"
            );
        }
    }

    #[test]
    fn the_bodies_carry_the_uid_tag_and_never_end_time() {
        let s = spec(
            json!({"endTime": "2026-11-28T00:00:00Z", "metadata": {"team": "x",
            UID_METADATA_KEY: "forged"}, "timezone": "Europe/Paris"}),
        );
        let body = serde_json::to_value(create_body(&s, UID, "agent", now(), false)).unwrap();
        assert_eq!(
            body["metadata"],
            json!({"team": "x", UID_METADATA_KEY: UID})
        );
        assert!(body.get("end_time").is_none(), "{body}");
        assert_eq!(body["enabled"], true);
        assert_eq!(body["timezone"], "Europe/Paris");
        assert_eq!(body["on_run_completed"], "delete");
        let patch = serde_json::to_value(patch_body(&s, UID, now(), false)).unwrap();
        assert!(patch.get("end_time").is_none(), "{patch}");
        assert_eq!(
            serde_json::to_value(search(UID)).unwrap(),
            json!({"metadata": {UID_METADATA_KEY: UID}, "limit": SEARCH_LIMIT})
        );
        assert_eq!(
            serde_json::to_value(last_run_search(UID)).unwrap(),
            json!({"metadata": {UID_METADATA_KEY: UID}, "limit": 1, "sort_by": "created_at",
                "sort_order": "desc", "select": ["thread_id", "created_at", "updated_at", "status"]})
        );
    }

    #[test]
    fn suspend_and_end_time_disable_it() {
        let later = spec(json!({"endTime": "2026-11-27T06:00:00Z"}));
        let past = spec(json!({"endTime": "2026-11-27T05:00:00Z"}));
        let suspended = spec(json!({"suspend": true}));
        assert!(want_enabled(&later, now(), false));
        assert!(
            !want_enabled(&past, now(), false),
            "endTime at now has passed"
        );
        assert!(!want_enabled(&suspended, now(), false));
        assert!(!want_enabled(&later, now(), true), "a paused deployment");
    }

    /// What, spec, crons found, status.cronId, applied hash, refused
    /// request, expected step.
    type Case<'a> = (
        &'a str,
        &'a AgentCronSpec,
        Vec<Cron>,
        Option<&'a str>,
        Option<String>,
        Option<RejectedAssistantRequest>,
        Step,
    );

    /// Asserts the step [`decide`] takes under `Manage` at generation 3,
    /// on a deployment not paused, in each case.
    fn assert_decides(cases: Vec<Case<'_>>) {
        for (what, s, found, known_id, hash, rej, want) in cases {
            let k = Known {
                spec: s,
                uid: UID,
                generation: Some(3),
                now: now(),
                paused: false,
                assistant: "agent",
                found: &found,
                known_id,
                applied_hash: hash.as_deref(),
                rejected: rej.as_ref(),
                policy: ManagementPolicy::Manage,
            };
            assert_eq!(decide(&k), want, "{what}");
        }
    }

    /// The digest `s` sends with each create or PATCH ([`digest`]).
    fn hash_of(s: &AgentCronSpec) -> Option<String> {
        Some(digest(&patch_body(s, UID, now(), false)))
    }

    /// The create of `s`.
    fn create_of(s: &AgentCronSpec) -> Step {
        Step::Create(Box::new(create_body(s, UID, "agent", now(), false)))
    }

    /// The PATCH of cron c1 to `s`.
    fn patch_of(s: &AgentCronSpec) -> Step {
        Step::Patch("c1".into(), Box::new(patch_body(s, UID, now(), false)))
    }

    /// Cron c1, tagged, as an empty spec says.
    fn same() -> Cron {
        remote("c1", "2026-11-27T01:00:00Z", json!({}))
    }

    /// Cron c0, tagged, older than c1.
    fn older() -> Cron {
        remote("c0", "2026-11-27T00:00:00Z", json!({}))
    }

    /// Cron c1, tagged, disabled.
    fn disabled() -> Cron {
        remote("c1", "2026-11-27T01:00:00Z", json!({"enabled": false}))
    }

    #[test]
    fn a_missing_cron_is_created_or_a_lost_one_adopted() {
        let plain = spec(json!({}));
        let ended = spec(json!({"endTime": "2026-11-27T04:00:00Z"}));
        assert_decides(vec![
            (
                "none found: create",
                &plain,
                vec![],
                None,
                None,
                None,
                create_of(&plain),
            ),
            (
                "none found although an id is known (the server lost it): create",
                &plain,
                vec![],
                Some("c1"),
                hash_of(&plain),
                None,
                create_of(&plain),
            ),
            (
                "a create whose answer was lost: the tagged cron is adopted (patched to record it)",
                &plain,
                vec![same()],
                None,
                None,
                None,
                patch_of(&plain),
            ),
            (
                "endTime passed and no cron: nothing created",
                &ended,
                vec![],
                None,
                None,
                None,
                Step::Nothing,
            ),
        ]);
    }

    #[test]
    fn a_cron_as_the_spec_says_is_left_alone() {
        let plain = spec(json!({}));
        let meta = spec(json!({"metadata": {"team": "x"}}));
        let merged_meta = remote(
            "c1",
            "2026-11-27T01:00:00Z",
            json!({"metadata": {UID_METADATA_KEY: UID, "team": "x", "by": "ui"}}),
        );
        assert_decides(vec![
            (
                "as the spec says: nothing",
                &plain,
                vec![same()],
                Some("c1"),
                hash_of(&plain),
                None,
                Step::Nothing,
            ),
            (
                "metadata merged by the server: extra keys are no drift",
                &meta,
                vec![merged_meta],
                Some("c1"),
                hash_of(&meta),
                None,
                Step::Nothing,
            ),
        ]);
    }

    #[test]
    fn a_change_of_the_spec_or_outside_is_patched_back() {
        let plain = spec(json!({}));
        let hourly = spec(json!({"schedule": "0 * * * *"}));
        let other_schedule = remote(
            "c1",
            "2026-11-27T01:00:00Z",
            json!({"schedule": "5 * * * *"}),
        );
        assert_decides(vec![
            (
                "spec change: one patch",
                &hourly,
                vec![same()],
                Some("c1"),
                hash_of(&plain),
                None,
                patch_of(&hourly),
            ),
            (
                "schedule changed outside: patched back",
                &plain,
                vec![other_schedule],
                Some("c1"),
                hash_of(&plain),
                None,
                patch_of(&plain),
            ),
            (
                "disabled outside: enabled again",
                &plain,
                vec![disabled()],
                Some("c1"),
                hash_of(&plain),
                None,
                patch_of(&plain),
            ),
        ]);
    }

    #[test]
    fn suspend_and_a_passed_end_time_disable_the_cron_by_a_patch() {
        let plain = spec(json!({}));
        let suspended = spec(json!({"suspend": true}));
        let ended = spec(json!({"endTime": "2026-11-27T04:00:00Z"}));
        assert_decides(vec![
            (
                "suspend: patched to enabled false",
                &suspended,
                vec![same()],
                Some("c1"),
                hash_of(&plain),
                None,
                patch_of(&suspended),
            ),
            (
                "suspended and disabled: nothing",
                &suspended,
                vec![disabled()],
                Some("c1"),
                hash_of(&suspended),
                None,
                Step::Nothing,
            ),
            (
                "endTime passed: disabled by a patch",
                &ended,
                vec![same()],
                Some("c1"),
                hash_of(&plain),
                None,
                patch_of(&ended),
            ),
        ]);
    }

    #[test]
    fn duplicate_tagged_crons_are_deleted_first_keeping_the_known_or_the_oldest() {
        let plain = spec(json!({}));
        assert_decides(vec![
            (
                "a duplicate tagged cron: deleted first, the known one kept",
                &plain,
                vec![older(), same()],
                Some("c1"),
                hash_of(&plain),
                None,
                Step::DeleteDuplicate("c0".into()),
            ),
            (
                "duplicates and no known id: the oldest kept",
                &plain,
                vec![same(), older()],
                None,
                None,
                None,
                Step::DeleteDuplicate("c1".into()),
            ),
        ]);
    }

    #[test]
    fn a_refused_request_is_held_only_at_its_generation() {
        let plain = spec(json!({}));
        let hourly = spec(json!({"schedule": "0 * * * *"}));
        assert_decides(vec![
            (
                "create refused at this generation: held",
                &plain,
                vec![],
                None,
                None,
                Some(rejected(3, "POST /runs/crons")),
                Step::Held(rejected(3, "POST /runs/crons")),
            ),
            (
                "refused at an older generation: tried again",
                &plain,
                vec![],
                None,
                None,
                Some(rejected(2, "POST /runs/crons")),
                create_of(&plain),
            ),
            (
                "patch refused at this generation: held",
                &hourly,
                vec![same()],
                Some("c1"),
                hash_of(&plain),
                Some(rejected(3, "PATCH /runs/crons/{id}")),
                Step::Held(rejected(3, "PATCH /runs/crons/{id}")),
            ),
        ]);
    }

    /// Asserts that under `Observe`, with cron c1 known and a PATCH refused
    /// at generation 3, each case sends nothing and takes its step.
    fn assert_observes(cases: Vec<(&str, &AgentCronSpec, Vec<Cron>, Step)>) {
        for (what, s, found, want) in cases {
            let step = decide(&Known {
                spec: s,
                uid: UID,
                generation: Some(3),
                now: now(),
                paused: false,
                assistant: "agent",
                found: &found,
                known_id: Some("c1"),
                applied_hash: None,
                rejected: Some(&rejected(3, "PATCH /runs/crons/{id}")),
                policy: ManagementPolicy::Observe,
            });
            assert_eq!(step.request(), "", "{what}: sends nothing");
            assert_eq!(step, want, "{what}");
        }
    }

    /// Cron c1, tagged, with metadata `team: x` and the fields of `v`.
    fn tagged(v: Value) -> Cron {
        let mut base = json!({"metadata": {UID_METADATA_KEY: UID, "team": "x"}});
        base.as_object_mut()
            .unwrap()
            .extend(v.as_object().unwrap().clone());
        remote("c1", "2026-11-27T01:00:00Z", base)
    }

    /// A drift entry of field `f`: desired `a`, remote `b`.
    fn d(f: &str, a: &str, b: &str) -> DriftField {
        DriftField {
            field: f.into(),
            desired: a.into(),
            remote: b.into(),
        }
    }

    /// Under `Observe` nothing is ever sent: no create (none found, even
    /// before `endTime`), no PATCH (a schedule, `enabled` or metadata key
    /// changed outside is listed instead), no duplicate deleted, no
    /// disabling at `endTime`.
    #[test]
    fn observe_sends_nothing_and_lists_the_drift() {
        let plain = spec(json!({"metadata": {"team": "x"}}));
        let ended = spec(json!({"endTime": "2026-11-27T04:00:00Z", "metadata": {"team": "x"}}));
        let same = tagged(json!({}));
        let changed = tagged(json!({"schedule": "0 * * * *", "enabled": false,
            "metadata": {UID_METADATA_KEY: UID, "team": "y"}}));
        let duplicate = remote("c2", "2026-11-27T02:00:00Z", json!({}));
        let tag = format!(r#""{UID_METADATA_KEY}":"{UID}""#);
        let cases = vec![
            (
                "none tagged: not created",
                &plain,
                vec![],
                Step::NothingToObserve,
            ),
            ("ended, none tagged", &ended, vec![], Step::NothingToObserve),
            ("equal", &plain, vec![same.clone()], Step::Observe(vec![])),
            (
                "a duplicate is not deleted",
                &plain,
                vec![same.clone(), duplicate],
                Step::Observe(vec![]),
            ),
            (
                "changed outside",
                &plain,
                vec![changed],
                Step::Observe(vec![
                    d("schedule", "\"* * * * *\"", "\"0 * * * *\""),
                    d("enabled", "true", "false"),
                    d(
                        "metadata",
                        &format!(r#"{{{tag},"team":"x"}}"#),
                        &format!(r#"{{{tag},"team":"y"}}"#),
                    ),
                ]),
            ),
            (
                "endTime passed: not disabled, listed",
                &ended,
                vec![same],
                Step::Observe(vec![d("enabled", "false", "true")]),
            ),
        ];
        assert_observes(cases);
    }

    #[test]
    fn a_paused_deployment_disables_the_cron_and_unpausing_enables_it_again() {
        let plain = spec(json!({}));
        let enabled = remote("c1", "2026-11-27T01:00:00Z", json!({}));
        let disabled = remote("c1", "2026-11-27T01:00:00Z", json!({"enabled": false}));
        let sent = |paused| Some(digest(&patch_body(&plain, UID, now(), paused)));
        let step = |paused, found: Vec<Cron>, hash: Option<String>| {
            decide(&Known {
                spec: &plain,
                uid: UID,
                generation: Some(1),
                now: now(),
                paused,
                assistant: "agent",
                found: &found,
                known_id: found.first().map(|c| c.cron_id.as_str()),
                applied_hash: hash.as_deref(),
                rejected: None,
                policy: ManagementPolicy::Manage,
            })
        };
        let Step::Patch(_, off) = step(true, vec![enabled.clone()], sent(false)) else {
            panic!("paused: one PATCH");
        };
        assert_eq!(off.enabled, Some(false));
        assert_eq!(
            step(true, vec![disabled.clone()], sent(true)),
            Step::Nothing,
            "paused and disabled: nothing"
        );
        let Step::Patch(_, on) = step(false, vec![disabled], sent(true)) else {
            panic!("unpaused: one PATCH");
        };
        assert_eq!(on.enabled, Some(true));
        let Step::Create(created) = step(true, vec![], None) else {
            panic!("none yet: created");
        };
        assert_eq!(
            created.enabled,
            Some(false),
            "created disabled while paused"
        );
    }
}
