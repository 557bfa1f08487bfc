//! `agents`: N AgentDeployments (default 200), each with 2 AgentAssistants
//! and 1 AgentCron (on its first assistant), all 4 × N objects applied at
//! once on one fleet (declared AgentControlPlane, one emulator, one
//! operator), until all are Ready (issue 32, item 8). Reported: time to all
//! Ready, control plane requests per AgentDeployment, agent server requests
//! per AgentAssistant and per AgentCron (by route, from the emulator's
//! counts), 429s and the operator's RSS, each against its target
//! (docs/BENCHMARKS.md, "Targets and gate").

use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::ListParams;
use kube::{Api, Resource};
use serde_json::json;

use agent_operator::api::AgentDeployment;
use agent_operator::api::assistant::AgentAssistant;
use agent_operator::api::cron::AgentCron;
use test_support::manifests::AgentDeploymentManifest;

use super::figures::{Counts, Phase};
use super::procs;
use super::{Bench, Fleet, Gate, apply, name};

/// Agent server requests per AgentAssistant from apply to Ready: the
/// pass's `GET /assistants/{id}` (404) and the create (`POST /assistants`
/// with `if_exists: do_nothing`). Its own status write causes no request.
pub const REQUESTS_PER_ASSISTANT: f64 = 2.0;
/// Agent server requests per AgentCron from apply to Ready: the pass's
/// `POST /runs/crons/search` by its UID tag (none) and the create.
pub const REQUESTS_PER_CRON: f64 = 2.0;
/// Control plane requests per AgentDeployment: the S1 target.
pub const REQUESTS_PER_DEPLOYMENT: f64 = 3.0;
/// Time to all Ready beyond the deployments' T_min: assistants wait for
/// their deployment's Ready (a watch event) and crons for their assistant's,
/// three passes in a row with two agent server round trips each; 15 s is
/// room for those passes through the queue of 4 × N objects at
/// `--concurrency` 16 on the shared 2-core machine.
pub const AFTER_DEPLOYMENTS: Duration = Duration::from_secs(15);
/// Operator peak RSS with 4 × N = 800 objects: the target of 2,000
/// AgentDeployments (S3), about as many objects.
pub const RSS_MIB: f64 = 48.0;

/// The figures of one `agents` run.
pub struct AgentsRun {
    pub phase: Phase,
    /// Ready at the end: (deployments, assistants, crons).
    pub ready: (usize, usize, usize),
    /// Agent server requests of the assistants' and the crons' routes.
    pub assistant_requests: u64,
    pub cron_requests: u64,
    /// Control plane requests (every route but the agent servers').
    pub control_plane_requests: u64,
    /// Requests to the agent servers by any other route (`/ok`, `/info`:
    /// `spec.verify`).
    pub other_agent_requests: u64,
    pub too_many: u64,
}

fn assistant_name(i: usize, j: usize) -> String {
    format!("{}-a{j}", name(i))
}

/// Ready=True on the current generation, for one kind, by a list.
async fn ready_of<K>(fleet: &Fleet) -> usize
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>,
{
    let url = K::url_path(&(), Some(&fleet.namespace));
    let request = kube::core::Request::new(url)
        .list(&ListParams::default().match_any())
        .expect("a list request");
    match fleet.client.request::<super::ReadinessList>(request).await {
        Ok(list) => list.items.iter().filter(|o| o.is_ready(1)).count(),
        Err(e) => {
            eprintln!("agents: listing: {e}");
            0
        }
    }
}

impl Bench {
    /// The `agents` scenario; see the module docs.
    pub async fn agents(&mut self, n: usize) -> (AgentsRun, Gate) {
        let mut fleet = self.fleet("agents", n, true).await;
        let assistants: Api<AgentAssistant> =
            Api::namespaced(fleet.client.clone(), &fleet.namespace);
        let crons: Api<AgentCron> = Api::namespaced(fleet.client.clone(), &fleet.namespace);
        let before = Counts::from_json(&fleet.emulator.requests().await);
        let peak_is_per_phase = procs::reset_peak_rss(fleet.operator.pid());
        let proc_before = self.sample(&fleet.operator);
        let bench_before = self.own_cpu();
        let t0 = Instant::now();
        // Every object of one agent in a row, the agents one after the
        // other: deployment, its two assistants, its cron.
        futures::stream::iter((0..n).flat_map(|i| (0..4).map(move |k| (i, k))))
            .map(|(i, k)| {
                let (deployments, assistants, crons) =
                    (fleet.api.clone(), assistants.clone(), crons.clone());
                async move {
                    let dep = name(i);
                    match k {
                        0 => {
                            apply(
                                &deployments,
                                &dep,
                                AgentDeploymentManifest::github(&dep, "main").build(),
                            )
                            .await
                        }
                        1 | 2 => {
                            let a = assistant_name(i, k - 1);
                            apply(
                                &assistants,
                                &a,
                                json!({
                                    "apiVersion": "agentserver.dev/v1alpha1",
                                    "kind": "AgentAssistant",
                                    "metadata": {"name": a},
                                    "spec": {"deploymentRef": {"name": dep}, "graphId": "agent",
                                             "name": a, "description": "fleet benchmark",
                                             "metadata": {"team": "bench"}}
                                }),
                            )
                            .await
                        }
                        _ => {
                            let c = format!("{dep}-c0");
                            apply(
                                &crons,
                                &c,
                                json!({
                                    "apiVersion": "agentserver.dev/v1alpha1",
                                    "kind": "AgentCron",
                                    "metadata": {"name": c},
                                    "spec": {"deploymentRef": {"name": dep},
                                             "assistantRef": {"name": assistant_name(i, 0)},
                                             "schedule": "30 7 * * 1-5",
                                             "timezone": "Europe/Paris",
                                             "input": {"messages": [{"role": "user", "content": "digest"}]},
                                             "metadata": {"team": "bench"}}
                                }),
                            )
                            .await
                        }
                    }
                }
            })
            .buffer_unordered(self.args.apply_concurrency)
            .collect::<Vec<()>>()
            .await;
        eprintln!(
            "agents N={n}: applied {} objects in {:.1} s",
            4 * n,
            t0.elapsed().as_secs_f64()
        );
        let t_min = self.args.t_min(n);
        let timeout = self.args.timeout(n);
        let mut ready = (0, 0, 0);
        let mut time_to_ready = None;
        let mut last_progress = Instant::now();
        while t0.elapsed() < timeout {
            ready = (
                ready_of::<AgentDeployment>(&fleet).await,
                ready_of::<AgentAssistant>(&fleet).await,
                ready_of::<AgentCron>(&fleet).await,
            );
            if ready == (n, 2 * n, n) {
                time_to_ready = Some(t0.elapsed());
                break;
            }
            if last_progress.elapsed() >= super::PROGRESS_INTERVAL {
                eprintln!(
                    "agents N={n}: {:.0} s: Ready {}/{n} deployments, {}/{} assistants, {}/{n} crons",
                    t0.elapsed().as_secs_f64(),
                    ready.0,
                    ready.1,
                    2 * n,
                    ready.2
                );
                last_progress = Instant::now();
            }
            fleet.operator.assert_running();
            tokio::time::sleep(super::LIST_INTERVAL).await;
        }
        let window = t0.elapsed();
        let counts = Counts::from_json(&fleet.emulator.requests().await).since(&before);
        let agent = |r: &str| r.contains("/agents/");
        let assistant_requests = counts.sum_where(|r| agent(r) && r.contains("/assistants"));
        let cron_requests = counts.sum_where(|r| agent(r) && r.contains("/runs/crons"));
        let other_agent_requests = counts.sum_where(agent) - assistant_requests - cron_requests;
        let control_plane_requests = counts.sum_where(|r| !agent(r));
        let phase = Phase {
            label: format!("agents N={n} (+{} assistants, {n} crons)", 2 * n),
            n,
            time_to_ready,
            ready: ready.0,
            t_min: Some(t_min),
            window,
            counts,
            proc_before,
            proc_after: self.sample(&fleet.operator),
            peak_is_per_phase,
            bench_cpu_seconds: self.own_cpu() - bench_before,
            load: procs::load_average(),
        };
        let too_many = phase.counts.too_many();
        let run = AgentsRun {
            phase,
            ready,
            assistant_requests,
            cron_requests,
            control_plane_requests,
            other_agent_requests,
            too_many,
        };
        let gate = run.judge(n, t_min);
        (run, gate)
    }
}

impl AgentsRun {
    /// Prints the figures against their targets; the gate's verdicts.
    fn judge(&self, n: usize, t_min: Duration) -> Gate {
        let mut gate = Gate::default();
        let p = &self.phase;
        println!("{}", p.render());
        let all = self.ready == (n, 2 * n, n);
        let mark = gate.require(
            &format!(
                "agents: all Ready ({} of {n} deployments, {} of {} assistants, {} of {n} crons)",
                self.ready.0,
                self.ready.1,
                2 * n,
                self.ready.2
            ),
            all,
        );
        println!(
            "agents: Ready {}/{n} deployments, {}/{} assistants, {}/{n} crons: {mark}",
            self.ready.0,
            self.ready.1,
            2 * n,
            self.ready.2
        );
        let target = t_min.as_secs_f64() + AFTER_DEPLOYMENTS.as_secs_f64();
        if let Some(t) = p.time_to_ready {
            let mark = gate.within("agents: time to all Ready (s)", t.as_secs_f64(), target);
            println!(
                "agents: time to all {} Ready {:.1} s; target ≤ T_min {:.1} s + {} s = {target:.1} s: {mark}",
                4 * n,
                t.as_secs_f64(),
                t_min.as_secs_f64(),
                AFTER_DEPLOYMENTS.as_secs()
            );
        }
        let per = |what: &str, requests: u64, objects: usize, target: f64, gate: &mut Gate| {
            let (v, mark) = gate.per_object(
                &format!("agents: {what} requests per object"),
                requests,
                objects,
                target,
            );
            println!(
                "agents: {what}: {requests} requests, {v:.3} per object (target ≤ {target}): {mark}"
            );
        };
        per(
            "control plane, per AgentDeployment",
            self.control_plane_requests,
            n,
            REQUESTS_PER_DEPLOYMENT,
            &mut gate,
        );
        per(
            "agent server, per AgentAssistant",
            self.assistant_requests,
            2 * n,
            REQUESTS_PER_ASSISTANT,
            &mut gate,
        );
        per(
            "agent server, per AgentCron",
            self.cron_requests,
            n,
            REQUESTS_PER_CRON,
            &mut gate,
        );
        println!(
            "agents: agent server, other routes (spec.verify): {}",
            self.other_agent_requests
        );
        let mark = gate.at_most("agents: 429s", self.too_many as f64, 0.0, 0.0);
        println!("agents: 429s {} (target 0): {mark}", self.too_many);
        let rss = p.proc_after.peak_rss_mib;
        let mark = gate.within("agents: operator peak RSS (MiB)", rss, RSS_MIB);
        println!(
            "agents: operator RSS peak {rss:.1} MiB, final {:.1} MiB (target ≤ {RSS_MIB}): {mark}",
            p.proc_after.rss_mib
        );
        gate
    }
}
