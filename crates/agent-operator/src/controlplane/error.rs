//! The one error type of the control plane client.
//!
//! Status codes and body shapes follow docs/control-plane-api.md "Errors": 400/403/404/409
//! carry `{"detail": "<string>"}`, 422 carries an `HTTPValidationError`, and a
//! 429 or 503 may carry `Retry-After`. Nothing here ever holds the API key or a
//! request or response header: only the status, the `detail` (at most
//! [`MAX_DETAIL_BYTES`]), the `loc`, `msg` and `type` of validation errors, and
//! the parsed `Retry-After`. The body itself is never kept: the control plane
//! URL is chosen by whoever may create an AgentControlPlane, so an answer that
//! is not the service's JSON error shape (an HTML page, an internal service's
//! text) is reported by its status code only ([`NO_DETAIL`]), and an
//! undecodable success body by the decoder's position and category, not its
//! text ([`json_error_text`]).
//!
//! Every variant is classified by [`Error::is_transient`]: transient errors
//! may succeed when the same request is sent again later (the client retries
//! them for GET and DELETE, see [`super::retry`]); the others need a change
//! of the request, the configuration or the remote state first.

use std::time::Duration;

use reqwest::StatusCode;
use secrecy::SecretString;

use super::types::{ErrorDetail, HttpValidationError, ValidationError};

/// Longest `detail` (and validation `msg`) an error keeps, in bytes (cut on
/// a character boundary, with `…`).
pub const MAX_DETAIL_BYTES: usize = 300;

/// Most validation errors of a 422 an error keeps.
pub const MAX_VALIDATION_ERRORS: usize = 10;

/// The `detail` of an answer whose body is not the control plane's JSON
/// error shape: the body is not shown, the status says what happened.
pub const NO_DETAIL: &str =
    "no detail (the answer is not the control plane's JSON error; its body is not shown)";

/// An error of a control plane call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// 400: the service rejected the request (e.g. an immutable field changed).
    #[error("bad request (400): {detail}")]
    BadRequest {
        /// The service's `detail`.
        detail: String,
    },
    /// 401: the API key is missing or unknown.
    #[error("unauthorized (401): {detail}")]
    Unauthorized {
        /// The service's `detail`.
        detail: String,
    },
    /// 403: the key is not valid for the workspace, or the feature is not
    /// available to the organization.
    #[error("forbidden (403): {detail}")]
    Forbidden {
        /// The service's `detail`.
        detail: String,
    },
    /// 404: no such deployment, revision or listener.
    #[error("not found (404): {detail}")]
    NotFound {
        /// The service's `detail`, naming the missing id.
        detail: String,
    },
    /// 409: a conflicting resource exists.
    #[error("conflict (409): {detail}")]
    Conflict {
        /// The service's `detail`.
        detail: String,
    },
    /// 422: the request failed validation (`HTTPValidationError`).
    #[error("validation failed (422): {}", format_validation(.errors))]
    Validation {
        /// The parsed validation errors (loc, msg, type).
        errors: Vec<ValidationError>,
    },
    /// 429 or 503: slow down; retry after the given delay if the service gave one.
    /// Shown as "rate limited (429)" or "service unavailable (503)".
    #[error("{} ({status}){}", throttle_text(*.status), .retry_after.map(|d| format!(", retry after {} s", d.as_secs_f64())).unwrap_or_default())]
    RateLimited {
        /// 429 or 503.
        status: u16,
        /// Parsed `Retry-After` (seconds form).
        retry_after: Option<Duration>,
    },
    /// Any other 5xx.
    #[error("control plane server error ({status}): {detail}")]
    Server {
        /// The HTTP status.
        status: u16,
        /// The response text.
        detail: String,
    },
    /// A status the API does not document for this call.
    #[error("unexpected status {status}: {detail}")]
    UnexpectedStatus {
        /// The HTTP status.
        status: u16,
        /// The response text.
        detail: String,
    },
    /// Not sent: the control plane's request budget is paused by a
    /// `Retry-After`, or short of tokens, for longer than the caller waits
    /// (see [`super::ClientConfig::max_token_wait`]). Nothing reached the
    /// service; the same request may be sent after `retry_in`.
    #[error("not sent: the control plane's request budget allows the next request in {} s{}", .retry_in.as_secs_f64().ceil(), .cause.as_ref().map(|c| format!(" (slowed down by the last answer: {c})")).unwrap_or_default())]
    Deferred {
        /// When the budget expects to allow the request.
        retry_in: Duration,
        /// The stable summary ([`Error::stable_summary`]) of the service's
        /// answer that slowed the budget down (a 429, 502, 503, 504 or a
        /// timeout), while no success has followed it; `None`: the budget
        /// is short only because of the number of requests.
        cause: Option<String>,
    },
    /// The request did not complete within the per-request timeout.
    #[error("control plane request timed out")]
    Timeout,
    /// The connection failed (refused, reset, TLS, DNS).
    #[error("control plane transport error: {0}")]
    Transport(String),
    /// The body was not what the spec says. Nothing of the body is kept:
    /// `message` says where and what kind of mismatch
    /// ([`json_error_text`]).
    #[error("cannot decode control plane answer (status {status}): {message}")]
    Decode {
        /// The HTTP status.
        status: u16,
        /// What was wrong, without any text of the body.
        message: String,
    },
    /// The client configuration is not acceptable: the endpoint (e.g. plain
    /// HTTP to a non-loopback host without opt-in), the API key or workspace
    /// as header values, the CA bundle, or the rate limit. Permanent.
    #[error("invalid control plane endpoint: {0}")]
    InvalidEndpoint(String),
}

/// What a 403 says (docs/control-plane-api.md, "Credentials and refusals":
/// the Go CLI reads the same two details).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The detail contains "requires workspace specification": an
    /// organisation-scoped key sent without a workspace it accepts.
    WorkspaceRequired,
    /// The detail contains "not enabled": Deployment is off for the
    /// organisation.
    DeploymentNotEnabled,
    /// Any other 403 (a key of another workspace, a feature the plan lacks).
    Other,
}

impl Error {
    /// What a 403 says, from its detail (case-insensitive); `None` for any
    /// other error.
    pub fn refusal(&self) -> Option<Refusal> {
        let Error::Forbidden { detail } = self else {
            return None;
        };
        let d = detail.to_ascii_lowercase();
        Some(if d.contains("requires workspace specification") {
            Refusal::WorkspaceRequired
        } else if d.contains("not enabled") {
            Refusal::DeploymentNotEnabled
        } else {
            Refusal::Other
        })
    }

    /// True when the same request may succeed later without any change.
    ///
    /// Transient: [`Error::Timeout`], [`Error::Transport`] (refused, reset,
    /// dropped connection), [`Error::Server`] (5xx other than 503),
    /// [`Error::RateLimited`] (429, 503), [`Error::Deferred`] (not sent) and
    /// a 408 in
    /// [`Error::UnexpectedStatus`]. Permanent: every other 4xx (the request or
    /// the credentials must change), an unexpected status, an undecodable
    /// answer (the client and the service disagree on the shape) and an
    /// invalid configuration.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Timeout
            | Error::Transport(_)
            | Error::Server { .. }
            | Error::RateLimited { .. }
            | Error::Deferred { .. } => true,
            Error::UnexpectedStatus { status, .. } => *status == 408,
            Error::BadRequest { .. }
            | Error::Unauthorized { .. }
            | Error::Forbidden { .. }
            | Error::NotFound { .. }
            | Error::Conflict { .. }
            | Error::Validation { .. }
            | Error::Decode { .. }
            | Error::InvalidEndpoint(_) => false,
        }
    }

    /// True for a 404 (the deployment, revision or listener does not exist).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound { .. })
    }

    /// The delay the service asked for, if any (`Retry-After`).
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after_inner()
    }

    /// True for a definite rejection of the request itself: 400
    /// ([`Error::BadRequest`]), 409 ([`Error::Conflict`]) and 422
    /// ([`Error::Validation`]). The same request must not be sent again
    /// until something the user controls changes.
    pub fn is_rejection(&self) -> bool {
        matches!(
            self,
            Error::BadRequest { .. } | Error::Conflict { .. } | Error::Validation { .. }
        )
    }

    /// A short text of a transient error that is the same on every retry
    /// (no `Retry-After` seconds, no response body), for condition messages:
    /// a message that changed on each attempt would rewrite status each time.
    /// A connection refused for the server's certificate says so, with the
    /// verifier's verdict and the way to trust a private CA
    /// (docs/control-plane-api.md, "Hosts and headers").
    pub fn stable_summary(&self) -> String {
        match self {
            Error::Timeout => "timed out".into(),
            Error::Transport(text) => match certificate_failure(text) {
                Some(why) => format!(
                    "TLS: the control plane's certificate is not trusted (invalid peer \
                     certificate: {why}); if it is signed by a private CA, set \
                     spec.caBundleSecretRef to a Secret key holding that CA (PEM)"
                ),
                None => "connection failed".into(),
            },
            Error::Server { status, .. } => format!("server error ({status})"),
            Error::RateLimited { status, .. } => format!("{} ({status})", throttle_text(*status)),
            Error::UnexpectedStatus { status: 408, .. } => "request timeout (408)".into(),
            // The service's last answer stays the cause: a budget slowed
            // down by 503s must not read like a local throttle.
            Error::Deferred {
                cause: Some(cause), ..
            } => format!(
                "{cause} (the last answer; requests to this control plane are slowed down until it \
                 answers again)"
            ),
            Error::Deferred { cause: None, .. } => {
                "waiting for the control plane's request budget (many requests at once)".into()
            }
            other => other.to_string(),
        }
    }

    fn retry_after_inner(&self) -> Option<Duration> {
        match self {
            Error::RateLimited { retry_after, .. } => *retry_after,
            Error::Deferred { retry_in, .. } => Some(*retry_in),
            _ => None,
        }
    }

    /// HTTP status of the answer, if there was one.
    pub fn status(&self) -> Option<u16> {
        Some(match self {
            Error::BadRequest { .. } => 400,
            Error::Unauthorized { .. } => 401,
            Error::Forbidden { .. } => 403,
            Error::NotFound { .. } => 404,
            Error::Conflict { .. } => 409,
            Error::Validation { .. } => 422,
            Error::RateLimited { status, .. }
            | Error::Server { status, .. }
            | Error::UnexpectedStatus { status, .. }
            | Error::Decode { status, .. } => *status,
            Error::Timeout
            | Error::Transport(_)
            | Error::InvalidEndpoint(_)
            | Error::Deferred { .. } => return None,
        })
    }

    /// Maps a non-success answer to an error (docs/control-plane-api.md "Errors"). Only the
    /// parsed `detail` (or validation errors) of the service's JSON error
    /// shape is kept, bounded; any other body is replaced by [`NO_DETAIL`].
    pub fn from_response(status: StatusCode, retry_after: Option<Duration>, body: &[u8]) -> Self {
        Self::from_response_redacted(status, retry_after, body, &[])
    }

    /// [`Error::from_response`] with every value of `secrets` removed from
    /// what is kept ([`crate::redact::text`]): after the JSON is decoded (so
    /// whatever escapes the service used are undone) and before the text is
    /// cut to [`MAX_DETAIL_BYTES`] (so that no prefix of a value survives at
    /// the cut).
    pub fn from_response_redacted(
        status: StatusCode,
        retry_after: Option<Duration>,
        body: &[u8],
        secrets: &[SecretString],
    ) -> Self {
        let code = status.as_u16();
        let detail = || detail_text(body, secrets);
        match code {
            400 => Error::BadRequest { detail: detail() },
            401 => Error::Unauthorized { detail: detail() },
            403 => Error::Forbidden { detail: detail() },
            404 => Error::NotFound { detail: detail() },
            409 => Error::Conflict { detail: detail() },
            422 => match serde_json::from_slice::<HttpValidationError>(body) {
                Ok(v) => Error::Validation {
                    errors: v
                        .detail
                        .into_iter()
                        .take(MAX_VALIDATION_ERRORS)
                        .map(|e| bounded_validation(e, secrets))
                        .collect(),
                },
                // A 422 whose detail is a string: its text only, no
                // location or type to show.
                Err(_) => Error::Validation {
                    errors: vec![ValidationError {
                        loc: vec![],
                        msg: detail(),
                        kind: String::new(),
                    }],
                },
            },
            429 | 503 => Error::RateLimited {
                status: code,
                retry_after,
            },
            500..=599 => Error::Server {
                status: code,
                detail: detail(),
            },
            _ => Error::UnexpectedStatus {
                status: code,
                detail: detail(),
            },
        }
    }

    /// Maps a reqwest failure (no answer) to an error. The URL is dropped and
    /// only the failure kind and its causes are kept (reqwest errors never
    /// carry request headers, so the key cannot appear).
    pub fn from_reqwest(e: reqwest::Error) -> Self {
        if e.is_timeout() {
            return Error::Timeout;
        }
        Error::Transport(transport_text(e))
    }

    /// A decode failure of a success body: where and what kind, never the
    /// body's text ([`json_error_text`]).
    pub fn decode(status: StatusCode, err: &serde_json::Error) -> Self {
        Error::Decode {
            status: status.as_u16(),
            message: json_error_text(err),
        }
    }
}

/// The `detail` string of the service's error shape `{"detail": "<string>"}`,
/// cut to [`MAX_DETAIL_BYTES`]; [`NO_DETAIL`] for any other body. The spec
/// says "The response text is the error detail", but the URL is the user's
/// choice: text that is not the service's JSON is not repeated. Also the
/// rule of the LangSmith API's errors ([`crate::langsmith`]).
pub fn detail_text(body: &[u8], secrets: &[SecretString]) -> String {
    match serde_json::from_slice::<ErrorDetail>(body) {
        Ok(d) => bound(crate::redact::text(&d.detail, secrets)),
        Err(_) => NO_DETAIL.to_owned(),
    }
}

/// `text` cut to at most [`MAX_DETAIL_BYTES`] bytes on a character
/// boundary, with `…` when cut.
pub fn bound(mut text: String) -> String {
    if text.len() > MAX_DETAIL_BYTES {
        let mut end = MAX_DETAIL_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

/// A validation error with its `msg`, `type` and string `loc` items
/// redacted of `secrets`, then bounded.
fn bounded_validation(mut e: ValidationError, secrets: &[SecretString]) -> ValidationError {
    let clean = |s: &str| bound(crate::redact::text(s, secrets));
    e.msg = clean(&e.msg);
    e.kind = clean(&e.kind);
    e.loc.truncate(MAX_VALIDATION_ERRORS);
    for l in &mut e.loc {
        if let serde_json::Value::String(s) = l {
            *s = clean(s);
        } else if !l.is_number() {
            *l = serde_json::Value::String("…".into());
        }
    }
    e
}

/// What a JSON decoder error says without repeating the body: its kind and
/// position, and for a missing field the field's name (a name of this
/// client's types). serde's other messages quote the offending value
/// (`invalid type: string "…"`), which is text of the answer, so they are
/// not kept.
pub fn json_error_text(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let what = match e.classify() {
        Category::Io => "the answer could not be read".to_owned(),
        Category::Syntax => "not JSON".to_owned(),
        Category::Eof => "JSON cut short".to_owned(),
        Category::Data => {
            let text = e.to_string();
            match text
                .strip_prefix("missing field `")
                .and_then(|rest| rest.split_once('`'))
            {
                Some((field, _)) if field.len() <= 64 => format!("missing field `{field}`"),
                _ => "a value of an unexpected type or form".to_owned(),
            }
        }
    };
    format!("{what} at line {} column {}", e.line(), e.column())
}

/// The text of a failure without an answer (connect, TLS, reset): the
/// error without its URL, then each cause not already in it, joined with
/// `: `. Shared by the control plane and agent server clients.
pub fn transport_text(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// The part of a transport error text that says why the server's
/// certificate was refused (rustls: `invalid peer certificate: UnknownIssuer`,
/// `NotValidForName`, `Expired`, ...), if that is why the connection failed.
/// Stable across retries: it names the verdict, never the certificate.
fn certificate_failure(text: &str) -> Option<String> {
    const MARK: &str = "invalid peer certificate: ";
    let start = text.find(MARK)? + MARK.len();
    let verdict = &text[start..];
    // Up to the first detail that may change between attempts (times, ages).
    let end = verdict.find([':', ';', '(']).unwrap_or(verdict.len());
    let verdict = verdict[..end].trim();
    (!verdict.is_empty()).then(|| verdict.chars().take(120).collect())
}

/// The validation errors of a 422 as `location: message (type)`, joined
/// with `; `; an empty location, message or type is left out with its
/// separator (a 422 whose detail is a string has only a message), and so is
/// the placeholder type `unknown`.
fn format_validation(errors: &[ValidationError]) -> String {
    let text = errors
        .iter()
        .map(|e| {
            let loc = e
                .loc
                .iter()
                .map(|l| match l {
                    serde_json::Value::String(s) => s.trim().to_owned(),
                    other => other.to_string(),
                })
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join(".");
            let msg = e.msg.trim();
            let kind = e.kind.trim();
            let mut one = String::new();
            if !loc.is_empty() {
                one.push_str(&loc);
            }
            if !msg.is_empty() {
                if !one.is_empty() {
                    one.push_str(": ");
                }
                one.push_str(msg);
            }
            if !kind.is_empty() && kind != "unknown" {
                if !one.is_empty() {
                    one.push(' ');
                }
                one.push_str(&format!("({kind})"));
            }
            one
        })
        .filter(|one| !one.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    if text.is_empty() {
        "the service gave no detail".to_owned()
    } else {
        text
    }
}

/// Longest `Retry-After` the client accepts; a longer one is capped to it
/// (a broken or hostile answer must not park a caller for years).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// Parses `Retry-After` (RFC 9110, section 10.2.3): delay-seconds (a
/// fractional number is accepted too), or an HTTP-date, taken relative to
/// the local clock (a past date is a zero delay). `None` when absent or
/// unparsable; capped to [`MAX_RETRY_AFTER`]. Never panics.
pub fn parse_retry_after(value: Option<&reqwest::header::HeaderValue>) -> Option<Duration> {
    let s = value?.to_str().ok()?.trim();
    let delay = if let Ok(secs) = s.parse::<f64>() {
        if !(secs.is_finite() && secs >= 0.0) {
            return None;
        }
        Duration::try_from_secs_f64(secs).unwrap_or(MAX_RETRY_AFTER)
    } else {
        let at = chrono::DateTime::parse_from_rfc2822(s).ok()?;
        let wait = at.with_timezone(&chrono::Utc) - chrono::Utc::now();
        wait.to_std().unwrap_or(Duration::ZERO)
    };
    Some(delay.min(MAX_RETRY_AFTER))
}

/// What a throttling answer says: 429 asks to slow down; 503 says the
/// service is unavailable (an outage as often as a limit).
fn throttle_text(status: u16) -> &'static str {
    if status == 429 {
        "rate limited"
    } else {
        "service unavailable"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttling_answers_say_what_they_are() {
        let limited = Error::RateLimited {
            status: 429,
            retry_after: Some(Duration::from_secs(3)),
        };
        assert_eq!(limited.to_string(), "rate limited (429), retry after 3 s");
        assert_eq!(limited.stable_summary(), "rate limited (429)");
        let down = Error::RateLimited {
            status: 503,
            retry_after: None,
        };
        assert_eq!(down.to_string(), "service unavailable (503)");
        assert_eq!(down.stable_summary(), "service unavailable (503)");
    }

    #[test]
    fn maps_statuses_and_keeps_detail() {
        let e = Error::from_response(
            StatusCode::NOT_FOUND,
            None,
            br#"{"detail":"Deployment ID 42 not found."}"#,
        );
        assert!(
            matches!(&e, Error::NotFound { detail } if detail == "Deployment ID 42 not found.")
        );
        assert!(!e.is_transient());
        let e = Error::from_response(
            StatusCode::UNPROCESSABLE_ENTITY,
            None,
            br#"{"detail":[{"loc":["path","deployment_id"],"msg":"Input should be a valid UUID","type":"uuid_parsing"}]}"#,
        );
        assert_eq!(
            e.to_string(),
            "validation failed (422): path.deployment_id: Input should be a valid UUID (uuid_parsing)"
        );
        let e = Error::from_response(StatusCode::BAD_GATEWAY, None, b"<html>bad gateway</html>");
        assert!(e.is_transient());
        assert_eq!(
            e.to_string(),
            format!("control plane server error (502): {NO_DETAIL}")
        );
        let e = Error::from_response(
            StatusCode::TOO_MANY_REQUESTS,
            Some(Duration::from_secs(3)),
            b"",
        );
        assert_eq!(e.retry_after(), Some(Duration::from_secs(3)));
        assert!(e.is_transient());
    }

    #[test]
    fn every_variant_is_classified() {
        let d = || "d".to_owned();
        let permanent = [
            Error::BadRequest { detail: d() },
            Error::Unauthorized { detail: d() },
            Error::Forbidden { detail: d() },
            Error::NotFound { detail: d() },
            Error::Conflict { detail: d() },
            Error::Validation { errors: vec![] },
            Error::UnexpectedStatus {
                status: 302,
                detail: d(),
            },
            Error::Decode {
                status: 200,
                message: d(),
            },
            Error::InvalidEndpoint(d()),
        ];
        for e in &permanent {
            assert!(!e.is_transient(), "{e}");
        }
        let transient = [
            Error::Timeout,
            Error::Transport(d()),
            Error::Server {
                status: 502,
                detail: d(),
            },
            Error::RateLimited {
                status: 503,
                retry_after: None,
            },
            Error::UnexpectedStatus {
                status: 408,
                detail: d(),
            },
        ];
        for e in &transient {
            assert!(e.is_transient(), "{e}");
        }
        assert!(Error::NotFound { detail: d() }.is_not_found());
    }

    #[test]
    fn an_untrusted_certificate_is_named_in_the_stable_summary() {
        let e = Error::Transport(
            "error sending request: client error (Connect): invalid peer certificate: UnknownIssuer"
                .into(),
        );
        assert!(e.is_transient());
        let summary = e.stable_summary();
        assert!(
            summary.starts_with(
                "TLS: the control plane's certificate is not trusted (invalid peer certificate: \
                 UnknownIssuer); "
            ),
            "{summary}"
        );
        assert!(summary.contains("spec.caBundleSecretRef"), "{summary}");
        let expired = Error::Transport(
            "invalid peer certificate: certificate expired: verification time 1 (UNIX), but \
             certificate is not valid after 0 (1 seconds ago)"
                .into(),
        );
        assert!(
            expired
                .stable_summary()
                .contains("(invalid peer certificate: certificate expired)"),
            "{}",
            expired.stable_summary()
        );
        let refused = Error::Transport("tcp connect error: Connection refused".into());
        assert_eq!(refused.stable_summary(), "connection failed");
    }

    #[test]
    fn stable_summaries_of_transient_errors_ignore_the_body() {
        // Found by fuzz/ control_plane_answer: a 408 (transient) kept its
        // body in the summary, so a body that changed per attempt would
        // rewrite the condition message on every retry.
        for status in [408, 429, 500, 502, 503, 504] {
            let status = StatusCode::from_u16(status).unwrap();
            let a = Error::from_response(status, Some(Duration::from_secs(1)), b"attempt 1");
            let b = Error::from_response(status, None, b"attempt 2 \t,a\rf");
            assert!(a.is_transient());
            assert_eq!(a.stable_summary(), b.stable_summary());
            assert!(!a.stable_summary().contains("attempt"));
        }
    }

    #[test]
    fn bodies_that_are_not_the_service_shape_are_not_repeated() {
        // The control plane URL is the user's choice: an internal service's
        // answer must not be copied into conditions and events.
        for (status, body) in [
            (400, &b"<html>internal admin console: token=abc</html>"[..]),
            (403, b"{\"error\": \"internal: token=abc\"}"),
            (404, b"internal: token=abc"),
            (422, b"{\"detail\": {\"internal\": \"token=abc\"}}"),
            (500, b"internal: token=abc"),
            (302, b"internal: token=abc"),
        ] {
            let e = Error::from_response(StatusCode::from_u16(status).unwrap(), None, body);
            let text = format!("{e} {e:?}");
            assert!(!text.contains("token=abc"), "{status}: {text}");
            assert!(text.contains(&status.to_string()), "{status}: {text}");
            assert!(text.contains(NO_DETAIL), "{status}: {text}");
        }
        // The service's own shape is kept, bounded.
        let long = format!("{{\"detail\": \"{}\"}}", "é".repeat(1000));
        let e = Error::from_response(StatusCode::BAD_REQUEST, None, long.as_bytes());
        let Error::BadRequest { detail } = &e else {
            panic!("{e}")
        };
        assert!(
            detail.len() <= MAX_DETAIL_BYTES + '…'.len_utf8(),
            "{}",
            detail.len()
        );
        assert!(detail.ends_with('…'));
        let many = serde_json::json!({"detail": (0..50).map(|i| serde_json::json!(
            {"loc": ["body", "x".repeat(1000)], "msg": "m".repeat(1000), "type": format!("t{i}")}
        )).collect::<Vec<_>>()});
        let e = Error::from_response(
            StatusCode::UNPROCESSABLE_ENTITY,
            None,
            many.to_string().as_bytes(),
        );
        let Error::Validation { errors } = &e else {
            panic!("{e}")
        };
        assert_eq!(errors.len(), MAX_VALIDATION_ERRORS);
        assert!(
            e.to_string().len() < MAX_VALIDATION_ERRORS * 1000,
            "{}",
            e.to_string().len()
        );
    }

    #[test]
    fn decode_errors_never_repeat_the_body() {
        let body = br#"{"id":"x","secrets":[{"name":"K","value":"sk-live-123"}],"status":7}"#;
        let e = Error::decode(
            StatusCode::OK,
            &serde_json::from_slice::<u8>(body).unwrap_err(),
        );
        assert!(!format!("{e} {e:?}").contains("sk-live-123"));
        // serde quotes the offending value in its own message.
        let err = serde_json::from_slice::<Vec<u8>>(br#""sk-live-123""#).unwrap_err();
        assert!(err.to_string().contains("sk-live-123"));
        let text = json_error_text(&err);
        assert!(!text.contains("sk-live-123"), "{text}");
        assert_eq!(
            text,
            "a value of an unexpected type or form at line 1 column 13"
        );
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Needs {
            id: String,
        }
        let err = serde_json::from_slice::<Needs>(br#"{"other": "sk-live-123"}"#).unwrap_err();
        assert_eq!(
            json_error_text(&err),
            "missing field `id` at line 1 column 24"
        );
        let err = serde_json::from_slice::<Needs>(b"<html>").unwrap_err();
        assert_eq!(json_error_text(&err), "not JSON at line 1 column 1");
        let err = serde_json::from_slice::<Needs>(br#"{"id": "x"#).unwrap_err();
        assert!(json_error_text(&err).starts_with("JSON cut short"));
    }

    #[test]
    fn retry_after_forms() {
        use reqwest::header::HeaderValue;
        let p = |s: &str| parse_retry_after(Some(&HeaderValue::from_str(s).unwrap()));
        assert_eq!(p("3"), Some(Duration::from_secs(3)));
        assert_eq!(p(" 1.5 "), Some(Duration::from_millis(1500)));
        assert_eq!(p("-1"), None);
        assert_eq!(p("NaN"), None);
        assert_eq!(p("soon"), None);
        assert_eq!(p("20000000000000000000"), Some(MAX_RETRY_AFTER));
        assert_eq!(p("Wed, 21 Oct 2015 07:28:00 GMT"), Some(Duration::ZERO));
        let later = (chrono::Utc::now() + chrono::Duration::seconds(120)).to_rfc2822();
        let d = p(&later).unwrap();
        assert!(
            d > Duration::from_secs(100) && d <= Duration::from_secs(120),
            "{d:?}"
        );
        assert_eq!(parse_retry_after(None), None);
    }

    #[test]
    fn long_bodies_are_cut() {
        let body = vec![b'x'; 10_000];
        let e = Error::from_response(StatusCode::INTERNAL_SERVER_ERROR, None, &body);
        assert!(e.to_string().len() < MAX_DETAIL_BYTES + 100);
    }
}
