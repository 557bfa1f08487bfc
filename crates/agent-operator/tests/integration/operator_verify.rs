//! Issue 10 part 2, verification in the operator: an AgentDeployment with
//! `spec.verify` against a real agent server (`langgraph dev` serving the
//! echo graph of `crates/test-support/fixtures/echo-agent`, see `support::langgraph`),
//! reached at the deployment URL the emulator hands out
//! (`--agent-server-url`).
//!
//! - it becomes Ready only after the agent server answered the assistant
//!   search and the run (`Verified=True`, `status.verifiedRevisionId`);
//! - an unknown assistant, or a graph the server does not serve, is
//!   `Verified=False` with the server's answer, never Ready;
//! - an agent server that is down is `Verified=False`/`AgentServerUnreachable`
//!   retried with backoff: a handful of attempts in 20 s, one Warning event,
//!   and the control plane request budget holds.
//!
//! Source: docs/control-plane-api.md "Agent server".

use crate::{common, support};

use std::time::{Duration, Instant};

use agent_operator::api::AgentDeployment;
use serde_json::{Value, json};
use support::{
    AgentDeploymentManifest, Harness, condition, events_about, github_deployment, route,
};

const TIMEOUT: Duration = Duration::from_secs(90);
const TEST_BINARY: &str = "operator_verify";

/// [`github_deployment`] with `spec.verify`.
fn verified(name: &str, verify: Value) -> Value {
    let mut m = github_deployment(name, "main");
    m["spec"]["verify"] = verify;
    m
}

/// `verify` that searches graph `graph` and runs `assistant`, expecting an
/// `updates` event that echoes `text`.
fn checks(graph: &str, assistant: &str, text: &str) -> Value {
    json!({
        "assistants": {"graphId": graph, "minCount": 1},
        "run": {
            "assistantId": assistant,
            "input": {"messages": [{"role": "user", "content": text}]},
            "streamMode": "updates",
            "expect": {"event": "updates", "contains": text},
            "timeoutSeconds": 60
        }
    })
}

fn verified_condition(obj: &AgentDeployment) -> Option<(String, String, String)> {
    condition(obj, "Verified").map(|c| (c.status, c.reason, c.message))
}

/// Sum of the series counts of the events `reason` about `name`.
async fn event_count(h: &Harness, name: &str, reason: &str) -> i32 {
    events_about(&h.client, &h.ns, name)
        .await
        .iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .map(|e| e.series.as_ref().map_or(1, |s| s.count))
        .sum()
}

#[tokio::test]
async fn a_verified_deployment_is_ready_only_after_the_agent_server_answered() {
    test_support::skip_without!(Envtest);
    test_support::skip_without!(AgentServer);
    let started = Instant::now();
    let server = support::langgraph::shared(TEST_BINARY);
    let h = Harness::quick("op-verify-ready")
        .agent_server_url(&server.url)
        .start()
        .await;
    let name = "verified-agent";
    let text = format!("hello verify {}", uuid::Uuid::new_v4());
    h.apply(verified(name, checks("agent", "agent", &text)))
        .await;
    // What a user (or a CI job) runs: `kubectl wait --for=condition=Ready`.
    let mut wait = common::shared_env()
        .kubectl()
        .expect("kubectl is built by hack/envtest/install.sh (`make setup`)");
    wait.args(["--namespace", &h.ns, "wait", "--for=condition=Ready"])
        .arg(format!("agd/{name}"))
        .arg("--timeout=90s");
    let kubectl_wait = tokio::task::spawn_blocking(move || wait.output());

    // Every state the operator writes keeps the rule: Ready=True only with
    // Verified=True on the latest revision; before that, Ready=False.
    let mut saw_not_ready = false;
    let obj = support::wait_for(&h.api, name, TIMEOUT, "Ready=True", |o| {
        let ready = support::ready(o);
        let status = o.status.clone().unwrap_or_default();
        match ready {
            Some((s, _, _)) if s == "True" => {
                let v = verified_condition(o);
                assert_eq!(
                    v.as_ref().map(|v| v.0.as_str()),
                    Some("True"),
                    "Ready=True without Verified=True: {:#?}",
                    o.status
                );
                assert_eq!(
                    status.verified_revision_id, status.latest_revision_id,
                    "Ready=True on a revision that is not the verified one"
                );
                support::is_ready_now(o).then(|| o.clone())
            }
            Some(_) => {
                saw_not_ready = true;
                None
            }
            None => None,
        }
    })
    .await;
    assert!(saw_not_ready, "Ready was False before the verification");
    let out = kubectl_wait.await.unwrap().expect("running kubectl wait");
    assert!(
        out.status.success(),
        "kubectl wait: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let after_wait = h.api.get(name).await.unwrap();
    assert_eq!(
        verified_condition(&after_wait).map(|v| v.0),
        Some("True".to_owned()),
        "kubectl wait returned on a verified revision"
    );
    let status = obj.status.clone().unwrap();
    let v = status.verification.clone().expect("status.verification");
    assert_eq!(status.revision_status.as_deref(), Some("DEPLOYED"));
    assert_eq!(status.url.as_deref(), Some(server.url.as_str()));
    let latest = status.latest_revision_id.clone().expect("latestRevisionId");
    assert_eq!(
        status.verified_revision_id.as_deref(),
        Some(latest.as_str())
    );
    assert_eq!(status.active_revision_id.as_deref(), Some(latest.as_str()));
    assert_eq!(v.revision_id, latest);
    assert_eq!(v.outcome, "Verified");
    assert_eq!(v.failures, 0);
    assert!(v.assistant_count.is_some_and(|n| n >= 1), "{v:?}");
    assert_eq!(v.last_run_outcome.as_deref(), Some("Passed"));
    assert!(
        v.last_run_events.is_some_and(|n| n >= 2),
        "metadata and at least one update: {v:?}"
    );
    assert!(v.last_error.is_none(), "{v:?}");
    // The answer came before Ready: Ready's transition (1 s resolution) is
    // not before the verification started.
    let ready_at = condition(&obj, "Ready").unwrap().last_transition_time.0;
    let ran_at: k8s_openapi::jiff::Timestamp = v.last_run_time.parse().expect("RFC 3339");
    assert!(
        ready_at.as_second() >= ran_at.as_second(),
        "Ready at {ready_at}, verification at {ran_at}"
    );
    let (vs, vr, vm) = verified_condition(&obj).unwrap();
    assert_eq!((vs.as_str(), vr.as_str()), ("True", "Verified"));
    assert!(vm.contains(&latest), "{vm}");
    support::wait_for_event(&h.client, &h.ns, name, "Verified", TIMEOUT).await;
    // The real server answered both: the expectation names a text made for
    // this test, which only the echo graph's answer can carry, and its log
    // has the search and a run that succeeded.
    let log = std::fs::read_to_string(&server.log).unwrap_or_default();
    assert!(log.contains("/assistants/search"), "langgraph log: {log}");
    assert!(log.contains("/runs/stream"), "langgraph log: {log}");
    assert!(
        log.contains("Background run succeeded"),
        "langgraph log: {log}"
    );
    let metrics = h.operator.as_ref().unwrap().metrics().await;
    assert_eq!(
        support::metric(
            &metrics,
            "agent_operator_verifications_total",
            &[("outcome", "Verified")]
        ),
        Some(1.0),
        "one verification"
    );
    eprintln!(
        "verified and Ready in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test]
async fn an_unknown_assistant_or_graph_is_a_clear_error_and_never_ready() {
    test_support::skip_without!(Envtest);
    test_support::skip_without!(AgentServer);
    let server = support::langgraph::shared(TEST_BINARY);
    let h = Harness::quick("op-verify-unknown")
        .agent_server_url(&server.url)
        .start()
        .await;
    let run = "unknown-assistant";
    let graph = "unknown-graph";
    h.apply(verified(run, checks("agent", "no-such-assistant", "hi")))
        .await;
    h.apply(verified(
        graph,
        json!({"assistants": {"graphId": "no-such-graph"}}),
    ))
    .await;

    for (name, reason, named) in [
        (run, "AssistantNotFound", "no-such-assistant"),
        (graph, "AssistantsMissing", "no-such-graph"),
    ] {
        let obj = support::wait_for(&h.api, name, TIMEOUT, reason, |o| {
            assert!(
                !support::is_ready_now(o),
                "Ready=True although the verification fails: {:#?}",
                o.status
            );
            verified_condition(o)
                .filter(|(s, r, _)| s == "False" && r == reason)
                .map(|_| o.clone())
        })
        .await;
        let (_, _, message) = verified_condition(&obj).unwrap();
        assert!(message.contains(named), "{message}");
        let (ready, ready_reason, ready_message) = support::ready(&obj).unwrap();
        assert_eq!((ready.as_str(), ready_reason.as_str()), ("False", reason));
        assert!(ready_message.contains(named), "{ready_message}");
        assert!(
            support::is_stalled_with(&obj, reason),
            "needs a human: Stalled=True"
        );
        let status = obj.status.unwrap();
        assert_eq!(status.revision_status.as_deref(), Some("DEPLOYED"));
        assert_eq!(status.verified_revision_id, None);
        let v = status.verification.unwrap();
        assert_eq!((v.outcome.as_str(), v.failures), (reason, 1));
        support::wait_for_event(&h.client, &h.ns, name, "VerificationFailed", TIMEOUT).await;
    }
    let v = h.api.get(run).await.unwrap().status.unwrap().verification;
    assert_eq!(
        v.and_then(|v| v.last_run_outcome).as_deref(),
        Some("Failed")
    );
}

#[tokio::test]
async fn an_agent_server_that_is_down_is_retried_with_backoff_not_in_a_loop() {
    test_support::skip_without!(Envtest);
    // A loopback port nobody listens on.
    let closed = format!("http://127.0.0.1:{}", support::free_port());
    let h = Harness::quick("op-verify-down")
        .agent_server_url(&closed)
        .operator_flags(&["--verify-backoff-seconds", "1"])
        .resync_seconds(8.0)
        .start()
        .await;
    let name = "down-agent";
    h.apply(verified(name, checks("agent", "agent", "hi")))
        .await;
    let obj = support::wait_for(&h.api, name, TIMEOUT, "AgentServerUnreachable", |o| {
        verified_condition(o)
            .filter(|(s, r, _)| s == "False" && r == "AgentServerUnreachable")
            .map(|_| o.clone())
    })
    .await;
    let (_, _, message) = verified_condition(&obj).unwrap();
    assert!(message.contains("/assistants/search"), "{message}");
    let operator = h.operator.as_ref().unwrap();
    let attempts = |m: &str| {
        support::metric(
            m,
            "agent_operator_verifications_total",
            &[("outcome", "AgentServerUnreachable")],
        )
        .unwrap_or(0.0)
    };
    let before = attempts(&operator.metrics().await);
    let gets_before = h.emulator.requests().await.count(route::GET);
    let watch = Instant::now();
    let window = Duration::from_secs(20);
    while watch.elapsed() < window {
        let obj = h.api.get(name).await.unwrap();
        assert!(!support::is_ready_now(&obj), "{:#?}", obj.status);
        let (ready, reason, _) = support::ready(&obj).unwrap();
        assert_eq!(
            (ready.as_str(), reason.as_str()),
            ("False", "AgentServerUnreachable")
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let during = attempts(&operator.metrics().await) - before;
    let gets = h.emulator.requests().await.count(route::GET) - gets_before;
    eprintln!("in {window:?}: {during} verification attempts, {gets} GETs of the deployment");
    // Backoff 1 s doubling, capped at 8 s: about 1, 2, 4, 8, 8 s apart.
    assert!(
        (2.0..=8.0).contains(&during),
        "{during} attempts in {window:?}: expected a handful (backoff), not a loop"
    );
    assert!(gets <= 10, "{gets} GETs of the deployment in {window:?}");
    let status = h.api.get(name).await.unwrap().status.unwrap();
    let v = status.verification.unwrap();
    assert!(v.failures >= 3, "{v:?}");
    assert_eq!(status.verified_revision_id, None);
    assert_eq!(
        event_count(&h, name, "VerificationFailed").await,
        1,
        "one Warning for the failure, not one per retry"
    );
}

#[tokio::test]
async fn a_verify_key_secret_is_waited_for_then_used_and_verified_revisions_are_rechecked() {
    test_support::skip_without!(Envtest);
    // The emulator's built-in agent server (deployment URL
    // `{emulator}/agents/{id}`, graph `agent`) checks `X-Api-Key`: a second
    // key of the test workspace, held in its own Secret.
    let key_arg = format!("{}={}", support::leaks::VERIFY_KEY, support::WORKSPACE);
    let h = Harness::quick("op-verify-key")
        .emulator_flags(&["--api-key", &key_arg])
        .operator_flags(&[
            "--verify-backoff-seconds",
            "1",
            "--verify-interval-seconds",
            "2",
        ])
        .start()
        .await;
    let name = "keyed-agent";
    let mut verify = checks("agent", "agent", "hello key");
    verify["apiKeySecretRef"] = json!({"name": "agent-server-key", "key": "api-key"});
    h.apply(verified(name, verify)).await;

    // No Secret yet: Verified=False/SecretNotFound naming it, no run.
    let obj = support::wait_for(&h.api, name, TIMEOUT, "SecretNotFound", |o| {
        assert!(!support::is_ready_now(o), "{:#?}", o.status);
        verified_condition(o)
            .filter(|(s, r, _)| s == "False" && r == "SecretNotFound")
            .map(|_| o.clone())
    })
    .await;
    let (_, _, message) = verified_condition(&obj).unwrap();
    assert!(message.contains("agent-server-key"), "{message}");
    let v = obj.status.unwrap().verification.unwrap();
    assert_eq!((v.assistant_count, v.last_run_outcome), (None, None));

    // The Secret appears with a key the agent server refuses: that key is
    // the one sent (the control plane's would pass).
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(h.client.clone(), &h.ns);
    let put_key = |value: &'static str| {
        let secrets = secrets.clone();
        async move {
            support::apply_json(
                &secrets,
                "agent-server-key",
                json!({
                    "apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": "agent-server-key"},
                    "stringData": {"api-key": value}
                }),
            )
            .await;
        }
    };
    put_key(support::leaks::UNKNOWN_KEY).await;
    let obj = support::wait_for(&h.api, name, TIMEOUT, "AgentServerUnauthorized", |o| {
        assert!(!support::is_ready_now(o), "{:#?}", o.status);
        verified_condition(o)
            .filter(|(s, r, _)| s == "False" && r == "AgentServerUnauthorized")
            .map(|_| o.clone())
    })
    .await;
    let (_, _, message) = verified_condition(&obj).unwrap();
    assert!(message.contains("401"), "{message}");

    // The right key: the next retry uses it and the revision verifies.
    put_key(support::leaks::VERIFY_KEY).await;
    let obj = h.wait_ready(name, TIMEOUT).await;
    let status = obj.status.clone().unwrap();
    assert_eq!(status.verified_revision_id, status.latest_revision_id);
    assert!(
        status
            .url
            .as_deref()
            .is_some_and(|u| u.starts_with(&h.emulator.base_url) && u.contains("/agents/")),
        "the built-in agent server: {:?}",
        status.url
    );

    // Verified revisions are checked again every --verify-interval-seconds
    // (2 s here); Ready stays True and the Normal event is not repeated.
    let operator = h.operator.as_ref().unwrap();
    let passed = |m: &str| {
        support::metric(
            m,
            "agent_operator_verifications_total",
            &[("outcome", "Verified")],
        )
        .unwrap_or(0.0)
    };
    let before = passed(&operator.metrics().await);
    tokio::time::sleep(Duration::from_secs(7)).await;
    let again = passed(&operator.metrics().await) - before;
    assert!(
        (2.0..=4.0).contains(&again),
        "{again} re-verifications in 7 s"
    );
    let obj = h.api.get(name).await.unwrap();
    assert!(support::is_ready_now(&obj), "{:#?}", obj.status);
    assert_eq!(event_count(&h, name, "Verified").await, 1);
}

#[tokio::test]
async fn an_invalid_verify_is_refused_at_admission() {
    test_support::skip_without!(Envtest);
    let env = common::shared_env();
    let client = env.client().await;
    let ns = common::test_namespace(&client, "op-verify-admission").await;
    let dynamic: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        client.clone(),
        &ns,
        &kube::api::ApiResource::erase::<AgentDeployment>(&()),
    );
    let api: kube::Api<AgentDeployment> = kube::Api::namespaced(client, &ns);
    let run = |extra: Value| {
        let mut r = json!({"assistantId": "agent", "input": {"messages": []}});
        for (k, v) in extra.as_object().unwrap() {
            r[k] = v.clone();
        }
        json!({"run": r})
    };
    let cases = [
        (
            "nothing to check",
            json!({}),
            "verify needs assistants, run or suite",
        ),
        (
            "minCount 0",
            json!({"assistants": {"graphId": "agent", "minCount": 0}}),
            "minCount",
        ),
        ("no graphId", json!({"assistants": {}}), "graphId"),
        (
            "timeout over 300 s",
            run(json!({"timeoutSeconds": 301})),
            "timeoutSeconds",
        ),
        (
            "timeout 0",
            run(json!({"timeoutSeconds": 0})),
            "timeoutSeconds",
        ),
        (
            "unknown stream mode",
            run(json!({"streamMode": "everything"})),
            "streamMode",
        ),
        (
            "input not an object",
            run(json!({"input": "hello"})),
            "input",
        ),
        (
            "expect without event",
            run(json!({"expect": {"contains": "x"}})),
            "event",
        ),
        (
            "no assistantId",
            json!({"run": {"input": {}}}),
            "assistantId",
        ),
        (
            "a Secret key with a slash",
            json!({"assistants": {"graphId": "agent"}, "apiKeySecretRef": {"name": "k", "key": "a/b"}}),
            "key",
        ),
    ];
    for (i, (what, verify, field)) in cases.into_iter().enumerate() {
        let name = format!("invalid-{i}");
        // A POST (a server-side apply of a wrong type is a 500, not a 422).
        let raw: kube::api::DynamicObject =
            serde_json::from_value(verified(&name, verify)).expect("a dynamic object");
        let result = dynamic.create(&Default::default(), &raw).await;
        match result {
            Err(kube::Error::Api(e)) => {
                assert_eq!(e.code, 422, "{what}: {e:?}");
                assert!(e.message.contains(field), "{what}: {}", e.message);
            }
            other => panic!("{what}: accepted: {other:?}"),
        }
    }
    let ok = verified("valid", checks("agent", "agent", "hi"));
    support::apply_json(&api, "valid", ok).await;
}

/// A loopback HTTP server that answers every request 401 and keeps the
/// request heads it read.
async fn refusing_server() -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    tokio::task::JoinHandle<()>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let heads = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = heads.clone();
    let task = tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16384];
                let mut read = 0;
                while read < buf.len() {
                    match sock.read(&mut buf[read..]).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => read += n,
                    }
                    if buf[..read].windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
                let text = String::from_utf8_lossy(&buf[..read]).to_string();
                let head = text.split("\r\n\r\n").next().unwrap_or("").to_owned();
                seen.lock().unwrap().push(head);
                let body = r#"{"detail":"Missing or invalid API key."}"#;
                let answer = format!(
                    "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(answer.as_bytes()).await;
            });
        }
    });
    (url, heads, task)
}

#[tokio::test]
async fn the_control_plane_key_never_goes_to_a_url_from_the_spec() {
    test_support::skip_without!(Envtest);
    let (url, heads, server) = refusing_server().await;
    let h = Harness::quick("op-verify-custom-url")
        .operator_flags(&["--verify-backoff-seconds", "1"])
        .start()
        .await;
    let name = "custom-url-agent";
    let manifest = |verify: Value| {
        AgentDeploymentManifest::docker(name, "docker.io/acme/agent:1")
            .source_config("customUrl", url.as_str())
            .spec("verify", verify)
            .build()
    };
    h.apply(manifest(json!({"assistants": {"graphId": "agent"}})))
        .await;
    let obj = support::wait_for(&h.api, name, TIMEOUT, "AgentServerUnauthorized", |o| {
        verified_condition(o)
            .filter(|(s, r, _)| s == "False" && r == "AgentServerUnauthorized")
            .map(|_| o.clone())
    })
    .await;
    let (_, _, message) = verified_condition(&obj).unwrap();
    assert!(message.contains("no key was sent"), "{message}");
    {
        let heads = heads.lock().unwrap();
        assert!(!heads.is_empty(), "the agent server was called");
        for head in heads.iter() {
            assert!(head.contains("POST /assistants/search"), "{head}");
            assert!(
                !head.to_ascii_lowercase().contains("x-api-key"),
                "a key went to the spec's URL"
            );
        }
    }

    // A key of its own is sent.
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(h.client.clone(), &h.ns);
    support::apply_json(
        &secrets,
        "own-key",
        json!({
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "own-key"},
            "stringData": {"api-key": support::leaks::VERIFY_KEY}
        }),
    )
    .await;
    let before = heads.lock().unwrap().len();
    h.apply(manifest(json!({
        "assistants": {"graphId": "agent"},
        "apiKeySecretRef": {"name": "own-key", "key": "api-key"}
    })))
    .await;
    support::eventually(TIMEOUT, "a call with the Secret's key", || {
        let heads = heads.clone();
        async move {
            let heads = heads.lock().unwrap();
            heads[before..]
                .iter()
                .any(|h| h.contains(support::leaks::VERIFY_KEY))
                .then_some(())
        }
    })
    .await;
    assert!(
        heads
            .lock()
            .unwrap()
            .iter()
            .all(|h| !h.contains(support::API_KEY)),
        "the control plane key never went there"
    );
    server.abort();
}
