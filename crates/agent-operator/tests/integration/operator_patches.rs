//! Item 4, minimal patches: a `buildOnPush` change alone updates the remote
//! without a revision; a `resourceSpec` change is sent merged with what the
//! remote has, so keys set outside survive. (A changed Secret value and
//! `status.secretsHash`: `operator_secrets.rs`.)

use crate::support;

use std::time::Duration;

use agent_operator::controlplane::types::{DeploymentPatch, SourceConfig};
use serde_json::json;
use support::{Harness, github_deployment, route, wait_for};

const TIMEOUT: Duration = Duration::from_secs(60);

/// Drift check period of [`resource_spec_is_sent_merged_with_keys_set_outside`]:
/// short, so that "no PATCH on later passes" is checked over later passes.
const RESYNC_SECONDS: f64 = 1.0;

#[tokio::test]
async fn build_on_push_alone_updates_the_remote_without_a_revision() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-patch-bop").start().await;
    let name = "bop-agent";
    let mut manifest = github_deployment(name, "main");
    h.apply(manifest.clone()).await;
    let status = h.wait_ready(name, TIMEOUT).await.status.unwrap();
    let id = status.deployment_id.clone().unwrap();
    let before = h.emulator.requests().await;

    manifest["spec"]["sourceConfig"]["buildOnPush"] = true.into();
    h.apply(manifest).await;
    let obj = wait_for(&h.api, name, TIMEOUT, "Ready on generation 2", |o| {
        (support::is_ready_now(o) && o.metadata.generation == Some(2)).then(|| o.clone())
    })
    .await;

    let remote = h.cp.get_deployment(&id).await.unwrap();
    assert_eq!(remote.source_config.build_on_push, Some(true));
    assert_eq!(h.revisions(&id).await.len(), 1, "no new revision");
    let after = h.emulator.requests().await;
    assert_eq!(after.count(route::PATCH), before.count(route::PATCH) + 1);
    assert_eq!(after.count(route::REDEPLOY), 0);
    assert_eq!(
        obj.status.unwrap().latest_revision_id,
        status.latest_revision_id,
        "still the first revision"
    );
    let patched = support::wait_for_event(&h.client, &h.ns, name, "Patched", TIMEOUT).await;
    let note = patched.note.unwrap_or_default();
    assert!(
        note.contains("source_config") && !note.contains("source_revision_config"),
        "{note}"
    );
}

#[tokio::test]
async fn resource_spec_is_sent_merged_with_keys_set_outside() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-patch-resources")
        .resync_seconds(RESYNC_SECONDS)
        .start()
        .await;
    let name = "sized-agent";
    let mut manifest = github_deployment(name, "main");
    manifest["spec"]["sourceConfig"]["resourceSpec"] = json!({"minScale": 1});
    h.apply(manifest.clone()).await;
    let status = h.wait_ready(name, TIMEOUT).await.status.unwrap();
    let id = status.deployment_id.clone().unwrap();
    assert_eq!(
        h.cp.get_deployment(&id)
            .await
            .unwrap()
            .source_config
            .resource_spec,
        Some(json!({"min_scale": 1}))
    );

    // Someone adds a key the spec does not mention (the service replaces the
    // whole object, so they send it merged too).
    h.cp.patch_deployment(
        &id,
        &DeploymentPatch {
            source_config: Some(SourceConfig {
                resource_spec: Some(json!({"min_scale": 1, "labels": {"team": "payments"}})),
                ..Default::default()
            }),
            ..Default::default()
        },
    )
    .await
    .unwrap();

    manifest["spec"]["sourceConfig"]["resourceSpec"] = json!({"minScale": 2});
    h.apply(manifest).await;
    wait_for(&h.api, name, TIMEOUT, "Ready on generation 2", |o| {
        (support::is_ready_now(o) && o.metadata.generation == Some(2)).then_some(())
    })
    .await;
    let remote = h.cp.get_deployment(&id).await.unwrap();
    assert_eq!(
        remote.source_config.resource_spec,
        Some(json!({"min_scale": 2, "labels": {"team": "payments"}})),
        "the spec's key changed, the outside key survived"
    );
    // The outside key is no drift: nothing is patched on later passes. The
    // positive control: three later passes did happen (the operator's count
    // of passes) and read the deployment (drift checks every second).
    let patches = h.emulator.requests().await.count(route::PATCH);
    let passes = h.deployment_passes().await;
    let reads = h.requests_about(&id).await;
    support::eventually(TIMEOUT, "three drift-check passes", || async {
        (h.deployment_passes().await >= passes + 3.0).then_some(())
    })
    .await;
    assert!(
        h.requests_about(&id).await >= reads + 3,
        "the later passes read the deployment"
    );
    assert_eq!(h.emulator.requests().await.count(route::PATCH), patches);
}
