//! The shipped NetworkPolicy names its peers where they are known
//! (docs/SECURITY.md, "Network"): the HTTP port (metrics and probes) only
//! from namespaces labelled `agentserver.dev/scrape-metrics: "true"`, DNS only
//! to the cluster DNS pods, and, with the Helm chart's `apiServerCIDRs` and
//! `controlPlaneCIDRs`, HTTPS only to those addresses. Every kustomize
//! overlay and the chart render the same rules, and the kube-apiserver
//! accepts them (`--dry-run=server`). envtest runs no network plugin, so the
//! test checks the policy, not its enforcement.

use crate::common;

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

fn run(mut command: Command, stdin: Option<&str>) -> String {
    let what = format!("{command:?}");
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut pipe = child.stdin.take().expect("stdin");
    if let Some(text) = stdin {
        pipe.write_all(text.as_bytes()).expect("writing stdin");
    }
    drop(pipe);
    let out = child.wait_with_output().expect("waiting");
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn network_policy(yaml: &str) -> Value {
    use serde::Deserialize;
    yaml_serde::Deserializer::from_str(yaml)
        .map(|doc| Value::deserialize(doc).expect("a YAML document"))
        .find(|d| d["kind"] == "NetworkPolicy")
        .expect("a NetworkPolicy")
}

fn kubectl() -> Command {
    common::shared_env()
        .kubectl()
        .expect("kubectl is not in the envtest assets directory: run `make setup`")
}

fn kustomize(overlay: &str) -> Value {
    let mut command = kubectl();
    command.arg("kustomize").arg(
        test_support::repo_root()
            .join("deploy/overlays")
            .join(overlay),
    );
    network_policy(&run(command, None))
}

fn helm(args: &[&str]) -> Value {
    let home = std::env::temp_dir().join("agent-operator-helm-home");
    let mut command = Command::new(test_support::prerequisites::tool("helm"));
    command
        .env_remove("KUBECONFIG")
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_DATA_HOME", home.join("data"))
        .args(["template", "netpol-it"])
        .arg(test_support::repo_root().join("deploy/helm/agent-operator"))
        .args(args);
    network_policy(&run(command, None))
}

/// The rules of `policy` (`ingress` or `egress`) that open `port`.
fn rules_with_port<'a>(policy: &'a Value, direction: &str, port: Value) -> Vec<&'a Value> {
    policy["spec"][direction]
        .as_array()
        .expect("rules")
        .iter()
        .filter(|r| {
            r["ports"]
                .as_array()
                .is_some_and(|ps| ps.iter().any(|p| p["port"] == port))
        })
        .collect()
}

/// The peer checks common to every rendering.
fn assert_known_peers(policy: &Value, what: &str) {
    let ingress = policy["spec"]["ingress"].as_array().expect("ingress rules");
    assert!(!ingress.is_empty(), "{what}: no ingress rule");
    for rule in ingress {
        assert_eq!(
            rule["from"],
            json!([{"namespaceSelector": {"matchLabels": {"agentserver.dev/scrape-metrics": "true"}}}]),
            "{what}: the HTTP port is open to more than the metrics namespaces: {rule}"
        );
    }
    let dns = rules_with_port(policy, "egress", json!(53));
    assert!(!dns.is_empty(), "{what}: no DNS rule");
    for rule in dns {
        assert_eq!(
            rule["to"],
            json!([{
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}
            }]),
            "{what}: DNS goes to more than the cluster DNS pods: {rule}"
        );
    }
}

#[test]
fn the_network_policy_names_its_peers_where_they_are_known() {
    test_support::skip_without!(Envtest);
    test_support::skip_without!(Tools);
    let base = kustomize("cluster-wide");
    for overlay in ["cluster-wide", "namespaced", "ha"] {
        let policy = kustomize(overlay);
        assert_known_peers(&policy, overlay);
        assert_eq!(policy["spec"], base["spec"], "{overlay} differs");
    }
    let chart = helm(&[]);
    assert_known_peers(&chart, "helm default");
    for direction in ["ingress", "egress", "policyTypes"] {
        assert_eq!(
            chart["spec"][direction], base["spec"][direction],
            "the chart's {direction} differs from deploy/base/networkpolicy.yaml"
        );
    }

    // With the addresses known, HTTPS goes only there.
    let narrowed = helm(&[
        "--set",
        "networkPolicy.apiServerCIDRs={10.0.0.10/32}",
        "--set",
        "networkPolicy.controlPlaneCIDRs={10.20.0.0/24}",
        "--set",
        "networkPolicy.extraEgressPorts={8443}",
    ]);
    assert_known_peers(&narrowed, "helm with CIDRs");
    for rule in rules_with_port(&narrowed, "egress", json!(6443)) {
        assert_eq!(
            rule["to"],
            json!([{"ipBlock": {"cidr": "10.0.0.10/32"}}]),
            "{rule}"
        );
    }
    for rule in rules_with_port(&narrowed, "egress", json!(8443)) {
        assert_eq!(
            rule["to"],
            json!([{"ipBlock": {"cidr": "10.20.0.0/24"}}]),
            "{rule}"
        );
    }
    for rule in rules_with_port(&narrowed, "egress", json!(443)) {
        assert!(
            rule["to"][0]["ipBlock"].is_object(),
            "443 to any address: {rule}"
        );
    }

    // The API server accepts each rendering.
    let ns = format!("netpol-{}", std::process::id());
    let mut create = kubectl();
    create.args(["create", "namespace", &ns]);
    run(create, None);
    for policy in [&base, &chart, &narrowed] {
        let mut object = policy.clone();
        object["metadata"]["namespace"] = json!(ns);
        let mut apply = kubectl();
        apply.args(["apply", "--server-side", "--dry-run=server", "-f", "-"]);
        run(apply, Some(&object.to_string()));
    }
}
