//! Applying plain manifests (e.g. the RBAC of `deploy/`) and deriving
//! kubeconfigs that impersonate another identity, so that tests run a
//! program with exactly the permissions a manifest grants.

use std::path::Path;

use kube::Api;
use kube::api::{DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::config::Kubeconfig;
use kube::discovery::Scope;

use super::EnvTestError;
use super::crds::FIELD_MANAGER;

/// The identity a kubeconfig from [`impersonating_kubeconfig`] acts as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Impersonation {
    /// User name, e.g. `system:serviceaccount:<namespace>:<name>`.
    pub user: String,
    /// Groups, e.g. `system:serviceaccounts`, `system:authenticated`.
    pub groups: Vec<String>,
}

impl Impersonation {
    /// The ServiceAccount `name` of `namespace`, with the groups the API
    /// server gives a ServiceAccount token: `system:serviceaccounts`,
    /// `system:serviceaccounts:<namespace>` and `system:authenticated`.
    pub fn service_account(namespace: &str, name: &str) -> Self {
        Self {
            user: format!("system:serviceaccount:{namespace}:{name}"),
            groups: vec![
                "system:serviceaccounts".to_owned(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".to_owned(),
            ],
        }
    }
}

/// The kubeconfig `text` with every user impersonating `who` (kubeconfig
/// `as:` and `as-groups:`, i.e. the `Impersonate-User` and
/// `Impersonate-Group` headers): the credentials stay those of `text`
/// (which must be allowed to impersonate, e.g. `system:masters`), the
/// permissions become those of `who`.
///
/// Errors: [`EnvTestError::Kubeconfig`] when `text` is not a kubeconfig.
pub fn impersonating_kubeconfig(text: &str, who: &Impersonation) -> Result<String, EnvTestError> {
    let mut config = Kubeconfig::from_yaml(text).map_err(EnvTestError::Kubeconfig)?;
    for named in &mut config.auth_infos {
        if let Some(auth) = named.auth_info.as_mut() {
            auth.impersonate = Some(who.user.clone());
            auth.impersonate_groups = Some(who.groups.clone());
        }
    }
    yaml_serde::to_string(&config).map_err(|e| EnvTestError::Io {
        context: "rendering an impersonating kubeconfig".to_owned(),
        source: std::io::Error::other(e),
    })
}

/// Server-side applies (field manager [`FIELD_MANAGER`], forced) every
/// document of the YAML file `path`, like `kubectl apply -n <namespace>`:
/// namespaced objects without `metadata.namespace` go to `namespace`;
/// cluster-scoped ones are applied as they are. The scope of each kind is
/// looked up by API discovery.
///
/// Returns `Kind namespace/name` (or `Kind name`) of each applied object, in
/// file order.
///
/// Errors: [`EnvTestError::Io`] when the file cannot be read,
/// [`EnvTestError::Manifest`] when a document is not an object with
/// `apiVersion` and `kind`, [`EnvTestError::Kube`] when discovery or an
/// apply fails.
pub async fn apply_manifest_file(
    client: &kube::Client,
    path: &Path,
    namespace: &str,
) -> Result<Vec<String>, EnvTestError> {
    let text = std::fs::read_to_string(path)
        .map_err(EnvTestError::io(format!("reading {}", path.display())))?;
    apply_manifests(client, path, &text, namespace).await
}

/// [`apply_manifest_file`] for manifests already in memory; `path` only
/// names them in errors.
///
/// Errors: see [`apply_manifest_file`].
pub async fn apply_manifests(
    client: &kube::Client,
    path: &Path,
    text: &str,
    namespace: &str,
) -> Result<Vec<String>, EnvTestError> {
    use serde::Deserialize;
    let manifest_err = |source| EnvTestError::Manifest {
        path: path.to_owned(),
        source,
    };
    let mut applied = Vec::new();
    for document in yaml_serde::Deserializer::from_str(text) {
        let value = yaml_serde::Value::deserialize(document).map_err(manifest_err)?;
        if value.is_null() {
            continue;
        }
        let obj: DynamicObject = yaml_serde::from_value(value).map_err(manifest_err)?;
        applied.push(apply_object(client, path, obj, namespace).await?);
    }
    Ok(applied)
}

/// Server-side applies one document `obj` of `path` (see
/// [`apply_manifest_file`]): its kind's scope by API discovery, a
/// namespaced object without a namespace in `namespace`. Returns
/// `Kind namespace/name` (or `Kind name`).
///
/// Errors: [`EnvTestError::Manifest`] without `apiVersion` and `kind`, or
/// with an `apiVersion` that does not parse; [`EnvTestError::Kube`] when
/// discovery or the apply fails.
async fn apply_object(
    client: &kube::Client,
    path: &Path,
    mut obj: DynamicObject,
    namespace: &str,
) -> Result<String, EnvTestError> {
    let manifest_err = |source| EnvTestError::Manifest {
        path: path.to_owned(),
        source,
    };
    let types = obj.types.clone().ok_or_else(|| {
        manifest_err(serde::de::Error::custom(
            "a document without apiVersion and kind",
        ))
    })?;
    let gvk = GroupVersionKind::try_from(&types).map_err(|e| {
        manifest_err(serde::de::Error::custom(format!(
            "apiVersion {}: {e}",
            types.api_version
        )))
    })?;
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(EnvTestError::kube(format!("discovering {}", types.kind)))?;
    let name = obj.metadata.name.clone().unwrap_or_default();
    let (api, applied): (Api<DynamicObject>, String) = match caps.scope {
        Scope::Namespaced => {
            let ns = obj
                .metadata
                .namespace
                .get_or_insert_with(|| namespace.to_owned())
                .clone();
            (
                Api::namespaced_with(client.clone(), &ns, &resource),
                format!("{} {ns}/{name}", types.kind),
            )
        }
        Scope::Cluster => (
            Api::all_with(client.clone(), &resource),
            format!("{} {name}", types.kind),
        ),
    };
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&obj),
    )
    .await
    .map_err(EnvTestError::kube(format!(
        "applying {} {name} from {}",
        types.kind,
        path.display()
    )))?;
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECONFIG: &str = "apiVersion: v1
kind: Config
clusters:
- name: envtest
  cluster:
    server: https://127.0.0.1:6443
users:
- name: envtest-admin
  user:
    client-certificate-data: Y2VydA==
    client-key-data: a2V5
contexts:
- name: envtest
  context: {cluster: envtest, user: envtest-admin}
current-context: envtest
";

    #[test]
    fn impersonating_kubeconfig_sets_as_and_as_groups() {
        let who = Impersonation::service_account("ops", "agent-operator");
        let text = impersonating_kubeconfig(KUBECONFIG, &who).unwrap();
        let yaml: yaml_serde::Value = yaml_serde::from_str(&text).unwrap();
        let user = &yaml["users"][0]["user"];
        assert_eq!(user["as"], "system:serviceaccount:ops:agent-operator");
        assert_eq!(
            user["as-groups"],
            yaml_serde::to_value([
                "system:serviceaccounts",
                "system:serviceaccounts:ops",
                "system:authenticated"
            ])
            .unwrap()
        );
        assert_eq!(user["client-key-data"], "a2V5", "the credentials stay");
        assert_eq!(yaml["current-context"], "envtest");
    }
}
