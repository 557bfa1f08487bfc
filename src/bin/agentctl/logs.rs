//! Logs of a deployment: the end of a failed revision's log after `--wait`.

use agent_operator::controlplane::ControlPlaneClient;
use agent_operator::controlplane::types::Revision;

/// Prints the end of the log that explains a failed revision (facts
/// "Logs"). Not available yet: the control plane client has no log reads.
pub async fn print_failure_tail(_cp: &ControlPlaneClient, _deployment_id: &str, _rev: &Revision) {}
