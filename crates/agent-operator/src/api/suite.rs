//! `spec.verify.suite`: a verification suite, the cases a revision's agent
//! server must answer before the revision counts as verified, and
//! `status.verification.suite`, what the suite found on one revision.
//!
//! The words are LangSmith's evaluation words where they fit: a **case** is
//! an example (an input and what its answer must satisfy), the suite's run
//! on a revision is an experiment, its assertions are the evaluators. Each
//! case is one run on a fresh thread of its own (`POST
//! /threads/{id}/runs/stream`, stream mode `values`): the answer is the
//! run's final state, the data of its last `values` event
//! (docs/control-plane-api.md, "Suite runs on threads"). What the
//! assertions read of that state, and how a result is judged, is in
//! [`crate::plan::suite`].

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Most cases of a suite.
pub const MAX_CASES: usize = 50;

/// Most assertions of a case.
pub const MAX_ASSERTIONS: usize = 10;

/// Most failing cases listed with their reason in
/// `status.verification.suite.failures` (every failing case is named in
/// `failedCases`, bounded by [`MAX_CASES`]).
pub const MAX_FAILURES_SHOWN: usize = 10;

/// `spec.verify.suite`: the cases (written here, kept in a ConfigMap, or
/// the examples of a LangSmith dataset), the share of them that must pass,
/// and the regression rule. It runs once per revision and per suite (its
/// digest): a resync or a restart of the operator runs nothing again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("[has(self.cases), has(self.dataset), has(self.configMapRef)].filter(x, x).size() == 1").message("a suite has exactly one of cases, dataset and configMapRef"))]
pub struct VerifySuite {
    /// The cases, 1 to 50, each named once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "cases_schema")]
    pub cases: Vec<SuiteCase>,
    /// The cases as the examples of a LangSmith dataset, read with the
    /// control plane's key when the suite runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<SuiteDataset>,
    /// The cases kept in a ConfigMap of the object's namespace, read when
    /// the suite is due: for suites too large to write in the object, or
    /// shared by several AgentDeployments (staging and production).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_ref: Option<SuiteConfigMapRef>,
    /// The fraction of cases that must pass, 0 to 1 (default 1: every
    /// case).
    #[serde(default = "default_min_pass_rate")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub min_pass_rate: f64,
    /// `Serving`: a case the serving revision passed must also pass on the
    /// candidate, whatever the pass rate; a case both fail does not block
    /// (counted in `status.verification.suite.bothFail`). The serving
    /// revision's results are its own recorded run of the same suite
    /// (`status.revisions[].failedCases`), never a new run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compare_with: Option<CompareWith>,
    /// Cases run at once, 1 to 8 (default 2); every case also takes a token
    /// of the agent server's request budget (`--verify-requests-per-second`).
    #[serde(default = "default_concurrency")]
    #[schemars(range(min = 1, max = 8))]
    pub concurrency: u32,
}

/// `spec.verify.suite.dataset`: the examples of a LangSmith dataset as the
/// cases, read from the LangSmith API of the control plane (its `/datasets`
/// and `/examples`; the project's API notes, "LangSmith datasets") with the
/// AgentControlPlane's key, once per revision: an edit of the dataset counts
/// from the next revision. The first 50 examples are the cases. A case is
/// named by the example's `metadata.name` when it is a string, else by its
/// id; its input is the example's `inputs`; its assertions come from the
/// reference `outputs`: a string, or the string field `answer`, `output` or
/// `content`, must be **contained** in the answer's text; any other object
/// must be **equal**, field by field, at the top of the answer's state; no
/// outputs: the run only has to answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuiteDataset {
    /// The dataset's name in the workspace.
    #[schemars(length(min = 1, max = 256))]
    pub name: String,
    /// An assistant id (uuid) or a graph name, sent as `assistant_id` for
    /// every example.
    #[schemars(length(min = 1, max = 253))]
    pub assistant_id: String,
    /// Seconds each run may take (1-300; default 30).
    #[serde(default = "default_case_timeout")]
    #[schemars(range(min = 1, max = 300))]
    pub timeout_seconds: u32,
}

/// `spec.verify.suite.configMapRef`: a key of a ConfigMap in the object's
/// namespace whose value is the list of cases, in YAML or JSON, in the
/// shape of `spec.verify.suite.cases` (1 to 50 cases, each named once).
/// The operator reads it with a GET each time the suite is due (no watch):
/// a change is a new suite digest, run at the next verification (on the
/// revision's next check, or the next revision). A ConfigMap that is
/// missing, lacks the key, or holds cases that break a rule is
/// `SuiteUnreadable`, read again with backoff.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuiteConfigMapRef {
    /// The ConfigMap's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The key holding the cases (default `cases.yaml`).
    #[serde(default = "default_cases_key")]
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[-._a-zA-Z0-9]+$"))]
    pub key: String,
}

fn default_cases_key() -> String {
    "cases.yaml".to_owned()
}

fn default_min_pass_rate() -> f64 {
    1.0
}

fn default_concurrency() -> u32 {
    2
}

/// What a candidate revision is compared with (`spec.verify.suite.compareWith`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum CompareWith {
    /// The revision that serves now (`status.serving`).
    Serving,
}

/// One case of a suite: a run's input and what its answer must satisfy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuiteCase {
    /// The case's name, unique in the suite (1-63 characters; shown in
    /// status and events).
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    /// An assistant id (uuid) or a graph name of `langgraph.json`, sent as
    /// `assistant_id`.
    #[schemars(length(min = 1, max = 253))]
    pub assistant_id: String,
    /// The graph input, a JSON object.
    #[serde(default)]
    #[schemars(schema_with = "object_schema")]
    pub input: Map<String, Value>,
    /// The run's `config` (e.g. `{configurable: {...}}`), a JSON object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_object_schema")]
    pub config: Option<Map<String, Value>>,
    /// Seconds the run may take (1-300; default 30). A run over it fails
    /// the case.
    #[serde(default = "default_case_timeout")]
    #[schemars(range(min = 1, max = 300))]
    pub timeout_seconds: u32,
    /// What the answer must satisfy, 1 to 10 assertions, all of them.
    #[schemars(length(min = 1, max = 10))]
    pub assertions: Vec<CaseAssertion>,
}

fn default_case_timeout() -> u32 {
    30
}

/// One assertion on a case's answer: exactly one of `equals`, `contains`,
/// `matches`, `pointer` (with `value`) and `maxLatencySeconds`. A `pointer`
/// without `value` is `Stalled`/`InvalidSpec` before any call (CEL cannot
/// read a field of any JSON type, so admission cannot check it).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("[has(self.equals), has(self.contains), has(self.matches), has(self.pointer), has(self.maxLatencySeconds)].filter(x, x).size() == 1").message("an assertion has exactly one of equals, contains, matches, pointer and maxLatencySeconds"))]
pub struct CaseAssertion {
    /// The answer's text equals this (both trimmed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub equals: Option<String>,
    /// The answer's text contains this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 4096))]
    pub contains: Option<String>,
    /// The answer's text matches this regular expression (RE2 syntax,
    /// checked at admission; unanchored: use `^...$` for the whole text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    #[x_kube(validation = Rule::new("''.matches(self) == ''.matches(self)").message("matches is not a valid regular expression"))]
    pub matches: Option<String>,
    /// A JSON Pointer (RFC 6901, e.g. `/echo/messages/0/content`) into the
    /// answer's state; the value there must equal `value`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512), regex(pattern = r"^(/.*)?$"))]
    pub pointer: Option<String>,
    /// The value `pointer` must find (any JSON but `null`, which reads as
    /// unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_value_schema")]
    pub value: Option<Value>,
    /// The run must answer within this many seconds (1-300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 300))]
    pub max_latency_seconds: Option<u32>,
}

/// Largest compiled regular expression of a `matches` assertion: 1 MiB.
pub const REGEX_SIZE_LIMIT: usize = 1 << 20;

impl CaseAssertion {
    /// Checks what admission checks, for an object stored before a rule
    /// existed: exactly one check, `pointer` with `value` and empty or
    /// starting with `/`, `matches` a regular expression this operator's
    /// engine compiles (within [`REGEX_SIZE_LIMIT`]); returns that
    /// expression, compiled. Errors: the broken rule, in words.
    pub fn validate(&self) -> Result<Option<regex::Regex>, String> {
        let set = [
            self.equals.is_some(),
            self.contains.is_some(),
            self.matches.is_some(),
            self.pointer.is_some(),
            self.max_latency_seconds.is_some(),
        ];
        if set.iter().filter(|x| **x).count() != 1 {
            return Err("an assertion has exactly one of equals, contains, matches, pointer and maxLatencySeconds".to_owned());
        }
        if let Some(p) = &self.pointer {
            if !(p.is_empty() || p.starts_with('/')) {
                return Err(format!("pointer {p:?} must be empty or start with '/'"));
            }
            if self.value.is_none() {
                return Err("pointer needs a value".to_owned());
            }
        }
        self.matches
            .as_deref()
            .map(|m| {
                regex::RegexBuilder::new(m)
                    .size_limit(REGEX_SIZE_LIMIT)
                    .build()
                    .map_err(|e| {
                        format!("matches is not a regular expression this operator runs: {e}")
                    })
            })
            .transpose()
    }
}

impl VerifySuite {
    /// [`CaseAssertion::validate`] on every assertion. Errors: the first
    /// broken one, naming its case and place.
    pub fn validate(&self) -> Result<(), String> {
        for c in &self.cases {
            for (i, a) in c.assertions.iter().enumerate() {
                a.validate().map_err(|e| {
                    format!("spec.verify.suite.cases[{}].assertions[{i}]: {e}", c.name)
                })?;
            }
        }
        Ok(())
    }
}

/// Reads the cases a ConfigMap holds (`spec.verify.suite.configMapRef`):
/// `text` is a YAML (or JSON) list of cases in the shape of
/// `spec.verify.suite.cases`, checked as admission checks those: 1 to
/// [`MAX_CASES`], each named once (1-63 characters), an `assistantId`,
/// `timeoutSeconds` 1-300, 1 to [`MAX_ASSERTIONS`] assertions each valid
/// ([`CaseAssertion::validate`]). Errors: the first broken rule, naming
/// the case.
pub fn cases_from_text(text: &str) -> Result<Vec<SuiteCase>, String> {
    let cases: Vec<SuiteCase> = yaml_serde::from_str(text)
        .map_err(|e| format!("not a list of cases (YAML or JSON): {e}"))?;
    if !(1..=MAX_CASES).contains(&cases.len()) {
        return Err(format!(
            "{} cases; a suite has 1 to {MAX_CASES}",
            cases.len()
        ));
    }
    let mut names = std::collections::HashSet::new();
    for c in &cases {
        if !(1..=63).contains(&c.name.chars().count()) || !names.insert(c.name.as_str()) {
            return Err(format!(
                "case {:?}: a name is 1 to 63 characters, used once",
                c.name
            ));
        }
        let rules = [
            (!c.assistant_id.is_empty(), "assistantId is empty"),
            (
                (1..=300).contains(&c.timeout_seconds),
                "timeoutSeconds is not 1 to 300",
            ),
            (
                (1..=MAX_ASSERTIONS).contains(&c.assertions.len()),
                "a case has 1 to 10 assertions",
            ),
        ];
        if let Some((_, broken)) = rules.iter().find(|(ok, _)| !ok) {
            return Err(format!("case {:?}: {broken}", c.name));
        }
        for (i, a) in c.assertions.iter().enumerate() {
            a.validate()
                .map_err(|e| format!("case {:?}: assertions[{i}]: {e}", c.name))?;
        }
    }
    Ok(cases)
}

/// `status.verification.suite` and the suite's part of
/// `status.revisions[]`: what a suite found on one revision.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuiteResult {
    /// The suite it ran (`sha256:<hex>` of the suite as written).
    pub digest: String,
    /// `passed/total`, e.g. `9/10` (the `Cases` column of
    /// `kubectl get agd -o wide`).
    pub cases: String,
    /// Cases passed.
    pub passed: u32,
    /// Cases run.
    pub total: u32,
    /// Every failing case, in suite order (at most 50).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_cases: Vec<String>,
    /// The first ten failing cases with the assertion each failed and an
    /// excerpt of the answer (secrets redacted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<CaseFailure>,
    /// Cases the serving revision passed and this one fails
    /// (`compareWith: Serving`); they block whatever the pass rate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub regressions: Vec<String>,
    /// Cases this revision and the serving one both fail (`compareWith:
    /// Serving`; they do not block).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub both_fail: Option<u32>,
    /// What the regression rule compared with: `Serving <revision id>`, or
    /// why it could not (the serving revision has no result of this suite).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compared_with: Option<String>,
    /// Whether the suite met `minPassRate` and nothing regressed.
    pub passed_suite: bool,
    /// When the suite ran (RFC 3339).
    pub ran_at: String,
}

/// One failing case of `status.verification.suite.failures`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CaseFailure {
    /// The case.
    pub name: String,
    /// The assertion it failed and an excerpt of the answer (at most 120
    /// characters of it), or why the run gave no answer.
    pub message: String,
}

/// Schema of `spec.verify.suite.cases`: a list-map keyed by `name` (so a
/// name appears once, and server-side apply merges by case), 1 to 50 items.
fn cases_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let item = generator.subschema_for::<SuiteCase>();
    schemars::json_schema!({
        "type": "array",
        "minItems": 1,
        "maxItems": MAX_CASES,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "items": item,
    })
}

/// Any JSON object.
fn object_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Any JSON object, or absent.
fn optional_object_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "nullable": true,
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Any JSON value.
fn any_value_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// (the ConfigMap's text, the error it gives; `None`: read).
    #[test]
    fn cases_from_a_config_map_keep_the_rules_of_inline_cases() {
        let case = |name: &str, extra: &str| {
            format!(
                "- name: {name}\n  assistantId: agent\n  assertions:\n    - contains: hi\n{extra}"
            )
        };
        let many: String = (0..51).map(|i| case(&format!("c{i}"), "")).collect();
        let rows: Vec<(String, Option<&str>)> = vec![
            (case("a", "") + &case("b", ""), None),
            (
                r#"[{"name": "j", "assistantId": "agent", "assertions": [{"equals": "x"}]}]"#
                    .into(),
                None,
            ),
            ("cases: []".into(), Some("not a list of cases")),
            ("[]".into(), Some("0 cases; a suite has 1 to 50")),
            (many, Some("51 cases")),
            (
                case("a", "") + &case("a", ""),
                Some("case \"a\": a name is 1 to 63"),
            ),
            (
                case("a", "  timeoutSeconds: 0\n"),
                Some("timeoutSeconds is not 1 to 300"),
            ),
            (
                "- name: a\n  assistantId: agent\n  assertions: []\n".into(),
                Some("1 to 10 assertions"),
            ),
            (
                "- name: a\n  assistantId: agent\n  assertions:\n    - matches: '('\n".into(),
                Some("case \"a\": assertions[0]: matches is not a regular expression"),
            ),
            (
                "- name: a\n  assistantId: agent\n  assertions:\n    - {contains: x, equals: y}\n"
                    .into(),
                Some("exactly one of"),
            ),
        ];
        for (text, want) in rows {
            match (cases_from_text(&text), want) {
                (Ok(c), None) => assert!(!c.is_empty()),
                (Err(e), Some(w)) => assert!(e.contains(w), "{text}: {e}"),
                (got, want) => panic!("{text}: {got:?}, want {want:?}"),
            }
        }
        let read = cases_from_text(&case("a", "")).unwrap();
        assert_eq!(read[0].timeout_seconds, 30, "the defaults of inline cases");
    }

    /// (assertion as written, the error's start; `None`: valid).
    #[test]
    fn validate_refuses_what_cannot_run() {
        let rows = [
            (json!({"contains": "x"}), None),
            (json!({"matches": "^a+$"}), None),
            (json!({"pointer": "", "value": {"a": 1}}), None),
            (
                json!({"pointer": "/echo/0", "value": null}),
                Some("pointer needs a value"),
            ),
            (json!({"pointer": "/a"}), Some("pointer needs a value")),
            (
                json!({"pointer": "a", "value": 1}),
                Some("pointer \"a\" must be empty"),
            ),
            (
                json!({"matches": "(open"}),
                Some("matches is not a regular expression"),
            ),
            (
                json!({"matches": "a{1000}{1000}"}),
                Some("matches is not a regular expression"),
            ),
            (json!({}), Some("an assertion has exactly one")),
            (
                json!({"equals": "a", "contains": "a"}),
                Some("an assertion has exactly one"),
            ),
        ];
        for (written, want) in rows {
            let a: CaseAssertion = serde_json::from_value(written.clone()).unwrap();
            match (a.validate(), want) {
                (Ok(_), None) => {}
                (Err(e), Some(w)) => assert!(e.starts_with(w), "{written}: {e}"),
                (got, _) => panic!("{written}: {got:?}, want {want:?}"),
            }
        }
    }
}
