//! Request counts per route template and status, served by
//! `GET /_emulator/requests` so tests can assert how a client behaved (how
//! many polls, retries, 429s). An emulator feature.

use std::collections::BTreeMap;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use serde_json::{Value, json};

use super::faults::FaultMark;
use super::state::EmulatorState;

/// Counts of answered requests: `"METHOD /route/{template}"` → status → count.
#[derive(Debug, Default)]
pub(crate) struct RequestStats {
    total: u64,
    routes: BTreeMap<String, BTreeMap<String, u64>>,
}

impl RequestStats {
    /// Counts one request of `route` answered with `status` (a number, or
    /// `dropped` / `hung`).
    pub fn record(&mut self, route: &str, status: &str) {
        self.total += 1;
        *self
            .routes
            .entry(route.to_owned())
            .or_default()
            .entry(status.to_owned())
            .or_default() += 1;
    }

    /// `{"total": N, "routes": {"GET /v2/deployments": {"200": 3}}}`.
    pub fn to_json(&self) -> Value {
        json!({ "total": self.total, "routes": self.routes })
    }
}

/// Outermost middleware: counts every request except the admin routes, and
/// logs method, route template, status and duration (never headers or bodies).
pub(crate) async fn count_requests(
    State(state): State<EmulatorState>,
    req: Request,
    next: Next,
) -> Response {
    if req.uri().path().starts_with("/_emulator") {
        return next.run(req).await;
    }
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_owned())
        .unwrap_or_else(|| "<unmatched>".to_owned());
    let key = format!("{} {route}", req.method());
    let started = Instant::now();
    let res = next.run(req).await;
    let status = match res.extensions().get::<FaultMark>() {
        Some(FaultMark::Counted) => None,
        Some(FaultMark::Dropped) => Some("dropped".to_owned()),
        None => Some(res.status().as_u16().to_string()),
    };
    if let Some(status) = status {
        tracing::debug!(
            request = %key,
            %status,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "request"
        );
        state.record_request(&key, &status);
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_route_and_status() {
        let mut s = RequestStats::default();
        s.record("GET /v2/deployments", "200");
        s.record("GET /v2/deployments", "200");
        s.record("GET /v2/deployments", "429");
        assert_eq!(
            s.to_json(),
            json!({"total": 3, "routes": {"GET /v2/deployments": {"200": 2, "429": 1}}})
        );
    }
}
