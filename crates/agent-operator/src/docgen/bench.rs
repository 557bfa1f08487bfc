//! The benchmark results: `make bench-fleet` appends one row per scenario
//! to [`super::inputs::BENCH_RESULTS`] (one JSON object per line), and
//! docs/BENCHMARKS.md shows the newest row of each scenario, N and
//! machine ([`table`]). The history is the file's own, in git.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::cell;

/// One figure of a scenario, as the benchmark's gate judged it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// What was measured, e.g. `requests/resource`.
    pub name: String,
    /// The value measured.
    pub value: f64,
    /// The target, e.g. `≤ 3`; empty for a figure without one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub target: String,
    /// `PASS`, `OVER` (beyond the target, within its margin), `UNDER`
    /// (below an "at least" target, within its margin) or `FAIL`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mark: String,
}

/// One scenario of one benchmark run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// The scenario, e.g. `s1 declared`, `s5`, `agents`.
    pub scenario: String,
    /// Resources of the scenario (AgentDeployments).
    pub n: u64,
    /// Its figures.
    pub figures: Vec<Figure>,
    /// The worst mark of its figures: `PASS`, `OVER`, `FAIL`; empty when
    /// nothing was gated.
    #[serde(default)]
    pub gate: String,
    /// The machine, e.g. `AMD EPYC 7B13, shared`.
    pub machine: String,
    /// CPU cores available to the run.
    pub cores: u32,
    /// The day of the run (UTC), `YYYY-MM-DD`.
    pub date: String,
    /// The commit measured (short hash; `-dirty` when the tree had
    /// changes).
    pub commit: String,
    /// The command that ran it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub command: String,
}

/// The worst of the marks of `figures` (`FAIL` over `OVER`/`UNDER` over
/// `PASS`); empty when none has a mark.
pub fn worst_mark(figures: &[Figure]) -> String {
    let rank = |m: &str| match m {
        "FAIL" => 3,
        "OVER" | "UNDER" => 2,
        "PASS" => 1,
        _ => 0,
    };
    figures
        .iter()
        .map(|f| f.mark.as_str())
        .max_by_key(|m| rank(m))
        .filter(|m| rank(m) > 0)
        .unwrap_or_default()
        .to_owned()
}

/// Reads the results file: one [`Row`] per non-empty line.
pub fn parse(text: &str) -> anyhow::Result<Vec<Row>> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map_err(|e| anyhow::anyhow!("benchmark results, line {}: {e}", i + 1))
        })
        .collect()
}

fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e12 {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The newest row of each scenario, N and machine, as a Markdown table,
/// scenarios in their order of first appearance.
pub fn table(rows: &[Row]) -> String {
    let mut latest: BTreeMap<(String, u64, String), (usize, &Row)> = BTreeMap::new();
    let mut first_seen: BTreeMap<String, usize> = BTreeMap::new();
    for (i, row) in rows.iter().enumerate() {
        let order = *first_seen.entry(row.scenario.clone()).or_insert(i);
        latest.insert(
            (row.scenario.clone(), row.n, row.machine.clone()),
            (order, row),
        );
    }
    let mut shown: Vec<(usize, &Row)> = latest.into_values().collect();
    shown.sort_by(|a, b| (a.0, a.1.n, &a.1.machine).cmp(&(b.0, b.1.n, &b.1.machine)));
    let mut out = String::from(
        "| Scenario | N | Figures (target) | Gate | Machine, cores | Date | Commit |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for (_, row) in shown {
        let figures: Vec<String> = row
            .figures
            .iter()
            .map(|f| {
                let target = if f.target.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", f.target)
                };
                format!("{} {}{target}", f.name, number(f.value))
            })
            .collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {}, {} | {} | `{}` |",
            cell(&row.scenario),
            row.n,
            cell(&figures.join("; ")),
            if row.gate.is_empty() {
                "–"
            } else {
                &row.gate
            },
            cell(&row.machine),
            row.cores,
            row.date,
            row.commit
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(scenario: &str, machine: &str, commit: &str, value: f64) -> Row {
        Row {
            scenario: scenario.into(),
            n: 500,
            figures: vec![Figure {
                name: "requests/resource".into(),
                value,
                target: "≤ 3".into(),
                mark: "PASS".into(),
            }],
            gate: "PASS".into(),
            machine: machine.into(),
            cores: 2,
            date: "2026-11-29".into(),
            commit: commit.into(),
            command: String::new(),
        }
    }

    #[test]
    fn the_table_shows_the_newest_row_per_scenario_and_machine() {
        let rows = [
            row("s1 declared", "a", "1111111", 2.5),
            row("s5", "a", "2222222", 2.0),
            row("s1 declared", "a", "3333333", 2.03),
            row("s1 declared", "b", "4444444", 2.1),
        ];
        let text = table(&rows);
        assert!(!text.contains("1111111"), "{text}");
        assert!(text.contains("requests/resource 2.03 (≤ 3)"), "{text}");
        let order: Vec<&str> = text
            .lines()
            .skip(2)
            .map(|l| l.split(" | ").next().unwrap())
            .collect();
        assert_eq!(order, ["| s1 declared", "| s1 declared", "| s5"]);
    }

    #[test]
    fn rows_round_trip_and_a_bad_line_is_named() {
        let line = serde_json::to_string(&row("s5", "a", "abc", 1.0)).unwrap();
        assert_eq!(parse(&format!("{line}\n\n")).unwrap().len(), 1);
        let err = parse(&format!("{line}\n{{\n")).unwrap_err().to_string();
        assert!(err.contains("line 2"), "{err}");
    }

    #[test]
    fn the_worst_mark_is_the_gate() {
        let mut figures = row("s5", "a", "c", 1.0).figures;
        assert_eq!(worst_mark(&figures), "PASS");
        figures.push(Figure {
            mark: "FAIL".into(),
            ..figures[0].clone()
        });
        assert_eq!(worst_mark(&figures), "FAIL");
        assert_eq!(worst_mark(&[]), "");
    }
}
