//! ClusterAgentControlPlane (docs/PLATFORM-PLANES.md): a control plane whose
//! key the platform team holds in the operator's namespace, used by the
//! namespaces it allows. Every test runs the operator cluster-wide and
//! leader-elected as the shipped ServiceAccount (`HarnessBuilder::cluster_wide`)
//! on an API server of its own, and counts the emulator's requests.

use crate::{common, support};

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use agent_operator::api::conditions::READY;
use agent_operator::api::{AgentDeployment, ClusterAgentControlPlane};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use support::{
    API_KEY, AgentDeploymentManifest, Harness, HarnessBuilder, OPERATOR_NAMESPACE, WORKSPACE,
    condition, route,
};

const TIMEOUT: Duration = Duration::from_secs(60);
/// The label of docs/PLATFORM-PLANES.md's selector.
const LABEL: &str = "agents.example.com/langsmith";

/// The shape of these tests on `env`: cluster-wide, leader-elected, the
/// shipped RBAC, quick revisions.
fn platform<'e>(test: &str, env: &'e test_support::envtest::TestEnv) -> HarnessBuilder<'e> {
    Harness::quick(test)
        .on(env)
        .cluster_wide()
        .operator_flags(&support::FAST_POLLING)
}

/// docs/PLATFORM-PLANES.md with the harness's emulator, workspace and key in
/// place of the demo's.
fn how_to(h: &Harness) -> String {
    std::fs::read_to_string(test_support::repo_root().join("docs/PLATFORM-PLANES.md"))
        .expect("reading docs/PLATFORM-PLANES.md")
        .replace("http://127.0.0.1:8585", &h.emulator.base_url)
        .replace("00000000-0000-4000-8000-000000000001", WORKSPACE)
        .replace("demo-api-key", API_KEY)
}

/// The fenced blocks of `text` in language `lang`, in order, unindented.
fn blocks(text: &str, lang: &str) -> Vec<String> {
    let open = format!("```{lang}");
    let mut out = Vec::new();
    let mut block: Option<Vec<&str>> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        match &mut block {
            None if trimmed == open => block = Some(Vec::new()),
            Some(lines) if trimmed.starts_with("```") => {
                out.push(lines.join("\n") + "\n");
                block = None;
            }
            Some(lines) => lines.push(line),
            None => {}
        }
    }
    out
}

/// `kubectl <args>` with `kubeconfig`, `stdin` fed; (success, stdout and
/// stderr).
fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> (bool, String) {
    use std::io::Write;
    let assets = test_support::envtest::assets_dir().expect("the envtest binaries");
    let mut child = Command::new(assets.join("kubectl"))
        .env_remove("KUBECONFIG")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("running kubectl");
    let mut input = child.stdin.take().expect("stdin");
    input
        .write_all(stdin.unwrap_or_default().as_bytes())
        .expect("writing kubectl's stdin");
    drop(input);
    let out = child.wait_with_output().expect("kubectl's output");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// `kubectl apply -f -` of `manifest` with `kubeconfig`; panics on failure.
fn apply(kubeconfig: &Path, manifest: &str) {
    let (ok, out) = kubectl(kubeconfig, &["apply", "-f", "-"], Some(manifest));
    assert!(ok, "kubectl apply failed: {out}\n{manifest}");
}

/// Runs the `sh` block `script` with bash, the envtest kubectl first on
/// PATH, `env`'s admin kubeconfig and `vars`; panics on failure.
fn run_script(env: &test_support::envtest::TestEnv, script: &str, vars: &[(&str, &str)]) {
    let assets = test_support::envtest::assets_dir().expect("the envtest binaries");
    let mut path = vec![assets];
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", script])
        .env("PATH", std::env::join_paths(path).unwrap())
        .env("KUBECONFIG", env.kubeconfig_path())
        .envs(vars.iter().copied())
        .output()
        .expect("running bash");
    assert!(
        out.status.success(),
        "{script} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Applies the platform team's first two blocks of the how-to (the key's
/// Secret in the operator's namespace, the ClusterAgentControlPlane
/// `langsmith`) and waits until the plane is Ready.
async fn install_how_to_plane(h: &Harness, env: &test_support::envtest::TestEnv) -> String {
    let doc = how_to(h);
    let yaml = blocks(&doc, "yaml");
    apply(env.kubeconfig_path(), &yaml[0]);
    apply(env.kubeconfig_path(), &yaml[1]);
    wait_plane_ready(&h.client, "langsmith").await;
    doc
}

/// Waits until the ClusterAgentControlPlane `name` is `Ready=True`.
async fn wait_plane_ready(client: &kube::Client, name: &str) -> ClusterAgentControlPlane {
    let planes: Api<ClusterAgentControlPlane> = Api::all(client.clone());
    support::eventually(TIMEOUT, "the ClusterAgentControlPlane Ready", || async {
        let plane = planes.get_opt(name).await.ok()??;
        let ready =
            agent_operator::api::conditions::find(&plane.status.as_ref()?.conditions, READY)?
                .clone();
        (ready.status == "True").then_some(plane)
    })
    .await
}

/// A deployment `name` on the ClusterAgentControlPlane `plane`, with one
/// literal secret.
fn on_cluster_plane(name: &str, plane: &str) -> Value {
    AgentDeploymentManifest::github(name, "main")
        .spec(
            "controlPlaneRef",
            json!({"kind": "ClusterAgentControlPlane", "name": plane}),
        )
        .secret("LOG_LEVEL", "info")
        .build()
}

/// Labels namespace `ns` `key=value` (merge patch).
async fn label(client: &kube::Client, ns: &str, key: &str, value: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .patch(
            ns,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {key: value}}})),
        )
        .await
        .unwrap_or_else(|e| panic!("labelling {ns}: {e}"));
}

/// The message of the Ready condition of `obj`.
fn ready_message(obj: &AgentDeployment) -> String {
    condition(obj, READY).map(|c| c.message).unwrap_or_default()
}

/// The how-to as written: the platform team's Secret, cluster plane and
/// team RBAC applied by an admin; the team's AgentDeployment applied with
/// the team ServiceAccount's token, which is refused the key; a namespace
/// not allowed waits with `ControlPlaneNotAllowed` and sends nothing until
/// the doc's label lets it in; the cluster plane waits for its users when
/// deleted (in use) and goes once they are.
#[tokio::test]
async fn the_how_to_runs_as_written_and_the_team_never_reads_the_key() {
    test_support::skip_without!(Envtest);
    let env = common::own_env(&[]).await;
    let h = platform("cacp-howto", &env).start().await;
    let admin = env.kubeconfig_path();
    for ns in ["team-a", "team-b"] {
        assert!(kubectl(admin, &["create", "namespace", ns], None).0);
    }
    assert!(
        kubectl(
            admin,
            &["-n", "team-a", "create", "serviceaccount", "deployer"],
            None
        )
        .0
    );
    let doc = install_how_to_plane(&h, &env).await;
    let yaml = blocks(&doc, "yaml");
    let sh = blocks(&doc, "sh");
    assert_eq!((yaml.len(), sh.len()), (4, 2), "the how-to's blocks");
    apply(admin, &yaml[2]);

    // The team, with its ServiceAccount's token, deploys through the plane.
    let token = crate::security_rbac::service_account_token(&h.client, "team-a", "deployer").await;
    let team = support::token_kubeconfig(admin, &token);
    apply(&team, &yaml[3]);
    let team_a: Api<AgentDeployment> = Api::namespaced(h.client.clone(), "team-a");
    support::wait_for(&team_a, "support-agent", TIMEOUT, "Ready", |o| {
        support::is_ready_now(o).then_some(())
    })
    .await;
    // It sees the plane, and reads neither the key's Secret nor any other
    // Secret of the operator's namespace.
    let (ok, out) = kubectl(&team, &["get", "cacp", "langsmith", "-o", "json"], None);
    assert!(ok && !out.contains(API_KEY), "{out}");
    for args in [
        &[
            "get",
            "secret",
            "langsmith-api-key",
            "-n",
            OPERATOR_NAMESPACE,
        ][..],
        &["get", "secrets", "-o", "name", "-n", OPERATOR_NAMESPACE],
    ] {
        let (ok, out) = kubectl(&team, args, None);
        assert!(!ok && out.contains("Forbidden"), "{args:?}: {out}");
    }
    let (_, can) = kubectl(
        &team,
        &["auth", "can-i", "get", "secrets", "-n", OPERATOR_NAMESPACE],
        None,
    );
    assert_eq!(can.trim(), "no");
    // `kubectl get agents` lists the cluster plane beside the namespace's
    // objects.
    let (ok, out) = kubectl(
        admin,
        &["get", "agents", "-n", "team-a", "-o", "name"],
        None,
    );
    assert!(
        ok && out.contains("clusteragentcontrolplane.agentserver.dev/langsmith")
            && out.contains("agentdeployment.agentserver.dev/support-agent"),
        "{out}"
    );

    // A namespace the plane does not allow: refused before any request.
    let sent = h.emulator.request_log().await.entries.len();
    let refused = yaml[3]
        .replace("namespace: team-a", "namespace: team-b")
        .replace("name: support-agent", "name: support-agent-b");
    apply(admin, &refused);
    let team_b: Api<AgentDeployment> = Api::namespaced(h.client.clone(), "team-b");
    let obj = support::wait_for(&team_b, "support-agent-b", TIMEOUT, "NotAllowed", |o| {
        support::is_stalled_with(o, "ControlPlaneNotAllowed").then(|| o.clone())
    })
    .await;
    let message = ready_message(&obj);
    for part in [
        "team-b",
        "ClusterAgentControlPlane langsmith",
        "spec.namespaces",
    ] {
        assert!(message.contains(part), "{part:?} in {message}");
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let log = h.emulator.request_log().await;
    assert_eq!(
        log.entries.len(),
        sent,
        "nothing sent for the refused namespace: {:?}",
        &log.entries[sent..]
    );
    health_of_the_plane_and_the_refusal(&h.client, &obj).await;

    // The doc's label lets team-b in: the namespace's change wakes it
    // (sooner than the 30 s blocked interval).
    let started = std::time::Instant::now();
    run_script(&env, &sh[0], &[]);
    support::wait_for(&team_b, "support-agent-b", TIMEOUT, "Ready", |o| {
        support::is_ready_now(o).then_some(())
    })
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the label took {:?} to take effect",
        started.elapsed()
    );

    deleting_waits_for_the_users(
        &h,
        &[(&team_a, "support-agent"), (&team_b, "support-agent-b")],
    )
    .await;
}

/// The kstatus and Argo CD verdicts of the Ready cluster plane (Current,
/// Healthy) and of an object refused by it (Failed, Degraded).
async fn health_of_the_plane_and_the_refusal(client: &kube::Client, refused: &AgentDeployment) {
    let planes: Api<ClusterAgentControlPlane> = Api::all(client.clone());
    let plane = serde_json::to_value(planes.get("langsmith").await.unwrap()).unwrap();
    let mut refused = serde_json::to_value(refused).unwrap();
    refused["apiVersion"] = json!("agentserver.dev/v1alpha1");
    refused["kind"] = json!("AgentDeployment");
    let mut plane = plane;
    plane["apiVersion"] = json!("agentserver.dev/v1alpha1");
    plane["kind"] = json!("ClusterAgentControlPlane");
    let health = crate::gitops_health::health_bin();
    let verdicts =
        crate::gitops_health::verdicts_of(&health, "cacp-health.json", &[&plane, &refused]);
    let pair = |v: &Value| (v["kstatus"].clone(), v["argocd"].clone());
    assert_eq!(pair(&verdicts[0]), (json!("Current"), json!("Healthy")));
    assert_eq!(pair(&verdicts[1]), (json!("Failed"), json!("Degraded")));
}

/// Deletes the ClusterAgentControlPlane `langsmith` while `users` name it:
/// it stays (in use, naming them) until they are deleted, their remote
/// deployments with them; then it goes.
async fn deleting_waits_for_the_users(h: &Harness, users: &[(&Api<AgentDeployment>, &str)]) {
    let planes: Api<ClusterAgentControlPlane> = Api::all(h.client.clone());
    planes
        .delete("langsmith", &DeleteParams::default())
        .await
        .unwrap();
    let in_use = support::eventually(TIMEOUT, "the plane InUse", || async {
        let plane = planes.get_opt("langsmith").await.ok()??;
        let ready =
            agent_operator::api::conditions::find(&plane.status.as_ref()?.conditions, READY)?
                .clone();
        (ready.reason == "InUse").then_some(ready.message)
    })
    .await;
    for (_, name) in users {
        assert!(in_use.contains(name), "{name} in {in_use}");
    }
    for (api, name) in users {
        api.delete(name, &DeleteParams::default()).await.unwrap();
    }
    for (api, name) in users {
        support::wait_until_gone(api, name, TIMEOUT).await;
    }
    support::eventually(TIMEOUT, "the plane gone", || async {
        planes
            .get_opt("langsmith")
            .await
            .ok()
            .and_then(|p| p.is_none().then_some(()))
    })
    .await;
    assert!(h.remote_deployments().await.is_empty(), "remotes deleted");
    let counts = h.emulator.requests().await;
    assert_eq!(
        counts.count(route::DELETE),
        users.len() as u64,
        "{counts:?}"
    );
}

/// A namespace deleted while the operator is down, every Secret in it gone
/// first: the restarted operator deletes every remote deployment of the
/// namespace through the cluster plane (its key is in the operator's
/// namespace) and releases every object, nothing left Terminating; the
/// other team's deployments are untouched.
#[tokio::test]
async fn a_namespace_deleted_while_the_operator_is_down_deletes_its_remotes() {
    test_support::skip_without!(Envtest);
    let env = common::own_env(&[]).await;
    let mut h = platform("cacp-nsgone", &env).start().await;
    let gone = h.namespace("cacp-nsgone-a").await;
    let kept = h.namespace("cacp-nsgone-b").await;
    for ns in [&gone, &kept] {
        label(&h.client, ns, LABEL, "true").await;
    }
    install_how_to_plane(&h, &env).await;
    let mut ids = Vec::new();
    for ns in [&gone, &kept] {
        let api: Api<AgentDeployment> = Api::namespaced(h.client.clone(), ns);
        let secrets: Api<Secret> = Api::namespaced(h.client.clone(), ns);
        let env_secret = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "agent-env"}, "stringData": {"OPENAI_API_KEY": "sk-cacp-nsgone"}});
        secrets
            .patch(
                "agent-env",
                &PatchParams::apply("tests").force(),
                &Patch::Apply(&env_secret),
            )
            .await
            .unwrap();
        for i in 0..3 {
            let name = format!("agent-{i}");
            let mut manifest = on_cluster_plane(&name, "langsmith");
            manifest["spec"]["name"] = json!(format!("{ns}-{i}"));
            manifest["spec"]["secrets"]
                .as_array_mut()
                .unwrap()
                .push(json!({"name": "OPENAI_API_KEY",
                    "valueFrom": {"secretKeyRef": {"name": "agent-env", "key": "OPENAI_API_KEY"}}}));
            support::apply_json(&api, &name, manifest).await;
        }
        for i in 0..3 {
            let obj = support::wait_for(&api, &format!("agent-{i}"), TIMEOUT, "Ready", |o| {
                support::is_ready_now(o).then(|| o.clone())
            })
            .await;
            ids.push((ns.clone(), obj.status.unwrap().deployment_id.unwrap()));
        }
    }

    // The operator is down; the namespace is deleted: the namespace
    // controller (absent from this API server, done here as it does)
    // deletes the Secrets (gone) and the AgentDeployments (kept by their
    // finalizers).
    h.operator.take().expect("an operator").kill().await;
    let namespaces: Api<Namespace> = Api::all(h.client.clone());
    namespaces
        .delete(&gone, &DeleteParams::default())
        .await
        .unwrap();
    let lp = ListParams::default();
    Api::<Secret>::namespaced(h.client.clone(), &gone)
        .delete_collection(&DeleteParams::default(), &lp)
        .await
        .unwrap();
    let api: Api<AgentDeployment> = Api::namespaced(h.client.clone(), &gone);
    api.delete_collection(&DeleteParams::default(), &lp)
        .await
        .unwrap();
    h.operator = Some(h.start_operator(&support::FAST_POLLING));

    support::eventually(TIMEOUT, "every AgentDeployment released", || async {
        api.list(&lp).await.ok()?.items.is_empty().then_some(())
    })
    .await;
    let remote: Vec<String> = h
        .remote_deployments()
        .await
        .into_iter()
        .map(|d| d.id)
        .collect();
    for (ns, id) in &ids {
        assert_eq!(
            remote.contains(id),
            ns == &kept,
            "{ns}: deployment {id} deleted only with its namespace"
        );
    }
    let counts = h.emulator.requests().await;
    assert_eq!(counts.count(route::DELETE), 3, "{counts:?}");
    assert_eq!(counts.count(route::PATCH), 0, "{counts:?}");
    let kept_api: Api<AgentDeployment> = Api::namespaced(h.client.clone(), &kept);
    for i in 0..3 {
        let obj = kept_api.get(&format!("agent-{i}")).await.unwrap();
        assert!(support::is_ready_now(&obj), "the other team stays Ready");
    }
}

/// The key rotated once, as the how-to says (the Secret replaced, then the
/// old key revoked on the service): every team's deployments use the new
/// key from their next request (no 401 after the revocation, each read
/// again with 200), with no PATCH or redeploy for it.
#[tokio::test]
async fn a_key_rotated_once_reaches_every_team_with_no_patch() {
    test_support::skip_without!(Envtest);
    const NEW_KEY: &str = "rotated-test-api-key";
    let env = common::own_env(&[]).await;
    let new_key = format!("{NEW_KEY}={WORKSPACE}");
    let h = platform("cacp-rotate", &env)
        .emulator_flags(&["--api-key", &new_key])
        .resync_seconds(4.0)
        .start()
        .await;
    let mut teams = Vec::new();
    for t in 0..3 {
        let ns = h.namespace(&format!("cacp-rotate-{t}")).await;
        label(&h.client, &ns, LABEL, "true").await;
        teams.push(ns);
    }
    let doc = install_how_to_plane(&h, &env).await;
    let mut ids = Vec::new();
    for ns in &teams {
        let api: Api<AgentDeployment> = Api::namespaced(h.client.clone(), ns);
        for i in 0..2 {
            let name = format!("agent-{i}");
            let mut manifest = on_cluster_plane(&name, "langsmith");
            manifest["spec"]["name"] = json!(format!("{ns}-{i}"));
            support::apply_json(&api, &name, manifest).await;
        }
        for i in 0..2 {
            let obj = support::wait_for(&api, &format!("agent-{i}"), TIMEOUT, "Ready", |o| {
                support::is_ready_now(o).then(|| o.clone())
            })
            .await;
            ids.push(obj.status.unwrap().deployment_id.unwrap());
        }
    }
    // The harness's own AgentControlPlane holds the old key too: it goes
    // first, so that every request after the revocation is the cluster
    // plane's.
    let own: Api<agent_operator::api::AgentControlPlane> = Api::namespaced(h.client.clone(), &h.ns);
    own.delete("default", &DeleteParams::default())
        .await
        .unwrap();
    support::eventually(TIMEOUT, "the harness's plane gone", || async {
        own.get_opt("default")
            .await
            .ok()
            .and_then(|p| p.is_none().then_some(()))
    })
    .await;
    let before = h.emulator.requests().await;

    // Step 5 of the how-to: replace the Secret; once the operator has
    // checked the new key (its probe, a list), revoke the old one.
    let rotated_at = h.emulator.request_log().await.entries.len();
    run_script(&env, &blocks(&doc, "sh")[1], &[("NEW_KEY", NEW_KEY)]);
    support::eventually(TIMEOUT, "the plane's check of the new key", || async {
        let log = h.emulator.request_log().await;
        log.entries[rotated_at..]
            .iter()
            .any(|e| e.route == route::LIST && e.status == "200")
            .then_some(())
    })
    .await;
    h.emulator.revoke_api_key(API_KEY).await;
    let revoked_at = h.emulator.request_log().await.entries.len();

    // Every deployment is read again (the 4 s drift checks), with 200.
    support::eventually(
        TIMEOUT,
        "every deployment read with the new key",
        || async {
            let log = h.emulator.request_log().await;
            ids.iter()
                .all(|id| {
                    log.entries[revoked_at..].iter().any(|e| {
                        e.deployment_id.as_deref() == Some(id.as_str()) && e.status == "200"
                    })
                })
                .then_some(())
        },
    )
    .await;
    let log = h.emulator.request_log().await;
    let refused: Vec<_> = log.entries[revoked_at..]
        .iter()
        .filter(|e| e.status == "401")
        .collect();
    assert!(refused.is_empty(), "sent with the revoked key: {refused:?}");
    let after = h.emulator.requests().await;
    for r in [route::PATCH, route::REDEPLOY, route::CREATE] {
        assert_eq!(after.count(r), before.count(r), "{r}: {after:?}");
    }
    assert_eq!(after.count(route::PATCH), 0);
    wait_plane_ready(&h.client, "langsmith").await;
}

/// A ClusterAgentControlPlane and an AgentControlPlane with the same URL and
/// key share one budget: a 429 answered to a pass on one pauses the other,
/// which sends nothing during the `Retry-After`; both converge after it.
#[tokio::test]
async fn a_cluster_plane_and_a_namespaced_plane_on_one_key_share_a_budget() {
    test_support::skip_without!(Envtest);
    let env = common::own_env(&[]).await;
    let h = platform("cacp-budget", &env).start().await;
    label(&h.client, &h.ns, LABEL, "true").await;
    // The harness's namespace has the AgentControlPlane `default` on the
    // same emulator and key as the how-to's cluster plane.
    install_how_to_plane(&h, &env).await;
    let on_namespaced = AgentDeploymentManifest::github("on-namespaced", "main")
        .secret("LOG_LEVEL", "info")
        .build();
    h.converge(on_namespaced, TIMEOUT).await;
    h.converge(on_cluster_plane("on-cluster", "langsmith"), TIMEOUT)
        .await;
    let generation = |o: &AgentDeployment| o.metadata.generation;

    h.emulator
        .set_faults(json!({"throttled_workspaces": [
            {"workspace": WORKSPACE, "retry_after_seconds": 15}
        ]}))
        .await;
    let change = json!({"spec": {"secrets": [{"name": "LOG_LEVEL", "value": "debug"}]}});
    support::merge_patch(&h.api, "on-namespaced", change.clone()).await;
    let first_429 = support::eventually(TIMEOUT, "a 429", || async {
        let log = h.emulator.request_log().await;
        log.entries
            .iter()
            .position(|e| e.status == "429")
            .map(|i| (i, log.entries[i].t_ms))
    })
    .await;
    support::merge_patch(&h.api, "on-cluster", change).await;
    let changed = h.api.get("on-cluster").await.unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let log = h.emulator.request_log().await;
    let sent: Vec<_> = log.entries[first_429.0 + 1..].iter().collect();
    assert!(
        sent.is_empty(),
        "sent during the Retry-After of the shared key: {sent:?}"
    );
    h.emulator.set_faults(json!({})).await;
    for name in ["on-namespaced", "on-cluster"] {
        let obj = h.wait_ready(name, Duration::from_secs(90)).await;
        if name == "on-cluster" {
            assert_eq!(generation(&obj), generation(&changed));
        }
    }
    let counts = h.emulator.requests().await;
    assert_eq!(counts.during_retry_after(), 0, "{counts:?}");
    assert_eq!(counts.count(route::PATCH), 2, "{counts:?}");
}
