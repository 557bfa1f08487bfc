//! One owner per remote deployment (docs/BEHAVIOUR.md, "One owner per
//! remote deployment"), tried as a GitOps user changes resources: the
//! operator runs cluster-wide and leader-elected as the shipped
//! ServiceAccount (`HarnessBuilder::cluster_wide`), on an API server of its
//! own, and changes are applied the way Argo CD and Flux apply them (the
//! new object first, then the prune of the old one). Each test counts the
//! emulator's requests.

use crate::{common, support};

use std::time::Duration;

use agent_operator::api::AgentDeployment;
use agent_operator::api::conditions::READY;
use kube::Api;
use kube::api::DeleteParams;
use support::{AgentDeploymentManifest, Harness, HarnessBuilder, condition, route};

const TIMEOUT: Duration = Duration::from_secs(60);

/// The shape of these tests on `env`: cluster-wide, leader-elected, the
/// shipped RBAC, quick revisions.
fn owners<'e>(test: &str, env: &'e test_support::envtest::TestEnv) -> HarnessBuilder<'e> {
    Harness::quick(test)
        .on(env)
        .cluster_wide()
        .operator_flags(&support::FAST_POLLING)
}

/// A `github` AgentDeployment `name` whose remote name is `remote`, with
/// one secret.
fn agent(name: &str, remote: &str) -> serde_json::Value {
    AgentDeploymentManifest::github(name, "main")
        .spec("name", remote)
        .secret("LOG_LEVEL", "info")
        .build()
}

/// The message of the Ready condition of `obj`.
fn ready_message(obj: &AgentDeployment) -> String {
    condition(obj, READY).map(|c| c.message).unwrap_or_default()
}

/// Asserts the emulator saw exactly one create and no delete, patch or
/// redeploy since the start (the first object's create is the only
/// mutation), and that deployment `id` has `revisions` revisions.
async fn only_the_first_create(h: &Harness, id: &str, revisions: usize) {
    let counts = h.emulator.requests().await;
    assert_eq!(counts.count(route::CREATE), 1, "{counts:?}");
    assert_eq!(counts.count(route::DELETE), 0, "{counts:?}");
    assert_eq!(counts.count(route::PATCH), 0, "{counts:?}");
    assert_eq!(counts.count(route::REDEPLOY), 0, "{counts:?}");
    assert_eq!(h.revisions(id).await.len(), revisions, "revision history");
    assert_eq!(
        h.remote_deployments().await.len(),
        1,
        "no second deployment"
    );
}

/// A rename in Git, applied as Argo CD and Flux apply it: `b` (same
/// `spec.name`) first, then the prune of `a`. `b` waits as a
/// `NameConflict` naming `a`; the prune hands the deployment over instead of
/// deleting it: same id, same URL, the revision history kept, no DELETE,
/// no second POST, an event on both naming the other.
#[tokio::test]
async fn a_rename_applied_then_pruned_keeps_the_deployment() {
    test_support::skip_without!(Envtest);
    let env = common::own_env(&[]).await;
    let h = owners("own-rename", &env).start().await;
    let id = h.converge(agent("a", "support-agent"), TIMEOUT).await;
    let url = h.api.get("a").await.unwrap().status.unwrap().url;

    h.apply(agent("b", "support-agent")).await;
    let b = h.wait_stalled("b", "NameConflict", TIMEOUT).await;
    let message = ready_message(&b);
    assert!(
        message.contains(&format!("{}/a", h.ns)) && message.contains(&id),
        "the conflict names the holder: {message}"
    );
    h.api.delete("a", &DeleteParams::default()).await.unwrap();

    let b = h.wait_ready("b", TIMEOUT).await;
    let status = b.status.clone().unwrap();
    assert_eq!(status.deployment_id.as_deref(), Some(id.as_str()));
    assert_eq!(status.url, url, "same URL");
    support::wait_until_gone(&h.api, "a", TIMEOUT).await;
    let gave = support::wait_for_event(&h.client, &h.ns, "a", "HandedOver", TIMEOUT).await;
    assert!(
        gave.note
            .unwrap_or_default()
            .contains(&format!("{}/b", h.ns)),
        "the old object's event names the new one"
    );
    let took = support::wait_for_event(&h.client, &h.ns, "b", "HandedOver", TIMEOUT).await;
    assert!(
        took.note
            .unwrap_or_default()
            .contains(&format!("{}/a", h.ns)),
        "the new object's event names the old one"
    );
    only_the_first_create(&h, &id, 1).await;
}

/// A move to another namespace, applied then pruned: the same hand-over
/// across namespaces, both namespaces having an AgentControlPlane on the
/// same workspace.
#[tokio::test]
async fn a_namespace_move_applied_then_pruned_keeps_the_deployment() {
    test_support::skip_without!(Envtest);
    let env = common::own_env(&[]).await;
    let h = owners("own-move", &env).start().await;
    let to = h.team("own-move-to", None).await;
    let id = h.converge(agent("agent", "support-agent"), TIMEOUT).await;
    let url = h.api.get("agent").await.unwrap().status.unwrap().url;

    let moved: Api<AgentDeployment> = Api::namespaced(h.client.clone(), &to);
    support::apply_json(&moved, "agent", agent("agent", "support-agent")).await;
    support::wait_for(
        &moved,
        "agent",
        TIMEOUT,
        "NameConflict naming the holder",
        |o| {
            (support::is_stalled_with(o, "NameConflict")
                && ready_message(o).contains(&format!("{}/agent", h.ns)))
            .then_some(())
        },
    )
    .await;
    h.api
        .delete("agent", &DeleteParams::default())
        .await
        .unwrap();

    let obj = support::wait_for(&moved, "agent", TIMEOUT, "Ready", |o| {
        support::is_ready_now(o).then(|| o.clone())
    })
    .await;
    let status = obj.status.unwrap();
    assert_eq!(status.deployment_id.as_deref(), Some(id.as_str()));
    assert_eq!(status.url, url);
    support::wait_until_gone(&h.api, "agent", TIMEOUT).await;
    only_the_first_create(&h, &id, 1).await;
}

/// Two claimants: a second object naming the held deployment in
/// `spec.deploymentId` is refused before any request (`AlreadyOwned`,
/// naming the holder), a third with the same remote name is a
/// `NameConflict` naming the holder; no request changes the deployment.
/// When the holder goes, the explicit claimant takes it over.
#[tokio::test]
async fn a_second_owner_is_refused_naming_the_holder() {
    test_support::skip_without!(Envtest);
    let env = common::own_env(&[]).await;
    let h = owners("own-second", &env).start().await;
    let other = h.team("own-second-b", None).await;
    let id = h.converge(agent("a", "support-agent"), TIMEOUT).await;
    let holder = format!("{}/a", h.ns);
    let gets_before = h.requests_about(&id).await;

    let theirs: Api<AgentDeployment> = Api::namespaced(h.client.clone(), &other);
    let mut adopter = agent("b", "support-agent");
    adopter["spec"]["deploymentId"] = id.clone().into();
    support::apply_json(&theirs, "b", adopter).await;
    support::apply_json(&theirs, "c", agent("c", "support-agent")).await;
    for (name, reason) in [("b", "AlreadyOwned"), ("c", "NameConflict")] {
        let obj = support::wait_for(&theirs, name, TIMEOUT, reason, |o| {
            support::is_stalled_with(o, reason).then(|| o.clone())
        })
        .await;
        let message = ready_message(&obj);
        assert!(message.contains(&holder), "{name}: {message}");
        assert!(
            !message.contains("set spec.deploymentId"),
            "{name}: no advice that makes a second owner: {message}"
        );
    }
    let counts = h.emulator.requests().await;
    assert_eq!(counts.count(route::PATCH), 0, "{counts:?}");
    assert_eq!(counts.count(route::REDEPLOY), 0, "{counts:?}");
    assert_eq!(counts.count(route::DELETE), 0, "{counts:?}");
    assert_eq!(
        h.requests_about(&id).await,
        gets_before,
        "the adoption by id was refused before any request about the deployment"
    );

    // The holder goes: the explicit claimant takes the deployment over.
    h.api.delete("a", &DeleteParams::default()).await.unwrap();
    let b = support::wait_for(&theirs, "b", TIMEOUT, "Ready", |o| {
        support::is_ready_now(o).then(|| o.clone())
    })
    .await;
    assert_eq!(
        b.status.unwrap().deployment_id.as_deref(),
        Some(id.as_str())
    );
    let c = theirs.get("c").await.unwrap();
    assert!(
        support::is_stalled_with(&c, "NameConflict"),
        "c still waits"
    );
    only_the_first_create(&h, &id, 1).await;
}
