//! Issue "The rest of the deployment API", items 5, 9 and 10: the progress
//! deadline, the revision history in status, and the service statuses
//! `UNUSED` and `AWAITING_FINAL_DELETE`.

use crate::support;

use std::time::Duration;

use agent_operator::api::deployment::REDEPLOY_ANNOTATION;
use serde_json::json;
use support::{Harness, condition, github_deployment, merge_patch, route, wait_for};

const TIMEOUT: Duration = Duration::from_secs(60);

/// A revision still building past `spec.progressDeadlineSeconds` gives
/// `Stalled`/`ProgressDeadlineExceeded` naming it and its status (one
/// Warning event, no "failed revision"); polling goes on, slower, and a
/// later `DEPLOYED` makes it Ready.
#[tokio::test]
async fn a_revision_past_its_progress_deadline_stalls_and_recovers() {
    test_support::skip_without!(Envtest);
    // Each revision step takes 60 s: the first revision stays QUEUED or
    // BUILDING long past a 10 s deadline.
    let h = Harness::quick("op-deadline")
        .step_seconds(60.0)
        .operator_flags(&["--max-poll-interval-seconds", "1"])
        .start()
        .await;
    let name = "slow-agent";
    let mut manifest = github_deployment(name, "main");
    manifest["spec"]["progressDeadlineSeconds"] = json!(10);
    h.apply(manifest).await;
    let stalled = h
        .wait_stalled(name, "ProgressDeadlineExceeded", TIMEOUT)
        .await;
    let status = stalled.status.clone().unwrap();
    let rid = status.latest_revision_id.clone().unwrap();
    let message = condition(&stalled, "Stalled").unwrap().message;
    assert!(
        message.contains(&rid) && message.contains("progressDeadlineSeconds"),
        "{message}"
    );
    assert!(
        ["QUEUED", "BUILDING", "AWAITING_BUILD"]
            .iter()
            .any(|s| message.contains(s)),
        "the message names the revision's status: {message}"
    );
    assert_eq!(
        status.last_failed_revision_id, None,
        "not a failed revision"
    );
    let reasons = support::event_reasons(&h.client, &h.ns, name).await;
    assert_eq!(
        reasons
            .iter()
            .filter(|r| *r == "ProgressDeadlineExceeded")
            .count(),
        1,
        "{reasons:?}"
    );

    // Slower polling, but polling: over 8 s at most a few revision reads.
    let id = status.deployment_id.clone().unwrap();
    let before = h.emulator.requests().await.count(route::GET_REVISION);
    tokio::time::sleep(Duration::from_secs(8)).await;
    let polls = h.emulator.requests().await.count(route::GET_REVISION) - before;
    assert!(
        (1..=3).contains(&polls),
        "{polls} revision reads in 8 s (every 4 s)"
    );

    h.emulator
        .force_revision_status(&id, &rid, "DEPLOYED")
        .await;
    let ready = h.wait_ready(name, TIMEOUT).await;
    let history = ready.status.unwrap().revisions;
    assert_eq!(history.len(), 1, "{history:?}");
    assert_eq!(history[0].id, rid);
    assert_eq!(history[0].status, "DEPLOYED");
    assert!(history[0].finished_at.is_some(), "{history:?}");
}

/// `status.revisions` lists the revisions followed, newest first, with their
/// ref, times and status; `activeRevisionId` is the one serving.
#[tokio::test]
async fn status_keeps_a_bounded_revision_history_newest_first() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-history").start().await;
    let name = "history-agent";
    h.apply(github_deployment(name, "main")).await;
    let first = h.wait_ready(name, TIMEOUT).await.status.unwrap();
    merge_patch(
        &h.api,
        name,
        json!({"spec": {"sourceRevisionConfig": {"repoRef": "release-2"}}}),
    )
    .await;
    let second = wait_for(&h.api, name, TIMEOUT, "Ready on generation 2", |o| {
        (support::is_ready_now(o) && o.metadata.generation == Some(2)).then(|| o.clone())
    })
    .await
    .status
    .unwrap();
    merge_patch(
        &h.api,
        name,
        json!({"metadata": {"annotations": {REDEPLOY_ANNOTATION: "2026-01-01T00:00:00Z"}}}),
    )
    .await;
    let third = wait_for(&h.api, name, TIMEOUT, "the redeploy Ready", |o| {
        let s = o.status.as_ref()?;
        (support::is_ready_now(o)
            && s.latest_revision_id != second.latest_revision_id
            && s.revisions.len() == 3)
            .then(|| s.clone())
    })
    .await;
    let ids: Vec<_> = third.revisions.iter().map(|r| r.id.clone()).collect();
    assert_eq!(
        ids,
        vec![
            third.latest_revision_id.clone().unwrap(),
            second.latest_revision_id.clone().unwrap(),
            first.latest_revision_id.clone().unwrap(),
        ],
        "newest first"
    );
    assert_eq!(third.revisions[1].repo_ref.as_deref(), Some("release-2"));
    assert_eq!(third.revisions[2].repo_ref.as_deref(), Some("main"));
    assert!(
        third
            .revisions
            .iter()
            .all(|r| r.status == "DEPLOYED" && r.created_at.is_some() && r.finished_at.is_some())
    );
    assert_eq!(third.active_revision_id, third.latest_revision_id);
}

/// A deployment shown `UNUSED` gets one Warning event and a note in the
/// Ready message; its later removal by the service is named as such, and the
/// resource follows `remoteDeletionPolicy` (Recreate: a new deployment;
/// Stall: Stalled). `AWAITING_FINAL_DELETE` is a deployment being deleted:
/// no PATCH, no create while it shows.
#[tokio::test]
async fn unused_and_awaiting_final_delete_are_reported() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-unused")
        .resync_seconds(2.0)
        .start()
        .await;
    let (recreate, stall, final_delete) = ("unused-recreate", "unused-stall", "final-delete");
    h.apply(github_deployment(recreate, "main")).await;
    let mut m = github_deployment(stall, "main");
    m["spec"]["remoteDeletionPolicy"] = json!("Stall");
    h.apply(m).await;
    h.apply(github_deployment(final_delete, "main")).await;
    let mut ids = Vec::new();
    for name in [recreate, stall, final_delete] {
        let s = h.wait_ready(name, TIMEOUT).await.status.unwrap();
        ids.push(s.deployment_id.unwrap());
    }

    for id in &ids[..2] {
        h.emulator.force_deployment_status(id, "UNUSED").await;
    }
    for name in [recreate, stall] {
        let obj = wait_for(&h.api, name, TIMEOUT, "the UNUSED note", |o| {
            let ready = condition(o, "Ready")?;
            (ready.status == "True" && ready.message.contains("UNUSED")).then(|| o.clone())
        })
        .await;
        assert_eq!(
            obj.status.unwrap().deployment_status.as_deref(),
            Some("UNUSED")
        );
        support::wait_for_event(&h.client, &h.ns, name, "DeploymentUnused", TIMEOUT).await;
    }

    // The service removes them.
    for id in &ids[..2] {
        h.cp.delete_deployment(id).await.unwrap();
    }
    let stalled = h.wait_stalled(stall, "RemoteDeleted", TIMEOUT).await;
    let message = condition(&stalled, "Stalled").unwrap().message;
    assert!(message.contains("after it was shown UNUSED"), "{message}");
    let event = support::wait_for_event(&h.client, &h.ns, recreate, "RemoteDeleted", TIMEOUT).await;
    let note = event.note.unwrap_or_default();
    assert!(
        note.contains("after it was shown UNUSED") && note.contains("creating it again"),
        "{note}"
    );
    let recreated = wait_for(&h.api, recreate, TIMEOUT, "a new deployment", |o| {
        let s = o.status.as_ref()?;
        (support::is_ready_now(o) && s.deployment_id.as_deref() != Some(ids[0].as_str()))
            .then(|| s.clone())
    })
    .await;
    assert_ne!(recreated.deployment_id.as_deref(), Some(ids[1].as_str()));

    // AWAITING_FINAL_DELETE: being deleted, reported, nothing sent.
    let before = h.emulator.requests().await;
    h.emulator
        .force_deployment_status(&ids[2], "AWAITING_FINAL_DELETE")
        .await;
    wait_for(&h.api, final_delete, TIMEOUT, "being deleted", |o| {
        let ready = condition(o, "Ready")?;
        (ready.reason == "RemoteDeleted" && ready.message.contains("being deleted")).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = h.emulator.requests().await;
    assert_eq!(after.count(route::PATCH), before.count(route::PATCH));
    assert_eq!(after.count(route::CREATE), before.count(route::CREATE));
}
