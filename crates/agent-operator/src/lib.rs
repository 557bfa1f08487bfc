//! agent-operator: run AI agent server deployments the GitOps way.
//!
//! A Kubernetes operator (kube-rs) that reconciles `AgentDeployment` custom
//! resources (group `agentserver.dev`, version `v1alpha1`) against the agent
//! platform's control plane REST API. [`converge`] runs the same reconcile
//! core without Kubernetes, for `agentctl apply`.
//!
//! This crate is the product only: the control plane emulator that tests and
//! the demo run against is the `control-plane-emulator` crate (the server side
//! of [`controlplane::types`], which are the `control-plane-wire` crate's,
//! linked by both), and the envtest harness lives in
//! `agent-operator-test-support`.
//!
//! Source of every fact about the remote APIs: docs/control-plane-api.md
//! (cited by section heading, e.g. docs/control-plane-api.md "Errors").
#![forbid(unsafe_code)]

pub mod agentserver;
pub mod allowlist;
pub mod api;
pub mod controller;
pub mod controlplane;
pub mod converge;
pub mod docgen;
pub mod http;
pub mod langsmith;
pub mod leader;
pub mod metrics;
pub mod metrics_auth;
pub mod plan;
pub mod pod_policy;
pub mod redact;
pub mod registry;
pub mod shard;
pub mod telemetry;
