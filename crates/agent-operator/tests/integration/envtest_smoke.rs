//! Smoke test of the envtest harness: a real kube-apiserver stores objects,
//! enforces RBAC, and our own kubectl reaches it through the generated kubeconfig.

use crate::common;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, ResourceExt};
use test_support::envtest::read_crds_from_dir;

#[tokio::test]
async fn a_config_map_round_trips_through_the_real_api_server() {
    test_support::skip_without!(Envtest);
    let client = common::client().await;
    let ns = common::test_namespace(&client, "smoke").await;
    let api: Api<ConfigMap> = Api::namespaced(client, &ns);
    let data = BTreeMap::from([("greeting".to_owned(), "hello".to_owned())]);
    let created = api
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some("smoke".to_owned()),
                    ..ObjectMeta::default()
                },
                data: Some(data.clone()),
                ..ConfigMap::default()
            },
        )
        .await
        .expect("creating the ConfigMap");
    // Set by the server (etcd revision and UID), so it really went through storage.
    assert!(created.metadata.uid.is_some());
    assert!(created.metadata.resource_version.is_some());

    let read = api.get("smoke").await.expect("reading the ConfigMap back");
    assert_eq!(read.data, Some(data));
    assert_eq!(read.metadata.uid, created.metadata.uid);
    assert_eq!(read.metadata.namespace.as_deref(), Some(ns.as_str()));
}

#[tokio::test]
async fn rbac_is_enforced_for_other_users() {
    test_support::skip_without!(Envtest);
    let env = common::shared_env();
    let mut config = env.env().config().clone();
    config.auth_info.impersonate = Some("nobody".to_owned());
    let nobody = kube::Client::try_from(config).expect("building the impersonating client");
    let err = Api::<Namespace>::all(nobody)
        .list(&Default::default())
        .await
        .expect_err("an unbound user must not list namespaces");
    assert!(
        matches!(&err, kube::Error::Api(status) if status.code == 403),
        "expected 403 Forbidden, got {err}"
    );
}

#[tokio::test]
async fn kubectl_reaches_the_api_server_through_the_generated_kubeconfig() {
    test_support::skip_without!(Envtest);
    let env = common::shared_env();
    // hack/envtest/install.sh builds kubectl with kube-apiserver and etcd:
    // assets without it are a broken install, and this test fails rather
    // than passing over itself (only `skip_without!` may skip, and says so).
    let mut kubectl = env.kubectl().unwrap_or_else(|| {
        panic!(
            "kubectl is not in the envtest assets directory {}: hack/envtest/install.sh \
             (`make setup`) builds it with kube-apiserver and etcd",
            env.env().assets_dir().display()
        )
    });
    let client = env.client().await;
    let ns = common::test_namespace(&client, "kubectl").await;
    let output = kubectl
        .args(["get", "ns", &ns, "-o", "name"])
        .output()
        .expect("running kubectl");
    assert!(
        output.status.success(),
        "kubectl get ns failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        format!("namespace/{ns}")
    );
}

#[tokio::test]
async fn every_crd_of_the_repository_is_installed_and_established() {
    test_support::skip_without!(Envtest);
    let env = common::shared_env();
    let expected: Vec<String> = read_crds_from_dir(&common::crds_dir())
        .expect("reading crds/")
        .iter()
        .map(|crd| crd.name_any())
        .collect();
    assert_eq!(env.crds(), expected.as_slice());
    let api: Api<CustomResourceDefinition> = Api::all(env.client().await);
    for name in expected {
        let crd = api.get(&name).await.expect("reading the CRD");
        let established = crd
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        assert!(established, "CRD {name} is not Established");
    }
}
