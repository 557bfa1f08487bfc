//! Without kube-apiserver and etcd, a test that needs them passes over
//! itself and says once how to get them; with
//! `AGENT_OPERATOR_REQUIRE_PREREQUISITES=1` (`make test`) it fails instead.
//! (The same mechanism serves the agent server, the tools and the image,
//! see `test_support::prerequisites`.)
//!
//! The test runs this binary again as a child, on [`probe`] alone, with
//! `KUBEBUILDER_ASSETS` pointing at an empty directory.

use std::process::{Command, Output};

use test_support::prerequisites::REQUIRE_ENV;

/// Marks the child run: [`probe`] does nothing in an ordinary run.
const PROBE_ENV: &str = "ENVTEST_SKIP_PROBE";

fn run_probe(require: Option<&str>) -> Output {
    let empty = tempfile::tempdir().expect("a temporary directory");
    let mut command = Command::new(std::env::current_exe().expect("this test binary"));
    command
        .args([
            "--exact",
            "probe",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("KUBEBUILDER_ASSETS", empty.path())
        .env(PROBE_ENV, "1")
        .env_remove(REQUIRE_ENV);
    if let Some(value) = require {
        command.env(REQUIRE_ENV, value);
    }
    command.output().expect("running this test binary again")
}

#[test]
fn without_the_binaries_a_test_passes_over_itself_and_says_how_to_get_them() {
    let out = run_probe(None);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("1 passed"), "{stdout}");
    assert!(!stdout.contains("ran past the skip"), "{stdout}");
    assert!(stderr.contains("has no kube-apiserver"), "{stderr}");
    assert!(stderr.contains("make setup"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn when_required_a_missing_api_server_fails_the_test() {
    for value in ["1", "true"] {
        let out = run_probe(Some(value));
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.status.success(), "{REQUIRE_ENV}={value}:\n{text}");
        assert!(text.contains("failure, not a skip"), "{text}");
        assert!(text.contains("make setup"), "{text}");
    }
}

/// The child's test: skipped without envtest, else it says so.
#[test]
#[ignore = "run as a child process by the tests above"]
fn probe() {
    if std::env::var_os(PROBE_ENV).is_none() {
        return;
    }
    test_support::skip_without!(Envtest);
    println!("ran past the skip");
}
