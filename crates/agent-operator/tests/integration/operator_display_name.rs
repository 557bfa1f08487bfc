//! Issue 34, item 5: `spec.displayName`. The control plane does not take
//! `display_name` on create, so the PATCH that sets it follows the create;
//! a change is one PATCH without a revision; removing it from the spec
//! leaves the remote value (it cannot be cleared).

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::{Harness, github_deployment, route};

const TIMEOUT: Duration = Duration::from_secs(60);

/// Waits until `name` is Ready on `generation` with `status.displayName`
/// `display`; returns its deployment id.
async fn ready_named(h: &Harness, name: &str, generation: i64, display: &str) -> String {
    support::wait_for(&h.api, name, TIMEOUT, "Ready with the display name", |o| {
        let s = o.status.as_ref()?;
        (support::is_ready_now(o)
            && o.metadata.generation == Some(generation)
            && s.display_name.as_deref() == Some(display))
        .then(|| s.deployment_id.clone())
        .flatten()
    })
    .await
}

#[tokio::test]
async fn display_name_follows_the_create_changes_in_place_and_is_never_cleared() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-display-name").start().await;
    let name = "named-agent";
    let mut manifest = github_deployment(name, "main");
    manifest["spec"]["displayName"] = "Support agent".into();
    h.apply(manifest).await;
    let id = ready_named(&h, name, 1, "Support agent").await;
    let remote = h.cp.get_deployment(&id).await.unwrap();
    assert_eq!(remote.display_name.as_deref(), Some("Support agent"));
    let counts = h.emulator.requests().await;
    assert_eq!(counts.count(route::CREATE), 1, "{counts:?}");
    assert_eq!(
        counts.count(route::PATCH),
        1,
        "one PATCH after the create: {counts:?}"
    );
    assert_eq!(
        h.revisions(&id).await.len(),
        1,
        "the PATCH makes no revision"
    );

    support::merge_patch(
        &h.api,
        name,
        json!({"spec": {"displayName": "Billing agent"}}),
    )
    .await;
    ready_named(&h, name, 2, "Billing agent").await;
    let remote = h.cp.get_deployment(&id).await.unwrap();
    assert_eq!(remote.display_name.as_deref(), Some("Billing agent"));
    assert_eq!(h.emulator.requests().await.count(route::PATCH), 2);
    assert_eq!(h.revisions(&id).await.len(), 1);

    // Removed from the spec: the remote keeps it, nothing is sent.
    support::merge_patch(&h.api, name, json!({"spec": {"displayName": null}})).await;
    ready_named(&h, name, 3, "Billing agent").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let remote = h.cp.get_deployment(&id).await.unwrap();
    assert_eq!(remote.display_name.as_deref(), Some("Billing agent"));
    let counts = h.emulator.requests().await;
    assert_eq!(counts.count(route::PATCH), 2, "{counts:?}");
    assert_eq!(counts.count(route::CREATE), 1, "{counts:?}");
    assert_eq!(h.revisions(&id).await.len(), 1);
}

/// A display name changed outside (in the UI) is set back by the drift
/// check, with one PATCH and no revision.
#[tokio::test]
async fn display_name_changed_outside_is_set_back() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-display-drift")
        .resync_seconds(1.0)
        .start()
        .await;
    let name = "ui-agent";
    let mut manifest = github_deployment(name, "main");
    manifest["spec"]["displayName"] = "Support agent".into();
    h.apply(manifest).await;
    let id = ready_named(&h, name, 1, "Support agent").await;
    h.cp.patch_deployment(
        &id,
        &agent_operator::controlplane::types::DeploymentPatch {
            display_name: Some("Renamed in the UI".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    support::wait_for_event(&h.client, &h.ns, name, "DriftCorrected", TIMEOUT).await;
    let remote = h.cp.get_deployment(&id).await.unwrap();
    assert_eq!(remote.display_name.as_deref(), Some("Support agent"));
    let counts = h.emulator.requests().await;
    assert_eq!(
        counts.count(route::PATCH),
        3,
        "the operator's first, the outside one, the correction: {counts:?}"
    );
    assert_eq!(h.revisions(&id).await.len(), 1);
}
