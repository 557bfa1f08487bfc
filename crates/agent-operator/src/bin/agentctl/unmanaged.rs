//! `agentctl unmanaged`: the deployments of a workspace that no
//! AgentDeployment manages, each with the `agentctl export` command that
//! brings it under GitOps (issue "Bring an existing workspace under
//! GitOps", item 3). The AgentControlPlane's `status.unmanaged` counts
//! them; this lists them all.
//!
//! Which are managed is decided as the operator decides it
//! ([`agent_operator::plan::unmanaged`]): a deployment that an
//! AgentDeployment of any namespace holds or claims on this plane (the URL
//! and workspace agentctl talks to) is left out, read from the cluster of
//! the current kubeconfig (`KUBECONFIG`, else `~/.kube/config`, else
//! in-cluster; every namespace, or `--namespace` alone with a note when the
//! kubeconfig may not list them all: [`crate::cluster`]). Reads only.
//! Source: docs/control-plane-api.md "Requests" (list) and "Deployment"
//! (`status`, `is_preview`).

use agent_operator::controlplane::ListDeployments;
use agent_operator::controlplane::types::Deployment;
use agent_operator::plan::unmanaged::unmanaged;
use clap::Args;
use serde::Serialize;

use crate::exit::{CliResult, Exit, OrExit, PlaneResult};
use crate::output::{Output, or_dash, print_structured, print_text, table};
use crate::plane::ControlPlaneArgs;

/// `agentctl unmanaged`.
#[derive(Args, Debug)]
pub struct UnmanagedArgs {
    #[command(flatten)]
    plane: ControlPlaneArgs,
    /// Namespace of the export commands printed; the only one read when the
    /// kubeconfig may not list the AgentDeployments of every namespace.
    #[arg(long, short = 'n', default_value = "default")]
    namespace: String,
    /// The control plane the printed export commands name: `NAME` (an
    /// AgentControlPlane) or `cacp/NAME` (a ClusterAgentControlPlane).
    #[arg(long, default_value = "default", value_parser = super::export::plane_ref)]
    control_plane: String,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    output: Output,
}

/// One row of the listing (also its JSON and YAML form).
#[derive(Debug, Serialize)]
struct Row {
    name: String,
    id: String,
    status: Option<String>,
    /// The platform's own pull-request preview (`is_preview`).
    preview: bool,
    /// The command that writes an AgentDeployment adopting it.
    export: String,
}

/// The row of `d`: the export names it by id (a preview may share its
/// parent's name).
fn row(d: &Deployment, namespace: &str, control_plane: &str) -> Row {
    Row {
        name: d.name.clone(),
        id: d.id.clone(),
        status: d.status.clone(),
        preview: d.preview(),
        export: format!(
            "agentctl export {} -n {namespace} --control-plane {control_plane}",
            d.id
        ),
    }
}

/// Lists the unmanaged deployments, sorted by name. Errors: the control
/// plane client's (exit 3 or 4); a cluster that cannot be read (exit 4).
pub async fn unmanaged_deployments(args: UnmanagedArgs) -> CliResult {
    let cp = args.plane.client()?;
    let remote = cp
        .list_all_deployments(&ListDeployments::default())
        .await
        .plane("listing the workspace's deployments")?;
    let client = crate::cluster::connect()
        .await
        .map_err(anyhow::Error::msg)
        .or_exit(Exit::Unavailable, "reading the cluster (kubeconfig)")?;
    let listed = crate::cluster::agent_deployments(&client, &args.namespace).await?;
    let managed = crate::cluster::managed(&client, &listed, &cp, &remote).await?;
    let rows: Vec<Row> = unmanaged(&remote, &managed)
        .into_iter()
        .map(|d| row(d, &args.namespace, &args.control_plane))
        .collect();
    match args.output {
        Output::Table => {
            let cells: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    vec![
                        r.name.clone(),
                        r.id.clone(),
                        or_dash(r.status.as_deref()),
                        if r.preview { "yes" } else { "no" }.to_owned(),
                        r.export.clone(),
                    ]
                })
                .collect();
            print_text(&table(
                &["NAME", "ID", "STATUS", "PREVIEW", "EXPORT"],
                &cells,
            ));
            if rows.is_empty() {
                eprintln!("every deployment of the workspace is managed");
            }
        }
        other => print_structured(&rows, other)?,
    }
    Ok(Exit::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_names_the_export_by_id() {
        let d: Deployment = serde_json::from_value(serde_json::json!({
            "id": "5c1d", "name": "legacy", "status": "UNUSED", "is_preview": false,
        }))
        .unwrap();
        let r = row(&d, "agents", "prod");
        assert_eq!(
            r.export,
            "agentctl export 5c1d -n agents --control-plane prod"
        );
        assert_eq!(r.status.as_deref(), Some("UNUSED"));
        assert!(!r.preview);
    }
}
