//! Item 7, adoption and name conflicts: `spec.deploymentId` adopts a
//! deployment made outside and converges it to the spec; without it, a remote
//! name already in use stalls the resource (`NameConflict`) and the operator
//! never touches that deployment, not even when the resource is deleted.

use crate::support;

use std::time::Duration;

use agent_operator::api::conditions::READY;
use kube::api::DeleteParams;
use support::{Harness, condition, github_create_body, github_deployment, route};

const TIMEOUT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn deployment_named_in_spec_is_adopted_and_converged() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-adopt").start().await;
    let legacy =
        h.cp.create_deployment(&github_create_body("legacy-agent", "old-branch"))
            .await
            .unwrap();

    let name = "adopter";
    let mut manifest = github_deployment(name, "main");
    manifest["spec"]["name"] = "legacy-agent".into();
    manifest["spec"]["deploymentId"] = legacy.id.clone().into();
    h.apply(manifest).await;

    let event = support::wait_for_event(&h.client, &h.ns, name, "Adopted", TIMEOUT).await;
    assert!(event.note.unwrap_or_default().contains(&legacy.id));
    let obj = support::wait_for(&h.api, name, TIMEOUT, "Ready on a new revision", |o| {
        let s = o.status.as_ref()?;
        (support::is_ready_now(o) && s.latest_revision_id != legacy.latest_revision_id)
            .then(|| o.clone())
    })
    .await;
    let status = obj.status.unwrap();
    assert_eq!(status.deployment_id.as_deref(), Some(legacy.id.as_str()));
    let remote = h.cp.get_deployment(&legacy.id).await.unwrap();
    assert_eq!(
        agent_operator::plan::shapes::configured_ref(&remote),
        Some("main"),
        "converged to the spec"
    );
    assert_eq!(h.revisions(&legacy.id).await.len(), 2);
    let all = h.remote_deployments().await;
    assert_eq!(all.len(), 1, "adopted, not created: {all:?}");
    assert_eq!(
        h.emulator.requests().await.count(route::CREATE),
        1,
        "only the outside create"
    );
}

#[tokio::test]
async fn name_in_use_stalls_and_the_remote_is_left_alone() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-name-conflict").start().await;
    let theirs =
        h.cp.create_deployment(&github_create_body("taken-name", "main"))
            .await
            .unwrap();

    let name = "taken-name";
    h.apply(github_deployment(name, "release-2")).await;
    let obj = h.wait_stalled(name, "NameConflict", TIMEOUT).await;
    let ready = condition(&obj, READY).unwrap();
    assert_eq!(ready.status, "False");
    assert!(
        ready.message.contains(&theirs.id) && ready.message.contains("spec.deploymentId"),
        "the message names the deployment and the way out: {}",
        ready.message
    );
    assert_eq!(obj.status.unwrap().deployment_id, None);
    support::wait_for_event(&h.client, &h.ns, name, "NameConflict", TIMEOUT).await;

    // Deleting the resource does not delete their deployment.
    h.api.delete(name, &DeleteParams::default()).await.unwrap();
    support::wait_until_gone(&h.api, name, TIMEOUT).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let remote = h.cp.get_deployment(&theirs.id).await.unwrap();
    assert_eq!(remote.status.as_deref(), Some("READY"));
    assert_eq!(
        agent_operator::plan::shapes::configured_ref(&remote),
        Some("main")
    );
    let counts = h.emulator.requests().await;
    assert_eq!(counts.count(route::PATCH), 0, "{counts:?}");
    assert_eq!(counts.count(route::DELETE), 0, "{counts:?}");
    assert_eq!(counts.count(route::REDEPLOY), 0, "{counts:?}");
    assert_eq!(counts.count(route::CREATE), 1, "only theirs: {counts:?}");
    assert_eq!(h.revisions(&theirs.id).await.len(), 1);
}

#[tokio::test]
async fn name_conflict_is_resolved_by_setting_the_deployment_id() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-conflict-adopt").start().await;
    let theirs =
        h.cp.create_deployment(&github_create_body("shared-name", "main"))
            .await
            .unwrap();
    let name = "shared-name";
    h.apply(github_deployment(name, "release-2")).await;
    h.wait_stalled(name, "NameConflict", TIMEOUT).await;

    // The way out the message names: adopt it.
    support::merge_patch(
        &h.api,
        name,
        serde_json::json!({"spec": {"deploymentId": theirs.id}}),
    )
    .await;
    let obj = h.wait_ready(name, TIMEOUT).await;
    assert_eq!(obj.metadata.generation, Some(2));
    let status = obj.status.unwrap();
    assert_eq!(status.deployment_id.as_deref(), Some(theirs.id.as_str()));
    // No longer stalled: the condition is gone (absent reads as False).
    assert_eq!(condition_status(&h, name, "Stalled").await, "");
    let remote = h.cp.get_deployment(&theirs.id).await.unwrap();
    assert_eq!(
        agent_operator::plan::shapes::configured_ref(&remote),
        Some("release-2")
    );
    assert_eq!(h.remote_deployments().await.len(), 1);
    support::wait_for_event(&h.client, &h.ns, name, "Adopted", TIMEOUT).await;
}

async fn condition_status(h: &Harness, name: &str, type_: &str) -> String {
    condition(&h.api.get(name).await.unwrap(), type_)
        .map(|c| c.status)
        .unwrap_or_default()
}

/// Adoption that tells the truth (issue "Day two in GitOps", item 3): a
/// deployment of another repository and type, adopted by id, is never
/// reported as a match: `Stalled`/`AdoptionMismatch` names each field with
/// both values, nothing is sent or recorded, and making the spec match (still
/// allowed: nothing was adopted) adopts it.
#[tokio::test]
async fn a_remote_that_differs_in_immutable_fields_is_not_adopted() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-adopt-mismatch").start().await;
    let theirs =
        h.cp.create_deployment(&github_create_body("support-agent", "main"))
            .await
            .unwrap();
    let name = "mismatched";
    let mut manifest = github_deployment(name, "main");
    manifest["spec"]["deploymentId"] = theirs.id.clone().into();
    manifest["spec"]["sourceConfig"]["repoUrl"] = "https://github.com/acme/echo-agent".into();
    manifest["spec"]["sourceConfig"]["deploymentType"] = "prod".into();
    let mark = h.emulator.request_mark().await;
    h.apply(manifest).await;

    let obj = h.wait_stalled(name, "AdoptionMismatch", TIMEOUT).await;
    let message = condition(&obj, READY).unwrap().message;
    for part in [
        theirs.id.as_str(),
        "sourceConfig.repoUrl: spec \"https://github.com/acme/echo-agent\", remote \"https://github.com/acme/support-agent\"",
        "sourceConfig.deploymentType: spec \"prod\", remote \"dev\"",
    ] {
        assert!(message.contains(part), "{part:?} in {message}");
    }
    assert_eq!(
        obj.status.as_ref().unwrap().deployment_id,
        None,
        "nothing recorded"
    );
    let sent = h.emulator.requests_since(mark).await;
    assert!(
        sent.iter().all(|r| r.route.starts_with("GET ")),
        "reads only: {sent:?}"
    );

    // The spec made to match: adopted.
    support::merge_patch(
        &h.api,
        name,
        serde_json::json!({"spec": {"sourceConfig": {
            "repoUrl": "https://github.com/acme/support-agent", "deploymentType": "dev"}}}),
    )
    .await;
    support::wait_for_event(&h.client, &h.ns, name, "Adopted", TIMEOUT).await;
    let obj = h.wait_ready(name, TIMEOUT).await;
    assert_eq!(
        obj.status.unwrap().deployment_id.as_deref(),
        Some(theirs.id.as_str())
    );
    assert_eq!(h.remote_deployments().await.len(), 1, "nothing created");
}

/// A pull-request preview of the platform may carry its parent's name
/// (`is_preview: true`): a lookup by name skips it, as the official CLI
/// does, so the resource creates its own deployment instead of adopting the
/// preview or stalling on a name conflict, and never touches the preview.
#[tokio::test]
async fn a_preview_with_the_same_name_is_neither_adopted_nor_a_conflict() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-preview-name").start().await;
    let preview =
        h.cp.create_deployment(&github_create_body("shop-agent", "pr-12"))
            .await
            .unwrap();
    h.emulator.mark_preview(&preview.id).await;
    let found = h.cp.deployments_named("shop-agent").await.unwrap();
    assert!(found.is_empty(), "lookups skip previews: {found:?}");

    h.apply(github_deployment("shop-agent", "main")).await;
    let obj = h.wait_ready("shop-agent", TIMEOUT).await;
    let id = obj.status.unwrap().deployment_id.unwrap();
    assert_ne!(id, preview.id, "the preview is not adopted");
    let all = h.remote_deployments().await;
    assert_eq!(all.len(), 2, "{all:?}");
    let kept = h.cp.get_deployment(&preview.id).await.unwrap();
    assert_eq!(kept.is_preview, Some(true));
    assert_eq!(
        h.revisions(&preview.id).await.len(),
        1,
        "the preview is left alone"
    );
    assert_eq!(
        h.emulator.requests().await.count(route::CREATE),
        2,
        "the preview's create and the resource's"
    );
    assert_eq!(
        h.requests_about(&preview.id).await,
        2,
        "only this test's own reads of the preview"
    );
}
