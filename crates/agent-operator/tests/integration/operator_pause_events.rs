//! Items 13 and 14: the pause annotation stops every remote call until it is
//! removed; events tell the story of an object's life and never contain a
//! secret value. They are written through core/v1 with `lastTimestamp`,
//! because events.k8s.io/v1 refuses one (pinned here against the real API
//! server; issue 36).

use crate::support;

use std::time::Duration;

use agent_operator::api::deployment::PAUSED_ANNOTATION;
use agent_operator::controlplane::types::{DeploymentPatch, SourceConfig};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::DeleteParams;
use serde_json::json;
use support::{Harness, apply_json, condition, github_deployment, route, wait_for};

const TIMEOUT: Duration = Duration::from_secs(60);
const SECRET_VALUE: &str = "sk-events-5c3a1f";

#[tokio::test]
async fn paused_resource_makes_no_remote_call_until_resumed() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-pause")
        .scenario("BUILD_FAILED:repo_ref=broken")
        .resync_seconds(0.5)
        .start()
        .await;
    let name = "paused-agent";
    let mut manifest = github_deployment(name, "main");
    h.apply(manifest.clone()).await;
    let status = h.wait_ready(name, TIMEOUT).await.status.unwrap();
    let id = status.deployment_id.clone().unwrap();

    manifest["metadata"]["annotations"] = json!({PAUSED_ANNOTATION: "true"});
    h.apply(manifest.clone()).await;
    let obj = wait_for(&h.api, name, TIMEOUT, "Ready reason Paused", |o| {
        let ready = condition(o, "Ready")?;
        (ready.reason == "Paused").then(|| o.clone())
    })
    .await;
    assert_eq!(condition(&obj, "Ready").unwrap().status, "False");
    // Neither in progress nor stalled: both abnormal-true conditions absent.
    assert!(condition(&obj, "Reconciling").is_none());
    assert!(condition(&obj, "Stalled").is_none());

    // A spec change while paused: no remote call at all (not even the
    // resync reads).
    let calls = h.emulator.requests().await.deployment_calls();
    manifest["spec"]["sourceRevisionConfig"]["repoRef"] = "release-2".into();
    h.apply(manifest.clone()).await;
    wait_for(
        &h.api,
        name,
        TIMEOUT,
        "the paused pass on generation 2",
        |o| {
            let ready = condition(o, "Ready")?;
            (ready.reason == "Paused" && ready.observed_generation == Some(2)).then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        h.emulator.requests().await.deployment_calls(),
        calls,
        "no remote call while paused"
    );
    let remote = h.cp.get_deployment(&id).await.unwrap();
    assert_eq!(
        agent_operator::plan::shapes::configured_ref(&remote),
        Some("main")
    );

    // Resumed: the change is applied as a spec change.
    manifest["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("annotations");
    h.apply(manifest).await;
    let obj = wait_for(&h.api, name, TIMEOUT, "Ready on the new revision", |o| {
        let s = o.status.as_ref()?;
        (support::is_ready_now(o) && s.latest_revision_id != status.latest_revision_id)
            .then(|| o.clone())
    })
    .await;
    assert_eq!(obj.metadata.generation, Some(2));
    let remote = h.cp.get_deployment(&id).await.unwrap();
    assert_eq!(
        agent_operator::plan::shapes::configured_ref(&remote),
        Some("release-2")
    );
    let reasons = support::event_reasons(&h.client, &h.ns, name).await;
    assert!(
        reasons.iter().any(|r| r == "Patched"),
        "a spec change made while paused is a Patched event: {reasons:?}"
    );
    assert!(
        !reasons.iter().any(|r| r == "DriftCorrected"),
        "a spec change made while paused is not drift: {reasons:?}"
    );
}

/// The paused annotation takes `"true"` or `"false"` only (issue
/// "Hardening", item 6): `paused: "yes"` is not ignored (the resource
/// would deploy) but reported `Stalled`/`InvalidAnnotation`, naming the
/// annotation and the accepted values, before any request; nothing is
/// lost: `"false"` then deploys it. On a deployed resource being deleted,
/// an invalid value keeps the remote deployment (no DELETE) until fixed.
#[tokio::test]
async fn an_invalid_paused_value_is_stalled_before_any_request() {
    test_support::skip_without!(Envtest);
    // The shipped resync interval: the AgentControlPlane is probed once,
    // so every request logged after that would be about the resource.
    let h = Harness::quick("op-pause-invalid").start().await;
    let planes: Api<agent_operator::api::AgentControlPlane> =
        Api::namespaced(h.client.clone(), &h.ns);
    support::eventually(TIMEOUT, "the AgentControlPlane Ready", || async {
        let p = planes.get_opt("default").await.ok()??;
        let ready =
            agent_operator::api::conditions::find(&p.status.as_ref()?.conditions, "Ready")?.clone();
        (ready.status == "True").then_some(())
    })
    .await;
    let before = h.emulator.request_mark().await;
    let name = "typo-paused-agent";
    let mut manifest = github_deployment(name, "main");
    manifest["metadata"]["annotations"] = json!({PAUSED_ANNOTATION: "yes"});
    h.apply(manifest.clone()).await;
    let obj = h.wait_stalled(name, "InvalidAnnotation", TIMEOUT).await;
    let stalled = condition(&obj, "Stalled").unwrap();
    for part in [PAUSED_ANNOTATION, "\"yes\"", "\"true\"", "\"false\""] {
        assert!(stalled.message.contains(part), "{part}: {stalled:?}");
    }
    support::wait_for_event(&h.client, &h.ns, name, "InvalidAnnotation", TIMEOUT).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let sent: Vec<_> = h.emulator.requests_since(before).await;
    assert!(
        sent.is_empty(),
        "requests for an invalid paused value: {sent:?}"
    );

    // "false": it runs, nothing was lost.
    manifest["metadata"]["annotations"] = json!({PAUSED_ANNOTATION: "false"});
    h.apply(manifest.clone()).await;
    h.wait_ready(name, TIMEOUT).await;

    // Deleting with an invalid value: no DELETE, the resource stays.
    manifest["metadata"]["annotations"] = json!({PAUSED_ANNOTATION: "maybe"});
    h.apply(manifest.clone()).await;
    h.wait_stalled(name, "InvalidAnnotation", TIMEOUT).await;
    h.api
        .delete(name, &DeleteParams::default())
        .await
        .expect("deleting");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(h.emulator.requests().await.count(route::DELETE), 0);
    assert!(h.api.get_opt(name).await.unwrap().is_some());
    manifest["metadata"]["annotations"] = json!({PAUSED_ANNOTATION: "false"});
    h.apply(manifest).await;
    support::wait_until_gone(&h.api, name, TIMEOUT).await;
    assert_eq!(h.emulator.requests().await.count(route::DELETE), 1);
}

#[tokio::test]
async fn events_tell_the_story_without_secret_values() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-events")
        .scenario("BUILD_FAILED:repo_ref=broken")
        .resync_seconds(0.5)
        .start()
        .await;
    let name = "storied-agent";
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), &h.ns);
    apply_json(
        &secrets,
        "agent-env",
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "agent-env"},
               "stringData": {"openai": SECRET_VALUE}}),
    )
    .await;
    let mut manifest = github_deployment(name, "main");
    manifest["spec"]["secrets"] = json!([
        {"name": "OPENAI_API_KEY", "valueFrom": {"secretKeyRef": {"name": "agent-env", "key": "openai"}}}
    ]);

    // RevisionDeployed (naming the deployment created: the create has no
    // event of its own).
    let id = h.converge(manifest.clone(), TIMEOUT).await;
    // Patched: a spec change.
    manifest["spec"]["sourceConfig"]["buildOnPush"] = true.into();
    h.apply(manifest.clone()).await;
    support::wait_for_event(&h.client, &h.ns, name, "Patched", TIMEOUT).await;
    // DriftCorrected: a change outside.
    h.cp.patch_deployment(
        &id,
        &DeploymentPatch {
            source_config: Some(SourceConfig {
                build_on_push: Some(false),
                ..Default::default()
            }),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    support::wait_for_event(&h.client, &h.ns, name, "DriftCorrected", TIMEOUT).await;
    // RevisionFailed: a revision that fails.
    manifest["spec"]["sourceRevisionConfig"]["repoRef"] = "broken".into();
    h.apply(manifest).await;
    h.wait_stalled(name, "RevisionFailed", TIMEOUT).await;
    // Deleted.
    h.api.delete(name, &DeleteParams::default()).await.unwrap();
    support::wait_until_gone(&h.api, name, TIMEOUT).await;
    support::wait_for_event(&h.client, &h.ns, name, "Deleted", TIMEOUT).await;

    let events = support::events_about(&h.client, &h.ns, name).await;
    let find = |reason: &str| {
        events
            .iter()
            .find(|e| e.reason.as_deref() == Some(reason))
            .unwrap_or_else(|| panic!("no {reason} event in {events:#?}"))
    };
    for reason in ["RevisionDeployed", "Patched", "DriftCorrected", "Deleted"] {
        let event = find(reason);
        assert_eq!(event.type_.as_deref(), Some("Normal"), "{reason}");
        assert_eq!(
            event.reporting_controller.as_deref(),
            Some("agent-operator"),
            "{reason}"
        );
    }
    support::wait_for_created_event(&h.client, &h.ns, name, &id, TIMEOUT).await;
    assert!(
        !events
            .iter()
            .any(|e| e.reason.as_deref() == Some("Created"))
    );
    assert_eq!(find("RevisionFailed").type_.as_deref(), Some("Warning"));
    assert!(
        find("RevisionFailed")
            .note
            .as_deref()
            .unwrap()
            .contains("BUILD_FAILED")
    );
    for event in &events {
        let note = event.note.as_deref().unwrap_or_default();
        assert!(
            !note.contains(SECRET_VALUE),
            "{:?} shows the secret value: {note}",
            event.reason
        );
    }
    let counts = h.emulator.requests().await;
    assert_eq!(counts.count(route::CREATE), 1);
}

/// Why the operator writes its events through core/v1: the real API server
/// refuses an events.k8s.io/v1 Event that sets `deprecatedLastTimestamp`
/// (what `kubectl get events --sort-by=.lastTimestamp` reads), and accepts
/// the same event through core/v1 with `lastTimestamp`, readable through
/// events.k8s.io/v1 as `deprecatedLastTimestamp`.
#[tokio::test]
async fn only_core_events_can_carry_a_last_timestamp() {
    test_support::skip_without!(Envtest);
    let client = crate::common::client().await;
    let ns = crate::common::test_namespace(&client, "op-events-v1").await;
    let at = "2026-01-01T00:00:00Z";
    let v1: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), &ns);
    let refused: k8s_openapi::api::events::v1::Event = serde_json::from_value(json!({
        "metadata": {"name": "with-last"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "deprecatedLastTimestamp": at,
        "regarding": {"kind": "AgentDeployment", "name": "x", "namespace": ns},
        "reason": "Check", "note": "n", "type": "Normal", "action": "Reconcile",
        "reportingController": "agent-operator", "reportingInstance": "agent-operator",
    }))
    .unwrap();
    match v1.create(&Default::default(), &refused).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            assert!(
                // "lastTimestamp: Invalid value: \"\": needs to be unset"
                status.message.contains("lastTimestamp")
                    && status.message.contains("needs to be unset"),
                "{status:?}"
            );
        }
        other => panic!("events.k8s.io/v1 accepted deprecatedLastTimestamp: {other:?}"),
    }
    let core: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), &ns);
    let accepted: k8s_openapi::api::core::v1::Event = serde_json::from_value(json!({
        "metadata": {"name": "with-last"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "firstTimestamp": at, "lastTimestamp": at, "count": 1,
        "involvedObject": {"kind": "AgentDeployment", "name": "x", "namespace": ns},
        "reason": "Check", "message": "n", "type": "Normal", "action": "Reconcile",
        "reportingComponent": "agent-operator", "reportingInstance": "agent-operator",
    }))
    .unwrap();
    core.create(&Default::default(), &accepted)
        .await
        .expect("core/v1 accepts lastTimestamp");
    let read = v1.get("with-last").await.unwrap();
    assert_eq!(
        read.deprecated_last_timestamp
            .map(|t| t.0.to_string())
            .as_deref(),
        Some(at)
    );
}
