//! The emulator's LangSmith datasets against the official `langsmith`
//! Python client (pinned from PyPI in hack/agent-server/constraints.txt,
//! in the agent server's virtualenv): `contract_datasets.py` writes a
//! dataset of 120 examples, reads it back by name and id, pages through
//! its examples, meets a 409 and two 404s the way the client raises them,
//! and deletes it; once with the cloud's `api_url` (the emulator's root)
//! and once with a self-hosted one (`/api/v1`). docs/control-plane-api.md,
//! "LangSmith datasets".

use std::collections::BTreeMap;

use control_plane_emulator::{DEMO_API_KEY, DEMO_WORKSPACE_ID};
use serde_json::{Value, json};

use crate::contract_common::Emu;

/// The requests of one run, by method and path with ids as `{id}`.
fn by_route(emu: &Emu) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for a in emu.log() {
        let path: Vec<&str> = a
            .path
            .split('/')
            .map(|s| {
                if uuid::Uuid::parse_str(s).is_ok() {
                    "{id}"
                } else {
                    s
                }
            })
            .collect();
        *out.entry(format!("{} {}", a.method, path.join("/")))
            .or_default() += 1;
    }
    out
}

/// Runs the virtualenv's Python (where the pinned `langsmith` client is)
/// with `args`, tracing off and no key or endpoint of the environment;
/// panics unless it succeeds; the last line it printed, as JSON.
pub(crate) async fn run_langsmith<S: AsRef<std::ffi::OsStr>>(
    args: impl IntoIterator<Item = S>,
) -> Value {
    let root = test_support::repo_root();
    let out = tokio::process::Command::new(root.join(".cache/langgraph-venv/bin/python"))
        .args(args)
        .env("LANGSMITH_TRACING", "false")
        .env_remove("LANGSMITH_API_KEY")
        .env_remove("LANGSMITH_ENDPOINT")
        .output()
        .await
        .expect("running the langsmith client");
    assert!(
        out.status.success(),
        "the langsmith client failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// Runs the client's script against `api_url`; its JSON line.
async fn run_client(api_url: &str) -> Value {
    let script = test_support::repo_root()
        .join("crates/agent-operator/tests/integration/contract_datasets.py");
    run_langsmith([
        script.as_os_str(),
        api_url.as_ref(),
        DEMO_API_KEY.as_ref(),
        DEMO_WORKSPACE_ID.as_ref(),
    ])
    .await
}

async fn the_official_client_round_trips_a_dataset_at(prefix: &str, upload: &str) {
    let emu = Emu::fast().await;
    let seen = run_client(&format!("{}{prefix}", emu.base_url)).await;
    let id = seen["dataset_id"].as_str().unwrap().to_owned();
    assert_eq!(seen["uploaded"], 120, "{seen}");
    assert_eq!(seen["same_id"], true, "{seen}");
    assert_eq!(seen["example_count"], 120, "{seen}");
    assert_eq!(seen["description"], "the echo graph's cases");
    assert_eq!(seen["examples"], 120, "{seen}");
    assert_eq!(
        seen["first"],
        json!({
            "inputs": {"messages": [{"role": "user", "content": "case 0"}]},
            "outputs": {"answer": "echo: case 0"},
            "metadata": {"case": "c000"},
            "dataset_id": id,
        })
    );
    assert_eq!(seen["cases_in_order"], true);
    assert_eq!(seen["read_one"], "c007");
    for refused in ["conflict", "missing_id", "missing_name", "gone"] {
        assert_eq!(seen[refused], true, "{refused}: {seen}");
    }
    // The budget, every request the script's calls need: the two creates
    // (one refused), four reads by name (by name, before listing by name,
    // and the two has_dataset), two by id (one missing), one upload for
    // 120 examples, two pages of examples, one example, the flags before
    // the upload, the tenant once, the delete.
    let expected: BTreeMap<String, usize> = [
        (format!("POST {prefix}/datasets"), 2),
        (format!("GET {prefix}/datasets"), 4),
        (format!("GET {prefix}/datasets/{{id}}"), 2),
        (format!("POST {prefix}{upload}"), 1),
        (format!("GET {prefix}/examples"), 2),
        (format!("GET {prefix}/examples/{{id}}"), 1),
        (format!("GET {prefix}/info"), 1),
        (format!("GET {prefix}/sessions"), 1),
        (format!("DELETE {prefix}/datasets/{{id}}"), 1),
    ]
    .into_iter()
    .collect();
    assert_eq!(by_route(&emu), expected);
}

#[tokio::test]
async fn the_official_client_round_trips_a_dataset_on_the_cloud_url() {
    test_support::skip_without!(AgentServer);
    the_official_client_round_trips_a_dataset_at("", "/v1/platform/datasets/{id}/examples").await;
}

#[tokio::test]
async fn the_official_client_round_trips_a_dataset_on_a_self_hosted_url() {
    test_support::skip_without!(AgentServer);
    the_official_client_round_trips_a_dataset_at("/api/v1", "/platform/datasets/{id}/examples")
        .await;
}
