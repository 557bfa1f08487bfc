//! `hack/prereqs.sh`, the first step of `make demo`, `make setup`, `make
//! lint` and `make image`: with one prerequisite taken off `PATH`, it stops
//! with exactly one line naming it and how to install it, and exit status 1;
//! with everything present it says nothing and exits 0.
//!
//! Each run gets a `PATH` of its own: a directory of symbolic links to this
//! machine's real tools, without the one under test, and without `apt-get`
//! and `sudo`, so that the script can only report, never install.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every command the script runs or looks for, as named on `PATH`.
const TOOLS: &[&str] = &[
    "bash",
    "dirname",
    "id",
    "awk",
    "cargo",
    "rustc",
    "rustup",
    "cc",
    "c++",
    "setpriv",
    "curl",
    "python3",
    "go",
    "git",
    "tar",
    "file",
    "flock",
    "strip",
    "musl-gcc",
    "cargo-fmt",
    "cargo-clippy",
    "rustfmt",
    "clippy-driver",
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where `tool` is on this machine's `PATH`, if anywhere.
fn which(tool: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(tool))
        .find(|p| p.is_file())
}

/// The executable `tool` runs: for `python3`, the interpreter itself
/// (`sys.executable`), since a version manager's shim (pyenv) needs its own
/// `PATH`; else [`which`].
fn real_tool(tool: &str) -> Option<PathBuf> {
    if tool == "python3" {
        let out = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .ok()?;
        let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        return (!path.is_empty()).then(|| PathBuf::from(path));
    }
    which(tool)
}

/// A `PATH` directory with links to every tool of [`TOOLS`] this machine
/// has, except `without`, plus `extra` (name, script text) written as
/// executable scripts.
fn path_without(dir: &Path, without: &[&str], extra: &[(&str, &str)]) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in TOOLS.iter().filter(|t| !without.contains(t)) {
        if let Some(real) = real_tool(tool) {
            symlink(real, bin.join(tool)).unwrap();
        }
    }
    for (name, text) in extra {
        let p = bin.join(name);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin
}

/// Runs `hack/prereqs.sh <target>` with `PATH=<bin>`; (exit status, stderr
/// lines).
fn prereqs(target: &str, bin: &Path) -> (i32, Vec<String>) {
    let out = Command::new(which("bash").expect("bash"))
        .arg(repo_root().join("hack/prereqs.sh"))
        .arg(target)
        .env("PATH", bin)
        .env_remove("PYTHON")
        .env_remove("KUBEBUILDER_ASSETS")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    (
        out.status.code().unwrap_or(-1),
        stderr.lines().map(str::to_owned).collect(),
    )
}

/// The positive control: with every tool of this machine on `PATH`,
/// `prereqs.sh target` passes and says nothing missing (so a failure below
/// is the missing tool's, not the machine's).
fn assert_complete(target: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (code, lines) = prereqs(target, &path_without(dir.path(), &[], &[]));
    assert_eq!(
        code, 0,
        "with every tool on PATH, `prereqs.sh {target}` must pass: {lines:#?}"
    );
    assert!(!lines.iter().any(|l| l.contains("missing")), "{lines:#?}");
}

#[test]
fn each_missing_prerequisite_of_the_demo_is_one_line_naming_it() {
    assert_complete("demo");
    for (tool, names, install) in [
        ("cc", "a C compiler (cc)", "apt-get install -y gcc"),
        ("setpriv", "setpriv", "util-linux"),
        ("curl", "curl", "apt-get install -y curl"),
        ("python3", "python3 (Python 3)", "python3-venv"),
        ("cargo", "cargo and rustc (Rust)", "https://rustup.rs"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (code, lines) = prereqs("demo", &path_without(dir.path(), &[tool], &[]));
        assert_eq!(code, 1, "without {tool}: {lines:#?}");
        assert_eq!(lines.len(), 1, "without {tool}, one line: {lines:#?}");
        let line = &lines[0];
        assert!(
            line.starts_with(&format!("missing prerequisite: {names}"))
                && line.contains("(install: ")
                && line.contains(install),
            "without {tool}: {line}"
        );
    }
}

#[test]
fn make_test_wants_python_3_11_a_cpp_compiler_and_flock() {
    assert_complete("test");
    // A Python 3.9, as Debian 11 has: the version query answers 3.9.2 and
    // the 3.11 check fails.
    let old_python = "#!/bin/sh\ncase \"$*\" in\n  *'>= (3, 11)'*) exit 1 ;;\n  \
                      *version_info*) echo 3.9.2 ;;\nesac\nexit 0\n";
    for (without, extra, names) in [
        (
            vec!["python3"],
            vec![("python3", old_python)],
            "Python 3.11 or newer for the agent server (python3 is 3.9.2)",
        ),
        (vec!["c++"], vec![], "a C++ compiler (c++)"),
        (vec!["flock"], vec![], "flock"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let bin = path_without(dir.path(), &without, &extra);
        let (code, lines) = prereqs("test", &bin);
        assert_eq!(code, 1, "without {without:?}: {lines:#?}");
        assert_eq!(lines.len(), 1, "without {without:?}, one line: {lines:#?}");
        assert!(
            lines[0].starts_with(&format!("missing prerequisite: {names}"))
                && lines[0].contains("(install: "),
            "without {without:?}: {}",
            lines[0]
        );
    }
    // Two missing: two lines, still one exit after the last check.
    let dir = tempfile::tempdir().unwrap();
    let (code, lines) = prereqs(
        "test",
        &path_without(dir.path(), &["setpriv", "flock"], &[]),
    );
    assert_eq!(code, 1);
    assert_eq!(lines.len(), 2, "{lines:#?}");
}
