//! Reconciler of `ClusterAgentControlPlane`: the AgentControlPlane's pass
//! ([`super::control_plane`]: the authentication probe, the unmanaged
//! report, `Ready`/`Stalled`) on a cluster-scoped object whose Secrets are
//! in the operator's cluster resource namespace
//! (`--cluster-resource-namespace`), and the same in-use finalizer: it stays
//! while an AgentDeployment or AgentListener of any namespace names it, so
//! that deleting everything in one go still deletes the remote deployments.
//!
//! Runs only when the operator watches every namespace (a cluster plane
//! serves every namespace it allows). Source: docs/control-plane-api.md
//! "Hosts and headers", "Errors" (as for an AgentControlPlane).

use std::future::Future;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::ListParams;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};

use super::kind::{self, Flow, Kind, Report};
use super::plane_pass::{in_use_message, probe_plane, report};
use super::planes::Origin;
use super::report::ReasonTable;
use super::scaffold::{Scope, Wiring, own_kind_stream, run_in_scope, strip_managed_fields};
use super::secrets::ReferencesSecrets;
use crate::api::SecretKeyRef;
use crate::api::cluster_control_plane::ClusterAgentControlPlane;
use crate::api::conditions::reason;
use crate::api::deployment::AgentDeployment;
use crate::api::listener::AgentListener;
use crate::controller::context::Context;
use crate::controller::error::Error;
use crate::controlplane::ControlPlaneClient;
use crate::plan::status::Outcome;

/// `kind` label of this controller's metrics.
pub const KIND: &str = "ClusterAgentControlPlane";

/// Reconciles of this kind running at once (each makes one small request).
pub const CONCURRENCY: u16 = 2;

crate::plane_kind!(ClusterAgentControlPlane, |obj| "");

/// The probe of `obj` read as an AgentControlPlane of the cluster resource
/// namespace ([`probe_plane`]).
async fn probe(
    obj: &ClusterAgentControlPlane,
    ctx: &Context,
    cp: ControlPlaneClient,
) -> Box<Report<ClusterAgentControlPlane>> {
    let view = obj.as_plane(&ctx.planes.cluster_resource_namespace());
    probe_plane(obj, &view, ctx, cp).await
}

/// The credential and the CA bundle, Secrets of the cluster resource
/// namespace (registered with it: [`super::secrets::Secrets::register_in`]).
impl ReferencesSecrets for ClusterAgentControlPlane {
    fn secret_refs(&self) -> Vec<std::borrow::Cow<'_, SecretKeyRef>> {
        [
            self.spec.plane.credential_ref(),
            self.spec.plane.ca_bundle_secret_ref.as_ref(),
        ]
        .into_iter()
        .flatten()
        .map(std::borrow::Cow::Borrowed)
        .collect()
    }
}

/// The client of the plane, built or reused; a plane whose client cannot
/// be built (a missing Secret, an unusable spec) ends the pass, `Stalled`.
async fn observe(
    obj: &ClusterAgentControlPlane,
    ctx: &Context,
) -> Flow<ControlPlaneClient, ClusterAgentControlPlane> {
    let secrets = ctx.planes.cluster_resource_namespace();
    let view = obj.as_plane(&secrets);
    let origin = Origin::cluster(&obj.name_any(), &secrets);
    let observer = Some(ctx.metrics.request_observer());
    match ctx
        .planes
        .client_for_origin(
            &ctx.client,
            &view,
            &origin,
            ctx.config.request_timeout,
            observer,
        )
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

/// The AgentDeployments and AgentListeners of `deployments` and
/// `listeners` that name the ClusterAgentControlPlane `name`, as
/// `namespace/name` strings, sorted. Pure.
pub fn users_of(
    deployments: &[AgentDeployment],
    listeners: &[AgentListener],
    name: &str,
) -> Vec<String> {
    let key = |ns: Option<String>, n: String| format!("{}/{n}", ns.unwrap_or_default());
    let mut users: Vec<String> = deployments
        .iter()
        .filter(|d| d.spec.control_plane_ref.is_cluster() && d.spec.control_plane_ref.name == name)
        .map(|d| key(d.namespace(), d.name_any()))
        .chain(
            listeners
                .iter()
                .filter(|l| {
                    l.spec.control_plane_ref.is_cluster() && l.spec.control_plane_ref.name == name
                })
                .map(|l| key(l.namespace(), l.name_any())),
        )
        .collect();
    users.sort();
    users
}

/// The deletion pass: the finalizer stays while an AgentDeployment or
/// AgentListener of any namespace names this plane (decided on a fresh
/// list, never the cache); once none does, it goes (and the cached client
/// with it). Sends nothing to the control plane.
async fn cleanup(
    obj: &ClusterAgentControlPlane,
    ctx: &Context,
) -> Box<Report<ClusterAgentControlPlane>> {
    let lp = ListParams::default();
    let deployments: Api<AgentDeployment> = Api::all(ctx.client.clone());
    let listeners: Api<AgentListener> = Api::all(ctx.client.clone());
    let (d, l) = match (deployments.list(&lp).await, listeners.list(&lp).await) {
        (Ok(d), Ok(l)) => (d, l),
        (Err(e), _) | (_, Err(e)) => return Report::failed(Error::Kube(e)),
    };
    let users = users_of(&d.items, &l.items, &obj.name_any());
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

/// One reconcile pass ([`kind::reconcile`]).
///
/// Errors: Kubernetes API failures, transient control plane failures of the
/// probe, and [`Error::InUse`] while objects still use a plane being
/// deleted (status is written before each is returned).
pub async fn reconcile(
    obj: Arc<ClusterAgentControlPlane>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    kind::reconcile(obj, ctx).await
}

/// The ClusterAgentControlPlanes whose credential or CA bundle is the
/// Secret `name` of the cluster resource namespace `secrets` (`namespace`:
/// the Secret's). Pure.
pub fn planes_using_secret(
    planes: &[Arc<ClusterAgentControlPlane>],
    secrets: &str,
    namespace: Option<&str>,
    name: &str,
) -> Vec<ObjectRef<ClusterAgentControlPlane>> {
    if namespace != Some(secrets) {
        return Vec::new();
    }
    planes
        .iter()
        .filter(|p| p.secret_refs().iter().any(|r| r.name == name))
        .map(|p| ObjectRef::from_obj(p.as_ref()))
        .collect()
}

/// The metadata-only watch of Namespaces (their labels decide which may use
/// a ClusterAgentControlPlane): its store, registered with the client
/// cache, and the stream that keeps it.
fn namespace_watch(
    ctx: &Context,
) -> impl futures::Stream<Item = Result<PartialObjectMeta<Namespace>, watcher::Error>> + Send + 'static
{
    let (store, writer) = reflector::store::<PartialObjectMeta<Namespace>>();
    ctx.planes.register_namespace_store(store);
    let api: Api<PartialObjectMeta<Namespace>> = Api::all(ctx.client.clone());
    watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(strip_managed_fields)
        .reflect(writer)
        .applied_objects()
}

/// Runs the ClusterAgentControlPlane controller until `shutdown` resolves
/// (then lets in-flight reconciles finish): its own watch (the store the
/// client cache reads), the Secrets of the cluster resource namespace (a
/// change re-checks the planes whose key or CA bundle it holds), and the
/// Namespaces' metadata (for `spec.namespaces`). Each pass is counted in
/// `ctx.metrics` under kind [`KIND`].
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let namespaces = namespace_watch(&ctx);
    let keep = tokio::spawn(async move {
        use futures::StreamExt;
        namespaces.for_each(|_| std::future::ready(())).await;
    });
    // Cluster-scoped: one controller, whatever the operator's scope.
    let build = |_: Option<&str>| {
        let secrets_ns = ctx.planes.cluster_resource_namespace();
        let planes: Api<ClusterAgentControlPlane> = Api::all(ctx.client.clone());
        let (store, own) = own_kind_stream(KIND, planes, &ctx.config.shard);
        ctx.planes.register_cluster_store(store.clone());
        ctx.secrets.register_in(store.clone(), secrets_ns.clone());
        let (_, secrets) = ctx.secrets.subscribe(&ctx.client, None);
        let mapped = store.clone();
        let controller = Controller::for_stream(own, store).watches_stream(
            secrets,
            move |secret: PartialObjectMeta<Secret>| {
                planes_using_secret(
                    &mapped.state(),
                    &secrets_ns,
                    secret.namespace().as_deref(),
                    &secret.name_any(),
                )
            },
        );
        Wiring::new(KIND, controller, reconcile)
    };
    run_in_scope(
        ctx.clone(),
        Scope::AllNamespaces,
        KIND,
        CONCURRENCY,
        shutdown,
        build,
        || {},
    )
    .await;
    keep.abort();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(ns: &str, name: &str, plane: serde_json::Value) -> AgentDeployment {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentDeployment",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"source": "external_docker", "controlPlaneRef": plane,
                "sourceRevisionConfig": {"imageUri": "r.example/a:1"}}
        }))
        .unwrap()
    }

    #[test]
    fn the_users_of_a_cluster_plane_are_the_objects_of_every_namespace_that_name_it() {
        let cluster = serde_json::json!({"kind": "ClusterAgentControlPlane", "name": "shared"});
        let deployments = vec![
            deployment("team-b", "b", cluster.clone()),
            deployment("team-a", "a", cluster.clone()),
            deployment("team-a", "own", serde_json::json!({"name": "shared"})),
            deployment(
                "team-c",
                "other",
                serde_json::json!({"kind": "ClusterAgentControlPlane", "name": "other"}),
            ),
        ];
        assert_eq!(
            users_of(&deployments, &[], "shared"),
            ["team-a/a", "team-b/b"]
        );
    }
}
