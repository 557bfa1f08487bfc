//! Operations, HTTP side: the operator binary against a real kube-apiserver
//! (envtest) and the emulator serves `/livez`, `/readyz` (only once its
//! watches synced) and `/metrics` (reconciles, control plane requests,
//! resources by Ready state), and watches exactly the namespaces it is given.

use crate::{common, support};

use std::time::Duration;

use agent_operator::api::AgentDeployment;
use kube::Api;
use support::{
    AgentDeploymentManifest, Budget, EmulatorProcess, Harness, OperatorOptions, OperatorProcess,
    apply_json, install_control_plane, is_ready_now, metric, wait_for,
};

const TIMEOUT: Duration = Duration::from_secs(60);

fn deployment(name: &str) -> serde_json::Value {
    AgentDeploymentManifest::github(name, "main")
        .secret("LOG_LEVEL", "info")
        .build()
}

#[tokio::test]
async fn probes_and_metrics_reflect_sync_and_reconciles() {
    test_support::skip_without!(Envtest);
    // The default request budget and the secret scan are checked when the
    // harness drops.
    let h = Harness::quick("ops-http").start().await;
    let (api, ns) = (&h.api, &h.ns);
    let operator = h.operator.as_ref().expect("the harness's operator");

    // Live as soon as it serves HTTP; ready once the watches listed.
    operator
        .wait_for_status("/livez", 200, Duration::from_secs(30))
        .await;
    operator
        .wait_for_status("/readyz", 200, Duration::from_secs(30))
        .await;

    apply_json(api, "observed", deployment("observed")).await;
    wait_for(api, "observed", TIMEOUT, "Ready=True", |o| {
        is_ready_now(o).then_some(())
    })
    .await;

    let text = operator.metrics().await;
    let kind = [("kind", "AgentDeployment")];
    assert!(
        metric(
            &text,
            "agent_operator_reconciles_total",
            &[("kind", "AgentDeployment"), ("outcome", "success")]
        )
        .is_some_and(|n| n >= 1.0),
        "successful reconciles are counted:\n{text}"
    );
    assert!(
        metric(
            &text,
            "agent_operator_reconcile_duration_seconds_count",
            &kind
        )
        .is_some_and(|n| n >= 1.0),
        "reconcile durations are observed:\n{text}"
    );
    assert_eq!(
        metric(
            &text,
            "agent_operator_resources",
            &[("kind", "AgentDeployment"), ("ready", "True")]
        ),
        Some(1.0),
        "the Ready AgentDeployment is counted as ready:\n{text}"
    );
    assert!(
        metric(&text, "agent_operator_time_to_ready_seconds_count", &[]).is_some_and(|n| n >= 1.0),
        "the time to Ready is observed:\n{text}"
    );
    assert_eq!(metric(&text, "agent_operator_leader", &[]), Some(1.0));
    assert!(
        metric(
            &text,
            "agent_operator_control_plane_requests_total",
            &[("status_class", "2xx")]
        )
        .is_some_and(|n| n >= 1.0),
        "control plane requests are counted by status class:\n{text}"
    );
    // Per-plane series are labelled with the AgentControlPlane's namespace
    // and name (bounded by the number of planes, docs/METRICS.md); no other
    // series names a namespace, and none names an AgentDeployment.
    let unbounded: Vec<&str> = text
        .lines()
        .filter(|line| line.contains(ns.as_str()) && !line.contains("control_plane=\"default\""))
        .collect();
    assert!(
        unbounded.is_empty() && !text.contains("observed\""),
        "no AgentDeployment namespace or name in label values: {unbounded:?}\n{text}"
    );
    assert!(text.ends_with("# EOF\n"), "OpenMetrics text");
    // Every metric the shipped Grafana dashboard queries is served.
    // (The Lease renewal age exists with --leader-elect only:
    // operations_leader.rs reads it.)
    let missing: Vec<String> = crate::dashboard::dashboard_metrics()
        .into_iter()
        .filter(|m| m != "agent_operator_leader_lease_renewal_age_seconds")
        // OpenMetrics names a counter's family without `_total`.
        .filter(|m| !text.contains(&format!("# TYPE {} ", m.trim_end_matches("_total"))))
        .collect();
    assert!(
        missing.is_empty(),
        "the dashboard queries metrics /metrics does not serve: {missing:?}\n{text}"
    );
}

/// A kubeconfig whose API server never answers (a closed loopback port).
fn unreachable_kubeconfig(dir: &std::path::Path) -> std::path::PathBuf {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: nowhere\n\
             clusters:\n- name: nowhere\n  cluster:\n    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\n\
             users:\n- name: nobody\n  user:\n    token: none\n\
             contexts:\n- name: nowhere\n  context:\n    cluster: nowhere\n    user: nobody\n"
        ),
    )
    .unwrap();
    path
}

#[tokio::test]
async fn readyz_fails_while_the_watches_cannot_sync_and_sigterm_still_stops() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = unreachable_kubeconfig(dir.path());
    let mut operator = OperatorProcess::start(
        "ops-unsynced",
        &kubeconfig,
        "anywhere",
        &["--shutdown-timeout-seconds", "1", "--log-format", "json"],
    );
    operator
        .wait_for_status("/livez", 200, Duration::from_secs(30))
        .await;
    // A machine-readable start line: JSON, with the version, every flag and
    // the scope.
    let log = std::fs::read_to_string(support::log_dir().join("ops-unsynced-operator.log"))
        .expect("the operator log");
    let start: serde_json::Value = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["fields"]["message"] == "agent-operator starting")
        .unwrap_or_else(|| panic!("no JSON start line in:\n{log}"));
    assert_eq!(
        start["fields"]["version"],
        env!("CARGO_PKG_VERSION"),
        "{start}"
    );
    let flags = start["fields"]["flags"].as_str().unwrap_or("");
    assert!(
        flags.contains("shutdown_timeout_seconds: 1.0") && flags.contains("\"anywhere\""),
        "{start}"
    );
    assert!(start["fields"]["scope"].is_string(), "{start}");
    for _ in 0..10 {
        assert_eq!(
            operator.get("/readyz").await.map(|(s, _)| s),
            Some(503),
            "not ready while the API server cannot be listed"
        );
        assert_eq!(operator.get("/livez").await.map(|(s, _)| s), Some(200));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The controllers cannot finish a list they never got; the process
    // still stops after the shutdown timeout.
    let status = operator.terminate(TIMEOUT).await;
    assert!(
        !status.success(),
        "an overdue shutdown is reported: {status:?}"
    );
}

/// A standby whose API server does not answer cannot read the Lease, so
/// could not take over: not ready ("lease unreadable"), though alive.
#[tokio::test]
async fn a_standby_without_an_api_server_is_not_ready() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = unreachable_kubeconfig(dir.path());
    let mut operator = OperatorProcess::start(
        "ops-standby-unreachable",
        &kubeconfig,
        "anywhere",
        &["--leader-elect", "--shutdown-timeout-seconds", "1"],
    );
    operator
        .wait_for_status("/livez", 200, Duration::from_secs(30))
        .await;
    for _ in 0..10 {
        assert_eq!(
            operator.get("/readyz").await,
            Some((503, "lease unreadable".to_owned())),
            "a standby that cannot read the Lease is not ready"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let status = operator.terminate(TIMEOUT).await;
    assert!(status.success(), "a standby stops at once: {status:?}");
}

#[tokio::test]
async fn several_namespaces_are_watched_and_no_other() {
    test_support::skip_without!(Envtest);
    let env = common::shared_env();
    let client = env.client().await;
    let first = common::test_namespace(&client, "ops-ns-first").await;
    let second = common::test_namespace(&client, "ops-ns-second").await;
    let other = common::test_namespace(&client, "ops-ns-other").await;
    let emulator = EmulatorProcess::start("ops-namespaces", 0.2, 0.5).await;
    for ns in [&first, &second, &other] {
        install_control_plane(&client, ns, &emulator).await;
    }
    let operator = OperatorProcess::start_with(
        env.kubeconfig_path(),
        OperatorOptions {
            log_name: "ops-namespaces",
            namespaces: vec![&first, &second],
            ..OperatorOptions::default()
        },
    );
    operator
        .wait_for_status("/readyz", 200, Duration::from_secs(30))
        .await;

    let unwatched: Api<AgentDeployment> = Api::namespaced(client.clone(), &other);
    apply_json(&unwatched, "ignored", deployment("ignored")).await;
    // One workspace behind every namespace: remote names must differ.
    for (ns, name) in [(&first, "agent-first"), (&second, "agent-second")] {
        let api: Api<AgentDeployment> = Api::namespaced(client.clone(), ns);
        apply_json(&api, name, deployment(name)).await;
        wait_for(
            &api,
            name,
            TIMEOUT,
            "Ready=True in a watched namespace",
            |o| is_ready_now(o).then_some(()),
        )
        .await;
    }
    let ignored = unwatched.get("ignored").await.unwrap();
    assert!(
        ignored
            .status
            .as_ref()
            .is_none_or(|s| s.observed_generation == Some(0) && s.conditions.is_empty())
            && ignored.metadata.finalizers.is_none(),
        "an AgentDeployment outside the watched namespaces is left alone: {:?}",
        ignored.status
    );
    let text = operator.metrics().await;
    assert_eq!(
        metric(
            &text,
            "agent_operator_resources",
            &[("kind", "AgentDeployment"), ("ready", "True")]
        ),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        metric(
            &text,
            "agent_operator_resources",
            &[("kind", "AgentDeployment")]
        ),
        Some(2.0),
        "only the watched namespaces are counted: {text}"
    );
    emulator.assert_within_budget(&Budget::default()).await;
    support::leaks::assert_no_leaks(&client, &first).await;
    support::leaks::assert_no_leaks(&client, &second).await;
}
