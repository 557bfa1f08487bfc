//! AgentCron against the emulator's built-in agent server (issue 32 item
//! 2): a cron becomes Ready with its `cronId`; a spec change, `suspend`
//! and a passed `endTime` are one PATCH each (`enabled: false` for the
//! last two, `end_time` never sent); deletion is one DELETE, `Orphan`
//! leaves the cron; a cron that landed with the object's UID tag before
//! the operator knew its id is adopted by the search, never created twice;
//! a schedule the server refuses (422) is `Stalled` once and not sent
//! again until the spec changes; admission refuses what cannot work. The
//! requests are counted in the emulator's request log, and the harness's
//! budget guard holds. On the real `langgraph dev`: a `* * * * *` cron
//! really runs within two minutes (shown in `status.lastRun` by the next
//! drift check), `suspend` and a passed `endTime` disable it (`end_time`
//! never sent), and it is deleted with the resource.

use crate::support;

use std::time::{Duration, Instant};

use agent_operator::api::cron::UID_METADATA_KEY;
use agent_operator::api::{AgentCron, AgentDeployment};
use agent_server_wire::Cron;
use kube::Api;
use kube::api::DeleteParams;
use serde_json::{Value, json};
use support::{Harness, github_deployment};

const TIMEOUT: Duration = Duration::from_secs(90);

/// Polls `name` until `check` gives a value, for [`TIMEOUT`].
async fn wait_cron<T>(
    api: &Api<AgentCron>,
    name: &str,
    what: &str,
    check: impl Fn(Option<&AgentCron>) -> Option<T>,
) -> T {
    support::wait_object(api, name, TIMEOUT, what, check).await
}

/// `(cronId, Ready reason)` once Ready=True at the current generation.
fn ready(o: Option<&AgentCron>) -> Option<(String, String)> {
    let o = o?;
    let s = o.status.as_ref()?;
    if s.observed_generation != o.metadata.generation {
        return None;
    }
    let c = s
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")?;
    Some((s.cron_id.clone()?, c.reason.clone()))
}

/// Requests of the cron routes, as (route, status).
async fn cron_requests(h: &Harness) -> Vec<(String, String)> {
    let log = h.emulator.request_log().await;
    log.entries
        .iter()
        .filter(|r| r.route.contains("/runs/crons"))
        .map(|r| (r.route.clone(), r.status.clone()))
        .collect()
}

const CREATE: &str = "POST /agents/{deployment_id}/runs/crons";
const PATCH: &str = "PATCH /agents/{deployment_id}/runs/crons/{cron_id}";
const DELETE: &str = "DELETE /agents/{deployment_id}/runs/crons/{cron_id}";

/// Requests of exactly `route` whose status starts with `status`.
fn exactly(log: &[(String, String)], route: &str, status: &str) -> usize {
    log.iter()
        .filter(|(r, s)| r == route && s.starts_with(status))
        .count()
}

/// The crons on the agent server at `url` carrying `uid`'s tag (the test's
/// own search, through the same route).
pub(crate) async fn tagged(url: &str, uid: &str) -> Vec<Cron> {
    reqwest::Client::new()
        .post(format!("{}/runs/crons/search", url.trim_end_matches('/')))
        .header("X-Api-Key", support::API_KEY)
        .json(&json!({"metadata": {UID_METADATA_KEY: uid}}))
        .send()
        .await
        .expect("searching crons")
        .json()
        .await
        .expect("a list of crons")
}

fn url_of(d: &AgentDeployment) -> String {
    d.status
        .as_ref()
        .and_then(|s| s.url.clone())
        .expect("a URL")
}

fn cron(name: &str, spec: Value) -> Value {
    let mut s = json!({"deploymentRef": {"name": "agent"}, "schedule": "*/5 * * * *"});
    s.as_object_mut()
        .unwrap()
        .extend(spec.as_object().unwrap().clone());
    json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentCron",
        "metadata": {"name": name}, "spec": s})
}

#[tokio::test]
async fn a_cron_is_created_once_patched_once_per_change_suspended_ended_and_deleted() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-cron").start().await;
    h.apply(github_deployment("agent", "main")).await;
    let dep = h.wait_ready("agent", TIMEOUT).await;
    let url = url_of(&dep);
    let api: Api<AgentCron> = Api::namespaced(h.client.clone(), &h.ns);
    let base = json!({"graphId": "agent", "input": {"messages": [{"role": "user", "content": "hi"}]},
        "metadata": {"team": "support"}});
    let with = |extra: Value| {
        let mut s = base.clone();
        s.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        cron("nightly", s)
    };
    support::apply_json(&api, "nightly", with(json!({}))).await;
    let (id, reason) = wait_cron(&api, "nightly", "Ready", ready).await;
    assert_eq!(reason, "CronReady");
    let uid = api.get("nightly").await.unwrap().metadata.uid.unwrap();
    let on_server = tagged(&url, &uid).await;
    assert_eq!(on_server.len(), 1, "{on_server:?}");
    assert_eq!(on_server[0].cron_id, id);
    assert_eq!(on_server[0].metadata["team"], "support");
    assert!(on_server[0].enabled);
    assert_eq!(on_server[0].end_time, None);
    let log = cron_requests(&h).await;
    assert_eq!(exactly(&log, CREATE, "2"), 1, "one create: {log:?}");
    assert_eq!(exactly(&log, PATCH, "2"), 0, "no patch: {log:?}");
    eprintln!(
        "cron requests for one create (search + POST): {}",
        log.len()
    );

    // A spec change: one PATCH.
    support::apply_json(&api, "nightly", with(json!({"schedule": "0 3 * * *"}))).await;
    wait_cron(&api, "nightly", "the new schedule applied", |o| {
        ready(o).filter(|_| {
            o.and_then(|o| o.status.as_ref())
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
                .is_some_and(|c| c.message.contains("0 3 * * *"))
        })
    })
    .await;
    let log = cron_requests(&h).await;
    assert_eq!(exactly(&log, PATCH, "2"), 1, "exactly one PATCH: {log:?}");
    assert_eq!(tagged(&url, &uid).await[0].schedule, "0 3 * * *");

    // suspend: enabled false, one more PATCH.
    support::apply_json(
        &api,
        "nightly",
        with(json!({"schedule": "0 3 * * *", "suspend": true})),
    )
    .await;
    wait_cron(&api, "nightly", "CronSuspended", |o| {
        ready(o).filter(|(_, r)| r == "CronSuspended")
    })
    .await;
    assert!(!tagged(&url, &uid).await[0].enabled);
    let log = cron_requests(&h).await;
    assert_eq!(
        exactly(&log, PATCH, "2"),
        2,
        "one PATCH for suspend: {log:?}"
    );

    // Resumed: enabled again, one more PATCH.
    support::apply_json(&api, "nightly", with(json!({"schedule": "0 3 * * *"}))).await;
    wait_cron(&api, "nightly", "CronReady", |o| {
        ready(o).filter(|(_, r)| r == "CronReady")
    })
    .await;
    assert!(tagged(&url, &uid).await[0].enabled);

    // endTime passed: the operator disables it (end_time never sent).
    support::apply_json(
        &api,
        "nightly",
        with(json!({"schedule": "0 3 * * *", "endTime": "2026-01-01T00:00:00Z"})),
    )
    .await;
    wait_cron(&api, "nightly", "CronCompleted", |o| {
        ready(o).filter(|(_, r)| r == "CronCompleted")
    })
    .await;
    let c = &tagged(&url, &uid).await[0];
    assert!(!c.enabled, "{c:?}");
    assert_eq!(c.end_time, None, "end_time is never sent: {c:?}");
    let log = cron_requests(&h).await;
    assert_eq!(
        exactly(&log, PATCH, "2"),
        4,
        "one PATCH each to resume and for endTime: {log:?}"
    );
    assert_eq!(exactly(&log, CREATE, "2"), 1, "still one create: {log:?}");

    api.delete("nightly", &DeleteParams::default())
        .await
        .expect("deleting");
    wait_cron(&api, "nightly", "gone", |o| o.is_none().then_some(())).await;
    assert!(tagged(&url, &uid).await.is_empty(), "the cron is deleted");
    let log = cron_requests(&h).await;
    assert_eq!(exactly(&log, DELETE, "2"), 1, "one DELETE: {log:?}");
}

#[tokio::test]
async fn a_cron_that_landed_before_its_id_was_known_is_adopted_not_created_again() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-cron-adopt").start().await;
    h.apply(github_deployment("agent", "main")).await;
    let dep = h.wait_ready("agent", TIMEOUT).await;
    let url = url_of(&dep);
    let api: Api<AgentCron> = Api::namespaced(h.client.clone(), &h.ns);
    // The cron waits for an AgentAssistant that does not exist yet, so the
    // test can land a cron with its UID tag first: what a create whose
    // answer was lost (a crash after the POST) leaves behind.
    support::apply_json(
        &api,
        "hourly",
        cron("hourly", json!({"assistantRef": {"name": "helper"}})),
    )
    .await;
    let uid = wait_cron(&api, "hourly", "WaitingForAssistant", |o| {
        let o = o?;
        let s = o.status.as_ref()?;
        s.conditions
            .iter()
            .any(|c| c.reason == "WaitingForAssistant")
            .then(|| o.metadata.uid.clone())?
    })
    .await;
    assert!(
        cron_requests(&h).await.is_empty(),
        "no request while waiting"
    );
    let landed: Cron = reqwest::Client::new()
        .post(format!("{}/runs/crons", url.trim_end_matches('/')))
        .header("X-Api-Key", support::API_KEY)
        .json(&json!({"assistant_id": "agent", "schedule": "*/5 * * * *",
            "metadata": {UID_METADATA_KEY: uid}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .expect("the landed cron");
    let assistants: Api<agent_operator::api::AgentAssistant> =
        Api::namespaced(h.client.clone(), &h.ns);
    support::apply_json(
        &assistants,
        "helper",
        json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentAssistant",
            "metadata": {"name": "helper"},
            "spec": {"deploymentRef": {"name": "agent"}, "graphId": "agent"}}),
    )
    .await;
    let (id, _) = wait_cron(&api, "hourly", "Ready", ready).await;
    assert_eq!(id, landed.cron_id, "the landed cron is adopted");
    let on_server = tagged(&url, &uid).await;
    assert_eq!(on_server.len(), 1, "0 duplicates: {on_server:?}");
    let log = cron_requests(&h).await;
    assert_eq!(
        exactly(&log, CREATE, "2"),
        1,
        "only the test's create: {log:?}"
    );
    assert_eq!(
        exactly(&log, PATCH, "2"),
        1,
        "adopted by one PATCH: {log:?}"
    );
}

#[tokio::test]
async fn a_refused_schedule_is_stalled_once_and_orphan_leaves_the_cron() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-cron-refused")
        .resync_seconds(1.0)
        .start()
        .await;
    h.apply(github_deployment("agent", "main")).await;
    let dep = h.wait_ready("agent", TIMEOUT).await;
    let url = url_of(&dep);
    let api: Api<AgentCron> = Api::namespaced(h.client.clone(), &h.ns);
    // Five fields (admission lets it in), but minute 61: the server's 422.
    support::apply_json(
        &api,
        "bad",
        cron(
            "bad",
            json!({"graphId": "agent", "schedule": "61 * * * *",
            "deletionPolicy": "Orphan"}),
        ),
    )
    .await;
    let message = wait_cron(&api, "bad", "Stalled CronRejected", |o| {
        let s = o?.status.as_ref()?;
        s.conditions
            .iter()
            .find(|c| c.type_ == "Stalled" && c.status == "True" && c.reason == "CronRejected")
            .map(|c| c.message.clone())
    })
    .await;
    assert!(message.contains("Invalid cron schedule"), "{message}");
    // Several resync passes later: still one refused create.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let log = cron_requests(&h).await;
    assert_eq!(exactly(&log, CREATE, "422"), 1, "not retried: {log:?}");
    assert_eq!(exactly(&log, CREATE, "2"), 0, "{log:?}");

    // The spec changes: created.
    support::apply_json(
        &api,
        "bad",
        cron(
            "bad",
            json!({"graphId": "agent", "schedule": "1 * * * *",
            "deletionPolicy": "Orphan"}),
        ),
    )
    .await;
    let (id, _) = wait_cron(&api, "bad", "Ready", ready).await;
    let uid = api.get("bad").await.unwrap().metadata.uid.unwrap();

    // The last run is read only by the passes that change nothing (the
    // drift checks of the 1 s resync), one read each: never by the pass
    // that created the cron.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let log = h.emulator.request_log().await;
    let routes: Vec<&str> = log.entries.iter().map(|r| r.route.as_str()).collect();
    let n = |route: &str| routes.iter().filter(|r| **r == route).count();
    let reads = n("POST /agents/{deployment_id}/threads/search");
    let searches = n("POST /agents/{deployment_id}/runs/crons/search");
    let creates = n(CREATE);
    assert!(reads >= 1, "the drift checks read the last run: {routes:?}");
    assert!(
        reads <= searches - creates,
        "one read per pass that changed nothing: {reads} reads, {searches} passes, {creates} creates"
    );
    let last_create = routes.iter().rposition(|r| *r == CREATE).unwrap();
    assert_ne!(
        routes.get(last_create + 1),
        Some(&"POST /agents/{deployment_id}/threads/search"),
        "not in the pass that created: {routes:?}"
    );
    assert_eq!(
        api.get("bad").await.unwrap().status.unwrap().last_run,
        None,
        "the emulator's crons never run"
    );

    // Orphan: the resource goes, the cron stays.
    api.delete("bad", &DeleteParams::default())
        .await
        .expect("deleting");
    wait_cron(&api, "bad", "gone", |o| o.is_none().then_some(())).await;
    let left = tagged(&url, &uid).await;
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].cron_id, id);
    let log = cron_requests(&h).await;
    assert_eq!(exactly(&log, DELETE, ""), 0, "no DELETE: {log:?}");
}

#[tokio::test]
async fn admission_refuses_what_the_agent_server_or_the_operator_cannot_take() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-cron-admission")
        .without_operator()
        .start()
        .await;
    let api: Api<AgentCron> = Api::namespaced(h.client.clone(), &h.ns);
    let pp = kube::api::PatchParams::apply("tests").force();
    let refused = |spec: Value, why: &'static str| {
        let api = api.clone();
        let pp = pp.clone();
        async move {
            let r = api
                .patch("c", &pp, &kube::api::Patch::Apply(&cron("c", spec.clone())))
                .await;
            assert!(r.is_err(), "{why}: {spec} was accepted");
            r.unwrap_err().to_string()
        }
    };
    let both = refused(
        json!({"graphId": "agent", "assistantRef": {"name": "a"}}),
        "both targets",
    )
    .await;
    assert!(
        both.contains("exactly one of assistantRef and graphId"),
        "{both}"
    );
    refused(json!({}), "no target").await;
    refused(
        json!({"graphId": "agent", "schedule": "* * * *"}),
        "four fields",
    )
    .await;
    refused(json!({"graphId": "agent", "schedule": "@daily"}), "a macro").await;
    refused(
        json!({"graphId": "agent", "timezone": "Europe Paris"}),
        "a bad zone",
    )
    .await;
    refused(
        json!({"graphId": "agent", "webhook": "http://hooks.example.com/x"}),
        "a plain-http webhook",
    )
    .await;
    refused(
        json!({"graphId": "agent", "endTime": "tomorrow"}),
        "not a time",
    )
    .await;

    support::apply_json(&api, "c", cron("c", json!({"graphId": "agent"}))).await;
    let moved = refused(json!({"graphId": "other"}), "another graph").await;
    assert!(moved.contains("cannot be changed"), "{moved}");
    refused(
        json!({"assistantRef": {"name": "a"}}),
        "from a graph to an assistant",
    )
    .await;
    let mut other_dep = cron("c", json!({"graphId": "agent"}));
    other_dep["spec"]["deploymentRef"]["name"] = json!("elsewhere");
    assert!(
        api.patch("c", &pp, &kube::api::Patch::Apply(&other_dep))
            .await
            .is_err(),
        "deploymentRef cannot be changed"
    );
}

/// The threads of the real agent server at `url` whose metadata carries
/// `uid`'s tag (each run of a stateless cron is one; kept with
/// `onRunCompleted: Keep`).
async fn runs_of(url: &str, uid: &str) -> Vec<Value> {
    reqwest::Client::new()
        .post(format!("{url}/threads/search"))
        .json(&json!({"metadata": {UID_METADATA_KEY: uid}, "limit": 100}))
        .send()
        .await
        .expect("searching threads")
        .json()
        .await
        .expect("a list of threads")
}

#[tokio::test]
async fn on_the_real_agent_server_a_cron_runs_each_minute_is_suspended_ended_and_deleted() {
    test_support::skip_without!(Envtest);
    test_support::skip_without!(AgentServer);
    // A server of its own: its crons fire each minute and must not run
    // beside other tests' assertions.
    let server = support::langgraph::start("operator_cron_real");
    // A 5 s resync: the drift check that reads the last run comes soon.
    let h = Harness::quick("op-cron-real")
        .agent_server_url(&server.url)
        .resync_seconds(5.0)
        .start()
        .await;
    h.apply(github_deployment("agent", "main")).await;
    h.wait_ready("agent", TIMEOUT).await;
    let api: Api<AgentCron> = Api::namespaced(h.client.clone(), &h.ns);
    let manifest = |suspend: bool| {
        cron(
            "every-minute",
            json!({"graphId": "agent", "schedule": "* * * * *", "onRunCompleted": "Keep",
                "suspend": suspend,
                "input": {"messages": [{"role": "user", "content": "tick"}]}}),
        )
    };
    support::apply_json(&api, "every-minute", manifest(false)).await;
    let (id, reason) = wait_cron(&api, "every-minute", "Ready", ready).await;
    assert_eq!(reason, "CronReady");
    let uid = api.get("every-minute").await.unwrap().metadata.uid.unwrap();
    let on_server = tagged(&server.url, &uid).await;
    assert_eq!(on_server.len(), 1, "{on_server:?}");
    assert_eq!(on_server[0].cron_id, id);
    assert_eq!(on_server[0].end_time, None);

    // A `* * * * *` cron really runs within two minutes.
    let deadline = Instant::now() + Duration::from_secs(130);
    let runs = loop {
        let runs = runs_of(&server.url, &uid).await;
        if !runs.is_empty() {
            break runs;
        }
        assert!(
            Instant::now() < deadline,
            "no run of cron {id} within two minutes; log {}",
            server.log.display()
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
    };
    eprintln!("runs of the cron seen: {}", runs.len());
    // The drift check shows the newest run (its thread) in status.
    let last = wait_cron(&api, "every-minute", "status.lastRun", |o| {
        o?.status.as_ref()?.last_run.clone()
    })
    .await;
    let threads: Vec<String> = runs_of(&server.url, &uid)
        .await
        .iter()
        .filter_map(|t| t["thread_id"].as_str().map(str::to_owned))
        .collect();
    assert!(
        threads.contains(&last.thread_id),
        "lastRun {last:?} is a run of the cron: {threads:?}"
    );
    assert!(last.time.is_some(), "{last:?}");
    assert!(
        matches!(last.status.as_deref(), Some("idle" | "busy")),
        "{last:?}"
    );
    eprintln!("status.lastRun: {last:?}");

    // Suspended: enabled false on the server.
    support::apply_json(&api, "every-minute", manifest(true)).await;
    wait_cron(&api, "every-minute", "CronSuspended", |o| {
        ready(o).filter(|(_, r)| r == "CronSuspended")
    })
    .await;
    let c = &tagged(&server.url, &uid).await[0];
    assert!(!c.enabled, "{c:?}");

    // Resumed with an endTime 15 s ahead: enabled now, disabled by the
    // operator when it passes (its pass is requeued for then), and
    // `end_time` never reaches the server.
    // Whole seconds, as written in the spec: the operator acts at the time
    // written, not at a fraction of a second after it.
    let written = (jiff::Timestamp::now() + jiff::SignedDuration::from_secs(15))
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let end: jiff::Timestamp = written.parse().expect("an RFC 3339 time");
    let mut ending = manifest(false);
    ending["spec"]["endTime"] = json!(written);
    support::apply_json(&api, "every-minute", ending).await;
    wait_cron(&api, "every-minute", "CronReady before endTime", |o| {
        ready(o).filter(|(_, r)| r == "CronReady")
    })
    .await;
    assert!(tagged(&server.url, &uid).await[0].enabled);
    wait_cron(&api, "every-minute", "CronCompleted after endTime", |o| {
        ready(o).filter(|(_, r)| r == "CronCompleted")
    })
    .await;
    assert!(jiff::Timestamp::now() >= end, "not before endTime");
    let c = &tagged(&server.url, &uid).await[0];
    assert!(!c.enabled, "disabled at endTime: {c:?}");
    assert_eq!(c.end_time, None, "end_time never sent: {c:?}");

    // Deleted with the resource.
    api.delete("every-minute", &DeleteParams::default())
        .await
        .expect("deleting");
    wait_cron(&api, "every-minute", "gone", |o| o.is_none().then_some(())).await;
    assert!(
        tagged(&server.url, &uid).await.is_empty(),
        "deleted on the server"
    );
}

/// On the real agent server: a spec change is one PATCH of the same cron,
/// a schedule changed outside (the SDK, the UI) is patched back on the next
/// drift check, and `deletionPolicy: Orphan` leaves the cron on the server
/// when the resource goes. One cron on the server throughout.
#[tokio::test]
async fn on_the_real_agent_server_a_cron_is_updated_corrected_after_drift_and_orphaned() {
    test_support::skip_without!(Envtest);
    test_support::skip_without!(AgentServer);
    let server = support::langgraph::start("operator_cron_real_drift");
    // A 2 s resync: the drift check comes soon.
    let h = Harness::quick("op-cron-real-drift")
        .agent_server_url(&server.url)
        .resync_seconds(2.0)
        .start()
        .await;
    h.apply(github_deployment("agent", "main")).await;
    h.wait_ready("agent", TIMEOUT).await;
    let api: Api<AgentCron> = Api::namespaced(h.client.clone(), &h.ns);
    let manifest = |schedule: &str| {
        cron(
            "nightly",
            json!({"graphId": "agent", "schedule": schedule, "deletionPolicy": "Orphan",
                "metadata": {"team": "support"}}),
        )
    };
    support::apply_json(&api, "nightly", manifest("0 3 * * *")).await;
    let (id, _) = wait_cron(&api, "nightly", "Ready", ready).await;
    let uid = api.get("nightly").await.unwrap().metadata.uid.unwrap();
    let schedule_on_server = || async {
        let found = tagged(&server.url, &uid).await;
        assert_eq!(found.len(), 1, "one cron on the server: {found:?}");
        assert_eq!(found[0].cron_id, id, "the same cron: {found:?}");
        found[0].schedule.clone()
    };
    assert_eq!(schedule_on_server().await, "0 3 * * *");

    // A spec change: the same cron, patched.
    support::apply_json(&api, "nightly", manifest("0 4 * * *")).await;
    wait_cron(&api, "nightly", "Ready at generation 2", |o| {
        ready(o).filter(|_| o.and_then(|o| o.metadata.generation) == Some(2))
    })
    .await;
    assert_eq!(schedule_on_server().await, "0 4 * * *");

    // Changed outside: patched back by a drift check.
    let answer = reqwest::Client::new()
        .patch(format!(
            "{}/runs/crons/{id}",
            server.url.trim_end_matches('/')
        ))
        .json(&json!({"schedule": "0 5 * * *"}))
        .send()
        .await
        .expect("patching the cron outside the operator");
    assert!(answer.status().is_success(), "{}", answer.status());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if schedule_on_server().await == "0 4 * * *" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the schedule changed outside was not patched back within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // Orphan: the resource goes, the cron stays, untouched.
    api.delete("nightly", &DeleteParams::default())
        .await
        .expect("deleting");
    wait_cron(&api, "nightly", "gone", |o| o.is_none().then_some(())).await;
    assert_eq!(schedule_on_server().await, "0 4 * * *");
}

/// `managementPolicy: Observe` (issue 34, item 1): with no cron carrying
/// the object's UID tag (the adoption key) nothing is created
/// (`NothingToObserve`); a cron tagged by hand, with another schedule and
/// metadata, is adopted and only read: `status.drift` and `Drifted` list
/// the differences, no create, PATCH or DELETE is sent over several drift
/// checks, nor when the observed resource is deleted. Switching to
/// `Manage` converges it with one PATCH.
#[tokio::test]
async fn an_observed_cron_is_only_read_and_manage_converges_it_with_one_patch() {
    use agent_operator::api::conditions::DRIFTED;
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-cron-observe")
        .resync_seconds(1.0)
        .start()
        .await;
    h.apply(github_deployment("agent", "main")).await;
    let dep = h.wait_ready("agent", TIMEOUT).await;
    let url = url_of(&dep);
    let api: Api<AgentCron> = Api::namespaced(h.client.clone(), &h.ns);
    let manifest = |policy: &str| {
        cron(
            "observed",
            json!({"graphId": "agent", "managementPolicy": policy,
                "metadata": {"team": "support"}}),
        )
    };
    support::apply_json(&api, "observed", manifest("Observe")).await;
    let uid = wait_cron(&api, "observed", "NothingToObserve", |o| {
        let o = o?;
        let s = o.status.as_ref()?;
        s.conditions
            .iter()
            .any(|c| c.type_ == "Stalled" && c.reason == "NothingToObserve")
            .then(|| o.metadata.uid.clone())?
    })
    .await;
    let log = cron_requests(&h).await;
    assert!(
        log.iter().all(|(r, _)| r.ends_with("/search")),
        "nothing created: {log:?}"
    );

    let landed: Cron = reqwest::Client::new()
        .post(format!("{}/runs/crons", url.trim_end_matches('/')))
        .header("X-Api-Key", support::API_KEY)
        .json(&json!({"assistant_id": "agent", "schedule": "0 * * * *",
            "metadata": {UID_METADATA_KEY: uid, "team": "ops"}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .expect("the cron made by hand");
    let (drift, condition) = wait_cron(&api, "observed", "the drift listed", |o| {
        let o = o?;
        ready(Some(o))?;
        let s = o.status.as_ref()?;
        let c = s
            .conditions
            .iter()
            .find(|c| c.type_ == DRIFTED && c.status == "True")?;
        Some((s.drift.clone(), c.clone()))
    })
    .await;
    let fields: Vec<&str> = drift.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(fields, ["schedule", "metadata"], "{drift:?}");
    assert_eq!(
        (drift[0].desired.as_str(), drift[0].remote.as_str()),
        ("\"*/5 * * * *\"", "\"0 * * * *\"")
    );
    assert_eq!(condition.reason, "RemoteDiffers");
    assert!(
        condition.message.contains(&landed.cron_id),
        "{}",
        condition.message
    );

    // Several drift checks later: read, never written.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let log = cron_requests(&h).await;
    assert_eq!(exactly(&log, CREATE, "2"), 1, "only the test's: {log:?}");
    assert_eq!(exactly(&log, PATCH, ""), 0, "{log:?}");
    assert_eq!(exactly(&log, DELETE, ""), 0, "{log:?}");

    // Manage: one PATCH, and the drift is gone.
    support::apply_json(&api, "observed", manifest("Manage")).await;
    wait_cron(&api, "observed", "converged", |o| {
        let o = o?;
        ready(Some(o))?;
        let s = o.status.as_ref()?;
        (s.drift.is_empty() && !s.conditions.iter().any(|c| c.type_ == DRIFTED)).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let on_server = tagged(&url, &uid).await;
    assert_eq!(on_server.len(), 1, "{on_server:?}");
    assert_eq!(on_server[0].schedule, "*/5 * * * *");
    assert_eq!(on_server[0].metadata["team"], "support");
    let log = cron_requests(&h).await;
    assert_eq!(exactly(&log, PATCH, "2"), 1, "one write: {log:?}");
    assert_eq!(exactly(&log, CREATE, "2"), 1, "{log:?}");

    // Observed again, then deleted: the cron stays on the server.
    support::apply_json(&api, "observed", manifest("Observe")).await;
    wait_cron(&api, "observed", "observed again", |o| {
        let s = o?.status.as_ref()?;
        s.conditions
            .iter()
            .any(|c| c.type_ == DRIFTED && c.reason == "NoDrift")
            .then_some(())
    })
    .await;
    api.delete("observed", &DeleteParams::default())
        .await
        .expect("deleting");
    wait_cron(&api, "observed", "gone", |o| o.is_none().then_some(())).await;
    let log = cron_requests(&h).await;
    assert_eq!(exactly(&log, DELETE, ""), 0, "nothing deleted: {log:?}");
    assert_eq!(tagged(&url, &uid).await.len(), 1, "left on the server");
}
