//! `agentctl`: the developer command line of agent-operator.
//!
//! `agentctl testenv [--crds DIR] [--kubeconfig-out PATH] [-- COMMAND ARGS...]`
//! starts a real kube-apiserver + etcd on loopback (see
//! `agent_operator::envtest`), installs the CRDs and writes a kubeconfig; then
//! runs COMMAND against it, or waits for Ctrl-C / SIGTERM.
//!
//! `agentctl integrations list` and `agentctl integrations repos NAME|ID`
//! print the GitHub integrations of a workspace and the repositories one can
//! read (`GET /v1/integrations/github/install` and
//! `GET /v1/integrations/github/{id}/repos`; facts "Integrations (v1)", seen
//! only in the official clients), as a table or JSON. The control plane is
//! `--url` or `--region` (`AGENT_CONTROL_PLANE_URL`,
//! `AGENT_CONTROL_PLANE_REGION`), the workspace `--workspace-id`
//! (`AGENT_WORKSPACE_ID`), the key `--api-key` or, better,
//! `AGENT_API_KEY` (never printed).
//!
//! `agentctl assistants search --url URL [--graph-id G] [--name N]
//! [--output table|json]` lists every matching assistant of an agent server
//! (`POST /assistants/search`, following `X-Pagination-Next`), and
//! `agentctl runs stream --url URL --assistant ID --input JSON
//! [--stream-mode M]...` starts a stateless run (`POST /runs/stream`) and
//! prints each event as it arrives, one line each: `event: data-json` (facts
//! "Agent server"). The agent server is `--url` (`AGENT_SERVER_URL`), its key
//! `--api-key` or `AGENT_SERVER_API_KEY` (optional: `langgraph dev` needs
//! none; never printed).

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, ExitStatus};

use agent_operator::envtest::{TestEnv, TestEnvOptions};
use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use tracing_subscriber::EnvFilter;

/// Developer command line of agent-operator.
#[derive(Debug, Parser)]
#[command(name = "agentctl", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start a real kube-apiserver and etcd on 127.0.0.1 with the CRDs installed,
    /// then run COMMAND against it (or wait for Ctrl-C) and stop everything.
    Testenv(TestenvArgs),
    /// GitHub integrations of a workspace and their repositories.
    Integrations(IntegrationsArgs),
    /// Assistants of an agent server.
    Assistants(AssistantsArgs),
    /// Runs on an agent server.
    Runs(RunsArgs),
}

/// Where an agent server is and its key. `Debug` never shows the key.
#[derive(Args)]
struct ServerArgs {
    /// Base URL of the agent server (a deployment URL, or e.g.
    /// http://127.0.0.1:2024 for `langgraph dev`).
    #[arg(long, env = "AGENT_SERVER_URL")]
    url: String,

    /// API key sent as X-Api-Key (cloud deployments need one of the owning
    /// organization; prefer the environment variable). Never printed.
    #[arg(long, env = "AGENT_SERVER_API_KEY", hide_env_values = true)]
    api_key: Option<String>,

    /// Seconds to wait for an answer (connect: at most 10).
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    timeout: u64,
}

impl std::fmt::Debug for ServerArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerArgs")
            .field("url", &self.url)
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .field("timeout", &self.timeout)
            .finish()
    }
}

#[derive(Debug, Args)]
struct AssistantsArgs {
    #[command(subcommand)]
    command: AssistantsCommand,
}

#[derive(Debug, Subcommand)]
enum AssistantsCommand {
    /// List every assistant matching the filters (all pages).
    Search {
        #[command(flatten)]
        server: ServerArgs,
        /// Only assistants of this graph.
        #[arg(long)]
        graph_id: Option<String>,
        /// Only assistants with this name.
        #[arg(long)]
        name: Option<String>,
        /// Page size of each request.
        #[arg(long, default_value_t = 100)]
        page_size: u32,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

#[derive(Debug, Args)]
struct RunsArgs {
    #[command(subcommand)]
    command: RunsCommand,
}

#[derive(Debug, Subcommand)]
enum RunsCommand {
    /// Start a stateless run and print each event as it arrives
    /// (`event: data-json`, one line each). Exits 1 after an `error` event.
    Stream {
        #[command(flatten)]
        server: ServerArgs,
        /// Assistant id (uuid) or graph name.
        #[arg(long)]
        assistant: String,
        /// The run input, as JSON.
        #[arg(long, default_value = "{}")]
        input: String,
        /// Stream mode(s): repeat the flag or give a comma list (values,
        /// updates, messages, messages-tuple, events, debug, custom); the
        /// server's default is values.
        #[arg(long, value_delimiter = ',')]
        stream_mode: Vec<String>,
        /// Seconds the stream may stay silent (no event, no heartbeat).
        #[arg(long, value_name = "SECONDS", default_value_t = 120)]
        idle_timeout: u64,
    },
}

#[derive(Debug, Args)]
struct IntegrationsArgs {
    #[command(flatten)]
    plane: PlaneArgs,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Output::Table, global = true)]
    output: Output,

    #[command(subcommand)]
    command: IntegrationsCommand,
}

#[derive(Debug, Subcommand)]
enum IntegrationsCommand {
    /// List the workspace's GitHub integrations (id, installation id, name).
    List,
    /// List the repositories of one integration, given by name or id.
    Repos {
        /// Integration name (account or installation; case ignored) or id.
        integration: String,
    },
}

/// Where the control plane is and how to authenticate. `Debug` never shows
/// the key.
#[derive(Args)]
struct PlaneArgs {
    /// Base URL of the control plane (a self-hosted one ends in /api-host).
    #[arg(
        long,
        env = "AGENT_CONTROL_PLANE_URL",
        conflicts_with = "region",
        global = true
    )]
    url: Option<String>,

    /// Cloud region (`us` → https://api.host.langchain.com, `r` →
    /// https://r.api.host.langchain.com); default `us` without --url.
    #[arg(long, env = "AGENT_CONTROL_PLANE_REGION", global = true)]
    region: Option<String>,

    /// Workspace id (sent as X-Tenant-Id).
    #[arg(long, env = "AGENT_WORKSPACE_ID", global = true)]
    workspace_id: Option<String>,

    /// API key (sent as X-Api-Key; prefer the environment variable: a flag
    /// is visible to other users of the machine). Never printed.
    #[arg(long, env = "AGENT_API_KEY", hide_env_values = true, global = true)]
    api_key: Option<String>,
}

impl std::fmt::Debug for PlaneArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlaneArgs")
            .field("url", &self.url)
            .field("region", &self.region)
            .field("workspace_id", &self.workspace_id)
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .finish()
    }
}

/// Output format of the integrations and assistants commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Output {
    /// Aligned columns.
    Table,
    /// The fields agentctl reads (id, installation_id, name; url,
    /// default_branch) as pretty-printed JSON.
    Json,
}

#[derive(Debug, Args)]
struct TestenvArgs {
    /// Directory whose *.yaml CustomResourceDefinitions are installed.
    #[arg(long, value_name = "DIR", default_value = "crds")]
    crds: PathBuf,

    /// Where to write the kubeconfig (mode 0600; overwritten).
    #[arg(long, value_name = "PATH", default_value = ".cache/demo/kubeconfig")]
    kubeconfig_out: PathBuf,

    /// Seconds to wait for etcd and then kube-apiserver to become ready.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    ready_timeout: u64,

    /// Command to run with KUBECONFIG set and the envtest binaries (kubectl)
    /// first on PATH; agentctl exits with its exit code.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Testenv(args) => testenv(args).await,
        Command::Integrations(args) => integrations(args).await,
        Command::Assistants(args) => assistants(args).await,
        Command::Runs(args) => runs(args).await,
    };
    result.unwrap_or_else(|e| {
        eprintln!("agentctl: error: {e:#}");
        ExitCode::FAILURE
    })
}

/// A control plane client from `--url`/`--region`, `--workspace-id` and
/// `--api-key`. Errors: a missing workspace or key, or a bad URL (the key is
/// never part of an error).
fn plane_client(
    args: &PlaneArgs,
) -> anyhow::Result<agent_operator::controlplane::ControlPlaneClient> {
    use agent_operator::controlplane::{ClientConfig, ControlPlaneClient, endpoint};
    let base = match (&args.url, &args.region) {
        (Some(url), _) => url.clone(),
        (None, region) => endpoint::region_base_url(region.as_deref().unwrap_or("us")),
    };
    let workspace = args
        .workspace_id
        .clone()
        .context("set --workspace-id or AGENT_WORKSPACE_ID")?;
    let key = args
        .api_key
        .clone()
        .map(|k| k.trim().to_owned())
        .filter(|k| !k.is_empty())
        .context("set AGENT_API_KEY (or --api-key)")?;
    agent_operator::controlplane::client::install_crypto_provider();
    Ok(ControlPlaneClient::new(ClientConfig::new(
        base,
        workspace,
        key.into(),
    ))?)
}

/// Aligned columns: a header row, then `rows`.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        padded.join("  ").trim_end().to_owned() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out += &line(row.iter().map(String::as_str).collect());
    }
    out
}

/// `agentctl integrations`.
async fn integrations(args: IntegrationsArgs) -> anyhow::Result<ExitCode> {
    let cp = plane_client(&args.plane)?;
    let installs = cp
        .list_github_integrations()
        .await
        .context("listing GitHub integrations")?;
    let text = match args.command {
        IntegrationsCommand::List => match args.output {
            Output::Json => serde_json::to_string_pretty(&installs)?,
            Output::Table => {
                let rows: Vec<Vec<String>> = installs
                    .iter()
                    .map(|i| {
                        vec![
                            i.name.clone().unwrap_or_default(),
                            i.id.clone(),
                            i.installation_id
                                .as_ref()
                                .map(|v| v.to_string().trim_matches('"').to_owned())
                                .unwrap_or_default(),
                        ]
                    })
                    .collect();
                table(&["NAME", "ID", "INSTALLATION ID"], &rows)
            }
        },
        IntegrationsCommand::Repos { integration } => {
            let id = match installs
                .iter()
                .find(|i| i.id.eq_ignore_ascii_case(&integration))
            {
                Some(i) => i.id.clone(),
                None => agent_operator::controller::integrations::find_integration(
                    &installs,
                    &integration,
                )
                .map(|i| i.id.clone())
                .map_err(|_| {
                    anyhow::anyhow!(
                        "no single GitHub integration has the name or id {integration:?}; see `agentctl integrations list`"
                    )
                })?,
            };
            let repos = cp
                .list_github_repositories(&id)
                .await
                .with_context(|| format!("listing the repositories of integration {id}"))?;
            match args.output {
                Output::Json => serde_json::to_string_pretty(&repos)?,
                Output::Table => {
                    let rows: Vec<Vec<String>> = repos
                        .iter()
                        .map(|r| vec![r.url.clone(), r.default_branch.clone().unwrap_or_default()])
                        .collect();
                    table(&["URL", "DEFAULT BRANCH"], &rows)
                }
            }
        }
    };
    print!("{}", text.trim_end());
    println!();
    Ok(ExitCode::SUCCESS)
}

/// An agent server client from `--url`, `--api-key` and `--timeout`.
fn server_client(
    args: &ServerArgs,
    idle_timeout: Option<u64>,
) -> anyhow::Result<agent_operator::agentserver::AgentServerClient> {
    use agent_operator::agentserver::{AgentServerClient, AgentServerConfig};
    let mut config = AgentServerConfig::new(args.url.clone());
    if let Some(key) = args
        .api_key
        .as_deref()
        .map(str::trim)
        .filter(|k| !k.is_empty())
    {
        config = config.with_api_key(key.to_owned().into());
    }
    let timeout = std::time::Duration::from_secs(args.timeout.max(1));
    config.request_timeout = timeout;
    config.connect_timeout = timeout.min(std::time::Duration::from_secs(10));
    if let Some(idle) = idle_timeout {
        config.stream_idle_timeout = std::time::Duration::from_secs(idle.max(1));
    }
    Ok(AgentServerClient::new(config)?)
}

/// `agentctl assistants`.
async fn assistants(args: AssistantsArgs) -> anyhow::Result<ExitCode> {
    let AssistantsCommand::Search {
        server,
        graph_id,
        name,
        page_size,
        output,
    } = args.command;
    let client = server_client(&server, None)?;
    let search = agent_operator::agentserver::AssistantSearch {
        graph_id,
        name,
        limit: Some(page_size.max(1)),
        ..Default::default()
    };
    let found = client
        .search_all_assistants(&search)
        .await
        .context("searching assistants")?;
    let text = match output {
        Output::Json => serde_json::to_string_pretty(&found)?,
        Output::Table => {
            let rows: Vec<Vec<String>> = found
                .iter()
                .map(|a| {
                    vec![
                        a.assistant_id.clone(),
                        a.graph_id.clone(),
                        a.name.clone().unwrap_or_default(),
                        a.metadata
                            .get("created_by")
                            .and_then(|v| v.as_str())
                            .unwrap_or_default()
                            .to_owned(),
                        a.version.map(|v| v.to_string()).unwrap_or_default(),
                    ]
                })
                .collect();
            table(
                &["ASSISTANT ID", "GRAPH", "NAME", "CREATED BY", "VERSION"],
                &rows,
            )
        }
    };
    print!("{}", text.trim_end());
    println!();
    Ok(ExitCode::SUCCESS)
}

/// `agentctl runs`.
async fn runs(args: RunsArgs) -> anyhow::Result<ExitCode> {
    use agent_operator::agentserver::{RunEvent, RunStreamRequest, StreamMode};
    use futures::StreamExt;
    use std::io::Write;
    let RunsCommand::Stream {
        server,
        assistant,
        input,
        stream_mode,
        idle_timeout,
    } = args.command;
    let input: serde_json::Value = serde_json::from_str(&input).context("--input is not JSON")?;
    let modes: Vec<String> = stream_mode
        .into_iter()
        .map(|m| m.trim().to_owned())
        .filter(|m| !m.is_empty())
        .collect();
    let client = server_client(&server, Some(idle_timeout))?;
    let req = RunStreamRequest {
        assistant_id: assistant,
        input: Some(input),
        stream_mode: (!modes.is_empty()).then(|| StreamMode::from_list(modes)),
        ..Default::default()
    };
    let mut events = client.stream_run(&req).await.context("starting the run")?;
    let mut failed = false;
    let mut stdout = std::io::stdout().lock();
    while let Some(item) = events.next().await {
        let event = item.context("reading the run stream")?;
        writeln!(stdout, "{}: {}", event.name(), event.data())?;
        stdout.flush()?;
        if let RunEvent::Error { error, message } = &event {
            eprintln!("agentctl: the run failed: {error}: {message}");
            failed = true;
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `agentctl testenv`.
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
    env.write_kubeconfig(&args.kubeconfig_out)?;
    let kubeconfig = std::path::absolute(&args.kubeconfig_out)
        .with_context(|| format!("resolving {}", args.kubeconfig_out.display()))?;
    tracing::info!(
        server = env.server_url(),
        started_in = ?env.started_in(),
        ?crds,
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

/// Runs `command` with `KUBECONFIG` and `PATH` set; returns its exit code, or
/// 128 + signal number. A Ctrl-C / SIGTERM to agentctl stops it with SIGTERM.
///
/// It runs under `setpriv --pdeathsig TERM`, so it also stops if agentctl is killed.
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

/// The exit code agentctl passes on for `status`: its code, or 128 + signal.
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
