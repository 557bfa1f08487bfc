//! Reconcilers, one module per reconciled kind, and what they share: the
//! context ([`context`]), the error type with its classification
//! ([`error`]), and the requeue policy ([`requeue`]). This file only
//! declares the modules and re-exports, for the binaries and tests, the
//! names they use; nothing under `controller/` imports from it.
//!
//! Each pass is observe → decide → act → report ([`kind`]): the pure middle
//! lives in [`crate::plan`], the IO edges in [`deployment`] and [`resolve`].

pub mod assistant;
pub(crate) mod child;
pub mod cluster_control_plane;
pub mod context;
pub mod control_plane;
pub mod cron;
pub mod deployment;
pub mod error;
#[cfg(test)]
mod fake_api;
pub mod hash_key;
pub mod integrations;
pub mod kind;
pub mod listener;
pub mod placement;
pub mod plane_pass;
pub mod planes;
pub mod report;
pub mod requeue;
pub mod resolve;
pub mod scaffold;
pub mod secrets;
#[cfg(test)]
mod sequence_tests;
pub mod server_changes;
pub mod unmanaged;
pub mod watch;

pub use context::{Context, OperatorConfig, Shared};
pub use deployment::context::SECRETS_PATCH_INTERVAL;
pub use error::Error;
pub use watch::scoped_api;
