//! Typed client of the control plane REST API: wire types (snake_case), errors,
//! and the HTTP client.
//!
//! Source: `control-plane-and-agent-server.md`, "Endpoints" and "Authentication";
//! `api-facts.md`, "Control plane".

pub mod client;
pub mod error;
pub mod types;

pub use client::{
    ClientConfig, ControlPlaneClient, ListDeployments, ListRevisions, RateLimit, RequestObserver,
};
pub use error::Error;
