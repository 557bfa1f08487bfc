//! The control plane emulator: an axum server of the control plane REST API
//! (server side of [`control_plane_wire::types`]), plus a minimal agent
//! server per deployment and admin routes for tests.
//!
//! Source: docs/control-plane-api.md (the API as the public sources and the
//! official clients show it). Where it is silent, the choice is documented
//! on the module that makes it: [`routes`] (status codes, list order and
//! paging), [`rules`] (create and patch checks), [`auth`], [`timeline`]
//! (revision life), [`agent`], [`admin`], [`faults`], [`stats`], `datasets`.
//!
//! Routes:
//! - control plane, at the root and under `/api-host` (self-hosted), with
//!   `X-Api-Key` + `X-Tenant-Id`: `/v2/deployments[/{id}[/revisions[/{rid}]]]`,
//!   `/v2/listeners[/{id}]`, `/v1/integrations/github/install`,
//!   `/v1/integrations/github/{id}/repos`;
//! - LangSmith datasets (`src/datasets.rs`), at the root and
//!   under `/api/v1`, with the same key: `/info`, `/datasets[/{id}]`,
//!   `/examples[/{id}]`, the multipart upload
//!   `[/v1]/platform/datasets/{id}/examples`;
//! - agent servers: `/agents/{deployment_id}/{ok,info,docs,assistants[/...],runs/stream,runs/crons[/...]}`;
//! - admin (no key): `/_emulator/...`.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use control_plane_emulator::{self as emulator, EmulatorConfig};
//! let emu = emulator::spawn(EmulatorConfig::default()).await?;
//! println!("control plane at {}", emu.base_url());
//! emu.shutdown().await;
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

pub mod admin;
pub mod agent;
mod agent_assistants;
mod agent_crons;
mod agent_route;
mod agent_store;
mod agent_threads;
pub mod auth;
pub mod cli;
pub mod config;
mod cron_schedule;
mod dataset_store;
mod datasets;
pub mod errors;
mod extract;
pub mod faults;
pub mod logs;
pub mod routes;
pub mod rules;
pub mod scenario;
pub mod shape;
pub mod state;
pub mod stats;
mod store;
mod sync;
pub mod telemetry;
pub mod timeline;
mod validate;
mod workspace;

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use config::{
    ApiKey, DEFAULT_MAX_BODY_BYTES, DEMO_API_KEY, DEMO_WORKSPACE_ID, EmulatorConfig,
    IntegrationSeed, ListenerSeed,
};
pub use faults::{FaultConfig, RejectRule, ThrottleRule};
pub use scenario::{ScenarioField, ScenarioRule};
pub use shape::{Quirk, ServiceShape};
pub use state::EmulatorState;
pub use timeline::Outcome;

/// How long [`RunningEmulator::shutdown`] waits for open requests before it
/// aborts the server task.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Every route of the built-in agent server, in routing order.
fn agent_server() -> Vec<agent_route::AgentRoute> {
    let mut all = agent::agent_routes();
    all.extend(agent_assistants::routes());
    all.extend(agent_crons::routes());
    all.extend(agent_threads::routes());
    all
}

/// The routes the built-in agent server serves, as (method, path under a
/// deployment's agent server URL, with the real server's parameter names:
/// `/assistants/{assistant_id}`), read from the routes [`router`] mounts
/// under `/agents/{deployment_id}`, so that the list is what is served. A
/// contract test compares it with the real server's `/openapi.json`
/// (docs/control-plane-api.md "Agent server").
pub fn agent_server_routes() -> Vec<(http::Method, &'static str)> {
    agent_server()
        .into_iter()
        .map(|r| (r.method, r.path))
        .collect()
}

/// The whole emulator as an axum router: control plane routes (root and
/// `/api-host`), agent servers, admin routes, FastAPI-style 404/405, the
/// body limit (413) and request counting. Each middleware gets only its
/// piece of `state`: authentication the start configuration, fault
/// injection its faults (with the counts and the shutdown signal), counting
/// the counts.
pub fn router(state: EmulatorState) -> Router {
    // Fault injection, then the API key, on the routes that need a key.
    let keyed = |routes: Router<EmulatorState>| {
        routes
            .route_layer(middleware::from_fn_with_state(
                state.fault_injector(),
                faults::inject_faults,
            ))
            .route_layer(middleware::from_fn_with_state(
                state.auth(),
                auth::require_api_key,
            ))
    };
    let api = keyed(routes::api_routes());
    // LangSmith's datasets: at the root (the cloud's `api_url`) and under
    // `/api/v1` (a self-hosted one's).
    let datasets = |platform: &str| keyed(datasets::routes(platform));
    Router::new()
        .merge(api.clone())
        .nest("/api-host", api)
        .merge(datasets("/v1"))
        .nest("/api/v1", datasets(""))
        .merge(admin::admin_routes())
        .merge(agent_route::router(agent_server()))
        .fallback(errors::not_found_fallback)
        .method_not_allowed_fallback(errors::method_not_allowed_fallback)
        .layer(middleware::from_fn_with_state(
            state.stats(),
            stats::count_requests,
        ))
        .layer(DefaultBodyLimit::max(state.config().max_body_bytes))
        .with_state(state)
}

/// A request body the emulator parses and validates, named by its route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestBody {
    /// `POST /v2/deployments`: required.
    DeploymentCreate,
    /// `PATCH /v2/deployments/{id}`: required.
    DeploymentPatch,
    /// The agent server's `POST /assistants/search`: an empty body is `{}`.
    AssistantSearch,
    /// The agent server's `POST /runs/stream`: required.
    RunStream,
}

/// Parses and validates a request body the way the route of `kind` does
/// before it reads any state: JSON by `content_type` as FastAPI does (see
/// the `Content-Type` rules on the body extractor), then the pydantic-style
/// field checks and coercions. Returns the coerced JSON value the handler
/// goes on with.
///
/// What answers earlier on a real request is not part of it: the API key,
/// the path ids, the agent server's deployment lookup, and the body size
/// limit (413). Pure, no IO: it exists so that the decoder of untrusted
/// request bytes can be fuzzed (`fuzz/`) and tested alone.
///
/// Errors: the 422 [`errors::ApiError`] the route answers, FastAPI-shaped
/// (`{"detail": [{"type", "loc", "msg", ...}]}`), never carrying the value
/// of a secret.
pub fn validate_request_body(
    kind: RequestBody,
    content_type: Option<&str>,
    body: &[u8],
) -> Result<serde_json::Value, errors::ApiError> {
    let parsed = extract::parse_body(content_type, body)?;
    let (value, ty) = match kind {
        RequestBody::DeploymentCreate => (parsed, &validate::DEPLOYMENT_CREATE),
        RequestBody::DeploymentPatch => (parsed, &validate::DEPLOYMENT_PATCH),
        RequestBody::AssistantSearch => (
            Some(parsed.unwrap_or_else(|| serde_json::json!({}))),
            &validate::ASSISTANT_SEARCH,
        ),
        RequestBody::RunStream => (parsed, &validate::RUN_STREAM),
    };
    let mut value = value.ok_or_else(extract::missing_body)?;
    validate::check(&mut value, ty, &[serde_json::json!("body")])
        .map_err(errors::ApiError::validation)?;
    Ok(value)
}

/// An emulator serving in a background tokio task. Dropping it without
/// [`RunningEmulator::shutdown`] also asks the server to stop (gracefully, in
/// the background).
#[derive(Debug)]
pub struct RunningEmulator {
    /// The bound address.
    pub addr: SocketAddr,
    state: EmulatorState,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl RunningEmulator {
    /// `http://HOST:PORT` of the control plane (loopback when bound to an
    /// unspecified address such as `0.0.0.0`).
    pub fn base_url(&self) -> String {
        format!("http://{}", reachable(self.addr))
    }

    /// The shared state (scenario rules, faults, counts, store dump).
    pub fn state(&self) -> &EmulatorState {
        &self.state
    }

    /// Stops accepting connections, lets open requests finish (hung fault
    /// requests are released) for up to [`SHUTDOWN_GRACE`], then aborts.
    pub async fn shutdown(mut self) {
        self.state.signal_shutdown();
        if let Some(mut task) = self.task.take() {
            match tokio::time::timeout(SHUTDOWN_GRACE, &mut task).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => tracing::warn!(error = %e, "emulator server ended with an error"),
                Ok(Err(e)) => tracing::warn!(error = %e, "emulator server task failed"),
                Err(_) => {
                    tracing::warn!("emulator did not stop in time; aborting");
                    task.abort();
                }
            }
        }
    }

    /// Waits until the server task ends (it only ends after
    /// [`EmulatorState::signal_shutdown`] or an accept error).
    pub async fn wait(mut self) -> std::io::Result<()> {
        match self.task.take() {
            Some(task) => task.await.map_err(std::io::Error::other)?,
            None => Ok(()),
        }
    }
}

impl Drop for RunningEmulator {
    fn drop(&mut self) {
        if self.task.is_some() {
            self.state.signal_shutdown();
        }
    }
}

/// The address to reach a server bound to `addr` from this machine.
fn reachable(addr: SocketAddr) -> SocketAddr {
    let mut a = addr;
    if a.ip().is_unspecified() {
        a.set_ip(match addr {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    a
}

/// Binds [`EmulatorConfig::listen_addr`] (default `127.0.0.1:0`, a free port)
/// and serves in a spawned tokio task. Errors: the bind error, or those of
/// [`spawn_on`].
pub async fn spawn(config: EmulatorConfig) -> std::io::Result<RunningEmulator> {
    let listener = TcpListener::bind(config.listen_addr).await?;
    spawn_on(listener, config).await
}

/// Serves on an already bound listener in a spawned tokio task. The
/// `custom_url` base is [`EmulatorConfig::public_url`], else
/// `http://{bound address}`. Errors: the listener's address cannot be read;
/// `InvalidInput` when [`EmulatorConfig::faults`] is invalid
/// ([`FaultConfig::validate`]).
pub async fn spawn_on(
    listener: TcpListener,
    config: EmulatorConfig,
) -> std::io::Result<RunningEmulator> {
    config
        .faults
        .validate()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let addr = listener.local_addr()?;
    let state = EmulatorState::new(config, format!("http://{}", reachable(addr)));
    let app = router(state.clone());
    let stop = state.clone();
    let task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.shutdown_requested().await })
            .await
    });
    tracing::debug!(%addr, "control plane emulator serving");
    Ok(RunningEmulator {
        addr,
        state,
        task: Some(task),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn request_bodies_are_validated_as_their_routes_do() {
        let create =
            br#"{"name":"a","source":"external_docker","source_config":{"build_on_push":"yes"},
            "source_revision_config":{"image_uri":"i","repo_commit_sha":"x"},"secrets":[]}"#;
        let v = validate_request_body(RequestBody::DeploymentCreate, None, create).unwrap();
        assert_eq!(v["source_config"]["build_on_push"], json!(true));
        assert_eq!(v["source_revision_config"], json!({"image_uri": "i"}));
        let e = validate_request_body(RequestBody::DeploymentPatch, None, b"").unwrap_err();
        assert_eq!(e.body()["detail"][0]["type"], "missing");
        let v = validate_request_body(RequestBody::AssistantSearch, None, b"").unwrap();
        assert_eq!(v, json!({}));
        let e =
            validate_request_body(RequestBody::RunStream, Some("text/plain"), b"{}").unwrap_err();
        assert_eq!(e.body()["detail"][0]["type"], "model_attributes_type");
    }
}
