//! `ClusterAgentControlPlane` (`cacp`): a control plane whose key the
//! platform team holds, usable by the namespaces it allows.
//!
//! Cluster-scoped, like cert-manager's `ClusterIssuer` (its Secret in one
//! "cluster resource namespace"), external-secrets' `ClusterSecretStore`
//! (whose `conditions` name the namespaces that may use it) and Crossplane's
//! cluster-scoped `ProviderConfig`: a team's AgentDeployment or
//! AgentListener names it (`controlPlaneRef: {kind:
//! ClusterAgentControlPlane, name}`) and never sees the key, which lives in
//! a Secret of the operator's cluster resource namespace
//! (`--cluster-resource-namespace`). The spec is an AgentControlPlane's,
//! plus `namespaces`; the status is an AgentControlPlane's.
//!
//! Source: docs/control-plane-api.md "Hosts and headers", "Credentials and
//! refusals" and "Rate limits" (as for an AgentControlPlane).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::control_plane::{AgentControlPlaneSpec, AgentControlPlaneStatus};

/// Desired state of a `ClusterAgentControlPlane`: an AgentControlPlane's
/// spec (where the API is, the workspace, the key's Secret in the
/// operator's cluster resource namespace, the rate, the CA bundle, the
/// previews cap) and the namespaces that may use it.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "agentserver.dev",
    version = "v1alpha1",
    kind = "ClusterAgentControlPlane",
    status = "AgentControlPlaneStatus",
    shortname = "cacp",
    category = "agents",
    printcolumn = r#"{"name":"Ready","type":"string","description":"Ready condition: an authenticated call succeeded","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Status","type":"string","description":"Reason of the Ready condition, e.g. Authenticated, Unauthorized, SecretNotFound","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"Region","type":"string","jsonPath":".spec.region"}"#,
    printcolumn = r#"{"name":"URL","type":"string","jsonPath":".spec.url"}"#,
    printcolumn = r#"{"name":"Unmanaged","type":"integer","description":"Deployments of the workspace that no AgentDeployment manages (previews apart)","jsonPath":".status.unmanaged.count"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Workspace","type":"string","priority":1,"description":"Workspace (tenant) id","jsonPath":".spec.workspaceId"}"#,
    printcolumn = r#"{"name":"Message","type":"string","priority":1,"description":"Message of the Ready condition","jsonPath":".status.conditions[?(@.type==\"Ready\")].message"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAgentControlPlaneSpec {
    /// The control plane, as an AgentControlPlane names it (with its
    /// checks: one of `region` and `url`, one credential); its Secrets are
    /// in the operator's cluster resource namespace.
    #[serde(flatten)]
    pub plane: AgentControlPlaneSpec,
    /// The namespaces whose AgentDeployments and AgentListeners may use
    /// this control plane: by name, or by label. None by default: an
    /// object of a namespace not allowed is `Stalled`
    /// (`ControlPlaneNotAllowed`) before any request.
    #[serde(default)]
    pub namespaces: AllowedNamespaces,
}

impl ClusterAgentControlPlane {
    /// This plane read as an AgentControlPlane of `secrets` (the cluster
    /// resource namespace, where its Secrets are): the same spec, status,
    /// name, uid, generation, labels and deletion, so that one client cache
    /// and one probe serve both kinds.
    pub fn as_plane(&self, secrets: &str) -> super::AgentControlPlane {
        let m = &self.metadata;
        super::AgentControlPlane {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: m.name.clone(),
                namespace: Some(secrets.to_owned()),
                uid: m.uid.clone(),
                generation: m.generation,
                labels: m.labels.clone(),
                deletion_timestamp: m.deletion_timestamp.clone(),
                ..Default::default()
            },
            spec: self.spec.plane.clone(),
            status: self.status.clone(),
        }
    }
}

/// `spec.namespaces` of a `ClusterAgentControlPlane`: a namespace may use it
/// when its name is listed or its labels match the selector.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AllowedNamespaces {
    /// Namespaces allowed by name, at most 256.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    pub names: Vec<String>,
    /// Namespaces allowed by their labels (a label selector: `matchLabels`,
    /// `matchExpressions`). An empty selector allows every namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

impl AllowedNamespaces {
    /// True when the namespace `name` with `labels` is allowed. A selector
    /// that does not parse allows nothing through it. Pure.
    pub fn allows(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        if self.names.iter().any(|n| n == name) {
            return true;
        }
        let Some(selector) = &self.selector else {
            return false;
        };
        use kube::core::SelectorExt;
        kube::core::Selector::try_from(selector.clone()).is_ok_and(|s| s.matches(labels))
    }

    /// How to allow namespace `namespace`, for the message of a refusal.
    pub fn how_to_allow(namespace: &str, plane: &str) -> String {
        format!(
            "add {namespace} to spec.namespaces.names of ClusterAgentControlPlane {plane}, or give the namespace labels that its spec.namespaces.selector matches (the platform team owns it: kubectl edit cacp {plane})"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_is_allowed_by_name_or_by_label_and_none_by_default() {
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let none = AllowedNamespaces::default();
        assert!(!none.allows("team-a", &labels(&[("team", "a")])));
        let by_name = AllowedNamespaces {
            names: vec!["team-a".into()],
            selector: None,
        };
        assert!(by_name.allows("team-a", &labels(&[])));
        assert!(!by_name.allows("team-b", &labels(&[])));
        let by_label: AllowedNamespaces = serde_json::from_value(serde_json::json!({
            "selector": {"matchLabels": {"platform.acme.dev/agents": "true"},
                "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["sandbox"]}]}
        }))
        .unwrap();
        assert!(by_label.allows("x", &labels(&[("platform.acme.dev/agents", "true")])));
        assert!(!by_label.allows(
            "x",
            &labels(&[("platform.acme.dev/agents", "true"), ("tier", "sandbox")])
        ));
        assert!(!by_label.allows("x", &labels(&[])));
        let every: AllowedNamespaces =
            serde_json::from_value(serde_json::json!({"selector": {}})).unwrap();
        assert!(every.allows("anything", &labels(&[])));
    }
}
