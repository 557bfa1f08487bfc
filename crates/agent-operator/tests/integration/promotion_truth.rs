//! The release flow keeps its promises (issue "The release flow keeps its
//! promises"): a promotion target that holds a deployment never stops
//! reading it while its promotion waits or is refused, stays Ready while it
//! serves a verified revision, and never leaves a commit nobody verified
//! serving longer than one redeploy. On the emulator with its built-in
//! agent server (`spec.verify` on both stages), `github` sources.

use crate::support;

use std::time::Duration;

use agent_operator::api::AgentDeployment;
use serde_json::{Value, json};
use support::{Harness, condition};

const TIMEOUT: Duration = Duration::from_secs(90);

/// What the verification of both stages checks: the graph of the
/// emulator's built-in agent server.
fn verify() -> Value {
    json!({"assistants": {"graphId": "agent"}})
}

/// A condition's `(status, reason, message)`.
fn cond(o: &AgentDeployment, type_: &str) -> Option<(String, String, String)> {
    condition(o, type_).map(|c| (c.status, c.reason, c.message))
}

/// Pushes a new commit to `main` of the test repository in the emulator;
/// returns its sha.
async fn push(h: &Harness) -> String {
    let pushed: Value = reqwest::Client::new()
        .post(format!("{}/_emulator/repos/push", h.emulator.base_url))
        .json(&json!({"repo_url": test_support::manifests::REPO_URL, "ref": "main"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    pushed["sha"].as_str().expect("the new commit").to_owned()
}

/// Asks `name` for a redeploy (a new revision of its ref, built at its
/// head).
async fn redeploy(h: &Harness, name: &str, at: &str) {
    support::merge_patch(
        &h.api,
        name,
        json!({"metadata": {"annotations": {"agentserver.dev/redeploy-requested-at": at}}}),
    )
    .await;
}

/// Staging (`github`, `main`, verified) and production promoting from it
/// with `soak` seconds, both Ready on the same verified commit; returns
/// that commit and production's deployment id.
async fn stages(h: &Harness, soak: u32) -> (String, String) {
    let mut staging = support::github_deployment("staging", "main");
    staging["spec"]["verify"] = verify();
    h.apply(staging).await;
    let mut production = support::github_deployment("production", "main");
    production["spec"]["verify"] = verify();
    production["spec"]["promotion"] = json!({"from": {"name": "staging"}, "soakSeconds": soak});
    h.apply(production).await;
    let status = support::wait_for(&h.api, "production", TIMEOUT, "production verified", |o| {
        let s = o.status.as_ref()?;
        let serving = s.serving.as_ref()?;
        (serving.verified && support::is_ready_now(o)).then(|| s.clone())
    })
    .await;
    (
        status.serving.unwrap().commit_sha.expect("commitSha"),
        status.deployment_id.unwrap(),
    )
}

/// The longest time between two requests about deployment `id` in the
/// emulator's log after `from_ms`, and the number of control plane
/// mutations (POST, PATCH, DELETE of `/v2/`) among them (the agent
/// server's verification calls are reads of another service).
async fn gaps(h: &Harness, id: &str, from_ms: u64) -> (Duration, usize) {
    let log = h.emulator.request_log().await;
    let times: Vec<u64> = log
        .entries
        .iter()
        .filter(|e| e.deployment_id.as_deref() == Some(id) && e.t_ms >= from_ms)
        .map(|e| e.t_ms)
        .collect();
    let mutations = log
        .entries
        .iter()
        .filter(|e| e.deployment_id.as_deref() == Some(id) && e.t_ms >= from_ms)
        .filter(|e| e.route.contains(" /v2/") && !e.route.starts_with("GET"))
        .count();
    let now_ms = log.entries.last().map_or(from_ms, |e| e.t_ms);
    let mut edges = vec![from_ms];
    edges.extend(times);
    edges.push(now_ms);
    let longest = edges.windows(2).map(|w| w[1].saturating_sub(w[0])).max();
    (Duration::from_millis(longest.unwrap_or(0)), mutations)
}

/// The emulator's clock now (ms since it started): the time of the last
/// request it logged.
async fn emulator_now(h: &Harness) -> u64 {
    h.emulator
        .request_log()
        .await
        .entries
        .last()
        .map_or(0, |e| e.t_ms)
}

/// A push lands between staging's verification and production's build:
/// production's revision is built from a commit nobody verified. Production
/// goes back at once to the revision that served before (one redeploy of
/// it, the same commit as before), reports `Stalled`/`PromotionCommitMismatch`
/// naming both commits throughout, and its status shows what serves.
#[tokio::test]
async fn a_push_during_a_github_promotion_goes_back_to_the_verified_commit_at_once() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("truth-push").start().await;
    let (c1, id) = stages(&h, 3).await;

    // Staging verifies c2; during production's soak, c3 is pushed.
    let c2 = push(&h).await;
    redeploy(&h, "staging", "2026-11-29T05:00:00Z").await;
    support::wait_for(&h.api, "staging", TIMEOUT, "staging verified on c2", |o| {
        let s = o.status.as_ref()?.serving.clone()?;
        (s.verified && s.commit_sha.as_deref() == Some(c2.as_str())).then_some(())
    })
    .await;
    let c3 = push(&h).await;

    let stalled = support::wait_for(&h.api, "production", TIMEOUT, "the mismatch, undone", |o| {
        let (s, r, m) = cond(o, "Stalled")?;
        (s == "True" && r == "PromotionCommitMismatch" && m.contains("Went back")).then_some(m)
    })
    .await;
    assert!(stalled.contains(&c2) && stalled.contains(&c3), "{stalled}");
    // Production serves c1 again, verified, on a third revision.
    let obj = support::wait_for(&h.api, "production", TIMEOUT, "serving c1 again", |o| {
        let s = o.status.as_ref()?;
        let serving = s.serving.as_ref()?;
        (serving.commit_sha.as_deref() == Some(c1.as_str())
            && s.revision_status.as_deref() == Some("DEPLOYED")
            && s.latest_revision_id.as_deref() == Some(serving.revision_id.as_str()))
        .then(|| o.clone())
    })
    .await;
    let status = obj.status.clone().unwrap();
    let (stalled, reason, _) = cond(&obj, "Stalled").unwrap();
    assert_eq!(
        (stalled.as_str(), reason.as_str()),
        ("True", "PromotionCommitMismatch")
    );
    let promoted = cond(&obj, "Promoted").unwrap();
    assert_eq!(promoted.1, "PromotionCommitMismatch");
    // Three revisions: c1, the one built from c3 (never serving: the
    // emulator skips a revision still in progress when a newer one
    // starts, or it was replaced by the redeploy), the redeploy of c1.
    let revisions = h.revisions(&id).await;
    assert_eq!(revisions.len(), 3, "{revisions:?}");
    let commits: Vec<Option<&str>> = revisions
        .iter()
        .map(|r| {
            r.source_revision_config
                .as_ref()
                .and_then(|c| c.repo_commit_sha.as_deref())
        })
        .collect();
    assert!(commits.contains(&Some(c3.as_str())), "{commits:?}");
    let remote = h.cp.get_deployment(&id).await.unwrap();
    assert_eq!(
        remote.active_revision_id.as_deref(),
        status.serving.as_ref().map(|s| s.revision_id.as_str()),
        "the status shows what serves"
    );
    // Once undone, nothing more is sent but reads.
    let mark = emulator_now(&h).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let (_, mutations) = gaps(&h, &id, mark).await;
    assert_eq!(mutations, 0, "undone once, nothing more sent");
}

/// A broken release on staging (its verification fails) and a soak: the
/// production target keeps serving its verified revision, `Ready=True`
/// all along (the wait is in its `Promoted` condition, the soak's end as a
/// time), and keeps being read on its drift period with nothing sent.
#[tokio::test]
async fn a_target_serving_a_verified_revision_stays_ready_and_read_while_it_waits() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("truth-wait")
        .resync_seconds(2.0)
        .start()
        .await;
    let (_, id) = stages(&h, 0).await;
    // The next releases soak 600 s on production.
    support::merge_patch(
        &h.api,
        "production",
        json!({"spec": {"promotion": {"soakSeconds": 600}}}),
    )
    .await;

    // Staging's release breaks: its verification fails.
    support::merge_patch(
        &h.api,
        "staging",
        json!({"spec": {"verify": {"assistants": {"graphId": "no-such-graph"}}}}),
    )
    .await;
    let waiting = support::wait_for(&h.api, "production", TIMEOUT, "waiting, Ready", |o| {
        let promoted = cond(o, "Promoted")?;
        (promoted.0 == "False" && promoted.1 == "PromotionWaiting").then(|| o.clone())
    })
    .await;
    let ready = cond(&waiting, "Ready").unwrap();
    assert_eq!(ready.0, "True", "{ready:?}");
    assert!(cond(&waiting, "Stalled").is_none() && cond(&waiting, "Reconciling").is_none());
    // What Flux (kstatus) and Argo CD (the shipped Lua) read of it.
    let served = serde_json::to_value(&waiting).unwrap();
    let verdict = &crate::gitops_health::verdicts_of(
        &crate::gitops_health::health_bin(),
        "truth-wait-objects.json",
        &[&served],
    )[0];
    assert_eq!(
        (verdict["kstatus"].as_str(), verdict["argocd"].as_str()),
        (Some("Current"), Some("Healthy")),
        "{verdict}"
    );
    let mark = emulator_now(&h).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let (gap, mutations) = gaps(&h, &id, mark).await;
    println!("parked on an unverified source: longest gap {gap:?}, {mutations} mutations");
    assert!(
        gap <= Duration::from_millis(2_500 + 1_500),
        "longest gap {gap:?}"
    );
    assert_eq!(mutations, 0);

    // Staging fixed, its revision verified again: production soaks (600
    // s), still Ready, the end of the soak stated as a time.
    support::merge_patch(&h.api, "staging", json!({"spec": {"verify": verify()}})).await;
    let soaking = support::wait_for(&h.api, "production", TIMEOUT, "soaking", |o| {
        let promoted = cond(o, "Promoted")?;
        promoted.2.contains("soak").then(|| o.clone())
    })
    .await;
    let (_, _, message) = cond(&soaking, "Promoted").unwrap();
    assert!(message.contains("ends at 20"), "{message}");
    assert_eq!(cond(&soaking, "Ready").unwrap().0, "True");
    let mark = emulator_now(&h).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let (gap, mutations) = gaps(&h, &id, mark).await;
    println!("parked in a soak: longest gap {gap:?}, {mutations} mutations");
    assert!(
        gap <= Duration::from_millis(2_500 + 1_500),
        "longest gap {gap:?}"
    );
    assert_eq!(mutations, 0);
    let same = h.api.get("production").await.unwrap();
    assert_eq!(
        cond(&same, "Promoted").unwrap().2,
        message,
        "the soak's message does not count down"
    );
}
