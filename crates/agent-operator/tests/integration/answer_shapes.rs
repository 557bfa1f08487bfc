//! The operator against the control plane in each answer shape the official
//! clients record (docs/control-plane-api.md, "Answer shapes"): a `github`
//! and an `external_docker` AgentDeployment, both with secrets, reach Ready
//! and stay Ready over several drift periods at a short resync, with no
//! PATCH and no new revision after Ready. Each test also proves that drift
//! checks did run (GETs after Ready), so a quiet operator cannot pass.
//!
//! The shapes: the emulator's default (every quirk of the real service),
//! secrets never read back, `deployment_type` accepted for external images
//! (conflicting evidence), the exact name filter ignored (an older
//! service), and the echo shape of the project's older notes.

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::{AgentDeploymentManifest, Harness, github_deployment, route};

const TIMEOUT: Duration = Duration::from_secs(60);
/// The resync interval (the drift period) of these tests, in seconds.
const RESYNC_SECONDS: f64 = 1.0;
/// Drift periods watched after Ready.
const DRIFT_PERIODS: u32 = 5;

fn docker_deployment(name: &str) -> serde_json::Value {
    AgentDeploymentManifest::docker(name, "docker.io/acme/agent:1")
        .source_config(
            "resourceSpec",
            json!({"cpu": 1, "memoryMb": 2048, "maxScale": 2}),
        )
        .secret("API_TOKEN", "shape-docker-token")
        .build()
}

/// Runs both AgentDeployments against an emulator started with
/// `emulator_args`, and checks the steady state after Ready.
async fn steady_in_shape(test: &str, emulator_args: &[&str]) {
    let h = Harness::builder(test)
        .step_seconds(0.2)
        .emulator_flags(emulator_args)
        .resync_seconds(RESYNC_SECONDS)
        .start()
        .await;
    let mut github = github_deployment("shape-github", "main");
    github["spec"]["secrets"] = json!([{"name": "API_TOKEN", "value": "shape-github-token"}]);
    github["spec"]["sourceConfig"]["installCommand"] = json!("npm ci");
    h.apply(github).await;
    h.apply(docker_deployment("shape-docker")).await;
    for name in ["shape-github", "shape-docker"] {
        h.wait_ready(name, TIMEOUT).await;
    }
    let before = h.emulator.requests().await;
    let ids: Vec<String> = h
        .remote_deployments()
        .await
        .into_iter()
        .map(|d| d.id)
        .collect();
    let mut revisions_before = 0;
    for id in &ids {
        revisions_before += h.revisions(id).await.len();
    }

    tokio::time::sleep(Duration::from_secs_f64(
        RESYNC_SECONDS * f64::from(DRIFT_PERIODS),
    ))
    .await;

    let after = h.emulator.requests().await;
    let mut revisions_after = 0;
    for id in &ids {
        revisions_after += h.revisions(id).await.len();
    }
    let gets = after.count(route::GET) - before.count(route::GET);
    assert!(
        gets >= 4,
        "{test}: drift checks ran after Ready ({gets} GETs over {DRIFT_PERIODS} periods)"
    );
    assert_eq!(
        after.count(route::PATCH) - before.count(route::PATCH),
        0,
        "{test}: no PATCH after Ready"
    );
    assert_eq!(
        after.count(route::REDEPLOY) - before.count(route::REDEPLOY),
        0,
        "{test}: no redeploy after Ready"
    );
    assert_eq!(
        revisions_after, revisions_before,
        "{test}: no new revision after Ready"
    );
    for name in ["shape-github", "shape-docker"] {
        let o = h.wait_ready(name, Duration::from_secs(1)).await;
        let status = o.status.unwrap_or_default();
        assert!(
            status.unechoed_hash.is_some(),
            "{test}/{name}: what was sent is remembered"
        );
        if name == "shape-github" && !emulator_args.contains(&"--echo") {
            assert!(
                status
                    .source_commit
                    .as_deref()
                    .is_some_and(agent_operator::plan::shapes::is_resolved_commit),
                "{test}: the resolved commit is recorded as provenance: {:?}",
                status.source_commit
            );
            assert!(status.built_image.is_some(), "{test}: the built image");
        }
    }
}

#[tokio::test]
async fn the_real_shape_converges_and_stays_quiet() {
    test_support::skip_without!(Envtest);
    steady_in_shape("shape-real", &[]).await;
}

#[tokio::test]
async fn secrets_never_read_back_are_not_drift() {
    test_support::skip_without!(Envtest);
    steady_in_shape(
        "shape-secrets-unread",
        &["--with-quirk", "secrets-never-read"],
    )
    .await;
}

#[tokio::test]
async fn a_service_that_fills_a_type_for_images_sees_no_drift() {
    test_support::skip_without!(Envtest);
    // The spec cannot name a type for an image (refused at admission: the
    // real service refuses it); a service that fills its own is not drift.
    steady_in_shape(
        "shape-docker-type",
        &["--without-quirk", "external-deployment-type"],
    )
    .await;
}

#[tokio::test]
async fn a_service_without_the_exact_name_filter() {
    test_support::skip_without!(Envtest);
    steady_in_shape("shape-no-name-filter", &["--without-quirk", "name-filter"]).await;
}

#[tokio::test]
async fn the_echo_shape_of_older_notes() {
    test_support::skip_without!(Envtest);
    steady_in_shape("shape-echo", &["--echo"]).await;
}
