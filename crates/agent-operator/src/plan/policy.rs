//! The management policy of an AgentDeployment (`spec.managementPolicy`):
//! `Manage` takes the steps of [`super::decide`] as they are; `Observe`
//! turns every step that would change the remote deployment into a read
//! ([`before`], [`after`]), never creates one ([`by_name`]), and lists how
//! the remote differs from the spec ([`drift`]) from the same minimal PATCH
//! that `Manage` would send ([`super::desired::compute_patch`]), so that
//! switching to `Manage` sends exactly what was listed, in one PATCH.
//!
//! Pure; every function is a table of cases in the tests. Sources:
//! docs/control-plane-api.md "Requests" (what a PATCH changes) and "Answer
//! shapes" (what a read can tell).

use serde::Serialize;

use super::decide::{After, Before};
use super::shapes::{self, Said};
use crate::api::conditions::{FALSE, TRUE, reason};
use crate::api::deployment::{DriftField, ManagementPolicy};
use crate::controlplane::types::{
    Deployment, DeploymentCreate, DeploymentPatch, SourceConfig, SourceRevisionConfig,
};

/// What `status.drift` shows in place of a secret value.
pub const DIFFERS: &str = "differs";

/// The step before any request, under `policy`: `Observe` sends nothing,
/// so it never waits for a rejection's backoff or the interval of Secret
/// values; it reads instead (or obtains, when it has no id yet).
pub fn before(policy: ManagementPolicy, step: Before, has_id: bool) -> Before {
    match (policy, step) {
        (ManagementPolicy::Observe, Before::WaitRejected(_) | Before::WaitSecrets(_)) => {
            if has_id {
                Before::ReadDeployment
            } else {
                Before::Obtain
            }
        }
        (_, step) => step,
    }
}

/// The step once the deployment was read, under `policy`: `Observe` turns
/// every change (PATCH, re-apply, redeploy) and every report about one
/// (unheld, fight) into following the remote deployment as it is; a
/// deployment being deleted outside is waited for, as under `Manage`.
pub fn after(policy: ManagementPolicy, step: After) -> After {
    match (policy, step) {
        (ManagementPolicy::Manage, step) => step,
        (ManagementPolicy::Observe, After::RemoteDeleting) => After::RemoteDeleting,
        (ManagementPolicy::Observe, _) => After::Follow,
    }
}

/// What an `Observe` resource without a deployment id does with the
/// deployments found by its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByName {
    /// One deployment has the name: adopt it (read only).
    Adopt,
    /// None has it: `Stalled` (`NothingToObserve`), nothing is created.
    Nothing,
    /// Several have it: `Stalled` (`NameConflict`), the user names one
    /// with `spec.deploymentId`.
    Ambiguous(usize),
}

/// [`ByName`] for `found` deployments with the resource's name.
pub fn by_name(found: usize) -> ByName {
    match found {
        0 => ByName::Nothing,
        1 => ByName::Adopt,
        n => ByName::Ambiguous(n),
    }
}

/// `v` as compact JSON (empty when it cannot be encoded).
fn json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// One drift entry.
fn field(field: &str, desired: String, remote: String) -> DriftField {
    DriftField {
        field: field.to_owned(),
        desired,
        remote,
    }
}

/// The fields of `remote` that differ from `desired`, one entry per field
/// of `patch` (the minimal PATCH from `remote` to `desired`), with both
/// values as JSON; `source_revision_config` is split into the values whose
/// read differs (`repo_ref`, `langgraph_config_path`, `image_uri`), whole
/// when none does (a change found against what was last sent). Secret
/// values are never shown: `secrets` reads [`DIFFERS`] on both sides.
pub fn drift(
    desired: &DeploymentCreate,
    remote: &Deployment,
    patch: &DeploymentPatch,
) -> Vec<DriftField> {
    let mut out = Vec::new();
    if let Some(sc) = &patch.source_config {
        out.extend(source_config_drift(
            &desired.source_config,
            &remote.source_config,
            sc,
        ));
    }
    if patch.source_revision_config.is_some() {
        out.extend(revision_drift(desired, remote));
    }
    if patch.secrets.is_some() {
        out.push(field("secrets", DIFFERS.into(), DIFFERS.into()));
    }
    if patch.display_name.is_some() {
        out.push(field(
            "display_name",
            json(&desired.display_name),
            json(&remote.display_name),
        ));
    }
    if let Some(refs) = &patch.secret_references {
        out.push(field(
            "secret_references",
            json(refs),
            json(&remote.secret_references),
        ));
    }
    out
}

/// The [`drift`] of `source_config`: one entry per field the PATCH's
/// `sc` sends, desired (`d`) against remote (`r`).
fn source_config_drift(d: &SourceConfig, r: &SourceConfig, sc: &SourceConfig) -> Vec<DriftField> {
    let mut out = Vec::new();
    if sc.build_on_push.is_some() {
        out.push(field(
            "source_config.build_on_push",
            json(&d.build_on_push),
            json(&r.build_on_push),
        ));
    }
    if sc.custom_url.is_some() {
        out.push(field(
            "source_config.custom_url",
            json(&d.custom_url),
            json(&r.custom_url),
        ));
    }
    if sc.install_command.is_some() {
        out.push(field(
            "source_config.install_command",
            json(&d.install_command),
            json(&r.install_command),
        ));
    }
    if sc.build_command.is_some() {
        out.push(field(
            "source_config.build_command",
            json(&d.build_command),
            json(&r.build_command),
        ));
    }
    if sc.resource_spec.is_some() {
        out.push(field(
            "source_config.resource_spec",
            json(&d.resource_spec),
            json(&r.resource_spec),
        ));
    }
    out
}

/// The [`drift`] of `source_revision_config`: the values whose read
/// differs (`repo_ref`, `langgraph_config_path`, `image_uri` but for
/// `github`), else the whole configuration (a change found against what
/// was last sent).
fn revision_drift(desired: &DeploymentCreate, remote: &Deployment) -> Vec<DriftField> {
    let (d, r) = (
        &desired.source_revision_config,
        &remote.source_revision_config,
    );
    let mut out = Vec::new();
    if shapes::repo_ref(&d.repo_ref, remote) == Said::Differs {
        out.push(field(
            "source_revision_config.repo_ref",
            json(&d.repo_ref),
            json(&shapes::configured_ref(remote)),
        ));
    }
    if shapes::optional_echo(&d.langgraph_config_path, &r.langgraph_config_path) == Said::Differs {
        out.push(field(
            "source_revision_config.langgraph_config_path",
            json(&d.langgraph_config_path),
            json(&r.langgraph_config_path),
        ));
    }
    if remote.source.as_deref() != Some("github")
        && shapes::optional_echo(&d.image_uri, &r.image_uri) == Said::Differs
    {
        out.push(field(
            "source_revision_config.image_uri",
            json(&d.image_uri),
            json(&r.image_uri),
        ));
    }
    if out.is_empty() {
        let shown = |c: &SourceRevisionConfig| {
            json(&serde_json::json!({
                "repo_ref": c.repo_ref,
                "langgraph_config_path": c.langgraph_config_path,
                "image_uri": c.image_uri,
            }))
        };
        out.push(field("source_revision_config", shown(d), shown(r)));
    }
    out
}

/// The `Drifted` condition of an `Observe` resource whose last read found
/// `drift`: status, reason and message (the field names, never a value).
pub fn drifted(drift: &[DriftField], id: &str) -> (&'static str, &'static str, String) {
    drifted_object(drift, &format!("remote deployment {id}"), "one PATCH")
}

/// [`drifted`] of any observed object: `what` names it (`assistant ID`,
/// `cron ID`), `write` is what `Manage` would send to converge it (`one
/// PATCH`). Shared by AgentDeployment, AgentAssistant and AgentCron.
pub fn drifted_object(
    drift: &[DriftField],
    what: &str,
    write: &str,
) -> (&'static str, &'static str, String) {
    if drift.is_empty() {
        return (
            FALSE,
            reason::NO_DRIFT,
            format!("{what} equals the spec (managementPolicy: Observe)"),
        );
    }
    let fields: Vec<&str> = drift.iter().map(|f| f.field.as_str()).collect();
    (
        TRUE,
        reason::REMOTE_DIFFERS,
        format!(
            "{what} differs from the spec in {} (see status.drift); nothing is changed while spec.managementPolicy is Observe, set it to Manage to converge it with {write}",
            fields.join(", ")
        ),
    )
}

/// A `status.drift` entry: `field` with both values as JSON (`null` when
/// absent). For values that hold no secret (agent server objects).
pub fn drift_field(field: &str, desired: &impl Serialize, remote: &impl Serialize) -> DriftField {
    DriftField {
        field: field.to_owned(),
        desired: json(desired),
        remote: json(remote),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controlplane::types::{SecretValue, SourceConfig, SourceRevisionConfig};
    use std::time::Duration;

    use ManagementPolicy::{Manage, Observe};

    /// Asserts [`before`] of each case: (policy, step, has an id, step taken).
    fn assert_before(cases: Vec<(ManagementPolicy, Before, bool, Before)>) {
        for (policy, step, has_id, want) in cases {
            assert_eq!(
                before(policy, step.clone(), has_id),
                want,
                "{policy:?} {step:?}"
            );
        }
    }

    /// `Manage` waits for a rejection's backoff and for the interval of Secret values.
    #[test]
    fn before_under_manage_keeps_the_waits() {
        let wait = Duration::from_secs(30);
        assert_before(vec![
            (
                Manage,
                Before::WaitRejected(wait),
                true,
                Before::WaitRejected(wait),
            ),
            (
                Manage,
                Before::WaitSecrets(wait),
                true,
                Before::WaitSecrets(wait),
            ),
        ]);
    }

    /// `Observe` sends nothing, so it never waits for them: it reads, or obtains without an id.
    #[test]
    fn before_under_observe_reads_or_obtains_instead_of_waiting() {
        let wait = Duration::from_secs(30);
        assert_before(vec![
            (
                Observe,
                Before::WaitRejected(wait),
                true,
                Before::ReadDeployment,
            ),
            (Observe, Before::WaitRejected(wait), false, Before::Obtain),
            (
                Observe,
                Before::WaitSecrets(wait),
                true,
                Before::ReadDeployment,
            ),
        ]);
    }

    /// Every other step is the same under `Observe`.
    #[test]
    fn before_under_observe_keeps_every_other_step() {
        let wait = Duration::from_secs(30);
        assert_before(vec![
            (Observe, Before::Obtain, false, Before::Obtain),
            (
                Observe,
                Before::SpreadColdStart,
                true,
                Before::SpreadColdStart,
            ),
            (
                Observe,
                Before::PollRevision("r".into()),
                true,
                Before::PollRevision("r".into()),
            ),
            (
                Observe,
                Before::WaitRemoteDeleting(wait),
                true,
                Before::WaitRemoteDeleting(wait),
            ),
            (
                Observe,
                Before::ReadDeployment,
                true,
                Before::ReadDeployment,
            ),
        ]);
    }

    #[test]
    fn after_table_observe_never_changes_anything() {
        let changes = [
            After::Patch { drift: true },
            After::Patch { drift: false },
            After::Reapply {
                revision: "r9".into(),
            },
            After::Redeploy,
            After::Unheld,
            After::Fight {
                fields: vec!["secrets".into()],
            },
            After::FollowOutside {
                revision: "r9".into(),
            },
            After::Follow,
        ];
        for step in changes {
            assert_eq!(after(Observe, step.clone()), After::Follow, "{step:?}");
            assert_eq!(after(Manage, step.clone()), step, "Manage keeps {step:?}");
        }
        assert_eq!(after(Observe, After::RemoteDeleting), After::RemoteDeleting);
    }

    #[test]
    fn by_name_adopts_one_and_never_creates() {
        assert_eq!(by_name(0), ByName::Nothing);
        assert_eq!(by_name(1), ByName::Adopt);
        assert_eq!(by_name(3), ByName::Ambiguous(3));
    }

    fn docker(image: &str, secret: &str) -> DeploymentCreate {
        serde_json::from_value(serde_json::json!({
            "name": "agent", "source": "external_docker",
            "source_config": {"resource_spec": {"cpu": 2}},
            "source_revision_config": {"image_uri": image},
            "secrets": [{"name": "API_TOKEN", "value": secret}],
        }))
        .unwrap()
    }

    fn remote(image: &str) -> Deployment {
        serde_json::from_value(serde_json::json!({
            "id": "d-1", "name": "agent", "source": "external_docker",
            "source_config": {"resource_spec": {"cpu": 1, "min_scale": 1}},
            "source_revision_config": {"image_uri": image},
            "secrets": [{"name": "API_TOKEN", "value": "remote-secret-value"}],
        }))
        .unwrap()
    }

    #[test]
    fn drift_lists_each_field_with_both_values_and_hides_secret_values() {
        let desired = docker("registry.example/agent:v2", "desired-secret-value");
        let r = remote("registry.example/agent:v1");
        let patch = DeploymentPatch {
            source_config: Some(SourceConfig {
                resource_spec: Some(serde_json::json!({"cpu": 2, "min_scale": 1})),
                ..Default::default()
            }),
            source_revision_config: Some(SourceRevisionConfig::default()),
            secrets: Some(vec![SecretValue::new("API_TOKEN", "desired-secret-value")]),
            ..Default::default()
        };
        let got = drift(&desired, &r, &patch);
        assert_eq!(
            got,
            vec![
                field(
                    "source_config.resource_spec",
                    r#"{"cpu":2}"#.into(),
                    r#"{"cpu":1,"min_scale":1}"#.into()
                ),
                field(
                    "source_revision_config.image_uri",
                    r#""registry.example/agent:v2""#.into(),
                    r#""registry.example/agent:v1""#.into()
                ),
                field("secrets", DIFFERS.into(), DIFFERS.into()),
            ]
        );
        let shown = format!("{got:?}");
        assert!(
            !shown.contains("secret-value"),
            "no secret value is shown: {shown}"
        );
    }

    #[test]
    fn an_empty_patch_is_no_drift() {
        let desired = docker("registry.example/agent:v1", "v");
        let r = remote("registry.example/agent:v1");
        assert_eq!(drift(&desired, &r, &DeploymentPatch::default()), vec![]);
    }

    #[test]
    fn a_revision_change_found_only_against_memory_is_shown_whole() {
        let mut desired = docker("registry.example/agent:v1", "v");
        desired.source_revision_config.image_uri = None;
        desired.source_revision_config.repo_ref = Some("main".into());
        let r = remote("registry.example/agent:v1");
        let patch = DeploymentPatch {
            source_revision_config: Some(SourceRevisionConfig::default()),
            ..Default::default()
        };
        let got = drift(&desired, &r, &patch);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].field, "source_revision_config");
        assert!(got[0].desired.contains(r#""repo_ref":"main""#), "{got:?}");
    }

    #[test]
    fn drifted_condition_names_the_fields_never_values() {
        assert_eq!(drifted(&[], "d-1").0, FALSE);
        assert_eq!(drifted(&[], "d-1").1, reason::NO_DRIFT);
        let (status, why, message) =
            drifted(&[field("secrets", DIFFERS.into(), DIFFERS.into())], "d-1");
        assert_eq!((status, why), (TRUE, reason::REMOTE_DIFFERS));
        assert!(
            message.contains("d-1 differs from the spec in secrets"),
            "{message}"
        );
        assert!(message.contains("Manage"), "{message}");
    }
}
