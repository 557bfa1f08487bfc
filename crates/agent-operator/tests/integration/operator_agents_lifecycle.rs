//! AgentAssistant and AgentCron with the life of their AgentDeployment
//! (issue 32 item 3). On the real `langgraph dev`: a deployment deleted and
//! applied again on another agent server (a new deployment id, a new empty
//! server) gets its assistant and its cron back there, each once. On the
//! emulator: a paused deployment disables its crons (`enabled: false`,
//! `DeploymentPaused`) and its assistants wait without a request, and both
//! go on when it is unpaused; deleting a deployment that assistants and
//! crons reference is not blocked, they report `DeploymentNotFound`, and
//! their own deletion then sends nothing (no remote object can be left).
//! Each test's request budget is checked by the harness.

use crate::operator_cron::tagged;
use crate::support;

use std::time::Duration;

use agent_operator::api::deployment::PAUSED_ANNOTATION;
use agent_operator::api::{AgentAssistant, AgentCron, AgentDeployment};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};
use support::{AgentDeploymentManifest, Harness, github_deployment};

const TIMEOUT: Duration = Duration::from_secs(90);

/// The Ready condition as `(status, reason)`, at the current generation.
fn ready_of(
    generation: Option<i64>,
    observed: Option<i64>,
    conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
) -> Option<(String, String)> {
    if observed != generation {
        return None;
    }
    let c = conditions.iter().find(|c| c.type_ == "Ready")?;
    Some((c.status.clone(), c.reason.clone()))
}

/// `(Ready status, reason, status.deploymentId)` of an AgentAssistant.
fn assistant_state(o: Option<&AgentAssistant>) -> Option<(String, String, Option<String>)> {
    let o = o?;
    let s = o.status.as_ref()?;
    let (status, reason) = ready_of(o.metadata.generation, s.observed_generation, &s.conditions)?;
    Some((status, reason, s.deployment_id.clone()))
}

/// `(Ready status, reason, status.deploymentId)` of an AgentCron.
fn cron_state(o: Option<&AgentCron>) -> Option<(String, String, Option<String>)> {
    let o = o?;
    let s = o.status.as_ref()?;
    let (status, reason) = ready_of(o.metadata.generation, s.observed_generation, &s.conditions)?;
    Some((status, reason, s.deployment_id.clone()))
}

fn assistant(deployment: &str) -> Value {
    json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentAssistant",
        "metadata": {"name": "helper"},
        "spec": {"deploymentRef": {"name": deployment}, "graphId": "agent"}})
}

fn cron(deployment: &str, target: Value) -> Value {
    let mut spec = json!({"deploymentRef": {"name": deployment}, "schedule": "0 3 * * *"});
    spec.as_object_mut()
        .unwrap()
        .extend(target.as_object().unwrap().clone());
    json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentCron",
        "metadata": {"name": "nightly"}, "spec": spec})
}

/// The HTTP status of `GET /assistants/{id}` on the agent server at `url`.
async fn assistant_status(url: &str, id: &str) -> u16 {
    reqwest::Client::new()
        .get(format!("{}/assistants/{id}", url.trim_end_matches('/')))
        .header("X-Api-Key", support::API_KEY)
        .send()
        .await
        .expect("GET /assistants/{id}")
        .status()
        .as_u16()
}

fn deployment_id(d: &AgentDeployment) -> String {
    d.status
        .as_ref()
        .and_then(|s| s.deployment_id.clone())
        .expect("a deployment id")
}

/// An external_docker deployment `agent` whose agent server is at `url`.
fn docker_at(url: &str) -> Value {
    AgentDeploymentManifest::docker("agent", "docker.io/acme/agent:1")
        .source_config("customUrl", url)
        .build()
}

#[tokio::test]
async fn on_the_real_agent_server_a_deployment_re_created_elsewhere_gets_its_assistant_and_cron_back()
 {
    test_support::skip_without!(Envtest);
    test_support::skip_without!(AgentServer);
    let first = support::langgraph::start("operator_lifecycle_first");
    let second = support::langgraph::start("operator_lifecycle_second");
    let h = Harness::quick("op-agents-recreated").start().await;
    h.apply(docker_at(&first.url)).await;
    let before = deployment_id(&h.wait_ready("agent", TIMEOUT).await);
    let assistants: Api<AgentAssistant> = Api::namespaced(h.client.clone(), &h.ns);
    let crons: Api<AgentCron> = Api::namespaced(h.client.clone(), &h.ns);
    support::apply_json(&assistants, "helper", assistant("agent")).await;
    support::apply_json(
        &crons,
        "nightly",
        cron("agent", json!({"assistantRef": {"name": "helper"}})),
    )
    .await;
    let on = |id: String| {
        move |state: Option<(String, String, Option<String>)>| {
            state.filter(|(s, _, d)| s == "True" && d.as_deref() == Some(id.as_str()))
        }
    };
    let ready_on_first = on(before.clone());
    support::wait_object(&assistants, "helper", TIMEOUT, "assistant Ready", |o| {
        ready_on_first(assistant_state(o))
    })
    .await;
    support::wait_object(&crons, "nightly", TIMEOUT, "cron Ready", |o| {
        ready_on_first(cron_state(o))
    })
    .await;
    let a = assistants.get("helper").await.unwrap();
    let id = a.status.unwrap().assistant_id.unwrap();
    let c = crons.get("nightly").await.unwrap();
    let uid = c.metadata.uid.clone().unwrap();
    let first_cron = c.status.unwrap().cron_id.unwrap();
    assert_eq!(assistant_status(&first.url, &id).await, 200);
    assert_eq!(tagged(&first.url, &uid).await.len(), 1);

    // The deployment goes (not blocked by the assistant and the cron, which
    // wait) and comes back on another agent server: a new id, an empty
    // server.
    h.api
        .delete("agent", &DeleteParams::default())
        .await
        .expect("deleting the deployment");
    support::wait_object(&h.api, "agent", TIMEOUT, "the deployment gone", |o| {
        o.is_none().then_some(())
    })
    .await;
    support::wait_object(&assistants, "helper", TIMEOUT, "DeploymentNotFound", |o| {
        assistant_state(o).filter(|(_, r, _)| r == "DeploymentNotFound")
    })
    .await;
    h.apply(docker_at(&second.url)).await;
    let after = deployment_id(&h.wait_ready("agent", TIMEOUT).await);
    assert_ne!(after, before, "a new deployment id");
    let ready_on_second = on(after.clone());
    support::wait_object(
        &assistants,
        "helper",
        TIMEOUT,
        "assistant Ready again",
        |o| ready_on_second(assistant_state(o)),
    )
    .await;
    support::wait_object(&crons, "nightly", TIMEOUT, "cron Ready again", |o| {
        ready_on_second(cron_state(o))
    })
    .await;
    assert_eq!(
        assistant_status(&second.url, &id).await,
        200,
        "the assistant is created again on the new server, same id"
    );
    let again = tagged(&second.url, &uid).await;
    assert_eq!(again.len(), 1, "one cron on the new server: {again:?}");
    let second_cron = crons
        .get("nightly")
        .await
        .unwrap()
        .status
        .unwrap()
        .cron_id
        .unwrap();
    assert_eq!(again[0].cron_id, second_cron);
    assert_ne!(
        second_cron, first_cron,
        "the old server's cron is forgotten"
    );
    assert_eq!(again[0].assistant_id.as_deref(), Some(id.as_str()));
    eprintln!(
        "re-created: deployment {before} → {after}; assistant {id} created again; cron {first_cron} → {second_cron}"
    );

    // Deleted from the server that holds them now.
    crons
        .delete("nightly", &DeleteParams::default())
        .await
        .unwrap();
    assistants
        .delete("helper", &DeleteParams::default())
        .await
        .unwrap();
    support::wait_object(&crons, "nightly", TIMEOUT, "cron gone", |o| {
        o.is_none().then_some(())
    })
    .await;
    support::wait_object(&assistants, "helper", TIMEOUT, "assistant gone", |o| {
        o.is_none().then_some(())
    })
    .await;
    assert!(tagged(&second.url, &uid).await.is_empty());
    assert_eq!(assistant_status(&second.url, &id).await, 404);
}

/// Successful agent server requests of the assistant and cron routes, as
/// `(route, status)`.
async fn agent_requests(h: &Harness) -> Vec<(String, String)> {
    let log = h.emulator.request_log().await;
    log.entries
        .iter()
        .filter(|r| r.route.contains("/assistants") || r.route.contains("/runs/crons"))
        .map(|r| (r.route.clone(), r.status.clone()))
        .collect()
}

fn count(log: &[(String, String)], method: &str, path: &str) -> usize {
    log.iter()
        .filter(|(r, s)| r.starts_with(method) && r.contains(path) && s.starts_with('2'))
        .count()
}

async fn set_paused(h: &Harness, paused: bool) {
    let change = json!({"metadata": {"annotations": {PAUSED_ANNOTATION: paused.to_string()}}});
    h.api
        .patch("agent", &PatchParams::default(), &Patch::Merge(&change))
        .await
        .expect("annotating the deployment");
}

#[tokio::test]
async fn a_paused_deployment_disables_its_crons_its_assistants_wait_and_both_go_on_when_unpaused() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-agents-paused").start().await;
    h.apply(github_deployment("agent", "main")).await;
    let dep = h.wait_ready("agent", TIMEOUT).await;
    let url = dep.status.as_ref().unwrap().url.clone().unwrap();
    let assistants: Api<AgentAssistant> = Api::namespaced(h.client.clone(), &h.ns);
    let crons: Api<AgentCron> = Api::namespaced(h.client.clone(), &h.ns);
    support::apply_json(&assistants, "helper", assistant("agent")).await;
    support::apply_json(
        &crons,
        "nightly",
        cron("agent", json!({"graphId": "agent"})),
    )
    .await;
    let reason_is = |want: &'static str| {
        move |state: Option<(String, String, Option<String>)>| {
            state.filter(|(_, r, _)| r == want).map(|(s, _, _)| s)
        }
    };
    support::wait_object(&assistants, "helper", TIMEOUT, "AssistantReady", |o| {
        reason_is("AssistantReady")(assistant_state(o))
    })
    .await;
    support::wait_object(&crons, "nightly", TIMEOUT, "CronReady", |o| {
        reason_is("CronReady")(cron_state(o))
    })
    .await;
    let uid = crons.get("nightly").await.unwrap().metadata.uid.unwrap();
    assert!(tagged(&url, &uid).await[0].enabled);
    let before = agent_requests(&h).await;

    // Paused: the cron is disabled by one PATCH, the assistant waits.
    set_paused(&h, true).await;
    let status = support::wait_object(&crons, "nightly", TIMEOUT, "DeploymentPaused", |o| {
        reason_is("DeploymentPaused")(cron_state(o))
    })
    .await;
    assert_eq!(status, "True", "the cron is as it should be: disabled");
    let status = support::wait_object(&assistants, "helper", TIMEOUT, "DeploymentPaused", |o| {
        reason_is("DeploymentPaused")(assistant_state(o))
    })
    .await;
    assert_eq!(status, "False", "the assistant waits");
    let c = &tagged(&url, &uid).await[0];
    assert!(!c.enabled, "disabled while paused: {c:?}");
    let cron_obj = crons.get("nightly").await.unwrap();
    let message = &cron_obj.status.as_ref().unwrap().conditions[0].message;
    assert!(message.contains("paused"), "{message}");
    let paused = agent_requests(&h).await;
    let new = &paused[before.len()..];
    assert_eq!(count(new, "PATCH", "/runs/crons"), 1, "one PATCH: {new:?}");
    assert_eq!(
        count(new, "", "/assistants"),
        0,
        "no assistant request while paused: {new:?}"
    );

    // Unpaused: enabled again by one PATCH, the assistant Ready again.
    set_paused(&h, false).await;
    support::wait_object(&crons, "nightly", TIMEOUT, "CronReady again", |o| {
        reason_is("CronReady")(cron_state(o))
    })
    .await;
    support::wait_object(
        &assistants,
        "helper",
        TIMEOUT,
        "AssistantReady again",
        |o| reason_is("AssistantReady")(assistant_state(o)),
    )
    .await;
    assert!(tagged(&url, &uid).await[0].enabled, "enabled again");
    let all = agent_requests(&h).await;
    let new = &all[before.len()..];
    assert_eq!(
        count(new, "PATCH", "/runs/crons"),
        2,
        "one PATCH each way: {new:?}"
    );
    let creates = new
        .iter()
        .filter(|(r, _)| r == "POST /agents/{deployment_id}/runs/crons")
        .count();
    assert_eq!(creates, 0, "no create: {new:?}");
    assert_eq!(count(new, "PATCH", "/assistants"), 0, "{new:?}");
}

#[tokio::test]
async fn deleting_a_referenced_deployment_is_not_blocked_and_its_assistants_and_crons_then_go_without_a_request()
 {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-agents-dep-deleted").start().await;
    h.apply(github_deployment("agent", "main")).await;
    h.wait_ready("agent", TIMEOUT).await;
    let assistants: Api<AgentAssistant> = Api::namespaced(h.client.clone(), &h.ns);
    let crons: Api<AgentCron> = Api::namespaced(h.client.clone(), &h.ns);
    support::apply_json(&assistants, "helper", assistant("agent")).await;
    support::apply_json(
        &crons,
        "nightly",
        cron("agent", json!({"graphId": "agent"})),
    )
    .await;
    let ready = |state: Option<(String, String, Option<String>)>| {
        state.filter(|(s, _, _)| s == "True").map(|_| ())
    };
    support::wait_object(&assistants, "helper", TIMEOUT, "assistant Ready", |o| {
        ready(assistant_state(o))
    })
    .await;
    support::wait_object(&crons, "nightly", TIMEOUT, "cron Ready", |o| {
        ready(cron_state(o))
    })
    .await;

    // The deployment goes although both still reference it.
    h.api
        .delete("agent", &DeleteParams::default())
        .await
        .expect("deleting the deployment");
    support::wait_object(&h.api, "agent", TIMEOUT, "the deployment gone", |o| {
        o.is_none().then_some(())
    })
    .await;
    let not_found = |state: Option<(String, String, Option<String>)>| {
        state
            .filter(|(s, r, _)| s == "False" && r == "DeploymentNotFound")
            .map(|_| ())
    };
    support::wait_object(&assistants, "helper", TIMEOUT, "DeploymentNotFound", |o| {
        not_found(assistant_state(o))
    })
    .await;
    support::wait_object(&crons, "nightly", TIMEOUT, "DeploymentNotFound", |o| {
        not_found(cron_state(o))
    })
    .await;
    let before = agent_requests(&h).await;

    // Their own deletion: no remote object can be left, so the finalizers
    // go at once and nothing is sent.
    assistants
        .delete("helper", &DeleteParams::default())
        .await
        .unwrap();
    crons
        .delete("nightly", &DeleteParams::default())
        .await
        .unwrap();
    support::wait_object(&assistants, "helper", TIMEOUT, "assistant gone", |o| {
        o.is_none().then_some(())
    })
    .await;
    support::wait_object(&crons, "nightly", TIMEOUT, "cron gone", |o| {
        o.is_none().then_some(())
    })
    .await;
    let after = agent_requests(&h).await;
    assert_eq!(
        after.len(),
        before.len(),
        "no agent server request for the deletion: {:?}",
        &after[before.len()..]
    );
}
