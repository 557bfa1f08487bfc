//! The AgentAssistant and AgentCron documents of `agentctl apply -f` and
//! `diff -f`, after the deployments: each on the agent server of its
//! deployment in the same file, in dependency order (assistants, then the
//! crons that run them), by [`agent_operator::converge::agents`].

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
    let skipped = match mode {
        Mode::Apply => "not applied",
        Mode::Diff | Mode::Get => "not read",
    };
    let mut worst = Exit::Success;
    for a in &m.assistants {
        let object = format!(
            "agentassistant/{}",
            a.metadata.name.as_deref().unwrap_or_default()
        );
        let server = match server_of(&a.metadata.namespace, &a.spec.deployment_ref.name) {
            Ok(s) => s,
            Err(NotServing(why)) => {
                println!("{object} {skipped}: {why}");
                worst = worst.max(Exit::Failed);
                continue;
            }
        };
        let plan = agents::plan_assistant(&server.client, a).await?;
        let id = &plan.id;
        match mode {
            Mode::Diff => {
                worst = worst.max(diff_assistant(&object, &plan, &server.url)?);
                continue;
            }
            Mode::Get => {
                let state = match (&plan.current, &plan.step) {
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
                };
                println!("{object}: {state}");
                continue;
            }
            Mode::Apply => {}
        }
        let now = agents::execute_assistant(&server.client, &plan).await?;
        let version = now
            .as_ref()
            .and_then(|x| x.version)
            .map_or_else(|| "-".to_owned(), |v| v.to_string());
        match &plan.step {
            assistant::Step::Create(_) => println!(
                "{object} created: assistant {id} (graph {}), version {version}, at {}",
                a.spec.graph_id, server.url
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
    let now = Timestamp::now();
    for c in &m.crons {
        let object = format!(
            "agentcron/{}",
            c.metadata.name.as_deref().unwrap_or_default()
        );
        let server = match server_of(&c.metadata.namespace, &c.spec.deployment_ref.name) {
            Ok(s) => s,
            Err(NotServing(why)) => {
                println!("{object} {skipped}: {why}");
                worst = worst.max(Exit::Failed);
                continue;
            }
        };
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
        // Duplicates (one per step) first, then the create or PATCH: a
        // bounded loop, as each step is one request.
        for _ in 0..=cron::SEARCH_LIMIT {
            let plan = agents::plan_cron(&server.client, c, &runs, paused, now).await?;
            match mode {
                Mode::Diff => {
                    worst = worst.max(diff_cron(&object, &plan)?);
                    break;
                }
                Mode::Get => {
                    let state = match cron::kept(&plan.found, None) {
                        None => "no cron carries its tag".to_owned(),
                        Some(x) => format!(
                            "{}, {}",
                            shown(x),
                            in_sync(
                                matches!(plan.step, cron::Step::Nothing)
                                    || matches!(&plan.step, cron::Step::Observe(d) if d.is_empty())
                            )
                        ),
                    };
                    println!("{object}: {state}");
                    break;
                }
                Mode::Apply => {}
            }
            let after = agents::execute_cron(&server.client, &plan).await?;
            let shown = after.as_ref().map_or_else(|| "none".to_owned(), shown);
            match &plan.step {
                cron::Step::DeleteDuplicate(id) => {
                    println!("{object}: deleted duplicate cron {id}");
                    continue;
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
            break;
        }
    }
    Ok(worst)
}

/// One cron, as the lines print it.
fn shown(x: &agent_operator::agentserver::Cron) -> String {
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
