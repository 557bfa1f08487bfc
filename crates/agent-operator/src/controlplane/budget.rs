//! One shared, adaptive request budget per control plane: every resource of
//! one AgentControlPlane draws from the same token bucket, a 429 or 503 slows
//! the whole bucket down (not only the request that got it), and the rate
//! recovers gradually.
//!
//! The control plane's limits are not published (docs/control-plane-api.md
//! "Rate limits"; a 429 or 503 may carry `Retry-After`: "Errors"), so the
//! budget discovers them with
//! additive-increase / multiplicative-decrease (AIMD, as TCP congestion
//! control does):
//! - the bucket starts at [`START_RATE`] requests per second (or the declared
//!   ceiling if lower) and adds about 1 request per second for each second of
//!   successful use ([`Budget::on_success`]: `+ADDITIVE_INCREASE / rate` per
//!   answer), up to the ceiling: `spec.requestsPerSecond` of the
//!   AgentControlPlane, or [`DEFAULT_CEILING`] when it is unset;
//! - a 429 or 503 halves the rate (at most once per [`DECREASE_HOLD`], since a
//!   burst of in-flight requests all get the same answer), empties the bucket,
//!   and, when the answer carries `Retry-After`, stops *every* request of the
//!   control plane until it has passed;
//! - a declared limit starts at the ceiling: the user said what the service
//!   accepts;
//! - an undeclared budget also bounds its requests **in flight** with a slow
//!   start ([`super::window`]): one before the first answer, one more per
//!   successful answer while the window is in use, at most
//!   [`super::window::MAX_WINDOW`]; a 429, 502, 503, 504 or timeout drops
//!   it back to one. Until the control plane has answered, the operator
//!   does not know whether it is throttled, and a bucket lets its whole
//!   burst go before the first 429 could stop the rest.
//!
//! Every request holds a [`Slot`] from its token to its answer (counted in
//! flight; dropped, also by a cancelled pass, it frees its place in the
//! window). The client checks the slot ([`Slot::confirm`]) right before it
//! sends, after every other bucket gave its token: a `Retry-After` that
//! began while the request waited stops it there, so no request leaves
//! after the client received a 429 with a pause still running.
//!
//! Requests have a [`Priority`]: while a mutation (create, patch, redeploy,
//! delete) waits for a token, reads (polls, drift checks, lookups) wait
//! behind it, so that changes go first when the budget is short.
//!
//! Why not `governor`: its quotas are fixed when the limiter is built, and an
//! adaptive rate needs a bucket whose refill rate changes with every answer
//! (rebuilding a governor limiter would reset its state and lose the pause).
//! The bucket below is the textbook one (refill `rate × elapsed`, capped at
//! `burst`), a few lines under one mutex, with the window and the pause
//! under the same lock.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::limit::RateLimit;
use super::window::Window;

/// Ceiling of an AgentControlPlane without `requestsPerSecond`: 20 requests
/// per second, with a bucket of [`DEFAULT_BURST`]. The service's limit is not
/// documented; AIMD finds a lower one by itself.
pub const DEFAULT_CEILING: f64 = 20.0;
/// Bucket size (requests at once after an idle period) without `burst`.
pub const DEFAULT_BURST: u32 = 10;
/// Share of a declared `requestsPerSecond` the budget uses: the service's
/// bucket and ours refill on different clocks, and requests arrive with
/// varying latency, so sending at exactly the declared rate still meets an
/// occasional 429; 5 % below it meets none.
pub const DECLARED_MARGIN: f64 = 0.95;
/// Rate (requests per second) an undeclared budget starts from.
pub const START_RATE: f64 = 10.0;
/// Lowest rate a run of 429s can bring the budget to (requests per second).
pub const MIN_RATE: f64 = 0.2;
/// Requests per second added for each second of successful use.
pub const ADDITIVE_INCREASE: f64 = 1.0;
/// Factor applied to the rate on a 429 or 503.
pub const MULTIPLICATIVE_DECREASE: f64 = 0.5;
/// After a decrease, further 429s within this time do not decrease again
/// (they answer requests sent before the first decrease took effect).
pub const DECREASE_HOLD: Duration = Duration::from_secs(1);
/// Longest `Retry-After` honoured for the whole control plane; a larger value
/// is capped (a broken header must not stop the operator for days).
pub const MAX_PAUSE: Duration = Duration::from_secs(600);

/// When a request gave up waiting for a place in a full window
/// ([`Budget::acquire_within`]), how soon it may try again.
pub const WINDOW_RETRY: Duration = Duration::from_secs(1);

/// Which requests go first when the budget is short.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priority {
    /// Create, patch, redeploy, delete: a user asked for a change.
    Mutation,
    /// Polls, drift checks, lookups: can wait behind a mutation.
    Read,
}

struct State {
    /// Highest rate, requests per second.
    ceiling: f64,
    /// Bucket capacity, requests.
    burst: f64,
    /// Current refill rate, requests per second (MIN_RATE..=ceiling).
    rate: f64,
    /// Tokens in the bucket (may be fractional).
    tokens: f64,
    /// When `tokens` was last refilled.
    refilled: Instant,
    /// No request starts before this instant (a `Retry-After`).
    paused_until: Option<Instant>,
    /// When the rate was last decreased.
    decreased: Option<Instant>,
    /// Answers 429/503 seen (for tests and logs).
    throttled: u64,
    /// Answers that slowed the budget without pausing it (502, 504,
    /// timeouts).
    slowed: u64,
    /// What the last answer that slowed the budget down said (its stable
    /// summary), until an answer that does not slow it down.
    cause: Option<String>,
    /// No limit is declared: the requests in flight at once (the slow
    /// start); `None` for a declared limit.
    window: Option<Window>,
    /// Requests that took a token and have not ended ([`Slot`]s alive).
    in_flight: u32,
}

impl State {
    /// True within [`DECREASE_HOLD`] of the last decrease.
    fn held(&self, now: Instant) -> bool {
        self.decreased
            .is_some_and(|at| now.saturating_duration_since(at) < DECREASE_HOLD)
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.refilled = now;
    }
}

/// The budget of one control plane, shared by every client built for it
/// (cheap to clone; clones share the bucket).
#[derive(Clone)]
pub struct Budget {
    state: Arc<Mutex<State>>,
    /// Mutations waiting for a token right now.
    mutations_waiting: Arc<AtomicUsize>,
    /// Woken when a place in the window may have become free.
    freed: Arc<Notify>,
}

impl fmt::Debug for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.lock();
        f.debug_struct("Budget")
            .field("ceiling", &s.ceiling)
            .field("rate", &s.rate)
            .field("burst", &s.burst)
            .field("window", &s.window.map(|w| w.limit()))
            .field("in_flight", &s.in_flight)
            .finish_non_exhaustive()
    }
}

/// Removes one waiting mutation from the count when dropped (also when the
/// waiting future is cancelled).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Budget {
    /// A budget with `limit` as its ceiling (the AgentControlPlane's
    /// `requestsPerSecond` and `burst`), or the defaults
    /// ([`DEFAULT_CEILING`], [`DEFAULT_BURST`], starting at [`START_RATE`])
    /// when `None`.
    pub fn new(limit: Option<RateLimit>) -> Self {
        let (ceiling, burst, start) = Self::shape(limit);
        Self {
            state: Arc::new(Mutex::new(State {
                ceiling,
                burst,
                rate: start,
                tokens: burst.min(start.max(1.0)),
                refilled: Instant::now(),
                paused_until: None,
                decreased: None,
                throttled: 0,
                slowed: 0,
                cause: None,
                window: limit.is_none().then(Window::default),
                in_flight: 0,
            })),
            mutations_waiting: Arc::new(AtomicUsize::new(0)),
            freed: Arc::new(Notify::new()),
        }
    }

    /// (ceiling, burst, start rate) of a limit.
    fn shape(limit: Option<RateLimit>) -> (f64, f64, f64) {
        match limit {
            Some(l) if l.requests_per_second.is_finite() && l.requests_per_second > 0.0 => {
                let ceiling = l.requests_per_second * DECLARED_MARGIN;
                (ceiling, f64::from(l.burst.max(1)), ceiling)
            }
            _ => (
                DEFAULT_CEILING,
                f64::from(DEFAULT_BURST),
                START_RATE.min(DEFAULT_CEILING),
            ),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Changes the ceiling (the AgentControlPlane's spec changed); the
    /// current rate is kept if below the new ceiling.
    pub fn set_limit(&self, limit: Option<RateLimit>) {
        let (ceiling, burst, start) = Self::shape(limit);
        let mut s = self.lock();
        match (limit, s.window) {
            (None, None) => s.window = Some(Window::default()),
            (Some(_), Some(_)) => s.window = None,
            _ => {}
        }
        if (s.ceiling, s.burst) == (ceiling, burst) {
            return;
        }
        s.ceiling = ceiling;
        s.burst = burst;
        s.rate = if limit.is_some() {
            ceiling
        } else {
            s.rate.min(ceiling).max(start.min(s.rate))
        };
        s.tokens = s.tokens.min(burst);
    }

    /// The current rate, requests per second.
    pub fn rate(&self) -> f64 {
        self.lock().rate
    }

    /// Answers 429/503 seen so far.
    pub fn throttled(&self) -> u64 {
        self.lock().throttled
    }

    /// True while a `Retry-After` pause is pending.
    pub fn paused(&self) -> bool {
        !self.pause_left().is_zero()
    }

    /// What is left of a pending `Retry-After` pause (zero: none).
    pub fn pause_left(&self) -> Duration {
        let now = Instant::now();
        self.lock()
            .paused_until
            .map_or(Duration::ZERO, |until| until.saturating_duration_since(now))
    }

    /// The highest rate the budget may reach, requests per second.
    pub fn ceiling(&self) -> f64 {
        self.lock().ceiling
    }

    /// Answers that slowed the budget without a pause (502, 504, timeouts)
    /// so far.
    pub fn slowed(&self) -> u64 {
        self.lock().slowed
    }

    /// Requests that took a token and have not ended.
    pub fn in_flight(&self) -> u32 {
        self.lock().in_flight
    }

    /// How many requests may be in flight at once: the slow start's
    /// window of an undeclared budget; `None` for a declared one.
    pub fn window(&self) -> Option<u32> {
        self.lock().window.map(|w| w.limit())
    }

    /// Whether a request of `priority` may go now: it took a token and a
    /// place in the window ([`Take::Now`], counted in flight), or how long
    /// to wait, or the window is full.
    fn try_take(&self, priority: Priority, now: Instant) -> Take {
        let mut s = self.lock();
        if let Some(until) = s.paused_until {
            if until > now {
                return Take::Wait(until - now);
            }
            // Tokens accumulate from the end of the pause, not during it.
            s.paused_until = None;
            s.refilled = s.refilled.max(until);
        }
        s.refill(now);
        let token_wait = |tokens: f64, rate: f64| {
            Duration::from_secs_f64(((1.0 - tokens) / rate).clamp(0.001, 60.0))
        };
        if priority == Priority::Read && self.mutations_waiting.load(Ordering::SeqCst) > 0 {
            // Leave the next token to the waiting mutation.
            return Take::Wait(token_wait(s.tokens.min(0.0), s.rate));
        }
        if s.window.is_some_and(|w| s.in_flight >= w.limit()) {
            return Take::Full;
        }
        if s.tokens >= 1.0 {
            s.tokens -= 1.0;
            s.in_flight += 1;
            Take::Now
        } else {
            Take::Wait(token_wait(s.tokens, s.rate))
        }
    }

    /// How long until a request of `priority` could be sent (zero: a token
    /// is there now), without taking a token: the rest of a `Retry-After`
    /// pause, or the time the bucket needs to refill one token. Used before
    /// a reconcile pass takes a permit, so that a paused or short plane
    /// requeues its objects instead of holding permits while it waits.
    pub fn ready_in(&self, priority: Priority) -> Duration {
        self.ready_in_at(priority, Instant::now())
    }

    fn ready_in_at(&self, priority: Priority, now: Instant) -> Duration {
        let s = self.lock();
        if let Some(until) = s.paused_until
            && until > now
        {
            return until - now;
        }
        let from = s.paused_until.map_or(s.refilled, |u| s.refilled.max(u));
        let elapsed = now.saturating_duration_since(from).as_secs_f64();
        let mut tokens = (s.tokens + elapsed * s.rate).min(s.burst);
        if priority == Priority::Read && self.mutations_waiting.load(Ordering::SeqCst) > 0 {
            tokens = tokens.min(0.0);
        }
        if tokens >= 1.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(((1.0 - tokens) / s.rate).clamp(0.001, MAX_PAUSE.as_secs_f64()))
        }
    }

    /// Waits until a request of `priority` may be sent and takes its token
    /// and a place in the window: the [`Slot`] to hold until the answer.
    /// Cancellation-safe.
    pub async fn acquire(&self, priority: Priority) -> Slot {
        match self.acquire_within(priority, None).await {
            Ok((_, slot)) => slot,
            // Without a limit the wait always ends with a slot.
            Err(_) => unreachable!("acquire_within without a limit gave up"),
        }
    }

    /// Like [`Budget::acquire`], but gives up instead of waiting longer
    /// than `max` in all (`None`: no limit).
    ///
    /// Returns the time waited and the [`Slot`]; or `Err(retry_in)`,
    /// without a token, when the next one (or the end of a pause) is
    /// further away than the rest of `max`, or the window stayed full for
    /// it ([`WINDOW_RETRY`]). Cancellation-safe.
    pub async fn acquire_within(
        &self,
        priority: Priority,
        max: Option<Duration>,
    ) -> Result<(Duration, Slot), Duration> {
        let _waiting = (priority == Priority::Mutation).then(|| {
            self.mutations_waiting.fetch_add(1, Ordering::SeqCst);
            Waiting(&self.mutations_waiting)
        });
        let start = Instant::now();
        loop {
            // Registered before looking, so that a place freed between the
            // look and the wait is not missed.
            let freed = self.freed.notified();
            let mut freed = std::pin::pin!(freed);
            freed.as_mut().enable();
            let wait = match self.try_take(priority, Instant::now()) {
                Take::Now => return Ok((start.elapsed(), Slot::new(self.clone()))),
                Take::Wait(wait) => Some(wait),
                Take::Full => None,
            };
            let left = max.map(|m| m.saturating_sub(start.elapsed()));
            match (wait, left) {
                (Some(wait), Some(left)) if wait > left => return Err(wait),
                (Some(wait), _) => tokio::time::sleep(wait).await,
                (None, Some(left)) => {
                    if tokio::time::timeout(left, freed).await.is_err() {
                        return Err(WINDOW_RETRY);
                    }
                }
                (None, None) => freed.await,
            }
        }
    }

    /// An answer that was not a 429/503: the rate grows by
    /// `ADDITIVE_INCREASE / rate` (about `ADDITIVE_INCREASE` per second at
    /// full use), up to the ceiling.
    pub fn on_success(&self) {
        let mut s = self.lock();
        s.cause = None;
        if s.rate < s.ceiling {
            s.rate = (s.rate + ADDITIVE_INCREASE / s.rate).min(s.ceiling);
        }
        let in_flight = s.in_flight;
        if let Some(window) = s.window.as_mut() {
            window.on_success(in_flight);
        }
        drop(s);
        self.freed.notify_waiters();
    }

    /// Records what the answer that slowed the budget down said (a short
    /// text that is the same on every retry, without secrets: the
    /// client's stable summary of the error), so that a request the budget
    /// holds back can name the service's answer as the cause
    /// ([`Budget::cause`]). Kept until [`Budget::on_success`].
    pub fn note_cause(&self, summary: String) {
        self.lock().cause = Some(summary);
    }

    /// What the last answer that slowed the budget down said
    /// ([`Budget::note_cause`]), unless an answer that did not slow it
    /// down came after it.
    pub fn cause(&self) -> Option<String> {
        self.lock().cause.clone()
    }

    /// A 429 or 503: halves the rate (once per [`DECREASE_HOLD`]), empties the
    /// bucket, drops the window of an undeclared budget to one, and pauses
    /// every request until `retry_after` (capped at [`MAX_PAUSE`]) has
    /// passed. Called as soon as the answer's status and headers are there,
    /// before its body is read.
    pub fn on_throttled(&self, retry_after: Option<Duration>) {
        self.on_throttled_at(retry_after, Instant::now());
    }

    /// A 502, a 504 or a timeout: the service (or a proxy in front of it)
    /// is struggling, so the rate halves as on a 429 (once per
    /// [`DECREASE_HOLD`]) and the window drops to one, but nothing is
    /// paused and the tokens in the bucket stay: it slows the budget down,
    /// it does not stop it.
    pub fn on_slowdown(&self) {
        let now = Instant::now();
        let mut s = self.lock();
        s.slowed += 1;
        let new_episode = !s.held(now);
        if new_episode {
            s.rate = (s.rate * MULTIPLICATIVE_DECREASE).max(MIN_RATE);
            s.decreased = Some(now);
        }
        if let Some(window) = s.window.as_mut() {
            window.on_slowdown(new_episode);
        }
        tracing::debug!(
            rate = s.rate,
            "control plane struggling: budget slowed down"
        );
    }

    fn on_throttled_at(&self, retry_after: Option<Duration>, now: Instant) {
        let mut s = self.lock();
        s.throttled += 1;
        let new_episode = !s.held(now);
        if new_episode {
            s.rate = (s.rate * MULTIPLICATIVE_DECREASE).max(MIN_RATE);
            s.decreased = Some(now);
            s.tokens = 0.0;
            s.refilled = now;
        }
        if let Some(window) = s.window.as_mut() {
            window.on_slowdown(new_episode);
        }
        if let Some(ra) = retry_after {
            let until = now + ra.min(MAX_PAUSE);
            s.paused_until = Some(s.paused_until.map_or(until, |u| u.max(until)));
        }
        tracing::debug!(
            rate = s.rate,
            retry_after_s = retry_after.map(|d| d.as_secs_f64()),
            in_flight = s.in_flight,
            "control plane throttled: budget slowed down"
        );
    }
}

/// What [`Budget::try_take`] decided.
#[derive(Debug, PartialEq, Eq)]
enum Take {
    /// A token and a place in the window were taken: send.
    Now,
    /// Look again after this long (a pause, the bucket's refill, a
    /// mutation first).
    Wait(Duration),
    /// The window is full: look again when a request ends.
    Full,
}

/// One request of a budget from its token to its answer: counted in
/// flight while it lives; dropped (the answer came, or the request was
/// cancelled), it frees its place in the window.
#[must_use = "the request is counted in flight until the slot is dropped"]
pub struct Slot {
    budget: Budget,
}

impl fmt::Debug for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slot").finish_non_exhaustive()
    }
}

impl Slot {
    fn new(budget: Budget) -> Self {
        Self { budget }
    }

    /// Checked right before the request is sent: `Err(pause_left)` when a
    /// `Retry-After` of the budget began since the slot was taken (the
    /// request must not go; drop the slot).
    pub fn confirm(&self) -> Result<(), Duration> {
        match self.budget.pause_left() {
            left if left.is_zero() => Ok(()),
            left => Err(left),
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut s = self.budget.lock();
        s.in_flight = s.in_flight.saturating_sub(1);
        drop(s);
        self.budget.freed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declared(rps: f64, burst: u32) -> Budget {
        Budget::new(Some(RateLimit {
            requests_per_second: rps,
            burst,
        }))
    }

    /// The wait of a decision that is not [`Take::Now`] (zero for `Now`,
    /// [`Duration::MAX`] for a full window).
    fn wait_of(t: Take) -> Duration {
        match t {
            Take::Now => Duration::ZERO,
            Take::Wait(w) => w,
            Take::Full => Duration::MAX,
        }
    }

    /// Takes one request of `b` at `t`, as [`Budget::acquire`] would; the
    /// slot, or the reason it could not.
    fn take(b: &Budget, p: Priority, t: Instant) -> Result<Slot, Take> {
        match b.try_take(p, t) {
            Take::Now => Ok(Slot::new(b.clone())),
            other => Err(other),
        }
    }

    #[test]
    fn an_undeclared_budget_grows_its_requests_in_flight_from_one() {
        let b = Budget::new(None);
        let t = Instant::now();
        assert_eq!(b.window(), Some(1));
        let first = take(&b, Priority::Read, t).expect("the first goes");
        assert_eq!(
            take(&b, Priority::Mutation, t).unwrap_err(),
            Take::Full,
            "no second before the first answer"
        );
        // A request that ends without an answer (a refused connection, a
        // cancelled pass) frees its place.
        drop(first);
        assert_eq!(b.in_flight(), 0);
        let first = take(&b, Priority::Read, t).unwrap();
        b.on_success();
        drop(first);
        assert_eq!(b.window(), Some(2), "one success: two at once");
        let (x, y) = (take(&b, Priority::Read, t), take(&b, Priority::Read, t));
        assert!(x.is_ok() && y.is_ok());
        assert_eq!(take(&b, Priority::Read, t).unwrap_err(), Take::Full);
        assert_eq!(b.in_flight(), 2);
        // Both answered while both were in flight: four.
        b.on_success();
        b.on_success();
        drop((x, y));
        assert_eq!(b.window(), Some(4));
    }

    #[test]
    fn when_a_throttle_begins_at_most_the_window_is_in_flight_and_it_drops_to_one() {
        // Table: rounds of requests before the first 429 (one request per
        // round, or as many as the window takes), each ended by one
        // success; requests in flight when the 429 comes back.
        let cases: &[(&str, usize, bool, u32)] = &[
            ("at start, before any answer", 0, true, 1),
            ("after one answer", 1, true, 2),
            ("after three rounds, window full", 3, true, 4),
            ("after a hundred answers one at a time", 100, false, 3),
        ];
        for (what, successes, full, in_flight) in cases {
            let b = Budget::new(None);
            let t0 = Instant::now();
            // A second per round: the bucket refills, the window decides.
            for round in 0..*successes {
                let t = t0 + Duration::from_secs(round as u64);
                let mut held = vec![];
                while let Ok(slot) = take(&b, Priority::Read, t) {
                    held.push(slot);
                    if !full {
                        break;
                    }
                }
                b.on_success();
            }
            let t = t0 + Duration::from_secs(*successes as u64);
            let mut sent = vec![];
            while let Ok(slot) = take(&b, Priority::Read, t) {
                sent.push(slot);
            }
            assert_eq!(sent.len() as u32, *in_flight, "{what}: in flight");
            b.on_throttled_at(Some(Duration::from_secs(120)), t);
            assert!(
                sent.iter().all(|s| s.confirm().is_err()),
                "{what}: none not yet sent may go"
            );
            drop(sent);
            assert_eq!(b.window(), Some(1), "{what}: back to one");
            assert!(take(&b, Priority::Mutation, t).is_err(), "{what}: paused");
        }
    }

    #[test]
    fn a_slowdown_or_a_timeout_drops_the_window_to_one_without_a_pause() {
        let b = Budget::new(None);
        let t = Instant::now();
        for _ in 0..5 {
            let s = take(&b, Priority::Read, t).unwrap();
            b.on_success();
            drop(s);
        }
        assert_eq!(b.window(), Some(3));
        b.on_slowdown();
        assert_eq!(b.window(), Some(1));
        let s = take(&b, Priority::Read, t).expect("not paused");
        assert!(s.confirm().is_ok());
    }

    #[test]
    fn a_declared_budget_has_no_window_and_keeps_its_burst() {
        let declared = declared(10.0, 5);
        let t = Instant::now();
        assert_eq!(declared.window(), None);
        let slots: Vec<Slot> = (0..5)
            .map(|i| take(&declared, Priority::Read, t).unwrap_or_else(|e| panic!("{i}: {e:?}")))
            .collect();
        assert_eq!(declared.in_flight(), 5);
        drop(slots);
        // A declared limit removed: the slow start begins; set again: gone.
        declared.set_limit(None);
        assert_eq!(declared.window(), Some(1));
        declared.set_limit(Some(RateLimit {
            requests_per_second: 10.0,
            burst: 5,
        }));
        assert_eq!(declared.window(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_waiting_for_the_window_goes_when_one_ends_or_gives_up() {
        let b = Budget::new(None);
        let first = b.acquire(Priority::Read).await;
        let waiter = {
            let b = b.clone();
            tokio::spawn(async move {
                b.acquire_within(Priority::Read, Some(Duration::from_secs(5)))
                    .await
                    .map(|(waited, _)| waited)
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        b.on_success();
        drop(first);
        let waited = waiter.await.unwrap().expect("went when the first ended");
        assert!(waited >= Duration::from_millis(300), "{waited:?}");
        // Nothing ends within the limit: it gives up, holding nothing.
        let _held = b.acquire(Priority::Read).await;
        let _held2 = b.acquire(Priority::Read).await;
        let started = Instant::now();
        let e = b
            .acquire_within(Priority::Read, Some(Duration::from_secs(5)))
            .await
            .unwrap_err();
        assert_eq!(e, WINDOW_RETRY);
        assert_eq!(started.elapsed(), Duration::from_secs(5));
        assert_eq!(b.in_flight(), 2);
    }

    #[test]
    fn a_declared_limit_starts_at_its_ceiling_and_an_undeclared_one_below() {
        assert_eq!(declared(25.0, 25).rate(), 25.0 * DECLARED_MARGIN);
        assert_eq!(Budget::new(None).rate(), START_RATE);
    }

    #[test]
    fn the_answer_that_slowed_the_budget_is_its_cause_until_a_success() {
        let b = Budget::new(None);
        assert_eq!(b.cause(), None, "a new budget is short of nothing");
        b.note_cause("service unavailable (503)".into());
        b.on_throttled(None);
        assert_eq!(b.cause().as_deref(), Some("service unavailable (503)"));
        b.note_cause("timed out".into());
        assert_eq!(b.cause().as_deref(), Some("timed out"), "the last one");
        b.on_success();
        assert_eq!(b.cause(), None);
    }

    #[test]
    fn success_increases_additively_up_to_the_ceiling() {
        let b = Budget::new(None);
        for _ in 0..10 {
            b.on_success();
        }
        let after_ten = b.rate();
        assert!(
            after_ten > START_RATE && after_ten < START_RATE + 1.1,
            "{after_ten}"
        );
        for _ in 0..10_000 {
            b.on_success();
        }
        assert_eq!(b.rate(), DEFAULT_CEILING);
    }

    #[test]
    fn throttling_halves_once_per_hold_and_pauses_for_retry_after() {
        let b = declared(20.0 / DECLARED_MARGIN, 20);
        let now = Instant::now();
        b.on_throttled_at(Some(Duration::from_secs(2)), now);
        assert!((b.rate() - 10.0).abs() < 1e-9);
        // A second 429 from the same burst does not halve again.
        b.on_throttled_at(None, now + Duration::from_millis(100));
        assert!((b.rate() - 10.0).abs() < 1e-9);
        b.on_throttled_at(None, now + Duration::from_millis(1500));
        assert!((b.rate() - 5.0).abs() < 1e-9);
        assert_eq!(b.throttled(), 3);
        // Nothing may be sent while the Retry-After is pending.
        let wait = wait_of(b.try_take(Priority::Mutation, now + Duration::from_millis(500)));
        assert!(wait >= Duration::from_millis(1400), "{wait:?}");
        // Afterwards requests flow again at the lower rate.
        let later = now + Duration::from_secs(3);
        assert_eq!(b.try_take(Priority::Mutation, later), Take::Now);
    }

    #[test]
    fn the_rate_never_drops_below_the_floor() {
        let b = Budget::new(None);
        let mut t = Instant::now();
        for _ in 0..100 {
            t += DECREASE_HOLD;
            b.on_throttled_at(None, t);
        }
        assert_eq!(b.rate(), MIN_RATE);
    }

    #[test]
    fn reads_wait_behind_a_waiting_mutation() {
        let b = declared(1.0, 1);
        let now = Instant::now();
        assert_eq!(b.try_take(Priority::Read, now), Take::Now);
        b.mutations_waiting.fetch_add(1, Ordering::SeqCst);
        let later = now + Duration::from_secs(2);
        assert!(wait_of(b.try_take(Priority::Read, later)) > Duration::ZERO);
        assert_eq!(b.try_take(Priority::Mutation, later), Take::Now);
    }

    #[test]
    fn a_burst_is_bounded_by_the_bucket() {
        let b = declared(5.0, 3);
        let now = Instant::now();
        let taken = (0..10)
            .filter(|_| b.try_take(Priority::Read, now) == Take::Now)
            .count();
        assert_eq!(taken, 3);
    }

    #[test]
    fn ready_in_tells_the_pause_and_the_refill_without_taking() {
        let b = declared(2.0 / DECLARED_MARGIN, 1);
        let now = Instant::now();
        assert_eq!(b.ready_in_at(Priority::Read, now), Duration::ZERO);
        assert_eq!(
            b.ready_in_at(Priority::Read, now),
            Duration::ZERO,
            "nothing taken"
        );
        assert_eq!(b.try_take(Priority::Read, now), Take::Now);
        let refill = b.ready_in_at(Priority::Read, now);
        assert!(
            refill > Duration::from_millis(400) && refill <= Duration::from_millis(500),
            "{refill:?}"
        );
        b.on_throttled_at(Some(Duration::from_secs(30)), now);
        let paused = b.ready_in_at(Priority::Read, now + Duration::from_secs(10));
        assert_eq!(paused, Duration::from_secs(20));
    }

    #[tokio::test]
    async fn acquire_within_gives_up_instead_of_waiting_out_a_pause() {
        let b = declared(10.0, 1);
        b.on_throttled(Some(Duration::from_secs(600)));
        let started = Instant::now();
        let retry_in = b
            .acquire_within(Priority::Mutation, Some(Duration::from_secs(5)))
            .await
            .unwrap_err();
        assert!(retry_in > Duration::from_secs(590), "{retry_in:?}");
        assert!(
            started.elapsed() < Duration::from_millis(50),
            "returned at once"
        );
        // A short wait is waited out.
        let b = declared(1.0 / DECLARED_MARGIN, 1);
        drop(b.acquire(Priority::Read).await);
        let (waited, _) = b
            .acquire_within(Priority::Read, Some(Duration::from_secs(5)))
            .await
            .unwrap();
        assert!(waited >= Duration::from_millis(900), "{waited:?}");
    }

    #[test]
    fn a_slowdown_halves_without_pausing_or_emptying() {
        let b = declared(20.0 / DECLARED_MARGIN, 5);
        b.on_slowdown();
        assert!((b.rate() - 10.0).abs() < 1e-9);
        assert!(!b.paused());
        assert_eq!(b.try_take(Priority::Read, Instant::now()), Take::Now);
        assert_eq!(b.slowed(), 1);
        assert_eq!(b.throttled(), 0);
    }

    #[tokio::test]
    async fn acquire_spaces_requests_at_the_rate() {
        let b = declared(50.0, 1);
        let start = Instant::now();
        for _ in 0..11 {
            drop(b.acquire(Priority::Read).await);
        }
        // One token at once, then ten at 50 per second: at least 200 ms.
        let elapsed = start.elapsed();
        assert!(elapsed >= Duration::from_millis(190), "{elapsed:?}");
    }
}
