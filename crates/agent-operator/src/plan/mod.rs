//! The pure core of reconciling an AgentDeployment, shared by the operator
//! (`controller::deployment`) and `agentctl apply` (`converge`): no IO
//! here, every function a table of cases in the tests.
//! - [`assistant`]: the AgentAssistant's id, bodies and one step;
//! - [`cron`]: the AgentCron's bodies (UID tag, never `end_time`) and
//!   one step;
//! - [`claims`]: one owner per remote deployment: who holds it, who takes
//!   it over when its holder goes, whether it may be adopted;
//! - [`adoption`]: the fields the control plane cannot change, compared
//!   before a remote deployment is adopted;
//! - [`desired`]: the camelCase spec → the snake_case wire request, the
//!   minimal PATCH and its read-back, fingerprints
//!   (docs/control-plane-api.md "Deployment", "Requests");
//! - [`shapes`]: how the service's answers differ from an echo of the
//!   request;
//! - [`expiry`]: when a preview expires, what its expiry does, and the
//!   cap on live previews;
//! - [`decide`]: the one step a pass takes before and after its read;
//! - [`verdict`]: the outcome, events and requeue once the revision is
//!   known;
//! - [`status`]: outcomes → kstatus conditions;
//! - [`steps`]: the small rules of the pass's steps (name lookup, remote
//!   delete, read-back, which revision to read, rejections, annotations);
//! - [`fight`]: the cap on corrections of drift;
//! - [`history`]: `status.revisions`, the last revisions followed;
//! - [`policy`]: `spec.managementPolicy` (`Observe`: read only, drift
//!   listed);
//! - [`rollback`]: `spec.rollback`, whether to redeploy the last verified
//!   revision in place of a failed one, and the spec held back meanwhile;
//! - [`promotion`]: `spec.promotion`, what a target deploys of its
//!   source (refused, waiting, or the digest or ref to send);
//! - [`logtail`]: the secret-free tail of a failure log;
//! - [`serving`]: which revision serves, its commit or image digest, and
//!   whether it was verified (`status.serving`);
//! - [`secrets_hash`]: the keyed hash of the secret values last sent
//!   (`status.secretsHash`);
//! - [`unmanaged`]: the AgentControlPlane's report of the deployments no
//!   AgentDeployment manages, and when the workspace is listed again.
//! - [`suite`]: verification suites (cases, assertions on a run's
//!   answer, the pass rate and the regression rule, the digest a result
//!   is cached under); not yet read from a spec.
//!
//! Nothing here imports `controller`: the arrow goes one way.

pub mod adoption;
pub mod assistant;
pub mod claims;
pub mod cron;
pub mod decide;
pub mod desired;
pub mod expiry;
pub mod fight;
pub mod history;
pub mod image;
pub mod logtail;
pub mod policy;
pub mod promotion;
pub mod rollback;
pub mod secrets_hash;
pub mod serving;
pub mod shapes;
pub mod status;
pub mod steps;
pub mod suite;
pub mod unmanaged;
pub mod verdict;
