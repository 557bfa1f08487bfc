//! The IO edge of `spec.verify.suite`: each case as one run without a
//! thread (`POST /runs/stream`, stream mode `values`, its answer the data
//! of the last `values` event), at most `concurrency` at once, each
//! taking a token of the agent server's request budget first; then the
//! results judged ([`crate::plan::suite::judge`]) into the
//! `status.verification.suite` record. Sources: docs/control-plane-api.md
//! "Agent server" (`/runs/stream`, event names, an unknown assistant is
//! 404/422).

use std::time::Instant;

use futures::StreamExt;
use serde_json::Value;

use secrecy::SecretString;

use crate::agentserver::{self, AgentServerClient, RunEvent, RunStreamRequest, StreamMode};
use crate::api::conditions::reason;
use crate::api::deployment::RevisionSummary;
use crate::api::suite::{CaseFailure, MAX_FAILURES_SHOWN, SuiteResult, VerifySuite};
use crate::plan::suite::{Answer, Case, check, judge};

use super::decide::{Limits, classify};

/// The longest a suite's run holds its pass (and its verification slot):
/// 10 minutes. A case not answered by then fails as not answered in time.
pub const SUITE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(600);

/// What a suite's run came to.
pub(super) enum SuiteRun {
    /// Every case answered or failed on its own: (case, why it failed).
    Done(Vec<(String, Option<String>)>),
    /// The agent server could not be asked (down, or the key refused): the
    /// `Verified=False` reason and message; nothing is recorded, the
    /// attempt is retried with backoff.
    Aborted(&'static str, String),
}

/// Runs `cases` on `client`: `concurrency` at once, in suite order, each
/// after a token of `server`'s budget in `limits`. `secrets` are redacted
/// from the excerpts of the answers.
pub(super) async fn run(
    client: &AgentServerClient,
    cases: &[Case],
    concurrency: u32,
    limits: &Limits,
    server: &str,
    secrets: &[SecretString],
) -> SuiteRun {
    let width = usize::try_from(concurrency.clamp(1, 8)).unwrap_or(1);
    // A loop, not `stream::iter(..).map(..).buffered(..)`: a closure over
    // the borrowed cases is not general enough for the pass's `Send` future.
    let deadline = tokio::time::Instant::now() + SUITE_DEADLINE;
    let mut waiting = cases.iter();
    let mut running = futures::stream::FuturesOrdered::new();
    for case in waiting.by_ref().take(width) {
        running.push_back(paced(client, case, limits, server, secrets, deadline));
    }
    let mut done = Vec::with_capacity(cases.len());
    let results = loop {
        match running.next().await {
            None => break Ok(done),
            Some(Err(aborted)) => break Err(aborted),
            Some(Ok(result)) => done.push(result),
        }
        if let Some(case) = waiting.next() {
            running.push_back(paced(client, case, limits, server, secrets, deadline));
        }
    };
    match results {
        Ok(r) => SuiteRun::Done(r),
        Err((r, message)) => SuiteRun::Aborted(r, message),
    }
}

/// One case after a token of `server`'s budget, its failure redacted; a
/// case not answered by `deadline` fails.
async fn paced(
    client: &AgentServerClient,
    case: &Case,
    limits: &Limits,
    server: &str,
    secrets: &[SecretString],
    deadline: tokio::time::Instant,
) -> Result<(String, Option<String>), (&'static str, String)> {
    let ran = tokio::time::timeout_at(deadline, async {
        limits.pace(server).await;
        run_case(client, case).await
    })
    .await;
    let failure = match ran {
        Ok(result) => result?,
        Err(_) => Some(format!(
            "not answered within the suite's {} s",
            SUITE_DEADLINE.as_secs()
        )),
    };
    Ok((
        case.name.clone(),
        failure.map(|m| crate::redact::text(&m, secrets)),
    ))
}

/// One case: `Ok(None)` it passed, `Ok(Some(why))` it failed; `Err`: the
/// agent server could not be asked at all (see [`SuiteRun::Aborted`]).
async fn run_case(
    client: &AgentServerClient,
    case: &Case,
) -> Result<Option<String>, (&'static str, String)> {
    let req = RunStreamRequest {
        assistant_id: case.assistant_id.clone(),
        input: Some(case.input.clone()),
        config: case.config.clone(),
        stream_mode: Some(StreamMode::One("values".to_owned())),
        on_disconnect: Some("cancel".to_owned()),
        ..Default::default()
    };
    let started = Instant::now();
    let streamed = tokio::time::timeout(case.timeout, async {
        let mut stream = client.stream_run(&req).await?;
        let (mut last, mut error) = (None::<Value>, None::<String>);
        while let Some(event) = stream.next().await {
            match event? {
                RunEvent::Values(v) => last = Some(v),
                RunEvent::Error { error: e, message } => {
                    error.get_or_insert(format!("the run failed: {e}: {message}"));
                }
                _ => {}
            }
        }
        Ok::<_, agentserver::Error>((last, error))
    })
    .await;
    let latency = started.elapsed();
    match streamed {
        Err(_) => Ok(Some(format!(
            "the run did not answer within {} s",
            case.timeout.as_secs()
        ))),
        Ok(Err(e)) => {
            let (r, message) = classify("POST /runs/stream", &e);
            if r == reason::AGENT_SERVER_UNREACHABLE || r == reason::AGENT_SERVER_UNAUTHORIZED {
                return Err((r, message));
            }
            Ok(Some(message))
        }
        Ok(Ok((_, Some(error)))) => Ok(Some(error)),
        Ok(Ok((last, None))) => Ok(check(
            &case.assertions,
            &Answer {
                state: last.as_ref(),
                latency,
            },
        )),
    }
}

/// The revision whose recorded run `compareWith: Serving` compares the
/// candidate `rid` with: the newest other revision of `history` that was
/// verified (the one a rollback returns to).
pub(super) fn serving_record<'a>(
    history: &'a [RevisionSummary],
    rid: &str,
) -> Option<&'a RevisionSummary> {
    history
        .iter()
        .find(|r| r.id != rid && r.verified == Some(true))
}

/// The record of a finished run of `suite` (digest `digest`) on a revision:
/// `results` judged against `minPassRate` and, with `compareWith`, the
/// recorded run of `serving` (used only when it ran the same suite).
pub(super) fn record(
    suite: &VerifySuite,
    digest: &str,
    results: &[(String, Option<String>)],
    serving: Option<&RevisionSummary>,
    now: &str,
) -> SuiteResult {
    let passed_by: Vec<(&str, bool)> = results
        .iter()
        .map(|(n, f)| (n.as_str(), f.is_none()))
        .collect();
    let (compared_with, serving_passed) = compare(suite, digest, results, serving);
    let j = judge(&passed_by, suite.min_pass_rate, serving_passed.as_deref());
    let failed: Vec<&(String, Option<String>)> =
        results.iter().filter(|(_, f)| f.is_some()).collect();
    SuiteResult {
        digest: digest.to_owned(),
        cases: format!("{}/{}", j.passed, j.total),
        passed: u32::try_from(j.passed).unwrap_or(u32::MAX),
        total: u32::try_from(j.total).unwrap_or(u32::MAX),
        failed_cases: failed.iter().map(|(n, _)| n.clone()).collect(),
        failures: failed
            .iter()
            .take(MAX_FAILURES_SHOWN)
            .map(|(n, f)| CaseFailure {
                name: n.clone(),
                message: crate::controller::report::bounded(f.clone().unwrap_or_default()),
            })
            .collect(),
        both_fail: serving_passed
            .is_some()
            .then(|| u32::try_from(j.both_fail).unwrap_or(u32::MAX)),
        regressions: j.regressions,
        compared_with,
        passed_suite: j.verified,
        ran_at: now.to_owned(),
    }
}

/// What the regression rule compares with (said for the status) and the
/// cases the serving revision passed, when it ran the same suite.
fn compare<'a>(
    suite: &VerifySuite,
    digest: &str,
    results: &'a [(String, Option<String>)],
    serving: Option<&RevisionSummary>,
) -> (Option<String>, Option<Vec<&'a str>>) {
    match (suite.compare_with, serving) {
        (None, _) => (None, None),
        (Some(_), None) => (
            Some("no verified revision to compare with".to_owned()),
            None,
        ),
        (Some(_), Some(s)) => match s.suite.as_ref().filter(|r| r.digest == digest) {
            Some(r) => {
                let passed: Vec<&str> = results
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .filter(|n| !r.failed_cases.iter().any(|f| f == n))
                    .collect();
                (Some(format!("Serving {}", s.id)), Some(passed))
            }
            None => (
                Some(format!(
                    "Serving {}: it has no result of this suite, so nothing counts as a regression",
                    s.id
                )),
                None,
            ),
        },
    }
}

/// The `SuiteFailed` message of a record that did not pass.
pub(super) fn failure_message(r: &SuiteResult, min_pass_rate: f64) -> String {
    let mut m = format!("{} cases passed (minPassRate {min_pass_rate})", r.cases);
    if !r.failed_cases.is_empty() {
        let shown: Vec<&str> = r.failed_cases.iter().take(5).map(String::as_str).collect();
        let more = r.failed_cases.len().saturating_sub(shown.len());
        m.push_str(&format!("; failing: {}", shown.join(", ")));
        if more > 0 {
            m.push_str(&format!(" and {more} more"));
        }
    }
    if !r.regressions.is_empty() {
        m.push_str(&format!(
            "; regressions against the serving revision: {}",
            r.regressions.join(", ")
        ));
    }
    if let Some(f) = r.failures.first() {
        m.push_str(&format!("; {}: {}", f.name, f.message));
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::deployment::RevisionSuite;
    use crate::api::suite::{CompareWith, SuiteCase};

    fn suite(n: usize, rate: f64, compare: bool) -> VerifySuite {
        VerifySuite {
            cases: (0..n)
                .map(|i| SuiteCase {
                    name: format!("c{i}"),
                    assistant_id: "agent".into(),
                    input: Default::default(),
                    config: None,
                    timeout_seconds: 30,
                    assertions: vec![],
                })
                .collect(),
            dataset: None,
            min_pass_rate: rate,
            compare_with: compare.then_some(CompareWith::Serving),
            concurrency: 2,
        }
    }

    fn results(n: usize, failing: &[usize]) -> Vec<(String, Option<String>)> {
        (0..n)
            .map(|i| {
                let f = failing.contains(&i).then(|| format!("case {i} failed"));
                (format!("c{i}"), f)
            })
            .collect()
    }

    fn served(digest: &str, failed: &[&str]) -> RevisionSummary {
        RevisionSummary {
            id: "r1".into(),
            verified: Some(true),
            suite: Some(RevisionSuite {
                digest: digest.into(),
                cases: "x".into(),
                failed_cases: failed.iter().map(|s| (*s).to_owned()).collect(),
            }),
            ..Default::default()
        }
    }

    /// (suite, failing cases, serving record) → (cases, passed the suite,
    /// regressions, both fail, compared with).
    type Row<'a> = (
        VerifySuite,
        &'a [usize],
        Option<&'a RevisionSummary>,
        (&'a str, bool, &'a [&'a str], Option<u32>, Option<&'a str>),
    );

    fn rows<'a>(s: &'a RevisionSummary, other_suite: &'a RevisionSummary) -> Vec<Row<'a>> {
        vec![
            (
                suite(10, 1.0, false),
                &[],
                None,
                ("10/10", true, &[], None, None),
            ),
            (
                suite(10, 1.0, false),
                &[2, 3],
                None,
                ("8/10", false, &[], None, None),
            ),
            (
                suite(10, 0.8, false),
                &[2, 3],
                None,
                ("8/10", true, &[], None, None),
            ),
            // c3 failed on the serving revision too: it does not block.
            (
                suite(10, 0.9, true),
                &[3],
                Some(s),
                ("9/10", true, &[], Some(1), Some("Serving r1")),
            ),
            // c2 passed on the serving revision: a regression blocks.
            (
                suite(10, 0.5, true),
                &[2, 3],
                Some(s),
                ("8/10", false, &["c2"], Some(1), Some("Serving r1")),
            ),
            // The serving revision ran another suite: no regression rule.
            (
                suite(10, 0.5, true),
                &[2, 3],
                Some(other_suite),
                (
                    "8/10",
                    true,
                    &[],
                    None,
                    Some("Serving r1: it has no result"),
                ),
            ),
            (
                suite(10, 0.5, true),
                &[2],
                None,
                ("9/10", true, &[], None, Some("no verified revision")),
            ),
        ]
    }

    #[test]
    fn a_record_judges_the_rate_and_the_regressions_against_the_serving_record() {
        let s = served("d", &["c3"]);
        let other_suite = served("old", &["c3"]);
        for (suite, failing, serving, want) in rows(&s, &other_suite) {
            let r = record(&suite, "d", &results(10, failing), serving, "t");
            assert_eq!(r.cases, want.0, "{failing:?}");
            assert_eq!(r.passed_suite, want.1, "{failing:?} {r:?}");
            assert_eq!(r.regressions, want.2, "{failing:?}");
            assert_eq!(r.both_fail, want.3, "{failing:?}");
            match want.4 {
                None => assert_eq!(r.compared_with, None),
                Some(w) => assert!(
                    r.compared_with.as_deref().is_some_and(|c| c.starts_with(w)),
                    "{r:?}"
                ),
            }
            assert_eq!(r.failed_cases.len(), failing.len());
            assert_eq!(r.failures.len(), failing.len());
        }
    }

    #[test]
    fn failures_are_bounded_and_the_message_names_the_cases() {
        let failing: Vec<usize> = (0..30).collect();
        let r = record(
            &suite(40, 1.0, false),
            "d",
            &results(40, &failing),
            None,
            "t",
        );
        assert_eq!(r.failed_cases.len(), 30);
        assert_eq!(r.failures.len(), MAX_FAILURES_SHOWN);
        let m = failure_message(&r, 1.0);
        assert!(m.starts_with("10/40 cases passed (minPassRate 1)"), "{m}");
        assert!(m.contains("failing: c0, c1, c2, c3, c4 and 25 more"), "{m}");
        assert!(m.contains("c0: case 0 failed"), "{m}");
    }

    #[test]
    fn the_serving_record_is_the_newest_other_verified_revision() {
        let rev = |id: &str, verified: Option<bool>| RevisionSummary {
            id: id.into(),
            verified,
            ..Default::default()
        };
        let history = [
            rev("r4", None),
            rev("r3", Some(false)),
            rev("r2", Some(true)),
            rev("r1", Some(true)),
        ];
        assert_eq!(
            serving_record(&history, "r4").map(|r| r.id.as_str()),
            Some("r2")
        );
        assert_eq!(
            serving_record(&history, "r2").map(|r| r.id.as_str()),
            Some("r1")
        );
        assert_eq!(serving_record(&history[..2], "r4"), None);
    }
}
