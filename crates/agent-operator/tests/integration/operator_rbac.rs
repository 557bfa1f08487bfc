//! Least privilege, tested: operators started by the tests act as the
//! ServiceAccount of `deploy/base/rbac.yaml`, bound to the ClusterRole of
//! `deploy/overlays/cluster-wide/rbac.yaml`, through impersonation (see
//! `support::OperatorProcess`), so the RBAC that ships is the RBAC that is
//! tested. Here: the impersonation is real (the identity is the
//! ServiceAccount's, and a verb it lacks is forbidden); the namespaced RBAC
//! (`deploy/overlays/namespaced/watched/rbac.yaml`) is enough for an operator run with
//! `--namespace` and leader election, without the ClusterRole; and the
//! namespaced Role grants exactly what the ClusterRole grants.

use crate::{common, support};

use std::time::Duration;

use agent_operator::api::AgentDeployment;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use serde_json::json;
use support::{
    Harness, OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT, OperatorOptions, OperatorProcess,
    apply_json, github_deployment, is_ready_now, wait_for,
};

const TIMEOUT: Duration = Duration::from_secs(60);

/// A client acting as the ServiceAccount `name` of `namespace`, the way
/// operators started by the tests do.
async fn client_as(namespace: &str, name: &str) -> kube::Client {
    let path = support::impersonating_kubeconfig(common::kubeconfig_path(), namespace, name);
    support::client_from(&path).await
}

/// Whether `result` is a 403 Forbidden (panics on success or another error).
pub(crate) fn is_forbidden<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> bool {
    match result {
        Err(kube::Error::Api(status)) => status.code == 403,
        other => panic!("expected 403 Forbidden, got {other:?}"),
    }
}

/// Applies a GitHub AgentDeployment with a Secret reference in `ns`, waits
/// for Ready, deletes it and waits until the finalizer let it go.
pub(crate) async fn converge_and_delete(admin: &kube::Client, ns: &str, name: &str) {
    let api: Api<AgentDeployment> = Api::namespaced(admin.clone(), ns);
    let mut manifest = github_deployment(name, "main");
    manifest["spec"]["secrets"] = json!([
        {"name": "OPENAI_API_KEY", "valueFrom": {"secretKeyRef": {"name": "cp-api-key", "key": "api-key"}}}
    ]);
    apply_json(&api, name, manifest).await;
    wait_for(&api, name, TIMEOUT, "Ready=True", |o| {
        is_ready_now(o).then_some(())
    })
    .await;
    api.delete(name, &DeleteParams::default())
        .await
        .expect("deleting");
    support::wait_until_gone(&api, name, TIMEOUT).await;
}

/// The ServiceAccount and leader-election Role (`deploy/base/`).
const BASE_RBAC: &str = "base/rbac.yaml";
/// The ClusterRole and its binding (the cluster-wide overlay).
const CLUSTER_RBAC: &str = "overlays/cluster-wide/rbac.yaml";
/// The Role and RoleBinding of a watched namespace (the namespaced overlay).
const NAMESPACED_RBAC: &str = "overlays/namespaced/watched/rbac.yaml";

fn read_deploy(file: &str) -> String {
    std::fs::read_to_string(common::deploy_dir().join(file))
        .unwrap_or_else(|e| panic!("reading deploy/{file}: {e}"))
}

/// The documents of `text` whose top-level `kind` is one of `kinds`.
fn documents_of(text: &str, kinds: &[&str]) -> String {
    text.split("\n---\n")
        .filter(|doc| {
            doc.lines()
                .any(|l| kinds.iter().any(|k| l == format!("kind: {k}")))
        })
        .collect::<Vec<_>>()
        .join("\n---\n")
}

#[tokio::test]
async fn operators_act_as_the_shipped_service_account_and_lack_unused_verbs() {
    test_support::skip_without!(Envtest);
    let admin = common::client().await;
    let ns = common::test_namespace(&admin, "rbac-identity").await;
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), &ns);
    apply_json(
        &secrets,
        "victim",
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "victim"},
               "stringData": {"k": "v"}}),
    )
    .await;
    let sa = client_as(OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT).await;

    // The API server sees the ServiceAccount, not the admin certificate.
    let review = Api::<SelfSubjectReview>::all(sa.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .expect("SelfSubjectReview");
    let user = review.status.and_then(|s| s.user_info).unwrap_or_default();
    assert_eq!(
        user.username.as_deref(),
        Some("system:serviceaccount:agent-operator:agent-operator")
    );
    assert!(
        user.groups
            .unwrap_or_default()
            .contains(&"system:serviceaccounts:agent-operator".to_owned())
    );

    // What the operator does is allowed...
    let sa_secrets: Api<Secret> = Api::namespaced(sa.clone(), &ns);
    sa_secrets.get("victim").await.expect("get on secrets");
    let sa_deployments: Api<AgentDeployment> = Api::namespaced(sa.clone(), &ns);
    sa_deployments
        .list(&ListParams::default())
        .await
        .expect("list on agentdeployments");
    // ...and what it does not do is forbidden: deleting, creating or
    // updating a Secret, deleting an AgentDeployment.
    assert!(is_forbidden(
        sa_secrets.delete("victim", &DeleteParams::default()).await
    ));
    let secret: Secret =
        serde_json::from_value(json!({"metadata": {"name": "planted"}, "stringData": {"k": "v"}}))
            .unwrap();
    assert!(is_forbidden(
        sa_secrets.create(&PostParams::default(), &secret).await
    ));
    let victim = secrets.get("victim").await.unwrap();
    assert!(is_forbidden(
        sa_secrets
            .replace("victim", &PostParams::default(), &victim)
            .await
    ));
    assert!(is_forbidden(
        sa_deployments
            .delete("anything", &DeleteParams::default())
            .await
    ));
    // Events: created through core/v1 (which keeps lastTimestamp), never
    // deleted or read; the events.k8s.io group is not granted at all.
    let sa_events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(sa.clone(), &ns);
    let event: k8s_openapi::api::core::v1::Event = serde_json::from_value(json!({
        "metadata": {"name": "rbac-check"},
        "involvedObject": {"kind": "AgentDeployment", "name": "x", "namespace": ns},
        "reason": "Check", "message": "m", "type": "Normal",
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z",
    }))
    .unwrap();
    sa_events
        .create(&PostParams::default(), &event)
        .await
        .expect("create on core events");
    assert!(is_forbidden(
        sa_events
            .delete("rbac-check", &DeleteParams::default())
            .await
    ));
    assert!(is_forbidden(
        Api::<k8s_openapi::api::events::v1::Event>::namespaced(sa.clone(), &ns)
            .list(&ListParams::default())
            .await
    ));
    // Leases only in the operator's namespace.
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(sa.clone(), &ns);
    assert!(is_forbidden(leases.list(&ListParams::default()).await));
    // The admin can do all of it: the 403s come from the impersonated identity.
    secrets
        .delete("victim", &DeleteParams::default())
        .await
        .expect("the admin deletes the Secret");
}

/// The RBAC of a namespaced install, with `home` as the operator's own
/// namespace: there the base's ServiceAccount and leader-election Role (not
/// the ClusterRole and its binding), and in `watched` the namespaced
/// overlay's Role and RoleBinding. The ServiceAccount gets no cluster-wide
/// grant at all.
pub(crate) async fn install_namespaced_rbac(admin: &kube::Client, home: &str, watched: &str) {
    let subject = format!("namespace: {home}");
    let own = documents_of(
        &read_deploy(BASE_RBAC),
        &["ServiceAccount", "Role", "RoleBinding"],
    )
    .replace("namespace: agent-operator", &subject);
    test_support::envtest::apply_manifests(admin, BASE_RBAC.as_ref(), &own, home)
        .await
        .expect("applying the ServiceAccount and leader-election RBAC");
    let namespaced = read_deploy(NAMESPACED_RBAC).replace("namespace: agent-operator", &subject);
    let applied = test_support::envtest::apply_manifests(
        admin,
        NAMESPACED_RBAC.as_ref(),
        &namespaced,
        watched,
    )
    .await
    .expect("applying the namespaced overlay's Role");
    assert_eq!(
        applied,
        [
            format!("Role {watched}/agent-operator"),
            format!("RoleBinding {watched}/agent-operator")
        ]
    );
}

/// Panics when the operator log `log_name` shows a request refused
/// (forbidden or unauthorized).
pub(crate) fn assert_nothing_refused(log_name: &str) {
    let path = support::log_dir().join(format!("{log_name}-operator.log"));
    let log = std::fs::read_to_string(&path).expect("the operator log");
    assert!(
        !log.contains("forbidden") && !log.contains("Forbidden") && !log.contains("Unauthorized"),
        "the operator was refused something:\n{log}"
    );
}

/// After [`install_namespaced_rbac`] with the harness's namespace as
/// `watched`: `sa`, a client acting as the ServiceAccount
/// `home`/agent-operator, is refused AgentDeployments of all namespaces and
/// Secrets of the operator's usual namespace; an operator run as that
/// ServiceAccount (impersonated, or authenticating with `token`) with
/// `--namespace watched` and leader election in `home` gets ready,
/// converges the AgentDeployment `agent` on the harness's emulator and
/// deletes it through its finalizer, and is refused nothing. The harness
/// checks the request budget and scans for leaked secrets when dropped.
pub(crate) async fn namespaced_operator_converges(
    h: &Harness,
    sa: &kube::Client,
    home: &str,
    agent: &str,
    token: Option<&str>,
) {
    let (admin, watched, log_name) = (&h.client, h.ns.as_str(), h.test.as_str());
    // Nothing outside the watched namespace (and the Lease at home).
    let everywhere: Api<AgentDeployment> = Api::all(sa.clone());
    assert!(is_forbidden(everywhere.list(&ListParams::default()).await));
    let elsewhere: Api<Secret> = Api::namespaced(sa.clone(), OPERATOR_NAMESPACE);
    assert!(is_forbidden(elsewhere.list(&ListParams::default()).await));

    let lease = format!("lease-{watched}");
    let operator = OperatorProcess::start_with(
        &h.kubeconfig,
        OperatorOptions {
            log_name,
            namespaces: vec![watched],
            extra: vec![
                "--leader-elect",
                "--lease-name",
                &lease,
                "--lease-namespace",
                home,
            ],
            service_account: Some((home, "agent-operator")),
            token,
            ..OperatorOptions::default()
        },
    );
    operator.wait_for_status("/readyz", 200, TIMEOUT).await;

    // Deleting goes through the finalizer (a patch) as well.
    converge_and_delete(admin, watched, agent).await;

    assert_nothing_refused(log_name);
}

#[tokio::test]
async fn the_namespaced_role_is_enough_for_an_operator_with_namespace() {
    test_support::skip_without!(Envtest);
    // The watched namespace, the emulator and its plane; the operator is
    // started as the namespaced ServiceAccount below.
    let h = Harness::quick("rbac-namespaced")
        .without_operator()
        .start()
        .await;
    let home = h.namespace("rbac-home").await;
    install_namespaced_rbac(&h.client, &home, &h.ns).await;
    let sa = client_as(&home, "agent-operator").await;
    namespaced_operator_converges(&h, &sa, &home, "scoped-agent", None).await;
}

#[tokio::test]
async fn the_operator_process_really_acts_as_its_service_account() {
    test_support::skip_without!(Envtest);
    // A ServiceAccount without any grant: if the operator ignored the
    // kubeconfig's `as:` it would run as the admin and become ready.
    let env = common::shared_env();
    let admin = env.client().await;
    let ns = common::test_namespace(&admin, "rbac-nobody").await;
    let operator = OperatorProcess::start_with(
        env.kubeconfig_path(),
        OperatorOptions {
            log_name: "rbac-nobody",
            namespaces: vec![&ns],
            service_account: Some((OPERATOR_NAMESPACE, "nobody")),
            ..OperatorOptions::default()
        },
    );
    let log_path = support::log_dir().join("rbac-nobody-operator.log");
    let refused = support::eventually(TIMEOUT, "a 403 in the operator log", || async {
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        log.contains("system:serviceaccount:agent-operator:nobody")
            .then_some(log)
    })
    .await;
    assert!(refused.to_lowercase().contains("forbidden"), "{refused}");
    assert_ne!(
        operator.get("/readyz").await.map(|(status, _)| status),
        Some(200),
        "an operator that cannot watch is not ready"
    );
}

fn rules(text: &str, kind: &str) -> Vec<PolicyRule> {
    let doc = documents_of(text, &[kind]);
    match kind {
        "ClusterRole" => yaml_serde::from_str::<ClusterRole>(&doc)
            .expect("the ClusterRole")
            .rules
            .unwrap_or_default(),
        _ => yaml_serde::from_str::<Role>(&doc)
            .expect("the Role")
            .rules
            .unwrap_or_default(),
    }
}

#[test]
fn the_namespaced_role_grants_what_the_cluster_role_grants() {
    let mut cluster = rules(&read_deploy(CLUSTER_RBAC), "ClusterRole");
    let namespaced = rules(&read_deploy(NAMESPACED_RBAC), "Role");
    assert!(!cluster.is_empty());
    // The cluster-scoped grants a Role cannot hold: namespaces (a deletion
    // blocked in a namespace being deleted says so; their labels decide
    // which may use a ClusterAgentControlPlane) and ClusterAgentControlPlanes
    // (reconciled only by a cluster-wide operator).
    let cluster_scoped = [
        "namespaces",
        "clusteragentcontrolplanes",
        "clusteragentcontrolplanes/status",
    ];
    cluster.retain(|r| {
        let resources = r.resources.clone().unwrap_or_default();
        !resources
            .iter()
            .all(|x| cluster_scoped.contains(&x.as_str()))
    });
    assert_eq!(cluster, namespaced);
    // Least privilege: no wildcard, no write to Secrets, no deletes.
    for rule in &cluster {
        assert!(
            !rule
                .verbs
                .iter()
                .any(|v| v == "*" || v == "delete" || v == "update" || v == "deletecollection"),
            "{rule:?}"
        );
        let resources = rule.resources.clone().unwrap_or_default();
        assert!(!resources.iter().any(|r| r == "*"), "{rule:?}");
        if resources.iter().any(|r| r == "secrets") {
            assert_eq!(rule.verbs, ["get", "list", "watch"]);
        }
    }
}
