//! Item 11 (AgentDeployment side): while its AgentControlPlane is not ready
//! (a wrong API key), an AgentDeployment waits with `ControlPlaneNotReady`
//! pointing at it and makes no deployment call; rotating the key Secret is
//! enough for both to become Ready, without restarting the operator or
//! editing the AgentDeployment.

use crate::support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use serde_json::json;
use support::{API_KEY, Harness, apply_json, github_deployment, wait_for};

const TIMEOUT: Duration = Duration::from_secs(60);

async fn set_key(h: &Harness, key: &str) {
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), &h.ns);
    apply_json(
        &secrets,
        "cp-api-key",
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cp-api-key"},
               "stringData": {"api-key": key}}),
    )
    .await;
}

#[tokio::test]
async fn deployments_wait_for_their_control_plane_and_recover_after_a_key_rotation() {
    test_support::skip_without!(Envtest);
    let mut h = Harness::builder("op-plane-not-ready")
        .step_seconds(0.2)
        .without_operator()
        .start()
        .await;
    set_key(&h, support::leaks::WRONG_API_KEY).await;
    h.operator = Some(h.start_operator(&[]));

    // The AgentControlPlane is Stalled first; the deployment then points at it.
    h.apply(github_deployment("waiting-agent", "main")).await;
    let message = wait_for(
        &h.api,
        "waiting-agent",
        TIMEOUT,
        "ControlPlaneNotReady",
        |o| {
            let c = support::condition(o, "Ready")?;
            (c.reason == "ControlPlaneNotReady" && c.message.contains("is not ready"))
                .then(|| c.message.clone())
        },
    )
    .await;
    assert!(
        message.contains(&format!("AgentControlPlane {}/default", h.ns)),
        "{message}"
    );
    assert!(
        message.contains("Unauthorized"),
        "names the control plane's reason: {message}"
    );
    assert!(
        !message.contains(support::leaks::WRONG_API_KEY),
        "the key never shows: {message}"
    );
    let before = h.emulator.requests().await.deployment_calls();

    // Rotating the key Secret is enough.
    set_key(&h, API_KEY).await;
    let obj = h.wait_ready("waiting-agent", TIMEOUT).await;
    assert_eq!(
        obj.metadata.generation,
        Some(1),
        "the AgentDeployment was not edited"
    );
    assert_eq!(
        before, 0,
        "no deployment call while the control plane was not ready"
    );
    assert_eq!(h.remote_deployments().await.len(), 1);
}

/// No request before the plane's first verdict (issue "Day two in GitOps",
/// item 8): five AgentDeployments on a plane whose key is refused, all
/// there when the operator starts, cost the plane's own probe and nothing
/// else: before its check they wait (`ControlPlaneNotChecked`), after it
/// they point at it (`ControlPlaneNotReady`). Without the wait, each sent
/// its own name lookup and got its own 401.
#[tokio::test]
async fn deployments_send_nothing_before_their_plane_is_checked() {
    test_support::skip_without!(Envtest);
    const FLEET: usize = 5;
    let mut h = Harness::builder("op-plane-unchecked")
        .step_seconds(0.2)
        .without_operator()
        .start()
        .await;
    set_key(&h, support::leaks::WRONG_API_KEY).await;
    for i in 0..FLEET {
        h.apply(github_deployment(&format!("early-{i}"), "main"))
            .await;
    }
    h.operator = Some(h.start_operator(&[]));
    for i in 0..FLEET {
        h.wait_stalled(&format!("early-{i}"), "ControlPlaneNotReady", TIMEOUT)
            .await;
    }
    let log = h.emulator.request_log().await;
    let refused: Vec<_> = log.entries.iter().filter(|r| r.status == "401").collect();
    eprintln!(
        "{FLEET} AgentDeployments on a refused key: {} requests, {} refused",
        log.entries.len(),
        refused.len()
    );
    assert!(
        !refused.is_empty() && refused.len() <= 2,
        "only the plane's probe is refused, not one request per AgentDeployment: {refused:?}"
    );
    assert_eq!(h.emulator.requests().await.deployment_calls(), 0);
}
