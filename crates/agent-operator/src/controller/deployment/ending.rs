//! The report step of the AgentDeployment pass
//! ([`Step::Report`](super::step::Step::Report)): the pass ends with no
//! request, for the reason [`Ending`] names: paused, expired, an input
//! missing, a wait that is not over, or the spread first drift check after
//! a restart.

use tracing::debug;

use super::expire;
use super::report::Report;
use super::step::{Ending, Seen};
use crate::api::conditions::reason;
use crate::api::deployment::{AgentDeployment, DEPLOYMENT_ID_ANNOTATION, PAUSED_ANNOTATION};
use crate::controller::deployment::context::DeploymentContext;
use crate::controller::kind::Requeue;
use crate::plan::status::Outcome;

/// The status reported while the pause annotation is set.
pub fn paused_outcome() -> Outcome {
    Outcome::Paused {
        message: format!("paused by the annotation {PAUSED_ANNOTATION}; no remote call is made"),
    }
}

/// The report of a pass of `obj` that ends for `why`, with what was
/// `seen` (the report of a missing input is taken from it).
pub fn run(
    obj: &AgentDeployment,
    ctx: &DeploymentContext,
    seen: &mut Seen,
    why: Ending,
) -> Box<Report> {
    let wait = match why {
        Ending::Paused => {
            return Report::outcome(obj, &paused_outcome(), Requeue::await_change());
        }
        Ending::InvalidPause => {
            let message = seen.paused.clone().err().unwrap_or_default();
            return Report::stalled(obj, ctx, reason::INVALID_ANNOTATION, message);
        }
        Ending::Expired => return expire::already_expired(obj),
        Ending::Stopped => {
            return match seen.inputs.take() {
                Some(Err(report)) => report,
                _ => Report::end(Requeue::await_change()),
            };
        }
        Ending::ColdStart => return cold_start(seen.object(obj), ctx).on(seen.fresh()),
        Ending::WaitRejected(delay) => {
            debug!(
                retry_in_s = delay.as_secs(),
                "a rejected request is not due yet"
            );
            delay
        }
        Ending::WaitSecrets(delay) => {
            debug!(
                retry_in_s = delay.as_secs(),
                "a change of Secret values waits for the last one's interval"
            );
            delay
        }
        Ending::WaitRemoteDeleting(delay) => {
            debug!(
                read_in_s = delay.as_secs_f64(),
                "the remote deployment is being deleted outside the operator"
            );
            delay
        }
    };
    Report::end(Requeue::after(wait)).on(seen.fresh())
}

/// The end of the first pass after a restart of `obj`, which had converged
/// on its generation: its drift check, spread at random over the resync
/// period.
fn cold_start(obj: &AgentDeployment, ctx: &DeploymentContext) -> Box<Report> {
    let delay = ctx
        .config
        .resync_interval
        .mul_f64(rand::random_range(0.0..1.0));
    debug!(check_in_s = delay.as_secs(), "converged before the restart");
    // A replica killed between the status write that recorded the id and
    // the annotation write after it left status without the annotation:
    // write it now (no request), by the rule every report follows, so that
    // a restore without status still leads back to the deployment.
    let mut report = Report::end(Requeue::after(delay));
    report.annotations = crate::plan::steps::id_annotations(
        obj.status.as_ref().and_then(|s| s.deployment_id.as_deref()),
        obj.create_pending(),
        obj.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(DEPLOYMENT_ID_ANNOTATION))
            .map(String::as_str),
    );
    report
}
