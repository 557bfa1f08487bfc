//! `AgentAssistant`: one assistant (a configured instance of a graph) on
//! the agent server of an `AgentDeployment` of the same namespace.
//!
//! The operator creates it with a client-chosen id (a UUIDv5 of the
//! object's UID, or `spec.assistantId` to adopt one) and
//! `if_exists: do_nothing`, keeps its fields as the spec says with one
//! `PATCH` per change (one new version), pins the version that serves with
//! `spec.version`, and deletes it with the object unless
//! `deletionPolicy: Orphan`.
//!
//! Source: docs/control-plane-api.md "Assistants" (the endpoints, the
//! `if_exists` answer, versions and `/latest`, the 404 of an unknown graph).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What happens to the assistant on the agent server when the resource is
/// deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum AssistantDeletionPolicy {
    /// Delete the assistant (`DELETE /assistants/{id}`; already gone is
    /// fine), and keep the resource until it is gone.
    #[default]
    Delete,
    /// Leave the assistant on the agent server; only the resource goes.
    Orphan,
}

/// The `AgentDeployment` (same namespace) whose agent server holds the
/// assistant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentRef {
    /// Name of the `AgentDeployment` (a DNS-1123 subdomain).
    #[schemars(
        regex(pattern = crate::api::rules::DNS_SUBDOMAIN_PATTERN),
        length(min = 1, max = 253)
    )]
    pub name: String,
}

/// Desired state of an `AgentAssistant`: which graph, on which deployment's
/// agent server, configured how.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "agentserver.dev",
    version = "v1alpha1",
    kind = "AgentAssistant",
    namespaced,
    status = "AgentAssistantStatus",
    shortname = "aga",
    category = "agents",
    printcolumn = r#"{"name":"Ready","type":"string","description":"Ready condition: the assistant on the agent server is as the spec says","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Status","type":"string","description":"Reason of the Ready condition, e.g. AssistantReady, WaitingForDeployment, DeploymentNotFound, GraphNotFound","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"Deployment","type":"string","jsonPath":".spec.deploymentRef.name"}"#,
    printcolumn = r#"{"name":"Graph","type":"string","jsonPath":".spec.graphId"}"#,
    printcolumn = r#"{"name":"Version","type":"integer","description":"The version of the assistant that serves","jsonPath":".status.version"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Assistant-ID","type":"string","priority":1,"jsonPath":".status.assistantId"}"#,
    printcolumn = r#"{"name":"Message","type":"string","priority":1,"description":"Message of the Ready condition","jsonPath":".status.conditions[?(@.type==\"Ready\")].message"}"#
)]
#[x_kube(validation = Rule::new("!has(oldSelf.assistantId) || (has(self.assistantId) && self.assistantId == oldSelf.assistantId)").message("assistantId cannot be changed or removed once set"))]
#[x_kube(validation = Rule::new("!has(self.managementPolicy) || self.managementPolicy != 'Observe' || has(self.assistantId)").message("managementPolicy Observe needs assistantId: the assistant to observe"))]
#[serde(rename_all = "camelCase")]
pub struct AgentAssistantSpec {
    /// The `AgentDeployment` whose agent server holds the assistant; the
    /// assistant waits until it is Ready with a URL.
    pub deployment_ref: DeploymentRef,
    /// The graph the assistant runs: a key of `graphs` in the deployment's
    /// `langgraph.json`. An unknown graph is refused by the agent server
    /// (`Stalled`, `GraphNotFound`).
    #[schemars(length(min = 1, max = 253))]
    pub graph_id: String,
    /// Name of the assistant; default: the resource's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub name: Option<String>,
    /// Description of the assistant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub description: Option<String>,
    /// Run configuration (`config`, e.g. `{"configurable": {"model": "..."}}`),
    /// any JSON object; replaces the assistant's one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_object_schema")]
    pub config: Option<Map<String, Value>>,
    /// Run context (`context`), any JSON object; replaces the assistant's
    /// one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_object_schema")]
    pub context: Option<Map<String, Value>>,
    /// Metadata of the assistant, any JSON object. The agent server merges
    /// metadata key by key: a key removed here stays on the assistant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_object_schema")]
    pub metadata: Option<Map<String, Value>>,
    /// What happens to the assistant when the resource is deleted: `Delete`
    /// (default) or `Orphan`.
    #[serde(default)]
    pub deletion_policy: AssistantDeletionPolicy,
    /// Adopts the existing assistant with this id (a UUID) instead of the
    /// one derived from the resource's UID; created with this id when the
    /// agent server has none. Cannot be changed once set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(
        pattern = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
    ))]
    pub assistant_id: Option<String>,
    /// Pins the version of the assistant that serves (`POST
    /// /assistants/{id}/latest`): a rollback without a new build. While it
    /// is set the fields above are not sent. Unset: the spec's fields serve
    /// as the newest version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub version: Option<i64>,
    /// `Manage` (default) creates the assistant and keeps it as the spec
    /// says. `Observe` adopts the assistant `spec.assistantId` names (it
    /// must be set) and never changes it: no create, PATCH, `/latest` or
    /// DELETE is sent, not even when this resource is deleted (the
    /// assistant is left, like `deletionPolicy: Orphan`). The differences
    /// from the spec are listed in `status.drift` and the `Drifted`
    /// condition; an assistant that does not exist is `Stalled`
    /// (`NothingToObserve`). Switching to `Manage` converges it with one
    /// PATCH (or one `/latest` for a pinned `version`).
    #[serde(default)]
    pub management_policy: crate::api::deployment::ManagementPolicy,
}

/// Schema of a free-form JSON object.
fn free_object_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// A request the agent server refused (400, 404, 422): not sent again until
/// `metadata.generation` changes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RejectedAssistantRequest {
    /// `metadata.generation` the refused request was made for.
    pub generation: i64,
    /// The request, e.g. `POST /assistants`.
    pub request: String,
    /// The `Stalled` reason it gave.
    pub reason: String,
    /// The server's answer (bounded).
    pub message: String,
}

/// Observed state of an `AgentAssistant`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentAssistantStatus {
    /// `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Id (a UUID) of the assistant on the agent server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assistant_id: Option<String>,
    /// The version that serves, as the agent server last answered: versions
    /// start at 1 and each PATCH of the assistant adds one (a count of
    /// update requests plus one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    /// The graph of the assistant, as the agent server last answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_id: Option<String>,
    /// Remote id of the AgentDeployment whose agent server holds the
    /// assistant: a deployment re-created under a new id is a new, empty
    /// agent server, where the assistant is created again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_id: Option<String>,
    /// A request the agent server refused, not repeated until the spec
    /// changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected_request: Option<RejectedAssistantRequest>,
    /// kstatus conditions: `Ready` (the assistant is as the spec says),
    /// `Reconciling` (waiting for the deployment, or the agent server is
    /// unreachable; retrying) and `Stalled` (a refused request, a missing
    /// deployment, a refused key); these two are present only while `True`.
    #[serde(default)]
    #[schemars(schema_with = "super::conditions::conditions_schema")]
    pub conditions: Vec<Condition>,
    /// `spec.managementPolicy: Observe`: each field of the assistant that
    /// differs from the spec, as of the last read (empty when it equals the
    /// spec, and under `Manage`). The `Drifted` condition names them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub drift: Vec<crate::api::deployment::DriftField>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    #[test]
    fn defaults_and_free_form_fields_decode() {
        let spec: AgentAssistantSpec = serde_json::from_value(serde_json::json!({
            "deploymentRef": {"name": "agent"},
            "graphId": "agent",
            "config": {"configurable": {"model": "m", "n": [1, 2]}},
        }))
        .unwrap();
        assert_eq!(spec.deletion_policy, AssistantDeletionPolicy::Delete);
        assert_eq!(spec.config.unwrap()["configurable"]["n"][1], 2);
    }

    #[test]
    fn the_schema_checks_what_the_server_would_refuse() {
        let crd = serde_json::to_value(AgentAssistant::crd()).unwrap();
        let props = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"];
        assert_eq!(
            props["assistantId"]["pattern"],
            crate::api::listener::UUID_PATTERN
        );
        assert_eq!(
            props["config"]["x-kubernetes-preserve-unknown-fields"],
            true
        );
        assert_eq!(props["graphId"]["minLength"], 1);
        assert_eq!(props["version"]["minimum"], 1.0);
        assert_eq!(crd["spec"]["names"]["shortNames"][0], "aga");
        assert_eq!(crd["spec"]["names"]["categories"][0], "agents");
    }
}
