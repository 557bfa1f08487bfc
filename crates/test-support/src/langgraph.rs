//! A real agent server for the tests: `langgraph dev` (from the virtualenv
//! that `hack/agent-server/install.sh`, run by `make setup`, installs in
//! `.cache/langgraph-venv`) serving the echo graph of
//! `crates/test-support/fixtures/echo-agent` (a fresh copy in `target/agent-servers/<test>`)
//! on a free loopback port.
//!
//! One server per test binary ([`shared`]): it takes seconds to start. It is
//! started under `setpriv --pdeathsig KILL` from a thread that lives as long
//! as the test binary (Linux sends PDEATHSIG when the forking *thread* ends),
//! so it dies with the test binary even on SIGKILL; a static is never
//! dropped, so `kill_on_drop` alone would leak it. Its output goes to
//! `target/test-logs/<test>-langgraph.log`.
//!
//! Source: docs/control-plane-api.md "Agent server" (how a real agent server runs locally).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

pub use crate::prerequisites::langgraph_bin;

/// How long `langgraph dev` may take to answer `GET /ok`.
pub const START_TIMEOUT: Duration = Duration::from_secs(90);

/// A running `langgraph dev`.
pub struct LanggraphServer {
    /// `http://127.0.0.1:<port>`
    pub url: String,
    /// Its log file.
    pub log: PathBuf,
    _child: Mutex<Child>,
}

/// The echo graph's directory.
pub fn fixture_dir() -> PathBuf {
    Path::new(crate::FIXTURES_DIR).join("echo-agent")
}

/// A fresh copy of the fixture in `target/agent-servers/<test>`: `langgraph
/// dev` keeps its "in-memory" state in `.langgraph_api/` of its working
/// directory across restarts, so each start gets an empty one (and the
/// source tree stays clean).
fn fresh_copy(test: &str) -> PathBuf {
    let dir = crate::repo_root().join("target/agent-servers").join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating the agent server directory");
    for file in ["langgraph.json", "agent.py"] {
        std::fs::copy(fixture_dir().join(file), dir.join(file)).expect("copying the fixture");
    }
    dir
}

type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Forks `command` from a thread that lives as long as the process.
fn spawn_from_long_lived_thread(command: Command) -> std::io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("langgraph-spawner".to_owned())
            .spawn(move || {
                for (mut command, reply) in rx {
                    let _ = reply.send(command.spawn());
                }
            })
            .expect("starting the spawner thread");
        Mutex::new(tx)
    });
    let (reply_tx, reply_rx) = mpsc::channel();
    spawner
        .lock()
        .unwrap()
        .send((command, reply_tx))
        .expect("the spawner thread is gone");
    reply_rx
        .recv()
        .expect("the spawner thread dropped the request")
}

/// Starts `langgraph dev` for `test` and waits for `GET /ok`. Panics with a
/// message to run `make setup` when the virtualenv is missing (tests skip
/// before, with `skip_without!(AgentServer)`; see
/// [`crate::prerequisites`]), and with the log's tail when the server does
/// not come up.
pub fn start(test: &str) -> LanggraphServer {
    start_with(test, &[])
}

/// [`start`] with environment variables `env` set for the server (the
/// echo graph reads `ECHO_AGENT_RUN_LOG` and `ECHO_AGENT_BREAKS`, see its
/// docstring); `test` names its directory and log, one per server.
pub fn start_with(test: &str, env: &[(&str, &str)]) -> LanggraphServer {
    use crate::prerequisites::{Prerequisite, available};
    assert!(
        available(Prerequisite::AgentServer),
        "this test needs the real agent server but does not start with \
         test_support::skip_without!(AgentServer)"
    );
    let bin = langgraph_bin();
    let port = crate::envtest::child_port();
    let log = crate::log_path(test, "langgraph");
    let out = crate::log_file(test, "langgraph");
    let mut command = Command::new("setpriv");
    command
        .args(["--pdeathsig", "KILL", "--"])
        .arg(&bin)
        .args(["dev", "--no-browser", "--no-reload", "--host", "127.0.0.1"])
        .args(["--port", &port.to_string()])
        .current_dir(fresh_copy(test))
        // No telemetry, no tracing to LangSmith, no network.
        .env("LANGGRAPH_CLI_NO_ANALYTICS", "1")
        .env("LANGSMITH_TRACING", "false")
        .env("LANGSMITH_TRACING_V2", "false")
        .env("LANGCHAIN_TRACING_V2", "false")
        .env_remove("LANGSMITH_API_KEY")
        .env_remove("LANGCHAIN_API_KEY")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("log file"))
        .stderr(out);
    let mut child = spawn_from_long_lived_thread(command).expect("starting langgraph dev");
    let url = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + START_TIMEOUT;
    let ok_url = format!("{url}/ok");
    loop {
        if let Some(status) = child.try_wait().expect("polling langgraph dev") {
            panic!(
                "langgraph dev exited ({status}) before answering; log {}:\n{}",
                log.display(),
                tail(&log)
            );
        }
        if http_ok(&ok_url) {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "langgraph dev did not answer GET /ok within {START_TIMEOUT:?}; log {}:\n{}",
                log.display(),
                tail(&log)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    LanggraphServer {
        url,
        log,
        _child: Mutex::new(child),
    }
}

/// The server shared by every test of this binary (started on first use).
pub fn shared(test: &str) -> &'static LanggraphServer {
    static SHARED: OnceLock<LanggraphServer> = OnceLock::new();
    SHARED.get_or_init(|| start(test))
}

/// A blocking `GET` that is true on a 200 with `"ok":true` (plain TCP, so
/// that it works outside any runtime).
fn http_ok(url: &str) -> bool {
    use std::io::{Read, Write};
    let rest = url.trim_start_matches("http://");
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let Ok(mut s) = std::net::TcpStream::connect(host) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if write!(
        s,
        "GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .is_err()
    {
        return false;
    }
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.1 200") && answer.contains("\"ok\":true")
}

fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut start = text.len().saturating_sub(4000);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_owned()
}
