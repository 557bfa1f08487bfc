//! Preview environments: when an AgentDeployment expires (`spec.expiry`),
//! what its expiry does, and whether one more preview fits under the
//! AgentControlPlane's `spec.previews.maxLive`. No IO; every function is a
//! table of cases in the tests.

use std::time::Duration;

use jiff::Timestamp;

use crate::api::deployment::{DeletionPolicy, Expiry};

/// The instant `expiry` makes a deployment expire: the earliest of
/// `at`, `created + afterCreationSeconds` and `last_revision +
/// idleSeconds` (`created` while no revision is known). `None`: no part
/// can be computed (an `at` that does not parse is left out: admission
/// refuses it).
pub fn expires_at(
    expiry: &Expiry,
    created: Option<Timestamp>,
    last_revision: Option<Timestamp>,
) -> Option<Timestamp> {
    let after = |base: Option<Timestamp>, seconds: Option<u32>| {
        base?
            .checked_add(jiff::SignedDuration::from_secs(i64::from(seconds?)))
            .ok()
    };
    [
        expiry.at.as_deref().and_then(|t| t.parse().ok()),
        after(created, expiry.after_creation_seconds),
        after(last_revision.or(created), expiry.idle_seconds),
    ]
    .into_iter()
    .flatten()
    .min()
}

/// Where a pass stands with the expiry of its object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// No expiry: the pass goes on.
    None,
    /// Not yet: the pass goes on and wakes up at the latest in this time.
    Live(Duration),
    /// The instant passed and the expiry is not recorded: expire now.
    Due,
    /// Already expired (`status.expiredAt`): no request, ever, while the
    /// object exists (even when `spec.expiry` was removed since).
    Expired,
}

/// The expiry step of a pass at `now`: `expired` is `status.expiredAt`
/// set, `at` the instant of [`expires_at`].
pub fn step(expired: bool, at: Option<Timestamp>, now: Timestamp) -> Step {
    if expired {
        return Step::Expired;
    }
    let Some(at) = at else {
        return Step::None;
    };
    match Duration::try_from(now.duration_until(at)) {
        Ok(left) if !left.is_zero() => Step::Live(left),
        _ => Step::Due,
    }
}

/// What the expiry of a deployment does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expire {
    /// DELETE this remote deployment (once; 404 counts as done), then
    /// record the expiry.
    DeleteRemote(String),
    /// Record the expiry without a request: no remote deployment is held,
    /// or `deletionPolicy: Orphan` leaves it running.
    RecordOnly,
    /// A create may have happened and is not recorded (the create-pending
    /// marker without an id): the pass recovers it first, like any other
    /// pass, and the next one expires it.
    RecoverFirst,
}

/// What expiring an object does: `id` is its remote deployment (status or
/// the id annotation), `create_pending` its create-pending marker.
pub fn expire(policy: DeletionPolicy, id: Option<&str>, create_pending: bool) -> Expire {
    match (id, policy) {
        (Some(_), DeletionPolicy::Orphan) => Expire::RecordOnly,
        (Some(id), DeletionPolicy::Delete) => Expire::DeleteRemote(id.to_owned()),
        (None, _) if create_pending => Expire::RecoverFirst,
        (None, _) => Expire::RecordOnly,
    }
}

/// An AgentDeployment of the namespace as the preview cap sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Preview<'a> {
    /// `namespace/name` of the object.
    pub name: String,
    /// `spec.controlPlaneRef.name`.
    pub plane: &'a str,
    /// `spec.expiry` is set.
    pub has_expiry: bool,
    /// It holds a remote deployment, or may (an id in status or in the id
    /// annotation, or the create-pending marker).
    pub holds_remote: bool,
    /// `status.expiredAt` is set.
    pub expired: bool,
}

impl Preview<'_> {
    /// True when it counts against the cap of `plane`: a preview of that
    /// plane that holds a remote deployment and has not expired.
    pub fn live_on(&self, plane: &str) -> bool {
        self.has_expiry && self.holds_remote && !self.expired && self.plane == plane
    }
}

/// Whether the preview `me` of `plane` must wait before obtaining its
/// deployment: `Some(live)` (the number of live previews, `me` aside) when
/// `max_live` of them are live already; `None`: it may go on (no cap, or
/// below it).
pub fn over_cap<'a>(
    max_live: Option<u32>,
    plane: &str,
    me: &str,
    all: impl IntoIterator<Item = Preview<'a>>,
) -> Option<u32> {
    let max = max_live?;
    let live = all
        .into_iter()
        .filter(|p| p.name != me && p.live_on(plane))
        .count();
    let live = u32::try_from(live).unwrap_or(u32::MAX);
    (live >= max).then_some(live)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn expiry(at: Option<&str>, after: Option<u32>, idle: Option<u32>) -> Expiry {
        Expiry {
            at: at.map(str::to_owned),
            after_creation_seconds: after,
            idle_seconds: idle,
        }
    }

    #[test]
    fn the_earliest_part_of_the_expiry_wins() {
        let created = Some(t("2026-01-01T00:00:00Z"));
        let revised = Some(t("2026-01-01T10:00:00Z"));
        let cases = [
            // (at, afterCreationSeconds, idleSeconds, expected)
            (
                Some("2026-01-02T00:00:00Z"),
                None,
                None,
                Some("2026-01-02T00:00:00Z"),
            ),
            (None, Some(3600), None, Some("2026-01-01T01:00:00Z")),
            (None, None, Some(3600), Some("2026-01-01T11:00:00Z")),
            (
                Some("2026-01-02T00:00:00Z"),
                Some(7200),
                Some(60),
                Some("2026-01-01T02:00:00Z"),
            ),
            (
                Some("2026-01-01T00:30:00Z"),
                Some(7200),
                None,
                Some("2026-01-01T00:30:00Z"),
            ),
            (Some("not a time"), None, None, None),
            (None, None, None, None),
        ];
        for (at, after, idle, want) in cases {
            assert_eq!(
                expires_at(&expiry(at, after, idle), created, revised),
                want.map(t),
                "{at:?} {after:?} {idle:?}"
            );
        }
    }

    #[test]
    fn idle_counts_from_creation_until_a_revision_is_known() {
        let e = expiry(None, None, Some(60));
        let created = Some(t("2026-01-01T00:00:00Z"));
        assert_eq!(
            expires_at(&e, created, None),
            Some(t("2026-01-01T00:01:00Z"))
        );
        assert_eq!(expires_at(&e, None, None), None);
        let e = expiry(None, Some(60), None);
        assert_eq!(expires_at(&e, None, Some(t("2026-01-01T00:00:00Z"))), None);
    }

    #[test]
    fn the_step_waits_until_the_instant_then_expires_once() {
        let now = t("2026-01-01T00:00:00Z");
        let cases = [
            (false, None, Step::None),
            (
                false,
                Some("2026-01-01T00:00:05Z"),
                Step::Live(Duration::from_secs(5)),
            ),
            (false, Some("2026-01-01T00:00:00Z"), Step::Due),
            (false, Some("2025-12-31T00:00:00Z"), Step::Due),
            // Recorded: stays expired, even with the expiry removed or
            // moved into the future.
            (true, None, Step::Expired),
            (true, Some("2027-01-01T00:00:00Z"), Step::Expired),
        ];
        for (expired, at, want) in cases {
            assert_eq!(step(expired, at.map(t), now), want, "{expired} {at:?}");
        }
    }

    #[test]
    fn expiry_deletes_only_a_held_deployment_under_the_delete_policy() {
        use DeletionPolicy::{Delete, Orphan};
        let cases = [
            (Delete, Some("d1"), false, Expire::DeleteRemote("d1".into())),
            (Delete, Some("d1"), true, Expire::DeleteRemote("d1".into())),
            (Orphan, Some("d1"), false, Expire::RecordOnly),
            (Delete, None, false, Expire::RecordOnly),
            (Orphan, None, false, Expire::RecordOnly),
            (Delete, None, true, Expire::RecoverFirst),
            (Orphan, None, true, Expire::RecoverFirst),
        ];
        for (policy, id, pending, want) in cases {
            assert_eq!(
                expire(policy, id, pending),
                want,
                "{policy:?} {id:?} {pending}"
            );
        }
    }

    fn preview<'a>(name: &'a str, plane: &'a str) -> Preview<'a> {
        Preview {
            name: name.to_owned(),
            plane,
            has_expiry: true,
            holds_remote: true,
            expired: false,
        }
    }

    #[test]
    fn only_live_previews_of_the_plane_count_against_the_cap() {
        let all = [
            preview("a", "default"),
            Preview {
                expired: true,
                ..preview("b", "default")
            },
            Preview {
                holds_remote: false,
                ..preview("c", "default")
            },
            Preview {
                has_expiry: false,
                ..preview("d", "default")
            },
            preview("e", "other"),
            preview("me", "default"),
        ];
        let cases = [
            (None, None),
            (Some(0), Some(1)),
            (Some(1), Some(1)),
            (Some(2), None),
        ];
        for (max, want) in cases {
            assert_eq!(
                over_cap(max, "default", "me", all.iter().cloned()),
                want,
                "{max:?}"
            );
        }
        // The N+1th waits; once one of the N expires, it goes on.
        let full = [preview("a", "p"), preview("b", "p")];
        assert_eq!(over_cap(Some(2), "p", "c", full.iter().cloned()), Some(2));
        let one_expired = [
            preview("a", "p"),
            Preview {
                expired: true,
                ..preview("b", "p")
            },
        ];
        assert_eq!(
            over_cap(Some(2), "p", "c", one_expired.iter().cloned()),
            None
        );
    }
}
