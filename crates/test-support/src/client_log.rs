//! What the operator's control plane client did around the first 429, from
//! its own log (read by the fleet benchmark's S5 and `starts`): each attempt's debug line (`control plane request`, target
//! `agent_operator::controlplane::client`) carries its AgentControlPlane's
//! namespace and the wall-clock microseconds at which it was sent and its
//! answer came (`sent_unix_us`, `answered_unix_us`).
//!
//! The figure the benchmark gates on is the one the operator controls: the
//! requests **sent after the client received the first 429** while its
//! `Retry-After` ran (must be 0). Beside it, the requests **already in
//! flight** then (sent before, answered after): they may reach the
//! service during the `Retry-After`, so the emulator's server-side count
//! of requests that arrived during it (`during_retry_after`) is at most
//! those in flight plus those sent after.

use std::collections::BTreeMap;
use std::time::Duration;

/// The operator's `RUST_LOG` when these lines are wanted: the default plus
/// the client's debug lines (one per attempt).
pub const CLIENT_LOG: &str = "info,kube=warn,agent_operator::controlplane::client=debug";

/// One HTTP attempt of the operator's control plane client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    /// Namespace of the AgentControlPlane whose client sent it.
    pub namespace: String,
    /// The answer's status; `None` for a timeout or a transport error.
    pub status: Option<u16>,
    /// Sent, microseconds since the Unix epoch.
    pub sent_us: u64,
    /// Its status and headers (or its error) came, same clock.
    pub answered_us: u64,
}

/// The attempts logged in `log` (the operator's log, text format).
pub fn attempts(log: &str) -> Vec<Attempt> {
    log.lines()
        .filter_map(|line| {
            let (_, fields) = line.split_once("control plane request ")?;
            let fields: BTreeMap<&str, &str> = fields
                .split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k, v.trim_matches('"')))
                .collect();
            Some(Attempt {
                namespace: fields.get("namespace")?.to_string(),
                status: fields.get("status").and_then(|s| s.parse().ok()),
                sent_us: fields.get("sent_unix_us")?.parse().ok()?,
                answered_us: fields.get("answered_unix_us")?.parse().ok()?,
            })
        })
        .collect()
}

/// Requests of the clients of `namespaces` that the client held back right
/// before sending, because a `Retry-After` began while they waited for a
/// token of another bucket (the line `control plane request held back`):
/// without that check they would have gone out during the pause.
pub fn held_back(log: &str, namespaces: &[&str]) -> usize {
    log.lines()
        .filter_map(|line| {
            line.split_once("control plane request held back")?
                .1
                .split_once("namespace=")
        })
        .filter(|(_, rest)| {
            let ns = rest
                .split_whitespace()
                .next()
                .unwrap_or("")
                .trim_matches('"');
            namespaces.contains(&ns)
        })
        .count()
}

/// What the client did around the first 429 (or 503) of one budget.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AtFirstThrottle {
    /// When the client received it (microseconds since the Unix epoch).
    pub answered_us: u64,
    /// Other requests in flight then: sent before it came, answered after.
    pub in_flight: usize,
    /// Requests sent after it came, within `pause` of it.
    pub sent_after: usize,
}

/// The first 429 or 503 answered to the clients of `namespaces` (the
/// AgentControlPlanes of one budget), with what was in flight and what was
/// sent within `pause` (its `Retry-After`) after it; `None` when there was
/// none.
pub fn at_first_throttle(
    attempts: &[Attempt],
    namespaces: &[&str],
    pause: Duration,
) -> Option<AtFirstThrottle> {
    let ours: Vec<&Attempt> = attempts
        .iter()
        .filter(|a| namespaces.contains(&a.namespace.as_str()))
        .collect();
    let first = ours
        .iter()
        .filter(|a| matches!(a.status, Some(429 | 503)))
        .min_by_key(|a| a.answered_us)?;
    let at = first.answered_us;
    let until = at + pause.as_micros() as u64;
    Some(AtFirstThrottle {
        answered_us: at,
        in_flight: ours
            .iter()
            .filter(|a| !std::ptr::eq(**a, *first) && a.sent_us < at && a.answered_us >= at)
            .count(),
        sent_after: ours
            .iter()
            .filter(|a| a.sent_us >= at && a.sent_us < until)
            .count(),
    })
}

/// `value ×count` pairs of `values`, smallest first: `0 ×12, 1 ×8`.
pub fn distribution(values: impl IntoIterator<Item = usize>) -> String {
    let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
    for v in values {
        *counts.entry(v).or_default() += 1;
    }
    counts
        .iter()
        .map(|(v, n)| format!("{v} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(ns: &str, status: Option<u16>, sent: u64, answered: u64) -> String {
        let status = status.map_or(String::new(), |s| format!(" status={s}"));
        format!(
            "2026-11-29T06:00:00.000001Z DEBUG reconcile{{namespace=x}}: agent_operator::controlplane::client: control plane request operation=\"create_deployment\" status_class=\"4xx\"{status} elapsed_ms=0 namespace=\"{ns}\" control_plane=\"default\" sent_unix_us={sent} answered_unix_us={answered}"
        )
    }

    #[test]
    fn in_flight_and_sent_after_the_first_429() {
        let log = [
            line("a", Some(200), 0, 10),
            line("a", Some(201), 5, 30),                // in flight at 20
            line("a", Some(429), 15, 20),               // the first 429
            line("a", Some(429), 18, 25),               // in flight at 20
            line("b", Some(200), 19, 40),               // another budget
            line("a", None, 21, 50),                    // sent after it
            line("a", Some(200), 2_000_100, 2_000_200), // after the pause
            "2026-11-29 INFO something else".to_owned(),
        ]
        .join("\n");
        let attempts = attempts(&log);
        assert_eq!(attempts.len(), 7);
        let at = at_first_throttle(&attempts, &["a"], Duration::from_secs(2)).unwrap();
        assert_eq!(
            at,
            AtFirstThrottle {
                answered_us: 20,
                in_flight: 2,
                sent_after: 1
            }
        );
        assert_eq!(
            at_first_throttle(&attempts, &["b"], Duration::from_secs(2)),
            None
        );
        assert_eq!(distribution([1, 0, 1, 0, 0]), "0 ×3, 1 ×2");
        let held = "2026-11-29T06:00:00Z DEBUG agent_operator::controlplane::client: control plane request held back: a Retry-After began while it waited operation=\"get_deployment\" namespace=\"a\" control_plane=\"default\"";
        assert_eq!(held_back(&format!("{log}\n{held}"), &["a"]), 1);
        assert_eq!(held_back(held, &["b"]), 0);
    }
}
