//! `AgentListener`: an observe-only view of one listener of a self-hosted
//! data plane (the compute a self-hosted deployment is placed on).
//!
//! The operator never creates, changes or deletes listeners; it reads
//! `GET /v2/listeners/{listener_id}` and mirrors the answer in status.
//!
//! Source: docs/control-plane-api.md "Self-hosted placement and listeners"
//! (the listener's fields; 403 for organizations that are not self-hosted
//! enterprise, 404 for an unknown id).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::deployment::ControlPlaneRef;

/// Pattern of a listener id: a uuid in its hyphenated form (docs/control-plane-api.md "Requests":
/// `{listener_id}` is a string of format uuid).
pub const UUID_PATTERN: &str =
    "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";

/// Desired state of an `AgentListener`: which listener to observe, on which
/// control plane.
#[derive(CustomResource, JsonSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "agentserver.dev",
    version = "v1alpha1",
    kind = "AgentListener",
    namespaced,
    status = "AgentListenerStatus",
    shortname = "agl",
    category = "agents",
    printcolumn = r#"{"name":"Ready","type":"string","description":"Ready condition: the listener was read","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Status","type":"string","description":"Reason of the Ready condition, e.g. ListenerFound, ListenerNotFound, NotEnterprise","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"ComputeId","type":"string","jsonPath":".status.computeId"}"#,
    printcolumn = r#"{"name":"Namespaces","type":"string","jsonPath":".status.k8sNamespaces"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Listener-ID","type":"string","priority":1,"jsonPath":".spec.listenerId"}"#,
    printcolumn = r#"{"name":"Message","type":"string","priority":1,"description":"Message of the Ready condition","jsonPath":".status.conditions[?(@.type==\"Ready\")].message"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct AgentListenerSpec {
    /// Id (uuid) of the listener on the control plane, as shown by the
    /// platform when the listener was registered.
    #[schemars(regex(
        pattern = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
    ))]
    pub listener_id: String,
    /// The control plane to read the listener from: the `AgentControlPlane`
    /// `default` of the same namespace by default, or a
    /// `ClusterAgentControlPlane` by `kind`.
    #[serde(default)]
    pub control_plane_ref: ControlPlaneRef,
}

/// Observed state of an `AgentListener`: the listener as the control plane
/// last answered it, and whether it could be read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentListenerStatus {
    /// `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Compute type of the listener (`k8s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_type: Option<String>,
    /// Id of the compute infrastructure, e.g. the cluster name (unique per
    /// workspace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_id: Option<String>,
    /// Kubernetes namespaces a deployment on this listener may be placed in
    /// (`compute_config.k8s_namespaces`). Absent while the listener is
    /// unobserved, or when the listener accepts any namespace (null on the
    /// wire; the Ready message then says so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k8s_namespaces: Option<Vec<String>>,
    /// Version of the listener, if it reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Creation time of the listener on the control plane (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// Last update time of the listener on the control plane (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
    /// kstatus conditions: `Ready` (the listener was read), `Reconciling`
    /// (the control plane is unreachable; retrying) and `Stalled`
    /// (`NotEnterprise`, `ListenerNotFound`, or a control plane that is not
    /// usable); these two are present only while `True`.
    #[serde(default)]
    #[schemars(schema_with = "super::conditions::conditions_schema")]
    pub conditions: Vec<Condition>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_plane_ref_defaults_to_default() {
        let spec: AgentListenerSpec = serde_json::from_value(serde_json::json!({
            "listenerId": "6f1c2a3e-0000-4000-8000-000000000009"
        }))
        .unwrap();
        assert_eq!(spec.control_plane_ref.name, "default");
    }

    #[test]
    fn schema_pattern_is_the_uuid_pattern() {
        use kube::CustomResourceExt;
        let crd = serde_json::to_value(AgentListener::crd()).unwrap();
        let pattern = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"]["listenerId"]["pattern"];
        assert_eq!(pattern, UUID_PATTERN);
    }
}
