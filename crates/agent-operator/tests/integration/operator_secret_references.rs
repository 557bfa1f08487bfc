//! Issue 11, item 2: `spec.secretReferences` of an `external_docker`
//! deployment on a self-hosted data plane (docs/control-plane-api.md "Deployment":
//! `secret_references`, Kubernetes Secret keys in the data plane). Against
//! the real API server and the emulator with a seeded listener:
//! - a create carries the references (never a value) and the operator does
//!   not read the referenced Secret: a Secret of that name in the operator's
//!   cluster, holding a value, changes nothing and its value shows nowhere;
//! - a change of the references is patched (one new revision), and a change
//!   made on the control plane is restored (Event `DriftCorrected`);
//! - the API server refuses references on `github`, without a listener, with
//!   a name also in `secrets`, with a reserved name or a name listed twice.

use crate::{common, support};

use std::time::Duration;

use agent_operator::api::AgentDeployment;
use agent_operator::controlplane::types::{DeploymentPatch, SecretReference};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};
use support::{AgentDeploymentManifest, Harness, WORKSPACE, apply_json, route, wait_for};

const TIMEOUT: Duration = Duration::from_secs(60);
/// The listener the emulator seeds in the test workspace.
const LISTENER_ID: &str = "6f1c2a3e-4b5d-4e6f-8a7b-9c0d1e2f3a4b";
/// A value in a Secret named like the referenced one, in the operator's
/// cluster: if the operator read it, it could leak it.
const DATA_PLANE_VALUE: &str = "sk-data-plane-only-7c31e9";

/// An `external_docker` deployment on the seeded listener with one literal
/// secret and the given references.
fn docker_with_references(name: &str, references: Value) -> Value {
    AgentDeploymentManifest::docker(name, "ghcr.io/acme/agent:1.0.0")
        .source_config("listenerId", LISTENER_ID)
        .source_config("listenerConfig", json!({"k8sNamespace": "agents"}))
        .secret("LOG_LEVEL", "info")
        .spec("secretReferences", references)
        .build()
}

fn reference(name: &str, secret_name: &str, secret_key: &str) -> SecretReference {
    SecretReference {
        name: name.into(),
        secret_name: secret_name.into(),
        secret_key: secret_key.into(),
    }
}

#[tokio::test]
async fn references_are_sent_without_values_and_patched() {
    test_support::skip_without!(Envtest);
    // A control plane that echoes `secret_references` (the quirk
    // `secret-references-unechoed` off), so that a change made on it can be
    // seen and restored; with the real shape, where they are not echoed, a
    // change of the spec is still sent (found against `status.unechoedHash`:
    // `answer_shapes` and the unit table in `plan::shapes`).
    let h = Harness::quick("op-secret-refs")
        .listener(&format!("{WORKSPACE}={LISTENER_ID}:cluster-a:agents"))
        .emulator_flags(&["--without-quirk", "secret-references-unechoed"])
        .resync_seconds(0.5)
        .start()
        .await;
    let name = "referencing-agent";
    // A Secret named like the referenced one exists here too: the operator
    // must not read it (the references name Secrets of the data plane).
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), &h.ns);
    apply_json(
        &secrets,
        "agent-env",
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "agent-env"},
               "stringData": {"openai": DATA_PLANE_VALUE}}),
    )
    .await;
    h.apply(docker_with_references(
        name,
        json!([{"name": "OPENAI_API_KEY", "secretName": "agent-env", "secretKey": "openai"}]),
    ))
    .await;
    let status = h.wait_ready(name, TIMEOUT).await.status.unwrap();
    let id = status.deployment_id.clone().unwrap();

    let remote = h.cp.get_deployment(&id).await.unwrap();
    assert_eq!(
        remote.secret_references,
        [reference("OPENAI_API_KEY", "agent-env", "openai")]
    );
    let names: Vec<&str> = remote.secrets.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["LOG_LEVEL"], "a reference is not sent as a secret");
    assert_eq!(
        remote.source_config.listener_id.as_deref(),
        Some(LISTENER_ID)
    );
    let remote_json = serde_json::to_string(&remote).unwrap();
    assert!(!remote_json.contains(DATA_PLANE_VALUE));
    assert_eq!(h.revisions(&id).await.len(), 1);

    // A change of the references: patched, one new revision.
    let patches = h.emulator.requests().await.count(route::PATCH);
    h.apply(docker_with_references(
        name,
        json!([
            {"name": "OPENAI_API_KEY", "secretName": "agent-env", "secretKey": "openai-v2"},
            {"name": "ANTHROPIC_API_KEY", "secretName": "agent-env", "secretKey": "anthropic"}
        ]),
    ))
    .await;
    let obj = wait_for(&h.api, name, TIMEOUT, "Ready on generation 2", |o| {
        (support::is_ready_now(o) && o.metadata.generation == Some(2)).then(|| o.clone())
    })
    .await;
    let remote = h.cp.get_deployment(&id).await.unwrap();
    let mut refs = remote.secret_references.clone();
    refs.sort();
    assert_eq!(
        refs,
        [
            reference("ANTHROPIC_API_KEY", "agent-env", "anthropic"),
            reference("OPENAI_API_KEY", "agent-env", "openai-v2"),
        ]
    );
    assert_eq!(
        h.emulator.requests().await.count(route::PATCH),
        patches + 1,
        "one PATCH"
    );
    assert_eq!(
        h.revisions(&id).await.len(),
        2,
        "references make a revision"
    );
    support::wait_for_event(&h.client, &h.ns, name, "Patched", TIMEOUT).await;

    // References changed on the control plane: the drift check restores them.
    h.cp.patch_deployment(
        &id,
        &DeploymentPatch {
            secret_references: Some(vec![reference("OPENAI_API_KEY", "someone-else", "k")]),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let event = support::wait_for_event(&h.client, &h.ns, name, "DriftCorrected", TIMEOUT).await;
    assert!(
        support::note_of(&event).starts_with("secret_references of remote deployment"),
        "{:?}",
        event.note
    );
    support::eventually(TIMEOUT, "the references restored", || async {
        let d = h.cp.get_deployment(&id).await.ok()?;
        let mut restored = d.secret_references.clone();
        restored.sort();
        (restored == refs).then_some(())
    })
    .await;
    let previous = obj
        .status
        .as_ref()
        .and_then(|s| s.latest_revision_id.clone());
    h.wait_ready_past(name, previous.as_deref(), TIMEOUT).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        h.emulator.requests().await.count(route::PATCH),
        patches + 3,
        "the spec change, the outside change, one correction"
    );

    // The value of the Secret of that name shows nowhere.
    h.assert_unseen(name, &[DATA_PLANE_VALUE]).await;
}

/// Creates `manifest` (a POST: server-side apply refuses a duplicate
/// list-map key before validation, with a 500) and returns the API server's
/// refusal message.
async fn refused(api: &Api<AgentDeployment>, manifest: Value) -> String {
    let name = manifest["metadata"]["name"].as_str().unwrap().to_owned();
    let obj: AgentDeployment = serde_json::from_value(manifest).unwrap();
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => panic!("{name} was admitted"),
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 422, "{name}: {e:?}");
            e.message
        }
        Err(e) => panic!("{name}: {e}"),
    }
}

#[tokio::test]
async fn references_are_refused_at_admission_where_the_service_would() {
    test_support::skip_without!(Envtest);
    let env = common::shared_env();
    let client = env.client().await;
    let ns = common::test_namespace(&client, "op-secret-refs-admission").await;
    let api: Api<AgentDeployment> = Api::namespaced(client, &ns);
    let one = json!([{"name": "OPENAI_API_KEY", "secretName": "agent-env", "secretKey": "openai"}]);

    let mut github = support::github_deployment("refs-on-github", "main");
    github["spec"]["secretReferences"] = one.clone();
    let m = refused(&api, github).await;
    assert!(m.contains("only for source external_docker"), "{m}");

    let mut no_listener = docker_with_references("refs-without-listener", one.clone());
    no_listener["spec"]["sourceConfig"] = json!({});
    let m = refused(&api, no_listener).await;
    assert!(m.contains("need a self-hosted data plane"), "{m}");

    let mut both = docker_with_references("refs-and-secrets", one.clone());
    both["spec"]["secrets"] = json!([{"name": "OPENAI_API_KEY", "value": "x"}]);
    let m = refused(&api, both).await;
    assert!(m.contains("also in secrets"), "{m}");

    let reserved = docker_with_references(
        "refs-reserved",
        json!([{"name": "POSTGRES_URI", "secretName": "db", "secretKey": "uri"}]),
    );
    let m = refused(&api, reserved).await;
    assert!(m.contains("POSTGRES_URI is reserved"), "{m}");

    let twice = docker_with_references(
        "refs-twice",
        json!([
            {"name": "A_KEY", "secretName": "env", "secretKey": "a"},
            {"name": "A_KEY", "secretName": "env", "secretKey": "b"}
        ]),
    );
    let m = refused(&api, twice).await;
    assert!(m.contains("Duplicate value"), "{m}");

    let bad_secret_name = docker_with_references(
        "refs-bad-secret-name",
        json!([{"name": "A_KEY", "secretName": "Not_A_Name", "secretKey": "a"}]),
    );
    let m = refused(&api, bad_secret_name).await;
    assert!(m.contains("secretName"), "{m}");

    // The valid one is admitted.
    apply_json(
        &api,
        "refs-ok",
        docker_with_references("refs-ok", one.clone()),
    )
    .await;
}
