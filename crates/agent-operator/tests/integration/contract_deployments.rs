//! Contract tests of the control plane client against the emulator (in
//! process, loopback): every deployment, revision and listener endpoint on
//! its success path, paging, filters, the PATCH revision rules, the
//! asynchronous delete, every revision status and the `/api-host` prefix.
//!
//! Sources: docs/control-plane-api.md "Requests", "Revision", "Deployment".

use crate::contract_common;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use agent_operator::controlplane::types::{
    DeploymentPatch, RevisionStatus, SecretValue, SourceConfig, SourceRevisionConfig,
};
use agent_operator::controlplane::{
    ClientConfig, ControlPlaneClient, ListDeployments, ListRevisions,
};
use contract_common::{Emu, Recorder, fast_config, github, poll_revision, poll_until_gone};
use control_plane_emulator::{DEMO_API_KEY, DEMO_WORKSPACE_ID, EmulatorConfig};
use futures::StreamExt;
use secrecy::SecretString;
use serde_json::json;

#[tokio::test]
async fn create_get_list_redeploy_and_revisions() {
    let emu = Emu::fast().await;
    let c = emu.client();

    let d = c.create_deployment(&github("my-agent")).await.unwrap();
    uuid::Uuid::parse_str(&d.id).expect("the id is a uuid");
    assert_eq!(d.name, "my-agent");
    assert_eq!(d.tenant_id.as_deref(), Some(DEMO_WORKSPACE_ID));
    assert_eq!(d.source.as_deref(), Some("github"));
    assert_eq!(
        d.source_config.custom_url.as_deref(),
        Some(format!("{}/agents/{}", emu.base_url, d.id).as_str()),
        "the service sets the deployment URL of a github deployment"
    );
    assert!(
        d.secrets.is_empty(),
        "secrets read back [] before the first revision (docs/control-plane-api.md, Answer shapes)"
    );
    let first_rev = d.latest_revision_id.clone().expect("first revision");

    let got = c.get_deployment(&d.id).await.unwrap();
    assert_eq!(got.id, d.id);
    assert_eq!(got.latest_revision_id.as_deref(), Some(first_rev.as_str()));

    // Spec "Related rules" 1: one revision, the one named by latest_revision_id.
    let revs = c
        .list_revisions(&d.id, &ListRevisions::default())
        .await
        .unwrap();
    assert_eq!(revs.resources.len(), 1);
    assert_eq!(revs.resources[0].id, first_rev);
    let seen = poll_revision(&c, &d.id, &first_rev).await;
    assert_eq!(seen.last(), Some(&RevisionStatus::Deployed), "{seen:?}");

    let redeployed = c.redeploy(&d.id).await.unwrap();
    assert_ne!(redeployed.id, first_rev);
    assert!(redeployed.status.is_in_progress(), "{}", redeployed.status);
    let revs = c
        .list_revisions(&d.id, &ListRevisions::default())
        .await
        .unwrap();
    let ids: Vec<_> = revs.resources.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(
        ids,
        [redeployed.id.as_str(), first_rev.as_str()],
        "newest first"
    );
    let one = c
        .list_revisions(
            &d.id,
            &ListRevisions {
                limit: Some(1),
                offset: Some(1),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(one.resources.len(), 1);
    assert_eq!(one.resources[0].id, first_rev);
    let all = c
        .list_all_revisions(&d.id, &ListRevisions::default())
        .await
        .unwrap();
    assert_eq!(all.len(), 2);
    let r = c.get_revision(&d.id, &redeployed.id).await.unwrap();
    assert_eq!(r.id, redeployed.id);
    let seen = poll_revision(&c, &d.id, &redeployed.id).await;
    assert_eq!(seen.last(), Some(&RevisionStatus::Deployed));
    let d = c.get_deployment(&d.id).await.unwrap();
    assert_eq!(
        d.active_revision_id.as_deref(),
        Some(redeployed.id.as_str())
    );

    let page = c
        .list_deployments(&ListDeployments::default())
        .await
        .unwrap();
    assert_eq!(page.resources.len(), 1);
    assert_eq!(page.resources[0].id, d.id);
    assert_eq!(page.offset, Some(1), "offset of the next page");
}

#[tokio::test]
async fn find_by_name_is_exact_and_filters_work() {
    let emu = Emu::start(EmulatorConfig {
        delete_duration: Duration::from_secs(30),
        ..contract_common::fast_config()
    })
    .await;
    let c = emu.client();
    let app = c.create_deployment(&github("app")).await.unwrap();
    let app2 = c.create_deployment(&github("app-2")).await.unwrap();
    let mut prod = github("other-prod");
    prod.source_config.deployment_type = Some("prod".into());
    let prod = c.create_deployment(&prod).await.unwrap();

    let found = c
        .find_deployment_by_name("app")
        .await
        .unwrap()
        .expect("found");
    assert_eq!(
        found.id, app.id,
        "name_contains matches app-2 too, exact match wins"
    );
    assert!(c.find_deployment_by_name("ap").await.unwrap().is_none());

    let names = |v: Vec<agent_operator::controlplane::types::Deployment>| {
        let mut n: Vec<String> = v.into_iter().map(|d| d.name).collect();
        n.sort();
        n
    };
    let by_name = c
        .list_all_deployments(&ListDeployments {
            name_contains: Some("APP".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(names(by_name), ["app", "app-2"]);
    let by_type = c
        .list_all_deployments(&ListDeployments {
            deployment_type: Some("prod".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(names(by_type), ["other-prod"]);
    let by_ids = c
        .list_all_deployments(&ListDeployments {
            deployment_ids: Some(format!("{},{}", app.id, prod.id)),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(names(by_ids), ["app", "other-prod"]);
    c.delete_deployment(&app2.id).await.unwrap();
    let deleting = c
        .list_all_deployments(&ListDeployments {
            status: Some("AWAITING_DELETE".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(names(deleting), ["app-2"]);
}

#[tokio::test]
async fn paging_through_250_deployments() {
    let emu = Emu::fast().await;
    let c = emu.client();
    let created: Vec<String> = futures::stream::iter(0..250)
        .map(|i| {
            let c = c.clone();
            async move {
                c.create_deployment(&github(&format!("agent-{i:03}")))
                    .await
                    .unwrap()
                    .id
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let before = emu.count("GET /v2/deployments", "200").await;

    let all = c
        .list_all_deployments(&ListDeployments::default())
        .await
        .unwrap();
    assert_eq!(all.len(), 250);
    let ids: HashSet<&str> = all.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(
        ids,
        created.iter().map(String::as_str).collect::<HashSet<_>>()
    );
    assert_eq!(
        emu.count("GET /v2/deployments", "200").await - before,
        3,
        "pages of 100, 100 and 50"
    );
    let queries: Vec<_> = emu
        .log()
        .into_iter()
        .filter(|a| a.method == "GET" && a.path == "/v2/deployments")
        .collect();
    assert_eq!(queries.len(), 3);

    let last = c
        .list_deployments(&ListDeployments {
            limit: Some(100),
            offset: Some(200),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(last.resources.len(), 50);
    assert_eq!(last.offset, Some(250));
    let past = c
        .list_deployments(&ListDeployments {
            limit: Some(100),
            offset: Some(300),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(past.resources.is_empty());
}

async fn revision_count(c: &ControlPlaneClient, id: &str) -> usize {
    c.list_all_revisions(id, &ListRevisions::default())
        .await
        .unwrap()
        .len()
}

#[tokio::test]
async fn patch_revision_rules() {
    // What the service stores, read back as stored (the real service reads
    // secrets back as [] before the first revision).
    let emu = Emu::start(EmulatorConfig {
        shape: control_plane_emulator::ServiceShape::echo(),
        ..fast_config()
    })
    .await;
    let c = emu.client();
    let d = c.create_deployment(&github("patched")).await.unwrap();
    assert_eq!(revision_count(&c, &d.id).await, 1);

    // build_on_push alone: no revision.
    let p = DeploymentPatch {
        source_config: Some(SourceConfig {
            build_on_push: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    };
    let after = c.patch_deployment(&d.id, &p).await.unwrap();
    assert_eq!(after.source_config.build_on_push, Some(true));
    assert_eq!(after.latest_revision_id, d.latest_revision_id);
    assert_eq!(revision_count(&c, &d.id).await, 1);

    // An empty secrets list means "unchanged": no revision, secrets kept.
    let p = DeploymentPatch {
        secrets: Some(vec![]),
        ..Default::default()
    };
    let after = c.patch_deployment(&d.id, &p).await.unwrap();
    assert_eq!(after.secrets.len(), 1, "[] cannot remove the secrets");
    assert_eq!(revision_count(&c, &d.id).await, 1);

    // repo_ref: a new revision carrying it.
    let p = DeploymentPatch {
        source_revision_config: Some(SourceRevisionConfig {
            repo_ref: Some("release".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let after = c.patch_deployment(&d.id, &p).await.unwrap();
    assert_ne!(after.latest_revision_id, d.latest_revision_id);
    assert_eq!(
        agent_operator::plan::shapes::configured_ref(&after),
        Some("release")
    );
    assert_eq!(
        after
            .source_revision_config
            .langgraph_config_path
            .as_deref(),
        Some("langgraph.json"),
        "unsent revision fields are kept"
    );
    assert_eq!(revision_count(&c, &d.id).await, 2);
    let latest = c
        .list_revisions(&d.id, &ListRevisions::default())
        .await
        .unwrap();
    assert_eq!(
        latest.resources[0].id,
        after.latest_revision_id.clone().unwrap()
    );

    // Non-empty secrets: replaced, and a revision.
    let p = DeploymentPatch {
        secrets: Some(vec![SecretValue::new("NEW", "v2")]),
        ..Default::default()
    };
    let after = c.patch_deployment(&d.id, &p).await.unwrap();
    assert_eq!(after.secrets, vec![SecretValue::new("NEW", "v2")]);
    assert_eq!(revision_count(&c, &d.id).await, 3);

    // resource_spec: the plain PATCH replaces it whole (and makes a revision).
    let partial = DeploymentPatch {
        source_config: Some(SourceConfig {
            resource_spec: Some(json!({"max_scale": 5})),
            ..Default::default()
        }),
        ..Default::default()
    };
    let after = c.patch_deployment(&d.id, &partial).await.unwrap();
    assert_eq!(
        after.source_config.resource_spec,
        Some(json!({"max_scale": 5}))
    );
    assert_eq!(revision_count(&c, &d.id).await, 4);

    // patch_deployment_merged: only the named fields change.
    let restore = DeploymentPatch {
        source_config: Some(SourceConfig {
            resource_spec: Some(json!({"min_scale": 1, "max_scale": 2, "cpu": 1})),
            ..Default::default()
        }),
        ..Default::default()
    };
    c.patch_deployment(&d.id, &restore).await.unwrap();
    let before = emu
        .count("GET /v2/deployments/{deployment_id}", "200")
        .await;
    let after = c.patch_deployment_merged(&d.id, &partial).await.unwrap();
    assert_eq!(
        after.source_config.resource_spec,
        Some(json!({"min_scale": 1, "max_scale": 5, "cpu": 1}))
    );
    assert_eq!(
        emu.count("GET /v2/deployments/{deployment_id}", "200")
            .await
            - before,
        1,
        "the merge reads the current deployment once"
    );
    let removed = DeploymentPatch {
        source_config: Some(SourceConfig {
            resource_spec: Some(json!({"cpu": null})),
            ..Default::default()
        }),
        ..Default::default()
    };
    let after = c.patch_deployment_merged(&d.id, &removed).await.unwrap();
    assert_eq!(
        after.source_config.resource_spec,
        Some(json!({"min_scale": 1, "max_scale": 5})),
        "null removes a field"
    );
    // Without a resource_spec it is a plain PATCH (no GET).
    let before = emu
        .count("GET /v2/deployments/{deployment_id}", "200")
        .await;
    c.patch_deployment_merged(
        &d.id,
        &DeploymentPatch {
            source_config: Some(SourceConfig {
                build_on_push: Some(false),
                ..Default::default()
            }),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(
        emu.count("GET /v2/deployments/{deployment_id}", "200")
            .await,
        before
    );
}

#[tokio::test]
async fn delete_is_asynchronous() {
    // Long enough that the GET right after the DELETE still sees the
    // deployment even on a loaded machine.
    let emu = Emu::start(EmulatorConfig {
        delete_duration: Duration::from_secs(1),
        ..contract_common::fast_config()
    })
    .await;
    let c = emu.client();
    let d = c.create_deployment(&github("doomed")).await.unwrap();
    c.delete_deployment(&d.id).await.unwrap();
    assert_eq!(
        emu.count("DELETE /v2/deployments/{deployment_id}", "204")
            .await,
        1
    );
    let during = c.get_deployment(&d.id).await.unwrap();
    assert_eq!(during.status.as_deref(), Some("AWAITING_DELETE"));
    let seen = poll_until_gone(&c, &d.id).await;
    assert_eq!(seen.first().map(String::as_str), Some("AWAITING_DELETE"));
    let e = c.delete_deployment(&d.id).await.unwrap_err();
    assert!(e.is_not_found(), "{e}");
    assert!(c.find_deployment_by_name("doomed").await.unwrap().is_none());
}

#[tokio::test]
async fn every_revision_status_reaches_the_client() {
    let emu = Emu::start(EmulatorConfig {
        step_duration: Duration::from_secs(60),
        ..contract_common::fast_config()
    })
    .await;
    let c = emu.client();
    let d = c.create_deployment(&github("statuses")).await.unwrap();
    let rid = d.latest_revision_id.clone().unwrap();
    let mut all: Vec<RevisionStatus> = RevisionStatus::ALL.to_vec();
    all.push(RevisionStatus::Other("PRUNE_FAILED".into()));
    all.push(RevisionStatus::Other("SOMETHING_NEW".into()));
    for status in all {
        emu.force_status(&d.id, &rid, status.as_str()).await;
        let r = c.get_revision(&d.id, &rid).await.unwrap();
        assert_eq!(r.status, status);
        let filtered = c
            .list_revisions(
                &d.id,
                &ListRevisions {
                    status: Some(format!("{status},DEPLOYED")),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(filtered.resources.len(), 1, "{status}");
        assert_eq!(filtered.resources[0].status, status);
        let expect_in_progress = !matches!(status.as_str(), "DEPLOYED" | "SKIPPED" | "INTERRUPTED")
            && !status.as_str().contains("FAILED");
        assert_eq!(r.status.is_in_progress(), expect_in_progress, "{status}");
    }
}

#[tokio::test]
async fn scenario_outcomes_as_seen_by_a_polling_client() {
    let emu = Emu::fast().await;
    let c = emu.client();
    let outcomes = [
        "DEPLOYED",
        "CREATE_FAILED",
        "BUILD_FAILED",
        "DEPLOY_FAILED",
        "INTERRUPTED",
        "UNKNOWN",
    ];
    let rules: Vec<_> = outcomes
        .iter()
        .map(|o| json!({"field": "repo_ref", "equals": o.to_lowercase(), "outcome": o}))
        .collect();
    emu.set_scenarios(json!(rules)).await;
    let order = [
        "CREATING",
        "AWAITING_BUILD",
        "BUILDING",
        "AWAITING_DEPLOY",
        "UNKNOWN",
        "DEPLOYING",
    ];
    for outcome in outcomes {
        let mut body = github(&format!("s-{}", outcome.to_lowercase().replace('_', "-")));
        body.source_revision_config.repo_ref = Some(outcome.to_lowercase());
        let d = c.create_deployment(&body).await.unwrap();
        let seen = poll_revision(&c, &d.id, d.latest_revision_id.as_deref().unwrap()).await;
        let (last, steps) = seen.split_last().unwrap();
        let terminal = if outcome == "UNKNOWN" {
            "DEPLOYED"
        } else {
            outcome
        };
        assert_eq!(last.as_str(), terminal, "{outcome}: {seen:?}");
        let positions: Vec<usize> = steps
            .iter()
            .map(|s| {
                order
                    .iter()
                    .position(|o| *o == s.as_str())
                    .expect("known step")
            })
            .collect();
        assert!(
            positions.is_sorted(),
            "{outcome}: steps out of order {seen:?}"
        );
        if outcome == "DEPLOYED" {
            assert!(
                c.get_deployment(&d.id)
                    .await
                    .unwrap()
                    .active_revision_id
                    .is_some()
            );
        }
    }
}

#[tokio::test]
async fn self_hosted_prefix_api_host() {
    let emu = Emu::fast().await;
    let c = ControlPlaneClient::new(ClientConfig::self_hosted(
        &emu.base_url,
        DEMO_WORKSPACE_ID,
        SecretString::from(DEMO_API_KEY),
    ))
    .unwrap();
    assert_eq!(c.base_url(), format!("{}/api-host/", emu.base_url));
    let d = c.create_deployment(&github("self-hosted")).await.unwrap();
    c.get_deployment(&d.id).await.unwrap();
    c.list_revisions(&d.id, &ListRevisions::default())
        .await
        .unwrap();
    assert_eq!(emu.count("POST /api-host/v2/deployments", "201").await, 1);
    assert_eq!(
        emu.count("GET /api-host/v2/deployments/{deployment_id}", "200")
            .await,
        1
    );
    assert_eq!(emu.count("POST /v2/deployments", "201").await, 0);
    let paths: Vec<String> = emu.log().into_iter().map(|a| a.path).collect();
    assert!(
        paths.iter().all(|p| p.starts_with("/api-host/v2/")),
        "{paths:?}"
    );
}

#[tokio::test]
async fn observer_sees_every_operation_under_its_fixed_name() {
    let emu = Emu::start(EmulatorConfig {
        enterprise_workspaces: vec![DEMO_WORKSPACE_ID.into()],
        ..contract_common::fast_config()
    })
    .await;
    let rec = Arc::new(Recorder::default());
    let c = emu.client_with(|cfg| cfg.observer = Some(rec.clone()));
    let d = c.create_deployment(&github("observed")).await.unwrap();
    c.get_deployment(&d.id).await.unwrap();
    c.patch_deployment(&d.id, &DeploymentPatch::default())
        .await
        .unwrap();
    c.list_deployments(&ListDeployments::default())
        .await
        .unwrap();
    let r = c.redeploy(&d.id).await.unwrap();
    c.list_revisions(&d.id, &ListRevisions::default())
        .await
        .unwrap();
    c.get_revision(&d.id, &r.id).await.unwrap();
    c.list_listeners(10, 0).await.unwrap();
    let missing = uuid::Uuid::new_v4().to_string();
    assert!(c.get_listener(&missing).await.unwrap_err().is_not_found());
    c.delete_deployment(&d.id).await.unwrap();

    let events = rec.events();
    let got: Vec<(&str, &str)> = events.iter().map(|e| (e.operation, e.class)).collect();
    assert_eq!(
        got,
        [
            ("create_deployment", "2xx"),
            ("get_deployment", "2xx"),
            ("patch_deployment", "2xx"),
            ("list_deployments", "2xx"),
            ("redeploy", "2xx"),
            ("list_revisions", "2xx"),
            ("get_revision", "2xx"),
            ("list_listeners", "2xx"),
            ("get_listener", "4xx"),
            ("delete_deployment", "2xx"),
        ]
    );
    assert_eq!(
        events.len(),
        emu.log().len(),
        "one observation per HTTP attempt"
    );
}

/// An exact-name lookup is one request with the exact `name` filter, even
/// among 1,000 deployments whose names share a prefix; a service that
/// ignores the filter still answers (paged `name_contains` matches, matched
/// exactly here). Source: docs/control-plane-api.md, "Requests as the
/// official clients send them".
#[tokio::test]
async fn exact_name_lookups_cost_one_request_among_a_thousand_similar_names() {
    for (filter, quirk_on) in [("with the name filter", true), ("without it", false)] {
        let shape = if quirk_on {
            control_plane_emulator::ServiceShape::default()
        } else {
            control_plane_emulator::ServiceShape::default()
                .without(control_plane_emulator::Quirk::NameFilter)
        };
        let emu = Emu::start(EmulatorConfig {
            shape,
            ..fast_config()
        })
        .await;
        let c = emu.client();
        let created: Vec<_> = futures::stream::iter(0..1000)
            .map(|i| {
                let c = c.clone();
                async move { c.create_deployment(&github(&format!("fleet-{i}"))).await }
            })
            .buffer_unordered(16)
            .collect()
            .await;
        assert!(created.iter().all(Result::is_ok), "{filter}");
        let before = emu.count("GET /v2/deployments", "200").await;
        let found = c.deployments_named("fleet-1").await.unwrap();
        let requests = emu.count("GET /v2/deployments", "200").await - before;
        assert_eq!(found.len(), 1, "{filter}: exactly one named fleet-1");
        assert_eq!(found[0].name, "fleet-1");
        println!("exact-name lookup among 1,000 similar names, {filter}: {requests} request(s)");
        if quirk_on {
            assert_eq!(requests, 1, "{filter}");
        } else {
            // fleet-1, fleet-10..19, fleet-100..199: 111 matches, 2 pages.
            assert_eq!(requests, 2, "{filter}");
        }
        assert!(
            c.find_deployment_by_name("fleet-1000")
                .await
                .unwrap()
                .is_none()
        );
    }
}
