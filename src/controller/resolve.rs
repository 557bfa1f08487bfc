//! Reads the Secrets an `AgentDeployment` references (the AgentControlPlane
//! and its client come from [`super::planes::ClientCache`]). Only
//! the Secrets actually referenced are read.
//!
//! A missing object is not an error of the operator but of the input: it comes
//! back as [`Blocked`], which the reconciler writes to status (`Ready=False`
//! with a reason naming what is missing) instead of failing.

use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use super::Error;
use crate::api::conditions::reason;
use crate::api::deployment::AgentDeploymentSpec;
use crate::controlplane::types::SecretValue;

/// An input that is missing or unusable; reported in status, not retried fast.
#[derive(Clone, Debug, PartialEq)]
pub struct Blocked {
    /// Condition reason (a constant of [`reason`]).
    pub reason: &'static str,
    /// Message naming the missing object.
    pub message: String,
}

/// Reads `key` of Secret `name` in `namespace` as UTF-8.
///
/// Returns `Ok(Err(Blocked))` when the Secret or key does not exist, and
/// `Err` for API errors other than 404.
pub async fn secret_value(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    key: &str,
) -> Result<Result<String, Blocked>, Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let Some(secret) = api.get_opt(name).await.map_err(Error::Kube)? else {
        return Ok(Err(Blocked {
            reason: reason::SECRET_NOT_FOUND,
            message: format!("Secret {namespace}/{name} not found"),
        }));
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
    Ok(value.ok_or_else(|| Blocked {
        reason: reason::SECRET_NOT_FOUND,
        message: format!("Secret {namespace}/{name} has no key {key:?}"),
    }))
}

/// Resolves every entry of `spec.secrets` to a name and value.
pub async fn deployment_secrets(
    client: &kube::Client,
    namespace: &str,
    spec: &AgentDeploymentSpec,
) -> Result<Result<Vec<SecretValue>, Blocked>, Error> {
    let mut out = Vec::with_capacity(spec.secrets.len());
    for s in &spec.secrets {
        let value = match (&s.value, &s.value_from) {
            (Some(v), _) => v.clone(),
            (None, Some(from)) => {
                let r = &from.secret_key_ref;
                match secret_value(client, namespace, &r.name, &r.key).await? {
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
