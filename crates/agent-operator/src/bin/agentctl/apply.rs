//! `agentctl apply -f FILE [--wait]` and `agentctl diff -f FILE`: the
//! operator's reconcile core without a cluster ([`agent_operator::converge`]).
//! The cluster of the current kubeconfig is read only for a Secret the file
//! names but does not hold ([`crate::desired::read_manifest`]).

use std::path::PathBuf;

use agent_operator::controlplane::ControlPlaneClient;
use agent_operator::controlplane::types::Deployment;
use agent_operator::converge::{self, Action, Desired, Plan};
use clap::Args;

use crate::agents::{Deployed, Mode};
use crate::desired::read_manifest;
use crate::exit::{CliResult, Exit, PlaneResult};
use crate::plane::ControlPlaneArgs;
use crate::wait::WaitArgs;

/// `apply` flags.
#[derive(Args, Debug)]
pub struct ApplyArgs {
    /// YAML file of AgentDeployment documents, the Secret (and
    /// AgentListener) documents they reference, and AgentAssistant and
    /// AgentCron documents on those deployments; `-` reads stdin. A
    /// secretKeyRef whose Secret is not in the file is read from the
    /// Secret of that name in the cluster of the current kubeconfig, when
    /// there is one (read only then; --secret-from-env comes first).
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub file: PathBuf,

    /// A secretKeyRef whose Secret is not in the file takes its value from
    /// the environment variable named like its key (e.g. OPENAI_API_KEY),
    /// when it is set: secrets stay in the pipeline's variables, not in a
    /// file. Which wins: a Secret of the file, then the variable, then the
    /// cluster's Secret.
    #[arg(long)]
    pub secret_from_env: bool,

    #[command(flatten)]
    pub wait: WaitArgs,

    #[command(flatten)]
    pub plane: ControlPlaneArgs,
}

/// `diff` flags.
#[derive(Args, Debug)]
pub struct DiffArgs {
    /// YAML file, as for `apply`; `-` reads stdin. A Secret not in the
    /// file is read from the cluster of the current kubeconfig, as for
    /// `apply`.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub file: PathBuf,

    /// As for `apply`: a Secret not in the file is read from the
    /// environment variable named like the key, when it is set. Which
    /// wins: a Secret of the file, then the variable, then the cluster's
    /// Secret.
    #[arg(long)]
    pub secret_from_env: bool,

    #[command(flatten)]
    pub plane: ControlPlaneArgs,
}

/// `agentctl apply`: for each AgentDeployment of the file, [`converge::plan`]
/// then [`converge::execute`] (at most one create or PATCH; none when
/// unchanged), then with `--wait` follows the latest revision; then the
/// file's AgentAssistants and AgentCrons on the agent servers of the
/// deployments that converged ([`crate::agents`]).
///
/// Returns the worst exit code of the objects (see `exit`).
pub async fn apply(args: ApplyArgs) -> CliResult {
    let (manifest, wanted) = read_manifest(&args.file, args.secret_from_env).await?;
    let cp = args.plane.client()?;
    let mut worst = Exit::Success;
    let mut deployed: Vec<Deployed> = Vec::with_capacity(wanted.len());
    for want in &wanted {
        let (code, id) = apply_one(&cp, want, &args.wait).await?;
        worst = worst.max(code);
        deployed.push(match code {
            Exit::Success => Ok(id),
            _ => Err(format!("deployment {} did not converge", want.remote_name)),
        });
    }
    let agents = crate::agents::converge(&cp, &manifest, &wanted, &deployed, Mode::Apply).await?;
    Ok(worst.max(agents))
}

/// One deployment: its exit code and its remote id.
async fn apply_one(
    cp: &ControlPlaneClient,
    want: &Desired,
    wait: &WaitArgs,
) -> CliResult<(Exit, String)> {
    let plan = converge::plan(cp, want).await?;
    let applied = converge::execute(cp, want, plan).await?;
    let id = applied.deployment.id.clone();
    Ok((applied_one(cp, want, wait, applied).await?, id))
}

/// Prints what was done to one deployment, then with `--wait` follows its
/// latest revision (and runs `spec.verify` once it is DEPLOYED), else
/// tells how to follow it. Returns the deployment's exit code.
///
/// Errors: a failed read of the revision, with its exit code.
async fn applied_one(
    cp: &ControlPlaneClient,
    want: &Desired,
    wait: &WaitArgs,
    applied: converge::Applied,
) -> CliResult {
    // The service reads secrets back as [] before the first revision
    // (docs/control-plane-api.md, "Answer shapes"): the log lines printed
    // below are redacted with the values sent as well as those read.
    let mut with_sent = applied.deployment.clone();
    with_sent.secrets.extend(want.body.secrets.iter().cloned());
    let d = &with_sent;
    let object = &want.object;
    let latest = d.latest_revision_id.clone();
    let revision = latest.as_deref().unwrap_or("-");
    let code = match &applied.action {
        Action::Created => {
            println!(
                "{object} created: deployment {} ({}), revision {revision}",
                d.name, d.id
            );
            Exit::Success
        }
        Action::Patched {
            fields,
            new_revision,
            not_held,
        } => print_patched(object, d, revision, fields, *new_revision, not_held),
        Action::Unchanged => {
            if let Some(ended) = unchanged(cp, want, wait, d).await? {
                return Ok(ended);
            }
            Exit::Success
        }
    };
    let Some(rid) = latest else {
        return Ok(code);
    };
    if wait.wait {
        let waited = crate::wait::follow_revision(cp, object, d, &rid, wait).await?;
        let waited = verify_after(cp, want, &d.id, waited).await;
        return Ok(code.max(waited));
    }
    if !matches!(applied.action, Action::Unchanged) {
        println!(
            "{object}: follow the revision with `agentctl revisions wait {}`",
            d.name
        );
    }
    Ok(code)
}

/// Prints the line of a patched deployment (the fields sent, whether a
/// revision starts) and, when the answer still differs on some fields,
/// the line naming them. Returns 1 in that case, else 0.
fn print_patched(
    object: &str,
    d: &Deployment,
    revision: &str,
    fields: &[&str],
    new_revision: bool,
    not_held: &[&str],
) -> Exit {
    let starts = if new_revision {
        format!("new revision {revision}")
    } else {
        "no new revision".to_owned()
    };
    println!(
        "{object} patched: deployment {} ({}): {}; {starts}",
        d.name,
        d.id,
        fields.join(", ")
    );
    if not_held.is_empty() {
        return Exit::Success;
    }
    println!(
        "{object}: the control plane did not hold {} (its answer still differs from \
         the spec)",
        not_held.join(", ")
    );
    Exit::Failed
}

/// Reads the latest revision of an unchanged deployment and prints its
/// line with the revision's status. With `--wait` and a revision that
/// already ended, reports its outcome at once (and a failure's log, and
/// `spec.verify`) and returns the deployment's exit code: such a revision
/// needs no follow. Else returns `None`.
///
/// Errors: a failed read of the revision, with its exit code.
async fn unchanged(
    cp: &ControlPlaneClient,
    want: &Desired,
    wait: &WaitArgs,
    d: &Deployment,
) -> CliResult<Option<Exit>> {
    let object = &want.object;
    let latest = &d.latest_revision_id;
    let revision_read = match latest {
        Some(rid) => Some(
            cp.get_revision(&d.id, rid)
                .await
                .plane("reading the latest revision")?,
        ),
        None => None,
    };
    let status = revision_read
        .as_ref()
        .map_or_else(|| "-".to_owned(), |r| r.status.to_string());
    println!(
        "{object} unchanged: deployment {} ({}), revision {} is {status}",
        d.name,
        d.id,
        latest.as_deref().unwrap_or("-")
    );
    if let Some(rev) = revision_read.filter(|r| !r.status.is_in_progress())
        && wait.wait
    {
        let ended = crate::wait::report_ended(cp, object, d, &rev, None).await;
        return Ok(Some(verify_after(cp, want, &d.id, ended).await));
    }
    Ok(None)
}

/// With `spec.verify`, once `--wait` saw the revision DEPLOYED (`ended`
/// is 0): runs the operator's checks on the deployment's agent server
/// (`verify::check`: the assistant search, then the run), with the
/// operator's key rule, and prints one line. Returns `ended`, or 1 when a
/// check failed (a deployment that does not answer is not ready).
async fn verify_after(cp: &ControlPlaneClient, want: &Desired, id: &str, ended: Exit) -> Exit {
    use agent_operator::controller::deployment::verify;
    let (Some(spec), Exit::Success) = (want.verify(), ended) else {
        return ended;
    };
    let object = &want.object;
    let url = match cp.get_deployment(id).await {
        Ok(d) => d.source_config.custom_url,
        Err(e) => {
            println!("{object} not verified: reading the deployment's URL: {e}");
            return Exit::Failed;
        }
    };
    let Some(url) = url else {
        println!("{object} not verified: the deployment has no URL yet");
        return Exit::Failed;
    };
    let key = want.verify_key(cp.api_key());
    // Not checked against the operator's --allowed-hosts: user-driven (see
    // plane.rs).
    let client = match verify::agent_server_client(url.clone(), key, verify::CALL_TIMEOUT_CAP) {
        Ok(c) => c,
        Err(e) => {
            println!("{object} not verified: {e}");
            return Exit::Failed;
        }
    };
    let checked = verify::check(&client, spec).await;
    let mut found = Vec::new();
    if let Some(n) = checked.assistant_count {
        found.push(format!("{n} assistant(s)"));
    }
    if let Some(o) = checked.run_outcome {
        let events = checked.run_events.unwrap_or(0);
        found.push(format!("run {o} ({events} events)"));
    }
    match checked.failure {
        None => {
            println!("{object} verified at {url}: {}", found.join(", "));
            Exit::Success
        }
        Some((reason, message)) => {
            println!("{object} not verified ({reason}): {message}");
            Exit::Failed
        }
    }
}

/// `agentctl diff`: what `apply` would send, secret values never shown.
/// Exit 0 when nothing would change, 1 when something would (like
/// `kubectl diff`); only reads are sent.
pub async fn diff(args: DiffArgs) -> CliResult {
    let (manifest, wanted) = read_manifest(&args.file, args.secret_from_env).await?;
    let cp = args.plane.client()?;
    let mut code = Exit::Success;
    let mut deployed: Vec<Deployed> = Vec::with_capacity(wanted.len());
    for want in &wanted {
        let plan = converge::plan(&cp, want).await?;
        let object = &want.object;
        deployed.push(match &plan {
            Plan::Create { body } => Err(format!(
                "deployment {} does not exist yet (its agent server objects are created once it \
                 is DEPLOYED)",
                body.name
            )),
            Plan::Patch { remote, .. }
            | Plan::Mismatch { remote, .. }
            | Plan::Unchanged { remote } => Ok(remote.id.clone()),
        });
        match &plan {
            Plan::Create { body } => {
                println!("{object}: would create deployment {}", body.name);
            }
            Plan::Patch { remote, patch } => {
                let fields = agent_operator::plan::desired::patch_fields(patch).join(", ");
                let revision = if agent_operator::plan::desired::creates_revision(patch) {
                    "starts a new revision"
                } else {
                    "no new revision"
                };
                println!(
                    "{object}: would patch deployment {} ({}): {fields}; {revision}",
                    remote.name, remote.id
                );
            }
            Plan::Unchanged { remote } => {
                println!(
                    "{object}: no changes (deployment {}, {})",
                    remote.name, remote.id
                );
            }
            // Nothing apply could send makes it match: a difference.
            Plan::Mismatch { message, .. } => {
                println!("{message}");
                code = Exit::Failed;
            }
        }
        if let Some(body) = converge::redacted_body(&plan) {
            crate::output::print_structured(&body, crate::output::Output::Json)?;
            code = Exit::Failed;
        }
    }
    let agents = crate::agents::converge(&cp, &manifest, &wanted, &deployed, Mode::Diff).await?;
    Ok(code.max(agents))
}

/// `get` flags.
#[derive(Args, Debug)]
pub struct GetArgs {
    /// YAML file, as for `apply`; `-` reads stdin. A Secret not in the
    /// file is read from the cluster of the current kubeconfig, as for
    /// `apply`.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub file: PathBuf,

    /// As for `apply`: a Secret not in the file is read from the
    /// environment variable named like the key, when it is set. Which
    /// wins: a Secret of the file, then the variable, then the cluster's
    /// Secret.
    #[arg(long)]
    pub secret_from_env: bool,

    #[command(flatten)]
    pub plane: ControlPlaneArgs,
}

/// `agentctl get -f`: one line per object of the file with what the
/// control plane and the agent servers hold for it (deployment id, latest
/// revision and its status; assistant id and version; cron id, schedule
/// and next run), and whether it is as the file says. Reads only; exit 0
/// (see `diff` for the exit code of a difference).
pub async fn get(args: GetArgs) -> CliResult {
    let (manifest, wanted) = read_manifest(&args.file, args.secret_from_env).await?;
    let cp = args.plane.client()?;
    let mut deployed: Vec<Deployed> = Vec::with_capacity(wanted.len());
    for want in &wanted {
        let plan = converge::plan(&cp, want).await?;
        let object = &want.object;
        let (remote, same) = match &plan {
            Plan::Create { body } => {
                println!("{object}: deployment {} does not exist", body.name);
                deployed.push(Err(format!("deployment {} does not exist", body.name)));
                continue;
            }
            Plan::Patch { remote, .. } | Plan::Mismatch { remote, .. } => (remote, false),
            Plan::Unchanged { remote } => (remote, true),
        };
        let revision = match &remote.latest_revision_id {
            Some(rid) => {
                let r = cp
                    .get_revision(&remote.id, rid)
                    .await
                    .plane("reading the latest revision")?;
                format!("revision {rid} is {}", r.status)
            }
            None => "no revision".to_owned(),
        };
        println!(
            "{object}: deployment {} ({}), {revision}, {}",
            remote.name,
            remote.id,
            crate::agents::in_sync(same)
        );
        deployed.push(Ok(remote.id.clone()));
    }
    crate::agents::converge(&cp, &manifest, &wanted, &deployed, Mode::Get).await?;
    Ok(Exit::Success)
}
