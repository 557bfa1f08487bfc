//! Helpers of the operator tests: the operator *binary* as a child process and
//! the emulator on its own thread and runtime ([`EmulatorProcess`]), both on
//! loopback, typed clients, polling waits, and the request-budget guard
//! ([`budget`]).
//!
//! Every child is killed when its handle drops (`kill_on_drop`), the emulator
//! is shut down, and their logs go to `target/test-logs/<test>-<what>.log`
//! for post-mortems.
#![allow(dead_code)] // each test binary uses a different subset of these helpers

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use agent_operator::api::AgentDeployment;
use agent_operator::controlplane::{ClientConfig, ControlPlaneClient};
use kube::Api;
use kube::api::{Patch, PatchParams};
use tokio::process::{Child, Command};

use budget::{RequestLog, budget_message, budget_violations_at, fetch_request_log};

#[allow(unused_imports)] // each test binary uses a different subset
pub use test_support::{budget, langgraph};
mod harness;
pub mod leaks;
mod observe;
#[allow(unused_imports)] // each test binary uses a different subset
pub use budget::Budget;
#[allow(unused_imports)] // each test binary uses a different subset
pub use harness::{Harness, HarnessBuilder, InProcessController, InProcessHarness};
#[allow(unused_imports)] // each test binary uses a different subset
pub use observe::*;

/// API key of the test workspace (given to the emulator with `--api-key`).
pub const API_KEY: &str = "test-api-key";
/// Workspace of [`API_KEY`].
pub const WORKSPACE: &str = "7b6a3c1e-5d4f-4a2b-8c9d-0e1f2a3b4c5d";

/// Namespace of the operator's ServiceAccount and leader-election Lease (the
/// shared envtest applies `deploy/base/rbac.yaml` there; see
/// `common::shared_env`), and the ServiceAccount every operator a test starts
/// impersonates unless [`OperatorOptions::service_account`] names another.
pub use test_support::install::{OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT};

pub use test_support::{log_dir, log_file, log_path};

/// A client from the kubeconfig file `kubeconfig` (its current context), for
/// the current runtime: e.g. one of [`impersonating_kubeconfig`], or the
/// cluster-admin one in a `Drop` that needs its own runtime.
pub async fn client_from(kubeconfig: &Path) -> kube::Client {
    agent_operator::controlplane::client::install_crypto_provider();
    let file = kube::config::Kubeconfig::read_from(kubeconfig).expect("reading the kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(file, &Default::default())
        .await
        .expect("loading the kubeconfig");
    kube::Client::try_from(config).expect("building a client")
}

/// A loopback port for a child process to listen on
/// ([`test_support::envtest::child_port`]).
pub fn free_port() -> u16 {
    test_support::envtest::child_port()
}

/// The control plane emulator serving on a free loopback port, from the
/// test process itself: its own thread and tokio runtime (so it outlives
/// the test's runtime hiccups and never shares its threads), configured by
/// the flags of the `control-plane-emulator` binary
/// ([`control_plane_emulator::cli::Args`]), logging to
/// `target/test-logs/<test>-emulator.log`. Dropping it shuts the server
/// down. In-process rather than the binary: the binary belongs to another
/// crate of the workspace, and a nested `cargo build` of it would resolve
/// features apart from the test build and compile part of the dependency
/// tree twice.
pub struct EmulatorProcess {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// `http://127.0.0.1:<port>`
    pub base_url: String,
}

impl Drop for EmulatorProcess {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl EmulatorProcess {
    /// Starts the emulator with revision steps of `step_seconds` and
    /// asynchronous deletes of `delete_seconds`, and waits until it answers.
    pub async fn start(test: &str, step_seconds: f64, delete_seconds: f64) -> Self {
        Self::start_with(
            test,
            &[
                "--step-seconds",
                &step_seconds.to_string(),
                "--delete-seconds",
                &delete_seconds.to_string(),
            ],
        )
        .await
    }

    /// Starts the emulator with the test key and these extra flags (e.g.
    /// `--step-seconds 0.2`, `--scenario BUILD_FAILED:repo_ref=broken`), and
    /// waits until it listens. Panics on flags the binary would refuse.
    pub async fn start_with(test: &str, args: &[&str]) -> Self {
        use clap::Parser;
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let key = format!("{API_KEY}={WORKSPACE}");
        let argv = [
            "control-plane-emulator",
            "--listen",
            &listen,
            "--api-key",
            &key,
        ]
        .into_iter()
        .chain(args.iter().copied());
        let flags = control_plane_emulator::cli::Args::try_parse_from(argv)
            .unwrap_or_else(|e| panic!("emulator flags {args:?}: {e}"));
        let config = flags
            .config()
            .unwrap_or_else(|e| panic!("emulator flags {args:?}: {e:#}"));
        let log = std::sync::Mutex::new(log_file(test, "emulator"));
        leaks::register_log(&log_path(test, "emulator"));
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name(format!("emulator-{test}"))
            .spawn(move || {
                let logs = tracing::Dispatch::new(
                    tracing_subscriber::fmt()
                        .with_writer(log)
                        .with_ansi(false)
                        .with_env_filter(tracing_subscriber::EnvFilter::new("info"))
                        .finish(),
                );
                let on_start = logs.clone();
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    // Every thread of this runtime logs to the test's file:
                    // a thread default, kept for the thread's life.
                    .on_thread_start(move || {
                        std::mem::forget(tracing::dispatcher::set_default(&on_start));
                    })
                    .build()
                    .expect("building the emulator's runtime");
                let _logs = tracing::dispatcher::set_default(&logs);
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::bind(&flags.listen).await {
                        Ok(l) => l,
                        Err(e) => {
                            let _ = started_tx.send(Err(format!("binding {}: {e}", flags.listen)));
                            return;
                        }
                    };
                    let emu = match control_plane_emulator::spawn_on(listener, config).await {
                        Ok(emu) => emu,
                        Err(e) => {
                            let _ = started_tx.send(Err(format!("starting: {e}")));
                            return;
                        }
                    };
                    tracing::info!(addr = %emu.addr, "serving");
                    let _ = started_tx.send(Ok(emu.base_url()));
                    let _ = stopped.await;
                    tracing::info!("shutting down");
                    emu.shutdown().await;
                });
                // Hung requests (fault injection) must not hold the thread.
                runtime.shutdown_timeout(Duration::from_secs(1));
            })
            .expect("starting the emulator thread");
        let base_url = started_rx
            .await
            .expect("the emulator thread ended before it started")
            .unwrap_or_else(|e| panic!("the emulator did not start: {e}"));
        Self {
            stop: Some(stop),
            base_url,
        }
    }

    /// A control plane client of the test workspace.
    pub fn client(&self) -> ControlPlaneClient {
        ControlPlaneClient::new(ClientConfig::new(
            self.base_url.clone(),
            WORKSPACE,
            API_KEY.to_owned().into(),
        ))
        .expect("building a control plane client")
    }
}

/// Flags of the fault suite's operators: a revision polled from 0.3 s on
/// and a blocked resource re-checked every 30 s, instead of the shipped 2 s
/// and 60 s. The figures of docs/RELIABILITY.md, "Faults", were measured
/// with them and are asserted within 2 × of what it prints; every other
/// operator test runs at the shipped intervals unless it says why not.
pub const FAST_POLLING: [&str; 4] = [
    "--poll-interval-seconds",
    "0.3",
    "--blocked-interval-seconds",
    "30",
];

/// The `agent-operator run` binary watching one namespace of the shared
/// envtest API server, at the shipped intervals unless the test sets its
/// own.
pub struct OperatorProcess {
    child: Child,
    http_port: u16,
}

/// How to start an operator process with [`OperatorProcess::start_with`].
#[derive(Clone, Debug, Default)]
pub struct OperatorOptions<'a> {
    /// Log file name prefix: `target/test-logs/<log_name>-operator.log`.
    pub log_name: &'a str,
    /// Namespaces to watch (`--namespace` each); empty: all namespaces.
    pub namespaces: Vec<&'a str>,
    /// Extra command-line arguments, after the defaults.
    pub extra: Vec<&'a str>,
    /// Extra environment variables (e.g. `POD_NAME`).
    pub env: Vec<(&'a str, &'a str)>,
    /// The ServiceAccount (namespace, name) the operator acts as, through a
    /// kubeconfig that impersonates it; `None`: the shipped one,
    /// [`OPERATOR_NAMESPACE`]/[`OPERATOR_SERVICE_ACCOUNT`], so every
    /// operator test exercises the RBAC of `deploy/` (base and cluster-wide).
    pub service_account: Option<(&'a str, &'a str)>,
    /// A bearer token (a real ServiceAccount token from a TokenRequest) the
    /// operator authenticates with instead of impersonating
    /// `service_account`: see [`token_kubeconfig`]. `service_account` then
    /// only sets `POD_NAMESPACE`.
    pub token: Option<&'a str>,
    /// Another `agent-operator` binary to run instead of this tree's (the
    /// previous release's, to record a fixture from it); `None`: this
    /// tree's.
    pub binary: Option<&'a Path>,
}

/// Writes a copy of `kubeconfig` whose every user authenticates with the
/// bearer `token` alone (client certificate and key removed) next to it,
/// readable by its owner only, and returns its path.
pub fn token_kubeconfig(kubeconfig: &Path, token: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let text = std::fs::read_to_string(kubeconfig)
        .unwrap_or_else(|e| panic!("reading {}: {e}", kubeconfig.display()));
    let mut config = kube::config::Kubeconfig::from_yaml(&text).expect("a kubeconfig");
    for named in &mut config.auth_infos {
        named.auth_info = Some(kube::config::AuthInfo {
            token: Some(secrecy::SecretString::new(token.into())),
            ..Default::default()
        });
    }
    let path = kubeconfig.with_file_name(format!(
        "token-{}.kubeconfig",
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, yaml_serde::to_string(&config).expect("rendering"))
        .expect("writing the token kubeconfig");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        .expect("chmod 600 of the token kubeconfig");
    path
}

/// Writes a copy of `kubeconfig` that impersonates the ServiceAccount
/// `name` of `namespace` (kubeconfig `as:` and `as-groups:`) next to it, and
/// returns its path (one file per call: parallel tests never share one).
pub fn impersonating_kubeconfig(kubeconfig: &Path, namespace: &str, name: &str) -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let text = std::fs::read_to_string(kubeconfig)
        .unwrap_or_else(|e| panic!("reading {}: {e}", kubeconfig.display()));
    let who = test_support::envtest::Impersonation::service_account(namespace, name);
    let derived = test_support::envtest::impersonating_kubeconfig(&text, &who)
        .expect("deriving an impersonating kubeconfig");
    let path = kubeconfig.with_file_name(format!(
        "as-{namespace}-{name}-{}.kubeconfig",
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, derived).expect("writing the impersonating kubeconfig");
    path
}

impl OperatorProcess {
    /// Starts the operator on `namespace` with the given kubeconfig.
    pub fn start(test: &str, kubeconfig: &Path, namespace: &str, extra: &[&str]) -> Self {
        Self::start_with(
            kubeconfig,
            OperatorOptions {
                log_name: test,
                namespaces: vec![namespace],
                extra: extra.to_vec(),
                ..OperatorOptions::default()
            },
        )
    }

    /// Starts the operator with `options`, as the ServiceAccount of
    /// `options.service_account` (default: the shipped one) through a copy
    /// of the cluster-admin `kubeconfig` that impersonates it. It runs at
    /// the shipped intervals (`--poll-interval-seconds 2`,
    /// `--blocked-interval-seconds 60`, ...) unless `options.extra` sets
    /// them (e.g. [`FAST_POLLING`]), and allows requests to `127.0.0.1` only (`--allowed-hosts`, where the
    /// emulator and `langgraph dev` listen) unless `options.extra` sets
    /// `--allowed-hosts`, with `POD_NAMESPACE` set to the ServiceAccount's
    /// namespace (where its hash key Secret is). Unless
    /// `options.extra` sets `--metrics-addr`, its HTTP server listens on a
    /// free loopback port (see [`OperatorProcess::http_url`]). Its log (debug
    /// level for the operator's modules) is registered for the secret scan
    /// ([`leaks`]).
    pub fn start_with(kubeconfig: &Path, options: OperatorOptions<'_>) -> Self {
        let (sa_namespace, sa_name) = options
            .service_account
            .unwrap_or((OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT));
        let kubeconfig = match options.token {
            Some(token) => token_kubeconfig(kubeconfig, token),
            None => impersonating_kubeconfig(kubeconfig, sa_namespace, sa_name),
        };
        let log = log_file(options.log_name, "operator");
        leaks::register_log(&log_path(options.log_name, "operator"));
        let mut command = Command::new(
            options
                .binary
                .unwrap_or(Path::new(env!("CARGO_BIN_EXE_agent-operator"))),
        );
        command.arg("run");
        for ns in &options.namespaces {
            command.args(["--namespace", ns]);
        }
        // The emulator and `langgraph dev` listen on 127.0.0.1, which the
        // operator's default --allowed-hosts (LangSmith Cloud only) refuses:
        // allowed explicitly, unless the test sets its own list.
        if !options
            .extra
            .iter()
            .any(|a| a.starts_with("--allowed-hosts"))
        {
            command.args(["--allowed-hosts", "127.0.0.1"]);
        }
        let explicit = options
            .extra
            .iter()
            .position(|a| *a == "--metrics-addr" || *a == "--health-addr");
        let http_port = match explicit {
            Some(i) => options
                .extra
                .get(i + 1)
                .and_then(|a| a.rsplit(':').next())
                .and_then(|p| p.parse().ok())
                .expect("--metrics-addr HOST:PORT"),
            None => {
                let port = free_port();
                command.args(["--metrics-addr", &format!("127.0.0.1:{port}")]);
                port
            }
        };
        command
            .args(&options.extra)
            .env("KUBECONFIG", &kubeconfig)
            .env("RUST_LOG", "info,agent_operator=debug,kube=warn")
            // As the Deployment's downward API sets it: the operator's own
            // namespace (the ServiceAccount's), where its hash key Secret
            // lives (`deploy/base/rbac.yaml` grants it there).
            .env("POD_NAMESPACE", sa_namespace)
            // After the defaults, so a test may set its own `RUST_LOG`.
            .envs(options.env.iter().copied())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .kill_on_drop(true);
        let child = command.spawn().expect("starting agent-operator");
        Self { child, http_port }
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// `http://127.0.0.1:<port>` of the operator's /metrics, /livez, /readyz.
    pub fn http_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    /// GETs `path` of the operator's HTTP server: (status, body), or `None`
    /// while it does not answer.
    pub async fn get(&self, path: &str) -> Option<(u16, String)> {
        agent_operator::controlplane::client::install_crypto_provider();
        let res = reqwest::Client::new()
            .get(format!("{}{path}", self.http_url()))
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .ok()?;
        let status = res.status().as_u16();
        Some((status, res.text().await.ok()?))
    }

    /// Polls `path` until it answers `status`, or panics after `timeout`.
    pub async fn wait_for_status(&self, path: &str, status: u16, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let last = match self.get(path).await {
                Some((s, body)) if s == status => return body,
                other => other,
            };
            assert!(
                Instant::now() < deadline,
                "{path} did not answer {status} within {timeout:?}; last: {last:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The body of `/metrics` (panics unless it answers 200).
    pub async fn metrics(&self) -> String {
        match self.get("/metrics").await {
            Some((200, body)) => body,
            other => panic!("/metrics: {other:?}"),
        }
    }

    /// The exit status if the process has exited, without waiting; `None`
    /// while it runs.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().expect("polling agent-operator")
    }

    /// SIGKILLs the process and waits for it (a crash: nothing is released).
    pub async fn kill(&mut self) {
        self.child.kill().await.expect("killing agent-operator");
    }

    /// Sends SIGTERM and waits up to `timeout` for the exit status.
    pub async fn terminate(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let pid = self.child.id().expect("agent-operator is running");
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("running kill");
        assert!(sent.success(), "kill -TERM {pid}");
        self.wait_exit(timeout).await
    }

    /// Waits up to `timeout` for the process to exit by itself (panics
    /// otherwise) and returns its exit status.
    pub async fn wait_exit(&mut self, timeout: Duration) -> std::process::ExitStatus {
        tokio::time::timeout(timeout, self.child.wait())
            .await
            .expect("agent-operator did not exit in time")
            .expect("waiting for agent-operator")
    }
}

/// Sum of the samples of `name` (e.g. `agent_operator_reconciles_total`)
/// whose labels include every `key="value"` of `labels`, in OpenMetrics text;
/// `None` when no sample matches.
pub fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut found = None;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        let (label_text, value) = match rest.strip_prefix('{') {
            Some(r) => match r.split_once("} ") {
                Some((l, v)) => (l, v),
                None => continue,
            },
            None => match rest.strip_prefix(' ') {
                Some(v) => ("", v),
                None => continue,
            },
        };
        if labels
            .iter()
            .all(|(k, v)| label_text.split(',').any(|kv| kv == format!("{k}=\"{v}\"")))
        {
            let v: f64 = value.split(' ').next().unwrap_or("").parse().unwrap_or(0.0);
            found = Some(found.unwrap_or(0.0) + v);
        }
    }
    found
}

/// Polls `name` until `check` returns `Some`, or panics after `timeout` with
/// the last object seen.
pub async fn wait_for<T>(
    api: &Api<AgentDeployment>,
    name: &str,
    timeout: Duration,
    what: &str,
    mut check: impl FnMut(&AgentDeployment) -> Option<T>,
) -> T {
    let deadline = Instant::now() + timeout;
    let mut last = None;
    loop {
        if let Some(obj) = api
            .get_opt(name)
            .await
            .expect("reading the AgentDeployment")
        {
            if let Some(v) = check(&obj) {
                return v;
            }
            last = Some(obj);
        }
        if Instant::now() > deadline {
            panic!(
                "timed out after {timeout:?} waiting for {what}; last seen status: {:#?}",
                last.and_then(|o| o.status)
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Polls the object `name` of `api` (`None` while it does not exist) every
/// 250 ms until `check` returns `Some`, or panics after `timeout` with the
/// last read: the wait of the kinds whose tests also wait for an object to
/// be gone (AgentAssistant, AgentCron).
pub async fn wait_object<K, T>(
    api: &Api<K>,
    name: &str,
    timeout: Duration,
    what: &str,
    check: impl Fn(Option<&K>) -> Option<T>,
) -> T
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let deadline = Instant::now() + timeout;
    loop {
        let obj = api
            .get_opt(name)
            .await
            .unwrap_or_else(|e| panic!("reading the {} {name}: {e}", K::kind(&())));
        if let Some(v) = check(obj.as_ref()) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {obj:#?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The `Ready` condition as (status, reason, message), if present.
pub fn ready(obj: &AgentDeployment) -> Option<(String, String, String)> {
    let c = agent_operator::api::conditions::find(
        &obj.status.as_ref()?.conditions,
        agent_operator::api::conditions::READY,
    )?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// True when `Ready=True` describes the current generation.
pub fn is_ready_now(obj: &AgentDeployment) -> bool {
    let status = obj.status.as_ref();
    ready(obj).is_some_and(|(s, _, _)| s == "True")
        && status.and_then(|s| s.observed_generation) == obj.metadata.generation
}

/// Server-side applies a YAML/JSON manifest (one object) as field manager
/// `tests`.
pub async fn apply_json<K>(api: &Api<K>, name: &str, value: serde_json::Value) -> K
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams::apply("tests").force(),
        &Patch::Apply(&value),
    )
    .await
    .unwrap_or_else(|e| panic!("applying {name}: {e}"))
}

/// Creates the API key Secret and the AgentControlPlane `default` pointing at
/// the emulator in `namespace`, for the test workspace.
pub async fn install_control_plane(
    client: &kube::Client,
    namespace: &str,
    emulator: &EmulatorProcess,
) {
    install_control_plane_on(client, namespace, emulator, API_KEY, WORKSPACE, None).await;
}

/// [`install_control_plane`] for `workspace` with the key `key`, and
/// `spec.requestsPerSecond: rps` when given
/// ([`test_support::install::install_control_plane`]).
pub async fn install_control_plane_on(
    client: &kube::Client,
    namespace: &str,
    emulator: &EmulatorProcess,
    key: &str,
    workspace: &str,
    rps: Option<f64>,
) {
    test_support::install::install_control_plane(
        client,
        namespace,
        &test_support::install::ControlPlane {
            url: &emulator.base_url,
            workspace_id: workspace,
            api_key: key,
            requests_per_second: rps,
        },
    )
    .await;
}

/// The context of controllers a test runs in-process (the tier between the
/// write-sequence tests and the operator binary): a client of the shared
/// envtest acting as the operator's ServiceAccount (shipped RBAC), blocked
/// resources re-checked every 30 s, control plane calls timed out after
/// 5 s, and `127.0.0.1` allowed (the emulator listens on loopback, outside
/// the default list).
pub async fn in_process_context() -> std::sync::Arc<agent_operator::controller::Context> {
    let config = agent_operator::controller::OperatorConfig {
        blocked_interval: Duration::from_secs(30),
        request_timeout: Duration::from_secs(5),
        allowed_hosts: agent_operator::allowlist::HostAllowlist::parse(["127.0.0.1"])
            .expect("a valid allow-list"),
        ..Default::default()
    };
    let shared =
        agent_operator::controller::Shared::new(crate::common::operator_client().await, config);
    std::sync::Arc::new(agent_operator::controller::Context::of(
        std::sync::Arc::new(shared),
    ))
}

/// The secret scan of a test harness's `Drop` for `namespace` of the shared
/// envtest: it panics on a hit, unless the test is already failing, when
/// it only reports ([`leaks::scan_namespace_after_panic`]).
pub fn scan_namespace_on_drop(namespace: &str) {
    let kubeconfig = crate::common::kubeconfig_path();
    if std::thread::panicking() {
        leaks::scan_namespace_after_panic(kubeconfig, namespace);
    } else {
        leaks::check_namespace_blocking(kubeconfig, namespace);
    }
}

/// Path of a fixture under `crates/test-support/fixtures/`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(test_support::FIXTURES_DIR).join(name)
}

impl EmulatorProcess {
    /// `GET /_emulator/requests/log`: every request the emulator logged, oldest
    /// first. Panics if the emulator does not answer.
    pub async fn request_log(&self) -> RequestLog {
        fetch_request_log(&self.base_url)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// How many requests the emulator logged so far: a mark for
    /// [`Self::requests_since`].
    pub async fn request_mark(&self) -> usize {
        self.request_log().await.entries.len()
    }

    /// The requests the emulator logged after `mark` ([`Self::request_mark`]),
    /// oldest first.
    pub async fn requests_since(&self, mark: usize) -> Vec<budget::LoggedRequest> {
        self.request_log()
            .await
            .entries
            .into_iter()
            .skip(mark)
            .collect()
    }

    /// The violations of `budget` in the emulator's request log (see
    /// [`budget::budget_violations_at`]). Panics if the log cannot be read.
    pub async fn budget_violations(&self, budget: &Budget) -> Vec<String> {
        budget_violations_at(&self.base_url, budget)
            .await
            .unwrap_or_else(|e| panic!("request budget: {e}"))
    }

    /// Panics, listing the violations, when the emulator's request log
    /// exceeds `budget` (see [`Budget`]). For tests that drive an
    /// [`EmulatorProcess`] without a [`Harness`]; call it at the end.
    pub async fn assert_within_budget(&self, budget: &Budget) {
        let violations = self.budget_violations(budget).await;
        assert!(
            violations.is_empty(),
            "{}",
            budget_message(budget, &violations)
        );
    }
}
