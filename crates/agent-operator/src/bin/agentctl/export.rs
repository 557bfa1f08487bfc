//! `agentctl export`: AgentDeployment YAML for the deployments a workspace
//! already has (made in the UI, with the CLI or with Terraform), to bring
//! them under GitOps (issue "Bring an existing workspace under GitOps",
//! item 2).
//!
//! Each deployment becomes an AgentDeployment that adopts it by id
//! (`spec.deploymentId`) under `managementPolicy: Observe` (unless
//! `--management-policy Manage`) and says what it runs now, so that applying
//! the file changes nothing remote (`agentctl diff -f` exits 0, the operator's
//! first pass sends no PATCH). Secret values are never read into the file:
//! each environment variable becomes a `secretKeyRef` to one Kubernetes
//! Secret per deployment, `<name>-env`, whose keys a comment lists with the
//! command that creates it. Fields the service fills in (`repo_branch`,
//! `repo_commit_sha`, a `github` deployment's URL) and `resource_spec` keys
//! the project does not model are left out, the latter named in a comment.
//! A deployment that an AgentDeployment of the cluster (of any namespace)
//! holds or claims on the same plane is not exported: one owner per remote
//! deployment (docs/BEHAVIOUR.md), read from the cluster of the current
//! kubeconfig ([`crate::cluster`]).
//! Mapping: docs/control-plane-api.md "Deployment" (wire fields) and the
//! CRD's field docs (docs/reference.md).

use agent_operator::api::resource_spec;
use agent_operator::controlplane::types::Deployment;
use agent_operator::controlplane::{ControlPlaneClient, ListDeployments};
use agent_operator::plan::shapes;
use agent_operator::plan::unmanaged::{Managed, Owner};
use clap::Args;
use serde_json::{Map, Value, json};

use crate::exit::{CliError, CliResult, PlaneResult};
use crate::plane::ControlPlaneArgs;

/// `agentctl export`.
#[derive(Args, Debug)]
pub struct ExportArgs {
    #[command(flatten)]
    plane: ControlPlaneArgs,
    /// Deployments to export, by name; none: every deployment of the
    /// workspace (with --name-contains, those whose name contains it).
    names: Vec<String>,
    /// Only deployments whose name contains this text.
    #[arg(long)]
    name_contains: Option<String>,
    /// Namespace of the AgentDeployments (and of the Secrets to create);
    /// the only one read when the kubeconfig may not list the
    /// AgentDeployments of every namespace.
    #[arg(long, short = 'n', default_value = "default")]
    namespace: String,
    /// The control plane the AgentDeployments name: `NAME` (the
    /// namespace's AgentControlPlane) or `cacp/NAME` (a
    /// ClusterAgentControlPlane, docs/PLATFORM-PLANES.md).
    #[arg(long, default_value = "default", value_parser = plane_ref)]
    control_plane: String,
    /// `spec.managementPolicy` of the AgentDeployments: `Observe` (the
    /// default: adopted, never changed, drift reported, so that the first
    /// apply is safe whatever the file says) or `Manage` (the operator
    /// corrects every difference).
    #[arg(long, default_value = "Observe", value_parser = ["Observe", "Manage"])]
    management_policy: String,
}

/// Prints the AgentDeployments of the selected deployments, as a
/// multi-document YAML stream, sorted by name. A deployment that an
/// AgentDeployment of the cluster (any namespace) holds or claims on this
/// plane is never exported ([`managed`]): left out with a note on stderr,
/// and refused when asked for by name or id. Errors: the client's (exit 3
/// or 4), a name given that no deployment has (exit 3), a name or id given
/// whose every deployment an AgentDeployment holds or claims (exit 3, naming
/// it), a cluster that cannot be read (exit 4).
pub async fn export(args: ExportArgs) -> CliResult<u8> {
    let cp = args.plane.client()?;
    let query = ListDeployments {
        name_contains: args.name_contains.clone(),
        ..Default::default()
    };
    let mut found = cp
        .list_all_deployments(&query)
        .await
        .plane("listing the workspace's deployments")?;
    found
        .retain(|d| args.names.is_empty() || args.names.iter().any(|n| *n == d.name || *n == d.id));
    let managed = managed(&cp, &found, &args.namespace).await?;
    for wanted in &args.names {
        let named: Vec<&Deployment> = found
            .iter()
            .filter(|d| d.name == *wanted || d.id == *wanted)
            .collect();
        check_wanted(wanted, &named, &managed)?;
    }
    let (mut kept, left_out): (Vec<Deployment>, Vec<Deployment>) =
        found.into_iter().partition(|d| !managed.manages(d));
    note_left_out(&left_out, &managed);
    kept.sort_by(|a, b| a.name.cmp(&b.name));
    for d in &kept {
        print!(
            "{}",
            document(
                d,
                &args.namespace,
                &args.control_plane,
                &args.management_policy
            )
        );
    }
    if kept.is_empty() && left_out.is_empty() {
        eprintln!("no deployment matched");
    }
    Ok(0)
}

/// What the AgentDeployments of the cluster hold or claim among `found`
/// ([`crate::cluster`]: every namespace, or `namespace` alone with a note);
/// with no cluster configured at all, nothing, with a note that the export
/// could not check. Errors (exit 4): a cluster that cannot be read.
async fn managed(
    cp: &ControlPlaneClient,
    found: &[Deployment],
    namespace: &str,
) -> CliResult<Managed> {
    let client = match crate::cluster::connect().await {
        Ok(client) => client,
        Err(why) => {
            eprintln!(
                "agentctl: note: no cluster to read ({why}); the export cannot leave out the \
                 deployments that AgentDeployments hold"
            );
            return Ok(Managed::default());
        }
    };
    let listed = crate::cluster::agent_deployments(&client, namespace).await?;
    crate::cluster::managed(&client, &listed, cp, found).await
}

/// Refuses (exit 3) an export asked for by `wanted` (a name or id) when
/// deployments have it and an AgentDeployment holds or claims every one:
/// a deployment has one owner (docs/BEHAVIOUR.md, "One owner per remote
/// deployment"); the error names that AgentDeployment. None has it: exit
/// 3 too.
fn check_wanted(wanted: &str, named: &[&Deployment], managed: &Managed) -> CliResult<()> {
    if named.is_empty() {
        return Err(CliError::new(
            crate::exit::Exit::Rejected,
            anyhow::anyhow!("no deployment is named or has the id {wanted}"),
        ));
    }
    let owned: Vec<String> = named
        .iter()
        .filter_map(|d| managed.owner(d).map(|o| owned_by(d, o)))
        .collect();
    if owned.len() < named.len() {
        return Ok(());
    }
    Err(CliError::new(
        crate::exit::Exit::Rejected,
        anyhow::anyhow!(
            "{}: a deployment has one owner, so it is not exported; change that \
             AgentDeployment instead, or move the deployment as docs/RENAME-AND-MOVE.md says",
            owned.join("; ")
        ),
    ))
}

/// `deployment NAME (ID) is held by AgentDeployment NS/NAME`, or claimed.
fn owned_by(d: &Deployment, owner: &Owner) -> String {
    format!(
        "deployment {} ({}) is {} AgentDeployment {}",
        d.name,
        d.id,
        owner.hold.words(),
        owner.key
    )
}

/// Says on stderr which deployments were left out and who holds them.
fn note_left_out(left_out: &[Deployment], managed: &Managed) {
    if left_out.is_empty() {
        return;
    }
    let each: Vec<String> = left_out
        .iter()
        .filter_map(|d| managed.owner(d).map(|o| owned_by(d, o)))
        .collect();
    eprintln!(
        "agentctl: left out {} deployment(s) that AgentDeployments of the cluster manage: {}",
        left_out.len(),
        each.join("; ")
    );
}

/// `--control-plane` checked: `NAME`, or `KIND/NAME` where `KIND` is
/// `cacp`, `clusteragentcontrolplane` or `ClusterAgentControlPlane` (also
/// `acp`, `agentcontrolplane`, `AgentControlPlane`). Errors: another kind,
/// or an empty name.
pub fn plane_ref(arg: &str) -> Result<String, String> {
    let name = match arg.split_once('/') {
        None => arg,
        Some((kind, name)) => {
            let kind = kind.to_ascii_lowercase();
            if ![
                "cacp",
                "clusteragentcontrolplane",
                "acp",
                "agentcontrolplane",
            ]
            .contains(&kind.as_str())
            {
                return Err(format!(
                    "{arg}: the kind is cacp (ClusterAgentControlPlane) or acp (AgentControlPlane)"
                ));
            }
            name
        }
    };
    if name.is_empty() {
        return Err(format!("{arg}: no name"));
    }
    Ok(arg.to_owned())
}

/// The `controlPlaneRef` of a checked `--control-plane` ([`plane_ref`]).
fn plane_ref_json(arg: &str) -> Value {
    match arg.split_once('/') {
        Some((kind, name)) if kind.to_ascii_lowercase().starts_with('c') => {
            json!({"kind": "ClusterAgentControlPlane", "name": name})
        }
        Some((_, name)) => json!({"name": name}),
        None => json!({"name": arg}),
    }
}

/// One `---` document: comments (the Secret to create, what was left out),
/// then the AgentDeployment.
fn document(d: &Deployment, namespace: &str, control_plane: &str, policy: &str) -> String {
    let (mut manifest, secret, left_out) = agent_deployment(d, namespace, control_plane);
    manifest["spec"]["managementPolicy"] = Value::String(policy.to_owned());
    let mut out = format!("---\n# {} (deployment {})\n", d.name, d.id);
    if let Some((name, keys)) = secret {
        out.push_str(&format!(
            "# Create the Secret {name} first, with the values the deployment runs with (never exported):\n\
             #   kubectl -n {namespace} create secret generic {name} {}\n",
            keys.iter()
                .map(|k| format!("--from-literal={k}=..."))
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    if !left_out.is_empty() {
        out.push_str(&format!(
            "# Left out (not modelled by the CRD): resource_spec {}\n",
            left_out.join(", ")
        ));
    }
    out.push_str(&yaml_serde::to_string(&manifest).unwrap_or_default());
    out
}

/// A Secret an exported AgentDeployment refers to: its name and keys.
type SecretToCreate = (String, Vec<String>);

/// The AgentDeployment of `d`, the Secret it refers to if any, and the
/// `resource_spec` keys left out.
fn agent_deployment(
    d: &Deployment,
    namespace: &str,
    control_plane: &str,
) -> (Value, Option<SecretToCreate>, Vec<String>) {
    let source = d.source.clone().unwrap_or_else(|| "github".into());
    let github = source == "github";
    let (config, left_out) = source_config(d, github);
    let mut spec = json!({
        "controlPlaneRef": plane_ref_json(control_plane),
        "deploymentId": d.id,
        "source": source,
        "sourceConfig": config,
        "sourceRevisionConfig": source_revision_config(d, github),
    });
    let secret = put_secrets(&mut spec, d);
    let manifest = json!({
        "apiVersion": "agentserver.dev/v1alpha1",
        "kind": "AgentDeployment",
        "metadata": {"name": d.name, "namespace": namespace},
        "spec": spec,
    });
    (manifest, secret, left_out)
}

/// Inserts `value` under `key` in `map`, unless it is absent or null.
fn put(map: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(v) = value.filter(|v| !v.is_null()) {
        map.insert(key.to_owned(), v);
    }
}

/// An optional string of the wire as a JSON string.
fn string(v: &Option<String>) -> Option<Value> {
    v.clone().map(Value::String)
}

/// The `sourceConfig` of `d`'s AgentDeployment (the GitHub fields, or the
/// image's URL; its listener; the modelled `resource_spec`), and the
/// `resource_spec` keys left out.
fn source_config(d: &Deployment, github: bool) -> (Map<String, Value>, Vec<String>) {
    let sc = &d.source_config;
    let mut config = Map::new();
    if github {
        put(&mut config, "integrationId", string(&sc.integration_id));
        put(&mut config, "repoUrl", string(&sc.repo_url));
        put(&mut config, "deploymentType", string(&sc.deployment_type));
        put(
            &mut config,
            "buildOnPush",
            sc.build_on_push.map(Value::Bool),
        );
        put(&mut config, "installCommand", string(&sc.install_command));
        put(&mut config, "buildCommand", string(&sc.build_command));
    } else {
        put(&mut config, "customUrl", string(&sc.custom_url));
    }
    put(&mut config, "listenerId", string(&sc.listener_id));
    if let Some(ns) = sc
        .listener_config
        .as_ref()
        .and_then(|l| l.k8s_namespace.clone())
    {
        config.insert("listenerConfig".into(), json!({"k8sNamespace": ns}));
    }
    let mut left_out = Vec::new();
    if let Some(Value::Object(wire)) = &sc.resource_spec {
        let (spec, unmodelled) = resource_spec::from_wire(wire);
        left_out = unmodelled;
        if !spec.is_empty() {
            config.insert("resourceSpec".into(), Value::Object(spec));
        }
    }
    (config, left_out)
}

/// The `sourceRevisionConfig` of `d`'s AgentDeployment: the configured
/// branch and config path of a GitHub source, or the image.
fn source_revision_config(d: &Deployment, github: bool) -> Map<String, Value> {
    let rc = &d.source_revision_config;
    let mut revision = Map::new();
    if github {
        // The configured branch, not the commit a read may show in
        // `repo_ref` (docs/control-plane-api.md "Answer shapes").
        put(
            &mut revision,
            "repoRef",
            shapes::configured_ref(d).map(|r| Value::String(r.to_owned())),
        );
        put(
            &mut revision,
            "langgraphConfigPath",
            string(&rc.langgraph_config_path),
        );
    } else {
        put(&mut revision, "imageUri", string(&rc.image_uri));
    }
    revision
}

/// Sets `spec.secrets` (each key of `d`'s secrets from the Secret
/// `NAME-env`, never its value) and `spec.secretReferences`, when `d` has
/// any; returns the Secret to create, if any.
fn put_secrets(spec: &mut Value, d: &Deployment) -> Option<SecretToCreate> {
    let secret_name = format!("{}-env", d.name);
    let keys: Vec<String> = d.secrets.iter().map(|s| s.name.clone()).collect();
    if !keys.is_empty() {
        spec["secrets"] = keys
            .iter()
            .map(|k| json!({"name": k, "valueFrom": {"secretKeyRef": {"name": secret_name, "key": k}}}))
            .collect();
    }
    if !d.secret_references.is_empty() {
        spec["secretReferences"] = d
            .secret_references
            .iter()
            .map(
                |r| json!({"name": r.name, "secretName": r.secret_name, "secretKey": r.secret_key}),
            )
            .collect();
    }
    (!keys.is_empty()).then_some((secret_name, keys))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(v: Value) -> Deployment {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_github_deployment_exports_what_it_runs_and_no_secret_value() {
        let d = deployment(json!({
            "id": "0d5a2b1c-3e4f-4a5b-8c6d-7e8f9a0b1c2d", "name": "support-agent",
            "source": "github",
            "source_config": {"integration_id": "6f1c2a3e-4b5d-4e6f-8a7b-9c0d1e2f3a4b",
                "repo_url": "https://github.com/acme/agent", "deployment_type": "dev",
                "build_on_push": false, "repo_branch": "main", "custom_url": "https://x.langgraph.app",
                "resource_spec": {"min_scale": 1, "labels": null, "gpu_count": 1},
                "install_command": null},
            "source_revision_config": {"repo_ref": "main", "langgraph_config_path": "langgraph.json",
                "repo_commit_sha": "abc123"},
            "secrets": [{"name": "OPENAI_API_KEY", "value": "sk-very-secret"}],
        }));
        let text = document(&d, "agents", "default", "Observe");
        assert!(!text.contains("sk-very-secret"), "{text}");
        assert!(text.contains("managementPolicy: Observe"), "{text}");
        assert!(text.contains("--from-literal=OPENAI_API_KEY=..."), "{text}");
        assert!(text.contains("# Left out (not modelled by the CRD): resource_spec gpu_count"));
        let (m, _, _) = agent_deployment(&d, "agents", "default");
        assert_eq!(
            m["spec"],
            json!({
                "controlPlaneRef": {"name": "default"},
                "deploymentId": "0d5a2b1c-3e4f-4a5b-8c6d-7e8f9a0b1c2d",
                "source": "github",
                "sourceConfig": {"integrationId": "6f1c2a3e-4b5d-4e6f-8a7b-9c0d1e2f3a4b",
                    "repoUrl": "https://github.com/acme/agent", "deploymentType": "dev",
                    "buildOnPush": false, "resourceSpec": {"minScale": 1}},
                "sourceRevisionConfig": {"repoRef": "main", "langgraphConfigPath": "langgraph.json"},
                "secrets": [{"name": "OPENAI_API_KEY",
                    "valueFrom": {"secretKeyRef": {"name": "support-agent-env", "key": "OPENAI_API_KEY"}}}],
            })
        );
    }

    #[test]
    fn an_image_keeps_its_url_and_references() {
        let d = deployment(json!({
            "id": "1d5a2b1c-3e4f-4a5b-8c6d-7e8f9a0b1c2d", "name": "img", "source": "external_docker",
            "source_config": {"custom_url": "https://agent.example.com", "listener_id": "6f1c2a3e-4b5d-4e6f-8a7b-9c0d1e2f3a4b",
                "listener_config": {"k8s_namespace": "agents"}},
            "source_revision_config": {"image_uri": "ghcr.io/acme/agent:1"},
            "secret_references": [{"name": "TOKEN", "secret_name": "s", "secret_key": "k"}],
        }));
        let (m, secret, _) = agent_deployment(&d, "agents", "edge");
        assert!(secret.is_none());
        assert_eq!(
            m["spec"]["sourceConfig"]["customUrl"],
            "https://agent.example.com"
        );
        assert_eq!(
            m["spec"]["sourceConfig"]["listenerConfig"]["k8sNamespace"],
            "agents"
        );
        assert_eq!(
            m["spec"]["sourceRevisionConfig"],
            json!({"imageUri": "ghcr.io/acme/agent:1"})
        );
        assert_eq!(m["spec"]["secretReferences"][0]["secretName"], "s");
        assert_eq!(m["spec"]["controlPlaneRef"]["name"], "edge");
    }

    #[test]
    fn a_cluster_plane_is_named_by_kind() {
        assert_eq!(
            plane_ref_json(&plane_ref("cacp/langsmith").unwrap()),
            json!({"kind": "ClusterAgentControlPlane", "name": "langsmith"})
        );
        assert_eq!(
            plane_ref_json(&plane_ref("ClusterAgentControlPlane/x").unwrap()),
            json!({"kind": "ClusterAgentControlPlane", "name": "x"})
        );
        assert_eq!(
            plane_ref_json(&plane_ref("acp/edge").unwrap()),
            json!({"name": "edge"})
        );
        assert_eq!(
            plane_ref_json(&plane_ref("edge").unwrap()),
            json!({"name": "edge"})
        );
        assert!(plane_ref("secret/x").unwrap_err().contains("cacp"));
        assert!(plane_ref("cacp/").is_err());
    }
}
