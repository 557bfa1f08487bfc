//! Does the emulator stay fast with thousands of deployments?
//!
//! `cargo bench -p control-plane-emulator --bench emulator_scale` creates 5,000 deployments over
//! loopback HTTP (reqwest with the wire crate's types; the emulator does not
//! link the operator's client) and prints the latency of GET, exact-name lookup
//! and a list page at 100 and at 5,000 deployments, the create throughput and
//! the process's resident memory. It asserts nothing about speed. Under
//! `cargo test` (no `--bench` argument) it runs a 50-deployment smoke pass.

use std::time::{Duration, Instant};

use control_plane_emulator::{self as emulator, DEMO_API_KEY, DEMO_WORKSPACE_ID, EmulatorConfig};
use control_plane_wire::types::{
    Deployment, DeploymentCreate, Page, SecretValue, SourceConfig, SourceRevisionConfig,
};
use serde::de::DeserializeOwned;

/// The control plane API over HTTP, as a client sends it: `X-Api-Key` and
/// `X-Tenant-Id` on every request, JSON both ways, any non-2xx a panic.
struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    fn new(base: String) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        Self {
            http: reqwest::Client::new(),
            base,
        }
    }

    async fn send<T: DeserializeOwned>(&self, req: reqwest::RequestBuilder) -> T {
        let res = req
            .header("X-Api-Key", DEMO_API_KEY)
            .header("X-Tenant-Id", DEMO_WORKSPACE_ID)
            .send()
            .await
            .expect("request sent");
        let status = res.status();
        assert!(status.is_success(), "{status}");
        res.json().await.expect("JSON answer")
    }

    async fn create_deployment(&self, body: &DeploymentCreate) -> Deployment {
        let url = format!("{}/v2/deployments", self.base);
        self.send(self.http.post(url).json(body)).await
    }

    async fn get_deployment(&self, id: &str) -> Deployment {
        let url = format!("{}/v2/deployments/{id}", self.base);
        self.send(self.http.get(url)).await
    }

    /// The exact-name lookup as the operator's client makes it (`name` and
    /// `name_contains`, then the name compared).
    async fn find_deployment_by_name(&self, name: &str) -> Option<Deployment> {
        let url = format!("{}/v2/deployments", self.base);
        let page: Page<Deployment> = self
            .send(
                self.http
                    .get(url)
                    .query(&[("name", name), ("name_contains", name)]),
            )
            .await;
        page.resources.into_iter().find(|d| d.name == name)
    }

    async fn list_deployments(&self, limit: u32, offset: u32) -> Page<Deployment> {
        let url = format!("{}/v2/deployments", self.base);
        self.send(
            self.http
                .get(url)
                .query(&[("limit", limit), ("offset", offset)]),
        )
        .await
    }
}

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
        display_name: None,
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

async fn report(client: &Client, ids: &[String], label: &str, rounds: usize) {
    let n = ids.len();
    let (g50, g99) = measure(rounds, |i| {
        let id = ids[i * 7919 % n].clone();
        async move {
            client.get_deployment(&id).await;
        }
    })
    .await;
    let (f50, f99) = measure(rounds / 10 + 1, |i| {
        let name = format!("agent-{:05}", i * 7919 % n);
        async move {
            assert!(client.find_deployment_by_name(&name).await.is_some());
        }
    })
    .await;
    let (l50, l99) = measure(rounds / 10 + 1, |_| async {
        client.list_deployments(100, (n / 2) as u32).await;
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
    let client = Client::new(running.base_url());
    println!(
        "emulator_scale: {total} deployments, {rounds} GETs per point, RSS at start {:.1} MiB",
        rss_mib()
    );
    let mut ids = Vec::with_capacity(total);
    let start = Instant::now();
    for i in 0..total {
        ids.push(client.create_deployment(&body(i)).await.id);
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
