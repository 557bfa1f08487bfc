//! Fuzz target: one control plane answer (operation, status, `Retry-After`
//! header, body) through the client's pure decoders, in the order
//! `ControlPlaneClient` applies them (`check_status`, then `decode_body` of
//! the operation's success type).
//!
//! Properties checked, beyond "never panics":
//! - an error keeps the answer's status; it is transient exactly for 408,
//!   429 and 5xx, a rejection exactly for 400, 409 and 422, and only a 429 or
//!   503 carries a `Retry-After`, never longer than `MAX_RETRY_AFTER`;
//! - the `stable_summary` of a transient error depends on the status only
//!   (not on the body or `Retry-After`), so condition messages stay put;
//! - an undecodable success body is a `Decode` error whose message is short
//!   (where and what kind of mismatch, never text of the body: the control
//!   plane URL is the user's choice);
//! - a decoded value is a fixed point of encode -> decode -> encode.

#![no_main]

use agent_operator::controlplane::error::{MAX_RETRY_AFTER, parse_retry_after};
use agent_operator::controlplane::response::{check_status, decode_body};
use agent_operator::controlplane::{Error, Operation};
use control_plane_wire::types::{
    Deployment, GithubIntegration, GithubRepository, Listener, LogPage, Page, Revision,
};
use libfuzzer_sys::fuzz_target;
use reqwest::StatusCode;
use reqwest::header::HeaderValue;
use serde_json::Value;

/// One answer as the transport hands it to the decoders.
struct Answer<'a> {
    /// Index into `Operation::ALL`.
    op: u8,
    /// HTTP status (only 100..=999 exist as `StatusCode`).
    status: u16,
    /// Raw `Retry-After` header value, if sent.
    retry_after: Option<&'a [u8]>,
    /// Response body.
    body: &'a [u8],
}

impl<'a> Answer<'a> {
    /// Input layout (readable seeds in fuzz/seeds/): `op`, `status` (two
    /// bytes, little-endian), `n`, then `n - 1` bytes of `Retry-After` when
    /// `n > 0`, then the body.
    fn parse(data: &'a [u8]) -> Option<Self> {
        let (&[op, lo, hi, n], rest) = data.split_first_chunk::<4>()?;
        let (retry_after, body) = match usize::from(n) {
            0 => (None, rest),
            n => {
                let (value, body) = rest.split_at_checked(n - 1)?;
                (Some(value), body)
            }
        };
        Some(Self {
            op,
            status: u16::from_le_bytes([lo, hi]),
            retry_after,
            body,
        })
    }
}

fuzz_target!(|data: &[u8]| {
    let Some(a) = Answer::parse(data) else {
        return;
    };
    let op = Operation::ALL[usize::from(a.op) % Operation::ALL.len()];
    let Ok(status) = StatusCode::from_u16(a.status) else {
        return;
    };
    let retry_after = a.retry_after.and_then(|b| HeaderValue::from_bytes(b).ok());
    if let Some(d) = parse_retry_after(retry_after.as_ref()) {
        assert!(d <= MAX_RETRY_AFTER, "{d:?}");
    }
    match check_status(op, status, retry_after.as_ref(), a.body) {
        Err(e) => check_error(&e, status),
        Ok(()) => match op {
            Operation::CreateDeployment
            | Operation::GetDeployment
            | Operation::PatchDeployment
            | Operation::RedeployRevision => round_trip::<Deployment>(status, a.body),
            Operation::ListDeployments => round_trip::<Page<Deployment>>(status, a.body),
            Operation::Redeploy | Operation::GetRevision => round_trip::<Revision>(status, a.body),
            Operation::ListRevisions => round_trip::<Page<Revision>>(status, a.body),
            Operation::GetListener => round_trip::<Listener>(status, a.body),
            Operation::ListListeners => round_trip::<Page<Listener>>(status, a.body),
            Operation::ListIntegrations => round_trip::<Vec<GithubIntegration>>(status, a.body),
            Operation::ListIntegrationRepos => round_trip::<Vec<GithubRepository>>(status, a.body),
            Operation::BuildLogs | Operation::DeployLogs => round_trip::<LogPage>(status, a.body),
            Operation::DeleteDeployment => {}
        },
    }
});

/// The classification properties of a non-success answer.
fn check_error(e: &Error, status: StatusCode) {
    let code = status.as_u16();
    assert_eq!(e.status(), Some(code), "{e}");
    let transient = code == 408 || code == 429 || (500..=599).contains(&code);
    assert_eq!(e.is_transient(), transient, "{e}");
    assert_eq!(e.is_rejection(), matches!(code, 400 | 409 | 422), "{e}");
    if let Some(d) = e.retry_after() {
        assert!(matches!(code, 429 | 503), "{e}");
        assert!(d <= MAX_RETRY_AFTER, "{d:?}");
    }
    if transient {
        let bare = Error::from_response(status, None, b"");
        assert_eq!(e.stable_summary(), bare.stable_summary());
    }
    let _ = format!("{e} {e:?}");
}

/// Decodes `body` as a `T`; on success, checks encode -> decode -> encode.
fn round_trip<T: serde::Serialize + serde::de::DeserializeOwned>(status: StatusCode, body: &[u8]) {
    match decode_body::<T>(status, body) {
        Ok(value) => {
            let first: Value = serde_json::to_value(&value).expect("a decoded answer encodes");
            let again: T =
                serde_json::from_value(first.clone()).expect("an encoded answer decodes");
            let second = serde_json::to_value(&again).expect("it encodes again");
            assert_eq!(first, second);
        }
        Err(e) => {
            assert_eq!(e.status(), Some(status.as_u16()));
            match &e {
                Error::Decode { message, .. } => {
                    assert!(message.len() <= 120, "{message:?}")
                }
                other => panic!("a success body failed with {other}"),
            }
        }
    }
}
