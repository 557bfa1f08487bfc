//! Issue 33 item 4, automatic rollback (`spec.rollback.onFailedVerification`):
//! a new revision that deploys but fails verification is rolled back to the
//! last verified revision (`POST .../revisions/{id}/redeploy`) once, the
//! resource reports `RolledBack` naming both revisions and stays
//! `Ready=False` without applying the spec again, until the spec changes.
//!
//! With `onFailedRevision`, a failed build is rolled back to the revision
//! that served (without `spec.verify`: the newest `DEPLOYED` one).
//!
//! Verification fails on a revision whose `repo_ref` carries `unhealthy`:
//! the emulator's agent server then serves no graph (an emulator fault).
//!
//! `agentctl revisions list` marks the revisions of each rollback (issue
//! 57, item 5).
//!
//! Source: docs/control-plane-api.md "Requests" ("Rollback").

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::{Harness, condition, github_deployment, route};

const TIMEOUT: Duration = Duration::from_secs(90);

fn manifest(name: &str, repo_ref: &str) -> serde_json::Value {
    let mut m = github_deployment(name, repo_ref);
    m["spec"]["verify"] = json!({"assistants": {"graphId": "agent"}});
    m["spec"]["rollback"] = json!({"onFailedVerification": true});
    m
}

#[tokio::test]
async fn three_failed_verifications_make_exactly_three_rollbacks_and_no_loop() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-rollback")
        .resync_seconds(2.0)
        .start()
        .await;
    let name = "rolling-agent";
    h.apply(manifest(name, "main")).await;
    let first = support::wait_for(&h.api, name, TIMEOUT, "verified", |o| {
        let s = o.status.as_ref()?.serving.as_ref()?;
        (support::is_ready_now(o) && s.verified).then(|| o.clone())
    })
    .await;
    let good_sha = first
        .status
        .as_ref()
        .and_then(|s| s.serving.as_ref())
        .and_then(|s| s.commit_sha.clone())
        .expect("the commit serving");

    let mut failed = Vec::new();
    for i in 1..=3 {
        let obj = h.apply(manifest(name, &format!("unhealthy-{i}"))).await;
        let generation = obj.metadata.generation;
        let obj = support::wait_for(&h.api, name, TIMEOUT, "rolled back and verified", |o| {
            let s = o.status.as_ref()?;
            let r = s.rollback.as_ref()?;
            let ready = condition(o, "Ready")?;
            (r.generation == generation
                && ready.reason == "RolledBack"
                && ready.observed_generation == generation
                && s.serving.as_ref().is_some_and(|v| v.verified)
                && s.latest_revision_id == r.revision_id)
                .then(|| o.clone())
        })
        .await;
        let status = obj.status.clone().unwrap();
        let r = status.rollback.clone().unwrap();
        assert_eq!(r.reason, "AssistantsMissing", "{r:?}");
        let from = status
            .revisions
            .iter()
            .find(|x| x.id == r.from_revision_id)
            .expect("the failed revision in status.revisions");
        assert_eq!(from.verified, Some(false), "{from:?}");
        assert_eq!(
            from.repo_ref.as_deref(),
            Some(format!("unhealthy-{i}").as_str())
        );
        // What serves is the last verified configuration, verified again.
        let serving = status.serving.clone().unwrap();
        assert_eq!(Some(serving.revision_id.clone()), r.revision_id);
        assert_eq!(serving.repo_ref.as_deref(), Some("main"));
        assert_eq!(serving.commit_sha.as_deref(), Some(good_sha.as_str()));
        // Ready=False, Stalled=True: GitOps sees the spec did not converge.
        let ready = condition(&obj, "Ready").unwrap();
        assert_eq!(ready.status, "False");
        assert!(
            ready
                .message
                .contains(&format!("from revision {}", r.from_revision_id))
                && ready
                    .message
                    .contains(&format!("to revision {}", r.to_revision_id)),
            "{}",
            ready.message
        );
        assert_eq!(condition(&obj, "Stalled").unwrap().status, "True");
        assert_eq!(condition(&obj, "Verified").unwrap().status, "True");
        failed.push(r.from_revision_id.clone());
    }
    failed.dedup();
    assert_eq!(failed.len(), 3, "{failed:?}");

    // `agentctl revisions list` marks them (issue 57, item 5): with the
    // cluster, each failed verification, the last rollback's revisions;
    // without it, the service's view, where they read REPLACED like any.
    let status = h.api.get(name).await.unwrap().status.unwrap();
    let last = status.rollback.clone().unwrap();
    let notes = revision_notes(&h, name, Some(&h.kubeconfig));
    let of = |id: &str| {
        notes
            .iter()
            .find(|(r, _)| r == id)
            .map(|(_, n)| n.join(", "))
    };
    for from in &failed[..2] {
        assert_eq!(
            of(from).as_deref(),
            Some("verification failed"),
            "{notes:?}"
        );
    }
    assert_eq!(
        of(&last.from_revision_id).as_deref(),
        Some("verification failed, rolled back (AssistantsMissing)"),
        "{notes:?}"
    );
    assert!(
        of(&last.to_revision_id).is_some_and(|n| n.ends_with("rollback target")),
        "{notes:?}"
    );
    let new = last.revision_id.clone().unwrap();
    assert_eq!(
        of(&new),
        Some(format!(
            "verified, rollback to {}",
            &last.to_revision_id[..8]
        )),
        "{notes:?}"
    );
    let blind = revision_notes(&h, name, None);
    assert!(blind.iter().all(|(_, n)| n.is_empty()), "{blind:?}");

    // Exactly three rollbacks; steady now: resync passes send no PATCH
    // (the spec is held back) and no rollback.
    let counts = h.emulator.requests().await;
    assert_eq!(counts.count(route::REDEPLOY_REVISION), 3);
    assert_eq!(counts.count(route::PATCH), 3, "one PATCH per spec change");
    tokio::time::sleep(Duration::from_secs(6)).await;
    let later = h.emulator.requests().await;
    assert!(
        later.count(route::GET) > counts.count(route::GET),
        "resync passes ran"
    );
    assert_eq!(later.count(route::REDEPLOY_REVISION), 3, "no loop");
    assert_eq!(later.count(route::PATCH), 3, "the spec is held back");
    let events: Vec<_> = support::events_about(&h.client, &h.ns, name)
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("RolledBack"))
        .collect();
    assert_eq!(
        events.len(),
        3,
        "one RolledBack event per rollback: {events:#?}"
    );
    for from in &failed {
        let e = events
            .iter()
            .find(|e| support::note_of(e).contains(&format!("from revision {from}")))
            .unwrap_or_else(|| panic!("no RolledBack event names {from}: {events:#?}"));
        assert_eq!(e.type_.as_deref(), Some("Warning"));
    }

    // The spec set back to what serves converges: Ready on the rollback's
    // revision, without a PATCH (the remote already equals it).
    let held = h.api.get(name).await.unwrap().status.unwrap();
    h.apply(manifest(name, "main")).await;
    let obj = h.wait_ready(name, TIMEOUT).await;
    let status = obj.status.unwrap();
    assert!(status.serving.unwrap().verified);
    assert_eq!(status.latest_revision_id, held.latest_revision_id);
    let end = h.emulator.requests().await;
    assert_eq!(end.count(route::REDEPLOY_REVISION), 3);
    assert_eq!(end.count(route::PATCH), 3);
}

#[tokio::test]
async fn a_failed_build_is_rolled_back_to_the_revision_that_served_without_verify() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-rollback-build")
        .scenario("BUILD_FAILED:repo_ref=broken")
        .start()
        .await;
    let name = "rebuilt-agent";
    let with_policy = |repo_ref: &str| {
        let mut m = github_deployment(name, repo_ref);
        m["spec"]["rollback"] = json!({"onFailedRevision": true});
        m
    };
    h.converge(with_policy("main"), TIMEOUT).await;
    let good = h.api.get(name).await.unwrap().status.unwrap();
    let good_rid = good.latest_revision_id.clone().unwrap();
    let obj = h.apply(with_policy("broken")).await;
    let generation = obj.metadata.generation;
    let obj = support::wait_for(&h.api, name, TIMEOUT, "rolled back", |o| {
        let s = o.status.as_ref()?;
        let r = s.rollback.as_ref()?;
        let ready = condition(o, "Ready")?;
        (r.generation == generation
            && ready.reason == "RolledBack"
            && condition(o, "Stalled").is_some_and(|c| c.status == "True")
            && s.revision_status.as_deref() == Some("DEPLOYED"))
        .then(|| o.clone())
    })
    .await;
    let status = obj.status.unwrap();
    let r = status.rollback.unwrap();
    assert_eq!(r.reason, "BUILD_FAILED");
    assert_eq!(r.to_revision_id, good_rid, "the revision that served");
    assert_eq!(
        status.last_failed_revision_id.as_deref(),
        Some(r.from_revision_id.as_str())
    );
    let serving = status.serving.unwrap();
    assert_eq!(Some(serving.revision_id), r.revision_id);
    assert_eq!(serving.repo_ref.as_deref(), Some("main"));
    assert!(!serving.verified, "no spec.verify: not verified");
    let log = h.emulator.requests().await;
    assert_eq!(log.count(route::REDEPLOY_REVISION), 1);
    assert_eq!(log.count(route::PATCH), 1);

    // `agentctl revisions list`: the failed build, rolled back from; the
    // revision that served, gone back to.
    let notes = revision_notes(&h, name, Some(&h.kubeconfig));
    let of = |id: &str| {
        notes
            .iter()
            .find(|(r, _)| r == id)
            .map(|(_, n)| n.join(", "))
    };
    assert_eq!(
        of(&r.from_revision_id).as_deref(),
        Some("failed, rolled back (BUILD_FAILED)"),
        "{notes:?}"
    );
    assert_eq!(
        of(&good_rid).as_deref(),
        Some("rollback target"),
        "{notes:?}"
    );
}

/// `agentctl revisions list NAME -o json` against the harness's emulator,
/// reading the cluster of `kubeconfig` (`None`: no cluster): each
/// revision's id and notes, newest first.
fn revision_notes(
    h: &Harness,
    name: &str,
    kubeconfig: Option<&std::path::Path>,
) -> Vec<(String, Vec<String>)> {
    let none = std::env::temp_dir().join("agentctl-no-cluster/kubeconfig");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentctl"))
        .args(["revisions", "list", name, "-n", &h.ns, "-o", "json"])
        .env("AGENT_CONTROL_PLANE_URL", &h.emulator.base_url)
        .env("AGENT_WORKSPACE_ID", support::WORKSPACE)
        .env("AGENT_API_KEY", support::API_KEY)
        .env("KUBECONFIG", kubeconfig.unwrap_or(&none))
        .env_remove("AGENT_CONTROL_PLANE_REGION")
        .output()
        .expect("running agentctl");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<serde_json::Value> = serde_json::from_str(&stdout).expect("a JSON list");
    rows.iter()
        .map(|r| {
            let notes = r["notes"].as_array().cloned().unwrap_or_default();
            (
                r["id"].as_str().unwrap_or_default().to_owned(),
                notes
                    .iter()
                    .map(|n| n.as_str().unwrap_or_default().to_owned())
                    .collect(),
            )
        })
        .collect()
}
