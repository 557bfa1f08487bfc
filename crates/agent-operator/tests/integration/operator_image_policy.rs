//! `spec.imagePolicy` of `external_docker` AgentDeployments on a real OCI
//! registry on loopback (`crane registry serve`, images pushed by crane):
//! `Pin` sends the image by the digest its tag named at the generation and
//! ignores a moved tag; `Follow` turns a moved tag into exactly one new
//! revision and an `ImageTagMoved` event naming both digests; an image
//! without linux/amd64 stalls, and an unreachable registry backs off, both
//! before any control plane request. The registry requests of `Follow` per
//! drift period are counted in the registry's own log.

use crate::support;

use std::time::Duration;

use support::{Harness, condition, wait_for};
use test_support::manifests::AgentDeploymentManifest;

use crate::registry_resolve::push_image;
use crate::release::Registry;

const TIMEOUT: Duration = Duration::from_secs(90);
/// The drift period (resync interval) of these tests, seconds.
const RESYNC_SECONDS: f64 = 1.0;

fn docker(name: &str, image: &str, policy: &str) -> serde_json::Value {
    AgentDeploymentManifest::docker(name, image)
        .spec("imagePolicy", policy)
        .build()
}

/// The `image_uri` the control plane holds for the deployment named `name`.
async fn remote_image(h: &Harness, name: &str) -> Option<String> {
    h.remote_deployments()
        .await
        .into_iter()
        .find(|d| d.name == name)
        .and_then(|d| d.source_revision_config.image_uri)
}

#[tokio::test]
async fn a_moved_tag_changes_nothing_under_pin_and_makes_one_revision_under_follow() {
    test_support::skip_without!(Envtest, Tools);
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::start(dir.path());
    let image = format!("{}/acme/agent:v1", registry.host);
    let by_digest = |d: &str| format!("{}/acme/agent@{d}", registry.host);
    let first = push_image(dir.path(), &image, "linux/amd64", "one");

    let h = Harness::quick("op-image-policy")
        .resync_seconds(RESYNC_SECONDS)
        .start()
        .await;
    h.apply(docker("pinned", &image, "Pin")).await;
    h.apply(docker("following", &image, "Follow")).await;
    let mut latest = Vec::new();
    for name in ["pinned", "following"] {
        let status = h.wait_ready(name, TIMEOUT).await.status.unwrap();
        let resolved = status.resolved_image.clone().expect("status.resolvedImage");
        assert_eq!(resolved.digest, first, "{name}");
        assert_eq!(resolved.image_uri, image, "{name}");
        assert_eq!(resolved.pinned, by_digest(&first), "{name}");
        assert_eq!(
            status.revisions[0].image_digest.as_deref(),
            Some(first.as_str()),
            "{name}: status.revisions names the digest deployed"
        );
        assert_eq!(
            remote_image(&h, name).await.as_deref(),
            Some(by_digest(&first).as_str()),
            "{name}: the image is sent by digest"
        );
        latest.push(status);
    }

    // Steady: Pin asks the registry no more; Follow once per drift period.
    let window = 6.0 * RESYNC_SECONDS;
    let before = registry.requests().len();
    tokio::time::sleep(Duration::from_secs_f64(window)).await;
    let steady: Vec<String> = registry.requests()[before..].to_vec();
    let heads = steady.iter().filter(|r| r.starts_with("HEAD")).count();
    println!(
        "FIGURE registry requests under Follow: {} in {window} s ({heads} resolutions) with a \
         drift period of {RESYNC_SECONDS} s: {:.2} requests and {:.2} resolutions per period; \
         at the default 300 s: {:.0} requests per AgentDeployment per hour",
        steady.len(),
        steady.len() as f64 / (window / RESYNC_SECONDS),
        heads as f64 / (window / RESYNC_SECONDS),
        steady.len() as f64 / (window / RESYNC_SECONDS) * 3600.0 / 300.0,
    );
    assert!(
        (3..=10).contains(&heads),
        "one resolution per drift period (0.75-1.25 s) for Follow, none for Pin: {steady:?}"
    );
    assert!(
        steady.iter().all(|r| !r.contains("/blobs/")),
        "a known digest is not read again: {steady:?}"
    );

    // The tag moves.
    let moved = push_image(dir.path(), &image, "linux/amd64", "one, rebuilt");
    assert_ne!(moved, first);
    support::eventually(TIMEOUT, "Follow deploys the moved tag", || async {
        (remote_image(&h, "following").await.as_deref() == Some(by_digest(&moved).as_str()))
            .then_some(())
    })
    .await;
    let following = h
        .wait_ready_past(
            "following",
            latest[1].latest_revision_id.as_deref(),
            TIMEOUT,
        )
        .await;
    // A few more drift periods: nothing more happens.
    tokio::time::sleep(Duration::from_secs_f64(4.0 * RESYNC_SECONDS)).await;

    let following_id = following
        .status
        .as_ref()
        .unwrap()
        .deployment_id
        .clone()
        .unwrap();
    let pinned_id = latest[0].deployment_id.clone().unwrap();
    assert_eq!(
        h.revisions(&following_id).await.len(),
        2,
        "Follow: exactly one new revision for the moved tag"
    );
    assert_eq!(
        h.revisions(&pinned_id).await.len(),
        1,
        "Pin: no revision for a moved tag"
    );
    assert_eq!(
        remote_image(&h, "pinned").await.as_deref(),
        Some(by_digest(&first).as_str())
    );
    let pinned = h.api.get("pinned").await.unwrap();
    assert_eq!(
        pinned.status.unwrap().resolved_image.unwrap().digest,
        first,
        "Pin keeps the digest of its generation"
    );
    let following = h.api.get("following").await.unwrap();
    assert_eq!(
        following.status.unwrap().resolved_image.unwrap().digest,
        moved
    );
    let event =
        support::wait_for_event(&h.client, &h.ns, "following", "ImageTagMoved", TIMEOUT).await;
    let note = support::note_of(&event);
    assert!(note.contains(&first) && note.contains(&moved), "{note}");
    let reasons = support::event_reasons(&h.client, &h.ns, "following").await;
    assert_eq!(
        reasons.iter().filter(|r| *r == "ImageTagMoved").count(),
        1,
        "{reasons:?}"
    );
    assert!(
        !reasons.iter().any(|r| r == "DriftCorrected"),
        "a moved tag is not drift: {reasons:?}"
    );
    assert!(
        !support::event_reasons(&h.client, &h.ns, "pinned")
            .await
            .iter()
            .any(|r| r == "ImageTagMoved")
    );
}

#[tokio::test]
async fn a_wrong_platform_stalls_and_a_registry_down_backs_off_before_any_request() {
    test_support::skip_without!(Envtest, Tools);
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::start(dir.path());
    let arm = format!("{}/acme/arm:v1", registry.host);
    push_image(dir.path(), &arm, "linux/arm64", "arm only");

    // A long resync: the AgentControlPlane's probe (`GET /v2/deployments`,
    // limit 1) comes once a minute, not once a second, so the requests of
    // the window below are the AgentDeployments' own.
    let h = Harness::quick("op-image-refused")
        .resync_seconds(60.0)
        .start()
        .await;
    h.wait_control_plane_ready(TIMEOUT).await;
    let mark = h.emulator.request_mark().await;
    h.apply(docker("wrong-platform", &arm, "Pin")).await;
    // Port 9 (discard) on loopback: nothing answers.
    h.apply(docker(
        "registry-down",
        "127.0.0.1:9/acme/agent:v1",
        "Follow",
    ))
    .await;

    // A registry that is not on --allowed-hosts (the harness allows
    // loopback only): refused before any request to it.
    h.apply(docker(
        "registry-not-allowed",
        "ghcr.io/acme/agent:v1",
        "Pin",
    ))
    .await;
    let refused = h
        .wait_stalled("registry-not-allowed", "HostNotAllowed", TIMEOUT)
        .await;
    let message = condition(&refused, "Stalled").unwrap().message;
    assert!(
        message.contains("ghcr.io") && message.contains("--allowed-hosts"),
        "{message}"
    );
    let stalled = h
        .wait_stalled("wrong-platform", "ImagePlatformUnsupported", TIMEOUT)
        .await;
    let message = condition(&stalled, "Stalled").unwrap().message;
    assert!(
        message.contains("linux/arm64") && message.contains("linux/amd64"),
        "{message}"
    );
    let down = wait_for(
        &h.api,
        "registry-down",
        TIMEOUT,
        "RegistryUnavailable",
        |o| {
            condition(o, "Ready")
                .filter(|c| c.status == "False" && c.reason == "RegistryUnavailable")
                .map(|_| o.clone())
        },
    )
    .await;
    let message = condition(&down, "Ready").unwrap().message;
    assert!(message.contains("127.0.0.1:9"), "{message}");
    assert!(
        condition(&down, "Reconciling").is_some_and(|c| c.status == "True"),
        "retried: {:?}",
        down.status
    );
    // A few seconds more (the registry's backoff runs): still nothing sent
    // to the control plane.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let sent: Vec<String> = h
        .emulator
        .requests_since(mark)
        .await
        .into_iter()
        .map(|r| r.route)
        .filter(|r| r.contains("/deployments"))
        .collect();
    // At most the plane's own probe (a list of one deployment, once a
    // minute); a pass of an AgentDeployment that went on would have looked
    // its name up and created it (POST).
    assert!(
        sent.iter().all(|r| r == "GET /v2/deployments") && sent.len() <= 1,
        "control plane requests: {sent:?}"
    );
    for name in ["wrong-platform", "registry-down", "registry-not-allowed"] {
        let obj = h.api.get(name).await.unwrap();
        let status = obj.status.unwrap_or_default();
        assert!(status.deployment_id.is_none(), "{name}: {status:?}");
        assert!(status.resolved_image.is_none(), "{name}: {status:?}");
    }
}
