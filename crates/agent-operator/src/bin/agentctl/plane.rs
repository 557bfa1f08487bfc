//! Where the control plane is and how to authenticate: the flags and
//! environment variables every control plane command shares, and the
//! client built from them.
//!
//! Sources: docs/control-plane-api.md "Hosts and headers" (regions, `/api-host`, `X-Api-Key` and
//! `X-Tenant-Id`).

use agent_operator::controlplane::types::Deployment;
use agent_operator::controlplane::{ClientConfig, ControlPlaneClient, endpoint};
use clap::Args;

use crate::exit::{CliError, CliResult, PlaneResult};

/// The API key of this run, kept to redact it from printed logs.
static API_KEY: std::sync::OnceLock<secrecy::SecretString> = std::sync::OnceLock::new();

/// The API key given to [`ControlPlaneArgs::client`], if one was.
pub fn api_key() -> Option<secrecy::SecretString> {
    API_KEY.get().cloned()
}

/// Control plane flags. `Debug` never shows the key; `--help` never shows
/// the value of `AGENT_API_KEY`.
#[derive(Args, Clone)]
pub struct ControlPlaneArgs {
    /// Base URL of the control plane (a self-hosted one ends in /api-host).
    #[arg(
        long,
        env = "AGENT_CONTROL_PLANE_URL",
        conflicts_with = "region",
        global = true
    )]
    pub url: Option<String>,

    /// Cloud region (`us` → https://api.host.langchain.com, `r` →
    /// https://r.api.host.langchain.com); default `us` without --url.
    #[arg(long, env = "AGENT_CONTROL_PLANE_REGION", global = true)]
    pub region: Option<String>,

    /// Workspace id (sent as X-Tenant-Id).
    #[arg(long, env = "AGENT_WORKSPACE_ID", global = true)]
    pub workspace_id: Option<String>,

    /// API key (sent as X-Api-Key; prefer the environment variable: a flag
    /// is visible to other users of the machine). Never printed.
    #[arg(long, env = "AGENT_API_KEY", hide_env_values = true, global = true)]
    pub api_key: Option<String>,

    /// Seconds one HTTP attempt may take.
    #[arg(
        long = "request-timeout",
        value_name = "SECONDS",
        default_value_t = 30,
        global = true
    )]
    pub request_timeout: u64,
}

impl std::fmt::Debug for ControlPlaneArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlaneArgs")
            .field("url", &self.url)
            .field("region", &self.region)
            .field("workspace_id", &self.workspace_id)
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .field("request_timeout", &self.request_timeout)
            .finish()
    }
}

impl ControlPlaneArgs {
    /// A control plane client from `--url`/`--region`, `--workspace-id` and
    /// `--api-key`. Errors (exit 2, nothing sent): a missing workspace or
    /// key, or a bad URL (the key is never part of an error).
    pub fn client(&self) -> CliResult<ControlPlaneClient> {
        let base = match (&self.url, &self.region) {
            (Some(url), _) => url.clone(),
            (None, region) => endpoint::region_base_url(region.as_deref().unwrap_or("us")),
        };
        let workspace = self
            .workspace_id
            .clone()
            .filter(|w| !w.trim().is_empty())
            .ok_or_else(|| CliError::usage("set --workspace-id or AGENT_WORKSPACE_ID"))?;
        let key = self
            .api_key
            .as_deref()
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .ok_or_else(|| CliError::usage("set AGENT_API_KEY (or --api-key)"))?;
        let _ = API_KEY.set(key.to_owned().into());
        // No --allowed-hosts here (agent_operator::allowlist): agentctl is
        // run by a user, with the user's own key, against the URL the user
        // names; the list guards the operator, whose requests go where
        // whoever may create a resource points them.
        let mut config = ClientConfig::new(base, workspace.trim(), key.to_owned().into());
        config.timeout = std::time::Duration::from_secs(self.request_timeout.max(1));
        ControlPlaneClient::new(config).plane("configuring the control plane client")
    }
}

/// True when `s` looks like a uuid (8-4-4-4-12 hex digits): a deployment id
/// rather than a name.
pub fn is_uuid(s: &str) -> bool {
    uuid::Uuid::parse_str(s).is_ok() && s.len() == 36
}

/// The deployment named `name_or_id`, or `None` when there is none: `GET
/// /v2/deployments/{id}` for a uuid (404 → `None`), else the operator's
/// exact-name lookup (`ControlPlaneClient::deployments_named`: the exact
/// `name` filter and `name_contains`, keeping the exact match;
/// docs/control-plane-api.md, "Requests as the official clients send
/// them").
///
/// Errors: exit 3 when several deployments have the name; the client's
/// errors otherwise.
pub async fn lookup_deployment(
    cp: &ControlPlaneClient,
    name_or_id: &str,
) -> CliResult<Option<Deployment>> {
    if is_uuid(name_or_id) {
        return match cp.get_deployment(name_or_id).await {
            Ok(d) => Ok(Some(d)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(CliError::plane(
                format!("reading deployment {name_or_id}"),
                e,
            )),
        };
    }
    let mut found = cp
        .deployments_named(name_or_id)
        .await
        .plane(format!("looking up deployment {name_or_id}"))?;
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop()),
        n => Err(CliError::new(
            crate::exit::Exit::Rejected,
            anyhow::anyhow!(
                "{n} deployments are named {name_or_id} ({}); give the id instead",
                found
                    .iter()
                    .map(|d| d.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// Like [`lookup_deployment`], but none is an error (exit 3) naming it.
pub async fn find_deployment(cp: &ControlPlaneClient, name_or_id: &str) -> CliResult<Deployment> {
    lookup_deployment(cp, name_or_id).await?.ok_or_else(|| {
        CliError::new(
            crate::exit::Exit::Rejected,
            anyhow::anyhow!(
                "no deployment is named or has the id {name_or_id}; see `agentctl deployments list`"
            ),
        )
    })
}
