//! Items 10 and 4 (secrets): a missing Secret key stalls the resource with
//! `SecretNotFound` naming the Secret and the key, and fixing the Secret is
//! enough to recover; a changed value makes a new revision; the value never
//! shows in `status.secretsHash` or in events; a change to a Secret the
//! resource does not reference makes no remote call.
//!
//! Issue 11, item 3: a secret value changed on the control plane (and an
//! extra secret added there) is detected on the drift check by the salted
//! hash of the values the service returns, and restored by one PATCH (Event
//! `DriftCorrected` naming the field `secrets`); neither value shows in the
//! operator's log, the events or the status. A service that masks the values
//! it returns (emulator fault `masked_secret_values`) is not compared: no
//! PATCH loop, and a change of the desired value is still sent.

use crate::support;

use std::time::Duration;

use agent_operator::controlplane::types::{DeploymentPatch, SecretValue};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use serde_json::{Value, json};
use support::{Harness, apply_json, condition, github_deployment, route, wait_for};

const TIMEOUT: Duration = Duration::from_secs(60);
use support::leaks::{FIRST_VALUE, SECOND_VALUE, UNREFERENCED_VALUE};

async fn put_secret(h: &Harness, name: &str, data: Value) {
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), &h.ns);
    apply_json(
        &secrets,
        name,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": data}),
    )
    .await;
}

fn with_secret(name: &str, secret: &str) -> Value {
    let mut manifest = github_deployment(name, "main");
    manifest["spec"]["secrets"] = json!([
        {"name": "OPENAI_API_KEY", "valueFrom": {"secretKeyRef": {"name": secret, "key": "openai"}}},
        {"name": "LOG_LEVEL", "value": "info"}
    ]);
    manifest
}

#[tokio::test]
async fn missing_key_stalls_and_fixing_the_secret_recovers() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-secret-missing").start().await;
    let name = "keyless-agent";
    put_secret(&h, "agent-env", json!({"anthropic": UNREFERENCED_VALUE})).await;
    h.apply(with_secret(name, "agent-env")).await;

    let obj = h.wait_stalled(name, "SecretNotFound", TIMEOUT).await;
    let ready = condition(&obj, "Ready").unwrap();
    assert_eq!(ready.status, "False");
    assert!(
        ready.message.contains("agent-env") && ready.message.contains("openai"),
        "the message names the Secret and the key: {}",
        ready.message
    );
    assert_eq!(
        h.emulator.requests().await.deployment_calls(),
        0,
        "no remote call without the value"
    );
    // The stalled passes are counted as blocked, not as successes.
    let text = h.operator.as_ref().unwrap().metrics().await;
    assert!(
        support::metric(
            &text,
            "agent_operator_reconciles_total",
            &[("kind", "AgentDeployment"), ("outcome", "blocked")]
        )
        .is_some_and(|n| n >= 1.0),
        "a pass stalled on SecretNotFound is counted as blocked:\n{text}"
    );

    // Fixing the Secret is enough: the resource is not edited.
    put_secret(
        &h,
        "agent-env",
        json!({"anthropic": UNREFERENCED_VALUE, "openai": FIRST_VALUE}),
    )
    .await;
    let obj = h.wait_ready(name, TIMEOUT).await;
    assert_eq!(obj.metadata.generation, Some(1));
    let id = obj.status.unwrap().deployment_id.unwrap();
    let remote = h.cp.get_deployment(&id).await.unwrap();
    let mut names: Vec<&str> = remote.secrets.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["LOG_LEVEL", "OPENAI_API_KEY"]);
}

#[tokio::test]
async fn changed_value_makes_a_new_revision_and_is_never_shown() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-secret-rotate").start().await;
    let name = "rotating-agent";
    put_secret(&h, "agent-env", json!({"openai": FIRST_VALUE})).await;
    put_secret(&h, "unrelated", json!({"openai": "other"})).await;
    h.apply(with_secret(name, "agent-env")).await;
    let status = h.wait_ready(name, TIMEOUT).await.status.unwrap();
    let id = status.deployment_id.clone().unwrap();
    let first_hash = status.secrets_hash.clone().expect("status.secretsHash");
    assert!(!first_hash.contains(FIRST_VALUE));
    assert_eq!(h.revisions(&id).await.len(), 1);

    // A Secret the resource does not reference: no pass at all, so not even
    // a read of the deployment (a wrongly triggered pass of a steady
    // resource may send a GET and no PATCH). The detector is the operator's
    // own count of passes; the referenced Secret below is its positive
    // control (the same counter moves within the same wait).
    let passes = h.deployment_passes().await;
    let about = h.requests_about(&id).await;
    put_secret(&h, "unrelated", json!({"openai": "changed"})).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(h.deployment_passes().await, passes, "a pass was triggered");
    assert_eq!(
        h.requests_about(&id).await,
        about,
        "the deployment was read"
    );

    // The referenced value changes: one new revision carrying it.
    put_secret(&h, "agent-env", json!({"openai": SECOND_VALUE})).await;
    support::eventually(
        Duration::from_secs(2),
        "a pass for the referenced Secret",
        || async { (h.deployment_passes().await > passes).then_some(()) },
    )
    .await;
    let obj = wait_for(&h.api, name, TIMEOUT, "Ready on a new revision", |o| {
        let s = o.status.as_ref()?;
        (support::is_ready_now(o) && s.latest_revision_id != status.latest_revision_id)
            .then(|| o.clone())
    })
    .await;
    assert_eq!(
        obj.metadata.generation,
        Some(1),
        "the resource was not edited"
    );
    assert_eq!(h.revisions(&id).await.len(), 2);
    let remote = h.cp.get_deployment(&id).await.unwrap();
    let sent = remote
        .secrets
        .iter()
        .find(|s| s.name == "OPENAI_API_KEY")
        .expect("OPENAI_API_KEY sent");
    assert_eq!(
        sent,
        &agent_operator::controlplane::types::SecretValue::new("OPENAI_API_KEY", SECOND_VALUE)
    );
    let hash = obj
        .status
        .unwrap()
        .secrets_hash
        .expect("status.secretsHash");
    assert_ne!(hash, first_hash, "the hash follows the value");
    assert!(!hash.contains(FIRST_VALUE) && !hash.contains(SECOND_VALUE));

    // Nothing the operator wrote shows a value, nor does its log, at debug
    // level for the operator's own modules.
    h.assert_unseen(name, &[FIRST_VALUE, SECOND_VALUE]).await;
}

/// A value set on the control plane by someone else (console, CLI).
const REMOTE_VALUE: &str = "sk-set-in-the-console-5a9f03";

#[tokio::test]
async fn a_value_changed_on_the_control_plane_is_restored_unseen() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-secret-drift")
        .resync_seconds(0.5)
        .start()
        .await;
    let name = "drifting-secrets-agent";
    put_secret(&h, "agent-env", json!({"openai": FIRST_VALUE})).await;
    h.apply(with_secret(name, "agent-env")).await;
    let status = h.wait_ready(name, TIMEOUT).await.status.unwrap();
    let id = status.deployment_id.clone().unwrap();
    let hash = status.secrets_hash.clone().expect("status.secretsHash");

    // Someone changes the value on the control plane and adds a secret the
    // spec does not list (the service replaces the list on PATCH).
    h.cp.patch_deployment(
        &id,
        &DeploymentPatch {
            secrets: Some(vec![
                SecretValue::new("OPENAI_API_KEY", REMOTE_VALUE),
                SecretValue::new("LOG_LEVEL", "info"),
                SecretValue::new("EXTRA_SETTING", "added-outside"),
            ]),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let event = support::wait_for_event(&h.client, &h.ns, name, "DriftCorrected", TIMEOUT).await;
    let note = event.note.unwrap_or_default();
    assert!(note.starts_with("secrets of remote deployment"), "{note}");
    support::eventually(TIMEOUT, "the desired values restored", || async {
        let d = h.cp.get_deployment(&id).await.ok()?;
        let mut secrets = d.secrets.clone();
        secrets.sort_by(|a, b| a.name.cmp(&b.name));
        (secrets
            == [
                SecretValue::new("LOG_LEVEL", "info"),
                SecretValue::new("OPENAI_API_KEY", FIRST_VALUE),
            ])
        .then_some(())
    })
    .await;
    let obj = h
        .wait_ready_past(name, status.latest_revision_id.as_deref(), TIMEOUT)
        .await;
    assert_eq!(
        obj.metadata.generation,
        Some(1),
        "the resource was not edited"
    );
    assert_eq!(
        obj.status.as_ref().unwrap().secrets_hash.as_deref(),
        Some(hash.as_str()),
        "the desired values did not change"
    );
    assert_eq!(h.revisions(&id).await.len(), 3, "first, outside, restored");

    // Once restored, the drift checks (every 0.5 s) send nothing more.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        h.emulator.requests().await.count(route::PATCH),
        2,
        "the outside PATCH and one correction"
    );

    // Neither value shows in the object, the events or the log.
    h.assert_unseen(name, &[FIRST_VALUE, REMOTE_VALUE]).await;
}

#[tokio::test]
async fn masked_values_are_not_compared_and_cause_no_patch_loop() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-secret-masked")
        .resync_seconds(0.5)
        .start()
        .await;
    // A service that does not return secret values: every answer shows `****`.
    h.emulator
        .set_faults(json!({"masked_secret_values": true}))
        .await;
    let name = "masked-secrets-agent";
    put_secret(&h, "agent-env", json!({"openai": FIRST_VALUE})).await;
    h.apply(with_secret(name, "agent-env")).await;
    let status = h.wait_ready(name, TIMEOUT).await.status.unwrap();
    let id = status.deployment_id.clone().unwrap();
    let remote = h.cp.get_deployment(&id).await.unwrap();
    assert!(
        remote
            .secrets
            .iter()
            .all(|s| s == &SecretValue::new(s.name.clone(), "****")),
        "the fault masks the values"
    );

    // A value changed outside cannot be seen: the drift checks (every 0.5 s)
    // send nothing, and the resource stays Ready.
    h.cp.patch_deployment(
        &id,
        &DeploymentPatch {
            secrets: Some(vec![
                SecretValue::new("OPENAI_API_KEY", REMOTE_VALUE),
                SecretValue::new("LOG_LEVEL", "info"),
            ]),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        h.emulator.requests().await.count(route::PATCH),
        1,
        "only the outside PATCH: masked values are not compared"
    );
    assert!(
        !support::event_reasons(&h.client, &h.ns, name)
            .await
            .iter()
            .any(|r| r == "DriftCorrected")
    );

    // A change of the desired value is still sent, once.
    put_secret(&h, "agent-env", json!({"openai": SECOND_VALUE})).await;
    let obj = wait_for(&h.api, name, TIMEOUT, "the new value sent", |o| {
        let s = o.status.as_ref()?;
        (s.secrets_hash != status.secrets_hash && support::is_ready_now(o)).then(|| o.clone())
    })
    .await;
    assert!(!support::is_stalled_with(&obj, "DriftNotConverging"));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(h.emulator.requests().await.count(route::PATCH), 2);
    let log = support::log_path("op-secret-masked", "operator");
    let log = std::fs::read_to_string(&log).expect("the operator's log");
    for value in [FIRST_VALUE, SECOND_VALUE, REMOTE_VALUE] {
        assert!(!log.contains(value), "the operator log shows {value}");
    }
}

/// Removals take effect, or are refused (issue "Day two in GitOps", item
/// 4): removing one secret sends the complete environment without it, so the
/// remote deployment loses the variable; removing the last one is refused at
/// admission (the service reads an empty list as "unchanged") with a message
/// that says how to rotate instead, and nothing is sent.
#[tokio::test]
async fn removing_a_secret_removes_it_and_removing_the_last_is_refused() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-secret-removal").start().await;
    let name = "removal-agent";
    put_secret(&h, "agent-env", json!({"openai": FIRST_VALUE})).await;
    let id = h.converge(with_secret(name, "agent-env"), TIMEOUT).await;
    let before = h.api.get(name).await.unwrap();
    let previous = before.status.as_ref().unwrap().latest_revision_id.clone();

    // The leaked key goes from Git: only LOG_LEVEL stays.
    support::merge_patch(
        &h.api,
        name,
        json!({"spec": {"secrets": [{"name": "LOG_LEVEL", "value": "info"}]}}),
    )
    .await;
    h.wait_ready_past(name, previous.as_deref(), TIMEOUT).await;
    let remote = h.cp.get_deployment(&id).await.unwrap();
    let names: Vec<&str> = remote.secrets.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["LOG_LEVEL"],
        "the removed variable is gone remotely"
    );

    // The last one cannot be removed once the deployment exists.
    let mark = h.emulator.request_mark().await;
    for patch in [
        json!({"spec": {"secrets": []}}),
        json!({"spec": {"secrets": null}}),
    ] {
        match h
            .api
            .patch(
                name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
        {
            Err(kube::Error::Api(s)) => {
                assert_eq!(s.code, 422);
                assert!(
                    s.message.contains("spec.secrets cannot become empty")
                        && s.message.contains("rotate"),
                    "{}",
                    s.message
                );
            }
            other => panic!("{patch} was accepted: {other:?}"),
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let sent = h.emulator.requests_since(mark).await;
    assert!(
        sent.iter().all(|r| r.route != route::PATCH),
        "nothing was sent: {sent:?}"
    );
}
