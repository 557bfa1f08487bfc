//! `testenv`: a real kube-apiserver and etcd on loopback with the CRDs
//! installed (see [`test_support::envtest`]), until Ctrl-C, or around a
//! command (`testenv -- kubectl get crds`). `make demo` runs the demo in it.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, ExitStatus};

use anyhow::Context;
use clap::Parser;
use test_support::envtest::{TestEnv, TestEnvOptions};

/// Start a real kube-apiserver and etcd on 127.0.0.1 with the CRDs installed,
/// then run COMMAND against it (or wait for Ctrl-C) and stop everything.
#[derive(Debug, Parser)]
#[command(name = "testenv", version, about, long_about)]
struct TestenvArgs {
    /// Directory whose *.yaml CustomResourceDefinitions are installed.
    #[arg(long, value_name = "DIR", default_value = "crds")]
    crds: PathBuf,

    /// Where to write the kubeconfig (mode 0600; overwritten).
    #[arg(long, value_name = "PATH", default_value = ".cache/demo/kubeconfig")]
    kubeconfig_out: PathBuf,

    /// Directory whose *.yaml manifests are server-side applied (in file-name
    /// order, namespaced objects without a namespace into `default`) once
    /// the CRDs are installed, like `kubectl apply -f DIR/`; the demo
    /// applies examples/ this way, so it needs no kubectl before the
    /// resources are Ready.
    #[arg(long, value_name = "DIR")]
    apply: Option<PathBuf>,

    /// Seconds to wait for etcd and then kube-apiserver to become ready.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    ready_timeout: u64,

    /// Command to run with KUBECONFIG set and the envtest binaries (kubectl)
    /// first on PATH; testenv exits with its exit code.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

#[tokio::main]
async fn main() -> ExitCode {
    // Progress at info on stderr (stdout belongs to COMMAND), set up like
    // every binary of the workspace: ANSI colours only on a terminal without
    // NO_COLOR, so a log file stays plain text.
    agent_operator_telemetry::init(agent_operator_telemetry::LogFormat::Text, "info");
    match testenv(TestenvArgs::parse()).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("testenv: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn testenv(args: TestenvArgs) -> anyhow::Result<ExitCode> {
    let opts = TestEnvOptions {
        ready_timeout: std::time::Duration::from_secs(args.ready_timeout),
        ..TestEnvOptions::default()
    };
    let env = TestEnv::start(opts)
        .await
        .context("starting kube-apiserver and etcd")?;
    let crds = env
        .install_crds_from_dir(&args.crds)
        .await
        .with_context(|| format!("installing the CRDs of {}", args.crds.display()))?;
    let applied = match &args.apply {
        Some(dir) => apply_dir(&env, dir)
            .await
            .with_context(|| format!("applying the manifests of {}", dir.display()))?,
        None => Vec::new(),
    };
    env.write_kubeconfig(&args.kubeconfig_out)?;
    let kubeconfig = std::path::absolute(&args.kubeconfig_out)
        .with_context(|| format!("resolving {}", args.kubeconfig_out.display()))?;
    tracing::info!(
        server = env.server_url(),
        started_in = ?env.started_in(),
        ?crds,
        ?applied,
        "envtest is up"
    );

    let code = if args.command.is_empty() {
        println!("export KUBECONFIG={}", kubeconfig.display());
        eprintln!(
            "kube-apiserver {} is up (logs in {}); press Ctrl-C to stop",
            env.server_url(),
            env.dir().display()
        );
        shutdown_signal().await?;
        eprintln!("stopping");
        ExitCode::SUCCESS
    } else {
        // stdout belongs to COMMAND.
        eprintln!("KUBECONFIG={}", kubeconfig.display());
        run_command(&args.command, &kubeconfig, env.assets_dir()).await?
    };
    env.stop();
    Ok(code)
}

/// Server-side applies every `*.yaml` file of `dir`, in file-name order
/// ([`test_support::envtest::apply_manifest_file`], namespace `default`).
/// Returns `Kind namespace/name` of each applied object. Errors: `dir`
/// cannot be read, or a file's documents cannot be parsed or applied.
async fn apply_dir(env: &TestEnv, dir: &Path) -> anyhow::Result<Vec<String>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    files.retain(|p| p.is_file() && p.extension().is_some_and(|e| e == "yaml"));
    files.sort();
    let client = env.client().await?;
    let mut applied = Vec::new();
    for file in &files {
        applied.extend(test_support::envtest::apply_manifest_file(&client, file, "default").await?);
    }
    Ok(applied)
}

/// Runs `command` with `KUBECONFIG` and `PATH` set; returns its exit code, or
/// 128 + signal number. A Ctrl-C / SIGTERM to testenv stops it with SIGTERM.
///
/// It runs under `setpriv --pdeathsig TERM`, so it also stops if testenv is killed.
async fn run_command(
    command: &[OsString],
    kubeconfig: &Path,
    assets_dir: &Path,
) -> anyhow::Result<ExitCode> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let path = std::env::join_paths(
        std::iter::once(assets_dir.to_owned()).chain(std::env::split_paths(&path)),
    )
    .context("building PATH")?;
    let mut child = tokio::process::Command::new("setpriv")
        .args(["--pdeathsig", "TERM", "--"])
        .args(command)
        .env("KUBECONFIG", kubeconfig)
        .env("PATH", path)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("running {:?} (through setpriv)", command[0]))?;
    let status = tokio::select! {
        status = child.wait() => status?,
        signal = shutdown_signal() => {
            signal?;
            eprintln!("stopping {:?}", command[0]);
            if let Some(pid) = child.id() {
                // SIGTERM first, so the command can clean up.
                let _ = std::process::Command::new("kill").arg(pid.to_string()).status();
            }
            match tokio::time::timeout(std::time::Duration::from_secs(10), child.wait()).await {
                Ok(status) => status?,
                Err(_) => {
                    child.kill().await?;
                    child.wait().await?
                }
            }
        }
    };
    Ok(exit_code(status))
}

/// The exit code testenv passes on for `status`: its code, or 128 + signal.
fn exit_code(status: ExitStatus) -> ExitCode {
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// Completes on Ctrl-C (SIGINT) or SIGTERM.
async fn shutdown_signal() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("waiting for Ctrl-C")?,
        _ = term.recv() => {}
    }
    Ok(())
}
