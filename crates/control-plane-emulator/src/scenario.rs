//! Scenario rules: which new revisions fail, and how.
//!
//! An emulator feature (docs/control-plane-api.md "Revision" lists the
//! failure statuses but not what causes them). Rules are set at start (`--scenario`) or replaced at
//! run time with `PUT /_emulator/scenarios`; the first matching rule decides
//! the [`Outcome`] of a revision when it is created.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::timeline::Outcome;
use control_plane_wire::types::SourceRevisionConfig;

/// The value a rule looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScenarioField {
    /// The deployment name.
    Name,
    /// `source_config.repo_url`.
    RepoUrl,
    /// `source_revision_config.repo_ref` of the new revision.
    RepoRef,
    /// `source_revision_config.image_uri` of the new revision.
    ImageUri,
    /// `source_revision_config.langgraph_config_path` of the new revision.
    LanggraphConfigPath,
}

impl ScenarioField {
    const ALL: [ScenarioField; 5] = [
        ScenarioField::Name,
        ScenarioField::RepoUrl,
        ScenarioField::RepoRef,
        ScenarioField::ImageUri,
        ScenarioField::LanggraphConfigPath,
    ];

    /// The flag/JSON spelling, e.g. `repo_ref`.
    pub fn as_str(self) -> &'static str {
        match self {
            ScenarioField::Name => "name",
            ScenarioField::RepoUrl => "repo_url",
            ScenarioField::RepoRef => "repo_ref",
            ScenarioField::ImageUri => "image_uri",
            ScenarioField::LanggraphConfigPath => "langgraph_config_path",
        }
    }
}

/// One rule: "when `field` equals `equals`, the revision ends as `outcome`".
///
/// JSON: `{"field": "repo_ref", "equals": "broken", "outcome": "BUILD_FAILED"}`.
/// Flag: `BUILD_FAILED:repo_ref=broken`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioRule {
    /// The value looked at.
    pub field: ScenarioField,
    /// The exact value that triggers the rule.
    pub equals: String,
    /// How a matching revision ends.
    pub outcome: Outcome,
    /// Lines the failing step writes to the revision's log before it ends
    /// (the build log for `BUILD_FAILED`, the deploy log for
    /// `DEPLOY_FAILED`; see `emulator::logs`). Empty: a default line for the
    /// outcome. JSON only (`PUT /_emulator/scenarios`); the flag form has
    /// none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub log: Vec<String>,
}

impl fmt::Display for ScenarioRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}={}",
            self.outcome,
            self.field.as_str(),
            self.equals
        )
    }
}

/// Parses `OUTCOME:FIELD=VALUE` (the `--scenario` flag), e.g.
/// `BUILD_FAILED:repo_ref=broken` or `DEPLOY_FAILED:image_uri=reg:5000/x:bad`
/// (only the first `:` and the first `=` separate).
///
/// Errors: wrong shape, unknown outcome or field.
impl FromStr for ScenarioRule {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const SHAPE: &str = "expected OUTCOME:FIELD=VALUE, e.g. BUILD_FAILED:repo_ref=broken";
        let (outcome, rest) = s.split_once(':').ok_or(SHAPE)?;
        let (field, value) = rest.split_once('=').ok_or(SHAPE)?;
        let field = ScenarioField::ALL
            .into_iter()
            .find(|f| f.as_str() == field.trim())
            .ok_or_else(|| {
                let all: Vec<_> = ScenarioField::ALL.iter().map(|f| f.as_str()).collect();
                format!("unknown field {field:?}; one of {}", all.join(", "))
            })?;
        Ok(ScenarioRule {
            field,
            equals: value.to_owned(),
            outcome: outcome.parse()?,
            log: Vec::new(),
        })
    }
}

/// What the rules can look at for one new revision.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RevisionFacts<'a> {
    pub name: &'a str,
    pub repo_url: Option<&'a str>,
    pub config: &'a SourceRevisionConfig,
}

/// The outcome of the first matching rule, or [`Outcome::Deployed`].
#[cfg(test)]
pub(crate) fn pick_outcome(rules: &[ScenarioRule], facts: RevisionFacts<'_>) -> Outcome {
    pick_rule(rules, facts)
        .map(|r| r.outcome)
        .unwrap_or_default()
}

/// The first rule that matches `facts`, if any.
pub(crate) fn pick_rule<'r>(
    rules: &'r [ScenarioRule],
    facts: RevisionFacts<'_>,
) -> Option<&'r ScenarioRule> {
    rules.iter().find(|r| {
        let value = match r.field {
            ScenarioField::Name => Some(facts.name),
            ScenarioField::RepoUrl => facts.repo_url,
            ScenarioField::RepoRef => facts.config.repo_ref.as_deref(),
            ScenarioField::ImageUri => facts.config.image_uri.as_deref(),
            ScenarioField::LanggraphConfigPath => facts.config.langgraph_config_path.as_deref(),
        };
        value == Some(r.equals.as_str())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_flag_parses_values_with_colons() {
        let r: ScenarioRule = "DEPLOY_FAILED:image_uri=reg:5000/app:bad".parse().unwrap();
        assert_eq!(r.field, ScenarioField::ImageUri);
        assert_eq!(r.equals, "reg:5000/app:bad");
        assert_eq!(r.outcome, Outcome::DeployFailed);
        assert_eq!(r.to_string(), "DEPLOY_FAILED:image_uri=reg:5000/app:bad");
        assert!("BUILD_FAILED:colour=red".parse::<ScenarioRule>().is_err());
        assert!("EXPLODED:repo_ref=x".parse::<ScenarioRule>().is_err());
        assert!("BUILD_FAILED".parse::<ScenarioRule>().is_err());
    }

    #[test]
    fn first_matching_rule_wins_and_default_is_deployed() {
        let rules: Vec<ScenarioRule> = vec![
            "BUILD_FAILED:repo_ref=broken".parse().unwrap(),
            "DEPLOY_FAILED:repo_ref=broken".parse().unwrap(),
            "STUCK:name=slow".parse().unwrap(),
        ];
        let cfg = SourceRevisionConfig {
            repo_ref: Some("broken".into()),
            ..Default::default()
        };
        let facts = RevisionFacts {
            name: "app",
            repo_url: None,
            config: &cfg,
        };
        assert_eq!(pick_outcome(&rules, facts), Outcome::BuildFailed);
        let ok = SourceRevisionConfig::default();
        let facts = RevisionFacts {
            name: "slow",
            repo_url: None,
            config: &ok,
        };
        assert_eq!(pick_outcome(&rules, facts), Outcome::Stuck);
        let facts = RevisionFacts {
            name: "fine",
            repo_url: None,
            config: &ok,
        };
        assert_eq!(pick_outcome(&rules, facts), Outcome::Deployed);
    }

    #[test]
    fn rule_json_shape() {
        let r: ScenarioRule = serde_json::from_value(serde_json::json!(
            {"field": "repo_ref", "equals": "x", "outcome": "INTERRUPTED"}
        ))
        .unwrap();
        assert_eq!(r.outcome, Outcome::Interrupted);
    }
}
