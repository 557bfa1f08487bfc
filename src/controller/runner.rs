//! Wiring of the controllers: watches, the Secret and AgentControlPlane
//! mappers, concurrency and graceful shutdown.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Resource, ResourceExt};
use tracing::debug;

use super::Context;
use super::deployment::{error_policy, reconcile};
use crate::api::control_plane::AgentControlPlane;
use crate::api::deployment::AgentDeployment;

/// Where the controller watches.
#[derive(Clone, Debug, Default)]
pub enum Scope {
    /// Every namespace.
    #[default]
    AllNamespaces,
    /// One namespace.
    Namespace(String),
}

fn api<K>(client: &kube::Client, scope: &Scope) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match scope {
        Scope::AllNamespaces => Api::all(client.clone()),
        Scope::Namespace(ns) => Api::namespaced(client.clone(), ns),
    }
}

/// Runs the `AgentDeployment` controller until `shutdown` resolves.
///
/// Besides its own kind it watches Secrets (an AgentDeployment is reconciled
/// when a Secret it references, directly or through its AgentControlPlane's
/// API key, changes or appears) and AgentControlPlanes.
pub async fn run(
    ctx: Arc<Context>,
    scope: Scope,
    concurrency: u16,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let client = ctx.client.clone();
    let deployments: Api<AgentDeployment> = api(&client, &scope);
    let secrets: Api<Secret> = api(&client, &scope);
    let planes: Api<AgentControlPlane> = api(&client, &scope);

    // A reflector of AgentControlPlanes, so the Secret mapper can tell which
    // Secret holds which control plane's API key.
    let (plane_store, plane_writer) = reflector::store::<AgentControlPlane>();
    let plane_reflector = reflector(
        plane_writer,
        watcher(planes.clone(), watcher::Config::default()),
    )
    .default_backoff()
    .applied_objects()
    .for_each(|_| futures::future::ready(()));
    let plane_task = tokio::spawn(plane_reflector);

    let controller = Controller::new(deployments, watcher::Config::default().any_semantic());
    let store = controller.store();
    let secret_store = store.clone();
    let plane_store_for_secrets = plane_store.clone();
    controller
        .watches(
            secrets,
            watcher::Config::default(),
            move |secret: Secret| {
                referencing_secret(&secret_store, &plane_store_for_secrets, &secret)
            },
        )
        .watches(
            planes,
            watcher::Config::default(),
            move |plane: AgentControlPlane| referencing_plane(&store, &plane),
        )
        .with_config(kube::runtime::controller::Config::default().concurrency(concurrency))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|res| async move {
            match res {
                Ok((obj, _)) => debug!(object = %obj, "reconciled"),
                Err(e) => debug!(error = %e, "reconcile failed"),
            }
        })
        .await;
    plane_task.abort();
}

/// AgentDeployments that reference `secret`, directly in `spec.secrets` or as
/// the API key of their AgentControlPlane.
fn referencing_secret(
    deployments: &Store<AgentDeployment>,
    planes: &Store<AgentControlPlane>,
    secret: &Secret,
) -> Vec<ObjectRef<AgentDeployment>> {
    let ns = secret.namespace();
    let name = secret.name_any();
    let key_of: Vec<String> = planes
        .state()
        .iter()
        .filter(|p| p.namespace() == ns && p.spec.api_key_secret_ref.name == name)
        .map(|p| p.name_any())
        .collect();
    deployments
        .state()
        .iter()
        .filter(|d| d.namespace() == ns)
        .filter(|d| {
            key_of.contains(&d.spec.control_plane_ref.name)
                || d.spec.secrets.iter().any(|s| {
                    s.value_from
                        .as_ref()
                        .is_some_and(|f| f.secret_key_ref.name == name)
                })
        })
        .map(|d| ObjectRef::from_obj(d.as_ref()))
        .collect()
}

/// AgentDeployments on the AgentControlPlane `plane`.
fn referencing_plane(
    deployments: &Store<AgentDeployment>,
    plane: &AgentControlPlane,
) -> Vec<ObjectRef<AgentDeployment>> {
    let ns = plane.namespace();
    let name = plane.name_any();
    deployments
        .state()
        .iter()
        .filter(|d| d.namespace() == ns && d.spec.control_plane_ref.name == name)
        .map(|d| ObjectRef::from_obj(d.as_ref()))
        .collect()
}
