//! Preview environments (the issue "Bring an existing workspace under
//! GitOps, and throwaway preview environments", item 4): `spec.expiry`
//! deletes the remote deployment once at its instant (absolute, or after
//! the object's creation), leaves it with `deletionPolicy: Orphan`, and
//! leaves the object `Expired` with no further request, even when the spec
//! is applied again; `spec.previews.maxLive` of the AgentControlPlane holds
//! the next preview, with no request, until one expires or is deleted.

use crate::support;

use std::time::Duration;

use agent_operator::api::AgentControlPlane;
use agent_operator::api::deployment::AgentDeployment;
use agent_operator::controlplane::Error as CpError;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;
use support::{Harness, condition, github_deployment, route, wait_for};

const TIMEOUT: Duration = Duration::from_secs(60);

/// `manifest` with `spec.expiry` = `expiry`.
fn preview(name: &str, expiry: serde_json::Value) -> serde_json::Value {
    let mut m = github_deployment(name, "main");
    m["spec"]["expiry"] = expiry;
    m
}

/// Waits until `name` reports `Ready=False` with reason `Expired`.
async fn wait_expired(h: &Harness, name: &str, timeout: Duration) -> AgentDeployment {
    wait_for(&h.api, name, timeout, "Ready reason Expired", |o| {
        let ready = condition(o, "Ready")?;
        (ready.reason == "Expired" && ready.status == "False").then(|| o.clone())
    })
    .await
}

/// Requests logged from `mark` on, other than the list that the
/// AgentControlPlane's probe also sends, as `route status id`.
async fn requests_since(h: &Harness, mark: usize) -> Vec<String> {
    let log = h.emulator.request_log().await;
    assert_eq!(log.dropped, 0, "the request log is complete");
    log.entries
        .iter()
        .skip(mark)
        .filter(|r| r.route != route::LIST)
        .map(|r| format!("{} {} {:?}", r.route, r.status, r.deployment_id))
        .collect()
}

/// Checks the kstatus conditions of an expired object: `Stalled=True`,
/// `Ready=False` and no `Reconciling` (a terminal state, never in
/// progress), reason `Expired`, for its generation, and `status.expiredAt`
/// set.
fn assert_expired_status(obj: &AgentDeployment) {
    assert!(condition(obj, "Reconciling").is_none(), "{obj:?}");
    for (type_, status) in [("Ready", "False"), ("Stalled", "True")] {
        let c = condition(obj, type_).unwrap_or_else(|| panic!("{type_} condition"));
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            (status, "Expired"),
            "{type_}: {c:?}"
        );
        assert_eq!(c.observed_generation, obj.metadata.generation);
    }
    assert!(obj.status.as_ref().unwrap().expired_at.is_some());
}

#[tokio::test]
async fn an_absolute_expiry_deletes_the_remote_once_and_nothing_brings_it_back() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-expiry-at").start().await;
    let name = "pr-17";
    let at = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(12);
    let at = at.round(jiff::Unit::Second).unwrap();
    let manifest = preview(name, json!({"at": at.to_string()}));
    let id = h.converge(manifest.clone(), TIMEOUT).await;
    let ready = h.api.get(name).await.unwrap();
    assert_eq!(
        ready.status.as_ref().unwrap().expires_at.as_deref(),
        Some(at.to_string().as_str()),
        "status shows the instant"
    );

    let obj = wait_expired(&h, name, TIMEOUT).await;
    // The pass ran at the instant (a wake-up, not a poll).
    let expired_at: jiff::Timestamp = obj
        .status
        .as_ref()
        .unwrap()
        .expired_at
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    let late = expired_at.duration_since(at).as_secs_f64();
    assert!(
        (-1.0..5.0).contains(&late),
        "expired {late:.1} s after the instant"
    );
    assert_expired_status(&obj);
    assert!(condition(&obj, "Ready").unwrap().message.contains(&id));
    support::wait_for_event(&h.client, &h.ns, name, "Expired", TIMEOUT).await;
    support::eventually(TIMEOUT, "the remote deployment gone", || async {
        matches!(
            h.cp.get_deployment(&id).await,
            Err(CpError::NotFound { .. })
        )
        .then_some(())
    })
    .await;

    // Nothing more: no request over some seconds, and a GitOps tool that
    // applies the object again (a new image: a new generation) brings
    // nothing back.
    let mark = h.emulator.request_mark().await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let mut again = manifest;
    again["spec"]["sourceRevisionConfig"]["repoRef"] = "feature".into();
    h.apply(again).await;
    let obj = wait_for(&h.api, name, TIMEOUT, "the new generation observed", |o| {
        (o.status.as_ref()?.observed_generation == o.metadata.generation).then(|| o.clone())
    })
    .await;
    assert_expired_status(&obj);
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(requests_since(&h, mark).await, Vec::<String>::new());
    let counts = h.emulator.requests().await;
    assert_eq!(counts.count(route::DELETE), 1, "one DELETE: {counts:?}");
    assert_eq!(counts.count(route::CREATE), 1, "never created again");

    // Deleting the object sends nothing either: the remote went at expiry.
    let mark = h.emulator.request_mark().await;
    h.api.delete(name, &DeleteParams::default()).await.unwrap();
    support::wait_until_gone(&h.api, name, TIMEOUT).await;
    assert_eq!(requests_since(&h, mark).await, Vec::<String>::new());
}

#[tokio::test]
async fn a_duration_after_creation_expires_and_orphan_leaves_the_remote() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-expiry-orphan").start().await;
    let name = "pr-18";
    let mut manifest = preview(name, json!({"afterCreationSeconds": 8}));
    manifest["spec"]["deletionPolicy"] = "Orphan".into();
    let id = h.converge(manifest, TIMEOUT).await;

    let obj = wait_expired(&h, name, TIMEOUT).await;
    assert_expired_status(&obj);
    let created = obj.metadata.creation_timestamp.as_ref().unwrap().0;
    let expired_at: jiff::Timestamp = obj
        .status
        .as_ref()
        .unwrap()
        .expired_at
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    let after = expired_at.duration_since(created).as_secs_f64();
    assert!(
        (7.0..13.0).contains(&after),
        "expired {after:.1} s after creation"
    );
    let message = condition(&obj, "Ready").unwrap().message;
    assert!(message.contains("Orphan"), "{message}");

    let mark = h.emulator.request_mark().await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(requests_since(&h, mark).await, Vec::<String>::new());
    h.api.delete(name, &DeleteParams::default()).await.unwrap();
    support::wait_until_gone(&h.api, name, TIMEOUT).await;
    let remote = h.cp.get_deployment(&id).await.unwrap();
    assert_eq!(remote.status.as_deref(), Some("READY"), "left running");
    assert_eq!(h.emulator.requests().await.count(route::DELETE), 0);
}

/// Sets `spec.previews.maxLive` of the AgentControlPlane `default`.
async fn set_max_live(h: &Harness, max: u32) {
    let planes: Api<AgentControlPlane> = Api::namespaced(h.client.clone(), &h.ns);
    planes
        .patch(
            "default",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"previews": {"maxLive": max}}})),
        )
        .await
        .expect("patching the AgentControlPlane");
}

/// Waits until `name` waits for a place under the cap.
async fn wait_capped(h: &Harness, name: &str) -> AgentDeployment {
    wait_for(
        &h.api,
        name,
        TIMEOUT,
        "Reconciling reason PreviewLimitReached",
        |o| {
            let c = condition(o, "Reconciling")?;
            (c.status == "True" && c.reason == "PreviewLimitReached").then(|| o.clone())
        },
    )
    .await
}

#[tokio::test]
async fn the_preview_cap_holds_the_next_one_until_one_expires_or_is_deleted() {
    test_support::skip_without!(Envtest);
    // A waiting preview looks again every blocked interval.
    let h = Harness::quick("op-expiry-cap")
        .operator_flags(&["--blocked-interval-seconds", "2"])
        .start()
        .await;
    h.wait_control_plane_ready(TIMEOUT).await;
    set_max_live(&h, 1).await;

    h.converge(
        preview("pr-1", json!({"afterCreationSeconds": 15})),
        TIMEOUT,
    )
    .await;
    h.apply(preview("pr-2", json!({"afterCreationSeconds": 600})))
        .await;
    let waiting = wait_capped(&h, "pr-2").await;
    let message = condition(&waiting, "Reconciling").unwrap().message;
    assert!(message.contains("maxLive is 1"), "{message}");
    // Not a preview: not capped.
    h.converge(github_deployment("main-agent", "main"), TIMEOUT)
        .await;
    let names = |ds: Vec<agent_operator::controlplane::types::Deployment>| {
        let mut n: Vec<String> = ds.into_iter().map(|d| d.name).collect();
        n.sort();
        n
    };
    assert_eq!(names(h.remote_deployments().await), ["main-agent", "pr-1"]);
    assert_eq!(
        h.emulator.requests().await.count(route::CREATE),
        2,
        "no request for pr-2"
    );

    // pr-1 expires: pr-2 takes its place.
    wait_expired(&h, "pr-1", TIMEOUT).await;
    h.wait_ready("pr-2", TIMEOUT).await;

    // The next one waits until pr-2 is deleted.
    h.apply(preview("pr-3", json!({"idleSeconds": 600}))).await;
    wait_capped(&h, "pr-3").await;
    h.api
        .delete("pr-2", &DeleteParams::default())
        .await
        .unwrap();
    support::wait_until_gone(&h.api, "pr-2", TIMEOUT).await;
    h.wait_ready("pr-3", TIMEOUT).await;
    assert_eq!(names(h.remote_deployments().await), ["main-agent", "pr-3"]);
    assert_eq!(h.emulator.requests().await.count(route::CREATE), 4);
}

#[tokio::test]
async fn a_new_revision_pushes_an_idle_expiry_back() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-expiry-idle").start().await;
    let name = "pr-19";
    let manifest = preview(name, json!({"idleSeconds": 10}));
    h.converge(manifest.clone(), TIMEOUT).await;
    let first = h
        .api
        .get(name)
        .await
        .unwrap()
        .status
        .unwrap()
        .latest_revision_id;

    // A push: a new revision 4 s later.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let pushed = jiff::Timestamp::now();
    let mut again = manifest;
    again["spec"]["sourceRevisionConfig"]["repoRef"] = "feature".into();
    h.apply(again).await;
    let ready = h.wait_ready_past(name, first.as_deref(), TIMEOUT).await;
    assert_eq!(ready.status.as_ref().unwrap().revisions.len(), 2);

    let obj = wait_expired(&h, name, TIMEOUT).await;
    assert_expired_status(&obj);
    let expired_at: jiff::Timestamp = obj
        .status
        .as_ref()
        .unwrap()
        .expired_at
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    let idle = expired_at.duration_since(pushed).as_secs_f64();
    assert!(
        (9.0..16.0).contains(&idle),
        "expired {idle:.1} s after the new revision (idleSeconds 10)"
    );
    let counts = h.emulator.requests().await;
    assert_eq!(counts.count(route::DELETE), 1, "{counts:?}");
}
