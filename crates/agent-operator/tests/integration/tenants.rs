//! Many tenants on one operator, in the shape users run it: cluster-wide
//! (no `--namespace`), as the shipped ServiceAccount under the shipped
//! ClusterRole, with leader election on, and one AgentControlPlane per team
//! namespace, each on its own control plane.
//!
//! Each test runs the harness's tenant shape
//! ([`HarnessBuilder::cluster_wide`](crate::support::HarnessBuilder::cluster_wide))
//! on an API server of its own ([`common::own_env`]): a cluster-wide
//! operator on the shared one would reconcile every other test's objects.

use std::time::{Duration, Instant};

use agent_operator::api::AgentDeployment;
use kube::Api;
use kube::api::ListParams;

use crate::common;
use crate::support::{
    self, Budget, EmulatorProcess, Harness, HarnessBuilder, WORKSPACE, github_deployment,
    is_ready_now, metric,
};

/// Waits until `count` AgentDeployments of `api` are Ready (panics after
/// `timeout`).
async fn wait_all_ready(api: &Api<AgentDeployment>, count: usize, timeout: Duration) {
    support::eventually(
        timeout,
        &format!("{count} AgentDeployments Ready"),
        || async {
            let list = api.list(&ListParams::default()).await.ok()?;
            let ready = list.items.iter().filter(|o| is_ready_now(o)).count();
            (ready == count).then_some(())
        },
    )
    .await;
}

/// Applies `count` github AgentDeployments named `<prefix>-NN` in `ns` and
/// waits until every one is Ready; returns how long that took.
async fn rollout(client: &kube::Client, ns: &str, prefix: &str, count: usize) -> Duration {
    let api: Api<AgentDeployment> = Api::namespaced(client.clone(), ns);
    let started = Instant::now();
    for i in 0..count {
        let name = format!("{prefix}-{i:02}");
        support::apply_json(&api, &name, github_deployment(&name, "main")).await;
    }
    wait_all_ready(&api, count, Duration::from_secs(240)).await;
    started.elapsed()
}

/// The operator flags of these tests: the figures of docs/RELIABILITY.md,
/// "Many tenants", were measured with the fault suite's polling, and few
/// permits (as in the report) make starvation visible.
const TENANT_FLAGS: [&str; 6] = [
    support::FAST_POLLING[0],
    support::FAST_POLLING[1],
    support::FAST_POLLING[2],
    support::FAST_POLLING[3],
    "--concurrency",
    "4",
];

/// The tenant shape of these tests on `env`: a cluster-wide, leader-elected
/// operator as the shipped ServiceAccount with [`TENANT_FLAGS`], the fleet
/// budget, and the harness's namespace as the first team.
fn tenants<'e>(test: &str, env: &'e test_support::envtest::TestEnv) -> HarnessBuilder<'e> {
    Harness::builder(test)
        .on(env)
        .cluster_wide()
        .budget(Budget::fleet())
        .operator_flags(&TENANT_FLAGS)
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
    // The harness's emulator is the healthy plane, its namespace the team
    // alone.
    let h = tenants(test, &env)
        .step_seconds(0.5)
        .emulator_flags(&["--latency-ms", "20"])
        .without_operator()
        .start()
        .await;
    let client = h.client.clone();
    let throttle = format!("{WORKSPACE}:600");
    let throttled = EmulatorProcess::start_with(
        &format!("{test}-throttled"),
        &["--step-seconds", "0.5", "--throttle-workspace", &throttle],
    )
    .await;
    let alone_ns = h.ns.clone();
    let healthy_ns = h.team("team-healthy", None).await;
    let throttled_ns = h.team("team-throttled", Some(&throttled)).await;
    let operator = h.start_operator(&TENANT_FLAGS);

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
}

/// Resident memory of process `pid`, bytes (`VmRSS` of /proc).
fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmRSS")
        * 1024
}

/// Watch events the kube-apiserver has sent for Secrets since it started:
/// (events, bytes), from its own `/metrics` (`apiserver_watch_events_total`
/// and `apiserver_watch_events_sizes_sum`, labelled by resource). In a test
/// of its own apiserver the operator is the only watcher of Secrets, so
/// these are the operator's Secret watch traffic.
async fn secret_watch_traffic(client: &kube::Client) -> (f64, f64) {
    let text = client
        .request_text(
            http::Request::get("/metrics")
                .body(Vec::new())
                .expect("metrics request"),
        )
        .await
        .expect("kube-apiserver /metrics");
    let sum = |name: &str| metric(&text, name, &[("resource", "secrets")]).unwrap_or(0.0);
    (
        sum("apiserver_watch_events_total"),
        sum("apiserver_watch_events_sizes_sum"),
    )
}

/// Least privilege with Secrets: 1,000 Secrets of 50 KB that nothing
/// references, applied with `kubectl apply` (which copies each one's data
/// into its `last-applied-configuration` annotation), cost the
/// cluster-wide operator no memory to speak of, no read of their data and no
/// request to the control plane; a label edit of a referenced Secret costs
/// no request either, while a change of a referenced value costs one PATCH.
#[tokio::test]
async fn unrelated_secrets_cost_the_operator_nothing() {
    test_support::skip_without!(Envtest);
    let test = "tenants-secrets";
    let env = common::own_env(&[]).await;
    let Some(kubectl) = env.kubectl_path() else {
        panic!("kubectl is not in the envtest assets (hack/envtest/install.sh builds it)");
    };
    // The operator starts after the baseline below.
    let h = tenants(test, &env)
        .step_seconds(0.3)
        .without_operator()
        .start()
        .await;
    let (client, ns, emulator) = (h.client.clone(), h.ns.clone(), &h.emulator);
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), &ns);
    // The referenced Secret `app-env`: its `token` is referenced, `unused`
    // is not.
    let put_env = |labels: serde_json::Value, token: &str, unused: &str| {
        let manifest = serde_json::json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "app-env", "labels": labels},
            "stringData": {"token": token, "unused": unused}
        });
        let secrets = secrets.clone();
        async move { support::apply_json(&secrets, "app-env", manifest).await }
    };
    put_env(serde_json::json!({}), "first-value", "x").await;
    // `count` unrelated Secrets of 50 KB named `{prefix}-NNNN` in `other`,
    // by kubectl apply; returns how long the apply took.
    let other = h.namespace("unrelated").await;
    let dir = std::env::temp_dir().join(format!("{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let apply_unrelated = |prefix: &str, count: usize| {
        let file = dir.join(format!("{prefix}.yaml"));
        let mut docs = String::new();
        for i in 0..count {
            // 50 KB of data, different per Secret.
            let blob: String = format!("{i:04}").repeat(12_800);
            docs.push_str(&format!(
                "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: {prefix}-{i:04}\n  namespace: {other}\nstringData:\n  blob: \"{blob}\"\n"
            ));
        }
        std::fs::write(&file, docs).expect("writing the Secrets");
        let started = Instant::now();
        let out = std::process::Command::new(&kubectl)
            .env_remove("KUBECONFIG")
            .arg("--kubeconfig")
            .arg(env.kubeconfig_path())
            .args(["apply", "-f"])
            .arg(&file)
            .output()
            .expect("running kubectl apply");
        assert!(
            out.status.success(),
            "kubectl apply: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        started.elapsed()
    };
    // Baseline without the operator: the watch traffic of Secrets that the
    // kube-apiserver sends to its other watchers (its own informers).
    let baseline_before = secret_watch_traffic(&client).await;
    apply_unrelated("baseline", 100);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let baseline_after = secret_watch_traffic(&client).await;
    let per_secret_without_operator = (
        (baseline_after.0 - baseline_before.0) / 100.0,
        (baseline_after.1 - baseline_before.1) / 100.0,
    );
    let operator = h.start_operator(&TENANT_FLAGS);
    let pid = operator.pid().expect("operator pid");
    let api: Api<AgentDeployment> = Api::namespaced(client.clone(), &ns);
    for i in 0..3 {
        let name = format!("app-{i}");
        let mut manifest = github_deployment(&name, "main");
        manifest["spec"]["secrets"] = serde_json::json!([{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "app-env", "key": "token"}}}]);
        support::apply_json(&api, &name, manifest).await;
    }
    wait_all_ready(&api, 3, Duration::from_secs(120)).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let rss_before = rss_bytes(pid);
    let requests_before = emulator.request_log().await.entries.len();
    let watch_before = secret_watch_traffic(&client).await;

    // 1,000 unrelated Secrets of 50 KB in another namespace, by kubectl apply.
    let applied_in = apply_unrelated("unrelated", 1000);
    tokio::time::sleep(Duration::from_secs(10)).await;
    let rss_after = rss_bytes(pid);
    let requests_after = emulator.request_log().await.entries.len();
    let watch_after = secret_watch_traffic(&client).await;
    let operator_events = (watch_after.0 - watch_before.0) - 1000.0 * per_secret_without_operator.0;
    let operator_bytes = (watch_after.1 - watch_before.1) - 1000.0 * per_secret_without_operator.1;
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    println!(
        "cluster-wide operator, 3 AgentDeployments Ready: RSS {:.1} MiB; after 1,000 unrelated \
         50 KB Secrets (kubectl apply, {:.0} s): {:.1} MiB (+{:.1} MiB); control plane \
         requests meanwhile: {}; Secret watch events the kube-apiserver sent to the \
         operator: {:.0}, {:.1} MiB ({:.1} KiB each: metadata only, but the last-applied \
         annotation is metadata; to its own watchers {:.1} KiB per Secret)",
        mib(rss_before),
        applied_in.as_secs_f64(),
        mib(rss_after),
        mib(rss_after.saturating_sub(rss_before)),
        requests_after - requests_before,
        operator_events,
        operator_bytes / (1024.0 * 1024.0),
        operator_bytes / operator_events.max(1.0) / 1024.0,
        per_secret_without_operator.1 / 1024.0,
    );
    assert!(
        rss_after <= rss_before + 5 * 1024 * 1024,
        "RSS grew by {:.1} MiB with 1,000 unrelated Secrets",
        mib(rss_after.saturating_sub(rss_before))
    );
    assert_eq!(requests_after, requests_before, "no control plane request");

    // A label edit and a change of an unreferenced key: no pass, no request.
    let touched = serde_json::json!({"touched": "yes"});
    put_env(touched.clone(), "first-value", "y").await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after_touch = emulator.request_log().await;
    assert_eq!(
        after_touch.entries.len(),
        requests_after,
        "a touch of a referenced Secret sent: {:?}",
        &after_touch.entries[requests_after..]
    );
    // A referenced value changes: one PATCH per AgentDeployment.
    put_env(touched, "second-value", "y").await;
    support::eventually(Duration::from_secs(60), "3 PATCHes", || async {
        let log = emulator.request_log().await;
        let patches = log.entries[requests_after..]
            .iter()
            .filter(|e| e.route == support::route::PATCH)
            .count();
        (patches == 3).then_some(())
    })
    .await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Budgets keyed the way the service limits: two teams whose
/// AgentControlPlanes use the same key and workspace share one budget, so
/// together they stay within the workspace's limit, while a third team on
/// another workspace (another key) has a budget of its own. With a budget
/// per AgentControlPlane object the two teams on one key send twice the
/// declared rate and the workspace answers 429.
#[tokio::test]
async fn planes_on_one_key_share_one_budget() {
    test_support::skip_without!(Envtest);
    let test = "tenants-shared-key";
    const WORKSPACE_B: &str = "0c9e2d4a-6b1f-4e3a-8d7c-5a4b3c2d1e0f";
    const KEY_B: &str = "second-workspace-key";
    const LIMIT: f64 = 4.0;
    const PER_TEAM: usize = 12;
    let env = common::own_env(&[]).await;
    let key_b = format!("{KEY_B}={WORKSPACE_B}");
    let limit = LIMIT.to_string();
    // The planes declare the limit before the operator starts: the
    // harness's namespace is team a1, its plane re-applied with the limit.
    let h = tenants(test, &env)
        .step_seconds(0.5)
        .emulator_flags(&[
            "--latency-ms",
            "20",
            "--rate-limit",
            &limit,
            // A little more burst than the declared one (4): the test is
            // about the sustained rate of two planes on one key, not about
            // a few milliseconds of jitter between the two buckets.
            "--rate-limit-burst",
            "6",
            "--api-key",
            &key_b,
        ])
        .without_operator()
        .start()
        .await;
    let (client, emulator) = (h.client.clone(), &h.emulator);
    let teams = [
        (h.ns.clone(), support::API_KEY, WORKSPACE),
        (h.namespace("team-a2").await, support::API_KEY, WORKSPACE),
        (h.namespace("team-b").await, KEY_B, WORKSPACE_B),
    ];
    for (ns, key, workspace) in &teams {
        support::install_control_plane_on(&client, ns, emulator, key, workspace, Some(LIMIT)).await;
    }
    let _operator = h.start_operator(&TENANT_FLAGS);
    let started = Instant::now();
    // Every team's fleet at once, interleaved. Names differ across teams:
    // a workspace holds one deployment per name.
    for i in 0..PER_TEAM {
        for (team, (ns, _, _)) in teams.iter().enumerate() {
            let api: Api<AgentDeployment> = Api::namespaced(client.clone(), ns);
            let name = format!("team{team}-agent-{i:02}");
            support::apply_json(&api, &name, github_deployment(&name, "main")).await;
        }
    }
    for (ns, _, _) in &teams {
        let api: Api<AgentDeployment> = Api::namespaced(client.clone(), ns);
        wait_all_ready(&api, PER_TEAM, Duration::from_secs(240)).await;
    }
    let took = started.elapsed();
    let log = emulator.request_log().await;
    let count = |workspace: &str, status: Option<&str>| {
        log.entries
            .iter()
            .filter(|e| e.workspace.as_deref() == Some(workspace))
            .filter(|e| status.is_none_or(|s| e.status == s))
            .count()
    };
    let (a, a_429) = (count(WORKSPACE, None), count(WORKSPACE, Some("429")));
    let (b, b_429) = (count(WORKSPACE_B, None), count(WORKSPACE_B, Some("429")));
    println!(
        "3 teams × {PER_TEAM} Ready in {:.1} s; workspace A (two planes, one key): {a} requests, \
         {a_429} × 429; workspace B: {b} requests, {b_429} × 429 (limit {LIMIT}/s each)",
        took.as_secs_f64()
    );
    assert!(
        a >= 2 * PER_TEAM * 2 && b >= PER_TEAM * 2,
        "every AgentDeployment was created and read: A {a}, B {b}"
    );
    assert_eq!(
        (a_429, b_429),
        (0, 0),
        "two planes on one key stay within the workspace's limit together"
    );
}
