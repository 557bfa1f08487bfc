//! The Poll step of the AgentDeployment pass ([`super::step::Step::Poll`]):
//! a revision is in progress and nothing changed, so only that revision is
//! read, when its poll is due (a scout's, or after the learned duration).
//! Sources: docs/control-plane-api.md "Polling".

use crate::controller::kind::Requeue;

use super::change::read_and_change;
use super::pass::{Acted, Pass, RemoteView};
use super::plane::plane_key;
use super::report::{Flow, Report};
use crate::controller::deployment::context::PollDue;
use crate::controlplane::Error as CpError;
use crate::controlplane::types::RevisionStatus;

/// A revision is in progress and nothing changed: GETs only the revision
/// `rid` (when its poll is due); a SKIPPED or missing one sends the pass
/// on to read the deployment.
pub(super) async fn poll_revision(pass: &mut Pass<'_>, rid: &str) -> Flow<Acted> {
    let (ctx, cp) = (pass.ctx, pass.cp);
    let plane = plane_key(cp);
    match ctx.poll_wait(&pass.seen.key, &plane, rid) {
        PollDue::In(wait) => return Err(Report::end(Requeue::after(wait))),
        PollDue::Scout => {
            let key = pass.seen.key.clone();
            pass.remember.push(move |ctx| ctx.scout(&key, &plane));
        }
        PollDue::Now => {}
    }
    let id = pass.previous.deployment_id.clone().unwrap_or_default();
    match cp.get_revision(&id, rid).await {
        Ok(rev) if rev.status != RevisionStatus::Skipped => {
            super::follow::remember_revision(pass, &rev);
            let mut view = RemoteView::from_status(pass.previous, &id);
            if rev.status == RevisionStatus::Deployed {
                view.active_revision_id = Some(rid.to_owned());
            }
            Ok(Acted {
                view,
                revision: Some(rev),
            })
        }
        // A SKIPPED revision points at a newer one, a 404 at a
        // deployment deleted outside: read the deployment.
        Ok(_) | Err(CpError::NotFound { .. }) => read_and_change(pass).await,
        Err(e) => Err(pass.fail("get revision", e)),
    }
}
