//! The Prometheus alert rules of `deploy/prometheus/` against a real
//! promtool: `promtool check rules` accepts `alerts.yaml`, `promtool test
//! rules` passes the unit tests of `alerts_test.yaml` (each alert fires on
//! sick series and not on healthy ones), and copies broken on purpose are
//! refused (a syntax error in one expression; a threshold the unit tests do
//! not expect), so the checks can fail. Without promtool, every metric the
//! rules use is still checked to be documented in docs/METRICS.md, and every
//! alert to carry a severity and annotations that point at the docs.
//!
//! The rules are also run on series recorded from real runs of the
//! operator (`deploy/prometheus/recorded/`, written by `alert_series.rs`):
//! exactly the matching alert fires at the end of each scenario.
//!
//! promtool comes from `.cache/tools/bin` (`hack/promtool/install.sh`, run by
//! `make setup`); without it the promtool tests pass over themselves
//! (`skip_without!(Promtool)`), and fail under `make test`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The alerts the operator's metrics call for (docs/METRICS.md, "Alerts").
const REQUIRED_ALERTS: [&str; 8] = [
    "AgentOperatorControlPlanePaused",
    "AgentOperatorControlPlaneThrottled",
    "AgentOperatorBudgetAtFloor",
    "AgentOperatorTokenWaitHigh",
    "AgentOperatorReconcileBacklog",
    "AgentOperatorLeaseRenewalStale",
    "AgentOperatorNoLeader",
    "AgentOperatorResourcesNotReady",
];

fn repo() -> &'static Path {
    test_support::repo_root()
}

fn rules_dir() -> PathBuf {
    repo().join("deploy/prometheus")
}

/// `promtool <args>` (tests that use it start with
/// `skip_without!(Promtool)`).
fn promtool(args: &[&str], file: &Path) -> Output {
    Command::new(test_support::prerequisites::tool("promtool"))
        .args(args)
        .arg(file)
        .output()
        .expect("running promtool")
}

fn text(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn rules_text() -> String {
    std::fs::read_to_string(rules_dir().join("alerts.yaml")).expect("deploy/prometheus/alerts.yaml")
}

/// Every rule of `alerts.yaml`, across its groups.
fn rules() -> Vec<Value> {
    let file: Value = yaml_serde::from_str(&rules_text()).expect("alerts.yaml is YAML");
    file["groups"]
        .as_array()
        .expect("alerts.yaml has groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().expect("a group has rules").clone())
        .collect()
}

/// `alerts.yaml` with `from` (found exactly once) replaced by `to`, in a
/// temporary directory, with a copy of `alerts_test.yaml` next to it.
fn broken_copy(from: &str, to: &str) -> tempfile::TempDir {
    let original = rules_text();
    assert_eq!(original.matches(from).count(), 1, "{from:?} in alerts.yaml");
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("alerts.yaml"), original.replace(from, to)).unwrap();
    std::fs::copy(
        rules_dir().join("alerts_test.yaml"),
        dir.path().join("alerts_test.yaml"),
    )
    .unwrap();
    dir
}

#[test]
fn promtool_check_rules_accepts_the_alert_rules() {
    test_support::skip_without!(Promtool);
    let out = promtool(&["check", "rules"], &rules_dir().join("alerts.yaml"));
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("SUCCESS: {} rules found", rules().len())),
        "{}",
        text(&out)
    );
}

#[test]
fn promtool_test_rules_passes_the_alert_unit_tests() {
    test_support::skip_without!(Promtool);
    let out = promtool(&["test", "rules"], &rules_dir().join("alerts_test.yaml"));
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("SUCCESS"));
}

#[test]
fn promtool_refuses_a_rule_file_with_a_syntax_error() {
    test_support::skip_without!(Promtool);
    // A missing closing parenthesis in one expression.
    let dir = broken_copy(
        "(rate(agent_operator_control_plane_slowdowns_total{job=\"agent-operator-metrics\"}[5m]))",
        "(rate(agent_operator_control_plane_slowdowns_total{job=\"agent-operator-metrics\"}[5m])",
    );
    let out = promtool(&["check", "rules"], &dir.path().join("alerts.yaml"));
    assert!(!out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("parse error"), "{}", text(&out));
    let out = promtool(&["test", "rules"], &dir.path().join("alerts_test.yaml"));
    assert!(!out.status.success(), "{}", text(&out));
}

#[test]
fn promtool_unit_tests_fail_when_an_alert_no_longer_fires() {
    test_support::skip_without!(Promtool);
    // The sick series of the unit tests slow the budget down 0.2 times a
    // second: with a threshold of 1/s the throttling alert must not fire.
    let dir = broken_copy("[5m])) > 0.05", "[5m])) > 1");
    let out = promtool(&["check", "rules"], &dir.path().join("alerts.yaml"));
    assert!(out.status.success(), "still valid: {}", text(&out));
    let out = promtool(&["test", "rules"], &dir.path().join("alerts_test.yaml"));
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("AgentOperatorControlPlaneThrottled"),
        "{}",
        text(&out)
    );
}

/// The `agent_operator_*` metric names in a PromQL expression, without the
/// `_bucket`, `_sum` and `_count` suffixes of histogram series.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let re = regex::Regex::new(r"\bagent_operator_[a-z0-9_]+").unwrap();
    re.find_iter(expr)
        .map(|m| {
            let name = m.as_str();
            ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix))
                .unwrap_or(name)
                .to_owned()
        })
        .collect()
}

#[test]
fn every_metric_of_the_alert_rules_is_documented() {
    let doc = std::fs::read_to_string(repo().join("docs/METRICS.md")).unwrap();
    let names: BTreeSet<String> = rules()
        .iter()
        .flat_map(|r| metric_names(r["expr"].as_str().expect("every rule has an expr")))
        .collect();
    for expected in [
        "agent_operator_control_plane_budget_rate",
        "agent_operator_control_plane_budget_ceiling",
        "agent_operator_control_plane_pause_seconds",
        "agent_operator_control_plane_token_wait_seconds",
        "agent_operator_control_plane_slowdowns_total",
        "agent_operator_reconcile_queue",
        "agent_operator_leader_lease_renewal_age_seconds",
        "agent_operator_leader",
        "agent_operator_resources",
    ] {
        assert!(names.contains(expected), "{expected} in {names:?}");
    }
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| !doc.contains(&format!("`{n}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "metrics of deploy/prometheus/alerts.yaml missing from docs/METRICS.md: {missing:?}"
    );
    assert_eq!(
        metric_names("rate(agent_operator_x_seconds_bucket[5m]) / agent_operator_y_count"),
        BTreeSet::from(["agent_operator_x_seconds".into(), "agent_operator_y".into()])
    );
}

#[test]
fn every_alert_has_a_severity_and_points_at_the_docs() {
    let rules = rules();
    let alerts: Vec<&str> = rules.iter().filter_map(|r| r["alert"].as_str()).collect();
    for name in REQUIRED_ALERTS {
        assert!(alerts.contains(&name), "{name} in {alerts:?}");
    }
    let unique: BTreeSet<&&str> = alerts.iter().collect();
    assert_eq!(unique.len(), alerts.len(), "alert names are unique");
    for rule in &rules {
        let name = rule["alert"].as_str().expect("only alerting rules");
        let severity = rule["labels"]["severity"].as_str();
        assert!(
            matches!(severity, Some("critical" | "warning" | "info")),
            "{name}: severity {severity:?}"
        );
        let summary = rule["annotations"]["summary"].as_str().unwrap_or_default();
        let description = rule["annotations"]["description"]
            .as_str()
            .unwrap_or_default();
        assert!(!summary.is_empty(), "{name} has a summary");
        assert!(
            description.contains("docs/METRICS.md")
                || description.contains("docs/TROUBLESHOOTING.md"),
            "{name}: the description points at docs/METRICS.md or docs/TROUBLESHOOTING.md"
        );
        if REQUIRED_ALERTS.contains(&name) {
            assert!(
                description.contains("docs/METRICS.md")
                    && description.contains("docs/TROUBLESHOOTING.md"),
                "{name}: the description points at docs/METRICS.md and docs/TROUBLESHOOTING.md"
            );
        }
    }
    let doc = std::fs::read_to_string(repo().join("docs/METRICS.md")).unwrap();
    assert!(
        doc.contains("deploy/prometheus/alerts.yaml"),
        "docs/METRICS.md points at the rule file"
    );
}

/// The recorded scenarios (`alert_series.rs`, `make record-alert-series`)
/// that must be present.
const RECORDED: [&str; 5] = [
    "healthy-leader",
    "frozen-apiserver",
    "throttled-control-plane",
    "stalled-resource",
    "lost-leader",
];

/// A promtool test file (JSON, which promtool reads as YAML) over the
/// recorded `fixture`: at its last sample, exactly the alerts `firing`
/// fire (none at all for an empty list).
fn recorded_test(fixture: &Value, firing: &[String]) -> String {
    let samples = fixture["samples"].as_u64().expect("samples");
    let eval_time = format!("{}s", (samples - 1) * crate::alert_series::SAMPLE_SECONDS);
    let exp_samples: Vec<Value> = firing
        .iter()
        .map(|a| serde_json::json!({"labels": format!("{{alertname=\"{a}\"}}"), "value": 1}))
        .collect();
    serde_json::json!({
        "rule_files": [rules_dir().join("alerts.yaml")],
        "evaluation_interval": format!("{}s", crate::alert_series::SAMPLE_SECONDS),
        "tests": [{
            "interval": format!("{}s", crate::alert_series::SAMPLE_SECONDS),
            "input_series": fixture["input_series"],
            "promql_expr_test": [{
                "expr": "group by (alertname) (ALERTS{alertstate=\"firing\"})",
                "eval_time": eval_time,
                "exp_samples": exp_samples,
            }],
        }],
    })
    .to_string()
}

fn recorded(name: &str) -> Value {
    let path = rules_dir().join("recorded").join(format!("{name}.yaml"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (make record-alert-series)", path.display()));
    yaml_serde::from_str(&text).expect("a recorded fixture")
}

/// On series recorded from real runs of the operator, exactly the matching
/// alert fires at the end of each scenario, and none on a healthy leader
/// over 5 minutes; expecting another alert fails, so the check can fail.
#[test]
fn recorded_series_fire_exactly_the_matching_alert() {
    test_support::skip_without!(Promtool);
    let dir = tempfile::tempdir().unwrap();
    for name in RECORDED {
        let fixture = recorded(name);
        assert_eq!(fixture["scenario"], name);
        let firing: Vec<String> =
            serde_json::from_value(fixture["firing"].clone()).expect("firing");
        let file = dir.path().join(format!("{name}.json"));
        std::fs::write(&file, recorded_test(&fixture, &firing)).unwrap();
        let out = promtool(&["test", "rules"], &file);
        assert!(out.status.success(), "{name}: {}", text(&out));
        // The same series with a wrong expectation must fail.
        let wrong: Vec<String> = if firing.is_empty() {
            vec!["AgentOperatorNoLeader".to_owned()]
        } else {
            Vec::new()
        };
        std::fs::write(&file, recorded_test(&fixture, &wrong)).unwrap();
        let out = promtool(&["test", "rules"], &file);
        assert!(!out.status.success(), "{name} passes a wrong expectation");
    }
    let healthy = recorded("healthy-leader");
    assert!(
        healthy["samples"].as_u64().unwrap() * crate::alert_series::SAMPLE_SECONDS >= 300,
        "the healthy leader covers 5 minutes"
    );
}
