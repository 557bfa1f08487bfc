//! Custom resource types of the `agentserver.dev/v1alpha1` API, one module per
//! kind, and the condition helpers they share.
//!
//! Fields are camelCase (Kubernetes convention); the control plane's snake_case
//! wire types live apart in [`crate::controlplane::types`] and are mapped by
//! explicit functions in [`crate::controller`].

pub mod conditions;
pub mod control_plane;
pub mod deployment;
pub mod listener;
pub mod preflight;
pub mod reference;
pub mod resource_spec;
pub mod rules;

pub use control_plane::{AgentControlPlane, AgentControlPlaneSpec, AgentControlPlaneStatus};
pub use deployment::{AgentDeployment, AgentDeploymentSpec, AgentDeploymentStatus};
pub use listener::{AgentListener, AgentListenerSpec, AgentListenerStatus};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

/// API group of every kind of this operator.
pub const GROUP: &str = "agentserver.dev";

/// Field manager used for every server-side apply the operator makes.
pub const FIELD_MANAGER: &str = "agent-operator";

/// Every CustomResourceDefinition of this operator, in install order.
///
/// Each one defaults `status` to `{observedGeneration: 0}` (see
/// [`with_unobserved_status`]).
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        AgentControlPlane::crd(),
        AgentListener::crd(),
        AgentDeployment::crd(),
    ]
    .into_iter()
    .map(with_unobserved_status)
    .collect()
}

/// `crd` with `status` defaulted to `{"observedGeneration": 0}`: the API
/// server fills it in on every read of an object the operator has not
/// written yet, so a new object (`metadata.generation` 1) reads as
/// "generation 1 not observed" and GitOps tools see it in progress. Without
/// it, kstatus (Flux, `kubectl wait`-style tools) reports an object without
/// status and without conditions as `Current` before the operator has even
/// looked at it (`sigs.k8s.io/cli-utils/pkg/kstatus`, `checkGeneration`
/// only compares when `status.observedGeneration` exists); see
/// crates/agent-operator/tests/integration/gitops_health.rs.
pub fn with_unobserved_status(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSON;
    for version in &mut crd.spec.versions {
        if let Some(status) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            .and_then(|root| root.properties.as_mut())
            .and_then(|props| props.get_mut("status"))
        {
            status.default = Some(JSON(serde_json::json!({"observedGeneration": 0})));
        }
    }
    crd
}

/// The CRDs as YAML documents, keyed by the file name they are committed under
/// in `crds/` (e.g. `agentdeployments.agentserver.dev.yaml`).
///
/// Errors: serialization failure (not expected for these types).
pub fn crd_files() -> Result<Vec<(String, String)>, yaml_serde::Error> {
    crds()
        .into_iter()
        .map(|crd| {
            let name = format!("{}.yaml", crd.metadata.name.clone().unwrap_or_default());
            Ok((name, yaml_serde::to_string(&crd)?))
        })
        .collect()
}

/// Reference to a Secret key in the same namespace.
#[derive(
    Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    /// Name of the Secret, in the namespace of the referring resource (a
    /// DNS-1123 subdomain; there is no namespace field: a Secret of another
    /// namespace cannot be named).
    #[schemars(
        regex(pattern = crate::api::rules::DNS_SUBDOMAIN_PATTERN),
        length(min = 1, max = 253)
    )]
    pub name: String,
    /// Key within the Secret's `data` (`[-._a-zA-Z0-9]+`).
    #[schemars(regex(pattern = crate::api::rules::SECRET_KEY_PATTERN), length(min = 1, max = 253))]
    pub key: String,
}
