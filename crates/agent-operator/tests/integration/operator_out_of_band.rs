//! Issue 36, item 5: revisions made outside the operator are visible. A
//! redeploy through the control plane API (as `agentctl redeploy`, the UI
//! or the CLI make it) is followed with a Normal `OutOfBandRevision` event;
//! a rollback after a failed build (`agentctl rollback`,
//! `POST .../revisions/{id}/redeploy`) is found by the next drift check,
//! and the PATCH that re-applies the spec names it in its `DriftCorrected`
//! event and in the condition's message, with no request beyond the drift
//! check's GET and that one PATCH.

use crate::support;

use std::time::Duration;

use support::{Harness, condition, github_deployment, route, wait_for};

const TIMEOUT: Duration = Duration::from_secs(60);
/// The rollback route of the emulator's request log.
const ROLLBACK: &str = "POST /v2/deployments/{deployment_id}/revisions/{revision_id}/redeploy";

#[tokio::test]
async fn revisions_made_outside_are_named_and_the_spec_re_applied() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-out-of-band")
        .scenario("BUILD_FAILED:repo_ref=broken")
        .resync_seconds(2.0)
        .start()
        .await;
    let name = "rolled-back-agent";
    let id = h.converge(github_deployment(name, "main"), TIMEOUT).await;
    let first = h.api.get(name).await.unwrap().status.unwrap();

    // A redeploy from outside, with the spec's configuration: followed and
    // named, nothing sent back.
    let mark = h.emulator.request_mark().await;
    let redeployed = h.cp.redeploy(&id).await.unwrap().id;
    let event = support::wait_for_event(&h.client, &h.ns, name, "OutOfBandRevision", TIMEOUT).await;
    assert_eq!(event.type_.as_deref(), Some("Normal"));
    let note = support::note_of(&event);
    assert!(
        note.contains(&format!(
            "revision {redeployed} was made outside the operator"
        )) && note.contains("equals the spec"),
        "{note}"
    );
    let obj = h
        .wait_ready_past(name, first.latest_revision_id.as_deref(), TIMEOUT)
        .await;
    assert_eq!(
        obj.status.unwrap().latest_revision_id.as_deref(),
        Some(redeployed.as_str())
    );
    let operator: Vec<String> = h
        .emulator
        .requests_since(mark)
        .await
        .into_iter()
        .filter(|r| r.deployment_id.as_deref() == Some(id.as_str()))
        .map(|r| r.route)
        .collect();
    assert_eq!(
        operator.iter().filter(|r| *r == route::REDEPLOY).count(),
        1,
        "the test's own redeploy only: {operator:?}"
    );
    assert!(
        operator
            .iter()
            .all(|r| *r == route::REDEPLOY || *r == route::GET || *r == route::GET_REVISION),
        "reads only: {operator:?}"
    );

    // A spec change whose build fails, then a rollback to the good
    // revision through the control plane API.
    h.apply(github_deployment(name, "broken")).await;
    let failed = h
        .wait_stalled(name, "RevisionFailed", TIMEOUT)
        .await
        .status
        .unwrap()
        .latest_revision_id
        .unwrap();
    let mark = h.emulator.request_mark().await;
    let rolled_back =
        h.cp.redeploy_revision(&id, &redeployed)
            .await
            .unwrap()
            .latest_revision_id
            .unwrap();

    // The next drift check finds it; the pass that re-applies the spec
    // says over which revision, and how to keep a rollback.
    let obj = wait_for(
        &h.api,
        name,
        TIMEOUT,
        "the re-apply over the rollback",
        |o| {
            let ready = condition(o, "Ready")?;
            ready
                .message
                .contains(&format!("over revision {rolled_back}"))
                .then(|| o.clone())
        },
    )
    .await;
    let ready = condition(&obj, "Ready").unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "RevisionInProgress"),
        "{}",
        ready.message
    );
    for words in [
        "it re-applies the spec over revision",
        "which the operator did not make (a rollback or a redeploy from agentctl",
        "agentserver.dev/paused: \"true\"",
        "put its configuration in the spec",
    ] {
        assert!(ready.message.contains(words), "{words}: {}", ready.message);
    }
    let event = support::wait_for_event(&h.client, &h.ns, name, "DriftCorrected", TIMEOUT).await;
    let note = support::note_of(&event);
    assert!(
        note.contains("source_revision_config")
            && note.contains(&format!(
                "by revision {rolled_back}, which the operator did not make"
            ))
            && note.contains("the spec is re-applied"),
        "{note}"
    );

    // The spec (the broken ref) is back, and fails again.
    let obj = wait_for(&h.api, name, TIMEOUT, "the re-applied spec to fail", |o| {
        let s = o.status.as_ref()?;
        let latest = s.latest_revision_id.as_deref()?;
        (support::is_stalled_with(o, "RevisionFailed") && latest != failed && latest != rolled_back)
            .then(|| o.clone())
    })
    .await;
    let revisions = h.revisions(&id).await;
    let refs: Vec<(&str, Option<&str>)> = revisions
        .iter()
        .map(|r| {
            (
                r.id.as_str(),
                r.source_revision_config
                    .as_ref()
                    .and_then(|c| c.repo_ref.as_deref()),
            )
        })
        .collect();
    assert_eq!(
        refs.len(),
        5,
        "first, redeploy, broken, rollback, re-applied: {refs:?}"
    );
    assert_eq!(refs[0].1, Some("broken"), "the spec re-applied: {refs:?}");
    assert_eq!(refs[1], (rolled_back.as_str(), Some("main")), "{refs:?}");
    assert_eq!(
        obj.status.unwrap().latest_revision_id.as_deref(),
        Some(refs[0].0)
    );

    // Request budget: from the rollback to the re-apply, the drift check's
    // GET of the deployment and the PATCH, nothing else (no read of the
    // rolled-back revision, no redeploy).
    let about: Vec<String> = h
        .emulator
        .requests_since(mark)
        .await
        .into_iter()
        .filter(|r| r.deployment_id.as_deref() == Some(id.as_str()))
        .map(|r| r.route)
        .collect();
    eprintln!("out-of-band rollback, requests about the deployment: {about:?}");
    // (A drift check may land between the mark and the rollback.)
    let rollback_at = about
        .iter()
        .position(|r| r == ROLLBACK)
        .expect("the test's rollback");
    let patch_at = about
        .iter()
        .position(|r| r == route::PATCH)
        .expect("the re-apply PATCH");
    assert!(
        about[..rollback_at].iter().all(|r| r == route::GET),
        "{about:?}"
    );
    assert_eq!(
        about[rollback_at..=patch_at],
        [ROLLBACK, route::GET, route::PATCH],
        "the test's rollback, one drift check, one PATCH: {about:?}"
    );
    assert_eq!(
        about.iter().filter(|r| *r == route::PATCH).count(),
        1,
        "{about:?}"
    );
    assert!(
        !about
            .iter()
            .any(|r| r == route::REDEPLOY || r == route::CREATE),
        "{about:?}"
    );
    assert_eq!(
        obj.metadata.generation,
        Some(2),
        "the resource was not edited by the operator"
    );
}
