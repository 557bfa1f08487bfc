//! The unmanaged report of an AgentControlPlane (`status.unmanaged`): which
//! deployments of its workspace no AgentDeployment manages, which of them
//! the control plane shows `UNUSED`, and the platform's own previews apart;
//! and when the workspace is due to be listed again (one paged list per
//! drift period at most). Shared by the operator
//! (`controller::control_plane`) and `agentctl unmanaged`. No IO.
//!
//! Source: docs/control-plane-api.md "Requests" (list, paged by `limit` and
//! `offset`) and "Deployment" (`status`, `is_preview`).

use std::collections::HashSet;
use std::time::Duration;

use jiff::Timestamp;
use kube::ResourceExt;

use super::verdict::UNUSED;
use crate::api::control_plane::UnmanagedDeployments;
use crate::api::deployment::{AgentDeployment, DEPLOYMENT_ID_ANNOTATION};
use crate::controlplane::types::Deployment;

/// How many names `status.unmanaged.names` shows.
pub const NAMES_SHOWN: usize = 20;

/// The deployment statuses of a deployment being deleted: not counted.
const BEING_DELETED: [&str; 2] = ["AWAITING_DELETE", "AWAITING_FINAL_DELETE"];

/// What the AgentDeployments of one AgentControlPlane hold: the remote ids
/// they manage, and the remote names of those that hold no id yet (a
/// create in progress, an adoption by name not done yet).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Managed {
    ids: HashSet<String>,
    names: HashSet<String>,
}

impl Managed {
    /// What the AgentDeployments of `deployments` that name the plane
    /// `plane` in `spec.controlPlaneRef` manage: each one's id from
    /// `status.deploymentId`, the [`DEPLOYMENT_ID_ANNOTATION`] or
    /// `spec.deploymentId` (all of them when they differ), else its remote
    /// name (`spec.name`, default `metadata.name`). The caller passes the
    /// AgentDeployments of the plane's namespace.
    pub fn of(deployments: &[AgentDeployment], plane: &str) -> Self {
        let mut managed = Self::default();
        for d in deployments
            .iter()
            .filter(|d| d.spec.control_plane_ref.name == plane)
        {
            let ids = [
                d.status.as_ref().and_then(|s| s.deployment_id.clone()),
                d.annotations().get(DEPLOYMENT_ID_ANNOTATION).cloned(),
                d.spec.deployment_id.clone(),
            ];
            let mut any = false;
            for id in ids.into_iter().flatten().filter(|id| !id.is_empty()) {
                managed.ids.insert(id);
                any = true;
            }
            if !any {
                managed.names.insert(d.remote_name());
            }
        }
        managed
    }

    /// True when `d` is managed: its id is held, or its name is that of an
    /// AgentDeployment without an id (never for a preview, which may share
    /// its parent's name and which adoption by name skips).
    pub fn manages(&self, d: &Deployment) -> bool {
        self.ids.contains(&d.id) || (!d.preview() && self.names.contains(&d.name))
    }
}

/// True when the control plane shows `d` being deleted.
fn being_deleted(d: &Deployment) -> bool {
    d.status
        .as_deref()
        .is_some_and(|s| BEING_DELETED.contains(&s))
}

/// The deployments of `remote` that `managed` does not manage and that are
/// not being deleted, previews included, sorted by name then id.
pub fn unmanaged<'a>(remote: &'a [Deployment], managed: &Managed) -> Vec<&'a Deployment> {
    let mut out: Vec<&Deployment> = remote
        .iter()
        .filter(|d| !being_deleted(d) && !managed.manages(d))
        .collect();
    out.sort_by(|a, b| (&a.name, &a.id).cmp(&(&b.name, &b.id)));
    out
}

/// `status.unmanaged` of a listing of the workspace (`remote`, every page)
/// taken at `observed_at`.
pub fn report(
    remote: &[Deployment],
    managed: &Managed,
    observed_at: Timestamp,
) -> UnmanagedDeployments {
    let outside = unmanaged(remote, managed);
    let (previews, own): (Vec<&Deployment>, Vec<&Deployment>) =
        outside.into_iter().partition(|d| d.preview());
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    UnmanagedDeployments {
        count: count(own.len()),
        unused: count(
            own.iter()
                .filter(|d| d.status.as_deref() == Some(UNUSED))
                .count(),
        ),
        previews: count(previews.len()),
        managed: count(
            remote
                .iter()
                .filter(|d| !being_deleted(d) && managed.manages(d))
                .count(),
        ),
        names: own
            .iter()
            .take(NAMES_SHOWN)
            .map(|d| d.name.clone())
            .collect(),
        observed_at: observed_at.to_string(),
    }
}

/// Whether a pass at `now` lists the workspace, given when it was last
/// listed (`status.unmanaged.observedAt`) and the drift period: `None` when
/// it is due (never listed, an unreadable time, or at least three quarters
/// of `period` ago, the shortest jittered resync); else `Some(wait)`, the
/// time until it is due, for the requeue. A pass that a change of the spec
/// or a Secret starts within the period thus probes with one small request
/// instead, and a restart does not list again before its time.
pub fn list_due(observed_at: Option<&str>, now: Timestamp, period: Duration) -> Option<Duration> {
    let last: Timestamp = observed_at?.parse().ok()?;
    let age = Duration::try_from(now.duration_since(last)).unwrap_or_default();
    let due_after = period.mul_f64(0.75);
    (age < due_after).then(|| due_after - age)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn remote(name: &str, id: &str, status: &str, preview: bool) -> Deployment {
        serde_json::from_value(json!({
            "id": id, "name": name, "status": status, "is_preview": preview,
        }))
        .unwrap()
    }

    fn agd(name: &str, plane: &str, extra: serde_json::Value) -> AgentDeployment {
        let mut v = json!({
            "apiVersion": "agentserver.dev/v1alpha1",
            "kind": "AgentDeployment",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {
                "controlPlaneRef": {"name": plane},
                "source": "external_docker",
                "sourceConfig": {"imageUri": "docker.io/acme/agent:1"},
            },
        });
        json_patch_merge(&mut v, extra);
        serde_json::from_value(v).unwrap()
    }

    fn json_patch_merge(target: &mut serde_json::Value, patch: serde_json::Value) {
        match (target, patch) {
            (serde_json::Value::Object(t), serde_json::Value::Object(p)) => {
                for (k, v) in p {
                    json_patch_merge(t.entry(k).or_insert(serde_json::Value::Null), v);
                }
            }
            (t, p) => *t = p,
        }
    }

    #[test]
    fn the_report_counts_what_no_agent_deployment_of_the_plane_manages() {
        let ads = [
            agd(
                "by-status",
                "cp",
                json!({"status": {"deploymentId": "id-1"}}),
            ),
            agd(
                "by-annotation",
                "cp",
                json!({"metadata": {"annotations": {DEPLOYMENT_ID_ANNOTATION: "id-2"}}}),
            ),
            agd("by-spec", "cp", json!({"spec": {"deploymentId": "id-3"}})),
            // No id yet: its remote name (spec.name) counts.
            agd("creating", "cp", json!({"spec": {"name": "remote-name"}})),
            // Another plane's: manages nothing here.
            agd(
                "other-plane",
                "other",
                json!({"status": {"deploymentId": "id-5"}}),
            ),
        ];
        let managed = Managed::of(&ads, "cp");
        let listed = [
            remote("a", "id-1", "READY", false),
            remote("b", "id-2", "READY", false),
            remote("c", "id-3", "UNUSED", false),
            remote("remote-name", "id-4", "READY", false),
            // A platform preview with the name of an AgentDeployment
            // without id: not managed, counted apart.
            remote("remote-name", "id-9", "READY", true),
            remote("zeta", "id-5", "UNUSED", false),
            remote("legacy", "id-6", "READY", false),
            remote("old", "id-7", "UNUSED", false),
            remote("going", "id-8", "AWAITING_DELETE", false),
            remote("pr-12", "id-10", "READY", true),
        ];
        let at: Timestamp = "2026-01-02T03:04:05Z".parse().unwrap();
        let r = report(&listed, &managed, at);
        assert_eq!(
            r,
            UnmanagedDeployments {
                count: 3,
                unused: 2,
                previews: 2,
                managed: 4,
                names: vec!["legacy".into(), "old".into(), "zeta".into()],
                observed_at: "2026-01-02T03:04:05Z".into(),
            }
        );
        let ids: Vec<&str> = unmanaged(&listed, &managed)
            .iter()
            .map(|d| d.id.as_str())
            .collect();
        assert_eq!(ids, ["id-6", "id-7", "id-10", "id-9", "id-5"]);
    }

    #[test]
    fn names_stop_at_twenty_sorted_and_the_count_goes_on() {
        let listed: Vec<Deployment> = (0..25)
            .rev()
            .map(|i| remote(&format!("d{i:02}"), &format!("id{i}"), "READY", false))
            .collect();
        let r = report(&listed, &Managed::default(), Timestamp::UNIX_EPOCH);
        assert_eq!(r.count, 25);
        assert_eq!(r.names.len(), NAMES_SHOWN);
        assert_eq!(r.names.first().map(String::as_str), Some("d00"));
        assert_eq!(r.names.last().map(String::as_str), Some("d19"));
    }

    #[test]
    fn the_workspace_is_listed_once_per_drift_period() {
        let period = Duration::from_secs(300);
        let now: Timestamp = "2026-01-02T03:10:00Z".parse().unwrap();
        for (last, want) in [
            (None, None),
            (Some("not a time"), None),
            // Three quarters of the period ago or more: due.
            (Some("2026-01-02T03:06:15Z"), None),
            (Some("2026-01-02T03:00:00Z"), None),
            // Within: not due, and the wait runs to the due time.
            (Some("2026-01-02T03:08:00Z"), Some(Duration::from_secs(105))),
            (Some("2026-01-02T03:10:00Z"), Some(Duration::from_secs(225))),
        ] {
            assert_eq!(list_due(last, now, period), want, "{last:?}");
        }
    }
}
