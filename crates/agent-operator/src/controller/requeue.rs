//! When a pass runs again, pure: the key of an object's memory, the jitter
//! of every periodic check, the delays of the error backoff (applied by
//! [`super::scaffold::requeue_after_error`]) and of the polling backoff of
//! a revision in progress.

use std::time::Duration;

/// `Kind/namespace/name` of an object: the key of its backoff and polling
/// state in the in-process memory ([`super::context::memory_key`]).
pub fn object_key<K: kube::Resource<DynamicType = ()>>(obj: &K) -> String {
    format!(
        "{}/{}/{}",
        K::kind(&()),
        obj.meta().namespace.as_deref().unwrap_or_default(),
        obj.meta().name.as_deref().unwrap_or_default()
    )
}

/// `d` ± 25 % (uniform), so that many objects do not re-check in lockstep:
/// a fleet that became Ready within a few minutes spreads its drift checks
/// over half a period within a few periods, instead of checking in bursts
/// (the mean interval stays `d`).
pub fn jittered(d: Duration) -> Duration {
    d.mul_f64(rand::random_range(0.75..1.25))
}

/// How often an AgentControlPlane being deleted lists the AgentDeployments
/// that still use it (one list of its namespace, nothing remote), ±25 %.
pub const IN_USE_RECHECK: Duration = Duration::from_secs(2);

/// `base * 1.5^unchanged`, capped at `max`.
pub fn poll_delay(base: Duration, max: Duration, unchanged: u32) -> Duration {
    base.mul_f64(1.5f64.powi(unchanged.min(30) as i32))
        .min(max.max(base))
}

/// Exponential backoff: `2^(attempt-1)` seconds capped at `max`, with ±20 %
/// jitter so that many objects failing together do not retry in lockstep.
pub fn backoff_delay(attempt: u32, max: Duration) -> Duration {
    let base = Duration::from_secs(1u64 << attempt.saturating_sub(1).min(20)).min(max);
    let jitter = rand::random_range(0.8..1.2);
    base.mul_f64(jitter).min(max)
}

/// Seconds from now until `rfc3339` (negative when past); `None` if it
/// does not parse.
pub fn seconds_until(rfc3339: &str) -> Option<f64> {
    let t: k8s_openapi::jiff::Timestamp = rfc3339.parse().ok()?;
    let now = k8s_openapi::jiff::Timestamp::now();
    Some(t.duration_since(now).as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polling_backs_off_to_the_cap() {
        let base = Duration::from_secs(2);
        let max = Duration::from_secs(30);
        assert_eq!(poll_delay(base, max, 0), base);
        assert_eq!(poll_delay(base, max, 1), Duration::from_secs(3));
        assert!(poll_delay(base, max, 3) > poll_delay(base, max, 2));
        assert_eq!(poll_delay(base, max, 50), max);
    }

    #[test]
    fn error_backoff_grows_with_jitter_and_caps() {
        let max = Duration::from_secs(300);
        let first = backoff_delay(1, max);
        assert!(first >= Duration::from_millis(800) && first <= Duration::from_millis(1200));
        let fifth = backoff_delay(5, max);
        assert!(fifth >= Duration::from_millis(12_800) && fifth <= Duration::from_millis(19_200));
        assert!(backoff_delay(40, max) <= max);
    }
}
