//! Contract test of the control plane client's log calls against the
//! emulator (docs/control-plane-api.md "Logs"): the build log of a failed
//! build ends with the scenario rule's lines, a tail is `order: desc` +
//! `limit`, filters and paging work, a deployed revision has a server log,
//! and bad queries are 422 / unknown revisions 404, each decoded by the
//! client into its types and errors. (The emulator's own tests, in its
//! crate, talk raw HTTP; this one is about the client.)

use crate::contract_common::{Emu, github, poll_revision};

use agent_operator::controlplane::Error;
use agent_operator::controlplane::types::{DeploymentCreate, LogOrder, LogQuery, RevisionStatus};
use serde_json::json;

/// [`github`] building `repo_ref`.
fn building(name: &str, repo_ref: &str) -> DeploymentCreate {
    let mut body = github(name);
    body.source_revision_config.repo_ref = Some(repo_ref.into());
    body
}

#[tokio::test]
async fn build_and_deploy_logs_follow_the_timeline_and_the_scenario() {
    let emu = Emu::fast().await;
    emu.set_scenarios(json!([{"field": "repo_ref", "equals": "broken", "outcome": "BUILD_FAILED",
        "log": ["ERROR: could not find a version that satisfies langgraph==9.9", "hint: check pyproject.toml"]}]))
        .await;
    let cp = emu.client();

    let bad = cp
        .create_deployment(&building("broken-logs", "broken"))
        .await
        .unwrap();
    let (id, rid) = (bad.id.clone(), bad.latest_revision_id.clone().unwrap());
    let seen = poll_revision(&cp, &id, &rid).await;
    assert_eq!(seen.last(), Some(&RevisionStatus::BuildFailed), "{seen:?}");
    let all = cp
        .build_logs(&id, &rid, &LogQuery::default())
        .await
        .unwrap();
    let lines: Vec<&str> = all.logs.iter().map(|l| l.message.as_str()).collect();
    assert!(lines[0].contains("queued"), "{lines:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("cloning https://github.com/acme/agent at broken")),
        "{lines:?}"
    );
    assert_eq!(
        &lines[lines.len() - 3..],
        [
            "ERROR: could not find a version that satisfies langgraph==9.9",
            "hint: check pyproject.toml",
            "build failed"
        ]
    );
    assert_eq!(all.next_offset, None);
    // The tail: newest first, two lines; then the next page.
    let tail = cp
        .build_logs(
            &id,
            &rid,
            &LogQuery {
                limit: Some(2),
                order: Some(LogOrder::Desc),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let got: Vec<&str> = tail.logs.iter().map(|l| l.message.as_str()).collect();
    assert_eq!(got, ["build failed", "hint: check pyproject.toml"]);
    assert_eq!(tail.next_offset.as_deref(), Some("2"));
    let errors = cp
        .build_logs(
            &id,
            &rid,
            &LogQuery {
                level: Some("error".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(errors.logs.len(), 3, "{errors:?}");
    assert!(
        errors
            .logs
            .iter()
            .all(|l| l.level.as_deref() == Some("ERROR"))
    );
    let found = cp
        .build_logs(
            &id,
            &rid,
            &LogQuery {
                query: Some("pyproject".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(found.logs.len(), 1);
    // A failed build never deploys: its server log is empty.
    let none = cp
        .deploy_logs(&id, Some(&rid), &LogQuery::default())
        .await
        .unwrap();
    assert!(none.logs.is_empty(), "{none:?}");

    // A deployed revision: the server log says it started.
    let ok = cp.create_deployment(&github("fine-logs")).await.unwrap();
    let ok_id = ok.id.clone();
    let seen = poll_revision(&cp, &ok_id, ok.latest_revision_id.as_deref().unwrap()).await;
    assert_eq!(seen.last(), Some(&RevisionStatus::Deployed), "{seen:?}");
    let server = cp
        .deploy_logs(&ok_id, None, &LogQuery::default())
        .await
        .unwrap();
    let last = server.logs.last().map(|l| l.message.as_str());
    assert_eq!(
        last,
        Some("agent server listening on port 8000"),
        "{server:?}"
    );

    // Bad queries and unknown ids.
    let err = cp
        .build_logs(
            &id,
            &rid,
            &LogQuery {
                limit: Some(0),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Validation { .. }), "{err:?}");
    let err = cp
        .build_logs(&id, &ok_id, &LogQuery::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err:?}");
}
