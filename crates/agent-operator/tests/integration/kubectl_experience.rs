//! The kubectl experience, end to end with the real `kubectl` against the
//! real API server and a running operator: `kubectl apply`, printer columns
//! (READY, STATUS, REVISION, URL, AGE; `-o wide` adds SOURCE,
//! DEPLOYMENT-ID, REVISION-ID, SERVING, VERIFIED, MESSAGE), shortnames and the category
//! `agents`, `kubectl explain` with units and allowed values, `kubectl wait
//! --for=condition=Ready`, `kubectl get events --sort-by=.lastTimestamp`,
//! and a human reason in `kubectl get agd` when a
//! resource is not Ready.

use crate::{common, support};

use std::process::Output;
use std::time::Duration;

use serde_json::json;
use support::{Harness, github_deployment};

const TIMEOUT: Duration = Duration::from_secs(60);

/// Runs the envtest kubectl with `args` in `ns`; panics if it cannot start.
fn kubectl(ns: &str, args: &[&str]) -> Output {
    let env = common::shared_env();
    let mut cmd = env
        .kubectl()
        .expect("kubectl is built with kube-apiserver by hack/envtest/install.sh (`make setup`)");
    cmd.arg("--namespace").arg(ns).args(args);
    cmd.output().expect("running kubectl")
}

/// Like [`kubectl`], asserting success; returns stdout.
fn ok(ns: &str, args: &[&str]) -> String {
    let out = kubectl(ns, args);
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The table row of `name` split on runs of spaces.
fn row<'a>(table: &'a str, name: &str) -> Vec<&'a str> {
    table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row {name} in:\n{table}"))
        .split_whitespace()
        .collect()
}

#[tokio::test]
async fn kubectl_get_wait_and_explain_tell_the_user_what_is_going_on() {
    test_support::skip_without!(Envtest);
    let h = Harness::builder("kubectl-ux")
        .step_seconds(0.3)
        .scenario("BUILD_FAILED:repo_ref=broken")
        .start()
        .await;
    let ns = h.ns.clone();

    // kubectl apply of a file, as a GitOps tool would.
    let mut missing = github_deployment("needs-secret", "main");
    missing["spec"]["secrets"] = json!([{"name": "OPENAI_API_KEY",
        "valueFrom": {"secretKeyRef": {"name": "absent", "key": "key"}}}]);
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [
        github_deployment("good", "main"),
        github_deployment("broken", "broken"),
        missing,
        json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentCron",
            "metadata": {"name": "digest"},
            "spec": {"deploymentRef": {"name": "good"}, "graphId": "agent",
                "schedule": "30 7 * * 1-5"}}),
    ]});
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("agents.json");
    std::fs::write(&file, serde_json::to_vec(&list).unwrap()).unwrap();
    let applied = ok(&ns, &["apply", "-f", file.to_str().unwrap()]);
    assert!(
        applied.contains("agentdeployment.agentserver.dev/good created"),
        "{applied}"
    );

    // kubectl wait: returns once Ready, exit 0.
    let waited = ok(
        &ns,
        &["wait", "--for=condition=Ready", "agd/good", "--timeout=60s"],
    );
    assert!(waited.contains("condition met"), "{waited}");
    // ... and times out (exit 1) on one that cannot become Ready.
    h.wait_stalled("broken", "RevisionFailed", TIMEOUT).await;
    h.wait_stalled("needs-secret", "SecretNotFound", TIMEOUT)
        .await;
    let not = kubectl(
        &ns,
        &[
            "wait",
            "--for=condition=Ready",
            "agd/broken",
            "--timeout=2s",
        ],
    );
    assert!(!not.status.success(), "a failed revision is not Ready");

    // kubectl get: the columns, and a human reason when not Ready.
    let table = ok(&ns, &["get", "agd"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "READY", "STATUS", "REVISION", "URL", "AGE"],
        "{table}"
    );
    let good = row(&table, "good");
    assert_eq!(
        &good[1..4],
        ["True", "RevisionDeployed", "DEPLOYED"],
        "{table}"
    );
    assert!(good[4].starts_with("http"), "{table}");
    assert_eq!(
        &row(&table, "broken")[1..4],
        ["False", "RevisionFailed", "BUILD_FAILED"],
        "{table}"
    );
    assert_eq!(
        &row(&table, "needs-secret")[1..3],
        ["False", "SecretNotFound"],
        "{table}"
    );

    // -o wide: one line per object even with a multi-line message (the
    // build log tail).
    let wide = ok(&ns, &["get", "agentdeployments", "-o", "wide"]);
    let header: Vec<&str> = wide.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "READY",
            "STATUS",
            "REVISION",
            "URL",
            "AGE",
            "SOURCE",
            "DEPLOYMENT-ID",
            "REVISION-ID",
            "SERVING",
            "VERIFIED",
            "MESSAGE"
        ],
        "{wide}"
    );
    println!("$ kubectl get agd\n{table}\n$ kubectl get agentdeployments -o wide\n{wide}");
    assert_eq!(
        wide.lines().count(),
        4,
        "a header and one line per object:\n{wide}"
    );
    let broken = wide.lines().find(|l| l.starts_with("broken ")).unwrap();
    assert!(broken.contains("ended in BUILD_FAILED"), "{wide}");
    assert!(
        row(&wide, "needs-secret").join(" ").contains("absent"),
        "{wide}"
    );

    // Shortnames and the category.
    let agents = ok(&ns, &["get", "agents", "-o", "name"]);
    for name in [
        "agentdeployment.agentserver.dev/good",
        "agentcontrolplane.agentserver.dev/default",
        "agentcron.agentserver.dev/digest",
    ] {
        assert!(
            agents.contains(name),
            "kubectl get agents lists {name}:\n{agents}"
        );
    }
    let crons = ok(&ns, &["get", "agc"]);
    assert!(
        crons
            .lines()
            .next()
            .unwrap_or_default()
            .contains("SCHEDULE"),
        "{crons}"
    );
    assert!(row(&crons, "digest").contains(&"good"), "{crons}");
    let planes = ok(&ns, &["get", "acp"]);
    assert_eq!(
        &row(&planes, "default")[1..3],
        ["True", "Authenticated"],
        "{planes}"
    );
    ok(&ns, &["get", "agl"]);

    // kubectl explain: units and allowed values.
    for (field, expected) in [
        ("agd.spec.progressDeadlineSeconds", "Seconds"),
        ("agd.spec.sourceConfig.resourceSpec.memoryMb", "MiB"),
        ("agd.spec.sourceConfig.resourceSpec.cpu", "cores"),
        ("agd.spec.sourceConfig.deploymentType", "dev"),
        (
            "agd.spec.sourceConfig",
            "`external_docker` only: `customUrl`",
        ),
        ("agd.spec.sourceConfig.repoUrl", "Source `github` only"),
        ("agd.spec.deletionPolicy", "Orphan"),
        ("acp.spec.requestsPerSecond", "per second"),
        ("agl.spec.listenerId", "uuid"),
    ] {
        let text = ok(&ns, &["explain", field]);
        assert!(
            text.contains(expected),
            "kubectl explain {field} mentions {expected:?}:\n{text}"
        );
    }
    // The operator's events sort by lastTimestamp (issue 36): each has one.
    let events = ok(
        &ns,
        &[
            "get",
            "events",
            "--sort-by=.lastTimestamp",
            "--no-headers",
            "-o",
            "custom-columns=LAST:.lastTimestamp,FROM:.reportingComponent,REASON:.reason",
        ],
    );
    let ours: Vec<&str> = events
        .lines()
        .filter(|l| l.contains("agent-operator"))
        .collect();
    assert!(ours.len() >= 2, "{events}");
    let times: Vec<&str> = ours
        .iter()
        .map(|l| l.split_whitespace().next().unwrap_or_default())
        .collect();
    assert!(times.iter().all(|t| t.ends_with('Z')), "{events}");
    assert!(times.is_sorted(), "{events}");
    let enums = ok(&ns, &["explain", "agd.spec.sourceConfig.deploymentType"]);
    for value in ["dev", "prod"] {
        assert!(enums.contains(value), "{enums}");
    }
}
