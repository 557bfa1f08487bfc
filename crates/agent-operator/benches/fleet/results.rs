//! The results file: every figure the gate judged is recorded, and at the
//! end of a run one row per scenario is appended to
//! `crates/agent-operator/benches/results.jsonl`
//! ([`agent_operator::docgen::bench::Row`]), from which
//! docs/BENCHMARKS.md's table is generated (`make generate`).

use std::io::Write as _;
use std::sync::Mutex;

use agent_operator::docgen::bench::{Figure, Row, worst_mark};

/// Every figure judged so far, with the label of its phase or scenario.
static FIGURES: Mutex<Vec<(String, Figure)>> = Mutex::new(Vec::new());

/// The resources (N) of each scenario label judged so far.
static COUNTS: Mutex<Vec<(String, u64)>> = Mutex::new(Vec::new());

/// Records that the scenario `label` ran on `n` resources (its row's N
/// when the label does not say `N=`).
pub fn count(label: &str, n: usize) {
    COUNTS
        .lock()
        .expect("not poisoned")
        .push((label.to_owned(), n as u64));
}

/// Records one judged figure; `what` is `"<scenario label>: <figure>"`.
pub fn record(what: &str, value: f64, target: String, mark: &str) {
    let mark = mark.split(' ').next().unwrap_or(mark).to_owned();
    push(what, value, target, mark);
}

/// Records one figure shown without a target or mark (a measurement that
/// explains the judged ones); `what` as for [`record`].
pub fn note(what: &str, value: f64) {
    push(what, value, String::new(), String::new());
}

/// Keeps a figure for its scenario's row.
fn push(what: &str, value: f64, target: String, mark: String) {
    let (scenario, name) = what.split_once(": ").unwrap_or((what, what));
    let figure = Figure {
        name: name.to_owned(),
        value,
        target,
        mark,
    };
    FIGURES
        .lock()
        .expect("not poisoned")
        .push((scenario.to_owned(), figure));
}

fn output(program: &str, args: &[&str]) -> String {
    std::process::Command::new(program)
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_owned());
    match std::env::var("BENCH_MACHINE") {
        Ok(note) if !note.is_empty() => format!("{cpu}, {note}"),
        _ => cpu,
    }
}

/// The rows of the figures recorded, one per scenario label in order.
pub fn rows(command: &str) -> Vec<Row> {
    let figures = FIGURES.lock().expect("not poisoned");
    let counts = COUNTS.lock().expect("not poisoned");
    let counted = |scenario: &str| {
        counts
            .iter()
            .rev()
            .find(|(label, _)| label == scenario)
            .map_or(0, |(_, n)| *n)
    };
    let n_of = regex::Regex::new(r"N=([0-9]+)").expect("a valid pattern");
    let mut commit = output("git", &["rev-parse", "--short", "HEAD"]);
    if !output("git", &["status", "--porcelain", "--untracked-files=no"]).is_empty() {
        commit.push_str("-dirty");
    }
    let (machine, date) = (machine(), output("date", &["-u", "+%F"]));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let mut rows: Vec<Row> = Vec::new();
    for (scenario, figure) in figures.iter() {
        if rows.last().is_none_or(|r| &r.scenario != scenario) {
            rows.push(Row {
                scenario: scenario.clone(),
                n: n_of
                    .captures(scenario)
                    .and_then(|c| c[1].parse().ok())
                    .unwrap_or_else(|| counted(scenario)),
                figures: Vec::new(),
                gate: String::new(),
                machine: machine.clone(),
                cores,
                date: date.clone(),
                commit: commit.clone(),
                command: command.to_owned(),
            });
        }
        let row = rows.last_mut().expect("pushed");
        row.figures.push(figure.clone());
        row.gate = worst_mark(&row.figures);
    }
    rows
}

/// Appends the rows of this run to the results file.
pub fn append(command: &str) -> std::io::Result<()> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/results.jsonl");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    for row in rows(command) {
        writeln!(file, "{}", serde_json::to_string(&row)?)?;
    }
    eprintln!(
        "fleet: figures appended to {path} (`make generate` shows them in docs/BENCHMARKS.md)"
    );
    Ok(())
}
