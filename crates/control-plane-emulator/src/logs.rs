//! Build and server logs of the emulated revisions, and the log routes
//! (docs/control-plane-api.md "Logs", seen only in the official clients):
//! - `POST /v1/projects/{deployment_id}/revisions/{revision_id}/build_logs`,
//! - `POST /v1/projects/{deployment_id}/revisions/{revision_id}/deploy_logs`,
//! - `POST /v1/projects/{deployment_id}/deploy_logs` (every revision's
//!   server log, oldest first).
//!
//! Body: `limit`, `order` (`asc`/`desc`), `level`, `query`, `start_time`,
//! `end_time`, `offset`, all optional. Answer: `{"logs": [{"id",
//! "timestamp", "level", "message"}], "next_offset"}`.
//!
//! The lines are the emulator's own: each step of a revision's timeline
//! writes a few lines when it begins, so a log grows while the revision
//! progresses (what `agentctl logs --follow` reads). The failing step of a
//! `BUILD_FAILED` or `DEPLOY_FAILED` revision writes the `log` lines of the
//! scenario rule that chose its outcome (default: one line per outcome), so a
//! test controls what the operator's log tail shows. What the real service
//! writes is not documented; docs/control-plane-api.md "Logs" gives only
//! the shape.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::errors::{ApiError, issue};
use super::extract::{JsonBody, PathIds};
use super::state::EmulatorState;
use super::store::{Now, StoredDeployment, StoredRevision, rfc3339};
use super::workspace::Tenant;
use control_plane_wire::types::RevisionStatus;

/// Most entries in one answer, and the default `limit`.
pub const MAX_LIMIT: u64 = 1000;
const DEFAULT_LIMIT: u64 = 100;

/// The default line of a failed build when its scenario rule gives none.
pub const DEFAULT_BUILD_ERROR: &str =
    "ERROR: pip install -e . failed: exit code 1 (No matching distribution found)";
/// The default line of a failed deploy when its scenario rule gives none.
pub const DEFAULT_DEPLOY_ERROR: &str =
    "ERROR: the agent server exited with code 1 while starting (graph failed to load)";

/// Which log of a revision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The build log.
    Build,
    /// The server (deploy) log.
    Deploy,
}

/// One line, `offset` after the revision was created.
#[derive(Clone, Debug, PartialEq)]
struct Line {
    offset: Duration,
    level: &'static str,
    message: String,
}

/// A line `offset` after the revision was created.
fn line(offset: Duration, level: &'static str, message: impl Into<String>) -> Line {
    Line {
        offset,
        level,
        message: message.into(),
    }
}

/// Every line `kind` of revision `r` of `d` will ever have, oldest first.
fn script(d: &StoredDeployment, r: &StoredRevision, kind: Kind) -> Vec<Line> {
    let (starts, end) = step_starts(r);
    match kind {
        Kind::Build => build_script(d, r, &starts, end),
        Kind::Deploy => deploy_script(r, &starts, end),
    }
}

/// When each step of `r`'s timeline begins, after the revision was created,
/// and when the last one ends.
fn step_starts(r: &StoredRevision) -> (Vec<(RevisionStatus, Duration)>, Duration) {
    let mut start = Duration::ZERO;
    let mut starts = Vec::new();
    for (status, len) in &r.plan.steps {
        starts.push((status.clone(), start));
        start = start.saturating_add(*len);
    }
    (starts, start)
}

/// The lines of the failing step: the `log` lines of the scenario rule
/// that chose the outcome, else `default`.
fn failure_lines(r: &StoredRevision, default: &str) -> Vec<String> {
    if r.plan.failure_log.is_empty() {
        vec![default.to_owned()]
    } else {
        r.plan.failure_log.clone()
    }
}

/// The build log of `r`: a line when the build is queued, the clone,
/// checkout and install lines when it begins, then the outcome when the
/// step after BUILDING begins (nothing more without a BUILDING step).
fn build_script(
    d: &StoredDeployment,
    r: &StoredRevision,
    starts: &[(RevisionStatus, Duration)],
    end: Duration,
) -> Vec<Line> {
    use RevisionStatus as S;
    let mut out = Vec::new();
    for (status, at) in starts {
        match status {
            S::AwaitingBuild => {
                out.push(line(
                    *at,
                    "INFO",
                    format!("build of revision {} queued", r.id),
                ));
            }
            S::Building => out.extend(building_lines(d, r, *at)),
            _ => {}
        }
    }
    let built = starts.iter().any(|(s, _)| *s == S::Building);
    if !built {
        return out;
    }
    // The build ends when the step after BUILDING begins.
    let build_end = starts
        .iter()
        .skip_while(|(s, _)| *s != S::Building)
        .nth(1)
        .map_or(end, |(_, at)| *at);
    match &r.plan.terminal {
        S::BuildFailed => {
            for l in failure_lines(r, DEFAULT_BUILD_ERROR) {
                out.push(line(build_end, "ERROR", l));
            }
            out.push(line(build_end, "ERROR", "build failed"));
        }
        S::Interrupted if build_end == end => {
            out.push(line(build_end, "WARNING", "build interrupted"));
        }
        _ => out.push(line(build_end, "INFO", "image built and pushed")),
    }
    out
}

/// The lines the BUILDING step of `r` writes when it begins (`at`): the
/// clone, the commit checked out (if known), the config read, the install.
fn building_lines(d: &StoredDeployment, r: &StoredRevision, at: Duration) -> Vec<Line> {
    let cfg = &r.config;
    let mut out = vec![line(
        at,
        "INFO",
        format!(
            "cloning {} at {}",
            d.source_config.repo_url.as_deref().unwrap_or("?"),
            cfg.repo_ref.as_deref().unwrap_or("?")
        ),
    )];
    if let Some(sha) = &cfg.repo_commit_sha {
        out.push(line(at, "INFO", format!("checked out commit {sha}")));
    }
    out.push(line(
        at,
        "INFO",
        format!(
            "reading {}",
            cfg.langgraph_config_path
                .as_deref()
                .unwrap_or("langgraph.json")
        ),
    ));
    out.push(line(at, "INFO", "installing dependencies"));
    out
}

/// The server log of `r`: two lines when DEPLOYING begins (nothing without
/// that step), then at the end of the timeline the failure or the startup
/// lines.
fn deploy_script(
    r: &StoredRevision,
    starts: &[(RevisionStatus, Duration)],
    end: Duration,
) -> Vec<Line> {
    use RevisionStatus as S;
    let mut out = Vec::new();
    let Some(at) = starts
        .iter()
        .find(|(s, _)| *s == S::Deploying)
        .map(|(_, at)| *at)
    else {
        return out;
    };
    out.push(line(at, "INFO", format!("deploying revision {}", r.id)));
    out.push(line(at, "INFO", "starting the agent server"));
    match &r.plan.terminal {
        S::DeployFailed => {
            for l in failure_lines(r, DEFAULT_DEPLOY_ERROR) {
                out.push(line(end, "ERROR", l));
            }
            out.push(line(end, "ERROR", "deploy failed"));
        }
        S::Deployed => {
            out.push(line(end, "INFO", "application startup complete"));
            out.push(line(end, "INFO", "agent server listening on port 8000"));
        }
        _ => {}
    }
    out
}

/// A written line: wall time, level, message.
type Written = (DateTime<Utc>, &'static str, String);

/// The lines of `kind` written by `now`, as `(wall time, level, message)`.
/// A revision frozen (SKIPPED by a newer one, or forced by the admin API)
/// stops writing at that moment.
fn written(d: &StoredDeployment, r: &StoredRevision, kind: Kind, now: &Now) -> Vec<Written> {
    let mut cut = now.since(&r.created);
    if let Some((_, at)) = &r.frozen {
        cut = cut.min(at.since(&r.created));
    }
    script(d, r, kind)
        .into_iter()
        .filter(|l| l.offset <= cut)
        .map(|l| (r.created.after(l.offset).wall, l.level, l.message))
        .collect()
}

/// The parsed body of a log query.
#[derive(Debug, Default)]
struct Query {
    limit: u64,
    desc: bool,
    level: Option<String>,
    text: Option<String>,
    start: Option<DateTime<Utc>>,
    end: Option<DateTime<Utc>>,
    offset: u64,
}

fn invalid(loc: &str, msg: String) -> ApiError {
    ApiError::validation(vec![issue(
        "value_error",
        &[json!("body"), json!(loc)],
        msg,
        None,
        None,
    )])
}

/// Checks the body the way the service's schema would: a JSON object,
/// every field optional, 422 naming the field otherwise.
fn parse_query(body: &Value) -> Result<Query, ApiError> {
    let obj = match body {
        Value::Object(m) => m.clone(),
        Value::Null => Default::default(),
        _ => return Err(invalid("", "Input should be a valid dictionary".into())),
    };
    let text = |k: &str| -> Result<Option<String>, ApiError> {
        match obj.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(invalid(k, "Input should be a valid string".into())),
        }
    };
    let time = |k: &str| -> Result<Option<DateTime<Utc>>, ApiError> {
        text(k)?
            .map(|s| {
                DateTime::parse_from_rfc3339(&s)
                    .map(|t| t.with_timezone(&Utc))
                    .map_err(|_| invalid(k, "Input should be a valid datetime".into()))
            })
            .transpose()
    };
    let limit = match obj.get("limit") {
        None | Some(Value::Null) => DEFAULT_LIMIT,
        Some(v) => match v.as_u64() {
            Some(n) if (1..=MAX_LIMIT).contains(&n) => n,
            _ => {
                return Err(invalid(
                    "limit",
                    format!("Input should be an integer from 1 to {MAX_LIMIT}"),
                ));
            }
        },
    };
    let offset = match obj.get("offset") {
        None | Some(Value::Null) => 0,
        Some(Value::Number(n)) => n
            .as_u64()
            .ok_or_else(|| invalid("offset", "Input should be a valid offset".into()))?,
        Some(Value::String(s)) => s
            .parse()
            .map_err(|_| invalid("offset", "Input should be a valid offset".into()))?,
        Some(_) => return Err(invalid("offset", "Input should be a valid offset".into())),
    };
    let desc = match text("order")?.as_deref() {
        None | Some("asc") => false,
        Some("desc") => true,
        Some(_) => return Err(invalid("order", "Input should be 'asc' or 'desc'".into())),
    };
    Ok(Query {
        limit,
        desc,
        level: text("level")?,
        text: text("query")?,
        start: time("start_time")?,
        end: time("end_time")?,
        offset,
    })
}

/// One page of `lines` (oldest first) for `q`, as the wire answer.
fn page(lines: Vec<Written>, q: &Query) -> Value {
    let mut matching: Vec<(usize, Written)> = lines
        .into_iter()
        .enumerate()
        .filter(|(_, (t, level, msg))| {
            q.level
                .as_ref()
                .is_none_or(|l| l.eq_ignore_ascii_case(level))
                && q.text.as_ref().is_none_or(|s| msg.contains(s.as_str()))
                && q.start.is_none_or(|s| *t >= s)
                && q.end.is_none_or(|e| *t < e)
        })
        .collect();
    if q.desc {
        matching.reverse();
    }
    let total = matching.len() as u64;
    let logs: Vec<Value> = matching
        .into_iter()
        .skip(usize::try_from(q.offset).unwrap_or(usize::MAX))
        .take(usize::try_from(q.limit).unwrap_or(usize::MAX))
        .map(|(i, (t, level, message))| {
            json!({"id": (i + 1).to_string(), "timestamp": rfc3339(t), "level": level, "message": message})
        })
        .collect();
    let next = q.offset.saturating_add(logs.len() as u64);
    json!({
        "logs": logs,
        "next_offset": (next < total).then(|| next.to_string()),
    })
}

/// `POST .../revisions/{revision_id}/build_logs` and `.../deploy_logs`.
async fn revision_logs(
    state: EmulatorState,
    ws: String,
    ids: PathIds,
    body: Value,
    kind: Kind,
) -> Result<Json<Value>, ApiError> {
    let q = parse_query(&body)?;
    let (id, rid) = (ids.at(0), ids.at(1));
    state.with_store(|store, now| {
        let d = store
            .get(&ws, &id)
            .ok_or_else(|| ApiError::deployment_not_found(&id))?;
        let r = d
            .revision(&rid)
            .ok_or_else(|| ApiError::revision_not_found(&rid))?;
        Ok(Json(page(written(d, r, kind, now), &q)))
    })
}

pub(crate) async fn build_logs(
    State(state): State<EmulatorState>,
    Tenant(ws): Tenant,
    ids: PathIds,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    revision_logs(state, ws, ids, body, Kind::Build).await
}

pub(crate) async fn revision_deploy_logs(
    State(state): State<EmulatorState>,
    Tenant(ws): Tenant,
    ids: PathIds,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    revision_logs(state, ws, ids, body, Kind::Deploy).await
}

/// `POST /v1/projects/{deployment_id}/deploy_logs`: the server logs of every
/// revision, oldest first.
pub(crate) async fn deployment_deploy_logs(
    State(state): State<EmulatorState>,
    Tenant(ws): Tenant,
    ids: PathIds,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    let q = parse_query(&body)?;
    let id = ids.at(0);
    state.with_store(|store, now| {
        let d = store
            .get(&ws, &id)
            .ok_or_else(|| ApiError::deployment_not_found(&id))?;
        let mut lines: Vec<_> = d
            .revisions
            .iter()
            .flat_map(|r| written(d, r, Kind::Deploy, now))
            .collect();
        lines.sort_by_key(|(t, _, _)| *t);
        Ok(Json(page(lines, &q)))
    })
}
