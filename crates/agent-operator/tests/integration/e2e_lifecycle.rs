//! End to end: a real kube-apiserver + etcd (envtest), the emulator (in-process) and
//! the operator binary take an AgentDeployment through create → Ready, a spec
//! change → a new revision → Ready, and delete → gone remotely and locally.

use crate::support;

use std::time::Duration;

use agent_operator::controlplane::{Error as CpError, ListDeployments, ListRevisions};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;
use support::{AgentDeploymentManifest, Harness, apply_json, is_ready_now, ready, wait_for};

const TIMEOUT: Duration = Duration::from_secs(60);

fn deployment(name: &str, repo_ref: &str, env_secret: &str) -> serde_json::Value {
    AgentDeploymentManifest::github(name, repo_ref)
        .secret_ref("OPENAI_API_KEY", env_secret, "OPENAI_API_KEY")
        .secret("LOG_LEVEL", "info")
        .build()
}

async fn env_secret(client: &kube::Client, ns: &str, name: &str) {
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), ns);
    apply_json(
        &secrets,
        name,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
               "stringData": {"OPENAI_API_KEY": support::leaks::E2E_OPENAI_KEY}}),
    )
    .await;
}

#[tokio::test]
async fn create_update_delete_reaches_ready_and_cleans_up() {
    test_support::skip_without!(Envtest);
    // The default request budget and the secret scan are checked when the
    // harness drops.
    let h = Harness::quick("e2e-lifecycle")
        .delete_seconds(1.0)
        .start()
        .await;
    let (client, ns, cp, api) = (&h.client, &h.ns, &h.cp, &h.api);
    env_secret(client, ns, "agent-env").await;

    // Create → Ready=True with ids, DEPLOYED, observedGeneration == generation.
    apply_json(
        api,
        "support-agent",
        deployment("support-agent", "main", "agent-env"),
    )
    .await;
    let obj = wait_for(
        api,
        "support-agent",
        TIMEOUT,
        "Ready=True after create",
        |o| is_ready_now(o).then(|| o.clone()),
    )
    .await;
    let status = obj.status.clone().unwrap();
    let deployment_id = status.deployment_id.clone().expect("deploymentId");
    let first_revision = status.latest_revision_id.clone().expect("latestRevisionId");
    assert_eq!(status.revision_status.as_deref(), Some("DEPLOYED"));
    assert_eq!(status.observed_generation, obj.metadata.generation);
    assert!(
        status.url.as_deref().is_some_and(|u| u.starts_with("http")),
        "url: {:?}",
        status.url
    );
    assert!(
        obj.metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|f| f == "agentserver.dev/remote-deployment"))
    );
    let remote = cp
        .get_deployment(&deployment_id)
        .await
        .expect("remote deployment exists");
    assert_eq!(remote.name, "support-agent");
    assert_eq!(
        agent_operator::plan::shapes::configured_ref(&remote),
        Some("main")
    );
    assert_eq!(remote.secrets.len(), 2, "both secrets were sent");
    let all = cp
        .list_all_deployments(&ListDeployments::default())
        .await
        .unwrap();
    assert_eq!(all.len(), 1, "exactly one remote deployment, no duplicate");

    // Spec change → a new revision → Ready again on the new generation.
    api.patch(
        "support-agent",
        &PatchParams::apply("tests").force(),
        &Patch::Apply(deployment("support-agent", "release-2", "agent-env")),
    )
    .await
    .unwrap();
    let obj = wait_for(
        api,
        "support-agent",
        TIMEOUT,
        "Ready=True on a new revision",
        |o| {
            let s = o.status.as_ref()?;
            (is_ready_now(o) && s.latest_revision_id.as_deref() != Some(first_revision.as_str()))
                .then(|| o.clone())
        },
    )
    .await;
    let status = obj.status.unwrap();
    assert_eq!(obj.metadata.generation, Some(2));
    assert_eq!(
        status.deployment_id.as_deref(),
        Some(deployment_id.as_str()),
        "same remote deployment"
    );
    assert_eq!(status.revision_status.as_deref(), Some("DEPLOYED"));
    let revisions = cp
        .list_revisions(&deployment_id, &ListRevisions::default())
        .await
        .unwrap();
    assert_eq!(revisions.resources.len(), 2, "one revision per repoRef");
    assert_eq!(
        Some(&revisions.resources[0].id),
        status.latest_revision_id.as_ref()
    );
    let remote = cp.get_deployment(&deployment_id).await.unwrap();
    assert_eq!(
        agent_operator::plan::shapes::configured_ref(&remote),
        Some("release-2")
    );

    // Delete → remote 404, then the object is gone.
    api.delete("support-agent", &DeleteParams::default())
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + TIMEOUT;
    while api.get_opt("support-agent").await.unwrap().is_some() {
        assert!(
            std::time::Instant::now() < deadline,
            "AgentDeployment still present"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    match cp.get_deployment(&deployment_id).await {
        Err(CpError::NotFound { detail }) => assert!(detail.contains(&deployment_id), "{detail}"),
        other => panic!("expected 404 for the deleted deployment, got {other:?}"),
    }
}

#[tokio::test]
async fn missing_secret_is_reported_and_recovers_when_created() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("e2e-missing-secret").start().await;
    let (client, ns, cp, api) = (&h.client, &h.ns, &h.cp, &h.api);

    apply_json(
        api,
        "needs-secret",
        deployment("needs-secret", "main", "absent-env"),
    )
    .await;
    let (status, reason, message) = wait_for(
        api,
        "needs-secret",
        TIMEOUT,
        "Ready=False SecretNotFound",
        |o| ready(o).filter(|(_, r, _)| r == "SecretNotFound"),
    )
    .await;
    assert_eq!(status, "False");
    assert!(
        message.contains("absent-env"),
        "message names the Secret: {message}"
    );
    assert_eq!(reason, "SecretNotFound");
    let remote = cp
        .list_all_deployments(&ListDeployments::default())
        .await
        .unwrap();
    assert!(
        remote.is_empty(),
        "no remote call while the Secret is missing: {remote:?}"
    );

    // Creating the Secret is enough: no edit of the resource.
    env_secret(client, ns, "absent-env").await;
    let obj = wait_for(
        api,
        "needs-secret",
        TIMEOUT,
        "Ready=True after the Secret appears",
        |o| is_ready_now(o).then(|| o.clone()),
    )
    .await;
    assert_eq!(
        obj.metadata.generation,
        Some(1),
        "the resource was not edited"
    );
    let remote = cp
        .list_all_deployments(&ListDeployments::default())
        .await
        .unwrap();
    assert_eq!(remote.len(), 1);
}
