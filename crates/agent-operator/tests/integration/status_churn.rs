//! Status that keeps up and tells the truth under churn (issue "What
//! kubectl, Argo CD and Prometheus show is true", item 2): twelve changes
//! of the image in 24 s, the status checked after each; the revision
//! history at the end holds the newest revisions with the statuses the
//! service gives them; a rejection recorded for an earlier spec goes when
//! the spec is refused before any request.

use crate::support;

use std::time::{Duration, Instant};

use agent_operator::api::AgentDeployment;
use serde_json::json;
use support::{AgentDeploymentManifest, Harness, condition};

const TIMEOUT: Duration = Duration::from_secs(90);

fn image(i: usize) -> String {
    format!("registry.example.com/acme/agent:v{i}")
}

/// Twelve `kubectl apply` of a new image, one every 2 s: after each, the
/// status describes that generation within the longest poll interval (here
/// 2 s) and lists the newest revision first; at the end the history holds
/// the ten newest revisions, the superseded ones `SKIPPED` as the service
/// says, and the object is Ready on the last image.
#[tokio::test]
async fn twelve_changes_in_24_s_keep_the_status_current() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("status-churn")
        .step_seconds(1.0)
        .operator_flags(&[
            "--poll-interval-seconds",
            "0.5",
            "--max-poll-interval-seconds",
            "2",
        ])
        .start()
        .await;
    let manifest = |i: usize| AgentDeploymentManifest::docker("agent", &image(i)).build();
    let id = h.converge(manifest(0), TIMEOUT).await;
    let mut worst = Duration::ZERO;
    for i in 1..=12 {
        let applied = Instant::now();
        let generation = h.apply(manifest(i)).await.metadata.generation;
        let obj = support::wait_for(
            &h.api,
            "agent",
            Duration::from_secs(10),
            "the status of the change",
            |o| {
                let s = o.status.as_ref()?;
                (s.observed_generation == generation).then(|| o.clone())
            },
        )
        .await;
        let took = applied.elapsed();
        worst = worst.max(took);
        let status = obj.status.unwrap();
        let newest = status.revisions.first().expect("a revision listed");
        assert_eq!(
            Some(newest.id.as_str()),
            status.latest_revision_id.as_deref(),
            "change {i}: the newest revision is listed first"
        );
        tokio::time::sleep(Duration::from_secs(2).saturating_sub(took)).await;
    }
    println!(
        "12 changes: the status described each within {:.2} s",
        worst.as_secs_f64()
    );
    assert!(
        worst <= Duration::from_secs(4),
        "a change waited {worst:?} for its status"
    );
    let obj = h.wait_ready("agent", TIMEOUT).await;
    let status = obj.status.unwrap();
    let remote = h.revisions(&id).await;
    let newest: Vec<&str> = remote.iter().take(10).map(|r| r.id.as_str()).collect();
    let listed: Vec<&str> = status.revisions.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(listed, newest, "the ten newest revisions, newest first");
    for entry in &status.revisions[1..] {
        let service = remote.iter().find(|r| r.id == entry.id).unwrap();
        assert!(
            entry.status == service.status.to_string() || entry.status == "SKIPPED",
            "{}: listed {} but the service says {}",
            entry.id,
            entry.status,
            service.status
        );
        assert!(
            !entry.status.starts_with("AWAITING") && entry.status != "CREATING",
            "a superseded revision shows a status in progress: {entry:?}"
        );
    }
    assert_eq!(
        status.revisions[0].image_uri.as_deref(),
        Some(image(12).as_str())
    );
}

/// A PATCH the service refused (400) is recorded with its retry time; a
/// spec then refused before any request (a host not allowed) clears it:
/// nothing is waiting to be sent again.
#[tokio::test]
async fn a_spec_refused_here_clears_the_rejection_of_an_earlier_one() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("status-rejected").start().await;
    let manifest = |i: usize| AgentDeploymentManifest::docker("agent", &image(i)).build();
    h.converge(manifest(0), TIMEOUT).await;
    h.emulator
        .set_faults(
            json!({"reject": [{"route": "PATCH /v2/deployments/{deployment_id}",
            "status": 400, "detail": "image_uri: not allowed here"}]}),
        )
        .await;
    h.apply(manifest(1)).await;
    support::wait_for(
        &h.api,
        "agent",
        TIMEOUT,
        "the rejection recorded",
        |o: &AgentDeployment| o.status.as_ref()?.rejected_request.as_ref().map(|_| ()),
    )
    .await;
    let refused = AgentDeploymentManifest::docker("agent", &image(1))
        .source_config("customUrl", "https://agent.example.com")
        .build();
    h.apply(refused).await;
    let obj = h.wait_stalled("agent", "HostNotAllowed", TIMEOUT).await;
    assert_eq!(
        obj.status.as_ref().unwrap().rejected_request,
        None,
        "the rejection of the earlier spec went"
    );
    assert!(condition(&obj, "Ready").is_some());
}
