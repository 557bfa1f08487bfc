//! The rows of `agentctl revisions list`: a deployment's revisions as the
//! control plane lists them, with what went wrong marked. Pure.
//!
//! The service tells a revision's own outcome (`*_FAILED`, `INTERRUPTED`,
//! `SKIPPED`; docs/control-plane-api.md "Revision"); only the operator
//! knows whether a revision passed `spec.verify` and which ones an
//! automatic rollback left and went back to: the `status` of the
//! AgentDeployment that holds the deployment (`revisions[].verified`,
//! `verifiedRevisionId`, `verification`, `rollback`), when agentctl can
//! read it from the cluster.

use agent_operator::api::AgentDeploymentStatus;
use agent_operator::api::deployment::RevisionSummary;
use agent_operator::controlplane::types::{Revision, RevisionStatus};
use agent_operator::plan::serving;
use agent_operator::registry;
use serde::Serialize;

/// The outcome a passed verification reports (`status.verification.outcome`).
const VERIFIED: &str = "Verified";

/// Characters of a revision id a note names it by.
const SHORT_ID: usize = 8;

/// The columns of the table.
pub const COLUMNS: [&str; 7] = [
    "ID",
    "STATUS",
    "SERVING",
    "COMMIT/DIGEST",
    "REF/IMAGE",
    "CREATED",
    "NOTES",
];

/// One revision as `-o json|yaml` shows it: the wire revision, and the
/// notes when there are some.
#[derive(Debug, Serialize)]
pub struct Listed<'a> {
    /// The revision as the control plane answered it.
    #[serde(flatten)]
    pub revision: &'a Revision,
    /// What went wrong or was checked ([`notes`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The status a revision list shows: a `DEPLOYED` revision that no longer
/// serves reads `REPLACED`, as the official CLIs list it
/// (docs/control-plane-api.md "Revision").
pub fn shown_status(r: &Revision, active: Option<&str>) -> String {
    if r.status == RevisionStatus::Deployed && active.is_some_and(|a| a != r.id) {
        "REPLACED".to_owned()
    } else {
        r.status.to_string()
    }
}

/// The operator's record of revision `id` in `status`, if it keeps one.
fn summary<'a>(status: Option<&'a AgentDeploymentStatus>, id: &str) -> Option<&'a RevisionSummary> {
    status?.revisions.iter().find(|s| s.id == id)
}

/// What a revision runs, in the short forms of the operator's `SERVING`
/// column (`kubectl get agd -o wide`, [`serving::short`]): the commit the
/// platform built (`repo_commit_sha`, its first 7 characters) or the digest
/// its image names (`@sha256:`, its first 12 hex digits, also for an image
/// by tag the service reports with its digest, `repo:tag@sha256:...`); else
/// what the operator recorded (`status.revisions[]`: the digest an image
/// policy resolved the tag to); `-` when none is known.
pub fn provenance(r: &Revision, status: Option<&AgentDeploymentStatus>) -> String {
    let rc = r.source_revision_config.clone().unwrap_or_default();
    let recorded = summary(status, &r.id);
    let commit = rc
        .repo_commit_sha
        .filter(|s| !s.is_empty())
        .or_else(|| recorded.and_then(|s| s.commit_sha.clone()));
    let digest = rc
        .image_uri
        .as_deref()
        .and_then(registry::digest_of)
        .or_else(|| recorded.and_then(|s| s.image_digest.clone()));
    match (commit, digest) {
        (Some(sha), _) => serving::short(Some(&sha), None).unwrap_or_default(),
        (None, Some(d)) => format!(
            "sha256:{}",
            serving::short(None, Some(&d)).unwrap_or_default()
        ),
        (None, None) => "-".to_owned(),
    }
}

/// The notes of revision `r`: its failed outcome on the service (`failed`,
/// `interrupted`, `skipped`), then, from the operator's `status`,
/// `verification failed` (with the reason of the last attempt when it was
/// this revision), `verified`, and the automatic rollback it took part in:
/// `rolled back (REASON)` (the revision that failed, and why: the
/// verification's reason or its failed status), `rollback target` (the
/// verified one gone back to), `rollback to <id>` (the new revision with
/// the target's configuration).
pub fn notes(r: &Revision, status: Option<&AgentDeploymentStatus>) -> Vec<String> {
    let mut out = Vec::new();
    match &r.status {
        s if s.is_failed() => out.push("failed".to_owned()),
        RevisionStatus::Interrupted => out.push("interrupted".to_owned()),
        RevisionStatus::Skipped => out.push("skipped".to_owned()),
        _ => {}
    }
    let Some(status) = status else {
        return out;
    };
    out.extend(verification_notes(&r.id, status));
    if let Some(rb) = status.rollback.as_deref() {
        if rb.from_revision_id == r.id {
            out.push(format!("rolled back ({})", rb.reason));
        }
        if rb.to_revision_id == r.id {
            out.push("rollback target".to_owned());
        }
        if rb.revision_id.as_deref() == Some(r.id.as_str()) {
            let to: String = rb.to_revision_id.chars().take(SHORT_ID).collect();
            out.push(format!("rollback to {to}"));
        }
    }
    out
}

/// `verification failed (REASON)`, `verification failed` or `verified` for
/// revision `id`, from the last attempt (`status.verification`), the
/// revision's record (`status.revisions[].verified`) and the last verified
/// revision (`status.verifiedRevisionId`), in that order.
fn verification_notes(id: &str, status: &AgentDeploymentStatus) -> Option<String> {
    let last = status
        .verification
        .as_deref()
        .filter(|v| v.revision_id == id);
    if let Some(v) = last.filter(|v| v.outcome != VERIFIED) {
        return Some(format!("verification failed ({})", v.outcome));
    }
    let verified = summary(Some(status), id).and_then(|s| s.verified);
    match verified {
        Some(false) => Some("verification failed".to_owned()),
        Some(true) => Some("verified".to_owned()),
        None if last.is_some() || status.verified_revision_id.as_deref() == Some(id) => {
            Some("verified".to_owned())
        }
        None => None,
    }
}

/// One row of the table ([`COLUMNS`]).
pub fn row(
    r: &Revision,
    active: Option<&str>,
    status: Option<&AgentDeploymentStatus>,
) -> Vec<String> {
    let rc = r.source_revision_config.clone().unwrap_or_default();
    let source = rc
        .image_uri
        .clone()
        .or(rc.repo_ref)
        .unwrap_or_else(|| "-".to_owned());
    let serving = if Some(r.id.as_str()) == active {
        "*"
    } else {
        ""
    };
    vec![
        r.id.clone(),
        shown_status(r, active),
        serving.to_owned(),
        provenance(r, status),
        source,
        r.created_at.clone().unwrap_or_else(|| "-".to_owned()),
        notes(r, status).join(", "),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_operator::controlplane::types::SourceRevisionConfig;

    fn revision(id: &str, status: RevisionStatus, rc: SourceRevisionConfig) -> Revision {
        Revision {
            id: id.to_owned(),
            status,
            created_at: None,
            updated_at: None,
            source: None,
            source_revision_config: Some(rc),
        }
    }

    fn image(id: &str, status: RevisionStatus, uri: &str) -> Revision {
        revision(
            id,
            status,
            SourceRevisionConfig {
                image_uri: Some(uri.into()),
                ..SourceRevisionConfig::default()
            },
        )
    }

    #[test]
    fn superseded_deployed_revisions_read_replaced_with_their_commit_or_digest() {
        let sha = "0123456789abcdef0123456789abcdef01234567";
        let digest = "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";
        let built = revision(
            "r1",
            RevisionStatus::Deployed,
            SourceRevisionConfig {
                repo_ref: Some("main".into()),
                repo_commit_sha: Some(sha.into()),
                ..SourceRevisionConfig::default()
            },
        );
        let pinned = image(
            "r2",
            RevisionStatus::Deployed,
            &format!("ghcr.io/acme/agent@{digest}"),
        );
        let tag_and_digest = image(
            "r4",
            RevisionStatus::Deployed,
            &format!("ghcr.io/acme/agent:v4@{digest}"),
        );
        let by_tag = image("r3", RevisionStatus::BuildFailed, "ghcr.io/acme/agent:v3");
        assert_eq!(
            row(&built, Some("r2"), None)[1..4],
            ["REPLACED", "", "0123456"]
        );
        assert_eq!(
            row(&pinned, Some("r2"), None)[1..4],
            ["DEPLOYED", "*", "sha256:fedcba987654"]
        );
        assert_eq!(
            row(&tag_and_digest, Some("r2"), None)[3],
            "sha256:fedcba987654"
        );
        assert_eq!(
            row(&by_tag, Some("r2"), None)[1..],
            [
                "BUILD_FAILED",
                "",
                "-",
                "ghcr.io/acme/agent:v3",
                "-",
                "failed"
            ]
        );
        // No revision serves yet: nothing is REPLACED.
        assert_eq!(shown_status(&built, None), "DEPLOYED");
    }

    /// After an automatic rollback: r2 failed verification and was rolled
    /// back from, r1 (verified) was gone back to, r3 carries r1's
    /// configuration; r0 was interrupted, r00 skipped.
    #[test]
    fn the_operator_marks_failed_verification_and_the_rollback() {
        let status: AgentDeploymentStatus = serde_json::from_value(serde_json::json!({
            "verifiedRevisionId": "r3",
            "verification": {"revisionId": "r3", "outcome": "Verified", "lastRunTime": "t"},
            "rollback": {"fromRevisionId": "r2", "toRevisionId": "r1-aaaaaaaaaa", "revisionId": "r3",
                "at": "2026-01-02T03:04:05Z", "reason": "AssistantsMissing"},
            "revisions": [
                {"id": "r3", "status": "DEPLOYED"},
                {"id": "r2", "status": "DEPLOYED", "verified": false},
                {"id": "r1-aaaaaaaaaa", "status": "DEPLOYED", "verified": true,
                 "imageDigest": "sha256:0123456789abcdef0123"},
            ],
        }))
        .unwrap();
        let s = Some(&status);
        let by_tag = |id: &str, st| image(id, st, "ghcr.io/acme/agent:v1");
        let note = |r: &Revision| notes(r, s).join(", ");
        assert_eq!(
            note(&by_tag("r3", RevisionStatus::Deployed)),
            "verified, rollback to r1-aaaaa"
        );
        assert_eq!(
            note(&by_tag("r2", RevisionStatus::Deployed)),
            "verification failed, rolled back (AssistantsMissing)"
        );
        let r1 = by_tag("r1-aaaaaaaaaa", RevisionStatus::Deployed);
        assert_eq!(note(&r1), "verified, rollback target");
        // The digest the operator recorded for an image by tag.
        assert_eq!(provenance(&r1, s), "sha256:0123456789ab");
        assert_eq!(provenance(&r1, None), "-");
        assert_eq!(
            note(&by_tag("r0", RevisionStatus::Interrupted)),
            "interrupted"
        );
        assert_eq!(note(&by_tag("r00", RevisionStatus::Skipped)), "skipped");
        // The last attempt failed on this revision: its reason.
        let mut failing = status.clone();
        failing.verification = serde_json::from_value(serde_json::json!(
            {"revisionId": "r3", "outcome": "RunFailed", "lastRunTime": "t"}
        ))
        .unwrap();
        assert_eq!(
            notes(&by_tag("r3", RevisionStatus::Deployed), Some(&failing)),
            ["verification failed (RunFailed)", "rollback to r1-aaaaa"]
        );
    }
}
