//! Issue 34, item 1: `spec.managementPolicy: Observe`. An observed resource
//! adopts a deployment made outside (by `spec.deploymentId` or by name),
//! never sends a mutation (no create, PATCH, redeploy or DELETE, not even
//! when it is deleted), lists the fields that differ in `status.drift`
//! (secret values only as `differs`) with a `Drifted` condition and the
//! `agent_operator_drifted_deployments` metric; with nothing to adopt it
//! stalls (`NothingToObserve`) instead of creating. Switching to `Manage`
//! converges the deployment with one PATCH.

use crate::support;

use std::time::Duration;

use agent_operator::api::conditions::DRIFTED;
use agent_operator::api::deployment::DriftField;
use agent_operator::controlplane::types::SecretValue;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::DeleteParams;
use serde_json::json;
use support::leaks::{FIRST_VALUE, SECOND_VALUE};
use support::{Harness, apply_json, condition, github_create_body, github_deployment, route};

const TIMEOUT: Duration = Duration::from_secs(60);

/// The drift entry of `field` in `drift`, if any.
fn entry<'a>(drift: &'a [DriftField], field: &str) -> Option<&'a DriftField> {
    drift.iter().find(|f| f.field == field)
}

/// `agent_operator_drifted_deployments` of the harness's control plane.
async fn drifted_metric(h: &Harness) -> Option<f64> {
    let text = h.operator.as_ref().unwrap().metrics().await;
    support::metric(
        &text,
        "agent_operator_drifted_deployments",
        &[("namespace", h.ns.as_str()), ("control_plane", "default")],
    )
}

/// Adopted by id: the drift (a branch, secret values) is listed, nothing is
/// sent over several drift checks, and switching to `Manage` converges it
/// with exactly one PATCH.
#[tokio::test]
async fn observe_by_id_lists_drift_sends_nothing_and_manage_converges_with_one_patch() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-observe-id")
        .resync_seconds(1.0)
        .start()
        .await;
    let mut body = github_create_body("legacy-agent", "old-branch");
    body.secrets = vec![SecretValue::new("API_TOKEN", SECOND_VALUE)];
    let legacy = h.cp.create_deployment(&body).await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), &h.ns);
    apply_json(
        &secrets,
        "agent-env",
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "agent-env"},
               "stringData": {"token": FIRST_VALUE}}),
    )
    .await;

    let name = "observer";
    let mut manifest = github_deployment(name, "main");
    manifest["spec"]["name"] = "legacy-agent".into();
    manifest["spec"]["deploymentId"] = legacy.id.clone().into();
    manifest["spec"]["managementPolicy"] = "Observe".into();
    manifest["spec"]["secrets"] = json!([
        {"name": "API_TOKEN", "valueFrom": {"secretKeyRef": {"name": "agent-env", "key": "token"}}}
    ]);
    h.apply(manifest).await;

    let event = support::wait_for_event(&h.client, &h.ns, name, "Adopted", TIMEOUT).await;
    let note = event.note.unwrap_or_default();
    assert!(
        note.contains(&legacy.id) && note.contains("Observe"),
        "{note}"
    );
    // The secret values are returned once the outside revision deployed.
    let obj = support::wait_for(&h.api, name, TIMEOUT, "drift listed", |o| {
        let drift = &o.status.as_ref()?.drift;
        (entry(drift, "secrets").is_some()
            && entry(drift, "source_revision_config.repo_ref").is_some())
        .then(|| o.clone())
    })
    .await;
    let status = obj.status.clone().unwrap();
    assert_eq!(status.deployment_id.as_deref(), Some(legacy.id.as_str()));
    let branch = entry(&status.drift, "source_revision_config.repo_ref").unwrap();
    assert_eq!(
        (branch.desired.as_str(), branch.remote.as_str()),
        ("\"main\"", "\"old-branch\"")
    );
    let values = entry(&status.drift, "secrets").unwrap();
    assert_eq!(
        (values.desired.as_str(), values.remote.as_str()),
        ("differs", "differs")
    );
    let shown = serde_json::to_string(&status).unwrap();
    for value in [FIRST_VALUE, SECOND_VALUE] {
        assert!(!shown.contains(value), "no secret value in status: {shown}");
    }
    let drifted = condition(&obj, DRIFTED).expect("a Drifted condition");
    assert_eq!(
        (drifted.status.as_str(), drifted.reason.as_str()),
        ("True", "RemoteDiffers")
    );
    assert!(
        drifted.message.contains("source_revision_config.repo_ref")
            && drifted.message.contains("secrets"),
        "{}",
        drifted.message
    );
    support::eventually(TIMEOUT, "the drift metric", || async {
        (drifted_metric(&h).await == Some(1.0)).then_some(())
    })
    .await;

    // Several drift checks later: still nothing sent.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let counts = h.emulator.requests().await;
    assert!(
        counts.count(route::GET) >= 2,
        "drift checks read: {counts:?}"
    );
    assert_eq!(counts.count(route::CREATE), 1, "only the outside create");
    assert_eq!(counts.count(route::PATCH), 0, "{counts:?}");
    assert_eq!(counts.count(route::REDEPLOY), 0, "{counts:?}");
    assert_eq!(counts.count(route::DELETE), 0, "{counts:?}");
    assert_eq!(h.revisions(&legacy.id).await.len(), 1);

    // Manage: one PATCH makes it equal to the spec.
    support::merge_patch(
        &h.api,
        name,
        json!({"spec": {"managementPolicy": "Manage"}}),
    )
    .await;
    let obj = h
        .wait_ready_past(name, status.latest_revision_id.as_deref(), TIMEOUT)
        .await;
    let remote = h.cp.get_deployment(&legacy.id).await.unwrap();
    assert_eq!(
        agent_operator::plan::shapes::configured_ref(&remote),
        Some("main")
    );
    let status = obj.status.clone().unwrap();
    assert!(status.drift.is_empty(), "{:?}", status.drift);
    assert!(
        condition(&obj, DRIFTED).is_none(),
        "no Drifted under Manage"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let counts = h.emulator.requests().await;
    assert_eq!(counts.count(route::PATCH), 1, "one PATCH: {counts:?}");
    assert_eq!(counts.count(route::CREATE), 1, "{counts:?}");
    assert_eq!(counts.count(route::REDEPLOY), 0, "{counts:?}");
    assert_eq!(h.revisions(&legacy.id).await.len(), 2);
}

/// Adopted by name, equal to the spec: `Drifted=False`; deleting the
/// resource leaves the remote deployment as it is.
#[tokio::test]
async fn observe_by_name_without_drift_and_deletion_leaves_the_remote() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-observe-name").start().await;
    let theirs =
        h.cp.create_deployment(&github_create_body("web-agent", "main"))
            .await
            .unwrap();
    let name = "web-agent";
    let mut manifest = github_deployment(name, "main");
    manifest["spec"]["managementPolicy"] = "Observe".into();
    h.apply(manifest).await;
    let obj = support::wait_for(&h.api, name, TIMEOUT, "Drifted=False", |o| {
        condition(o, DRIFTED)
            .is_some_and(|c| c.status == "False" && c.reason == "NoDrift")
            .then(|| o.clone())
    })
    .await;
    let status = obj.status.unwrap();
    assert_eq!(status.deployment_id.as_deref(), Some(theirs.id.as_str()));
    assert!(status.drift.is_empty(), "{:?}", status.drift);
    support::eventually(TIMEOUT, "the drift metric at 0", || async {
        (drifted_metric(&h).await == Some(0.0)).then_some(())
    })
    .await;

    h.api.delete(name, &DeleteParams::default()).await.unwrap();
    support::wait_until_gone(&h.api, name, TIMEOUT).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let remote = h.cp.get_deployment(&theirs.id).await.unwrap();
    assert_eq!(remote.status.as_deref(), Some("READY"));
    let counts = h.emulator.requests().await;
    assert_eq!(counts.count(route::CREATE), 1, "only theirs: {counts:?}");
    assert_eq!(counts.count(route::PATCH), 0, "{counts:?}");
    assert_eq!(counts.count(route::DELETE), 0, "{counts:?}");
    assert_eq!(counts.count(route::REDEPLOY), 0, "{counts:?}");
    assert_eq!(h.revisions(&theirs.id).await.len(), 1);
}

/// Nothing to adopt, by name or by id: `Stalled`/`NothingToObserve`, and
/// nothing is created.
#[tokio::test]
async fn observe_with_nothing_to_adopt_stalls_and_creates_nothing() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-observe-none").start().await;
    let mut by_name = github_deployment("nowhere-agent", "main");
    by_name["spec"]["managementPolicy"] = "Observe".into();
    h.apply(by_name).await;
    let obj = h
        .wait_stalled("nowhere-agent", "NothingToObserve", TIMEOUT)
        .await;
    let stalled = condition(&obj, "Stalled").unwrap();
    assert!(
        stalled.message.contains("nowhere-agent") && stalled.message.contains("Observe"),
        "{}",
        stalled.message
    );
    let mut by_id = github_deployment("missing-agent", "main");
    by_id["spec"]["managementPolicy"] = "Observe".into();
    by_id["spec"]["deploymentId"] = "00000000-0000-4000-8000-000000000000".into();
    h.apply(by_id).await;
    h.wait_stalled("missing-agent", "NothingToObserve", TIMEOUT)
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let counts = h.emulator.requests().await;
    assert_eq!(counts.count(route::CREATE), 0, "{counts:?}");
    assert_eq!(counts.count(route::PATCH), 0, "{counts:?}");
    assert!(h.remote_deployments().await.is_empty());
}
