//! Provenance of an AgentDeployment in status: which revision serves
//! (`status.serving`), the commit or image digest that identifies each
//! revision, and whether its verification (`spec.verify`) passed
//! (`status.revisions[].verified`). Pure: the pass calls [`annotate`] once
//! its status is otherwise complete.
//!
//! Sources: docs/control-plane-api.md "Deployment" (`active_revision_id`)
//! and "Revision" (`source_revision_config.repo_commit_sha`, read-only).

use crate::api::conditions::reason;
use crate::api::deployment::{
    AgentDeploymentStatus, RevisionSuite, RevisionSummary, ServingRevision,
};

/// Characters of a commit SHA shown in short form (as `git log --oneline`).
pub const SHORT_SHA: usize = 7;

/// Hex digits of an image digest shown in short form (as `docker images`).
pub const SHORT_DIGEST: usize = 12;

/// The short form of a revision's identity: the first [`SHORT_SHA`]
/// characters of `commit`, else the first [`SHORT_DIGEST`] hex digits of
/// `digest` (without its `sha256:`).
pub fn short(commit: Option<&str>, digest: Option<&str>) -> Option<String> {
    if let Some(c) = commit.filter(|c| !c.is_empty()) {
        return Some(c.chars().take(SHORT_SHA).collect());
    }
    let d = digest.filter(|d| !d.is_empty())?;
    let hex = d.split_once(':').map_or(d, |(_, h)| h);
    Some(hex.chars().take(SHORT_DIGEST).collect())
}

/// How messages name what a revision runs: `commit <short sha>` or
/// `image <algorithm>:<short digest>`; `None` when neither is known.
pub fn identity(entry: &RevisionSummary) -> Option<String> {
    if let Some(c) = entry.commit_sha.as_deref().filter(|c| !c.is_empty()) {
        return Some(format!("commit {}", short(Some(c), None)?));
    }
    let d = entry.image_digest.as_deref()?;
    let algorithm = d.split_once(':').map_or("sha256", |(a, _)| a);
    Some(format!("image {algorithm}:{}", short(None, Some(d))?))
}

/// `message` with the first `revision <rid>` followed by what that revision
/// runs (`revision <rid> (commit abc1234)`), when `history` knows it; else
/// `message` unchanged.
pub fn name_revision(message: &str, rid: &str, history: &[RevisionSummary]) -> String {
    let Some(ident) = history.iter().find(|r| r.id == rid).and_then(identity) else {
        return message.to_owned();
    };
    let needle = format!("revision {rid}");
    match message.find(&needle) {
        Some(at) => {
            let end = at + needle.len();
            format!("{} ({ident}){}", &message[..end], &message[end..])
        }
        None => message.to_owned(),
    }
}

/// Records in `status.revisions` what the verification in `status` says of
/// its revision: `verified: true` for `verifiedRevisionId`, `false` for a
/// revision whose last attempt failed (except `RevisionNotActive`: the
/// revision was not checked), and the suite's result on its revision
/// (`suite`, what `compareWith: Serving` reads later). Entries not
/// concerned keep their value.
pub fn mark_verified(status: &mut AgentDeploymentStatus) {
    let verified = status.verified_revision_id.clone();
    let failed = status
        .verification
        .as_ref()
        .filter(|v| v.outcome != reason::VERIFIED && v.outcome != reason::REVISION_NOT_ACTIVE)
        .map(|v| v.revision_id.clone());
    let suite = status.verification.as_ref().and_then(|v| {
        let s = v.suite.as_ref()?;
        Some((
            v.revision_id.clone(),
            RevisionSuite {
                digest: s.digest.clone(),
                cases: s.cases.clone(),
                failed_cases: s.failed_cases.clone(),
            },
        ))
    });
    for r in &mut status.revisions {
        if let Some((rid, s)) = &suite
            && *rid == r.id
        {
            r.suite = Some(s.clone());
        }
        if verified.as_deref() == Some(r.id.as_str()) {
            r.verified = Some(true);
        } else if failed.as_deref() == Some(r.id.as_str()) {
            r.verified = Some(false);
        }
    }
}

/// The revision that serves (`status.activeRevisionId`), with its identity
/// from `status.revisions` and whether it is verified (never without
/// `spec.verify`: `verify` false). `since` and `verifiedAt` are carried
/// from `previous` while the same revision serves; `now` (RFC 3339) starts
/// `since` of a new one.
pub fn serving(
    status: &AgentDeploymentStatus,
    previous: Option<&ServingRevision>,
    verify: bool,
    now: &str,
) -> Option<ServingRevision> {
    let rid = status.active_revision_id.as_deref()?;
    let entry = status.revisions.iter().find(|r| r.id == rid);
    let same = previous.filter(|p| p.revision_id == rid);
    let verified = verify
        && entry.map_or(status.verified_revision_id.as_deref() == Some(rid), |e| {
            e.verified == Some(true)
        });
    let verified_at = verified
        .then(|| {
            status
                .verification
                .as_ref()
                .filter(|v| v.revision_id == rid && v.outcome == reason::VERIFIED)
                .map(|v| v.last_run_time.clone())
                .or_else(|| same.and_then(|p| p.verified_at.clone()))
        })
        .flatten();
    let commit_sha = entry.and_then(|e| e.commit_sha.clone());
    let image_digest = entry.and_then(|e| e.image_digest.clone());
    let cases = entry
        .and_then(|e| e.suite.as_ref())
        .map(|s| s.cases.clone());
    let shown = if verified { "True" } else { "False" };
    Some(ServingRevision {
        revision_id: rid.to_owned(),
        short: short(commit_sha.as_deref(), image_digest.as_deref()),
        commit_sha,
        image_digest,
        image_uri: entry.and_then(|e| e.image_uri.clone()),
        repo_ref: entry.and_then(|e| e.repo_ref.clone()),
        verified,
        verified_at,
        verified_short: match &cases {
            Some(c) => format!("{shown} ({c})"),
            None => shown.to_owned(),
        },
        cases,
        since: Some(
            same.and_then(|p| p.since.clone())
                .unwrap_or_else(|| now.to_owned()),
        ),
    })
}

/// Brings `status.revisions[].verified` and `status.serving` up to date
/// ([`mark_verified`], [`serving`]); `previous` is the status as last
/// written.
pub fn annotate(
    status: &mut AgentDeploymentStatus,
    previous: &AgentDeploymentStatus,
    verify: bool,
    now: &str,
) {
    if verify {
        mark_verified(status);
    }
    status.serving = serving(status, previous.serving.as_ref(), verify, now);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::deployment::VerificationStatus;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn rev(id: &str, commit: Option<&str>, digest: Option<&str>) -> RevisionSummary {
        RevisionSummary {
            id: id.into(),
            status: "DEPLOYED".into(),
            commit_sha: commit.map(Into::into),
            image_digest: digest.map(Into::into),
            repo_ref: commit.map(|_| "main".into()),
            image_uri: digest.map(|d| format!("r.example/acme/agent@{d}")),
            ..Default::default()
        }
    }

    fn attempt(rid: &str, outcome: &str) -> VerificationStatus {
        VerificationStatus {
            revision_id: rid.into(),
            outcome: outcome.into(),
            last_run_time: "2026-01-02T00:00:00Z".into(),
            ..Default::default()
        }
    }

    #[test]
    fn short_forms() {
        let cases = [
            (Some("0123456789abcdef"), None, Some("0123456")),
            (None, Some(D), Some("0123456789ab")),
            (Some("abc"), Some(D), Some("abc")),
            (Some(""), None, None),
            (None, None, None),
        ];
        for (commit, digest, want) in cases {
            assert_eq!(
                short(commit, digest).as_deref(),
                want,
                "{commit:?} {digest:?}"
            );
        }
    }

    #[test]
    fn messages_name_the_commit_or_the_digest() {
        let history = [
            rev("r1", Some("0123456789abcdef"), None),
            rev("r2", None, Some(D)),
            rev("r3", None, None),
        ];
        let cases = [
            (
                "r1",
                "revision r1 is DEPLOYED",
                "revision r1 (commit 0123456) is DEPLOYED",
            ),
            (
                "r2",
                "revision r2 is DEPLOYED",
                "revision r2 (image sha256:0123456789ab) is DEPLOYED",
            ),
            ("r3", "revision r3 is DEPLOYED", "revision r3 is DEPLOYED"),
            ("r9", "revision r9 is DEPLOYED", "revision r9 is DEPLOYED"),
            ("r1", "no such words", "no such words"),
        ];
        for (rid, message, want) in cases {
            assert_eq!(name_revision(message, rid, &history), want);
        }
    }

    #[test]
    fn verification_marks_its_revision_and_keeps_the_others() {
        // (verified revision, attempt, expected flags of r1, r2)
        type Case<'a> = (
            Option<&'a str>,
            Option<VerificationStatus>,
            [Option<bool>; 2],
        );
        let cases: [Case<'_>; 5] = [
            (None, None, [None, Some(true)]),
            (
                Some("r1"),
                Some(attempt("r1", reason::VERIFIED)),
                [Some(true), Some(true)],
            ),
            (
                None,
                Some(attempt("r1", reason::RUN_FAILED)),
                [Some(false), Some(true)],
            ),
            (
                None,
                Some(attempt("r1", reason::REVISION_NOT_ACTIVE)),
                [None, Some(true)],
            ),
            // A re-verification of r2 failed.
            (
                None,
                Some(attempt("r2", reason::ASSISTANTS_MISSING)),
                [None, Some(false)],
            ),
        ];
        for (verified, verification, want) in cases {
            let mut r2 = rev("r2", Some("abc"), None);
            r2.verified = Some(true);
            let mut status = AgentDeploymentStatus {
                revisions: vec![rev("r1", Some("def"), None), r2],
                verified_revision_id: verified.map(Into::into),
                verification: verification.clone().map(Box::new),
                ..Default::default()
            };
            mark_verified(&mut status);
            let got: Vec<Option<bool>> = status.revisions.iter().map(|r| r.verified).collect();
            assert_eq!(got, want, "{verified:?} {verification:?}");
        }
    }

    #[test]
    fn the_verified_column_shows_the_cases_of_a_suite() {
        let mut r1 = rev("r1", None, Some(D));
        r1.verified = Some(true);
        let mut status = AgentDeploymentStatus {
            active_revision_id: Some("r1".into()),
            revisions: vec![r1],
            ..Default::default()
        };
        let now = "2026-01-03T00:00:00Z";
        let shown = |s: &AgentDeploymentStatus, verify| serving(s, None, verify, now).unwrap();
        assert_eq!(shown(&status, true).verified_short, "True");
        assert_eq!(shown(&status, false).verified_short, "False");
        status.revisions[0].suite = Some(crate::api::deployment::RevisionSuite {
            cases: "9/10".into(),
            ..Default::default()
        });
        assert_eq!(shown(&status, true).verified_short, "True (9/10)");
        assert_eq!(shown(&status, false).verified_short, "False (9/10)");
    }

    #[test]
    fn serving_is_the_active_revision() {
        let now = "2026-01-03T00:00:00Z";
        let mut verified = rev("r1", None, Some(D));
        verified.verified = Some(true);
        let status = AgentDeploymentStatus {
            active_revision_id: Some("r1".into()),
            revisions: vec![rev("r2", None, None), verified],
            verified_revision_id: Some("r1".into()),
            verification: Some(Box::new(attempt("r1", reason::VERIFIED))),
            ..Default::default()
        };
        let got = serving(&status, None, true, now).unwrap();
        assert_eq!(got.revision_id, "r1");
        assert_eq!(got.image_digest.as_deref(), Some(D));
        assert_eq!(got.short.as_deref(), Some("0123456789ab"));
        assert!(got.verified);
        assert_eq!(got.verified_at.as_deref(), Some("2026-01-02T00:00:00Z"));
        assert_eq!(got.since.as_deref(), Some(now));

        // Without spec.verify: never verified.
        let unverified = serving(&status, None, false, now).unwrap();
        assert!(!unverified.verified);
        assert_eq!(unverified.verified_at, None);

        // The same revision keeps its `since`; another one starts anew.
        let earlier = ServingRevision {
            revision_id: "r1".into(),
            since: Some("2026-01-01T00:00:00Z".into()),
            ..Default::default()
        };
        let kept = serving(&status, Some(&earlier), true, now).unwrap();
        assert_eq!(kept.since.as_deref(), Some("2026-01-01T00:00:00Z"));
        let other = ServingRevision {
            revision_id: "r0".into(),
            ..earlier
        };
        let fresh = serving(&status, Some(&other), true, now).unwrap();
        assert_eq!(fresh.since.as_deref(), Some(now));

        // A revision not in the history: its id only.
        let unknown = AgentDeploymentStatus {
            active_revision_id: Some("r7".into()),
            ..status.clone()
        };
        let got = serving(&unknown, None, true, now).unwrap();
        assert_eq!(
            (got.revision_id.as_str(), got.short, got.verified),
            ("r7", None, false)
        );

        // No active revision: nothing serves.
        let none = AgentDeploymentStatus {
            active_revision_id: None,
            ..status
        };
        assert_eq!(serving(&none, None, true, now), None);
    }
}
