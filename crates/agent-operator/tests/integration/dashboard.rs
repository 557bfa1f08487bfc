//! The Grafana dashboard shipped in the chart
//! (`deploy/helm/agent-operator/files/dashboards/agent-operator.json`;
//! issue "A platform team installs it…", item 3): every panel's query is
//! PromQL that promtool accepts, every panel says what it shows and in which
//! unit, and the chart's ConfigMap carries the file unchanged. That each
//! metric a panel names exists on a real operator's `/metrics` is checked
//! by `operations_http::probes_and_metrics_reflect_sync_and_reconciles`
//! with [`dashboard_metrics`].

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::Value;

/// The dashboard, as JSON.
pub(crate) fn dashboard() -> Value {
    let path = test_support::repo_root()
        .join("deploy/helm/agent-operator/files/dashboards/agent-operator.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Every query of every panel.
fn queries(dashboard: &Value) -> Vec<(String, String)> {
    dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| {
            let title = p["title"].as_str().unwrap().to_owned();
            p["targets"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |t| (title.clone(), t["expr"].as_str().unwrap().to_owned()))
        })
        .collect()
}

/// The metric families the panels query (`_bucket`, `_count`, `_sum` of a
/// histogram named by its family), besides the one the `job` variable reads.
pub(crate) fn dashboard_metrics() -> BTreeSet<String> {
    let d = dashboard();
    let name = regex::Regex::new(r"agent_operator_[a-z_]+").unwrap();
    let mut texts: Vec<String> = queries(&d).into_iter().map(|(_, q)| q).collect();
    for v in d["templating"]["list"].as_array().unwrap() {
        if let Some(q) = v["query"].as_str() {
            texts.push(q.to_owned());
        }
    }
    texts
        .iter()
        .flat_map(|q| name.find_iter(q).map(|m| m.as_str().to_owned()))
        .map(|m| {
            ["_bucket", "_count", "_sum"]
                .iter()
                .find_map(|s| m.strip_suffix(s))
                .map_or(m.clone(), str::to_owned)
        })
        .collect()
}

#[test]
fn every_panel_is_described_and_its_queries_are_valid_promql() {
    let d = dashboard();
    let panels = d["panels"].as_array().unwrap();
    assert!(panels.len() >= 10, "{} panels", panels.len());
    for p in panels {
        assert!(
            !p["description"].as_str().unwrap_or_default().is_empty(),
            "{p}"
        );
        assert!(p["fieldConfig"]["defaults"]["unit"].is_string(), "{p}");
        assert!(!p["targets"].as_array().unwrap().is_empty(), "{p}");
    }
    let metrics = dashboard_metrics();
    for wanted in [
        "agent_operator_reconciles_total",
        "agent_operator_control_plane_requests_total",
        "agent_operator_control_plane_slowdowns_total",
        "agent_operator_control_plane_budget_rate",
        "agent_operator_control_plane_pause_seconds",
        "agent_operator_reconcile_queue",
        "agent_operator_time_to_ready_seconds",
    ] {
        assert!(metrics.contains(wanted), "no panel shows {wanted}");
    }

    test_support::skip_without!(Promtool);
    // promtool checks PromQL in rule files: each query as a recording rule
    // (the `$job` variable as Grafana fills it for "All").
    let rules: Vec<Value> = queries(&d)
        .iter()
        .enumerate()
        .map(|(i, (_, q))| {
            serde_json::json!({"record": format!("dashboard:query_{i}"), "expr": q.replace("$job", ".*")})
        })
        .collect();
    let n = rules.len();
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        file.path(),
        serde_json::json!({"groups": [{"name": "dashboard", "rules": rules}]}).to_string(),
    )
    .unwrap();
    let out = Command::new(test_support::prerequisites::tool("promtool"))
        .args(["check", "rules"])
        .arg(file.path())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(&format!("SUCCESS: {n} rules found")),
        "{text}"
    );

    // A broken query is refused, so the check can fail.
    std::fs::write(
        file.path(),
        serde_json::json!({"groups": [{"name": "d", "rules": [{"record": "x:y", "expr": "sum by (kind (rate(agent_operator_reconciles_total[5m]))"}]}]}).to_string(),
    )
    .unwrap();
    let out = Command::new(test_support::prerequisites::tool("promtool"))
        .args(["check", "rules"])
        .arg(file.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn the_chart_ships_the_dashboard_unchanged_for_the_grafana_sidecar() {
    test_support::skip_without!(Tools);
    let mut command = crate::install_manifests::helm();
    command
        .args(["template", "dash-it"])
        .arg(crate::install_manifests::chart())
        .args(["--set", "grafana.dashboard.enabled=true"]);
    let (yaml, _) = crate::install_manifests::succeed(command, None);
    let docs = crate::install_manifests::documents(&yaml);
    let cm = docs
        .iter()
        .find(|d| {
            d["kind"] == "ConfigMap" && d["metadata"]["name"] == "dash-it-agent-operator-dashboard"
        })
        .expect("the dashboard ConfigMap");
    assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "1");
    let shipped: Value =
        serde_json::from_str(cm["data"]["agent-operator.json"].as_str().unwrap()).unwrap();
    assert_eq!(shipped, dashboard());
}
