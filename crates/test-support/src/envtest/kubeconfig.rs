//! The kubeconfig of a test environment and the client configuration built from it.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kube::config::{KubeConfigOptions, Kubeconfig};

use super::EnvTestError;
use super::pki::{ADMIN_USER, Pki};

/// Name of the context, cluster and user in the generated kubeconfig.
pub const CONTEXT_NAME: &str = "envtest";

/// Renders a self-contained kubeconfig (certificates inlined as base64 data)
/// for `server` (`https://127.0.0.1:<port>`), with current-context [`CONTEXT_NAME`].
pub(crate) fn render(server: &str, pki: &Pki) -> String {
    let ca = STANDARD.encode(&pki.ca_cert);
    let cert = STANDARD.encode(&pki.client_cert);
    let key = STANDARD.encode(&pki.client_key);
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: {CONTEXT_NAME}
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: {CONTEXT_NAME}-{ADMIN_USER}
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
contexts:
- name: {CONTEXT_NAME}
  context:
    cluster: {CONTEXT_NAME}
    user: {CONTEXT_NAME}-{ADMIN_USER}
    namespace: default
current-context: {CONTEXT_NAME}
"
    )
}

/// Writes `contents` to `path` with mode 0600 (it holds a private key), creating
/// parent directories and replacing any existing file.
///
/// Errors: [`EnvTestError::Io`] when a directory or the file cannot be written.
pub(crate) fn write_private(path: &Path, contents: &str) -> Result<(), EnvTestError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(EnvTestError::io(format!("creating {}", parent.display())))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(EnvTestError::io(format!("writing {}", path.display())))?;
    file.write_all(contents.as_bytes())
        .map_err(EnvTestError::io(format!("writing {}", path.display())))
}

/// Reads the kubeconfig file at `path` and builds a client configuration for its
/// [`CONTEXT_NAME`] context, explicitly: never from `KUBECONFIG` or `~/.kube/config`.
///
/// Errors: [`EnvTestError::Kubeconfig`] when the file cannot be read or is invalid.
pub(crate) async fn load_config(path: &Path) -> Result<kube::Config, EnvTestError> {
    let kubeconfig = Kubeconfig::read_from(path).map_err(EnvTestError::Kubeconfig)?;
    let options = KubeConfigOptions {
        context: Some(CONTEXT_NAME.to_owned()),
        cluster: None,
        user: None,
    };
    kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(EnvTestError::Kubeconfig)
}
