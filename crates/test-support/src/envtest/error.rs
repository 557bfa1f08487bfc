//! The error type of the envtest harness.

use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong while starting, using or stopping a [`TestEnv`](super::TestEnv).
#[derive(Debug, thiserror::Error)]
pub enum EnvTestError {
    /// The kube-apiserver / etcd binaries were not found.
    #[error(
        "envtest binaries not found: {detail}; run hack/envtest/install.sh \
         (or set KUBEBUILDER_ASSETS to a directory holding kube-apiserver and etcd)"
    )]
    AssetsNotFound {
        /// Which directory or binary was missing.
        detail: String,
    },

    /// `setpriv` (util-linux) is needed to tie the children's lifetime to this process.
    #[error(
        "`setpriv` (util-linux) was not found on PATH; it is needed so that etcd and kube-apiserver die with this process"
    )]
    SetprivMissing(#[source] std::io::Error),

    /// A file-system or process operation failed.
    #[error("{context}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// Generating the CA, certificates or the service-account key failed.
    #[error("generating the envtest certificates")]
    Pki(#[source] rcgen::Error),

    /// A child process exited while we waited for it to become ready.
    #[error("{name} exited before it was ready ({status}); last lines of {log}:\n{log_tail}")]
    ProcessExited {
        /// `etcd` or `kube-apiserver`.
        name: &'static str,
        /// The exit status, as displayed by the OS.
        status: String,
        /// Path of the process's log file.
        log: PathBuf,
        /// The last lines of the process's log.
        log_tail: String,
    },

    /// A child process did not become ready in time.
    #[error(
        "{name} was not ready after {timeout:?} ({last_error}); last lines of {log}:\n{log_tail}"
    )]
    NotReady {
        /// `etcd` or `kube-apiserver`.
        name: &'static str,
        /// How long we waited.
        timeout: Duration,
        /// The last probe failure.
        last_error: String,
        /// Path of the process's log file.
        log: PathBuf,
        /// The last lines of the process's log.
        log_tail: String,
    },

    /// The generated kubeconfig could not be read back or turned into a client configuration.
    #[error("loading the envtest kubeconfig")]
    Kubeconfig(#[source] kube::config::KubeconfigError),

    /// The Kubernetes client could not be built or a request failed.
    #[error("{context}")]
    Kube {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: kube::Error,
    },

    /// A CRD manifest could not be parsed.
    #[error("parsing {path}")]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// The parse error.
        #[source]
        source: yaml_serde::Error,
    },

    /// A manifest document is not a `CustomResourceDefinition`.
    #[error("{path}: document {index} is a {kind}, not a CustomResourceDefinition")]
    NotACrd {
        /// The manifest file.
        path: PathBuf,
        /// Zero-based index of the YAML document in the file.
        index: usize,
        /// The document's `kind` (or `<none>`).
        kind: String,
    },

    /// Watching a CRD for the `Established` condition failed.
    #[error("watching CRD {name}")]
    Wait {
        /// The CRD's name (`<plural>.<group>`).
        name: String,
        /// The watch error.
        #[source]
        source: kube::runtime::wait::Error,
    },

    /// Group-versions of installed CRDs did not appear in the OpenAPI v3 document in time.
    #[error("{group_versions:?} not published in /openapi/v3 after {timeout:?}")]
    CrdNotPublished {
        /// The missing `<group>/<version>`s.
        group_versions: Vec<String>,
        /// How long we waited.
        timeout: Duration,
    },

    /// A CRD did not reach the `Established` condition in time.
    #[error("CRD {name} was not Established after {timeout:?}")]
    CrdNotEstablished {
        /// The CRD's name (`<plural>.<group>`).
        name: String,
        /// How long we waited.
        timeout: Duration,
    },
}

impl EnvTestError {
    /// Wraps an I/O error with what was being done.
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let context = context.into();
        move |source| Self::Io { context, source }
    }

    /// Wraps a kube error with what was being done.
    pub(crate) fn kube(context: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let context = context.into();
        move |source| Self::Kube { context, source }
    }
}
