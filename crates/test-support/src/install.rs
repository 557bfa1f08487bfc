//! What a cluster gets before an operator runs on it, for the operator
//! tests and the fleet benchmark alike: the operator's ServiceAccount and
//! RBAC as shipped in `deploy/` ([`install_operator_rbac`], and the
//! [`operator_identity`] a kubeconfig impersonates), and a team's control
//! plane in its namespace ([`install_control_plane`]: the API key Secret
//! and the AgentControlPlane `default`).

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::json;

use crate::envtest::{EnvTestError, Impersonation, apply_manifest_file};

/// Namespace of the operator's ServiceAccount and leader-election Lease, as
/// `deploy/base/kustomization.yaml` sets it.
pub const OPERATOR_NAMESPACE: &str = "agent-operator";
/// The operator's ServiceAccount in `deploy/base/rbac.yaml`.
pub const OPERATOR_SERVICE_ACCOUNT: &str = "agent-operator";

/// The operator's Namespace, ServiceAccount, leader-election Role and
/// cluster-wide RBAC as shipped (files of `deploy/`, in apply order): what
/// `kubectl apply -k deploy/overlays/cluster-wide` installs, minus the
/// Deployment, Service, NetworkPolicy and PodDisruptionBudget.
pub const OPERATOR_RBAC_FILES: [&str; 3] = [
    "base/namespace.yaml",
    "base/rbac.yaml",
    "overlays/cluster-wide/rbac.yaml",
];

/// Applies [`OPERATOR_RBAC_FILES`] (idempotent: server-side apply).
pub async fn install_operator_rbac(client: &kube::Client) -> Result<(), EnvTestError> {
    let deploy = crate::repo_root().join("deploy");
    for file in OPERATOR_RBAC_FILES {
        apply_manifest_file(client, &deploy.join(file), OPERATOR_NAMESPACE).await?;
    }
    Ok(())
}

/// The shipped ServiceAccount, [`OPERATOR_NAMESPACE`]/[`OPERATOR_SERVICE_ACCOUNT`],
/// as a kubeconfig impersonates it.
pub fn operator_identity() -> Impersonation {
    Impersonation::service_account(OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT)
}

/// Field manager of the objects [`install_control_plane`] applies.
pub const FIELD_MANAGER: &str = "tests";

/// A team's control plane: where it is, which workspace, with which key.
#[derive(Clone, Debug)]
pub struct ControlPlane<'a> {
    /// Base URL of the control plane (the emulator's).
    pub url: &'a str,
    /// The workspace id (`spec.workspaceId`).
    pub workspace_id: &'a str,
    /// The API key, stored in the Secret `cp-api-key` (key `api-key`).
    pub api_key: &'a str,
    /// `spec.requestsPerSecond`; `None`: unset (the operator's default).
    pub requests_per_second: Option<f64>,
}

/// Server-side applies (field manager [`FIELD_MANAGER`], forced) the Secret
/// `cp-api-key` holding `plane.api_key` and the AgentControlPlane `default`
/// pointing at `plane` in `namespace`. Panics when the API server refuses
/// either.
pub async fn install_control_plane(
    client: &kube::Client,
    namespace: &str,
    plane: &ControlPlane<'_>,
) {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "cp-api-key"},
        "stringData": {"api-key": plane.api_key}
    });
    secrets
        .patch("cp-api-key", &params, &Patch::Apply(&secret))
        .await
        .unwrap_or_else(|e| panic!("applying the Secret cp-api-key in {namespace}: {e}"));
    let mut spec = json!({
        "url": plane.url,
        "workspaceId": plane.workspace_id,
        "apiKeySecretRef": {"name": "cp-api-key", "key": "api-key"}
    });
    if let Some(rps) = plane.requests_per_second {
        spec["requestsPerSecond"] = json!(rps);
    }
    let kind = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "agentserver.dev",
        "v1alpha1",
        "AgentControlPlane",
    ));
    let planes: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &kind);
    let manifest = json!({
        "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentControlPlane",
        "metadata": {"name": "default"},
        "spec": spec
    });
    planes
        .patch("default", &params, &Patch::Apply(&manifest))
        .await
        .unwrap_or_else(|e| panic!("applying the AgentControlPlane default in {namespace}: {e}"));
}
