//! Every manifest of the project's kinds that the project ships — the files
//! of examples/ and examples/more/, and the YAML blocks of README.md and
//! docs/*.md that hold one — goes through every entry point that should
//! read it: `kubectl apply --server-side --dry-run=server` and client-side
//! `kubectl apply --dry-run=server` against the real API server, and, for a
//! file with an AgentDeployment, `agentctl diff` against the emulator (issue
//! "Every shipped manifest works through every entry point", item 2). A new
//! example that one entry point cannot read fails here. (The install
//! manifests, kustomize overlays and the rendered Helm chart, go through the
//! API server in install_manifests.rs.)

use crate::common;

use std::path::PathBuf;

use control_plane_emulator::{self as emulator, ApiKey, DEMO_WORKSPACE_ID, EmulatorConfig};

const KEY: &str = "shipped-manifests-key-5e1d";

/// The shipped manifests: (name for messages, path of a file holding it).
fn shipped(dir: &std::path::Path) -> Vec<(String, PathBuf)> {
    let root = test_support::repo_root();
    let mut out = Vec::new();
    for sub in ["examples", "examples/more"] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(root.join(sub))
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect();
        files.sort();
        for f in files {
            out.push((f.strip_prefix(root).unwrap().display().to_string(), f));
        }
    }
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.push(root.join("README.md"));
    docs.sort();
    for doc in docs {
        let text = std::fs::read_to_string(&doc).unwrap();
        let name = doc.strip_prefix(root).unwrap().display().to_string();
        let mut block: Option<(usize, Vec<&str>)> = None;
        for (i, line) in text.lines().enumerate() {
            let trimmed = line.trim_start();
            match &mut block {
                None if trimmed.starts_with("```yaml") => block = Some((i + 1, Vec::new())),
                Some((start, lines)) if trimmed.starts_with("```") => {
                    // The documents of the project's kinds (and Secrets);
                    // a block may also hold another tool's objects (Flux).
                    let joined = lines.join("\n");
                    let yaml = joined
                        .split("\n---")
                        .filter(|d| {
                            d.lines().any(|l| {
                                l.starts_with("apiVersion: agentserver.dev/")
                                    || l.starts_with("kind: Secret")
                            })
                        })
                        .collect::<Vec<_>>()
                        .join("\n---");
                    if yaml
                        .lines()
                        .any(|l| l.starts_with("apiVersion: agentserver.dev/"))
                    {
                        let path = dir.join(format!("{}-{start}.yaml", name.replace('/', "_")));
                        std::fs::write(&path, &yaml).unwrap();
                        out.push((format!("{name}:{start}"), path));
                    }
                    block = None;
                }
                Some((_, lines)) => lines.push(line),
                None => {}
            }
        }
    }
    out
}

#[tokio::test]
async fn every_shipped_manifest_goes_through_every_entry_point() {
    test_support::skip_without!(Envtest);
    let env = common::shared_env();
    let client = env.client().await;
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
    // The namespaces the shipped manifests name (docs/PLATFORM-PLANES.md's
    // team-a among them).
    for ns in ["default", "agents", "team-a"] {
        let _ = namespaces
            .create(
                &Default::default(),
                &serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).unwrap(),
            )
            .await;
    }
    let emu = emulator::spawn(EmulatorConfig {
        api_keys: vec![ApiKey::new(KEY, DEMO_WORKSPACE_ID)],
        ..Default::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let manifests = shipped(dir.path());
    assert!(manifests.len() >= 9, "{manifests:?}");
    let key_ref = regex::Regex::new(r"key:\s*([A-Za-z_][A-Za-z0-9_]*)").unwrap();
    let mut refused = Vec::new();
    let mut runs = 0;
    let mut files_with_deployments = 0;
    for (name, path) in &manifests {
        for (entry, args) in [
            (
                "kubectl apply --server-side --dry-run=server",
                vec!["apply", "--server-side", "--dry-run=server", "-f"],
            ),
            (
                "kubectl apply --dry-run=server",
                vec!["apply", "--dry-run=server", "-f"],
            ),
        ] {
            let out = env
                .kubectl()
                .expect("kubectl is built by hack/envtest/install.sh")
                .args(&args)
                .arg(path)
                .output()
                .unwrap();
            runs += 1;
            if !out.status.success() {
                refused.push(format!(
                    "{name} through {entry}: {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        let text = std::fs::read_to_string(path).unwrap();
        if !text.contains("kind: AgentDeployment") {
            continue;
        }
        files_with_deployments += 1;
        // Secrets the file does not hold come from the environment, as in
        // a pipeline (`--secret-from-env`).
        // tokio's Command: the emulator serves on this test's runtime.
        let mut agentctl = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentctl"));
        for c in key_ref.captures_iter(&text) {
            agentctl.env(&c[1], "placeholder-value");
        }
        let out = agentctl
            .args(["diff", "--secret-from-env", "-f"])
            .arg(path)
            .env("AGENT_CONTROL_PLANE_URL", emu.base_url())
            .env("AGENT_WORKSPACE_ID", DEMO_WORKSPACE_ID)
            .env("AGENT_API_KEY", KEY)
            .env_remove("AGENT_CONTROL_PLANE_REGION")
            // Never the developer's cluster: agentctl reads one for a
            // Secret the environment does not resolve.
            .env(
                "KUBECONFIG",
                std::env::temp_dir().join("no-cluster/kubeconfig"),
            )
            .output()
            .await
            .unwrap();
        runs += 1;
        // Read: 0 or 1 (what would change), or 3 when the emulator's
        // workspace lacks what the file names (an integration, a listener).
        // 2 is a file agentctl cannot read; 4 an emulator it cannot reach.
        if !matches!(out.status.code(), Some(0 | 1 | 3)) {
            refused.push(format!(
                "{name} through agentctl diff: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    eprintln!(
        "shipped manifests: {} files ({files_with_deployments} with an AgentDeployment) x their entry points = {runs} runs, {} refused",
        manifests.len(),
        refused.len()
    );
    assert!(refused.is_empty(), "{}", refused.join("\n"));
}
