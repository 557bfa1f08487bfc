//! The control plane routes: deployments, revisions, listeners. Mounted at
//! the root (cloud) and under `/api-host` (self-hosted).
//!
//! Sources: docs/control-plane-api.md "Requests", "Revision", "Self-hosted
//! placement and listeners", "Errors". Emulator choices (no source says):
//! - redeploy `POST /v2/deployments/{id}/revisions` answers **201** with the
//!   new Revision; the public API reference's
//!   `POST .../revisions/{revision_id}/redeploy` is served too (200, the
//!   Deployment, with that revision's configuration);
//! - a name already used in the workspace (even by a deployment being
//!   deleted) is **409**;
//! - PATCH or redeploy of a deployment being deleted is **409**; DELETE of
//!   one is 204 again (the deletion is not restarted);
//! - lists are newest first; `offset` in the answer is the offset of the next
//!   page (`offset + resources.len()`); `name_contains` ignores case;
//!   `status` filters take comma-separated values; `deployment_ids` must be
//!   uuids (422);
//! - `GET /v1/integrations/github/install` (docs/control-plane-api.md "Integrations (v1)", seen
//!   only in the official clients) answers the seeded integrations of the
//!   workspace as a bare array `[{id, installation_id, name}]`, `[]` when
//!   none; `GET /v1/integrations/github/{id}/repos` answers
//!   `[{url, default_branch, name, full_name}]` (`default_branch` `main`),
//!   404 `Integration <id> not found.` for an id not seeded in the
//!   workspace, 422 for an id that is not a uuid.

use axum::Json;
use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use serde_json::{Value, json};
use uuid::Uuid;

use super::errors::ApiError;
use super::extract::{JsonBody, OptionalJsonBody, PathIds};
use super::logs;
use super::rules::{self, Current, DEFAULT_DEPLOYMENT_TYPE, PatchBody, WorkspacePolicy};
use super::scenario::{RevisionFacts, pick_rule};
use super::state::EmulatorState;
use super::store::{Now, StoredDeployment};
use super::timeline::Plan;
use super::validate::{
    self, DEPLOYMENT_CREATE, DEPLOYMENT_PATCH, DEPLOYMENT_TYPES, QueryParams, REVISION_CREATE,
    paging,
};
use super::workspace::Tenant;
use control_plane_wire::types::{DeploymentCreate, SourceRevisionConfig};

/// The control plane routes, without authentication (added by the caller).
pub(crate) fn api_routes() -> Router<EmulatorState> {
    Router::new()
        .route(
            "/v2/deployments",
            get(list_deployments).post(create_deployment),
        )
        .route(
            "/v2/deployments/{deployment_id}",
            get(get_deployment)
                .patch(patch_deployment)
                .delete(delete_deployment),
        )
        .route(
            "/v2/deployments/{deployment_id}/revisions",
            get(list_revisions).post(redeploy),
        )
        .route(
            "/v2/deployments/{deployment_id}/revisions/{revision_id}",
            get(get_revision),
        )
        .route(
            "/v2/deployments/{deployment_id}/revisions/{revision_id}/redeploy",
            post(redeploy_revision),
        )
        .route("/v2/listeners", get(list_listeners))
        .route("/v2/listeners/{listener_id}", get(get_listener))
        .route(
            "/v1/projects/{deployment_id}/revisions/{revision_id}/build_logs",
            post(logs::build_logs),
        )
        .route(
            "/v1/projects/{deployment_id}/revisions/{revision_id}/deploy_logs",
            post(logs::revision_deploy_logs),
        )
        .route(
            "/v1/projects/{deployment_id}/deploy_logs",
            post(logs::deployment_deploy_logs),
        )
        .route("/v1/integrations/github/install", get(list_integrations))
        .route(
            "/v1/integrations/github/{integration_id}/repos",
            get(list_integration_repos),
        )
}

type JsonResult = Result<Json<Value>, ApiError>;

fn body_loc() -> [Value; 1] {
    [json!("body")]
}

/// Decodes a validated body into its typed form (cannot fail after
/// validation; a failure is still a 422, never a 500).
fn decode<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, ApiError> {
    serde_json::from_value(v).map_err(|e| {
        ApiError::validation(vec![super::errors::issue(
            "value_error",
            &body_loc(),
            format!("Value error, {e}"),
            None,
            None,
        )])
    })
}

fn page(items: Vec<Value>, offset: usize, limit: usize) -> Json<Value> {
    let resources: Vec<Value> = items.into_iter().skip(offset).take(limit).collect();
    let next = offset + resources.len();
    Json(json!({ "resources": resources, "offset": next }))
}

fn being_deleted(id: &Uuid) -> ApiError {
    ApiError::conflict(format!("Deployment ID {id} is being deleted."))
}

/// The plan of a new revision, from the scenario rules.
fn plan_for(state: &EmulatorState, d: &StoredDeployment, config: &SourceRevisionConfig) -> Plan {
    let rules = state.scenarios();
    let rule = pick_rule(
        &rules,
        RevisionFacts {
            name: &d.name,
            repo_url: d.source_config.repo_url.as_deref(),
            config,
        },
    );
    let outcome = rule.map(|r| r.outcome).unwrap_or_default();
    let mut plan = Plan::new(outcome, d.source == "github", state.config().step_duration);
    plan.failure_log = rule.map(|r| r.log.clone()).unwrap_or_default();
    plan
}

/// The deployment URL chosen by the service: `agent_server_url` when set,
/// else `{public_url}/agents/{id}`; an `external_docker` deployment keeps a
/// `custom_url` it sent (docs/control-plane-api.md "Deployment").
fn custom_url(state: &EmulatorState, source: &str, sent: Option<String>, id: &Uuid) -> String {
    if source != "github"
        && let Some(url) = sent.filter(|u| !u.trim().is_empty())
    {
        return url;
    }
    match &state.config().agent_server_url {
        Some(url) => url.trim_end_matches('/').to_owned(),
        None => format!("{}/agents/{id}", state.public_url()),
    }
}

/// The URL of [`crate::EmulatorConfig::agent_server_routes`] that `d`'s
/// active revision selects (`github` deployments only).
fn routed_url<'a>(state: &'a EmulatorState, d: &StoredDeployment, now: &Now) -> Option<&'a str> {
    if d.source != "github" {
        return None;
    }
    let config = &d.active(now)?.config;
    let carried = |mark: &str| {
        [&config.repo_ref, &config.image_uri]
            .into_iter()
            .flatten()
            .any(|v| v.contains(mark))
    };
    state
        .config()
        .agent_server_routes
        .iter()
        .find(|(mark, _)| carried(mark))
        .map(|(_, url)| url.as_str())
}

/// Removes the `resource_spec` keys of the fault setting
/// `ignored_resource_spec_keys` from a validated create or PATCH body.
fn drop_ignored_keys(state: &EmulatorState, body: &mut Value) {
    let ignored = state.faults().ignored_resource_spec_keys;
    if let Some(Value::Object(rs)) = body.pointer_mut("/source_config/resource_spec") {
        for key in &ignored {
            rs.remove(key);
        }
    }
}

/// The deployment `d` as answered: its JSON view in the configured
/// [`crate::ServiceShape`], with every secret value shown as `****` under
/// the `masked_secret_values` fault.
fn shown(state: &EmulatorState, d: &StoredDeployment, now: &Now) -> Value {
    let mut v = d.answer(now, &state.config().shape);
    if let Some(url) = routed_url(state, d, now) {
        v["source_config"]["custom_url"] = Value::String(url.to_owned());
    }
    if state.faults().masked_secret_values
        && let Some(Value::Array(secrets)) = v.get_mut("secrets")
    {
        for s in secrets {
            s["value"] = Value::String("****".into());
        }
    }
    v
}

/// `POST /v2/deployments`: validates the body, checks it against the
/// workspace's rules and the names taken, then stores the deployment with
/// its first revision and answers 201 with it.
async fn create_deployment(
    State(state): State<EmulatorState>,
    Tenant(ws): Tenant,
    JsonBody(mut body): JsonBody,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    validate::check(&mut body, &DEPLOYMENT_CREATE, &body_loc()).map_err(ApiError::validation)?;
    drop_ignored_keys(&state, &mut body);
    let req: DeploymentCreate = decode(body)?;
    rules::check_create(&req, &workspace_policy(&state, &ws))?;
    rules::check_create_shape(&req, &state.config().shape)?;
    state.with_store(|store, now| {
        if store.name_taken(&ws, &req.name) {
            return Err(ApiError::conflict(format!(
                "A deployment named '{}' already exists in workspace {ws}.",
                req.name
            )));
        }
        let seq = store.next_seq();
        let mut d = new_deployment(&state, &req, &ws, seq, now);
        let plan = plan_for(&state, &d, &req.source_revision_config);
        let config = at_head(&state, &d, req.source_revision_config.clone());
        d.add_revision(config, plan, *now);
        let json = shown(&state, &d, now);
        tracing::info!(deployment_id = %d.id, workspace = %ws, name = %d.name, "deployment created");
        store.insert(d);
        Ok((StatusCode::CREATED, Json(json)))
    })
}

/// What the create rules know of workspace `ws`: whether it is
/// self-hosted enterprise, whether creates must name a listener, its
/// listeners and its GitHub integrations.
fn workspace_policy<'a>(state: &'a EmulatorState, ws: &'a str) -> WorkspacePolicy<'a> {
    WorkspacePolicy {
        workspace_id: ws,
        enterprise: state.config().is_enterprise(ws),
        requires_listener: state.config().requires_listener(ws),
        listeners: state.listeners_of(ws),
        integrations: state
            .integrations_of(ws)
            .into_iter()
            .map(|(_, i)| i.id)
            .collect(),
    }
}

/// A new deployment of workspace `ws` from a checked create, without
/// revisions yet: a new id, the default `deployment_type`, the URL it
/// will serve at ([`custom_url`]).
fn new_deployment(
    state: &EmulatorState,
    req: &DeploymentCreate,
    ws: &str,
    seq: u64,
    now: &Now,
) -> StoredDeployment {
    let id = Uuid::new_v4();
    let mut source_config = req.source_config.clone();
    source_config
        .deployment_type
        .get_or_insert_with(|| DEFAULT_DEPLOYMENT_TYPE.to_owned());
    source_config.custom_url = Some(custom_url(
        state,
        &req.source,
        source_config.custom_url.take(),
        &id,
    ));
    StoredDeployment {
        id,
        seq,
        tenant_id: ws.to_owned(),
        name: req.name.clone(),
        source: req.source.clone(),
        source_config,
        secrets: req.secrets.clone(),
        secret_references: req.secret_references.clone(),
        revisions: Vec::new(),
        created: *now,
        updated: *now,
        deleted: None,
        assistant_id: Uuid::new_v4(),
        forced_status: None,
        preview: false,
        display_name: None,
    }
}

async fn list_deployments(
    State(state): State<EmulatorState>,
    Tenant(ws): Tenant,
    RawQuery(q): RawQuery,
) -> JsonResult {
    let q = QueryParams::parse(q.as_deref());
    let mut errs = Vec::new();
    let (limit, offset) = paging(&q, &mut errs);
    let deployment_type = q.enumerated("deployment_type", DEPLOYMENT_TYPES, &mut errs);
    let mut ids = None;
    if let Some(raw) = q.csv("deployment_ids") {
        let loc = [json!("query"), json!("deployment_ids")];
        let parsed: Vec<Uuid> = raw
            .iter()
            .filter_map(|s| validate::parse_uuid(s, &loc).map_err(|e| errs.push(e)).ok())
            .collect();
        ids = Some(parsed);
    }
    if !errs.is_empty() {
        return Err(ApiError::validation(errs));
    }
    let name_contains = q.get("name_contains").map(str::to_lowercase);
    // The exact-name filter of the Go CLI (docs/control-plane-api.md,
    // "Requests as the official clients send them"); an older service
    // ignores it (quirk `name-filter` off).
    let name = q
        .get("name")
        .filter(|_| state.config().shape.has(crate::Quirk::NameFilter))
        .map(str::to_owned);
    let statuses = q.csv("status").filter(|s| !s.is_empty());
    let items = state.with_store(|store, now| {
        store
            .list(&ws)
            .into_iter()
            .filter(|d| {
                name_contains
                    .as_ref()
                    .is_none_or(|n| d.name.to_lowercase().contains(n))
                    && name.as_ref().is_none_or(|n| d.name == *n)
                    && statuses
                        .as_ref()
                        .is_none_or(|s| s.iter().any(|s| s.eq_ignore_ascii_case(d.status())))
                    && deployment_type
                        .as_ref()
                        .is_none_or(|t| d.source_config.deployment_type.as_ref() == Some(t))
                    && ids.as_ref().is_none_or(|ids| ids.contains(&d.id))
            })
            // Page before rendering: only the returned deployments are turned
            // into JSON, so a page costs the same with 100 or 10,000 stored.
            .skip(offset)
            .take(limit)
            .map(|d| shown(&state, d, now))
            .collect()
    });
    let items: Vec<Value> = items;
    let next = offset + items.len();
    Ok(Json(json!({ "resources": items, "offset": next })))
}

async fn get_deployment(
    State(state): State<EmulatorState>,
    Tenant(ws): Tenant,
    ids: PathIds,
) -> JsonResult {
    let id = ids.at(0);
    state.with_store(|store, now| {
        store
            .get(&ws, &id)
            .map(|d| Json(shown(&state, d, now)))
            .ok_or_else(|| ApiError::deployment_not_found(&id))
    })
}

async fn patch_deployment(
    State(state): State<EmulatorState>,
    Tenant(ws): Tenant,
    ids: PathIds,
    JsonBody(mut body): JsonBody,
) -> JsonResult {
    let id = ids.at(0);
    validate::check(&mut body, &DEPLOYMENT_PATCH, &body_loc()).map_err(ApiError::validation)?;
    drop_ignored_keys(&state, &mut body);
    let patch: PatchBody = decode(body)?;
    if patch.display_name.as_deref().is_some_and(str::is_empty) {
        return Err(ApiError::validation(vec![super::errors::issue(
            "string_too_short",
            &[json!("body"), json!("display_name")],
            "String should have at least 1 character",
            None,
            Some(json!({"min_length": 1})),
        )]));
    }
    state.with_store(|store, now| {
        let d = store
            .get_mut(&ws, &id)
            .ok_or_else(|| ApiError::deployment_not_found(&id))?;
        if d.deleted.is_some() {
            return Err(being_deleted(&id));
        }
        let new_revision = apply_patch(d, &patch)?;
        if let Some(name) = &patch.display_name {
            d.display_name = Some(name.clone());
        }
        if let Some(config) = new_revision {
            let plan = plan_for(&state, d, &config);
            let config = at_head(&state, d, config);
            let rid = d.add_revision(config, plan, *now);
            tracing::info!(deployment_id = %id, revision_id = %rid, "revision created by patch");
        }
        d.updated = *now;
        Ok(Json(shown(&state, d, now)))
    })
}

/// Applies the values of `patch` to `d` ([`rules::plan_patch`]: checks,
/// merges `source_config`, replaces secrets and references) and returns
/// the configuration of the revision it calls for, if any. Shared by PATCH
/// and the revision POST, whose bodies carry the same fields.
fn apply_patch(
    d: &mut StoredDeployment,
    patch: &PatchBody,
) -> Result<Option<SourceRevisionConfig>, ApiError> {
    let latest = d.latest().map(|r| r.config.clone()).unwrap_or_default();
    let effect = rules::plan_patch(
        Current {
            name: &d.name,
            source: &d.source,
            source_config: &d.source_config,
            revision_config: &latest,
            secrets: &d.secrets,
            secret_references: &d.secret_references,
        },
        patch,
    )?;
    d.source_config = effect.source_config;
    if let Some(secrets) = effect.secrets {
        d.secrets = secrets;
    }
    if let Some(references) = effect.secret_references {
        d.secret_references = references;
    }
    Ok(effect.new_revision)
}

async fn delete_deployment(
    State(state): State<EmulatorState>,
    Tenant(ws): Tenant,
    ids: PathIds,
) -> Result<StatusCode, ApiError> {
    let id = ids.at(0);
    state.with_store(|store, now| {
        if store.mark_deleted(&ws, &id, *now) {
            tracing::info!(deployment_id = %id, "deployment deletion started");
            Ok(StatusCode::NO_CONTENT)
        } else {
            Err(ApiError::deployment_not_found(&id))
        }
    })
}

async fn list_revisions(
    State(state): State<EmulatorState>,
    Tenant(ws): Tenant,
    ids: PathIds,
    RawQuery(q): RawQuery,
) -> JsonResult {
    let id = ids.at(0);
    let q = QueryParams::parse(q.as_deref());
    let mut errs = Vec::new();
    let (limit, offset) = paging(&q, &mut errs);
    if !errs.is_empty() {
        return Err(ApiError::validation(errs));
    }
    let statuses = q.csv("status").filter(|s| !s.is_empty());
    let items = state.with_store(|store, now| {
        let d = store
            .get(&ws, &id)
            .ok_or_else(|| ApiError::deployment_not_found(&id))?;
        Ok::<_, ApiError>(
            d.revisions
                .iter()
                .rev()
                .filter(|r| {
                    statuses.as_ref().is_none_or(|s| {
                        let status = r.status(now).0;
                        s.iter().any(|s| s.eq_ignore_ascii_case(status.as_str()))
                    })
                })
                .map(|r| r.answer(now, &state.config().shape))
                .collect(),
        )
    })?;
    Ok(page(items, offset, limit))
}

async fn get_revision(
    State(state): State<EmulatorState>,
    Tenant(ws): Tenant,
    ids: PathIds,
) -> JsonResult {
    let (id, rid) = (ids.at(0), ids.at(1));
    state.with_store(|store, now| {
        let d = store
            .get(&ws, &id)
            .ok_or_else(|| ApiError::deployment_not_found(&id))?;
        d.revision(&rid)
            .map(|r| Json(r.answer(now, &state.config().shape)))
            .ok_or_else(|| ApiError::revision_not_found(&rid))
    })
}

/// Applies `patch` (the optional body of a revision POST) to deployment `id`
/// and creates a revision: with that revision's configuration when
/// `from_revision` is set, else with the latest configuration and the
/// body's values (an omitted field keeps the previous revision's). Returns
/// the deployment and the new revision as JSON.
/// `config` with the commit its `github` ref points at now
/// ([`EmulatorState::head`]); other sources unchanged.
fn at_head(
    state: &EmulatorState,
    d: &crate::store::StoredDeployment,
    mut config: control_plane_wire::types::SourceRevisionConfig,
) -> control_plane_wire::types::SourceRevisionConfig {
    if d.source == "github" {
        let url = d.source_config.repo_url.as_deref().unwrap_or_default();
        let repo_ref = config.repo_ref.as_deref().unwrap_or_default();
        config.repo_commit_sha = Some(state.head(url, repo_ref));
    }
    config
}

fn new_revision(
    state: &EmulatorState,
    ws: &str,
    id: &Uuid,
    from_revision: Option<&Uuid>,
    patch: &PatchBody,
) -> Result<(Value, Value), ApiError> {
    state.with_store(|store, now| {
        let d = store
            .get_mut(ws, id)
            .ok_or_else(|| ApiError::deployment_not_found(id))?;
        if d.deleted.is_some() {
            return Err(being_deleted(id));
        }
        let config = match from_revision {
            Some(rid) => d
                .revision(rid)
                .ok_or_else(|| ApiError::revision_not_found(rid))?
                .config
                .clone(),
            // A redeploy builds the ref again: its head now.
            None => {
                let config = match apply_patch(d, patch)? {
                    Some(config) => config,
                    None => d.latest().map(|r| r.config.clone()).unwrap_or_default(),
                };
                at_head(state, d, config)
            }
        };
        let plan = plan_for(state, d, &config);
        let rid = d.add_revision(config, plan, *now);
        tracing::info!(deployment_id = %id, revision_id = %rid, "revision created by redeploy");
        let rev = d
            .revision(&rid)
            .map(|r| r.answer(now, &state.config().shape))
            .unwrap_or_default();
        Ok((shown(state, d, now), rev))
    })
}

/// `POST /v2/deployments/{id}/revisions`: a new revision, with the values of
/// its optional body (docs/control-plane-api.md, "Revisions by POST");
/// answers 201 with the Revision.
async fn redeploy(
    State(state): State<EmulatorState>,
    Tenant(ws): Tenant,
    ids: PathIds,
    OptionalJsonBody(body): OptionalJsonBody,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let patch = match body {
        Some(mut body) => {
            validate::check(&mut body, &REVISION_CREATE, &body_loc())
                .map_err(ApiError::validation)?;
            drop_ignored_keys(&state, &mut body);
            decode(body)?
        }
        None => PatchBody::default(),
    };
    let (_, rev) = new_revision(&state, &ws, &ids.at(0), None, &patch)?;
    Ok((StatusCode::CREATED, Json(rev)))
}

async fn redeploy_revision(
    State(state): State<EmulatorState>,
    Tenant(ws): Tenant,
    ids: PathIds,
) -> JsonResult {
    let (deployment, _) = new_revision(
        &state,
        &ws,
        &ids.at(0),
        Some(&ids.at(1)),
        &PatchBody::default(),
    )?;
    Ok(Json(deployment))
}

fn require_enterprise(state: &EmulatorState, ws: &str) -> Result<(), ApiError> {
    if state.config().is_enterprise(ws) {
        Ok(())
    } else {
        Err(rules::listeners_forbidden(ws))
    }
}

async fn list_listeners(
    State(state): State<EmulatorState>,
    Tenant(ws): Tenant,
    RawQuery(q): RawQuery,
) -> JsonResult {
    let q = QueryParams::parse(q.as_deref());
    let mut errs = Vec::new();
    let (limit, offset) = paging(&q, &mut errs);
    if !errs.is_empty() {
        return Err(ApiError::validation(errs));
    }
    require_enterprise(&state, &ws)?;
    let items = state
        .listeners_of(&ws)
        .into_iter()
        .map(|l| serde_json::to_value(l).unwrap_or_default())
        .collect();
    Ok(page(items, offset, limit))
}

async fn get_listener(
    State(state): State<EmulatorState>,
    Tenant(ws): Tenant,
    ids: PathIds,
) -> JsonResult {
    let id = ids.at(0);
    require_enterprise(&state, &ws)?;
    state
        .listeners_of(&ws)
        .into_iter()
        .find(|l| l.id == id.to_string())
        .map(|l| Json(serde_json::to_value(l).unwrap_or_default()))
        .ok_or_else(|| ApiError::listener_not_found(&id))
}

async fn list_integrations(State(state): State<EmulatorState>, Tenant(ws): Tenant) -> JsonResult {
    let items: Vec<Value> = state
        .integrations_of(&ws)
        .into_iter()
        .map(|(installation_id, i)| {
            json!({"id": i.id, "installation_id": installation_id, "name": i.name})
        })
        .collect();
    Ok(Json(Value::Array(items)))
}

async fn list_integration_repos(
    State(state): State<EmulatorState>,
    Tenant(ws): Tenant,
    ids: PathIds,
) -> JsonResult {
    let id = ids.at(0);
    let (_, integration) = state
        .integrations_of(&ws)
        .into_iter()
        .find(|(_, i)| i.id == id)
        .ok_or_else(|| ApiError::not_found(format!("Integration {id} not found.")))?;
    let repos: Vec<Value> = integration
        .repos
        .iter()
        .map(|url| {
            let full_name = url
                .trim_end_matches('/')
                .rsplitn(3, '/')
                .take(2)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("/");
            let name = full_name.rsplit('/').next().unwrap_or_default().to_owned();
            json!({"url": url, "default_branch": "main", "name": name, "full_name": full_name})
        })
        .collect();
    Ok(Json(Value::Array(repos)))
}
