//! Every piece of advice in docs/TROUBLESHOOTING.md that changes an object
//! is applied, as written, to the real API server in the state the reason
//! describes (a remote deployment recorded in status or not, the object
//! being deleted), and must be accepted (issue "Day two in GitOps", item 2).
//! A second test fails when a row of the table advises a change (`spec.`,
//! `sourceConfig.`, `kubectl annotate`, `kubectl patch`) that the first does
//! not apply. Only the API server and the CRDs take part (no operator).

use crate::{common, support};

use agent_operator::api::{AgentAssistant, AgentControlPlane, AgentCron, AgentDeployment};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};
use support::{AgentDeploymentManifest, apply_json};

const REMOTE_ID: &str = "0d5a2b1c-3e4f-4a5b-8c6d-7e8f9a0b1c2d";
const OTHER_UUID: &str = "11111111-2222-4333-8444-555555555555";

/// The state an object is in when its condition shows a reason.
#[derive(Clone, Copy)]
enum State {
    /// Nothing was created (no `status.deploymentId`).
    NothingCreated,
    /// A remote deployment exists (`status.deploymentId` set).
    Remote,
    /// A remote exists and the object is being deleted.
    Deleting,
}

/// One reason's advice: the object it starts from, its state, and each
/// change the advice describes (merge patches, applied one by one to a
/// fresh copy of the object).
struct Advice {
    reason: &'static str,
    start: fn() -> Value,
    state: State,
    changes: Vec<Value>,
}

fn github() -> Value {
    AgentDeploymentManifest::github("x", "main")
        .secret("LOG_LEVEL", "info")
        .build()
}

fn github_by_ref() -> Value {
    let mut m = github();
    let sc = m["spec"]["sourceConfig"].as_object_mut().unwrap();
    sc.remove("integrationId");
    sc.insert("integrationRef".into(), json!({"name": "acme-gihtub"}));
    m
}

fn docker_on_listener() -> Value {
    AgentDeploymentManifest::docker("x", "ghcr.io/acme/agent:1")
        .source_config("customUrl", "https://agent.example.com")
        .source_config("listenerId", OTHER_UUID)
        .source_config("listenerConfig", json!({"k8sNamespace": "agnets"}))
        .build()
}

fn verified() -> Value {
    AgentDeploymentManifest::docker("x", "ghcr.io/acme/agent:1")
        .spec(
            "verify",
            json!({"assistants": {"graphId": "agnet", "minCount": 3}}),
        )
        .build()
}

fn verified_suite() -> Value {
    let mut m = github();
    m["spec"]["verify"] = json!({"suite": {"cases": [{
        "name": "greets", "assistantId": "agent",
        "input": {"messages": [{"role": "user", "content": "hello"}]},
        "assertions": [{"contains": "hello"}]
    }]}});
    m
}

fn verified_run() -> Value {
    AgentDeploymentManifest::docker("x", "ghcr.io/acme/agent:1")
        .spec(
            "verify",
            json!({"run": {"assistantId": "agent", "input": {"messages": []}, "timeoutSeconds": 10}}),
        )
        .build()
}

/// The source of a promotion, serving its image by tag.
fn promotion_source() -> Value {
    AgentDeploymentManifest::docker("x", "ghcr.io/acme/agent:1").build()
}

fn annotate(key: &str, value: Option<&str>) -> Value {
    json!({"metadata": {"annotations": {key: value}}})
}

fn advice() -> Vec<Advice> {
    let redeploy = annotate(
        "agentserver.dev/redeploy-requested-at",
        Some("2026-11-26T18:00:00Z"),
    );
    let pause = annotate("agentserver.dev/paused", Some("true"));
    vec![
        Advice {
            reason: "RevisionFailed",
            start: github,
            state: State::Remote,
            changes: vec![
                json!({"spec": {"sourceRevisionConfig": {"repoRef": "fix-1"}}}),
                redeploy.clone(),
            ],
        },
        Advice {
            reason: "RolledBack",
            start: github,
            state: State::Remote,
            changes: vec![
                json!({"spec": {"sourceRevisionConfig": {"repoRef": "fix-1"}}}),
                redeploy.clone(),
            ],
        },
        Advice {
            reason: "RevisionInterrupted",
            start: github,
            state: State::Remote,
            changes: vec![redeploy.clone()],
        },
        Advice {
            reason: "ProgressDeadlineExceeded",
            start: github,
            state: State::Remote,
            changes: vec![json!({"spec": {"progressDeadlineSeconds": 7200}})],
        },
        Advice {
            reason: "PromotionNotGranted",
            start: promotion_source,
            state: State::Remote,
            changes: vec![
                json!({"spec": {"promotionGrants": [{"namespace": "agents-production"}]}}),
            ],
        },
        Advice {
            reason: "PromotionSourceMismatch",
            start: promotion_source,
            state: State::Remote,
            changes: vec![
                json!({"spec": {"imagePolicy": "Pin"}}),
                json!({"spec": {"sourceRevisionConfig": {"imageUri": "ghcr.io/acme/agent@sha256:4f1c0a7e9b2d3c5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6"}}}),
                json!({"spec": {"verify": {"assistants": {"graphId": "agent"}}}}),
            ],
        },
        Advice {
            reason: "HostNotAllowed",
            start: docker_on_listener,
            state: State::Remote,
            changes: vec![
                json!({"spec": {"sourceConfig": {"customUrl": "https://agent.example.org"}}}),
            ],
        },
        Advice {
            reason: "PodPolicyRefused",
            start: || {
                let mut m = github();
                m["spec"]["sourceConfig"]["resourceSpec"] =
                    json!({"serviceAccountName": "root-sa"});
                m
            },
            state: State::Remote,
            changes: vec![
                json!({"spec": {"sourceConfig": {"resourceSpec": {"serviceAccountName": "agent-runner"}}}}),
            ],
        },
        Advice {
            reason: "InvalidAnnotation",
            start: github,
            state: State::Remote,
            changes: vec![
                annotate("agentserver.dev/paused", Some("true")),
                annotate("agentserver.dev/paused", Some("false")),
                annotate("agentserver.dev/paused", None),
            ],
        },
        Advice {
            reason: "NameConflict",
            start: github,
            state: State::NothingCreated,
            changes: vec![
                json!({"spec": {"deploymentId": OTHER_UUID}}),
                json!({"spec": {"adoptionPolicy": "ByName"}}),
                json!({"spec": {"name": "another-name"}}),
            ],
        },
        Advice {
            reason: "AlreadyOwned",
            start: || {
                let mut m = github();
                m["spec"]["deploymentId"] = OTHER_UUID.into();
                m
            },
            state: State::NothingCreated,
            changes: vec![json!({"spec": {"deploymentId": null}})],
        },
        Advice {
            reason: "CreateOutcomeUnknown",
            start: github,
            state: State::NothingCreated,
            changes: vec![json!({"spec": {"deploymentId": OTHER_UUID},
                "metadata": {"annotations": {"agentserver.dev/create-pending": null}}})],
        },
        Advice {
            reason: "AdoptionFailed",
            start: || {
                let mut m = github();
                m["spec"]["deploymentId"] = OTHER_UUID.into();
                m
            },
            state: State::NothingCreated,
            changes: vec![
                json!({"spec": {"deploymentId": "22222222-2222-4333-8444-555555555555"}}),
                json!({"spec": {"deploymentId": null}}),
            ],
        },
        Advice {
            reason: "AdoptionMismatch",
            start: || {
                let mut m = github();
                m["spec"]["deploymentId"] = OTHER_UUID.into();
                m
            },
            state: State::NothingCreated,
            changes: vec![json!({"spec": {"name": "support-agent", "sourceConfig": {
                "repoUrl": "https://github.com/acme/other-agent", "deploymentType": "prod",
                "integrationId": "33333333-2222-4333-8444-555555555555"}}})],
        },
        Advice {
            reason: "NothingToObserve",
            start: || {
                let mut m = github();
                m["spec"]["managementPolicy"] = "Observe".into();
                m
            },
            state: State::NothingCreated,
            changes: vec![
                json!({"spec": {"deploymentId": OTHER_UUID}}),
                json!({"spec": {"name": "support-agent"}}),
                json!({"spec": {"managementPolicy": "Manage"}}),
            ],
        },
        Advice {
            reason: "RemoteDiffers",
            start: || {
                let mut m = github();
                m["spec"]["managementPolicy"] = "Observe".into();
                m
            },
            state: State::Remote,
            changes: vec![
                json!({"spec": {"sourceRevisionConfig": {"repoRef": "release-2"}}}),
                json!({"spec": {"managementPolicy": "Manage"}}),
            ],
        },
        Advice {
            reason: "DriftFight",
            start: github,
            state: State::Remote,
            changes: vec![redeploy.clone()],
        },
        Advice {
            reason: "OutOfBandRevision",
            start: github,
            state: State::Remote,
            changes: vec![pause.clone()],
        },
        Advice {
            reason: "DeletionBlocked",
            start: github,
            state: State::Deleting,
            changes: vec![
                json!({"spec": {"deletionPolicy": "Orphan"}}),
                annotate("agentserver.dev/paused", None),
            ],
        },
        Advice {
            reason: "IntegrationNotFound",
            start: github_by_ref,
            state: State::NothingCreated,
            changes: vec![
                json!({"spec": {"sourceConfig": {"integrationRef": {"name": "acme-github"}}}}),
                json!({"spec": {"sourceConfig": {"integrationRef": null, "integrationId": OTHER_UUID}}}),
            ],
        },
        Advice {
            reason: "RepositoryNotAccessible",
            start: github,
            state: State::NothingCreated,
            changes: vec![
                json!({"spec": {"sourceConfig": {"repoUrl": "https://github.com/acme/the-agent"}}}),
            ],
        },
        Advice {
            reason: "PlacementInvalid",
            start: docker_on_listener,
            state: State::NothingCreated,
            changes: vec![
                json!({"spec": {"sourceConfig": {"listenerConfig": {"k8sNamespace": "agents"}}}}),
            ],
        },
        Advice {
            reason: "ListenerNotFound",
            start: docker_on_listener,
            state: State::NothingCreated,
            changes: vec![
                json!({"spec": {"sourceConfig": {"listenerId": "44444444-2222-4333-8444-555555555555"}}}),
            ],
        },
        Advice {
            reason: "AssistantsMissing",
            start: verified,
            state: State::Remote,
            changes: vec![
                json!({"spec": {"verify": {"assistants": {"graphId": "agent"}}}}),
                json!({"spec": {"verify": {"assistants": {"minCount": 1}}}}),
            ],
        },
        Advice {
            reason: "SuiteFailed",
            start: verified_suite,
            state: State::Remote,
            changes: vec![
                // Change the suite (a new digest runs it again).
                json!({"spec": {"verify": {"suite": {"minPassRate": 0.5}}}}),
                json!({"spec": {"rollback": {"onFailedVerification": true}}}),
            ],
        },
        Advice {
            reason: "RunFailed",
            start: verified_run,
            state: State::Remote,
            changes: vec![
                json!({"spec": {"verify": {"run": {"input": {"messages": [{"role": "user", "content": "hi"}]}}}}}),
                json!({"spec": {"verify": {"run": {"timeoutSeconds": 120}}}}),
            ],
        },
    ]
}

/// Creates `name` from `start` in `state`; a deleting object is held by a
/// finalizer of the test's own (no operator runs).
async fn prepare(api: &Api<AgentDeployment>, name: &str, start: Value, state: State) {
    let mut m = start;
    m["metadata"]["name"] = name.into();
    if let State::Deleting = state {
        m["metadata"]["finalizers"] = json!(["tests.agentserver.dev/hold"]);
        m["metadata"]["annotations"] = json!({"agentserver.dev/paused": "true"});
    }
    apply_json(api, name, m).await;
    if !matches!(state, State::NothingCreated) {
        api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"deploymentId": REMOTE_ID}})),
        )
        .await
        .expect("recording the remote in status");
    }
    if let State::Deleting = state {
        api.delete(name, &DeleteParams::default())
            .await
            .expect("deleting");
    }
}

#[tokio::test]
async fn every_piece_of_troubleshooting_advice_is_accepted_by_the_api_server() {
    test_support::skip_without!(Envtest);
    let client = common::shared_env().client().await;
    let ns = common::test_namespace(&client, "troubleshooting-advice").await;
    let api: Api<AgentDeployment> = Api::namespaced(client.clone(), &ns);
    let mut applied = 0;
    let mut refused = Vec::new();
    for a in advice() {
        for (i, change) in a.changes.iter().enumerate() {
            let name = format!("{}-{i}", a.reason.to_ascii_lowercase());
            prepare(&api, &name, (a.start)(), a.state).await;
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(change))
                .await
            {
                Ok(_) => applied += 1,
                Err(e) => refused.push(format!("{}: {change}: {e}", a.reason)),
            }
            if let State::Deleting = a.state {
                api.patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"finalizers": null}})),
                )
                .await
                .expect("releasing the test's finalizer");
            }
        }
    }
    eprintln!(
        "troubleshooting advice: {applied} changes applied, {} refused",
        refused.len()
    );
    assert!(
        refused.is_empty(),
        "advice the API server refuses:\n{}",
        refused.join("\n")
    );

    // The AgentAssistant advice (GraphNotFound): another graph, another
    // pinned version.
    let assistants: Api<AgentAssistant> = Api::namespaced(client.clone(), &ns);
    apply_json(
        &assistants,
        "helper",
        json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentAssistant",
               "metadata": {"name": "helper"},
               "spec": {"deploymentRef": {"name": "x"}, "graphId": "agnet", "version": 3}}),
    )
    .await;
    for change in [
        json!({"spec": {"graphId": "agent"}}),
        json!({"spec": {"version": 2}}),
    ] {
        assistants
            .patch("helper", &PatchParams::default(), &Patch::Merge(&change))
            .await
            .unwrap_or_else(|e| panic!("AgentAssistant advice {change} refused: {e}"));
    }

    // The AgentCron advice (CronSuspended, CronCompleted, CronRejected):
    // resume, a later endTime or none, another schedule or time zone.
    let crons: Api<AgentCron> = Api::namespaced(client.clone(), &ns);
    apply_json(
        &crons,
        "nightly",
        json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentCron",
               "metadata": {"name": "nightly"},
               "spec": {"deploymentRef": {"name": "x"}, "graphId": "agent",
                        "schedule": "61 * * * *", "suspend": true,
                        "endTime": "2026-01-01T00:00:00Z"}}),
    )
    .await;
    for change in [
        json!({"spec": {"suspend": false}}),
        json!({"spec": {"endTime": "2099-01-01T00:00:00Z"}}),
        json!({"spec": {"endTime": null}}),
        json!({"spec": {"schedule": "1 * * * *"}}),
        json!({"spec": {"timezone": "Europe/Paris"}}),
    ] {
        crons
            .patch("nightly", &PatchParams::default(), &Patch::Merge(&change))
            .await
            .unwrap_or_else(|e| panic!("AgentCron advice {change} refused: {e}"));
    }

    // The AgentControlPlane advice: another workspace id, a touch.
    let planes: Api<AgentControlPlane> = Api::namespaced(client, &ns);
    apply_json(
        &planes,
        "default",
        json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentControlPlane",
               "metadata": {"name": "default"},
               "spec": {"url": "https://api.host.langchain.com", "workspaceId": "ws",
                        "apiKeySecretRef": {"name": "k", "key": "api-key"}}}),
    )
    .await;
    for change in [
        json!({"spec": {"workspaceId": OTHER_UUID}}),
        json!({"metadata": {"annotations": {"checked": "1764180000"}}}),
    ] {
        planes
            .patch("default", &PatchParams::default(), &Patch::Merge(&change))
            .await
            .unwrap_or_else(|e| panic!("AgentControlPlane advice {change} refused: {e}"));
    }
}

/// The reasons whose "What to do" in docs/TROUBLESHOOTING.md tells to change
/// an object.
fn reasons_with_changing_advice() -> Vec<String> {
    let text = std::fs::read_to_string(test_support::repo_root().join("docs/TROUBLESHOOTING.md"))
        .expect("reading docs/TROUBLESHOOTING.md");
    text.lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| {
            let cells: Vec<&str> = l.split(" | ").collect();
            let reason = cells.first()?.trim_start_matches("| ").trim_matches('`');
            let todo = cells.last()?;
            [
                "spec.",
                "sourceConfig.",
                "kubectl annotate",
                "kubectl patch",
            ]
            .iter()
            .any(|k| todo.contains(k))
            .then(|| reason.to_owned())
        })
        .collect()
}

#[test]
fn the_advice_test_covers_every_row_that_advises_a_change() {
    let covered: Vec<&str> = advice().iter().map(|a| a.reason).collect();
    // Applied by the AgentControlPlane, AgentAssistant and AgentCron parts
    // of the test; ControlPlaneNotAllowed by cluster_planes.rs (the label
    // of docs/PLATFORM-PLANES.md lets the refused namespace in).
    let plane_reasons = [
        "ControlPlaneNotAllowed",
        "WorkspaceRequired",
        "DeploymentNotEnabled",
        "GraphNotFound",
        "CronSuspended",
        "CronCompleted",
        "CronRejected",
        // Adoption by `spec.deploymentId`: operator_adoption.rs.
        "Orphaned",
    ];
    let missing: Vec<String> = reasons_with_changing_advice()
        .into_iter()
        .filter(|r| !covered.contains(&r.as_str()) && !plane_reasons.contains(&r.as_str()))
        .collect();
    assert!(
        reasons_with_changing_advice().len() >= 8,
        "the table was read: {:?}",
        reasons_with_changing_advice()
    );
    assert!(missing.is_empty(), "advice no test applies: {missing:?}");
}
