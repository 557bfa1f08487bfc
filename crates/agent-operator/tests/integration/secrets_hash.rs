//! `status.secretsHash` cannot be used to test guesses (issue "Hardening",
//! item 3): it is an HMAC-SHA256 under a key the operator keeps in a Secret
//! of its own namespace (`controller::hash_key`), created once; a restart
//! reads the same key and sends nothing; the old `salt:sha256` format is
//! rewritten without a PATCH; deleting the key Secret costs one PATCH per
//! AgentDeployment with secrets, once.
//!
//! Each test runs its operator as a ServiceAccount of its own namespace
//! (the shipped `deploy/base/rbac.yaml` and the namespaced overlay's Role,
//! applied there, as `operator_rbac` does), so that its key Secret is its
//! own: deleting it does not touch the key of the other tests.

use crate::{common, support};

use std::time::Duration;

use agent_operator::controller::hash_key::{self, HashKey};
use agent_operator::controlplane::types::SecretValue;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;
use support::{Harness, OperatorOptions, OperatorProcess, github_deployment, route};

const TIMEOUT: Duration = Duration::from_secs(60);
/// The resync interval of the restarted operators: several passes of each
/// object happen while a test watches.
const RESYNC: &str = "1";
/// How long a test watches for PATCHes after the restart.
const WATCH: Duration = Duration::from_secs(8);
const SECRET_VALUE: &str = "1234";

/// The harness of `test` without an operator, with the ServiceAccount
/// `agent-operator` of its namespace bound to the shipped base Roles (the
/// hash key Role among them) and the namespaced overlay's Role.
async fn isolated(test: &str) -> Harness {
    let h = Harness::quick(test).without_operator().start().await;
    let subject = format!("namespace: {}", h.ns);
    for file in ["base/rbac.yaml", "overlays/namespaced/watched/rbac.yaml"] {
        let text = std::fs::read_to_string(common::deploy_dir().join(file))
            .unwrap()
            .replace("namespace: agent-operator", &subject);
        test_support::envtest::apply_manifests(&h.client, file.as_ref(), &text, &h.ns)
            .await
            .unwrap_or_else(|e| panic!("applying {file}: {e}"));
    }
    h
}

/// An operator of `h`'s namespace acting as its own ServiceAccount. The
/// harness's budget widens for the loops `extra` asks for, as it does for
/// the operator it starts itself (`HarnessBuilder::operator_flags`): a
/// restarted operator with `--resync-interval-seconds 1` reads each
/// deployment once a second by design.
fn operator(h: &mut Harness, log_name: &str, extra: &[&str]) -> OperatorProcess {
    h.budget = h.budget.clone().allowing_operator_flags(extra);
    OperatorProcess::start_with(
        &h.kubeconfig,
        OperatorOptions {
            log_name,
            namespaces: vec![&h.ns],
            extra: extra.to_vec(),
            service_account: Some((&h.ns, "agent-operator")),
            ..OperatorOptions::default()
        },
    )
}

/// A deployment with one secret value.
fn with_secret(name: &str) -> serde_json::Value {
    let mut m = github_deployment(name, "main");
    m["spec"]["secrets"] = json!([{"name": "OPENAI_API_KEY", "value": SECRET_VALUE}]);
    m
}

fn secrets() -> Vec<SecretValue> {
    vec![SecretValue::new("OPENAI_API_KEY", SECRET_VALUE)]
}

/// The key in the namespace's hash key Secret.
async fn key_of(h: &Harness) -> HashKey {
    let api: Api<Secret> = Api::namespaced(h.client.clone(), &h.ns);
    let secret = api
        .get(hash_key::DEFAULT_SECRET_NAME)
        .await
        .expect("the operator created its hash key Secret");
    let bytes = &secret.data.unwrap()[hash_key::DATA_KEY].0;
    assert_eq!(bytes.len(), 32);
    assert_eq!(secret.immutable, Some(true));
    HashKey::from_bytes(bytes).unwrap()
}

async fn stored_hash(h: &Harness, name: &str) -> String {
    h.api
        .get(name)
        .await
        .unwrap()
        .status
        .and_then(|s| s.secrets_hash)
        .expect("status.secretsHash")
}

/// The status holds an HMAC of the key in the operator's Secret: no part
/// of it, taken as a salt, gives `sha256(salt‖names‖values)` of the right
/// guess. A restart reads the same key: no PATCH, no revision.
#[tokio::test]
async fn the_hash_is_an_hmac_and_a_restart_sends_nothing() {
    test_support::skip_without!(Envtest);
    let mut h = isolated("hash-hmac").await;
    let name = "hash-hmac-agent";
    let first = operator(&mut h, "hash-hmac", &[]);
    h.apply(with_secret(name)).await;
    let ready = h.wait_ready(name, TIMEOUT).await;
    let stored = stored_hash(&h, name).await;
    assert!(stored.starts_with("hmac-sha256:"), "{stored}");
    // A guess of the value cannot be tested from the status: the old
    // recomputation matches with no part of the hash as its salt...
    for salt in stored.split(':') {
        assert_ne!(hash_key::legacy_hash(salt, &secrets()), stored);
        assert!(
            !stored.ends_with(
                hash_key::legacy_hash(salt, &secrets())
                    .split(':')
                    .nth(1)
                    .unwrap()
            )
        );
    }
    // ...while the key of the operator's Secret does give it.
    let key = key_of(&h).await;
    assert_eq!(key.secrets_hash(&secrets()), stored);
    assert!(!stored.contains(SECRET_VALUE));

    drop(first);
    let patches = h.emulator.requests().await.count(route::PATCH);
    let revisions = h
        .revisions(
            ready
                .status
                .as_ref()
                .unwrap()
                .deployment_id
                .as_deref()
                .unwrap(),
        )
        .await
        .len();
    let _second = operator(
        &mut h,
        "hash-hmac-restarted",
        &["--resync-interval-seconds", RESYNC],
    );
    tokio::time::sleep(WATCH).await;
    let obj = h.wait_ready(name, TIMEOUT).await;
    assert_eq!(
        h.emulator.requests().await.count(route::PATCH),
        patches,
        "a restart sent the secrets again"
    );
    assert_eq!(
        h.revisions(
            obj.status
                .as_ref()
                .unwrap()
                .deployment_id
                .as_deref()
                .unwrap()
        )
        .await
        .len(),
        revisions
    );
    assert_eq!(stored_hash(&h, name).await, stored);
    assert_eq!(key_of(&h).await.id(), key.id(), "the key was made once");
}

/// A status written by an earlier version (`salt:sha256`) that still
/// matches the values is rewritten as an HMAC by the next status write,
/// without a PATCH.
#[tokio::test]
async fn the_old_salted_hash_is_rewritten_without_a_patch() {
    test_support::skip_without!(Envtest);
    let mut h = isolated("hash-legacy").await;
    let name = "hash-legacy-agent";
    let first = operator(&mut h, "hash-legacy", &[]);
    h.apply(with_secret(name)).await;
    h.wait_ready(name, TIMEOUT).await;
    drop(first);
    let legacy = hash_key::legacy_hash("00112233445566778899aabbccddeeff", &secrets());
    h.api
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"secretsHash": legacy}})),
        )
        .await
        .expect("writing the old format");
    let patches = h.emulator.requests().await.count(route::PATCH);
    let _second = operator(
        &mut h,
        "hash-legacy-restarted",
        &["--resync-interval-seconds", RESYNC],
    );
    let rewritten = support::eventually(TIMEOUT, "secretsHash rewritten", || async {
        let stored = stored_hash(&h, name).await;
        stored.starts_with("hmac-sha256:").then_some(stored)
    })
    .await;
    assert_eq!(key_of(&h).await.secrets_hash(&secrets()), rewritten);
    tokio::time::sleep(WATCH).await;
    assert_eq!(
        h.emulator.requests().await.count(route::PATCH),
        patches,
        "the old format cost a PATCH"
    );
}

/// Deleting the key Secret rotates the key at the next start: each
/// AgentDeployment with secrets sends them once (one PATCH each) and then
/// holds a hash of the new key; nothing more is sent.
#[tokio::test]
async fn a_rotated_key_costs_one_patch_per_deployment() {
    test_support::skip_without!(Envtest);
    let mut h = isolated("hash-rotate").await;
    let names = ["hash-rotate-a", "hash-rotate-b"];
    let first = operator(&mut h, "hash-rotate", &[]);
    for name in names {
        h.apply(with_secret(name)).await;
    }
    for name in names {
        h.wait_ready(name, TIMEOUT).await;
    }
    let old = key_of(&h).await;
    drop(first);
    let secrets_api: Api<Secret> = Api::namespaced(h.client.clone(), &h.ns);
    secrets_api
        .delete(hash_key::DEFAULT_SECRET_NAME, &DeleteParams::default())
        .await
        .expect("deleting the key Secret");
    let patches = h.emulator.requests().await.count(route::PATCH);
    let _second = operator(
        &mut h,
        "hash-rotate-restarted",
        &["--resync-interval-seconds", RESYNC],
    );
    support::eventually(TIMEOUT, "a new key Secret", || async {
        secrets_api
            .get_opt(hash_key::DEFAULT_SECRET_NAME)
            .await
            .ok()?
            .map(|_| ())
    })
    .await;
    let new = key_of(&h).await;
    assert_ne!(new.id(), old.id());
    for name in names {
        support::eventually(TIMEOUT, "a hash of the new key", || async {
            let stored = stored_hash(&h, name).await;
            (stored == new.secrets_hash(&secrets())).then_some(())
        })
        .await;
        h.wait_ready(name, TIMEOUT).await;
    }
    tokio::time::sleep(WATCH).await;
    assert_eq!(
        h.emulator.requests().await.count(route::PATCH) - patches,
        names.len() as u64,
        "one PATCH per deployment, once"
    );
}
