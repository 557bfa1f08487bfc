//! The install manifests against a real kube-apiserver: every kustomize
//! overlay of `deploy/overlays/` and the Helm chart `deploy/helm/agent-operator`
//! (default values and `ci/ha-values.yaml`) are accepted with
//! `--dry-run=server` and applied for real with `--server-side`; the operator's
//! pod, built from each rendered pod template, is admitted by Pod Security
//! `restricted` (and a weakened copy is refused, so the check can fail);
//! `helm lint --strict` is clean and `values.schema.json` refuses bad values;
//! the chart grants exactly the RBAC of the overlays.
//!
//! kubectl comes from the envtest assets (`hack/envtest/install.sh`), helm
//! from `.cache/tools/bin` (`hack/tools/install.sh`); without them the tests
//! fail and say "run `make setup`".

use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use k8s_openapi::api::rbac::v1::PolicyRule;
use serde_json::{Value, json};

const OVERLAYS: [&str; 3] = ["cluster-wide", "namespaced", "ha"];
/// The watched namespace of `deploy/overlays/namespaced`.
const OVERLAY_WATCHED: &str = "agents";
/// The Helm release name of the tests: its cluster-scoped objects
/// (`helm-it-agent-operator`) do not meet the overlays' (`agent-operator`).
const RELEASE: &str = "helm-it";
const PSA_ENFORCE: &str = "pod-security.kubernetes.io/enforce";

fn repo() -> &'static Path {
    test_support::repo_root()
}

pub(crate) fn chart() -> PathBuf {
    repo().join("deploy/helm/agent-operator")
}

/// `.cache/tools/bin/<name>` (tests that use it start with
/// `skip_without!(Tools)`).
fn tool(name: &str) -> PathBuf {
    test_support::prerequisites::tool(name)
}

/// helm without user configuration or repository cache (the chart has no
/// dependency), shared by the tests of the chart.
pub(crate) fn helm() -> Command {
    let mut command = Command::new(tool("helm"));
    // No user configuration or repository cache: the chart has no dependency.
    let home = std::env::temp_dir().join("agent-operator-helm-home");
    command
        .env_remove("KUBECONFIG")
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_DATA_HOME", home.join("data"));
    command
}

/// The current kubectl (built with the current envtest binaries) on `env`,
/// a kube-apiserver a test started for itself (the oldest version's assets
/// directory has no kubectl).
pub(crate) fn kubectl_on(env: &test_support::envtest::TestEnv) -> Command {
    let current = test_support::envtest::assets_dir().expect("the current envtest binaries");
    let mut command = Command::new(current.join("kubectl"));
    command
        .env_remove("KUBECONFIG")
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path());
    command
}

/// kubectl with the shared environment's kubeconfig.
pub(crate) fn kubectl() -> Command {
    common::shared_env()
        .kubectl()
        .expect("kubectl is not in the envtest assets directory: run `make setup`")
}

fn run(mut command: Command, stdin: Option<&str>) -> Output {
    let what = format!("{command:?}");
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut pipe = child.stdin.take().expect("stdin");
    if let Some(text) = stdin {
        pipe.write_all(text.as_bytes())
            .unwrap_or_else(|e| panic!("{what}: writing stdin: {e}"));
    }
    drop(pipe);
    child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Runs `command`, panics with its output unless it succeeds; returns
/// (stdout, stderr).
pub(crate) fn succeed(command: Command, stdin: Option<&str>) -> (String, String) {
    let what = format!("{command:?}");
    let out = run(command, stdin);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    (stdout, stderr)
}

/// Runs `command`, panics unless it fails; returns its stderr.
fn fail(command: Command, stdin: Option<&str>) -> String {
    let what = format!("{command:?}");
    let out = run(command, stdin);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "{what} succeeded but should have failed:\n{}\n{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    stderr
}

/// The documents of a YAML stream, as JSON values (empty ones skipped).
pub(crate) fn documents(yaml: &str) -> Vec<Value> {
    use serde::Deserialize;
    yaml_serde::Deserializer::from_str(yaml)
        .map(|doc| Value::deserialize(doc).expect("a YAML document"))
        .filter(|v| !v.is_null())
        .collect()
}

/// The documents as one JSON `v1/List`, which `kubectl apply -f -` expands.
pub(crate) fn list(docs: &[Value]) -> String {
    json!({"apiVersion": "v1", "kind": "List", "items": docs}).to_string()
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} among {}", names(docs)))
}

fn names(docs: &[Value]) -> String {
    docs.iter()
        .map(|d| format!("{} {}", d["kind"], d["metadata"]["name"]))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `kubectl kustomize deploy/overlays/<overlay>`, as JSON documents.
pub(crate) fn kustomize(overlay: &str) -> Vec<Value> {
    let mut command = kubectl();
    command
        .arg("kustomize")
        .arg(repo().join("deploy/overlays").join(overlay));
    documents(&succeed(command, None).0)
}

/// What `kubectl kustomize` builds from `kustomization`, an overlay as a
/// user's repository would write it, its paths relative to a folder one
/// level below this repository's root (kustomize takes relative paths
/// only); the folder lives for the build only.
pub(crate) fn kustomize_overlay(kustomization: Value) -> Vec<Value> {
    let dir = tempfile::Builder::new()
        .prefix(".kustomize-test-")
        .tempdir_in(repo())
        .unwrap();
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        kustomization.to_string(),
    )
    .unwrap();
    let mut command = kubectl();
    command
        .args(["kustomize", "--load-restrictor", "LoadRestrictionsNone"])
        .arg(dir.path());
    documents(&succeed(command, None).0)
}

/// `helm template helm-it <chart> --namespace <namespace> <args>`.
fn helm_template(namespace: &str, args: &[&str]) -> Vec<Value> {
    let mut command = helm();
    command
        .args(["template", RELEASE])
        .arg(chart())
        .args(["--namespace", namespace])
        .args(args);
    documents(&succeed(command, None).0)
}

/// The API version and kind `helm template --api-versions` names for the
/// chart to render its ServiceMonitor (as if its CRD were installed).
pub(crate) const SERVICE_MONITOR_API: &str = "monitoring.coreos.com/v1/ServiceMonitor";
/// The same for the PrometheusRule.
const PROMETHEUS_RULE_API: &str = "monitoring.coreos.com/v1/PrometheusRule";

fn ha_values() -> String {
    chart().join("ci/ha-values.yaml").display().to_string()
}

/// Creates `name` unless it exists (tests of this binary share the server).
pub(crate) fn ensure_namespace(name: &str) {
    let mut command = kubectl();
    command.args([
        "apply",
        "--server-side",
        "--field-manager=install-test",
        "-f",
        "-",
    ]);
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    succeed(command, Some(&ns.to_string()));
}

/// A new namespace whose Pod Security admission enforces `restricted`.
async fn restricted_namespace(prefix: &str) -> String {
    let ns = common::test_namespace(&common::client().await, prefix).await;
    let mut command = kubectl();
    command
        .args(["label", "namespace", &ns])
        .arg(format!("{PSA_ENFORCE}=restricted"));
    succeed(command, None);
    ns
}

/// `kubectl apply --server-side [--dry-run=server]` of `docs`; panics unless
/// the API server accepts every object, and unless Pod Security stays silent
/// (a Deployment that would violate the namespace's `warn: restricted` only
/// gets a warning).
pub(crate) fn apply(docs: &[Value], dry_run: bool) -> String {
    let mut command = kubectl();
    command.args([
        "apply",
        "--server-side",
        "--field-manager=install-test",
        "-f",
        "-",
    ]);
    if dry_run {
        command.arg("--dry-run=server");
    }
    let (stdout, stderr) = succeed(command, Some(&list(docs)));
    assert!(
        !stderr.contains("PodSecurity"),
        "Pod Security warned about the manifests:\n{stderr}"
    );
    assert_eq!(
        stdout.lines().count(),
        docs.len(),
        "one line per object expected:\n{stdout}"
    );
    stdout
}

/// A Pod made of the pod template of `deployment`, in `namespace`.
fn pod_of(deployment: &Value, namespace: &str) -> Value {
    let template = &deployment["spec"]["template"];
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "operator-pod",
            "namespace": namespace,
            "labels": template["metadata"]["labels"],
        },
        "spec": template["spec"],
    })
}

/// `kubectl create --dry-run=server` of `pod`: Ok, or Err(stderr).
fn create_pod(pod: &Value) -> Result<(), String> {
    let mut command = kubectl();
    command.args(["create", "--dry-run=server", "-f", "-"]);
    let out = run(command, Some(&pod.to_string()));
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Makes a pod spec break one rule of Pod Security `restricted`.
type Weaken = fn(&mut Value);

/// The pod passes `restricted`; weakened copies do not, and are accepted
/// in a namespace without enforcement (so the refusal is Pod Security's).
fn assert_restricted(deployment: &Value, restricted: &str, unrestricted: &str, what: &str) {
    let pod = pod_of(deployment, restricted);
    create_pod(&pod).unwrap_or_else(|e| {
        panic!("{what}: the operator's pod is refused under enforce=restricted:\n{e}")
    });

    let weakenings: [(&str, Weaken); 4] = [
        ("runAsNonRoot", |spec| {
            spec["securityContext"]["runAsNonRoot"] = json!(false);
            spec["securityContext"]["runAsUser"] = json!(0);
            spec["containers"][0]["securityContext"]["runAsNonRoot"] = json!(false);
        }),
        ("seccompProfile", |spec| {
            spec["securityContext"]
                .as_object_mut()
                .unwrap()
                .remove("seccompProfile");
            spec["containers"][0]["securityContext"]
                .as_object_mut()
                .unwrap()
                .remove("seccompProfile");
        }),
        ("allowPrivilegeEscalation", |spec| {
            spec["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = json!(true);
        }),
        ("capabilities", |spec| {
            spec["containers"][0]["securityContext"]["capabilities"] =
                json!({"add": ["NET_ADMIN"]});
        }),
    ];
    for (field, weaken) in weakenings {
        let mut weak = pod.clone();
        weaken(&mut weak["spec"]);
        let refusal = create_pod(&weak)
            .expect_err(&format!("{what}: a pod without {field} passed restricted"));
        assert!(
            refusal.contains("violates PodSecurity") && refusal.contains(field),
            "{what}: {field}: unexpected refusal:\n{refusal}"
        );
        weak["metadata"]["namespace"] = json!(unrestricted);
        create_pod(&weak)
            .unwrap_or_else(|e| panic!("{what}: {field}: refused without enforcement too:\n{e}"));
    }
}

/// Two releases of the chart as two shards (docs/INSTALL.md, "Sharding"):
/// each passes its `sharding.key` as `--shard` and elects on a Lease of its
/// own (`<fullname>`, to which the operator appends the key); without a key
/// no `--shard` is passed (the objects without the label).
#[test]
fn helm_sharding_key_is_passed_as_the_shard_flag() {
    test_support::skip_without!(Tools);
    let shard_args = |key: Option<&str>| {
        let set = key.map(|k| format!("sharding.key={k}"));
        let mut args = vec!["--set", "fullnameOverride=op"];
        if let Some(set) = &set {
            args.extend(["--set", set.as_str()]);
        }
        let docs = helm_template("shards", &args);
        let deployment = docs
            .iter()
            .find(|d| d["kind"] == "Deployment")
            .expect("a Deployment");
        deployment_args(deployment)
            .into_iter()
            .filter(|a| a.starts_with("--shard") || a.starts_with("--lease-name"))
            .collect::<Vec<_>>()
    };
    assert_eq!(shard_args(None), ["--lease-name=op"]);
    assert_eq!(shard_args(Some("a")), ["--shard=a", "--lease-name=op"]);
    assert_eq!(shard_args(Some("b")), ["--shard=b", "--lease-name=op"]);
}

fn deployment_args(deployment: &Value) -> Vec<String> {
    serde_json::from_value(deployment["spec"]["template"]["spec"]["containers"][0]["args"].clone())
        .expect("container args")
}

fn env_value(deployment: &Value, name: &str) -> Option<String> {
    deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)
        .map(|e| e["value"].as_str().unwrap_or_default().to_owned())
}

fn rules(role: &Value) -> Vec<PolicyRule> {
    serde_json::from_value(role["rules"].clone()).expect("rules")
}

/// `kubectl get <kind> <name> -n <namespace> -o json`.
fn get(kind: &str, name: &str, namespace: Option<&str>) -> Value {
    let mut command = kubectl();
    command.args(["get", kind, name, "-o", "json"]);
    if let Some(ns) = namespace {
        command.args(["-n", ns]);
    }
    serde_json::from_str(&succeed(command, None).0).expect("kubectl get -o json")
}

#[test]
fn every_overlay_is_accepted_by_the_kube_apiserver_and_applies() {
    test_support::skip_without!(Envtest);
    ensure_namespace(OVERLAY_WATCHED);
    for overlay in OVERLAYS {
        // kubectl apply -k of each overlay (docs/INSTALL.md builds on them), with a
        // server dry run.
        let mut command = kubectl();
        command
            .args(["apply", "--server-side", "--dry-run=server", "-k"])
            .arg(repo().join("deploy/overlays").join(overlay));
        let (stdout, stderr) = succeed(command, None);
        assert!(
            stdout.contains("deployment.apps/agent-operator serverside-applied (server dry run)"),
            "{overlay}: {stdout}"
        );
        assert!(!stderr.contains("PodSecurity"), "{overlay}: {stderr}");
    }

    // For real, one after the other (one field manager: each apply owns what
    // its overlay sets).
    for overlay in ["cluster-wide", "ha", "namespaced"] {
        let docs = kustomize(overlay);
        apply(&docs, false);
        let deployment = get("deployment", "agent-operator", Some("agent-operator"));
        let pdb = get(
            "poddisruptionbudget",
            "agent-operator",
            Some("agent-operator"),
        );
        let args = deployment_args(&deployment);
        assert!(
            args.iter().any(|a| a == "--leader-elect"),
            "{overlay}: {args:?}"
        );
        match overlay {
            "ha" => {
                assert_eq!(deployment["spec"]["replicas"], 2);
                assert_eq!(pdb["spec"]["minAvailable"], 1);
                assert!(pdb["spec"]["maxUnavailable"].is_null());
                assert!(
                    deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
                        .is_object()
                );
            }
            _ => {
                assert_eq!(deployment["spec"]["replicas"], 1, "{overlay}");
                assert_eq!(pdb["spec"]["maxUnavailable"], 1, "{overlay}");
            }
        }
        if overlay == "namespaced" {
            assert_eq!(
                env_value(&deployment, "WATCH_NAMESPACE").as_deref(),
                Some(OVERLAY_WATCHED)
            );
            let role = get("role", "agent-operator", Some(OVERLAY_WATCHED));
            let binding = get("rolebinding", "agent-operator", Some(OVERLAY_WATCHED));
            assert_eq!(
                binding["subjects"],
                json!([{"kind": "ServiceAccount", "name": "agent-operator", "namespace": "agent-operator"}])
            );
            assert!(!rules(&role).is_empty());
        } else {
            assert_eq!(env_value(&deployment, "WATCH_NAMESPACE"), None, "{overlay}");
        }
    }
    // The namespace enforces restricted, as shipped.
    let ns = get("namespace", "agent-operator", None);
    assert_eq!(ns["metadata"]["labels"][PSA_ENFORCE], "restricted");

    // Negative control: the server dry run does validate.
    let mut docs = kustomize("cluster-wide");
    let deployment = docs
        .iter_mut()
        .find(|d| d["kind"] == "Deployment")
        .expect("a Deployment");
    deployment["spec"]["replicas"] = json!(-1);
    let mut command = kubectl();
    command.args(["apply", "--server-side", "--dry-run=server", "-f", "-"]);
    let refusal = fail(command, Some(&list(&docs)));
    assert!(refusal.contains("spec.replicas"), "{refusal}");
}

#[tokio::test]
async fn the_operator_pod_passes_pod_security_restricted() {
    test_support::skip_without!(Envtest);
    test_support::skip_without!(Tools);
    let restricted = restricted_namespace("psa-restricted").await;
    let unrestricted = common::test_namespace(&common::client().await, "psa-none").await;
    for overlay in OVERLAYS {
        let docs = kustomize(overlay);
        let deployment = find(&docs, "Deployment", "agent-operator");
        assert_restricted(
            deployment,
            &restricted,
            &unrestricted,
            &format!("overlay {overlay}"),
        );
    }
    let ha = ha_values();
    for args in [vec![], vec!["-f", ha.as_str()]] {
        let docs = helm_template(&restricted, &args);
        let deployment = find(&docs, "Deployment", "helm-it-agent-operator");
        assert_restricted(
            deployment,
            &restricted,
            &unrestricted,
            &format!("helm template {args:?}"),
        );
    }
}

#[test]
fn helm_lint_is_clean_and_the_schema_refuses_bad_values() {
    test_support::skip_without!(Tools);
    for args in [vec![], vec!["-f".to_owned(), ha_values()]] {
        let mut command = helm();
        command.args(["lint", "--strict"]).arg(chart()).args(&args);
        let (stdout, _) = succeed(command, None);
        assert!(
            stdout.contains("1 chart(s) linted, 0 chart(s) failed"),
            "{stdout}"
        );
        assert!(!stdout.contains("[WARNING]"), "{stdout}");
    }
    // values.schema.json: a wrong type, an unknown value, a key that does not
    // exist (a typo), a namespace that is not a DNS label.
    let bad: [(&[&str], &str); 7] = [
        (&["--set-json", r#"replicaCount="two""#], "replicaCount"),
        (
            &["--set-json", r#"extraAllowedHosts=["https://x.example/"]"#],
            "extraAllowedHosts",
        ),
        (&["--set", "replicaCount=0"], "replicaCount"),
        (&["--set", "logFormat=xml"], "logFormat"),
        (&["--set", "replicas=2"], "replicas"),
        (
            &["--set-json", r#"watchNamespaces=["Team_A"]"#],
            "watchNamespaces",
        ),
        (&["--set", "sharding.key=Shard_1"], "sharding"),
    ];
    for (args, field) in bad {
        let mut command = helm();
        command.args(["template", RELEASE]).arg(chart()).args(args);
        let refusal = fail(command, None);
        assert!(
            refusal.contains("values don't meet the specifications of the schema")
                && refusal.contains(field),
            "{args:?}: {refusal}"
        );
        let mut command = helm();
        command.args(["lint", "--strict"]).arg(chart()).args(args);
        fail(command, None);
    }
}

#[tokio::test]
async fn helm_template_is_accepted_by_the_kube_apiserver_and_applies() {
    test_support::skip_without!(Envtest);
    test_support::skip_without!(Tools);
    let client = common::client().await;
    let release_ns = restricted_namespace("helm-release").await;
    let watched_a = common::test_namespace(&client, "helm-watched-a").await;
    let watched_b = common::test_namespace(&client, "helm-watched-b").await;

    // Default values: cluster-wide, one replica, leader election on.
    let docs = helm_template(&release_ns, &[]);
    assert!(!docs.iter().any(|d| d["kind"] == "ServiceMonitor"));
    apply(&docs, true);
    apply(&docs, false);
    let deployment = get("deployment", "helm-it-agent-operator", Some(&release_ns));
    assert_eq!(deployment["spec"]["replicas"], 1);
    let args = deployment_args(&deployment);
    for arg in [
        "--log-format=json",
        "--concurrency=8",
        "--poll-interval-seconds=2",
        "--max-poll-interval-seconds=30",
        "--resync-interval-seconds=300",
        "--leader-elect",
        "--allowed-hosts=api.host.langchain.com,eu.api.host.langchain.com,*.langgraph.app",
    ] {
        assert!(args.iter().any(|a| a == arg), "{arg} not in {args:?}");
    }
    // extraAllowedHosts adds to the list; no host at all is refused.
    let extra = helm_template(
        &release_ns,
        &[
            "--set-json",
            r#"extraAllowedHosts=["langsmith.example.com","*.agents.example.com:8443"]"#,
        ],
    );
    let args = deployment_args(find(&extra, "Deployment", "helm-it-agent-operator"));
    assert!(
        args.iter().any(|a| a
            == "--allowed-hosts=api.host.langchain.com,eu.api.host.langchain.com,*.langgraph.app,langsmith.example.com,*.agents.example.com:8443"),
        "{args:?}"
    );
    let mut command = helm();
    command
        .args(["template", RELEASE])
        .arg(chart())
        .args(["--set-json", "allowedHosts=[]"]);
    assert!(fail(command, None).contains("allowedHosts and extraAllowedHosts are both empty"));
    get("clusterrolebinding", "helm-it-agent-operator", None);
    get(
        "role",
        "helm-it-agent-operator-leader-election",
        Some(&release_ns),
    );
    get(
        "service",
        "helm-it-agent-operator-metrics",
        Some(&release_ns),
    );
    get("networkpolicy", "helm-it-agent-operator", Some(&release_ns));

    // One replica without leader election: no --leader-elect, no Lease Role.
    let single = helm_template(&release_ns, &["--set", "leaderElection.enabled=false"]);
    let args = deployment_args(find(&single, "Deployment", "helm-it-agent-operator"));
    assert!(!args.iter().any(|a| a == "--leader-elect"), "{args:?}");
    assert!(
        !single
            .iter()
            .any(|d| d["metadata"]["name"] == "helm-it-agent-operator-leader-election")
    );

    // ci/ha-values.yaml, with namespaces of this test: two replicas (leader
    // election forced on), Roles in the watched namespaces only, the
    // ServiceMonitor.
    let ha = ha_values();
    let watched = format!(r#"watchNamespaces=["{watched_a}","{watched_b}"]"#);
    let docs = helm_template(
        &release_ns,
        &[
            "-f",
            &ha,
            "--set-json",
            &watched,
            "--api-versions",
            SERVICE_MONITOR_API,
        ],
    );
    let deployment = find(&docs, "Deployment", "helm-it-agent-operator");
    assert_eq!(deployment["spec"]["replicas"], 2);
    let args = deployment_args(deployment);
    for arg in [
        "--log-format=text",
        "--concurrency=16",
        "--poll-interval-seconds=1.5",
        "--max-poll-interval-seconds=20",
        "--resync-interval-seconds=600",
        "--leader-elect",
    ] {
        assert!(args.iter().any(|a| a == arg), "{arg} not in {args:?}");
    }
    assert_eq!(
        env_value(deployment, "WATCH_NAMESPACE"),
        Some(format!("{watched_a},{watched_b}"))
    );
    assert_eq!(
        find(&docs, "PodDisruptionBudget", "helm-it-agent-operator")["spec"]["minAvailable"],
        1
    );
    assert!(!docs.iter().any(|d| d["kind"] == "ClusterRole"));
    for ns in [&watched_a, &watched_b] {
        assert!(docs.iter().any(|d| d["kind"] == "Role"
            && d["metadata"]["name"] == "helm-it-agent-operator"
            && d["metadata"]["namespace"] == ns.as_str()));
    }
    for doc in &docs {
        assert_eq!(doc["metadata"]["labels"]["team"], "platform", "{doc}");
        assert_eq!(
            doc["metadata"]["annotations"]["owner"], "platform@example.com",
            "{doc}"
        );
    }
    let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
    assert_eq!(pod_labels["tier"], "control");

    // The ServiceMonitor's CRD is not installed here: checked by structure,
    // everything else by the API server.
    let (monitors, rest): (Vec<Value>, Vec<Value>) = docs
        .into_iter()
        .partition(|d| d["kind"] == "ServiceMonitor");
    let [monitor] = monitors.as_slice() else {
        panic!("one ServiceMonitor expected, got {monitors:?}");
    };
    let service = find(&rest, "Service", "helm-it-agent-operator-metrics");
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(monitor["metadata"]["labels"]["release"], "prometheus");
    let selector = monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("matchLabels");
    assert!(!selector.is_empty());
    for (key, value) in selector {
        assert_eq!(&service["metadata"]["labels"][key], value, "{key}");
    }
    assert_eq!(
        monitor["spec"]["endpoints"][0]["port"],
        service["spec"]["ports"][0]["name"]
    );
    assert_eq!(
        monitor["spec"]["namespaceSelector"]["matchNames"],
        json!([release_ns])
    );
    apply(&rest, true);
    apply(&rest, false);
    get("role", "helm-it-agent-operator", Some(&watched_b));
}

#[test]
fn the_chart_grants_what_the_overlays_grant() {
    test_support::skip_without!(Envtest);
    test_support::skip_without!(Tools);
    let cluster = kustomize("cluster-wide");
    let namespaced = kustomize("namespaced");
    let default = helm_template("agent-operator", &[]);
    let scoped = helm_template(
        "agent-operator",
        &["--set-json", r#"watchNamespaces=["agents"]"#],
    );
    let name = "helm-it-agent-operator";
    assert_eq!(
        rules(find(&default, "ClusterRole", name)),
        rules(find(&cluster, "ClusterRole", "agent-operator"))
    );
    assert_eq!(
        rules(find(&scoped, "Role", name)),
        rules(find(&namespaced, "Role", "agent-operator"))
    );
    assert_eq!(
        rules(find(&default, "Role", &format!("{name}-leader-election"))),
        rules(find(&cluster, "Role", "agent-operator-leader-election"))
    );
    // The hash key Secret: its own name in each (--hash-key-secret).
    assert_eq!(
        serde_json::to_string(&rules(find(&default, "Role", &format!("{name}-hash-key"))))
            .unwrap()
            .replace(name, "agent-operator"),
        serde_json::to_string(&rules(find(&cluster, "Role", "agent-operator-hash-key"))).unwrap()
    );
    let args = |d: &Value| d["spec"]["template"]["spec"]["containers"][0]["args"].clone();
    assert!(
        args(find(&default, "Deployment", name))
            .as_array()
            .unwrap()
            .contains(&json!(format!("--hash-key-secret={name}-hash-key")))
    );
    // The same pod security and probes.
    let ours = find(&cluster, "Deployment", "agent-operator");
    let theirs = find(&default, "Deployment", name);
    let pod = |d: &Value| d["spec"]["template"]["spec"].clone();
    assert_eq!(pod(ours)["securityContext"], pod(theirs)["securityContext"]);
    for field in [
        "securityContext",
        "livenessProbe",
        "readinessProbe",
        "startupProbe",
        "resources",
        "ports",
    ] {
        assert_eq!(
            pod(ours)["containers"][0][field],
            pod(theirs)["containers"][0][field],
            "{field}"
        );
    }
    // The image `make image` builds, at the crate's version.
    let image = format!("localhost/agent-operator:{}", env!("CARGO_PKG_VERSION"));
    assert_eq!(pod(ours)["containers"][0]["image"], image.as_str());
    assert_eq!(pod(theirs)["containers"][0]["image"], image.as_str());
    // The same kinds, but for the chart's optional ServiceMonitor.
    let kinds = |docs: &[Value]| {
        let mut kinds: Vec<String> = docs.iter().map(|d| d["kind"].to_string()).collect();
        kinds.sort();
        kinds
    };
    let mut expected = kinds(&cluster);
    expected.retain(|k| k != "\"Namespace\"");
    assert_eq!(kinds(&default), expected);
}

/// Every kustomize component of `deploy/components/` on top of the
/// cluster-wide overlay, as an overlay of a user's repository would use it
/// (`components: [...]`): built, accepted by the API server (server dry
/// run, Pod Security silent), and doing what its comment says. A new
/// component without a check here fails.
#[test]
fn every_component_builds_on_the_cluster_wide_overlay_and_applies() {
    test_support::skip_without!(Envtest);
    ensure_namespace("agent-operator");
    let mut components: Vec<String> = std::fs::read_dir(repo().join("deploy/components"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    components.sort();
    assert!(components.len() >= 6, "{components:?}");
    let base = kustomize("cluster-wide");
    let pod_spec = |docs: &[Value]| {
        find(docs, "Deployment", "agent-operator")["spec"]["template"]["spec"].clone()
    };
    let egress =
        |docs: &[Value]| find(docs, "NetworkPolicy", "agent-operator")["spec"]["egress"].clone();
    for component in &components {
        let docs = kustomize_overlay(json!({
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": ["../deploy/overlays/cluster-wide"],
            "components": [format!("../deploy/components/{component}")],
        }));
        apply(&docs, true);
        let (spec, base_spec) = (pod_spec(&docs), pod_spec(&base));
        match component.as_str() {
            "image-pull-secret" => assert_eq!(
                spec["imagePullSecrets"],
                json!([{"name": "agent-operator-pull-secret"}])
            ),
            "openshift" => {
                assert!(spec["securityContext"]["runAsUser"].is_null());
                assert!(spec["securityContext"]["runAsGroup"].is_null());
                assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
                assert!(!base_spec["securityContext"]["runAsUser"].is_null());
            }
            "dns-any-namespace" => {
                assert!(egress(&docs)[0]["to"].is_null(), "{}", egress(&docs));
                assert_eq!(egress(&docs)[0]["ports"][0]["port"], 53);
                assert!(egress(&base)[0]["to"].is_array());
            }
            "egress-port-8443" => {
                let ports: Vec<i64> = egress(&docs)[1]["ports"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p["port"].as_i64().unwrap())
                    .collect();
                assert_eq!(ports, [443, 6443, 8443]);
            }
            "metrics-authorization" => assert!(
                deployment_args(find(&docs, "Deployment", "agent-operator"))
                    .iter()
                    .any(|a| a == "--metrics-authorization")
            ),
            "pod-policy" => {
                assert!(
                    docs.iter()
                        .any(|d| d["kind"] == "ValidatingAdmissionPolicy"),
                    "{}",
                    names(&docs)
                );
                // The operator enforces it too, with the policy's empty lists.
                let args = deployment_args(find(&docs, "Deployment", "agent-operator"));
                assert!(
                    args.ends_with(&[
                        "--pod-policy".to_owned(),
                        "--pod-policy-service-account-names=".to_owned(),
                        "--pod-policy-listener-ids=".to_owned(),
                    ]),
                    "{args:?}"
                );
            }
            other => panic!("component {other} has no check in this test"),
        }
    }
}

/// The chart's values that Helm users expect (issue "A platform team
/// installs it…", item 2), all at once, rendered and applied to the API
/// server: `fullnameOverride`, an existing ServiceAccount
/// (`serviceAccount.create=false`), `extraArgs`, `extraEnv`, the pod
/// security context without a fixed user (OpenShift), and `crds.enabled`,
/// whose CRDs are those of crds/ with the `keep` resource policy.
#[test]
fn helm_values_users_expect_render_and_apply() {
    test_support::skip_without!(Envtest);
    test_support::skip_without!(Tools);
    let ns = "helm-values-it";
    ensure_namespace(ns);
    let mut command = kubectl();
    command.args(["-n", ns, "create", "serviceaccount", "existing-sa"]);
    let _ = run(command, None);
    let docs = helm_template(
        ns,
        &[
            "--set",
            "fullnameOverride=ops-agents",
            "--set",
            "serviceAccount.create=false",
            "--set",
            "serviceAccount.name=existing-sa",
            "--set",
            "extraArgs={--verify-concurrency=8,--request-timeout-seconds=60}",
            "--set-json",
            r#"extraEnv=[{"name":"RUST_LOG","value":"info,agent_operator=debug"}]"#,
            "--set",
            "podSecurityContext.runAsUser=null",
            "--set",
            "podSecurityContext.runAsGroup=null",
            "--set",
            "crds.enabled=true",
        ],
    );
    apply(&docs, true);
    assert!(
        !docs.iter().any(|d| d["kind"] == "ServiceAccount"),
        "{}",
        names(&docs)
    );
    let deployment = find(&docs, "Deployment", "ops-agents");
    let spec = &deployment["spec"]["template"]["spec"];
    assert_eq!(spec["serviceAccountName"], "existing-sa");
    assert!(spec["securityContext"]["runAsUser"].is_null());
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
    let args = deployment_args(deployment);
    for arg in ["--verify-concurrency=8", "--request-timeout-seconds=60"] {
        assert!(args.iter().any(|a| a == arg), "{args:?}");
    }
    assert_eq!(
        env_value(deployment, "RUST_LOG").as_deref(),
        Some("info,agent_operator=debug")
    );
    for binding in docs
        .iter()
        .filter(|d| d["kind"] == "RoleBinding" || d["kind"] == "ClusterRoleBinding")
    {
        assert_eq!(binding["subjects"][0]["name"], "existing-sa", "{binding}");
    }
    // The chart's CRDs are crds/, with the keep policy and the chart's labels.
    let crds: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == "CustomResourceDefinition")
        .collect();
    assert_eq!(crds.len(), agent_operator::api::crds().len());
    for crd in crds {
        let name = crd["metadata"]["name"].as_str().unwrap();
        let file = repo().join("crds").join(format!("{name}.yaml"));
        let committed = documents(&std::fs::read_to_string(file).unwrap());
        // Equal as values: the chart writes `1000.0` as `1000`.
        fn numbers_as_floats(v: &Value) -> Value {
            match v {
                Value::Number(n) => json!(n.as_f64()),
                Value::Array(a) => Value::Array(a.iter().map(numbers_as_floats).collect()),
                Value::Object(o) => Value::Object(
                    o.iter()
                        .map(|(k, v)| (k.clone(), numbers_as_floats(v)))
                        .collect(),
                ),
                other => other.clone(),
            }
        }
        assert!(
            numbers_as_floats(&crd["spec"]) == numbers_as_floats(&committed[0]["spec"]),
            "the chart's CRD {name} differs from crds/"
        );
        assert_eq!(
            crd["metadata"]["annotations"]["helm.sh/resource-policy"],
            "keep"
        );
    }
    // Without crds.enabled the chart has none.
    assert!(
        !helm_template(ns, &[])
            .iter()
            .any(|d| d["kind"] == "CustomResourceDefinition")
    );
    // serviceAccount.create=false needs a name.
    let mut command = helm();
    command
        .args(["template", RELEASE])
        .arg(chart())
        .args(["--set", "serviceAccount.create=false"]);
    assert!(fail(command, None).contains("serviceAccount.name is required"));
}

/// The ServiceMonitor and the PrometheusRule are rendered only where their
/// CRDs exist (`--api-versions` here, the cluster's API on install); the
/// PrometheusRule carries deploy/prometheus/alerts.yaml with the release's
/// job; an install
/// with both enabled on a cluster without the CRDs succeeds and its notes
/// name the missing CRDs.
#[tokio::test]
async fn monitoring_objects_are_rendered_only_where_their_crds_exist() {
    test_support::skip_without!(Envtest);
    test_support::skip_without!(Tools);
    let shipped = std::fs::read_to_string(repo().join("deploy/prometheus/alerts.yaml")).unwrap();
    let copy = std::fs::read_to_string(chart().join("files/alerts.yaml")).unwrap();
    assert_eq!(
        copy, shipped,
        "the chart's files/alerts.yaml is a copy of deploy/prometheus/alerts.yaml"
    );
    let ha = ha_values();
    let kinds = |docs: &[Value]| -> Vec<String> {
        docs.iter()
            .filter(|d| d["apiVersion"] == "monitoring.coreos.com/v1")
            .map(|d| d["kind"].as_str().unwrap_or_default().to_owned())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect()
    };
    let enabled = ["-f", &ha, "--set", "metrics.prometheusRule.enabled=true"];
    assert!(kinds(&helm_template("monitoring", &enabled)).is_empty());
    let mut with_crds = enabled.to_vec();
    with_crds.extend(["--api-versions", SERVICE_MONITOR_API]);
    assert_eq!(
        kinds(&helm_template("monitoring", &with_crds)),
        ["ServiceMonitor"]
    );
    with_crds.extend(["--api-versions", PROMETHEUS_RULE_API]);
    let docs = helm_template("monitoring", &with_crds);
    assert_eq!(kinds(&docs), ["PrometheusRule", "ServiceMonitor"]);
    let rule = find(&docs, "PrometheusRule", "helm-it-agent-operator");
    // The shipped groups, with the release's job (alert_rules_chart.rs runs them).
    let with_job = shipped.replace(
        "\"agent-operator-metrics\"",
        "\"helm-it-agent-operator-metrics\"",
    );
    let alerts: Value = yaml_serde::from_str(&with_job).unwrap();
    assert_eq!(rule["spec"], alerts, "the shipped alert groups");
    assert_eq!(rule["metadata"]["labels"]["team"], "platform");

    // helm install (server-side dry run) on this API server, which has no
    // Prometheus Operator CRDs: accepted, and the notes say what was skipped.
    let release_ns = common::test_namespace(&common::client().await, "helm-monitoring").await;
    let mut command = helm();
    command
        .args(["install", "monitoring-it"])
        .arg(chart())
        .args(["--namespace", &release_ns, "--dry-run=server"])
        .args(enabled)
        .arg("--kubeconfig")
        .arg(common::shared_env().kubeconfig_path());
    let (out, _) = succeed(command, None);
    assert!(!out.contains("kind: ServiceMonitor") && !out.contains("kind: PrometheusRule"));
    for kind in ["ServiceMonitor", "PrometheusRule"] {
        assert!(
            out.contains(&format!("this cluster has no {kind} CRD")),
            "the notes name the missing {kind} CRD:\n{out}"
        );
    }
}
