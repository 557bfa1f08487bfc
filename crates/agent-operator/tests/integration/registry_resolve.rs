//! The registry client (`agent_operator::registry`) against a real OCI
//! registry on loopback (`crane registry serve`), with images crane builds
//! and pushes: a tag resolves to the digest crane reports and moves when the
//! tag is pushed again; an index offering linux/amd64 passes, an image or
//! index without it is refused naming what it offers; an unknown tag or
//! repository is not found; a registry that is down is unavailable (tried
//! again), and a spent per-host budget sends nothing. Each resolution's
//! requests are counted in the registry's own log.

use std::path::Path;
use std::process::Command;

use agent_operator::registry::{Error, RegistryClient};
use test_support::prerequisites::tool;

use crate::release::Registry;

/// Runs crane with `args`; its stdout, trimmed. Panics when it fails.
pub(crate) fn crane(args: &[&str]) -> String {
    crane_with(None, args)
}

/// [`crane`] with the credentials of the Docker config directory
/// `docker_config` (`DOCKER_CONFIG`, where `crane auth login` writes).
pub(crate) fn crane_with(docker_config: Option<&Path>, args: &[&str]) -> String {
    let mut command = Command::new(tool("crane"));
    if let Some(dir) = docker_config {
        command.env("DOCKER_CONFIG", dir);
    }
    let out = command
        .args(args)
        .arg("--insecure")
        .output()
        .expect("running crane");
    assert!(
        out.status.success(),
        "crane {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Pushes a one-layer image of `platform` holding `content` to `reference`;
/// returns its digest.
pub(crate) fn push_image(dir: &Path, reference: &str, platform: &str, content: &str) -> String {
    push_image_with(None, dir, reference, platform, content)
}

/// [`push_image`] with the credentials of `docker_config` ([`crane_with`]).
pub(crate) fn push_image_with(
    docker_config: Option<&Path>,
    dir: &Path,
    reference: &str,
    platform: &str,
    content: &str,
) -> String {
    let file = dir.join("content.txt");
    std::fs::write(&file, content).unwrap();
    let layer = dir.join("layer.tar");
    let status = Command::new("tar")
        .arg("-cf")
        .arg(&layer)
        .arg("-C")
        .arg(dir)
        .arg("content.txt")
        .status()
        .expect("tar");
    assert!(status.success());
    let crane = |args: &[&str]| crane_with(docker_config, args);
    crane(&["append", "-f", layer.to_str().unwrap(), "-t", reference]);
    crane(&[
        "mutate",
        "--set-platform",
        platform,
        reference,
        "-t",
        reference,
    ]);
    crane(&["digest", reference])
}

#[tokio::test]
async fn tags_resolve_to_digests_and_images_without_linux_amd64_are_refused() {
    test_support::skip_without!(Tools);
    let dir = tempfile::tempdir().unwrap();
    let mut registry = Registry::start(dir.path());
    let host = registry.host.clone();
    let at = |name: &str| format!("{host}/acme/{name}");

    let amd64 = push_image(dir.path(), &at("agent:v1"), "linux/amd64", "one");
    let arm64 = push_image(dir.path(), &at("arm:v1"), "linux/arm64", "two");
    crane(&[
        "index",
        "append",
        "-m",
        &at("agent:v1"),
        "-m",
        &at("arm:v1"),
        "-t",
        &at("multi:v1"),
    ]);
    let multi = crane(&["digest", &at("multi:v1")]);
    crane(&[
        "index",
        "append",
        "-m",
        &at("arm:v1"),
        "-t",
        &at("armonly:v1"),
    ]);
    assert_ne!(amd64, arm64);

    let client = RegistryClient::default();

    // A tag: its digest and the pinned reference; the first resolution reads
    // the manifest and the config (the platform), a second only HEADs.
    // oci-client asks `GET /v2/` before each request to an open registry (it
    // stores a token only when the registry hands one out), so a HEAD costs 2.
    let before = registry.requests().len();
    let resolved = client.resolve(&at("agent:v1"), None).await.unwrap();
    assert_eq!(resolved.digest, amd64);
    assert_eq!(resolved.pinned, format!("{}@{amd64}", at("agent")));
    let first: Vec<String> = registry.requests()[before..].to_vec();
    let before = registry.requests().len();
    let again = client.resolve(&at("agent:v1"), None).await.unwrap();
    assert_eq!(again, resolved);
    let second: Vec<String> = registry.requests()[before..].to_vec();
    assert!(
        first.len() <= 6 && first.iter().any(|r| r.starts_with("HEAD")),
        "{first:?}"
    );
    assert!(
        second.len() <= 2 && second.iter().all(|r| !r.contains("/blobs/")),
        "a known digest is not read again: {second:?}"
    );
    println!(
        "FIGURE registry requests: first resolution of a digest {} ({first:?}), later {} ({second:?})",
        first.len(),
        second.len()
    );

    // The tag moves: the next resolution names the new digest.
    let moved = push_image(dir.path(), &at("agent:v1"), "linux/amd64", "one, rebuilt");
    assert_ne!(moved, amd64);
    assert_eq!(
        client.resolve(&at("agent:v1"), None).await.unwrap().digest,
        moved
    );

    // By digest: itself.
    let by_digest = format!("{}@{amd64}", at("agent"));
    assert_eq!(
        client.resolve(&by_digest, None).await.unwrap().digest,
        amd64
    );

    // An index with linux/amd64 passes; without, it is refused.
    assert_eq!(
        client.resolve(&at("multi:v1"), None).await.unwrap().digest,
        multi
    );
    for name in ["arm:v1", "armonly:v1"] {
        match client.resolve(&at(name), None).await.unwrap_err() {
            Error::WrongPlatform { offered, .. } => {
                assert_eq!(offered, "linux/arm64", "{name}")
            }
            other => panic!("{name}: {other:?}"),
        }
    }

    // Unknown tag and unknown repository.
    for name in ["agent:v9", "nothing:v1"] {
        let e = client.resolve(&at(name), None).await.unwrap_err();
        assert!(matches!(e, Error::NotFound { .. }), "{name}: {e:?}");
    }

    // The registry goes away: unavailable (retried), not refused.
    registry.stop();
    let e = client.resolve(&at("agent:v1"), None).await.unwrap_err();
    assert!(matches!(e, Error::Unavailable { .. }), "{e:?}");
    assert!(!e.to_string().contains("http://"), "{e}");

    // A spent budget sends nothing.
    let tight = RegistryClient::new(1, 1);
    let _ = tight.resolve(&at("agent:v1"), None).await;
    let e = tight.resolve(&at("agent:v1"), None).await.unwrap_err();
    assert!(matches!(e, Error::Budget { .. }), "{e:?}");
}
