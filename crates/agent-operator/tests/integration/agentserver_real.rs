//! The agent server client against a real agent server: `langgraph dev`
//! (installed by `make setup`) serving the echo graph of
//! `crates/test-support/fixtures/echo-agent` (see `support::langgraph`).
//!
//! Source: docs/control-plane-api.md "Agent server".

use crate::support;

use std::time::{Duration, Instant};

use agent_operator::agentserver::{
    AgentServerClient, AgentServerConfig, AssistantSearch, Error, RunEvent, RunStreamRequest,
    StreamMode,
};
use futures::StreamExt;
use serde_json::{Value, json};

const TEST: &str = "agentserver_real";

fn client() -> AgentServerClient {
    let server = support::langgraph::shared(TEST);
    AgentServerClient::new(AgentServerConfig::new(server.url.clone())).expect("client")
}

fn input() -> Value {
    json!({"messages": [{"role": "user", "content": "hello echo"}]})
}

async fn run(modes: Option<StreamMode>) -> Vec<RunEvent> {
    let req = RunStreamRequest {
        assistant_id: "agent".into(),
        input: Some(input()),
        stream_mode: modes,
        ..Default::default()
    };
    let stream = client().stream_run(&req).await.expect("starting the run");
    let events: Vec<RunEvent> = stream.map(|e| e.expect("a stream event")).collect().await;
    assert!(
        matches!(&events[0], RunEvent::Metadata { run_id, .. } if !run_id.is_empty()),
        "the first event is metadata: {events:?}"
    );
    events
}

#[tokio::test]
async fn ok_info_and_the_default_assistant() {
    test_support::skip_without!(AgentServer);
    let c = client();
    c.ok().await.expect("GET /ok");
    let info = c.info().await.expect("GET /info");
    assert!(info.version.is_some(), "{info:?}");
    let page = c
        .search_assistants(&AssistantSearch {
            graph_id: Some("agent".into()),
            metadata: Some(json!({"created_by": "system"}).as_object().unwrap().clone()),
            ..Default::default()
        })
        .await
        .expect("search");
    assert_eq!(page.assistants.len(), 1, "{page:?}");
    let a = &page.assistants[0];
    assert_eq!(a.graph_id, "agent");
    assert_eq!(a.name.as_deref(), Some("agent"));
    assert!(a.is_system_default(), "{a:?}");
    assert_eq!(page.next_offset, None);
}

#[tokio::test]
async fn search_by_graph_id_and_paging() {
    test_support::skip_without!(AgentServer);
    let c = client();
    let server = support::langgraph::shared(TEST);
    // Three more assistants of graph `agent`, tagged for this test
    // (`POST /assistants` is not part of the client).
    let tag = uuid::Uuid::new_v4().to_string();
    let http = reqwest::Client::new();
    for i in 0..3 {
        let resp = http
            .post(format!("{}/assistants", server.url))
            .json(&json!({"graph_id": "agent", "name": format!("paging-{i}"), "metadata": {"suite": tag}}))
            .send()
            .await
            .expect("creating an assistant");
        assert!(resp.status().is_success(), "{}", resp.status());
    }
    let tagged = || AssistantSearch {
        metadata: Some(json!({"suite": tag}).as_object().unwrap().clone()),
        graph_id: Some("agent".into()),
        ..Default::default()
    };
    let first = c
        .search_assistants(&AssistantSearch {
            limit: Some(2),
            ..tagged()
        })
        .await
        .expect("first page");
    assert_eq!(first.assistants.len(), 2);
    assert_eq!(first.next_offset, Some(2), "X-Pagination-Next");
    let all = c
        .search_all_assistants(&AssistantSearch {
            limit: Some(1),
            ..tagged()
        })
        .await
        .expect("all pages");
    let mut names: Vec<_> = all.iter().filter_map(|a| a.name.clone()).collect();
    names.sort();
    assert_eq!(names, ["paging-0", "paging-1", "paging-2"]);
    let by_graph = c
        .search_all_assistants(&AssistantSearch {
            graph_id: Some("agent".into()),
            limit: Some(2),
            ..Default::default()
        })
        .await
        .expect("by graph id");
    assert!(by_graph.len() >= 4, "{}", by_graph.len());
    assert!(by_graph.iter().all(|a| a.graph_id == "agent"));
    // langgraph dev answers a search for a graph it does not serve with a
    // 404 naming the graph (not an empty list).
    let e = c
        .search_all_assistants(&AssistantSearch {
            graph_id: Some("no-such-graph".into()),
            ..Default::default()
        })
        .await
        .expect_err("unknown graph");
    assert!(
        matches!(&e, Error::NotFound { detail } if detail.contains("no-such-graph")),
        "{e}"
    );
}

#[tokio::test]
async fn stream_updates() {
    test_support::skip_without!(AgentServer);
    let events = run(Some(StreamMode::One("updates".into()))).await;
    let updates: Vec<&Value> = events
        .iter()
        .filter_map(|e| match e {
            RunEvent::Updates(v) => Some(v),
            _ => None,
        })
        .collect();
    assert_eq!(
        updates,
        [&json!({"echo": {"echo": {"messages": input()["messages"]}}})],
        "{events:?}"
    );
}

#[tokio::test]
async fn stream_values() {
    test_support::skip_without!(AgentServer);
    let events = run(Some(StreamMode::One("values".into()))).await;
    let last = events
        .iter()
        .rev()
        .find_map(|e| match e {
            RunEvent::Values(v) => Some(v),
            _ => None,
        })
        .expect("a values event");
    assert_eq!(last["messages"], input()["messages"], "{events:?}");
    assert_eq!(last["echo"]["messages"], input()["messages"]);
}

#[tokio::test]
async fn stream_a_list_of_modes_and_the_default() {
    test_support::skip_without!(AgentServer);
    let events = run(Some(StreamMode::Many(vec![
        "updates".into(),
        "values".into(),
    ])))
    .await;
    assert!(events.iter().any(|e| matches!(e, RunEvent::Updates(_))));
    assert!(events.iter().any(|e| matches!(e, RunEvent::Values(_))));
    let default = run(None).await;
    assert!(default.iter().any(|e| matches!(e, RunEvent::Values(_))));
    assert!(!default.iter().any(|e| matches!(e, RunEvent::Updates(_))));
}

#[tokio::test]
async fn a_failing_run_ends_with_an_error_event() {
    test_support::skip_without!(AgentServer);
    let req = RunStreamRequest {
        assistant_id: "agent".into(),
        input: Some(json!({"fail": true})),
        stream_mode: Some(StreamMode::One("updates".into())),
        ..Default::default()
    };
    let events: Vec<_> = client().stream_run(&req).await.unwrap().collect().await;
    let last = events.last().unwrap().as_ref().expect("an event");
    assert!(
        matches!(last, RunEvent::Error { error, message } if error == "ValueError" && message.contains("fail")),
        "{events:?}"
    );
}

#[tokio::test]
async fn an_unknown_assistant_is_a_clear_error() {
    test_support::skip_without!(AgentServer);
    let c = client();
    for (assistant, status) in [
        ("no-such-graph", 422),
        ("00000000-0000-0000-0000-000000000001", 404),
    ] {
        let e = c
            .stream_run(&RunStreamRequest {
                assistant_id: assistant.into(),
                input: Some(json!({})),
                ..Default::default()
            })
            .await
            .expect_err("an unknown assistant");
        assert!(
            matches!(&e, Error::AssistantNotFound { assistant_id, status: s, .. } if assistant_id == assistant && *s == status),
            "{e}"
        );
        assert!(e.to_string().contains(assistant), "{e}");
        assert!(!e.is_transient());
        eprintln!("unknown assistant: {e}");
    }
}

#[tokio::test]
async fn a_server_that_is_down_is_a_quick_transient_error() {
    let port = support::free_port();
    let c =
        AgentServerClient::new(AgentServerConfig::new(format!("http://127.0.0.1:{port}"))).unwrap();
    let started = Instant::now();
    let e = c
        .stream_run(&RunStreamRequest {
            assistant_id: "agent".into(),
            ..Default::default()
        })
        .await
        .expect_err("nothing listens");
    assert!(matches!(e, Error::Transport(_)), "{e}");
    assert!(e.is_transient());
    let e = c.ok().await.expect_err("nothing listens");
    assert!(e.is_transient(), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    eprintln!("down: {e}");
}

#[tokio::test]
async fn agentctl_searches_and_streams() {
    test_support::skip_without!(AgentServer);
    let server = support::langgraph::shared(TEST);
    let bin = env!("CARGO_BIN_EXE_agentctl");
    let out = tokio::process::Command::new(bin)
        .args(["assistants", "search", "--url", &server.url])
        .args(["--graph-id", "agent", "--output", "json"])
        .env_remove("AGENT_SERVER_API_KEY")
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let found: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        found
            .iter()
            .any(|a| a["name"] == "agent" && a["metadata"]["created_by"] == "system"),
        "{found:?}"
    );
    let out = tokio::process::Command::new(bin)
        .args(["assistants", "search", "--url", &server.url])
        .output()
        .await
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.starts_with("ASSISTANT ID"), "{table}");
    assert!(table.contains("system"), "{table}");

    let out = tokio::process::Command::new(bin)
        .args([
            "runs",
            "stream",
            "--url",
            &server.url,
            "--assistant",
            "agent",
        ])
        .args(["--input", &input().to_string()])
        .args(["--stream-mode", "updates,values", "--stream-mode", "debug"])
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("agentctl runs stream:\n{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("metadata: {"), "{text}");
    let update = lines
        .iter()
        .find_map(|l| l.strip_prefix("updates: "))
        .expect("an updates line");
    let update: Value = serde_json::from_str(update).unwrap();
    assert_eq!(update["echo"]["echo"]["messages"], input()["messages"]);
    assert!(lines.iter().any(|l| l.starts_with("values: ")), "{text}");
    assert!(lines.iter().any(|l| l.starts_with("debug: ")), "{text}");

    let out = tokio::process::Command::new(bin)
        .args(["runs", "stream", "--url", &server.url])
        .args(["--assistant", "no-such-graph"])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no-such-graph"), "{err}");
}

/// The assistant and cron wire types of `agent-server-wire` against the
/// real server (the issue "Agents as code" builds on them): a create with a
/// client-chosen id and `if_exists: do_nothing` answers the same assistant
/// twice; a PATCH makes a new version; `latest` sets the serving one; a
/// cron created with metadata is found again by it; `end_time: null`
/// clears its end; each answer decodes into the shared types.
#[tokio::test]
async fn assistant_and_cron_wire_types_match_the_real_server() {
    use agent_operator::agentserver::types::{
        Assistant, AssistantCreate, AssistantPatch, AssistantVersionChange,
        AssistantVersionsSearch, Cron, CronCreate, CronPatch, CronSearch, IfExists,
    };
    test_support::skip_without!(AgentServer);
    // The product's client installs the TLS crypto provider reqwest needs.
    let _ = client();
    let server = support::langgraph::shared(TEST);
    let http = reqwest::Client::new();
    let url = |path: &str| format!("{}{path}", server.url);
    let id = uuid::Uuid::new_v4().to_string();
    let create = AssistantCreate {
        graph_id: "agent".into(),
        assistant_id: Some(id.clone()),
        if_exists: Some(IfExists::DoNothing),
        name: Some("wire-types".into()),
        config: Some(json!({"configurable": {"model": "a"}})),
        metadata: Some(json!({"suite": "wire"}).as_object().unwrap().clone()),
        ..Default::default()
    };
    let mut answers = Vec::new();
    for _ in 0..2 {
        let resp = http
            .post(url("/assistants"))
            .json(&create)
            .send()
            .await
            .unwrap();
        assert!(resp.status().is_success(), "{}", resp.status());
        answers.push(resp.json::<Assistant>().await.expect("an Assistant"));
    }
    assert_eq!(
        answers[0], answers[1],
        "do_nothing answers the first assistant unchanged"
    );
    assert_eq!(answers[0].assistant_id, id);
    assert_eq!(answers[0].version, Some(1));

    let patch = AssistantPatch {
        config: Some(json!({"configurable": {"model": "b"}})),
        metadata: Some(json!({"owner": "team-a"}).as_object().unwrap().clone()),
        ..Default::default()
    };
    let patched: Assistant = http
        .patch(url(&format!("/assistants/{id}")))
        .json(&patch)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .expect("the patched Assistant");
    assert_eq!(patched.version, Some(2));
    assert_eq!(patched.metadata["suite"], "wire", "metadata is merged");
    assert_eq!(patched.metadata["owner"], "team-a");
    let versions: Vec<Assistant> = http
        .post(url(&format!("/assistants/{id}/versions")))
        .json(&AssistantVersionsSearch::default())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .expect("the versions");
    assert_eq!(versions.len(), 2, "{versions:?}");
    let latest: Assistant = http
        .post(url(&format!("/assistants/{id}/latest")))
        .json(&AssistantVersionChange { version: 1 })
        .send()
        .await
        .unwrap()
        .json()
        .await
        .expect("the Assistant at version 1");
    assert_eq!(latest.version, Some(1));
    assert_eq!(latest.config["configurable"]["model"], "a");

    let tag = uuid::Uuid::new_v4().to_string();
    let cron_create = CronCreate {
        assistant_id: id.clone(),
        schedule: "0 3 * * *".into(),
        end_time: Some("2099-01-01T00:00:00Z".into()),
        input: Some(input()),
        metadata: Some(json!({"managed-by": tag}).as_object().unwrap().clone()),
        enabled: Some(false),
        ..Default::default()
    };
    let resp = http
        .post(url("/runs/crons"))
        .json(&cron_create)
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success(), "{}", resp.status());
    let cron: Cron = resp.json().await.expect("a Cron");
    assert_eq!(cron.schedule, "0 3 * * *");
    assert!(cron.end_time.is_some());
    let found: Vec<Cron> = http
        .post(url("/runs/crons/search"))
        .json(&CronSearch {
            metadata: Some(json!({"managed-by": tag}).as_object().unwrap().clone()),
            ..Default::default()
        })
        .send()
        .await
        .unwrap()
        .json()
        .await
        .expect("the crons found");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].cron_id, cron.cron_id);
    let resp = http
        .patch(url(&format!("/runs/crons/{}", cron.cron_id)))
        .json(&CronPatch {
            end_time: Some(None),
            ..Default::default()
        })
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success(), "{}", resp.status());
    let cleared: Cron = resp.json().await.expect("the patched Cron");
    assert_eq!(cleared.end_time, None, "end_time: null clears it");
    let resp = http
        .delete(url(&format!("/runs/crons/{}", cron.cron_id)))
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success(), "{}", resp.status());
}
