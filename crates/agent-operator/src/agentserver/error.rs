//! The one error type of the agent server client.
//!
//! Source: docs/control-plane-api.md "Agent server" (an unknown assistant is a 404/422 with a
//! `detail` string; failures of a run arrive in the stream as event `error`
//! `{error, message}`; cloud deployments require `X-Api-Key`) and "Errors"
//! (a body that is not `{"detail": ...}` is kept as text). Like the control plane
//! client's errors, nothing here holds the API key or a header: only the
//! status and the server's `detail` in its known shapes (a string, or a
//! validation list whose `loc` and `msg` are kept), bounded to
//! [`MAX_DETAIL_BYTES`], with the key cut out. The agent server URL may be
//! chosen by whoever edits the resource, so no other text of an answer is
//! kept: another body is reported by its status code only
//! ([`crate::controlplane::error::NO_DETAIL`]-like [`NO_DETAIL`]), an
//! undecodable one by the decoder's position and category.

use std::time::Duration;

use reqwest::StatusCode;

/// Longest `detail` an error keeps, in bytes.
pub const MAX_DETAIL_BYTES: usize = crate::controlplane::error::MAX_DETAIL_BYTES;

/// The `detail` of an answer that is not the agent server's JSON error
/// shape: its body is not shown.
pub const NO_DETAIL: &str =
    "no detail (the answer is not the agent server's JSON error; its body is not shown)";

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
    /// Nothing of the body is kept.
    #[error("cannot decode agent server answer: {message}")]
    Decode {
        /// What was wrong, without any text of the body.
        message: String,
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
        Self::from_response_redacted(status, body, assistant_id, &[])
    }

    /// [`Error::from_response`] with every value of `secrets` (the API key)
    /// removed from the `detail` after it is decoded and before it is cut
    /// ([`crate::redact::text`]).
    pub fn from_response_redacted(
        status: StatusCode,
        body: &[u8],
        assistant_id: Option<&str>,
        secrets: &[secrecy::SecretString],
    ) -> Self {
        let code = status.as_u16();
        let detail = detail_text(body, secrets);
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

    /// A success body that is not what was expected: `message` says what,
    /// and must not quote the body (see
    /// [`crate::controlplane::error::json_error_text`] for a decoder's
    /// error).
    pub fn decode(message: impl Into<String>) -> Self {
        Error::Decode {
            message: message.into(),
        }
    }
}

/// The `detail` of an error body in the agent server's shapes, bounded to
/// [`MAX_DETAIL_BYTES`]: the string of `{"detail": "<string>"}`, or `loc:
/// msg` of each item of a validation list `{"detail": [{loc, msg, ...}]}`
/// (other members, such as the `input` pydantic repeats, are dropped);
/// [`NO_DETAIL`] for anything else. Every value of `secrets` is removed
/// from the decoded text before it is cut.
pub fn detail_text(body: &[u8], secrets: &[secrecy::SecretString]) -> String {
    use serde_json::Value;
    let bound = |s: String| crate::controlplane::error::bound(crate::redact::text(&s, secrets));
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return NO_DETAIL.to_owned();
    };
    match v.get("detail") {
        Some(Value::String(s)) => bound(s.clone()),
        Some(Value::Array(items)) if !items.is_empty() => {
            let parts: Vec<String> = items
                .iter()
                .take(crate::controlplane::error::MAX_VALIDATION_ERRORS)
                .filter_map(|item| {
                    let msg = item.get("msg")?.as_str()?;
                    let loc: Vec<String> = item
                        .get("loc")
                        .and_then(Value::as_array)
                        .map(|l| {
                            l.iter()
                                .map(|p| match p {
                                    Value::String(s) => s.clone(),
                                    Value::Number(n) => n.to_string(),
                                    _ => "…".to_owned(),
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    Some(format!("{}: {msg}", loc.join(".")))
                })
                .collect();
            if parts.is_empty() {
                NO_DETAIL.to_owned()
            } else {
                bound(parts.join("; "))
            }
        }
        _ => NO_DETAIL.to_owned(),
    }
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
        assert!(e.to_string().len() < MAX_DETAIL_BYTES + 100);
    }

    #[test]
    fn only_the_known_error_shapes_are_repeated() {
        // The agent server URL may be the user's choice (customUrl): an
        // internal service's answer must not reach conditions and events.
        for body in [
            &b"<html>internal console token=abc</html>"[..],
            b"{\"error\": \"token=abc\"}",
            b"{\"detail\": {\"token\": \"token=abc\"}}",
            b"{\"detail\": [{\"input\": \"token=abc\"}]}",
        ] {
            for status in [400, 401, 404, 422, 500, 503, 302] {
                let e = Error::from_response(StatusCode::from_u16(status).unwrap(), body, None);
                let text = format!("{e} {e:?}");
                assert!(!text.contains("token=abc"), "{status}: {text}");
                assert!(text.contains(NO_DETAIL), "{status}: {text}");
            }
        }
        let e = Error::from_response(
            StatusCode::UNPROCESSABLE_ENTITY,
            br#"{"detail":[{"type":"missing","loc":["body","input",0],"msg":"Field required","input":"token=abc"}]}"#,
            None,
        );
        assert_eq!(
            e.to_string(),
            "agent server rejected the request (422): body.input.0: Field required"
        );
        let e = Error::decode("GET /ok did not answer {\"ok\": true}");
        assert!(!format!("{e:?}").contains("body starts"));
    }
}
