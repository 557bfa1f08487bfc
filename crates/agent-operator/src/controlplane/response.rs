//! Turning one HTTP answer into a typed value or an [`Error`]: pure
//! functions, with no IO, so that they can be tested (and fuzzed) on any
//! status, header and body.
//!
//! Source: spec "Endpoints" (success statuses) and "Errors" ("Clients treat
//! any status other than the success status (201, 200 or 204 for the
//! operation) as a failure. The response text is the error detail."); facts
//! "Errors" (body shapes, `Retry-After`).

use reqwest::StatusCode;
use reqwest::header::HeaderValue;
use serde::de::DeserializeOwned;

use super::error::{Error, parse_retry_after};
use super::operation::Operation;

/// Checks the status of an answer to `op`: `Ok` for one of
/// [`Operation::success_statuses`], else the [`Error`] of the status and body
/// ([`Error::from_response`]), with `retry_after` parsed from the
/// `Retry-After` header value (seconds form). Never panics.
pub fn check_status(
    op: Operation,
    status: StatusCode,
    retry_after: Option<&HeaderValue>,
    body: &[u8],
) -> Result<(), Error> {
    if op.success_statuses().contains(&status.as_u16()) {
        Ok(())
    } else {
        Err(Error::from_response(
            status,
            parse_retry_after(retry_after),
            body,
        ))
    }
}

/// Decodes a success body as `T`; [`Error::Decode`] (where and what kind of
/// mismatch, never text of the body or a header) when it is not JSON of that
/// shape. Never panics.
pub fn decode_body<T: DeserializeOwned>(status: StatusCode, body: &[u8]) -> Result<T, Error> {
    serde_json::from_slice(body).map_err(|e| Error::decode(status, &e))
}

/// [`check_status`] then [`decode_body`]: the whole interpretation of an
/// answer to `op` whose success body is a `T`.
pub fn interpret<T: DeserializeOwned>(
    op: Operation,
    status: StatusCode,
    retry_after: Option<&HeaderValue>,
    body: &[u8],
) -> Result<T, Error> {
    check_status(op, status, retry_after, body)?;
    decode_body(status, body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controlplane::types::Deployment;

    #[test]
    fn only_the_documented_success_status_succeeds() {
        let ok = br#"{"id":"d","name":"n"}"#;
        assert!(
            interpret::<Deployment>(Operation::CreateDeployment, StatusCode::CREATED, None, ok)
                .is_ok()
        );
        let e = interpret::<Deployment>(Operation::CreateDeployment, StatusCode::OK, None, ok)
            .unwrap_err();
        assert!(
            matches!(e, Error::UnexpectedStatus { status: 200, .. }),
            "{e}"
        );
        let e = check_status(
            Operation::DeleteDeployment,
            StatusCode::MOVED_PERMANENTLY,
            None,
            b"",
        )
        .unwrap_err();
        assert!(matches!(e, Error::UnexpectedStatus { status: 301, .. }));
        let ra = HeaderValue::from_static("7");
        let e = check_status(
            Operation::GetDeployment,
            StatusCode::TOO_MANY_REQUESTS,
            Some(&ra),
            b"{}",
        )
        .unwrap_err();
        assert_eq!(e.retry_after(), Some(std::time::Duration::from_secs(7)));
        let e = interpret::<Deployment>(Operation::GetDeployment, StatusCode::OK, None, b"[1,")
            .unwrap_err();
        assert!(matches!(e, Error::Decode { status: 200, .. }));
    }
}
