//! The IO edge of an AgentAssistant pass: the one request of its step, the
//! deletion, and the report (status, conditions, requeue) of each.

use std::time::Duration;

use kube::runtime::controller::Action;

use super::{CALLS_PER_PASS, NoServer, Observed, WAIT_FOR_DEPLOYMENT, server};
use crate::agentserver::{Assistant, Error as AsError};
use crate::api::assistant::{
    AgentAssistant, AgentAssistantStatus, AssistantDeletionPolicy, RejectedAssistantRequest,
};
use crate::api::conditions::reason;
use crate::controller::kind::{Kind, Report};
use crate::controller::report::reason_for;
use crate::controller::{Context, Error, jittered, object_key};
use crate::plan::assistant::Step;
use crate::plan::status::Outcome;

/// Most bytes of a server message kept in status.
const MAX_MESSAGE_BYTES: usize = 600;

/// The wait after an agent server that did not answer (transient).
const RETRY_TRANSIENT: Duration = Duration::from_secs(15);

/// Takes `step` on the agent server of `seen` and reports.
pub(super) async fn act(
    obj: &AgentAssistant,
    ctx: &Context,
    seen: Observed,
    step: Step,
) -> Box<Report<AgentAssistant>> {
    let request = step.request();
    let answer = match step {
        Step::Nothing => Ok(seen.current.clone().unwrap_or_default()),
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
        Step::Observe(drift) => {
            let current = seen.current.clone().unwrap_or_default();
            return observed(obj, ctx, &seen.deployment_id, &current, drift);
        }
        Step::NothingToObserve => {
            let outcome = Outcome::Stalled {
                reason: reason::NOTHING_TO_OBSERVE,
                message: format!(
                    "assistant {} does not exist on the agent server of AgentDeployment {}; \
                     nothing is created while spec.managementPolicy is Observe",
                    seen.id, obj.spec.deployment_ref.name
                ),
            };
            return report(
                obj,
                Some(&seen.deployment_id),
                &outcome,
                Ok(Action::requeue(jittered(ctx.config.resync_interval))),
            );
        }
        Step::Create(body) => seen.client.create_assistant(&body).await,
        Step::Patch(body) => seen.client.patch_assistant(&seen.id, &body).await,
        Step::SetLatest(v) => seen.client.set_latest_assistant_version(&seen.id, v).await,
    };
    match answer {
        Ok(a) => ready(obj, ctx, &seen.deployment_id, &a, request),
        Err(e) => failed(obj, Some(&seen.deployment_id), request, &e, ctx),
    }
}

/// The report of an assistant that is as the spec says.
fn ready(
    obj: &AgentAssistant,
    ctx: &Context,
    deployment_id: &str,
    a: &Assistant,
    request: &str,
) -> Box<Report<AgentAssistant>> {
    let what = if request.is_empty() {
        String::new()
    } else {
        format!(" ({request})")
    };
    let outcome = Outcome::Ready {
        reason: reason::ASSISTANT_READY,
        message: format!(
            "assistant {} of graph {:?} serves version {}{what}",
            a.assistant_id,
            a.graph_id,
            a.version.unwrap_or_default()
        ),
    };
    let then = Ok(Action::requeue(jittered(ctx.config.resync_interval)));
    report_with(obj, &outcome, then, |s| {
        s.assistant_id = Some(a.assistant_id.clone());
        s.version = a.version;
        s.graph_id = Some(a.graph_id.clone());
        s.deployment_id = Some(deployment_id.to_owned());
        s.rejected_request = None;
    })
}

/// The report of an observed assistant (`managementPolicy: Observe`): it
/// serves as it is, `drift` lists how it differs from the spec.
fn observed(
    obj: &AgentAssistant,
    ctx: &Context,
    deployment_id: &str,
    a: &Assistant,
    drift: Vec<crate::api::deployment::DriftField>,
) -> Box<Report<AgentAssistant>> {
    let outcome = Outcome::Ready {
        reason: reason::ASSISTANT_READY,
        message: format!(
            "assistant {} of graph {:?} serves version {} (observed: managementPolicy Observe, nothing is changed)",
            a.assistant_id,
            a.graph_id,
            a.version.unwrap_or_default()
        ),
    };
    let then = Ok(Action::requeue(jittered(ctx.config.resync_interval)));
    let what = format!("assistant {}", a.assistant_id);
    report_drift(
        obj,
        &outcome,
        then,
        |s| {
            s.assistant_id = Some(a.assistant_id.clone());
            s.version = a.version;
            s.graph_id = Some(a.graph_id.clone());
            s.deployment_id = Some(deployment_id.to_owned());
            s.rejected_request = None;
        },
        Some((drift, what)),
    )
}

/// The `Stalled` reason stored in a refused request, as a constant.
fn stalled_reason(stored: &str) -> &'static str {
    [
        reason::GRAPH_NOT_FOUND,
        reason::ASSISTANT_REJECTED,
        reason::AGENT_SERVER_UNAUTHORIZED,
    ]
    .into_iter()
    .find(|r| *r == stored)
    .unwrap_or(reason::ASSISTANT_REJECTED)
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

/// The report of a request that failed: a refusal (400, 404, 422) of a
/// mutating request is `Stalled` and recorded, so it is not sent again for
/// this generation; 401/403 is `Stalled` until the resync; anything
/// transient is `Reconciling`, retried soon.
pub(super) fn failed(
    obj: &AgentAssistant,
    deployment_id: Option<&str>,
    request: &str,
    e: &AsError,
    ctx: &Context,
) -> Box<Report<AgentAssistant>> {
    let message = bounded(format!("{request}: {e}"));
    let refused = matches!(
        e,
        AsError::NotFound { .. } | AsError::AssistantNotFound { .. } | AsError::Rejected { .. }
    );
    let reason = match e {
        AsError::NotFound { .. } | AsError::AssistantNotFound { .. } => {
            Some(reason::GRAPH_NOT_FOUND)
        }
        _ => reason_for(&AgentAssistant::REASONS, e),
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
    let record = (refused && request != "GET /assistants/{id}").then(|| RejectedAssistantRequest {
        generation: obj.metadata.generation.unwrap_or_default(),
        request: request.to_owned(),
        reason: reason.to_owned(),
        message,
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
    obj: &AgentAssistant,
    deployment_id: Option<&str>,
    outcome: &Outcome,
    then: Result<Action, Error>,
) -> Box<Report<AgentAssistant>> {
    report_with(obj, outcome, then, |s| {
        if let Some(d) = deployment_id {
            s.deployment_id = Some(d.to_owned());
        }
    })
}

/// The report of `outcome` with the status `edit` makes of the object's.
fn report_with(
    obj: &AgentAssistant,
    outcome: &Outcome,
    then: Result<Action, Error>,
    edit: impl FnOnce(&mut AgentAssistantStatus),
) -> Box<Report<AgentAssistant>> {
    report_drift(obj, outcome, then, edit, None)
}

/// [`report_with`], with the drift a pass under `managementPolicy:
/// Observe` found (`None`: the last one is kept; under `Manage` there is
/// none: [`crate::controller::report::apply_drift`]).
fn report_drift(
    obj: &AgentAssistant,
    outcome: &Outcome,
    then: Result<Action, Error>,
    edit: impl FnOnce(&mut AgentAssistantStatus),
    decided: Option<(Vec<crate::api::deployment::DriftField>, String)>,
) -> Box<Report<AgentAssistant>> {
    let mut base = obj.status.clone().unwrap_or_default();
    edit(&mut base);
    let previous = obj
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    Report::outcome_with(obj, outcome, then, |observed_generation, conditions| {
        let mut status = AgentAssistantStatus {
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

/// The pass of an AgentAssistant being deleted: `Orphan` (or
/// `managementPolicy: Observe`) lets it go;
/// `Delete` sends `DELETE /assistants/{id}` (404: already gone) to the
/// agent server that holds it. Its finalizer goes at once when no assistant
/// can be left: the deployment is gone, re-created under another id (a new,
/// empty agent server), or nothing was ever created.
pub(super) async fn cleanup(obj: &AgentAssistant, ctx: &Context) -> Box<Report<AgentAssistant>> {
    let done = || Report::end(Action::await_change());
    // An observed assistant is never deleted, whatever deletionPolicy says.
    if obj.spec.deletion_policy == AssistantDeletionPolicy::Orphan
        || obj.spec.management_policy == crate::api::deployment::ManagementPolicy::Observe
    {
        return done();
    }
    let status = obj.status.clone().unwrap_or_default();
    let Some(held_by) = status.deployment_id.clone() else {
        return done();
    };
    let server = match server(obj, ctx).await {
        Ok(Ok(s)) => s,
        Ok(Err(NoServer::Missing(_))) => return done(),
        Ok(Err(NoServer::NotReady(message))) => {
            let outcome = Outcome::Progressing {
                reason: reason::DELETING,
                message: format!("{message}, to delete the assistant"),
            };
            return report(
                obj,
                None,
                &outcome,
                Ok(Action::requeue(WAIT_FOR_DEPLOYMENT)),
            );
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
    if server.deployment_id != held_by {
        return done();
    }
    if let Err(crate::controller::deployment::verify::Deferred(wait)) =
        ctx.verifier
            .admit(&object_key(obj), &server.deployment_id, CALLS_PER_PASS)
    {
        return Report::end(Action::requeue(wait));
    }
    let id = crate::plan::assistant::assistant_id(
        &obj.spec,
        obj.metadata.uid.as_deref().unwrap_or_default(),
    );
    match server.client.delete_assistant(&id).await {
        Ok(()) => done(),
        Err(e) => {
            let mut r = failed(obj, None, "DELETE /assistants/{id}", &e, ctx);
            // A refusal of the DELETE is not recorded as a refused spec.
            if let Some(s) = r.status.as_mut() {
                s.rejected_request = status.rejected_request.clone();
            }
            r
        }
    }
}
