//! The request-budget guard: every operator test ends by checking the
//! emulator's request log (`GET /_emulator/requests/log`) against a
//! [`Budget`], so a hot loop anywhere fails the test that caused it.
//!
//! The operator tests' harness checks its [`Budget`] when it is dropped
//! ([`check_budget_blocking`]); tests that drive an emulator themselves check
//! [`budget_violations_at`] at their end.
//!
//! Every logged request counts, whoever sent it: the operator, and the test's
//! own control plane client too.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::Deserialize;

/// How many control plane requests a test may cause: at most
/// `per_resource` requests of one route about one resource (deployment or
/// listener id), at most `per_route_without_id` requests of one route
/// without an id (creates and lists count together per route), and at most
/// `total` requests in all, in any sliding `window`.
///
/// The default ([`Budget::default`]) is 20 per route and resource, 60 per
/// route without an id and 600 in all per 60 s. Why 20: at the shipped
/// intervals an operator reads a revision in progress after 2, 4, 8, 16
/// and then every 30 s (`--poll-interval-seconds`, doubling to
/// `--max-poll-interval-seconds`), and a steady resource once per resync
/// (300 s): a few requests per route and resource and minute, with room for
/// a test's own edits and reads. A fixed loop every 2 s sends 30 and fails
/// (`budget_tests::a_two_second_loop_fails_the_default_budget`). A test that
/// makes the operator loop faster on purpose (`--resync-interval-seconds
/// 0.5` for drift checks) gets that loop's rate on top
/// ([`Budget::allowing_operator_flags`]; the operator tests' harness does
/// it from the operator's flags). A test changes it through its harness's
/// `budget` field, e.g. `h.budget.per_resource = 120;` or `h.budget =
/// Budget::unlimited();`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Length of the sliding window.
    pub window: Duration,
    /// Most requests of one (route, resource id) in any window.
    pub per_resource: usize,
    /// Most requests of one route without a resource id (creates, lists,
    /// integrations) in any window.
    pub per_route_without_id: usize,
    /// Most requests in all in any window.
    pub total: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            window: Duration::from_secs(60),
            per_resource: 20,
            per_route_without_id: 60,
            total: 600,
        }
    }
}

/// The operator flags whose value is the period of a loop that lasts
/// (drift checks of a steady resource, the longest delay between polls).
const LOOP_PERIOD_FLAGS: [&str; 2] = ["--resync-interval-seconds", "--max-poll-interval-seconds"];

impl Budget {
    /// The budget of a fleet test (tens to a hundred resources): creates and
    /// name lookups carry no id, so the guard counts them together per
    /// route: 300 per route without an id and 6,000 in all per minute; per
    /// route and resource the default (a loop per resource fails as in a
    /// test of one resource).
    pub fn fleet() -> Self {
        Self {
            per_route_without_id: 300,
            total: 6_000,
            ..Self::default()
        }
    }

    /// A budget nothing exceeds (the guard is off).
    pub fn unlimited() -> Self {
        Self {
            per_resource: usize::MAX,
            per_route_without_id: usize::MAX,
            total: usize::MAX,
            ..Self::default()
        }
    }

    /// This budget with room, per route and resource, for the loops an
    /// operator started with `args` runs on purpose: when `args` set
    /// `--resync-interval-seconds` or `--max-poll-interval-seconds` (as
    /// `--flag VALUE` or `--flag=VALUE`) shorter than the window, one
    /// request per such period and window is added to `per_resource`
    /// (rounded up; the shortest period counts). A loop faster than the
    /// test's own periods still fails it.
    pub fn allowing_operator_flags(mut self, args: &[&str]) -> Self {
        let mut shortest: Option<f64> = None;
        for (i, arg) in args.iter().enumerate() {
            for flag in LOOP_PERIOD_FLAGS {
                let value = if *arg == flag {
                    args.get(i + 1).copied()
                } else {
                    arg.strip_prefix(flag).and_then(|v| v.strip_prefix('='))
                };
                if let Some(secs) = value.and_then(|v| v.parse::<f64>().ok())
                    && secs > 0.0
                {
                    shortest = Some(shortest.map_or(secs, |s: f64| s.min(secs)));
                }
            }
        }
        if let Some(secs) = shortest
            && secs < self.window.as_secs_f64()
        {
            let extra = (self.window.as_secs_f64() / secs).ceil() as usize;
            self.per_resource = self.per_resource.saturating_add(extra);
        }
        self
    }

    /// The violations of this budget in `log`: at most one per (route,
    /// resource id), for its busiest window, then one for the total if it is
    /// exceeded; busiest first.
    pub fn violations(&self, log: &[LoggedRequest]) -> Vec<Violation> {
        let window_ms = u64::try_from(self.window.as_millis()).unwrap_or(u64::MAX);
        let mut by_key: BTreeMap<(&str, Option<&str>), Vec<u64>> = BTreeMap::new();
        for r in log {
            by_key
                .entry((r.route.as_str(), r.resource_id()))
                .or_default()
                .push(r.t_ms);
        }
        let mut out: Vec<Violation> = by_key
            .into_iter()
            .filter_map(|((route, id), times)| {
                let (count, start_ms) = busiest_window(times, window_ms);
                let limit = if id.is_some() {
                    self.per_resource
                } else {
                    self.per_route_without_id
                };
                (count > limit).then(|| Violation {
                    route: Some(route.to_owned()),
                    resource_id: id.map(str::to_owned),
                    count,
                    limit,
                    window: self.window,
                    start_ms,
                })
            })
            .collect();
        out.sort_by_key(|v| std::cmp::Reverse(v.count));
        let (count, start_ms) = busiest_window(log.iter().map(|r| r.t_ms).collect(), window_ms);
        if count > self.total {
            out.push(Violation {
                route: None,
                resource_id: None,
                count,
                limit: self.total,
                window: self.window,
                start_ms,
            });
        }
        out
    }
}

/// One line on the busiest (route, resource) and the busiest window of all
/// routes in `log`, for the test's output, e.g. `busiest: GET
/// /v2/deployments/{deployment_id} for …: 12 requests in the 60s from t=0.4s
/// (budget 60); all routes: 31 requests in the 60s from t=0.0s (budget 600)`.
pub fn usage_summary(budget: &Budget, log: &[LoggedRequest]) -> String {
    let all = Budget {
        per_resource: 0,
        per_route_without_id: 0,
        total: 0,
        ..budget.clone()
    }
    .violations(log);
    let with_limit = |v: &Violation, limit: usize| Violation { limit, ..v.clone() }.to_string();
    let limit_of = |v: &Violation| match v.resource_id {
        Some(_) => budget.per_resource,
        None => budget.per_route_without_id,
    };
    match (all.first(), all.last()) {
        (Some(top), Some(total)) if all.len() > 1 => format!(
            "busiest: {}; {}",
            with_limit(top, limit_of(top)),
            with_limit(total, budget.total)
        ),
        _ => "no requests".to_owned(),
    }
}

/// The most entries of `times` (milliseconds) within any `[t, t + window_ms)`
/// and the first such `t` (0 and 0 for no entries).
pub fn busiest_window(mut times: Vec<u64>, window_ms: u64) -> (usize, u64) {
    times.sort_unstable();
    let (mut best, mut best_start, mut first) = (0, 0, 0);
    for (last, &t) in times.iter().enumerate() {
        while t.saturating_sub(times[first]) >= window_ms {
            first += 1;
        }
        if last + 1 - first > best {
            best = last + 1 - first;
            best_start = times[first];
        }
    }
    (best, best_start)
}

/// One entry of `GET /_emulator/requests/log`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct LoggedRequest {
    /// Arrival, in milliseconds since the emulator started.
    pub t_ms: u64,
    /// `"METHOD /route/{template}"`, e.g. `GET /v2/deployments/{deployment_id}`.
    pub route: String,
    /// The `{deployment_id}` of the path, if the route has one.
    pub deployment_id: Option<String>,
    /// The `{listener_id}` of the path, if the route has one.
    pub listener_id: Option<String>,
    /// The workspace the request named (`X-Tenant-Id`), if any.
    #[serde(default)]
    pub workspace: Option<String>,
    /// `"200"`, `"429"`, ..., `"dropped"` or `"hung"`.
    pub status: String,
}

impl LoggedRequest {
    /// The deployment or listener the request is about, if the path names one.
    pub fn resource_id(&self) -> Option<&str> {
        self.deployment_id
            .as_deref()
            .or(self.listener_id.as_deref())
    }
}

/// The answer of `GET /_emulator/requests/log`.
#[derive(Clone, Debug, Deserialize)]
pub struct RequestLog {
    /// Most entries the emulator keeps.
    pub capacity: usize,
    /// Oldest entries dropped because the log was full (then the budget
    /// check sees only the newest `capacity` requests).
    pub dropped: u64,
    /// The requests, oldest first.
    pub entries: Vec<LoggedRequest>,
}

/// A window in which a test sent more requests than its [`Budget`] allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The route, or `None` for the total of all routes.
    pub route: Option<String>,
    /// The deployment or listener id, if the route names one.
    pub resource_id: Option<String>,
    /// Requests in the busiest window.
    pub count: usize,
    /// What the budget allows in a window.
    pub limit: usize,
    /// Length of the window.
    pub window: Duration,
    /// Start of the busiest window, in milliseconds since the emulator started.
    pub start_ms: u64,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.route, &self.resource_id) {
            (None, _) => write!(f, "all routes")?,
            (Some(route), None) => write!(f, "{route}")?,
            (Some(route), Some(id)) => write!(f, "{route} for {id}")?,
        }
        write!(
            f,
            ": {} requests in the {:?} from t={:.1}s (budget {})",
            self.count,
            self.window,
            self.start_ms as f64 / 1000.0,
            self.limit
        )
    }
}

/// `GET {base_url}/_emulator/requests/log`, decoded. Errors: the emulator
/// does not answer 200, or the answer is not a log.
pub async fn fetch_request_log(base_url: &str) -> Result<RequestLog, String> {
    let url = format!("{base_url}/_emulator/requests/log");
    let response = crate::admin_http()
        .get(&url)
        .send()
        .await
        .map_err(|e| format!("GET {url}: {e}"))?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!("GET {url}: {status}"));
    }
    response
        .json()
        .await
        .map_err(|e| format!("GET {url}: decoding the log: {e}"))
}

/// The violations of `budget` in the request log of the emulator at
/// `base_url`, as human-readable lines (route, resource id, count, window
/// start); empty when the test stayed within it. Also prints a
/// [`usage_summary`] to the test's output. Errors: see [`fetch_request_log`].
pub async fn budget_violations_at(base_url: &str, budget: &Budget) -> Result<Vec<String>, String> {
    let log = fetch_request_log(base_url).await?;
    eprintln!("request budget: {}", usage_summary(budget, &log.entries));
    let mut lines: Vec<String> = budget
        .violations(&log.entries)
        .iter()
        .map(Violation::to_string)
        .collect();
    if !lines.is_empty() && log.dropped > 0 {
        lines.push(format!(
            "(the log kept only the last {} requests; {} older ones were dropped)",
            log.capacity, log.dropped
        ));
    }
    Ok(lines)
}

/// The panic message of a budget check that found `violations`.
pub fn budget_message(budget: &Budget, violations: &[String]) -> String {
    format!(
        "request budget exceeded (at most {} requests per route and resource, {} per route \
         without an id and {} in all, in any {:?}):\n  {}",
        budget.per_resource,
        budget.per_route_without_id,
        budget.total,
        budget.window,
        violations.join("\n  ")
    )
}

/// Checks `budget` against the log of the emulator at `base_url` from a
/// synchronous context that may be inside a tokio runtime (a `Drop`): on a
/// new thread with its own current-thread runtime. Panics with the
/// violations, or when the log cannot be read.
pub fn check_budget_blocking(base_url: &str, budget: &Budget) {
    let (url, b) = (base_url.to_owned(), budget.clone());
    let checked = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("building the budget check's runtime")
            .block_on(budget_violations_at(&url, &b))
    })
    .join();
    match checked {
        Ok(Ok(violations)) if violations.is_empty() => {}
        Ok(Ok(violations)) => panic!("{}", budget_message(budget, &violations)),
        Ok(Err(e)) => panic!("request budget: cannot read the request log: {e}"),
        Err(payload) => std::panic::resume_unwind(payload),
    }
}

#[cfg(test)]
mod budget_tests {
    use super::*;

    const GET: &str = "GET /v2/deployments/{deployment_id}";

    fn every(period_ms: u64, for_ms: u64, route: &str, id: Option<&str>) -> Vec<LoggedRequest> {
        (0..for_ms / period_ms)
            .map(|i| LoggedRequest {
                t_ms: i * period_ms,
                route: route.to_owned(),
                deployment_id: id.map(str::to_owned),
                listener_id: None,
                workspace: None,
                status: "200".to_owned(),
            })
            .collect()
    }

    /// What an operator at the shipped intervals sends about one resource
    /// in its first minute: a revision read after 2, 4, 8, 16, 30 s and
    /// every 30 s, plus the pass's own reads of the deployment.
    fn shipped_polling(id: &str) -> Vec<LoggedRequest> {
        let revision = "GET /v2/deployments/{deployment_id}/revisions/{revision_id}";
        let mut log = Vec::new();
        for t in [0, 2_000, 6_000, 14_000, 30_000, 60_000, 90_000] {
            log.extend(
                every(1_000, 1_000, revision, Some(id))
                    .into_iter()
                    .map(|mut r| {
                        r.t_ms = t;
                        r
                    }),
            );
            log.extend(every(1_000, 1_000, GET, Some(id)).into_iter().map(|mut r| {
                r.t_ms = t + 1;
                r
            }));
        }
        log
    }

    /// The guard's positive control: a fixed 2 s loop on one resource
    /// fails the default budget and the fleet budget, whether it runs for
    /// a minute or is one of many resources.
    #[test]
    fn a_two_second_loop_fails_the_default_budget() {
        let looped = every(2_000, 60_000, GET, Some("dep-1"));
        for budget in [Budget::default(), Budget::fleet()] {
            let v = budget.violations(&looped);
            assert_eq!(v.len(), 1, "{budget:?}: {v:?}");
            assert_eq!(v[0].count, 30);
            assert_eq!(v[0].resource_id.as_deref(), Some("dep-1"));
        }
        // One looping resource among a fleet of quiet ones.
        let mut fleet: Vec<LoggedRequest> = (0..50)
            .flat_map(|i| shipped_polling(&format!("dep-{i}")))
            .collect();
        assert!(Budget::fleet().violations(&fleet).is_empty());
        fleet.extend(every(2_000, 60_000, GET, Some("dep-7")));
        let v = Budget::fleet().violations(&fleet);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].resource_id.as_deref(), Some("dep-7"));
    }

    /// The negative control: what the operator sends at the shipped
    /// intervals, and a loop at 3 s, pass.
    #[test]
    fn the_shipped_polling_passes_the_default_budget() {
        assert!(
            Budget::default()
                .violations(&shipped_polling("dep-1"))
                .is_empty()
        );
        assert!(
            Budget::default()
                .violations(&every(3_000, 120_000, GET, Some("dep-1")))
                .is_empty()
        );
    }

    /// Creates and lists carry no id: they count per route, with a limit of
    /// their own.
    #[test]
    fn requests_without_an_id_count_per_route() {
        let creates = every(500, 60_000, "POST /v2/deployments", None);
        assert!(Budget::fleet().violations(&creates).is_empty());
        let v = Budget::default().violations(&creates);
        assert_eq!(v.len(), 1);
        assert_eq!((v[0].count, v[0].limit), (120, 60));
    }

    /// A test that sets fast drift checks may loop at that period, and no
    /// faster.
    #[test]
    fn the_operator_flags_of_a_test_widen_the_budget_by_its_own_loops() {
        let b = Budget::default().allowing_operator_flags(&[
            "--poll-interval-seconds",
            "0.3",
            "--resync-interval-seconds",
            "0.5",
        ]);
        assert_eq!(b.per_resource, 20 + 120);
        assert!(b.violations(&every(500, 60_000, GET, Some("d"))).is_empty());
        assert!(!b.violations(&every(200, 60_000, GET, Some("d"))).is_empty());
        let b = Budget::default().allowing_operator_flags(&["--max-poll-interval-seconds=2"]);
        assert_eq!(b.per_resource, 50);
        assert_eq!(
            Budget::default().allowing_operator_flags(&["--poll-interval-seconds", "0.3"]),
            Budget::default()
        );
        assert_eq!(
            Budget::default().allowing_operator_flags(&["--resync-interval-seconds", "300"]),
            Budget::default()
        );
    }
}
