//! Installing CustomResourceDefinitions into a test environment.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, ResourceExt};

use super::EnvTestError;

/// Field manager of the server-side apply that installs CRDs.
pub const FIELD_MANAGER: &str = "envtest";

/// How long [`TestEnv::install_crds`](super::TestEnv::install_crds) waits for each CRD to become `Established`, and then for
/// all of them to appear in the OpenAPI v3 document.
pub const ESTABLISHED_TIMEOUT: Duration = Duration::from_secs(30);

/// Reads every `*.yaml` / `*.yml` file directly in `dir` (sorted by name) and
/// parses each non-empty YAML document as a `CustomResourceDefinition`.
///
/// An empty directory yields an empty list.
///
/// Errors: [`EnvTestError::Io`] when `dir` or a file cannot be read,
/// [`EnvTestError::Manifest`] on invalid YAML, [`EnvTestError::NotACrd`] when a
/// document has another `kind`.
pub fn read_crds_from_dir(dir: &Path) -> Result<Vec<CustomResourceDefinition>, EnvTestError> {
    let entries = std::fs::read_dir(dir).map_err(EnvTestError::io(format!(
        "reading CRD directory {}",
        dir.display()
    )))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.extension()
                    .is_some_and(|ext| ext == "yaml" || ext == "yml")
        })
        .collect();
    files.sort();
    let mut crds = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path)
            .map_err(EnvTestError::io(format!("reading {}", path.display())))?;
        crds.extend(parse_crds(&path, &text)?);
    }
    Ok(crds)
}

/// Parses the CRDs of one (possibly multi-document) YAML file; `path` is for errors only.
fn parse_crds(path: &Path, text: &str) -> Result<Vec<CustomResourceDefinition>, EnvTestError> {
    use serde::Deserialize;
    let manifest_err = |source| EnvTestError::Manifest {
        path: path.to_owned(),
        source,
    };
    let mut crds = Vec::new();
    for (index, document) in yaml_serde::Deserializer::from_str(text).enumerate() {
        let value = yaml_serde::Value::deserialize(document).map_err(manifest_err)?;
        if value.is_null() {
            continue;
        }
        let kind = value
            .get("kind")
            .and_then(|k| k.as_str())
            .unwrap_or("<none>");
        if kind != "CustomResourceDefinition" {
            return Err(EnvTestError::NotACrd {
                path: path.to_owned(),
                index,
                kind: kind.to_owned(),
            });
        }
        crds.push(yaml_serde::from_value(value).map_err(manifest_err)?);
    }
    Ok(crds)
}

/// Server-side applies `crds` (field manager [`FIELD_MANAGER`], forced) and waits
/// until each is `Established` and served in `/openapi/v3` (for `kubectl explain`).
///
/// Returns the names of the CRDs, in order.
///
/// Errors: [`EnvTestError::Kube`] when an apply fails, [`EnvTestError::Wait`]
/// when a watch fails, [`EnvTestError::CrdNotEstablished`] /
/// [`EnvTestError::CrdNotPublished`] on timeout (see [`ESTABLISHED_TIMEOUT`]).
pub(crate) async fn install(
    client: kube::Client,
    crds: &[CustomResourceDefinition],
) -> Result<Vec<String>, EnvTestError> {
    let api: Api<CustomResourceDefinition> = Api::all(client);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut names = Vec::with_capacity(crds.len());
    for crd in crds {
        let name = crd.name_any();
        let mut crd = crd.clone();
        // Server-side apply refuses these fields in the request body.
        crd.metadata.resource_version = None;
        crd.metadata.managed_fields = None;
        crd.status = None;
        api.patch(&name, &params, &Patch::Apply(&crd))
            .await
            .map_err(EnvTestError::kube(format!("applying CRD {name}")))?;
        names.push(name);
    }
    for name in &names {
        let established = await_condition(api.clone(), name, conditions::is_crd_established());
        match tokio::time::timeout(ESTABLISHED_TIMEOUT, established).await {
            Ok(Ok(_)) => tracing::debug!(crd = %name, "established"),
            Ok(Err(source)) => {
                return Err(EnvTestError::Wait {
                    name: name.clone(),
                    source,
                });
            }
            Err(_) => {
                return Err(EnvTestError::CrdNotEstablished {
                    name: name.clone(),
                    timeout: ESTABLISHED_TIMEOUT,
                });
            }
        }
    }
    wait_for_openapi(&api.into_client(), crds).await?;
    Ok(names)
}

/// The `<group>/<version>` of every served version of `crds`, sorted, deduplicated.
fn served_group_versions(crds: &[CustomResourceDefinition]) -> Vec<String> {
    let mut gvs: Vec<String> = crds
        .iter()
        .flat_map(|crd| {
            crd.spec
                .versions
                .iter()
                .filter(|v| v.served)
                .map(|v| format!("{}/{}", crd.spec.group, v.name))
        })
        .collect();
    gvs.sort();
    gvs.dedup();
    gvs
}

/// Waits until the OpenAPI v3 document lists every served group-version of
/// `crds` (it lags `Established` by a second or two; `kubectl explain` needs it).
///
/// Errors: [`EnvTestError::Kube`] when `/openapi/v3` cannot be read,
/// [`EnvTestError::CrdNotPublished`] on timeout.
async fn wait_for_openapi(
    client: &kube::Client,
    crds: &[CustomResourceDefinition],
) -> Result<(), EnvTestError> {
    let wanted = served_group_versions(crds);
    if wanted.is_empty() {
        return Ok(());
    }
    let deadline = tokio::time::Instant::now() + ESTABLISHED_TIMEOUT;
    loop {
        let request = http::Request::get("/openapi/v3")
            .body(Vec::new())
            .expect("a static request is valid");
        let text = client
            .request_text(request)
            .await
            .map_err(EnvTestError::kube("reading /openapi/v3"))?;
        let index: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        let missing: Vec<&String> = wanted
            .iter()
            .filter(|gv| index["paths"].get(format!("apis/{gv}")).is_none())
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(EnvTestError::CrdNotPublished {
                group_versions: missing.into_iter().cloned().collect(),
                timeout: ESTABLISHED_TIMEOUT,
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_multi_document_files_and_skips_empty_documents() {
        let text = "---\n\
apiVersion: apiextensions.k8s.io/v1\n\
kind: CustomResourceDefinition\n\
metadata:\n  name: foos.example.com\n\
spec:\n  group: example.com\n  names: {kind: Foo, plural: foos}\n  scope: Namespaced\n  versions: []\n\
---\n\
---\n\
apiVersion: apiextensions.k8s.io/v1\n\
kind: CustomResourceDefinition\n\
metadata:\n  name: bars.example.com\n\
spec:\n  group: example.com\n  names: {kind: Bar, plural: bars}\n  scope: Namespaced\n  versions: []\n";
        let crds = parse_crds(Path::new("x.yaml"), text).unwrap();
        let names: Vec<_> = crds.iter().map(|c| c.name_any()).collect();
        assert_eq!(names, ["foos.example.com", "bars.example.com"]);
    }

    #[test]
    fn rejects_documents_that_are_not_crds() {
        let err = parse_crds(
            Path::new("x.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
        )
        .unwrap_err();
        assert!(
            matches!(err, EnvTestError::NotACrd { ref kind, index: 0, .. } if kind == "ConfigMap"),
            "{err}"
        );
    }
}
