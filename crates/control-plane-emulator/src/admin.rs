//! Admin routes under `/_emulator/`, for tests and demos (an emulator
//! feature, not part of the real API). They need no API key: the emulator is
//! a loopback test tool. They are not counted in `/_emulator/requests` and
//! never faulted.
//!
//! - `GET /_emulator/requests`: counts per route template and status, and
//!   `during_retry_after` (see [`super::stats`]).
//! - `GET /_emulator/requests/log`: the last requests, one entry each, with
//!   their arrival time, route, ids and status (see [`super::stats`]).
//! - `GET /_emulator/store`: every deployment with its revisions, by workspace.
//! - `POST /_emulator/reset`: forget deployments, counts and the request
//!   log; restore the start scenario rules and faults (204).
//! - `GET|PUT /_emulator/scenarios`: the scenario rules (a JSON array of
//!   [`ScenarioRule`], e.g. `[{"field": "repo_ref", "equals": "broken",
//!   "outcome": "BUILD_FAILED", "log": ["ERROR: ..."]}]`, where `log` is what
//!   the failing step writes to its log, see `emulator::logs`); they apply to
//!   revisions created afterwards.
//! - `GET|PUT /_emulator/faults`: the faults ([`FaultConfig`]).
//! - `POST /_emulator/repos/push` with `{"repo_url": ..., "ref": ...}`: moves
//!   that ref to a new commit, as a push to the repository would; revisions
//!   built from it afterwards record it as `repo_commit_sha` (answers
//!   `{"sha": ...}`). Until then every revision of a ref records the same
//!   commit; a rollback to an earlier revision keeps that revision's commit.
//! - `POST /_emulator/api-keys/revoke` with `{"key": ...}`: that API key
//!   (or bearer token) is answered 401 from now on, as a key deleted in the
//!   LangSmith settings (204); a reset restores it.
//! - `POST /_emulator/deployments/{id}/revisions/{rid}/status` with
//!   `{"status": "BUILD_FAILED"}`: freezes the revision at that status (any
//!   string, so unknown statuses can be tested); answers the Revision.
//! - `POST /_emulator/deployments/{id}/preview` with `{"is_preview": true}`:
//!   makes the deployment a preview, as the platform's pull-request previews
//!   are (shown with `is_preview: true`; its name no longer counts as taken,
//!   so the parent's name can be created beside it); answers the deployment.

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use super::errors::{ApiError, issue};
use super::extract::{JsonBody, PathIds};
use super::faults::FaultConfig;
use super::scenario::ScenarioRule;
use super::state::EmulatorState;
use control_plane_wire::types::RevisionStatus;

/// The admin routes.
pub(crate) fn admin_routes() -> Router<EmulatorState> {
    Router::new()
        .route("/_emulator/requests", get(requests))
        .route("/_emulator/requests/log", get(request_log))
        .route("/_emulator/store", get(store))
        .route("/_emulator/reset", post(reset))
        .route(
            "/_emulator/scenarios",
            get(get_scenarios).put(put_scenarios),
        )
        .route("/_emulator/faults", get(get_faults).put(put_faults))
        .route("/_emulator/repos/push", post(push))
        .route("/_emulator/api-keys/revoke", post(revoke_api_key))
        .route(
            "/_emulator/deployments/{deployment_id}/revisions/{revision_id}/status",
            post(force_status),
        )
        .route(
            "/_emulator/deployments/{deployment_id}/status",
            post(force_deployment_status),
        )
        .route(
            "/_emulator/deployments/{deployment_id}/preview",
            post(mark_preview),
        )
}

fn decode<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, ApiError> {
    serde_json::from_value(v).map_err(|e| {
        ApiError::validation(vec![issue(
            "value_error",
            &[json!("body")],
            format!("Value error, {e}"),
            None,
            None,
        )])
    })
}

async fn requests(State(state): State<EmulatorState>) -> Json<Value> {
    Json(state.request_counts())
}

async fn request_log(State(state): State<EmulatorState>) -> Json<Value> {
    Json(state.request_log())
}

async fn store(State(state): State<EmulatorState>) -> Json<Value> {
    Json(state.dump())
}

/// `POST /_emulator/api-keys/revoke` with `{"key": "..."}`: the key is
/// answered 401 from now on (204; the key is not logged).
async fn revoke_api_key(
    State(state): State<EmulatorState>,
    JsonBody(body): JsonBody,
) -> Result<StatusCode, ApiError> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Revoke {
        key: String,
    }
    let Revoke { key } = decode(body)?;
    state.revoke_api_key(&key);
    tracing::info!("emulator: an API key was revoked");
    Ok(StatusCode::NO_CONTENT)
}

async fn reset(State(state): State<EmulatorState>) -> StatusCode {
    state.reset();
    tracing::info!("emulator reset");
    StatusCode::NO_CONTENT
}

async fn get_scenarios(State(state): State<EmulatorState>) -> Json<Vec<ScenarioRule>> {
    Json(state.scenarios())
}

async fn put_scenarios(
    State(state): State<EmulatorState>,
    JsonBody(body): JsonBody,
) -> Result<Json<Vec<ScenarioRule>>, ApiError> {
    let rules: Vec<ScenarioRule> = decode(body)?;
    state.set_scenarios(rules.clone());
    tracing::info!(rules = rules.len(), "scenario rules replaced");
    Ok(Json(rules))
}

#[derive(Deserialize)]
struct Push {
    repo_url: String,
    #[serde(rename = "ref")]
    repo_ref: String,
}

async fn push(
    State(state): State<EmulatorState>,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    let push: Push = decode(body)?;
    let sha = state.push(&push.repo_url, &push.repo_ref);
    tracing::info!(repo_url = %push.repo_url, repo_ref = %push.repo_ref, %sha, "ref moved");
    Ok(Json(json!({"sha": sha})))
}

async fn get_faults(State(state): State<EmulatorState>) -> Json<FaultConfig> {
    Json(state.faults())
}

async fn put_faults(
    State(state): State<EmulatorState>,
    JsonBody(body): JsonBody,
) -> Result<Json<FaultConfig>, ApiError> {
    let faults: FaultConfig = decode(body)?;
    state.set_faults(faults.clone()).map_err(|e| {
        ApiError::validation(vec![issue("value_error", &[json!("body")], e, None, None)])
    })?;
    tracing::info!(?faults, "faults replaced");
    Ok(Json(faults))
}

#[derive(Deserialize)]
struct ForceStatus {
    status: String,
}

/// `POST /_emulator/deployments/{id}/status` `{"status": "UNUSED"}`: shows
/// the deployment with this status from now on (e.g. `UNUSED`,
/// `AWAITING_FINAL_DELETE`, docs/control-plane-api.md "Deployment"); `{"status": null}` goes
/// back to the computed one. Answers the deployment.
async fn force_deployment_status(
    State(state): State<EmulatorState>,
    ids: PathIds,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Forced {
        status: Option<String>,
    }
    let Forced { status } = decode(body)?;
    let id = ids.at(0);
    state.with_store(|store, now| {
        let d = store
            .get_any_mut(&id)
            .ok_or_else(|| ApiError::deployment_not_found(&id))?;
        d.forced_status = status
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty());
        tracing::info!(deployment_id = %id, status = d.status(), "deployment status forced");
        Ok(Json(d.json(now)))
    })
}

/// `POST /_emulator/deployments/{id}/preview` `{"is_preview": true}`: see
/// the module documentation. Answers the deployment.
async fn mark_preview(
    State(state): State<EmulatorState>,
    ids: PathIds,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Preview {
        is_preview: bool,
    }
    let Preview { is_preview } = decode(body)?;
    let id = ids.at(0);
    state.with_store(|store, now| {
        let d = store
            .get_any_mut(&id)
            .ok_or_else(|| ApiError::deployment_not_found(&id))?;
        d.preview = is_preview;
        tracing::info!(deployment_id = %id, is_preview, "deployment preview flag set");
        Ok(Json(d.json(now)))
    })
}

async fn force_status(
    State(state): State<EmulatorState>,
    ids: PathIds,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    let ForceStatus { status } = decode(body)?;
    if status.trim().is_empty() {
        return Err(ApiError::bad_request("'status' must not be empty."));
    }
    let (id, rid) = (ids.at(0), ids.at(1));
    let status = RevisionStatus::from(status.trim().to_owned());
    state.with_store(|store, now| {
        let d = store
            .get_any_mut(&id)
            .ok_or_else(|| ApiError::deployment_not_found(&id))?;
        let r = d
            .revisions
            .iter_mut()
            .find(|r| r.id == rid)
            .ok_or_else(|| ApiError::revision_not_found(&rid))?;
        r.frozen = Some((status.clone(), *now));
        tracing::info!(deployment_id = %id, revision_id = %rid, %status, "revision status forced");
        Ok(Json(r.json(now)))
    })
}
