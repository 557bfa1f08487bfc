//! Immutable once it matters (issue "Day two in GitOps", item 2): a field
//! the control plane cannot change on a deployment (`source`, `name`,
//! `sourceConfig.integrationId`/`integrationRef`, `repoUrl`,
//! `deploymentType`, the listener) changes freely until a remote deployment
//! exists, and is refused by the CRD's CEL transition rules once
//! `status.deploymentId` is set; writing down the value already in effect is
//! never refused. Removals the control plane would not carry out (the last
//! secret, `customUrl`, `buildOnPush`, the build commands, `resourceSpec`
//! keys) are refused the same way. Only the API server and the CRDs take
//! part (no operator): the status is written as the operator would.

use crate::{common, support};

use agent_operator::api::AgentDeployment;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use support::{AgentDeploymentManifest, apply_json};

const OTHER_UUID: &str = "11111111-2222-4333-8444-555555555555";
const REMOTE_ID: &str = "0d5a2b1c-3e4f-4a5b-8c6d-7e8f9a0b1c2d";

fn github(name: &str) -> Value {
    AgentDeploymentManifest::github(name, "main")
        .spec("name", "immutable-agent")
        .source_config("listenerId", "0c9a4a0e-6f51-4e43-9d2a-8b7e6f5d4c3b")
        .secret("LOG_LEVEL", "info")
        .secret("REGION", "eu")
        .build()
}

async fn merge(api: &Api<AgentDeployment>, name: &str, patch: &Value) -> Result<(), kube::Error> {
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map(|_| ())
}

/// Records a remote deployment in status, as the operator's first status
/// write after a create does.
async fn record_remote(api: &Api<AgentDeployment>, name: &str) {
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"deploymentId": REMOTE_ID}})),
    )
    .await
    .expect("writing status.deploymentId");
}

/// The changes of an immutable field, each with the path its message names.
fn immutable_changes() -> Vec<(&'static str, Value)> {
    vec![
        ("name", json!({"spec": {"name": "another-name"}})),
        ("name", json!({"spec": {"name": null}})),
        (
            "source",
            json!({"spec": {"source": "external_docker", "secrets": [{"name": "LOG_LEVEL", "value": "info"}],
                            "sourceConfig": {"integrationId": null, "repoUrl": null, "deploymentType": null, "buildOnPush": null},
                            "sourceRevisionConfig": {"repoRef": null, "langgraphConfigPath": null, "imageUri": "ghcr.io/acme/agent:1"}}}),
        ),
        (
            "sourceConfig.integrationId",
            json!({"spec": {"sourceConfig": {"integrationId": OTHER_UUID}}}),
        ),
        (
            "sourceConfig.integrationRef",
            json!({"spec": {"sourceConfig": {"integrationId": null, "integrationRef": {"name": "acme"}}}}),
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
            json!({"spec": {"sourceConfig": {"listenerId": OTHER_UUID}}}),
        ),
        (
            "sourceConfig.listenerId",
            json!({"spec": {"sourceConfig": {"listenerId": null}}}),
        ),
    ]
}

/// Asserts that `patch` is refused (422); the refusal's message.
async fn refusal(api: &Api<AgentDeployment>, name: &str, patch: &Value) -> String {
    match merge(api, name, patch).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{patch}: {status:?}");
            status.message
        }
        other => panic!("{patch} was not refused: {other:?}"),
    }
}

/// Asserts that `patch` is refused (422) with a message containing `want`.
async fn refused(api: &Api<AgentDeployment>, name: &str, patch: &Value, want: &str) {
    let message = refusal(api, name, patch).await;
    assert!(message.contains(want), "{patch}: {message}");
}

#[tokio::test]
async fn immutable_fields_change_freely_until_a_remote_exists_then_are_refused() {
    test_support::skip_without!(Envtest);
    let client = common::shared_env().client().await;
    let ns = common::test_namespace(&client, "op-admission").await;
    let api: Api<AgentDeployment> = Api::namespaced(client, &ns);

    // Before a remote deployment exists, every change is accepted (a typo
    // found by IntegrationNotFound or NameConflict is fixed in place).
    for (i, (field, patch)) in immutable_changes().iter().enumerate() {
        let name = format!("free-{i}");
        apply_json(&api, &name, github(&name)).await;
        merge(&api, &name, patch)
            .await
            .unwrap_or_else(|e| panic!("{field} could not change before a create: {e}"));
    }

    // Once status.deploymentId is set, each is refused, naming the field.
    let name = "immutable";
    apply_json(&api, name, github(name)).await;
    record_remote(&api, name).await;
    for (field, patch) in &immutable_changes() {
        refused(
            &api,
            name,
            patch,
            &format!("spec.{field} cannot change once the remote deployment exists"),
        )
        .await;
    }
    let obj = api.get(name).await.unwrap();
    assert_eq!(obj.metadata.generation, Some(1), "nothing was changed");

    // Mutable fields still change, and so does a removal of one secret.
    merge(
        &api,
        name,
        &json!({"spec": {"sourceConfig": {"buildOnPush": true},
                         "sourceRevisionConfig": {"repoRef": "release-2"},
                         "secrets": [{"name": "LOG_LEVEL", "value": "debug"}]}}),
    )
    .await
    .expect("mutable fields can change");
    let obj = api.get(name).await.unwrap();
    assert_eq!(obj.metadata.generation, Some(2));
    assert_eq!(obj.spec.secrets.len(), 1);
}

#[tokio::test]
async fn the_value_already_in_effect_is_never_refused() {
    test_support::skip_without!(Envtest);
    let client = common::shared_env().client().await;
    let ns = common::test_namespace(&client, "op-admission-same").await;
    let api: Api<AgentDeployment> = Api::namespaced(client, &ns);
    // A github deployment that sets neither name nor deploymentType.
    let mut manifest = AgentDeploymentManifest::github("defaults", "main").build();
    manifest["spec"]["sourceConfig"]
        .as_object_mut()
        .unwrap()
        .remove("deploymentType");
    apply_json(&api, "defaults", manifest).await;
    record_remote(&api, "defaults").await;
    for patch in [
        json!({"spec": {"sourceConfig": {"deploymentType": "dev"}}}),
        json!({"spec": {"name": "defaults"}}),
        json!({"spec": {"deploymentId": REMOTE_ID}}),
    ] {
        merge(&api, "defaults", &patch)
            .await
            .unwrap_or_else(|e| panic!("{patch}, the value in effect, was refused: {e}"));
    }
    refused(
        &api,
        "defaults",
        &json!({"spec": {"deploymentId": OTHER_UUID}}),
        "spec.deploymentId cannot change or be removed once the remote deployment exists",
    )
    .await;
    refused(
        &api,
        "defaults",
        &json!({"spec": {"deploymentId": null}}),
        "spec.deploymentId cannot change or be removed",
    )
    .await;
}

#[tokio::test]
async fn removals_the_control_plane_would_not_carry_out_are_refused_once_a_remote_exists() {
    test_support::skip_without!(Envtest);
    let client = common::shared_env().client().await;
    let ns = common::test_namespace(&client, "op-admission-kept").await;
    let api: Api<AgentDeployment> = Api::namespaced(client, &ns);
    // The build commands belong to a github deployment, `customUrl` to an
    // image: each removal is tried on the source that may set the field.
    let manifest = |name: &str| {
        let built = name.contains("command");
        let m = if built {
            AgentDeploymentManifest::github(name, "main")
                .source_config("installCommand", "npm ci")
                .source_config("buildCommand", "npm run build")
        } else {
            AgentDeploymentManifest::docker(name, "ghcr.io/acme/agent:1")
                .source_config("customUrl", "https://agent.example.com")
        };
        m.source_config("resourceSpec", json!({"minScale": 1, "maxScale": 3}))
            .secret("ONLY", "value")
            .build()
    };
    let removals = [
        (
            "secrets",
            json!({"spec": {"secrets": null}}),
            "spec.secrets cannot become empty",
        ),
        (
            "secrets",
            json!({"spec": {"secrets": []}}),
            "spec.secrets cannot become empty",
        ),
        (
            "customUrl",
            json!({"spec": {"sourceConfig": {"customUrl": null}}}),
            "spec.sourceConfig.customUrl cannot be removed",
        ),
        (
            "installCommand",
            json!({"spec": {"sourceConfig": {"installCommand": null}}}),
            "spec.sourceConfig.installCommand cannot be removed",
        ),
        (
            "buildCommand",
            json!({"spec": {"sourceConfig": {"buildCommand": null}}}),
            "spec.sourceConfig.buildCommand cannot be removed",
        ),
        (
            "resourceSpec key",
            json!({"spec": {"sourceConfig": {"resourceSpec": {"maxScale": null}}}}),
            "a key of spec.sourceConfig.resourceSpec",
        ),
        (
            "resourceSpec",
            json!({"spec": {"sourceConfig": {"resourceSpec": null}}}),
            "a key of spec.sourceConfig.resourceSpec",
        ),
    ];
    // Before a remote exists, each removal is accepted.
    for (i, (what, patch, _)) in removals.iter().enumerate() {
        let name = format!("before-{i}-{}", what.to_lowercase().replace(' ', "-"));
        apply_json(&api, &name, manifest(&name)).await;
        merge(&api, &name, patch)
            .await
            .unwrap_or_else(|e| panic!("removing {what} before a create was refused: {e}"));
    }
    for name in ["kept", "kept-commands"] {
        apply_json(&api, name, manifest(name)).await;
        record_remote(&api, name).await;
    }
    for (what, patch, want) in &removals {
        let kept = if what.contains("Command") {
            "kept-commands"
        } else {
            "kept"
        };
        refused(&api, kept, patch, want).await;
    }
    let name = "kept";
    // Changing the values is fine.
    merge(
        &api,
        name,
        &json!({"spec": {"secrets": [{"name": "ONLY", "value": "rotated"}],
                         "sourceConfig": {"resourceSpec": {"maxScale": 5}}}}),
    )
    .await
    .expect("values can change");
}

/// Scale to zero (docs/control-plane-api.md "Deployment"): `minScale` 0 is
/// admitted with `dev_zero` or `dev_free_zero` and refused with any other
/// type, the default `dev` included, and for an image, which has no type.
#[tokio::test]
async fn scale_to_zero_is_admitted_only_with_a_type_that_scales_to_zero() {
    test_support::skip_without!(Envtest);
    let client = common::shared_env().client().await;
    let ns = common::test_namespace(&client, "op-admission-zero").await;
    let api: Api<AgentDeployment> = Api::namespaced(client, &ns);
    let dry = PatchParams::apply("tests").force().dry_run();
    let cases = [
        (Some("dev_zero"), "github", true),
        (Some("dev_free_zero"), "github", true),
        (Some("prod"), "github", false),
        (None, "github", false),
        (None, "external_docker", false),
    ];
    for (ty, source, admitted) in cases {
        let mut m = if source == "github" {
            AgentDeploymentManifest::github("zero", "main").build()
        } else {
            AgentDeploymentManifest::docker("zero", "ghcr.io/acme/agent:1.0.0").build()
        };
        let sc = m["spec"]["sourceConfig"].as_object_mut().unwrap();
        sc.remove("deploymentType");
        if let Some(ty) = ty {
            sc.insert("deploymentType".into(), json!(ty));
        }
        sc.insert("resourceSpec".into(), json!({"minScale": 0, "maxScale": 2}));
        let out = api.patch("zero", &dry, &Patch::Apply(&m)).await;
        match (admitted, out) {
            (true, Ok(_)) => {}
            (false, Err(kube::Error::Api(e))) => assert!(
                e.message.contains("minScale 0 (scale to zero) needs"),
                "{source} {ty:?}: {}",
                e.message
            ),
            (want, got) => panic!("{source} {ty:?}: admitted should be {want}, got {got:?}"),
        }
    }
}

#[tokio::test]
async fn an_expiry_needs_a_part_and_a_time_that_parses() {
    test_support::skip_without!(Envtest);
    let client = common::shared_env().client().await;
    let ns = common::test_namespace(&client, "op-admission-expiry").await;
    let api: Api<AgentDeployment> = Api::namespaced(client, &ns);
    let dry = PatchParams::apply("tests").force().dry_run();
    let cases = [
        (json!({"at": "2026-12-01T18:00:00Z"}), None),
        (json!({"afterCreationSeconds": 60, "idleSeconds": 30}), None),
        (
            json!({}),
            Some("expiry needs at, afterCreationSeconds or idleSeconds"),
        ),
        (json!({"at": "next week"}), Some("spec.expiry.at")),
        (json!({"idleSeconds": 0}), Some("spec.expiry.idleSeconds")),
        (
            json!({"afterCreationSeconds": 31_536_001}),
            Some("spec.expiry.afterCreationSeconds"),
        ),
    ];
    for (expiry, refusal) in cases {
        let mut m = AgentDeploymentManifest::github("preview", "main").build();
        m["spec"]["expiry"] = expiry.clone();
        let out = api.patch("preview", &dry, &Patch::Apply(&m)).await;
        match (refusal, out) {
            (None, Ok(_)) => {}
            (Some(want), Err(kube::Error::Api(e))) => {
                assert!(e.message.contains(want), "{expiry}: {}", e.message)
            }
            (want, got) => panic!("{expiry}: refusal {want:?} expected, got {got:?}"),
        }
    }
}

#[tokio::test]
async fn a_promotion_takes_the_place_of_the_image_or_ref_and_refuses_an_image_policy() {
    test_support::skip_without!(Envtest);
    let client = common::shared_env().client().await;
    let ns = common::test_namespace(&client, "op-admission-promotion").await;
    let api: Api<AgentDeployment> = Api::namespaced(client, &ns);
    let dry = PatchParams::apply("tests").force().dry_run();
    let promotion =
        json!({"from": {"name": "staging", "namespace": "agents-staging"}, "soakSeconds": 600});
    let docker = || {
        let mut m = AgentDeploymentManifest::docker("production", "ghcr.io/acme/agent:1").build();
        m["spec"]["sourceRevisionConfig"] = json!({});
        m
    };
    let github = || {
        let mut m = AgentDeploymentManifest::github("production", "main").build();
        m["spec"]["sourceRevisionConfig"]
            .as_object_mut()
            .unwrap()
            .remove("repoRef");
        m
    };
    let with = |mut m: Value, field: &str, value: Value| {
        m["spec"][field] = value;
        m
    };
    let cases = [
        (
            "external_docker without imageUri, promoted",
            with(docker(), "promotion", promotion.clone()),
            None,
        ),
        (
            "external_docker without imageUri",
            docker(),
            Some("source external_docker needs sourceRevisionConfig.imageUri"),
        ),
        (
            "github without repoRef, promoted",
            with(github(), "promotion", promotion.clone()),
            None,
        ),
        (
            "github without repoRef",
            github(),
            Some("source github needs"),
        ),
        (
            "imagePolicy with a promotion",
            with(
                with(docker(), "promotion", promotion.clone()),
                "imagePolicy",
                json!("Pin"),
            ),
            Some("do not apply with promotion"),
        ),
        (
            "a soak over a week",
            with(
                docker(),
                "promotion",
                json!({"from": {"name": "staging"}, "soakSeconds": 604_801}),
            ),
            Some("spec.promotion.soakSeconds"),
        ),
        (
            "a grant naming no valid namespace",
            with(
                github(),
                "promotionGrants",
                json!([{"namespace": "Agents_Production"}]),
            ),
            Some("spec.promotionGrants[0].namespace"),
        ),
    ];
    for (what, m, refusal) in cases {
        let out = api.patch("production", &dry, &Patch::Apply(&m)).await;
        match (refusal, out) {
            (None, Ok(_)) => {}
            (Some(want), Err(kube::Error::Api(e))) => {
                assert!(e.message.contains(want), "{what}: {}", e.message)
            }
            (want, got) => panic!("{what}: refusal {want:?} expected, got {got:?}"),
        }
    }
}

/// The spec's checks and the transition checks are one CEL rule each
/// (`rules::all_of`, for kube-apiserver's CPU): a write that breaks two
/// checks at once is still refused naming both, as two rules did.
#[tokio::test]
async fn a_write_breaking_two_checks_is_refused_naming_both() {
    test_support::skip_without!(Envtest);
    let client = common::shared_env().client().await;
    let ns = common::test_namespace(&client, "op-admission-two").await;
    let api: Api<AgentDeployment> = Api::namespaced(client, &ns);
    apply_json(&api, "two", github("two")).await;
    let both = json!({"spec": {"sourceConfig": {"integrationRef": {"name": "acme"},
                                                "listenerRef": {"name": "eu"}}}});
    let message = refusal(&api, "two", &both).await;
    for want in [
        "set at most one of sourceConfig.integrationId and sourceConfig.integrationRef",
        "set at most one of sourceConfig.listenerId and sourceConfig.listenerRef",
    ] {
        assert!(message.contains(want), "{want} not in: {message}");
    }

    record_remote(&api, "two").await;
    let both = json!({"spec": {"sourceConfig": {"repoUrl": "https://github.com/acme/other",
                                                "deploymentType": "prod"}}});
    let message = refusal(&api, "two", &both).await;
    for field in ["repoUrl", "deploymentType"] {
        let want =
            format!("spec.sourceConfig.{field} cannot change once the remote deployment exists");
        assert!(message.contains(&want), "{want} not in: {message}");
    }
    // A write that leaves the spec as it is (the operator's own) passes.
    merge(&api, "two", &json!({"metadata": {"labels": {"team": "a"}}}))
        .await
        .expect("a label changes");
}
