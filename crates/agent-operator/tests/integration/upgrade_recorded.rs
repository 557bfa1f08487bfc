//! An upgrade in place from the previous release, on what that release
//! left behind (docs/VERSIONING.md, "Upgrade"): the fixture
//! `crates/agent-operator/fixtures/previous-release/fleet.json` was
//! recorded by running the previous release's operator (`git show
//! 64b0dfc`, built with `cargo build`) on 25 AgentDeployments until Ready
//! ([`record_the_previous_release`], ignored: it needs that binary). It
//! holds the objects as that operator wrote them (spec, annotations,
//! finalizers, status) and the deployments it created on the control plane.
//!
//! [`an_upgrade_from_the_previous_release_creates_and_redeploys_nothing`]
//! puts that state back on a kube-apiserver of its own under the previous
//! release's CRDs (the remote deployments are created again on the
//! emulator, which gives them new ids: the objects' status is rewritten to
//! name them), applies this tree's CRDs over them as `helm upgrade` does,
//! starts this tree's operator and counts what it sends: every object
//! Ready on its generation with 0 creates, 0 patches, 0 redeploys and 0
//! deletes.

use crate::common;
use crate::support::{Harness, OPERATOR_NAMESPACE, OperatorOptions, OperatorProcess};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_operator::api::AgentDeployment;
use agent_operator::controlplane::types::DeploymentCreate;
use serde_json::{Value, json};
use test_support::manifests::AgentDeploymentManifest;

/// The fixture, relative to the repository.
const FIXTURE: &str = "crates/agent-operator/fixtures/previous-release/fleet.json";
/// The operator's Secret holding the key of its secrets' HMAC.
const HASH_KEY: &str = agent_operator::controller::hash_key::DEFAULT_SECRET_NAME;
/// Objects in the recorded fleet.
const FLEET: usize = 25;

fn repo() -> &'static Path {
    test_support::repo_root()
}

fn previous_crds() -> PathBuf {
    repo().join("crates/agent-operator/fixtures/previous-release/crds")
}

/// Applies every CRD of `dir` server-side over what `env` has.
fn apply_crds(env: &test_support::envtest::TestEnv, dir: &Path) {
    let mut c = crate::install_manifests::kubectl_on(env);
    c.args([
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        &dir.display().to_string(),
    ]);
    crate::install_manifests::succeed(c, None);
}

/// The `i`th AgentDeployment of the recorded fleet: github deployments on
/// two branches, some with a literal secret, and image deployments.
fn member(i: usize) -> Value {
    let name = format!("agent-{i:02}");
    if i % 5 == 4 {
        return AgentDeploymentManifest::docker(
            &name,
            &format!("registry.example.com/agent:1.{i}"),
        )
        .build();
    }
    let branch = if i.is_multiple_of(2) {
        "main"
    } else {
        "release-1"
    };
    let manifest = AgentDeploymentManifest::github(&name, branch);
    if i.is_multiple_of(3) {
        manifest.secret("LOG_LEVEL", "info").build()
    } else {
        manifest.build()
    }
}

/// What of an object the next operator reads: name, labels, annotations,
/// finalizers, spec and status (no uid, resourceVersion or managed fields,
/// which the API server sets).
fn recorded_object(obj: &Value) -> Value {
    let meta = &obj["metadata"];
    json!({
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "metadata": {
            "name": meta["name"],
            "labels": meta.get("labels").cloned().unwrap_or(json!({})),
            "annotations": meta.get("annotations").cloned().unwrap_or(json!({})),
            "finalizers": meta.get("finalizers").cloned().unwrap_or(json!([])),
            "generation": meta["generation"],
        },
        "spec": obj["spec"],
        "status": obj["status"],
    })
}

/// The create body of a deployment recorded in the emulator's store, with
/// the literal secret values of its object's spec (the store keeps names).
fn create_body(remote: &Value, object: &Value) -> DeploymentCreate {
    let secrets: Vec<Value> = object["spec"]["secrets"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|s| json!({"name": s["name"], "value": s["value"]}))
        .collect();
    // What the service sets itself (the URL, the resolved commit) and the
    // fields left empty are not part of a create.
    let fields = |v: &Value, read_only: &[&str]| -> Value {
        let mut v = v.clone();
        if let Some(map) = v.as_object_mut() {
            map.retain(|k, x| !x.is_null() && !read_only.contains(&k.as_str()));
        }
        v
    };
    // Of the source config, the fields the object sets (the service fills
    // in defaults, some of which it refuses in a create).
    let chosen = |v: &Value, spec: &Value| -> Value {
        let mut v = v.clone();
        if let Some(map) = v.as_object_mut() {
            map.retain(|k, _| {
                let camel: String = k
                    .split('_')
                    .enumerate()
                    .map(|(i, w)| {
                        if i == 0 {
                            w.to_owned()
                        } else {
                            w[..1].to_uppercase() + &w[1..]
                        }
                    })
                    .collect();
                spec.get(&camel).is_some()
            });
        }
        v
    };
    let body = json!({
        "name": remote["name"],
        "source": remote["source"],
        "source_config": chosen(&remote["source_config"], &object["spec"]["sourceConfig"]),
        "source_revision_config": fields(&remote["source_revision_config"], &["repo_commit_sha"]),
        "secrets": secrets,
    });
    serde_json::from_value(body.clone()).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// Records the fixture: `PREVIOUS_OPERATOR=<the previous release's
/// agent-operator binary> cargo test -p agent-operator --test integration
/// -- --ignored record_the_previous_release`.
#[tokio::test]
#[ignore = "records the fixture from the previous release's binary (PREVIOUS_OPERATOR)"]
async fn record_the_previous_release() {
    test_support::skip_without!(Envtest);
    let binary = PathBuf::from(std::env::var("PREVIOUS_OPERATOR").expect("PREVIOUS_OPERATOR"));
    let env = common::own_env(&[]).await;
    apply_crds(&env, &previous_crds());
    let h = Harness::quick("record-previous")
        .on(&env)
        .without_operator()
        .start()
        .await;
    let operator = OperatorProcess::start_with(
        env.kubeconfig_path(),
        OperatorOptions {
            log_name: "record-previous",
            namespaces: vec![&h.ns],
            binary: Some(&binary),
            ..OperatorOptions::default()
        },
    );
    for i in 0..FLEET {
        h.apply(member(i)).await;
    }
    for i in 0..FLEET {
        h.wait_ready(&format!("agent-{i:02}"), Duration::from_secs(180))
            .await;
    }
    drop(operator);
    // The key of the secrets' HMAC (status.secretsHash) stays in the
    // cluster across an upgrade.
    let mut c = crate::install_manifests::kubectl_on(&env);
    c.args([
        "-n",
        OPERATOR_NAMESPACE,
        "get",
        "secret",
        HASH_KEY,
        "-o",
        "json",
    ]);
    let (out, _) = crate::install_manifests::succeed(c, None);
    let hash_key: Value = serde_json::from_str(&out).unwrap();
    let mut c = crate::install_manifests::kubectl_on(&env);
    c.args(["-n", &h.ns, "get", "agd", "-o", "json"]);
    let (out, _) = crate::install_manifests::succeed(c, None);
    let list: Value = serde_json::from_str(&out).unwrap();
    let objects: Vec<Value> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(recorded_object)
        .collect();
    let store = h.emulator.store().await;
    let remotes: Vec<Value> = store["workspaces"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|w| w["deployments"].as_array().cloned().unwrap_or_default())
        .collect();
    let fixture = json!({
        "recordedWith": "agent-operator of 64b0dfc (the previous release), cargo build",
        "emulator": h.emulator.base_url,
        "hashKey": hash_key["data"],
        "objects": objects,
        "remotes": remotes,
    });
    std::fs::write(
        repo().join(FIXTURE),
        serde_json::to_string_pretty(&fixture).unwrap() + "\n",
    )
    .unwrap();
}

/// Every occurrence of a key of `ids` in the strings of `v`, replaced by its
/// value.
fn rewrite_ids(v: &mut Value, ids: &BTreeMap<String, String>) {
    match v {
        Value::String(s) => {
            for (old, new) in ids {
                if s.contains(old.as_str()) {
                    *s = s.replace(old.as_str(), new);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|x| rewrite_ids(x, ids)),
        Value::Object(map) => map.values_mut().for_each(|x| rewrite_ids(x, ids)),
        _ => {}
    }
}

#[tokio::test]
async fn an_upgrade_from_the_previous_release_creates_and_redeploys_nothing() {
    test_support::skip_without!(Envtest);
    let text = std::fs::read_to_string(repo().join(FIXTURE)).expect("the recorded fixture");
    let fixture: Value = serde_json::from_str(&text).unwrap();
    let objects = fixture["objects"].as_array().unwrap();
    let remotes = fixture["remotes"].as_array().unwrap();
    assert_eq!((objects.len(), remotes.len()), (FLEET, FLEET));

    let env = common::own_env(&[]).await;
    apply_crds(&env, &previous_crds());
    // A revision reaches DEPLOYED quickly, as the recorded ones had.
    let h = Harness::quick("upgrade-recorded")
        .on(&env)
        .step_seconds(0.2)
        .without_operator()
        .start()
        .await;

    // The control plane as the previous release left it: the same
    // deployments, created again (new ids), each with its one revision.
    let mut ids = BTreeMap::new();
    for remote in remotes {
        let object = objects
            .iter()
            .find(|o| o["metadata"]["name"] == remote["name"])
            .unwrap_or_else(|| panic!("the object of {}", remote["name"]));
        let created =
            h.cp.create_deployment(&create_body(remote, object))
                .await
                .expect("creating a recorded deployment");
        ids.insert(
            remote["id"].as_str().unwrap().to_owned(),
            created.id.clone(),
        );
        let old_revision = remote["latest_revision_id"].as_str().unwrap();
        let new_revision = created.latest_revision_id.clone().expect("a revision");
        ids.insert(old_revision.to_owned(), new_revision);
    }

    // The recording's control plane URL is this emulator's now.
    ids.insert(
        fixture["emulator"].as_str().unwrap().to_owned(),
        h.emulator.base_url.clone(),
    );
    // The key of the secrets' HMAC, as the cluster kept it.
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": HASH_KEY, "namespace": OPERATOR_NAMESPACE},
        "data": fixture["hashKey"],
    });
    let mut c = crate::install_manifests::kubectl_on(&env);
    c.args(["apply", "-f", "-"]);
    crate::install_manifests::succeed(c, Some(&secret.to_string()));

    // The objects as the previous release left them, ids rewritten.
    let api = &h.api;
    for object in objects {
        let mut object = object.clone();
        rewrite_ids(&mut object, &ids);
        let status = object["status"].take();
        let name = object["metadata"]["name"].as_str().unwrap().to_owned();
        object["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("generation");
        let created: AgentDeployment = serde_json::from_value(object.clone()).unwrap();
        api.create(&Default::default(), &created)
            .await
            .unwrap_or_else(|e| panic!("creating {name}: {e}"));
        api.patch_status(
            &name,
            &Default::default(),
            &kube::api::Patch::Merge(&json!({ "status": status })),
        )
        .await
        .unwrap_or_else(|e| panic!("writing the status of {name}: {e}"));
    }
    // Every remote revision DEPLOYED before the operator starts.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let store = h.emulator.store().await;
        let deployed = ids
            .iter()
            .filter(|(old, _)| remotes.iter().any(|r| r["id"] == old.as_str()))
            .all(|(_, new)| {
                crate::support::stored_deployment(&store, new)["revisions"][0]["status"]
                    == "DEPLOYED"
            });
        if deployed {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "revisions DEPLOYED");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // `helm upgrade`: this tree's CRDs over the objects, then its operator.
    apply_crds(&env, &common::crds_dir());
    let mark = h.emulator.request_mark().await;
    // Drift checks every 2 s (jittered), so that each object is compared
    // with its remote deployment within the test, not only trusted.
    let operator = h.start_operator(&["--resync-interval-seconds", "2"]);
    for object in objects {
        let name = object["metadata"]["name"].as_str().unwrap();
        let ready = h.wait_ready(name, Duration::from_secs(120)).await;
        let status = ready.status.as_ref().expect("a status");
        assert_eq!(
            status.observed_generation, ready.metadata.generation,
            "{name}"
        );
    }
    // Every remote read at least twice (two drift checks) by the new
    // operator.
    let new_ids: Vec<&String> = ids
        .iter()
        .filter(|(old, _)| remotes.iter().any(|r| r["id"] == old.as_str()))
        .map(|(_, new)| new)
        .collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let requests = h.emulator.requests_since(mark).await;
        let reads = |id: &str| {
            requests
                .iter()
                .filter(|r| {
                    r.route == "GET /v2/deployments/{deployment_id}"
                        && r.deployment_id.as_deref() == Some(id)
                })
                .count()
        };
        if new_ids.iter().all(|id| reads(id) >= 2) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "every remote read twice: {:?}",
            new_ids.iter().map(|id| reads(id)).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    drop(operator);

    let requests = h.emulator.requests_since(mark).await;
    let count = |route: &str| requests.iter().filter(|r| r.route == route).count();
    let creates = count("POST /v2/deployments");
    let patches = count("PATCH /v2/deployments/{deployment_id}");
    let redeploys = requests
        .iter()
        .filter(|r| r.route.starts_with("POST /v2/deployments/{deployment_id}/"))
        .count();
    let deletes = count("DELETE /v2/deployments/{deployment_id}");
    println!(
        "upgrade of {FLEET} recorded objects: {} requests, {creates} creates, {patches} patches, {redeploys} redeploys, {deletes} deletes",
        requests.len()
    );
    assert_eq!(
        (creates, patches, redeploys, deletes),
        (0, 0, 0, 0),
        "{requests:#?}"
    );
    let store = h.emulator.store().await;
    let remote_count: usize = store["workspaces"]
        .as_object()
        .unwrap()
        .values()
        .map(|w| w["deployments"].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(remote_count, FLEET, "no duplicate");
}
