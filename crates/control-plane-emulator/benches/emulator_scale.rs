//! Does the emulator stay fast with thousands of deployments?
//!
//! `cargo bench -p control-plane-emulator --bench emulator_scale` creates 5,000 deployments through the
//! real client over loopback and prints the latency of GET, exact-name lookup
//! and a list page at 100 and at 5,000 deployments, the create throughput and
//! the process's resident memory. It asserts nothing about speed. Under
//! `cargo test` (no `--bench` argument) it runs a 50-deployment smoke pass.

use std::time::{Duration, Instant};

use agent_operator::controlplane::types::{
    DeploymentCreate, SecretValue, SourceConfig, SourceRevisionConfig,
};
use agent_operator::controlplane::{ClientConfig, ControlPlaneClient, ListDeployments};
use control_plane_emulator::{self as emulator, DEMO_API_KEY, DEMO_WORKSPACE_ID, EmulatorConfig};

fn body(i: usize) -> DeploymentCreate {
    DeploymentCreate {
        name: format!("agent-{i:05}"),
        source: "github".into(),
        source_config: SourceConfig {
            integration_id: Some("7d8b2f5e-3c1a-4e2b-9f6d-2a1b3c4d5e6f".into()),
            repo_url: Some("https://github.com/acme/agent".into()),
            deployment_type: Some("dev".into()),
            build_on_push: Some(false),
            ..Default::default()
        },
        source_revision_config: SourceRevisionConfig {
            repo_ref: Some("main".into()),
            langgraph_config_path: Some("langgraph.json".into()),
            ..Default::default()
        },
        secrets: vec![SecretValue::new("LOG_LEVEL", "info")],
        secret_references: Vec::new(),
    }
}

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort_unstable();
    samples[((samples.len() as f64 - 1.0) * p).round() as usize]
}

async fn measure<F, Fut>(rounds: usize, mut f: F) -> (Duration, Duration)
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut samples = Vec::with_capacity(rounds);
    for i in 0..rounds {
        let t = Instant::now();
        f(i).await;
        samples.push(t.elapsed());
    }
    (
        percentile(&mut samples, 0.5),
        percentile(&mut samples, 0.99),
    )
}

async fn report(client: &ControlPlaneClient, ids: &[String], label: &str, rounds: usize) {
    let n = ids.len();
    let (g50, g99) = measure(rounds, |i| {
        let id = ids[i * 7919 % n].clone();
        async move {
            client.get_deployment(&id).await.expect("get");
        }
    })
    .await;
    let (f50, f99) = measure(rounds / 10 + 1, |i| {
        let name = format!("agent-{:05}", i * 7919 % n);
        async move {
            assert!(
                client
                    .find_deployment_by_name(&name)
                    .await
                    .expect("find")
                    .is_some()
            );
        }
    })
    .await;
    let (l50, l99) = measure(rounds / 10 + 1, |_| async {
        client
            .list_deployments(&ListDeployments {
                limit: Some(100),
                offset: Some((n / 2) as u32),
                ..Default::default()
            })
            .await
            .expect("list");
    })
    .await;
    println!(
        "{label:>6} deployments: GET p50 {:>7.3} ms p99 {:>7.3} ms | exact-name lookup p50 {:>7.3} ms p99 {:>7.3} ms | list page of 100 p50 {:>7.3} ms p99 {:>7.3} ms | RSS {:.1} MiB",
        ms(g50),
        ms(g99),
        ms(f50),
        ms(f99),
        ms(l50),
        ms(l99),
        rss_mib()
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let total = if full { 5_000 } else { 50 };
    let rounds = if full { 1_000 } else { 20 };
    let running = emulator::spawn(EmulatorConfig {
        step_duration: Duration::ZERO,
        ..EmulatorConfig::default()
    })
    .await
    .expect("emulator starts");
    let client = ControlPlaneClient::new(ClientConfig::new(
        running.base_url(),
        DEMO_WORKSPACE_ID,
        DEMO_API_KEY.to_owned().into(),
    ))
    .expect("client");
    println!(
        "emulator_scale: {total} deployments, {rounds} GETs per point, RSS at start {:.1} MiB",
        rss_mib()
    );
    let mut ids = Vec::with_capacity(total);
    let start = Instant::now();
    for i in 0..total {
        ids.push(client.create_deployment(&body(i)).await.expect("create").id);
        if ids.len() == 100.min(total) {
            report(&client, &ids, "100", rounds).await;
        }
    }
    let created = start.elapsed();
    println!(
        "created {total} deployments in {:.2} s ({:.0} creates/s, one at a time)",
        created.as_secs_f64(),
        total as f64 / created.as_secs_f64()
    );
    report(&client, &ids, &total.to_string(), rounds).await;
    running.shutdown().await;
}
