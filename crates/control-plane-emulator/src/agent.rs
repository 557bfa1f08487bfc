//! A minimal built-in agent server at each deployment's `custom_url`
//! (`{public_url}/agents/{deployment_id}`), so a deployment URL answers
//! without running a real `langgraph dev` server.
//!
//! The answers are the `agent-server-wire` types the product's client
//! reads. Sources: docs/control-plane-api.md "Agent server" (`/ok`, `/info`, `/assistants/search` as a
//! bare array with a default assistant per graph, `metadata.created_by =
//! "system"`, `/runs/stream` as `text/event-stream` starting with a
//! `metadata` event `{run_id, attempt}`, `updates` data `{node: update}`,
//! ending with `event: end`; cloud deployments require `X-Api-Key` of the
//! owning organization). Emulator choices: one graph, `agent`, that echoes
//! its input as the update of node `echo` (and as the state for `values`;
//! other stream modes emit nothing); the server answers 404 for an unknown or
//! deleted deployment and 503 until the deployment has an active
//! (`DEPLOYED`) revision; the key check can be turned off
//! ([`super::EmulatorConfig::agent_server_auth`]). A fault for tests of
//! verification: while the active revision's `image_uri` or `repo_ref`
//! contains [`UNHEALTHY_MARK`], the server serves no graph (the assistant
//! search finds nothing, a run of `agent` is 404), as a revision that
//! deployed but broke its graph would.

use std::convert::Infallible;

use agent_server_wire::{Assistant, ServerInfo};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::sse::{Event, Sse};
use axum::response::{Html, IntoResponse, Response};
use serde_json::{Value, json};
use uuid::Uuid;

use super::agent_route::{AgentRoute, route};
use super::auth::header;
use super::errors::ApiError;
use super::extract::{JsonBody, OptionalJsonBody, PathIds};
use super::state::EmulatorState;
use super::store::rfc3339;
use super::validate::{self, ASSISTANT_SEARCH, RUN_STREAM};
use super::workspace::same_workspace;

/// The graph every built-in agent server serves.
pub const GRAPH_ID: &str = "agent";

/// A revision whose `image_uri` or `repo_ref` contains this text deploys,
/// but its agent server serves no graph (an emulator fault, for tests of
/// verification and rollback).
pub const UNHEALTHY_MARK: &str = "unhealthy";

/// True when the revision configuration `config` carries [`UNHEALTHY_MARK`].
fn unhealthy(config: &control_plane_wire::types::SourceRevisionConfig) -> bool {
    [&config.image_uri, &config.repo_ref]
        .into_iter()
        .flatten()
        .any(|v| v.contains(UNHEALTHY_MARK))
}

/// The agent server's own routes (health, info, docs, search, runs).
pub(crate) fn agent_routes() -> Vec<AgentRoute> {
    vec![
        route(Method::GET, "/ok", ok),
        route(Method::GET, "/info", info),
        route(Method::GET, "/docs", docs),
        route(Method::POST, "/assistants/search", search),
        route(Method::POST, "/runs/stream", stream),
    ]
}

/// What a request to a deployment's agent server may use.
pub(crate) struct Target {
    pub(crate) assistant: Value,
    assistant_id: Uuid,
    /// The active revision serves its graph (no [`UNHEALTHY_MARK`]).
    serves_graph: bool,
}

fn not_found() -> ApiError {
    ApiError::not_found("Not Found")
}

/// Finds the deployment, checks the key and that a revision serves.
pub(crate) fn target(
    state: &EmulatorState,
    ids: &PathIds,
    headers: &HeaderMap,
) -> Result<Target, ApiError> {
    let id = ids.at(0);
    state.with_store(|store, now| {
        let d = store
            .get_any(&id)
            .filter(|d| d.deleted.is_none())
            .ok_or_else(not_found)?;
        if state.config().agent_server_auth {
            let key = header(headers, "x-api-key").ok_or_else(|| {
                ApiError::unauthorized("Missing API key: send it in the X-Api-Key header.")
            })?;
            let mut entries = state
                .config()
                .api_keys
                .iter()
                .filter(|k| k.key == key)
                .peekable();
            if entries.peek().is_none() {
                return Err(ApiError::unauthorized("Invalid API key."));
            }
            if !entries.any(|k| same_workspace(&k.workspace_id, &d.tenant_id)) {
                return Err(ApiError::forbidden(
                    "The API key does not belong to the organization of this deployment.",
                ));
            }
        }
        let Some(active) = d.active(now) else {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("Deployment {id} has no active revision yet."),
            ));
        };
        let serves_graph = !unhealthy(&active.config);
        let created = rfc3339(d.created.wall);
        Ok(Target {
            serves_graph,
            assistant_id: d.assistant_id,
            assistant: serde_json::to_value(Assistant {
                assistant_id: d.assistant_id.to_string(),
                graph_id: GRAPH_ID.into(),
                config: json!({}),
                context: Some(json!({})),
                metadata: serde_json::Map::from_iter([("created_by".into(), json!("system"))]),
                name: Some(GRAPH_ID.into()),
                description: None,
                version: Some(1),
                created_at: Some(created.clone()),
                updated_at: Some(created),
            })
            .unwrap_or_default(),
        })
    })
}

async fn ok(
    State(state): State<EmulatorState>,
    ids: PathIds,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    target(&state, &ids, &headers)?;
    Ok(Json(json!({ "ok": true })))
}

async fn info(
    State(state): State<EmulatorState>,
    ids: PathIds,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    target(&state, &ids, &headers)?;
    let info = ServerInfo {
        version: Some(format!("emulator-{}", env!("CARGO_PKG_VERSION"))),
        flags: json!({"assistants": true, "crons": true, "langsmith": false}),
        extra: Default::default(),
    };
    Ok(Json(serde_json::to_value(info).unwrap_or_default()))
}

async fn docs(
    State(state): State<EmulatorState>,
    ids: PathIds,
    headers: HeaderMap,
) -> Result<Html<String>, ApiError> {
    target(&state, &ids, &headers)?;
    Ok(Html(format!(
        "<!doctype html><title>Agent server (emulated)</title>\
         <h1>Agent server of deployment {}</h1>\
         <p>Emulated endpoints: GET /ok, GET /info, POST /assistants/search, POST /runs/stream, POST /assistants, GET/PATCH/DELETE /assistants/{{id}}, POST /assistants/{{id}}/versions, POST /assistants/{{id}}/latest, POST /runs/crons, POST /runs/crons/search, PATCH/DELETE /runs/crons/{{id}}, POST /threads/search, POST /threads/{{id}}/runs/stream, POST /threads/prune.</p>",
        ids.at(0)
    )))
}

async fn search(
    State(state): State<EmulatorState>,
    ids: PathIds,
    headers: HeaderMap,
    OptionalJsonBody(body): OptionalJsonBody,
) -> Result<Response, ApiError> {
    let t = target(&state, &ids, &headers)?;
    let mut body = body.unwrap_or_else(|| json!({}));
    validate::check(&mut body, &ASSISTANT_SEARCH, &[json!("body")])
        .map_err(ApiError::validation)?;
    let a = &t.assistant;
    let matches = t.serves_graph
        && body["metadata"]
            .as_object()
            .is_none_or(|m| m.iter().all(|(k, v)| a["metadata"].get(k) == Some(v)))
        && body["graph_id"].as_str().is_none_or(|g| g == GRAPH_ID)
        && body["name"].as_str().is_none_or(|n| n == GRAPH_ID);
    let mut all: Vec<Value> = if matches { vec![a.clone()] } else { Vec::new() };
    all.extend(
        state
            .with_assistants(|all| crate::agent_store::listed(all, ids.at(0)))
            .into_iter()
            .filter(|a| {
                body["metadata"]
                    .as_object()
                    .is_none_or(|m| m.iter().all(|(k, v)| a["metadata"].get(k) == Some(v)))
                    && body["graph_id"].as_str().is_none_or(|g| a["graph_id"] == g)
                    && body["name"].as_str().is_none_or(|n| a["name"] == n)
            }),
    );
    let limit = body["limit"].as_u64().unwrap_or(10) as usize;
    let offset = body["offset"].as_u64().unwrap_or(0) as usize;
    let page: Vec<Value> = all.iter().skip(offset).take(limit).cloned().collect();
    let mut res = Json(page).into_response();
    if offset + limit < all.len() {
        res.headers_mut().insert(
            "x-pagination-next",
            HeaderValue::from((offset + limit) as u64),
        );
    }
    Ok(res)
}

/// `stream_mode` as a list: a string, a list of strings, or the default
/// `["values"]` (docs/control-plane-api.md "Agent server").
fn stream_modes(v: &Value) -> Result<Vec<String>, ApiError> {
    match v {
        Value::Null => Ok(vec!["values".into()]),
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(items) if items.iter().all(Value::is_string) => Ok(items
            .iter()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect()),
        _ => Err(ApiError::validation(vec![super::errors::issue(
            "string_type",
            &[json!("body"), json!("stream_mode")],
            "Input should be a valid string or a list of strings",
            None,
            None,
        )])),
    }
}

/// The SSE events of one echo run.
pub(crate) fn run_events(run_id: Uuid, input: &Value, modes: &[String]) -> Vec<(String, String)> {
    let mut events = vec![(
        "metadata".to_owned(),
        json!({ "run_id": run_id.to_string(), "attempt": 1 }).to_string(),
    )];
    for mode in modes {
        match mode.as_str() {
            "values" => events.push(("values".into(), input.to_string())),
            "updates" => events.push(("updates".into(), json!({ "echo": input }).to_string())),
            _ => {}
        }
    }
    events.push(("end".into(), "null".into()));
    events
}

async fn stream(
    State(state): State<EmulatorState>,
    ids: PathIds,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let (modes, body, _) = checked_run(&state, &ids, &headers, body)?;
    Ok(sse(run_events(Uuid::new_v4(), &body["input"], &modes)))
}

/// The body of a run (stateless or on a thread) checked: the key, the
/// shape, and that its assistant serves; its stream modes, the body and
/// the id of the deployment's assistant.
pub(crate) fn checked_run(
    state: &EmulatorState,
    ids: &PathIds,
    headers: &HeaderMap,
    mut body: Value,
) -> Result<(Vec<String>, Value, Uuid), ApiError> {
    let t = target(state, ids, headers)?;
    validate::check(&mut body, &RUN_STREAM, &[json!("body")]).map_err(ApiError::validation)?;
    let assistant = body["assistant_id"].as_str().unwrap_or_default();
    let known = t.serves_graph
        && (assistant == GRAPH_ID || Uuid::parse_str(assistant).is_ok_and(|u| u == t.assistant_id));
    if !known {
        return Err(ApiError::not_found(format!(
            "Assistant {assistant} not found."
        )));
    }
    let modes = stream_modes(&body["stream_mode"])?;
    Ok((modes, body, t.assistant_id))
}

/// `events` as a `text/event-stream` answer.
pub(crate) fn sse(events: Vec<(String, String)>) -> Response {
    let stream = futures::stream::iter(
        events
            .into_iter()
            .map(|(name, data)| Ok::<_, Infallible>(Event::default().event(name).data(data))),
    );
    Sse::new(stream).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_run_events() {
        let id = Uuid::nil();
        let input = json!({"messages": [{"role": "user", "content": "hi"}]});
        let ev = run_events(id, &input, &["updates".into()]);
        assert_eq!(ev.len(), 3);
        assert_eq!(ev[0].0, "metadata");
        let meta: Value = serde_json::from_str(&ev[0].1).unwrap();
        assert_eq!(meta, json!({"run_id": id.to_string(), "attempt": 1}));
        assert_eq!(ev[1].0, "updates");
        assert_eq!(
            serde_json::from_str::<Value>(&ev[1].1).unwrap(),
            json!({"echo": input})
        );
        assert_eq!(ev[2], ("end".into(), "null".into()));
    }

    #[test]
    fn stream_mode_shapes() {
        assert_eq!(stream_modes(&Value::Null).unwrap(), vec!["values"]);
        assert_eq!(stream_modes(&json!("updates")).unwrap(), vec!["updates"]);
        assert_eq!(
            stream_modes(&json!(["values", "updates"])).unwrap(),
            vec!["values", "updates"]
        );
        assert!(stream_modes(&json!(3)).is_err());
    }
}
