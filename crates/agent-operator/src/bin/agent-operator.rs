//! `agent-operator`: the Kubernetes operator (`run`), CRD generation (`crds`),
//! the CRD reference (`reference`) and the generated parts of the docs
//! (`docs`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agent_operator::agentserver::limits::VerifyConfig;
use agent_operator::controller::deployment::context::{DeploymentContext, State};
use agent_operator::controller::deployment::runner;
use agent_operator::controller::scaffold::Scope;
use agent_operator::controller::{
    Context, OperatorConfig, Shared, assistant, cluster_control_plane, control_plane, cron,
    hash_key, listener,
};
use agent_operator::http::{self, Health};
use agent_operator::leader::{self, LeaderConfig};
use agent_operator::pod_policy::PodPolicy;
use agent_operator::telemetry::{self, LogFormat};
use anyhow::Context as _;
use clap::{CommandFactory, Parser, Subcommand};
use futures::FutureExt;
use tokio::net::TcpListener;

/// Kubernetes operator for AI agent server deployments (agentserver.dev).
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the operator against the cluster of the current kubeconfig (or the
    /// in-cluster service account).
    Run(Box<RunArgs>),
    /// Print the CustomResourceDefinitions as YAML, or write one file per CRD.
    Crds {
        /// Directory to write `<crd name>.yaml` files into; stdout when unset.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Print the CRD reference (Markdown, generated from the schemas), or
    /// write it to a file (docs/reference.md).
    Reference {
        /// File to write; stdout when unset.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Rewrite every generated block of the docs (the flags, Helm values,
    /// metrics, alerts, reasons and benchmark results tables) from the code
    /// and the repository's files, or print one block.
    Docs {
        /// The repository's root.
        #[arg(long, default_value = ".")]
        root: PathBuf,
        /// Print this block instead of writing the pages: flags,
        /// helm-values, metrics, alerts, reasons or results.
        #[arg(long)]
        print: Option<String>,
        /// Write nothing; fail, naming each block, when a page's block
        /// differs from what the code generates (the drift test).
        #[arg(long, conflicts_with = "print")]
        check: bool,
    },
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// Watch this namespace; repeat the flag (or comma-separate the
    /// environment variable) for several. Default: all namespaces. One
    /// namespace needs only a Role (`deploy/overlays/namespaced`);
    /// ClusterAgentControlPlanes are reconciled only without this flag.
    #[arg(long = "namespace", env = "WATCH_NAMESPACE", value_delimiter = ',')]
    namespaces: Vec<String>,
    /// Seconds between polls of a revision in progress; also the first wait
    /// between reads of a deployment being deleted (doubling up to
    /// --max-poll-interval-seconds).
    #[arg(long, env = "POLL_INTERVAL_SECONDS", default_value_t = 2.0)]
    poll_interval_seconds: f64,
    /// Longest wait between two polls of a revision in progress, in seconds
    /// (the poll interval grows up to it while nothing changes), and between
    /// reads of a deployment being deleted; a revision past its progress
    /// deadline is polled every four times this.
    #[arg(long, env = "MAX_POLL_INTERVAL_SECONDS", default_value_t = 30.0)]
    max_poll_interval_seconds: f64,
    /// Seconds between drift checks of a steady resource (jittered ±25 %;
    /// spread over the whole period after a restart).
    #[arg(long, env = "RESYNC_INTERVAL_SECONDS", default_value_t = 300.0)]
    resync_interval_seconds: f64,
    /// Seconds before re-checking a resource blocked on a missing Secret or
    /// AgentControlPlane (watches usually wake it sooner).
    #[arg(long, env = "BLOCKED_INTERVAL_SECONDS", default_value_t = 60.0)]
    blocked_interval_seconds: f64,
    /// Timeout of one control plane request, in seconds.
    #[arg(long, env = "REQUEST_TIMEOUT_SECONDS", default_value_t = 30.0)]
    request_timeout_seconds: f64,
    /// Maximum number of AgentDeployment reconciles running at once, across
    /// every watched namespace. The passes of one AgentControlPlane hold at
    /// most half of them (rounded up), and a control plane paused by
    /// `Retry-After` or short of budget puts its passes off without holding
    /// any (docs/RELIABILITY.md, "Many tenants").
    #[arg(long, env = "RECONCILE_CONCURRENCY", default_value_t = 8)]
    concurrency: u16,
    /// Ceiling of all requests to one control plane URL, requests per
    /// second, shared by every AgentControlPlane on it (everything leaves
    /// from one address). 95 % of it is used. Must be more than 0. Each
    /// (URL, credential) also has its own adaptive budget
    /// (`requestsPerSecond` of the AgentControlPlane, docs/reference.md).
    #[arg(long, env = "MAX_REQUESTS_PER_SECOND_PER_HOST", default_value_t = agent_operator::controller::planes::DEFAULT_HOST_CEILING)]
    max_requests_per_second_per_host: f64,
    /// Log format: `text` (colours only on a terminal, none with
    /// `NO_COLOR`) or `json` (one object per line). `RUST_LOG` sets the
    /// levels (default `info,kube=warn`). The start line carries the
    /// version and every flag as parsed.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Address of the HTTP server of /metrics, /livez and /readyz.
    #[arg(
        long,
        visible_alias = "health-addr",
        env = "METRICS_ADDR",
        default_value = "0.0.0.0:8080"
    )]
    metrics_addr: SocketAddr,
    /// Answer /metrics only to a bearer token whose identity may `get` the
    /// non-resource URL /metrics (TokenReview and SubjectAccessReview against
    /// the API server; 401 without a token, 403 without the grant). Needs
    /// `create` on tokenreviews and subjectaccessreviews (docs/SECURITY.md,
    /// "Network"). /livez and /readyz stay open.
    #[arg(long, env = "METRICS_AUTHORIZATION")]
    metrics_authorization: bool,
    /// Run the controllers only while holding the leader Lease, so that of
    /// several replicas exactly one reconciles (needed with more than one
    /// replica).
    #[arg(long, env = "LEADER_ELECT")]
    leader_elect: bool,
    /// Reconcile only the objects of every kind of agentserver.dev
    /// (ClusterAgentControlPlane, AgentControlPlane, AgentListener,
    /// AgentDeployment, AgentAssistant, AgentCron) labelled
    /// `sharding.fluxcd.io/key=<KEY>` (the Flux convention), and elect the
    /// leader on the Lease `<lease-name>-<KEY>`. Without it the operator
    /// reconciles the objects without that label. A DNS label (lowercase
    /// letters, digits, '-'). A control plane and every object using it
    /// carry the same key (docs/INSTALL.md, "Sharding").
    #[arg(long, env = "SHARD")]
    shard: Option<String>,
    /// Name of the leader Lease (coordination.k8s.io/v1); with --shard, the
    /// shard's key is appended (`<name>-<key>`).
    #[arg(long, env = "LEASE_NAME", default_value = leader::DEFAULT_LEASE_NAME)]
    lease_name: String,
    /// Namespace of the leader Lease. Default: `POD_NAMESPACE`, else `default`.
    #[arg(long, env = "LEASE_NAMESPACE")]
    lease_namespace: Option<String>,
    /// Seconds a leader Lease lasts without renewal (the failover time when a
    /// leader dies); the leader renews every 2 s, retries a failed renewal
    /// until its renew deadline (the duration less a fifth, at least 1 s)
    /// and only then steps down. At least 2.
    #[arg(long, env = "LEASE_DURATION_SECONDS", default_value_t = leader::DEFAULT_LEASE_DURATION_SECONDS)]
    lease_duration_seconds: u64,
    /// Seconds that in-flight reconciles get to finish after SIGTERM/SIGINT.
    /// Past it the process exits with an error without releasing the leader
    /// Lease (it expires), so that no reconcile overlaps the next leader.
    /// Keep it below the pod's `terminationGracePeriodSeconds`.
    #[arg(long, env = "SHUTDOWN_TIMEOUT_SECONDS", default_value_t = 40.0)]
    shutdown_timeout_seconds: f64,
    /// Seconds between two verifications of a verified revision
    /// (`spec.verify`). Default: the resync interval. A new revision or a
    /// new generation is verified at once.
    #[arg(long, env = "VERIFY_INTERVAL_SECONDS")]
    verify_interval_seconds: Option<f64>,
    /// Seconds before the first retry of a failed verification; doubles per
    /// failure, capped at the resync interval.
    #[arg(long, env = "VERIFY_BACKOFF_SECONDS", default_value_t = 30.0)]
    verify_backoff_seconds: f64,
    /// Calls per second to each agent server: one token bucket per
    /// deployment, shared by its verification, AgentAssistants and
    /// AgentCrons, apart from every control plane budget. 0: no rate limit.
    /// A pass that does not fit is deferred, spread over that server's
    /// backlog.
    #[arg(long, env = "VERIFY_REQUESTS_PER_SECOND", default_value_t = 2.0)]
    verify_requests_per_second: f64,
    /// Burst of each agent server's token bucket (calls).
    #[arg(long, env = "VERIFY_BURST", default_value_t = 10)]
    verify_burst: u32,
    /// Passes calling agent servers at once, process-wide (a verification,
    /// an AgentAssistant's or an AgentCron's: each makes up to two calls).
    #[arg(long, env = "VERIFY_CONCURRENCY", default_value_t = 4)]
    verify_concurrency: usize,
    /// Hosts the operator may send requests to: control planes (an
    /// AgentControlPlane's url or region) and agent servers (an
    /// AgentDeployment's sourceConfig.customUrl, the deployment URL
    /// spec.verify calls), image registries (imagePolicy Pin and Follow)
    /// and AgentCron webhooks. Each entry is a host or IP address, or `*.suffix`
    /// for any host below suffix, optionally with `:port` (without one, any
    /// port). Repeat the flag or comma-separate; the list replaces the
    /// default. A resource naming another host is Stalled (HostNotAllowed)
    /// and nothing is sent there.
    #[arg(
        long,
        env = "ALLOWED_HOSTS",
        value_delimiter = ',',
        default_values_t = agent_operator::allowlist::DEFAULT_ALLOWED_HOSTS.map(String::from)
    )]
    allowed_hosts: Vec<String>,
    /// Name of the operator's own Secret holding the key of the HMAC in
    /// AgentDeployment status.secretsHash; created with a random key when
    /// missing. Deleting it rotates the key (each AgentDeployment then sends
    /// its secrets once).
    #[arg(long, env = "HASH_KEY_SECRET", default_value = agent_operator::controller::hash_key::DEFAULT_SECRET_NAME)]
    hash_key_secret: String,
    /// Namespace of that Secret. Default: `POD_NAMESPACE`, else `default`.
    #[arg(long, env = "HASH_KEY_NAMESPACE")]
    hash_key_namespace: Option<String>,
    /// The namespace whose Secrets hold the keys of ClusterAgentControlPlanes
    /// (their `apiKeySecretRef`, `bearerTokenSecretRef`, `caBundleSecretRef`),
    /// like cert-manager's `--cluster-resource-namespace`. Default:
    /// `POD_NAMESPACE`, else `default`. ClusterAgentControlPlanes are
    /// reconciled only when the operator watches every namespace (no
    /// `--namespace`; docs/PLATFORM-PLANES.md).
    #[arg(long, env = "CLUSTER_RESOURCE_NAMESPACE")]
    cluster_resource_namespace: Option<String>,
    /// Enforce the data-plane pod policy (docs/SECURITY.md, "What a
    /// self-hosted data plane trusts") in the operator too: an
    /// AgentDeployment or AgentListener that the shipped
    /// ValidatingAdmissionPolicy refuses is Stalled (PodPolicyRefused) and
    /// gets no request, also when it was stored while the policy was absent.
    /// Set by the Helm values `podPolicy` and by the kustomize component
    /// `deploy/components/pod-policy`.
    #[arg(long, env = "POD_POLICY")]
    pod_policy: bool,
    /// With --pod-policy: the values resourceSpec.serviceAccountName may
    /// take (the policy's serviceAccountNames); unset is always allowed.
    /// Repeat the flag or comma-separate. Empty: none allowed.
    #[arg(
        long,
        env = "POD_POLICY_SERVICE_ACCOUNT_NAMES",
        value_delimiter = ',',
        requires = "pod_policy"
    )]
    pod_policy_service_account_names: Vec<String>,
    /// With --pod-policy: the listener uuids sourceConfig.listenerId and
    /// AgentListener spec.listenerId may name, any case (the policy's
    /// listenerIds). Repeat the flag or comma-separate. Empty: none allowed.
    #[arg(
        long,
        env = "POD_POLICY_LISTENER_IDS",
        value_delimiter = ',',
        requires = "pod_policy"
    )]
    pod_policy_listener_ids: Vec<String>,
}

/// `s` seconds as a duration. Errors: negative, not finite or too large,
/// naming `--flag`.
fn seconds(s: f64, flag: &str) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(s).map_err(|e| anyhow::anyhow!("--{flag}: {e}"))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Crds { out } => {
            let files = agent_operator::api::crd_files()?;
            match out {
                Some(dir) => {
                    std::fs::create_dir_all(&dir)?;
                    for (name, yaml) in files {
                        std::fs::write(dir.join(&name), yaml)?;
                        eprintln!("wrote {}", dir.join(&name).display());
                    }
                }
                None => {
                    for (_, yaml) in files {
                        println!("---\n{yaml}");
                    }
                }
            }
            Ok(())
        }
        Command::Reference { out } => {
            let text = agent_operator::api::reference::markdown();
            match out {
                Some(path) => {
                    std::fs::write(&path, text)?;
                    eprintln!("wrote {}", path.display());
                }
                None => print!("{text}"),
            }
            Ok(())
        }
        Command::Docs { root, print, check } => docs(&root, print.as_deref(), check),
        Command::Run(args) => run(*args).await,
    }
}

/// The content of the generated block `name` of the docs.
fn generated_block(root: &std::path::Path, name: &str) -> anyhow::Result<String> {
    use agent_operator::docgen::{self, inputs};
    let read = |path: &str| {
        std::fs::read_to_string(root.join(path)).with_context(|| format!("reading {path}"))
    };
    Ok(match name {
        "flags" => {
            let cli = Cli::command();
            let run = cli.find_subcommand("run").context("the run subcommand")?;
            docgen::flags::table(run)
        }
        "helm-values" => {
            docgen::helm::table(&read(inputs::HELM_VALUES)?, &read(inputs::HELM_SCHEMA)?)?
        }
        "metrics" => docgen::metrics::table(),
        "alerts" => docgen::alerts::table(&read(inputs::ALERTS)?)?,
        "reasons" => docgen::reasons::table(),
        "results" => docgen::bench::table(&docgen::bench::parse(&read(inputs::BENCH_RESULTS)?)?),
        other => anyhow::bail!("no generated block {other:?}"),
    })
}

/// `agent-operator docs`: prints one block, checks every page, or rewrites
/// every page.
fn docs(root: &std::path::Path, print: Option<&str>, check: bool) -> anyhow::Result<()> {
    if let Some(name) = print {
        print!("{}", generated_block(root, name)?);
        return Ok(());
    }
    agent_operator::docgen::write_blocks(root, agent_operator::docgen::BLOCKS, check, |name| {
        generated_block(root, name)
    })
}

/// `agent-operator run`: logs the startup line, serves the HTTP endpoints
/// (metrics, health), waits for the leader lease with `--leader-elect`,
/// then runs the controllers until the shutdown signal ([`lead`]).
async fn run(args: RunArgs) -> anyhow::Result<()> {
    telemetry::init(args.log_format, "info,kube=warn");
    // The startup line: version, every flag as parsed (none is secret), then
    // the scope and the effective configuration below.
    let flags = format!("{args:?}");
    agent_operator::controlplane::client::install_crypto_provider();
    let config = args.operator_config()?;
    let shutdown_timeout = seconds(args.shutdown_timeout_seconds, "shutdown-timeout-seconds")?;
    let election = args.election()?;
    let host_ceiling = args.host_ceiling()?;
    let http_listener = TcpListener::bind(args.metrics_addr)
        .await
        .with_context(|| format!("--metrics-addr {}", args.metrics_addr))?;
    let client = kube::Client::try_default().await?;
    let scope = config.scope.clone();
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        flags,
        ?scope,
        ?config,
        http = %http_listener.local_addr()?,
        leader_election = ?election,
        "agent-operator starting"
    );
    let ctx = Shared::new(client.clone(), config);
    ctx.planes.set_host_ceiling(host_ceiling);
    ctx.planes.set_cluster_resource_namespace(
        &args
            .cluster_resource_namespace
            .clone()
            .unwrap_or_else(leader::default_namespace),
    );
    let health = Health::new();
    // One shutdown signal for the HTTP server, the lease wait and every
    // controller (graceful: in-flight reconciles finish).
    let shutdown = agent_operator::telemetry::shutdown_signal()
        .boxed()
        .shared();
    let server = serve(&args, http_listener, &ctx, &health, shutdown.clone());
    let leadership = match election {
        Some(election) => {
            health.set_standby();
            tokio::select! {
                leadership = leader::acquire(client.clone(), election) => Some(leadership),
                () = shutdown.clone() => {
                    tracing::info!("stopped before acquiring the leader lease");
                    health.set_stopping();
                    server.await??;
                    return Ok(());
                }
            }
        }
        None => None,
    };
    lead(ctx, leadership, &args, shutdown, shutdown_timeout, &health).await?;
    server.await??;
    tracing::info!("agent-operator stopped");
    Ok(())
}

/// Spawns the HTTP server of the metrics and health endpoints on
/// `listener` until `shutdown` (the metrics behind a TokenReview and
/// SubjectAccessReview with `--metrics-authorization`).
fn serve<S>(
    args: &RunArgs,
    listener: TcpListener,
    ctx: &Shared,
    health: &Health,
    shutdown: S,
) -> tokio::task::JoinHandle<std::io::Result<()>>
where
    S: std::future::Future<Output = ()> + Send + 'static,
{
    let metrics_auth = args.metrics_authorization.then(|| {
        Arc::new(agent_operator::metrics_auth::MetricsAuth::new(
            ctx.client.clone(),
        ))
    });
    tokio::spawn(http::serve_with(
        listener,
        ctx.metrics.clone(),
        health.clone(),
        metrics_auth,
        shutdown,
    ))
}

/// What the replica that reconciles does, once it leads (or at once
/// without `--leader-elect`): loads the secrets hash key, runs the
/// controllers until `shutdown` ([`until_stopped`]), then releases the
/// lease.
///
/// Errors: the hash key could not be read or created (the lease is
/// released first).
async fn lead<S>(
    ctx: Shared,
    leadership: Option<leader::Leadership>,
    args: &RunArgs,
    shutdown: S,
    shutdown_timeout: Duration,
    health: &Health,
) -> anyhow::Result<()>
where
    S: std::future::Future<Output = ()> + Send + Sync + Clone + 'static,
{
    let hash_key_namespace = args
        .hash_key_namespace
        .clone()
        .unwrap_or_else(leader::default_namespace);
    // The key of status.secretsHash, read by the replica that reconciles,
    // when it starts to (so a leader change after a rotation uses the new
    // key, and replicas never take turns with two keys).
    let state =
        match hash_key::load_or_create(&ctx.client, &hash_key_namespace, &args.hash_key_secret)
            .await
        {
            Ok(key) => State::with_hash_key(key),
            Err(e) => {
                release(leadership).await;
                return Err(anyhow::Error::from(e).context("the secrets hash key"));
            }
        };
    let scope = ctx.config.scope.clone();
    let metrics = ctx.metrics.clone();
    let shared = Arc::new(ctx);
    let ctx = Contexts {
        kinds: Arc::new(Context::of(shared.clone())),
        deployments: Arc::new(Context::new(shared, state)),
    };
    let lost = match &leadership {
        Some(l) => l.lost().boxed(),
        None => futures::future::pending().boxed(),
    };
    metrics.set_leader(true);
    health.set_starting();
    let controllers = run_controllers(ctx, scope, args.concurrency, shutdown.clone(), health);
    until_stopped(controllers, shutdown, shutdown_timeout, lost).await;
    health.set_stopping();
    metrics.set_leader(false);
    release(leadership).await;
    Ok(())
}

/// Waits for `controllers` to stop after `shutdown`. Exits the process
/// with status 1 when they have not stopped `shutdown_timeout` after it
/// (without releasing the lease), or at once when the lease is `lost`
/// (another replica may lead now).
async fn until_stopped<S>(
    controllers: impl std::future::Future<Output = ()>,
    shutdown: S,
    shutdown_timeout: Duration,
    lost: impl std::future::Future<Output = String>,
) where
    S: std::future::Future<Output = ()>,
{
    let overdue = async move {
        shutdown.await;
        tokio::time::sleep(shutdown_timeout).await;
    };
    tokio::select! {
        () = controllers => {}
        () = overdue => {
            // kube's controller also waits for its first list before it
            // stops, which never comes while the API server is unreachable.
            tracing::error!(
                timeout_s = shutdown_timeout.as_secs_f64(),
                "controllers did not stop in time; exiting without releasing the lease"
            );
            std::process::exit(1);
        }
        reason = lost => {
            // Another replica may lead now (or soon): stop reconciling at once.
            // Exiting cancels every in-flight reconcile, which survive
            // cancellation; Kubernetes restarts the container as a standby.
            tracing::error!(%reason, "lost the leader lease; exiting");
            std::process::exit(1);
        }
    }
}

/// Releases the leader lease, if held; a failure is logged (the lease then
/// expires after its duration).
async fn release(leadership: Option<leader::Leadership>) {
    if let Some(leadership) = leadership
        && let Err(e) = leadership.release().await
    {
        tracing::warn!(error = %e, "could not release the leader lease; it will expire");
    }
}

/// The contexts of the controllers: one [`Shared`] under both.
struct Contexts {
    /// The kinds that keep no state of their own.
    kinds: Arc<Context>,
    /// The AgentDeployment controller, with its state.
    deployments: Arc<DeploymentContext>,
}

/// The controllers of every kind (AgentDeployment, AgentControlPlane,
/// AgentListener, AgentAssistant, AgentCron, and ClusterAgentControlPlane
/// when `scope` is every namespace) until `shutdown`; `health` turns synced
/// once the AgentDeployment watches listed.
async fn run_controllers<S>(
    ctx: Contexts,
    scope: Scope,
    concurrency: u16,
    shutdown: S,
    health: &Health,
) where
    S: std::future::Future<Output = ()> + Send + Sync + Clone + 'static,
{
    let synced = health.clone();
    // A cluster plane serves every namespace: reconciled by an operator that
    // watches them all.
    let Contexts {
        kinds: ctx,
        deployments,
    } = ctx;
    let cluster_planes = {
        let (ctx, shutdown) = (ctx.clone(), shutdown.clone());
        let everywhere = scope.targets() == [None];
        async move {
            if everywhere {
                cluster_control_plane::run(ctx, shutdown).await;
            }
        }
    };
    futures::future::join(
        futures::future::join5(
            runner::run_with(
                deployments,
                scope.clone(),
                concurrency,
                shutdown.clone(),
                move || synced.set_synced(),
            ),
            control_plane::run(ctx.clone(), scope.clone(), shutdown.clone()),
            listener::run(ctx.clone(), scope.clone(), shutdown.clone()),
            assistant::run(ctx.clone(), scope.clone(), shutdown.clone()),
            cron::run(ctx, scope, shutdown),
        ),
        cluster_planes,
    )
    .await;
}

impl RunArgs {
    /// The timing, verification, host and pod policy settings of the
    /// controllers. Errors: a duration that is negative, not finite or too
    /// large; an `--allowed-hosts` entry that does not parse; a pod policy
    /// list entry of the wrong shape.
    fn operator_config(&self) -> anyhow::Result<OperatorConfig> {
        Ok(OperatorConfig {
            poll_interval: seconds(self.poll_interval_seconds, "poll-interval-seconds")?,
            max_poll_interval: seconds(
                self.max_poll_interval_seconds,
                "max-poll-interval-seconds",
            )?,
            resync_interval: seconds(self.resync_interval_seconds, "resync-interval-seconds")?,
            blocked_interval: seconds(self.blocked_interval_seconds, "blocked-interval-seconds")?,
            request_timeout: seconds(self.request_timeout_seconds, "request-timeout-seconds")?,
            verify: VerifyConfig {
                interval: self
                    .verify_interval_seconds
                    .map(|s| seconds(s, "verify-interval-seconds"))
                    .transpose()?,
                backoff: seconds(self.verify_backoff_seconds, "verify-backoff-seconds")?,
                requests_per_second: self.verify_requests_per_second,
                burst: self.verify_burst,
                concurrency: self.verify_concurrency,
            },
            allowed_hosts: agent_operator::allowlist::HostAllowlist::parse(&self.allowed_hosts)
                .map_err(|e| anyhow::anyhow!("--allowed-hosts: {e}"))?,
            shard: self.shard()?,
            pod_policy: self.pod_policy()?,
            scope: Scope::from_namespaces(self.namespaces.clone()),
            ..OperatorConfig::default()
        })
    }

    /// The data-plane pod policy with `--pod-policy`, else `None`. Errors:
    /// a list entry that is not a ServiceAccount name or a listener uuid
    /// ([`PodPolicy::new`]).
    fn pod_policy(&self) -> anyhow::Result<Option<PodPolicy>> {
        self.pod_policy
            .then(|| {
                PodPolicy::new(
                    &self.pod_policy_service_account_names,
                    &self.pod_policy_listener_ids,
                )
            })
            .transpose()
            .map_err(|e| anyhow::anyhow!(e))
    }

    /// The objects this operator reconciles (`--shard`). Errors: a key that
    /// is not a DNS label.
    fn shard(&self) -> anyhow::Result<agent_operator::shard::Shard> {
        agent_operator::shard::Shard::new(self.shard.as_deref())
            .map_err(|e| anyhow::anyhow!("--shard: {e}"))
    }

    /// The leader election settings with `--leader-elect`, else `None`; a
    /// shard's Lease is named after its key
    /// ([`agent_operator::shard::Shard::lease_name`]). Errors: a lease
    /// duration out of range ([`LeaderConfig::new`]), an invalid `--shard`.
    fn election(&self) -> anyhow::Result<Option<LeaderConfig>> {
        let lease_name = self.shard()?.lease_name(&self.lease_name);
        Ok(self
            .leader_elect
            .then(|| {
                LeaderConfig::new(
                    lease_name,
                    self.lease_namespace
                        .clone()
                        .unwrap_or_else(leader::default_namespace),
                    leader::default_identity(),
                    self.lease_duration_seconds,
                )
            })
            .transpose()?)
    }

    /// The ceiling of requests per second to one control plane host, for
    /// every AgentControlPlane on it (burst: one second's worth, 1 to
    /// 10,000). Errors: a rate that is not positive and finite.
    fn host_ceiling(&self) -> anyhow::Result<agent_operator::controlplane::RateLimit> {
        let ceiling = agent_operator::controlplane::RateLimit {
            requests_per_second: self.max_requests_per_second_per_host,
            burst: self
                .max_requests_per_second_per_host
                .ceil()
                .clamp(1.0, 10_000.0) as u32,
        };
        ceiling
            .period()
            .map_err(|e| anyhow::anyhow!("--max-requests-per-second-per-host: {e}"))?;
        Ok(ceiling)
    }
}
