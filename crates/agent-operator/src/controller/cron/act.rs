//! The IO edge of an AgentCron pass: the one request of its step, the
//! deletion, and the report (status, conditions, requeue) of each.

use std::time::Duration;

use jiff::Timestamp;
use kube::runtime::controller::Action;

use super::{Observed, WAIT_FOR_INPUTS};
use crate::agentserver::{Cron, Error as AsError};
use crate::api::assistant::RejectedAssistantRequest;
use crate::api::conditions::reason;
use crate::api::cron::{AgentCron, AgentCronStatus, CronDeletionPolicy, CronLastRun};
use crate::api::deployment::PAUSED_ANNOTATION;
use crate::controller::assistant::{CALLS_PER_PASS, NoServer, server_of};
use crate::controller::kind::{Kind, Report};
use crate::controller::report::reason_for;
use crate::controller::{Context, Error, jittered, object_key};
use crate::plan::cron::{Step, digest, ended, kept, patch_body};
use crate::plan::status::Outcome;

/// Most bytes of a server message kept in status.
const MAX_MESSAGE_BYTES: usize = 600;

/// The wait after an agent server that did not answer (transient), or a
/// cron that vanished between the search and the request.
const RETRY_TRANSIENT: Duration = Duration::from_secs(15);

/// The wait after a duplicate was deleted, before the next one is looked
/// for.
const AFTER_DUPLICATE: Duration = Duration::from_secs(2);

/// Takes `step` on the agent server of `seen` and reports.
pub(super) async fn act(
    obj: &AgentCron,
    ctx: &Context,
    seen: Observed,
    step: Step,
) -> Box<Report<AgentCron>> {
    let request = step.request();
    let uid = obj.metadata.uid.as_deref().unwrap_or_default();
    let known = obj.status.as_ref().and_then(|s| s.cron_id.as_deref());
    let (answer, hash) = match step {
        Step::Nothing => {
            let cron = kept(&seen.found, known).cloned();
            // The pass's one request left: the newest run (the drift check
            // changes nothing else), kept as it was when the read fails.
            let last = match &cron {
                Some(_) => last_run(&seen, uid).await,
                None => None,
            };
            return ready(obj, ctx, &seen, cron.as_ref(), None, last, request, None);
        }
        Step::Observe(drift) => {
            let cron = kept(&seen.found, known).cloned();
            let last = match &cron {
                Some(_) => last_run(&seen, uid).await,
                None => None,
            };
            return ready(
                obj,
                ctx,
                &seen,
                cron.as_ref(),
                None,
                last,
                request,
                Some(drift),
            );
        }
        Step::NothingToObserve => {
            let outcome = Outcome::Stalled {
                reason: reason::NOTHING_TO_OBSERVE,
                message: format!(
                    "no cron on the agent server of AgentDeployment {} carries this object's \
                     UID tag ({}: {uid}); nothing is created while spec.managementPolicy is Observe",
                    obj.spec.deployment_ref.name,
                    crate::api::cron::UID_METADATA_KEY
                ),
            };
            return report(
                obj,
                Some(&seen.deployment_id),
                &outcome,
                Ok(Action::requeue(jittered(ctx.config.resync_interval))),
            );
        }
        Step::Held(r) => {
            let outcome = Outcome::Stalled {
                reason: stalled_reason(&r.reason),
                message: format!(
                    "{}: {} (not sent again until the spec changes)",
                    r.request, r.message
                ),
            };
            return report(
                obj,
                Some(&seen.deployment_id),
                &outcome,
                Ok(Action::requeue(jittered(ctx.config.resync_interval))),
            );
        }
        Step::DeleteDuplicate(id) => {
            return match seen.client.delete_cron(&id).await {
                Ok(()) => report(
                    obj,
                    Some(&seen.deployment_id),
                    &Outcome::Progressing {
                        reason: reason::DUPLICATE_CRON_DELETED,
                        message: format!(
                            "deleted cron {id}, a second cron carrying this object's UID tag"
                        ),
                    },
                    Ok(Action::requeue(AFTER_DUPLICATE)),
                ),
                Err(e) => failed(obj, Some(&seen.deployment_id), request, &e, ctx),
            };
        }
        Step::Create(body) => (
            seen.client.create_cron(&body).await,
            digest(&patch_body(&obj.spec, uid, seen.now, seen.paused)),
        ),
        Step::Patch(id, body) => (seen.client.patch_cron(&id, &body).await, digest(&body)),
    };
    match answer {
        Ok(c) => ready(obj, ctx, &seen, Some(&c), Some(hash), None, request, None),
        Err(e) => failed(obj, Some(&seen.deployment_id), request, &e, ctx),
    }
}

/// The newest run the agent server shows for the cron tagged `uid`: its
/// newest thread (`POST /threads/search`); `None` when it shows none or the
/// read failed (logged, not retried).
async fn last_run(seen: &Observed, uid: &str) -> Option<CronLastRun> {
    match seen
        .client
        .search_threads(&crate::plan::cron::last_run_search(uid))
        .await
    {
        Ok(threads) => threads.into_iter().next().map(|t| CronLastRun {
            thread_id: t.thread_id,
            status: t.status,
            time: t.created_at,
        }),
        Err(e) => {
            tracing::debug!(error = %e, "reading the newest run of a cron");
            None
        }
    }
}

/// The report of a cron that is as the spec says (`cron` is `None` only
/// when `endTime` passed before it was created). `hash`: the digest of
/// what this pass sent; `last_run`: the newest run read by this pass (else
/// status keeps the one it had); `observed`: the drift of a cron under
/// `managementPolicy: Observe`, which serves as it is.
#[allow(clippy::too_many_arguments)]
fn ready(
    obj: &AgentCron,
    ctx: &Context,
    seen: &Observed,
    cron: Option<&Cron>,
    hash: Option<String>,
    last_run: Option<CronLastRun>,
    request: &str,
    observed: Option<Vec<crate::api::deployment::DriftField>>,
) -> Box<Report<AgentCron>> {
    let what = if observed.is_some() {
        " (observed: managementPolicy Observe, nothing is changed)".to_owned()
    } else if request.is_empty() {
        String::new()
    } else {
        format!(" ({request})")
    };
    let id = cron.map_or_else(|| "none".to_owned(), |c| c.cron_id.clone());
    let (reason, message) = if ended(&obj.spec, seen.now) {
        (
            reason::CRON_COMPLETED,
            format!("endTime has passed: cron {id} is disabled{what}"),
        )
    } else if seen.paused {
        (
            reason::DEPLOYMENT_PAUSED,
            format!(
                "AgentDeployment {} is paused (annotation {PAUSED_ANNOTATION}): cron {id} is \
                 disabled (enabled: false) until it is unpaused{what}",
                obj.spec.deployment_ref.name
            ),
        )
    } else if obj.spec.suspend {
        (
            reason::CRON_SUSPENDED,
            format!("cron {id} is suspended (enabled: false){what}"),
        )
    } else {
        let next = cron
            .and_then(|c| c.next_run_date.clone())
            .unwrap_or_else(|| "unknown".into());
        (
            reason::CRON_READY,
            format!(
                "cron {id} runs on {:?}, next run {next}{what}",
                obj.spec.schedule
            ),
        )
    };
    let outcome = Outcome::Ready { reason, message };
    let then = Ok(Action::requeue(requeue(obj, ctx, seen.now)));
    let deployment_id = seen.deployment_id.clone();
    let assistant = seen.assistant.clone();
    let cron = cron.cloned();
    let decided = observed.map(|drift| (drift, format!("cron {id}")));
    report_drift(obj, &outcome, then, decided, |s| {
        s.cron_id = cron.as_ref().map(|c| c.cron_id.clone());
        s.next_run_date = cron.as_ref().and_then(|c| c.next_run_date.clone());
        s.enabled = cron.as_ref().map(|c| c.enabled);
        s.assistant_id = cron
            .as_ref()
            .and_then(|c| c.assistant_id.clone())
            .or(Some(assistant));
        s.deployment_id = Some(deployment_id);
        if hash.is_some() {
            s.applied_hash = hash;
        }
        if last_run.is_some() {
            s.last_run = last_run;
        }
        s.rejected_request = None;
    })
}

/// The next pass of a steady cron: the jittered resync period, or just
/// after `endTime` when that comes first.
fn requeue(obj: &AgentCron, ctx: &Context, now: Timestamp) -> Duration {
    let resync = jittered(ctx.config.resync_interval);
    match &obj.spec.end_time {
        Some(t) if t.0 > now => {
            let until = Duration::try_from(t.0.duration_since(now)).unwrap_or(resync);
            resync.min(until + Duration::from_secs(1))
        }
        _ => resync,
    }
}

/// The `Stalled` reason stored in a refused request, as a constant.
fn stalled_reason(stored: &str) -> &'static str {
    [
        reason::GRAPH_NOT_FOUND,
        reason::CRON_REJECTED,
        reason::AGENT_SERVER_UNAUTHORIZED,
    ]
    .into_iter()
    .find(|r| *r == stored)
    .unwrap_or(reason::CRON_REJECTED)
}

/// `s` cut to at most [`MAX_MESSAGE_BYTES`] on a character boundary.
fn bounded(mut s: String) -> String {
    if s.len() > MAX_MESSAGE_BYTES {
        let mut end = MAX_MESSAGE_BYTES;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

/// The report of a request that failed: a refusal (400, 404, 422) of the
/// create or of a PATCH is `Stalled` and recorded, so it is not sent again
/// for this generation; a 404 of a PATCH or DELETE of a known id means the
/// cron vanished since the search (the next pass looks again); 401/403 is
/// `Stalled` until the resync; anything transient is `Reconciling`,
/// retried soon.
pub(super) fn failed(
    obj: &AgentCron,
    deployment_id: Option<&str>,
    request: &str,
    e: &AsError,
    ctx: &Context,
) -> Box<Report<AgentCron>> {
    let message = bounded(format!("{request}: {e}"));
    let create = request == "POST /runs/crons";
    let not_found = matches!(
        e,
        AsError::NotFound { .. } | AsError::AssistantNotFound { .. }
    );
    if not_found && request.ends_with("{id}") {
        let outcome = Outcome::Progressing {
            reason: reason::CRON_VANISHED,
            message: format!("{message} (the cron vanished; looking again)"),
        };
        return report(
            obj,
            deployment_id,
            &outcome,
            Ok(Action::requeue(RETRY_TRANSIENT)),
        );
    }
    if not_found && create && obj.spec.assistant_ref.is_some() {
        // The AgentAssistant was Ready on this server when the pass began:
        // a 404 is a server that does not hold it (yet), e.g. a deployment
        // moved to a new agent server whose assistant pass has not run.
        let outcome = Outcome::Progressing {
            reason: reason::WAITING_FOR_ASSISTANT,
            message: format!("{message} (waiting for the assistant on this agent server)"),
        };
        return report(
            obj,
            deployment_id,
            &outcome,
            Ok(Action::requeue(WAIT_FOR_INPUTS)),
        );
    }
    let reason = match e {
        _ if not_found && create => Some(reason::GRAPH_NOT_FOUND),
        _ => reason_for(&AgentCron::REASONS, e),
    };
    let Some(reason) = reason else {
        let outcome = Outcome::Progressing {
            reason: reason::AGENT_SERVER_UNREACHABLE,
            message,
        };
        return report(
            obj,
            deployment_id,
            &outcome,
            Ok(Action::requeue(RETRY_TRANSIENT)),
        );
    };
    let outcome = Outcome::Stalled {
        reason,
        message: message.clone(),
    };
    let refused = not_found || matches!(e, AsError::Rejected { .. });
    let record = (refused && (create || request == "PATCH /runs/crons/{id}")).then(|| {
        RejectedAssistantRequest {
            generation: obj.metadata.generation.unwrap_or_default(),
            request: request.to_owned(),
            reason: reason.to_owned(),
            message,
        }
    });
    let then = Ok(Action::requeue(jittered(ctx.config.resync_interval)));
    report_with(obj, &outcome, then, |s| {
        if let Some(d) = deployment_id {
            s.deployment_id = Some(d.to_owned());
        }
        if record.is_some() {
            s.rejected_request = record;
        }
    })
}

/// The report of `outcome`, the status otherwise as it was (with
/// `deployment_id` when given).
pub(super) fn report(
    obj: &AgentCron,
    deployment_id: Option<&str>,
    outcome: &Outcome,
    then: Result<Action, Error>,
) -> Box<Report<AgentCron>> {
    report_with(obj, outcome, then, |s| {
        if let Some(d) = deployment_id {
            s.deployment_id = Some(d.to_owned());
        }
    })
}

/// The report of `outcome` with the status `edit` makes of the object's.
fn report_with(
    obj: &AgentCron,
    outcome: &Outcome,
    then: Result<Action, Error>,
    edit: impl FnOnce(&mut AgentCronStatus),
) -> Box<Report<AgentCron>> {
    report_drift(obj, outcome, then, None, edit)
}

/// [`report_with`], with the drift a pass under `managementPolicy:
/// Observe` found (`None`: the last one is kept; under `Manage` there is
/// none: [`crate::controller::report::apply_drift`]).
fn report_drift(
    obj: &AgentCron,
    outcome: &Outcome,
    then: Result<Action, Error>,
    decided: Option<(Vec<crate::api::deployment::DriftField>, String)>,
    edit: impl FnOnce(&mut AgentCronStatus),
) -> Box<Report<AgentCron>> {
    let mut base = obj.status.clone().unwrap_or_default();
    edit(&mut base);
    let previous = obj
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    Report::outcome_with(obj, outcome, then, |observed_generation, conditions| {
        let mut status = AgentCronStatus {
            observed_generation,
            conditions,
            ..base
        };
        crate::controller::report::apply_drift(
            &mut status.conditions,
            &mut status.drift,
            &previous,
            obj.spec.management_policy,
            decided,
            observed_generation,
        );
        status
    })
}

/// The pass of an AgentCron being deleted: `Orphan` (or `managementPolicy:
/// Observe`) lets it go; `Delete`
/// sends `DELETE /runs/crons/{id}` (404: already gone) to the agent server
/// that holds it: the id in status, else the cron the UID tag finds (a
/// create whose answer was lost), one per pass until the search finds
/// none. Its finalizer goes at once when no cron can be left: the
/// deployment is gone or re-created under another id (a new, empty agent
/// server).
pub(super) async fn cleanup(obj: &AgentCron, ctx: &Context) -> Box<Report<AgentCron>> {
    let done = || Report::end(Action::await_change());
    // An observed cron is never deleted, whatever deletionPolicy says.
    if obj.spec.deletion_policy == CronDeletionPolicy::Orphan
        || obj.spec.management_policy == crate::api::deployment::ManagementPolicy::Observe
    {
        return done();
    }
    let status = obj.status.clone().unwrap_or_default();
    let Some(ns) = obj.metadata.namespace.as_deref() else {
        return Report::failed(Error::MissingObjectKey("namespace"));
    };
    let server = match server_of(ctx, ns, &obj.spec.deployment_ref.name).await {
        Ok(Ok(s)) => s,
        // The deployment is gone: so is its agent server and the cron.
        Ok(Err(NoServer::Missing(_))) => return done(),
        // No request ever reached an agent server: no cron can exist.
        Ok(Err(_)) if status.deployment_id.is_none() => return done(),
        Ok(Err(NoServer::NotReady(message))) => {
            let outcome = Outcome::Progressing {
                reason: reason::DELETING,
                message: format!("{message}, to delete the cron"),
            };
            return report(obj, None, &outcome, Ok(Action::requeue(WAIT_FOR_INPUTS)));
        }
        Ok(Err(NoServer::Blocked(outcome))) => {
            return report(
                obj,
                None,
                &outcome,
                Ok(Action::requeue(jittered(ctx.config.resync_interval))),
            );
        }
        Err(e) => return Report::failed(e),
    };
    if status
        .deployment_id
        .as_ref()
        .is_some_and(|held_by| *held_by != server.deployment_id)
    {
        return done();
    }
    if let Err(crate::controller::deployment::verify::Deferred(wait)) =
        ctx.verifier
            .admit(&object_key(obj), &server.deployment_id, CALLS_PER_PASS)
    {
        return Report::end(Action::requeue(wait));
    }
    let known = status.cron_id.clone();
    let (id, last) = match known {
        Some(id) => (id, true),
        None => {
            let uid = obj.metadata.uid.as_deref().unwrap_or_default();
            match server
                .client
                .search_crons(&crate::plan::cron::search(uid))
                .await
            {
                Ok(found) => match found.into_iter().next() {
                    Some(c) => (c.cron_id, false),
                    None => return done(),
                },
                Err(e) => return cleanup_failed(obj, ctx, &status, "POST /runs/crons/search", &e),
            }
        }
    };
    match server.client.delete_cron(&id).await {
        Ok(()) if last => done(),
        Ok(()) => Report::end(Action::requeue(AFTER_DUPLICATE)),
        Err(e) => cleanup_failed(obj, ctx, &status, "DELETE /runs/crons/{id}", &e),
    }
}

/// The report of a failed request of the deletion: not recorded as a
/// refused spec.
fn cleanup_failed(
    obj: &AgentCron,
    ctx: &Context,
    status: &AgentCronStatus,
    request: &str,
    e: &AsError,
) -> Box<Report<AgentCron>> {
    let mut r = failed(obj, None, request, e, ctx);
    if let Some(s) = r.status.as_mut() {
        s.rejected_request = status.rejected_request.clone();
    }
    r
}
