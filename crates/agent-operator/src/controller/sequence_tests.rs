//! Write-sequence tests of the AgentControlPlane and AgentListener passes,
//! on the fake API server shared by every kind ([`super::fake_api`]): one
//! scenario per outcome pins the writes of each pass, in the one order of
//! every kind: status first, then the event of a `Ready` change; a pass
//! that changes nothing writes nothing.

use control_plane_emulator::{
    DEMO_WORKSPACE_ID, EmulatorConfig, FaultConfig, ListenerSeed, RejectRule,
};
use serde_json::{Value, json};

use super::fake_api::{GROUP, NS, PLANE, Scenario, base64_of};
use crate::api::control_plane::{AgentControlPlane, IN_USE_FINALIZER};
use crate::api::listener::AgentListener;

/// The path of the AgentControlPlane `name`.
fn plane_path(name: &str) -> String {
    format!("{GROUP}/agentcontrolplanes/{name}")
}

/// An AgentControlPlane `name` of the emulator whose key is in the Secret
/// `secret`, never checked yet (no status), with its finalizer when
/// `finalized`.
fn plane(s: &Scenario, name: &str, secret: &str, finalized: bool) -> Value {
    let finalizers: Vec<&str> = if finalized {
        vec![IN_USE_FINALIZER]
    } else {
        vec![]
    };
    json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentControlPlane",
        "metadata": {"name": name, "namespace": NS, "uid": format!("u-{name}"), "generation": 1,
            "resourceVersion": "1", "finalizers": finalizers},
        "spec": {"url": s.emulator.base_url(), "workspaceId": DEMO_WORKSPACE_ID,
            "apiKeySecretRef": {"name": secret, "key": "api-key"}}})
}

/// One pass of the AgentControlPlane `name`.
async fn plane_pass(s: &Scenario, name: &str) -> Vec<String> {
    s.pass_of::<AgentControlPlane>(&plane_path(name)).await
}

#[tokio::test]
async fn a_plane_that_authenticates_writes_status_then_one_normal_event() {
    let s = Scenario::with(EmulatorConfig::default()).await;
    s.put(&plane_path("p"), plane(&s, "p", "key", false));
    assert_eq!(plane_pass(&s, "p").await, ["finalizer added"]);
    assert_eq!(
        plane_pass(&s, "p").await,
        ["status Authenticated", "event Normal Authenticated"]
    );
    assert_eq!(plane_pass(&s, "p").await, Vec::<String>::new(), "unchanged");
}

#[tokio::test]
async fn a_refused_key_writes_status_then_one_warning() {
    let s = Scenario::with(EmulatorConfig::default()).await;
    s.put(
        &format!("/api/v1/namespaces/{NS}/secrets/wrong"),
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "wrong", "namespace": NS, "resourceVersion": "1"},
            "data": {"api-key": base64_of("not-the-key")}}),
    );
    s.put(&plane_path("p"), plane(&s, "p", "wrong", true));
    assert_eq!(
        plane_pass(&s, "p").await,
        ["status Unauthorized", "event Warning Unauthorized"]
    );
    assert_eq!(
        plane_pass(&s, "p").await,
        Vec::<String>::new(),
        "warned once"
    );
}

#[tokio::test]
async fn a_missing_key_secret_writes_status_then_one_warning() {
    let s = Scenario::with(EmulatorConfig::default()).await;
    s.put(&plane_path("p"), plane(&s, "p", "missing", true));
    assert_eq!(
        plane_pass(&s, "p").await,
        ["status SecretNotFound", "event Warning SecretNotFound"]
    );
    assert_eq!(
        plane_pass(&s, "p").await,
        Vec::<String>::new(),
        "warned once"
    );
}

/// The emulator answers the probe with `status`.
fn probe_answers(s: &Scenario, status: u16) {
    s.emulator
        .state()
        .set_faults(FaultConfig {
            reject: vec![RejectRule {
                route: "GET /v2/deployments".into(),
                status,
                detail: Some("no".into()),
                raw_body: None,
            }],
            ..FaultConfig::default()
        })
        .expect("faults");
}

#[tokio::test]
async fn a_refused_probe_writes_status_then_one_warning() {
    let s = Scenario::with(EmulatorConfig::default()).await;
    probe_answers(&s, 400);
    s.put(&plane_path("p"), plane(&s, "p", "key", true));
    assert_eq!(
        plane_pass(&s, "p").await,
        [
            "status ControlPlaneUnavailable",
            "event Warning ControlPlaneUnavailable"
        ]
    );
}

/// A transient error: the status and its Warning are written before the
/// error is returned (then backed off from).
#[tokio::test]
async fn an_unavailable_control_plane_writes_status_then_one_warning_then_fails() {
    let s = Scenario::with(EmulatorConfig::default()).await;
    probe_answers(&s, 503);
    s.put(&plane_path("p"), plane(&s, "p", "key", true));
    let obj = std::sync::Arc::new(s.object_at::<AgentControlPlane>(&plane_path("p")));
    let result = super::kind::reconcile(obj, s.kinds.clone()).await;
    assert!(
        matches!(
            result,
            Err(crate::controller::error::Error::ControlPlane { .. })
        ),
        "{result:?}"
    );
    assert_eq!(
        std::mem::take(&mut *s.api.writes.lock().unwrap()),
        [
            "status ControlPlaneUnavailable",
            "event Warning ControlPlaneUnavailable"
        ]
    );
}

#[tokio::test]
async fn a_plane_in_use_writes_status_then_one_warning_and_keeps_its_finalizer() {
    let s = Scenario::with(EmulatorConfig::default()).await;
    let user = format!("{GROUP}/agentdeployments/app");
    s.put(
        &user,
        json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentDeployment",
            "metadata": {"name": "app", "namespace": NS, "uid": "u-app", "generation": 1,
                "resourceVersion": "1"},
            "spec": {"source": "external_docker",
                "sourceRevisionConfig": {"imageUri": "registry.example.com/acme/app:1"}}}),
    );
    s.edit_at(PLANE, |o| {
        o["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    });
    assert_eq!(
        plane_pass(&s, "default").await,
        ["status InUse", "event Warning InUse"]
    );
    assert_eq!(
        plane_pass(&s, "default").await,
        Vec::<String>::new(),
        "warned once"
    );
    s.remove(&user);
    assert_eq!(plane_pass(&s, "default").await, ["finalizer removed"]);
}

/// The listener seeded in the emulator's demo workspace (which makes it a
/// self-hosted enterprise one).
const LISTENER_ID: &str = "6f1c2a3e-0000-4000-8000-000000000009";

/// A scenario whose demo workspace has the listener [`LISTENER_ID`] when
/// `seeded` (else it is not enterprise: listeners answer 403).
async fn listener_scenario(seeded: bool) -> Scenario {
    let listeners = seeded
        .then(|| ListenerSeed {
            workspace_id: DEMO_WORKSPACE_ID.into(),
            id: LISTENER_ID.parse().unwrap(),
            compute_id: "cluster-a".into(),
            k8s_namespaces: Some(vec!["agents".into()]),
        })
        .into_iter()
        .collect();
    Scenario::with(EmulatorConfig {
        listeners,
        ..EmulatorConfig::default()
    })
    .await
}

/// Stores the AgentListener `l` of `listener_id` on the plane `plane` and
/// runs one pass on it.
async fn listener_pass(s: &Scenario, listener_id: &str, plane: &str) -> Vec<String> {
    let path = format!("{GROUP}/agentlisteners/l");
    if !s.api.objects.lock().unwrap().contains_key(&path) {
        s.put(
            &path,
            json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentListener",
                "metadata": {"name": "l", "namespace": NS, "uid": "u-l", "generation": 1,
                    "resourceVersion": "1"},
                "spec": {"listenerId": listener_id, "controlPlaneRef": {"name": plane}}}),
        );
    }
    s.pass_of::<AgentListener>(&path).await
}

#[tokio::test]
async fn a_listener_found_writes_status_then_one_normal_event() {
    let s = listener_scenario(true).await;
    assert_eq!(
        listener_pass(&s, LISTENER_ID, "default").await,
        ["status ListenerFound", "event Normal ListenerFound"]
    );
    assert_eq!(
        listener_pass(&s, LISTENER_ID, "default").await,
        Vec::<String>::new(),
        "unchanged"
    );
}

#[tokio::test]
async fn an_unknown_listener_writes_status_then_one_warning() {
    let s = listener_scenario(true).await;
    let other = "6f1c2a3e-0000-4000-8000-000000000001";
    assert_eq!(
        listener_pass(&s, other, "default").await,
        ["status ListenerNotFound", "event Warning ListenerNotFound"]
    );
    assert_eq!(
        listener_pass(&s, other, "default").await,
        Vec::<String>::new(),
        "warned once"
    );
}

#[tokio::test]
async fn a_workspace_that_is_not_enterprise_writes_status_then_one_warning() {
    let s = listener_scenario(false).await;
    assert_eq!(
        listener_pass(&s, LISTENER_ID, "default").await,
        ["status NotEnterprise", "event Warning NotEnterprise"]
    );
}

#[tokio::test]
async fn a_listener_on_a_missing_plane_writes_status_then_one_warning() {
    let s = listener_scenario(true).await;
    assert_eq!(
        listener_pass(&s, LISTENER_ID, "missing").await,
        [
            "status ControlPlaneNotReady",
            "event Warning ControlPlaneNotReady"
        ]
    );
}

/// A report's changes of the in-process memory are applied only once its
/// Kubernetes writes succeeded: a failed status write leaves the memory as
/// it was.
#[tokio::test]
async fn memory_changes_follow_the_writes_that_make_them_true() {
    use super::kind::{Report, write};
    let s = Scenario::with(EmulatorConfig::default()).await;
    let api: kube::Api<AgentControlPlane> = kube::Api::namespaced(s.ctx.client.clone(), NS);
    let plane: AgentControlPlane = s.object_at(PLANE);
    let report = |key: &'static str| {
        let mut r =
            Report::<AgentControlPlane>::end(kube::runtime::controller::Action::await_change());
        r.status = Some(Box::default());
        r.remember.push(move |ctx| {
            ctx.backoff(key);
        });
        r
    };
    let remembered = |key: &str| {
        s.kinds
            .failures
            .lock()
            .unwrap()
            .contains_key(&crate::controller::context::memory_key(key))
    };
    assert!(
        write(&api, &s.kinds, &plane, report("written"))
            .await
            .is_ok()
    );
    assert!(remembered("written"));
    s.remove(PLANE);
    assert!(
        write(&api, &s.kinds, &plane, report("failed"))
            .await
            .is_err()
    );
    assert!(!remembered("failed"), "not remembered");
}

// Each scenario below also pins the control plane requests of each pass
// (the emulator's request log): the passes of a kind never send more.

/// One pass of the AgentControlPlane `name`: its writes and its requests.
async fn plane_step(s: &Scenario, name: &str) -> (Vec<String>, Vec<String>) {
    s.requests();
    let writes = plane_pass(s, name).await;
    (writes, s.requests())
}

/// One pass of the AgentListener `l`: its writes and its requests.
async fn listener_step(s: &Scenario, listener_id: &str, plane: &str) -> (Vec<String>, Vec<String>) {
    s.requests();
    let writes = listener_pass(s, listener_id, plane).await;
    (writes, s.requests())
}

/// `n` times `request`.
fn times(n: usize, request: &str) -> Vec<String> {
    vec![request.to_owned(); n]
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|i| i.to_string()).collect()
}

const PROBE: &str = "GET /v2/deployments 200";
const GET_LISTENER: &str = "GET /v2/listeners/{listener_id} 200";

#[tokio::test]
async fn a_plane_deleted_while_unused_removes_its_finalizer_without_a_request() {
    let s = Scenario::with(EmulatorConfig::default()).await;
    s.put(&plane_path("p"), plane(&s, "p", "key", true));
    assert_eq!(
        plane_step(&s, "p").await,
        (
            strings(&["status Authenticated", "event Normal Authenticated"]),
            strings(&[PROBE])
        )
    );
    s.edit_at(&plane_path("p"), |o| {
        o["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    });
    assert_eq!(
        plane_step(&s, "p").await,
        (strings(&["finalizer removed"]), vec![])
    );
}

#[tokio::test]
async fn a_forbidden_workspace_writes_status_then_one_warning() {
    let s = Scenario::with(EmulatorConfig::default()).await;
    probe_answers(&s, 403);
    s.put(&plane_path("p"), plane(&s, "p", "key", true));
    assert_eq!(
        plane_step(&s, "p").await,
        (
            strings(&["status Forbidden", "event Warning Forbidden"]),
            strings(&["GET /v2/deployments 403"])
        )
    );
}

/// The probe is retried inside the pass (4 attempts), the failure reported,
/// and the next pass after the outage reports the plane Ready again.
#[tokio::test]
async fn a_plane_back_from_an_outage_writes_status_then_one_normal_event() {
    let s = Scenario::with(EmulatorConfig::default()).await;
    probe_answers(&s, 503);
    s.put(&plane_path("p"), plane(&s, "p", "key", true));
    assert_eq!(
        plane_step(&s, "p").await,
        (
            strings(&[
                "status ControlPlaneUnavailable",
                "event Warning ControlPlaneUnavailable"
            ]),
            times(4, "GET /v2/deployments 503")
        )
    );
    s.emulator
        .state()
        .set_faults(FaultConfig::default())
        .expect("faults");
    assert_eq!(
        plane_step(&s, "p").await,
        (
            strings(&["status Authenticated", "event Normal Authenticated"]),
            strings(&[PROBE])
        )
    );
}

/// A transient failure: status and its Warning are written before the
/// error is returned (then backed off from); the last observation of the
/// listener is kept; the next pass after the outage is Ready again.
#[tokio::test]
async fn an_unavailable_control_plane_keeps_the_listener_observed_then_fails() {
    let s = listener_scenario(true).await;
    assert_eq!(
        listener_step(&s, LISTENER_ID, "default").await,
        (
            strings(&["status ListenerFound", "event Normal ListenerFound"]),
            strings(&[GET_LISTENER])
        )
    );
    s.emulator
        .state()
        .set_faults(FaultConfig {
            reject: vec![RejectRule {
                route: "GET /v2/listeners/{listener_id}".into(),
                status: 503,
                detail: Some("no".into()),
                raw_body: None,
            }],
            ..FaultConfig::default()
        })
        .expect("faults");
    let path = format!("{GROUP}/agentlisteners/l");
    let obj = std::sync::Arc::new(s.object_at::<AgentListener>(&path));
    let result = super::kind::reconcile(obj, s.kinds.clone()).await;
    assert!(
        matches!(
            result,
            Err(crate::controller::error::Error::ControlPlane { .. })
        ),
        "{result:?}"
    );
    assert_eq!(
        std::mem::take(&mut *s.api.writes.lock().unwrap()),
        [
            "status ControlPlaneUnavailable",
            "event Warning ControlPlaneUnavailable"
        ]
    );
    assert_eq!(
        s.requests(),
        times(4, "GET /v2/listeners/{listener_id} 503")
    );
    let kept = s.object_at::<AgentListener>(&path).status.expect("status");
    assert_eq!(kept.compute_id.as_deref(), Some("cluster-a"), "kept");
    s.emulator
        .state()
        .set_faults(FaultConfig::default())
        .expect("faults");
    assert_eq!(
        listener_step(&s, LISTENER_ID, "default").await,
        (
            strings(&["status ListenerFound", "event Normal ListenerFound"]),
            strings(&[GET_LISTENER])
        )
    );
}

#[tokio::test]
async fn an_invalid_listener_id_writes_status_then_one_warning() {
    let s = listener_scenario(true).await;
    assert_eq!(
        listener_step(&s, "not-a-uuid", "default").await,
        (
            strings(&["status InvalidSpec", "event Warning InvalidSpec"]),
            strings(&["GET /v2/listeners/{listener_id} 422"])
        )
    );
    assert_eq!(
        listener_step(&s, "not-a-uuid", "default").await.0,
        Vec::<String>::new(),
        "warned once"
    );
}

/// Nothing is sent for a plane before its own probe has judged it; the
/// wait is reported like every `Ready=False` change of the kind, with a
/// Warning.
#[tokio::test]
async fn a_listener_on_a_plane_not_checked_yet_waits_without_a_request() {
    let s = listener_scenario(true).await;
    s.put(&plane_path("p"), plane(&s, "p", "key", true));
    assert_eq!(
        listener_step(&s, LISTENER_ID, "p").await,
        (
            strings(&[
                "status ControlPlaneNotChecked",
                "event Warning ControlPlaneNotChecked"
            ]),
            vec![]
        )
    );
}

/// A plane whose key was refused blocks its listeners: no request of theirs.
#[tokio::test]
async fn a_listener_on_a_plane_whose_key_is_refused_stalls_without_a_request() {
    let s = listener_scenario(true).await;
    s.put(
        &format!("/api/v1/namespaces/{NS}/secrets/wrong"),
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "wrong", "namespace": NS, "resourceVersion": "1"},
            "data": {"api-key": base64_of("not-the-key")}}),
    );
    s.put(&plane_path("p"), plane(&s, "p", "wrong", true));
    assert_eq!(
        plane_pass(&s, "p").await,
        ["status Unauthorized", "event Warning Unauthorized"]
    );
    assert_eq!(
        listener_step(&s, LISTENER_ID, "p").await,
        (
            strings(&[
                "status ControlPlaneNotReady",
                "event Warning ControlPlaneNotReady"
            ]),
            vec![]
        )
    );
}
