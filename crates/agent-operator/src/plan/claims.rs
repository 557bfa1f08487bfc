//! One owner per remote deployment (docs/BEHAVIOUR.md, "One owner per
//! remote deployment"): which AgentDeployment of the cluster holds a remote
//! deployment, which one takes it over when its holder goes, and whether a
//! deployment may be adopted. Pure: the controller builds the [`Claim`]s
//! from its watch stores and reads again, fresh, the object a decision rests
//! on (`controller::deployment::claims`).
//!
//! The model is Kubernetes' binding of a PersistentVolume to one claim
//! (`claimRef`: a volume has at most one claim, and a released volume goes
//! to another claim only by an explicit act) and Crossplane's
//! `external-name` (the external object is named by the managed resource
//! that holds it). A remote deployment is identified by its control plane
//! (base URL and workspace, [`PlaneId`]) and its id, or by its name before
//! an id exists. An AgentDeployment *holds* the deployment whose id it
//! records (`status.deploymentId` or the `agentserver.dev/deployment-id`
//! annotation), or the one it is creating (the create-pending marker and
//! its remote name); it *claims* the one `spec.deploymentId` names or, naming
//! none, the one with its remote name on its plane.

use crate::api::control_plane::AgentControlPlane;
use crate::api::deployment::{
    AgentDeployment, AgentDeploymentSpec, CREATE_PENDING_ANNOTATION, DEPLOYMENT_ID_ANNOTATION,
    HANDED_OVER_FROM_ANNOTATION, Source,
};

/// Where a remote deployment lives: the control plane's base URL (no
/// trailing `/`) and the workspace id (lowercase).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PlaneId {
    /// Base URL of the control plane, as requests are sent to it.
    pub url: String,
    /// Workspace (tenant) id.
    pub workspace: String,
}

impl PlaneId {
    /// The identity of the plane at `url` (a trailing `/` ignored) and
    /// `workspace` (case ignored).
    pub fn new(url: &str, workspace: &str) -> Self {
        Self {
            url: url.trim().trim_end_matches('/').to_owned(),
            workspace: workspace.trim().to_ascii_lowercase(),
        }
    }
}

impl std::fmt::Display for PlaneId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (workspace {})", self.url, self.workspace)
    }
}

/// The fields of a spec that the control plane cannot change on an
/// existing deployment, as the spec writes them (docs/control-plane-api.md
/// "Deployment", the immutable fields): two objects whose fixed fields
/// differ cannot both describe one deployment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fixed {
    /// `source`.
    pub source: String,
    /// `sourceConfig.repoUrl`, without case, a trailing `/` or `.git`.
    pub repo_url: Option<String>,
    /// `sourceConfig.integrationId` (lowercase), or `integrationRef` as
    /// `ref:<name>`.
    pub integration: Option<String>,
    /// `sourceConfig.deploymentType`, unset counting as `dev` for `github`.
    pub deployment_type: Option<String>,
    /// `sourceConfig.listenerId` (lowercase), or `listenerRef` as
    /// `ref:<name>`.
    pub listener: Option<String>,
    /// `sourceConfig.listenerConfig.k8sNamespace`.
    pub listener_namespace: Option<String>,
}

impl Fixed {
    /// The fixed fields of `spec`.
    pub fn of(spec: &AgentDeploymentSpec) -> Self {
        let sc = &spec.source_config;
        let repo_url = sc.repo_url.as_deref().map(|u| {
            let u = u.trim().trim_end_matches('/');
            u.strip_suffix(".git").unwrap_or(u).to_ascii_lowercase()
        });
        let integration = sc
            .integration_id
            .as_deref()
            .map(str::to_ascii_lowercase)
            .or_else(|| {
                sc.integration_ref
                    .as_ref()
                    .map(|r| format!("ref:{}", r.name))
            });
        let deployment_type = sc
            .deployment_type
            .map(|t| t.as_str().to_owned())
            .or_else(|| {
                (spec.source == Source::Github)
                    .then(|| super::adoption::GITHUB_DEFAULT_TYPE.to_owned())
            });
        let listener = sc
            .listener_id
            .as_deref()
            .map(str::to_ascii_lowercase)
            .or_else(|| sc.listener_ref.as_ref().map(|r| format!("ref:{}", r.name)));
        Self {
            source: spec.source.as_str().to_owned(),
            repo_url,
            integration,
            deployment_type,
            listener,
            listener_namespace: sc
                .listener_config
                .as_ref()
                .and_then(|l| l.k8s_namespace.clone()),
        }
    }

    /// The spec paths of the fields that differ between `self` and `other`.
    pub fn differences(&self, other: &Self) -> Vec<&'static str> {
        let pairs: [(&'static str, bool); 6] = [
            ("source", self.source == other.source),
            ("sourceConfig.repoUrl", self.repo_url == other.repo_url),
            (
                "sourceConfig.integrationId/integrationRef",
                self.integration == other.integration,
            ),
            (
                "sourceConfig.deploymentType",
                self.deployment_type == other.deployment_type,
            ),
            (
                "sourceConfig.listenerId/listenerRef",
                self.listener == other.listener,
            ),
            (
                "sourceConfig.listenerConfig",
                self.listener_namespace == other.listener_namespace,
            ),
        ];
        pairs
            .into_iter()
            .filter(|(_, same)| !same)
            .map(|(f, _)| f)
            .collect()
    }
}

/// What one AgentDeployment of the cluster holds and claims.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Claim {
    /// `namespace/name` of the object.
    pub key: String,
    /// Its control plane; `None` when it cannot be told (its
    /// AgentControlPlane is missing).
    pub plane: Option<PlaneId>,
    /// The id of the deployment it holds: `status.deploymentId`, or the id
    /// annotation.
    pub holds: Option<String>,
    /// `spec.deploymentId`: the deployment it asks to adopt.
    pub adopts: Option<String>,
    /// Its remote name (`spec.name`, default `metadata.name`).
    pub name: String,
    /// It carries the create-pending marker: a create of `name` may have
    /// happened.
    pub creating: bool,
    /// It is being deleted (`metadata.deletionTimestamp`).
    pub deleting: bool,
    /// Its preview expired (`status.expiredAt`): it holds nothing any more.
    pub expired: bool,
    /// Its `metadata.creationTimestamp` (RFC 3339; empty when unknown).
    pub created: String,
    /// The fields of its spec the control plane cannot change.
    pub fixed: Fixed,
    /// The `agentserver.dev/handed-over-from` annotation: the object that
    /// handed it the deployment of its id annotation.
    pub handed_over_from: Option<String>,
}

impl Claim {
    /// Neither being deleted nor expired.
    pub fn live(&self) -> bool {
        !self.deleting && !self.expired
    }

    /// True when this object holds the remote deployment `id`, or, holding
    /// no id, is creating a deployment named `name` on `plane`.
    pub fn holds_remote(&self, plane: &PlaneId, id: &str, name: Option<&str>) -> bool {
        if self.expired {
            return false;
        }
        match &self.holds {
            Some(held) => held.eq_ignore_ascii_case(id),
            None => {
                self.creating
                    && name.is_some_and(|n| n == self.name)
                    && self.plane.as_ref() == Some(plane)
            }
        }
    }

    /// True when this object, holding nothing else, asks for the remote
    /// deployment `id` named `name` on `plane`: by `spec.deploymentId`, or,
    /// naming none, by its remote name.
    pub fn claims_remote(&self, plane: &PlaneId, id: &str, name: &str) -> bool {
        if self
            .holds
            .as_deref()
            .is_some_and(|h| !h.eq_ignore_ascii_case(id))
        {
            return false;
        }
        match &self.adopts {
            Some(wanted) => wanted.eq_ignore_ascii_case(id),
            None => self.name == name && self.plane.as_ref() == Some(plane),
        }
    }
}

/// Who else holds a remote deployment, as the claims show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holder<'a> {
    /// No other object of the cluster holds it.
    None,
    /// A live object holds it: a second owner is refused, naming it.
    Live(&'a Claim),
    /// An object being deleted holds it: it hands the deployment over to
    /// its claimant, or deletes it, in its deletion pass; wait for that.
    Releasing(&'a Claim),
}

/// The object of `claims` other than `me` (`namespace/name`) that holds the
/// remote deployment `id` (named `name`, when known, on `plane`): a live
/// one first, else one being deleted. An object being deleted that named
/// `me` as the one it hands over to ([`Claim::handed_over_from`] of `me`)
/// has let it go already and is not counted.
pub fn holder<'a>(
    claims: &'a [Claim],
    me: &Claim,
    plane: &PlaneId,
    id: &str,
    name: Option<&str>,
) -> Holder<'a> {
    let mut holders = claims
        .iter()
        .filter(|c| c.key != me.key && c.holds_remote(plane, id, name));
    let (live, releasing): (Vec<&Claim>, Vec<&Claim>) = holders.by_ref().partition(|c| c.live());
    if let Some(c) = live.into_iter().min_by(|a, b| a.key.cmp(&b.key)) {
        return Holder::Live(c);
    }
    match releasing
        .into_iter()
        .filter(|c| me.handed_over_from.as_deref() != Some(c.key.as_str()))
        .min_by(|a, b| a.key.cmp(&b.key))
    {
        Some(c) => Holder::Releasing(c),
        None => Holder::None,
    }
}

/// The object that takes over the remote deployment `id` (named `name`,
/// on `plane`) when its holder `from` is deleted: a live object other than
/// `from`, holding no other deployment, that claims it
/// ([`Claim::claims_remote`]). One that names the id in `spec.deploymentId`
/// comes first; one that claims it by name must have the holder's fixed
/// fields ([`Fixed`]), since the deployment cannot take others. Among
/// equals, the oldest object, then the first by `namespace/name`. `None`:
/// no object claims it, and the holder's `deletionPolicy` decides.
pub fn successor<'a>(
    claims: &'a [Claim],
    from: &Claim,
    plane: &PlaneId,
    id: &str,
    name: &str,
) -> Option<&'a Claim> {
    claims
        .iter()
        .filter(|c| c.key != from.key && c.live() && c.claims_remote(plane, id, name))
        .filter(|c| c.adopts.is_some() || c.fixed.differences(&from.fixed).is_empty())
        .min_by(|a, b| {
            let explicit = |c: &Claim| c.adopts.is_none();
            (explicit(a), a.created.as_str(), a.key.as_str()).cmp(&(
                explicit(b),
                b.created.as_str(),
                b.key.as_str(),
            ))
        })
}

/// The other live objects of `claims` that hold or claim the remote
/// deployment `id` (`namespace/name`, sorted): the writers a drift fight
/// of `me` may be with, when they are objects of the cluster.
pub fn others_on<'a>(claims: &'a [Claim], me: &str, id: &str) -> Vec<&'a str> {
    let mut keys: Vec<&str> = claims
        .iter()
        .filter(|c| c.key != me && c.live())
        .filter(|c| {
            c.holds
                .as_deref()
                .is_some_and(|h| h.eq_ignore_ascii_case(id))
                || c.adopts
                    .as_deref()
                    .is_some_and(|a| a.eq_ignore_ascii_case(id))
        })
        .map(|c| c.key.as_str())
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// The message of a refused adoption of the remote deployment `id`
/// (`name`) held by the live object `holder`.
pub fn held_message(id: &str, name: &str, holder: &str) -> String {
    format!(
        "remote deployment {id} ({name}) is held by AgentDeployment {holder}; a deployment has one owner, so nothing is sent. To move it to this resource, delete {holder}: it is then handed over to this resource instead of being deleted (the prune after a rename or a move does this); to keep both, give this one another spec.name"
    )
}

/// The message of a remote deployment whose holder `holder` is being
/// deleted: this resource waits for it to be handed over, or deleted.
pub fn releasing_message(id: &str, name: &str, holder: &str) -> String {
    format!(
        "remote deployment {id} ({name}) is held by AgentDeployment {holder}, which is being deleted; waiting for it to hand the deployment over to this resource (or to delete it, when this resource cannot take it)"
    )
}

/// The advice of a name conflict with the remote deployment `id` that no
/// object of the cluster holds: how to adopt it on purpose.
pub fn unheld_advice(id: &str) -> String {
    format!(
        "no AgentDeployment of this cluster holds it: to adopt it, set spec.adoptionPolicy: ByName (its fixed fields are compared first) or spec.deploymentId: {id}; or choose another spec.name"
    )
}

/// The remote name of an object: `spec.name`, default `metadata.name`.
pub fn remote_name<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    spec: &'a AgentDeploymentSpec,
) -> &'a str {
    spec.name
        .as_deref()
        .or(meta.name.as_deref())
        .unwrap_or_default()
}

/// The identity of the control plane an AgentControlPlane names; `None`
/// when its spec has no URL (admission refuses that).
pub fn plane_id(plane: &AgentControlPlane) -> Option<PlaneId> {
    Some(PlaneId::new(
        &plane.spec.base_url()?,
        &plane.spec.workspace_id,
    ))
}

/// The claim of an object (metadata, spec, the id its status holds, whether
/// it expired) on `plane`.
pub fn claim(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    spec: &AgentDeploymentSpec,
    status_id: Option<String>,
    expired: bool,
    plane: Option<PlaneId>,
) -> Claim {
    let annotations = meta.annotations.as_ref();
    let annotation = |k: &str| annotations.and_then(|a| a.get(k)).cloned();
    Claim {
        key: format!(
            "{}/{}",
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default()
        ),
        plane,
        holds: status_id.or_else(|| annotation(DEPLOYMENT_ID_ANNOTATION)),
        adopts: spec.deployment_id.clone(),
        name: remote_name(meta, spec).to_owned(),
        creating: annotations.is_some_and(|a| a.contains_key(CREATE_PENDING_ANNOTATION)),
        deleting: meta.deletion_timestamp.is_some(),
        expired,
        created: meta
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default(),
        fixed: Fixed::of(spec),
        handed_over_from: annotation(HANDED_OVER_FROM_ANNOTATION),
    }
}

/// The claim of `obj` (a whole object, as a pass has it) on `plane`.
pub fn claim_of(obj: &AgentDeployment, plane: Option<PlaneId>) -> Claim {
    let status = obj.status.as_ref();
    claim(
        &obj.metadata,
        &obj.spec,
        status.and_then(|s| s.deployment_id.clone()),
        status.is_some_and(|s| s.expired_at.is_some()),
        plane,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const X: &str = "0d5a2b1c-3e4f-4a5b-8c6d-7e8f9a0b1c2d";
    const Y: &str = "11111111-2222-4333-8444-555555555555";

    fn plane() -> PlaneId {
        PlaneId::new("https://api.host.langchain.com/", "WS-1")
    }

    fn claim(key: &str) -> Claim {
        Claim {
            key: key.into(),
            plane: Some(plane()),
            name: "agent".into(),
            created: "2026-11-01T00:00:00Z".into(),
            fixed: Fixed {
                source: "github".into(),
                repo_url: Some("https://github.com/acme/agent".into()),
                deployment_type: Some("dev".into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn holding(key: &str, id: &str) -> Claim {
        Claim {
            holds: Some(id.into()),
            ..claim(key)
        }
    }

    #[test]
    fn a_plane_is_its_url_without_a_trailing_slash_and_its_workspace_without_case() {
        assert_eq!(
            PlaneId::new("https://a.example/api-host/", "AB"),
            PlaneId::new("https://a.example/api-host", "ab")
        );
        assert_ne!(
            PlaneId::new("https://a.example", "ab"),
            PlaneId::new("https://b.example", "ab")
        );
    }

    #[test]
    fn the_holder_is_a_live_object_first_then_one_being_deleted() {
        let me = claim("ns/b");
        let deleting = Claim {
            deleting: true,
            ..holding("ns/a", X)
        };
        let live = holding("other/a", X);
        let expired = Claim {
            expired: true,
            ..holding("ns/c", X)
        };
        let creating = Claim {
            creating: true,
            ..claim("ns/d")
        };
        let p = plane();
        // (claims, remote name known, the holder: key and live)
        type Case<'a> = (Vec<Claim>, Option<&'a str>, Option<(&'a str, bool)>);
        let cases: Vec<Case> = vec![
            (vec![], Some("agent"), None),
            (vec![me.clone()], Some("agent"), None),
            (vec![expired.clone()], Some("agent"), None),
            (vec![holding("ns/e", Y)], Some("agent"), None),
            (
                vec![deleting.clone(), live.clone()],
                Some("agent"),
                Some(("other/a", true)),
            ),
            (vec![deleting.clone()], Some("agent"), Some(("ns/a", false))),
            (vec![creating.clone()], Some("agent"), Some(("ns/d", true))),
            (vec![creating.clone()], None, None),
        ];
        for (claims, name, want) in &cases {
            let got = match holder(claims, &me, &p, X, *name) {
                Holder::None => None,
                Holder::Live(c) => Some((c.key.as_str(), true)),
                Holder::Releasing(c) => Some((c.key.as_str(), false)),
            };
            assert_eq!(got, *want, "{claims:?} {name:?}");
        }
    }

    #[test]
    fn a_holder_that_handed_the_deployment_over_is_not_counted() {
        let me = Claim {
            handed_over_from: Some("ns/a".into()),
            ..holding("ns/b", X)
        };
        let deleting = Claim {
            deleting: true,
            ..holding("ns/a", X)
        };
        assert_eq!(
            holder(std::slice::from_ref(&deleting), &me, &plane(), X, None),
            Holder::None
        );
        let other = Claim {
            handed_over_from: Some("ns/z".into()),
            ..me
        };
        assert_eq!(
            holder(std::slice::from_ref(&deleting), &other, &plane(), X, None),
            Holder::Releasing(&deleting)
        );
    }

    #[test]
    fn a_creating_object_holds_only_its_name_on_its_plane() {
        let creating = Claim {
            creating: true,
            ..claim("ns/d")
        };
        assert!(creating.holds_remote(&plane(), X, Some("agent")));
        assert!(!creating.holds_remote(&plane(), X, Some("other")));
        assert!(!creating.holds_remote(&PlaneId::new("https://x", "ws-1"), X, Some("agent")));
        assert!(!claim("ns/e").holds_remote(&plane(), X, Some("agent")));
    }

    /// The key of the [`successor`] of `from` among `claims`, for
    /// deployment X named `agent` on [`plane`].
    fn successor_key(claims: &[Claim], from: &Claim) -> Option<String> {
        successor(claims, from, &plane(), X, "agent").map(|c| c.key.clone())
    }

    /// Claims that never succeed `from`, however old: another deployment
    /// type, holding another deployment, being deleted, on another plane,
    /// another name, and `from` itself.
    fn not_successors(from: &Claim) -> Vec<Claim> {
        let old = || "2020-01-01T00:00:00Z".to_owned();
        vec![
            Claim {
                fixed: Fixed {
                    deployment_type: Some("prod".into()),
                    ..from.fixed.clone()
                },
                created: old(),
                ..claim("ns/t")
            },
            Claim {
                created: old(),
                ..holding("ns/h", Y)
            },
            Claim {
                deleting: true,
                created: old(),
                ..claim("ns/g")
            },
            Claim {
                plane: Some(PlaneId::new("https://eu.api.host.langchain.com", "ws-1")),
                created: old(),
                ..claim("ns/e")
            },
            Claim {
                name: "other".into(),
                created: old(),
                ..claim("ns/r")
            },
            from.clone(),
        ]
    }

    #[test]
    fn the_successor_claims_by_id_first_then_by_name_with_the_same_fixed_fields_oldest_first() {
        let from = holding("ns/a", X);
        let by_name_old = Claim {
            created: "2026-10-01T00:00:00Z".into(),
            ..claim("ns/z")
        };
        let by_id = Claim {
            adopts: Some(X.to_uppercase()),
            created: "2026-11-20T00:00:00Z".into(),
            ..claim("other/c")
        };
        let mut all = not_successors(&from);
        assert_eq!(successor_key(&all, &from), None);
        all.push(claim("ns/b"));
        assert_eq!(successor_key(&all, &from), Some("ns/b".into()));
        all.push(by_name_old);
        assert_eq!(successor_key(&all, &from), Some("ns/z".into()));
        all.push(by_id);
        assert_eq!(successor_key(&all, &from), Some("other/c".into()));
    }

    /// An object that already holds this very deployment (two owners from
    /// before) is its successor too.
    #[test]
    fn an_object_holding_the_same_deployment_is_a_successor_too() {
        let from = holding("ns/a", X);
        let co_holder = holding("ns/co", X);
        assert_eq!(
            successor_key(std::slice::from_ref(&co_holder), &from),
            Some("ns/co".into())
        );
    }

    #[test]
    fn the_fixed_fields_are_compared_as_the_service_reads_them() {
        let spec =
            |v: serde_json::Value| -> AgentDeploymentSpec { serde_json::from_value(v).unwrap() };
        let a = Fixed::of(&spec(serde_json::json!({
            "source": "github",
            "sourceConfig": {"repoUrl": "https://github.com/Acme/Agent.git", "integrationId": "ABC"},
            "sourceRevisionConfig": {"repoRef": "main", "langgraphConfigPath": "langgraph.json"}
        })));
        let b = Fixed::of(&spec(serde_json::json!({
            "source": "github",
            "sourceConfig": {"repoUrl": "https://github.com/acme/agent/", "integrationId": "abc", "deploymentType": "dev"},
            "sourceRevisionConfig": {"repoRef": "v2", "langgraphConfigPath": "x.json"}
        })));
        assert_eq!(a.differences(&b), Vec::<&str>::new());
        let c = Fixed::of(&spec(serde_json::json!({
            "source": "github",
            "sourceConfig": {"repoUrl": "https://github.com/acme/other", "integrationRef": {"name": "acme"}, "deploymentType": "prod"},
            "sourceRevisionConfig": {"repoRef": "main", "langgraphConfigPath": "langgraph.json"}
        })));
        assert_eq!(
            a.differences(&c),
            vec![
                "sourceConfig.repoUrl",
                "sourceConfig.integrationId/integrationRef",
                "sourceConfig.deploymentType"
            ]
        );
    }

    #[test]
    fn the_other_writers_of_a_deployment_are_the_live_objects_that_hold_or_name_it() {
        let claims = vec![
            holding("ns/a", X),
            Claim {
                adopts: Some(X.into()),
                ..claim("b/b")
            },
            Claim {
                deleting: true,
                ..holding("ns/c", X)
            },
            holding("ns/d", Y),
        ];
        assert_eq!(others_on(&claims, "ns/a", X), vec!["b/b"]);
        assert_eq!(others_on(&claims, "x/x", X), vec!["b/b", "ns/a"]);
    }
}
