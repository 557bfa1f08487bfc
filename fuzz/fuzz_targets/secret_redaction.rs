//! Fuzz target: a secret value of arbitrary bytes (lossily decoded, as a
//! Secret's data may hold anything) reaches the control plane client's
//! decoders in an answer, two ways:
//!
//! - **planted**: a deployment answer carries it at `secrets[].value`
//!   (docs/control-plane-api.md "Deployment": `secrets` is `[{name, value}]`), with any other
//!   members, the `secrets` member at any position, compact or pretty, alone
//!   or in a list page, cut at any byte and answered with any status;
//! - **echoed**: an error answer repeats it in its `detail`, in one of the
//!   forms a service writes: JSON-escaped by the encoder, `\uXXXX` for every
//!   non-ASCII character (Python's `json.dumps`), JSON embedded in the
//!   message (escaped twice), Python's `repr` (pydantic), in a validation
//!   error's `msg`, or a body that is not JSON; cut at any byte, any status.
//!
//! Property: the text (`Display`), the `Debug` and the stable summary of the
//! resulting error do not contain the value (for a value shorter than
//! `redact::MIN_LEN` bytes: not as the quoted token the answer echoed), nor
//! the first six bytes of a planted value; unless the same error built
//! without the value already shows that text (the value is then part of the
//! error's own words, e.g. a value `request`).

#![no_main]

use agent_operator::controlplane::Operation;
use agent_operator::controlplane::response::{check_status_redacted, decode_body};
use agent_operator::redact::{MARK, MIN_LEN};
use control_plane_wire::types::{Deployment, Page};
use libfuzzer_sys::fuzz_target;
use reqwest::StatusCode;
use secrecy::SecretString;
use serde_json::{Value, json};

/// One generated answer.
struct Input<'a> {
    /// Echo the value in an error's detail (else plant it in a deployment).
    echo: bool,
    /// The echo form (see [`echoed_body`]).
    form: u8,
    /// The secret value.
    secret: String,
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
    /// Input layout (readable seeds in fuzz/seeds/): `mode` (bit 0 echo,
    /// bits 1-3 the echo form), `n`, then `n % 32 + 1` bytes of the secret
    /// value (lossily decoded as UTF-8), then `op`, `status` (two bytes,
    /// little-endian), `position`, flags (bit 0 pretty, bit 1 page),
    /// `other_secrets`, `cut` (two bytes, little-endian), then the members.
    fn parse(data: &'a [u8]) -> Option<Self> {
        let (&[mode, n], rest) = data.split_first_chunk::<2>()?;
        let (secret, rest) = rest.split_at_checked(usize::from(n % 32) + 1)?;
        let (&[op, s0, s1, position, flags, other_secrets, c0, c1], members) =
            rest.split_first_chunk::<8>()?;
        Some(Self {
            echo: mode & 1 != 0,
            form: (mode >> 1) % 7,
            secret: String::from_utf8_lossy(secret).into_owned(),
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
    if input.secret.is_empty() || MARK.contains(input.secret.as_str()) {
        return;
    }
    let op = Operation::ALL[usize::from(input.op) % Operation::ALL.len()];
    let Ok(status) = StatusCode::from_u16(input.status) else {
        return;
    };
    if input.echo {
        echoed(&input, op, status);
    } else {
        planted(&input, op, status);
    }
});

/// The error text `check` gives for the answer `body`, all of it.
fn shown(
    op: Operation,
    status: StatusCode,
    page: bool,
    body: &[u8],
    secrets: &[SecretString],
) -> Option<String> {
    let error = match check_status_redacted(op, status, None, body, secrets) {
        Err(e) => Some(e),
        Ok(()) if page => decode_body::<Page<Deployment>>(status, body).err(),
        Ok(()) => decode_body::<Deployment>(status, body).err(),
    }?;
    Some(format!("{error} {error:?} {}", error.stable_summary()))
}

/// Asserts that `text` does not show `needle`, unless `reference` (the
/// same error without the value) does.
fn assert_hidden(text: &str, reference: &str, needle: &str, what: &str) {
    if needle.is_empty() || reference.contains(needle) {
        return;
    }
    assert!(!text.contains(needle), "{what} shows {needle:?}: {text}");
}

/// A deployment answer with the value at `secrets[].value`: no error built
/// from it shows the value or its first bytes, with or without the value
/// among the secrets the request carried (the decoders never show a body's
/// text).
fn planted(input: &Input<'_>, op: Operation, status: StatusCode) {
    let Some(body) = build_body(input, &input.secret) else {
        return;
    };
    let Some(neutral) = build_body(input, "\u{1}") else {
        return;
    };
    let cut = |b: &str| {
        let end = usize::from(input.cut).min(b.len());
        b.as_bytes()[..end].to_vec()
    };
    let (body, neutral) = (cut(&body), cut(&neutral));
    let prefix: String = input.secret.chars().take(6).collect();
    for secrets in [vec![], vec![SecretString::from(input.secret.clone())]] {
        let Some(text) = shown(op, status, input.page, &body, &secrets) else {
            continue;
        };
        let reference = shown(op, status, input.page, &neutral, &secrets).unwrap_or_default();
        assert_hidden(&text, &reference, &input.secret, "the error");
        if prefix.len() >= MIN_LEN {
            assert_hidden(&text, &reference, &prefix, "the error");
        }
    }
}

/// `value` with every non-ASCII character (and `"`, `\`, control
/// characters) as `\uXXXX`, as Python's `json.dumps` writes a string.
fn ensure_ascii(value: &str) -> String {
    let mut out = String::new();
    for c in value.chars() {
        if c.is_ascii() && !c.is_ascii_control() && c != '"' && c != '\\' {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out
}

/// `value` as Python's `repr` writes the inside of a string.
fn python_repr(value: &str) -> String {
    let mut out = String::new();
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\'' => out.push_str("\\'"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out
}

/// The text of the value inside a JSON string, as serde writes it.
fn json_inner(value: &str) -> String {
    let quoted = serde_json::to_string(value).expect("a string encodes");
    quoted[1..quoted.len() - 1].to_owned()
}

/// An error answer whose detail repeats `value` in `form`, between quotes.
fn echoed_body(form: u8, value: &str) -> String {
    let detail = |inner: String| format!("{{\"detail\": \"value '{inner}' refused\"}}");
    match form {
        // The encoder's escapes.
        0 => detail(json_inner(value)),
        // Python's json.dumps.
        1 => detail(ensure_ascii(value)),
        // JSON embedded in the message: escaped once more by the encoder.
        2 => detail(json_inner(&json_inner(value))),
        // pydantic quoting the input with repr.
        3 => detail(json_inner(&python_repr(value))),
        // A validation error's msg.
        4 => format!(
            "{{\"detail\": [{{\"loc\": [\"body\", \"secrets\", 0, \"value\"], \"msg\": \"value '{}' refused\", \"type\": \"value_error\"}}]}}",
            json_inner(value)
        ),
        // The raw value in a JSON string (invalid JSON when it holds `"`).
        5 => format!("{{\"detail\": \"value '{value}' refused\"}}"),
        // Not JSON.
        _ => format!("value '{value}' refused"),
    }
}

/// An error answer echoing the value: the error does not show it (a short
/// value: not as the quoted token), given the value as a secret the request
/// carried.
fn echoed(input: &Input<'_>, op: Operation, status: StatusCode) {
    let secrets = [SecretString::from(input.secret.clone())];
    let cut = |b: String| {
        let end = usize::from(input.cut).min(b.len());
        b.into_bytes()[..end].to_vec()
    };
    let body = cut(echoed_body(input.form, &input.secret));
    let Some(text) = shown(op, status, false, &body, &secrets) else {
        return;
    };
    // The same answer echoing a value of the same length that matches
    // nothing: what the error says anyway.
    let neutral: String = "\u{2}".repeat(input.secret.chars().count());
    let reference = shown(
        op,
        status,
        false,
        &cut(echoed_body(input.form, &neutral)),
        &secrets,
    )
    .unwrap_or_default();
    if input.secret.len() >= MIN_LEN {
        assert_hidden(&text, &reference, &input.secret, "the error");
        for form in [
            json_inner(&input.secret),
            ensure_ascii(&input.secret),
            python_repr(&input.secret),
        ] {
            if form.len() >= MIN_LEN {
                assert_hidden(&text, &reference, &form, "the error");
            }
        }
    } else {
        assert_hidden(
            &text,
            &reference,
            &format!("'{}'", input.secret),
            "the error",
        );
    }
}

/// The body text with `value` planted, or `None` when the generated
/// members already contain it (then no leak could be told apart).
fn build_body(input: &Input<'_>, value: &str) -> Option<String> {
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
    secrets.insert(at, json!({ "name": "API_KEY", "value": value }));
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
    // Nothing but the planted value may contain it.
    let encoded = json_inner(value);
    (body.matches(encoded.as_str()).count() == 1).then_some(body)
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
