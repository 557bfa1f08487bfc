//! The Kubernetes edge of the unmanaged report ([`crate::plan::unmanaged`]):
//! what the AgentDeployments of a scope hold or claim on one control plane,
//! read from the API server. Shared by the AgentControlPlane controller
//! (`status.unmanaged`) and `agentctl unmanaged`, `export` and `revisions`.
//!
//! Reads only, and only what a decision needs: the AgentDeployments, page
//! by page; the AgentControlPlane of an object only when it claims by name
//! a name the workspace lists ([`Managed::by_name`]: an id tells the
//! deployment without its plane), each one once per report (a store's copy
//! first, when the caller has one, else one `GET`). Source:
//! docs/BEHAVIOUR.md "One owner per remote deployment".

use std::collections::{HashMap, HashSet};

use kube::Api;
use kube::api::ListParams;

use super::planes::ClientCache;
use crate::api::control_plane::AgentControlPlane;
use crate::api::deployment::AgentDeployment;
use crate::plan::claims::{Claim, PlaneId, claim_of, plane_id};
use crate::plan::unmanaged::Managed;

/// AgentDeployments read per page of a list.
const PAGE: u32 = 500;

/// The planes of the AgentControlPlanes a report needs, by
/// `namespace/name`, each read once.
pub struct Planes<'a> {
    client: kube::Client,
    /// The operator's AgentControlPlane stores, read before the API server.
    stores: Option<&'a ClientCache>,
    known: HashMap<(String, String), Option<PlaneId>>,
}

impl<'a> Planes<'a> {
    /// Planes read with `client`, from `stores` first when given.
    pub fn new(client: kube::Client, stores: Option<&'a ClientCache>) -> Self {
        Self {
            client,
            stores,
            known: HashMap::new(),
        }
    }

    /// Records the plane of the AgentControlPlane at hand.
    pub fn insert(&mut self, plane: &AgentControlPlane) {
        let key = (
            plane.metadata.namespace.clone().unwrap_or_default(),
            plane.metadata.name.clone().unwrap_or_default(),
        );
        self.known.insert(key, plane_id(plane));
    }

    /// The plane of the AgentControlPlane `namespace`/`name`; `None` when it
    /// does not exist or names no URL. Errors: the Kubernetes API error of
    /// its `GET`.
    pub async fn get(
        &mut self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<PlaneId>, kube::Error> {
        let key = (namespace.to_owned(), name.to_owned());
        if let Some(known) = self.known.get(&key) {
            return Ok(known.clone());
        }
        let cached = self.stores.and_then(|s| s.cached_plane(namespace, name));
        let plane = match cached {
            Some(plane) => plane_id(&plane),
            None => {
                let api: Api<AgentControlPlane> = Api::namespaced(self.client.clone(), namespace);
                api.get_opt(name).await?.as_ref().and_then(plane_id)
            }
        };
        self.known.insert(key, plane.clone());
        Ok(plane)
    }

    /// The plane `plane` names for an object of `namespace`: its
    /// AgentControlPlane ([`Self::get`]) or ClusterAgentControlPlane (the
    /// store's copy, else one `GET`, each once per report). Errors: the
    /// Kubernetes API error of its `GET`.
    pub async fn of_ref(
        &mut self,
        namespace: &str,
        plane: &crate::api::control_plane::ControlPlaneRef,
    ) -> Result<Option<PlaneId>, kube::Error> {
        if !plane.is_cluster() {
            return self.get(namespace, &plane.name).await;
        }
        let key = (String::new(), plane.name.clone());
        if let Some(known) = self.known.get(&key) {
            return Ok(known.clone());
        }
        let id_of = |p: &crate::api::ClusterAgentControlPlane| {
            Some(PlaneId::new(
                &p.spec.plane.base_url()?,
                &p.spec.plane.workspace_id,
            ))
        };
        let found = match self
            .stores
            .and_then(|s| s.cached_cluster_plane(&plane.name))
        {
            Some(p) => id_of(&p),
            None => {
                let api: Api<crate::api::ClusterAgentControlPlane> = Api::all(self.client.clone());
                api.get_opt(&plane.name).await?.as_ref().and_then(id_of)
            }
        };
        self.known.insert(key, found.clone());
        Ok(found)
    }

    /// The claim of `d`, with its plane when it claims by name one of
    /// `names` (else without: it is not needed). Errors: as [`Planes::get`].
    pub async fn claim(
        &mut self,
        d: &AgentDeployment,
        names: &HashSet<&str>,
    ) -> Result<Claim, kube::Error> {
        let mut claim = claim_of(d, None);
        if Managed::by_name(&claim) && names.contains(claim.name.as_str()) {
            let namespace = d.metadata.namespace.as_deref().unwrap_or_default();
            claim.plane = self.of_ref(namespace, &d.spec.control_plane_ref).await?;
        }
        Ok(claim)
    }
}

/// Adds what `deployments` hold or claim on `plane` to `managed`, for a
/// workspace that lists the remote names `names`. Errors: as
/// [`Planes::get`].
pub async fn add_all(
    managed: &mut Managed,
    deployments: &[AgentDeployment],
    plane: &PlaneId,
    names: &HashSet<&str>,
    planes: &mut Planes<'_>,
) -> Result<(), kube::Error> {
    for d in deployments {
        managed.add(&planes.claim(d, names).await?, plane);
    }
    Ok(())
}

/// What the AgentDeployments of `namespace` (`None`: every namespace) hold
/// or claim on `plane`, added to `managed`, read page by page. Errors: the
/// Kubernetes API error of a list or a `GET`.
pub async fn add_namespace(
    managed: &mut Managed,
    namespace: Option<&str>,
    plane: &PlaneId,
    names: &HashSet<&str>,
    planes: &mut Planes<'_>,
) -> Result<(), kube::Error> {
    let api: Api<AgentDeployment> =
        crate::controller::scaffold::scoped_api(&planes.client, namespace);
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let page = api.list(&params).await?;
        add_all(managed, &page.items, plane, names, planes).await?;
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(next) => params = params.continue_token(&next),
            None => return Ok(()),
        }
    }
}
