//! The alerts reference: every rule of `deploy/prometheus/alerts.yaml`
//! with its group, what makes it fire (its summary, the expression), how
//! long it must hold and its severity.

use std::fmt::Write as _;

use serde_json::Value;

use super::cell;

/// The table of alerts of the rule file `rules_yaml`.
pub fn table(rules_yaml: &str) -> anyhow::Result<String> {
    let rules: Value = yaml_serde::from_str(rules_yaml)?;
    let groups = rules["groups"]
        .as_array()
        .ok_or_else(|| anyhow::anyhow!("the rule file has no groups"))?;
    let mut out = String::from(
        "| Alert | Group | Fires when | Expression | For | Severity |\n|---|---|---|---|---|---|\n",
    );
    for group in groups {
        let name = group["name"].as_str().unwrap_or_default();
        for rule in group["rules"].as_array().into_iter().flatten() {
            let Some(alert) = rule["alert"].as_str() else {
                continue;
            };
            let expr = rule["expr"].as_str().unwrap_or_default();
            let _ = writeln!(
                out,
                "| `{alert}` | {name} | {} | `{}` | {} | {} |",
                cell(rule["annotations"]["summary"].as_str().unwrap_or_default()),
                cell(expr).replace('`', "'"),
                rule["for"].as_str().unwrap_or("–"),
                rule["labels"]["severity"].as_str().unwrap_or("–"),
            );
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_alerting_rule_is_a_row() {
        let rules = "groups:\n  - name: g\n    rules:\n      - record: r\n        expr: x\n      - alert: A\n        expr: up{job=\"j\"} == 0 or b > 1 | 2\n        for: 5m\n        labels: {severity: critical}\n        annotations: {summary: \"No replica is up.\"}\n";
        let text = table(rules).unwrap();
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(
            text.contains("| `A` | g | No replica is up. | `up{job=\"j\"} == 0 or b > 1 \\| 2` | 5m | critical |"),
            "{text}"
        );
    }
}
