//! The IO edge of an AgentAssistant pass: the one request of its step, the
//! deletion, and the report (status, conditions, requeue) of each; the
//! reports themselves are the shared ones of [`crate::controller::child`].

use kube::runtime::controller::Action;

use crate::agentserver::{AgentServerClient, Assistant, Error as AsError};
use crate::api::assistant::AgentAssistant;
use crate::api::conditions::reason;
use crate::api::deployment::DriftField;
use crate::controller::child::{self, Failure, bounded};
use crate::controller::context::Context;
use crate::controller::kind::{Kind, Report};
use crate::controller::report::reason_for;
use crate::controller::requeue::jittered;
use crate::plan::assistant::Step;
use crate::plan::status::Outcome;

/// What a pass observed before it decides.
pub struct Observed {
    /// The agent server client of the deployment.
    pub(super) client: AgentServerClient,
    /// The remote id of the deployment.
    pub(super) deployment_id: String,
    /// The assistant id.
    pub(super) id: String,
    /// `GET /assistants/{id}`; `None`: 404.
    pub(super) current: Option<Assistant>,
    /// The budget's permit, held until the pass ends.
    pub(super) _permit: crate::agentserver::limits::Permit,
}

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
        Step::Held(r) => return child::held(obj, ctx, &seen.deployment_id, &r),
        Step::Observe(drift) => {
            let current = seen.current.clone().unwrap_or_default();
            return ready(
                obj,
                ctx,
                &seen.deployment_id,
                &current,
                request,
                Some(drift),
            );
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
            return child::until_resync(obj, ctx, Some(&seen.deployment_id), outcome);
        }
        Step::Create(body) => seen.client.create_assistant(&body).await,
        Step::Patch(body) => seen.client.patch_assistant(&seen.id, &body).await,
        Step::SetLatest(v) => seen.client.set_latest_assistant_version(&seen.id, v).await,
    };
    match answer {
        Ok(a) => ready(obj, ctx, &seen.deployment_id, &a, request, None),
        Err(e) => failed(obj, Some(&seen.deployment_id), request, &e, ctx),
    }
}

/// The report of an assistant that is as the spec says, or, with `drift`,
/// of an observed one (`managementPolicy: Observe`): it serves as it is,
/// `drift` lists how it differs from the spec.
fn ready(
    obj: &AgentAssistant,
    ctx: &Context,
    deployment_id: &str,
    a: &Assistant,
    request: &str,
    drift: Option<Vec<DriftField>>,
) -> Box<Report<AgentAssistant>> {
    let what = if drift.is_some() {
        " (observed: managementPolicy Observe, nothing is changed)".to_owned()
    } else if request.is_empty() {
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
    let decided = drift.map(|d| (d, format!("assistant {}", a.assistant_id)));
    child::report_drift(obj, &outcome, then, decided, |s| {
        s.assistant_id = Some(a.assistant_id.clone());
        s.version = a.version;
        s.graph_id = Some(a.graph_id.clone());
        s.deployment_id = Some(deployment_id.to_owned());
        s.rejected_request = None;
    })
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
    let not_found = matches!(
        e,
        AsError::NotFound { .. } | AsError::AssistantNotFound { .. }
    );
    let refused = not_found || matches!(e, AsError::Rejected { .. });
    let reason = match not_found {
        true => Some(reason::GRAPH_NOT_FOUND),
        false => reason_for(&AgentAssistant::REASONS, e),
    };
    let failure = Failure {
        request,
        message: bounded(format!("{request}: {e}")),
        reason,
        record: refused && request != "GET /assistants/{id}",
    };
    child::failure(obj, ctx, deployment_id, failure)
}

/// The pass of an AgentAssistant being deleted: `Orphan` (or
/// `managementPolicy: Observe`) lets it go; `Delete` sends `DELETE
/// /assistants/{id}` (404: already gone) to the agent server that holds it
/// ([`child::holder`]: the finalizer goes at once when no assistant can be
/// left, e.g. nothing was ever created).
pub(super) async fn cleanup(obj: &AgentAssistant, ctx: &Context) -> Box<Report<AgentAssistant>> {
    let server = match child::holder(obj, ctx).await {
        Ok(s) => s,
        Err(report) => return report,
    };
    let id = crate::plan::assistant::assistant_id(
        &obj.spec,
        obj.metadata.uid.as_deref().unwrap_or_default(),
    );
    match server.client.delete_assistant(&id).await {
        Ok(()) => Report::end(Action::await_change()),
        Err(e) => child::keep_rejected(obj, failed(obj, None, "DELETE /assistants/{id}", &e, ctx)),
    }
}
