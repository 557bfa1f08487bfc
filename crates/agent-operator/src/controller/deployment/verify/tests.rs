//! Tables of the pure decisions of `spec.verify`.

use std::time::Duration;

use super::decide::*;
use crate::agentserver;
use crate::agentserver::RunEvent;
use crate::api::conditions::find;
use crate::api::conditions::{FALSE, TRUE, UNKNOWN, VERIFIED, reason};
use crate::api::deployment::{
    AgentDeployment, AgentDeploymentStatus, VerificationStatus, VerifyExpect,
};
use crate::controller::report::MAX_MESSAGE_BYTES;
use crate::controller::report::bounded;
use crate::plan::status::Outcome;

const S: fn(u64) -> Duration = Duration::from_secs;

fn record(rid: &str, outcome: &str, failures: u32) -> VerificationStatus {
    VerificationStatus {
        revision_id: rid.into(),
        observed_generation: Some(1),
        outcome: outcome.into(),
        last_run_time: "2026-01-01T00:00:00Z".into(),
        failures,
        ..Default::default()
    }
}

fn known<'a>(last: Option<&'a VerificationStatus>, verified: Option<&'a str>) -> VerifyKnown<'a> {
    VerifyKnown {
        revision_id: "r2",
        generation: Some(1),
        last,
        verified_revision_id: verified,
        since_last_run: Some(S(10)),
        interval: S(300),
        backoff: S(30),
        cap: S(300),
    }
}

/// Checks each `(what, known, want)` of a table of [`verify_step`].
fn check_steps(cases: Vec<(&str, VerifyKnown<'_>, VerifyStep)>) {
    for (what, k, want) in cases {
        assert_eq!(verify_step(&k), want, "{what}");
    }
}

#[test]
fn verify_step_table() {
    let verified = record("r2", reason::VERIFIED, 0);
    let older = record("r1", reason::VERIFIED, 0);
    let other_generation = VerificationStatus {
        observed_generation: Some(0),
        ..verified.clone()
    };
    check_steps(vec![
        ("never verified: now", known(None, None), VerifyStep::Verify),
        (
            "a new revision after a verified one: now",
            known(Some(&older), Some("r1")),
            VerifyStep::Verify,
        ),
        (
            "verified 10 s ago: wait for the slow period",
            known(Some(&verified), Some("r2")),
            VerifyStep::Wait(S(290)),
        ),
        (
            "verified a period ago: again",
            VerifyKnown {
                since_last_run: Some(S(300)),
                ..known(Some(&verified), Some("r2"))
            },
            VerifyStep::Verify,
        ),
        (
            "the spec changed since: now",
            known(Some(&other_generation), Some("r2")),
            VerifyStep::Verify,
        ),
        (
            "an unreadable last run time: now",
            VerifyKnown {
                since_last_run: None,
                ..known(Some(&verified), Some("r2"))
            },
            VerifyStep::Verify,
        ),
    ]);
}

#[test]
fn verify_step_table_of_failed_runs() {
    let down_once = record("r2", reason::AGENT_SERVER_UNREACHABLE, 1);
    let down_thrice = record("r2", reason::AGENT_SERVER_UNREACHABLE, 3);
    let suite_failed = record("r2", reason::SUITE_FAILED, 1);
    check_steps(vec![
        (
            "failed once 10 s ago: retry after 30 s",
            known(Some(&down_once), None),
            VerifyStep::Wait(S(20)),
        ),
        (
            "failed once 30 s ago: retry now",
            VerifyKnown {
                since_last_run: Some(S(30)),
                ..known(Some(&down_once), None)
            },
            VerifyStep::Verify,
        ),
        (
            "failed three times: 120 s",
            known(Some(&down_thrice), None),
            VerifyStep::Wait(S(110)),
        ),
        (
            "a clock that went back: wait the whole period",
            VerifyKnown {
                since_last_run: Some(S(0)),
                ..known(Some(&down_once), None)
            },
            VerifyStep::Wait(S(30)),
        ),
        (
            "a suite failed 10 s ago: settled, the slow period, not the backoff",
            known(Some(&suite_failed), None),
            VerifyStep::Wait(S(290)),
        ),
        (
            "a suite failed 300 s ago: the slow check now",
            VerifyKnown {
                since_last_run: Some(S(300)),
                ..known(Some(&suite_failed), None)
            },
            VerifyStep::Verify,
        ),
    ]);
}

#[test]
fn retry_backoff_doubles_to_the_resync_interval() {
    assert_eq!(retry_backoff(1, S(30), S(300)), S(30));
    assert_eq!(retry_backoff(2, S(30), S(300)), S(60));
    assert_eq!(retry_backoff(4, S(30), S(300)), S(240));
    assert_eq!(retry_backoff(5, S(30), S(300)), S(300));
    assert_eq!(retry_backoff(90, S(30), S(300)), S(300));
    assert_eq!(retry_backoff(0, S(30), S(300)), S(30));
    assert_eq!(retry_backoff(3, S(30), S(10)), S(10), "cap below base");
}

fn status(verified: Option<&str>, last: Option<VerificationStatus>) -> AgentDeploymentStatus {
    AgentDeploymentStatus {
        latest_revision_id: Some("r2".into()),
        revision_status: Some("DEPLOYED".into()),
        verified_revision_id: verified.map(str::to_owned),
        verification: last.map(Box::new),
        ..Default::default()
    }
}

fn deployed() -> Outcome {
    Outcome::Ready {
        reason: reason::REVISION_DEPLOYED,
        message: "revision r2 is DEPLOYED".into(),
    }
}

#[test]
fn ready_requires_verified() {
    let mut failed = record("r2", reason::ASSISTANT_NOT_FOUND, 1);
    failed.last_error = Some("assistant \"nope\" not found".into());
    let down = record("r2", reason::AGENT_SERVER_UNREACHABLE, 2);
    let cases: Vec<(&str, AgentDeploymentStatus, &str, &str, &str)> = vec![
        (
            "verified",
            status(Some("r2"), Some(record("r2", reason::VERIFIED, 0))),
            "Ready",
            reason::REVISION_DEPLOYED,
            TRUE,
        ),
        (
            "not yet",
            status(None, None),
            "Progressing",
            reason::VERIFYING,
            UNKNOWN,
        ),
        (
            "an older revision was verified",
            status(Some("r1"), Some(record("r1", reason::VERIFIED, 0))),
            "Progressing",
            reason::VERIFYING,
            UNKNOWN,
        ),
        (
            "unknown assistant: needs a human",
            status(None, Some(failed)),
            "Stalled",
            reason::ASSISTANT_NOT_FOUND,
            FALSE,
        ),
        (
            "server down: retried",
            status(None, Some(down)),
            "Progressing",
            reason::AGENT_SERVER_UNREACHABLE,
            FALSE,
        ),
    ];
    for (what, s, kind, want_reason, verified) in cases {
        let o = outcome("r2", deployed(), &s);
        let got_kind = match o {
            Outcome::Ready { .. } => "Ready",
            Outcome::Progressing { .. } => "Progressing",
            Outcome::Stalled { .. } => "Stalled",
            Outcome::Paused { .. } => "Paused",
        };
        assert_eq!((got_kind, o.reason()), (kind, want_reason), "{what}");
        let c = verified_condition(&[], &s, Some(1));
        assert_eq!(c.status, verified, "{what}: {c:?}");
        assert_eq!(c.type_, VERIFIED);
    }
    let mut failed = record("r2", reason::ASSISTANT_NOT_FOUND, 1);
    failed.last_error = Some("assistant \"nope\" not found".into());
    let o = outcome("r2", deployed(), &status(None, Some(failed)));
    assert!(o.message().contains("\"nope\""), "{o:?}");
}

#[test]
fn the_condition_waits_for_a_deployed_revision_and_keeps_its_transition_time() {
    let mut building = status(Some("r1"), Some(record("r1", reason::VERIFIED, 0)));
    building.revision_status = Some("BUILDING".into());
    let c = verified_condition(&[], &building, Some(1));
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        (UNKNOWN, reason::VERIFICATION_PENDING)
    );
    let ok = status(Some("r2"), Some(record("r2", reason::VERIFIED, 0)));
    let first = verified_condition(&[], &ok, Some(1));
    std::thread::sleep(Duration::from_millis(5));
    let again = verified_condition(std::slice::from_ref(&first), &ok, Some(1));
    assert_eq!(first.last_transition_time, again.last_transition_time);
    let mut obj = AgentDeployment::new(
        "a",
        serde_json::from_value(serde_json::json!({
            "source": "external_docker",
            "sourceRevisionConfig": {"imageUri": "docker.io/acme/agent:1"},
            "verify": {"assistants": {"graphId": "agent"}}
        }))
        .unwrap(),
    );
    let mut s = ok.clone();
    set_condition(&mut s, &[], &obj);
    assert_eq!(find(&s.conditions, VERIFIED).unwrap().status, TRUE);
    obj.spec.verify = None;
    set_condition(&mut s, &[], &obj);
    assert!(
        find(&s.conditions, VERIFIED).is_none(),
        "no verify, no condition"
    );
}

fn expect(event: &str, contains: Option<&str>) -> Option<VerifyExpect> {
    Some(VerifyExpect {
        event: event.into(),
        contains: contains.map(str::to_owned),
    })
}

/// (what, expectation, events, broke off, verdict).
type JudgeCase = (
    &'static str,
    Option<VerifyExpect>,
    Vec<RunEvent>,
    Option<String>,
    Result<u32, &'static str>,
);

/// The events of a run: its metadata, an update with the text
/// "hello verify", and an error.
fn run_events() -> (RunEvent, RunEvent, RunEvent) {
    let meta = RunEvent::Metadata {
        run_id: "x".into(),
        attempt: Some(1),
    };
    let update = RunEvent::Updates(serde_json::json!({"echo": {"echo": "hello verify"}}));
    let error = RunEvent::Error {
        error: "ValueError".into(),
        message: "boom".into(),
    };
    (meta, update, error)
}

/// Checks each case of a table of [`RunJudge`].
fn judge_all(cases: Vec<JudgeCase>) {
    for (what, e, events, broke_off, want) in cases {
        let mut judge = RunJudge::new(e);
        for ev in &events {
            judge.see(ev);
        }
        let got = judge.verdict(broke_off).map_err(|(r, _, _)| r);
        assert_eq!(got, want, "{what}");
    }
}

#[test]
fn run_judge_table() {
    let (meta, update, _) = run_events();
    judge_all(vec![
        (
            "no expectation, a clean run",
            None,
            vec![meta.clone(), update.clone()],
            None,
            Ok(2),
        ),
        (
            "the event, the text",
            expect("updates", Some("hello verify")),
            vec![meta.clone(), update.clone()],
            None,
            Ok(2),
        ),
        (
            "the event, any data",
            expect("updates", None),
            vec![meta.clone(), update.clone()],
            None,
            Ok(2),
        ),
        (
            "the event without the text",
            expect("updates", Some("goodbye")),
            vec![meta.clone(), update.clone()],
            None,
            Err(reason::EXPECTATION_NOT_MET),
        ),
    ]);
}

#[test]
fn run_judge_table_of_failed_runs() {
    let (meta, update, error) = run_events();
    judge_all(vec![
        (
            "another event",
            expect("values", None),
            vec![meta.clone(), update.clone()],
            None,
            Err(reason::EXPECTATION_NOT_MET),
        ),
        (
            "an error event",
            expect("updates", None),
            vec![meta.clone(), update.clone(), error],
            None,
            Err(reason::RUN_FAILED),
        ),
        (
            "a stream that broke off",
            expect("updates", None),
            vec![meta.clone(), update],
            Some("reset".into()),
            Err(reason::RUN_FAILED),
        ),
        (
            "no event at all",
            None,
            vec![],
            None,
            Err(reason::RUN_FAILED),
        ),
    ]);
}

#[test]
fn agent_server_errors_map_to_reasons() {
    use agentserver::Error as E;
    let cases = [
        (
            E::Transport("connection refused".into()),
            reason::AGENT_SERVER_UNREACHABLE,
        ),
        (E::Timeout(S(5)), reason::AGENT_SERVER_UNREACHABLE),
        (
            E::Unavailable {
                status: 503,
                detail: "no active revision".into(),
            },
            reason::AGENT_SERVER_UNREACHABLE,
        ),
        (
            E::Unauthorized {
                status: 401,
                detail: "Invalid API key.".into(),
            },
            reason::AGENT_SERVER_UNAUTHORIZED,
        ),
        (
            E::AssistantNotFound {
                assistant_id: "nope".into(),
                status: 404,
                detail: "Assistant not found".into(),
            },
            reason::ASSISTANT_NOT_FOUND,
        ),
        (
            E::Rejected {
                status: 422,
                detail: "bad input".into(),
            },
            reason::RUN_FAILED,
        ),
    ];
    for (e, want) in cases {
        let (r, message) = classify("POST /runs/stream", &e);
        assert_eq!(r, want, "{e}");
        assert!(message.starts_with("POST /runs/stream: "), "{message}");
    }
}

#[test]
fn messages_are_bounded() {
    let long = "é".repeat(1000);
    let cut = bounded(long);
    assert!(cut.len() <= MAX_MESSAGE_BYTES + '…'.len_utf8());
    assert_eq!(bounded("short".into()), "short");
}

#[test]
fn the_example_decodes() {
    let obj: AgentDeployment = yaml_serde::from_str(include_str!(
        "../../../../../../examples/agent-deployment-verified.yaml"
    ))
    .expect("examples/agent-deployment-verified.yaml is an AgentDeployment");
    let verify = obj.spec.verify.expect("spec.verify");
    let run = verify.run.expect("spec.verify.run");
    assert_eq!(
        run.stream_mode,
        crate::api::deployment::VerifyStreamMode::Updates
    );
    assert_eq!(verify.assistants.map(|a| a.min_count), Some(1));
    assert!(run.input.contains_key("messages"));
}

#[test]
fn the_control_plane_key_goes_only_to_a_url_the_control_plane_chose() {
    let spec = |custom_url: Option<&str>| -> crate::api::AgentDeploymentSpec {
        let mut v = serde_json::json!({
            "source": "external_docker",
            "sourceRevisionConfig": {"imageUri": "docker.io/acme/agent:1"}
        });
        if let Some(u) = custom_url {
            v["sourceConfig"] = serde_json::json!({"customUrl": u});
        }
        serde_json::from_value(v).unwrap()
    };
    assert!(control_plane_key_allowed(&spec(None)), "the service's URL");
    assert!(control_plane_key_allowed(&spec(Some(" "))));
    assert!(
        !control_plane_key_allowed(&spec(Some("https://agents.example.com"))),
        "a URL from the spec"
    );
}
