//! The GitOps examples of `deploy/gitops/` (issue "A platform team installs
//! it…", item 4): the Flux Kustomizations and the Argo CD Applications. No
//! Flux or Argo CD runs here, so each object is rendered the way its tool
//! renders it — the path it names, built by kustomize with the images it
//! sets (Flux `spec.images`, Argo CD `kustomize.images`), a folder without a
//! kustomization.yaml taken file by file — and the result is applied to the
//! real API server (server dry run). Also checked: the order (`dependsOn`,
//! sync waves), the CRDs never pruned, and the operator's image the one the
//! example sets, not the unpullable `localhost/` default.
//!
//! The examples' repository vendors this project under `agent-operator/`
//! and keeps the user's resources under `agents/`; here `agents/` is the
//! project's `examples/`.

use crate::install_manifests::{apply, documents, ensure_namespace, kustomize_overlay};

use serde_json::{Value, json};

const IMAGE: &str = "registry.example.com/platform/agent-operator:0.1.0";

/// A repository path of an example (`./agent-operator/x`, `agent-operator/x`,
/// `./agents`) as a path relative to this repository's root.
fn local(path: &str) -> String {
    let path = path.trim_start_matches("./");
    match path.strip_prefix("agent-operator/") {
        Some(rest) => rest.to_owned(),
        None if path == "agents" => "examples".to_owned(),
        None => panic!("an example names {path}, outside agent-operator/ and agents/"),
    }
}

/// What kustomize builds from `path` with `images` (kustomize `images`
/// entries), as its tool would render it.
fn render(path: &str, images: Value) -> Vec<Value> {
    let root = test_support::repo_root();
    let target = root.join(path);
    let resources: Vec<String> = if target.join("kustomization.yaml").exists() {
        vec![format!("../{path}")]
    } else {
        // Flux and Argo CD take a folder without a kustomization.yaml file
        // by file.
        let mut files: Vec<String> = std::fs::read_dir(&target)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".yaml"))
            .map(|n| format!("../{path}/{n}"))
            .collect();
        files.sort();
        files
    };
    kustomize_overlay(json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": resources,
        "images": images,
    }))
}

/// Checks what one object renders: applied (dry run), and the operator's
/// image the example's.
fn check_rendered(name: &str, docs: &[Value]) {
    assert!(!docs.is_empty(), "{name} renders nothing");
    apply(docs, true);
    for d in docs.iter().filter(|d| d["kind"] == "Deployment") {
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0]["image"], IMAGE,
            "{name}: the image the example sets"
        );
    }
}

fn file(path: &str) -> Vec<Value> {
    documents(&std::fs::read_to_string(test_support::repo_root().join(path)).unwrap())
}

#[test]
fn the_flux_kustomizations_render_in_order_and_apply() {
    test_support::skip_without!(Envtest);
    for ns in ["agent-operator", "agents", "default"] {
        ensure_namespace(ns);
    }
    let docs = file("deploy/gitops/flux/agent-operator.yaml");
    let names: Vec<&str> = docs
        .iter()
        .map(|d| d["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["agent-operator-crds", "agent-operator", "agents"]);
    for (d, after) in docs
        .iter()
        .zip([None, Some("agent-operator-crds"), Some("agent-operator")])
    {
        assert_eq!(d["kind"], "Kustomization");
        assert_eq!(d["spec"]["dependsOn"][0]["name"].as_str(), after, "{d}");
        assert_eq!(d["spec"]["wait"], true, "{d}");
    }
    assert_eq!(docs[0]["spec"]["prune"], false, "the CRDs are never pruned");
    let mut deployments = 0;
    for d in &docs {
        let name = d["metadata"]["name"].as_str().unwrap();
        let path = local(d["spec"]["path"].as_str().unwrap());
        let images = d["spec"]["images"].clone();
        let rendered = render(&path, if images.is_null() { json!([]) } else { images });
        deployments += rendered
            .iter()
            .filter(|d| d["kind"] == "Deployment")
            .count();
        check_rendered(name, &rendered);
    }
    assert_eq!(deployments, 1, "the operator, with the example's image");
}

#[test]
fn the_argo_cd_applications_render_in_waves_and_apply() {
    test_support::skip_without!(Envtest);
    for ns in ["agent-operator", "agents", "default"] {
        ensure_namespace(ns);
    }
    let docs = file("deploy/gitops/argocd/applications.yaml");
    let waves: Vec<i64> = docs
        .iter()
        .map(|d| {
            d["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert_eq!(waves, [-2, -1, 0], "CRDs, operator, agents");
    assert_eq!(
        docs[0]["spec"]["syncPolicy"]["automated"]["prune"], false,
        "the CRDs are never pruned"
    );
    let mut deployments = 0;
    for d in &docs {
        assert_eq!(d["kind"], "Application");
        let name = d["metadata"]["name"].as_str().unwrap();
        let path = local(d["spec"]["source"]["path"].as_str().unwrap());
        // Argo CD's `name=newName:tag` form as kustomize `images`.
        let images: Vec<Value> = d["spec"]["source"]["kustomize"]["images"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|i| {
                        let (from, to) = i.as_str().unwrap().split_once('=').unwrap();
                        let (new_name, tag) = to.rsplit_once(':').unwrap();
                        json!({"name": from, "newName": new_name, "newTag": tag})
                    })
                    .collect()
            })
            .unwrap_or_default();
        let rendered = render(&path, Value::Array(images));
        deployments += rendered
            .iter()
            .filter(|d| d["kind"] == "Deployment")
            .count();
        check_rendered(name, &rendered);
    }
    assert_eq!(deployments, 1, "the operator, with the example's image");
    // The health check the Applications rely on is shipped.
    let cm = file("deploy/argocd/argocd-cm.yaml");
    assert!(
        cm[0]["data"]["resource.customizations.health.agentserver.dev_AgentDeployment"].is_string()
    );
}
