//! The key of `status.secretsHash` (the hash itself, pure, is
//! [`crate::plan::secrets_hash`]), kept in a Secret of the operator's own.
//!
//! - **The key**: 32 random bytes under `key` in the Secret
//!   [`DEFAULT_SECRET_NAME`] of the operator's namespace (`POD_NAMESPACE`,
//!   the downward API, as for the leader Lease; `--hash-key-namespace`),
//!   read when this replica starts to reconcile (after it acquired the
//!   leader Lease, with leader election) and created once if missing
//!   ([`load_or_create`]).
//! - **Rotation**: delete the Secret; the next replica to start reconciling
//!   (a restart, `kubectl rollout restart`, or a leader change) makes a new
//!   key. Then no stored hash verifies, and each AgentDeployment with
//!   secrets sends them once more: one PATCH (a new revision) each, after
//!   which its status holds a hash of the new key and nothing more is sent.
//!   A replica running on the old key keeps it until it restarts.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::PostParams;

pub use crate::plan::secrets_hash::{
    HashKey, KEY_BYTES, PREFIX, Stored, legacy_hash, legacy_matches,
};

/// Default name of the operator's Secret holding the key
/// (`--hash-key-secret`).
pub const DEFAULT_SECRET_NAME: &str = "agent-operator-hash-key";

/// The key of the Secret's `data` holding the 32 key bytes.
pub const DATA_KEY: &str = "key";

/// Why the key could not be had.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The Secret exists but holds no usable key.
    #[error(
        "Secret {namespace}/{name} has no {KEY_BYTES}-byte data key {DATA_KEY:?}: {why}; delete it to have a new key made (each AgentDeployment then sends its secrets once)"
    )]
    Malformed {
        /// Namespace of the Secret.
        namespace: String,
        /// Name of the Secret.
        name: String,
        /// What is wrong with it.
        why: String,
    },
    /// The API server refused or failed, after retries.
    #[error(
        "reading or creating Secret {namespace}/{name} (the secrets hash key; RBAC: get on that Secret, create on secrets, in the operator's namespace): {source}"
    )]
    Api {
        /// Namespace of the Secret.
        namespace: String,
        /// Name of the Secret.
        name: String,
        /// The last error.
        source: kube::Error,
    },
}

/// The key in the Secret `name` of `namespace`, created with a random key
/// when it does not exist (a concurrent create by another replica is read
/// back). API errors other than a refusal (401, 403) are retried for about
/// 30 s.
///
/// Errors: [`KeyError::Malformed`] for a Secret without a 32-byte `key`;
/// [`KeyError::Api`] when the API server refuses or keeps failing.
pub async fn load_or_create(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<HashKey, KeyError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let api_error = |source| KeyError::Api {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        source,
    };
    let mut attempt = 0u32;
    loop {
        match try_load_or_create(&api, namespace, name).await {
            Ok(r) => return r,
            Err(e) => {
                let refused = matches!(&e, kube::Error::Api(s) if s.code == 401 || s.code == 403);
                attempt += 1;
                if refused || attempt >= 10 {
                    return Err(api_error(e));
                }
                tracing::warn!(error = %e, attempt, "reading the secrets hash key; retrying");
                tokio::time::sleep(Duration::from_secs(3)).await;
            }
        }
    }
}

/// One attempt of [`load_or_create`]: `Err` for an API error (retried).
async fn try_load_or_create(
    api: &Api<Secret>,
    namespace: &str,
    name: &str,
) -> Result<Result<HashKey, KeyError>, kube::Error> {
    if let Some(secret) = api.get_opt(name).await? {
        return Ok(key_of(&secret, namespace, name));
    }
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/managed-by": "agent-operator"},
            "annotations": {
                "agentserver.dev/purpose": "The key of the HMAC in AgentDeployment status.secretsHash. Deleting it rotates the key: each AgentDeployment then sends its secrets once (docs/SECURITY.md)."
            }
        },
        "type": "Opaque",
        "immutable": true,
        "data": {DATA_KEY: base64_of(&rand::random::<[u8; KEY_BYTES]>())}
    }))
    .unwrap_or_default();
    match api.create(&PostParams::default(), &secret).await {
        Ok(created) => {
            tracing::info!(namespace, name, "created the secrets hash key Secret");
            Ok(key_of(&created, namespace, name))
        }
        // Another replica made it first: use theirs.
        Err(kube::Error::Api(s)) if s.code == 409 => match api.get_opt(name).await? {
            Some(secret) => Ok(key_of(&secret, namespace, name)),
            None => Err(kube::Error::Api(s)),
        },
        Err(e) => Err(e),
    }
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn key_of(secret: &Secret, namespace: &str, name: &str) -> Result<HashKey, KeyError> {
    let malformed = |why: String| KeyError::Malformed {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        why,
    };
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(DATA_KEY))
        .ok_or_else(|| malformed("no such key".into()))?;
    let key = HashKey::from_bytes(&bytes.0).map_err(malformed)?;
    tracing::info!(namespace, name, key_id = key.id(), "secrets hash key read");
    Ok(key)
}
