//! Item 3, drift: changes made to the remote deployment outside the operator
//! are patched back (Event `DriftCorrected`), at most 3 times per field and
//! hour before a fight with another writer is reported (`DriftFight`, the
//! issue "Many teams on one operator", item 5); a remote deployment deleted
//! outside is created again (Event `RemoteDeleted`), or stalls the resource
//! with `remoteDeletionPolicy: Stall`.

use crate::support;

use std::time::Duration;

use agent_operator::controlplane::types::{DeploymentPatch, SourceConfig, SourceRevisionConfig};
use serde_json::json;
use support::{Harness, condition, github_deployment, route, wait_for};

const TIMEOUT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn changes_made_outside_are_patched_back() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-drift-patch")
        .resync_seconds(0.5)
        .start()
        .await;
    let name = "drifting-agent";
    h.apply(github_deployment(name, "main")).await;
    let status = h.wait_ready(name, TIMEOUT).await.status.unwrap();
    let id = status.deployment_id.clone().unwrap();

    // build_on_push flipped outside: restored without a new revision.
    h.cp.patch_deployment(
        &id,
        &DeploymentPatch {
            source_config: Some(SourceConfig {
                build_on_push: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let event = support::wait_for_event(&h.client, &h.ns, name, "DriftCorrected", TIMEOUT).await;
    assert!(
        support::note_of(&event).contains("source_config"),
        "{:?}",
        event.note
    );
    let remote = h.cp.get_deployment(&id).await.unwrap();
    assert_eq!(remote.source_config.build_on_push, Some(false));
    assert_eq!(
        h.revisions(&id).await.len(),
        1,
        "no revision for build_on_push"
    );

    // repo_ref changed outside: restored, which builds a revision of `main`.
    h.cp.patch_deployment(
        &id,
        &DeploymentPatch {
            source_revision_config: Some(SourceRevisionConfig {
                repo_ref: Some("someone-elses-branch".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    support::eventually(TIMEOUT, "repo_ref restored to main", || async {
        let d = h.cp.get_deployment(&id).await.ok()?;
        (agent_operator::plan::shapes::configured_ref(&d) == Some("main")).then_some(())
    })
    .await;
    let obj = h
        .wait_ready_past(name, status.latest_revision_id.as_deref(), TIMEOUT)
        .await;
    let revisions = h.revisions(&id).await;
    assert_eq!(revisions.len(), 3, "first, outside, restored");
    assert_eq!(
        revisions[0]
            .source_revision_config
            .as_ref()
            .and_then(|c| c.repo_ref.as_deref()),
        Some("main")
    );
    assert_eq!(
        obj.status.unwrap().latest_revision_id.as_deref(),
        Some(revisions[0].id.as_str())
    );
    let drift_events = support::event_reasons(&h.client, &h.ns, name)
        .await
        .into_iter()
        .filter(|r| r == "DriftCorrected")
        .count();
    assert!(drift_events >= 1);
    assert_eq!(
        obj.metadata.generation,
        Some(1),
        "the resource was not edited"
    );
}

/// Another writer sets `build_on_push` back after every correction: the
/// operator corrects it 3 times, then reports `Stalled`/`DriftFight` (one
/// Warning event) and sends no PATCH while drift checks go on; a spec change
/// clears the memory and the resource converges again.
#[tokio::test]
async fn a_drift_fight_is_capped_then_stalled() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-drift-fight")
        .resync_seconds(0.5)
        .start()
        .await;
    let name = "fought-over-agent";
    let id = h.converge(github_deployment(name, "main"), TIMEOUT).await;
    let other_writer = DeploymentPatch {
        source_config: Some(SourceConfig {
            build_on_push: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    };
    // PATCHes the test sent as the other writer.
    let mut outside = 0;
    let restored = || async {
        let d = h.cp.get_deployment(&id).await.ok()?;
        (d.source_config.build_on_push == Some(false)).then_some(())
    };
    assert_eq!(operator_patches(&h, outside).await, 0);

    for round in 1..=3 {
        h.cp.patch_deployment(&id, &other_writer).await.unwrap();
        outside += 1;
        support::eventually(TIMEOUT, &format!("correction {round}"), restored).await;
        assert_eq!(operator_patches(&h, outside).await, round);
    }
    let obj = h.api.get(name).await.unwrap();
    let corrections = obj.status.unwrap().drift_corrections;
    assert_eq!(corrections.len(), 3, "{corrections:?}");
    assert!(
        corrections
            .iter()
            .all(|c| c.fields == ["source_config.build_on_push"]),
        "{corrections:?}"
    );

    // The fourth change is not corrected.
    h.cp.patch_deployment(&id, &other_writer).await.unwrap();
    outside += 1;
    let stalled = h.wait_stalled(name, "DriftFight", TIMEOUT).await;
    let ready = condition(&stalled, "Ready").unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "DriftFight")
    );
    for words in [
        "source_config.build_on_push",
        "another writer",
        "until the spec changes",
        "agentserver.dev/redeploy-requested-at",
    ] {
        assert!(ready.message.contains(words), "{words}: {}", ready.message);
    }
    let reads = h.emulator.requests().await.count(route::GET);
    // A few drift periods (0.5 s each): drift checks, no PATCH.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let requests = h.emulator.requests().await;
    let patches = requests.count(route::PATCH) - outside;
    eprintln!(
        "drift fight: {patches} correction PATCHes, then Stalled/DriftFight; {} drift-check GETs in the next 3 s",
        requests.count(route::GET) - reads
    );
    assert_eq!(patches, 3, "{:?}", requests.0);
    assert!(
        requests.count(route::GET) > reads + 1,
        "drift checks go on: {:?}",
        requests.0
    );
    let remote = h.cp.get_deployment(&id).await.unwrap();
    assert_eq!(
        remote.source_config.build_on_push,
        Some(true),
        "left as the other writer set it"
    );
    assert!(support::is_stalled_with(
        &h.api.get(name).await.unwrap(),
        "DriftFight"
    ));
    let warnings = support::event_reasons(&h.client, &h.ns, name)
        .await
        .into_iter()
        .filter(|r| r == "DriftFight")
        .count();
    assert_eq!(warnings, 1, "one Warning event");

    // A spec change clears the memory: the PATCH of the change restores
    // build_on_push too, and a later change outside is corrected again.
    support::merge_patch(
        &h.api,
        name,
        json!({"spec": {"sourceConfig": {"resourceSpec": {"maxScale": 2}}}}),
    )
    .await;
    let obj = h.wait_ready(name, TIMEOUT).await;
    assert!(obj.status.unwrap().drift_corrections.is_empty());
    support::eventually(
        TIMEOUT,
        "build_on_push restored by the spec change",
        restored,
    )
    .await;
    h.cp.patch_deployment(&id, &other_writer).await.unwrap();
    outside += 1;
    support::eventually(TIMEOUT, "a correction after the spec change", restored).await;
    assert_eq!(
        operator_patches(&h, outside).await,
        5,
        "3 corrections, the spec change, 1 more"
    );
}

/// The PATCHes the operator sent: all those logged but the `outside` ones
/// the test sent.
async fn operator_patches(h: &Harness, outside: u64) -> u64 {
    h.emulator.requests().await.count(route::PATCH) - outside
}

#[tokio::test]
async fn deployment_deleted_outside_is_created_again() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-drift-recreate")
        .resync_seconds(0.5)
        .start()
        .await;
    let name = "recreated-agent";
    let old = h.converge(github_deployment(name, "main"), TIMEOUT).await;

    h.cp.delete_deployment(&old).await.unwrap();
    let event = support::wait_for_event(&h.client, &h.ns, name, "RemoteDeleted", TIMEOUT).await;
    assert!(event.note.as_deref().unwrap_or("").contains(&old));
    let obj = wait_for(&h.api, name, TIMEOUT, "Ready on a new deployment", |o| {
        let id = o.status.as_ref()?.deployment_id.as_deref()?;
        (support::is_ready_now(o) && id != old).then(|| o.clone())
    })
    .await;
    let new = obj.status.unwrap().deployment_id.unwrap();
    let remote = h.remote_deployments().await;
    assert_eq!(remote.len(), 1, "only the new deployment: {remote:?}");
    assert_eq!(remote[0].id, new);
    assert_eq!(remote[0].name, name);
    assert_eq!(h.emulator.requests().await.count(route::CREATE), 2);
    // The create has no event of its own: the new deployment's first
    // RevisionDeployed names it.
    support::wait_for_created_event(&h.client, &h.ns, name, &new, TIMEOUT).await;
}

#[tokio::test]
async fn deployment_deleted_outside_stalls_with_the_stall_policy() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-drift-stall")
        .resync_seconds(0.5)
        .start()
        .await;
    let name = "stalling-agent";
    let mut manifest = github_deployment(name, "main");
    manifest["spec"]["remoteDeletionPolicy"] = "Stall".into();
    let id = h.converge(manifest, TIMEOUT).await;

    h.cp.delete_deployment(&id).await.unwrap();
    let obj = h.wait_stalled(name, "RemoteDeleted", TIMEOUT).await;
    let ready = condition(&obj, "Ready").unwrap();
    assert_eq!(ready.status, "False");
    assert!(ready.message.contains(&id), "{}", ready.message);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        h.emulator.requests().await.count(route::CREATE),
        1,
        "not created again"
    );
    assert!(h.remote_deployments().await.is_empty());
    let obj = h.api.get(name).await.unwrap();
    assert!(support::is_stalled_with(&obj, "RemoteDeleted"));
}
