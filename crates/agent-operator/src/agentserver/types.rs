//! Request and answer shapes of the agent server endpoints the client uses.
//!
//! Source: docs/control-plane-api.md "Agent server" (fields of an assistant, of a search and of a
//! stateless run; the event names of a run stream; the `/assistants/search`
//! and `/runs/stream` bodies). Unknown answer
//! fields are kept in `extra` maps or ignored, so a newer server still decodes.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::Error;

/// Answer of `GET /info` (docs/control-plane-api.md "Agent server": version and flags).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
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
pub struct Assistant {
    /// Assistant id (a uuid).
    pub assistant_id: String,
    /// The graph it runs (a key of `graphs` in `langgraph.json`).
    pub graph_id: String,
    /// Name; the default assistant of a graph is named after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Metadata; the default assistant has `created_by = "system"`.
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// Run configuration.
    #[serde(default)]
    pub config: Value,
    /// Run context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
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

/// Body of `POST /runs/stream`, a stateless run (docs/control-plane-api.md
/// "Agent server").
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
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
    /// What the server does when the client disconnects (e.g. `cancel`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_disconnect: Option<String>,
}

/// One event of a run stream, typed by its name (docs/control-plane-api.md "Agent server").
#[derive(Clone, Debug, PartialEq)]
pub enum RunEvent {
    /// The first event: `{run_id, attempt}`.
    Metadata {
        /// Id of the run.
        run_id: String,
        /// Attempt number, when given.
        attempt: Option<u64>,
    },
    /// A `values` chunk: the whole state after a step.
    Values(Value),
    /// An `updates` chunk: `{node: update}`.
    Updates(Value),
    /// Event `error`: the run failed; `{error, message}`.
    Error {
        /// Error class (e.g. `ValueError`).
        error: String,
        /// Its message.
        message: String,
    },
    /// Event `end` (some servers send it; others just close the stream).
    End,
    /// Any other event (`messages`, `debug`, `custom`, subgraph events such
    /// as `updates|ns`, ...), its data as JSON.
    Other {
        /// The event name.
        event: String,
        /// Its data.
        data: Value,
    },
}

impl RunEvent {
    /// Types one server-sent event. Errors: [`Error::Decode`] when its data
    /// is not JSON, or a `metadata` event has no `run_id`.
    pub fn from_sse(event: &str, data: &str) -> Result<Self, Error> {
        let value: Value = if data.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(data).map_err(|e| {
                // The event name is the server's text: at most 64 bytes of it.
                let name = crate::controlplane::error::bound(event.chars().take(64).collect());
                Error::decode(format!(
                    "the data of stream event {name:?} is not JSON: {}",
                    crate::controlplane::error::json_error_text(&e)
                ))
            })?
        };
        Ok(match event {
            "metadata" => RunEvent::Metadata {
                run_id: value
                    .get("run_id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| Error::decode("a metadata event without run_id"))?
                    .to_owned(),
                attempt: value.get("attempt").and_then(Value::as_u64),
            },
            "values" => RunEvent::Values(value),
            "updates" => RunEvent::Updates(value),
            "error" => {
                let text = |k: &str| match value.get(k) {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Null) | None => String::new(),
                    Some(other) => other.to_string(),
                };
                RunEvent::Error {
                    error: text("error"),
                    message: if value.is_string() {
                        value.as_str().unwrap_or_default().to_owned()
                    } else {
                        text("message")
                    },
                }
            }
            "end" => RunEvent::End,
            other => RunEvent::Other {
                event: other.to_owned(),
                data: value,
            },
        })
    }

    /// The event name, as the server sent it.
    pub fn name(&self) -> &str {
        match self {
            RunEvent::Metadata { .. } => "metadata",
            RunEvent::Values(_) => "values",
            RunEvent::Updates(_) => "updates",
            RunEvent::Error { .. } => "error",
            RunEvent::End => "end",
            RunEvent::Other { event, .. } => event,
        }
    }

    /// The event data as JSON (as the server sent it, re-encoded).
    pub fn data(&self) -> Value {
        match self {
            RunEvent::Metadata { run_id, attempt } => {
                let mut m = Map::new();
                m.insert("run_id".into(), Value::String(run_id.clone()));
                if let Some(a) = attempt {
                    m.insert("attempt".into(), Value::from(*a));
                }
                Value::Object(m)
            }
            RunEvent::Values(v) | RunEvent::Updates(v) | RunEvent::Other { data: v, .. } => {
                v.clone()
            }
            RunEvent::Error { error, message } => {
                serde_json::json!({ "error": error, "message": message })
            }
            RunEvent::End => Value::Null,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn typed_events() {
        assert_eq!(
            RunEvent::from_sse("metadata", r#"{"run_id":"r","attempt":1}"#).unwrap(),
            RunEvent::Metadata {
                run_id: "r".into(),
                attempt: Some(1)
            }
        );
        let e = RunEvent::from_sse("error", r#"{"error":"ValueError","message":"boom"}"#).unwrap();
        assert_eq!(e.data(), json!({"error": "ValueError", "message": "boom"}));
        assert_eq!(RunEvent::from_sse("end", "null").unwrap(), RunEvent::End);
        let e = RunEvent::from_sse("updates|sub", "{}").unwrap();
        assert_eq!(e.name(), "updates|sub");
        assert!(RunEvent::from_sse("values", "{").is_err());
        assert!(RunEvent::from_sse("metadata", "{}").is_err());
        let body = serde_json::to_value(RunStreamRequest {
            assistant_id: "agent".into(),
            stream_mode: Some(StreamMode::from_list(vec!["updates".into()])),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            body,
            json!({"assistant_id": "agent", "stream_mode": "updates"})
        );
        let body = serde_json::to_value(StreamMode::from_list(vec!["a".into(), "b".into()]));
        assert_eq!(body.unwrap(), json!(["a", "b"]));
    }
}
