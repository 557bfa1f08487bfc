//! The memory of the built-in agent servers' assistants (the routes are
//! `agent_assistants`'s): apart from the routes so that the emulator's
//! state holds it without importing them.

use std::collections::HashMap;

use agent_server_wire::Assistant;
use uuid::Uuid;

/// One assistant: every version, the one that serves, and its `context`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Record {
    /// Every version, oldest first.
    pub(crate) versions: Vec<Assistant>,
    /// The version that serves.
    pub(crate) latest: i64,
    /// The assistant's `context`: the last one a create or PATCH set. The
    /// pinned server keeps it with the assistant, not with a version, so
    /// `/latest` does not bring an older version's context back.
    pub(crate) context: Option<serde_json::Value>,
}

impl Record {
    /// The version that serves, with the assistant's `context`.
    pub(crate) fn serving(&self) -> Assistant {
        let mut a = self
            .versions
            .iter()
            .find(|a| a.version == Some(self.latest))
            .cloned()
            .unwrap_or_default();
        a.context = self.context.clone();
        a
    }
}

/// The assistants of every built-in agent server, by (deployment, assistant).
pub(crate) type Assistants = HashMap<(Uuid, Uuid), Record>;

/// The serving versions of the assistants of deployment `dep` in `all`,
/// oldest first (for `/assistants/search`).
pub(crate) fn listed(all: &Assistants, dep: Uuid) -> Vec<serde_json::Value> {
    let mut list: Vec<Assistant> = all
        .iter()
        .filter(|((d, _), _)| *d == dep)
        .map(|(_, r)| r.serving())
        .collect();
    list.sort_by(|a, b| a.created_at.cmp(&b.created_at));
    list.into_iter()
        .map(|a| serde_json::to_value(a).unwrap_or_default())
        .collect()
}

/// Most run threads kept per deployment (the oldest go first).
pub(crate) const RUNS_KEPT: usize = 100;

/// The crons of every built-in agent server, and the threads of their runs.
#[derive(Debug, Default)]
pub(crate) struct Crons {
    /// Every cron, by (deployment, cron id).
    pub(crate) crons: HashMap<(Uuid, Uuid), agent_server_wire::Cron>,
    /// The threads of the runs kept (`on_run_completed: keep`), by
    /// deployment, oldest first; at most [`RUNS_KEPT`] per deployment.
    pub(crate) runs: Vec<(Uuid, agent_server_wire::Thread)>,
}
