//! `agent-operator`: the Kubernetes operator (`run`) and CRD generation (`crds`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agent_operator::controller::runner::{self, Scope};
use agent_operator::controller::{Context, OperatorConfig};
use agent_operator::telemetry::{self, LogFormat};
use clap::{Parser, Subcommand};

/// Kubernetes operator for AI agent server deployments (agentserver.dev).
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the operator against the cluster of the current kubeconfig (or the
    /// in-cluster service account).
    Run(RunArgs),
    /// Print the CustomResourceDefinitions as YAML, or write one file per CRD.
    Crds {
        /// Directory to write `<crd name>.yaml` files into; stdout when unset.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// Watch only this namespace (default: all namespaces).
    #[arg(long, env = "WATCH_NAMESPACE")]
    namespace: Option<String>,
    /// Seconds between polls of a revision in progress.
    #[arg(long, env = "POLL_INTERVAL_SECONDS", default_value_t = 2.0)]
    poll_interval_seconds: f64,
    /// Seconds between drift checks of a steady resource (jittered ±10 %).
    #[arg(long, env = "RESYNC_INTERVAL_SECONDS", default_value_t = 300.0)]
    resync_interval_seconds: f64,
    /// Seconds before re-checking a resource blocked on a missing Secret or
    /// AgentControlPlane (watches usually wake it sooner).
    #[arg(long, env = "BLOCKED_INTERVAL_SECONDS", default_value_t = 60.0)]
    blocked_interval_seconds: f64,
    /// Timeout of one control plane request, in seconds.
    #[arg(long, env = "REQUEST_TIMEOUT_SECONDS", default_value_t = 30.0)]
    request_timeout_seconds: f64,
    /// Maximum number of reconciles running at once.
    #[arg(long, env = "RECONCILE_CONCURRENCY", default_value_t = 8)]
    concurrency: u16,
    /// Log format.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

fn seconds(s: f64, flag: &str) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(s).map_err(|e| anyhow::anyhow!("--{flag}: {e}"))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Crds { out } => {
            let files = agent_operator::api::crd_files()?;
            match out {
                Some(dir) => {
                    std::fs::create_dir_all(&dir)?;
                    for (name, yaml) in files {
                        std::fs::write(dir.join(&name), yaml)?;
                        eprintln!("wrote {}", dir.join(&name).display());
                    }
                }
                None => {
                    for (_, yaml) in files {
                        println!("---\n{yaml}");
                    }
                }
            }
            Ok(())
        }
        Command::Run(args) => run(args).await,
    }
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    telemetry::init(args.log_format, "info,kube=warn");
    agent_operator::controlplane::client::install_crypto_provider();
    let config = OperatorConfig {
        poll_interval: seconds(args.poll_interval_seconds, "poll-interval-seconds")?,
        resync_interval: seconds(args.resync_interval_seconds, "resync-interval-seconds")?,
        blocked_interval: seconds(args.blocked_interval_seconds, "blocked-interval-seconds")?,
        request_timeout: seconds(args.request_timeout_seconds, "request-timeout-seconds")?,
        ..OperatorConfig::default()
    };
    let client = kube::Client::try_default().await?;
    let scope = match args.namespace {
        Some(ns) => Scope::Namespace(ns),
        None => Scope::AllNamespaces,
    };
    tracing::info!(?scope, ?config, "agent-operator starting");
    let ctx = Arc::new(Context::new(client, config));
    runner::run(ctx, scope, args.concurrency, shutdown_signal()).await;
    tracing::info!("agent-operator stopped");
    Ok(())
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => futures::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = futures::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
