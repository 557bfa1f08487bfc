//! Typed client of the control plane REST API: wire types (snake_case), errors,
//! endpoints, retries, rate limit and the HTTP client.
//!
//! Source: docs/control-plane-api.md, from "Hosts and headers" to
//! "Polling".
//!
//! - [`client`]: [`ControlPlaneClient`] and its [`ClientConfig`];
//! - [`endpoint`]: cloud regions, self-hosted `/api-host`, HTTPS rules;
//! - [`error`]: [`Error`], classified transient or permanent;
//! - [`retry`]: [`RetryPolicy`] (GET and DELETE only, honouring `Retry-After`);
//! - [`limit`]: the client-side [`RateLimit`];
//! - [`budget`]: the shared, adaptive [`Budget`] of one control plane, and
//!   [`window`]: its slow start of the requests in flight;
//! - [`operation`]: the fixed [`Operation`] names and the [`RequestObserver`];
//! - [`response`]: pure decoding of one answer;
//! - [`merge`]: merging a partial `resource_spec`;
//! - [`types`]: the wire types shared with the emulator (the
//!   `control-plane-wire` crate's, re-exported).
#![deny(missing_docs)]

pub mod budget;
pub mod client;
pub mod endpoint;
pub mod error;
pub mod limit;
pub mod merge;
pub mod operation;
pub mod response;
pub mod retry;
pub mod types;
pub mod window;

pub use budget::{Budget, Priority, Slot};
pub use client::{ClientConfig, ControlPlaneClient, ListDeployments, ListRevisions};
pub use endpoint::Region;
pub use error::Error;
pub use limit::RateLimit;
pub use operation::{Operation, PlaneLabel, RequestObserver};
pub use retry::RetryPolicy;
