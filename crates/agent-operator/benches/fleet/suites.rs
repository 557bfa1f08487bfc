//! `suites`: N AgentDeployments (default 200), each with a verification
//! suite of ten cases (`spec.verify.suite`, docs/SUITES.md), applied at
//! once on one fleet (declared AgentControlPlane, the emulator's built-in
//! agent servers, one operator), until all are Ready, which a suite makes
//! wait for its ten cases (issue 55). Reported: time to all verified
//! against the control plane's T_min and the agent servers' budget, agent
//! server requests per revision
//! (target ≤ cases + 2), the cases run by outcome, control plane requests
//! per AgentDeployment, 429s and the operator's RSS.

use std::time::Duration;

use serde_json::{Value, json};

use test_support::manifests::AgentDeploymentManifest;

use super::figures::{Counts, Phase};
use super::{Bench, Gate};

/// Cases of each suite.
pub const CASES: usize = 10;
/// Agent server requests per revision: one run per case, plus the search
/// for the threads an earlier attempt left and the prune of the run's
/// threads once its result is written (docs/SUITES.md).
pub const REQUESTS_PER_REVISION: f64 = CASES as f64 + 2.0;
/// Time to all verified beyond the deployments' T_min and the budget's
/// floor ([`budget_floor`]): `--verify-concurrency` 4 suites run at once,
/// each a few hundred milliseconds on the shared machine (measured: 4 to
/// 9 s in all at 200).
pub const AFTER_DEPLOYMENTS: Duration = Duration::from_secs(15);
/// Requests a suite sends before its result: the search, one run per case.
pub const BEFORE_RESULT: usize = CASES + 1;

/// The least time the agent servers' default budget (a bucket of 10, 2
/// requests per second, per agent server) and `--verify-concurrency` (4
/// passes at once) add for `n` suites: each waits for the tokens of
/// [`BEFORE_RESULT`] its burst lacks, holding its slot (its admission
/// takes no token: each request waits for its own), and the suites go
/// four at a time: 0.5 s per four suites of ten cases.
pub fn budget_floor(n: usize) -> Duration {
    let (burst, rate, concurrency) = (10usize, 2.0, 4usize);
    let wait = BEFORE_RESULT.saturating_sub(burst) as f64 / rate;
    Duration::from_secs_f64(n.div_ceil(concurrency) as f64 * wait)
}
/// Control plane requests per AgentDeployment: the S1 target and the one
/// GET of the deployment a verification makes when the pass that verifies
/// did not read it (to check that the revision is the active one; a pass
/// deferred by `--verify-concurrency` comes back without that read).
pub const REQUESTS_PER_DEPLOYMENT: f64 = super::agents::REQUESTS_PER_DEPLOYMENT + 1.0;
/// Operator peak RSS: as the `agents` scenario.
pub const RSS_MIB: f64 = 48.0;

/// The suite of AgentDeployment `name`: ten cases its echo must answer
/// (the emulator's agent server answers a `values` run with the input as
/// the state).
fn suite(name: &str) -> Value {
    let cases: Vec<Value> = (0..CASES)
        .map(|c| {
            let text = format!("{name} case {c}");
            json!({
                "name": format!("case-{c}"),
                "assistantId": "agent",
                "input": {"messages": [{"role": "user", "content": text}]},
                "assertions": [{"pointer": "/messages/0/content", "value": text}],
            })
        })
        .collect();
    json!({"cases": cases})
}

/// The figures of one `suites` run.
pub struct SuitesRun {
    pub phase: Phase,
    /// Agent server requests (the threads' search, the runs, the prunes),
    /// counted once the last prune landed.
    pub agent_requests: u64,
    /// Control plane requests (every route but the agent servers').
    pub control_plane_requests: u64,
    pub too_many: u64,
}

impl Bench {
    /// The `suites` scenario; see the module docs.
    pub async fn suites(&mut self, n: usize) -> (SuitesRun, Gate) {
        let fleet = self.fleet("suites", n, true).await;
        super::results::count("suites", n);
        let label = format!("suites N={n} ({CASES} cases each)");
        let phase = self
            .wave_of(&fleet, &label, 1, |name| {
                let mut m = AgentDeploymentManifest::github(name, "main").build();
                m["spec"]["verify"] = json!({"suite": suite(name)});
                m
            })
            .await;
        let agent = |r: &str| r.contains("/agents/");
        // Each prune is sent once its status write succeeded: let the last
        // ones land before counting (no agent server request precedes the
        // wave).
        tokio::time::sleep(Duration::from_secs(2)).await;
        let all = Counts::from_json(&fleet.emulator.requests().await);
        let run = SuitesRun {
            agent_requests: all.sum_where(agent),
            control_plane_requests: phase.counts.sum_where(|r| !agent(r)),
            too_many: phase.counts.too_many(),
            phase,
        };
        let gate = run.judge(n, self.args.t_min(n));
        (run, gate)
    }
}

impl SuitesRun {
    /// Prints the figures against their targets; the gate's verdicts.
    fn judge(&self, n: usize, t_min: Duration) -> Gate {
        let mut gate = Gate::default();
        let p = &self.phase;
        println!("{}", p.render());
        let ready = p.ready;
        let mark = gate.require(
            &format!("suites: all verified ({ready} of {n})"),
            ready == n,
        );
        println!("suites: verified and Ready {ready}/{n}: {mark}");
        let floor = budget_floor(n).as_secs_f64();
        let target = t_min.as_secs_f64() + floor + AFTER_DEPLOYMENTS.as_secs_f64();
        if let Some(t) = p.time_to_ready {
            let mark = gate.within("suites: time to all verified (s)", t.as_secs_f64(), target);
            println!(
                "suites: time to all {n} verified {:.1} s; target ≤ T_min {:.1} s + the agent servers' budget floor {floor:.1} s + {} s = {target:.1} s: {mark}",
                t.as_secs_f64(),
                t_min.as_secs_f64(),
                AFTER_DEPLOYMENTS.as_secs()
            );
        }
        let (per_revision, mark) = gate.per_object(
            "suites: agent server requests per revision",
            self.agent_requests,
            n,
            REQUESTS_PER_REVISION,
        );
        println!(
            "suites: agent server: {} requests, {per_revision:.3} per revision ({CASES} cases; target ≤ {REQUESTS_PER_REVISION}): {mark}",
            self.agent_requests
        );
        let (cp, mark) = gate.per_object(
            "suites: control plane requests per AgentDeployment",
            self.control_plane_requests,
            n,
            REQUESTS_PER_DEPLOYMENT,
        );
        println!(
            "suites: control plane: {} requests, {cp:.3} per AgentDeployment: {mark}",
            self.control_plane_requests
        );
        let mark = gate.at_most("suites: 429s", self.too_many as f64, 0.0, 0.0);
        println!("suites: 429s {} (target 0): {mark}", self.too_many);
        let rss = p.proc_after.peak_rss_mib;
        let mark = gate.within("suites: operator peak RSS (MiB)", rss, RSS_MIB);
        println!("suites: operator RSS peak {rss:.1} MiB (target ≤ {RSS_MIB}): {mark}");
        gate
    }
}
