//! Shared helpers of the integration tests: one real kube-apiserver + etcd per
//! test binary (see `test_support::envtest`), with the CRDs of `crds/` installed.
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
//! The environment also holds the operator's RBAC as shipped
//! ([`test_support::install::OPERATOR_RBAC_FILES`]: the Namespace,
//! ServiceAccount and ClusterRole of `deploy/`, namespaced objects in
//! [`OPERATOR_NAMESPACE`]); operators started by the tests impersonate its
//! ServiceAccount (see `support::OperatorProcess`).
//!
//! Binaries: `hack/envtest/install.sh` (or `KUBEBUILDER_ASSETS`).
#![allow(dead_code)] // each test binary uses a different subset of these helpers

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{OnceLock, mpsc};

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use test_support::envtest::{TestEnv, TestEnvOptions};

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

#[allow(unused_imports)] // each test binary uses a different subset
pub use crate::support::OPERATOR_NAMESPACE;

/// `<repository root>/deploy`.
pub fn deploy_dir() -> PathBuf {
    test_support::repo_root().join("deploy")
}

/// `<repository root>/crds`.
pub fn crds_dir() -> PathBuf {
    test_support::repo_root().join("crds")
}

/// The environment of this test binary, started on first use (a few seconds).
///
/// It is started on a dedicated thread that owns a tokio runtime and then parks
/// forever: each `#[tokio::test]` has its own runtime that ends with the test,
/// and the children must outlive every test but not the process (they get
/// SIGKILL through PDEATHSIG when the test binary exits).
///
/// Panics (in every test that calls it) if the environment cannot start.
/// Every test that needs it starts with
/// `test_support::skip_without!(Envtest)`, so without kube-apiserver and
/// etcd it is skipped before it gets here (and `make test` fails instead).
pub fn shared_env() -> &'static SharedEnv {
    assert!(
        test_support::prerequisites::available(test_support::prerequisites::Prerequisite::Envtest),
        "this test needs kube-apiserver and etcd but does not start with \
         test_support::skip_without!(Envtest)"
    );
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
                // The operator's ServiceAccount and RBAC as shipped: tests run
                // every operator as that ServiceAccount (impersonated), so the
                // RBAC that ships is the RBAC that is tested.
                let admin = env.client().await?;
                test_support::install::install_operator_rbac(&admin).await?;
                eprintln!(
                    "envtest: kube-apiserver at {} ready in {:?}; CRDs: {crds:?}",
                    env.server_url(),
                    env.started_in()
                );
                Ok::<_, test_support::envtest::EnvTestError>(SharedEnv { env, crds })
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

/// A new client of the shared environment that acts as the operator's
/// ServiceAccount (`deploy/base/rbac.yaml`, impersonated: user
/// `system:serviceaccount:agent-operator:agent-operator` and its groups),
/// for tests that run the controllers in-process.
pub async fn operator_client() -> kube::Client {
    let mut config = shared_env().env().config().clone();
    let who = test_support::install::operator_identity();
    config.auth_info.impersonate = Some(who.user);
    config.auth_info.impersonate_groups = Some(who.groups);
    agent_operator::controlplane::client::install_crypto_provider();
    kube::Client::try_from(config).expect("building an impersonating client")
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

/// A kube-apiserver + etcd of one test alone, with the CRDs and the
/// operator's ServiceAccount and RBAC installed as shipped (the cluster-wide
/// ClusterRole included, [`test_support::install::OPERATOR_RBAC_FILES`]):
/// for tests that run the operator cluster-wide, or stop and freeze the API
/// server, without touching the tests that share [`shared_env`].
pub async fn own_env(extra_apiserver_args: &[&str]) -> TestEnv {
    let env = TestEnv::start(TestEnvOptions {
        extra_apiserver_args: extra_apiserver_args
            .iter()
            .map(|a| (*a).to_owned())
            .collect(),
        ..TestEnvOptions::default()
    })
    .await
    .unwrap_or_else(|e| panic!("starting envtest: {:#}", anyhow::Error::from(e)));
    env.install_crds_from_dir(&crds_dir())
        .await
        .expect("installing the CRDs");
    let admin = env.client().await.expect("envtest client");
    test_support::install::install_operator_rbac(&admin)
        .await
        .expect("applying the operator's RBAC");
    env
}
