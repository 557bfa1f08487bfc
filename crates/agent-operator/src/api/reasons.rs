//! The registry of the reasons the operator writes: one row per condition
//! reason and event reason, with the kinds that raise it, the condition it
//! sets (or `–` for an event only), whether it is also an event, what it
//! means and what to do. docs/TROUBLESHOOTING.md shows it as a table
//! (`make generate`; `crate::docgen::reasons`), and the tests keep it whole:
//! every constant of [`super::conditions::reason`] has a row, and every
//! reason a row of the error-to-reason table
//! (`crate::controller::report::ReasonTable`) gives a kind lists that kind.

use super::conditions::reason;

const AGD: &str = "AgentDeployment";
const ACP: &str = "AgentControlPlane";
const CACP: &str = "ClusterAgentControlPlane";
const AGL: &str = "AgentListener";
const AGA: &str = "AgentAssistant";
const AGC: &str = "AgentCron";

/// One reason of the registry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reason {
    /// The reason, as conditions and events carry it.
    pub reason: &'static str,
    /// The kinds whose objects it shows on.
    pub kinds: &'static [&'static str],
    /// The condition it sets (`Ready=True`, `Reconciling`, `Stalled`...),
    /// `–` for an event only.
    pub condition: &'static str,
    /// `Normal` or `Warning` when an event carries it (besides the event
    /// of every change of `Ready`); empty otherwise.
    pub event: &'static str,
    /// What it means.
    pub meaning: &'static str,
    /// What to do.
    pub action: &'static str,
}

impl Reason {
    /// The row of `reason`, if the registry has one.
    pub fn of(reason: &str) -> Option<&'static Reason> {
        REASONS.iter().find(|r| r.reason == reason)
    }
}

/// Every reason, grouped as an on-call engineer meets them: an
/// AgentDeployment's revision, its inputs, ownership, observation, drift,
/// events, verification, deletion, then the other kinds.
pub const REASONS: [Reason; 94] = [
    Reason {
        reason: reason::CREATING,
        kinds: &[AGD],
        condition: r#"Reconciling"#,
        event: r#""#,
        meaning: r#"The remote deployment was created (the status records its id at once) and its first revision is building or deploying; or it is created again after it was deleted outside (`remoteDeletionPolicy: Recreate`). `REVISION` shows the revision's status."#,
        action: r#"Wait; `kubectl wait --for=condition=Ready agd/NAME --timeout=30m` (the default progress deadline, 1,800 s: by then it is Ready or `Stalled`)."#,
    },
    Reason {
        reason: reason::REVISION_IN_PROGRESS,
        kinds: &[AGD],
        condition: r#"Reconciling"#,
        event: r#""#,
        meaning: r#"The latest revision is building or deploying; `REVISION` shows its status. Polled with backoff."#,
        action: r#"Wait; `kubectl wait --for=condition=Ready agd/NAME --timeout=30m` (the default progress deadline, 1,800 s: by then it is Ready or `Stalled`)."#,
    },
    Reason {
        reason: reason::REVISION_DEPLOYED,
        kinds: &[AGD],
        condition: r#"Ready=True"#,
        event: r#"Normal"#,
        meaning: r#"The latest revision is `DEPLOYED` and the remote deployment equals the spec."#,
        action: r#"Nothing."#,
    },
    Reason {
        reason: reason::REVISION_FAILED,
        kinds: &[AGD],
        condition: r#"Stalled"#,
        event: r#"Warning"#,
        meaning: r#"The latest revision ended `BUILD_FAILED`, `DEPLOY_FAILED` or `CREATE_FAILED`. The message ends with the last lines of the build or deploy log (secrets redacted); `status.lastFailedRevisionId` keeps it. Not polled again."#,
        action: r#"Fix the code or the spec (a new `repoRef`, `imageUri`...), or request a redeploy: `kubectl annotate agd NAME agentserver.dev/redeploy-requested-at="$(date -u +%FT%TZ)" --overwrite`. `agentctl logs NAME --build --revision ID` shows the whole log."#,
    },
    Reason {
        reason: reason::REVISION_INTERRUPTED,
        kinds: &[AGD],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"The revision was `INTERRUPTED` by the platform."#,
        action: r#"Request a redeploy (above) or change the spec."#,
    },
    Reason {
        reason: reason::PROGRESS_DEADLINE_EXCEEDED,
        kinds: &[AGD],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"A revision stayed in progress longer than `spec.progressDeadlineSeconds` (default 1800). Still polled, slowly, until it ends."#,
        action: r#"Look at the platform's status page and `agentctl logs NAME --build`; raise the deadline for slow builds."#,
    },
    Reason {
        reason: reason::SECRET_NOT_FOUND,
        kinds: &[AGD, ACP, CACP, AGL, AGA, AGC],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"A referenced Secret or key does not exist (the message names it; for a missing key it lists the keys the Secret has, names only). Nothing is sent to the control plane."#,
        action: r#"Create the Secret or fix the reference; the operator watches Secrets and continues at once."#,
    },
    Reason {
        reason: reason::HOST_NOT_ALLOWED,
        kinds: &[ACP, CACP, AGD, AGL, AGA, AGC],
        condition: r#"Stalled (AgentDeployment: also `Verified=False`)"#,
        event: r#""#,
        meaning: r#"A URL of the resource has a host outside the operator's `--allowed-hosts` (default: LangSmith Cloud only): the AgentControlPlane's `url` or `region`, the AgentDeployment's `sourceConfig.customUrl`, the deployment URL `spec.verify` would call, or the registry of `imageUri` under `imagePolicy` `Pin`/`Follow`. The message names the field, the host and the flag. Nothing is sent to that host."#,
        action: r#"Fix the URL, or ask the platform team to add the host to `--allowed-hosts` (Helm `extraAllowedHosts`; docs/CONFIGURATION.md, "Allowed hosts")."#,
    },
    Reason {
        reason: reason::POD_POLICY_REFUSED,
        kinds: &[AGD, AGL],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"The operator runs with `--pod-policy` and the spec breaks a rule of the data-plane pod policy ([SECURITY.md](SECURITY.md), "What a self-hosted data plane trusts"): a hostPath volume, a privileged or root init container or sidecar, an added capability, or a ServiceAccount or listener id off its lists (for an AgentDeployment placed by `listenerRef`, the AgentListener's id). The message names each field and rule in the policy's words. Typically an object stored while the admission policy was absent, which admission never checked. Nothing is sent to the control plane; a deployment made before is left as it is."#,
        action: r#"Set the fields the message names to what the policy allows, e.g. `sourceConfig.resourceSpec.serviceAccountName` to a listed ServiceAccount; or have the platform team list the ServiceAccount or listener (Helm `podPolicy`; kustomize: both places the component keeps its lists)."#,
    },
    Reason {
        reason: reason::IMAGE_PLATFORM_UNSUPPORTED,
        kinds: &[AGD],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"`spec.imagePolicy` is `Pin` or `Follow` and the image (the manifest, or every entry of the index) offers no `linux/amd64`, the only platform the control plane runs; the message names the image, its digest and the platforms it offers. Nothing is sent to the control plane. The registry is asked again on the blocked interval, so a fixed image pushed under the same tag is picked up."#,
        action: r#"Build and push the image for `linux/amd64` (with `docker buildx build` for that platform), or name another tag."#,
    },
    Reason {
        reason: reason::IMAGE_NOT_FOUND,
        kinds: &[AGD],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"`spec.imagePolicy` is `Pin` or `Follow` and the registry has no such tag or repository (or `imageUri` is not an image reference). Nothing is sent to the control plane."#,
        action: r#"Push the image, or fix `sourceRevisionConfig.imageUri`."#,
    },
    Reason {
        reason: reason::REGISTRY_UNAUTHORIZED,
        kinds: &[AGD],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"`spec.imagePolicy` is `Pin` or `Follow` and the registry refused the credentials of `spec.imagePullSecretRef` (or asked for credentials and none were given), or that Secret's `.dockerconfigjson` is unusable (the message says which; never a credential). Nothing is sent to the control plane."#,
        action: r#"Point `imagePullSecretRef` at a `kubernetes.io/dockerconfigjson` Secret (`kubectl create secret docker-registry`) that can pull the image; a change of the Secret triggers a pass."#,
    },
    Reason {
        reason: reason::REGISTRY_UNAVAILABLE,
        kinds: &[AGD],
        condition: r#"Reconciling"#,
        event: r#""#,
        meaning: r#"`spec.imagePolicy` is `Pin` or `Follow` and the image's registry could not be reached, answered 5xx or 429, or the operator's own budget for that registry is spent. Retried with the per-object backoff; nothing is sent to the control plane meanwhile (under `Follow`, the deployment keeps serving its last digest)."#,
        action: r#"Check the registry and the operator's egress to it; nothing to do if it recovers."#,
    },
    Reason {
        reason: reason::PROMOTION_WAITING,
        kinds: &[AGD],
        condition: r#"`Promoted=False` (and `Reconciling` while no deployment exists yet)"#,
        event: r#""#,
        meaning: r#"`spec.promotion`: the source is not found (or its namespace is not watched by this operator), serves nothing yet, serves a revision that is not verified (`requireVerified`), or its soak (`soakSeconds` from its `status.serving.since`; the message states its end) is not over. Nothing new is deployed; a target that holds a deployment keeps what it took last, stays `Ready` on its own revision and is read as usual. It is woken when what the source serves changes, and requeued for the end of the soak."#,
        action: r#"Look at the source: `kubectl get agd <source> -o jsonpath='{.status.serving}'`; make sure the operator watches its namespace."#,
    },
    Reason {
        reason: reason::PROMOTION_NOT_GRANTED,
        kinds: &[AGD],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"`spec.promotion.from` names an AgentDeployment of another namespace whose `spec.promotionGrants` does not list this namespace. Nothing is sent."#,
        action: r#"The source's owners add `{namespace: <this namespace>}` to its `spec.promotionGrants` (the target is woken at once)."#,
    },
    Reason {
        reason: reason::PROMOTION_SOURCE_MISMATCH,
        kinds: &[AGD],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"`spec.promotion` cannot take what the source serves: another `source` kind or `repoUrl`, the object itself, `requireVerified` on a source without `spec.verify`, or an `external_docker` source that serves its image by tag only (no digest to guarantee the same image). Nothing is sent."#,
        action: r#"Fix the source (`spec.imagePolicy: Pin`, or an `imageUri` by digest; `spec.verify`) or the target's spec, as the message says."#,
    },
    Reason {
        reason: reason::PROMOTION_COMMIT_MISMATCH,
        kinds: &[AGD],
        condition: r#"Stalled"#,
        event: r#"Warning"#,
        meaning: r#"`spec.promotion` of a `github` deployment: the platform built another commit than the one verified on the source (the branch or tag moved in between); the message names both. The target went back at once to the revision that served before the promotion (one redeploy, `status.rollback`); a target created by the promotion has none and stays on the commit built. Nothing more is deployed."#,
        action: r#"Wait for the source to verify the new commit (a new promotion), request a redeploy (`agentserver.dev/redeploy-requested-at`) to build the ref again, or promote from a tag."#,
    },
    Reason {
        reason: reason::HANDED_OVER,
        kinds: &[AGD],
        condition: r#"–"#,
        event: r#"Normal"#,
        meaning: r#"A remote deployment went from the AgentDeployment that held it, being deleted, to the live one that claims it (a rename or a move, applied then pruned); each object's event names the other. Nothing was deleted or created."#,
        action: r#"Nothing."#,
    },
    Reason {
        reason: reason::PROMOTED,
        kinds: &[AGD],
        condition: r#"–"#,
        event: r#"Normal"#,
        meaning: r#"`spec.promotion` took another revision of the source; the event names the source, its revision, the commit or digest, and what is deployed."#,
        action: r#"Nothing."#,
    },
    Reason {
        reason: reason::IMAGE_TAG_MOVED,
        kinds: &[AGD],
        condition: r#"–"#,
        event: r#"Normal"#,
        meaning: r#"The tag of `imageUri` now names another digest; the event names both. Under `Follow` the new digest is deployed as one new revision; under `Pin` this is seen only when the spec changes (a new generation resolves the tag again)."#,
        action: r#"Nothing; pin a digest in `imageUri` (or use `Pin`) if the tag should not move what runs."#,
    },
    Reason {
        reason: reason::INVALID_ANNOTATION,
        kinds: &[AGD],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"The annotation `agentserver.dev/paused` has a value other than `"true"` or `"false"` (e.g. `"yes"`, `"True"`); the message names it and the accepted values. Nothing is sent to the control plane, not even a DELETE when the resource is being deleted. Not refused at admission: CRD validation rules cannot see annotations."#,
        action: r#"Set it to `"true"` (pause) or `"false"`, or remove it."#,
    },
    Reason {
        reason: reason::CONTROL_PLANE_NOT_READY,
        kinds: &[AGD, AGL, AGA, AGC],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"The `controlPlaneRef` names an AgentControlPlane that is missing or not Ready, or (message "not usable here: it belongs to shard …") one of another shard."#,
        action: r#"`kubectl get acp`; fix that object first. With sharding, give the object the same `sharding.fluxcd.io/key` label as its AgentControlPlane ([INSTALL.md](INSTALL.md), "Sharding")."#,
    },
    Reason {
        reason: reason::UNAUTHORIZED,
        kinds: &[ACP, CACP, AGL, AGD],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"The control plane answered 401: the API key is wrong or revoked. The message names the Secret and key it was read from. An AgentDeployment whose AgentControlPlane was refused shows `ControlPlaneNotReady` naming it; `Unauthorized` on an AgentDeployment or AgentListener is a 401 or 403 to its own request."#,
        action: r#"Put a valid key in the Secret named by `apiKeySecretRef`; the change is picked up without a restart."#,
    },
    Reason {
        reason: reason::FORBIDDEN,
        kinds: &[ACP, CACP],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"403: the key is valid but not for this workspace, or the organization lacks the feature."#,
        action: r#"Check `workspaceId` and the key's organization."#,
    },
    Reason {
        reason: reason::WORKSPACE_REQUIRED,
        kinds: &[ACP, CACP, AGD],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"403 whose detail says "requires workspace specification": an organisation-scoped key the control plane did not accept for `workspaceId`. Not asked again until the AgentControlPlane or its Secret changes."#,
        action: r#"Set `spec.workspaceId` to a workspace id of the key's organisation (LangSmith Settings > Workspaces)."#,
    },
    Reason {
        reason: reason::DEPLOYMENT_NOT_ENABLED,
        kinds: &[ACP, CACP, AGD],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"403 whose detail says "not enabled": LangSmith Deployment is off for the organisation. Not asked again until the AgentControlPlane or its Secret changes."#,
        action: r#"Enable Deployment for the organisation, then touch the AgentControlPlane (e.g. `kubectl annotate acp NAME checked="$(date +%s)" --overwrite`)."#,
    },
    Reason {
        reason: reason::INVALID_SPEC,
        kinds: &[AGD, ACP, CACP, AGL],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"The spec breaks a rule the schema cannot express (checked before any request), or the control plane refused the request with 400/422 (its `detail` is in the message). A refused request is not sent again until the spec or a Secret it uses changes, or until the time the message names (`status.rejectedRequest.retryAfterTime`: 10 min after the refusal, doubling to 2 h)."#,
        action: r#"Fix the field the message names."#,
    },
    Reason {
        reason: reason::NAME_CONFLICT,
        kinds: &[AGD],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"A deployment with the remote name exists and this resource did not create it. When another AgentDeployment of the cluster holds it, the message names it (`namespace/name`), and it is handed over to this resource when that one is deleted (the prune after a rename or a move). Nothing is created or changed."#,
        action: r#"Held by another AgentDeployment: delete that one to move the deployment here ([RENAME-AND-MOVE.md](RENAME-AND-MOVE.md)), or set another `spec.name`. Held by none: adopt it with `spec.adoptionPolicy: ByName` or `spec.deploymentId`, or set another `spec.name` (all accepted: nothing was created), or delete the other deployment."#,
    },
    Reason {
        reason: reason::ALREADY_OWNED,
        kinds: &[AGD],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"The deployment `spec.deploymentId` (or the id annotation) names is held by another AgentDeployment of the cluster, named in the message: a deployment has one owner. Nothing is sent."#,
        action: r#"Delete the holder: the deployment is then handed over to this resource ([RENAME-AND-MOVE.md](RENAME-AND-MOVE.md)); or remove `spec.deploymentId` (accepted: nothing was adopted)."#,
    },
    Reason {
        reason: reason::HAND_OVER_PENDING,
        kinds: &[AGD],
        condition: r#"Reconciling"#,
        event: r#""#,
        meaning: r#"The deployment this resource claims is held by an AgentDeployment being deleted, named in the message; that one hands it over in its deletion pass (or deletes it, when this resource cannot take it: other fixed fields)."#,
        action: r#"Wait."#,
    },
    Reason {
        reason: reason::NAME_RELEASING,
        kinds: &[AGD],
        condition: r#"Reconciling"#,
        event: r#""#,
        meaning: r#"A deployment with the remote name is being deleted on the control plane (`AWAITING_DELETE`); this resource creates its own once it is gone."#,
        action: r#"Wait."#,
    },
    Reason {
        reason: reason::CONTROL_PLANE_CHANGED,
        kinds: &[AGD],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"The AgentControlPlane now leads to another URL or workspace than the one the deployment lives on (`status.controlPlane`), and the deployment is not there. Nothing is sent or created."#,
        action: r#"Point the AgentControlPlane back at the URL and workspace of the message; to move the deployment, see [RENAME-AND-MOVE.md](RENAME-AND-MOVE.md)."#,
    },
    Reason {
        reason: reason::CONTROL_PLANE_NOT_ALLOWED,
        kinds: &[AGD, AGL, AGA, AGC],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"The object names a ClusterAgentControlPlane whose `spec.namespaces` does not allow its namespace (by name or label). Nothing is sent."#,
        action: r#"Ask the platform team to allow the namespace (`spec.namespaces.names`, or the labels its `selector` matches: [PLATFORM-PLANES.md](PLATFORM-PLANES.md)), or name the namespace's own AgentControlPlane."#,
    },
    Reason {
        reason: reason::CREATE_OUTCOME_UNKNOWN,
        kinds: &[AGD],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"A create was interrupted (crash, timeout) and a name lookup found several candidates, so the operator cannot tell which one it created."#,
        action: r#"Delete the extra deployments on the platform (`agentctl deployments list`), or set `spec.deploymentId`."#,
    },
    Reason {
        reason: reason::ADOPTION_FAILED,
        kinds: &[AGD],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"`spec.deploymentId` names a deployment that does not exist in the workspace."#,
        action: r#"Fix the id, or remove it to create a new deployment (both accepted: nothing was adopted)."#,
    },
    Reason {
        reason: reason::NOTHING_TO_OBSERVE,
        kinds: &[AGD, AGA, AGC],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"`spec.managementPolicy: Observe` and no remote deployment has the id of `spec.deploymentId`, or none has the resource's remote name (`spec.name`, default `metadata.name`); for an AgentAssistant, no assistant has the id `spec.assistantId` on the deployment's agent server; for an AgentCron, no cron there carries the object's UID tag (`agentserver.dev/uid`). An observed resource never creates one."#,
        action: r#"Set `spec.deploymentId` (or `spec.name`) to the deployment to observe (`agentctl deployments list` shows them); an AgentAssistant's `spec.assistantId` cannot change: re-create it with the id of the assistant to observe (`agentctl assistants search`). Or set `spec.managementPolicy: Manage` to create it."#,
    },
    Reason {
        reason: reason::REMOTE_DIFFERS,
        kinds: &[AGD, AGA, AGC],
        condition: r#"Drifted (True)"#,
        event: r#""#,
        meaning: r#"`spec.managementPolicy: Observe`: the remote deployment (assistant, cron) differs from the spec in the fields listed in `status.drift` (desired and remote values; secret values only as `differs`). Nothing is changed."#,
        action: r#"Expected while migrating: make the spec match (`kubectl get agd NAME -o jsonpath='{.status.drift}'`), or set `spec.managementPolicy: Manage` to converge the remote with one PATCH."#,
    },
    Reason {
        reason: reason::NO_DRIFT,
        kinds: &[AGD, AGA, AGC],
        condition: r#"Drifted (False)"#,
        event: r#""#,
        meaning: r#"`spec.managementPolicy: Observe`: the remote deployment equals the spec, as far as a read tells."#,
        action: r#"Nothing to do; switching to `Manage` sends nothing but the secret values, once."#,
    },
    Reason {
        reason: reason::ADOPTION_MISMATCH,
        kinds: &[AGD],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"The deployment named by `spec.deploymentId` differs from the spec in fields the control plane cannot change (`source`, `name`, `sourceConfig.repoUrl`, `integrationId`, `deploymentType`, the listener); the message names each with both values. Nothing is sent, nothing is recorded. `agentctl diff` shows the same, `agentctl apply` refuses it."#,
        action: r#"Make those fields of the spec match the remote deployment (accepted: nothing was adopted yet), or adopt another deployment."#,
    },
    Reason {
        reason: reason::DELETION_BLOCKED,
        kinds: &[AGD],
        condition: r#"Stalled"#,
        event: r#"Warning"#,
        meaning: r#"The resource is being deleted but its remote deployment cannot be: the AgentControlPlane or its API key Secret is gone and this operator process never read them (it restarted after they were deleted), the resource is paused, or the control plane refused the DELETE. The message names the cause."#,
        action: r#"Re-create what is missing (the AgentControlPlane and its Secret), or remove the pause: the deletion resumes at once. Or release the resource and leave the remote deployment running: `kubectl patch agd NAME --type merge -p '{"spec":{"deletionPolicy":"Orphan"}}'`."#,
    },
    Reason {
        reason: reason::IN_USE,
        kinds: &[ACP, CACP],
        condition: r#"Reconciling"#,
        event: r#""#,
        meaning: r#"The plane is being deleted and AgentDeployments or AgentListeners still name it (of its namespace; of any namespace for a ClusterAgentControlPlane; the message lists them): its finalizer `agentserver.dev/in-use` keeps it, and the operator's client, until their remote deployments are deleted."#,
        action: r#"Wait, or delete those AgentDeployments too."#,
    },
    Reason {
        reason: reason::CONTROL_PLANE_NOT_CHECKED,
        kinds: &[AGD, AGL, AGA, AGC],
        condition: r#"Reconciling"#,
        event: r#""#,
        meaning: r#"Its AgentControlPlane has not yet checked its current spec and key (a new or changed AgentControlPlane): nothing is sent until it has."#,
        action: r#"Wait a second; if it lasts, look at the AgentControlPlane (`kubectl get acp`)."#,
    },
    Reason {
        reason: reason::CONTROL_PLANE_UNAVAILABLE,
        kinds: &[ACP, CACP, AGL, AGD],
        condition: r#"Reconciling"#,
        event: r#""#,
        meaning: r#"The control plane could not be reached, timed out, or answered 5xx/429; retried with jittered backoff, honouring `Retry-After` for the whole control plane. The message names the service's last answer and its status, also while the operator's request budget holds requests back after it, and after a `Retry-After` the time of the next attempt."#,
        action: r#"Wait; if it lasts, check the network policy and the platform status."#,
    },
    Reason {
        reason: reason::REMOTE_DELETED,
        kinds: &[AGD],
        condition: r#"Reconciling / Stalled"#,
        event: r#"Warning"#,
        meaning: r#"The remote deployment was deleted outside the operator (or is being deleted). With `remoteDeletionPolicy: Recreate` it is created again; otherwise the resource stalls."#,
        action: r#"Recreate on purpose (`Recreate`), or delete the resource."#,
    },
    Reason {
        reason: reason::DRIFT_NOT_CONVERGING,
        kinds: &[AGD],
        condition: r#"Stalled"#,
        event: r#"Warning"#,
        meaning: r#"The control plane accepted a PATCH but the deployment read back still differs in the same fields, in a way no rule of the answer-shape table explains ([docs/control-plane-api.md](control-plane-api.md), "Answer shapes": fields the service does not echo, echoes normalised or fills with defaults are never drift). Reported once (Warning event naming the fields); not resent until the spec changes."#,
        action: r#"Change the field to a value the platform keeps (the message names the fields)."#,
    },
    Reason {
        reason: reason::DRIFT_FIGHT,
        kinds: &[AGD],
        condition: r#"Stalled"#,
        event: r#"Warning"#,
        meaning: r#"Another writer (the platform's UI, Terraform, a script, a second operator) keeps changing the fields the message names: the operator patched them back 3 times within an hour (`status.driftCorrections` lists the corrections and their times) and the remote deployment differs again. It stops correcting, so the fight does not cost a PATCH (often a build) every drift period; drift is still checked, nothing is sent. One Warning event."#,
        action: r#"Find the other writer and stop it (the platform's audit log, Terraform state, CI jobs), or put its value in the spec. Any spec change clears the memory and converges the deployment to the spec; so does a redeploy request: `kubectl annotate agd NAME agentserver.dev/redeploy-requested-at="$(date -u +%FT%TZ)" --overwrite`."#,
    },
    Reason {
        reason: "OutOfBandRevision",
        kinds: &[AGD],
        condition: r#"–"#,
        event: r#"Normal"#,
        meaning: r#"The deployment's latest revision is one the operator did not make (a redeploy or a rollback from `agentctl`, the UI or the CLI), found by the drift check, and the deployment equals the spec: the operator follows it. A rollback to another configuration is not kept: the spec is re-applied, and the `DriftCorrected` event and the `Ready` message of that pass name the revision ([BEHAVIOUR.md](BEHAVIOUR.md), "out-of-band revisions")."#,
        action: r#"Nothing. To keep a rollback, pause the resource first (`kubectl annotate agd NAME agentserver.dev/paused=true`), roll back, put the rolled-back configuration in the spec, then remove the annotation ([AGENTCTL.md](AGENTCTL.md))."#,
    },
    Reason {
        reason: "Patched",
        kinds: &[AGD],
        condition: r#"–"#,
        event: r#"Normal"#,
        meaning: r#"The remote deployment was patched to match a new spec (the event names the fields sent)."#,
        action: r#"Nothing."#,
    },
    Reason {
        reason: "DriftCorrected",
        kinds: &[AGD],
        condition: r#"–"#,
        event: r#"Normal"#,
        meaning: r#"A drift check found fields changed outside the operator and patched them back (the event names the fields; for secret values, only the field `secrets`). A revision made outside that the spec now replaces is named too."#,
        action: r#"Nothing, unless the change outside was meant: put it in the spec, or see `DriftFight`."#,
    },
    Reason {
        reason: "Adopted",
        kinds: &[AGD],
        condition: r#"–"#,
        event: r#"Normal"#,
        meaning: r#"The resource took over an existing remote deployment: by `spec.deploymentId`, by name with `spec.adoptionPolicy: ByName`, or under `managementPolicy: Observe`."#,
        action: r#"Nothing."#,
    },
    Reason {
        reason: "Redeployed",
        kinds: &[AGD],
        condition: r#"–"#,
        event: r#"Normal"#,
        meaning: r#"A new revision with the current configuration was started: a redeploy request (`agentserver.dev/redeploy-requested-at`), a promotion of the same ref, or an automatic rollback."#,
        action: r#"Nothing."#,
    },
    Reason {
        reason: "CreateRecovered",
        kinds: &[AGD],
        condition: r#"–"#,
        event: r#"Normal"#,
        meaning: r#"After a crash or a restore without status, the deployment of an interrupted create was found (by its exact name, or by the `agentserver.dev/deployment-id` annotation) instead of being created again."#,
        action: r#"Nothing."#,
    },
    Reason {
        reason: "DeploymentUnused",
        kinds: &[AGD],
        condition: r#"–"#,
        event: r#"Warning"#,
        meaning: r#"The control plane shows the deployment `UNUSED` (no traffic for a long time; the service removes such cloud deployments); the `Ready` message carries a note. Its later removal is handled by `spec.remoteDeletionPolicy`."#,
        action: r#"Send it traffic, or let it go and decide with `remoteDeletionPolicy` (`Recreate` or `Stall`)."#,
    },
    Reason {
        reason: "Deleted",
        kinds: &[AGD],
        condition: r#"–"#,
        event: r#"Normal"#,
        meaning: r#"The remote deployment was deleted (the control plane answered 404 after the DELETE) and the finalizer removed."#,
        action: r#"Nothing."#,
    },
    Reason {
        reason: "Orphaned",
        kinds: &[AGD],
        condition: r#"–"#,
        event: r#"Normal"#,
        meaning: r#"The resource was deleted with `deletionPolicy: Orphan`: the remote deployment keeps running, unmanaged."#,
        action: r#"Adopt it again later with `spec.deploymentId`, or delete it on the platform."#,
    },
    Reason {
        reason: reason::VERIFYING,
        kinds: &[AGD],
        condition: r#"Reconciling (and `Verified=Unknown`)"#,
        event: r#""#,
        meaning: r#"The latest revision is `DEPLOYED` and `spec.verify` has not checked it yet. Only with `spec.verify`: `Ready` waits for `Verified=True`."#,
        action: r#"Wait; `kubectl wait --for=condition=Ready` returns once the agent server answered."#,
    },
    Reason {
        reason: reason::VERIFIED,
        kinds: &[AGD],
        condition: r#"Verified=True"#,
        event: r#"Normal"#,
        meaning: r#"The latest revision is `DEPLOYED`, active, and passed the checks of `spec.verify` on its agent server; `status.verification` has the figures. Checked again every `--verify-interval-seconds`."#,
        action: r#"Nothing."#,
    },
    Reason {
        reason: reason::VERIFICATION_PENDING,
        kinds: &[AGD],
        condition: r#"Verified=Unknown"#,
        event: r#""#,
        meaning: r#"The latest revision is not `DEPLOYED` yet (or there is none): it is verified once it is."#,
        action: r#"Wait for the revision."#,
    },
    Reason {
        reason: reason::AGENT_SERVER_UNREACHABLE,
        kinds: &[AGD, AGA, AGC],
        condition: r#"Reconciling (and `Verified=False`)"#,
        event: r#""#,
        meaning: r#"The agent server at `status.url` did not answer (connection refused, timeout, 5xx or 429), or the deployment has no URL. Retried after 30 s, doubling up to the resync interval (`status.verification.failures`)."#,
        action: r#"Check that the deployment serves (`agentctl assistants search --url URL`) and that the operator can reach the URL (network policy, egress)."#,
    },
    Reason {
        reason: reason::AGENT_SERVER_UNAUTHORIZED,
        kinds: &[AGD, AGA, AGC],
        condition: r#"Stalled (and `Verified=False`)"#,
        event: r#""#,
        meaning: r#"The agent server answered 401/403 to the key: the AgentControlPlane's key, or the one of `spec.verify.apiKeySecretRef`. Retried with backoff."#,
        action: r#"Put a key of the organization that owns the deployment in the Secret."#,
    },
    Reason {
        reason: reason::ASSISTANTS_MISSING,
        kinds: &[AGD],
        condition: r#"Stalled (and `Verified=False`)"#,
        event: r#""#,
        meaning: r#"The assistant search found fewer assistants of `spec.verify.assistants.graphId` than `minCount`, or the server serves no such graph (its answer is in the message). Retried with backoff."#,
        action: r#"Fix `graphId` (a key of `graphs` in `langgraph.json`) or `minCount`, or create the assistants."#,
    },
    Reason {
        reason: reason::ASSISTANT_NOT_FOUND,
        kinds: &[AGD],
        condition: r#"Stalled (and `Verified=False`)"#,
        event: r#""#,
        meaning: r#"The run's `spec.verify.run.assistantId` is unknown to the agent server (404/422, its `detail` in the message)."#,
        action: r#"Use an assistant id or a graph name the deployment serves."#,
    },
    Reason {
        reason: reason::RUN_FAILED,
        kinds: &[AGD],
        condition: r#"Stalled (and `Verified=False`)"#,
        event: r#""#,
        meaning: r#"The verification run was refused (400/422), streamed an `error` event, broke off or did not end within `timeoutSeconds`; `status.verification.lastRunOutcome` says which."#,
        action: r#"Read the message (the graph's error); fix the graph or `spec.verify.run.input`, or raise `timeoutSeconds`."#,
    },
    Reason {
        reason: reason::EXPECTATION_NOT_MET,
        kinds: &[AGD],
        condition: r#"Stalled (and `Verified=False`)"#,
        event: r#""#,
        meaning: r#"The run ended without an event named `spec.verify.run.expect.event` whose data contains `expect.contains`."#,
        action: r#"Check `streamMode` (events are named by their mode) and the text the graph answers."#,
    },
    Reason {
        reason: reason::SUITE_FAILED,
        kinds: &[AGD],
        condition: r#"Stalled (and `Verified=False`)"#,
        event: r#""#,
        meaning: r#"`spec.verify.suite` ran on the revision and fewer than `minPassRate` of its cases passed, or a case the last verified revision passed failed (`compareWith: Serving`); `status.verification.suite` names the failing cases and why. The suite is not run again on this revision."#,
        action: r#"Fix the graph and push a new revision, or change the suite (its new digest runs it again); `spec.rollback.onFailedVerification` redeploys the last verified revision."#,
    },
    Reason {
        reason: reason::DATASET_UNAVAILABLE,
        kinds: &[AGD],
        condition: r#"Reconciling (and `Verified=False`)"#,
        event: r#""#,
        meaning: r#"The LangSmith dataset of `spec.verify.suite.dataset` could not be read: no answer, 429 or 5xx from the control plane's LangSmith API. Retried with backoff; never a reason for `onFailedVerification`."#,
        action: r#"Wait; if it lasts, check that the operator reaches the LangSmith API (`--allowed-hosts`, the network policy)."#,
    },
    Reason {
        reason: reason::SUITE_UNREADABLE,
        kinds: &[AGD],
        condition: r#"Stalled (and `Verified=False`)"#,
        event: r#""#,
        meaning: r#"The ConfigMap of `spec.verify.suite.configMapRef` is missing, lacks its key, or its value is not a list of cases that keeps the rules of `spec.verify.suite.cases` (the message names the first broken one). No case ran. Read again with backoff; never a reason for `onFailedVerification`."#,
        action: r#"Create or fix the ConfigMap in the object's namespace (`kubectl get configmap NAME -o yaml`); the next attempt reads it."#,
    },
    Reason {
        reason: reason::REVISION_NOT_ACTIVE,
        kinds: &[AGD],
        condition: r#"Reconciling (and `Verified=False`)"#,
        event: r#""#,
        meaning: r#"The revision is `DEPLOYED` but the deployment's `active_revision_id` is another one, so the agent server may still serve the previous revision. Retried with backoff."#,
        action: r#"Wait; if it lasts, look at the deployment on the platform."#,
    },
    Reason {
        reason: reason::ROLLED_BACK,
        kinds: &[AGD],
        condition: r#"Reconciling, then Stalled"#,
        event: r#"Warning"#,
        meaning: r#"`spec.rollback`: the latest revision (`status.rollback.fromRevisionId`) failed its verification (or, with `onFailedRevision`, its build or deploy), and the operator redeployed the last verified revision (`toRevisionId`) as a new revision (`revisionId`). That configuration serves; the spec is not applied again, so `Ready` stays False: the desired state did not converge. Once per failed revision, never in a loop. One Warning event naming both revisions and their commits or digests."#,
        action: r#"Read why the revision failed (`status.verification.lastError`, the `VerificationFailed` event, the build log), fix the spec and apply it: a new generation is deployed (and rolled back again if it fails). Setting the spec back to what serves makes it Ready without a new revision. A redeploy request (`kubectl annotate agd NAME agentserver.dev/redeploy-requested-at="$(date -u +%FT%TZ)" --overwrite`) applies the unchanged spec again."#,
    },
    Reason {
        reason: reason::VERIFICATION_FAILED,
        kinds: &[AGD],
        condition: r#"–"#,
        event: r#"Warning"#,
        meaning: r#"A verification failed; one event per failure reason and revision, not one per retry. The conditions carry the reason above."#,
        action: r#"See that reason."#,
    },
    Reason {
        reason: reason::DELETING,
        kinds: &[AGD, AGA, AGC],
        condition: r#"Reconciling"#,
        event: r#""#,
        meaning: r#"The resource is being deleted; the remote deployment is deleted (per `deletionPolicy`) and the finalizer removed once the control plane answers 404. DELETE is sent once; the deployment is then read every 2 s doubling to 30 s. A message "the delete did not take" means a read showed it no longer deleting: DELETE is sent again, on the same backoff."#,
        action: r#"Wait; deletion on the platform is asynchronous and can take minutes. If "did not take" lasts, look at the deployment on the platform."#,
    },
    Reason {
        reason: reason::EXPIRED,
        kinds: &[AGD],
        condition: r#"Stalled"#,
        event: r#"Normal"#,
        meaning: r#"`spec.expiry` passed (the message says when): the remote deployment was deleted once (or, with `deletionPolicy: Orphan`, left running), `status.expiredAt` records it, and nothing is sent for this object again, even when its spec changes. A terminal state: kstatus `Failed`, Argo CD `Degraded`."#,
        action: r#"Nothing for a preview that served its time. For a new one, delete and re-create the object (in GitOps: close and reopen the pull request, or remove and re-add the preview); to keep one longer, move the expiry before it passes."#,
    },
    Reason {
        reason: reason::PREVIEW_LIMIT_REACHED,
        kinds: &[AGD],
        condition: r#"Reconciling"#,
        event: r#"Normal"#,
        meaning: r#"An AgentDeployment with `spec.expiry` would exceed its AgentControlPlane's `spec.previews.maxLive` (the message gives the count): it waits before its create, with no request, and looks again every blocked interval (`--blocked-interval-seconds`, default 60)."#,
        action: r#"Wait for a preview to expire, delete one, or raise `maxLive`."#,
    },
    Reason {
        reason: reason::PAUSED,
        kinds: &[AGD],
        condition: r#"Ready=False"#,
        event: r#""#,
        meaning: r#"The annotation `agentserver.dev/paused: "true"` is set: no call is made to the control plane for it, and its AgentCrons are disabled on the agent server (`DeploymentPaused`)."#,
        action: r#"Remove the annotation to resume."#,
    },
    Reason {
        reason: reason::AUTHENTICATED,
        kinds: &[ACP, CACP],
        condition: r#"Ready=True"#,
        event: r#""#,
        meaning: r#"An authenticated call succeeded."#,
        action: r#"Nothing."#,
    },
    Reason {
        reason: reason::NOT_ENTERPRISE,
        kinds: &[AGL, AGD],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"Listeners answered 403: the organization is not on a self-hosted enterprise plan."#,
        action: r#"Use a cloud deployment (no listener), or upgrade the plan."#,
    },
    Reason {
        reason: reason::LISTENER_NOT_FOUND,
        kinds: &[AGL, AGD],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"The listener id is unknown to the control plane, or `listenerRef` names a missing AgentListener."#,
        action: r#"Check the id (`agentctl listeners list`) or create the AgentListener."#,
    },
    Reason {
        reason: reason::ASSISTANT_READY,
        kinds: &[AGA],
        condition: r#"Ready=True"#,
        event: r#""#,
        meaning: r#"The assistant on the agent server is as the spec says; `status.version` is the version that serves."#,
        action: r#"Nothing."#,
    },
    Reason {
        reason: reason::WAITING_FOR_DEPLOYMENT,
        kinds: &[AGA, AGC],
        condition: r#"Reconciling"#,
        event: r#""#,
        meaning: r#"Its AgentDeployment is not Ready with an agent server URL yet; no request is made."#,
        action: r#"Wait for the deployment (`kubectl get agd`)."#,
    },
    Reason {
        reason: reason::DEPLOYMENT_NOT_FOUND,
        kinds: &[AGA, AGC],
        condition: r#"Reconciling"#,
        event: r#""#,
        meaning: r#"`spec.deploymentRef` names no AgentDeployment of the namespace; no request is made."#,
        action: r#"Create the AgentDeployment or fix the name."#,
    },
    Reason {
        reason: reason::GRAPH_NOT_FOUND,
        kinds: &[AGA, AGC],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"The agent server answered 404: `spec.graphId` is not a graph of the deployment (or a pinned `spec.version` does not exist). Not sent again until the spec changes."#,
        action: r#"Fix `spec.graphId` (a key of `graphs` in langgraph.json) or `spec.version`."#,
    },
    Reason {
        reason: reason::ASSISTANT_REJECTED,
        kinds: &[AGA],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"The agent server refused the request (400, 409, 422) with the message shown. Not sent again until the spec changes."#,
        action: r#"Fix the spec as the message says."#,
    },
    Reason {
        reason: reason::CRON_READY,
        kinds: &[AGC],
        condition: r#"Ready=True"#,
        event: r#""#,
        meaning: r#"The cron on the agent server is as the spec says and runs; `status.nextRunDate` is its next run."#,
        action: r#"Nothing."#,
    },
    Reason {
        reason: reason::CRON_SUSPENDED,
        kinds: &[AGC],
        condition: r#"Ready=True"#,
        event: r#""#,
        meaning: r#"`spec.suspend` is true: the cron exists with `enabled: false`."#,
        action: r#"Set `spec.suspend: false` to run it again."#,
    },
    Reason {
        reason: reason::CRON_COMPLETED,
        kinds: &[AGC],
        condition: r#"Ready=True"#,
        event: r#""#,
        meaning: r#"`spec.endTime` has passed: the operator disabled the cron (it never sends `end_time` to the server)."#,
        action: r#"Nothing; to run it again, move `spec.endTime` later or remove it."#,
    },
    Reason {
        reason: reason::WAITING_FOR_ASSISTANT,
        kinds: &[AGC],
        condition: r#"Reconciling"#,
        event: r#""#,
        meaning: r#"The AgentAssistant of `assistantRef` does not exist or is not Ready on the deployment's current agent server yet (a re-created or moved deployment gets its assistant first); no request is made. Also after a 404 on the create (the server did not hold the assistant yet): looked at again after 30 s, not held."#,
        action: r#"Create that AgentAssistant, or wait for it to be Ready (`kubectl get aga`)."#,
    },
    Reason {
        reason: reason::DEPLOYMENT_PAUSED,
        kinds: &[AGA, AGC],
        condition: r#"AgentCron: Ready=True; AgentAssistant: Reconciling"#,
        event: r#""#,
        meaning: r#"The AgentDeployment has the annotation `agentserver.dev/paused: "true"`: its crons are disabled on the agent server (`enabled: false`), its assistants wait with no request. Both go on when it is unpaused."#,
        action: r#"Nothing; unpause the AgentDeployment to run the crons again."#,
    },
    Reason {
        reason: reason::CRON_REJECTED,
        kinds: &[AGC],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"The agent server refused the request (400, 409, 422), e.g. `Invalid cron schedule`, with the message shown. Not sent again until the spec changes."#,
        action: r#"Fix `spec.schedule` or `spec.timezone` as the message says."#,
    },
    Reason {
        reason: reason::DUPLICATE_CRON_DELETED,
        kinds: &[AGC],
        condition: r#"Reconciling"#,
        event: r#""#,
        meaning: r#"A second cron carried this object's UID tag and was deleted; the next pass looks again."#,
        action: r#"Nothing."#,
    },
    Reason {
        reason: reason::CRON_VANISHED,
        kinds: &[AGC],
        condition: r#"Reconciling"#,
        event: r#""#,
        meaning: r#"The cron found by the search was gone when the PATCH reached it (deleted outside); the next pass creates it again."#,
        action: r#"Nothing."#,
    },
    Reason {
        reason: reason::LISTENER_FOUND,
        kinds: &[AGL],
        condition: r#"Ready=True"#,
        event: r#""#,
        meaning: r#"The listener was read; `status` shows its compute id and namespaces."#,
        action: r#"Nothing."#,
    },
    Reason {
        reason: reason::PLACEMENT_INVALID,
        kinds: &[AGD],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"`listenerConfig.k8sNamespace` is not one of the listener's namespaces."#,
        action: r#"Pick a namespace from `kubectl get agl -o wide`."#,
    },
    Reason {
        reason: reason::INTEGRATION_NOT_FOUND,
        kinds: &[AGD],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"`sourceConfig.integrationRef` names no GitHub integration of the workspace, or several."#,
        action: r#"`agentctl integrations list`; fix the name or set `sourceConfig.integrationId` instead (both accepted: nothing was created)."#,
    },
    Reason {
        reason: reason::REPOSITORY_NOT_ACCESSIBLE,
        kinds: &[AGD],
        condition: r#"Stalled"#,
        event: r#""#,
        meaning: r#"`sourceConfig.repoUrl` is not among the repositories the integration can read. Nothing is created."#,
        action: r#"Fix a mistyped `sourceConfig.repoUrl` (accepted: nothing was created), or grant the GitHub app access to the repository (`agentctl integrations repos NAME`)."#,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The constants of `mod reason` in conditions.rs, read from its source.
    fn constants() -> Vec<&'static str> {
        let source = include_str!("conditions.rs");
        let module = source
            .split("pub mod reason {")
            .nth(1)
            .and_then(|rest| rest.split("\n}").next())
            .expect("the reason module");
        module
            .lines()
            .filter_map(|l| l.trim().strip_prefix("pub const "))
            .filter_map(|l| l.split('"').nth(1))
            .collect()
    }

    #[test]
    fn every_reason_constant_has_one_row() {
        let constants = constants();
        assert!(constants.len() > 50, "{constants:?}");
        let missing: Vec<&&str> = constants
            .iter()
            .filter(|c| Reason::of(c).is_none())
            .collect();
        assert!(missing.is_empty(), "reasons without a row: {missing:?}");
        let mut seen = std::collections::BTreeSet::new();
        for r in &REASONS {
            assert!(seen.insert(r.reason), "{} has two rows", r.reason);
            assert!(!r.kinds.is_empty() && !r.meaning.is_empty(), "{}", r.reason);
            assert!(["", "Normal", "Warning"].contains(&r.event), "{}", r.reason);
        }
    }

    #[test]
    fn every_kind_named_is_a_kind_of_the_registry() {
        let kinds: Vec<String> = crate::api::crds()
            .into_iter()
            .map(|c| c.spec.names.kind)
            .collect();
        for r in &REASONS {
            for k in r.kinds {
                assert!(kinds.iter().any(|x| x == k), "{}: {k}", r.reason);
            }
        }
    }
}
