//! The "follow" step of the AgentDeployment pass: reads the latest revision
//! when it is due (a revision this pass started is not read, one that ended
//! is not read again), lets the pure [`verdict`] decide the outcome, events
//! and requeue, verifies a DEPLOYED revision with `spec.verify`, and ends
//! the pass with its [`Report`]. Sources: docs/control-plane-api.md
//! "Revision", "Polling", "Logs".

use crate::controller::kind::Requeue;

use super::pass::{Acted, Pass, RemoteView};
use super::plane::plane_key;
use super::report::Report;
use crate::api::conditions::{READY, find, reason};
use crate::api::deployment::{
    AgentDeployment, DEFAULT_PROGRESS_DEADLINE_SECONDS, ManagementPolicy, RollbackStatus,
};
use crate::controller::requeue::jittered;
use crate::controller::requeue::seconds_until;
use crate::controlplane::types::{LogOrder, LogQuery, Revision, RevisionStatus};
use crate::plan::decide;
use crate::plan::history;
use crate::plan::logtail::{self, FailureLog};
use crate::plan::rollback::{self, RollbackStep};
use crate::plan::serving;
use crate::plan::shapes;
use crate::plan::status::Outcome;
use crate::plan::steps::{LatestFrom, LatestKnown};
use crate::plan::verdict::{self, Next};

/// The revision the follow step knows: its id, status, creation time, and
/// the revision read by this pass (for the history in status).
struct Latest {
    id: Option<String>,
    status: Option<RevisionStatus>,
    created_at: Option<String>,
    read: Option<Revision>,
    started_here: bool,
}

/// Follows the latest revision of `acted` and ends the pass.
pub(super) async fn follow(pass: &mut Pass<'_>, acted: Acted) -> Box<Report> {
    let Acted { view, revision } = acted;
    let latest = match latest(pass, &view, revision).await {
        Ok(l) => l,
        Err(report) => return report,
    };
    let (rid, status) = (latest.id.as_deref(), latest.status.as_ref());
    let deadline = pass
        .obj
        .spec
        .progress_deadline_seconds
        .unwrap_or(DEFAULT_PROGRESS_DEADLINE_SECONDS);
    let slow_poll = pass.ctx.config.max_poll_interval * 4;
    let age = latest
        .created_at
        .as_deref()
        .and_then(seconds_until)
        .map(|u| -u);
    let created_at = latest.created_at.as_deref();
    let overdue = verdict::overdue(rid, status, created_at, age, deadline, slow_poll.as_secs());
    let outcome = overdue
        .clone()
        .unwrap_or_else(|| verdict::outcome(rid, status));
    let outcome = shown(pass, outcome, &view.id);
    let (outcome, unused) = verdict::unused(
        outcome,
        &view.id,
        view.deployment_status.as_deref(),
        pass.previous.deployment_status.as_deref(),
    );
    pass.events.extend(unused);
    let outcome = explain_failure(pass, outcome, &view, &latest).await;
    // (Its Warning event comes from `finish`, as for every Stalled.)
    record(pass, &view, &latest, &outcome);
    if let Some(report) = undo_promotion(pass, &view).await {
        return report;
    }
    let (outcome, verify_wait) = match super::verify::verified(pass, outcome, &view, rid).await {
        Ok(v) => v,
        Err(e) => return Report::failed(e),
    };
    let (outcome, verify_wait) = match roll_back(pass, &view, &latest, outcome).await {
        // The revision the rollback made is polled, not a verification.
        Ok((outcome, true)) => (outcome, None),
        Ok((outcome, false)) => (outcome, verify_wait),
        Err(report) => return report,
    };
    if matches!(outcome, Outcome::Ready { .. })
        && let Some(seconds) = time_to_ready(pass.obj)
    {
        pass.ctx.metrics.observe_time_to_ready(seconds);
    }
    let action = requeue(pass, &outcome, overdue.is_some(), verify_wait, &latest);
    pass.finish(&outcome, Ok(action))
}

/// `spec.rollback` ([`rollback::decide`]): redeploys the last verified
/// revision in place of a latest revision that failed (the pass's one
/// mutation: a pass that sent a PATCH or a redeploy follows a revision in
/// progress, which never fails here), records it in `status.rollback`, and
/// reports `RolledBack` while it holds ([`rollback::outcome`]). `Ok((_,
/// true))`: this pass rolled back.
async fn roll_back(
    pass: &mut Pass<'_>,
    view: &RemoteView,
    latest: &Latest,
    outcome: Outcome,
) -> Result<(Outcome, bool), Box<Report>> {
    let generation = pass.obj.metadata.generation;
    let known = rollback::RollbackKnown {
        policy: pass.obj.spec.rollback.as_ref(),
        verify: pass.obj.spec.verify.is_some(),
        latest: latest.id.as_deref(),
        latest_status: latest.status.as_ref(),
        verification: pass.status.verification.as_deref(),
        revisions: &pass.status.revisions,
        previous: pass.previous.rollback.as_deref(),
    };
    let step = if pass.obj.spec.management_policy == ManagementPolicy::Observe {
        RollbackStep::Stay
    } else {
        rollback::decide(&known)
    };
    match step {
        RollbackStep::Rollback { from, to, reason } => {
            let outcome = redeploy_verified(pass, view, from, to, reason).await?;
            Ok((outcome, true))
        }
        RollbackStep::NoTarget { from, reason } => {
            let outcome = match outcome {
                Outcome::Stalled { reason: r, message } => Outcome::Stalled {
                    reason: r,
                    message: format!(
                        "{message}; spec.rollback: no earlier revision to roll back to ({from}: {reason})"
                    ),
                },
                other => other,
            };
            Ok((outcome, false))
        }
        RollbackStep::Stay => {
            let held = pass.status.rollback.as_ref().filter(|r| {
                rollback::holds(
                    Some(r),
                    generation,
                    pass.status.latest_revision_id.as_deref(),
                )
            });
            Ok(match held {
                Some(r) => (rollback::outcome(outcome, r, &pass.status.revisions), false),
                None => (outcome, false),
            })
        }
    }
}

/// A `github` promotion whose latest revision was built from another commit
/// than the one the source verified ([`crate::plan::promotion::undo`]):
/// goes back at once to the revision that served before the promotion (one
/// redeploy, the pass's mutation, recorded in `status.rollback`), and ends
/// the pass, `Stalled`/`PromotionCommitMismatch` naming both commits (the
/// report's check, [`Pass::finish`]), polling the revision it made. `None`:
/// nothing to undo, the pass goes on.
async fn undo_promotion(pass: &mut Pass<'_>, view: &RemoteView) -> Option<Box<Report>> {
    let record = pass
        .status
        .promoted_from
        .as_deref()
        .filter(|_| pass.seen.promotion.is_some())?;
    let (from, to) = crate::plan::promotion::undo(record, &pass.status)?;
    let why = format!(
        "{} (promotion commit mismatch)",
        reason::PROMOTION_COMMIT_MISMATCH
    );
    let outcome = match redeploy_verified(pass, view, from, to, why).await {
        Ok(outcome) => outcome,
        Err(report) => return Some(report),
    };
    let poll = Requeue::after(jittered(pass.ctx.config.poll_interval));
    Some(pass.finish(&outcome, Ok(poll)))
}

/// The rollback of [`roll_back`]: redeploys revision `to` in place of
/// `from` (the pass's one mutation), records it in `status.rollback` and
/// follows the revision it made; the outcome is `RolledBack`.
async fn redeploy_verified(
    pass: &mut Pass<'_>,
    view: &RemoteView,
    from: String,
    to: String,
    reason: String,
) -> Result<Outcome, Box<Report>> {
    let d = match pass.cp.redeploy_revision(&view.id, &to).await {
        Ok(d) => d,
        Err(e) => return Err(pass.fail("rollback", e)),
    };
    let made = d.latest_revision_id.clone();
    let record = RollbackStatus {
        from_revision_id: from,
        to_revision_id: to,
        revision_id: made.clone(),
        generation: pass.obj.metadata.generation,
        at: jiff::Timestamp::now().to_string(),
        reason,
    };
    let message = rollback::message(&record, &pass.status.revisions);
    tracing::info!(
        from = record.from_revision_id,
        to = record.to_revision_id,
        "rolled back"
    );
    pass.status.rollback = Some(Box::new(record));
    if let Some(rid) = made {
        let key = pass.seen.key.clone();
        let started = rid.clone();
        pass.remember
            .push(move |ctx| ctx.revision_started(&key, &started));
        pass.status.latest_revision_id = Some(rid);
        pass.status.revision_status = Some(RevisionStatus::Creating.to_string());
    }
    Ok(Outcome::Progressing {
        reason: reason::ROLLED_BACK,
        message,
    })
}

/// The latest revision: the one the act step read or started, the one
/// status shows ended, or a GET of it.
async fn latest(
    pass: &mut Pass<'_>,
    view: &RemoteView,
    revision: Option<Revision>,
) -> Result<Latest, Box<Report>> {
    let (previous, key) = (pass.previous, pass.seen.key.as_str());
    let known = LatestKnown {
        latest: view.latest_revision_id.as_deref(),
        given: revision.as_ref().map(|r| r.id.as_str()),
        recorded: previous.latest_revision_id.as_deref(),
        recorded_status: previous.revision_status.as_deref(),
    };
    if let Some(rid) = known.started() {
        // Started by this pass's PATCH or create, or a redeploy's answer.
        let (key, rid) = (key.to_owned(), rid.to_owned());
        pass.remember
            .push(move |ctx| ctx.revision_started(&key, &rid));
    }
    let from = known.source();
    let mut latest = Latest {
        id: view.latest_revision_id.clone(),
        status: None,
        created_at: None,
        read: None,
        started_here: known.started_here(),
    };
    let rev = match (from, revision, latest.id.as_deref()) {
        (LatestFrom::Given, Some(rev), _) => rev,
        (LatestFrom::KnownEnded, ..) => {
            latest.status = previous.revision_status.clone().map(RevisionStatus::from);
            return Ok(latest);
        }
        (LatestFrom::Read, _, Some(rid)) => match pass.cp.get_revision(&view.id, rid).await {
            Ok(rev) => {
                remember_revision(pass, &rev);
                rev
            }
            Err(e) => return Err(pass.fail("get revision", e)),
        },
        _ => return Ok(latest),
    };
    latest.created_at = rev.created_at.clone();
    latest.status = Some(rev.status.clone());
    latest.read = Some(rev);
    Ok(latest)
}

/// The outcome as shown: re-applied over a revision made outside
/// ([`verdict::reapplied`]), or `Creating` while the first revision of the
/// create is in progress ([`verdict::creating`]).
fn shown(pass: &Pass<'_>, outcome: Outcome, id: &str) -> Outcome {
    let outcome = match pass.reapplied_over.as_deref() {
        Some(over) => verdict::reapplied(outcome, over),
        None => outcome,
    };
    verdict::creating(outcome, first_revision(pass), id, &pass.seen.body.name)
}

/// The pass follows the first revision of a deployment its object created
/// ([`verdict::first_revision`]).
fn first_revision(pass: &Pass<'_>) -> bool {
    let previous = find(&pass.previous.conditions, READY).map(|c| c.reason.as_str());
    verdict::first_revision(pass.created, previous)
}

/// Learns from `rev` how long revisions of the pass's control plane take
/// ([`super::context::DeploymentContext::learn_revision`]), once the pass's writes
/// are done.
pub(super) fn remember_revision(pass: &mut Pass<'_>, rev: &Revision) {
    let (plane, rev) = (plane_key(pass.cp), rev.clone());
    pass.remember
        .push(move |ctx| ctx.learn_revision(&plane, &rev));
}

/// A failed build or deploy explained by the end of its log, read once,
/// by the pass that first sees the failure; later passes keep the
/// message.
async fn explain_failure(
    pass: &Pass<'_>,
    outcome: Outcome,
    view: &RemoteView,
    latest: &Latest,
) -> Outcome {
    let Outcome::Stalled { reason: r, message } = outcome else {
        return outcome;
    };
    if r != reason::REVISION_FAILED {
        return Outcome::Stalled { reason: r, message };
    }
    let (rid, status) = (latest.id.as_deref(), latest.status.as_ref());
    let shown = Outcome::Stalled {
        reason: r,
        message: message.clone(),
    };
    let message = match (
        verdict::failure_log(&shown, pass.previous, rid, status),
        rid,
    ) {
        (Some(log), Some(rid)) => {
            let read = log_tail(pass, &view.id, rid, log).await;
            logtail::explained(&message, log, read)
        }
        _ => logtail::kept(
            &message,
            find(&pass.previous.conditions, READY).map(|c| c.message.as_str()),
        ),
    };
    Outcome::Stalled { reason: r, message }
}

/// Puts what the pass knows of the deployment and its revision in status,
/// and the event of a change of revision in the report.
fn record(pass: &mut Pass<'_>, view: &RemoteView, latest: &Latest, outcome: &Outcome) {
    let previous = pass.previous;
    let s = &mut pass.status;
    s.deployment_id = Some(view.id.clone());
    s.control_plane = Some(crate::api::deployment::RecordedPlane {
        url: pass.cp.base_url().to_owned(),
        workspace_id: pass.cp.workspace_id().to_owned(),
    });
    s.latest_revision_id = latest.id.clone();
    // A revision this pass started is not read (its next poll reads
    // it): until then the REVISION column shows `CREATING`, the first
    // status of a new revision, rather than nothing.
    s.revision_status = latest.status.as_ref().map(|s| s.to_string()).or_else(|| {
        latest
            .started_here
            .then(|| RevisionStatus::Creating.to_string())
    });
    s.active_revision_id = view.active_revision_id.clone();
    s.deployment_status = view.deployment_status.clone();
    s.url = view.url.clone().or_else(|| previous.url.clone());
    if verdict::failed(outcome) {
        s.last_failed_revision_id = latest.id.clone();
        s.last_failed_revision_status = s.revision_status.clone();
    }
    record_history(s, latest);
    let revision_changed = previous.revision_status != s.revision_status
        || previous.latest_revision_id != s.latest_revision_id;
    // A revision seen ending by this pass counts once in
    // `agent_operator_revision_outcomes_total`, once the status saying so
    // is written.
    if revision_changed && let Some(status) = latest.status.clone().filter(|s| !s.is_in_progress())
    {
        pass.remember
            .push(move |ctx| ctx.metrics.observe_revision_outcome(&status));
    }
    // The first outcome of the revision this resource's create started:
    // its event names the deployment created.
    let first = first_revision(pass);
    let name = &pass.seen.body.name;
    let history = &pass.status.revisions;
    pass.events
        .extend(verdict::revision_event(outcome, revision_changed).map(|e| {
            let e = match latest.id.as_deref() {
                Some(rid) => (e.0, e.1, serving::name_revision(&e.2, rid, history)),
                None => e,
            };
            if first {
                verdict::of_created(e, &view.id, name)
            } else {
                e
            }
        }));
}

/// `status.revisions` ([`history`]) and the provenance of a `github`
/// revision: the revision this pass read, or the one it started (listed at
/// once, so the newest revisions are always the ones kept).
fn record_history(s: &mut crate::api::deployment::AgentDeploymentStatus, latest: &Latest) {
    if let Some(id) = latest.id.as_deref().filter(|_| latest.started_here) {
        history::started(&mut s.revisions, id, &jiff::Timestamp::now().to_string());
    }
    if let Some(rev) = &latest.read {
        history::record(&mut s.revisions, rev);
        if rev.source.as_deref() == Some("github") {
            (s.source_commit, s.built_image) = shapes::revision_provenance(rev);
        }
    }
}

/// The requeue ([`verdict::next`]): the verification's delay, the poll
/// backoff of a revision in progress (shortened by what is learned of
/// how long revisions take), a slow poll past the deadline, or the
/// resync period.
fn requeue(
    pass: &mut Pass<'_>,
    outcome: &Outcome,
    overdue: bool,
    verify_wait: Option<std::time::Duration>,
    latest: &Latest,
) -> Requeue {
    let (ctx, key) = (pass.ctx, pass.seen.key.clone());
    match verdict::next(outcome, overdue, verify_wait.is_some()) {
        Next::Verify => {
            pass.remember.push(move |ctx| ended(ctx, &key));
            Requeue::after(verify_wait.unwrap_or(ctx.config.resync_interval))
        }
        Next::Poll => {
            let state = format!(
                "{}/{}",
                latest.id.as_deref().unwrap_or(""),
                latest.status.as_ref().map_or("", |s| s.as_str())
            );
            let (backoff, unchanged) = ctx.next_poll(&key, &state);
            pass.remember
                .push(move |ctx| ctx.record_poll(&key, &state, unchanged));
            let expected_left = if latest.started_here {
                ctx.expected_left(&plane_key(pass.cp), None)
            } else {
                latest
                    .created_at
                    .as_deref()
                    .and_then(|t| ctx.expected_left(&plane_key(pass.cp), Some(t)))
            };
            Requeue::after(decide::next_poll(
                backoff,
                expected_left,
                ctx.config.max_poll_interval,
            ))
        }
        Next::Slow => Requeue::after(jittered(ctx.config.max_poll_interval * 4)),
        Next::Resync => {
            pass.remember.push(move |ctx| ended(ctx, &key));
            Requeue::after(jittered(ctx.config.resync_interval))
        }
    }
}

/// Forgets the polling of `key`: its revision ended.
fn ended(ctx: &super::context::DeploymentContext, key: &str) {
    ctx.reset_polls(key);
    ctx.revision_ended(key);
}

/// The tail of the log that explains a failed revision, secret-free
/// ([`logtail::tail`]); `Err` with the reason when it cannot be read
/// (not retried: the message says so).
async fn log_tail(
    pass: &Pass<'_>,
    id: &str,
    rid: &str,
    log: FailureLog,
) -> Result<Option<String>, String> {
    let query = LogQuery {
        limit: Some(logtail::TAIL_LINES),
        order: Some(LogOrder::Desc),
        ..Default::default()
    };
    let page = match log {
        FailureLog::Build => pass.cp.build_logs(id, rid, &query).await,
        FailureLog::Deploy => pass.cp.deploy_logs(id, Some(rid), &query).await,
    };
    page.map(|p| logtail::tail(&p.logs, &pass.secret_values))
        .map_err(|e| e.to_string())
}

/// Seconds from the start of the change (the `Reconciling=True` transition,
/// or the creation) to now, when the object was not Ready before; `None` when
/// it already was.
fn time_to_ready(obj: &AgentDeployment) -> Option<f64> {
    use crate::api::conditions::TRUE;
    let conditions = obj
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    if find(conditions, READY).is_some_and(|c| c.status == TRUE) {
        return None;
    }
    let since = find(conditions, crate::plan::status::RECONCILING)
        .filter(|c| c.status == TRUE)
        .map(|c| c.last_transition_time.0)
        .or_else(|| obj.metadata.creation_timestamp.as_ref().map(|t| t.0))?;
    let elapsed = k8s_openapi::jiff::Timestamp::now().duration_since(since);
    Some(elapsed.as_secs_f64().max(0.0))
}
