//! Issue 33 item 3, promotion by verified identity (`spec.promotion`): a
//! production AgentDeployment deploys exactly what its staging source
//! serves verified, checked on the emulator's built-in agent server
//! (`spec.verify` on both):
//! - `external_docker`: staging verified → production deployed with the
//!   same digest and verified, across namespaces with a grant; the timeline
//!   is printed;
//! - no grant: `Stalled`/`PromotionNotGranted` with no control plane
//!   request for the target; the grant added on the source wakes it;
//! - `github`: the branch moved between the verification on staging and
//!   the build of production: `Stalled`/`PromotionCommitMismatch`, and no
//!   further revision;
//! - `github`: staging verifies a new commit of the same branch: production
//!   makes exactly one new revision (a redeploy) and verifies it.
//!
//! Every test keeps the harness's request budget.

use crate::{common, support};

use std::time::{Duration, Instant};

use agent_operator::api::AgentDeployment;
use kube::Api;
use serde_json::{Value, json};
use support::{AgentDeploymentManifest, Harness, OperatorOptions, OperatorProcess, condition};

const TIMEOUT: Duration = Duration::from_secs(90);

const DIGEST: &str = "sha256:7d2f0c1e9b8a7f6e5d4c3b2a1908f7e6d5c4b3a29180f7e6d5c4b3a291807f6e";

/// What the verification of both sides checks: the graph of the
/// emulator's built-in agent server.
fn verify() -> Value {
    json!({"assistants": {"graphId": "agent"}})
}

/// A second namespace of the test with its AgentControlPlane `default` on
/// the harness's emulator, and an operator watching both.
async fn second_namespace(h: &mut Harness, prefix: &str) -> (String, Api<AgentDeployment>) {
    let ns = common::test_namespace(&h.client, prefix).await;
    support::install_control_plane(&h.client, &ns, &h.emulator).await;
    h.operator = Some(OperatorProcess::start_with(
        &h.kubeconfig,
        OperatorOptions {
            log_name: &h.test,
            namespaces: vec![&h.ns, &ns],
            ..OperatorOptions::default()
        },
    ));
    let api = Api::namespaced(h.client.clone(), &ns);
    (ns, api)
}

/// The Ready condition's `(status, reason, message)`.
fn ready(o: &AgentDeployment) -> Option<(String, String, String)> {
    condition(o, "Ready").map(|c| (c.status, c.reason, c.message))
}

/// Waits until the AgentControlPlane `default` of `ns` is `Ready=True`
/// (its probe done).
async fn plane_ready(h: &Harness, ns: &str) {
    let planes: Api<agent_operator::api::AgentControlPlane> = Api::namespaced(h.client.clone(), ns);
    support::eventually(TIMEOUT, "the AgentControlPlane to be Ready", || async {
        let plane = planes.get_opt("default").await.ok()??;
        let ready = agent_operator::api::conditions::find(
            &plane.status?.conditions,
            agent_operator::api::conditions::READY,
        )?
        .clone();
        (ready.status == "True").then_some(())
    })
    .await;
}

/// Requests about deployments (create, lookups, reads, revisions) the
/// emulator logged after `mark`.
async fn deployment_requests(h: &Harness, mark: usize) -> Vec<String> {
    h.emulator
        .requests_since(mark)
        .await
        .into_iter()
        .map(|e| e.route)
        .filter(|r| r.contains("/v2/deployments"))
        .collect()
}

#[tokio::test]
async fn staging_verified_is_promoted_to_production_with_the_same_digest() {
    test_support::skip_without!(Envtest);
    let started = Instant::now();
    let mut h = Harness::quick("op-promote")
        .without_operator()
        .start()
        .await;
    let (prod_ns, prod) = second_namespace(&mut h, "op-promote-prod").await;

    // Production first: it waits for staging, sending nothing.
    let mut production =
        AgentDeploymentManifest::docker("production", "registry.example/acme/agent:old")
            .spec("verify", verify())
            .build();
    production["spec"]["promotion"] =
        json!({"from": {"name": "staging", "namespace": h.ns}, "soakSeconds": 2});
    support::apply_json(&prod, "production", production).await;
    let waiting = support::wait_for(&prod, "production", TIMEOUT, "PromotionWaiting", |o| {
        ready(o).filter(|r| r.1 == "PromotionWaiting")
    })
    .await;
    assert!(waiting.2.contains("not found"), "{waiting:?}");

    // Staging, granting the production namespace, by tag and digest.
    let image = format!("registry.example/acme/agent:1.4@{DIGEST}");
    let mut staging = AgentDeploymentManifest::docker("staging", &image)
        .spec("verify", verify())
        .build();
    staging["spec"]["promotionGrants"] = json!([{"namespace": prod_ns}]);
    h.apply(staging).await;
    let staged = support::wait_for(&h.api, "staging", TIMEOUT, "staging verified", |o| {
        let s = o.status.as_ref()?.serving.clone()?;
        s.verified.then_some(s)
    })
    .await;
    let staging_verified_at = Instant::now();
    assert_eq!(staged.image_digest.as_deref(), Some(DIGEST));

    // Production deploys the digest staging verified, then verifies it.
    let obj = support::wait_for(&prod, "production", TIMEOUT, "production verified", |o| {
        let s = o.status.as_ref()?.serving.as_ref()?;
        (s.verified && support::is_ready_now(o)).then(|| o.clone())
    })
    .await;
    let production_verified_at = Instant::now();
    let status = obj.status.clone().unwrap();
    let serving = status.serving.clone().unwrap();
    assert_eq!(serving.image_digest.as_deref(), Some(DIGEST));
    let promoted = status.promoted_from.clone().expect("status.promotedFrom");
    assert_eq!(
        (promoted.namespace.as_str(), promoted.name.as_str()),
        (h.ns.as_str(), "staging")
    );
    assert_eq!(promoted.revision_id, staged.revision_id);
    assert_eq!(promoted.image_digest.as_deref(), Some(DIGEST));
    let pinned = format!("registry.example/acme/agent@{DIGEST}");
    assert_eq!(promoted.deployed.as_deref(), Some(pinned.as_str()));
    // The control plane was sent the digest, not production's own tag.
    let remote = h
        .remote_deployments()
        .await
        .into_iter()
        .find(|d| d.name == "production")
        .expect("production's remote deployment");
    let revisions = h.revisions(&remote.id).await;
    assert_eq!(revisions.len(), 1, "one revision: {revisions:?}");
    assert_eq!(
        revisions[0]
            .source_revision_config
            .as_ref()
            .and_then(|c| c.image_uri.as_deref()),
        Some(pinned.as_str())
    );
    support::wait_for_event(&h.client, &prod_ns, "production", "Promoted", TIMEOUT).await;
    // The timeline, from the statuses: staging verified (its
    // serving.verifiedAt), production took it (promotedFrom.at), its
    // revision DEPLOYED (finishedAt, the control plane's clock) and verified
    // (serving.verifiedAt).
    let time = |t: Option<&str>, what: &str| -> jiff::Timestamp {
        t.unwrap_or_else(|| panic!("{what}"))
            .parse()
            .unwrap_or_else(|e| panic!("{what}: {e}"))
    };
    let staging_verified = time(staged.verified_at.as_deref(), "staging verifiedAt");
    let taken = time(Some(&promoted.at), "promotedFrom.at");
    let deployed = time(
        status
            .revisions
            .first()
            .and_then(|r| r.finished_at.as_deref()),
        "production finishedAt",
    );
    let verified = time(serving.verified_at.as_deref(), "production verifiedAt");
    let after = |t: jiff::Timestamp| t.duration_since(staging_verified).as_secs_f64();
    eprintln!(
        "promotion timeline: staging verified at {staging_verified}; production took it at {taken} (+{:.1} s, soakSeconds 2), deployed at {deployed} (+{:.1} s), verified at {verified} (+{:.1} s); the test saw staging verified {:.1} s and production verified {:.1} s after it started",
        after(taken),
        after(deployed),
        after(verified),
        staging_verified_at.duration_since(started).as_secs_f64(),
        production_verified_at.duration_since(started).as_secs_f64(),
    );
    assert!(after(taken) >= 0.0 && after(verified) > after(taken));
    let promoted_at: jiff::Timestamp = promoted.at.parse().expect("RFC 3339");
    let since: jiff::Timestamp = staged
        .since
        .as_deref()
        .expect("serving.since")
        .parse()
        .unwrap();
    assert!(
        promoted_at.duration_since(since).as_secs_f64() >= 1.0,
        "taken {promoted_at} before the soak of the revision serving since {since}"
    );
}

#[tokio::test]
async fn without_a_grant_the_target_is_stalled_before_any_request() {
    test_support::skip_without!(Envtest);
    let mut h = Harness::quick("op-promote-grant")
        .without_operator()
        .start()
        .await;
    let (prod_ns, prod) = second_namespace(&mut h, "op-promote-grant-prod").await;
    // The probes of the two AgentControlPlanes done, the log is marked:
    // what follows is the AgentDeployments' only.
    plane_ready(&h, &h.ns).await;
    plane_ready(&h, &prod_ns).await;
    let mark = h.emulator.request_mark().await;
    // The source makes no request of its own (paused), so that any request
    // about deployments would be the target's.
    let mut staging = AgentDeploymentManifest::docker(
        "staging",
        &format!("registry.example/acme/agent@{DIGEST}"),
    )
    .spec("verify", verify())
    .build();
    staging["metadata"]["annotations"] = json!({"agentserver.dev/paused": "true"});
    h.apply(staging).await;
    let mut production =
        AgentDeploymentManifest::docker("production", "registry.example/acme/agent:1").build();
    production["spec"]["promotion"] =
        json!({"from": {"name": "staging", "namespace": h.ns}, "requireVerified": false});
    support::apply_json(&prod, "production", production).await;
    let stalled = support::wait_for(&prod, "production", TIMEOUT, "PromotionNotGranted", |o| {
        condition(o, "Stalled").filter(|c| c.status == "True" && c.reason == "PromotionNotGranted")
    })
    .await;
    assert!(
        stalled.message.contains("spec.promotionGrants")
            && stalled
                .message
                .contains(&format!("{{namespace: {prod_ns}}}")),
        "{}",
        stalled.message
    );
    support::wait_for_event(
        &h.client,
        &prod_ns,
        "production",
        "PromotionNotGranted",
        TIMEOUT,
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        deployment_requests(&h, mark).await,
        Vec::<String>::new(),
        "no request about deployments"
    );

    // The grant, added on the source, wakes the target: it now waits for
    // something served (the source is paused), still sending nothing.
    support::merge_patch(
        &h.api,
        "staging",
        json!({"spec": {"promotionGrants": [{"namespace": prod_ns}]}}),
    )
    .await;
    let waiting = support::wait_for(
        &prod,
        "production",
        Duration::from_secs(30),
        "PromotionWaiting",
        |o| ready(o).filter(|r| r.1 == "PromotionWaiting"),
    )
    .await;
    assert!(waiting.2.contains("serves no revision"), "{waiting:?}");
    assert_eq!(
        deployment_requests(&h, mark).await,
        Vec::<String>::new(),
        "no request about deployments"
    );
}

#[tokio::test]
async fn a_github_ref_that_moved_after_the_verification_stalls_production() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-promote-sha").start().await;
    let mut staging = support::github_deployment("staging", "main");
    staging["spec"]["verify"] = verify();
    h.apply(staging).await;
    let staged = support::wait_for(&h.api, "staging", TIMEOUT, "staging verified", |o| {
        let s = o.status.as_ref()?.serving.clone()?;
        s.verified.then_some(s)
    })
    .await;
    let verified_commit = staged.commit_sha.clone().expect("serving.commitSha");
    // A push to main after staging verified it: production builds main,
    // which is now another commit.
    let pushed: Value = reqwest::Client::new()
        .post(format!("{}/_emulator/repos/push", h.emulator.base_url))
        .json(&json!({"repo_url": test_support::manifests::REPO_URL, "ref": "main"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let moved_to = pushed["sha"].as_str().expect("the new commit").to_owned();
    assert_ne!(moved_to, verified_commit);

    let mut production = support::github_deployment("production", "main");
    production["spec"]["verify"] = verify();
    production["spec"]["promotion"] = json!({"from": {"name": "staging"}});
    h.apply(production).await;
    let stalled = support::wait_for(
        &h.api,
        "production",
        TIMEOUT,
        "PromotionCommitMismatch",
        |o| {
            condition(o, "Stalled")
                .filter(|c| c.status == "True" && c.reason == "PromotionCommitMismatch")
        },
    )
    .await;
    assert!(
        stalled.message.contains(&verified_commit) && stalled.message.contains(&moved_to),
        "{}",
        stalled.message
    );
    let obj = h.api.get("production").await.unwrap();
    let status = obj.status.clone().unwrap();
    assert_eq!(ready(&obj).map(|r| r.0), Some("False".to_owned()));
    let promoted = status.promoted_from.expect("status.promotedFrom");
    assert_eq!(
        promoted.commit_sha.as_deref(),
        Some(verified_commit.as_str())
    );
    // Nothing more is deployed: one revision, still one a while later
    // (passes keep coming: the verification, the resync).
    let id = status.deployment_id.expect("deployment id");
    tokio::time::sleep(Duration::from_secs(6)).await;
    let revisions = h.revisions(&id).await;
    assert_eq!(revisions.len(), 1, "no further revision: {revisions:?}");
    assert_eq!(
        revisions[0]
            .source_revision_config
            .as_ref()
            .and_then(|c| c.repo_commit_sha.as_deref()),
        Some(moved_to.as_str())
    );
    support::wait_for_event(
        &h.client,
        &h.ns,
        "production",
        "PromotionCommitMismatch",
        TIMEOUT,
    )
    .await;
}

#[tokio::test]
async fn a_github_source_that_verifies_a_new_commit_makes_one_production_revision() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-promote-git").start().await;
    let mut staging = support::github_deployment("staging", "main");
    staging["spec"]["verify"] = verify();
    h.apply(staging).await;
    let mut production = support::github_deployment("production", "main");
    production["spec"]["verify"] = verify();
    production["spec"]["promotion"] = json!({"from": {"name": "staging"}});
    h.apply(production).await;
    // Both verified on the same commit.
    let first = support::wait_for(&h.api, "production", TIMEOUT, "production verified", |o| {
        let s = o.status.as_ref()?;
        let serving = s.serving.as_ref()?;
        (serving.verified && support::is_ready_now(o)).then(|| s.clone())
    })
    .await;
    let c1 = first.serving.unwrap().commit_sha.expect("commitSha");
    assert_eq!(
        first.promoted_from.unwrap().commit_sha.as_deref(),
        Some(c1.as_str())
    );

    // A push, then staging builds and verifies the new commit (redeploy).
    let pushed: Value = reqwest::Client::new()
        .post(format!("{}/_emulator/repos/push", h.emulator.base_url))
        .json(&json!({"repo_url": test_support::manifests::REPO_URL, "ref": "main"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let c2 = pushed["sha"].as_str().unwrap().to_owned();
    support::merge_patch(
        &h.api,
        "staging",
        json!({"metadata": {"annotations": {"agentserver.dev/redeploy-requested-at": "2026-11-27T15:00:00Z"}}}),
    )
    .await;
    // Production follows with one redeploy (same ref, new commit).
    let second = support::wait_for(
        &h.api,
        "production",
        TIMEOUT,
        "production on the new commit",
        |o| {
            let s = o.status.as_ref()?;
            let serving = s.serving.as_ref()?;
            (serving.commit_sha.as_deref() == Some(c2.as_str())
                && serving.verified
                && support::is_ready_now(o))
            .then(|| s.clone())
        },
    )
    .await;
    assert_eq!(
        second.promoted_from.unwrap().commit_sha.as_deref(),
        Some(c2.as_str())
    );
    let revisions = h.revisions(&second.deployment_id.unwrap()).await;
    assert_eq!(revisions.len(), 2, "one revision per commit: {revisions:?}");
    let events = support::events_about(&h.client, &h.ns, "production").await;
    assert!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("Redeployed")
                && e.note
                    .as_deref()
                    .is_some_and(|n| n.contains("promotion of commit") && n.contains(&c2))),
        "a redeploy for the promotion: {:?}",
        events
            .iter()
            .map(|e| (&e.reason, &e.note))
            .collect::<Vec<_>>()
    );
}
