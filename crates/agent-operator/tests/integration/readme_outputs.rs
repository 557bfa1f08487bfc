//! README's sample `kubectl get agd` outputs against a run of the demo's
//! setup: the control plane emulator with revisions stepping every second
//! (`--step-seconds 1`), the operator polling every second, and
//! `examples/agent-deployment.yaml` (its Secret and the AgentDeployment
//! `support-agent`) applied.
//!
//! Each sample's header is the AgentDeployment CRD's printer columns without
//! a priority (what `kubectl get agd` prints), and each row's values are
//! ones the run showed, in README's order: `NAME` the example's, `READY`,
//! `STATUS` and `REVISION` exactly as the object had them at some point of
//! the run (followed with a watch from before the apply), `URL` an
//! emulator agent server URL (`http://127.0.0.1:<port>/agents/<id>`; the
//! port and id vary) and `AGE` in seconds. The last sample is also compared
//! with what the real `kubectl get agd` prints once the object is Ready.

use crate::{install_manifests, support};

use std::time::Duration;

use agent_operator::api::AgentDeployment;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::PostParams;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use support::Harness;

const NAME: &str = "support-agent";
const TIMEOUT: Duration = Duration::from_secs(90);

/// One `$ kubectl get agd` sample: its column names and rows.
#[derive(Debug)]
struct Sample {
    columns: Vec<String>,
    rows: Vec<Vec<String>>,
}

/// A line of `kubectl get` output split into its cells (two or more
/// spaces apart).
fn cells(line: &str) -> Vec<String> {
    regex::Regex::new(r"\s{2,}")
        .unwrap()
        .split(line.trim())
        .map(str::to_owned)
        .collect()
}

/// Every `$ kubectl get agd` sample of README.md: the lines after the
/// command up to the next `$ ` line or the end of the code block.
fn readme_samples() -> Vec<Sample> {
    let readme = std::fs::read_to_string(test_support::repo_root().join("README.md")).unwrap();
    let mut samples = Vec::new();
    let mut lines = readme.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() != "$ kubectl get agd" {
            continue;
        }
        let columns = cells(lines.next().expect("a header after the command"));
        let mut rows = Vec::new();
        while let Some(next) = lines.peek() {
            if next.starts_with("$ ") || next.starts_with("```") || next.trim().is_empty() {
                break;
            }
            rows.push(cells(lines.next().unwrap()));
        }
        samples.push(Sample { columns, rows });
    }
    samples
}

/// The columns `kubectl get agd` prints: NAME, then the printer columns of
/// the committed CRD without a priority, upper-cased.
fn crd_columns() -> Vec<String> {
    let path = test_support::repo_root().join("crds/agentdeployments.agentserver.dev.yaml");
    let crd: Value = yaml_serde::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let printer = crd["spec"]["versions"][0]["additionalPrinterColumns"]
        .as_array()
        .expect("printer columns");
    std::iter::once("NAME".to_owned())
        .chain(
            printer
                .iter()
                .filter(|c| c["priority"].as_i64().unwrap_or(0) == 0)
                .map(|c| c["name"].as_str().unwrap().to_uppercase()),
        )
        .collect()
}

/// (READY, STATUS, REVISION) of `obj` as the printer columns read them.
fn shown(obj: &AgentDeployment) -> [String; 3] {
    let (ready, reason, _) = support::ready(obj).unwrap_or_default();
    let revision = obj.status.as_ref().and_then(|s| s.revision_status.clone());
    [ready, reason, revision.unwrap_or_default()]
}

/// Applies the example's Secret and AgentDeployment in `ns`.
async fn apply_example(h: &Harness) {
    let text =
        std::fs::read_to_string(test_support::repo_root().join("examples/agent-deployment.yaml"))
            .unwrap();
    for doc in install_manifests::documents(&text) {
        let mut doc = doc;
        doc["metadata"]["namespace"] = Value::String(h.ns.clone());
        if doc["kind"] == "Secret" {
            let secret: Secret = serde_json::from_value(doc).unwrap();
            Api::<Secret>::namespaced(h.client.clone(), &h.ns)
                .create(&PostParams::default(), &secret)
                .await
                .expect("the example's Secret");
        } else {
            h.apply(doc).await;
        }
    }
}

/// Every distinct (READY, STATUS, REVISION) the object showed, in order,
/// from before the apply until it is Ready, and the object then.
async fn follow_until_ready(h: &Harness) -> (Vec<[String; 3]>, AgentDeployment) {
    let config = watcher::Config::default().fields(&format!("metadata.name={NAME}"));
    let mut stream = watcher(h.api.clone(), config).applied_objects().boxed();
    apply_example(h).await;
    let mut seen: Vec<[String; 3]> = Vec::new();
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let next = tokio::time::timeout_at(deadline, stream.next())
            .await
            .unwrap_or_else(|_| panic!("{NAME} not Ready in {TIMEOUT:?}; seen {seen:?}"));
        let obj = next.expect("the watch goes on").expect("a watch event");
        let now = shown(&obj);
        if seen.last() != Some(&now) {
            seen.push(now);
        }
        if support::is_ready_now(&obj) {
            return (seen, obj);
        }
    }
}

#[tokio::test]
async fn readme_kubectl_get_agd_samples_are_what_the_demo_shows() {
    test_support::skip_without!(Envtest);
    let h = Harness::builder("readme-agd")
        .step_seconds(1.0)
        .operator_flags(&["--poll-interval-seconds", "1"])
        .start()
        .await;
    h.wait_control_plane_ready(TIMEOUT).await;
    let (seen, obj) = follow_until_ready(&h).await;
    eprintln!("the run showed (READY, STATUS, REVISION): {seen:?}");
    let samples = readme_samples();
    assert_eq!(samples.len(), 2, "README shows kubectl get agd twice");
    let url = regex::Regex::new(r"^http://127\.0\.0\.1:\d+/agents/[0-9a-f-]{36}$").unwrap();
    let age = regex::Regex::new(r"^\d+s$").unwrap();
    let mut from = 0;
    for sample in &samples {
        assert_eq!(sample.columns, crd_columns(), "README's header");
        assert_eq!(sample.rows.len(), 1, "{sample:?}");
        let row: std::collections::BTreeMap<&str, &str> = sample
            .columns
            .iter()
            .map(String::as_str)
            .zip(sample.rows[0].iter().map(String::as_str))
            .collect();
        assert_eq!(row["NAME"], NAME);
        assert!(url.is_match(row["URL"]), "README's URL {}", row["URL"]);
        assert!(age.is_match(row["AGE"]), "README's AGE {}", row["AGE"]);
        let values = [row["READY"], row["STATUS"], row["REVISION"]].map(str::to_owned);
        let at = seen[from..]
            .iter()
            .position(|s| *s == values)
            .unwrap_or_else(|| panic!("README's {values:?} never shown after {:?}", &seen[..from]));
        from += at + 1;
    }
    let shown_url = obj.status.as_ref().and_then(|s| s.url.clone()).unwrap();
    assert!(url.is_match(&shown_url), "{shown_url}");
    // The real kubectl once Ready: README's last sample.
    let mut kubectl = install_manifests::kubectl();
    kubectl.args(["get", "agd", "-n", &h.ns]);
    let (out, _) = install_manifests::succeed(kubectl, None);
    let mut lines = out.lines();
    let last = samples.last().unwrap();
    assert_eq!(cells(lines.next().unwrap()), last.columns, "{out}");
    let row = cells(lines.next().unwrap());
    assert_eq!(row[..4], last.rows[0][..4], "{out}");
    assert_eq!(row[4], shown_url);
}
