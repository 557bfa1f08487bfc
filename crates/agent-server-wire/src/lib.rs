//! Wire types of the agent server API that a deployment serves at its URL
//! (and `langgraph dev` locally): the requests and answers that
//! agent-operator's client and the control plane emulator's built-in agent
//! server share, so that their shapes are written once.
//!
//! Source: docs/control-plane-api.md "Agent server" (the endpoints the
//! project uses, and the facts kept for assistants and crons); the
//! authority for the shapes is the running server's `/openapi.json` (the
//! schemas `Assistant`, `AssistantCreate`, `AssistantPatch`, `Cron`,
//! `CronCreate`, `CronPatch`, `CronSearch`, `ThreadSearchRequest`, `Thread`
//! of the pinned `langgraph-api`),
//! which a test of agent-operator checks these types against. Unknown answer
//! fields are ignored or kept in `extra`, so a newer server still decodes.
//! Snake_case on the wire, as the server names its fields.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Answer of `GET /info` (docs/control-plane-api.md "Agent server": version and flags).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ServerInfo {
    /// Server version, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Feature flags (e.g. `assistants`, `crons`), as sent.
    #[serde(default)]
    pub flags: Value,
    /// Every other field, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One assistant: a configured instance of a graph (docs/control-plane-api.md "Agent server").
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Assistant {
    /// Assistant id (a uuid).
    pub assistant_id: String,
    /// The graph it runs (a key of `graphs` in `langgraph.json`).
    pub graph_id: String,
    /// Name; the default assistant of a graph is named after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Description (`null` when unset, as the server answers).
    #[serde(default)]
    pub description: Option<String>,
    /// Metadata; the default assistant has `created_by = "system"`.
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// Run configuration.
    #[serde(default)]
    pub config: Value,
    /// Run context (`{}` when unset, as the server answers).
    #[serde(default)]
    pub context: Option<Value>,
    /// Version number of the assistant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    /// Creation time (RFC 3339, as sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// Last update time (RFC 3339, as sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
}

impl Assistant {
    /// True for the default assistant the server creates for each graph
    /// (`metadata.created_by == "system"`, docs/control-plane-api.md "Agent server").
    pub fn is_system_default(&self) -> bool {
        self.metadata.get("created_by").and_then(Value::as_str) == Some("system")
    }
}

/// Body of `POST /assistants/search` (docs/control-plane-api.md "Agent server"). Every field is
/// optional; the server's default `limit` is 10.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AssistantSearch {
    /// Exact match per key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// Only assistants of this graph.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph_id: Option<String>,
    /// Only assistants with this name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Page size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Items to skip.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<u32>,
}

/// One page of `POST /assistants/search`: the bare JSON array and the next
/// offset from the `X-Pagination-Next` header (docs/control-plane-api.md "Agent server").
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AssistantPage {
    /// The assistants of this page.
    pub assistants: Vec<Assistant>,
    /// Offset of the next page; `None` on the last page.
    pub next_offset: Option<u32>,
}

/// `stream_mode` of a run: one mode or a list (docs/control-plane-api.md "Agent server"; server
/// default `["values"]`). Modes include `values`, `updates`, `messages`,
/// `messages-tuple`, `events`, `debug`, `custom`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum StreamMode {
    /// One mode, sent as a string.
    One(String),
    /// Several modes, sent as a list.
    Many(Vec<String>),
}

impl StreamMode {
    /// One mode when `modes` has exactly one, else the list.
    pub fn from_list(mut modes: Vec<String>) -> Self {
        if modes.len() == 1 {
            StreamMode::One(modes.remove(0))
        } else {
            StreamMode::Many(modes)
        }
    }
}

/// Body of `POST /runs/stream`, a stateless run, and of `POST
/// /threads/{thread_id}/runs/stream`, a run on a thread
/// (docs/control-plane-api.md "Agent server").
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunStreamRequest {
    /// An assistant id (uuid) or a graph name of `langgraph.json`.
    pub assistant_id: String,
    /// The graph input (JSON).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// The stream mode(s); the server default is `values`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_mode: Option<StreamMode>,
    /// Run configuration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    /// Run metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// What the server does when the client disconnects: `continue` (the
    /// server's default: the run goes on) or `cancel`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_disconnect: Option<String>,
    /// What becomes of a stateless run's thread when it ends: `delete` (the
    /// server's default) or `keep`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_completion: Option<String>,
    /// A run on a thread that does not exist: `reject` (the server's
    /// default: 404) or `create` (the thread is made, with the run's
    /// `metadata`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub if_not_exists: Option<String>,
}

/// Body of `POST /threads/prune` (schema `ThreadPruneRequest`): the
/// threads to delete, in one request.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ThreadPrune {
    /// The threads (UUIDs); an empty list deletes nothing.
    pub thread_ids: Vec<String>,
    /// `delete` (the server's default) or `keep_latest`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
}

/// The answer to `POST /threads/prune`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ThreadPruned {
    /// How many threads it deleted.
    pub pruned_count: u64,
}

/// What `POST /assistants` does when the client-chosen `assistant_id`
/// exists (docs/control-plane-api.md "Agent server").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum IfExists {
    /// Answer 409 (the server's default).
    Raise,
    /// Answer the existing assistant unchanged: a create that may be
    /// repeated safely.
    DoNothing,
}

/// Body of `POST /assistants` (schema `AssistantCreate`; `graph_id`
/// required, the rest optional; `name` defaults to `Untitled` on the
/// server).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AssistantCreate {
    /// The graph it runs (a key of `graphs` in `langgraph.json`).
    pub graph_id: String,
    /// Client-chosen id (a uuid); the server chooses one when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assistant_id: Option<String>,
    /// Run configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    /// Run context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// Metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// What to do when `assistant_id` exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub if_exists: Option<IfExists>,
    /// Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// Body of `PATCH /assistants/{assistant_id}` (schema `AssistantPatch`):
/// every field optional; `metadata` is merged into the current one; each
/// PATCH makes a new `version`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AssistantPatch {
    /// Another graph.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_id: Option<String>,
    /// Run configuration (replaces the current one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    /// Run context (replaces the current one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// Metadata, merged key by key into the current one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// Body of `POST /assistants/{assistant_id}/versions` (schema
/// `AssistantVersionsSearchRequest`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AssistantVersionsSearch {
    /// Exact match per key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// Page size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Items to skip.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u32>,
}

/// Body of `POST /assistants/{assistant_id}/latest` (schema
/// `AssistantVersionChange`): the version that serves from now on.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AssistantVersionChange {
    /// The version number.
    pub version: i64,
}

/// One cron: a scheduled run (schema `Cron`; docs/control-plane-api.md
/// "Agent server").
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Cron {
    /// Cron id (a uuid the server chooses: a create has no idempotency key).
    pub cron_id: String,
    /// The assistant it runs, when it has one.
    #[serde(default)]
    pub assistant_id: Option<String>,
    /// The thread of a thread cron; for a stateless cron, as the server
    /// answers.
    #[serde(default)]
    pub thread_id: Option<String>,
    /// The schedule: five cron fields.
    pub schedule: String,
    /// The IANA time zone of `schedule`, or `null` (UTC). Answered by the
    /// pinned server although its `Cron` schema does not list it.
    #[serde(default)]
    pub timezone: Option<String>,
    /// `delete` or `keep` the thread of each run (the server answers
    /// `delete` when the create did not say). Answered by the pinned server
    /// although its `Cron` schema does not list it.
    #[serde(default)]
    pub on_run_completed: Option<String>,
    /// The user who made it (`""` on a server without authentication).
    #[serde(default)]
    pub user_id: Option<String>,
    /// When it stops (RFC 3339), or `null`.
    #[serde(default)]
    pub end_time: Option<String>,
    /// Whether it runs.
    #[serde(default)]
    pub enabled: bool,
    /// Metadata (also carried by each run's thread of a stateless cron).
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// The run's settings: `assistant_id`, `schedule`, `config` (whose
    /// `configurable.cron_id` the server adds) and the create's other fields
    /// as sent (`input`, `context`, `metadata`, ...), updated by each PATCH.
    #[serde(default)]
    pub payload: Map<String, Value>,
    /// Next run (RFC 3339), or `null`.
    #[serde(default)]
    pub next_run_date: Option<String>,
    /// Creation time (RFC 3339).
    #[serde(default)]
    pub created_at: Option<String>,
    /// Last update time (RFC 3339).
    #[serde(default)]
    pub updated_at: Option<String>,
    /// Every other field, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Body of `POST /runs/crons` (schema `CronCreate`; `assistant_id` and
/// `schedule` required).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CronCreate {
    /// An assistant id (uuid) or a graph name.
    pub assistant_id: String,
    /// Five cron fields, UTC unless `timezone` says otherwise.
    pub schedule: String,
    /// An IANA time zone for `schedule`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// When it stops (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
    /// The run's input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// Metadata (how a client finds its cron again: `POST
    /// /runs/crons/search` filters on it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// Run configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    /// Run context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// URL called when a run ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<String>,
    /// `delete` (the default) or `keep` the thread of each run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_run_completed: Option<String>,
    /// Whether it runs (the server's default: true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// Body of `PATCH /runs/crons/{cron_id}` (schema `CronPatch`): every field
/// optional; `metadata` is merged; `end_time` `Some(None)` is sent as
/// `null` and clears it, `None` leaves it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CronPatch {
    /// New schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// New time zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// `Some(None)`: clear it; `Some(Some(t))`: set it.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "nullable")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<String>"))]
    pub end_time: Option<Option<String>>,
    /// New input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// Metadata, merged key by key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// New run configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    /// New run context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// New webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<String>,
    /// `delete` or `keep`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_run_completed: Option<String>,
    /// Turn it on or off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// Body of `POST /runs/crons/search` (schema `CronSearch`): every field
/// optional; `metadata` matches exact key/value pairs.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CronSearch {
    /// Only crons of this assistant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assistant_id: Option<String>,
    /// Only enabled (or disabled) crons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Exact match per key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// Page size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Items to skip.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u32>,
}

/// Body of `POST /threads/search` (schema `ThreadSearchRequest`): every
/// field optional; `metadata` matches exact key/value pairs.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ThreadSearch {
    /// Exact match per key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// Page size (the server's default is 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Items to skip.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u32>,
    /// `thread_id`, `status`, `created_at`, `updated_at` or
    /// `state_updated_at`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sort_by: Option<String>,
    /// `asc` or `desc`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sort_order: Option<String>,
    /// The fields each thread is answered with (all when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select: Option<Vec<String>>,
}

/// One thread, as `POST /threads/search` answers it (schema `Thread`; the
/// fields a search with `select` keeps). Each run of a stateless cron is a
/// thread whose metadata carries the cron's.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Thread {
    /// Thread id.
    pub thread_id: String,
    /// Creation time (RFC 3339): when the run began.
    #[serde(default)]
    pub created_at: Option<String>,
    /// Last update time (RFC 3339).
    #[serde(default)]
    pub updated_at: Option<String>,
    /// `idle` (its run ended), `busy` (running), `interrupted` or `error`.
    #[serde(default)]
    pub status: Option<String>,
    /// Metadata.
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// The thread's state once its run ended (`select` it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Value>,
}

/// `Option<Option<T>>` as absent / `null` / a value (serde's default reads
/// `null` as absent).
mod nullable {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<T: Serialize, S: Serializer>(
        value: &Option<Option<T>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(inner) => inner.serialize(serializer),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Option<T>>, D::Error> {
        Option::<T>::deserialize(deserializer).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_cron_patch_sends_null_to_clear_end_time_and_nothing_to_keep_it() {
        let clear = CronPatch {
            end_time: Some(None),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&clear).unwrap(),
            json!({"end_time": null})
        );
        let keep = CronPatch {
            enabled: Some(false),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&keep).unwrap(),
            json!({"enabled": false})
        );
        let read: CronPatch = serde_json::from_value(json!({"end_time": null})).unwrap();
        assert_eq!(read.end_time, Some(None));
        let read: CronPatch = serde_json::from_value(json!({})).unwrap();
        assert_eq!(read.end_time, None);
    }

    #[test]
    fn an_assistant_create_is_idempotent_with_do_nothing() {
        let body = AssistantCreate {
            graph_id: "agent".into(),
            assistant_id: Some("6f1c2a3e-4b5d-4e6f-8a7b-9c0d1e2f3a4b".into()),
            if_exists: Some(IfExists::DoNothing),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&body).unwrap(),
            json!({"graph_id": "agent", "assistant_id": "6f1c2a3e-4b5d-4e6f-8a7b-9c0d1e2f3a4b",
                   "if_exists": "do_nothing"})
        );
    }

    #[test]
    fn an_assistant_answers_description_and_context_as_the_server_does() {
        let a = Assistant {
            assistant_id: "a".into(),
            graph_id: "agent".into(),
            context: Some(json!({})),
            ..Default::default()
        };
        let v = serde_json::to_value(&a).unwrap();
        assert_eq!(v["description"], Value::Null);
        assert_eq!(v["context"], json!({}));
    }
}
