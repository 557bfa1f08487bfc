//! `AgentControlPlane`: how to reach one control plane (region or URL, workspace,
//! API key Secret, optional CA bundle and client-side rate limit).
//!
//! Source: docs/control-plane-api.md "Hosts and headers", "Regions",
//! "Credentials and refusals", "Rate limits" (nothing published for the
//! control plane) and "Errors" (429 and `Retry-After`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::SecretKeyRef;

/// Finalizer of an AgentControlPlane, held while an AgentDeployment of its
/// namespace still names it in `spec.controlPlaneRef`, so that deleting a
/// bundle (or a namespace) in one command still deletes the remote
/// deployments: the plane, and the credentials the operator read from it,
/// stay until the last AgentDeployment that uses it is gone (docs/BEHAVIOUR.md
/// "Deletion in any order").
pub const IN_USE_FINALIZER: &str = "agentserver.dev/in-use";

/// The kind of control plane object a `controlPlaneRef` names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum PlaneKind {
    /// An `AgentControlPlane` of the referring object's namespace (the
    /// default): the team holds the API key in a Secret of its namespace.
    #[default]
    AgentControlPlane,
    /// A `ClusterAgentControlPlane`: the platform team holds the key in the
    /// operator's cluster resource namespace; usable by the namespaces it
    /// allows (`spec.namespaces`).
    ClusterAgentControlPlane,
}

impl PlaneKind {
    /// The kind's name as written in a `controlPlaneRef`.
    pub fn as_str(self) -> &'static str {
        match self {
            PlaneKind::AgentControlPlane => "AgentControlPlane",
            PlaneKind::ClusterAgentControlPlane => "ClusterAgentControlPlane",
        }
    }
}

/// Reference to the control plane an object lives on: an
/// `AgentControlPlane` of its namespace (the default), or a
/// `ClusterAgentControlPlane` (`kind`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneRef {
    /// `AgentControlPlane` (default: of the same namespace) or
    /// `ClusterAgentControlPlane` (cluster-scoped, kept by the platform
    /// team; the namespace must be allowed by its `spec.namespaces`).
    #[serde(default)]
    pub kind: PlaneKind,
    /// Name of the control plane object (a DNS-1123 subdomain).
    #[serde(default = "default_control_plane")]
    #[schemars(
        regex(pattern = crate::api::rules::DNS_SUBDOMAIN_PATTERN),
        length(min = 1, max = 253)
    )]
    pub name: String,
}

fn default_control_plane() -> String {
    "default".to_owned()
}

impl Default for ControlPlaneRef {
    fn default() -> Self {
        Self {
            kind: PlaneKind::default(),
            name: default_control_plane(),
        }
    }
}

impl ControlPlaneRef {
    /// True when it names a `ClusterAgentControlPlane`.
    pub fn is_cluster(&self) -> bool {
        self.kind == PlaneKind::ClusterAgentControlPlane
    }

    /// How a message names the plane: `AgentControlPlane NS/NAME` or
    /// `ClusterAgentControlPlane NAME`, for a referring object of
    /// `namespace`.
    pub fn shown(&self, namespace: &str) -> String {
        match self.kind {
            PlaneKind::AgentControlPlane => format!("AgentControlPlane {namespace}/{}", self.name),
            PlaneKind::ClusterAgentControlPlane => {
                format!("ClusterAgentControlPlane {}", self.name)
            }
        }
    }
}

/// Desired state of an `AgentControlPlane`: where the API is and how to
/// authenticate. Exactly one of `region` and `url` is set.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "agentserver.dev",
    version = "v1alpha1",
    kind = "AgentControlPlane",
    namespaced,
    status = "AgentControlPlaneStatus",
    shortname = "acp",
    category = "agents",
    printcolumn = r#"{"name":"Ready","type":"string","description":"Ready condition: an authenticated call succeeded","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Status","type":"string","description":"Reason of the Ready condition, e.g. Authenticated, Unauthorized, SecretNotFound","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"Region","type":"string","jsonPath":".spec.region"}"#,
    printcolumn = r#"{"name":"URL","type":"string","jsonPath":".spec.url"}"#,
    printcolumn = r#"{"name":"Unmanaged","type":"integer","description":"Deployments of the workspace that no AgentDeployment of this namespace manages (previews apart)","jsonPath":".status.unmanaged.count"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Workspace","type":"string","priority":1,"description":"Workspace (tenant) id","jsonPath":".spec.workspaceId"}"#,
    printcolumn = r#"{"name":"Message","type":"string","priority":1,"description":"Message of the Ready condition","jsonPath":".status.conditions[?(@.type==\"Ready\")].message"}"#
)]
#[x_kube(validation = Rule::new("has(self.region) != has(self.url)").message("set exactly one of region and url"))]
#[x_kube(validation = Rule::new("!has(self.burst) || has(self.requestsPerSecond)").message("burst needs requestsPerSecond"))]
#[x_kube(validation = Rule::new("has(self.apiKeySecretRef) != has(self.bearerTokenSecretRef)").message("set exactly one of apiKeySecretRef and bearerTokenSecretRef"))]
#[serde(rename_all = "camelCase")]
pub struct AgentControlPlaneSpec {
    /// Cloud data region, a lowercase DNS label such as `us`, `eu` or `ap`,
    /// mapped to its host by the naming rule of the official CLI (the
    /// project's API notes, section "Regions"; seen only in the official
    /// CLI): `us` →
    /// `https://api.host.langchain.com`, any other `r` →
    /// `https://{r}.api.host.langchain.com`. A region that does not exist
    /// fails like an unreachable host (the control plane stays not Ready).
    /// The operator's default `--allowed-hosts` holds the hosts of `us` and
    /// `eu` only: another region's host must be added there, else the
    /// AgentControlPlane is `Stalled` (`HostNotAllowed`).
    /// Mutually exclusive with `url`; a self-hosted control plane uses `url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        regex(pattern = r"^[a-z]([a-z0-9-]*[a-z0-9])?$"),
        length(min = 2, max = 63)
    )]
    pub region: Option<String>,
    /// Explicit base URL of the control plane, without the `/v2` segment. A
    /// self-hosted installation ends in `/api-host`, e.g.
    /// `https://langsmith.example.com/api-host`; at most 2048 bytes. Its
    /// host must be in the operator's `--allowed-hosts` (default: LangSmith
    /// Cloud), else the AgentControlPlane is `Stalled` (`HostNotAllowed`)
    /// and no request is sent. Mutually exclusive with `region`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    #[x_kube(validation = Rule::new("self.startsWith('https://') || self.startsWith('http://')").message("url must start with https:// or http://"))]
    pub url: Option<String>,
    /// Workspace id, sent as the `X-Tenant-Id` header on every request.
    #[x_kube(validation = Rule::new("self != ''").message("workspaceId must not be empty"))]
    pub workspace_id: String,
    /// Secret key holding the API key sent as `X-Api-Key`: a Secret of the
    /// AgentControlPlane's namespace (of the operator's cluster resource
    /// namespace for a ClusterAgentControlPlane).
    /// Surrounding whitespace is ignored. A change of the Secret is picked up
    /// without restarting the operator. Exactly one of this and
    /// `bearerTokenSecretRef` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_secret_ref: Option<SecretKeyRef>,
    /// Secret key (of the namespace the API key would be in) holding a
    /// bearer token sent as
    /// `Authorization: Bearer <token>` instead of an API key (the control
    /// plane accepts either: the project's API notes, section "Credentials
    /// and refusals"). Surrounding whitespace is ignored; picked up without a
    /// restart. Verification on a deployment's agent server, which needs an
    /// API key, then uses `spec.verify.apiKeySecretRef` of the
    /// AgentDeployment. Exactly one of this and `apiKeySecretRef` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token_secret_ref: Option<SecretKeyRef>,
    /// Secret key (of the namespace the API key is in) holding a PEM bundle
    /// of CA certificates
    /// trusted in addition to the system roots, for a self-hosted control
    /// plane behind a private CA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle_secret_ref: Option<SecretKeyRef>,
    /// The service's limit for this workspace, in requests per second
    /// (more than 0, at most 1000; fractions allowed), when you know it.
    /// The operator then sends at most 95 % of it to this workspace, and
    /// starts at that rate instead of discovering it. Every
    /// AgentControlPlane that uses the same key and URL shares one budget;
    /// its ceiling is the largest rate they declare, and each declared rate
    /// also caps its own workspace's share.
    ///
    /// Unset: the operator discovers the limit. It starts at 10 requests
    /// per second, grows to at most 20, halves on a 429, 502, 503, 504 or
    /// timeout, and pauses for a `Retry-After`. Every control plane URL is
    /// also capped for the whole operator (`--max-requests-per-second-per-host`,
    /// default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self > 0.0 && self <= 1000.0").message("requestsPerSecond must be greater than 0 and at most 1000"))]
    pub requests_per_second: Option<f64>,
    /// Requests allowed at once after an idle period (token bucket size,
    /// 1 to 1000). Needs `requestsPerSecond`; default: one second's worth
    /// (`requestsPerSecond` rounded up, at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub burst: Option<u32>,
    /// Preview environments on this control plane: AgentDeployments with
    /// `spec.expiry`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previews: Option<Previews>,
}

/// `spec.previews` of an AgentControlPlane.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Previews {
    /// Most live previews at once, a number of previews (0 to 1000):
    /// AgentDeployments of this namespace with `spec.expiry` that name this
    /// control plane and hold a remote deployment (not yet expired; one
    /// being deleted still counts). One more waits before its create, with
    /// no request, as `Reconciling` with reason `PreviewLimitReached`, and
    /// goes on when one expires or is deleted (it looks again every blocked
    /// interval, 60 seconds by default). Counted on a fresh list from the API
    /// server, never a cache. Unset: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1000))]
    pub max_live: Option<u32>,
}

impl AgentControlPlaneSpec {
    /// The Secret key of the credential: the API key, else the bearer
    /// token (`None` only for a spec admission refuses).
    pub fn credential_ref(&self) -> Option<&SecretKeyRef> {
        self.api_key_secret_ref
            .as_ref()
            .or(self.bearer_token_secret_ref.as_ref())
    }

    /// True when the credential is a bearer token.
    pub fn uses_bearer_token(&self) -> bool {
        self.api_key_secret_ref.is_none() && self.bearer_token_secret_ref.is_some()
    }

    /// The base URL requests are sent to: the region's host or the explicit URL,
    /// without a trailing slash.
    pub fn base_url(&self) -> Option<String> {
        match (&self.region, &self.url) {
            (Some(region), _) => Some(crate::controlplane::endpoint::region_base_url(region)),
            (None, Some(url)) => Some(url.trim_end_matches('/').to_owned()),
            (None, None) => None,
        }
    }
}

/// Observed state of an `AgentControlPlane`: whether an authenticated call
/// succeeds with the current spec and API key.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentControlPlaneStatus {
    /// `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// kstatus conditions: `Ready` (an authenticated call succeeded),
    /// `Reconciling` (the control plane is unreachable; retrying) and
    /// `Stalled` (the key is refused or a Secret is missing; the reason says
    /// which); these two are present only while `True`.
    #[serde(default)]
    #[schemars(schema_with = "super::conditions::conditions_schema")]
    pub conditions: Vec<Condition>,
    /// The deployments of the workspace that no AgentDeployment manages (of
    /// any namespace the operator watches: one that holds or names the id,
    /// or claims the name on this URL and workspace), as counted by the
    /// last listing of the workspace (one paged `GET /v2/deployments` per
    /// drift period at most, `--resync-interval-seconds`). Absent until the
    /// first listing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unmanaged: Option<UnmanagedDeployments>,
}

/// `status.unmanaged` of an AgentControlPlane: what of its workspace is not
/// under GitOps yet. A deployment is managed when an AgentDeployment of any
/// namespace the operator watches (the cluster by default), whatever its
/// AgentControlPlane, holds or names its id (`status.deploymentId`, the
/// `agentserver.dev/deployment-id` annotation or `spec.deploymentId`), or,
/// holding and naming no id, has its remote name on the same control plane
/// (URL and workspace). Deployments being deleted (`AWAITING_DELETE`,
/// `AWAITING_FINAL_DELETE`) are not counted. `agentctl unmanaged` lists
/// them all. Source: docs/control-plane-api.md "Requests" (list) and
/// "Deployment" (`status`, `is_preview`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnmanagedDeployments {
    /// Deployments that no AgentDeployment manages, the platform's own
    /// previews (`is_preview`) excepted.
    pub count: u32,
    /// Of `count`, the deployments the control plane shows `UNUSED` (no
    /// traffic for a long time).
    pub unused: u32,
    /// The platform's own pull-request previews (`is_preview`) that no
    /// AgentDeployment manages, counted apart from `count`.
    pub previews: u32,
    /// Deployments that an AgentDeployment of this namespace manages.
    pub managed: u32,
    /// The remote names of the first 20 of `count`, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    /// When the workspace was listed (RFC 3339).
    pub observed_at: String,
}
