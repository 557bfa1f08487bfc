//! Reconciler of `AgentControlPlane`: checks that the control plane answers an
//! authenticated call with the current spec and API key, and reports it.
//!
//! Each pass builds (or reuses) the shared client of [`super::planes`] and
//! lists the deployments of the workspace: every page once per drift period
//! (`resync_interval`), which also feeds `status.unmanaged` (the
//! deployments that no AgentDeployment of the watched namespaces, any of
//! them, holds or claims on the same plane: [`crate::plan::unmanaged`]); a
//! pass within the period (a change of the
//! spec or of a Secret) lists one deployment only (`GET
//! /v2/deployments?limit=1`) and carries the last report forward. Outcomes:
//! `Ready=True` (reason `Authenticated`); `Stalled` with `Unauthorized` (401),
//! `Forbidden` (403, e.g. a key of another workspace), `SecretNotFound` or
//! `InvalidSpec`; `Reconciling` with `ControlPlaneUnavailable` on transient
//! errors (retried with backoff). Steady objects are re-checked every
//! `resync_interval` (default 5 min), and at once when a Secret they reference
//! changes.
//!
//! Source: docs/control-plane-api.md "Hosts and headers" and "Errors" (401
//! for a wrong key, 403 for a key of
//! another workspace) and "Requests" (list, `limit` 1–100).

use std::future::Future;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::api::ListParams;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, ResourceExt};

use super::kind::{self, Flow, Kind, Report};
use super::plane_pass::{in_use_message, probe_plane, report};
use super::report::ReasonTable;
use super::scaffold::{Scope, Wiring, own_kind_stream, run_in_scope};
use super::secrets::ReferencesSecrets;
use crate::api::SecretKeyRef;
use crate::api::conditions::reason;
use crate::api::control_plane::AgentControlPlane;
use crate::api::deployment::AgentDeployment;
use crate::controller::context::Context;
use crate::controller::error::Error;
use crate::controller::scaffold::scoped_api;
use crate::controlplane::ControlPlaneClient;
use crate::plan::status::Outcome;

/// Reconciles of this kind running at once per namespace (each makes one
/// small request).
pub const CONCURRENCY: u16 = 4;

/// `kind` label of this controller's metrics.
pub const KIND: &str = "AgentControlPlane";

crate::plane_kind!(AgentControlPlane, |obj| &obj
    .namespace()
    .unwrap_or_default());

/// One reconcile pass ([`kind::reconcile`]): the finalizer helper adds
/// [`crate::api::control_plane::IN_USE_FINALIZER`] and dispatches to the probe ([`observe`], [`probe`]) or
/// [`cleanup`] (wait until no AgentDeployment uses the plane any more).
///
/// Errors: Kubernetes API failures, transient control plane failures of the
/// probe, and [`Error::InUse`] while AgentDeployments still use a plane
/// being deleted (status is written before each is returned).
pub async fn reconcile(obj: Arc<AgentControlPlane>, ctx: Arc<Context>) -> Result<Action, Error> {
    kind::reconcile(obj, ctx).await
}

/// The AgentDeployments of `deployments` that name the plane `name` in
/// `spec.controlPlaneRef`, as `name` strings, sorted. Pure.
pub fn users_of(deployments: &[AgentDeployment], name: &str) -> Vec<String> {
    let mut users: Vec<String> = deployments
        .iter()
        .filter(|d| !d.spec.control_plane_ref.is_cluster() && d.spec.control_plane_ref.name == name)
        .map(|d| d.name_any())
        .collect();
    users.sort();
    users
}

/// The deletion pass: the finalizer stays while an AgentDeployment of the
/// namespace still names this plane (decided on a fresh list, never the
/// cache), so that their remote deployments can still be deleted with its
/// client; once none does, the finalizer is removed (and the cached client
/// dropped: [`Kind::forget`]). Sends nothing to the control plane.
async fn cleanup(obj: &AgentControlPlane, ctx: &Context) -> Box<Report<AgentControlPlane>> {
    let deployments: Api<AgentDeployment> =
        Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default());
    let listed = match deployments.list(&ListParams::default()).await {
        Ok(listed) => listed,
        Err(e) => return Report::failed(Error::Kube(e)),
    };
    let users = users_of(&listed.items, &obj.name_any());
    if users.is_empty() {
        return Report::end(Action::await_change());
    }
    let message = in_use_message(&users);
    let outcome = Outcome::Progressing {
        reason: reason::IN_USE,
        message: message.clone(),
    };
    report(obj, &outcome, Err(Error::InUse(message)), None)
}

/// The client of the plane, built or reused; a plane whose client cannot
/// be built (a missing Secret, an unusable spec) ends the pass.
async fn observe(
    obj: &AgentControlPlane,
    ctx: &Context,
) -> Flow<ControlPlaneClient, AgentControlPlane> {
    let observer = Some(ctx.metrics.request_observer());
    let timeout = ctx.config.request_timeout;
    match ctx
        .planes
        .client_for_plane(&ctx.client, obj, timeout, observer)
        .await?
    {
        Ok(cp) => Ok(cp),
        Err(blocked) => {
            let outcome = Outcome::Stalled {
                reason: blocked.reason,
                message: blocked.message,
            };
            let then = Ok(Action::requeue(ctx.config.blocked_interval));
            Err(report(obj, &outcome, then, None))
        }
    }
}

/// The authentication probe with `cp` and its report. When the workspace
/// is due to be listed ([`crate::plan::unmanaged::list_due`]), the probe is the paged
/// list of every deployment, and the AgentDeployments of the watched
/// namespaces (from the API server) tell which are managed:
/// `status.unmanaged`. Else
/// one deployment is listed and the last report carried forward.
async fn probe(
    obj: &AgentControlPlane,
    ctx: &Context,
    cp: ControlPlaneClient,
) -> Box<Report<AgentControlPlane>> {
    probe_plane(obj, obj, ctx, cp).await
}

/// The credential (API key or bearer token) and the CA bundle.
impl ReferencesSecrets for AgentControlPlane {
    fn secret_refs(&self) -> Vec<std::borrow::Cow<'_, SecretKeyRef>> {
        [
            self.spec.credential_ref(),
            self.spec.ca_bundle_secret_ref.as_ref(),
        ]
        .into_iter()
        .flatten()
        .map(std::borrow::Cow::Borrowed)
        .collect()
    }
}

/// AgentControlPlanes in the Secret's namespace whose API key or CA bundle is
/// in the Secret `secret_name`. Pure.
pub fn planes_using_secret(
    planes: &[Arc<AgentControlPlane>],
    secret_namespace: Option<&str>,
    secret_name: &str,
) -> Vec<ObjectRef<AgentControlPlane>> {
    planes
        .iter()
        .filter(|p| p.namespace().as_deref() == secret_namespace)
        .filter(|p| p.secret_refs().iter().any(|r| r.name == secret_name))
        .map(|p| ObjectRef::from_obj(p.as_ref()))
        .collect()
}

fn secret_mapper(
    store: Store<AgentControlPlane>,
) -> impl Fn(PartialObjectMeta<Secret>) -> Vec<ObjectRef<AgentControlPlane>> {
    move |secret: PartialObjectMeta<Secret>| {
        planes_using_secret(
            &store.state(),
            secret.namespace().as_deref(),
            &secret.name_any(),
        )
    }
}

/// Runs the `AgentControlPlane` controllers of `scope` (one per namespace,
/// see [`Scope::targets`]) until `shutdown` resolves, then lets in-flight
/// reconciles finish.
///
/// Watches AgentControlPlanes and Secrets (a Secret change re-checks the
/// AgentControlPlanes whose API key or CA bundle it holds); re-checks steady
/// objects every `ctx.config.resync_interval`. Each pass is counted in
/// `ctx.metrics` under kind [`KIND`].
pub async fn run(
    ctx: Arc<Context>,
    scope: Scope,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let build = |namespace: Option<&str>| {
        let planes: Api<AgentControlPlane> = scoped_api(&ctx.client, namespace);
        let (_, secrets) = ctx.secrets.subscribe(&ctx.client, namespace);
        let (store, own) = own_kind_stream(KIND, planes, &ctx.config.shard);
        let controller = Controller::for_stream(own, store);
        ctx.secrets.register(controller.store());
        let mapper = secret_mapper(controller.store());
        // The operator's one metadata-only Secret watch of this scope: only
        // changes of referenced keys, deletions and new Secrets.
        controller.watches_stream(secrets, mapper)
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
    use crate::api::SecretKeyRef;
    use crate::api::control_plane::AgentControlPlaneSpec;

    fn plane(ns: &str, name: &str, key: &str, ca: Option<&str>) -> Arc<AgentControlPlane> {
        let mut p = AgentControlPlane::new(
            name,
            AgentControlPlaneSpec {
                region: None,
                url: Some("http://127.0.0.1:1".into()),
                workspace_id: "ws".into(),
                bearer_token_secret_ref: None,
                api_key_secret_ref: Some(SecretKeyRef {
                    name: key.into(),
                    key: "api-key".into(),
                }),
                ca_bundle_secret_ref: ca.map(|c| SecretKeyRef {
                    name: c.into(),
                    key: "ca.crt".into(),
                }),
                requests_per_second: None,
                burst: None,
                previews: None,
            },
        );
        p.metadata.namespace = Some(ns.into());
        Arc::new(p)
    }

    #[test]
    fn secrets_map_to_the_planes_that_use_them_in_the_same_namespace() {
        let planes = vec![
            plane("a", "p1", "key1", None),
            plane("a", "p2", "key2", Some("ca")),
            plane("b", "p3", "key1", None),
        ];
        let names = |refs: Vec<ObjectRef<AgentControlPlane>>| {
            refs.into_iter().map(|r| r.name).collect::<Vec<_>>()
        };
        assert_eq!(
            names(planes_using_secret(&planes, Some("a"), "key1")),
            ["p1"]
        );
        assert_eq!(names(planes_using_secret(&planes, Some("a"), "ca")), ["p2"]);
        assert_eq!(
            names(planes_using_secret(&planes, Some("b"), "key1")),
            ["p3"]
        );
        assert!(planes_using_secret(&planes, Some("a"), "other").is_empty());
    }
}
