//! Emulator features beyond the core API, over HTTP on loopback: scenario
//! rules, admin routes, listeners, fault injection and the built-in agent
//! server. (The log routes are checked through the operator's client, in
//! agent-operator's `tests/integration/contract_logs.rs`.)

use std::time::{Duration, Instant};

use control_plane_emulator::{
    self as emulator, ApiKey, DEMO_API_KEY, DEMO_WORKSPACE_ID, EmulatorConfig, FaultConfig,
    RunningEmulator,
};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const POLL_LIMIT: Duration = Duration::from_secs(20);
const SH_WORKSPACE: &str = "00000000-0000-4000-8000-0000000000aa";
const SH_KEY: &str = "self-hosted-key";
const LISTENER_ID: &str = "6f1c2a3e-0000-4000-8000-000000000009";

fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

struct Client {
    http: reqwest::Client,
    base: String,
    key: &'static str,
    tenant: &'static str,
}

impl Client {
    fn demo(emu: &RunningEmulator) -> Self {
        Self {
            http: http(),
            base: emu.base_url(),
            key: DEMO_API_KEY,
            tenant: DEMO_WORKSPACE_ID,
        }
    }

    fn self_hosted(emu: &RunningEmulator) -> Self {
        Self {
            key: SH_KEY,
            tenant: SH_WORKSPACE,
            ..Self::demo(emu)
        }
    }

    async fn send(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("X-Api-Key", self.key)
            .header("X-Tenant-Id", self.tenant);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.expect("request sent");
        let status = res.status();
        let text = res.text().await.expect("body read");
        let json = serde_json::from_str(&text).unwrap_or(Value::Null);
        (status, json)
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.send(Method::GET, path, None).await
    }
}

fn config() -> EmulatorConfig {
    EmulatorConfig {
        api_keys: vec![
            ApiKey::new(DEMO_API_KEY, DEMO_WORKSPACE_ID),
            ApiKey::new(SH_KEY, SH_WORKSPACE),
        ],
        step_duration: Duration::from_millis(30),
        delete_duration: Duration::from_millis(200),
        listeners: vec![
            format!("{SH_WORKSPACE}={LISTENER_ID}:cluster-a:team-a,team-b")
                .parse()
                .unwrap(),
        ],
        listener_required_workspaces: vec![SH_WORKSPACE.into()],
        scenarios: vec!["BUILD_FAILED:repo_ref=broken".parse().unwrap()],
        ..Default::default()
    }
}

fn github(name: &str, repo_ref: &str) -> Value {
    json!({
        "name": name, "source": "github",
        "source_config": {"repo_url": "https://github.com/acme/agent", "deployment_type": "dev", "build_on_push": false},
        "source_revision_config": {"repo_ref": repo_ref, "langgraph_config_path": "langgraph.json"},
        "secrets": []
    })
}

fn docker(name: &str, image: &str, listener: Option<(&str, &str)>) -> Value {
    let mut sc = json!({"resource_spec": {}});
    if let Some((id, ns)) = listener {
        sc["listener_id"] = json!(id);
        sc["listener_config"] = json!({"k8s_namespace": ns});
    }
    json!({
        "name": name, "source": "external_docker", "source_config": sc,
        "source_revision_config": {"image_uri": image}, "secrets": []
    })
}

async fn create(c: &Client, body: Value) -> Value {
    let (status, d) = c.send(Method::POST, "/v2/deployments", Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{d}");
    d
}

fn rev_path(d: &Value) -> String {
    format!(
        "/v2/deployments/{}/revisions/{}",
        d["id"].as_str().unwrap(),
        d["latest_revision_id"].as_str().unwrap()
    )
}

async fn poll_until(c: &Client, path: &str, done: impl Fn(&str) -> bool) -> String {
    let started = Instant::now();
    loop {
        let (status, rev) = c.get(path).await;
        assert_eq!(status, StatusCode::OK, "{rev}");
        let s = rev["status"].as_str().unwrap().to_owned();
        if done(&s) {
            return s;
        }
        assert!(started.elapsed() < POLL_LIMIT, "still {s}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn admin(
    emu: &RunningEmulator,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut req = http().request(method, format!("{}/_emulator{path}", emu.base_url()));
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().await.unwrap();
    let status = res.status();
    (status, res.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn scenario_rules_fail_revisions() {
    let emu = emulator::spawn(config()).await.unwrap();
    let c = Client::demo(&emu);
    let d = create(&c, github("broken-app", "broken")).await;
    let end = poll_until(&c, &rev_path(&d), |s| {
        !s.starts_with("AWAITING") && s != "BUILDING"
    })
    .await;
    assert_eq!(end, "BUILD_FAILED");
    let (_, got) = c
        .get(&format!("/v2/deployments/{}", d["id"].as_str().unwrap()))
        .await;
    assert_eq!(
        got["active_revision_id"],
        Value::Null,
        "a failed revision never serves"
    );

    // Replace the rules at run time.
    let rules =
        json!([{"field": "image_uri", "equals": "acme/agent:bad", "outcome": "DEPLOY_FAILED"}]);
    let (status, got) = admin(&emu, Method::PUT, "/scenarios", Some(rules.clone())).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got, rules);
    let (_, got) = admin(&emu, Method::GET, "/scenarios", None).await;
    assert_eq!(got, rules);
    let d = create(&c, docker("bad-image", "acme/agent:bad", None)).await;
    let end = poll_until(&c, &rev_path(&d), |s| {
        s.contains("FAILED") || s == "DEPLOYED"
    })
    .await;
    assert_eq!(end, "DEPLOY_FAILED");
    let d = create(&c, github("now-fine", "broken")).await;
    let end = poll_until(&c, &rev_path(&d), |s| {
        s.contains("FAILED") || s == "DEPLOYED"
    })
    .await;
    assert_eq!(end, "DEPLOYED", "the start rules were replaced");

    let (status, _) = admin(
        &emu,
        Method::PUT,
        "/scenarios",
        Some(json!([{"field": "colour"}])),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    emu.shutdown().await;
}

#[tokio::test]
async fn admin_routes_count_dump_force_and_reset() {
    let emu = emulator::spawn(EmulatorConfig {
        step_duration: Duration::from_secs(30),
        ..config()
    })
    .await
    .unwrap();
    let c = Client::demo(&emu);
    let d = create(&c, github("counted", "main")).await;
    let id = d["id"].as_str().unwrap();
    c.get(&format!("/v2/deployments/{id}")).await;
    c.get(&format!("/v2/deployments/{id}")).await;
    c.get(&format!("/v2/deployments/{}", uuid::Uuid::new_v4()))
        .await;
    let (status, counts) = admin(&emu, Method::GET, "/requests", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        counts["routes"]["GET /v2/deployments/{deployment_id}"],
        json!({"200": 2, "404": 1})
    );
    assert_eq!(counts["routes"]["POST /v2/deployments"], json!({"201": 1}));
    assert_eq!(counts["total"], 4, "admin calls are not counted");

    // Force a status, even one the client does not know.
    let path = format!(
        "/deployments/{id}/revisions/{}/status",
        d["latest_revision_id"].as_str().unwrap()
    );
    let (status, rev) = admin(
        &emu,
        Method::POST,
        &path,
        Some(json!({"status": "PRUNE_FAILED"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(rev["status"], "PRUNE_FAILED");
    let (_, rev) = c.get(&rev_path(&d)).await;
    assert_eq!(rev["status"], "PRUNE_FAILED");
    let (status, _) = admin(
        &emu,
        Method::POST,
        &path,
        Some(json!({"status": "DEPLOYED"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, got) = c.get(&format!("/v2/deployments/{id}")).await;
    assert_eq!(got["active_revision_id"], d["latest_revision_id"]);
    let (status, _) = admin(
        &emu,
        Method::POST,
        &format!(
            "/deployments/{}/revisions/{}/status",
            uuid::Uuid::new_v4(),
            uuid::Uuid::new_v4()
        ),
        Some(json!({"status": "DEPLOYED"})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let (_, dump) = admin(&emu, Method::GET, "/store", None).await;
    let deployments = &dump["workspaces"][DEMO_WORKSPACE_ID]["deployments"];
    assert_eq!(deployments[0]["id"], id);
    assert_eq!(deployments[0]["revisions"][0]["status"], "DEPLOYED");

    let (status, _) = admin(&emu, Method::POST, "/reset", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = c.get(&format!("/v2/deployments/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, counts) = admin(&emu, Method::GET, "/requests", None).await;
    assert_eq!(counts["total"], 1, "counts restart at reset");
    emu.shutdown().await;
}

#[tokio::test]
async fn listeners_and_self_hosted_placement() {
    let emu = emulator::spawn(config()).await.unwrap();
    let cloud = Client::demo(&emu);
    let sh = Client::self_hosted(&emu);

    let (status, body) = cloud.get("/v2/listeners").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(body["detail"].as_str().unwrap().contains(DEMO_WORKSPACE_ID));
    let (status, _) = cloud.get(&format!("/v2/listeners/{LISTENER_ID}")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    let (status, page) = sh.get("/api-host/v2/listeners").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(page["resources"][0]["id"], LISTENER_ID);
    assert_eq!(page["resources"][0]["compute_type"], "k8s");
    let (status, l) = sh
        .get(&format!("/api-host/v2/listeners/{LISTENER_ID}"))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(l["compute_id"], "cluster-a");
    assert_eq!(
        l["compute_config"]["k8s_namespaces"],
        json!(["team-a", "team-b"])
    );
    let missing = uuid::Uuid::new_v4();
    let (status, body) = sh.get(&format!("/api-host/v2/listeners/{missing}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains(&missing.to_string())
    );
    let (status, body) = sh.get("/api-host/v2/listeners/not-a-uuid").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(body["detail"][0]["loc"], json!(["path", "listener_id"]));

    // Placement rules on create.
    let (status, body) = sh
        .send(
            Method::POST,
            "/api-host/v2/deployments",
            Some(docker("a", "img:1", None)),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("listener_id' is required")
    );
    let (status, body) = sh
        .send(
            Method::POST,
            "/api-host/v2/deployments",
            Some(docker("a", "img:1", Some((LISTENER_ID, "team-z")))),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body["detail"].as_str().unwrap().contains("team-z"));
    let (status, _) = sh
        .send(
            Method::POST,
            "/api-host/v2/deployments",
            Some(docker("a", "img:1", Some((&missing.to_string(), "team-a")))),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, d) = sh
        .send(
            Method::POST,
            "/api-host/v2/deployments",
            Some(docker("a", "img:1", Some((LISTENER_ID, "team-a")))),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{d}");
    assert_eq!(
        d["source_config"]["listener_config"],
        Value::Null,
        "listener settings are not read back (docs/control-plane-api.md, Answer shapes)"
    );
    assert_eq!(d["source_config"]["listener_id"], LISTENER_ID);
    let (status, body) = sh
        .send(
            Method::PATCH,
            &format!("/api-host/v2/deployments/{}", d["id"].as_str().unwrap()),
            Some(json!({"source_config": {"listener_config": {"k8s_namespace": "team-b"}}})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body["detail"].as_str().unwrap().contains("listener_config"));

    // A cloud workspace cannot place on a listener.
    let (status, _) = cloud
        .send(
            Method::POST,
            "/v2/deployments",
            Some(docker("b", "img:1", Some((LISTENER_ID, "team-a")))),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // Deployments are per workspace.
    let (_, page) = cloud.get("/v2/deployments").await;
    assert_eq!(page["resources"], json!([]));
    emu.shutdown().await;
}

#[tokio::test]
async fn injected_errors_rate_limits_and_latency() {
    let emu = emulator::spawn(config()).await.unwrap();
    let c = Client::demo(&emu);
    let faults = json!({"error_rate": 1.0});
    let (status, got) = admin(&emu, Method::PUT, "/faults", Some(faults)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got["error_status"], 503, "defaults fill the rest");
    let (status, body) = c.get("/v2/deployments").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body["detail"].is_string());
    let (status, _) = admin(&emu, Method::GET, "/store", None).await;
    assert_eq!(status, StatusCode::OK, "admin routes are never faulted");

    let (status, _) = admin(&emu, Method::PUT, "/faults", Some(json!({"drop_rate": 3}))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);

    let rl = json!({"rate_limit_per_second": 0.1, "rate_limit_burst": 2});
    admin(&emu, Method::PUT, "/faults", Some(rl)).await;
    assert_eq!(c.get("/v2/deployments").await.0, StatusCode::OK);
    assert_eq!(c.get("/v2/deployments").await.0, StatusCode::OK);
    let res = http()
        .get(format!("{}/v2/deployments", emu.base_url()))
        .header("X-Api-Key", DEMO_API_KEY)
        .header("X-Tenant-Id", DEMO_WORKSPACE_ID)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = res.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=10).contains(&retry), "{retry}");
    let sh = Client::self_hosted(&emu);
    assert_eq!(
        sh.get("/api-host/v2/listeners").await.0,
        StatusCode::OK,
        "per workspace"
    );

    admin(
        &emu,
        Method::PUT,
        "/faults",
        Some(json!({"latency_ms": 150})),
    )
    .await;
    let started = Instant::now();
    assert_eq!(c.get("/v2/deployments").await.0, StatusCode::OK);
    assert!(started.elapsed() >= Duration::from_millis(150));

    let (_, counts) = admin(&emu, Method::GET, "/requests", None).await;
    assert_eq!(counts["routes"]["GET /v2/deployments"]["429"], 1);
    assert_eq!(counts["routes"]["GET /v2/deployments"]["503"], 1);
    emu.shutdown().await;
}

#[tokio::test]
async fn dropped_and_hung_requests() {
    let emu = emulator::spawn(config()).await.unwrap();
    let c = Client::demo(&emu);
    admin(
        &emu,
        Method::PUT,
        "/faults",
        Some(json!({"drop_rate": 1.0})),
    )
    .await;
    let res = http()
        .get(format!("{}/v2/deployments", emu.base_url()))
        .header("X-Api-Key", DEMO_API_KEY)
        .header("X-Tenant-Id", DEMO_WORKSPACE_ID)
        .send()
        .await;
    let failed = match res {
        Err(_) => true,
        Ok(r) => r.bytes().await.is_err(),
    };
    assert!(
        failed,
        "the connection is dropped without a complete answer"
    );

    admin(
        &emu,
        Method::PUT,
        "/faults",
        Some(json!({"hang_rate": 1.0, "hang_ms": 100})),
    )
    .await;
    let (status, _) = c.get("/v2/deployments").await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT);
    let (_, counts) = admin(&emu, Method::GET, "/requests", None).await;
    assert_eq!(
        counts["routes"]["GET /v2/deployments"],
        json!({"dropped": 1, "hung": 1})
    );

    // Shutdown releases requests hanging for a long time.
    admin(
        &emu,
        Method::PUT,
        "/faults",
        Some(json!({"hang_rate": 1.0, "hang_ms": 600000})),
    )
    .await;
    let base = emu.base_url();
    let hung = tokio::spawn(async move {
        http()
            .get(format!("{base}/v2/deployments"))
            .header("X-Api-Key", DEMO_API_KEY)
            .header("X-Tenant-Id", DEMO_WORKSPACE_ID)
            .send()
            .await
            .map(|r| r.status())
    });
    let waiting = Instant::now();
    loop {
        let (_, counts) = admin(&emu, Method::GET, "/requests", None).await;
        if counts["routes"]["GET /v2/deployments"]["hung"] == 2 {
            break;
        }
        assert!(waiting.elapsed() < POLL_LIMIT, "the request never hung");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let started = Instant::now();
    emu.shutdown().await;
    assert!(
        started.elapsed() < emulator::SHUTDOWN_GRACE,
        "released, not aborted"
    );
    assert_eq!(hung.await.unwrap().unwrap(), StatusCode::GATEWAY_TIMEOUT);
}

#[tokio::test]
async fn invalid_start_faults_are_refused() {
    let err = emulator::spawn(EmulatorConfig {
        faults: FaultConfig {
            error_rate: 2.0,
            ..Default::default()
        },
        ..Default::default()
    })
    .await
    .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("error_rate"));
}

#[test]
fn fault_config_json_round_trips() {
    let f = FaultConfig {
        latency_ms: 5,
        rate_limit_per_second: Some(2.0),
        ..Default::default()
    };
    let back: FaultConfig = serde_json::from_value(serde_json::to_value(&f).unwrap()).unwrap();
    assert_eq!(back, f);
}

fn parse_sse(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let mut event = String::new();
            let mut data = String::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    event = v.trim().to_owned();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.trim());
                }
            }
            (event, serde_json::from_str(&data).unwrap())
        })
        .collect()
}

#[tokio::test]
async fn built_in_agent_server_answers_at_the_custom_url() {
    // Steps long enough that the first /ok comes before the revision is
    // DEPLOYED on a loaded machine (30 ms steps did not, once).
    let emu = emulator::spawn(EmulatorConfig {
        step_duration: Duration::from_millis(300),
        ..config()
    })
    .await
    .unwrap();
    let c = Client::demo(&emu);
    let d = create(&c, github("agent-app", "main")).await;
    let url = d["source_config"]["custom_url"]
        .as_str()
        .unwrap()
        .to_owned();
    let agent = |method: Method, path: &str| {
        http()
            .request(method, format!("{url}{path}"))
            .header("X-Api-Key", DEMO_API_KEY)
    };
    let res = agent(Method::GET, "/ok").send().await.unwrap();
    assert_eq!(
        res.status(),
        StatusCode::SERVICE_UNAVAILABLE,
        "no active revision yet"
    );
    poll_until(&c, &rev_path(&d), |s| s == "DEPLOYED").await;

    let res = agent(Method::GET, "/ok").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.json::<Value>().await.unwrap(), json!({"ok": true}));
    let res = http().get(format!("{url}/ok")).send().await.unwrap();
    assert_eq!(
        res.status(),
        StatusCode::UNAUTHORIZED,
        "cloud agent servers need a key"
    );
    let res = http()
        .get(format!("{url}/ok"))
        .header("X-Api-Key", SH_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.status(),
        StatusCode::FORBIDDEN,
        "a key of another organization"
    );

    let res = agent(Method::POST, "/assistants/search")
        .json(&json!({"metadata": {"created_by": "system"}, "limit": 10, "offset": 0}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let list: Value = res.json().await.unwrap();
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["graph_id"], "agent");
    assert_eq!(list[0]["metadata"]["created_by"], "system");
    let assistant_id = list[0]["assistant_id"].as_str().unwrap().to_owned();
    let res = agent(Method::POST, "/assistants/search")
        .json(&json!({"metadata": {"created_by": "user"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.json::<Value>().await.unwrap(), json!([]));

    let input = json!({"messages": [{"role": "user", "content": "hello"}]});
    for assistant in ["agent", assistant_id.as_str()] {
        let res = agent(Method::POST, "/runs/stream")
            .json(&json!({"assistant_id": assistant, "input": input, "stream_mode": "updates"}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert!(
            res.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream")
        );
        let events = parse_sse(&res.text().await.unwrap());
        let names: Vec<&str> = events.iter().map(|(e, _)| e.as_str()).collect();
        assert_eq!(names, ["metadata", "updates", "end"]);
        assert!(events[0].1["run_id"].is_string());
        assert_eq!(events[0].1["attempt"], 1);
        assert_eq!(events[1].1, json!({"echo": input}));
        assert_eq!(events[2].1, Value::Null);
    }
    let res = agent(Method::POST, "/runs/stream")
        .json(&json!({"assistant_id": "nope", "input": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    emu.shutdown().await;
}

#[tokio::test]
async fn agent_server_url_points_custom_urls_elsewhere() {
    let emu = emulator::spawn(EmulatorConfig {
        agent_server_url: Some("http://127.0.0.1:2024/".into()),
        ..config()
    })
    .await
    .unwrap();
    let c = Client::demo(&emu);
    let d = create(&c, github("external", "main")).await;
    assert_eq!(d["source_config"]["custom_url"], "http://127.0.0.1:2024");
    emu.shutdown().await;
}

/// `custom_url` of deployment `id` once a revision of `repo_ref` (when
/// set, by a PATCH) is built and deployed.
async fn url_after(c: &Client, id: &str, repo_ref: Option<&str>) -> String {
    if let Some(r) = repo_ref {
        let body = json!({"source_revision_config": {"repo_ref": r}});
        let path = format!("/v2/deployments/{id}");
        let (status, _) = c.send(Method::PATCH, &path, Some(body)).await;
        assert_eq!(status, StatusCode::OK);
    }
    // Ten steps of 30 ms build and deploy the revision.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let (_, d) = c
        .send(Method::GET, &format!("/v2/deployments/{id}"), None)
        .await;
    d["source_config"]["custom_url"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn a_marked_revision_is_served_at_its_own_url_while_it_is_active() {
    let emu = emulator::spawn(EmulatorConfig {
        agent_server_url: Some("http://127.0.0.1:2024".into()),
        agent_server_routes: vec![("broken".into(), "http://127.0.0.1:2025".into())],
        ..config()
    })
    .await
    .unwrap();
    let c = Client::demo(&emu);
    let d = create(&c, github("routed", "main")).await;
    let id = d["id"].as_str().unwrap().to_owned();
    assert_eq!(url_after(&c, &id, None).await, "http://127.0.0.1:2024");
    assert_eq!(
        url_after(&c, &id, Some("broken-1")).await,
        "http://127.0.0.1:2025"
    );
    assert_eq!(
        url_after(&c, &id, Some("main")).await,
        "http://127.0.0.1:2024"
    );
    emu.shutdown().await;
}

/// The commit of a revision (`repo_commit_sha`).
async fn commit_of(c: &Client, d: &Value, revision: &str) -> String {
    let (status, rev) = c
        .get(&format!(
            "/v2/deployments/{}/revisions/{revision}",
            d["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{rev}");
    rev["source_revision_config"]["repo_commit_sha"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn a_ref_builds_the_same_commit_until_it_is_pushed_and_a_rollback_keeps_its_commit() {
    let emu = emulator::spawn(config()).await.unwrap();
    let c = Client::demo(&emu);
    // Two deployments of one repository and ref build one commit.
    let staging = create(&c, github("staging", "main")).await;
    let production = create(&c, github("production", "main")).await;
    let first = commit_of(
        &c,
        &staging,
        staging["latest_revision_id"].as_str().unwrap(),
    )
    .await;
    assert_eq!(first.len(), 40, "{first}");
    assert_eq!(
        commit_of(
            &c,
            &production,
            production["latest_revision_id"].as_str().unwrap()
        )
        .await,
        first
    );
    // Another ref, another commit.
    let other = create(&c, github("other-ref", "release-2")).await;
    assert_ne!(
        commit_of(&c, &other, other["latest_revision_id"].as_str().unwrap()).await,
        first
    );

    // A push moves the ref: a redeploy builds the new commit.
    let (status, pushed) = admin(
        &emu,
        Method::POST,
        "/repos/push",
        Some(json!({"repo_url": "https://github.com/acme/agent", "ref": "main"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{pushed}");
    let moved = pushed["sha"].as_str().unwrap().to_owned();
    assert_ne!(moved, first);
    let id = staging["id"].as_str().unwrap();
    let (status, rev) = c
        .send(
            Method::POST,
            &format!("/v2/deployments/{id}/revisions"),
            None,
        )
        .await;
    assert!(status.is_success(), "{rev}");
    assert_eq!(
        commit_of(&c, &staging, rev["id"].as_str().unwrap()).await,
        moved
    );

    // A rollback to the first revision builds its commit again (an emulator
    // choice: the facts say only "that revision's configuration").
    let (status, rev) = c
        .send(
            Method::POST,
            &format!(
                "/v2/deployments/{id}/revisions/{}/redeploy",
                staging["latest_revision_id"].as_str().unwrap()
            ),
            None,
        )
        .await;
    assert!(status.is_success(), "{rev}");
    // (The answer is the deployment, naming its new latest revision.)
    let latest = rev["latest_revision_id"].as_str().unwrap();
    assert_eq!(commit_of(&c, &staging, latest).await, first);
    emu.shutdown().await;
}
