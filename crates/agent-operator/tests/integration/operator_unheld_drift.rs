//! A change the service accepts but does not hold (it drops a
//! `resource_spec` key it does not know — the emulator's fault setting
//! `ignored_resource_spec_keys` — so every read differs again in the same
//! way) is
//! patched once, then reported `Stalled`/`DriftNotConverging` and not patched
//! again until the spec changes: no loop of PATCHes, each of which would be a
//! new revision (a build) on the real service.

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::{Harness, condition, github_deployment, route};

const TIMEOUT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_patch_the_service_does_not_hold_is_sent_once() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-unheld-drift")
        .resync_seconds(0.5)
        .start()
        .await;
    // A service that does not know `redis_memory_mb` stores only max_scale.
    h.emulator
        .set_faults(json!({"ignored_resource_spec_keys": ["redis_memory_mb"]}))
        .await;
    let name = "ignored-key-agent";
    let mut manifest = github_deployment(name, "main");
    manifest["spec"]["sourceConfig"]["resourceSpec"] = json!({"redisMemoryMb": 512, "maxScale": 2});
    h.apply(manifest).await;
    let stalled = h.wait_stalled(name, "DriftNotConverging", TIMEOUT).await;
    let message = condition(&stalled, "Stalled").unwrap().message;
    assert!(
        message.contains("source_config.resource_spec"),
        "the message names the field: {message}"
    );

    // Twenty drift periods later: still exactly one PATCH, one revision
    // from it, and nothing else but the drift check reads.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let requests = h.emulator.requests().await;
    assert_eq!(requests.count(route::PATCH), 1, "{:?}", requests.0);
    assert_eq!(requests.count(route::CREATE), 1, "{:?}", requests.0);
    let id = stalled.status.unwrap().deployment_id.unwrap();
    assert!(
        h.revisions(&id).await.len() <= 2,
        "the create and at most one PATCH made revisions"
    );
    let reasons = support::event_reasons(&h.client, &h.ns, name).await;
    assert!(
        reasons.iter().filter(|r| *r == "DriftCorrected").count() <= 1,
        "{reasons:?}"
    );

    // A spec change that the service can hold converges again.
    support::merge_patch(
        &h.api,
        name,
        json!({"spec": {"sourceConfig": {"resourceSpec": {"redisMemoryMb": null, "minScale": 1}}}}),
    )
    .await;
    h.wait_ready(name, TIMEOUT).await;
}
