//! Retry policy of the control plane client: which requests are retried,
//! how long to wait, and when to give up.
//!
//! Only GET and DELETE are retried ([`super::Operation::is_retried`]), and
//! only on transient failures ([`Error::is_transient`]: timeouts, transport
//! errors, 5xx, 429/503). Waits grow exponentially with jitter (the `backon`
//! crate) up to a cap, are never shorter than a `Retry-After` the service sent
//! (docs/control-plane-api.md "Errors": "a robust client honours `Retry-After` when a 429 or 503
//! carries one"), and stop at a budget of attempts and of time.

use std::time::Duration;

use backon::ExponentialBuilder;

use super::error::Error;

/// Default total number of attempts of a retried request (1 try + 3 retries).
pub const DEFAULT_MAX_ATTEMPTS: u32 = 4;
/// Default time budget: no retry starts later than this after the first
/// attempt began.
pub const DEFAULT_MAX_ELAPSED: Duration = Duration::from_secs(30);
/// Default wait before the first retry (before jitter).
pub const DEFAULT_INITIAL_BACKOFF: Duration = Duration::from_millis(200);
/// Default cap of the exponential wait (before jitter).
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(5);

/// How GET and DELETE requests are retried. POST and PATCH are never retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts of one request, first try included; `1` (or `0`)
    /// disables retries. Default [`DEFAULT_MAX_ATTEMPTS`].
    pub max_attempts: u32,
    /// Time budget: a retry is only started when it would begin within this
    /// duration of the first attempt's start (including a `Retry-After` wait).
    /// The last attempt itself is bounded by the per-request timeout, so a
    /// call lasts at most about `max_elapsed + timeout`. Default
    /// [`DEFAULT_MAX_ELAPSED`].
    pub max_elapsed: Duration,
    /// Wait before the first retry; each later wait doubles. Default
    /// [`DEFAULT_INITIAL_BACKOFF`].
    pub initial_backoff: Duration,
    /// Cap of the doubling wait. Jitter then adds a uniform random part of up
    /// to the same again, so one wait is at most `2 × max_backoff` unless a
    /// longer `Retry-After` asks for more. Default [`DEFAULT_MAX_BACKOFF`].
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            max_elapsed: DEFAULT_MAX_ELAPSED,
            initial_backoff: DEFAULT_INITIAL_BACKOFF,
            max_backoff: DEFAULT_MAX_BACKOFF,
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries.
    pub const fn never() -> Self {
        Self {
            max_attempts: 1,
            max_elapsed: Duration::ZERO,
            initial_backoff: DEFAULT_INITIAL_BACKOFF,
            max_backoff: DEFAULT_MAX_BACKOFF,
        }
    }

    /// The exponential backoff with jitter of this policy (factor 2,
    /// `max_attempts - 1` retries).
    pub fn backoff(&self) -> ExponentialBuilder {
        ExponentialBuilder::new()
            .with_jitter()
            .with_factor(2.0)
            .with_min_delay(self.initial_backoff)
            .with_max_delay(self.max_backoff.max(self.initial_backoff))
            .with_max_times(self.max_attempts.saturating_sub(1) as usize)
    }

    /// The wait before the next attempt after `error`, or `None` to give up.
    ///
    /// `backoff` is the backoff's next delay (`None` once the attempts are
    /// used up); `elapsed` is the time since the first attempt began. The
    /// wait is the larger of the backoff and the error's `Retry-After`, so a
    /// retry is never sent before `Retry-After` has passed; it is `None` when
    /// the error is not transient, the attempts are used up, or the retry
    /// would begin after [`RetryPolicy::max_elapsed`].
    pub fn next_delay(
        &self,
        error: &Error,
        backoff: Option<Duration>,
        elapsed: Duration,
    ) -> Option<Duration> {
        if !error.is_transient() {
            return None;
        }
        let delay = match error.retry_after() {
            Some(ra) => backoff?.max(ra),
            None => backoff?,
        };
        (elapsed.saturating_add(delay) <= self.max_elapsed).then_some(delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use backon::BackoffBuilder;

    fn rate_limited(secs: u64) -> Error {
        Error::RateLimited {
            status: 429,
            retry_after: Some(Duration::from_secs(secs)),
        }
    }

    #[test]
    fn backoff_doubles_with_jitter_and_cap_and_counts_attempts() {
        let p = RetryPolicy {
            max_attempts: 6,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(400),
            ..Default::default()
        };
        let delays: Vec<Duration> = p.backoff().build().collect();
        assert_eq!(delays.len(), 5, "max_attempts - 1 retries");
        let bases = [100, 200, 400, 400, 400];
        for (d, base) in delays.iter().zip(bases) {
            let base = Duration::from_millis(base);
            assert!(*d >= base && *d <= base * 2, "{d:?} vs base {base:?}");
        }
        assert_eq!(RetryPolicy::never().backoff().build().count(), 0);
    }

    #[test]
    fn retry_after_is_a_floor_and_the_budget_a_ceiling() {
        let p = RetryPolicy::default();
        let ms = Duration::from_millis;
        assert_eq!(
            p.next_delay(&rate_limited(3), Some(ms(200)), ms(0)),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            p.next_delay(&rate_limited(0), Some(ms(200)), ms(0)),
            Some(ms(200))
        );
        assert_eq!(
            p.next_delay(&Error::Timeout, Some(ms(200)), ms(0)),
            Some(ms(200))
        );
        assert_eq!(
            p.next_delay(&Error::Timeout, None, ms(0)),
            None,
            "attempts used up"
        );
        assert_eq!(
            p.next_delay(&rate_limited(31), Some(ms(200)), ms(0)),
            None,
            "a Retry-After beyond the budget gives up at once"
        );
        assert_eq!(
            p.next_delay(&Error::Timeout, Some(ms(200)), Duration::from_secs(30)),
            None
        );
        let not_found = Error::NotFound { detail: "x".into() };
        assert_eq!(p.next_delay(&not_found, Some(ms(200)), ms(0)), None);
    }
}
