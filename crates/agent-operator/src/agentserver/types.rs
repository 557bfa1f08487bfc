//! Request and answer shapes of the agent server endpoints the client uses:
//! the wire types of the `agent-server-wire` crate (shared with the
//! emulator's built-in agent server), and [`RunEvent`], a typed event of a
//! run stream.
//!
//! Source: docs/control-plane-api.md "Agent server" (fields of an assistant, of a search and of a
//! stateless run; the event names of a run stream; the `/assistants/search`
//! and `/runs/stream` bodies). Unknown answer
//! fields are kept in `extra` maps or ignored, so a newer server still decodes.

use serde_json::{Map, Value};

use super::error::Error;

pub use agent_server_wire::*;

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
