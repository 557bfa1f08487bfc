//! Binaries of other workspace crates that tests run as child processes.
//!
//! Cargo tells a test only where its *own* package's binaries are
//! (`CARGO_BIN_EXE_<name>`); the operator's integration tests also run the
//! emulator's binary, from another package of the workspace. It is built
//! (or found fresh) with `cargo build` through `escargot` the first time a
//! test process asks, in the profile of the caller (debug for tests,
//! release for benchmarks), so a test never runs a stale emulator.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Path of the `control-plane-emulator` binary of this workspace, built by
/// `cargo build -p control-plane-emulator` on the first call in a process
/// (a no-op when it is fresh: under a second). Panics with cargo's message
/// when the build fails.
pub fn emulator() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| build("control-plane-emulator", "control-plane-emulator"))
}

fn build(package: &str, bin: &str) -> PathBuf {
    let built = escargot::CargoBuild::new()
        .manifest_path(crate::repo_root().join("Cargo.toml"))
        .package(package)
        .bin(bin)
        .current_release()
        .run()
        .unwrap_or_else(|e| panic!("building {bin} with cargo: {e}"));
    built.path().to_owned()
}
