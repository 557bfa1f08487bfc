//! Installs into a namespace of the platform team's choosing with the
//! data-plane pod policy on (issue 37), each on a kube-apiserver of its own
//! (the installs are cluster-wide: a ClusterRole, a ValidatingAdmissionPolicy
//! for every namespace): kustomize with an overlay that sets only
//! `namespace:` and the policy's lists, and Helm with a release namespace,
//! uninstalled and installed again. After each, an operator acting as the
//! installed ServiceAccount creates, changes and deletes AgentDeployments
//! (its finalizer included) while the policy still refuses every hostile
//! spec; a create right after the reinstall is admitted at once; an
//! AgentDeployment stored before the reinstall is deleted under the new
//! policy; and one stored between the installs with an unlisted
//! ServiceAccount is never deployed: the operator runs with the install's
//! `--pod-policy` args (the same lists) and refuses it. The policy has no
//! parameter resource, so none can be missing: the tests check that too.

use crate::install_manifests::{chart, documents, helm, succeed};
use crate::security_policy::{self, LISTENER_OK, SERVICE_ACCOUNT_OK};
use crate::{common, support};

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use agent_operator::api::{AgentAssistant, AgentCron, AgentDeployment};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};
use support::{
    Harness, OperatorOptions, OperatorProcess, github_deployment, is_ready_now, wait_for,
};
use test_support::envtest::TestEnv;

const TIMEOUT: Duration = Duration::from_secs(60);
/// How long the API server may take to load a new policy.
const POLICY_LOAD: Duration = Duration::from_secs(30);

/// `kubectl --kubeconfig <env's>`.
fn kubectl(env: &TestEnv) -> Command {
    let mut command = Command::new(
        env.kubectl_path()
            .expect("kubectl is not in the envtest assets directory: run `make setup`"),
    );
    command
        .env_remove("KUBECONFIG")
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path());
    command
}

/// `path` relative to `from` (both absolute): kustomize refuses absolute
/// paths in `resources` and `components`.
fn relative(from: &Path, path: &Path) -> String {
    let up = from.components().count() - 1;
    format!(
        "{}{}",
        "../".repeat(up),
        path.strip_prefix("/").expect("an absolute path").display()
    )
}

/// Every `namespace` field of `value` (metadata, subjects, anything), with
/// the JSON path that holds it.
fn namespace_fields(value: &Value, at: &str, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                let here = format!("{at}.{key}");
                match (key.as_str(), v) {
                    ("namespace", Value::String(ns)) => out.push((here, ns.clone())),
                    _ => namespace_fields(v, &here, out),
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                namespace_fields(v, &format!("{at}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn agent_deployments(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::erase::<AgentDeployment>(&()),
    )
}

/// Every kind, in the order docs/INSTALL.md's uninstall deletes them.
const EVERY_KIND: &str = "agc,aga,agd,agl,acp,cacp";

async fn create(client: &kube::Client, ns: &str, manifest: &Value) -> Result<(), kube::Error> {
    let object: DynamicObject = serde_json::from_value(manifest.clone()).expect("an object");
    agent_deployments(client, ns)
        .create(&PostParams::default(), &object)
        .await
        .map(|_| ())
}

/// Waits until the policy refuses the first hostile spec (the API server
/// loads a new policy within a second or so), then checks that it refuses
/// every hostile spec of `security_policy` and admits the clean self-hosted
/// one (dry runs: nothing is stored).
pub(crate) async fn assert_policy_in_force(client: &kube::Client, ns: &str) {
    let cases = security_policy::hostile();
    let objects = agent_deployments(client, ns);
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let start = Instant::now();
    loop {
        let object: DynamicObject = serde_json::from_value(cases[0].1.clone()).unwrap();
        match objects.create(&dry_run, &object).await {
            Err(kube::Error::Api(status)) if status.message.contains("pod policy") => break,
            other => assert!(
                start.elapsed() < POLICY_LOAD,
                "the policy was not in force after {POLICY_LOAD:?}: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for (what, manifest, message) in cases {
        if manifest["kind"] != "AgentDeployment" {
            continue;
        }
        let object: DynamicObject = serde_json::from_value(manifest).unwrap();
        match objects.create(&dry_run, &object).await {
            Err(kube::Error::Api(status)) if status.code == 403 => {
                assert!(
                    status.message.contains(&message),
                    "{what}: {}",
                    status.message
                );
            }
            other => panic!("{what}: not refused by the installed policy: {other:?}"),
        }
    }
    let clean: DynamicObject = serde_json::from_value(security_policy::clean("p-clean")).unwrap();
    objects
        .create(&dry_run, &clean)
        .await
        .expect("the installed policy admits a clean self-hosted spec on its lists");
}

/// Writes into `dir` the overlay a platform team writes: the cluster-wide
/// overlay in its own namespace `ops`, the policy component with its lists
/// in both places (the JSON patches of the component's comment: the
/// policy's variables and the operator's args). Nothing else names a
/// namespace.
pub(crate) fn write_policy_overlay(dir: &Path, ops: &str) {
    let deploy = test_support::repo_root().join("deploy");
    let overlay = format!(
        r#"apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: {ops}
resources:
  - {cluster_wide}
components:
  - {policy}
patches:
  - target: {{kind: ValidatingAdmissionPolicy, name: agent-operator-pod-policy}}
    patch: |-
      - {{op: test, path: /spec/variables/0/name, value: serviceAccountNames}}
      - {{op: replace, path: /spec/variables/0/expression, value: "['{SERVICE_ACCOUNT_OK}']"}}
      - {{op: test, path: /spec/variables/1/name, value: listenerIds}}
      - {{op: replace, path: /spec/variables/1/expression, value: "['{LISTENER_OK}']"}}
  - target: {{kind: Deployment, name: agent-operator}}
    patch: |-
      - {{op: add, path: /spec/template/spec/containers/0/args/-, value: --pod-policy-service-account-names={SERVICE_ACCOUNT_OK}}}
      - {{op: add, path: /spec/template/spec/containers/0/args/-, value: --pod-policy-listener-ids={LISTENER_OK}}}
"#,
        cluster_wide = relative(dir, &deploy.join("overlays/cluster-wide")),
        policy = relative(dir, &deploy.join("components/pod-policy")),
    );
    std::fs::write(dir.join("kustomization.yaml"), overlay).unwrap();
}

/// An AgentDeployment's life under the policy, by the operator: `name` is
/// created (admitted at the first try), becomes Ready, changes (Ready at its
/// new generation) and is deleted (the operator's finalizer goes: gone).
pub(crate) async fn create_change_delete(client: &kube::Client, ns: &str, name: &str) {
    create(client, ns, &github_deployment(name, "main"))
        .await
        .unwrap_or_else(|e| panic!("creating {name} under the policy: {e}"));
    let api: Api<AgentDeployment> = Api::namespaced(client.clone(), ns);
    wait_for(&api, name, TIMEOUT, "Ready", |o| {
        is_ready_now(o).then_some(())
    })
    .await;
    support::merge_patch(
        &api,
        name,
        json!({"spec": {"sourceRevisionConfig": {"repoRef": "release"}}}),
    )
    .await;
    wait_for(&api, name, TIMEOUT, "Ready after the change", |o| {
        (is_ready_now(o) && o.metadata.generation > Some(1)).then_some(())
    })
    .await;
    api.delete(name, &Default::default())
        .await
        .unwrap_or_else(|e| panic!("deleting {name}: {e}"));
    support::wait_until_gone(&api, name, TIMEOUT).await;
}

/// The operator of an install: cluster-wide, or on `watched`, as the
/// ServiceAccount `sa` of the install's namespace `ns`.
pub(crate) fn operator(
    env: &TestEnv,
    log_name: &str,
    ns: &str,
    sa: &str,
    watched: Vec<&str>,
    extra: &[&str],
) -> OperatorProcess {
    let mut args = support::FAST_POLLING.to_vec();
    args.extend_from_slice(extra);
    OperatorProcess::start_with(
        env.kubeconfig_path(),
        OperatorOptions {
            log_name,
            namespaces: watched,
            extra: args,
            service_account: Some((ns, sa)),
            ..OperatorOptions::default()
        },
    )
}

/// The `--pod-policy*` args of an operator Deployment (as rendered, or as
/// the API server holds it), for the test's operator to run with.
pub(crate) fn pod_policy_args(deployment: &Value) -> Vec<String> {
    deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("the operator's args")
        .iter()
        .filter_map(Value::as_str)
        .filter(|a| a.starts_with("--pod-policy"))
        .map(str::to_owned)
        .collect()
}

/// The `--pod-policy*` args of the Deployment `name` the install made in
/// `ns`.
async fn installed_pod_policy_args(client: &kube::Client, ns: &str, name: &str) -> Vec<String> {
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), ns);
    let deployment = deployments
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("the installed Deployment {ns}/{name}: {e}"));
    pod_policy_args(&serde_json::to_value(deployment).unwrap())
}

/// The installed policies' specs, as the API server holds them.
fn installed_policies(env: &TestEnv) -> Vec<Value> {
    let mut command = kubectl(env);
    command.args(["get", "validatingadmissionpolicies", "-o", "json"]);
    let list: Value = serde_json::from_str(&succeed(command, None).0).expect("a list");
    list["items"].as_array().cloned().unwrap_or_default()
}

/// The tenant of an install test on `env`: its namespace, the emulator and
/// the AgentControlPlane `default` on it, and no operator (the test runs
/// the one its install made, as that ServiceAccount). The budget is
/// checked and the namespace scanned when the harness is dropped.
pub(crate) async fn tenant_harness(test: &str, env: &TestEnv) -> Harness {
    Harness::quick(test)
        .on(env)
        .without_operator()
        .start()
        .await
}

#[tokio::test]
async fn kustomize_into_another_namespace_with_the_pod_policy_keeps_agent_deployments_writable() {
    test_support::skip_without!(Envtest);
    let test = "install-kustomize";
    let env = common::own_env(&[]).await;
    let h = tenant_harness(test, &env).await;
    let (client, tenant) = (h.client.clone(), h.ns.clone());

    let ops = "platform-agents";
    let dir = tempfile::tempdir().expect("a temporary directory");
    write_policy_overlay(dir.path(), ops);

    // Every namespace the install names is its own: metadata, the subjects
    // of every binding (the operator's permissions), anything else.
    let mut render = kubectl(&env);
    render.arg("kustomize").arg(dir.path());
    let docs = documents(&succeed(render, None).0);
    let mut fields = Vec::new();
    for doc in &docs {
        let at = format!("{} {}", doc["kind"], doc["metadata"]["name"]);
        namespace_fields(doc, &at, &mut fields);
    }
    let subjects = fields
        .iter()
        .filter(|(at, _)| at.contains(".subjects["))
        .count();
    assert!(subjects >= 3, "the bindings' subjects: {fields:?}");
    let foreign: Vec<_> = fields.iter().filter(|(_, ns)| ns != ops).collect();
    assert!(
        foreign.is_empty(),
        "fields naming another namespace: {foreign:?}"
    );

    let mut apply = kubectl(&env);
    // Forced: the test's API server already has the shipped RBAC, whose
    // binding subjects this install moves to its own namespace.
    apply
        .args(["apply", "--server-side", "--force-conflicts", "-k"])
        .arg(dir.path());
    succeed(apply, None);
    for policy in installed_policies(&env) {
        assert!(policy["spec"].get("paramKind").is_none(), "{policy}");
    }

    // The operator enforces the same lists (the component's empty ones,
    // then the overlay's), and the test's operator runs with them.
    let policy_args = pod_policy_args(
        docs.iter()
            .find(|d| d["kind"] == "Deployment")
            .expect("the operator Deployment"),
    );
    assert_eq!(
        policy_args,
        [
            "--pod-policy".to_owned(),
            "--pod-policy-service-account-names=".to_owned(),
            "--pod-policy-listener-ids=".to_owned(),
            format!("--pod-policy-service-account-names={SERVICE_ACCOUNT_OK}"),
            format!("--pod-policy-listener-ids={LISTENER_OK}"),
        ]
    );
    let extra: Vec<&str> = policy_args.iter().map(String::as_str).collect();
    let mut operator = operator(&env, test, ops, "agent-operator", vec![], &extra);
    assert_policy_in_force(&client, &tenant).await;
    create_change_delete(&client, &tenant, "kz-agent").await;
    // The hash key Secret in the install's namespace (its Role is there).
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ops);
    assert!(
        secrets
            .get_opt("agent-operator-hash-key")
            .await
            .unwrap()
            .is_some(),
        "the operator wrote no hash key Secret in {ops}"
    );
    let exit = operator.terminate(TIMEOUT).await;
    assert!(exit.success(), "the operator exited with {exit}");
    let text = std::fs::read_to_string(support::log_dir().join(format!("{test}-operator.log")))
        .expect("the operator log");
    assert!(
        !text.contains("Forbidden"),
        "the operator was refused something:\n{text}"
    );
}

/// `helm <args> --kubeconfig <env's>`.
fn helm_on(env: &TestEnv, args: &[&str]) -> (String, String) {
    let mut command = helm();
    command
        .args(args)
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path());
    succeed(command, None)
}

#[tokio::test]
async fn helm_reinstall_with_the_pod_policy_keeps_agent_deployments_writable_and_deletable() {
    test_support::skip_without!(Envtest);
    test_support::skip_without!(Tools);
    let test = "install-helm";
    let env = common::own_env(&[]).await;
    let h = tenant_harness(test, &env).await;
    let (client, tenant) = (h.client.clone(), h.ns.clone());

    let ops = "team-ops";
    let release = "agents";
    let fullname = "agents-agent-operator";
    let hash_key = format!("--hash-key-secret={fullname}-hash-key");
    let chart = chart().display().to_string();
    let sa = format!("podPolicy.serviceAccountNames={{{SERVICE_ACCOUNT_OK}}}");
    let listeners = format!("podPolicy.listenerIds={{{LISTENER_OK}}}");
    let watched = format!("watchNamespaces={{{tenant}}}");
    let install = [
        "install",
        release,
        &chart,
        "--namespace",
        ops,
        "--create-namespace",
        "--set",
        "podPolicy.enabled=true",
        "--set",
        &sa,
        "--set",
        &listeners,
        "--set",
        &watched,
    ];

    helm_on(&env, &install);
    for policy in installed_policies(&env) {
        assert!(policy["spec"].get("paramKind").is_none(), "{policy}");
    }
    // The operator gets the same lists as the policy; the test's operators
    // run with the args the chart gave the installed Deployment.
    let policy_args = installed_pod_policy_args(&client, ops, fullname).await;
    assert_eq!(
        policy_args,
        [
            "--pod-policy".to_owned(),
            format!("--pod-policy-service-account-names={SERVICE_ACCOUNT_OK}"),
            format!("--pod-policy-listener-ids={LISTENER_OK}"),
        ]
    );
    let mut args: Vec<&str> = policy_args.iter().map(String::as_str).collect();
    args.push(&hash_key);
    let mut first = operator(&env, test, ops, fullname, vec![&tenant], &args);
    assert_policy_in_force(&client, &tenant).await;
    create_change_delete(&client, &tenant, "helm-agent").await;
    // One that outlives the release, deleted under the next one.
    create(&client, &tenant, &github_deployment("kept", "main"))
        .await
        .expect("creating kept");
    let api: Api<AgentDeployment> = Api::namespaced(client.clone(), &tenant);
    wait_for(&api, "kept", TIMEOUT, "Ready", |o| {
        is_ready_now(o).then_some(())
    })
    .await;
    assert!(first.terminate(TIMEOUT).await.success());

    helm_on(&env, &["uninstall", release, "--namespace", ops, "--wait"]);
    // What an uninstall leaves: the hash key Secret the operator created.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ops);
    assert!(
        secrets
            .get_opt(&format!("{fullname}-hash-key"))
            .await
            .unwrap()
            .is_some(),
        "the hash key Secret did not outlive the release"
    );
    assert!(
        installed_policies(&env).is_empty(),
        "uninstall left a policy"
    );
    // Stored while no policy exists: admitted, with a ServiceAccount the
    // policy does not list.
    let mut between = github_deployment("between", "main");
    between["spec"]["sourceConfig"]["resourceSpec"] = json!({"serviceAccountName": "root-sa"});
    // kube-apiserver's admission reads policies from its informer: a policy
    // deleted a moment ago may still refuse for a moment on a loaded host.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match create(&client, &tenant, &between).await {
            Ok(()) => break,
            Err(e) if Instant::now() < deadline && e.to_string().contains("pod-policy") => {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => panic!("without the policy, an unlisted ServiceAccount is admitted: {e}"),
        }
    }

    // Installed again: the next create is admitted at once (no window in
    // which a policy refuses every write), and the policy is in force.
    helm_on(&env, &install);
    let reinstalled = Instant::now();
    create(&client, &tenant, &github_deployment("after", "main"))
        .await
        .expect("a create right after the reinstall is admitted");
    let mut second = operator(&env, test, ops, fullname, vec![&tenant], &args);
    assert_policy_in_force(&client, &tenant).await;
    // The object stored between the installs is never deployed: the
    // reinstalled operator refuses it as the policy would have.
    let refused = wait_for(&api, "between", TIMEOUT, "Stalled PodPolicyRefused", |o| {
        support::is_stalled_with(o, "PodPolicyRefused").then(|| o.clone())
    })
    .await;
    let message = support::condition(&refused, "Stalled").unwrap().message;
    assert!(
        message.contains("serviceAccountName: root-sa is not on the data-plane pod policy's list"),
        "{message}"
    );
    assert!(refused.status.unwrap().deployment_id.is_none());
    api.delete("between", &Default::default())
        .await
        .expect("deleting between");
    support::wait_until_gone(&api, "between", TIMEOUT).await;
    println!(
        "reinstall: policy in force {:.1} s after helm install returned",
        reinstalled.elapsed().as_secs_f64()
    );
    api.delete("kept", &Default::default())
        .await
        .expect("deleting kept");
    support::wait_until_gone(&api, "kept", TIMEOUT).await;
    api.delete("after", &Default::default())
        .await
        .expect("deleting after");
    support::wait_until_gone(&api, "after", TIMEOUT).await;
    create_change_delete(&client, &tenant, "helm-agent-2").await;
    assert!(second.terminate(TIMEOUT).await.success());
}

/// `kubectl get <kinds> -o name` in `ns` (`None`: cluster-scoped kinds), the
/// names sorted, leaving out what a kube-controller-manager adds to every
/// namespace (envtest runs none; a real cluster would).
fn object_names(
    env: &TestEnv,
    kinds: &str,
    ns: Option<&str>,
    selector: Option<&str>,
) -> Vec<String> {
    let mut command = kubectl(env);
    command.args(["get", kinds, "-o", "name"]);
    if let Some(ns) = ns {
        command.args(["--namespace", ns]);
    }
    if let Some(selector) = selector {
        command.args(["--selector", selector]);
    }
    let (out, _) = succeed(command, None);
    let mut names: Vec<String> = out
        .lines()
        .filter(|l| !l.is_empty())
        .filter(|l| *l != "serviceaccount/default" && *l != "configmap/kube-root-ca.crt")
        .map(str::to_owned)
        .collect();
    names.sort();
    names
}

/// docs/INSTALL.md "Uninstall step by step, and what stays", run on a fresh
/// API server: the server-side dry run of an overlay after the namespace
/// step; a Helm install whose watchNamespaces do not exist fails and is
/// cleared by helm uninstall; then a Helm install with leader election and an AgentDeployment,
/// the documented deletions and `helm uninstall`, after which exactly the
/// hash key Secret and the Lease are left in the release namespace, nothing
/// of the release cluster-wide, and the CRDs; deleting those two by hand
/// leaves the namespace empty.
#[tokio::test]
async fn helm_uninstall_leaves_what_install_md_says() {
    test_support::skip_without!(Envtest);
    test_support::skip_without!(Tools);
    let test = "uninstall";
    let env = common::own_env(&[]).await;
    let client = env.client().await.expect("envtest client");

    // The dry run of the namespaced overlay: refused until its namespaces
    // exist (a dry run creates no Namespace), accepted after.
    let overlay = test_support::repo_root().join("deploy/overlays/namespaced");
    let dry_run = || {
        let mut command = kubectl(&env);
        command
            .args(["apply", "--server-side", "--dry-run=server", "-k"])
            .arg(&overlay);
        command.output().expect("running kubectl")
    };
    let refused = dry_run();
    assert!(
        !refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("not found"),
        "{refused:?}"
    );
    for ns in ["agent-operator", "agents"] {
        let mut command = kubectl(&env);
        command.args(["create", "namespace", ns]);
        // agent-operator may exist already (the test RBAC of own_env).
        let _ = command.output();
    }
    let accepted = dry_run();
    assert!(accepted.status.success(), "{accepted:?}");
    assert_eq!(
        object_names(&env, "deployments", Some("agent-operator"), None),
        Vec::<String>::new(),
        "the dry run stored nothing"
    );

    // watchNamespaces that do not exist yet: the install fails, the release
    // is left `failed`, and helm uninstall clears it (INSTALL.md).
    let mut command = helm();
    command
        .args(["install", "early", &chart().display().to_string()])
        .args(["--namespace", "team-early", "--create-namespace"])
        .args(["--set-json", r#"watchNamespaces=["not-yet"]"#])
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path());
    let out = command.output().expect("running helm");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains(r#"namespaces "not-yet" not found"#),
        "{out:?}"
    );
    let (status, _) = helm_on(&env, &["status", "early", "--namespace", "team-early"]);
    assert!(status.contains("STATUS: failed"), "{status}");
    helm_on(
        &env,
        &["uninstall", "early", "--namespace", "team-early", "--wait"],
    );

    let h = tenant_harness(test, &env).await;
    let tenant = h.ns.clone();
    let ops = "team-ops";
    let release = "agents";
    let fullname = "agents-agent-operator";
    let chart = chart().display().to_string();
    let watched = format!("watchNamespaces={{{tenant}}}");
    helm_on(
        &env,
        &[
            "install",
            release,
            &chart,
            "--namespace",
            ops,
            "--create-namespace",
            "--set",
            "replicaCount=2",
            "--set",
            &watched,
        ],
    );
    let hash_key = format!("--hash-key-secret={fullname}-hash-key");
    let lease = format!("--lease-name={fullname}");
    let lease_ns = format!("--lease-namespace={ops}");
    let mut leader = operator(
        &env,
        test,
        ops,
        fullname,
        vec![&tenant],
        &["--leader-elect", &lease, &lease_ns, &hash_key],
    );
    let api: Api<AgentDeployment> = Api::namespaced(client.clone(), &tenant);
    create(&client, &tenant, &github_deployment("to-remove", "main"))
        .await
        .expect("creating to-remove");
    wait_for(&api, "to-remove", TIMEOUT, "Ready", |o| {
        is_ready_now(o).then_some(())
    })
    .await;
    // An AgentAssistant and an AgentCron on it: both carry a finalizer, so
    // the uninstall must delete them while the operator runs.
    let assistants: Api<AgentAssistant> = Api::namespaced(client.clone(), &tenant);
    let crons: Api<AgentCron> = Api::namespaced(client.clone(), &tenant);
    support::apply_json(
        &assistants,
        "helper",
        json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentAssistant",
            "metadata": {"name": "helper"},
            "spec": {"deploymentRef": {"name": "to-remove"}, "graphId": "agent"}}),
    )
    .await;
    support::apply_json(
        &crons,
        "nightly",
        json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentCron",
            "metadata": {"name": "nightly"},
            "spec": {"deploymentRef": {"name": "to-remove"}, "schedule": "0 3 * * *",
                "assistantRef": {"name": "helper"}}}),
    )
    .await;
    support::wait_object(&assistants, "helper", TIMEOUT, "a finalizer", |o| {
        o.filter(|o| !o.metadata.finalizers.clone().unwrap_or_default().is_empty())
            .map(|_| ())
    })
    .await;
    support::wait_object(&crons, "nightly", TIMEOUT, "a finalizer", |o| {
        o.filter(|o| !o.metadata.finalizers.clone().unwrap_or_default().is_empty())
            .map(|_| ())
    })
    .await;

    // The documented steps, with the operator still running.
    let mut command = kubectl(&env);
    command.args(["delete", EVERY_KIND, "--all", "-A", "--wait=false"]);
    succeed(command, None);
    let mut command = kubectl(&env);
    command.args([
        "wait",
        "--for=delete",
        EVERY_KIND,
        "--all",
        "-A",
        "--timeout=60s",
    ]);
    succeed(command, None);
    assert_eq!(
        object_names(&env, EVERY_KIND, Some(&tenant), None),
        Vec::<String>::new(),
        "every object is gone"
    );
    helm_on(&env, &["uninstall", release, "--namespace", ops, "--wait"]);
    // The Deployment's pods get SIGTERM as it goes.
    let _ = leader.terminate(TIMEOUT).await;

    let namespaced = "all,secrets,configmaps,serviceaccounts,roles,rolebindings,leases,networkpolicies,poddisruptionbudgets";
    assert_eq!(
        object_names(&env, namespaced, Some(ops), None),
        [
            format!("lease.coordination.k8s.io/{fullname}"),
            format!("secret/{fullname}-hash-key"),
        ],
        "what helm uninstall leaves in the release namespace"
    );
    let instance = format!("app.kubernetes.io/instance={release}");
    assert_eq!(
        object_names(
            &env,
            "clusterroles,clusterrolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings",
            None,
            Some(&instance)
        ),
        Vec::<String>::new(),
        "nothing of the release is left cluster-wide"
    );
    assert_eq!(
        object_names(&env, "roles,rolebindings", Some(&tenant), Some(&instance)),
        Vec::<String>::new(),
        "nothing of the release is left in the watched namespace"
    );
    let crds = object_names(&env, "customresourcedefinitions", None, None);
    for crd in [
        "agentcontrolplanes",
        "agentdeployments",
        "agentlisteners",
        "agentassistants",
        "agentcrons",
    ] {
        let name = format!("customresourcedefinition.apiextensions.k8s.io/{crd}.agentserver.dev");
        assert!(crds.contains(&name), "{name} stays: {crds:?}");
    }
    // By hand, as documented.
    let mut command = kubectl(&env);
    command.args([
        "--namespace",
        ops,
        "delete",
        "secret",
        &format!("{fullname}-hash-key"),
    ]);
    succeed(command, None);
    let mut command = kubectl(&env);
    command.args(["--namespace", ops, "delete", "lease", fullname]);
    succeed(command, None);
    assert_eq!(
        object_names(&env, namespaced, Some(ops), None),
        Vec::<String>::new()
    );
}

/// The words of `line`, split as a shell splits them (single quotes only,
/// which is all the docs' commands use).
fn shell_words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quoted, mut any) = (Vec::new(), String::new(), false, false);
    for c in line.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            ' ' if !quoted => {
                if any {
                    words.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            c => {
                word.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(word);
    }
    words
}

/// docs/INSTALL.md, "Self-hosted LangSmith": its `helm install`, as
/// written (the chart's directory in place of the release's package), on a
/// cluster whose CRDs were applied before without Helm: the chart leaves
/// them alone (`crds.enabled` off) and the release is deployed with the
/// self-hosted host and port allowed.
#[tokio::test]
async fn helm_self_hosted_install_after_the_crds_works_as_written() {
    test_support::skip_without!(Envtest);
    test_support::skip_without!(Tools);
    let env = common::own_env(&[]).await;
    let guide = std::fs::read_to_string(test_support::repo_root().join("docs/INSTALL.md"))
        .expect("reading docs/INSTALL.md");
    let section = guide
        .split("## Self-hosted LangSmith")
        .nth(1)
        .expect("the section");
    let mut command_line = String::new();
    for line in section
        .lines()
        .skip_while(|l| !l.starts_with("helm install "))
    {
        command_line.push_str(line.trim_end_matches('\\').trim());
        command_line.push(' ');
        if !line.ends_with('\\') {
            break;
        }
    }
    let words = shell_words(&command_line);
    assert!(
        words.len() > 5 && !command_line.contains("crds.enabled"),
        "{command_line}"
    );
    // The test's own cluster already holds the shipped RBAC under the names
    // `agent-operator` (every operator of the suite acts as it): the
    // release and its namespace get other names, the flags stay as written.
    let (release, ns) = ("self-hosted", "self-hosted-ops");
    let chart = chart().display().to_string();
    let args: Vec<&str> = words[1..]
        .iter()
        .enumerate()
        .map(|(i, w)| match w.as_str() {
            w if w.ends_with(".tgz") => chart.as_str(),
            "agent-operator" if i == 1 => release,
            "agent-operator" => ns,
            w => w,
        })
        .collect();
    helm_on(&env, &args);
    let (status, _) = helm_on(&env, &["status", release, "-n", ns]);
    assert!(status.contains("STATUS: deployed"), "{status}");
    let (values, _) = helm_on(&env, &["get", "values", release, "-n", ns]);
    assert!(values.contains("langsmith.example.com:8443"), "{values}");
}

#[test]
fn shell_words_keep_single_quoted_words_whole() {
    assert_eq!(
        shell_words("helm install a  --set-json 'x=[\"h:1\"]' -n b "),
        [
            "helm",
            "install",
            "a",
            "--set-json",
            "x=[\"h:1\"]",
            "-n",
            "b"
        ]
    );
}
