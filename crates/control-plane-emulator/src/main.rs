//! `control-plane-emulator`: serves the emulated control plane API (and a
//! minimal agent server per deployment) until SIGINT/SIGTERM.
//!
//! Thin main: parses the flags of [`control_plane_emulator::cli`], starts
//! logging, and runs [`control_plane_emulator`] until a signal.

use anyhow::Context;
use clap::Parser;
use control_plane_emulator::cli::{Args, banner};
use control_plane_emulator::telemetry::{self, LogFormat};
use control_plane_emulator::{self as emulator, SHUTDOWN_GRACE};

fn init_logging(format: LogFormat) {
    telemetry::init(format, "info");
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    init_logging(args.log_format);
    let config = args.config()?;
    let keys = config.api_keys.clone();
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    let emu = emulator::spawn_on(listener, config).await?;
    println!("{}", banner(&emu.base_url(), &keys));
    tracing::info!(addr = %emu.addr, public_url = emu.state().public_url(), "serving");

    let state = emu.state().clone();
    let mut server = tokio::spawn(emu.wait());
    tokio::select! {
        res = &mut server => {
            res.context("server task")?.context("server")?;
            anyhow::bail!("the server stopped unexpectedly");
        }
        _ = telemetry::shutdown_signal() => {}
    }
    tracing::info!("shutting down");
    state.signal_shutdown();
    match tokio::time::timeout(SHUTDOWN_GRACE, server).await {
        Ok(res) => res.context("server task")?.context("server")?,
        Err(_) => tracing::warn!("open requests did not finish in time; exiting"),
    }
    tracing::info!("stopped");
    Ok(())
}
