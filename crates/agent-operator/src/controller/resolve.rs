//! Reads the Secrets an `AgentDeployment` references (the AgentControlPlane
//! and its client come from [`super::planes::ClientCache`]). Only
//! the Secrets actually referenced are read.
//!
//! A missing object is not an error of the operator but of the input: it comes
//! back as [`Blocked`], which the reconciler writes to status (`Ready=False`
//! with a reason naming what is missing) instead of failing.

use crate::api::conditions::reason;
use crate::api::deployment::AgentDeploymentSpec;
use crate::controller::error::Error;
use crate::controller::secrets::Secrets;
use crate::controlplane::types::SecretValue;
use k8s_openapi::api::core::v1::Secret;

/// An input that is missing or unusable; reported in status, not retried fast.
#[derive(Clone, Debug, PartialEq)]
pub struct Blocked {
    /// Condition reason (a constant of [`reason`]).
    pub reason: &'static str,
    /// Message naming the missing object.
    pub message: String,
}

/// The value of `key` in `secret` (the Secret `namespace/name`) as UTF-8:
/// `data` (already base64-decoded), else `stringData`. Pure: shared by the
/// operator (a Secret read from the cluster) and `agentctl apply` (a Secret
/// document of the same file, see [`crate::converge`]).
///
/// Errors: `SecretNotFound` when `secret` is `None` ("Secret ns/name not
/// found") or has no such key.
pub fn key_value(
    secret: Option<&Secret>,
    namespace: &str,
    name: &str,
    key: &str,
) -> Result<String, Blocked> {
    let Some(secret) = secret else {
        return Err(Blocked {
            reason: reason::SECRET_NOT_FOUND,
            message: format!("Secret {namespace}/{name} not found"),
        });
    };
    let value = secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .or_else(|| {
            secret
                .string_data
                .as_ref()
                .and_then(|d| d.get(key))
                .cloned()
        });
    value.ok_or_else(|| Blocked {
        reason: reason::SECRET_NOT_FOUND,
        message: missing_key(namespace, name, key, key_names(secret)),
    })
}

/// The key names of `secret` (`data` and `stringData`), sorted, without
/// their values. Pure.
pub fn key_names(secret: &Secret) -> std::collections::BTreeSet<&str> {
    secret
        .data
        .iter()
        .flat_map(|d| d.keys())
        .chain(secret.string_data.iter().flat_map(|d| d.keys()))
        .map(String::as_str)
        .collect()
}

/// Most key names [`missing_key`] lists.
pub const MAX_LISTED_KEYS: usize = 10;

/// The message of a Secret `namespace/name` that has no `key`: it names
/// the keys the Secret has (`present`, names only, never a value; the
/// first [`MAX_LISTED_KEYS`] in their order, then how many more), so that
/// a misspelt key is seen at once. Pure.
pub fn missing_key<'a>(
    namespace: &str,
    name: &str,
    key: &str,
    present: impl IntoIterator<Item = &'a str>,
) -> String {
    let present: Vec<&str> = present.into_iter().collect();
    let listed = present
        .iter()
        .take(MAX_LISTED_KEYS)
        .map(|k| format!("{k:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    let keys = match present.len() {
        0 => "it has no keys".to_owned(),
        n if n > MAX_LISTED_KEYS => {
            format!("its keys: {listed} and {} more", n - MAX_LISTED_KEYS)
        }
        _ => format!("its keys: {listed}"),
    };
    format!("Secret {namespace}/{name} has no key {key:?}; {keys}")
}

/// Reads `key` of Secret `name` in `namespace` as UTF-8, through the
/// cache of referenced Secrets ([`super::secrets::Secrets::value`]: no API server read
/// while the watch shows the Secret unchanged), with the messages of
/// [`key_value`].
///
/// Returns `Ok(Err(Blocked))` when the Secret or key does not exist, and
/// `Err` for API errors other than 404.
pub async fn secret_value(
    secrets: &Secrets,
    client: &kube::Client,
    namespace: &str,
    name: &str,
    key: &str,
) -> Result<Result<String, Blocked>, Error> {
    let found = secrets.value(client, namespace, name, key).await?;
    // The Secret as far as `key_value` needs it: the value of `key`, or the
    // names of the keys it has instead (with empty values).
    let secret = found.map(|value| Secret {
        data: Some(match value {
            Ok(v) => [(key.to_owned(), k8s_openapi::ByteString(v))].into(),
            Err(keys) => keys
                .into_iter()
                .map(|k| (k, k8s_openapi::ByteString(Vec::new())))
                .collect(),
        }),
        ..Secret::default()
    });
    Ok(key_value(secret.as_ref(), namespace, name, key))
}

/// Resolves every entry of `spec.secrets` to a name and value, in order:
/// a literal `value`, or `valueFrom.secretKeyRef` through `lookup(name,
/// key)`. Pure apart from `lookup`; shared by the operator (lookup = a read
/// of the cluster, [`deployment_secrets`]) and `agentctl apply` (lookup = the
/// Secret documents of the file).
///
/// Errors: the first entry with neither `value` nor `valueFrom`
/// (`InvalidSpec`), or the first failed lookup.
pub async fn secret_values<F, Fut, E>(
    spec: &AgentDeploymentSpec,
    mut lookup: F,
) -> Result<Result<Vec<SecretValue>, Blocked>, E>
where
    F: FnMut(String, String) -> Fut,
    Fut: std::future::Future<Output = Result<Result<String, Blocked>, E>>,
{
    let mut out = Vec::with_capacity(spec.secrets.len());
    for s in &spec.secrets {
        let value = match (&s.value, &s.value_from) {
            (Some(v), _) => v.clone(),
            (None, Some(from)) => {
                let r = &from.secret_key_ref;
                match lookup(r.name.clone(), r.key.clone()).await? {
                    Ok(v) => v,
                    Err(blocked) => return Ok(Err(blocked)),
                }
            }
            (None, None) => {
                return Ok(Err(Blocked {
                    reason: reason::INVALID_SPEC,
                    message: format!("secret {:?} has neither value nor valueFrom", s.name),
                }));
            }
        };
        out.push(SecretValue::new(s.name.clone(), value));
    }
    Ok(Ok(out))
}

/// Resolves every entry of `spec.secrets` to a name and value, reading the
/// referenced Secrets of `namespace` ([`secret_values`] with
/// [`secret_value`]).
pub async fn deployment_secrets(
    secrets: &Secrets,
    client: &kube::Client,
    namespace: &str,
    spec: &AgentDeploymentSpec,
) -> Result<Result<Vec<SecretValue>, Blocked>, Error> {
    secret_values(spec, |name, key| async move {
        secret_value(secrets, client, namespace, &name, &key).await
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn secret(data: &[(&str, &str)], string_data: &[(&str, &str)]) -> Secret {
        Secret {
            data: Some(
                data.iter()
                    .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            string_data: Some(
                string_data
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..Secret::default()
        }
    }

    /// The messages of a missing Secret or key: the keys present are named,
    /// their values never.
    #[test]
    fn a_missing_key_lists_the_keys_present_and_no_value() {
        let many: Vec<(String, &str)> = (0..12).map(|i| (format!("k{i:02}"), "v")).collect();
        let many: Vec<(&str, &str)> = many.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        let cases: [(Option<Secret>, &str); 5] = [
            (None, "Secret ns/acme not found"),
            (
                Some(secret(&[("api-key", "sk-live-1"), ("token", "t-2")], &[])),
                "Secret ns/acme has no key \"apiKey\"; its keys: \"api-key\", \"token\"",
            ),
            (
                Some(secret(&[("b", "sk-live-1")], &[("a", "sk-live-2")])),
                "Secret ns/acme has no key \"apiKey\"; its keys: \"a\", \"b\"",
            ),
            (
                Some(secret(&[], &[])),
                "Secret ns/acme has no key \"apiKey\"; it has no keys",
            ),
            (
                Some(secret(&many, &[])),
                "Secret ns/acme has no key \"apiKey\"; its keys: \"k00\", \"k01\", \"k02\", \
                 \"k03\", \"k04\", \"k05\", \"k06\", \"k07\", \"k08\", \"k09\" and 2 more",
            ),
        ];
        for (s, want) in cases {
            let blocked = key_value(s.as_ref(), "ns", "acme", "apiKey").unwrap_err();
            assert_eq!(blocked.reason, reason::SECRET_NOT_FOUND);
            assert_eq!(blocked.message, want);
            assert!(!blocked.message.contains("sk-live"), "{}", blocked.message);
        }
        let found = key_value(
            Some(&secret(&[("apiKey", "sk-live-1")], &[])),
            "ns",
            "acme",
            "apiKey",
        );
        assert_eq!(found.unwrap(), "sk-live-1");
    }
}
