//! The read and single-request commands on control plane resources:
//! `deployments list|get|delete`, `revisions list|get|wait`, `redeploy`,
//! `rollback`, `listeners list|get` and `integrations list|repos`.
//!
//! Sources: docs/control-plane-api.md "Requests" (list paging, redeploy,
//! redeploy an earlier revision, asynchronous delete), "Revision",
//! "Self-hosted placement and listeners", "Integrations (v1)".

use std::time::Instant;

use agent_operator::api::AgentDeploymentStatus;
use agent_operator::controlplane::types::{Deployment, GithubIntegration, Listener, Revision};
use agent_operator::controlplane::{ControlPlaneClient, ListDeployments, ListRevisions};
use clap::{Args, Subcommand};

use crate::exit::{CliError, CliResult, Exit, PlaneResult};
use crate::history;
use crate::output::{
    Output, fields, or_dash, print_structured, print_text, redact_deployment, table,
};
use crate::plane::{ControlPlaneArgs, find_deployment, lookup_deployment};
use crate::wait::{Progress, WaitArgs};

/// `agentctl deployments`.
#[derive(Args, Debug)]
pub struct DeploymentsArgs {
    #[command(flatten)]
    plane: ControlPlaneArgs,
    /// Output format of list and get.
    #[arg(short, long, value_enum, default_value_t = Output::Table, global = true)]
    output: Output,
    #[command(subcommand)]
    command: DeploymentsCommand,
}

#[derive(Debug, Subcommand)]
enum DeploymentsCommand {
    /// List the workspace's deployments (all pages, newest first).
    List {
        /// Only names containing this text.
        #[arg(long)]
        name_contains: Option<String>,
    },
    /// Show one deployment, by name or id (secret values never shown).
    Get {
        /// Deployment name or id.
        deployment: String,
    },
    /// Delete a deployment (asynchronous on the service: with --wait,
    /// until GET answers 404).
    Delete {
        /// Deployment name or id.
        deployment: String,
        /// A deployment that does not exist is not an error (exit 0), for
        /// pipelines that tear down what may already be gone.
        #[arg(long)]
        ignore_not_found: bool,
        #[command(flatten)]
        wait: WaitArgs,
    },
}

/// `agentctl revisions`.
#[derive(Args, Debug)]
pub struct RevisionsArgs {
    #[command(flatten)]
    plane: ControlPlaneArgs,
    /// Output format of list and get.
    #[arg(short, long, value_enum, default_value_t = Output::Table, global = true)]
    output: Output,
    #[command(subcommand)]
    command: RevisionsCommand,
}

#[derive(Debug, Subcommand)]
enum RevisionsCommand {
    /// List a deployment's revisions, newest first: SERVING marks the one
    /// serving, a DEPLOYED revision that no longer serves reads REPLACED,
    /// COMMIT/DIGEST is the commit the platform built (7 characters) or the
    /// image digest (12 hex digits), as `kubectl get agd -o wide` shows the
    /// serving one. NOTES marks a revision that failed, was interrupted or
    /// skipped, and, from the status of the AgentDeployment that holds the
    /// deployment (read from the cluster of the current kubeconfig, when
    /// there is one), one that passed or failed verification and those of
    /// an automatic rollback (rolled back, rollback target, rollback to).
    List {
        /// Deployment name or id.
        deployment: String,
        /// Namespace of the AgentDeployment that holds the deployment, read
        /// alone when the kubeconfig may not list the AgentDeployments of
        /// every namespace.
        #[arg(long, short = 'n', default_value = "default")]
        namespace: String,
    },
    /// Show one revision.
    Get {
        /// Deployment name or id.
        deployment: String,
        /// Revision id.
        revision: String,
    },
    /// Wait until a revision (default: the latest) ends: exit 0 DEPLOYED,
    /// 1 failed, 5 timed out.
    Wait {
        /// Deployment name or id.
        deployment: String,
        /// Revision id (default: the latest).
        revision: Option<String>,
        /// Seconds to wait at most.
        #[arg(long, value_name = "SECONDS", default_value_t = 900)]
        timeout: u64,
        /// Seconds between the first two reads (growing to 5 s).
        #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
        poll_interval: f64,
    },
}

/// `agentctl redeploy`.
#[derive(Args, Debug)]
pub struct RedeployArgs {
    /// Deployment name or id.
    deployment: String,
    #[command(flatten)]
    wait: WaitArgs,
    #[command(flatten)]
    plane: ControlPlaneArgs,
}

/// `agentctl rollback`.
#[derive(Args, Debug)]
pub struct RollbackArgs {
    /// Deployment name or id.
    deployment: String,
    /// The earlier revision whose configuration the new revision takes.
    #[arg(long = "to", value_name = "REVISION")]
    to: String,
    #[command(flatten)]
    wait: WaitArgs,
    #[command(flatten)]
    plane: ControlPlaneArgs,
}

/// `agentctl listeners`.
#[derive(Args, Debug)]
pub struct ListenersArgs {
    #[command(flatten)]
    plane: ControlPlaneArgs,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Output::Table, global = true)]
    output: Output,
    #[command(subcommand)]
    command: ListenersCommand,
}

#[derive(Debug, Subcommand)]
enum ListenersCommand {
    /// List the workspace's listeners (self-hosted enterprise only).
    List,
    /// Show one listener.
    Get {
        /// Listener id.
        listener: String,
    },
}

/// `agentctl integrations`.
#[derive(Debug, Args)]
pub struct IntegrationsArgs {
    #[command(flatten)]
    plane: ControlPlaneArgs,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Output::Table, global = true)]
    output: Output,
    #[command(subcommand)]
    command: IntegrationsCommand,
}

#[derive(Debug, Subcommand)]
enum IntegrationsCommand {
    /// List the workspace's GitHub integrations (id, installation id, name).
    List,
    /// List the repositories of one integration, given by name or id.
    Repos {
        /// Integration name (account or installation; case ignored) or id.
        integration: String,
    },
}

fn deployment_row(d: &Deployment) -> Vec<String> {
    vec![
        d.name.clone(),
        d.id.clone(),
        or_dash(d.status.as_deref()),
        or_dash(d.latest_revision_id.as_deref()),
        or_dash(d.source_config.custom_url.as_deref()),
    ]
}

const DEPLOYMENT_COLUMNS: [&str; 5] = ["NAME", "ID", "STATUS", "LATEST REVISION", "URL"];

/// `agentctl deployments`.
pub async fn deployments(args: DeploymentsArgs) -> CliResult {
    let cp = args.plane.client()?;
    match args.command {
        DeploymentsCommand::List { name_contains } => {
            let list = cp
                .list_all_deployments(&ListDeployments {
                    name_contains,
                    ..Default::default()
                })
                .await
                .plane("listing deployments")?;
            match args.output {
                Output::Table => {
                    let rows: Vec<Vec<String>> = list.iter().map(deployment_row).collect();
                    print_text(&table(&DEPLOYMENT_COLUMNS, &rows));
                }
                other => {
                    let all: Vec<_> = list.iter().map(redact_deployment).collect();
                    print_structured(&all, other)?;
                }
            }
        }
        DeploymentsCommand::Get { deployment } => {
            let d = find_deployment(&cp, &deployment).await?;
            match args.output {
                Output::Table => print_text(&deployment_fields(&d)),
                other => print_structured(&redact_deployment(&d), other)?,
            }
        }
        DeploymentsCommand::Delete {
            deployment,
            ignore_not_found,
            wait,
        } => {
            if ignore_not_found && lookup_deployment(&cp, &deployment).await?.is_none() {
                println!("deployment {deployment} not found; nothing to delete");
                return Ok(Exit::Success);
            }
            let d = find_deployment(&cp, &deployment).await?;
            return delete(&cp, &d, &wait).await;
        }
    }
    Ok(Exit::Success)
}

fn deployment_fields(d: &Deployment) -> String {
    let sc = &d.source_config;
    let rc = &d.source_revision_config;
    let secrets: Vec<&str> = d.secrets.iter().map(|s| s.name.as_str()).collect();
    let mut pairs = vec![
        ("name", d.name.clone()),
        ("id", d.id.clone()),
        ("source", or_dash(d.source.as_deref())),
        ("status", or_dash(d.status.as_deref())),
        ("latest revision", or_dash(d.latest_revision_id.as_deref())),
        ("active revision", or_dash(d.active_revision_id.as_deref())),
        ("url", or_dash(sc.custom_url.as_deref())),
        ("deployment type", or_dash(sc.deployment_type.as_deref())),
    ];
    if sc.repo_url.is_some() {
        pairs.push(("repository", or_dash(sc.repo_url.as_deref())));
        pairs.push(("ref", or_dash(rc.repo_ref.as_deref())));
        pairs.push(("config path", or_dash(rc.langgraph_config_path.as_deref())));
        pairs.push(("commit", or_dash(rc.repo_commit_sha.as_deref())));
    }
    if rc.image_uri.is_some() {
        pairs.push(("image", or_dash(rc.image_uri.as_deref())));
    }
    if let Some(l) = &sc.listener_id {
        pairs.push(("listener", l.clone()));
    }
    pairs.push(("secrets", or_dash(Some(&secrets.join(", ")))));
    pairs.push(("created", or_dash(d.created_at.as_deref())));
    pairs.push(("updated", or_dash(d.updated_at.as_deref())));
    fields(&pairs)
}

/// DELETE, then with `--wait` GET every poll interval until 404 (docs/control-plane-api.md
/// "Requests", Delete: asynchronous, `AWAITING_DELETE` until gone). A 404
/// on DELETE counts as done.
async fn delete(cp: &ControlPlaneClient, d: &Deployment, wait: &WaitArgs) -> CliResult {
    match cp.delete_deployment(&d.id).await {
        Ok(()) => println!("deployment {} ({}) deletion requested", d.name, d.id),
        Err(e) if e.is_not_found() => {
            println!("deployment {} ({}) is already gone", d.name, d.id);
            return Ok(Exit::Success);
        }
        Err(e) => return Err(CliError::plane(format!("deleting deployment {}", d.id), e)),
    }
    if !wait.wait {
        return Ok(Exit::Success);
    }
    let started = Instant::now();
    match wait_gone(cp, d, wait, started).await? {
        None => {
            println!(
                "deployment {} ({}) deleted ({:.1} s)",
                d.name,
                d.id,
                started.elapsed().as_secs_f64()
            );
            Ok(Exit::Success)
        }
        Some(status) => {
            println!(
                "deployment {}: timed out after {:.1} s; still {status}",
                d.name,
                started.elapsed().as_secs_f64()
            );
            Ok(Exit::TimedOut)
        }
    }
}

/// `delete --wait`: reads the deployment at a growing interval until a
/// read answers 404 (`None`) or `--timeout` after `started` has passed
/// (the last status read), showing each new status as progress.
///
/// Errors: a read that failed otherwise, with its exit code.
async fn wait_gone(
    cp: &ControlPlaneClient,
    d: &Deployment,
    wait: &WaitArgs,
    started: Instant,
) -> CliResult<Option<String>> {
    let opts = wait.follow_options();
    let progress = Progress::new();
    let mut last: Option<String> = None;
    let mut delay = opts.poll_initial;
    let result = loop {
        match cp.get_deployment(&d.id).await {
            Err(e) if e.is_not_found() => break Ok(None),
            Err(e) => break Err(CliError::plane(format!("reading deployment {}", d.id), e)),
            Ok(now) => {
                let status = now.status.unwrap_or_else(|| "-".into());
                if last.as_ref() != Some(&status) {
                    let now = format!("deployment {}: {status}", d.name);
                    progress.step(
                        &format!("{now} ({:.1} s)", started.elapsed().as_secs_f64()),
                        &now,
                    );
                    last = Some(status);
                }
            }
        }
        let left = opts.timeout.saturating_sub(started.elapsed());
        if left.is_zero() {
            break Ok(last.clone());
        }
        tokio::time::sleep(delay.min(left)).await;
        delay = delay
            .mul_f64(1.25)
            .min(opts.poll_max.max(opts.poll_initial));
    };
    progress.finish();
    result
}

/// `agentctl revisions`.
pub async fn revisions(args: RevisionsArgs) -> CliResult {
    let cp = args.plane.client()?;
    match args.command {
        RevisionsCommand::List {
            deployment,
            namespace,
        } => list_revisions(&cp, &deployment, &namespace, args.output).await?,
        RevisionsCommand::Get {
            deployment,
            revision,
        } => get_revision(&cp, &deployment, &revision, args.output).await?,
        RevisionsCommand::Wait {
            deployment,
            revision,
            timeout,
            poll_interval,
        } => {
            let d = find_deployment(&cp, &deployment).await?;
            let Some(rid) = revision.or_else(|| d.latest_revision_id.clone()) else {
                return Err(CliError::new(
                    Exit::Rejected,
                    anyhow::anyhow!("deployment {} has no revision", d.name),
                ));
            };
            let wait = WaitArgs {
                wait: true,
                timeout,
                poll_interval: poll_interval.clamp(0.01, 3600.0),
            };
            let object = format!("deployment/{}", d.name);
            return crate::wait::follow_revision(&cp, &object, &d, &rid, &wait).await;
        }
    }
    Ok(Exit::Success)
}

/// `agentctl revisions get`: one revision of `deployment`, as fields or
/// in the structured `output`.
async fn get_revision(
    cp: &ControlPlaneClient,
    deployment: &str,
    revision: &str,
    output: Output,
) -> CliResult<()> {
    let d = find_deployment(cp, deployment).await?;
    let r = cp
        .get_revision(&d.id, revision)
        .await
        .plane(format!("reading revision {revision}"))?;
    match output {
        Output::Table => print_text(&revision_fields(&d, &r)),
        other => print_structured(&r, other)?,
    }
    Ok(())
}

/// A revision of `d` as `revisions get` prints it: its id, deployment,
/// status, whether it is active, its source and times.
fn revision_fields(d: &Deployment, r: &Revision) -> String {
    let rc = r.source_revision_config.clone().unwrap_or_default();
    let mut pairs = vec![
        ("id", r.id.clone()),
        ("deployment", format!("{} ({})", d.name, d.id)),
        ("status", r.status.to_string()),
        (
            "active",
            (d.active_revision_id.as_deref() == Some(r.id.as_str())).to_string(),
        ),
    ];
    if let Some(v) = rc.repo_ref {
        pairs.push(("ref", v));
    }
    if let Some(v) = rc.repo_commit_sha {
        pairs.push(("commit", v));
    }
    if let Some(v) = rc.image_uri {
        pairs.push(("image", v));
    }
    pairs.push(("created", or_dash(r.created_at.as_deref())));
    pairs.push(("updated", or_dash(r.updated_at.as_deref())));
    fields(&pairs)
}

/// `agentctl revisions list`: the revisions of `deployment`, newest first,
/// with the notes of [`history::notes`] (the operator's from the
/// AgentDeployment that holds it, [`operator_status`]).
async fn list_revisions(
    cp: &ControlPlaneClient,
    deployment: &str,
    namespace: &str,
    output: Output,
) -> CliResult<()> {
    let d = find_deployment(cp, deployment).await?;
    let list = cp
        .list_all_revisions(&d.id, &ListRevisions::default())
        .await
        .plane(format!("listing the revisions of {}", d.name))?;
    let status = operator_status(&d.id, namespace).await;
    let status = status.as_ref();
    let active = d.active_revision_id.as_deref();
    if output == Output::Table {
        let rows: Vec<Vec<String>> = list
            .iter()
            .map(|r| history::row(r, active, status))
            .collect();
        print_text(&table(&history::COLUMNS, &rows));
        return Ok(());
    }
    let listed: Vec<history::Listed> = list
        .iter()
        .map(|revision| history::Listed {
            revision,
            notes: history::notes(revision, status),
        })
        .collect();
    print_structured(&listed, output)
}

/// The status of the AgentDeployment that holds the deployment `id`, read
/// from the cluster of the current kubeconfig (every namespace, else
/// `namespace`: [`crate::cluster::agent_deployments`]); `None` when no
/// cluster is configured (quietly: agentctl runs without one), when none
/// holds it, or when the cluster cannot be read (with a note on stderr).
async fn operator_status(id: &str, namespace: &str) -> Option<AgentDeploymentStatus> {
    let client = crate::cluster::connect().await.ok()?;
    match crate::cluster::agent_deployments(&client, namespace).await {
        Ok(listed) => crate::cluster::holder(&listed, id)?.status.clone(),
        Err(e) => {
            eprintln!(
                "agentctl: note: {:#}; the notes show the control plane's outcomes only",
                e.error
            );
            None
        }
    }
}

/// `agentctl redeploy`: `POST /v2/deployments/{id}/revisions` (never
/// retried: a repeat would start another revision).
pub async fn redeploy(args: RedeployArgs) -> CliResult {
    let cp = args.plane.client()?;
    let d = find_deployment(&cp, &args.deployment).await?;
    let r = cp
        .redeploy(&d.id)
        .await
        .plane(format!("redeploying {}", d.name))?;
    println!(
        "deployment {} ({}): new revision {} ({})",
        d.name, d.id, r.id, r.status
    );
    started(&cp, &d, &r.id, &args.wait).await
}

/// `agentctl rollback --to REVISION`:
/// `POST /v2/deployments/{id}/revisions/{revision_id}/redeploy`, a new
/// revision with the earlier revision's configuration (never retried).
pub async fn rollback(args: RollbackArgs) -> CliResult {
    let cp = args.plane.client()?;
    let d = find_deployment(&cp, &args.deployment).await?;
    let after = cp
        .redeploy_revision(&d.id, &args.to)
        .await
        .plane(format!("rolling {} back to revision {}", d.name, args.to))?;
    let Some(rid) = after.latest_revision_id.clone() else {
        return Err(CliError::new(
            Exit::Rejected,
            anyhow::anyhow!("the control plane answered without a latest revision"),
        ));
    };
    println!(
        "deployment {} ({}): new revision {rid} with the configuration of revision {}",
        d.name, d.id, args.to
    );
    started(&cp, &after, &rid, &args.wait).await
}

/// After a revision was started: follow it with `--wait`, else say how.
async fn started(
    cp: &ControlPlaneClient,
    d: &Deployment,
    revision_id: &str,
    wait: &WaitArgs,
) -> CliResult {
    if wait.wait {
        let object = format!("deployment/{}", d.name);
        return crate::wait::follow_revision(cp, &object, d, revision_id, wait).await;
    }
    println!(
        "follow it with `agentctl revisions wait {} {revision_id}`",
        d.name
    );
    Ok(Exit::Success)
}

/// One row of `listeners list`: id, type, compute id, namespaces, version.
fn listener_row(l: &Listener) -> Vec<String> {
    vec![
        l.id.clone(),
        l.compute_type.clone(),
        l.compute_id.clone(),
        l.compute_config
            .k8s_namespaces
            .as_ref()
            .map_or_else(|| "(any)".to_owned(), |n| n.join(",")),
        or_dash(l.version.as_deref()),
    ]
}

/// `agentctl listeners`.
pub async fn listeners(args: ListenersArgs) -> CliResult {
    let cp = args.plane.client()?;
    let list = match args.command {
        ListenersCommand::List => cp.list_all_listeners().await.plane("listing listeners")?,
        ListenersCommand::Get { listener } => vec![
            cp.get_listener(&listener)
                .await
                .plane(format!("reading listener {listener}"))?,
        ],
    };
    match args.output {
        Output::Table => print_text(&table(
            &["ID", "TYPE", "COMPUTE ID", "NAMESPACES", "VERSION"],
            &list.iter().map(listener_row).collect::<Vec<_>>(),
        )),
        other if list.len() == 1 => print_structured(&list[0], other)?,
        other => print_structured(&list, other)?,
    }
    Ok(Exit::Success)
}

/// `agentctl integrations`.
pub async fn integrations(args: IntegrationsArgs) -> CliResult {
    let cp = args.plane.client()?;
    let installs = cp
        .list_github_integrations()
        .await
        .plane("listing GitHub integrations")?;
    match args.command {
        IntegrationsCommand::List => match args.output {
            Output::Table => {
                let rows: Vec<Vec<String>> = installs.iter().map(integration_row).collect();
                print_text(&table(&["NAME", "ID", "INSTALLATION ID"], &rows));
            }
            other => print_structured(&installs, other)?,
        },
        IntegrationsCommand::Repos { integration } => {
            let id = integration_id(&installs, &integration)?;
            let repos = cp
                .list_github_repositories(&id)
                .await
                .plane(format!("listing the repositories of integration {id}"))?;
            match args.output {
                Output::Table => {
                    let rows: Vec<Vec<String>> = repos
                        .iter()
                        .map(|r| vec![r.url.clone(), r.default_branch.clone().unwrap_or_default()])
                        .collect();
                    print_text(&table(&["URL", "DEFAULT BRANCH"], &rows));
                }
                other => print_structured(&repos, other)?,
            }
        }
    }
    Ok(Exit::Success)
}

/// One row of `integrations list`: name, id, installation id.
fn integration_row(i: &GithubIntegration) -> Vec<String> {
    vec![
        i.name.clone().unwrap_or_default(),
        i.id.clone(),
        i.installation_id
            .as_ref()
            .map(|v| v.to_string().trim_matches('"').to_owned())
            .unwrap_or_default(),
    ]
}

/// The id of the integration `integration` names: an id of `installs`
/// (any case), else the one integration of that name, as the operator
/// finds it.
///
/// Errors: no single integration has that name or id (exit 3).
fn integration_id(installs: &[GithubIntegration], integration: &str) -> CliResult<String> {
    match installs
        .iter()
        .find(|i| i.id.eq_ignore_ascii_case(integration))
    {
        Some(i) => Ok(i.id.clone()),
        None => agent_operator::controller::integrations::find_integration(installs, integration)
            .map(|i| i.id.clone())
            .map_err(|_| {
                CliError::new(
                    Exit::Rejected,
                    anyhow::anyhow!(
                        "no single GitHub integration has the name or id {integration:?}; see `agentctl integrations list`"
                    ),
                )
            }),
    }
}
