//! The pass of both plane kinds (AgentControlPlane and
//! ClusterAgentControlPlane): the authentication probe and the listing of
//! the workspace for `status.unmanaged` ([`probe_plane`]), what its answer
//! means ([`probe_outcome`]), the report ([`report`]), the message of a
//! plane kept for its users ([`in_use_message`]) and the [`Kind`] impl
//! over a kind's own `observe`, `probe` and `cleanup`
//! ([`crate::plane_kind!`]). Each kind's module adds its inputs, its
//! deletion and its watches.
//!
//! Source: docs/control-plane-api.md "Hosts and headers" and "Errors" (401
//! for a wrong key, 403 for a key of another workspace) and "Requests"
//! (list, `limit` 1–100).

use std::collections::HashSet;
use std::time::Duration;

use jiff::Timestamp;
use kube::runtime::controller::Action;

use super::kind::{Kind, Report};
use super::report::error_outcome;
use super::unmanaged::Planes;
use crate::api::conditions::reason;
use crate::api::control_plane::{
    AgentControlPlane, AgentControlPlaneSpec, AgentControlPlaneStatus, IN_USE_FINALIZER,
    UnmanagedDeployments,
};
use crate::controller::context::Context;
use crate::controller::error::Error;
use crate::controller::requeue::jittered;
use crate::controlplane::error::Refusal;
use crate::controlplane::types::Deployment;
use crate::controlplane::{ControlPlaneClient, Error as CpError, ListDeployments};
use crate::plan::claims::plane_id;
use crate::plan::status::Outcome;
use crate::plan::unmanaged;

/// The outcome of the authentication probe (`list deployments`, limit 1)
/// against `base_url` for the workspace and credential of `spec`. A refused
/// key (401) names the Secret and key it was read from. Pure.
pub fn probe_outcome(
    base_url: &str,
    spec: &AgentControlPlaneSpec,
    result: Result<(), &CpError>,
) -> Outcome {
    let workspace_id = spec.workspace_id.as_str();
    let e = match result {
        Ok(()) => {
            return Outcome::Ready {
                reason: reason::AUTHENTICATED,
                message: format!("authenticated to {base_url} for workspace {workspace_id}"),
            };
        }
        Err(e) => e,
    };
    let operation = format!("list deployments at {base_url}");
    match error_outcome(&AgentControlPlane::REASONS, &operation, e) {
        Outcome::Stalled { reason, message } => Outcome::Stalled {
            reason,
            message: message + &hint(reason, spec),
        },
        retried => retried,
    }
}

/// What to do about a stalled probe with `reason`, appended to its message.
/// Pure.
fn hint(reason: &str, spec: &AgentControlPlaneSpec) -> String {
    let workspace_id = spec.workspace_id.as_str();
    match reason {
        reason::UNAUTHORIZED => credential_hint(spec),
        reason::WORKSPACE_REQUIRED => format!(
            "; the key is organisation-scoped and the control plane did not accept workspace {workspace_id}: set spec.workspaceId to a workspace id of that organisation (LangSmith Settings > Workspaces)"
        ),
        reason::DEPLOYMENT_NOT_ENABLED => "; enable LangSmith Deployment for the organisation (LangSmith > Deployments), then edit this AgentControlPlane or its Secret to check again".to_owned(),
        reason::FORBIDDEN => {
            format!("; check that the API key belongs to workspace {workspace_id}")
        }
        reason::INVALID_SPEC => {
            "; check spec.url (a self-hosted control plane ends in /api-host)".to_owned()
        }
        _ => String::new(),
    }
}

/// What to check after a 401: the Secret and key the credential was read
/// from, and the field that names them. Pure.
fn credential_hint(spec: &AgentControlPlaneSpec) -> String {
    let (what, field) = if spec.uses_bearer_token() {
        ("bearer token", "spec.bearerTokenSecretRef")
    } else {
        ("API key", "spec.apiKeySecretRef")
    };
    match spec.credential_ref() {
        Some(r) => format!(
            "; check the {what} in Secret {}, key {:?} ({field})",
            r.name, r.key
        ),
        None => format!("; check the {what} Secret ({field})"),
    }
}

/// The report of `outcome` about a plane object of either kind (an
/// AgentControlPlane or a ClusterAgentControlPlane), then `then`, with
/// `unmanaged` as `status.unmanaged` (the last one carried forward when
/// `None`).
pub(crate) fn report<K: Kind<Status = AgentControlPlaneStatus>>(
    obj: &K,
    outcome: &Outcome,
    then: Result<Action, Error>,
    unmanaged: Option<UnmanagedDeployments>,
) -> Box<Report<K>> {
    let unmanaged = unmanaged.or_else(|| previous_unmanaged(obj).cloned());
    Report::outcome_with(obj, outcome, then, |observed_generation, conditions| {
        AgentControlPlaneStatus {
            observed_generation,
            conditions,
            unmanaged,
        }
    })
}

/// The object's `status.unmanaged`, if any.
fn previous_unmanaged<K: Kind<Status = AgentControlPlaneStatus>>(
    obj: &K,
) -> Option<&UnmanagedDeployments> {
    obj.status().and_then(|s| s.unmanaged.as_ref())
}

/// The [`Kind`] impl of a plane kind (AgentControlPlane and
/// ClusterAgentControlPlane: one pass, the authentication probe, and the
/// in-use finalizer), over the functions `observe`, `probe` and `cleanup`
/// of the module that invokes it. `|obj| namespace` is the namespace (a
/// `&str`) under which the client cache keys the plane (`""` for a
/// cluster plane).
#[macro_export]
macro_rules! plane_kind {
    ($kind:ty, |$obj:ident| $namespace:expr) => {
        impl Kind for $kind {
            type State = ();
            $crate::kind_status!($crate::api::control_plane::AgentControlPlaneStatus);
            const FINALIZER: Option<&'static str> =
                Some($crate::api::control_plane::IN_USE_FINALIZER);
            const REASONS: ReasonTable = ReasonTable::CONTROL_PLANE;
            type Observed = $crate::controlplane::ControlPlaneClient;
            /// Every pass takes the same step: the authentication probe.
            type Decision = ();

            fn observe(
                _api: &Api<Self>,
                obj: &Self,
                ctx: &Context,
            ) -> impl Future<Output = Flow<$crate::controlplane::ControlPlaneClient, Self>> + Send
            {
                observe(obj, ctx)
            }

            fn decide(_obj: &Self, _seen: &$crate::controlplane::ControlPlaneClient) {}

            fn act(
                _api: &Api<Self>,
                obj: &Self,
                ctx: &Context,
                cp: $crate::controlplane::ControlPlaneClient,
                _decision: (),
            ) -> impl Future<Output = Box<Report<Self>>> + Send {
                probe(obj, ctx, cp)
            }

            fn cleanup(
                _api: &Api<Self>,
                obj: &Self,
                ctx: &Context,
            ) -> impl Future<Output = Box<Report<Self>>> + Send {
                cleanup(obj, ctx)
            }

            /// Drops the plane's cached client.
            fn forget(ctx: &Context, $obj: &Self) {
                ctx.planes.forget($namespace, &$obj.name_any());
            }
        }
    };
}

/// The message of a plane kept for the AgentDeployments that use it. Pure.
pub fn in_use_message(users: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut names = users
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if users.len() > SHOWN {
        names.push_str(&format!(" and {} more", users.len() - SHOWN));
    }
    format!(
        "being deleted; kept (finalizer {IN_USE_FINALIZER}) until the {} AgentDeployment(s) that use it are deleted: {names}",
        users.len()
    )
}

/// The probe (`probe` of [`super::control_plane`]) of a plane object of either kind: `obj`, read as the
/// AgentControlPlane `view` (a ClusterAgentControlPlane's
/// [`as_plane`](crate::api::cluster_control_plane::ClusterAgentControlPlane::as_plane)).
pub(crate) async fn probe_plane<K: Kind<Status = AgentControlPlaneStatus>>(
    obj: &K,
    view: &AgentControlPlane,
    ctx: &Context,
    cp: ControlPlaneClient,
) -> Box<Report<K>> {
    let obj_view = view;
    let period = ctx.config.resync_interval;
    let wait = unmanaged::list_due(
        previous_unmanaged(obj).map(|u| u.observed_at.as_str()),
        Timestamp::now(),
        period,
    );
    let (probe, unmanaged) = match wait {
        Some(_) => {
            let probe = cp
                .list_deployments(&ListDeployments {
                    limit: Some(1),
                    ..Default::default()
                })
                .await
                .map(|_| ());
            (probe, None)
        }
        None => match list_workspace(obj_view, ctx, &cp).await {
            Ok(Ok(found)) => (Ok(()), Some(found)),
            Ok(Err(e)) => (Err(e), None),
            Err(e) => return Report::failed(e),
        },
    };
    let base_url = cp.base_url().trim_end_matches('/').to_owned();
    let outcome = probe_outcome(&base_url, &obj_view.spec, probe.as_ref().map(|_| ()));
    report(obj, &outcome, probe_then(probe, wait, period), unmanaged)
}

/// The paged list of every deployment of the workspace, as the report of
/// those no AgentDeployment of the operator's scope holds or claims
/// ([`managed_on`]) (`Ok(Err)`: the control plane's error). Errors: a
/// Kubernetes read failed.
async fn list_workspace(
    obj: &AgentControlPlane,
    ctx: &Context,
    cp: &ControlPlaneClient,
) -> Result<Result<UnmanagedDeployments, CpError>, Error> {
    let remote = match cp.list_all_deployments(&ListDeployments::default()).await {
        Ok(remote) => remote,
        Err(e) => return Ok(Err(e)),
    };
    let managed = managed_on(obj, ctx, &remote).await?;
    Ok(Ok(unmanaged::report(&remote, &managed, Timestamp::now())))
}

/// What the AgentDeployments of every namespace the operator watches
/// (`--namespace`, default the cluster; whatever their shard) hold or
/// claim on the plane of `obj` (its URL and workspace), for the deployments
/// `remote` of its workspace: the AgentDeployments listed page by page,
/// and the AgentControlPlane of an object that claims by name one of the
/// listed names ([`super::unmanaged`]). Listed after the workspace: an
/// AgentDeployment that created one of the listed deployments shows its
/// id, or its create-pending marker and name, by now. Errors: a Kubernetes
/// read failed.
async fn managed_on(
    obj: &AgentControlPlane,
    ctx: &Context,
    remote: &[Deployment],
) -> Result<unmanaged::Managed, Error> {
    let mut managed = unmanaged::Managed::default();
    let Some(plane) = plane_id(obj) else {
        return Ok(managed);
    };
    let names: HashSet<&str> = remote.iter().map(|d| d.name.as_str()).collect();
    let mut planes = Planes::new(ctx.client.clone(), Some(&ctx.planes));
    planes.insert(obj);
    for namespace in ctx.config.scope.targets() {
        super::unmanaged::add_namespace(&mut managed, namespace, &plane, &names, &mut planes)
            .await
            .map_err(Error::Kube)?;
    }
    Ok(managed)
}

/// What a pass returns after `probe`: a transient error to back off from;
/// a refusal only the user can lift waits for a change (not asked again
/// until the AgentControlPlane or one of its Secrets changes, both of which
/// trigger a pass); else back when the workspace is due to be listed
/// (`wait`, at least [`MIN_REQUEUE`]), or after the jittered `period` when
/// this pass listed it.
fn probe_then(
    probe: Result<(), CpError>,
    wait: Option<Duration>,
    period: Duration,
) -> Result<Action, Error> {
    match probe {
        Err(e) if e.is_transient() => Err(Error::ControlPlane {
            operation: "list deployments",
            source: e,
        }),
        Err(e)
            if matches!(
                e.refusal(),
                Some(Refusal::WorkspaceRequired | Refusal::DeploymentNotEnabled)
            ) =>
        {
            Ok(Action::await_change())
        }
        _ => Ok(Action::requeue(match wait {
            Some(wait) => wait.max(MIN_REQUEUE),
            None => jittered(period),
        })),
    }
}

/// The shortest requeue of a pass that probed within the drift period.
const MIN_REQUEUE: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;

    /// A plane at `http://cp` whose API key is in Secret `acme-key`.
    fn api_key_spec() -> AgentControlPlaneSpec {
        serde_json::from_value(serde_json::json!({
            "url": "http://cp",
            "workspaceId": "ws",
            "apiKeySecretRef": {"name": "acme-key", "key": "apiKey"},
        }))
        .unwrap()
    }

    /// Success and 401: Ready, or Stalled with advice naming the Secret
    /// that holds the credential.
    #[test]
    fn probe_outcomes_of_success_and_401_name_the_credential() {
        let spec = api_key_spec();
        let ok = probe_outcome("http://cp", &spec, Ok(()));
        assert_eq!(ok.reason(), reason::AUTHENTICATED);
        assert!(matches!(ok, Outcome::Ready { .. }));

        let e = CpError::Unauthorized {
            detail: "Invalid API key.".into(),
        };
        let o = probe_outcome("http://cp", &spec, Err(&e));
        assert!(matches!(o, Outcome::Stalled { .. }));
        assert_eq!(o.reason(), reason::UNAUTHORIZED);
        assert_eq!(
            o.message(),
            "list deployments at http://cp: unauthorized (401): Invalid API key.; check the API \
             key in Secret acme-key, key \"apiKey\" (spec.apiKeySecretRef)"
        );
        let bearer: AgentControlPlaneSpec = serde_json::from_value(serde_json::json!({
            "url": "http://cp",
            "workspaceId": "ws",
            "bearerTokenSecretRef": {"name": "sso", "key": "token"},
        }))
        .unwrap();
        let o = probe_outcome("http://cp", &bearer, Err(&e));
        assert!(
            o.message().ends_with(
                "; check the bearer token in Secret sso, key \"token\" (spec.bearerTokenSecretRef)"
            ),
            "{}",
            o.message()
        );
    }

    /// 403s by their detail, a timeout, a 429 and a 404.
    #[test]
    fn probe_outcomes_follow_the_status_codes() {
        let spec = api_key_spec();
        for (detail, want) in [
            (
                "This API key requires workspace specification",
                reason::WORKSPACE_REQUIRED,
            ),
            (
                "LangSmith Deployment is not enabled for this organization.",
                reason::DEPLOYMENT_NOT_ENABLED,
            ),
        ] {
            let e = CpError::Forbidden {
                detail: detail.into(),
            };
            let o = probe_outcome("https://cp", &spec, Err(&e));
            assert_eq!(o.reason(), want);
            assert!(o.message().contains(detail));
        }
        let e = CpError::Forbidden {
            detail: "key not valid for workspace ws".into(),
        };
        let o = probe_outcome("http://cp", &spec, Err(&e));
        assert_eq!(o.reason(), reason::FORBIDDEN);
        assert!(o.message().contains("key not valid for workspace ws"));

        let o = probe_outcome("http://cp", &spec, Err(&CpError::Timeout));
        assert!(matches!(o, Outcome::Progressing { .. }));
        assert_eq!(o.reason(), reason::CONTROL_PLANE_UNAVAILABLE);
        let limited = |secs| CpError::RateLimited {
            status: 429,
            retry_after: Some(std::time::Duration::from_secs(secs)),
        };
        let o = probe_outcome("http://cp", &spec, Err(&limited(3)));
        assert!(matches!(o, Outcome::Progressing { .. }));
        assert!(
            o.message()
                .starts_with("list deployments at http://cp: rate limited (429); next attempt at "),
            "{}",
            o.message()
        );

        let e = CpError::NotFound {
            detail: "Not Found".into(),
        };
        let o = probe_outcome("http://cp", &spec, Err(&e));
        assert_eq!(o.reason(), reason::INVALID_SPEC);
        assert!(o.message().contains("/api-host"));
    }
}
