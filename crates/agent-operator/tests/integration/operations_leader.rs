//! Operations, leader election: operator binaries with `--leader-elect` on one
//! Lease of a real kube-apiserver (envtest). Exactly one holds the Lease and
//! reconciles; when it dies the other takes over; SIGTERM releases the Lease;
//! a leader whose Lease is taken from it stops.

use crate::{common, support};

use std::time::{Duration, Instant};

use agent_operator::api::AgentDeployment;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use serde_json::json;
use support::{
    AgentDeploymentManifest, Harness, OperatorOptions, OperatorProcess, apply_json, is_ready_now,
    metric, wait_for,
};

const TIMEOUT: Duration = Duration::from_secs(60);

/// The Lease of one test: named after its namespace, in the operator's
/// namespace, where the shipped leader-election Role grants the Lease
/// verbs (the operator's ServiceAccount may not touch Leases elsewhere).
struct Leases {
    api: Api<Lease>,
    name: String,
}

impl Leases {
    fn of(client: &kube::Client, ns: &str) -> Self {
        Self {
            api: Api::namespaced(client.clone(), support::OPERATOR_NAMESPACE),
            name: format!("lease-{ns}"),
        }
    }
}

fn deployment(name: &str) -> serde_json::Value {
    AgentDeploymentManifest::github(name, "main")
        .secret("LOG_LEVEL", "info")
        .build()
}

/// Starts a replica named `pod` (its `POD_NAME`, hence its lease identity).
fn replica(
    env: &common::SharedEnv,
    ns: &str,
    pod: &str,
    log_name: &str,
    lease_seconds: &str,
) -> OperatorProcess {
    let lease = format!("lease-{ns}");
    OperatorProcess::start_with(
        env.kubeconfig_path(),
        OperatorOptions {
            log_name,
            namespaces: vec![ns],
            extra: vec![
                "--leader-elect",
                "--lease-name",
                &lease,
                "--lease-namespace",
                support::OPERATOR_NAMESPACE,
                "--lease-duration-seconds",
                lease_seconds,
            ],
            env: vec![("POD_NAME", pod)],
            ..OperatorOptions::default()
        },
    )
}

async fn holder(leases: &Leases) -> Option<String> {
    leases
        .api
        .get_opt(&leases.name)
        .await
        .expect("reading the Lease")?
        .spec?
        .holder_identity
}

async fn renew_time(leases: &Leases) -> Option<String> {
    let spec = leases
        .api
        .get(&leases.name)
        .await
        .expect("reading the Lease")
        .spec?;
    Some(format!("{:?}", spec.renew_time?))
}

/// Polls the Lease until its holder satisfies `check`.
async fn wait_for_holder(
    leases: &Leases,
    what: &str,
    check: impl Fn(Option<&str>) -> bool,
) -> Option<String> {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let h = holder(leases).await;
        if check(h.as_deref()) {
            return h;
        }
        assert!(Instant::now() < deadline, "{what}; holder: {h:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn reconciles(text: &str) -> f64 {
    metric(text, "agent_operator_reconciles_total", &[]).unwrap_or(0.0)
}

#[tokio::test]
async fn one_replica_leads_and_the_other_takes_over_when_it_dies() {
    test_support::skip_without!(Envtest);
    let env = common::shared_env();
    // The namespace, the emulator and its plane; the replicas are started
    // below. The default budget is checked when `h` is dropped.
    let h = Harness::quick("ops-leader")
        .without_operator()
        .start()
        .await;
    let (client, ns) = (h.client.clone(), h.ns.clone());
    let leases = Leases::of(&client, &ns);
    let api: Api<AgentDeployment> = Api::namespaced(client.clone(), &ns);

    let mut a = Some(replica(env, &ns, "replica-a", "ops-leader-a", "6"));
    let mut b = Some(replica(env, &ns, "replica-b", "ops-leader-b", "6"));
    let leader = wait_for_holder(&leases, "one replica holds the Lease", |h| {
        matches!(h, Some("replica-a" | "replica-b"))
    })
    .await
    .unwrap();
    let (leader_proc, follower_proc, follower_name) = if leader == "replica-a" {
        (&mut a, &mut b, "replica-b")
    } else {
        (&mut b, &mut a, "replica-a")
    };
    let mut leader_proc = leader_proc.take().unwrap();
    let follower_proc = follower_proc.take().unwrap();

    // Both are ready: the leader once synced, the follower as a standby.
    for p in [&leader_proc, &follower_proc] {
        p.wait_for_status("/readyz", 200, TIMEOUT).await;
    }

    // The leader renews the Lease (twice here) and keeps leading.
    let mut renewals = 0;
    let deadline = Instant::now() + TIMEOUT;
    let mut last = renew_time(&leases).await;
    while renewals < 2 {
        assert!(Instant::now() < deadline, "the Lease was not renewed");
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = renew_time(&leases).await;
        if now != last {
            renewals += 1;
            last = now;
        }
        assert_eq!(
            holder(&leases).await.as_deref(),
            Some(leader.as_str()),
            "the holder does not change while the leader runs"
        );
    }
    assert_eq!(
        leader_proc.get("/livez").await.map(|(s, _)| s),
        Some(200),
        "the leader is still running after renewing"
    );
    // The age of the last renewal follows every renewal (every 2 s of a 6 s
    // Lease), not only the acquisition: sampled over 4 renewal periods it
    // stays under two periods, where the stale-lease alert would page at 10 s.
    let mut ages = Vec::new();
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let text = leader_proc.metrics().await;
        ages.push(
            metric(
                &text,
                "agent_operator_leader_lease_renewal_age_seconds",
                &[],
            )
            .expect("the renewal age metric"),
        );
    }
    eprintln!("renewal age of a healthy leader, sampled every second: {ages:?}");
    assert!(
        ages.iter().all(|a| *a < 4.0),
        "the renewal age resets on each renewal: {ages:?}"
    );

    apply_json(&api, "before-failover", deployment("before-failover")).await;
    wait_for(&api, "before-failover", TIMEOUT, "Ready=True", |o| {
        is_ready_now(o).then_some(())
    })
    .await;
    assert_eq!(
        holder(&leases).await.as_deref(),
        Some(leader.as_str()),
        "the leader kept the Lease"
    );
    let leader_metrics = leader_proc.metrics().await;
    let follower_metrics = follower_proc.metrics().await;
    assert!(reconciles(&leader_metrics) >= 1.0, "{leader_metrics}");
    assert_eq!(
        metric(&leader_metrics, "agent_operator_leader", &[]),
        Some(1.0)
    );
    assert_eq!(
        reconciles(&follower_metrics),
        0.0,
        "the standby does not reconcile:\n{follower_metrics}"
    );
    assert_eq!(
        metric(&follower_metrics, "agent_operator_leader", &[]),
        Some(0.0)
    );

    // The leader crashes (SIGKILL: the Lease is not released); the standby
    // takes the Lease once it expires and reconciles new objects.
    let killed = Instant::now();
    leader_proc.kill().await;
    wait_for_holder(&leases, "the standby takes over the Lease", |h| {
        h == Some(follower_name)
    })
    .await;
    eprintln!(
        "hand-over after SIGKILL of the leader (6 s Lease): {:.1} s",
        killed.elapsed().as_secs_f64()
    );
    apply_json(&api, "after-failover", deployment("after-failover")).await;
    wait_for(
        &api,
        "after-failover",
        TIMEOUT,
        "Ready=True after failover",
        |o| is_ready_now(o).then_some(()),
    )
    .await;
    follower_proc.wait_for_status("/readyz", 200, TIMEOUT).await;
    let text = follower_proc.metrics().await;
    assert!(
        reconciles(&text) >= 1.0,
        "the new leader reconciles:\n{text}"
    );
    assert_eq!(metric(&text, "agent_operator_leader", &[]), Some(1.0));
    assert_eq!(
        holder(&leases).await.as_deref(),
        Some(follower_name),
        "the new leader keeps the Lease"
    );
    support::leaks::assert_no_leaks(&client, &ns).await;
}

#[tokio::test]
async fn sigterm_releases_the_lease_and_exits_cleanly() {
    test_support::skip_without!(Envtest);
    let env = common::shared_env();
    // The namespace, the emulator and its plane; the replicas are started
    // below. The default budget is checked when `h` is dropped.
    let h = Harness::quick("ops-release")
        .without_operator()
        .start()
        .await;
    let (client, ns) = (h.client.clone(), h.ns.clone());
    let leases = Leases::of(&client, &ns);
    let api: Api<AgentDeployment> = Api::namespaced(client.clone(), &ns);

    // A long lease: a successor only gets it early if it was released.
    let mut first = replica(env, &ns, "first", "ops-release-first", "300");
    wait_for_holder(&leases, "the first replica leads", |h| h == Some("first")).await;
    first.wait_for_status("/readyz", 200, TIMEOUT).await;
    // A standby waiting meanwhile notices the release and leads at once.
    let standby = replica(env, &ns, "standby", "ops-release-standby", "300");
    standby.wait_for_status("/readyz", 200, TIMEOUT).await;
    apply_json(&api, "served", deployment("served")).await;
    wait_for(&api, "served", TIMEOUT, "Ready=True", |o| {
        is_ready_now(o).then_some(())
    })
    .await;

    let sent = Instant::now();
    let status = first.terminate(TIMEOUT).await;
    assert!(status.success(), "graceful exit after SIGTERM: {status:?}");
    wait_for_holder(&leases, "the standby takes the released Lease", |h| {
        h == Some("standby")
    })
    .await;
    let handover = sent.elapsed();
    eprintln!(
        "hand-over after SIGTERM of the leader (300 s Lease): {:.1} s",
        handover.as_secs_f64()
    );
    assert!(
        handover < Duration::from_secs(5),
        "the standby led {handover:?} after the SIGTERM"
    );
    drop(standby);
    // Released again by the standby's drop? It was killed: clear the
    // holder as a clean shutdown would, for the next replica.
    let lease_api: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), support::OPERATOR_NAMESPACE);
    lease_api
        .patch(
            &format!("lease-{ns}"),
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"spec": {"holderIdentity": null}})),
        )
        .await
        .expect("clearing the holder");

    let second = replica(env, &ns, "second", "ops-release-second", "300");
    wait_for_holder(&leases, "the next replica takes the released Lease", |h| {
        h == Some("second")
    })
    .await;
    apply_json(&api, "served-next", deployment("served-next")).await;
    wait_for(
        &api,
        "served-next",
        TIMEOUT,
        "Ready=True under the next leader",
        |o| is_ready_now(o).then_some(()),
    )
    .await;
    assert!(reconciles(&second.metrics().await) >= 1.0);
    support::leaks::assert_no_leaks(&client, &ns).await;
}

#[tokio::test]
async fn a_leader_whose_lease_is_taken_stops_reconciling() {
    test_support::skip_without!(Envtest);
    let env = common::shared_env();
    let client = env.client().await;
    let ns = common::test_namespace(&client, "ops-usurped").await;
    let leases = Leases::of(&client, &ns);

    let mut leader = replica(env, &ns, "leader", "ops-usurped", "300");
    wait_for_holder(&leases, "the replica leads", |h| h == Some("leader")).await;
    leader.wait_for_status("/readyz", 200, TIMEOUT).await;

    // Another party writes itself into the Lease (as after a network
    // partition): the old leader must not go on reconciling.
    leases
        .api
        .patch(
            &leases.name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"holderIdentity": "intruder"}})),
        )
        .await
        .expect("patching the Lease");
    let status = leader.wait_exit(TIMEOUT).await;
    assert!(
        !status.success(),
        "the replica exits with an error once it lost the Lease: {status:?}"
    );
    assert_eq!(holder(&leases).await.as_deref(), Some("intruder"));
}

/// A standby is ready only while it can read the Lease: its Lease RBAC
/// removed (as an uninstall does), `/readyz` answers 503 within
/// `STANDBY_READ_WINDOW` (10 s) plus a read; granted again, 200 again.
#[tokio::test]
async fn a_standby_that_cannot_read_the_lease_is_not_ready() {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    test_support::skip_without!(Envtest);
    let env = common::shared_env();
    let client = env.client().await;
    let ns = common::test_namespace(&client, "ops-unreadable").await;
    let sa = "lease-reader";
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns);
    apply_json(
        &accounts,
        sa,
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa}}),
    )
    .await;
    let roles: Api<Role> = Api::namespaced(client.clone(), &ns);
    apply_json(
        &roles,
        "leases",
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "leases"},
            "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                       "verbs": ["get", "list", "watch", "create", "update", "patch"]}]
        }),
    )
    .await;
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), &ns);
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "leases"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "leases"},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]
    });
    apply_json(&bindings, "leases", binding.clone()).await;
    // Held by another replica for 5 minutes: the standby only waits.
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
        k8s_openapi::jiff::Timestamp::now(),
    );
    let mut held = serde_json::to_value(Lease {
        spec: Some(k8s_openapi::api::coordination::v1::LeaseSpec {
            holder_identity: Some("the-leader".to_owned()),
            lease_duration_seconds: Some(300),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            ..Default::default()
        }),
        ..Default::default()
    })
    .unwrap();
    held["apiVersion"] = json!("coordination.k8s.io/v1");
    held["kind"] = json!("Lease");
    held["metadata"] = json!({"name": "held"});
    apply_json(&leases, "held", held).await;
    let standby = OperatorProcess::start_with(
        env.kubeconfig_path(),
        OperatorOptions {
            log_name: "ops-unreadable",
            namespaces: vec![&ns],
            extra: vec![
                "--leader-elect",
                "--lease-name",
                "held",
                "--lease-namespace",
                &ns,
            ],
            env: vec![("POD_NAME", "standby")],
            service_account: Some((&ns, sa)),
            ..OperatorOptions::default()
        },
    );
    let body = standby.wait_for_status("/readyz", 200, TIMEOUT).await;
    assert_eq!(body, "standby");

    bindings
        .delete("leases", &Default::default())
        .await
        .expect("deleting the RoleBinding");
    let removed = Instant::now();
    let body = standby.wait_for_status("/readyz", 503, TIMEOUT).await;
    let unready_after = removed.elapsed();
    eprintln!(
        "standby unready {:.1} s after its Lease RBAC was removed",
        unready_after.as_secs_f64()
    );
    assert_eq!(body, "lease unreadable");
    assert!(
        unready_after < Duration::from_secs(20),
        "unready within the read window and a read or two: {unready_after:?}"
    );
    assert_eq!(
        standby.get("/livez").await.map(|(s, _)| s),
        Some(200),
        "still alive: only readiness says it cannot take over"
    );

    apply_json(&bindings, "leases", binding).await;
    let body = standby.wait_for_status("/readyz", 200, TIMEOUT).await;
    assert_eq!(body, "standby");
    let text = standby.metrics().await;
    assert_eq!(metric(&text, "agent_operator_leader", &[]), Some(0.0));
    assert_eq!(
        leases
            .get("held")
            .await
            .unwrap()
            .spec
            .unwrap()
            .holder_identity
            .as_deref(),
        Some("the-leader"),
        "the standby never took the held Lease"
    );
}
