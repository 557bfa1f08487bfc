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
/// listener id; requests without an id, such as creates and lists, count
/// together per route), and at most `total` requests in all, in any sliding
/// `window`.
///
/// The default ([`Budget::default`]) is 60 per route and resource and 600 in
/// all per 60 s. A test changes it through its harness's `budget` field, e.g.
/// `h.budget.per_resource = 120;` or `h.budget = Budget::unlimited();`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Length of the sliding window.
    pub window: Duration,
    /// Most requests of one (route, resource id) in any window.
    pub per_resource: usize,
    /// Most requests in all in any window.
    pub total: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            window: Duration::from_secs(60),
            per_resource: 60,
            total: 600,
        }
    }
}

impl Budget {
    /// The budget of a fleet test (tens to a hundred resources): creates and
    /// name lookups carry no id, so the guard counts them together per
    /// route; 300 per route and id and 6,000 in all per minute.
    pub fn fleet() -> Self {
        Self {
            per_resource: 300,
            total: 6_000,
            ..Self::default()
        }
    }

    /// A budget nothing exceeds (the guard is off).
    pub fn unlimited() -> Self {
        Self {
            per_resource: usize::MAX,
            total: usize::MAX,
            ..Self::default()
        }
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
                (count > self.per_resource).then(|| Violation {
                    route: Some(route.to_owned()),
                    resource_id: id.map(str::to_owned),
                    count,
                    limit: self.per_resource,
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
        total: 0,
        ..budget.clone()
    }
    .violations(log);
    let with_limit = |v: &Violation, limit: usize| Violation { limit, ..v.clone() }.to_string();
    match (all.first(), all.last()) {
        (Some(top), Some(total)) if all.len() > 1 => format!(
            "busiest: {}; {}",
            with_limit(top, budget.per_resource),
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
        "request budget exceeded (at most {} requests per route and resource and {} in all, \
         in any {:?}):\n  {}",
        budget.per_resource,
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
