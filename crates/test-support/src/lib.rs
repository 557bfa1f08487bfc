//! Test infrastructure of agent-operator, kept out of the product crate:
//!
//! - [`envtest`]: a real kube-apiserver and etcd on loopback (Go's envtest,
//!   in Rust), with a throw-away PKI, CRD installation, impersonating
//!   kubeconfigs, and a clear error naming `hack/envtest/install.sh` when
//!   the binaries are missing;
//! - [`prerequisites`]: what a test does when kube-apiserver, the agent
//!   server or the image is missing ([`skip_without!`] says how to get it and
//!   skips; `make test` fails instead);
//! - [`budget`]: the request-budget guard every integration test ends with
//!   (the emulator's request log against a [`budget::Budget`]);
//! - [`client_log`]: what the operator's control plane client sent around
//!   the first 429, read from its log (in flight, sent after);
//! - [`langgraph`]: the real agent server (`langgraph dev`) serving
//!   `fixtures/echo-agent`;
//! - [`install`]: the operator's RBAC as shipped and a team's
//!   AgentControlPlane, installed in a cluster;
//! - [`manifests`]: AgentDeployment manifests, one builder for the tests
//!   and the fleet benchmark;
//! - [`binaries`]: the `control-plane-emulator` binary, built on first use
//!   (for the fleet benchmark; the tests run the emulator in-process);
//! - [`repo_root`] and [`log_dir`], where fixtures and logs live.
//!
//! The binary `testenv` (used by `make demo`) runs an envtest API server
//! with the CRDs installed until Ctrl-C, or around a command.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

pub mod binaries;
pub mod budget;
pub mod client_log;
pub mod envtest;
pub mod install;
pub mod langgraph;
pub mod manifests;
pub mod prerequisites;
pub mod tls;

/// The repository root (the workspace directory, two levels above this
/// crate's manifest at compile time, `crates/test-support`): `crds/`,
/// `deploy/`, `docs/`, `hack/`, `.cache/` and `target/` are found from here.
pub fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .expect("crates/test-support has a grandparent")
}

/// This crate's `fixtures/` directory (e.g. `echo-agent`, the agent
/// that [`langgraph`] serves), as an absolute path.
pub const FIXTURES_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures");

/// `target/test-logs` under [`repo_root`], where every child process of the
/// tests logs (`<test>-<what>.log`) and the secret scan looks.
pub fn log_dir() -> PathBuf {
    repo_root().join("target/test-logs")
}

/// `<log_dir>/<test>-<what>.log`: the log of one child (operator, emulator,
/// agent server) of one test.
pub fn log_path(test: &str, what: &str) -> PathBuf {
    log_dir().join(format!("{test}-{what}.log"))
}

/// Creates (or truncates) [`log_path`], creating [`log_dir`] first. Panics
/// when either cannot be created.
pub fn log_file(test: &str, what: &str) -> std::fs::File {
    std::fs::create_dir_all(log_dir()).expect("creating target/test-logs");
    std::fs::File::create(log_path(test, what)).expect("creating a log file")
}

/// An HTTP client for the emulator's admin routes and loopback servers:
/// 10 s timeout, rustls' `ring` provider installed first.
pub fn admin_http() -> reqwest::Client {
    envtest::install_crypto_provider();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("building an HTTP client")
}
