//! Item 5, redeploy on request: every new value of the annotation
//! `agentserver.dev/redeploy-requested-at` makes exactly one new revision
//! (`POST /v2/deployments/{id}/revisions`); the same value again makes none.

use crate::support;

use std::time::Duration;

use agent_operator::api::deployment::REDEPLOY_ANNOTATION;
use serde_json::json;
use support::{Harness, github_deployment, merge_patch, route, wait_for};

const TIMEOUT: Duration = Duration::from_secs(60);

async fn request_redeploy(h: &Harness, name: &str, at: &str) {
    merge_patch(
        &h.api,
        name,
        json!({"metadata": {"annotations": {REDEPLOY_ANNOTATION: at}}}),
    )
    .await;
}

/// Waits until the operator acted on `at` and the new revision is Ready;
/// returns the latest revision id.
async fn wait_redeployed(h: &Harness, name: &str, at: &str, previous: &str) -> String {
    wait_for(&h.api, name, TIMEOUT, "Ready after the redeploy", |o| {
        let s = o.status.as_ref()?;
        let latest = s.latest_revision_id.clone()?;
        (support::is_ready_now(o)
            && s.last_redeploy_requested_at.as_deref() == Some(at)
            && latest != previous)
            .then_some(latest)
    })
    .await
}

#[tokio::test]
async fn each_new_annotation_value_redeploys_once() {
    test_support::skip_without!(Envtest);
    // Fast resync: passes that could repeat a redeploy happen often.
    let h = Harness::quick("op-redeploy")
        .resync_seconds(0.5)
        .start()
        .await;
    let name = "redeployed-agent";
    h.apply(github_deployment(name, "main")).await;
    let status = h.wait_ready(name, TIMEOUT).await.status.unwrap();
    let id = status.deployment_id.clone().unwrap();
    let first = status.latest_revision_id.clone().unwrap();
    assert_eq!(h.emulator.requests().await.count(route::REDEPLOY), 0);

    // A first value: one redeploy, one new revision.
    request_redeploy(&h, name, "2025-06-01T10:00:00Z").await;
    let second = wait_redeployed(&h, name, "2025-06-01T10:00:00Z", &first).await;
    assert_eq!(h.emulator.requests().await.count(route::REDEPLOY), 1);
    assert_eq!(h.revisions(&id).await.len(), 2);
    let event = support::wait_for_event(&h.client, &h.ns, name, "Redeployed", TIMEOUT).await;
    assert!(event.note.unwrap_or_default().contains(&second));

    // The same value again (and other edits of the object): nothing.
    request_redeploy(&h, name, "2025-06-01T10:00:00Z").await;
    merge_patch(
        &h.api,
        name,
        json!({"metadata": {"labels": {"team": "support"}}}),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        h.emulator.requests().await.count(route::REDEPLOY),
        1,
        "the same value is not acted on twice"
    );
    assert_eq!(h.revisions(&id).await.len(), 2);
    assert_eq!(
        h.api
            .get(name)
            .await
            .unwrap()
            .status
            .unwrap()
            .latest_revision_id
            .as_deref(),
        Some(second.as_str())
    );

    // A new value: exactly one more.
    request_redeploy(&h, name, "2025-06-02T08:30:00Z").await;
    wait_redeployed(&h, name, "2025-06-02T08:30:00Z", &second).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(h.emulator.requests().await.count(route::REDEPLOY), 2);
    assert_eq!(h.revisions(&id).await.len(), 3);
    assert_eq!(
        h.emulator.requests().await.count(route::PATCH),
        0,
        "a redeploy patches nothing"
    );
}
