//! AgentCron creates are crash-safe on the real `langgraph dev` (issue 32
//! item 2): `POST /runs/crons` has no idempotency key, so the operator tags
//! each cron with the object's UID and finds it by `POST
//! /runs/crons/search` before it creates. Ten AgentCrons are applied at
//! once; the operator reaches the agent server through a loopback proxy that
//! holds every answer for a second after the server answered, and it is
//! SIGKILLed while a create is in flight (the cron landed, its answer lost),
//! then restarted, several times. The server then holds exactly one cron
//! per AgentCron: 0 duplicates, 0 lost, and no stray cron. The harness
//! checks the test's control plane request budget.

use crate::support;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_operator::api::AgentCron;
use agent_operator::api::cron::UID_METADATA_KEY;
use agent_server_wire::Cron;
use kube::Api;
use kube::api::ListParams;
use serde_json::json;
use support::{Harness, github_deployment};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const TIMEOUT: Duration = Duration::from_secs(120);
const CRONS: usize = 10;
const KILLS: usize = 4;
/// How long the proxy holds each answer after the server gave it.
const HOLD: Duration = Duration::from_millis(1000);

/// The counts of a [`HoldingProxy`].
#[derive(Default)]
struct Counts {
    /// Creates forwarded whose answer has not reached the operator yet.
    creates_in_flight: AtomicUsize,
    /// Creates forwarded whose answer never reached the operator (it was
    /// killed first).
    answers_lost: AtomicUsize,
}

/// A loopback TCP proxy to the agent server that forwards each request at
/// once and holds the first bytes of each answer for [`HOLD`]: a create
/// has landed on the server while its answer is still on the way.
struct HoldingProxy {
    url: String,
    counts: Arc<Counts>,
}

impl HoldingProxy {
    async fn start(upstream: &str) -> Self {
        let upstream = upstream.trim_start_matches("http://").to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binding");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let counts = Arc::new(Counts::default());
        let c = counts.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                tokio::spawn(relay(client, server, c.clone()));
            }
        });
        Self { url, counts }
    }

    fn in_flight(&self) -> usize {
        self.counts.creates_in_flight.load(Ordering::SeqCst)
    }

    fn lost(&self) -> usize {
        self.counts.answers_lost.load(Ordering::SeqCst)
    }
}

/// One connection: requests go through at once (a create is noted), the
/// first chunk of each answer waits [`HOLD`]; an answer held when the
/// client is gone is lost.
async fn relay(client: TcpStream, server: TcpStream, counts: Arc<Counts>) {
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    // Per request forwarded and not answered yet: whether it is a create.
    let waiting: Arc<Mutex<VecDeque<bool>>> = Arc::default();
    let gone = Arc::new(AtomicBool::new(false));
    let (w, g, c) = (waiting.clone(), gone.clone(), counts.clone());
    let up = tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match cr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let chunk = &buf[..n];
                    let starts = [&b"GET "[..], b"POST ", b"PATCH ", b"DELETE "];
                    if starts.iter().any(|s| chunk.starts_with(s)) {
                        let create = chunk.starts_with(b"POST /runs/crons ");

                        if create {
                            c.creates_in_flight.fetch_add(1, Ordering::SeqCst);
                        }
                        w.lock().unwrap().push_back(create);
                    }
                    if sw.write_all(chunk).await.is_err() {
                        break;
                    }
                }
            }
        }
        g.store(true, Ordering::SeqCst);
        // Keep the server side open: the answer is still read and held.
        tokio::time::sleep(HOLD * 2).await;
        drop(sw);
    });
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match sr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let first = waiting.lock().unwrap().pop_front();
        if first.is_some() {
            tokio::time::sleep(HOLD).await;
        }
        let delivered = !gone.load(Ordering::SeqCst) && cw.write_all(&buf[..n]).await.is_ok();

        if first == Some(true) {
            counts.creates_in_flight.fetch_sub(1, Ordering::SeqCst);
            if !delivered {
                counts.answers_lost.fetch_add(1, Ordering::SeqCst);
            }
        }
        if !delivered {
            break;
        }
    }
    let left = std::mem::take(&mut *waiting.lock().unwrap());
    for _ in left.into_iter().filter(|c| *c) {
        counts.creates_in_flight.fetch_sub(1, Ordering::SeqCst);
        counts.answers_lost.fetch_add(1, Ordering::SeqCst);
    }
    up.abort();
}

/// Every cron on the real agent server at `url` (the test's own search).
async fn all_crons(url: &str, metadata: serde_json::Value) -> Vec<Cron> {
    reqwest::Client::new()
        .post(format!("{url}/runs/crons/search"))
        .json(&json!({"metadata": metadata, "limit": 1000}))
        .send()
        .await
        .expect("searching crons")
        .json()
        .await
        .expect("a list of crons")
}

fn cron(i: usize) -> serde_json::Value {
    json!({"apiVersion": "agentserver.dev/v1alpha1", "kind": "AgentCron",
        "metadata": {"name": format!("c{i}")},
        "spec": {"deploymentRef": {"name": "agent"}, "graphId": "agent",
            "schedule": format!("{i} 3 * * *")}})
}

fn ready(c: &AgentCron) -> bool {
    c.status.as_ref().is_some_and(|s| {
        s.observed_generation == c.metadata.generation
            && s.cron_id.is_some()
            && s.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

#[tokio::test]
async fn on_the_real_agent_server_sigkills_during_cron_creates_leave_no_duplicate_and_lose_none() {
    test_support::skip_without!(Envtest);
    test_support::skip_without!(AgentServer);
    let server = support::langgraph::start("operator_cron_crash");
    let proxy = HoldingProxy::start(&server.url).await;
    let h = Harness::quick("op-cron-crash")
        .agent_server_url(&proxy.url)
        .without_operator()
        .start()
        .await;
    let mut op = h.start_operator(&[]);
    h.apply(github_deployment("agent", "main")).await;
    h.wait_ready("agent", TIMEOUT).await;
    op.kill().await;

    let api: Api<AgentCron> = Api::namespaced(h.client.clone(), &h.ns);
    for i in 0..CRONS {
        support::apply_json(&api, &format!("c{i}"), cron(i)).await;
    }
    let mut kills_in_flight = 0;
    for kill in 0..KILLS {
        // The creates of the operator killed last are settled (their held
        // answers dropped) before the next one starts.
        let deadline = Instant::now() + HOLD * 5;
        while proxy.in_flight() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(proxy.in_flight(), 0, "the last kill's creates settled");
        let mut op = h.start_operator(&[]);
        let deadline = Instant::now() + TIMEOUT;
        while proxy.in_flight() == 0 {
            let on_server = all_crons(&server.url, json!({})).await.len();
            assert!(
                Instant::now() < deadline,
                "no create in flight within {TIMEOUT:?} ({on_server} crons on the server)"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Within the hold: the create landed, its answer has not arrived.
        let ms = rand::random_range(0..(HOLD.as_millis() as u64 / 2));
        tokio::time::sleep(Duration::from_millis(ms)).await;
        let in_flight = proxy.in_flight();
        op.kill().await;
        if in_flight > 0 {
            kills_in_flight += 1;
        }
        let on_server = all_crons(&server.url, json!({})).await.len();
        eprintln!(
            "kill {}: {in_flight} create(s) in flight, {on_server} crons on the server",
            kill + 1
        );
    }
    // Let the held answers of the last kill fall through.
    tokio::time::sleep(HOLD * 2).await;
    let lost_answers = proxy.lost();

    let _op = h.start_operator(&[]);
    let deadline = Instant::now() + TIMEOUT;
    let objects = loop {
        let list = api.list(&ListParams::default()).await.unwrap().items;
        if list.len() == CRONS && list.iter().all(ready) {
            break list;
        }
        assert!(
            Instant::now() < deadline,
            "not all Ready: {:#?}",
            list.iter()
                .filter(|c| !ready(c))
                .map(|c| (&c.metadata.name, &c.status))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let mut duplicates = 0;
    let mut lost = 0;
    for o in &objects {
        let uid = o.metadata.uid.clone().unwrap();
        let found = all_crons(&server.url, json!({UID_METADATA_KEY: uid})).await;
        match found.len() {
            0 => lost += 1,
            n => duplicates += n - 1,
        }
        if let [one] = found.as_slice() {
            assert_eq!(
                Some(&one.cron_id),
                o.status.as_ref().unwrap().cron_id.as_ref(),
                "status names the cron on the server"
            );
        }
    }
    let total = all_crons(&server.url, json!({})).await.len();
    eprintln!(
        "cron crash safety (real langgraph dev): {CRONS} AgentCrons, {KILLS} SIGKILLs \
         ({kills_in_flight} with a create in flight), {lost_answers} creates landed with \
         their answer lost; {duplicates} duplicate, {lost} lost, {total} crons on the server"
    );
    assert_eq!(kills_in_flight, KILLS, "every kill came during a create");
    assert!(
        lost_answers >= KILLS,
        "each kill lost a create's answer: {lost_answers}"
    );
    assert_eq!(duplicates, 0, "0 duplicate crons");
    assert_eq!(lost, 0, "0 lost crons");
    assert_eq!(total, CRONS, "no stray cron on the server");
}
