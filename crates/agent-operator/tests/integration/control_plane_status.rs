//! The `AgentControlPlane` controller against a real kube-apiserver + etcd
//! (envtest) and the control plane emulator (in-process, on loopback): Ready
//! after an authenticated call, Stalled for a wrong key (401), a key of another
//! workspace (403) and a missing Secret, recovery after a key rotation without
//! restarting the controller, and the client-side rate limit of the shared
//! client cache.
//!
//! The controller runs in the test process (`control_plane::run`) on a client
//! of the shared envtest, watching only the test's namespace: the in-process
//! preset of the harness (`HarnessBuilder::start_in_process`).

use crate::{common, support};
use support::{InProcessController, InProcessHarness};

use std::time::{Duration, Instant};

use agent_operator::api::AgentControlPlane;
use agent_operator::api::conditions::{READY, find};
use agent_operator::controlplane::ListDeployments;
use agent_operator::plan::status::{RECONCILING, STALLED};
use control_plane_emulator::{ApiKey, EmulatorConfig, FaultConfig};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(30);
/// The key of [`WORKSPACE`].
const KEY: &str = support::leaks::CONTROL_PLANE_KEY;
const WORKSPACE: &str = "3d1f6a2b-7c4e-4b8a-9d2c-5e6f7a8b9c0d";
/// A valid key, but of [`OTHER_WORKSPACE`].
const OTHER_KEY: &str = support::leaks::OTHER_WORKSPACE_KEY;
const OTHER_WORKSPACE: &str = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d";

/// One test's namespace, emulator and (when `run_controller`) the
/// AgentControlPlane controller: the in-process preset of the harness.
async fn start(prefix: &str, faults: FaultConfig, run_controller: bool) -> InProcessHarness {
    let controllers: &[InProcessController] = if run_controller {
        &[InProcessController::ControlPlane]
    } else {
        &[]
    };
    support::Harness::builder(prefix)
        .start_in_process(
            EmulatorConfig {
                api_keys: vec![
                    ApiKey::new(KEY, WORKSPACE),
                    ApiKey::new(OTHER_KEY, OTHER_WORKSPACE),
                ],
                faults,
                ..EmulatorConfig::default()
            },
            controllers,
        )
        .await
}

/// What these tests do with the harness.
trait Planes {
    fn planes(&self) -> Api<AgentControlPlane>;
    async fn secret(&self, name: &str, api_key: &str);
    async fn plane(&self, name: &str, secret: &str, extra: serde_json::Value);
    async fn plane_with(
        &self,
        name: &str,
        credential: &str,
        secret: &str,
        extra: serde_json::Value,
    );
    async fn wait(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&Cond) -> bool,
    ) -> AgentControlPlane;
    fn count(&self, route: &str, status: &str) -> u64;
}

impl Planes for InProcessHarness {
    fn planes(&self) -> Api<AgentControlPlane> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    async fn secret(&self, name: &str, api_key: &str) {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.ns);
        apply_json(
            &secrets,
            name,
            json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": name},
                "stringData": {"api-key": api_key}
            }),
        )
        .await;
    }

    /// Applies an AgentControlPlane on the emulator for [`WORKSPACE`] with
    /// the key in Secret `secret`, plus `extra` spec fields.
    async fn plane(&self, name: &str, secret: &str, extra: serde_json::Value) {
        self.plane_with(name, "apiKeySecretRef", secret, extra)
            .await;
    }

    /// [`Self::plane`] with the credential in the spec field `credential`
    /// (`apiKeySecretRef` or `bearerTokenSecretRef`).
    async fn plane_with(
        &self,
        name: &str,
        credential: &str,
        secret: &str,
        extra: serde_json::Value,
    ) {
        let mut spec = json!({
            "url": self.emulator.base_url(),
            "workspaceId": WORKSPACE,
            credential: {"name": secret, "key": "api-key"}
        });
        if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
            spec.extend(extra.clone());
        }
        apply_json(
            &self.planes(),
            name,
            json!({
                "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentControlPlane",
                "metadata": {"name": name},
                "spec": spec
            }),
        )
        .await;
    }

    /// Polls `name` until its `Ready` condition satisfies `check`; panics
    /// with the last status after [`TIMEOUT`].
    async fn wait(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&Cond) -> bool,
    ) -> AgentControlPlane {
        let deadline = Instant::now() + TIMEOUT;
        let mut last = None;
        loop {
            if let Some(obj) = self.planes().get_opt(name).await.expect("reading") {
                if ready(&obj).is_some_and(|c| check(&c)) {
                    return obj;
                }
                last = obj.status;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; last status: {last:#?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Count of answers with `status` to `route` (e.g. `GET /v2/deployments`).
    fn count(&self, route: &str, status: &str) -> u64 {
        self.emulator.state().request_counts()["routes"][route][status]
            .as_u64()
            .unwrap_or(0)
    }
}

/// The `Ready` condition as (status, reason, message).
type Cond = (String, String, String);

fn ready(obj: &AgentControlPlane) -> Option<Cond> {
    condition(obj, READY)
}

fn condition(obj: &AgentControlPlane, type_: &str) -> Option<Cond> {
    let c = find(&obj.status.as_ref()?.conditions, type_)?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

#[tokio::test(flavor = "multi_thread")]
async fn ready_after_an_authenticated_call() {
    test_support::skip_without!(Envtest);
    let h = start("acp-ready", FaultConfig::default(), true).await;
    h.secret("cp-key", KEY).await;
    h.plane("default", "cp-key", json!({})).await;

    let obj = h
        .wait("default", "Ready=True", |(s, _, _)| s == "True")
        .await;
    let (_, reason, message) = ready(&obj).unwrap();
    assert_eq!(reason, "Authenticated");
    assert!(message.contains(WORKSPACE), "{message}");
    let status = obj.status.clone().unwrap();
    assert_eq!(status.observed_generation, obj.metadata.generation);
    // Abnormal-true conditions are written only while True.
    assert_eq!(condition(&obj, STALLED), None);
    assert_eq!(condition(&obj, RECONCILING), None);
    assert!(
        h.count("GET /v2/deployments", "200") >= 1,
        "the probe is an authenticated list: {}",
        h.emulator.state().request_counts()
    );
}

/// A bearer token instead of an API key (docs/control-plane-api.md,
/// "Credentials and refusals"): authenticated, and a wrong token is
/// `Unauthorized` like a wrong key.
#[tokio::test(flavor = "multi_thread")]
async fn a_bearer_token_secret_authenticates_instead_of_a_key() {
    test_support::skip_without!(Envtest);
    let h = start("acp-bearer", FaultConfig::default(), true).await;
    for (plane, token) in [
        ("bearer", KEY),
        ("bearer-wrong", support::leaks::UNKNOWN_KEY),
    ] {
        h.secret(plane, token).await;
        h.plane_with(plane, "bearerTokenSecretRef", plane, json!({}))
            .await;
    }
    let obj = h
        .wait("bearer", "Ready=True", |(s, _, _)| s == "True")
        .await;
    assert_eq!(ready(&obj).unwrap().1, "Authenticated");
    let obj = h
        .wait("bearer-wrong", "Ready=False Unauthorized", |(_, r, _)| {
            r == "Unauthorized"
        })
        .await;
    let yaml = serde_json::to_string(&obj).unwrap();
    assert!(!yaml.contains(support::leaks::UNKNOWN_KEY), "{yaml}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_key_is_stalled_unauthorized_without_showing_the_key() {
    test_support::skip_without!(Envtest);
    let h = start("acp-unauthorized", FaultConfig::default(), true).await;
    let wrong = support::leaks::UNKNOWN_KEY;
    h.secret("cp-key", wrong).await;
    h.plane("default", "cp-key", json!({})).await;

    let obj = h
        .wait("default", "Ready=False Unauthorized", |(_, r, _)| {
            r == "Unauthorized"
        })
        .await;
    let (status, _, message) = ready(&obj).unwrap();
    assert_eq!(status, "False");
    assert_eq!(condition(&obj, STALLED).unwrap().0, "True");
    assert!(message.contains("401"), "{message}");
    assert!(
        message.contains("Invalid API key."),
        "service detail: {message}"
    );
    let yaml = serde_json::to_string(&obj).unwrap();
    assert!(
        !yaml.contains(wrong),
        "the key leaked into the object: {yaml}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_key_of_another_workspace_is_stalled_forbidden() {
    test_support::skip_without!(Envtest);
    let h = start("acp-forbidden", FaultConfig::default(), true).await;
    h.secret("cp-key", OTHER_KEY).await;
    h.plane("default", "cp-key", json!({})).await;

    let obj = h
        .wait("default", "Ready=False Forbidden", |(_, r, _)| {
            r == "Forbidden"
        })
        .await;
    let (status, _, message) = ready(&obj).unwrap();
    assert_eq!(status, "False");
    assert_eq!(condition(&obj, STALLED).unwrap().0, "True");
    assert!(
        message.contains(&format!(
            "The API key is not valid for workspace {WORKSPACE}"
        )),
        "service detail: {message}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_key_secret_is_stalled_until_it_appears() {
    test_support::skip_without!(Envtest);
    let h = start("acp-missing-secret", FaultConfig::default(), true).await;
    h.plane("default", "absent-key", json!({})).await;

    let obj = h
        .wait("default", "Ready=False SecretNotFound", |(_, r, _)| {
            r == "SecretNotFound"
        })
        .await;
    let (_, _, message) = ready(&obj).unwrap();
    assert!(
        message.contains("absent-key"),
        "names the Secret: {message}"
    );
    assert_eq!(
        h.emulator.state().request_counts()["total"],
        0,
        "no call without a key"
    );

    h.secret("absent-key", KEY).await;
    h.wait(
        "default",
        "Ready=True after the Secret appears",
        |(s, _, _)| s == "True",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn rotating_the_key_secret_is_picked_up_without_restart() {
    test_support::skip_without!(Envtest);
    let h = start("acp-rotation", FaultConfig::default(), true).await;
    h.secret("cp-key", support::leaks::REVOKED_KEY).await;
    h.plane("default", "cp-key", json!({})).await;
    h.wait("default", "Unauthorized with the old key", |(_, r, _)| {
        r == "Unauthorized"
    })
    .await;
    // `client_for` refuses a Stalled plane (its AgentDeployments wait);
    // the cache itself still holds a client for the old key.
    let planes: Api<AgentControlPlane> = Api::namespaced(h.client.clone(), &h.ns);
    let plane = planes.get("default").await.unwrap();
    let blocked = h
        .ctx
        .planes
        .client_for(&h.client, &h.ns, "default", Duration::from_secs(5), None)
        .await
        .unwrap()
        .expect_err("a Stalled plane gives no client to its deployments");
    assert!(
        blocked.message.contains("is not ready"),
        "{}",
        blocked.message
    );
    let cached = h
        .ctx
        .planes
        .client_for_plane(&h.client, &plane, Duration::from_secs(5), None)
        .await
        .unwrap()
        .expect("a client for the old key");
    let refused = cached
        .list_deployments(&ListDeployments::default())
        .await
        .expect_err("the old key is refused");

    // Rotate: only the Secret changes; the controller keeps running.
    h.secret("cp-key", KEY).await;
    let obj = h
        .wait("default", "Ready=True after the rotation", |(s, _, _)| {
            s == "True"
        })
        .await;
    assert_eq!(
        obj.metadata.generation,
        Some(1),
        "the resource was not edited"
    );
    let rotated = h
        .ctx
        .planes
        .client_for(&h.client, &h.ns, "default", Duration::from_secs(5), None)
        .await
        .unwrap()
        .expect("a client for the new key");
    rotated
        .list_deployments(&ListDeployments::default())
        .await
        .expect("the cached client uses the rotated key");
    assert_eq!(h.ctx.planes.len(), 1, "one cached client per control plane");
    // Debug and Display of the clients, the cache and a 401 never show a key.
    let shown = format!(
        "{cached:?}\n{rotated:?}\n{:?}\n{refused:?}\n{refused}\n{:?}",
        h.ctx.planes, h.ctx.config
    );
    let hits = support::leaks::scan_text("Debug output", &shown);
    assert!(hits.is_empty(), "{hits:?} in:\n{shown}");
}

#[tokio::test(flavor = "multi_thread")]
async fn rate_limit_settings_bound_the_shared_client() {
    test_support::skip_without!(Envtest);
    // The emulator answers 429 beyond 4 requests/s with a burst of 2, so an
    // unthrottled burst of 8 concurrent calls would see 429s; the control
    // plane's own limit (2/s, burst 1) keeps every call under it.
    let faults = FaultConfig {
        rate_limit_per_second: Some(4.0),
        rate_limit_burst: Some(2),
        ..FaultConfig::default()
    };
    let h = start("acp-rate-limit", faults, false).await;
    h.secret("cp-key", KEY).await;
    h.plane(
        "default",
        "cp-key",
        json!({"requestsPerSecond": 2, "burst": 1}),
    )
    .await;

    let timeout = Duration::from_secs(5);
    // No controller runs here, so the plane is never checked: the lookups
    // take the plane's own path (`client_for` waits for its first check).
    let plane = h.planes().get("default").await.unwrap();
    let mut clients = Vec::new();
    for _ in 0..2 {
        clients.push(
            h.ctx
                .planes
                .client_for_plane(&h.client, &plane, timeout, None)
                .await
                .unwrap()
                .expect("a client"),
        );
    }
    assert_eq!(
        h.ctx.planes.len(),
        1,
        "both lookups share one cached client"
    );

    let calls = 8;
    let started = Instant::now();
    let results = futures::future::join_all((0..calls).map(|i| {
        let cp = clients[i % clients.len()].clone();
        async move {
            cp.list_deployments(&ListDeployments {
                limit: Some(1),
                ..Default::default()
            })
            .await
        }
    }))
    .await;
    let elapsed = started.elapsed();
    for r in &results {
        assert!(r.is_ok(), "{r:?}");
    }
    let counts = h.emulator.state().request_counts();
    assert_eq!(
        h.count("GET /v2/deployments", "429"),
        0,
        "the client stayed under the service's limit: {counts}"
    );
    assert_eq!(
        h.count("GET /v2/deployments", "200"),
        calls as u64,
        "one answer per call: {counts}"
    );
    // Burst 1 at 2/s: the 8th call cannot start before 7 × 0.5 s.
    assert!(
        elapsed >= Duration::from_millis(3_000),
        "8 calls at 2/s with burst 1 took only {elapsed:?}"
    );
}

#[tokio::test]
async fn invalid_rate_limits_are_refused_by_the_schema() {
    test_support::skip_without!(Envtest);
    let client = common::client().await;
    let ns = common::test_namespace(&client, "acp-schema").await;
    let planes: Api<AgentControlPlane> = Api::namespaced(client, &ns);
    for (spec, message) in [
        (
            json!({"requestsPerSecond": 0}),
            "requestsPerSecond must be greater than 0",
        ),
        (json!({"requestsPerSecond": 1, "burst": 0}), "burst"),
        (json!({"burst": 3}), "burst needs requestsPerSecond"),
        (
            json!({"bearerTokenSecretRef": {"name": "t", "key": "token"}}),
            "set exactly one of apiKeySecretRef and bearerTokenSecretRef",
        ),
    ] {
        let mut full = json!({
            "url": "http://127.0.0.1:1",
            "workspaceId": WORKSPACE,
            "apiKeySecretRef": {"name": "k", "key": "api-key"}
        });
        full.as_object_mut()
            .unwrap()
            .extend(spec.as_object().unwrap().clone());
        let err = planes
            .patch(
                "bad",
                &kube::api::PatchParams::apply("tests").force(),
                &kube::api::Patch::Apply(json!({
                    "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentControlPlane",
                    "metadata": {"name": "bad"},
                    "spec": full
                })),
            )
            .await
            .expect_err("the API server refuses the spec");
        assert!(err.to_string().contains(message), "{spec}: {err}");
    }
    // Fractions are fine.
    apply_json(
        &planes,
        "fractional",
        json!({
            "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentControlPlane",
            "metadata": {"name": "fractional"},
            "spec": {
                "url": "http://127.0.0.1:1",
                "workspaceId": WORKSPACE,
                "apiKeySecretRef": {"name": "k", "key": "api-key"},
                "requestsPerSecond": 0.5
            }
        }),
    )
    .await;
}

/// Server-side applies one object as field manager `tests`; panics on error.
async fn apply_json<K>(api: &Api<K>, name: &str, value: serde_json::Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(
        name,
        &kube::api::PatchParams::apply("tests").force(),
        &kube::api::Patch::Apply(&value),
    )
    .await
    .unwrap_or_else(|e| panic!("applying {name}: {e}"))
}
