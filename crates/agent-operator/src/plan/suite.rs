//! Verification suites (`spec.verify.suite`), the pure part: the cases of
//! a suite as the operator runs them ([`compile`], refusing what cannot
//! run before any call), what a case's assertions say about one run's
//! answer ([`check`]), what a suite's
//! results say about a revision ([`judge`], with the regression rule
//! against the serving revision), the digest a result is cached under
//! ([`digest`]), and the assertions a LangSmith example's reference
//! outputs stand for ([`from_reference`]).
//!
//! The answer of a run is its final state: the last `values` event of a
//! run without a thread (`POST /runs/stream`; docs/control-plane-api.md,
//! "Agent server"). Text assertions read
//! its **text** ([`answer_text`]): the `content` of the last message of
//! `messages` when there is one (a list of content parts reads as their
//! `text` joined), else the whole state as compact JSON. `pointer` reads
//! the state itself by JSON Pointer (RFC 6901, as JSON Patch paths).

use std::time::Duration;

use regex::Regex;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::api::suite::{CaseAssertion, SuiteDataset, VerifySuite};

/// One assertion of a case on the answer of its run.
#[derive(Clone, Debug)]
pub enum Assertion {
    /// The answer's text equals this, both trimmed.
    Equals(String),
    /// The answer's text contains this.
    Contains(String),
    /// The answer's text matches this regular expression (compiled when the
    /// suite is read: a bad one is refused there, never here).
    Matches(Regex),
    /// The value at this JSON Pointer of the answer equals this value.
    Pointer(String, Value),
    /// The run answered within this time.
    MaxLatency(Duration),
}

/// What one run answered: its final state and how long it took.
#[derive(Clone, Debug)]
pub struct Answer<'a> {
    /// The run's final state (`None`: the run failed or timed out).
    pub state: Option<&'a Value>,
    /// From the request to the answer.
    pub latency: Duration,
}

/// Most characters of an answer quoted in a failure (they may hold what
/// the agent said; the caller redacts secrets before it writes them).
pub const EXCERPT_CHARS: usize = 120;

/// The text the text assertions read (see the module documentation).
pub fn answer_text(state: &Value) -> String {
    let last = state
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|m| m.last());
    match last.and_then(|m| m.get("content")) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => state.to_string(),
    }
}

/// The first assertion `answer` fails, said for a human with an excerpt
/// of the answer; `None` when it passes them all. A failed run fails every
/// case.
pub fn check(assertions: &[Assertion], answer: &Answer<'_>) -> Option<String> {
    let Some(state) = answer.state else {
        return Some("the run did not answer".to_owned());
    };
    let text = answer_text(state);
    let excerpt: String = text.chars().take(EXCERPT_CHARS).collect();
    assertions.iter().find_map(|a| match a {
        Assertion::Equals(want) => {
            (text.trim() != want.trim()).then(|| format!("answer is not {want:?}: {excerpt:?}"))
        }
        Assertion::Contains(want) => (!text.contains(want.as_str()))
            .then(|| format!("answer does not contain {want:?}: {excerpt:?}")),
        Assertion::Matches(re) => (!re.is_match(&text))
            .then(|| format!("answer does not match /{}/: {excerpt:?}", re.as_str())),
        Assertion::Pointer(path, want) => match state.pointer(path) {
            Some(got) if got == want => None,
            Some(got) => Some(format!("{path} is {got}, not {want}")),
            None => Some(format!("{path} is absent")),
        },
        Assertion::MaxLatency(max) => (answer.latency > *max).then(|| {
            format!(
                "answered in {:.1} s, over {:.1} s",
                answer.latency.as_secs_f64(),
                max.as_secs_f64()
            )
        }),
    })
}

/// What a suite's results say about a revision.
#[derive(Clone, Debug, PartialEq)]
pub struct Judgement {
    /// Cases passed.
    pub passed: usize,
    /// Cases run.
    pub total: usize,
    /// Cases the serving revision passed and this one fails (they block,
    /// whatever the pass rate).
    pub regressions: Vec<String>,
    /// Cases both this revision and the serving one fail (they do not
    /// block; counted for the status).
    pub both_fail: usize,
    /// `passed / total` reached `min_pass_rate` and nothing regressed.
    pub verified: bool,
}

/// Judges a revision by its results (case name, passed), in suite order,
/// against `min_pass_rate` (0 to 1) and, with `compareWith: Serving`, the
/// serving revision's recorded results (`serving`: the names of the cases
/// it passed). An empty suite verifies nothing.
pub fn judge(results: &[(&str, bool)], min_pass_rate: f64, serving: Option<&[&str]>) -> Judgement {
    let passed = results.iter().filter(|(_, ok)| *ok).count();
    let total = results.len();
    let failed = results.iter().filter(|(_, ok)| !ok).map(|(n, _)| *n);
    let (mut regressions, mut both_fail) = (Vec::new(), 0);
    if let Some(serving) = serving {
        for name in failed {
            if serving.contains(&name) {
                regressions.push(name.to_owned());
            } else {
                both_fail += 1;
            }
        }
    }
    // A rate written in decimal is not exact in binary (0.56 × 25 is
    // 14.000000000000002): a billionth of a case of slack.
    let rate_met = total > 0 && passed as f64 + 1e-9 >= min_pass_rate * total as f64;
    Judgement {
        passed,
        total,
        verified: rate_met && regressions.is_empty(),
        regressions,
        both_fail,
    }
}

/// The digest a suite's result is cached under: SHA-256 of its canonical
/// JSON (`serde_json` writes object keys in order), as `sha256:<hex>`. A
/// change of any case, assertion or threshold is a new digest, so the
/// suite runs again; a resync or a restart is not.
pub fn digest(suite: &Value) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(suite.to_string())))
}

/// One case ready to run (see [`compile`]).
#[derive(Clone, Debug)]
pub struct Case {
    /// Its name in the suite.
    pub name: String,
    /// Sent as `assistant_id`.
    pub assistant_id: String,
    /// The graph input (a JSON object).
    pub input: Value,
    /// The run's `config`, when set.
    pub config: Option<Value>,
    /// How long the run may take.
    pub timeout: Duration,
    /// What the answer must satisfy.
    pub assertions: Vec<Assertion>,
}

/// The cases of `suite`, with their assertions compiled. Errors: the first
/// assertion that cannot run, naming the case and the field (a regular
/// expression this operator's engine refuses, a JSON Pointer without its
/// leading `/`, an assertion with no check or with two), for
/// `Stalled`/`InvalidSpec` before any call; admission refuses the same
/// shapes, this catches objects stored before a rule existed.
pub fn compile(suite: &VerifySuite) -> Result<Vec<Case>, String> {
    suite
        .cases
        .iter()
        .map(|c| {
            let assertions = c
                .assertions
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    assertion(a).map_err(|e| {
                        format!("spec.verify.suite.cases[{}].assertions[{i}]: {e}", c.name)
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Case {
                name: c.name.clone(),
                assistant_id: c.assistant_id.clone(),
                input: Value::Object(c.input.clone()),
                config: c.config.clone().map(Value::Object),
                timeout: Duration::from_secs(u64::from(c.timeout_seconds.max(1))),
                assertions,
            })
        })
        .collect()
}

/// One assertion of the spec, compiled ([`CaseAssertion::validate`]).
fn assertion(a: &CaseAssertion) -> Result<Assertion, String> {
    let regex = a.validate()?;
    match (
        &a.equals,
        &a.contains,
        regex,
        &a.pointer,
        a.max_latency_seconds,
    ) {
        (Some(e), ..) => Ok(Assertion::Equals(e.clone())),
        (_, Some(c), ..) => Ok(Assertion::Contains(c.clone())),
        (_, _, Some(re), ..) => Ok(Assertion::Matches(re)),
        (_, _, _, Some(p), _) => Ok(Assertion::Pointer(
            p.clone(),
            a.value.clone().unwrap_or_default(),
        )),
        (.., Some(s)) => Ok(Assertion::MaxLatency(Duration::from_secs(u64::from(s)))),
        _ => Err("an assertion needs a check".to_owned()),
    }
}

/// The cases of a suite read from a dataset: one per example of
/// `examples` (at most [`crate::api::suite::MAX_CASES`]), named by a string
/// `metadata.name` or the example's id, its assertions from its reference
/// outputs ([`from_reference`]). A name used twice is suffixed by the
/// example's id.
pub fn from_examples(dataset: &SuiteDataset, examples: &[crate::langsmith::Example]) -> Vec<Case> {
    let mut seen = std::collections::BTreeSet::new();
    examples
        .iter()
        .take(crate::api::suite::MAX_CASES)
        .map(|e| {
            let named = e
                .metadata
                .as_ref()
                .and_then(|m| m.get("name"))
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .map(|n| n.chars().take(63).collect::<String>());
            let mut name = named.unwrap_or_else(|| e.id.clone());
            if !seen.insert(name.clone()) {
                name = format!("{name} ({})", e.id);
            }
            Case {
                name,
                assistant_id: dataset.assistant_id.clone(),
                input: e.inputs.clone(),
                config: None,
                timeout: Duration::from_secs(u64::from(dataset.timeout_seconds.max(1))),
                assertions: from_reference(e.outputs.as_ref()),
            }
        })
        .collect()
}

/// The digest of `suite` as written ([`digest`] of its JSON).
pub fn suite_digest(suite: &VerifySuite) -> String {
    digest(&serde_json::to_value(suite).unwrap_or_default())
}

/// The assertions a LangSmith example's reference outputs stand for: a
/// string output (or the `answer`, `output` or `content` field of an
/// object) must be **contained** in the answer's text, since an agent's
/// wording around it varies; any other object must be **equal**, field by
/// field, at the top of the answer's state. `None`: no reference outputs,
/// so the example only checks that the run answers.
pub fn from_reference(outputs: Option<&Value>) -> Vec<Assertion> {
    let Some(outputs) = outputs.filter(|o| !o.is_null()) else {
        return Vec::new();
    };
    if let Some(s) = outputs.as_str() {
        return vec![Assertion::Contains(s.to_owned())];
    }
    for key in ["answer", "output", "content"] {
        if let Some(s) = outputs.get(key).and_then(Value::as_str) {
            return vec![Assertion::Contains(s.to_owned())];
        }
    }
    match outputs.as_object() {
        Some(fields) => fields
            .iter()
            .map(|(k, v)| Assertion::Pointer(format!("/{}", pointer_escape(k)), v.clone()))
            .collect(),
        None => vec![Assertion::Equals(outputs.to_string())],
    }
}

/// `key` as one JSON Pointer reference token (RFC 6901: `~` → `~0`,
/// `/` → `~1`).
fn pointer_escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn examples_become_cases_named_by_metadata_or_id() {
        let d = SuiteDataset {
            name: "echo".into(),
            assistant_id: "agent".into(),
            timeout_seconds: 20,
        };
        let example =
            |id: &str, name: Option<&str>, outputs: Option<Value>| crate::langsmith::Example {
                id: id.into(),
                inputs: json!({"messages": [{"content": id}]}),
                outputs,
                metadata: name.map(|n| json!({"name": n})),
            };
        let examples = [
            example("e1", Some("greets"), Some(json!({"answer": "hi"}))),
            example("e2", Some("greets"), None),
            example("e3", None, Some(json!({"echo": {"n": 1}}))),
        ];
        let cases = from_examples(&d, &examples);
        let names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["greets", "greets (e2)", "e3"]);
        assert!(matches!(&cases[0].assertions[..], [Assertion::Contains(t)] if t == "hi"));
        assert!(
            cases[1].assertions.is_empty(),
            "no outputs: it only has to answer"
        );
        assert!(
            matches!(&cases[2].assertions[..], [Assertion::Pointer(p, v)] if p == "/echo" && *v == json!({"n": 1}))
        );
        assert_eq!(cases[2].timeout, Duration::from_secs(20));
        assert_eq!(cases[2].input, json!({"messages": [{"content": "e3"}]}));
        let many: Vec<_> = (0..60)
            .map(|i| example(&format!("x{i}"), None, None))
            .collect();
        assert_eq!(from_examples(&d, &many).len(), crate::api::suite::MAX_CASES);
    }

    fn answer(state: &Value, ms: u64) -> Answer<'_> {
        Answer {
            state: Some(state),
            latency: Duration::from_millis(ms),
        }
    }

    #[test]
    fn the_text_is_the_last_message_or_the_state() {
        let cases = [
            (
                json!({"messages": [{"content": "hi"}, {"content": "echo: hi"}]}),
                "echo: hi",
            ),
            (
                json!({"messages": [{"content": [{"type": "text", "text": "a"}, {"type": "image"}, {"text": "b"}]}]}),
                "ab",
            ),
            (json!({"echo": 1}), r#"{"echo":1}"#),
            (json!({"messages": []}), r#"{"messages":[]}"#),
        ];
        for (state, want) in cases {
            assert_eq!(answer_text(&state), want, "{state}");
        }
    }

    #[test]
    fn each_assertion_passes_and_fails() {
        let state = json!({"messages": [{"content": " echo: case 7 "}], "echo": {"n": 7}});
        let re = Regex::new(r"case \d+").unwrap();
        let cases: Vec<(Assertion, u64, Option<&str>)> = vec![
            (Assertion::Equals("echo: case 7".into()), 5, None),
            (Assertion::Equals("echo: case 8".into()), 5, Some("is not")),
            (Assertion::Contains("case 7".into()), 5, None),
            (
                Assertion::Contains("case 8".into()),
                5,
                Some("does not contain"),
            ),
            (Assertion::Matches(re), 5, None),
            (
                Assertion::Matches(Regex::new("^x").unwrap()),
                5,
                Some("does not match /^x/"),
            ),
            (Assertion::Pointer("/echo/n".into(), json!(7)), 5, None),
            (
                Assertion::Pointer("/echo/n".into(), json!(8)),
                5,
                Some("/echo/n is 7, not 8"),
            ),
            (
                Assertion::Pointer("/nope".into(), json!(1)),
                5,
                Some("/nope is absent"),
            ),
            (Assertion::MaxLatency(Duration::from_secs(1)), 900, None),
            (
                Assertion::MaxLatency(Duration::from_secs(1)),
                1500,
                Some("answered in 1.5 s, over 1.0 s"),
            ),
        ];
        for (a, ms, want) in cases {
            let got = check(std::slice::from_ref(&a), &answer(&state, ms));
            match want {
                None => assert_eq!(got, None, "{a:?}"),
                Some(w) => assert!(
                    got.as_deref().is_some_and(|g| g.contains(w)),
                    "{a:?}: {got:?}"
                ),
            }
        }
        let failed = Answer {
            state: None,
            latency: Duration::ZERO,
        };
        assert_eq!(
            check(&[], &failed).as_deref(),
            Some("the run did not answer")
        );
    }

    #[test]
    fn an_excerpt_is_bounded() {
        let long = json!({"messages": [{"content": "x".repeat(1000)}]});
        let got = check(&[Assertion::Contains("y".into())], &answer(&long, 1)).unwrap();
        assert!(got.len() < EXCERPT_CHARS + 60, "{}", got.len());
    }

    #[test]
    fn judge_rates_and_regressions() {
        let ten: Vec<(&str, bool)> = (0..10)
            .map(|i| {
                (
                    ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"][i],
                    i != 3,
                )
            })
            .collect();
        // 9 of 10: verified at 0.9, not at the default 1.0.
        assert!(judge(&ten, 0.9, None).verified);
        let strict = judge(&ten, 1.0, None);
        assert_eq!(
            (strict.passed, strict.total, strict.verified),
            (9, 10, false)
        );
        // Compared with the serving revision: "d" failed there too, so it
        // does not block at 0.9 and is counted.
        let serving: Vec<&str> = ten
            .iter()
            .filter(|(n, _)| *n != "d")
            .map(|(n, _)| *n)
            .collect();
        let j = judge(&ten, 0.9, Some(&serving));
        assert_eq!((j.verified, j.both_fail, j.regressions.len()), (true, 1, 0));
        // A case the serving revision passed blocks, whatever the rate.
        let all: Vec<&str> = ten.iter().map(|(n, _)| *n).collect();
        let j = judge(&ten, 0.5, Some(&all));
        assert_eq!((j.verified, j.regressions), (false, vec!["d".to_owned()]));
        assert!(!judge(&[], 0.0, None).verified);
        // Exactly the rate: 14 of 25 at 0.56 (0.56 × 25 is
        // 14.000000000000002 in binary), 7 of 50 at 0.14; one short is not.
        let of = |n, total| (0..total).map(|i| ("c", i < n)).collect::<Vec<_>>();
        assert!(judge(&of(14, 25), 0.56, None).verified);
        assert!(judge(&of(7, 50), 0.14, None).verified);
        assert!(!judge(&of(13, 25), 0.56, None).verified);
    }

    #[test]
    fn the_digest_follows_the_suite_only() {
        let a = json!({"cases": [{"name": "x", "contains": "y"}], "minPassRate": 1.0});
        let same = json!({"minPassRate": 1.0, "cases": [{"contains": "y", "name": "x"}]});
        let other = json!({"cases": [{"name": "x", "contains": "z"}], "minPassRate": 1.0});
        assert_eq!(digest(&a), digest(&same));
        assert_ne!(digest(&a), digest(&other));
        assert!(digest(&a).starts_with("sha256:"));
    }

    #[test]
    fn reference_outputs_become_assertions() {
        let contains = |v: &[Assertion]| match v {
            [Assertion::Contains(s)] => Some(s.clone()),
            _ => None,
        };
        assert_eq!(
            contains(&from_reference(Some(&json!("echo: hi")))).as_deref(),
            Some("echo: hi")
        );
        assert_eq!(
            contains(&from_reference(Some(&json!({"answer": "42", "x": 1})))).as_deref(),
            Some("42")
        );
        let fields = from_reference(Some(&json!({"a/b": 1, "c": {"d": 2}})));
        let pointers: Vec<(String, Value)> = fields
            .into_iter()
            .map(|a| match a {
                Assertion::Pointer(p, v) => (p, v),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            pointers,
            vec![
                ("/a~1b".to_owned(), json!(1)),
                ("/c".to_owned(), json!({"d": 2}))
            ]
        );
        assert!(from_reference(None).is_empty());
        assert!(from_reference(Some(&Value::Null)).is_empty());
    }
}
