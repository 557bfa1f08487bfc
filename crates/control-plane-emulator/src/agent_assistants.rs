//! Assistants on the built-in agent server: `POST /assistants` (with
//! `if_exists`), `GET`/`PATCH`/`DELETE /assistants/{id}`, `POST
//! /assistants/{id}/versions` and `POST /assistants/{id}/latest`, kept in
//! memory per deployment, with the `agent-server-wire` types.
//!
//! Source: docs/control-plane-api.md "Agent server" (facts kept for
//! assistants: `if_exists` `raise` answers 409, `do_nothing` the existing one
//! unchanged; each PATCH makes a new `version` and merges `metadata`; an
//! unknown graph is 404 `Graph 'x' not found. Expected one of: [...]`).
//! Emulator choices: the one graph is `agent`; the deployment's system
//! assistant cannot be changed here.

use agent_server_wire::{
    Assistant, AssistantCreate, AssistantPatch, AssistantVersionChange, IfExists,
};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::agent::{GRAPH_ID, target};
use super::agent_store::Record;
use super::errors::ApiError;
use super::extract::{OptionalJsonBody, PathIds};
use super::state::EmulatorState;

/// The assistant routes.
pub(crate) fn routes() -> Router<EmulatorState> {
    Router::new()
        .route("/agents/{deployment_id}/assistants", post(create))
        .route(
            "/agents/{deployment_id}/assistants/{assistant_id}",
            axum::routing::get(get).patch(patch).delete(delete),
        )
        .route(
            "/agents/{deployment_id}/assistants/{assistant_id}/versions",
            post(versions),
        )
        .route(
            "/agents/{deployment_id}/assistants/{assistant_id}/latest",
            post(latest),
        )
}

fn now() -> String {
    super::store::rfc3339(chrono::Utc::now())
}

fn graph_not_found(graph: &str) -> ApiError {
    ApiError::not_found(format!(
        "Graph '{graph}' not found. Expected one of: ['{GRAPH_ID}']"
    ))
}

fn assistant_not_found(id: Uuid) -> ApiError {
    ApiError::not_found(format!("Assistant '{id}' not found"))
}

/// The body as `T`, or a 422 naming the decode error.
fn decode<T: serde::de::DeserializeOwned>(body: Option<Value>) -> Result<T, ApiError> {
    serde_json::from_value(body.unwrap_or_else(|| json!({}))).map_err(|e| {
        ApiError::validation(vec![
            json!({"type": "invalid", "loc": ["body"], "msg": e.to_string()}),
        ])
    })
}

fn as_json(a: &Assistant) -> Json<Value> {
    Json(serde_json::to_value(a).unwrap_or_default())
}

async fn create(
    State(state): State<EmulatorState>,
    ids: PathIds,
    headers: HeaderMap,
    OptionalJsonBody(body): OptionalJsonBody,
) -> Result<Json<Value>, ApiError> {
    target(&state, &ids, &headers)?;
    let dep = ids.at(0);
    let body: AssistantCreate = decode(body)?;
    if body.graph_id != GRAPH_ID {
        return Err(graph_not_found(&body.graph_id));
    }
    let id = match body.assistant_id.as_deref().map(Uuid::parse_str) {
        None => Uuid::new_v4(),
        Some(Ok(id)) => id,
        Some(Err(_)) => {
            return Err(ApiError::validation(vec![json!({"type": "uuid_parsing",
                "loc": ["body", "assistant_id"], "msg": "Input should be a valid UUID"})]));
        }
    };
    state.with_assistants(|all| {
        if let Some(r) = all.get(&(dep, id)) {
            return match body.if_exists {
                Some(IfExists::DoNothing) => Ok(as_json(&r.serving())),
                _ => Err(ApiError::new(
                    StatusCode::CONFLICT,
                    format!("Assistant '{id}' already exists"),
                )),
            };
        }
        let at = now();
        let a = Assistant {
            assistant_id: id.to_string(),
            graph_id: body.graph_id,
            name: Some(body.name.unwrap_or_else(|| "Untitled".into())),
            description: body.description,
            metadata: body.metadata.unwrap_or_default(),
            config: body.config.unwrap_or_else(|| json!({})),
            context: Some(body.context.unwrap_or_else(|| json!({}))),
            version: Some(1),
            created_at: Some(at.clone()),
            updated_at: Some(at),
        };
        all.insert(
            (dep, id),
            Record {
                versions: vec![a.clone()],
                latest: 1,
            },
        );
        Ok(as_json(&a))
    })
}

async fn get(
    State(state): State<EmulatorState>,
    ids: PathIds,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    target(&state, &ids, &headers)?;
    let key = (ids.at(0), ids.at(1));
    state.with_assistants(|all| {
        all.get(&key)
            .map(|r| as_json(&r.serving()))
            .ok_or_else(|| assistant_not_found(key.1))
    })
}

async fn patch(
    State(state): State<EmulatorState>,
    ids: PathIds,
    headers: HeaderMap,
    OptionalJsonBody(body): OptionalJsonBody,
) -> Result<Json<Value>, ApiError> {
    target(&state, &ids, &headers)?;
    let key = (ids.at(0), ids.at(1));
    let body: AssistantPatch = decode(body)?;
    if let Some(g) = body.graph_id.as_deref().filter(|g| *g != GRAPH_ID) {
        return Err(graph_not_found(g));
    }
    state.with_assistants(|all| {
        let r = all
            .get_mut(&key)
            .ok_or_else(|| assistant_not_found(key.1))?;
        let mut a = r
            .versions
            .iter()
            .max_by_key(|a| a.version)
            .cloned()
            .unwrap_or_default();
        let version = a.version.unwrap_or_default() + 1;
        if let Some(g) = body.graph_id {
            a.graph_id = g;
        }
        if let Some(c) = body.config {
            a.config = c;
        }
        if let Some(c) = body.context {
            a.context = Some(c);
        }
        if let Some(m) = body.metadata {
            let merged: &mut Map<String, Value> = &mut a.metadata;
            merged.extend(m);
        }
        if let Some(n) = body.name {
            a.name = Some(n);
        }
        if let Some(d) = body.description {
            a.description = Some(d);
        }
        a.version = Some(version);
        a.updated_at = Some(now());
        r.versions.push(a.clone());
        r.latest = version;
        Ok(as_json(&a))
    })
}

async fn delete(
    State(state): State<EmulatorState>,
    ids: PathIds,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    target(&state, &ids, &headers)?;
    let key = (ids.at(0), ids.at(1));
    state.with_assistants(|all| {
        all.remove(&key)
            .map(|_| Json(json!({})))
            .ok_or_else(|| assistant_not_found(key.1))
    })
}

async fn versions(
    State(state): State<EmulatorState>,
    ids: PathIds,
    headers: HeaderMap,
    OptionalJsonBody(body): OptionalJsonBody,
) -> Result<Json<Value>, ApiError> {
    target(&state, &ids, &headers)?;
    let key = (ids.at(0), ids.at(1));
    let search: agent_server_wire::AssistantVersionsSearch = decode(body)?;
    state.with_assistants(|all| {
        let r = all.get(&key).ok_or_else(|| assistant_not_found(key.1))?;
        let mut list: Vec<&Assistant> = r
            .versions
            .iter()
            .filter(|a| {
                search
                    .metadata
                    .as_ref()
                    .is_none_or(|m| m.iter().all(|(k, v)| a.metadata.get(k) == Some(v)))
            })
            .collect();
        list.sort_by_key(|a| std::cmp::Reverse(a.version));
        let page: Vec<Value> = list
            .into_iter()
            .skip(search.offset.unwrap_or(0) as usize)
            .take(search.limit.unwrap_or(10) as usize)
            .map(|a| serde_json::to_value(a).unwrap_or_default())
            .collect();
        Ok(Json(Value::Array(page)))
    })
}

async fn latest(
    State(state): State<EmulatorState>,
    ids: PathIds,
    headers: HeaderMap,
    OptionalJsonBody(body): OptionalJsonBody,
) -> Result<Json<Value>, ApiError> {
    target(&state, &ids, &headers)?;
    let key = (ids.at(0), ids.at(1));
    let change: AssistantVersionChange = decode(body)?;
    state.with_assistants(|all| {
        let r = all
            .get_mut(&key)
            .ok_or_else(|| assistant_not_found(key.1))?;
        if !r.versions.iter().any(|a| a.version == Some(change.version)) {
            return Err(ApiError::not_found(format!(
                "Assistant '{}' has no version {}",
                key.1, change.version
            )));
        }
        r.latest = change.version;
        Ok(as_json(&r.serving()))
    })
}
