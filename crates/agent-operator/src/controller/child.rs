//! What the kinds that live on an AgentDeployment's agent server share
//! (AgentAssistant, AgentCron): finding that agent server and its key
//! ([`server_of`]), the budget of its requests ([`admit`]), the passes that
//! wait for it, and the reports of every outcome, over the small
//! [`ChildStatus`] trait of their statuses. What differs per kind (the
//! observed reads, the decision, the request, how an error of the agent
//! server maps to a reason) stays in the kind's own module.
//!
//! Source: docs/control-plane-api.md "Agent server" (the key, the URL).

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use secrecy::SecretString;

use super::kind::{Flow, Kind, Report};
pub(crate) use super::report::bounded;
use crate::agentserver::AgentServerClient;
use crate::agentserver::limits::{Deferred, Permit};
use crate::api::assistant::RejectedAssistantRequest;
use crate::api::conditions::{READY, TRUE, find, reason};
use crate::api::deployment::{AgentDeployment, DriftField, ManagementPolicy};
use crate::controller::context::Context;
use crate::controller::error::Error;
use crate::controller::requeue::jittered;
use crate::controller::requeue::object_key;
use crate::plan::status::Outcome;

/// Agent server calls one pass may make (a read and one mutation).
pub(crate) const CALLS_PER_PASS: u32 = 2;

/// The wait after an agent server that did not answer (transient).
pub(crate) const RETRY_TRANSIENT: Duration = Duration::from_secs(15);

/// The fields of a child's status that the shared reports write, borrowed
/// at once (the drift and the conditions change together).
pub(crate) struct Parts<'a> {
    /// `status.observedGeneration`.
    pub(crate) observed_generation: &'a mut Option<i64>,
    /// `status.conditions`.
    pub(crate) conditions: &'a mut Vec<Condition>,
    /// `status.drift` (under `managementPolicy: Observe`).
    pub(crate) drift: &'a mut Vec<DriftField>,
    /// `status.deploymentId`: the agent server that holds the object.
    pub(crate) deployment_id: &'a mut Option<String>,
    /// `status.rejectedRequest`: a refusal not sent again.
    pub(crate) rejected_request: &'a mut Option<RejectedAssistantRequest>,
}

/// The status of a kind that lives on a deployment's agent server.
pub(crate) trait ChildStatus: Default + Clone {
    /// The remote id of the deployment whose agent server holds the object.
    fn deployment_id(&self) -> Option<&str>;

    /// The refused request, if any.
    fn rejected_request(&self) -> Option<&RejectedAssistantRequest>;

    /// The shared fields, to write.
    fn parts(&mut self) -> Parts<'_>;
}

/// `impl ChildStatus` for a status with the fields of [`Parts`].
macro_rules! child_status {
    ($status:ty) => {
        impl ChildStatus for $status {
            fn deployment_id(&self) -> Option<&str> {
                self.deployment_id.as_deref()
            }

            fn rejected_request(&self) -> Option<&RejectedAssistantRequest> {
                self.rejected_request.as_ref()
            }

            fn parts(&mut self) -> Parts<'_> {
                Parts {
                    observed_generation: &mut self.observed_generation,
                    conditions: &mut self.conditions,
                    drift: &mut self.drift,
                    deployment_id: &mut self.deployment_id,
                    rejected_request: &mut self.rejected_request,
                }
            }
        }
    };
}

child_status!(crate::api::assistant::AgentAssistantStatus);
child_status!(crate::api::cron::AgentCronStatus);

/// A kind that lives on the agent server of the AgentDeployment it names.
pub(crate) trait Child: Kind<Status: ChildStatus> {
    /// What the kind makes on the agent server, in messages ("assistant").
    const NOUN: &'static str;

    /// How long a pass waits for a missing or not ready input (a change of
    /// it wakes the pass sooner).
    const WAIT: Duration;

    /// The `Stalled` reason of a refused request of this kind.
    const REJECTED: &'static str;

    /// A create's lost answer can leave a remote object that status does
    /// not name (found again by its UID tag), so deletion looks for it
    /// even when no request ever recorded an agent server.
    const FOUND_BY_TAG: bool;

    /// The AgentDeployment the object names.
    fn deployment_name(&self) -> &str;

    /// `spec.managementPolicy`.
    fn policy(&self) -> ManagementPolicy;

    /// `spec.deletionPolicy` is `Orphan`: deletion leaves the remote object.
    fn orphans(&self) -> bool;
}

/// The deployment's agent server, reachable now: its client and remote id.
pub(crate) struct Server {
    /// The client, with the key the deployment's `spec.verify` sends.
    pub(crate) client: AgentServerClient,
    /// The deployment's remote id.
    pub(crate) deployment_id: String,
    /// The deployment is paused (its annotation `agentserver.dev/paused` is
    /// `"true"`): its crons are disabled, its assistants wait.
    pub(crate) paused: bool,
}

/// Why there is no agent server to talk to.
pub(crate) enum NoServer {
    /// The AgentDeployment does not exist (or is being deleted).
    Missing(String),
    /// It exists but is not Ready with a URL and an id yet.
    NotReady(String),
    /// Its URL or key is not usable: the outcome to report.
    Blocked(Outcome),
}

/// The agent server of the AgentDeployment `ns/name`, as its `spec.verify`
/// reaches it: the URL in its status (checked against `--allowed-hosts`),
/// and the key it would send (the AgentControlPlane's API key where the
/// control plane chose the URL, else `spec.verify.apiKeySecretRef`, else
/// none). A paused deployment reports `Ready=False` (`Paused`) and keeps its
/// URL and id: its agent server still serves and is still reached. Errors:
/// Kubernetes API failures.
pub(crate) async fn server_of(
    ctx: &Context,
    ns: &str,
    name: &str,
) -> Result<Result<Server, NoServer>, Error> {
    let deployments: Api<AgentDeployment> = Api::namespaced(ctx.client.clone(), ns);
    let dep = match deployments.get_opt(name).await.map_err(Error::Kube)? {
        Some(d) if d.metadata.deletion_timestamp.is_none() => d,
        _ => {
            return Ok(Err(NoServer::Missing(format!(
                "AgentDeployment {ns}/{name} does not exist"
            ))));
        }
    };
    let status = dep.status.clone().unwrap_or_default();
    let paused = dep.paused() == Ok(true);
    let ready = paused || find(&status.conditions, READY).is_some_and(|c| c.status == TRUE);
    let (true, Some(url), Some(deployment_id)) = (ready, status.url, status.deployment_id) else {
        return Ok(Err(NoServer::NotReady(format!(
            "waiting for AgentDeployment {name} to be Ready with an agent server URL"
        ))));
    };
    let stalled =
        |reason, message| Ok(Err(NoServer::Blocked(Outcome::Stalled { reason, message })));
    let field = format!("the agent server URL of AgentDeployment {name}");
    if let Err(refused) = ctx.config.allowed_hosts.check(&url, &field) {
        return stalled(reason::HOST_NOT_ALLOWED, refused.0);
    }
    let key = match key(ctx, ns, &dep).await? {
        Ok(k) => k,
        Err(b) => return stalled(b.reason, b.message),
    };
    let timeout = ctx
        .config
        .request_timeout
        .min(crate::agentserver::limits::CALL_TIMEOUT_CAP);
    match crate::agentserver::limits::agent_server_client(url, key, timeout) {
        Ok(client) => Ok(Ok(Server {
            client,
            deployment_id,
            paused,
        })),
        Err(e) => stalled(
            reason::AGENT_SERVER_UNREACHABLE,
            format!("agent server client: {e}"),
        ),
    }
}

/// The key the deployment's `spec.verify` sends (see [`server_of`]).
async fn key(
    ctx: &Context,
    ns: &str,
    dep: &AgentDeployment,
) -> Result<Result<Option<SecretString>, super::resolve::Blocked>, Error> {
    let secret_ref = dep
        .spec
        .verify
        .as_ref()
        .and_then(|v| v.api_key_secret_ref.as_ref());
    if let Some(r) = secret_ref {
        return Ok(
            super::resolve::secret_value(&ctx.secrets, &ctx.client, ns, &r.name, &r.key)
                .await?
                .map(|v| Some(SecretString::from(v.trim().to_owned()))),
        );
    }
    if !crate::plan::verdict::control_plane_key_allowed(&dep.spec) {
        return Ok(Ok(None));
    }
    Ok(
        match ctx
            .plane_client_for(ns, &dep.spec.control_plane_ref)
            .await?
        {
            Ok(cp) if !cp.uses_bearer() => Ok(Some(cp.api_key().clone())),
            Ok(_) => Ok(None),
            Err(b) => Err(b),
        },
    )
}

/// The agent server of the deployment `obj` names; a deployment that is
/// missing or not Ready ends the pass waiting ([`Child::WAIT`]), one whose
/// URL or key is not usable ends it until the resync. Errors: Kubernetes
/// API failures.
pub(crate) async fn reachable<K: Child>(obj: &K, ctx: &Context) -> Flow<Server, K> {
    let ns = obj
        .namespace()
        .ok_or(Error::MissingObjectKey("namespace"))?;
    match server_of(ctx, &ns, obj.deployment_name()).await? {
        Ok(s) => Ok(s),
        Err(NoServer::Missing(message)) => Err(waiting(obj, reason::DEPLOYMENT_NOT_FOUND, message)),
        Err(NoServer::NotReady(message)) => {
            Err(waiting(obj, reason::WAITING_FOR_DEPLOYMENT, message))
        }
        Err(NoServer::Blocked(outcome)) => Err(until_resync(obj, ctx, None, outcome)),
    }
}

/// A permit of the budget of the agent server `deployment_id` for one pass
/// of `obj` ([`CALLS_PER_PASS`] calls), held until dropped; a spent budget
/// ends the pass, back when it has room.
pub(crate) fn admit<K: Child>(obj: &K, ctx: &Context, deployment_id: &str) -> Flow<Permit, K> {
    ctx.verifier
        .admit(&object_key(obj), deployment_id, CALLS_PER_PASS)
        .map_err(|Deferred(wait)| Report::end(Action::requeue(wait)))
}

/// The agent server that may hold the remote object of `obj`, being
/// deleted, once the budget admits the deletion's request; `Err`: the pass
/// ends, with the finalizer let go (`Action::await_change()`) when nothing
/// can be left there: `deletionPolicy: Orphan` or `managementPolicy:
/// Observe` (an observed object is never deleted), the deployment is gone,
/// or re-created under another id (a new, empty agent server), or no
/// request ever reached an agent server (unless [`Child::FOUND_BY_TAG`]).
pub(crate) async fn holder<K: Child>(obj: &K, ctx: &Context) -> Flow<Server, K> {
    let done = || Report::end(Action::await_change());
    if obj.orphans() || obj.policy() == ManagementPolicy::Observe {
        return Err(done());
    }
    let held_by = obj
        .status()
        .and_then(|s| s.deployment_id())
        .map(str::to_owned);
    if held_by.is_none() && !K::FOUND_BY_TAG {
        return Err(done());
    }
    let ns = obj
        .namespace()
        .ok_or(Error::MissingObjectKey("namespace"))?;
    let server = match server_of(ctx, &ns, obj.deployment_name()).await? {
        Ok(s) => s,
        Err(NoServer::Missing(_)) => return Err(done()),
        Err(_) if held_by.is_none() => return Err(done()),
        Err(NoServer::NotReady(message)) => {
            let outcome = Outcome::Progressing {
                reason: reason::DELETING,
                message: format!("{message}, to delete the {}", K::NOUN),
            };
            return Err(report(obj, None, &outcome, Ok(Action::requeue(K::WAIT))));
        }
        Err(NoServer::Blocked(outcome)) => return Err(until_resync(obj, ctx, None, outcome)),
    };
    if held_by.is_some_and(|h| h != server.deployment_id) {
        return Err(done());
    }
    // The deletion's permit is given back at once, as it always was.
    admit(obj, ctx, &server.deployment_id)?;
    Ok(server)
}

/// The progressing report of a pass that waits for an input, with no
/// request: back after [`Child::WAIT`].
pub(crate) fn waiting<K: Child>(obj: &K, reason: &'static str, message: String) -> Box<Report<K>> {
    let outcome = Outcome::Progressing { reason, message };
    report(obj, None, &outcome, Ok(Action::requeue(K::WAIT)))
}

/// The report of `outcome`, back after the jittered resync period (with
/// `deployment_id` when given).
pub(crate) fn until_resync<K: Child>(
    obj: &K,
    ctx: &Context,
    deployment_id: Option<&str>,
    outcome: Outcome,
) -> Box<Report<K>> {
    let then = Ok(Action::requeue(jittered(ctx.config.resync_interval)));
    report(obj, deployment_id, &outcome, then)
}

/// The report of a request refused for this generation: `Stalled`, not
/// sent again until the spec changes.
pub(crate) fn held<K: Child>(
    obj: &K,
    ctx: &Context,
    deployment_id: &str,
    r: &RejectedAssistantRequest,
) -> Box<Report<K>> {
    let outcome = Outcome::Stalled {
        reason: stalled_reason::<K>(&r.reason),
        message: format!(
            "{}: {} (not sent again until the spec changes)",
            r.request, r.message
        ),
    };
    until_resync(obj, ctx, Some(deployment_id), outcome)
}

/// The `Stalled` reason stored in a refused request, as a constant.
fn stalled_reason<K: Child>(stored: &str) -> &'static str {
    [
        reason::GRAPH_NOT_FOUND,
        K::REJECTED,
        reason::AGENT_SERVER_UNAUTHORIZED,
    ]
    .into_iter()
    .find(|r| *r == stored)
    .unwrap_or(K::REJECTED)
}

/// What a failed request of a pass came to, once the kind classified it.
pub(crate) struct Failure<'a> {
    /// The request, as `METHOD /path`.
    pub(crate) request: &'a str,
    /// The message, already [`bounded`].
    pub(crate) message: String,
    /// The `Stalled` reason; `None`: transient.
    pub(crate) reason: Option<&'static str>,
    /// The refusal is recorded (`status.rejectedRequest`), so the request
    /// is not sent again for this generation.
    pub(crate) record: bool,
}

/// The report of a failed request: transient (no reason) is
/// `Reconciling`, retried after [`RETRY_TRANSIENT`]; else `Stalled` until
/// the resync, recorded when `f.record` (with `deployment_id` when given).
pub(crate) fn failure<K: Child>(
    obj: &K,
    ctx: &Context,
    deployment_id: Option<&str>,
    f: Failure<'_>,
) -> Box<Report<K>> {
    let Some(reason) = f.reason else {
        let outcome = Outcome::Progressing {
            reason: reason::AGENT_SERVER_UNREACHABLE,
            message: f.message,
        };
        let then = Ok(Action::requeue(RETRY_TRANSIENT));
        return report(obj, deployment_id, &outcome, then);
    };
    let outcome = Outcome::Stalled {
        reason,
        message: f.message.clone(),
    };
    let record = f.record.then(|| RejectedAssistantRequest {
        generation: obj.meta().generation.unwrap_or_default(),
        request: f.request.to_owned(),
        reason: reason.to_owned(),
        message: f.message,
    });
    let then = Ok(Action::requeue(jittered(ctx.config.resync_interval)));
    report_with(obj, &outcome, then, |s| {
        let p = s.parts();
        if let Some(d) = deployment_id {
            *p.deployment_id = Some(d.to_owned());
        }
        if record.is_some() {
            *p.rejected_request = record;
        }
    })
}

/// `r`, the report of a failed request of a deletion, with the refused
/// request of `obj` kept: a refusal of the deletion is not recorded as a
/// refused spec.
pub(crate) fn keep_rejected<K: Child>(obj: &K, mut r: Box<Report<K>>) -> Box<Report<K>> {
    let kept = obj.status().and_then(|s| s.rejected_request()).cloned();
    if let Some(s) = r.status.as_mut() {
        *s.parts().rejected_request = kept;
    }
    r
}

/// The report of `outcome`, the status otherwise as it was (with
/// `deployment_id` when given).
pub(crate) fn report<K: Child>(
    obj: &K,
    deployment_id: Option<&str>,
    outcome: &Outcome,
    then: Result<Action, Error>,
) -> Box<Report<K>> {
    report_with(obj, outcome, then, |s| {
        if let Some(d) = deployment_id {
            *s.parts().deployment_id = Some(d.to_owned());
        }
    })
}

/// The report of `outcome` with the status `edit` makes of the object's.
pub(crate) fn report_with<K: Child>(
    obj: &K,
    outcome: &Outcome,
    then: Result<Action, Error>,
    edit: impl FnOnce(&mut K::Status),
) -> Box<Report<K>> {
    report_drift(obj, outcome, then, None, edit)
}

/// [`report_with`], with the drift a pass under `managementPolicy:
/// Observe` found, and what it names (`None`: the last one is kept; under
/// `Manage` there is none: [`super::report::apply_drift`]).
pub(crate) fn report_drift<K: Child>(
    obj: &K,
    outcome: &Outcome,
    then: Result<Action, Error>,
    decided: Option<(Vec<DriftField>, String)>,
    edit: impl FnOnce(&mut K::Status),
) -> Box<Report<K>> {
    let mut base = obj.status().cloned().unwrap_or_default();
    edit(&mut base);
    let previous = obj
        .status()
        .map(|s| K::conditions(s).to_vec())
        .unwrap_or_default();
    Report::outcome_with(obj, outcome, then, |observed_generation, conditions| {
        let mut status = base;
        let p = status.parts();
        *p.observed_generation = observed_generation;
        *p.conditions = conditions;
        super::report::apply_drift(
            p.conditions,
            p.drift,
            &previous,
            obj.policy(),
            decided,
            observed_generation,
        );
        status
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::conditions::DRIFTED;
    use crate::api::cron::AgentCron;
    use crate::controller::report::MAX_MESSAGE_BYTES;
    use serde_json::json;

    fn cron(policy: &str) -> AgentCron {
        let mut c: AgentCron = serde_json::from_value(json!({
            "apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentCron",
            "metadata": {"name": "c", "namespace": "ns", "generation": 3},
            "spec": {"deploymentRef": {"name": "d"}, "graphId": "agent",
                "schedule": "* * * * *", "managementPolicy": policy},
        }))
        .unwrap();
        c.status = Some(crate::api::cron::AgentCronStatus {
            deployment_id: Some("old".into()),
            drift: vec![field("schedule")],
            ..Default::default()
        });
        c
    }

    fn field(name: &str) -> DriftField {
        DriftField {
            field: name.into(),
            desired: "\"a\"".into(),
            remote: "\"b\"".into(),
        }
    }

    fn ready() -> Outcome {
        Outcome::Ready {
            reason: reason::CRON_READY,
            message: "ready".into(),
        }
    }

    #[test]
    fn a_report_sets_the_generation_conditions_and_given_deployment_id() {
        let obj = cron("Manage");
        let r = report(&obj, Some("new"), &ready(), Ok(Action::await_change()));
        let s = r.status.expect("a changed status is written");
        assert_eq!(s.observed_generation, Some(3));
        assert_eq!(s.deployment_id.as_deref(), Some("new"));
        assert!(find(&s.conditions, READY).is_some_and(|c| c.status == TRUE));
        // Under Manage there is no drift.
        assert!(s.drift.is_empty());
        assert!(find(&s.conditions, DRIFTED).is_none());
        let kept = report(&obj, None, &ready(), Ok(Action::await_change()));
        assert_eq!(kept.status.unwrap().deployment_id.as_deref(), Some("old"));
    }

    #[test]
    fn an_observed_report_keeps_or_replaces_the_drift() {
        let obj = cron("Observe");
        let then = || Ok(Action::await_change());
        let kept = report_drift(&obj, &ready(), then(), None, |_| {});
        assert_eq!(kept.status.unwrap().drift, vec![field("schedule")]);
        let decided = Some((vec![field("timezone")], "cron c1".to_owned()));
        let found = report_drift(&obj, &ready(), then(), decided, |_| {});
        let s = found.status.unwrap();
        assert_eq!(s.drift, vec![field("timezone")]);
        assert!(find(&s.conditions, DRIFTED).is_some_and(|c| c.status == TRUE));
    }

    #[test]
    fn a_stored_reason_is_one_of_the_kinds_or_its_rejected_reason() {
        let table = [
            (reason::GRAPH_NOT_FOUND, reason::GRAPH_NOT_FOUND),
            (reason::CRON_REJECTED, reason::CRON_REJECTED),
            (
                reason::AGENT_SERVER_UNAUTHORIZED,
                reason::AGENT_SERVER_UNAUTHORIZED,
            ),
            (reason::ASSISTANT_REJECTED, reason::CRON_REJECTED),
            ("Anything", reason::CRON_REJECTED),
        ];
        for (stored, want) in table {
            assert_eq!(stalled_reason::<AgentCron>(stored), want, "{stored}");
        }
    }

    #[test]
    fn a_long_message_is_cut_on_a_character_boundary() {
        assert_eq!(bounded("short".into()), "short");
        let long = "é".repeat(MAX_MESSAGE_BYTES);
        let cut = bounded(long);
        assert!(cut.ends_with('…'));
        assert!(cut.len() <= MAX_MESSAGE_BYTES + '…'.len_utf8());
        assert_eq!(
            cut.chars().filter(|c| *c == 'é').count(),
            MAX_MESSAGE_BYTES / 2
        );
    }
}
