//! Fuzz target: a deployment answer that carries a planted secret value
//! (facts "Deployment": `secrets` is `[{name, value}]`), with any other
//! members, the `secrets` member at any position, compact or pretty, alone
//! or in a list page, cut at any byte and answered with any status, goes
//! through the client's decoders.
//!
//! Property: neither the text (`Display`) nor the `Debug` of the resulting
//! error contains the secret value or even its first bytes (the decoders
//! never show a body's text: `controlplane::error`).

#![no_main]

use agent_operator::controlplane::Operation;
use agent_operator::controlplane::response::{check_status, decode_body};
use agent_operator::controlplane::types::{Deployment, Page};
use libfuzzer_sys::fuzz_target;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// The planted value; no other part of a generated body contains its first
/// bytes ([`LEAK`]), inputs where one does are skipped.
const SECRET: &str = "s3cr3tPLANTEDvalue-0123456789";
/// What must not appear anywhere in an error: the secret's first bytes.
const LEAK: &str = "s3cr3t";

/// One generated answer.
struct Input<'a> {
    /// Index into `Operation::ALL`.
    op: u8,
    /// HTTP status of the answer.
    status: u16,
    /// Position of the `secrets` member among the others, and of the
    /// planted entry among the other entries.
    position: u8,
    /// Pretty-printed (with newlines and indentation) rather than compact.
    pretty: bool,
    /// Wrap the deployment in a list page `{"resources": [...], "offset": n}`.
    page: bool,
    /// How many other entries `secrets` has.
    other_secrets: u8,
    /// Keep only this many bytes of the body (all of it when longer).
    cut: u16,
    /// The other members of the deployment: used when it is a JSON object.
    members: &'a [u8],
}

impl<'a> Input<'a> {
    /// Input layout (readable seeds in fuzz/seeds/): `op`, `status` (two
    /// bytes, little-endian), `position`, flags (bit 0 pretty, bit 1 page),
    /// `other_secrets`, `cut` (two bytes, little-endian), then the members.
    fn parse(data: &'a [u8]) -> Option<Self> {
        let (&[op, s0, s1, position, flags, other_secrets, c0, c1], members) =
            data.split_first_chunk::<8>()?;
        Some(Self {
            op,
            status: u16::from_le_bytes([s0, s1]),
            position,
            pretty: flags & 1 != 0,
            page: flags & 2 != 0,
            other_secrets: other_secrets % 4,
            cut: u16::from_le_bytes([c0, c1]),
            members,
        })
    }
}

fuzz_target!(|data: &[u8]| {
    let Some(input) = Input::parse(data) else {
        return;
    };
    let Some(body) = build_body(&input) else {
        return;
    };
    let end = usize::from(input.cut).min(body.len());
    let body = &body.as_bytes()[..end];
    let op = Operation::ALL[usize::from(input.op) % Operation::ALL.len()];
    let Ok(status) = StatusCode::from_u16(input.status) else {
        return;
    };
    let error = match check_status(op, status, None, body) {
        Err(e) => Some(e),
        Ok(()) if input.page => decode_body::<Page<Deployment>>(status, body).err(),
        Ok(()) => decode_body::<Deployment>(status, body).err(),
    };
    if let Some(e) = error {
        let text = format!("{e} {e:?} {}", e.stable_summary());
        assert!(!text.contains(LEAK), "the error shows the secret: {text}");
    }
});

/// The body text, or `None` when the generated members already contain
/// [`LEAK`] (then no leak could be told apart).
fn build_body(input: &Input<'_>) -> Option<String> {
    let mut members: Vec<(String, Value)> = match serde_json::from_slice::<Value>(input.members) {
        Ok(Value::Object(map)) => map.into_iter().collect(),
        _ => vec![
            ("id".into(), json!("0b8c3a8e-0000-4000-8000-000000000000")),
            ("name".into(), json!(String::from_utf8_lossy(input.members))),
        ],
    };
    let mut secrets: Vec<Value> = (0..input.other_secrets)
        .map(|i| json!({ "name": format!("OTHER_{i}"), "value": format!("other value {i}") }))
        .collect();
    let at = usize::from(input.position) % (secrets.len() + 1);
    secrets.insert(at, json!({ "name": "API_KEY", "value": SECRET }));
    let at = usize::from(input.position) % (members.len() + 1);
    members.insert(at, ("secrets".into(), Value::Array(secrets)));
    let deployment = object_text(&members, input.pretty);
    let body = match (input.page, input.pretty) {
        (false, _) => deployment,
        (true, false) => format!("{{\"resources\":[{deployment}],\"offset\":1}}"),
        (true, true) => format!(
            "{{\n  \"resources\": [\n    {}\n  ],\n  \"offset\": 1\n}}",
            deployment.replace('\n', "\n    ")
        ),
    };
    // Nothing but the planted value may contain the marker.
    (body.matches(LEAK).count() == 1).then_some(body)
}

/// A JSON object with its members in the given order (serde_json's `Map`
/// would sort them), compact or pretty.
fn object_text(members: &[(String, Value)], pretty: bool) -> String {
    let encode = |v: &Value| {
        if pretty {
            serde_json::to_string_pretty(v)
        } else {
            serde_json::to_string(v)
        }
        .expect("a Value encodes")
    };
    let parts: Vec<String> = members
        .iter()
        .map(|(k, v)| {
            let key = encode(&Value::String(k.clone()));
            if pretty {
                format!("  {key}: {}", encode(v).replace('\n', "\n  "))
            } else {
                format!("{key}:{}", encode(v))
            }
        })
        .collect();
    if pretty {
        format!("{{\n{}\n}}", parts.join(",\n"))
    } else {
        format!("{{{}}}", parts.join(","))
    }
    .replace("{\n\n}", "{}")
}
