//! S5 (many tenants) and S6 (10,000 resources): the operator in the shape
//! users run it. One cluster-wide `agent-operator` (no `--namespace`), with
//! leader election on, acting as the shipped ServiceAccount under the
//! shipped ClusterRole (an impersonating kubeconfig, so API Priority and
//! Fairness treats it like the real one, not like the exempt admin), one
//! emulator serving several workspaces, each with its own API key and its
//! own rate limit, and one team namespace per AgentControlPlane, several
//! planes per workspace (they share the workspace's key, hence one budget).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{ListParams, PostParams};
use kube::{Api, Resource};
use serde_json::{Value, json};

use agent_operator::api::{AgentControlPlane, AgentDeployment};

use test_support::install::{
    ControlPlane, OPERATOR_NAMESPACE, install_control_plane, install_operator_rbac,
    operator_identity,
};
use test_support::manifests::AgentDeploymentManifest;

use super::figures::{Counts, Phase};
use super::kube_side::{ApiRequests, key};
use super::procs::{self, Emulator, Operator};
use super::{Bench, apply, name};

/// What one many-tenant run sets up.
#[derive(Clone, Debug)]
pub struct TenantSetup {
    /// E.g. `S5 many tenants`.
    pub label: String,
    /// Workspaces on the one emulator, each with its own key and limit.
    pub workspaces: usize,
    /// AgentControlPlanes (team namespaces) per workspace, on the same key.
    pub planes_per_workspace: usize,
    /// AgentDeployments in all, spread evenly over the planes.
    pub n: usize,
    /// Every `value_from_every`-th AgentDeployment takes a secret value from
    /// a Secret of its namespace (`valueFrom`); 0: none does.
    pub value_from_every: usize,
    /// Unrelated Secrets of 50 KB, applied with `kubectl apply` (which
    /// copies the data into an annotation) in a namespace of their own
    /// before the operator starts.
    pub foreign_secrets: usize,
    /// The last workspace answers every request 429 with `Retry-After:
    /// .0` seconds for `.1` from the start of the rollout.
    pub throttle: Option<(u64, Duration)>,
    /// Operator `--max-requests-per-second-per-host`; `None`: its default.
    pub host_ceiling: Option<f64>,
}

/// The figures of one workspace in a many-tenant run.
#[derive(Clone, Debug)]
pub struct WorkspaceFigures {
    /// 1-based, as printed.
    pub index: usize,
    pub n: usize,
    pub throttled: bool,
    /// From the start of the rollout until every resource of the workspace
    /// was Ready (to within [`READY_CHECK_INTERVAL`] of the watch event).
    pub time_to_ready: Option<Duration>,
    /// Its lower bound: 2 requests per resource at the workspace's limit,
    /// at least one revision lifetime, after the throttle window if any.
    pub t_min: Duration,
    /// The CPU-seconds of kube-apiserver and etcd together from the start
    /// of the rollout until every resource of the workspace was Ready (read
    /// from their `/metrics` at that moment).
    pub cluster_cpu_seconds: Option<f64>,
    pub requests: u64,
    pub too_many: u64,
    /// Arrived at the emulator while a `Retry-After` it sent ran.
    pub during_retry_after: u64,
    /// What the operator's client did around its first 429 of this
    /// workspace, from its log (S5 only; `None`: no 429 in it).
    pub client: Option<test_support::client_log::AtFirstThrottle>,
    /// Requests the client held back at the last moment because a
    /// `Retry-After` began while they waited for another bucket's token.
    pub held_back: usize,
}

impl WorkspaceFigures {
    /// `time_to_ready ÷ t_min`.
    pub fn ratio(&self) -> Option<f64> {
        Some(self.time_to_ready?.as_secs_f64() / self.t_min.as_secs_f64())
    }
}

/// A many-tenant run's figures: the whole fleet and each workspace.
#[derive(Clone, Debug)]
pub struct TenantRun {
    pub setup: TenantSetup,
    pub phase: Phase,
    pub workspaces: Vec<WorkspaceFigures>,
    /// Seconds `kubectl apply` of the unrelated Secrets took.
    pub foreign_applied_in: Option<f64>,
    /// The operator's Kubernetes requests during the rollout.
    pub kube: ApiRequests,
}

/// The uuid of workspace `i` (0-based).
pub fn workspace_id(i: usize) -> String {
    format!("7a3c0b5e-1f2d-4c6b-9e8a-{:012x}", i + 1)
}

/// How often the benchmark looks at the readiness its watch keeps (in
/// process: no request).
const READY_CHECK_INTERVAL: Duration = Duration::from_millis(200);

/// The per-workspace part of `GET /_emulator/requests`:
/// workspace → (total, 429s, during Retry-After).
pub fn workspace_counts(v: &Value) -> BTreeMap<String, (u64, u64, u64)> {
    let Some(map) = v.get("workspaces").and_then(Value::as_object) else {
        return BTreeMap::new();
    };
    map.iter()
        .map(|(ws, c)| {
            let n = |k: &str| c.get(k).and_then(Value::as_u64).unwrap_or(0);
            let too_many = c
                .get("statuses")
                .and_then(|s| s.get("429"))
                .and_then(Value::as_u64)
                .unwrap_or(0);
            (ws.clone(), (n("total"), too_many, n("during_retry_after")))
        })
        .collect()
}

pub async fn create_namespace(client: &kube::Client, name: &str) {
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name}})).unwrap(),
        )
        .await
        .unwrap_or_else(|e| panic!("creating namespace {name}: {e}"));
}

impl Bench {
    /// Applies the shipped RBAC (idempotent) and writes a kubeconfig that
    /// acts as the operator's ServiceAccount.
    async fn service_account_kubeconfig(&self, run: &str) -> PathBuf {
        install_operator_rbac(&self.client)
            .await
            .unwrap_or_else(|e| panic!("applying the operator's RBAC from deploy/: {e}"));
        let path = procs::log_dir().join(format!("{run}-kubeconfig"));
        self.env
            .write_impersonating_kubeconfig(&path, &operator_identity())
            .expect("writing the ServiceAccount's kubeconfig");
        path
    }

    /// `count` Secrets of 50 KB in a namespace of their own, by `kubectl
    /// apply` (one file); the seconds it took.
    async fn foreign_secrets(&self, run: &str, count: usize) -> f64 {
        let kubectl = self
            .env
            .kubectl_path()
            .expect("kubectl is in the envtest assets (hack/envtest/install.sh builds it)");
        let namespace = format!("bench-{run}-unrelated");
        create_namespace(&self.client, &namespace).await;
        let mut docs = String::new();
        for i in 0..count {
            // 50 KB of data, different per Secret.
            let blob = format!("{i:04}").repeat(12_800);
            docs.push_str(&format!(
                "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: unrelated-{i:05}\n  namespace: {namespace}\nstringData:\n  blob: \"{blob}\"\n"
            ));
        }
        let file = procs::log_dir().join(format!("{run}-unrelated-secrets.yaml"));
        std::fs::write(&file, docs).expect("writing the Secrets");
        let started = Instant::now();
        let out = tokio::process::Command::new(&kubectl)
            .env_remove("KUBECONFIG")
            .arg("--kubeconfig")
            .arg(self.env.kubeconfig_path())
            .args(["apply", "-f"])
            .arg(&file)
            .output()
            .await
            .expect("running kubectl apply");
        assert!(
            out.status.success(),
            "kubectl apply of the unrelated Secrets: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let _ = std::fs::remove_file(&file);
        started.elapsed().as_secs_f64()
    }

    /// Sets up the tenants of `setup`, starts the cluster-wide operator,
    /// rolls out `setup.n` AgentDeployments over every plane at once and
    /// waits until all are Ready; the figures.
    pub async fn tenants(&self, setup: TenantSetup) -> TenantRun {
        let suffix = &uuid::Uuid::new_v4().simple().to_string()[..6];
        let tag = setup.label.split_whitespace().next().unwrap_or("sx");
        let run = format!("{}-tenants-{}-{suffix}", tag.to_lowercase(), setup.n);
        let kubeconfig = self.service_account_kubeconfig(&run).await;
        let keys: Vec<(String, String)> = (0..setup.workspaces)
            .map(|w| (format!("bench-key-{w}"), workspace_id(w)))
            .collect();
        let emulator =
            Emulator::start_with_keys(&self.emulator_bin, &run, &keys, &self.args.emulator_args())
                .await;
        let foreign_applied_in = if setup.foreign_secrets > 0 {
            let secs = self.foreign_secrets(&run, setup.foreign_secrets).await;
            eprintln!(
                "{}: {} unrelated 50 KB Secrets applied with kubectl in {secs:.1} s",
                setup.label, setup.foreign_secrets
            );
            Some(secs)
        } else {
            None
        };

        // One team namespace per plane: the key Secret of its workspace, a
        // Secret for valueFrom, and the AgentControlPlane `default`.
        let planes = setup.workspaces * setup.planes_per_workspace;
        let mut namespaces = Vec::with_capacity(planes);
        for p in 0..planes {
            let w = p / setup.planes_per_workspace;
            let namespace = format!("bench-{run}-team{p}");
            create_namespace(&self.client, &namespace).await;
            install_control_plane(
                &self.client,
                &namespace,
                &ControlPlane {
                    url: &emulator.base_url,
                    workspace_id: &keys[w].1,
                    api_key: &keys[w].0,
                    requests_per_second: Some(self.args.rate_limit),
                },
            )
            .await;
            let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &namespace);
            apply(
                &secrets,
                "app-env",
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "app-env"},
                       "stringData": {"token": format!("team-{p}-token")}}),
            )
            .await;
            namespaces.push(namespace);
        }

        let mut args = self.args.operator_args();
        args.extend(
            [
                "--leader-elect",
                "--lease-namespace",
                OPERATOR_NAMESPACE,
                "--lease-name",
                &format!("bench-{run}"),
            ]
            .map(str::to_owned),
        );
        if let Some(ceiling) = setup.host_ceiling {
            args.extend([
                "--max-requests-per-second-per-host".to_owned(),
                ceiling.to_string(),
            ]);
        }
        let mut operator = Operator::start_with(
            &self.operator_bin,
            &run,
            &kubeconfig,
            None,
            &args,
            // As the shipped Deployment's downward API gives them: its hash
            // key Secret lives in its own namespace, the only one where the
            // shipped RBAC lets it create Secrets.
            &[
                ("POD_NAME", "agent-operator-bench-0"),
                ("POD_NAMESPACE", OPERATOR_NAMESPACE),
                // Each attempt's send and answer times, for what the
                // client sent around the throttled workspace's first 429.
                (
                    "RUST_LOG",
                    if setup.throttle.is_some() {
                        test_support::client_log::CLIENT_LOG
                    } else {
                        "info,kube=warn"
                    },
                ),
            ],
        );
        operator
            .wait_ready(Instant::now(), Duration::from_secs(120))
            .await;
        let all_planes: Api<AgentControlPlane> = Api::all(self.client.clone());
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let list = all_planes
                .list(&ListParams::default())
                .await
                .expect("listing AgentControlPlanes");
            let ready = list
                .items
                .iter()
                .filter(|p| namespaces.contains(p.meta().namespace.as_ref().unwrap()))
                .filter(|p| {
                    p.status
                        .as_ref()
                        .and_then(|s| {
                            agent_operator::api::conditions::find(
                                &s.conditions,
                                agent_operator::api::conditions::READY,
                            )
                        })
                        .is_some_and(|c| c.status == "True")
                })
                .count();
            if ready == planes {
                break;
            }
            operator.assert_running();
            assert!(
                Instant::now() < deadline,
                "{ready}/{planes} AgentControlPlanes Ready after 120 s; see {}",
                operator.log.display()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        eprintln!(
            "{}: {planes} AgentControlPlanes on {} workspaces Ready; emulator {}, operator log {}",
            setup.label,
            setup.workspaces,
            emulator.base_url,
            operator.log.display()
        );

        // The rollout.
        let before_json = emulator.requests().await;
        let before = Counts::from_json(&before_json);
        let ws_before = workspace_counts(&before_json);
        let pid = operator.pid();
        let peak_is_per_phase = procs::reset_peak_rss(pid);
        let proc_before = self.sample(&operator);
        let bench_before = self.own_cpu();
        let throttled_ws = setup.throttle.map(|_| workspace_id(setup.workspaces - 1));
        let etcd_url = self.env.etcd_url().to_owned();
        let kube_before = ApiRequests::read(&self.client, &etcd_url).await;
        let readiness = super::ready_watch::ReadyWatch::start(self.client.clone(), 1);
        let t0 = Instant::now();
        if let (Some((retry_after, _)), Some(ws)) = (setup.throttle, &throttled_ws) {
            emulator.throttle(&[(ws, retry_after)]).await;
        }
        let apply_all = async {
            futures::stream::iter(0..setup.n)
                .map(|i| {
                    // Round robin: every plane's fleet starts at once.
                    let namespace = &namespaces[i % planes];
                    let api: Api<AgentDeployment> =
                        Api::namespaced(self.client.clone(), namespace);
                    let every = setup.value_from_every;
                    async move {
                        let name = name(i);
                        let mut manifest = AgentDeploymentManifest::github(&name, super::REPO_REFS[0]).build();
                        if every > 0 && i % every == 0 {
                            manifest["spec"]["secrets"] = json!([{"name": "TOKEN",
                                "valueFrom": {"secretKeyRef": {"name": "app-env", "key": "token"}}}]);
                        }
                        apply(&api, &name, manifest).await;
                    }
                })
                .buffer_unordered(self.args.apply_concurrency)
                .collect::<Vec<()>>()
                .await;
            eprintln!(
                "{}: applied {} in {:.1} s",
                setup.label,
                setup.n,
                t0.elapsed().as_secs_f64()
            );
        };
        let lift_throttle = async {
            if let Some((_, window)) = setup.throttle {
                tokio::time::sleep(window).await;
                emulator.throttle(&[]).await;
                eprintln!(
                    "{}: throttle lifted at {:.1} s",
                    setup.label,
                    t0.elapsed().as_secs_f64()
                );
            }
        };
        let per_namespace = setup.n / planes;
        let mut per_plane_n = vec![per_namespace; planes];
        for extra in per_plane_n.iter_mut().take(setup.n % planes) {
            *extra += 1;
        }
        let timeout = self
            .args
            .timeout_seconds
            .map(Duration::from_secs_f64)
            .unwrap_or_else(|| {
                self.args.t_min(setup.n / setup.workspaces) * 10
                    + setup.throttle.map_or(Duration::ZERO, |t| t.1)
                    + Duration::from_secs(300)
            });
        let wait = async {
            let mut done: Vec<Option<Duration>> = vec![None; setup.workspaces];
            let mut cluster_cpu: Vec<Option<f64>> = vec![None; setup.workspaces];
            let mut last_progress = Instant::now();
            loop {
                tokio::time::sleep(READY_CHECK_INTERVAL).await;
                operator.assert_running();
                let ready = readiness.ready_by_namespace();
                let total_ready = namespaces
                    .iter()
                    .map(|ns| ready.get(ns).copied().unwrap_or(0))
                    .sum::<usize>();
                for (w, slot) in done.iter_mut().enumerate() {
                    let complete = (0..setup.planes_per_workspace).all(|k| {
                        let p = w * setup.planes_per_workspace + k;
                        ready.get(&namespaces[p]).copied().unwrap_or(0) >= per_plane_n[p]
                    });
                    if slot.is_none() && complete {
                        *slot = Some(t0.elapsed());
                        let now = ApiRequests::read(&self.client, &etcd_url).await;
                        let used = now.since(&kube_before);
                        cluster_cpu[w] = Some(used.cpu_seconds() + used.etcd_cpu_seconds());
                    }
                }
                if done.iter().all(Option::is_some) || t0.elapsed() >= timeout {
                    return (done, cluster_cpu, total_ready);
                }
                if last_progress.elapsed() >= super::PROGRESS_INTERVAL {
                    eprintln!(
                        "  {:>5.0} s: {total_ready}/{} Ready",
                        t0.elapsed().as_secs_f64(),
                        setup.n
                    );
                    last_progress = Instant::now();
                }
            }
        };
        let ((), (), (done, cluster_cpu, ready)) = tokio::join!(apply_all, lift_throttle, wait);
        let window = t0.elapsed();
        // The operator's writes that follow the last Ready status (its
        // events) land within the second.
        tokio::time::sleep(Duration::from_secs(2)).await;
        // The benchmark's own requests, counted here, are taken out: one
        // server-side apply per AgentDeployment and its watch's LISTs and
        // ended WATCHes, read while its open WATCH is still open, which
        // kube-apiserver has not counted yet (the /metrics reads are not
        // API requests).
        let group = AgentDeployment::group(&()).into_owned();
        let (own_lists, own_watches) = readiness.requests();
        let kube_after = ApiRequests::read(&self.client, &etcd_url).await;
        drop(readiness);
        let kube = kube_after.since(&kube_before).less(&[
            (key("APPLY", &group, "agentdeployments", ""), setup.n as f64),
            (key("LIST", &group, "agentdeployments", ""), own_lists),
            (key("WATCH", &group, "agentdeployments", ""), own_watches),
        ]);
        eprint!("{}", kube.render(setup.n));
        let after_json = emulator.requests().await;
        // `FLEET_REQUEST_LOG=<file>`: the emulator's request log of the
        // run, for a look at requests per deployment (e.g. how many polls
        // each revision cost).
        if let Some(path) = std::env::var_os("FLEET_REQUEST_LOG") {
            let log = emulator.request_log().await;
            std::fs::write(&path, log.to_string()).expect("writing FLEET_REQUEST_LOG");
        }
        let counts = Counts::from_json(&after_json).since(&before);
        let ws_after = workspace_counts(&after_json);
        let log = std::fs::read_to_string(&operator.log).unwrap_or_default();
        let attempts = test_support::client_log::attempts(&log);
        let pause = Duration::from_secs(setup.throttle.map_or(0, |t| t.0));
        let time_to_ready = done
            .iter()
            .copied()
            .collect::<Option<Vec<_>>>()
            .and_then(|d| d.into_iter().max());
        let workspaces = (0..setup.workspaces)
            .map(|w| {
                let id = workspace_id(w);
                let (t1, m1, d1) = ws_after.get(&id).copied().unwrap_or_default();
                let (t0_, m0, d0) = ws_before.get(&id).copied().unwrap_or_default();
                let n: usize = (0..setup.planes_per_workspace)
                    .map(|k| per_plane_n[w * setup.planes_per_workspace + k])
                    .sum();
                let throttled = throttled_ws.as_deref() == Some(id.as_str());
                let ws_namespaces: Vec<&str> = namespaces[w * setup.planes_per_workspace..]
                    [..setup.planes_per_workspace]
                    .iter()
                    .map(String::as_str)
                    .collect();
                let window = if throttled {
                    setup.throttle.map_or(Duration::ZERO, |t| t.1)
                } else {
                    Duration::ZERO
                };
                WorkspaceFigures {
                    index: w + 1,
                    n,
                    throttled,
                    time_to_ready: done[w],
                    t_min: window + self.args.t_min(n),
                    cluster_cpu_seconds: cluster_cpu[w],
                    requests: t1 - t0_,
                    too_many: m1 - m0,
                    during_retry_after: d1 - d0,
                    client: test_support::client_log::at_first_throttle(
                        &attempts,
                        &ws_namespaces,
                        pause,
                    ),
                    held_back: test_support::client_log::held_back(&log, &ws_namespaces),
                }
            })
            .collect();
        let phase = Phase {
            label: format!(
                "{} [cluster-wide, leader-elected, shipped RBAC; {planes} planes on {} workspaces] N={}",
                setup.label, setup.workspaces, setup.n
            ),
            n: setup.n,
            time_to_ready,
            ready,
            t_min: None,
            window,
            counts,
            proc_before,
            proc_after: self.sample(&operator),
            peak_is_per_phase,
            bench_cpu_seconds: self.own_cpu() - bench_before,
            load: procs::load_average(),
        };
        drop(operator);
        TenantRun {
            setup,
            phase,
            workspaces,
            foreign_applied_in,
            kube,
        }
    }
}

impl TenantRun {
    /// The phase line, then one line per workspace.
    pub fn render(&self) -> String {
        let mut out = self.phase.render();
        if let Some(secs) = self.foreign_applied_in {
            out.push_str(&format!(
                "    {} unrelated 50 KB Secrets applied with kubectl apply ({secs:.0} s) before the operator started\n",
                self.setup.foreign_secrets
            ));
        }
        for w in &self.workspaces {
            let time = match (w.time_to_ready, w.ratio()) {
                (Some(t), Some(r)) => format!(
                    "all {} Ready in {:.1} s (T_min {:.1} s, ratio {r:.2})",
                    w.n,
                    t.as_secs_f64(),
                    w.t_min.as_secs_f64()
                ),
                _ => format!("NOT all {} Ready", w.n),
            };
            out.push_str(&format!(
                "    workspace {}{}: {time} | requests {} ({:.2} per resource) | 429 {} | arrived during Retry-After {}{}\n",
                w.index,
                if w.throttled { " (throttled)" } else { "" },
                w.requests,
                w.requests as f64 / w.n.max(1) as f64,
                w.too_many,
                w.during_retry_after,
                w.client.map_or(String::new(), |c| format!(
                    " | at the client's first 429: {} others in flight, {} sent after, {} held back at send",
                    c.in_flight, c.sent_after, w.held_back
                ))
            ));
        }
        out
    }
}
