//! The alert rules **as the Helm chart renders them**, for two releases with
//! different names that are two shards (`sharding.key`), loaded together
//! into one promtool as one Prometheus would load both PrometheusRules.
//!
//! Each release's ServiceMonitor has no `jobLabel`, so prometheus-operator
//! names the job after the metrics Service: the test reads that job from
//! the rendered Service and checks that every selector of the release's
//! rules names it. The input series are the recorded healthy leader
//! (`deploy/prometheus/recorded/healthy-leader.yaml`, two replicas, one
//! leading, 5 minutes) given each release's job; from them: a healthy pair
//! fires nothing, a dead shard (its targets down) fires `AgentOperatorDown`
//! for its job only, a leaderless shard (every replica's
//! `agent_operator_leader` 0) fires `AgentOperatorNoLeader` for its job
//! only. A wrong expectation fails, so the check can fail.

use crate::install_manifests::{SERVICE_MONITOR_API, chart, documents, helm, succeed};

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

/// A scenario: its name, its input series and the (alertname, job) pairs
/// that fire at its end.
type Case<'a> = (&'a str, Vec<Value>, Vec<(&'a str, &'a str)>);

/// The two releases: (release name, shard key).
const RELEASES: [(&str, &str); 2] = [
    ("platform", "shard-1"),
    ("agent-operator-shard-2", "shard-2"),
];
/// The job of the recorded series.
const RECORDED_JOB: &str = "agent-operator-metrics";
const PROMETHEUS_RULE_API: &str = "monitoring.coreos.com/v1/PrometheusRule";

/// One release as rendered: its job and its rule groups.
struct Rendered {
    job: String,
    groups: Value,
}

/// `helm template` of `release` as shard `key`, with the ServiceMonitor and
/// the PrometheusRule.
fn render(release: &str, key: &str) -> Rendered {
    let mut command = helm();
    command
        .args(["template", release])
        .arg(chart())
        .args(["--namespace", "agent-operator"])
        .args(["--set", &format!("sharding.key={key}")])
        .args(["--set", "metrics.serviceMonitor.enabled=true"])
        .args(["--set", "metrics.prometheusRule.enabled=true"])
        .args(["--api-versions", SERVICE_MONITOR_API])
        .args(["--api-versions", PROMETHEUS_RULE_API]);
    let docs = documents(&succeed(command, None).0);
    let one = |kind: &str| -> &Value {
        let all: Vec<&Value> = docs.iter().filter(|d| d["kind"] == kind).collect();
        assert_eq!(all.len(), 1, "{release}: one {kind}");
        all[0]
    };
    let monitor = one("ServiceMonitor");
    assert!(
        monitor["spec"]["jobLabel"].is_null(),
        "{release}: no jobLabel, so the job is the Service's name"
    );
    assert_eq!(monitor["spec"]["endpoints"][0]["honorLabels"], true);
    let selector = &monitor["spec"]["selector"]["matchLabels"];
    let services: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == "Service")
        .filter(|d| {
            let labels = &d["metadata"]["labels"];
            selector
                .as_object()
                .is_some_and(|m| m.iter().all(|(k, v)| &labels[k] == v))
        })
        .collect();
    assert_eq!(
        services.len(),
        1,
        "{release}: the ServiceMonitor selects one Service"
    );
    let job = services[0]["metadata"]["name"].as_str().unwrap().to_owned();
    Rendered {
        job,
        groups: one("PrometheusRule")["spec"].clone(),
    }
}

/// Every metric selector of every expression names `job`, and no other.
fn assert_scoped_to(groups: &Value, job: &str) {
    let selector = regex::Regex::new(r"(\b[a-z_]+)\{([^}]*)\}").unwrap();
    for rule in groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
    {
        let expr = rule["expr"].as_str().unwrap();
        let found: Vec<_> = selector.captures_iter(expr).collect();
        assert!(!found.is_empty(), "{}: selects by labels", rule["alert"]);
        for c in found {
            assert!(
                c[2].contains(&format!("job=\"{job}\"")),
                "{}: {} selects job {job}: {expr}",
                rule["alert"],
                &c[1]
            );
        }
    }
}

/// The recorded healthy leader's series as seen under `job`, each through
/// `edit` (which may drop a series by returning `None`).
fn series_of(
    recorded: &Value,
    job: &str,
    edit: &dyn Fn(&str, &str) -> Option<String>,
) -> Vec<Value> {
    let instance = job.trim_end_matches("-metrics");
    recorded["input_series"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| {
            let name = s["series"]
                .as_str()
                .unwrap()
                .replace(
                    &format!("job=\"{RECORDED_JOB}\""),
                    &format!("job=\"{job}\""),
                )
                .replace("instance=\"replica-", &format!("instance=\"{instance}-"));
            let values = edit(&name, s["values"].as_str().unwrap())?;
            Some(json!({"series": name, "values": values}))
        })
        .collect()
}

/// The series of a dead install: every target `up 0`, nothing else.
fn dead(name: &str, values: &str) -> Option<String> {
    name.starts_with("up{")
        .then(|| format!("0x{}", values_count(values) - 1))
}

/// The series of a leaderless install: `agent_operator_leader` 0 on every
/// replica.
fn leaderless(name: &str, values: &str) -> Option<String> {
    Some(if name.starts_with("agent_operator_leader{") {
        format!("0x{}", values_count(values) - 1)
    } else {
        values.to_owned()
    })
}

fn healthy(_: &str, values: &str) -> Option<String> {
    Some(values.to_owned())
}

/// A promtool test: `rules` loaded together, `series`, and at the last
/// sample exactly the firing alerts `firing` as (alertname, job).
fn promtool_test(
    dir: &Path,
    rules: &[String],
    series: Vec<Value>,
    firing: &[(&str, &str)],
) -> bool {
    let samples = crate::alert_series::SAMPLE_SECONDS;
    let last = series
        .iter()
        .map(|s| values_count(s["values"].as_str().unwrap()))
        .max()
        .unwrap_or(1);
    let exp: Vec<Value> = firing
        .iter()
        .map(|(a, j)| json!({"labels": format!("{{alertname=\"{a}\",job=\"{j}\"}}"), "value": 1}))
        .collect();
    let test = json!({
        "rule_files": rules,
        "evaluation_interval": format!("{samples}s"),
        "tests": [{
            "interval": format!("{samples}s"),
            "input_series": series,
            "promql_expr_test": [{
                "expr": "group by (alertname, job) (ALERTS{alertstate=\"firing\"})",
                "eval_time": format!("{}s", (last - 1) * samples),
                "exp_samples": exp,
            }],
        }],
    });
    let file = dir.join("test.json");
    std::fs::write(&file, test.to_string()).unwrap();
    let out = Command::new(test_support::prerequisites::tool("promtool"))
        .args(["test", "rules"])
        .arg(&file)
        .output()
        .expect("running promtool");
    if !out.status.success() {
        eprintln!("{}", String::from_utf8_lossy(&out.stdout));
    }
    out.status.success()
}

/// Samples in a promtool values string (`a b c`, `a+bxN`, `axN`).
fn values_count(values: &str) -> u64 {
    values
        .split_whitespace()
        .map(|v| match v.rsplit_once('x') {
            Some((_, n)) => n.parse::<u64>().map_or(1, |n| n + 1),
            None => 1,
        })
        .sum()
}

#[test]
fn chart_rules_alert_per_release_and_per_shard() {
    test_support::skip_without!(Tools);
    test_support::skip_without!(Promtool);
    let dir = tempfile::tempdir().unwrap();
    let rendered: Vec<Rendered> = RELEASES.iter().map(|(r, k)| render(r, k)).collect();
    assert_eq!(rendered[0].job, "platform-agent-operator-metrics");
    assert_eq!(rendered[1].job, "agent-operator-shard-2-metrics");
    let mut rules = Vec::new();
    for (i, r) in rendered.iter().enumerate() {
        assert_scoped_to(&r.groups, &r.job);
        let path = dir.path().join(format!("release-{i}.json"));
        std::fs::write(&path, r.groups.to_string()).unwrap();
        rules.push(path.display().to_string());
    }
    let text = std::fs::read_to_string(
        test_support::repo_root().join("deploy/prometheus/recorded/healthy-leader.yaml"),
    )
    .unwrap();
    let recorded: Value = yaml_serde::from_str(&text).unwrap();
    let (a, b) = (rendered[0].job.as_str(), rendered[1].job.as_str());
    let pair = |edit_b: &dyn Fn(&str, &str) -> Option<String>| {
        let mut series = series_of(&recorded, a, &healthy);
        series.extend(series_of(&recorded, b, edit_b));
        series
    };
    let cases: [Case; 3] = [
        ("healthy pair", pair(&healthy), vec![]),
        ("dead shard", pair(&dead), vec![("AgentOperatorDown", b)]),
        (
            "leaderless shard",
            pair(&leaderless),
            vec![("AgentOperatorNoLeader", b)],
        ),
    ];
    for (what, series, firing) in cases {
        assert!(
            promtool_test(dir.path(), &rules, series.clone(), &firing),
            "{what}: exactly {firing:?} fire"
        );
        // The same series with the alert put on the other shard must fail.
        let wrong: Vec<(&str, &str)> = match firing.first() {
            Some((alert, _)) => vec![(alert, a)],
            None => vec![("AgentOperatorDown", b)],
        };
        assert!(
            !promtool_test(dir.path(), &rules, series, &wrong),
            "{what}: a wrong expectation {wrong:?} fails"
        );
    }
}
