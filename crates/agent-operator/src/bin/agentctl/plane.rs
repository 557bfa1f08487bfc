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

/// Control plane flags. `Debug` never shows the key or token; `--help`
/// never shows the value of `AGENT_API_KEY` or `AGENT_BEARER_TOKEN`.
///
/// Each setting also falls back to the variable the platform's own tools
/// read, when neither the flag nor the `AGENT_*` variable is set:
/// `LANGSMITH_API_KEY`, `LANGSMITH_WORKSPACE_ID`, and `LANGSMITH_ENDPOINT`
/// (the LangSmith API endpoint, from which the control plane is derived:
/// [`endpoint::from_langsmith_endpoint`]).
#[derive(Args, Clone)]
pub struct ControlPlaneArgs {
    /// Base URL of the control plane (a self-hosted one ends in /api-host).
    /// Without --url or --region: derived from LANGSMITH_ENDPOINT
    /// (https://eu.api.smith.langchain.com → the EU control plane,
    /// https://smith.example.com/api/v1 → https://smith.example.com/api-host),
    /// else the US region.
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

    /// Workspace id (sent as X-Tenant-Id); LANGSMITH_WORKSPACE_ID is read
    /// when neither is set.
    #[arg(long, env = "AGENT_WORKSPACE_ID", global = true)]
    pub workspace_id: Option<String>,

    /// API key (sent as X-Api-Key; prefer the environment variable: a flag
    /// is visible to other users of the machine); LANGSMITH_API_KEY is read
    /// when neither is set. Never printed.
    #[arg(long, env = "AGENT_API_KEY", hide_env_values = true, global = true)]
    pub api_key: Option<String>,

    /// Bearer token, sent as `Authorization: Bearer` instead of an API key
    /// (prefer the environment variable). Never printed.
    #[arg(
        long,
        env = "AGENT_BEARER_TOKEN",
        hide_env_values = true,
        global = true
    )]
    pub bearer_token: Option<String>,

    /// PEM file of CA certificates to trust besides the system's, for a
    /// self-hosted control plane behind a private CA.
    #[arg(
        long = "ca-bundle",
        value_name = "FILE",
        env = "AGENT_CA_BUNDLE",
        global = true
    )]
    pub ca_bundle: Option<std::path::PathBuf>,

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
            .field(
                "bearer_token",
                &self.bearer_token.as_ref().map(|_| "[REDACTED]"),
            )
            .field("ca_bundle", &self.ca_bundle)
            .field("request_timeout", &self.request_timeout)
            .finish()
    }
}

impl ControlPlaneArgs {
    /// A control plane client from `--url`/`--region` (or
    /// `LANGSMITH_ENDPOINT`), `--workspace-id`, `--api-key` or
    /// `--bearer-token`, and `--ca-bundle`. Errors (exit 2, nothing sent): a
    /// missing workspace or credential, both an API key and a bearer token,
    /// an unreadable or empty CA bundle, or a bad URL (the key is never part
    /// of an error).
    pub fn client(&self) -> CliResult<ControlPlaneClient> {
        let base = match (&self.url, &self.region, fallback("LANGSMITH_ENDPOINT")) {
            (Some(url), ..) => url.clone(),
            (None, Some(region), _) => endpoint::region_base_url(region),
            (None, None, Some(langsmith)) => endpoint::from_langsmith_endpoint(&langsmith),
            (None, None, None) => endpoint::region_base_url("us"),
        };
        let workspace = non_empty(&self.workspace_id)
            .or_else(|| fallback("LANGSMITH_WORKSPACE_ID"))
            .ok_or_else(|| {
                CliError::usage("set --workspace-id, AGENT_WORKSPACE_ID or LANGSMITH_WORKSPACE_ID")
            })?;
        let (key, bearer) = match (non_empty(&self.api_key), non_empty(&self.bearer_token)) {
            (Some(_), Some(_)) => {
                return Err(CliError::usage(
                    "set one of AGENT_API_KEY (--api-key) and AGENT_BEARER_TOKEN (--bearer-token)",
                ));
            }
            (None, Some(token)) => (token, true),
            (Some(key), None) => (key, false),
            (None, None) => (
                fallback("LANGSMITH_API_KEY").ok_or_else(|| {
                    CliError::usage(
                        "set AGENT_API_KEY (or --api-key, or LANGSMITH_API_KEY), or AGENT_BEARER_TOKEN",
                    )
                })?,
                false,
            ),
        };
        let _ = API_KEY.set(key.clone().into());
        // No --allowed-hosts here (agent_operator::allowlist): agentctl is
        // run by a user, with the user's own key, against the URL the user
        // names; the list guards the operator, whose requests go where
        // whoever may create a resource points them.
        let mut config = ClientConfig::new(base, workspace, key.into());
        config.bearer = bearer;
        config.timeout = std::time::Duration::from_secs(self.request_timeout.max(1));
        if let Some(path) = &self.ca_bundle {
            let pem = std::fs::read(path).map_err(|e| {
                CliError::usage(format!("reading the CA bundle {}: {e}", path.display()))
            })?;
            if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
                return Err(CliError::usage(format!(
                    "the CA bundle {} holds no PEM certificate",
                    path.display()
                )));
            }
            config.ca_bundle_pem = Some(pem);
        }
        ControlPlaneClient::new(config).plane("configuring the control plane client")
    }
}

/// `value` trimmed, unless it is absent or blank.
fn non_empty(value: &Option<String>) -> Option<String> {
    value
        .as_deref()
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

/// The environment variable `name` of the platform's own tools, trimmed,
/// unless it is unset or blank.
fn fallback(name: &str) -> Option<String> {
    non_empty(&std::env::var(name).ok())
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
