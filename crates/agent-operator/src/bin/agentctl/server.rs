//! `agentctl assistants search` and `agentctl runs stream`: the agent
//! server of a deployment (docs/control-plane-api.md "Agent server").

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};

use crate::output::Output;

/// Where an agent server is and its key. `Debug` never shows the key.
#[derive(Args)]
pub struct ServerArgs {
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
pub struct AssistantsArgs {
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
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

#[derive(Debug, Args)]
pub struct RunsArgs {
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
pub async fn assistants(args: AssistantsArgs) -> anyhow::Result<ExitCode> {
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
        Output::Yaml => yaml_serde::to_string(&found)?,
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
            crate::output::table(
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
pub async fn runs(args: RunsArgs) -> anyhow::Result<ExitCode> {
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
