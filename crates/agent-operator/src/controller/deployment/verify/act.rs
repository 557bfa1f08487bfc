//! The IO edge of `spec.verify`: the key, the one control plane read
//! (`active_revision_id`), the assistant search and the run on the agent
//! server, and the record of the attempt in status.

use std::time::Duration;

use crate::plan::verdict::EventType;
use futures::StreamExt;
use kube::ResourceExt;
use secrecy::SecretString;
use serde_json::Value;

use super::super::pass::{Pass, RemoteView};
use super::decide::{
    CALL_TIMEOUT_CAP, Deferred, MAX_RUN_EVENTS, NO_KEY_HINT, RunJudge, VerifyKnown, VerifyStep,
    agent_server_client, classify, control_plane_key_allowed, is_settled_failure, outcome,
    retry_backoff, success_message, verify_step,
};
use crate::agentserver::{self, AgentServerClient, AssistantSearch, RunStreamRequest, StreamMode};
use crate::api::conditions::reason;
use crate::api::deployment::{VerificationStatus, VerifyRun, VerifySpec};
use crate::controller::error::Error;
use crate::controller::report::bounded;
use crate::controller::resolve;
use crate::plan::serving::name_revision;
use crate::plan::status::Outcome;

/// The result of the checks on the agent server.
#[derive(Debug, Default)]
pub struct Checked {
    /// Assistants of `spec.assistants.graphId` the search found.
    pub assistant_count: Option<u32>,
    /// `Passed`, `Failed`, `ExpectationNotMet` or `TimedOut`, when a run was
    /// made.
    pub run_outcome: Option<&'static str>,
    /// Events the run streamed.
    pub run_events: Option<u32>,
    /// `None`: passed; else the `Verified=False` reason and its message.
    pub failure: Option<(&'static str, String)>,
    /// What `spec.verify.suite` found (run now, or recorded before for the
    /// same revision and suite); the operator's only (`agentctl` runs no
    /// suite).
    pub suite: Option<Box<crate::api::suite::SuiteResult>>,
}

/// Runs the checks of `spec` on `client`: the assistant search, then the
/// run (docs/control-plane-api.md "Agent server"). Shared by the operator and `agentctl apply
/// --wait`. Never fails: a failure is in [`Checked::failure`].
pub async fn check(client: &AgentServerClient, spec: &VerifySpec) -> Checked {
    let mut out = Checked::default();
    if let Some(a) = &spec.assistants {
        let search = AssistantSearch {
            graph_id: Some(a.graph_id.clone()),
            limit: Some(a.min_count.max(100)),
            ..Default::default()
        };
        match client.search_assistants(&search).await {
            Ok(page) => {
                let found = page
                    .assistants
                    .iter()
                    .filter(|x| x.graph_id == a.graph_id)
                    .count();
                let found = u32::try_from(found).unwrap_or(u32::MAX);
                out.assistant_count = Some(found);
                if found < a.min_count {
                    out.failure = Some((
                        reason::ASSISTANTS_MISSING,
                        format!(
                            "the assistant search found {found} assistant(s) of graph {:?}; spec.verify.assistants.minCount is {}",
                            a.graph_id, a.min_count
                        ),
                    ));
                    return out;
                }
            }
            // langgraph dev answers a search for a graph it does not serve
            // with a 404 naming the graph, not an empty list.
            Err(agentserver::Error::NotFound { detail }) if detail.contains(&a.graph_id) => {
                out.assistant_count = Some(0);
                out.failure = Some((
                    reason::ASSISTANTS_MISSING,
                    format!(
                        "the agent server serves no graph {:?} (POST /assistants/search: 404: {detail})",
                        a.graph_id
                    ),
                ));
                return out;
            }
            Err(e) => {
                out.failure = Some(classify("POST /assistants/search", &e));
                return out;
            }
        }
    }
    if let Some(run) = &spec.run {
        check_run(client, run, &mut out).await;
    }
    out
}

/// The run of `spec.verify.run` on `client`, judged and recorded in `out`.
async fn check_run(client: &AgentServerClient, run: &VerifyRun, out: &mut Checked) {
    let req = RunStreamRequest {
        assistant_id: run.assistant_id.clone(),
        input: Some(Value::Object(run.input.clone())),
        stream_mode: Some(StreamMode::One(run.stream_mode.as_str().to_owned())),
        on_disconnect: Some("cancel".to_owned()),
        ..Default::default()
    };
    let timeout = Duration::from_secs(u64::from(run.timeout_seconds.max(1)));
    let mut judge = RunJudge::new(run.expect.clone());
    let streamed = tokio::time::timeout(timeout, async {
        let mut stream = client.stream_run(&req).await?;
        while let Some(item) = stream.next().await {
            judge.see(&item?);
            if judge.events() >= MAX_RUN_EVENTS {
                break;
            }
        }
        Ok::<(), agentserver::Error>(())
    })
    .await;
    let events = judge.events();
    let verdict = match streamed {
        Err(_) => Err((
            reason::RUN_FAILED,
            "TimedOut",
            format!("the run did not end within spec.verify.run.timeoutSeconds ({timeout:?})"),
        )),
        Ok(Err(e)) if events == 0 => {
            let (r, message) = classify("POST /runs/stream", &e);
            Err((r, "Failed", message))
        }
        Ok(Err(e)) => judge.verdict(Some(format!("the run stream broke off: {e}"))),
        Ok(Ok(())) => judge.verdict(None),
    };
    if events > 0 {
        out.run_events = Some(events);
    }
    match verdict {
        Ok(_) => out.run_outcome = Some("Passed"),
        Err((r, run_outcome, message)) => {
            out.run_outcome = Some(run_outcome);
            out.failure = Some((r, message));
        }
    }
}

/// `spec.verify` on a pass whose latest revision `rid` is DEPLOYED:
/// verifies it when due ([`verify_step`]), records the attempt in
/// status, and returns the outcome (Ready only when verified) and the
/// delay before the next pass. `deployed` is the outcome without
/// verification; without `spec.verify` it is returned as is.
pub(in crate::controller::deployment) async fn verified(
    pass: &mut Pass<'_>,
    deployed: Outcome,
    view: &RemoteView,
    rid: Option<&str>,
) -> Result<(Outcome, Option<Duration>), Error> {
    let Some(spec) = pass.obj.spec.verify.clone() else {
        // Verification was turned off: its record goes too.
        pass.status.verified_revision_id = None;
        pass.status.verification = None;
        return Ok((deployed, None));
    };
    let (Some(rid), Outcome::Ready { .. }) = (rid, &deployed) else {
        return Ok((deployed, None));
    };
    let wait = verify(pass, &spec, view, rid).await?;
    Ok((outcome(rid, deployed, &pass.status), Some(wait)))
}

async fn verify(
    pass: &mut Pass<'_>,
    spec: &VerifySpec,
    view: &RemoteView,
    rid: &str,
) -> Result<Duration, Error> {
    let now = k8s_openapi::jiff::Timestamp::now();
    let verified_before = pass.previous.verified_revision_id.as_deref() == Some(rid);
    if let Some(wait) = not_due(pass, rid, now, verified_before) {
        return Ok(wait);
    }
    let calls = u32::from(spec.assistants.is_some()) + u32::from(spec.run.is_some());
    let _permit = match pass.ctx.verifier.admit(
        &crate::controller::requeue::object_key(pass.obj),
        &view.id,
        calls,
    ) {
        Ok(p) => p,
        Err(Deferred(wait)) => {
            tracing::debug!(
                wait_s = wait.as_secs_f64(),
                "verification deferred by its rate limit"
            );
            return Ok(later(wait));
        }
    };
    let entry_base = VerificationStatus {
        revision_id: rid.to_owned(),
        observed_generation: pass.obj.metadata.generation,
        last_run_time: now.to_string(),
        ..Default::default()
    };
    let checked = match attempt(pass, spec, view, rid).await? {
        Attempt::Postponed(wait) => return Ok(later(wait)),
        Attempt::Done(c) => c,
    };
    Ok(record_verification(
        pass,
        rid,
        &entry_base,
        checked,
        verified_before,
    ))
}

/// The wait before `rid` is verified again ([`verify_step`]); `None`: it
/// is due now.
fn not_due(
    pass: &Pass<'_>,
    rid: &str,
    now: k8s_openapi::jiff::Timestamp,
    verified_before: bool,
) -> Option<Duration> {
    let config = &pass.ctx.config;
    let resync = config.resync_interval;
    let interval = config.verify.interval.unwrap_or(resync);
    let last = pass.previous.verification.as_deref();
    let since_last_run = last
        .and_then(|l| l.last_run_time.parse::<k8s_openapi::jiff::Timestamp>().ok())
        .and_then(|t| Duration::try_from(now.duration_since(t)).ok());
    let known = VerifyKnown {
        revision_id: rid,
        generation: pass.obj.metadata.generation,
        last,
        verified_revision_id: pass.previous.verified_revision_id.as_deref(),
        since_last_run,
        interval,
        backoff: config.verify.backoff,
        cap: resync,
    };
    match verify_step(&known) {
        VerifyStep::Wait(left) if verified_before && interval > resync => {
            Some(later(left).min(crate::controller::requeue::jittered(resync)))
        }
        VerifyStep::Wait(left) => Some(later(left)),
        VerifyStep::Verify => None,
    }
}

/// Records the attempt on `rid` (`checked`) in status, with its event
/// when the result is new; returns the delay before the next one.
fn record_verification(
    pass: &mut Pass<'_>,
    rid: &str,
    base: &VerificationStatus,
    checked: Checked,
    verified_before: bool,
) -> Duration {
    let config = &pass.ctx.config;
    let resync = config.resync_interval;
    let interval = config.verify.interval.unwrap_or(resync);
    let last = pass.previous.verification.as_deref();
    let failures_before = last
        .filter(|l| l.revision_id == rid && l.outcome != reason::VERIFIED)
        .map_or(0, |l| l.failures);
    let record = |outcome: &str, failures: u32| VerificationStatus {
        outcome: outcome.to_owned(),
        failures,
        ..base.clone()
    };
    let failure = checked.failure;
    let mut entry = match &failure {
        None => record(reason::VERIFIED, 0),
        Some((r, _)) => record(r, failures_before.saturating_add(1)),
    };
    entry.last_error = failure.as_ref().map(|(_, m)| bounded(m.clone()));
    entry.assistant_count = checked.assistant_count;
    entry.last_run_outcome = checked.run_outcome.map(str::to_owned);
    entry.last_run_events = checked.run_events;
    entry.suite = checked.suite.map(|s| *s);
    pass.ctx
        .metrics
        .observe_verification(failure.as_ref().map_or(reason::VERIFIED, |(r, _)| r));
    note_result(pass, rid, &entry, failure.as_ref(), verified_before);
    let settled = failure.as_ref().is_none_or(|(r, _)| is_settled_failure(r));
    let wait = if settled {
        later(interval).min(if interval > resync {
            crate::controller::requeue::jittered(resync)
        } else {
            Duration::MAX
        })
    } else {
        later(retry_backoff(entry.failures, config.verify.backoff, resync))
    };
    pass.status.verification = Some(Box::new(entry));
    wait
}

/// Status and event of the attempt on `rid` (`entry`, failed with
/// `failure`): an event only when the result is new.
fn note_result(
    pass: &mut Pass<'_>,
    rid: &str,
    entry: &VerificationStatus,
    failure: Option<&(&'static str, String)>,
    verified_before: bool,
) {
    let last = pass.previous.verification.as_deref();
    match failure {
        None => {
            pass.status.verified_revision_id = Some(rid.to_owned());
            let was_passing = last
                .is_some_and(|l| l.revision_id == rid && l.outcome == reason::VERIFIED)
                && verified_before;
            if !was_passing {
                let message = success_message(rid, entry);
                pass.events.push((
                    EventType::Normal,
                    reason::VERIFIED,
                    name_revision(&message, rid, &pass.status.revisions),
                ));
            }
            tracing::info!(revision = rid, "revision verified on the agent server");
        }
        Some((r, message)) => {
            if verified_before {
                // A re-verification failed: the revision is no longer
                // known to be good.
                pass.status.verified_revision_id = None;
            }
            let repeated = last.is_some_and(|l| l.revision_id == rid && l.outcome == *r);
            if !repeated {
                let message = format!("revision {rid}: {r}: {message}");
                pass.events.push((
                    EventType::Warning,
                    reason::VERIFICATION_FAILED,
                    bounded(name_revision(&message, rid, &pass.status.revisions)),
                ));
            }
            tracing::info!(revision = rid, reason = r, "verification failed");
        }
    }
}

/// The key sent to the agent server: `spec.verify.apiKeySecretRef`, or
/// the control plane's API key where it serves; `Ok(Err)`: the check
/// fails with this reason and message.
async fn agent_key(
    pass: &Pass<'_>,
    spec: &VerifySpec,
) -> Result<Result<Option<SecretString>, (&'static str, String)>, Error> {
    Ok(Ok(match &spec.api_key_secret_ref {
        // A bearer token of the control plane is not an API key of the
        // agent server: then only spec.verify.apiKeySecretRef serves.
        None if control_plane_key_allowed(&pass.obj.spec) && !pass.cp.uses_bearer() => {
            Some(pass.cp.api_key().clone())
        }
        None => None,
        Some(r) => {
            let ns = pass
                .obj
                .namespace()
                .ok_or(Error::MissingObjectKey("namespace"))?;
            match resolve::secret_value(&pass.ctx.secrets, &pass.ctx.client, &ns, &r.name, &r.key)
                .await?
            {
                Ok(v) if !v.trim().is_empty() => Some(SecretString::from(v.trim().to_owned())),
                Ok(_) => {
                    return Ok(Err((
                        reason::SECRET_NOT_FOUND,
                        format!(
                            "spec.verify.apiKeySecretRef: Secret {ns}/{} key {:?} is empty",
                            r.name, r.key
                        ),
                    )));
                }
                Err(blocked) => {
                    return Ok(Err((
                        reason::SECRET_NOT_FOUND,
                        format!("spec.verify.apiKeySecretRef: {}", blocked.message),
                    )));
                }
            }
        }
    }))
}

/// The active revision and the URL of the deployment of `view` (one GET
/// when this pass did not read it, also recorded in status); `None`: it
/// could not be read, the attempt is postponed.
async fn active(
    pass: &mut Pass<'_>,
    view: &RemoteView,
) -> Option<(Option<String>, Option<String>)> {
    let mut url = view.url.clone().or_else(|| pass.status.url.clone());
    let active = if view.read {
        view.active_revision_id.clone()
    } else {
        match pass.cp.get_deployment(&view.id).await {
            Ok(d) => {
                url = d.source_config.custom_url.clone().or(url);
                pass.status.active_revision_id = d.active_revision_id.clone();
                pass.status.deployment_status = d.status.clone();
                if d.source_config.custom_url.is_some() {
                    pass.status.url = d.source_config.custom_url.clone();
                }
                d.active_revision_id
            }
            Err(e) => {
                tracing::info!(error = %e, "verification postponed: the deployment could not be read");
                return None;
            }
        }
    };
    Some((active, url))
}

/// One attempt: the key, the active revision, then the agent server.
async fn attempt(
    pass: &mut Pass<'_>,
    spec: &VerifySpec,
    view: &RemoteView,
    rid: &str,
) -> Result<Attempt, Error> {
    let failed = |r: &'static str, message: String| {
        Ok(Attempt::Done(Checked {
            failure: Some((r, message)),
            ..Default::default()
        }))
    };
    let key = match agent_key(pass, spec).await? {
        Ok(key) => key,
        Err((r, message)) => return failed(r, message),
    };
    // The agent server serves the active revision: check that it is the
    // one just deployed (one GET when this pass did not read it).
    let (active, url) = match active(pass, view).await {
        Some(read) => read,
        None => return Ok(Attempt::Postponed(pass.ctx.config.verify.backoff)),
    };
    let url = match agent_server_url(pass, rid, active, url) {
        Ok(url) => url,
        Err((r, message)) => return failed(r, message),
    };
    let timeout = pass.ctx.config.request_timeout.min(CALL_TIMEOUT_CAP);
    let sends_key = key.is_some();
    // Redacted from the answers a suite quotes.
    let secrets: Vec<SecretString> = key.iter().cloned().collect();
    let client = match agent_server_client(url, key, timeout) {
        Ok(c) => c,
        Err(e) => {
            let (r, message) = classify("agent server client", &e);
            return failed(r, message);
        }
    };
    let at = Suite {
        view,
        rid,
        client: &client,
        secrets: &secrets,
    };
    Ok(on_server(pass, spec, &at, sends_key).await)
}

/// The checks of `spec` on the agent server of `at`: `assistants`, `run`,
/// then the suite; `sends_key`: the client sends a key (else a refusal
/// says how to give one).
async fn on_server(
    pass: &mut Pass<'_>,
    spec: &VerifySpec,
    at: &Suite<'_>,
    sends_key: bool,
) -> Attempt {
    tracing::debug!(
        url = at.client.base_url(),
        revision = at.rid,
        "verifying on the agent server"
    );
    let mut checked = check(at.client, spec).await;
    if let Some(suite) = &spec.suite
        && let Some(wait) = run_suite(pass, suite, at, &mut checked).await
    {
        return Attempt::Postponed(wait);
    }
    if let Some((r, message)) = &mut checked.failure
        && *r == reason::AGENT_SERVER_UNAUTHORIZED
        && !sends_key
    {
        message.push_str(NO_KEY_HINT);
    }
    Attempt::Done(checked)
}

/// Where and on what a suite runs: the remote deployment, the revision,
/// the agent server's client and what its answers must not quote.
struct Suite<'a> {
    view: &'a RemoteView,
    rid: &'a str,
    client: &'a AgentServerClient,
    secrets: &'a [SecretString],
}

/// `spec.verify.suite` on revision `at.rid`, once `assistants` and `run`
/// passed: the result recorded for this revision and suite when there is
/// one (a resync, a retry and a restart run nothing), else the cases run
/// now (those an earlier attempt ran are read back from the agent
/// server), their threads deleted once the result is written. A suite
/// that did not pass is the failure `SuiteFailed`. `Some(wait)`: cases an
/// earlier attempt started still run; the attempt is postponed.
async fn run_suite(
    pass: &mut Pass<'_>,
    suite: &crate::api::suite::VerifySuite,
    at: &Suite<'_>,
    checked: &mut Checked,
) -> Option<Duration> {
    use super::suite::{RUNNING_WAIT, failure_message, prune_after_write};
    let suite = match resolved(pass, suite).await {
        Ok(s) => s,
        Err(message) => {
            checked
                .failure
                .get_or_insert((reason::SUITE_UNREADABLE, message));
            return None;
        }
    };
    let suite = suite.as_ref();
    let digest = crate::plan::suite::suite_digest(suite);
    let recorded = pass
        .previous
        .verification
        .as_deref()
        .filter(|v| v.revision_id == at.rid)
        .and_then(|v| v.suite.clone())
        .filter(|s| s.digest == digest);
    let result = match recorded {
        Some(r) => r,
        None if checked.failure.is_some() => return None,
        None => match fresh_run(pass, suite, &digest, at).await {
            Ok(Fresh::Recorded(r, threads)) => {
                let r = *r;
                let (client, server) = (at.client.clone(), at.view.id.clone());
                pass.remember.push(move |ctx| {
                    prune_after_write(ctx.shared.clone(), client, server, threads);
                });
                r
            }
            Ok(Fresh::Running) => return Some(RUNNING_WAIT),
            Err(failure) => {
                checked.failure = Some(failure);
                return None;
            }
        },
    };
    if checked.failure.is_none() && !result.passed_suite {
        checked.failure = Some((
            reason::SUITE_FAILED,
            failure_message(&result, suite.min_pass_rate),
        ));
    }
    checked.suite = Some(Box::new(result));
    None
}

/// `suite` with the cases of its `configMapRef` in place of the reference
/// ([`config_map_cases`]), or as it is without one. `Err`: the
/// `SuiteUnreadable` message.
async fn resolved<'s>(
    pass: &Pass<'_>,
    suite: &'s crate::api::suite::VerifySuite,
) -> Result<std::borrow::Cow<'s, crate::api::suite::VerifySuite>, String> {
    let Some(r) = &suite.config_map_ref else {
        return Ok(std::borrow::Cow::Borrowed(suite));
    };
    Ok(std::borrow::Cow::Owned(crate::api::suite::VerifySuite {
        cases: config_map_cases(pass, r).await?,
        config_map_ref: None,
        ..suite.clone()
    }))
}

/// The cases of `spec.verify.suite.configMapRef` (`r`): one GET of the
/// ConfigMap in the object's namespace, its key read as a list of cases
/// ([`crate::api::suite::cases_from_text`]). `Err`: the `SuiteUnreadable`
/// message (missing, no such key, or a broken rule, named).
async fn config_map_cases(
    pass: &Pass<'_>,
    r: &crate::api::suite::SuiteConfigMapRef,
) -> Result<Vec<crate::api::suite::SuiteCase>, String> {
    use k8s_openapi::api::core::v1::ConfigMap;
    let ns = pass.obj.namespace().unwrap_or_default();
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(pass.ctx.client.clone(), &ns);
    let at = format!("spec.verify.suite.configMapRef: ConfigMap {ns}/{}", r.name);
    let found = api
        .get_opt(&r.name)
        .await
        .map_err(|e| match e {
            kube::Error::Api(s) => format!("{at} could not be read: {} ({})", s.message, s.code),
            other => format!("{at} could not be read: {other}"),
        })?
        .ok_or_else(|| format!("{at} not found"))?;
    let data = found.data.unwrap_or_default();
    let Some(text) = data.get(&r.key) else {
        let keys: Vec<&str> = data.keys().map(String::as_str).collect();
        return Err(format!(
            "{at} has no key {:?} (its keys: {})",
            r.key,
            if keys.is_empty() {
                "none".to_owned()
            } else {
                keys.join(", ")
            }
        ));
    };
    crate::api::suite::cases_from_text(text).map_err(|e| format!("{at}, key {:?}: {e}", r.key))
}

/// What a fresh run of a suite came to.
enum Fresh {
    /// Judged: the record, and the threads of its cases (deleted once the
    /// record is written).
    Recorded(Box<crate::api::suite::SuiteResult>, Vec<String>),
    /// Cases an earlier attempt started still run on the agent server.
    Running,
}

/// The cases of `spec.verify.suite.dataset`: two reads of the control
/// plane's LangSmith API ([`crate::langsmith::api_url`]) with its key.
/// `Err`: `DatasetUnavailable` (no answer, 429, 5xx: retried with
/// backoff), `HostNotAllowed` (`--allowed-hosts` lacks the LangSmith
/// API's host), or `SuiteFailed` (the dataset is missing or empty, or the
/// key is refused: settled until the spec changes or the slow period).
async fn dataset_cases(
    pass: &Pass<'_>,
    d: &crate::api::suite::SuiteDataset,
) -> Result<Vec<crate::plan::suite::Case>, (&'static str, String)> {
    use crate::langsmith::{DatasetClient, api_url};
    let url = api_url(pass.cp.base_url());
    let field = "the LangSmith API of the control plane (spec.verify.suite.dataset)";
    if let Err(refused) = pass.ctx.config.allowed_hosts.check(&url, field) {
        return Err((reason::HOST_NOT_ALLOWED, refused.0));
    }
    let timeout = pass.ctx.config.request_timeout.min(CALL_TIMEOUT_CAP);
    let failed = |e: crate::langsmith::Error| {
        let r = if e.is_transient() {
            reason::DATASET_UNAVAILABLE
        } else {
            reason::SUITE_FAILED
        };
        (r, format!("dataset {:?}: {e}", d.name))
    };
    let client = DatasetClient::new(&url, pass.cp, timeout).map_err(failed)?;
    let Some(found) = client.dataset_named(&d.name).await.map_err(failed)? else {
        return Err((
            reason::SUITE_FAILED,
            format!(
                "LangSmith has no dataset named {:?} in the workspace ({url})",
                d.name
            ),
        ));
    };
    let examples = client
        .examples(&found.id, crate::api::suite::MAX_CASES)
        .await
        .map_err(failed)?;
    if examples.is_empty() {
        return Err((
            reason::SUITE_FAILED,
            format!("dataset {:?} has no examples", d.name),
        ));
    }
    Ok(crate::plan::suite::from_examples(d, &examples))
}

/// Runs the cases of `suite` (digest `digest`) on revision `at.rid` now
/// and judges them; `Err`: the `Verified=False` reason and message when
/// the suite could not run (nothing recorded).
async fn fresh_run(
    pass: &Pass<'_>,
    suite: &crate::api::suite::VerifySuite,
    digest: &str,
    at: &Suite<'_>,
) -> Result<Fresh, (&'static str, String)> {
    use super::suite::{SuiteRun, Target, record, run, run_key, serving_record, thread_id};
    let cases = match &suite.dataset {
        None => crate::plan::suite::compile(suite).map_err(|e| (reason::SUITE_FAILED, e))?,
        Some(d) => dataset_cases(pass, d).await?,
    };
    let target = Target {
        client: at.client,
        limits: &pass.ctx.verifier,
        server: &at.view.id,
        secrets: at.secrets,
        run: run_key(at.rid, digest),
    };
    match run(&target, &cases, suite.concurrency).await {
        SuiteRun::Aborted(r, message) => Err((r, message)),
        SuiteRun::Running => Ok(Fresh::Running),
        SuiteRun::Done(results) => {
            let now = k8s_openapi::jiff::Timestamp::now().to_string();
            let serving = serving_record(&pass.status.revisions, at.rid);
            let r = record(suite, digest, &results, serving, &now);
            pass.ctx
                .metrics
                .observe_cases(r.passed, r.total.saturating_sub(r.passed));
            let threads = cases
                .iter()
                .map(|c| thread_id(&target.run, &c.name))
                .collect();
            Ok(Fresh::Recorded(Box::new(r), threads))
        }
    }
}

/// The URL of the agent server to verify `rid` on: the deployment's, when
/// `rid` is its active revision and the operator's `--allowed-hosts` let
/// it; `Err` with the reason and message of the failed attempt otherwise.
fn agent_server_url(
    pass: &Pass<'_>,
    rid: &str,
    active: Option<String>,
    url: Option<String>,
) -> Result<String, (&'static str, String)> {
    if active.as_deref() != Some(rid) {
        return Err((
            reason::REVISION_NOT_ACTIVE,
            format!(
                "the deployment's active_revision_id is {}, not revision {rid} just deployed",
                active.as_deref().unwrap_or("null")
            ),
        ));
    }
    let Some(url) = url.filter(|u| !u.trim().is_empty()) else {
        return Err((
            reason::AGENT_SERVER_UNREACHABLE,
            "the deployment has no URL (source_config.custom_url)".to_owned(),
        ));
    };
    // The operator's --allowed-hosts, checked before the client exists:
    // a URL the control plane (or the spec) points elsewhere gets nothing.
    let field = if pass.obj.spec.source_config.custom_url.is_some() {
        "spec.sourceConfig.customUrl"
    } else {
        "the deployment URL (source_config.custom_url, chosen by the control plane)"
    };
    if let Err(refused) = pass.ctx.config.allowed_hosts.check(&url, field) {
        return Err((reason::HOST_NOT_ALLOWED, refused.0));
    }
    Ok(url)
}

/// `d`, up to 10 % later, never sooner: an early pass would find nothing
/// due.
fn later(d: Duration) -> Duration {
    d.mul_f64(rand::random_range(1.0..1.1))
}

/// What `Pass::attempt` came to.
enum Attempt {
    /// Checked (passed or failed).
    Done(Checked),
    /// Nothing was checked (the control plane read failed): try again after
    /// this delay, without recording an attempt.
    Postponed(Duration),
}
