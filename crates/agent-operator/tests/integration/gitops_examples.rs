//! The GitOps examples of `deploy/gitops/` (issue "A platform team installs
//! it…", item 4): the Flux Kustomizations and the Argo CD Applications. No
//! Flux or Argo CD runs here, so each object is rendered the way its tool
//! renders it — the path it names, built by kustomize with the images it
//! sets (Flux `spec.images`, Argo CD `kustomize.images`), a folder without a
//! kustomization.yaml taken file by file — and the result is applied to the
//! real API server (server dry run). Also checked: the order (`dependsOn`,
//! sync waves), the CRDs never pruned, and the operator's image the one the
//! example sets, not the unpullable `localhost/` default.
//!
//! The examples' repository vendors this project under `agent-operator/`
//! and keeps the user's resources under `agents/`; here `agents/` is the
//! project's `examples/`.
//!
//! Then each example runs, end to end, on a kube-apiserver of its own: what
//! it renders is applied for real in its order (CRDs, operator, agents),
//! with the settings of a self-hosted control plane a user adds as
//! kustomize `patches` (docs/GITOPS.md, "A self-hosted control plane"); the
//! operator runs as the rendered Deployment says (its arguments, its
//! environment, its ServiceAccount and RBAC), since no kubelet runs here;
//! and every AgentControlPlane, AgentDeployment, AgentAssistant and
//! AgentCron of `agents/` reaches Ready against the emulator behind TLS on a port other
//! than 443.

use crate::install_manifests::{
    apply, documents, ensure_namespace, kubectl_on, kustomize_overlay, list, succeed,
};
use crate::support::{self, Budget, EmulatorProcess, OperatorOptions, OperatorProcess};

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};
use test_support::envtest::{TestEnv, TestEnvOptions};
use test_support::tls::{TestCa, TlsFront};

const IMAGE: &str = "registry.example.com/platform/agent-operator:0.1.0";

/// A repository path of an example (`./agent-operator/x`, `agent-operator/x`,
/// `./agents`) as a path relative to this repository's root.
fn local(path: &str) -> String {
    let path = path.trim_start_matches("./");
    match path.strip_prefix("agent-operator/") {
        Some(rest) => rest.to_owned(),
        None if path == "agents" => "examples".to_owned(),
        None => panic!("an example names {path}, outside agent-operator/ and agents/"),
    }
}

/// What kustomize builds from `path` with `images` (kustomize `images`
/// entries), as its tool would render it.
fn render(path: &str, images: Value) -> Vec<Value> {
    render_patched(path, images, json!([]))
}

/// [`render`] with kustomize `patches` as well (Flux `spec.patches`, Argo
/// CD `kustomize.patches`).
fn render_patched(path: &str, images: Value, patches: Value) -> Vec<Value> {
    let root = test_support::repo_root();
    let target = root.join(path);
    let resources: Vec<String> = if target.join("kustomization.yaml").exists() {
        vec![format!("../{path}")]
    } else {
        // Flux and Argo CD take a folder without a kustomization.yaml file
        // by file.
        let mut files: Vec<String> = std::fs::read_dir(&target)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".yaml"))
            .map(|n| format!("../{path}/{n}"))
            .collect();
        files.sort();
        files
    };
    kustomize_overlay(json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": resources,
        "images": images,
        "patches": patches,
    }))
}

/// Argo CD's `kustomize.images` (`name=newName:tag`) as kustomize `images`.
fn argo_images(application: &Value) -> Value {
    let images: Vec<Value> = application["spec"]["source"]["kustomize"]["images"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|i| {
                    let (from, to) = i.as_str().unwrap().split_once('=').unwrap();
                    let (new_name, tag) = to.rsplit_once(':').unwrap();
                    json!({"name": from, "newName": new_name, "newTag": tag})
                })
                .collect()
        })
        .unwrap_or_default();
    Value::Array(images)
}

/// Checks what one object renders: applied (dry run), and the operator's
/// image the example's.
fn check_rendered(name: &str, docs: &[Value]) {
    assert!(!docs.is_empty(), "{name} renders nothing");
    apply(docs, true);
    for d in docs.iter().filter(|d| d["kind"] == "Deployment") {
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0]["image"], IMAGE,
            "{name}: the image the example sets"
        );
    }
}

fn file(path: &str) -> Vec<Value> {
    documents(&std::fs::read_to_string(test_support::repo_root().join(path)).unwrap())
}

#[test]
fn the_flux_kustomizations_render_in_order_and_apply() {
    test_support::skip_without!(Envtest);
    for ns in ["agent-operator", "agents", "default"] {
        ensure_namespace(ns);
    }
    let docs = file("deploy/gitops/flux/agent-operator.yaml");
    let names: Vec<&str> = docs
        .iter()
        .map(|d| d["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["agent-operator-crds", "agent-operator", "agents"]);
    for (d, after) in docs
        .iter()
        .zip([None, Some("agent-operator-crds"), Some("agent-operator")])
    {
        assert_eq!(d["kind"], "Kustomization");
        assert_eq!(d["spec"]["dependsOn"][0]["name"].as_str(), after, "{d}");
        assert_eq!(d["spec"]["wait"], true, "{d}");
    }
    assert_eq!(docs[0]["spec"]["prune"], false, "the CRDs are never pruned");
    let mut deployments = 0;
    for d in &docs {
        let name = d["metadata"]["name"].as_str().unwrap();
        let path = local(d["spec"]["path"].as_str().unwrap());
        let images = d["spec"]["images"].clone();
        let rendered = render(&path, if images.is_null() { json!([]) } else { images });
        deployments += rendered
            .iter()
            .filter(|d| d["kind"] == "Deployment")
            .count();
        check_rendered(name, &rendered);
    }
    assert_eq!(deployments, 1, "the operator, with the example's image");
}

#[test]
fn the_argo_cd_applications_render_in_waves_and_apply() {
    test_support::skip_without!(Envtest);
    for ns in ["agent-operator", "agents", "default"] {
        ensure_namespace(ns);
    }
    let docs = file("deploy/gitops/argocd/applications.yaml");
    let waves: Vec<i64> = docs
        .iter()
        .map(|d| {
            d["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert_eq!(waves, [-2, -1, 0], "CRDs, operator, agents");
    assert_eq!(
        docs[0]["spec"]["syncPolicy"]["automated"]["prune"], false,
        "the CRDs are never pruned"
    );
    let mut deployments = 0;
    for d in &docs {
        assert_eq!(d["kind"], "Application");
        let name = d["metadata"]["name"].as_str().unwrap();
        let path = local(d["spec"]["source"]["path"].as_str().unwrap());
        let rendered = render(&path, argo_images(d));
        deployments += rendered
            .iter()
            .filter(|d| d["kind"] == "Deployment")
            .count();
        check_rendered(name, &rendered);
    }
    assert_eq!(deployments, 1, "the operator, with the example's image");
    // The health check the Applications rely on is shipped.
    let cm = file("deploy/argocd/argocd-cm.yaml");
    assert!(
        cm[0]["data"]["resource.customizations.health.agentserver.dev_AgentDeployment"].is_string()
    );
}

/// The platform path (docs/PLATFORM-PLANES.md): after the operator in both
/// tools (Flux `dependsOn`, Argo CD the operator's wave), rendering the
/// ClusterAgentControlPlane, which the API server accepts.
#[test]
fn the_platform_path_comes_after_the_operator_and_applies() {
    test_support::skip_without!(Envtest);
    let flux = file("deploy/gitops/flux/platform.yaml");
    assert_eq!(flux[0]["spec"]["dependsOn"][0]["name"], "agent-operator");
    assert_eq!(flux[0]["spec"]["wait"], true);
    let argo = file("deploy/gitops/argocd/platform.yaml");
    assert_eq!(
        argo[0]["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"],
        "-1"
    );
    for path in [
        flux[0]["spec"]["path"].as_str().unwrap(),
        argo[0]["spec"]["source"]["path"].as_str().unwrap(),
    ] {
        let rendered = render(&local(path), json!([]));
        let kinds: Vec<&str> = rendered.iter().filter_map(|d| d["kind"].as_str()).collect();
        assert_eq!(kinds, ["ClusterAgentControlPlane"], "{path}");
        check_rendered(path, &rendered);
    }
}

/// The workspace of `examples/control-plane.yaml` (the emulator's demo key),
/// which the emulator of the end-to-end tests also accepts.
const EXAMPLE_WORKSPACE: &str = "00000000-0000-4000-8000-000000000001";

/// How long the agents of `examples/` may take to be Ready.
const READY_TIMEOUT: &str = "180s";

/// A self-hosted control plane as a user adds it to the examples
/// (docs/GITOPS.md, "A self-hosted control plane"): where it is, and the
/// hosts the operator may reach.
struct SelfHosted {
    /// `https://127.0.0.1:<port>/api-host`: the emulator behind TLS.
    url: String,
    /// `ALLOWED_HOSTS`: the HTTPS front and the emulator's built-in agent
    /// servers, each `host:port`.
    allowed_hosts: String,
}

impl SelfHosted {
    /// The kustomize `patches` a user adds to the operator's path: the
    /// operator allowed to reach the control plane.
    fn operator_patches(&self) -> Value {
        let patch = format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: agent-operator\n\
             spec:\n  template:\n    spec:\n      containers:\n        - name: operator\n\
             \x20         env:\n            - name: ALLOWED_HOSTS\n              value: \"{}\"\n",
            self.allowed_hosts
        );
        json!([{"target": {"kind": "Deployment", "name": "agent-operator"}, "patch": patch}])
    }

    /// The kustomize `patches` a user adds to the agents' path: the
    /// AgentControlPlane at the self-hosted URL, trusted through the CA in
    /// the Secret `internal-ca` (kept out of Git, created by the test).
    fn agents_patches(&self) -> Value {
        let patch = format!(
            "apiVersion: agentserver.dev/v1alpha1\nkind: AgentControlPlane\nmetadata:\n  name: default\n\
             spec:\n  url: {}\n  caBundleSecretRef:\n    name: internal-ca\n    key: ca.crt\n",
            self.url
        );
        json!([{"target": {"kind": "AgentControlPlane", "name": "default"}, "patch": patch}])
    }
}

/// `host:port` of an `http(s)://host:port[/...]` URL.
fn host_port(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    rest.split('/').next().unwrap().to_owned()
}

/// `kubectl apply --server-side` of `docs` on `env`, for real.
fn apply_on(env: &TestEnv, docs: &[Value]) {
    let mut command = kubectl_on(env);
    command.args([
        "apply",
        "--server-side",
        "--field-manager=gitops-test",
        "-f",
        "-",
    ]);
    succeed(command, Some(&list(docs)));
}

/// The operator as the rendered Deployment of `docs` runs it: its
/// arguments and environment, as its ServiceAccount (impersonated), cluster
/// wide. No kubelet runs here, so the test runs the process: the pod's own
/// port becomes a free loopback port, the downward API's `POD_NAME` a fixed
/// name, `POD_NAMESPACE` the Deployment's namespace.
fn start_as_rendered(env: &TestEnv, test: &str, docs: &[Value]) -> OperatorProcess {
    let deployment = docs
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("the operator's Deployment");
    let namespace = deployment["metadata"]["namespace"].as_str().unwrap();
    let pod = &deployment["spec"]["template"]["spec"];
    let service_account = pod["serviceAccountName"].as_str().unwrap();
    let container = &pod["containers"][0];
    let mut args: Vec<String> =
        serde_json::from_value(container["args"].clone()).expect("container args");
    assert_eq!(args.first().map(String::as_str), Some("run"), "{args:?}");
    args.remove(0);
    if let Some(i) = args.iter().position(|a| a == "--metrics-addr") {
        args[i + 1] = format!("127.0.0.1:{}", support::free_port());
    }
    for var in container["env"].as_array().into_iter().flatten() {
        let name = var["name"].as_str().unwrap();
        match name {
            // OperatorOptions sets both (POD_NAMESPACE: the ServiceAccount's).
            "POD_NAME" | "POD_NAMESPACE" => assert!(var["valueFrom"]["fieldRef"].is_object()),
            // As the flag it is the environment of (`--allowed-hosts`), which
            // also stops OperatorOptions from allowing 127.0.0.1 itself.
            "ALLOWED_HOSTS" => args.push(format!(
                "--allowed-hosts={}",
                var["value"].as_str().unwrap()
            )),
            other => panic!("the Deployment sets {other}, which this test does not pass on"),
        }
    }
    OperatorProcess::start_with(
        env.kubeconfig_path(),
        OperatorOptions {
            log_name: test,
            namespaces: vec![],
            extra: args.iter().map(String::as_str).collect(),
            env: vec![("POD_NAME", "agent-operator-0")],
            service_account: Some((namespace, service_account)),
            token: None,
            binary: None,
        },
    )
}

/// Runs one GitOps example end to end on a kube-apiserver of its own.
/// `stages` gives, for the user's self-hosted settings, the three objects
/// of the example (CRDs, operator, agents) as they render.
async fn runs_to_ready(test: &str, stages: impl Fn(&SelfHosted) -> Vec<Vec<Value>>) {
    let env = TestEnv::start(TestEnvOptions::default())
        .await
        .unwrap_or_else(|e| panic!("starting envtest: {:#}", anyhow::Error::from(e)));
    let demo_key = format!("demo-api-key={EXAMPLE_WORKSPACE}");
    let emulator = EmulatorProcess::start_with(
        test,
        &[
            "--step-seconds",
            "0.2",
            "--delete-seconds",
            "0.5",
            "--api-key",
            &demo_key,
        ],
    )
    .await;
    let ca = TestCa::new("gitops-test-ca").expect("a CA");
    let upstream: SocketAddr = host_port(&emulator.base_url).parse().unwrap();
    let front = TlsFront::start(&ca.serving(&["127.0.0.1"]).expect("a cert"), upstream)
        .await
        .expect("the HTTPS front");
    let site = SelfHosted {
        url: format!("{}/api-host", front.url),
        allowed_hosts: format!(
            "{},{}",
            host_port(&front.url),
            host_port(&emulator.base_url)
        ),
    };
    assert!(!site.url.contains(":443/"), "{}", site.url);
    let rendered = stages(&site);
    let [crds, operator, agents] = rendered.as_slice() else {
        panic!("three objects expected, got {}", rendered.len());
    };

    apply_on(&env, crds);
    let mut established = kubectl_on(&env);
    established.args([
        "wait",
        "--for=condition=Established",
        "crd",
        "--all",
        "--timeout=60s",
    ]);
    succeed(established, None);
    apply_on(&env, operator);
    let mut process = start_as_rendered(&env, test, operator);
    let ca_secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "internal-ca", "namespace": "default"},
        "stringData": {"ca.crt": ca.cert_pem()}});
    apply_on(&env, &[ca_secret]);
    apply_on(&env, agents);
    let kinds: Vec<&str> = agents
        .iter()
        .filter_map(|d| d["kind"].as_str())
        .filter(|k| k.starts_with("Agent"))
        .collect();
    for kind in [
        "AgentControlPlane",
        "AgentDeployment",
        "AgentAssistant",
        "AgentCron",
    ] {
        assert!(kinds.contains(&kind), "agents/ has no {kind}: {kinds:?}");
    }
    let mut ready = kubectl_on(&env);
    ready.args([
        "wait",
        "-n",
        "default",
        "--for=condition=Ready",
        "agentcontrolplanes,agentdeployments,agentassistants,agentcrons",
        "--all",
        &format!("--timeout={READY_TIMEOUT}"),
    ]);
    // Off the runtime: the HTTPS front serves on it meanwhile.
    let (stdout, _) = tokio::task::spawn_blocking(move || succeed(ready, None))
        .await
        .expect("kubectl wait");
    assert_eq!(
        stdout.lines().count(),
        kinds.len(),
        "every agent object condition met:\n{stdout}"
    );
    assert!(
        front.forwarded() > 0,
        "the control plane was reached through TLS"
    );

    let exit = process.terminate(Duration::from_secs(60)).await;
    assert!(exit.success(), "the operator exited with {exit}");
    emulator.assert_within_budget(&Budget::default()).await;
    env.stop();
}

/// The Flux example run to Ready: the user's settings are `spec.patches` of
/// its Kustomizations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_flux_example_runs_to_ready_behind_tls() {
    test_support::skip_without!(Envtest);
    runs_to_ready("gitops-flux", |site| {
        let docs = file("deploy/gitops/flux/agent-operator.yaml");
        docs.iter()
            .map(|d| {
                let patches = match d["metadata"]["name"].as_str().unwrap() {
                    "agent-operator" => site.operator_patches(),
                    "agents" => site.agents_patches(),
                    _ => json!([]),
                };
                let images = d["spec"]["images"].clone();
                let images = if images.is_null() { json!([]) } else { images };
                render_patched(&local(d["spec"]["path"].as_str().unwrap()), images, patches)
            })
            .collect()
    })
    .await;
}

/// The Argo CD example run to Ready: the user's settings are
/// `spec.source.kustomize.patches` of its Applications.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_argo_cd_example_runs_to_ready_behind_tls() {
    test_support::skip_without!(Envtest);
    runs_to_ready("gitops-argocd", |site| {
        let docs = file("deploy/gitops/argocd/applications.yaml");
        docs.iter()
            .map(|d| {
                let patches = match d["metadata"]["name"].as_str().unwrap() {
                    "agent-operator" => site.operator_patches(),
                    "agents" => site.agents_patches(),
                    _ => json!([]),
                };
                let path = local(d["spec"]["source"]["path"].as_str().unwrap());
                render_patched(&path, argo_images(d), patches)
            })
            .collect()
    })
    .await;
}
