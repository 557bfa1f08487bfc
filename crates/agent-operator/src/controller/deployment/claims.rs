//! The edges of "one owner per remote deployment" (the decisions are
//! [`crate::plan::claims`]; docs/BEHAVIOUR.md, "One owner per remote
//! deployment"):
//! - [`ClaimIndex`], in the context: every AgentDeployment store of the
//!   operator, read as the claims about one remote deployment (a query
//!   over the watch stores, made only when a decision needs it: a name
//!   conflict, an adoption, a deletion; nothing is kept per object);
//! - [`fresh`]: the one object a decision rests on, read again from the API
//!   server with its AgentControlPlane, so that handing a deployment over,
//!   refusing a second owner and deleting are never decided on a stale
//!   cache alone;
//! - [`hand_over`]: the write that gives a remote deployment to the object
//!   that claims it.
//!
//! Why a query and not a kept index: the decisions are rare (a fleet's
//! creates find no deployment of their name and never ask), an index would
//! cost memory per object for the life of the process, and the stores are
//! already there. A single cluster-wide watch delivers events in the order
//! of the API server, so when a deletion reaches its pass, the objects
//! applied before it (the new name of a rename) are in the store.

use std::sync::Mutex;

use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::Store;
use kube::{Api, ResourceExt};

use super::cached::CachedDeployment;
use crate::api::control_plane::AgentControlPlane;
use crate::api::deployment::{
    AgentDeployment, AgentDeploymentSpec, CREATE_PENDING_ANNOTATION, DEPLOYMENT_ID_ANNOTATION,
    FINALIZER, HANDED_OVER_FROM_ANNOTATION,
};
use crate::controller::context::Shared;
use crate::controller::error::Error;
use crate::controller::planes::ClientCache;
use crate::plan::claims::{Claim, PlaneId, claim, remote_name};
pub use crate::plan::claims::{claim_of, plane_id};

/// The AgentDeployment stores of the operator (one per watched namespace,
/// or one for the cluster), read as claims (one per operator, in the
/// context).
#[derive(Default)]
pub struct ClaimIndex {
    stores: Mutex<Vec<Store<CachedDeployment>>>,
}

impl std::fmt::Debug for ClaimIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClaimIndex")
    }
}

impl ClaimIndex {
    /// Adds a controller's AgentDeployment store.
    pub fn register(&self, store: Store<CachedDeployment>) {
        self.stores
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(store);
    }

    /// The claims about the remote deployment named `name` or with the id
    /// `id`: every watched AgentDeployment whose remote name is `name`, or
    /// whose id annotation or `spec.deploymentId` is `id`, each with its
    /// plane as the AgentControlPlane stores show it. The status of an
    /// object is parsed only when it matches (its id annotation records
    /// the id its status holds, so none is missed).
    pub fn about(&self, planes: &ClientCache, name: Option<&str>, id: Option<&str>) -> Vec<Claim> {
        let stores = self
            .stores
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let same_id = |v: Option<&str>| v.zip(id).is_some_and(|(v, id)| v.eq_ignore_ascii_case(id));
        let mut out = Vec::new();
        for store in stores {
            for obj in store.state() {
                let annotated = obj.annotation(DEPLOYMENT_ID_ANNOTATION);
                let matches = name.is_some_and(|n| remote_name(&obj.metadata, &obj.spec) == n)
                    || same_id(annotated)
                    || same_id(obj.spec.deployment_id.as_deref());
                if !matches {
                    continue;
                }
                let holding = obj.holding();
                let plane = plane_of(planes, &obj.metadata, &obj.spec);
                out.push(claim(
                    &obj.whole_metadata(),
                    &obj.spec,
                    holding.deployment_id,
                    holding.expired,
                    plane,
                ));
            }
        }
        out
    }
}

/// The plane of an object, from the AgentControlPlane stores.
fn plane_of(
    planes: &ClientCache,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    spec: &AgentDeploymentSpec,
) -> Option<PlaneId> {
    cached_plane_id(planes, meta.namespace.as_deref()?, &spec.control_plane_ref)
}

/// The identity of the plane `plane` names for an object of `namespace`, as
/// the watch stores hold its object (an AgentControlPlane, or a
/// ClusterAgentControlPlane); `None` when no store has it.
pub fn cached_plane_id(
    planes: &ClientCache,
    namespace: &str,
    plane: &crate::api::control_plane::ControlPlaneRef,
) -> Option<PlaneId> {
    if plane.is_cluster() {
        let p = planes.cached_cluster_plane(&plane.name)?;
        return Some(PlaneId::new(
            &p.spec.plane.base_url()?,
            &p.spec.plane.workspace_id,
        ));
    }
    plane_id(planes.cached_plane(namespace, &plane.name)?.as_ref())
}

/// The object `key` (`namespace/name`) read fresh from the API server, with
/// its claim on its AgentControlPlane (read fresh too); `None` when it is
/// gone. Errors: the Kubernetes API error.
pub async fn fresh(ctx: &Shared, key: &str) -> Result<Option<(AgentDeployment, Claim)>, Error> {
    let Some((ns, name)) = key.split_once('/') else {
        return Ok(None);
    };
    let api: Api<AgentDeployment> = Api::namespaced(ctx.client.clone(), ns);
    let Some(obj) = api.get_opt(name).await.map_err(Error::Kube)? else {
        return Ok(None);
    };
    let plane = fresh_plane_id(ctx, ns, &obj.spec.control_plane_ref).await?;
    let claim = claim_of(&obj, plane);
    Ok(Some((obj, claim)))
}

/// The identity of the plane `plane` names for an object of `namespace`,
/// its object read fresh from the API server; `None` when it does not
/// exist. Errors: the Kubernetes API error.
async fn fresh_plane_id(
    ctx: &Shared,
    namespace: &str,
    plane: &crate::api::control_plane::ControlPlaneRef,
) -> Result<Option<PlaneId>, Error> {
    if plane.is_cluster() {
        let api: Api<crate::api::ClusterAgentControlPlane> = Api::all(ctx.client.clone());
        let found = api.get_opt(&plane.name).await.map_err(Error::Kube)?;
        return Ok(found.and_then(|p| {
            Some(PlaneId::new(
                &p.spec.plane.base_url()?,
                &p.spec.plane.workspace_id,
            ))
        }));
    }
    let api: Api<AgentControlPlane> = Api::namespaced(ctx.client.clone(), namespace);
    let found = api.get_opt(&plane.name).await.map_err(Error::Kube)?;
    Ok(found.as_ref().and_then(plane_id))
}

/// Gives the remote deployment `id` to `to` (read fresh): its id
/// annotation, the [`HANDED_OVER_FROM_ANNOTATION`] naming `from`
/// (`namespace/name`), and the finalizer if it lacks it (so that the
/// deployment is never left without an owner that cleans it up), in one
/// merge patch carrying the resourceVersion of `to` as read (409 when it
/// changed since: the deletion pass runs again on a fresh read). Its
/// arrival triggers the pass of `to` that takes the deployment over.
/// Errors: the Kubernetes API error.
pub async fn hand_over(
    ctx: &Shared,
    to: &AgentDeployment,
    id: &str,
    from: &str,
) -> Result<(), Error> {
    let ns = to.namespace().ok_or(Error::MissingObjectKey("namespace"))?;
    let api: Api<AgentDeployment> = Api::namespaced(ctx.client.clone(), &ns);
    let mut finalizers = to.finalizers().to_vec();
    if !finalizers.iter().any(|f| f == FINALIZER) {
        finalizers.push(FINALIZER.to_owned());
    }
    let patch = serde_json::json!({"metadata": {
        "resourceVersion": to.resource_version(),
        "finalizers": finalizers,
        "annotations": {
            DEPLOYMENT_ID_ANNOTATION: id,
            HANDED_OVER_FROM_ANNOTATION: from,
            CREATE_PENDING_ANNOTATION: null,
        },
    }});
    api.patch(
        &to.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(Error::Kube)?;
    Ok(())
}
