//! Crash safety of a fleet (issue "Reliability", item 1): the operator is
//! killed with SIGKILL at random moments while it creates, then deletes, a
//! fleet of AgentDeployments. Nothing may be duplicated, stranded
//! (`NameConflict` / `CreateOutcomeUnknown` against its own deployment) or
//! orphaned. A restore without status (Velero's default for custom
//! resources) keeps its deployment through the id annotation.
//!
//! While the operators are killed, the emulator stores 30 % of the POSTs
//! (and DELETEs) and then leaves their answers hanging, so some kills come
//! while a stored create is in flight: the test counts those kills and the
//! resources that recorded `CreateRecovered`, and fails unless some did.
//!
//! Short version in the test command (30 resources, 10 kills during creates,
//! 5 during deletes); `FAULT_FULL=1` runs the full version (100 resources, 25
//! and 20 kills; `make faults`).

use crate::support;

use std::collections::HashMap;
use std::time::Duration;

use agent_operator::api::AgentDeployment;
use agent_operator::api::deployment::DEPLOYMENT_ID_ANNOTATION;
use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;
use support::{FAST_POLLING, Harness, github_deployment, is_stalled_with, route};

const TIMEOUT: Duration = Duration::from_secs(180);

fn full() -> bool {
    std::env::var_os("FAULT_FULL").is_some()
}

/// The emulator's commit fault of the kill phases: this share of the POSTs
/// (and PATCHes and DELETEs) is stored, then its answer hangs for
/// [`COMMIT_HANG_MS`], longer than an operator lives here (at most 1.5 s),
/// so the kill always comes while the committed request is in flight and
/// the next operator must find out from the control plane what happened.
const COMMIT_HANG_RATE: f64 = 0.3;
/// How long a committed request hangs before its 504.
const COMMIT_HANG_MS: u64 = 5_000;

/// Requests of `route` the emulator committed and then left hanging.
async fn committed_then_hung(h: &Harness, route: &str) -> usize {
    h.emulator
        .request_log()
        .await
        .entries
        .iter()
        .filter(|r| r.route == route && r.status.ends_with(", then hung"))
        .count()
}

/// Starts an operator, lets it run for a random 0.2–1.5 s, and SIGKILLs it;
/// `kills` times, with the commit-then-hang fault on for `route`. Returns
/// how many of the kills came while a request of `route` the emulator had
/// committed was in flight (its answer still hanging).
async fn kill_repeatedly(h: &Harness, kills: usize, route: &str) -> usize {
    h.emulator
        .set_faults(json!({"commit_hang_rate": COMMIT_HANG_RATE, "hang_ms": COMMIT_HANG_MS}))
        .await;
    let mut in_flight = 0;
    for _ in 0..kills {
        let before = committed_then_hung(h, route).await;
        let mut op = h.start_operator(&FAST_POLLING);
        let ms = rand::random_range(200..1500);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        op.kill().await;
        if committed_then_hung(h, route).await > before {
            in_flight += 1;
        }
    }
    h.emulator.set_faults(json!({})).await;
    in_flight
}

/// AgentDeployments of the namespace with a `CreateRecovered` Event: their
/// create was interrupted and the next pass found the deployment by name
/// (or by the id annotation) instead of creating another.
async fn recovered_creates(h: &Harness) -> usize {
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(h.client.clone(), &h.ns);
    let mut objects: Vec<String> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("CreateRecovered"))
        .filter_map(|e| e.regarding.and_then(|r| r.name))
        .collect();
    objects.sort();
    objects.dedup();
    objects.len()
}

/// Waits until every AgentDeployment of the namespace satisfies `done`.
async fn wait_all(h: &Harness, what: &str, done: impl Fn(&[AgentDeployment]) -> bool) {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let list = h.api.list(&ListParams::default()).await.unwrap().items;
        if done(&list) {
            return;
        }
        let stuck: Vec<String> = list
            .iter()
            .filter(|o| !support::is_ready_now(o))
            .take(5)
            .map(|o| format!("{}: {:?}", o.name_any(), o.status))
            .collect();
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}; not done: {stuck:#?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test]
async fn sigkills_during_creates_and_deletes_duplicate_strand_and_orphan_nothing() {
    test_support::skip_without!(Envtest);
    let test = "fault-crash-fleet";
    let h = Harness::fleet(test).without_operator().start().await;
    let (count, create_kills, delete_kills) = if full() { (100, 25, 20) } else { (30, 10, 5) };
    let names: Vec<String> = (0..count).map(|i| format!("fleet-{i:03}")).collect();
    futures::stream::iter(names.iter())
        .for_each_concurrent(16, |name| {
            let h = &h;
            async move {
                h.apply(github_deployment(name, "main")).await;
            }
        })
        .await;

    let create_kills_in_flight = kill_repeatedly(&h, create_kills, route::CREATE).await;
    let hung_creates = committed_then_hung(&h, route::CREATE).await;
    let _operator = h.start_operator(&FAST_POLLING);
    wait_all(&h, "all Ready", |list| {
        list.len() == count && list.iter().all(support::is_ready_now)
    })
    .await;

    let list = h.api.list(&ListParams::default()).await.unwrap().items;
    let stranded: Vec<String> = list
        .iter()
        .filter(|o| {
            is_stalled_with(o, "NameConflict") || is_stalled_with(o, "CreateOutcomeUnknown")
        })
        .map(|o| o.name_any())
        .collect();
    assert!(stranded.is_empty(), "stranded: {stranded:?}");
    let remote = h.remote_deployments().await;
    let mut by_name: HashMap<&str, usize> = HashMap::new();
    for d in &remote {
        *by_name.entry(d.name.as_str()).or_default() += 1;
    }
    let duplicates: Vec<_> = by_name.iter().filter(|(_, n)| **n > 1).collect();
    assert!(duplicates.is_empty(), "duplicates: {duplicates:?}");
    assert_eq!(remote.len(), count, "one remote deployment per resource");
    for o in &list {
        let id = o.status.as_ref().and_then(|s| s.deployment_id.clone());
        assert!(id.is_some(), "{} has no deployment id", o.name_any());
        assert_eq!(
            o.annotations().get(DEPLOYMENT_ID_ANNOTATION),
            id.as_ref(),
            "{}: the id annotation matches status",
            o.name_any()
        );
    }
    // The path this test is for: creates the control plane stored whose
    // answer the operator never saw (it was killed while waiting), resolved
    // by the next operator (`CreateRecovered`) without a second create.
    let recovered = recovered_creates(&h).await;
    println!(
        "crash fleet: {count} resources, {create_kills} SIGKILLs during creates, {create_kills_in_flight} of them with a stored create in flight ({hung_creates} creates stored and their answers lost); {recovered} CreateRecovered; 0 duplicates, 0 stranded, {count} Ready"
    );
    assert!(
        create_kills_in_flight > 0 && hung_creates > 0,
        "no kill came while a stored create was in flight: the test proved nothing about it"
    );
    assert!(
        recovered >= 1,
        "{hung_creates} stored creates lost their answer, but no resource recorded CreateRecovered"
    );

    // Deletes, with kills in between.
    drop(_operator);
    for name in &names {
        h.api.delete(name, &DeleteParams::default()).await.unwrap();
    }
    let delete_kills_in_flight = kill_repeatedly(&h, delete_kills, route::DELETE).await;
    let _operator = h.start_operator(&FAST_POLLING);
    wait_all(&h, "all deleted", |list| list.is_empty()).await;
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let left = h.remote_deployments().await.len();
        if left == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{left} remote deployments orphaned"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!(
        "crash fleet: {delete_kills} SIGKILLs during deletes, {delete_kills_in_flight} of them with a stored DELETE in flight: 0 remote deployments left"
    );
}

#[tokio::test]
async fn a_restore_without_status_keeps_its_deployment() {
    test_support::skip_without!(Envtest);
    let test = "fault-restore";
    let h = Harness::fleet(test).without_operator().start().await;
    let name = "restored-agent";
    let mut operator = h.start_operator(&FAST_POLLING);
    h.apply(github_deployment(name, "main")).await;
    let id = h
        .wait_ready(name, Duration::from_secs(60))
        .await
        .status
        .unwrap()
        .deployment_id
        .unwrap();
    operator.kill().await;

    // What a restore without status leaves: the object and its metadata.
    h.api
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": null})),
        )
        .await
        .unwrap();
    // (The CRD defaults an absent status to `{observedGeneration: 0}`.)
    let restored = h.api.get(name).await.unwrap().status.unwrap_or_default();
    assert!(restored.deployment_id.is_none() && restored.conditions.is_empty());

    let _operator = h.start_operator(&FAST_POLLING);
    let obj = h.wait_ready(name, Duration::from_secs(60)).await;
    assert_eq!(
        obj.status.unwrap().deployment_id.as_deref(),
        Some(id.as_str()),
        "the restored resource found its deployment"
    );
    assert_eq!(
        h.remote_deployments().await.len(),
        1,
        "nothing created again"
    );
}
