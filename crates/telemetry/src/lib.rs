//! The logging setup and shutdown trigger of every binary of the workspace
//! (agent-operator, agentctl, control-plane-emulator): `tracing` with an
//! `EnvFilter` (`RUST_LOG`), text or JSON on standard error, and
//! SIGINT/SIGTERM. `agent_operator::telemetry` re-exports it.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use tracing_subscriber::EnvFilter;

/// Log output format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// True when log lines to standard error may carry ANSI colour codes: it is
/// a terminal and `NO_COLOR` (<https://no-color.org>) is unset or empty. A
/// file or a pipe (a container runtime, a CI log, a test log) gets plain text.
pub fn colour_on_stderr() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Installs the global subscriber, writing to standard error: text (ANSI
/// colours only on a terminal, see [`colour_on_stderr`]) or one JSON object
/// per line. `default_filter` applies when `RUST_LOG` is unset. Calling it
/// twice is harmless (the second call does nothing).
pub fn init(format: LogFormat, default_filter: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour_on_stderr())
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM: the one graceful-shutdown trigger
/// of every binary.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
