//! Binaries of other workspace crates that run as child processes.
//!
//! Cargo tells a test or bench only where its *own* package's binaries are
//! (`CARGO_BIN_EXE_<name>`). The operator's fleet benchmark also runs the
//! emulator's release binary, from another package of the workspace: it is
//! built (or found fresh) with `cargo build` through `escargot` the first
//! time a process asks, in the caller's profile (release under `cargo
//! bench`), so a benchmark never runs a stale emulator. (The integration
//! tests run the emulator in their own process instead, see
//! `EmulatorProcess` in `crates/agent-operator/tests/support`: a nested
//! build resolves features apart from the test build and would compile part
//! of the dependency tree twice.)

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
