//! Table tests of [`super::decide`], written against the fields of the
//! source's `status.serving` (`revisionId`, `commitSha`, `imageDigest`,
//! `imageUri`, `repoRef`, `verified`).

use super::*;
use crate::api::deployment::{PromotionSource, RevisionSummary};

const DIGEST: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const C1: &str = "c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1";
const C2: &str = "c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2";
const REPO: &str = "https://github.com/acme/agent";

fn now() -> Timestamp {
    "2026-11-27T12:00:00Z".parse().unwrap()
}

fn ago(seconds: i64) -> Timestamp {
    now() - jiff::SignedDuration::from_secs(seconds)
}

fn promotion(namespace: Option<&str>, require_verified: bool, soak_seconds: u32) -> Promotion {
    Promotion {
        from: PromotionSource {
            name: "staging".into(),
            namespace: namespace.map(str::to_owned),
        },
        require_verified,
        soak_seconds,
    }
}

fn docker_serving(verified: bool, soak_from: Option<Timestamp>) -> Serving<'static> {
    Serving {
        revision_id: "rs1",
        image_digest: Some(DIGEST),
        image_uri: Some("registry.example.com:5000/acme/agent:1.2"),
        verified,
        soak_from,
        ..Default::default()
    }
}

fn github_serving(commit: &'static str) -> Serving<'static> {
    Serving {
        revision_id: "rs1",
        commit_sha: Some(commit),
        repo_ref: Some("release"),
        verified: true,
        soak_from: Some(ago(3600)),
        ..Default::default()
    }
}

fn source(
    namespace: &'static str,
    kind: Source,
    serving: Option<Serving<'static>>,
) -> SourceView<'static> {
    SourceView {
        namespace,
        name: "staging",
        source: kind,
        repo_url: (kind == Source::Github).then_some(REPO),
        grants: vec!["prod"],
        verifies: true,
        serving,
    }
}

fn target<'a>(
    namespace: &'a str,
    kind: Source,
    promotion: &'a Promotion,
    status: &'a AgentDeploymentStatus,
) -> Target<'a> {
    Target {
        namespace,
        name: "production",
        source: kind,
        repo_url: (kind == Source::Github).then_some(REPO),
        promotion,
        status,
        generation: Some(1),
        redeploy_requested: false,
    }
}

fn reason_of(step: &Step) -> &'static str {
    match step {
        Step::Refused { reason, .. } => reason,
        Step::Wait { .. } => reason::PROMOTION_WAITING,
        Step::Deploy(_) => "Deploy",
    }
}

#[test]
fn by_digest_keeps_the_repository_and_drops_tag_and_digest() {
    let cases = [
        ("docker.io/acme/agent:1", "docker.io/acme/agent@D"),
        ("registry:5000/acme/agent:1.2", "registry:5000/acme/agent@D"),
        ("registry:5000/acme/agent", "registry:5000/acme/agent@D"),
        ("acme/agent@sha256:old", "acme/agent@D"),
        ("acme/agent:1@sha256:old", "acme/agent@D"),
        ("agent", "agent@D"),
    ];
    for (image, want) in cases {
        assert_eq!(by_digest(image, "D"), want, "{image}");
    }
}

/// Asserts the reason of the step each case takes at [`now`]: (what, the
/// target, its source if found, the reason or `Deploy`); a refusal or a
/// wait names the source or the target.
fn assert_promotes(cases: Vec<(&str, Target<'_>, Option<&SourceView<'_>>, &str)>) {
    for (what, t, s, want) in cases {
        let step = decide(&t, s, now());
        assert_eq!(reason_of(&step), want, "{what}: {step:?}");
        if let Step::Refused { message, .. } | Step::Wait { message, .. } = &step {
            assert!(
                message.contains("staging") || message.contains("production"),
                "{what}: {message}"
            );
        }
    }
}

/// A source in namespace `staging-ns` that grants only namespace `other`.
fn ungranted() -> SourceView<'static> {
    SourceView {
        grants: vec!["other"],
        ..source(
            "staging-ns",
            Source::ExternalDocker,
            Some(docker_serving(true, Some(ago(10)))),
        )
    }
}

#[test]
fn who_may_promote_from_whom_by_namespace() {
    let status = AgentDeploymentStatus::default();
    let same_ns = promotion(None, true, 0);
    let cross = promotion(Some("staging-ns"), true, 0);
    let served = || Some(docker_serving(true, Some(ago(10))));
    let ungranted = ungranted();
    let granted = source("staging-ns", Source::ExternalDocker, served());
    let same = source("prod", Source::ExternalDocker, served());
    let docker = |p| target("prod", Source::ExternalDocker, p, &status);
    let mut itself = promotion(None, true, 0);
    itself.from.name = "production".into();
    assert_promotes(vec![
        (
            "same namespace needs no grant",
            docker(&same_ns),
            Some(&same),
            "Deploy",
        ),
        (
            "another namespace without a grant",
            docker(&cross),
            Some(&ungranted),
            reason::PROMOTION_NOT_GRANTED,
        ),
        (
            "another namespace with a grant",
            docker(&cross),
            Some(&granted),
            "Deploy",
        ),
        (
            "source not found: wait",
            docker(&same_ns),
            None,
            reason::PROMOTION_WAITING,
        ),
        (
            "itself",
            docker(&itself),
            Some(&same),
            reason::PROMOTION_SOURCE_MISMATCH,
        ),
    ]);
}

#[test]
fn who_may_promote_from_whom_by_kind_repository_and_verification() {
    let status = AgentDeploymentStatus::default();
    let same_ns = promotion(None, true, 0);
    let lax = promotion(None, false, 0);
    let github = source("prod", Source::Github, Some(github_serving(C1)));
    let mut other_repo = source("prod", Source::Github, Some(github_serving(C1)));
    other_repo.repo_url = Some("https://github.com/acme/other");
    let mut unverifying = source(
        "prod",
        Source::ExternalDocker,
        Some(docker_serving(true, Some(ago(10)))),
    );
    unverifying.verifies = false;
    let docker = |p| target("prod", Source::ExternalDocker, p, &status);
    let gh = |p| target("prod", Source::Github, p, &status);
    assert_promotes(vec![
        (
            "another source kind",
            docker(&same_ns),
            Some(&github),
            reason::PROMOTION_SOURCE_MISMATCH,
        ),
        (
            "another repository",
            gh(&same_ns),
            Some(&other_repo),
            reason::PROMOTION_SOURCE_MISMATCH,
        ),
        (
            "requireVerified on a source without verify",
            docker(&same_ns),
            Some(&unverifying),
            reason::PROMOTION_SOURCE_MISMATCH,
        ),
        (
            "without requireVerified, verify is not needed",
            docker(&lax),
            Some(&unverifying),
            "Deploy",
        ),
    ]);
}

/// A source no longer found (deleted, or not listed yet after a restart)
/// leaves a target that took something on what it took.
#[test]
fn a_target_keeps_what_it_took_when_its_source_is_gone() {
    let same_ns = promotion(None, true, 0);
    let took = AgentDeploymentStatus {
        promoted_from: Some(Box::new(PromotedFrom {
            name: "staging".into(),
            namespace: "prod".into(),
            revision_id: "rs1".into(),
            image_digest: Some(DIGEST.into()),
            deployed: Some(format!("acme/agent@{DIGEST}")),
            at: ago(60).to_string(),
            ..Default::default()
        })),
        ..Default::default()
    };
    let Step::Deploy(kept) = decide(
        &target("prod", Source::ExternalDocker, &same_ns, &took),
        None,
        now(),
    ) else {
        panic!("keeps what it took")
    };
    assert_eq!(
        kept.image_uri,
        took.promoted_from.as_ref().unwrap().deployed
    );
    assert!(!kept.changed && !kept.new_revision);
}

/// The refusal says how to fix it, naming the namespace to grant.
#[test]
fn the_refusal_of_a_missing_grant_names_the_namespace_to_grant() {
    let status = AgentDeploymentStatus::default();
    let cross = promotion(Some("staging-ns"), true, 0);
    let t = target("prod", Source::ExternalDocker, &cross, &status);
    let Step::Refused { message, .. } = decide(&t, Some(&ungranted()), now()) else {
        unreachable!()
    };
    assert!(
        message.contains("spec.promotionGrants") && message.contains("{namespace: prod}"),
        "{message}"
    );
}

/// What is asked, the promotion, what the source serves, the reason
/// expected and the recheck of a wait (seconds).
type SoakCase<'a> = (
    &'a str,
    &'a Promotion,
    Option<Serving<'static>>,
    &'a str,
    Option<u64>,
);

/// Asserts the reason of the step an `external_docker` target takes from
/// a source in its namespace in each case, and the recheck of a wait.
fn assert_soaks(cases: Vec<SoakCase<'_>>) {
    let status = AgentDeploymentStatus::default();
    for (what, p, serving, want, recheck) in cases {
        let src = source("prod", Source::ExternalDocker, serving);
        let step = decide(
            &target("prod", Source::ExternalDocker, p, &status),
            Some(&src),
            now(),
        );
        assert_eq!(reason_of(&step), want, "{what}: {step:?}");
        if let Step::Wait { recheck_in, .. } = &step {
            assert_eq!(recheck_in.map(|d| d.as_secs()), recheck, "{what}");
        }
    }
}

#[test]
fn the_target_waits_for_a_verified_revision_and_its_soak() {
    let strict = promotion(None, true, 600);
    let lax = promotion(None, false, 0);
    let no_soak = promotion(None, true, 0);
    let cases: Vec<SoakCase<'_>> = vec![
        (
            "nothing served",
            &no_soak,
            None,
            reason::PROMOTION_WAITING,
            None,
        ),
        (
            "served, not verified",
            &no_soak,
            Some(docker_serving(false, Some(ago(9999)))),
            reason::PROMOTION_WAITING,
            None,
        ),
        (
            "served, not verified, requireVerified false",
            &lax,
            Some(docker_serving(false, None)),
            "Deploy",
            None,
        ),
        (
            "verified 100 s ago, soak 600 s",
            &strict,
            Some(docker_serving(true, Some(ago(100)))),
            reason::PROMOTION_WAITING,
            Some(500),
        ),
        (
            "verified, soak start unknown: starts now",
            &strict,
            Some(docker_serving(true, None)),
            reason::PROMOTION_WAITING,
            Some(600),
        ),
        (
            "verified 600 s ago, soak 600 s",
            &strict,
            Some(docker_serving(true, Some(ago(600)))),
            "Deploy",
            None,
        ),
        (
            "verified just now, no soak",
            &no_soak,
            Some(docker_serving(true, Some(now()))),
            "Deploy",
            None,
        ),
    ];
    assert_soaks(cases);
}

#[test]
fn external_docker_deploys_the_digest_the_source_verified() {
    let status = AgentDeploymentStatus::default();
    let p = promotion(None, true, 0);
    let src = source(
        "prod",
        Source::ExternalDocker,
        Some(docker_serving(true, Some(ago(5)))),
    );
    let Step::Deploy(take) = decide(
        &target("prod", Source::ExternalDocker, &p, &status),
        Some(&src),
        now(),
    ) else {
        panic!("deploys")
    };
    assert_eq!(
        take.image_uri.as_deref(),
        Some(format!("registry.example.com:5000/acme/agent@{DIGEST}").as_str())
    );
    assert_eq!(take.repo_ref, None);
    assert!(
        !take.new_revision,
        "a new digest is a PATCH, not a redeploy"
    );
    assert!(take.changed);
    assert_eq!(take.record.image_digest.as_deref(), Some(DIGEST));
    assert_eq!(take.record.revision_id, "rs1");
    assert_eq!(take.record.at, now().to_string());
    // Already promoted: the record (and its time) is kept, no event.
    let status = AgentDeploymentStatus {
        promoted_from: Some(Box::new(take.record.clone())),
        ..Default::default()
    };
    let src = source(
        "prod",
        Source::ExternalDocker,
        Some(docker_serving(true, Some(ago(5)))),
    );
    let later = now() + jiff::SignedDuration::from_secs(60);
    let Step::Deploy(again) = decide(
        &target("prod", Source::ExternalDocker, &p, &status),
        Some(&src),
        later,
    ) else {
        panic!("deploys")
    };
    assert_eq!(again.record, take.record);
    assert!(!again.changed);
}

/// Served by tag only: no digest to guarantee the same image.
#[test]
fn external_docker_refuses_a_source_served_by_tag_only() {
    let status = AgentDeploymentStatus::default();
    let p = promotion(None, true, 0);
    let mut by_tag = docker_serving(true, Some(ago(5)));
    by_tag.image_digest = None;
    let src = source("prod", Source::ExternalDocker, Some(by_tag));
    let step = decide(
        &target("prod", Source::ExternalDocker, &p, &status),
        Some(&src),
        now(),
    );
    assert_eq!(
        reason_of(&step),
        reason::PROMOTION_SOURCE_MISMATCH,
        "{step:?}"
    );
}

fn github_status(
    latest: &str,
    built: Option<&str>,
    record: Option<PromotedFrom>,
) -> AgentDeploymentStatus {
    AgentDeploymentStatus {
        observed_generation: Some(1),
        deployment_id: Some("d".into()),
        latest_revision_id: Some(latest.into()),
        revisions: vec![RevisionSummary {
            id: latest.into(),
            status: "DEPLOYED".into(),
            commit_sha: built.map(str::to_owned),
            ..Default::default()
        }],
        promoted_from: record.map(Box::new),
        ..Default::default()
    }
}

fn record(commit: &str, prior: Option<&str>) -> PromotedFrom {
    PromotedFrom {
        name: "staging".into(),
        namespace: "prod".into(),
        revision_id: "rs1".into(),
        commit_sha: Some(commit.into()),
        deployed: Some("release".into()),
        prior_revision_id: prior.map(str::to_owned),
        at: ago(30).to_string(),
        ..Default::default()
    }
}

/// One case of a `github` target promoting from a source in its namespace.
struct GithubCase {
    /// What is asked.
    what: &'static str,
    /// The target's status.
    status: AgentDeploymentStatus,
    /// The commit the source serves.
    source_commit: &'static str,
    /// The target's generation.
    generation: Option<i64>,
    /// A redeploy of the target is requested.
    redeploy_requested: bool,
    /// The reason of the step, or `Deploy`.
    want: &'static str,
    /// A deploy takes a new revision.
    new_revision: bool,
}

/// A [`GithubCase`] at generation 1, the source serving C1, no redeploy
/// requested.
fn github_case(
    what: &'static str,
    status: AgentDeploymentStatus,
    want: &'static str,
    new_revision: bool,
) -> GithubCase {
    GithubCase {
        what,
        status,
        source_commit: C1,
        generation: Some(1),
        redeploy_requested: false,
        want,
        new_revision,
    }
}

/// Asserts each case's step: its reason; a deploy of the source's ref and
/// commit (a new revision or not), a refusal naming both commits.
fn assert_github(cases: Vec<GithubCase>) {
    let p = promotion(None, true, 0);
    for case in cases {
        let mut t = target("prod", Source::Github, &p, &case.status);
        t.generation = case.generation;
        t.redeploy_requested = case.redeploy_requested;
        let s = source(
            "prod",
            Source::Github,
            Some(github_serving(case.source_commit)),
        );
        let step = decide(&t, Some(&s), now());
        assert_eq!(reason_of(&step), case.want, "{}: {step:?}", case.what);
        match &step {
            Step::Deploy(take) => {
                assert_eq!(take.new_revision, case.new_revision, "{}", case.what);
                assert_eq!(take.repo_ref.as_deref(), Some("release"), "{}", case.what);
                assert_eq!(take.image_uri, None, "{}", case.what);
                assert_eq!(
                    take.record.commit_sha.as_deref(),
                    Some(case.source_commit),
                    "{}",
                    case.what
                );
            }
            Step::Refused { message, .. } => {
                assert!(
                    message.contains(C1) && message.contains(C2),
                    "{}: {message}",
                    case.what
                );
            }
            Step::Wait { .. } => {}
        }
    }
}

#[test]
fn github_takes_the_ref_and_a_new_revision_only_for_another_commit() {
    assert_github(vec![
        github_case(
            "no deployment yet: the create builds the ref",
            AgentDeploymentStatus::default(),
            "Deploy",
            false,
        ),
        github_case(
            "running another commit, nothing promoted: one new revision",
            github_status("r1", Some(C2), None),
            "Deploy",
            true,
        ),
        github_case(
            "already running the commit: no new revision",
            github_status("r1", Some(C1), None),
            "Deploy",
            false,
        ),
    ]);
}

#[test]
fn github_checks_the_commit_built_for_the_promotion() {
    assert_github(vec![
        github_case(
            "the revision started for the promotion built the verified commit",
            github_status("r2", Some(C1), Some(record(C1, Some("r1")))),
            "Deploy",
            false,
        ),
        github_case(
            "the revision started for the promotion is not built yet",
            github_status("r2", None, Some(record(C1, Some("r1")))),
            "Deploy",
            false,
        ),
        github_case(
            "the revision started for the promotion built another commit",
            github_status("r2", Some(C2), Some(record(C1, Some("r1")))),
            reason::PROMOTION_COMMIT_MISMATCH,
            false,
        ),
        github_case(
            "a create built another commit",
            github_status("r1", Some(C2), Some(record(C1, None))),
            reason::PROMOTION_COMMIT_MISMATCH,
            false,
        ),
        github_case(
            "still the revision before the promotion: not checked",
            github_status("r1", Some(C2), Some(record(C1, Some("r1")))),
            "Deploy",
            false,
        ),
    ]);
}

#[test]
fn github_a_commit_mismatch_gives_way_to_another_commit_a_spec_change_or_a_redeploy() {
    let mismatched = || github_status("r2", Some(C2), Some(record(C1, Some("r1"))));
    assert_github(vec![
        GithubCase {
            source_commit: C2,
            ..github_case(
                "mismatch, then the source serves another commit: a new revision",
                mismatched(),
                "Deploy",
                false,
            )
        },
        GithubCase {
            generation: Some(2),
            ..github_case(
                "mismatch, then the spec changed: the pass goes on",
                mismatched(),
                "Deploy",
                false,
            )
        },
        GithubCase {
            redeploy_requested: true,
            ..github_case(
                "mismatch, then a redeploy request: the pass goes on",
                mismatched(),
                "Deploy",
                false,
            )
        },
    ]);
}

/// A new revision records the revision it follows, so that the check
/// applies to the one the promotion starts.
#[test]
fn github_a_new_revision_records_the_revision_it_follows() {
    let p = promotion(None, true, 0);
    let status = github_status("r1", Some(C2), None);
    let src = source("prod", Source::Github, Some(github_serving(C1)));
    let Step::Deploy(take) = decide(
        &target("prod", Source::Github, &p, &status),
        Some(&src),
        now(),
    ) else {
        panic!("deploys")
    };
    assert_eq!(take.record.prior_revision_id.as_deref(), Some("r1"));
}

/// The source's commit not known yet: wait.
#[test]
fn github_waits_for_the_commit_of_the_source() {
    let p = promotion(None, true, 0);
    let mut serving = github_serving(C1);
    serving.commit_sha = None;
    let s = source("prod", Source::Github, Some(serving));
    let status = AgentDeploymentStatus::default();
    let step = decide(
        &target("prod", Source::Github, &p, &status),
        Some(&s),
        now(),
    );
    assert_eq!(reason_of(&step), reason::PROMOTION_WAITING, "{step:?}");
}

#[test]
fn a_soak_states_its_end_time_so_the_message_stays_the_same() {
    let status = AgentDeploymentStatus::default();
    let p = promotion(None, true, 600);
    let src = source(
        "prod",
        Source::ExternalDocker,
        Some(docker_serving(true, Some(ago(100)))),
    );
    let message = |at: Timestamp| match decide(
        &target("prod", Source::ExternalDocker, &p, &status),
        Some(&src),
        at,
    ) {
        Step::Wait { message, .. } => message,
        other => panic!("{other:?}"),
    };
    let first = message(now());
    assert!(first.ends_with("ends at 2026-11-27T12:08:20Z"), "{first}");
    assert_eq!(message(now() + jiff::SignedDuration::from_secs(7)), first);
}

#[test]
fn a_wait_or_a_refusal_holds_what_was_taken_and_a_deploy_does_not() {
    let take = Step::Deploy(Box::new(Take {
        image_uri: None,
        repo_ref: Some("release".into()),
        record: record(C1, None),
        new_revision: false,
        changed: false,
    }));
    assert_eq!(Hold::of(&take), None);
    let wait = Hold::of(&Step::Wait {
        message: "soak".into(),
        recheck_in: Some(std::time::Duration::from_secs(5)),
    })
    .unwrap();
    assert!(!wait.refused && wait.reason == reason::PROMOTION_WAITING);
    assert_eq!(wait.recheck_in, Some(std::time::Duration::from_secs(5)));
    let refused = Hold::of(&refused(reason::PROMOTION_NOT_GRANTED, "no".into())).unwrap();
    assert!(refused.refused && refused.reason == reason::PROMOTION_NOT_GRANTED);
    // What is kept: the identity taken last, no new revision.
    let status = github_status("r2", Some(C1), Some(record(C1, Some("r1"))));
    let held = kept(Source::Github, &status).unwrap();
    assert_eq!(
        (held.repo_ref.as_deref(), held.image_uri, held.new_revision),
        (Some("release"), None, false)
    );
    assert!(kept(Source::Github, &AgentDeploymentStatus::default()).is_none());
}

#[test]
fn a_commit_mismatch_goes_back_once_to_what_served_before() {
    use crate::api::deployment::RollbackStatus;
    let rec = record(C1, Some("r1"));
    // The promotion's revision r2 was built from C2, not the C1 verified.
    let mut status = github_status("r2", Some(C2), Some(rec.clone()));
    assert_eq!(undo(&rec, &status), Some(("r2".into(), "r1".into())));
    let message = mismatch_of(&rec, &status).unwrap();
    assert!(message.contains(C1) && message.contains(C2), "{message}");
    // Built from C1: nothing to undo.
    let fine = github_status("r2", Some(C1), Some(rec.clone()));
    assert_eq!((undo(&rec, &fine), mismatch_of(&rec, &fine)), (None, None));
    // Commit not known yet: nothing to undo yet.
    let unknown = github_status("r2", None, Some(rec.clone()));
    assert_eq!(undo(&rec, &unknown), None);
    // Nothing served before the promotion: nothing to go back to, the
    // mismatch is still reported.
    let first = record(C1, None);
    let created = github_status("r2", Some(C2), Some(first.clone()));
    assert_eq!(undo(&first, &created), None);
    assert!(mismatch_of(&first, &created).is_some());
    // Undone: the latest revision is the redeploy of r1; not undone again,
    // and the message names both commits and the revision that serves.
    status.rollback = Some(Box::new(RollbackStatus {
        from_revision_id: "r2".into(),
        to_revision_id: "r1".into(),
        revision_id: Some("r3".into()),
        at: now().to_string(),
        reason: "PromotionCommitMismatch".into(),
        ..Default::default()
    }));
    status.latest_revision_id = Some("r3".into());
    status.revisions.push(RevisionSummary {
        id: "r3".into(),
        status: "DEPLOYING".into(),
        commit_sha: Some("c0".into()),
        ..Default::default()
    });
    assert_eq!(undo(&rec, &status), None);
    let message = mismatch_of(&rec, &status).unwrap();
    assert!(
        message.contains(C2)
            && message.contains(C1)
            && message.contains("Went back to revision r1"),
        "{message}"
    );
}
