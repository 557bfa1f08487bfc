//! Moving between versions, as docs/INSTALL.md and docs/VERSIONING.md
//! tell it, on a kube-apiserver of the test's own (CRDs are replaced, which
//! the tests sharing the common one must not see):
//!
//! - CRDs applied with kubectl are handed over to the Helm chart
//!   (`crds.enabled`): the upgrade is refused without the documented steps,
//!   and the block of INSTALL.md, run as written, makes it pass with every
//!   object kept;
//! - a downgrade to the previous release's CRDs
//!   (`crates/agent-operator/fixtures/previous-release/crds/`, `git show
//!   64b0dfc:crds/...`) prunes the newer fields, and the command of
//!   VERSIONING.md frees an AgentControlPlane kept by the newer
//!   `agentserver.dev/in-use` finalizer.

use crate::common;
use crate::install_manifests::{chart, helm, kubectl_on, succeed};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use test_support::envtest::TestEnv;

const IN_USE: &str = "agentserver.dev/in-use";
/// The Helm release of the hand-over.
const RELEASE: &str = "handover";

fn repo() -> &'static Path {
    test_support::repo_root()
}

/// The first ```sh block after the line containing `heading` in `doc`.
fn sh_block(doc: &str, heading: &str) -> String {
    let text = std::fs::read_to_string(repo().join(doc)).unwrap();
    let after = &text[text
        .find(heading)
        .unwrap_or_else(|| panic!("{heading} in {doc}"))..];
    let start = after.find("```sh\n").expect("a sh block") + "```sh\n".len();
    let body = &after[start..];
    let end = body.find("```").expect("the block's end");
    // Blocks inside a list are indented.
    body[..end]
        .lines()
        .map(str::trim_start)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs `script` with bash in the repository, with the envtest kubectl and
/// the tools' helm first on PATH and `env`'s kubeconfig; (success, output).
fn run_script(env: &TestEnv, script: &str) -> (bool, String) {
    let kubectl = kubectl_on(env).get_program().to_owned();
    let helm_command = helm();
    let mut path: Vec<PathBuf> = vec![
        PathBuf::from(kubectl).parent().unwrap().to_owned(),
        PathBuf::from(helm_command.get_program())
            .parent()
            .unwrap()
            .to_owned(),
    ];
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let mut command = Command::new("bash");
    command
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(repo())
        .env("PATH", std::env::join_paths(path).unwrap())
        .env("KUBECONFIG", env.kubeconfig_path());
    for (k, v) in helm_command.get_envs() {
        if let Some(v) = v {
            command.env(k, v);
        }
    }
    let out = command.output().expect("running bash");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// `kubectl <args>` on `env`; its stdout.
fn kubectl(env: &TestEnv, args: &[&str], stdin: Option<&str>) -> String {
    let mut command = kubectl_on(env);
    command.args(args);
    succeed(command, stdin).0
}

fn get_json(env: &TestEnv, args: &[&str]) -> Value {
    let mut all = vec!["get", "-o", "json"];
    all.extend_from_slice(args);
    serde_json::from_str(&kubectl(env, &all, None)).unwrap()
}

/// The namespace `agents` with the AgentControlPlane `default` (holding
/// `finalizers`) and its uid.
fn control_plane(env: &TestEnv, finalizers: &[&str]) -> String {
    kubectl(env, &["create", "namespace", "agents"], None);
    let acp = json!({
        "apiVersion": "agentserver.dev/v1alpha1",
        "kind": "AgentControlPlane",
        "metadata": {"name": "default", "namespace": "agents", "finalizers": finalizers},
        "spec": {
            "url": "http://127.0.0.1:8585",
            "workspaceId": "00000000-0000-4000-8000-000000000001",
            "apiKeySecretRef": {"name": "agent-platform-api-key", "key": "api-key"},
        },
    });
    kubectl(
        env,
        &["apply", "--server-side", "-f", "-"],
        Some(&acp.to_string()),
    );
    get_json(env, &["-n", "agents", "acp", "default"])["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn kubectl_applied_crds_are_handed_over_to_the_chart() {
    test_support::skip_without!(Envtest);
    test_support::skip_without!(Tools);
    let env = common::own_env(&[]).await;
    let uid = control_plane(&env, &[]);
    let chart = chart().display().to_string();
    // The release of the block, renamed so that its cluster-wide objects do
    // not meet the shipped RBAC own_env installed.
    let install = format!("helm install {RELEASE} {chart} -n agent-operator --create-namespace");
    let (ok, out) = run_script(&env, &install);
    assert!(ok, "{out}");
    // Without the steps, Helm refuses to adopt the CRDs.
    let upgrade = format!(
        "helm upgrade {RELEASE} {chart} -n agent-operator --reuse-values --set crds.enabled=true"
    );
    let (ok, out) = run_script(&env, &upgrade);
    assert!(!ok, "{out}");
    assert!(out.contains("invalid ownership metadata"), "{out}");
    // INSTALL.md's block, as written.
    let steps = sh_block(
        "docs/INSTALL.md",
        "### CRDs applied with kubectl, handed over",
    );
    assert!(steps.contains("--set crds.enabled=true"), "{steps}");
    assert_eq!(
        steps.matches("release=agent-operator ").count(),
        1,
        "{steps}"
    );
    let steps = steps.replace("release=agent-operator ", &format!("release={RELEASE} "));
    let (ok, out) = run_script(&env, &steps);
    assert!(ok, "{steps}\n{out}");
    for crd in ["agentdeployments", "agentcontrolplanes", "agentcrons"] {
        let crd = get_json(&env, &["crd", &format!("{crd}.agentserver.dev")]);
        let annotations = &crd["metadata"]["annotations"];
        assert_eq!(annotations["meta.helm.sh/release-name"], RELEASE);
        assert_eq!(annotations["helm.sh/resource-policy"], "keep", "{crd}");
    }
    let acp = get_json(&env, &["-n", "agents", "acp", "default"]);
    assert_eq!(acp["metadata"]["uid"], uid.as_str(), "the object is kept");
}

#[tokio::test]
async fn a_downgrade_leaves_what_versioning_says() {
    test_support::skip_without!(Envtest);
    let env = common::own_env(&[]).await;
    control_plane(&env, &[IN_USE]);
    let text = std::fs::read_to_string(repo().join("examples/agent-deployment.yaml")).unwrap();
    let mut agd = crate::install_manifests::documents(&text)
        .into_iter()
        .find(|d| d["kind"] == "AgentDeployment")
        .unwrap();
    agd["metadata"]["namespace"] = json!("agents");
    agd["spec"]["adoptionPolicy"] = json!("ByName");
    kubectl(
        &env,
        &["apply", "--server-side", "-f", "-"],
        Some(&agd.to_string()),
    );
    let status = json!({"status": {"controlPlane": {
        "url": "http://127.0.0.1:8585", "workspaceId": "00000000-0000-4000-8000-000000000001"}}});
    kubectl(
        &env,
        &[
            "-n",
            "agents",
            "patch",
            "agd",
            "support-agent",
            "--subresource",
            "status",
            "--type",
            "merge",
            "-p",
            &status.to_string(),
        ],
        None,
    );
    let before = get_json(&env, &["-n", "agents", "agd", "support-agent"]);
    assert_eq!(before["spec"]["adoptionPolicy"], "ByName");
    assert!(before["status"]["controlPlane"].is_object(), "{before}");

    let previous = repo().join("crates/agent-operator/fixtures/previous-release/crds");
    kubectl(
        &env,
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            &previous.display().to_string(),
        ],
        None,
    );
    let after = get_json(&env, &["-n", "agents", "agd", "support-agent"]);
    assert!(
        after["spec"].get("adoptionPolicy").is_none(),
        "pruned: {after}"
    );
    assert!(
        after["status"].get("controlPlane").is_none(),
        "pruned: {after}"
    );

    // A plane deleted under the newer finalizer stays until the command.
    kubectl(
        &env,
        &["-n", "agents", "delete", "acp", "default", "--wait=false"],
        None,
    );
    let kept = get_json(&env, &["-n", "agents", "acp", "default"]);
    assert!(kept["metadata"]["deletionTimestamp"].is_string(), "{kept}");
    let command = sh_block("docs/VERSIONING.md", "- **Downgrade**");
    assert!(command.contains(IN_USE), "{command}");
    let (ok, out) = run_script(&env, &command);
    assert!(ok, "{command}\n{out}");
    let gone = || {
        let mut c = kubectl_on(&env);
        c.args([
            "-n",
            "agents",
            "get",
            "acp",
            "default",
            "--ignore-not-found",
            "-o",
            "name",
        ]);
        c.output().map(|o| o.stdout.is_empty()).unwrap_or(false)
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !gone() {
        assert!(
            std::time::Instant::now() < deadline,
            "the plane is still there"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
