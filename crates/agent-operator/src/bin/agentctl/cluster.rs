//! The cluster of the current kubeconfig (`KUBECONFIG`, else
//! `~/.kube/config`, else the pod's ServiceAccount), as agentctl reads it:
//! which AgentDeployments hold or claim the deployments of a workspace (one
//! owner per remote deployment: docs/BEHAVIOUR.md, decided by
//! [`agent_operator::plan::unmanaged::Managed`] as the operator decides its
//! unmanaged report), the AgentDeployment that holds one deployment, and
//! the Secrets a file refers to but does not hold. Reads only: a list of the
//! AgentDeployments, a `GET` of an AgentControlPlane or a Secret.

use std::collections::HashSet;
use std::time::Duration;

use agent_operator::api::AgentDeployment;
use agent_operator::controller::deployment::claims::claim_of;
use agent_operator::controller::unmanaged::{Planes, add_all};
use agent_operator::controlplane::ControlPlaneClient;
use agent_operator::controlplane::types::Deployment;
use agent_operator::plan::claims::PlaneId;
use agent_operator::plan::unmanaged::Managed;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::ListParams;

use crate::exit::{CliResult, Exit, OrExit};

/// Longest wait for the API server to accept a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A client of the current kubeconfig. Errors: why there is none (no
/// kubeconfig and not in a pod, or an unusable one), in words.
pub async fn connect() -> Result<kube::Client, String> {
    let mut config = kube::Config::infer().await.map_err(|e| e.to_string())?;
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    kube::Client::try_from(config).map_err(|e| e.to_string())
}

/// The AgentDeployments of every namespace; when the kubeconfig may not
/// list them all (403), those of `namespace`, with a note on stderr that
/// the result only knows that namespace. Errors (exit 4): a list failed.
pub async fn agent_deployments(
    client: &kube::Client,
    namespace: &str,
) -> CliResult<Vec<AgentDeployment>> {
    let all: Api<AgentDeployment> = Api::all(client.clone());
    match all.list(&ListParams::default()).await {
        Ok(list) => return Ok(list.items),
        Err(kube::Error::Api(e)) if e.code == 403 => eprintln!(
            "agentctl: note: this kubeconfig may not list the AgentDeployments of all \
             namespaces ({}); the result only knows those of namespace {namespace}",
            e.message
        ),
        Err(e) => {
            return Err(e).or_exit(
                Exit::Unavailable,
                "listing the AgentDeployments of the cluster (kubeconfig)",
            );
        }
    }
    let one: Api<AgentDeployment> = Api::namespaced(client.clone(), namespace);
    one.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .or_exit(
            Exit::Unavailable,
            &format!("listing the AgentDeployments of namespace {namespace} (kubeconfig)"),
        )
}

/// The plane agentctl talks to: the base URL and workspace of `cp`.
pub fn plane_of(cp: &ControlPlaneClient) -> PlaneId {
    PlaneId::new(cp.base_url(), cp.workspace_id())
}

/// What `deployments` hold or claim on the plane of `cp`, for the
/// deployments `remote` of its workspace (the AgentControlPlane of an
/// object read only when it claims one of their names). Errors (exit 4): a
/// read of an AgentControlPlane failed.
pub async fn managed(
    client: &kube::Client,
    deployments: &[AgentDeployment],
    cp: &ControlPlaneClient,
    remote: &[Deployment],
) -> CliResult<Managed> {
    let names: HashSet<&str> = remote.iter().map(|d| d.name.as_str()).collect();
    let mut planes = Planes::new(client.clone(), None);
    let mut managed = Managed::default();
    add_all(
        &mut managed,
        deployments,
        &plane_of(cp),
        &names,
        &mut planes,
    )
    .await
    .or_exit(
        Exit::Unavailable,
        "reading the AgentControlPlanes of the AgentDeployments (kubeconfig)",
    )?;
    Ok(managed)
}

/// The AgentDeployment of `deployments` that holds the remote deployment
/// `id` (its `status.deploymentId` or id annotation), if one does.
pub fn holder<'a>(deployments: &'a [AgentDeployment], id: &str) -> Option<&'a AgentDeployment> {
    deployments.iter().find(|d| {
        let claim = claim_of(d, None);
        !claim.expired
            && claim
                .holds
                .as_deref()
                .is_some_and(|h| h.eq_ignore_ascii_case(id))
    })
}

/// The Secrets of `wanted` (namespace, name) that the cluster has, and for
/// each one that could not be read, why (no kubeconfig, a refused or
/// failed `GET`). A Secret the cluster does not have is in neither.
pub async fn secrets(
    wanted: &[(String, String)],
) -> (Vec<Secret>, Vec<((String, String), String)>) {
    let mut found = Vec::new();
    let mut unread = Vec::new();
    if wanted.is_empty() {
        return (found, unread);
    }
    let client = match connect().await {
        Ok(client) => client,
        Err(why) => {
            let why = format!("no cluster: {why}");
            return (
                found,
                wanted.iter().map(|w| (w.clone(), why.clone())).collect(),
            );
        }
    };
    for (ns, name) in wanted {
        let api: Api<Secret> = Api::namespaced(client.clone(), ns);
        match api.get_opt(name).await {
            Ok(Some(secret)) => found.push(secret),
            Ok(None) => {}
            Err(e) => unread.push(((ns.clone(), name.clone()), e.to_string())),
        }
    }
    (found, unread)
}
