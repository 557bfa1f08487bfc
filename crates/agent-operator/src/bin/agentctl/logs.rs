//! `agentctl logs` and the end of a failed revision's log after `--wait`
//! (docs/control-plane-api.md "Logs": `build_logs` of a revision, `deploy_logs` of a revision or
//! of the whole deployment; "the CLI prints the last 30 build lines when a
//! revision ends BUILD_FAILED").
//!
//! Every printed line is redacted of the API key and of the deployment's
//! secret values (`agent_operator::redact`): a log may repeat what the agent
//! printed. Which log explains a failure is the operator's choice
//! (`logtail::FailureLog`), and each line of a failure tail is cleaned as the
//! operator cleans it (`logtail::clean`).

use std::collections::HashSet;
use std::time::Duration;

use agent_operator::controlplane::ControlPlaneClient;
use agent_operator::controlplane::types::{
    Deployment, LogEntry, LogOrder, LogPage, LogQuery, Revision,
};
use agent_operator::plan::logtail::{self, FailureLog};
use clap::Args;
use secrecy::{ExposeSecret, SecretString};

use crate::exit::{CliError, CliResult, Exit, PlaneResult};
use crate::plane::{ControlPlaneArgs, find_deployment};

/// Lines of a failed revision's log printed after `--wait` (as the official
/// CLI prints for a failed build; docs/control-plane-api.md "Logs").
pub const FAILURE_TAIL_LINES: u32 = 30;

/// `agentctl logs` flags.
#[derive(Args, Debug)]
pub struct LogsArgs {
    /// Deployment name or id.
    deployment: String,

    /// The build log of a revision (default: the server log).
    #[arg(long)]
    build: bool,

    /// Revision id (default: the latest for --build; all revisions for the
    /// server log).
    #[arg(long, value_name = "REVISION")]
    revision: Option<String>,

    /// Keep printing new lines, reading every --interval seconds, until
    /// Ctrl-C (a build log: until its revision ended).
    #[arg(short, long)]
    follow: bool,

    /// How many of the newest lines to print first (1–1000).
    #[arg(long, value_name = "LINES", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    tail: u32,

    /// Only lines of this level, e.g. ERROR.
    #[arg(long)]
    level: Option<String>,

    /// Only lines containing this text.
    #[arg(long)]
    query: Option<String>,

    /// Only lines at or after this time (RFC 3339).
    #[arg(long, value_name = "TIME")]
    since: Option<String>,

    /// Seconds between two reads of --follow.
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    interval: f64,

    /// The manifest the deployment was applied from: the secret values it
    /// resolves are redacted too. The control plane reads secrets back as
    /// [] before the first revision (docs/control-plane-api.md, "Answer
    /// shapes"), so without it only the values it returns and the API key
    /// are known.
    #[arg(long, value_name = "FILE")]
    file: Option<std::path::PathBuf>,

    /// As for `apply`: a Secret not in --file is read from the environment
    /// variable named like the key, when it is set (else from the cluster,
    /// as for `apply`).
    #[arg(long, requires = "file")]
    secret_from_env: bool,

    #[command(flatten)]
    plane: ControlPlaneArgs,
}

/// The secrets a printed log line must not show: the API key and the
/// deployment's secret values (as the service returned them).
fn secrets_of(deployment: &Deployment) -> Vec<SecretString> {
    let mut out: Vec<SecretString> = deployment
        .secrets
        .iter()
        .filter(|s| !s.value.expose_secret().is_empty())
        .map(|s| s.value.clone())
        .collect();
    if let Some(key) = crate::plane::api_key() {
        out.push(key);
    }
    out
}

/// Prints the end of the log that explains a failed revision: the build
/// log for BUILD_FAILED, the revision's server log for DEPLOY_FAILED
/// (`logtail::FailureLog::of`), [`FAILURE_TAIL_LINES`] lines, oldest first,
/// each cleaned and redacted (`logtail::clean`). Nothing for other
/// statuses. A read that fails is reported, not an error: the outcome is
/// already known.
pub async fn print_failure_tail(cp: &ControlPlaneClient, deployment: &Deployment, rev: &Revision) {
    let Some(log) = FailureLog::of(&rev.status) else {
        return;
    };
    let query = LogQuery {
        limit: Some(FAILURE_TAIL_LINES),
        order: Some(LogOrder::Desc),
        ..Default::default()
    };
    let page = match log {
        FailureLog::Build => cp.build_logs(&deployment.id, &rev.id, &query).await,
        FailureLog::Deploy => cp.deploy_logs(&deployment.id, Some(&rev.id), &query).await,
    };
    let name = log.name();
    match page {
        Ok(page) if page.logs.is_empty() => println!("the {name} is empty"),
        Ok(page) => {
            let secrets = secrets_of(deployment);
            println!("last {} lines of the {name}:", page.logs.len());
            for entry in page.logs.iter().rev() {
                println!("  {}", logtail::clean(&entry.message, &secrets));
            }
        }
        Err(e) => println!("the {name} could not be read: {e}"),
    }
}

/// One entry as a line: `TIMESTAMP LEVEL MESSAGE`, redacted, without
/// control characters.
fn format_entry(e: &LogEntry, secrets: &[SecretString]) -> String {
    let message: String = agent_operator::redact::text(&e.message, secrets)
        .chars()
        .filter(|c| !c.is_control() || *c == '\t')
        .collect();
    format!(
        "{} {:<5} {}",
        e.timestamp.as_deref().unwrap_or("-"),
        e.level.as_deref().unwrap_or("-"),
        message.trim_end()
    )
}

/// What identifies an entry across reads: its id, else its time and text.
fn entry_key(e: &LogEntry) -> String {
    match &e.id {
        Some(id) => format!("id:{id}"),
        None => format!("{}\u{0}{}", e.timestamp.as_deref().unwrap_or(""), e.message),
    }
}

/// `agentctl logs`: the newest `--tail` lines (oldest first), then with
/// `--follow` the new ones every `--interval` seconds.
pub async fn logs(args: LogsArgs) -> CliResult {
    let cp = args.plane.client()?;
    let d = find_deployment(&cp, &args.deployment).await?;
    let source = LogSource {
        cp: &cp,
        deployment: &d,
        revision: revision_of(&args, &d)?,
        build: args.build,
    };
    let mut printed = Printed {
        secrets: secrets_to_redact(&args, &d).await?,
        seen: HashSet::new(),
        since: args.since.clone(),
    };
    let base = LogQuery {
        level: args.level.clone(),
        query: args.query.clone(),
        start_time: args.since.clone(),
        ..Default::default()
    };
    let first = source
        .read(LogQuery {
            limit: Some(args.tail),
            order: Some(LogOrder::Desc),
            ..base.clone()
        })
        .await?;
    for e in first.logs.iter().rev() {
        printed.print(e);
    }
    if !args.follow {
        return Ok(Exit::Success);
    }
    let interval = Duration::from_secs_f64(args.interval.clamp(0.05, 3600.0));
    follow(&source, &base, &mut printed, interval).await
}

/// The revision whose log `agentctl logs` reads: `--revision`, else the
/// latest for `--build`, else none (the server log of all revisions).
///
/// Errors: `--build` for a deployment without a revision (exit 3).
fn revision_of(args: &LogsArgs, d: &Deployment) -> CliResult<Option<String>> {
    Ok(match (&args.revision, args.build) {
        (Some(r), _) => Some(r.clone()),
        (None, true) => Some(d.latest_revision_id.clone().ok_or_else(|| {
            CliError::new(
                Exit::Rejected,
                anyhow::anyhow!("deployment {} has no revision", d.name),
            )
        })?),
        (None, false) => None,
    })
}

/// The secrets the printed lines are redacted of: those of
/// [`secrets_of`], plus the secret values `--file` resolves. Without
/// `--file`, notes on stderr when the control plane returned no secret
/// values.
///
/// Errors: a `--file` that cannot be read or resolved.
async fn secrets_to_redact(args: &LogsArgs, d: &Deployment) -> CliResult<Vec<SecretString>> {
    let mut secrets = secrets_of(d);
    match &args.file {
        Some(file) => {
            for want in crate::desired::read_desired(file, args.secret_from_env).await? {
                secrets.extend(want.body.secrets.iter().map(|s| s.value.clone()));
            }
        }
        None if d.secrets.is_empty() => eprintln!(
            "note: the control plane returned no secret values for {} (none before its first revision): lines are redacted of the API key only; pass --file <manifest> to redact the secrets you sent",
            d.name
        ),
        None => {}
    }
    Ok(secrets)
}

/// The log `agentctl logs` reads: a revision's build log, or the server
/// log of one revision or of the whole deployment.
struct LogSource<'a> {
    /// The control plane client.
    cp: &'a ControlPlaneClient,
    /// The deployment.
    deployment: &'a Deployment,
    /// The revision ([`revision_of`]).
    revision: Option<String>,
    /// The build log (`--build`), else the server log.
    build: bool,
}

impl LogSource<'_> {
    /// Reads one page of the log.
    ///
    /// Errors: a failed read, with its exit code.
    async fn read(&self, query: LogQuery) -> CliResult<LogPage> {
        let (cp, d, revision) = (self.cp, self.deployment, &self.revision);
        let page: Result<LogPage, _> = if self.build {
            cp.build_logs(&d.id, revision.as_deref().unwrap_or_default(), &query)
                .await
        } else {
            cp.deploy_logs(&d.id, revision.as_deref(), &query).await
        };
        page.plane("reading the logs")
    }

    /// Whether the log has no more lines to come: a build log whose
    /// revision is no longer in progress (never for a server log).
    ///
    /// Errors: a failed read of the revision.
    async fn ended(&self) -> CliResult<bool> {
        Ok(match (&self.revision, self.build) {
            (Some(rid), true) => !self
                .cp
                .get_revision(&self.deployment.id, rid)
                .await
                .plane("reading the revision")?
                .status
                .is_in_progress(),
            _ => false,
        })
    }
}

/// What `agentctl logs` printed so far, to print each entry once.
struct Printed {
    /// What each line is redacted of.
    secrets: Vec<SecretString>,
    /// The [`entry_key`] of every entry printed.
    seen: HashSet<String>,
    /// The time of the newest entry printed (else `--since`): where the
    /// next read of `--follow` starts.
    since: Option<String>,
}

impl Printed {
    /// Prints an entry and remembers it.
    fn print(&mut self, e: &LogEntry) {
        self.seen.insert(entry_key(e));
        println!("{}", format_entry(e, &self.secrets));
        if e.timestamp.is_some() {
            self.since = e.timestamp.clone();
        }
    }
}

/// `--follow`: every `interval`, reads the entries since the newest printed
/// and prints those not printed yet, until Ctrl-C or, for a build log, one
/// last read after its revision ended.
///
/// Errors: a failed read, with its exit code.
async fn follow(
    source: &LogSource<'_>,
    base: &LogQuery,
    printed: &mut Printed,
    interval: Duration,
) -> CliResult {
    let mut interrupt = std::pin::pin!(tokio::signal::ctrl_c());
    loop {
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = &mut interrupt => return Ok(Exit::Success),
        }
        // A build log ends with its revision: read once more after it ended.
        let ended = source.ended().await?;
        let page = source
            .read(LogQuery {
                limit: Some(1000),
                order: Some(LogOrder::Asc),
                start_time: printed.since.clone(),
                ..base.clone()
            })
            .await?;
        for e in &page.logs {
            if !printed.seen.contains(&entry_key(e)) {
                printed.print(e);
            }
        }
        if ended {
            return Ok(Exit::Success);
        }
    }
}
