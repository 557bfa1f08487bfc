//! One AgentDeployment pass in progress ([`Pass`]): what it observed, the
//! status it builds, and the two ways it ends with a [`Report`]:
//! [`Pass::finish`] (an outcome) and [`Pass::fail`] (a control plane error).

use crate::controller::kind::Requeue;
use crate::plan::verdict::EventType;
use kube::{Api, ResourceExt};
use secrecy::SecretString;

use super::observe::Observed;
use super::report::{Report, apply_error_outcome};
use super::verify;
use crate::api::deployment::{
    AgentDeployment, AgentDeploymentStatus, DEPLOYMENT_ID_ANNOTATION, REDEPLOY_ANNOTATION,
};
use crate::controller::deployment::context::DeploymentContext;
use crate::controller::error::Error;
use crate::controller::kind::{Remember, already_reported, changed};
use crate::controller::report::conditions;
use crate::controller::requeue::jittered;
use crate::controlplane::types::Deployment;
use crate::controlplane::{ControlPlaneClient, Error as CpError};
use crate::plan::status::Outcome;
use crate::plan::steps;
use crate::plan::verdict::Note;

/// What the pass knows about the remote deployment for its report.
pub struct RemoteView {
    /// The deployment's id.
    pub id: String,
    /// Its latest revision.
    pub latest_revision_id: Option<String>,
    /// The revision that serves.
    pub active_revision_id: Option<String>,
    /// The deployment's `status`.
    pub deployment_status: Option<String>,
    /// Where it serves.
    pub url: Option<String>,
    /// Read from the deployment by this pass (not taken from status).
    pub read: bool,
}

impl RemoteView {
    /// The view of a deployment read by this pass.
    pub fn of(d: &Deployment) -> Self {
        Self {
            id: d.id.clone(),
            latest_revision_id: d.latest_revision_id.clone(),
            active_revision_id: d.active_revision_id.clone(),
            deployment_status: d.status.clone(),
            url: d.source_config.custom_url.clone(),
            read: true,
        }
    }

    /// The view recorded in status (the deployment was not read).
    pub fn from_status(s: &AgentDeploymentStatus, id: &str) -> Self {
        Self {
            id: id.to_owned(),
            latest_revision_id: s.latest_revision_id.clone(),
            active_revision_id: s.active_revision_id.clone(),
            deployment_status: s.deployment_status.clone(),
            url: s.url.clone(),
            read: false,
        }
    }
}

/// The hand-off of the act step to the follow step: the remote deployment
/// as this pass knows it, and the revision it read or started.
pub struct Acted {
    /// The remote deployment.
    pub view: RemoteView,
    /// The latest revision, when this pass read it or a redeploy started it.
    pub revision: Option<crate::controlplane::types::Revision>,
}

/// One pass in progress: what it observed and the status it will report.
pub struct Pass<'a> {
    /// The objects of the namespace (for the create-pending marker only).
    pub(super) api: &'a Api<AgentDeployment>,
    /// The object (a fresh read when [`Observed::fresh`]).
    pub(super) obj: &'a AgentDeployment,
    /// The operator's context.
    pub(super) ctx: &'a DeploymentContext,
    /// The control plane of the object.
    pub(super) cp: &'a ControlPlaneClient,
    /// What the observe step found.
    pub(super) seen: &'a Observed,
    /// The status as last written.
    pub(super) previous: &'a AgentDeploymentStatus,
    /// The status reported at the end of the pass.
    pub(super) status: AgentDeploymentStatus,
    /// The secret values sent with the deployment: removed from the log
    /// lines the pass shows.
    pub(super) secret_values: Vec<SecretString>,
    /// Events of the report, after its Warning if any.
    pub(super) events: Vec<Note>,
    /// Changes of the in-process memory the report carries (applied after
    /// its writes).
    pub(super) remember: Remember<super::context::State>,
    /// The revision made outside the operator that this pass's PATCH
    /// replaces (`decide::After::Reapply`): named in its event and in the
    /// condition's message.
    pub(super) reapplied_over: Option<String>,
    /// This pass created the remote deployment.
    pub(super) created: bool,
}

impl<'a> Pass<'a> {
    /// A pass over `obj` after the observe step.
    pub fn new(
        api: &'a Api<AgentDeployment>,
        obj: &'a AgentDeployment,
        ctx: &'a DeploymentContext,
        seen: &'a Observed,
    ) -> Self {
        let previous = &seen.previous;
        let mut status = previous.clone();
        status.drift_corrections =
            crate::plan::fight::carried(previous, obj.metadata.generation, seen.redeploy.is_some());
        status.observed_generation = obj.metadata.generation;
        status.expires_at = super::expire::expires_at(obj, Some(previous)).map(|t| t.to_string());
        status.resolved_image = seen.resolved_image.clone().map(Box::new);
        let mut events = Vec::new();
        // A promotion that needs a new revision is recorded once that
        // revision started ([`Self::served_redeploy`]); any other is what
        // the body of this pass deploys.
        status.promoted_from = match &seen.promotion {
            Some(take) if take.new_revision => previous.promoted_from.clone(),
            Some(take) => {
                if take.changed {
                    events.push(promoted_event(take));
                }
                Some(Box::new(take.record.clone()))
            }
            None => None,
        };
        if let Some((old, new)) = &seen.image_moved {
            events.push((
                EventType::Normal,
                crate::api::conditions::reason::IMAGE_TAG_MOVED,
                format!(
                    "image {} moved from {old} to {new}; deploying {new}",
                    seen.resolved_image
                        .as_ref()
                        .map_or("", |r| r.image_uri.as_str())
                ),
            ));
        }
        Self {
            api,
            obj,
            ctx,
            cp: &seen.cp,
            seen,
            previous,
            status,
            secret_values: seen.body.secrets.iter().map(|s| s.value.clone()).collect(),
            events,
            remember: Remember::default(),
            reapplied_over: None,
            created: false,
        }
    }

    /// The pending redeploy request was served (by a redeploy, a PATCH that
    /// started a revision, or the create): status records it.
    pub(super) fn served_redeploy(&mut self) {
        self.status.last_redeploy_requested_at =
            self.obj.annotations().get(REDEPLOY_ANNOTATION).cloned();
        if let Some(take) = self.seen.promotion.as_ref().filter(|t| t.new_revision) {
            self.events.push(promoted_event(take));
            self.status.promoted_from = Some(Box::new(take.record.clone()));
        }
    }

    /// The wait before this object reads again the remote deployment `id`,
    /// found deleting outside the operator ([`super::deleting::Deletes::read`],
    /// its backoff of reads); the read is remembered by the pass's report.
    pub(super) fn deleting_elsewhere(&mut self, id: &str) -> std::time::Duration {
        let read = self.ctx.state.deletes.read(
            &self.seen.key,
            id,
            true,
            self.ctx.config.poll_interval,
            self.ctx.config.max_poll_interval,
        );
        let wait = read.delay;
        self.remember
            .push(move |ctx| ctx.state.deletes.record(read));
        wait
    }

    /// Ends the pass with a control plane error: a definite rejection (400,
    /// 409, 422) is recorded with its fingerprint and not sent again until
    /// the desired state changes or its backoff passes; a transient error is
    /// returned for the per-object backoff.
    pub(super) fn fail(&mut self, operation: &'static str, e: CpError) -> Box<Report> {
        // Not sent because the operator's own budget is short (many
        // requests at once, no slow answer behind it): the pass is put off
        // as the runner puts off a pass whose plane has no token soon
        // (`runner::DEFER_AFTER`), with no write: nothing happened that the
        // status or an event should tell.
        if let CpError::Deferred {
            retry_in,
            cause: None,
        } = &e
        {
            return Report::end(Requeue::after(jittered(*retry_in)));
        }
        let mut outcome = apply_error_outcome(self.obj, operation, &e);
        if e.is_transient() {
            return self.finish(
                &outcome,
                Err(Error::ControlPlane {
                    operation,
                    source: e,
                }),
            );
        }
        let mut delay = jittered(self.ctx.config.resync_interval);
        if e.is_rejection() {
            let (rejected, backoff) = steps::rejection(
                self.previous.rejected_request.as_deref(),
                operation,
                &self.seen.fingerprint,
                jiff::Timestamp::now(),
            );
            delay = backoff;
            outcome = super::report::not_resent_until(outcome, &rejected.retry_after_time);
            self.status.rejected_request = Some(Box::new(rejected));
        }
        self.finish(&outcome, Ok(Requeue::after(delay)))
    }

    /// Ends the pass with `outcome`: the status (when changed), the id
    /// annotation in place of the
    /// create-pending marker once the id is known, the Warning of a new
    /// problem, then the pass's events.
    pub(super) fn finish(
        &mut self,
        outcome: &Outcome,
        then: Result<Requeue, Error>,
    ) -> Box<Report> {
        let mismatch = self.commit_mismatch().or_else(|| self.refused_promotion());
        let outcome = mismatch.as_ref().unwrap_or(outcome);
        self.settle_status(outcome);
        // A wait of the promotion ends at the end of its soak at the latest.
        let then = then.map(|next| {
            next.sooner(
                self.seen
                    .promotion_hold
                    .as_ref()
                    .and_then(|h| h.recheck_in)
                    .map(|d| d + std::time::Duration::from_secs(1)),
            )
        });
        let warn = crate::plan::verdict::warning(outcome, |reason, message| {
            already_reported(self.obj, reason, message)
        });
        let id = self.status.deployment_id.clone();
        let mut report = Report::end(Requeue::await_change()).then(then);
        // The status carries the id from the pass of the create on, so
        // that the fields the control plane cannot change are locked at
        // admission from the moment a remote exists.
        report.status = changed(self.obj, std::mem::take(&mut self.status));
        // The marker is replaced by the id annotation once the id is known,
        // written just before the status that records it
        // ([`crate::controller::kind::write`]).
        report.annotations = steps::id_annotations(
            id.as_deref(),
            self.obj.create_pending(),
            self.obj
                .annotations()
                .get(DEPLOYMENT_ID_ANNOTATION)
                .map(String::as_str),
        );
        report
            .events
            .extend(warn.map(|(reason, message)| (EventType::Warning, reason, message)));
        report.events.append(&mut self.events);
        report.remember.append(&mut self.remember);
        report
    }

    /// A `github` promotion whose revision was built from another commit
    /// than the one verified on the source stops here, on the pass that
    /// read the commit: its `Stalled` outcome; `None` otherwise.
    fn commit_mismatch(&self) -> Option<Outcome> {
        self.status
            .promoted_from
            .as_ref()
            .filter(|_| self.seen.promotion.is_some())
            .and_then(|record| crate::plan::promotion::mismatch_of(record, &self.status))
            .map(|message| Outcome::Stalled {
                reason: crate::api::conditions::reason::PROMOTION_COMMIT_MISMATCH,
                message,
            })
    }

    /// A promotion refused on this pass (`Stalled` with its reason), for a
    /// pass that went on with its reads ([`Observed::promotion_hold`]);
    /// `None` otherwise.
    fn refused_promotion(&self) -> Option<Outcome> {
        self.seen
            .promotion_hold
            .as_ref()
            .filter(|h| h.refused)
            .map(|h| Outcome::Stalled {
                reason: h.reason,
                message: h.message.clone(),
            })
    }

    /// Completes the status of the pass for `outcome`: the generation, the
    /// conditions, the serving and verification annotations, the id kept
    /// unless the pass decided otherwise, and `Drifted`.
    fn settle_status(&mut self, outcome: &Outcome) {
        self.status.observed_generation = self.obj.metadata.generation;
        self.status.conditions = conditions(
            &self.previous.conditions,
            outcome,
            self.obj.metadata.generation,
        );
        crate::plan::serving::annotate(
            &mut self.status,
            self.previous,
            self.obj.spec.verify.is_some(),
            &jiff::Timestamp::now().to_string(),
        );
        verify::set_condition(&mut self.status, &self.previous.conditions, self.obj);
        // Never apply a status that lacks an id the object already had
        // (server-side apply would remove it) unless the pass decided so.
        self.status.deployment_id = steps::kept_id(
            self.status.deployment_id.take(),
            self.previous.deployment_id.as_deref(),
        );
        set_drifted(&mut self.status, &self.previous.conditions, self.obj);
        set_promoted(
            &mut self.status,
            &self.previous.conditions,
            self.obj,
            self.seen,
            outcome,
        );
    }
}

/// The `Drifted` condition and `status.drift` of `obj`: under
/// `spec.managementPolicy: Observe`, once a deployment is known, from the
/// drift of its last read ([`crate::plan::policy::drifted`]); under
/// `Manage`, neither.
fn set_drifted(
    status: &mut AgentDeploymentStatus,
    previous: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    obj: &AgentDeployment,
) {
    use crate::api::conditions::{DRIFTED, condition};
    status.conditions.retain(|c| c.type_ != DRIFTED);
    let id = match (obj.spec.management_policy, status.deployment_id.as_deref()) {
        (crate::api::deployment::ManagementPolicy::Observe, Some(id)) => id.to_owned(),
        _ => {
            status.drift.clear();
            return;
        }
    };
    let (s, reason, message) = crate::plan::policy::drifted(&status.drift, &id);
    status.conditions.push(condition(
        previous,
        DRIFTED,
        s,
        reason,
        message,
        obj.metadata.generation,
    ));
}

/// The `Promoted` condition of `obj` with `spec.promotion`
/// ([`crate::api::conditions::PROMOTED`]): False with the hold's reason
/// and message while the promotion takes nothing new
/// ([`Observed::promotion_hold`]) or the pass ends on a commit mismatch
/// (`outcome`), True while it deploys what the source serves. Absent
/// without `spec.promotion`.
fn set_promoted(
    status: &mut AgentDeploymentStatus,
    previous: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    obj: &AgentDeployment,
    seen: &Observed,
    outcome: &Outcome,
) {
    use crate::api::conditions::{FALSE, PROMOTED, TRUE, condition, reason};
    status.conditions.retain(|c| c.type_ != PROMOTED);
    if obj.spec.promotion.is_none() {
        return;
    }
    let mismatch = matches!(outcome, Outcome::Stalled { reason: r, .. } if *r == reason::PROMOTION_COMMIT_MISMATCH);
    let (s, r, message) = match (&seen.promotion_hold, &seen.promotion) {
        _ if mismatch => (
            FALSE,
            reason::PROMOTION_COMMIT_MISMATCH,
            outcome.message().to_owned(),
        ),
        (Some(hold), _) => (FALSE, hold.reason, hold.message.clone()),
        (None, Some(take)) => (TRUE, reason::PROMOTED, promoted_message(take)),
        (None, None) => return,
    };
    status.conditions.push(condition(
        previous,
        PROMOTED,
        s,
        r,
        &message,
        obj.metadata.generation,
    ));
}

/// The message of `Promoted=True`: the source, its revision and identity,
/// and what is deployed.
fn promoted_message(take: &crate::plan::promotion::Take) -> String {
    let r = &take.record;
    let identity = r
        .image_digest
        .as_deref()
        .or(r.commit_sha.as_deref())
        .unwrap_or_default();
    format!(
        "deploys what {}/{} serves: revision {} ({identity}) as {}",
        r.namespace,
        r.name,
        r.revision_id,
        r.deployed.as_deref().unwrap_or_default()
    )
}

/// The `Promoted` event of `take`: the source, its revision, and the
/// commit or digest deployed.
fn promoted_event(take: &crate::plan::promotion::Take) -> Note {
    let r = &take.record;
    let identity = r
        .image_digest
        .as_deref()
        .or(r.commit_sha.as_deref())
        .unwrap_or_default();
    (
        EventType::Normal,
        crate::api::conditions::reason::PROMOTED,
        format!(
            "promoting revision {} of {}/{} ({identity}): deploying {}",
            r.revision_id,
            r.namespace,
            r.name,
            r.deployed.as_deref().unwrap_or_default()
        ),
    )
}
