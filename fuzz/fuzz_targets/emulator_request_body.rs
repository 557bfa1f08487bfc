//! Fuzz target: a request body (any bytes, any `Content-Type`) through the
//! emulator's FastAPI-style parsing and pydantic-style validation
//! (`emulator::validate_request_body`), for each validated route.
//!
//! Properties checked, beyond "never panics":
//! - a rejection is a 422 whose body is `{"detail": [...]}` with a `type`,
//!   a `msg` and a `loc` starting at `"body"` in every item, and the client
//!   decodes it (`controlplane::Error::from_response`) into the same number
//!   of validation errors with the same types: emulator and client agree on
//!   the wire shape;
//! - an accepted deployment body decodes into the wire crate's request type
//!   (`DeploymentCreate` / `DeploymentPatch`): validation is complete;
//! - validation is idempotent: an accepted, coerced body validates again
//!   to itself;
//! - a secret value planted in `secrets[].value` (of a JSON body, or spliced
//!   into raw bytes) never appears in a rejection.

#![no_main]

use agent_operator::controlplane::Error;
use control_plane_emulator::errors::ApiError;
use control_plane_emulator::{RequestBody, validate_request_body};
use control_plane_wire::types::{DeploymentCreate, DeploymentPatch};
use libfuzzer_sys::fuzz_target;
use reqwest::StatusCode;
use serde_json::{Value, json};

const SECRET: &str = "s3cr3tPLANTEDvalue-0123456789";
const LEAK: &str = "s3cr3t";

const KINDS: [RequestBody; 4] = [
    RequestBody::DeploymentCreate,
    RequestBody::DeploymentPatch,
    RequestBody::AssistantSearch,
    RequestBody::RunStream,
];

/// One request body.
struct Input<'a> {
    /// Index into [`KINDS`].
    kind: u8,
    /// `Content-Type` header, if sent.
    content_type: Option<&'a str>,
    /// Where to splice a secrets member into the raw bytes.
    splice_at: u16,
    /// Request body.
    body: &'a [u8],
}

impl<'a> Input<'a> {
    /// Input layout (readable seeds in fuzz/seeds/): `kind`, `splice_at`
    /// (two bytes, little-endian), `n`, then `n - 1` bytes of `Content-Type`
    /// when `n > 0` (not UTF-8: no header), then the body.
    fn parse(data: &'a [u8]) -> Option<Self> {
        let (&[kind, s0, s1, n], rest) = data.split_first_chunk::<4>()?;
        let (content_type, body) = match usize::from(n) {
            0 => (None, rest),
            n => {
                let (ct, body) = rest.split_at_checked(n - 1)?;
                (std::str::from_utf8(ct).ok(), body)
            }
        };
        Some(Self {
            kind,
            content_type,
            splice_at: u16::from_le_bytes([s0, s1]),
            body,
        })
    }
}

fuzz_target!(|data: &[u8]| {
    let Some(input) = Input::parse(data) else {
        return;
    };
    let kind = KINDS[usize::from(input.kind) % KINDS.len()];
    let ct = input.content_type;
    check(kind, ct, input.body);

    if count(input.body, LEAK) > 0 {
        // A leak could not be told from the input's own text.
        return;
    }
    // The same body with every secrets[].value replaced by the planted secret.
    if let Ok(mut v) = serde_json::from_slice::<Value>(input.body)
        && let Some(obj) = v.as_object_mut()
    {
        let secrets = obj
            .entry("secrets")
            .or_insert_with(|| json!([{ "name": "K" }]));
        if let Some(items) = secrets.as_array_mut() {
            for item in items.iter_mut().filter_map(Value::as_object_mut) {
                item.insert("value".into(), json!(SECRET));
            }
        }
        let planted = serde_json::to_vec(&v).expect("a Value encodes");
        if count(&planted, LEAK) > 0 {
            check_no_leak(kind, ct, &planted);
        }
    }
    // A secrets member spliced into the raw bytes, wherever that lands.
    let at = usize::from(input.splice_at) % (input.body.len() + 1);
    let mut spliced = input.body[..at].to_vec();
    spliced.extend_from_slice(br#""secrets":[{"name":"K","value":""#);
    spliced.extend_from_slice(SECRET.as_bytes());
    spliced.extend_from_slice(br#""}]"#);
    spliced.extend_from_slice(&input.body[at..]);
    check_no_leak(kind, ct, &spliced);
});

/// Validates `body` and checks the shape and completeness properties.
fn check(kind: RequestBody, ct: Option<&str>, body: &[u8]) {
    match validate_request_body(kind, ct, body) {
        Ok(value) => {
            match kind {
                RequestBody::DeploymentCreate => {
                    serde_json::from_value::<DeploymentCreate>(value.clone())
                        .expect("an accepted create body decodes");
                }
                RequestBody::DeploymentPatch => {
                    serde_json::from_value::<DeploymentPatch>(value.clone())
                        .expect("an accepted patch body decodes");
                }
                RequestBody::AssistantSearch | RequestBody::RunStream => {}
            }
            let text = serde_json::to_vec(&value).expect("a Value encodes");
            let again = validate_request_body(kind, Some("application/json"), &text)
                .expect("an accepted body is accepted again");
            assert_eq!(again, value, "validation is not idempotent");
        }
        Err(e) => check_rejection(&e),
    }
}

/// The wire-shape properties of a rejection, against the client's decoder.
fn check_rejection(e: &ApiError) {
    assert_eq!(
        e.status(),
        StatusCode::UNPROCESSABLE_ENTITY,
        "{:?}",
        e.body()
    );
    let items = e.body()["detail"].as_array().expect("detail is a list");
    assert!(!items.is_empty());
    for item in items {
        assert!(
            item["type"].is_string() && item["msg"].is_string(),
            "{item}"
        );
        assert_eq!(item["loc"][0], json!("body"), "{item}");
    }
    let wire = serde_json::to_vec(e.body()).expect("a Value encodes");
    match Error::from_response(e.status(), None, &wire) {
        Error::Validation { errors } => {
            assert_eq!(errors.len(), items.len());
            for (parsed, item) in errors.iter().zip(items) {
                assert_eq!(json!(parsed.kind), item["type"]);
            }
        }
        other => panic!("the client reads a 422 as {other}"),
    }
}

/// Validates a body that holds the planted secret; a rejection must not show it.
fn check_no_leak(kind: RequestBody, ct: Option<&str>, body: &[u8]) {
    if let Err(e) = validate_request_body(kind, ct, body) {
        let text = e.body().to_string();
        assert!(!text.contains(LEAK), "a rejection shows the secret: {text}");
        check_rejection(&e);
    }
}

fn count(haystack: &[u8], needle: &str) -> usize {
    haystack
        .windows(needle.len())
        .filter(|w| *w == needle.as_bytes())
        .count()
}
