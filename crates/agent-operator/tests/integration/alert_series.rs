//! Records the series the shipped alert rules are tested on
//! (`deploy/prometheus/recorded/*.yaml`, checked by `alert_rules.rs` with
//! `promtool test rules`), from real runs of the operator binary against a
//! real kube-apiserver and the emulator: a healthy leader, a frozen
//! kube-apiserver, a throttled control plane, a stalled resource and a lost
//! leader.
//!
//! Ignored by default (minutes of runs); `make record-alert-series` runs them
//! and rewrites the fixtures. Every replica's `/metrics` is scraped every
//! second, and the samples are written **15 s apart**: time is compressed
//! 15×, so a rule's `for:` and range windows pass 15 times faster than on a
//! real Prometheus scraping every 15 s. Counters (and histogram buckets,
//! counts and sums) are written multiplied by 15, so that their rates over
//! series time are the real rates; other gauges keep their values, the lease
//! renewal age its real seconds. A failed scrape writes `up 0` for the
//! replica, as Prometheus does.

use crate::{common, support};

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use agent_operator::api::AgentDeployment;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use serde_json::json;
use support::{
    EmulatorProcess, OperatorOptions, OperatorProcess, apply_json, install_control_plane,
    is_ready_now, wait_for,
};

const TIMEOUT: Duration = Duration::from_secs(60);
/// Real time between two scrapes.
const SCRAPE_EVERY: Duration = Duration::from_secs(1);
/// Series time between two samples in the fixtures.
pub(crate) const SAMPLE_SECONDS: u64 = 15;
/// How many times faster series time runs than real time.
const COMPRESSION: f64 = SAMPLE_SECONDS as f64;
/// The `job` label of every recorded series (the one `AgentOperatorDown`
/// names).
const JOB: &str = "agent-operator-metrics";

/// Scraped samples: per series (name and labels, with `instance` and
/// `job`), its value at each scrape (`None`: not exposed then).
#[derive(Default)]
struct Recording {
    scrapes: usize,
    series: BTreeMap<String, Vec<Option<f64>>>,
}

/// `name{labels}` with `instance` and `job` added, and the value, of one
/// OpenMetrics sample line; `None` for comments and `# EOF`.
fn sample(line: &str, instance: &str) -> Option<(String, f64)> {
    if line.starts_with('#') || line.is_empty() {
        return None;
    }
    let (series, value) = line.rsplit_once(' ')?;
    let mut value: f64 = value.parse().ok()?;
    let name = series.split('{').next().unwrap_or(series);
    if ["_total", "_count", "_sum", "_bucket"]
        .iter()
        .any(|s| name.ends_with(s))
    {
        // Counters grow as many times faster as time is compressed, so that
        // their rates over series time are the real rates.
        value *= COMPRESSION;
    }
    let extra = format!("instance=\"{instance}\",job=\"{JOB}\"");
    let key = match series.split_once('{') {
        Some((name, labels)) => {
            let labels = labels.trim_end_matches('}');
            if labels.is_empty() {
                format!("{name}{{{extra}}}")
            } else {
                format!("{name}{{{labels},{extra}}}")
            }
        }
        None => format!("{series}{{{extra}}}"),
    };
    Some((key, value))
}

impl Recording {
    /// Scrapes every `(instance, replica)` once and records the samples,
    /// and `up` 1 or 0 per instance.
    async fn scrape(&mut self, targets: &[(&str, &OperatorProcess)]) {
        let mut now: BTreeMap<String, f64> = BTreeMap::new();
        for (instance, replica) in targets {
            let body =
                match tokio::time::timeout(Duration::from_millis(800), replica.get("/metrics"))
                    .await
                {
                    Ok(Some((200, body))) => Some(body),
                    _ => None,
                };
            now.insert(
                format!("up{{instance=\"{instance}\",job=\"{JOB}\"}}"),
                if body.is_some() { 1.0 } else { 0.0 },
            );
            for (key, value) in body
                .iter()
                .flat_map(|b| b.lines())
                .filter_map(|l| sample(l, instance))
            {
                now.insert(key, value);
            }
        }
        let index = self.scrapes;
        for (key, value) in now {
            let values = self.series.entry(key).or_insert_with(|| vec![None; index]);
            values.push(Some(value));
        }
        self.scrapes += 1;
        for values in self.series.values_mut() {
            values.resize(self.scrapes, None);
        }
    }

    /// Scrapes `count` times, [`SCRAPE_EVERY`] apart.
    async fn scrape_for(&mut self, count: usize, targets: &[(&str, &OperatorProcess)]) {
        let mut tick = tokio::time::interval(SCRAPE_EVERY);
        for _ in 0..count {
            tick.tick().await;
            self.scrape(targets).await;
        }
    }

    /// Writes `deploy/prometheus/recorded/<name>.yaml`: the scenario, the
    /// alerts expected to fire at its last sample, and the promtool
    /// `input_series` (runs of one value in expanding notation).
    fn write(&self, name: &str, what: &str, firing: &[&str]) {
        let mut out = String::new();
        writeln!(
            out,
            "# Recorded by `make record-alert-series` \
             (crates/agent-operator/tests/integration/alert_series.rs): {what}.\n\
             # Scraped every {} s, written {SAMPLE_SECONDS} s apart (time compressed {}x, counters multiplied by as much).\n\
             # alert_rules.rs checks with promtool that exactly `firing` fires at the last sample.",
            SCRAPE_EVERY.as_secs(),
            SAMPLE_SECONDS / SCRAPE_EVERY.as_secs(),
        )
        .unwrap();
        writeln!(out, "scenario: {name}").unwrap();
        writeln!(out, "samples: {}", self.scrapes).unwrap();
        writeln!(out, "firing: {}", serde_json::to_string(firing).unwrap()).unwrap();
        writeln!(out, "input_series:").unwrap();
        for (series, values) in &self.series {
            writeln!(out, "  - series: '{series}'").unwrap();
            writeln!(out, "    values: '{}'", expanded(values)).unwrap();
        }
        let path = test_support::repo_root()
            .join("deploy/prometheus/recorded")
            .join(format!("{name}.yaml"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, out).unwrap();
        eprintln!(
            "wrote {} ({} series, {} samples)",
            path.display(),
            self.series.len(),
            self.scrapes
        );
    }
}

/// promtool's expanding notation of `values`: a run of `k` equal values
/// `v` is `v+0x{k-1}`, a run of `k` missing ones `_x{k}`.
fn expanded(values: &[Option<f64>]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < values.len() {
        let mut j = i + 1;
        while j < values.len() && values[j] == values[i] {
            j += 1;
        }
        let k = j - i;
        parts.push(match values[i] {
            None => format!("_x{k}"),
            Some(v) if k == 1 => format!("{v}"),
            Some(v) => format!("{v}+0x{}", k - 1),
        });
        i = j;
    }
    parts.join(" ")
}

fn deployment(name: &str) -> serde_json::Value {
    support::AgentDeploymentManifest::github(name, "main")
        .secret("LOG_LEVEL", "info")
        .build()
}

/// A replica with leader election on the Lease `lease-<ns>` of the
/// operator's namespace, as the shipped ServiceAccount.
fn replica(
    kubeconfig: &std::path::Path,
    ns: &str,
    pod: &str,
    log_name: &str,
    lease_seconds: &str,
) -> OperatorProcess {
    let lease = format!("lease-{ns}");
    OperatorProcess::start_with(
        kubeconfig,
        OperatorOptions {
            log_name,
            namespaces: vec![ns],
            extra: vec![
                "--leader-elect",
                "--lease-name",
                &lease,
                "--lease-namespace",
                support::OPERATOR_NAMESPACE,
                "--lease-duration-seconds",
                lease_seconds,
            ],
            env: vec![("POD_NAME", pod)],
            ..OperatorOptions::default()
        },
    )
}

async fn ready(api: &Api<AgentDeployment>, name: &str) {
    apply_json(api, name, deployment(name)).await;
    wait_for(api, name, TIMEOUT, "Ready=True", |o| {
        is_ready_now(o).then_some(())
    })
    .await;
}

/// (a) Two replicas, one leading, one Ready AgentDeployment: 5 minutes of
/// series time (21 samples) in which no alert may fire.
#[tokio::test]
#[ignore = "records deploy/prometheus/recorded/ (make record-alert-series)"]
async fn record_a_healthy_leader() {
    test_support::skip_without!(Envtest);
    let env = common::shared_env();
    let client = env.client().await;
    let ns = common::test_namespace(&client, "rec-healthy").await;
    let emulator = EmulatorProcess::start("rec-healthy", 0.2, 0.5).await;
    install_control_plane(&client, &ns, &emulator).await;
    let a = replica(
        env.kubeconfig_path(),
        &ns,
        "replica-a",
        "rec-healthy-a",
        "15",
    );
    let b = replica(
        env.kubeconfig_path(),
        &ns,
        "replica-b",
        "rec-healthy-b",
        "15",
    );
    let api: Api<AgentDeployment> = Api::namespaced(client.clone(), &ns);
    ready(&api, "healthy").await;
    let mut rec = Recording::default();
    rec.scrape_for(21, &[("replica-a", &a), ("replica-b", &b)])
        .await;
    rec.write(
        "healthy-leader",
        "two replicas, one leading, one Ready AgentDeployment, for 5 minutes",
        &[],
    );
}

/// (b) One leader with a 60 s Lease (renew deadline 48 s) and its
/// kube-apiserver frozen (SIGSTOP) for 30 s: the renewal age climbs past
/// 10 s and stays there; recorded until just before the API server resumes.
#[tokio::test]
#[ignore = "records deploy/prometheus/recorded/ (make record-alert-series)"]
async fn record_a_frozen_apiserver() {
    test_support::skip_without!(Envtest);
    let mut env = common::own_env(&[]).await;
    let client = env.client().await.expect("envtest client");
    let ns = common::test_namespace(&client, "rec-frozen").await;
    let emulator = EmulatorProcess::start("rec-frozen", 0.2, 0.5).await;
    install_control_plane(&client, &ns, &emulator).await;
    let kubeconfig = env.kubeconfig_path().to_path_buf();
    let leader = replica(&kubeconfig, &ns, "replica-a", "rec-frozen", "60");
    let api: Api<AgentDeployment> = Api::namespaced(client.clone(), &ns);
    ready(&api, "frozen").await;
    let mut rec = Recording::default();
    let targets = [("replica-a", &leader)];
    rec.scrape_for(10, &targets).await;
    let freeze = env.freeze_apiserver(Duration::from_secs(30));
    let record = rec.scrape_for(28, &targets);
    tokio::join!(freeze, record);
    rec.write(
        "frozen-apiserver",
        "a leader (60 s Lease) whose kube-apiserver is frozen (SIGSTOP) for 30 s, recorded until just before it resumes",
        &["AgentOperatorLeaseRenewalStale"],
    );
}

/// (d) An AgentDeployment stalled on a missing Secret for over 30 minutes
/// of series time (125 samples), under a healthy leader.
#[tokio::test]
#[ignore = "records deploy/prometheus/recorded/ (make record-alert-series)"]
async fn record_a_stalled_resource() {
    test_support::skip_without!(Envtest);
    let env = common::shared_env();
    let client = env.client().await;
    let ns = common::test_namespace(&client, "rec-stalled").await;
    let emulator = EmulatorProcess::start("rec-stalled", 0.2, 0.5).await;
    install_control_plane(&client, &ns, &emulator).await;
    let leader = replica(env.kubeconfig_path(), &ns, "replica-a", "rec-stalled", "15");
    let api: Api<AgentDeployment> = Api::namespaced(client.clone(), &ns);
    let mut stalled = deployment("stalled");
    stalled["spec"]["secrets"] = json!([
        {"name": "OPENAI_API_KEY", "valueFrom": {"secretKeyRef": {"name": "missing", "key": "openai"}}}
    ]);
    apply_json(&api, "stalled", stalled).await;
    wait_for(&api, "stalled", TIMEOUT, "Stalled", |o| {
        support::condition(o, "Stalled")
            .filter(|c| c.status == "True")
            .map(|_| ())
    })
    .await;
    let mut rec = Recording::default();
    rec.scrape_for(125, &[("replica-a", &leader)]).await;
    rec.write(
        "stalled-resource",
        "an AgentDeployment stalled on a missing Secret (SecretNotFound) for over 30 minutes",
        &["AgentOperatorResourcesNotReady"],
    );
}

/// (e) A leader whose Lease is taken by another holder (as after a
/// partition): it exits, is restarted (as the kubelet would) and stays a
/// standby, so no replica leads for over 5 minutes of series time.
#[tokio::test]
#[ignore = "records deploy/prometheus/recorded/ (make record-alert-series)"]
async fn record_a_lost_leader() {
    test_support::skip_without!(Envtest);
    let env = common::shared_env();
    let client = env.client().await;
    let ns = common::test_namespace(&client, "rec-lost").await;
    let emulator = EmulatorProcess::start("rec-lost", 0.2, 0.5).await;
    install_control_plane(&client, &ns, &emulator).await;
    let mut leader = replica(env.kubeconfig_path(), &ns, "replica-a", "rec-lost", "15");
    let api: Api<AgentDeployment> = Api::namespaced(client.clone(), &ns);
    ready(&api, "lost").await;
    let mut rec = Recording::default();
    rec.scrape_for(5, &[("replica-a", &leader)]).await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), support::OPERATOR_NAMESPACE);
    leases
        .patch(
            &format!("lease-{ns}"),
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                json!({"spec": {"holderIdentity": "intruder", "leaseDurationSeconds": 3600}}),
            ),
        )
        .await
        .expect("taking the Lease");
    let mut exited = false;
    for _ in 0..10 {
        rec.scrape(&[("replica-a", &leader)]).await;
        if leader.exited().is_some() {
            exited = true;
            break;
        }
        tokio::time::sleep(SCRAPE_EVERY).await;
    }
    assert!(exited, "the leader exits once its Lease is taken");
    let restarted = replica(env.kubeconfig_path(), &ns, "replica-a", "rec-lost-2", "15");
    rec.scrape_for(30, &[("replica-a", &restarted)]).await;
    drop(leader);
    rec.write(
        "lost-leader",
        "a leader whose Lease is taken by another holder: it exits, restarts and stays a standby",
        &["AgentOperatorNoLeader"],
    );
}

/// (c) A control plane that allows 0.5 requests per second (429 with
/// Retry-After beyond) under ten AgentDeployments polled every second:
/// 25 minutes of series time (100 samples).
#[tokio::test]
#[ignore = "records deploy/prometheus/recorded/ (make record-alert-series)"]
async fn record_a_throttled_control_plane() {
    test_support::skip_without!(Envtest);
    let env = common::shared_env();
    let client = env.client().await;
    let ns = common::test_namespace(&client, "rec-throttled").await;
    let emulator = EmulatorProcess::start_with(
        "rec-throttled",
        &[
            "--step-seconds",
            "0.2",
            "--delete-seconds",
            "0.5",
            "--rate-limit",
            "0.5",
            "--rate-limit-burst",
            "1",
        ],
    )
    .await;
    install_control_plane(&client, &ns, &emulator).await;
    let lease = format!("lease-{ns}");
    let mut extra = support::FAST_POLLING.to_vec();
    extra.extend([
        "--leader-elect",
        "--lease-name",
        &lease,
        "--lease-namespace",
        support::OPERATOR_NAMESPACE,
    ]);
    let leader = OperatorProcess::start_with(
        env.kubeconfig_path(),
        OperatorOptions {
            log_name: "rec-throttled",
            namespaces: vec![&ns],
            extra,
            env: vec![("POD_NAME", "replica-a")],
            ..OperatorOptions::default()
        },
    );
    let api: Api<AgentDeployment> = Api::namespaced(client.clone(), &ns);
    for i in 0..10 {
        let name = format!("throttled-{i}");
        apply_json(&api, &name, deployment(&name)).await;
    }
    let mut rec = Recording::default();
    rec.scrape_for(100, &[("replica-a", &leader)]).await;
    rec.write(
        "throttled-control-plane",
        "ten AgentDeployments polled every second on a control plane that allows 0.5 requests per second (429 with Retry-After beyond), for 25 minutes",
        // The budget's two alerts, and the 4xx share (429 is 4xx, which the
        // rule's description names as one cause).
        &[
            "AgentControlPlaneRejectsRequests",
            "AgentOperatorControlPlaneThrottled",
            "AgentOperatorTokenWaitHigh",
        ],
    );
}
