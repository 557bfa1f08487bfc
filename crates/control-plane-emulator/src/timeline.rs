//! The life of a revision, computed lazily from its age: no timer or task per
//! revision, so thousands of deployments cost nothing.
//!
//! Source: docs/control-plane-api.md "Revision" (the status values and their rough
//! order; an `external_docker` revision skips the build steps). The exact
//! sequences of failing revisions are emulator choices, listed on [`Outcome`].

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use control_plane_wire::types::RevisionStatus;

/// How long an `UNKNOWN` outcome shows `UNKNOWN`, in steps.
pub const UNKNOWN_STEPS: u32 = 3;

/// How a revision ends, chosen when it is created (by the scenario rules).
///
/// With `B` = `AWAITING_BUILD, BUILDING` (empty for `external_docker`) and
/// every step lasting the configured step duration:
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Outcome {
    /// `B, AWAITING_DEPLOY, DEPLOYING` → `DEPLOYED` (the default).
    #[default]
    Deployed,
    /// `CREATING` → `CREATE_FAILED`.
    CreateFailed,
    /// `B` (or `AWAITING_DEPLOY` without build) → `BUILD_FAILED`.
    BuildFailed,
    /// `B, AWAITING_DEPLOY, DEPLOYING` → `DEPLOY_FAILED`.
    DeployFailed,
    /// `B` (or `AWAITING_DEPLOY` without build) → `INTERRUPTED`.
    Interrupted,
    /// `B, AWAITING_DEPLOY`, then `UNKNOWN` for [`UNKNOWN_STEPS`] steps, then
    /// `DEPLOYING` → `DEPLOYED` (the passing status of docs/control-plane-api.md "Revision").
    Unknown,
    /// `AWAITING_BUILD` → stays `BUILDING` forever (`AWAITING_DEPLOY` →
    /// `DEPLOYING` forever without build): for client timeouts.
    Stuck,
}

impl Outcome {
    /// Every outcome, for help texts and parsing.
    pub const ALL: [Outcome; 7] = [
        Outcome::Deployed,
        Outcome::CreateFailed,
        Outcome::BuildFailed,
        Outcome::DeployFailed,
        Outcome::Interrupted,
        Outcome::Unknown,
        Outcome::Stuck,
    ];

    /// The flag/JSON spelling, e.g. `BUILD_FAILED`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Deployed => "DEPLOYED",
            Outcome::CreateFailed => "CREATE_FAILED",
            Outcome::BuildFailed => "BUILD_FAILED",
            Outcome::DeployFailed => "DEPLOY_FAILED",
            Outcome::Interrupted => "INTERRUPTED",
            Outcome::Unknown => "UNKNOWN",
            Outcome::Stuck => "STUCK",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses the spelling of [`Outcome::as_str`] (case-insensitive).
impl FromStr for Outcome {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Outcome::ALL
            .into_iter()
            .find(|o| o.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                let all: Vec<_> = Outcome::ALL.iter().map(|o| o.as_str()).collect();
                format!("unknown outcome {s:?}; one of {}", all.join(", "))
            })
    }
}

/// The planned life of one revision: in-progress steps shown one after the
/// other, each for its duration, then a terminal status kept forever.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// In-progress statuses and how long each is shown.
    pub steps: Vec<(RevisionStatus, Duration)>,
    /// The status shown once every step is over.
    pub terminal: RevisionStatus,
    /// Lines of a scenario rule that the failing step writes to its log
    /// (empty: the default line of the outcome; see `emulator::logs`).
    pub failure_log: Vec<String>,
}

impl Plan {
    /// The plan of a revision with this outcome; `builds` is false for
    /// `external_docker` (no build steps); `step` is the duration of each step.
    pub fn new(outcome: Outcome, builds: bool, step: Duration) -> Plan {
        use RevisionStatus as S;
        let build: Vec<S> = if builds {
            vec![S::AwaitingBuild, S::Building]
        } else {
            Vec::new()
        };
        let build_or_pull = if builds {
            build.clone()
        } else {
            vec![S::AwaitingDeploy]
        };
        let full = || {
            let mut v = build.clone();
            v.extend([S::AwaitingDeploy, S::Deploying]);
            v
        };
        let (statuses, terminal) = match outcome {
            Outcome::Deployed => (full(), S::Deployed),
            Outcome::CreateFailed => (vec![S::Creating], S::CreateFailed),
            Outcome::BuildFailed => (build_or_pull, S::BuildFailed),
            Outcome::DeployFailed => (full(), S::DeployFailed),
            Outcome::Interrupted => (build_or_pull, S::Interrupted),
            Outcome::Unknown => {
                let mut steps: Vec<_> = build.iter().map(|s| (s.clone(), step)).collect();
                steps.push((S::AwaitingDeploy, step));
                steps.push((S::Unknown, step.saturating_mul(UNKNOWN_STEPS)));
                steps.push((S::Deploying, step));
                return Plan {
                    steps,
                    terminal: S::Deployed,
                    failure_log: Vec::new(),
                };
            }
            Outcome::Stuck if builds => (vec![S::AwaitingBuild], S::Building),
            Outcome::Stuck => (vec![S::AwaitingDeploy], S::Deploying),
        };
        Plan {
            steps: statuses.into_iter().map(|s| (s, step)).collect(),
            terminal,
            failure_log: Vec::new(),
        }
    }

    /// The status shown `elapsed` after the revision was created, and the
    /// offset (from creation) at which that status began.
    pub fn status_at(&self, elapsed: Duration) -> (RevisionStatus, Duration) {
        let mut start = Duration::ZERO;
        for (status, len) in &self.steps {
            let end = start.saturating_add(*len);
            if elapsed < end {
                return (status.clone(), start);
            }
            start = end;
        }
        (self.terminal.clone(), start)
    }

    /// Time from creation until the terminal status (saturating).
    pub fn total(&self) -> Duration {
        self.steps
            .iter()
            .fold(Duration::ZERO, |acc, (_, d)| acc.saturating_add(*d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RevisionStatus as S;

    const STEP: Duration = Duration::from_secs(1);

    fn statuses(plan: &Plan) -> Vec<S> {
        let mut out: Vec<S> = Vec::new();
        let mut t = Duration::ZERO;
        while t <= plan.total() + STEP {
            let (s, _) = plan.status_at(t);
            if out.last() != Some(&s) {
                out.push(s);
            }
            t += Duration::from_millis(250);
        }
        out
    }

    #[test]
    fn github_revision_goes_through_every_step_to_deployed() {
        let plan = Plan::new(Outcome::Deployed, true, STEP);
        assert_eq!(
            statuses(&plan),
            vec![
                S::AwaitingBuild,
                S::Building,
                S::AwaitingDeploy,
                S::Deploying,
                S::Deployed
            ]
        );
        assert_eq!(plan.total(), STEP * 4);
        assert_eq!(
            plan.status_at(Duration::from_millis(2500)),
            (S::AwaitingDeploy, STEP * 2)
        );
        assert_eq!(
            plan.status_at(Duration::from_secs(99)),
            (S::Deployed, STEP * 4)
        );
    }

    #[test]
    fn external_docker_skips_the_build_steps() {
        let plan = Plan::new(Outcome::Deployed, false, STEP);
        assert_eq!(
            statuses(&plan),
            vec![S::AwaitingDeploy, S::Deploying, S::Deployed]
        );
    }

    #[test]
    fn failing_outcomes_end_in_their_status() {
        let last = |o, b| statuses(&Plan::new(o, b, STEP)).last().cloned().unwrap();
        assert_eq!(last(Outcome::BuildFailed, true), S::BuildFailed);
        assert_eq!(last(Outcome::CreateFailed, true), S::CreateFailed);
        assert_eq!(last(Outcome::DeployFailed, false), S::DeployFailed);
        assert_eq!(last(Outcome::Interrupted, true), S::Interrupted);
        assert_eq!(last(Outcome::Stuck, true), S::Building);
        assert_eq!(last(Outcome::Stuck, false), S::Deploying);
        let unknown = statuses(&Plan::new(Outcome::Unknown, true, STEP));
        assert!(unknown.contains(&S::Unknown));
        assert_eq!(unknown.last(), Some(&S::Deployed));
        let build_failed = statuses(&Plan::new(Outcome::BuildFailed, true, STEP));
        assert_eq!(
            build_failed,
            vec![S::AwaitingBuild, S::Building, S::BuildFailed]
        );
    }

    #[test]
    fn huge_steps_saturate_instead_of_overflowing() {
        let plan = Plan::new(Outcome::Unknown, true, Duration::MAX);
        assert_eq!(plan.total(), Duration::MAX);
        assert_eq!(plan.status_at(Duration::from_secs(5)).0, S::AwaitingBuild);
    }

    #[test]
    fn zero_step_is_terminal_at_once() {
        let plan = Plan::new(Outcome::Deployed, true, Duration::ZERO);
        assert_eq!(
            plan.status_at(Duration::ZERO),
            (S::Deployed, Duration::ZERO)
        );
    }

    #[test]
    fn outcome_parses_case_insensitively() {
        assert_eq!("build_failed".parse::<Outcome>(), Ok(Outcome::BuildFailed));
        assert!("nope".parse::<Outcome>().unwrap_err().contains("STUCK"));
        for o in Outcome::ALL {
            assert_eq!(o.as_str().parse::<Outcome>(), Ok(o));
            let json = serde_json::to_string(&o).unwrap();
            assert_eq!(json, format!("\"{o}\""));
        }
    }
}
