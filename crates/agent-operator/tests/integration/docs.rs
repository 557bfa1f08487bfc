//! The documentation stays true: every operator flag is in
//! docs/CONFIGURATION.md, every example is accepted by the real API server
//! (`kubectl apply --dry-run=server`), and every relative link of the docs
//! points at a file that exists.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    test_support::repo_root()
}

#[test]
fn every_operator_flag_is_documented() {
    let out = Command::new(env!("CARGO_BIN_EXE_agent-operator"))
        .args(["run", "--help"])
        .output()
        .expect("running agent-operator run --help");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    let doc = std::fs::read_to_string(root().join("docs/CONFIGURATION.md")).unwrap();
    let flags: Vec<&str> = help
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("--"))
        .filter_map(|l| l.split([' ', '<']).next())
        .filter(|f| *f != "help")
        .collect();
    assert!(flags.len() >= 10, "{help}");
    let missing: Vec<&&str> = flags
        .iter()
        .filter(|f| !doc.contains(&format!("`--{f}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "flags missing from docs/CONFIGURATION.md: {missing:?}"
    );
}

/// Relative links `](path)` of the Markdown files under docs/ and README.md.
#[test]
fn relative_links_of_the_docs_resolve() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.push(root().join("README.md"));
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for part in text.split("](").skip(1) {
            let target = part.split(')').next().unwrap_or("");
            let path = target.split('#').next().unwrap_or("");
            // Only plain relative paths (not URLs, not regex text in tables).
            let plain = path
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c));
            if path.is_empty() || !plain {
                continue;
            }
            if !file.parent().unwrap().join(path).exists() {
                broken.push(format!("{}: {target}", file.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links: {broken:#?}");
}

/// Every example is accepted by the real API server (schema, CEL rules) in a
/// server-side dry run.
#[tokio::test]
async fn every_example_is_accepted_by_the_api_server() {
    test_support::skip_without!(Envtest);
    let env = common::shared_env();
    let client = env.client().await;
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
    for ns in ["default", "agents"] {
        let _ = namespaces
            .create(
                &Default::default(),
                &serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).unwrap(),
            )
            .await;
    }
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in ["examples", "examples/more"] {
        files.extend(
            std::fs::read_dir(root().join(dir))
                .unwrap()
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "yaml")),
        );
    }
    assert!(files.len() >= 7, "{files:?}");
    for file in files {
        let mut kubectl = env
            .kubectl()
            .expect("kubectl is built by hack/envtest/install.sh (`make setup`)");
        let out = kubectl
            .args(["apply", "--dry-run=server", "-f"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{} refused: {}{}",
            file.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
