//! AgentDeployment manifests as JSON, for the operator tests and the fleet
//! benchmark: one builder, [`AgentDeploymentManifest`], instead of a
//! `json!` copy per test file.

use serde_json::{Map, Value, json};

/// The GitHub integration every `github` manifest builds from (the
/// emulator accepts any id unless the test seeds integrations).
pub const INTEGRATION_ID: &str = "7d8b2f5e-3c1a-4e2b-9f6d-2a1b3c4d5e6f";
/// The repository every `github` manifest builds.
pub const REPO_URL: &str = "https://github.com/acme/support-agent";

/// An AgentDeployment manifest (`agentserver.dev/v1alpha1`) on the control
/// plane `default`, built up field by field and turned into the
/// `serde_json::Value` a test applies with [`Self::build`], e.g.
/// `AgentDeploymentManifest::github("agent", "main").secret("LOG_LEVEL", "info").build()`.
#[derive(Clone, Debug)]
pub struct AgentDeploymentManifest(Value);

impl AgentDeploymentManifest {
    /// A `github` deployment named `name` of [`REPO_URL`] through
    /// [`INTEGRATION_ID`], type `dev`, not built on push, building
    /// `repo_ref` with `langgraph.json`; no secrets.
    pub fn github(name: &str, repo_ref: &str) -> Self {
        Self(json!({
            "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentDeployment",
            "metadata": {"name": name},
            "spec": {
                "source": "github",
                "sourceConfig": {
                    "integrationId": INTEGRATION_ID,
                    "repoUrl": REPO_URL,
                    "deploymentType": "dev",
                    "buildOnPush": false
                },
                "sourceRevisionConfig": {"repoRef": repo_ref, "langgraphConfigPath": "langgraph.json"}
            }
        }))
    }

    /// An `external_docker` deployment named `name` of the image
    /// `image_uri`, with an empty `sourceConfig` (no listener, no URL); no
    /// secrets.
    pub fn docker(name: &str, image_uri: &str) -> Self {
        Self(json!({
            "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentDeployment",
            "metadata": {"name": name},
            "spec": {
                "source": "external_docker",
                "sourceConfig": {},
                "sourceRevisionConfig": {"imageUri": image_uri}
            }
        }))
    }

    fn object(value: &mut Value) -> &mut Map<String, Value> {
        if !value.is_object() {
            *value = json!({});
        }
        value.as_object_mut().expect("an object")
    }

    /// Sets `spec.<field>` to `value` (camelCase, as in the CRD).
    pub fn spec(mut self, field: &str, value: impl Into<Value>) -> Self {
        Self::object(&mut self.0["spec"]).insert(field.to_owned(), value.into());
        self
    }

    /// Sets `spec.sourceConfig.<field>` to `value`.
    pub fn source_config(mut self, field: &str, value: impl Into<Value>) -> Self {
        Self::object(&mut self.0["spec"]["sourceConfig"]).insert(field.to_owned(), value.into());
        self
    }

    fn push_secret(mut self, secret: Value) -> Self {
        let secrets = &mut self.0["spec"]["secrets"];
        if !secrets.is_array() {
            *secrets = json!([]);
        }
        secrets.as_array_mut().expect("an array").push(secret);
        self
    }

    /// Adds the environment variable `name` with the literal `value` to
    /// `spec.secrets`.
    pub fn secret(self, name: &str, value: &str) -> Self {
        self.push_secret(json!({"name": name, "value": value}))
    }

    /// Adds the environment variable `name`, read from key `key` of the
    /// Secret `secret` of the namespace, to `spec.secrets`.
    pub fn secret_ref(self, name: &str, secret: &str, key: &str) -> Self {
        self.push_secret(json!({
            "name": name,
            "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}
        }))
    }

    /// The manifest.
    pub fn build(self) -> Value {
        self.0
    }
}

/// The control plane's create body (snake_case wire JSON, `POST
/// /v2/deployments`) of [`AgentDeploymentManifest::github`]`(name,
/// repo_ref)`, for deployments made outside the operator.
pub fn github_create_body(name: &str, repo_ref: &str) -> Value {
    json!({
        "name": name,
        "source": "github",
        "source_config": {
            "integration_id": INTEGRATION_ID,
            "repo_url": REPO_URL,
            "deployment_type": "dev",
            "build_on_push": false
        },
        "source_revision_config": {"repo_ref": repo_ref, "langgraph_config_path": "langgraph.json"},
        "secrets": []
    })
}

impl From<AgentDeploymentManifest> for Value {
    fn from(manifest: AgentDeploymentManifest) -> Self {
        manifest.build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_keep_their_order_and_fields_land_where_named() {
        let m = AgentDeploymentManifest::github("a", "main")
            .secret_ref("OPENAI_API_KEY", "env", "openai")
            .secret("LOG_LEVEL", "info")
            .spec("name", "remote")
            .source_config("listenerId", "l-1")
            .build();
        assert_eq!(
            m["spec"]["secrets"],
            json!([
                {"name": "OPENAI_API_KEY", "valueFrom": {"secretKeyRef": {"name": "env", "key": "openai"}}},
                {"name": "LOG_LEVEL", "value": "info"}
            ])
        );
        assert_eq!(m["spec"]["name"], "remote");
        assert_eq!(m["spec"]["sourceConfig"]["listenerId"], "l-1");
        assert_eq!(m["spec"]["sourceConfig"]["repoUrl"], REPO_URL);
        assert_eq!(m["spec"]["sourceRevisionConfig"]["repoRef"], "main");
    }

    #[test]
    fn docker_has_an_empty_source_config() {
        let m = AgentDeploymentManifest::docker("d", "ghcr.io/acme/agent:1.0.0").build();
        assert_eq!(m["spec"]["source"], "external_docker");
        assert_eq!(m["spec"]["sourceConfig"], json!({}));
        assert_eq!(
            m["spec"]["sourceRevisionConfig"]["imageUri"],
            "ghcr.io/acme/agent:1.0.0"
        );
    }
}
