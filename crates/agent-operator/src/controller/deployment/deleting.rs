//! Deletes in progress on the control plane.
//!
//! A delete is asynchronous (docs/control-plane-api.md, "Requests",
//! Delete): `DELETE /v2/deployments/{id}` answers 204, then `GET` keeps
//! answering with `status` `AWAITING_DELETE` (then `AWAITING_FINAL_DELETE`)
//! until it answers 404, which can take a minute or more. While that lasts:
//! - the DELETE is sent once; it is sent again only when a read shows the
//!   deployment no longer deleting (the delete did not take);
//! - the deployment is read on an exponential backoff per object: the poll
//!   interval, doubling, capped at the longest poll interval (2 s doubling
//!   to 30 s by default), each delay jittered ±25 %;
//! - a pass woken before the next read is due sends nothing.
//!
//! The same backoff paces the reads of a deployment being deleted outside
//! the operator. The finalizer is still removed only on a read that answers
//! 404 (the cleanup of the parent module); this memory only saves requests,
//! so losing it (a restart) costs one read, and, unless the status shows the
//! deployment deleting, one more DELETE.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub use crate::plan::verdict::{DELETING_STATUSES, is_deleting};

/// The delay after the `reads`-th read (0-based) that found the deployment
/// still deleting: `base * 2^reads`, capped at `cap` (never below `base`).
/// Without jitter (added by [`Deletes::read`]).
pub fn read_delay(reads: u32, base: Duration, cap: Duration) -> Duration {
    base.saturating_mul(1u32 << reads.min(20))
        .min(cap.max(base))
}

/// What a cleanup pass knows about the delete before it sends anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Known {
    /// The deployment was seen deleting since the last DELETE (or a delete
    /// outside the operator): a DELETE is not needed.
    pub accepted: bool,
    /// Time left before the next read is due; `None`: due now.
    pub due_in: Option<Duration>,
}

/// The step of a cleanup pass before any request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Send DELETE, then read.
    Delete,
    /// Read the deployment only.
    Read,
    /// Send nothing; the next read is due after this delay.
    Wait(Duration),
}

/// The step of a cleanup pass before any request (see [`Step`]).
pub fn before(k: Known) -> Step {
    if !k.accepted {
        return Step::Delete;
    }
    match k.due_in {
        Some(wait) if !wait.is_zero() => Step::Wait(wait),
        _ => Step::Read,
    }
}

/// What one object remembers of its remote delete.
#[derive(Clone, Debug)]
struct Watch {
    /// The deployment being deleted.
    id: String,
    /// The last read found it deleting.
    accepted: bool,
    /// Reads in a row that found it deleting.
    reads: u32,
    /// When the next read is due.
    next: Instant,
}

/// A read of a remote delete ([`Deletes::read`]), remembered once the
/// pass's writes are done ([`Deletes::record`]).
#[derive(Clone, Debug)]
pub struct Read {
    /// The object that read.
    key: String,
    /// The delay until the next read.
    pub delay: Duration,
    /// What the object remembers of the delete after this read.
    watch: Watch,
}

/// Per object (the [`crate::controller::requeue::object_key`]): the remote delete in
/// progress, for [`before`] and the requeue of `Error::DeletionPending`.
/// In memory only (see the module documentation).
#[derive(Debug, Default)]
pub struct Deletes {
    watches: Mutex<HashMap<String, Watch>>,
}

impl Deletes {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Watch>> {
        self.watches.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What is remembered of the delete of deployment `id` by object `key`;
    /// `None` when nothing is (never read, forgotten, or another id).
    pub fn known(&self, key: &str, id: &str) -> Option<Known> {
        let watches = self.lock();
        let w = watches.get(key).filter(|w| w.id == id)?;
        Some(Known {
            accepted: w.accepted,
            due_in: Some(w.next.saturating_duration_since(Instant::now())).filter(|d| !d.is_zero()),
        })
    }

    /// What a read of deployment `id` by `key` that found it deleting
    /// (`deleting`) or not (then the next pass sends DELETE again) makes
    /// of the memory, with the delay until the next read: [`read_delay`] of
    /// the reads of this deployment so far, jittered ±25 %. A delete that
    /// does not take is thus sent again on the same backoff, never every
    /// poll interval. Reads only: the pass carries the [`Read`] in its
    /// report, [`Deletes::record`] remembers it once the writes are done.
    pub fn read(&self, key: &str, id: &str, deleting: bool, base: Duration, cap: Duration) -> Read {
        let reads = match self.lock().get(key) {
            Some(w) if w.id == id => w.reads.saturating_add(1),
            _ => 0,
        };
        let delay = crate::controller::requeue::jittered(read_delay(reads, base, cap));
        Read {
            key: key.to_owned(),
            delay,
            watch: Watch {
                id: id.to_owned(),
                accepted: deleting,
                reads,
                next: Instant::now() + delay,
            },
        }
    }

    /// Remembers `read` ([`Deletes::read`]).
    pub fn record(&self, read: Read) {
        self.lock().insert(read.key, read.watch);
    }

    /// Time left before the next read of `key` is due (zero when it is);
    /// `None` when no delete of `key` is remembered.
    pub fn due_in(&self, key: &str) -> Option<Duration> {
        self.lock()
            .get(key)
            .map(|w| w.next.saturating_duration_since(Instant::now()))
    }

    /// Forgets the delete of `key` (it ended, or the deployment is not
    /// being deleted).
    pub fn forget(&self, key: &str) {
        self.lock().remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_back_off_from_the_poll_interval_to_the_cap() {
        let s = Duration::from_secs;
        let delays: Vec<Duration> = (0..7).map(|n| read_delay(n, s(2), s(30))).collect();
        assert_eq!(delays, [s(2), s(4), s(8), s(16), s(30), s(30), s(30)]);
        assert_eq!(read_delay(u32::MAX, s(2), s(30)), s(30));
        assert_eq!(read_delay(3, s(40), s(30)), s(40), "never below the base");
    }

    #[test]
    fn a_read_delete_waits_and_a_lost_one_is_sent_again() {
        let s = Duration::from_secs;
        let cases = [
            (
                "nothing known: DELETE",
                Known {
                    accepted: false,
                    due_in: None,
                },
                Step::Delete,
            ),
            (
                "the last read found it not deleting: DELETE again, even before due",
                Known {
                    accepted: false,
                    due_in: Some(s(1)),
                },
                Step::Delete,
            ),
            (
                "deleting, read not due: nothing",
                Known {
                    accepted: true,
                    due_in: Some(s(7)),
                },
                Step::Wait(s(7)),
            ),
            (
                "deleting, read due: GET only",
                Known {
                    accepted: true,
                    due_in: None,
                },
                Step::Read,
            ),
        ];
        for (what, known, want) in cases {
            assert_eq!(before(known), want, "{what}");
        }
    }

    #[test]
    fn the_memory_doubles_per_read_and_asks_for_a_lost_delete() {
        let d = Deletes::default();
        let (base, cap) = (Duration::from_millis(100), Duration::from_secs(1));
        assert_eq!(d.known("k", "a"), None);
        let within = |got: Duration, want: Duration| {
            assert!(
                got >= want.mul_f64(0.74) && got <= want.mul_f64(1.26),
                "{got:?} is not {want:?} ± 25 %"
            );
        };
        let read = |id: &str, deleting: bool| {
            let read = d.read("k", id, deleting, base, cap);
            let delay = read.delay;
            d.record(read);
            delay
        };
        let unrecorded = d.read("k", "a", true, base, cap);
        assert_eq!(d.known("k", "a"), None, "a read alone remembers nothing");
        within(unrecorded.delay, base);
        within(read("a", true), base);
        within(read("a", true), base * 2);
        within(read("a", true), base * 4);
        let known = d.known("k", "a").unwrap();
        assert!(known.accepted && known.due_in.is_some());
        assert!(matches!(before(known), Step::Wait(_)));
        assert_eq!(d.known("k", "b"), None, "another deployment id");
        // Not deleting any more: DELETE again, still on the backoff.
        within(read("a", false), base * 8);
        assert_eq!(before(d.known("k", "a").unwrap()), Step::Delete);
        within(read("a", true), cap);
        assert!(d.due_in("k").is_some());
        // Another deployment under the same key starts again.
        within(read("b", true), base);
        d.forget("k");
        assert_eq!(d.due_in("k"), None);
    }
}
