//! Contract tests of the control plane client's errors against the emulator:
//! every error status the API documents (400, 401, 403, 404, 409, 413, 422),
//! the listener errors (403/404/422), their mapping to [`Error`] variants,
//! their transient/permanent classification, and that the API key never
//! shows in an error.
//!
//! Sources: docs/control-plane-api.md "Errors", "Hosts and headers",
//! "Self-hosted placement and listeners".

use crate::contract_common;

use agent_operator::controlplane::types::{DeploymentPatch, SourceConfig, SourceRevisionConfig};
use agent_operator::controlplane::{ControlPlaneClient, Error, ListDeployments, ListRevisions};
use contract_common::{Emu, fast_config, github};
use control_plane_emulator::{ApiKey, DEMO_WORKSPACE_ID, EmulatorConfig, ListenerSeed};
use secrecy::SecretString;
use serde_json::json;

const ENTERPRISE_WS: &str = "00000000-0000-4000-8000-0000000000e1";
const ENTERPRISE_KEY: &str = "enterprise-key";
const LISTENER_ID: &str = "6f1c2a3e-0000-4000-8000-000000000009";

fn listener_config() -> EmulatorConfig {
    let mut cfg = fast_config();
    cfg.api_keys
        .push(ApiKey::new(ENTERPRISE_KEY, ENTERPRISE_WS));
    cfg.listeners.push(ListenerSeed {
        workspace_id: ENTERPRISE_WS.into(),
        id: LISTENER_ID.parse().unwrap(),
        compute_id: "cluster-a".into(),
        k8s_namespaces: Some(vec!["agents".into(), "staging".into()]),
    });
    cfg
}

fn enterprise_client(emu: &Emu) -> ControlPlaneClient {
    emu.client_with(|c| {
        c.workspace_id = ENTERPRISE_WS.into();
        c.api_key = SecretString::from(ENTERPRISE_KEY);
    })
}

fn detail(e: &Error) -> &str {
    match e {
        Error::BadRequest { detail }
        | Error::Unauthorized { detail }
        | Error::Forbidden { detail }
        | Error::NotFound { detail }
        | Error::Conflict { detail }
        | Error::Server { detail, .. }
        | Error::UnexpectedStatus { detail, .. } => detail,
        other => panic!("no detail in {other:?}"),
    }
}

#[tokio::test]
async fn bad_request_400_for_an_immutable_field_and_a_tag_with_build_on_push() {
    let emu = Emu::fast().await;
    let c = emu.client();
    let d = c.create_deployment(&github("immutable")).await.unwrap();
    let p = DeploymentPatch {
        source_config: Some(SourceConfig {
            repo_url: Some("https://github.com/acme/other".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let e = c.patch_deployment(&d.id, &p).await.unwrap_err();
    assert!(matches!(e, Error::BadRequest { .. }), "{e:?}");
    assert_eq!(e.status(), Some(400));
    assert!(detail(&e).contains("repo_url"), "{e}");
    assert!(!e.is_transient());

    let p = DeploymentPatch {
        source_config: Some(SourceConfig {
            build_on_push: Some(true),
            ..Default::default()
        }),
        source_revision_config: Some(SourceRevisionConfig {
            repo_ref: Some("refs/tags/v1".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let e = c.patch_deployment(&d.id, &p).await.unwrap_err();
    assert!(detail(&e).contains("build_on_push"), "{e}");
    assert_eq!(
        emu.count("PATCH /v2/deployments/{deployment_id}", "400")
            .await,
        2,
        "a 400 is never retried"
    );
}

#[tokio::test]
async fn unauthorized_401_never_shows_the_key() {
    let emu = Emu::fast().await;
    let key = "sk-wrong-very-secret-0123456789";
    let c = emu.client_with(|cfg| cfg.api_key = SecretString::from(key));
    let e = c
        .list_deployments(&ListDeployments::default())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Unauthorized { .. }), "{e:?}");
    assert_eq!(e.status(), Some(401));
    assert!(!e.is_transient());
    let shown = format!("{e} {e:?} {c:?}");
    assert!(!shown.contains(key), "the key leaked: {shown}");
    let e = c.create_deployment(&github("nope")).await.unwrap_err();
    let shown = format!("{e} {e:?}");
    assert!(matches!(e, Error::Unauthorized { .. }));
    assert!(!shown.contains(key), "the key leaked: {shown}");
    assert_eq!(
        emu.count("GET /v2/deployments", "401").await,
        1,
        "never retried"
    );
}

#[tokio::test]
async fn forbidden_403_for_another_workspace_names_it() {
    let emu = Emu::fast().await;
    let other = "00000000-0000-4000-8000-0000000000ff";
    let c = emu.client_with(|cfg| cfg.workspace_id = other.into());
    let e = c
        .get_deployment(&uuid::Uuid::new_v4().to_string())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Forbidden { .. }), "{e:?}");
    assert!(detail(&e).contains(other), "{e}");
    assert!(!e.is_transient());
}

#[tokio::test]
async fn not_found_404_names_the_missing_id() {
    let emu = Emu::fast().await;
    let c = emu.client();
    let missing = uuid::Uuid::new_v4().to_string();
    for e in [
        c.get_deployment(&missing).await.unwrap_err(),
        c.patch_deployment(&missing, &DeploymentPatch::default())
            .await
            .unwrap_err(),
        c.delete_deployment(&missing).await.unwrap_err(),
        c.list_revisions(&missing, &ListRevisions::default())
            .await
            .unwrap_err(),
        c.redeploy(&missing).await.unwrap_err(),
    ] {
        assert!(e.is_not_found(), "{e:?}");
        assert_eq!(detail(&e), format!("Deployment ID {missing} not found."));
        assert!(!e.is_transient());
    }
    let d = c.create_deployment(&github("has-revisions")).await.unwrap();
    let e = c.get_revision(&d.id, &missing).await.unwrap_err();
    assert!(e.is_not_found());
    assert!(detail(&e).contains(&missing), "{e}");
}

#[tokio::test]
async fn conflict_409_for_a_duplicate_name() {
    let emu = Emu::fast().await;
    let c = emu.client();
    c.create_deployment(&github("twice")).await.unwrap();
    let e = c.create_deployment(&github("twice")).await.unwrap_err();
    assert!(matches!(e, Error::Conflict { .. }), "{e:?}");
    assert!(detail(&e).contains("twice"), "{e}");
    assert!(!e.is_transient());
    assert_eq!(
        c.list_all_deployments(&ListDeployments::default())
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn validation_422_is_parsed_into_loc_msg_and_type() {
    let emu = Emu::fast().await;
    let c = emu.client();
    let e = c.get_deployment("not-a-uuid").await.unwrap_err();
    let Error::Validation { errors } = &e else {
        panic!("expected 422, got {e:?}")
    };
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].loc, [json!("path"), json!("deployment_id")]);
    assert_eq!(errors[0].kind, "uuid_parsing");
    assert!(errors[0].msg.contains("UUID"), "{}", errors[0].msg);
    assert_eq!(e.status(), Some(422));
    assert!(!e.is_transient());
    assert!(e.to_string().contains("path.deployment_id"), "{e}");

    for limit in [0, 101] {
        let e = c
            .list_deployments(&ListDeployments {
                limit: Some(limit),
                ..Default::default()
            })
            .await
            .unwrap_err();
        let Error::Validation { errors } = &e else {
            panic!("expected 422, got {e:?}")
        };
        assert_eq!(errors[0].loc, [json!("query"), json!("limit")], "{limit}");
        let kind = if limit == 0 {
            "greater_than_equal"
        } else {
            "less_than_equal"
        };
        assert_eq!(errors[0].kind, kind);
    }
    let e = c
        .list_deployments(&ListDeployments {
            deployment_ids: Some("x,y".into()),
            deployment_type: Some("huge".into()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    let Error::Validation { errors } = &e else {
        panic!("expected 422, got {e:?}")
    };
    let locs: Vec<_> = errors.iter().map(|e| e.loc[1].clone()).collect();
    assert!(locs.contains(&json!("deployment_ids")), "{locs:?}");
    assert!(locs.contains(&json!("deployment_type")), "{locs:?}");

    // Ids with path characters stay one segment: a 422, not another route.
    for id in ["../listeners", "a?b#c", "x y", "..", ".", ""] {
        let e = c.get_deployment(id).await.unwrap_err();
        assert!(matches!(e, Error::Validation { .. }), "{id}: {e:?}");
        let e = c.delete_deployment(id).await.unwrap_err();
        assert!(matches!(e, Error::Validation { .. }), "{id}: {e:?}");
    }
    assert_eq!(
        emu.count("DELETE /v2/deployments/{deployment_id}", "422")
            .await,
        3,
        "ids that cannot be a path segment (empty, ., ..) are refused before sending"
    );

    // A create body the service rejects field by field.
    let mut body = github("bad-spec");
    body.source_config.resource_spec = Some(json!({"cpu": 99}));
    let e = c.create_deployment(&body).await.unwrap_err();
    let Error::Validation { errors } = &e else {
        panic!("expected 422, got {e:?}")
    };
    assert_eq!(
        errors[0].loc,
        [
            json!("body"),
            json!("source_config"),
            json!("resource_spec"),
            json!("cpu")
        ]
    );
}

#[tokio::test]
async fn payload_too_large_413_is_an_unexpected_status() {
    let emu = Emu::start(EmulatorConfig {
        max_body_bytes: 4096,
        ..fast_config()
    })
    .await;
    let c = emu.client();
    let mut body = github("big");
    body.secrets[0] =
        agent_operator::controlplane::types::SecretValue::new("BIG", "x".repeat(8192));
    let e = c.create_deployment(&body).await.unwrap_err();
    assert!(
        matches!(e, Error::UnexpectedStatus { status: 413, .. }),
        "{e:?}"
    );
    assert!(!e.is_transient());
}

#[tokio::test]
async fn listeners_read_list_and_errors() {
    let emu = Emu::start(listener_config()).await;
    let c = enterprise_client(&emu);

    let l = c.get_listener(LISTENER_ID).await.unwrap();
    assert_eq!(l.id, LISTENER_ID);
    assert_eq!(l.compute_type, "k8s");
    assert_eq!(l.compute_id, "cluster-a");
    assert_eq!(
        l.compute_config.k8s_namespaces,
        Some(vec!["agents".to_owned(), "staging".to_owned()])
    );
    let page = c.list_listeners(10, 0).await.unwrap();
    assert_eq!(page.resources, vec![l.clone()]);
    assert_eq!(c.list_all_listeners().await.unwrap(), vec![l]);
    assert!(c.list_listeners(10, 1).await.unwrap().resources.is_empty());

    // 404 names the id.
    let missing = uuid::Uuid::new_v4().to_string();
    let e = c.get_listener(&missing).await.unwrap_err();
    assert!(e.is_not_found(), "{e:?}");
    assert!(detail(&e).contains(&missing), "{e}");

    // 422: not a uuid.
    let e = c.get_listener("cluster-a").await.unwrap_err();
    let Error::Validation { errors } = &e else {
        panic!("expected 422, got {e:?}")
    };
    assert_eq!(errors[0].loc, [json!("path"), json!("listener_id")]);
    assert_eq!(errors[0].kind, "uuid_parsing");
    let e = c.list_listeners(0, 0).await.unwrap_err();
    assert!(matches!(e, Error::Validation { .. }), "{e:?}");

    // 403: the demo workspace is not self-hosted enterprise; detail names it.
    let cloud = emu.client();
    for e in [
        cloud.get_listener(LISTENER_ID).await.unwrap_err(),
        cloud.list_listeners(10, 0).await.unwrap_err(),
    ] {
        assert!(matches!(e, Error::Forbidden { .. }), "{e:?}");
        assert!(detail(&e).contains(DEMO_WORKSPACE_ID), "{e}");
        assert!(!e.is_transient());
    }

    // 403 too for a create that names a listener from a cloud workspace.
    let mut body = github("placed");
    body.source_config.listener_id = Some(LISTENER_ID.into());
    let e = cloud.create_deployment(&body).await.unwrap_err();
    assert!(matches!(e, Error::Forbidden { .. }), "{e:?}");
    assert!(detail(&e).contains(DEMO_WORKSPACE_ID), "{e}");

    // Placement on the listener works from the enterprise workspace.
    body.source_config.listener_config =
        Some(agent_operator::controlplane::types::ListenerConfig {
            k8s_namespace: Some("agents".into()),
        });
    let d = c.create_deployment(&body).await.unwrap();
    assert_eq!(d.source_config.listener_id.as_deref(), Some(LISTENER_ID));
    body.name = "misplaced".into();
    body.source_config.listener_config =
        Some(agent_operator::controlplane::types::ListenerConfig {
            k8s_namespace: Some("prod".into()),
        });
    let e = c.create_deployment(&body).await.unwrap_err();
    assert!(matches!(e, Error::BadRequest { .. }), "{e:?}");
}

/// A service that repeats the API key or a secret value of the request in
/// an error `detail` does not get it into our errors (and so not into
/// conditions, events or logs): both are replaced by `[REDACTED]`.
#[tokio::test]
async fn an_error_detail_that_echoes_the_key_or_a_secret_value_is_redacted() {
    use control_plane_emulator::{DEMO_API_KEY, RejectRule};
    let mut cfg = fast_config();
    cfg.faults.reject = vec![RejectRule {
        route: "POST /v2/deployments".into(),
        status: 400,
        detail: Some(format!(
            "key {DEMO_API_KEY} may not create; secret value sk-test-value is refused"
        )),
        raw_body: None,
    }];
    let emu = Emu::start(cfg).await;
    let e = emu
        .client()
        .create_deployment(&github("echo"))
        .await
        .unwrap_err();
    let shown = format!("{e} {e:?} {}", detail(&e));
    for secret in [DEMO_API_KEY, "sk-test-value"] {
        assert!(!shown.contains(secret), "{shown}");
    }
    assert!(
        detail(&e).contains("key [REDACTED] may not create"),
        "{shown}"
    );
    assert!(
        detail(&e).contains("value [REDACTED] is refused"),
        "{shown}"
    );
}

/// A GET carries no secret value, yet its error answer may repeat one the
/// deployment stores (a `detail` naming what it refuses): the client
/// redacts the values it sent before from every later error answer.
#[tokio::test]
async fn a_get_error_detail_that_echoes_a_stored_secret_value_is_redacted() {
    use control_plane_emulator::{FaultConfig, RejectRule};
    let emu = Emu::start(fast_config()).await;
    let client = emu.client();
    let created = client.create_deployment(&github("echo-get")).await.unwrap();
    emu.state
        .set_faults(FaultConfig {
            reject: vec![RejectRule {
                route: "GET /v2/deployments/{deployment_id}".into(),
                status: 400,
                detail: Some("secret OPENAI_API_KEY=sk-test-value is not valid".into()),
                raw_body: None,
            }],
            ..Default::default()
        })
        .unwrap();
    let e = client.get_deployment(&created.id).await.unwrap_err();
    let shown = format!("{e} {e:?} {}", detail(&e));
    assert!(!shown.contains("sk-test-value"), "{shown}");
    assert!(
        detail(&e).contains("OPENAI_API_KEY=[REDACTED] is not valid"),
        "{shown}"
    );
}
