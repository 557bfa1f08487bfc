//! The child processes of the fleet benchmark (the release `control-plane-emulator`
//! and `agent-operator` binaries) and what the kernel says about them.
//!
//! Every child is killed when its handle drops (`kill_on_drop`); its stdout
//! and stderr go to `target/bench-logs/<run>-<binary>.log`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

/// API key of the benchmark workspace (given to the emulator with `--api-key`).
pub const API_KEY: &str = "bench-api-key";
/// Workspace of [`API_KEY`].
pub const WORKSPACE: &str = "5e1b7c2a-9d3f-4a6b-8c1d-2f3e4a5b6c7d";

/// `<repository root>/target/bench-logs`, created if missing.
pub fn log_dir() -> PathBuf {
    let dir = test_support::repo_root().join("target/bench-logs");
    std::fs::create_dir_all(&dir).expect("creating target/bench-logs");
    dir
}

fn log_file(run: &str, what: &str) -> (std::fs::File, PathBuf) {
    let path = log_dir().join(format!("{run}-{what}.log"));
    let file = std::fs::File::create(&path).expect("creating a log file");
    (file, path)
}

/// A loopback port for a child process to listen on
/// ([`test_support::envtest::child_port`]).
pub fn free_port() -> u16 {
    test_support::envtest::child_port()
}

/// Where the binaries are: `--bin-dir`, else the ones cargo built for this
/// bench (`target/release` under `cargo bench`; the emulator, from another
/// crate of the workspace, through [`test_support::binaries::emulator`]).
pub fn bin_path(bin_dir: Option<&Path>, name: &str) -> PathBuf {
    if let Some(dir) = bin_dir {
        return dir.join(name);
    }
    match name {
        "agent-operator" => PathBuf::from(env!("CARGO_BIN_EXE_agent-operator")),
        "control-plane-emulator" => test_support::binaries::emulator().to_owned(),
        other => panic!("unknown binary {other}"),
    }
}

/// Waits until something listens on `port` of loopback, or panics after 30 s.
async fn wait_listening(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "{what} did not listen on {port}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The `control-plane-emulator` binary on a free loopback port.
pub struct Emulator {
    _child: Child,
    /// `http://127.0.0.1:<port>`
    pub base_url: String,
    http: reqwest::Client,
}

impl Emulator {
    /// Starts the emulator with the benchmark key and `args`, logging to
    /// `target/bench-logs/<run>-emulator.log`, and waits until it listens.
    pub async fn start(binary: &Path, run: &str, args: &[String]) -> Self {
        Self::start_with_keys(
            binary,
            run,
            &[(API_KEY.to_owned(), WORKSPACE.to_owned())],
            args,
        )
        .await
    }

    /// [`Emulator::start`] with the API keys `keys`, (key, workspace id)
    /// pairs, instead of the benchmark key.
    pub async fn start_with_keys(
        binary: &Path,
        run: &str,
        keys: &[(String, String)],
        args: &[String],
    ) -> Self {
        let port = free_port();
        let (log, _) = log_file(run, "emulator");
        let mut command = Command::new(binary);
        command.args(["--listen", &format!("127.0.0.1:{port}")]);
        for (key, workspace) in keys {
            command.args(["--api-key", &format!("{key}={workspace}")]);
        }
        let child = command
            .args(args)
            .env("RUST_LOG", "warn")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()));
        wait_listening(port, "the emulator").await;
        Self {
            _child: child,
            base_url: format!("http://127.0.0.1:{port}"),
            http: http_client(),
        }
    }

    /// The body of `GET /_emulator/requests`: `{"total": N, "routes":
    /// {"GET /v2/...": {"200": n}}, ...}` (counts since start; admin routes
    /// are not counted).
    pub async fn requests(&self) -> serde_json::Value {
        self.http
            .get(format!("{}/_emulator/requests", self.base_url))
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .expect("GET /_emulator/requests")
            .json()
            .await
            .expect("decoding /_emulator/requests")
    }

    /// The body of `GET /_emulator/requests/log`: the last requests, one
    /// entry each (route, deployment id, workspace, status, arrival in ms).
    pub async fn request_log(&self) -> serde_json::Value {
        self.http
            .get(format!("{}/_emulator/requests/log", self.base_url))
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .expect("GET /_emulator/requests/log")
            .json()
            .await
            .expect("decoding /_emulator/requests/log")
    }

    /// Sets the emulator's `throttled_workspaces` fault (every request of
    /// those workspaces answered 429 with `Retry-After`), keeping its other
    /// faults: `GET`, then `PUT /_emulator/faults`.
    pub async fn throttle(&self, workspaces: &[(&str, u64)]) {
        let rules = workspaces
            .iter()
            .map(|(ws, secs)| serde_json::json!({"workspace": ws, "retry_after_seconds": secs}))
            .collect();
        self.put_throttles(rules).await;
    }

    /// Throttles `workspace` like [`Self::throttle`], after its next
    /// `after` requests were answered as usual (a service that answers
    /// once, then throttles: `after` = 1).
    pub async fn throttle_after(&self, workspace: &str, retry_after: u64, after: u64) {
        self.put_throttles(serde_json::json!([{"workspace": workspace,
            "retry_after_seconds": retry_after, "after_requests": after}]))
            .await;
    }

    async fn put_throttles(&self, rules: serde_json::Value) {
        let url = format!("{}/_emulator/faults", self.base_url);
        let mut faults: serde_json::Value = self
            .http
            .get(&url)
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .expect("GET /_emulator/faults")
            .json()
            .await
            .expect("decoding /_emulator/faults");
        faults["throttled_workspaces"] = rules;
        self.http
            .put(&url)
            .json(&faults)
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .expect("PUT /_emulator/faults");
    }
}

/// A plain-HTTP client for the admin and health routes.
pub fn http_client() -> reqwest::Client {
    agent_operator::controlplane::client::install_crypto_provider();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("building an HTTP client")
}

/// The `agent-operator run` binary (one namespace, or cluster-wide).
pub struct Operator {
    child: Child,
    /// `http://127.0.0.1:<port>` of /metrics, /livez and /readyz.
    pub http_url: String,
    /// Its log file.
    pub log: PathBuf,
    http: reqwest::Client,
}

impl Operator {
    /// Starts `agent-operator run --namespace <namespace>` with the kubeconfig
    /// `kubeconfig`, its HTTP server on a free port, `--allowed-hosts
    /// 127.0.0.1`, `args` after that, and
    /// `RUST_LOG=info,kube=warn`; logs to `target/bench-logs/<run>-operator.log`.
    pub fn start(
        binary: &Path,
        run: &str,
        kubeconfig: &Path,
        namespace: &str,
        args: &[String],
    ) -> Self {
        Self::start_with(binary, run, kubeconfig, Some(namespace), args, &[])
    }

    /// [`Operator::start`] watching `namespace`, or the whole cluster when
    /// `None`, with the extra environment variables `env` (which may
    /// replace `RUST_LOG`).
    pub fn start_with(
        binary: &Path,
        run: &str,
        kubeconfig: &Path,
        namespace: Option<&str>,
        args: &[String],
        env: &[(&str, &str)],
    ) -> Self {
        let port = free_port();
        let (log_handle, log) = log_file(run, "operator");
        let mut command = Command::new(binary);
        command.arg("run");
        if let Some(namespace) = namespace {
            command.args(["--namespace", namespace]);
        }
        command.env("RUST_LOG", "info,kube=warn");
        command.envs(env.iter().copied());
        let child = command
            .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
            // The emulator listens on 127.0.0.1, outside the default
            // --allowed-hosts (LangSmith Cloud only).
            .args(["--allowed-hosts", "127.0.0.1"])
            .args(args)
            .env_remove("KUBECONFIG")
            .env("KUBECONFIG", kubeconfig)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(log_handle.try_clone().expect("log file"))
            .stderr(log_handle)
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()));
        Self {
            child,
            http_url: format!("http://127.0.0.1:{port}"),
            log,
            http: http_client(),
        }
    }

    /// The process id (panics once the process was reaped).
    pub fn pid(&self) -> u32 {
        self.child.id().expect("agent-operator is running")
    }

    /// Panics, with the last lines of its log, once the process has exited:
    /// a gate must not wait out its timeout for an operator that is gone
    /// (e.g. one refused its hash key Secret by RBAC).
    pub fn assert_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = lines[lines.len().saturating_sub(5)..].join("\n");
            panic!(
                "agent-operator exited with {status}; see {}; last lines:\n{tail}",
                self.log.display()
            );
        }
    }

    /// Polls `/readyz` every 50 ms until it answers 200; the time it took from
    /// `since`. Panics after `timeout` or when the process exits.
    pub async fn wait_ready(&mut self, since: Instant, timeout: Duration) -> Duration {
        loop {
            if let Ok(r) = self
                .http
                .get(format!("{}/readyz", self.http_url))
                .send()
                .await
                && r.status().as_u16() == 200
            {
                return since.elapsed();
            }
            self.assert_running();
            assert!(
                since.elapsed() < timeout,
                "/readyz did not answer 200 within {timeout:?}; see {}",
                self.log.display()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGKILLs the process and waits for it (a crash: nothing is released).
    pub async fn kill(&mut self) {
        self.child.kill().await.expect("killing agent-operator");
    }
}

/// What `/proc/<pid>` says about a process at one instant.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcSample {
    /// Peak resident set size (`VmHWM`) since start or since the last
    /// [`reset_peak_rss`], in MiB.
    pub peak_rss_mib: f64,
    /// Resident set size (`VmRSS`), in MiB.
    pub rss_mib: f64,
    /// User plus system CPU time since start (`utime + stime` of
    /// `/proc/<pid>/stat`), in seconds.
    pub cpu_seconds: f64,
}

/// Reads `/proc/<pid>/status` and `/proc/<pid>/stat`; `None` when the
/// process is gone. `clk_tck` is `getconf CLK_TCK` (the unit of utime/stime).
pub fn sample(pid: u32, clk_tck: f64) -> Option<ProcSample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name in parentheses start at field 3 (state);
    // utime and stime are fields 14 and 15 (proc(5)).
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok());
    let cpu = (ticks(11)? + ticks(12)?) / clk_tck;
    Some(ProcSample {
        peak_rss_mib: kib("VmHWM:") / 1024.0,
        rss_mib: kib("VmRSS:") / 1024.0,
        cpu_seconds: cpu,
    })
}

/// Resets the peak RSS (`VmHWM`) of `pid` to its current RSS by writing `5`
/// to `/proc/<pid>/clear_refs` (proc(5)); false when the kernel refuses.
pub fn reset_peak_rss(pid: u32) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

/// Clock ticks per second of `/proc/<pid>/stat` times (`getconf CLK_TCK`,
/// 100 when that fails).
pub fn clk_tck() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// The 1-minute load average of the machine (`/proc/loadavg`).
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}
