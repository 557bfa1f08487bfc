//! `AgentCron`: one cron (a scheduled run of an assistant or a graph) on
//! the agent server of an `AgentDeployment` of the same namespace.
//!
//! The agent server has no idempotency key for crons and chooses the
//! `cron_id` itself, so the operator tags the cron's `metadata` with the
//! object's UID ([`UID_METADATA_KEY`]) and finds its cron by that tag
//! (`POST /runs/crons/search`) on every pass: a create whose answer was
//! lost (a crash, a timeout) is found and adopted, never made twice. It
//! never sends `end_time` (the pinned server's scheduler breaks on it): at
//! `spec.endTime` it disables the cron itself.
//!
//! Source: docs/control-plane-api.md "Agent server" (the cron facts and
//! `end_time` on the pinned server), "Crons" (what the controller sends).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::assistant::{DeploymentRef, RejectedAssistantRequest};

/// The key of the cron's `metadata` that carries the object's UID: how the
/// operator finds its cron (`POST /runs/crons/search` by exact metadata).
pub const UID_METADATA_KEY: &str = "agentserver.dev/uid";

/// A five-field cron schedule (minute hour day-of-month month
/// day-of-week), each field made of digits, names, `*`, `/`, `,`, `-`,
/// `?`, `#`, `L`, `W`.
pub const SCHEDULE_PATTERN: &str = r"^[0-9A-Za-z*/,?#-]+( +[0-9A-Za-z*/,?#-]+){4}$";

/// An IANA time zone name (`UTC`, `Europe/Paris`, `America/Argentina/Salta`,
/// `Etc/GMT+5`).
pub const TIMEZONE_PATTERN: &str = r"^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$";

/// What happens to the cron on the agent server when the resource is
/// deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum CronDeletionPolicy {
    /// Delete the cron (`DELETE /runs/crons/{id}`; already gone is fine),
    /// and keep the resource until it is gone.
    #[default]
    Delete,
    /// Leave the cron on the agent server; only the resource goes.
    Orphan,
}

/// What the agent server does with the thread of each run once it ends
/// (`on_run_completed`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum OnRunCompleted {
    /// Delete the run's thread (the server's default).
    #[default]
    Delete,
    /// Keep it (the runs stay visible in `POST /threads/search`).
    Keep,
}

impl OnRunCompleted {
    /// The wire value: `delete` or `keep`.
    pub fn wire(self) -> &'static str {
        match self {
            OnRunCompleted::Delete => "delete",
            OnRunCompleted::Keep => "keep",
        }
    }
}

/// The `AgentAssistant` (same namespace) whose assistant the cron runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AssistantRef {
    /// Name of the `AgentAssistant` (a DNS-1123 subdomain).
    #[schemars(
        regex(pattern = crate::api::rules::DNS_SUBDOMAIN_PATTERN),
        length(min = 1, max = 253)
    )]
    pub name: String,
}

/// Desired state of an `AgentCron`: what runs, on which deployment's agent
/// server, when.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "agentserver.dev",
    version = "v1alpha1",
    kind = "AgentCron",
    namespaced,
    status = "AgentCronStatus",
    shortname = "agc",
    category = "agents",
    printcolumn = r#"{"name":"Ready","type":"string","description":"Ready condition: the cron on the agent server is as the spec says","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Status","type":"string","description":"Reason of the Ready condition, e.g. CronReady, CronSuspended, CronCompleted, WaitingForDeployment, CronRejected","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"Deployment","type":"string","jsonPath":".spec.deploymentRef.name"}"#,
    printcolumn = r#"{"name":"Schedule","type":"string","jsonPath":".spec.schedule"}"#,
    printcolumn = r#"{"name":"Suspend","type":"boolean","jsonPath":".spec.suspend"}"#,
    printcolumn = r#"{"name":"Next-Run","type":"string","description":"Next run, as the agent server last answered","jsonPath":".status.nextRunDate"}"#,
    printcolumn = r#"{"name":"Last-Run","type":"string","description":"Start of the newest run the agent server shows (read on the drift check)","jsonPath":".status.lastRun.time"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Cron-ID","type":"string","priority":1,"jsonPath":".status.cronId"}"#,
    printcolumn = r#"{"name":"Message","type":"string","priority":1,"description":"Message of the Ready condition","jsonPath":".status.conditions[?(@.type==\"Ready\")].message"}"#
)]
#[x_kube(validation = Rule::new("has(self.assistantRef) != has(self.graphId)").message("exactly one of assistantRef and graphId must be set"))]
#[x_kube(validation = Rule::new("self.deploymentRef == oldSelf.deploymentRef").message("deploymentRef cannot be changed: create another AgentCron"))]
#[x_kube(validation = Rule::new("has(self.assistantRef) == has(oldSelf.assistantRef) && (!has(self.assistantRef) || self.assistantRef == oldSelf.assistantRef) && has(self.graphId) == has(oldSelf.graphId) && (!has(self.graphId) || self.graphId == oldSelf.graphId)").message("assistantRef and graphId cannot be changed (the agent server cannot move a cron to another assistant): create another AgentCron"))]
#[serde(rename_all = "camelCase")]
pub struct AgentCronSpec {
    /// The `AgentDeployment` whose agent server holds the cron; the cron
    /// waits until it is Ready with a URL. Cannot be changed.
    pub deployment_ref: DeploymentRef,
    /// The `AgentAssistant` whose assistant each run uses; the cron waits
    /// until it has an `assistantId`. Exactly one of `assistantRef` and
    /// `graphId`; cannot be changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assistant_ref: Option<AssistantRef>,
    /// The graph each run uses (its default assistant): a key of `graphs`
    /// in the deployment's `langgraph.json`. Exactly one of `assistantRef`
    /// and `graphId`; cannot be changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub graph_id: Option<String>,
    /// When it runs: five cron fields (minute hour day-of-month month
    /// day-of-week), in `timezone` (UTC by default). A schedule the agent
    /// server refuses is `Stalled` (`CronRejected`) with its message.
    #[schemars(regex(pattern = SCHEDULE_PATTERN), length(min = 9, max = 256))]
    pub schedule: String,
    /// IANA time zone of `schedule`, e.g. `Europe/Paris`; default UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = TIMEZONE_PATTERN), length(min = 1, max = 64))]
    pub timezone: Option<String>,
    /// Input of each run, any JSON value (e.g. `{"messages": [...]}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_value_schema")]
    pub input: Option<Value>,
    /// Run configuration of each run, any JSON object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_object_schema")]
    pub config: Option<Map<String, Value>>,
    /// Run context of each run, any JSON object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_object_schema")]
    pub context: Option<Map<String, Value>>,
    /// Metadata of the cron (each run's thread carries it), any JSON
    /// object. The agent server merges metadata key by key: a key removed
    /// here stays on the cron. The operator adds `agentserver.dev/uid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_object_schema")]
    pub metadata: Option<Map<String, Value>>,
    /// URL the agent server calls when a run ends; HTTPS only, and its host
    /// on the operator's `--allowed-hosts` (else `Stalled`,
    /// `HostNotAllowed`, before any request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^https://[^\s/?#]+([/?#]\S*)?$"), length(max = 2048))]
    pub webhook: Option<String>,
    /// After this time (RFC 3339) the operator disables the cron
    /// (`enabled: false`) and reports `CronCompleted`. It is never sent to
    /// the agent server as `end_time` (the pinned server's scheduler
    /// breaks on it; the project's API notes, section "Agent server").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<Time>,
    /// What happens to the thread of each run once it ends: `Delete`
    /// (default) or `Keep`.
    #[serde(default)]
    pub on_run_completed: OnRunCompleted,
    /// Like a CronJob's: `true` disables the cron on the agent server
    /// (`enabled: false`) without deleting it; `false` enables it again.
    #[serde(default)]
    pub suspend: bool,
    /// What happens to the cron when the resource is deleted: `Delete`
    /// (default) or `Orphan`.
    #[serde(default)]
    pub deletion_policy: CronDeletionPolicy,
    /// `Manage` (default) creates the cron and keeps it as the spec says.
    /// `Observe` adopts the cron found by the adoption key, the
    /// `agentserver.dev/uid` metadata tag with this object's UID (a cron an
    /// AgentCron made before, or one tagged by hand), and never changes it:
    /// no create, PATCH or DELETE is sent, not even when this resource is
    /// deleted, nor at `endTime`. The differences from the spec are listed
    /// in `status.drift` and the `Drifted` condition; with no tagged cron
    /// the resource is `Stalled` (`NothingToObserve`). Switching to
    /// `Manage` converges it with one PATCH.
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

/// Schema of any JSON value.
fn free_value_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// The newest run of a cron, as the agent server shows it (`POST
/// /threads/search`; docs/control-plane-api.md "Crons").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CronLastRun {
    /// The run's thread id.
    pub thread_id: String,
    /// The thread's status: `idle` (the run ended), `busy` (running),
    /// `interrupted` or `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// When the run began (the thread's `created_at`, RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
}

/// Observed state of an `AgentCron`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentCronStatus {
    /// `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Id of the cron on the agent server (the server chose it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron_id: Option<String>,
    /// Next run (RFC 3339), as the agent server last answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run_date: Option<String>,
    /// Whether the cron runs, as the agent server last answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// The assistant id (or graph id) the cron was created with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assistant_id: Option<String>,
    /// Remote id of the AgentDeployment whose agent server holds the cron:
    /// a deployment re-created under a new id is a new, empty agent server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_id: Option<String>,
    /// Digest of the fields last sent (create or PATCH): a spec change is
    /// one PATCH even where the server's answer does not show a field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_hash: Option<String>,
    /// A request the agent server refused, not repeated until the spec
    /// changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected_request: Option<RejectedAssistantRequest>,
    /// The newest run the agent server shows: the newest thread whose
    /// metadata carries the cron's UID tag (each run of a stateless cron is
    /// one), read on a pass that changes nothing (the drift check), never
    /// polled. With `onRunCompleted: Delete` (the default) a run's thread
    /// is deleted once it ends, so only a run in progress shows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<CronLastRun>,
    /// kstatus conditions: `Ready` (the cron is as the spec says; reason
    /// `CronReady`, `CronSuspended` or `CronCompleted` after `endTime`),
    /// `Reconciling` (waiting for the deployment or the assistant, or the
    /// agent server is unreachable; retrying) and `Stalled` (a refused
    /// request, a refused key); these two are present only while `True`.
    #[serde(default)]
    #[schemars(schema_with = "super::conditions::conditions_schema")]
    pub conditions: Vec<Condition>,
    /// `spec.managementPolicy: Observe`: each field of the cron that
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
    fn defaults_decode() {
        let spec: AgentCronSpec = serde_json::from_value(serde_json::json!({
            "deploymentRef": {"name": "agent"},
            "graphId": "agent",
            "schedule": "*/5 * * * *",
            "input": {"messages": []},
        }))
        .unwrap();
        assert_eq!(spec.deletion_policy, CronDeletionPolicy::Delete);
        assert_eq!(spec.on_run_completed, OnRunCompleted::Delete);
        assert!(!spec.suspend);
    }

    #[test]
    fn the_schedule_and_timezone_patterns_accept_cron_and_iana_names_only() {
        let schedule = regex::Regex::new(SCHEDULE_PATTERN).unwrap();
        for ok in ["* * * * *", "*/5 0-6 1,15 JAN-MAR MON-FRI", "0 3 * * 1#2"] {
            assert!(schedule.is_match(ok), "{ok}");
        }
        for bad in [
            "* * * *",
            "* * * * * *",
            "@daily",
            "* * * * *\n",
            "* * * * ; rm",
        ] {
            assert!(!schedule.is_match(bad), "{bad:?}");
        }
        let tz = regex::Regex::new(TIMEZONE_PATTERN).unwrap();
        for ok in [
            "UTC",
            "Europe/Paris",
            "America/Argentina/Salta",
            "Etc/GMT+5",
        ] {
            assert!(tz.is_match(ok), "{ok}");
        }
        for bad in ["", "Europe/", "/Paris", "Europe Paris", "../etc"] {
            assert!(!tz.is_match(bad), "{bad:?}");
        }
    }

    #[test]
    fn the_crd_has_its_names_and_rules() {
        let crd = serde_json::to_value(AgentCron::crd()).unwrap();
        assert_eq!(crd["spec"]["names"]["shortNames"][0], "agc");
        assert_eq!(crd["spec"]["names"]["categories"][0], "agents");
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(spec["properties"]["schedule"]["pattern"], SCHEDULE_PATTERN);
        assert_eq!(spec["properties"]["endTime"]["format"], "date-time");
        let rules = spec["x-kubernetes-validations"].to_string();
        assert!(
            rules.contains("has(self.assistantRef) != has(self.graphId)"),
            "{rules}"
        );
    }
}
