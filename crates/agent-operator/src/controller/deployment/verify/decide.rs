//! The pure middle of `spec.verify`: when a check is due
//! ([`verify_step`], [`retry_backoff`]), what a run's events mean
//! ([`RunJudge`], [`outcome`]) and what that does to the conditions
//! ([`verified_condition`], [`classify`]). Sources: as [`super`].

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::agentserver::{self, RunEvent};
use crate::api::conditions::{FALSE, TRUE, UNKNOWN, VERIFIED, condition, reason};
use crate::api::deployment::{
    AgentDeployment, AgentDeploymentStatus, VerificationStatus, VerifyExpect,
};
use crate::controller::report::{ReasonTable, reason_for};
use crate::controlplane::types::RevisionStatus;
use crate::plan::status::Outcome;
use crate::plan::verdict::VERIFICATION_FAILURE_REASONS as FAILURE_REASONS;
pub use crate::plan::verdict::is_verification_reason;

pub use crate::agentserver::limits::{
    CALL_TIMEOUT_CAP, CONNECT_TIMEOUT, DEFAULT_BACKOFF, Deferred, Limits, Permit, VerifyConfig,
    agent_server_client,
};

/// Said after `AgentServerUnauthorized` when no key was sent.
pub const NO_KEY_HINT: &str = "; no key was sent: the AgentControlPlane's API key never goes to a URL set in spec.sourceConfig.customUrl, name one with spec.verify.apiKeySecretRef";

pub use crate::plan::verdict::control_plane_key_allowed;

/// Most events a verification run reads before it stops reading.
pub const MAX_RUN_EVENTS: u32 = 10_000;

/// What the pure decision knows (see [`verify_step`]).
#[derive(Clone, Debug)]
pub struct VerifyKnown<'a> {
    /// The latest revision, DEPLOYED.
    pub revision_id: &'a str,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// `status.verification` as last written.
    pub last: Option<&'a VerificationStatus>,
    /// `status.verifiedRevisionId` as last written.
    pub verified_revision_id: Option<&'a str>,
    /// Time since `last.lastRunTime` (`None`: none, or unparsable).
    pub since_last_run: Option<Duration>,
    /// Re-verification period of a verified revision.
    pub interval: Duration,
    /// First retry delay after a failure.
    pub backoff: Duration,
    /// Cap of the retry delay (the resync interval).
    pub cap: Duration,
}

/// The step of a pass whose latest revision is DEPLOYED and `spec.verify`
/// is set.
#[derive(Clone, Debug, PartialEq)]
pub enum VerifyStep {
    /// Run the checks now.
    Verify,
    /// Nothing due: check again after this delay (verified and not yet on
    /// the slow period, or a retry not yet due).
    Wait(Duration),
}

/// The delay before retrying after `failures` consecutive failures: `base`
/// doubling per failure, capped at `cap` (30 s, 60 s, 120 s, ... by default).
pub fn retry_backoff(failures: u32, base: Duration, cap: Duration) -> Duration {
    base.saturating_mul(1u32 << failures.saturating_sub(1).min(20))
        .min(cap.max(base.min(cap)))
}

/// True for a failure that no retry can change: a suite that failed is
/// settled until the revision or the spec changes, checked again on the
/// slow period (its result reused), not retried with backoff.
pub fn is_settled_failure(r: &str) -> bool {
    r == reason::SUITE_FAILED
}

/// When to verify (see [`VerifyStep`]): at once for a revision (or a
/// generation of the spec) never checked; a verified revision every
/// `interval`; a failed one after [`retry_backoff`]. Our own status writes
/// never make it due: only time, a new revision or a new generation do.
pub fn verify_step(k: &VerifyKnown<'_>) -> VerifyStep {
    let Some(last) = k
        .last
        .filter(|l| l.revision_id == k.revision_id && l.observed_generation == k.generation)
    else {
        return VerifyStep::Verify;
    };
    let Some(elapsed) = k.since_last_run else {
        return VerifyStep::Verify;
    };
    let verified =
        last.outcome == reason::VERIFIED && k.verified_revision_id == Some(k.revision_id);
    let settled = verified || is_settled_failure(&last.outcome);
    let period = if settled {
        k.interval
    } else {
        retry_backoff(last.failures, k.backoff, k.cap)
    };
    match period.checked_sub(elapsed) {
        Some(left) if !left.is_zero() => VerifyStep::Wait(left),
        _ => VerifyStep::Verify,
    }
}

/// The constant of a stored failure reason (`RunFailed` for one not known).
fn failure_reason(stored: &str) -> &'static str {
    FAILURE_REASONS
        .iter()
        .find(|r| **r == stored)
        .copied()
        .unwrap_or(reason::RUN_FAILED)
}

/// Failures that may pass without a change (the server is down or not yet
/// switched over): `Reconciling`; the others need a human: `Stalled`.
fn is_transient(r: &str) -> bool {
    r == reason::AGENT_SERVER_UNREACHABLE
        || r == reason::REVISION_NOT_ACTIVE
        || r == reason::DATASET_UNAVAILABLE
}

/// The outcome of a pass whose revision `rid` is DEPLOYED, once `status`
/// holds the verification: Ready only when `rid` is verified.
pub fn outcome(rid: &str, deployed: Outcome, status: &AgentDeploymentStatus) -> Outcome {
    if status.verified_revision_id.as_deref() == Some(rid) {
        return match deployed {
            Outcome::Ready { reason, message } => Outcome::Ready {
                reason,
                message: format!("{message}; verified on the agent server"),
            },
            other => other,
        };
    }
    match status
        .verification
        .as_ref()
        .filter(|v| v.revision_id == rid && v.outcome != reason::VERIFIED)
    {
        Some(v) => {
            let r = failure_reason(&v.outcome);
            let message = format!(
                "revision {rid} is DEPLOYED but its verification failed: {}",
                v.last_error.as_deref().unwrap_or(r)
            );
            if is_transient(r) {
                Outcome::Progressing { reason: r, message }
            } else {
                Outcome::Stalled { reason: r, message }
            }
        }
        None => Outcome::Progressing {
            reason: reason::VERIFYING,
            message: format!("revision {rid} is DEPLOYED; verifying it on the agent server"),
        },
    }
}

/// The `Verified` condition of `status` (only when `spec.verify` is set):
/// True when the latest revision is DEPLOYED and verified; False with the
/// failure reason when its last verification failed; Unknown
/// (`VerificationPending`) until then.
pub fn verified_condition(
    previous: &[Condition],
    status: &AgentDeploymentStatus,
    generation: Option<i64>,
) -> Condition {
    let latest = status.latest_revision_id.as_deref();
    let deployed = status
        .revision_status
        .clone()
        .map(RevisionStatus::from)
        .is_some_and(|s| s == RevisionStatus::Deployed);
    let record = status
        .verification
        .as_ref()
        .filter(|v| Some(v.revision_id.as_str()) == latest);
    let (state, r, message) = match (latest, record) {
        (Some(rid), Some(v))
            if deployed
                && v.outcome == reason::VERIFIED
                && status.verified_revision_id.as_deref() == Some(rid) =>
        {
            (TRUE, reason::VERIFIED, success_message(rid, v))
        }
        (Some(rid), Some(v)) if v.outcome != reason::VERIFIED => (
            FALSE,
            failure_reason(&v.outcome),
            format!(
                "revision {rid}: {}",
                v.last_error.as_deref().unwrap_or(&v.outcome)
            ),
        ),
        (Some(rid), _) if deployed => (
            UNKNOWN,
            reason::VERIFYING,
            format!("revision {rid} is DEPLOYED; its verification has not run yet"),
        ),
        (Some(rid), _) => (
            UNKNOWN,
            reason::VERIFICATION_PENDING,
            format!("revision {rid} is not DEPLOYED; it is verified once it is"),
        ),
        (None, _) => (
            UNKNOWN,
            reason::VERIFICATION_PENDING,
            "no revision yet".to_owned(),
        ),
    };
    condition(previous, VERIFIED, state, r, message, generation)
}

/// Puts the `Verified` condition into `status.conditions` when `obj` sets
/// `spec.verify` (the three kstatus conditions are already there); without
/// `spec.verify` there is none.
pub fn set_condition(
    status: &mut AgentDeploymentStatus,
    previous: &[Condition],
    obj: &AgentDeployment,
) {
    status.conditions.retain(|c| c.type_ != VERIFIED);
    if obj.spec.verify.is_some() {
        let c = verified_condition(previous, status, obj.metadata.generation);
        status.conditions.push(c);
    }
}

pub(super) fn success_message(rid: &str, v: &VerificationStatus) -> String {
    let mut parts = vec![format!("revision {rid} verified at {}", v.last_run_time)];
    if let Some(n) = v.assistant_count {
        parts.push(format!("{n} assistant(s) found"));
    }
    if let Some(n) = v.last_run_events {
        parts.push(format!("the run streamed {n} event(s) as expected"));
    }
    if let Some(s) = &v.suite {
        parts.push(format!("{} cases of the suite passed", s.cases));
    }
    parts.join("; ")
}

/// Reads the events of a run, one at a time, and judges them against
/// `spec.verify.run.expect` without keeping them.
#[derive(Clone, Debug, Default)]
pub struct RunJudge {
    expect: Option<VerifyExpect>,
    events: u32,
    matched: bool,
    error: Option<String>,
}

/// The verdict on a run: `Ok(events)` or `Err((reason, run outcome, message))`.
pub type RunVerdict = Result<u32, (&'static str, &'static str, String)>;

impl RunJudge {
    /// A judge of `expect` (`None`: the run must only end without `error`).
    pub fn new(expect: Option<VerifyExpect>) -> Self {
        Self {
            expect,
            ..Self::default()
        }
    }

    /// Takes one event.
    pub fn see(&mut self, event: &RunEvent) {
        self.events = self.events.saturating_add(1);
        if let RunEvent::Error { error, message } = event {
            self.error.get_or_insert_with(|| {
                format!("the run streamed an error event: {error}: {message}")
            });
            return;
        }
        if let Some(e) = &self.expect
            && !self.matched
            && event.name() == e.event
        {
            self.matched = match &e.contains {
                None => true,
                Some(text) => serde_json::to_string(&event.data())
                    .unwrap_or_default()
                    .contains(text.as_str()),
            };
        }
    }

    /// Events seen so far.
    pub fn events(&self) -> u32 {
        self.events
    }

    /// The verdict once the stream ended (`Some(error)`: it broke off).
    pub fn verdict(self, broke_off: Option<String>) -> RunVerdict {
        if let Some(e) = self.error {
            return Err((reason::RUN_FAILED, "Failed", e));
        }
        if let Some(e) = broke_off {
            return Err((reason::RUN_FAILED, "Failed", e));
        }
        if self.events == 0 {
            return Err((
                reason::RUN_FAILED,
                "Failed",
                "the run stream ended without any event".to_owned(),
            ));
        }
        match &self.expect {
            Some(e) if !self.matched => Err((
                reason::EXPECTATION_NOT_MET,
                "ExpectationNotMet",
                match &e.contains {
                    Some(text) => format!(
                        "none of the {} event(s) of the run was an event {:?} whose data contains {text:?}",
                        self.events, e.event
                    ),
                    None => format!(
                        "none of the {} event(s) of the run was an event {:?}",
                        self.events, e.event
                    ),
                },
            )),
            _ => Ok(self.events),
        }
    }
}

/// The reason and message of an agent server error (`what`: the call):
/// the row [`ReasonTable::VERIFY`] of the one error-to-reason table, an
/// error retried with backoff being `AgentServerUnreachable` meanwhile.
pub fn classify(what: &str, e: &agentserver::Error) -> (&'static str, String) {
    let r = reason_for(&ReasonTable::VERIFY, e).unwrap_or(reason::AGENT_SERVER_UNREACHABLE);
    (r, format!("{what}: {e}"))
}
