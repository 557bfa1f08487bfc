//! Envtest-style harness: a real kube-apiserver and etcd on loopback.
//!
//! [`TestEnv::start`] runs the same binaries a cluster runs (built by
//! `hack/envtest/install.sh`, version [`KUBERNETES_VERSION`]) in a temporary
//! directory, with a throw-away PKI, and hands out clients built from its own
//! kubeconfig. It never reads `KUBECONFIG` or `~/.kube/config`, so tests and the
//! demo cannot touch the developer's cluster by accident.
//!
//! There are no controllers, scheduler or kubelet: objects are stored and
//! validated (schemas, CEL rules, RBAC) but Pods never run, like Go's envtest.
//!
//! Children die with the process that started them: they run under
//! `setpriv --pdeathsig KILL`, forked from a thread that lives as long as the
//! process, and [`TestEnv`] kills them on drop.

mod crds;
mod error;
mod kubeconfig;
mod manifests;
mod pki;
mod process;

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use tempfile::TempDir;

pub use crds::{ESTABLISHED_TIMEOUT, FIELD_MANAGER, read_crds_from_dir};
pub use error::EnvTestError;
pub use kubeconfig::CONTEXT_NAME;
pub use manifests::{
    Impersonation, apply_manifest_file, apply_manifests, impersonating_kubeconfig,
};
pub use pki::{ADMIN_GROUP, ADMIN_USER};

use process::ManagedProcess;

/// Version of kube-apiserver, etcd's consumer and kubectl that
/// `hack/envtest/install.sh` builds (pinned in `hack/envtest/go.mod`).
pub const KUBERNETES_VERSION: &str = "v1.34.4";

/// The oldest Kubernetes version the project claims to support
/// (docs/VERSIONING.md): its kube-apiserver is built by
/// `hack/envtest/install.sh --oldest` (pinned in `hack/envtest/oldest/go.mod`)
/// into [`oldest_assets_dir`], for the test that installs the CRDs and the
/// pod policy on it.
pub const OLDEST_KUBERNETES_VERSION: &str = "v1.30.14";

/// Environment variable naming a directory with `kube-apiserver` and `etcd`
/// (and optionally `kubectl`); the convention of Go's envtest.
pub const ASSETS_ENV: &str = "KUBEBUILDER_ASSETS";

/// Default for [`TestEnvOptions::ready_timeout`]: 60 s.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Prefix of the temporary directories (under the system temp dir).
const TEMP_DIR_PREFIX: &str = "envtest-";

/// How many times [`TestEnv::start`] picks new ports when one was taken in between.
const PORT_ATTEMPTS: usize = 3;

/// How many times [`TestEnv::start_apiserver`] tries when its port is still taken.
const RESTART_ATTEMPTS: usize = 5;

/// Pause between readiness probes.
const PROBE_INTERVAL: Duration = Duration::from_millis(100);

/// Timeout of one `/readyz` probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Log lines quoted in start-up errors.
const ERROR_LOG_LINES: usize = 40;

/// A loopback port for a child process (emulator, operator) to listen on,
/// for tests and benchmarks.
///
/// Taken from 20000–31999, below the kernel's ephemeral range (32768–60999):
/// a port picked with `bind(":0")` and released can be taken again at once by
/// the local end of an outgoing connection before the child binds it. Each
/// call in a process gets a different port (a counter from a per-process
/// start), checked free by a bind. Panics when none is free.
pub fn child_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = (std::process::id() % 600) * 20;
    for _ in 0..12_000 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = 20_000 + ((start + n) % 12_000) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in 20000-31999")
}

/// Installs rustls' `ring` crypto provider as the process default, if none is yet.
///
/// kube uses rustls with `ring`; some other crate in the graph (reqwest with
/// `rustls-no-provider`) enables rustls without choosing, so the default must be
/// set before any TLS client is built. Idempotent and cheap.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Where the binaries are: `$KUBEBUILDER_ASSETS` if set (and non-empty), else
/// [`default_assets_dir`].
///
/// Errors: [`EnvTestError::AssetsNotFound`] when that directory lacks
/// `kube-apiserver` or `etcd` (the message says to run `hack/envtest/install.sh`).
pub fn assets_dir() -> Result<PathBuf, EnvTestError> {
    let dir = std::env::var_os(ASSETS_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(default_assets_dir);
    check_assets(dir)
}

/// `<repository root>/.cache/envtest/<KUBERNETES_VERSION>`, where
/// `hack/envtest/install.sh` puts the binaries (see [`crate::repo_root`]).
pub fn default_assets_dir() -> PathBuf {
    crate::repo_root()
        .join(".cache")
        .join("envtest")
        .join(KUBERNETES_VERSION)
}

/// `<repository root>/.cache/envtest/<OLDEST_KUBERNETES_VERSION>`: the
/// oldest supported kube-apiserver and a link to the current etcd
/// (`hack/envtest/install.sh --oldest`).
///
/// Errors: [`EnvTestError::AssetsNotFound`] when either binary is missing.
pub fn oldest_assets_dir() -> Result<PathBuf, EnvTestError> {
    check_assets(
        crate::repo_root()
            .join(".cache")
            .join("envtest")
            .join(OLDEST_KUBERNETES_VERSION),
    )
}

fn check_assets(dir: PathBuf) -> Result<PathBuf, EnvTestError> {
    for binary in ["kube-apiserver", "etcd"] {
        if !dir.join(binary).is_file() {
            return Err(EnvTestError::AssetsNotFound {
                detail: format!("{} has no {binary}", dir.display()),
            });
        }
    }
    Ok(dir)
}

/// How to start a [`TestEnv`].
#[derive(Clone, Debug)]
pub struct TestEnvOptions {
    /// Directory holding `kube-apiserver`, `etcd` and optionally `kubectl`;
    /// `None` means [`assets_dir()`].
    pub assets_dir: Option<PathBuf>,
    /// How long to wait for etcd and then kube-apiserver to become ready, each.
    pub ready_timeout: Duration,
    /// Extra kube-apiserver flags (`--name=value`), appended after ours, so they win.
    pub extra_apiserver_args: Vec<String>,
}

impl Default for TestEnvOptions {
    fn default() -> Self {
        Self {
            assets_dir: None,
            ready_timeout: DEFAULT_READY_TIMEOUT,
            extra_apiserver_args: Vec::new(),
        }
    }
}

/// A running etcd + kube-apiserver on 127.0.0.1, with its temporary directory
/// (data, certificates, kubeconfig, logs).
///
/// Dropping it (or [`stop`](Self::stop)) kills both processes and deletes the
/// directory. If the process exits without dropping it (a `static`, a crash),
/// the kernel kills the children (PDEATHSIG) and the next [`start`](Self::start)
/// deletes the directory left behind (about 125 MB, mostly etcd's WAL).
pub struct TestEnv {
    // Field order is drop order: kube-apiserver, then etcd, then the directory.
    apiserver: ManagedProcess,
    etcd: ManagedProcess,
    config: kube::Config,
    server_url: String,
    kubeconfig_path: PathBuf,
    assets_dir: PathBuf,
    started_in: Duration,
    /// kube-apiserver's flags, to start it again ([`TestEnv::start_apiserver`]).
    apiserver_args: Vec<String>,
    /// `http://127.0.0.1:<port>` of etcd's client listener.
    etcd_url: String,
    pki: pki::Pki,
    ready_timeout: Duration,
    dir: TempDir,
}

impl std::fmt::Debug for TestEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestEnv")
            .field("server_url", &self.server_url)
            .field("kubeconfig_path", &self.kubeconfig_path)
            .field("assets_dir", &self.assets_dir)
            .field("dir", &self.dir.path())
            .finish_non_exhaustive()
    }
}

/// Files of the PKI inside the temporary directory.
struct PkiFiles {
    ca_cert: PathBuf,
    serving_cert: PathBuf,
    serving_key: PathBuf,
    service_account_key: PathBuf,
    service_account_pub: PathBuf,
}

impl TestEnv {
    /// Starts etcd and kube-apiserver and waits until `/readyz` answers `ok`.
    ///
    /// Takes a few seconds. Child processes are forked from a dedicated thread
    /// that lives as long as the process, so any runtime may drive this future.
    ///
    /// Errors: [`EnvTestError::AssetsNotFound`] without binaries,
    /// [`EnvTestError::SetprivMissing`] without util-linux's `setpriv`,
    /// [`EnvTestError::ProcessExited`] / [`EnvTestError::NotReady`] (with the
    /// log's last lines) when a process fails to come up within
    /// [`TestEnvOptions::ready_timeout`], [`EnvTestError::Io`],
    /// [`EnvTestError::Pki`] or [`EnvTestError::Kubeconfig`] otherwise.
    pub async fn start(opts: TestEnvOptions) -> Result<TestEnv, EnvTestError> {
        let started = Instant::now();
        install_crypto_provider();
        let assets_dir = match &opts.assets_dir {
            Some(dir) => check_assets(dir.clone())?,
            None => assets_dir()?,
        };
        process::remove_stale_dirs(&std::env::temp_dir(), TEMP_DIR_PREFIX);
        let dir = tempfile::Builder::new()
            .prefix(TEMP_DIR_PREFIX)
            .tempdir()
            .map_err(EnvTestError::io("creating the envtest temporary directory"))?;
        process::write_owner_pid(dir.path())?;
        let pki = pki::generate().map_err(EnvTestError::Pki)?;
        let files = write_pki(dir.path(), &pki)?;

        let mut attempt = 1;
        loop {
            match start_processes(&opts, &assets_dir, dir.path(), &pki, &files).await {
                Ok(Started {
                    etcd,
                    apiserver,
                    config,
                    server_url,
                    kubeconfig_path,
                    apiserver_args,
                    etcd_url,
                }) => {
                    let started_in = started.elapsed();
                    tracing::info!(
                        server = %server_url,
                        kubeconfig = %kubeconfig_path.display(),
                        ?started_in,
                        "envtest control plane ready"
                    );
                    return Ok(TestEnv {
                        apiserver,
                        etcd,
                        config,
                        server_url,
                        kubeconfig_path,
                        assets_dir,
                        started_in,
                        apiserver_args,
                        etcd_url,
                        pki,
                        ready_timeout: opts.ready_timeout,
                        dir,
                    });
                }
                Err(e) if attempt < PORT_ATTEMPTS && is_port_clash(&e) => {
                    tracing::warn!(attempt, error = %e, "port taken meanwhile; retrying with new ports");
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Kills kube-apiserver and etcd (SIGKILL), reaps them and deletes the
    /// temporary directory. Same as dropping; blocks for a few milliseconds.
    pub fn stop(self) {
        drop(self);
    }

    /// A new client for this API server, authenticated as [`ADMIN_USER`]
    /// (group [`ADMIN_GROUP`], i.e. cluster-admin).
    ///
    /// A client is bound to the tokio runtime it was created in: call this in
    /// the runtime that uses it (each `#[tokio::test]` has its own).
    ///
    /// Errors: [`EnvTestError::Kube`] when the TLS configuration cannot be built.
    pub async fn client(&self) -> Result<kube::Client, EnvTestError> {
        install_crypto_provider();
        kube::Client::try_from(self.config.clone())
            .map_err(EnvTestError::kube("building the envtest client"))
    }

    /// The client configuration (from this environment's kubeconfig), e.g. to
    /// tune timeouts before building a client.
    pub fn config(&self) -> &kube::Config {
        &self.config
    }

    /// Path of the self-contained kubeconfig (context [`CONTEXT_NAME`]) inside the
    /// temporary directory; valid until the environment stops.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// Copies the kubeconfig to `path` (mode 0600, parent directories created).
    ///
    /// Errors: [`EnvTestError::Io`] when it cannot be written.
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), EnvTestError> {
        let text = std::fs::read_to_string(&self.kubeconfig_path).map_err(EnvTestError::io(
            format!("reading {}", self.kubeconfig_path.display()),
        ))?;
        kubeconfig::write_private(path, &text)
    }

    /// Writes a copy of the kubeconfig to `path` (mode 0600) whose user
    /// impersonates `who` (see [`impersonating_kubeconfig`]): a program
    /// started with it has exactly the permissions RBAC grants `who`.
    ///
    /// Errors: [`EnvTestError::Io`] when a file cannot be read or written.
    pub fn write_impersonating_kubeconfig(
        &self,
        path: &Path,
        who: &Impersonation,
    ) -> Result<(), EnvTestError> {
        let text = std::fs::read_to_string(&self.kubeconfig_path).map_err(EnvTestError::io(
            format!("reading {}", self.kubeconfig_path.display()),
        ))?;
        kubeconfig::write_private(path, &impersonating_kubeconfig(&text, who)?)
    }

    /// The API server's URL, `https://127.0.0.1:<port>`.
    pub fn server_url(&self) -> &str {
        &self.server_url
    }

    /// The directory the binaries were taken from.
    pub fn assets_dir(&self) -> &Path {
        &self.assets_dir
    }

    /// `kubectl` from the assets directory, if it was built.
    pub fn kubectl_path(&self) -> Option<PathBuf> {
        Some(self.assets_dir.join("kubectl")).filter(|p| p.is_file())
    }

    /// The temporary directory (etcd data, certificates, `etcd.log`, `kube-apiserver.log`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Wall-clock time [`start`](Self::start) took, from its call to `/readyz` = ok.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// Whether both processes are still running (false if one crashed, or
    /// kube-apiserver was stopped with [`stop_apiserver`](Self::stop_apiserver)).
    pub fn is_running(&mut self) -> bool {
        self.etcd.is_alive() && self.apiserver.is_alive()
    }

    /// Kills kube-apiserver (SIGKILL: open connections and watches break at
    /// once, as in a crash) and leaves etcd and its data running. Idempotent.
    pub fn stop_apiserver(&mut self) {
        self.apiserver.kill();
        tracing::info!(server = %self.server_url, "kube-apiserver stopped");
    }

    /// Starts kube-apiserver again after [`stop_apiserver`](Self::stop_apiserver):
    /// the same flags, so the same port, certificates and etcd (every object
    /// and resourceVersion is kept; the watch cache starts empty). Its output
    /// is appended to the same log. Waits until `/readyz` answers `ok`, at
    /// most [`TestEnvOptions::ready_timeout`]; when the port is still taken
    /// (by a connection of the old process), tries again a few times.
    ///
    /// Clients and kubeconfigs made before stay valid. Does nothing when
    /// kube-apiserver is running.
    ///
    /// Errors: [`EnvTestError::ProcessExited`] / [`EnvTestError::NotReady`]
    /// (with the log's last lines), [`EnvTestError::Io`].
    pub async fn start_apiserver(&mut self) -> Result<(), EnvTestError> {
        if self.apiserver.is_alive() {
            return Ok(());
        }
        let started = Instant::now();
        let mut attempt = 1;
        loop {
            let log = self.dir.path().join("kube-apiserver.log");
            self.apiserver = ManagedProcess::spawn_appending(
                "kube-apiserver",
                &self.assets_dir.join("kube-apiserver"),
                &self.apiserver_args,
                log,
            )?;
            match wait_for_readyz(
                &mut self.apiserver,
                &self.server_url,
                &self.pki,
                self.ready_timeout,
            )
            .await
            {
                Ok(()) => break,
                Err(e) if attempt < RESTART_ATTEMPTS && is_port_clash(&e) => {
                    tracing::warn!(attempt, error = %e, "the API server's port is still taken; retrying");
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => return Err(e),
            }
        }
        tracing::info!(server = %self.server_url, took = ?started.elapsed(), "kube-apiserver started again");
        Ok(())
    }

    /// Freezes kube-apiserver for `pause` (SIGSTOP, then SIGCONT): open
    /// connections stay up but nothing is answered, as in a stalled control
    /// plane node or a long garbage-collection pause. Returns whether both
    /// signals were sent.
    pub async fn freeze_apiserver(&mut self, pause: Duration) -> bool {
        let stopped = self.apiserver.signal("STOP");
        tracing::info!(server = %self.server_url, ?pause, "kube-apiserver frozen");
        tokio::time::sleep(pause).await;
        let resumed = self.apiserver.signal("CONT");
        tracing::info!(server = %self.server_url, "kube-apiserver resumed");
        stopped && resumed
    }

    /// [`stop_apiserver`](Self::stop_apiserver) then
    /// [`start_apiserver`](Self::start_apiserver): a crash and restart of
    /// kube-apiserver on the same etcd. Returns how long it was down (until
    /// `/readyz` answered `ok` again).
    ///
    /// Errors: see [`start_apiserver`](Self::start_apiserver).
    pub async fn restart_apiserver(&mut self) -> Result<Duration, EnvTestError> {
        let down = Instant::now();
        self.stop_apiserver();
        self.start_apiserver().await?;
        Ok(down.elapsed())
    }

    /// `http://127.0.0.1:<port>`: etcd's client URL (plain HTTP on loopback;
    /// it also answers etcd's JSON gateway, `POST /v3/kv/...`).
    pub fn etcd_url(&self) -> &str {
        &self.etcd_url
    }

    /// Compacts etcd's history up to its current revision (through the JSON
    /// gateway: `POST /v3/kv/range` for the revision, then `POST
    /// /v3/kv/compaction`, physical). Afterwards a watch from an older
    /// resourceVersion that kube-apiserver serves from etcd (not from its
    /// watch cache) ends with `410 Gone`. Returns the revision compacted to.
    ///
    /// Errors: [`EnvTestError::Io`] when etcd does not answer or refuses.
    pub async fn compact_etcd(&self) -> Result<i64, EnvTestError> {
        let fail = |what: &str, e: String| EnvTestError::Io {
            context: format!("compacting etcd: {what}"),
            source: std::io::Error::other(e),
        };
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| fail("building the HTTP client", e.to_string()))?;
        let post = |path: &str, body: serde_json::Value| {
            let request = http.post(format!("{}{path}", self.etcd_url)).json(&body);
            let path = path.to_owned();
            async move {
                let response = request
                    .send()
                    .await
                    .map_err(|e| fail(&path, e.to_string()))?;
                let status = response.status();
                let text = response.text().await.unwrap_or_default();
                if !status.is_success() {
                    return Err(fail(&path, format!("{status}: {text}")));
                }
                serde_json::from_str::<serde_json::Value>(&text)
                    .map_err(|e| fail(&path, format!("{e}: {text}")))
            }
        };
        // Any range answers the store's current revision in its header;
        // the key is "/" (base64), counted only.
        let range = post(
            "/v3/kv/range",
            serde_json::json!({"key": "Lw==", "count_only": true}),
        )
        .await?;
        let revision = revision_of(&range)
            .ok_or_else(|| fail("/v3/kv/range", format!("no header.revision in {range}")))?;
        post(
            "/v3/kv/compaction",
            serde_json::json!({"revision": revision.to_string(), "physical": true}),
        )
        .await?;
        tracing::info!(revision, "etcd compacted");
        Ok(revision)
    }

    /// Reads every CRD in the `*.yaml` / `*.yml` files of `dir`, server-side
    /// applies them and waits until each is `Established` and in the OpenAPI
    /// document. An empty directory installs nothing.
    ///
    /// Returns the installed CRDs' names.
    ///
    /// Errors: see [`read_crds_from_dir`] and [`install_crds`](Self::install_crds).
    pub async fn install_crds_from_dir(&self, dir: &Path) -> Result<Vec<String>, EnvTestError> {
        let crds = read_crds_from_dir(dir)?;
        self.install_crds(&crds).await
    }

    /// Server-side applies `crds` (field manager [`FIELD_MANAGER`]) and waits until
    /// each is `Established` and listed in `/openapi/v3` (so `kubectl explain`
    /// works at once); at most [`ESTABLISHED_TIMEOUT`] for each stage.
    ///
    /// Returns the CRDs' names.
    ///
    /// Errors: [`EnvTestError::Kube`] when an apply fails (e.g. an invalid
    /// schema), [`EnvTestError::Wait`], [`EnvTestError::CrdNotEstablished`] or
    /// [`EnvTestError::CrdNotPublished`] when one does not become usable.
    pub async fn install_crds(
        &self,
        crds: &[CustomResourceDefinition],
    ) -> Result<Vec<String>, EnvTestError> {
        crds::install(self.client().await?, crds).await
    }
}

/// Writes the certificates and keys of `pki` under `dir/pki`, private to
/// this user.
fn write_pki(dir: &Path, pki: &pki::Pki) -> Result<PkiFiles, EnvTestError> {
    let pki_dir = dir.join("pki");
    std::fs::create_dir_all(&pki_dir)
        .map_err(EnvTestError::io(format!("creating {}", pki_dir.display())))?;
    let write = |name: &str, contents: &str| -> Result<PathBuf, EnvTestError> {
        let path = pki_dir.join(name);
        kubeconfig::write_private(&path, contents)?;
        Ok(path)
    };
    Ok(PkiFiles {
        ca_cert: write("ca.crt", &pki.ca_cert)?,
        serving_cert: write("apiserver.crt", &pki.serving_cert)?,
        serving_key: write("apiserver.key", &pki.serving_key)?,
        service_account_key: write("sa.key", &pki.service_account_key)?,
        service_account_pub: write("sa.pub", &pki.service_account_pub)?,
    })
}

/// A started pair of processes with the client configuration and kubeconfig path.
struct Started {
    etcd: ManagedProcess,
    apiserver: ManagedProcess,
    config: kube::Config,
    server_url: String,
    kubeconfig_path: PathBuf,
    apiserver_args: Vec<String>,
    etcd_url: String,
}

/// `header.revision` of an etcd JSON gateway answer (int64s are JSON
/// strings there).
fn revision_of(answer: &serde_json::Value) -> Option<i64> {
    match &answer["header"]["revision"] {
        serde_json::Value::String(s) => s.parse().ok(),
        v => v.as_i64(),
    }
}

/// One attempt at starting etcd and kube-apiserver on fresh ports.
async fn start_processes(
    opts: &TestEnvOptions,
    assets: &Path,
    dir: &Path,
    pki: &pki::Pki,
    files: &PkiFiles,
) -> Result<Started, EnvTestError> {
    let (etcd, etcd_url) = start_etcd(opts, assets, dir).await?;
    let port = process::free_port()?;
    let server_url = format!("https://127.0.0.1:{port}");
    let apiserver_args = apiserver_args(opts, dir, files, &etcd_url, port, &server_url);
    let mut apiserver = ManagedProcess::spawn(
        "kube-apiserver",
        &assets.join("kube-apiserver"),
        &apiserver_args,
        dir.join("kube-apiserver.log"),
    )?;

    wait_for_readyz(&mut apiserver, &server_url, pki, opts.ready_timeout).await?;
    let kubeconfig_path = dir.join("kubeconfig");
    kubeconfig::write_private(&kubeconfig_path, &kubeconfig::render(&server_url, pki))?;
    let config = kubeconfig::load_config(&kubeconfig_path).await?;
    Ok(Started {
        etcd,
        apiserver,
        config,
        server_url,
        kubeconfig_path,
        apiserver_args,
        etcd_url,
    })
}

/// Starts etcd on fresh client and peer ports, with a fresh data directory
/// under `dir`, and waits until it accepts connections. Returns the process
/// and its client URL.
async fn start_etcd(
    opts: &TestEnvOptions,
    assets: &Path,
    dir: &Path,
) -> Result<(ManagedProcess, String), EnvTestError> {
    let etcd_port = process::free_port()?;
    let peer_port = process::free_port()?;
    let etcd_url = format!("http://127.0.0.1:{etcd_port}");
    let peer_url = format!("http://127.0.0.1:{peer_port}");
    let etcd_data = dir.join("etcd");
    // A retry must not find the previous attempt's member directory.
    let _ = std::fs::remove_dir_all(&etcd_data);
    let etcd_args = vec![
        "--name=envtest".to_owned(),
        format!("--data-dir={}", etcd_data.display()),
        format!("--listen-client-urls={etcd_url}"),
        format!("--advertise-client-urls={etcd_url}"),
        format!("--listen-peer-urls={peer_url}"),
        format!("--initial-advertise-peer-urls={peer_url}"),
        format!("--initial-cluster=envtest={peer_url}"),
        "--unsafe-no-fsync=true".to_owned(),
        "--log-level=warn".to_owned(),
    ];
    let mut etcd = ManagedProcess::spawn(
        "etcd",
        &assets.join("etcd"),
        &etcd_args,
        dir.join("etcd.log"),
    )?;
    wait_for_tcp(&mut etcd, etcd_port, opts.ready_timeout).await?;
    Ok((etcd, etcd_url))
}

/// The arguments of kube-apiserver on `port` (`server_url`) with the etcd
/// of `etcd_url`: the certificates of `files`, RBAC, no ServiceAccount
/// admission, no `kubernetes` Service endpoints, then
/// `opts.extra_apiserver_args`.
fn apiserver_args(
    opts: &TestEnvOptions,
    dir: &Path,
    files: &PkiFiles,
    etcd_url: &str,
    port: u16,
    server_url: &str,
) -> Vec<String> {
    let mut args = vec![
        format!("--etcd-servers={etcd_url}"),
        "--bind-address=127.0.0.1".to_owned(),
        "--advertise-address=127.0.0.1".to_owned(),
        format!("--secure-port={port}"),
        format!("--cert-dir={}", dir.join("apiserver-certs").display()),
        format!("--tls-cert-file={}", files.serving_cert.display()),
        format!("--tls-private-key-file={}", files.serving_key.display()),
        format!("--client-ca-file={}", files.ca_cert.display()),
        format!("--service-account-issuer={server_url}"),
        format!(
            "--service-account-key-file={}",
            files.service_account_pub.display()
        ),
        format!(
            "--service-account-signing-key-file={}",
            files.service_account_key.display()
        ),
        "--authorization-mode=RBAC".to_owned(),
        "--service-cluster-ip-range=10.0.0.0/24".to_owned(),
        "--disable-admission-plugins=ServiceAccount".to_owned(),
        "--allow-privileged=true".to_owned(),
        // No `kubernetes` Service endpoints: 127.0.0.1 is not a valid endpoint IP.
        "--endpoint-reconciler-type=none".to_owned(),
        "--profiling=false".to_owned(),
    ];
    args.extend(opts.extra_apiserver_args.iter().cloned());
    args
}

/// Whether `err` is a child that died because its port was taken meanwhile.
fn is_port_clash(err: &EnvTestError) -> bool {
    matches!(err, EnvTestError::ProcessExited { log_tail, .. } if log_tail.contains("address already in use"))
}

/// The error of a child process that exited, with the end of its log;
/// `None` while it runs.
fn exited_error(process: &mut ManagedProcess) -> Option<EnvTestError> {
    let status = process.exited()?;
    Some(EnvTestError::ProcessExited {
        name: process.name(),
        status: status.to_string(),
        log: process.log().to_owned(),
        log_tail: process.log_tail(ERROR_LOG_LINES),
    })
}

fn not_ready_error(
    process: &ManagedProcess,
    timeout: Duration,
    last_error: String,
) -> EnvTestError {
    EnvTestError::NotReady {
        name: process.name(),
        timeout,
        last_error,
        log: process.log().to_owned(),
        log_tail: process.log_tail(ERROR_LOG_LINES),
    }
}

/// Waits until `process` accepts TCP connections on 127.0.0.1:`port`.
async fn wait_for_tcp(
    process: &mut ManagedProcess,
    port: u16,
    timeout: Duration,
) -> Result<(), EnvTestError> {
    let deadline = Instant::now() + timeout;
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    loop {
        if let Some(e) = exited_error(process) {
            return Err(e);
        }
        match TcpStream::connect_timeout(&addr, PROBE_INTERVAL) {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() >= deadline => {
                return Err(not_ready_error(process, timeout, e.to_string()));
            }
            Err(_) => tokio::time::sleep(PROBE_INTERVAL).await,
        }
    }
}

/// Waits until kube-apiserver answers `GET /readyz` with 200 (all checks pass,
/// including etcd and the RBAC bootstrap), authenticating as the admin user.
///
/// Probes with reqwest rather than kube so that the expected failures while the
/// server starts are not logged as errors by kube's client.
async fn wait_for_readyz(
    process: &mut ManagedProcess,
    server_url: &str,
    pki: &pki::Pki,
    timeout: Duration,
) -> Result<(), EnvTestError> {
    let probe_client = |e: reqwest::Error| EnvTestError::Io {
        context: "building the /readyz probe client".to_owned(),
        source: std::io::Error::other(e),
    };
    let ca = reqwest::Certificate::from_pem(pki.ca_cert.as_bytes()).map_err(probe_client)?;
    let identity =
        reqwest::Identity::from_pem(format!("{}{}", pki.client_cert, pki.client_key).as_bytes())
            .map_err(probe_client)?;
    let client = reqwest::Client::builder()
        .tls_certs_only([ca])
        .identity(identity)
        .timeout(PROBE_TIMEOUT)
        .build()
        .map_err(probe_client)?;
    let url = format!("{server_url}/readyz?verbose");
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(e) = exited_error(process) {
            return Err(e);
        }
        let last_error = match client.get(&url).send().await {
            Ok(response) if response.status().is_success() => return Ok(()),
            Ok(response) => {
                let status = response.status();
                let body = response.text().await.unwrap_or_default();
                let failing: Vec<&str> = body.lines().filter(|l| l.starts_with("[-]")).collect();
                format!("/readyz: {status}; {}", failing.join("; "))
            }
            Err(e) => format!("/readyz: {e}"),
        };
        if Instant::now() >= deadline {
            return Err(not_ready_error(process, timeout, last_error));
        }
        tokio::time::sleep(PROBE_INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `k8s.io/kubernetes` version `go_mod` (a path below the root) pins.
    fn pinned(go_mod: &str) -> Option<String> {
        std::fs::read_to_string(crate::repo_root().join(go_mod))
            .unwrap()
            .lines()
            .map(|l| l.trim().trim_start_matches("require").trim())
            .find_map(|l| l.strip_prefix("k8s.io/kubernetes "))
            .map(|v| v.split_whitespace().next().unwrap_or_default().to_owned())
    }

    /// The version constants must name what `hack/envtest/install.sh` builds.
    #[test]
    fn version_matches_the_install_script_pin() {
        assert_eq!(
            pinned("hack/envtest/go.mod").as_deref(),
            Some(KUBERNETES_VERSION)
        );
        assert_eq!(
            pinned("hack/envtest/oldest/go.mod").as_deref(),
            Some(OLDEST_KUBERNETES_VERSION)
        );
    }

    #[test]
    fn etcd_gateway_revisions_are_read_as_strings_or_numbers() {
        let answer = serde_json::json!({"header": {"revision": "1234", "raft_term": "2"}});
        assert_eq!(revision_of(&answer), Some(1234));
        assert_eq!(
            revision_of(&serde_json::json!({"header": {"revision": 7}})),
            Some(7)
        );
        assert_eq!(revision_of(&serde_json::json!({"header": {}})), None);
    }

    #[test]
    fn missing_assets_error_says_how_to_install() {
        let dir = tempfile::tempdir().unwrap();
        let err = check_assets(dir.path().to_owned()).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("hack/envtest/install.sh"), "{msg}");
        assert!(msg.contains("kube-apiserver"), "{msg}");
    }

    #[test]
    fn kubeconfig_is_self_contained_and_loads() {
        let pki = pki::generate().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        kubeconfig::write_private(&path, &kubeconfig::render("https://127.0.0.1:6443", &pki))
            .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let config = rt.block_on(kubeconfig::load_config(&path)).unwrap();
        assert_eq!(config.cluster_url.to_string(), "https://127.0.0.1:6443/");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
