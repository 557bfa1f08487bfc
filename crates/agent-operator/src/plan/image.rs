//! The image policy of an `external_docker` AgentDeployment
//! (`spec.imagePolicy`), pure: whether a pass asks the registry which digest
//! the tag names, which image it sends, and whether a tag moved. The
//! registry call itself is part of the observe step (it is not a control
//! plane request); nothing here does IO.
//!
//! Source: docs/control-plane-api.md "Images".

use std::time::Duration;

use crate::api::deployment::{ImagePolicy, ResolvedImage};

/// What a pass does about the image before its first control plane request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageStep {
    /// Send `imageUri` as written (`Never`, or no image).
    AsWritten,
    /// Send the digest recorded in status for this generation (no registry
    /// request).
    Recorded(String),
    /// Ask the registry (then [`record`]).
    Resolve,
}

/// Share of the drift period after which `Follow` asks the registry again:
/// the pass that checks drift comes every resync interval ±25 %, so a
/// resolution is due on each of them, never twice in one period.
pub const FOLLOW_DUE_SHARE: f64 = 0.7;

/// The step for `policy` and the spec's `image` at `generation`, given what
/// status recorded (`recorded`), how long ago it was resolved (`age`;
/// `None`: unknown, resolve) and the drift period (`period`, the resync
/// interval).
///
/// - `Never`, or no image: as written;
/// - `Pin`: the record of this generation and image, else resolve (once per
///   generation: a restart reads the record and sends the same digest);
/// - `Follow`: as `Pin`, but resolve again once the record is older than
///   [`FOLLOW_DUE_SHARE`] of the period.
pub fn step(
    policy: ImagePolicy,
    image: Option<&str>,
    generation: Option<i64>,
    recorded: Option<&ResolvedImage>,
    age: Option<Duration>,
    period: Duration,
) -> ImageStep {
    let Some(image) = image else {
        return ImageStep::AsWritten;
    };
    if policy == ImagePolicy::Never {
        return ImageStep::AsWritten;
    }
    let Some(r) = recorded.filter(|r| Some(r.generation) == generation && r.image_uri == image)
    else {
        return ImageStep::Resolve;
    };
    match policy {
        ImagePolicy::Follow if age.is_none_or(|a| a >= period.mul_f64(FOLLOW_DUE_SHARE)) => {
            ImageStep::Resolve
        }
        _ => ImageStep::Recorded(r.pinned.clone()),
    }
}

/// The record of a resolution of `image` at `generation` (`digest`,
/// `pinned`, at `now`, RFC 3339).
pub fn record(
    image: &str,
    generation: Option<i64>,
    digest: &str,
    pinned: &str,
    now: &str,
) -> ResolvedImage {
    ResolvedImage {
        generation: generation.unwrap_or_default(),
        image_uri: image.to_owned(),
        digest: digest.to_owned(),
        pinned: pinned.to_owned(),
        resolved_at: now.to_owned(),
    }
}

/// The digests `(old, new)` when the same tag of the spec, resolved again,
/// names another digest than the record (a tag moved in the registry); a
/// change of the spec (another image) is not a moved tag.
pub fn moved(previous: Option<&ResolvedImage>, now: &ResolvedImage) -> Option<(String, String)> {
    let p = previous?;
    (p.image_uri == now.image_uri && p.digest != now.digest)
        .then(|| (p.digest.clone(), now.digest.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const D1: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const D2: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

    /// Policy, image, generation, record, age, and the step expected.
    type Case<'a> = (
        ImagePolicy,
        Option<&'a str>,
        i64,
        Option<&'a ResolvedImage>,
        Option<Duration>,
        ImageStep,
    );

    fn rec(generation: i64, image: &str, digest: &str) -> ResolvedImage {
        record(
            image,
            Some(generation),
            digest,
            &format!("r.example/acme/agent@{digest}"),
            "2026-01-01T00:00:00Z",
        )
    }

    #[test]
    fn the_step_follows_the_policy_the_generation_and_the_age() {
        let image = "r.example/acme/agent:v1";
        let r = rec(3, image, D1);
        let pinned = ImageStep::Recorded(r.pinned.clone());
        let period = Duration::from_secs(300);
        let young = Some(Duration::from_secs(10));
        let old = Some(Duration::from_secs(240));
        use ImagePolicy::*;
        let cases: [Case<'_>; 12] = [
            (Never, Some(image), 3, Some(&r), young, ImageStep::AsWritten),
            (Never, Some(image), 3, None, None, ImageStep::AsWritten),
            (Pin, None, 3, None, None, ImageStep::AsWritten),
            // Pin: once per generation, whatever the age.
            (Pin, Some(image), 3, None, None, ImageStep::Resolve),
            (Pin, Some(image), 3, Some(&r), young, pinned.clone()),
            (Pin, Some(image), 3, Some(&r), old, pinned.clone()),
            (Pin, Some(image), 3, Some(&r), None, pinned.clone()),
            (Pin, Some(image), 4, Some(&r), young, ImageStep::Resolve),
            (
                Pin,
                Some("r.example/acme/agent:v2"),
                3,
                Some(&r),
                young,
                ImageStep::Resolve,
            ),
            // Follow: again once the record is old in the drift period.
            (Follow, Some(image), 3, Some(&r), young, pinned.clone()),
            (Follow, Some(image), 3, Some(&r), old, ImageStep::Resolve),
            (Follow, Some(image), 3, Some(&r), None, ImageStep::Resolve),
        ];
        for (policy, image, generation, recorded, age, want) in cases {
            assert_eq!(
                step(policy, image, Some(generation), recorded, age, period),
                want,
                "{policy:?} {image:?} gen {generation} {recorded:?} {age:?}"
            );
        }
    }

    #[test]
    fn a_tag_moved_only_when_the_same_tag_names_another_digest() {
        let image = "r.example/acme/agent:v1";
        let cases = [
            (None, rec(3, image, D2), None),
            (Some(rec(3, image, D1)), rec(3, image, D1), None),
            (
                Some(rec(3, image, D1)),
                rec(3, image, D2),
                Some((D1.to_owned(), D2.to_owned())),
            ),
            // Another generation, same tag: still a moved tag.
            (
                Some(rec(2, image, D1)),
                rec(3, image, D2),
                Some((D1.to_owned(), D2.to_owned())),
            ),
            // Another image in the spec: a change, not a moved tag.
            (
                Some(rec(2, "r.example/acme/agent:v0", D1)),
                rec(3, image, D2),
                None,
            ),
        ];
        for (previous, now, want) in cases {
            assert_eq!(moved(previous.as_ref(), &now), want, "{previous:?} {now:?}");
        }
    }
}
