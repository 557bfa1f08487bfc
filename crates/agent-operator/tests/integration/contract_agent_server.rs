//! Contract test of the emulator's built-in agent server against the real
//! one (`langgraph dev`, pinned by `make setup`, see `support::langgraph`),
//! for the assistant and cron routes the operator uses (issue 32, item 5):
//!
//! 1. routes: every route the emulator serves
//!    ([`control_plane_emulator::agent_server_routes`], read from its router)
//!    is a path and method of the real server's `/openapi.json`, and every
//!    route the operator's client sends ([`USED`]) is served;
//! 2. schemas: the field names and required fields of the shared wire types
//!    (`agent-server-wire`, their JSON schemas derived with its `schema`
//!    feature) equal those of the `/openapi.json` schema each route names
//!    for its body and its answer, apart from the differences listed with
//!    their reason ([`NOT_MODELLED`], [`ANSWERED_NOT_IN_SCHEMA`],
//!    [`REQUIRED_DIFFERS`]; each entry is checked still to be needed);
//! 3. answers: the same requests sent to both servers (create, repeated
//!    create, conflicts, unknown graph and assistant, PATCH, versions,
//!    `latest`, a cron's create, bad schedule, search, PATCH and DELETE
//!    twice, a run on a thread the client names, found by its metadata
//!    and pruned) get the same status, the same `detail` and the same JSON,
//!    ids and times aside: `/openapi.json` is wrong on a few points (see
//!    docs/control-plane-api.md "Agent server"), which only a real exchange
//!    shows.
//!
//! Each check collects every difference and fails with the list.
//!
//! Source: docs/control-plane-api.md "Agent server", "Assistants", "Crons".

use crate::support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use agent_server_wire as wire;
use control_plane_emulator::{self as emulator, DEMO_API_KEY, EmulatorConfig};
use reqwest::Method;
use serde_json::{Map, Value, json};

const TEST: &str = "contract_agent_server";

/// The agent server routes agent-operator's client sends (the
/// AgentAssistant and AgentCron controllers, `agentctl`): the emulator must
/// serve each. docs/control-plane-api.md "Assistants" and "Crons".
const USED: &[(&str, &str)] = &[
    ("POST", "/assistants"),
    ("GET", "/assistants/{assistant_id}"),
    ("PATCH", "/assistants/{assistant_id}"),
    ("DELETE", "/assistants/{assistant_id}"),
    ("POST", "/assistants/{assistant_id}/versions"),
    ("POST", "/assistants/{assistant_id}/latest"),
    ("POST", "/assistants/search"),
    ("POST", "/runs/crons"),
    ("POST", "/runs/crons/search"),
    ("PATCH", "/runs/crons/{cron_id}"),
    ("DELETE", "/runs/crons/{cron_id}"),
    ("POST", "/threads/search"),
    ("POST", "/threads/{thread_id}/runs/stream"),
    ("POST", "/threads/prune"),
];

/// Fields of a schema the wire types (and so the emulator, which decodes
/// with them and ignores the rest) do not model: (schema, field, why).
const NOT_MODELLED: &[(&str, &str, &str)] = &[
    (
        "AssistantSearchRequest",
        "sort_by",
        "the emulator lists in creation order",
    ),
    (
        "AssistantSearchRequest",
        "sort_order",
        "the emulator lists in creation order",
    ),
    (
        "AssistantSearchRequest",
        "select",
        "the emulator answers every field",
    ),
    (
        "CronSearch",
        "thread_id",
        "the operator makes stateless crons only",
    ),
    (
        "CronSearch",
        "sort_by",
        "the emulator lists in creation order",
    ),
    (
        "CronSearch",
        "sort_order",
        "the emulator lists in creation order",
    ),
    ("CronSearch", "select", "the emulator answers every field"),
    (
        "CronCreate",
        "interrupt_before",
        "settings of the runs, which the emulator does not run",
    ),
    (
        "CronCreate",
        "interrupt_after",
        "settings of the runs, which the emulator does not run",
    ),
    (
        "CronCreate",
        "stream_mode",
        "settings of the runs, which the emulator does not run",
    ),
    (
        "CronCreate",
        "stream_subgraphs",
        "settings of the runs, which the emulator does not run",
    ),
    (
        "CronCreate",
        "stream_resumable",
        "settings of the runs, which the emulator does not run",
    ),
    (
        "CronCreate",
        "durability",
        "settings of the runs, which the emulator does not run",
    ),
    (
        "CronPatch",
        "interrupt_before",
        "settings of the runs, which the emulator does not run",
    ),
    (
        "CronPatch",
        "interrupt_after",
        "settings of the runs, which the emulator does not run",
    ),
    (
        "CronPatch",
        "stream_mode",
        "settings of the runs, which the emulator does not run",
    ),
    (
        "CronPatch",
        "stream_subgraphs",
        "settings of the runs, which the emulator does not run",
    ),
    (
        "CronPatch",
        "stream_resumable",
        "settings of the runs, which the emulator does not run",
    ),
    (
        "CronPatch",
        "durability",
        "settings of the runs, which the emulator does not run",
    ),
    (
        "ThreadSearchRequest",
        "extract",
        "the operator searches by metadata only (AgentCron status.lastRun, a suite's kept runs)",
    ),
    (
        "ThreadSearchRequest",
        "ids",
        "the operator searches by metadata only (AgentCron status.lastRun, a suite's kept runs)",
    ),
    (
        "ThreadSearchRequest",
        "status",
        "the operator searches by metadata only (AgentCron status.lastRun, a suite's kept runs)",
    ),
    (
        "ThreadSearchRequest",
        "values",
        "the operator searches by metadata only (AgentCron status.lastRun, a suite's kept runs)",
    ),
    (
        "Thread",
        "config",
        "the operator selects thread_id, status, created_at, updated_at and values",
    ),
    (
        "Thread",
        "extracted",
        "the operator selects thread_id, status, created_at, updated_at and values",
    ),
    (
        "Thread",
        "interrupts",
        "the operator selects thread_id, status, created_at, updated_at and values",
    ),
    (
        "Thread",
        "state_updated_at",
        "the operator selects thread_id, status, created_at, updated_at and values",
    ),
    (
        "Thread",
        "ttl",
        "the operator selects thread_id, status, created_at, updated_at and values",
    ),
];

/// Fields the real server answers that its schema does not list (shown by
/// the exchange of part 3): (schema, field).
const ANSWERED_NOT_IN_SCHEMA: &[(&str, &str)] =
    &[("Cron", "timezone"), ("Cron", "on_run_completed")];

/// Required fields of a request schema on which the wire type and the
/// schema differ: (schema, field, why).
const REQUIRED_DIFFERS: &[(&str, &str, &str)] = &[(
    "AssistantVersionChange",
    "version",
    "the schema makes it optional, the server answers 404 `Version None not found` without it",
)];

/// Routes whose body `/openapi.json` does not describe although the server
/// reads one (a JSON body; a query parameter is refused with 422 `Invalid
/// JSON in request body`): (method, path, the schema of the body).
const BODY_NOT_IN_OPENAPI: &[(&str, &str, &str)] = &[
    (
        "POST",
        "/assistants/{assistant_id}/versions",
        "AssistantVersionsSearchRequest",
    ),
    (
        "POST",
        "/assistants/{assistant_id}/latest",
        "AssistantVersionChange",
    ),
];

/// The wire type of each `/openapi.json` schema a route of the group names.
fn wire_schemas() -> Vec<(&'static str, Value)> {
    fn s<T: schemars::JsonSchema>() -> Value {
        schemars::schema_for!(T).to_value()
    }
    vec![
        ("Assistant", s::<wire::Assistant>()),
        ("AssistantCreate", s::<wire::AssistantCreate>()),
        ("AssistantPatch", s::<wire::AssistantPatch>()),
        ("AssistantSearchRequest", s::<wire::AssistantSearch>()),
        (
            "AssistantVersionsSearchRequest",
            s::<wire::AssistantVersionsSearch>(),
        ),
        (
            "AssistantVersionChange",
            s::<wire::AssistantVersionChange>(),
        ),
        ("Cron", s::<wire::Cron>()),
        ("CronCreate", s::<wire::CronCreate>()),
        ("CronPatch", s::<wire::CronPatch>()),
        ("CronSearch", s::<wire::CronSearch>()),
        ("ThreadSearchRequest", s::<wire::ThreadSearch>()),
        ("Thread", s::<wire::Thread>()),
        ("ThreadPruneRequest", s::<wire::ThreadPrune>()),
        ("ThreadPruneResponse", s::<wire::ThreadPruned>()),
    ]
}

/// Whether `path` belongs to the groups this test covers.
fn in_group(path: &str) -> bool {
    path.starts_with("/assistants")
        || path.starts_with("/runs/crons")
        || path == "/threads/search"
        || path == "/threads/prune"
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

fn strings(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The schema name of a `$ref`, directly or as the items of an array.
fn ref_name(schema: &Value) -> Option<String> {
    let r = schema["$ref"]
        .as_str()
        .or_else(|| schema["items"]["$ref"].as_str())?;
    r.rsplit('/').next().map(str::to_owned)
}

/// Part 1: the routes. Returns the (request schemas, answer schemas) the
/// served routes of the group name.
fn compare_routes(
    openapi: &Value,
    diffs: &mut Vec<String>,
) -> (BTreeSet<String>, BTreeSet<String>) {
    let served: BTreeSet<(String, String)> = emulator::agent_server_routes()
        .into_iter()
        .map(|(m, p)| (m.as_str().to_owned(), p.to_owned()))
        .collect();
    let paths = &openapi["paths"];
    for (m, p) in &served {
        if paths[p.as_str()][m.to_lowercase()].is_null() {
            diffs.push(format!(
                "route: the emulator serves {m} {p}, which the real server's /openapi.json has not"
            ));
        }
    }
    for (m, p) in USED {
        if !served.contains(&((*m).to_owned(), (*p).to_owned())) {
            diffs.push(format!(
                "route: the operator sends {m} {p}, which the emulator does not serve"
            ));
        }
    }
    let mut requests = BTreeSet::new();
    let mut answers = BTreeSet::new();
    let mut unserved = Vec::new();
    for (p, ops) in paths.as_object().into_iter().flatten() {
        if !in_group(p) {
            continue;
        }
        for (m, op) in ops.as_object().into_iter().flatten() {
            let m = m.to_uppercase();
            if !served.contains(&(m.clone(), p.clone())) {
                unserved.push(format!("{m} {p}"));
                continue;
            }
            let body = &op["requestBody"]["content"]["application/json"]["schema"];
            let listed = BODY_NOT_IN_OPENAPI
                .iter()
                .find(|(bm, bp, _)| *bm == m && bp == p);
            match (ref_name(body), listed) {
                (Some(name), None) => {
                    requests.insert(name);
                }
                (None, Some((_, _, name))) => {
                    requests.insert((*name).to_owned());
                }
                (Some(name), Some(_)) => diffs.push(format!(
                    "route: {m} {p} now describes its body ({name}) in /openapi.json: \
                     remove it from BODY_NOT_IN_OPENAPI"
                )),
                (None, None) => {}
            }
            if let Some(name) =
                ref_name(&op["responses"]["200"]["content"]["application/json"]["schema"])
            {
                answers.insert(name);
            }
        }
    }
    eprintln!(
        "{TEST}: real server routes of the group the emulator does not serve: {}",
        unserved.join(", ")
    );
    (requests, answers)
}

/// Part 2: the fields of one schema against its wire type.
fn compare_schema(name: &str, real: &Value, ours: &Value, request: bool, diffs: &mut Vec<String>) {
    let real_props = keys(&real["properties"]);
    let our_props = keys(&ours["properties"]);
    let not_modelled: BTreeSet<String> = NOT_MODELLED
        .iter()
        .filter(|(s, _, _)| *s == name)
        .map(|(_, f, _)| (*f).to_owned())
        .collect();
    let answered: BTreeSet<String> = ANSWERED_NOT_IN_SCHEMA
        .iter()
        .filter(|(s, _)| *s == name)
        .map(|(_, f)| (*f).to_owned())
        .collect();
    for f in real_props.difference(&our_props) {
        if !not_modelled.contains(f) {
            diffs.push(format!(
                "schema {name}: field `{f}` of /openapi.json is not in the wire type"
            ));
        }
    }
    for f in our_props.difference(&real_props) {
        if !answered.contains(f) {
            diffs.push(format!(
                "schema {name}: the wire type has field `{f}`, which /openapi.json has not"
            ));
        }
    }
    for f in &not_modelled {
        if our_props.contains(f) || !real_props.contains(f) {
            diffs.push(format!(
                "schema {name}: NOT_MODELLED lists `{f}`, no longer a difference"
            ));
        }
    }
    for f in &answered {
        if real_props.contains(f) || !our_props.contains(f) {
            diffs.push(format!(
                "schema {name}: ANSWERED_NOT_IN_SCHEMA lists `{f}`, no longer a difference"
            ));
        }
    }
    let real_req = strings(&real["required"]);
    let our_req = strings(&ours["required"]);
    if request {
        // What the emulator refuses without it is what the server refuses.
        let excused: BTreeSet<String> = REQUIRED_DIFFERS
            .iter()
            .filter(|(s, _, _)| *s == name)
            .map(|(_, f, _)| (*f).to_owned())
            .collect();
        let differ: BTreeSet<String> = real_req.symmetric_difference(&our_req).cloned().collect();
        for f in differ.difference(&excused) {
            diffs.push(format!(
                "schema {name}: `{f}` is required by {} only",
                if real_req.contains(f) {
                    "/openapi.json"
                } else {
                    "the wire type"
                }
            ));
        }
        for f in excused.difference(&differ) {
            diffs.push(format!(
                "schema {name}: REQUIRED_DIFFERS lists `{f}`, no longer a difference"
            ));
        }
    } else {
        // An answer decodes whenever the server sends what it promises.
        for f in our_req.difference(&real_req) {
            diffs.push(format!(
                "schema {name}: the wire type requires `{f}` in an answer, which /openapi.json \
                 does not promise"
            ));
        }
    }
}

/// One server of the exchange: its agent server URL and key.
struct Server {
    url: String,
    key: Option<&'static str>,
    http: reqwest::Client,
}

impl Server {
    async fn send(&self, method: Method, path: &str, body: Option<&Value>) -> (u16, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.url));
        if let Some(k) = self.key {
            req = req.header("X-Api-Key", k);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.expect("a request to the agent server");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        let value = serde_json::from_str(&text).unwrap_or(if text.is_empty() {
            Value::Null
        } else {
            Value::String(text)
        });
        (status, value)
    }
}

/// `v` with the times replaced by `<time>` and the ids of `names` by their
/// names, so that two servers' answers compare.
fn normalize(v: &Value, names: &[(String, &str)]) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| {
                    let v = if ["created_at", "updated_at", "next_run_date"].contains(&k.as_str())
                        && v.is_string()
                    {
                        json!("<time>")
                    } else {
                        normalize(v, names)
                    };
                    (k.clone(), v)
                })
                .collect::<Map<String, Value>>(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|v| normalize(v, names)).collect()),
        Value::String(s) => {
            let mut s = s.clone();
            for (id, name) in names {
                s = s.replace(id.as_str(), name);
            }
            Value::String(s)
        }
        other => other.clone(),
    }
}

/// The steps of part 3: (method, path, body); `{a}` is the assistant's id,
/// `{c}` the cron's (taken from the answer to the cron's create), `{r}` an
/// id neither server knows.
fn steps() -> Vec<(Method, &'static str, Option<Value>)> {
    let assistant = json!({"graph_id": "agent", "assistant_id": "{a}", "name": "contract",
        "description": "d", "config": {"tags": ["t"]}, "context": {"c": 1},
        "metadata": {"team": "x"}});
    let mut do_nothing = assistant.clone();
    do_nothing["if_exists"] = json!("do_nothing");
    do_nothing["name"] = json!("ignored");
    let cron = json!({"assistant_id": "{a}", "schedule": "0 0 1 1 *", "timezone": "Europe/Paris",
        "input": {"messages": []}, "config": {"configurable": {"z": 1}}, "context": {"c": 2},
        "metadata": {"tag": "contract"}, "on_run_completed": "keep", "enabled": true});
    vec![
        (Method::POST, "/assistants", Some(assistant.clone())),
        (Method::POST, "/assistants", Some(do_nothing)),
        (Method::POST, "/assistants", Some(assistant)),
        (
            Method::POST,
            "/assistants",
            Some(json!({"graph_id": "nope"})),
        ),
        (
            Method::POST,
            "/assistants",
            Some(json!({"graph_id": "agent",
            "config": {"configurable": {"k": 1}}, "context": {"c": 1}})),
        ),
        (
            Method::POST,
            "/assistants",
            Some(json!({"graph_id": "agent", "assistant_id": "x"})),
        ),
        (Method::GET, "/assistants/{a}", None),
        (Method::GET, "/assistants/{r}", None),
        (
            Method::PATCH,
            "/assistants/{a}",
            Some(json!({"name": "contract-2", "metadata": {"more": "y"}})),
        ),
        (
            Method::PATCH,
            "/assistants/{a}",
            Some(json!({"graph_id": "nope"})),
        ),
        // `config.configurable` and `context` mirror each other.
        (
            Method::PATCH,
            "/assistants/{a}",
            Some(json!({"config": {"configurable": {"k": 1}}})),
        ),
        (
            Method::PATCH,
            "/assistants/{a}",
            Some(json!({"context": {"c": 2}})),
        ),
        (
            Method::PATCH,
            "/assistants/{a}",
            Some(json!({"config": {"tags": ["u"]}})),
        ),
        (
            Method::PATCH,
            "/assistants/{a}",
            Some(json!({"config": {}})),
        ),
        (
            Method::PATCH,
            "/assistants/{a}",
            Some(json!({"context": {}})),
        ),
        (
            Method::PATCH,
            "/assistants/{a}",
            Some(json!({"config": {"configurable": {"k": 2}},
            "context": {"c": 3}})),
        ),
        (Method::PATCH, "/assistants/{r}", Some(json!({"name": "n"}))),
        (Method::POST, "/assistants/{a}/versions", Some(json!({}))),
        (
            Method::POST,
            "/assistants/{a}/versions",
            Some(json!({"metadata": {"more": "y"}})),
        ),
        (Method::POST, "/assistants/{r}/versions", Some(json!({}))),
        (
            Method::POST,
            "/assistants/{a}/latest",
            Some(json!({"version": 1})),
        ),
        // A PATCH after `/latest` starts from the version that serves.
        (
            Method::PATCH,
            "/assistants/{a}",
            Some(json!({"name": "after-latest"})),
        ),
        (
            Method::POST,
            "/assistants/{a}/versions",
            Some(json!({"limit": 2})),
        ),
        (
            Method::POST,
            "/assistants/{a}/latest",
            Some(json!({"version": 99})),
        ),
        (
            Method::POST,
            "/assistants/{r}/latest",
            Some(json!({"version": 1})),
        ),
        (Method::GET, "/assistants/{a}", None),
        (Method::POST, "/runs/crons", Some(cron)),
        (
            Method::POST,
            "/runs/crons",
            Some(json!({"assistant_id": "{a}", "schedule": "61 * * * *"})),
        ),
        (
            Method::POST,
            "/runs/crons",
            Some(json!({"assistant_id": "nope", "schedule": "* * * * *"})),
        ),
        (
            Method::POST,
            "/runs/crons",
            Some(json!({"assistant_id": "{r}", "schedule": "* * * * *"})),
        ),
        (
            Method::POST,
            "/runs/crons/search",
            Some(json!({"metadata": {"tag": "contract"}})),
        ),
        (
            Method::POST,
            "/runs/crons/search",
            Some(json!({"assistant_id": "{a}", "enabled": false})),
        ),
        (
            Method::PATCH,
            "/runs/crons/{c}",
            Some(json!({"enabled": false, "schedule": "0 0 2 1 *",
            "metadata": {"more": "z"}})),
        ),
        (
            Method::PATCH,
            "/runs/crons/{c}",
            Some(json!({"schedule": "61 * * * *"})),
        ),
        (
            Method::PATCH,
            "/runs/crons/{r}",
            Some(json!({"enabled": false})),
        ),
        (
            Method::POST,
            "/runs/crons/search",
            Some(json!({"assistant_id": "{a}", "enabled": false})),
        ),
        (Method::DELETE, "/runs/crons/{c}", None),
        (Method::DELETE, "/runs/crons/{c}", None),
        (Method::DELETE, "/assistants/{a}", None),
        (Method::DELETE, "/assistants/{a}", None),
        (Method::GET, "/assistants/{a}", None),
    ]
    .into_iter()
    .chain(thread_steps())
    .collect()
}

/// The steps of a suite's case run on a thread the client names (`{t}`):
/// refused without `if_not_exists`, made with the run's metadata with it,
/// found by that metadata, then pruned (an id that is not a UUID is 422).
fn thread_steps() -> Vec<(Method, &'static str, Option<Value>)> {
    let run = json!({"assistant_id": "agent", "input": {"messages": []},
        "metadata": {"agentserver.dev/suite-run": "{a}"}, "stream_mode": "values"});
    let mut create = run.clone();
    create["if_not_exists"] = json!("create");
    create["on_disconnect"] = json!("continue");
    let search = json!({"metadata": {"agentserver.dev/suite-run": "{a}"},
        "select": ["thread_id", "status", "metadata"]});
    vec![
        (Method::POST, "/threads/{t}/runs/stream", Some(run)),
        (Method::POST, "/threads/{t}/runs/stream", Some(create)),
        (Method::POST, "/threads/search", Some(search.clone())),
        (
            Method::POST,
            "/threads/prune",
            Some(json!({"thread_ids": ["{t}", "{r}"]})),
        ),
        (
            Method::POST,
            "/threads/prune",
            Some(json!({"thread_ids": ["nope"]})),
        ),
        (Method::POST, "/threads/search", Some(search)),
    ]
}

/// Part 3: runs [`steps`] on `server`; each answer normalized, with the
/// step, for the comparison.
async fn exchange(server: &Server) -> Vec<(String, u16, Value)> {
    let a = uuid::Uuid::new_v4().to_string();
    let r = uuid::Uuid::new_v4().to_string();
    let t = uuid::Uuid::new_v4().to_string();
    // The graph's own assistant, which each server names its own way: a
    // thread's metadata carries it.
    let (_, found) = server
        .send(
            Method::POST,
            "/assistants/search",
            Some(&json!({"graph_id": "agent", "metadata": {"created_by": "system"}})),
        )
        .await;
    let system = found[0]["assistant_id"]
        .as_str()
        .expect("the graph's own assistant")
        .to_owned();
    let mut c = String::from("no-cron-yet");
    let mut out = Vec::new();
    for (method, path, body) in steps() {
        let fill = |s: &str| {
            s.replace("{a}", &a)
                .replace("{r}", &r)
                .replace("{c}", &c)
                .replace("{t}", &t)
        };
        let path = fill(path);
        let body = body.map(|b| serde_json::from_str(&fill(&b.to_string())).unwrap());
        let step = format!("{method} {path} {}", body.clone().unwrap_or(Value::Null));
        let (status, mut answer) = server.send(method.clone(), &path, body.as_ref()).await;
        if path.ends_with("/runs/stream") && status == 200 {
            // The events (run ids, the graph's own states) are not compared.
            answer = json!("<event stream>");
        }
        if path == "/runs/crons" && status == 200 {
            c = answer["cron_id"].as_str().unwrap_or_default().to_owned();
        }
        let names = [
            (a.clone(), "{a}"),
            (r.clone(), "{r}"),
            (c.clone(), "{c}"),
            (t.clone(), "{t}"),
            (system.clone(), "{system}"),
        ];
        out.push((
            normalize(&Value::String(step), &names)
                .as_str()
                .unwrap()
                .to_owned(),
            status,
            normalize(&answer, &names),
        ));
    }
    out
}

/// The emulator's agent server URL for a new deployment, once it answers.
async fn emulator_agent_server(emu: &emulator::RunningEmulator) -> String {
    let http = reqwest::Client::new();
    let url = crate::agentserver_emulator::agent_server_url(emu, "contract").await;
    let started = Instant::now();
    loop {
        let ok = http
            .get(format!("{url}/ok"))
            .header("X-Api-Key", DEMO_API_KEY)
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if ok {
            return url;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{url} never answered /ok"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_emulator_serves_assistants_and_crons_as_the_real_server_does() {
    test_support::skip_without!(AgentServer);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let real = support::langgraph::shared(TEST);
    let openapi: Value = reqwest::get(format!("{}/openapi.json", real.url))
        .await
        .expect("GET /openapi.json")
        .json()
        .await
        .expect("/openapi.json is JSON");
    let emu = emulator::spawn(EmulatorConfig {
        step_duration: Duration::from_millis(30),
        ..Default::default()
    })
    .await
    .unwrap();

    // 1. Routes.
    let mut diffs = Vec::new();
    let (requests, answers) = compare_routes(&openapi, &mut diffs);

    // 2. Schemas: every schema a served route names has its wire type.
    let ours = wire_schemas();
    for name in requests.iter().chain(&answers) {
        let Some((_, schema)) = ours.iter().find(|(n, _)| n == name) else {
            diffs.push(format!(
                "schema {name}: named by a served route, no wire type mapped in wire_schemas()"
            ));
            continue;
        };
        let real_schema = &openapi["components"]["schemas"][name.as_str()];
        if real_schema.is_null() {
            diffs.push(format!("schema {name}: not in /openapi.json"));
            continue;
        }
        compare_schema(
            name,
            real_schema,
            schema,
            requests.contains(name),
            &mut diffs,
        );
    }
    for (name, _) in &ours {
        if !requests.contains(*name) && !answers.contains(*name) {
            diffs.push(format!(
                "schema {name}: mapped in wire_schemas() but named by no served route"
            ));
        }
    }

    // 3. The same requests to both servers.
    let real_server = Server {
        url: real.url.clone(),
        key: None,
        http: reqwest::Client::new(),
    };
    let emulated = Server {
        url: emulator_agent_server(&emu).await,
        key: Some(DEMO_API_KEY),
        http: reqwest::Client::new(),
    };
    let theirs = exchange(&real_server).await;
    let mine = exchange(&emulated).await;
    assert_eq!(theirs.len(), mine.len());
    for ((step, status, answer), (_, e_status, e_answer)) in theirs.iter().zip(&mine) {
        if status != e_status || answer != e_answer {
            diffs.push(format!(
                "answer to {step}:\n    real server: {status} {answer}\n    emulator:    {e_status} {e_answer}"
            ));
        }
    }
    // The exchange does what it says: a cron was made and found.
    assert!(
        theirs
            .iter()
            .any(|(s, st, a)| s.starts_with("POST /runs/crons/search")
                && *st == 200
                && a.as_array().is_some_and(|l| l.len() == 1)),
        "the exchange found no cron on the real server: {theirs:#?}"
    );

    let violations =
        support::budget::budget_violations_at(&emu.base_url(), &support::budget::Budget::default())
            .await
            .expect("reading the emulator's request log");
    emu.shutdown().await;
    assert!(violations.is_empty(), "request budget: {violations:#?}");
    assert!(
        diffs.is_empty(),
        "the emulator's agent server differs from the real one ({} differences):\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}
