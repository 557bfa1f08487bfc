//! Custom resource types of the `agentserver.dev/v1alpha1` API, one module per
//! kind, and the condition helpers they share.
//!
//! Fields are camelCase (Kubernetes convention); the control plane's snake_case
//! wire types live apart in [`crate::controlplane::types`] and are mapped by
//! explicit functions in [`crate::controller`].

pub mod assistant;
pub mod cluster_control_plane;
pub mod conditions;
pub mod control_plane;
pub mod cron;
pub mod deployment;
pub mod kinds;
pub mod listener;
pub mod preflight;
pub mod reasons;
pub mod reference;
pub mod resource_spec;
pub mod rules;
pub mod suite;

pub use assistant::{AgentAssistant, AgentAssistantSpec, AgentAssistantStatus};
pub use cluster_control_plane::{ClusterAgentControlPlane, ClusterAgentControlPlaneSpec};
pub use control_plane::{AgentControlPlane, AgentControlPlaneSpec, AgentControlPlaneStatus};
pub use cron::{AgentCron, AgentCronSpec, AgentCronStatus};
pub use deployment::{AgentDeployment, AgentDeploymentSpec, AgentDeploymentStatus};
pub use listener::{AgentListener, AgentListenerSpec, AgentListenerStatus};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// API group of every kind of this operator.
pub const GROUP: &str = "agentserver.dev";

/// Field manager used for every server-side apply the operator makes.
pub const FIELD_MANAGER: &str = "agent-operator";

/// Every CustomResourceDefinition of this operator, in install order: one
/// per row of the registry [`kinds::KINDS`].
///
/// Each one defaults `status` to `{observedGeneration: 0}` (see
/// [`with_unobserved_status`]).
pub fn crds() -> Vec<CustomResourceDefinition> {
    kinds::KINDS
        .iter()
        .map(|k| with_unobserved_status((k.crd)()))
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

#[cfg(test)]
mod explain_tests {
    use super::*;
    use kube::CustomResourceExt;

    /// The parts of a description that are source code or repository
    /// layout rather than text for people: Rust paths (`crate::`, `a::b`),
    /// intra-doc links (`` [`x`] ``, `[CONSTANT]`, `[a::b]`, `[text](target)`
    /// to anything but a web address) and repository paths (`docs/…`,
    /// `crates/…`, `src/…`; a web address's `/docs/` is fine).
    fn leaks(text: &str) -> Vec<String> {
        let mut found = Vec::new();
        let b = text.as_bytes();
        let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
        for (i, _) in text.match_indices("::") {
            let before = i > 0 && ident(b[i - 1]);
            let after = b
                .get(i + 2)
                .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_');
            if before && after {
                let start = text[..i].rfind(|c: char| !c.is_ascii_alphanumeric() && c != '_');
                found.push(format!(
                    "Rust path {:?}",
                    &text[start.map_or(0, |s| s + 1)..(i + 2 + 12).min(text.len())]
                ));
            }
        }
        for (i, _) in text.match_indices('[') {
            let Some(len) = text[i + 1..].find(']') else {
                continue;
            };
            let inner = &text[i + 1..i + 1 + len];
            let linkish = inner.len() > 2
                && inner.starts_with('`')
                && inner.ends_with('`')
                && inner[1..inner.len() - 1]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_:()!<>".contains(c));
            let constant = inner.len() > 1
                && inner.chars().any(|c| c.is_ascii_uppercase())
                && inner
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            let target = text[i + 1 + len + 1..]
                .strip_prefix('(')
                .is_some_and(|t| !t.starts_with("http"));
            if linkish || constant || target {
                found.push(format!("intra-doc link [{inner}]"));
            }
        }
        for dir in ["docs/", "crates/", "src/"] {
            for (i, _) in text.match_indices(dir) {
                let prev = i.checked_sub(1).map(|p| b[p]);
                if !prev.is_some_and(|c| ident(c) || b"/.-".contains(&c)) {
                    found.push(format!(
                        "repository path {:?}",
                        &text[i..(i + 40).min(text.len())]
                    ));
                }
            }
        }
        found
    }

    /// Every `description` in `value`, with where it is.
    fn descriptions(value: &serde_json::Value, path: &str, out: &mut Vec<(String, String)>) {
        match value {
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    match (k.as_str(), v) {
                        ("description", serde_json::Value::String(s)) => {
                            out.push((path.to_owned(), s.clone()))
                        }
                        _ => descriptions(v, &format!("{path}.{k}"), out),
                    }
                }
            }
            serde_json::Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    descriptions(v, &format!("{path}[{i}]"), out);
                }
            }
            _ => {}
        }
    }

    #[test]
    fn the_leak_check_finds_source_code_and_repository_paths() {
        let bad = [
            "see [`rules::BUILD_COMMAND_PATTERN`]; stricter",
            "mapped by [`super::resource_spec::to_wire`].",
            "see [`crate::controlplane::endpoint::region_base_url`]",
            "at most [`REVISION_HISTORY_LIMIT`] revisions",
            "at most [REVISION_HISTORY_LIMIT] revisions",
            "the [`AgentDeployment`] kind",
            "the [paused annotation](AgentDeployment::paused)",
            "calls crate::api::rules",
            "(docs/control-plane-api.md \"Polling\")",
            "see crates/agent-operator/src/api/deployment.rs",
        ];
        for text in bad {
            assert!(!leaks(text).is_empty(), "not found in {text:?}");
        }
        let good = [
            "Key within the Secret's `data` (`[-._a-zA-Z0-9]+`).",
            "as `registry[:port]/repository[:tag][@digest]`",
            "if .metadata.generation is 12 but .status.conditions[x].observedGeneration is 9",
            "More info: https://kubernetes.io/docs/concepts/storage/volumes#nfs",
            "the project's API notes, section \"Polling\"",
            "an IPv6 host such as [::1]",
        ];
        for text in good {
            assert_eq!(leaks(text), Vec::<String>::new(), "{text:?}");
        }
    }

    /// `kubectl explain` shows descriptions to people: none of the
    /// CRDs may show Rust paths, intra-doc links or repository paths.
    #[test]
    fn crd_descriptions_read_for_people() {
        let mut problems = Vec::new();
        for crd in crds() {
            let mut all = Vec::new();
            descriptions(
                &serde_json::to_value(&crd).unwrap(),
                &crd.spec.names.kind,
                &mut all,
            );
            assert!(all.len() > 20, "{}: {}", crd.spec.names.kind, all.len());
            for (path, text) in all {
                for leak in leaks(&text) {
                    problems.push(format!("{path}: {leak}"));
                }
            }
        }
        assert!(problems.is_empty(), "{problems:#?}");
    }

    /// Each field of `sourceConfig` and `sourceRevisionConfig` says which
    /// `source` it belongs to, and `sourceConfig` lists them per source.
    #[test]
    fn source_fields_say_which_source_they_belong_to() {
        let crd = serde_json::to_value(AgentDeployment::crd()).unwrap();
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        let mut missing = Vec::new();
        for part in ["sourceConfig", "sourceRevisionConfig"] {
            let schema = &spec["properties"][part];
            let own = schema["description"].as_str().unwrap_or_default();
            for (field, prop) in schema["properties"].as_object().expect(part) {
                let text = prop["description"].as_str().unwrap_or_default();
                let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
                let says = text.contains("Source `github` only")
                    || text.contains("Source `external_docker` only")
                    || text.contains("Both sources");
                if !says {
                    missing.push(format!("{part}.{field}: {text:?}"));
                }
                if !own.contains(&format!("`{field}`")) {
                    missing.push(format!("{part} does not list {field}"));
                }
            }
        }
        assert!(missing.is_empty(), "{missing:#?}");
        let status = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
            ["properties"]["revisions"]["description"];
        assert!(
            status
                .as_str()
                .unwrap_or_default()
                .contains(&format!("at most {}", deployment::REVISION_HISTORY_LIMIT)),
            "{status}"
        );
    }
}
