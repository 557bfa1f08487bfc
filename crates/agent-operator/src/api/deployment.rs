//! `AgentDeployment`: one agent server deployment on a control plane.
//!
//! Source: docs/control-plane-api.md "Deployment", "Requests" and "Revision".
//! The fields mirror the control plane's request fields in camelCase.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::SecretKeyRef;
use super::resource_spec;
use super::rules;

/// Finalizer that keeps the resource until the remote deployment is deleted.
pub const FINALIZER: &str = "agentserver.dev/remote-deployment";

/// Annotation whose every new value triggers one redeploy
/// (`POST /v2/deployments/{id}/revisions`), like `kubectl rollout restart`.
pub const REDEPLOY_ANNOTATION: &str = "agentserver.dev/redeploy-requested-at";

/// Annotation that, when `"true"`, stops every remote call for the object;
/// `"false"` (or no annotation) lets it run. Any other value (`"yes"`,
/// `"True"`, `""`) is refused: the object is `Stalled` with reason
/// `InvalidAnnotation` and no remote call is made until the value is one of
/// the two ([`AgentDeployment::paused`]). Not checked at admission: the CEL
/// rules of a CRD see only `metadata.name` and `metadata.generateName` of
/// the object's metadata, not its annotations.
pub const PAUSED_ANNOTATION: &str = "agentserver.dev/paused";

/// Longest part of an annotation value a message repeats, in characters.
const SHOWN_VALUE_CHARS: usize = 64;

/// Annotation the operator sets before a create and removes once the
/// deployment id is in status; on restart it means "a create may have
/// happened: look the name up instead of creating again".
pub const CREATE_PENDING_ANNOTATION: &str = "agentserver.dev/create-pending";

/// Annotation holding the remote deployment id, written with the id in
/// status: a backup restored without status (Velero's default for custom
/// resources) keeps its ownership of the remote deployment.
pub const DEPLOYMENT_ID_ANNOTATION: &str = "agentserver.dev/deployment-id";

/// Annotation the operator writes, with the [`DEPLOYMENT_ID_ANNOTATION`],
/// on the AgentDeployment it hands a remote deployment over to when the
/// object holding it is deleted (a rename or a namespace move applied, then
/// pruned): `namespace/name` of the object that held it. Its arrival
/// triggers the pass that takes the deployment over (docs/BEHAVIOUR.md,
/// "One owner per remote deployment").
pub const HANDED_OVER_FROM_ANNOTATION: &str = "agentserver.dev/handed-over-from";

/// What happens to the remote deployment when the resource is deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DeletionPolicy {
    /// Delete the remote deployment, and keep the resource until it is gone.
    #[default]
    Delete,
    /// Leave the remote deployment running; only the resource goes.
    Orphan,
}

/// Whether the operator may change the remote deployment
/// (`spec.managementPolicy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ManagementPolicy {
    /// Create, adopt and converge the remote deployment to the spec.
    #[default]
    Manage,
    /// Adopt an existing remote deployment (by `spec.deploymentId` or by
    /// name) and only read it: no create, PATCH, redeploy or DELETE is ever
    /// sent (deleting the resource leaves the remote deployment, like
    /// `deletionPolicy: Orphan`); the differences from the spec are listed
    /// in `status.drift` and the `Drifted` condition.
    Observe,
}

/// Which existing remote deployment a resource without one may adopt
/// (`spec.adoptionPolicy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum AdoptionPolicy {
    /// Only the one `spec.deploymentId` names (the default). A deployment
    /// that already has the remote name is a `NameConflict`.
    #[default]
    ById,
    /// Also the one deployment that has the remote name on the control
    /// plane, when no other AgentDeployment of the cluster holds it and the
    /// fields the control plane cannot change equal the spec's (else
    /// `AdoptionMismatch`, nothing sent). For a restore from Git after the
    /// objects were deleted with `deletionPolicy: Orphan`, and for a move
    /// whose old object is pruned before the new one is applied.
    ByName,
}

/// What happens when the remote deployment was deleted outside the operator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RemoteDeletionPolicy {
    /// Create it again (Event `RemoteDeleted`).
    #[default]
    Recreate,
    /// Stop with `Stalled=True` until a human decides.
    Stall,
}

/// `spec.imagePolicy`: whether the tag of an `external_docker` image is
/// resolved to the digest it names before it is sent (the project's API
/// notes, section "Images").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ImagePolicy {
    /// `imageUri` is sent as written (the default): a tag moved in the
    /// registry changes what the next revision runs.
    #[default]
    Never,
    /// The tag is resolved once per generation of the spec and
    /// `<registry>/<repository>@sha256:...` is sent; a tag moved later
    /// changes nothing until the spec changes.
    Pin,
    /// As `Pin`, and the tag is resolved again on the drift period (the
    /// resync interval): a moved tag becomes one new revision and a
    /// `ImageTagMoved` event naming both digests.
    Follow,
}

impl ImagePolicy {
    /// The policy's name as written in the spec.
    pub fn as_str(self) -> &'static str {
        match self {
            ImagePolicy::Never => "Never",
            ImagePolicy::Pin => "Pin",
            ImagePolicy::Follow => "Follow",
        }
    }
}

/// Source kind of a deployment (wire `source`; the project's API notes,
/// section "Deployment"): `github` (built by the platform from a
/// repository) or `external_docker` (a prebuilt image).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Source {
    /// Built by the platform from a GitHub repository.
    #[serde(rename = "github")]
    Github,
    /// A prebuilt image (`sourceRevisionConfig.imageUri`).
    #[serde(rename = "external_docker")]
    ExternalDocker,
}

impl Source {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Github => "github",
            Source::ExternalDocker => "external_docker",
        }
    }
}

/// Deployment type (wire `source_config.deployment_type`; the project's API
/// notes, section "Deployment"): `dev_free`, `dev`, `prod`, `dev_zero` or
/// `dev_free_zero` (`dev_zero` and `dev_free_zero`, variants that may scale
/// to zero, are accepted by the Terraform provider). Can change freely
/// until the remote deployment exists, then not (writing down the type in
/// effect, `dev` for an unset `github` one, is accepted). Source `github`
/// only: the control plane refuses it for `external_docker` (refused at
/// admission). A `github` create always carries one: `dev` when unset (the
/// official Python CLI's default; the Terraform provider's is `prod`).
// This doc is what `kubectl explain` shows for `sourceConfig.deploymentType`:
// the type's doc wins over the field's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DeploymentType {
    /// Free development deployment.
    #[serde(rename = "dev_free")]
    DevFree,
    /// Development deployment.
    #[serde(rename = "dev")]
    Dev,
    /// Production deployment.
    #[serde(rename = "prod")]
    Prod,
    /// Development deployment that may scale to zero.
    #[serde(rename = "dev_zero")]
    DevZero,
    /// Free development deployment that may scale to zero.
    #[serde(rename = "dev_free_zero")]
    DevFreeZero,
}

impl DeploymentType {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            DeploymentType::DevFree => "dev_free",
            DeploymentType::Dev => "dev",
            DeploymentType::Prod => "prod",
            DeploymentType::DevZero => "dev_zero",
            DeploymentType::DevFreeZero => "dev_free_zero",
        }
    }
}

pub use super::control_plane::{ControlPlaneRef, PlaneKind};

/// Reference to an object by name in the same namespace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LocalObjectRef {
    /// Name of the object (a DNS-1123 subdomain).
    #[schemars(
        regex(pattern = crate::api::rules::DNS_SUBDOMAIN_PATTERN),
        length(min = 1, max = 253)
    )]
    pub name: String,
}

/// Placement of a self-hosted deployment on its listener.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListenerConfig {
    /// Kubernetes namespace on the listener's cluster; one of its
    /// `k8sNamespaces` (a DNS-1123 label).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        regex(pattern = crate::api::rules::DNS_LABEL_PATTERN),
        length(min = 1, max = 63)
    )]
    pub k8s_namespace: Option<String>,
}

/// A GitHub integration of the workspace, named instead of its uuid.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct IntegrationRef {
    /// The integration's `name` (the GitHub account or installation name,
    /// compared without regard to case) as `GET /v1/integrations/github/install`
    /// lists it (the project's API notes, section "Integrations (v1)"; seen
    /// only in the official clients): letters, digits, `.`, `_` and `-`; at
    /// most 100 bytes.
    #[schemars(
        regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"),
        length(min = 1, max = 100)
    )]
    pub name: String,
}

/// `spec.sourceConfig` (wire `source_config`; the project's API notes,
/// section "Deployment"); its description for `kubectl explain` is the doc
/// of `AgentDeploymentSpec::source_config`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceConfig {
    /// uuid of the GitHub integration. Source `github` only; there, this
    /// or `integrationRef` is required. Mutually exclusive with
    /// `integrationRef`.
    /// Can change freely until the remote deployment exists
    /// (`status.deploymentId` set); then it cannot change: the control plane
    /// cannot change it on a deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = crate::api::rules::UUID_PATTERN))]
    pub integration_id: Option<String>,
    /// The GitHub integration by name, resolved to its uuid (the wire
    /// `integration_id`) before the create through
    /// `GET /v1/integrations/github/install`. Source `github` only; there,
    /// this or `integrationId` is required. The operator also checks that
    /// `repoUrl` is one of the integration's repositories
    /// (`GET /v1/integrations/github/{id}/repos`) and stalls with
    /// `IntegrationNotFound` or `RepositoryNotAccessible` otherwise, creating
    /// nothing. Both endpoints are seen only in the official clients (the
    /// project's API notes, section "Integrations (v1)"). Mutually exclusive
    /// with `integrationId`.
    /// Can change freely until the remote deployment exists
    /// (`status.deploymentId` set); then it cannot change: the control plane
    /// cannot change it on a deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integration_ref: Option<IntegrationRef>,
    /// URL of the repository. Source `github` only, and required there:
    /// `https://`, or `http://` on a loopback host; at most 2048 bytes.
    /// Can change freely until the remote deployment exists
    /// (`status.deploymentId` set); then it cannot change: the control plane
    /// cannot change it on a deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    #[x_kube(validation = Rule::new(rules::url_rule()).message("repoUrl must be an https:// URL (http:// only for localhost), without spaces or control characters"))]
    pub repo_url: Option<String>,
    /// `dev_free`, `dev`, `prod`, `dev_zero` or `dev_free_zero`; immutable once
    /// the remote deployment exists (writing down the type in effect is
    /// accepted).
    /// Source `github` only (refused at admission for `external_docker`,
    /// which the control plane refuses). A `github` create always carries
    /// one: `dev` when unset (the official Python CLI's default; the
    /// Terraform provider's is `prod`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_type: Option<DeploymentType>,
    /// Whether a push to the branch triggers a build (must be false for a
    /// tag). Source `github` only: a `github` create sends `false` when
    /// unset; an `external_docker` deployment is not built.
    /// Once the remote deployment exists it cannot be removed (the control
    /// plane keeps a value it is not sent); set the value you want instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_on_push: Option<bool>,
    /// Deployment URL. Source `external_docker` only (a `github`
    /// deployment's URL is chosen by the platform): `https://`, or `http://`
    /// on a loopback host; at most 2048 bytes. Its host must be in
    /// the operator's `--allowed-hosts`, else the resource is `Stalled`
    /// (`HostNotAllowed`) and nothing is sent.
    /// Once the remote deployment exists it cannot be removed (the control
    /// plane keeps a value it is not sent); set the value you want instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    #[x_kube(validation = Rule::new(rules::url_rule()).message("customUrl must be an https:// URL (http:// only for localhost), without spaces or control characters"))]
    pub custom_url: Option<String>,
    /// Install command of a JavaScript build, e.g. `npm ci` (wire
    /// `source_config.install_command`; the project's API notes, section
    /// "Build commands"; seen only in the official CLI). Source `github`
    /// only: the platform builds only that source. One command of letters,
    /// digits, spaces and `. _ / : = @ + , % ~ -`: no newline or control
    /// character, `;`, `&&`, `||`, `|`, backtick, `$(`, `<`, `>`, quote or
    /// bracket (stricter than the CLI); at most 1024 bytes. A change is sent
    /// by PATCH and, like `resourceSpec`, starts a new revision (no source
    /// says whether the service builds again by itself; a build setting only
    /// takes effect in a new build).
    /// Once the remote deployment exists it cannot be removed (the control
    /// plane keeps a value it is not sent); set the value you want instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    #[x_kube(validation = Rule::new(rules::build_command_rule()).message(format!("installCommand {}", rules::BUILD_COMMAND_MESSAGE).as_str()))]
    pub install_command: Option<String>,
    /// Build command of a JavaScript build, e.g. `npm run build` (wire
    /// `source_config.build_command`). Source `github` only; same rule and
    /// behaviour as `installCommand`.
    /// Once the remote deployment exists it cannot be removed (the control
    /// plane keeps a value it is not sent); set the value you want instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    #[x_kube(validation = Rule::new(rules::build_command_rule()).message(format!("buildCommand {}", rules::BUILD_COMMAND_MESSAGE).as_str()))]
    pub build_command: Option<String>,
    /// Resource sizing (`minScale`, `maxScale`, `cpu` in cores, `memoryMb` in
    /// MiB, ...), typed with units and ranges; sent as the wire
    /// `resource_spec` with its keys in snake_case (`minScale` as
    /// `min_scale`). Both sources.
    /// Once the remote deployment exists neither it nor one of its keys can
    /// be removed (the operator sends only the keys set here and the control
    /// plane keeps the others), except a key it did not keep
    /// (`DriftNotConverging`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::resource_spec::schema")]
    pub resource_spec: Option<serde_json::Map<String, serde_json::Value>>,
    /// uuid of the listener of a self-hosted data plane. Both sources.
    /// Mutually exclusive with `listenerRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = crate::api::rules::UUID_PATTERN))]
    pub listener_id: Option<String>,
    /// An `AgentListener` (same namespace) whose `spec.listenerId` is used as
    /// `listener_id`; its namespaces are checked before the create. Both
    /// sources. Mutually exclusive with `listenerId`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listener_ref: Option<LocalObjectRef>,
    /// Placement on the listener (with `listenerId` or `listenerRef`). Both
    /// sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listener_config: Option<ListenerConfig>,
}

/// `spec.sourceRevisionConfig` (wire `source_revision_config`); its
/// description for `kubectl explain` is the doc of
/// `AgentDeploymentSpec::source_revision_config`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceRevisionConfig {
    /// Branch, or `refs/tags/<tag>`. Source `github` only, and required
    /// there: letters, digits, `.`, `_`, `-` and `/`, without `..` (git's ref
    /// rules); at most 255 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 255))]
    #[x_kube(validation = Rule::new(rules::repo_ref_rule()).message("repoRef must be a branch or refs/tags/<tag>: letters, digits, '.', '_', '-' and '/', without '..', '//', a leading '/', '-' or '.', or a trailing '/' or '.lock'"))]
    pub repo_ref: Option<String>,
    /// Path of `langgraph.json` in the repository. Source `github` only, and
    /// required there: relative, no `..` segment, no control characters; at
    /// most 1024 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    #[x_kube(validation = Rule::new(rules::relative_path_rule()).message("langgraphConfigPath must be a relative path inside the repository: no leading '/', no '..' segment, no backslash or control characters"))]
    pub langgraph_config_path: Option<String>,
    /// Image of the deployment, as
    /// `registry[:port]/repository[:tag][@digest]` (the registry part may be
    /// left out); at most 512 bytes. Source `external_docker` only, and
    /// required there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    #[x_kube(validation = Rule::new(rules::image_rule()).message("imageUri must be an image reference registry/repository[:tag][@digest] with a lowercase repository, without spaces, shell or control characters"))]
    pub image_uri: Option<String>,
}

/// Where a secret's value comes from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretValueSource {
    /// A key of a Secret in the same namespace.
    pub secret_key_ref: SecretKeyRef,
}

/// One environment secret of the deployment: a literal `value` (for
/// non-sensitive settings) or `valueFrom.secretKeyRef`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.value) != has(self.valueFrom)").message("set exactly one of value and valueFrom"))]
pub struct DeploymentSecret {
    /// Environment variable name (a letter or `_`, then letters, digits or
    /// `_`), unique in the list and not one the platform reserves (the
    /// project's API notes, section "Reserved variable names").
    #[schemars(
        regex(pattern = crate::api::rules::ENV_NAME_PATTERN),
        length(min = 1, max = 256)
    )]
    #[x_kube(validation = Rule::new(rules::reserved_name_rule()).message(Message::Expression(rules::RESERVED_NAME_MESSAGE.into())))]
    pub name: String,
    /// Literal value; visible to anyone who can read the resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Value read from a Kubernetes Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_from: Option<SecretValueSource>,
}

/// One reference to a key of a Kubernetes Secret in the data plane cluster
/// (wire `secret_references[]`: `{name, secret_name, secret_key}`; the
/// project's API notes, section "Deployment": newer). Source
/// `external_docker` only, on a self-hosted data plane. The Secret lives in the
/// deployment's namespace on the self-hosted data plane, not in this
/// cluster: the operator never reads it, and its value never passes through
/// the control plane.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentSecretReference {
    /// Environment variable name (a letter or `_`, then letters, digits or
    /// `_`), unique in the list, not one of `spec.secrets`' names and not
    /// one the platform reserves (the project's API notes, section "Reserved
    /// variable names"). Wire `name`.
    #[schemars(
        regex(pattern = crate::api::rules::ENV_NAME_PATTERN),
        length(min = 1, max = 256)
    )]
    #[x_kube(validation = Rule::new(rules::reserved_name_rule()).message(Message::Expression(rules::RESERVED_NAME_MESSAGE.into())))]
    pub name: String,
    /// Name of the Secret in the deployment's namespace of the data plane
    /// cluster (a DNS-1123 subdomain). Wire `secret_name`.
    #[schemars(
        regex(pattern = crate::api::rules::DNS_SUBDOMAIN_PATTERN),
        length(min = 1, max = 253)
    )]
    pub secret_name: String,
    /// Key in that Secret (letters, digits, `-`, `_` and `.`). Wire
    /// `secret_key`.
    #[schemars(regex(pattern = crate::api::rules::SECRET_KEY_PATTERN), length(min = 1, max = 253))]
    pub secret_key: String,
}

/// `status.controlPlane` of an AgentDeployment: where its remote
/// deployment lives.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecordedPlane {
    /// Base URL of the control plane requests were sent to.
    pub url: String,
    /// Workspace (tenant) id.
    pub workspace_id: String,
}

/// Desired state of an `AgentDeployment`.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "agentserver.dev",
    version = "v1alpha1",
    kind = "AgentDeployment",
    namespaced,
    status = "AgentDeploymentStatus",
    shortname = "agd",
    category = "agents",
    validation = Rule::new("has(self.spec.name) || self.metadata.name.matches('^[a-z0-9-]{1,63}$')").message("metadata.name is not a valid remote deployment name (1-63 lowercase letters, digits and '-'; the control plane refuses '.'): set spec.name"),
    printcolumn = r#"{"name":"Ready","type":"string","description":"Ready condition: the latest revision is DEPLOYED and the remote deployment equals the spec","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Status","type":"string","description":"Reason of the Ready condition, e.g. RevisionDeployed, RevisionInProgress, RevisionFailed, SecretNotFound","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"Revision","type":"string","description":"Status of the latest revision on the control plane","jsonPath":".status.revisionStatus"}"#,
    printcolumn = r#"{"name":"URL","type":"string","description":"URL of the agent server","jsonPath":".status.url"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Source","type":"string","priority":1,"description":"github or external_docker","jsonPath":".spec.source"}"#,
    printcolumn = r#"{"name":"Deployment-ID","type":"string","priority":1,"description":"Id of the remote deployment","jsonPath":".status.deploymentId"}"#,
    printcolumn = r#"{"name":"Revision-ID","type":"string","priority":1,"description":"Id of the latest revision","jsonPath":".status.latestRevisionId"}"#,
    printcolumn = r#"{"name":"Serving","type":"string","priority":1,"description":"The serving revision's commit (first 7 characters) or image digest (first 12 hex digits)","jsonPath":".status.serving.short"}"#,
    printcolumn = r#"{"name":"Verified","type":"string","priority":1,"description":"Whether the serving revision passed spec.verify, with the cases of its suite it passed: True (9/10), False (8/10), True, or False (also without spec.verify: not verified)","jsonPath":".status.serving.verifiedShort"}"#,
    printcolumn = r#"{"name":"Message","type":"string","priority":1,"description":"Message of the Ready condition","jsonPath":".status.conditions[?(@.type==\"Ready\")].message"}"#,
    validation = remote_exists_rule(),
)]
#[x_kube(validation = spec_rule())]
#[serde(rename_all = "camelCase")]
pub struct AgentDeploymentSpec {
    /// The control plane to deploy on: the `AgentControlPlane` `default` of the
    /// same namespace by default, or a `ClusterAgentControlPlane` by `kind`.
    #[serde(default)]
    pub control_plane_ref: ControlPlaneRef,
    /// Remote deployment name; default `metadata.name`. Lowercase letters,
    /// digits and `-` (the names official clients use).
    /// Can change freely until the remote deployment exists (`status.deploymentId` set); then it cannot change, as the control plane cannot change it on a deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[a-z0-9-]+$"), length(min = 1, max = 63))]
    pub name: Option<String>,
    /// The name the LangSmith UI shows for the deployment (wire
    /// `display_name`), at least one character. The control plane does not
    /// take it on create: the operator sets it with a PATCH right after the
    /// create, and on every change; a value changed outside is set back
    /// like any other field. It cannot be cleared: removing it from the
    /// spec leaves the remote value as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub display_name: Option<String>,
    /// Source kind: `github` or `external_docker`.
    pub source: Source,
    /// How the platform builds and runs the deployment (wire
    /// `source_config`). Which fields belong to which `source`:
    /// - `github` only: `integrationId` or `integrationRef` (one is
    ///   required), `repoUrl` (required), `buildOnPush`, `installCommand`,
    ///   `buildCommand`;
    /// - `external_docker` only: `customUrl`;
    /// - both sources: `deploymentType`, `resourceSpec`, and on a
    ///   self-hosted data plane `listenerId` or `listenerRef` with
    ///   `listenerConfig`.
    ///
    /// A field of the other source is refused at admission.
    #[serde(default)]
    pub source_config: SourceConfig,
    /// What one revision deploys (wire `source_revision_config`); a change
    /// here creates a new revision. Which fields belong to which `source`:
    /// `github` needs `repoRef` and `langgraphConfigPath`; `external_docker`
    /// needs `imageUri`. A field of the other source is refused at
    /// admission.
    #[serde(default)]
    pub source_revision_config: SourceRevisionConfig,
    /// Environment secrets of the agent server: a list-map keyed by `name`
    /// (a name appears once), at most 100.
    /// Removing entries sends the complete environment without them. Once
    /// the remote deployment exists the last entry cannot be removed: the
    /// control plane reads an empty environment as "unchanged", so the
    /// variables would stay (rotate a leaked value instead).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub secrets: Vec<DeploymentSecret>,
    /// Environment variables read by the data plane from its own Kubernetes
    /// Secrets (wire `secret_references`): a list-map keyed by `name`, at
    /// most 100; only for `source: external_docker` with a listener
    /// (`sourceConfig.listenerId` or `listenerRef`). The operator sends the
    /// references, never a value, and never reads these Secrets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub secret_references: Vec<DeploymentSecretReference>,
    /// Adopt this existing remote deployment (uuid) instead of creating one;
    /// the operator then converges it to this spec.
    /// A deployment whose source, repository, integration, type, listener
    /// or name differ from this spec is not adopted (`AdoptionMismatch`).
    /// Can be corrected until a deployment is adopted or created; then it
    /// may only name that deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = crate::api::rules::UUID_PATTERN))]
    pub deployment_id: Option<String>,
    /// `ById` (default): an existing remote deployment is adopted only when
    /// `spec.deploymentId` names it. `ByName`: also the one deployment
    /// that has this resource's remote name, when no other AgentDeployment
    /// of the cluster holds it and its source, repository, integration,
    /// type and listener equal the spec's (else `AdoptionMismatch`). Use it
    /// to restore objects from Git after they were deleted with
    /// `deletionPolicy: Orphan`, or to take over a deployment made in the
    /// UI or a CLI by name. A deployment another AgentDeployment holds is
    /// never adopted (`NameConflict`, naming it).
    #[serde(default)]
    pub adoption_policy: AdoptionPolicy,
    /// `Delete` (default) deletes the remote deployment with the resource;
    /// `Orphan` leaves it running. Either way, when another AgentDeployment
    /// of the cluster claims the same deployment (a rename or a move,
    /// applied before the old object is pruned), it is handed over to it
    /// instead.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
    /// `Manage` (default) creates, adopts and converges the remote
    /// deployment. `Observe` adopts an existing one (by `deploymentId`, or
    /// by name) and never changes it: no create, PATCH, redeploy or DELETE,
    /// not even when this resource is deleted (the remote deployment is
    /// left, like `deletionPolicy: Orphan`). The differences from the spec
    /// are listed in `status.drift` (secret values only as `differs`) and
    /// in the `Drifted` condition; with nothing to adopt the resource is
    /// `Stalled` (`NothingToObserve`). Switching to `Manage` converges the
    /// deployment with one PATCH.
    #[serde(default)]
    pub management_policy: ManagementPolicy,
    /// `Recreate` (default) creates the remote deployment again when it was
    /// deleted outside the operator; `Stall` stops and reports it.
    #[serde(default)]
    pub remote_deletion_policy: RemoteDeletionPolicy,
    /// Seconds a revision may stay in progress (building, deploying) before
    /// the resource reports `Stalled`/`ProgressDeadlineExceeded`; polling
    /// goes on, slower, and a later `DEPLOYED` clears it. Default 1800 (30
    /// minutes, as long as the Terraform provider waits; the project's API
    /// notes, section "Polling").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 10, max = 86400))]
    pub progress_deadline_seconds: Option<u32>,
    /// Checks on the deployment's agent server after each newly `DEPLOYED`
    /// revision, then on the slow period: the assistants of a graph, and a
    /// stateless run with an expected event. When set, `Ready` requires
    /// `Verified=True`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<Box<VerifySpec>>,
    /// When this deployment expires (a preview environment): the earliest
    /// of `at`, `afterCreationSeconds` after the object's creation and
    /// `idleSeconds` after the creation of its latest revision. Then the
    /// operator deletes the remote deployment once (per `deletionPolicy`:
    /// `Orphan` leaves it running) and reports `Stalled=True` (`Ready=False`)
    /// with reason `Expired`, a terminal state; it never creates it again while the object exists, so a
    /// GitOps tool that keeps applying the object does not bring it back.
    /// Delete and re-create the object to start a new one. The operator
    /// wakes up at the expiry instant (no polling). An AgentDeployment with
    /// an expiry counts against `spec.previews.maxLive` of its
    /// AgentControlPlane while it holds a remote deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry: Option<Box<Expiry>>,
    /// `Never` (default: `imageUri` is sent as written), `Pin` (its tag is
    /// resolved through the registry once per generation and the image is
    /// sent by digest) or `Follow` (as `Pin`, and resolved again every resync
    /// interval: a moved tag makes one new revision). Source
    /// `external_docker` only. Before anything is sent, the image must offer
    /// `linux/amd64` (else `Stalled`, `ImagePlatformUnsupported`); a registry
    /// that cannot be reached is retried with backoff and nothing is sent to
    /// the control plane meanwhile. The digest is kept in
    /// `status.resolvedImage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_policy: Option<ImagePolicy>,
    /// A `kubernetes.io/dockerconfigjson` Secret (same namespace) whose
    /// `.dockerconfigjson` holds the credentials of the image's registry,
    /// used by `imagePolicy` `Pin` and `Follow` to resolve the tag (no
    /// entry for the registry: anonymous). The operator only reads the
    /// registry's manifests; the control plane pulls with its own
    /// credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_secret_ref: Option<LocalObjectRef>,
    /// Automatic rollback: when a new revision fails (its verification, or
    /// with `onFailedRevision` its build or deploy), the operator redeploys
    /// the last verified revision (`POST
    /// /v2/deployments/{id}/revisions/{revision_id}/redeploy`), once per
    /// failed revision, and reports `Stalled`/`RolledBack` (`Ready=False`)
    /// without applying the spec again until it changes, a referenced
    /// Secret value changes or a redeploy is requested. Default: off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<RollbackSpec>,
    /// Deploy exactly what another AgentDeployment (the source, e.g.
    /// staging) serves, once it is verified there: for `external_docker`
    /// its image by digest (`repository@sha256:...`, in place of
    /// `sourceRevisionConfig.imageUri`), for `github` its `repoRef` (in
    /// place of this one's), then a check that the platform built the very
    /// commit verified on the source (`Stalled`, `PromotionCommitMismatch`
    /// otherwise). Both must have the same `source` (and, for `github`, the
    /// same `repoUrl`). While the source serves nothing verified, or its
    /// soak is not over, nothing is sent (`PromotionWaiting`). A source in
    /// another namespace must name this namespace in its
    /// `spec.promotionGrants`, else `Stalled` (`PromotionNotGranted`) before
    /// any remote call. What was promoted is kept in `status.promotedFrom`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotion: Option<Box<Promotion>>,
    /// Namespaces whose AgentDeployments may promote from this one
    /// (`spec.promotion.from` naming it from another namespace): a list-map
    /// keyed by `namespace`, at most 32. Same-namespace promotion needs no
    /// grant. A grant lives on the source, so that the team that owns a
    /// release decides who may take it, in the manifest it reviews.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["namespace".into()]))]
    pub promotion_grants: Vec<PromotionGrant>,
}

/// The checks of `AgentDeploymentSpec`, in one rule ([`rules::all_of`]) that
/// `optionalOldSelf` lets skip an unchanged spec ([`rules::UNCHANGED`]):
/// what the control plane would refuse or ignore, and the combinations of
/// fields that contradict each other.
fn spec_rule() -> kube::core::Rule {
    let mut checks = source_checks().to_vec();
    checks.extend(placement_and_image_checks());
    rules::all_of(Some(rules::UNCHANGED), &checks).optional_old_self(true)
}

/// The checks of [`spec_rule`] on the source and its build: what each
/// `source` needs and what only one source takes.
fn source_checks() -> [rules::Check; 11] {
    use rules::Check;
    [
        Check::new(
            "self.source != 'external_docker' || has(self.sourceRevisionConfig.imageUri) || has(self.promotion)",
            "source external_docker needs sourceRevisionConfig.imageUri",
        ),
        Check::new(
            rules::DEPLOYMENT_TYPE_IMAGE_RULE,
            rules::DEPLOYMENT_TYPE_IMAGE_MESSAGE,
        ),
        Check::new(rules::SCALE_TO_ZERO_RULE, rules::SCALE_TO_ZERO_MESSAGE),
        Check::new(rules::github_only_rule(), rules::GITHUB_ONLY_MESSAGE),
        Check::new(
            "self.source == 'external_docker' || !has(self.sourceRevisionConfig.imageUri)",
            "sourceRevisionConfig.imageUri is only for source external_docker",
        ),
        Check::new(
            "self.source == 'external_docker' || !has(self.sourceConfig.customUrl)",
            "sourceConfig.customUrl can be set only for source external_docker",
        ),
        Check::new(
            "self.source == 'github' || (!has(self.sourceConfig.repoUrl) && !has(self.sourceConfig.integrationId) && !has(self.sourceConfig.integrationRef))",
            "sourceConfig.repoUrl, integrationId and integrationRef are only for source github",
        ),
        Check::new(
            "self.source != 'github' || ((has(self.sourceConfig.integrationId) || has(self.sourceConfig.integrationRef)) && has(self.sourceConfig.repoUrl) && (has(self.sourceRevisionConfig.repoRef) || has(self.promotion)))",
            "source github needs sourceConfig.integrationId (or integrationRef), sourceConfig.repoUrl and sourceRevisionConfig.repoRef",
        ),
        Check::new(
            "!(has(self.sourceConfig.integrationId) && has(self.sourceConfig.integrationRef))",
            "set at most one of sourceConfig.integrationId and sourceConfig.integrationRef",
        ),
        Check::new(
            "!(has(self.sourceConfig.buildOnPush) && self.sourceConfig.buildOnPush && has(self.sourceRevisionConfig.repoRef) && self.sourceRevisionConfig.repoRef.startsWith('refs/tags/'))",
            "buildOnPush must be false when repoRef is a tag (refs/tags/...)",
        ),
        Check::new(
            "!has(self.sourceConfig.listenerConfig) || has(self.sourceConfig.listenerId) || has(self.sourceConfig.listenerRef)",
            "sourceConfig.listenerConfig needs sourceConfig.listenerId or listenerRef",
        ),
    ]
}

/// The checks of [`spec_rule`] on self-hosted placement, secret references
/// and image pinning.
fn placement_and_image_checks() -> [rules::Check; 8] {
    use rules::Check;
    [
        Check::new(
            rules::self_hosted_names_rule(),
            rules::self_hosted_names_message(),
        ),
        Check::new(
            "!has(self.secretReferences) || size(self.secretReferences) == 0 || self.source == 'external_docker'",
            "secretReferences are only for source external_docker (the data plane reads the Secrets; use secrets for github)",
        ),
        Check::new(
            "!has(self.secretReferences) || size(self.secretReferences) == 0 || (has(self.sourceConfig) && (has(self.sourceConfig.listenerId) || has(self.sourceConfig.listenerRef)))",
            "secretReferences need a self-hosted data plane: set sourceConfig.listenerId or listenerRef (the Secrets live in that cluster)",
        ),
        Check::new(
            "!has(self.secretReferences) || !has(self.secrets) || self.secretReferences.all(r, self.secrets.all(s, s.name != r.name))",
            "a name in secretReferences is also in secrets; each environment variable comes from one place",
        ),
        Check::new(
            "self.source != 'github' || has(self.sourceRevisionConfig.langgraphConfigPath)",
            "source github needs sourceRevisionConfig.langgraphConfigPath",
        ),
        Check::new(
            "self.source == 'external_docker' || ((!has(self.imagePolicy) || self.imagePolicy == 'Never') && !has(self.imagePullSecretRef))",
            "imagePolicy and imagePullSecretRef are only for source external_docker",
        ),
        Check::new(
            "!has(self.promotion) || ((!has(self.imagePolicy) || self.imagePolicy == 'Never') && !has(self.imagePullSecretRef))",
            "imagePolicy and imagePullSecretRef do not apply with promotion: the image is the digest the source serves",
        ),
        Check::new(
            "!(has(self.sourceConfig.listenerId) && has(self.sourceConfig.listenerRef))",
            "set at most one of sourceConfig.listenerId and sourceConfig.listenerRef",
        ),
    ]
}

/// The transition rule of the whole AgentDeployment ([`rules::all_of`]):
/// once a remote deployment exists, the fields the control plane cannot
/// change stay, and those it cannot clear are not removed
/// ([`rules::remote_exists_checks`], then the `resourceSpec` keys). An
/// unchanged spec is not checked again ([`rules::uncreated_or_spec_unchanged`]).
fn remote_exists_rule() -> kube::core::Rule {
    let mut checks = rules::remote_exists_checks();
    checks.push(rules::Check::new(
        resource_spec::resource_spec_kept_condition(),
        resource_spec::RESOURCE_SPEC_KEPT_MESSAGE,
    ));
    rules::all_of(Some(&rules::uncreated_or_spec_unchanged()), &checks)
}

/// `spec.promotion`: where a deployment takes what it deploys from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Promotion {
    /// The source AgentDeployment.
    pub from: PromotionSource,
    /// Take only a revision the source verified (`status.serving.verified`,
    /// which needs `spec.verify` on the source); default `true`. `false`
    /// takes whatever the source serves.
    #[serde(default = "default_true")]
    pub require_verified: bool,
    /// Seconds the source must have served (and, with `requireVerified`,
    /// verified) the revision before it is taken, 0 to 604800 (a week);
    /// default 0. The target is woken when the soak ends.
    #[serde(default)]
    #[schemars(range(min = 0, max = 604_800))]
    pub soak_seconds: u32,
}

fn default_true() -> bool {
    true
}

/// `spec.promotion.from`: an AgentDeployment by name, in this namespace or
/// another.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromotionSource {
    /// Name of the source AgentDeployment.
    #[schemars(
        regex(pattern = crate::api::rules::DNS_SUBDOMAIN_PATTERN),
        length(min = 1, max = 253)
    )]
    pub name: String,
    /// Its namespace; default this object's. Another namespace works only
    /// when the source's `spec.promotionGrants` names this one, and when
    /// the operator watches it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        regex(pattern = crate::api::rules::DNS_LABEL_PATTERN),
        length(min = 1, max = 63)
    )]
    pub namespace: Option<String>,
}

/// One entry of `spec.promotionGrants`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromotionGrant {
    /// A namespace whose AgentDeployments may promote from this one.
    #[schemars(
        regex(pattern = crate::api::rules::DNS_LABEL_PATTERN),
        length(min = 1, max = 63)
    )]
    pub namespace: String,
}

/// `status.promotedFrom`: what `spec.promotion` deployed, and from where.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromotedFrom {
    /// Name of the source AgentDeployment.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// The source's serving revision that was taken.
    pub revision_id: String,
    /// The commit verified on the source (`github`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_sha: Option<String>,
    /// The digest of the image verified on the source (`external_docker`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_digest: Option<String>,
    /// What was deployed: the `imageUri` by digest (`external_docker`) or
    /// the `repoRef` (`github`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployed: Option<String>,
    /// This deployment's latest revision when the promotion started a new
    /// one (`github`): the commit check applies to the revisions after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prior_revision_id: Option<String>,
    /// When this deployment took it (RFC 3339).
    pub at: String,
}

/// `spec.rollback`: when the operator rolls back by itself (both default
/// false).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollbackSpec {
    /// Roll back when the latest revision is `DEPLOYED` but its
    /// verification (`spec.verify`, required for this to act) failed with a
    /// reason that needs a person (not `RevisionNotActive`), or with
    /// `AgentServerUnreachable` three times in a row. The target is the
    /// newest revision whose verification passed.
    #[serde(default)]
    pub on_failed_verification: bool,
    /// Roll back when the latest revision ends failed (`BUILD_FAILED`,
    /// `DEPLOY_FAILED`, `CREATE_FAILED`, ...): the previous revision still
    /// serves, but the deployment's configuration is the failed one. The
    /// target is the newest verified revision (with `spec.verify`), else
    /// the newest `DEPLOYED` one.
    #[serde(default)]
    pub on_failed_revision: bool,
}

/// `status.rollback`: the last automatic rollback (`spec.rollback`). A
/// revision named in `fromRevisionId` is never rolled back again, nor is the
/// revision the rollback made (`revisionId`), so a restart never repeats it
/// and a target that fails in turn causes no loop.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollbackStatus {
    /// The revision that failed.
    pub from_revision_id: String,
    /// The revision whose configuration was redeployed (the last verified
    /// one).
    pub to_revision_id: String,
    /// The new revision the redeploy made (carrying `toRevisionId`'s
    /// configuration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_id: Option<String>,
    /// `metadata.generation` of the spec that failed: while it is the
    /// generation and `revisionId` the latest revision, the spec is not
    /// applied again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// When the rollback was requested (RFC 3339).
    pub at: String,
    /// Why: the verification's failure reason (e.g. `AssistantsMissing`) or
    /// the failed revision's status (e.g. `BUILD_FAILED`).
    pub reason: String,
}

impl AgentDeploymentSpec {
    /// The image policy in effect: `spec.imagePolicy` for an
    /// `external_docker` deployment, `Never` otherwise.
    pub fn image_policy(&self) -> ImagePolicy {
        match self.source {
            Source::ExternalDocker => self.image_policy.unwrap_or_default(),
            Source::Github => ImagePolicy::Never,
        }
    }
}

/// `spec.expiry`: when a preview deployment expires; at least one field,
/// the earliest wins.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.at) || has(self.afterCreationSeconds) || has(self.idleSeconds)").message("expiry needs at, afterCreationSeconds or idleSeconds"))]
pub struct Expiry {
    /// An absolute time (RFC 3339 `date-time`, e.g.
    /// `2026-12-01T18:00:00Z`), checked at admission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub at: Option<String>,
    /// Seconds after the object's `metadata.creationTimestamp` (1 to
    /// 31536000, a year).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 31_536_000))]
    pub after_creation_seconds: Option<u32>,
    /// Seconds without a new revision: after the creation time of the
    /// latest revision in `status.revisions` (the object's creation while
    /// there is none), 1 to 31536000. A new revision (a spec change, a
    /// redeploy) pushes the expiry back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 31_536_000))]
    pub idle_seconds: Option<u32>,
}

/// `spec.verify`: what the operator checks on the deployment's agent server
/// (at `status.url`, the deployment URL) once a revision is `DEPLOYED` and
/// the deployment's `active_revision_id` is that revision; again every
/// verify interval (`--verify-interval-seconds`, default the resync
/// interval). A failed check is retried with backoff (30 s doubling, capped
/// at the resync interval). Source: the project's API notes, section "Agent
/// server" (`/assistants/search`, `/runs/stream`, `X-Api-Key`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.assistants) || has(self.run) || has(self.suite)").message("verify needs assistants, run or suite"))]
pub struct VerifySpec {
    /// Require at least `minCount` assistants of graph `graphId`
    /// (`POST /assistants/search` with `graph_id`, one page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assistants: Option<VerifyAssistants>,
    /// Start one stateless run (`POST /runs/stream`) and expect an event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<VerifyRun>,
    /// Cases the agent server must answer, run once per revision and per
    /// suite after `assistants` and `run` passed; the revision is verified
    /// when the suite meets its `minPassRate` (and, with `compareWith:
    /// Serving`, nothing the serving revision passed fails).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite: Option<super::suite::VerifySuite>,
    /// A Secret key (same namespace) holding the agent server's API key, sent
    /// as `X-Api-Key`. Default: the API key of the AgentControlPlane (cloud
    /// deployments take a key of the organization that owns them), but only
    /// to a URL the control plane chose: with `sourceConfig.customUrl` set, no
    /// key is sent unless this names one. A missing Secret or key is
    /// `Verified=False`/`SecretNotFound`, and no agent server call is made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_secret_ref: Option<super::SecretKeyRef>,
}

/// `spec.verify.assistants`: a minimum number of assistants of one graph.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerifyAssistants {
    /// The graph (a key of `graphs` in `langgraph.json`), sent as
    /// `graph_id`; every graph has a default assistant named after it (the
    /// project's API notes, section "Agent server").
    #[schemars(length(min = 1, max = 253))]
    pub graph_id: String,
    /// Fewest assistants of the graph (at least 1; default 1).
    #[serde(default = "default_min_count")]
    #[schemars(range(min = 1, max = 1000))]
    pub min_count: u32,
}

fn default_min_count() -> u32 {
    1
}

/// Stream mode of a verification run (wire `stream_mode`; the project's API
/// notes, section "Agent server").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum VerifyStreamMode {
    /// The whole state after each step.
    #[serde(rename = "values")]
    Values,
    /// `{node: update}` after each step (default).
    #[default]
    #[serde(rename = "updates")]
    Updates,
    /// Messages, token by token.
    #[serde(rename = "messages")]
    Messages,
    /// Messages as `(message, metadata)` tuples.
    #[serde(rename = "messages-tuple")]
    MessagesTuple,
    /// Every event of the run.
    #[serde(rename = "events")]
    Events,
    /// Debug events.
    #[serde(rename = "debug")]
    Debug,
    /// Custom events written by the graph.
    #[serde(rename = "custom")]
    Custom,
}

impl VerifyStreamMode {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            VerifyStreamMode::Values => "values",
            VerifyStreamMode::Updates => "updates",
            VerifyStreamMode::Messages => "messages",
            VerifyStreamMode::MessagesTuple => "messages-tuple",
            VerifyStreamMode::Events => "events",
            VerifyStreamMode::Debug => "debug",
            VerifyStreamMode::Custom => "custom",
        }
    }
}

/// `spec.verify.run`: one stateless run and what it must stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerifyRun {
    /// An assistant id (uuid) or a graph name of `langgraph.json`, sent as
    /// `assistant_id`. An unknown one is `Verified=False`/`AssistantNotFound`
    /// with the server's `detail`.
    #[schemars(length(min = 1, max = 253))]
    pub assistant_id: String,
    /// The graph input, a JSON object (e.g. `{messages: [{role, content}]}`).
    #[serde(default)]
    #[schemars(schema_with = "verify_input_schema")]
    pub input: serde_json::Map<String, serde_json::Value>,
    /// `values`, `updates` (default), `messages`, `messages-tuple`, `events`,
    /// `debug` or `custom`.
    #[serde(default)]
    pub stream_mode: VerifyStreamMode,
    /// The event the run must stream; unset: the run must end without an
    /// `error` event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<VerifyExpect>,
    /// Seconds the whole run may take, from the request to the end of the
    /// stream (1–300; default 30).
    #[serde(default = "default_run_timeout")]
    #[schemars(range(min = 1, max = 300))]
    pub timeout_seconds: u32,
}

fn default_run_timeout() -> u32 {
    30
}

/// `spec.verify.run.expect`: an event of the run stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerifyExpect {
    /// Event name, e.g. `updates` (events are named by their stream mode;
    /// the project's API notes, section "Agent server").
    #[schemars(length(min = 1, max = 253))]
    pub event: String,
    /// Text that the event's data (as compact JSON) must contain; unset: any
    /// data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub contains: Option<String>,
}

/// Schema of `spec.verify.run.input`: any JSON object.
fn verify_input_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Default of `spec.progressDeadlineSeconds`: 1800 s (30 minutes).
pub const DEFAULT_PROGRESS_DEADLINE_SECONDS: u32 = 1800;

/// Most revisions kept in `status.revisions`.
pub const REVISION_HISTORY_LIMIT: usize = 10;

/// Most entries of `status.driftCorrections` (the newest are kept).
pub const DRIFT_CORRECTIONS_LIMIT: usize = 10;

/// One correction of drift in `status.driftCorrections`: a PATCH the
/// operator sent because the remote deployment differed from a spec that
/// had not changed (another writer changed it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DriftCorrection {
    /// The fields it corrected, as the control plane names them, e.g.
    /// `source_config.build_on_push` or `secrets` (never values).
    #[schemars(length(max = 16))]
    pub fields: Vec<String>,
    /// When it was sent (RFC 3339).
    pub time: String,
}

/// One field of `status.drift`: the remote deployment differs from the
/// spec there (`spec.managementPolicy: Observe`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DriftField {
    /// The field as the control plane names it, e.g.
    /// `source_revision_config.image_uri` or `secrets`.
    pub field: String,
    /// The value the spec asks for (JSON), or `differs` for secret values.
    pub desired: String,
    /// The value the control plane holds (JSON; `null` when unset), or
    /// `differs` for secret values.
    pub remote: String,
}

/// One revision in `status.revisions` (the project's API notes, section
/// "Revision").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RevisionSummary {
    /// Revision id (uuid).
    pub id: String,
    /// Its status when last read, e.g. `BUILDING`, `DEPLOYED`, `BUILD_FAILED`.
    pub status: String,
    /// When the control plane created it (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// When it ended (its last update once no longer in progress, RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// The git ref it was built from (`github`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo_ref: Option<String>,
    /// The image it runs (`external_docker`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_uri: Option<String>,
    /// The commit the platform built it from (`github`; the revision's
    /// read-only `source_revision_config.repo_commit_sha`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_sha: Option<String>,
    /// The digest (`sha256:<hex>`) of the image it runs, when its
    /// `imageUri` names one (`external_docker`: by digest, or pinned by
    /// `spec.imagePolicy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_digest: Option<String>,
    /// `true` once a verification (`spec.verify`) of this revision passed,
    /// `false` when its last verification failed; absent when it was never
    /// verified (no `spec.verify`, or not yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
    /// What `spec.verify.suite` found on this revision, once it ran: the
    /// record `compareWith: Serving` compares a candidate with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite: Option<RevisionSuite>,
}

/// `status.revisions[].suite`: a suite's result on one revision, as kept
/// in the history (see [`super::suite::SuiteResult`] for the whole one).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RevisionSuite {
    /// The suite it ran (`sha256:<hex>`).
    pub digest: String,
    /// `passed/total`, e.g. `9/10`.
    pub cases: String,
    /// The cases it failed (at most 50).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_cases: Vec<String>,
}

/// `status.serving`: the revision that serves now (the deployment's
/// `active_revision_id`; the project's API notes, sections "Deployment" and
/// "Revision"), with what identifies the code it runs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServingRevision {
    /// Revision id (uuid).
    pub revision_id: String,
    /// The commit the platform built it from (`github`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_sha: Option<String>,
    /// The digest (`sha256:<hex>`) of the image it runs, when its `imageUri`
    /// names one (`external_docker`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_digest: Option<String>,
    /// The image it runs (`external_docker`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_uri: Option<String>,
    /// The git ref it was built from (`github`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo_ref: Option<String>,
    /// The short form shown by `kubectl get agd -o wide`: the first 7
    /// characters of `commitSha`, or the first 12 hex digits of
    /// `imageDigest`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short: Option<String>,
    /// Whether its verification (`spec.verify`) passed; always `false`
    /// without `spec.verify`: not verified, which says nothing of whether
    /// it works.
    pub verified: bool,
    /// When it was last verified successfully (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_at: Option<String>,
    /// `passed/total` of its `spec.verify.suite` run (e.g. `9/10`), when a
    /// suite ran on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cases: Option<String>,
    /// The `VERIFIED` column of `kubectl get agd -o wide`: `verified` as
    /// `True` or `False`, followed by `cases` when a suite ran on it, e.g.
    /// `True (9/10)` or `False (8/10)`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub verified_short: String,
    /// Since when the operator has seen it serving (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
}

/// Observed state of an `AgentDeployment`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentDeploymentStatus {
    /// `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Remote deployment id (uuid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_id: Option<String>,
    /// The control plane the remote deployment lives on, recorded with its
    /// id. A deployment cannot move between control planes: when the
    /// AgentControlPlane now leads to another URL or workspace, the
    /// operator reads the deployment there once; found (the same service
    /// under another URL), the new plane is recorded; not found, the
    /// resource is `Stalled` (`ControlPlaneChanged`) and nothing is sent or
    /// created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<RecordedPlane>,
    /// Id of the latest revision being followed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_revision_id: Option<String>,
    /// Status of the latest revision, e.g. `BUILDING`, `DEPLOYED`. Right
    /// after the operator started a revision (a create, or a change that
    /// makes one) it reads `CREATING`, the first status of a new revision,
    /// until the next poll reads the revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_status: Option<String>,
    /// Id of the revision currently serving.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_revision_id: Option<String>,
    /// The revision currently serving, with its commit or image digest and
    /// whether it was verified (absent until the deployment names an
    /// active revision).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<ServingRevision>,
    /// Deployment status, e.g. `READY`, `UNUSED`, `AWAITING_DELETE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_status: Option<String>,
    /// The deployment URL (`source_config.custom_url`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The remote deployment's `display_name` as last read or set (the
    /// name the UI shows); while it differs from `spec.displayName`, each
    /// pass reads the deployment, so that the PATCH that sets it follows
    /// the create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Id of the last revision that failed or was interrupted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failed_revision_id: Option<String>,
    /// Status of that revision, e.g. `BUILD_FAILED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failed_revision_status: Option<String>,
    /// `hmac-sha256:<key id>:<hex>`, an HMAC-SHA256 of the secret names and
    /// values last sent under the operator's own key (a Secret of its
    /// namespace, `--hash-key-secret`), so a changed value is detected
    /// without keeping any value, and no guess of a value can be tested
    /// without the key; the same key hashes the values the control plane
    /// returns, to detect a value changed there (drift). An older
    /// `<salt>:<sha256>` that still matches is rewritten without a PATCH;
    /// after the key is rotated, the secrets are sent once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets_hash: Option<String>,
    /// Digest of the desired values of the fields the control plane may not
    /// read back (`repoRef`, `installCommand`, `buildCommand`,
    /// `secretReferences`) as last sent: when a read does not tell such a
    /// field, a change of the spec is found against it, never against the
    /// read (the project's API notes, section "Answer shapes"). Holds no
    /// value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unechoed_hash: Option<String>,
    /// The commit the latest revision of a `github` deployment was built
    /// from, as the control plane reads it back (provenance: recorded, never
    /// compared with the spec).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_commit: Option<String>,
    /// The image the control plane built for the latest revision of a
    /// `github` deployment (provenance, never compared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub built_image: Option<String>,
    /// The digest the image tag named when `spec.imagePolicy` (`Pin` or
    /// `Follow`) last resolved it: what is sent as `imageUri` for that
    /// generation, so that neither a later pass nor a restarted operator
    /// sends another image until the spec changes (`Pin`) or the tag moves
    /// (`Follow`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_image: Option<Box<ResolvedImage>>,
    /// `spec.promotion`: the source's revision this deployment deploys
    /// (source, revision, commit or digest, when it was taken).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promoted_from: Option<Box<PromotedFrom>>,
    /// The last value of the redeploy annotation that was acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_redeploy_requested_at: Option<String>,
    /// The revisions the operator followed, newest first, at most 10
    /// (`activeRevisionId` is the one serving, `latestRevisionId` the
    /// newest).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 10))]
    pub revisions: Vec<RevisionSummary>,
    /// A request the control plane definitively rejected (400, 409, 422): it
    /// is not sent again while the desired state has the same fingerprint
    /// (spec, Secret values, AgentControlPlane, listener, redeploy request),
    /// until the retry time of its capped backoff (10 min doubling to 2 h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected_request: Option<Box<RejectedRequest>>,
    /// Fingerprint of a PATCH the service accepted but did not hold (the
    /// deployment read back still differs in the same way, e.g. a
    /// `resource_spec` key it drops): it is not sent again until the spec
    /// changes, so a value the service normalizes cannot cause a loop of
    /// patches and revisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unheld_patch: Option<String>,
    /// The corrections of drift made on the current generation, oldest
    /// first, at most 10 (the newest): those older than one hour before the
    /// newest are dropped. Once one field was corrected 3 times
    /// within an hour, another writer is fighting the operator over it: the
    /// next difference is not corrected but reported (`Stalled`, reason
    /// `DriftFight`), until a new generation of the spec or a redeploy
    /// request clears this list.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 10))]
    pub drift_corrections: Vec<DriftCorrection>,
    /// `spec.managementPolicy: Observe`: each field of the remote deployment
    /// that differs from the spec, as of the last read (empty when it
    /// equals the spec, and under `Manage`). Secret values are never shown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub drift: Vec<DriftField>,
    /// Id of the revision the last successful verification checked
    /// (`spec.verify`); equal to `latestRevisionId` while that revision is
    /// verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_revision_id: Option<String>,
    /// The last verification attempt (`spec.verify`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<Box<VerificationStatus>>,
    /// The last automatic rollback (`spec.rollback`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<Box<RollbackStatus>>,
    /// When `spec.expiry` makes this deployment expire (RFC 3339), as last
    /// computed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// When the operator expired this deployment (RFC 3339): the remote
    /// deployment was deleted (or, with `deletionPolicy: Orphan`, left
    /// running), and no request is made for this object again. Cleared
    /// only by deleting the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expired_at: Option<String>,
    /// kstatus conditions (`Ready`, `Reconciling`, `Stalled`, and `Verified`
    /// when `spec.verify` is set). `Reconciling` and `Stalled` are present
    /// only while `True` (absent reads as `False`).
    #[serde(default)]
    #[schemars(schema_with = "super::conditions::conditions_schema")]
    pub conditions: Vec<Condition>,
}

/// `status.verification`: the last verification attempt of `spec.verify`.
/// Never holds an API key or a header.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct VerificationStatus {
    /// The revision the attempt checked.
    pub revision_id: String,
    /// `metadata.generation` of the spec it checked (a new generation is
    /// verified again at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Verified`, or the reason it failed: `AgentServerUnreachable`,
    /// `AgentServerUnauthorized`, `AssistantsMissing`, `AssistantNotFound`,
    /// `RunFailed`, `ExpectationNotMet`, `RevisionNotActive`,
    /// `SecretNotFound`.
    pub outcome: String,
    /// When the attempt started (RFC 3339).
    pub last_run_time: String,
    /// Consecutive failed attempts on this revision (0 after a success); the
    /// retry waits 30 s doubling per failure, capped at the resync interval.
    #[serde(default)]
    pub failures: u32,
    /// Assistants of `spec.verify.assistants.graphId` the search found (one
    /// page of up to max(minCount, 100)), when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assistant_count: Option<u32>,
    /// Outcome of the run when it ran: `Passed`, `Failed` (an `error` event or
    /// a refused request), `ExpectationNotMet` or `TimedOut`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_outcome: Option<String>,
    /// Events the run streamed (the `metadata` event included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_events: Option<u32>,
    /// What failed, in words (the server's `detail` where it sent one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// What `spec.verify.suite` found on this revision, once it ran (kept
    /// while the revision and the suite stay the same: never run again on
    /// a resync or a restart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite: Option<super::suite::SuiteResult>,
}

/// `status.resolvedImage`: a tag resolved to its digest by the image
/// policy (docs/control-plane-api.md "Images").
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedImage {
    /// `metadata.generation` of the spec it was resolved for.
    pub generation: i64,
    /// `spec.sourceRevisionConfig.imageUri` as written (the tag).
    pub image_uri: String,
    /// `sha256:<hex>` the tag named.
    pub digest: String,
    /// `<registry>/<repository>@<digest>`: the `imageUri` sent.
    pub pinned: String,
    /// When the registry was asked (RFC 3339).
    pub resolved_at: String,
}

/// A definite rejection of a create, patch or redeploy, kept in status so
/// that neither a later pass nor a restarted operator sends it again.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RejectedRequest {
    /// The rejected operation, e.g. `create deployment`.
    pub operation: String,
    /// Salted fingerprint of the desired state the request was built from
    /// (hex); never contains a secret value.
    pub fingerprint: String,
    /// How many times this fingerprint was rejected.
    pub attempts: u32,
    /// When the request may be sent again (RFC 3339), unless the
    /// fingerprint changes first.
    pub retry_after_time: String,
}

impl AgentDeployment {
    /// True when the [`CREATE_PENDING_ANNOTATION`] is on the object: a
    /// create may have been sent and not recorded.
    pub fn create_pending(&self) -> bool {
        self.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(CREATE_PENDING_ANNOTATION))
    }

    /// The [`PAUSED_ANNOTATION`]: `Ok(true)` for `"true"`, `Ok(false)` for
    /// `"false"` or no annotation.
    ///
    /// Errors: any other value, with a message naming the annotation, the
    /// value (its first 64 characters) and the accepted values.
    pub fn paused(&self) -> Result<bool, String> {
        let value = self
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(PAUSED_ANNOTATION));
        match value.map(String::as_str) {
            None | Some("false") => Ok(false),
            Some("true") => Ok(true),
            Some(other) => {
                let mut shown: String = other.chars().take(SHOWN_VALUE_CHARS).collect();
                if shown.len() < other.len() {
                    shown.push('…');
                }
                Err(format!(
                    "annotation {PAUSED_ANNOTATION} is {shown:?}; it takes only \"true\" (no remote call is made) or \"false\" (reconcile). Nothing is sent to the control plane until it is one of them"
                ))
            }
        }
    }

    /// The remote name: `spec.name`, or `metadata.name` when unset.
    pub fn remote_name(&self) -> String {
        self.spec
            .name
            .clone()
            .or_else(|| self.metadata.name.clone())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_paused(value: Option<&str>) -> AgentDeployment {
        let mut obj: AgentDeployment = serde_json::from_value(serde_json::json!({
            "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentDeployment",
            "metadata": {"name": "a"},
            "spec": {
                "source": "external_docker",
                "sourceRevisionConfig": {"imageUri": "docker.io/acme/agent:1"}
            }
        }))
        .unwrap();
        if let Some(v) = value {
            obj.metadata.annotations = Some([(PAUSED_ANNOTATION.to_owned(), v.to_owned())].into());
        }
        obj
    }

    #[test]
    fn paused_takes_only_true_or_false() {
        assert_eq!(with_paused(None).paused(), Ok(false));
        assert_eq!(with_paused(Some("false")).paused(), Ok(false));
        assert_eq!(with_paused(Some("true")).paused(), Ok(true));
        for bad in ["yes", "True", "TRUE", "1", "", " true", "false\n", "on"] {
            let message = with_paused(Some(bad)).paused().unwrap_err();
            assert!(message.contains(PAUSED_ANNOTATION), "{message}");
            assert!(
                message.contains(r#""true""#) && message.contains(r#""false""#),
                "{message}"
            );
            assert!(message.contains(&format!("{bad:?}")), "{message}");
        }
        let long = "x".repeat(10_000);
        let message = with_paused(Some(&long)).paused().unwrap_err();
        assert!(message.len() < 400, "{}", message.len());
    }
}
