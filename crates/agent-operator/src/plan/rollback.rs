//! Automatic rollback (`spec.rollback`): when the latest revision fails
//! its verification (or, with `onFailedRevision`, its build or deploy), the
//! operator redeploys the last verified revision once, then holds the spec
//! back (no PATCH) while the revision that rollback made is the latest one
//! and the spec is unchanged. Pure: [`decide`] says whether to roll back
//! and to which revision, [`holds`] whether the spec is held back,
//! [`outcome`] what the resource reports meanwhile.
//!
//! Never a loop: a revision named in `status.rollback.fromRevisionId` is
//! not rolled back again (a restart does not repeat it), nor is the
//! revision a rollback made (`status.rollback.revisionId`: a target that
//! fails in turn stays failed).
//!
//! Sources: docs/control-plane-api.md "Requests" ("Rollback": `POST
//! /v2/deployments/{id}/revisions/{revision_id}/redeploy`) and "Revision"
//! (statuses; a failed revision leaves the previous one serving).

use crate::api::conditions::reason;
use crate::api::deployment::{RevisionSummary, RollbackSpec, RollbackStatus, VerificationStatus};
use crate::controlplane::types::RevisionStatus;
use crate::plan::decide::After;
use crate::plan::serving::name_revision;
use crate::plan::status::Outcome;

/// Consecutive `AgentServerUnreachable` failures of a verification after
/// which a revision counts as failed (an agent server that never came up).
pub const UNREACHABLE_ATTEMPTS: u32 = 3;

/// What [`decide`] knows once the pass followed the latest revision and
/// verified it.
#[derive(Clone, Debug)]
pub struct RollbackKnown<'a> {
    /// `spec.rollback`.
    pub policy: Option<&'a RollbackSpec>,
    /// `spec.verify` is set.
    pub verify: bool,
    /// The latest revision and its status.
    pub latest: Option<&'a str>,
    /// Its status, when known.
    pub latest_status: Option<&'a RevisionStatus>,
    /// The verification as of this pass (`status.verification`).
    pub verification: Option<&'a VerificationStatus>,
    /// `status.revisions`, newest first, with `verified` as last written.
    pub revisions: &'a [RevisionSummary],
    /// `status.rollback` as last written.
    pub previous: Option<&'a RollbackStatus>,
}

/// What [`decide`] concluded.
#[derive(Clone, Debug, PartialEq)]
pub enum RollbackStep {
    /// Nothing to roll back.
    Stay,
    /// Redeploy revision `to` in place of the failed revision `from`.
    Rollback {
        /// The failed revision.
        from: String,
        /// The revision whose configuration is redeployed.
        to: String,
        /// The verification's failure reason, or the revision's status.
        reason: String,
    },
    /// The latest revision failed, but no revision to roll back to is known
    /// (none verified, or none deployed): nothing is sent.
    NoTarget {
        /// The failed revision.
        from: String,
        /// Why it failed.
        reason: String,
    },
}

/// Why the latest revision `rid` counts as failed under `policy`, if it
/// does.
fn failure(k: &RollbackKnown<'_>, policy: &RollbackSpec, rid: &str) -> Option<String> {
    let status = k.latest_status?;
    if policy.on_failed_revision && (status.is_failed() || *status == RevisionStatus::Interrupted) {
        return Some(status.to_string());
    }
    if !(policy.on_failed_verification && k.verify && *status == RevisionStatus::Deployed) {
        return None;
    }
    let v = k.verification.filter(|v| v.revision_id == rid)?;
    let counts = match v.outcome.as_str() {
        // The cases being unreadable says nothing of the revision.
        reason::VERIFIED
        | reason::REVISION_NOT_ACTIVE
        | reason::DATASET_UNAVAILABLE
        | reason::SUITE_UNREADABLE => false,
        reason::AGENT_SERVER_UNREACHABLE => v.failures >= UNREACHABLE_ATTEMPTS,
        _ => true,
    };
    counts.then(|| v.outcome.clone())
}

/// The revision to roll back to instead of `failed`: the newest one whose
/// verification passed (with `spec.verify`), else the newest `DEPLOYED`
/// one.
fn target<'a>(k: &RollbackKnown<'a>, failed: &str) -> Option<&'a str> {
    let others = k.revisions.iter().filter(|r| r.id != failed);
    let found = if k.verify {
        others.into_iter().find(|r| r.verified == Some(true))
    } else {
        others
            .into_iter()
            .find(|r| RevisionStatus::from(r.status.clone()) == RevisionStatus::Deployed)
    };
    found.map(|r| r.id.as_str())
}

/// Whether to roll back now (see [`RollbackStep`]): only with
/// `spec.rollback`, for a latest revision that failed, was not rolled back
/// before and was not made by a rollback.
pub fn decide(k: &RollbackKnown<'_>) -> RollbackStep {
    let (Some(policy), Some(rid)) = (k.policy, k.latest) else {
        return RollbackStep::Stay;
    };
    if let Some(p) = k.previous
        && (p.from_revision_id == rid || p.revision_id.as_deref() == Some(rid))
    {
        return RollbackStep::Stay;
    }
    let Some(why) = failure(k, policy, rid) else {
        return RollbackStep::Stay;
    };
    match target(k, rid) {
        Some(to) => RollbackStep::Rollback {
            from: rid.to_owned(),
            to: to.to_owned(),
            reason: why,
        },
        None => RollbackStep::NoTarget {
            from: rid.to_owned(),
            reason: why,
        },
    }
}

/// Whether the spec is held back: a rollback made for `generation` and
/// its revision is still the deployment's latest (`latest`). A new
/// generation, or any newer revision (a redeploy, a change of Secret
/// values, one made outside), ends it.
pub fn holds(
    rollback: Option<&RollbackStatus>,
    generation: Option<i64>,
    latest: Option<&str>,
) -> bool {
    rollback.is_some_and(|r| {
        r.generation == generation && r.revision_id.is_some() && r.revision_id.as_deref() == latest
    })
}

/// The step of a pass over a deployment read ([`super::decide::after_read`])
/// while a rollback `holds` ([`holds`]): a PATCH that would apply the spec
/// again (or report a fight or an unheld change over it) becomes
/// `Follow`, unless something changed here (`changed_here`: Secret values,
/// a moved image tag, a redeploy request), which ends the hold.
pub fn held_back(step: After, holds: bool, changed_here: bool) -> After {
    match step {
        After::Patch { .. } | After::Reapply { .. } | After::Fight { .. } | After::Unheld
            if holds && !changed_here =>
        {
            After::Follow
        }
        other => other,
    }
}

/// The message of a rollback, the same on every pass while it holds (so its
/// Warning is published once).
pub fn message(r: &RollbackStatus, revisions: &[RevisionSummary]) -> String {
    let from = name_revision(
        &format!("revision {}", r.from_revision_id),
        &r.from_revision_id,
        revisions,
    );
    let to = name_revision(
        &format!("revision {}", r.to_revision_id),
        &r.to_revision_id,
        revisions,
    );
    let made = r
        .revision_id
        .as_deref()
        .map(|id| format!(" as new revision {id}"))
        .unwrap_or_default();
    format!(
        "rolled back from {from} ({}) to {to}{made} (spec.rollback); the spec is not applied \
         again until it changes, a referenced Secret value changes or a redeploy is requested",
        r.reason
    )
}

/// The outcome while a rollback holds, with the same message throughout
/// (one Warning event): the revision it made `DEPLOYED` (and verified, when
/// asked) is `Stalled`/`RolledBack`, so `Ready` stays False and GitOps sees
/// that the spec did not converge; still in progress (or being verified) it
/// is `Reconciling`/`RolledBack`; failing in turn, its failure is reported
/// as is (and not rolled back: [`decide`]).
pub fn outcome(outcome: Outcome, r: &RollbackStatus, revisions: &[RevisionSummary]) -> Outcome {
    match outcome {
        Outcome::Ready { .. } => Outcome::Stalled {
            reason: reason::ROLLED_BACK,
            message: message(r, revisions),
        },
        Outcome::Progressing { .. } => Outcome::Progressing {
            reason: reason::ROLLED_BACK,
            message: message(r, revisions),
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rev(id: &str, status: &str, verified: Option<bool>) -> RevisionSummary {
        RevisionSummary {
            id: id.into(),
            status: status.into(),
            verified,
            ..Default::default()
        }
    }

    fn attempt(rid: &str, outcome: &str, failures: u32) -> VerificationStatus {
        VerificationStatus {
            revision_id: rid.into(),
            outcome: outcome.into(),
            failures,
            last_run_time: "2026-01-01T00:00:00Z".into(),
            ..Default::default()
        }
    }

    fn done(from: &str, made: &str) -> RollbackStatus {
        RollbackStatus {
            from_revision_id: from.into(),
            to_revision_id: "r1".into(),
            revision_id: Some(made.into()),
            generation: Some(2),
            at: "2026-01-01T00:00:00Z".into(),
            reason: "AssistantsMissing".into(),
        }
    }

    fn rollback(from: &str, to: &str, reason: &str) -> RollbackStep {
        RollbackStep::Rollback {
            from: from.into(),
            to: to.into(),
            reason: reason.into(),
        }
    }

    /// `spec.rollback` with `onFailedVerification` and `onFailedRevision`.
    fn policy(on_failed_verification: bool, on_failed_revision: bool) -> RollbackSpec {
        RollbackSpec {
            on_failed_verification,
            on_failed_revision,
        }
    }

    /// r3 deployed and failed its verification, r2 deployed and never
    /// verified, r1 verified.
    fn history() -> [RevisionSummary; 3] {
        [
            rev("r3", "DEPLOYED", Some(false)),
            rev("r2", "DEPLOYED", None),
            rev("r1", "DEPLOYED", Some(true)),
        ]
    }

    /// What [`decide`] knows of r3, the latest revision, in `status`, with
    /// `spec.verify` set, no verification recorded and no earlier rollback.
    fn known<'a>(
        policy: &'a RollbackSpec,
        status: &'a RevisionStatus,
        revisions: &'a [RevisionSummary],
    ) -> RollbackKnown<'a> {
        RollbackKnown {
            policy: Some(policy),
            verify: true,
            latest: Some("r3"),
            latest_status: Some(status),
            verification: None,
            revisions,
            previous: None,
        }
    }

    /// Asserts the step [`decide`] takes in each case: (what, what it
    /// knows, the step).
    fn assert_decides(cases: Vec<(&str, RollbackKnown<'_>, RollbackStep)>) {
        for (what, known, want) in cases {
            assert_eq!(decide(&known), want, "{what}");
        }
    }

    #[test]
    fn a_failed_verification_of_the_latest_rolls_back_to_the_last_verified() {
        let (verification, history) = (policy(true, false), history());
        let (deployed, missing) = (
            RevisionStatus::Deployed,
            attempt("r3", reason::ASSISTANTS_MISSING, 1),
        );
        let down_twice = attempt("r3", reason::AGENT_SERVER_UNREACHABLE, 2);
        let down_thrice = attempt("r3", reason::AGENT_SERVER_UNREACHABLE, 3);
        let base = RollbackKnown {
            verification: Some(&missing),
            ..known(&verification, &deployed, &history)
        };
        assert_decides(vec![
            (
                "no policy",
                RollbackKnown {
                    policy: None,
                    ..base
                },
                RollbackStep::Stay,
            ),
            (
                "failed verification",
                base.clone(),
                rollback("r3", "r1", "AssistantsMissing"),
            ),
            (
                "unreachable twice",
                RollbackKnown {
                    verification: Some(&down_twice),
                    ..base
                },
                RollbackStep::Stay,
            ),
            (
                "unreachable thrice",
                RollbackKnown {
                    verification: Some(&down_thrice),
                    ..base
                },
                rollback("r3", "r1", "AgentServerUnreachable"),
            ),
            (
                "without spec.verify",
                RollbackKnown {
                    verify: false,
                    ..base
                },
                RollbackStep::Stay,
            ),
        ]);
    }

    #[test]
    fn no_rollback_without_a_failed_verification_of_the_latest() {
        let (verification, history) = (policy(true, false), history());
        let deployed = RevisionStatus::Deployed;
        let passed = attempt("r3", reason::VERIFIED, 0);
        let not_active = attempt("r3", reason::REVISION_NOT_ACTIVE, 4);
        let older = attempt("r2", reason::RUN_FAILED, 1);
        let base = known(&verification, &deployed, &history);
        let with = |v| RollbackKnown {
            verification: Some(v),
            ..base
        };
        assert_decides(vec![
            ("verified", with(&passed), RollbackStep::Stay),
            ("not yet active", with(&not_active), RollbackStep::Stay),
            (
                "verification of another revision",
                with(&older),
                RollbackStep::Stay,
            ),
            ("not verified yet", base, RollbackStep::Stay),
        ]);
    }

    #[test]
    fn a_failed_revision_rolls_back_under_on_failed_revision() {
        let (verification, revision, both) =
            (policy(true, false), policy(false, true), policy(true, true));
        let (history, building) = (history(), RevisionStatus::Building);
        let failed_build = [
            rev("r3", "BUILD_FAILED", None),
            rev("r2", "DEPLOYED", None),
            rev("r1", "DEPLOYED", Some(true)),
        ];
        let build_failed = RevisionStatus::BuildFailed;
        let base = known(&revision, &build_failed, &failed_build);
        assert_decides(vec![
            (
                "in progress",
                RollbackKnown {
                    policy: Some(&both),
                    latest_status: Some(&building),
                    revisions: &history,
                    ..base
                },
                RollbackStep::Stay,
            ),
            (
                "failed build, policy off",
                RollbackKnown {
                    policy: Some(&verification),
                    ..base
                },
                RollbackStep::Stay,
            ),
            (
                "failed build",
                base.clone(),
                rollback("r3", "r1", "BUILD_FAILED"),
            ),
            (
                "failed build, no verify: newest deployed",
                RollbackKnown {
                    verify: false,
                    ..base
                },
                rollback("r3", "r2", "BUILD_FAILED"),
            ),
        ]);
    }

    #[test]
    fn an_earlier_rollback_and_a_missing_target_are_taken_into_account() {
        let (verification, both, history) = (policy(true, false), policy(true, true), history());
        let unverified = [
            rev("r3", "DEPLOYED", Some(false)),
            rev("r2", "DEPLOYED", None),
        ];
        let deployed = RevisionStatus::Deployed;
        let missing = attempt("r3", reason::ASSISTANTS_MISSING, 1);
        let (after_r2, of_r3, made_r3) = (done("r2", "r9"), done("r3", "r4"), done("r2", "r3"));
        let base = RollbackKnown {
            verification: Some(&missing),
            ..known(&verification, &deployed, &history)
        };
        let after = |previous| RollbackKnown {
            previous: Some(previous),
            ..base
        };
        assert_decides(vec![
            (
                "an earlier rollback of another revision",
                after(&after_r2),
                rollback("r3", "r1", "AssistantsMissing"),
            ),
            (
                "already rolled back (a restart)",
                after(&of_r3),
                RollbackStep::Stay,
            ),
            (
                "the rollback's own revision fails",
                RollbackKnown {
                    policy: Some(&both),
                    ..after(&made_r3)
                },
                RollbackStep::Stay,
            ),
            (
                "nothing verified to go back to",
                RollbackKnown {
                    revisions: &unverified,
                    ..base
                },
                RollbackStep::NoTarget {
                    from: "r3".into(),
                    reason: "AssistantsMissing".into(),
                },
            ),
        ]);
    }

    #[test]
    fn the_spec_is_held_while_the_rollback_revision_is_the_latest_of_its_generation() {
        let r = done("r2", "r3");
        assert!(holds(Some(&r), Some(2), Some("r3")));
        assert!(!holds(Some(&r), Some(3), Some("r3")), "the spec changed");
        assert!(!holds(Some(&r), Some(2), Some("r4")), "a newer revision");
        assert!(!holds(None, Some(2), Some("r3")));
        let unmade = RollbackStatus {
            revision_id: None,
            ..r.clone()
        };
        assert!(!holds(Some(&unmade), Some(2), None));
    }

    #[test]
    fn a_held_rollback_sends_no_patch_until_something_changes_here() {
        let patch = After::Patch { drift: true };
        let reapply = After::Reapply {
            revision: "r9".into(),
        };
        let cases = [
            (patch.clone(), true, false, After::Follow),
            (reapply, true, false, After::Follow),
            (After::Unheld, true, false, After::Follow),
            (patch.clone(), true, true, patch.clone()),
            (patch.clone(), false, false, patch.clone()),
            (After::Redeploy, true, true, After::Redeploy),
            (After::RemoteDeleting, true, false, After::RemoteDeleting),
        ];
        for (step, holds, changed, want) in cases {
            assert_eq!(held_back(step.clone(), holds, changed), want, "{step:?}");
        }
    }

    #[test]
    fn a_held_rollback_reports_rolled_back_naming_both_revisions() {
        let r = done("r2", "r3");
        let history = [RevisionSummary {
            id: "r1".into(),
            commit_sha: Some("0123456789".into()),
            ..Default::default()
        }];
        let ready = Outcome::Ready {
            reason: reason::REVISION_DEPLOYED,
            message: "deployed".into(),
        };
        let got = outcome(ready, &r, &history);
        assert_eq!(got.reason(), reason::ROLLED_BACK);
        let m = got.message();
        assert!(m.contains("from revision r2 (AssistantsMissing)"), "{m}");
        assert!(
            m.contains("to revision r1 (commit 0123456) as new revision r3"),
            "{m}"
        );
        let progressing = Outcome::Progressing {
            reason: reason::REVISION_IN_PROGRESS,
            message: "building".into(),
        };
        let still = outcome(progressing, &r, &history);
        assert!(matches!(still, Outcome::Progressing { .. }), "{still:?}");
        assert_eq!(still.message(), m, "one message throughout: one event");
        let failing = Outcome::Stalled {
            reason: reason::ASSISTANTS_MISSING,
            message: "r3 failed too".into(),
        };
        assert_eq!(outcome(failing.clone(), &r, &history), failing);
    }
}
