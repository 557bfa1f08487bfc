//! Secrets never leak and the shipped RBAC suffices, whole suite: after the other test binaries ran
//! (`make test` runs this one last, explicitly; `make secret-scan` alone),
//! every operator and emulator log in `target/test-logs` (debug level for
//! the operator's own modules) must be free of the secret values the tests
//! use (`support::leaks::SECRETS`), as they are, JSON-escaped or base64
//! (`support::leaks::forms`). The Events and statuses of each test's
//! namespace are scanned by the tests themselves (the `Harness` drop, also
//! after the test panicked: its findings are noted in a file this scan
//! reports). The emulator receives the keys and values in the requests that
//! must carry them, and must not log them, as the service would not.
//!
//! With no log to scan it fails under `make test`
//! (`AGENT_OPERATOR_REQUIRE_PREREQUISITES=1`): a scan of nothing proves
//! nothing. A plain `cargo test` without the envtest binaries writes no
//! operator log; there it says so and passes.

mod common;
mod support;

use std::path::{Path, PathBuf};

use support::leaks;

/// The scan of the suite's logs in `dir`, after-panic notes included:
/// `Err` with what is wrong (a hit, a note, or no log at all when
/// `require_logs`).
fn scan_suite_logs(dir: &Path, require_logs: bool) -> Result<leaks::Report, String> {
    let logs = leaks::scanned_logs_in(dir);
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
    let notes: Vec<PathBuf> = leaks::logs_in(dir, |n| n.ends_with(leaks::AFTER_PANIC));
    if !notes.is_empty() {
        let text: Vec<String> = notes
            .iter()
            .map(|p| {
                format!(
                    "{}: {}",
                    p.display(),
                    std::fs::read_to_string(p).unwrap_or_default()
                )
            })
            .collect();
        return Err(format!(
            "leaks found after a test panicked:\n{}",
            text.join("\n")
        ));
    }
    if logs.is_empty() {
        if require_logs {
            return Err(format!(
                "no operator or emulator log in {}: the scan would prove nothing (run the \
                 integration tests first)",
                dir.display()
            ));
        }
        eprintln!("no operator logs yet: run the operator tests first");
    }
    if report.hits.is_empty() {
        Ok(report)
    } else {
        Err(report
            .hits
            .iter()
            .map(|h| format!("{} in {}", h.secret, h.source))
            .collect::<Vec<_>>()
            .join("\n"))
    }
}

#[test]
fn every_operator_and_emulator_log_of_the_suite_is_free_of_secret_values() {
    let result = scan_suite_logs(&support::log_dir(), test_support::prerequisites::required());
    if let Err(e) = result {
        panic!("secret scan: {e}");
    }
}

/// Positive control of the scan above: secret values planted in logs of a
/// scratch directory, in each form, are found and named (never shown), a
/// note left by a scan after a panic fails the scan, and an empty directory
/// fails it when logs are required.
#[test]
fn the_suite_scan_finds_planted_secrets_in_every_form() {
    use base64::Engine;
    let dir = tempfile::tempdir().expect("a scratch directory");
    assert!(
        scan_suite_logs(dir.path(), true).is_err(),
        "no logs: a failure"
    );
    assert!(scan_suite_logs(dir.path(), false).is_ok());

    let clean = "INFO agent_operator: reconciled name=\"a\" key=[REDACTED]\n";
    std::fs::write(dir.path().join("t-operator.log"), clean).unwrap();
    std::fs::write(dir.path().join("t-emulator.log"), clean).unwrap();
    assert!(scan_suite_logs(dir.path(), true).is_ok());

    let value = leaks::SECOND_VALUE;
    let planted = [
        format!("value={value}"),
        format!(
            "data: {}",
            base64::engine::general_purpose::STANDARD.encode(value)
        ),
        format!(
            "data: {}",
            base64::engine::general_purpose::STANDARD.encode(format!("a{value}"))
        ),
        format!(
            "token={}",
            base64::engine::general_purpose::URL_SAFE.encode(format!("x:{value}"))
        ),
    ];
    for (i, line) in planted.iter().enumerate() {
        for log in ["t-operator.log", "t-emulator.log"] {
            std::fs::write(dir.path().join(log), format!("{clean}{line}\n")).unwrap();
            let other = if log == "t-operator.log" {
                "t-emulator.log"
            } else {
                "t-operator.log"
            };
            std::fs::write(dir.path().join(other), clean).unwrap();
            let err = scan_suite_logs(dir.path(), true)
                .expect_err(&format!("planted form {i} in {log} was not found"));
            assert!(
                err.contains("SECOND_VALUE") && err.contains(&format!("{log}:2")),
                "{err}"
            );
            assert!(!err.contains(value), "the hit shows the value: {err}");
        }
    }

    std::fs::write(dir.path().join("t-operator.log"), clean).unwrap();
    std::fs::write(dir.path().join("t-emulator.log"), clean).unwrap();
    std::fs::write(
        dir.path().join(format!("ns-1{}", leaks::AFTER_PANIC)),
        "API_KEY in Event ns-1/x\n",
    )
    .unwrap();
    let err = scan_suite_logs(dir.path(), true).expect_err("a note after a panic fails the scan");
    assert!(err.contains("API_KEY in Event ns-1/x"), "{err}");
}

/// Least privilege, whole suite: the shipped RBAC is enough for every
/// operator the tests ran (all as the ServiceAccount of `deploy/`), i.e. no
/// operator log shows a request Kubernetes RBAC refused, except the tests
/// that take grants away on purpose (`rbac-nobody`, `ops-unreadable`,
/// `uninstall`).
#[test]
fn no_operator_of_the_suite_was_refused_by_rbac() {
    let logs = leaks::operator_logs_in(&support::log_dir());
    let refused: Vec<String> = logs
        .iter()
        // `rbac-nobody` is refused on purpose. A kube-apiserver that was
        // just restarted (`fault_kubernetes`' restart test) answers 403 for
        // a moment, until its RBAC authorizer's caches are filled again;
        // the operator retries and that test asserts everything converges.
        // `ops-unreadable` removes a standby's Lease RBAC on purpose, and
        // `uninstall` runs helm uninstall, which deletes the RBAC while the
        // operator still runs (its release of the Lease is then refused).
        .filter(|p| {
            !p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.starts_with("rbac-nobody-")
                    || n.starts_with("fault-kube-restart")
                    || n == "ops-unreadable-operator.log"
                    || n == "uninstall-operator.log"
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

/// The JSON-escaped forms matter for values with quotes, backslashes or
/// control characters (the suite's values have none, so for them the
/// escaped form is the value itself).
#[test]
fn escaped_forms_of_a_value_with_quotes_are_searched() {
    let forms = leaks::forms("k\"ey\\1234");
    for form in ["k\"ey\\1234", "k\\\"ey\\\\1234", "k\\\\\\\"ey\\\\\\\\1234"] {
        assert!(forms.iter().any(|f| f == form), "{form} not in {forms:?}");
    }
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
