//! The data-plane pod policy (docs/SECURITY.md, "What a self-hosted data
//! plane trusts"): the ValidatingAdmissionPolicy of
//! `deploy/components/pod-policy`, as shipped, on the real kube-apiserver.
//! Each hostile `resourceSpec` (a hostPath volume, a privileged container,
//! an added capability, `runAsUser: 0`, an unlisted ServiceAccount or
//! listener) is refused with a message that names the field and the rule, a
//! refused object is not stored (so the operator cannot send a request for
//! it), and a clean self-hosted spec is admitted. The Helm chart renders the
//! same policy and passes the same lists to the operator (`--pod-policy`,
//! enforced there too: `security_policy_operator`), and neither install
//! turns it on by default.
//!
//! The test shares its API server with the others, so it scopes the shipped
//! binding to its own namespace and names its objects after it; the rules
//! themselves are applied unchanged.

use crate::common;
use crate::install_manifests::{self, chart, documents, helm, kubectl, succeed};
use crate::support::AgentDeploymentManifest;

use std::time::{Duration, Instant};

use agent_operator::api::{AgentDeployment, AgentListener};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// The one listener and ServiceAccount the test's platform team allows.
pub(crate) const LISTENER_OK: &str = "0c9a4a0e-6f51-4e43-9d2a-8b7e6f5d4c3b";
const LISTENER_OTHER: &str = "11111111-2222-4333-8444-555555555555";
pub(crate) const SERVICE_ACCOUNT_OK: &str = "agent-runner";
/// A finalizer the test holds an object with, as the operator holds its own.
const HOLD: &str = "test.agentserver.dev/hold";
/// How long the API server may take to load a new policy.
const POLICY_LOAD: Duration = Duration::from_secs(60);

fn find<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in the rendered manifests"))
}

/// `kubectl kustomize deploy/components/pod-policy`.
fn component() -> Vec<Value> {
    let mut command = kubectl();
    command
        .arg("kustomize")
        .arg(test_support::repo_root().join("deploy/components/pod-policy"));
    documents(&succeed(command, None).0)
}

/// Sets the policy's list variable `name` (index `index`, as the JSON
/// patch of `deploy/components/pod-policy/kustomization.yaml` addresses
/// it) to the CEL list literal `cel`.
pub(crate) fn set_list(policy: &mut Value, index: usize, name: &str, cel: &str) {
    let variable = &mut policy["spec"]["variables"][index];
    assert_eq!(variable["name"], name, "the policy's variable {index}");
    variable["expression"] = json!(cel);
}

/// The shipped policy listing [`SERVICE_ACCOUNT_OK`] and [`LISTENER_OK`],
/// its binding scoped to `ns`. Only names, lists and scope change; the
/// rules are as shipped.
fn scoped_policy(ns: &str) -> Vec<Value> {
    let docs = component();
    let name = format!("{ns}-pod-policy");
    let mut policy = find(&docs, "ValidatingAdmissionPolicy").clone();
    policy["metadata"]["name"] = json!(name);
    set_list(
        &mut policy,
        0,
        "serviceAccountNames",
        &format!("['other-runner', '{SERVICE_ACCOUNT_OK}']"),
    );
    set_list(&mut policy, 1, "listenerIds", &format!("['{LISTENER_OK}']"));
    let mut binding = find(&docs, "ValidatingAdmissionPolicyBinding").clone();
    binding["metadata"]["name"] = json!(name);
    binding["spec"]["policyName"] = json!(name);
    binding["spec"]["matchResources"] = json!({
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}
    });
    vec![policy, binding]
}

fn apply_with_kubectl(docs: &[Value]) {
    let mut command = kubectl();
    command.args([
        "apply",
        "--server-side",
        "--field-manager=policy-test",
        "-f",
        "-",
    ]);
    let list = json!({"apiVersion": "v1", "kind": "List", "items": docs});
    succeed(command, Some(&list.to_string()));
}

/// A self-hosted AgentDeployment that the policy admits: a listed listener
/// and ServiceAccount, an emptyDir volume, non-root containers that drop
/// every capability.
pub(crate) fn clean(name: &str) -> Value {
    AgentDeploymentManifest::docker(name, "ghcr.io/acme/agent:1.0.0")
        .source_config("listenerId", LISTENER_OK)
        .source_config(
            "resourceSpec",
            json!({
                    "serviceAccountName": SERVICE_ACCOUNT_OK,
                    "labels": {"team": "support"},
                    "volumes": [{"name": "scratch", "emptyDir": {}}],
                    "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                    "initContainers": [{
                        "name": "init", "image": "registry.example.com/init:1",
                        "securityContext": {
                            "privileged": false, "runAsUser": 1000,
                            "allowPrivilegeEscalation": false,
                            "capabilities": {"drop": ["ALL"]}
                        }
                    }],
                    "sidecars": [{
                        "name": "proxy", "image": "registry.example.com/proxy:1",
                        "securityContext": {"runAsUser": 1000, "runAsNonRoot": true,
                                            "capabilities": {"add": []}}
                    }]
            }),
        )
        .build()
}

/// `base` with `value` at the JSON pointer `at` (the path must exist but
/// for its last segment).
fn with(mut base: Value, at: &str, value: Value) -> Value {
    let (parent, last) = at.rsplit_once('/').expect("a JSON pointer");
    let slot = base
        .pointer_mut(parent)
        .unwrap_or_else(|| panic!("{parent} is not in the manifest"));
    match slot {
        Value::Array(items) => items[last.parse::<usize>().expect("an index")] = value,
        Value::Object(map) => {
            map.insert(last.to_owned(), value);
        }
        other => panic!("{parent} is {other}, not a container"),
    }
    base
}

const RS: &str = "/spec/sourceConfig/resourceSpec";

/// Hostile specs: (what, manifest, the message the API server must give).
pub(crate) fn hostile() -> Vec<(&'static str, Value, String)> {
    vec![
        (
            "hostPath volume",
            with(
                clean("p-hostpath"),
                &format!("{RS}/volumes/0"),
                json!({"name": "host", "hostPath": {"path": "/"}}),
            ),
            "spec.sourceConfig.resourceSpec.volumes[host]: hostPath volumes are forbidden \
             by the data-plane pod policy"
                .to_owned(),
        ),
        (
            "privileged init container",
            with(
                clean("p-privileged"),
                &format!("{RS}/initContainers/0/securityContext/privileged"),
                json!(true),
            ),
            "spec.sourceConfig.resourceSpec.initContainers[init]: securityContext.privileged \
             is forbidden by the data-plane pod policy"
                .to_owned(),
        ),
        (
            "privileged sidecar, as a string",
            with(
                clean("p-privileged-text"),
                &format!("{RS}/sidecars/0/securityContext/privileged"),
                json!("true"),
            ),
            "spec.sourceConfig.resourceSpec.sidecars[proxy]: securityContext.privileged \
             is forbidden"
                .to_owned(),
        ),
        (
            "added capability",
            with(
                clean("p-capability"),
                &format!("{RS}/sidecars/0/securityContext/capabilities/add"),
                json!(["NET_ADMIN"]),
            ),
            "spec.sourceConfig.resourceSpec.sidecars[proxy]: securityContext.capabilities.add \
             is forbidden by the data-plane pod policy"
                .to_owned(),
        ),
        (
            "runAsUser 0",
            with(
                clean("p-root"),
                &format!("{RS}/sidecars/0/securityContext/runAsUser"),
                json!(0),
            ),
            "spec.sourceConfig.resourceSpec.sidecars[proxy]: securityContext.runAsUser must \
             be a user id above 0 (not root) under the data-plane pod policy"
                .to_owned(),
        ),
        (
            "runAsUser \"0\" as a string",
            with(
                clean("p-root-text"),
                &format!("{RS}/initContainers/0/securityContext/runAsUser"),
                json!("0"),
            ),
            "spec.sourceConfig.resourceSpec.initContainers[init]: securityContext.runAsUser \
             must be a user id above 0"
                .to_owned(),
        ),
        (
            "unlisted ServiceAccount",
            with(
                clean("p-sa"),
                &format!("{RS}/serviceAccountName"),
                json!("cluster-admin"),
            ),
            "spec.sourceConfig.resourceSpec.serviceAccountName: cluster-admin is not on the \
             data-plane pod policy's list serviceAccountNames"
                .to_owned(),
        ),
        (
            "unlisted listener",
            with(
                clean("p-listener"),
                "/spec/sourceConfig/listenerId",
                json!(LISTENER_OTHER),
            ),
            format!(
                "spec.sourceConfig.listenerId: {LISTENER_OTHER} is not on the data-plane pod \
                 policy's list listenerIds"
            ),
        ),
        (
            "unlisted listener, by AgentListener",
            json!({
                "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentListener",
                "metadata": {"name": "p-listener-object"},
                "spec": {"listenerId": LISTENER_OTHER}
            }),
            format!(
                "spec.listenerId: {LISTENER_OTHER} is not on the data-plane pod policy's list \
                 listenerIds"
            ),
        ),
    ]
}

fn api_for(client: &kube::Client, ns: &str, manifest: &Value) -> Api<DynamicObject> {
    let resource = if manifest["kind"] == "AgentListener" {
        ApiResource::erase::<AgentListener>(&())
    } else {
        ApiResource::erase::<AgentDeployment>(&())
    };
    Api::namespaced_with(client.clone(), ns, &resource)
}

async fn create(
    client: &kube::Client,
    ns: &str,
    manifest: &Value,
    dry_run: bool,
) -> Result<(), kube::Error> {
    let object: DynamicObject = serde_json::from_value(manifest.clone()).expect("an object");
    let params = PostParams {
        dry_run,
        field_manager: Some("policy-test".to_owned()),
    };
    api_for(client, ns, manifest)
        .create(&params, &object)
        .await
        .map(|_| ())
}

/// The API server's refusal of `result`, or a panic naming `what`.
fn refusal(what: &str, result: Result<(), kube::Error>) -> kube::core::Status {
    match result {
        Err(kube::Error::Api(status)) => *status,
        other => panic!("{what}: not refused by the API server: {other:?}"),
    }
}

#[tokio::test]
async fn the_pod_policy_refuses_each_hostile_resource_spec_and_admits_a_clean_one() {
    test_support::skip_without!(Envtest);
    let env = common::shared_env();
    let client = env.client().await;
    let ns = common::test_namespace(&client, "pod-policy").await;

    // Stored before the policy: it must stay deletable afterwards.
    let legacy = with(
        clean("p-legacy"),
        &format!("{RS}/volumes/0"),
        json!({"name": "host", "hostPath": {"path": "/var/run"}}),
    );
    create(&client, &ns, &legacy, false)
        .await
        .expect("without the policy, a hostPath volume is admitted");

    apply_with_kubectl(&scoped_policy(&ns));
    let policy_name = format!("{ns}-pod-policy");

    // The API server loads a new policy within a second or so: wait until
    // the first hostile spec is refused by it.
    let cases = hostile();
    let start = Instant::now();
    loop {
        match create(&client, &ns, &cases[0].1, true).await {
            Err(kube::Error::Api(status)) if status.message.contains(&policy_name) => break,
            other => assert!(
                start.elapsed() < POLICY_LOAD,
                "the policy was not in force after {POLICY_LOAD:?}: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let mut problems = Vec::new();
    for (what, manifest, message) in &cases {
        let status = refusal(what, create(&client, &ns, manifest, false).await);
        eprintln!("{what}: {} {}", status.code, status.message);
        if status.code != 403 || status.reason != "Forbidden" {
            problems.push(format!(
                "{what}: {} {}, not 403 Forbidden",
                status.code, status.reason
            ));
        }
        if !status.message.contains(message.as_str()) {
            problems.push(format!("{what}: {:?} lacks {message:?}", status.message));
        }
        let name = manifest["metadata"]["name"].as_str().unwrap();
        match api_for(&client, &ns, manifest).get_opt(name).await {
            Ok(None) => {}
            other => problems.push(format!("{what}: stored after the refusal: {other:?}")),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // The clean spec is admitted, and a listed listener in upper case too.
    create(&client, &ns, &clean("p-clean"), false)
        .await
        .expect("a clean self-hosted spec is admitted");
    let listener = json!({
        "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentListener",
        "metadata": {"name": "p-listener-ok"},
        "spec": {"listenerId": LISTENER_OK.to_uppercase()}
    });
    create(&client, &ns, &listener, false)
        .await
        .expect("a listed listener is admitted, whatever its case");

    // An update that brings in a hostile field is refused like a create.
    let deployments: Api<AgentDeployment> = Api::namespaced(client.clone(), &ns);
    let patch =
        json!({"spec": {"sourceConfig": {"resourceSpec": {"serviceAccountName": "root-sa"}}}});
    let status = refusal(
        "serviceAccountName changed to an unlisted one",
        deployments
            .patch("p-clean", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ()),
    );
    assert!(
        status
            .message
            .contains("serviceAccountName: root-sa is not on the data-plane pod policy's list"),
        "{}",
        status.message
    );

    // The object stored before the policy: its metadata still changes (the
    // operator's finalizer and annotations), and so do the fields the policy
    // does not police; a change of a policed field must meet the policy.
    let annotate = json!({"metadata": {"annotations": {"agentserver.dev/note": "kept"},
                                       "finalizers": [HOLD]},
                          "spec": {}});
    deployments
        .patch(
            "p-legacy",
            &PatchParams::default(),
            &Patch::Merge(&annotate),
        )
        .await
        .expect("a metadata change of an object stored before the policy is admitted");
    let image = json!({"spec": {"sourceRevisionConfig": {"imageUri": "ghcr.io/acme/agent:1.0.1"}}});
    deployments
        .patch("p-legacy", &PatchParams::default(), &Patch::Merge(&image))
        .await
        .expect("a change of a field the policy does not police is admitted");
    let policed = json!({"spec": {"sourceConfig": {"resourceSpec": {"labels": {"team": "ops"}}}}});
    let status = refusal(
        "resourceSpec change of an object stored before the policy",
        deployments
            .patch("p-legacy", &PatchParams::default(), &Patch::Merge(&policed))
            .await
            .map(|_| ()),
    );
    assert!(
        status
            .message
            .contains("volumes[host]: hostPath volumes are forbidden"),
        "{}",
        status.message
    );

    // Being deleted, it is never checked: its finalizer goes (as the
    // operator's would), even after a change of a policed field.
    deployments
        .delete("p-legacy", &Default::default())
        .await
        .expect("deleting the object stored before the policy");
    deployments
        .patch("p-legacy", &PatchParams::default(), &Patch::Merge(&policed))
        .await
        .expect("an object being deleted is not checked");
    let release = json!([{"op": "remove", "path": "/metadata/finalizers/0"}]);
    deployments
        .patch(
            "p-legacy",
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(release).unwrap()),
        )
        .await
        .expect("removing the finalizer of an object being deleted is admitted");
    assert!(
        deployments.get_opt("p-legacy").await.unwrap().is_none(),
        "the object stored before the policy is still there"
    );
}

/// `helm template policy-it deploy/helm/agent-operator --namespace ops <args>`.
fn helm_template(args: &[&str]) -> Vec<Value> {
    let mut command = helm();
    command
        .args(["template", "policy-it"])
        .arg(chart())
        .args(["--namespace", "ops"])
        .args(args);
    documents(&succeed(command, None).0)
}

/// The `--pod-policy*` args of the operator Deployment in `docs`.
fn pod_policy_args(docs: &[Value]) -> Vec<String> {
    find(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("the operator's args")
        .iter()
        .filter_map(Value::as_str)
        .filter(|a| a.starts_with("--pod-policy"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn helm_renders_the_same_policy_and_neither_install_turns_it_on_by_default() {
    test_support::skip_without!(Envtest);
    test_support::skip_without!(Tools);
    let admission = |docs: &[Value]| {
        docs.iter()
            .filter(|d| {
                d["apiVersion"]
                    .as_str()
                    .is_some_and(|v| v.starts_with("admissionregistration.k8s.io/"))
            })
            .count()
    };
    assert_eq!(
        admission(&helm_template(&[])),
        0,
        "the chart's default has a policy"
    );
    for overlay in ["cluster-wide", "namespaced", "ha"] {
        assert_eq!(
            admission(&install_manifests::kustomize(overlay)),
            0,
            "{overlay} has a policy"
        );
    }

    let docs = helm_template(&[
        "--set",
        "podPolicy.enabled=true",
        "--set",
        "podPolicy.serviceAccountNames={agent-runner,reporting}",
        "--set",
        &format!("podPolicy.listenerIds={{{LISTENER_OK}}}"),
        "--set",
        "watchNamespaces={team-a,team-b}",
    ]);
    // The operator enforces the same lists itself (--pod-policy), only
    // where the policy denies: not by default, not while it is tried out.
    assert_eq!(
        pod_policy_args(&docs),
        [
            "--pod-policy".to_owned(),
            "--pod-policy-service-account-names=agent-runner,reporting".to_owned(),
            format!("--pod-policy-listener-ids={LISTENER_OK}"),
        ]
    );
    assert_eq!(pod_policy_args(&helm_template(&[])), Vec::<String>::new());
    let tried = helm_template(&[
        "--set",
        "podPolicy.enabled=true",
        "--set",
        "podPolicy.validationActions={Warn,Audit}",
    ]);
    assert_eq!(pod_policy_args(&tried), Vec::<String>::new());
    let shipped = component();
    let name = "policy-it-agent-operator-pod-policy";
    // The same rules; only the lists differ, set from the values.
    let mut expected = find(&shipped, "ValidatingAdmissionPolicy").clone();
    set_list(
        &mut expected,
        0,
        "serviceAccountNames",
        r#"["agent-runner","reporting"]"#,
    );
    set_list(
        &mut expected,
        1,
        "listenerIds",
        &format!(r#"["{LISTENER_OK}"]"#),
    );
    let policy = find(&docs, "ValidatingAdmissionPolicy");
    assert_eq!(
        policy["spec"], expected["spec"],
        "the chart's policy differs from deploy/components/pod-policy"
    );
    // Nothing outside the policy that could be missing: no parameters.
    for spec in [&policy["spec"], &expected["spec"]] {
        assert!(spec.get("paramKind").is_none(), "{spec}");
    }
    let binding = &find(&docs, "ValidatingAdmissionPolicyBinding")["spec"];
    assert_eq!(binding["policyName"], name);
    assert_eq!(binding["validationActions"], json!(["Deny"]));
    assert!(binding.get("paramRef").is_none(), "{binding}");
    assert!(
        find(&shipped, "ValidatingAdmissionPolicyBinding")["spec"]
            .get("paramRef")
            .is_none()
    );
    // Scoped to the watched namespaces, unless a selector is given.
    assert_eq!(
        binding["matchResources"],
        json!({"namespaceSelector": {"matchExpressions": [{
            "key": "kubernetes.io/metadata.name", "operator": "In",
            "values": ["team-a", "team-b"]}]}})
    );
    let selected = helm_template(&[
        "--set",
        "podPolicy.enabled=true",
        "--set",
        "watchNamespaces={team-a}",
        "--set",
        "podPolicy.namespaceSelector.matchLabels.policy=on",
    ]);
    assert_eq!(
        find(&selected, "ValidatingAdmissionPolicyBinding")["spec"]["matchResources"],
        json!({"namespaceSelector": {"matchLabels": {"policy": "on"}}})
    );
    let everywhere = helm_template(&["--set", "podPolicy.enabled=true"]);
    assert!(
        find(&everywhere, "ValidatingAdmissionPolicyBinding")["spec"]
            .get("matchResources")
            .is_none()
    );
    assert!(!docs.iter().any(|d| d["kind"] == "ConfigMap"));
}
