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

/// Merge-patches the AgentControlPlane `name` with `patch`.
async fn merge_patch_plane(
    planes: &Api<agent_operator::api::AgentControlPlane>,
    name: &str,
    patch: serde_json::Value,
) {
    planes
        .patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap_or_else(|e| panic!("patching {name} with {patch}: {e}"));
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

/// Prune before apply, through the documented adoption: the old object is
/// given `deletionPolicy: Orphan` first, then pruned (nothing claims the
/// deployment yet, so it is left running); the new one, applied after with
/// `spec.adoptionPolicy: ByName`, adopts it: same id, no second POST, no
/// DELETE.
#[tokio::test]
async fn a_prune_first_rename_is_kept_by_orphan_then_adoption_by_name() {
    test_support::skip_without!(Envtest);
    let env = common::own_env(&[]).await;
    let h = owners("own-prune-first", &env).start().await;
    let id = h.converge(agent("a", "support-agent"), TIMEOUT).await;

    support::merge_patch(
        &h.api,
        "a",
        serde_json::json!({"spec": {"deletionPolicy": "Orphan"}}),
    )
    .await;
    h.api.delete("a", &DeleteParams::default()).await.unwrap();
    support::wait_until_gone(&h.api, "a", TIMEOUT).await;

    let mut b = agent("b", "support-agent");
    b["spec"]["adoptionPolicy"] = "ByName".into();
    h.apply(b).await;
    let b = h.wait_ready("b", TIMEOUT).await;
    assert_eq!(
        b.status.unwrap().deployment_id.as_deref(),
        Some(id.as_str())
    );
    support::wait_for_event(&h.client, &h.ns, "b", "Adopted", TIMEOUT).await;
    only_the_first_create(&h, &id, 1).await;
}

/// A restore from Git: every object of a namespace deleted (as the
/// namespace controller deletes them, one collection per kind) with
/// `deletionPolicy: Orphan`, then the same manifests applied again. With
/// `spec.adoptionPolicy: ByName` in them, each object finds its deployment:
/// no duplicate, no create, no delete.
#[tokio::test]
async fn a_restore_from_git_finds_every_deployment_by_name() {
    test_support::skip_without!(Envtest);
    let env = common::own_env(&[]).await;
    let h = owners("own-restore", &env).start().await;
    let manifest = |i: usize| {
        let mut m = agent(&format!("agent-{i}"), &format!("restore-agent-{i}"));
        m["spec"]["deletionPolicy"] = "Orphan".into();
        m["spec"]["adoptionPolicy"] = "ByName".into();
        m
    };
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(h.converge(manifest(i), TIMEOUT).await);
    }
    ids.sort();

    // The namespace goes: its AgentDeployments, then its plane and key.
    let lp = kube::api::ListParams::default();
    h.api
        .delete_collection(&DeleteParams::default(), &lp)
        .await
        .unwrap();
    for i in 0..3 {
        support::wait_until_gone(&h.api, &format!("agent-{i}"), TIMEOUT).await;
    }
    let planes: Api<agent_operator::api::AgentControlPlane> =
        Api::namespaced(h.client.clone(), &h.ns);
    planes
        .delete_collection(&DeleteParams::default(), &lp)
        .await
        .unwrap();
    support::eventually(TIMEOUT, "the plane gone", || async {
        planes.list(&lp).await.ok()?.items.is_empty().then_some(())
    })
    .await;

    // Restored from Git: the plane, its key, the same manifests.
    support::install_control_plane(&h.client, &h.ns, &h.emulator).await;
    for i in 0..3 {
        h.apply(manifest(i)).await;
    }
    let mut restored = Vec::new();
    for i in 0..3 {
        let obj = h.wait_ready(&format!("agent-{i}"), TIMEOUT).await;
        restored.push(obj.status.unwrap().deployment_id.unwrap());
    }
    restored.sort();
    assert_eq!(restored, ids, "every object found its own deployment");
    let counts = h.emulator.requests().await;
    assert_eq!(counts.count(route::CREATE), 3, "{counts:?}");
    assert_eq!(counts.count(route::DELETE), 0, "{counts:?}");
    assert_eq!(counts.count(route::PATCH), 0, "{counts:?}");
    assert_eq!(h.remote_deployments().await.len(), 3, "no duplicate");
}

/// A plane switch: `spec.controlPlaneRef` of an object that holds a
/// deployment is refused at admission with the move recipe; an
/// AgentControlPlane pointed at another control plane under it stalls the
/// object (`ControlPlaneChanged`) after one read there: no second
/// deployment, no false `RemoteDeleted`. Pointed back, it is Ready again;
/// then the move recipe: a new object on the other plane, the old one
/// deleted with `Orphan`.
#[tokio::test]
async fn a_plane_switch_never_makes_a_second_deployment() {
    test_support::skip_without!(Envtest);
    let env = common::own_env(&[]).await;
    let h = owners("own-plane", &env).start().await;
    let other =
        support::EmulatorProcess::start_with("own-plane-other", &["--step-seconds", "0.2"]).await;
    let id = h.converge(agent("a", "support-agent"), TIMEOUT).await;

    // Another AgentControlPlane of the namespace, on the other emulator.
    let mut plane = serde_json::to_value(
        Api::<agent_operator::api::AgentControlPlane>::namespaced(h.client.clone(), &h.ns)
            .get("default")
            .await
            .unwrap()
            .spec,
    )
    .unwrap();
    plane["url"] = other.base_url.clone().into();
    let planes: Api<agent_operator::api::AgentControlPlane> =
        Api::namespaced(h.client.clone(), &h.ns);
    support::apply_json(
        &planes,
        "other",
        serde_json::json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentControlPlane",
            "metadata": {"name": "other"}, "spec": plane}),
    )
    .await;
    let refused = h
        .api
        .patch(
            "a",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                serde_json::json!({"spec": {"controlPlaneRef": {"name": "other"}}}),
            ),
        )
        .await
        .expect_err("a plane switch under an existing deployment is refused");
    let message = refused.to_string();
    assert!(
        message.contains("spec.controlPlaneRef cannot change")
            && message.contains("docs/RENAME-AND-MOVE.md"),
        "{message}"
    );

    // The plane itself pointed elsewhere: one read there, no create.
    merge_patch_plane(
        &planes,
        "default",
        serde_json::json!({"spec": {"url": other.base_url}}),
    )
    .await;
    let stalled = h.wait_stalled("a", "ControlPlaneChanged", TIMEOUT).await;
    assert!(
        ready_message(&stalled).contains(&id),
        "{}",
        ready_message(&stalled)
    );
    let there = other.requests().await;
    assert_eq!(there.count(route::CREATE), 0, "{there:?}");
    assert!(
        support::events_about(&h.client, &h.ns, "a")
            .await
            .iter()
            .all(|e| e.reason.as_deref() != Some("RemoteDeleted")),
        "no false RemoteDeleted"
    );

    // Pointed back: Ready again, on the same deployment.
    merge_patch_plane(
        &planes,
        "default",
        serde_json::json!({"spec": {"url": h.emulator.base_url}}),
    )
    .await;
    let back = h.wait_ready("a", TIMEOUT).await;
    assert_eq!(
        back.status.unwrap().deployment_id.as_deref(),
        Some(id.as_str())
    );
    only_the_first_create(&h, &id, 1).await;

    // The recipe of docs/RENAME-AND-MOVE.md, "Move to another control
    // plane": a new object on the new plane (the same remote name is no
    // conflict there), then the old one deleted, here with `Orphan`.
    let mut b = agent("b", "support-agent");
    b["spec"]["controlPlaneRef"] = serde_json::json!({"name": "other"});
    h.apply(b).await;
    let b = h.wait_ready("b", TIMEOUT).await;
    let new_id = b.status.unwrap().deployment_id.unwrap();
    assert_ne!(new_id, id);
    support::merge_patch(
        &h.api,
        "a",
        serde_json::json!({"spec": {"deletionPolicy": "Orphan"}}),
    )
    .await;
    h.api.delete("a", &DeleteParams::default()).await.unwrap();
    support::wait_until_gone(&h.api, "a", TIMEOUT).await;
    only_the_first_create(&h, &id, 1).await;
    assert_eq!(other.requests().await.count(route::CREATE), 1);
}

/// Identity from the create on: the status that records the id is written
/// by the pass of the create, so `kubectl get agd` shows READY and STATUS
/// within 2 s of the create, and a `spec.name` edited 1 s after it is
/// refused at admission (it can never be sent: the control plane cannot
/// rename a deployment).
#[tokio::test]
async fn identity_is_recorded_by_the_create_and_locks_the_name_at_once() {
    test_support::skip_without!(Envtest);
    let env = common::own_env(&[]).await;
    // Revisions that take minutes: the object stays in progress.
    let h = owners("own-identity", &env)
        .step_seconds(30.0)
        .start()
        .await;
    h.wait_control_plane_ready(TIMEOUT).await;
    let created = std::time::Instant::now();
    h.apply(agent("a", "support-agent")).await;
    let row = support::eventually(
        Duration::from_secs(10),
        "a READY and STATUS row",
        || async {
            let out = std::process::Command::new(env.kubectl_path()?)
                .env_remove("KUBECONFIG")
                .arg("--kubeconfig")
                .arg(env.kubeconfig_path())
                .args(["get", "agd", "a", "-n", &h.ns, "--no-headers"])
                .output()
                .ok()?;
            let line = String::from_utf8_lossy(&out.stdout).to_string();
            let cols: Vec<&str> = line.split_whitespace().collect();
            (cols.len() >= 4 && cols[1] == "False" && cols[2] == "Creating").then_some(line)
        },
    )
    .await;
    let shown = created.elapsed();
    println!("kubectl get agd after {:.2} s: {row}", shown.as_secs_f64());
    assert!(
        shown < Duration::from_secs(2),
        "READY and STATUS shown {:.2} s after the create: {row}",
        shown.as_secs_f64()
    );
    let obj = h.api.get("a").await.unwrap();
    assert!(obj.status.unwrap().deployment_id.is_some());

    tokio::time::sleep(Duration::from_secs(1)).await;
    let refused = h
        .api
        .patch(
            "a",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"spec": {"name": "renamed-agent"}})),
        )
        .await
        .expect_err("a name change once the deployment exists is refused");
    assert!(
        refused.to_string().contains("spec.name cannot change"),
        "{refused}"
    );
    let counts = h.emulator.requests().await;
    assert_eq!(counts.count(route::CREATE), 1, "{counts:?}");
    assert_eq!(counts.count(route::PATCH), 0, "{counts:?}");
}

/// A namespace deleted while the operator is down, its plane's key Secret
/// gone before the operator could read it: the deletion cannot finish, and
/// the AgentDeployment says exactly that (the namespace is terminating, the
/// remote id it leaves, where it shows afterwards), with no request; the
/// Orphan patch of the message lets the namespace go and leaves the
/// deployment running.
#[tokio::test]
async fn a_namespace_deleted_while_the_operator_is_down_says_what_it_leaves() {
    test_support::skip_without!(Envtest);
    let env = common::own_env(&[]).await;
    let mut h = owners("own-ns-gone", &env).start().await;
    let team = h.team("own-ns-gone-team", None).await;
    let api: Api<AgentDeployment> = Api::namespaced(h.client.clone(), &team);
    support::apply_json(&api, "agent", agent("agent", "team-agent")).await;
    let obj = support::wait_for(&api, "agent", TIMEOUT, "Ready", |o| {
        support::is_ready_now(o).then(|| o.clone())
    })
    .await;
    let id = obj.status.unwrap().deployment_id.unwrap();

    // The operator is down; the namespace is deleted: the namespace
    // controller deletes the Secret (no finalizer: gone), the plane and the
    // AgentDeployment (kept by their finalizers).
    h.operator.take().expect("an operator").kill().await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(h.client.clone());
    namespaces
        .delete(&team, &DeleteParams::default())
        .await
        .unwrap();
    let lp = kube::api::ListParams::default();
    Api::<k8s_openapi::api::core::v1::Secret>::namespaced(h.client.clone(), &team)
        .delete_collection(&DeleteParams::default(), &lp)
        .await
        .unwrap();
    Api::<agent_operator::api::AgentControlPlane>::namespaced(h.client.clone(), &team)
        .delete_collection(&DeleteParams::default(), &lp)
        .await
        .unwrap();
    api.delete_collection(&DeleteParams::default(), &lp)
        .await
        .unwrap();
    // Calls about deployments (the restarted operator's probe of the
    // harness's own plane is a list, not counted).
    let calls_before = h.emulator.requests().await.deployment_calls();
    h.operator = Some(h.start_operator(&support::FAST_POLLING));

    let obj = support::wait_for(&api, "agent", TIMEOUT, "DeletionBlocked", |o| {
        support::is_stalled_with(o, "DeletionBlocked").then(|| o.clone())
    })
    .await;
    let message = ready_message(&obj);
    let terminating = format!("namespace {team} is being deleted");
    for part in [id.as_str(), terminating.as_str(), "unmanaged", "Orphan"] {
        assert!(message.contains(part), "{part:?} in {message}");
    }
    let counts = h.emulator.requests().await;
    assert_eq!(counts.count(route::DELETE), 0, "{counts:?}");
    assert_eq!(
        counts.deployment_calls(),
        calls_before,
        "nothing is sent for the blocked deletion: {counts:?}"
    );

    // The way out of the message: Orphan. The deployment is left running.
    support::merge_patch(
        &api,
        "agent",
        serde_json::json!({"spec": {"deletionPolicy": "Orphan"}}),
    )
    .await;
    support::wait_until_gone(&api, "agent", TIMEOUT).await;
    assert_eq!(
        h.cp.get_deployment(&id).await.unwrap().status.as_deref(),
        Some("READY")
    );
}
