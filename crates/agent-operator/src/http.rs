//! The operator's HTTP endpoints (axum): `/metrics` (OpenMetrics text),
//! `/livez` and `/readyz`. With a [`MetricsAuth`] (`--metrics-authorization`),
//! `/metrics` answers only a bearer token whose identity may `get /metrics`
//! (401 without, 403 without the grant, 503 when the API server does not
//! answer); `/livez` and `/readyz` stay open for the kubelet's probes.
//!
//! - `/livez` answers 200 as long as the process serves HTTP.
//! - `/readyz` answers 200 once the controllers' watches have listed every
//!   watched namespace ([`Health::set_synced`]), and also on a *standby*
//!   replica waiting for the leader lease ([`Health::set_standby`]): a standby
//!   is healthy and ready to take over, and a Deployment rolling out a new
//!   replica beside the leader would never finish if standbys were unready.
//!   A standby that has not read the Lease within
//!   [`crate::leader::STANDBY_READ_WINDOW`] (its RBAC removed, the API
//!   server unreachable) could not take over: 503 "lease unreadable".
//!   It answers 503 while the controllers start and after shutdown began.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;

use crate::metrics::{Metrics, OPENMETRICS_CONTENT_TYPE};
use crate::metrics_auth::{MetricsAuth, Verdict};

const STARTING: u8 = 0;
const STANDBY: u8 = 1;
const SYNCED: u8 = 2;
const STOPPING: u8 = 3;

/// Readiness of this replica, shared between `main`, the controller runner
/// and the `/readyz` handler. Clones share the state.
#[derive(Clone, Debug, Default)]
pub struct Health(Arc<AtomicU8>);

impl Health {
    /// A replica that is starting: not ready.
    pub fn new() -> Self {
        Self::default()
    }

    /// This replica waits for the leader lease: ready while it can read the
    /// Lease (see the module docs).
    pub fn set_standby(&self) {
        self.0.store(STANDBY, Ordering::SeqCst);
    }

    /// This replica leads and its controllers start: not ready until synced.
    pub fn set_starting(&self) {
        self.0.store(STARTING, Ordering::SeqCst);
    }

    /// The controllers' watches have synced: ready.
    pub fn set_synced(&self) {
        self.0.store(SYNCED, Ordering::SeqCst);
    }

    /// Shutdown began: not ready.
    pub fn set_stopping(&self) {
        self.0.store(STOPPING, Ordering::SeqCst);
    }

    /// `(ready, what)`: whether `/readyz` answers 200, and the word it says.
    pub fn state(&self) -> (bool, &'static str) {
        match self.0.load(Ordering::SeqCst) {
            STANDBY if crate::leader::lease_readable() => (true, "standby"),
            STANDBY => (false, "lease unreadable"),
            SYNCED => (true, "ok"),
            STOPPING => (false, "stopping"),
            _ => (false, "starting"),
        }
    }
}

#[derive(Clone)]
struct AppState {
    metrics: Arc<Metrics>,
    health: Health,
    auth: Option<Arc<MetricsAuth>>,
}

/// The router of `/metrics`, `/livez` and `/readyz`, `/metrics` open.
pub fn router(metrics: Arc<Metrics>, health: Health) -> Router {
    router_with(metrics, health, None)
}

/// The router of `/metrics`, `/livez` and `/readyz`; with `auth`,
/// `/metrics` is reviewed (see the module docs).
pub fn router_with(
    metrics: Arc<Metrics>,
    health: Health,
    auth: Option<Arc<MetricsAuth>>,
) -> Router {
    Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/livez", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(AppState {
            metrics,
            health,
            auth,
        })
}

async fn metrics_handler(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(auth) = &state.auth {
        let authorization = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        match auth.check(authorization).await {
            Verdict::Allowed => {}
            Verdict::Unauthenticated => {
                return (
                    StatusCode::UNAUTHORIZED,
                    [(header::WWW_AUTHENTICATE, "Bearer")],
                    "a bearer token that may get /metrics is required\n",
                )
                    .into_response();
            }
            Verdict::Forbidden => {
                return (
                    StatusCode::FORBIDDEN,
                    "this identity may not get /metrics\n",
                )
                    .into_response();
            }
            Verdict::Unavailable => {
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "cannot review the token now\n",
                )
                    .into_response();
            }
        }
    }
    match state.metrics.encode() {
        Ok(body) => ([(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)], body).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

async fn readyz(State(state): State<AppState>) -> (StatusCode, &'static str) {
    match state.health.state() {
        (true, what) => (StatusCode::OK, what),
        (false, what) => (StatusCode::SERVICE_UNAVAILABLE, what),
    }
}

/// Serves [`router`] on `listener` until `shutdown` resolves (then lets
/// in-flight requests finish).
///
/// Errors: an I/O error of the listener.
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    health: Health,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, metrics, health, None, shutdown).await
}

/// [`serve`] with `/metrics` reviewed by `auth` when given.
///
/// Errors: an I/O error of the listener.
pub async fn serve_with(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    health: Health,
    auth: Option<Arc<MetricsAuth>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router_with(metrics, health, auth))
        .with_graceful_shutdown(shutdown)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String, String) {
        let res = reqwest::get(format!("http://{addr}{path}")).await.unwrap();
        let status = res.status().as_u16();
        let content_type = res
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        (status, content_type, res.text().await.unwrap())
    }

    #[tokio::test]
    async fn endpoints_follow_the_health_state() {
        crate::controlplane::client::install_crypto_provider();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let metrics = Arc::new(Metrics::new());
        metrics.observe_reconcile("AgentDeployment", None, false, std::time::Duration::ZERO);
        let health = Health::new();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, metrics, health.clone(), async {
            let _ = stopped.await;
        }));

        assert_eq!(get(addr, "/livez").await.0, 200);
        assert_eq!(get(addr, "/readyz").await.0, 503, "not synced yet");
        health.set_standby();
        let (status, _, body) = get(addr, "/readyz").await;
        assert_eq!(
            (status, body.as_str()),
            (503, "lease unreadable"),
            "a standby that never read the Lease could not take over"
        );
        crate::leader::lease_read_now();
        let (status, _, body) = get(addr, "/readyz").await;
        assert_eq!((status, body.as_str()), (200, "standby"));
        health.set_starting();
        assert_eq!(get(addr, "/readyz").await.0, 503);
        health.set_synced();
        assert_eq!(get(addr, "/readyz").await.0, 200);
        health.set_stopping();
        assert_eq!(get(addr, "/readyz").await.0, 503);
        assert_eq!(get(addr, "/livez").await.0, 200, "live while running");

        let (status, content_type, body) = get(addr, "/metrics").await;
        assert_eq!(status, 200);
        assert_eq!(content_type, OPENMETRICS_CONTENT_TYPE);
        assert!(
            body.contains(
                r#"agent_operator_reconciles_total{kind="AgentDeployment",outcome="success"} 1"#
            ),
            "{body}"
        );

        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
    }
}
