//! Cluster-free convergence: makes the control plane match an
//! `AgentDeployment` read from a file (`agentctl apply -f`), or tells what it
//! would change (`agentctl diff -f`), and follows the latest revision
//! (`--wait`), all without Kubernetes.
//!
//! This is the operator's reconcile core, not a second copy of it. Shared
//! with the operator's pass (`controller::deployment`):
//! - validation before any request: [`preflight::check`] and the placement
//!   check [`placement::check_spec`];
//! - secret resolution: [`crate::controller::resolve::secret_values`] and
//!   `key_value` (here the lookup reads the `Secret` documents of the same
//!   file instead of the cluster; see [`manifest`]);
//! - the integration and listener checks before a create, the operator's
//!   own functions: [`integrations::resolve`] and
//!   [`placement::check_listener_namespace`] (same requests, same verdicts);
//! - the exact-name lookup of the remote deployment:
//!   [`ControlPlaneClient::deployments_named`] (the exact `name` filter and
//!   `name_contains`, keeping the exact match; docs/control-plane-api.md,
//!   "Requests as the official clients send them");
//! - the spec → wire mapping and the minimal PATCH: [`desired::create_body`],
//!   [`desired::compute_patch`], [`desired::remote_secrets_differ`],
//!   [`desired::creates_revision`], [`desired::patch_fields`];
//! - the decision once the deployment was read: [`decide::after_read`];
//! - the meaning of a revision status: [`revision_outcome`].
//!
//! What differs, because there is no object and no status to remember
//! between runs: the remote deployment is the one named like the resource
//! (or `spec.deploymentId`), as `kubectl apply` identifies objects by name;
//! the decision runs with an empty status (no rejection backoff, no
//! unheld-patch memory, no drift pacing: a command runs once), which is also
//! why `decide::before_remote` is not used: from an empty status it always
//! answers "obtain" or "read the deployment", which [`plan`] does; secret
//! values are compared with the values the service returns (a service
//! that masks them gets a changed value only with the names' change).
//!
//! Flow (docs/control-plane-api.md "Polling", the documented client flow): [`plan`]
//! reads (GETs only) and decides; [`execute`] sends at most one mutation
//! (create or PATCH); [`follow`] polls the latest revision until it ends.

pub mod agents;
pub mod manifest;
pub mod strict;

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::api::deployment::{AgentDeployment, AgentDeploymentStatus, Source};
use crate::api::preflight;
use crate::controller::resolve::Blocked;
use crate::controller::{integrations, placement};
use crate::controlplane::types::{
    Deployment, DeploymentCreate, DeploymentPatch, Revision, RevisionStatus,
};
use crate::controlplane::{ControlPlaneClient, Error as CpError};
use crate::plan::decide::{self, After};
use crate::plan::desired;
use crate::plan::secrets_hash::HashKey;
use crate::plan::shapes::Memory;
use crate::plan::status::{Outcome, revision_outcome};

pub use manifest::Manifest;

/// Why a convergence stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The input cannot be sent: a preflight or placement rule, a missing
    /// Secret or listener document. Nothing was sent.
    #[error("{0}")]
    Invalid(String),
    /// A control plane request failed.
    #[error("{operation}: {source}")]
    ControlPlane {
        /// What was being done, e.g. `create deployment`.
        operation: &'static str,
        /// The client's error (never holds the key or a secret value).
        #[source]
        source: CpError,
    },
    /// The control plane's state does not let the command go on (several
    /// deployments with the name, a deployment being deleted, an unknown
    /// `spec.deploymentId`, an integration or namespace the service does not
    /// offer).
    #[error("{0}")]
    Blocked(String),
    /// An agent server request failed (an `AgentAssistant` or `AgentCron`
    /// of the file, [`agents`]).
    #[error("{operation}: {source}")]
    AgentServer {
        /// What was being done, e.g. `create cron`.
        operation: &'static str,
        /// The client's error (never holds the key).
        #[source]
        source: crate::agentserver::Error,
    },
}

fn cp(operation: &'static str) -> impl FnOnce(CpError) -> Error {
    move |source| Error::ControlPlane { operation, source }
}

/// The desired state of one `AgentDeployment`, computed without IO.
/// `Debug` shows no secret value (nor the spec, whose literal `value`s may be
/// settings a user would rather not see in a log).
#[derive(Clone)]
pub struct Desired {
    /// `agentdeployment/<metadata.name>`, for messages.
    pub object: String,
    /// The remote name (`spec.name` or `metadata.name`).
    pub remote_name: String,
    /// The create body (secret values inside; `Debug` hides them).
    pub body: DeploymentCreate,
    /// `spec.deploymentId`: adopt this deployment instead of looking the name up.
    pub adopt_id: Option<String>,
    /// `spec.sourceConfig.integrationRef.name`, resolved on create.
    pub integration_ref: Option<String>,
    /// The spec (for the placement check on create).
    spec: crate::api::deployment::AgentDeploymentSpec,
    /// The key of `spec.verify.apiKeySecretRef`, if it names one.
    verify_key: Option<secrecy::SecretString>,
}

impl std::fmt::Debug for Desired {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Desired")
            .field("object", &self.object)
            .field("remote_name", &self.remote_name)
            .field("body", &self.body)
            .field("adopt_id", &self.adopt_id)
            .field("integration_ref", &self.integration_ref)
            .finish_non_exhaustive()
    }
}

/// Maps `obj` to its desired wire state, by the operator's own functions:
/// [`preflight::check`], [`placement::check_spec`], the file's Secrets
/// ([`Manifest::secret_values`]), `listenerRef` through an `AgentListener`
/// document of the file, then [`desired::create_body`].
///
/// Errors: [`Error::Invalid`] naming the field or object to fix, or
/// `spec.promotion` (only the operator promotes).
pub fn desired_state(obj: &AgentDeployment, manifest: &Manifest) -> Result<Desired, Error> {
    let object = format!(
        "agentdeployment/{}",
        obj.metadata.name.as_deref().unwrap_or_default()
    );
    let remote_name = obj.remote_name();
    let invalid = |m: String| Error::Invalid(format!("{object}: {m}"));
    preflight::check(&remote_name, &obj.spec).map_err(invalid)?;
    if obj.spec.promotion.is_some() {
        // What a promotion deploys is the source's status.serving, which
        // only the cluster has.
        return Err(invalid(
            "spec.promotion takes what another AgentDeployment serves, as its status in the cluster says; agentctl does not promote: let the operator apply it".into(),
        ));
    }
    placement::check_spec(&obj.spec).map_err(|b| invalid(b.message))?;
    let secrets = manifest.secret_values(obj).map_err(invalid)?;
    let verify_key = manifest
        .verify_key(obj)
        .map_err(invalid)?
        .map(secrecy::SecretString::from);
    let mut body = desired::create_body(&remote_name, &obj.spec, secrets);
    if let Some(r) = &obj.spec.source_config.listener_ref {
        let ns = manifest::namespace_of(&obj.metadata.namespace);
        let id = manifest.listener_id(&ns, &r.name).ok_or_else(|| {
            invalid(format!(
                "sourceConfig.listenerRef: AgentListener {ns}/{} is not in the file; add it, or \
                 set sourceConfig.listenerId",
                r.name
            ))
        })?;
        body.source_config.listener_id = Some(id.to_owned());
    }
    Ok(Desired {
        object,
        remote_name,
        body,
        adopt_id: obj.spec.deployment_id.clone(),
        integration_ref: obj
            .spec
            .source_config
            .integration_ref
            .as_ref()
            .map(|r| r.name.clone()),
        spec: obj.spec.clone(),
        verify_key,
    })
}

impl Desired {
    /// Why `plan` is not sent: the spec says `managementPolicy: Observe`
    /// and the plan creates or patches (the operator never changes an
    /// observed deployment, nor does `apply`); `None` otherwise.
    pub fn refused_under_observe(&self, plan: &Plan) -> Option<String> {
        let observe =
            self.spec.management_policy == crate::api::deployment::ManagementPolicy::Observe;
        let what = match plan {
            Plan::Create { .. } => "create the deployment",
            Plan::Patch { .. } => "patch the deployment",
            Plan::Mismatch { .. } | Plan::Unchanged { .. } => return None,
        };
        observe.then(|| {
            format!(
                "{}: spec.managementPolicy is Observe: nothing is sent (it would {what}); `agentctl diff` shows the difference, set it to Manage to converge",
                self.object
            )
        })
    }

    /// `spec.verify`, if set.
    pub fn verify(&self) -> Option<&crate::api::deployment::VerifySpec> {
        self.spec.verify.as_deref()
    }

    /// The key for the agent server's `X-Api-Key` when verifying, by the
    /// operator's rule: `spec.verify.apiKeySecretRef`'s key if it names one,
    /// else the control plane key `cp_key`, but only when the control plane
    /// chose the URL (no `sourceConfig.customUrl`; see
    /// `plan::verdict::control_plane_key_allowed`).
    pub fn verify_key(&self, cp_key: &secrecy::SecretString) -> Option<secrecy::SecretString> {
        self.verify_key.clone().or_else(|| {
            crate::plan::verdict::control_plane_key_allowed(&self.spec).then(|| cp_key.clone())
        })
    }
}

/// What [`execute`] would do, decided on fresh reads.
#[derive(Clone, Debug)]
pub enum Plan {
    /// No deployment has the name: create it with this body.
    Create {
        /// The create body (integration id resolved).
        body: Box<DeploymentCreate>,
    },
    /// The deployment differs: send this PATCH.
    Patch {
        /// The deployment as read.
        remote: Box<Deployment>,
        /// The minimal PATCH ([`desired::compute_patch`]).
        patch: Box<DeploymentPatch>,
    },
    /// The deployment differs from the spec in fields the control plane
    /// cannot change ([`crate::plan::adoption`]): nothing can make it
    /// match; `apply` refuses, `diff` shows the difference.
    Mismatch {
        /// The deployment as read.
        remote: Box<Deployment>,
        /// The message naming each field and both values.
        message: String,
    },
    /// The deployment equals the spec: send nothing.
    Unchanged {
        /// The deployment as read.
        remote: Box<Deployment>,
    },
}

/// Reads the control plane (GETs only) and decides what makes it match
/// `want`: find the deployment (`spec.deploymentId`, else the exact name,
/// [`ControlPlaneClient::deployments_named`]); if none, check the placement and resolve
/// `integrationRef` as the operator does before a create; else compute the
/// PATCH and let [`decide::after_read`] decide.
///
/// Errors: [`Error::ControlPlane`] for a failed read, [`Error::Blocked`]
/// for an unknown `spec.deploymentId`, several deployments with the name, a
/// deployment being deleted, or a listener/integration check that fails.
pub async fn plan(client: &ControlPlaneClient, want: &Desired) -> Result<Plan, Error> {
    let Some(remote) = find_remote(client, want).await? else {
        let mut body = want.body.clone();
        check_before_create(client, want, &mut body).await?;
        return Ok(Plan::Create {
            body: Box::new(body),
        });
    };
    let differ = crate::plan::adoption::mismatches(&want.body, &remote, want.spec.name.is_some());
    if !differ.is_empty() {
        let message = format!(
            "{}: {}",
            want.object,
            crate::plan::adoption::mismatch_message(&remote.name, &remote.id, &differ)
        );
        return Ok(Plan::Mismatch {
            remote: Box::new(remote),
            message,
        });
    }
    plan_existing(want, remote)
}

/// The deployment `want` converges: `spec.deploymentId`'s (one GET), else
/// the one with its exact name; `None` when no deployment has the name.
///
/// Errors: [`Error::ControlPlane`] for a failed read, [`Error::Blocked`]
/// for an unknown `spec.deploymentId` or several deployments with the name.
async fn find_remote(
    client: &ControlPlaneClient,
    want: &Desired,
) -> Result<Option<Deployment>, Error> {
    if let Some(id) = &want.adopt_id {
        return match client.get_deployment(id).await {
            Ok(d) => Ok(Some(d)),
            Err(CpError::NotFound { .. }) => Err(Error::Blocked(format!(
                "{}: spec.deploymentId {id} does not exist on the control plane",
                want.object
            ))),
            Err(e) => Err(cp("get deployment")(e)),
        };
    }
    let mut found = client
        .deployments_named(&want.remote_name)
        .await
        .map_err(cp("look up deployment by name"))?;
    if found.len() > 1 {
        let ids: Vec<&str> = found.iter().map(|d| d.id.as_str()).collect();
        return Err(Error::Blocked(format!(
            "{}: {} deployments are named {} ({}); set spec.deploymentId to the one to \
             converge",
            want.object,
            found.len(),
            want.remote_name,
            ids.join(", ")
        )));
    }
    Ok(found.pop())
}

/// The plan for an existing `remote` whose immutable fields match: the
/// minimal PATCH, then [`decide::after_read`] with a status that remembers
/// nothing (no patch, no drift correction, no redeploy).
///
/// Errors: [`Error::Blocked`] for a deployment being deleted.
fn plan_existing(want: &Desired, remote: Deployment) -> Result<Plan, Error> {
    // A fresh key: the values are compared with the ones the service
    // returns, never kept.
    let key = HashKey::random();
    let hash = key.secrets_hash(&want.body.secrets);
    let differ = desired::remote_secrets_differ(&key, &hash, &remote.secrets);
    let patch = desired::compute_patch(&want.body, &remote, &Memory::secrets(differ));
    let fingerprint = desired::patch_fingerprint(&patch, &hash);
    let status = AgentDeploymentStatus::default();
    let read = decide::Read {
        patch: &patch,
        patch_fingerprint: &fingerprint,
        status: &status,
        generation: None,
        secrets_changed_here: false,
        image_moved_here: false,
        redeploy_requested: false,
        obtained_now: false,
        remote_deleting: crate::plan::verdict::is_deleting(remote.status.as_deref()),
        drift_corrections: &[],
        // No revision is followed here, so none is made outside.
        latest_revision_id: None,
    };
    match decide::after_read(&read) {
        After::RemoteDeleting => Err(Error::Blocked(format!(
            "{}: deployment {} ({}) is being deleted; wait until it is gone, then apply again",
            want.object, remote.name, remote.id
        ))),
        After::Patch { .. } | After::Reapply { .. } => Ok(Plan::Patch {
            remote: Box::new(remote),
            patch: Box::new(patch),
        }),
        // No redeploy is requested and the status remembers no patch and no
        // correction of drift.
        After::Redeploy
        | After::Unheld
        | After::Fight { .. }
        | After::FollowOutside { .. }
        | After::Follow => Ok(Plan::Unchanged {
            remote: Box::new(remote),
        }),
    }
}

/// The operator's own checks before a create, the same functions with the
/// same requests and the same verdicts: the listener's namespaces
/// ([`placement::check_listener_namespace`], `GET /v2/listeners/{id}`) and
/// `integrationRef` ([`integrations::resolve`]: the integration by name,
/// then `repoUrl` among its repositories), which sets `integration_id`.
///
/// The lists are read fresh (a cache of this call alone). Errors: an input
/// the service refuses or does not offer ([`Error::Blocked`], with the
/// operator's message), transient or unexpected control plane errors
/// ([`Error::ControlPlane`]).
async fn check_before_create(
    client: &ControlPlaneClient,
    want: &Desired,
    body: &mut DeploymentCreate,
) -> Result<(), Error> {
    let blocked = |b: Blocked| Error::Blocked(format!("{}: {}", want.object, b.message));
    if let Some(listener_id) = body.source_config.listener_id.clone() {
        placement::check_listener_namespace(client, &listener_id, &want.spec)
            .await
            .map_err(operator_error)?
            .map_err(blocked)?;
    }
    if want.spec.source == Source::Github {
        // A cache of this call alone, so one key serves: the reads are fresh.
        let cache = integrations::IntegrationCache::default();
        if let Some(id) = integrations::resolve(&cache, "agentctl", client, &want.spec)
            .await
            .map_err(operator_error)?
            .map_err(blocked)?
        {
            body.source_config.integration_id = Some(id);
        }
    }
    Ok(())
}

/// An error of the operator's checks as this module reports it: control
/// plane errors keep their operation; anything else (the checks send only
/// control plane requests) is reported as blocked with its message.
fn operator_error(e: crate::controller::Error) -> Error {
    match e {
        crate::controller::Error::ControlPlane { operation, source } => {
            Error::ControlPlane { operation, source }
        }
        other => Error::Blocked(other.to_string()),
    }
}

/// What [`execute`] did.
#[derive(Clone, Debug)]
pub enum Action {
    /// `POST /v2/deployments`; its first revision started.
    Created,
    /// `PATCH /v2/deployments/{id}` with these fields
    /// ([`desired::patch_fields`]).
    Patched {
        /// The fields sent, e.g. `source_revision_config` (never values).
        fields: Vec<&'static str>,
        /// The PATCH starts a revision ([`desired::creates_revision`]).
        new_revision: bool,
        /// Fields the answer still differs on: the service did not hold
        /// them (the operator reports such a PATCH as `DriftNotConverging`).
        not_held: Vec<&'static str>,
    },
    /// Nothing sent.
    Unchanged,
}

/// The result of [`execute`].
#[derive(Clone, Debug)]
pub struct Applied {
    /// What was done.
    pub action: Action,
    /// The deployment after it (the answer of the create or PATCH, or the read).
    pub deployment: Deployment,
}

/// Sends the one mutation of `plan` (none for [`Plan::Unchanged`]); a PATCH
/// is read back with [`desired::patch_read_back`] as the operator does, to
/// tell a change the service did not hold.
///
/// Errors: [`Error::ControlPlane`] (never retried: creates and PATCHes have
/// no idempotency key; docs/control-plane-api.md "Requests"); [`Error::Blocked`]
/// for a [`Plan::Mismatch`], before any request.
pub async fn execute(
    client: &ControlPlaneClient,
    want: &Desired,
    plan: Plan,
) -> Result<Applied, Error> {
    if let Some(refused) = want.refused_under_observe(&plan) {
        return Err(Error::Blocked(refused));
    }
    match plan {
        Plan::Create { body } => {
            let mut d = client
                .create_deployment(&body)
                .await
                .map_err(cp("create deployment"))?;
            // The control plane does not take `display_name` on create
            // (docs/control-plane-api.md): as the operator's pass after a
            // create, one PATCH of it alone (no revision), so that one
            // `apply` converges.
            if let Some(name) = want.body.display_name.clone()
                && d.display_name.as_deref() != Some(name.as_str())
            {
                let patch = DeploymentPatch {
                    display_name: Some(name),
                    ..Default::default()
                };
                d = client
                    .patch_deployment(&d.id, &patch)
                    .await
                    .map_err(cp("set the display name of the deployment just created"))?;
            }
            Ok(Applied {
                action: Action::Created,
                deployment: d,
            })
        }
        Plan::Patch { remote, patch } => {
            let d = client
                .patch_deployment(&remote.id, &patch)
                .await
                .map_err(cp("patch deployment"))?;
            let key = HashKey::random();
            let hash = key.secrets_hash(&want.body.secrets);
            let again = desired::patch_read_back(&key, &want.body, &d, &hash, None);
            Ok(Applied {
                action: Action::Patched {
                    fields: desired::patch_fields(&patch),
                    new_revision: desired::creates_revision(&patch),
                    not_held: desired::patch_fields(&again),
                },
                deployment: d,
            })
        }
        Plan::Unchanged { remote } => Ok(Applied {
            action: Action::Unchanged,
            deployment: *remote,
        }),
        Plan::Mismatch { message, .. } => Err(Error::Blocked(message)),
    }
}

/// The body of `plan` as JSON for `diff`, with every secret value replaced:
/// `<set>` in a create; in a PATCH `<changed>` or `<unchanged>` against the
/// value the service returned (`<changed>` when it returned none). Never
/// a value. `None` for [`Plan::Unchanged`].
pub fn redacted_body(plan: &Plan) -> Option<Value> {
    use secrecy::ExposeSecret;
    let (mut value, remote) = match plan {
        Plan::Create { body } => (serde_json::to_value(body).ok()?, None),
        Plan::Patch { remote, patch } => (serde_json::to_value(patch).ok()?, Some(remote)),
        Plan::Unchanged { .. } | Plan::Mismatch { .. } => return None,
    };
    if let Some(Value::Array(items)) = value.get_mut("secrets") {
        for item in items {
            let name = item.get("name").and_then(Value::as_str).unwrap_or_default();
            let mark = match remote {
                None => "<set>",
                Some(remote) => {
                    let sent = item.get("value").and_then(Value::as_str);
                    let same = remote
                        .secrets
                        .iter()
                        .find(|s| s.name == name)
                        .is_some_and(|s| Some(s.value.expose_secret()) == sent);
                    if same { "<unchanged>" } else { "<changed>" }
                }
            };
            item["value"] = Value::from(mark);
        }
    }
    Some(value)
}

/// How [`follow`] polls.
#[derive(Clone, Copy, Debug)]
pub struct FollowOptions {
    /// First delay between two reads (default 1 s, as the official CLI
    /// polls a local build; docs/control-plane-api.md "Polling").
    pub poll_initial: Duration,
    /// Longest delay between two reads; the delay grows by a quarter after
    /// each read up to it (default 5 s, as the Terraform provider polls).
    pub poll_max: Duration,
    /// Give up after this long (default 900 s, the official CLI's limit for
    /// a remote build).
    pub timeout: Duration,
}

impl Default for FollowOptions {
    fn default() -> Self {
        Self {
            poll_initial: Duration::from_secs(1),
            poll_max: Duration::from_secs(5),
            timeout: Duration::from_secs(900),
        }
    }
}

/// How a followed revision ended.
#[derive(Clone, Debug)]
pub enum Followed {
    /// The revision ended (DEPLOYED, failed, INTERRUPTED).
    Ended {
        /// The revision as last read.
        revision: Box<Revision>,
        /// Its meaning ([`revision_outcome`]): `Ready` for DEPLOYED,
        /// `Stalled` for a failure.
        outcome: Outcome,
        /// Time since the follow started.
        elapsed: Duration,
    },
    /// [`FollowOptions::timeout`] passed first.
    TimedOut {
        /// The revision followed last.
        revision_id: String,
        /// Its last status, if one was read.
        status: Option<RevisionStatus>,
        /// Time since the follow started.
        elapsed: Duration,
    },
}

/// Polls the revision `revision_id` of `deployment_id` until it ends
/// (docs/control-plane-api.md "Polling": poll that revision until it is
/// `DEPLOYED` or failed; "Revision"). `on_change(revision_id, status, elapsed)` is called for the
/// first status read and for each change. A `SKIPPED` revision was superseded:
/// the deployment's newer latest revision is followed instead, as the
/// operator does. `UNKNOWN` keeps polling.
///
/// Reads go through the client's retries (transient errors, `Retry-After`).
/// Errors: [`Error::ControlPlane`] once a read fails for good.
pub async fn follow(
    client: &ControlPlaneClient,
    deployment_id: &str,
    revision_id: &str,
    opts: FollowOptions,
    mut on_change: impl FnMut(&str, &RevisionStatus, Duration),
) -> Result<Followed, Error> {
    let started = Instant::now();
    let mut rid = revision_id.to_owned();
    let mut last: Option<RevisionStatus> = None;
    let mut delay = opts.poll_initial;
    loop {
        let rev = client
            .get_revision(deployment_id, &rid)
            .await
            .map_err(cp("get revision"))?;
        if last.as_ref() != Some(&rev.status) {
            on_change(&rid, &rev.status, started.elapsed());
            last = Some(rev.status.clone());
        }
        if rev.status == RevisionStatus::Skipped {
            let d = client
                .get_deployment(deployment_id)
                .await
                .map_err(cp("get deployment"))?;
            if let Some(newer) = d.latest_revision_id.filter(|n| *n != rid) {
                rid = newer;
                last = None;
                continue;
            }
        }
        if !rev.status.is_in_progress() {
            return Ok(Followed::Ended {
                outcome: revision_outcome(&rid, &rev.status),
                revision: Box::new(rev),
                elapsed: started.elapsed(),
            });
        }
        let left = opts.timeout.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Ok(Followed::TimedOut {
                revision_id: rid,
                status: last,
                elapsed: started.elapsed(),
            });
        }
        tokio::time::sleep(delay.min(left)).await;
        delay = delay
            .mul_f64(1.25)
            .min(opts.poll_max.max(opts.poll_initial));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controlplane::types::SecretValue;

    fn manifest(extra: &str) -> Manifest {
        Manifest::parse(&format!(
            r#"
apiVersion: agentserver.dev/v1alpha1
kind: AgentDeployment
metadata: {{name: agent, namespace: team}}
spec:
  source: github
  sourceConfig:
    integrationId: 3f0d1c2e-0000-4000-8000-000000000000
    repoUrl: https://github.com/acme/agent
{extra}
  sourceRevisionConfig: {{repoRef: main, langgraphConfigPath: langgraph.json}}
  secrets:
    - {{name: TOKEN, value: s3cret-value}}
"#
        ))
        .unwrap()
    }

    #[test]
    fn desired_state_uses_the_operator_mapping() {
        let m = manifest("");
        let want = desired_state(&m.deployments[0], &m).unwrap();
        assert_eq!(want.object, "agentdeployment/agent");
        assert_eq!(
            serde_json::to_value(&want.body).unwrap(),
            serde_json::to_value(desired::create_body(
                "agent",
                &m.deployments[0].spec,
                vec![SecretValue::new("TOKEN", "s3cret-value")]
            ))
            .unwrap()
        );
        assert!(!format!("{want:?}").contains("s3cret-value"));
    }

    #[test]
    fn observe_refuses_a_create_or_a_patch() {
        let mut m = manifest("");
        m.deployments[0].spec.management_policy = crate::api::deployment::ManagementPolicy::Observe;
        let want = desired_state(&m.deployments[0], &m).unwrap();
        let create = Plan::Create {
            body: Box::new(want.body.clone()),
        };
        let refused = want.refused_under_observe(&create).expect("refused");
        assert!(
            refused.contains("agentdeployment/agent") && refused.contains("Observe"),
            "{refused}"
        );
        let manage = desired_state(&manifest("").deployments[0], &manifest("")).unwrap();
        assert_eq!(manage.refused_under_observe(&create), None);
    }

    #[test]
    fn a_promotion_is_refused_by_agentctl() {
        let mut m = manifest("");
        m.deployments[0].spec.promotion = Some(Box::new(crate::api::deployment::Promotion {
            from: crate::api::deployment::PromotionSource {
                name: "staging".into(),
                namespace: None,
            },
            require_verified: true,
            soak_seconds: 0,
        }));
        let e = desired_state(&m.deployments[0], &m).unwrap_err();
        assert!(
            matches!(&e, Error::Invalid(m) if m.contains("agentdeployment/agent") && m.contains("spec.promotion")),
            "{e}"
        );
    }

    #[test]
    fn invalid_specs_and_missing_listeners_stop_before_any_request() {
        let m = manifest("    listenerRef: {name: edge}");
        let e = desired_state(&m.deployments[0], &m).unwrap_err();
        assert!(
            matches!(&e, Error::Invalid(m) if m.contains("AgentListener team/edge")),
            "{e}"
        );
        let mut m = manifest("");
        m.deployments[0].spec.secrets[0].name = "LANGCHAIN_API_KEY".into();
        let e = desired_state(&m.deployments[0], &m).unwrap_err();
        assert!(
            matches!(&e, Error::Invalid(m) if m.contains("reserved")),
            "{e}"
        );
    }

    #[test]
    fn the_diff_body_never_shows_a_value() {
        let m = manifest("");
        let want = desired_state(&m.deployments[0], &m).unwrap();
        let create = Plan::Create {
            body: Box::new(want.body.clone()),
        };
        let text = redacted_body(&create).unwrap().to_string();
        assert!(
            text.contains("<set>") && !text.contains("s3cret-value"),
            "{text}"
        );
        let remote: Deployment = serde_json::from_value(serde_json::json!({
            "id": "d", "name": "agent",
            "secrets": [{"name": "TOKEN", "value": "old"}]
        }))
        .unwrap();
        let patch = DeploymentPatch {
            secrets: Some(want.body.secrets.clone()),
            ..Default::default()
        };
        let plan = Plan::Patch {
            remote: Box::new(remote),
            patch: Box::new(patch),
        };
        let text = redacted_body(&plan).unwrap().to_string();
        assert!(
            text.contains("<changed>") && !text.contains("s3cret-value"),
            "{text}"
        );
    }
}
