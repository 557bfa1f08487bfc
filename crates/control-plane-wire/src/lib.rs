//! control-plane-wire: what both sides of the control plane REST API of
//! LangSmith Deployment agree on.
//!
//! - [`types`]: the wire types (snake_case JSON) of deployments, revisions,
//!   listeners, integrations, logs and errors;
//! - [`rules`]: facts of the service the client checks before it sends and
//!   the emulator enforces when it answers (reserved secret names, build
//!   commands).
//!
//! The client is `agent_operator::controlplane` (which re-exports
//! [`types`] as `agent_operator::controlplane::types`); the server is the
//! `control-plane-emulator` crate. Neither owns a copy, so they cannot drift
//! apart. Plain data and pure functions: no Kubernetes, HTTP or runtime
//! dependency.
//!
//! Source of every fact: docs/control-plane-api.md (cited by section
//! heading, e.g. docs/control-plane-api.md "Errors").
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod rules;
pub mod types;
