//! Crash safety of a fleet (issue "Reliability", item 1): the operator is
//! killed with SIGKILL at random moments while it creates, then deletes, a
//! fleet of AgentDeployments. Nothing may be duplicated, stranded
//! (`NameConflict` / `CreateOutcomeUnknown` against its own deployment) or
//! orphaned. A restore without status (Velero's default for custom
//! resources) keeps its deployment through the id annotation.
//!
//! Short version in the test command (30 resources, 10 kills during creates,
//! 5 during deletes); `FAULT_FULL=1` runs the full version (100 resources, 25
//! and 20 kills; `make faults`).

use crate::{common, support};

use std::collections::HashMap;
use std::time::Duration;

use agent_operator::api::AgentDeployment;
use agent_operator::api::deployment::DEPLOYMENT_ID_ANNOTATION;
use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;
use support::{Budget, FAST_POLLING, Harness, OperatorProcess, github_deployment, is_stalled_with};

const TIMEOUT: Duration = Duration::from_secs(180);

fn full() -> bool {
    std::env::var_os("FAULT_FULL").is_some()
}

async fn harness(test: &str) -> Harness {
    let mut h = Harness::builder(test)
        .emulator(&["--step-seconds", "0.2", "--delete-seconds", "0.5"])
        .without_operator()
        .start()
        .await;
    h.budget = Budget::fleet();
    h
}

/// Starts an operator, lets it run for a random 0.2–1.5 s, and SIGKILLs it;
/// `kills` times.
async fn kill_repeatedly(h: &Harness, test: &str, kills: usize) {
    let env = common::shared_env();
    for _ in 0..kills {
        let mut op = OperatorProcess::start(test, env.kubeconfig_path(), &h.ns, &FAST_POLLING);
        let ms = rand::random_range(200..1500);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        op.kill().await;
    }
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
    let h = harness(test).await;
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

    kill_repeatedly(&h, test, create_kills).await;
    let env = common::shared_env();
    let _operator = OperatorProcess::start(test, env.kubeconfig_path(), &h.ns, &FAST_POLLING);
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
    println!(
        "crash fleet: {count} resources, {create_kills} SIGKILLs during creates: 0 duplicates, 0 stranded, {count} Ready"
    );

    // Deletes, with kills in between.
    drop(_operator);
    for name in &names {
        h.api.delete(name, &DeleteParams::default()).await.unwrap();
    }
    kill_repeatedly(&h, test, delete_kills).await;
    let _operator = OperatorProcess::start(test, env.kubeconfig_path(), &h.ns, &FAST_POLLING);
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
    println!("crash fleet: {delete_kills} SIGKILLs during deletes: 0 remote deployments left");
}

#[tokio::test]
async fn a_restore_without_status_keeps_its_deployment() {
    test_support::skip_without!(Envtest);
    let test = "fault-restore";
    let h = harness(test).await;
    let env = common::shared_env();
    let name = "restored-agent";
    let mut operator = OperatorProcess::start(test, env.kubeconfig_path(), &h.ns, &FAST_POLLING);
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

    let _operator = OperatorProcess::start(test, env.kubeconfig_path(), &h.ns, &FAST_POLLING);
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
