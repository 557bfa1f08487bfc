//! Item 2, following revisions: a failed revision stalls the resource and is
//! not polled again until the spec changes; INTERRUPTED stalls with its own
//! reason; UNKNOWN is transient (keep polling); SKIPPED gives way to the
//! latest revision.

use crate::support;

use std::time::Duration;

use agent_operator::controlplane::types::RevisionStatus;
use support::{Harness, condition, github_deployment, route, wait_for};

const TIMEOUT: Duration = Duration::from_secs(60);
/// The emulator's outcomes of these tests, by `repo_ref`.
const SCENARIOS: [&str; 4] = [
    "BUILD_FAILED:repo_ref=broken",
    "INTERRUPTED:repo_ref=halted",
    "UNKNOWN:repo_ref=flaky",
    "STUCK:repo_ref=stuck",
];

#[tokio::test]
async fn failed_revision_stalls_and_is_not_polled_until_the_spec_changes() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-rev-failed")
        .scenarios(&SCENARIOS)
        .resync_seconds(0.5)
        .start()
        .await;
    let name = "failing-agent";
    // The failing build prints a secret value of the deployment.
    let rules = serde_json::json!([{"field": "repo_ref", "equals": "broken", "outcome": "BUILD_FAILED",
        "log": ["ERROR: pip install failed: langgraph==9.9 not found",
                "token=s3cr3t-build-value rejected by the index",
                "\u{1b}[31mhint:\u{1b}[0m check pyproject.toml"]}]);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let put = reqwest::Client::new()
        .put(format!("{}/_emulator/scenarios", h.emulator.base_url))
        .json(&rules)
        .send()
        .await
        .unwrap();
    assert!(put.status().is_success());
    let mut manifest = github_deployment(name, "broken");
    manifest["spec"]["secrets"] =
        serde_json::json!([{"name": "INDEX_TOKEN", "value": "s3cr3t-build-value"}]);
    h.apply(manifest).await;

    let obj = h.wait_stalled(name, "RevisionFailed", TIMEOUT).await;
    let status = obj.status.clone().unwrap();
    let failed = status.latest_revision_id.clone().expect("latestRevisionId");
    let ready = condition(&obj, "Ready").unwrap();
    assert_eq!(ready.status, "False");
    assert_eq!(ready.reason, "RevisionFailed");
    assert!(
        ready.message.contains(&failed) && ready.message.contains("BUILD_FAILED"),
        "the message names the revision and its status: {}",
        ready.message
    );
    // The end of the build log explains it, secret-free (docs/control-plane-api.md "Logs").
    assert!(
        ready.message.ends_with(
            "\nERROR: pip install failed: langgraph==9.9 not found\n\
             token=[REDACTED] rejected by the index\nhint: check pyproject.toml\nbuild failed"
        ),
        "the condition shows the build log tail: {}",
        ready.message
    );
    assert!(ready.message.contains(". Last lines of the build log:\ncloning https://github.com/acme/support-agent at broken\n"), "{}", ready.message);
    assert!(!ready.message.contains("s3cr3t"), "{}", ready.message);
    assert!(condition(&obj, "Reconciling").is_none());
    assert_eq!(status.revision_status.as_deref(), Some("BUILD_FAILED"));
    assert_eq!(
        status.last_failed_revision_id.as_deref(),
        Some(failed.as_str())
    );
    assert_eq!(
        status.last_failed_revision_status.as_deref(),
        Some("BUILD_FAILED")
    );
    let warning = support::wait_for_event(&h.client, &h.ns, name, "RevisionFailed", TIMEOUT).await;
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    let note = warning.note.clone().unwrap_or_default();
    assert!(
        note.contains("token=[REDACTED] rejected") && !note.contains("s3cr3t"),
        "the event carries the tail: {note}"
    );

    // Resync passes go on (they read the deployment), but the ended revision
    // is not read again.
    let before = h.emulator.requests().await;
    let version = h.api.get(name).await.unwrap().metadata.resource_version;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = h.emulator.requests().await;
    assert_eq!(
        h.api.get(name).await.unwrap().metadata.resource_version,
        version,
        "a stalled status is not rewritten by resync passes"
    );
    let warnings: Vec<_> = support::events_about(&h.client, &h.ns, name)
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("RevisionFailed"))
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(
        warnings[0].series.is_none(),
        "the failure is reported once, not on every resync: {:?}",
        warnings[0].series
    );
    assert!(
        after.count(route::GET) >= before.count(route::GET) + 2,
        "resync passes happened"
    );
    assert_eq!(
        after.count(route::GET_REVISION),
        before.count(route::GET_REVISION),
        "a failed revision is not polled"
    );
    assert_eq!(after.count(route::PATCH), 0, "nothing to patch");
    assert_eq!(
        after.count(route::BUILD_LOGS),
        1,
        "the build log is read once, when the failure is first seen"
    );

    // A spec change makes a new revision that deploys (the environment
    // stays: its last entry cannot be removed once the deployment exists).
    let mut fixed = github_deployment(name, "main");
    fixed["spec"]["secrets"] =
        serde_json::json!([{"name": "INDEX_TOKEN", "value": "s3cr3t-build-value"}]);
    h.apply(fixed).await;
    let obj = h.wait_ready(name, TIMEOUT).await;
    let status = obj.status.unwrap();
    assert_ne!(status.latest_revision_id.as_deref(), Some(failed.as_str()));
    assert_eq!(status.revision_status.as_deref(), Some("DEPLOYED"));
    assert_eq!(
        status.last_failed_revision_id.as_deref(),
        Some(failed.as_str()),
        "the last failure stays on record"
    );
    assert_eq!(
        h.revisions(status.deployment_id.as_deref().unwrap())
            .await
            .len(),
        2
    );
}

#[tokio::test]
async fn interrupted_revision_stalls_with_its_own_reason() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-rev-interrupted")
        .scenarios(&SCENARIOS)
        .resync_seconds(0.5)
        .start()
        .await;
    let name = "halted-agent";
    h.apply(github_deployment(name, "halted")).await;

    let obj = h.wait_stalled(name, "RevisionInterrupted", TIMEOUT).await;
    let status = obj.status.clone().unwrap();
    assert_eq!(status.revision_status.as_deref(), Some("INTERRUPTED"));
    assert_eq!(
        status.last_failed_revision_status.as_deref(),
        Some("INTERRUPTED")
    );
    assert_eq!(status.last_failed_revision_id, status.latest_revision_id);
    let ready = condition(&obj, "Ready").unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "RevisionInterrupted")
    );
    assert!(
        ready
            .message
            .contains(status.latest_revision_id.as_deref().unwrap()),
        "{}",
        ready.message
    );

    // It needs a new revision: a spec change gives one.
    h.apply(github_deployment(name, "main")).await;
    let obj = h.wait_ready(name, TIMEOUT).await;
    assert_ne!(
        obj.status.unwrap().latest_revision_id,
        status.latest_revision_id
    );
}

#[tokio::test]
async fn unknown_revision_status_keeps_polling_and_recovers() {
    test_support::skip_without!(Envtest);
    // Slower steps: UNKNOWN lasts three of them; each poll that reads a
    // new status of the revision writes it (BEHAVIOUR.md, "Kubernetes
    // writes").
    let h = Harness::quick("op-rev-unknown")
        .step_seconds(1.0)
        .operator_flags(&[
            "--poll-interval-seconds",
            "0.5",
            "--max-poll-interval-seconds",
            "1",
        ])
        .scenarios(&SCENARIOS)
        .resync_seconds(0.5)
        .start()
        .await;
    let name = "flaky-agent";
    h.apply(github_deployment(name, "flaky")).await;

    let obj = wait_for(&h.api, name, TIMEOUT, "revisionStatus UNKNOWN", |o| {
        (o.status.as_ref()?.revision_status.as_deref() == Some("UNKNOWN")).then(|| o.clone())
    })
    .await;
    // The first revision of the create: `Creating` until it ends.
    let reconciling = condition(&obj, "Reconciling").unwrap();
    assert_eq!(
        (reconciling.status.as_str(), reconciling.reason.as_str()),
        ("True", "Creating")
    );
    assert!(condition(&obj, "Stalled").is_none());
    let polls = h.emulator.requests().await.count(route::GET_REVISION);

    let obj = h.wait_ready(name, TIMEOUT).await;
    let status = obj.status.unwrap();
    assert_eq!(status.revision_status.as_deref(), Some("DEPLOYED"));
    assert_eq!(
        status.last_failed_revision_id, None,
        "UNKNOWN is no failure"
    );
    assert!(
        h.emulator.requests().await.count(route::GET_REVISION) > polls,
        "the revision was polled again after UNKNOWN"
    );
}

#[tokio::test]
async fn skipped_revision_gives_way_to_the_latest() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-rev-skipped")
        .scenarios(&SCENARIOS)
        .resync_seconds(0.5)
        .start()
        .await;
    let name = "skipping-agent";
    h.apply(github_deployment(name, "main")).await;
    let first = h.wait_ready(name, TIMEOUT).await.status.unwrap();
    let id = first.deployment_id.clone().unwrap();

    // Two quick spec changes: the first revision never finishes building and
    // the second one supersedes it.
    h.apply(github_deployment(name, "stuck")).await;
    let building = wait_for(&h.api, name, TIMEOUT, "the stuck revision", |o| {
        let s = o.status.as_ref()?;
        (o.metadata.generation == s.observed_generation
            && s.latest_revision_id != first.latest_revision_id)
            .then(|| s.latest_revision_id.clone().unwrap())
    })
    .await;
    h.apply(github_deployment(name, "release-3")).await;

    let obj = h.wait_ready(name, TIMEOUT).await;
    let status = obj.status.unwrap();
    let revisions = h.revisions(&id).await;
    assert_eq!(revisions.len(), 3);
    assert_eq!(
        status.latest_revision_id.as_deref(),
        Some(revisions[0].id.as_str()),
        "status follows the newest revision"
    );
    let skipped = revisions.iter().find(|r| r.id == building).unwrap();
    assert_eq!(skipped.status, RevisionStatus::Skipped);
    assert_eq!(
        status.last_failed_revision_id, None,
        "SKIPPED is no failure"
    );
    assert_eq!(
        status.active_revision_id, status.latest_revision_id,
        "the newest revision serves"
    );
}
