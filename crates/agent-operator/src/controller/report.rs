//! The "report" edge shared by every controller: status writes
//! (server-side apply with the operator's one field manager), events, the
//! one classification of the errors of every remote service
//! ([`Classified`]: the control plane's and the agent server's) and the one
//! error-to-reason table over it ([`ReasonTable`], [`reason_for`]), with a
//! row for each kind and each input check.
//!
//! Status and events are written at the end of a pass; a message that
//! changed on every retry (a `Retry-After` delay, a 5xx body) would rewrite
//! status on each attempt, so transient errors get a stable summary.
//! Source: docs/control-plane-api.md "Errors".

use crate::plan::verdict::EventType;
use k8s_openapi::api::core::v1::Event as CoreEvent;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Resource};
use serde::Serialize;
use tracing::warn;

use crate::agentserver::Error as AsError;
use crate::api::FIELD_MANAGER;
use crate::api::conditions::reason;
use crate::controller::context::Shared;
use crate::controller::error::Error;
use crate::controlplane::Error as CpError;
use crate::controlplane::error::Refusal;
use crate::plan::status::Outcome;

/// The kstatus conditions for `outcome` ([`Outcome::kstatus`]: `Ready`,
/// and `Reconciling` or `Stalled` only while `True`; the status write
/// removes one that is no longer written), keeping transition times from
/// `previous` where a condition's status did not change (a new transition
/// is stamped now), then the conditions
/// of `previous` that only a full pass decides ([`CARRIED`]), as they were:
/// a pass that stops early (paused, a missing Secret or AgentControlPlane)
/// says nothing new about them, and the status write (server-side apply)
/// would otherwise remove them. A full pass replaces them itself.
pub fn conditions(
    previous: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    outcome: &Outcome,
    generation: Option<i64>,
) -> Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    let (reason, message) = (outcome.reason(), outcome.message());
    let mut out: Vec<_> = outcome
        .kstatus()
        .map(|(type_, status)| {
            crate::api::conditions::condition(previous, type_, status, reason, message, generation)
        })
        .collect();
    out.extend(
        previous
            .iter()
            .filter(|c| CARRIED.contains(&c.type_.as_str()))
            .cloned(),
    );
    out
}

/// The condition types [`conditions`] carries forward from the previous
/// status: `Drifted` (`spec.managementPolicy: Observe`), decided only by a
/// pass that read the remote object, and `Promoted` (`spec.promotion`),
/// decided by a pass that reaches its end.
pub const CARRIED: [&str; 2] = [
    crate::api::conditions::DRIFTED,
    crate::api::conditions::PROMOTED,
];

/// The `Drifted` condition and `status.drift` of an agent server object
/// (AgentAssistant, AgentCron) at the end of a pass under `policy`:
/// under `Manage` neither; under `Observe`, `decided` is what a pass that
/// read the object found (`what` names it in the message), and `None`
/// keeps both as the last such pass left them ([`conditions`] carried the
/// condition). The AgentDeployment's pass has its own (`set_drifted`).
pub fn apply_drift(
    conditions: &mut Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
    drift: &mut Vec<crate::api::deployment::DriftField>,
    previous: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    policy: crate::api::deployment::ManagementPolicy,
    decided: Option<(Vec<crate::api::deployment::DriftField>, String)>,
    generation: Option<i64>,
) {
    use crate::api::conditions::{DRIFTED, condition};
    use crate::api::deployment::ManagementPolicy;
    match (policy, decided) {
        (ManagementPolicy::Manage, _) => {
            conditions.retain(|c| c.type_ != DRIFTED);
            drift.clear();
        }
        (ManagementPolicy::Observe, None) => {}
        (ManagementPolicy::Observe, Some((found, what))) => {
            let (status, reason, message) =
                crate::plan::policy::drifted_object(&found, &what, "one request");
            conditions.retain(|c| c.type_ != DRIFTED);
            conditions.push(condition(
                previous, DRIFTED, status, reason, message, generation,
            ));
            *drift = found;
        }
    }
}

/// What a control plane error means for the resource that got it, the same
/// for every controller (each maps a class to its own condition reason).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    /// 401: the API key is wrong.
    Unauthorized,
    /// 403: the key may not do this (workspace, plan).
    Forbidden,
    /// 404: the object named does not exist.
    NotFound,
    /// 400, 409, 422: the request itself is refused; not sent again until
    /// something the user controls changes.
    Rejected,
    /// Timeouts, transport errors, 5xx, 429: retried with backoff.
    Transient,
    /// The client configuration cannot be used (the endpoint, the key or
    /// workspace as header values, the CA bundle): no request was sent.
    InvalidEndpoint,
    /// An answer the client does not understand (an unexpected status, a
    /// body that does not decode).
    Other,
}

/// An error of a remote service that the one reason table can read: the
/// control plane client's and the agent server client's errors both
/// implement it, so that a row of [`ReasonTable`] serves a kind whatever
/// service it speaks to.
pub trait Classified {
    /// The class of the error.
    fn class(&self) -> ErrorClass;

    /// The refusal a 403 names (docs/control-plane-api.md "Credentials and
    /// refusals"); `None` by default.
    fn refusal(&self) -> Option<Refusal> {
        None
    }

    /// True for a 409 (a [`ErrorClass::Rejected`] with its own column).
    fn is_conflict(&self) -> bool {
        false
    }
}

impl Classified for CpError {
    fn class(&self) -> ErrorClass {
        match self {
            CpError::Unauthorized { .. } => ErrorClass::Unauthorized,
            CpError::Forbidden { .. } => ErrorClass::Forbidden,
            CpError::NotFound { .. } => ErrorClass::NotFound,
            CpError::InvalidEndpoint(_) => ErrorClass::InvalidEndpoint,
            e if e.is_rejection() => ErrorClass::Rejected,
            e if e.is_transient() => ErrorClass::Transient,
            _ => ErrorClass::Other,
        }
    }

    fn refusal(&self) -> Option<Refusal> {
        CpError::refusal(self)
    }

    fn is_conflict(&self) -> bool {
        matches!(self, CpError::Conflict { .. })
    }
}

/// The agent server's errors (docs/control-plane-api.md "Agent server"): an
/// unknown assistant is the object named that does not exist; a 404 of
/// anything else means no agent server answers at that URL, which, like a
/// client configuration that cannot be used, is an unusable endpoint.
/// The registry client's errors (`spec.imagePolicy`) on the same table.
impl Classified for crate::registry::Error {
    fn class(&self) -> ErrorClass {
        match self {
            crate::registry::Error::Unauthorized { .. } => ErrorClass::Unauthorized,
            crate::registry::Error::NotFound { .. } => ErrorClass::NotFound,
            crate::registry::Error::InvalidReference { .. }
            | crate::registry::Error::WrongPlatform { .. } => ErrorClass::Rejected,
            crate::registry::Error::Unavailable { .. } | crate::registry::Error::Budget { .. } => {
                ErrorClass::Transient
            }
            crate::registry::Error::Other { .. } => ErrorClass::Other,
        }
    }
}

impl Classified for AsError {
    fn class(&self) -> ErrorClass {
        match self {
            AsError::Unauthorized { status: 403, .. } => ErrorClass::Forbidden,
            AsError::Unauthorized { .. } => ErrorClass::Unauthorized,
            AsError::AssistantNotFound { .. } => ErrorClass::NotFound,
            AsError::NotFound { .. } | AsError::InvalidConfig(_) => ErrorClass::InvalidEndpoint,
            AsError::Rejected { .. } => ErrorClass::Rejected,
            e if e.is_transient() => ErrorClass::Transient,
            _ => ErrorClass::Other,
        }
    }
}

/// One row of the error-to-reason table: the condition reason each
/// [`ErrorClass`] gives for one kind or one input check. Transient errors
/// are never in it: they are retried with backoff (`Reconciling` with
/// `ControlPlaneUnavailable` where a controller reports them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReasonTable {
    /// 401.
    pub unauthorized: &'static str,
    /// 403, unless `refusals` and the detail names one of them.
    pub forbidden: &'static str,
    /// 403 `WorkspaceRequired` → `WorkspaceRequired` and 403
    /// `DeploymentNotEnabled` → `DeploymentNotEnabled` when true
    /// (docs/control-plane-api.md "Credentials and refusals").
    pub refusals: bool,
    /// 404.
    pub not_found: &'static str,
    /// 400 and 422.
    pub rejected: &'static str,
    /// 409.
    pub conflict: &'static str,
    /// An unusable client configuration (`InvalidEndpoint`); `None`:
    /// retried with backoff.
    pub invalid_endpoint: Option<&'static str>,
    /// An answer the client does not understand; `None`: retried with
    /// backoff. The fallbacks differ on purpose and are kept as they were:
    /// an AgentDeployment stalls with `InvalidSpec` (its request is the
    /// likely cause), an AgentControlPlane or AgentListener with
    /// `ControlPlaneUnavailable` (a probe or read of the service), and an
    /// input check retries.
    pub other: Option<&'static str>,
}

impl ReasonTable {
    /// AgentDeployment: a 403 is `Unauthorized` (the key may not do this),
    /// 409 `NameConflict`, anything else the request's fault
    /// (`InvalidSpec`).
    pub const DEPLOYMENT: Self = Self {
        unauthorized: reason::UNAUTHORIZED,
        forbidden: reason::UNAUTHORIZED,
        refusals: true,
        not_found: reason::INVALID_SPEC,
        rejected: reason::INVALID_SPEC,
        conflict: reason::NAME_CONFLICT,
        invalid_endpoint: Some(reason::INVALID_SPEC),
        other: Some(reason::INVALID_SPEC),
    };

    /// AgentControlPlane (the authentication probe): a 404 or an unusable
    /// URL is `InvalidSpec` (`spec.url`), a refused probe request or an
    /// unexpected answer `ControlPlaneUnavailable`.
    pub const CONTROL_PLANE: Self = Self {
        unauthorized: reason::UNAUTHORIZED,
        forbidden: reason::FORBIDDEN,
        refusals: true,
        not_found: reason::INVALID_SPEC,
        rejected: reason::CONTROL_PLANE_UNAVAILABLE,
        conflict: reason::CONTROL_PLANE_UNAVAILABLE,
        invalid_endpoint: Some(reason::INVALID_SPEC),
        other: Some(reason::CONTROL_PLANE_UNAVAILABLE),
    };

    /// AgentListener (the read of its listener): 403 is `NotEnterprise`
    /// (listeners need a self-hosted enterprise organisation), 404
    /// `ListenerNotFound`.
    pub const LISTENER: Self = Self {
        unauthorized: reason::UNAUTHORIZED,
        forbidden: reason::NOT_ENTERPRISE,
        refusals: false,
        not_found: reason::LISTENER_NOT_FOUND,
        rejected: reason::INVALID_SPEC,
        conflict: reason::INVALID_SPEC,
        invalid_endpoint: Some(reason::CONTROL_PLANE_UNAVAILABLE),
        other: Some(reason::CONTROL_PLANE_UNAVAILABLE),
    };

    /// The listener check of an AgentDeployment's placement: as
    /// [`Self::LISTENER`], but what is not about the input is retried.
    pub const LISTENER_CHECK: Self = Self {
        invalid_endpoint: None,
        other: None,
        ..Self::LISTENER
    };

    /// The GitHub integration check of an AgentDeployment
    /// (`sourceConfig.integrationRef`): 401 and 403 are `Unauthorized`, 404
    /// `IntegrationNotFound`; what is not about the input is retried.
    pub const INTEGRATION_CHECK: Self = Self {
        unauthorized: reason::UNAUTHORIZED,
        forbidden: reason::UNAUTHORIZED,
        refusals: false,
        not_found: reason::INTEGRATION_NOT_FOUND,
        rejected: reason::INVALID_SPEC,
        conflict: reason::INVALID_SPEC,
        invalid_endpoint: None,
        other: None,
    };

    /// The agent server checks of an AgentDeployment's `spec.verify`
    /// (`deployment/verify/`): a refused key is `AgentServerUnauthorized`,
    /// an unknown assistant `AssistantNotFound`, no agent server at the URL
    /// `AgentServerUnreachable`, and a refused or failed run `RunFailed`.
    /// Transient errors are retried, and reported as
    /// `AgentServerUnreachable` meanwhile.
    pub const VERIFY: Self = Self {
        unauthorized: reason::AGENT_SERVER_UNAUTHORIZED,
        forbidden: reason::AGENT_SERVER_UNAUTHORIZED,
        refusals: false,
        not_found: reason::ASSISTANT_NOT_FOUND,
        rejected: reason::RUN_FAILED,
        conflict: reason::RUN_FAILED,
        invalid_endpoint: Some(reason::AGENT_SERVER_UNREACHABLE),
        other: Some(reason::RUN_FAILED),
    };
}

impl ReasonTable {
    /// AgentAssistant (`controller/assistant/`): a refused key is
    /// `AgentServerUnauthorized`, a 404 `GraphNotFound`, a refused request
    /// `AssistantRejected`, no agent server at the URL
    /// `AgentServerUnreachable`; anything else is retried.
    pub const ASSISTANT: Self = Self {
        unauthorized: reason::AGENT_SERVER_UNAUTHORIZED,
        forbidden: reason::AGENT_SERVER_UNAUTHORIZED,
        refusals: false,
        not_found: reason::GRAPH_NOT_FOUND,
        rejected: reason::ASSISTANT_REJECTED,
        conflict: reason::ASSISTANT_REJECTED,
        invalid_endpoint: Some(reason::AGENT_SERVER_UNREACHABLE),
        other: None,
    };

    /// AgentCron (`controller/cron/`): a refused key is
    /// `AgentServerUnauthorized`, a 404 (an unknown graph or assistant)
    /// `GraphNotFound`, a refused request (a bad schedule or time zone)
    /// `CronRejected`, no agent server at the URL `AgentServerUnreachable`;
    /// anything else is retried.
    pub const CRON: Self = Self {
        unauthorized: reason::AGENT_SERVER_UNAUTHORIZED,
        forbidden: reason::AGENT_SERVER_UNAUTHORIZED,
        refusals: false,
        not_found: reason::GRAPH_NOT_FOUND,
        rejected: reason::CRON_REJECTED,
        conflict: reason::CRON_REJECTED,
        invalid_endpoint: Some(reason::AGENT_SERVER_UNREACHABLE),
        other: None,
    };
}

/// The condition reason `e` gives in `table` ([`Classified::class`], then
/// the row); `None` for an error retried with backoff (transient, or a
/// fallback of `None`). Pure.
pub fn reason_for(table: &ReasonTable, e: &impl Classified) -> Option<&'static str> {
    match e.class() {
        ErrorClass::Unauthorized => Some(table.unauthorized),
        ErrorClass::Forbidden if table.refusals => Some(match e.refusal() {
            Some(Refusal::WorkspaceRequired) => reason::WORKSPACE_REQUIRED,
            Some(Refusal::DeploymentNotEnabled) => reason::DEPLOYMENT_NOT_ENABLED,
            _ => table.forbidden,
        }),
        ErrorClass::Forbidden => Some(table.forbidden),
        ErrorClass::NotFound => Some(table.not_found),
        ErrorClass::Rejected if e.is_conflict() => Some(table.conflict),
        ErrorClass::Rejected => Some(table.rejected),
        ErrorClass::Transient => None,
        ErrorClass::InvalidEndpoint => table.invalid_endpoint,
        ErrorClass::Other => table.other,
    }
}

/// Server-side applies `status` to the status subresource of `name` with the
/// operator's field manager. Errors: the Kubernetes API error.
pub(crate) async fn apply_status<K>(
    api: &Api<K>,
    name: &str,
    status: &impl Serialize,
) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(Error::Kube)?;
    Ok(())
}

/// The outcome of the control plane error `e` of `operation` for a kind or
/// check whose row is `table`: `Stalled` with the row's reason, or
/// `Progressing` with `ControlPlaneUnavailable` and a stable summary for an
/// error retried with backoff ([`transient_summary`]). The one mapping of
/// errors to outcomes of every controller.
pub fn error_outcome(table: &ReasonTable, operation: &str, e: &CpError) -> Outcome {
    match reason_for(table, e) {
        Some(reason) => Outcome::Stalled {
            reason,
            message: format!("{operation}: {e}"),
        },
        None => Outcome::Progressing {
            reason: reason::CONTROL_PLANE_UNAVAILABLE,
            message: format!("{operation}: {}", transient_summary(e)),
        },
    }
}

/// Publishes an event about `obj` ([`core_event`]); a failure is logged,
/// not returned.
pub(crate) async fn publish<K>(ctx: &Shared, obj: &K, type_: EventType, reason: &str, note: String)
where
    K: Resource<DynamicType = ()>,
{
    let regarding = obj.object_ref(&());
    let event = core_event(
        &ctx.reporter,
        &regarding,
        type_,
        reason,
        note,
        k8s_openapi::jiff::Timestamp::now(),
    );
    let namespace = regarding.namespace.as_deref().unwrap_or("default");
    let events: Api<CoreEvent> = Api::namespaced(ctx.client.clone(), namespace);
    if let Err(e) = events.create(&PostParams::default(), &event).await {
        warn!(error = %e, "cannot publish event");
    }
}

/// The Event (core/v1) of one occurrence of `reason` about `regarding` at
/// `now`: the fields of an events.k8s.io/v1 Event (`eventTime`, `action`,
/// `reportingController` and `reportingInstance`) and also `firstTimestamp`,
/// `lastTimestamp` and `count` 1, so that
/// `kubectl get events --sort-by=.lastTimestamp` sorts it and `LAST SEEN`
/// shows its age. It is created through core/v1 because events.k8s.io/v1
/// refuses a create that sets `deprecatedLastTimestamp` (422
/// "lastTimestamp: … needs to be unset", pinned by an integration test) and kube's `Recorder` writes only `eventTime` (a `series` needs
/// a repeat, and the operator does not repeat events: a Warning is
/// published when its condition changes). The name is the object's name
/// and the time in hexadecimal nanoseconds, as kube's `Recorder` names
/// them. Pure.
pub(crate) fn core_event(
    reporter: &kube::runtime::events::Reporter,
    regarding: &k8s_openapi::api::core::v1::ObjectReference,
    type_: EventType,
    reason: &str,
    note: String,
    now: k8s_openapi::jiff::Timestamp,
) -> CoreEvent {
    use k8s_openapi::api::core::v1::EventSource;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
    let controller = reporter.controller.clone();
    CoreEvent {
        metadata: ObjectMeta {
            namespace: regarding.namespace.clone(),
            name: Some(format!(
                "{}.{:x}",
                regarding.name.as_deref().unwrap_or(&controller),
                now.as_nanosecond()
            )),
            ..ObjectMeta::default()
        },
        involved_object: regarding.clone(),
        type_: Some(
            match type_ {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            }
            .to_owned(),
        ),
        reason: Some(reason.to_owned()),
        message: Some(note),
        action: Some("Reconcile".to_owned()),
        event_time: Some(MicroTime(now)),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        reporting_instance: Some(
            reporter
                .instance
                .clone()
                .unwrap_or_else(|| controller.clone()),
        ),
        source: Some(EventSource {
            component: Some(controller.clone()),
            host: None,
        }),
        reporting_component: Some(controller),
        ..CoreEvent::default()
    }
}

/// A summary of a transient error for a condition message, at the time of
/// the pass ([`transient_summary_at`]).
pub(crate) fn transient_summary(e: &CpError) -> String {
    transient_summary_at(e, k8s_openapi::jiff::Timestamp::now())
}

/// A summary of a transient error for a condition message, `now` being the
/// time of the pass: the service's answer and its status
/// ([`CpError::stable_summary`]: no body, which may change from one attempt
/// to the next), also while the request budget holds requests back after
/// it, then when the next attempt is due. A 429 or 503 with `Retry-After`
/// names that time (RFC 3339, UTC, rounded up to the second: the attempt is
/// not sent earlier); any other transient error ends in "retrying" (the
/// per-object backoff chooses the time). The message changes only when the
/// service's answer or its `Retry-After` does: one status write per attempt
/// at most, and none from a pass that was put off (status writes never
/// trigger a pass). Pure.
pub(crate) fn transient_summary_at(e: &CpError, now: k8s_openapi::jiff::Timestamp) -> String {
    let summary = e.stable_summary();
    match e {
        CpError::RateLimited {
            retry_after: Some(wait),
            ..
        } => format!(
            "{summary}; next attempt at {}, as the service asked (Retry-After)",
            rfc3339_after(now, *wait)
        ),
        _ => format!("{summary}; retrying"),
    }
}

/// `now + wait`, rounded up to the second, as RFC 3339 in UTC (`now` when
/// out of range). Pure.
pub(crate) fn rfc3339_after(
    now: k8s_openapi::jiff::Timestamp,
    wait: std::time::Duration,
) -> String {
    use k8s_openapi::jiff::{SignedDuration, Timestamp};
    let at = SignedDuration::try_from(wait)
        .ok()
        .and_then(|d| now.checked_add(d).ok())
        .unwrap_or(now);
    let second = at.as_second() + i64::from(at.subsec_nanosecond() > 0);
    Timestamp::from_second(second).unwrap_or(at).to_string()
}

/// Most bytes of a server's message kept in a status field or condition
/// (a failed verification, a refused assistant or cron request): longer ones
/// are cut by [`bounded`].
pub(crate) const MAX_MESSAGE_BYTES: usize = 600;

/// `s` cut to at most [`MAX_MESSAGE_BYTES`] bytes on a character boundary,
/// with `…` appended when cut.
pub(crate) fn bounded(mut s: String) -> String {
    if s.len() > MAX_MESSAGE_BYTES {
        let mut end = MAX_MESSAGE_BYTES;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every reason a row of the table gives names that row's kinds in the
    /// registry of reasons (docs/TROUBLESHOOTING.md is generated from it).
    #[test]
    fn every_reason_a_row_gives_lists_its_kinds_in_the_registry() {
        use crate::api::reasons::Reason;
        let rows: [(&ReasonTable, &[&str]); 8] = [
            (&ReasonTable::DEPLOYMENT, &["AgentDeployment"]),
            (
                &ReasonTable::CONTROL_PLANE,
                &["AgentControlPlane", "ClusterAgentControlPlane"],
            ),
            (&ReasonTable::LISTENER, &["AgentListener"]),
            (&ReasonTable::LISTENER_CHECK, &["AgentDeployment"]),
            (&ReasonTable::INTEGRATION_CHECK, &["AgentDeployment"]),
            (&ReasonTable::VERIFY, &["AgentDeployment"]),
            (&ReasonTable::ASSISTANT, &["AgentAssistant"]),
            (&ReasonTable::CRON, &["AgentCron"]),
        ];
        let mut missing = Vec::new();
        for (table, kinds) in rows {
            let mut reasons = vec![
                table.unauthorized,
                table.forbidden,
                table.not_found,
                table.rejected,
                table.conflict,
            ];
            reasons.extend(table.invalid_endpoint);
            reasons.extend(table.other);
            if table.refusals {
                reasons.extend([reason::WORKSPACE_REQUIRED, reason::DEPLOYMENT_NOT_ENABLED]);
            }
            for r in reasons {
                let listed = Reason::of(r).map(|row| row.kinds).unwrap_or_default();
                for kind in kinds {
                    if !listed.contains(kind) {
                        missing.push(format!("{r}: {kind}"));
                    }
                }
            }
        }
        missing.sort();
        missing.dedup();
        assert!(
            missing.is_empty(),
            "kinds missing from the registry: {missing:?}"
        );
    }

    /// One control plane error of each class, in the order of the rows
    /// below: unauthorized, forbidden, workspace required, not enabled, not
    /// found, bad request, conflict, timeout, invalid endpoint, other.
    fn one_error_per_class() -> [CpError; 10] {
        let d = || "x".to_owned();
        [
            CpError::Unauthorized { detail: d() },
            CpError::Forbidden { detail: d() },
            CpError::Forbidden {
                detail: "requires workspace specification".into(),
            },
            CpError::Forbidden {
                detail: "LangSmith Deployment is not enabled".into(),
            },
            CpError::NotFound { detail: d() },
            CpError::BadRequest { detail: d() },
            CpError::Conflict { detail: d() },
            CpError::Timeout,
            CpError::InvalidEndpoint(d()),
            CpError::UnexpectedStatus {
                status: 418,
                detail: d(),
            },
        ]
    }

    /// The reasons `table` gives [`one_error_per_class`]: `-` is retried
    /// (no reason).
    fn row(table: &ReasonTable) -> Vec<&'static str> {
        one_error_per_class()
            .iter()
            .map(|e| reason_for(table, e).unwrap_or("-"))
            .collect()
    }

    /// The whole error-to-reason table, one row per kind or check, one
    /// column per class of [`one_error_per_class`]: the AgentDeployment's
    /// and the AgentControlPlane's rows.
    #[test]
    fn one_table_maps_every_class_for_deployments_and_planes() {
        use reason::*;
        assert_eq!(
            row(&ReasonTable::DEPLOYMENT),
            [
                UNAUTHORIZED,
                UNAUTHORIZED,
                WORKSPACE_REQUIRED,
                DEPLOYMENT_NOT_ENABLED,
                INVALID_SPEC,
                INVALID_SPEC,
                NAME_CONFLICT,
                "-",
                INVALID_SPEC,
                INVALID_SPEC
            ]
        );
        assert_eq!(
            row(&ReasonTable::CONTROL_PLANE),
            [
                UNAUTHORIZED,
                FORBIDDEN,
                WORKSPACE_REQUIRED,
                DEPLOYMENT_NOT_ENABLED,
                INVALID_SPEC,
                CONTROL_PLANE_UNAVAILABLE,
                CONTROL_PLANE_UNAVAILABLE,
                "-",
                INVALID_SPEC,
                CONTROL_PLANE_UNAVAILABLE
            ]
        );
    }

    /// The same table: the rows of the AgentListener and of the checks of
    /// a listener and of a GitHub integration.
    #[test]
    fn one_table_maps_every_class_for_listeners_and_checks() {
        use reason::*;
        assert_eq!(
            row(&ReasonTable::LISTENER),
            [
                UNAUTHORIZED,
                NOT_ENTERPRISE,
                NOT_ENTERPRISE,
                NOT_ENTERPRISE,
                LISTENER_NOT_FOUND,
                INVALID_SPEC,
                INVALID_SPEC,
                "-",
                CONTROL_PLANE_UNAVAILABLE,
                CONTROL_PLANE_UNAVAILABLE
            ]
        );
        assert_eq!(
            row(&ReasonTable::LISTENER_CHECK),
            [
                UNAUTHORIZED,
                NOT_ENTERPRISE,
                NOT_ENTERPRISE,
                NOT_ENTERPRISE,
                LISTENER_NOT_FOUND,
                INVALID_SPEC,
                INVALID_SPEC,
                "-",
                "-",
                "-"
            ]
        );
        assert_eq!(
            row(&ReasonTable::INTEGRATION_CHECK),
            [
                UNAUTHORIZED,
                UNAUTHORIZED,
                UNAUTHORIZED,
                UNAUTHORIZED,
                INTEGRATION_NOT_FOUND,
                INVALID_SPEC,
                INVALID_SPEC,
                "-",
                "-",
                "-"
            ]
        );
    }

    /// The row of the agent server checks reads the agent server's errors
    /// through the same classes.
    #[test]
    fn the_agent_server_row_reads_its_errors_through_the_same_classes() {
        use crate::agentserver::Error as E;
        use std::time::Duration;
        let d = || "x".to_owned();
        let errors = [
            E::Unauthorized {
                status: 401,
                detail: d(),
            },
            E::Unauthorized {
                status: 403,
                detail: d(),
            },
            E::AssistantNotFound {
                assistant_id: "agent".into(),
                status: 422,
                detail: d(),
            },
            E::NotFound { detail: d() },
            E::InvalidConfig(d()),
            E::Rejected {
                status: 400,
                detail: d(),
            },
            E::Timeout(Duration::from_secs(1)),
            E::Unavailable {
                status: 503,
                detail: d(),
            },
            E::Decode { message: d() },
        ];
        let row: Vec<&str> = errors
            .iter()
            .map(|e| reason_for(&ReasonTable::VERIFY, e).unwrap_or("-"))
            .collect();
        use reason::*;
        assert_eq!(
            row,
            [
                AGENT_SERVER_UNAUTHORIZED,
                AGENT_SERVER_UNAUTHORIZED,
                ASSISTANT_NOT_FOUND,
                AGENT_SERVER_UNREACHABLE,
                AGENT_SERVER_UNREACHABLE,
                RUN_FAILED,
                "-",
                "-",
                RUN_FAILED
            ]
        );
    }

    /// The event of one occurrence: sortable by `lastTimestamp` (and
    /// `firstTimestamp`, `eventTime`: the same instant), counted once, with
    /// the fields events.k8s.io/v1 readers use.
    #[test]
    fn events_carry_the_timestamps_kubectl_sorts_by() {
        use k8s_openapi::api::core::v1::ObjectReference;
        let reporter = kube::runtime::events::Reporter {
            controller: "agent-operator".into(),
            instance: Some("agent-operator-7d9f".into()),
        };
        let regarding = ObjectReference {
            api_version: Some("agentserver.dev/v1alpha1".into()),
            kind: Some("AgentDeployment".into()),
            name: Some("app".into()),
            namespace: Some("team-a".into()),
            uid: Some("u-1".into()),
            ..ObjectReference::default()
        };
        let now: k8s_openapi::jiff::Timestamp = "2026-11-26T17:30:00.123456Z".parse().unwrap();
        let e = core_event(
            &reporter,
            &regarding,
            EventType::Warning,
            "RevisionFailed",
            "revision r1 ended BUILD_FAILED".into(),
            now,
        );
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["lastTimestamp"], "2026-11-26T17:30:00Z");
        assert_eq!(v["firstTimestamp"], v["lastTimestamp"]);
        assert_eq!(v["eventTime"], "2026-11-26T17:30:00.123456Z");
        assert_eq!(v["count"], 1);
        assert_eq!(v["type"], "Warning");
        assert_eq!(v["reason"], "RevisionFailed");
        assert_eq!(v["message"], "revision r1 ended BUILD_FAILED");
        assert_eq!(v["action"], "Reconcile");
        assert_eq!(v["reportingComponent"], "agent-operator");
        assert_eq!(v["reportingInstance"], "agent-operator-7d9f");
        assert_eq!(v["source"]["component"], "agent-operator");
        assert_eq!(v["involvedObject"]["name"], "app");
        assert_eq!(v["metadata"]["namespace"], "team-a");
        assert_eq!(
            v["metadata"]["name"],
            format!("app.{:x}", now.as_nanosecond())
        );
    }

    #[test]
    fn errors_are_classified_once_for_every_controller() {
        let d = || "x".to_owned();
        assert_eq!(
            (CpError::Unauthorized { detail: d() }).class(),
            ErrorClass::Unauthorized
        );
        assert_eq!(
            (CpError::Forbidden { detail: d() }).class(),
            ErrorClass::Forbidden
        );
        assert_eq!(
            (CpError::NotFound { detail: d() }).class(),
            ErrorClass::NotFound
        );
        assert_eq!(
            (CpError::BadRequest { detail: d() }).class(),
            ErrorClass::Rejected
        );
        assert_eq!(
            (CpError::Conflict { detail: d() }).class(),
            ErrorClass::Rejected
        );
        assert_eq!(CpError::Timeout.class(), ErrorClass::Transient);
        assert_eq!(
            (CpError::RateLimited {
                status: 429,
                retry_after: Some(std::time::Duration::from_secs(7)),
            })
            .class(),
            ErrorClass::Transient
        );
    }

    /// The condition message of each transient error, at one instant: the
    /// service's answer and status first, then when the next attempt is
    /// due.
    #[test]
    fn transient_messages_name_the_answer_and_the_next_attempt() {
        let now = transient_now();
        for (e, want) in transient_cases() {
            assert_eq!(transient_summary_at(&e, now), want, "{e:?}");
        }
    }

    /// The instant of the transient-message cases.
    fn transient_now() -> k8s_openapi::jiff::Timestamp {
        "2026-11-26T17:30:00.250Z".parse().unwrap()
    }

    /// Each transient error and its message at [`transient_now`].
    fn transient_cases() -> [(CpError, &'static str); 7] {
        use std::time::Duration;
        [
            (
                CpError::RateLimited {
                    status: 429,
                    retry_after: Some(Duration::from_secs(20)),
                },
                "rate limited (429); next attempt at 2026-11-26T17:30:21Z, as the service asked \
                 (Retry-After)",
            ),
            (
                CpError::RateLimited {
                    status: 503,
                    retry_after: Some(Duration::from_millis(1500)),
                },
                "service unavailable (503); next attempt at 2026-11-26T17:30:02Z, as the service \
                 asked (Retry-After)",
            ),
            (
                CpError::RateLimited {
                    status: 503,
                    retry_after: None,
                },
                "service unavailable (503); retrying",
            ),
            (
                // The budget holds requests back after a run of 503s: the
                // service's answer stays the cause.
                CpError::Deferred {
                    retry_in: Duration::from_secs(4),
                    cause: Some("service unavailable (503)".into()),
                },
                "service unavailable (503) (the last answer; requests to this control plane are \
                 slowed down until it answers again); retrying",
            ),
            (
                CpError::Deferred {
                    retry_in: Duration::from_secs(4),
                    cause: None,
                },
                "waiting for the control plane's request budget (many requests at once); retrying",
            ),
            (
                CpError::Server {
                    status: 502,
                    detail: "bad gateway".into(),
                },
                "server error (502); retrying",
            ),
            (CpError::Timeout, "timed out; retrying"),
        ]
    }

    /// The same Retry-After within one second gives the same message (no
    /// status rewrite for a burst of answers); another one names its time.
    #[test]
    fn retry_afters_within_a_second_give_one_message() {
        use std::time::Duration;
        let now = transient_now();
        let limited = |ms| CpError::RateLimited {
            status: 429,
            retry_after: Some(Duration::from_millis(ms)),
        };
        assert_eq!(
            transient_summary_at(&limited(20_000), now),
            transient_summary_at(&limited(20_500), now)
        );
        assert_ne!(
            transient_summary_at(&limited(20_000), now),
            transient_summary_at(&limited(30_000), now)
        );
    }
}
