//! Sharding (`--shard`, docs/INSTALL.md "Sharding"): two operator
//! processes, leader-elected as the shipped shape, split the objects of one
//! namespace by the label `sharding.fluxcd.io/key`, beside an unsharded one
//! that takes the objects without it. Each workspace (its
//! AgentControlPlane) belongs to one shard, so its request budget is kept by
//! one process.

use std::time::{Duration, Instant};

use agent_operator::api::{AgentControlPlane, AgentDeployment};
use agent_operator::shard::SHARD_LABEL;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

use crate::common;
use crate::support::{
    self, Budget, Harness, OperatorOptions, OperatorProcess, WORKSPACE, github_deployment,
    is_ready_now, metric,
};

/// The second workspace of the emulator and its key.
const WORKSPACE_B: &str = "5e0c2b7a-9d41-4c3e-8f6a-1b2c3d4e5f60";
const KEY_B: &str = "shard-b-workspace-key";
/// Each workspace's limit at the emulator (requests per second), also
/// declared on its AgentControlPlane.
const LIMIT: f64 = 4.0;
/// AgentDeployments per shard.
const PER_SHARD: usize = 10;

/// Starts the operator of shard `key` (`None`: the unsharded one, `main`)
/// on `ns`: leader-elected on the Lease `<lease>-<key>` (`<lease>`) as the
/// pod `shard-<key>-0`, logging to `<log>-operator.log`.
fn shard_operator(
    kubeconfig: &std::path::Path,
    log: &str,
    ns: &str,
    lease: &str,
    key: Option<&str>,
) -> OperatorProcess {
    let pod = format!("shard-{}-0", key.unwrap_or("main"));
    let mut extra = vec![
        support::FAST_POLLING[0],
        support::FAST_POLLING[1],
        support::FAST_POLLING[2],
        support::FAST_POLLING[3],
        "--leader-elect",
        "--lease-name",
        lease,
        "--lease-namespace",
        common::OPERATOR_NAMESPACE,
    ];
    if let Some(key) = key {
        extra.extend(["--shard", key]);
    }
    OperatorProcess::start_with(
        kubeconfig,
        OperatorOptions {
            log_name: log,
            namespaces: vec![ns],
            extra,
            env: vec![("POD_NAME", pod.as_str())],
            ..OperatorOptions::default()
        },
    )
}

/// Two shards converge a fleet of 2 × 10 AgentDeployments in one namespace,
/// each on its own workspace: every one Ready; each shard's stores hold its
/// own objects only and its log names no object of the other; each shard
/// holds a Lease of its own; neither workspace saw a 429 (its limit is
/// spent by one process); an AgentDeployment whose control plane is in the
/// other shard is blocked and sends nothing. The unsharded operator beside
/// them takes only the unlabelled object (and refuses its plane, shard a's)
/// on a Lease of the base name.
#[tokio::test]
async fn two_shards_split_a_fleet_without_overlap() {
    test_support::skip_without!(Envtest);
    let test = "sharding";
    let key_b = format!("{KEY_B}={WORKSPACE_B}");
    let limit = LIMIT.to_string();
    let h = Harness::quick(test)
        .without_operator()
        .budget(Budget::fleet())
        .emulator_flags(&[
            "--rate-limit",
            &limit,
            "--rate-limit-burst",
            "6",
            "--api-key",
            &key_b,
        ])
        .start()
        .await;
    let ns = h.ns.as_str();
    let planes: Api<AgentControlPlane> = Api::namespaced(h.client.clone(), ns);
    // The harness's plane `default` (workspace A) joins shard a; `plane-b`
    // (workspace B, its own key) is shard b's.
    planes
        .patch(
            "default",
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {"labels": {SHARD_LABEL: "a"}},
                "spec": {"requestsPerSecond": LIMIT}
            })),
        )
        .await
        .expect("labelling the plane default");
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(h.client.clone(), ns);
    support::apply_json(
        &secrets,
        "cp-api-key-b",
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "cp-api-key-b"},
            "stringData": {"api-key": KEY_B}
        }),
    )
    .await;
    support::apply_json(
        &planes,
        "plane-b",
        json!({
            "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentControlPlane",
            "metadata": {"name": "plane-b", "labels": {SHARD_LABEL: "b"}},
            "spec": {
                "url": h.emulator.base_url,
                "workspaceId": WORKSPACE_B,
                "apiKeySecretRef": {"name": "cp-api-key-b", "key": "api-key"},
                "requestsPerSecond": LIMIT
            }
        }),
    )
    .await;

    let lease = format!("shards-{ns}");
    let kubeconfig = h.kubeconfig.clone();
    let log_a = format!("{test}-a");
    let log_b = format!("{test}-b");
    let log_main = format!("{test}-main");
    let shard_a = shard_operator(&kubeconfig, &log_a, ns, &lease, Some("a"));
    let shard_b = shard_operator(&kubeconfig, &log_b, ns, &lease, Some("b"));
    // The unsharded operator beside them: it sees only unlabelled objects.
    let main = shard_operator(&kubeconfig, &log_main, ns, &lease, None);

    let started = Instant::now();
    for i in 0..PER_SHARD {
        for (key, plane) in [("a", "default"), ("b", "plane-b")] {
            let name = format!("fleet-{key}-{i:02}");
            let mut manifest = github_deployment(&name, "main");
            manifest["metadata"]["labels"] = json!({SHARD_LABEL: key});
            manifest["spec"]["controlPlaneRef"] = json!({"name": plane});
            support::apply_json(&h.api, &name, manifest).await;
        }
    }
    // Shard a's object on shard b's plane: refused by shard a, unseen by b.
    let mut cross = github_deployment("cross-a", "main");
    cross["metadata"]["labels"] = json!({SHARD_LABEL: "a"});
    cross["spec"]["controlPlaneRef"] = json!({"name": "plane-b"});
    support::apply_json(&h.api, "cross-a", cross).await;
    // An unlabelled object on shard a's plane: the unsharded operator's,
    // refused by it for the same reason.
    let mut plain = github_deployment("plain-00", "main");
    plain["spec"]["controlPlaneRef"] = json!({"name": "default"});
    support::apply_json(&h.api, "plain-00", plain).await;

    support::eventually(
        Duration::from_secs(240),
        &format!("{} AgentDeployments Ready", 2 * PER_SHARD),
        || async {
            let list = h.api.list(&ListParams::default()).await.ok()?;
            let ready = list
                .items
                .iter()
                .filter(|o| {
                    o.metadata
                        .name
                        .as_deref()
                        .is_some_and(|n| n.starts_with("fleet-"))
                })
                .filter(|o| is_ready_now(o))
                .count();
            (ready == 2 * PER_SHARD).then_some(())
        },
    )
    .await;
    let took = started.elapsed();
    let cross = support::eventually(Duration::from_secs(60), "cross-a blocked", || async {
        let obj: AgentDeployment = h.api.get("cross-a").await.ok()?;
        let (status, reason, message) = support::ready(&obj)?;
        (status == "False" && message.contains("shard")).then_some((reason, message))
    })
    .await;
    assert_eq!(cross.0, "ControlPlaneNotReady", "{cross:?}");
    assert!(
        cross.1.contains("plane-b") && cross.1.contains("shard \"b\""),
        "the reason names the plane and its shard: {cross:?}"
    );
    let plain = support::eventually(Duration::from_secs(60), "plain-00 blocked", || async {
        let obj: AgentDeployment = h.api.get("plain-00").await.ok()?;
        let (status, _, message) = support::ready(&obj)?;
        (status == "False" && message.contains("shard")).then_some(message)
    })
    .await;
    assert!(
        plain.contains("shard \"a\"") && plain.contains("the unsharded operator"),
        "{plain}"
    );

    // Each shard's store holds its own objects only: 10 Ready (and the
    // blocked cross-a for shard a).
    let resources = |text: &str, ready: &str| {
        metric(
            text,
            "agent_operator_resources",
            &[("kind", "AgentDeployment"), ("ready", ready)],
        )
        .unwrap_or(0.0)
    };
    let (text_a, text_b) = (shard_a.metrics().await, shard_b.metrics().await);
    assert_eq!(
        (resources(&text_a, "True"), resources(&text_a, "False")),
        (PER_SHARD as f64, 1.0),
        "shard a's store"
    );
    assert_eq!(
        (resources(&text_b, "True"), resources(&text_b, "False")),
        (PER_SHARD as f64, 0.0),
        "shard b's store"
    );
    // No object reconciled by both: each log names its own fleet, never the
    // other's.
    let read = |name: &str| {
        std::fs::read_to_string(test_support::log_path(name, "operator"))
            .unwrap_or_else(|e| panic!("reading the log of {name}: {e}"))
    };
    let (a_log, b_log, main_log) = (read(&log_a), read(&log_b), read(&log_main));
    assert!(
        a_log.contains("fleet-a-") && b_log.contains("fleet-b-") && main_log.contains("plain-00"),
        "each operator logged its own passes"
    );
    assert!(
        !a_log.contains("fleet-b-") && !a_log.contains("plain-00"),
        "shard a touched others' objects"
    );
    assert!(
        !b_log.contains("fleet-a-") && !b_log.contains("cross-a") && !b_log.contains("plain-00"),
        "shard b touched others' objects"
    );
    assert!(
        !main_log.contains("fleet-") && !main_log.contains("cross-a"),
        "the unsharded operator touched labelled objects"
    );
    // One leader per shard, each on its own Lease (the unsharded one on
    // the base name).
    let leases: Api<Lease> = Api::namespaced(h.client.clone(), common::OPERATOR_NAMESPACE);
    for (name, holder) in [
        (format!("{lease}-a"), "shard-a-0"),
        (format!("{lease}-b"), "shard-b-0"),
        (lease.clone(), "shard-main-0"),
    ] {
        let held = leases
            .get(&name)
            .await
            .unwrap_or_else(|e| panic!("the Lease {name}: {e}"));
        assert_eq!(
            held.spec.and_then(|s| s.holder_identity).as_deref(),
            Some(holder),
            "the Lease {name}"
        );
    }

    // Each workspace's limit was kept: its one shard spent it.
    let log = h.emulator.request_log().await;
    let count = |workspace: &str, status: Option<&str>| {
        log.entries
            .iter()
            .filter(|e| e.workspace.as_deref() == Some(workspace))
            .filter(|e| status.is_none_or(|s| e.status == s))
            .count()
    };
    let (a, a_429) = (count(WORKSPACE, None), count(WORKSPACE, Some("429")));
    let (b, b_429) = (count(WORKSPACE_B, None), count(WORKSPACE_B, Some("429")));
    println!(
        "2 shards × {PER_SHARD} Ready in {:.1} s; workspace A: {a} requests, {a_429} × 429; \
         workspace B: {b} requests, {b_429} × 429 (limit {LIMIT}/s each)",
        took.as_secs_f64()
    );
    assert!(
        a >= 2 * PER_SHARD && b >= 2 * PER_SHARD,
        "every AgentDeployment was created and read: A {a}, B {b}"
    );
    assert_eq!(
        (a_429, b_429),
        (0, 0),
        "each workspace stayed within its limit"
    );
    assert_eq!(
        log.entries
            .iter()
            .filter(|e| e.route == "POST /v2/deployments")
            .count(),
        2 * PER_SHARD,
        "one create per AgentDeployment, none for cross-a nor plain-00"
    );
    drop((shard_a, shard_b, main));
}
