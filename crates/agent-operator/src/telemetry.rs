//! Logging setup: `tracing` with an `EnvFilter` (`RUST_LOG`), text or JSON,
//! and the shutdown signal; the workspace's one copy, in the
//! `agent-operator-telemetry` crate (`crates/telemetry`), shared with the
//! emulator.

pub use agent_operator_telemetry::{LogFormat, colour_on_stderr, init, shutdown_signal};
