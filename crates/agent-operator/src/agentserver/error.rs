//! The one error type of the agent server client.
//!
//! Source: docs/control-plane-api.md "Agent server" (an unknown assistant is a 404/422 with a
//! `detail` string; failures of a run arrive in the stream as event `error`
//! `{error, message}`; cloud deployments require `X-Api-Key`) and "Errors"
//! (a body that is not `{"detail": ...}` is kept as text). Like the control plane
//! client's errors, nothing here holds the API key or a header: only the
//! status, the server's `detail` (with the key cut out) and at most
//! [`BODY_SNIPPET_BYTES`] of a body that did not decode.

use std::time::Duration;

use reqwest::StatusCode;

/// How many bytes of an undecodable body (or of a non-JSON error answer) an
/// error keeps.
pub const BODY_SNIPPET_BYTES: usize = 300;

/// An error of an agent server call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// 401 or 403: the key is missing, unknown, or not of the organization
    /// that owns the deployment (docs/control-plane-api.md "Agent server").
    #[error("agent server refused the credentials ({status}): {detail}")]
    Unauthorized {
        /// 401 or 403.
        status: u16,
        /// The server's `detail`.
        detail: String,
    },
    /// 404/422 of a run: the assistant (id or graph name) is unknown.
    #[error("assistant {assistant_id:?} not found on the agent server ({status}): {detail}")]
    AssistantNotFound {
        /// The `assistant_id` that was sent.
        assistant_id: String,
        /// 404 or 422.
        status: u16,
        /// The server's `detail`.
        detail: String,
    },
    /// 404 of anything else (e.g. a wrong base URL).
    #[error("not found on the agent server (404): {detail}")]
    NotFound {
        /// The server's `detail`.
        detail: String,
    },
    /// 400 or 422: the request failed validation.
    #[error("agent server rejected the request ({status}): {detail}")]
    Rejected {
        /// 400 or 422.
        status: u16,
        /// The server's `detail` (a validation error list as compact JSON).
        detail: String,
    },
    /// 429 or 503: slow down.
    #[error("agent server is busy or unavailable ({status}): {detail}")]
    Unavailable {
        /// 429 or 503.
        status: u16,
        /// The server's `detail`.
        detail: String,
    },
    /// Any other 5xx.
    #[error("agent server error ({status}): {detail}")]
    Server {
        /// The HTTP status.
        status: u16,
        /// The server's `detail`.
        detail: String,
    },
    /// Any other status.
    #[error("unexpected status {status} from the agent server: {detail}")]
    UnexpectedStatus {
        /// The HTTP status.
        status: u16,
        /// The server's `detail`.
        detail: String,
    },
    /// No answer (status line and headers) within the request timeout.
    #[error("agent server request timed out after {0:?}")]
    Timeout(Duration),
    /// A run stream sent nothing (not even a heartbeat) for the idle timeout.
    #[error("agent server stream sent nothing for {0:?}")]
    IdleTimeout(Duration),
    /// The connection failed (refused, reset, TLS, DNS) or dropped.
    #[error("agent server transport error: {0}")]
    Transport(String),
    /// A success answer that is not what docs/control-plane-api.md "Agent server" describe.
    #[error("cannot decode agent server answer: {message}; body starts with {snippet:?}")]
    Decode {
        /// What was wrong.
        message: String,
        /// First [`BODY_SNIPPET_BYTES`] bytes of the body, lossily decoded.
        snippet: String,
    },
    /// Paging of `/assistants/search` did not end within the bound, or the
    /// server sent a next offset that does not advance.
    #[error("assistant search paging: {0}")]
    Paging(String),
    /// The client configuration is not acceptable (URL, key as a header).
    #[error("invalid agent server client configuration: {0}")]
    InvalidConfig(String),
}

impl Error {
    /// True when the same request may succeed later without any change:
    /// timeouts, transport errors (a server that is down or restarting),
    /// 429/503 and other 5xx, and a 408. Everything else needs a change of
    /// the request, the key or the server first.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Timeout(_)
            | Error::IdleTimeout(_)
            | Error::Transport(_)
            | Error::Unavailable { .. }
            | Error::Server { .. } => true,
            Error::UnexpectedStatus { status, .. } => *status == 408,
            Error::Unauthorized { .. }
            | Error::AssistantNotFound { .. }
            | Error::NotFound { .. }
            | Error::Rejected { .. }
            | Error::Decode { .. }
            | Error::Paging(_)
            | Error::InvalidConfig(_) => false,
        }
    }

    /// HTTP status of the answer, if there was one.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Unauthorized { status, .. }
            | Error::AssistantNotFound { status, .. }
            | Error::Rejected { status, .. }
            | Error::Unavailable { status, .. }
            | Error::Server { status, .. }
            | Error::UnexpectedStatus { status, .. } => Some(*status),
            Error::NotFound { .. } => Some(404),
            _ => None,
        }
    }

    /// Maps a non-success answer to an error. `assistant_id` is set for a
    /// run: then a 404, or a 422 whose detail speaks of the assistant, is
    /// [`Error::AssistantNotFound`] naming it (docs/control-plane-api.md "Agent server": an
    /// unknown assistant is a 404/422 with a `detail` string).
    pub fn from_response(status: StatusCode, body: &[u8], assistant_id: Option<&str>) -> Self {
        let code = status.as_u16();
        let detail = detail_text(body);
        match (code, assistant_id) {
            (404, Some(a)) => Error::AssistantNotFound {
                assistant_id: a.to_owned(),
                status: code,
                detail,
            },
            (422, Some(a)) if detail.to_ascii_lowercase().contains("assistant") => {
                Error::AssistantNotFound {
                    assistant_id: a.to_owned(),
                    status: code,
                    detail,
                }
            }
            (401 | 403, _) => Error::Unauthorized {
                status: code,
                detail,
            },
            (404, None) => Error::NotFound { detail },
            (400 | 422, _) => Error::Rejected {
                status: code,
                detail,
            },
            (429 | 503, _) => Error::Unavailable {
                status: code,
                detail,
            },
            (500..=599, _) => Error::Server {
                status: code,
                detail,
            },
            _ => Error::UnexpectedStatus {
                status: code,
                detail,
            },
        }
    }

    /// Maps a reqwest failure (no answer) to an error, without the URL.
    pub fn from_reqwest(e: reqwest::Error, timeout: Duration) -> Self {
        if e.is_timeout() {
            return Error::Timeout(timeout);
        }
        Error::Transport(crate::controlplane::error::transport_text(e))
    }

    /// A success body that is not the expected JSON.
    pub fn decode(message: impl Into<String>, body: &[u8]) -> Self {
        Error::Decode {
            message: message.into(),
            snippet: snippet(body),
        }
    }
}

/// The `detail` of an error body: the string of `{"detail": "<string>"}`,
/// compact JSON of any other `detail` (a validation error list), or the body
/// text itself, cut to [`BODY_SNIPPET_BYTES`].
pub fn detail_text(body: &[u8]) -> String {
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(body)
        && let Some(d) = v.get("detail")
    {
        return match d {
            serde_json::Value::String(s) => cut(s),
            other => cut(&other.to_string()),
        };
    }
    snippet(body)
}

fn cut(s: &str) -> String {
    snippet(s.as_bytes())
}

/// First [`BODY_SNIPPET_BYTES`] bytes of a body, lossily decoded as UTF-8.
pub fn snippet(body: &[u8]) -> String {
    let end = body.len().min(BODY_SNIPPET_BYTES);
    String::from_utf8_lossy(&body[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses() {
        let e = Error::from_response(
            StatusCode::NOT_FOUND,
            br#"{"detail":"Assistant 'nope' not found"}"#,
            Some("nope"),
        );
        assert!(
            matches!(&e, Error::AssistantNotFound { assistant_id, .. } if assistant_id == "nope")
        );
        assert!(e.to_string().contains("\"nope\""), "{e}");
        assert!(!e.is_transient());
        let e = Error::from_response(
            StatusCode::UNPROCESSABLE_ENTITY,
            br#"{"detail":[{"loc":["body","input"],"msg":"bad"}]}"#,
            Some("agent"),
        );
        assert!(matches!(e, Error::Rejected { status: 422, .. }), "{e}");
        let e = Error::from_response(StatusCode::BAD_GATEWAY, b"<html>", None);
        assert!(e.is_transient());
        assert!(Error::Transport("refused".into()).is_transient());
        let e = Error::from_response(StatusCode::NOT_FOUND, b"", None);
        assert!(matches!(e, Error::NotFound { .. }));
        let e = Error::from_response(StatusCode::FORBIDDEN, b"{\"detail\":\"no\"}", None);
        assert_eq!(e.status(), Some(403));
        let long = vec![b'x'; 10_000];
        let e = Error::from_response(StatusCode::INTERNAL_SERVER_ERROR, &long, None);
        assert!(e.to_string().len() < BODY_SNIPPET_BYTES + 100);
    }
}
