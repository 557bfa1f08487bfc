//! One route of the built-in agent server: its method, its path under a
//! deployment's agent server URL and its handler, kept together so that the
//! list of routes the emulator serves ([`crate::agent_server_routes`]) is
//! read from the router itself and cannot drift from it (a contract test of
//! agent-operator compares that list with the real server's
//! `/openapi.json`).

use axum::Router;
use axum::handler::Handler;
use axum::routing::{MethodFilter, MethodRouter, on};
use http::Method;

use super::state::EmulatorState;

/// Where every built-in agent server is mounted: a deployment's
/// `custom_url` is `{public_url}/agents/{deployment_id}`.
pub(crate) const MOUNT: &str = "/agents/{deployment_id}";

/// One route: `method` `path` (under [`MOUNT`]) answered by `handler`.
pub(crate) struct AgentRoute {
    /// The HTTP method.
    pub(crate) method: Method,
    /// The path under the deployment's agent server URL, with the real
    /// server's parameter names (`/assistants/{assistant_id}`).
    pub(crate) path: &'static str,
    handler: MethodRouter<EmulatorState>,
}

/// The route `method` `path` answered by `handler`.
///
/// Panics when `method` is not one axum routes by (GET, POST, PATCH,
/// DELETE, PUT, HEAD, OPTIONS, TRACE): a programming error.
pub(crate) fn route<H, T>(method: Method, path: &'static str, handler: H) -> AgentRoute
where
    H: Handler<T, EmulatorState>,
    T: 'static,
{
    let filter = MethodFilter::try_from(method.clone()).expect("a method axum routes by");
    AgentRoute {
        method,
        path,
        handler: on(filter, handler),
    }
}

/// The router of `routes`, each mounted under [`MOUNT`]; the method routers
/// of one path are merged.
pub(crate) fn router(routes: Vec<AgentRoute>) -> Router<EmulatorState> {
    let mut by_path: Vec<(&'static str, MethodRouter<EmulatorState>)> = Vec::new();
    for r in routes {
        match by_path.iter_mut().find(|(p, _)| *p == r.path) {
            Some((_, m)) => *m = std::mem::take(m).merge(r.handler),
            None => by_path.push((r.path, r.handler)),
        }
    }
    by_path
        .into_iter()
        .fold(Router::new(), |router, (path, m)| {
            router.route(&format!("{MOUNT}{path}"), m)
        })
}
