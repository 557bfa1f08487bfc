//! The "report" edge shared by every controller: status writes
//! (server-side apply with the operator's one field manager), events, and the
//! one classification of control plane errors that each controller maps to
//! its condition reasons.
//!
//! Status and events are written at the end of a pass; a message that
//! changed on every retry (a `Retry-After` delay, a 5xx body) would rewrite
//! status on each attempt, so transient errors get a stable summary.
//! Source: docs/control-plane-api.md "Errors".

use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource};
use serde::Serialize;
use tracing::warn;

use super::status::Outcome;
use super::{Context, Error};
use crate::api::FIELD_MANAGER;
use crate::api::conditions::{READY, find};
use crate::controlplane::Error as CpError;

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
    /// An answer the client does not understand, or a bad configuration.
    Other,
}

/// The class of a control plane error.
pub fn classify(e: &CpError) -> ErrorClass {
    match e {
        CpError::Unauthorized { .. } => ErrorClass::Unauthorized,
        CpError::Forbidden { .. } => ErrorClass::Forbidden,
        CpError::NotFound { .. } => ErrorClass::NotFound,
        e if e.is_rejection() => ErrorClass::Rejected,
        e if e.is_transient() => ErrorClass::Transient,
        _ => ErrorClass::Other,
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

/// Publishes an event about `obj`; a failure is logged, not returned.
pub(crate) async fn publish<K>(ctx: &Context, obj: &K, type_: EventType, reason: &str, note: String)
where
    K: Resource<DynamicType = ()>,
{
    let event = Event {
        type_,
        reason: reason.to_owned(),
        note: Some(note),
        action: "Reconcile".into(),
        secondary: None,
    };
    // A recorder per event: kube's `Recorder` keeps every event it
    // published for six minutes (to patch repeats as a series) and prunes
    // only when it publishes again, so after a fleet rollout a shared one
    // held thousands of events for as long as the fleet stayed quiet
    // (rollout of 2,000: RSS peak 49.8 MiB with a shared recorder, 33.8 MiB
    // without). The operator does not repeat events (a Warning is published
    // when its condition changes), so nothing is lost by skipping series.
    let recorder = kube::runtime::events::Recorder::new(ctx.client.clone(), ctx.reporter.clone());
    if let Err(e) = recorder.publish(&event, &obj.object_ref(&())).await {
        warn!(error = %e, "cannot publish event");
    }
}

/// Publishes an event when the `Ready` condition changes status, reason or
/// message:
/// Normal when it became True, Warning otherwise.
pub(crate) async fn publish_transition<K>(
    ctx: &Context,
    obj: &K,
    previous: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    outcome: &Outcome,
) where
    K: Resource<DynamicType = ()>,
{
    let now_ready = matches!(outcome, Outcome::Ready { .. });
    let unchanged = find(previous, READY).is_some_and(|c| {
        (c.status == "True") == now_ready
            && c.reason == outcome.reason()
            && c.message == outcome.message()
    });
    if unchanged {
        return;
    }
    let type_ = if now_ready {
        EventType::Normal
    } else {
        EventType::Warning
    };
    publish(
        ctx,
        obj,
        type_,
        outcome.reason(),
        outcome.message().to_owned(),
    )
    .await;
}

/// A stable summary of a transient error for a condition message: without
/// the parts that change from one attempt to the next (the `Retry-After`
/// delay, a 5xx body), so that retrying does not rewrite the status, whose
/// change would trigger another pass before the backoff. Pure.
pub(crate) fn transient_summary(e: &CpError) -> String {
    format!("{}; retrying", e.stable_summary())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_classified_once_for_every_controller() {
        let d = || "x".to_owned();
        assert_eq!(
            classify(&CpError::Unauthorized { detail: d() }),
            ErrorClass::Unauthorized
        );
        assert_eq!(
            classify(&CpError::Forbidden { detail: d() }),
            ErrorClass::Forbidden
        );
        assert_eq!(
            classify(&CpError::NotFound { detail: d() }),
            ErrorClass::NotFound
        );
        assert_eq!(
            classify(&CpError::BadRequest { detail: d() }),
            ErrorClass::Rejected
        );
        assert_eq!(
            classify(&CpError::Conflict { detail: d() }),
            ErrorClass::Rejected
        );
        assert_eq!(classify(&CpError::Timeout), ErrorClass::Transient);
        assert_eq!(
            classify(&CpError::RateLimited {
                status: 429,
                retry_after: Some(std::time::Duration::from_secs(7)),
            }),
            ErrorClass::Transient
        );
        assert_eq!(
            transient_summary(&CpError::RateLimited {
                status: 429,
                retry_after: Some(std::time::Duration::from_secs(7)),
            }),
            transient_summary(&CpError::RateLimited {
                status: 429,
                retry_after: Some(std::time::Duration::from_secs(9)),
            }),
            "the message does not change with Retry-After"
        );
    }
}
