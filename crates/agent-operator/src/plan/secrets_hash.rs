//! `status.secretsHash`: a keyed hash (HMAC-SHA256) of the secret names and
//! values last sent (pure; the operator keeps the key in a Secret of its
//! own, `controller::hash_key`).
//!
//! The status tells the operator that a referenced Secret changed without
//! keeping any value. It used to be `salt:sha256(salt‖names‖values)`, with
//! the salt next to it: whoever may read the status (often more people than
//! may read Secrets) could test guesses of a low-entropy value offline, one
//! SHA-256 each. An HMAC under a key nobody but the operator reads makes a
//! guess untestable without the key.
//!
//! - **Format**: `hmac-sha256:<key id>:<64 hex>`, the key id being the
//!   first 4 bytes (hex) of `sha256("agent-operator secrets hash key id" ‖
//!   key)`, which tells which key made a hash without saying anything
//!   usable about the key.
//! - **The old format** (`salt:sha256`, 32 and 64 hex digits) is accepted
//!   once: when it still matches the current values it is taken as
//!   unchanged ([`Stored::LegacyMatches`]), no PATCH is sent, and the next
//!   status write stores the HMAC; when it does not match, the values
//!   changed and are sent, as before.

use std::fmt;
use std::sync::Arc;

use hmac::{Hmac, Mac};
use secrecy::{ExposeSecret, SecretSlice};
use sha2::{Digest, Sha256};

use crate::controlplane::types::SecretValue;

/// Length of the key, in bytes.
pub const KEY_BYTES: usize = 32;

/// Prefix of a hash in the current format.
pub const PREFIX: &str = "hmac-sha256:";

/// The key of the HMAC of `status.secretsHash`. Cheap to clone; `Debug`
/// shows the key id only.
#[derive(Clone)]
pub struct HashKey {
    key: Arc<SecretSlice<u8>>,
    id: String,
}

impl fmt::Debug for HashKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HashKey")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// What a stored `status.secretsHash` says about the current values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stored {
    /// An HMAC of this key over these values.
    Matches,
    /// The old salted SHA-256 format, over these values: unchanged; the
    /// status is to be rewritten with the HMAC.
    LegacyMatches,
    /// Anything else: the values changed, or the key did (the hash carries
    /// another key id), or nothing usable is stored.
    Differs,
}

impl HashKey {
    /// A key of these bytes. Errors: not [`KEY_BYTES`] bytes long.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() != KEY_BYTES {
            return Err(format!(
                "the key is {} bytes long, not {KEY_BYTES}",
                bytes.len()
            ));
        }
        let mut h = Sha256::new();
        h.update(b"agent-operator secrets hash key id");
        h.update(bytes);
        let id = hex::encode(&h.finalize()[..4]);
        Ok(Self {
            key: Arc::new(SecretSlice::from(bytes.to_vec())),
            id,
        })
    }

    /// A fresh random key, kept nowhere: for a process that stores no hash
    /// across runs (`agentctl`, tests of the controllers in-process), or
    /// until the operator's stored key replaced it (`controller::hash_key`).
    pub fn random() -> Self {
        Self::from_bytes(&rand::random::<[u8; KEY_BYTES]>()).unwrap_or_else(|_| unreachable!())
    }

    /// The key id (8 hex digits) carried by every hash of this key.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// `hmac-sha256:<key id>:<hex>` of the names and values of `secrets`
    /// (order-independent, each length-prefixed).
    pub fn secrets_hash(&self, secrets: &[SecretValue]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(self.key.expose_secret())
            .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
        feed(secrets, |part| mac.update(part));
        format!(
            "{PREFIX}{}:{}",
            self.id,
            hex::encode(mac.finalize().into_bytes())
        )
    }

    /// What `stored` says about `secrets` (see [`Stored`]).
    pub fn check(&self, stored: &str, secrets: &[SecretValue]) -> Stored {
        if stored.starts_with(PREFIX) {
            if self.secrets_hash(secrets) == stored {
                Stored::Matches
            } else {
                Stored::Differs
            }
        } else if legacy_matches(stored, secrets) {
            Stored::LegacyMatches
        } else {
            Stored::Differs
        }
    }

    /// True when `stored` is an HMAC of another key (the key was rotated).
    pub fn is_of_another_key(&self, stored: &str) -> bool {
        stored
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split_once(':'))
            .is_some_and(|(id, _)| id != self.id)
    }
}

/// Feeds the names and values of `secrets`, sorted by name, each preceded
/// by its length (the encoding of both formats).
fn feed(secrets: &[SecretValue], mut update: impl FnMut(&[u8])) {
    let mut sorted: Vec<&SecretValue> = secrets.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    for s in sorted {
        update(&(s.name.len() as u64).to_le_bytes());
        update(s.name.as_bytes());
        let v = s.value.expose_secret();
        update(&(v.len() as u64).to_le_bytes());
        update(v.as_bytes());
    }
}

/// True when `stored` is the old format `salt:hex(sha256(salt‖names‖values))`
/// (a 32-hex-digit salt, 64 hex digits) over `secrets`.
pub fn legacy_matches(stored: &str, secrets: &[SecretValue]) -> bool {
    let Some((salt, digest)) = stored.split_once(':') else {
        return false;
    };
    let hex_of = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex_of(salt, 32) || !hex_of(digest, 64) {
        return false;
    }
    let mut h = Sha256::new();
    h.update(salt.as_bytes());
    feed(secrets, |part| h.update(part));
    hex::encode(h.finalize()) == digest.to_ascii_lowercase()
}

/// The old `salt:sha256` of `secrets` with `salt`, as earlier versions
/// stored it (for tests of the migration).
pub fn legacy_hash(salt: &str, secrets: &[SecretValue]) -> String {
    let mut h = Sha256::new();
    h.update(salt.as_bytes());
    feed(secrets, |part| h.update(part));
    format!("{salt}:{}", hex::encode(h.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pairs: &[(&str, &str)]) -> Vec<SecretValue> {
        pairs
            .iter()
            .map(|(n, v)| SecretValue::new(*n, *v))
            .collect()
    }

    #[test]
    fn the_hmac_is_keyed_stable_and_order_independent() {
        let key = HashKey::from_bytes(&[7u8; 32]).unwrap();
        let a = values(&[("A", "1"), ("B", "two")]);
        let b = values(&[("B", "two"), ("A", "1")]);
        let h = key.secrets_hash(&a);
        assert_eq!(h, key.secrets_hash(&b));
        assert!(h.starts_with(&format!("hmac-sha256:{}:", key.id())), "{h}");
        assert_eq!(h.len(), PREFIX.len() + 8 + 1 + 64);
        assert_eq!(key.check(&h, &a), Stored::Matches);
        assert_eq!(
            key.check(&h, &values(&[("A", "1"), ("B", "too")])),
            Stored::Differs
        );
        // Names and values are delimited: moving a byte across changes it.
        assert_ne!(
            key.secrets_hash(&values(&[("AB", "c")])),
            key.secrets_hash(&values(&[("A", "Bc")]))
        );
        // Another key: another hash, told apart by its id.
        let other = HashKey::from_bytes(&[8u8; 32]).unwrap();
        assert_ne!(other.id(), key.id());
        assert_eq!(other.check(&h, &a), Stored::Differs);
        assert!(other.is_of_another_key(&h));
        assert!(!key.is_of_another_key(&h));
        // A known HMAC-SHA256 vector (RFC 4231, case 2) through the same
        // primitive.
        let mut mac = Hmac::<Sha256>::new_from_slice(b"Jefe").unwrap();
        mac.update(b"what do ya want for nothing?");
        assert_eq!(
            hex::encode(mac.finalize().into_bytes()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert!(HashKey::from_bytes(&[1u8; 31]).is_err());
        assert!(!format!("{key:?}").contains("7, 7"));
    }

    #[test]
    fn a_guess_cannot_be_tested_without_the_key() {
        // What the old format allowed: recompute sha256(salt‖names‖values)
        // for a guessed value and compare. The HMAC matches no such guess,
        // with any salt the status shows.
        let key = HashKey::random();
        let secrets = values(&[("OPENAI_API_KEY", "1234")]);
        let stored = key.secrets_hash(&secrets);
        let shown: Vec<&str> = stored.split(':').collect();
        for salt in &shown {
            assert_ne!(legacy_hash(salt, &secrets), stored);
            assert!(!legacy_matches(&format!("{salt}:{}", shown[2]), &secrets));
        }
    }

    #[test]
    fn the_old_format_is_accepted_once_when_it_still_matches() {
        let key = HashKey::random();
        let secrets = values(&[("A", "old")]);
        let salt = "00112233445566778899aabbccddeeff";
        let old = legacy_hash(salt, &secrets);
        assert_eq!(key.check(&old, &secrets), Stored::LegacyMatches);
        assert_eq!(key.check(&old, &values(&[("A", "new")])), Stored::Differs);
        // Not the old shape: not accepted.
        for bad in [
            "salt:abc",
            "no-colon",
            "",
            &format!("{salt}:{}", "0".repeat(64)),
        ] {
            assert_eq!(key.check(bad, &secrets), Stored::Differs, "{bad:?}");
        }
        assert!(!key.is_of_another_key(&old));
    }
}
