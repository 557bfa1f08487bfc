//! Item 8, crash-safe create: the control plane has no idempotency key, so
//! the operator marks the object (`agentserver.dev/create-pending`) before it
//! POSTs. (a) A marker left by a crash whose POST landed resolves to the
//! existing deployment (Event `CreateRecovered`); (b) an operator killed with
//! SIGKILL while its POST is in flight, then restarted, ends with exactly one
//! remote deployment.

use crate::support;

use std::time::Duration;

use agent_operator::api::deployment::CREATE_PENDING_ANNOTATION;
use kube::ResourceExt;
use serde_json::json;
use support::{Harness, OperatorProcess, github_create_body, github_deployment, route, wait_for};

const TIMEOUT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn pending_marker_resolves_to_the_deployment_that_landed() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-crash-marker")
        .without_operator()
        .start()
        .await;
    let name = "recovered-agent";
    // State after a crash between the POST and the status write: the marker
    // on the object, no status, and the deployment on the control plane.
    let landed =
        h.cp.create_deployment(&github_create_body(name, "main"))
            .await
            .unwrap();
    let mut manifest = github_deployment(name, "main");
    manifest["metadata"]["annotations"] =
        json!({CREATE_PENDING_ANNOTATION: "2025-06-01T10:00:00Z"});
    h.apply(manifest).await;

    let _operator = h.start_operator(&[]);
    let event = support::wait_for_event(&h.client, &h.ns, name, "CreateRecovered", TIMEOUT).await;
    assert!(event.note.unwrap_or_default().contains(&landed.id));
    let obj = h.wait_ready(name, TIMEOUT).await;
    assert_eq!(
        obj.status.as_ref().unwrap().deployment_id.as_deref(),
        Some(landed.id.as_str())
    );
    assert!(
        !obj.annotations().contains_key(CREATE_PENDING_ANNOTATION),
        "the marker is removed once the id is recorded"
    );
    assert_eq!(h.remote_deployments().await.len(), 1);
    assert_eq!(
        h.emulator.requests().await.count(route::CREATE),
        1,
        "the operator did not create again"
    );
}

#[tokio::test]
async fn operator_killed_during_create_leaves_exactly_one_deployment() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-crash-kill")
        .without_operator()
        .start()
        .await;
    let name = "crash-agent";
    // Every control plane request takes 2.5 s, so the operator is killed
    // while its POST is on the wire.
    h.emulator.set_faults(json!({"latency_ms": 2500})).await;
    let mut first = h.start_operator(&[]);
    h.apply(github_deployment(name, "main")).await;
    wait_for(&h.api, name, TIMEOUT, "the create-pending marker", |o| {
        o.annotations()
            .contains_key(CREATE_PENDING_ANNOTATION)
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    first.kill().await;

    // Whatever the POST did, let it finish, then restart without faults.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let obj = h.api.get(name).await.unwrap();
    assert!(
        obj.annotations().contains_key(CREATE_PENDING_ANNOTATION),
        "the marker survives the crash"
    );
    assert_eq!(
        obj.status.and_then(|s| s.deployment_id),
        None,
        "the crash came before the id was recorded"
    );
    h.emulator.set_faults(json!({})).await;
    // The POST may or may not have reached the service before the kill.
    let landed = h.remote_deployments().await;
    assert!(landed.len() <= 1, "{landed:?}");
    let _second = OperatorProcess::start("op-crash-kill-restart", &h.kubeconfig, &h.ns, &[]);

    let obj = h.wait_ready(name, TIMEOUT).await;
    let remote = h.remote_deployments().await;
    assert_eq!(remote.len(), 1, "exactly one remote deployment: {remote:?}");
    assert_eq!(
        obj.status.as_ref().unwrap().deployment_id.as_deref(),
        Some(remote[0].id.as_str())
    );
    assert!(!obj.annotations().contains_key(CREATE_PENDING_ANNOTATION));
    // The create has no event of its own: a POST that had not landed is
    // sent by the second replica, one that had is recovered.
    let reasons = support::event_reasons(&h.client, &h.ns, name).await;
    let recovered = reasons.iter().any(|r| r == "CreateRecovered");
    assert_eq!(recovered, !landed.is_empty(), "{reasons:?}");
    if let Some(before) = landed.first() {
        assert_eq!(
            before.id, remote[0].id,
            "the deployment that landed is kept"
        );
    }
}
