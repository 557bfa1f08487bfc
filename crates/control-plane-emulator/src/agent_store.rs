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
    /// The threads kept, by deployment, oldest first: of cron runs
    /// (`on_run_completed: keep`) and of runs on threads; at most
    /// [`RUNS_KEPT`] per deployment.
    pub(crate) runs: Vec<(Uuid, agent_server_wire::Thread)>,
}

/// Drops the oldest threads of `dep` beyond [`RUNS_KEPT`].
pub(crate) fn keep_newest(runs: &mut Vec<(Uuid, agent_server_wire::Thread)>, dep: Uuid) {
    let kept = runs.iter().filter(|(d, _)| *d == dep).count();
    let mut extra = kept.saturating_sub(RUNS_KEPT);
    runs.retain(|(d, _)| {
        let drop = *d == dep && extra > 0;
        extra -= usize::from(drop);
        !drop
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_oldest_threads_of_the_deployment_beyond_the_bound_go() {
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let thread = |i: usize| agent_server_wire::Thread {
            thread_id: i.to_string(),
            ..Default::default()
        };
        let mut runs: Vec<_> = (0..RUNS_KEPT + 2).map(|i| (a, thread(i))).collect();
        runs.insert(1, (b, thread(999)));
        keep_newest(&mut runs, a);
        assert_eq!(runs.len(), RUNS_KEPT + 1);
        assert_eq!(runs[0], (b, thread(999)), "another deployment's stay");
        assert_eq!(runs[1].1.thread_id, "2", "the two oldest went");
    }
}
