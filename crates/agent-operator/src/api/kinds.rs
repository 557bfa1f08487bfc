//! The registry of kinds: one row per kind the operator serves, in install
//! order. Everything else that lists kinds is produced from it or checked
//! against it: the CRDs ([`super::crds`], and `make generate`'s files in
//! `crds/` and the chart), the `kind` label values of the metrics
//! (`crate::metrics::KINDS`), the Argo CD health keys
//! (`deploy/argocd/argocd-cm.yaml`, written from `crds/`), and, by the
//! integration test `registry.rs`, the RBAC of every overlay and of the
//! chart, `kubectl get agents` (the category), the controllers the binary
//! runs and the reference docs. A new kind is one row here, its module, and
//! whatever that test names as missing.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use super::{
    AgentAssistant, AgentControlPlane, AgentCron, AgentDeployment, AgentListener,
    ClusterAgentControlPlane,
};

/// Where the objects of a kind live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// In a namespace (a Role can grant it).
    Namespaced,
    /// In the cluster (only a ClusterRole can grant it).
    Cluster,
}

/// One kind of the registry.
#[derive(Clone, Copy, Debug)]
pub struct Kind {
    /// The kind, e.g. `AgentDeployment` (the CRD's `spec.names.kind`, which
    /// a unit test checks).
    pub kind: &'static str,
    /// Where its objects live.
    pub scope: Scope,
    /// True when the operator holds a finalizer on its objects: its RBAC
    /// needs `patch` of the kind (the finalizer is added and removed by a
    /// patch), and an uninstall must delete its objects while the operator
    /// still runs.
    pub finalizer: bool,
    /// Its CustomResourceDefinition, as the Rust type derives it (before
    /// [`super::with_unobserved_status`]).
    pub crd: fn() -> CustomResourceDefinition,
}

/// Every kind, in install order: the planes before what uses them.
pub const KINDS: [Kind; 6] = [
    Kind {
        kind: "ClusterAgentControlPlane",
        scope: Scope::Cluster,
        finalizer: true,
        crd: ClusterAgentControlPlane::crd,
    },
    Kind {
        kind: "AgentControlPlane",
        scope: Scope::Namespaced,
        finalizer: true,
        crd: AgentControlPlane::crd,
    },
    Kind {
        kind: "AgentListener",
        scope: Scope::Namespaced,
        finalizer: false,
        crd: AgentListener::crd,
    },
    Kind {
        kind: "AgentDeployment",
        scope: Scope::Namespaced,
        finalizer: true,
        crd: AgentDeployment::crd,
    },
    Kind {
        kind: "AgentAssistant",
        scope: Scope::Namespaced,
        finalizer: true,
        crd: AgentAssistant::crd,
    },
    Kind {
        kind: "AgentCron",
        scope: Scope::Namespaced,
        finalizer: true,
        crd: AgentCron::crd,
    },
];

/// The names of [`KINDS`], in its order (the `kind` label values).
pub const NAMES: [&str; KINDS.len()] = names();

const fn names() -> [&'static str; KINDS.len()] {
    let mut out = [""; KINDS.len()];
    let mut i = 0;
    while i < KINDS.len() {
        out[i] = KINDS[i].kind;
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_row_is_its_crd() {
        for k in KINDS {
            let crd = (k.crd)();
            assert_eq!(crd.spec.names.kind, k.kind);
            assert_eq!(
                crd.spec.scope,
                match k.scope {
                    Scope::Namespaced => "Namespaced",
                    Scope::Cluster => "Cluster",
                }
            );
            assert_eq!(
                crd.spec.names.categories.as_deref(),
                Some(&["agents".to_owned()][..]),
                "{}: in kubectl get agents",
                k.kind
            );
        }
        assert_eq!(NAMES.len(), KINDS.len());
        assert!(NAMES.iter().all(|n| !n.is_empty()));
    }
}
