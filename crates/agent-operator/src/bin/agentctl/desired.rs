//! The desired state of a manifest file, read and checked before any
//! request: shared by `agentctl apply` and `agentctl logs` (a leaf, so that
//! `apply → wait → logs` does not come back to `apply`).

use std::path::PathBuf;

use agent_operator::converge::{self, Desired, Manifest};

use crate::exit::{CliError, CliResult, Exit, OrExit};

/// Reads and checks the file: every AgentDeployment's desired state, before
/// any request. Errors: exit 2 (unreadable file, bad YAML, a spec the
/// preflight rules refuse, a missing Secret or listener document).
pub fn read_desired(file: &PathBuf, secret_from_env: bool) -> CliResult<Vec<Desired>> {
    read_manifest(file, secret_from_env).map(|(_, wanted)| wanted)
}

/// [`read_desired`], with the parsed file (its AgentAssistant and AgentCron
/// documents, checked: `converge::agents::check`). Errors: as
/// [`read_desired`].
pub fn read_manifest(file: &PathBuf, secret_from_env: bool) -> CliResult<(Manifest, Vec<Desired>)> {
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
    let wanted = manifest
        .deployments
        .iter()
        .map(|d| converge::desired_state(d, &manifest).map_err(CliError::from))
        .collect::<CliResult<Vec<_>>>()?;
    Ok((manifest, wanted))
}
