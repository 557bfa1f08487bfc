//! Wire types of the control plane REST API (snake_case JSON): the
//! `control-plane-wire` crate's [`control_plane_wire::types`], re-exported
//! here so the client and the rest of the operator name them as
//! `controlplane::types::…`.
//!
//! Shared by the client ([`crate::controlplane::ControlPlaneClient`]) and the
//! emulator (the `control-plane-emulator` crate, which links the wire crate
//! and not this one), so both speak exactly the same shapes. The Kubernetes
//! custom resources speak camelCase and are mapped to these types by
//! explicit functions in [`crate::plan::desired`], never by sharing structs.
//!
//! Sources: docs/control-plane-api.md, sections "Deployment", "Requests",
//! "Revision", "Self-hosted placement and listeners", "Logs", "Integrations
//! (v1)" and "Errors".

pub use control_plane_wire::types::*;
