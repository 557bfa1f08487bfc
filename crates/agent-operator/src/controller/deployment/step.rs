//! The AgentDeployment pass as a state machine (Flux helm-controller's
//! `DetermineReleaseState` then `actionForState`; Stackable's steps with
//! typed hand-offs): what the pass observed so far is [`Seen`] (the object,
//! the in-process memory and the clock as read at its start, the inputs
//! and the fresh read once read); [`decide()`], pure, reads it ([`View`])
//! and returns the one [`Step`] to take next; [`super::machine`] takes it
//! (one small function per step) and decides again, until a step ends the
//! pass with its [`Report`].
//!
//! Two steps gather what the pass decides on and go on: [`Step::Finalize`]
//! (the finalizer written alone, the one write before any request) and
//! [`Step::Observe`] (the inputs). Every other step ends the pass: with no
//! request ([`Step::Report`]), or with its reads and at most one remote
//! mutation ([`Step::Expire`], [`Step::Obtain`], [`Step::Poll`],
//! [`Step::Change`], [`Step::Delete`]).

use std::time::Duration;

use super::observe::Observed;
use super::report::Report;
use crate::api::deployment::{AgentDeployment, DEPLOYMENT_ID_ANNOTATION};
use crate::plan::decide::{self, Before};
use crate::plan::expiry;
use crate::plan::policy;
use crate::plan::steps;
use kube::ResourceExt;

/// What an AgentDeployment pass has observed so far: the state its next
/// step is decided on ([`decide()`]).
pub struct Seen {
    /// `Kind/namespace/name` of the object.
    pub key: String,
    /// The object is being deleted.
    pub deleting: bool,
    /// The first pass of the object since the operator started (read from
    /// the in-process memory at the start; remembered by the report).
    pub first_pass: bool,
    /// The pause annotation: set, unset, or a value that does not parse
    /// (its message).
    pub paused: Result<bool, String>,
    /// The expiry step of the object at the start of the pass (the clock).
    pub expiry: expiry::Step,
    /// The expiry step let the pass go on (nothing to expire on the fresh
    /// read, or a create to recover first).
    pub expiry_checked: bool,
    /// This pass wrote the finalizer alone ([`Step::Finalize`]).
    pub finalizer_written: bool,
    /// The inputs ([`Step::Observe`]): `None` until read; `Err`: the
    /// report of the input that ends the pass (missing, refused, paused
    /// plane, the object gone).
    pub inputs: Option<Result<Observed, Box<Report>>>,
}

impl Seen {
    /// What a pass of `obj` knows at its start, with no request: its
    /// deletion, pause and expiry, and whether the operator saw it before
    /// (`first_pass`, read from the in-process memory).
    pub fn start(obj: &AgentDeployment, key: String, first_pass: bool) -> Self {
        Self {
            key,
            deleting: obj.metadata.deletion_timestamp.is_some(),
            first_pass,
            paused: obj.paused(),
            expiry: super::expire::step_of(obj),
            expiry_checked: false,
            finalizer_written: false,
            inputs: None,
        }
    }

    /// The fresh read of the object the inputs made, if any.
    pub fn fresh(&self) -> Option<&AgentDeployment> {
        match &self.inputs {
            Some(Ok(inputs)) => inputs.fresh.as_deref(),
            _ => None,
        }
    }

    /// The object the pass decides on: the fresh read of the inputs, when
    /// made, else `obj`.
    pub fn object<'a>(&'a self, obj: &'a AgentDeployment) -> &'a AgentDeployment {
        self.fresh().unwrap_or(obj)
    }

    /// The view [`decide()`] reads of what was seen about `obj`. Pure.
    pub fn view(&self, obj: &AgentDeployment) -> View {
        let inputs = match &self.inputs {
            None => Inputs::NotRead,
            Some(Err(_)) => Inputs::Stopped,
            Some(Ok(inputs)) => {
                let o = inputs.fresh.as_deref().unwrap_or(obj);
                let before = decide::before_remote(&inputs.known(o));
                Inputs::Read {
                    finalizer_needed: inputs.fresh.is_some() && needs_finalizer(o),
                    before: policy::before(
                        o.spec.management_policy,
                        before,
                        inputs.previous.deployment_id.is_some(),
                    ),
                }
            }
        };
        View {
            deleting: self.deleting,
            finalizer_needed: !self.finalizer_written && needs_finalizer(obj),
            paused: self.paused.as_ref().map(|p| *p).map_err(|_| ()),
            expiry: self.expiry.clone(),
            expiry_checked: self.expiry_checked,
            inputs: if self.finalizer_written {
                inputs.written()
            } else {
                inputs
            },
        }
    }
}

/// What [`decide()`] reads: plain facts about the object and the pass.
#[derive(Clone, Debug, PartialEq)]
pub struct View {
    /// The object is being deleted.
    pub deleting: bool,
    /// The object as given lacks the finalizer, names a deployment (one
    /// that names none gets it with the create-pending marker), and this
    /// pass has not written it.
    pub finalizer_needed: bool,
    /// The pause annotation; `Err`: a value that does not parse.
    pub paused: Result<bool, ()>,
    /// The expiry step at the start of the pass.
    pub expiry: expiry::Step,
    /// The expiry step let the pass go on.
    pub expiry_checked: bool,
    /// What the inputs say.
    pub inputs: Inputs,
}

/// What the inputs of a pass say, for [`decide()`].
#[derive(Clone, Debug, PartialEq)]
pub enum Inputs {
    /// Not read yet.
    NotRead,
    /// An input ends the pass (its report is ready).
    Stopped,
    /// Read: the step [`decide::before_remote`] chooses on them (under
    /// the management policy, [`policy::before`]), and whether the fresh
    /// read of the object lacks the finalizer this pass has not written.
    Read {
        /// The fresh read names a deployment and lacks the finalizer.
        finalizer_needed: bool,
        /// The step before any control plane request.
        before: Before,
    },
}

impl Inputs {
    /// The inputs once this pass wrote the finalizer: nothing left to
    /// write.
    fn written(self) -> Self {
        match self {
            Self::Read { before, .. } => Self::Read {
                finalizer_needed: false,
                before,
            },
            other => other,
        }
    }
}

/// The one step a pass takes next.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Add the finalizer alone, before anything else (and, for an object
    /// whose fresh read names a deployment the cached one did not, before
    /// its first request); then decide again.
    Finalize,
    /// Read the inputs: a fresh read when no deployment is recorded yet,
    /// the AgentControlPlane, the Secrets, the listener, the image; then
    /// decide again.
    Observe,
    /// The expiry instant passed: on a fresh read, delete the remote
    /// deployment once (per `spec.deletionPolicy`) and record the expiry;
    /// or go on, when the fresh read says otherwise.
    Expire,
    /// End the pass with no request.
    Report(Ending),
    /// No deployment recorded: adopt, recover or create one, then follow
    /// its revision.
    Obtain,
    /// A revision is in progress and nothing changed: read only the
    /// revision (when its poll is due), then follow it.
    Poll(String),
    /// Read the deployment and make it equal to the spec (at most one
    /// PATCH or redeploy), then follow its revision.
    Change,
    /// The object is being deleted: hand the deployment over, orphan it,
    /// or DELETE it and read until it is gone.
    Delete,
}

/// Why a pass ends with no request ([`Step::Report`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Ending {
    /// The pause annotation is set.
    Paused,
    /// The pause annotation holds a value that is neither "true" nor
    /// "false".
    InvalidPause,
    /// Expired by an earlier pass.
    Expired,
    /// An input ends the pass (its report was made when it was read).
    Stopped,
    /// A rejected request with this desired state is not due yet.
    WaitRejected(Duration),
    /// A change of Secret values waits for the last one's interval.
    WaitSecrets(Duration),
    /// The remote deployment is being deleted outside the operator and
    /// its next read is not due.
    WaitRemoteDeleting(Duration),
    /// The first pass after a restart of an object that had converged:
    /// its drift check is spread over the resync period.
    ColdStart,
}

/// The step to take on what was seen (`v`). Pure.
///
/// In order: a deletion deletes; the finalizer goes first; a pause, an
/// expiry that ended or is due come before any input is read; an input
/// that is missing ends the pass; the finalizer of a fresh read that names
/// a deployment goes before the first request; then the step before the
/// remote ([`decide::before_remote`]).
pub fn decide(v: &View) -> Step {
    if v.deleting {
        return Step::Delete;
    }
    let before = match &v.inputs {
        Inputs::NotRead => return before_inputs(v),
        Inputs::Stopped => return Step::Report(Ending::Stopped),
        Inputs::Read {
            finalizer_needed: true,
            ..
        } => return Step::Finalize,
        Inputs::Read { before, .. } => before.clone(),
    };
    match before {
        Before::WaitRejected(d) => Step::Report(Ending::WaitRejected(d)),
        Before::WaitSecrets(d) => Step::Report(Ending::WaitSecrets(d)),
        Before::WaitRemoteDeleting(d) => Step::Report(Ending::WaitRemoteDeleting(d)),
        Before::SpreadColdStart => Step::Report(Ending::ColdStart),
        Before::PollRevision(rid) => Step::Poll(rid),
        Before::Obtain => Step::Obtain,
        Before::ReadDeployment => Step::Change,
    }
}

/// The step before the inputs are read: the finalizer, the pause, the
/// expiry, or the read of the inputs. Pure.
fn before_inputs(v: &View) -> Step {
    if v.finalizer_needed {
        return Step::Finalize;
    }
    match v.paused {
        Ok(true) => return Step::Report(Ending::Paused),
        Err(()) => return Step::Report(Ending::InvalidPause),
        Ok(false) => {}
    }
    match v.expiry {
        expiry::Step::Expired => Step::Report(Ending::Expired),
        expiry::Step::Due if !v.expiry_checked => Step::Expire,
        _ => Step::Observe,
    }
}

/// True when `obj` lacks the finalizer and names a deployment, so that
/// the pass writes it alone before anything else ([`Step::Finalize`]);
/// one that names none gets it with the create-pending marker
/// ([`finalizer_with_marker`]).
pub fn needs_finalizer(obj: &AgentDeployment) -> bool {
    !crate::controller::kind::has_finalizer(obj, crate::api::deployment::FINALIZER)
        && !finalizer_with_marker(obj)
}

/// True when `obj` names no deployment, so it gets its finalizer with the
/// create-pending marker ([`steps::finalizer_with_marker`]).
pub fn finalizer_with_marker(obj: &AgentDeployment) -> bool {
    steps::finalizer_with_marker(
        obj.status
            .as_ref()
            .is_some_and(|s| s.deployment_id.is_some()),
        obj.spec.deployment_id.is_some(),
        obj.annotations().contains_key(DEPLOYMENT_ID_ANNOTATION),
        obj.create_pending(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pass of an object at rest, its inputs not read.
    fn start() -> View {
        View {
            deleting: false,
            finalizer_needed: false,
            paused: Ok(false),
            expiry: expiry::Step::None,
            expiry_checked: false,
            inputs: Inputs::NotRead,
        }
    }

    fn read(before: Before) -> Inputs {
        Inputs::Read {
            finalizer_needed: false,
            before,
        }
    }

    /// `start()` changed by `f`.
    fn with(f: &dyn Fn(&mut View)) -> View {
        let mut v = start();
        f(&mut v);
        v
    }

    /// Each row: what was seen before the inputs, and the one step it
    /// takes.
    #[test]
    fn each_state_before_the_inputs_takes_one_step() {
        let s = Duration::from_secs;
        let cases: Vec<(&str, View, Step)> = vec![
            ("at rest: read the inputs", start(), Step::Observe),
            (
                "the finalizer before the pause",
                with(&|v| {
                    v.finalizer_needed = true;
                    v.paused = Ok(true);
                }),
                Step::Finalize,
            ),
            (
                "paused before the expiry",
                with(&|v| {
                    v.paused = Ok(true);
                    v.expiry = expiry::Step::Due;
                }),
                Step::Report(Ending::Paused),
            ),
            (
                "a pause that does not parse",
                with(&|v| v.paused = Err(())),
                Step::Report(Ending::InvalidPause),
            ),
            (
                "expired: no request",
                with(&|v| v.expiry = expiry::Step::Expired),
                Step::Report(Ending::Expired),
            ),
            (
                "expiry due",
                with(&|v| v.expiry = expiry::Step::Due),
                Step::Expire,
            ),
            (
                "expiry due, but the fresh read says not yet: the inputs",
                with(&|v| {
                    v.expiry = expiry::Step::Due;
                    v.expiry_checked = true;
                }),
                Step::Observe,
            ),
            (
                "still live: the inputs",
                with(&|v| v.expiry = expiry::Step::Live(s(60))),
                Step::Observe,
            ),
        ];
        for (what, view, want) in cases {
            assert_eq!(decide(&view), want, "{what}");
        }
    }

    /// Each row: a deletion, or what the inputs say, and the one step it
    /// takes.
    #[test]
    fn a_deletion_or_the_inputs_take_one_step() {
        let cases: Vec<(&str, View, Step)> = vec![
            (
                "deleting, whatever else",
                with(&|v| {
                    v.deleting = true;
                    v.finalizer_needed = true;
                    v.paused = Ok(true);
                }),
                Step::Delete,
            ),
            (
                "an input missing",
                with(&|v| v.inputs = Inputs::Stopped),
                Step::Report(Ending::Stopped),
            ),
            (
                "the fresh read names a deployment and lacks the finalizer",
                with(&|v| {
                    v.inputs = Inputs::Read {
                        finalizer_needed: true,
                        before: Before::Obtain,
                    }
                }),
                Step::Finalize,
            ),
        ];
        for (what, view, want) in cases {
            assert_eq!(decide(&view), want, "{what}");
        }
    }

    /// Once the inputs are read, the step before the remote chooses.
    #[test]
    fn the_inputs_choose_the_remote_step() {
        let s = Duration::from_secs;
        let cases = [
            (
                Before::WaitRejected(s(5)),
                Step::Report(Ending::WaitRejected(s(5))),
            ),
            (
                Before::WaitSecrets(s(6)),
                Step::Report(Ending::WaitSecrets(s(6))),
            ),
            (
                Before::WaitRemoteDeleting(s(7)),
                Step::Report(Ending::WaitRemoteDeleting(s(7))),
            ),
            (Before::SpreadColdStart, Step::Report(Ending::ColdStart)),
            (Before::PollRevision("r1".into()), Step::Poll("r1".into())),
            (Before::Obtain, Step::Obtain),
            (Before::ReadDeployment, Step::Change),
        ];
        for (before, want) in cases {
            let mut v = start();
            v.inputs = read(before.clone());
            assert_eq!(decide(&v), want, "{before:?}");
            // A pause or a finalizer seen before the inputs no longer
            // matters once they are read (the pass got past them).
            v.finalizer_needed = true;
            assert_eq!(decide(&v), want, "{before:?}, the finalizer written");
        }
    }
}
