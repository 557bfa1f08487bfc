//! The promotion examples of `deploy/gitops/promotion/` (issue 33 item 5):
//! a staging and a production AgentDeployment in two namespaces, the
//! production one promoting from staging through a grant, with the Argo CD
//! Applications and the Flux Kustomizations that sync them. No Argo CD or
//! Flux runs here: each object's path is rendered the way its tool renders
//! a folder without a kustomization.yaml (file by file) and applied to the
//! real API server (server-side dry run), so the schema and the CEL rules
//! of `spec.promotion` and `spec.promotionGrants` check them. docs/PROMOTION.md
//! names every file.

use crate::install_manifests::{apply, documents, ensure_namespace};

use serde_json::Value;

const ROOT: &str = "deploy/gitops/promotion";

fn file(path: &str) -> Vec<Value> {
    documents(&std::fs::read_to_string(test_support::repo_root().join(path)).unwrap())
}

/// A path of an example as its tool names it (the examples' repository
/// vendors this project under `agent-operator/`), relative to this
/// repository.
fn local(path: &str) -> String {
    let path = path.trim_start_matches("./");
    path.strip_prefix("agent-operator/")
        .unwrap_or_else(|| panic!("{path} is outside agent-operator/"))
        .to_owned()
}

/// Every document of the YAML files of the folder `path`, as Argo CD and
/// Flux take a folder without a kustomization.yaml.
fn folder(path: &str) -> Vec<Value> {
    let dir = test_support::repo_root().join(path);
    assert!(
        !dir.join("kustomization.yaml").exists(),
        "{path}: rendered file by file"
    );
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    names.sort();
    names
        .iter()
        .flat_map(|n| file(&format!("{path}/{n}")))
        .collect()
}

/// The one AgentDeployment of `docs`.
fn deployment(docs: &[Value]) -> &Value {
    let found: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == "AgentDeployment")
        .collect();
    assert_eq!(found.len(), 1, "one AgentDeployment: {docs:?}");
    found[0]
}

/// Checks that production promotes from staging through a grant of
/// staging, and applies both (server-side dry run).
fn check_stages(staging: &[Value], production: &[Value]) {
    let (s, p) = (deployment(staging), deployment(production));
    let (s_ns, p_ns) = (
        s["metadata"]["namespace"].as_str().unwrap(),
        p["metadata"]["namespace"].as_str().unwrap(),
    );
    assert_ne!(s_ns, p_ns, "two namespaces");
    let from = &p["spec"]["promotion"]["from"];
    assert_eq!(from["name"], s["metadata"]["name"]);
    assert_eq!(from["namespace"], s_ns);
    assert_eq!(p["spec"]["promotion"]["requireVerified"], true);
    assert!(p["spec"]["promotion"]["soakSeconds"].as_u64().unwrap() > 0);
    assert!(
        p["spec"]["sourceRevisionConfig"]["imageUri"].is_null(),
        "production names no image: {p}"
    );
    let grants: Vec<&str> = s["spec"]["promotionGrants"]
        .as_array()
        .expect("staging grants production")
        .iter()
        .map(|g| g["namespace"].as_str().unwrap())
        .collect();
    assert_eq!(grants, [p_ns]);
    assert!(s["spec"]["verify"].is_object() && p["spec"]["verify"].is_object());
    assert_ne!(
        s["spec"]["name"]
            .as_str()
            .or(s["metadata"]["name"].as_str()),
        p["spec"]["name"]
            .as_str()
            .or(p["metadata"]["name"].as_str()),
        "remote names differ (one workspace)"
    );
    for ns in [s_ns, p_ns] {
        ensure_namespace(ns);
    }
    apply(staging, true);
    apply(production, true);
}

#[test]
fn the_argo_cd_applications_sync_staging_and_production() {
    test_support::skip_without!(Envtest);
    let apps = file(&format!("{ROOT}/argocd/applications.yaml"));
    assert_eq!(apps.len(), 2);
    let rendered: Vec<Vec<Value>> = apps
        .iter()
        .map(|app| {
            assert_eq!(app["kind"], "Application");
            let docs = folder(&local(app["spec"]["source"]["path"].as_str().unwrap()));
            let dest = app["spec"]["destination"]["namespace"].as_str().unwrap();
            assert_eq!(deployment(&docs)["metadata"]["namespace"], dest, "{app}");
            docs
        })
        .collect();
    check_stages(&rendered[0], &rendered[1]);
}

#[test]
fn the_flux_kustomizations_apply_production_after_staging() {
    test_support::skip_without!(Envtest);
    let ks = file(&format!("{ROOT}/flux/kustomizations.yaml"));
    assert_eq!(ks.len(), 2);
    for k in &ks {
        assert_eq!(k["kind"], "Kustomization");
        assert_eq!(k["spec"]["wait"], true, "health-checked: {k}");
    }
    assert_eq!(
        ks[1]["spec"]["dependsOn"][0]["name"], ks[0]["metadata"]["name"],
        "production after staging"
    );
    let staging = folder(&local(ks[0]["spec"]["path"].as_str().unwrap()));
    let production = folder(&local(ks[1]["spec"]["path"].as_str().unwrap()));
    check_stages(&staging, &production);
}

#[test]
fn the_promotion_guide_names_every_example() {
    let guide = std::fs::read_to_string(test_support::repo_root().join("docs/PROMOTION.md"))
        .expect("docs/PROMOTION.md");
    let mut missing = Vec::new();
    let mut stack = vec![test_support::repo_root().join(ROOT)];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path
                    .strip_prefix(test_support::repo_root())
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                if !guide.contains(&rel) {
                    missing.push(rel);
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/PROMOTION.md does not name {missing:?}"
    );
    for reason in [
        "PromotionWaiting",
        "PromotionNotGranted",
        "PromotionSourceMismatch",
        "PromotionCommitMismatch",
    ] {
        assert!(guide.contains(reason), "docs/PROMOTION.md names {reason}");
    }
}
