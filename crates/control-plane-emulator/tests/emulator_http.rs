//! The control plane emulator over HTTP on loopback: authentication, the
//! deployment and revision lifecycle, paging, FastAPI-shaped errors, async
//! delete and the `/api-host` prefix.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use control_plane_emulator::{
    self as emulator, DEMO_API_KEY, DEMO_WORKSPACE_ID, EmulatorConfig, RunningEmulator,
};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Longest a poll loop waits before the test fails (a safety net, not a
/// timing assertion).
const POLL_LIMIT: Duration = Duration::from_secs(20);

/// A reqwest client (the crate's reqwest has no TLS provider of its own, even
/// for plain HTTP).
fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

struct Client {
    http: reqwest::Client,
    base: String,
    key: String,
    tenant: String,
}

impl Client {
    fn new(emu: &RunningEmulator) -> Self {
        Self {
            http: http(),
            base: emu.base_url(),
            key: DEMO_API_KEY.into(),
            tenant: DEMO_WORKSPACE_ID.into(),
        }
    }

    fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .header("X-Api-Key", &self.key)
            .header("X-Tenant-Id", &self.tenant)
    }

    async fn send(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut req = self.request(method, path);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.expect("request sent");
        let status = res.status();
        let text = res.text().await.expect("body read");
        let json = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("JSON body, got {text:?}"))
        };
        (status, json)
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.send(Method::GET, path, None).await
    }
}

fn fast_config() -> EmulatorConfig {
    EmulatorConfig {
        step_duration: Duration::from_millis(40),
        delete_duration: Duration::from_millis(300),
        ..Default::default()
    }
}

/// Deployment `id` (a JSON string) as the emulator stored it, found in
/// `GET /_emulator/store`'s shape (`{"workspaces": {ws: {"deployments": [...]}}}`).
fn stored(emu: &emulator::RunningEmulator, id: &Value) -> Value {
    let id = id.as_str().unwrap_or_default();
    emulator::state::deployment_in_dump(&emu.state().dump(), id)
        .unwrap_or_else(|| panic!("deployment {id} stored"))
}

fn github_body(name: &str) -> Value {
    json!({
        "name": name,
        "source": "github",
        "source_config": {
            "integration_id": "3c90c3cc-0d44-4b50-8888-8dd25736052a",
            "repo_url": "https://github.com/acme/agent",
            "deployment_type": "dev",
            "build_on_push": false,
            "custom_url": "https://ignored.example",
            "resource_spec": {"min_scale": 1, "max_scale": 2, "cpu": 1}
        },
        "source_revision_config": {"repo_ref": "main", "langgraph_config_path": "langgraph.json"},
        "secrets": [{"name": "OPENAI_API_KEY", "value": "sk-test"}]
    })
}

async fn create(c: &Client, name: &str) -> Value {
    let (status, body) = c
        .send(Method::POST, "/v2/deployments", Some(github_body(name)))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body
}

fn id(v: &Value) -> String {
    v["id"].as_str().expect("id").to_owned()
}

#[tokio::test]
async fn missing_or_unknown_key_is_401_and_other_workspace_is_403() {
    let emu = emulator::spawn(fast_config()).await.unwrap();
    let http = http();
    let url = format!("{}/v2/deployments", emu.base_url());

    let res = http
        .get(&url)
        .header("X-Tenant-Id", DEMO_WORKSPACE_ID)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    assert!(res.json::<Value>().await.unwrap()["detail"].is_string());

    let res = http
        .get(&url)
        .header("X-Api-Key", "wrong-key-123")
        .header("X-Tenant-Id", DEMO_WORKSPACE_ID)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    let text = res.text().await.unwrap();
    assert!(
        !text.contains("wrong-key-123"),
        "the key is never echoed: {text}"
    );

    let res = http
        .get(&url)
        .header("X-Api-Key", DEMO_API_KEY)
        .header("X-Tenant-Id", "00000000-0000-4000-8000-0000000000ff")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    let body: Value = res.json().await.unwrap();
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("00000000-0000-4000-8000-0000000000ff")
    );
    assert!(!body.to_string().contains(DEMO_API_KEY));

    let res = http
        .get(&url)
        .header("X-Api-Key", DEMO_API_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.status(),
        StatusCode::FORBIDDEN,
        "X-Tenant-Id is required"
    );
    let body: Value = res.json().await.unwrap();
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("requires workspace specification"),
        "{body}"
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn header_names_are_case_insensitive_on_the_wire() {
    let emu = emulator::spawn(fast_config()).await.unwrap();
    let mut stream = tokio::net::TcpStream::connect(emu.addr).await.unwrap();
    let req = format!(
        "GET /v2/deployments HTTP/1.1\r\nHost: x\r\nX-API-KEY: {DEMO_API_KEY}\r\n\
         x-tenant-ID: {DEMO_WORKSPACE_ID}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    emu.shutdown().await;
}

#[tokio::test]
async fn create_get_patch_and_conflicts() {
    let emu = emulator::spawn(fast_config()).await.unwrap();
    let c = Client::new(&emu);
    let d = create(&c, "my-agent").await;
    let dep_id = id(&d);
    uuid::Uuid::parse_str(&dep_id).expect("uuid id");
    assert_eq!(d["tenant_id"], DEMO_WORKSPACE_ID);
    assert_eq!(d["name"], "my-agent");
    assert_eq!(d["status"], "READY");
    assert_eq!(
        d["source_config"]["custom_url"],
        format!("{}/agents/{dep_id}", emu.base_url()),
        "the service sets the URL of a github deployment"
    );
    assert_eq!(d["active_revision_id"], Value::Null);
    assert!(d["latest_revision_id"].is_string());
    assert_eq!(
        d["secrets"],
        json!([]),
        "secrets read back [] before the first revision (docs/control-plane-api.md, Answer shapes)"
    );
    chrono::DateTime::parse_from_rfc3339(d["created_at"].as_str().unwrap()).unwrap();
    chrono::DateTime::parse_from_rfc3339(d["updated_at"].as_str().unwrap()).unwrap();
    assert_eq!(
        d["source_config"]["listener_id"],
        Value::Null,
        "absent fields are null"
    );

    // The wire types (the operator's client decodes into them) decode the answer.
    let typed: control_plane_wire::types::Deployment = serde_json::from_value(d.clone()).unwrap();
    assert_eq!(
        typed.latest_revision_id.as_deref(),
        d["latest_revision_id"].as_str()
    );

    let (status, got) = c.get(&format!("/v2/deployments/{dep_id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got["id"], d["id"]);
    assert_eq!(
        got["source_config"]["repo_branch"], "main",
        "the configured branch (docs/control-plane-api.md, Answer shapes)"
    );
    let resolved = got["source_revision_config"]["repo_ref"].as_str().unwrap();
    assert!(
        control_plane_wire::types::is_resolved_commit(resolved),
        "repo_ref holds the resolved commit: {resolved}"
    );

    // Duplicate name: 409.
    let (status, body) = c
        .send(
            Method::POST,
            "/v2/deployments",
            Some(github_body("my-agent")),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(body["detail"].as_str().unwrap().contains("my-agent"));

    // Invalid name: 400.
    let (status, body) = c
        .send(
            Method::POST,
            "/v2/deployments",
            Some(github_body("My_Agent")),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body["detail"].is_string());

    // A github create without langgraph_config_path: 400.
    let mut b = github_body("no-config");
    b["source_revision_config"] = json!({"repo_ref": "main"});
    let (status, body) = c.send(Method::POST, "/v2/deployments", Some(b)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("langgraph_config_path")
    );

    // Partial PATCH without a revision trigger keeps the revision.
    let path = format!("/v2/deployments/{dep_id}");
    let (status, p) = c
        .send(
            Method::PATCH,
            &path,
            Some(json!({"source_config": {"build_on_push": true}})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{p}");
    assert_eq!(p["source_config"]["build_on_push"], true);
    assert_eq!(
        p["source_config"]["repo_url"],
        "https://github.com/acme/agent"
    );
    assert_eq!(p["latest_revision_id"], d["latest_revision_id"]);
    assert_eq!(p["source_config"]["resource_spec"]["max_scale"], 2);

    // resource_spec is replaced whole and creates a revision.
    let (status, p) = c
        .send(
            Method::PATCH,
            &path,
            Some(json!({"source_config": {"resource_spec": {"max_scale": 5}}})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(p["source_config"]["resource_spec"], json!({"max_scale": 5}));
    assert_ne!(p["latest_revision_id"], d["latest_revision_id"]);

    // An empty secrets list means unchanged: no revision, secrets kept.
    let (_, q) = c
        .send(Method::PATCH, &path, Some(json!({"secrets": []})))
        .await;
    assert_eq!(q["latest_revision_id"], p["latest_revision_id"]);
    assert_eq!(
        stored(&emu, &q["id"])["secrets"][0]["name"],
        "OPENAI_API_KEY"
    );

    // repo_ref creates a revision with the merged configuration.
    let (_, r) = c
        .send(
            Method::PATCH,
            &path,
            Some(json!({"source_revision_config": {"repo_ref": "release"}})),
        )
        .await;
    assert_ne!(r["latest_revision_id"], q["latest_revision_id"]);
    assert_eq!(r["source_config"]["repo_branch"], "release");
    assert_eq!(
        r["source_revision_config"]["langgraph_config_path"],
        "langgraph.json"
    );

    // Immutable fields: 400 naming the field.
    let (status, body) = c
        .send(
            Method::PATCH,
            &path,
            Some(json!({"source_config": {"deployment_type": "prod"}})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body["detail"].as_str().unwrap().contains("deployment_type"));

    // Unknown deployment: 404 naming the id.
    let missing = uuid::Uuid::new_v4();
    let (status, body) = c.get(&format!("/v2/deployments/{missing}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        body,
        json!({"detail": format!("Deployment ID {missing} not found.")})
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn list_pages_through_250_deployments() {
    let emu = emulator::spawn(fast_config()).await.unwrap();
    let c = Client::new(&emu);
    let mut created = HashSet::new();
    for i in 0..250 {
        created.insert(id(&create(&c, &format!("app-{i:03}")).await));
    }
    let mut seen = Vec::new();
    let mut offset = 0;
    loop {
        let (status, page) = c
            .get(&format!("/v2/deployments?limit=100&offset={offset}"))
            .await;
        assert_eq!(status, StatusCode::OK);
        let items = page["resources"].as_array().unwrap().clone();
        if items.is_empty() {
            break;
        }
        assert!(items.len() <= 100);
        seen.extend(items.iter().map(id));
        offset = page["offset"].as_u64().unwrap() as usize;
        assert_eq!(offset, seen.len(), "offset is the next page's offset");
    }
    assert_eq!(seen.len(), 250);
    assert_eq!(seen.iter().cloned().collect::<HashSet<_>>(), created);

    let (_, page) = c.get("/v2/deployments").await;
    assert_eq!(
        page["resources"].as_array().unwrap().len(),
        20,
        "default limit"
    );
    assert_eq!(page["resources"][0]["name"], "app-249", "newest first");

    let (_, page) = c
        .get("/v2/deployments?name_contains=APP-12&limit=100")
        .await;
    let names: Vec<&str> = page["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 10, "app-120..129: {names:?}");

    let some: Vec<String> = seen.iter().take(3).cloned().collect();
    let (_, page) = c
        .get(&format!(
            "/v2/deployments?deployment_ids={}",
            some.join(",")
        ))
        .await;
    assert_eq!(page["resources"].as_array().unwrap().len(), 3);

    let (_, page) = c.get("/v2/deployments?deployment_type=prod").await;
    assert_eq!(page["resources"].as_array().unwrap().len(), 0);
    emu.shutdown().await;
}

async fn wait_for_status(c: &Client, path: &str, want: &str) -> Vec<String> {
    let started = Instant::now();
    let mut seen: Vec<String> = Vec::new();
    loop {
        let (status, rev) = c.get(path).await;
        assert_eq!(status, StatusCode::OK, "{rev}");
        let s = rev["status"].as_str().unwrap().to_owned();
        if seen.last() != Some(&s) {
            seen.push(s.clone());
        }
        if s == want {
            return seen;
        }
        assert!(started.elapsed() < POLL_LIMIT, "still {seen:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn revision_progresses_to_deployed_and_becomes_active() {
    let emu = emulator::spawn(fast_config()).await.unwrap();
    let c = Client::new(&emu);
    let d = create(&c, "progress").await;
    let dep_id = id(&d);
    let (status, revs) = c.get(&format!("/v2/deployments/{dep_id}/revisions")).await;
    assert_eq!(status, StatusCode::OK);
    let first = &revs["resources"][0];
    assert_eq!(first["id"], d["latest_revision_id"]);
    assert_eq!(first["source"], "github");
    assert_eq!(first["source_revision_config"]["repo_ref"], "main");
    let rev_path = format!(
        "/v2/deployments/{dep_id}/revisions/{}",
        first["id"].as_str().unwrap()
    );
    let seen = wait_for_status(&c, &rev_path, "DEPLOYED").await;
    let order = [
        "AWAITING_BUILD",
        "BUILDING",
        "AWAITING_DEPLOY",
        "DEPLOYING",
        "DEPLOYED",
    ];
    let positions: Vec<usize> = seen
        .iter()
        .map(|s| {
            order
                .iter()
                .position(|o| o == s)
                .unwrap_or_else(|| panic!("unexpected {s}"))
        })
        .collect();
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "in order: {seen:?}"
    );
    let (_, d) = c.get(&format!("/v2/deployments/{dep_id}")).await;
    assert_eq!(d["active_revision_id"], first["id"]);

    // external_docker skips the build steps.
    let body = json!({
        "name": "docker-app", "source": "external_docker",
        "source_config": {"resource_spec": {}, "custom_url": "https://agent.example.com"},
        "source_revision_config": {"image_uri": "docker.io/acme/agent:1"},
        "secrets": []
    });
    let (status, d) = c.send(Method::POST, "/v2/deployments", Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{d}");
    assert_eq!(
        d["source_config"]["custom_url"],
        "https://agent.example.com"
    );
    let rev_path = format!(
        "/v2/deployments/{}/revisions/{}",
        id(&d),
        d["latest_revision_id"].as_str().unwrap()
    );
    let seen = wait_for_status(&c, &rev_path, "DEPLOYED").await;
    assert!(!seen.iter().any(|s| s.contains("BUILD")), "{seen:?}");
    emu.shutdown().await;
}

#[tokio::test]
async fn a_newer_revision_skips_one_in_progress() {
    let emu = emulator::spawn(EmulatorConfig {
        step_duration: Duration::from_secs(30),
        ..Default::default()
    })
    .await
    .unwrap();
    let c = Client::new(&emu);
    let d = create(&c, "supersede").await;
    let dep_id = id(&d);
    let path = format!("/v2/deployments/{dep_id}");
    let (_, p) = c
        .send(
            Method::PATCH,
            &path,
            Some(json!({"source_revision_config": {"repo_ref": "v2"}})),
        )
        .await;
    let (_, revs) = c.get(&format!("{path}/revisions")).await;
    let list = revs["resources"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0]["id"], p["latest_revision_id"], "newest first");
    assert_eq!(list[0]["status"], "AWAITING_BUILD");
    assert_eq!(list[1]["id"], d["latest_revision_id"]);
    assert_eq!(list[1]["status"], "SKIPPED");

    // Redeploy: 201 with the new Revision, which skips the previous one.
    let (status, rev) = c
        .send(Method::POST, &format!("{path}/revisions"), None)
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(rev["source_revision_config"]["repo_ref"], "v2");
    let (_, revs) = c.get(&format!("{path}/revisions?status=SKIPPED")).await;
    assert_eq!(revs["resources"].as_array().unwrap().len(), 2);
    let (_, revs) = c.get(&format!("{path}/revisions?limit=1&offset=1")).await;
    assert_eq!(revs["resources"][0]["id"], p["latest_revision_id"]);
    assert_eq!(revs["offset"], 2);

    let missing = uuid::Uuid::new_v4();
    let (status, body) = c.get(&format!("{path}/revisions/{missing}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains(&missing.to_string())
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn validation_errors_have_fastapi_shapes() {
    let emu = emulator::spawn(fast_config()).await.unwrap();
    let c = Client::new(&emu);

    let (status, body) = c.get("/v2/deployments/not-a-uuid").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let e = &body["detail"][0];
    assert_eq!(e["loc"], json!(["path", "deployment_id"]));
    assert_eq!(e["type"], "uuid_parsing");
    assert!(e["msg"].is_string());

    let res = c
        .request(Method::POST, "/v2/deployments")
        .header("content-type", "application/json")
        .body("{\"name\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["detail"][0]["type"], "json_invalid");
    assert_eq!(body["detail"][0]["loc"], json!(["body", 9]));

    let res = c
        .request(Method::POST, "/v2/deployments")
        .header("content-type", "text/plain")
        .body(github_body("plain").to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["detail"][0]["type"], "model_attributes_type");
    assert_eq!(body["detail"][0]["loc"], json!(["body"]));

    let mut b = github_body("x");
    b.as_object_mut().unwrap().remove("name");
    b["source_config"]["build_on_push"] = json!("maybe");
    let (status, body) = c.send(Method::POST, "/v2/deployments", Some(b)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let kinds: Vec<(&str, &Value)> = body["detail"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["type"].as_str().unwrap(), &e["loc"]))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("missing", &json!(["body", "name"])),
            (
                "bool_parsing",
                &json!(["body", "source_config", "build_on_push"])
            ),
        ]
    );
    assert!(
        !body.to_string().contains("sk-test"),
        "no body input echoed"
    );

    for (q, kind) in [
        ("limit=0", "greater_than_equal"),
        ("limit=101", "less_than_equal"),
        ("limit=x", "int_parsing"),
    ] {
        let (status, body) = c.get(&format!("/v2/deployments?{q}")).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{q}");
        assert_eq!(body["detail"][0]["loc"], json!(["query", "limit"]));
        assert_eq!(body["detail"][0]["type"], kind);
    }

    let (status, body) = c
        .send(
            Method::PATCH,
            &format!("/v2/deployments/{}", uuid::Uuid::new_v4()),
            None,
        )
        .await;
    assert_eq!(
        status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "a PATCH needs a body"
    );
    assert_eq!(body["detail"][0]["type"], "missing");

    let (status, body) = c.get("/v2/nothing-here").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body, json!({"detail": "Not Found"}));
    let (status, body) = c.send(Method::PUT, "/v2/deployments", None).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(body, json!({"detail": "Method Not Allowed"}));
    emu.shutdown().await;
}

#[tokio::test]
async fn oversized_body_is_413() {
    let emu = emulator::spawn(fast_config()).await.unwrap();
    let c = Client::new(&emu);
    let mut b = github_body("big");
    b["secrets"][0]["value"] = json!("x".repeat(emulator::DEFAULT_MAX_BODY_BYTES + 1));
    let (status, body) = c.send(Method::POST, "/v2/deployments", Some(b)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(body["detail"].as_str().unwrap().contains("1048576"));
    let (_, list) = c.get("/v2/deployments").await;
    assert_eq!(list["resources"], json!([]), "nothing was created");
    emu.shutdown().await;
}

#[tokio::test]
async fn delete_is_asynchronous() {
    let emu = emulator::spawn(fast_config()).await.unwrap();
    let c = Client::new(&emu);
    let d = create(&c, "doomed").await;
    let path = format!("/v2/deployments/{}", id(&d));
    let (status, body) = c.send(Method::DELETE, &path, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(body, Value::Null);
    let (status, got) = c.get(&path).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got["status"], "AWAITING_DELETE");
    let (status, _) = c.send(Method::DELETE, &path, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "deleting again is accepted");
    let (status, _) = c
        .send(
            Method::PATCH,
            &path,
            Some(json!({"source_config": {"build_on_push": true}})),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);

    let started = Instant::now();
    loop {
        let (status, _) = c.get(&path).await;
        if status == StatusCode::NOT_FOUND {
            break;
        }
        assert_eq!(status, StatusCode::OK);
        assert!(started.elapsed() < POLL_LIMIT);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (_, list) = c.get("/v2/deployments").await;
    assert_eq!(list["resources"], json!([]));
    let (status, _) = c.send(Method::DELETE, &path, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // The name is free again.
    create(&c, "doomed").await;
    emu.shutdown().await;
}

#[tokio::test]
async fn self_hosted_prefix_serves_the_same_api() {
    let emu = emulator::spawn(fast_config()).await.unwrap();
    let c = Client::new(&emu);
    let (status, d) = c
        .send(
            Method::POST,
            "/api-host/v2/deployments",
            Some(github_body("hosted")),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, got) = c.get(&format!("/api-host/v2/deployments/{}", id(&d))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got["name"], "hosted");
    let (status, _) = c.get(&format!("/v2/deployments/{}", id(&d))).await;
    assert_eq!(status, StatusCode::OK, "one store behind both prefixes");
    let (status, _) = c
        .get(&format!("/api-host/v2/deployments/{}/revisions", id(&d)))
        .await;
    assert_eq!(status, StatusCode::OK);
    let res = http()
        .get(format!("{}/api-host/v2/deployments", emu.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.status(),
        StatusCode::UNAUTHORIZED,
        "auth applies under the prefix"
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn github_integrations_and_build_commands() {
    let integration = "3c90c3cc-0d44-4b50-8888-8dd25736052a";
    let emu = emulator::spawn(EmulatorConfig {
        integrations: vec![emulator::IntegrationSeed {
            workspace_id: DEMO_WORKSPACE_ID.into(),
            id: integration.parse().unwrap(),
            name: "acme".into(),
            repos: vec!["https://github.com/acme/agent".into()],
        }],
        ..fast_config()
    })
    .await
    .unwrap();
    let c = Client::new(&emu);
    for prefix in ["", "/api-host"] {
        let (status, list) = c
            .get(&format!("{prefix}/v1/integrations/github/install"))
            .await;
        assert_eq!(status, StatusCode::OK, "{list}");
        assert_eq!(
            list,
            json!([{"id": integration, "installation_id": 1000, "name": "acme"}])
        );
    }
    let (status, repos) = c
        .get(&format!("/v1/integrations/github/{integration}/repos"))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(repos[0]["url"], "https://github.com/acme/agent");
    assert_eq!(repos[0]["default_branch"], "main");
    assert_eq!(repos[0]["full_name"], "acme/agent");
    let unknown = "11111111-2222-4333-8444-555555555555";
    let (status, body) = c
        .get(&format!("/v1/integrations/github/{unknown}/repos"))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["detail"], format!("Integration {unknown} not found."));
    let (status, body) = c.get("/v1/integrations/github/nope/repos").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(body["detail"][0]["loc"], json!(["path", "integration_id"]));

    // Build commands: stored, refused with shell content, a change is a revision.
    let mut bad = github_body("bad-build");
    bad["source_config"]["build_command"] = json!("npm run build && curl x");
    let (status, body) = c.send(Method::POST, "/v2/deployments", Some(bad)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("'source_config.build_command'"),
        "{body}"
    );
    let mut good = github_body("js-build");
    good["source_config"]["install_command"] = json!("npm ci");
    good["source_config"]["build_command"] = json!("npm run build");
    let (status, d) = c.send(Method::POST, "/v2/deployments", Some(good)).await;
    assert_eq!(status, StatusCode::CREATED, "{d}");
    assert_eq!(
        d["source_config"]["install_command"],
        Value::Null,
        "commands are not echoed (docs/control-plane-api.md, Answer shapes)"
    );
    let path = format!("/v2/deployments/{}", id(&d));
    let (status, body) = c
        .send(
            Method::PATCH,
            &path,
            Some(json!({"source_config": {"install_command": "npm ci; id"}})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, p) = c
        .send(
            Method::PATCH,
            &path,
            Some(json!({"source_config": {"build_command": "npm run build:prod"}})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{p}");
    let kept = stored(&emu, &p["id"]);
    assert_eq!(kept["source_config"]["build_command"], "npm run build:prod");
    assert_eq!(kept["source_config"]["install_command"], "npm ci");
    assert_ne!(
        p["latest_revision_id"], d["latest_revision_id"],
        "a new revision"
    );
}
