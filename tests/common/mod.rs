//! Shared helpers of the integration tests: one real kube-apiserver + etcd per
//! test binary (see `agent_operator::envtest`), with the CRDs of `crds/` installed.
//!
//! Tests never touch the developer's kube-context: every client and every
//! `kubectl` here use the environment's own kubeconfig (a temporary file with a
//! throw-away CA and an `admin` client certificate), never `KUBECONFIG` or
//! `~/.kube/config`.
//!
//! Isolation between tests is by namespace: call [`test_namespace`] at the start
//! of each test. Namespaces are not deleted afterwards (envtest runs no
//! namespace controller, so they would stay `Terminating`); the whole
//! environment vanishes when the test binary exits.
//!
//! Binaries: `hack/envtest/install.sh` (or `KUBEBUILDER_ASSETS`).
#![allow(dead_code)] // each test binary uses a different subset of these helpers

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{OnceLock, mpsc};

use agent_operator::envtest::{TestEnv, TestEnvOptions};
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

/// Label put on every namespace created by [`test_namespace`].
pub const TEST_NAMESPACE_LABEL: &str = "agentserver.dev/envtest";

/// The environment shared by all tests of one test binary.
pub struct SharedEnv {
    env: TestEnv,
    crds: Vec<String>,
}

impl SharedEnv {
    /// A new client (cluster-admin) for the current test's runtime.
    ///
    /// Panics if the client cannot be built.
    pub async fn client(&self) -> kube::Client {
        self.env.client().await.expect("building an envtest client")
    }

    /// The environment's kubeconfig file (context `envtest`).
    pub fn kubeconfig_path(&self) -> &Path {
        self.env.kubeconfig_path()
    }

    /// The underlying environment.
    pub fn env(&self) -> &TestEnv {
        &self.env
    }

    /// Names of the CRDs installed from `crds/`.
    pub fn crds(&self) -> &[String] {
        &self.crds
    }

    /// `kubectl --kubeconfig <ours>` with `KUBECONFIG` removed from its
    /// environment, or `None` when kubectl is not in the assets directory.
    pub fn kubectl(&self) -> Option<Command> {
        let mut command = Command::new(self.env.kubectl_path()?);
        command
            .env_remove("KUBECONFIG")
            .arg("--kubeconfig")
            .arg(self.kubeconfig_path());
        Some(command)
    }
}

/// `<repository root>/crds`.
pub fn crds_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("crds")
}

/// The environment of this test binary, started on first use (a few seconds).
///
/// It is started on a dedicated thread that owns a tokio runtime and then parks
/// forever: each `#[tokio::test]` has its own runtime that ends with the test,
/// and the children must outlive every test but not the process (they get
/// SIGKILL through PDEATHSIG when the test binary exits).
///
/// Panics (in every test that calls it) if the environment cannot start.
pub fn shared_env() -> &'static SharedEnv {
    static SHARED: OnceLock<Result<SharedEnv, String>> = OnceLock::new();
    match SHARED.get_or_init(start_shared_env) {
        Ok(env) => env,
        Err(e) => panic!("the envtest control plane did not start: {e}"),
    }
}

fn start_shared_env() -> Result<SharedEnv, String> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("envtest".to_owned())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("building the envtest runtime");
            let started = runtime.block_on(async {
                let env = TestEnv::start(TestEnvOptions::default()).await?;
                let crds = env.install_crds_from_dir(&crds_dir()).await?;
                eprintln!(
                    "envtest: kube-apiserver at {} ready in {:?}; CRDs: {crds:?}",
                    env.server_url(),
                    env.started_in()
                );
                Ok::<_, agent_operator::envtest::EnvTestError>(SharedEnv { env, crds })
            });
            let _ = tx.send(started.map_err(|e| format!("{:#}", anyhow::Error::from(e))));
            loop {
                std::thread::park();
            }
        })
        .map_err(|e| format!("spawning the envtest thread: {e}"))?;
    rx.recv()
        .map_err(|_| "the envtest thread panicked".to_owned())?
}

/// A new client of the shared environment for the current test's runtime.
pub async fn client() -> kube::Client {
    shared_env().client().await
}

/// The shared environment's kubeconfig file.
pub fn kubeconfig_path() -> &'static Path {
    shared_env().kubeconfig_path()
}

/// Creates a namespace named `<prefix>-<8 random hex digits>` (prefix made a
/// valid DNS label, at most 40 characters) and returns its name.
///
/// Panics if the API server refuses it.
pub async fn test_namespace(client: &kube::Client, prefix: &str) -> String {
    let mut label: String = prefix
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(40)
        .collect();
    label = label.trim_matches('-').to_owned();
    if label.is_empty() {
        label.push_str("test");
    }
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let name = format!("{label}-{suffix}");
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some([(TEST_NAMESPACE_LABEL.to_owned(), label)].into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap_or_else(|e| panic!("creating test namespace {name}: {e}"));
    name
}
