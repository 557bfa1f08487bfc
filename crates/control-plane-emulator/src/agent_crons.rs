//! Crons on the built-in agent server: `POST /runs/crons`, `POST
//! /runs/crons/search`, `PATCH` and `DELETE /runs/crons/{id}`, kept in
//! memory per deployment, with the `agent-server-wire` types.
//!
//! Source: docs/control-plane-api.md "Agent server" (facts kept for crons:
//! no idempotency key, the server chooses `cron_id`; search matches
//! `assistant_id`, `enabled` and exact `metadata` pairs; PATCH merges
//! `metadata` and `end_time: null` clears it; DELETE answers 204, then 404;
//! a bad schedule is 422 `Invalid cron schedule: ...`; an unknown graph is
//! 404 `Graph 'x' not found. Expected one of: [...]`). Emulator choices:
//! a run does nothing but record its thread; an unknown time zone is read as
//! UTC (not refused). The answers and the
//! error details are the pinned server's (`contract_agent_server`, a test of
//! agent-operator, sends the same requests to both and compares them).
//! `next_run_date` is computed from the schedule in the cron's time zone
//! ([`super::cron_schedule`]); a cron whose time has passed runs when its
//! deployment's crons or threads are next read: nothing is sent anywhere,
//! `next_run_date` moves on, and with `on_run_completed: keep` the run's
//! thread is kept for `POST /threads/search` (with `delete`, the default,
//! it is gone once the run ends, as on the real server).

use agent_server_wire::{Cron, CronCreate, CronPatch, CronSearch};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::agent::{GRAPH_ID, target};
use super::agent_route::{AgentRoute, route};
use super::agent_store::{Crons, keep_newest};
use super::cron_schedule;
use super::errors::ApiError;
use super::extract::{OptionalJsonBody, PathIds, decode};
use super::state::EmulatorState;

/// The cron routes.
pub(crate) fn routes() -> Vec<AgentRoute> {
    vec![
        route(Method::POST, "/runs/crons", create),
        route(Method::POST, "/runs/crons/search", search),
        route(Method::POST, "/threads/search", search_threads),
        route(Method::PATCH, "/runs/crons/{cron_id}", update),
        route(Method::DELETE, "/runs/crons/{cron_id}", delete),
    ]
}

/// The wall time now.
fn now() -> chrono::DateTime<chrono::Utc> {
    chrono::Utc::now()
}

/// `next_run_date` of `schedule` in `timezone`, counted from now.
fn next_run(schedule: &str, timezone: Option<&str>) -> Option<String> {
    cron_schedule::next_run(schedule, timezone, jiff::Timestamp::now()).map(cron_schedule::iso)
}

/// Runs the crons of deployment `dep` whose time has passed
/// ([`cron_schedule::take_due_run`]), keeping the threads of those with
/// `on_run_completed: keep`.
fn run_due(state: &EmulatorState, dep: Uuid) {
    let now = jiff::Timestamp::now();
    state.with_crons(|all| {
        let Crons { crons, runs } = all;
        for ((_, c), cron) in crons.iter_mut().filter(|((d, _), _)| *d == dep) {
            let Some(at) = cron_schedule::take_due_run(cron, now) else {
                continue;
            };
            tracing::debug!(cron_id = %c, "cron ran");
            if cron.on_run_completed.as_deref() == Some("keep") {
                runs.push((dep, cron_schedule::run_thread(cron, GRAPH_ID, at)));
            }
        }
        keep_newest(runs, dep);
    });
}

/// Ranges of the five fields (minute, hour, day of month, month, day of
/// week); names (`JAN`, `MON`) are accepted in the last two.
const FIELDS: [(u32, u32, bool); 5] = [
    (0, 59, false),
    (0, 23, false),
    (1, 31, false),
    (1, 12, true),
    (0, 7, true),
];

/// Whether `schedule` is five valid cron fields.
fn valid_schedule(schedule: &str) -> bool {
    let fields: Vec<&str> = schedule.split_whitespace().collect();
    fields.len() == 5
        && fields
            .iter()
            .zip(FIELDS)
            .all(|(f, (lo, hi, names))| valid_field(f, lo, hi, names))
}

/// Whether one field of a schedule is valid: comma-separated `*`, values
/// or ranges in `lo..=hi` (three-letter names where `names`), each with an
/// optional positive `/step`.
fn valid_field(field: &str, lo: u32, hi: u32, names: bool) -> bool {
    let value = |v: &str| match v.parse::<u32>() {
        Ok(n) => (lo..=hi).contains(&n),
        Err(_) => names && v.len() == 3 && v.chars().all(|c| c.is_ascii_alphabetic()),
    };
    field.split(',').all(|part| {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => (r, Some(s)),
            None => (part, None),
        };
        let step_ok = step.is_none_or(|s| s.parse::<u32>().is_ok_and(|n| n > 0));
        let range_ok = range == "*"
            || match range.split_once('-') {
                Some((a, b)) => value(a) && value(b),
                None => value(range),
            };
        step_ok && range_ok
    })
}

/// The real server's 422 for a schedule it cannot parse, word for word.
fn invalid_schedule(schedule: &str) -> ApiError {
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        format!(
            "Invalid cron schedule: '{schedule}'. Reason: Invalid cron schedule. Ensure the \
             schedule uses the standard cron format (minute hour day_of_month month \
             day_of_week). Example: '*/5 * * * *' for every 5 minutes."
        ),
    )
}

/// The 404 of an unknown cron id.
fn cron_not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("Cron '{id}' not found"))
}

/// A cron as the JSON answer.
fn as_json(c: &Cron) -> Json<Value> {
    Json(serde_json::to_value(c).unwrap_or_default())
}

/// The run settings a cron keeps in `payload`.
fn set_payload(payload: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(v) = value {
        payload.insert(key.to_owned(), v);
    }
}

/// `config` with `configurable.cron_id` set, as the real server keeps it in
/// a cron's payload.
fn config_with_cron_id(config: Option<Value>, id: &str) -> Value {
    let mut config = match config {
        Some(Value::Object(o)) => o,
        _ => Map::new(),
    };
    let configurable = config.entry("configurable").or_insert_with(|| json!({}));
    if let Some(c) = configurable.as_object_mut() {
        c.insert("cron_id".into(), json!(id));
    }
    Value::Object(config)
}

/// `POST /runs/crons`: checks the assistant and the schedule, then keeps
/// a new cron (the server's id, its payload, its next run) and answers it.
async fn create(
    State(state): State<EmulatorState>,
    ids: PathIds,
    headers: HeaderMap,
    OptionalJsonBody(body): OptionalJsonBody,
) -> Result<Json<Value>, ApiError> {
    let t = target(&state, &ids, &headers)?;
    let dep = ids.at(0);
    let body: CronCreate = decode(body)?;
    let system = t.assistant["assistant_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let assistant_id = cron_assistant(&state, dep, system, &body.assistant_id)?;
    if !valid_schedule(&body.schedule) {
        return Err(invalid_schedule(&body.schedule));
    }
    let at = now();
    let id = Uuid::new_v4();
    let payload = create_payload(&body, &assistant_id, &id.to_string());
    let next_run_date = next_run(&body.schedule, body.timezone.as_deref());
    let cron = Cron {
        cron_id: id.to_string(),
        assistant_id: Some(assistant_id),
        thread_id: None,
        schedule: body.schedule,
        timezone: body.timezone,
        on_run_completed: Some(body.on_run_completed.unwrap_or_else(|| "delete".into())),
        user_id: Some(String::new()),
        end_time: body.end_time,
        enabled: body.enabled.unwrap_or(true),
        metadata: body.metadata.unwrap_or_default(),
        payload,
        next_run_date,
        created_at: Some(super::store::rfc3339(at)),
        updated_at: Some(super::store::rfc3339(at)),
        extra: Map::new(),
    };
    state.with_crons(|all| all.crons.insert((dep, id), cron.clone()));
    Ok(as_json(&cron))
}

/// The assistant a new cron of deployment `dep` runs: the deployment's
/// system assistant (`system`) for the graph id, else an assistant of the
/// deployment by uuid.
///
/// Errors: 404 `Assistant '...' not found` for any other value.
fn cron_assistant(
    state: &EmulatorState,
    dep: Uuid,
    system: String,
    asked: &str,
) -> Result<String, ApiError> {
    if asked == GRAPH_ID {
        return Ok(system);
    }
    match Uuid::parse_str(asked) {
        Ok(u)
            if u.to_string() == system
                || state.with_assistants(|all| all.contains_key(&(dep, u))) =>
        {
            Ok(u.to_string())
        }
        Ok(_) | Err(_) => Err(ApiError::not_found(format!(
            "Assistant '{asked}' not found"
        ))),
    }
}

/// The payload a new cron keeps, as the real server keeps it: the
/// assistant, the schedule, the run settings sent, and the config with
/// `configurable.cron_id` set to `id`.
fn create_payload(body: &CronCreate, assistant_id: &str, id: &str) -> Map<String, Value> {
    let mut payload = Map::new();
    payload.insert("assistant_id".into(), json!(assistant_id));
    payload.insert("schedule".into(), json!(body.schedule));
    set_payload(
        &mut payload,
        "timezone",
        body.timezone.clone().map(Value::String),
    );
    set_payload(
        &mut payload,
        "on_run_completed",
        body.on_run_completed.clone().map(Value::String),
    );
    set_payload(&mut payload, "input", body.input.clone());
    set_payload(
        &mut payload,
        "metadata",
        body.metadata.clone().map(Value::Object),
    );
    set_payload(&mut payload, "context", body.context.clone());
    payload.insert(
        "config".into(),
        config_with_cron_id(body.config.clone(), id),
    );
    set_payload(
        &mut payload,
        "webhook",
        body.webhook.clone().map(Value::String),
    );
    set_payload(&mut payload, "enabled", body.enabled.map(Value::Bool));
    payload
}

/// `POST /threads/search`: the threads of the cron runs kept on this
/// deployment (after running the crons that are due), those whose metadata
/// holds every pair of the body's, sorted by `sort_by` (`created_at`
/// unless `updated_at`) in `sort_order` (`desc` unless `asc`), paged by
/// `offset` and `limit` (10), with only the `select` fields.
async fn search_threads(
    State(state): State<EmulatorState>,
    ids: PathIds,
    headers: HeaderMap,
    OptionalJsonBody(body): OptionalJsonBody,
) -> Result<Json<Value>, ApiError> {
    target(&state, &ids, &headers)?;
    let dep = ids.at(0);
    let q: agent_server_wire::ThreadSearch = decode(body)?;
    run_due(&state, dep);
    let mut list: Vec<agent_server_wire::Thread> = state.with_crons(|all| {
        all.runs
            .iter()
            .filter(|(d, t)| {
                *d == dep
                    && q.metadata
                        .as_ref()
                        .is_none_or(|m| m.iter().all(|(k, v)| t.metadata.get(k) == Some(v)))
            })
            .map(|(_, t)| t.clone())
            .collect()
    });
    let by_updated = q.sort_by.as_deref() == Some("updated_at");
    list.sort_by(|a, b| match by_updated {
        true => a.updated_at.cmp(&b.updated_at),
        false => a.created_at.cmp(&b.created_at),
    });
    if q.sort_order.as_deref() != Some("asc") {
        list.reverse();
    }
    let page = list
        .into_iter()
        .skip(q.offset.unwrap_or(0) as usize)
        .take(q.limit.unwrap_or(10) as usize)
        .map(|t| {
            selected(
                serde_json::to_value(t).unwrap_or_default(),
                q.select.as_deref(),
            )
        })
        .collect();
    Ok(Json(Value::Array(page)))
}

/// `v` with only the `select` fields (all when `None`).
fn selected(v: Value, select: Option<&[String]>) -> Value {
    match (v, select) {
        (Value::Object(o), Some(fields)) => Value::Object(
            o.into_iter()
                .filter(|(k, _)| fields.iter().any(|f| f == k))
                .collect(),
        ),
        (v, _) => v,
    }
}

/// `POST /runs/crons/search`: the deployment's crons (after running those
/// that are due) matching the body's `assistant_id`, `enabled` and
/// metadata pairs, oldest first, paged by `offset` and `limit` (10).
async fn search(
    State(state): State<EmulatorState>,
    ids: PathIds,
    headers: HeaderMap,
    OptionalJsonBody(body): OptionalJsonBody,
) -> Result<Json<Value>, ApiError> {
    target(&state, &ids, &headers)?;
    let dep = ids.at(0);
    let q: CronSearch = decode(body)?;
    run_due(&state, dep);
    let mut list: Vec<Cron> = state.with_crons(|all| {
        all.crons
            .iter()
            .filter(|((d, _), _)| *d == dep)
            .map(|(_, c)| c.clone())
            .filter(|c| {
                q.assistant_id
                    .as_ref()
                    .is_none_or(|a| c.assistant_id.as_ref() == Some(a))
                    && q.enabled.is_none_or(|e| c.enabled == e)
                    && q.metadata
                        .as_ref()
                        .is_none_or(|m| m.iter().all(|(k, v)| c.metadata.get(k) == Some(v)))
            })
            .collect()
    });
    list.sort_by(|a, b| (&a.created_at, &a.cron_id).cmp(&(&b.created_at, &b.cron_id)));
    let page = list
        .into_iter()
        .skip(q.offset.unwrap_or(0) as usize)
        .take(q.limit.unwrap_or(10) as usize)
        .map(|c| serde_json::to_value(c).unwrap_or_default())
        .collect();
    Ok(Json(Value::Array(page)))
}

/// `PATCH /runs/crons/{cron_id}`: checks the schedule, then applies the
/// sent fields to the cron ([`patch_cron`]) and answers it.
async fn update(
    State(state): State<EmulatorState>,
    ids: PathIds,
    headers: HeaderMap,
    OptionalJsonBody(body): OptionalJsonBody,
) -> Result<Json<Value>, ApiError> {
    target(&state, &ids, &headers)?;
    let key = (ids.at(0), ids.at(1));
    let body: CronPatch = decode(body)?;
    state.with_crons(|all| {
        let c = all
            .crons
            .get_mut(&key)
            .ok_or_else(|| cron_not_found(&key.1.to_string()))?;
        if let Some(s) = body.schedule.as_deref().filter(|s| !valid_schedule(s)) {
            return Err(invalid_schedule(s));
        }
        patch_cron(c, body, now());
        Ok(as_json(c))
    })
}

/// Applies a checked PATCH to `c` at `at`: each field sent replaces the
/// cron's and its payload's (the metadata merged into the cron's own, the
/// payload keeping the PATCH's), then the next run is computed again.
fn patch_cron(c: &mut Cron, body: CronPatch, at: chrono::DateTime<chrono::Utc>) {
    set_payload(
        &mut c.payload,
        "schedule",
        body.schedule.clone().map(Value::String),
    );
    if let Some(s) = body.schedule {
        c.schedule = s;
    }
    if let Some(e) = body.end_time {
        c.end_time = e;
    }
    // The payload keeps the PATCH's metadata; the cron's own is merged.
    set_payload(
        &mut c.payload,
        "metadata",
        body.metadata.clone().map(Value::Object),
    );
    if let Some(m) = body.metadata {
        c.metadata.extend(m);
    }
    set_payload(&mut c.payload, "enabled", body.enabled.map(Value::Bool));
    if let Some(e) = body.enabled {
        c.enabled = e;
    }
    if let Some(t) = body.timezone {
        c.payload.insert("timezone".into(), json!(t));
        c.timezone = Some(t);
    }
    if let Some(o) = body.on_run_completed {
        c.payload.insert("on_run_completed".into(), json!(o));
        c.on_run_completed = Some(o);
    }
    set_payload(&mut c.payload, "input", body.input);
    if let Some(config) = body.config {
        let id = c.cron_id.clone();
        c.payload
            .insert("config".into(), config_with_cron_id(Some(config), &id));
    }
    set_payload(&mut c.payload, "context", body.context);
    set_payload(&mut c.payload, "webhook", body.webhook.map(Value::String));
    c.next_run_date = next_run(&c.schedule, c.timezone.as_deref());
    c.updated_at = Some(super::store::rfc3339(at));
}

/// `DELETE /runs/crons/{cron_id}`: 204, or 404 when there is no such cron.
async fn delete(
    State(state): State<EmulatorState>,
    ids: PathIds,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    target(&state, &ids, &headers)?;
    let key = (ids.at(0), ids.at(1));
    state.with_crons(|all| {
        all.crons
            .remove(&key)
            .map(|_| StatusCode::NO_CONTENT.into_response())
            .ok_or_else(|| ApiError::not_found("Not Found"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_are_checked_field_by_field() {
        for ok in [
            "* * * * *",
            "*/5 0-6 1,15 JAN-MAR MON-FRI",
            "0 3 * * 7",
            "59 23 31 12 0",
        ] {
            assert!(valid_schedule(ok), "{ok}");
        }
        for bad in [
            "61 * * * *",
            "* 24 * * *",
            "* * 0 * *",
            "* * * 13 *",
            "*/0 * * * *",
            "* * * *",
            "* * * * * *",
        ] {
            assert!(!valid_schedule(bad), "{bad}");
        }
    }
}
