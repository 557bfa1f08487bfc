//! GitOps health, proven with the real libraries: the kinds are put in
//! every state a user meets (new, creating, revision in progress, Ready,
//! revision failed, invalid spec, waiting for a Secret, paused, deleting;
//! an AgentCron Ready, refused, past its endTime, waiting) by
//! the real operator against the real API server; each object is read back
//! as the API server serves it, and `hack/health` (built from the Go module
//! proxy by `hack/health/install.sh`) computes:
//! - kstatus (`sigs.k8s.io/cli-utils/pkg/kstatus`, what Flux's health checks
//!   use): InProgress / Current / Failed / Terminating;
//! - the Argo CD health of `deploy/argocd/health.lua`, run by gopher-lua
//!   (the interpreter Argo CD embeds): Progressing / Healthy / Degraded /
//!   Suspended.
//!
//! The table is printed (`--nocapture`) and compared with what a user
//! expects, row by row.

use crate::{common, support};

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use agent_operator::api::{AgentControlPlane, AgentCron, AgentDeployment, AgentListener};
use kube::Api;
use kube::api::{ApiResource, DeleteParams, DynamicObject};
use serde_json::{Value, json};
use support::{AgentDeploymentManifest, Harness, WORKSPACE, github_deployment};

const TIMEOUT: Duration = Duration::from_secs(60);
const LISTENER_ID: &str = "6f1c2a3e-0000-4000-8000-000000000009";
const UNKNOWN_LISTENER_ID: &str = "6f1c2a3e-0000-4000-8000-0000000000ff";

/// `hack/health/install.sh`'s binary (built once, cached in `.cache/health`).
pub(crate) fn health_bin() -> PathBuf {
    let root = test_support::repo_root();
    let out = Command::new(root.join("hack/health/install.sh"))
        .output()
        .expect("running hack/health/install.sh (needs Go; `make setup`)");
    assert!(
        out.status.success(),
        "hack/health/install.sh failed (run `make setup`): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    PathBuf::from(stdout.lines().last().expect("a path").trim())
}

/// The kstatus and Argo CD (Lua) verdicts of `objects` (as the API server
/// serves them), one JSON object per input (`kstatus`, `argocd`,
/// `argocdMessage`), computed by `hack/health` (`health`, from
/// [`health_bin`]); the input is kept as `file` in the test logs.
pub(crate) fn verdicts_of(health: &std::path::Path, file: &str, objects: &[&Value]) -> Vec<Value> {
    let dir = support::log_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join(file);
    std::fs::write(&input, serde_json::to_vec_pretty(&objects).unwrap()).unwrap();
    let lua = test_support::repo_root().join("deploy/argocd/health.lua");
    let out = Command::new(health)
        .arg("-lua")
        .arg(&lua)
        .arg(&input)
        .output()
        .expect("running hack/health");
    assert!(
        out.status.success(),
        "hack/health failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// The object `name` of kind `K` in `ns` exactly as the API server serves it.
async fn raw<K>(client: &kube::Client, ns: &str, name: &str) -> Value
where
    K: kube::Resource<DynamicType = ()>,
{
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &ApiResource::erase::<K>(&()));
    serde_json::to_value(api.get(name).await.expect("reading the object")).unwrap()
}

/// Polls the object until `check` holds on its JSON, or panics.
async fn wait_raw<K>(
    client: &kube::Client,
    ns: &str,
    name: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value
where
    K: kube::Resource<DynamicType = ()>,
{
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let v = raw::<K>(client, ns, name).await;
        if check(&v) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "{name}: timed out waiting for {what}; last: {:#}",
            v["status"]
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The `(status, reason)` of condition `type_` in an object's JSON.
fn cond(v: &Value, type_: &str) -> Option<(String, String)> {
    v["status"]["conditions"].as_array()?.iter().find_map(|c| {
        (c["type"] == type_).then(|| {
            (
                c["status"].as_str().unwrap_or("").to_owned(),
                c["reason"].as_str().unwrap_or("").to_owned(),
            )
        })
    })
}

fn observed(v: &Value) -> bool {
    v["status"]["observedGeneration"] == v["metadata"]["generation"]
}

fn has(v: &Value, type_: &str, status: &str, reason: &str) -> bool {
    observed(v) && cond(v, type_) == Some((status.into(), reason.into()))
}

/// One row: the state's name, the object, and the expected verdicts.
struct Row {
    state: &'static str,
    object: Value,
    kstatus: &'static str,
    argocd: &'static str,
}

#[tokio::test]
async fn kstatus_and_argocd_lua_agree_with_the_user_in_every_state() {
    test_support::skip_without!(Envtest);
    let health = health_bin();
    let mut h = Harness::builder("gitops-health")
        .step_seconds(1.0)
        // Remote deletion takes long: "deleting" lasts.
        .delete_seconds(120.0)
        .scenarios(&["BUILD_FAILED:repo_ref=broken", "STUCK:repo_ref=stuck"])
        .listener(&format!("{WORKSPACE}={LISTENER_ID}:cluster-a:agents"))
        .budget(support::budget::Budget::fleet())
        .start()
        .await;
    let (client, ns) = (h.client.clone(), h.ns.clone());
    let mut rows: Vec<Row> = Vec::new();
    let deployments = &h.api;

    // new: an object no operator has looked at (a namespace nobody watches).
    let other = common::test_namespace(&client, "gitops-health-unwatched").await;
    let unwatched: Api<AgentDeployment> = Api::namespaced(client.clone(), &other);
    support::apply_json(&unwatched, "new", github_deployment("new", "main")).await;
    let planes_other: Api<AgentControlPlane> = Api::namespaced(client.clone(), &other);
    support::apply_json(
        &planes_other,
        "new-plane",
        json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentControlPlane",
               "metadata": {"name": "new-plane"},
               "spec": {"region": "us", "workspaceId": WORKSPACE,
                        "apiKeySecretRef": {"name": "k", "key": "api-key"}}}),
    )
    .await;
    rows.push(Row {
        state: "AgentDeployment new (not yet observed)",
        object: raw::<AgentDeployment>(&client, &other, "new").await,
        kstatus: "InProgress",
        argocd: "Progressing",
    });
    rows.push(Row {
        state: "AgentControlPlane new (not yet observed)",
        object: raw::<AgentControlPlane>(&client, &other, "new-plane").await,
        kstatus: "InProgress",
        argocd: "Progressing",
    });

    // creating: the control plane answers the create with 503 (retried).
    h.emulator
        .set_faults(json!({"reject": [{"route": "POST /v2/deployments", "status": 503}]}))
        .await;
    h.apply(github_deployment("creating", "main")).await;
    rows.push(Row {
        state: "AgentDeployment creating (create answered 503, retrying)",
        object: wait_raw::<AgentDeployment>(&client, &ns, "creating", "Reconciling=True", |v| {
            observed(v) && cond(v, "Reconciling").is_some_and(|c| c.0 == "True")
        })
        .await,
        kstatus: "InProgress",
        argocd: "Progressing",
    });
    // invalid spec: the control plane refuses the create with 400.
    h.emulator
        .set_faults(
            json!({"reject": [{"route": "POST /v2/deployments", "status": 400,
            "detail": "source_config.repo_url: repository not found"}]}),
        )
        .await;
    h.apply(github_deployment("invalid", "main")).await;
    rows.push(Row {
        state: "AgentDeployment invalid spec (create refused with 400)",
        object: wait_raw::<AgentDeployment>(&client, &ns, "invalid", "Stalled InvalidSpec", |v| {
            has(v, "Stalled", "True", "InvalidSpec")
        })
        .await,
        kstatus: "Failed",
        argocd: "Degraded",
    });
    h.emulator.set_faults(json!({})).await;

    // revision in progress, Ready, revision failed.
    h.apply(github_deployment("in-progress", "stuck")).await;
    h.apply(github_deployment("ready", "main")).await;
    h.apply(github_deployment("failed", "broken")).await;
    rows.push(Row {
        state: "AgentDeployment revision in progress",
        object: wait_raw::<AgentDeployment>(&client, &ns, "in-progress", "BUILDING", |v| {
            observed(v) && v["status"]["revisionStatus"] == "BUILDING"
        })
        .await,
        kstatus: "InProgress",
        argocd: "Progressing",
    });
    rows.push(Row {
        state: "AgentDeployment Ready (revision DEPLOYED)",
        object: wait_raw::<AgentDeployment>(&client, &ns, "ready", "Ready", |v| {
            has(v, "Ready", "True", "RevisionDeployed")
        })
        .await,
        kstatus: "Current",
        argocd: "Healthy",
    });

    // AgentCron on the Ready deployment's agent server: Ready, a schedule
    // the server refuses (422), an endTime that has passed; and one whose
    // deployment does not exist.
    let crons: Api<AgentCron> = Api::namespaced(client.clone(), &ns);
    for (name, deployment, extra) in [
        ("ticks", "ready", json!({})),
        ("refused", "ready", json!({"schedule": "61 * * * *"})),
        ("ended", "ready", json!({"endTime": "2026-01-01T00:00:00Z"})),
        ("orphaned", "nowhere", json!({})),
    ] {
        let mut spec = json!({"deploymentRef": {"name": deployment}, "graphId": "agent",
            "schedule": "*/5 * * * *"});
        spec.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        support::apply_json(
            &crons,
            name,
            json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentCron",
                   "metadata": {"name": name}, "spec": spec}),
        )
        .await;
    }
    for (state, name, status, reason, kstatus, argocd) in [
        (
            "AgentCron Ready",
            "ticks",
            ("Ready", "True"),
            "CronReady",
            "Current",
            "Healthy",
        ),
        (
            "AgentCron schedule refused (422)",
            "refused",
            ("Stalled", "True"),
            "CronRejected",
            "Failed",
            "Degraded",
        ),
        (
            "AgentCron endTime passed (disabled by the operator)",
            "ended",
            ("Ready", "True"),
            "CronCompleted",
            "Current",
            "Healthy",
        ),
        (
            "AgentCron waiting for its deployment",
            "orphaned",
            ("Reconciling", "True"),
            "DeploymentNotFound",
            "InProgress",
            "Progressing",
        ),
    ] {
        rows.push(Row {
            state,
            object: wait_raw::<AgentCron>(&client, &ns, name, reason, |v| {
                observed(v) && has(v, status.0, status.1, reason)
            })
            .await,
            kstatus,
            argocd,
        });
    }
    // A preview past its expiry: deleted once, then terminal.
    let mut preview = github_deployment("expired", "main");
    preview["spec"]["expiry"] = json!({"afterCreationSeconds": 2});
    h.apply(preview).await;
    rows.push(Row {
        state: "AgentDeployment expired preview (spec.expiry)",
        object: wait_raw::<AgentDeployment>(&client, &ns, "expired", "Stalled Expired", |v| {
            has(v, "Stalled", "True", "Expired")
        })
        .await,
        kstatus: "Failed",
        argocd: "Degraded",
    });
    rows.push(Row {
        state: "AgentDeployment revision failed (BUILD_FAILED)",
        object: wait_raw::<AgentDeployment>(&client, &ns, "failed", "RevisionFailed", |v| {
            has(v, "Stalled", "True", "RevisionFailed")
        })
        .await,
        kstatus: "Failed",
        argocd: "Degraded",
    });

    // spec.verify: DEPLOYED, but the agent server is down (retried), or
    // does not know the assistant (needs a person).
    let mut manifest = github_deployment("unverified", "main");
    manifest["spec"]["verify"] = json!({"run": {"assistantId": "no-such-assistant"}});
    h.apply(manifest).await;
    let closed = format!("http://127.0.0.1:{}", support::free_port());
    h.apply(
        AgentDeploymentManifest::docker("server-down", "docker.io/acme/agent:1")
            .source_config("customUrl", closed.as_str())
            .spec("verify", json!({"assistants": {"graphId": "agent"}}))
            .build(),
    )
    .await;
    rows.push(Row {
        state: "AgentDeployment verification failing (agent server down, retried)",
        object: wait_raw::<AgentDeployment>(&client, &ns, "server-down", "Unreachable", |v| {
            has(v, "Verified", "False", "AgentServerUnreachable")
        })
        .await,
        kstatus: "InProgress",
        argocd: "Progressing",
    });
    rows.push(Row {
        state: "AgentDeployment verification failed (unknown assistant)",
        object: wait_raw::<AgentDeployment>(&client, &ns, "unverified", "AssistantNotFound", |v| {
            has(v, "Stalled", "True", "AssistantNotFound")
        })
        .await,
        kstatus: "Failed",
        argocd: "Degraded",
    });

    // spec.rollback: a new revision failed its verification and the last
    // verified one was redeployed; the spec did not converge.
    let mut manifest = github_deployment("rolled-back", "main");
    manifest["spec"]["verify"] = json!({"assistants": {"graphId": "agent"}});
    manifest["spec"]["rollback"] = json!({"onFailedVerification": true});
    h.apply(manifest.clone()).await;
    wait_raw::<AgentDeployment>(&client, &ns, "rolled-back", "verified", |v| {
        has(v, "Verified", "True", "Verified")
    })
    .await;
    manifest["spec"]["sourceRevisionConfig"]["repoRef"] = json!("unhealthy");
    h.apply(manifest).await;
    rows.push(Row {
        state: "AgentDeployment rolled back after a failed verification (spec.rollback)",
        object: wait_raw::<AgentDeployment>(&client, &ns, "rolled-back", "RolledBack", |v| {
            has(v, "Stalled", "True", "RolledBack")
        })
        .await,
        kstatus: "Failed",
        argocd: "Degraded",
    });

    // waiting for a Secret.
    let mut manifest = github_deployment("needs-secret", "main");
    manifest["spec"]["secrets"] = json!([{"name": "OPENAI_API_KEY",
        "valueFrom": {"secretKeyRef": {"name": "not-there-yet", "key": "key"}}}]);
    h.apply(manifest).await;
    rows.push(Row {
        state: "AgentDeployment waiting for a Secret",
        object: wait_raw::<AgentDeployment>(&client, &ns, "needs-secret", "SecretNotFound", |v| {
            has(v, "Stalled", "True", "SecretNotFound")
        })
        .await,
        kstatus: "Failed",
        argocd: "Degraded",
    });

    // observed, drifted: a deployment made outside on another branch,
    // observed under `managementPolicy: Observe` by a spec naming `main`.
    h.cp.create_deployment(&support::github_create_body("observed", "old-branch"))
        .await
        .expect("the outside create");
    let mut manifest = github_deployment("observed", "main");
    manifest["spec"]["managementPolicy"] = json!("Observe");
    h.apply(manifest).await;
    rows.push(Row {
        state: "AgentDeployment observed (managementPolicy: Observe), differs from the spec",
        // Its outside revision done: an observed one in progress is InProgress.
        object: wait_raw::<AgentDeployment>(&client, &ns, "observed", "Drifted", |v| {
            has(v, "Drifted", "True", "RemoteDiffers")
                && cond(v, "Ready").is_some_and(|(status, _)| status == "True")
        })
        .await,
        kstatus: "Current",
        argocd: "Degraded",
    });

    // paused.
    let mut manifest = github_deployment("paused", "main");
    manifest["metadata"]["annotations"] = json!({"agentserver.dev/paused": "true"});
    h.apply(manifest).await;
    rows.push(Row {
        state: "AgentDeployment paused (annotation)",
        object: wait_raw::<AgentDeployment>(&client, &ns, "paused", "Paused", |v| {
            has(v, "Ready", "False", "Paused")
        })
        .await,
        // kstatus has no "suspended": Ready=False reads InProgress, so a
        // Flux `wait` does not call a paused resource healthy.
        kstatus: "InProgress",
        argocd: "Suspended",
    });

    // deleting: the remote delete takes 120 s, the finalizer stays.
    deployments
        .delete("ready", &DeleteParams::default())
        .await
        .unwrap();
    rows.push(Row {
        state: "AgentDeployment deleting (finalizer held)",
        object: wait_raw::<AgentDeployment>(&client, &ns, "ready", "deletionTimestamp", |v| {
            v["metadata"]["deletionTimestamp"].is_string()
        })
        .await,
        kstatus: "Terminating",
        argocd: "Progressing",
    });

    // AgentControlPlane: Ready, and stalled on a missing key Secret.
    rows.push(Row {
        state: "AgentControlPlane Ready",
        object: wait_raw::<AgentControlPlane>(&client, &ns, "default", "Ready", |v| {
            observed(v) && cond(v, "Ready").is_some_and(|c| c.0 == "True")
        })
        .await,
        kstatus: "Current",
        argocd: "Healthy",
    });
    let planes: Api<AgentControlPlane> = Api::namespaced(client.clone(), &ns);
    support::apply_json(
        &planes,
        "keyless",
        json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentControlPlane",
               "metadata": {"name": "keyless"},
               "spec": {"url": h.emulator.base_url, "workspaceId": WORKSPACE,
                        "apiKeySecretRef": {"name": "missing-key", "key": "api-key"}}}),
    )
    .await;
    rows.push(Row {
        state: "AgentControlPlane waiting for its key Secret",
        object: wait_raw::<AgentControlPlane>(&client, &ns, "keyless", "Stalled", |v| {
            observed(v) && cond(v, "Stalled").is_some_and(|c| c.0 == "True")
        })
        .await,
        kstatus: "Failed",
        argocd: "Degraded",
    });

    // AgentListener: Ready, and a listener the control plane does not know.
    let listeners: Api<AgentListener> = Api::namespaced(client.clone(), &ns);
    for (name, id) in [("listener", LISTENER_ID), ("ghost", UNKNOWN_LISTENER_ID)] {
        support::apply_json(
            &listeners,
            name,
            json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentListener",
                   "metadata": {"name": name}, "spec": {"listenerId": id}}),
        )
        .await;
    }
    rows.push(Row {
        state: "AgentListener Ready",
        object: wait_raw::<AgentListener>(&client, &ns, "listener", "Ready", |v| {
            observed(v) && cond(v, "Ready").is_some_and(|c| c.0 == "True")
        })
        .await,
        kstatus: "Current",
        argocd: "Healthy",
    });
    rows.push(Row {
        state: "AgentListener not found on the control plane",
        object: wait_raw::<AgentListener>(&client, &ns, "ghost", "Stalled", |v| {
            observed(v) && cond(v, "Stalled").is_some_and(|c| c.0 == "True")
        })
        .await,
        kstatus: "Failed",
        argocd: "Degraded",
    });

    // Run both verdicts on the objects as served.
    let objects: Vec<&Value> = rows.iter().map(|r| &r.object).collect();
    let verdicts = verdicts_of(&health, "gitops-health-objects.json", &objects);
    assert_eq!(verdicts.len(), rows.len());
    let mut table =
        String::from("| State | kstatus | Argo CD (Lua) | Argo CD message |\n|---|---|---|---|\n");
    let mut wrong = Vec::new();
    for (row, v) in rows.iter().zip(&verdicts) {
        let (k, a) = (
            v["kstatus"].as_str().unwrap_or(""),
            v["argocd"].as_str().unwrap_or(""),
        );
        let msg: String = v["argocdMessage"]
            .as_str()
            .unwrap_or("")
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(90)
            .collect();
        table.push_str(&format!("| {} | {k} | {a} | {msg} |\n", row.state));
        if k != row.kstatus || a != row.argocd {
            wrong.push(format!(
                "{}: kstatus {k} (expected {}), Argo CD {a} (expected {}); {v}",
                row.state, row.kstatus, row.argocd
            ));
        }
    }
    println!("\n{table}");
    assert!(wrong.is_empty(), "{}\n{table}", wrong.join("\n"));
    drop(h.operator.take());
}

/// The Argo CD ConfigMap snippet carries `deploy/argocd/health.lua` for each
/// kind of the registry (`api::crds`), byte for byte, and no other key
/// (`make generate` writes it).
#[test]
fn argocd_configmap_snippet_embeds_the_tested_script() {
    let root = test_support::repo_root();
    let script = std::fs::read_to_string(root.join("deploy/argocd/health.lua")).unwrap();
    let cm: Value = yaml_serde::from_str(
        &std::fs::read_to_string(root.join("deploy/argocd/argocd-cm.yaml")).unwrap(),
    )
    .unwrap();
    let kinds: Vec<String> = agent_operator::api::crds()
        .into_iter()
        .map(|crd| crd.spec.names.kind)
        .collect();
    assert_eq!(
        cm["data"].as_object().map(serde_json::Map::len),
        Some(kinds.len()),
        "one key per kind: run make generate"
    );
    for kind in kinds {
        let key = format!("resource.customizations.health.agentserver.dev_{kind}");
        assert_eq!(
            cm["data"][&key].as_str(),
            Some(script.as_str()),
            "{key} in deploy/argocd/argocd-cm.yaml differs from deploy/argocd/health.lua"
        );
    }
}
