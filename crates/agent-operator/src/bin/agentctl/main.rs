//! `agentctl`: the command line of agent-operator, for CI/CD pipelines and
//! developers.
//!
//! Control plane commands (configuration from flags or the environment:
//! `--url`/`AGENT_CONTROL_PLANE_URL` or `--region`/`AGENT_CONTROL_PLANE_REGION`,
//! `--workspace-id`/`AGENT_WORKSPACE_ID`, `--api-key`/`AGENT_API_KEY` or
//! `--bearer-token`/`AGENT_BEARER_TOKEN`, the key never printed,
//! `--ca-bundle`/`AGENT_CA_BUNDLE`; `LANGSMITH_ENDPOINT`,
//! `LANGSMITH_WORKSPACE_ID` and `LANGSMITH_API_KEY` when those are unset;
//! see [`plane`]):
//! - `apply -f FILE [--wait] [--timeout S]` converges the control plane to the
//!   AgentDeployments of a YAML file without Kubernetes, through the
//!   operator's reconcile core (`agent_operator::converge`), then the
//!   file's AgentAssistants and AgentCrons on their deployment's agent
//!   server (see [`agents`]); `diff -f FILE` prints what it would send,
//!   `get -f FILE` what is there (see [`apply`]);
//! - `unmanaged` lists the deployments no AgentDeployment of the cluster
//!   manages, with the `export` command of each (see [`unmanaged`]);
//!   `export` writes AgentDeployments for the others (see [`export`]); both
//!   read the cluster of the current kubeconfig (see [`cluster`]), as do
//!   `apply`, `diff` and `get` for a Secret the file names but does not
//!   hold, and `revisions list` for the operator's notes (see [`history`]);
//! - `deployments list|get|delete [--wait]`, `revisions list|get|wait`,
//!   `redeploy`, `rollback --to REVISION`, `logs [--build] [--revision R]
//!   [--follow]` (see [`logs`]), `listeners list|get`,
//!   `integrations list|repos` (see [`resources`]), with `--output
//!   table|json|yaml`.
//!
//! Agent server commands: `assistants search`, `runs stream` (see [`server`]).
//! Shell completion: `completions SHELL`. The command reference of
//! docs/AGENTCTL.md is generated from this definition (hidden `docs`, see
//! [`mod@reference`]). (The envtest API server of the
//! demo is the `testenv` binary of `agent-operator-test-support`.)
//!
//! Exit codes: [`exit::EXIT_CODES_HELP`].

mod agents;
mod apply;
mod cluster;
mod desired;
mod exit;
mod export;
mod history;
mod logs;
mod output;
mod plane;
mod reference;
mod resources;
mod server;
mod unmanaged;
mod wait;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

use crate::exit::{CliError, Exit};

/// Command line of agent-operator: converge AgentDeployment YAML onto the
/// control plane without a cluster, inspect and operate deployments,
/// revisions and listeners, talk to an agent server.
///
/// The control plane is --url or --region (AGENT_CONTROL_PLANE_URL,
/// AGENT_CONTROL_PLANE_REGION), the workspace --workspace-id
/// (AGENT_WORKSPACE_ID), the key AGENT_API_KEY (or --api-key; never printed)
/// or a token AGENT_BEARER_TOKEN, a private CA --ca-bundle FILE. When unset,
/// the variables of the platform's own tools are read: LANGSMITH_ENDPOINT
/// (the control plane is derived from it), LANGSMITH_WORKSPACE_ID,
/// LANGSMITH_API_KEY.
#[derive(Debug, Parser)]
#[command(name = "agentctl", version, about, long_about, after_help = exit::EXIT_CODES_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Converge the control plane to the AgentDeployments of a YAML file
    /// (no Kubernetes needed): create or patch, then with --wait follow the
    /// latest revision; then the file's AgentAssistants and AgentCrons on
    /// the agent servers of the deployments that are DEPLOYED. A second
    /// apply without changes sends no mutation.
    #[command(after_help = exit::EXIT_CODES_HELP)]
    Apply(apply::ApplyArgs),
    /// Show what `apply -f` would send (secret values never shown); exit 0
    /// without changes, 1 with.
    #[command(after_help = exit::EXIT_CODES_HELP)]
    Diff(apply::DiffArgs),
    /// Show what the control plane and the agent servers hold for each
    /// object of a YAML file, and whether it is as the file says (reads
    /// only).
    #[command(after_help = exit::EXIT_CODES_HELP)]
    Get(apply::GetArgs),
    /// Write AgentDeployment YAML for deployments the workspace already has
    /// (all, by name, or --name-contains), adopting each by id, with its
    /// secrets as references to a Secret to create (values never written).
    /// A deployment an AgentDeployment of the cluster (any namespace) holds
    /// or claims is left out, and refused when named (exit 3).
    #[command(after_help = exit::EXIT_CODES_HELP)]
    Export(export::ExportArgs),
    /// List the deployments of the workspace that no AgentDeployment of the
    /// cluster manages (any namespace, read from the cluster of the current
    /// kubeconfig), each with the export command that brings it under
    /// GitOps.
    #[command(after_help = exit::EXIT_CODES_HELP)]
    Unmanaged(unmanaged::UnmanagedArgs),
    /// List, show or delete deployments.
    #[command(after_help = exit::EXIT_CODES_HELP)]
    Deployments(resources::DeploymentsArgs),
    /// List, show or wait for the revisions of a deployment.
    #[command(after_help = exit::EXIT_CODES_HELP)]
    Revisions(resources::RevisionsArgs),
    /// Start a new revision of a deployment with its current configuration.
    ///
    /// On a deployment that an AgentDeployment manages, the operator follows
    /// the new revision (a Normal event OutOfBandRevision names it); the
    /// operator's own way is the annotation
    /// agentserver.dev/redeploy-requested-at on the AgentDeployment.
    #[command(after_help = exit::EXIT_CODES_HELP)]
    Redeploy(resources::RedeployArgs),
    /// Start a new revision with the configuration of an earlier one.
    ///
    /// On a deployment that an AgentDeployment manages, a rollback lasts
    /// until the operator's next drift check (every 5 minutes by default):
    /// the deployment then differs from the spec, and the operator
    /// re-applies the spec, which starts a new revision; its DriftCorrected
    /// event and the AgentDeployment's Ready message name the rollback's
    /// revision. To keep a rollback, first annotate the AgentDeployment
    /// agentserver.dev/paused="true" (no remote call is made while it is
    /// set), roll back, put the rolled-back configuration in the spec
    /// (revert the commit in Git), then remove the annotation. While the
    /// AgentDeployment is paused its AgentCrons are disabled on the agent
    /// server (no scheduled run) and its AgentAssistants wait; both go on
    /// when the annotation is removed.
    #[command(after_help = exit::EXIT_CODES_HELP)]
    Rollback(resources::RollbackArgs),
    /// Print the server log of a deployment (or a revision), or with
    /// --build the build log of a revision; --follow keeps reading.
    #[command(after_help = exit::EXIT_CODES_HELP)]
    Logs(logs::LogsArgs),
    /// Listeners of a self-hosted data plane.
    #[command(after_help = exit::EXIT_CODES_HELP)]
    Listeners(resources::ListenersArgs),
    /// GitHub integrations of a workspace and their repositories.
    Integrations(resources::IntegrationsArgs),
    /// Assistants of an agent server.
    Assistants(server::AssistantsArgs),
    /// Runs on an agent server.
    Runs(server::RunsArgs),
    /// Print a shell completion script, e.g.
    /// `agentctl completions bash > /etc/bash_completion.d/agentctl`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Rewrite the command reference of docs/AGENTCTL.md from this command
    /// line (`make generate`), or with --check fail when it differs.
    #[command(hide = true)]
    Docs {
        /// The repository root.
        #[arg(long, default_value = ".")]
        root: std::path::PathBuf,
        /// Compare instead of writing; exit 1 when a block differs.
        #[arg(long)]
        check: bool,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    // Logs on stderr (ANSI colours only on a terminal): stdout is the
    // command's output. Commands print what matters themselves, so only
    // warnings unless RUST_LOG says otherwise.
    agent_operator::telemetry::init(agent_operator::telemetry::LogFormat::Text, "warn");
    // Agent server and developer commands: any error is exit 1, as before.
    let failed = |e: anyhow::Error| CliError::new(Exit::Failed, e);
    let result: Result<ExitCode, CliError> = match cli.command {
        Command::Apply(args) => apply::apply(args).await.map(ExitCode::from),
        Command::Diff(args) => apply::diff(args).await.map(ExitCode::from),
        Command::Get(args) => apply::get(args).await.map(ExitCode::from),
        Command::Export(args) => export::export(args).await.map(ExitCode::from),
        Command::Unmanaged(args) => unmanaged::unmanaged_deployments(args)
            .await
            .map(ExitCode::from),
        Command::Deployments(args) => resources::deployments(args).await.map(ExitCode::from),
        Command::Revisions(args) => resources::revisions(args).await.map(ExitCode::from),
        Command::Redeploy(args) => resources::redeploy(args).await.map(ExitCode::from),
        Command::Rollback(args) => resources::rollback(args).await.map(ExitCode::from),
        Command::Logs(args) => logs::logs(args).await.map(ExitCode::from),
        Command::Listeners(args) => resources::listeners(args).await.map(ExitCode::from),
        Command::Integrations(args) => resources::integrations(args).await.map(ExitCode::from),
        Command::Assistants(args) => server::assistants(args).await.map_err(failed),
        Command::Runs(args) => server::runs(args).await.map_err(failed),
        Command::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "agentctl",
                &mut std::io::stdout(),
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Docs { root, check } => reference::docs(&Cli::command(), &root, check)
            .map(|()| ExitCode::SUCCESS)
            .map_err(failed),
    };
    result.unwrap_or_else(|e| {
        eprintln!("agentctl: error: {:#}", e.error);
        e.exit.into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn the_key_is_never_shown_by_debug() {
        let cli = Cli::try_parse_from([
            "agentctl",
            "deployments",
            "list",
            "--api-key",
            "k-very-secret",
            "--workspace-id",
            "w",
        ])
        .unwrap();
        assert!(!format!("{cli:?}").contains("k-very-secret"));
    }
}
