//! Control plane faults (issue "Reliability", item 2): 20 % 5xx (503 with
//! `Retry-After`), 10 % hung requests, dropped connections and a tight rate
//! limit answered 429 with `Retry-After`, then a full outage; every resource
//! converges after the faults stop, with exactly one remote deployment each.
//! Prints the figures: time to converge, requests per resource, requests
//! that arrived while a `Retry-After` was pending.
//!
//! Short version in the test command (12 resources, 15 s of faults, 10 s of
//! outage); `FAULT_FULL=1` runs 50 resources, 30 s of faults and the 30 s
//! outage of the issue.

use crate::support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::ListParams;
use serde_json::json;
use support::{FAST_POLLING, Harness, github_deployment};

fn full() -> bool {
    std::env::var_os("FAULT_FULL").is_some()
}

/// A figure of this test as docs/RELIABILITY.md, "Faults", prints it, for
/// the short and the full version; the test asserts at most twice it.
struct Printed {
    /// All Ready this long after the faults stopped, in seconds.
    converge_s: f64,
    /// Requests per resource, the test's own included.
    per_resource: f64,
    /// Requests sent while a `Retry-After` was pending.
    during_retry_after: u64,
}

/// The short version's row of docs/RELIABILITY.md.
const PRINTED_SHORT: Printed = Printed {
    converge_s: 8.6,
    per_resource: 4.4,
    during_retry_after: 2,
};
/// The full version's row of docs/RELIABILITY.md.
const PRINTED_FULL: Printed = Printed {
    converge_s: 14.9,
    per_resource: 3.0,
    during_retry_after: 2,
};
/// How far above a printed figure a run may be.
const SLACK: f64 = 2.0;

#[tokio::test]
async fn a_fleet_converges_after_5xx_hangs_drops_429s_and_an_outage() {
    test_support::skip_without!(Envtest);
    let test = "fault-control-plane";
    let (count, faults_s, outage_s) = if full() { (50, 30, 30) } else { (12, 15, 10) };
    let printed = if full() { PRINTED_FULL } else { PRINTED_SHORT };
    let converge_bound = Duration::from_secs_f64(printed.converge_s * SLACK);
    let h = Harness::fleet(test)
        .operator_flags(&FAST_POLLING)
        .operator_flags(&["--request-timeout-seconds", "2"])
        .start()
        .await;
    h.emulator
        .set_faults(json!({
            "error_rate": 0.2,
            "error_status": 503,
            "error_retry_after_seconds": 1,
            "hang_rate": 0.1,
            "hang_ms": 5_000,
            "drop_rate": 0.05,
            "rate_limit_per_second": 4.0,
            "rate_limit_burst": 4
        }))
        .await;
    let names: Vec<String> = (0..count).map(|i| format!("faulty-{i:03}")).collect();
    futures::stream::iter(names.iter())
        .for_each_concurrent(8, |name| {
            let h = &h;
            async move {
                h.apply(github_deployment(name, "main")).await;
            }
        })
        .await;
    tokio::time::sleep(Duration::from_secs(faults_s)).await;
    // Full outage: every request answered 503 (no Retry-After).
    h.emulator
        .set_faults(json!({"error_rate": 1.0, "error_status": 503}))
        .await;
    tokio::time::sleep(Duration::from_secs(outage_s)).await;
    h.emulator.set_faults(json!({})).await;
    let recovered = Instant::now();

    let deadline = recovered + converge_bound;
    loop {
        let list = h.api.list(&ListParams::default()).await.unwrap().items;
        if list.len() == count && list.iter().all(support::is_ready_now) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not converged {converge_bound:?} after the faults stopped (docs/RELIABILITY.md \
             prints {} s): {:#?}",
            printed.converge_s,
            list.iter()
                .filter(|o| !support::is_ready_now(o))
                .take(3)
                .map(|o| &o.status)
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let converge = recovered.elapsed();

    let remote = h.remote_deployments().await;
    let mut by_name: HashMap<&str, usize> = HashMap::new();
    for d in &remote {
        *by_name.entry(d.name.as_str()).or_default() += 1;
    }
    assert!(
        by_name.values().all(|n| *n == 1) && by_name.len() == count,
        "one remote deployment per resource: {by_name:?}"
    );
    let requests = h.emulator.requests().await;
    let total = requests.0["total"].as_u64().unwrap_or(0);
    let during = requests.during_retry_after();
    println!(
        "control plane faults: {count} resources, {faults_s} s of 20 % 503 + 10 % hung + 5 % dropped + 4/s limit, {outage_s} s outage: all Ready {:.1} s after the faults stopped; {total} requests ({:.1} per resource, the test's own included); {during} sent while a Retry-After was pending; 0 duplicates",
        converge.as_secs_f64(),
        total as f64 / count as f64,
    );
    // Requests already in flight when a 429/503 arrives count as "during"
    // (0 to 2 in the runs so far); a client that ignored Retry-After sends
    // most of its requests into the pauses.
    let per_resource = total as f64 / count as f64;
    println!(
        "control plane faults, asserted: all Ready within {:.1} s, at most {:.1} requests per resource, at most {} sent while a Retry-After was pending (2 × {} s, {}, {} as docs/RELIABILITY.md prints)",
        converge_bound.as_secs_f64(),
        printed.per_resource * SLACK,
        printed.during_retry_after * 2,
        printed.converge_s,
        printed.per_resource,
        printed.during_retry_after,
    );
    assert!(
        during <= printed.during_retry_after * 2,
        "{during} of {total} requests were sent while a Retry-After was pending"
    );
    assert!(
        per_resource <= printed.per_resource * SLACK,
        "{per_resource:.1} requests per resource"
    );
}
