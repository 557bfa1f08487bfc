//! Reads the Secrets an `AgentDeployment` references (the AgentControlPlane
//! and its client come from [`super::planes::ClientCache`]). Only
//! the Secrets actually referenced are read.
//!
//! A missing object is not an error of the operator but of the input: it comes
//! back as [`Blocked`], which the reconciler writes to status (`Ready=False`
//! with a reason naming what is missing) instead of failing.

use super::{Context, Error};
use crate::api::conditions::reason;
use crate::api::deployment::AgentDeploymentSpec;
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
        message: format!("Secret {namespace}/{name} has no key {key:?}"),
    })
}

/// Reads `key` of Secret `name` in `namespace` as UTF-8, through the
/// cache of referenced Secrets ([`super::secrets::Secrets::value`]: no API server read
/// while the watch shows the Secret unchanged), with the messages of
/// [`key_value`].
///
/// Returns `Ok(Err(Blocked))` when the Secret or key does not exist, and
/// `Err` for API errors other than 404.
pub async fn secret_value(
    ctx: &Context,
    namespace: &str,
    name: &str,
    key: &str,
) -> Result<Result<String, Blocked>, Error> {
    let found = ctx.secrets.value(&ctx.client, namespace, name, key).await?;
    let secret = found.map(|value| Secret {
        data: value.map(|v| [(key.to_owned(), k8s_openapi::ByteString(v))].into()),
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
    ctx: &Context,
    namespace: &str,
    spec: &AgentDeploymentSpec,
) -> Result<Result<Vec<SecretValue>, Blocked>, Error> {
    secret_values(spec, |name, key| async move {
        secret_value(ctx, namespace, &name, &key).await
    })
    .await
}
