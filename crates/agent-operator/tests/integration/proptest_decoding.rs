//! Property tests of both decoders of the control plane wire format:
//!
//! (a) the client's response decoding ([`response::interpret`] for every
//!     response type, and [`Error::from_response`] for error bodies) on
//!     arbitrary statuses, `Retry-After` values and bodies (random bytes,
//!     random JSON, and valid answers with random fields replaced): it never
//!     panics, succeeds only on a documented success status, keeps the
//!     status in the error, and shows at most the first bytes of a body;
//! (b) the emulator's request decoding (its axum router, called with
//!     `tower::ServiceExt::oneshot`) on arbitrary methods, paths, queries,
//!     content types and bodies: it never panics, never answers 500, answers
//!     only a documented status, and every error body has the FastAPI shape
//!     (`{"detail": "..."}`, or `{"detail": [{loc, msg, type}]}` for 422).
//!
//! Each property runs a bounded number of cases (`CASES`) so the suite
//! finishes in seconds within the normal `cargo test`.

use std::sync::OnceLock;

use agent_operator::controlplane::response::interpret;
use agent_operator::controlplane::types::{Deployment, Listener, Page, Revision};
use agent_operator::controlplane::{Error, Operation};
use axum::body::Body;
use axum::http::{HeaderValue, Request, StatusCode};
use control_plane_emulator::{
    self as emulator, ApiKey, DEMO_API_KEY, DEMO_WORKSPACE_ID, EmulatorConfig, EmulatorState,
    ListenerSeed,
};
use proptest::prelude::*;
use serde_json::{Value, json};
use tower::ServiceExt;

/// Cases per property: enough to find shape bugs, bounded to seconds.
const CASES: u32 = 256;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: CASES,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------- strategies

/// Field names of the wire types, so random objects reach deep decoders.
const KEYS: &[&str] = &[
    "id",
    "name",
    "tenant_id",
    "source",
    "source_config",
    "source_revision_config",
    "secrets",
    "value",
    "status",
    "latest_revision_id",
    "active_revision_id",
    "resources",
    "offset",
    "detail",
    "loc",
    "msg",
    "type",
    "resource_spec",
    "cpu",
    "repo_ref",
    "build_on_push",
    "listener_id",
    "listener_config",
    "k8s_namespace",
    "compute_type",
    "compute_id",
    "compute_config",
    "k8s_namespaces",
    "created_at",
    "updated_at",
    "limit",
];

fn arb_key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(KEYS).prop_map(str::to_owned),
        1 => "[a-z_]{0,10}",
        1 => any::<String>(),
    ]
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON numbers are finite", |f| f.is_finite())
            .prop_map(Value::from),
        prop::sample::select(
            &[
                "DEPLOYED",
                "BUILD_FAILED",
                "github",
                "k8s",
                "00000000-0000-4000-8000-000000000001",
            ][..]
        )
        .prop_map(Value::from),
        any::<String>().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(arb_key(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn valid_deployment() -> Value {
    json!({
        "id": "8b0b4f0e-5d6c-4c43-9a57-8d7f3c2e1a00",
        "tenant_id": DEMO_WORKSPACE_ID,
        "name": "agent",
        "source": "github",
        "source_config": {"repo_url": "https://github.com/o/r", "deployment_type": "dev",
                           "build_on_push": false, "custom_url": "http://x",
                           "resource_spec": {"cpu": 1}},
        "source_revision_config": {"repo_ref": "main", "langgraph_config_path": "langgraph.json"},
        "secrets": [{"name": "K", "value": "sk-secret-value"}],
        "status": "READY",
        "latest_revision_id": "8b0b4f0e-5d6c-4c43-9a57-8d7f3c2e1a01",
        "active_revision_id": null,
        "image_version": null,
        "created_at": "2025-01-01T00:00:00Z",
        "updated_at": "2025-01-01T00:00:00Z"
    })
}

fn valid_revision() -> Value {
    json!({"id": "r1", "status": "BUILDING", "created_at": "2025-01-01T00:00:00Z",
           "updated_at": "2025-01-01T00:00:00Z", "source": "github",
           "source_revision_config": {"repo_ref": "main"}})
}

fn valid_listener() -> Value {
    json!({"id": "6f1c2a3e-0000-4000-8000-000000000009", "compute_type": "k8s",
           "compute_id": "c", "compute_config": {"k8s_namespaces": ["a"]}, "version": null,
           "created_at": "2025-01-01T00:00:00Z", "updated_at": "2025-01-01T00:00:00Z"})
}

/// JSON pointers into the valid answers and request bodies.
const POINTERS: &[&str] = &[
    "",
    "/id",
    "/name",
    "/status",
    "/source",
    "/source_config",
    "/source_config/resource_spec",
    "/source_config/resource_spec/cpu",
    "/source_config/build_on_push",
    "/source_config/deployment_type",
    "/source_config/listener_id",
    "/source_config/listener_config",
    "/source_revision_config",
    "/source_revision_config/repo_ref",
    "/secrets",
    "/secrets/0",
    "/secrets/0/value",
    "/compute_config",
    "/compute_config/k8s_namespaces",
    "/created_at",
    "/resources",
    "/resources/0",
    "/resources/0/status",
    "/offset",
];

/// `base` with up to 3 random replacements (or removals) at known places.
fn mutated(base: Value) -> impl Strategy<Value = Value> {
    prop::collection::vec(
        (
            prop::sample::select(POINTERS),
            prop::option::weighted(0.8, arb_json()),
        ),
        0..4,
    )
    .prop_map(move |edits| {
        let mut v = base.clone();
        for (ptr, new) in edits {
            match new {
                Some(new) if ptr.is_empty() => v = new,
                Some(new) => {
                    if let Some(slot) = v.pointer_mut(ptr) {
                        *slot = new;
                    }
                }
                None => {
                    if let Some((parent, key)) = ptr.rsplit_once('/')
                        && let Some(Value::Object(map)) = v.pointer_mut(parent)
                    {
                        map.remove(key);
                    }
                }
            }
        }
        v
    })
}

fn page_of(item: Value) -> Value {
    json!({"resources": [item.clone(), item], "offset": 2})
}

/// A body: random bytes, random JSON, or a valid answer of any type mutated.
fn arb_answer_body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..300),
        arb_json().prop_map(|v| serde_json::to_vec(&v).unwrap()),
        mutated(valid_deployment()).prop_map(|v| serde_json::to_vec(&v).unwrap()),
        mutated(valid_revision()).prop_map(|v| serde_json::to_vec(&v).unwrap()),
        mutated(valid_listener()).prop_map(|v| serde_json::to_vec(&v).unwrap()),
        mutated(page_of(valid_deployment())).prop_map(|v| serde_json::to_vec(&v).unwrap()),
        mutated(json!({"detail": [{"loc": ["path", "id"], "msg": "m", "type": "t"}]}))
            .prop_map(|v| serde_json::to_vec(&v).unwrap()),
        // A valid JSON answer cut anywhere.
        (any::<prop::sample::Index>()).prop_map(|i| {
            let full = serde_json::to_vec(&valid_deployment()).unwrap();
            full[..i.index(full.len() + 1)].to_vec()
        }),
    ]
}

fn arb_status() -> impl Strategy<Value = StatusCode> {
    prop_oneof![
        prop::sample::select(
            &[
                200u16, 201, 204, 301, 400, 401, 403, 404, 408, 409, 413, 422, 429, 500, 502, 503,
                504
            ][..]
        ),
        100u16..1000,
    ]
    .prop_map(|s| StatusCode::from_u16(s).unwrap())
}

fn arb_retry_after() -> impl Strategy<Value = Option<HeaderValue>> {
    prop::option::of(prop_oneof![
        any::<u32>().prop_map(|n| n.to_string()),
        "[0-9]{0,25}(\\.[0-9]{0,5})?",
        "-?[0-9.eE+-]{0,12}",
        "(inf|NaN|Wed, 21 Oct 2015 07:28:00 GMT| )",
    ])
    .prop_map(|s| s.and_then(|s| HeaderValue::from_str(&s).ok()))
}

// ------------------------------------------------------- (a) client decoding

fn check_answer<T: serde::de::DeserializeOwned>(
    op: Operation,
    status: StatusCode,
    retry_after: Option<&HeaderValue>,
    body: &[u8],
) -> Result<(), TestCaseError> {
    match interpret::<T>(op, status, retry_after, body) {
        Ok(_) => prop_assert!(op.success_statuses().contains(&status.as_u16())),
        Err(e) => {
            let shown = format!("{e} {e:?}");
            prop_assert!(!shown.contains("sk-secret-value"), "secret shown: {shown}");
            match &e {
                Error::Decode { status: s, message } => {
                    prop_assert!(op.success_statuses().contains(s));
                    // Where and what kind, never the body's text.
                    prop_assert!(message.len() <= 120, "{}", message);
                }
                other => prop_assert_eq!(other.status(), Some(status.as_u16())),
            }
            if let Some(ra) = e.retry_after() {
                prop_assert!(matches!(e, Error::RateLimited { .. }), "{:?}", e);
                prop_assert!(ra <= std::time::Duration::MAX);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn client_decoding_never_panics(
        status in arb_status(),
        retry_after in arb_retry_after(),
        body in arb_answer_body(),
    ) {
        let ra = retry_after.as_ref();
        check_answer::<Deployment>(Operation::GetDeployment, status, ra, &body)?;
        check_answer::<Deployment>(Operation::CreateDeployment, status, ra, &body)?;
        check_answer::<Page<Deployment>>(Operation::ListDeployments, status, ra, &body)?;
        check_answer::<Revision>(Operation::GetRevision, status, ra, &body)?;
        check_answer::<Revision>(Operation::Redeploy, status, ra, &body)?;
        check_answer::<Page<Revision>>(Operation::ListRevisions, status, ra, &body)?;
        check_answer::<Listener>(Operation::GetListener, status, ra, &body)?;
        check_answer::<Page<Listener>>(Operation::ListListeners, status, ra, &body)?;
        check_answer::<serde::de::IgnoredAny>(Operation::DeleteDeployment, status, ra, &body)?;
    }

    #[test]
    fn error_bodies_never_panic_and_keep_the_status(
        status in arb_status(),
        retry_after in prop::option::of(0u64..100_000),
        body in arb_answer_body(),
    ) {
        let ra = retry_after.map(std::time::Duration::from_secs);
        let e = Error::from_response(status, ra, &body);
        let code = status.as_u16();
        prop_assert_eq!(e.status(), Some(code));
        let _ = format!("{e} {e:?}");
        let transient = matches!(code, 408 | 429 | 500..=599);
        prop_assert_eq!(e.is_transient(), transient, "{}", e);
        if matches!(code, 429 | 503) {
            prop_assert_eq!(e.retry_after(), ra);
        } else {
            prop_assert_eq!(e.retry_after(), None);
        }
        if code == 422 {
            prop_assert!(matches!(e, Error::Validation { .. }), "{:?}", e);
        }
    }
}

// ----------------------------------------------------- (b) emulator decoding

const LISTENER: &str = "6f1c2a3e-0000-4000-8000-000000000009";
const ENTERPRISE_WS: &str = "00000000-0000-4000-8000-0000000000e1";
/// Path placeholder replaced by the id of a deployment seeded at start.
const SEEDED_DEPLOYMENT: &str = "@deployment";
/// Path placeholder replaced by the id of the seeded deployment's revision.
const SEEDED_REVISION: &str = "@revision";

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime")
    })
}

/// The emulator shared by every case (later cases see what earlier random
/// creates made), with seeded deployments.
struct Seeded {
    state: EmulatorState,
    /// A deployment no case deletes.
    deployment: String,
    /// Its first revision.
    revision: String,
    /// A deployment that DELETE cases target instead.
    doomed: String,
}

fn seed(state: &EmulatorState, name: &str) -> (String, String) {
    let mut body = create_body();
    if let Some(sc) = body["source_config"].as_object_mut() {
        sc.remove("listener_id");
        sc.remove("listener_config");
    }
    body["name"] = json!(name);
    let req = Request::post("/v2/deployments")
        .header("content-type", "application/json")
        .header("x-api-key", DEMO_API_KEY)
        .header("x-tenant-id", DEMO_WORKSPACE_ID)
        .body(Body::from(serde_json::to_vec(&body).unwrap()))
        .unwrap();
    let app = emulator::router(state.clone());
    let created: Value = runtime().block_on(async move {
        let res = app.oneshot(req).await.unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);
        let bytes = axum::body::to_bytes(res.into_body(), usize::MAX)
            .await
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    });
    (
        created["id"].as_str().unwrap().to_owned(),
        created["latest_revision_id"].as_str().unwrap().to_owned(),
    )
}

fn emulator_state() -> &'static Seeded {
    static STATE: OnceLock<Seeded> = OnceLock::new();
    STATE.get_or_init(|| {
        let mut cfg = EmulatorConfig::default();
        cfg.api_keys.push(ApiKey::new("enterprise", ENTERPRISE_WS));
        cfg.listeners.push(ListenerSeed {
            workspace_id: ENTERPRISE_WS.into(),
            id: LISTENER.parse().unwrap(),
            compute_id: "c".into(),
            k8s_namespaces: Some(vec!["agents".into()]),
        });
        cfg.max_body_bytes = 64 * 1024;
        cfg.step_duration = std::time::Duration::from_millis(1);
        cfg.agent_server_auth = false;
        let state = EmulatorState::new(cfg, "http://emulator.test");
        let (deployment, revision) = seed(&state, "seeded");
        let (doomed, _) = seed(&state, "doomed");
        Seeded {
            state,
            deployment,
            revision,
            doomed,
        }
    })
}

fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn arb_segment() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => Just(SEEDED_DEPLOYMENT.to_owned()),
        2 => Just(SEEDED_REVISION.to_owned()),
        1 => Just(LISTENER.to_owned()),
        1 => Just(uuid::Uuid::nil().to_string()),
        1 => "[0-9a-fA-F-]{0,40}",
        1 => any::<String>().prop_map(|s| encode(&s)),
    ]
}

/// Route templates with the methods they serve.
const ROUTES: &[(&str, &[&str])] = &[
    ("/v2/deployments", &["GET", "POST"]),
    ("/v2/deployments/{}", &["GET", "PATCH", "DELETE"]),
    ("/v2/deployments/{}/revisions", &["GET", "POST"]),
    ("/v2/deployments/{}/revisions/{}", &["GET"]),
    ("/v2/deployments/{}/revisions/{}/redeploy", &["POST"]),
    ("/v2/listeners", &["GET"]),
    ("/v2/listeners/{}", &["GET"]),
    ("/agents/{}/ok", &["GET"]),
    ("/agents/{}/info", &["GET"]),
    ("/agents/{}/assistants/search", &["POST"]),
    ("/agents/{}/runs/stream", &["POST"]),
];

const METHODS: &[&str] = &["GET", "POST", "PATCH", "DELETE", "PUT", "HEAD", "OPTIONS"];

fn create_body() -> Value {
    json!({
        "name": "prop-agent",
        "source": "github",
        "source_config": {"repo_url": "https://github.com/o/r", "deployment_type": "dev",
                          "build_on_push": false, "resource_spec": {"cpu": 1},
                          "listener_id": LISTENER, "listener_config": {"k8s_namespace": "agents"}},
        "source_revision_config": {"repo_ref": "main", "langgraph_config_path": "langgraph.json"},
        "secrets": [{"name": "K", "value": "v"}]
    })
}

/// A create body with a random valid name, with or without a listener,
/// then mutated.
fn arb_create() -> impl Strategy<Value = Value> {
    ("[a-z0-9-]{1,12}", any::<bool>()).prop_flat_map(|(name, listener)| {
        let mut body = create_body();
        body["name"] = json!(name);
        if !listener && let Some(sc) = body["source_config"].as_object_mut() {
            sc.remove("listener_id");
            sc.remove("listener_config");
        }
        mutated(body)
    })
}

fn arb_patch() -> impl Strategy<Value = Value> {
    prop_oneof![
        mutated(json!({"source_config": {"build_on_push": true}})),
        mutated(json!({"source_revision_config": {"repo_ref": "dev"}, "secrets": []})),
        mutated(json!({"source_config": {"resource_spec": {"max_scale": 3}},
                       "secrets": [{"name": "A", "value": "b"}]})),
        mutated(json!({"name": "seeded", "source": "github",
                       "source_config": {"repo_url": "https://github.com/o/x"}})),
    ]
}

fn arb_agent_body() -> impl Strategy<Value = Value> {
    prop_oneof![
        mutated(
            json!({"assistant_id": "agent", "input": {"messages": [{"role": "user", "content": "hi"}]},
                       "stream_mode": "updates"})
        ),
        mutated(json!({"metadata": {"created_by": "system"}, "limit": 5, "offset": 0})),
    ]
}

/// Any request body: empty, random bytes, random JSON.
fn arb_any_body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(Vec::new()),
        prop::collection::vec(any::<u8>(), 0..200),
        arb_json().prop_map(|v| serde_json::to_vec(&v).unwrap()),
    ]
}

/// The body of a request to `template` with `method`: mostly one shaped for
/// that route (valid, then mutated), sometimes anything.
fn arb_body_for(template: &str, method: &str) -> BoxedStrategy<Vec<u8>> {
    let shaped: BoxedStrategy<Value> = match (method, template) {
        ("POST", "/v2/deployments") => arb_create().boxed(),
        ("PATCH", _) => arb_patch().boxed(),
        ("POST", t) if t.starts_with("/agents") => arb_agent_body().boxed(),
        _ => return arb_any_body().boxed(),
    };
    prop_oneof![
        3 => shaped.prop_map(|v| serde_json::to_vec(&v).unwrap()),
        1 => arb_any_body(),
    ]
    .boxed()
}

/// `(method, path, body)`: mostly a route with one of its methods and a body
/// shaped for it (so that the handlers' decoding and rules are reached),
/// sometimes any method, sometimes any path.
fn arb_request() -> impl Strategy<Value = (&'static str, String, Vec<u8>)> {
    let routed = (
        prop::sample::select(ROUTES),
        any::<prop::sample::Index>(),
        prop::option::weighted(0.1, prop::sample::select(METHODS)),
        arb_segment(),
        arb_segment(),
        any::<bool>(),
        prop::option::weighted(0.05, "/[a-z]{0,5}"),
    )
        .prop_flat_map(
            |((template, methods), pick, other, a, b, api_host, suffix)| {
                let method = other.unwrap_or(methods[pick.index(methods.len())]);
                let path = template.replacen("{}", &a, 1).replacen("{}", &b, 1);
                let prefix = if api_host && !path.starts_with("/agents") {
                    "/api-host"
                } else {
                    ""
                };
                let path = format!("{prefix}{path}{}", suffix.unwrap_or_default());
                (Just(method), Just(path), arb_body_for(template, method))
            },
        );
    prop_oneof![
        9 => routed,
        1 => (
            prop::sample::select(METHODS),
            "(/[a-zA-Z0-9._~%-]{0,12}){0,5}",
            arb_any_body(),
        ),
    ]
}

fn arb_query() -> impl Strategy<Value = String> {
    let pairs = prop::collection::vec(
        (
            prop_oneof![
                prop::sample::select(
                    &[
                        "limit",
                        "offset",
                        "name_contains",
                        "status",
                        "deployment_type",
                        "deployment_ids",
                    ][..]
                )
                .prop_map(str::to_owned),
                "[a-z_]{1,8}",
            ],
            prop_oneof![
                "-?[0-9]{0,22}",
                Just("dev".to_owned()),
                Just(uuid::Uuid::nil().to_string()),
                any::<String>(),
            ],
        ),
        1..4,
    )
    .prop_map(|pairs| {
        pairs
            .into_iter()
            .map(|(k, v)| format!("{}={}", encode(&k), encode(&v)))
            .collect::<Vec<_>>()
            .join("&")
    });
    prop_oneof![Just(String::new()), pairs]
}

fn arb_content_type() -> impl Strategy<Value = Option<String>> {
    prop::option::weighted(
        0.8,
        prop_oneof![
            8 => Just("application/json".to_owned()),
            1 => Just("application/json; charset=utf-8".to_owned()),
            1 => Just("application/merge-patch+json".to_owned()),
            1 => Just("text/plain".to_owned()),
            1 => Just("application/x-www-form-urlencoded".to_owned()),
            1 => Just("multipart/form-data; boundary=x".to_owned()),
            1 => "[ -~]{0,30}",
        ],
    )
}

/// `(key, tenant)`: mostly the valid demo or enterprise pair.
fn arb_auth() -> impl Strategy<Value = (Option<String>, Option<String>)> {
    prop_oneof![
        6 => Just((Some(DEMO_API_KEY.to_owned()), Some(DEMO_WORKSPACE_ID.to_owned()))),
        3 => Just((Some("enterprise".to_owned()), Some(ENTERPRISE_WS.to_owned()))),
        1 => (prop::option::of("[ -~]{0,20}"), prop::option::of("[ -~]{0,40}")),
    ]
}

/// The statuses the emulator documents (routes, extract, errors, faults off).
const DOCUMENTED: &[u16] = &[200, 201, 204, 400, 401, 403, 404, 405, 409, 413, 422];
/// Agent servers also answer 503 until a revision serves (module docs of
/// `emulator::agent`).
const DOCUMENTED_AGENT: &[u16] = &[200, 400, 401, 403, 404, 405, 413, 422, 503];

proptest! {
    #![proptest_config(config())]

    #[test]
    fn emulator_request_decoding_answers_documented_statuses(
        (method, path, body) in arb_request(),
        query in arb_query(),
        content_type in arb_content_type(),
        (key, tenant) in arb_auth(),
    ) {
        let seeded = emulator_state();
        let state = &seeded.state;
        let deployment = if method == "DELETE" { &seeded.doomed } else { &seeded.deployment };
        let path = path
            .replace(SEEDED_DEPLOYMENT, deployment)
            .replace(SEEDED_REVISION, &seeded.revision);
        let uri = if query.is_empty() { path.clone() } else { format!("{path}?{query}") };
        let mut req = Request::builder().method(method).uri(&uri);
        if let Some(ct) = &content_type
            && let Ok(v) = HeaderValue::from_str(ct)
        {
            req = req.header("content-type", v);
        }
        if let Some(k) = key.as_deref().and_then(|k| HeaderValue::from_str(k).ok()) {
            req = req.header("x-api-key", k);
        }
        if let Some(t) = tenant.as_deref().and_then(|t| HeaderValue::from_str(t).ok()) {
            req = req.header("x-tenant-id", t);
        }
        let Ok(req) = req.body(Body::from(body)) else {
            // Not a valid HTTP request (the URI does not parse): nothing to send.
            return Ok(());
        };
        let app = emulator::router(state.clone());
        let (status, ct, bytes) = runtime().block_on(async move {
            let res = app.oneshot(req).await.expect("the router is infallible");
            let status = res.status();
            let ct = res
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            let bytes = tokio::time::timeout(
                std::time::Duration::from_secs(10),
                axum::body::to_bytes(res.into_body(), usize::MAX),
            )
            .await
            .expect("the answer ends")
            .expect("the answer body is readable");
            (status, ct, bytes)
        });
        let code = status.as_u16();
        prop_assert_ne!(code, 500, "{} {}", method, uri);
        let agent = path.starts_with("/agents/");
        let allowed = if agent { DOCUMENTED_AGENT } else { DOCUMENTED };
        prop_assert!(allowed.contains(&code), "{} {} answered {}", method, uri, code);
        if code >= 400 && method != "HEAD" {
            prop_assert!(ct.starts_with("application/json"), "{} {} content type {}", method, uri, ct);
            let v: Value = serde_json::from_slice(&bytes)
                .map_err(|e| TestCaseError::fail(format!("{method} {uri}: error body not JSON: {e}")))?;
            if code == 422 {
                let items = v["detail"].as_array().cloned().unwrap_or_default();
                prop_assert!(!items.is_empty(), "{}", v);
                for item in items {
                    prop_assert!(item["loc"].is_array(), "{}", item);
                    prop_assert!(item["msg"].is_string(), "{}", item);
                    prop_assert!(item["type"].is_string(), "{}", item);
                }
            } else {
                prop_assert!(v["detail"].is_string(), "{} {}: {}", method, uri, v);
            }
        }
        if (200..300).contains(&code) && !agent && method != "HEAD" && code != 204 {
            prop_assert!(ct.starts_with("application/json"), "{} {} content type {}", method, uri, ct);
            serde_json::from_slice::<Value>(&bytes)
                .map_err(|e| TestCaseError::fail(format!("{method} {uri}: body not JSON: {e}")))?;
        }
    }
}
