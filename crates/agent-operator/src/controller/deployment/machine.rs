//! The machine that runs an AgentDeployment pass: it takes the step
//! [`decide()`] chose, adds what the step read or wrote to [`Seen`], and
//! decides again, until a step ends the pass with its [`Report`]; the
//! in-process memory the pass changes travels in that report
//! ([`Report::remember`](crate::controller::kind::Report)), applied only
//! once its writes succeeded.

use kube::Api;

use super::pass::Pass;
use super::report::Report;
use super::step::{Seen, Step, decide};
use super::{act, ending, expire, finalize, follow, observe};
use crate::api::deployment::AgentDeployment;
use crate::controller::deployment::context::DeploymentContext;

/// What a step hands back to the machine.
enum Next {
    /// Decide again, on what the step added to [`Seen`].
    Decide,
    /// The pass ends with this report.
    End(Box<Report>),
}

/// Runs the pass of `obj` from `step` (decided on `seen`) to its report.
pub async fn run(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    ctx: &DeploymentContext,
    mut seen: Seen,
    mut step: Step,
) -> Box<Report> {
    loop {
        let started = seen.inputs.is_some() || !matches!(step, Step::Finalize);
        match take(api, obj, ctx, &mut seen, step).await {
            Next::Decide => step = decide(&seen.view(obj)),
            // A pass whose finalizer could not be written has not started:
            // nothing of it is remembered.
            Next::End(report) if !started => return report,
            Next::End(report) => return remember_first_pass(&seen, report),
        }
    }
}

/// Takes `step`.
async fn take(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    ctx: &DeploymentContext,
    seen: &mut Seen,
    step: Step,
) -> Next {
    match step {
        Step::Finalize => match finalize::run(api, seen.object(obj)).await {
            Ok(()) => {
                seen.finalizer_written = true;
                Next::Decide
            }
            Err(report) => Next::End(report.on(seen.fresh())),
        },
        Step::Observe => {
            let read = observe::read(api, obj, ctx, seen.key.clone(), seen.first_pass).await;
            seen.inputs = Some(read);
            Next::Decide
        }
        Step::Expire => match expire::run(api, ctx, obj).await {
            Ok(()) => {
                seen.expiry_checked = true;
                Next::Decide
            }
            Err(report) => Next::End(report),
        },
        Step::Report(why) => Next::End(ending::run(obj, ctx, seen, why)),
        Step::Delete => Next::End(super::cleanup::cleanup(api, obj, ctx).await),
        remote => Next::End(remote_step(api, obj, ctx, seen, remote).await),
    }
}

/// The steps that read the control plane (and send at most one mutation),
/// then follow the revision: [`Step::Obtain`], [`Step::Poll`],
/// [`Step::Change`], on the object the pass decided on.
async fn remote_step(
    api: &Api<AgentDeployment>,
    obj: &AgentDeployment,
    ctx: &DeploymentContext,
    seen: &Seen,
    step: Step,
) -> Box<Report> {
    let Some(Ok(inputs)) = &seen.inputs else {
        unreachable!("a remote step is decided on the inputs");
    };
    let fresh = inputs.fresh.as_deref();
    let mut pass = Pass::new(api, fresh.unwrap_or(obj), ctx, inputs);
    let acted = match step {
        Step::Poll(rid) => match act::same_plane(&mut pass).await {
            Ok(()) => super::poll::poll_revision(&mut pass, &rid).await,
            Err(report) => Err(report),
        },
        Step::Change => match act::same_plane(&mut pass).await {
            Ok(()) => super::change::read_and_change(&mut pass).await,
            Err(report) => Err(report),
        },
        _ => super::obtain::find_or_create(&mut pass).await,
    };
    match acted {
        Ok(acted) => follow::follow(&mut pass, acted).await.on(fresh),
        Err(report) => report.on(fresh),
    }
}

/// `report`, carrying the memory that the object had its first pass
/// since the operator started, when it had (the cold start:
/// [`Seen::first_pass`]).
fn remember_first_pass(seen: &Seen, mut report: Box<Report>) -> Box<Report> {
    if seen.first_pass && !seen.deleting {
        let key = seen.key.clone();
        report.remember.push(move |ctx| ctx.passed(&key));
    }
    report
}
