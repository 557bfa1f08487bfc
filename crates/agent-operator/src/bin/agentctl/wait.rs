//! `--wait`: following a revision until it ends, with a spinner on a
//! terminal and plain lines otherwise (one per status change, for CI logs).

use std::io::IsTerminal;
use std::time::Duration;

use agent_operator::controlplane::ControlPlaneClient;
use agent_operator::controlplane::types::{Deployment, Revision};
use agent_operator::converge::{self, FollowOptions, Followed};
use agent_operator::plan::status::{Outcome, revision_outcome};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use crate::exit::{CliResult, Exit};

/// `--wait`, `--timeout` and `--poll-interval`.
#[derive(Args, Clone, Copy, Debug)]
pub struct WaitArgs {
    /// Follow the latest revision until it ends (DEPLOYED: exit 0; failed or
    /// INTERRUPTED: exit 1; still going after --timeout: exit 5).
    #[arg(long)]
    pub wait: bool,

    /// Seconds --wait waits at most.
    #[arg(long, value_name = "SECONDS", default_value_t = 900)]
    pub timeout: u64,

    /// Seconds between the first two reads of --wait; the delay then grows
    /// by a quarter per read up to 5 s (or this value if larger).
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0, value_parser = positive_seconds)]
    pub poll_interval: f64,
}

fn positive_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 3600.0 => Ok(v),
        _ => Err(format!("{s:?} is not a number of seconds in (0, 3600]")),
    }
}

impl WaitArgs {
    /// The polling options of [`converge::follow`].
    pub fn follow_options(&self) -> FollowOptions {
        FollowOptions {
            poll_initial: Duration::from_secs_f64(self.poll_interval),
            poll_max: Duration::from_secs(5),
            timeout: Duration::from_secs(self.timeout),
        }
    }
}

/// Progress of one wait: a spinner on stderr when it is a terminal, else
/// plain lines on stdout.
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A spinner if stderr is a terminal, else plain lines.
    pub fn new() -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new_spinner();
            if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} [{elapsed}]") {
                bar.set_style(style);
            }
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Self { bar }
    }

    /// One line of history (above the spinner, or on stdout), and the
    /// spinner's message `now` (the spinner shows the elapsed time itself).
    pub fn step(&self, line: &str, now: &str) {
        match &self.bar {
            Some(bar) => {
                bar.println(line);
                bar.set_message(now.to_owned());
            }
            None => println!("{line}"),
        }
    }

    /// Removes the spinner.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Reports a revision that ended: `<object> ready: ...` with the URL (only
/// when `history`, the statuses seen, is given: else the caller already
/// showed the status), or `<object> failed: ...` followed by the end of the
/// revision's log. Returns 0 for DEPLOYED, 1 otherwise.
pub async fn report_ended(
    cp: &ControlPlaneClient,
    object: &str,
    deployment: &Deployment,
    revision: &Revision,
    history: Option<String>,
) -> Exit {
    let history = history.map(|h| format!(" ({h})")).unwrap_or_default();
    match revision_outcome(&revision.id, &revision.status) {
        Outcome::Ready { message, .. } => {
            if !history.is_empty() {
                // The URL may be set once the revision serves.
                let url = cp
                    .get_deployment(&deployment.id)
                    .await
                    .ok()
                    .and_then(|d| d.source_config.custom_url)
                    .or_else(|| deployment.source_config.custom_url.clone());
                let serving = url.map(|u| format!("; serving at {u}")).unwrap_or_default();
                println!("{object} ready: {message}{history}{serving}");
            }
            Exit::Success
        }
        other => {
            println!("{object} failed: {}{history}", other.message());
            crate::logs::print_failure_tail(cp, deployment, revision).await;
            Exit::Failed
        }
    }
}

fn seconds(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// Follows revision `revision_id` of `deployment` until it ends or
/// `wait.timeout` passes, showing each status; then prints one summary line
/// prefixed with `object` (e.g. `agentdeployment/support-agent`), and for a
/// failed revision the end of its logs.
///
/// Returns 0 (DEPLOYED), 1 (failed, INTERRUPTED) or 5 (timed out). Errors:
/// a read that failed for good (exit 3 or 4).
pub async fn follow_revision(
    cp: &ControlPlaneClient,
    object: &str,
    deployment: &Deployment,
    revision_id: &str,
    wait: &WaitArgs,
) -> CliResult {
    let progress = Progress::new();
    let mut chain: Vec<String> = Vec::new();
    let mut followed_id = revision_id.to_owned();
    let result = converge::follow(
        cp,
        &deployment.id,
        revision_id,
        wait.follow_options(),
        |rid, status, elapsed| {
            if rid != followed_id {
                chain.clear();
                followed_id = rid.to_owned();
            }
            chain.push(status.to_string());
            let now = format!("revision {rid}: {status}");
            progress.step(&format!("{now} ({})", seconds(elapsed)), &now);
        },
    )
    .await;
    progress.finish();
    let followed = result?;
    match followed {
        Followed::Ended {
            revision, elapsed, ..
        } => {
            let history = format!("{} in {}", chain.join(" → "), seconds(elapsed));
            Ok(report_ended(cp, object, deployment, &revision, Some(history)).await)
        }
        Followed::TimedOut {
            revision_id,
            status,
            elapsed,
        } => {
            let status = status.map_or_else(|| "not read yet".to_owned(), |s| s.to_string());
            println!(
                "{object}: timed out after {}; revision {revision_id} is still {status}",
                seconds(elapsed)
            );
            Ok(Exit::TimedOut)
        }
    }
}
