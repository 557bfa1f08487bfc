//! Write-sequence tests of the AgentDeployment pass, without a cluster
//! (the tier of kube-rs controller-rs `fixtures.rs`): one scenario per path
//! (create, poll, patch, drift, rejection, stall, delete) runs
//! [`super::reconcile`] against the in-process control plane emulator and
//! the fake Kubernetes API shared by every kind
//! ([`crate::controller::fake_api`]), which serves the objects the pass
//! reads and records every write it makes. Each test pins the exact writes of each pass, in order:
//! the status (with its `Ready` reason), the annotations (`+` set, `-`
//! removed), the events, the finalizer.

use std::time::Duration;

use control_plane_emulator::{
    DEMO_API_KEY, DEMO_WORKSPACE_ID, EmulatorConfig, FaultConfig, RejectRule,
};
use serde_json::json;

use crate::api::deployment::{AgentDeployment, FINALIZER};
use crate::controller::fake_api::{GROUP, NS, Scenario};

const NAME: &str = "app";

/// The path of the AgentDeployment `app`.
fn app() -> String {
    format!("{GROUP}/agentdeployments/{NAME}")
}

/// The AgentDeployment scenarios: the shared [`Scenario`] with the
/// AgentDeployment `app` (an image, its finalizer already added).
impl Scenario {
    /// A scenario whose revisions spend `step` in each in-progress status
    /// and whose deletes take `delete`.
    async fn new(step: Duration, delete: Duration) -> Self {
        let s = Scenario::with(EmulatorConfig {
            step_duration: step,
            delete_duration: delete,
            ..EmulatorConfig::default()
        })
        .await;
        s.put(
            &app(),
            json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentDeployment",
                "metadata": {"name": NAME, "namespace": NS, "uid": "u-app", "generation": 1,
                    "resourceVersion": "1", "finalizers": [FINALIZER], "annotations": {}},
                "spec": {"source": "external_docker",
                    "sourceRevisionConfig": {"imageUri": "registry.example.com/acme/app:1"}}}),
        );
        s
    }

    /// The object as the API server holds it (what the watch would deliver).
    fn object(&self) -> AgentDeployment {
        self.object_at(&app())
    }

    /// Changes the stored object with `f` (a user's edit).
    fn edit(&self, f: impl FnOnce(&mut serde_json::Value)) {
        self.edit_at(&app(), f);
    }

    /// One pass on the stored object: the writes it made, in order.
    async fn pass(&self) -> Vec<String> {
        self.pass_of::<AgentDeployment>(&app()).await
    }

    /// The id of the remote deployment recorded in status.
    fn deployment_id(&self) -> String {
        let o = self.object();
        o.status
            .and_then(|s| s.deployment_id)
            .expect("deployment id")
    }

    /// Changes the remote deployment's image from outside the operator.
    async fn change_remote_image(&self, image: &str) {
        let url = format!(
            "{}/v2/deployments/{}",
            self.emulator.base_url(),
            self.deployment_id()
        );
        let answer = reqwest::Client::new()
            .patch(url)
            .header("X-Api-Key", DEMO_API_KEY)
            .header("X-Tenant-Id", DEMO_WORKSPACE_ID)
            .json(&json!({"source_revision_config": {"image_uri": image}}))
            .send()
            .await
            .expect("outside PATCH");
        assert!(answer.status().is_success(), "{}", answer.status());
    }

    /// Redeploys the remote deployment from outside the operator (as
    /// `agentctl redeploy` or the UI would).
    async fn redeploy_outside(&self) {
        let url = format!(
            "{}/v2/deployments/{}/revisions",
            self.emulator.base_url(),
            self.deployment_id()
        );
        let answer = reqwest::Client::new()
            .post(url)
            .header("X-Api-Key", DEMO_API_KEY)
            .header("X-Tenant-Id", DEMO_WORKSPACE_ID)
            .send()
            .await
            .expect("outside redeploy");
        assert!(answer.status().is_success(), "{}", answer.status());
    }
}

/// Long enough that a revision stays in progress for the whole test.
const FOREVER: Duration = Duration::from_secs(3600);
/// Short enough that a revision is DEPLOYED by the next pass.
const QUICK: Duration = Duration::from_millis(5);

/// Waits for the emulator's revisions (or deletes) to move on.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(200)).await;
}

#[tokio::test]
async fn create_writes_the_marker_then_status_then_the_id_then_events() {
    let s = Scenario::new(FOREVER, FOREVER).await;
    assert_eq!(
        s.pass().await,
        [
            "annotations +create-pending",
            "status RevisionInProgress",
            "annotations -create-pending +deployment-id",
            "event Normal Created",
        ]
    );
}

/// The REVISION column (`status.revisionStatus`) is filled by the first
/// status write after the create, without a read of the revision, and the
/// next pass reads the revision's real status.
#[tokio::test]
async fn the_first_status_write_after_a_create_fills_the_revision_column() {
    let s = Scenario::new(FOREVER, FOREVER).await;
    s.pass().await;
    let status = s.object().status.expect("status");
    assert!(status.latest_revision_id.is_some());
    assert_eq!(status.revision_status.as_deref(), Some("CREATING"));
    s.pass().await;
    let read = s.object().status.unwrap().revision_status.unwrap();
    assert_ne!(read, "CREATING", "the poll reads the revision");
}

#[tokio::test]
async fn poll_writes_status_only_when_the_revision_status_changes() {
    let s = Scenario::new(FOREVER, FOREVER).await;
    s.pass().await;
    assert_eq!(
        s.pass().await,
        ["status RevisionInProgress"],
        "first read of the revision"
    );
    assert_eq!(s.pass().await, Vec::<String>::new(), "nothing changed");
}

#[tokio::test]
async fn patch_writes_status_and_one_event() {
    let s = Scenario::new(QUICK, FOREVER).await;
    s.pass().await;
    settle().await;
    assert_eq!(
        s.pass().await,
        ["status RevisionDeployed", "event Normal RevisionDeployed"]
    );
    s.edit(|o| {
        o["spec"]["sourceRevisionConfig"]["imageUri"] = json!("registry.example.com/acme/app:2");
        o["metadata"]["generation"] = json!(2);
    });
    assert_eq!(
        s.pass().await,
        ["status RevisionInProgress", "event Normal Patched"]
    );
}

#[tokio::test]
async fn drift_is_corrected_with_one_status_write_and_one_event() {
    let s = Scenario::new(QUICK, FOREVER).await;
    s.pass().await;
    settle().await;
    s.pass().await;
    s.change_remote_image("registry.example.com/acme/other:9")
        .await;
    assert_eq!(
        s.pass().await,
        ["status RevisionInProgress", "event Normal DriftCorrected"]
    );
}

#[tokio::test]
async fn a_redeploy_from_outside_is_followed_with_one_status_write_and_one_event() {
    let s = Scenario::new(QUICK, FOREVER).await;
    s.pass().await;
    settle().await;
    s.pass().await;
    s.redeploy_outside().await;
    assert_eq!(
        s.pass().await,
        [
            "status RevisionInProgress",
            "event Normal OutOfBandRevision"
        ]
    );
}

#[tokio::test]
async fn rejection_writes_status_removes_the_marker_and_warns_once() {
    let s = Scenario::new(FOREVER, FOREVER).await;
    s.emulator
        .state()
        .set_faults(FaultConfig {
            reject: vec![RejectRule {
                route: "POST /v2/deployments".into(),
                status: 400,
                detail: Some("no".into()),
                raw_body: None,
            }],
            ..FaultConfig::default()
        })
        .expect("faults");
    assert_eq!(
        s.pass().await,
        [
            "annotations +create-pending",
            "status InvalidSpec",
            "annotations -create-pending",
            "event Warning InvalidSpec",
        ]
    );
    assert_eq!(s.pass().await, Vec::<String>::new(), "not sent again");
}

#[tokio::test]
async fn stall_on_a_missing_plane_writes_status_and_warns_once() {
    let s = Scenario::new(FOREVER, FOREVER).await;
    s.edit(|o| o["spec"]["controlPlaneRef"] = json!({"name": "missing"}));
    assert_eq!(
        s.pass().await,
        [
            "status ControlPlaneNotReady",
            "event Warning ControlPlaneNotReady"
        ]
    );
    assert_eq!(s.pass().await, Vec::<String>::new(), "already reported");
}

#[tokio::test]
async fn delete_writes_deleting_then_the_event_and_the_finalizer() {
    let s = Scenario::new(QUICK, Duration::from_millis(100)).await;
    s.pass().await;
    s.edit(|o| o["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z"));
    assert_eq!(s.pass().await, ["status Deleting"]);
    settle().await;
    settle().await;
    assert_eq!(
        s.pass().await,
        ["event Normal Deleted", "finalizer removed"]
    );
}
