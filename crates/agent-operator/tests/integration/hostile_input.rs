//! Bad input is stopped before the control plane (issue "Reliability under
//! crashes, faults and hostile input", item 5).
//!
//! A table of hostile AgentDeployments (wrong types, huge strings, invalid
//! URLs, non-uuid ids, references to other namespaces, unicode and control
//! characters, duplicates, reserved names, ...) and hostile surroundings (a
//! Secret that changes every second, a Secret deleted while in use, an
//! AgentControlPlane pointing at a closed port, a key that is not a key).
//! For each, the test asserts where it was stopped — at admission by the
//! schema or a CEL rule (applied with strict field validation, as `kubectl
//! apply` does), or `Stalled` with a reason before any request — and prints
//! the table with the message a human sees. Then it checks, from the
//! emulator's request log, that the control plane received no request about
//! any of them that it would refuse, and that a healthy resource applied
//! after them becomes Ready as fast as one applied before them.

use crate::support;

use std::time::{Duration, Instant};

use agent_operator::api::AgentControlPlane;
use agent_operator::api::conditions::{READY, find};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use secrecy::ExposeSecret;
use serde_json::{Value, json};
use support::{AgentDeploymentManifest, Harness, apply_json, condition, github_deployment, route};

const TIMEOUT: Duration = Duration::from_secs(60);
/// How long the Secret of the churn case changes, once a second.
const CHURN: Duration = Duration::from_secs(20);

/// Where a hostile input must be stopped.
enum Expect {
    /// Refused by the API server; the message contains the text.
    Admission(&'static str),
    /// Accepted, then `Stalled` with the reason before any request about it.
    Stalled(&'static str),
}

/// One row of the table: an id, the kind of hostility, a manifest.
struct Case {
    what: &'static str,
    kind: &'static str,
    manifest: Value,
    expect: Expect,
}

fn docker(name: &str) -> Value {
    AgentDeploymentManifest::docker(name, "ghcr.io/acme/agent:1.0.0").build()
}

/// `base` with `value` set at the JSON pointer `at` (objects created on the way).
fn with(mut base: Value, at: &str, value: Value) -> Value {
    let mut cur = &mut base;
    for part in at.trim_start_matches('/').split('/') {
        if !cur.is_object() {
            *cur = json!({});
        }
        cur = cur
            .as_object_mut()
            .unwrap()
            .entry(part.to_owned())
            .or_insert(Value::Null);
    }
    *cur = value;
    base
}

fn gh(name: &str) -> Value {
    github_deployment(name, "main")
}

fn cases() -> Vec<Case> {
    use Expect::*;
    let c = |what, kind, manifest, expect| Case {
        what,
        kind,
        manifest,
        expect,
    };
    let huge = "a".repeat(100_000);
    vec![
        c(
            "deploymentType not in the enum",
            "wrong value",
            with(
                gh("h-type"),
                "/spec/sourceConfig/deploymentType",
                json!("enterprise"),
            ),
            Admission("Unsupported value: \"enterprise\""),
        ),
        c(
            "source not in the enum",
            "wrong value",
            with(gh("h-source"), "/spec/source", json!("gitlab")),
            Admission("Unsupported value: \"gitlab\""),
        ),
        c(
            "integrationId not a uuid",
            "non-uuid id",
            with(
                gh("h-integration"),
                "/spec/sourceConfig/integrationId",
                json!("not-a-uuid"),
            ),
            Admission("integrationId"),
        ),
        c(
            "listenerId not a uuid",
            "non-uuid id",
            with(
                docker("h-listener"),
                "/spec/sourceConfig/listenerId",
                json!("1234"),
            ),
            Admission("listenerId"),
        ),
        c(
            "deploymentId a path",
            "non-uuid id",
            with(
                docker("h-adopt"),
                "/spec/deploymentId",
                json!("../../deployments"),
            ),
            Admission("deploymentId"),
        ),
        c(
            "repoUrl javascript:",
            "invalid URL",
            with(
                gh("h-js"),
                "/spec/sourceConfig/repoUrl",
                json!("javascript:alert(1)"),
            ),
            Admission("repoUrl must be an https:// URL"),
        ),
        c(
            "repoUrl plain http to a remote host",
            "invalid URL",
            with(
                gh("h-http"),
                "/spec/sourceConfig/repoUrl",
                json!("http://github.com/acme/agent"),
            ),
            Admission("repoUrl must be an https:// URL"),
        ),
        c(
            "repoUrl with a newline",
            "control character",
            with(
                gh("h-url-nl"),
                "/spec/sourceConfig/repoUrl",
                json!("https://github.com/acme/agent\nX-Injected: 1"),
            ),
            Admission("repoUrl must be an https:// URL"),
        ),
        c(
            "customUrl ftp://",
            "invalid URL",
            with(
                docker("h-custom"),
                "/spec/sourceConfig/customUrl",
                json!("ftp://files.example.com"),
            ),
            Admission("customUrl must be an https:// URL"),
        ),
        c(
            "github without integrationId",
            "missing field",
            with(
                gh("h-no-integration"),
                "/spec/sourceConfig/integrationId",
                Value::Null,
            ),
            Admission("source github needs sourceConfig.integrationId"),
        ),
        c(
            "imageUri with a shell command",
            "shell characters",
            with(
                docker("h-shell"),
                "/spec/sourceRevisionConfig/imageUri",
                json!("ghcr.io/acme/agent:1; rm -rf /"),
            ),
            Admission("imageUri must be an image reference"),
        ),
        c(
            "imageUri with uppercase repository",
            "wrong value",
            with(
                docker("h-upper"),
                "/spec/sourceRevisionConfig/imageUri",
                json!("ghcr.io/Acme/Agent:1"),
            ),
            Admission("imageUri must be an image reference"),
        ),
        c(
            "imageUri on a github source",
            "wrong combination",
            with(
                gh("h-image-gh"),
                "/spec/sourceRevisionConfig/imageUri",
                json!("ghcr.io/acme/agent:1"),
            ),
            Admission("imageUri is only for source external_docker"),
        ),
        c(
            "repoUrl on an external_docker source",
            "wrong combination",
            with(
                docker("h-repo-docker"),
                "/spec/sourceConfig/repoUrl",
                json!("https://github.com/acme/agent"),
            ),
            Admission("only for source github"),
        ),
        c(
            "buildOnPush on a tag",
            "wrong combination",
            with(
                with(
                    gh("h-tag"),
                    "/spec/sourceRevisionConfig/repoRef",
                    json!("refs/tags/v1"),
                ),
                "/spec/sourceConfig/buildOnPush",
                json!(true),
            ),
            Admission("buildOnPush must be false when repoRef is a tag"),
        ),
        c(
            "resourceSpec unknown key (typo)",
            "unknown field",
            with(
                docker("h-typo"),
                "/spec/sourceConfig/resourceSpec",
                json!({"min_scael": 1}),
            ),
            Admission(".spec.sourceConfig.resourceSpec.min_scael: field not declared in schema"),
        ),
        c(
            "resourceSpec cpu 9999 cores",
            "out of range",
            with(
                docker("h-cpu"),
                "/spec/sourceConfig/resourceSpec",
                json!({"cpu": 9999}),
            ),
            Admission("should be less than or equal to 8"),
        ),
        c(
            "resourceSpec cpu as text",
            "wrong type",
            with(
                docker("h-cpu-text"),
                "/spec/sourceConfig/resourceSpec",
                json!({"cpu": "lots"}),
            ),
            Admission("resourceSpec.cpu: expected numeric"),
        ),
        c(
            "resourceSpec minScale -1",
            "out of range",
            with(
                docker("h-scale"),
                "/spec/sourceConfig/resourceSpec",
                json!({"minScale": -1}),
            ),
            Admission("should be greater than or equal to 0"),
        ),
        c(
            "resourceSpec minScale above maxScale",
            "inconsistent",
            with(
                docker("h-scale-order"),
                "/spec/sourceConfig/resourceSpec",
                json!({"minScale": 5, "maxScale": 2}),
            ),
            Admission("minScale must not exceed maxScale"),
        ),
        c(
            "secret name with '-'",
            "invalid name",
            with(
                docker("h-env-dash"),
                "/spec/secrets",
                json!([{"name": "MY-VAR", "value": "x"}]),
            ),
            Admission("secrets[0].name"),
        ),
        c(
            "secret name with a newline",
            "control character",
            with(
                docker("h-env-nl"),
                "/spec/secrets",
                json!([{"name": "A\nB", "value": "x"}]),
            ),
            Admission("secrets[0].name"),
        ),
        c(
            "duplicate secret names, different values",
            "duplicates",
            with(
                docker("h-dup"),
                "/spec/secrets",
                json!([{"name": "TOKEN", "value": "a"}, {"name": "TOKEN", "value": "b"}]),
            ),
            Admission("duplicate entries for key [name=\"TOKEN\"]"),
        ),
        c(
            "reserved secret name",
            "reserved name",
            with(
                docker("h-reserved"),
                "/spec/secrets",
                json!([{"name": "LANGCHAIN_API_KEY", "value": "x"}]),
            ),
            Admission("secret name LANGCHAIN_API_KEY is reserved by the platform"),
        ),
        c(
            "self-hosted-only name without a listener",
            "reserved name",
            with(
                docker("h-port"),
                "/spec/secrets",
                json!([{"name": "PORT", "value": "8080"}]),
            ),
            Admission("allowed only on a self-hosted data plane"),
        ),
        c(
            "repoRef with a NUL byte",
            "control character",
            with(
                gh("h-nul"),
                "/spec/sourceRevisionConfig/repoRef",
                json!("main\u{0}"),
            ),
            Admission("repoRef must be a branch"),
        ),
        c(
            "repoRef ../../etc/passwd",
            "path traversal",
            with(
                gh("h-ref-dots"),
                "/spec/sourceRevisionConfig/repoRef",
                json!("../../etc/passwd"),
            ),
            Admission("repoRef must be a branch"),
        ),
        c(
            "langgraphConfigPath ../../etc/passwd",
            "path traversal",
            with(
                gh("h-path-dots"),
                "/spec/sourceRevisionConfig/langgraphConfigPath",
                json!("../../etc/passwd"),
            ),
            Admission("langgraphConfigPath must be a relative path"),
        ),
        c(
            "langgraphConfigPath absolute",
            "path traversal",
            with(
                gh("h-path-abs"),
                "/spec/sourceRevisionConfig/langgraphConfigPath",
                json!("/etc/langgraph.json"),
            ),
            Admission("langgraphConfigPath must be a relative path"),
        ),
        c(
            "spec.name of 100,000 bytes",
            "huge string",
            with(docker("h-huge-name"), "/spec/name", json!(huge)),
            Admission("spec.name: Too long"),
        ),
        c(
            "repoUrl of 100,000 bytes",
            "huge string",
            with(
                gh("h-huge-url"),
                "/spec/sourceConfig/repoUrl",
                json!(format!("https://github.com/{huge}")),
            ),
            Admission("Too long"),
        ),
        c(
            "spec.name with unicode",
            "unicode",
            with(docker("h-unicode"), "/spec/name", json!("agént-☃")),
            Admission("spec.name"),
        ),
        c(
            "secret from another namespace",
            "other namespace",
            with(
                docker("h-other-ns"),
                "/spec/secrets",
                json!([{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k", "namespace": "kube-system"}}}]),
            ),
            Admission("secretKeyRef.namespace: field not declared in schema"),
        ),
        c(
            "value and valueFrom both set",
            "wrong combination",
            with(
                docker("h-both"),
                "/spec/secrets",
                json!([{"name": "TOKEN", "value": "a", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]),
            ),
            Admission("set exactly one of value and valueFrom"),
        ),
        c(
            "listenerId and listenerRef both set",
            "wrong combination",
            with(
                with(
                    docker("h-two-listeners"),
                    "/spec/sourceConfig/listenerId",
                    json!("6f1c2a3e-4b5d-4e6f-8a7b-9c0d1e2f3a4b"),
                ),
                "/spec/sourceConfig/listenerRef",
                json!({"name": "l"}),
            ),
            Admission("set at most one of sourceConfig.listenerId and sourceConfig.listenerRef"),
        ),
        c(
            "controlPlaneRef a path",
            "other namespace",
            with(
                docker("h-cp-path"),
                "/spec/controlPlaneRef/name",
                json!("../kube-system/default"),
            ),
            Admission("controlPlaneRef.name"),
        ),
        c(
            "metadata.name with '.' and no spec.name",
            "invalid name",
            docker("h.dotted"),
            Admission("metadata.name is not a valid remote deployment name"),
        ),
        c(
            "deploymentType on an image",
            "field the service refuses",
            with(
                docker("h-image-type"),
                "/spec/sourceConfig/deploymentType",
                json!("dev"),
            ),
            Admission("sourceConfig.deploymentType is only for source github"),
        ),
        c(
            "minScale 0 without a scale-to-zero type",
            "field the service refuses",
            with(
                gh("h-zero"),
                "/spec/sourceConfig/resourceSpec",
                json!({"minScale": 0}),
            ),
            Admission("minScale 0 (scale to zero) needs sourceConfig.deploymentType dev_zero"),
        ),
        c(
            "installCommand on an image",
            "field of the other source",
            with(
                docker("h-image-build"),
                "/spec/sourceConfig/installCommand",
                json!("npm ci"),
            ),
            Admission("are only for source github"),
        ),
        c(
            "repoRef on an image",
            "field of the other source",
            with(
                docker("h-image-ref"),
                "/spec/sourceRevisionConfig/repoRef",
                json!("main"),
            ),
            Admission("are only for source github"),
        ),
        c(
            "secrets as a string",
            "wrong type",
            with(docker("h-secrets-type"), "/spec/secrets", json!("TOKEN=x")),
            Admission(".spec.secrets: expected list"),
        ),
        c(
            "Secret that does not exist",
            "missing reference",
            with(
                docker("h-no-secret"),
                "/spec/secrets",
                json!([{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "token"}}}]),
            ),
            Stalled("SecretNotFound"),
        ),
        c(
            "AgentControlPlane that does not exist",
            "missing reference",
            with(
                docker("h-no-cp"),
                "/spec/controlPlaneRef/name",
                json!("absent"),
            ),
            Stalled("ControlPlaneNotReady"),
        ),
        c(
            "AgentListener that does not exist",
            "missing reference",
            with(
                docker("h-no-listener"),
                "/spec/sourceConfig/listenerRef",
                json!({"name": "absent"}),
            ),
            Stalled("ListenerNotFound"),
        ),
    ]
}

/// The rows of the table that admission refuses: (what, manifest, a text of
/// the refusal). Also checked on the oldest supported kube-apiserver
/// (`supported_versions`).
pub(crate) fn admission_cases() -> Vec<(&'static str, Value, &'static str)> {
    cases()
        .into_iter()
        .filter_map(|case| match case.expect {
            Expect::Admission(text) => Some((case.what, case.manifest, text)),
            Expect::Stalled(_) => None,
        })
        .collect()
}

/// Applies `manifest` with strict field validation (as `kubectl apply`).
async fn try_apply(h: &Harness, manifest: &Value) -> Result<(), String> {
    let name = manifest["metadata"]["name"].as_str().unwrap();
    h.api
        .patch(
            name,
            &PatchParams::apply("tests").force().validation_strict(),
            &Patch::Apply(manifest),
        )
        .await
        .map(|_| ())
        .map_err(|e| match e {
            kube::Error::Api(s) => format!("{} {}", s.code, s.message),
            other => other.to_string(),
        })
}

/// One line of the printed table (Markdown).
fn row(n: usize, what: &str, kind: &str, stopped: &str, message: &str) -> String {
    // The part a human reads: after the API server's "... is invalid: " or
    // server-side apply's "failed to create typed patch object (...): ".
    let message = message
        .split_once(" is invalid: ")
        .or_else(|| message.split_once("Kind=AgentDeployment): "))
        .map_or(message, |(_, rest)| rest);
    let mut m: String = message.replace('|', "\\|").replace('\n', " ");
    if m.len() > 160 {
        let cut = (0..=160).rev().find(|&i| m.is_char_boundary(i)).unwrap();
        m.truncate(cut);
        m.push('…');
    }
    format!("| {n} | {what} | {kind} | {stopped} | {m} |")
}

async fn plane_ready_reason(client: &kube::Client, ns: &str, name: &str) -> Option<String> {
    let planes: Api<AgentControlPlane> = Api::namespaced(client.clone(), ns);
    let plane = planes.get_opt(name).await.ok()??;
    Some(find(&plane.status?.conditions, READY)?.reason.clone())
}

#[tokio::test]
async fn hostile_resources_are_stopped_before_the_control_plane() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("hostile-input").start().await;
    let (client, ns) = (h.client.clone(), h.ns.clone());
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);

    // A healthy resource before anything hostile: the reference time.
    let started = Instant::now();
    h.apply(docker("healthy-before")).await;
    h.wait_ready("healthy-before", TIMEOUT).await;
    let healthy_before = started.elapsed();

    // A resource whose Secret will change every second, Ready first.
    apply_json(
        &secrets,
        "churn",
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "churn"},
               "stringData": {"token": "v0"}}),
    )
    .await;
    let churn_secret = json!([{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "churn", "key": "token"}}}]);
    h.apply(with(docker("churn"), "/spec/secrets", churn_secret.clone()))
        .await;
    // A resource whose Secret will be deleted while in use.
    apply_json(
        &secrets,
        "doomed",
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "doomed"},
               "stringData": {"token": "d0"}}),
    )
    .await;
    h.apply(with(
        docker("doomed"),
        "/spec/secrets",
        json!([{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "doomed", "key": "token"}}}]),
    ))
    .await;
    let churn_id = h
        .wait_ready("churn", TIMEOUT)
        .await
        .status
        .unwrap()
        .deployment_id
        .unwrap();
    let doomed_id = h
        .wait_ready("doomed", TIMEOUT)
        .await
        .status
        .unwrap()
        .deployment_id
        .unwrap();
    let mark = h.emulator.request_mark().await;

    let mut table = vec![
        "| # | hostile input | kind | where it was stopped | message |".to_owned(),
        "|---|---|---|---|---|".to_owned(),
    ];
    let mut problems = Vec::new();
    let cases = cases();
    for (i, case) in cases.iter().enumerate() {
        let outcome = try_apply(&h, &case.manifest).await;
        match (&case.expect, outcome) {
            (Expect::Admission(text), Err(message)) => {
                if !message.contains(text) {
                    problems.push(format!(
                        "{}: refused, but the message lacks {text:?}: {message}",
                        case.what
                    ));
                }
                // Server-side apply checks types and declared fields itself
                // (answering 500 "failed to create typed patch object");
                // the schema's formats, ranges and CEL rules answer 422.
                let rule = if message.starts_with("422") {
                    "admission: schema or CEL rule (422)"
                } else {
                    "admission: server-side apply type check"
                };
                table.push(row(i + 1, case.what, case.kind, rule, &message));
            }
            (Expect::Admission(_), Ok(())) => {
                problems.push(format!("{}: accepted at admission", case.what));
                table.push(row(i + 1, case.what, case.kind, "NOT STOPPED", ""));
            }
            (Expect::Stalled(_), Err(message)) => {
                problems.push(format!("{}: refused at admission: {message}", case.what));
            }
            (Expect::Stalled(_), Ok(())) => {}
        }
    }
    for (i, case) in cases.iter().enumerate() {
        if let Expect::Stalled(reason) = case.expect {
            let name = case.manifest["metadata"]["name"].as_str().unwrap();
            let obj = h.wait_stalled(name, reason, TIMEOUT).await;
            let message = condition(&obj, "Stalled").unwrap().message;
            let stopped = format!("`Stalled`/`{reason}`, no request");
            table.push(row(i + 1, case.what, case.kind, &stopped, &message));
        }
    }
    let mut n = cases.len();

    // Surroundings: an AgentControlPlane on a closed port, and one whose key
    // is not a key.
    let closed = support::free_port();
    let planes: Api<AgentControlPlane> = Api::namespaced(client.clone(), &ns);
    apply_json(
        &secrets,
        "not-a-key",
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "not-a-key"},
               "stringData": {"api-key": "definitely not a key ☃"}}),
    )
    .await;
    for (plane, url, key) in [
        (
            "closed-port",
            format!("http://127.0.0.1:{closed}"),
            "cp-api-key",
        ),
        ("bad-key", h.emulator.base_url.clone(), "not-a-key"),
    ] {
        apply_json(
            &planes,
            plane,
            json!({
                "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentControlPlane",
                "metadata": {"name": plane},
                "spec": {"url": url, "workspaceId": support::WORKSPACE,
                         "apiKeySecretRef": {"name": key, "key": "api-key"}}
            }),
        )
        .await;
        let name = format!("on-{plane}");
        h.apply(with(
            docker(&name),
            "/spec/controlPlaneRef/name",
            json!(plane),
        ))
        .await;
    }
    // The AgentDeployment waits: a closed port is a transient failure
    // (retried with backoff, Reconciling), a refused key stops it.
    for (plane, what, expected, deployment_reasons) in [
        (
            "closed-port",
            "AgentControlPlane pointing at a closed port",
            "ControlPlaneUnavailable",
            &["ControlPlaneUnavailable"][..],
        ),
        (
            "bad-key",
            "a key that is not a key",
            "Unauthorized",
            &["ControlPlaneNotReady", "Unauthorized"][..],
        ),
    ] {
        n += 1;
        let reason = support::eventually(TIMEOUT, what, || async {
            plane_ready_reason(&client, &ns, plane)
                .await
                .filter(|r| r == expected)
        })
        .await;
        let name = format!("on-{plane}");
        let (ready_reason, message) = support::wait_for(&h.api, &name, TIMEOUT, what, |o| {
            let ready = condition(o, READY)?;
            (ready.status == "False" && deployment_reasons.contains(&ready.reason.as_str()))
                .then(|| (ready.reason.clone(), ready.message.clone()))
        })
        .await;
        let stopped =
            format!("AgentControlPlane `{reason}`; AgentDeployment not Ready (`{ready_reason}`)");
        table.push(row(
            n,
            what,
            "unreachable or refused control plane",
            &stopped,
            &message,
        ));
    }

    // A Secret deleted while in use: Stalled, and the remote deployment is
    // left alone (no PATCH, no DELETE).
    secrets
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    let obj = h.wait_stalled("doomed", "SecretNotFound", TIMEOUT).await;
    n += 1;
    table.push(row(
        n,
        "Secret deleted while in use",
        "missing reference",
        "`Stalled`/`SecretNotFound`; remote deployment untouched",
        &condition(&obj, "Stalled").unwrap().message,
    ));

    // An AgentControlPlane deleted while in use: its AgentDeployment stops
    // at once (the resync is 300 s), and its remote deployment is left alone.
    apply_json(
        &planes,
        "second",
        json!({
            "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentControlPlane",
            "metadata": {"name": "second"},
            "spec": {"url": h.emulator.base_url, "workspaceId": support::WORKSPACE,
                     "apiKeySecretRef": {"name": "cp-api-key", "key": "api-key"}}
        }),
    )
    .await;
    h.apply(with(
        docker("on-second"),
        "/spec/controlPlaneRef/name",
        json!("second"),
    ))
    .await;
    h.wait_ready("on-second", TIMEOUT).await;
    planes
        .delete("second", &DeleteParams::default())
        .await
        .unwrap();
    // The plane stays (finalizer agentserver.dev/in-use) while it is used,
    // and says so; its AgentDeployment keeps working.
    let kept = support::eventually(Duration::from_secs(20), "the plane InUse", || async {
        let p = planes.get_opt("second").await.ok()??;
        let ready = agent_operator::api::conditions::find(
            &p.status?.conditions,
            agent_operator::api::conditions::READY,
        )?
        .clone();
        (ready.reason == "InUse").then_some(ready.message)
    })
    .await;
    assert!(kept.contains("on-second"), "{kept}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        support::is_ready_now(&h.api.get("on-second").await.unwrap()),
        "the AgentDeployment keeps working on a plane being deleted"
    );
    n += 1;
    table.push(row(
        n,
        "AgentControlPlane deleted while in use",
        "missing reference",
        "kept by its finalizer, `InUse` naming its users; the AgentDeployment stays Ready; remote deployment untouched",
        &kept,
    ));

    // A Secret that changes every second.
    let churn_started = Instant::now();
    let mut changes = 0;
    while churn_started.elapsed() < CHURN {
        changes += 1;
        apply_json(
            &secrets,
            "churn",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "churn"},
                   "stringData": {"token": format!("v{changes}")}}),
        )
        .await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // The last value is deployed in the end.
    let final_value = format!("v{changes}");
    // (Read every 2 s: the test's own reads count against the budget too.)
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let d = h.cp.get_deployment(&churn_id).await.unwrap();
        if d.secrets
            .iter()
            .any(|s| s.name == "TOKEN" && s.value.expose_secret() == final_value)
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the last Secret value was not deployed"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    h.wait_ready("churn", TIMEOUT).await;

    // A healthy resource after everything hostile.
    let started = Instant::now();
    h.apply(docker("healthy-after")).await;
    h.wait_ready("healthy-after", TIMEOUT).await;
    let healthy_after = started.elapsed();

    let log: Vec<_> = h.emulator.requests_since(mark).await;
    let churn_patches = log
        .iter()
        .filter(|r| {
            r.route == route::PATCH && r.deployment_id.as_deref() == Some(churn_id.as_str())
        })
        .count();
    n += 1;
    table.push(row(
        n,
        "Secret changing every second",
        "churn",
        "paced: one PATCH per `SECRETS_PATCH_INTERVAL` (30 s), with the latest value",
        &format!(
            "{changes} Secret values in {}s gave {churn_patches} PATCHes; the last value was deployed",
            CHURN.as_secs()
        ),
    ));

    // The control plane saw nothing it would refuse: the only creates are
    // `on-second`'s and `healthy-after`'s, no request answered 4xx but the bad key's probes,
    // and the doomed deployment was not touched.
    let creates = log.iter().filter(|r| r.route == route::CREATE).count();
    let refused: Vec<_> = log
        .iter()
        .filter(|r| r.status.starts_with('4') && r.status != "401")
        .collect();
    let unauthorized = log.iter().filter(|r| r.status == "401").count();
    eprintln!(
        "401 answers: {:?}",
        log.iter()
            .filter(|r| r.status == "401")
            .map(|r| (r.t_ms, r.route.as_str()))
            .collect::<Vec<_>>()
    );
    let doomed_touched = log
        .iter()
        .filter(|r| {
            r.deployment_id.as_deref() == Some(doomed_id.as_str()) && !r.route.starts_with("GET")
        })
        .count();
    if creates != 2 {
        problems.push(format!(
            "{creates} creates (only on-second's and healthy-after's expected)"
        ));
    }
    if !refused.is_empty() {
        problems.push(format!("requests answered 4xx: {refused:?}"));
    }
    if unauthorized > 3 {
        problems.push(format!(
            "{unauthorized} requests with the bad key (at most 3)"
        ));
    }
    if doomed_touched != 0 {
        problems.push(format!(
            "{doomed_touched} mutations of the deployment whose Secret was deleted"
        ));
    }
    // A Secret changing every second costs one PATCH (one build) per
    // `SECRETS_PATCH_INTERVAL`, carrying the latest value, not one a second.
    let interval = agent_operator::controller::SECRETS_PATCH_INTERVAL.as_secs();
    let max_patches = CHURN.as_secs().div_ceil(interval) as usize + 1;
    if churn_patches > max_patches {
        problems.push(format!(
            "{churn_patches} PATCHes for {changes} Secret changes (at most {max_patches})"
        ));
    }

    eprintln!("\nHOSTILE INPUT TABLE ({} rows)\n{}\n", n, table.join("\n"));
    eprintln!(
        "FIGURE hostile rows={n} creates={creates} refused_4xx={} unauthorized={unauthorized} \
         churn_changes={changes} churn_patches={churn_patches} healthy_before_s={:.1} \
         healthy_after_s={:.1}",
        refused.len(),
        healthy_before.as_secs_f64(),
        healthy_after.as_secs_f64()
    );
    assert!(n >= 30, "at least 30 hostile inputs, got {n}");
    assert!(
        healthy_after < healthy_before * 3 + Duration::from_secs(10),
        "the healthy resource after the hostile ones took {healthy_after:?} (before: {healthy_before:?})"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The budget guard runs when `h` drops.
    let _ = &h;
}
