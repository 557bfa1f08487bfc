//! "Supported Kubernetes versions" (docs/VERSIONING.md), backed on the
//! oldest version claimed: a kube-apiserver of
//! [`OLDEST_KUBERNETES_VERSION`], built once by
//! `hack/envtest/install.sh --oldest`, with the current etcd. On it the CRDs
//! install, every admission row of the hostile-input table is refused with
//! the same message as on the current version (CEL rules, `messageExpression`,
//! formats and ranges), the cluster-wide install with the pod policy
//! (ValidatingAdmissionPolicy v1) applies and refuses every hostile spec,
//! and the operator, as the installed ServiceAccount, creates, changes and
//! deletes an AgentDeployment through its finalizer. kubectl is the current
//! one (1.34), as a platform team's newer client would be.

use std::time::Duration;

use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::Value;
use test_support::envtest::{
    OLDEST_KUBERNETES_VERSION, TestEnv, TestEnvOptions, oldest_assets_dir,
};

use crate::install_manifests::{kubectl_on, succeed};
use crate::install_policy::{
    assert_policy_in_force, create_change_delete, operator, tenant_harness, write_policy_overlay,
};
use crate::{common, hostile_input, support};

const TIMEOUT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn the_oldest_supported_kubernetes_takes_the_crds_the_pod_policy_and_the_operator() {
    test_support::skip_without!(Envtest, OldestKubernetes);
    let test = "oldest-kubernetes";
    let env = TestEnv::start(TestEnvOptions {
        assets_dir: Some(oldest_assets_dir().expect("the oldest kube-apiserver")),
        ..TestEnvOptions::default()
    })
    .await
    .unwrap_or_else(|e| panic!("starting kube-apiserver {OLDEST_KUBERNETES_VERSION}: {e}"));
    let client = env.client().await.expect("envtest client");
    let version = client.apiserver_version().await.expect("/version");
    assert_eq!(
        version.git_version, OLDEST_KUBERNETES_VERSION,
        "the API server under test"
    );
    env.install_crds_from_dir(&common::crds_dir())
        .await
        .expect("the CRDs install on the oldest supported version");

    // The tenant, as the install tests have it; the operator is installed
    // below.
    let h = tenant_harness(test, &env).await;
    let tenant = h.ns.clone();

    // Every admission row of the hostile-input table, refused as on 1.34.
    let objects: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &tenant,
        &kube::api::ApiResource::erase::<agent_operator::api::AgentDeployment>(&()),
    );
    let cases = hostile_input::admission_cases();
    assert!(cases.len() >= 20, "the table has {} rows", cases.len());
    let mut problems = Vec::new();
    for (what, manifest, text) in &cases {
        let name = manifest["metadata"]["name"].as_str().unwrap();
        let outcome = objects
            .patch(
                name,
                &PatchParams::apply("tests").force().validation_strict(),
                &Patch::Apply(manifest),
            )
            .await;
        match outcome {
            Err(kube::Error::Api(status)) if status.message.contains(text) => {}
            Err(kube::Error::Api(status)) => problems.push(format!(
                "{what}: refused, but without {text:?}: {} {}",
                status.code, status.message
            )),
            other => problems.push(format!("{what}: not refused: {other:?}")),
        }
    }
    assert!(
        problems.is_empty(),
        "on {OLDEST_KUBERNETES_VERSION}:\n{}",
        problems.join("\n")
    );

    // The cluster-wide install with the pod policy, as install_policy
    // applies it on the current version.
    let ops = "platform-agents";
    let dir = tempfile::tempdir().expect("a temporary directory");
    write_policy_overlay(dir.path(), ops);
    let mut apply = kubectl_on(&env);
    apply.args(["apply", "--server-side", "-k"]).arg(dir.path());
    succeed(apply, None);
    let mut get = kubectl_on(&env);
    get.args([
        "get",
        "validatingadmissionpolicies.v1.admissionregistration.k8s.io",
        "-o",
        "json",
    ]);
    let list: Value = serde_json::from_str(&succeed(get, None).0).expect("a list");
    assert!(
        !list["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .is_empty(),
        "no ValidatingAdmissionPolicy v1 stored"
    );

    let mut operator = operator(&env, test, ops, "agent-operator", vec![], &[]);
    assert_policy_in_force(&client, &tenant).await;
    create_change_delete(&client, &tenant, "oldest-agent").await;
    let exit = operator.terminate(TIMEOUT).await;
    assert!(exit.success(), "the operator exited with {exit}");
    let log = std::fs::read_to_string(support::log_dir().join(format!("{test}-operator.log")))
        .expect("the operator log");
    assert!(
        !log.contains("Forbidden"),
        "the operator was refused something:\n{log}"
    );
}
