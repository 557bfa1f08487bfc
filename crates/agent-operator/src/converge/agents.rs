//! Cluster-free convergence of the `AgentAssistant` and `AgentCron`
//! documents of a file (`agentctl apply -f`, `diff -f`, `get -f`) onto the
//! agent server of their `AgentDeployment` in the same file.
//!
//! The operator's own pure cores decide: [`crate::plan::assistant::decide`]
//! and [`crate::plan::cron::decide`], with the bodies they build. What
//! differs, because a file has no object UID and no status:
//! - **Identity.** The UID those cores derive ids and tags from is
//!   [`file_uid`]: a UUIDv5 of the kind, namespace and name, so the same
//!   document always means the same assistant id and the same cron tag, and
//!   a second `apply` (or one repeated after a crash) finds what the first
//!   made. An object the operator manages has its own UID, so agentctl and
//!   the operator never take each other's assistants or crons by accident;
//!   an operator object takes over one of agentctl's by `spec.assistantId`.
//! - **Memory of the last cron write.** The operator keeps the digest of
//!   its last create or PATCH in `status.appliedHash`; here the cron itself
//!   carries it, as the metadata key [`APPLIED_HASH_KEY`] (the server merges
//!   metadata, so the key survives every PATCH), so a changed `input`,
//!   `config` or `context` (which the cron's answer does not show reliably)
//!   is one PATCH, and an unchanged file none.
//! - **No rejection memory.** A command runs once: a refusal is reported
//!   and its exit code returned, not remembered.
//!
//! Order, as the resources depend on each other: deployments first (the
//! agent server exists only once the deployment's latest revision is
//! `DEPLOYED`), then assistants, then crons (an `assistantRef` runs the
//! assistant's id, which is [`assistant_id_in_file`]).
//!
//! Source: docs/control-plane-api.md "Assistants" (client-chosen
//! `assistant_id`, `if_exists: do_nothing`), "Agent server" (`POST
//! /runs/crons` has no idempotency key; search by exact metadata pairs;
//! `PATCH` merges `metadata`), "Crons".

use jiff::Timestamp;
use secrecy::SecretString;
use serde_json::Value;

use crate::agentserver::{self, AgentServerClient, Assistant, Cron};
use crate::api::assistant::AgentAssistant;
use crate::api::cron::AgentCron;
use crate::controlplane::ControlPlaneClient;
use crate::controlplane::types::RevisionStatus;
use crate::plan::{assistant, cron};

use super::manifest::{Manifest, namespace_of};
use super::{Error, cp};

/// Namespace of the UUIDv5 identities of file documents ([`file_uid`]).
pub const FILE_UID_NAMESPACE: uuid::Uuid = uuid::uuid!("6f1f3a52-4d0e-5b7c-9a5e-2c4b7d1e8f90");

/// The cron metadata key that holds the digest ([`cron::digest`]) of the
/// desired state agentctl last sent: its cluster-free `appliedHash`.
pub const APPLIED_HASH_KEY: &str = "agentserver.dev/applied-hash";

/// The stand-in UID of a file document: `uuid5(FILE_UID_NAMESPACE,
/// "<kind>/<namespace>/<name>")`. Stable across runs and machines.
pub fn file_uid(kind: &str, namespace: &str, name: &str) -> String {
    uuid::Uuid::new_v5(
        &FILE_UID_NAMESPACE,
        format!("{kind}/{namespace}/{name}").as_bytes(),
    )
    .to_string()
}

fn name_of(meta: &kube::api::ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

/// The assistant id of an `AgentAssistant` document:
/// [`assistant::assistant_id`] with its [`file_uid`].
pub fn assistant_id_in_file(a: &AgentAssistant) -> String {
    let ns = namespace_of(&a.metadata.namespace);
    let uid = file_uid("AgentAssistant", &ns, name_of(&a.metadata));
    assistant::assistant_id(&a.spec, &uid)
}

/// The UID tag value of an `AgentCron` document ([`file_uid`]).
pub fn cron_uid_in_file(c: &AgentCron) -> String {
    let ns = namespace_of(&c.metadata.namespace);
    file_uid("AgentCron", &ns, name_of(&c.metadata))
}

/// The agent server of a deployment, as `spec.verify` reaches it.
pub struct Server {
    /// The client (its key is never printed).
    pub client: AgentServerClient,
    /// The agent server URL.
    pub url: String,
}

/// Why a deployment's agent server cannot be reached yet.
#[derive(Clone, Debug, PartialEq)]
pub struct NotServing(pub String);

/// The agent server of the deployment `id`: its URL once its latest
/// revision is `DEPLOYED` (one GET of the deployment, one of the revision),
/// with `key` as `X-Api-Key` (the key `spec.verify` sends:
/// [`super::Desired::verify_key`]).
///
/// Returns `Ok(Err(NotServing))` when the deployment has no URL or its
/// latest revision is not `DEPLOYED`. Errors: [`Error::ControlPlane`] for a
/// failed read, [`Error::Invalid`] for a URL the client refuses.
pub async fn server(
    cp_client: &ControlPlaneClient,
    id: &str,
    key: Option<SecretString>,
) -> Result<Result<Server, NotServing>, Error> {
    let d = cp_client
        .get_deployment(id)
        .await
        .map_err(cp("read deployment"))?;
    let Some(rid) = d.latest_revision_id.clone() else {
        return Ok(Err(NotServing(format!(
            "deployment {} has no revision yet",
            d.name
        ))));
    };
    let rev = cp_client
        .get_revision(id, &rid)
        .await
        .map_err(cp("read revision"))?;
    if rev.status != RevisionStatus::Deployed {
        return Ok(Err(NotServing(format!(
            "revision {rid} of deployment {} is {} (agent server objects are applied once it is \
             DEPLOYED: apply with --wait)",
            d.name, rev.status
        ))));
    }
    let Some(url) = d.source_config.custom_url else {
        return Ok(Err(NotServing(format!(
            "deployment {} has no URL yet",
            d.name
        ))));
    };
    let timeout = crate::controller::deployment::verify::CALL_TIMEOUT_CAP;
    let client =
        crate::controller::deployment::verify::agent_server_client(url.clone(), key, timeout)
            .map_err(|e| Error::Invalid(format!("agent server client for {url}: {e}")))?;
    Ok(Ok(Server { client, url }))
}

/// Maps an agent server error of `operation` to [`Error::AgentServer`].
fn agent(operation: &'static str) -> impl FnOnce(agentserver::Error) -> Error {
    move |source| Error::AgentServer { operation, source }
}

/// What [`plan_assistant`] read and decided.
#[derive(Clone, Debug)]
pub struct AssistantPlan {
    /// The assistant id.
    pub id: String,
    /// The assistant as read (`None`: it does not exist).
    pub current: Option<Assistant>,
    /// The step ([`assistant::decide`] with no rejection memory).
    pub step: assistant::Step,
}

/// Reads the assistant (`GET /assistants/{id}`) and decides its step.
/// Errors: [`Error::AgentServer`] for a failed read.
pub async fn plan_assistant(
    server: &AgentServerClient,
    obj: &AgentAssistant,
) -> Result<AssistantPlan, Error> {
    let id = assistant_id_in_file(obj);
    let current = server
        .get_assistant(&id)
        .await
        .map_err(agent("read assistant"))?;
    let step = assistant::decide(&assistant::Known {
        spec: &obj.spec,
        object_name: name_of(&obj.metadata),
        generation: None,
        id: &id,
        current: current.as_ref(),
        rejected: None,
        policy: obj.spec.management_policy,
    });
    Ok(AssistantPlan { id, current, step })
}

/// Sends the plan's one request (none for [`assistant::Step::Nothing`],
/// nor under `managementPolicy: Observe`)
/// and returns the assistant as the server answered it (or as read).
/// Errors: [`Error::AgentServer`] for a refused or failed request.
pub async fn execute_assistant(
    server: &AgentServerClient,
    plan: &AssistantPlan,
) -> Result<Option<Assistant>, Error> {
    Ok(Some(match &plan.step {
        assistant::Step::Create(body) => server
            .create_assistant(body)
            .await
            .map_err(agent("create assistant"))?,
        assistant::Step::Patch(body) => server
            .patch_assistant(&plan.id, body)
            .await
            .map_err(agent("patch assistant"))?,
        assistant::Step::SetLatest(v) => server
            .set_latest_assistant_version(&plan.id, *v)
            .await
            .map_err(agent("set the assistant's latest version"))?,
        assistant::Step::Nothing
        | assistant::Step::Held(_)
        | assistant::Step::Observe(_)
        | assistant::Step::NothingToObserve => return Ok(plan.current.clone()),
    }))
}

/// What [`plan_cron`] read and decided.
#[derive(Clone, Debug)]
pub struct CronPlan {
    /// The UID tag value ([`cron_uid_in_file`]).
    pub uid: String,
    /// The crons the tag found.
    pub found: Vec<Cron>,
    /// The digest of the desired state ([`cron::digest`]), written into
    /// the cron's metadata with each create or PATCH.
    pub hash: String,
    /// The step ([`cron::decide`], the applied hash read from the kept
    /// cron's metadata, no rejection memory).
    pub step: cron::Step,
}

/// Searches the crons by the document's tag (`POST /runs/crons/search`) and
/// decides the step. `assistant` is the assistant id (of `assistantRef`) or
/// the graph id; `paused`: the deployment's `agentserver.dev/paused`
/// annotation. Errors: [`Error::AgentServer`] for a failed search.
pub async fn plan_cron(
    server: &AgentServerClient,
    obj: &AgentCron,
    assistant: &str,
    paused: bool,
    now: Timestamp,
) -> Result<CronPlan, Error> {
    let uid = cron_uid_in_file(obj);
    let found = server
        .search_crons(&cron::search(&uid))
        .await
        .map_err(agent("search crons"))?;
    let hash = cron::digest(&cron::patch_body(&obj.spec, &uid, now, paused));
    let kept = cron::kept(&found, None);
    let applied = kept.and_then(|c| c.metadata.get(APPLIED_HASH_KEY).and_then(Value::as_str));
    let step = cron::decide(&cron::Known {
        spec: &obj.spec,
        uid: &uid,
        generation: None,
        now,
        paused,
        assistant,
        found: &found,
        known_id: None,
        applied_hash: applied,
        rejected: None,
        policy: obj.spec.management_policy,
    });
    Ok(CronPlan {
        uid,
        found,
        hash,
        step,
    })
}

/// Sends the plan's one request, the create or PATCH carrying the digest
/// under [`APPLIED_HASH_KEY`], and returns the cron as answered (or as
/// read; `None` when none exists and none was created). Errors:
/// [`Error::AgentServer`] for a refused or failed request.
pub async fn execute_cron(
    server: &AgentServerClient,
    plan: &CronPlan,
) -> Result<Option<Cron>, Error> {
    let tag = |m: &mut Option<serde_json::Map<String, Value>>| {
        m.get_or_insert_with(Default::default)
            .insert(APPLIED_HASH_KEY.to_owned(), Value::from(plan.hash.clone()));
    };
    match &plan.step {
        cron::Step::Create(body) => {
            let mut body = (**body).clone();
            tag(&mut body.metadata);
            server
                .create_cron(&body)
                .await
                .map(Some)
                .map_err(agent("create cron"))
        }
        cron::Step::Patch(id, body) => {
            let mut body = (**body).clone();
            tag(&mut body.metadata);
            server
                .patch_cron(id, &body)
                .await
                .map(Some)
                .map_err(agent("patch cron"))
        }
        cron::Step::DeleteDuplicate(id) => {
            server
                .delete_cron(id)
                .await
                .map_err(agent("delete duplicate cron"))?;
            Ok(plan.found.iter().find(|c| &c.cron_id != id).cloned())
        }
        cron::Step::Nothing
        | cron::Step::Held(_)
        | cron::Step::Observe(_)
        | cron::Step::NothingToObserve => Ok(cron::kept(&plan.found, None).cloned()),
    }
}

/// Checks the AgentAssistant and AgentCron documents of `m` against the
/// rules the API server would apply at admission (the CRDs' patterns and
/// CEL rules that a file without a cluster does not go through), and
/// their references within the file: `deploymentRef` names an
/// AgentDeployment of the file, `assistantRef` an AgentAssistant, both in
/// the object's namespace.
///
/// Errors: the first problem, naming the document and the field.
pub fn check(m: &Manifest) -> Result<(), String> {
    use crate::api::cron::{SCHEDULE_PATTERN, TIMEZONE_PATTERN};
    for a in &m.assistants {
        check_assistant(m, a)?;
    }
    let schedule = regex::Regex::new(SCHEDULE_PATTERN).map_err(|e| e.to_string())?;
    let timezone = regex::Regex::new(TIMEZONE_PATTERN).map_err(|e| e.to_string())?;
    for c in &m.crons {
        check_cron(m, c, &schedule, &timezone)?;
    }
    Ok(())
}

/// [`check`] of one AgentAssistant: its deployment is in the file, its
/// `graphId` is not empty.
fn check_assistant(m: &Manifest, a: &AgentAssistant) -> Result<(), String> {
    let ns = namespace_of(&a.metadata.namespace);
    let what = format!("agentassistant/{}", name_of(&a.metadata));
    check_deployment_in_file(m, &ns, &a.spec.deployment_ref.name, &what, "an assistant")?;
    if a.spec.graph_id.is_empty() {
        return Err(format!("{what}: spec.graphId must not be empty"));
    }
    Ok(())
}

/// The `deploymentRef` of `what` (`object`: "an assistant", "a cron")
/// names the AgentDeployment `ns`/`name` of the file.
///
/// Errors: it is not in the file, saying that agentctl applies `object` to
/// a deployment of the same file.
fn check_deployment_in_file(
    m: &Manifest,
    ns: &str,
    name: &str,
    what: &str,
    object: &str,
) -> Result<(), String> {
    if m.deployment_index(ns, name).is_none() {
        return Err(format!(
            "{what}: spec.deploymentRef: AgentDeployment {ns}/{name} is not in the file; agentctl \
             applies {object} to a deployment of the same file"
        ));
    }
    Ok(())
}

/// [`check`] of one AgentCron: its deployment is in the file, what it runs
/// ([`check_cron_runs`]), its schedule (five cron fields: `schedule`) and
/// time zone (an IANA name: `timezone`).
fn check_cron(
    m: &Manifest,
    c: &AgentCron,
    schedule: &regex::Regex,
    timezone: &regex::Regex,
) -> Result<(), String> {
    let ns = namespace_of(&c.metadata.namespace);
    let what = format!("agentcron/{}", name_of(&c.metadata));
    check_deployment_in_file(m, &ns, &c.spec.deployment_ref.name, &what, "a cron")?;
    check_cron_runs(m, c, &ns, &what)?;
    if !schedule.is_match(&c.spec.schedule) {
        return Err(format!(
            "{what}: spec.schedule {:?} is not five cron fields",
            c.spec.schedule
        ));
    }
    if let Some(tz) = &c.spec.timezone
        && !timezone.is_match(tz)
    {
        return Err(format!(
            "{what}: spec.timezone {tz:?} is not an IANA time zone name"
        ));
    }
    Ok(())
}

/// What a cron runs: exactly one of `assistantRef` (an AgentAssistant of
/// the file, in namespace `ns`, on the cron's deployment) and a non-empty
/// `graphId`. `what` names the cron in errors.
fn check_cron_runs(m: &Manifest, c: &AgentCron, ns: &str, what: &str) -> Result<(), String> {
    match (&c.spec.assistant_ref, &c.spec.graph_id) {
        (Some(r), None) => match m.assistant(ns, &r.name) {
            None => Err(format!(
                "{what}: spec.assistantRef: AgentAssistant {ns}/{} is not in the file",
                r.name
            )),
            Some(a) if a.spec.deployment_ref != c.spec.deployment_ref => Err(format!(
                "{what}: spec.assistantRef: AgentAssistant {} is on AgentDeployment \
                     {}, not {}",
                r.name, a.spec.deployment_ref.name, c.spec.deployment_ref.name
            )),
            Some(_) => Ok(()),
        },
        (None, Some(g)) if !g.is_empty() => Ok(()),
        _ => Err(format!(
            "{what}: exactly one of spec.assistantRef and spec.graphId must be set"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
apiVersion: agentserver.dev/v1alpha1
kind: AgentDeployment
metadata: {name: agent}
spec: {source: github}
---
apiVersion: agentserver.dev/v1alpha1
kind: AgentAssistant
metadata: {name: helper}
spec: {deploymentRef: {name: agent}, graphId: agent}
---
apiVersion: agentserver.dev/v1alpha1
kind: AgentCron
metadata: {name: nightly}
spec: {deploymentRef: {name: agent}, assistantRef: {name: helper}, schedule: "0 3 * * *"}
"#;

    #[test]
    fn identities_are_stable_and_distinct_per_kind_namespace_and_name() {
        let a = file_uid("AgentAssistant", "default", "helper");
        assert_eq!(a, file_uid("AgentAssistant", "default", "helper"));
        assert_ne!(a, file_uid("AgentAssistant", "prod", "helper"));
        assert_ne!(a, file_uid("AgentCron", "default", "helper"));
        assert_ne!(a, file_uid("AgentAssistant", "default", "helper2"));
        let m = Manifest::parse(FILE).unwrap();
        assert_eq!(
            assistant_id_in_file(&m.assistants[0]),
            assistant::assistant_id(&m.assistants[0].spec, &a)
        );
    }

    #[test]
    fn references_and_admission_rules_are_checked_before_any_request() {
        let m = Manifest::parse(FILE).unwrap();
        check(&m).unwrap();
        let cases = [
            (
                "deploymentRef: {name: agent}, graphId",
                "deploymentRef: {name: other}, graphId",
                "AgentDeployment default/other is not in the file",
            ),
            (
                "assistantRef: {name: helper}",
                "assistantRef: {name: nobody}",
                "AgentAssistant default/nobody is not in the file",
            ),
            (
                "assistantRef: {name: helper}",
                "assistantRef: {name: helper}, graphId: agent",
                "exactly one of",
            ),
            ("\"0 3 * * *\"", "\"0 3 * *\"", "not five cron fields"),
            (
                "\"0 3 * * *\"",
                "\"0 3 * * *\", timezone: \"Europe/ Paris\"",
                "IANA",
            ),
        ];
        for (from, to, want) in cases {
            let m = Manifest::parse(&FILE.replacen(from, to, 1)).unwrap();
            let e = check(&m).unwrap_err();
            assert!(e.contains(want), "{to}: {e}");
        }
    }
}
