//! Client-side rate limit of one control plane: a token bucket (the
//! `governor` crate, GCRA) shared by every clone of a
//! [`super::ControlPlaneClient`]. Every HTTP attempt, retries included, takes
//! one token before it is sent.
//!
//! The service's limits are not documented (spec "Limits": "Rate limits: not
//! shown"); this limit keeps one operator from flooding a shared control plane
//! and complements honouring `Retry-After` on 429 (facts "Errors").

use std::fmt;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota};

use super::error::Error;

/// A token bucket: `requests_per_second` refill rate, `burst` capacity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateLimit {
    /// Sustained requests per second (> 0, finite; fractions allowed, e.g.
    /// `0.5` = one request every 2 s).
    pub requests_per_second: f64,
    /// Requests allowed at once after an idle period (>= 1).
    pub burst: u32,
}

impl RateLimit {
    /// The interval between two tokens (`1 / requests_per_second`).
    ///
    /// Errors: [`Error::InvalidEndpoint`] when the rate is not a positive
    /// finite number, gives an interval under 1 ns, or `burst` is 0.
    pub fn period(&self) -> Result<Duration, Error> {
        let rps = self.requests_per_second;
        if !(rps.is_finite() && rps > 0.0) {
            return Err(Error::InvalidEndpoint(format!(
                "rate limit: requests_per_second must be a positive number, got {rps}"
            )));
        }
        if self.burst == 0 {
            return Err(Error::InvalidEndpoint(
                "rate limit: burst must be at least 1".into(),
            ));
        }
        Duration::try_from_secs_f64(1.0 / rps)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| {
                Error::InvalidEndpoint(format!(
                    "rate limit: requests_per_second {rps} is out of range"
                ))
            })
    }
}

/// The shared limiter of one client and its clones.
#[derive(Clone)]
pub(crate) struct Limiter(Arc<DefaultDirectRateLimiter>);

impl fmt::Debug for Limiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Limiter")
    }
}

impl Limiter {
    /// Builds the limiter of `limit`. Errors: see [`RateLimit::period`].
    pub(crate) fn new(limit: &RateLimit) -> Result<Self, Error> {
        let period = limit.period()?;
        let burst = NonZeroU32::new(limit.burst).unwrap_or(NonZeroU32::MIN);
        let quota = Quota::with_period(period)
            .ok_or_else(|| Error::InvalidEndpoint("rate limit: zero period".into()))?
            .allow_burst(burst);
        Ok(Self(Arc::new(DefaultDirectRateLimiter::direct(quota))))
    }

    /// Waits until a token is available and takes it.
    pub(crate) async fn acquire(&self) {
        self.0.until_ready().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_limits_are_refused() {
        for (rps, burst) in [
            (0.0, 1),
            (-1.0, 1),
            (f64::NAN, 1),
            (f64::INFINITY, 1),
            (1.0, 0),
        ] {
            let l = RateLimit {
                requests_per_second: rps,
                burst,
            };
            assert!(Limiter::new(&l).is_err(), "{rps} {burst}");
        }
        let l = RateLimit {
            requests_per_second: 0.5,
            burst: 1,
        };
        assert_eq!(l.period().unwrap(), Duration::from_secs(2));
    }

    #[tokio::test]
    async fn burst_then_one_token_per_period() {
        let limiter = Limiter::new(&RateLimit {
            requests_per_second: 20.0,
            burst: 2,
        })
        .unwrap();
        let clone = limiter.clone();
        let start = std::time::Instant::now();
        limiter.acquire().await;
        clone.acquire().await;
        // The burst is used up (by the clone too): the third waits ~50 ms.
        limiter.acquire().await;
        assert!(start.elapsed() >= Duration::from_millis(40));
    }
}
