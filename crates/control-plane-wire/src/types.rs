//! Wire types of the control plane REST API (snake_case JSON).
//!
//! Shared by the client (`agent_operator::controlplane::ControlPlaneClient`,
//! which re-exports this module as `agent_operator::controlplane::types`) and
//! the server (the `control-plane-emulator` crate), so both speak exactly the
//! same shapes.
//!
//! Sources: docs/control-plane-api.md, sections "Deployment", "Requests",
//! "Answer shapes", "Revision", "Self-hosted placement and listeners",
//! "Logs", "Integrations (v1)" and "Errors". The Kubernetes custom resources
//! speak camelCase and are mapped to these types by explicit functions in
//! the operator (`agent_operator::plan::desired`), never by sharing structs.

use std::fmt;

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// `source_config` of a deployment (docs/control-plane-api.md "Deployment").
///
/// Every field is optional so that the same type serves a create body, a partial
/// PATCH body (only the fields to change) and a response. `None` is not sent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SourceConfig {
    /// uuid of the source-control integration (`github` only, immutable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integration_id: Option<String>,
    /// URL of the repository (`github` only, immutable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo_url: Option<String>,
    /// `dev_free`, `dev`, `prod`, or the scale-to-zero variants `dev_zero`
    /// and `dev_free_zero` accepted by the Terraform provider (docs/control-plane-api.md
    /// "Deployment"); immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_type: Option<String>,
    /// Whether a push to the branch triggers a build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_on_push: Option<bool>,
    /// The configured branch of a `github` deployment, as the service reads
    /// it back (read-only; docs/control-plane-api.md, "Answer shapes":
    /// `source_revision_config.repo_ref` then holds the resolved commit).
    /// Never sent.
    #[serde(default, skip_serializing)]
    pub repo_branch: Option<String>,
    /// The deployment URL: set by the service for `github`, settable for
    /// `external_docker` (docs/control-plane-api.md "Deployment").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_url: Option<String>,
    /// Free-form resource sizing object; the service replaces it whole on PATCH.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_spec: Option<serde_json::Value>,
    /// uuid of the listener of a self-hosted data plane (immutable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listener_id: Option<String>,
    /// Placement on the listener (immutable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listener_config: Option<ListenerConfig>,
    /// Install command of a JavaScript build (docs/control-plane-api.md "Build commands", seen
    /// only in the official CLI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_command: Option<String>,
    /// Build command of a JavaScript build (docs/control-plane-api.md "Build commands", seen
    /// only in the official CLI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_command: Option<String>,
}

/// `source_config.listener_config` (docs/control-plane-api.md "Self-hosted placement and
/// listeners").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ListenerConfig {
    /// Kubernetes namespace on the listener's cluster; must be one of the
    /// listener's `compute_config.k8s_namespaces`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k8s_namespace: Option<String>,
}

/// `source_revision_config` of a deployment: the values of its latest revision.
/// Sending it in a PATCH creates a new revision (docs/control-plane-api.md "Requests", Patch).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SourceRevisionConfig {
    /// Branch, or `refs/tags/<tag>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo_ref: Option<String>,
    /// Path of `langgraph.json` in the repository (required on create for `github`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub langgraph_config_path: Option<String>,
    /// Image of an `external_docker` deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_uri: Option<String>,
    /// Commit built by the revision; read-only, set by the service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo_commit_sha: Option<String>,
}

/// One environment secret of a deployment: `{name, value}`.
///
/// The value is a [`SecretString`]: `Debug` prints `[REDACTED]`, and it is only
/// exposed when serialized onto the wire.
#[derive(Clone, Serialize, Deserialize)]
pub struct SecretValue {
    /// Environment variable name.
    pub name: String,
    /// The secret value (never logged). A response without a value (absent
    /// or `null`: a service that does not return values) reads as empty.
    #[serde(
        serialize_with = "expose_secret",
        deserialize_with = "wrap_secret",
        default = "empty_secret"
    )]
    pub value: SecretString,
}

impl SecretValue {
    /// Builds a secret entry from a name and a plain value.
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            value: SecretString::from(value.into()),
        }
    }
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretValue")
            .field("name", &self.name)
            .field("value", &"[REDACTED]")
            .finish()
    }
}

impl PartialEq for SecretValue {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.value.expose_secret() == other.value.expose_secret()
    }
}

fn expose_secret<S: Serializer>(value: &SecretString, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(value.expose_secret())
}

fn wrap_secret<'de, D: Deserializer<'de>>(d: D) -> Result<SecretString, D::Error> {
    Option::<String>::deserialize(d).map(|v| SecretString::from(v.unwrap_or_default()))
}

fn empty_secret() -> SecretString {
    SecretString::from(String::new())
}

/// One reference to a key of a Kubernetes Secret in the data plane cluster:
/// `{name, secret_name, secret_key}` (docs/control-plane-api.md "Deployment": `secret_references`,
/// newer, `external_docker` only). It holds no value: the data plane reads
/// the Secret itself, so the value never passes through the control plane.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SecretReference {
    /// Environment variable name in the agent server.
    pub name: String,
    /// Name of the Secret in the deployment's namespace of the data plane.
    pub secret_name: String,
    /// Key in that Secret.
    pub secret_key: String,
}

/// `null` or absent as an empty list (an older service, or one that writes
/// `null` for an unset list, docs/control-plane-api.md "Deployment": `secret_references` is newer).
fn null_as_empty<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    Option::<Vec<T>>::deserialize(d).map(Option::unwrap_or_default)
}

/// `source_config.deployment_type` a `github` create carries when the spec
/// sets none: `dev`, the official Python CLI's default (the Terraform
/// provider's is `prod`; docs/control-plane-api.md, "Requests as the
/// official clients send them").
pub const DEFAULT_GITHUB_DEPLOYMENT_TYPE: &str = "dev";

/// `null` or absent as the type's default (an object the service answers
/// `null` for, e.g. `source_revision_config` before the first revision).
fn null_as_default<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(
    d: D,
) -> Result<T, D::Error> {
    Option::<T>::deserialize(d).map(Option::unwrap_or_default)
}

/// Body of `POST /v2/deployments` (docs/control-plane-api.md "Requests": all five fields required).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeploymentCreate {
    /// Remote name, `[a-z0-9-]`, immutable.
    pub name: String,
    /// `github` or `external_docker`.
    pub source: String,
    /// Source configuration.
    pub source_config: SourceConfig,
    /// Configuration of the first revision.
    pub source_revision_config: SourceRevisionConfig,
    /// Environment secrets.
    pub secrets: Vec<SecretValue>,
    /// References to Secret keys in the data plane (`external_docker` with a
    /// listener only); not sent when empty, so a service that predates the
    /// field never sees it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_references: Vec<SecretReference>,
    /// The name shown in the UI, as desired. Never sent on create (the
    /// service does not take it there: docs/control-plane-api.md "Answer
    /// shapes", `display_name`); a PATCH sets it once the deployment exists.
    #[serde(skip)]
    pub display_name: Option<String>,
}

/// Body of `PATCH /v2/deployments/{id}`: every field optional, partial nested
/// objects accepted (docs/control-plane-api.md "Requests"). A non-null `source_revision_config`,
/// `resource_spec` or `secrets` creates a new revision (docs/control-plane-api.md "Requests").
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DeploymentPatch {
    /// Fields of `source_config` to change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_config: Option<SourceConfig>,
    /// New revision configuration (creates a revision).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_revision_config: Option<SourceRevisionConfig>,
    /// New secrets (an empty list means "unchanged" on the service).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets: Option<Vec<SecretValue>>,
    /// New list of Secret references, replacing the whole list (docs/control-plane-api.md
    /// "Deployment": `secret_references`; whether it creates a revision is
    /// not documented: this project assumes it does, like `secrets`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_references: Option<Vec<SecretReference>>,
    /// New name shown in the UI (at least one character; it cannot be
    /// cleared). Does not create a revision (docs/control-plane-api.md
    /// "Answer shapes", `display_name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
}

impl DeploymentCreate {
    /// The body as the official clients send it (docs/control-plane-api.md,
    /// "Requests as the official clients send them"): a `github` create
    /// always carries `deployment_type` ([`DEFAULT_GITHUB_DEPLOYMENT_TYPE`]
    /// when unset) and `build_on_push` (`false` when unset), since the
    /// service answers 400 without them; any other source carries a
    /// `resource_spec` object (`{}` when unset) and `deployment_type` only
    /// when set (the service may refuse it there).
    pub fn as_sent(&self) -> DeploymentCreate {
        let mut body = self.clone();
        let sc = &mut body.source_config;
        if body.source == "github" {
            sc.deployment_type
                .get_or_insert_with(|| DEFAULT_GITHUB_DEPLOYMENT_TYPE.to_owned());
            sc.build_on_push.get_or_insert(false);
        } else if !matches!(sc.resource_spec, Some(serde_json::Value::Object(_))) {
            sc.resource_spec = Some(serde_json::Value::Object(Default::default()));
        }
        body
    }
}

impl DeploymentPatch {
    /// True when the patch would send nothing.
    pub fn is_empty(&self) -> bool {
        self.source_config.is_none()
            && self.source_revision_config.is_none()
            && self.secrets.is_none()
            && self.secret_references.is_none()
            && self.display_name.is_none()
    }
}

/// A deployment as returned by GET, POST and PATCH (docs/control-plane-api.md "Deployment").
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Deployment {
    /// Deployment id (uuid).
    pub id: String,
    /// Workspace id (uuid).
    #[serde(default)]
    pub tenant_id: Option<String>,
    /// Remote name.
    pub name: String,
    /// The name shown in the UI, set by PATCH only (null until then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// True for a preview deployment the platform made for a pull request
    /// (it may share its parent's name); lookups by name skip it, as the
    /// official CLI does (docs/control-plane-api.md "Requests as the
    /// official clients send them").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_preview: Option<bool>,
    /// Source kind.
    #[serde(default)]
    pub source: Option<String>,
    /// Source configuration; `custom_url` is the deployment URL.
    #[serde(default, deserialize_with = "null_as_default")]
    pub source_config: SourceConfig,
    /// Values of the latest revision (`null` before the first revision:
    /// docs/control-plane-api.md, "Answer shapes").
    #[serde(default, deserialize_with = "null_as_default")]
    pub source_revision_config: SourceRevisionConfig,
    /// Environment secrets. `[]` (or `null`) says nothing: the service reads
    /// back `[]` before its first revision (docs/control-plane-api.md,
    /// "Answer shapes").
    #[serde(default, deserialize_with = "null_as_empty")]
    pub secrets: Vec<SecretValue>,
    /// References to Secret keys in the data plane (`null`, absent and `[]`
    /// all read as none; the service does not echo them).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub secret_references: Vec<SecretReference>,
    /// Deployment status (`AWAITING_DATABASE`, `READY`, `UNUSED`,
    /// `AWAITING_DELETE`, `UNKNOWN`).
    #[serde(default)]
    pub status: Option<String>,
    /// Latest revision id (uuid) or null.
    #[serde(default)]
    pub latest_revision_id: Option<String>,
    /// Revision currently serving, or null.
    #[serde(default)]
    pub active_revision_id: Option<String>,
    /// Image version, or null.
    #[serde(default)]
    pub image_version: Option<String>,
    /// Creation time, RFC 3339.
    #[serde(default)]
    pub created_at: Option<String>,
    /// Last update time, RFC 3339.
    #[serde(default)]
    pub updated_at: Option<String>,
}

impl Deployment {
    /// True when the service marks this deployment a preview
    /// ([`Deployment::is_preview`]).
    pub fn preview(&self) -> bool {
        self.is_preview == Some(true)
    }
}

/// Status of a revision (docs/control-plane-api.md "Revision": 13 values).
///
/// Unknown strings are kept in [`RevisionStatus::Other`] so a new status of the
/// service never breaks decoding.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum RevisionStatus {
    /// In progress: being created.
    Creating,
    /// In progress: queued.
    Queued,
    /// In progress: waiting for a builder.
    AwaitingBuild,
    /// In progress: building the image.
    Building,
    /// In progress: waiting for the rollout.
    AwaitingDeploy,
    /// In progress: rolling out.
    Deploying,
    /// Success: the revision is serving.
    Deployed,
    /// Failed while creating.
    CreateFailed,
    /// Failed while building.
    BuildFailed,
    /// Failed while deploying.
    DeployFailed,
    /// Terminal: superseded by a newer revision before it was built.
    Skipped,
    /// Terminal: stopped by an operator action; needs a new revision.
    Interrupted,
    /// Transient: keep polling.
    Unknown,
    /// A value this client does not know. Contains `FAILED` → failed (docs/control-plane-api.md
    /// "Revision"); otherwise treated as in progress.
    Other(String),
}

impl RevisionStatus {
    /// Every known status, in the order of a revision's life.
    pub const ALL: [RevisionStatus; 13] = [
        RevisionStatus::Creating,
        RevisionStatus::Queued,
        RevisionStatus::AwaitingBuild,
        RevisionStatus::Building,
        RevisionStatus::AwaitingDeploy,
        RevisionStatus::Deploying,
        RevisionStatus::Deployed,
        RevisionStatus::CreateFailed,
        RevisionStatus::BuildFailed,
        RevisionStatus::DeployFailed,
        RevisionStatus::Skipped,
        RevisionStatus::Interrupted,
        RevisionStatus::Unknown,
    ];

    /// The wire string, e.g. `AWAITING_BUILD`.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Creating => "CREATING",
            Self::Queued => "QUEUED",
            Self::AwaitingBuild => "AWAITING_BUILD",
            Self::Building => "BUILDING",
            Self::AwaitingDeploy => "AWAITING_DEPLOY",
            Self::Deploying => "DEPLOYING",
            Self::Deployed => "DEPLOYED",
            Self::CreateFailed => "CREATE_FAILED",
            Self::BuildFailed => "BUILD_FAILED",
            Self::DeployFailed => "DEPLOY_FAILED",
            Self::Skipped => "SKIPPED",
            Self::Interrupted => "INTERRUPTED",
            Self::Unknown => "UNKNOWN",
            Self::Other(s) => s,
        }
    }

    /// True for any status containing `FAILED` (docs/control-plane-api.md "Revision").
    pub fn is_failed(&self) -> bool {
        self.as_str().contains("FAILED")
    }

    /// True while the revision may still change (not DEPLOYED, failed,
    /// SKIPPED or INTERRUPTED).
    pub fn is_in_progress(&self) -> bool {
        !matches!(self, Self::Deployed | Self::Skipped | Self::Interrupted) && !self.is_failed()
    }
}

impl From<String> for RevisionStatus {
    fn from(s: String) -> Self {
        RevisionStatus::ALL
            .iter()
            .find(|k| k.as_str() == s)
            .cloned()
            .unwrap_or(RevisionStatus::Other(s))
    }
}

impl From<RevisionStatus> for String {
    fn from(s: RevisionStatus) -> Self {
        s.as_str().to_owned()
    }
}

impl fmt::Display for RevisionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// True when `r`, a `source_revision_config.repo_ref` read back, is a
/// resolved commit (7 to 64 hex digits) rather than a branch or tag name:
/// the service answers the commit the latest revision resolved there for a
/// `github` deployment (docs/control-plane-api.md, "Answer shapes").
pub fn is_resolved_commit(r: &str) -> bool {
    (7..=64).contains(&r.len()) && r.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A revision: one build and rollout of a deployment (docs/control-plane-api.md "Revision").
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Revision {
    /// Revision id (uuid).
    pub id: String,
    /// Status.
    pub status: RevisionStatus,
    /// Creation time, RFC 3339.
    #[serde(default)]
    pub created_at: Option<String>,
    /// Last update time, RFC 3339.
    #[serde(default)]
    pub updated_at: Option<String>,
    /// Source kind of the deployment.
    #[serde(default)]
    pub source: Option<String>,
    /// Revision configuration.
    #[serde(default)]
    pub source_revision_config: Option<SourceRevisionConfig>,
}

/// A page of a list answer: `{"resources": [...], "offset": N}` (docs/control-plane-api.md
/// "Requests").
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Page<T> {
    /// The items of this page.
    pub resources: Vec<T>,
    /// Offset of the next page as given by the service, if any.
    #[serde(default)]
    pub offset: Option<i64>,
}

/// `compute_config` of a listener (docs/control-plane-api.md "Self-hosted placement and
/// listeners").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ListenerComputeConfig {
    /// Namespaces the listener is configured for, or null.
    #[serde(default)]
    pub k8s_namespaces: Option<Vec<String>>,
}

/// A listener: compute infrastructure of a self-hosted data plane
/// (docs/control-plane-api.md "Self-hosted placement and listeners").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Listener {
    /// Listener id (uuid).
    pub id: String,
    /// Always `k8s`.
    pub compute_type: String,
    /// Unique id of the compute infrastructure, e.g. the cluster name.
    pub compute_id: String,
    /// Settings of the compute type.
    #[serde(default)]
    pub compute_config: ListenerComputeConfig,
    /// Listener version, or null.
    #[serde(default)]
    pub version: Option<String>,
    /// Creation time, RFC 3339.
    pub created_at: String,
    /// Last update time, RFC 3339.
    pub updated_at: String,
}

/// One GitHub integration (app installation) of the workspace, an item of
/// `GET /v1/integrations/github/install` (docs/control-plane-api.md "Integrations (v1)", seen
/// only in the official clients; other fields are ignored).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GithubIntegration {
    /// Integration id (uuid): the `source_config.integration_id` of a
    /// `github` deployment.
    pub id: String,
    /// GitHub's installation id (a number in the emulator; kept as sent).
    #[serde(default)]
    pub installation_id: Option<serde_json::Value>,
    /// Account or installation name.
    #[serde(default)]
    pub name: Option<String>,
}

/// One repository an integration can read, an item of
/// `GET /v1/integrations/github/{integration_id}/repos` (docs/control-plane-api.md "Integrations
/// (v1)", seen only in the official clients; other fields are ignored).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GithubRepository {
    /// Repository URL, e.g. `https://github.com/acme/agent`.
    pub url: String,
    /// Default branch, if given.
    #[serde(default)]
    pub default_branch: Option<String>,
}

/// Order of log entries in a [`LogQuery`] answer (docs/control-plane-api.md "Logs": `order`,
/// `asc` or `desc`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogOrder {
    /// Oldest first.
    #[default]
    Asc,
    /// Newest first (the way to read a tail: `limit` newest entries).
    Desc,
}

/// The body of a build or deploy log query (docs/control-plane-api.md "Logs", seen only in the
/// official clients): every field optional; absent fields are not sent.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogQuery {
    /// Most entries in one answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Oldest or newest first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<LogOrder>,
    /// Only entries of this level (e.g. `ERROR`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    /// Only entries whose message contains this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// Only entries at or after this time (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    /// Only entries before this time (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
    /// Where to go on: the `next_offset` of the previous answer, as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<String>,
}

/// One log entry (docs/control-plane-api.md "Logs": `{"id", "timestamp", "level", "message"}`).
/// The message is the service's text as is: it may repeat what the agent
/// printed, secrets included, so redact it before it goes to a status or an
/// event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    /// Entry id, as sent (a number is kept as its decimal text).
    #[serde(default, deserialize_with = "string_or_number")]
    pub id: Option<String>,
    /// Time of the entry, RFC 3339 (or as sent).
    #[serde(default, deserialize_with = "string_or_number")]
    pub timestamp: Option<String>,
    /// Level, e.g. `INFO` or `ERROR`.
    #[serde(default)]
    pub level: Option<String>,
    /// The line.
    #[serde(default)]
    pub message: String,
}

/// One answer of a log query (docs/control-plane-api.md "Logs": `{"logs": [...], "next_offset"}`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogPage {
    /// The entries, in the order asked for.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub logs: Vec<LogEntry>,
    /// Offset of the next page (a number is kept as its decimal text);
    /// `None` at the end.
    #[serde(default, deserialize_with = "string_or_number")]
    pub next_offset: Option<String>,
}

/// A string, a number (kept as its decimal text) or null: the shapes of
/// log ids, timestamps and offsets are not documented (docs/control-plane-api.md "Logs").
fn string_or_number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Option::<serde_json::Value>::deserialize(d)? {
        Some(serde_json::Value::String(s)) => Some(s),
        Some(serde_json::Value::Number(n)) => Some(n.to_string()),
        _ => None,
    })
}

/// One item of an `HTTPValidationError` (docs/control-plane-api.md "Errors").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValidationError {
    /// Location of the bad input, e.g. `["path", "deployment_id"]`.
    pub loc: Vec<serde_json::Value>,
    /// Human-readable message.
    pub msg: String,
    /// Machine-readable error type, e.g. `uuid_parsing`.
    #[serde(rename = "type")]
    pub kind: String,
}

/// 422 body: `{"detail": [ValidationError]}` (docs/control-plane-api.md "Errors").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HttpValidationError {
    /// The validation errors.
    #[serde(default)]
    pub detail: Vec<ValidationError>,
}

/// 4xx body with a string detail: `{"detail": "..."}` (docs/control-plane-api.md "Errors").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// The reason, e.g. `Deployment ID <id> not found.`
    pub detail: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revision_status_round_trips_every_value() {
        for s in RevisionStatus::ALL {
            let json = serde_json::to_string(&s).unwrap();
            let back: RevisionStatus = serde_json::from_str(&json).unwrap();
            assert_eq!(back, s);
        }
        let other: RevisionStatus = serde_json::from_str("\"PRUNE_FAILED\"").unwrap();
        assert_eq!(other, RevisionStatus::Other("PRUNE_FAILED".into()));
        assert!(other.is_failed());
        assert!(!other.is_in_progress());
        assert!(RevisionStatus::Unknown.is_in_progress());
        assert!(!RevisionStatus::Skipped.is_in_progress());
    }

    #[test]
    fn resolved_commits_are_told_from_branch_names() {
        assert!(is_resolved_commit("0123abc"));
        assert!(is_resolved_commit(&"f".repeat(40)));
        assert!(!is_resolved_commit("main"));
        assert!(!is_resolved_commit("abc123"), "too short");
        assert!(!is_resolved_commit(&"a".repeat(65)), "too long");
        assert!(!is_resolved_commit("refs/tags/v1"));
    }

    #[test]
    fn secret_values_are_redacted_in_debug_but_sent_on_the_wire() {
        let s = SecretValue::new("OPENAI_API_KEY", "sk-very-secret");
        assert!(!format!("{s:?}").contains("sk-very-secret"));
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(
            json,
            r#"{"name":"OPENAI_API_KEY","value":"sk-very-secret"}"#
        );
    }

    #[test]
    fn patch_skips_absent_fields() {
        let p = DeploymentPatch {
            source_config: Some(SourceConfig {
                build_on_push: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            serde_json::json!({"source_config": {"build_on_push": true}})
        );
    }
}
