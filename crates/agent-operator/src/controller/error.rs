//! The error of a reconcile pass ([`Error`]) and its kinds ([`ErrorKind`]),
//! apart from the controllers so that the metrics read the kinds without
//! importing the controllers (no import cycle).

use std::time::Duration;

/// Errors of a reconcile pass.
///
/// Errors of the input (missing Secret, invalid spec) are not here: they are
/// written to status and the pass returns normally.
#[derive(Debug, thiserror::Error, strum::EnumDiscriminants)]
#[strum_discriminants(name(ErrorKind), derive(strum::EnumIter))]
#[strum_discriminants(
    doc = "The variant of an [`Error`], without its data: every one is listed by `ErrorKind::iter()` (strum), so the metric label sets of [`ErrorKind::reason`] cannot miss one."
)]
pub enum Error {
    /// A Kubernetes API call failed.
    #[error("kubernetes API: {0}")]
    Kube(#[source] kube::Error),
    /// A control plane call failed.
    #[error("control plane {operation}: {source}")]
    ControlPlane {
        /// The operation, e.g. `create deployment`.
        operation: &'static str,
        /// The client error.
        #[source]
        source: crate::controlplane::Error,
    },
    /// The finalizer helper failed to add or remove the finalizer.
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<Error>>),
    /// The remote deployment is still being deleted; check again soon.
    #[error("remote deployment {0} is still being deleted")]
    DeletionPending(String),
    /// Deletion cannot proceed (missing AgentControlPlane or Secret, or paused);
    /// reported in status, retried with backoff.
    #[error("deletion blocked: {0}")]
    DeletionBlocked(String),
    /// An AgentControlPlane being deleted is still used by AgentDeployments
    /// (the message names them); checked again every
    /// [`crate::controller::requeue::IN_USE_RECHECK`], reported in status.
    #[error("in use: {0}")]
    InUse(String),
    /// The object lacks a namespace or name (should not happen for namespaced kinds).
    #[error("object has no {0}")]
    MissingObjectKey(&'static str),
    /// The image registry could not be reached, answered 5xx or 429, or its
    /// budget is spent (`spec.imagePolicy`); retried with backoff.
    #[error("image registry: {0}")]
    Registry(#[source] crate::registry::Error),
}

impl ErrorKind {
    /// A fixed, bounded reason for events and metric labels.
    pub const fn reason(self) -> &'static str {
        match self {
            ErrorKind::Kube => "KubeError",
            ErrorKind::ControlPlane => "ControlPlaneError",
            ErrorKind::Finalizer => "FinalizerError",
            ErrorKind::DeletionPending => "DeletionPending",
            ErrorKind::DeletionBlocked => "DeletionBlocked",
            ErrorKind::InUse => "InUse",
            ErrorKind::MissingObjectKey => "InvalidObject",
            ErrorKind::Registry => "RegistryUnavailable",
        }
    }
}

impl Error {
    /// A fixed, bounded reason for events and metric labels
    /// ([`ErrorKind::reason`]).
    pub fn reason(&self) -> &'static str {
        ErrorKind::from(self).reason()
    }

    /// The delay the control plane asked for, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::ControlPlane { source, .. } => source.retry_after(),
            Error::Registry(crate::registry::Error::Budget { wait, .. }) => Some(*wait),
            _ => None,
        }
    }
}
