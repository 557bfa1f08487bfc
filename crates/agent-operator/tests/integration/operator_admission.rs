//! Item 6, immutable fields: the CRD's CEL transition rules make the API
//! server reject a change of `name`, `source`, `sourceConfig.integrationId`,
//! `repoUrl`, `deploymentType` or `listenerId`, with a message that says to
//! create a new AgentDeployment instead. Only the API server and the CRDs
//! take part (no operator).

use crate::{common, support};

use agent_operator::api::AgentDeployment;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use support::{AgentDeploymentManifest, apply_json};

fn manifest(name: &str) -> Value {
    AgentDeploymentManifest::github(name, "main")
        .spec("name", "immutable-agent")
        .source_config("listenerId", "0c9a4a0e-6f51-4e43-9d2a-8b7e6f5d4c3b")
        .build()
}

async fn merge(api: &Api<AgentDeployment>, name: &str, patch: &Value) -> Result<(), kube::Error> {
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map(|_| ())
}

#[tokio::test]
async fn immutable_fields_are_rejected_at_admission() {
    test_support::skip_without!(Envtest);
    let env = common::shared_env();
    let client = env.client().await;
    let ns = common::test_namespace(&client, "op-admission").await;
    let api: Api<AgentDeployment> = Api::namespaced(client, &ns);
    let name = "immutable";
    apply_json(&api, name, manifest(name)).await;

    let changes = [
        ("name", json!({"spec": {"name": "another-name"}})),
        ("name", json!({"spec": {"name": null}})),
        (
            "source",
            json!({"spec": {"source": "external_docker",
                            "sourceRevisionConfig": {"imageUri": "ghcr.io/acme/agent:1"}}}),
        ),
        (
            "sourceConfig.integrationId",
            json!({"spec": {"sourceConfig": {"integrationId": "11111111-2222-4333-8444-555555555555"}}}),
        ),
        (
            "sourceConfig.repoUrl",
            json!({"spec": {"sourceConfig": {"repoUrl": "https://github.com/acme/other"}}}),
        ),
        (
            "sourceConfig.deploymentType",
            json!({"spec": {"sourceConfig": {"deploymentType": "prod"}}}),
        ),
        (
            "sourceConfig.listenerId",
            json!({"spec": {"sourceConfig": {"listenerId": "11111111-2222-4333-8444-555555555555"}}}),
        ),
        (
            "sourceConfig.listenerId",
            json!({"spec": {"sourceConfig": {"listenerId": null}}}),
        ),
    ];
    for (field, patch) in &changes {
        match merge(&api, name, patch).await {
            Err(kube::Error::Api(status)) => {
                assert_eq!(status.code, 422, "{field}: {status:?}");
                assert!(
                    status.message.contains(&format!(
                        "{field} is immutable; create a new AgentDeployment instead"
                    )),
                    "{field}: {}",
                    status.message
                );
            }
            other => panic!("changing {field} with {patch} was not rejected: {other:?}"),
        }
    }

    // Nothing was changed, and mutable fields still change.
    let obj = api.get(name).await.unwrap();
    assert_eq!(obj.metadata.generation, Some(1));
    merge(
        &api,
        name,
        &json!({"spec": {"sourceConfig": {"buildOnPush": true},
                         "sourceRevisionConfig": {"repoRef": "release-2"}}}),
    )
    .await
    .expect("mutable fields can change");
    let obj = api.get(name).await.unwrap();
    assert_eq!(obj.metadata.generation, Some(2));
    assert_eq!(obj.spec.name.as_deref(), Some("immutable-agent"));
    assert_eq!(
        obj.spec.source_config.repo_url.as_deref(),
        Some("https://github.com/acme/support-agent")
    );
}
