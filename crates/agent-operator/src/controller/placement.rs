//! Placement of a self-hosted `AgentDeployment` on a listener: which listener
//! id to send, and whether the requested Kubernetes namespace is one the
//! listener is configured for, checked before the create.
//!
//! Source: docs/control-plane-api.md "Self-hosted placement and listeners" (a deployment
//! names `source_config.listener_id` and `listener_config.k8s_namespace`; the
//! namespace must be one of the listener's `k8s_namespaces`; listener reads
//! answer 403 for organizations that are not self-hosted enterprise and 404
//! for an unknown id). A null `k8s_namespaces` is taken to allow any
//! namespace (inferred: no source says).

use kube::Api;

use super::report::{ReasonTable, reason_for};
use super::resolve::Blocked;
use crate::api::conditions::reason;
use crate::api::deployment::AgentDeploymentSpec;
use crate::api::listener::AgentListener;
use crate::controller::context::Shared;
use crate::controller::error::Error;
use crate::controlplane::{ControlPlaneClient, Error as CpError};

/// Checks the placement fields of a spec on their own: `listenerId` and
/// `listenerRef` are mutually exclusive, and `listenerConfig.k8sNamespace`
/// needs one of them. Pure.
pub fn check_spec(spec: &AgentDeploymentSpec) -> Result<(), Blocked> {
    let sc = &spec.source_config;
    if sc.listener_id.is_some() && sc.listener_ref.is_some() {
        return Err(Blocked {
            reason: reason::INVALID_SPEC,
            message: "set only one of sourceConfig.listenerId and sourceConfig.listenerRef".into(),
        });
    }
    let namespace = sc
        .listener_config
        .as_ref()
        .and_then(|c| c.k8s_namespace.as_deref());
    if let Some(ns) = namespace
        && sc.listener_id.is_none()
        && sc.listener_ref.is_none()
    {
        return Err(Blocked {
            reason: reason::PLACEMENT_INVALID,
            message: format!(
                "sourceConfig.listenerConfig.k8sNamespace {ns:?} needs a listener: set sourceConfig.listenerRef or sourceConfig.listenerId"
            ),
        });
    }
    Ok(())
}

/// Checks that `namespace` is one of the listener's `k8s_namespaces`
/// (`allowed`; `None` = null on the wire = any namespace). The message names
/// the namespace, the listener and the allowed namespaces. Pure.
pub fn check_namespace(
    listener_id: &str,
    allowed: Option<&[String]>,
    namespace: &str,
) -> Result<(), Blocked> {
    let Some(allowed) = allowed else {
        return Ok(());
    };
    if allowed.iter().any(|a| a == namespace) {
        return Ok(());
    }
    let listed = if allowed.is_empty() {
        "it allows none".to_owned()
    } else {
        format!("allowed: {}", allowed.join(", "))
    };
    Err(Blocked {
        reason: reason::PLACEMENT_INVALID,
        message: format!(
            "namespace {namespace:?} is not among the k8sNamespaces of listener {listener_id} ({listed})"
        ),
    })
}

/// The reason a failed listener read gives, from the one error-to-reason
/// table ([`ReasonTable::LISTENER_CHECK`]): 403 → `NotEnterprise`, 404 →
/// `ListenerNotFound`, 401 → `Unauthorized`, 400/409/422 → `InvalidSpec`
/// (e.g. a listener id that is not a uuid). `None` for transient errors and
/// unexpected answers (retried). Pure. (The AgentListener controller reads
/// the same errors through [`ReasonTable::LISTENER`], which stalls on
/// those.)
pub fn listener_error_reason(e: &CpError) -> Option<&'static str> {
    reason_for(&ReasonTable::LISTENER_CHECK, e)
}

/// The placement problem a failed listener read reveals
/// ([`listener_error_reason`]), with the service's detail; `None` for
/// errors that are not about the input. Pure.
pub fn listener_blocked(listener_id: &str, e: &CpError) -> Option<Blocked> {
    Some(Blocked {
        reason: listener_error_reason(e)?,
        message: format!("listener {listener_id}: {e}"),
    })
}

/// Resolves the listener a deployment is placed on and checks its namespace:
/// [`listener_id`] then [`check_listener_namespace`].
///
/// Returns `Ok(Ok(Some(listener_id)))`, `Ok(Ok(None))` when no listener is
/// used, or `Ok(Err(Blocked))` for an input to fix. Errors: as the two.
pub async fn resolve_listener(
    ctx: &Shared,
    cp: &ControlPlaneClient,
    namespace: &str,
    spec: &AgentDeploymentSpec,
) -> Result<Result<Option<String>, Blocked>, Error> {
    let listener_id = match listener_id(ctx, namespace, spec).await? {
        Ok(Some(id)) => id,
        other => return Ok(other),
    };
    Ok(check_listener_namespace(cp, &listener_id, spec)
        .await?
        .map(|()| Some(listener_id)))
}

/// The listener a deployment is placed on, from Kubernetes only (no
/// control plane request):
/// - `sourceConfig.listenerRef` set: reads that `AgentListener` in
///   `namespace` (missing → Blocked `ListenerNotFound`; on another
///   AgentControlPlane than the deployment → Blocked `PlacementInvalid`;
///   an id the operator's pod policy refuses → Blocked `PodPolicyRefused`)
///   and takes its `spec.listenerId`;
/// - else `sourceConfig.listenerId`.
///
/// Returns `Ok(Ok(None))` when no listener is used. Errors: Kubernetes API
/// failures other than 404.
pub async fn listener_id(
    ctx: &Shared,
    namespace: &str,
    spec: &AgentDeploymentSpec,
) -> Result<Result<Option<String>, Blocked>, Error> {
    if let Err(blocked) = check_spec(spec) {
        return Ok(Err(blocked));
    }
    let sc = &spec.source_config;
    Ok(Ok(match (&sc.listener_ref, &sc.listener_id) {
        (Some(r), _) => {
            let api: Api<AgentListener> = Api::namespaced(ctx.client.clone(), namespace);
            let Some(listener) = api.get_opt(&r.name).await.map_err(Error::Kube)? else {
                return Ok(Err(Blocked {
                    reason: reason::LISTENER_NOT_FOUND,
                    message: format!("AgentListener {namespace}/{} not found", r.name),
                }));
            };
            let on = &listener.spec.control_plane_ref;
            if on != &spec.control_plane_ref {
                return Ok(Err(Blocked {
                    reason: reason::PLACEMENT_INVALID,
                    message: format!(
                        "AgentListener {namespace}/{} is on {}, the deployment on {}",
                        r.name,
                        on.shown(namespace),
                        spec.control_plane_ref.shown(namespace)
                    ),
                }));
            }
            // The AgentListener may have been stored while the admission
            // policy was absent: the operator's pod policy checks its id.
            if let Some(policy) = &ctx.config.pod_policy {
                let field = format!(
                    "spec.sourceConfig.listenerRef: AgentListener {namespace}/{} spec.listenerId",
                    r.name
                );
                if let Err(message) = policy.check_listener(&field, &listener.spec.listener_id) {
                    return Ok(Err(Blocked {
                        reason: reason::POD_POLICY_REFUSED,
                        message,
                    }));
                }
            }
            Some(listener.spec.listener_id)
        }
        (None, Some(id)) => Some(id.clone()),
        (None, None) => None,
    }))
}

/// With `listenerConfig.k8sNamespace` set: reads `GET /v2/listeners/{id}`
/// through `cp` and checks the namespace with [`check_namespace`]; 403, 404,
/// 401, 400 and 422 become Blocked (see [`listener_blocked`]). Without a
/// namespace, no request.
///
/// Errors: transient or unexpected control plane errors
/// (`Error::ControlPlane`, operation `get listener`) for the caller's backoff.
pub async fn check_listener_namespace(
    cp: &ControlPlaneClient,
    listener_id: &str,
    spec: &AgentDeploymentSpec,
) -> Result<Result<(), Blocked>, Error> {
    let Some(k8s_namespace) = spec
        .source_config
        .listener_config
        .as_ref()
        .and_then(|c| c.k8s_namespace.as_deref())
    else {
        return Ok(Ok(()));
    };
    match cp.get_listener(listener_id).await {
        Ok(listener) => Ok(check_namespace(
            listener_id,
            listener.compute_config.k8s_namespaces.as_deref(),
            k8s_namespace,
        )),
        Err(e) => match listener_blocked(listener_id, &e) {
            Some(blocked) => Ok(Err(blocked)),
            None => Err(Error::ControlPlane {
                operation: "get listener",
                source: e,
            }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::deployment::{ListenerConfig, LocalObjectRef};

    const ID: &str = "6f1c2a3e-0000-4000-8000-000000000009";

    fn spec(
        listener_id: Option<&str>,
        listener_ref: Option<&str>,
        ns: Option<&str>,
    ) -> AgentDeploymentSpec {
        let mut spec: AgentDeploymentSpec = serde_json::from_value(serde_json::json!({
            "source": "external_docker",
            "sourceRevisionConfig": {"imageUri": "docker.io/acme/agent:1"}
        }))
        .unwrap();
        spec.source_config.listener_id = listener_id.map(str::to_owned);
        spec.source_config.listener_ref = listener_ref.map(|n| LocalObjectRef { name: n.into() });
        spec.source_config.listener_config = ns.map(|n| ListenerConfig {
            k8s_namespace: Some(n.into()),
        });
        spec
    }

    #[test]
    fn a_listed_namespace_is_accepted_and_another_is_rejected_by_name() {
        let allowed = vec!["agents".to_owned(), "staging".to_owned()];
        assert!(check_namespace(ID, Some(&allowed), "agents").is_ok());
        let blocked = check_namespace(ID, Some(&allowed), "prod").unwrap_err();
        assert_eq!(blocked.reason, reason::PLACEMENT_INVALID);
        assert!(blocked.message.contains("\"prod\""), "{}", blocked.message);
        assert!(blocked.message.contains(ID), "{}", blocked.message);
        assert!(
            blocked.message.contains("agents, staging"),
            "{}",
            blocked.message
        );
    }

    #[test]
    fn null_namespaces_allow_any_and_an_empty_list_allows_none() {
        assert!(check_namespace(ID, None, "anything").is_ok());
        let blocked = check_namespace(ID, Some(&[]), "agents").unwrap_err();
        assert!(
            blocked.message.contains("allows none"),
            "{}",
            blocked.message
        );
    }

    #[test]
    fn spec_needs_one_listener_for_a_namespace() {
        assert!(check_spec(&spec(None, None, None)).is_ok());
        assert!(check_spec(&spec(Some(ID), None, Some("agents"))).is_ok());
        assert!(check_spec(&spec(None, Some("edge"), Some("agents"))).is_ok());
        let both = check_spec(&spec(Some(ID), Some("edge"), None)).unwrap_err();
        assert_eq!(both.reason, reason::INVALID_SPEC);
        let orphan = check_spec(&spec(None, None, Some("agents"))).unwrap_err();
        assert_eq!(orphan.reason, reason::PLACEMENT_INVALID);
        assert!(orphan.message.contains("agents"));
    }

    #[test]
    fn listener_errors_map_to_blocked_reasons_or_to_retries() {
        let forbidden = CpError::Forbidden {
            detail: "Listeners are not allowed for workspace ws-1".into(),
        };
        let b = listener_blocked(ID, &forbidden).unwrap();
        assert_eq!(b.reason, reason::NOT_ENTERPRISE);
        assert!(b.message.contains("workspace ws-1"));
        let missing = CpError::NotFound {
            detail: format!("Listener ID {ID} not found."),
        };
        assert_eq!(
            listener_blocked(ID, &missing).unwrap().reason,
            reason::LISTENER_NOT_FOUND
        );
        assert!(listener_blocked(ID, &CpError::Timeout).is_none());
    }
}
