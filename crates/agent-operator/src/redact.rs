//! Removing known secret values from text that came from elsewhere: error
//! answers that echo the API key or a secret value, and log lines that may
//! print them. One helper for the control plane client, the agent server
//! client and the log tails in conditions and events.
//!
//! A plain replacement (no protocol: the texts are free-form) of the values
//! it is given, in each form a service is likely to echo them:
//!
//! - as is;
//! - JSON-escaped (`"` → `\"`, `\` → `\\`, control characters → `\n`,
//!   `\u0001`...), as a service that embeds JSON in its message writes it;
//! - JSON-escaped with every non-ASCII character as `\uXXXX` (surrogate
//!   pairs above U+FFFF; lowercase and uppercase hex), as Python's
//!   `json.dumps` writes it by default;
//! - backslash-escaped as Python's `repr` writes a string (`\\`, `\n`, `\r`,
//!   `\t`, `\xNN` for other control characters, `\'`), as pydantic's
//!   validation messages quote an input.
//!
//! Callers redact the *decoded* text (the `detail` after JSON decoding), so
//! every escape form of the outer JSON is already undone; the forms above
//! catch a value embedded escaped inside that text.
//!
//! Values of at least [`MIN_LEN`] bytes are replaced wherever they occur.
//! Shorter values (`1`, `on`, `ab3`) would blank out unrelated text that
//! merely contains them, so they are replaced only as a *whole token*: an
//! occurrence is replaced when the text has no word character (a letter,
//! digit or `_`) right before it (if the value begins with one) and right
//! after it (if the value ends with one). `flag on` loses `on`; `only`,
//! `once` and `ion` keep theirs. A value with no word character at its ends
//! (`"`, `!!`) is replaced wherever it occurs. An empty value is never
//! replaced.

use bytes::Bytes;
use secrecy::{ExposeSecret, SecretString};

/// What replaces a secret value.
pub const MARK: &str = "[REDACTED]";

/// Shortest value replaced wherever it occurs, in bytes; shorter values are
/// replaced as whole tokens only (see the module docs).
pub const MIN_LEN: usize = 4;

/// True for the characters a token is made of.
fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `value` JSON-escaped (without the quotes); with `ascii`, every non-ASCII
/// character as `\uXXXX` too, `upper` choosing the case of the hex digits.
fn json_escaped(value: &str, ascii: bool, upper: bool) -> String {
    let mut out = String::with_capacity(value.len() + 8);
    let hex = |u: u16| {
        if upper {
            format!("\\u{u:04X}")
        } else {
            format!("\\u{u:04x}")
        }
    };
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&hex(c as u16)),
            c if ascii && !c.is_ascii() => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    out.push_str(&hex(*u));
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// `value` backslash-escaped as Python's `repr` writes the inside of a
/// string (both quotes escaped: `repr` escapes the one it quotes with).
fn repr_escaped(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 8);
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

/// The forms of `value` to look for (see the module docs), distinct,
/// longest first (so that a longer form is replaced before a shorter one
/// inside it).
pub fn forms(value: &str) -> Vec<String> {
    let mut all = vec![
        value.to_owned(),
        json_escaped(value, false, false),
        json_escaped(value, true, false),
        json_escaped(value, true, true),
        repr_escaped(value),
    ];
    all.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    all.dedup();
    all.retain(|f| !f.is_empty());
    all
}

/// `text` with every occurrence of `needle` replaced by [`MARK`]; with
/// `whole_token`, only the occurrences that are whole tokens.
fn replace(text: &str, needle: &str, whole_token: bool) -> Option<String> {
    let first_word = needle.chars().next().is_some_and(is_word);
    let last_word = needle.chars().next_back().is_some_and(is_word);
    let mut out = String::with_capacity(text.len());
    let mut rest = 0;
    let mut changed = false;
    let mut from = 0;
    while let Some(found) = text[from..].find(needle) {
        let at = from + found;
        let end = at + needle.len();
        let token = !whole_token
            || ((!first_word || !text[..at].chars().next_back().is_some_and(is_word))
                && (!last_word || !text[end..].chars().next().is_some_and(is_word)));
        if token {
            out.push_str(&text[rest..at]);
            out.push_str(MARK);
            rest = end;
            from = end;
            changed = true;
        } else {
            // The next occurrence may start inside this one.
            from = at + needle.chars().next().map_or(1, char::len_utf8);
        }
    }
    if !changed {
        return None;
    }
    out.push_str(&text[rest..]);
    Some(out)
}

/// `text` with every form of every value of `secrets` replaced by [`MARK`]
/// (values shorter than [`MIN_LEN`] as whole tokens only; see the module
/// docs).
pub fn text<'a>(text: &str, secrets: impl IntoIterator<Item = &'a SecretString>) -> String {
    let mut out = text.to_owned();
    for s in secrets {
        let value = s.expose_secret();
        if value.is_empty() {
            continue;
        }
        let whole_token = value.len() < MIN_LEN;
        for form in forms(value) {
            if let Some(replaced) = replace(&out, &form, whole_token) {
                out = replaced;
            }
        }
    }
    out
}

/// `body` with every form of every value of `secrets` of at least
/// [`MIN_LEN`] bytes replaced by [`MARK`], byte for byte (the body need not
/// be UTF-8); the same `Bytes` when nothing matched.
///
/// The raw pass before a body is decoded: shorter values are left to
/// [`text`] on the decoded strings, since replacing a one-byte value in the
/// raw body would mostly break its JSON. Callers decode the body, then run
/// [`text`] on what they keep: the escape forms of JSON are undone by then.
pub fn bytes(body: Bytes, secrets: &[SecretString]) -> Bytes {
    let mut out: Vec<u8> = body.to_vec();
    let mut changed = false;
    for secret in secrets {
        let value = secret.expose_secret();
        if value.len() < MIN_LEN {
            continue;
        }
        for form in forms(value) {
            let needle = form.as_bytes();
            let mut i = 0;
            let mut next = Vec::with_capacity(out.len());
            while i < out.len() {
                if out[i..].starts_with(needle) {
                    next.extend_from_slice(MARK.as_bytes());
                    i += needle.len();
                    changed = true;
                } else {
                    next.push(out[i]);
                    i += 1;
                }
            }
            out = next;
        }
    }
    if changed { Bytes::from(out) } else { body }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn s(v: &str) -> SecretString {
        SecretString::from(v)
    }

    #[test]
    fn long_values_everywhere_short_values_as_tokens() {
        let key = s("sk-abc-123");
        let short = s("on");
        assert_eq!(
            text("bad key sk-abc-123, flag on, only once", [&key, &short]),
            "bad key [REDACTED], flag [REDACTED], only once"
        );
        let b = bytes(Bytes::from_static(b"\xffsk-abc-123\xff"), &[key]);
        assert_eq!(&b[..], b"\xff[REDACTED]\xff");
        let same = Bytes::from_static(b"nothing on");
        assert_eq!(bytes(same.clone(), &[short]), same);
        // A short value of punctuation goes wherever it is.
        assert_eq!(text("a!!b !! c", [&s("!!")]), "a[REDACTED]b [REDACTED] c");
        // Short values between punctuation, at the ends, repeated.
        assert_eq!(
            text("1 revision 1; 12 x1 1_ (1)", [&s("1")]),
            "[REDACTED] revision [REDACTED]; 12 x1 1_ ([REDACTED])"
        );
        assert_eq!(text("anything", [&s("")]), "anything");
        // An occurrence that is not a token does not hide the next one.
        assert_eq!(text("abab ab", [&s("ab")]), "abab [REDACTED]");
    }

    #[test]
    fn escaped_forms_are_found_in_decoded_text() {
        let tricky = s("p\"a\\ss\nw\u{1}ö😀");
        for echoed in [
            // JSON embedded in a message.
            r#"value "p\"a\\ss\nw\u0001ö😀" refused"#.to_owned(),
            // Python json.dumps (ensure_ascii).
            r#"value "p\"a\\ss\nw\u0001\u00f6\ud83d\ude00" refused"#.to_owned(),
            r#"value "p\"a\\ss\nw\u0001\u00F6\uD83D\uDE00" refused"#.to_owned(),
            // Python repr, as pydantic quotes an input.
            "input_value='p\"a\\\\ss\\nw\\x01ö😀'".to_owned(),
            // As is.
            "value p\"a\\ss\nw\u{1}ö😀 refused".to_owned(),
        ] {
            let out = text(&echoed, [&tricky]);
            assert!(out.contains(MARK), "{echoed:?} -> {out:?}");
            assert!(!out.contains("ss"), "{echoed:?} -> {out:?}");
        }
        assert_eq!(repr_escaped("it's"), "it\\'s");
    }

    /// A value of any characters, as a Secret may hold (lossily decoded
    /// bytes included).
    fn arb_secret() -> impl Strategy<Value = String> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 1..24)
                .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
            "[\"\\\\\\n\\t\\u{0}-\\u{1f}a-zé😀' ]{1,16}",
            any::<String>(),
        ]
        .prop_filter("not empty", |v| !v.is_empty())
    }

    proptest! {
        /// A value of [`MIN_LEN`] bytes or more, echoed inside a JSON
        /// `detail` in any of its forms, is gone from the decoded detail
        /// once redacted.
        #[test]
        fn long_values_never_survive_decoding(
            secret in arb_secret(),
            before in "[a-z :]{0,10}",
            after in "[a-z :]{0,10}",
            form in 0usize..5,
        ) {
            prop_assume!(secret.len() >= MIN_LEN && !MARK.contains(secret.as_str()));
            prop_assume!(!before.contains(secret.as_str()) && !after.contains(secret.as_str()));
            let echoed = match form {
                0 => secret.clone(),
                1 => json_escaped(&secret, false, false),
                2 => json_escaped(&secret, true, false),
                3 => json_escaped(&secret, true, true),
                _ => repr_escaped(&secret),
            };
            let detail = format!("{before}{echoed}{after}");
            // The service's answer, JSON-encoded by serde (any escape form
            // of the outer JSON decodes to the same string).
            let body = serde_json::json!({"detail": detail}).to_string();
            let decoded: serde_json::Value = serde_json::from_str(&body).unwrap();
            let shown = text(decoded["detail"].as_str().unwrap(), [&s(&secret)]);
            prop_assert!(!shown.contains(secret.as_str()), "{:?} in {:?}", secret, shown);
            prop_assert!(!shown.contains(echoed.as_str()), "{:?} in {:?}", echoed, shown);
        }

        /// A short value echoed as a token is gone; the text around it is
        /// kept as it was.
        #[test]
        fn short_values_go_as_tokens_and_the_rest_stays(
            secret in "[a-z0-9\"\\\\!é]{1,3}",
            before in "[A-Z]{1,5}",
            after in "[A-Z]{1,5}",
        ) {
            prop_assume!(!before.contains(secret.as_str()) && !after.contains(secret.as_str()));
            let detail = format!("{before} '{secret}' {after}");
            let shown = text(&detail, [&s(&secret)]);
            prop_assert!(!shown.contains(&format!("'{secret}'")), "{:?}", shown);
            prop_assert!(shown.starts_with(&format!("{before} ")), "{:?}", shown);
            prop_assert!(shown.ends_with(&format!(" {after}")), "{:?}", shown);
        }
    }
}
