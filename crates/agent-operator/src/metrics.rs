//! Prometheus metrics of the operator (`prometheus-client`), served as
//! OpenMetrics text on `/metrics` by [`crate::http`].
//!
//! Every label has a bounded set of values: kinds, fixed outcomes, the fixed
//! `reason()` of [`crate::controller::Error`], the fixed operation names and
//! status classes of the control plane client, and the namespace and name of
//! AgentControlPlanes (one or a few per tenant). Names of other objects and
//! error strings never become label values (STYLE "Observability").
//!
//! Every metric, its type, its labels with their values and its help are
//! listed in docs/METRICS.md, generated from this registry
//! (`crate::docgen::metrics`, `make generate`).
//!
//! AgentControlPlanes that share a key share one budget: each of them shows
//! the same rate, ceiling and pause.
//!
//! Counters are created at 0 for every label value known up front (kinds,
//! outcomes, error reasons, operations and status classes, verification
//! outcomes; the reconcile duration per kind) when the registry is made, and
//! the per-AgentControlPlane `slowdowns` for every cause and `token_wait` at
//! the first scrape that shows the plane, so that `rate()` and `absent()`
//! see each series before its first event.

use std::cell::Cell;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use std::sync::atomic::AtomicU64;

use crate::controlplane::{PlaneLabel, RequestObserver};

/// Content type of [`Metrics::encode`]'s output.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Prefix of every metric name.
const PREFIX: &str = "agent_operator";

/// `outcome` label value of a pass that returned `Ok`.
pub const OUTCOME_SUCCESS: &str = "success";
/// `outcome` label value of a pass that returned `Ok` but reported the
/// object `Stalled` (progress needs a human: a missing Secret, a name
/// conflict, an invalid spec, a failed revision...).
pub const OUTCOME_BLOCKED: &str = "blocked";
/// `outcome` label value of a pass that returned an error.
pub const OUTCOME_ERROR: &str = "error";

/// Every `outcome` of `agent_operator_reconciles_total`.
pub const OUTCOMES: [&str; 3] = [OUTCOME_SUCCESS, OUTCOME_BLOCKED, OUTCOME_ERROR];

/// Every `kind` label value: the kinds the operator reconciles, from the
/// registry [`crate::api::kinds::KINDS`].
pub const KINDS: [&str; crate::api::kinds::KINDS.len()] = crate::api::kinds::NAMES;

/// Every value of [`crate::controller::Error::reason`] (the `reason` of
/// `agent_operator_reconcile_errors_total`): one per variant of the error,
/// from its exhaustive `match`.
pub fn error_reasons() -> impl Iterator<Item = &'static str> {
    use strum::IntoEnumIterator;
    crate::controller::error::ErrorKind::iter().map(crate::controller::error::ErrorKind::reason)
}

/// Every `outcome` of `agent_operator_verifications_total`: `Verified` and
/// the failure reasons of `spec.verify`.
pub const VERIFICATION_OUTCOMES: [&str; 7] = [
    crate::api::conditions::reason::VERIFIED,
    crate::api::conditions::reason::AGENT_SERVER_UNREACHABLE,
    crate::api::conditions::reason::AGENT_SERVER_UNAUTHORIZED,
    crate::api::conditions::reason::ASSISTANTS_MISSING,
    crate::api::conditions::reason::ASSISTANT_NOT_FOUND,
    crate::api::conditions::reason::RUN_FAILED,
    crate::api::conditions::reason::SUITE_FAILED,
];

/// Every `outcome` of `agent_operator_verification_cases_total`: a case of
/// `spec.verify.suite` passed or failed.
pub const CASE_OUTCOMES: [&str; 2] = ["Passed", "Failed"];

/// Every `outcome` of `agent_operator_revision_outcomes_total`: the end
/// statuses of a revision (docs/control-plane-api.md "Revision"), and
/// `OTHER_FAILED` for a failed status this client does not know.
pub const REVISION_OUTCOMES: [&str; 7] = [
    "DEPLOYED",
    "CREATE_FAILED",
    "BUILD_FAILED",
    "DEPLOY_FAILED",
    "SKIPPED",
    "INTERRUPTED",
    "OTHER_FAILED",
];

/// The `outcome` label of a revision that ended with `status`; `None` while
/// it is in progress (and for an unknown status that is not a failure).
pub fn revision_outcome(
    status: &crate::controlplane::types::RevisionStatus,
) -> Option<&'static str> {
    if status.is_in_progress() {
        return None;
    }
    REVISION_OUTCOMES
        .iter()
        .find(|o| **o == status.as_str())
        .copied()
        .or(Some("OTHER_FAILED"))
}

tokio::task_local! {
    /// Whether the status outcome last computed in the current reconcile
    /// pass was `Stalled` (set by [`note_pass_outcome`]).
    static PASS_STALLED: Cell<bool>;
}

/// Runs one reconcile pass and returns its output with whether the last
/// status outcome it computed ([`note_pass_outcome`]) was `Stalled`: the
/// `blocked` outcome of `agent_operator_reconciles_total`.
pub async fn track_pass<T>(pass: impl Future<Output = T>) -> (T, bool) {
    PASS_STALLED
        .scope(Cell::new(false), async move {
            let out = pass.await;
            (out, PASS_STALLED.with(Cell::get))
        })
        .await
}

/// Notes, for the pass running in [`track_pass`] (no effect outside one),
/// whether the status outcome it just computed is `Stalled`; the last call
/// of a pass wins.
pub fn note_pass_outcome(stalled: bool) {
    let _ = PASS_STALLED.try_with(|c| c.set(stalled));
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    kind: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    kind: &'static str,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    operation: &'static str,
    status_class: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    operation: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerificationLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReadyLabels {
    kind: &'static str,
    ready: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PlaneLabels {
    namespace: String,
    control_plane: String,
}

impl PlaneLabels {
    fn of(plane: &PlaneLabel) -> Self {
        Self {
            namespace: plane.namespace.clone(),
            control_plane: plane.name.clone(),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SlowdownLabels {
    namespace: String,
    control_plane: String,
    cause: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    namespace: String,
    control_plane: String,
    state: &'static str,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Reconcile passes: 10 ms … ~41 s.
fn reconcile_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.01, 2.0, 13))
}

/// Control plane HTTP attempts: 5 ms … ~20 s.
fn request_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 13))
}

/// Budget token waits: 1 ms … ~24 s (a pass waits at most 5 s, see
/// `controller::planes::MAX_TOKEN_WAIT`).
fn token_wait_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.5, 12))
}

/// Spec change to Ready: revisions build and deploy in minutes.
fn time_to_ready_histogram() -> Histogram {
    Histogram::new([
        1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0,
    ])
}

/// Number of resources of one kind per `Ready` condition status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadyCounts {
    /// Resources whose `Ready` condition is `True`.
    pub ready_true: i64,
    /// Resources whose `Ready` condition is `False`.
    pub ready_false: i64,
    /// Resources without a `Ready` condition, or with status `Unknown` (or
    /// any other value).
    pub unknown: i64,
}

impl ReadyCounts {
    /// Counts one resource by the `status` of its `Ready` condition
    /// (`None` when it has none).
    pub fn add(&mut self, status: Option<&str>) {
        match status {
            Some("True") => self.ready_true += 1,
            Some("False") => self.ready_false += 1,
            _ => self.unknown += 1,
        }
    }
}

type ReadySource = Box<dyn Fn() -> ReadyCounts + Send + Sync>;

/// Computes `agent_operator_resources` at scrape time from the registered
/// sources (closures over reflector stores), summed per kind.
#[derive(Default)]
struct ReadyStates {
    sources: Mutex<Vec<(&'static str, ReadySource)>>,
}

impl fmt::Debug for ReadyStates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadyStates").finish_non_exhaustive()
    }
}

impl Collector for ReadyStates {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let mut totals: Vec<(&'static str, ReadyCounts)> = Vec::new();
        {
            let sources = self.sources.lock().unwrap_or_else(|p| p.into_inner());
            for (kind, source) in sources.iter() {
                let counts = source();
                match totals.iter_mut().find(|(k, _)| k == kind) {
                    Some((_, total)) => {
                        total.ready_true += counts.ready_true;
                        total.ready_false += counts.ready_false;
                        total.unknown += counts.unknown;
                    }
                    None => totals.push((kind, counts)),
                }
            }
        }
        if totals.is_empty() {
            return Ok(());
        }
        let family = Family::<ReadyLabels, Gauge>::default();
        for (kind, counts) in totals {
            for (ready, n) in [
                ("True", counts.ready_true),
                ("False", counts.ready_false),
                ("Unknown", counts.unknown),
            ] {
                family.get_or_create(&ReadyLabels { kind, ready }).set(n);
            }
        }
        let metric = encoder.encode_descriptor(
            "resources",
            "Custom resources watched by this replica, by kind and status of their Ready condition",
            None,
            family.metric_type(),
        )?;
        family.encode(metric)
    }
}

/// One AgentControlPlane's figures at scrape time (produced by
/// [`crate::controller::planes::ClientCache::samples`]).
#[derive(Clone, Debug, PartialEq)]
pub struct PlaneSample {
    /// Namespace and name of the AgentControlPlane.
    pub plane: PlaneLabel,
    /// Rate its budget allows now, requests per second (`None` before its
    /// first client was built).
    pub rate: Option<f64>,
    /// Highest rate its budget may reach, requests per second.
    pub ceiling: Option<f64>,
    /// Seconds left of a `Retry-After` pause (0: none).
    pub pause_seconds: f64,
    /// Passes holding a reconcile permit.
    pub running: i64,
    /// Passes waiting for a reconcile permit.
    pub waiting: i64,
    /// Objects requeued until the control plane can send again, or parked
    /// behind its full queue of waiting passes.
    pub deferred: i64,
    /// Passes put off so far.
    pub deferred_total: u64,
}

type PlaneSource = Box<dyn Fn() -> Vec<PlaneSample> + Send + Sync>;

/// The drift of the observed AgentDeployments of one AgentControlPlane at
/// scrape time (see [`Metrics::track_drift`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriftSample {
    /// Namespace and name of the AgentControlPlane.
    pub plane: PlaneLabel,
    /// Its AgentDeployments under `managementPolicy: Observe` with
    /// `Drifted=True`.
    pub drifted: i64,
}

type DriftSource = Box<dyn Fn() -> Vec<DriftSample> + Send + Sync>;

/// Computes `agent_operator_drifted_deployments` at scrape time from the
/// registered sources (the AgentDeployment stores); the samples of every
/// source for the same plane are summed.
#[derive(Default)]
struct DriftStates {
    sources: Mutex<Vec<DriftSource>>,
}

impl fmt::Debug for DriftStates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DriftStates").finish_non_exhaustive()
    }
}

impl Collector for DriftStates {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let family = Family::<PlaneLabels, Gauge>::default();
        let mut any = false;
        for source in self
            .sources
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            for s in source() {
                any = true;
                family
                    .get_or_create(&PlaneLabels::of(&s.plane))
                    .inc_by(s.drifted);
            }
        }
        if any {
            family.encode(encoder.encode_descriptor(
                "drifted_deployments",
                "AgentDeployments under managementPolicy Observe whose remote deployment differs from the spec (Drifted=True), per AgentControlPlane; 0 for a control plane whose observed ones all match, absent for one with none observed",
                None,
                family.metric_type(),
            )?)?;
        }
        Ok(())
    }
}

/// Computes the per-AgentControlPlane gauges at scrape time from the
/// registered sources (the client cache), and the lease renewal age.
#[derive(Default)]
struct PlaneStates {
    sources: Mutex<Vec<PlaneSource>>,
}

impl fmt::Debug for PlaneStates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlaneStates").finish_non_exhaustive()
    }
}

impl Collector for PlaneStates {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let samples: Vec<PlaneSample> = self
            .sources
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .flat_map(|source| source())
            .collect();
        if !samples.is_empty() {
            PlaneFamilies::of(&samples).encode(&mut encoder)?;
        }
        if let Some(age) = crate::leader::renewal_age() {
            let g = Gauge::<f64, AtomicU64>::default();
            g.set(age.as_secs_f64());
            g.encode(encoder.encode_descriptor(
                "leader_lease_renewal_age_seconds",
                "Seconds since this replica last acquired or renewed the leader Lease (every 2 s with the default 15 s Lease); meaningful only while agent_operator_leader is 1 on the same replica",
                None,
                g.metric_type(),
            )?)?;
        }
        Ok(())
    }
}

/// The per-AgentControlPlane families of one scrape.
struct PlaneFamilies {
    /// `control_plane_budget_rate`.
    rate: Family<PlaneLabels, Gauge<f64, AtomicU64>>,
    /// `control_plane_budget_ceiling`.
    ceiling: Family<PlaneLabels, Gauge<f64, AtomicU64>>,
    /// `control_plane_pause_seconds`.
    pause: Family<PlaneLabels, Gauge<f64, AtomicU64>>,
    /// `reconcile_queue`.
    queue: Family<QueueLabels, Gauge>,
    /// `deferred_passes`.
    deferred: Family<PlaneLabels, Counter>,
}

impl PlaneFamilies {
    /// The families of `samples`: the budget gauges of each plane whose
    /// budget is known, its queue by state, its deferred passes.
    fn of(samples: &[PlaneSample]) -> Self {
        let families = Self {
            rate: Family::default(),
            ceiling: Family::default(),
            pause: Family::default(),
            queue: Family::default(),
            deferred: Family::default(),
        };
        for s in samples {
            let labels = PlaneLabels::of(&s.plane);
            if let (Some(r), Some(c)) = (s.rate, s.ceiling) {
                families.rate.get_or_create(&labels).set(r);
                families.ceiling.get_or_create(&labels).set(c);
                families.pause.get_or_create(&labels).set(s.pause_seconds);
            }
            for (state, n) in [
                ("running", s.running),
                ("waiting", s.waiting),
                ("deferred", s.deferred),
            ] {
                families
                    .queue
                    .get_or_create(&QueueLabels {
                        namespace: labels.namespace.clone(),
                        control_plane: labels.control_plane.clone(),
                        state,
                    })
                    .set(n);
            }
            families
                .deferred
                .get_or_create(&labels)
                .inc_by(s.deferred_total);
        }
        families
    }

    /// Encodes every family, each with its name and help.
    fn encode(&self, encoder: &mut DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
        for (name, help, family) in [
            (
                "control_plane_budget_rate",
                "Requests per second the control plane's shared budget allows now",
                &self.rate,
            ),
            (
                "control_plane_budget_ceiling",
                "Highest rate, requests per second, the control plane's budget may reach",
                &self.ceiling,
            ),
            (
                "control_plane_pause_seconds",
                "Seconds left of a Retry-After pause of the control plane (0: none)",
                &self.pause,
            ),
        ] {
            family.encode(encoder.encode_descriptor(name, help, None, family.metric_type())?)?;
        }
        self.queue.encode(encoder.encode_descriptor(
            "reconcile_queue",
            "AgentDeployments of a control plane by state: running (holds a reconcile permit), waiting (for a permit), deferred (requeued until the budget allows, or parked behind a full queue of 8 waiting passes per plane permit)",
            None,
            self.queue.metric_type(),
        )?)?;
        self.deferred.encode(encoder.encode_descriptor(
            "deferred_passes",
            "Passes put off because the control plane's budget was paused or short, or parked because its queue of waiting passes was full",
            None,
            self.deferred.metric_type(),
        )?)
    }
}

/// Counts control plane HTTP attempts; handed to the client as its
/// [`RequestObserver`] (see [`Metrics::request_observer`]).
#[derive(Clone, Debug)]
struct ControlPlaneRequests {
    requests: Family<RequestLabels, Counter>,
    duration: HistogramFamily<OperationLabels>,
    token_wait: HistogramFamily<PlaneLabels>,
    slowdowns: Family<SlowdownLabels, Counter>,
}

impl RequestObserver for ControlPlaneRequests {
    fn observe(&self, operation: &'static str, status_class: &'static str, elapsed: Duration) {
        self.requests
            .get_or_create(&RequestLabels {
                operation,
                status_class,
            })
            .inc();
        self.duration
            .get_or_create(&OperationLabels { operation })
            .observe(elapsed.as_secs_f64());
    }

    fn observe_token_wait(&self, plane: &PlaneLabel, waited: Duration) {
        self.token_wait
            .get_or_create(&PlaneLabels::of(plane))
            .observe(waited.as_secs_f64());
    }

    fn observe_slowdown(&self, plane: &PlaneLabel, cause: &'static str) {
        self.slowdowns
            .get_or_create(&SlowdownLabels {
                namespace: plane.namespace.clone(),
                control_plane: plane.name.clone(),
                cause,
            })
            .inc();
    }
}

/// The families of reconcile passes a [`Metrics`] counts by kind
/// (`reconciles`, `reconcile_errors`, `reconcile_duration`), registered,
/// with every series known at start created at zero.
fn register_reconciles(
    registry: &mut Registry,
) -> (
    Family<OutcomeLabels, Counter>,
    Family<ErrorLabels, Counter>,
    HistogramFamily<KindLabels>,
) {
    let reconciles = Family::<OutcomeLabels, Counter>::default();
    registry.register(
        "reconciles",
        "Reconcile passes by kind and outcome: success; blocked, a pass that ended with the object Stalled (progress needs a person: SecretNotFound, NameConflict, InvalidSpec, a failed revision...); error, a pass that failed and is retried",
        reconciles.clone(),
    );
    let reconcile_errors = Family::<ErrorLabels, Counter>::default();
    registry.register(
        "reconcile_errors",
        "Failed reconcile passes by kind and fixed error reason",
        reconcile_errors.clone(),
    );
    let reconcile_duration: HistogramFamily<KindLabels> =
        Family::new_with_constructor(reconcile_histogram);
    registry.register_with_unit(
        "reconcile_duration",
        "Duration of reconcile passes by kind",
        Unit::Seconds,
        reconcile_duration.clone(),
    );
    for kind in KINDS {
        for outcome in OUTCOMES {
            let _ = reconciles.get_or_create(&OutcomeLabels { kind, outcome });
        }
        for reason in error_reasons() {
            let _ = reconcile_errors.get_or_create(&ErrorLabels { kind, reason });
        }
    }
    for kind in KINDS {
        let _ = reconcile_duration.get_or_create(&KindLabels { kind });
    }
    (reconciles, reconcile_errors, reconcile_duration)
}

/// The control plane request families (token wait, slowdowns, requests,
/// request duration), registered, with a zero series of requests for each
/// operation and status class.
fn register_control_plane(registry: &mut Registry) -> Arc<ControlPlaneRequests> {
    let control_plane = Arc::new(ControlPlaneRequests {
        requests: Family::default(),
        duration: Family::new_with_constructor(request_histogram),
        token_wait: Family::new_with_constructor(token_wait_histogram),
        slowdowns: Family::default(),
    });
    registry.register_with_unit(
        "control_plane_token_wait",
        "Time control plane HTTP attempts waited for a token of their budget",
        Unit::Seconds,
        control_plane.token_wait.clone(),
    );
    registry.register(
        "control_plane_slowdowns",
        "Answers that slowed a control plane's budget, by cause (429|503|502|504|timeout)",
        control_plane.slowdowns.clone(),
    );
    registry.register(
        "control_plane_requests",
        "Control plane HTTP attempts by operation and status class (a retried request counts once per attempt)",
        control_plane.requests.clone(),
    );
    registry.register_with_unit(
        "control_plane_request_duration",
        "Duration of control plane HTTP attempts by operation",
        Unit::Seconds,
        control_plane.duration.clone(),
    );
    for operation in crate::controlplane::operation::Operation::ALL {
        for status_class in crate::controlplane::operation::STATUS_CLASSES {
            let _ = control_plane.requests.get_or_create(&RequestLabels {
                operation: operation.as_str(),
                status_class,
            });
        }
    }
    control_plane
}

/// The `verifications` and `revision_outcomes` families, registered, with
/// a zero series for each known outcome.
fn register_outcomes(
    registry: &mut Registry,
) -> (
    Family<VerificationLabels, Counter>,
    Family<VerificationLabels, Counter>,
) {
    let verifications = Family::<VerificationLabels, Counter>::default();
    registry.register(
        "verifications",
        "Verifications of AgentDeployments on their agent server (spec.verify) by outcome, Verified or the failure reason (a deferred verification does not count)",
        verifications.clone(),
    );
    let revision_outcomes = Family::<VerificationLabels, Counter>::default();
    registry.register(
        "revision_outcomes",
        "Revisions the operator followed to their end, by end status (DEPLOYED or a failure)",
        revision_outcomes.clone(),
    );
    for outcome in REVISION_OUTCOMES {
        let _ = revision_outcomes.get_or_create(&VerificationLabels { outcome });
    }
    for outcome in VERIFICATION_OUTCOMES {
        let _ = verifications.get_or_create(&VerificationLabels { outcome });
    }
    (verifications, revision_outcomes)
}

/// The `verification_cases` family, registered, with a zero series for
/// each outcome.
fn register_cases(registry: &mut Registry) -> Family<VerificationLabels, Counter> {
    let cases = Family::<VerificationLabels, Counter>::default();
    registry.register(
        "verification_cases",
        "Cases of verification suites (spec.verify.suite) run on agent servers, by outcome, Passed or Failed (a suite runs once per revision and suite)",
        cases.clone(),
    );
    for outcome in CASE_OUTCOMES {
        let _ = cases.get_or_create(&VerificationLabels { outcome });
    }
    cases
}

/// The operator's metrics and their registry. Cheap to share behind an `Arc`
/// (the controllers' [`Shared`](crate::controller::Shared) holds one); every
/// method takes `&self`.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<OutcomeLabels, Counter>,
    reconcile_errors: Family<ErrorLabels, Counter>,
    reconcile_duration: HistogramFamily<KindLabels>,
    control_plane: Arc<ControlPlaneRequests>,
    time_to_ready: Histogram,
    leader: Gauge,
    ready_states: Arc<ReadyStates>,
    plane_states: Arc<PlaneStates>,
    drift_states: Arc<DriftStates>,
    verifications: Family<VerificationLabels, Counter>,
    revision_outcomes: Family<VerificationLabels, Counter>,
    verification_cases: Family<VerificationLabels, Counter>,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh registry with every metric of the table in the module docs.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix(PREFIX);
        let (reconciles, reconcile_errors, reconcile_duration) = register_reconciles(&mut registry);
        let control_plane = register_control_plane(&mut registry);
        let time_to_ready = time_to_ready_histogram();
        registry.register_with_unit(
            "time_to_ready",
            "Time from a new AgentDeployment generation to Ready=True on it",
            Unit::Seconds,
            time_to_ready.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica runs the controllers (holds the leader lease, or leader election is off)",
            leader.clone(),
        );
        let (verifications, revision_outcomes) = register_outcomes(&mut registry);
        let verification_cases = register_cases(&mut registry);
        let ready_states = Arc::new(ReadyStates::default());
        registry.register_collector(Box::new(ready_states.clone()));
        let plane_states = Arc::new(PlaneStates::default());
        registry.register_collector(Box::new(plane_states.clone()));
        let drift_states = Arc::new(DriftStates::default());
        registry.register_collector(Box::new(drift_states.clone()));
        Self {
            registry,
            reconciles,
            reconcile_errors,
            reconcile_duration,
            control_plane,
            time_to_ready,
            leader,
            ready_states,
            plane_states,
            drift_states,
            verifications,
            revision_outcomes,
            verification_cases,
        }
    }

    /// Records one reconcile pass of `kind` (e.g. `AgentDeployment`) that
    /// took `elapsed`; `error_reason` is `Some(Error::reason())` when the
    /// pass failed, and `blocked` is true when it returned `Ok` with the
    /// object `Stalled` ([`track_pass`]).
    pub fn observe_reconcile(
        &self,
        kind: &'static str,
        error_reason: Option<&'static str>,
        blocked: bool,
        elapsed: Duration,
    ) {
        let outcome = match error_reason {
            None if blocked => OUTCOME_BLOCKED,
            None => OUTCOME_SUCCESS,
            Some(reason) => {
                self.reconcile_errors
                    .get_or_create(&ErrorLabels { kind, reason })
                    .inc();
                OUTCOME_ERROR
            }
        };
        self.reconciles
            .get_or_create(&OutcomeLabels { kind, outcome })
            .inc();
        self.reconcile_duration
            .get_or_create(&KindLabels { kind })
            .observe(elapsed.as_secs_f64());
    }

    /// An observer for [`ClientConfig::observer`](crate::controlplane::ClientConfig::observer):
    /// counts every control plane HTTP attempt into this registry.
    pub fn request_observer(&self) -> Arc<dyn RequestObserver> {
        self.control_plane.clone()
    }

    /// Records one verification attempt of `spec.verify` with its outcome:
    /// `Verified` or a fixed failure reason (a constant of
    /// [`crate::api::conditions::reason`]).
    pub fn observe_verification(&self, outcome: &'static str) {
        self.verifications
            .get_or_create(&VerificationLabels { outcome })
            .inc();
    }

    /// Records the cases of one run of a verification suite: `passed` and
    /// `failed` of them.
    pub fn observe_cases(&self, passed: u32, failed: u32) {
        for (outcome, n) in [("Passed", passed), ("Failed", failed)] {
            self.verification_cases
                .get_or_create(&VerificationLabels { outcome })
                .inc_by(u64::from(n));
        }
    }

    /// Records one revision the operator followed to its end, with its end
    /// `status`; an in-progress status records nothing.
    pub fn observe_revision_outcome(&self, status: &crate::controlplane::types::RevisionStatus) {
        if let Some(outcome) = revision_outcome(status) {
            self.revision_outcomes
                .get_or_create(&VerificationLabels { outcome })
                .inc();
        }
    }

    /// Records the time, in seconds, an AgentDeployment took from a new
    /// generation to `Ready=True` on that generation.
    pub fn observe_time_to_ready(&self, seconds: f64) {
        self.time_to_ready.observe(seconds);
    }

    /// Sets `agent_operator_leader`: whether this replica runs the controllers.
    pub fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    /// Adds a source of `agent_operator_resources{kind}`: `count` is called on
    /// every scrape (keep it cheap, e.g. a walk over a reflector store) and
    /// the counts of every source of the same kind are summed.
    pub fn track_ready(
        &self,
        kind: &'static str,
        count: impl Fn() -> ReadyCounts + Send + Sync + 'static,
    ) {
        self.ready_states
            .sources
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((kind, Box::new(count)));
    }

    /// Adds a source of the per-AgentControlPlane metrics (budget rate,
    /// ceiling, pause, reconcile queue, deferred passes): `samples` is
    /// called on every scrape (keep it cheap).
    pub fn track_planes(&self, samples: impl Fn() -> Vec<PlaneSample> + Send + Sync + 'static) {
        self.plane_states
            .sources
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Box::new(samples));
    }

    /// Adds a source of `agent_operator_drifted_deployments`: `samples` is
    /// called on every scrape (keep it cheap, e.g. a walk over a reflector
    /// store); it lists each AgentControlPlane with at least one
    /// AgentDeployment under `managementPolicy: Observe`.
    pub fn track_drift(&self, samples: impl Fn() -> Vec<DriftSample> + Send + Sync + 'static) {
        self.drift_states
            .sources
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Box::new(samples));
    }

    /// Creates `agent_operator_control_plane_slowdowns_total` at 0 for
    /// every cause, and an empty `agent_operator_control_plane_token_wait_seconds`,
    /// of every AgentControlPlane the plane sources show.
    fn zero_plane_slowdowns(&self) {
        let sources = self
            .plane_states
            .sources
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        for sample in sources.iter().flat_map(|source| source()) {
            let _ = self
                .control_plane
                .token_wait
                .get_or_create(&PlaneLabels::of(&sample.plane));
            for cause in crate::controlplane::operation::SLOWDOWN_CAUSES {
                let _ = self.control_plane.slowdowns.get_or_create(&SlowdownLabels {
                    namespace: sample.plane.namespace.clone(),
                    control_plane: sample.plane.name.clone(),
                    cause,
                });
            }
        }
    }

    /// Every metric as OpenMetrics text ([`OPENMETRICS_CONTENT_TYPE`]).
    ///
    /// Errors: only if formatting fails, which writing to a `String` does not.
    pub fn encode(&self) -> Result<String, fmt::Error> {
        self.zero_plane_slowdowns();
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kinds_are_the_controllers() {
        // The kind names the controllers count their passes under
        // (AgentAssistant and AgentCron name theirs in `run_in_scope`).
        let mut controllers = [
            crate::controller::cluster_control_plane::KIND,
            crate::controller::control_plane::KIND,
            crate::controller::listener::KIND,
            crate::controller::deployment::runner::DEPLOYMENT_KIND,
            "AgentAssistant",
            "AgentCron",
        ];
        let mut kinds = KINDS;
        controllers.sort_unstable();
        kinds.sort_unstable();
        assert_eq!(kinds, controllers);
    }

    #[test]
    fn revisions_are_counted_by_end_status_from_zero() {
        use crate::controlplane::types::RevisionStatus;
        let m = Metrics::new();
        let text = m.encode().unwrap();
        for outcome in REVISION_OUTCOMES {
            let line = format!("agent_operator_revision_outcomes_total{{outcome=\"{outcome}\"}}");
            assert_eq!(sample(&text, &line), Some(0.0), "{outcome}: {text}");
        }
        for status in [
            RevisionStatus::Deployed,
            RevisionStatus::Deployed,
            RevisionStatus::BuildFailed,
            RevisionStatus::Building,
            RevisionStatus::Unknown,
            RevisionStatus::Other("PRUNE_FAILED".into()),
            RevisionStatus::Other("WARMING_UP".into()),
        ] {
            m.observe_revision_outcome(&status);
        }
        let text = m.encode().unwrap();
        let count = |o: &str| {
            sample(
                &text,
                &format!("agent_operator_revision_outcomes_total{{outcome=\"{o}\"}}"),
            )
        };
        assert_eq!(count("DEPLOYED"), Some(2.0));
        assert_eq!(count("BUILD_FAILED"), Some(1.0));
        assert_eq!(count("OTHER_FAILED"), Some(1.0));
        assert_eq!(count("SKIPPED"), Some(0.0));
    }

    fn sample(text: &str, prefix: &str) -> Option<f64> {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    }

    #[test]
    fn reconciles_are_counted_by_outcome_and_reason() {
        let m = Metrics::new();
        m.observe_reconcile("AgentDeployment", None, false, Duration::from_millis(20));
        m.observe_reconcile("AgentDeployment", None, false, Duration::from_millis(30));
        m.observe_reconcile("AgentDeployment", None, true, Duration::from_millis(5));
        m.observe_reconcile(
            "AgentDeployment",
            Some("ControlPlaneError"),
            false,
            Duration::from_secs(1),
        );
        let text = m.encode().unwrap();
        assert_eq!(
            sample(
                &text,
                r#"agent_operator_reconciles_total{kind="AgentDeployment",outcome="success"}"#
            ),
            Some(2.0),
            "{text}"
        );
        assert_eq!(
            sample(
                &text,
                r#"agent_operator_reconciles_total{kind="AgentDeployment",outcome="error"}"#
            ),
            Some(1.0)
        );
        assert_eq!(
            sample(
                &text,
                r#"agent_operator_reconciles_total{kind="AgentDeployment",outcome="blocked"}"#
            ),
            Some(1.0)
        );
        assert_eq!(
            sample(
                &text,
                r#"agent_operator_reconcile_errors_total{kind="AgentDeployment",reason="ControlPlaneError"}"#
            ),
            Some(1.0)
        );
        assert_eq!(
            sample(
                &text,
                r#"agent_operator_reconcile_duration_seconds_count{kind="AgentDeployment"}"#
            ),
            Some(4.0)
        );
        assert!(text.ends_with("# EOF\n"), "OpenMetrics terminator");
    }

    #[test]
    fn control_plane_requests_are_counted_through_the_observer() {
        let m = Metrics::new();
        let observer = m.request_observer();
        observer.observe("get_deployment", "2xx", Duration::from_millis(12));
        observer.observe("get_deployment", "5xx", Duration::from_millis(40));
        observer.observe("get_deployment", "2xx", Duration::from_millis(8));
        let text = m.encode().unwrap();
        assert_eq!(
            sample(
                &text,
                r#"agent_operator_control_plane_requests_total{operation="get_deployment",status_class="2xx"}"#
            ),
            Some(2.0),
            "{text}"
        );
        assert_eq!(
            sample(
                &text,
                r#"agent_operator_control_plane_request_duration_seconds_count{operation="get_deployment"}"#
            ),
            Some(3.0)
        );
    }

    #[test]
    fn ready_states_are_summed_per_kind_at_scrape_time() {
        let m = Metrics::new();
        let text = m.encode().unwrap();
        assert!(
            !text.contains("agent_operator_resources{"),
            "no source, no series"
        );
        let live = Arc::new(Mutex::new(vec![Some("True"), None]));
        let seen = live.clone();
        m.track_ready("AgentDeployment", move || {
            let mut c = ReadyCounts::default();
            for s in seen.lock().unwrap().iter() {
                c.add(*s);
            }
            c
        });
        m.track_ready("AgentDeployment", || ReadyCounts {
            ready_true: 1,
            ready_false: 2,
            unknown: 0,
        });
        let text = m.encode().unwrap();
        let series = |ready: &str| {
            sample(
                &text,
                &format!(r#"agent_operator_resources{{kind="AgentDeployment",ready="{ready}"}}"#),
            )
        };
        assert_eq!(series("True"), Some(2.0), "{text}");
        assert_eq!(series("False"), Some(2.0));
        assert_eq!(series("Unknown"), Some(1.0));
        live.lock().unwrap().push(Some("False"));
        let text = m.encode().unwrap();
        assert_eq!(
            sample(
                &text,
                r#"agent_operator_resources{kind="AgentDeployment",ready="False"}"#
            ),
            Some(3.0),
            "recomputed on every scrape"
        );
    }

    #[test]
    fn time_to_ready_and_leader_are_exposed() {
        let m = Metrics::new();
        m.observe_time_to_ready(42.0);
        m.set_leader(true);
        let text = m.encode().unwrap();
        assert_eq!(
            sample(&text, "agent_operator_time_to_ready_seconds_count"),
            Some(1.0),
            "{text}"
        );
        assert_eq!(sample(&text, "agent_operator_leader "), Some(1.0));
    }

    #[test]
    fn every_counter_series_known_at_start_is_zero_before_its_first_event() {
        let m = Metrics::new();
        let text = m.encode().unwrap();
        let zero = |series: String| {
            assert_eq!(
                sample(&text, &format!("{series} ")),
                Some(0.0),
                "{series}\n{text}"
            );
        };
        for kind in KINDS {
            for outcome in OUTCOMES {
                zero(format!(
                    r#"agent_operator_reconciles_total{{kind="{kind}",outcome="{outcome}"}}"#
                ));
            }
            for reason in error_reasons() {
                zero(format!(
                    r#"agent_operator_reconcile_errors_total{{kind="{kind}",reason="{reason}"}}"#
                ));
            }
        }
        for op in crate::controlplane::operation::Operation::ALL {
            for class in crate::controlplane::operation::STATUS_CLASSES {
                zero(format!(
                    r#"agent_operator_control_plane_requests_total{{operation="{}",status_class="{class}"}}"#,
                    op.as_str()
                ));
            }
        }
        for outcome in VERIFICATION_OUTCOMES {
            zero(format!(
                r#"agent_operator_verifications_total{{outcome="{outcome}"}}"#
            ));
        }
        for kind in KINDS {
            zero(format!(
                r#"agent_operator_reconcile_duration_seconds_count{{kind="{kind}"}}"#
            ));
        }
        assert!(
            !text.contains("agent_operator_control_plane_slowdowns_total{"),
            "no AgentControlPlane known yet"
        );
    }

    /// The slowdown and token wait series of a control plane are zero once
    /// it is tracked, and the zero series is the one an event counts on.
    #[test]
    fn a_tracked_control_plane_has_its_series_at_zero_before_its_first_event() {
        let m = Metrics::new();
        let plane = PlaneLabel {
            namespace: "tenant".into(),
            name: "plane".into(),
        };
        let shown = plane.clone();
        m.track_planes(move || {
            vec![PlaneSample {
                plane: shown.clone(),
                rate: None,
                ceiling: None,
                pause_seconds: 0.0,
                running: 0,
                waiting: 0,
                deferred: 0,
                deferred_total: 0,
            }]
        });
        let text = m.encode().unwrap();
        for cause in crate::controlplane::operation::SLOWDOWN_CAUSES {
            let series = format!(
                r#"agent_operator_control_plane_slowdowns_total{{namespace="tenant",control_plane="plane",cause="{cause}"}} "#
            );
            assert_eq!(sample(&text, &series), Some(0.0), "{series}\n{text}");
        }
        assert_eq!(
            sample(
                &text,
                r#"agent_operator_control_plane_token_wait_seconds_count{namespace="tenant",control_plane="plane"} "#
            ),
            Some(0.0),
            "{text}"
        );
        m.request_observer().observe_slowdown(&plane, "429");
        let text = m.encode().unwrap();
        assert_eq!(
            sample(
                &text,
                r#"agent_operator_control_plane_slowdowns_total{namespace="tenant",control_plane="plane",cause="429"} "#
            ),
            Some(1.0),
            "the zero series is the one that counts"
        );
    }

    #[test]
    fn error_reasons_cover_every_error() {
        let reasons: Vec<&str> = error_reasons().collect();
        assert_eq!(
            reasons,
            [
                "KubeError",
                "ControlPlaneError",
                "FinalizerError",
                "DeletionPending",
                "DeletionBlocked",
                "InUse",
                "InvalidObject",
                "RegistryUnavailable",
            ]
        );
        // Each reason once: a dashboard sums over them.
        let unique: std::collections::BTreeSet<&str> = reasons.iter().copied().collect();
        assert_eq!(unique.len(), reasons.len());
        let text = Metrics::new().encode().unwrap();
        assert!(
            text.contains(r#"reason="RegistryUnavailable""#),
            "pre-registered"
        );
    }

    #[tokio::test]
    async fn a_pass_is_blocked_when_its_last_outcome_is_stalled() {
        // The controllers note the outcome in their one write
        // (`controller::kind::write`); here, the notes themselves.
        let (n, blocked) = track_pass(async {
            note_pass_outcome(true);
            1
        })
        .await;
        assert_eq!((n, blocked), (1, true));
        let (_, blocked) = track_pass(async {
            note_pass_outcome(true);
            note_pass_outcome(false);
        })
        .await;
        assert!(!blocked, "the last outcome wins");
        let (_, blocked) = track_pass(async {}).await;
        assert!(!blocked, "no status written: not blocked");
        note_pass_outcome(true); // outside a pass: no effect, no panic
    }

    /// Every `agent_operator_*` name in `text` (PromQL or series lines).
    fn metric_names(text: &str) -> std::collections::BTreeSet<String> {
        let mut names = std::collections::BTreeSet::new();
        let mut rest = text;
        while let Some(at) = rest.find("agent_operator_") {
            let tail = &rest[at..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            names.insert(tail[..end].to_owned());
            rest = &tail[end..];
        }
        names
    }

    /// Every metric name the shipped alert rules and the recorded alert
    /// series (deploy/prometheus/) use is one this registry exposes, so a
    /// renamed metric fails here rather than silencing an alert.
    #[test]
    fn the_alert_rules_and_recorded_series_name_only_metrics_of_the_registry() {
        let m = Metrics::new();
        m.observe_reconcile("AgentDeployment", None, false, Duration::from_millis(1));
        let observer = m.request_observer();
        observer.observe("get_deployment", "2xx", Duration::from_millis(1));
        let plane = PlaneLabel {
            namespace: "n".into(),
            name: "p".into(),
        };
        observer.observe_token_wait(&plane, Duration::from_millis(1));
        m.observe_time_to_ready(1.0);
        m.track_ready("AgentDeployment", ReadyCounts::default);
        let shown = plane.clone();
        m.track_planes(move || {
            vec![PlaneSample {
                plane: shown.clone(),
                rate: Some(1.0),
                ceiling: Some(2.0),
                pause_seconds: 0.0,
                running: 0,
                waiting: 0,
                deferred: 0,
                deferred_total: 0,
            }]
        });
        crate::leader::renewed_now();
        let exposed: std::collections::BTreeSet<String> = m
            .encode()
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split(['{', ' ']).next())
            .map(str::to_owned)
            .collect();
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/prometheus");
        let mut files = vec![dir.join("alerts.yaml")];
        let recorded = std::fs::read_dir(dir.join("recorded")).expect("deploy/prometheus/recorded");
        files.extend(recorded.map(|e| e.unwrap().path()));
        assert!(files.len() > 1, "recorded series exist");
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let names = metric_names(&text);
            assert!(!names.is_empty(), "{}", file.display());
            for name in names {
                // A histogram is also named by its family (the docs do).
                assert!(
                    exposed.contains(&name) || exposed.contains(&format!("{name}_bucket")),
                    "{} uses {name}, which the registry does not expose: {exposed:?}",
                    file.display()
                );
            }
        }
    }

    #[test]
    fn drifted_deployments_are_summed_by_control_plane() {
        let m = Metrics::new();
        assert!(
            !m.encode().unwrap().contains("drifted_deployments"),
            "no series without an observed AgentDeployment"
        );
        let plane = |name: &str| PlaneLabel {
            namespace: "tenant".into(),
            name: name.into(),
        };
        let (a, b) = (plane("a"), plane("b"));
        m.track_drift(move || {
            vec![
                DriftSample {
                    plane: a.clone(),
                    drifted: 2,
                },
                DriftSample {
                    plane: b.clone(),
                    drifted: 0,
                },
            ]
        });
        let a = plane("a");
        m.track_drift(move || {
            vec![DriftSample {
                plane: a.clone(),
                drifted: 1,
            }]
        });
        let text = m.encode().unwrap();
        assert_eq!(
            sample(
                &text,
                r#"agent_operator_drifted_deployments{namespace="tenant",control_plane="a"}"#
            ),
            Some(3.0),
            "{text}"
        );
        assert_eq!(
            sample(
                &text,
                r#"agent_operator_drifted_deployments{namespace="tenant",control_plane="b"}"#
            ),
            Some(0.0),
            "{text}"
        );
    }
}
