//! kstatus-style condition helpers shared by every kind.
//!
//! `lastTransitionTime` changes only when a condition's status changes, so a
//! reconcile that observes the same state writes the same status and triggers
//! nothing (kstatus; docs/GITOPS.md).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

/// Condition type that is True when the resource is fully reconciled.
pub const READY: &str = "Ready";

/// Condition type, present when `spec.verify` is set: True while the latest
/// revision is DEPLOYED, active, and passed the checks of `spec.verify` on
/// the agent server; `Ready` requires it.
pub const VERIFIED: &str = "Verified";

/// Condition type of an AgentDeployment under `spec.managementPolicy:
/// Observe`: True when the remote deployment differs from the spec (the
/// fields are in `status.drift`), False when it equals it.
pub const DRIFTED: &str = "Drifted";

/// Condition type of an AgentDeployment with `spec.promotion`: True
/// (reason `Promoted`) while it deploys what its source serves, False while
/// it takes nothing new (reason `PromotionWaiting`, or the reason of a
/// refusal) and keeps what it took last. `Ready` stays about the object's
/// own revision: a target serving a verified revision is Ready while it
/// waits for its source.
pub const PROMOTED: &str = "Promoted";

/// Condition status strings.
pub const TRUE: &str = "True";
/// Condition status `False`.
pub const FALSE: &str = "False";
/// Condition status `Unknown`.
pub const UNKNOWN: &str = "Unknown";

/// Reasons used in conditions and events: one fixed set of PascalCase constants.
pub mod reason {
    /// The remote deployment is being created.
    pub const CREATING: &str = "Creating";
    /// A revision is building or rolling out.
    pub const REVISION_IN_PROGRESS: &str = "RevisionInProgress";
    /// The latest revision is DEPLOYED.
    pub const REVISION_DEPLOYED: &str = "RevisionDeployed";
    /// The latest revision failed (`*_FAILED`).
    pub const REVISION_FAILED: &str = "RevisionFailed";
    /// The latest revision was INTERRUPTED.
    pub const REVISION_INTERRUPTED: &str = "RevisionInterrupted";
    /// A referenced Secret or key does not exist.
    pub const SECRET_NOT_FOUND: &str = "SecretNotFound";
    /// The referenced AgentControlPlane is missing or not usable.
    pub const CONTROL_PLANE_NOT_READY: &str = "ControlPlaneNotReady";
    /// The control plane refused the API key (401/403).
    pub const UNAUTHORIZED: &str = "Unauthorized";
    /// The control plane rejected the request as invalid (400/422).
    pub const INVALID_SPEC: &str = "InvalidSpec";
    /// The remote name is used by a deployment this resource does not own
    /// (the message names the AgentDeployment of the cluster that holds
    /// it, if one does).
    pub const NAME_CONFLICT: &str = "NameConflict";
    /// The deployment `spec.deploymentId` names (or the id annotation) is
    /// held by another AgentDeployment of the cluster, named in the
    /// message: a deployment has one owner.
    pub const ALREADY_OWNED: &str = "AlreadyOwned";
    /// The deployment this resource claims is held by an AgentDeployment
    /// being deleted, which hands it over (or deletes it) in its deletion
    /// pass.
    pub const HAND_OVER_PENDING: &str = "HandOverPending";
    /// A deployment with this resource's remote name is being deleted on
    /// the control plane; this resource creates its own once it is gone.
    pub const NAME_RELEASING: &str = "NameReleasing";
    /// The object's namespace may not use the ClusterAgentControlPlane its
    /// `controlPlaneRef` names (its `spec.namespaces` allows it neither by
    /// name nor by label); nothing is sent.
    pub const CONTROL_PLANE_NOT_ALLOWED: &str = "ControlPlaneNotAllowed";
    /// The AgentControlPlane now leads to another control plane (URL or
    /// workspace) than the one the remote deployment lives on
    /// (`status.controlPlane`), where the deployment does not exist:
    /// nothing is sent or created.
    pub const CONTROL_PLANE_CHANGED: &str = "ControlPlaneChanged";
    /// Event: a remote deployment went from the AgentDeployment that held
    /// it, being deleted, to the one that claims it (on both, each naming
    /// the other); nothing was deleted.
    pub const HANDED_OVER: &str = "HandedOver";
    /// The control plane could not be reached or answered 5xx; retrying.
    pub const CONTROL_PLANE_UNAVAILABLE: &str = "ControlPlaneUnavailable";
    /// The resource is being deleted.
    pub const DELETING: &str = "Deleting";
    /// The object is paused by the `agentserver.dev/paused` annotation.
    pub const PAUSED: &str = "Paused";
    /// The remote deployment was deleted outside the operator.
    pub const REMOTE_DELETED: &str = "RemoteDeleted";
    /// `spec.expiry` passed: the remote deployment was deleted (or
    /// orphaned) and is never created again while the object exists
    /// (`Stalled=True`, a terminal state).
    pub const EXPIRED: &str = "Expired";
    /// The AgentControlPlane's `spec.previews.maxLive` previews are live:
    /// this one waits, with no request, until one expires or is deleted.
    pub const PREVIEW_LIMIT_REACHED: &str = "PreviewLimitReached";
    /// The deployment named in `spec.deploymentId` does not exist.
    pub const ADOPTION_FAILED: &str = "AdoptionFailed";
    /// A create was interrupted and its outcome cannot be determined.
    pub const CREATE_OUTCOME_UNKNOWN: &str = "CreateOutcomeUnknown";
    /// An authenticated call to the control plane succeeded.
    pub const AUTHENTICATED: &str = "Authenticated";
    /// The control plane answered 403: the key is valid but not for this
    /// workspace, or the organization lacks the feature.
    pub const FORBIDDEN: &str = "Forbidden";
    /// The control plane answered 403 "requires workspace specification":
    /// an organisation-scoped key used without a workspace it accepts
    /// (docs/control-plane-api.md, "Credentials and refusals").
    pub const WORKSPACE_REQUIRED: &str = "WorkspaceRequired";
    /// The control plane answered 403 "not enabled": LangSmith Deployment
    /// is off for the organisation (docs/control-plane-api.md,
    /// "Credentials and refusals").
    pub const DEPLOYMENT_NOT_ENABLED: &str = "DeploymentNotEnabled";
    /// Listeners answered 403: the organization is not on a self-hosted
    /// enterprise plan (docs/control-plane-api.md "Errors").
    pub const NOT_ENTERPRISE: &str = "NotEnterprise";
    /// The listener does not exist (404 from the control plane, or the
    /// referenced `AgentListener` is missing).
    pub const LISTENER_NOT_FOUND: &str = "ListenerNotFound";
    /// The listener was read from the control plane.
    pub const LISTENER_FOUND: &str = "ListenerFound";
    /// The placement on a listener is not allowed (e.g. a namespace the
    /// listener is not configured for).
    pub const PLACEMENT_INVALID: &str = "PlacementInvalid";
    /// The control plane accepted a change but does not hold it: the
    /// deployment read back still differs in the same fields (a value it
    /// drops or normalizes). Not retried until the spec changes.
    pub const DRIFT_NOT_CONVERGING: &str = "DriftNotConverging";
    /// Another writer keeps changing fields of the remote deployment: the
    /// operator corrected the same field 3 times within an hour and stops
    /// correcting it until the spec changes or a redeploy is requested
    /// (`status.driftCorrections`; the issue "Many teams on one operator",
    /// item 5).
    pub const DRIFT_FIGHT: &str = "DriftFight";
    /// A revision stayed in progress longer than
    /// `spec.progressDeadlineSeconds`; it is still polled, slower.
    pub const PROGRESS_DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";
    /// `sourceConfig.integrationRef` names no GitHub integration of the
    /// workspace, or several (`GET /v1/integrations/github/install`; docs/control-plane-api.md
    /// "Integrations (v1)", seen only in the official clients).
    pub const INTEGRATION_NOT_FOUND: &str = "IntegrationNotFound";
    /// `sourceConfig.repoUrl` is not among the repositories of the GitHub
    /// integration named by `integrationRef`
    /// (`GET /v1/integrations/github/{id}/repos`; docs/control-plane-api.md "Integrations (v1)",
    /// seen only in the official clients). Nothing is created.
    pub const REPOSITORY_NOT_ACCESSIBLE: &str = "RepositoryNotAccessible";
    /// The latest revision passed the checks of `spec.verify` (condition
    /// `Verified`; also the Normal event).
    pub const VERIFIED: &str = "Verified";
    /// The latest revision is DEPLOYED and its verification has not run yet
    /// (`Ready=False` until it passes).
    pub const VERIFYING: &str = "Verifying";
    /// Condition `Verified` is Unknown: the latest revision is not DEPLOYED
    /// yet, so it was not verified.
    pub const VERIFICATION_PENDING: &str = "VerificationPending";
    /// The agent server could not be reached (connection refused, timeout,
    /// 5xx, 429) or the deployment has no URL; retried with backoff.
    pub const AGENT_SERVER_UNREACHABLE: &str = "AgentServerUnreachable";
    /// The agent server refused the API key (401/403; docs/control-plane-api.md "Agent server",
    /// Agent server).
    pub const AGENT_SERVER_UNAUTHORIZED: &str = "AgentServerUnauthorized";
    /// The assistant search found fewer assistants of the graph than
    /// `spec.verify.assistants.minCount`.
    pub const ASSISTANTS_MISSING: &str = "AssistantsMissing";
    /// The run's `assistantId` is unknown to the agent server (404/422).
    pub const ASSISTANT_NOT_FOUND: &str = "AssistantNotFound";
    /// The run was refused, failed (an `error` event), broke off or did not
    /// end within `timeoutSeconds`.
    pub const RUN_FAILED: &str = "RunFailed";
    /// The run ended without the event `spec.verify.run.expect` asks for.
    pub const EXPECTATION_NOT_MET: &str = "ExpectationNotMet";
    /// `spec.verify.suite` ran on the revision and did not meet its
    /// `minPassRate`, or a case the serving revision passed failed
    /// (`compareWith: Serving`). Settled until the revision or the suite
    /// changes: the suite is not run again.
    pub const SUITE_FAILED: &str = "SuiteFailed";
    /// The LangSmith dataset of `spec.verify.suite.dataset` could not be
    /// read (no answer, 429 or 5xx); retried with backoff.
    pub const DATASET_UNAVAILABLE: &str = "DatasetUnavailable";
    /// The ConfigMap of `spec.verify.suite.configMapRef` is missing, lacks
    /// its key, or holds cases that break a rule; read again with backoff.
    pub const SUITE_UNREADABLE: &str = "SuiteUnreadable";
    /// The deployment's `active_revision_id` is not the revision just
    /// deployed, so the agent server may still serve the previous one.
    pub const REVISION_NOT_ACTIVE: &str = "RevisionNotActive";
    /// `spec.rollback`: the latest revision failed (its verification, or
    /// its build or deploy) and the operator redeployed the last verified
    /// revision; the spec is not applied again until it changes.
    pub const ROLLED_BACK: &str = "RolledBack";
    /// The Warning event of a verification that failed (once per failure
    /// reason and revision, not on every retry).
    pub const VERIFICATION_FAILED: &str = "VerificationFailed";
    /// A URL the resource names (an AgentControlPlane's `url` or `region`,
    /// an AgentDeployment's `sourceConfig.customUrl`, or the deployment URL
    /// `spec.verify` would call) has a host outside the operator's
    /// `--allowed-hosts`: nothing is sent there (`Stalled`; see
    /// [`crate::allowlist`]).
    pub const HOST_NOT_ALLOWED: &str = "HostNotAllowed";
    /// The spec breaks a rule of the data-plane pod policy the operator
    /// enforces with `--pod-policy` (a hostPath volume, a privileged or root
    /// container, an added capability, a ServiceAccount or listener not on
    /// its lists; see [`crate::pod_policy`]): `Stalled`, nothing is sent.
    pub const POD_POLICY_REFUSED: &str = "PodPolicyRefused";
    /// The image of `spec.imagePolicy` `Pin` or `Follow` offers no
    /// `linux/amd64`, the only platform the control plane runs: `Stalled`,
    /// nothing is sent to the control plane.
    pub const IMAGE_PLATFORM_UNSUPPORTED: &str = "ImagePlatformUnsupported";
    /// The registry has no such image (tag or repository unknown), or the
    /// reference does not parse: `Stalled`, nothing is sent.
    pub const IMAGE_NOT_FOUND: &str = "ImageNotFound";
    /// The registry refused the credentials of `spec.imagePullSecretRef` (or
    /// their absence), or that Secret's `.dockerconfigjson` is unusable:
    /// `Stalled`, nothing is sent.
    pub const REGISTRY_UNAUTHORIZED: &str = "RegistryUnauthorized";
    /// The registry of the image could not be reached (or answered 5xx or
    /// 429, or this operator's budget for it is spent): retried with
    /// backoff, nothing is sent to the control plane meanwhile.
    pub const REGISTRY_UNAVAILABLE: &str = "RegistryUnavailable";
    /// Event of `spec.imagePolicy: Follow`: the tag now names another
    /// digest (both named); the new one is deployed as one new revision.
    pub const IMAGE_TAG_MOVED: &str = "ImageTagMoved";
    /// `spec.promotion`: the source AgentDeployment serves nothing the
    /// target may take yet (nothing verified, its soak not over, or the
    /// source not found): `Reconciling`, nothing is sent; the target is
    /// woken when what the source serves changes, or when the soak ends.
    pub const PROMOTION_WAITING: &str = "PromotionWaiting";
    /// `spec.promotion`: the source is in another namespace and its
    /// `spec.promotionGrants` does not name the target's namespace:
    /// `Stalled` before any remote call.
    pub const PROMOTION_NOT_GRANTED: &str = "PromotionNotGranted";
    /// `spec.promotion`: the source cannot be promoted to this target (another
    /// `source` kind, another repository, itself, or an `external_docker`
    /// source whose serving image names no digest): `Stalled`, nothing is
    /// sent until the source or the spec changes.
    pub const PROMOTION_SOURCE_MISMATCH: &str = "PromotionSourceMismatch";
    /// `spec.promotion` of a `github` target: the platform built another
    /// commit than the one verified on the source (the branch or tag moved
    /// in between): `Stalled`, nothing more is deployed until the source
    /// serves another commit, the spec changes or a redeploy is requested.
    pub const PROMOTION_COMMIT_MISMATCH: &str = "PromotionCommitMismatch";
    /// Event of `spec.promotion`: the target deploys what the source serves
    /// (source, revision, commit or digest named).
    pub const PROMOTED: &str = "Promoted";
    /// An annotation the operator reads has a value it does not accept
    /// (`agentserver.dev/paused` takes only `"true"` or `"false"`): nothing
    /// is sent to the control plane until it is fixed (`Stalled`).
    pub const INVALID_ANNOTATION: &str = "InvalidAnnotation";
    /// The deletion of an AgentDeployment cannot proceed until a human acts
    /// (its AgentControlPlane or the API key is gone, it is paused, or the
    /// control plane refuses the DELETE): `Stalled`, with the exact fix in
    /// the message.
    /// The AgentControlPlane has not yet answered the operator's check of
    /// its current spec (its first authenticated call): its AgentDeployments
    /// wait (`Reconciling`), sending nothing, and go on when it reports.
    pub const CONTROL_PLANE_NOT_CHECKED: &str = "ControlPlaneNotChecked";
    /// The deletion of an AgentDeployment cannot proceed until a human acts
    pub const DELETION_BLOCKED: &str = "DeletionBlocked";
    /// An AgentControlPlane being deleted waits for the AgentDeployments
    /// that still use it to finish their own deletion (its finalizer
    /// `agentserver.dev/in-use`).
    pub const IN_USE: &str = "InUse";
    /// The remote deployment named by `spec.deploymentId` (or found by name)
    /// differs from the spec in a field the service cannot change (source,
    /// repository, integration, type, listener): `Stalled`, nothing is sent.
    pub const ADOPTION_MISMATCH: &str = "AdoptionMismatch";
    /// AgentAssistant: the assistant on the agent server is as the spec
    /// says (`Ready=True`).
    pub const ASSISTANT_READY: &str = "AssistantReady";
    /// AgentAssistant: its AgentDeployment does not exist (it waits, no
    /// request is made).
    pub const DEPLOYMENT_NOT_FOUND: &str = "DeploymentNotFound";
    /// AgentAssistant: its AgentDeployment is not Ready with an agent server
    /// URL yet (it waits, no request is made).
    pub const WAITING_FOR_DEPLOYMENT: &str = "WaitingForDeployment";
    /// AgentAssistant, AgentCron: its AgentDeployment is paused (annotation
    /// `agentserver.dev/paused: "true"`): a cron is disabled on the agent
    /// server (`enabled: false`, `Ready=True`), an assistant waits with no
    /// request (`Reconciling`); both go on when it is unpaused.
    pub const DEPLOYMENT_PAUSED: &str = "DeploymentPaused";
    /// AgentAssistant: the agent server answered 404 (an unknown graph, or
    /// version): `Stalled`, not sent again until the spec changes.
    pub const GRAPH_NOT_FOUND: &str = "GraphNotFound";
    /// AgentAssistant: the agent server refused the request (400, 409,
    /// 422): `Stalled`, not sent again until the spec changes.
    pub const ASSISTANT_REJECTED: &str = "AssistantRejected";
    /// AgentCron: the cron on the agent server is as the spec says and
    /// runs (`Ready=True`).
    pub const CRON_READY: &str = "CronReady";
    /// AgentCron: the cron is as the spec says, disabled by `spec.suspend`
    /// (`Ready=True`).
    pub const CRON_SUSPENDED: &str = "CronSuspended";
    /// AgentCron: `spec.endTime` has passed; the operator disabled the cron
    /// (`Ready=True`; nothing runs any more).
    pub const CRON_COMPLETED: &str = "CronCompleted";
    /// AgentCron: its `assistantRef` names an AgentAssistant that does not
    /// exist or is not Ready on the deployment's current agent server yet
    /// (it waits, no request is made), or the server did not know the
    /// assistant yet (404 on the create; looked at again, not held).
    pub const WAITING_FOR_ASSISTANT: &str = "WaitingForAssistant";
    /// AgentCron: the agent server refused the request (400, 409, 422, e.g.
    /// `Invalid cron schedule`): `Stalled`, not sent again until the spec
    /// changes.
    pub const CRON_REJECTED: &str = "CronRejected";
    /// AgentCron: a second cron carried the object's UID tag and was
    /// deleted (`Reconciling`; the next pass looks again).
    pub const DUPLICATE_CRON_DELETED: &str = "DuplicateCronDeleted";
    /// AgentCron: the cron found by the search was gone when the PATCH
    /// reached it (deleted outside meanwhile); the next pass looks again.
    pub const CRON_VANISHED: &str = "CronVanished";
    /// `spec.managementPolicy: Observe`: no remote deployment has the id of
    /// `spec.deploymentId`, or none is named like the resource; nothing is
    /// created (`Stalled`).
    pub const NOTHING_TO_OBSERVE: &str = "NothingToObserve";
    /// `Drifted=True`: the remote deployment differs from the spec in the
    /// fields of `status.drift` (`spec.managementPolicy: Observe`).
    pub const REMOTE_DIFFERS: &str = "RemoteDiffers";
    /// `Drifted=False`: the remote deployment equals the spec, as far as a
    /// read tells (`spec.managementPolicy: Observe`).
    pub const NO_DRIFT: &str = "NoDrift";
}

/// Builds a condition, keeping `lastTransitionTime` from `previous` when the
/// status did not change.
pub fn condition(
    previous: &[Condition],
    type_: &str,
    status: &str,
    reason: &str,
    message: impl Into<String>,
    observed_generation: Option<i64>,
) -> Condition {
    let last_transition_time = previous
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| Time(k8s_openapi::jiff::Timestamp::now()));
    Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.into(),
        observed_generation,
        last_transition_time,
    }
}

/// Finds a condition by type.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Schema of a `conditions` list: the standard `metav1.Condition` items, as a
/// list-map keyed by `type` so server-side apply merges by type.
pub fn conditions_schema(generator: &mut SchemaGenerator) -> Schema {
    let item = Condition::json_schema(generator);
    json_schema!({
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": item,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_is_kept_when_status_is_unchanged() {
        let first = condition(&[], READY, FALSE, reason::CREATING, "creating", Some(1));
        std::thread::sleep(std::time::Duration::from_millis(5));
        let same = condition(
            std::slice::from_ref(&first),
            READY,
            FALSE,
            reason::REVISION_IN_PROGRESS,
            "building",
            Some(1),
        );
        assert_eq!(same.last_transition_time, first.last_transition_time);
        std::thread::sleep(std::time::Duration::from_millis(5));
        let flipped = condition(
            &[same],
            READY,
            TRUE,
            reason::REVISION_DEPLOYED,
            "ok",
            Some(1),
        );
        assert_ne!(flipped.last_transition_time, first.last_transition_time);
    }
}
