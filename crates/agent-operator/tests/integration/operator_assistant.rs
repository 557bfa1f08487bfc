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
use serde_json::{Value, json};
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

/// `GET /assistants/{id}` on the real agent server at `url`: the HTTP
/// status and the body (the test's own request, not the operator's).
async fn remote_assistant(url: &str, id: &str) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .get(format!("{url}/assistants/{id}"))
        .send()
        .await
        .expect("GET /assistants/{id}");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// The versions of the assistant `id` on the real agent server at `url`
/// (`POST /assistants/{id}/versions`), newest first.
async fn versions(url: &str, id: &str) -> Vec<i64> {
    let list: Vec<Value> = reqwest::Client::new()
        .post(format!("{url}/assistants/{id}/versions"))
        .json(&json!({"limit": 100}))
        .send()
        .await
        .expect("POST /assistants/{id}/versions")
        .json()
        .await
        .expect("a list of versions");
    list.iter().filter_map(|v| v["version"].as_i64()).collect()
}

fn on_real(name: &str, spec: Value) -> Value {
    let mut s = json!({"deploymentRef": {"name": "agent"}, "graphId": "agent"});
    s.as_object_mut()
        .unwrap()
        .extend(spec.as_object().unwrap().clone());
    json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentAssistant",
        "metadata": {"name": name}, "spec": s})
}

#[tokio::test]
async fn on_the_real_agent_server_an_assistant_is_created_updated_pinned_corrected_deleted_and_orphaned()
 {
    test_support::skip_without!(Envtest);
    test_support::skip_without!(AgentServer);
    let server = support::langgraph::start("operator_assistant_real");
    let url = server.url.clone();
    // A 2 s resync: the drift check of the steady assistant comes soon.
    let h = Harness::quick("op-assistant-real")
        .agent_server_url(&url)
        .resync_seconds(2.0)
        .start()
        .await;
    h.apply(github_deployment("agent", "main")).await;
    h.wait_ready("agent", TIMEOUT).await;
    let api: Api<AgentAssistant> = Api::namespaced(h.client.clone(), &h.ns);
    let spec = |model: &str| {
        json!({"name": "helper", "description": "answers tickets",
            "config": {"configurable": {"model": model}}, "metadata": {"team": "support"}})
    };

    // Created: version 1, with the fields of the spec.
    support::apply_json(&api, "helper", on_real("helper", spec("a"))).await;
    let (id, version) = wait_assistant(&api, "helper", "Ready", ready).await;
    assert_eq!(version, 1);
    let (status, a) = remote_assistant(&url, &id).await;
    assert_eq!(status, 200, "{a}");
    assert_eq!(a["graph_id"], "agent");
    assert_eq!(a["name"], "helper");
    assert_eq!(a["description"], "answers tickets");
    assert_eq!(a["config"]["configurable"]["model"], "a", "{a}");
    assert_eq!(a["metadata"]["team"], "support", "{a}");
    // Steady: several drift checks later, no new version (what the real
    // server answers equals what was sent).
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(versions(&url, &id).await, vec![1], "no PATCH while steady");

    // Updated: one PATCH, one new version.
    support::apply_json(&api, "helper", on_real("helper", spec("b"))).await;
    wait_assistant(&api, "helper", "version 2", |o| {
        ready(o).filter(|(_, v)| *v == 2)
    })
    .await;
    assert_eq!(
        remote_assistant(&url, &id).await.1["config"]["configurable"]["model"],
        "b"
    );
    assert_eq!(
        versions(&url, &id).await,
        vec![2, 1],
        "exactly one new version"
    );

    // Drift made outside (as the UI or the SDK would): a PATCH by hand is
    // version 3; the next drift check patches it back (version 4).
    let by_hand = reqwest::Client::new()
        .patch(format!("{url}/assistants/{id}"))
        .json(&json!({"name": "renamed by hand", "config": {"configurable": {"model": "x"}}}))
        .send()
        .await
        .expect("PATCH by hand");
    assert!(by_hand.status().is_success(), "{by_hand:?}");
    wait_assistant(&api, "helper", "the drift corrected (version 4)", |o| {
        ready(o).filter(|(_, v)| *v == 4)
    })
    .await;
    let (_, a) = remote_assistant(&url, &id).await;
    assert_eq!(a["name"], "helper", "{a}");
    assert_eq!(a["config"]["configurable"]["model"], "b", "{a}");
    assert_eq!(
        versions(&url, &id).await,
        vec![4, 3, 2, 1],
        "one PATCH back"
    );

    // Pinned to version 1: `/latest`, the old version serves again, no new
    // version.
    let mut pinned = spec("b");
    pinned["version"] = json!(1);
    support::apply_json(&api, "helper", on_real("helper", pinned)).await;
    wait_assistant(&api, "helper", "version 1 pinned", |o| {
        ready(o).filter(|(_, v)| *v == 1)
    })
    .await;
    let (_, a) = remote_assistant(&url, &id).await;
    assert_eq!(a["version"], 1, "{a}");
    assert_eq!(
        a["config"]["configurable"]["model"], "a",
        "version 1 serves: {a}"
    );
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        versions(&url, &id).await,
        vec![4, 3, 2, 1],
        "the pin makes no version and is not patched away"
    );
    assert_eq!(remote_assistant(&url, &id).await.1["version"], 1);

    // Deleted with the resource: GET 404.
    api.delete("helper", &DeleteParams::default())
        .await
        .expect("deleting");
    wait_assistant(&api, "helper", "gone", |o| o.is_none().then_some(())).await;
    let (status, a) = remote_assistant(&url, &id).await;
    assert_eq!(status, 404, "deleted on the server: {a}");

    // `deletionPolicy: Orphan`: the resource goes, the assistant stays.
    support::apply_json(
        &api,
        "kept",
        on_real("kept", json!({"deletionPolicy": "Orphan"})),
    )
    .await;
    let (kept, _) = wait_assistant(&api, "kept", "Ready", ready).await;
    api.delete("kept", &DeleteParams::default())
        .await
        .expect("deleting");
    wait_assistant(&api, "kept", "gone", |o| o.is_none().then_some(())).await;
    let (status, a) = remote_assistant(&url, &kept).await;
    assert_eq!(status, 200, "orphaned, still on the server: {a}");
    assert_eq!(a["name"], "kept");
}

/// `managementPolicy: Observe` (issue 34, item 1): an assistant made on
/// the agent server outside the operator (as the UI or the SDK would) is
/// adopted by `spec.assistantId` and only read: its differences from the
/// spec are listed in `status.drift` and `Drifted`, and no create, PATCH
/// or DELETE is sent over several drift checks, nor when an observed
/// resource is deleted. Switching to `Manage` converges it with one PATCH.
#[tokio::test]
async fn an_observed_assistant_is_only_read_and_manage_converges_it_with_one_patch() {
    use agent_operator::api::conditions::DRIFTED;
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-assistant-observe")
        .resync_seconds(1.0)
        .start()
        .await;
    h.apply(github_deployment("agent", "main")).await;
    let dep = h.wait_ready("agent", TIMEOUT).await;
    let url = dep.status.as_ref().and_then(|s| s.url.clone()).unwrap();
    let id = "5f0c4f4e-7c2a-4d3b-9a51-0d7c1e2b3a4c";
    let made = reqwest::Client::new()
        .post(format!("{}/assistants", url.trim_end_matches('/')))
        .header("X-Api-Key", support::API_KEY)
        .json(
            &json!({"graph_id": "agent", "assistant_id": id, "name": "ui-helper",
            "config": {"configurable": {"model": "x"}}, "metadata": {"team": "ops"}}),
        )
        .send()
        .await
        .expect("creating the assistant by hand");
    assert!(made.status().is_success(), "{made:?}");

    let api: Api<AgentAssistant> = Api::namespaced(h.client.clone(), &h.ns);
    let manifest = |policy: &str| {
        json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentAssistant",
            "metadata": {"name": "helper"},
            "spec": {"deploymentRef": {"name": "agent"}, "graphId": "agent",
                "assistantId": id, "managementPolicy": policy, "name": "helper",
                "config": {"configurable": {"model": "a"}},
                "metadata": {"team": "support"}}})
    };
    // Admission: Observe needs the id of the assistant to observe.
    let mut without_id = manifest("Observe");
    without_id["spec"]
        .as_object_mut()
        .unwrap()
        .remove("assistantId");
    let refused = api
        .patch(
            "helper",
            &kube::api::PatchParams::apply("tests").force(),
            &kube::api::Patch::Apply(&without_id),
        )
        .await
        .expect_err("Observe without assistantId is refused");
    assert!(
        refused.to_string().contains("Observe needs assistantId"),
        "{refused}"
    );
    support::apply_json(&api, "helper", manifest("Observe")).await;
    let observed = wait_assistant(&api, "helper", "the drift listed", |o| {
        let o = o?;
        let s = o.status.as_ref()?;
        let drifted = s
            .conditions
            .iter()
            .find(|c| c.type_ == DRIFTED && c.status == "True")?;
        ready(Some(o))?;
        Some((s.drift.clone(), drifted.clone()))
    })
    .await;
    let (drift, condition) = observed;
    let fields: Vec<&str> = drift.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(
        fields,
        ["name", "config", "context", "metadata"],
        "{drift:?}"
    );
    assert_eq!(
        (drift[0].desired.as_str(), drift[0].remote.as_str()),
        ("\"helper\"", "\"ui-helper\"")
    );
    assert_eq!(condition.reason, "RemoteDiffers");
    assert!(
        condition.message.contains(id) && condition.message.contains("metadata"),
        "{}",
        condition.message
    );

    // Several drift checks later: read, never written.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let seen = assistant_requests(&h).await;
    assert!(count(&seen, "GET") >= 2, "drift checks read: {seen:?}");
    assert_eq!(count(&seen, "POST"), 1, "only the test's create: {seen:?}");
    assert_eq!(count(&seen, "PATCH"), 0, "{seen:?}");
    assert_eq!(count(&seen, "DELETE"), 0, "{seen:?}");

    // Manage: one PATCH, one new version, no drift any more.
    support::apply_json(&api, "helper", manifest("Manage")).await;
    let (_, version) = wait_assistant(&api, "helper", "converged (version 2)", |o| {
        ready(o).filter(|(_, v)| *v == 2)
    })
    .await;
    assert_eq!(version, 2);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let o = api.get("helper").await.unwrap();
    let s = o.status.unwrap();
    assert!(s.drift.is_empty(), "{:?}", s.drift);
    assert!(
        !s.conditions.iter().any(|c| c.type_ == DRIFTED),
        "no Drifted under Manage: {:?}",
        s.conditions
    );
    let managed = assistant_requests(&h).await;
    assert_eq!(count(&managed, "PATCH"), 1, "one write: {managed:?}");
    assert_eq!(count(&managed, "POST"), 1, "{managed:?}");

    // Observed again, then deleted: the assistant stays on the server.
    support::apply_json(&api, "helper", manifest("Observe")).await;
    wait_assistant(&api, "helper", "observed again", |o| {
        let s = o?.status.as_ref()?;
        s.conditions
            .iter()
            .any(|c| c.type_ == DRIFTED && c.reason == "NoDrift")
            .then_some(())
    })
    .await;
    api.delete("helper", &DeleteParams::default())
        .await
        .expect("deleting");
    wait_assistant(&api, "helper", "gone", |o| o.is_none().then_some(())).await;
    let all = assistant_requests(&h).await;
    assert_eq!(count(&all, "DELETE"), 0, "nothing deleted: {all:?}");
    let still = reqwest::Client::new()
        .get(format!("{}/assistants/{id}", url.trim_end_matches('/')))
        .header("X-Api-Key", support::API_KEY)
        .send()
        .await
        .expect("reading the assistant");
    assert_eq!(still.status().as_u16(), 200, "left on the server");
}
