//! Deletion in any order (issue "Day two in GitOps", item 1): a bundle
//! (API key Secret, AgentControlPlane, AgentDeployment) deleted in one
//! command, in every order of its documents, and every object of a
//! namespace deleted at once (as the namespace controller does, one
//! collection per kind), leave 0 remote deployments and 0 objects
//! `Terminating`. The operator runs cluster-wide as the shipped
//! ServiceAccount (ClusterRole of `deploy/overlays/cluster-wide`), on an API
//! server of its own so that it sees no other test's objects. Where the
//! deletion truly cannot go on (the plane and its key gone before this
//! operator ever read them), the AgentDeployment says `DeletionBlocked`
//! with the fix, and `deletionPolicy: Orphan` releases it.

use crate::{common, support};

use std::time::Duration;

use agent_operator::api::{AgentControlPlane, AgentDeployment};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PatchParams};
use serde_json::{Value, json};
use support::{
    API_KEY, AgentDeploymentManifest, Harness, OperatorOptions, OperatorProcess, WORKSPACE,
    apply_json, condition, route, wait_for,
};

const TIMEOUT: Duration = Duration::from_secs(90);

/// The documents of one bundle, by kind.
#[derive(Clone, Copy, Debug)]
enum Doc {
    Secret,
    Plane,
    Deployment,
}

/// Every order of the three documents.
const ORDERS: [[Doc; 3]; 6] = [
    [Doc::Secret, Doc::Plane, Doc::Deployment],
    [Doc::Secret, Doc::Deployment, Doc::Plane],
    [Doc::Plane, Doc::Secret, Doc::Deployment],
    [Doc::Plane, Doc::Deployment, Doc::Secret],
    [Doc::Deployment, Doc::Secret, Doc::Plane],
    [Doc::Deployment, Doc::Plane, Doc::Secret],
];

/// A cluster-wide operator (no `--namespace`) as the shipped ServiceAccount.
fn cluster_wide_operator(h: &Harness) -> OperatorProcess {
    OperatorProcess::start_with(
        &h.kubeconfig,
        OperatorOptions {
            log_name: &h.test,
            namespaces: vec![],
            extra: support::FAST_POLLING.to_vec(),
            ..OperatorOptions::default()
        },
    )
}

/// Applies bundle `i` in `ns`: Secret `key-i`, AgentControlPlane `plane-i`
/// on the harness's emulator, AgentDeployment `agent-i` on that plane.
async fn apply_bundle(h: &Harness, ns: &str, i: usize) {
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), ns);
    let planes: Api<AgentControlPlane> = Api::namespaced(h.client.clone(), ns);
    let deployments: Api<AgentDeployment> = Api::namespaced(h.client.clone(), ns);
    let key = format!("key-{i}");
    apply_json(
        &secrets,
        &key,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": key},
               "stringData": {"api-key": API_KEY}}),
    )
    .await;
    let plane = format!("plane-{i}");
    apply_json(
        &planes,
        &plane,
        json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentControlPlane",
               "metadata": {"name": plane},
               "spec": {"url": h.emulator.base_url, "workspaceId": WORKSPACE,
                        "apiKeySecretRef": {"name": key, "key": "api-key"}}}),
    )
    .await;
    let name = format!("agent-{i}");
    let manifest = AgentDeploymentManifest::github(&name, "main")
        .spec("name", format!("{ns}-agent-{i}"))
        .spec("controlPlaneRef", json!({"name": plane}))
        .secret("LOG_LEVEL", "info")
        .build();
    apply_json(&deployments, &name, manifest).await;
}

/// Deletes the documents of bundle `i` in `order`, one request after the
/// other without waiting (what `kubectl delete -f bundle.yaml` sends).
async fn delete_bundle(client: &kube::Client, ns: &str, i: usize, order: [Doc; 3]) {
    let dp = DeleteParams::default();
    for doc in order {
        let result = match doc {
            Doc::Secret => Api::<Secret>::namespaced(client.clone(), ns)
                .delete(&format!("key-{i}"), &dp)
                .await
                .map(|_| ()),
            Doc::Plane => Api::<AgentControlPlane>::namespaced(client.clone(), ns)
                .delete(&format!("plane-{i}"), &dp)
                .await
                .map(|_| ()),
            Doc::Deployment => Api::<AgentDeployment>::namespaced(client.clone(), ns)
                .delete(&format!("agent-{i}"), &dp)
                .await
                .map(|_| ()),
        };
        result.unwrap_or_else(|e| panic!("deleting {doc:?} of bundle {i}: {e}"));
    }
}

/// Objects of the operator's kinds left in `ns` and how many of them carry
/// a deletion timestamp (`Terminating`).
async fn left_in(client: &kube::Client, ns: &str) -> (Vec<String>, usize) {
    let lp = ListParams::default();
    let deployments = Api::<AgentDeployment>::namespaced(client.clone(), ns)
        .list(&lp)
        .await
        .expect("listing AgentDeployments");
    let planes = Api::<AgentControlPlane>::namespaced(client.clone(), ns)
        .list(&lp)
        .await
        .expect("listing AgentControlPlanes");
    let mut names = Vec::new();
    let mut terminating = 0;
    for m in deployments.items.iter().map(|d| &d.metadata) {
        names.push(format!("agd/{}", m.name.clone().unwrap_or_default()));
        terminating += usize::from(m.deletion_timestamp.is_some());
    }
    for m in planes.items.iter().map(|p| &p.metadata) {
        names.push(format!("acp/{}", m.name.clone().unwrap_or_default()));
        terminating += usize::from(m.deletion_timestamp.is_some());
    }
    (names, terminating)
}

/// Waits until no object of `names` is left in `ns` but `keep`, then
/// returns (remote deployments left, objects Terminating).
async fn wait_all_gone(h: &Harness, ns: &str, keep: &[&str]) -> (usize, usize) {
    let (left, terminating) =
        support::eventually(TIMEOUT, "every deleted object to be gone", || async {
            let (left, terminating) = left_in(&h.client, ns).await;
            let left: Vec<String> = left
                .into_iter()
                .filter(|n| !keep.contains(&n.as_str()))
                .collect();
            left.is_empty().then_some((left, terminating))
        })
        .await;
    assert!(left.is_empty());
    let remote = h
        .remote_deployments()
        .await
        .into_iter()
        .filter(|d| d.name.starts_with(ns))
        .count();
    (remote, terminating)
}

/// An API server of the test's own with a cluster-wide operator and `n`
/// bundles ([`apply_bundle`]) whose AgentDeployments are Ready. Bound as
/// `let (_env, h)`, the harness is dropped (and checks its budget and scans
/// for secrets) before the API server stops.
async fn bundles_ready(test: &str, n: usize) -> (test_support::envtest::TestEnv, Harness) {
    let env = common::own_env(&[]).await;
    let mut h = Harness::quick(test)
        .on(&env)
        .without_operator()
        .start()
        .await;
    h.operator = Some(cluster_wide_operator(&h));
    let ns = h.ns.clone();
    for i in 0..n {
        apply_bundle(&h, &ns, i).await;
    }
    for i in 0..n {
        h.wait_ready(&format!("agent-{i}"), TIMEOUT).await;
    }
    (env, h)
}

#[tokio::test]
async fn a_bundle_deleted_in_one_command_in_any_order_leaves_nothing() {
    test_support::skip_without!(Envtest);
    let (_env, h) = bundles_ready("op-delete-bundle", ORDERS.len()).await;
    let ns = h.ns.clone();
    assert_eq!(
        h.remote_deployments()
            .await
            .iter()
            .filter(|d| d.name.starts_with(&ns))
            .count(),
        ORDERS.len()
    );
    // Every bundle deleted at once, each in its own order.
    let deletes = ORDERS
        .iter()
        .enumerate()
        .map(|(i, order)| delete_bundle(&h.client, &ns, i, *order));
    futures::future::join_all(deletes).await;
    let (remote, terminating) = wait_all_gone(&h, &ns, &["acp/default"]).await;
    eprintln!(
        "bundle deleted in {} orders: remote deployments left {remote}, objects Terminating {terminating}",
        ORDERS.len()
    );
    assert_eq!(remote, 0, "every remote deployment was deleted");
    assert_eq!(terminating, 0, "nothing is left Terminating");
    assert_eq!(
        h.emulator.requests().await.count(route::DELETE),
        ORDERS.len() as u64,
        "one DELETE per deployment"
    );
}

#[tokio::test]
async fn a_namespace_deleted_at_once_leaves_nothing() {
    test_support::skip_without!(Envtest);
    const BUNDLES: usize = 4;
    let (_env, h) = bundles_ready("op-delete-namespace", BUNDLES).await;
    let ns = h.ns.clone();
    // The namespace goes Terminating (creates, events included, are refused
    // from now on); with no namespace controller in this API server, the
    // test deletes every collection at once as that controller does.
    Api::<Namespace>::all(h.client.clone())
        .delete(&ns, &DeleteParams::default())
        .await
        .expect("deleting the namespace");
    let dp = DeleteParams::default();
    let lp = ListParams::default();
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), &ns);
    let planes: Api<AgentControlPlane> = Api::namespaced(h.client.clone(), &ns);
    let (a, b, c) = tokio::join!(
        secrets.delete_collection(&dp, &lp),
        planes.delete_collection(&dp, &lp),
        h.api.delete_collection(&dp, &lp),
    );
    a.expect("deleting the Secrets");
    b.expect("deleting the AgentControlPlanes");
    c.expect("deleting the AgentDeployments");
    let (remote, terminating) = wait_all_gone(&h, &ns, &[]).await;
    eprintln!(
        "namespace of {BUNDLES} bundles deleted at once: remote deployments left {remote}, objects Terminating {terminating}"
    );
    assert_eq!(remote, 0, "every remote deployment was deleted");
    assert_eq!(terminating, 0, "nothing is left Terminating");
}

/// The plane deleted before this operator ever read it: nothing in this
/// process can delete the remote deployment. The AgentDeployment says so
/// (`Stalled`/`DeletionBlocked`, an event), with the fix, and switching to
/// `Orphan` releases it without a request.
#[tokio::test]
async fn a_deletion_that_cannot_go_on_says_why_and_how_to_release_it() {
    test_support::skip_without!(Envtest);
    let mut h = Harness::quick("op-delete-blocked-fix").start().await;
    let name = "stranded-agent";
    let id = h
        .converge(support::github_deployment(name, "main"), TIMEOUT)
        .await;
    // The operator stops; the plane and its key go (the plane's finalizer
    // removed by hand, as a forced deletion would).
    h.operator.take().expect("an operator").kill().await;
    let planes: Api<AgentControlPlane> = Api::namespaced(h.client.clone(), &h.ns);
    planes
        .delete("default", &DeleteParams::default())
        .await
        .unwrap();
    planes
        .patch(
            "default",
            &PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("removing the plane's finalizer");
    Api::<Secret>::namespaced(h.client.clone(), &h.ns)
        .delete("cp-api-key", &DeleteParams::default())
        .await
        .unwrap();
    h.api.delete(name, &DeleteParams::default()).await.unwrap();
    h.operator = Some(h.start_operator(&[]));

    let obj = wait_for(&h.api, name, TIMEOUT, "Stalled DeletionBlocked", |o| {
        let stalled = condition(o, "Stalled")?;
        (stalled.status == "True" && stalled.reason == "DeletionBlocked").then(|| o.clone())
    })
    .await;
    let message = condition(&obj, "Ready").unwrap().message;
    for part in [
        id.as_str(),
        "AgentControlPlane",
        "not found",
        "re-create",
        "deletionPolicy",
        "Orphan",
    ] {
        assert!(message.contains(part), "{part:?} in {message}");
    }
    let event = support::wait_for_event(&h.client, &h.ns, name, "DeletionBlocked", TIMEOUT).await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));

    // The advice of the message, applied as written.
    let patch: Value = serde_json::from_str(
        message
            .split("-p '")
            .nth(1)
            .and_then(|s| s.split('\'').next())
            .expect("the message holds a kubectl patch"),
    )
    .expect("the patch of the message is JSON");
    h.api
        .patch(
            name,
            &PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .expect("the advised patch is accepted");
    support::wait_until_gone(&h.api, name, TIMEOUT).await;
    assert_eq!(h.emulator.requests().await.count(route::DELETE), 0);
    assert_eq!(
        h.cp.get_deployment(&id).await.unwrap().status.as_deref(),
        Some("READY"),
        "Orphan leaves the remote deployment running"
    );
}

/// No stray Warning on the way out (issue "Day two in GitOps", item 8): an
/// AgentDeployment whose env Secret goes while its deletion is under way
/// (a slow remote delete) finishes the deletion without a `SecretNotFound`
/// Warning: a deletion pass never reads the environment.
#[tokio::test]
async fn a_secret_gone_during_the_deletion_leaves_no_stray_warning() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-delete-no-stray")
        .delete_seconds(2.0)
        .start()
        .await;
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), &h.ns);
    apply_json(
        &secrets,
        "agent-env",
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "agent-env"},
               "stringData": {"token": "stray-warning-token-value"}}),
    )
    .await;
    let name = "leaving-agent";
    let manifest = AgentDeploymentManifest::github(name, "main")
        .secret_ref("TOKEN", "agent-env", "token")
        .build();
    h.converge(manifest, TIMEOUT).await;
    h.api.delete(name, &DeleteParams::default()).await.unwrap();
    wait_for(&h.api, name, TIMEOUT, "Deleting", |o| {
        (condition(o, "Ready")?.reason == "Deleting").then_some(())
    })
    .await;
    secrets
        .delete("agent-env", &DeleteParams::default())
        .await
        .unwrap();
    support::wait_until_gone(&h.api, name, TIMEOUT).await;
    let reasons = support::event_reasons(&h.client, &h.ns, name).await;
    assert!(
        !reasons.iter().any(|r| r == "SecretNotFound"),
        "no stray SecretNotFound: {reasons:?}"
    );
    assert!(reasons.iter().any(|r| r == "Deleted"), "{reasons:?}");
}
