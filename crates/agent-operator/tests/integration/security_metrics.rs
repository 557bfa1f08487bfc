//! `/metrics` behind Kubernetes authorization (`--metrics-authorization`,
//! docs/SECURITY.md, "Network"): with the RBAC of
//! `deploy/components/metrics-authorization`, the operator answers `/metrics`
//! only to a bearer token whose identity may `get /metrics` — checked with
//! real ServiceAccount tokens (TokenRequest) against the real kube-apiserver:
//! no token and an unknown token are 401, a ServiceAccount without the
//! grant is 403, one bound to `agent-operator-metrics-reader` gets the
//! metrics; `/livez` and `/readyz` stay open for the kubelet.

use crate::install_manifests::{self, documents, helm, succeed};
use crate::security_rbac::service_account_token;
use crate::{common, support};

use std::time::Duration;

use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;
use serde_json::json;
use support::{OperatorOptions, OperatorProcess, apply_json};

const TIMEOUT: Duration = Duration::from_secs(60);

/// A token of the ServiceAccount `ns`/`name`, created if missing.
async fn token(admin: &kube::Client, ns: &str, name: &str) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), ns);
    apply_json(
        &accounts,
        name,
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}),
    )
    .await;
    service_account_token(admin, ns, name).await
}

/// GET `path` of the operator with an optional bearer token: (status, body).
async fn scrape(operator: &OperatorProcess, path: &str, token: Option<&str>) -> (u16, String) {
    agent_operator::controlplane::client::install_crypto_provider();
    let mut request = reqwest::Client::new()
        .get(format!("{}{path}", operator.http_url()))
        .timeout(Duration::from_secs(10));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let answer = request.send().await.expect("the operator answers");
    let status = answer.status().as_u16();
    (status, answer.text().await.unwrap_or_default())
}

#[tokio::test]
async fn metrics_answer_only_tokens_allowed_to_get_them() {
    test_support::skip_without!(Envtest);
    let env = common::shared_env();
    let admin = env.client().await;
    let ns = common::test_namespace(&admin, "metrics-auth").await;
    // The operator's ServiceAccount in `ns` with the shipped namespaced
    // RBAC, plus the component's review rules bound to it.
    let subject = format!("namespace: {ns}");
    for file in [
        "base/rbac.yaml",
        "overlays/namespaced/watched/rbac.yaml",
        "components/metrics-authorization/rbac.yaml",
    ] {
        let text = std::fs::read_to_string(common::deploy_dir().join(file))
            .unwrap()
            .replace("namespace: agent-operator", &subject)
            .replace(
                "kind: ClusterRoleBinding\nmetadata:\n  name: agent-operator-metrics-auth",
                &format!("kind: ClusterRoleBinding\nmetadata:\n  name: {ns}-metrics-auth"),
            );
        test_support::envtest::apply_manifests(&admin, file.as_ref(), &text, &ns)
            .await
            .unwrap_or_else(|e| panic!("applying {file}: {e}"));
    }
    let prometheus = token(&admin, &ns, "prometheus").await;
    let stranger = token(&admin, &ns, "stranger").await;
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": format!("{ns}-metrics-reader")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "agent-operator-metrics-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": ns}]
    });
    let bindings: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> = Api::all(admin.clone());
    apply_json(&bindings, &format!("{ns}-metrics-reader"), binding).await;

    let operator = OperatorProcess::start_with(
        env.kubeconfig_path(),
        OperatorOptions {
            log_name: "metrics-auth",
            namespaces: vec![&ns],
            extra: vec!["--metrics-authorization"],
            service_account: Some((&ns, "agent-operator")),
            ..OperatorOptions::default()
        },
    );
    operator.wait_for_status("/readyz", 200, TIMEOUT).await;
    assert_eq!(scrape(&operator, "/livez", None).await.0, 200);

    let (status, body) = scrape(&operator, "/metrics", None).await;
    assert_eq!(status, 401, "no token: {body}");
    assert!(!body.contains("agent_operator_"), "{body}");
    assert_eq!(
        scrape(&operator, "/metrics", Some("not-a-token")).await.0,
        401,
        "an unknown token"
    );
    let (status, body) = scrape(&operator, "/metrics", Some(&stranger)).await;
    assert_eq!(status, 403, "a ServiceAccount without the grant: {body}");
    let (status, body) = scrape(&operator, "/metrics", Some(&prometheus)).await;
    assert_eq!(status, 200, "the reader: {body}");
    assert!(body.contains("agent_operator_"), "{body}");

    let log = std::fs::read_to_string(support::log_dir().join("metrics-auth-operator.log"))
        .expect("the operator log");
    assert!(
        !log.contains(&prometheus) && !log.contains(&stranger),
        "a scraper's token is in the operator log"
    );
}

fn rules_of(docs: &[serde_json::Value], name: &str) -> serde_json::Value {
    docs.iter()
        .find(|d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no ClusterRole {name}"))["rules"]
        .clone()
}

#[test]
fn the_chart_and_the_component_turn_on_the_same_authorization() {
    test_support::skip_without!(Envtest);
    test_support::skip_without!(Tools);
    let repo = test_support::repo_root();
    let component = documents(
        &std::fs::read_to_string(repo.join("deploy/components/metrics-authorization/rbac.yaml"))
            .unwrap(),
    );
    let mut command = helm();
    command
        .args(["template", "metrics-it"])
        .arg(install_manifests::chart())
        .args([
            "--set",
            "metrics.authorization=true",
            "--set",
            "metrics.serviceMonitor.enabled=true",
            "--api-versions",
            install_manifests::SERVICE_MONITOR_API,
        ]);
    let chart = documents(&succeed(command, None).0);
    for (ours, theirs) in [
        (
            "agent-operator-metrics-auth",
            "metrics-it-agent-operator-metrics-auth",
        ),
        (
            "agent-operator-metrics-reader",
            "metrics-it-agent-operator-metrics-reader",
        ),
    ] {
        assert_eq!(
            rules_of(&chart, theirs),
            rules_of(&component, ours),
            "{theirs}"
        );
    }
    let deployment = chart
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("a Deployment");
    assert!(
        deployment["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .unwrap()
            .contains(&json!("--metrics-authorization")),
        "the chart does not pass --metrics-authorization"
    );
    let monitor = chart
        .iter()
        .find(|d| d["kind"] == "ServiceMonitor")
        .expect("a ServiceMonitor");
    assert_eq!(
        monitor["spec"]["endpoints"][0]["bearerTokenFile"],
        "/var/run/secrets/kubernetes.io/serviceaccount/token"
    );
}
