//! The IO edge of `spec.verify.suite`: each case as one run on a thread of
//! its own (`POST /threads/{thread_id}/runs/stream` with `if_not_exists:
//! create`, stream mode `values`, its answer the data of the last
//! `values` event), at most `concurrency` at once, each taking a token of
//! the agent server's request budget first; then the results judged
//! ([`crate::plan::suite::judge`]) into the `status.verification.suite`
//! record.
//!
//! Why a thread and not a stateless run: a stateless run's thread is gone
//! when it ends, or kept under an id the client never learns, so an
//! operator restarted during a suite could not tell which cases ran. Each
//! case's thread is named by the operator ([`thread_id`]: the revision, the
//! suite's digest and the case) and marked with [`SUITE_RUN_KEY`]; runs go
//! on when the client disconnects (`on_disconnect: continue`). An attempt
//! first asks the agent server which of its threads exist ([`kept`], one
//! `POST /threads/search`): a case an earlier attempt ran is judged from
//! its thread's final state, one still running is waited for, and only
//! the others run. Once the result is written to status the threads are
//! deleted in one `POST /threads/prune` ([`prune_after_write`]). A
//! revision's suite therefore costs its cases + 2 requests. Sources:
//! docs/control-plane-api.md "Agent server" (`/runs/stream`, event names,
//! an unknown assistant is 404/422; runs kept on threads).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Map, Value, json};

use secrecy::SecretString;

use crate::agentserver::types::{Thread, ThreadSearch};
use crate::agentserver::{self, AgentServerClient, RunEvent, RunStreamRequest, StreamMode};
use crate::api::conditions::reason;
use crate::api::deployment::RevisionSummary;
use crate::api::suite::{CaseFailure, MAX_CASES, MAX_FAILURES_SHOWN, SuiteResult, VerifySuite};
use crate::plan::suite::{Answer, Case, check, judge};

use super::decide::{Limits, classify};

/// The longest a suite's run holds its pass (and its verification slot):
/// 10 minutes. A case not answered by then fails as not answered in time.
pub const SUITE_DEADLINE: Duration = Duration::from_secs(600);

/// The metadata key marking the thread of a suite's case: its value is
/// the run's key, `<revision id>/<suite digest>` ([`run_key`]).
pub const SUITE_RUN_KEY: &str = "agentserver.dev/suite-run";

/// The metadata key naming the case a thread ran.
pub const CASE_KEY: &str = "agentserver.dev/case";

/// How long an attempt waits for cases an earlier attempt left running on
/// the agent server before it asks again: 5 seconds.
pub const RUNNING_WAIT: Duration = Duration::from_secs(5);

/// The key of the run of the suite with digest `digest` on revision `rid`.
pub(super) fn run_key(rid: &str, digest: &str) -> String {
    format!("{rid}/{digest}")
}

/// The thread of case `case` in the run `run` ([`run_key`]): a UUID v5 of
/// both, so that every attempt of the run names the same thread.
pub(super) fn thread_id(run: &str, case: &str) -> String {
    let space = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_DNS, b"agentserver.dev");
    uuid::Uuid::new_v5(&space, format!("{run}\n{case}").as_bytes()).to_string()
}

/// What a suite's run came to.
pub(super) enum SuiteRun {
    /// Every case answered or failed on its own: (case, why it failed).
    Done(Vec<(String, Option<String>)>),
    /// Cases an earlier attempt started still run on the agent server:
    /// nothing is recorded, the attempt asks again after [`RUNNING_WAIT`]
    /// (and runs none of them again).
    Running,
    /// The agent server could not be asked (down, or the key refused): the
    /// `Verified=False` reason and message; nothing is recorded, the
    /// attempt is retried with backoff.
    Aborted(&'static str, String),
}

/// Where a suite runs: the agent server, its budget, and what its answers
/// must not quote.
pub(super) struct Target<'a> {
    /// The agent server's client.
    pub client: &'a AgentServerClient,
    /// The agent servers' budgets.
    pub limits: &'a Limits,
    /// The agent server's budget key (the remote deployment's id).
    pub server: &'a str,
    /// Redacted from the excerpts of the answers.
    pub secrets: &'a [SecretString],
    /// The run's key ([`run_key`]).
    pub run: String,
}

/// A case an earlier attempt of the run left on the agent server.
enum Kept {
    /// It ended: why it failed, if it did.
    Answered(Option<String>),
    /// It is still running.
    Running,
}

/// Runs `cases` on `target`: first one search for the threads earlier
/// attempts left ([`kept`]), then the cases without one, `concurrency` at
/// once, in suite order, each after a token of the agent server's budget.
pub(super) async fn run(target: &Target<'_>, cases: &[Case], concurrency: u32) -> SuiteRun {
    let mut kept = match kept(target, cases).await {
        Ok(k) => k,
        Err((r, message)) => return SuiteRun::Aborted(r, message),
    };
    let fresh: Vec<&Case> = cases
        .iter()
        .filter(|c| !kept.contains_key(&c.name))
        .collect();
    let mut ran = match run_fresh(target, &fresh, concurrency).await {
        Ok(r) => r,
        Err((r, message)) => return SuiteRun::Aborted(r, message),
    };
    let mut results = Vec::with_capacity(cases.len());
    let mut running = 0;
    for case in cases {
        match kept.remove(&case.name) {
            Some(Kept::Running) => running += 1,
            Some(Kept::Answered(f)) => results.push((case.name.clone(), f)),
            None => results.push((case.name.clone(), ran.remove(&case.name).flatten())),
        }
    }
    if running > 0 {
        tracing::info!(
            running,
            "suite: cases an earlier attempt started still run on the agent server; asking again shortly"
        );
        return SuiteRun::Running;
    }
    SuiteRun::Done(results)
}

/// The cases of `cases` an earlier attempt of the run left on the agent
/// server, by name: one `POST /threads/search` for the run's marked
/// threads (after a token of the budget). A thread that ended is judged
/// from its final state; one still running past its case's timeout
/// failed. `Err`: the search failed (the attempt stops; running a case
/// whose thread may exist could run it twice).
async fn kept(
    target: &Target<'_>,
    cases: &[Case],
) -> Result<HashMap<String, Kept>, (&'static str, String)> {
    let search = ThreadSearch {
        metadata: Some(Map::from_iter([(
            SUITE_RUN_KEY.to_owned(),
            Value::String(target.run.clone()),
        )])),
        limit: Some(u32::try_from(MAX_CASES).unwrap_or(u32::MAX)),
        select: Some(
            ["thread_id", "status", "values", "created_at", "updated_at"]
                .map(str::to_owned)
                .to_vec(),
        ),
        ..Default::default()
    };
    target.limits.pace(target.server).await;
    let threads = target
        .client
        .search_threads(&search)
        .await
        .map_err(|e| classify("POST /threads/search", &e))?;
    let now = k8s_openapi::jiff::Timestamp::now();
    Ok(cases
        .iter()
        .filter_map(|case| {
            let id = thread_id(&target.run, &case.name);
            let t = threads.iter().find(|t| t.thread_id == id)?;
            let judged = judge_kept(t, case, now)
                .map(|f| f.map(|m| crate::redact::text(&m, target.secrets)));
            Some((
                case.name.clone(),
                judged.map_or(Kept::Running, Kept::Answered),
            ))
        })
        .collect())
}

/// A kept thread of `case` at `now`: `None` it still runs; `Some(None)` it
/// passed; `Some(Some(why))` it failed.
fn judge_kept(
    t: &Thread,
    case: &Case,
    now: k8s_openapi::jiff::Timestamp,
) -> Option<Option<String>> {
    let at = |s: &Option<String>| {
        s.as_deref()
            .and_then(|s| s.parse::<k8s_openapi::jiff::Timestamp>().ok())
    };
    let (created, updated) = (at(&t.created_at), at(&t.updated_at));
    let between = |a: Option<k8s_openapi::jiff::Timestamp>, b: k8s_openapi::jiff::Timestamp| {
        a.and_then(|a| Duration::try_from(b.duration_since(a)).ok())
            .unwrap_or_default()
    };
    match t.status.as_deref() {
        Some("idle") => Some(check(
            &case.assertions,
            &Answer {
                state: t.values.as_ref(),
                latency: updated.map_or(Duration::ZERO, |u| between(created, u)),
            },
        )),
        Some("busy") if between(created, now) <= case.timeout => None,
        Some("busy") => Some(Some(format!(
            "the run did not answer within {} s",
            case.timeout.as_secs()
        ))),
        other => Some(Some(format!(
            "the run ended with its thread {}",
            other.unwrap_or("in no known state")
        ))),
    }
}

/// Runs `cases`, `concurrency` at once, each after a token of the budget;
/// a case not answered within [`SUITE_DEADLINE`] fails. The results by
/// case name; `Err`: the agent server could not be asked.
async fn run_fresh(
    target: &Target<'_>,
    cases: &[&Case],
    concurrency: u32,
) -> Result<HashMap<String, Option<String>>, (&'static str, String)> {
    let width = usize::try_from(concurrency.clamp(1, 8)).unwrap_or(1);
    // A loop, not `stream::iter(..).map(..).buffered(..)`: a closure over
    // the borrowed cases is not general enough for the pass's `Send` future.
    let deadline = tokio::time::Instant::now() + SUITE_DEADLINE;
    let mut waiting = cases.iter();
    let mut running = futures::stream::FuturesOrdered::new();
    for case in waiting.by_ref().take(width) {
        running.push_back(paced(target, case, deadline));
    }
    let mut done = HashMap::with_capacity(cases.len());
    while let Some(result) = running.next().await {
        let (name, failure) = result?;
        done.insert(name, failure);
        if let Some(case) = waiting.next() {
            running.push_back(paced(target, case, deadline));
        }
    }
    Ok(done)
}

/// One case after a token of the budget, its failure redacted; a case not
/// answered by `deadline` fails.
async fn paced(
    target: &Target<'_>,
    case: &Case,
    deadline: tokio::time::Instant,
) -> Result<(String, Option<String>), (&'static str, String)> {
    let ran = tokio::time::timeout_at(deadline, async {
        target.limits.pace(target.server).await;
        run_case(target.client, case, &target.run).await
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
        failure.map(|m| crate::redact::text(&m, target.secrets)),
    ))
}

/// One case of the run `run`, on its own thread: `Ok(None)` it passed,
/// `Ok(Some(why))` it failed; `Err`: the agent server could not be asked
/// at all (see [`SuiteRun::Aborted`]).
async fn run_case(
    client: &AgentServerClient,
    case: &Case,
    run: &str,
) -> Result<Option<String>, (&'static str, String)> {
    let req = RunStreamRequest {
        assistant_id: case.assistant_id.clone(),
        input: Some(case.input.clone()),
        config: case.config.clone(),
        stream_mode: Some(StreamMode::One("values".to_owned())),
        metadata: Some(json!({ SUITE_RUN_KEY: run, CASE_KEY: case.name })),
        // The run goes on if this operator stops: the next one reads it.
        on_disconnect: Some("continue".to_owned()),
        if_not_exists: Some("create".to_owned()),
        ..Default::default()
    };
    let thread = thread_id(run, &case.name);
    let started = Instant::now();
    let streamed = tokio::time::timeout(case.timeout, async {
        let mut stream = client.stream_thread_run(&thread, &req).await?;
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
            let (r, message) = classify("POST /threads/{thread_id}/runs/stream", &e);
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

/// After the status write that records a run, deletes its threads
/// (`threads`) in one `POST /threads/prune`, after a token of `server`'s
/// budget, as a task of its own: a failure is logged and the threads are
/// left to the agent server (the result is already recorded, so nothing
/// reads them again).
pub(super) fn prune_after_write(
    shared: std::sync::Arc<crate::controller::context::Shared>,
    client: AgentServerClient,
    server: String,
    threads: Vec<String>,
) {
    tokio::spawn(async move {
        shared.verifier.pace(&server).await;
        match client.prune_threads(&threads).await {
            Ok(n) => tracing::debug!(pruned = n, "suite: the run's threads were deleted"),
            Err(e) => tracing::warn!(
                error = %e,
                threads = threads.len(),
                "suite: the run's threads could not be deleted; they stay on the agent server"
            ),
        }
    });
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
    use serde_json::json;

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
            config_map_ref: None,
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
    fn each_case_of_a_run_has_a_thread_of_its_own_every_attempt_names_alike() {
        let run = run_key("r1", "d");
        assert_eq!(run, "r1/d");
        let a = thread_id(&run, "greets");
        assert_eq!(a, thread_id(&run, "greets"), "the same on every attempt");
        assert!(uuid::Uuid::parse_str(&a).is_ok(), "{a}");
        assert_ne!(a, thread_id(&run, "other"));
        assert_ne!(a, thread_id(&run_key("r2", "d"), "greets"));
        assert_ne!(a, thread_id(&run_key("r1", "e"), "greets"));
    }

    #[test]
    fn a_kept_thread_is_judged_from_its_final_state_or_waited_for() {
        use crate::plan::suite::Assertion;
        let case = Case {
            name: "c".into(),
            assistant_id: "agent".into(),
            input: json!({}),
            config: None,
            timeout: Duration::from_secs(30),
            assertions: vec![
                Assertion::Pointer("/echo".into(), json!("hi")),
                Assertion::MaxLatency(Duration::from_secs(5)),
            ],
        };
        let now: k8s_openapi::jiff::Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        let thread = |status: &str, created: &str, updated: &str, echo: &str| Thread {
            thread_id: "t".into(),
            status: Some(status.into()),
            created_at: Some(created.into()),
            updated_at: Some(updated.into()),
            values: Some(json!({ "echo": echo })),
            ..Default::default()
        };
        let t0 = "2026-01-01T00:00:50Z";
        let rows: [(Thread, Option<Option<&str>>); 6] = [
            (thread("idle", t0, "2026-01-01T00:00:51Z", "hi"), Some(None)),
            (
                thread("idle", t0, "2026-01-01T00:00:51Z", "HI"),
                Some(Some("/echo")),
            ),
            // Its latency is the thread's life: 9 s, over the 5 s budget.
            (
                thread("idle", t0, "2026-01-01T00:00:59Z", "hi"),
                Some(Some("answered in 9.0 s, over 5.0 s")),
            ),
            (thread("busy", t0, t0, ""), None),
            (
                thread("busy", "2026-01-01T00:00:00Z", t0, ""),
                Some(Some("did not answer within 30 s")),
            ),
            (thread("error", t0, t0, ""), Some(Some("thread error"))),
        ];
        for (t, want) in rows {
            let got = judge_kept(&t, &case, now);
            match (&got, want) {
                (None, None) | (Some(None), Some(None)) => {}
                (Some(Some(m)), Some(Some(w))) => assert!(m.contains(w), "{t:?}: {m}"),
                _ => panic!("{t:?}: {got:?}, want {want:?}"),
            }
        }
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
