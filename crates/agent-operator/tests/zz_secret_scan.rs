//! Secrets never leak and the shipped RBAC suffices, whole suite: after the other test binaries ran
//! (`make test` runs this one last, explicitly; `make secret-scan` alone),
//! every operator log in `target/test-logs` (debug level for the operator's
//! own modules) must be free of the secret values the tests use
//! (`support::leaks::SECRETS`). The Events and statuses of each test's
//! namespace are scanned by the tests themselves (the `Harness` drop).
//! Emulator logs are not scanned: the emulator receives the keys and values
//! in the requests that must carry them.

mod common;
mod support;

use support::leaks;

#[test]
fn every_operator_log_of_the_suite_is_free_of_secret_values() {
    let dir = support::log_dir();
    let logs = leaks::operator_logs_in(&dir);
    let report = leaks::scan_files(&logs);
    let at_debug = logs
        .iter()
        .filter(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains("DEBUG")))
        .count();
    eprintln!(
        "{} in {}; {at_debug} of the logs at debug level",
        report.summary(),
        dir.display()
    );
    if logs.is_empty() {
        eprintln!("no operator logs yet: run the operator tests first");
    }
    report.assert_clean();
}

/// Least privilege, whole suite: the shipped RBAC is enough for every
/// operator the tests ran (all as the ServiceAccount of `deploy/`), i.e. no
/// operator log shows a request Kubernetes RBAC refused, except the one test
/// that runs an operator without any grant on purpose (`rbac-nobody`).
#[test]
fn no_operator_of_the_suite_was_refused_by_rbac() {
    let logs = leaks::operator_logs_in(&support::log_dir());
    let refused: Vec<String> = logs
        .iter()
        // `rbac-nobody` is refused on purpose. A kube-apiserver that was
        // just restarted (`fault_kubernetes`' restart test) answers 403 for
        // a moment, until its RBAC authorizer's caches are filled again;
        // the operator retries and that test asserts everything converges.
        .filter(|p| {
            !p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.starts_with("rbac-nobody-") || n.starts_with("fault-kube-restart")
            })
        })
        .filter(|p| {
            std::fs::read_to_string(p).is_ok_and(|t| {
                t.contains("is forbidden: User \\\"system:serviceaccount:")
                    || t.contains("is forbidden: User \"system:serviceaccount:")
            })
        })
        .map(|p| p.display().to_string())
        .collect();
    eprintln!(
        "rbac: {} operator logs, {} with a 403 from RBAC",
        logs.len(),
        refused.len()
    );
    assert!(refused.is_empty(), "refused by RBAC: {refused:?}");
}

#[test]
fn the_scanner_names_the_secret_it_finds() {
    let hits = leaks::scan_text("x.log", "ok\nheader X-Api-Key: test-api-key\n");
    assert_eq!(
        hits,
        vec![leaks::Hit {
            source: "x.log:2".to_owned(),
            secret: "API_KEY"
        }]
    );
    assert!(leaks::scan_text("x.log", "cp-api-key test-api\n").is_empty());
}

#[test]
fn the_secret_list_has_no_duplicates_or_trivial_values() {
    let mut values: Vec<&str> = leaks::SECRETS.iter().map(|(_, v)| *v).collect();
    values.sort_unstable();
    values.dedup();
    assert_eq!(values.len(), leaks::SECRETS.len());
    assert!(
        values.iter().all(|v| v.len() >= 8),
        "values short enough to match by chance"
    );
}

/// Logs a machine can read, whole suite: no log file the suite wrote
/// (operators, emulators, `testenv`, the agent server aside) carries
/// an ANSI escape sequence; colours are for terminals only
/// (`telemetry::colour_on_stderr`).
#[test]
fn no_log_of_the_suite_carries_ansi_colour_codes() {
    let dir = support::log_dir();
    let logs = leaks::logs_in(&dir, |n| {
        n.ends_with(".log") && !n.ends_with("-langgraph.log")
    });
    let coloured: Vec<String> = logs
        .iter()
        .filter(|p| std::fs::read(p).is_ok_and(|b| b.contains(&0x1b)))
        .map(|p| p.display().to_string())
        .collect();
    eprintln!(
        "{} logs checked for ANSI codes in {}",
        logs.len(),
        dir.display()
    );
    assert!(
        coloured.is_empty(),
        "logs with ANSI escape codes: {coloured:?}"
    );
}
