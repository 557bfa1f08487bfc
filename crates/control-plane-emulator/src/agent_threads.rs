//! Threads of the built-in agent server beyond the cron runs': a run on a
//! thread (`POST /threads/{thread_id}/runs/stream`) and `POST
//! /threads/prune`. They share the memory of the cron runs' threads
//! ([`super::agent_store::Crons::runs`]), which `POST /threads/search`
//! reads.
//!
//! Source: docs/control-plane-api.md "Agent server" (runs kept on
//! threads: a run on a thread that does not exist is 404 `Thread or
//! assistant not found.` unless `if_not_exists: create`, which makes it
//! with the run's `metadata` beside `graph_id` and `assistant_id`; prune
//! answers `{"pruned_count": N}`, ids that do not exist counting nothing,
//! an id that is not a UUID 422). Emulator choices: the run ends at once,
//! leaving the thread `idle` with its input as its state (`values`), as
//! the echo graph of `/runs/stream` answers.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, Method};
use axum::response::Response;
use serde_json::{Value, json};
use uuid::Uuid;

use super::agent::{GRAPH_ID, checked_run, run_events, sse, target};
use super::agent_route::{AgentRoute, route};
use super::agent_store::keep_newest;
use super::errors::ApiError;
use super::extract::{JsonBody, OptionalJsonBody, PathIds, decode};
use super::state::EmulatorState;

/// The thread routes.
pub(crate) fn routes() -> Vec<AgentRoute> {
    vec![
        route(Method::POST, "/threads/{thread_id}/runs/stream", stream),
        route(Method::POST, "/threads/prune", prune),
    ]
}

/// `POST /threads/{thread_id}/runs/stream`: the run's events, its thread
/// made (`if_not_exists: create`) or updated.
async fn stream(
    State(state): State<EmulatorState>,
    ids: PathIds,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let (modes, body, assistant) = checked_run(&state, &ids, &headers, body)?;
    let (dep, thread) = (ids.at(0), ids.at(1).to_string());
    let now = jiff::Timestamp::now().to_string();
    state.with_crons(|all| {
        if let Some((_, t)) = all
            .runs
            .iter_mut()
            .find(|(d, t)| *d == dep && t.thread_id == thread)
        {
            t.values = Some(body["input"].clone());
            t.updated_at = Some(now);
            return Ok(());
        }
        if body["if_not_exists"].as_str() != Some("create") {
            return Err(ApiError::not_found("Thread or assistant not found."));
        }
        let mut metadata = body["metadata"].as_object().cloned().unwrap_or_default();
        metadata.insert("graph_id".into(), json!(GRAPH_ID));
        metadata.insert("assistant_id".into(), json!(assistant.to_string()));
        all.runs.push((
            dep,
            agent_server_wire::Thread {
                thread_id: thread.clone(),
                created_at: Some(now.clone()),
                updated_at: Some(now),
                status: Some("idle".into()),
                metadata,
                values: Some(body["input"].clone()),
            },
        ));
        keep_newest(&mut all.runs, dep);
        Ok(())
    })?;
    Ok(sse(run_events(Uuid::new_v4(), &body["input"], &modes)))
}

/// `POST /threads/prune`: deletes the threads named, answering how many
/// there were.
async fn prune(
    State(state): State<EmulatorState>,
    ids: PathIds,
    headers: HeaderMap,
    OptionalJsonBody(body): OptionalJsonBody,
) -> Result<Json<Value>, ApiError> {
    target(&state, &ids, &headers)?;
    let dep = ids.at(0);
    let q: agent_server_wire::ThreadPrune = decode(body)?;
    if q.thread_ids.iter().any(|t| Uuid::parse_str(t).is_err()) {
        return Err(ApiError::new(
            axum::http::StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid thread ID: must be a UUID",
        ));
    }
    let pruned = state.with_crons(|all| {
        let before = all.runs.len();
        all.runs
            .retain(|(d, t)| *d != dep || !q.thread_ids.contains(&t.thread_id));
        before - all.runs.len()
    });
    Ok(Json(
        serde_json::to_value(agent_server_wire::ThreadPruned {
            pruned_count: pruned as u64,
        })
        .unwrap_or_default(),
    ))
}
