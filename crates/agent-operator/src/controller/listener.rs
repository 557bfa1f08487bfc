//! Reconciler of `AgentListener` (observe-only): reads the listener from the
//! control plane and mirrors it in status.
//!
//! Each pass reads `GET /v2/listeners/{listener_id}` through the shared client
//! of the referenced AgentControlPlane ([`super::planes`]). Outcomes:
//! `Ready=True` (reason `ListenerFound`) with `computeType`, `computeId`,
//! `k8sNamespaces`, `version`, `createdAt`, `updatedAt` mirrored; `Stalled`
//! with `NotEnterprise` (403: the organization is not self-hosted enterprise;
//! the service's detail names the workspace), `ListenerNotFound` (404),
//! `Unauthorized` (401), `PodPolicyRefused` (a listener id off the list of
//! `--pod-policy`, before any request), or the reason of an unusable
//! AgentControlPlane;
//! `Reconciling` with `ControlPlaneUnavailable` on transient errors (retried
//! with backoff). The listener is re-read every `resync_interval` (default
//! 5 min) and whenever its AgentControlPlane changes.
//!
//! Source: docs/control-plane-api.md "Self-hosted placement and listeners"
//! and "Errors".

use std::future::Future;
use std::sync::Arc;

use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};

use super::kind::{self, Flow, Kind, Report};
use super::report::{ReasonTable, error_outcome};
use super::scaffold::{Scope, Wiring, own_kind_stream, run_in_scope};
use crate::api::conditions::reason;
use crate::api::control_plane::AgentControlPlane;
use crate::api::listener::{AgentListener, AgentListenerStatus};
use crate::controller::context::Context;
use crate::controller::error::Error;
use crate::controller::requeue::jittered;
use crate::controller::scaffold::scoped_api;
use crate::controlplane::ControlPlaneClient;
use crate::controlplane::types::Listener;
use crate::plan::status::Outcome;

/// Reconciles of this kind running at once per namespace (each makes one
/// small request).
pub const CONCURRENCY: u16 = 4;

/// `kind` label of this controller's metrics.
pub const KIND: &str = "AgentListener";

/// The `Ready` message of an observed listener, e.g. `listener <id> (k8s
/// compute cluster-a) accepts namespaces: a, b`. Pure.
pub fn ready_message(listener: &Listener) -> String {
    let namespaces = match &listener.compute_config.k8s_namespaces {
        None => "any namespace".to_owned(),
        Some(ns) if ns.is_empty() => "no namespace".to_owned(),
        Some(ns) => format!("namespaces: {}", ns.join(", ")),
    };
    format!(
        "listener {} ({} compute {}) accepts {namespaces}",
        listener.id, listener.compute_type, listener.compute_id
    )
}

/// The status fields mirrored from a listener (conditions and
/// `observedGeneration` left empty). Pure.
pub fn mirror(listener: &Listener) -> AgentListenerStatus {
    AgentListenerStatus {
        compute_type: Some(listener.compute_type.clone()),
        compute_id: Some(listener.compute_id.clone()),
        k8s_namespaces: listener.compute_config.k8s_namespaces.clone(),
        version: listener.version.clone(),
        created_at: Some(listener.created_at.clone()),
        updated_at: Some(listener.updated_at.clone()),
        ..AgentListenerStatus::default()
    }
}

impl Kind for AgentListener {
    type State = ();
    crate::kind_status!(AgentListenerStatus);
    const FINALIZER: Option<&'static str> = None;
    const REASONS: ReasonTable = ReasonTable::LISTENER;
    type Observed = ControlPlaneClient;
    /// Every pass takes the same step: one read of the listener.
    type Decision = ();

    fn observe(
        _api: &Api<Self>,
        obj: &Self,
        ctx: &Context,
    ) -> impl Future<Output = Flow<ControlPlaneClient, Self>> + Send {
        observe(obj, ctx)
    }

    fn decide(_obj: &Self, _seen: &ControlPlaneClient) {}

    fn act(
        _api: &Api<Self>,
        obj: &Self,
        ctx: &Context,
        cp: ControlPlaneClient,
        _decision: (),
    ) -> impl Future<Output = Box<Report<Self>>> + Send {
        read(obj, ctx, cp)
    }
}

/// The report of `outcome` with the mirrored fields `observed`, then
/// `then`.
fn report(
    obj: &AgentListener,
    observed: AgentListenerStatus,
    outcome: &Outcome,
    then: Result<Action, Error>,
) -> Box<Report<AgentListener>> {
    Report::outcome_with(obj, outcome, then, |observed_generation, conditions| {
        AgentListenerStatus {
            observed_generation,
            conditions,
            ..observed
        }
    })
}

/// One reconcile pass ([`kind::reconcile`]): read the listener, mirror it,
/// report.
pub async fn reconcile(obj: Arc<AgentListener>, ctx: Arc<Context>) -> Result<Action, Error> {
    kind::reconcile(obj, ctx).await
}

/// The client of the listener's AgentControlPlane; a listener id the
/// data-plane pod policy refuses (`--pod-policy`), or a plane that cannot be
/// used, ends the pass before any request.
async fn observe(obj: &AgentListener, ctx: &Context) -> Flow<ControlPlaneClient, AgentListener> {
    if let Some(policy) = &ctx.config.pod_policy
        && let Err(message) = policy.check_listener("spec.listenerId", &obj.spec.listener_id)
    {
        let outcome = Outcome::Stalled {
            reason: reason::POD_POLICY_REFUSED,
            message,
        };
        // Only a change of the spec (or of the operator's flags) helps.
        let then = Ok(Action::await_change());
        return Err(report(obj, AgentListenerStatus::default(), &outcome, then));
    }
    let ns = obj.namespace().unwrap_or_default();
    let blocked = match ctx
        .plane_client_for(&ns, &obj.spec.control_plane_ref)
        .await?
    {
        Ok(cp) => return Ok(cp),
        Err(blocked) => blocked,
    };
    // A plane not checked yet is a wait, not a problem: its check changes
    // it, which triggers this object again.
    let outcome = if blocked.reason == reason::CONTROL_PLANE_NOT_CHECKED {
        Outcome::Progressing {
            reason: blocked.reason,
            message: blocked.message,
        }
    } else {
        Outcome::Stalled {
            reason: blocked.reason,
            message: blocked.message,
        }
    };
    let then = Ok(Action::requeue(ctx.config.blocked_interval));
    Err(report(obj, AgentListenerStatus::default(), &outcome, then))
}

/// Reads the listener with `cp` and mirrors it.
async fn read(
    obj: &AgentListener,
    ctx: &Context,
    cp: ControlPlaneClient,
) -> Box<Report<AgentListener>> {
    let id = &obj.spec.listener_id;
    let resync = Ok(Action::requeue(jittered(ctx.config.resync_interval)));
    match cp.get_listener(id).await {
        Ok(listener) => {
            let outcome = Outcome::Ready {
                reason: reason::LISTENER_FOUND,
                message: ready_message(&listener),
            };
            report(obj, mirror(&listener), &outcome, resync)
        }
        Err(e) => {
            let operation = format!("get listener {id}");
            let outcome = error_outcome(&AgentListener::REASONS, &operation, &e);
            if e.is_transient() {
                // Keep the last observation while the control plane is away.
                let previous = obj.status.clone().unwrap_or_default();
                let failed = Err(Error::ControlPlane {
                    operation: "get listener",
                    source: e,
                });
                report(obj, previous, &outcome, failed)
            } else {
                report(obj, AgentListenerStatus::default(), &outcome, resync)
            }
        }
    }
}

/// AgentListeners that read through the AgentControlPlane `plane`. Pure.
pub fn listeners_on_plane(
    listeners: &[Arc<AgentListener>],
    plane: &AgentControlPlane,
) -> Vec<ObjectRef<AgentListener>> {
    let ns = plane.namespace();
    let name = plane.name_any();
    listeners
        .iter()
        .filter(|l| l.namespace() == ns && l.spec.control_plane_ref.name == name)
        .map(|l| ObjectRef::from_obj(l.as_ref()))
        .collect()
}

fn plane_mapper(
    store: Store<AgentListener>,
) -> impl Fn(AgentControlPlane) -> Vec<ObjectRef<AgentListener>> {
    move |plane: AgentControlPlane| listeners_on_plane(&store.state(), &plane)
}

/// Runs the `AgentListener` controllers of `scope` (one per namespace, see
/// [`Scope::targets`]) until `shutdown` resolves, then lets in-flight
/// reconciles finish.
///
/// Watches AgentListeners and AgentControlPlanes (a change of an
/// AgentControlPlane, including its status after a key rotation, re-reads its
/// listeners); re-reads every `ctx.config.resync_interval`. Each pass is
/// counted in `ctx.metrics` under kind [`KIND`].
pub async fn run(
    ctx: Arc<Context>,
    scope: Scope,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let build = |namespace: Option<&str>| {
        let listeners: Api<AgentListener> = scoped_api(&ctx.client, namespace);
        let planes: Api<AgentControlPlane> = scoped_api(&ctx.client, namespace);
        let shard = &ctx.config.shard;
        let (store, own) = own_kind_stream(KIND, listeners, shard);
        let controller = Controller::for_stream(own, store);
        let mapper = plane_mapper(controller.store());
        controller.watches(planes, shard.watch(watcher::Config::default()), mapper)
    };
    run_in_scope(
        ctx.clone(),
        scope,
        KIND,
        CONCURRENCY,
        shutdown,
        |namespace| Wiring::new(KIND, build(namespace), reconcile),
        || {},
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controlplane::Error as CpError;
    use crate::controlplane::types::ListenerComputeConfig;

    fn listener(namespaces: Option<Vec<&str>>) -> Listener {
        Listener {
            id: "6f1c2a3e-0000-4000-8000-000000000009".into(),
            compute_type: "k8s".into(),
            compute_id: "cluster-a".into(),
            compute_config: ListenerComputeConfig {
                k8s_namespaces: namespaces.map(|n| n.into_iter().map(str::to_owned).collect()),
            },
            version: Some("0.1.2".into()),
            created_at: "2025-01-01T00:00:00Z".into(),
            updated_at: "2025-01-02T00:00:00Z".into(),
        }
    }

    #[test]
    fn mirror_copies_every_listener_field() {
        let s = mirror(&listener(Some(vec!["a", "b"])));
        assert_eq!(s.compute_type.as_deref(), Some("k8s"));
        assert_eq!(s.compute_id.as_deref(), Some("cluster-a"));
        assert_eq!(s.k8s_namespaces, Some(vec!["a".into(), "b".into()]));
        assert_eq!(s.version.as_deref(), Some("0.1.2"));
        assert_eq!(s.created_at.as_deref(), Some("2025-01-01T00:00:00Z"));
        assert_eq!(s.updated_at.as_deref(), Some("2025-01-02T00:00:00Z"));
        assert!(s.conditions.is_empty());
    }

    #[test]
    fn ready_message_says_which_namespaces_are_accepted() {
        assert!(ready_message(&listener(None)).ends_with("accepts any namespace"));
        assert!(ready_message(&listener(Some(vec!["a", "b"]))).ends_with("namespaces: a, b"));
        assert!(ready_message(&listener(Some(vec![]))).ends_with("no namespace"));
    }

    /// The AgentListener row of the one error-to-reason table.
    #[test]
    fn errors_map_to_stalled_reasons_with_the_detail() {
        let detail = "Listeners are not allowed for workspace ws-1";
        let o = error_outcome(
            &ReasonTable::LISTENER,
            "get listener id",
            &CpError::Forbidden {
                detail: detail.into(),
            },
        );
        assert_eq!(o.reason(), reason::NOT_ENTERPRISE);
        assert!(matches!(&o, Outcome::Stalled { message, .. } if message.contains(detail)));
        let o = error_outcome(
            &ReasonTable::LISTENER,
            "get listener id",
            &CpError::NotFound {
                detail: "Listener ID id not found.".into(),
            },
        );
        assert_eq!(o.reason(), reason::LISTENER_NOT_FOUND);
        assert!(
            matches!(&o, Outcome::Stalled { message, .. } if message.contains("Listener ID id not found."))
        );
        let o = error_outcome(
            &ReasonTable::LISTENER,
            "get listener id",
            &CpError::Server {
                status: 502,
                detail: "bad gateway".into(),
            },
        );
        assert!(matches!(o, Outcome::Progressing { .. }));
        assert_eq!(o.reason(), reason::CONTROL_PLANE_UNAVAILABLE);
    }
}
