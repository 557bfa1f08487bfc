//! The operator enforces the data-plane pod policy itself (issue 50, item
//! 7; docs/SECURITY.md, "What a self-hosted data plane trusts"): with NO
//! ValidatingAdmissionPolicy installed (between `helm uninstall` and the
//! next install, or before the policy exists), the API server admits what
//! the policy would refuse, and an operator started with `--pod-policy` and
//! the policy's lists reports it `Stalled`/`PodPolicyRefused`, naming the
//! rule in the policy's words, without a single request about it to the
//! control plane; fixed, it deploys. An AgentListener with an unlisted id,
//! and an AgentDeployment placed on it by `listenerRef`, are refused the
//! same way.

use crate::support;

use std::time::Duration;

use agent_operator::api::AgentListener;
use agent_operator::api::conditions::find;
use kube::Api;
use serde_json::json;
use support::{AgentDeploymentManifest, Harness, apply_json, condition, route};

const TIMEOUT: Duration = Duration::from_secs(60);
/// How long the test watches for requests after a refusal.
const QUIET: Duration = Duration::from_secs(3);
/// A listener id that is not on the (empty) list of the test's operator.
const LISTENER_UNLISTED: &str = "11111111-2222-4333-8444-555555555555";

/// The `Stalled` condition of the AgentListener `name`, once `True`.
async fn listener_stalled(
    api: &Api<AgentListener>,
    name: &str,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
    support::eventually(TIMEOUT, "the AgentListener Stalled", || async {
        let l = api.get_opt(name).await.ok()??;
        let stalled = find(&l.status.as_ref()?.conditions, "Stalled")?.clone();
        (stalled.status == "True").then_some(stalled)
    })
    .await
}

#[tokio::test]
async fn without_the_admission_policy_the_operator_refuses_what_it_would_refuse() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("pod-policy-operator")
        .operator_flags(&[
            "--pod-policy",
            "--pod-policy-service-account-names",
            "agent-sa",
        ])
        .start()
        .await;
    h.wait_control_plane_ready(TIMEOUT).await;

    // Admitted by the API server: no policy is installed.
    let name = "root-agent";
    let mut manifest = support::github_deployment(name, "main");
    manifest["spec"]["sourceConfig"]["resourceSpec"] = json!({"serviceAccountName": "root-sa"});
    h.apply(manifest).await;
    let obj = h.wait_stalled(name, "PodPolicyRefused", TIMEOUT).await;
    let stalled = condition(&obj, "Stalled").unwrap();
    assert_eq!(
        stalled.message,
        "spec.sourceConfig.resourceSpec.serviceAccountName: root-sa is not on the data-plane \
         pod policy's list serviceAccountNames"
    );
    assert!(obj.status.unwrap().deployment_id.is_none());

    // An AgentListener off the list (empty: none allowed), and a deployment
    // placed on it by reference.
    let listeners: Api<AgentListener> = Api::namespaced(h.client.clone(), &h.ns);
    apply_json(
        &listeners,
        "edge",
        json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentListener",
               "metadata": {"name": "edge"},
               "spec": {"listenerId": LISTENER_UNLISTED}}),
    )
    .await;
    let stalled = listener_stalled(&listeners, "edge").await;
    assert_eq!(stalled.reason, "PodPolicyRefused", "{stalled:?}");
    assert_eq!(
        stalled.message,
        format!(
            "spec.listenerId: {LISTENER_UNLISTED} is not on the data-plane pod policy's list \
             listenerIds"
        )
    );
    let placed = "placed-agent";
    h.apply(
        AgentDeploymentManifest::docker(placed, "ghcr.io/acme/agent:1.0.0")
            .source_config("listenerRef", json!({"name": "edge"}))
            .build(),
    )
    .await;
    let obj = h.wait_stalled(placed, "PodPolicyRefused", TIMEOUT).await;
    let message = condition(&obj, "Stalled").unwrap().message;
    assert!(
        message.contains(&format!(
            "AgentListener {}/edge spec.listenerId: {LISTENER_UNLISTED} is not on the \
             data-plane pod policy's list listenerIds",
            h.ns
        )),
        "{message}"
    );

    // Nothing about any of them reached the control plane.
    tokio::time::sleep(QUIET).await;
    let requests = h.emulator.requests().await;
    assert_eq!(
        requests.deployment_calls(),
        0,
        "requests about refused deployments: {:?}",
        requests.0
    );
    assert_eq!(requests.count(route::CREATE), 0);
    assert_eq!(requests.count(route::GET_LISTENER), 0, "{:?}", requests.0);

    // The listed ServiceAccount is deployed: the fix of the refusal.
    support::merge_patch(
        &h.api,
        name,
        json!({"spec": {"sourceConfig": {"resourceSpec": {"serviceAccountName": "agent-sa"}}}}),
    )
    .await;
    let obj = h.wait_ready(name, TIMEOUT).await;
    assert!(obj.status.unwrap().deployment_id.is_some());
    assert_eq!(h.emulator.requests().await.count(route::CREATE), 1);
}
