//! The built `agentctl` binary against an in-process emulator: `apply`
//! taking a deployment to DEPLOYED, the second `apply` sending no mutation,
//! `diff` and its exit codes, the resource commands in every output format,
//! redeploy, rollback, delete, and the exit code of each kind of failure.
//! Every run is checked for the API key and the secret values in its output.

use std::path::{Path, PathBuf};
use std::time::Duration;

use control_plane_emulator::{
    self as emulator, ApiKey, DEMO_WORKSPACE_ID, EmulatorConfig, Outcome, RunningEmulator,
    ScenarioField, ScenarioRule,
};
use serde_json::Value;

/// The key the emulator accepts: distinctive, so that any echo is found.
const KEY: &str = "cli-test-key-7f3a9c2e5b";
/// A secret value of the test manifests: never in any output.
const SECRET_VALUE: &str = "sk-cli-test-value-41d2";
/// Fast polls: the emulator's steps are short.
const POLL: &str = "0.05";

async fn emulator(scenarios: Vec<ScenarioRule>) -> RunningEmulator {
    emulator::spawn(EmulatorConfig {
        api_keys: vec![ApiKey::new(KEY, DEMO_WORKSPACE_ID)],
        step_duration: Duration::from_millis(60),
        delete_duration: Duration::from_millis(200),
        scenarios,
        ..Default::default()
    })
    .await
    .unwrap()
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// A kubeconfig path that does not exist: agentctl runs as without a
/// cluster, never on the developer's current context.
fn no_cluster() -> PathBuf {
    std::env::temp_dir().join("agentctl-cli-tests-no-cluster/kubeconfig")
}

/// Runs agentctl with the control plane of `url` in its environment.
async fn agentctl(url: &str, args: &[&str]) -> Run {
    agentctl_with(url, KEY, args).await
}

async fn agentctl_with(url: &str, key: &str, args: &[&str]) -> Run {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentctl"))
        .args(args)
        .env("KUBECONFIG", no_cluster())
        .env("AGENT_CONTROL_PLANE_URL", url)
        .env("AGENT_WORKSPACE_ID", DEMO_WORKSPACE_ID)
        .env("AGENT_API_KEY", key)
        .env_remove("AGENT_CONTROL_PLANE_REGION")
        .env_remove("RUST_LOG")
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    let run = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    for secret in [KEY, SECRET_VALUE] {
        assert!(
            !run.stdout.contains(secret) && !run.stderr.contains(secret),
            "agentctl {args:?} printed a secret\n{run:?}"
        );
    }
    run
}

/// `agentctl apply -f FILE --wait` with fast polls.
async fn apply_wait(url: &str, file: &str) -> Run {
    agentctl(
        url,
        &["apply", "-f", file, "--wait", "--poll-interval", POLL],
    )
    .await
}

/// A Secret and an AgentDeployment named `name`, built from `repo_ref`.
fn manifest(name: &str, repo_ref: &str, secret: &str) -> String {
    format!(
        r#"# a Secret and the deployment that reads it
apiVersion: v1
kind: Secret
metadata:
  name: {name}-env
  namespace: default
stringData:
  OPENAI_API_KEY: {secret}
---
apiVersion: agentserver.dev/v1alpha1
kind: AgentDeployment
metadata:
  name: {name}
  namespace: default
spec:
  source: github
  sourceConfig:
    integrationId: 7d8b2f5e-3c1a-4e2b-9f6d-2a1b3c4d5e6f
    repoUrl: https://github.com/acme/{name}
    deploymentType: dev
    buildOnPush: false
    resourceSpec:
      minScale: 1
      maxScale: 2
  sourceRevisionConfig:
    repoRef: {repo_ref}
    langgraphConfigPath: langgraph.json
  secrets:
    - name: OPENAI_API_KEY
      valueFrom:
        secretKeyRef:
          name: {name}-env
          key: OPENAI_API_KEY
    - name: LOG_LEVEL
      value: info
"#
    )
}

fn write(dir: &Path, file: &str, text: &str) -> PathBuf {
    let p = dir.join(file);
    std::fs::write(&p, text).unwrap();
    p
}

/// The routes of the emulator's request log from entry `from` on.
fn routes(emu: &RunningEmulator, from: usize) -> Vec<String> {
    let log = emu.state().request_log();
    log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .skip(from)
        .map(|e| e["route"].as_str().unwrap().to_owned())
        .collect()
}

fn log_len(emu: &RunningEmulator) -> usize {
    emu.state().request_log()["entries"]
        .as_array()
        .unwrap()
        .len()
}

fn mutations(routes: &[String]) -> Vec<&String> {
    routes.iter().filter(|r| !r.starts_with("GET ")).collect()
}

#[tokio::test]
async fn apply_deploys_then_is_unchanged_then_patches_and_diff_tells_before() {
    let emu = emulator(vec![]).await;
    let url = emu.base_url();
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "agent.yaml",
        &manifest("support-agent", "main", SECRET_VALUE),
    );
    let file = file.to_str().unwrap();

    // Nothing there yet: diff would create (exit 1), with no secret value.
    let run = agentctl(&url, &["diff", "-f", file]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout.contains("would create deployment support-agent"),
        "{run:?}"
    );
    assert!(run.stdout.contains("<set>"), "{run:?}");
    assert!(mutations(&routes(&emu, 0)).is_empty());

    let run = apply_wait(&url, file).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("agentdeployment/support-agent created"),
        "{run:?}"
    );
    assert!(run.stdout.contains(": DEPLOYED ("), "{run:?}");
    assert!(
        run.stdout.contains("agentdeployment/support-agent ready"),
        "{run:?}"
    );
    assert_eq!(mutations(&routes(&emu, 0)), ["POST /v2/deployments"]);

    // The same file again: reads only.
    let before = log_len(&emu);
    let run = apply_wait(&url, file).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .contains("agentdeployment/support-agent unchanged"),
        "{run:?}"
    );
    assert!(run.stdout.contains("is DEPLOYED"), "{run:?}");
    let sent = routes(&emu, before);
    assert!(mutations(&sent).is_empty(), "{sent:?}");
    let run = agentctl(&url, &["diff", "-f", file]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("no changes"), "{run:?}");

    // A new ref and a new secret value: diff shows the PATCH, names only.
    let changed = manifest("support-agent", "release-2", "sk-cli-test-value-new");
    let file2 = write(dir.path(), "agent2.yaml", &changed);
    let file2 = file2.to_str().unwrap();
    let before = log_len(&emu);
    let run = agentctl(&url, &["diff", "-f", file2]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout.contains("would patch deployment support-agent"),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("\"repo_ref\": \"release-2\""),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("<changed>") && run.stdout.contains("<unchanged>"),
        "{run:?}"
    );
    assert!(!run.stdout.contains("sk-cli-test-value-new"), "{run:?}");
    assert!(mutations(&routes(&emu, before)).is_empty());

    let run = apply_wait(&url, file2).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("agentdeployment/support-agent patched"),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("source_revision_config, secrets"),
        "{run:?}"
    );
    assert!(!run.stdout.contains("sk-cli-test-value-new"), "{run:?}");
    assert_eq!(
        mutations(&routes(&emu, before)),
        ["PATCH /v2/deployments/{deployment_id}"]
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn resource_commands_redeploy_rollback_and_delete() {
    let emu = emulator(vec![]).await;
    let url = emu.base_url();
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "a.yaml",
        &manifest("ops-agent", "main", SECRET_VALUE),
    );
    let run = agentctl(&url, &["apply", "-f", file.to_str().unwrap()]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("revisions wait ops-agent"), "{run:?}");
    let run = agentctl(
        &url,
        &["revisions", "wait", "ops-agent", "--poll-interval", POLL],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("deployment/ops-agent ready"), "{run:?}");

    let run = agentctl(&url, &["deployments", "list"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.starts_with("NAME"), "{run:?}");
    assert!(run.stdout.contains("ops-agent"), "{run:?}");
    let run = agentctl(&url, &["deployments", "list", "-o", "json"]).await;
    let list: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(list[0]["name"], "ops-agent");
    assert_eq!(list[0]["secrets"][0]["value"], "<hidden>");
    let id = list[0]["id"].as_str().unwrap().to_owned();
    let first = list[0]["latest_revision_id"].as_str().unwrap().to_owned();
    let run = agentctl(&url, &["deployments", "list", "--output", "yaml"]).await;
    assert!(run.stdout.contains("name: ops-agent"), "{run:?}");
    let run = agentctl(&url, &["deployments", "get", "ops-agent"]).await;
    assert!(
        run.stdout.contains("id:") && run.stdout.contains(&id),
        "{run:?}"
    );
    assert!(run.stdout.contains("OPENAI_API_KEY, LOG_LEVEL"), "{run:?}");
    let run = agentctl(&url, &["deployments", "get", &id, "-o", "yaml"]).await;
    assert!(run.stdout.contains("value: <hidden>"), "{run:?}");

    let run = agentctl(&url, &["logs", "ops-agent"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        !run.stdout.trim().is_empty(),
        "the server log has lines: {run:?}"
    );
    let run = agentctl(
        &url,
        &["logs", "ops-agent", "--build", "--revision", &first],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        !run.stdout.trim().is_empty(),
        "the build log has lines: {run:?}"
    );

    // --follow of a build log ends with its revision.
    let run = agentctl(&url, &["redeploy", "ops-agent"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let run = agentctl(
        &url,
        &[
            "logs",
            "ops-agent",
            "--build",
            "--follow",
            "--interval",
            POLL,
        ],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    let run = agentctl(
        &url,
        &["revisions", "wait", "ops-agent", "--poll-interval", POLL],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");

    let run = agentctl(
        &url,
        &["redeploy", "ops-agent", "--wait", "--poll-interval", POLL],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("new revision"), "{run:?}");
    let run = agentctl(
        &url,
        &[
            "rollback",
            "ops-agent",
            "--to",
            &first,
            "--wait",
            "--poll-interval",
            POLL,
        ],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .contains(&format!("configuration of revision {first}")),
        "{run:?}"
    );

    let run = agentctl(&url, &["revisions", "list", "ops-agent", "-o", "json"]).await;
    let revisions: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(revisions.as_array().unwrap().len(), 4, "{run:?}");
    let newest = revisions[0]["id"].as_str().unwrap().to_owned();
    let run = agentctl(&url, &["revisions", "list", "ops-agent"]).await;
    assert!(run.stdout.starts_with("ID"), "{run:?}");
    // One serves; the three earlier DEPLOYED revisions read REPLACED, as the
    // official CLIs list them, each with the commit the platform built.
    assert_eq!(run.stdout.matches("DEPLOYED").count(), 1, "{run:?}");
    assert_eq!(run.stdout.matches("REPLACED").count(), 3, "{run:?}");
    let serving = run.stdout.lines().find(|l| l.starts_with(&newest)).unwrap();
    assert!(serving.contains("DEPLOYED  *"), "{run:?}");
    // The emulator builds `agents:<commit>`: each row's COMMIT/DIGEST is
    // that commit, in the 7 characters of kubectl's SERVING column.
    for line in run.stdout.lines().skip(1) {
        let commit = line.split("agents:").nth(1).unwrap_or_default();
        let commit = &commit[..commit.len().min(7)];
        assert_eq!(commit.len(), 7, "{line}");
        assert_eq!(line.matches(commit).count(), 2, "{line}");
    }
    let run = agentctl(&url, &["revisions", "get", "ops-agent", &newest]).await;
    assert!(
        run.stdout.contains("active:") && run.stdout.contains("true"),
        "{run:?}"
    );
    let run = agentctl(
        &url,
        &["revisions", "get", "ops-agent", &first, "-o", "yaml"],
    )
    .await;
    assert!(run.stdout.contains("status: DEPLOYED"), "{run:?}");

    let run = agentctl(
        &url,
        &[
            "deployments",
            "delete",
            "ops-agent",
            "--wait",
            "--poll-interval",
            POLL,
        ],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("deleted"), "{run:?}");
    let run = agentctl(&url, &["deployments", "get", &id]).await;
    assert_eq!(run.code, 3, "{run:?}");
    assert!(run.stderr.contains(&id), "{run:?}");
    let run = agentctl(&url, &["deployments", "delete", "ops-agent"]).await;
    assert_eq!(run.code, 3, "{run:?}");
    let run = agentctl(
        &url,
        &["deployments", "delete", "ops-agent", "--ignore-not-found"],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    emu.shutdown().await;
}

#[tokio::test]
async fn each_kind_of_failure_has_its_exit_code() {
    let emu = emulator(vec![
        ScenarioRule {
            field: ScenarioField::RepoRef,
            equals: "broken".into(),
            outcome: Outcome::BuildFailed,
            log: vec![
                "ERROR: No matching distribution found for langgraph==99".into(),
                format!("ERROR: the token {SECRET_VALUE} was refused"),
            ],
        },
        ScenarioRule {
            field: ScenarioField::RepoRef,
            equals: "stuck".into(),
            outcome: Outcome::Stuck,
            log: vec![],
        },
    ])
    .await;
    let url = emu.base_url();
    let dir = tempfile::tempdir().unwrap();
    let path = |f: &str, text: &str| write(dir.path(), f, text).to_str().unwrap().to_owned();

    // Input errors: exit 2, nothing sent.
    let bad_yaml = path("bad.yaml", "apiVersion: [\n");
    let reserved = path(
        "reserved.yaml",
        &manifest("bad-agent", "main", SECRET_VALUE)
            .replace("name: LOG_LEVEL", "name: LANGCHAIN_API_KEY"),
    );
    let no_secret = path(
        "nosecret.yaml",
        manifest("lonely-agent", "main", SECRET_VALUE)
            .split("---")
            .nth(1)
            .unwrap(),
    );
    for (file, says) in [
        (&bad_yaml, "not valid YAML"),
        (&reserved, "LANGCHAIN_API_KEY is reserved"),
        (&no_secret, "Secret default/lonely-agent-env not found"),
    ] {
        let run = agentctl(&url, &["apply", "-f", file]).await;
        assert_eq!(run.code, 2, "{run:?}");
        assert!(run.stderr.contains(says), "{run:?}");
    }
    let run = agentctl(&url, &["apply", "-f", &no_secret, "--secret-from-env"]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("OPENAI_API_KEY (its key) is not set"),
        "{run:?}"
    );
    assert_eq!(log_len(&emu), 0, "input errors send nothing");

    // --secret-from-env: the value comes from the variable named like the key.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentctl"))
        .args(["apply", "-f", &no_secret, "--secret-from-env"])
        .env("KUBECONFIG", no_cluster())
        .env("AGENT_CONTROL_PLANE_URL", &url)
        .env("AGENT_WORKSPACE_ID", DEMO_WORKSPACE_ID)
        .env("AGENT_API_KEY", KEY)
        .env("OPENAI_API_KEY", SECRET_VALUE)
        .output()
        .await
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        !text.contains(SECRET_VALUE) && !text.contains(KEY),
        "{text}"
    );
    let store = emu.state().dump().to_string();
    assert!(store.contains(SECRET_VALUE), "the value was sent");

    // A wrong key: refused, exit 3; the key is not echoed (checked by agentctl_with).
    let good = path("good.yaml", &manifest("fine-agent", "main", SECRET_VALUE));
    let run = agentctl_with(&url, "wrong-key-9d8e7f6a", &["apply", "-f", &good]).await;
    assert_eq!(run.code, 3, "{run:?}");
    assert!(run.stderr.contains("401"), "{run:?}");
    assert!(!run.stderr.contains("wrong-key-9d8e7f6a"), "{run:?}");

    // Nothing listening: exit 4.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let run = agentctl(&closed, &["deployments", "list", "--request-timeout", "2"]).await;
    assert_eq!(run.code, 4, "{run:?}");

    // A build that fails: exit 1, and the failure is named.
    let broken = path(
        "broken.yaml",
        &manifest("broken-agent", "broken", SECRET_VALUE),
    );
    let run = apply_wait(&url, &broken).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout.contains("agentdeployment/broken-agent failed"),
        "{run:?}"
    );
    assert!(run.stdout.contains("BUILD_FAILED"), "{run:?}");
    assert!(run.stdout.contains("lines of the build log:"), "{run:?}");
    assert!(run.stdout.contains("langgraph==99"), "{run:?}");
    assert!(
        run.stdout.contains("the token [REDACTED] was refused"),
        "{run:?}"
    );
    // The service reads secrets back as [] before the first revision: the
    // values to redact come from the manifest.
    let run = agentctl(
        &url,
        &["logs", "broken-agent", "--build", "--file", &broken],
    )
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("ERROR") && run.stdout.contains("langgraph==99"),
        "{run:?}"
    );
    assert!(run.stdout.contains("[REDACTED]"), "{run:?}");

    // A revision that never ends: exit 5 after --timeout.
    let stuck = path(
        "stuck.yaml",
        &manifest("stuck-agent", "stuck", SECRET_VALUE),
    );
    let run = agentctl(
        &url,
        &[
            "apply",
            "-f",
            &stuck,
            "--wait",
            "--timeout",
            "1",
            "--poll-interval",
            POLL,
        ],
    )
    .await;
    assert_eq!(run.code, 5, "{run:?}");
    assert!(run.stdout.contains("timed out"), "{run:?}");
    emu.shutdown().await;
}

#[tokio::test]
async fn completions_and_help() {
    let run = agentctl("http://127.0.0.1:9", &["completions", "bash"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("_agentctl()"), "{run:?}");
    assert!(run.stdout.contains("rollback"), "{run:?}");
    // What a rollback does on a deployment the operator manages.
    let run = agentctl("http://127.0.0.1:9", &["rollback", "--help"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    for words in [
        "re-applies the spec",
        "agentserver.dev/paused=\"true\"",
        "drift check",
    ] {
        assert!(run.stdout.contains(words), "{words}: {run:?}");
    }
    let run = agentctl("http://127.0.0.1:9", &["apply", "--help"]).await;
    assert!(run.stdout.contains("Exit codes:"), "{run:?}");
    assert!(run.stdout.contains("AGENT_API_KEY"), "{run:?}");
    let run = agentctl("http://127.0.0.1:9", &["deployments", "list", "-o", "xml"]).await;
    assert_eq!(run.code, 2, "{run:?}");
}

#[tokio::test]
async fn listeners_list_and_get_and_apply_from_stdin() {
    let listener = "6f1c2a3e-0000-4000-8000-000000000009";
    let emu = emulator::spawn(EmulatorConfig {
        api_keys: vec![ApiKey::new(KEY, DEMO_WORKSPACE_ID)],
        step_duration: Duration::from_millis(60),
        listeners: vec![emulator::ListenerSeed {
            workspace_id: DEMO_WORKSPACE_ID.into(),
            id: listener.parse().unwrap(),
            compute_id: "cluster-a".into(),
            k8s_namespaces: Some(vec!["agents".into()]),
        }],
        ..Default::default()
    })
    .await
    .unwrap();
    let url = emu.base_url();
    let run = agentctl(&url, &["listeners", "list"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("cluster-a") && run.stdout.contains("agents"),
        "{run:?}"
    );
    let run = agentctl(&url, &["listeners", "get", listener, "-o", "json"]).await;
    let l: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(l["compute_id"], "cluster-a");

    // A file on stdin, placed on the listener through an AgentListener of
    // the same stream; a namespace the listener does not serve is refused
    // before any create (the operator's placement check).
    let placed = |ns: &str| {
        format!(
            "apiVersion: agentserver.dev/v1alpha1\nkind: AgentListener\nmetadata: {{name: edge}}\n\
             spec: {{listenerId: {listener}}}\n---\n{}",
            manifest("edge-agent", "main", SECRET_VALUE).replace(
                "    buildOnPush: false\n",
                &format!(
                    "    buildOnPush: false\n    listenerRef: {{name: edge}}\n    \
                     listenerConfig: {{k8sNamespace: {ns}}}\n"
                ),
            )
        )
    };
    for (ns, code, says) in [
        ("elsewhere", 3, "not among the k8sNamespaces"),
        ("agents", 0, "agentdeployment/edge-agent created"),
    ] {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentctl"))
            .args(["apply", "-f", "-"])
            .env("KUBECONFIG", no_cluster())
            .env("AGENT_CONTROL_PLANE_URL", &url)
            .env("AGENT_WORKSPACE_ID", DEMO_WORKSPACE_ID)
            .env("AGENT_API_KEY", KEY)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        {
            use tokio::io::AsyncWriteExt;
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(placed(ns).as_bytes()).await.unwrap();
        }
        let out = child.wait_with_output().await.unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(code), "{ns}: {text}");
        assert!(text.contains(says), "{ns}: {text}");
        assert!(
            !text.contains(KEY) && !text.contains(SECRET_VALUE),
            "{text}"
        );
    }
    let run = agentctl(&url, &["deployments", "get", "edge-agent"]).await;
    assert!(run.stdout.contains(listener), "{run:?}");
    emu.shutdown().await;
}

/// `apply --wait` with `spec.verify`: once DEPLOYED, the operator's checks
/// run on the deployment's agent server (the emulator's built-in one, which
/// wants the organization's key: the control plane key is sent, since the
/// control plane chose the URL); a deployment whose agent server does not
/// answer as expected is not ready (exit 1).
#[tokio::test]
async fn apply_wait_verifies_the_agent_server_like_the_operator() {
    let emu = emulator(Vec::new()).await;
    let url = emu.base_url();
    let dir = tempfile::tempdir().unwrap();
    let verify = |assistant: &str| {
        format!(
            "  verify:\n    assistants:\n      graphId: agent\n    run:\n      assistantId: {assistant}\n      \
             input:\n        messages:\n          - role: user\n            content: hello-verify\n      \
             streamMode: updates\n      expect:\n        event: updates\n        contains: hello-verify\n"
        )
    };
    let good = manifest("verified-app", "main", SECRET_VALUE) + &verify("agent");
    let file = write(dir.path(), "good.yaml", &good);
    let run = apply_wait(&url, file.to_str().unwrap()).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .contains("agentdeployment/verified-app verified at http")
            && run.stdout.contains("1 assistant(s), run Passed"),
        "{run:?}"
    );

    let bad = manifest("unverified-app", "main", SECRET_VALUE) + &verify("no-such-assistant");
    let file = write(dir.path(), "bad.yaml", &bad);
    let run = apply_wait(&url, file.to_str().unwrap()).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout
            .contains("agentdeployment/unverified-app not verified (AssistantNotFound)"),
        "{run:?}"
    );
    // Without --wait nothing is verified: one create, no agent server call.
    let run = agentctl(&url, &["apply", "-f", file.to_str().unwrap()]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        !run.stdout.contains(" verified at") && !run.stdout.contains("not verified"),
        "{run:?}"
    );
    emu.shutdown().await;
}

/// `sourceConfig.integrationRef` in `agentctl apply` goes through the
/// operator's own check before a create (`integrations::resolve`): an
/// unknown integration and a repository it cannot read are refused with the
/// operator's messages and exit code 3, with no create; a readable one is
/// created with the integration's id.
#[tokio::test]
async fn apply_resolves_integration_ref_like_the_operator() {
    let integration = "5b0c7a1e-0000-4000-8000-00000000000a";
    let emu = emulator::spawn(EmulatorConfig {
        api_keys: vec![ApiKey::new(KEY, DEMO_WORKSPACE_ID)],
        step_duration: Duration::from_millis(60),
        integrations: vec![emulator::IntegrationSeed {
            workspace_id: DEMO_WORKSPACE_ID.into(),
            id: integration.parse().unwrap(),
            name: "acme".into(),
            repos: vec!["https://github.com/acme/readable-agent".into()],
        }],
        ..Default::default()
    })
    .await
    .unwrap();
    let url = emu.base_url();
    let dir = tempfile::tempdir().unwrap();
    let by_ref = |name: &str, account: &str| {
        manifest(name, "main", SECRET_VALUE).replace(
            "    integrationId: 7d8b2f5e-3c1a-4e2b-9f6d-2a1b3c4d5e6f\n",
            &format!("    integrationRef: {{name: {account}}}\n"),
        )
    };
    for (name, account, code, says) in [
        (
            "unknown-agent",
            "nobody",
            3,
            "no GitHub integration named \"nobody\" (the workspace has: acme)",
        ),
        (
            "hidden-agent",
            "acme",
            3,
            "repoUrl https://github.com/acme/hidden-agent is not among the 1 repositories",
        ),
        (
            "readable-agent",
            "ACME",
            0,
            "agentdeployment/readable-agent created",
        ),
    ] {
        let before = log_len(&emu);
        let file = write(dir.path(), &format!("{name}.yaml"), &by_ref(name, account));
        let run = agentctl(&url, &["apply", "-f", file.to_str().unwrap()]).await;
        assert_eq!(run.code, code, "{name}: {run:?}");
        assert!(
            run.stdout.contains(says) || run.stderr.contains(says),
            "{name}: {run:?}"
        );
        let sent = routes(&emu, before);
        let creates = sent.iter().filter(|r| *r == "POST /v2/deployments").count();
        assert_eq!(creates, usize::from(code == 0), "{name}: {sent:?}");
    }
    let run = agentctl(
        &url,
        &["deployments", "get", "readable-agent", "-o", "json"],
    )
    .await;
    let d: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(d["source_config"]["integration_id"], integration, "{run:?}");
    emu.shutdown().await;
}

/// Adoption that tells the truth, from the command line (issue "Day two in
/// GitOps", item 3): a file whose `repoUrl` and `deploymentType` differ from
/// the deployment of the same name is not "no changes": `diff` names each
/// field with both values and exits 1, `apply` refuses with the same
/// message (exit 3), and nothing is sent but reads.
#[tokio::test]
async fn diff_shows_and_apply_refuses_a_difference_the_control_plane_cannot_converge() {
    let emu = emulator(vec![]).await;
    let url = emu.base_url();
    let dir = tempfile::tempdir().unwrap();
    let first = write(
        dir.path(),
        "agent.yaml",
        &manifest("support-agent", "main", SECRET_VALUE),
    );
    let run = apply_wait(&url, first.to_str().unwrap()).await;
    assert_eq!(run.code, 0, "{run:?}");
    let other = manifest("support-agent", "main", SECRET_VALUE)
        .replace(
            "repoUrl: https://github.com/acme/support-agent",
            "repoUrl: https://github.com/acme/echo-agent",
        )
        .replace("deploymentType: dev", "deploymentType: prod");
    let file = write(dir.path(), "other.yaml", &other);
    let file = file.to_str().unwrap();
    let before = log_len(&emu);
    let want = [
        "sourceConfig.repoUrl: spec \"https://github.com/acme/echo-agent\", remote \"https://github.com/acme/support-agent\"",
        "sourceConfig.deploymentType: spec \"prod\", remote \"dev\"",
    ];
    let run = agentctl(&url, &["diff", "-f", file]).await;
    assert_eq!(run.code, 1, "{run:?}");
    for w in want {
        assert!(run.stdout.contains(w), "{w:?}: {run:?}");
    }
    let run = agentctl(&url, &["apply", "-f", file]).await;
    assert_eq!(run.code, 3, "{run:?}");
    for w in want {
        assert!(run.stderr.contains(w), "{w:?}: {run:?}");
    }
    let sent = routes(&emu, before);
    assert!(mutations(&sent).is_empty(), "{sent:?}");
}

/// agentctl reads a file as the API server does (issue "Every shipped
/// manifest works through every entry point", item 1): the shipped example
/// with an empty `sourceConfig:` (YAML null) deploys with `apply --wait`,
/// and a mistyped field is refused with its path (exit 2), nothing sent.
#[tokio::test]
async fn agentctl_reads_nulls_as_absent_and_refuses_unknown_fields() {
    let emu = emulator(vec![]).await;
    let url = emu.base_url();
    let example = test_support::repo_root().join("examples/agent-deployment-docker.yaml");
    let run = apply_wait(&url, example.to_str().unwrap()).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains(": DEPLOYED ("), "{run:?}");

    let dir = tempfile::tempdir().unwrap();
    let typo = std::fs::read_to_string(&example)
        .unwrap()
        .replace("imageUri:", "imageURI:");
    let file = write(dir.path(), "typo.yaml", &typo);
    let before = log_len(&emu);
    let run = agentctl(&url, &["diff", "-f", file.to_str().unwrap()]).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("unknown field spec.sourceRevisionConfig.imageURI"),
        "{run:?}"
    );
    assert_eq!(log_len(&emu), before, "nothing sent");
}

/// agentctl configured as the platform's own tools are (issue "A platform
/// team installs it…", item 6): a self-hosted LangSmith behind a private CA
/// on a port other than 443, named by `LANGSMITH_ENDPOINT` (its `/api/v1`
/// API URL; the control plane is derived under `/api-host`),
/// `LANGSMITH_WORKSPACE_ID` and `LANGSMITH_API_KEY`; `--ca-bundle` trusts
/// the CA, and without it nothing reaches the control plane; a bearer token
/// works in place of the key; a key and a token together are refused.
#[tokio::test]
async fn agentctl_reads_the_platforms_variables_a_private_ca_and_a_bearer_token() {
    use test_support::tls::{TestCa, TlsFront};
    let emu = emulator(vec![]).await;
    let upstream: std::net::SocketAddr = emu
        .base_url()
        .trim_start_matches("http://")
        .parse()
        .unwrap();
    let ca = TestCa::new("agentctl-test-ca").unwrap();
    let serving = ca.serving(&["127.0.0.1", "localhost"]).unwrap();
    let front = TlsFront::start(&serving, upstream).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bundle = write(dir.path(), "ca.pem", &ca.cert_pem());
    let bundle = bundle.to_str().unwrap();
    let endpoint = format!("{}/api/v1", front.url);
    let run = |env: Vec<(&'static str, String)>, args: Vec<&'static str>| {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentctl"));
        for (name, _) in std::env::vars() {
            if name.starts_with("AGENT_") || name.starts_with("LANGSMITH_") {
                cmd.env_remove(name);
            }
        }
        cmd.envs(env)
            .args(args)
            .env("KUBECONFIG", no_cluster())
            .env_remove("RUST_LOG")
            .kill_on_drop(true);
        async move {
            let out = cmd.output().await.unwrap();
            Run {
                code: out.status.code().unwrap_or(-1),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            }
        }
    };
    let platform = |credential: (&'static str, String)| {
        vec![
            ("LANGSMITH_ENDPOINT", endpoint.clone()),
            ("LANGSMITH_WORKSPACE_ID", DEMO_WORKSPACE_ID.to_owned()),
            ("AGENT_CA_BUNDLE", bundle.to_owned()),
            credential,
        ]
    };
    let list = vec!["deployments", "list"];

    let before = log_len(&emu);
    let out = run(platform(("LANGSMITH_API_KEY", KEY.into())), list.clone()).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        routes(&emu, before),
        ["GET /api-host/v2/deployments"],
        "one list, under the self-hosted prefix"
    );

    let before = log_len(&emu);
    let out = run(platform(("AGENT_BEARER_TOKEN", KEY.into())), list.clone()).await;
    assert_eq!(out.code, 0, "a bearer token: {out:?}");
    assert_eq!(log_len(&emu), before + 1);

    // Without the CA bundle the TLS handshake fails: nothing is forwarded.
    let forwarded = front.forwarded();
    let mut untrusted = platform(("LANGSMITH_API_KEY", KEY.into()));
    untrusted.retain(|(name, _)| *name != "AGENT_CA_BUNDLE");
    let out = run(
        untrusted,
        vec!["deployments", "list", "--request-timeout", "5"],
    )
    .await;
    assert_eq!(out.code, 4, "an untrusted certificate: {out:?}");
    assert!(out.stderr.to_lowercase().contains("certificate"), "{out:?}");
    assert_eq!(
        front.forwarded(),
        forwarded,
        "no request passed the handshake"
    );

    let mut both = platform(("AGENT_API_KEY", KEY.into()));
    both.push(("AGENT_BEARER_TOKEN", KEY.into()));
    let before = log_len(&emu);
    let out = run(both, list.clone()).await;
    assert_eq!(out.code, 2, "a key and a token: {out:?}");
    assert!(out.stderr.contains("set one of"), "{out:?}");
    let mut unreadable = platform(("LANGSMITH_API_KEY", KEY.into()));
    unreadable.push(("AGENT_CA_BUNDLE", "/nonexistent/ca.pem".into()));
    let out = run(unreadable, list).await;
    assert_eq!(out.code, 2, "an unreadable CA bundle: {out:?}");
    assert!(out.stderr.contains("reading the CA bundle"), "{out:?}");
    assert!(!out.stdout.contains(KEY) && !out.stderr.contains(KEY));
    assert_eq!(
        log_len(&emu),
        before,
        "nothing sent by a refused configuration"
    );
}

/// `agentctl export` (issue "Bring an existing workspace under GitOps",
/// item 2): the deployments of a workspace come out as AgentDeployments that
/// adopt them by id, without a secret value; applied back (`diff` with the
/// same values from the environment) they differ in nothing, and nothing is
/// sent but reads.
#[tokio::test]
async fn export_then_diff_is_a_round_trip_without_secret_values() {
    let emu = emulator(vec![]).await;
    let url = emu.base_url();
    let dir = tempfile::tempdir().unwrap();
    let github = write(
        dir.path(),
        "github.yaml",
        &manifest("exported", "main", SECRET_VALUE),
    );
    assert_eq!(apply_wait(&url, github.to_str().unwrap()).await.code, 0);
    let docker = test_support::repo_root().join("examples/agent-deployment-docker.yaml");
    assert_eq!(apply_wait(&url, docker.to_str().unwrap()).await.code, 0);

    let out = agentctl(&url, &["export", "-n", "agents"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stderr.contains("no cluster to read"),
        "without a cluster, the export says it could not check: {out:?}"
    );
    assert!(
        !out.stdout.contains(SECRET_VALUE),
        "a secret value was exported"
    );
    assert_eq!(
        out.stdout.matches("kind: AgentDeployment").count(),
        2,
        "{out:?}"
    );
    assert!(out.stdout.contains("deploymentId:"), "{out:?}");
    for part in [
        "kubectl -n agents create secret generic exported-env ",
        "--from-literal=LOG_LEVEL=...",
        "--from-literal=OPENAI_API_KEY=...",
    ] {
        assert!(out.stdout.contains(part), "{part}: {out:?}");
    }
    let exported = write(dir.path(), "exported.yaml", &out.stdout);

    // Applied back with the values the deployments run with: no difference.
    let before = log_len(&emu);
    let diff = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentctl"))
        .args(["diff", "--secret-from-env", "-f"])
        .arg(&exported)
        .env("KUBECONFIG", no_cluster())
        .env("AGENT_CONTROL_PLANE_URL", &url)
        .env("AGENT_WORKSPACE_ID", DEMO_WORKSPACE_ID)
        .env("AGENT_API_KEY", KEY)
        .env("OPENAI_API_KEY", SECRET_VALUE)
        .env("LOG_LEVEL", "info")
        .env_remove("RUST_LOG")
        .output()
        .await
        .unwrap();
    assert_eq!(
        diff.status.code(),
        Some(0),
        "the export differs from what runs:\n{}{}",
        String::from_utf8_lossy(&diff.stdout),
        String::from_utf8_lossy(&diff.stderr)
    );
    let sent = routes(&emu, before);
    assert!(mutations(&sent).is_empty(), "{sent:?}");

    // One by name; an unknown name is refused.
    let one = agentctl(&url, &["export", "exported"]).await;
    assert_eq!(
        one.stdout.matches("kind: AgentDeployment").count(),
        1,
        "{one:?}"
    );
    let none = agentctl(&url, &["export", "no-such-deployment"]).await;
    assert_eq!(none.code, 3, "{none:?}");
}

/// An AgentAssistant and two AgentCrons (one running the assistant, one a
/// graph) on the deployment of the same file.
fn agents(name: &str, model: &str, topic: &str) -> String {
    format!(
        r#"---
apiVersion: agentserver.dev/v1alpha1
kind: AgentAssistant
metadata: {{name: {name}-helper, namespace: default}}
spec:
  deploymentRef: {{name: {name}}}
  graphId: agent
  config: {{configurable: {{model: {model}}}}}
---
apiVersion: agentserver.dev/v1alpha1
kind: AgentCron
metadata: {{name: {name}-nightly, namespace: default}}
spec:
  deploymentRef: {{name: {name}}}
  assistantRef: {{name: {name}-helper}}
  schedule: "0 3 * * *"
  input: {{messages: [{{role: user, content: {topic}}}]}}
---
apiVersion: agentserver.dev/v1alpha1
kind: AgentCron
metadata: {{name: {name}-often, namespace: default}}
spec:
  deploymentRef: {{name: {name}}}
  graphId: agent
  schedule: "*/5 * * * *"
  timezone: Europe/Paris
"#
    )
}

/// The writes of the request log from entry `from` on: control plane and
/// agent server routes that are neither GETs nor searches.
fn writes(emu: &RunningEmulator, from: usize) -> Vec<String> {
    routes(emu, from)
        .into_iter()
        .filter(|r| !r.starts_with("GET ") && !r.ends_with("/search"))
        .collect()
}

fn count(routes: &[String], suffix: &str) -> usize {
    routes.iter().filter(|r| r.ends_with(suffix)).count()
}

/// One file holding a deployment, an assistant and two crons: `apply`
/// takes them in dependency order (the agent server objects only once the
/// deployment is DEPLOYED), a second `apply` sends no write, `diff` tells
/// a change before `apply` makes it with one PATCH per object (a cron's
/// `input`, which the cron's answer does not show, included), and a
/// duplicate cron carrying the file's tag is deleted.
#[tokio::test]
async fn apply_and_diff_take_assistants_and_crons_in_dependency_order() {
    let emu = emulator(vec![]).await;
    let url = emu.base_url();
    let dir = tempfile::tempdir().unwrap();
    let text = manifest("agents-app", "main", SECRET_VALUE) + &agents("agents-app", "m1", "news");
    let file = write(dir.path(), "all.yaml", &text);
    let file = file.to_str().unwrap();

    let run = agentctl(&url, &["diff", "-f", file]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout.contains(
            "agentassistant/agents-app-helper not read: deployment agents-app does not exist yet"
        ),
        "{run:?}"
    );
    // Without --wait the deployment's revision has not deployed: its agent
    // server objects wait (exit 1), and the create is the only write.
    let run = agentctl(&url, &["apply", "-f", file]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout
            .contains("agentcron/agents-app-often not applied: revision")
            && run.stdout.contains("apply with --wait"),
        "{run:?}"
    );
    assert_eq!(writes(&emu, 0), ["POST /v2/deployments"]);

    let before = log_len(&emu);
    let run = apply_wait(&url, file).await;
    assert_eq!(run.code, 0, "{run:?}");
    for line in [
        "agentassistant/agents-app-helper created: assistant ",
        "agentcron/agents-app-nightly created: cron ",
        "agentcron/agents-app-often created: cron ",
    ] {
        assert!(run.stdout.contains(line), "{line}\n{run:?}");
    }
    let sent = writes(&emu, before);
    assert_eq!(count(&sent, "/assistants"), 1, "{sent:?}");
    assert_eq!(count(&sent, "/runs/crons"), 2, "{sent:?}");
    assert_eq!(sent.len(), 3, "{sent:?}");
    // Dependency order: the assistant before the cron that runs it.
    let order = routes(&emu, before);
    let first = |suffix: &str| {
        order
            .iter()
            .position(|r| r.starts_with("POST ") && r.ends_with(suffix))
            .unwrap_or_else(|| panic!("{suffix} in {order:?}"))
    };
    assert!(first("/assistants") < first("/runs/crons"), "{order:?}");

    // Unchanged: reads only, and diff agrees.
    let before = log_len(&emu);
    let run = apply_wait(&url, file).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .contains("agentassistant/agents-app-helper unchanged")
            && run
                .stdout
                .contains("agentcron/agents-app-nightly unchanged"),
        "{run:?}"
    );
    let run = agentctl(&url, &["diff", "-f", file]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let run = agentctl(&url, &["get", "-f", file]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.stdout.matches(", as the file says").count(),
        4,
        "{run:?}"
    );
    assert!(run.stdout.contains("is DEPLOYED"), "{run:?}");
    assert_eq!(writes(&emu, before), Vec::<String>::new());

    // A new model and a new input: diff shows both, apply sends one PATCH
    // each, and the next apply none.
    let changed =
        manifest("agents-app", "main", SECRET_VALUE) + &agents("agents-app", "m2", "sport");
    let file2 = write(dir.path(), "changed.yaml", &changed);
    let file2 = file2.to_str().unwrap();
    let before = log_len(&emu);
    let run = agentctl(&url, &["diff", "-f", file2]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout
            .contains("agentassistant/agents-app-helper: would patch assistant")
            && run.stdout.contains("\"model\": \"m2\"")
            && run
                .stdout
                .contains("agentcron/agents-app-nightly: would patch cron")
            && run.stdout.contains("sport")
            && run
                .stdout
                .contains("agentcron/agents-app-often: no changes"),
        "{run:?}"
    );
    let run = agentctl(&url, &["get", "-f", file2]).await;
    assert!(
        run.stdout
            .contains("agentassistant/agents-app-helper: assistant ")
            && run.stdout.contains("version 1, differs from the file"),
        "{run:?}"
    );
    assert_eq!(writes(&emu, before), Vec::<String>::new());
    let run = apply_wait(&url, file2).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .contains("agentassistant/agents-app-helper patched"),
        "{run:?}"
    );
    let sent = writes(&emu, before);
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(sent.iter().all(|r| r.starts_with("PATCH ")), "{sent:?}");
    let before = log_len(&emu);
    assert_eq!(apply_wait(&url, file2).await.code, 0);
    assert_eq!(writes(&emu, before), Vec::<String>::new());

    // A second cron carrying the file's tag (a create whose answer was
    // lost, or a copy made outside): apply keeps the oldest and deletes it.
    let run = agentctl(&url, &["deployments", "get", "agents-app", "-o", "json"]).await;
    let d: Value = serde_json::from_str(&run.stdout).unwrap();
    let server = d["source_config"]["custom_url"]
        .as_str()
        .unwrap()
        .to_owned();
    agent_operator::controlplane::client::install_crypto_provider();
    let http = reqwest::Client::new();
    let found: Value = http
        .post(format!("{server}/runs/crons/search"))
        .header("x-api-key", KEY)
        .json(&serde_json::json!({"limit": 20}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let often = found
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["schedule"] == "*/5 * * * *")
        .unwrap()
        .clone();
    let copy = serde_json::json!({"assistant_id": "agent", "schedule": "*/5 * * * *",
        "metadata": often["metadata"].clone()});
    let made = http
        .post(format!("{server}/runs/crons"))
        .header("x-api-key", KEY)
        .json(&copy)
        .send()
        .await
        .unwrap();
    assert!(made.status().is_success(), "{made:?}");
    let before = log_len(&emu);
    let run = apply_wait(&url, file2).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .contains("agentcron/agents-app-often: deleted duplicate cron"),
        "{run:?}"
    );
    let sent = writes(&emu, before);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(sent[0].starts_with("DELETE "), "{sent:?}");
    emu.shutdown().await;
}

/// A file whose agent server documents the API server would refuse, or
/// whose references are not in the file, is refused before any request.
#[tokio::test]
async fn agent_documents_are_checked_before_any_request() {
    let emu = emulator(vec![]).await;
    let url = emu.base_url();
    let dir = tempfile::tempdir().unwrap();
    let good = manifest("checked-app", "main", SECRET_VALUE) + &agents("checked-app", "m1", "x");
    for (from, to, want) in [
        (
            "\"0 3 * * *\"",
            "\"every night\"",
            "spec.schedule \"every night\" is not five cron fields",
        ),
        (
            "assistantRef: {name: checked-app-helper}",
            "assistantRef: {name: gone}",
            "AgentAssistant default/gone is not in the file",
        ),
        ("kind: AgentCron", "kind: AgentCronJob", "AgentCronJob"),
        (
            "  graphId: agent\n  config",
            "  graphId: agent\n  colour: red\n  config",
            "unknown field",
        ),
    ] {
        let file = write(dir.path(), "bad.yaml", &good.replacen(from, to, 1));
        let run = agentctl(&url, &["apply", "-f", file.to_str().unwrap()]).await;
        assert_eq!(run.code, 2, "{to}\n{run:?}");
        assert!(run.stderr.contains(want), "{want}\n{run:?}");
    }
    assert_eq!(log_len(&emu), 0);
    emu.shutdown().await;
}

/// `spec.displayName`, which the control plane does not take on create:
/// one `apply` creates the deployment and sets the name with one PATCH (no
/// revision), as the operator's pass after a create does; the next `apply`
/// sends nothing.
#[tokio::test]
async fn apply_sets_the_display_name_right_after_the_create() {
    let emu = emulator(vec![]).await;
    let url = emu.base_url();
    let dir = tempfile::tempdir().unwrap();
    let text = manifest("named-app", "main", SECRET_VALUE).replace(
        "  source: github\n",
        "  source: github\n  displayName: Named app\n",
    );
    let file = write(dir.path(), "named.yaml", &text);
    let file = file.to_str().unwrap();
    let run = apply_wait(&url, file).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        mutations(&routes(&emu, 0)),
        [
            "POST /v2/deployments",
            "PATCH /v2/deployments/{deployment_id}"
        ]
    );
    let run = agentctl(&url, &["deployments", "get", "named-app", "-o", "json"]).await;
    let d: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(d["display_name"], "Named app", "{run:?}");
    let run = agentctl(&url, &["revisions", "list", "named-app", "-o", "json"]).await;
    let revisions: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(revisions.as_array().map(Vec::len), Some(1), "{run:?}");
    let before = log_len(&emu);
    assert_eq!(apply_wait(&url, file).await.code, 0);
    assert!(mutations(&routes(&emu, before)).is_empty());
    emu.shutdown().await;
}
