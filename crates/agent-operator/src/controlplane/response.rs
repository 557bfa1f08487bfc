//! Turning one HTTP answer into a typed value or an [`Error`]: pure
//! functions, with no IO, so that they can be tested (and fuzzed) on any
//! status, header and body.
//!
//! Source: docs/control-plane-api.md "Errors" (the success status of each
//! operation, 201, 200 or 204; any other status is a failure; body shapes,
//! `Retry-After`; a body that is not `{"detail": ...}` is kept as text).

use reqwest::StatusCode;
use reqwest::header::HeaderValue;
use secrecy::SecretString;
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
    check_status_redacted(op, status, retry_after, body, &[])
}

/// [`check_status`] for an answer that may echo `secrets` (the API key,
/// the secret values the request carried): they are cut out of the raw
/// body ([`crate::redact::bytes`]) and again out of what the error keeps
/// once decoded ([`Error::from_response_redacted`]), so that a value the
/// service echoed with JSON escapes (`\"`, `\\`, `\uXXXX`, `\n`) or
/// one shorter than [`crate::redact::MIN_LEN`] (as a whole token) is gone
/// too. Never panics.
pub fn check_status_redacted(
    op: Operation,
    status: StatusCode,
    retry_after: Option<&HeaderValue>,
    body: &[u8],
    secrets: &[SecretString],
) -> Result<(), Error> {
    if op.success_statuses().contains(&status.as_u16()) {
        return Ok(());
    }
    let raw = crate::redact::bytes(bytes::Bytes::copy_from_slice(body), secrets);
    Err(Error::from_response_redacted(
        status,
        parse_retry_after(retry_after),
        &raw,
        secrets,
    ))
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
    use proptest::prelude::*;

    /// The error text of a 400 whose `detail` echoes `echoed`, redacted of
    /// `secret`.
    fn shown(secret: &str, body: &[u8]) -> String {
        let e = check_status_redacted(
            Operation::CreateDeployment,
            StatusCode::BAD_REQUEST,
            None,
            body,
            &[SecretString::from(secret)],
        )
        .unwrap_err();
        format!("{e} {e:?} {}", e.stable_summary())
    }

    #[test]
    fn echoed_secrets_are_cut_after_decoding() {
        // Found by the issue "Hardening": the raw pass missed a value the
        // service echoed JSON-escaped, and decoding then put it back.
        let secret = "pa\"ss\\wörd\n";
        for body in [
            r#"{"detail": "value pa\"ss\\wörd\n refused"}"#,
            r#"{"detail": "value pa\"ss\\w\u00f6rd\n refused"}"#,
            r#"{"detail": "value p\u0061\u0022ss\u005cw\u00F6rd\u000a refused"}"#,
        ] {
            let text = shown(secret, body.as_bytes());
            assert!(!text.contains("ss\\"), "{body}: {text}");
            assert!(!text.contains("rd\n"), "{body}: {text}");
            assert!(text.contains("value [REDACTED] refused"), "{body}: {text}");
        }
        // Short values go as tokens only: the rest of the detail stays.
        let text = shown("x7", br#"{"detail": "key 'x7' refused; x70 is fine"}"#);
        assert!(
            text.contains("key '[REDACTED]' refused; x70 is fine"),
            "{text}"
        );
        // Cut after redaction: no prefix of a value at the cut.
        let long = format!(r#"{{"detail": "{}sk-live-0123456789"}}"#, "a".repeat(290));
        let text = shown("sk-live-0123456789", long.as_bytes());
        assert!(!text.contains("sk-li"), "{text}");
        // Validation errors too.
        let body = br#"{"detail":[{"loc":["body","secrets",0,"value"],"msg":"bad value 'pa\"ss\\w\u00f6rd\n'","type":"value_error"}]}"#;
        let e = check_status_redacted(
            Operation::CreateDeployment,
            StatusCode::UNPROCESSABLE_ENTITY,
            None,
            body,
            &[SecretString::from(secret)],
        )
        .unwrap_err();
        assert!(e.to_string().contains("bad value '[REDACTED]'"), "{e}");
    }

    proptest! {
        /// Any value (quotes, backslashes, control and non-ASCII
        /// characters) of at least `MIN_LEN` bytes, echoed in a JSON detail
        /// with any escapes, is not in the error.
        #[test]
        fn echoed_secrets_never_reach_the_error(
            secret in proptest::collection::vec(any::<char>(), 4..16)
                .prop_map(|c| c.into_iter().collect::<String>()),
            ascii in any::<bool>(),
        ) {
            prop_assume!(!crate::redact::MARK.contains(secret.as_str()));
            let quoted = if ascii {
                // ensure_ascii, as Python's json.dumps writes.
                secret.chars().map(|c| if c.is_ascii() && !c.is_ascii_control() && c != '"' && c != '\\' {
                    c.to_string()
                } else {
                    let mut u = [0u16; 2];
                    c.encode_utf16(&mut u).iter().map(|x| format!("\\u{x:04x}")).collect()
                }).collect::<String>()
            } else {
                serde_json::to_string(&secret).unwrap().trim_matches('"').to_owned()
            };
            let body = format!(r#"{{"detail": "refused: {quoted}."}}"#);
            prop_assume!(serde_json::from_str::<serde_json::Value>(&body).is_ok());
            let text = shown(&secret, body.as_bytes());
            let reference = shown(&secret, br#"{"detail": "refused: ."}"#);
            prop_assume!(!reference.contains(secret.as_str()));
            prop_assert!(!text.contains(secret.as_str()), "{:?} in {:?}", secret, text);
        }
    }

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
