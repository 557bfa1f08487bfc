//! The registry of kinds (`agent_operator::api::kinds::KINDS`) against
//! every place that lists kinds without being generated from it: the CRD
//! files of `crds/` and of the chart (`make generate`), the RBAC of the
//! cluster-wide and namespaced overlays (the chart's equal them:
//! `install_manifests::the_chart_grants_what_the_overlays_grant`), the
//! reference docs, the reason guide and the Argo CD health keys. A kind
//! missing from any of them fails here, naming the place.

use std::collections::BTreeSet;

use agent_operator::api::kinds::{KINDS, Scope};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use serde_json::Value;

fn read(path: &str) -> String {
    std::fs::read_to_string(test_support::repo_root().join(path))
        .unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

/// The plural of each registry kind, from its CRD.
fn plurals() -> Vec<(&'static str, String, Scope, bool)> {
    KINDS
        .iter()
        .map(|k| (k.kind, (k.crd)().spec.names.plural, k.scope, k.finalizer))
        .collect()
}

/// The `spec.names.kind` of each CRD file of `dir`.
fn crd_kinds(dir: &str) -> BTreeSet<String> {
    let root = test_support::repo_root().join(dir);
    std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| {
            let v: Value = yaml_serde::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            v["spec"]["names"]["kind"].as_str().unwrap().to_owned()
        })
        .collect()
}

/// The verbs `rules` grant on `resource` of agentserver.dev.
fn verbs(rules: &[PolicyRule], resource: &str) -> BTreeSet<String> {
    rules
        .iter()
        .filter(|r| {
            r.api_groups
                .as_ref()
                .is_some_and(|g| g.iter().any(|g| g == "agentserver.dev"))
                && r.resources
                    .as_ref()
                    .is_some_and(|rs| rs.iter().any(|x| x == resource))
        })
        .flat_map(|r| r.verbs.clone())
        .collect()
}

/// The rules of the document of kind `kind` in the YAML file `path`.
fn rules_of(path: &str, kind: &str) -> Vec<PolicyRule> {
    let text = read(path);
    let doc = text
        .split("\n---\n")
        .find(|d| d.lines().any(|l| l == format!("kind: {kind}")))
        .unwrap_or_else(|| panic!("no {kind} in {path}"));
    match kind {
        "ClusterRole" => yaml_serde::from_str::<ClusterRole>(doc).unwrap().rules,
        _ => yaml_serde::from_str::<Role>(doc).unwrap().rules,
    }
    .unwrap_or_default()
}

/// What the operator needs on a kind: read and watch it, write its status,
/// and patch it when it holds a finalizer on it.
fn needed(finalizer: bool) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut own: BTreeSet<String> = ["get", "list", "watch"].map(String::from).into();
    if finalizer {
        own.insert("patch".into());
    }
    (own, ["patch".to_owned()].into())
}

#[test]
fn every_kind_of_the_registry_is_everywhere_kinds_are_listed() {
    let kinds: BTreeSet<String> = KINDS.iter().map(|k| k.kind.to_owned()).collect();
    let mut missing = Vec::new();
    for dir in ["crds", "deploy/helm/agent-operator/files/crds"] {
        let found = crd_kinds(dir);
        if found != kinds {
            missing.push(format!("{dir}: {found:?} (make generate)"));
        }
    }
    let cluster = rules_of("deploy/overlays/cluster-wide/rbac.yaml", "ClusterRole");
    let namespaced = rules_of("deploy/overlays/namespaced/watched/rbac.yaml", "Role");
    let reference = read("docs/reference.md");
    let guide = read("docs/TROUBLESHOOTING.md");
    let argocd = read("deploy/argocd/argocd-cm.yaml");
    for (kind, plural, scope, finalizer) in plurals() {
        let (own, status) = needed(finalizer);
        let mut roles = vec![("the cluster-wide ClusterRole", &cluster)];
        if scope == Scope::Namespaced {
            roles.push(("the namespaced overlay's Role", &namespaced));
        }
        for (what, rules) in roles {
            if !own.is_subset(&verbs(rules, &plural)) {
                missing.push(format!("{kind}: {what} grants {own:?} on {plural}"));
            }
            if !status.is_subset(&verbs(rules, &format!("{plural}/status"))) {
                missing.push(format!("{kind}: {what} grants patch on {plural}/status"));
            }
        }
        if !reference.contains(&format!("## {kind} (`{plural}`)")) {
            missing.push(format!(
                "{kind}: a section of docs/reference.md (make generate)"
            ));
        }
        if !guide.contains(kind) {
            missing.push(format!("{kind}: named in docs/TROUBLESHOOTING.md"));
        }
        if !argocd.contains(&format!("agentserver.dev_{kind}:")) {
            missing.push(format!(
                "{kind}: its key in deploy/argocd/argocd-cm.yaml (make generate)"
            ));
        }
    }
    assert!(missing.is_empty(), "missing:\n{}", missing.join("\n"));
}
