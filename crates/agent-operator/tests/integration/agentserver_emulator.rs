//! The agent server client against the emulator's built-in agent server at a
//! deployment's `custom_url`: the same client code as against `langgraph dev`
//! (crates/agent-operator/tests/integration/agentserver_real.rs), plus what only a cloud deployment does:
//! `X-Api-Key` required and checked against the owning organization (docs/control-plane-api.md
//! "Agent server"), and a stream that ends with `event: end`.

use std::time::{Duration, Instant};

use agent_operator::agentserver::{
    AgentServerClient, AgentServerConfig, AssistantSearch, Error, RunEvent, RunStreamRequest,
    StreamMode,
};
use control_plane_emulator::{
    self as emulator, ApiKey, DEMO_API_KEY, DEMO_WORKSPACE_ID, EmulatorConfig,
};
use futures::StreamExt;
use serde_json::{Value, json};

const OTHER_KEY: &str = "other-org-key";
const OTHER_WORKSPACE: &str = "00000000-0000-4000-8000-0000000000bb";

/// Creates the `github` deployment `name` on `emu`; the URL of its
/// built-in agent server (`source_config.custom_url`).
pub(crate) async fn agent_server_url(emu: &emulator::RunningEmulator, name: &str) -> String {
    let d: Value = reqwest::Client::new()
        .post(format!("{}/v2/deployments", emu.base_url()))
        .header("X-Api-Key", DEMO_API_KEY)
        .header("X-Tenant-Id", DEMO_WORKSPACE_ID)
        .json(&json!({
            "name": name, "source": "github",
            "source_config": {"repo_url": "https://github.com/acme/agent", "deployment_type": "dev", "build_on_push": false},
            "source_revision_config": {"repo_ref": "main", "langgraph_config_path": "langgraph.json"},
            "secrets": []
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    d["source_config"]["custom_url"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn client_against_the_built_in_agent_server() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let emu = emulator::spawn(EmulatorConfig {
        api_keys: vec![
            ApiKey::new(DEMO_API_KEY, DEMO_WORKSPACE_ID),
            ApiKey::new(OTHER_KEY, OTHER_WORKSPACE),
        ],
        step_duration: Duration::from_millis(30),
        ..Default::default()
    })
    .await
    .unwrap();
    let url = agent_server_url(&emu, "agent-app").await;
    let with_key = |key: &str| {
        AgentServerClient::new(
            AgentServerConfig::new(url.clone()).with_api_key(key.to_owned().into()),
        )
        .unwrap()
    };
    let client = with_key(DEMO_API_KEY);

    // 503 until the first revision is DEPLOYED: transient.
    let started = Instant::now();
    loop {
        match client.ok().await {
            Ok(()) => break,
            Err(e) => {
                assert!(e.is_transient(), "{e}");
                assert!(started.elapsed() < Duration::from_secs(20), "{e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    let info = client.info().await.unwrap();
    assert!(info.version.unwrap().starts_with("emulator-"));

    let all = client
        .search_all_assistants(&AssistantSearch {
            graph_id: Some("agent".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(all.len(), 1);
    assert!(all[0].is_system_default());

    let input = json!({"messages": [{"role": "user", "content": "hello"}]});
    let events: Vec<RunEvent> = client
        .stream_run(&RunStreamRequest {
            assistant_id: all[0].assistant_id.clone(),
            input: Some(input.clone()),
            stream_mode: Some(StreamMode::Many(vec!["updates".into(), "values".into()])),
            ..Default::default()
        })
        .await
        .unwrap()
        .map(Result::unwrap)
        .collect()
        .await;
    assert!(matches!(events[0], RunEvent::Metadata { .. }), "{events:?}");
    assert_eq!(events[1], RunEvent::Updates(json!({"echo": input})));
    assert_eq!(events[2], RunEvent::Values(input));
    assert_eq!(events.last(), Some(&RunEvent::End));

    let e = client
        .stream_run(&RunStreamRequest {
            assistant_id: "nope".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(
        matches!(&e, Error::AssistantNotFound { assistant_id, status: 404, .. } if assistant_id == "nope"),
        "{e}"
    );

    let no_key = AgentServerClient::new(AgentServerConfig::new(url.clone())).unwrap();
    let e = no_key.ok().await.unwrap_err();
    assert!(matches!(e, Error::Unauthorized { status: 401, .. }), "{e}");
    assert!(!e.is_transient());
    let e = with_key(OTHER_KEY).ok().await.unwrap_err();
    assert!(matches!(e, Error::Unauthorized { status: 403, .. }), "{e}");
    assert!(!format!("{e} {e:?}").contains(OTHER_KEY));
    emu.shutdown().await;
}

/// The emulator's assistants answer as the real server does
/// (agentserver_real.rs `assistant_and_cron_wire_types_match_the_real_server`
/// checks these facts on `langgraph dev`), through the operator's client: a
/// create with a client-chosen id and `if_exists: do_nothing` answers the
/// same assistant twice; a PATCH makes version 2 and merges `metadata`;
/// `latest` sets the serving version; an unknown graph is 404 naming it;
/// DELETE, then GET is absent and a second DELETE is fine.
#[tokio::test]
async fn the_built_in_agent_server_keeps_assistants_like_the_real_one() {
    use agent_operator::agentserver::types::{AssistantCreate, AssistantPatch, IfExists};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let emu = emulator::spawn(EmulatorConfig {
        step_duration: Duration::from_millis(30),
        ..Default::default()
    })
    .await
    .unwrap();
    let url = agent_server_url(&emu, "assistants").await;
    let client = AgentServerClient::new(
        AgentServerConfig::new(url).with_api_key(DEMO_API_KEY.to_owned().into()),
    )
    .unwrap();
    let started = Instant::now();
    while client.ok().await.is_err() {
        assert!(started.elapsed() < Duration::from_secs(20));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
    let first = client.create_assistant(&create).await.unwrap();
    let second = client.create_assistant(&create).await.unwrap();
    assert_eq!(first, second, "do_nothing answers the first one unchanged");
    assert_eq!(first.version, Some(1));
    let patched = client
        .patch_assistant(
            &id,
            &AssistantPatch {
                config: Some(json!({"configurable": {"model": "b"}})),
                metadata: Some(json!({"owner": "team-a"}).as_object().unwrap().clone()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(patched.version, Some(2));
    assert_eq!(patched.metadata["suite"], "wire", "metadata is merged");
    let latest = client.set_latest_assistant_version(&id, 1).await.unwrap();
    assert_eq!(latest.version, Some(1));
    assert_eq!(latest.config["configurable"]["model"], "a");
    let got = client.get_assistant(&id).await.unwrap().unwrap();
    assert_eq!(got.version, Some(1), "GET answers the serving version");
    let unknown = AssistantCreate {
        graph_id: "no-such-graph".into(),
        assistant_id: Some(uuid::Uuid::new_v4().to_string()),
        ..create.clone()
    };
    match client.create_assistant(&unknown).await {
        Err(Error::NotFound { detail }) => assert!(detail.contains("no-such-graph"), "{detail}"),
        other => panic!("{other:?}"),
    }
    client.delete_assistant(&id).await.unwrap();
    assert_eq!(client.get_assistant(&id).await.unwrap(), None);
    client.delete_assistant(&id).await.expect("a 404 is gone");
}
