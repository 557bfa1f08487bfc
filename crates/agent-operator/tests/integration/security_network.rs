//! The shipped NetworkPolicy names its peers where they are known
//! (docs/SECURITY.md, "Network"): the HTTP port (metrics and probes) only
//! from namespaces labelled `agentserver.dev/scrape-metrics: "true"`, DNS only
//! to the cluster DNS pods, and, with the Helm chart's `apiServerCIDRs` and
//! `controlPlaneCIDRs`, HTTPS only to those addresses. Every kustomize
//! overlay and the chart render the same rules, and the kube-apiserver
//! accepts them (`--dry-run=server`). envtest runs no network plugin, so the
//! test checks the policy, not its enforcement.

use crate::install_manifests::{self, chart, documents, helm, kubectl, succeed};

use serde_json::{Value, json};

fn network_policy_of(docs: Vec<Value>) -> Value {
    docs.into_iter()
        .find(|d| d["kind"] == "NetworkPolicy")
        .expect("a NetworkPolicy")
}

fn kustomize(overlay: &str) -> Value {
    network_policy_of(install_manifests::kustomize(overlay))
}

fn helm_template(args: &[&str]) -> Value {
    let mut command = helm();
    command
        .args(["template", "netpol-it"])
        .arg(chart())
        .args(args);
    network_policy_of(documents(&succeed(command, None).0))
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
    let chart = helm_template(&[]);
    assert_known_peers(&chart, "helm default");
    for direction in ["ingress", "egress", "policyTypes"] {
        assert_eq!(
            chart["spec"][direction], base["spec"][direction],
            "the chart's {direction} differs from deploy/base/networkpolicy.yaml"
        );
    }

    // With the addresses known, HTTPS goes only there.
    let narrowed = helm_template(&[
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
    succeed(create, None);
    for policy in [&base, &chart, &narrowed] {
        let mut object = policy.clone();
        object["metadata"]["namespace"] = json!(ns);
        let mut apply = kubectl();
        apply.args(["apply", "--server-side", "--dry-run=server", "-f", "-"]);
        succeed(apply, Some(&object.to_string()));
    }
}
