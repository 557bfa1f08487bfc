//! Issue 33 items 1 and 6, provenance: `status.serving` names the revision
//! that serves with the commit the platform built (`github`) or the image
//! digest (`external_docker`) and whether it was verified; each entry of
//! `status.revisions` says whether its verification passed; `kubectl get
//! agd -o wide` shows the short SHA or digest and VERIFIED; the events of a
//! revision name its commit or digest.
//!
//! Source: docs/control-plane-api.md "Deployment" (`active_revision_id`),
//! "Revision" (`repo_commit_sha`, read-only).

use crate::{common, support};

use std::time::Duration;

use serde_json::json;
use support::{AgentDeploymentManifest, Harness, github_deployment, route};

const TIMEOUT: Duration = Duration::from_secs(60);

const DIGEST: &str = "sha256:4f1c0a7e9b2d3c5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6";

/// Runs the envtest kubectl with `args` in `ns`, asserting success; returns
/// stdout.
fn kubectl(ns: &str, args: &[&str]) -> String {
    let mut cmd = common::shared_env()
        .kubectl()
        .expect("kubectl is built with kube-apiserver by hack/envtest/install.sh (`make setup`)");
    let out = cmd
        .arg("--namespace")
        .arg(ns)
        .args(args)
        .output()
        .expect("running kubectl");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The cells of the row of `name` under the header's columns.
fn cells<'a>(table: &'a str, name: &str) -> Vec<(&'a str, &'a str)> {
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    let row: Vec<&str> = table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row {name} in:\n{table}"))
        .split_whitespace()
        .collect();
    header.into_iter().zip(row).collect()
}

fn cell<'a>(table: &'a str, name: &str, column: &str) -> &'a str {
    cells(table, name)
        .into_iter()
        .find(|(h, _)| *h == column)
        .unwrap_or_else(|| panic!("no column {column} in:\n{table}"))
        .1
}

#[tokio::test]
async fn status_serving_names_the_commit_or_the_digest_and_kubectl_shows_it() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-serving").start().await;
    let (git, docker) = ("served-git", "served-docker");
    let mut manifest = github_deployment(git, "main");
    manifest["spec"]["verify"] = json!({"assistants": {"graphId": "agent"}});
    h.apply(manifest).await;
    let image = format!("registry.example/acme/agent@{DIGEST}");
    h.apply(AgentDeploymentManifest::docker(docker, &image).build())
        .await;

    // github: the commit the platform built, verified.
    let obj = support::wait_for(&h.api, git, TIMEOUT, "serving verified", |o| {
        let s = o.status.as_ref()?.serving.as_ref()?;
        (support::is_ready_now(o) && s.verified).then(|| o.clone())
    })
    .await;
    let status = obj.status.unwrap();
    let serving = status.serving.clone().unwrap();
    let latest = status.latest_revision_id.clone().unwrap();
    assert_eq!(serving.revision_id, latest);
    assert_eq!(status.active_revision_id.as_deref(), Some(latest.as_str()));
    let sha = serving.commit_sha.clone().expect("serving.commitSha");
    assert!(sha.len() >= 7, "{sha}");
    assert_eq!(
        status.revisions[0].commit_sha.as_deref(),
        Some(sha.as_str())
    );
    assert_eq!(status.revisions[0].verified, Some(true));
    assert_eq!(serving.repo_ref.as_deref(), Some("main"));
    assert_eq!(serving.image_digest, None);
    assert_eq!(serving.short.as_deref(), Some(&sha[..7]));
    assert_eq!(
        serving.verified_at.as_deref(),
        status
            .verification
            .as_ref()
            .map(|v| v.last_run_time.as_str())
    );
    assert!(serving.since.is_some());
    // The events of the revision name its commit.
    let deployed =
        support::wait_for_event(&h.client, &h.ns, git, "RevisionDeployed", TIMEOUT).await;
    let note = support::note_of(&deployed);
    assert!(
        note.contains(&format!("revision {latest} (commit {})", &sha[..7])),
        "{note}"
    );
    let verified = support::wait_for_event(&h.client, &h.ns, git, "Verified", TIMEOUT).await;
    let note = support::note_of(&verified);
    assert!(note.contains(&format!("(commit {})", &sha[..7])), "{note}");

    // external_docker by digest: the digest, not verified (no spec.verify).
    let obj = support::wait_for(&h.api, docker, TIMEOUT, "serving", |o| {
        o.status.as_ref()?.serving.as_ref()?;
        support::is_ready_now(o).then(|| o.clone())
    })
    .await;
    let status = obj.status.unwrap();
    let serving = status.serving.clone().unwrap();
    assert_eq!(
        Some(serving.revision_id.as_str()),
        status.latest_revision_id.as_deref()
    );
    assert_eq!(serving.image_digest.as_deref(), Some(DIGEST));
    assert_eq!(serving.image_uri.as_deref(), Some(image.as_str()));
    assert_eq!(serving.commit_sha, None);
    assert_eq!(serving.short.as_deref(), Some("4f1c0a7e9b2d"));
    assert!(!serving.verified, "no spec.verify: not verified");
    assert_eq!(serving.verified_at, None);
    assert_eq!(status.revisions[0].verified, None);
    let deployed =
        support::wait_for_event(&h.client, &h.ns, docker, "RevisionDeployed", TIMEOUT).await;
    let note = support::note_of(&deployed);
    assert!(note.contains("(image sha256:4f1c0a7e9b2d)"), "{note}");

    // kubectl get -o wide: SERVING and VERIFIED; the default view keeps
    // its columns.
    let wide = kubectl(&h.ns, &["get", "agd", "-o", "wide"]);
    assert_eq!(cell(&wide, git, "SERVING"), &sha[..7], "{wide}");
    assert_eq!(cell(&wide, git, "VERIFIED"), "True", "{wide}");
    assert_eq!(cell(&wide, docker, "SERVING"), "4f1c0a7e9b2d", "{wide}");
    assert_eq!(cell(&wide, docker, "VERIFIED"), "False", "{wide}");
    let narrow = kubectl(&h.ns, &["get", "agd"]);
    assert!(!narrow.contains("SERVING"), "{narrow}");

    // Provenance costs no request: one create each, no PATCH.
    let log = h.emulator.requests().await;
    assert_eq!(log.count(route::CREATE), 2);
    assert_eq!(log.count(route::PATCH), 0);
}
