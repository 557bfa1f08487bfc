//! Many tenants on one operator, in the shape users run it: cluster-wide
//! (no `--namespace`), as the shipped ServiceAccount under the shipped
//! ClusterRole, with leader election on, and one AgentControlPlane per team
//! namespace, each on its own control plane.
//!
//! Each test has an API server of its own ([`common::own_env`]): a
//! cluster-wide operator on the shared one would reconcile every other
//! test's objects.

use std::time::{Duration, Instant};

use agent_operator::api::AgentDeployment;
use kube::Api;
use kube::api::ListParams;

use crate::common;
use crate::support::{
    self, Budget, EmulatorProcess, OperatorOptions, OperatorProcess, WORKSPACE, github_deployment,
    is_ready_now, metric,
};

/// Applies `count` github AgentDeployments named `<prefix>-NN` in `ns` and
/// waits until every one is Ready; returns how long that took.
async fn rollout(client: &kube::Client, ns: &str, prefix: &str, count: usize) -> Duration {
    let api: Api<AgentDeployment> = Api::namespaced(client.clone(), ns);
    let started = Instant::now();
    for i in 0..count {
        let name = format!("{prefix}-{i:02}");
        support::apply_json(&api, &name, github_deployment(&name, "main")).await;
    }
    support::eventually(
        Duration::from_secs(240),
        &format!("{count} AgentDeployments of {ns} Ready"),
        || async {
            let list = api.list(&ListParams::default()).await.ok()?;
            let ready = list.items.iter().filter(|o| is_ready_now(o)).count();
            (ready == count).then_some(())
        },
    )
    .await;
    started.elapsed()
}

/// The cluster-wide, leader-elected operator of these tests.
fn cluster_wide_operator(env: &test_support::envtest::TestEnv, test: &str) -> OperatorProcess {
    OperatorProcess::start_with(
        env.kubeconfig_path(),
        OperatorOptions {
            log_name: test,
            namespaces: vec![],
            extra: vec![
                "--leader-elect",
                "--lease-name",
                "agent-operator-tenants",
                "--lease-namespace",
                common::OPERATOR_NAMESPACE,
                // As in the report: few permits make starvation visible.
                "--concurrency",
                "4",
            ],
            env: vec![("POD_NAME", "tenants-0")],
            ..OperatorOptions::default()
        },
    )
}

/// Noisy neighbour: a team whose control plane answers every request 429
/// with `Retry-After: 600` must not slow another team down. Its passes are
/// put off until the pause ends, holding no reconcile permit, instead of
/// waiting for the budget inside the pass (which, with the permits shared,
/// stopped every tenant: the healthy fleet was not started in 300 s).
#[tokio::test]
async fn a_throttled_tenant_does_not_hold_back_a_healthy_one() {
    test_support::skip_without!(Envtest);
    let test = "tenants-noisy";
    let env = common::own_env(&[]).await;
    let client = env.client().await.expect("envtest client");
    let healthy = EmulatorProcess::start_with(
        &format!("{test}-healthy"),
        &["--step-seconds", "0.5", "--latency-ms", "20"],
    )
    .await;
    let throttle = format!("{WORKSPACE}:600");
    let throttled = EmulatorProcess::start_with(
        &format!("{test}-throttled"),
        &["--step-seconds", "0.5", "--throttle-workspace", &throttle],
    )
    .await;
    let alone_ns = common::test_namespace(&client, "team-alone").await;
    let healthy_ns = common::test_namespace(&client, "team-healthy").await;
    let throttled_ns = common::test_namespace(&client, "team-throttled").await;
    support::install_control_plane(&client, &alone_ns, &healthy).await;
    support::install_control_plane(&client, &healthy_ns, &healthy).await;
    support::install_control_plane(&client, &throttled_ns, &throttled).await;
    let operator = cluster_wide_operator(&env, test);

    // The healthy team's time alone.
    let alone = rollout(&client, &alone_ns, "alone", 20).await;

    // The throttled team's 50 arrive first and meet the pause.
    let throttled_api: Api<AgentDeployment> = Api::namespaced(client.clone(), &throttled_ns);
    for i in 0..50 {
        let name = format!("noisy-{i:02}");
        support::apply_json(&throttled_api, &name, github_deployment(&name, "main")).await;
    }
    support::eventually(
        Duration::from_secs(60),
        "a 429 of the throttled plane",
        || async {
            let log = throttled.request_log().await;
            log.entries.iter().any(|e| e.status == "429").then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;

    let shared = rollout(&client, &healthy_ns, "shared", 20).await;
    let ratio = shared.as_secs_f64() / alone.as_secs_f64();
    let noisy = throttled.request_log().await.entries.len();
    let text = operator.metrics().await;
    let plane = |name: &str| {
        metric(
            &text,
            name,
            &[
                ("namespace", throttled_ns.as_str()),
                ("control_plane", "default"),
            ],
        )
    };
    let pause = plane("agent_operator_control_plane_pause_seconds").unwrap_or(0.0);
    let deferred = plane("agent_operator_deferred_passes_total").unwrap_or(0.0);
    println!(
        "healthy 20 alone: {:.1} s; beside 50 throttled: {:.1} s ({ratio:.2} ×); \
         requests to the throttled plane: {noisy}; its pause: {pause:.0} s; passes put off: {deferred}",
        alone.as_secs_f64(),
        shared.as_secs_f64(),
    );
    // 1.2 × as the issue asks, plus one second for the 1 s readiness poll of
    // this test on a 2-core machine.
    assert!(
        shared <= alone.mul_f64(1.2) + Duration::from_secs(1),
        "the healthy team took {:.1} s beside the throttled one, {:.1} s alone",
        shared.as_secs_f64(),
        alone.as_secs_f64()
    );
    // The throttled plane heard from the operator only until its first
    // answers: the AgentControlPlane's probe and the passes already in
    // flight (at most half of the 4 permits), nothing during the pause.
    assert!(
        noisy <= 6,
        "{noisy} requests reached the throttled plane during its 600 s Retry-After"
    );
    assert!(pause > 500.0, "the pause shows in the metrics: {pause}");
    assert!(deferred >= 50.0, "its 50 passes were put off: {deferred}");
    healthy.assert_within_budget(&Budget::fleet()).await;
}
