//! AgentAssistant against the emulator's built-in agent server (issue 32):
//! an assistant of the AgentDeployment's agent server becomes Ready with
//! its id and version; a spec change is exactly one PATCH (version 2); the
//! deletion is one DELETE. The requests are counted in the emulator's
//! request log, and the harness's budget guard holds.

use crate::support;

use std::time::Duration;

use agent_operator::api::AgentAssistant;
use kube::Api;
use kube::api::DeleteParams;
use serde_json::json;
use support::{Harness, github_deployment};

const TIMEOUT: Duration = Duration::from_secs(90);

/// Polls `name` until `check` gives a value, for [`TIMEOUT`].
async fn wait_assistant<T>(
    api: &Api<AgentAssistant>,
    name: &str,
    what: &str,
    check: impl Fn(Option<&AgentAssistant>) -> Option<T>,
) -> T {
    support::wait_object(api, name, TIMEOUT, what, check).await
}

/// `(assistantId, version)` once Ready=True at the current generation.
fn ready(o: Option<&AgentAssistant>) -> Option<(String, i64)> {
    let o = o?;
    let s = o.status.as_ref()?;
    let ok = s.observed_generation == o.metadata.generation
        && s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
    if !ok {
        return None;
    }
    Some((s.assistant_id.clone()?, s.version?))
}

/// Successful requests of the assistant routes (not the search), by route.
async fn assistant_requests(h: &Harness) -> Vec<(String, String)> {
    let log = h.emulator.request_log().await;
    log.entries
        .iter()
        .filter(|r| r.route.contains("/assistants") && !r.route.contains("/search"))
        .map(|r| (r.route.clone(), r.status.clone()))
        .collect()
}

fn count(log: &[(String, String)], method: &str) -> usize {
    log.iter()
        .filter(|(r, s)| r.starts_with(method) && s.starts_with('2'))
        .count()
}

#[tokio::test]
async fn an_assistant_is_created_once_patched_once_per_change_and_deleted() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-assistant").start().await;
    h.apply(github_deployment("agent", "main")).await;
    h.wait_ready("agent", TIMEOUT).await;
    let api: Api<AgentAssistant> = Api::namespaced(h.client.clone(), &h.ns);
    let manifest = |model: &str| {
        json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentAssistant",
            "metadata": {"name": "helper"},
            "spec": {"deploymentRef": {"name": "agent"}, "graphId": "agent",
                "config": {"configurable": {"model": model}},
                "metadata": {"team": "support"}}})
    };
    support::apply_json(&api, "helper", manifest("a")).await;
    let (id, version) = wait_assistant(&api, "helper", "Ready", ready).await;
    assert_eq!(version, 1);
    let created = assistant_requests(&h).await;
    assert_eq!(count(&created, "POST"), 1, "one create: {created:?}");
    assert_eq!(count(&created, "PATCH"), 0, "no patch: {created:?}");
    let uid = api.get("helper").await.unwrap().metadata.uid.unwrap();
    assert_eq!(
        id,
        uuid::Uuid::new_v5(
            &agent_operator::plan::assistant::ASSISTANT_ID_NAMESPACE,
            uid.as_bytes()
        )
        .to_string()
    );
    eprintln!(
        "requests for one assistant create (GET 404 + POST): {}",
        created.len()
    );

    support::apply_json(&api, "helper", manifest("b")).await;
    let (_, version) = wait_assistant(&api, "helper", "version 2", |o| {
        ready(o).filter(|(_, v)| *v == 2)
    })
    .await;
    assert_eq!(version, 2);
    let updated = assistant_requests(&h).await;
    assert_eq!(
        count(&updated, "PATCH"),
        1,
        "exactly one PATCH: {updated:?}"
    );
    eprintln!(
        "requests for one assistant update (GET + PATCH): {}",
        updated.len() - created.len()
    );

    api.delete("helper", &DeleteParams::default())
        .await
        .expect("deleting");
    wait_assistant(&api, "helper", "gone", |o| o.is_none().then_some(())).await;
    let all = assistant_requests(&h).await;
    assert_eq!(count(&all, "DELETE"), 1, "one DELETE: {all:?}");
    assert_eq!(count(&all, "POST"), 1, "still one create: {all:?}");
}
