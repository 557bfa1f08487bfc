//! Preview environments (`spec.expiry`): the expiry step of an
//! AgentDeployment pass ([`Step::Expire`](super::step::Step::Expire), and
//! the report of an object already expired), and the wake-up at the
//! expiry instant.
//!
//! Once `status.expiredAt` is set, a pass ends at once with no request (the
//! remote deployment was deleted once, or orphaned, and is never created
//! again while the object exists). When the instant passed, the object is
//! read fresh (the DELETE is a decision never made on a cache that may
//! predate the write of `expiredAt`), the remote deployment is deleted once
//! per `spec.deletionPolicy`, and the expiry is recorded. The decisions are
//! [`crate::plan::expiry`]'s.

use std::time::Duration;

use crate::controller::kind::Requeue;
use jiff::Timestamp;
use kube::{Api, ResourceExt};
use tracing::info;

use super::plane::control_plane;
use super::report::{Flow, Report, outcome_status};
use crate::api::deployment::{AgentDeployment, AgentDeploymentStatus, DEPLOYMENT_ID_ANNOTATION};
use crate::controller::deployment::context::DeploymentContext;
use crate::controller::error::Error;
use crate::controller::kind::changed;
use crate::controlplane::Error as CpError;
use crate::plan::expiry::{self, Expire, Step};
use crate::plan::status::Outcome;
use crate::plan::verdict::EventType;

/// Added to the wake-up at the expiry instant, so that the pass it starts
/// finds the instant passed (the scheduler may fire a little early).
const WAKE_MARGIN: Duration = Duration::from_millis(250);

/// The expiry instant of `obj` with status `status`: from its creation
/// and the creation of the newest revision in `status.revisions`.
pub fn expires_at(
    obj: &AgentDeployment,
    status: Option<&AgentDeploymentStatus>,
) -> Option<Timestamp> {
    let spec = obj.spec.expiry.as_ref()?;
    let created = obj.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let last_revision = status
        .and_then(|s| s.revisions.first())
        .and_then(|r| r.created_at.as_deref())
        .and_then(|t| t.parse().ok());
    expiry::expires_at(spec, created, last_revision)
}

/// The expiry step of `obj` now.
pub fn step_of(obj: &AgentDeployment) -> Step {
    let status = obj.status.as_ref();
    let expired = status.is_some_and(|s| s.expired_at.is_some());
    expiry::step(expired, expires_at(obj, status), Timestamp::now())
}

/// How soon a pass of `obj` must run again for its expiry: `None` when it
/// has none to wait for (none set, already expired, or due: the pass that
/// starts now expires it, or, when it cannot yet (a create to recover
/// first), its own requeue stands, so that nothing loops on the instant).
pub fn wake_in(obj: &AgentDeployment) -> Option<Duration> {
    if obj.metadata.deletion_timestamp.is_some() {
        return None;
    }
    match step_of(obj) {
        Step::Live(left) => Some(left + WAKE_MARGIN),
        Step::Due | Step::None | Step::Expired => None,
    }
}

/// The status reported once expired.
fn expired_outcome(obj: &AgentDeployment, when: &str, deleted: Option<&str>) -> Outcome {
    let what = match (
        deleted,
        obj.status.as_ref().and_then(|s| s.deployment_id.as_deref()),
    ) {
        (Some(id), _) => format!("remote deployment {id} was deleted"),
        (None, Some(id)) => {
            format!("remote deployment {id} was left running (deletionPolicy: Orphan)")
        }
        (None, None) => "no remote deployment was held".to_owned(),
    };
    crate::plan::status::expired(format!(
        "expired at {when} (spec.expiry); {what}. Nothing is created or sent again while this object exists: delete and re-create it for a new deployment"
    ))
}

/// The expiry step of a pass whose expiry instant passed
/// ([`Step::Expire`](super::step::Step::Expire)): `Ok` goes on (the fresh
/// read pushed the instant back or removed it, or a create to recover
/// first); `Err` ends the pass: expired meanwhile (no write unless the
/// conditions must say so, no request), or expired by this pass (one
/// DELETE at most, then `expiredAt` in status).
pub async fn run(
    api: &Api<AgentDeployment>,
    ctx: &DeploymentContext,
    obj: &AgentDeployment,
) -> Flow<()> {
    // The DELETE is decided on a fresh read.
    let fresh = match api.get_opt(&obj.name_any()).await.map_err(Error::Kube)? {
        Some(o) if o.metadata.deletion_timestamp.is_none() => o,
        _ => return Err(Report::end(Requeue::await_change())),
    };
    match step_of(&fresh) {
        Step::Due => {}
        Step::Expired => return Err(already_expired(&fresh).on(Some(&fresh))),
        // The fresh read pushed it back (a newer revision) or removed it.
        Step::None | Step::Live(_) => return Ok(()),
    }
    let id = fresh
        .status
        .as_ref()
        .and_then(|s| s.deployment_id.clone())
        .or_else(|| fresh.annotations().get(DEPLOYMENT_ID_ANNOTATION).cloned());
    let deleted = match expiry::expire(
        fresh.spec.deletion_policy,
        id.as_deref(),
        fresh.create_pending(),
    ) {
        Expire::RecoverFirst => return Ok(()),
        Expire::RecordOnly => None,
        Expire::DeleteRemote(id) => Some(delete_remote(&fresh, ctx, id).await?),
    };
    let when = Timestamp::now()
        .round(jiff::Unit::Second)
        .unwrap_or(Timestamp::now());
    let when = when.to_string();
    let outcome = expired_outcome(&fresh, &when, deleted.as_deref());
    info!(deployment_id = ?deleted, "expired (spec.expiry)");
    let mut status = outcome_status(&fresh, &outcome);
    status.expired_at = Some(when);
    let mut report = Report::end(Requeue::await_change());
    report.status = changed(&fresh, status);
    report.events.push((
        EventType::Normal,
        crate::api::conditions::reason::EXPIRED,
        outcome.message().to_owned(),
    ));
    Err(report.on(Some(&fresh)))
}

/// Deletes the remote deployment `id` of `fresh` (gone already counts as
/// deleted) and returns its id; `Err` ends the pass (its control plane is
/// missing, or the DELETE failed: retried with backoff).
async fn delete_remote(
    fresh: &AgentDeployment,
    ctx: &DeploymentContext,
    id: String,
) -> Flow<String> {
    let cp = control_plane(fresh, ctx)
        .await
        .map_err(|r| r.on(Some(fresh)))?;
    match cp.delete_deployment(&id).await {
        Ok(()) | Err(CpError::NotFound { .. }) => Ok(id),
        Err(e) => Err(Report::failed(Error::ControlPlane {
            operation: "delete deployment",
            source: e,
        })
        .on(Some(fresh))),
    }
}

/// The pass of an object already expired: its conditions say `Expired`
/// (written only when they do not yet, e.g. after a new generation), no
/// request, no requeue.
pub fn already_expired(obj: &AgentDeployment) -> Box<Report> {
    let when = obj
        .status
        .as_ref()
        .and_then(|s| s.expired_at.clone())
        .unwrap_or_default();
    let outcome = expired_outcome(obj, &when, None);
    // Keep the message of the pass that expired it (it names the delete).
    let kept = obj.status.as_ref().and_then(|s| {
        crate::api::conditions::find(&s.conditions, crate::api::conditions::READY)
            .filter(|c| c.reason == crate::api::conditions::reason::EXPIRED)
            .map(|c| c.message.clone())
    });
    let outcome = match kept {
        Some(message) => crate::plan::status::expired(message),
        None => outcome,
    };
    Report::outcome(obj, &outcome, Requeue::await_change())
}
