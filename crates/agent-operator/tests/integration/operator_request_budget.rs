//! A resource the control plane refuses for good costs a few requests, not a
//! stream of them: for each kind of permanent refusal, the operator sends at
//! most [`MAX_REQUESTS`] control plane requests about the resource within
//! [`OBSERVE`] and reports it `Stalled` (issue "A well-mannered client of a
//! rate-limited service", item 2).
//!
//! The kinds: a create answered 422 and 400, a PATCH answered 422, a
//! redeploy answered 400 (each a `reject` fault of the emulator: what the
//! service would refuse for a known reason is refused at admission now, see
//! `hostile_input.rs`, so these stand for a rule only the service knows), and
//! a listener read answered 404.
//! Each test has its own emulator, so every request the emulator logs after
//! the AgentControlPlane is Ready is about the test's one resource (a refused
//! create has no deployment id: its requests are the list and the create).
//! The operator runs with its default resync interval (300 s), so a request
//! repeated within [`OBSERVE`] is the operator's own doing.
//!
//! The tests run in parallel up to the test harness's thread count; with
//! `-- --test-threads 5` all five take about [`OBSERVE`].
//!
//! Also the unit tests of the request-budget guard (`support::budget`).

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use agent_operator::api::AgentListener;
use agent_operator::api::conditions::find;
use agent_operator::api::deployment::REDEPLOY_ANNOTATION;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Api;
use serde_json::json;
use support::budget::{Budget, LoggedRequest, busiest_window};
use support::{Harness, WORKSPACE, condition, github_deployment, merge_patch};

/// How long each test watches the operator after the refusal.
const OBSERVE: Duration = Duration::from_secs(35);
/// Most control plane requests about the refused resource within [`OBSERVE`].
const MAX_REQUESTS: usize = 3;
/// Time to reach Ready or the AgentControlPlane's Ready.
const TIMEOUT: Duration = Duration::from_secs(60);
/// The listener the emulator seeds in the test workspace.
const LISTENER_ID: &str = "6f1c2a3e-4b5d-4e6f-8a7b-9c0d1e2f3a4b";
/// A listener id the emulator does not know (its read answers 404).
const UNKNOWN_LISTENER_ID: &str = "00000000-1111-4222-8333-444444444444";

/// Makes the emulator refuse `route` with `status` from now on.
async fn reject(h: &Harness, route: &str, status: u16) {
    h.emulator
        .set_faults(json!({"reject": [{
            "route": route,
            "status": status,
            "detail": "Refused by a rule only the service knows (emulator reject fault)."
        }]}))
        .await;
}

/// Number of entries in the emulator's request log: requests after this
/// point are the ones the test judges.
async fn mark(h: &Harness) -> usize {
    h.emulator.request_mark().await
}

/// The requests logged since `mark`, after waiting [`OBSERVE`].
async fn observe(h: &Harness, mark: usize) -> Vec<LoggedRequest> {
    tokio::time::sleep(OBSERVE).await;
    h.emulator.requests_since(mark).await
}

/// Panics unless at most [`MAX_REQUESTS`] were sent and `stalled` holds,
/// describing both.
fn judge(what: &str, requests: &[LoggedRequest], stalled: Option<&Condition>) {
    let mut by_route: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for r in requests {
        *by_route
            .entry(r.route.clone())
            .or_default()
            .entry(r.status.clone())
            .or_default() += 1;
    }
    let mut problems = Vec::new();
    if requests.len() > MAX_REQUESTS {
        let (busiest, _) = busiest_window(requests.iter().map(|r| r.t_ms).collect(), 1000);
        problems.push(format!(
            "{} control plane requests about the resource in {OBSERVE:?} (at most \
             {MAX_REQUESTS}; up to {busiest} within one second): {by_route:?}",
            requests.len()
        ));
    }
    match stalled {
        Some(c) if c.status == "True" => {}
        other => problems.push(format!(
            "not Stalled=True for its generation; Stalled condition: {other:?}"
        )),
    }
    assert!(
        problems.is_empty(),
        "{what}:\n  {}\n  (requests by route and status: {by_route:?})",
        problems.join("\n  ")
    );
    eprintln!("{what}: {} requests {by_route:?}", requests.len());
}

/// The `Stalled` condition of AgentDeployment `name` if it describes the
/// current generation.
async fn deployment_stalled(h: &Harness, name: &str) -> Option<Condition> {
    let obj = h.api.get(name).await.expect("reading the AgentDeployment");
    condition(&obj, "Stalled").filter(|c| c.observed_generation == obj.metadata.generation)
}

#[tokio::test]
async fn a_create_refused_with_422_is_not_retried() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("budget-create-422").start().await;
    h.wait_control_plane_ready(TIMEOUT).await;
    reject(&h, support::route::CREATE, 422).await;
    let name = "oversized-agent";
    let mut manifest = github_deployment(name, "main");
    manifest["spec"]["sourceConfig"]["resourceSpec"] = json!({"cpu": 8});
    let mark = mark(&h).await;
    h.apply(manifest).await;
    let requests = observe(&h, mark).await;
    assert!(
        requests
            .iter()
            .any(|r| r.route == support::route::CREATE && r.status == "422"),
        "the create was refused with 422: {requests:?}"
    );
    judge(
        "create refused with 422 (emulator reject fault)",
        &requests,
        deployment_stalled(&h, name).await.as_ref(),
    );
}

#[tokio::test]
async fn a_create_refused_with_400_is_not_retried() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("budget-create-400").start().await;
    h.wait_control_plane_ready(TIMEOUT).await;
    reject(&h, support::route::CREATE, 400).await;
    let name = "tag-agent";
    let manifest = github_deployment(name, "refs/tags/v1");
    let mark = mark(&h).await;
    h.apply(manifest).await;
    let requests = observe(&h, mark).await;
    judge(
        "create refused with 400 (emulator reject fault)",
        &requests,
        deployment_stalled(&h, name).await.as_ref(),
    );
}

#[tokio::test]
async fn a_patch_refused_with_422_is_not_retried() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("budget-patch-422").start().await;
    h.wait_control_plane_ready(TIMEOUT).await;
    let name = "resized-agent";
    h.apply(github_deployment(name, "main")).await;
    h.wait_ready(name, TIMEOUT).await;
    reject(&h, support::route::PATCH, 422).await;
    let mark = mark(&h).await;
    merge_patch(
        &h.api,
        name,
        json!({"spec": {"sourceConfig": {"resourceSpec": {"cpu": 8}}}}),
    )
    .await;
    let requests = observe(&h, mark).await;
    assert!(
        requests
            .iter()
            .any(|r| r.route == support::route::PATCH && r.status == "422"),
        "the patch was refused with 422: {requests:?}"
    );
    judge(
        "patch refused with 422 (emulator reject fault)",
        &requests,
        deployment_stalled(&h, name).await.as_ref(),
    );
}

#[tokio::test]
async fn a_redeploy_refused_with_400_is_not_retried() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("budget-redeploy-400").start().await;
    h.wait_control_plane_ready(TIMEOUT).await;
    let name = "redeployed-agent";
    h.apply(github_deployment(name, "main")).await;
    h.wait_ready(name, TIMEOUT).await;
    reject(&h, support::route::REDEPLOY, 400).await;
    let mark = mark(&h).await;
    merge_patch(
        &h.api,
        name,
        json!({"metadata": {"annotations": {REDEPLOY_ANNOTATION: "2024-01-01T00:00:00Z"}}}),
    )
    .await;
    let requests = observe(&h, mark).await;
    assert!(
        requests
            .iter()
            .any(|r| r.route == support::route::REDEPLOY && r.status == "400"),
        "the redeploy was refused with 400: {requests:?}"
    );
    judge(
        "redeploy refused with 400 (emulator reject fault)",
        &requests,
        deployment_stalled(&h, name).await.as_ref(),
    );
}

#[tokio::test]
async fn a_listener_read_answered_404_is_not_retried() {
    test_support::skip_without!(Envtest);
    let seed = format!("{WORKSPACE}={LISTENER_ID}:cluster-a:agents");
    let h = Harness::quick("budget-listener-404")
        .listener(&seed)
        .start()
        .await;
    h.wait_control_plane_ready(TIMEOUT).await;
    let listeners: Api<AgentListener> = Api::namespaced(h.client.clone(), &h.ns);
    let mark = mark(&h).await;
    support::apply_json(
        &listeners,
        "ghost",
        json!({
            "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentListener",
            "metadata": {"name": "ghost"},
            "spec": {"listenerId": UNKNOWN_LISTENER_ID}
        }),
    )
    .await;
    let requests = observe(&h, mark).await;
    assert!(
        requests
            .iter()
            .any(|r| r.route == support::route::GET_LISTENER
                && r.listener_id.as_deref() == Some(UNKNOWN_LISTENER_ID)
                && r.status == "404"),
        "the listener read answered 404: {requests:?}"
    );
    let obj = listeners.get("ghost").await.expect("reading the listener");
    let stalled = obj
        .status
        .as_ref()
        .and_then(|s| find(&s.conditions, "Stalled").cloned())
        .filter(|c| c.observed_generation == obj.metadata.generation);
    judge(
        "listener read answered 404 (unknown listener id)",
        &requests,
        stalled.as_ref(),
    );
}

fn logged(t_ms: u64, route: &str, id: Option<&str>) -> LoggedRequest {
    LoggedRequest {
        t_ms,
        route: route.to_owned(),
        deployment_id: id.map(str::to_owned),
        listener_id: None,
        workspace: None,
        status: "200".to_owned(),
    }
}

#[test]
fn budget_windows_slide() {
    assert_eq!(busiest_window(vec![], 1000), (0, 0));
    assert_eq!(
        busiest_window(vec![0, 999, 1000, 1500, 1999], 1000),
        (3, 999),
        "a window holds [t, t + 1000)"
    );
    assert_eq!(busiest_window(vec![0, 100, 200, 1200], 1000), (3, 0));
    assert_eq!(busiest_window(vec![5, 0, 3], 10), (3, 0));
}

#[test]
fn budget_violations_per_route_and_resource_and_in_all() {
    let budget = Budget {
        window: Duration::from_secs(1),
        per_resource: 2,
        per_route_without_id: 2,
        total: 3,
    };
    let get = support::route::GET;
    let log = vec![
        logged(0, get, Some("a")),
        logged(100, get, Some("a")),
        logged(200, get, Some("b")),
        logged(300, get, Some("b")),
        logged(1100, get, Some("a")),
        logged(1200, get, Some("a")),
        logged(1300, get, Some("a")),
        logged(1400, support::route::CREATE, None),
    ];
    let v = budget.violations(&log);
    assert_eq!(v.len(), 2, "{v:?}");
    assert_eq!(
        v[0].to_string(),
        "GET /v2/deployments/{deployment_id} for a: 3 requests in the 1s from t=1.1s (budget 2)"
    );
    assert_eq!(
        v[1].to_string(),
        "all routes: 4 requests in the 1s from t=0.0s (budget 3)"
    );
    assert!(Budget::default().violations(&log).is_empty());
    assert!(Budget::unlimited().violations(&log).is_empty());
}
