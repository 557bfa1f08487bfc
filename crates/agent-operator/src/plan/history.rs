//! `status.revisions` of an AgentDeployment: the last revisions followed,
//! newest first (docs/BEHAVIOUR.md, "follow"). Pure.
//!
//! - A revision read by a pass is recorded as the service reports it
//!   ([`record`]); one a pass started and has not read yet is listed at
//!   once as `CREATING` ([`started`]), so that a burst of spec changes
//!   keeps the newest revisions, not the ones that happened to be polled.
//! - A revision still in progress in the list when a newer one starts is
//!   superseded: the service shows it `SKIPPED` (the project's API notes,
//!   "Revision": terminal, superseded by a newer revision before it was
//!   built), and the list says so instead of its last status read.

use crate::api::deployment::{REVISION_HISTORY_LIMIT, RevisionSummary};
use crate::controlplane::types::{Revision, RevisionStatus};

/// Puts `rev` in `history` (replacing the entry with its id, keeping what
/// its verification found), newest first, superseding the older ones still
/// in progress, keeping at most [`REVISION_HISTORY_LIMIT`].
pub fn record(history: &mut Vec<RevisionSummary>, rev: &Revision) {
    let config = rev.source_revision_config.as_ref();
    let ended = !rev.status.is_in_progress();
    let entry = RevisionSummary {
        id: rev.id.clone(),
        status: rev.status.to_string(),
        created_at: rev.created_at.clone(),
        finished_at: rev.updated_at.clone().filter(|_| ended),
        repo_ref: config.and_then(|c| c.repo_ref.clone()),
        image_uri: config.and_then(|c| c.image_uri.clone()),
        commit_sha: config.and_then(|c| c.repo_commit_sha.clone()),
        image_digest: config
            .and_then(|c| c.image_uri.as_deref())
            .and_then(crate::registry::digest_of),
        verified: None,
        suite: None,
    };
    upsert(history, entry);
}

/// Lists revision `id`, started by this pass at `now` (RFC 3339) and not
/// read yet, as `CREATING` (an entry already there is left as it is).
pub fn started(history: &mut Vec<RevisionSummary>, id: &str, now: &str) {
    if history.iter().any(|r| r.id == id) {
        return;
    }
    upsert(
        history,
        RevisionSummary {
            id: id.to_owned(),
            status: RevisionStatus::Creating.to_string(),
            created_at: Some(now.to_owned()),
            ..Default::default()
        },
    );
}

/// Puts `entry` in `history` as described in [`record`].
fn upsert(history: &mut Vec<RevisionSummary>, entry: RevisionSummary) {
    match history.iter().position(|r| r.id == entry.id) {
        // What its verification found is ours, not the control plane's.
        Some(i) => {
            let verified = history[i].verified;
            let suite = history[i].suite.take();
            history[i] = RevisionSummary {
                verified,
                suite,
                ..entry
            };
        }
        None => history.insert(0, entry),
    }
    // Newest first by creation time (RFC 3339 strings of one service sort).
    history.sort_by(|a, b| b.created_at.cmp(&a.created_at));
    supersede(history);
    history.truncate(REVISION_HISTORY_LIMIT);
}

/// Marks `SKIPPED` every entry still in progress below the newest one.
fn supersede(history: &mut [RevisionSummary]) {
    for older in history.iter_mut().skip(1) {
        if RevisionStatus::from(older.status.clone()).is_in_progress() {
            older.status = RevisionStatus::Skipped.to_string();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn revision(id: &str, status: &str, created: &str, config: serde_json::Value) -> Revision {
        serde_json::from_value(serde_json::json!({
            "id": id, "status": status, "created_at": created,
            "source_revision_config": config
        }))
        .unwrap()
    }

    #[test]
    fn a_revision_entry_carries_its_commit_or_its_image_digest() {
        let d = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let mut history = Vec::new();
        record(
            &mut history,
            &revision(
                "r1",
                "DEPLOYED",
                "2026-01-01T00:00:00Z",
                serde_json::json!({"repo_ref": "main", "repo_commit_sha": "abc123"}),
            ),
        );
        record(
            &mut history,
            &revision(
                "r2",
                "DEPLOYED",
                "2026-01-02T00:00:00Z",
                serde_json::json!({"image_uri": format!("r.example/acme/agent@{d}")}),
            ),
        );
        record(
            &mut history,
            &revision(
                "r3",
                "DEPLOYED",
                "2026-01-03T00:00:00Z",
                serde_json::json!({"image_uri": "r.example/acme/agent:v1"}),
            ),
        );
        let got: Vec<(&str, Option<&str>, Option<&str>)> = history
            .iter()
            .map(|r| {
                (
                    r.id.as_str(),
                    r.commit_sha.as_deref(),
                    r.image_digest.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("r3", None, None),
                ("r2", None, Some(d)),
                ("r1", Some("abc123"), None)
            ]
        );
    }

    /// Twelve changes in a row, each revision started and never read but
    /// the last: the list holds the ten newest, newest first, the
    /// superseded ones `SKIPPED`, the newest `CREATING` until read.
    #[test]
    fn a_burst_of_changes_keeps_the_newest_revisions_and_skips_the_superseded() {
        let mut history = Vec::new();
        record(
            &mut history,
            &revision(
                "r00",
                "AWAITING_DEPLOY",
                "2026-01-01T00:00:00Z",
                serde_json::json!({}),
            ),
        );
        for i in 1..12 {
            started(
                &mut history,
                &format!("r{i:02}"),
                &format!("2026-01-01T00:00:{:02}Z", i * 2),
            );
        }
        let ids: Vec<&str> = history.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "r11", "r10", "r09", "r08", "r07", "r06", "r05", "r04", "r03", "r02"
            ]
        );
        assert_eq!(history[0].status, "CREATING");
        assert!(
            history[1..].iter().all(|r| r.status == "SKIPPED"),
            "{history:?}"
        );
        // The newest read: its status replaces CREATING; a DEPLOYED older
        // one stays DEPLOYED.
        record(
            &mut history,
            &revision(
                "r11",
                "DEPLOYED",
                "2026-01-01T00:00:22Z",
                serde_json::json!({}),
            ),
        );
        assert_eq!(history[0].status, "DEPLOYED");
        started(&mut history, "r12", "2026-01-01T00:00:30Z");
        assert_eq!(
            history[1].status, "DEPLOYED",
            "an ended revision is not superseded"
        );
        // Started again: nothing changes.
        let before = history.clone();
        started(&mut history, "r12", "2026-01-01T00:00:31Z");
        assert_eq!(history, before);
    }
}
