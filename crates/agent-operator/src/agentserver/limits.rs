//! The bounds of agent server calls, apart from every control plane
//! budget: one token bucket per agent server and a process-wide cap on
//! passes calling agent servers at once ([`Limits`]), set by the
//! `--verify-*` flags ([`VerifyConfig`]). Shared by every kind that calls
//! an agent server: AgentDeployment (`spec.verify`), AgentAssistant and
//! AgentCron.
//!
//! Source: docs/control-plane-api.md "Agent server" (each deployment has
//! its own agent server; the rate limits of agent servers are not
//! documented).

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::clock::Clock as _;

/// Settings of verification (operator flags `--verify-*`).
#[derive(Clone, Debug, PartialEq)]
pub struct VerifyConfig {
    /// How often a verified revision is verified again; `None`: the resync
    /// interval.
    pub interval: Option<Duration>,
    /// First retry delay after a failed verification; doubles per failure,
    /// capped at the resync interval. Default 30 s.
    pub backoff: Duration,
    /// Calls per second to each agent server (a token bucket per
    /// deployment, shared by its verification, AgentAssistants and
    /// AgentCrons). Default 2.
    pub requests_per_second: f64,
    /// Burst of each bucket, in calls. Default 10.
    pub burst: u32,
    /// Passes calling agent servers at once, process-wide. Default 4.
    pub concurrency: usize,
}

impl Default for VerifyConfig {
    fn default() -> Self {
        Self {
            interval: None,
            backoff: DEFAULT_BACKOFF,
            requests_per_second: 2.0,
            burst: 10,
            concurrency: 4,
        }
    }
}

/// Default first retry delay of a failed verification: 30 s.
pub const DEFAULT_BACKOFF: Duration = Duration::from_secs(30);

/// The bounds of agent server calls: one token bucket (`governor`) per
/// agent server, that is per deployment (its verification, its
/// AgentAssistants and its AgentCrons draw from the same bucket), and a
/// process-wide cap on passes calling agent servers at once. These calls
/// draw from no control plane budget.
///
/// Nothing waits here (a reconcile worker is never held): a pass that does
/// not fit is deferred. Deferrals are spread over the backlog: with `n`
/// objects of one agent server waiting, a deferred one comes back after the
/// bucket's own wait plus a uniform share of `n` passes' worth of tokens, so
/// that the retries stay near the server's rate instead of a fleet retrying
/// every second. A pass deferred for want of a free slot comes back after
/// about one pass's hold of a slot (measured: [`Permit`]), plus a uniform
/// share of the backlog at the slots' own pace (`hold / concurrency` per
/// object waiting, process-wide), so that a burst of short passes
/// (AgentAssistants, AgentCrons: tens of milliseconds each) drains at the
/// slots' speed instead of seconds per object waiting.
///
/// Source: docs/control-plane-api.md "Agent server" (each deployment has
/// its own agent server; the rate limits of agent servers are not
/// documented).
#[derive(Debug)]
pub struct Limits {
    rate: Option<governor::DefaultKeyedRateLimiter<String>>,
    /// Seconds of tokens one call takes (`1 / requests per second`).
    call_seconds: f64,
    slots: Arc<tokio::sync::Semaphore>,
    /// `--verify-concurrency` (at least 1).
    concurrency: u32,
    /// How long a pass holds a slot, microseconds: a moving average of the
    /// last passes' holds (0 until the first permit is released).
    held_micros: Arc<std::sync::atomic::AtomicU64>,
    /// Objects deferred and not yet admitted, with their agent server and
    /// when they were last deferred (entries older than [`PENDING_TTL`] are
    /// dropped).
    pending: std::sync::Mutex<std::collections::HashMap<String, (String, std::time::Instant)>>,
}

/// How long a deferred object counts in the backlog without coming back.
const PENDING_TTL: Duration = Duration::from_secs(600);

/// The wait of a pass deferred for want of a free slot before any hold was
/// measured, and the most a measured hold counts for.
const SLOT_WAIT: Duration = Duration::from_secs(2);

/// The least a measured hold counts for (a retry sooner than this would
/// only spin).
const SLOT_WAIT_MIN: Duration = Duration::from_millis(20);

/// A slot for one pass calling an agent server (see [`Limits::admit`]);
/// held until the pass's calls are done. Dropping it frees the slot and
/// adds its hold time to the moving average that paces deferred passes.
#[derive(Debug)]
pub struct Permit {
    _slot: tokio::sync::OwnedSemaphorePermit,
    since: std::time::Instant,
    held_micros: Arc<std::sync::atomic::AtomicU64>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        use std::sync::atomic::Ordering::Relaxed;
        let us = u64::try_from(self.since.elapsed().as_micros()).unwrap_or(u64::MAX);
        // Exponential moving average, weight 1/8 for the newest hold.
        let _ = self.held_micros.fetch_update(Relaxed, Relaxed, |old| {
            Some(if old == 0 {
                us.max(1)
            } else {
                (old - old / 8).saturating_add(us / 8).max(1)
            })
        });
    }
}

/// Buckets kept before those of agent servers not called lately are
/// dropped (a full bucket is the same as none).
const BUCKETS_KEPT: usize = 1024;

/// Why a pass may not call its agent server now: try again after this.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Deferred(pub Duration);

impl Limits {
    /// Limits from `config`; a rate that is not positive and finite means no
    /// rate limit (the concurrency cap stays, at least 1).
    pub fn new(config: &VerifyConfig) -> Self {
        let period = (config.requests_per_second.is_finite() && config.requests_per_second > 0.0)
            .then(|| Duration::try_from_secs_f64(1.0 / config.requests_per_second).ok())
            .flatten();
        let rate = period.and_then(governor::Quota::with_period).map(|q| {
            governor::RateLimiter::keyed(
                q.allow_burst(NonZeroU32::new(config.burst.max(1)).unwrap_or(NonZeroU32::MIN)),
            )
        });
        Self {
            rate,
            call_seconds: period.map_or(0.0, |p| p.as_secs_f64()),
            slots: Arc::new(tokio::sync::Semaphore::new(config.concurrency.max(1))),
            concurrency: u32::try_from(config.concurrency.max(1)).unwrap_or(u32::MAX),
            held_micros: Default::default(),
            pending: Default::default(),
        }
    }

    /// A slot for one pass of object `key` making `calls` calls to the
    /// agent server `server` (the remote id of its deployment), their
    /// tokens taken now, or how long to wait before trying again (see
    /// [`Limits`]). `calls` 0: a slot only, for a pass whose calls each
    /// wait for their token ([`Limits::pace`]: a suite's).
    pub fn admit(&self, key: &str, server: &str, calls: u32) -> Result<Permit, Deferred> {
        let Ok(slot) = self.slots.clone().try_acquire_owned() else {
            let hold = self.hold();
            return Err(self.defer(key, server, hold, hold / self.concurrency, false));
        };
        let permit = Permit {
            _slot: slot,
            since: std::time::Instant::now(),
            held_micros: self.held_micros.clone(),
        };
        if let (Some(rate), Some(n)) = (&self.rate, NonZeroU32::new(calls)) {
            if rate.len() > BUCKETS_KEPT {
                rate.retain_recent();
            }
            let server_key = server.to_owned();
            let share = Duration::from_secs_f64(self.call_seconds * f64::from(calls));
            match rate.check_key_n(&server_key, n) {
                Ok(Ok(())) => {}
                Ok(Err(not_until)) => {
                    let clock = governor::clock::DefaultClock::default();
                    let wait = not_until.wait_time_from(clock.now());
                    let base = wait.max(Duration::from_millis(100));
                    return Err(self.defer(key, server, base, share, true));
                }
                // More calls than the burst: let it through one at a time.
                Err(_) => {
                    if rate.check_key(&server_key).is_err() {
                        return Err(self.defer(key, server, share, share, true));
                    }
                }
            }
        }
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
        Ok(permit)
    }

    /// Records `key` (of agent server `server`) as deferred and returns
    /// `base` plus a uniform share of the backlog (`share` per other object
    /// waiting: of the same server when `same_server`, else of all).
    fn defer(
        &self,
        key: &str,
        server: &str,
        base: Duration,
        share: Duration,
        same_server: bool,
    ) -> Deferred {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let now = std::time::Instant::now();
        pending.retain(|_, (_, at)| now.duration_since(*at) < PENDING_TTL);
        pending.insert(key.to_owned(), (server.to_owned(), now));
        let waiting = if same_server {
            pending.values().filter(|(s, _)| s == server).count()
        } else {
            pending.len()
        };
        let others = waiting.saturating_sub(1) as f64;
        Deferred(base + share.mul_f64(rand::random_range(0.0..=others)))
    }

    /// How long a pass holds a slot: the moving average of the holds
    /// measured, within [`SLOT_WAIT_MIN`]..=[`SLOT_WAIT`]; [`SLOT_WAIT`]
    /// before any.
    pub fn hold(&self) -> Duration {
        match self.held_micros.load(std::sync::atomic::Ordering::Relaxed) {
            0 => SLOT_WAIT,
            us => Duration::from_micros(us).clamp(SLOT_WAIT_MIN, SLOT_WAIT),
        }
    }

    /// Waits until agent server `server` has a token for one more call
    /// (at once without a rate limit). Used between the cases of a suite,
    /// whose pass already holds a slot: the suite's calls keep to the same
    /// budget as every other call to that server.
    pub async fn pace(&self, server: &str) {
        if let Some(rate) = &self.rate {
            rate.until_key_ready(&server.to_owned()).await;
        }
    }

    /// Objects deferred and not yet admitted.
    pub fn backlog(&self) -> usize {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// Connect timeout of agent server calls.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest wait for one agent server request (or between two events of a
/// run's stream) (a verification, an AgentAssistant, an AgentCron), whatever the request timeout.
pub const CALL_TIMEOUT_CAP: Duration = Duration::from_secs(30);

/// The agent server client of a verification at `url`: `key` as
/// `X-Api-Key`, `timeout` for each request and between two events of a
/// stream, connecting within at most [`CONNECT_TIMEOUT`]. Shared by the
/// operator and `agentctl apply --wait`. It does not check the URL against
/// the operator's `--allowed-hosts` ([`crate::allowlist`]): the operator
/// does that before calling it, and `agentctl`, run by a user with the
/// user's own credentials, calls the URL the user's deployment names.
///
/// Errors: the URL or the key is not usable ([`super::Error::InvalidConfig`]).
pub fn agent_server_client(
    url: String,
    key: Option<secrecy::SecretString>,
    timeout: Duration,
) -> Result<super::AgentServerClient, super::Error> {
    let mut config = super::AgentServerConfig::new(url);
    config.api_key = key;
    config.connect_timeout = CONNECT_TIMEOUT.min(timeout);
    config.request_timeout = timeout;
    config.stream_idle_timeout = timeout;
    super::AgentServerClient::new(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn a_pass_admitted_for_no_call_takes_a_slot_and_no_token() {
        let limits = Limits::new(&VerifyConfig {
            requests_per_second: 0.001,
            burst: 1,
            concurrency: 1,
            ..Default::default()
        });
        let suite = limits.admit("a", "server-1", 0).expect("a slot");
        assert!(limits.admit("b", "server-1", 0).is_err(), "one slot");
        drop(suite);
        drop(
            limits
                .admit("b", "server-1", 1)
                .expect("the token is still there"),
        );
        assert!(limits.admit("c", "server-1", 1).is_err(), "now it is spent");
    }

    #[test]
    fn the_limits_defer_instead_of_waiting() {
        let limits = Limits::new(&VerifyConfig {
            requests_per_second: 1.0,
            burst: 2,
            concurrency: 1,
            ..Default::default()
        });
        let first = limits
            .admit("a", "server-1", 2)
            .expect("the burst admits one verification");
        assert!(limits.admit("b", "server-1", 1).is_err(), "one at a time");
        drop(first);
        let Err(Deferred(wait)) = limits.admit("b", "server-1", 2) else {
            panic!("the bucket is empty");
        };
        assert!(wait > Duration::ZERO && wait <= S(3), "{wait:?}");
        assert_eq!(limits.backlog(), 1);
        let unlimited = Limits::new(&VerifyConfig {
            requests_per_second: 0.0,
            ..Default::default()
        });
        for _ in 0..50 {
            drop(unlimited.admit("a", "server-1", 2).expect("no rate limit"));
        }
        assert_eq!(unlimited.backlog(), 0);
    }

    #[test]
    fn deferrals_spread_over_the_backlog() {
        // 1 call per second, no burst to speak of: a fleet of 20 that all want
        // to verify at once comes back spread over about 20 verifications'
        // worth of tokens, not all after the bucket's next token.
        let limits = Limits::new(&VerifyConfig {
            requests_per_second: 1.0,
            burst: 2,
            concurrency: 100,
            ..Default::default()
        });
        let mut waits = Vec::new();
        for i in 0..20 {
            if let Err(Deferred(w)) = limits.admit(&format!("obj-{i}"), "server-1", 2) {
                waits.push(w);
            }
        }
        assert_eq!(waits.len(), 19, "one fits the burst");
        assert_eq!(limits.backlog(), 19);
        let late = waits.iter().filter(|w| **w > S(10)).count();
        assert!(late >= 2, "spread over the backlog: {waits:?}");
        assert!(waits.iter().all(|w| *w <= S(2 + 2 * 19)), "{waits:?}");
        // An admitted object leaves the backlog.
        let again = Limits::new(&VerifyConfig::default());
        drop(again.admit("x", "server-1", 2).unwrap());
        assert_eq!(again.backlog(), 0);
    }

    #[test]
    fn each_agent_server_has_its_own_bucket() {
        // A burst of 2 calls per server: the first server's bucket is spent by
        // one pass, and another server's passes are admitted all the same; a
        // server's backlog counts its own objects only.
        let limits = Limits::new(&VerifyConfig {
            requests_per_second: 1.0,
            burst: 2,
            concurrency: 100,
            ..Default::default()
        });
        drop(limits.admit("a-0", "server-a", 2).expect("a's burst"));
        for i in 1..=10 {
            let Err(Deferred(w)) = limits.admit(&format!("a-{i}"), "server-a", 2) else {
                panic!("server-a's bucket is spent");
            };
            assert!(w <= S(2 + 2 * 10), "{w:?}");
        }
        for server in ["server-b", "server-c", "server-d"] {
            drop(
                limits
                    .admit(&format!("{server}-obj"), server, 2)
                    .expect("a bucket of its own"),
            );
        }
        assert_eq!(limits.backlog(), 10, "only server-a's objects wait");
        // server-b's next pass waits for server-b's tokens, spread over its own
        // backlog (itself), not over server-a's ten.
        let Err(Deferred(w)) = limits.admit("b-1", "server-b", 2) else {
            panic!("server-b's bucket is spent");
        };
        assert!(w <= S(3), "spread over server-b's backlog only: {w:?}");
    }

    #[test]
    fn a_slot_deferral_follows_the_measured_hold_of_a_slot() {
        // One slot, no rate limit. Before any pass has released a slot, a
        // deferred pass comes back after SLOT_WAIT; once passes are seen to
        // hold a slot for tens of milliseconds (an AgentAssistant's GET and
        // POST), a burst of deferred passes comes back at that pace, spread
        // over the backlog, instead of seconds per object waiting.
        let limits = Limits::new(&VerifyConfig {
            requests_per_second: 0.0,
            concurrency: 1,
            ..Default::default()
        });
        let first = limits.admit("a", "server-1", 2).expect("a free slot");
        let Err(Deferred(w)) = limits.admit("b", "server-1", 2) else {
            panic!("the only slot is held");
        };
        assert!(w >= S(2), "nothing measured yet: {w:?}");
        std::thread::sleep(Duration::from_millis(30));
        drop(first);
        let hold = limits.hold();
        assert!(hold >= Duration::from_millis(20) && hold < S(1), "{hold:?}");
        let held = limits.admit("a", "server-1", 2).expect("free again");
        let mut waits = Vec::new();
        for i in 0..20 {
            let Err(Deferred(w)) = limits.admit(&format!("obj-{i}"), "server-2", 2) else {
                panic!("the only slot is held");
            };
            waits.push(w);
        }
        drop(held);
        let backlog = limits.backlog() as u32;
        assert!(
            waits
                .iter()
                .all(|w| *w >= hold && *w <= hold * (backlog + 1)),
            "{hold:?} {waits:?}"
        );
        assert!(waits.iter().any(|w| *w < S(2)), "{waits:?}");
    }
}
