//! Client-side rate limit of one control plane: the ceiling of its shared,
//! adaptive budget ([`super::budget::Budget`]). Every HTTP attempt, retries
//! included, takes one token before it is sent.
//!
//! The control plane's limits are not published (docs/control-plane-api.md
//! "Rate limits"); this limit keeps one operator from flooding a shared control plane
//! and complements honouring `Retry-After` on 429 (docs/control-plane-api.md "Errors").

use std::time::Duration;

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
            assert!(l.period().is_err(), "{rps} {burst}");
        }
        let l = RateLimit {
            requests_per_second: 0.5,
            burst: 1,
        };
        assert_eq!(l.period().unwrap(), Duration::from_secs(2));
    }
}
