//! The release of `make release` (hack/release.sh, `dist/`) on a real
//! registry and a real kube-apiserver: every file matches `SHA256SUMS`;
//! `hack/push.sh` pushes the image to crane's registry on loopback (`crane
//! registry serve`), the image pulled back by digest is the one of the
//! release, every image of the rewritten install manifests and of the
//! packaged Helm chart is that digest, and the CRDs and the cluster-wide
//! manifests apply to a kube-apiserver of their own. A release whose files
//! name another digest than its image's, or whose files do not match
//! `SHA256SUMS`, is refused by `hack/push.sh` (the checks can fail).
//!
//! The release is `AGENT_OPERATOR_DIST` (the Makefile sets it), else `dist/`;
//! crane and helm come from `.cache/tools/bin` (`hack/tools/install.sh`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;
use sha2::{Digest, Sha256};
use test_support::envtest::{TestEnv, TestEnvOptions};

const REPOSITORY: &str = "platform/agent-operator";
const IMAGE_NAME: &str = "localhost/agent-operator";

fn repo() -> &'static Path {
    test_support::repo_root()
}

fn tool(name: &str) -> PathBuf {
    test_support::prerequisites::tool(name)
}

fn output(command: &mut Command) -> Output {
    command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"))
}

/// Runs `command`; panics with its output unless it succeeds; its stdout.
fn succeed(command: &mut Command) -> String {
    let out = output(command);
    assert!(
        out.status.success(),
        "{command:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `command`; panics unless it fails; its stderr.
fn fail(command: &mut Command) -> String {
    let out = output(command);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "{command:?} succeeded but should have failed:\n{stderr}"
    );
    stderr
}

/// A copy of the release's files (not `pushed/`) in `to`.
fn copy_release(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("the release directory") {
        let path = entry.expect("entry").path();
        if path.is_file() {
            std::fs::copy(&path, to.join(path.file_name().unwrap())).expect("copy");
        }
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// `crane registry serve` on 127.0.0.1, killed on drop.
pub(crate) struct Registry {
    child: Child,
    /// `127.0.0.1:<port>`.
    pub(crate) host: String,
    log: std::path::PathBuf,
}

impl Registry {
    /// The requests the registry logged so far (`GET /v2/...`, one line
    /// each, with the answer's status when it was an error).
    pub(crate) fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.find(" /v2/").map(|at| (line, at)))
            .filter_map(|(line, at)| {
                line[..at]
                    .rsplit(' ')
                    .next()
                    .map(|verb| (verb, &line[at..]))
            })
            .map(|(verb, rest)| format!("{verb}{rest}"))
            .collect()
    }

    /// Kills the registry (it stops answering; its port is closed).
    pub(crate) fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub(crate) fn start(dir: &Path) -> Self {
        let log = dir.join("registry.log");
        let file = std::fs::File::create(&log).expect("the registry's log");
        let child = Command::new(tool("crane"))
            .args(["registry", "serve", "--address", "127.0.0.1:0"])
            .stdout(file.try_clone().expect("the registry's log"))
            .stderr(file)
            .spawn()
            .expect("starting crane registry serve");
        let mut registry = Registry {
            child,
            host: String::new(),
            log: log.clone(),
        };
        for _ in 0..100 {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(port) = text
                .split("serving on port ")
                .nth(1)
                .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
                .filter(|p| !p.is_empty())
            {
                registry.host = format!("127.0.0.1:{port}");
                return registry;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!(
            "crane registry serve did not start: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn push(repository: &str, dist: &Path) -> Command {
    let mut command = Command::new(repo().join("hack/push.sh"));
    command.arg(repository).arg(dist).stdin(Stdio::null());
    command
}

/// The `image:` values of a YAML stream.
fn images(yaml: &str) -> Vec<String> {
    let mut images: Vec<String> = yaml
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("image:"))
        .map(|v| v.trim().trim_matches('"').to_owned())
        .collect();
    images.sort();
    images.dedup();
    images
}

#[tokio::test]
async fn the_release_pushes_to_a_registry_and_installs_by_digest() {
    test_support::skip_without!(Envtest, Tools, Release);
    let release = test_support::prerequisites::release_dir();
    let work = tempfile::tempdir().expect("tempdir");
    let dist = work.path().join("dist");
    copy_release(&release, &dist);

    // The files of the release, each checked against SHA256SUMS.
    let sums = std::fs::read_to_string(dist.join("SHA256SUMS")).expect("SHA256SUMS");
    let mut listed: Vec<&str> = sums
        .lines()
        .map(|l| {
            let (hash, name) = l.split_once("  ").expect("<sha256>  <file>");
            let bytes = std::fs::read(dist.join(name)).expect(name);
            assert_eq!(sha256_hex(&bytes), hash, "{name}");
            name
        })
        .collect();
    listed.sort();
    let version = env!("CARGO_PKG_VERSION");
    let chart = format!("agent-operator-{version}.tgz");
    let mut expected = vec![
        "agent-operator-image.oci.tar",
        "agentctl-linux-amd64",
        chart.as_str(),
        "crds.yaml",
        "image.txt",
        "install-cluster-wide.yaml",
        "install-ha.yaml",
        "install-namespaced.yaml",
    ];
    expected.sort();
    assert_eq!(listed, expected);
    // agentctl is the static build: it runs here and says its version.
    let version_line = succeed(Command::new(dist.join("agentctl-linux-amd64")).arg("--version"));
    assert!(version_line.contains(version), "{version_line}");

    // The digest the release names is its image manifest's.
    let released = std::fs::read_to_string(dist.join("image.txt")).expect("image.txt");
    let (name, digest) = released.trim().split_once('@').expect("<name>@<digest>");
    assert_eq!(name, IMAGE_NAME);
    let layout = work.path().join("layout");
    std::fs::create_dir_all(&layout).unwrap();
    succeed(
        Command::new("tar")
            .arg("-xf")
            .arg(dist.join("agent-operator-image.oci.tar"))
            .arg("-C")
            .arg(&layout),
    );
    let manifest_bytes = std::fs::read(
        layout
            .join("blobs/sha256")
            .join(digest.strip_prefix("sha256:").expect("a sha256 digest")),
    )
    .expect("the manifest blob the release names");
    assert_eq!(format!("sha256:{}", sha256_hex(&manifest_bytes)), digest);

    // Pushed to a real registry, and pulled back by digest.
    let registry = Registry::start(work.path());
    let repository = format!("{}/{REPOSITORY}", registry.host);
    succeed(&mut push(&repository, &dist));
    let pulled = work.path().join("pulled");
    succeed(
        Command::new(tool("crane"))
            .args(["pull", "--format", "oci"])
            .arg(format!("{repository}@{digest}"))
            .arg(&pulled),
    );
    let index: Value =
        serde_json::from_slice(&std::fs::read(pulled.join("index.json")).expect("index.json"))
            .expect("index.json JSON");
    assert_eq!(index["manifests"][0]["digest"], digest, "{index}");
    let manifest = succeed(
        Command::new(tool("crane"))
            .arg("manifest")
            .arg(format!("{repository}:{version}")),
    );
    assert_eq!(manifest.as_bytes(), manifest_bytes.as_slice());

    // Every image of the manifests naming the registry, and of the chart, is
    // the image by digest.
    let by_digest = format!("{repository}@{digest}");
    let pushed = dist.join("pushed");
    for overlay in ["cluster-wide", "namespaced", "ha"] {
        let file = format!("install-{overlay}.yaml");
        let yaml = std::fs::read_to_string(pushed.join(&file)).expect(&file);
        assert_eq!(images(&yaml), [by_digest.as_str()], "{file}");
        let original = std::fs::read_to_string(dist.join(&file)).expect(&file);
        assert_eq!(images(&original), [released.trim()], "{file}");
    }
    let helm_home = work.path().join("helm");
    let rendered = succeed(
        Command::new(tool("helm"))
            .env_remove("KUBECONFIG")
            .env("HELM_CONFIG_HOME", &helm_home)
            .env("HELM_CACHE_HOME", &helm_home)
            .env("HELM_DATA_HOME", &helm_home)
            .args(["template", "agent-operator"])
            .arg(dist.join(&chart))
            .args(["--set", &format!("image.repository={repository}")]),
    );
    assert_eq!(images(&rendered), [by_digest.as_str()]);

    // The CRDs and the cluster-wide install, applied to a kube-apiserver of
    // their own, as a user applies them.
    let env = TestEnv::start(TestEnvOptions::default())
        .await
        .unwrap_or_else(|e| panic!("starting envtest: {:#}", anyhow::Error::from(e)));
    let kubectl = |args: &[&str]| {
        let mut command = Command::new(env.kubectl_path().expect("kubectl in the envtest assets"));
        command
            .env_remove("KUBECONFIG")
            .arg("--kubeconfig")
            .arg(env.kubeconfig_path())
            .args(args);
        command
    };
    let crds = dist.join("crds.yaml");
    let install = pushed.join("install-cluster-wide.yaml");
    succeed(&mut kubectl(&[
        "apply",
        "--server-side",
        "-f",
        crds.to_str().unwrap(),
    ]));
    succeed(&mut kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd",
        "--all",
        "--timeout=60s",
    ]));
    succeed(&mut kubectl(&[
        "apply",
        "--server-side",
        "-f",
        install.to_str().unwrap(),
    ]));
    let image = succeed(&mut kubectl(&[
        "-n",
        "agent-operator",
        "get",
        "deployment",
        "agent-operator",
        "-o",
        "jsonpath={.spec.template.spec.containers[*].image}",
    ]));
    assert_eq!(image, by_digest);
    let crds = succeed(&mut kubectl(&["get", "crds", "-o", "name"]));
    assert!(crds.contains("agentdeployments.agentserver.dev"), "{crds}");
    env.stop();

    // Negative controls. A release whose files name another digest than its
    // image's (SHA256SUMS rewritten to match): the registry answers the real
    // digest, and push.sh stops.
    let other = format!("sha256:{}", "0".repeat(64));
    let mismatched = work.path().join("mismatched");
    copy_release(&release, &mismatched);
    for file in [
        "image.txt",
        "install-cluster-wide.yaml",
        "install-namespaced.yaml",
        "install-ha.yaml",
    ] {
        let path = mismatched.join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace(digest, &other)).unwrap();
    }
    succeed(
        Command::new("sh")
            .arg("-c")
            .arg("grep -v '  SHA256SUMS$' SHA256SUMS | awk '{print $2}' | xargs sha256sum > SHA256SUMS.new && mv SHA256SUMS.new SHA256SUMS")
            .current_dir(&mismatched),
    );
    let stderr = fail(&mut push(
        &format!("{}/mismatched", registry.host),
        &mismatched,
    ));
    assert!(
        stderr.contains(&other) && stderr.contains(digest),
        "{stderr}"
    );
    // A release file changed after make release: SHA256SUMS catches it.
    let tampered = work.path().join("tampered");
    copy_release(&release, &tampered);
    let path = tampered.join("install-cluster-wide.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace(digest, &other)).unwrap();
    let stderr = fail(&mut push(&format!("{}/tampered", registry.host), &tampered));
    assert!(stderr.contains("SHA256SUMS"), "{stderr}");
}
