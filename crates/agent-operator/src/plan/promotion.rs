//! Promotion by verified identity (`spec.promotion`), pure: from what the
//! source AgentDeployment serves (its `status.serving`, read from the
//! operator's own watch cache) and what the target knows (its spec and
//! status), the one thing a pass of the target does about it before any
//! remote call: refuse (`Stalled`), wait (`PromotionWaiting`), or deploy
//! the source's identity in place of the target's own image or ref.
//!
//! The guarantees differ by source kind (docs/PROMOTION.md):
//! - `external_docker`: the target is sent the very image the source
//!   verified, by digest (`repository@sha256:...`): the control plane pulls
//!   exactly those bytes, whatever a tag says meanwhile;
//! - `github`: the platform builds a branch or a tag, never a commit given by
//!   the client (the project's API notes, section "Revision":
//!   `repo_commit_sha` is read-only), so the target is sent the source's
//!   `repoRef`, and once its revision is built the commit the platform
//!   recorded is compared with the one verified on the source: a ref that
//!   moved in between is a mismatch that stops the target
//!   (`PromotionCommitMismatch`) before anything more is deployed.
//!
//! Nothing here does IO.

use std::time::Duration;

use jiff::Timestamp;

use crate::api::conditions::reason;
use crate::api::deployment::{AgentDeploymentStatus, PromotedFrom, Promotion, Source};

/// What the source AgentDeployment serves now (its `status.serving`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Serving<'a> {
    /// The serving revision.
    pub revision_id: &'a str,
    /// The commit it was built from (`github`).
    pub commit_sha: Option<&'a str>,
    /// The digest of the image it runs (`external_docker`).
    pub image_digest: Option<&'a str>,
    /// Its image as deployed (`external_docker`).
    pub image_uri: Option<&'a str>,
    /// Its ref (`github`).
    pub repo_ref: Option<&'a str>,
    /// It passed the source's verification.
    pub verified: bool,
    /// Since when it has been verified (with `requireVerified`) or served
    /// (without): the start of the soak; `None`: unknown (the soak starts
    /// now).
    pub soak_from: Option<Timestamp>,
}

/// The source AgentDeployment, as the watch cache holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceView<'a> {
    /// Its namespace.
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
    /// Its `spec.source`.
    pub source: Source,
    /// Its `spec.sourceConfig.repoUrl` (`github`).
    pub repo_url: Option<&'a str>,
    /// The namespaces its `spec.promotionGrants` names.
    pub grants: Vec<&'a str>,
    /// It has `spec.verify` (without it nothing it serves is ever verified).
    pub verifies: bool,
    /// What it serves, if anything.
    pub serving: Option<Serving<'a>>,
}

/// The target: the AgentDeployment whose pass decides.
#[derive(Clone, Debug)]
pub struct Target<'a> {
    /// Its namespace.
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
    /// Its `spec.source`.
    pub source: Source,
    /// Its `spec.sourceConfig.repoUrl` (`github`).
    pub repo_url: Option<&'a str>,
    /// Its `spec.promotion`.
    pub promotion: &'a Promotion,
    /// Its status as last written.
    pub status: &'a AgentDeploymentStatus,
    /// Its `metadata.generation`.
    pub generation: Option<i64>,
    /// A redeploy annotation value not yet acted on.
    pub redeploy_requested: bool,
}

/// What the pass does about the promotion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// `Stalled` with this reason and message; nothing is sent.
    Refused {
        /// A `PROMOTION_*` reason of [`reason`].
        reason: &'static str,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// `PromotionWaiting`: nothing is sent; look again after `recheck_in`
    /// (the end of the soak), or when the source changes.
    Wait {
        /// What is awaited.
        message: String,
        /// When the wait ends by itself; `None`: only a change of the
        /// source (or of the spec) ends it.
        recheck_in: Option<Duration>,
    },
    /// Deploy the source's identity.
    Deploy(Box<Take>),
}

/// The identity a target deploys: what replaces its own `imageUri` or
/// `repoRef`, and the record of `status.promotedFrom`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Take {
    /// `repository@sha256:...` sent as `image_uri` (`external_docker`).
    pub image_uri: Option<String>,
    /// The source's ref sent as `repo_ref` (`github`).
    pub repo_ref: Option<String>,
    /// `status.promotedFrom` once it is deployed.
    pub record: PromotedFrom,
    /// A `github` target already exists and must build the source's commit:
    /// one new revision (a redeploy) is needed, as the body sent may not
    /// change (same ref, a newer commit).
    pub new_revision: bool,
    /// The record differs from the one in status: a `Promoted` event.
    pub changed: bool,
}

/// The `namespace/name` of the source `spec.promotion.from` names, seen from
/// `target_namespace`.
pub fn source_key(promotion: &Promotion, target_namespace: &str) -> (String, String) {
    (
        promotion
            .from
            .namespace
            .clone()
            .unwrap_or_else(|| target_namespace.to_owned()),
        promotion.from.name.clone(),
    )
}

/// `image_uri` by `digest`: the repository of `image_uri` (its tag and any
/// digest dropped) with `@digest`.
pub fn by_digest(image_uri: &str, digest: &str) -> String {
    let without_digest = image_uri.split('@').next().unwrap_or(image_uri);
    let last_slash = without_digest.rfind('/').map_or(0, |i| i + 1);
    let repository = match without_digest[last_slash..].rfind(':') {
        Some(colon) => &without_digest[..last_slash + colon],
        None => without_digest,
    };
    format!("{repository}@{digest}")
}

/// What a target keeps deploying while its promotion takes nothing new:
/// the identity it took last (`status.promotedFrom.deployed`, in place of
/// its own `imageUri` or `repoRef` by `source`), unchanged, with no new
/// revision; `None` when it never took anything.
pub fn kept(source: Source, status: &AgentDeploymentStatus) -> Option<Take> {
    let kept = status.promoted_from.as_deref()?;
    Some(Take {
        image_uri: (source == Source::ExternalDocker)
            .then(|| kept.deployed.clone())
            .flatten(),
        repo_ref: (source == Source::Github)
            .then(|| kept.deployed.clone())
            .flatten(),
        record: kept.clone(),
        new_revision: false,
        changed: false,
    })
}

/// A promotion that deploys nothing new on this pass (a wait, or a
/// refusal) of a target that holds a remote deployment: the target keeps
/// what it took last ([`kept`]) and goes on with its own reads and polls,
/// so its status never goes stale; the hold shows in its `Promoted`
/// condition, and a refusal also as `Stalled` with its reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hold {
    /// `PromotionWaiting`, or the `PROMOTION_*` reason of a refusal.
    pub reason: &'static str,
    /// What is awaited, or what is wrong.
    pub message: String,
    /// When a wait ends by itself (the end of the soak).
    pub recheck_in: Option<Duration>,
    /// A refusal: the target is `Stalled`, not only waiting.
    pub refused: bool,
}

impl Hold {
    /// The hold of a step that deploys nothing; `None` for a deploy.
    pub fn of(step: &Step) -> Option<Self> {
        match step {
            Step::Deploy(_) => None,
            Step::Refused { reason, message } => Some(Self {
                reason,
                message: message.clone(),
                recheck_in: None,
                refused: true,
            }),
            Step::Wait {
                message,
                recheck_in,
            } => Some(Self {
                reason: reason::PROMOTION_WAITING,
                message: message.clone(),
                recheck_in: *recheck_in,
                refused: false,
            }),
        }
    }
}

/// The commit the target's latest revision was built from, when known.
fn latest_commit(status: &AgentDeploymentStatus) -> Option<&str> {
    let latest = status.latest_revision_id.as_deref()?;
    status
        .revisions
        .iter()
        .find(|r| r.id == latest)
        .and_then(|r| r.commit_sha.as_deref())
}

/// The step of `target` given its source (`None`: not in the watch cache),
/// at `now`.
pub fn decide(target: &Target<'_>, source: Option<&SourceView<'_>>, now: Timestamp) -> Step {
    let (ns, name) = source_key(target.promotion, target.namespace);
    let shown = format!("{ns}/{name}");
    if ns == target.namespace && name == target.name {
        return refused(
            reason::PROMOTION_SOURCE_MISMATCH,
            format!("spec.promotion.from names this AgentDeployment itself ({shown})"),
        );
    }
    let Some(src) = source else {
        return without_source(target, &ns, &name, &shown);
    };
    if let Some(refusal) = mismatch(target, src, &shown) {
        return refusal;
    }
    let require_verified = target.promotion.require_verified;
    let Some(serving) = src.serving.as_ref() else {
        return wait(
            format!("the promotion source {shown} serves no revision yet"),
            None,
        );
    };
    if require_verified && !serving.verified {
        return wait(
            format!(
                "the promotion source {shown} serves revision {} which is not verified (yet)",
                serving.revision_id
            ),
            None,
        );
    }
    if let Some(soaking) = soaking(target, serving, &shown, now) {
        return soaking;
    }
    take(target, src, serving, now)
}

/// The step of `target` when its source `ns/name` is not in the watch
/// cache: taken before (the source deleted since, or not listed yet after
/// a restart of the operator), the target keeps what it took, so a restart
/// never flips it to waiting; else it waits for the source.
fn without_source(target: &Target<'_>, ns: &str, name: &str, shown: &str) -> Step {
    if let Some(kept) = kept(target.source, target.status)
        .filter(|k| k.record.namespace == ns && k.record.name == name)
    {
        return Step::Deploy(Box::new(kept));
    }
    wait(
        format!(
            "the promotion source AgentDeployment {shown} is not found (or its namespace is not watched by this operator); nothing is deployed until it exists"
        ),
        None,
    )
}

/// The refusal of a source `target` may not take from, whatever it
/// serves: in another namespace without granting the target's, of another
/// source kind or (`github`) another repository, or without
/// `spec.verify` while the target requires a verified revision. `None`
/// when the source fits.
fn mismatch(target: &Target<'_>, src: &SourceView<'_>, shown: &str) -> Option<Step> {
    if src.namespace != target.namespace && !src.grants.contains(&target.namespace) {
        return Some(refused(
            reason::PROMOTION_NOT_GRANTED,
            format!(
                "the promotion source {shown} is in another namespace and does not grant namespace {target_ns}: its owners add {{namespace: {target_ns}}} to its spec.promotionGrants; nothing is sent until then",
                target_ns = target.namespace
            ),
        ));
    }
    if src.source != target.source {
        return Some(refused(
            reason::PROMOTION_SOURCE_MISMATCH,
            format!(
                "the promotion source {shown} has source {} and this AgentDeployment {}: both must be the same",
                src.source.as_str(),
                target.source.as_str()
            ),
        ));
    }
    if target.source == Source::Github && src.repo_url != target.repo_url {
        return Some(refused(
            reason::PROMOTION_SOURCE_MISMATCH,
            format!(
                "the promotion source {shown} builds {} and this AgentDeployment {}: a commit is compared only within one repository",
                src.repo_url.unwrap_or("no repository"),
                target.repo_url.unwrap_or("no repository")
            ),
        ));
    }
    (target.promotion.require_verified && !src.verifies).then(|| {
        refused(
            reason::PROMOTION_SOURCE_MISMATCH,
            format!(
                "spec.promotion.requireVerified is true but the promotion source {shown} has no spec.verify, so nothing it serves is ever verified: add spec.verify to it, or set requireVerified: false"
            ),
        )
    })
}

/// The wait of a `serving` revision still in its soak
/// (`spec.promotion.soakSeconds` from `serving.soak_from`) at `now`,
/// rechecked when the soak ends; `None` once it has soaked.
fn soaking(
    target: &Target<'_>,
    serving: &Serving<'_>,
    shown: &str,
    now: Timestamp,
) -> Option<Step> {
    let soak = Duration::from_secs(u64::from(target.promotion.soak_seconds));
    let served_for = serving
        .soak_from
        .and_then(|from| now.duration_since(from).try_into().ok())
        .unwrap_or(Duration::ZERO);
    if served_for >= soak {
        return None;
    }
    let left = soak - served_for;
    // The end as a time, not a countdown: the message (and so the
    // status) stays the same on every pass of the soak.
    let ends = serving
        .soak_from
        .unwrap_or(now)
        .checked_add(jiff::SignedDuration::from_secs(
            i64::try_from(soak.as_secs()).unwrap_or(i64::MAX),
        ))
        .unwrap_or(now);
    Some(wait(
        format!(
            "the promotion source {shown} serves revision {}{}; its soak of {} s ends at {ends:.0}",
            serving.revision_id,
            if target.promotion.require_verified {
                ", verified"
            } else {
                ""
            },
            soak.as_secs(),
        ),
        Some(left),
    ))
}

/// The identity of a serving revision, as a target of its source kind
/// takes it.
struct Identity<'a> {
    /// `repository@sha256:...` (`external_docker`).
    image_uri: Option<String>,
    /// The source's ref (`github`).
    repo_ref: Option<String>,
    /// The commit it was built from (`github`).
    commit: Option<&'a str>,
    /// The digest of its image (`external_docker`).
    digest: Option<&'a str>,
}

/// The [`Identity`] of `serving` for a target of `source`, or why it
/// cannot be taken: an image served by tag is refused, a commit not known
/// yet is waited for.
fn identity<'a>(source: Source, shown: &str, serving: &Serving<'a>) -> Result<Identity<'a>, Step> {
    match source {
        Source::ExternalDocker => {
            let (Some(digest), Some(image)) = (serving.image_digest, serving.image_uri) else {
                return Err(refused(
                    reason::PROMOTION_SOURCE_MISMATCH,
                    format!(
                        "the promotion source {shown} serves revision {} by tag, not by digest, so the same image cannot be guaranteed: give it spec.imagePolicy Pin (or Follow) or an imageUri by digest",
                        serving.revision_id
                    ),
                ));
            };
            Ok(Identity {
                image_uri: Some(by_digest(image, digest)),
                repo_ref: None,
                commit: None,
                digest: Some(digest),
            })
        }
        Source::Github => {
            let (Some(commit), Some(repo_ref)) = (serving.commit_sha, serving.repo_ref) else {
                return Err(wait(
                    format!(
                        "the promotion source {shown} serves revision {} whose commit is not known yet",
                        serving.revision_id
                    ),
                    None,
                ));
            };
            Ok(Identity {
                image_uri: None,
                repo_ref: Some(repo_ref.to_owned()),
                commit: Some(commit),
                digest: None,
            })
        }
    }
}

/// The [`Take`] of `serving`, or why it cannot be taken.
fn take(target: &Target<'_>, src: &SourceView<'_>, serving: &Serving<'_>, now: Timestamp) -> Step {
    let shown = format!("{}/{}", src.namespace, src.name);
    let status = target.status;
    let previous = status.promoted_from.as_deref();
    let Identity {
        image_uri,
        repo_ref,
        commit,
        digest,
    } = match identity(target.source, &shown, serving) {
        Ok(identity) => identity,
        Err(step) => return step,
    };
    let same_identity = |p: &PromotedFrom| {
        p.namespace == src.namespace
            && p.name == src.name
            && p.commit_sha.as_deref() == commit
            && p.image_digest.as_deref() == digest
    };
    let kept = previous.filter(|p| same_identity(p));
    let new_revision = target.source == Source::Github
        && status.deployment_id.is_some()
        && kept.is_none()
        && latest_commit(status) != commit;
    let record = match kept {
        Some(p) => PromotedFrom {
            revision_id: serving.revision_id.to_owned(),
            ..p.clone()
        },
        None => PromotedFrom {
            name: src.name.to_owned(),
            namespace: src.namespace.to_owned(),
            revision_id: serving.revision_id.to_owned(),
            commit_sha: commit.map(str::to_owned),
            image_digest: digest.map(str::to_owned),
            deployed: image_uri.clone().or_else(|| repo_ref.clone()),
            prior_revision_id: new_revision
                .then(|| status.latest_revision_id.clone())
                .flatten(),
            at: now.to_string(),
        },
    };
    if let Some(mismatch) = commit_mismatch(target, &record, kept.is_some()) {
        return mismatch;
    }
    Step::Deploy(Box::new(Take {
        image_uri,
        repo_ref,
        changed: previous != Some(&record),
        record,
        new_revision,
    }))
}

/// `Stalled`/`PromotionCommitMismatch` when the target's latest revision,
/// started for the promotion `record` (`kept`: already in status), was
/// built from another commit than the one verified on the source
/// ([`built_mismatch`]); not on the pass of a new generation or a redeploy
/// request (the user's ways to try again: the pass goes on to its PATCH or
/// redeploy, and its report checks again).
fn commit_mismatch(target: &Target<'_>, record: &PromotedFrom, kept: bool) -> Option<Step> {
    let status = target.status;
    if !kept || target.redeploy_requested || status.observed_generation != target.generation {
        return None;
    }
    mismatch_of(record, status).map(|message| refused(reason::PROMOTION_COMMIT_MISMATCH, message))
}

/// The commit revision `id` of `status.revisions` was built from.
fn commit_of<'a>(status: &'a AgentDeploymentStatus, id: &str) -> Option<&'a str> {
    status
        .revisions
        .iter()
        .find(|r| r.id == id)
        .and_then(|r| r.commit_sha.as_deref())
}

/// The undo of a `github` promotion whose latest revision was built from
/// another commit than the one verified on the source (`record`;
/// [`built_mismatch`]): `(from, to)`, the revision to go back from and the
/// one that served before the promotion started (`record.priorRevisionId`),
/// redeployed at once so that a commit nobody verified serves no longer
/// than that redeploy. `None` when there is nothing to undo: no mismatch
/// (or its commit not known yet), the latest revision is already the
/// undo's (`status.rollback.revisionId`), or nothing served before.
pub fn undo(record: &PromotedFrom, status: &AgentDeploymentStatus) -> Option<(String, String)> {
    built_mismatch(record, status)?;
    let latest = status.latest_revision_id.as_deref()?;
    let undone = status
        .rollback
        .as_deref()
        .is_some_and(|r| r.from_revision_id == latest || r.revision_id.as_deref() == Some(latest));
    let to = record.prior_revision_id.as_deref()?;
    (!undone && to != latest).then(|| (latest.to_owned(), to.to_owned()))
}

/// The message of a `PromotionCommitMismatch` of `record` on `status`: a
/// latest revision built from another commit than the verified one
/// ([`built_mismatch`]), or the revision that went back after one
/// ([`undo`], `status.rollback`), naming both commits and the revision
/// that serves again; `None` when there is no mismatch.
pub fn mismatch_of(record: &PromotedFrom, status: &AgentDeploymentStatus) -> Option<String> {
    let expected = record.commit_sha.as_deref()?;
    let latest = status.latest_revision_id.as_deref()?;
    let back = status
        .rollback
        .as_deref()
        .filter(|r| r.revision_id.as_deref() == Some(latest));
    let Some(back) = back else {
        return built_mismatch(record, status);
    };
    let built = commit_of(status, &back.from_revision_id)?;
    (built != expected).then(|| {
        format!(
            "revision {} was built from commit {built}, but the promotion source {}/{} verified commit {expected} (revision {}): the ref {} moved in between. Went back to revision {} (what served before the promotion) with revision {latest}, so the unverified commit serves no more. Nothing more is deployed until the source serves another commit, the spec changes, or a redeploy is requested",
            back.from_revision_id,
            record.namespace,
            record.name,
            record.revision_id,
            record.deployed.as_deref().unwrap_or("?"),
            back.to_revision_id,
        )
    })
}

/// The message of a `PromotionCommitMismatch`: the latest revision of
/// `status`, started after `record.priorRevisionId`, was built from
/// another commit than `record.commitSha`; `None` when it matches, is not
/// built yet, or `record` is not a `github` promotion. The report of every
/// pass checks it, so the pass that first reads the commit built stops.
pub fn built_mismatch(record: &PromotedFrom, status: &AgentDeploymentStatus) -> Option<String> {
    let expected = record.commit_sha.as_deref()?;
    let latest = status.latest_revision_id.as_deref()?;
    if record.prior_revision_id.as_deref() == Some(latest) {
        return None;
    }
    let built = latest_commit(status)?;
    (built != expected).then(|| {
        format!(
            "revision {latest} was built from commit {built}, but the promotion source {}/{} verified commit {expected} (revision {}): the ref {} moved in between. Nothing more is deployed until the source serves another commit, the spec changes, or a redeploy is requested",
            record.namespace,
            record.name,
            record.revision_id,
            record.deployed.as_deref().unwrap_or("?"),
        )
    })
}

/// A [`Step::Refused`].
fn refused(reason: &'static str, message: String) -> Step {
    Step::Refused { reason, message }
}

/// A [`Step::Wait`].
fn wait(message: String, recheck_in: Option<Duration>) -> Step {
    Step::Wait {
        message,
        recheck_in,
    }
}

#[cfg(test)]
mod tests;
