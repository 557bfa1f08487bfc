//! The `AgentListener` controller and the placement helper against a real
//! kube-apiserver + etcd (envtest) and the control plane emulator (in-process,
//! on loopback): a listener of a self-hosted enterprise workspace is Ready with
//! its fields mirrored; a workspace that is not enterprise is Stalled
//! `NotEnterprise` with the service's detail; an unknown id is Stalled
//! `ListenerNotFound`; the placement helper accepts a namespace the listener
//! lists and rejects another.
//!
//! The controller runs in the test process (`listener::run`) on a client of
//! the shared envtest, watching only the test's namespace: the in-process
//! preset of the harness (`HarnessBuilder::start_in_process`).

use crate::{common, support};
use support::{InProcessController, InProcessHarness};

use std::time::{Duration, Instant};

use agent_operator::api::conditions::{READY, find};
use agent_operator::api::{AgentDeploymentSpec, AgentListener};
use agent_operator::controller::placement;
use agent_operator::controlplane::ControlPlaneClient;
use agent_operator::plan::status::STALLED;
use control_plane_emulator::{ApiKey, EmulatorConfig, ListenerSeed};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(30);
/// Key of [`ENTERPRISE_WORKSPACE`] (self-hosted enterprise, has a listener).
const ENTERPRISE_KEY: &str = support::leaks::LISTENER_ENTERPRISE_KEY;
const ENTERPRISE_WORKSPACE: &str = "5c4b3a29-1807-4f6e-8d5c-4b3a29180706";
/// Key of [`PLAIN_WORKSPACE`] (not enterprise: listeners answer 403).
const PLAIN_KEY: &str = support::leaks::LISTENER_PLAIN_KEY;
const PLAIN_WORKSPACE: &str = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
/// The listener seeded in [`ENTERPRISE_WORKSPACE`].
const LISTENER_ID: &str = "6f1c2a3e-4b5d-4e6f-8a7b-9c0d1e2f3a4b";

/// One test's namespace, emulator and running listener controller, plus
/// the planes' own controller (a listener waits for its plane's first check
/// before it sends anything): the in-process preset of the harness.
async fn start(prefix: &str) -> InProcessHarness {
    support::Harness::builder(prefix)
        .start_in_process(
            EmulatorConfig {
                api_keys: vec![
                    ApiKey::new(ENTERPRISE_KEY, ENTERPRISE_WORKSPACE),
                    ApiKey::new(PLAIN_KEY, PLAIN_WORKSPACE),
                ],
                listeners: vec![ListenerSeed {
                    workspace_id: ENTERPRISE_WORKSPACE.into(),
                    id: LISTENER_ID.parse().unwrap(),
                    compute_id: "cluster-a".into(),
                    k8s_namespaces: Some(vec!["agents".into(), "staging".into()]),
                }],
                ..EmulatorConfig::default()
            },
            &[
                InProcessController::ControlPlane,
                InProcessController::Listener,
            ],
        )
        .await
}

/// What these tests do with the harness.
trait Listeners {
    fn listeners(&self) -> Api<AgentListener>;
    async fn plane(&self, name: &str, workspace: &str, key: &str);
    async fn listener(&self, name: &str, listener_id: &str, plane: &str);
    async fn wait_reason(&self, name: &str, reason: &str) -> AgentListener;
    async fn cp(&self, plane: &str) -> ControlPlaneClient;
}

impl Listeners for InProcessHarness {
    fn listeners(&self) -> Api<AgentListener> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// A Secret with `key` and an AgentControlPlane `name` on the emulator
    /// for `workspace`.
    async fn plane(&self, name: &str, workspace: &str, key: &str) {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.ns);
        let secret = format!("{name}-key");
        apply_json(
            &secrets,
            &secret,
            json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": secret},
                "stringData": {"api-key": key}
            }),
        )
        .await;
        apply_json(
            &Api::<agent_operator::api::AgentControlPlane>::namespaced(
                self.client.clone(),
                &self.ns,
            ),
            name,
            json!({
                "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentControlPlane",
                "metadata": {"name": name},
                "spec": {
                    "url": self.emulator.base_url(),
                    "workspaceId": workspace,
                    "apiKeySecretRef": {"name": secret, "key": "api-key"}
                }
            }),
        )
        .await;
    }

    async fn listener(&self, name: &str, listener_id: &str, plane: &str) {
        apply_json(
            &self.listeners(),
            name,
            json!({
                "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentListener",
                "metadata": {"name": name},
                "spec": {"listenerId": listener_id, "controlPlaneRef": {"name": plane}}
            }),
        )
        .await;
    }

    /// Polls `name` until its `Ready` condition has `reason`; panics with the
    /// last status after [`TIMEOUT`].
    async fn wait_reason(&self, name: &str, reason: &str) -> AgentListener {
        let deadline = Instant::now() + TIMEOUT;
        let mut last = None;
        loop {
            if let Some(obj) = self.listeners().get_opt(name).await.expect("reading") {
                if ready(&obj).is_some_and(|(_, r, _)| r == reason) {
                    return obj;
                }
                last = obj.status;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for Ready reason {reason}; last status: {last:#?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The client of `plane`, on the plane's own path (the test's reads
    /// need not wait for the plane's first check).
    async fn cp(&self, plane: &str) -> ControlPlaneClient {
        let planes: Api<agent_operator::api::AgentControlPlane> =
            Api::namespaced(self.client.clone(), &self.ns);
        let plane = planes.get(plane).await.expect("reading the plane");
        self.ctx
            .planes
            .client_for_plane(&self.client, &plane, Duration::from_secs(5), None)
            .await
            .unwrap()
            .expect("a control plane client")
    }
}

/// The condition `type_` as (status, reason, message).
fn condition(obj: &AgentListener, type_: &str) -> Option<(String, String, String)> {
    let c = find(&obj.status.as_ref()?.conditions, type_)?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

fn ready(obj: &AgentListener) -> Option<(String, String, String)> {
    condition(obj, READY)
}

/// An external_docker deployment spec placed by `listener` (`ref:<name>` for
/// an AgentListener, else a raw listener id) in `k8s_namespace`.
fn placed_spec(listener: &str, k8s_namespace: &str) -> AgentDeploymentSpec {
    let mut source_config = json!({"listenerConfig": {"k8sNamespace": k8s_namespace}});
    match listener.strip_prefix("ref:") {
        Some(name) => source_config["listenerRef"] = json!({"name": name}),
        None => source_config["listenerId"] = json!(listener),
    }
    serde_json::from_value(json!({
        "source": "external_docker",
        "sourceConfig": source_config,
        "sourceRevisionConfig": {"imageUri": "docker.io/acme/agent:1"}
    }))
    .expect("a valid spec")
}

#[tokio::test(flavor = "multi_thread")]
async fn an_enterprise_listener_is_ready_with_its_fields_mirrored() {
    test_support::skip_without!(Envtest);
    let h = start("agl-ready").await;
    h.plane("default", ENTERPRISE_WORKSPACE, ENTERPRISE_KEY)
        .await;
    h.listener("edge", LISTENER_ID, "default").await;

    let obj = h.wait_reason("edge", "ListenerFound").await;
    let (status, _, message) = ready(&obj).unwrap();
    assert_eq!(status, "True");
    assert!(message.contains("agents, staging"), "{message}");
    let s = obj.status.clone().unwrap();
    assert_eq!(s.observed_generation, obj.metadata.generation);
    assert_eq!(s.compute_type.as_deref(), Some("k8s"));
    assert_eq!(s.compute_id.as_deref(), Some("cluster-a"));
    assert_eq!(
        s.k8s_namespaces,
        Some(vec!["agents".to_owned(), "staging".to_owned()])
    );
    let remote = h
        .cp("default")
        .await
        .get_listener(LISTENER_ID)
        .await
        .unwrap();
    assert_eq!(s.version, remote.version);
    assert_eq!(s.created_at.as_deref(), Some(remote.created_at.as_str()));
    assert_eq!(s.updated_at.as_deref(), Some(remote.updated_at.as_str()));
    // Abnormal-true conditions are written only while True.
    assert_eq!(condition(&obj, STALLED), None);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workspace_that_is_not_enterprise_is_stalled_not_enterprise() {
    test_support::skip_without!(Envtest);
    let h = start("agl-not-enterprise").await;
    h.plane("plain", PLAIN_WORKSPACE, PLAIN_KEY).await;
    h.listener("edge", LISTENER_ID, "plain").await;

    let obj = h.wait_reason("edge", "NotEnterprise").await;
    let (status, _, message) = ready(&obj).unwrap();
    assert_eq!(status, "False");
    assert_eq!(condition(&obj, STALLED).unwrap().0, "True");
    assert!(message.contains("403"), "{message}");
    assert!(
        message.contains(&format!(
            "Listeners are not allowed for workspace {PLAIN_WORKSPACE}"
        )),
        "the service's detail names the workspace: {message}"
    );
    let s = obj.status.unwrap();
    assert_eq!(s.compute_id, None, "nothing mirrored");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_listener_is_stalled_listener_not_found() {
    test_support::skip_without!(Envtest);
    let h = start("agl-not-found").await;
    h.plane("default", ENTERPRISE_WORKSPACE, ENTERPRISE_KEY)
        .await;
    let unknown = "00000000-1111-4222-8333-444444444444";
    h.listener("ghost", unknown, "default").await;

    let obj = h.wait_reason("ghost", "ListenerNotFound").await;
    let (status, _, message) = ready(&obj).unwrap();
    assert_eq!(status, "False");
    assert_eq!(condition(&obj, STALLED).unwrap().0, "True");
    assert!(message.contains(unknown), "names the id: {message}");
}

#[tokio::test]
async fn the_listener_id_must_be_a_uuid() {
    test_support::skip_without!(Envtest);
    let client = common::client().await;
    let ns = common::test_namespace(&client, "agl-schema").await;
    let api: Api<AgentListener> = Api::namespaced(client, &ns);
    let err = api
        .patch(
            "bad",
            &kube::api::PatchParams::apply("tests").force(),
            &kube::api::Patch::Apply(json!({
                "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentListener",
                "metadata": {"name": "bad"},
                "spec": {"listenerId": "not-a-uuid"}
            })),
        )
        .await
        .expect_err("the API server refuses a listener id that is not a uuid");
    assert!(err.to_string().contains("listenerId"), "{err}");
    let ok = apply_json(
        &api,
        "good",
        json!({
            "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentListener",
            "metadata": {"name": "good"},
            "spec": {"listenerId": LISTENER_ID}
        }),
    )
    .await;
    assert_eq!(ok.spec.control_plane_ref.name, "default");
}

#[tokio::test(flavor = "multi_thread")]
async fn placement_accepts_a_listed_namespace_and_rejects_another() {
    test_support::skip_without!(Envtest);
    let h = start("agl-placement").await;
    h.plane("default", ENTERPRISE_WORKSPACE, ENTERPRISE_KEY)
        .await;
    h.plane("plain", PLAIN_WORKSPACE, PLAIN_KEY).await;
    h.listener("edge", LISTENER_ID, "default").await;
    let cp = h.cp("default").await;

    // Through the AgentListener, and with the raw id: a listed namespace.
    for listener in ["ref:edge", LISTENER_ID] {
        let placed =
            placement::resolve_listener(&h.ctx, &cp, &h.ns, &placed_spec(listener, "agents"))
                .await
                .unwrap();
        assert_eq!(placed, Ok(Some(LISTENER_ID.to_owned())), "{listener}");
    }

    // A namespace the listener does not list.
    let blocked = placement::resolve_listener(&h.ctx, &cp, &h.ns, &placed_spec("ref:edge", "prod"))
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(blocked.reason, "PlacementInvalid");
    assert!(blocked.message.contains("\"prod\""), "{}", blocked.message);
    assert!(
        blocked.message.contains("agents, staging"),
        "{}",
        blocked.message
    );

    // A missing AgentListener.
    let blocked =
        placement::resolve_listener(&h.ctx, &cp, &h.ns, &placed_spec("ref:absent", "agents"))
            .await
            .unwrap()
            .unwrap_err();
    assert_eq!(blocked.reason, "ListenerNotFound");
    assert!(blocked.message.contains("absent"), "{}", blocked.message);

    // An unknown listener id.
    let unknown = "00000000-1111-4222-8333-444444444444";
    let blocked = placement::resolve_listener(&h.ctx, &cp, &h.ns, &placed_spec(unknown, "agents"))
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(blocked.reason, "ListenerNotFound");
    assert!(blocked.message.contains(unknown), "{}", blocked.message);

    // A workspace that is not self-hosted enterprise.
    let plain = h.cp("plain").await;
    let blocked =
        placement::resolve_listener(&h.ctx, &plain, &h.ns, &placed_spec(LISTENER_ID, "agents"))
            .await
            .unwrap()
            .unwrap_err();
    assert_eq!(blocked.reason, "NotEnterprise");
    assert!(
        blocked.message.contains(PLAIN_WORKSPACE),
        "{}",
        blocked.message
    );
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
