//! LangSmith datasets and examples: what the official `langsmith` Python
//! client (0.15) reads and writes, relative to its `api_url`, which is the
//! emulator's root for the cloud shape and `/api/v1` for the self-hosted
//! one (docs/control-plane-api.md, "LangSmith datasets").
//!
//! - `GET /info`: `instance_flags.dataset_examples_multipart_enabled`
//!   true, which the client reads before it uploads examples;
//! - `GET /sessions` (the tracing projects): one, `default`, whose
//!   `tenant_id` (the workspace) the client keeps after its first read (it
//!   asks again for every object it builds until one answers);
//! - `POST /datasets` (JSON: `name`, optional `description`, `data_type`)
//!   answers the dataset; `GET /datasets` (`name`, `limit` up to 100,
//!   `offset`) a bare array; `GET /datasets/{id}`; `DELETE /datasets/{id}`;
//! - `GET /examples` (`dataset`, `limit` up to 100, `offset`) a bare array;
//!   `GET /examples/{id}`;
//! - `POST /v1/platform/datasets/{id}/examples` (`/platform/...` under
//!   `/api/v1`): a multipart body with, per example, a part named by its id
//!   (JSON: `created_at`, `metadata`, `split`) and the parts `<id>.inputs`
//!   and `<id>.outputs` (JSON objects); answers `{"example_ids", "count"}`.
//!
//! An unknown id is 404 with a FastAPI `detail` (the client raises
//! `LangSmithNotFoundError`); an id that is not a uuid, in the path or in
//! `dataset`, and a body that is not what the client sends are 422, as
//! for the control plane's routes.
//! Emulator choices (no source says): lists in creation order; a dataset
//! name already used in the workspace is 409; a dataset's examples go with
//! it; datasets belong to the workspace of the API key, like deployments.

use std::collections::HashMap;

use axum::Json;
use axum::Router;
use axum::extract::{Multipart, RawQuery, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use serde_json::{Value, json};
use uuid::Uuid;

use super::dataset_store::{Dataset, Example, now};
use super::errors::ApiError;
use super::extract::PathIds;
use super::state::EmulatorState;
use super::validate::{QueryParams, paging, parse_uuid};
use super::workspace::Tenant;

type JsonResult = Result<Json<Value>, ApiError>;

/// The datasets routes, without authentication (added by the caller);
/// `platform` is the prefix of the multipart upload (`/v1` at the root,
/// empty under `/api/v1`).
pub(crate) fn routes(platform: &str) -> Router<EmulatorState> {
    Router::new()
        .route("/info", get(info))
        .route("/sessions", get(list_sessions))
        .route("/datasets", get(list_datasets).post(create_dataset))
        .route("/datasets/{id}", get(get_dataset).delete(delete_dataset))
        .route("/examples", get(list_examples))
        .route("/examples/{id}", get(get_example))
        .route(
            &format!("{platform}/platform/datasets/{{id}}/examples"),
            post(upload_examples),
        )
}

fn not_found(what: &str) -> ApiError {
    ApiError::not_found(format!("{what} not found"))
}

/// The query of a list: its parameters, `limit` (1 to 100, default 20)
/// and `offset`; 422 for a bad one.
fn paged(raw: Option<&str>) -> Result<(QueryParams, usize, usize), ApiError> {
    let q = QueryParams::parse(raw);
    let mut errs = Vec::new();
    let (limit, offset) = paging(&q, &mut errs);
    if !errs.is_empty() {
        return Err(ApiError::validation(errs));
    }
    Ok((q, limit, offset))
}

async fn info() -> Json<Value> {
    Json(json!({
        "version": "emulator",
        "instance_flags": {"dataset_examples_multipart_enabled": true}
    }))
}

/// The workspace's tracing projects: its `default` one, made on first read.
async fn list_sessions(State(state): State<EmulatorState>, Tenant(ws): Tenant) -> Json<Value> {
    state.with_datasets(|all| {
        let (id, since) = all
            .projects
            .entry(ws.clone())
            .or_insert_with(|| (Uuid::new_v4(), now()))
            .clone();
        Json(json!([{
            "id": id,
            "name": "default",
            "start_time": since,
            "tenant_id": ws,
            "reference_dataset_id": null,
        }]))
    })
}

async fn create_dataset(
    State(state): State<EmulatorState>,
    Tenant(ws): Tenant,
    Json(body): Json<Value>,
) -> JsonResult {
    let name = body
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            ApiError::validation(vec![
                json!({"loc": ["body", "name"], "msg": "Field required", "type": "missing"}),
            ])
        })?
        .to_owned();
    state.with_datasets(|all| {
        if all.of(&ws).any(|d| d.name == name) {
            return Err(ApiError::conflict(format!(
                "Dataset with name {name} already exists"
            )));
        }
        let set = Dataset {
            workspace: ws.clone(),
            id: Uuid::new_v4(),
            name,
            description: body
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_owned),
            data_type: body
                .get("data_type")
                .and_then(Value::as_str)
                .unwrap_or("kv")
                .to_owned(),
            created_at: now(),
            examples: Vec::new(),
        };
        let shown = set.shown();
        all.sets.push(set);
        Ok(Json(shown))
    })
}

async fn list_datasets(
    State(state): State<EmulatorState>,
    Tenant(ws): Tenant,
    RawQuery(raw): RawQuery,
) -> JsonResult {
    let (q, limit, offset) = paged(raw.as_deref())?;
    let name = q.get("name");
    state.with_datasets(|all| {
        let page: Vec<Value> = all
            .of(&ws)
            .filter(|d| name.is_none_or(|n| d.name == n))
            .skip(offset)
            .take(limit)
            .map(Dataset::shown)
            .collect();
        Ok(Json(Value::Array(page)))
    })
}

async fn get_dataset(
    State(state): State<EmulatorState>,
    Tenant(ws): Tenant,
    ids: PathIds,
) -> JsonResult {
    let id = ids.at(0);
    state.with_datasets(|all| {
        all.of(&ws)
            .find(|d| d.id == id)
            .map(|d| Json(d.shown()))
            .ok_or_else(|| not_found("Dataset"))
    })
}

async fn delete_dataset(
    State(state): State<EmulatorState>,
    Tenant(ws): Tenant,
    ids: PathIds,
) -> Result<StatusCode, ApiError> {
    let id = ids.at(0);
    state.with_datasets(|all| {
        let before = all.sets.len();
        all.sets.retain(|d| !(d.workspace == ws && d.id == id));
        if all.sets.len() == before {
            return Err(not_found("Dataset"));
        }
        Ok(StatusCode::OK)
    })
}

async fn list_examples(
    State(state): State<EmulatorState>,
    Tenant(ws): Tenant,
    RawQuery(raw): RawQuery,
) -> JsonResult {
    let (q, limit, offset) = paged(raw.as_deref())?;
    let dataset = match q.get("dataset") {
        Some(raw) => Some(
            parse_uuid(raw, &[json!("query"), json!("dataset")])
                .map_err(|e| ApiError::validation(vec![e]))?,
        ),
        None => None,
    };
    state.with_datasets(|all| {
        let page: Vec<Value> = all
            .of(&ws)
            .filter(|d| dataset.is_none_or(|id| d.id == id))
            .flat_map(|d| d.examples.iter().map(|e| e.shown(d.id)))
            .skip(offset)
            .take(limit)
            .collect();
        Ok(Json(Value::Array(page)))
    })
}

async fn get_example(
    State(state): State<EmulatorState>,
    Tenant(ws): Tenant,
    ids: PathIds,
) -> JsonResult {
    let id = ids.at(0);
    state.with_datasets(|all| {
        all.of(&ws)
            .find_map(|d| {
                d.examples
                    .iter()
                    .find(|e| e.id == id)
                    .map(|e| e.shown(d.id))
            })
            .map(Json)
            .ok_or_else(|| not_found("Example"))
    })
}

/// The parts of one uploaded example, by kind (`""` for the body, then
/// `inputs` and `outputs`).
type Parts = HashMap<Uuid, HashMap<String, Value>>;

/// Reads the multipart body: each part's name is `<id>` or `<id>.<kind>`,
/// its content JSON. 422 for a part that is neither.
async fn read_parts(mut body: Multipart) -> Result<(Vec<Uuid>, Parts), ApiError> {
    let bad = |msg: String| {
        ApiError::validation(vec![
            json!({"loc": ["body"], "msg": msg, "type": "value_error"}),
        ])
    };
    let mut order = Vec::new();
    let mut parts = Parts::new();
    while let Some(field) = body.next_field().await.map_err(|e| bad(e.to_string()))? {
        let name = field.name().unwrap_or_default().to_owned();
        let (id, kind) = name.split_once('.').unwrap_or((&name, ""));
        let id = Uuid::parse_str(id).map_err(|_| bad(format!("part {name}: not an example id")))?;
        let bytes = field.bytes().await.map_err(|e| bad(e.to_string()))?;
        let value: Value =
            serde_json::from_slice(&bytes).map_err(|e| bad(format!("part {name}: {e}")))?;
        if !parts.contains_key(&id) {
            order.push(id);
        }
        parts.entry(id).or_default().insert(kind.to_owned(), value);
    }
    Ok((order, parts))
}

async fn upload_examples(
    State(state): State<EmulatorState>,
    Tenant(ws): Tenant,
    ids: PathIds,
    body: Multipart,
) -> JsonResult {
    let dataset = ids.at(0);
    let (order, mut parts) = read_parts(body).await?;
    state.with_datasets(|all| {
        let set = all
            .get_mut(&ws, dataset)
            .ok_or_else(|| not_found("Dataset"))?;
        for id in &order {
            let mut p = parts.remove(id).unwrap_or_default();
            let head = p.remove("").unwrap_or_default();
            set.examples.retain(|e| e.id != *id);
            set.examples.push(Example {
                id: *id,
                inputs: p.remove("inputs").unwrap_or_else(|| json!({})),
                outputs: p.remove("outputs"),
                metadata: head.get("metadata").cloned(),
                created_at: head
                    .get("created_at")
                    .and_then(Value::as_str)
                    .map_or_else(now, str::to_owned),
            });
        }
        Ok(Json(json!({"example_ids": order, "count": order.len()})))
    })
}
