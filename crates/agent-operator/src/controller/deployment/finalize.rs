//! The finalize step of the AgentDeployment pass
//! ([`Step::Finalize`](super::step::Step::Finalize)): the finalizer of an
//! object that names a deployment, written alone before anything else (an
//! object that names none gets it with the create-pending marker, in the
//! write before its POST: [`super::obtain`]). The pass goes on: it does
//! not wait for that write to trigger the next one.

use kube::Api;

use super::report::{Flow, Report};
use crate::api::deployment::{AgentDeployment, FINALIZER};
use crate::controller::kind;

/// Adds the finalizer to `obj` alone (one metadata write that carries the
/// object's resourceVersion and finalizer list). `Err` ends the pass with
/// the Kubernetes API error (409 when `obj` is not the object as stored).
pub async fn run(api: &Api<AgentDeployment>, obj: &AgentDeployment) -> Flow<()> {
    kind::set_metadata(api, obj, Some(FINALIZER), &[])
        .await
        .map_err(Report::failed)
}
