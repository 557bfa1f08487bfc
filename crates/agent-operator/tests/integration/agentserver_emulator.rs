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
    let http = reqwest::Client::new();
    let d: Value = http
        .post(format!("{}/v2/deployments", emu.base_url()))
        .header("X-Api-Key", DEMO_API_KEY)
        .header("X-Tenant-Id", DEMO_WORKSPACE_ID)
        .json(&json!({
            "name": "agent-app", "source": "github",
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
    let url = d["source_config"]["custom_url"]
        .as_str()
        .unwrap()
        .to_owned();
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
