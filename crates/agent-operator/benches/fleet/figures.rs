//! The figures of one phase of the fleet benchmark: control plane requests
//! counted by the emulator, the operator's CPU and memory, and the time the
//! fleet took; printed as one result line and a table of requests by route.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde_json::Value;

use super::procs::ProcSample;

/// Control plane requests as counted by the emulator (`GET /_emulator/requests`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counts {
    /// Every answered request (admin routes excluded).
    pub total: u64,
    /// `"METHOD /route/{template}"` → status (`"200"`, `"429"`, `dropped`,
    /// `hung`) → count.
    pub routes: BTreeMap<String, BTreeMap<String, u64>>,
    /// Requests that arrived while a `Retry-After` the emulator had sent to
    /// the same workspace was still pending (`during_retry_after`), when the
    /// emulator reports it; `None` for emulators without that field.
    pub during_retry_after: Option<u64>,
}

/// Sum of the numbers in `v`: itself if a number, else of its object values
/// (recursively). The emulator may report `during_retry_after` as one number
/// or broken down by route.
fn numeric_sum(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64(),
        Value::Object(map) => Some(map.values().filter_map(numeric_sum).sum()),
        _ => None,
    }
}

impl Counts {
    /// Decodes the body of `GET /_emulator/requests`.
    pub fn from_json(v: &Value) -> Counts {
        let routes = v
            .get("routes")
            .and_then(Value::as_object)
            .map(|routes| {
                routes
                    .iter()
                    .map(|(route, by_status)| {
                        let by_status = by_status
                            .as_object()
                            .map(|m| {
                                m.iter()
                                    .filter_map(|(s, n)| Some((s.clone(), n.as_u64()?)))
                                    .collect()
                            })
                            .unwrap_or_default();
                        (route.clone(), by_status)
                    })
                    .collect()
            })
            .unwrap_or_default();
        Counts {
            total: v.get("total").and_then(Value::as_u64).unwrap_or(0),
            routes,
            during_retry_after: v.get("during_retry_after").and_then(numeric_sum),
        }
    }

    /// Requests of the routes `keep` accepts, any status.
    pub fn sum_where(&self, keep: impl Fn(&str) -> bool) -> u64 {
        self.routes
            .iter()
            .filter(|(r, _)| keep(r))
            .map(|(_, s)| s.values().sum::<u64>())
            .sum()
    }

    /// The requests counted after `earlier` was taken (`self` − `earlier`).
    pub fn since(&self, earlier: &Counts) -> Counts {
        let mut routes = BTreeMap::new();
        for (route, by_status) in &self.routes {
            let before = earlier.routes.get(route);
            let diff: BTreeMap<String, u64> = by_status
                .iter()
                .map(|(s, n)| {
                    let b = before.and_then(|m| m.get(s)).copied().unwrap_or(0);
                    (s.clone(), n.saturating_sub(b))
                })
                .filter(|(_, n)| *n > 0)
                .collect();
            if !diff.is_empty() {
                routes.insert(route.clone(), diff);
            }
        }
        Counts {
            total: self.total.saturating_sub(earlier.total),
            routes,
            during_retry_after: match (self.during_retry_after, earlier.during_retry_after) {
                (Some(a), b) => Some(a.saturating_sub(b.unwrap_or(0))),
                (None, _) => None,
            },
        }
    }

    /// Requests answered 429.
    pub fn too_many(&self) -> u64 {
        self.routes
            .values()
            .filter_map(|m| m.get("429"))
            .copied()
            .sum()
    }
}

/// The figures of one phase.
#[derive(Clone, Debug)]
pub struct Phase {
    /// E.g. `S1 rollout, requestsPerSecond 25`.
    pub label: String,
    /// Resources in the fleet.
    pub n: usize,
    /// Time from the start of the phase until every resource was Ready on
    /// its current generation (1 s resolution: the fleet is listed once a
    /// second); `None` when not reached or not measured (see `ready`).
    pub time_to_ready: Option<Duration>,
    /// Resources Ready when the phase ended.
    pub ready: usize,
    /// The lower bound of `time_to_ready` the phase is compared to, if any.
    pub t_min: Option<Duration>,
    /// Length of the measured window (for rates).
    pub window: Duration,
    /// Control plane requests during the phase.
    pub counts: Counts,
    /// The operator at the start of the phase (after its peak RSS was reset).
    pub proc_before: ProcSample,
    /// The operator at the end of the phase.
    pub proc_after: ProcSample,
    /// Whether the peak RSS covers this phase only (`clear_refs` worked) or
    /// the operator's whole life.
    pub peak_is_per_phase: bool,
    /// CPU seconds the benchmark process itself (listing the fleet,
    /// applying) spent during the phase, on the same cores.
    pub bench_cpu_seconds: f64,
    /// 1-minute load average of the machine at the end of the phase.
    pub load: f64,
}

impl Phase {
    /// Operator CPU seconds spent during the phase.
    pub fn cpu_seconds(&self) -> f64 {
        self.proc_after.cpu_seconds - self.proc_before.cpu_seconds
    }

    /// Requests per resource of the fleet.
    pub fn per_resource(&self) -> f64 {
        self.counts.total as f64 / self.n.max(1) as f64
    }

    /// 429 answers as a percentage of every request.
    pub fn too_many_percent(&self) -> f64 {
        100.0 * self.counts.too_many() as f64 / self.counts.total.max(1) as f64
    }

    /// `time_to_ready ÷ t_min`.
    pub fn ratio(&self) -> Option<f64> {
        Some(self.time_to_ready?.as_secs_f64() / self.t_min?.as_secs_f64())
    }

    /// The operator's final RSS divided by the resources of the phase, in
    /// KiB: an upper bound of what one AgentDeployment costs in memory (the
    /// process's fixed part is not taken out).
    pub fn rss_kib_per_resource(&self) -> f64 {
        self.proc_after.rss_mib * 1024.0 / self.n.max(1) as f64
    }

    /// What the phase's resources added to the operator's memory, in KiB
    /// per resource: (final RSS − RSS at the start of the phase) ÷ N, the
    /// start being the operator with its control planes and nothing else
    /// in S5 and S6 (the figure the memory target of issue 30 is about).
    pub fn rss_kib_per_resource_over_start(&self) -> f64 {
        (self.proc_after.rss_mib - self.proc_before.rss_mib) * 1024.0 / self.n.max(1) as f64
    }

    /// One result line and the table of requests by route.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let ready = match (self.time_to_ready, self.t_min) {
            (Some(t), Some(min)) => format!(
                "all {} Ready in {:.1} s (T_min {:.1} s, ratio {:.2})",
                self.n,
                t.as_secs_f64(),
                min.as_secs_f64(),
                t.as_secs_f64() / min.as_secs_f64()
            ),
            (Some(t), None) => format!("all {} Ready in {:.1} s", self.n, t.as_secs_f64()),
            (None, _) if self.ready >= self.n => format!(
                "{}/{} Ready at the end of {:.1} s",
                self.ready,
                self.n,
                self.window.as_secs_f64()
            ),
            (None, _) => format!(
                "NOT all Ready: {}/{} after {:.1} s",
                self.ready,
                self.n,
                self.window.as_secs_f64()
            ),
        };
        let during = match self.counts.during_retry_after {
            Some(n) => n.to_string(),
            None => "n/a (emulator does not report it)".to_owned(),
        };
        let _ = writeln!(
            out,
            "{}: {ready} | requests {} ({:.2} per resource) | 429 {} ({:.2} %) | sent during Retry-After {during} | operator RSS peak {:.1} MiB{} final {:.1} MiB ({:.1} KiB per resource; {:.1} KiB per resource over the {:.1} MiB at the start) | operator CPU {:.2} s | bench CPU {:.2} s | load {:.2}",
            self.label,
            self.counts.total,
            self.per_resource(),
            self.counts.too_many(),
            self.too_many_percent(),
            self.proc_after.peak_rss_mib,
            if self.peak_is_per_phase {
                ""
            } else {
                " (since start)"
            },
            self.proc_after.rss_mib,
            self.rss_kib_per_resource(),
            self.rss_kib_per_resource_over_start(),
            self.proc_before.rss_mib,
            self.cpu_seconds(),
            self.bench_cpu_seconds,
            self.load,
        );
        let _ = writeln!(
            out,
            "    {:<58} {:>8} {:>12}  by status",
            "route", "requests", "per resource"
        );
        for (route, by_status) in &self.counts.routes {
            let total: u64 = by_status.values().sum();
            let statuses: Vec<String> = by_status.iter().map(|(s, n)| format!("{s}:{n}")).collect();
            let _ = writeln!(
                out,
                "    {:<58} {:>8} {:>12.2}  {}",
                route,
                total,
                total as f64 / self.n.max(1) as f64,
                statuses.join(" ")
            );
        }
        out
    }
}
