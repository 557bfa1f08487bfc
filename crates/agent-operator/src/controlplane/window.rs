//! The slow start of an undeclared budget: how many requests of one
//! control plane may be in flight at once ([`Window`]), grown by answers
//! that succeeded and dropped back to one by an answer that says the
//! service is struggling.
//!
//! Why: until the control plane has answered, the operator does not know
//! whether it is already throttled (a restart or a failover while the
//! workspace is at its limit, a fleet applied at once). Every request in
//! flight when the first 429 comes back reaches the service during its
//! `Retry-After`; a token bucket alone bounds requests per second, not
//! requests at once, so a full bucket lets its whole burst go before any
//! answer. The window bounds the second: when a throttle begins, at most
//! [`Window::limit`] requests are in flight, 1 before the first answer,
//! 2 after one success, and never more than [`MAX_WINDOW`].
//!
//! What is taken from where:
//! - **TCP slow start and Reno** (RFC 5681): the window starts at one
//!   request and grows by one per successful answer (so it doubles per
//!   round trip) up to a threshold, then by `1 / window` per answer (one
//!   per round trip, congestion avoidance); a loss, here a 429, 502, 503,
//!   504 or timeout, sets the threshold to half the window and the window
//!   back to one, as TCP does after a retransmission timeout (RFC 5681
//!   §3.1: `cwnd = 1`), not to half (fast recovery needs duplicate ACKs,
//!   which an HTTP client does not get).
//! - **Netflix `concurrency-limits`' `AIMDLimit`**: the window grows only
//!   while it is in use (`in_flight * 2 >= limit`), so a budget that sends
//!   one request at a time does not build up a window of sixteen it would
//!   let go at once later; there it stays at 3.
//! - **Not taken**: the latency-driven limits (Netflix `Vegas` and
//!   `Gradient2`, Envoy's adaptive concurrency filter, which pins the
//!   concurrency to a small minimum while it measures the minimum round
//!   trip time). The control plane's latency is mostly its own work (a
//!   create takes longer than a read), and its limits are per request, not
//!   per queue, so a latency gradient would read throttling where there is
//!   none. client-go has no client-side concurrency limit (a token bucket
//!   of 5 per second, burst 10, like the budget's bucket) and relies on
//!   API Priority and Fairness on the server, which the control plane does
//!   not have.
//!
//! Hand-rolled, not a crate: the adaptive limiters on crates.io
//! (`tower-acc`, `tower-resilience-adaptive`, `rate_limiter_aimd`) are
//! tower or reqwest middleware that decide alone, while the window must be
//! decided under the same lock as the budget's bucket and its
//! `Retry-After` pause (one decision: paused? a slot? a token?), and
//! their loss reaction is multiplicative (× 0.5 to × 0.9), where a throttle
//! at start needs the window at one. The rules are the few lines below,
//! table-tested.

/// Requests in flight a window starts with and falls back to.
pub const START_WINDOW: f64 = 1.0;
/// Largest window: what may be in flight when a throttle begins after a
/// long healthy run (at the default ceiling of 20 requests per second, 16
/// in flight is a latency of 800 ms per request).
pub const MAX_WINDOW: f64 = 16.0;
/// Lowest slow-start threshold a slowdown sets.
pub const MIN_THRESHOLD: f64 = 2.0;

/// Requests of one undeclared budget that may be in flight at once.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    /// Current window, requests (fractional in congestion avoidance).
    size: f64,
    /// Slow-start threshold: below it the window grows by one per answer.
    threshold: f64,
}

impl Default for Window {
    fn default() -> Self {
        Self {
            size: START_WINDOW,
            threshold: MAX_WINDOW,
        }
    }
}

impl Window {
    /// Requests that may be in flight at once (at least 1).
    pub fn limit(&self) -> u32 {
        // The size stays within START_WINDOW..=MAX_WINDOW.
        self.size.floor().max(1.0) as u32
    }

    /// A successful answer, `in_flight` the requests in flight with it
    /// (itself included): one more request per answer below the
    /// threshold, `1 / window` above it, and nothing when less than half
    /// the window was in use.
    pub fn on_success(&mut self, in_flight: u32) {
        if f64::from(in_flight) * 2.0 < self.size {
            return;
        }
        let step = if self.size < self.threshold {
            1.0
        } else {
            1.0 / self.size
        };
        self.size = (self.size + step).min(MAX_WINDOW);
    }

    /// A 429, 502, 503, 504 or timeout: back to one request; the first of
    /// an episode (`new_episode`, the budget's decrease hold) also sets the
    /// threshold to half the window it had.
    pub fn on_slowdown(&mut self, new_episode: bool) {
        if new_episode {
            self.threshold = (self.size / 2.0).max(MIN_THRESHOLD);
        }
        self.size = START_WINDOW;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Successes answered with `in_flight` each; the limits after each.
    fn grow(w: &mut Window, in_flight: &[u32]) -> Vec<u32> {
        in_flight
            .iter()
            .map(|n| {
                w.on_success(*n);
                w.limit()
            })
            .collect()
    }

    #[test]
    fn the_window_grows_by_one_per_answer_while_in_use() {
        let cases: &[(&str, &[u32], &[u32])] = &[
            ("alone at start: one, then two", &[1], &[2]),
            (
                "always full: +1 per answer",
                &[1, 2, 3, 4, 5],
                &[2, 3, 4, 5, 6],
            ),
            (
                "one at a time: stops at 3",
                &[1, 1, 1, 1, 1],
                &[2, 3, 3, 3, 3],
            ),
            (
                "two at a time: stops at 5",
                &[1, 2, 2, 2, 2],
                &[2, 3, 4, 5, 5],
            ),
        ];
        for (what, in_flight, limits) in cases {
            let mut w = Window::default();
            assert_eq!(w.limit(), 1, "{what}: starts at one");
            assert_eq!(grow(&mut w, in_flight), *limits, "{what}");
        }
    }

    #[test]
    fn the_window_never_exceeds_its_maximum() {
        let mut w = Window::default();
        for _ in 0..1_000 {
            w.on_success(MAX_WINDOW as u32);
        }
        assert_eq!(w.limit(), MAX_WINDOW as u32);
    }

    #[test]
    fn a_slowdown_drops_to_one_and_halves_the_threshold_once_per_episode() {
        let mut w = Window::default();
        grow(&mut w, &[1, 2, 3, 4, 5, 6, 7]); // 8
        assert_eq!(w.limit(), 8);
        w.on_slowdown(true);
        assert_eq!(w.limit(), 1, "back to one");
        // Later answers of the same burst leave the threshold at 4.
        w.on_slowdown(false);
        w.on_slowdown(false);
        // Slow start again up to 4, then one per window of answers.
        assert_eq!(grow(&mut w, &[1, 2, 3]), vec![2, 3, 4]);
        assert_eq!(grow(&mut w, &[4, 4, 4, 4, 4]), vec![4, 4, 4, 4, 5]);
    }

    #[test]
    fn the_threshold_stays_at_least_two() {
        let mut w = Window::default();
        w.on_slowdown(true);
        w.on_slowdown(true);
        assert_eq!(grow(&mut w, &[1, 2]), vec![2, 2], "above 2: 1/window");
    }
}
