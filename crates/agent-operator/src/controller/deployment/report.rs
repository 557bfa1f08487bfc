//! The "report" step of the AgentDeployment pass: the one value a pass
//! returns ([`Report`]: status, annotations, events, requeue) and the one
//! function that writes it ([`write`](fn@write)), always in the same order:
//! status (server-side apply, only when changed), then the annotations (one
//! merge patch), then the events. Also the mapping of control plane errors
//! to conditions (docs/control-plane-api.md "Errors").
//!
//! Steps build reports, never write them: only `reconcile` calls [`write`](fn@write).
//! The one write a step makes itself is the create-pending marker, which
//! must be stored before the POST it guards (`obtain::create`).

use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};

use super::obtain::set_annotations;
use crate::api::conditions::{READY, find, reason};
use crate::api::deployment::{AgentDeployment, AgentDeploymentStatus};
use crate::controller::report::{ReasonTable, reason_for, transient_summary};
use crate::controller::resolve::Blocked;
use crate::controller::status::{Outcome, conditions};
use crate::controller::{Context, Error};
use crate::controlplane::Error as CpError;

pub use crate::plan::verdict::Note;

/// A step's result: `Err` ends the pass with this report (nothing after it
/// runs); a Kubernetes error converts into a report that writes nothing.
pub type Flow<T> = Result<T, Box<Report>>;

/// Everything one pass writes, and what it returns once written.
#[derive(Debug)]
pub struct Report {
    /// The object the pass decided on when it read it fresh (the writes and
    /// events name that one); `None`: the object the pass was given.
    pub object: Option<Box<AgentDeployment>>,
    /// The new status, only when it differs from the object's.
    pub status: Option<Box<AgentDeploymentStatus>>,
    /// Annotations to set, or to remove (`None`), in one merge patch; empty:
    /// no metadata write.
    pub annotations: Vec<(&'static str, Option<String>)>,
    /// Events, published after the writes, in this order.
    pub events: Vec<Note>,
    /// The requeue, or the error that `error_policy` backs off from.
    pub then: Result<Action, Error>,
}

impl From<Error> for Box<Report> {
    fn from(e: Error) -> Self {
        Report::failed(e)
    }
}

impl Report {
    /// A pass that writes nothing and requeues with `action`.
    pub fn end(action: Action) -> Box<Self> {
        Box::new(Self {
            object: None,
            status: None,
            annotations: Vec::new(),
            events: Vec::new(),
            then: Ok(action),
        })
    }

    /// A pass that writes nothing and returns `e`.
    pub fn failed(e: Error) -> Box<Self> {
        let mut r = Self::end(Action::await_change());
        r.then = Err(e);
        r
    }

    /// Writes `outcome` to the conditions of `obj`, keeping the other status
    /// fields; requeues with `action`.
    pub fn outcome(obj: &AgentDeployment, outcome: &Outcome, action: Action) -> Box<Self> {
        let mut r = Self::end(action);
        r.status = changed(obj, outcome_status(obj, outcome));
        r
    }

    /// A stalled state: the conditions, a Warning event unless the object
    /// already shows it, and the slow requeue used while waiting for a
    /// human or a watch event.
    pub fn stalled(
        obj: &AgentDeployment,
        ctx: &Context,
        reason: &'static str,
        message: String,
    ) -> Box<Self> {
        let repeated = already_reported(obj, reason, &message);
        let mut r = Self::outcome(
            obj,
            &Outcome::Stalled {
                reason,
                message: message.clone(),
            },
            Action::requeue(ctx.config.blocked_interval),
        );
        if !repeated {
            r.events.push((EventType::Warning, reason, message));
        }
        r
    }

    /// A missing input (Secret, AgentControlPlane, listener).
    pub fn blocked(obj: &AgentDeployment, ctx: &Context, blocked: Blocked) -> Box<Self> {
        Self::stalled(obj, ctx, blocked.reason, blocked.message)
    }

    /// Returns `then` after the writes instead.
    pub fn then(mut self: Box<Self>, then: Result<Action, Error>) -> Box<Self> {
        self.then = then;
        self
    }

    /// The writes name `fresh` (a fresh read of the object) when set.
    pub fn on(mut self: Box<Self>, fresh: Option<&AgentDeployment>) -> Box<Self> {
        if self.object.is_none() {
            self.object = fresh.map(|o| Box::new(o.clone()));
        }
        self
    }
}

/// `status` when it differs from the status of `obj` (a write is due).
pub fn changed(
    obj: &AgentDeployment,
    status: AgentDeploymentStatus,
) -> Option<Box<AgentDeploymentStatus>> {
    (obj.status.as_ref() != Some(&status)).then(|| Box::new(status))
}

/// The status of `obj` with `outcome` in its conditions.
fn outcome_status(obj: &AgentDeployment, outcome: &Outcome) -> AgentDeploymentStatus {
    let mut status = obj.status.clone().unwrap_or_default();
    if status.observed_generation != obj.metadata.generation {
        // A new generation ends any drift fight (`super::fight`).
        status.drift_corrections.clear();
    }
    status.observed_generation = obj.metadata.generation;
    let previous = std::mem::take(&mut status.conditions);
    status.conditions = conditions(&previous, outcome, obj.metadata.generation);
    super::verify::set_condition(&mut status, &previous, obj);
    status
}

/// Writes `report` about `obj` (or the fresh read it names): status, then
/// annotations, then events; returns its `then`. A failed write returns the
/// Kubernetes error, and what follows it is not written.
pub async fn write(
    api: &Api<AgentDeployment>,
    ctx: &Context,
    obj: &AgentDeployment,
    report: Box<Report>,
) -> Result<Action, Error> {
    let Report {
        object,
        status,
        annotations,
        events,
        then,
    } = *report;
    let obj = object.as_deref().unwrap_or(obj);
    if let Some(status) = status {
        crate::controller::report::apply_status(api, &obj.name_any(), &*status).await?;
    }
    if !annotations.is_empty() {
        let pairs: Vec<(&str, Option<&str>)> = annotations
            .iter()
            .map(|(k, v)| (*k, v.as_deref()))
            .collect();
        set_annotations(api, obj, &pairs).await?;
    }
    for (type_, reason, note) in events {
        crate::controller::report::publish(ctx, obj, type_, reason, note).await;
    }
    then
}

/// True when the object already shows `reason` and `message` on its
/// conditions (so a Warning event is not repeated on every pass).
pub fn already_reported(obj: &AgentDeployment, reason: &str, message: &str) -> bool {
    obj.status
        .as_ref()
        .and_then(|s| find(&s.conditions, READY))
        .is_some_and(|c| c.reason == reason && c.message == message)
}

/// Maps a control plane error to a status outcome: the AgentDeployment row
/// of the one error-to-reason table ([`ReasonTable::DEPLOYMENT`]: 401/403 →
/// Unauthorized, 409 → NameConflict, other → InvalidSpec), transient →
/// progressing (retried).
pub fn error_outcome(operation: &str, e: &CpError) -> Outcome {
    match reason_for(&ReasonTable::DEPLOYMENT, e) {
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

/// `outcome` (of a definite rejection: 400, 409, 422) with what happens to
/// the refused request: it is not sent again until the desired state
/// changes (the spec, or a value of a Secret it uses) or until `retry_at`
/// (`status.rejectedRequest.retryAfterTime`, RFC 3339). Pure.
pub fn not_resent_until(outcome: Outcome, retry_at: &str) -> Outcome {
    let note = format!(
        "; not sent again until the spec or a Secret it uses changes, or until {retry_at} \
         (status.rejectedRequest.retryAfterTime)"
    );
    match outcome {
        Outcome::Stalled { reason, message } => Outcome::Stalled {
            reason,
            message: message + &note,
        },
        Outcome::Progressing { reason, message } => Outcome::Progressing {
            reason,
            message: message + &note,
        },
        other => other,
    }
}

/// The outcome of a control plane error in an apply pass of `obj`: as
/// [`error_outcome`], except that a refused key (401) is the
/// AgentControlPlane's problem, not this object's: it waits for its plane
/// like any blocked object (`ControlPlaneNotReady`), and a plane or key
/// Secret change retries it. (Its pass may run before the plane's own probe
/// has marked the plane Stalled.)
pub fn apply_error_outcome(obj: &AgentDeployment, operation: &str, e: &CpError) -> Outcome {
    if !matches!(e, CpError::Unauthorized { .. }) {
        return error_outcome(operation, e);
    }
    Outcome::Stalled {
        reason: reason::CONTROL_PLANE_NOT_READY,
        message: format!(
            "AgentControlPlane {}/{} is not ready: Unauthorized: {operation}: {e}",
            obj.namespace().unwrap_or_default(),
            obj.spec.control_plane_ref.name
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_plane_errors_map_to_reasons() {
        let o = error_outcome(
            "create deployment",
            &CpError::Unauthorized {
                detail: "bad key".into(),
            },
        );
        assert_eq!(o.reason(), reason::UNAUTHORIZED);
        let o = error_outcome(
            "create deployment",
            &CpError::Conflict {
                detail: "exists".into(),
            },
        );
        assert_eq!(o.reason(), reason::NAME_CONFLICT);
        let o = error_outcome("get deployment", &CpError::Timeout);
        assert!(matches!(o, Outcome::Progressing { .. }));
        let o = error_outcome(
            "patch deployment",
            &CpError::BadRequest {
                detail: "name is immutable".into(),
            },
        );
        assert_eq!(o.reason(), reason::INVALID_SPEC);
        assert!(o.message().contains("name is immutable"));
    }

    /// The messages of refused requests, as the condition shows them: the
    /// service's location and message without empty parts, and when the
    /// request may be sent again.
    #[test]
    fn refused_requests_say_why_and_when_they_are_sent_again() {
        use crate::controlplane::types::ValidationError;
        let at = "2026-11-26T17:40:00Z";
        let v = |loc: &[&str], msg: &str, kind: &str| ValidationError {
            loc: loc.iter().map(|l| serde_json::json!(l)).collect(),
            msg: msg.into(),
            kind: kind.into(),
        };
        let cases = [
            (
                // A 422 whose detail is a string.
                CpError::from_response(
                    reqwest::StatusCode::UNPROCESSABLE_ENTITY,
                    None,
                    br#"{"detail": "image_uri: registry not allowed"}"#,
                ),
                reason::INVALID_SPEC,
                "create deployment: validation failed (422): image_uri: registry not allowed; not \
                 sent again until the spec or a Secret it uses changes, or until \
                 2026-11-26T17:40:00Z (status.rejectedRequest.retryAfterTime)",
            ),
            (
                CpError::Validation {
                    errors: vec![
                        v(
                            &["body", "source_config", "repo_url"],
                            "Field required",
                            "missing",
                        ),
                        v(&[], "", "unknown"),
                        v(&["body", ""], "too long", ""),
                    ],
                },
                reason::INVALID_SPEC,
                "create deployment: validation failed (422): body.source_config.repo_url: Field \
                 required (missing); body: too long; not sent again until the spec or a Secret it \
                 uses changes, or until 2026-11-26T17:40:00Z \
                 (status.rejectedRequest.retryAfterTime)",
            ),
            (
                CpError::Validation { errors: vec![] },
                reason::INVALID_SPEC,
                "create deployment: validation failed (422): the service gave no detail; not sent \
                 again until the spec or a Secret it uses changes, or until 2026-11-26T17:40:00Z \
                 (status.rejectedRequest.retryAfterTime)",
            ),
            (
                CpError::Conflict {
                    detail: "Deployment name already exists.".into(),
                },
                reason::NAME_CONFLICT,
                "create deployment: conflict (409): Deployment name already exists.; not sent \
                 again until the spec or a Secret it uses changes, or until 2026-11-26T17:40:00Z \
                 (status.rejectedRequest.retryAfterTime)",
            ),
        ];
        for (e, want_reason, want) in cases {
            assert!(e.is_rejection(), "{e}");
            let o = not_resent_until(error_outcome("create deployment", &e), at);
            assert_eq!(o.reason(), want_reason, "{e}");
            assert_eq!(o.message(), want, "{e}");
        }
    }
}
