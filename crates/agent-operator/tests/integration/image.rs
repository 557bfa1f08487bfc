//! The operator's container image as `make image` writes it (hack/image.sh:
//! an OCI image layout tarball assembled with crane, no container engine):
//! the config has the entrypoint, the numeric non-root user and the OCI
//! labels the Dockerfile declares; every blob matches its digest; the layers
//! hold the static binary and a CA bundle, and the binary extracted from its
//! layer runs `--help` with an empty environment, as in the image. Also:
//! hadolint passes the Dockerfile, which declares the same user and
//! entrypoint.
//!
//! The tarball is `AGENT_OPERATOR_IMAGE` (the Makefile sets it), else
//! `<target dir>/image/agent-operator.tar`; `make test` builds it first
//! (`make image`). Missing, the test fails and says so.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use sha2::{Digest, Sha256};

const USER: &str = "65532:65532";
const ENTRYPOINT: &str = "/agent-operator";

fn repo() -> &'static Path {
    test_support::repo_root()
}

fn image_tarball() -> PathBuf {
    test_support::prerequisites::image_tarball()
}

fn tar_extract(archive: &Path, into: &Path, gzip: bool) {
    std::fs::create_dir_all(into).expect("mkdir");
    let mut command = Command::new("tar");
    command.arg(if gzip { "-xzf" } else { "-xf" });
    command.arg(archive).arg("-C").arg(into);
    let out = command.output().expect("running tar");
    assert!(
        out.status.success(),
        "tar {}: {}",
        archive.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The blob `digest` (`sha256:<hex>`) of the layout in `dir`, checked
/// against its digest.
fn blob(dir: &Path, digest: &str) -> (PathBuf, Vec<u8>) {
    let hex = digest
        .strip_prefix("sha256:")
        .unwrap_or_else(|| panic!("not a sha256 digest: {digest}"));
    let path = dir.join("blobs/sha256").join(hex);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(hex::encode(Sha256::digest(&bytes)), hex, "blob {digest}");
    (path, bytes)
}

fn json_blob(dir: &Path, descriptor: &Value) -> Value {
    let (_, bytes) = blob(dir, descriptor["digest"].as_str().expect("digest"));
    assert_eq!(descriptor["size"], bytes.len(), "size of {descriptor}");
    serde_json::from_slice(&bytes).expect("a JSON blob")
}

/// Whether the ELF file has a PT_INTERP program header (a dynamic loader).
fn has_interpreter(elf: &[u8]) -> bool {
    assert_eq!(&elf[..4], b"\x7fELF", "not an ELF file");
    assert_eq!(elf[4], 2, "not a 64-bit ELF file");
    let u16_at = |o: usize| u16::from_le_bytes([elf[o], elf[o + 1]]) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap()) as usize;
    let (phoff, phentsize, phnum) = (u64_at(0x20), u16_at(0x36), u16_at(0x38));
    (0..phnum).any(|i| {
        let p = phoff + i * phentsize;
        u32::from_le_bytes(elf[p..p + 4].try_into().unwrap()) == 3
    })
}

#[test]
fn the_image_tarball_runs_the_static_operator_as_a_non_root_user() {
    test_support::skip_without!(Image);
    let tarball = image_tarball();
    let work = tempfile::tempdir().expect("tempdir");
    let layout = work.path().join("layout");
    tar_extract(&tarball, &layout, false);

    // An OCI image layout with one image manifest.
    let oci_layout: Value =
        serde_json::from_slice(&std::fs::read(layout.join("oci-layout")).expect("oci-layout"))
            .expect("oci-layout JSON");
    assert_eq!(oci_layout["imageLayoutVersion"], "1.0.0");
    let index: Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).expect("index.json"))
            .expect("index.json JSON");
    let manifests = index["manifests"].as_array().expect("manifests");
    assert_eq!(manifests.len(), 1, "{index}");
    assert_eq!(
        manifests[0]["mediaType"],
        "application/vnd.oci.image.manifest.v1+json"
    );
    // The name `docker load` / `podman load` give it: deploy/'s image.
    assert_eq!(
        manifests[0]["annotations"]["io.containerd.image.name"],
        format!("localhost/agent-operator:{}", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(
        manifests[0]["annotations"]["org.opencontainers.image.ref.name"],
        env!("CARGO_PKG_VERSION")
    );
    let manifest = json_blob(&layout, &manifests[0]);
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.oci.image.config.v1+json"
    );
    let config = json_blob(&layout, &manifest["config"]);

    // What the Dockerfile declares.
    assert_eq!(config["os"], "linux");
    assert_eq!(config["architecture"], "amd64");
    let c = &config["config"];
    assert_eq!(c["Entrypoint"], serde_json::json!([ENTRYPOINT]));
    assert_eq!(c["Cmd"], serde_json::json!(["run"]));
    assert_eq!(c["User"], USER);
    let (uid, gid) = USER.split_once(':').unwrap();
    assert!(uid.parse::<u32>().unwrap() > 0 && gid.parse::<u32>().unwrap() > 0);
    let labels = &c["Labels"];
    assert_eq!(labels["org.opencontainers.image.title"], "agent-operator");
    assert_eq!(
        labels["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(labels["org.opencontainers.image.licenses"], "Apache-2.0");
    assert!(
        labels["org.opencontainers.image.revision"]
            .as_str()
            .is_some_and(|r| r.len() == 40),
        "{labels}"
    );

    // The layers: nothing but the CA bundle and the binary.
    let rootfs = work.path().join("rootfs");
    let layers = manifest["layers"].as_array().expect("layers");
    assert_eq!(layers.len(), 2, "{manifest}");
    for layer in layers {
        assert_eq!(
            layer["mediaType"],
            "application/vnd.oci.image.layer.v1.tar+gzip"
        );
        let (path, _) = blob(&layout, layer["digest"].as_str().expect("digest"));
        tar_extract(&path, &rootfs, true);
    }
    let mut files: Vec<String> = walk(&rootfs)
        .iter()
        .map(|p| p.strip_prefix(&rootfs).unwrap().display().to_string())
        .collect();
    files.sort();
    assert_eq!(
        files,
        ["agent-operator", "etc/ssl/certs/ca-certificates.crt"]
    );
    let bundle = std::fs::read_to_string(rootfs.join("etc/ssl/certs/ca-certificates.crt"))
        .expect("the CA bundle");
    assert!(bundle.matches("BEGIN CERTIFICATE").count() > 10);

    // The binary: static, and it runs with nothing around it.
    let binary = rootfs.join("agent-operator");
    let bytes = std::fs::read(&binary).expect("the binary");
    assert!(
        !has_interpreter(&bytes),
        "the binary needs a dynamic loader, which the image does not have"
    );
    let out = Command::new(&binary)
        .arg("--help")
        .env_clear()
        .current_dir(work.path())
        .output()
        .expect("running the binary of the image");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "--help: {out:?}");
    assert!(help.contains("Kubernetes operator"), "{help}");
    for command in ["run", "crds"] {
        assert!(help.contains(command), "{help}");
    }
    let out = Command::new(&binary)
        .arg("--version")
        .env_clear()
        .output()
        .expect("--version");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("agent-operator {}", env!("CARGO_PKG_VERSION"))
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn the_dockerfile_passes_hadolint_and_declares_the_same_image() {
    test_support::skip_without!(Tools);
    let hadolint = test_support::prerequisites::tool("hadolint");
    let dockerfile = repo().join("Dockerfile");
    let out = Command::new(&hadolint)
        .arg(&dockerfile)
        .output()
        .expect("running hadolint");
    assert!(
        out.status.success(),
        "hadolint Dockerfile:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Negative control: hadolint does fail a Dockerfile with a finding.
    let bad = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        bad.path().join("Dockerfile"),
        "FROM debian:latest\nRUN cd /tmp\n",
    )
    .expect("write");
    let out = Command::new(&hadolint)
        .arg(bad.path().join("Dockerfile"))
        .output()
        .expect("running hadolint");
    assert!(!out.status.success(), "hadolint passed a bad Dockerfile");

    let text = std::fs::read_to_string(&dockerfile).expect("Dockerfile");
    let runtime = text
        .rsplit_once("\nFROM ")
        .expect("a multi-stage Dockerfile")
        .1;
    assert!(runtime.starts_with("scratch"), "{runtime}");
    assert!(runtime.contains(&format!("\nUSER {USER}\n")), "{runtime}");
    assert!(
        runtime.contains(&format!("\nENTRYPOINT [\"{ENTRYPOINT}\"]\n")),
        "{runtime}"
    );
    assert!(runtime.contains("\nCMD [\"run\"]"), "{runtime}");
}
