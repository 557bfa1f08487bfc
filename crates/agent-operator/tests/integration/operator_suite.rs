//! Issue 55, verification suites (`spec.verify.suite`) on real agent
//! servers: two `langgraph dev` servers of the echo graph
//! (`crates/test-support/fixtures/echo-agent`), `A` as built, `B` as a
//! revision that broke the cases whose text says `shout` (its echo is
//! upper-cased). The emulator serves a revision whose `repoRef` carries
//! `broken` at `B` (`--agent-server-url-for`), every other one at `A`. Each
//! server appends every run's text to a file, so the tests count the runs
//! the agent servers made.
//!
//! - ten cases pass once: `Verified=True`, `status.verification.suite`
//!   `10/10`, the `VERIFIED` column `True (10/10)`; the operator restarted
//!   afterwards runs none of them again;
//! - a revision that breaks two cases is not verified (`SuiteFailed`,
//!   naming them), not promoted to production, and rolled back once;
//! - `compareWith: Serving`: a case both revisions fail does not block; a
//!   case the serving revision passed blocks, whatever the pass rate;
//! - a suite that cannot run is refused at admission;
//! - an operator killed during a suite leaves no case to run twice, and
//!   the cases' threads are deleted once the result is written.
//!
//! Source: docs/control-plane-api.md "Agent server".

use crate::{common, support};

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use agent_operator::api::AgentDeployment;
use serde_json::{Value, json};
use support::{Harness, condition};
use test_support::langgraph::LanggraphServer;

const TIMEOUT: Duration = Duration::from_secs(120);

/// The two agent servers and their run logs.
struct Servers {
    good: LanggraphServer,
    good_runs: PathBuf,
    broken: LanggraphServer,
    broken_runs: PathBuf,
}

/// Started on first use, shared by the tests of this module.
fn servers() -> &'static Servers {
    static SERVERS: OnceLock<Servers> = OnceLock::new();
    SERVERS.get_or_init(|| {
        let dir = test_support::repo_root().join("target/agent-servers");
        std::fs::create_dir_all(&dir).expect("the agent servers' directory");
        let good_runs = dir.join("operator_suite-good-runs.log");
        let broken_runs = dir.join("operator_suite-broken-runs.log");
        let _ = std::fs::remove_file(&good_runs);
        let _ = std::fs::remove_file(&broken_runs);
        let good = test_support::langgraph::start_with(
            "operator_suite-good",
            &[("ECHO_AGENT_RUN_LOG", good_runs.to_str().unwrap())],
        );
        let broken = test_support::langgraph::start_with(
            "operator_suite-broken",
            &[
                ("ECHO_AGENT_RUN_LOG", broken_runs.to_str().unwrap()),
                ("ECHO_AGENT_BREAKS", "shout"),
            ],
        );
        Servers {
            good,
            good_runs,
            broken,
            broken_runs,
        }
    })
}

/// Runs logged in `log` whose text starts with `tag`.
fn runs(log: &PathBuf, tag: &str) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<String>(l).ok())
        .filter(|t| t.starts_with(tag))
        .count()
}

/// A harness whose emulator serves `broken` revisions at server B.
fn harness<'e>(test: &str) -> support::HarnessBuilder<'e> {
    let s = servers();
    let route = format!("broken={}", s.broken.url);
    Harness::quick(test)
        .agent_server_url(&s.good.url)
        .emulator_flags(&["--agent-server-url-for", &route])
        .resync_seconds(2.0)
}

/// Case `i` of a suite tagged `tag`: its text is echoed back; cases 3 and
/// 7 say `shout` (server B breaks them); with `failing`, case 9 expects
/// an echo no server gives.
fn case(tag: &str, i: usize, failing: bool) -> Value {
    let text = if i == 3 || i == 7 {
        format!("{tag} case {i}: shout it")
    } else {
        format!("{tag} case {i}")
    };
    let want = if failing && i == 9 {
        "never".to_owned()
    } else {
        text.clone()
    };
    let mut assertions = vec![json!({"pointer": "/echo/messages/0/content", "value": want})];
    match i % 3 {
        0 => assertions.push(json!({"matches": format!("^{tag} case \\d+")})),
        1 => assertions.push(json!({"maxLatencySeconds": 60})),
        _ => assertions.push(json!({"contains": tag})),
    }
    json!({
        "name": format!("case-{i}"),
        "assistantId": "agent",
        "input": {"messages": [{"role": "user", "content": text}]},
        "timeoutSeconds": 60,
        "assertions": assertions,
    })
}

/// Ten cases tagged `tag` (see [`case`]) with `extra` fields of the suite.
fn suite(tag: &str, failing: bool, extra: Value) -> Value {
    let mut s = json!({"cases": (0..10).map(|i| case(tag, i, failing)).collect::<Vec<_>>()});
    for (k, v) in extra.as_object().unwrap() {
        s[k] = v.clone();
    }
    s
}

fn manifest(name: &str, repo_ref: &str, suite: &Value) -> Value {
    let mut m = support::github_deployment(name, repo_ref);
    m["spec"]["verify"] = json!({"suite": suite});
    m
}

/// `status.verification.suite` of `o` (panics without one).
fn suite_of(o: &AgentDeployment) -> agent_operator::api::suite::SuiteResult {
    o.status
        .as_ref()
        .and_then(|s| s.verification.as_ref())
        .and_then(|v| v.suite.clone())
        .expect("status.verification.suite")
}

/// The threads the suite run recorded in `o`'s status left on `server`
/// (`POST /threads/search` by the run's mark).
async fn threads_left(server: &LanggraphServer, o: &AgentDeployment) -> usize {
    let v = o
        .status
        .as_ref()
        .and_then(|s| s.verification.as_ref())
        .unwrap();
    let run = format!("{}/{}", v.revision_id, suite_of(o).digest);
    let found: Vec<Value> = reqwest::Client::new()
        .post(format!("{}/threads/search", server.url))
        .json(&json!({"metadata": {"agentserver.dev/suite-run": run}, "limit": 100}))
        .send()
        .await
        .expect("POST /threads/search")
        .json()
        .await
        .expect("a list of threads");
    found.len()
}

/// Waits until the threads of `o`'s recorded suite run are deleted.
async fn threads_pruned(server: &LanggraphServer, o: &AgentDeployment) {
    support::eventually(TIMEOUT, "the suite's threads deleted", || async {
        (threads_left(server, o).await == 0).then_some(())
    })
    .await;
}

fn verified(o: &AgentDeployment) -> Option<(String, String, String)> {
    condition(o, "Verified").map(|c| (c.status, c.reason, c.message))
}

/// Waits until `name` is Ready and its serving revision verified; returns
/// the object.
async fn ready_and_verified(h: &Harness, name: &str) -> AgentDeployment {
    support::wait_for(&h.api, name, TIMEOUT, "Ready and verified", |o| {
        (support::is_ready_now(o) && o.status.as_ref()?.serving.as_ref()?.verified)
            .then(|| o.clone())
    })
    .await
}

/// Waits until `name`'s latest revision carries `repo_ref`, DEPLOYED, and
/// its suite result is recorded; returns the object.
async fn suite_ran(h: &Harness, name: &str, repo_ref: &str) -> AgentDeployment {
    support::wait_for(&h.api, name, TIMEOUT, "the suite's result", |o| {
        let s = o.status.as_ref()?;
        let latest = s.latest_revision_id.as_deref()?;
        let entry = s.revisions.iter().find(|r| r.id == latest)?;
        let v = s.verification.as_ref()?;
        (entry.repo_ref.as_deref() == Some(repo_ref)
            && v.revision_id == latest
            && v.suite.is_some()
            && verified(o).is_some_and(|(st, _, _)| st != "Unknown"))
        .then(|| o.clone())
    })
    .await
}

#[tokio::test]
async fn ten_cases_pass_once_and_a_restarted_operator_runs_none_again() {
    test_support::skip_without!(Envtest);
    test_support::skip_without!(AgentServer);
    let s = servers();
    let h = harness("op-suite-once").without_operator().start().await;
    let resync = ["--resync-interval-seconds", "2"];
    let mut first = h.start_operator(&resync);
    let tag = format!("once-{}", uuid::Uuid::new_v4().simple());
    let name = "suite-agent";
    h.apply(manifest(name, "main", &suite(&tag, false, json!({}))))
        .await;
    let obj = ready_and_verified(&h, name).await;
    let status = obj.status.clone().unwrap();
    let v = status.verification.clone().unwrap();
    let r = v.suite.clone().expect("status.verification.suite");
    assert_eq!((r.cases.as_str(), r.passed, r.total), ("10/10", 10, 10));
    assert!(r.passed_suite && r.failed_cases.is_empty(), "{r:?}");
    assert!(r.digest.starts_with("sha256:"), "{r:?}");
    assert_eq!(v.outcome, "Verified");
    assert_eq!(
        status.serving.as_ref().unwrap().cases.as_deref(),
        Some("10/10")
    );
    let (vs, vr, vm) = verified(&obj).unwrap();
    assert_eq!((vs.as_str(), vr.as_str()), ("True", "Verified"));
    assert!(vm.contains("10/10 cases of the suite passed"), "{vm}");
    assert_eq!(runs(&s.good_runs, &tag), 10, "each case ran once");
    // Each case ran on a thread of its own, deleted once the result was
    // written.
    threads_pruned(&s.good, &obj).await;
    let metrics = first.metrics().await;
    assert_eq!(
        support::metric(
            &metrics,
            "agent_operator_verification_cases_total",
            &[("outcome", "Passed")]
        ),
        Some(10.0)
    );
    // `kubectl get agd -o wide` shows the cases in its VERIFIED column.
    let out = common::shared_env()
        .kubectl()
        .expect("kubectl is built by hack/envtest/install.sh")
        .args(["--namespace", &h.ns, "get", "agd", name, "-o", "wide"])
        .output()
        .expect("running kubectl");
    let table = String::from_utf8_lossy(&out.stdout);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert!(
        header.contains(&"VERIFIED") && !header.contains(&"CASES"),
        "{table}"
    );
    assert!(table.contains("True (10/10)"), "{table}");

    // Resyncs (every 2 s) and a restarted operator run nothing again.
    tokio::time::sleep(Duration::from_secs(5)).await;
    first.kill().await;
    let second = h.start_operator(&resync);
    support::eventually(TIMEOUT, "the restarted operator's passes", || async {
        let m = second.metrics().await;
        let passes = support::metric(
            &m,
            "agent_operator_reconciles_total",
            &[("kind", "AgentDeployment")],
        )
        .unwrap_or(0.0);
        (passes >= 3.0).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(runs(&s.good_runs, &tag), 10, "no case ran again");
    let after = h.api.get(name).await.unwrap();
    assert!(support::is_ready_now(&after));
    assert_eq!(
        after
            .status
            .unwrap()
            .verification
            .unwrap()
            .suite
            .unwrap()
            .ran_at,
        r.ran_at,
        "the recorded run is the one kept"
    );
}

/// Issue 55: an operator killed while a suite runs (two cases in flight,
/// most not started) leaves its cases' runs going on the agent server; the
/// next operator reads back the ones that ran (waiting for those still
/// running) and runs only the rest: every case runs once. As users run it:
/// cluster-wide, leader-elected, the shipped ClusterRole.
#[tokio::test]
async fn an_operator_killed_during_a_suite_leaves_no_case_to_run_twice() {
    test_support::skip_without!(Envtest);
    test_support::skip_without!(AgentServer);
    let s = servers();
    let env = common::own_env(&[]).await;
    let h = harness("op-suite-kill")
        .on(&env)
        .cluster_wide()
        .without_operator()
        .start()
        .await;
    let mut first = h.start_operator(&[]);
    let tag = format!("kill-{}", uuid::Uuid::new_v4().simple());
    let name = "suite-killed";
    let mut slow = suite(&tag, false, json!({"concurrency": 2}));
    for c in slow["cases"].as_array_mut().unwrap() {
        c["input"]["sleep"] = json!(2);
    }
    h.apply(manifest(name, "main", &slow)).await;
    support::eventually(TIMEOUT, "three cases started", || async {
        (runs(&s.good_runs, &tag) >= 3).then_some(())
    })
    .await;
    first.kill().await;
    let killed_at = runs(&s.good_runs, &tag);
    assert!(
        killed_at < 10,
        "the kill came during the suite: {killed_at}"
    );
    let _second = h.start_operator(&[]);
    let obj = ready_and_verified(&h, name).await;
    assert_eq!(suite_of(&obj).cases, "10/10");
    assert_eq!(
        runs(&s.good_runs, &tag),
        10,
        "each case ran once ({killed_at} had started at the kill)"
    );
    threads_pruned(&s.good, &obj).await;
}

#[tokio::test]
async fn a_revision_that_breaks_two_cases_is_not_verified_not_promoted_and_rolled_back_once() {
    test_support::skip_without!(Envtest);
    test_support::skip_without!(AgentServer);
    let s = servers();
    let h = harness("op-suite-rollback").start().await;
    let tag = format!("roll-{}", uuid::Uuid::new_v4().simple());
    let the_suite = suite(&tag, false, json!({"concurrency": 3}));
    let staging = |repo_ref: &str| {
        let mut m = manifest("staging", repo_ref, &the_suite);
        m["spec"]["rollback"] = json!({"onFailedVerification": true});
        m
    };
    h.apply(staging("main")).await;
    let mut production = support::github_deployment("production", "main");
    production["spec"]["promotion"] = json!({"from": {"name": "staging"}});
    h.apply(production).await;
    let prod = support::wait_for(&h.api, "production", TIMEOUT, "production Ready", |o| {
        support::is_ready_now(o).then(|| o.clone())
    })
    .await;
    let prod_id = prod.status.unwrap().deployment_id.unwrap();
    assert_eq!(runs(&s.good_runs, &tag), 10);

    h.apply(staging("broken-1")).await;
    let obj = support::wait_for(&h.api, "staging", TIMEOUT, "rolled back", |o| {
        let st = o.status.as_ref()?;
        let r = st.rollback.as_ref()?;
        (condition(o, "Ready")?.reason == "RolledBack"
            && st.serving.as_ref().is_some_and(|v| v.verified)
            && st.latest_revision_id == r.revision_id)
            .then(|| o.clone())
    })
    .await;
    let st = obj.status.clone().unwrap();
    let r = st.rollback.clone().unwrap();
    assert_eq!(r.reason, "SuiteFailed", "{r:?}");
    let broken = st
        .revisions
        .iter()
        .find(|x| x.id == r.from_revision_id)
        .expect("the broken revision in status.revisions");
    assert_eq!(broken.verified, Some(false), "{broken:?}");
    let bs = broken.suite.clone().expect("its suite result");
    assert_eq!(bs.cases, "8/10");
    assert_eq!(bs.failed_cases, ["case-3", "case-7"]);
    assert_eq!(runs(&s.broken_runs, &tag), 10, "the suite ran once on B");
    let events = support::events_about(&h.client, &h.ns, "staging").await;
    let failed: Vec<_> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("VerificationFailed"))
        .filter_map(|e| e.note.clone())
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(
        failed[0].contains("SuiteFailed")
            && failed[0].contains("8/10 cases passed")
            && failed[0].contains("case-3, case-7"),
        "{failed:?}"
    );

    // Once: the rolled-back revision stays, no further revision comes.
    let id = st.deployment_id.clone().unwrap();
    let revisions = h.revisions(&id).await.len();
    assert_eq!(revisions, 3, "main, broken-1 and the rollback");
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(h.revisions(&id).await.len(), 3, "rolled back once");
    // The redeployed revision is a new one: the suite ran on it, on A.
    assert_eq!(runs(&s.good_runs, &tag), 20);
    assert_eq!(runs(&s.broken_runs, &tag), 10);
    // Production never took the broken revision.
    let prod_revisions = h.revisions(&prod_id).await;
    assert_eq!(prod_revisions.len(), 1, "{prod_revisions:?}");
    let prod = h.api.get("production").await.unwrap().status.unwrap();
    assert_eq!(
        prod.serving.unwrap().repo_ref.as_deref(),
        Some("main"),
        "production serves what staging verified"
    );
}

#[tokio::test]
async fn compare_with_serving_lets_a_case_both_fail_and_blocks_a_regression() {
    test_support::skip_without!(Envtest);
    test_support::skip_without!(AgentServer);
    let s = servers();
    let h = harness("op-suite-compare").start().await;
    let tag = format!("cmp-{}", uuid::Uuid::new_v4().simple());
    let the_suite = suite(
        &tag,
        true,
        json!({"minPassRate": 0.7, "compareWith": "Serving"}),
    );
    let name = "compared-agent";
    h.apply(manifest(name, "main", &the_suite)).await;
    let first = suite_ran(&h, name, "main").await;
    let r1 = first.status.as_ref().unwrap();
    let s1 = suite_of(&first);
    assert_eq!(
        (s1.cases.as_str(), s1.passed_suite),
        ("9/10", true),
        "{s1:?}"
    );
    assert_eq!(s1.failed_cases, ["case-9"]);
    assert_eq!(
        s1.compared_with.as_deref(),
        Some("no verified revision to compare with")
    );
    let first_rid = r1.latest_revision_id.clone().unwrap();

    // A second revision on A fails case-9 too: both fail, not blocking.
    h.apply(manifest(name, "v2", &the_suite)).await;
    let second = suite_ran(&h, name, "v2").await;
    let s2 = suite_of(&second);
    assert_eq!(
        (s2.cases.as_str(), s2.passed_suite),
        ("9/10", true),
        "{s2:?}"
    );
    assert_eq!(s2.both_fail, Some(1));
    assert!(s2.regressions.is_empty());
    assert_eq!(
        s2.compared_with.as_deref(),
        Some(format!("Serving {first_rid}").as_str())
    );
    assert_eq!(verified(&second).unwrap().0, "True");

    // B breaks cases 3 and 7, which v2 passed: 7/10 meets 0.7, but the
    // regressions block.
    h.apply(manifest(name, "broken-2", &the_suite)).await;
    let third = suite_ran(&h, name, "broken-2").await;
    let s3 = suite_of(&third);
    assert_eq!(
        (s3.cases.as_str(), s3.passed_suite),
        ("7/10", false),
        "{s3:?}"
    );
    assert_eq!(s3.regressions, ["case-3", "case-7"]);
    assert_eq!(s3.both_fail, Some(1));
    let (vs, vr, vm) = verified(&third).unwrap();
    assert_eq!((vs.as_str(), vr.as_str()), ("False", "SuiteFailed"), "{vm}");
    assert!(
        vm.contains("regressions against the serving revision: case-3, case-7"),
        "{vm}"
    );
    assert!(!support::is_ready_now(&third));
    let ready = condition(&third, "Stalled").expect("Stalled");
    assert_eq!(ready.reason, "SuiteFailed");
    assert_eq!(runs(&s.good_runs, &tag), 20);
    assert_eq!(runs(&s.broken_runs, &tag), 10);
}

/// Issue 55: the cases kept in a ConfigMap. A suite naming one that does
/// not exist yet is `SuiteUnreadable` and runs nothing; once it exists
/// (as the shipped ServiceAccount reads it: `get` on ConfigMaps) its cases
/// run once and verify the revision; a ConfigMap whose cases break a rule
/// is refused with the rule named.
#[tokio::test]
async fn cases_kept_in_a_config_map_verify_once_it_exists() {
    test_support::skip_without!(Envtest);
    test_support::skip_without!(AgentServer);
    let s = servers();
    let h = harness("op-suite-cm").start().await;
    let tag = format!("cm-{}", uuid::Uuid::new_v4().simple());
    let name = "suite-cm";
    let the_suite = json!({"configMapRef": {"name": "echo-cases"}});
    h.apply(manifest(name, "main", &the_suite)).await;
    let unread = support::wait_for(&h.api, name, TIMEOUT, "SuiteUnreadable", |o| {
        verified(o)
            .filter(|(_, r, _)| r == "SuiteUnreadable")
            .map(|v| v.2)
    })
    .await;
    assert!(
        unread.contains(&format!("ConfigMap {}/echo-cases not found", h.ns)),
        "{unread}"
    );

    let configmaps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(h.client.clone(), &h.ns);
    let cases: Vec<Value> = (0..3).map(|i| case(&tag, i, false)).collect();
    let mut cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "echo-cases"},
        "data": {"cases.yaml": "- name: a\n  assistantId: agent\n  assertions: []\n"},
    }))
    .unwrap();
    configmaps.create(&Default::default(), &cm).await.unwrap();
    support::wait_for(&h.api, name, TIMEOUT, "the broken rule named", |o| {
        verified(o)
            .filter(|(_, _, m)| m.contains("1 to 10 assertions"))
            .map(|_| ())
    })
    .await;
    assert_eq!(runs(&s.good_runs, &tag), 0, "nothing ran");

    cm.data = Some(
        [(
            "cases.yaml".to_owned(),
            serde_json::to_string(&cases).unwrap(),
        )]
        .into(),
    );
    configmaps
        .replace("echo-cases", &Default::default(), &cm)
        .await
        .unwrap();
    let obj = ready_and_verified(&h, name).await;
    assert_eq!(suite_of(&obj).cases, "3/3");
    assert_eq!(runs(&s.good_runs, &tag), 3, "each case ran once");
}

#[tokio::test]
async fn a_suite_that_cannot_run_is_refused_at_admission() {
    test_support::skip_without!(Envtest);
    let env = common::shared_env();
    let client = env.client().await;
    let ns = common::test_namespace(&client, "op-suite-admission").await;
    let dynamic: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        client.clone(),
        &ns,
        &kube::api::ApiResource::erase::<AgentDeployment>(&()),
    );
    let one = |assertions: Value| json!({"cases": [{"name": "a", "assistantId": "agent", "assertions": assertions}]});
    let two_named_a = json!({"cases": [
        {"name": "a", "assistantId": "agent", "assertions": [{"contains": "x"}]},
        {"name": "a", "assistantId": "agent", "assertions": [{"contains": "y"}]},
    ]});
    let too_many = json!({"cases": (0..51).map(|i| json!({
        "name": format!("c{i}"), "assistantId": "agent", "assertions": [{"contains": "x"}]
    })).collect::<Vec<_>>()});
    let cases = [
        (
            "a bad expression",
            one(json!([{"matches": "(unclosed"}])),
            "not a valid regular expression",
        ),
        (
            "two checks",
            one(json!([{"contains": "x", "equals": "y"}])),
            "exactly one",
        ),
        ("no check", one(json!([{}])), "exactly one"),
        (
            "pointer without /",
            one(json!([{"pointer": "a", "value": 1}])),
            "pointer",
        ),
        ("no assertions", one(json!([])), "assertions"),
        ("a name twice", two_named_a, "Duplicate value"),
        ("51 cases", too_many, "cases"),
        (
            "cases and a ConfigMap",
            json!({"cases": one(json!([{"contains": "x"}]))["cases"], "configMapRef": {"name": "c"}}),
            "exactly one of cases, dataset and configMapRef",
        ),
        (
            "no cases",
            json!({"minPassRate": 1}),
            "exactly one of cases, dataset and configMapRef",
        ),
        (
            "a rate over 1",
            json!({"cases": one(json!([{"contains": "x"}]))["cases"], "minPassRate": 1.5}),
            "minPassRate",
        ),
    ];
    for (i, (what, suite, want)) in cases.into_iter().enumerate() {
        let name = format!("invalid-{i}");
        let raw: kube::api::DynamicObject =
            serde_json::from_value(manifest(&name, "main", &suite)).expect("a dynamic object");
        match dynamic.create(&Default::default(), &raw).await {
            Err(kube::Error::Api(e)) => {
                assert_eq!(e.code, 422, "{what}: {e:?}");
                assert!(e.message.contains(want), "{what}: {}", e.message);
            }
            other => panic!("{what}: accepted: {other:?}"),
        }
    }
    let ok = manifest(
        "valid",
        "main",
        &suite("t", false, json!({"compareWith": "Serving"})),
    );
    let raw: kube::api::DynamicObject = serde_json::from_value(ok).unwrap();
    dynamic
        .create(&Default::default(), &raw)
        .await
        .expect("a valid suite is accepted");
}

/// The guide's example (docs/SUITES.md), applied as written but for the
/// namespace: staging runs its three cases once and is verified, and a
/// production promoted from it as the guide says takes the commit staging
/// verified.
#[tokio::test]
async fn the_guide_example_verifies_staging_by_its_cases_and_promotes_it() {
    test_support::skip_without!(Envtest);
    test_support::skip_without!(AgentServer);
    let s = servers();
    let h = harness("op-suite-guide").start().await;
    let path = test_support::repo_root().join("examples/more/agent-deployment-suite.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let docs = crate::install_manifests::documents(&text);
    assert_eq!(docs.len(), 1, "staging");
    let guide_runs = || {
        ["hello", "shout: keep my case", "order 42"]
            .iter()
            .map(|t| runs(&s.good_runs, t))
            .sum::<usize>()
    };
    let before = guide_runs();
    for mut doc in docs {
        doc["metadata"]["namespace"] = json!(h.ns);
        h.apply(doc).await;
    }
    let mut production = support::github_deployment("echo-production", "main");
    production["spec"]["promotion"] =
        json!({"from": {"name": "echo-staging"}, "requireVerified": true});
    h.apply(production).await;
    let staging = support::wait_for(&h.api, "echo-staging", TIMEOUT, "staging verified", |o| {
        let serving = o.status.as_ref()?.serving.as_ref()?;
        (support::is_ready_now(o) && serving.verified).then(|| o.clone())
    })
    .await;
    let st = staging.status.unwrap();
    assert_eq!(st.serving.as_ref().unwrap().cases.as_deref(), Some("3/3"));
    let production = support::wait_for(&h.api, "echo-production", TIMEOUT, "production", |o| {
        support::is_ready_now(o).then(|| o.clone())
    })
    .await;
    let pt = production.status.unwrap();
    assert_eq!(
        pt.promoted_from.unwrap().commit_sha,
        st.serving.unwrap().commit_sha,
        "production runs the commit staging verified"
    );
    // Three cases, once (production has no suite of its own).
    assert_eq!(guide_runs() - before, 3);
}

/// Writes dataset `name` of ten examples tagged `tag` (the cases of
/// [`case`], with the echo graph's answer as reference outputs) to the
/// emulator's LangSmith API with the official `langsmith` client.
async fn upload_dataset(h: &Harness, name: &str, tag: &str) {
    let script = r#"
import json, sys
from langsmith import Client
api_url, key, ws, name, tag = sys.argv[1:6]
client = Client(api_url=api_url, api_key=key, workspace_id=ws, auto_batch_tracing=False)
d = client.create_dataset(name)
def text(i):
    return f"{tag} case {i}: shout it" if i in (3, 7) else f"{tag} case {i}"
examples = [
    {
        "inputs": {"messages": [{"role": "user", "content": text(i)}]},
        "outputs": {"echo": {"messages": [{"role": "user", "content": text(i)}]}},
        "metadata": {"name": f"case-{i}"},
    }
    for i in range(10)
]
up = client.create_examples(dataset_id=d.id, examples=examples)
print(json.dumps({"uploaded": up["count"] if isinstance(up, dict) else up.count}))
"#;
    let api_url = format!("{}/api/v1", h.emulator.base_url);
    let seen = crate::contract_datasets::run_langsmith([
        "-c",
        script,
        &api_url,
        support::API_KEY,
        support::WORKSPACE,
        name,
        tag,
    ])
    .await;
    assert_eq!(seen["uploaded"], 10, "{seen}");
}

/// LangSmith API reads (`GET` of datasets or examples) logged after `mark`.
async fn dataset_reads(h: &Harness, mark: usize) -> usize {
    h.emulator
        .requests_since(mark)
        .await
        .iter()
        .filter(|r| {
            r.route.starts_with("GET ")
                && (r.route.contains("/datasets") || r.route.contains("/examples"))
        })
        .count()
}

#[tokio::test]
async fn a_suite_read_from_a_langsmith_dataset_verifies_and_catches_a_broken_revision() {
    test_support::skip_without!(Envtest);
    test_support::skip_without!(AgentServer);
    let s = servers();
    let h = harness("op-suite-dataset").start().await;
    let tag = format!("ds-{}", uuid::Uuid::new_v4().simple());
    upload_dataset(&h, "echo-cases", &tag).await;
    let mark = h.emulator.request_mark().await;
    let suite = json!({"dataset": {"name": "echo-cases", "assistantId": "agent"}});
    let name = "dataset-agent";
    h.apply(manifest(name, "main", &suite)).await;
    let first = suite_ran(&h, name, "main").await;
    let s1 = suite_of(&first);
    assert_eq!(
        (s1.cases.as_str(), s1.passed_suite),
        ("10/10", true),
        "{s1:?}"
    );
    assert_eq!(verified(&first).unwrap().0, "True");
    assert_eq!(runs(&s.good_runs, &tag), 10);
    // The dataset and one page of its examples: two reads.
    assert_eq!(dataset_reads(&h, mark).await, 2);

    h.apply(manifest(name, "broken-1", &suite)).await;
    let second = suite_ran(&h, name, "broken-1").await;
    let s2 = suite_of(&second);
    assert_eq!(
        (s2.cases.as_str(), s2.passed_suite),
        ("8/10", false),
        "{s2:?}"
    );
    assert_eq!(s2.failed_cases, ["case-3", "case-7"]);
    assert!(
        s2.failures[0].message.contains("/echo is"),
        "the reference output compared at /echo: {:?}",
        s2.failures
    );
    assert_eq!(verified(&second).unwrap().1, "SuiteFailed");
    assert_eq!(runs(&s.broken_runs, &tag), 10);
    // Read again for the new revision only, then never on resyncs.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(dataset_reads(&h, mark).await, 4);
}
