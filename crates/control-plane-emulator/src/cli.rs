//! The emulator's command line: flags (with `EMULATOR_*` environment
//! fallbacks) and the [`EmulatorConfig`] they describe. In the library so
//! that the binary and the operator's tests, which run the emulator in
//! their own process, read the same flags the same way.
//!
//! Source: docs/control-plane-api.md (what the emulated API does); the
//! choices where it is silent are listed in [`Args`]'s help.

use std::time::Duration;

use clap::Parser;

use crate::telemetry::LogFormat;
use crate::{
    ApiKey, DEFAULT_MAX_BODY_BYTES, DEMO_API_KEY, DEMO_WORKSPACE_ID, EmulatorConfig, FaultConfig,
    IntegrationSeed, ListenerSeed, Quirk, ScenarioRule, ServiceShape, ThrottleRule,
};

/// Emulator of the agent platform's control plane REST API (deployments,
/// revisions, listeners), for tests and demos.
///
/// Routes: /v2/deployments..., /v2/listeners..., /v1/integrations/github/...
/// (also under /api-host),
/// each needing X-Api-Key and X-Tenant-Id; a built-in agent server at
/// /agents/{deployment_id} (GET /ok, GET /info, POST /assistants/search,
/// POST /runs/stream, the assistants, POST /runs/crons and its search,
/// PATCH/DELETE /runs/crons/{id}, the threads: search, runs on a thread,
/// prune); admin routes without a key under /_emulator/
/// (requests, store, reset, scenarios, faults,
/// deployments/{id}/revisions/{rid}/status).
///
/// Choices where the API documents nothing: a missing or unknown key is 401,
/// a key of another workspace 403; a duplicate deployment name is 409;
/// redeploy (POST /v2/deployments/{id}/revisions) answers 201 with the
/// Revision; lists are newest first and answer the next offset; a revision
/// goes AWAITING_BUILD, BUILDING, AWAITING_DEPLOY, DEPLOYING (one step each;
/// external_docker skips the build steps) to DEPLOYED, and a newer revision
/// turns one still in progress into SKIPPED; a deleted deployment shows
/// AWAITING_DELETE, then 404.
#[derive(Debug, Parser)]
#[command(name = "control-plane-emulator", version, about, long_about)]
pub struct Args {
    /// Address to listen on (host:port).
    #[arg(long, env = "EMULATOR_LISTEN", default_value = "127.0.0.1:8585")]
    pub listen: String,

    /// An accepted API key and its workspace id, KEY=WORKSPACE_ID. Repeatable
    /// (comma-separated in the environment); the same key may be given for
    /// several workspaces. Default: the demo key `demo-api-key` for workspace
    /// 00000000-0000-4000-8000-000000000001.
    #[arg(
        long = "api-key",
        env = "EMULATOR_API_KEYS",
        value_name = "KEY=WORKSPACE_ID",
        value_delimiter = ',',
        hide_env_values = true
    )]
    api_keys: Vec<ApiKey>,

    /// Seconds a revision spends in each in-progress status (float; 0 makes
    /// revisions DEPLOYED at once).
    #[arg(long, env = "EMULATOR_STEP_SECONDS", default_value_t = 2.0, value_parser = seconds)]
    step_seconds: f64,

    /// Seconds a deleted deployment shows AWAITING_DELETE before GET answers
    /// 404 (float).
    #[arg(long, env = "EMULATOR_DELETE_SECONDS", default_value_t = 2.0, value_parser = seconds)]
    delete_seconds: f64,

    /// Base URL of the built-in agent servers, used to build each
    /// deployment's custom_url as {public-url}/agents/{deployment_id}.
    /// Default: http://{listen address}.
    #[arg(long, env = "EMULATOR_PUBLIC_URL")]
    public_url: Option<String>,

    /// Point every service-chosen custom_url at this external agent server
    /// (e.g. a `langgraph dev` server) instead of the built-in one. An
    /// external_docker deployment that sends its own custom_url keeps it.
    #[arg(long, env = "EMULATOR_AGENT_SERVER_URL")]
    agent_server_url: Option<String>,

    /// MARK=URL: while a github deployment's active revision has MARK in
    /// its repo_ref (or image_uri), its custom_url reads URL instead (a
    /// stand-in for a revision built from other code; repeatable, the
    /// first match wins).
    #[arg(long = "agent-server-url-for", value_parser = mark_url)]
    agent_server_routes: Vec<(String, String)>,

    /// Let the built-in agent servers answer without an X-Api-Key (by default
    /// they require a key of the deployment's workspace, like cloud ones).
    #[arg(long, env = "EMULATOR_AGENT_SERVER_NO_AUTH")]
    agent_server_no_auth: bool,

    /// A listener seeded at start, WORKSPACE=LISTENER_ID:COMPUTE_ID, optionally
    /// followed by :NS1,NS2 (no namespaces: any namespace is accepted). Its workspace becomes
    /// self-hosted enterprise. Repeatable (semicolon-separated in the
    /// environment).
    #[arg(
        long = "listener",
        env = "EMULATOR_LISTENERS",
        value_name = "WORKSPACE=ID:COMPUTE_ID[:NS,...]",
        value_delimiter = ';'
    )]
    listeners: Vec<ListenerSeed>,

    /// A GitHub integration seeded at start,
    /// WORKSPACE=INTEGRATION_ID:NAME[:REPO_URL,REPO_URL...], served by
    /// GET /v1/integrations/github/install and
    /// GET /v1/integrations/github/{id}/repos. Repeatable (semicolon-separated
    /// in the environment).
    #[arg(
        long = "integration",
        env = "EMULATOR_INTEGRATIONS",
        value_name = "WORKSPACE=ID:NAME[:REPO_URL,...]",
        value_delimiter = ';'
    )]
    integrations: Vec<IntegrationSeed>,

    /// A workspace on a self-hosted enterprise plan: listener routes answer
    /// instead of 403. Repeatable.
    #[arg(
        long = "enterprise-workspace",
        env = "EMULATOR_ENTERPRISE_WORKSPACES",
        value_name = "WORKSPACE_ID",
        value_delimiter = ','
    )]
    enterprise_workspaces: Vec<String>,

    /// A workspace whose creates must name a listener (400 "'listener_id' is
    /// required" otherwise); implies --enterprise-workspace. Repeatable.
    #[arg(
        long = "require-listener",
        env = "EMULATOR_REQUIRE_LISTENER",
        value_name = "WORKSPACE_ID",
        value_delimiter = ','
    )]
    listener_required_workspaces: Vec<String>,

    /// A failure scenario, OUTCOME:FIELD=VALUE: a new revision whose FIELD
    /// (name, repo_url, repo_ref, image_uri, langgraph_config_path) equals
    /// VALUE ends as OUTCOME: DEPLOYED, CREATE_FAILED, BUILD_FAILED,
    /// DEPLOY_FAILED, INTERRUPTED, UNKNOWN (UNKNOWN for 3 steps, then
    /// DEPLOYED) or STUCK (stays BUILDING). First match wins. Repeatable
    /// (semicolon-separated in the environment). Example:
    /// BUILD_FAILED:repo_ref=broken.
    #[arg(
        long = "scenario",
        env = "EMULATOR_SCENARIOS",
        value_name = "OUTCOME:FIELD=VALUE",
        value_delimiter = ';'
    )]
    scenarios: Vec<ScenarioRule>,

    /// Fault: fixed delay added to every control plane request, in ms.
    #[arg(long, env = "EMULATOR_LATENCY_MS", default_value_t = 0)]
    latency_ms: u64,

    /// Fault: extra random delay, uniform in 0..=N ms.
    #[arg(long, env = "EMULATOR_JITTER_MS", default_value_t = 0)]
    jitter_ms: u64,

    /// Fault: fraction (0-1) of control plane requests answered with
    /// --error-status.
    #[arg(long, env = "EMULATOR_ERROR_RATE", default_value_t = 0.0)]
    error_rate: f64,

    /// Fault: status of injected errors (500-599).
    #[arg(long, env = "EMULATOR_ERROR_STATUS", default_value_t = 503)]
    error_status: u16,

    /// Fault: requests per second allowed per workspace; excess requests get
    /// 429 with Retry-After (whole seconds). Default: no limit.
    #[arg(long, env = "EMULATOR_RATE_LIMIT")]
    rate_limit: Option<f64>,

    /// Fault: burst size of --rate-limit (default: one second's worth).
    #[arg(long, env = "EMULATOR_RATE_LIMIT_BURST")]
    rate_limit_burst: Option<u32>,

    /// Fault: a throttled workspace, WORKSPACE:SECONDS: every control plane
    /// request of the workspace is answered 429 with Retry-After: SECONDS
    /// (before --rate-limit and latency). Repeatable (comma-separated in the
    /// environment). Example: 00000000-0000-4000-8000-000000000001:30.
    #[arg(
        long = "throttle-workspace",
        env = "EMULATOR_THROTTLE_WORKSPACES",
        value_name = "WORKSPACE:SECONDS",
        value_delimiter = ','
    )]
    throttled_workspaces: Vec<ThrottleRule>,

    /// Fault: fraction (0-1) of control plane requests whose connection is
    /// closed without an answer.
    #[arg(long, env = "EMULATOR_DROP_RATE", default_value_t = 0.0)]
    drop_rate: f64,

    /// Fault: fraction (0-1) of control plane requests that hang for
    /// --hang-ms (or until shutdown), then get 504.
    #[arg(long, env = "EMULATOR_HANG_RATE", default_value_t = 0.0)]
    hang_rate: f64,

    /// Fault: how long a hung request hangs, in ms.
    #[arg(long, env = "EMULATOR_HANG_MS", default_value_t = 600_000)]
    hang_ms: u64,

    /// Switch off one way the real service's answers differ from an echo of
    /// the request (all are on by default but secrets-never-read):
    /// github-refs, secrets-unread, secret-references-unechoed,
    /// commands-unechoed, listener-config-unechoed, resource-spec-defaults,
    /// create-rules, external-deployment-type, name-filter. Repeatable
    /// (comma-separated in the environment).
    #[arg(
        long = "without-quirk",
        env = "EMULATOR_WITHOUT_QUIRKS",
        value_name = "QUIRK",
        value_delimiter = ','
    )]
    without_quirks: Vec<Quirk>,

    /// Switch on a quirk that is off by default (secrets-never-read: secrets
    /// always read back as []). Repeatable (comma-separated in the
    /// environment).
    #[arg(
        long = "with-quirk",
        env = "EMULATOR_WITH_QUIRKS",
        value_name = "QUIRK",
        value_delimiter = ','
    )]
    with_quirks: Vec<Quirk>,

    /// Answer with what was stored, without any quirk (before
    /// --with-quirk).
    #[arg(long, env = "EMULATOR_ECHO")]
    echo: bool,

    /// A workspace of an organisation where Deployment is not enabled: every
    /// control plane request is 403 "... not enabled ...". Repeatable.
    #[arg(
        long = "deployment-disabled",
        env = "EMULATOR_DEPLOYMENT_DISABLED",
        value_name = "WORKSPACE_ID",
        value_delimiter = ','
    )]
    deployment_disabled_workspaces: Vec<String>,

    /// Largest accepted request body in bytes; larger bodies get 413.
    #[arg(long, env = "EMULATOR_MAX_BODY_BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES)]
    max_body_bytes: usize,

    /// Log format; the level comes from RUST_LOG (default info). Logs never
    /// contain API keys or secret values.
    #[arg(long, env = "EMULATOR_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// A non-negative, finite number of seconds.
fn seconds(s: &str) -> Result<f64, String> {
    let x: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if x >= 0.0 && Duration::try_from_secs_f64(x).is_ok() {
        Ok(x)
    } else {
        Err("must be a finite number of seconds >= 0".into())
    }
}

impl Args {
    /// The [`ServiceShape`] of `--echo`, `--without-quirk` and `--with-quirk`.
    fn shape(&self) -> ServiceShape {
        let mut shape = if self.echo {
            ServiceShape::echo()
        } else {
            ServiceShape::default()
        };
        for q in &self.without_quirks {
            shape = shape.without(*q);
        }
        for q in &self.with_quirks {
            shape = shape.with(*q);
        }
        shape
    }

    /// The [`EmulatorConfig`] these flags describe.
    ///
    /// Errors: fault flags out of range (`FaultConfig::validate`).
    pub fn config(&self) -> anyhow::Result<EmulatorConfig> {
        let defaults = EmulatorConfig::default();
        let faults = FaultConfig {
            latency_ms: self.latency_ms,
            jitter_ms: self.jitter_ms,
            error_rate: self.error_rate,
            error_status: self.error_status,
            rate_limit_per_second: self.rate_limit,
            rate_limit_burst: self.rate_limit_burst,
            drop_rate: self.drop_rate,
            hang_rate: self.hang_rate,
            hang_ms: self.hang_ms,
            throttled_workspaces: self.throttled_workspaces.clone(),
            ..FaultConfig::default()
        };
        faults
            .validate()
            .map_err(|e| anyhow::anyhow!("invalid fault flags: {e}"))?;
        Ok(EmulatorConfig {
            api_keys: if self.api_keys.is_empty() {
                defaults.api_keys
            } else {
                self.api_keys.clone()
            },
            step_duration: Duration::from_secs_f64(self.step_seconds),
            delete_duration: Duration::from_secs_f64(self.delete_seconds),
            public_url: self.public_url.clone(),
            agent_server_url: self.agent_server_url.clone(),
            agent_server_routes: self.agent_server_routes.clone(),
            enterprise_workspaces: self.enterprise_workspaces.clone(),
            listener_required_workspaces: self.listener_required_workspaces.clone(),
            listeners: self.listeners.clone(),
            integrations: self.integrations.clone(),
            scenarios: self.scenarios.clone(),
            faults,
            max_body_bytes: self.max_body_bytes,
            agent_server_auth: !self.agent_server_no_auth,
            shape: self.shape(),
            deployment_disabled_workspaces: self.deployment_disabled_workspaces.clone(),
            ..defaults
        })
    }
}

/// The start line: the URL, and the demo key only (a well-known value);
/// other keys are never printed.
pub fn banner(url: &str, keys: &[ApiKey]) -> String {
    let demo = keys
        .iter()
        .find(|k| k.key == DEMO_API_KEY && k.workspace_id == DEMO_WORKSPACE_ID);
    match demo {
        Some(k) => format!(
            "control-plane-emulator listening on {url} (api key: {}, workspace: {})",
            k.key, k.workspace_id
        ),
        None => {
            let mut ws: Vec<&str> = keys.iter().map(|k| k.workspace_id.as_str()).collect();
            ws.dedup();
            format!(
                "control-plane-emulator listening on {url} ({} api key(s) from --api-key, workspaces: {})",
                keys.len(),
                ws.join(", ")
            )
        }
    }
}

/// Parses `MARK=URL` of `--agent-server-url-for`.
fn mark_url(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((mark, url)) if !mark.is_empty() && !url.is_empty() => {
            Ok((mark.to_owned(), url.trim_end_matches('/').to_owned()))
        }
        _ => Err(format!("{s:?} is not MARK=URL")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn flags_are_consistent() {
        Args::command().debug_assert();
    }

    #[test]
    fn flags_build_the_config() {
        let args = Args::try_parse_from([
            "control-plane-emulator",
            "--api-key",
            "k1=ws-1",
            "--step-seconds",
            "0.5",
            "--listener",
            "ws-1=6f1c2a3e-0000-4000-8000-000000000009:cluster:ns1,ns2",
            "--scenario",
            "BUILD_FAILED:repo_ref=broken",
            "--rate-limit",
            "5",
        ])
        .unwrap();
        let cfg = args.config().unwrap();
        assert_eq!(cfg.api_keys, vec![ApiKey::new("k1", "ws-1")]);
        assert_eq!(cfg.step_duration, Duration::from_millis(500));
        assert_eq!(cfg.listeners.len(), 1);
        assert_eq!(cfg.scenarios.len(), 1);
        assert_eq!(cfg.faults.rate_limit_per_second, Some(5.0));
        assert!(cfg.agent_server_auth);
        assert_eq!(cfg.shape, ServiceShape::default());
        let echo = Args::try_parse_from(["x", "--echo", "--with-quirk", "secrets-never-read"])
            .unwrap()
            .config()
            .unwrap();
        assert_eq!(echo.shape.names(), ["secrets-never-read"]);
        let without = Args::try_parse_from(["x", "--without-quirk", "github-refs,name-filter"])
            .unwrap()
            .config()
            .unwrap();
        assert!(!without.shape.has(Quirk::GithubRefs));
        assert!(!without.shape.has(Quirk::NameFilter));
        assert!(without.shape.has(Quirk::SecretsUnread));
        assert!(Args::try_parse_from(["x", "--without-quirk", "nope"]).is_err());
        assert!(!banner("http://x", &cfg.api_keys).contains("k1"));
    }

    #[test]
    fn throttle_workspace_flags_become_fault_rules() {
        let cfg = Args::try_parse_from([
            "x",
            "--throttle-workspace",
            "ws-1:30",
            "--throttle-workspace",
            "00000000-0000-4000-8000-000000000001:5",
        ])
        .unwrap()
        .config()
        .unwrap();
        assert_eq!(
            cfg.faults.throttled_workspaces,
            [
                ThrottleRule {
                    workspace: "ws-1".into(),
                    retry_after_seconds: 30,
                    after_requests: 0,
                },
                ThrottleRule {
                    workspace: "00000000-0000-4000-8000-000000000001".into(),
                    retry_after_seconds: 5,
                    after_requests: 0,
                },
            ]
        );
        assert!(!cfg.faults.is_off());
        for bad in ["ws-1", "ws-1:soon", ":30"] {
            assert!(
                Args::try_parse_from(["x", "--throttle-workspace", bad]).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn defaults_use_the_demo_key() {
        let cfg = Args::try_parse_from(["control-plane-emulator"])
            .unwrap()
            .config()
            .unwrap();
        assert_eq!(cfg.api_keys[0].key, DEMO_API_KEY);
        assert_eq!(cfg.step_duration, Duration::from_secs(2));
        let line = banner("http://127.0.0.1:8585", &cfg.api_keys);
        assert_eq!(
            line,
            format!(
                "control-plane-emulator listening on http://127.0.0.1:8585 (api key: {DEMO_API_KEY}, workspace: {DEMO_WORKSPACE_ID})"
            )
        );
        assert!(Args::try_parse_from(["x", "--step-seconds", "-1"]).is_err());
        assert!(
            Args::try_parse_from(["x", "--error-rate", "2"])
                .unwrap()
                .config()
                .is_err()
        );
    }
}
