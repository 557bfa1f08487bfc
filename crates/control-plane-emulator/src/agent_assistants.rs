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
//! assistant cannot be changed here. The answers and the error details are
//! the pinned server's (`contract_agent_server`, a test of agent-operator,
//! sends the same requests to both and compares them).

use agent_server_wire::{
    Assistant, AssistantCreate, AssistantPatch, AssistantVersionChange, IfExists,
};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::agent::{GRAPH_ID, target};
use super::agent_route::{AgentRoute, route};
use super::agent_store::Record;
use super::errors::ApiError;
use super::extract::{OptionalJsonBody, PathIds, decode};
use super::state::EmulatorState;

/// The assistant routes.
pub(crate) fn routes() -> Vec<AgentRoute> {
    vec![
        route(Method::POST, "/assistants", create),
        route(Method::GET, "/assistants/{assistant_id}", get),
        route(Method::PATCH, "/assistants/{assistant_id}", patch),
        route(Method::DELETE, "/assistants/{assistant_id}", delete),
        route(
            Method::POST,
            "/assistants/{assistant_id}/versions",
            versions,
        ),
        route(Method::POST, "/assistants/{assistant_id}/latest", latest),
    ]
}

fn now() -> String {
    super::store::rfc3339(chrono::Utc::now())
}

fn graph_not_found(graph: &str) -> ApiError {
    ApiError::not_found(format!(
        "Graph '{graph}' not found. Expected one of: ['{GRAPH_ID}']"
    ))
}

/// The real server's 404 of `PATCH`, `/versions` and `/latest` for an
/// unknown assistant (`GET` answers `Not Found`, `DELETE` another wording).
fn assistant_not_found(id: Uuid) -> ApiError {
    ApiError::not_found(format!("Assistant {id} not found"))
}

/// The real server's 400 when `config.configurable` and `context` are both
/// non-empty.
const CONFIGURABLE_AND_CONTEXT: &str = "Cannot specify both configurable and context. Prefer \
     setting context alone. Context was introduced in LangGraph 0.6.0 and is the long term \
     planned replacement for configurable.";

/// A non-empty JSON object.
fn filled(v: Option<&Value>) -> bool {
    v.and_then(Value::as_object).is_some_and(|o| !o.is_empty())
}

/// `config` and `context` of a new assistant as the real server keeps them:
/// `config.configurable` and `context` mirror each other (a non-empty
/// `context` becomes `config.configurable`, a non-empty
/// `config.configurable` becomes `context`); both non-empty is a 400.
fn mirrored_create(
    config: Option<Value>,
    context: Option<Value>,
) -> Result<(Value, Value), ApiError> {
    let mut config = config.unwrap_or_else(|| json!({}));
    let mut context = context.unwrap_or_else(|| json!({}));
    let configurable = config.get("configurable").cloned();
    match (filled(configurable.as_ref()), filled(Some(&context))) {
        (true, true) => return Err(ApiError::bad_request(CONFIGURABLE_AND_CONTEXT)),
        (false, true) => config["configurable"] = context.clone(),
        (true, false) => context = configurable.unwrap_or_default(),
        (false, false) => {}
    }
    Ok((config, context))
}

/// `a`'s `config` and `context` after a PATCH carrying `config` and
/// `context`, as the real server does it: an empty `config` is ignored; a
/// non-empty `context` replaces `context` and makes the config `{the PATCH's
/// config, configurable: context}`; an empty one clears `context` alone; a
/// `config` alone replaces it and, when its `configurable` is non-empty,
/// `context` too; both non-empty is a 400.
fn mirrored_patch(
    a: &mut Assistant,
    config: Option<Value>,
    context: Option<Value>,
) -> Result<(), ApiError> {
    let config = config.filter(|c| filled(Some(c)));
    let configurable = config.as_ref().and_then(|c| c.get("configurable")).cloned();
    if filled(configurable.as_ref()) && filled(context.as_ref()) {
        return Err(ApiError::bad_request(CONFIGURABLE_AND_CONTEXT));
    }
    match context {
        Some(ctx) if filled(Some(&ctx)) => {
            let mut c = config.unwrap_or_else(|| json!({}));
            c["configurable"] = ctx.clone();
            a.config = c;
            a.context = Some(ctx);
        }
        Some(ctx) => {
            a.context = Some(ctx);
            if let Some(c) = config {
                a.config = c;
            }
        }
        None => {
            if let Some(c) = config {
                if filled(configurable.as_ref()) {
                    a.context = configurable;
                }
                a.config = c;
            }
        }
    }
    Ok(())
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
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Invalid assistant ID: must be a UUID",
            ));
        }
    };
    state.with_assistants(|all| {
        let (config, context) = mirrored_create(body.config.clone(), body.context.clone())?;
        if let Some(r) = all.get(&(dep, id)) {
            return match body.if_exists {
                Some(IfExists::DoNothing) => Ok(as_json(&r.serving())),
                _ => Err(ApiError::new(
                    StatusCode::CONFLICT,
                    format!("Assistant {id} already exists"),
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
            config,
            context: Some(context),
            version: Some(1),
            created_at: Some(at.clone()),
            updated_at: Some(at),
        };
        all.insert(
            (dep, id),
            Record {
                context: a.context.clone(),
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
            .ok_or_else(|| ApiError::not_found("Not Found"))
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
        // The new version starts from the one that serves (after a
        // `/latest`, an older one) and is numbered after the newest.
        let mut a = r.serving();
        let version = r
            .versions
            .iter()
            .filter_map(|a| a.version)
            .max()
            .unwrap_or_default()
            + 1;
        if let Some(g) = body.graph_id {
            a.graph_id = g;
        }
        mirrored_patch(&mut a, body.config, body.context)?;
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
        r.context = a.context.clone();
        r.versions.push(a.clone());
        r.latest = version;
        Ok(as_json(&a))
    })
}

async fn delete(
    State(state): State<EmulatorState>,
    ids: PathIds,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    target(&state, &ids, &headers)?;
    let key = (ids.at(0), ids.at(1));
    state.with_assistants(|all| {
        all.remove(&key)
            .map(|_| StatusCode::NO_CONTENT.into_response())
            .ok_or_else(|| ApiError::not_found(format!("Assistant with ID {} not found", key.1)))
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
            .map(|a| {
                // A version carries no `updated_at` (a version is never updated).
                let mut v = serde_json::to_value(a).unwrap_or_default();
                if let Some(o) = v.as_object_mut() {
                    o.remove("updated_at");
                }
                v
            })
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
                "Version {} not found for assistant {}",
                change.version, key.1
            )));
        }
        r.latest = change.version;
        Ok(as_json(&r.serving()))
    })
}
