//! The desired state of a manifest file, read and checked before any
//! control plane request: shared by `agentctl apply` and `agentctl logs` (a leaf, so that
//! `apply → wait → logs` does not come back to `apply`).

use std::path::PathBuf;

use agent_operator::converge::{self, Desired, Manifest};

use crate::exit::{CliError, CliResult, Exit, OrExit};

/// Reads and checks the file: every AgentDeployment's desired state, before
/// any control plane request. A `secretKeyRef` resolves from the first that
/// has it: a Secret document of the file; with `secret_from_env`, the
/// environment variable named like the key; the Secret of that name in the
/// cluster of the current kubeconfig (read only for the references the file
/// and the environment leave open: [`crate::cluster::secrets`]). Errors:
/// exit 2 (unreadable file, bad YAML, a spec the preflight rules refuse, a
/// Secret found nowhere, a missing listener document).
pub async fn read_desired(file: &PathBuf, secret_from_env: bool) -> CliResult<Vec<Desired>> {
    read_manifest(file, secret_from_env)
        .await
        .map(|(_, wanted)| wanted)
}

/// [`read_desired`], with the parsed file (its AgentAssistant and AgentCron
/// documents, checked: `converge::agents::check`). Errors: as
/// [`read_desired`].
pub async fn read_manifest(
    file: &PathBuf,
    secret_from_env: bool,
) -> CliResult<(Manifest, Vec<Desired>)> {
    let text = if file.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).or_exit(Exit::Usage, "reading stdin")?
    } else {
        std::fs::read_to_string(file)
            .or_exit(Exit::Usage, &format!("reading {}", file.display()))?
    };
    let mut manifest =
        Manifest::parse(&text).map_err(|e| CliError::usage(format!("{}: {e}", file.display())))?;
    converge::agents::check(&manifest)
        .map_err(|e| CliError::usage(format!("{}: {e}", file.display())))?;
    if secret_from_env {
        manifest = manifest.with_env_fallback(std::env::vars());
    }
    let open = manifest.secrets_to_read();
    if !open.is_empty() {
        let (found, unread) = crate::cluster::secrets(&open).await;
        manifest = manifest.with_cluster_secrets(found, unread);
    }
    let wanted = manifest
        .deployments
        .iter()
        .map(|d| converge::desired_state(d, &manifest).map_err(CliError::from))
        .collect::<CliResult<Vec<_>>>()?;
    Ok((manifest, wanted))
}
