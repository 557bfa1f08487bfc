//! The secret-leak scan: the API keys and Secret values the tests use
//! ([`SECRETS`], one list for the whole suite) must never show in what the
//! operator writes for people to read: its log (debug level for its own
//! modules), Events, and the status of every AgentDeployment,
//! AgentControlPlane and AgentListener. They may only travel in the requests
//! that must carry them (the `X-Api-Key` header and the `secrets[].value`
//! of create and patch bodies), which the emulator receives and whose logs
//! (`*-emulator.log`) are not scanned.
//!
//! [`super::Harness`] runs [`check_namespace_blocking`] when it is dropped
//! (the test namespace's Events and statuses plus every operator log this
//! test binary wrote so far), tests without a harness call
//! [`assert_no_leaks`] at their end; `crates/agent-operator/tests/zz_secret_scan.rs` scans every operator
//! log in `target/test-logs` after the suite (`make test`, `make
//! secret-scan`).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use agent_operator::api::{AgentControlPlane, AgentDeployment, AgentListener};
use kube::Api;
use kube::api::ListParams;
use serde::Serialize;

/// The workspace key of [`super::API_KEY`]'s emulator, as a list entry.
pub const API_KEY: &str = super::API_KEY;
/// A wrong API key (`operator_control_plane`): sent, rejected with 401.
pub const WRONG_API_KEY: &str = "a-wrong-key";
/// The first value of a rotated Secret key (`operator_secrets`).
pub const FIRST_VALUE: &str = "sk-first-4f1b9c";
/// The second value of a rotated Secret key (`operator_secrets`).
pub const SECOND_VALUE: &str = "sk-second-8d2e7a";
/// A Secret value the resource does not reference (`operator_secrets`).
pub const UNREFERENCED_VALUE: &str = "not-the-key";
/// The Secret value of the end-to-end test's `OPENAI_API_KEY`.
pub const E2E_OPENAI_KEY: &str = "sk-test-value";
/// The key of the AgentControlPlane status tests' workspace.
pub const CONTROL_PLANE_KEY: &str = "acp-status-key";
/// The key of another workspace (`control_plane_status`).
pub const OTHER_WORKSPACE_KEY: &str = "acp-other-workspace-key";
/// A key the emulator does not know (`control_plane_status`).
pub const UNKNOWN_KEY: &str = "wrong-key-4f8d2c";
/// A key the emulator revoked (`control_plane_status`).
pub const REVOKED_KEY: &str = "revoked-key";
/// The key of the enterprise workspace (`listener_status`).
pub const LISTENER_ENTERPRISE_KEY: &str = "listener-enterprise-key";
/// The key of the non-enterprise workspace (`listener_status`).
pub const LISTENER_PLAIN_KEY: &str = "listener-plain-key";

/// The agent server key of `operator_verify` (`spec.verify.apiKeySecretRef`).
pub const VERIFY_KEY: &str = "agent-server-key-7c3e1a";

/// Every secret value of the operator tests, by constant name.
pub const SECRETS: &[(&str, &str)] = &[
    ("API_KEY", API_KEY),
    ("WRONG_API_KEY", WRONG_API_KEY),
    ("FIRST_VALUE", FIRST_VALUE),
    ("SECOND_VALUE", SECOND_VALUE),
    ("UNREFERENCED_VALUE", UNREFERENCED_VALUE),
    ("E2E_OPENAI_KEY", E2E_OPENAI_KEY),
    ("CONTROL_PLANE_KEY", CONTROL_PLANE_KEY),
    ("OTHER_WORKSPACE_KEY", OTHER_WORKSPACE_KEY),
    ("UNKNOWN_KEY", UNKNOWN_KEY),
    ("REVOKED_KEY", REVOKED_KEY),
    ("LISTENER_ENTERPRISE_KEY", LISTENER_ENTERPRISE_KEY),
    ("LISTENER_PLAIN_KEY", LISTENER_PLAIN_KEY),
    ("VERIFY_KEY", VERIFY_KEY),
];

/// Operator log files written by this test binary so far.
static LOGS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Registers an operator log file for [`registered_logs`].
pub fn register_log(path: &Path) {
    let mut logs = LOGS.lock().unwrap_or_else(|e| e.into_inner());
    if !logs.iter().any(|p| p == path) {
        logs.push(path.to_owned());
    }
}

/// The operator log files this test binary wrote so far.
pub fn registered_logs() -> Vec<PathBuf> {
    LOGS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// One secret found where it must not be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hit {
    /// Where: a file and line, or an object.
    pub source: String,
    /// Which secret (the constant's name in [`SECRETS`]).
    pub secret: &'static str,
}

/// What a scan read and found.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Log files read.
    pub files: usize,
    /// Bytes of log read.
    pub bytes: u64,
    /// Events (events.k8s.io/v1 and core/v1) read.
    pub events: usize,
    /// Statuses (AgentDeployment, AgentControlPlane, AgentListener) read.
    pub statuses: usize,
    /// The secrets found.
    pub hits: Vec<Hit>,
}

impl Report {
    /// Adds the figures and hits of `other`.
    pub fn merge(&mut self, other: Report) {
        self.files += other.files;
        self.bytes += other.bytes;
        self.events += other.events;
        self.statuses += other.statuses;
        self.hits.extend(other.hits);
    }

    /// One line of figures, e.g. `secret scan: 3 log files (1.2 MB), 14
    /// events, 5 statuses, 0 hits`.
    pub fn summary(&self) -> String {
        format!(
            "secret scan: {} log files ({} bytes), {} events, {} statuses, {} secret values, {} hits",
            self.files,
            self.bytes,
            self.events,
            self.statuses,
            SECRETS.len(),
            self.hits.len()
        )
    }

    /// Panics listing the hits (never the values), unless there are none.
    pub fn assert_clean(&self) {
        assert!(
            self.hits.is_empty(),
            "secret values leaked ({}):\n  {}",
            self.summary(),
            self.hits
                .iter()
                .map(|h| format!("{} in {}", h.secret, h.source))
                .collect::<Vec<_>>()
                .join("\n  ")
        );
    }
}

/// The secrets of [`SECRETS`] in `text`, one hit per (line, secret);
/// `source` names the text in the hits.
pub fn scan_text(source: &str, text: &str) -> Vec<Hit> {
    let mut hits = Vec::new();
    for (n, line) in text.lines().enumerate() {
        for (name, value) in SECRETS {
            if line.contains(value) {
                hits.push(Hit {
                    source: format!("{source}:{}", n + 1),
                    secret: name,
                });
            }
        }
    }
    hits
}

/// Scans the files `paths` (missing ones are skipped).
pub fn scan_files(paths: &[PathBuf]) -> Report {
    let mut report = Report::default();
    for path in paths {
        let Ok(bytes) = std::fs::read(path) else {
            continue;
        };
        report.files += 1;
        report.bytes += bytes.len() as u64;
        let text = String::from_utf8_lossy(&bytes);
        report
            .hits
            .extend(scan_text(&path.display().to_string(), &text));
    }
    report
}

/// Every `*-operator.log` in `dir`, sorted.
pub fn operator_logs_in(dir: &Path) -> Vec<PathBuf> {
    logs_in(dir, |name| name.ends_with("-operator.log"))
}

/// Every file of `dir` whose name `keep` accepts, sorted.
pub fn logs_in(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(&keep))
                .collect()
        })
        .unwrap_or_default();
    logs.sort();
    logs
}

fn scan_json(source: String, value: &impl Serialize) -> Vec<Hit> {
    let text = serde_json::to_string(value).expect("serializing for the scan");
    scan_text(&source, &text)
}

/// Scans the Events (events.k8s.io/v1 and core/v1) and the status of every
/// AgentDeployment, AgentControlPlane and AgentListener of `namespace`.
/// Panics when the API server does not answer.
pub async fn scan_namespace(client: &kube::Client, namespace: &str) -> Report {
    let lp = ListParams::default();
    let mut report = Report::default();
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), namespace);
    for e in events.list(&lp).await.expect("listing events").items {
        report.events += 1;
        let source = format!(
            "Event {namespace}/{}",
            e.metadata.name.as_deref().unwrap_or("")
        );
        report.hits.extend(scan_json(source, &e));
    }
    let core: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), namespace);
    for e in core.list(&lp).await.expect("listing core events").items {
        report.events += 1;
        let source = format!(
            "core Event {namespace}/{}",
            e.metadata.name.as_deref().unwrap_or("")
        );
        report.hits.extend(scan_json(source, &e));
    }
    let deployments: Api<AgentDeployment> = Api::namespaced(client.clone(), namespace);
    for o in deployments.list(&lp).await.expect("listing").items {
        report.statuses += 1;
        let source = format!("AgentDeployment {namespace}/{} status", name(&o.metadata));
        report.hits.extend(scan_json(source, &o.status));
    }
    let planes: Api<AgentControlPlane> = Api::namespaced(client.clone(), namespace);
    for o in planes.list(&lp).await.expect("listing").items {
        report.statuses += 1;
        let source = format!("AgentControlPlane {namespace}/{} status", name(&o.metadata));
        report.hits.extend(scan_json(source, &o.status));
    }
    let listeners: Api<AgentListener> = Api::namespaced(client.clone(), namespace);
    for o in listeners.list(&lp).await.expect("listing").items {
        report.statuses += 1;
        let source = format!("AgentListener {namespace}/{} status", name(&o.metadata));
        report.hits.extend(scan_json(source, &o.status));
    }
    report
}

fn name(meta: &kube::api::ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or("")
}

/// Scans `namespace` (see [`scan_namespace`]) and every operator log this
/// test binary registered, prints the figures, and panics on a hit. For
/// tests without a harness; call it at their end.
pub async fn assert_no_leaks(client: &kube::Client, namespace: &str) -> Report {
    let mut report = scan_namespace(client, namespace).await;
    report.merge(scan_files(&registered_logs()));
    eprintln!("{}", report.summary());
    report.assert_clean();
    report
}

/// Scans `namespace` (see [`scan_namespace`]) and every operator log this
/// test binary registered, prints the figures, and panics on a hit. For a
/// synchronous context that may be inside a tokio runtime (a `Drop`): runs
/// on a new thread with its own current-thread runtime and client.
pub fn check_namespace_blocking(kubeconfig: &Path, namespace: &str) -> Report {
    let (kubeconfig, namespace) = (kubeconfig.to_owned(), namespace.to_owned());
    let scanned = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("building the secret scan's runtime")
            .block_on(async {
                let client = super::client_from(&kubeconfig).await;
                let mut report = scan_namespace(&client, &namespace).await;
                report.merge(scan_files(&registered_logs()));
                report
            })
    })
    .join();
    match scanned {
        Ok(report) => {
            eprintln!("{}", report.summary());
            report.assert_clean();
            report
        }
        Err(payload) => std::panic::resume_unwind(payload),
    }
}
