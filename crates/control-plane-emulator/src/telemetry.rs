//! The binary's logging and shutdown trigger: the workspace's one setup
//! (`agent-operator-telemetry`, `crates/telemetry`), the same as the
//! operator's (same `--log-format` values, same colour rule), without
//! linking the product.

pub use agent_operator_telemetry::{LogFormat, init, shutdown_signal};
