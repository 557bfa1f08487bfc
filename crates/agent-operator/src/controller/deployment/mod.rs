//! Reconciler of `AgentDeployment`: creates, patches and deletes the remote
//! deployment on the control plane and follows its latest revision.
//!
//! A pass is a state machine of steps (Flux helm-controller's
//! `DetermineReleaseState` then `actionForState`; docs/control-plane-api.md
//! "Polling": the documented client flow; "Requests" and "Revision"):
//! [`step::decide()`] (pure) reads what the pass observed so far
//! ([`step::Seen`]: the object, the in-process memory and the clock, the
//! inputs once read) and returns the one [`step::Step`] to take;
//! [`machine`] takes it and decides again, until a step ends the pass with
//! one [`report::Report`] (status, annotations, events, requeue, and the
//! changes of the in-process memory) that only [`reconcile`] writes
//! ([`super::kind::write`]), in the one order of every path and every kind. The
//! steps, one file each:
//! - [`finalize`]: the finalizer, written alone before anything else;
//! - [`observe`] → [`observe::Observed`]: the inputs read from Kubernetes
//!   (and the image's registry) and the desired state built from them;
//! - [`expire`]: `spec.expiry` reached, on a fresh read;
//! - [`ending`]: the pass ends with no request (paused, expired, an input
//!   missing, a wait, the spread first check after a restart);
//! - [`act`](mod@act): at most one read and one mutation of the control
//!   plane (finding or creating the deployment: [`obtain`]), then
//!   [`follow`]: the latest revision, decided by
//!   [`verdict`](crate::plan::verdict) (pure);
//! - [`cleanup`]: the deletion, which DELETEs the remote deployment (404
//!   counts as done) and keeps the finalizer until GET answers 404, since
//!   delete is asynchronous; meanwhile the deployment is read on a backoff
//!   and DELETE is not sent again unless the delete did not take
//!   ([`deleting`]).

mod act;
pub mod cached;
mod change;
pub mod claims;
pub mod cleanup;
pub mod context;
pub mod deleting;
mod ending;
pub mod expire;
mod finalize;
mod follow;
mod machine;
pub mod names;
pub mod observe;
mod obtain;
pub mod pass;
pub mod plane;
mod plane_watch;
mod poll;
pub mod previews;
pub mod promotion;
pub mod report;
pub mod runner;
#[cfg(test)]
mod sequence_tests;
pub mod step;
pub mod trigger;
pub mod verify;

pub use runner::{error_policy, reconcile};

use std::borrow::Cow;
use std::future::Future;
use std::time::Duration;

use kube::Api;

use self::report::{Flow, Report};
use self::step::{Seen, Step};
use super::kind::Kind;
use super::report::ReasonTable;
use super::secrets::ReferencesSecrets;
use crate::api::SecretKeyRef;
use crate::api::deployment::{AgentDeployment, AgentDeploymentStatus, FINALIZER, ImagePolicy};
use crate::controller::deployment::context::DeploymentContext;
use crate::controller::requeue::object_key;
use crate::registry::docker_config::DOCKER_CONFIG_KEY;

impl Kind for AgentDeployment {
    type State = context::State;
    crate::kind_status!(AgentDeploymentStatus);
    const FINALIZER: Option<&'static str> = Some(FINALIZER);
    const REASONS: ReasonTable = ReasonTable::DEPLOYMENT;
    type Observed = Seen;
    type Decision = Step;

    /// What the pass knows at its start, with no request
    /// ([`Seen::start`]); the inputs are a step of their own.
    fn observe(
        _api: &Api<Self>,
        obj: &Self,
        ctx: &DeploymentContext,
    ) -> impl Future<Output = Flow<Seen>> + Send {
        let key = object_key(obj);
        let first_pass = ctx.is_first_pass(&key);
        std::future::ready(Ok(Seen::start(obj, key, first_pass)))
    }

    /// [`step::decide()`] on what was seen of `obj`. Pure.
    fn decide(obj: &Self, seen: &Seen) -> Step {
        step::decide(&seen.view(obj))
    }

    /// Takes `step`, then the next ones ([`machine::run`]), until one ends
    /// the pass.
    fn act(
        api: &Api<Self>,
        obj: &Self,
        ctx: &DeploymentContext,
        seen: Seen,
        step: Step,
    ) -> impl Future<Output = Box<Report>> + Send {
        machine::run(api, obj, ctx, seen, step)
    }

    /// The same machine, on an object being deleted: [`Step::Delete`].
    fn cleanup(
        api: &Api<Self>,
        obj: &Self,
        ctx: &DeploymentContext,
    ) -> impl Future<Output = Box<Report>> + Send {
        let seen = Seen::start(obj, object_key(obj), false);
        let step = Self::decide(obj, &seen);
        machine::run(api, obj, ctx, seen, step)
    }

    /// Forgets what the controller's state holds of `obj`: its memory,
    /// its cold-start mark, its place among the scouts
    /// ([`DeploymentContext::forget`]) and the remote delete that was in
    /// progress.
    fn forget(ctx: &DeploymentContext, obj: &Self) {
        let key = object_key(obj);
        ctx.forget(&key);
        ctx.state.deletes.forget(&key);
    }

    /// The pass adds the finalizer itself: with the create-pending marker
    /// for an object that names no deployment yet
    /// ([`step::finalizer_with_marker`]), alone as its first step for any
    /// other ([`Step::Finalize`]). No pass waits for the write of the
    /// finalizer to trigger the next one.
    fn finalizer_with_first_write(&self) -> bool {
        true
    }

    /// At its expiry instant at the latest ([`expire::wake_in`]).
    fn wake_in(&self) -> Option<Duration> {
        expire::wake_in(self)
    }
}

/// The Secret values of `spec.secrets[].valueFrom`, the agent server key
/// of `spec.verify.apiKeySecretRef`, and the `.dockerconfigjson` of
/// `spec.imagePullSecretRef` while an image policy resolves the tag.
impl ReferencesSecrets for AgentDeployment {
    fn secret_refs(&self) -> Vec<Cow<'_, SecretKeyRef>> {
        secret_refs_of(&self.spec)
    }
}

/// The same keys, read from the store's cached form (the spec as read).
impl ReferencesSecrets for cached::CachedDeployment {
    fn secret_refs(&self) -> Vec<Cow<'_, SecretKeyRef>> {
        secret_refs_of(&self.spec)
    }
}

/// The Secret keys `spec` reads ([`ReferencesSecrets`]).
fn secret_refs_of(
    spec: &crate::api::deployment::AgentDeploymentSpec,
) -> Vec<Cow<'_, SecretKeyRef>> {
    let values = spec.secrets.iter();
    let verify = spec.verify.as_ref();
    let pull = spec
        .image_pull_secret_ref
        .as_ref()
        .filter(|_| spec.image_policy() != ImagePolicy::Never)
        .map(|r| {
            Cow::Owned(SecretKeyRef {
                name: r.name.clone(),
                key: DOCKER_CONFIG_KEY.to_owned(),
            })
        });
    values
        .filter_map(|s| s.value_from.as_ref().map(|f| &f.secret_key_ref))
        .chain(verify.and_then(|v| v.api_key_secret_ref.as_ref()))
        .map(Cow::Borrowed)
        .chain(pull)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Secret watch triggers a pass on a change of the image pull
    /// Secret only while an image policy reads it.
    #[test]
    fn the_image_pull_secret_is_referenced_while_a_policy_resolves_the_tag() {
        let with = |policy: Option<&str>| -> AgentDeployment {
            let mut spec = serde_json::json!({
                "source": "external_docker",
                "sourceRevisionConfig": {"imageUri": "ghcr.io/acme/agent:v1"},
                "imagePullSecretRef": {"name": "regcred"},
                "secrets": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "env", "key": "a"}}}]
            });
            if let Some(p) = policy {
                spec["imagePolicy"] = serde_json::json!(p);
            }
            serde_json::from_value(serde_json::json!({
                "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentDeployment",
                "metadata": {"name": "a", "namespace": "n"},
                "spec": spec
            }))
            .unwrap()
        };
        for (policy, want) in [
            (None, vec![("env", "a")]),
            (Some("Never"), vec![("env", "a")]),
            (
                Some("Pin"),
                vec![("env", "a"), ("regcred", DOCKER_CONFIG_KEY)],
            ),
            (
                Some("Follow"),
                vec![("env", "a"), ("regcred", DOCKER_CONFIG_KEY)],
            ),
        ] {
            let obj = with(policy);
            let refs = obj.secret_refs();
            let got: Vec<(&str, &str)> = refs
                .iter()
                .map(|r| (r.name.as_str(), r.key.as_str()))
                .collect();
            assert_eq!(got, want, "{policy:?}");
        }
    }
}
