//! What wakes the AgentDeployments on a plane: which changes of an
//! AgentControlPlane matter to them ([`plane_wave_hash`],
//! [`plane_trigger_hash`]), which of them wait for it ([`is_blocked`]), and,
//! for a ClusterAgentControlPlane (docs/PLATFORM-PLANES.md), the watches of
//! the cluster planes (their spec includes `spec.namespaces`) and of the
//! Namespaces' labels, which may allow or refuse a namespace. Those two
//! watches run only in the cluster-wide controller.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};

use super::cached::CachedDeployment;
use crate::api::cluster_control_plane::ClusterAgentControlPlane;
use crate::api::conditions::{READY, find, reason};
use crate::api::control_plane::AgentControlPlane;
use crate::controller::deployment::context::DeploymentContext;
use crate::controller::scaffold::strip_managed_fields;

/// `controller` also woken by the ClusterAgentControlPlanes and the
/// Namespaces' labels that change ([`trigger`], [`namespace_trigger`]):
/// the AgentDeployments of `deployments` on them. Cluster-wide only
/// (`namespace` `None`); a controller of one namespace is returned as it
/// is.
pub(super) fn cluster_watches(
    controller: Controller<CachedDeployment>,
    ctx: &DeploymentContext,
    namespace: Option<&str>,
    deployments: Store<CachedDeployment>,
) -> Controller<CachedDeployment> {
    if namespace.is_some() {
        return controller;
    }
    controller
        .watches_stream(trigger(ctx), mapper(deployments.clone()))
        .watches_stream(namespace_trigger(ctx), namespace_mapper(deployments))
}

/// The ClusterAgentControlPlanes whose spec, readiness or `Stalled`
/// changed ([`plane_trigger_hash`] of their AgentControlPlane view).
fn trigger(
    ctx: &DeploymentContext,
) -> futures::stream::BoxStream<'static, Result<ClusterAgentControlPlane, watcher::Error>> {
    let api: Api<ClusterAgentControlPlane> = Api::all(ctx.client.clone());
    watcher(api, ctx.config.shard.watch(watcher::Config::default()))
        .default_backoff()
        .modify(strip_managed_fields)
        .touched_objects()
        .predicate_filter(
            |p: &ClusterAgentControlPlane| plane_trigger_hash(&p.as_plane("")),
            Default::default(),
        )
        .boxed()
}

/// Maps a ClusterAgentControlPlane event to the AgentDeployments of
/// `deployments` on it: all of them when its [`plane_wave_hash`] changed
/// since its last event (or it appeared or went), else the blocked ones
/// ([`is_blocked`]).
fn mapper(
    deployments: Store<CachedDeployment>,
) -> impl Fn(ClusterAgentControlPlane) -> Vec<ObjectRef<CachedDeployment>> + Send + Sync + 'static {
    let seen = std::sync::Mutex::new(std::collections::HashMap::new());
    move |plane: ClusterAgentControlPlane| {
        let name = plane.name_any();
        let now = (
            plane_wave_hash(&plane.as_plane("")),
            plane.metadata.deletion_timestamp.is_some(),
        );
        let before = seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.clone(), now);
        let wave = before.is_none_or(|b| b != now);
        deployments
            .state()
            .iter()
            .filter(|d| {
                d.spec.control_plane_ref.is_cluster() && d.spec.control_plane_ref.name == name
            })
            .filter(|d| wave || is_blocked(d))
            .map(|d| ObjectRef::from_obj(d.as_ref()))
            .collect()
    }
}

/// The Namespaces whose labels changed (they may allow or refuse it on a
/// ClusterAgentControlPlane's `spec.namespaces.selector`), metadata only.
fn namespace_trigger(
    ctx: &DeploymentContext,
) -> futures::stream::BoxStream<'static, Result<PartialObjectMeta<Namespace>, watcher::Error>> {
    let api: Api<PartialObjectMeta<Namespace>> = Api::all(ctx.client.clone());
    watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(strip_managed_fields)
        .touched_objects()
        .predicate_filter(
            |ns: &PartialObjectMeta<Namespace>| Some(labels_hash(ns.metadata.labels.as_ref())),
            Default::default(),
        )
        .boxed()
}

/// Hash of a Namespace's labels. Pure.
fn labels_hash(labels: Option<&BTreeMap<String, String>>) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    labels.hash(&mut h);
    h.finish()
}

/// Maps a Namespace whose labels changed to its AgentDeployments on a
/// cluster plane that refused it (`ControlPlaneNotAllowed`): a label that
/// allows it continues them at once. Steady ones are left to their next
/// pass.
fn namespace_mapper(
    deployments: Store<CachedDeployment>,
) -> impl Fn(PartialObjectMeta<Namespace>) -> Vec<ObjectRef<CachedDeployment>> + Send + Sync + 'static
{
    move |ns: PartialObjectMeta<Namespace>| {
        let name = ns.name_any();
        deployments
            .state()
            .iter()
            .filter(|d| d.namespace().as_deref() == Some(name.as_str()))
            .filter(|d| {
                find(&d.conditions(), READY)
                    .is_some_and(|c| c.reason == reason::CONTROL_PLANE_NOT_ALLOWED)
            })
            .map(|d| ObjectRef::from_obj(d.as_ref()))
            .collect()
    }
}

/// Hash of what in an AgentControlPlane changes the decision of every one
/// of its AgentDeployments: its generation (the spec) and its `Stalled`
/// status. A `Ready` flip is not in it: a probe that fails for a while and
/// recovers would otherwise send a wave of drift checks, the second exactly
/// when the service recovers.
pub fn plane_wave_hash(obj: &AgentControlPlane) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    obj.metadata.generation.hash(&mut h);
    let conditions = obj
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    find(conditions, crate::plan::status::STALLED)
        .map(|c| c.status.as_str())
        .hash(&mut h);
    h.finish()
}

/// Hash of what in an AgentControlPlane may unblock or change its
/// AgentDeployments: its generation (the spec) and its `Ready` and `Stalled`
/// condition statuses (not their messages or times). Which of its
/// AgentDeployments a change triggers is the choice of `referencing_plane`
/// in [`super::runner`].
pub fn plane_trigger_hash(obj: &AgentControlPlane) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    plane_wave_hash(obj).hash(&mut h);
    obj.status
        .as_ref()
        .and_then(|s| find(&s.conditions, READY))
        .map(|c| {
            (
                c.status.as_str(),
                // A probe of a new generation that stays Ready still
                // releases the AgentDeployments waiting for that check.
                c.observed_generation == obj.metadata.generation,
            )
        })
        .hash(&mut h);
    Some(h.finish())
}

/// True when `d` waits for its AgentControlPlane or a Secret (its `Ready`
/// condition says `ControlPlaneNotReady` or `SecretNotFound`): such an
/// object is retried when its plane or a Secret of the plane changes, while
/// steady ones are not.
pub(super) fn is_blocked(d: &CachedDeployment) -> bool {
    use crate::api::conditions::reason;
    find(&d.conditions(), READY).is_some_and(|c| {
        c.reason == reason::CONTROL_PLANE_NOT_READY
            || c.reason == reason::CONTROL_PLANE_NOT_CHECKED
            || c.reason == reason::SECRET_NOT_FOUND
            || c.reason == reason::CONTROL_PLANE_NOT_ALLOWED
            || c.reason == reason::DELETION_BLOCKED
    })
}
