//! The unmanaged report of an AgentControlPlane (`status.unmanaged`): which
//! deployments of its workspace no AgentDeployment of the cluster holds or
//! claims, which of them the control plane shows `UNUSED`, and the
//! platform's own previews apart; and when the workspace is due to be
//! listed again (one paged list per drift period at most). Shared by the
//! operator (`controller::control_plane`, reading through
//! `controller::unmanaged`) and `agentctl unmanaged` and `export`. No IO.
//!
//! Which deployments are managed follows "one owner per remote deployment"
//! (docs/BEHAVIOUR.md; [`super::claims`]): a deployment is managed when an
//! AgentDeployment, of any namespace, holds or claims it.
//!
//! Source: docs/control-plane-api.md "Requests" (list, paged by `limit` and
//! `offset`) and "Deployment" (`status`, `is_preview`).

use std::collections::HashMap;
use std::time::Duration;

use jiff::Timestamp;

use super::claims::{Claim, PlaneId};
use super::verdict::UNUSED;
use crate::api::control_plane::UnmanagedDeployments;
use crate::controlplane::types::Deployment;

/// How many names `status.unmanaged.names` shows.
pub const NAMES_SHOWN: usize = 20;

/// The deployment statuses of a deployment being deleted: not counted.
const BEING_DELETED: [&str; 2] = ["AWAITING_DELETE", "AWAITING_FINAL_DELETE"];

/// How an AgentDeployment stands to a remote deployment it manages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Hold {
    /// It records the id (`status.deploymentId` or the
    /// `agentserver.dev/deployment-id` annotation).
    Holds,
    /// `spec.deploymentId` names it.
    Adopts,
    /// It holds no id and names none, and its remote name (`spec.name`,
    /// default `metadata.name`) is the deployment's, on the same plane: it
    /// is creating it, or adopts it by name.
    Named,
}

impl Hold {
    /// The relation in words: `held by`, `claimed by spec.deploymentId of`,
    /// `claimed by name by`.
    pub fn words(self) -> &'static str {
        match self {
            Hold::Holds => "held by",
            Hold::Adopts => "claimed (spec.deploymentId) by",
            Hold::Named => "claimed by name by",
        }
    }
}

/// The AgentDeployment that manages a remote deployment: its
/// `namespace/name` and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// `namespace/name` of the AgentDeployment.
    pub key: String,
    /// How it manages the deployment.
    pub hold: Hold,
}

/// What the AgentDeployments of the cluster hold or claim on one plane
/// (base URL and workspace): the remote ids they hold or name in
/// `spec.deploymentId`, and the remote names of those that hold and name
/// no id (a create in progress, an adoption by name not done yet), each
/// with its AgentDeployment. An id is counted whatever the plane of its
/// object (ids are unique across the service, so an id this workspace
/// lists is that very deployment, even when its object's
/// AgentControlPlane is missing or spells the URL otherwise); a name only
/// on the same plane.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Managed {
    /// Lowercase id → its owner.
    ids: HashMap<String, Owner>,
    /// Remote name → its owner.
    names: HashMap<String, Owner>,
}

impl Managed {
    /// What `claims` hold or claim on `plane` ([`Managed::add`] of each).
    pub fn of(claims: &[Claim], plane: &PlaneId) -> Self {
        let mut managed = Self::default();
        for claim in claims {
            managed.add(claim, plane);
        }
        managed
    }

    /// True when `claim` claims by name only: it holds no id and names none
    /// (so only its plane tells whether it claims a deployment of this
    /// workspace), and its preview has not expired.
    pub fn by_name(claim: &Claim) -> bool {
        !claim.expired && claim.holds.is_none() && claim.adopts.is_none()
    }

    /// Adds what `claim` holds or claims on `plane`: its held id and its
    /// `spec.deploymentId` (any plane), else its remote name when its plane
    /// is `plane`. An expired preview holds nothing. Where several objects
    /// manage one deployment, the owner is the one that holds it, then the
    /// first by `namespace/name`.
    pub fn add(&mut self, claim: &Claim, plane: &PlaneId) {
        if claim.expired {
            return;
        }
        let owner = |hold| Owner {
            key: claim.key.clone(),
            hold,
        };
        let ids = [(&claim.holds, Hold::Holds), (&claim.adopts, Hold::Adopts)];
        for (id, hold) in ids {
            if let Some(id) = id.as_deref().filter(|id| !id.is_empty()) {
                keep_first(&mut self.ids, id.to_ascii_lowercase(), owner(hold));
            }
        }
        if Self::by_name(claim) && claim.plane.as_ref() == Some(plane) {
            keep_first(&mut self.names, claim.name.clone(), owner(Hold::Named));
        }
    }

    /// The AgentDeployment that manages `d`: one that holds or names its id,
    /// else one that claims its name (never for a preview, which may share
    /// its parent's name and which adoption by name skips).
    pub fn owner(&self, d: &Deployment) -> Option<&Owner> {
        self.ids
            .get(&d.id.to_ascii_lowercase())
            .or_else(|| (!d.preview()).then(|| self.names.get(&d.name)).flatten())
    }

    /// True when `d` is managed ([`Managed::owner`]).
    pub fn manages(&self, d: &Deployment) -> bool {
        self.owner(d).is_some()
    }
}

/// Puts `owner` under `key` unless an owner that comes first (holds rather
/// than claims, then the first by `namespace/name`) is there.
fn keep_first(map: &mut HashMap<String, Owner>, key: String, owner: Owner) {
    let rank = |o: &Owner| (o.hold, o.key.clone());
    match map.get(&key) {
        Some(there) if rank(there) <= rank(&owner) => {}
        _ => {
            map.insert(key, owner);
        }
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

    fn here() -> PlaneId {
        PlaneId::new("https://cp.example/api-host/", "WS")
    }

    /// The claim of `ns/name`: remote name `name`, on `plane`.
    fn claim(key: &str, name: &str, plane: PlaneId) -> Claim {
        Claim {
            key: key.into(),
            plane: Some(plane),
            name: name.into(),
            ..Default::default()
        }
    }

    fn holding(key: &str, id: &str) -> Claim {
        Claim {
            holds: Some(id.into()),
            ..claim(key, "whatever", here())
        }
    }

    /// The AgentDeployments of a cluster as their claims: held, adopted,
    /// named while creating, on another plane, on no plane, expired.
    fn cluster_claims() -> Vec<Claim> {
        let elsewhere = PlaneId::new("https://cp.example/api-host", "other-ws");
        vec![
            // Held (status or annotation), in any namespace.
            holding("a/by-status", "id-1"),
            holding("b/by-annotation", "ID-2"),
            Claim {
                adopts: Some("id-3".into()),
                ..claim("a/by-spec", "c", here())
            },
            // No id yet: its remote name counts, on this plane only.
            Claim {
                creating: true,
                ..claim("b/creating", "remote-name", here())
            },
            claim("c/other-plane", "zeta", elsewhere),
            // A plane that cannot be told: its name counts nowhere.
            Claim {
                plane: None,
                ..claim("c/no-plane", "old", here())
            },
            // An expired preview holds nothing.
            Claim {
                expired: true,
                ..holding("a/expired", "id-6")
            },
        ]
    }

    #[test]
    fn the_report_counts_what_no_agent_deployment_of_the_cluster_manages() {
        let claims = cluster_claims();
        let managed = Managed::of(&claims, &PlaneId::new("https://cp.example/api-host", "ws"));
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
        let owner = |i: usize| managed.owner(&listed[i]).map(|o| (o.key.as_str(), o.hold));
        assert_eq!(owner(1), Some(("b/by-annotation", Hold::Holds)));
        assert_eq!(owner(2), Some(("a/by-spec", Hold::Adopts)));
        assert_eq!(owner(3), Some(("b/creating", Hold::Named)));
        assert_eq!(owner(4), None);
    }

    #[test]
    fn the_owner_of_a_deployment_is_its_holder_then_the_first_by_key() {
        let plane = here();
        let d = remote("agent", "id-1", "READY", false);
        let claimant = Claim {
            adopts: Some("id-1".into()),
            ..claim("a/claims", "agent", here())
        };
        let by_name = claim("a/named", "agent", here());
        for claims in [
            vec![
                claimant.clone(),
                holding("z/holds", "id-1"),
                by_name.clone(),
            ],
            vec![
                by_name.clone(),
                holding("z/holds", "id-1"),
                claimant.clone(),
            ],
        ] {
            let managed = Managed::of(&claims, &plane);
            let owner = managed.owner(&d).unwrap();
            assert_eq!((owner.key.as_str(), owner.hold), ("z/holds", Hold::Holds));
        }
        let managed = Managed::of(&[claim("b/x", "agent", here()), by_name], &plane);
        assert_eq!(managed.owner(&d).unwrap().key, "a/named");
        assert!(Managed::by_name(&claim("a/x", "agent", here())));
        assert!(!Managed::by_name(&holding("a/x", "id")));
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
