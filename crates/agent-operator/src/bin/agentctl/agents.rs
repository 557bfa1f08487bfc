//! The AgentAssistant and AgentCron documents of `agentctl apply -f` and
//! `diff -f`, after the deployments: each on the agent server of its
//! deployment in the same file, in dependency order (assistants, then the
//! crons that run them), by [`agent_operator::converge::agents`].

use agent_operator::agentserver::{Assistant, Cron};
use agent_operator::api::assistant::AgentAssistant;
use agent_operator::api::cron::AgentCron;
use agent_operator::controlplane::ControlPlaneClient;
use agent_operator::converge::agents::{self, NotServing, Server};
use agent_operator::converge::{Desired, Manifest, manifest::namespace_of};
use agent_operator::plan::{assistant, cron};
use jiff::Timestamp;

use crate::exit::{CliResult, Exit};

/// Where each deployment of the file stands for its agent server objects:
/// the remote id of the deployment and whether `apply` converged it (a
/// deployment that did not converge gets none of its objects applied), or
/// why there is none yet.
pub type Deployed = Result<String, String>;

/// The agent servers of the deployments the file's agent objects use, read
/// once each (the deployment and its latest revision).
async fn servers(
    cp: &ControlPlaneClient,
    m: &Manifest,
    wanted: &[Desired],
    deployed: &[Deployed],
) -> CliResult<Vec<Option<Result<Server, NotServing>>>> {
    let mut used = vec![false; wanted.len()];
    let refs = m
        .assistants
        .iter()
        .map(|a| (&a.metadata.namespace, &a.spec.deployment_ref.name))
        .chain(
            m.crons
                .iter()
                .map(|c| (&c.metadata.namespace, &c.spec.deployment_ref.name)),
        );
    for (ns, name) in refs {
        if let Some(i) = m.deployment_index(&namespace_of(ns), name) {
            used[i] = true;
        }
    }
    let mut out = Vec::with_capacity(wanted.len());
    for ((want, state), used) in wanted.iter().zip(deployed).zip(used) {
        out.push(match (used, state) {
            (false, _) => None,
            (true, Err(why)) => Some(Err(NotServing(why.clone()))),
            (true, Ok(id)) => Some(agents::server(cp, id, want.verify_key(cp.api_key())).await?),
        });
    }
    Ok(out)
}

/// Whether a dry run (`diff`) or a real one (`apply`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Print what would be sent; send nothing but reads.
    Diff,
    /// Send at most one request per object (a cron's duplicates aside).
    Apply,
    /// Print each object's remote state and whether it matches; reads only.
    Get,
}

/// Applies (or diffs) the file's assistants, then its crons. Returns the
/// worst exit: 1 when an object was not applied because its deployment is
/// not serving, or (diff) when something would change.
///
/// Errors: an agent server or control plane request that failed, with its
/// exit code (3 refused, 4 unreachable).
pub async fn converge(
    cp: &ControlPlaneClient,
    m: &Manifest,
    wanted: &[Desired],
    deployed: &[Deployed],
    mode: Mode,
) -> CliResult {
    if m.assistants.is_empty() && m.crons.is_empty() {
        return Ok(Exit::Success);
    }
    let servers = servers(cp, m, wanted, deployed).await?;
    let server_of = |ns: &Option<String>, name: &str| {
        m.deployment_index(&namespace_of(ns), name)
            .and_then(|i| servers[i].as_ref())
            .expect("checked: every reference is a deployment of the file")
    };
    let mut worst = Exit::Success;
    for a in &m.assistants {
        let object = format!(
            "agentassistant/{}",
            a.metadata.name.as_deref().unwrap_or_default()
        );
        worst = worst.max(
            match server_of(&a.metadata.namespace, &a.spec.deployment_ref.name) {
                Ok(server) => converge_assistant(server, a, &object, mode).await?,
                Err(not_serving) => skip(&object, mode, not_serving),
            },
        );
    }
    let now = Timestamp::now();
    for c in &m.crons {
        let object = format!(
            "agentcron/{}",
            c.metadata.name.as_deref().unwrap_or_default()
        );
        worst = worst.max(
            match server_of(&c.metadata.namespace, &c.spec.deployment_ref.name) {
                Ok(server) => converge_cron(m, server, c, &object, mode, now).await?,
                Err(not_serving) => skip(&object, mode, not_serving),
            },
        );
    }
    Ok(worst)
}

/// Prints that `object` was not applied (or not read) because its
/// deployment is not serving, and why; returns 1.
fn skip(object: &str, mode: Mode, NotServing(why): &NotServing) -> Exit {
    let skipped = match mode {
        Mode::Apply => "not applied",
        Mode::Diff | Mode::Get => "not read",
    };
    println!("{object} {skipped}: {why}");
    Exit::Failed
}

/// Reads one assistant on its agent server and, as `mode` says, prints
/// what would be sent (diff), prints its state (get), or sends its one
/// request and prints the outcome (apply). Returns 1 when a diff shows a
/// change, else 0.
async fn converge_assistant(
    server: &Server,
    a: &AgentAssistant,
    object: &str,
    mode: Mode,
) -> CliResult {
    let plan = agents::plan_assistant(&server.client, a).await?;
    match mode {
        Mode::Diff => return diff_assistant(object, &plan, &server.url),
        Mode::Get => {
            println!("{object}: {}", assistant_state(&plan));
            return Ok(Exit::Success);
        }
        Mode::Apply => {}
    }
    let now = agents::execute_assistant(&server.client, &plan).await?;
    print_assistant_applied(object, a, &plan, now.as_ref(), &server.url);
    Ok(Exit::Success)
}

/// An assistant's remote state and whether it matches the file, as
/// `get -f` prints it.
fn assistant_state(plan: &agents::AssistantPlan) -> String {
    let id = &plan.id;
    match (&plan.current, &plan.step) {
        (None, _) => format!("assistant {id} does not exist"),
        (Some(x), step) => format!(
            "assistant {id} (graph {}), version {}, {}",
            x.graph_id,
            x.version.map_or_else(|| "-".to_owned(), |v| v.to_string()),
            in_sync(
                matches!(step, assistant::Step::Nothing)
                    || matches!(step, assistant::Step::Observe(d) if d.is_empty())
            )
        ),
    }
}

/// Prints the line `apply` prints for an assistant once its step was
/// executed; `now` is the assistant as the server answered (or as read).
fn print_assistant_applied(
    object: &str,
    a: &AgentAssistant,
    plan: &agents::AssistantPlan,
    now: Option<&Assistant>,
    url: &str,
) {
    let id = &plan.id;
    let version = now
        .and_then(|x| x.version)
        .map_or_else(|| "-".to_owned(), |v| v.to_string());
    match &plan.step {
        assistant::Step::Create(_) => println!(
            "{object} created: assistant {id} (graph {}), version {version}, at {url}",
            a.spec.graph_id
        ),
        assistant::Step::Patch(_) => {
            println!("{object} patched: assistant {id}, new version {version}")
        }
        assistant::Step::SetLatest(v) => {
            println!("{object}: version {v} of assistant {id} serves now")
        }
        assistant::Step::Nothing | assistant::Step::Held(_) => {
            println!("{object} unchanged: assistant {id}, version {version}")
        }
        assistant::Step::Observe(drift) => println!(
            "{object} observed (managementPolicy: Observe, nothing sent): assistant {id}, version {version}{}",
            drift_note(drift)
        ),
        assistant::Step::NothingToObserve => println!(
            "{object}: assistant {id} does not exist; nothing created (managementPolicy: Observe)"
        ),
    }
}

/// Searches one cron on its agent server and, as `mode` says, prints what
/// would be sent (diff), prints its state (get), or sends its requests and
/// prints each outcome (apply): the duplicates' deletes (one per step)
/// first, then the create or PATCH, in a bounded loop as each step is one
/// request. Returns 1 when a diff shows a change, else 0.
async fn converge_cron(
    m: &Manifest,
    server: &Server,
    c: &AgentCron,
    object: &str,
    mode: Mode,
    now: Timestamp,
) -> CliResult {
    let ns = namespace_of(&c.metadata.namespace);
    let runs = match (&c.spec.assistant_ref, &c.spec.graph_id) {
        (Some(r), _) => m
            .assistant(&ns, &r.name)
            .map(agents::assistant_id_in_file)
            .expect("checked: every assistantRef is an assistant of the file"),
        (None, graph) => graph.clone().unwrap_or_default(),
    };
    let paused = m
        .deployment_index(&ns, &c.spec.deployment_ref.name)
        .is_some_and(|i| m.deployments[i].paused() == Ok(true));
    for _ in 0..=cron::SEARCH_LIMIT {
        let plan = agents::plan_cron(&server.client, c, &runs, paused, now).await?;
        match mode {
            Mode::Diff => return diff_cron(object, &plan),
            Mode::Get => {
                println!("{object}: {}", cron_state(&plan));
                return Ok(Exit::Success);
            }
            Mode::Apply => {}
        }
        let after = agents::execute_cron(&server.client, &plan).await?;
        print_cron_applied(object, &plan.step, after.as_ref());
        if !matches!(plan.step, cron::Step::DeleteDuplicate(_)) {
            break;
        }
    }
    Ok(Exit::Success)
}

/// A cron's remote state and whether it matches the file, as `get -f`
/// prints it.
fn cron_state(plan: &agents::CronPlan) -> String {
    match cron::kept(&plan.found, None) {
        None => "no cron carries its tag".to_owned(),
        Some(x) => format!(
            "{}, {}",
            shown(x),
            in_sync(
                matches!(plan.step, cron::Step::Nothing)
                    || matches!(&plan.step, cron::Step::Observe(d) if d.is_empty())
            )
        ),
    }
}

/// Prints the line `apply` prints for one executed cron step; `after` is
/// the cron as the server answered (or as read; `None` when there is none).
fn print_cron_applied(object: &str, step: &cron::Step, after: Option<&Cron>) {
    let shown = after.map_or_else(|| "none".to_owned(), shown);
    match step {
        cron::Step::DeleteDuplicate(id) => {
            println!("{object}: deleted duplicate cron {id}");
        }
        cron::Step::Create(_) => println!("{object} created: {shown}"),
        cron::Step::Patch(..) => println!("{object} patched: {shown}"),
        cron::Step::Nothing | cron::Step::Held(_) if after.is_none() => {
            println!("{object}: endTime has passed; no cron")
        }
        cron::Step::Nothing | cron::Step::Held(_) => {
            println!("{object} unchanged: {shown}")
        }
        cron::Step::Observe(drift) => println!(
            "{object} observed (managementPolicy: Observe, nothing sent): {shown}{}",
            drift_note(drift)
        ),
        cron::Step::NothingToObserve => println!(
            "{object}: no cron carries its tag; nothing created (managementPolicy: Observe)"
        ),
    }
}

/// One cron, as the lines print it.
fn shown(x: &Cron) -> String {
    format!(
        "cron {} ({}, {}), next run {}",
        x.cron_id,
        x.schedule,
        if x.enabled { "enabled" } else { "disabled" },
        x.next_run_date.as_deref().unwrap_or("-")
    )
}

/// Whether what is there is as the file says, as `get -f` prints it.
pub fn in_sync(same: bool) -> &'static str {
    if same {
        "as the file says"
    } else {
        "differs from the file (agentctl diff shows how)"
    }
}

/// `; differs in: FIELDS` for a non-empty drift, else nothing.
fn drift_note(drift: &[agent_operator::api::deployment::DriftField]) -> String {
    if drift.is_empty() {
        return String::new();
    }
    let fields: Vec<&str> = drift.iter().map(|f| f.field.as_str()).collect();
    format!("; differs in: {}", fields.join(", "))
}

/// Prints what `apply` would send for an assistant; 1 when something.
fn diff_assistant(object: &str, plan: &agents::AssistantPlan, url: &str) -> CliResult {
    let id = &plan.id;
    let body = match &plan.step {
        assistant::Step::Create(body) => {
            println!("{object}: would create assistant {id} at {url}");
            serde_json::to_value(body)
        }
        assistant::Step::Patch(body) => {
            println!("{object}: would patch assistant {id} (a new version)");
            serde_json::to_value(body)
        }
        assistant::Step::SetLatest(v) => {
            println!("{object}: would make version {v} of assistant {id} serve");
            return Ok(Exit::Failed);
        }
        assistant::Step::Nothing | assistant::Step::Held(_) => {
            println!("{object}: no changes (assistant {id})");
            return Ok(Exit::Success);
        }
        assistant::Step::Observe(drift) if drift.is_empty() => {
            println!("{object}: no changes (assistant {id}, observed)");
            return Ok(Exit::Success);
        }
        assistant::Step::Observe(drift) => {
            println!(
                "{object}: sends nothing (managementPolicy: Observe){}",
                drift_note(drift)
            );
            return Ok(Exit::Failed);
        }
        assistant::Step::NothingToObserve => {
            println!(
                "{object}: assistant {id} does not exist; nothing would be created (managementPolicy: Observe)"
            );
            return Ok(Exit::Failed);
        }
    };
    print_body(body)
}

/// Prints what `apply` would send for a cron; 1 when something.
fn diff_cron(object: &str, plan: &agents::CronPlan) -> CliResult {
    let body = match &plan.step {
        cron::Step::Create(body) => {
            println!("{object}: would create a cron");
            serde_json::to_value(body)
        }
        cron::Step::Patch(id, body) => {
            println!("{object}: would patch cron {id}");
            serde_json::to_value(body)
        }
        cron::Step::DeleteDuplicate(id) => {
            println!(
                "{object}: would delete duplicate cron {id} ({} carry its tag)",
                plan.found.len()
            );
            return Ok(Exit::Failed);
        }
        cron::Step::Observe(drift) if !drift.is_empty() => {
            println!(
                "{object}: sends nothing (managementPolicy: Observe){}",
                drift_note(drift)
            );
            return Ok(Exit::Failed);
        }
        cron::Step::NothingToObserve => {
            println!(
                "{object}: no cron carries its tag; nothing would be created (managementPolicy: Observe)"
            );
            return Ok(Exit::Failed);
        }
        cron::Step::Nothing | cron::Step::Held(_) | cron::Step::Observe(_) => {
            match cron::kept(&plan.found, None) {
                Some(c) => println!("{object}: no changes (cron {})", c.cron_id),
                None => println!("{object}: no changes (endTime has passed; no cron)"),
            }
            return Ok(Exit::Success);
        }
    };
    print_body(body)
}

fn print_body(body: Result<serde_json::Value, serde_json::Error>) -> CliResult {
    use crate::exit::OrExit;
    let body = body.or_exit(Exit::Failed, "encoding the request body")?;
    crate::output::print_structured(&body, crate::output::Output::Json)?;
    Ok(Exit::Failed)
}
