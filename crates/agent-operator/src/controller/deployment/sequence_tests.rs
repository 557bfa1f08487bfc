//! Write-sequence tests of the AgentDeployment pass, without a cluster
//! (the tier of kube-rs controller-rs `fixtures.rs`): one scenario per path
//! (create, poll, patch, drift, rejection, stall, delete; then adoption,
//! crash recovery, name conflict, redeploy, re-create, unheld PATCH,
//! verification and automatic rollback, which also pin the control plane
//! requests) runs
//! [`super::reconcile`] against the in-process control plane emulator and
//! the fake Kubernetes API shared by every kind
//! ([`crate::controller::fake_api`]), which serves the objects the pass
//! reads and records every write it makes. Each test pins the exact writes of each pass, in order:
//! the status (with its `Ready` reason), the annotations (`+` set, `-`
//! removed; `metadata +finalizer ...` when the finalizer is in the same
//! write), the events, the finalizer.

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

/// From apply to Ready, a quick deploy costs five writes: the finalizer
/// with the create-pending marker (one metadata write, before the POST),
/// the status that records the id (`Creating`: from then on admission locks
/// the fields the control plane cannot change, and `kubectl get` shows the
/// row), the id annotation in place of the marker (the durable record of
/// the id, which a restore without status keeps), then the Ready status and
/// its one event, which names the deployment created. The control plane
/// requests are those of every create: the name lookup, the POST, one read
/// of the revision.
#[tokio::test]
async fn a_quick_create_writes_the_finalizer_with_the_marker_the_id_then_ready() {
    let s = Scenario::new(QUICK, FOREVER).await;
    s.edit(|o| o["metadata"]["finalizers"] = json!([]));
    assert_eq!(
        s.step().await,
        seen(
            &[
                "metadata +finalizer +create-pending",
                "annotations -create-pending +deployment-id",
                "status Creating",
            ],
            &[LIST, "POST /v2/deployments 201"],
        )
    );
    let o = s.object();
    assert_eq!(o.metadata.finalizers, Some(vec![FINALIZER.to_owned()]));
    let status = o.status.expect("the status of the create");
    let id = status
        .deployment_id
        .clone()
        .expect("the id, from the create on");
    assert_eq!(status.revision_status.as_deref(), Some("CREATING"));
    assert!(
        status.control_plane.is_some(),
        "the plane is recorded with the id"
    );
    settle().await;
    let (writes, requests) = s.step().await;
    assert_eq!(
        (writes.clone(), requests),
        seen(
            &["status RevisionDeployed", "event Normal RevisionDeployed"],
            &[GET_REVISION],
        )
    );
    assert_eq!(
        s.object().metadata.annotations.unwrap()[crate::api::deployment::DEPLOYMENT_ID_ANNOTATION],
        id
    );
    assert_eq!(s.step().await, seen(&[], &[GET]), "nothing changed");
}

/// A long first revision shows `Creating` from the create on, with its id,
/// and each poll that reads a new revision status writes it (the REVISION
/// column), once.
#[tokio::test]
async fn a_long_first_revision_shows_creating_from_the_create_on() {
    let s = Scenario::new(FOREVER, FOREVER).await;
    assert_eq!(
        s.pass().await,
        [
            "annotations +create-pending",
            "annotations -create-pending +deployment-id",
            "status Creating",
        ]
    );
    assert_eq!(
        s.step().await,
        seen(&["status Creating"], &[GET_REVISION]),
        "the first read of the revision shows its status"
    );
    let status = s.object().status.expect("status");
    assert!(status.latest_revision_id.is_some());
    assert_ne!(status.revision_status.as_deref(), Some("CREATING"));
    assert_eq!(s.pass().await, Vec::<String>::new(), "nothing changed");
}

/// A restore without status (Velero's default for custom resources): the
/// id annotation leads back to the deployment, recorded without a create.
#[tokio::test]
async fn a_restore_without_status_finds_the_deployment_by_its_annotation() {
    let mut s = Scenario::new(FOREVER, FOREVER).await;
    s.step().await;
    let annotated = s.object().metadata.annotations.unwrap()
        [crate::api::deployment::DEPLOYMENT_ID_ANNOTATION]
        .clone();
    s.edit(|o| {
        o.as_object_mut().unwrap().remove("status");
    });
    s.restart();
    let (writes, requests) = s.step().await;
    assert_eq!(
        writes,
        ["status RevisionInProgress", "event Normal CreateRecovered"]
    );
    assert!(
        !requests.iter().any(|r| r.starts_with("POST")),
        "{requests:?}"
    );
    assert_eq!(s.deployment_id(), annotated);
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
            "annotations -create-pending",
            "status InvalidSpec",
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

// The paths of issue 29 part 3: each pass pins its Kubernetes writes and the
// control plane requests it made, both in order.

/// The control plane requests of the AgentDeployment scenarios.
impl Scenario {
    /// One pass: its writes and its control plane requests, each in order.
    async fn step(&self) -> (Vec<String>, Vec<String>) {
        self.requests();
        let writes = self.pass().await;
        (writes, self.requests())
    }

    /// Creates the deployment `name` of `image` from outside the operator
    /// (another tool, or a process that died); its id.
    async fn create_outside(&self, name: &str, image: &str) -> String {
        crate::controlplane::client::install_crypto_provider();
        let answer: serde_json::Value = reqwest::Client::new()
            .post(format!("{}/v2/deployments", self.emulator.base_url()))
            .header("X-Api-Key", DEMO_API_KEY)
            .header("X-Tenant-Id", DEMO_WORKSPACE_ID)
            .json(&json!({"name": name, "source": "external_docker", "source_config": {"resource_spec": {"min_scale": 1}},
                "source_revision_config": {"image_uri": image}, "secrets": []}))
            .send()
            .await
            .expect("outside create")
            .json()
            .await
            .expect("created deployment");
        let id = answer["id"]
            .as_str()
            .unwrap_or_else(|| panic!("{answer}"))
            .to_owned();
        self.requests();
        id
    }

    /// Deletes the remote deployment `id` from outside the operator.
    async fn delete_outside(&self, id: &str) {
        let answer = reqwest::Client::new()
            .delete(format!("{}/v2/deployments/{id}", self.emulator.base_url()))
            .header("X-Api-Key", DEMO_API_KEY)
            .header("X-Tenant-Id", DEMO_WORKSPACE_ID)
            .send()
            .await
            .expect("outside delete");
        assert!(answer.status().is_success(), "{}", answer.status());
        self.requests();
    }

    /// Sets the annotation `key` to `value` (a user's or a restore's edit).
    fn annotate(&self, key: &str, value: &str) {
        self.edit(|o| o["metadata"]["annotations"][key] = json!(value));
    }
}

const IMAGE: &str = "registry.example.com/acme/app:1";
const GET: &str = "GET /v2/deployments/{deployment_id} 200";
const GET_REVISION: &str = "GET /v2/deployments/{deployment_id}/revisions/{revision_id} 200";
const LIST: &str = "GET /v2/deployments 200";

/// What a pass wrote and requested, as the `(writes, requests)` of
/// [`Scenario::step`].
fn seen(writes: &[&str], requests: &[&str]) -> (Vec<String>, Vec<String>) {
    (
        writes.iter().map(|w| w.to_string()).collect(),
        requests.iter().map(|r| r.to_string()).collect(),
    )
}

#[tokio::test]
async fn adoption_by_id_reads_the_deployment_once_and_sends_nothing() {
    let s = Scenario::new(QUICK, FOREVER).await;
    let id = s.create_outside("legacy", IMAGE).await;
    s.edit(|o| o["spec"]["deploymentId"] = json!(id));
    assert_eq!(
        s.step().await,
        seen(
            &[
                "annotations -create-pending +deployment-id",
                "status RevisionInProgress",
                "event Normal Adopted",
            ],
            &[GET],
        )
    );
    assert_eq!(s.deployment_id(), id);
    settle().await;
    assert_eq!(
        s.step().await,
        seen(
            &["status RevisionDeployed", "event Normal RevisionDeployed"],
            &[GET, GET_REVISION],
        ),
        "the adopted deployment is followed, never created or patched"
    );
}

/// An object that names a deployment (here `spec.deploymentId`) and lacks
/// the finalizer gets it alone, before the pass's first request, and the
/// pass goes on (no pass waits for that write).
#[tokio::test]
async fn an_adoption_without_the_finalizer_gets_it_alone_before_its_first_request() {
    let s = Scenario::new(QUICK, FOREVER).await;
    let id = s.create_outside("legacy", IMAGE).await;
    s.edit(|o| {
        o["spec"]["deploymentId"] = json!(id);
        o["metadata"]["finalizers"] = json!([]);
    });
    assert_eq!(
        s.step().await,
        seen(
            &[
                "metadata +finalizer",
                "annotations -create-pending +deployment-id",
                "status RevisionInProgress",
                "event Normal Adopted",
            ],
            &[GET],
        )
    );
    assert_eq!(
        s.object().metadata.finalizers,
        Some(vec![FINALIZER.to_owned()])
    );
}

/// A restore without status (Velero's default) finds its deployment by the
/// id annotation, checked against the name: no lookup, no create.
#[tokio::test]
async fn adoption_by_the_id_annotation_and_the_name_records_the_id_without_a_create() {
    let s = Scenario::new(QUICK, FOREVER).await;
    let id = s.create_outside(NAME, IMAGE).await;
    s.annotate(crate::api::deployment::DEPLOYMENT_ID_ANNOTATION, &id);
    assert_eq!(
        s.step().await,
        seen(
            &["status RevisionInProgress", "event Normal CreateRecovered"],
            &[GET],
        )
    );
    assert_eq!(s.deployment_id(), id);
}

/// The operator died after its POST landed and before it recorded the id:
/// the marker sends the pass to an exact-name lookup, which finds the
/// deployment; no second POST.
#[tokio::test]
async fn crash_recovery_finds_the_landed_create_by_name_and_records_its_id() {
    let s = Scenario::new(QUICK, FOREVER).await;
    let id = s.create_outside(NAME, IMAGE).await;
    s.annotate(
        crate::api::deployment::CREATE_PENDING_ANNOTATION,
        "2026-01-01T00:00:00Z",
    );
    assert_eq!(
        s.step().await,
        seen(
            &[
                "annotations -create-pending +deployment-id",
                "status RevisionInProgress",
                "event Normal CreateRecovered",
            ],
            &[LIST],
        )
    );
    assert_eq!(s.deployment_id(), id);
    settle().await;
    assert_eq!(
        s.step().await,
        seen(
            &["status RevisionDeployed", "event Normal RevisionDeployed"],
            &[GET, GET_REVISION],
        )
    );
}

/// A deployment with our name that this resource did not create (no
/// marker): no create, one Warning, nothing written again.
#[tokio::test]
async fn a_name_taken_by_a_deployment_we_did_not_create_stalls_without_a_create() {
    let s = Scenario::new(QUICK, FOREVER).await;
    s.create_outside(NAME, IMAGE).await;
    assert_eq!(
        s.step().await,
        seen(
            &["status NameConflict", "event Warning NameConflict"],
            &[LIST]
        )
    );
    assert_eq!(
        s.step().await,
        seen(&[], &[LIST]),
        "looked up again, already reported"
    );
}

/// The service refuses the create with 409: the marker goes (nothing was
/// created), one Warning, and the POST is not sent again.
#[tokio::test]
async fn a_create_answered_409_stalls_on_the_name_and_is_not_sent_again() {
    let s = Scenario::new(QUICK, FOREVER).await;
    s.emulator
        .state()
        .set_faults(FaultConfig {
            reject: vec![RejectRule {
                route: "POST /v2/deployments".into(),
                status: 409,
                detail: Some("name taken".into()),
                raw_body: None,
            }],
            ..FaultConfig::default()
        })
        .expect("faults");
    assert_eq!(
        s.step().await,
        seen(
            &[
                "annotations +create-pending",
                "annotations -create-pending",
                "status NameConflict",
                "event Warning NameConflict",
            ],
            &[LIST, "POST /v2/deployments 409"],
        )
    );
    assert_eq!(s.step().await, seen(&[], &[]), "not sent again");
}

#[tokio::test]
async fn the_redeploy_annotation_sends_one_redeploy() {
    let s = Scenario::new(QUICK, FOREVER).await;
    s.step().await;
    settle().await;
    s.step().await;
    s.annotate(
        crate::api::deployment::REDEPLOY_ANNOTATION,
        "2026-01-01T00:00:00Z",
    );
    assert_eq!(
        s.step().await,
        seen(
            &["status RevisionInProgress", "event Normal Redeployed"],
            &[GET, "POST /v2/deployments/{deployment_id}/revisions 201"],
        )
    );
    settle().await;
    assert_eq!(
        s.step().await,
        seen(
            &["status RevisionDeployed", "event Normal RevisionDeployed"],
            &[GET_REVISION],
        )
    );
    assert_eq!(s.step().await, seen(&[], &[GET]), "redeployed once");
}

/// A deployment deleted outside: one pass reports it (`RemoteDeleted`,
/// the id cleared), the next creates it again through the crash-safe create.
#[tokio::test]
async fn a_deployment_deleted_outside_is_reported_then_created_again() {
    let s = Scenario::new(QUICK, QUICK).await;
    s.step().await;
    settle().await;
    s.step().await;
    let old = s.deployment_id();
    s.delete_outside(&old).await;
    settle().await;
    assert_eq!(
        s.step().await,
        seen(
            &["status Creating", "event Warning RemoteDeleted"],
            &["GET /v2/deployments/{deployment_id} 404"],
        )
    );
    assert_eq!(
        s.step().await,
        seen(
            &[
                "annotations +create-pending",
                "annotations -create-pending +deployment-id",
                "status Creating",
            ],
            // The id annotation still names the deleted deployment: read
            // (404) before the name lookup.
            &[
                "GET /v2/deployments/{deployment_id} 404",
                LIST,
                "POST /v2/deployments 201"
            ],
        )
    );
    // The id annotation and the status record the new one.
    let annotated = |s: &Scenario| {
        s.object().metadata.annotations.unwrap()[crate::api::deployment::DEPLOYMENT_ID_ANNOTATION]
            .clone()
    };
    assert_ne!(annotated(&s), old);
    settle().await;
    assert_eq!(
        s.step().await,
        seen(
            &["status RevisionDeployed", "event Normal RevisionDeployed"],
            &[GET_REVISION],
        )
    );
    assert_eq!(s.deployment_id(), annotated(&s));
}

/// A spec change the service accepts but does not hold (it drops a
/// `resource_spec` key it does not know): one PATCH, whose answer shows the
/// change not held; reported once, not sent again. The pass's events keep
/// the order it makes them in: the verdict's Warning, then the `Patched` of
/// the request it sent.
#[tokio::test]
async fn an_unheld_patch_is_sent_once_and_reported_once() {
    let s = Scenario::new(QUICK, FOREVER).await;
    s.emulator
        .state()
        .set_faults(FaultConfig {
            ignored_resource_spec_keys: vec!["redis_memory_mb".into()],
            ..FaultConfig::default()
        })
        .expect("faults");
    s.step().await;
    settle().await;
    s.step().await;
    s.edit(|o| {
        o["spec"]["sourceConfig"] = json!({"resourceSpec": {"redisMemoryMb": 512}});
        o["metadata"]["generation"] = json!(2);
    });
    assert_eq!(
        s.step().await,
        seen(
            &[
                "status DriftNotConverging",
                "event Warning DriftNotConverging",
                "event Normal Patched",
            ],
            &[GET, "PATCH /v2/deployments/{deployment_id} 200"],
        ),
    );
    assert_eq!(s.step().await, seen(&[], &[GET]), "not sent again");
}

/// The requests of the pass that sees the revision DEPLOYED with
/// `spec.verify`: the revision, the deployment (is it the active
/// revision?), the assistant search on the agent server.
const VERIFYING: [&str; 3] = [
    GET_REVISION,
    GET,
    "POST /agents/{deployment_id}/assistants/search 200",
];

/// A scenario whose deployment verifies (`spec.verify`, against the
/// emulator's agent server at the deployment's URL) that it serves `graph`, created and moved on to DEPLOYED: the pass that sees it.
async fn verified_pass(graph: &str) -> (Scenario, (Vec<String>, Vec<String>)) {
    let s = Scenario::new(QUICK, FOREVER).await;
    s.edit(|o| o["spec"]["verify"] = json!({"assistants": {"graphId": graph, "minCount": 1}}));
    s.step().await;
    settle().await;
    let deployed = s.step().await;
    (s, deployed)
}

#[tokio::test]
async fn verification_that_passes_writes_status_then_deployed_then_verified() {
    let (s, deployed) = verified_pass("agent").await;
    let writes = [
        "status RevisionDeployed",
        "event Normal RevisionDeployed",
        "event Normal Verified",
    ];
    assert_eq!(deployed, seen(&writes, &VERIFYING));
    assert_eq!(s.step().await, seen(&[], &[GET]), "verified once");
}

#[tokio::test]
async fn verification_that_fails_writes_status_then_one_warning_and_backs_off() {
    let (s, deployed) = verified_pass("other").await;
    let writes = [
        "status AssistantsMissing",
        "event Normal RevisionDeployed",
        "event Warning VerificationFailed",
    ];
    assert_eq!(deployed, seen(&writes, &VERIFYING));
    let again = s.step().await;
    assert_eq!(
        again,
        seen(&[], &[GET]),
        "not checked again before the backoff"
    );
}

/// `spec.verify.suite` with two cases: the pass that sees the revision
/// DEPLOYED asks for the threads an earlier attempt left (none), runs each
/// case on its own thread, writes once, and deletes the threads in one
/// prune (a task the report starts once its writes succeeded); the next
/// pass runs nothing.
#[tokio::test]
async fn a_suite_runs_each_case_on_its_thread_writes_once_then_prunes() {
    let s = Scenario::new(QUICK, FOREVER).await;
    let case = |n: &str| {
        json!({"name": n, "assistantId": "agent",
            "input": {"messages": [{"role": "user", "content": n}]},
            "assertions": [{"pointer": "/messages/0/content", "value": n}]})
    };
    s.edit(|o| {
        o["spec"]["verify"] = json!({"suite": {"cases": [case("a"), case("b")], "concurrency": 1}})
    });
    s.step().await;
    settle().await;
    let (writes, mut requests) = s.step().await;
    settle().await;
    requests.extend(s.requests());
    let run = "POST /agents/{deployment_id}/threads/{thread_id}/runs/stream 200";
    let writes_then_requests = seen(
        &[
            "status RevisionDeployed",
            "event Normal RevisionDeployed",
            "event Normal Verified",
        ],
        &[
            GET_REVISION,
            GET,
            "POST /agents/{deployment_id}/threads/search 200",
            run,
            run,
            "POST /agents/{deployment_id}/threads/prune 200",
        ],
    );
    assert_eq!((writes, requests), writes_then_requests);
    assert_eq!(s.step().await, seen(&[], &[GET]), "the suite ran once");
}

/// A replica killed between the status write that recorded the id and the
/// annotation write after it: the next replica's first pass finds the
/// object converged, writes the missing annotation and sends nothing.
#[tokio::test]
async fn a_restart_writes_an_id_annotation_a_kill_left_out_without_a_request() {
    let mut s = Scenario::new(QUICK, FOREVER).await;
    s.pass().await;
    settle().await;
    s.pass().await;
    let id = s.deployment_id();
    s.edit(|o| {
        o["metadata"]["annotations"]
            .as_object_mut()
            .unwrap()
            .remove(crate::api::deployment::DEPLOYMENT_ID_ANNOTATION);
    });
    s.requests();
    s.restart();
    assert_eq!(
        s.step().await,
        seen(&["annotations -create-pending +deployment-id"], &[])
    );
    assert_eq!(
        s.object().metadata.annotations.unwrap()[crate::api::deployment::DEPLOYMENT_ID_ANNOTATION],
        id
    );
    // A restart on a complete object writes nothing and sends nothing.
    s.restart();
    assert_eq!(s.step().await, seen(&[], &[]));
}

/// `spec.rollback.onFailedVerification` (issue 33 item 4): the pass that
/// sees a new revision fail its verification redeploys the last verified
/// one (its one mutation) and reports `RolledBack` with one Warning; the
/// rollback's revision is verified and the resource stays `Stalled`; later
/// passes, a restart included, send no PATCH and no second rollback.
#[tokio::test]
async fn a_failed_verification_is_rolled_back_once_and_the_spec_held_back() {
    let mut s = Scenario::new(QUICK, FOREVER).await;
    s.edit(|o| {
        o["spec"]["verify"] = json!({"assistants": {"graphId": "agent", "minCount": 1}});
        o["spec"]["rollback"] = json!({"onFailedVerification": true});
    });
    s.step().await;
    settle().await;
    s.step().await;
    s.edit(|o| {
        o["spec"]["sourceRevisionConfig"]["imageUri"] =
            json!("registry.example.com/acme/app:unhealthy");
        o["metadata"]["generation"] = json!(2);
    });
    assert_eq!(
        s.step().await,
        seen(
            &["status RevisionInProgress", "event Normal Patched"],
            &[GET, "PATCH /v2/deployments/{deployment_id} 200"],
        )
    );
    settle().await;
    let mut requests = VERIFYING.to_vec();
    requests.push("POST /v2/deployments/{deployment_id}/revisions/{revision_id}/redeploy 200");
    assert_eq!(
        s.step().await,
        seen(
            &[
                "status RolledBack",
                "event Warning RolledBack",
                "event Normal RevisionDeployed",
                "event Warning VerificationFailed",
            ],
            &requests,
        )
    );
    settle().await;
    assert_eq!(
        s.step().await,
        seen(
            &[
                "status RolledBack",
                "event Normal RevisionDeployed",
                "event Normal Verified",
            ],
            &VERIFYING,
        )
    );
    let status = s.object().status.unwrap();
    let rollback = status.rollback.clone().unwrap();
    assert_eq!(status.latest_revision_id, rollback.revision_id);
    assert_eq!(status.serving.map(|v| v.verified), Some(true));
    assert_eq!(s.step().await, seen(&[], &[GET]), "no PATCH, no rollback");
    s.restart();
    assert_eq!(s.step().await, seen(&[], &[]), "a restart repeats nothing");
}
