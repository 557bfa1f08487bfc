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
use std::time::Duration;

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

/// The password of the registry that needs credentials (`registry_auth`).
pub const REGISTRY_PASSWORD: &str = "pull-secret-of-the-test";
/// `agent:` + [`REGISTRY_PASSWORD`] in base64, as `.dockerconfigjson`'s
/// `auth` and the `Authorization: Basic` header carry it.
pub const REGISTRY_BASIC: &str = "YWdlbnQ6cHVsbC1zZWNyZXQtb2YtdGhlLXRlc3Q=";
/// A wrong password for that registry (`registry_auth`).
pub const WRONG_REGISTRY_PASSWORD: &str = "not-the-pull-secret-2b7e";

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
    ("REGISTRY_PASSWORD", REGISTRY_PASSWORD),
    ("REGISTRY_BASIC", REGISTRY_BASIC),
    ("WRONG_REGISTRY_PASSWORD", WRONG_REGISTRY_PASSWORD),
];

/// Operator and emulator log files written by this test binary so far.
static LOGS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Registers an operator or emulator log file for [`registered_logs`].
pub fn register_log(path: &Path) {
    let mut logs = LOGS.lock().unwrap_or_else(|e| e.into_inner());
    if !logs.iter().any(|p| p == path) {
        logs.push(path.to_owned());
    }
}

/// The operator and emulator log files this test binary wrote so far.
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

/// The forms in which `value` is searched: as is; JSON-escaped (as a string
/// inside JSON, e.g. a log line that prints an encoded body, once and
/// twice); and base64 (standard and URL-safe alphabet, as a Secret's `data`
/// or a header would carry it), at each of the three byte alignments it can
/// have inside a longer encoded text (only the characters that depend on
/// the value's bytes alone; at least 8 for values of 8 bytes or more).
pub fn forms(value: &str) -> Vec<String> {
    use base64::Engine;
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    let mut out = vec![value.to_owned()];
    let once = serde_json::to_string(value).expect("a string encodes");
    let once = once[1..once.len() - 1].to_owned();
    let twice = serde_json::to_string(&once).expect("a string encodes");
    out.push(twice[1..twice.len() - 1].to_owned());
    out.push(once);
    for engine in [STANDARD_NO_PAD, URL_SAFE_NO_PAD] {
        for skip in 0..3usize {
            let mut bytes = vec![0u8; skip];
            bytes.extend_from_slice(value.as_bytes());
            let encoded = engine.encode(&bytes);
            // Groups of 3 bytes → 4 characters; keep the groups made of the
            // value's bytes only.
            let first_group = skip.div_ceil(3);
            let full_groups = bytes.len() / 3;
            if full_groups > first_group {
                out.push(encoded[first_group * 4..full_groups * 4].to_owned());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The secrets of [`SECRETS`] in `text`, in any of their [`forms`], one hit
/// per (line, secret); `source` names the text in the hits.
pub fn scan_text(source: &str, text: &str) -> Vec<Hit> {
    let searched: Vec<(&'static str, Vec<String>)> = SECRETS
        .iter()
        .map(|(name, value)| (*name, forms(value)))
        .collect();
    let mut hits = Vec::new();
    for (n, line) in text.lines().enumerate() {
        for (name, forms) in &searched {
            if forms.iter().any(|f| line.contains(f.as_str())) {
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

/// Every log of `dir` the secret scan reads, sorted: the operators'
/// (`*-operator.log`) and the emulators' (`*-emulator.log`; the emulator
/// receives the keys and values but must not log them, as the service
/// would not), and the findings of scans after a panic ([`AFTER_PANIC`]).
pub fn scanned_logs_in(dir: &Path) -> Vec<PathBuf> {
    logs_in(dir, |name| {
        name.ends_with("-operator.log") || name.ends_with("-emulator.log")
    })
}

/// Name suffix of the file in which a scan after a test's panic notes what
/// it found (`<namespace>-leaks-after-panic.txt` in the log directory):
/// names of the secrets and where, never the values. `zz_secret_scan`
/// fails while one exists.
pub const AFTER_PANIC: &str = "-leaks-after-panic.txt";

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

/// What [`check_namespace_blocking`] does, for a `Drop` that runs while
/// its test panics (where a second panic would abort the test binary): the
/// scan runs all the same, but never panics. Hits are printed and noted in
/// `<log_dir>/<namespace>` + [`AFTER_PANIC`] (names and places, never the
/// values), which `zz_secret_scan` reports. Objects that cannot be read
/// within 20 s (the API server is gone) are left out, said on stderr; the
/// logs are scanned in any case.
pub fn scan_namespace_after_panic(kubeconfig: &Path, namespace: &str) {
    let (kubeconfig, ns) = (kubeconfig.to_owned(), namespace.to_owned());
    let scanned = std::thread::spawn(move || {
        std::panic::catch_unwind(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("building the secret scan's runtime")
                .block_on(async {
                    // An API server that the failing test froze or stopped
                    // must not hold the failure up: the logs are scanned
                    // whatever happens to the namespace's objects.
                    let objects = tokio::time::timeout(Duration::from_secs(20), async {
                        let client = super::client_from(&kubeconfig).await;
                        scan_namespace(&client, &ns).await
                    })
                    .await;
                    let mut report = objects.unwrap_or_else(|_| {
                        eprintln!("secret scan after the panic: namespace {ns} unreadable");
                        Report::default()
                    });
                    report.merge(scan_files(&registered_logs()));
                    report
                })
        })
        .ok()
    })
    .join()
    .ok()
    .flatten();
    let Some(report) = scanned else {
        eprintln!("secret scan after the panic: could not read namespace {namespace}");
        return;
    };
    eprintln!("after the panic: {}", report.summary());
    if report.hits.is_empty() {
        return;
    }
    let lines: Vec<String> = report
        .hits
        .iter()
        .map(|h| format!("{} in {}", h.secret, h.source))
        .collect();
    eprintln!("SECRET VALUES LEAKED:\n  {}", lines.join("\n  "));
    let note = super::log_dir().join(format!("{namespace}{AFTER_PANIC}"));
    let _ = std::fs::create_dir_all(super::log_dir());
    let _ = std::fs::write(&note, lines.join("\n") + "\n");
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
