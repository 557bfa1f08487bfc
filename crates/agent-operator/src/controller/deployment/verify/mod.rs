//! `spec.verify`: checks of a deployment's agent server once its latest
//! revision is `DEPLOYED`, then on the slow period.
//!
//! The pure middle ([`verify_step`], [`retry_backoff`], [`outcome`],
//! [`verified_condition`], [`RunJudge`], [`classify`]) decides when a check
//! is due and what its result means for the conditions; `Pass::verify` is
//! the IO edge (`act`): at most one control plane read (`GET` of the deployment, to
//! check that `active_revision_id` is the revision just deployed, only when
//! the pass did not read the deployment already), then an assistant search
//! and one stateless run on the agent server, bounded by [`Limits`].
//!
//! Sources: docs/control-plane-api.md "Agent server" (`POST /assistants/search`,
//! `POST /runs/stream`, `X-Api-Key` of the organization that owns the
//! deployment, answer shapes, event names, an unknown assistant is 404/422) and
//! "Deployment" (`active_revision_id`, `source_config.custom_url` is the
//! deployment URL).

mod act;
mod decide;
mod suite;

pub(in crate::controller::deployment) use act::verified;
pub use act::{Checked, check};
pub use decide::*;

#[cfg(test)]
mod tests;
