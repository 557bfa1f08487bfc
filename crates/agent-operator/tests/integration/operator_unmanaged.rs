//! Issue 34, item 3: the unmanaged report. The AgentControlPlane's
//! `status.unmanaged` counts the deployments of its workspace that no
//! AgentDeployment manages, those the service shows `UNUSED`, and the
//! platform's own previews apart, from one paged list of the workspace per
//! drift period (never more, whatever the status writes); `agentctl
//! unmanaged` lists them with the export command of each. Issue 57, items
//! 4 and 5: what an AgentDeployment of another namespace holds is neither
//! reported, listed nor exported, and the guide's export recipe runs as
//! written.

use crate::support;

use std::time::Duration;

use agent_operator::api::control_plane::UnmanagedDeployments;
use agent_operator::api::{AgentControlPlane, AgentDeployment};
use kube::Api;
use serde_json::Value;
use support::{Harness, WORKSPACE, github_create_body, github_deployment, route};

const TIMEOUT: Duration = Duration::from_secs(60);
/// The drift period of the test (`--resync-interval-seconds`).
const PERIOD_S: f64 = 2.0;

/// `status.unmanaged` of the AgentControlPlane `default`.
async fn report(h: &Harness) -> Option<UnmanagedDeployments> {
    let planes: Api<AgentControlPlane> = Api::namespaced(h.client.clone(), &h.ns);
    planes.get("default").await.ok()?.status?.unmanaged
}

/// Deployments seeded through the control plane API (as the UI would): two
/// adopted by AgentDeployments (by id and by name, observed), one shown
/// `UNUSED`, one platform preview, one left alone. The report counts the
/// three outside (the preview apart), the workspace is listed once per
/// period, and `agentctl unmanaged` lists them with their export commands.
#[tokio::test]
async fn the_plane_reports_unmanaged_deployments_once_per_drift_period() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-unmanaged")
        .resync_seconds(PERIOD_S)
        .start()
        .await;
    let mut ids = std::collections::HashMap::new();
    for name in ["by-id", "by-name", "legacy", "idle", "pr-42"] {
        let d =
            h.cp.create_deployment(&github_create_body(name, "main"))
                .await
                .unwrap();
        ids.insert(name, d.id);
    }
    h.emulator
        .force_deployment_status(&ids["idle"], "UNUSED")
        .await;
    h.emulator.mark_preview(&ids["pr-42"]).await;

    let mut by_id = github_deployment("adopted-by-id", "main");
    by_id["spec"]["name"] = "by-id".into();
    by_id["spec"]["deploymentId"] = ids["by-id"].clone().into();
    by_id["spec"]["managementPolicy"] = "Observe".into();
    h.apply(by_id).await;
    let mut by_name = github_deployment("by-name", "main");
    by_name["spec"]["managementPolicy"] = "Observe".into();
    h.apply(by_name).await;

    let found = support::eventually(TIMEOUT, "the unmanaged report", || async {
        report(&h).await.filter(|r| r.count == 2 && r.managed == 2)
    })
    .await;
    assert_eq!(
        (found.count, found.unused, found.previews, found.managed),
        (2, 1, 1, 2),
        "{found:?}"
    );
    assert_eq!(found.names, ["idle", "legacy"]);

    // Both adopted (the one by name after its lookup, a list).
    for name in ["adopted-by-id", "by-name"] {
        support::wait_for(&h.api, name, TIMEOUT, "adopted", |o| {
            o.status.as_ref()?.deployment_id.as_ref().map(|_| ())
        })
        .await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Steady: the plane lists the workspace once per period, whatever its
    // status writes (observedAt changes at each listing); the observed
    // AgentDeployments read their deployment by id and list nothing.
    let mark = h.emulator.request_mark().await;
    let window = Duration::from_secs_f64(PERIOD_S * 5.0);
    tokio::time::sleep(window).await;
    let lists: Vec<u64> = h
        .emulator
        .requests_since(mark)
        .await
        .iter()
        .filter(|r| r.route == route::LIST)
        .map(|r| r.t_ms)
        .collect();
    eprintln!("lists of the workspace in {window:?}: {lists:?}");
    // 5 periods of 2 s ± 25 %: 4 to 7 lists.
    assert!(
        (4..=7).contains(&lists.len()),
        "one list per period: {lists:?}"
    );
    for pair in lists.windows(2) {
        let gap_ms = pair[1] - pair[0];
        // The shortest jittered period is 1.5 s; a little slack for the
        // scheduling of a loaded machine.
        assert!(
            gap_ms as f64 >= PERIOD_S * 1000.0 * 0.7,
            "two lists within one period: {lists:?}"
        );
    }
    let counts = h.emulator.requests().await;
    assert_eq!(counts.count(route::PATCH), 0, "{counts:?}");
    assert_eq!(counts.count(route::CREATE), 5, "only the seeds: {counts:?}");
    let later = report(&h).await.unwrap();
    assert_ne!(later.observed_at, found.observed_at, "listed again");
    assert_eq!((later.count, later.unused, later.previews), (2, 1, 1));

    // agentctl lists the same ones, with the command that exports each.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentctl"))
        .args(["unmanaged", "-n", &h.ns, "-o", "json"])
        .env("AGENT_CONTROL_PLANE_URL", &h.emulator.base_url)
        .env("AGENT_WORKSPACE_ID", WORKSPACE)
        .env("AGENT_API_KEY", support::API_KEY)
        .env("KUBECONFIG", &h.kubeconfig)
        .env_remove("AGENT_CONTROL_PLANE_REGION")
        .output()
        .expect("running agentctl");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains(support::API_KEY));
    let rows: Vec<Value> = serde_json::from_str(&stdout).expect("a JSON list");
    let listed: Vec<(&str, bool)> = rows
        .iter()
        .map(|r| (r["name"].as_str().unwrap(), r["preview"] == true))
        .collect();
    assert_eq!(
        listed,
        [("idle", false), ("legacy", false), ("pr-42", true)]
    );
    assert_eq!(rows[0]["status"], "UNUSED");
    assert_eq!(
        rows[1]["export"],
        format!(
            "agentctl export {} -n {} --control-plane default",
            ids["legacy"], h.ns
        )
    );
}

/// Issue 34, item 2, in the cluster: deployments made through the control
/// plane API (as the UI would), one with a secret, are exported by
/// `agentctl export`, applied to the real API server with the Secret the
/// export asks for, and adopted under `managementPolicy: Observe` reporting
/// no drift (`Drifted=False`, `NoDrift`, an empty `status.drift`), with no
/// write sent to the control plane; the secret value is never exported.
#[tokio::test]
async fn an_exported_workspace_applied_to_the_cluster_reports_no_drift() {
    test_support::skip_without!(Envtest);
    use k8s_openapi::api::core::v1::Secret;
    use support::leaks::FIRST_VALUE;

    let h = Harness::quick("op-export-round-trip")
        .resync_seconds(1.0)
        .start()
        .await;
    let plain = github_create_body("exported-plain", "release");
    let mut with_secret = test_support::manifests::github_create_body("exported-secret", "main");
    with_secret["secrets"] = serde_json::json!([{"name": "OPENAI_API_KEY", "value": FIRST_VALUE}]);
    let with_secret = serde_json::from_value(with_secret).expect("a valid create body");
    let mut ids = Vec::new();
    for body in [&plain, &with_secret] {
        ids.push(h.cp.create_deployment(body).await.unwrap().id);
    }
    h.wait_control_plane_ready(TIMEOUT).await;
    // The service shows a deployment's secrets (their names) once its first
    // revision is DEPLOYED: export what a workspace holds by then.
    support::eventually(TIMEOUT, "the secret's name shown", || async {
        let d = h.cp.get_deployment(&ids[1]).await.ok()?;
        (!d.secrets.is_empty()).then_some(())
    })
    .await;

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentctl"))
        .args(["export", "-n", &h.ns, "--control-plane", "default"])
        .env("AGENT_CONTROL_PLANE_URL", &h.emulator.base_url)
        .env("AGENT_WORKSPACE_ID", WORKSPACE)
        .env("AGENT_API_KEY", support::API_KEY)
        .env("KUBECONFIG", &h.kubeconfig)
        .env_remove("AGENT_CONTROL_PLANE_REGION")
        .output()
        .expect("running agentctl");
    let yaml = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{yaml}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!yaml.contains(FIRST_VALUE), "a secret value was exported");
    let docs = crate::install_manifests::documents(&yaml);
    assert_eq!(docs.len(), 2, "{yaml}");

    // The Secret the export names, with the value the deployment runs with.
    let secret_name = yaml
        .split("create secret generic ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("the export names the Secret to create:\n{yaml}"))
        .to_owned();
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), &h.ns);
    support::apply_json(
        &secrets,
        &secret_name,
        serde_json::json!({
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret_name},
            "stringData": {"OPENAI_API_KEY": FIRST_VALUE}
        }),
    )
    .await;
    let mark = h.emulator.request_mark().await;
    let mut names = Vec::new();
    for doc in docs {
        assert_eq!(doc["spec"]["managementPolicy"], "Observe", "{doc}");
        names.push(doc["metadata"]["name"].as_str().unwrap().to_owned());
        h.apply(doc).await;
    }
    for name in &names {
        let adopted = support::wait_for(&h.api, name, TIMEOUT, "NoDrift", |o| {
            support::condition(o, "Drifted")
                .filter(|c| c.status == "False" && c.reason == "NoDrift")
                .map(|_| o.clone())
        })
        .await;
        let status = adopted.status.unwrap();
        assert!(status.drift.is_empty(), "{name}: {:?}", status.drift);
        assert!(status.deployment_id.is_some(), "{name}");
    }
    // A few drift periods: still no drift, and nothing but reads sent.
    tokio::time::sleep(Duration::from_secs(3)).await;
    for name in &names {
        let obj = h.api.get(name).await.unwrap();
        let drifted = support::condition(&obj, "Drifted").unwrap();
        assert_eq!(
            (drifted.status.as_str(), drifted.reason.as_str()),
            ("False", "NoDrift"),
            "{name}: {drifted:?}"
        );
    }
    let writes: Vec<String> = h
        .emulator
        .requests_since(mark)
        .await
        .into_iter()
        .map(|r| r.route)
        .filter(|r| !r.starts_with("GET "))
        .collect();
    assert!(writes.is_empty(), "Observe sends no write: {writes:?}");
}

/// `agentctl ARGS` against the harness's emulator, reading the cluster of
/// `kubeconfig`: (exit code, stdout, stderr), the API key never printed.
fn agentctl_on(h: &Harness, kubeconfig: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentctl"))
        .args(args)
        .env("AGENT_CONTROL_PLANE_URL", &h.emulator.base_url)
        .env("AGENT_WORKSPACE_ID", WORKSPACE)
        .env("AGENT_API_KEY", support::API_KEY)
        .env("KUBECONFIG", kubeconfig)
        .env_remove("AGENT_CONTROL_PLANE_REGION")
        .output()
        .expect("running agentctl");
    let run = (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        !run.1.contains(support::API_KEY) && !run.2.contains(support::API_KEY),
        "agentctl {args:?} printed the key: {run:?}"
    );
    run
}

/// The names of the rows of `agentctl unmanaged -o json`.
fn unmanaged_names(stdout: &str) -> Vec<String> {
    let rows: Vec<Value> = serde_json::from_str(stdout).expect("a JSON list");
    rows.iter()
        .map(|r| r["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Issue 57, item 4: export and unmanaged see the cluster. Two namespaces
/// on one workspace: the deployment an AgentDeployment of namespace B
/// holds is not counted in A's `status.unmanaged`, not listed by
/// `agentctl unmanaged -n A`, not exported by `agentctl export -n A`, and
/// its export by id is refused naming B's object; a truly unmanaged one
/// still is, in each. A kubeconfig that may read namespace A only gets A's
/// view, with a note that says so.
#[tokio::test]
async fn a_deployment_another_namespace_holds_is_neither_unmanaged_nor_exported() {
    test_support::skip_without!(Envtest);
    let flags = ["--resync-interval-seconds", &PERIOD_S.to_string()];
    let mut h = Harness::quick("op-unmanaged-two-ns")
        .without_operator()
        .start()
        .await;
    h.budget = std::mem::take(&mut h.budget).allowing_operator_flags(&flags);
    let b = h.team("op-unmanaged-b", None).await;
    let mut operator_flags = flags.to_vec();
    operator_flags.extend(["--namespace", b.as_str()]);
    h.operator = Some(h.start_operator(&operator_flags));

    let legacy =
        h.cp.create_deployment(&github_create_body("legacy", "main"))
            .await
            .unwrap()
            .id;
    let api_b: Api<AgentDeployment> = Api::namespaced(h.client.clone(), &b);
    support::apply_json(&api_b, "b-agent", github_deployment("b-agent", "main")).await;
    let held = support::wait_for(&api_b, "b-agent", TIMEOUT, "Ready in B", |o| {
        support::is_ready_now(o).then(|| o.status.as_ref()?.deployment_id.clone())?
    })
    .await;
    let holder = format!("{b}/b-agent");

    // A's plane: the deployment B holds is managed, legacy is not.
    let listed_after = jiff::Timestamp::now();
    let found = support::eventually(TIMEOUT, "A's report after B holds", || async {
        report(&h).await.filter(|r| {
            r.observed_at
                .parse::<jiff::Timestamp>()
                .is_ok_and(|t| t > listed_after)
        })
    })
    .await;
    assert_eq!(
        (found.count, found.managed, found.names.clone()),
        (1, 1, vec!["legacy".to_owned()]),
        "{found:?}"
    );

    let kubeconfig = h.kubeconfig.clone();
    let (code, out, err) = agentctl_on(&h, &kubeconfig, &["unmanaged", "-n", &h.ns, "-o", "json"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(unmanaged_names(&out), ["legacy"], "{err}");

    let (code, yaml, err) = agentctl_on(&h, &kubeconfig, &["export", "-n", &h.ns]);
    assert_eq!(code, 0, "{yaml}{err}");
    let docs = crate::install_manifests::documents(&yaml);
    let exported: Vec<&str> = docs
        .iter()
        .map(|d| d["spec"]["deploymentId"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(exported, [legacy.as_str()], "{yaml}");
    assert!(
        err.contains(&format!(
            "b-agent ({held}) is held by AgentDeployment {holder}"
        )),
        "the left-out one is named with its holder: {err}"
    );

    let (code, out, err) = agentctl_on(&h, &kubeconfig, &["export", &held, "-n", &h.ns]);
    assert_eq!(code, 3, "refused: {out}{err}");
    assert!(out.is_empty(), "nothing exported: {out}");
    assert!(
        err.contains(&format!("is held by AgentDeployment {holder}")) && err.contains("one owner"),
        "{err}"
    );
    let (code, one, err) = agentctl_on(&h, &kubeconfig, &["export", "legacy", "-n", &h.ns]);
    assert_eq!(code, 0, "{one}{err}");
    assert!(one.contains(&legacy), "{one}");

    // A kubeconfig that may read namespace A only: A's view, said so.
    let narrow = narrow_kubeconfig(&h).await;
    let (code, out, err) =
        agentctl_on(&h, narrow.path(), &["unmanaged", "-n", &h.ns, "-o", "json"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(unmanaged_names(&out), ["b-agent", "legacy"], "{err}");
    assert!(
        err.contains("may not list the AgentDeployments of all namespaces")
            && err.contains(&format!("only knows those of namespace {}", h.ns)),
        "{err}"
    );
}

/// A kubeconfig of the shared envtest (in a temporary directory) whose
/// user, `agentctl-narrow`, may get and list the AgentDeployments and
/// AgentControlPlanes of the harness's namespace and nothing else.
async fn narrow_kubeconfig(h: &Harness) -> tempfile::NamedTempFile {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let user = "agentctl-narrow";
    let roles: Api<Role> = Api::namespaced(h.client.clone(), &h.ns);
    support::apply_json(
        &roles,
        user,
        serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": user},
            "rules": [{"apiGroups": ["agentserver.dev"],
                "resources": ["agentdeployments", "agentcontrolplanes"],
                "verbs": ["get", "list"]}],
        }),
    )
    .await;
    let bindings: Api<RoleBinding> = Api::namespaced(h.client.clone(), &h.ns);
    support::apply_json(
        &bindings,
        user,
        serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": user},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": user},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        }),
    )
    .await;
    let file = tempfile::NamedTempFile::new().expect("a temporary file");
    let who = test_support::envtest::Impersonation {
        user: user.to_owned(),
        groups: vec!["system:authenticated".to_owned()],
    };
    crate::common::shared_env()
        .env()
        .write_impersonating_kubeconfig(file.path(), &who)
        .expect("writing the kubeconfig");
    file
}

/// The commands of the `sh` block of docs/AGENTCTL.md's "export" section,
/// without their comments, one a line.
fn export_recipe() -> Vec<String> {
    let guide = std::fs::read_to_string(test_support::repo_root().join("docs/AGENTCTL.md"))
        .expect("reading docs/AGENTCTL.md");
    let section = guide
        .split("\n## export:")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("the export section");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .expect("its sh block");
    block
        .lines()
        .map(|l| l.split(" # ").next().unwrap_or_default().trim().to_owned())
        .filter(|l| !l.is_empty())
        .collect()
}

/// `line` run by `sh` in `dir`, with agentctl and the envtest's kubectl on
/// the `PATH`, the harness's control plane and cluster in the environment,
/// and the guide's namespace `agents` the harness's: (exit code, stdout,
/// stderr).
fn run_doc_line(h: &Harness, dir: &std::path::Path, line: &str) -> (i32, String, String) {
    let kubectl = crate::common::shared_env()
        .env()
        .kubectl_path()
        .expect("kubectl in the envtest assets");
    let agentctl = std::path::Path::new(env!("CARGO_BIN_EXE_agentctl"));
    let path = format!(
        "{}:{}:{}",
        agentctl.parent().unwrap().display(),
        kubectl.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let line = line.replace(" -n agents", &format!(" -n {}", h.ns));
    let out = std::process::Command::new("sh")
        .args(["-c", &line])
        .current_dir(dir)
        .env("PATH", path)
        .env("AGENT_CONTROL_PLANE_URL", &h.emulator.base_url)
        .env("AGENT_WORKSPACE_ID", WORKSPACE)
        .env("AGENT_API_KEY", support::API_KEY)
        .env("KUBECONFIG", &h.kubeconfig)
        .env_remove("AGENT_CONTROL_PLANE_REGION")
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("running sh");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Issue 57, item 5: the `export` recipe of docs/AGENTCTL.md, run as
/// written (`-n agents` made the test's namespace) against the emulator and
/// the envtest API server: the export, the Secrets its comments name
/// created with the values the deployment runs with, `agentctl diff`
/// exiting 0 (it reads those Secrets from the cluster), and the file
/// applied and adopted with no drift and no write sent.
#[tokio::test]
async fn the_export_recipe_of_the_guide_runs_as_written() {
    test_support::skip_without!(Envtest);
    use support::leaks::FIRST_VALUE;
    let h = Harness::quick("op-export-recipe").start().await;
    let mut body = test_support::manifests::github_create_body("recipe-agent", "main");
    body["secrets"] = serde_json::json!([{"name": "OPENAI_API_KEY", "value": FIRST_VALUE}]);
    let id =
        h.cp.create_deployment(&serde_json::from_value(body).expect("a create body"))
            .await
            .unwrap()
            .id;
    support::eventually(TIMEOUT, "the secret's name shown", || async {
        let d = h.cp.get_deployment(&id).await.ok()?;
        (!d.secrets.is_empty()).then_some(())
    })
    .await;
    h.wait_control_plane_ready(TIMEOUT).await;

    let recipe = export_recipe();
    assert!(recipe.len() >= 3, "{recipe:?}");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mark = h.emulator.request_mark().await;
    for line in &recipe {
        let (code, out, err) = run_doc_line(&h, dir.path(), line);
        assert_eq!(code, 0, "`{line}` failed:\n{out}{err}");
        assert!(
            !out.contains(FIRST_VALUE) && !err.contains(FIRST_VALUE),
            "{line}"
        );
        // The Secrets to create, as the export's comments give them: run
        // each with the value the deployment runs with.
        for create in out.lines().filter_map(|l| l.strip_prefix("#   ")) {
            let create = create.replace("=...", &format!("={FIRST_VALUE}"));
            let (code, out, err) = run_doc_line(&h, dir.path(), &create);
            assert_eq!(code, 0, "`{create}` failed:\n{out}{err}");
        }
    }
    let adopted = support::wait_for(&h.api, "recipe-agent", TIMEOUT, "NoDrift", |o| {
        support::condition(o, "Drifted")
            .filter(|c| c.status == "False" && c.reason == "NoDrift")
            .map(|_| o.clone())
    })
    .await;
    assert_eq!(
        adopted.status.and_then(|s| s.deployment_id).as_deref(),
        Some(id.as_str())
    );
    let writes: Vec<String> = h
        .emulator
        .requests_since(mark)
        .await
        .into_iter()
        .map(|r| r.route)
        .filter(|r| !r.starts_with("GET "))
        .collect();
    assert!(writes.is_empty(), "the recipe sends no write: {writes:?}");
}
