//! Removing known secret values from text that came from elsewhere: error
//! answers that echo the API key or a secret value, and log lines that may
//! print them. One helper for the control plane client, the agent server
//! client and the log tails in conditions and events.
//!
//! A plain substring replacement (no protocol: the texts are free-form), so
//! it removes only values it is given; values shorter than [`MIN_LEN`]
//! (`1`, `true`) are left, since they would blank out unrelated text and are
//! no secret worth the name.

use bytes::Bytes;
use secrecy::{ExposeSecret, SecretString};

/// What replaces a secret value.
pub const MARK: &str = "[REDACTED]";

/// Shortest value replaced, in bytes.
pub const MIN_LEN: usize = 4;

/// `text` with every occurrence of a value of `secrets` replaced by
/// [`MARK`].
pub fn text<'a>(text: &str, secrets: impl IntoIterator<Item = &'a SecretString>) -> String {
    let mut out = text.to_owned();
    for s in secrets {
        let needle = s.expose_secret();
        if needle.len() >= MIN_LEN && out.contains(needle) {
            out = out.replace(needle, MARK);
        }
    }
    out
}

/// `body` with every occurrence of a value of `secrets` replaced by
/// [`MARK`], byte for byte (the body need not be UTF-8); the same `Bytes`
/// when nothing matched.
pub fn bytes(body: Bytes, secrets: &[SecretString]) -> Bytes {
    let mut out: Vec<u8> = body.to_vec();
    let mut changed = false;
    for secret in secrets {
        let needle = secret.expose_secret().as_bytes();
        if needle.len() < MIN_LEN {
            continue;
        }
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
    if changed { Bytes::from(out) } else { body }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_long_values_only() {
        let key = SecretString::from("sk-abc-123");
        let short = SecretString::from("on");
        assert_eq!(
            text("bad key sk-abc-123, flag on", [&key, &short]),
            "bad key [REDACTED], flag on"
        );
        let b = bytes(Bytes::from_static(b"\xffsk-abc-123\xff"), &[key]);
        assert_eq!(&b[..], b"\xff[REDACTED]\xff");
        let same = Bytes::from_static(b"nothing");
        assert_eq!(bytes(same.clone(), &[short]), same);
    }
}
