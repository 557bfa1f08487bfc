//! Item 1, status and kstatus conditions: `Ready` always, `Reconciling` and
//! `Stalled` only while `True` (abnormal-true: absent reads as `False`),
//! each carrying `observedGeneration`; `lastTransitionTime` moves only when
//! a condition's status flips; status shows the deployment and its
//! revisions; and a steady object's status is not rewritten by resync
//! passes.

use crate::support;

use std::time::Duration;

use agent_operator::api::AgentDeployment;
use support::{Harness, condition, github_deployment, route};

const TIMEOUT: Duration = Duration::from_secs(60);

/// Fails when `obj` carries the condition `type_` (an abnormal-true
/// condition that is not `True` is left out, not written `False`).
fn assert_absent(obj: &AgentDeployment, type_: &str) {
    assert!(
        condition(obj, type_).is_none(),
        "{type_} is written only while True: {:?}",
        condition(obj, type_)
    );
}

/// (status, reason, observedGeneration, lastTransitionTime) of each condition.
fn snapshot(obj: &AgentDeployment, type_: &str) -> (String, String, Option<i64>, String) {
    let c = condition(obj, type_).unwrap_or_else(|| panic!("condition {type_} is missing"));
    (
        c.status,
        c.reason,
        c.observed_generation,
        c.last_transition_time.0.to_string(),
    )
}

#[tokio::test]
async fn conditions_follow_kstatus_and_steady_status_is_not_rewritten() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-status-kstatus")
        .scenario("STUCK:repo_ref=stuck")
        .resync_seconds(0.5)
        .start()
        .await;
    let name = "status-agent";
    h.apply(github_deployment(name, "main")).await;

    // Ready: `Ready=True` on generation 1 alone, and the remote's view.
    let obj = h.wait_ready(name, TIMEOUT).await;
    let status = obj.status.clone().unwrap();
    let ready = snapshot(&obj, "Ready");
    assert_eq!(
        (ready.0.as_str(), ready.1.as_str(), ready.2),
        ("True", "RevisionDeployed", Some(1))
    );
    assert_absent(&obj, "Reconciling");
    assert_absent(&obj, "Stalled");
    assert_eq!(status.conditions.len(), 1, "{:?}", status.conditions);
    let id = status.deployment_id.clone().expect("status.deploymentId");
    let remote = h.cp.get_deployment(&id).await.unwrap();
    assert_eq!(status.revision_status.as_deref(), Some("DEPLOYED"));
    assert_eq!(
        status.active_revision_id, status.latest_revision_id,
        "the deployed revision is the active one"
    );
    assert_eq!(status.active_revision_id, remote.active_revision_id);
    assert_eq!(status.deployment_status.as_deref(), Some("READY"));
    assert_eq!(status.url, remote.source_config.custom_url);
    assert!(
        status.url.as_deref().is_some_and(|u| u.starts_with("http")),
        "url: {:?}",
        status.url
    );

    // Steady: resync passes read the deployment but write nothing.
    let version = obj.metadata.resource_version.clone();
    let reads_before = h.emulator.requests().await.count(route::GET);
    tokio::time::sleep(Duration::from_secs(4)).await;
    let reads_after = h.emulator.requests().await.count(route::GET);
    assert!(
        reads_after >= reads_before + 2,
        "resync passes happened (GET deployment {reads_before} -> {reads_after})"
    );
    let obj = h.api.get(name).await.unwrap();
    assert_eq!(
        obj.metadata.resource_version, version,
        "an unchanged status is not written again: {:#?}",
        obj.status
    );

    // A revision that does not finish: Ready flips (new transition time),
    // Reconciling appears, Stalled stays absent.
    tokio::time::sleep(Duration::from_millis(1100)).await; // times have 1 s resolution
    let mut manifest = github_deployment(name, "stuck");
    h.apply(manifest.clone()).await;
    let obj = support::wait_for(&h.api, name, TIMEOUT, "Reconciling=True", |o| {
        let c = condition(o, "Reconciling")?;
        (c.status == "True" && c.observed_generation == Some(2)).then(|| o.clone())
    })
    .await;
    let building = (snapshot(&obj, "Ready"), snapshot(&obj, "Reconciling"));
    assert_eq!(
        (building.0.0.as_str(), building.0.1.as_str(), building.0.2),
        ("False", "RevisionInProgress", Some(2))
    );
    assert_ne!(building.0.3, ready.3, "Ready flipped: new transition time");
    assert_eq!(
        (building.1.0.as_str(), building.1.1.as_str(), building.1.2),
        ("True", "RevisionInProgress", Some(2))
    );
    assert_absent(&obj, "Stalled");
    assert_ne!(
        obj.status.as_ref().unwrap().latest_revision_id,
        obj.status.as_ref().unwrap().active_revision_id,
        "the old revision keeps serving while the new one builds"
    );

    // Polls of a revision whose status does not change keep the times.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let still = h.api.get(name).await.unwrap();
    assert_eq!(snapshot(&still, "Reconciling"), building.1);
    assert_eq!(snapshot(&still, "Ready"), building.0);

    // Back to a revision that deploys: Ready on generation 3.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    manifest["spec"]["sourceRevisionConfig"]["repoRef"] = "release-3".into();
    h.apply(manifest).await;
    let obj = h.wait_ready(name, TIMEOUT).await;
    assert_eq!(obj.metadata.generation, Some(3));
    assert_eq!(
        snapshot(&obj, "Ready").2,
        Some(3),
        "Ready observedGeneration"
    );
    assert_ne!(snapshot(&obj, "Ready").3, building.0.3);
    // Reconciling went with the revision that deployed (the status write,
    // a server-side apply, removes a condition it no longer carries).
    assert_absent(&obj, "Reconciling");
    assert_absent(&obj, "Stalled");
}
