//! The IO edge of an AgentCron pass: the one request of its step, the
//! deletion, and the report (status, conditions, requeue) of each; the
//! reports themselves are the shared ones of [`crate::controller::child`].

use std::time::Duration;

use jiff::Timestamp;
use kube::runtime::controller::Action;

use crate::agentserver::{AgentServerClient, Cron, Error as AsError};
use crate::api::conditions::reason;
use crate::api::cron::{AgentCron, CronLastRun};
use crate::api::deployment::DriftField;
use crate::controller::child::{self, Failure, RETRY_TRANSIENT, bounded};
use crate::controller::context::Context;
use crate::controller::kind::{Kind, Report};
use crate::controller::report::reason_for;
use crate::controller::requeue::jittered;
use crate::plan::cron::{Step, digest, kept, patch_body, ready_reason};
use crate::plan::status::Outcome;

/// How long a pass waits for a deployment or assistant that is missing or
/// not ready yet before looking again (a change of either wakes it sooner).
pub const WAIT_FOR_INPUTS: Duration = Duration::from_secs(30);

/// What a pass observed before it decides.
pub struct Observed {
    /// The agent server client of the deployment.
    pub(super) client: AgentServerClient,
    /// The remote id of the deployment.
    pub(super) deployment_id: String,
    /// The assistant id (of `assistantRef`) or the graph id.
    pub(super) assistant: String,
    /// The crons carrying the object's UID tag.
    pub(super) found: Vec<Cron>,
    /// When the pass observed (for `endTime`).
    pub(super) now: Timestamp,
    /// The AgentDeployment is paused: the cron is disabled.
    pub(super) paused: bool,
    /// The budget's permit, held until the pass ends.
    pub(super) _permit: crate::agentserver::limits::Permit,
}

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
    let (answer, hash) = match step {
        Step::Nothing => return steady(obj, ctx, &seen, request, None).await,
        Step::Observe(drift) => return steady(obj, ctx, &seen, request, Some(drift)).await,
        Step::NothingToObserve => return nothing_to_observe(obj, ctx, &seen),
        Step::Held(r) => return child::held(obj, ctx, &seen.deployment_id, &r),
        Step::DeleteDuplicate(id) => return delete_duplicate(obj, ctx, &seen, &id, request).await,
        Step::Create(body) => (
            seen.client.create_cron(&body).await,
            digest(&patch_body(&obj.spec, uid, seen.now, seen.paused)),
        ),
        Step::Patch(id, body) => (seen.client.patch_cron(&id, &body).await, digest(&body)),
    };
    let done = Done {
        hash: Some(hash),
        last_run: None,
        request,
        drift: None,
    };
    match answer {
        Ok(c) => ready(obj, ctx, &seen, Some(&c), done),
        Err(e) => failed(obj, Some(&seen.deployment_id), request, &e, ctx),
    }
}

/// The pass of a cron that needs no change (`drift`: it is observed,
/// `managementPolicy: Observe`): its one request left is the newest run
/// (the drift check changes nothing else), kept as it was when the read
/// fails.
async fn steady(
    obj: &AgentCron,
    ctx: &Context,
    seen: &Observed,
    request: &'static str,
    drift: Option<Vec<DriftField>>,
) -> Box<Report<AgentCron>> {
    let known = obj.status.as_ref().and_then(|s| s.cron_id.as_deref());
    let cron = kept(&seen.found, known).cloned();
    let last_run = match &cron {
        Some(_) => last_run(seen, obj.metadata.uid.as_deref().unwrap_or_default()).await,
        None => None,
    };
    let done = Done {
        hash: None,
        last_run,
        request,
        drift,
    };
    ready(obj, ctx, seen, cron.as_ref(), done)
}

/// The report of an observed object with no cron carrying its UID tag:
/// nothing is created under `managementPolicy: Observe`.
fn nothing_to_observe(obj: &AgentCron, ctx: &Context, seen: &Observed) -> Box<Report<AgentCron>> {
    let outcome = Outcome::Stalled {
        reason: reason::NOTHING_TO_OBSERVE,
        message: format!(
            "no cron on the agent server of AgentDeployment {} carries this object's \
             UID tag ({}: {}); nothing is created while spec.managementPolicy is Observe",
            obj.spec.deployment_ref.name,
            crate::api::cron::UID_METADATA_KEY,
            obj.metadata.uid.as_deref().unwrap_or_default()
        ),
    };
    child::until_resync(obj, ctx, Some(&seen.deployment_id), outcome)
}

/// Deletes `id`, a second cron carrying the object's UID tag, and looks
/// for the next one soon.
async fn delete_duplicate(
    obj: &AgentCron,
    ctx: &Context,
    seen: &Observed,
    id: &str,
    request: &str,
) -> Box<Report<AgentCron>> {
    match seen.client.delete_cron(id).await {
        Ok(()) => child::report(
            obj,
            Some(&seen.deployment_id),
            &Outcome::Progressing {
                reason: reason::DUPLICATE_CRON_DELETED,
                message: format!("deleted cron {id}, a second cron carrying this object's UID tag"),
            },
            Ok(Action::requeue(AFTER_DUPLICATE)),
        ),
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

/// What a pass that ends with its cron as the spec says did.
struct Done {
    /// The digest of what this pass sent, if it sent the cron.
    hash: Option<String>,
    /// The newest run read by this pass (else status keeps the one it had).
    last_run: Option<CronLastRun>,
    /// The request sent ("" when none).
    request: &'static str,
    /// The drift of a cron under `managementPolicy: Observe`, which serves
    /// as it is.
    drift: Option<Vec<DriftField>>,
}

/// The report of a cron that is as the spec says (`cron` is `None` only
/// when `endTime` passed before it was created).
fn ready(
    obj: &AgentCron,
    ctx: &Context,
    seen: &Observed,
    cron: Option<&Cron>,
    done: Done,
) -> Box<Report<AgentCron>> {
    let what = if done.drift.is_some() {
        " (observed: managementPolicy Observe, nothing is changed)".to_owned()
    } else if done.request.is_empty() {
        String::new()
    } else {
        format!(" ({})", done.request)
    };
    let id = cron.map_or_else(|| "none".to_owned(), |c| c.cron_id.clone());
    let next = cron.and_then(|c| c.next_run_date.as_deref());
    let (reason, message) = ready_reason(&obj.spec, seen.now, seen.paused, &id, next, &what);
    let outcome = Outcome::Ready { reason, message };
    let then = Ok(Action::requeue(requeue(obj, ctx, seen.now)));
    let decided = done.drift.map(|drift| (drift, format!("cron {id}")));
    child::report_drift(obj, &outcome, then, decided, |s| {
        s.cron_id = cron.map(|c| c.cron_id.clone());
        s.next_run_date = cron.and_then(|c| c.next_run_date.clone());
        s.enabled = cron.map(|c| c.enabled);
        s.assistant_id = cron
            .and_then(|c| c.assistant_id.clone())
            .or(Some(seen.assistant.clone()));
        s.deployment_id = Some(seen.deployment_id.clone());
        if done.hash.is_some() {
            s.applied_hash = done.hash;
        }
        if done.last_run.is_some() {
            s.last_run = done.last_run;
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
        let then = Ok(Action::requeue(RETRY_TRANSIENT));
        return child::report(obj, deployment_id, &outcome, then);
    }
    if not_found && create && obj.spec.assistant_ref.is_some() {
        // The AgentAssistant was Ready on this server when the pass began:
        // a 404 is a server that does not hold it (yet), e.g. a deployment
        // moved to a new agent server whose assistant pass has not run.
        let outcome = Outcome::Progressing {
            reason: reason::WAITING_FOR_ASSISTANT,
            message: format!("{message} (waiting for the assistant on this agent server)"),
        };
        let then = Ok(Action::requeue(WAIT_FOR_INPUTS));
        return child::report(obj, deployment_id, &outcome, then);
    }
    let reason = match not_found && create {
        true => Some(reason::GRAPH_NOT_FOUND),
        false => reason_for(&AgentCron::REASONS, e),
    };
    let refused = not_found || matches!(e, AsError::Rejected { .. });
    let failure = Failure {
        request,
        message,
        reason,
        record: refused && (create || request == "PATCH /runs/crons/{id}"),
    };
    child::failure(obj, ctx, deployment_id, failure)
}

/// The pass of an AgentCron being deleted: `Orphan` (or `managementPolicy:
/// Observe`) lets it go; `Delete` sends `DELETE /runs/crons/{id}` (404:
/// already gone) to the agent server that holds it ([`child::holder`]):
/// the id in status, else the cron the UID tag finds (a create whose answer
/// was lost), one per pass until the search finds none.
pub(super) async fn cleanup(obj: &AgentCron, ctx: &Context) -> Box<Report<AgentCron>> {
    let done = || Report::end(Action::await_change());
    let server = match child::holder(obj, ctx).await {
        Ok(s) => s,
        Err(report) => return report,
    };
    let known = obj.status.as_ref().and_then(|s| s.cron_id.clone());
    let (id, last) = match known {
        Some(id) => (id, true),
        None => {
            let uid = obj.metadata.uid.as_deref().unwrap_or_default();
            let search = crate::plan::cron::search(uid);
            match server.client.search_crons(&search).await {
                Ok(found) => match found.into_iter().next() {
                    Some(c) => (c.cron_id, false),
                    None => return done(),
                },
                Err(e) => return cleanup_failed(obj, ctx, "POST /runs/crons/search", &e),
            }
        }
    };
    match server.client.delete_cron(&id).await {
        Ok(()) if last => done(),
        Ok(()) => Report::end(Action::requeue(AFTER_DUPLICATE)),
        Err(e) => cleanup_failed(obj, ctx, "DELETE /runs/crons/{id}", &e),
    }
}

/// The report of a failed request of the deletion: not recorded as a
/// refused spec.
fn cleanup_failed(
    obj: &AgentCron,
    ctx: &Context,
    request: &str,
    e: &AsError,
) -> Box<Report<AgentCron>> {
    child::keep_rejected(obj, failed(obj, None, request, e, ctx))
}
