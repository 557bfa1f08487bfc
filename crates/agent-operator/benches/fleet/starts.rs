//! `starts`: the operator starting against a control plane that answers
//! once, then throttles, many times over: what the slow start of an
//! undeclared budget (controlplane/window.rs) lets through when a throttle
//! begins at start (a restart or a failover while the workspace is at its
//! limit, a fleet applied at once).
//!
//! Each start: a namespace of its own with an AgentControlPlane without
//! `requestsPerSecond` (undeclared) on a workspace of its own of one
//! emulator, N AgentDeployments applied before the operator starts, the
//! workspace throttled after its first answered request (429 with
//! `Retry-After: 120`), then a new `agent-operator` for that namespace. The
//! start ends [`SETTLE`] after the emulator answered the first 429; the
//! operator is killed. From the operator's own log ([`client_log`]): the
//! requests in flight when the client received the first 429 and those
//! it sent after (must be 0); from the emulator: the requests that arrived
//! during the `Retry-After`, at most those in flight.

use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::Api;
use serde_json::Value;

use agent_operator::api::AgentDeployment;
use test_support::client_log;
use test_support::install::{ControlPlane, install_control_plane};
use test_support::manifests::AgentDeploymentManifest;

use super::procs::{Emulator, Operator};
use super::tenants::{create_namespace, workspace_counts, workspace_id};
use super::{Bench, Gate, apply, name};

/// The `Retry-After` of the throttle, seconds (longer than a start).
pub const RETRY_AFTER: u64 = 120;
/// Requests the throttled workspace answers before it throttles.
pub const ANSWERED_BEFORE: u64 = 1;
/// How long a start goes on after the first 429 was answered.
pub const SETTLE: Duration = Duration::from_secs(3);
/// Other requests in flight when the first 429 comes back, at most: the
/// window after one answered request is 2 (controlplane/window.rs), the
/// 429's own request and one more.
pub const IN_FLIGHT_BOUND: usize = 1;
/// Longest wait for the first 429 of a start.
const FIRST_429_WITHIN: Duration = Duration::from_secs(90);

/// The figures of one start.
#[derive(Clone, Debug, Default)]
pub struct StartFigures {
    /// Requests of the workspace the emulator counted, and its 429s.
    pub requests: u64,
    pub too_many: u64,
    /// Arrived at the emulator while its `Retry-After` ran.
    pub during_retry_after: u64,
    /// From the operator's log; `None`: no 429 in it.
    pub client: Option<client_log::AtFirstThrottle>,
    /// Requests held back right before sending (a pause began while they
    /// waited for a token).
    pub held_back: usize,
}

/// The figures of every start.
#[derive(Clone, Debug)]
pub struct StartsRun {
    pub n: usize,
    pub starts: Vec<StartFigures>,
}

impl Bench {
    /// `starts` starts of an operator with `n` AgentDeployments on a
    /// workspace that answers once, then throttles.
    pub async fn starts(&self, starts: usize, n: usize) -> StartsRun {
        let suffix = &uuid::Uuid::new_v4().simple().to_string()[..6];
        let run = format!("starts-{n}-{suffix}");
        let keys: Vec<(String, String)> = (0..starts)
            .map(|i| (format!("bench-key-{i}"), workspace_id(i)))
            .collect();
        let emulator =
            Emulator::start_with_keys(&self.emulator_bin, &run, &keys, &self.args.emulator_args())
                .await;
        let mut figures = Vec::with_capacity(starts);
        for (i, key) in keys.iter().enumerate() {
            let f = self.one_start(&run, &emulator, key, i, n).await;
            eprintln!(
                "  start {}: {} requests, {} × 429, in flight at the first 429 {}, sent after it {}, held back at send {}, arrived during Retry-After {}",
                i + 1,
                f.requests,
                f.too_many,
                f.client.map_or("-".into(), |c| c.in_flight.to_string()),
                f.client.map_or("-".into(), |c| c.sent_after.to_string()),
                f.held_back,
                f.during_retry_after
            );
            figures.push(f);
        }
        StartsRun { n, starts: figures }
    }

    async fn one_start(
        &self,
        run: &str,
        emulator: &Emulator,
        (key, workspace): &(String, String),
        i: usize,
        n: usize,
    ) -> StartFigures {
        let namespace = format!("bench-{run}-{i}");
        self.prepare_start(emulator, &namespace, key, workspace, n)
            .await;
        emulator
            .throttle_after(workspace, RETRY_AFTER, ANSWERED_BEFORE)
            .await;
        let counts = |v: &Value| workspace_counts(v).get(workspace).copied();
        let (t0, m0, d0) = counts(&emulator.requests().await).unwrap_or_default();
        let mut operator = Operator::start_with(
            &self.operator_bin,
            &format!("{run}-{i}"),
            self.env.kubeconfig_path(),
            Some(&namespace),
            &self.args.operator_args(),
            &[("RUST_LOG", client_log::CLIENT_LOG)],
        );
        let started = Instant::now();
        loop {
            let (_, m, _) = counts(&emulator.requests().await).unwrap_or_default();
            if m > m0 || started.elapsed() > FIRST_429_WITHIN {
                break;
            }
            operator.assert_running();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(SETTLE).await;
        operator.kill().await;
        let (t1, m1, d1) = counts(&emulator.requests().await).unwrap_or_default();
        let log = std::fs::read_to_string(&operator.log).unwrap_or_default();
        let attempts = client_log::attempts(&log);
        StartFigures {
            requests: t1 - t0,
            too_many: m1 - m0,
            during_retry_after: d1 - d0,
            client: client_log::at_first_throttle(
                &attempts,
                &[namespace.as_str()],
                Duration::from_secs(RETRY_AFTER),
            ),
            held_back: client_log::held_back(&log, &[namespace.as_str()]),
        }
    }
}

impl Bench {
    /// The namespace of one start: its AgentControlPlane (undeclared) on
    /// `workspace` and `n` AgentDeployments, before any operator runs.
    async fn prepare_start(
        &self,
        emulator: &Emulator,
        namespace: &str,
        key: &str,
        workspace: &str,
        n: usize,
    ) {
        create_namespace(&self.client, namespace).await;
        let plane = ControlPlane {
            url: &emulator.base_url,
            workspace_id: workspace,
            api_key: key,
            requests_per_second: None,
        };
        install_control_plane(&self.client, namespace, &plane).await;
        let api: Api<AgentDeployment> = Api::namespaced(self.client.clone(), namespace);
        futures::stream::iter(0..n)
            .map(|j| {
                let api = &api;
                async move {
                    let name = name(j);
                    let manifest =
                        AgentDeploymentManifest::github(&name, super::REPO_REFS[0]).build();
                    apply(api, &name, manifest).await;
                }
            })
            .buffer_unordered(self.args.apply_concurrency)
            .collect::<Vec<()>>()
            .await;
    }
}

impl StartsRun {
    /// The distributions and the gate: in every start a 429, 0 requests
    /// sent after it, at most [`IN_FLIGHT_BOUND`] others in flight, and no
    /// more arrivals during the `Retry-After` than were in flight.
    pub fn summary(&self, gate: &mut Gate) {
        let label = format!("starts ({} × {} objects)", self.starts.len(), self.n);
        super::results::count(&label, self.n);
        let seen: Vec<client_log::AtFirstThrottle> =
            self.starts.iter().filter_map(|s| s.client).collect();
        println!(
            "  {label}: a 429 seen by the client in {} of {} starts {}",
            seen.len(),
            self.starts.len(),
            gate.require(
                &format!("{label}: a 429 in every start"),
                seen.len() == self.starts.len()
            )
        );
        let in_flight = seen.iter().map(|c| c.in_flight);
        let sent_after = seen.iter().map(|c| c.sent_after);
        let most_in_flight = in_flight.clone().max().unwrap_or(0);
        println!(
            "  {label}: other requests in flight when the client received the first 429: {} (≤ {IN_FLIGHT_BOUND}) {}",
            client_log::distribution(in_flight),
            gate.at_most(
                &format!("{label}: in flight at the first 429"),
                most_in_flight as f64,
                IN_FLIGHT_BOUND as f64,
                0.0
            )
        );
        println!(
            "  {label}: requests sent after the client received it: {} (0 in every start) {}",
            client_log::distribution(sent_after.clone()),
            gate.at_most(
                &format!("{label}: sent after the first 429"),
                sent_after.max().unwrap_or(0) as f64,
                0.0,
                0.0
            )
        );
        let within = self.starts.iter().all(|s| {
            s.client
                .is_some_and(|c| s.during_retry_after <= (c.in_flight + c.sent_after) as u64)
        });
        println!(
            "  {label}: arrived at the emulator during Retry-After: {} (≤ in flight + sent after, each start) {}",
            client_log::distribution(self.starts.iter().map(|s| s.during_retry_after as usize)),
            gate.require(
                &format!("{label}: during Retry-After within the requests in flight"),
                within
            )
        );
    }
}
