//! The metrics reference, generated from the registry itself: a registry
//! as the operator builds it, fed one sample of each source that fills
//! metrics at scrape time (an AgentControlPlane, a kind's Ready counts, a
//! drift count, one attempt of every operation, a leader renewal), encoded
//! as `/metrics` serves it, and read back: each metric's name, type, help
//! and labels with the values the operator can give them.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use super::cell;
use crate::controlplane::PlaneLabel;
use crate::metrics::{DriftSample, Metrics, PlaneSample, ReadyCounts};

/// The label values that stand for "the AgentControlPlane's namespace" and
/// "its name" in the sample.
const NAMESPACE: &str = "$namespace";
const NAME: &str = "$name";

/// One metric family read from OpenMetrics text.
#[derive(Debug, Default, PartialEq)]
struct Family {
    kind: String,
    help: String,
    unit: String,
    labels: BTreeMap<String, Vec<String>>,
}

/// The families of an OpenMetrics text, by name, in order of appearance.
fn families(text: &str) -> Vec<(String, Family)> {
    let mut out: Vec<(String, Family)> = Vec::new();
    let label = regex::Regex::new(r#"([a-z_]+)="([^"]*)""#).expect("a valid pattern");
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut words = rest.splitn(3, ' ');
            let (Some(what), Some(name)) = (words.next(), words.next()) else {
                continue;
            };
            let value = words.next().unwrap_or_default().to_owned();
            if !out.iter().any(|(n, _)| n == name) {
                out.push((name.to_owned(), Family::default()));
            }
            let family = &mut out.iter_mut().find(|(n, _)| n == name).expect("added").1;
            match what {
                "TYPE" => family.kind = value,
                "HELP" => family.help = value,
                "UNIT" => family.unit = value,
                _ => {}
            }
            continue;
        }
        let name = line.split(['{', ' ']).next().unwrap_or_default();
        // The longest family name the sample's name starts with
        // (`x_total`, `x_bucket`, `x_sum`, `x_count` belong to `x`).
        let Some((_, family)) = out
            .iter_mut()
            .filter(|(n, _)| name.starts_with(n.as_str()))
            .max_by_key(|(n, _)| n.len())
        else {
            continue;
        };
        if let Some(labels) = line.split_once('{').and_then(|(_, r)| r.split_once('}')) {
            for c in label.captures_iter(labels.0) {
                if &c[1] == "le" {
                    continue;
                }
                let values = family.labels.entry(c[1].to_owned()).or_default();
                if !values.iter().any(|v| v == &c[2]) {
                    values.push(c[2].to_owned());
                }
            }
        }
    }
    out
}

fn render(families: &[(String, Family)]) -> String {
    let mut out = String::from("| Metric | Type | Labels | What |\n|---|---|---|---|\n");
    for (name, family) in families {
        let shown = if family.kind == "counter" {
            format!("{name}_total")
        } else {
            name.clone()
        };
        let labels: Vec<String> = family
            .labels
            .iter()
            .map(|(label, values)| {
                let mut values = values.clone();
                values.sort();
                (label, values)
            })
            .map(|(label, values)| match values.as_slice() {
                [v] if v == NAMESPACE => format!("`{label}` (the AgentControlPlane's namespace)"),
                [v] if v == NAME => format!("`{label}` (the AgentControlPlane's name)"),
                _ => format!(
                    "`{label}`: {}",
                    values
                        .iter()
                        .map(|v| format!("`{v}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
            .collect();
        let labels = if labels.is_empty() {
            "none".to_owned()
        } else {
            labels.join("; ")
        };
        let _ = writeln!(
            out,
            "| `{shown}` | {} | {} | {} |",
            family.kind,
            cell(&labels),
            cell(&family.help)
        );
    }
    out
}

/// The table of every metric `/metrics` serves. Marks the leader Lease as
/// renewed in this process (the metric of its age shows only then): call
/// it from the generator, not from a running operator.
pub fn table() -> String {
    let metrics = Metrics::new();
    let plane = PlaneLabel {
        namespace: NAMESPACE.to_owned(),
        name: NAME.to_owned(),
    };
    for kind in crate::metrics::KINDS {
        metrics.track_ready(kind, ReadyCounts::default);
    }
    let sample = PlaneSample {
        plane: plane.clone(),
        rate: Some(1.0),
        ceiling: Some(1.0),
        pause_seconds: 0.0,
        running: 0,
        waiting: 0,
        deferred: 0,
        deferred_total: 0,
    };
    metrics.track_planes(move || vec![sample.clone()]);
    let drift = DriftSample {
        plane: plane.clone(),
        drifted: 0,
    };
    metrics.track_drift(move || vec![drift.clone()]);
    let observer = metrics.request_observer();
    for operation in crate::controlplane::operation::Operation::ALL {
        observer.observe(operation.as_str(), "2xx", Duration::ZERO);
    }
    crate::leader::renewed_now();
    let text = metrics.encode().unwrap_or_default();
    render(&families(&text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_and_their_label_values_are_read_from_the_text() {
        let text = "# HELP x_requests Requests.\n# TYPE x_requests counter\n\
                    x_requests_total{op=\"get\",class=\"2xx\"} 0\n\
                    x_requests_total{op=\"put\",class=\"2xx\"} 0\n\
                    # HELP x_wait Waits.\n# TYPE x_wait histogram\n# UNIT x_wait seconds\n\
                    x_wait_bucket{namespace=\"$namespace\",le=\"1.0\"} 0\n\
                    x_wait_sum{namespace=\"$namespace\"} 0\n\
                    # HELP x_leader Leader.\n# TYPE x_leader gauge\nx_leader 1\n# EOF\n";
        let text = render(&families(text));
        assert!(
            text.contains(
                "| `x_requests_total` | counter | `class`: `2xx`; `op`: `get`, `put` | Requests. |"
            ),
            "{text}"
        );
        assert!(
            text.contains("| `x_wait` | histogram | `namespace` (the AgentControlPlane's namespace) | Waits. |"),
            "{text}"
        );
        assert!(
            text.contains("| `x_leader` | gauge | none | Leader. |"),
            "{text}"
        );
    }
}
