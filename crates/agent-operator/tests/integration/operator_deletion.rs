//! Item 9, deletion: `deletionPolicy: Orphan` leaves the remote deployment;
//! `Delete` keeps the finalizer until the asynchronous delete is over (GET
//! 404), sending one DELETE and reading on a backoff meanwhile (the issue
//! "Many teams on one operator", item 5). Deletion in any order, and a
//! deletion blocked for good: `operator_deletion_order.rs`.

use crate::support;

use std::time::Duration;

use agent_operator::api::deployment::FINALIZER;
use agent_operator::controlplane::Error as CpError;
use kube::api::DeleteParams;
use support::{Harness, condition, github_deployment, route, wait_for};

const TIMEOUT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn orphan_policy_leaves_the_remote_deployment() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-delete-orphan").start().await;
    let name = "orphaned-agent";
    let mut manifest = github_deployment(name, "main");
    manifest["spec"]["deletionPolicy"] = "Orphan".into();
    let id = h.converge(manifest, TIMEOUT).await;

    h.api.delete(name, &DeleteParams::default()).await.unwrap();
    support::wait_until_gone(&h.api, name, TIMEOUT).await;
    let remote = h.cp.get_deployment(&id).await.unwrap();
    assert_eq!(remote.status.as_deref(), Some("READY"));
    assert_eq!(h.emulator.requests().await.count(route::DELETE), 0);
    support::wait_for_event(&h.client, &h.ns, name, "Orphaned", TIMEOUT).await;
}

#[tokio::test]
async fn delete_policy_waits_for_the_asynchronous_delete() {
    test_support::skip_without!(Envtest);
    let h = Harness::quick("op-delete-async")
        .delete_seconds(3.0)
        .start()
        .await;
    let name = "deleted-agent";
    let id = h.converge(github_deployment(name, "main"), TIMEOUT).await;

    h.api.delete(name, &DeleteParams::default()).await.unwrap();
    let obj = wait_for(&h.api, name, TIMEOUT, "Ready reason Deleting", |o| {
        let ready = condition(o, "Ready")?;
        (ready.reason == "Deleting").then(|| o.clone())
    })
    .await;
    assert!(obj.metadata.deletion_timestamp.is_some());
    assert!(
        obj.metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|f| f == FINALIZER)),
        "the finalizer holds the object while the remote is deleted"
    );
    assert_eq!(
        obj.status.as_ref().unwrap().deployment_status.as_deref(),
        Some("AWAITING_DELETE")
    );
    let ready = condition(&obj, "Ready").unwrap();
    assert!(ready.message.contains(&id), "{}", ready.message);
    assert_eq!(
        h.cp.get_deployment(&id).await.unwrap().status.as_deref(),
        Some("AWAITING_DELETE"),
        "the control plane is still deleting"
    );

    // The object goes only once GET answers 404.
    support::wait_until_gone(&h.api, name, TIMEOUT).await;
    match h.cp.get_deployment(&id).await {
        Err(CpError::NotFound { .. }) => {}
        other => panic!("the object went before the remote was gone: {other:?}"),
    }
    let counts = h.emulator.requests().await;
    assert!(counts.count(route::DELETE) >= 1);
    assert!(
        counts.0["routes"][route::GET]["404"].as_u64().unwrap_or(0) >= 1,
        "the operator saw the 404: {counts:?}"
    );
    let deleted = support::wait_for_event(&h.client, &h.ns, name, "Deleted", TIMEOUT).await;
    assert!(deleted.note.unwrap_or_default().contains(&id));
}

/// A delete the service takes 60 s to finish costs one DELETE and a few
/// GETs on the backoff of the shipped polling (2 s doubling to 30 s, ±25 %):
/// at most 8 requests about the deployment, where a DELETE and a GET every
/// poll interval cost 62.
#[tokio::test]
async fn a_slow_delete_is_read_on_a_backoff() {
    test_support::skip_without!(Envtest);
    const DELETE_SECONDS: u64 = 60;
    let h = Harness::quick("op-delete-backoff")
        .delete_seconds(DELETE_SECONDS as f64)
        // The shipped polling, not the harness's fast one.
        .operator_flags(&[
            "--poll-interval-seconds",
            "2",
            "--max-poll-interval-seconds",
            "30",
        ])
        .start()
        .await;
    let name = "slowly-deleted-agent";
    let id = h.converge(github_deployment(name, "main"), TIMEOUT).await;

    let mark = h.emulator.request_mark().await;
    let started = std::time::Instant::now();
    h.api.delete(name, &DeleteParams::default()).await.unwrap();
    support::wait_until_gone(&h.api, name, Duration::from_secs(DELETE_SECONDS * 3)).await;
    let took = started.elapsed();
    let log = h.emulator.request_log().await;
    assert_eq!(log.dropped, 0, "the request log is complete");
    let about: Vec<_> = log
        .entries
        .iter()
        .skip(mark)
        .filter(|r| r.deployment_id.as_deref() == Some(id.as_str()))
        .collect();
    let count = |route: &str| about.iter().filter(|r| r.route == route).count();
    let (deletes, gets) = (count(route::DELETE), count(route::GET));
    let times: Vec<String> = about
        .iter()
        .map(|r| {
            format!(
                "{} {} at {:.1} s",
                r.route,
                r.status,
                r.t_ms as f64 / 1000.0
            )
        })
        .collect();
    eprintln!(
        "a {DELETE_SECONDS} s delete: {deletes} DELETE + {gets} GET = {} requests; gone after {:.1} s; {times:#?}",
        deletes + gets,
        took.as_secs_f64()
    );
    assert!(
        took >= Duration::from_secs(DELETE_SECONDS - 1),
        "the object went before the remote delete was over ({took:?})"
    );
    assert_eq!(deletes, 1, "one DELETE: {times:#?}");
    assert_eq!(
        about.len(),
        deletes + gets,
        "nothing but DELETE and GET: {times:#?}"
    );
    assert!(
        deletes + gets <= 8,
        "{deletes} DELETE + {gets} GET during a {DELETE_SECONDS} s delete (at most 8): {times:#?}"
    );
    match h.cp.get_deployment(&id).await {
        Err(CpError::NotFound { .. }) => {}
        other => panic!("the remote deployment is still there: {other:?}"),
    }
    support::wait_for_event(&h.client, &h.ns, name, "Deleted", TIMEOUT).await;
}
