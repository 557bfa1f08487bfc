//! Least privilege with a real ServiceAccount token (docs/SECURITY.md,
//! "What the operator can touch"): the other operator tests impersonate the
//! ServiceAccount with an admin kubeconfig; here the operator authenticates
//! the way it does in a pod, with a token the real kube-apiserver issued
//! (TokenRequest) and nothing else. Cluster-wide under the shipped
//! ClusterRole, and namespaced under the namespaced overlay's Role, an
//! AgentDeployment becomes Ready and is deleted through its finalizer with
//! no request refused, and the token is refused what the RBAC does not
//! grant.

use crate::operator_rbac::{
    assert_nothing_refused, converge_and_delete, install_namespaced_rbac, is_forbidden,
    namespaced_operator_converges,
};
use crate::{common, support};

use std::time::Duration;

use agent_operator::api::AgentDeployment;
use k8s_openapi::api::authentication::v1::{
    SelfSubjectReview, TokenRequest, TokenRequestSpec, UserInfo,
};
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::json;
use support::{
    Harness, OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT, OperatorOptions, OperatorProcess,
};

const TIMEOUT: Duration = Duration::from_secs(60);

/// A token of the ServiceAccount `namespace`/`name`, issued by the API
/// server (TokenRequest, one hour, the API server's audience).
pub(crate) async fn service_account_token(
    admin: &kube::Client,
    namespace: &str,
    name: &str,
) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        },
        ..Default::default()
    };
    accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .unwrap_or_else(|e| panic!("TokenRequest for {namespace}/{name}: {e}"))
        .status
        .expect("a TokenRequest status")
        .token
}

/// Who the API server says the token is (SelfSubjectReview).
async fn whoami(client: &kube::Client) -> UserInfo {
    let reviews: Api<SelfSubjectReview> = Api::all(client.clone());
    reviews
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .expect("SelfSubjectReview")
        .status
        .and_then(|s| s.user_info)
        .expect("user info")
}

#[tokio::test]
async fn the_operator_runs_cluster_wide_on_a_real_service_account_token() {
    test_support::skip_without!(Envtest);
    // An API server of its own: a cluster-wide operator on the shared one
    // would reconcile every other test's objects.
    let env = common::own_env(&[]).await;
    // The tenant shape's setup: team a is the harness's namespace, team b
    // joins it on the same emulator; the operator, authenticating with a
    // token, is started below. The budget is checked when `h` is dropped.
    let h = Harness::quick("token-cluster")
        .on(&env)
        .without_operator()
        .start()
        .await;
    let admin = h.client.clone();
    let team_a = h.ns.clone();
    let team_b = h.team("token-team-b", None).await;

    // The shipped ServiceAccount, bound to the shipped ClusterRole (both
    // installed by the shared environment from deploy/).
    let token = service_account_token(&admin, OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT).await;
    let kubeconfig = support::token_kubeconfig(env.kubeconfig_path(), &token);
    let sa = support::client_from(&kubeconfig).await;
    let me = whoami(&sa).await;
    assert_eq!(
        me.username.as_deref(),
        Some("system:serviceaccount:agent-operator:agent-operator")
    );
    assert!(
        me.groups
            .unwrap_or_default()
            .contains(&"system:serviceaccounts".to_owned()),
        "a ServiceAccount's groups"
    );
    // Granted: AgentDeployments of every namespace. Not granted: writing
    // Secrets, reading anything of kinds it does not reconcile.
    let everywhere: Api<AgentDeployment> = Api::all(sa.clone());
    everywhere
        .list(&ListParams::default())
        .await
        .expect("the ClusterRole lists AgentDeployments everywhere");
    let secrets: Api<Secret> = Api::namespaced(sa.clone(), &team_a);
    let secret = serde_json::from_value::<Secret>(json!({
        "metadata": {"name": "planted"}, "stringData": {"k": "v"}
    }))
    .unwrap();
    assert!(is_forbidden(
        secrets.create(&PostParams::default(), &secret).await
    ));
    let accounts: Api<ServiceAccount> = Api::namespaced(sa.clone(), &team_a);
    assert!(is_forbidden(accounts.list(&ListParams::default()).await));

    let lease = format!("lease-{team_a}");
    let operator = OperatorProcess::start_with(
        env.kubeconfig_path(),
        OperatorOptions {
            log_name: "token-cluster",
            namespaces: vec![],
            extra: vec![
                "--leader-elect",
                "--lease-name",
                &lease,
                "--lease-namespace",
                OPERATOR_NAMESPACE,
            ],
            env: vec![("POD_NAME", "token-cluster-0")],
            token: Some(&token),
            ..OperatorOptions::default()
        },
    );
    operator.wait_for_status("/readyz", 200, TIMEOUT).await;
    converge_and_delete(&admin, &team_a, "token-agent-a").await;
    converge_and_delete(&admin, &team_b, "token-agent-b").await;

    assert_nothing_refused("token-cluster");
}

#[tokio::test]
async fn the_operator_runs_namespaced_on_a_real_service_account_token() {
    test_support::skip_without!(Envtest);
    let env = common::shared_env();
    let h = Harness::quick("token-namespaced")
        .without_operator()
        .start()
        .await;
    let admin = h.client.clone();
    let home = h.namespace("token-home").await;
    install_namespaced_rbac(&admin, &home, &h.ns).await;

    let token = service_account_token(&admin, &home, "agent-operator").await;
    let kubeconfig = support::token_kubeconfig(env.kubeconfig_path(), &token);
    let sa = support::client_from(&kubeconfig).await;
    assert_eq!(
        whoami(&sa).await.username,
        Some(format!("system:serviceaccount:{home}:agent-operator"))
    );
    namespaced_operator_converges(&h, &sa, &home, "token-agent", Some(&token)).await;
}
