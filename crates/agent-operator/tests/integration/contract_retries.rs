//! Contract tests of the client's resilience against the emulator's faults:
//! `Retry-After` on 429 (measured: when the 429 left the server and when the
//! retry arrived), 5xx retried for GET and DELETE but never for POST and
//! PATCH (counted at the emulator), the retry budget, hung requests
//! (timeouts), dropped connections, and the client-side rate limit (measured
//! on the request arrival times).
//!
//! Every timing assertion is a lower bound on a wait the client must make
//! (behaviour), never an upper bound on speed.
//!
//! Sources: docs/control-plane-api.md "Errors" (a 429 or 503 may carry
//! `Retry-After`; only GET and DELETE are retried) and "Requests" (no
//! idempotency key on create); the emulator's faults (`PUT /_emulator/faults`).

use crate::contract_common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use agent_operator::controlplane::types::DeploymentPatch;
use agent_operator::controlplane::{Error, ListDeployments, RateLimit, RetryPolicy};
use contract_common::{Emu, Recorder, github};
use control_plane_emulator::FaultConfig;
use serde_json::json;

const GET_ONE: &str = "GET /v2/deployments/{deployment_id}";

#[tokio::test]
async fn a_429_retry_is_never_sent_before_retry_after() {
    let emu = Emu::fast().await;
    let rec = Arc::new(Recorder::default());
    let c = emu.client_with(|cfg| cfg.observer = Some(rec.clone()));
    emu.set_faults(json!({"rate_limit_per_second": 1.0, "rate_limit_burst": 1}))
        .await;

    let started = Instant::now();
    c.list_deployments(&ListDeployments::default())
        .await
        .unwrap();
    // The bucket is empty: the emulator answers 429 with Retry-After, the
    // client waits, retries, and succeeds.
    c.list_deployments(&ListDeployments::default())
        .await
        .unwrap();
    let total = started.elapsed();

    let log = emu.log();
    let statuses: Vec<u16> = log.iter().map(|a| a.status).collect();
    assert_eq!(statuses, [200, 429, 200], "{log:?}");
    let limited = &log[1];
    let retry_after: u64 = limited
        .retry_after
        .as_deref()
        .expect("the 429 carries Retry-After")
        .parse()
        .expect("seconds");
    assert!(retry_after >= 1);
    let retry_after = Duration::from_secs(retry_after);
    // Server side: from the moment the 429 was answered to the arrival of the
    // retry. The client cannot have received the 429 before it was answered,
    // so this gap is at least the client's wait.
    let server_gap = log[2].at.duration_since(limited.done);
    assert!(
        server_gap >= retry_after,
        "retry arrived {server_gap:?} after the 429, Retry-After was {retry_after:?}"
    );
    // Client side: from the end of the 429 attempt to the send of the retry.
    let events = rec.events();
    let classes: Vec<&str> = events.iter().map(|e| e.class).collect();
    assert_eq!(classes, ["2xx", "4xx", "2xx"]);
    let client_gap = events[2].sent().duration_since(events[1].at);
    assert!(client_gap >= retry_after, "client waited {client_gap:?}");
    eprintln!(
        "Retry-After {retry_after:?}: retry arrived {server_gap:?} after the 429 left the server; \
         the client waited {client_gap:?}; both calls took {total:?}"
    );
}

#[tokio::test]
async fn a_retry_after_beyond_the_budget_is_returned_to_the_caller() {
    let emu = Emu::fast().await;
    let c = emu.client_with(|cfg| {
        cfg.retry = RetryPolicy {
            max_elapsed: Duration::from_millis(500),
            ..contract_common::fast_retries()
        }
    });
    emu.set_faults(json!({"rate_limit_per_second": 0.2, "rate_limit_burst": 1}))
        .await;
    c.list_deployments(&ListDeployments::default())
        .await
        .unwrap();
    let e = c
        .list_deployments(&ListDeployments::default())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::RateLimited { status: 429, .. }), "{e:?}");
    assert!(e.is_transient());
    let ra = e
        .retry_after()
        .expect("the caller gets Retry-After to requeue");
    assert!(ra >= Duration::from_secs(1), "{ra:?}");
    assert_eq!(
        emu.count("GET /v2/deployments", "429").await,
        1,
        "no retry that would break Retry-After or the budget"
    );
}

#[tokio::test]
async fn get_and_delete_retry_5xx_to_the_attempt_budget_post_and_patch_never() {
    let emu = Emu::fast().await;
    let c = emu.client();
    let d = c.create_deployment(&github("flaky")).await.unwrap();
    emu.set_faults(json!({"error_rate": 1.0, "error_status": 500}))
        .await;

    let e = c.get_deployment(&d.id).await.unwrap_err();
    assert!(matches!(e, Error::Server { status: 500, .. }), "{e:?}");
    assert!(e.is_transient());
    assert_eq!(emu.count(GET_ONE, "500").await, 4, "max_attempts = 4");

    let e = c.delete_deployment(&d.id).await.unwrap_err();
    assert!(matches!(e, Error::Server { status: 500, .. }), "{e:?}");
    assert_eq!(
        emu.count("DELETE /v2/deployments/{deployment_id}", "500")
            .await,
        4
    );

    let e = c.create_deployment(&github("other")).await.unwrap_err();
    assert!(matches!(e, Error::Server { status: 500, .. }), "{e:?}");
    assert_eq!(
        emu.count("POST /v2/deployments", "500").await,
        1,
        "a POST is never retried blindly"
    );
    let e = c
        .patch_deployment(&d.id, &DeploymentPatch::default())
        .await
        .unwrap_err();
    assert!(e.is_transient(), "{e:?}");
    assert_eq!(
        emu.count("PATCH /v2/deployments/{deployment_id}", "500")
            .await,
        1
    );
    let e = c.redeploy(&d.id).await.unwrap_err();
    assert!(e.is_transient(), "{e:?}");
    assert_eq!(
        emu.count("POST /v2/deployments/{deployment_id}/revisions", "500")
            .await,
        1
    );

    // 503 (the emulator's default injected status) is retried too.
    emu.set_faults(json!({"error_rate": 1.0, "error_status": 503}))
        .await;
    let e = c.get_deployment(&d.id).await.unwrap_err();
    assert!(matches!(e, Error::RateLimited { status: 503, .. }), "{e:?}");
    assert_eq!(emu.count(GET_ONE, "503").await, 4);

    // A policy of one attempt disables retries.
    let once = emu.client_with(|cfg| cfg.retry = RetryPolicy::never());
    once.get_deployment(&d.id).await.unwrap_err();
    assert_eq!(emu.count(GET_ONE, "503").await, 5);
}

#[tokio::test]
async fn a_get_succeeds_after_a_transient_5xx() {
    let emu = Emu::fast().await;
    let c = emu.client();
    let d = c.create_deployment(&github("recovers")).await.unwrap();
    emu.set_faults(json!({"error_rate": 1.0, "error_status": 502}))
        .await;
    // The observer heals the emulator right after the first failed attempt.
    let state = emu.state.clone();
    let healed = Arc::new(AtomicBool::new(false));
    let flag = healed.clone();
    let rec = Arc::new(Recorder::with_hook(move |o| {
        if o.class == "5xx" && !flag.swap(true, Ordering::SeqCst) {
            state.set_faults(FaultConfig::default()).unwrap();
        }
    }));
    let c = emu.client_with(|cfg| cfg.observer = Some(rec.clone()));
    let got = c.get_deployment(&d.id).await.unwrap();
    assert_eq!(got.id, d.id);
    assert!(healed.load(Ordering::SeqCst));
    let classes: Vec<&str> = rec.events().iter().map(|e| e.class).collect();
    assert_eq!(classes, ["5xx", "2xx"]);
    assert_eq!(emu.counts(GET_ONE).await, json!({"502": 1, "200": 1}));
}

#[tokio::test]
async fn hung_requests_time_out_gets_are_retried_posts_are_not() {
    let emu = Emu::fast().await;
    let c = emu.client();
    let d = c.create_deployment(&github("hangs")).await.unwrap();
    let rec = Arc::new(Recorder::default());
    let c = emu.client_with(|cfg| {
        cfg.timeout = Duration::from_millis(300);
        cfg.retry.max_attempts = 2;
        cfg.observer = Some(rec.clone());
    });
    emu.set_faults(json!({"hang_rate": 1.0, "hang_ms": 600000}))
        .await;

    let e = c.get_deployment(&d.id).await.unwrap_err();
    assert!(matches!(e, Error::Timeout), "{e:?}");
    assert!(e.is_transient());
    assert_eq!(emu.count(GET_ONE, "hung").await, 2, "tried twice");

    let e = c.create_deployment(&github("hangs-too")).await.unwrap_err();
    assert!(matches!(e, Error::Timeout), "{e:?}");
    assert_eq!(emu.count("POST /v2/deployments", "hung").await, 1);

    let events = rec.events();
    assert_eq!(events.len(), 3);
    for o in &events {
        assert_eq!(o.class, "timeout");
        assert!(
            o.elapsed >= Duration::from_millis(300),
            "an attempt ends at the timeout, not before: {:?}",
            o.elapsed
        );
    }
}

#[tokio::test]
async fn dropped_connections_are_transport_errors() {
    let emu = Emu::fast().await;
    let c = emu.client();
    let d = c.create_deployment(&github("drops")).await.unwrap();
    let rec = Arc::new(Recorder::default());
    let c = emu.client_with(|cfg| cfg.observer = Some(rec.clone()));
    emu.set_faults(json!({"drop_rate": 1.0})).await;

    let e = c.get_deployment(&d.id).await.unwrap_err();
    assert!(matches!(e, Error::Transport(_)), "{e:?}");
    assert!(e.is_transient());
    assert_eq!(emu.count(GET_ONE, "dropped").await, 4);

    let e = c
        .patch_deployment(&d.id, &DeploymentPatch::default())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Transport(_)), "{e:?}");
    assert_eq!(
        emu.count("PATCH /v2/deployments/{deployment_id}", "dropped")
            .await,
        1,
        "a PATCH whose answer was lost is not sent again"
    );
    let classes: Vec<&str> = rec.events().iter().map(|e| e.class).collect();
    assert_eq!(classes, ["transport"; 5]);
}

#[tokio::test]
async fn the_rate_limit_spaces_requests_across_clones() {
    let emu = Emu::fast().await;
    let c = emu.client_with(|cfg| {
        cfg.rate_limit = Some(RateLimit {
            requests_per_second: 5.0,
            burst: 1,
        })
    });
    let started = Instant::now();
    let calls = (0..6).map(|_| {
        let c = c.clone();
        async move { c.list_deployments(&ListDeployments::default()).await }
    });
    for r in futures::future::join_all(calls).await {
        r.unwrap();
    }
    let client_elapsed = started.elapsed();
    let log = emu.log();
    assert_eq!(log.len(), 6);
    // One token per 200 ms after a burst of 1: the k-th request cannot be
    // sent before k periods after the first token, which was taken after
    // `started`. Client side: the calls took at least 5 periods.
    assert!(
        client_elapsed >= Duration::from_secs(1),
        "6 requests at 5/s took only {client_elapsed:?}"
    );
    // Server side: the k-th arrival is at least k × 200 ms after `started`.
    for (k, a) in log.iter().enumerate() {
        let since = a.at.duration_since(started);
        assert!(
            since >= Duration::from_millis(200) * k as u32,
            "request {k} arrived {since:?} after the first could be sent"
        );
    }
    let span = log[5].at.duration_since(log[0].at);
    eprintln!(
        "6 requests at 5/s burst 1: client {client_elapsed:?}, server span first to last {span:?}"
    );
}

#[tokio::test]
async fn retries_take_rate_limit_tokens_too() {
    let emu = Emu::fast().await;
    let c = emu.client();
    let d = c.create_deployment(&github("limited")).await.unwrap();
    let c = emu.client_with(|cfg| {
        cfg.rate_limit = Some(RateLimit {
            requests_per_second: 5.0,
            burst: 1,
        })
    });
    emu.set_faults(json!({"error_rate": 1.0, "error_status": 500}))
        .await;
    emu.clear_log();
    let started = Instant::now();
    c.get_deployment(&d.id).await.unwrap_err();
    let log = emu.log();
    assert_eq!(log.len(), 4);
    // Backoffs are 10–80 ms; the 200 ms spacing comes from the limiter: the
    // k-th attempt cannot arrive before k periods after `started`.
    for (k, a) in log.iter().enumerate() {
        let since = a.at.duration_since(started);
        assert!(
            since >= Duration::from_millis(200) * k as u32,
            "attempt {k} arrived {since:?} after the first could be sent"
        );
    }
}

/// Issue 36: a request the budget holds back after the service answered 503
/// names that answer (not a local throttle), and a success clears it.
#[tokio::test]
async fn a_request_held_back_after_a_503_names_the_service_answer() {
    let emu = Emu::fast().await;
    let budget = agent_operator::controlplane::Budget::new(None);
    let c = emu.client_with(|cfg| {
        cfg.retry = RetryPolicy {
            max_attempts: 1,
            ..contract_common::fast_retries()
        };
        cfg.budget = Some(budget.clone());
        cfg.max_token_wait = Some(Duration::from_millis(50));
    });
    emu.set_faults(json!({"error_rate": 1.0, "error_status": 503, "error_retry_after_seconds": 2}))
        .await;
    let e = c
        .list_deployments(&ListDeployments::default())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::RateLimited { status: 503, .. }), "{e:?}");
    let held = c
        .list_deployments(&ListDeployments::default())
        .await
        .unwrap_err();
    let Error::Deferred { cause, .. } = &held else {
        panic!("not held back: {held:?}")
    };
    assert_eq!(cause.as_deref(), Some("service unavailable (503)"));
    assert!(
        held.stable_summary()
            .starts_with("service unavailable (503) (the last answer;"),
        "{}",
        held.stable_summary()
    );
    assert_eq!(
        emu.count("GET /v2/deployments", "503").await,
        1,
        "held, not sent"
    );
    // Once the service answers again (a client of the same budget that
    // waits for its token), the cause is gone.
    emu.set_faults(json!({})).await;
    let patient = emu.client_with(|cfg| cfg.budget = Some(budget.clone()));
    patient
        .list_deployments(&ListDeployments::default())
        .await
        .unwrap();
    assert_eq!(budget.cause(), None, "a success clears the cause");
}
