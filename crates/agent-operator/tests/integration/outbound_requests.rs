//! Outbound requests under control (issue "Hardening", item 1): the
//! operator sends requests only to the hosts of its `--allowed-hosts`, and
//! never copies an answer's body into status or events beyond the parsed,
//! bounded `detail` of the known services.
//!
//! Every URL below is one the operator must not call: each test asserts the
//! `Stalled`/`HostNotAllowed` refusal (naming the field, the host and the
//! flag) and that nothing reached the host: the emulator's request log, or
//! a TCP listener that counts connections. The operators of these tests run
//! with `--allowed-hosts 127.0.0.1` (the harness default), so `localhost`,
//! although it is the same machine, is another host.

use crate::{common, support};

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agent_operator::api::AgentControlPlane;
use agent_operator::api::conditions::{READY, find};
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};
use support::{
    AgentDeploymentManifest, Harness, apply_json, condition, events_about, github_deployment,
    is_stalled_with, wait_for,
};

const TIMEOUT: Duration = Duration::from_secs(60);
/// How long the tests watch for requests after the refusal.
const QUIET: Duration = Duration::from_secs(3);

/// Asserts the refusal message: the field, the host, the flag.
fn assert_names_field_host_and_flag(message: &str, field: &str, host: &str) {
    for part in [field, host, "--allowed-hosts"] {
        assert!(
            message.contains(part),
            "the refusal does not name {part:?}: {message}"
        );
    }
}

/// An AgentControlPlane whose `url` names a host outside the list is
/// `Stalled`/`HostNotAllowed`, so is an AgentDeployment using it, and the
/// control plane (the emulator, reached through `localhost`) gets no request
/// at all.
#[tokio::test]
async fn a_control_plane_outside_the_allowed_hosts_gets_no_request() {
    test_support::skip_without!(Envtest);
    let h = Harness::builder("out-plane")
        .without_operator()
        .start()
        .await;
    let port = h.emulator.base_url.rsplit(':').next().unwrap().to_owned();
    let elsewhere = format!("http://localhost:{port}");
    let planes: Api<AgentControlPlane> = Api::namespaced(h.client.clone(), &h.ns);
    apply_json(
        &planes,
        "default",
        json!({
            "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentControlPlane",
            "metadata": {"name": "default"},
            "spec": {
                "url": elsewhere,
                "workspaceId": support::WORKSPACE,
                "apiKeySecretRef": {"name": "cp-api-key", "key": "api-key"}
            }
        }),
    )
    .await;
    h.apply(github_deployment("out-plane-agent", "main")).await;
    let _operator = h.start_operator(&[]);

    let plane = support::eventually(TIMEOUT, "the AgentControlPlane Stalled", || async {
        let p = planes.get_opt("default").await.ok()??;
        let stalled = find(&p.status.as_ref()?.conditions, "Stalled")?.clone();
        (stalled.status == "True").then_some(stalled)
    })
    .await;
    assert_eq!(plane.reason, "HostNotAllowed", "{plane:?}");
    assert_names_field_host_and_flag(&plane.message, "spec.url", &format!("localhost:{port}"));
    let obj = h
        .wait_stalled("out-plane-agent", "HostNotAllowed", TIMEOUT)
        .await;
    let stalled = condition(&obj, "Stalled").unwrap();
    assert_names_field_host_and_flag(&stalled.message, "spec.url", "localhost");
    tokio::time::sleep(QUIET).await;
    let log = h.emulator.request_log().await;
    assert!(
        log.entries.is_empty(),
        "the control plane outside --allowed-hosts got requests: {:?}",
        log.entries
    );
    let ready = find(
        &planes
            .get("default")
            .await
            .unwrap()
            .status
            .unwrap()
            .conditions,
        READY,
    )
    .cloned()
    .unwrap();
    assert_eq!(ready.status, "False");
}

/// An `external_docker` AgentDeployment whose `customUrl` names a host
/// outside the list (a cloud metadata address here) is
/// `Stalled`/`HostNotAllowed` before any request: nothing about it reaches
/// the control plane (no lookup, no create).
#[tokio::test]
async fn a_custom_url_outside_the_allowed_hosts_creates_nothing() {
    test_support::skip_without!(Envtest);
    let h = Harness::builder("out-custom-url").start().await;
    let planes: Api<AgentControlPlane> = Api::namespaced(h.client.clone(), &h.ns);
    support::eventually(TIMEOUT, "the AgentControlPlane Ready", || async {
        let p = planes.get_opt("default").await.ok()??;
        let ready = find(&p.status.as_ref()?.conditions, READY)?.clone();
        (ready.status == "True").then_some(())
    })
    .await;
    let before = h.emulator.request_mark().await;
    let name = "out-custom-url-agent";
    h.apply(
        AgentDeploymentManifest::docker(name, "docker.io/acme/agent:1")
            .source_config("customUrl", "https://169.254.169.254:8443/latest/meta-data")
            .build(),
    )
    .await;
    let obj = h.wait_stalled(name, "HostNotAllowed", TIMEOUT).await;
    let stalled = condition(&obj, "Stalled").unwrap();
    assert_names_field_host_and_flag(
        &stalled.message,
        "spec.sourceConfig.customUrl",
        "169.254.169.254:8443",
    );
    assert!(obj.status.unwrap().deployment_id.is_none());
    tokio::time::sleep(QUIET).await;
    let after: Vec<_> = h.emulator.requests_since(before).await;
    assert!(
        after.is_empty(),
        "requests about a deployment refused by --allowed-hosts: {after:?}"
    );
}

/// A TCP listener on 127.0.0.1 that counts the connections it accepts (and
/// closes them at once).
async fn counting_listener() -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            seen.fetch_add(1, Ordering::SeqCst);
            drop(sock);
        }
    });
    (port, count)
}

/// The control plane chooses the deployment URL `spec.verify` calls: one
/// outside the list (here `localhost`, where a listener counts connections)
/// fails the verification with `HostNotAllowed` (`Stalled`, `Verified=False`)
/// and the agent server gets no connection.
#[tokio::test]
async fn a_deployment_url_outside_the_allowed_hosts_is_not_verified() {
    test_support::skip_without!(Envtest);
    let (port, connections) = counting_listener().await;
    let agent_url = format!("http://localhost:{port}");
    let h = Harness::builder("out-verify")
        .step_seconds(0.2)
        .agent_server_url(&agent_url)
        .start()
        .await;
    let name = "out-verify-agent";
    let mut manifest = github_deployment(name, "main");
    manifest["spec"]["verify"] = json!({"assistants": {"graphId": "agent"}});
    h.apply(manifest).await;
    let obj = h.wait_stalled(name, "HostNotAllowed", TIMEOUT).await;
    let verified = condition(&obj, "Verified").unwrap();
    assert_eq!(verified.status, "False");
    assert_eq!(verified.reason, "HostNotAllowed");
    assert_names_field_host_and_flag(
        &verified.message,
        "the deployment URL",
        &format!("localhost:{port}"),
    );
    tokio::time::sleep(QUIET).await;
    assert_eq!(
        connections.load(Ordering::SeqCst),
        0,
        "the agent server outside --allowed-hosts was called"
    );
}

/// The marker of a body that is not the control plane's error shape.
const MARKER: &str = "INTERNAL-ADMIN-PAGE-7f3c9e";

/// Everything the operator wrote about `name`: its status and its events.
async fn reported(h: &Harness, name: &str) -> String {
    let obj = h.api.get(name).await.unwrap();
    let events: Vec<Value> = events_about(&h.client, &h.ns, name)
        .await
        .into_iter()
        .map(|e| json!({"reason": e.reason, "note": e.note}))
        .collect();
    format!("{} {}", json!(obj.status), json!(events))
}

/// A control plane answer that is not the service's JSON error (an HTML
/// page, an internal service's text) is reported by its status code: none
/// of its text reaches status or events. The service's own `{"detail"}` is
/// still shown (bounded).
#[tokio::test]
async fn a_control_plane_error_body_is_not_copied() {
    test_support::skip_without!(Envtest);
    let h = Harness::builder("out-error-body")
        .step_seconds(0.2)
        .start()
        .await;
    h.emulator
        .set_faults(json!({"reject": [{
            "route": "POST /v2/deployments",
            "status": 400,
            "raw_body": format!("<html><body>{MARKER}: db password hunter2</body></html>"),
        }]}))
        .await;
    let name = "out-error-body-agent";
    h.apply(github_deployment(name, "main")).await;
    let obj = h.wait_stalled(name, "InvalidSpec", TIMEOUT).await;
    let stalled = condition(&obj, "Stalled").unwrap();
    assert!(stalled.message.contains("bad request (400)"), "{stalled:?}");
    tokio::time::sleep(QUIET).await;
    let text = reported(&h, name).await;
    assert!(text.contains("bad request (400)"), "{text}");
    assert!(
        !text.contains(MARKER),
        "the answer's body was copied: {text}"
    );
    assert!(
        !text.contains("hunter2"),
        "the answer's body was copied: {text}"
    );

    // The service's own error shape keeps its detail, cut to 300 bytes.
    let long = format!("Refused by the service: {}", "x".repeat(2000));
    h.emulator
        .set_faults(json!({"reject": [{
            "route": "POST /v2/deployments",
            "status": 400,
            "detail": long,
        }]}))
        .await;
    let other = "out-error-detail-agent";
    h.apply(github_deployment(other, "main")).await;
    let obj = wait_for(&h.api, other, TIMEOUT, "the detail in Stalled", |o| {
        let c = condition(o, "Stalled")?;
        (is_stalled_with(o, "InvalidSpec") && c.message.contains("Refused by the service"))
            .then_some(o.clone())
    })
    .await;
    let message = condition(&obj, "Stalled").unwrap().message;
    assert!(message.len() < 600, "{} bytes: {message}", message.len());
}

/// `url` is bounded at admission (2048 bytes), like `customUrl` and
/// `repoUrl`; `requestsPerSecond` (0, 1000] and `burst` 1–1000 already are.
#[tokio::test]
async fn urls_and_rates_are_bounded_at_admission() {
    test_support::skip_without!(Envtest);
    let client = common::client().await;
    let ns = common::test_namespace(&client, "out-admission").await;
    let planes: Api<AgentControlPlane> = Api::namespaced(client.clone(), &ns);
    let plane = |spec: Value| -> AgentControlPlane {
        serde_json::from_value(json!({
            "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentControlPlane",
            "metadata": {"name": "p"},
            "spec": spec
        }))
        .unwrap()
    };
    let base = |extra: Value| {
        let mut spec = json!({
            "url": "https://cp.example.com",
            "workspaceId": "w",
            "apiKeySecretRef": {"name": "k", "key": "k"}
        });
        for (k, v) in extra.as_object().unwrap() {
            spec[k] = v.clone();
        }
        spec
    };
    let long = format!("https://cp.example.com/{}", "a".repeat(2048));
    for (spec, field) in [
        (base(json!({"url": long})), "spec.url"),
        (
            base(json!({"requestsPerSecond": 1001.0})),
            "spec.requestsPerSecond",
        ),
        (
            base(json!({"requestsPerSecond": 0.0})),
            "spec.requestsPerSecond",
        ),
        (
            base(json!({"requestsPerSecond": 5.0, "burst": 1001})),
            "spec.burst",
        ),
        (
            base(json!({"requestsPerSecond": 5.0, "burst": 0})),
            "spec.burst",
        ),
    ] {
        let refused = match planes.create(&PostParams::default(), &plane(spec)).await {
            Ok(_) => panic!("{field}: admitted"),
            Err(e) => e.to_string(),
        };
        assert!(refused.contains(field), "{field}: {refused}");
    }
    planes
        .create(&PostParams::default(), &plane(base(json!({}))))
        .await
        .expect("a plain spec is admitted");
}

/// An AgentCron whose `spec.webhook` names a host outside the list (the
/// agent server would post each run's output there) is
/// `Stalled`/`HostNotAllowed` and the agent server gets no cron request;
/// a webhook on the list is created.
#[tokio::test]
async fn a_cron_webhook_outside_the_allowed_hosts_is_refused_before_any_request() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("out-webhook").start().await;
    h.apply(github_deployment("agent", "main")).await;
    h.wait_ready("agent", TIMEOUT).await;
    let api: Api<agent_operator::api::AgentCron> = Api::namespaced(h.client.clone(), &h.ns);
    let cron = |webhook: &str| {
        json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentCron",
            "metadata": {"name": "hooked"},
            "spec": {"deploymentRef": {"name": "agent"}, "graphId": "agent",
                "schedule": "*/5 * * * *", "webhook": webhook}})
    };
    apply_json(&api, "hooked", cron("https://hooks.example.com/runs")).await;
    let message = support::wait_object(&api, "hooked", TIMEOUT, "Stalled HostNotAllowed", |o| {
        let c =
            o?.status.as_ref()?.conditions.iter().find(|c| {
                c.type_ == "Stalled" && c.status == "True" && c.reason == "HostNotAllowed"
            })?;
        Some(c.message.clone())
    })
    .await;
    assert_names_field_host_and_flag(&message, "spec.webhook", "hooks.example.com");
    tokio::time::sleep(QUIET).await;
    let crons = |log: &test_support::budget::RequestLog| {
        log.entries
            .iter()
            .filter(|r| r.route.contains("/runs/crons"))
            .count()
    };
    assert_eq!(
        crons(&h.emulator.request_log().await),
        0,
        "no cron request while the webhook is refused"
    );
    // A webhook on the list (the harness allows 127.0.0.1): created once.
    apply_json(&api, "hooked", cron("https://127.0.0.1:9/runs")).await;
    support::wait_object(&api, "hooked", TIMEOUT, "Ready", |o| {
        let s = o?.status.as_ref()?;
        s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
            .then_some(())
    })
    .await;
    let log = h.emulator.request_log().await;
    let creates = log
        .entries
        .iter()
        .filter(|r| r.route == "POST /agents/{deployment_id}/runs/crons")
        .count();
    assert_eq!(creates, 1, "{:?}", log.entries);
    assert!(
        crons(&log) <= 4,
        "search, create, read back: {:?}",
        log.entries
    );
}
