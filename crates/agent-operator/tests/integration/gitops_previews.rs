//! The preview templates of `deploy/gitops/previews/` (the issue "Bring an
//! existing workspace under GitOps, and throwaway preview environments",
//! item 4): the Argo CD ApplicationSet with the pull-request generator and
//! the Flux Operator ResourceSet with a GitHubPullRequest input provider.
//! Neither tool runs here, so the test renders each template itself, with
//! the generator's parameters faked for two pull requests, substituting
//! them the way the tool would: the ApplicationSet's Go template actions
//! `{{ .number }}` and `{{ .head_sha }}` (with `missingkey=error`: an action
//! left over fails), then the Application's kustomize `nameSuffix` and
//! `patches` over its path and its destination namespace; the ResourceSet's
//! `<< inputs.id >>` and `<< inputs.branch >>`. What they render is applied
//! to the real API server with the CRDs (server-side dry run), so the
//! schema and CEL rules of `spec.expiry` and `spec.verify` check it.

use crate::install_manifests::{apply, documents, ensure_namespace, kustomize_overlay};

use serde_json::{Value, json};

/// Two pull requests as the generators would report them.
const PULL_REQUESTS: [(&str, &str, &str); 2] = [
    (
        "42",
        "feature/faster-search",
        "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c",
    ),
    ("7", "fix-typo", "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678"),
];

fn file(path: &str) -> Vec<Value> {
    documents(&std::fs::read_to_string(test_support::repo_root().join(path)).unwrap())
}

/// Checks one rendered preview: an AgentDeployment of namespace `agents`
/// with the name of pull request `number`, an expiry and a verification.
fn check_preview(doc: &Value, name: &str) {
    assert_eq!(doc["kind"], "AgentDeployment", "{doc}");
    assert_eq!(doc["metadata"]["name"], name, "{doc}");
    assert_eq!(doc["metadata"]["namespace"], "agents", "{doc}");
    assert!(doc["spec"]["expiry"].is_object(), "an expiry: {doc}");
    assert!(doc["spec"]["verify"].is_object(), "a verification: {doc}");
}

/// The ApplicationSet's template with the pull-request generator's
/// parameters substituted (Go template with `missingkey=error`).
fn argo_application(template: &Value, number: &str, head_sha: &str) -> Value {
    let text = template
        .to_string()
        .replace("{{ .number }}", number)
        .replace("{{ .head_sha }}", head_sha);
    assert!(
        !text.contains("{{"),
        "a template action the test does not fake: {text}"
    );
    serde_json::from_str(&text).unwrap()
}

#[test]
fn the_argo_cd_applicationset_renders_one_preview_per_pull_request() {
    test_support::skip_without!(Envtest);
    ensure_namespace("agents");
    let docs = file("deploy/gitops/previews/argocd/applicationset.yaml");
    assert_eq!(docs.len(), 1);
    let set = &docs[0];
    assert_eq!(set["kind"], "ApplicationSet");
    assert_eq!(set["spec"]["goTemplate"], true);
    let generator = &set["spec"]["generators"][0]["pullRequest"]["github"];
    assert!(generator["repo"].is_string(), "{set}");
    let mut rendered = Vec::new();
    for (number, _, sha) in PULL_REQUESTS {
        let app = argo_application(&set["spec"]["template"], number, sha);
        let source = &app["spec"]["source"];
        let path = source["path"]
            .as_str()
            .unwrap()
            .strip_prefix("agent-operator/")
            .expect("a path of this project");
        let kustomize = &source["kustomize"];
        let mut out = kustomize_overlay(json!({
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": [format!("../{path}")],
            "nameSuffix": kustomize["nameSuffix"],
            "patches": kustomize["patches"],
        }));
        assert_eq!(out.len(), 1, "one AgentDeployment per pull request");
        // Argo CD sets the destination namespace on objects without one.
        out[0]["metadata"]["namespace"] = app["spec"]["destination"]["namespace"].clone();
        let name = format!("research-agent-pr-{number}");
        check_preview(&out[0], &name);
        assert_eq!(app["metadata"]["name"], name.as_str());
        assert_eq!(
            out[0]["spec"]["sourceRevisionConfig"]["imageUri"],
            format!("registry.example.com/acme/research-agent:sha-{sha}")
        );
        assert_eq!(
            out[0]["metadata"]["labels"]["agentserver.dev/pull-request"],
            number
        );
        rendered.append(&mut out);
    }
    apply(&rendered, true);
}

/// The ResourceSet's resources with the input provider's inputs
/// substituted.
fn flux_resources(resources: &Value, id: &str, branch: &str) -> Vec<Value> {
    let text = resources
        .to_string()
        .replace("<< inputs.id >>", id)
        .replace("<< inputs.branch >>", branch);
    assert!(
        !text.contains("<<"),
        "a template input the test does not fake: {text}"
    );
    serde_json::from_str(&text).unwrap()
}

#[test]
fn the_flux_resourceset_renders_one_preview_per_pull_request() {
    test_support::skip_without!(Envtest);
    ensure_namespace("agents");
    let docs = file("deploy/gitops/previews/flux/resourceset.yaml");
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["ResourceSetInputProvider", "ResourceSet"]);
    let (provider, set) = (&docs[0], &docs[1]);
    assert_eq!(provider["spec"]["type"], "GitHubPullRequest");
    assert_eq!(
        set["spec"]["inputsFrom"][0]["name"],
        provider["metadata"]["name"]
    );
    let mut rendered = Vec::new();
    for (id, branch, _) in PULL_REQUESTS {
        let mut out = flux_resources(&set["spec"]["resources"], id, branch);
        assert_eq!(out.len(), 1, "one AgentDeployment per pull request");
        check_preview(&out[0], &format!("support-agent-pr-{id}"));
        assert_eq!(out[0]["spec"]["sourceRevisionConfig"]["repoRef"], branch);
        rendered.append(&mut out);
    }
    apply(&rendered, true);
}
