//! Business rules of create and patch, as pure functions: the checks that
//! answer 400/403 and the merge of a PATCH body into a deployment.
//!
//! Sources: docs/control-plane-api.md "Deployment" (immutable fields, `[a-z0-9-]` names, the
//! `build_on_push`/tag rule), "Requests" (Create, Patch), "Self-hosted
//! placement and listeners". Emulator choices are noted on each function.

use serde::Deserialize;
use uuid::Uuid;

use super::errors::ApiError;
use super::shape::{Quirk, ServiceShape};
use control_plane_wire::types::{
    DeploymentCreate, Listener, ListenerConfig, SecretReference, SecretValue, SourceConfig,
    SourceRevisionConfig,
};

/// Default `deployment_type` when a create omits it (emulator choice).
pub(crate) const DEFAULT_DEPLOYMENT_TYPE: &str = "dev";

/// The listener facts of the caller's workspace.
#[derive(Clone, Debug)]
pub(crate) struct WorkspacePolicy<'a> {
    pub workspace_id: &'a str,
    /// Self-hosted enterprise: listeners allowed.
    pub enterprise: bool,
    /// Creates must name a listener.
    pub requires_listener: bool,
    /// The workspace's listeners.
    pub listeners: Vec<&'a Listener>,
    /// The ids of the workspace's GitHub integrations (the seeded ones,
    /// `--integration`); empty: any `integration_id` is accepted.
    pub integrations: Vec<Uuid>,
}

/// 403 for listener use in a workspace that is not self-hosted enterprise
/// (docs/control-plane-api.md "Self-hosted placement and listeners": names the workspace).
pub(crate) fn listeners_forbidden(workspace_id: &str) -> ApiError {
    ApiError::forbidden(format!(
        "Listeners are not allowed for workspace {workspace_id}: \
         the organization is not on a self-hosted enterprise plan."
    ))
}

/// A deployment name must match `^[a-z0-9-]+$` (docs/control-plane-api.md "Deployment": official
/// clients keep names to `[a-z0-9-]`); the emulator answers 400 otherwise.
pub(crate) fn check_name(name: &str) -> Result<(), ApiError> {
    let ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "Invalid deployment name '{name}': it must match ^[a-z0-9-]+$ \
             (lowercase letters, digits and '-')."
        )))
    }
}

/// `build_on_push` must be false when `repo_ref` is a tag (docs/control-plane-api.md "Deployment").
pub(crate) fn check_tag_build_on_push(
    repo_ref: Option<&str>,
    build_on_push: Option<bool>,
) -> Result<(), ApiError> {
    if build_on_push == Some(true) && repo_ref.is_some_and(|r| r.starts_with("refs/tags/")) {
        return Err(ApiError::bad_request(
            "'build_on_push' must be false when 'repo_ref' is a tag (refs/tags/...).",
        ));
    }
    Ok(())
}

fn required(value: Option<&str>, field: &str, source: &str) -> Result<(), ApiError> {
    if value.is_some_and(|v| !v.trim().is_empty()) {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "'{field}' is required for source '{source}'."
        )))
    }
}

/// Checks a create body that passed the 422 validation:
/// - the name (400, [`check_name`]);
/// - `github` needs `source_config.repo_url`,
///   `source_revision_config.repo_ref` and `langgraph_config_path` (400;
///   docs/control-plane-api.md "Deployment": `langgraph_config_path` required; `repo_url`
///   and `repo_ref`
///   are emulator choices), `external_docker` needs `image_uri` (400);
/// - the tag/`build_on_push` rule (400);
/// - listener placement: a listener in a non-enterprise workspace (403), an
///   unknown listener (400), a namespace missing or not among the listener's
///   (400; a listener whose namespaces are null accepts any namespace), a
///   `listener_config` without `listener_id` (400), no listener in a workspace
///   that requires one (400, detail contains `listener_id' is required`);
/// - a `github` `integration_id` that is not one of the workspace's
///   integrations (400 `Integration ID <id> not found.`, as for an unknown
///   listener: the project's API notes do not say what the service answers,
///   so the emulator answers an unknown id of the same body the same way);
///   checked only in a workspace with seeded integrations, so that a test
///   that seeds none may use any id.
pub(crate) fn check_create(
    req: &DeploymentCreate,
    ws: &WorkspacePolicy<'_>,
) -> Result<(), ApiError> {
    check_name(&req.name)?;
    let rc = &req.source_revision_config;
    let sc = &req.source_config;
    match req.source.as_str() {
        "github" => {
            required(sc.repo_url.as_deref(), "source_config.repo_url", "github")?;
            required(
                rc.repo_ref.as_deref(),
                "source_revision_config.repo_ref",
                "github",
            )?;
            required(
                rc.langgraph_config_path.as_deref(),
                "source_revision_config.langgraph_config_path",
                "github",
            )?;
        }
        other => required(
            rc.image_uri.as_deref(),
            "source_revision_config.image_uri",
            other,
        )?,
    }
    check_integration(req, ws)?;
    check_tag_build_on_push(rc.repo_ref.as_deref(), sc.build_on_push)?;
    check_scale_to_zero(sc)?;
    check_build_commands(sc)?;
    check_secret_names(&req.secrets, sc.listener_id.is_some())?;
    check_secret_references(
        &req.secret_references,
        &req.source,
        sc.listener_id.is_some(),
        &req.secrets,
    )?;
    check_listener(sc, ws)
}

/// 400 for a `github` create whose `integration_id` is not one of
/// `ws.integrations` (none seeded: accepted); see [`check_create`].
fn check_integration(req: &DeploymentCreate, ws: &WorkspacePolicy<'_>) -> Result<(), ApiError> {
    let Some(id) = req.source_config.integration_id.as_deref() else {
        return Ok(());
    };
    if req.source != "github" || ws.integrations.is_empty() {
        return Ok(());
    }
    match Uuid::parse_str(id) {
        Ok(wanted) if ws.integrations.contains(&wanted) => Ok(()),
        _ => Err(ApiError::bad_request(format!(
            "Integration ID {id} not found."
        ))),
    }
}

/// The create rules of the real service by source
/// ([`Quirk::CreateRules`], [`Quirk::ExternalDeploymentType`]; source:
/// docs/control-plane-api.md, "Requests as the official clients send
/// them"): a `github` create carries `source_config.deployment_type` and
/// `build_on_push` (400 naming the missing one otherwise); an
/// `external_docker` create carries a `resource_spec` object (`{}` is fine)
/// and no `deployment_type` (400 each).
pub(crate) fn check_create_shape(
    req: &DeploymentCreate,
    shape: &ServiceShape,
) -> Result<(), ApiError> {
    let sc = &req.source_config;
    if shape.has(Quirk::CreateRules) {
        if req.source == "github" {
            if sc.deployment_type.is_none() {
                return Err(ApiError::bad_request(
                    "'source_config.deployment_type' is required for source 'github'.",
                ));
            }
            if sc.build_on_push.is_none() {
                return Err(ApiError::bad_request(
                    "'source_config.build_on_push' is required for source 'github'.",
                ));
            }
        } else if !matches!(sc.resource_spec, Some(serde_json::Value::Object(_))) {
            return Err(ApiError::bad_request(format!(
                "'source_config.resource_spec' is required for source '{}'.",
                req.source
            )));
        }
    }
    if shape.has(Quirk::ExternalDeploymentType)
        && req.source == "external_docker"
        && sc.deployment_type.is_some()
    {
        return Err(ApiError::bad_request(
            "'source_config.deployment_type' is not allowed for source 'external_docker'.",
        ));
    }
    Ok(())
}

/// `resource_spec.min_scale` 0 only with a `deployment_type` that may scale
/// to zero, `dev_zero` or `dev_free_zero` (400 otherwise; a deployment
/// without a type, such as `external_docker`, cannot). docs/control-plane-api.md
/// "Deployment": the Terraform provider allows `min_scale` 0 only for
/// `dev_zero`; the answer's wording is an emulator choice.
pub(crate) fn check_scale_to_zero(sc: &SourceConfig) -> Result<(), ApiError> {
    let min_scale = sc
        .resource_spec
        .as_ref()
        .and_then(|rs| rs.get("min_scale"))
        .and_then(serde_json::Value::as_f64);
    let zero_type = matches!(
        sc.deployment_type.as_deref(),
        Some("dev_zero" | "dev_free_zero")
    );
    if min_scale == Some(0.0) && !zero_type {
        return Err(ApiError::bad_request(
            "'resource_spec.min_scale' 0 is allowed only for deployment_type 'dev_zero' or 'dev_free_zero'.",
        ));
    }
    Ok(())
}

/// `install_command` and `build_command` must follow
/// [`control_plane_wire::rules::BUILD_COMMAND_PATTERN`] (at most 1024 bytes) → 400
/// naming the field and the rule. docs/control-plane-api.md "Build commands" (seen only in the
/// official CLI): the CLI refuses "shell control characters and the like";
/// whether and how the service refuses them is not known, so refusing here
/// (with the operator's rule) is an emulator choice.
pub(crate) fn check_build_commands(sc: &SourceConfig) -> Result<(), ApiError> {
    for (field, command) in [
        ("source_config.install_command", &sc.install_command),
        ("source_config.build_command", &sc.build_command),
    ] {
        if let Some(c) = command {
            control_plane_wire::rules::check_build_command(&format!("'{field}'"), c)
                .map_err(|e| ApiError::bad_request(format!("Invalid command: {e}.")))?;
        }
    }
    Ok(())
}

/// `secret_references` (docs/control-plane-api.md "Deployment": newer, `external_docker` only,
/// Kubernetes Secret keys in the data plane). Emulator choices, each a 400
/// naming the rule: a non-empty list on a deployment whose source is not
/// `external_docker`, or without a listener (the Secrets live in the
/// self-hosted data plane's cluster); a reserved name; a name listed twice;
/// a name also in `secrets`.
pub(crate) fn check_secret_references(
    references: &[SecretReference],
    source: &str,
    with_listener: bool,
    secrets: &[SecretValue],
) -> Result<(), ApiError> {
    use control_plane_wire::rules::RESERVED_NAMES;
    if references.is_empty() {
        return Ok(());
    }
    if source != "external_docker" {
        return Err(ApiError::bad_request(format!(
            "'secret_references' are supported only for source 'external_docker', not '{source}'."
        )));
    }
    if !with_listener {
        return Err(ApiError::bad_request(
            "'secret_references' require a self-hosted data plane: set 'source_config.listener_id'.",
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for r in references {
        if RESERVED_NAMES.contains(&r.name.as_str()) {
            return Err(ApiError::bad_request(format!(
                "Secret name '{}' is reserved by the platform.",
                r.name
            )));
        }
        if !seen.insert(r.name.as_str()) {
            return Err(ApiError::bad_request(format!(
                "Secret reference name '{}' is listed twice.",
                r.name
            )));
        }
        if secrets.iter().any(|s| s.name == r.name) {
            return Err(ApiError::bad_request(format!(
                "'{}' is both a secret and a secret reference.",
                r.name
            )));
        }
    }
    Ok(())
}

/// Secret names the platform reserves (docs/control-plane-api.md "Reserved variable names": the
/// official CLI drops them because the service reserves them) → 400 naming
/// the variable; the self-hosted-only names are accepted only on a
/// deployment with a listener. The exact wording of the real answer is not
/// known; the emulator names the rule.
pub(crate) fn check_secret_names(
    secrets: &[SecretValue],
    with_listener: bool,
) -> Result<(), ApiError> {
    use control_plane_wire::rules::{RESERVED_NAMES, SELF_HOSTED_ONLY_NAMES};
    for s in secrets {
        if RESERVED_NAMES.contains(&s.name.as_str()) {
            return Err(ApiError::bad_request(format!(
                "Secret name '{}' is reserved by the platform.",
                s.name
            )));
        }
        if !with_listener && SELF_HOSTED_ONLY_NAMES.contains(&s.name.as_str()) {
            return Err(ApiError::bad_request(format!(
                "Secret name '{}' is allowed only on a self-hosted data plane.",
                s.name
            )));
        }
    }
    Ok(())
}

fn check_listener(sc: &SourceConfig, ws: &WorkspacePolicy<'_>) -> Result<(), ApiError> {
    let namespace = sc
        .listener_config
        .as_ref()
        .and_then(|c| c.k8s_namespace.as_deref());
    let Some(listener_id) = sc.listener_id.as_deref() else {
        if ws.requires_listener {
            return Err(ApiError::bad_request(format!(
                "'listener_id' is required: workspace {} deploys to a self-hosted data plane.",
                ws.workspace_id
            )));
        }
        if namespace.is_some() {
            return Err(ApiError::bad_request(
                "'listener_config' requires 'listener_id'.",
            ));
        }
        return Ok(());
    };
    if !ws.enterprise {
        return Err(listeners_forbidden(ws.workspace_id));
    }
    let wanted = Uuid::parse_str(listener_id).ok();
    let listener = ws
        .listeners
        .iter()
        .find(|l| Uuid::parse_str(&l.id).ok() == wanted && wanted.is_some())
        .ok_or_else(|| ApiError::bad_request(format!("Listener ID {listener_id} not found.")))?;
    let Some(allowed) = &listener.compute_config.k8s_namespaces else {
        return Ok(());
    };
    match namespace {
        None => Err(ApiError::bad_request(format!(
            "'listener_config.k8s_namespace' is required with listener {listener_id}: \
             one of [{}].",
            allowed.join(", ")
        ))),
        Some(ns) if !allowed.iter().any(|a| a == ns) => Err(ApiError::bad_request(format!(
            "k8s_namespace '{ns}' is not configured for listener {listener_id}: one of [{}].",
            allowed.join(", ")
        ))),
        Some(_) => Ok(()),
    }
}

/// A validated PATCH body (docs/control-plane-api.md "Requests", Patch): every field optional;
/// `null` means "not sent".
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct PatchBody {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    pub source_config: Option<SourceConfig>,
    #[serde(default)]
    pub source_revision_config: Option<SourceRevisionConfig>,
    #[serde(default)]
    pub secrets: Option<Vec<SecretValue>>,
    #[serde(default)]
    pub secret_references: Option<Vec<SecretReference>>,
    /// The name shown in the UI; `null` leaves it, an empty one is 422
    /// (checked by the route), and it cannot be cleared once set.
    #[serde(default)]
    pub display_name: Option<String>,
}

/// What a deployment looks like before the patch.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Current<'a> {
    pub name: &'a str,
    pub source: &'a str,
    pub source_config: &'a SourceConfig,
    pub revision_config: &'a SourceRevisionConfig,
    pub secrets: &'a [SecretValue],
    pub secret_references: &'a [SecretReference],
}

/// The effect of a PATCH.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PatchEffect {
    /// The merged `source_config`.
    pub source_config: SourceConfig,
    /// `Some` replaces the secrets.
    pub secrets: Option<Vec<SecretValue>>,
    /// `Some` replaces the secret references.
    pub secret_references: Option<Vec<SecretReference>>,
    /// `Some` creates a revision with this configuration.
    pub new_revision: Option<SourceRevisionConfig>,
}

/// 400 naming `field` when `new` is sent with a value other than
/// `current`; the same value, or none, is accepted.
fn immutable<T: PartialEq + ?Sized>(
    field: &str,
    current: Option<&T>,
    new: Option<&T>,
) -> Result<(), ApiError> {
    match new {
        Some(n) if current != Some(n) => Err(ApiError::bad_request(format!(
            "'{field}' cannot be changed after the deployment is created."
        ))),
        _ => Ok(()),
    }
}

/// A sent id as a uuid, or the text that does not parse as one (so two
/// spellings of one uuid compare equal).
fn as_uuid(s: Option<&String>) -> Option<Result<Uuid, String>> {
    s.map(|s| Uuid::parse_str(s).map_err(|_| s.clone()))
}

/// Applies the rules of docs/control-plane-api.md "Requests", Patch:
/// - immutable fields (`name`, `source`, `source_config.integration_id`,
///   `repo_url`, `deployment_type`, `listener_id`,
///   `listener_config.k8s_namespace`) sent with a different value → 400
///   naming the field; the same value is accepted;
/// - partial `source_config` merged field by field, except `resource_spec`,
///   replaced whole; `custom_url` is kept for `github` (the service sets it;
///   emulator choice: ignored rather than refused);
/// - a new revision when `source_revision_config` has a non-null `repo_ref`,
///   `langgraph_config_path` or `image_uri`, or `resource_spec` is non-null,
///   or `secrets` is non-null and non-empty (an empty list means unchanged);
///   its configuration is the latest one merged with the sent fields;
/// - non-empty `secrets` replace the whole list (emulator choice, consistent
///   with "cannot remove all secrets with `[]`");
/// - non-null `secret_references` replace the whole list, `[]` included
///   (the "`[]` means unchanged" fact is about `secrets`), and create a
///   revision like `secrets` (emulator choice: no source says); they
///   are checked by [`check_secret_references`] against the merged secrets;
/// - the tag/`build_on_push` rule on the merged values (400);
/// - `install_command` and `build_command` merged, checked
///   ([`check_build_commands`], 400) and starting a revision (emulator
///   choice).
pub(crate) fn plan_patch(cur: Current<'_>, patch: &PatchBody) -> Result<PatchEffect, ApiError> {
    immutable("name", Some(cur.name), patch.name.as_deref())?;
    immutable("source", Some(cur.source), patch.source.as_deref())?;
    let mut sc = cur.source_config.clone();
    let mut new_revision = false;
    if let Some(p) = &patch.source_config {
        check_immutable_source_config(cur.source_config, p)?;
        new_revision |= merge_source_config(&mut sc, cur.source, p);
        check_build_commands(&sc)?;
    }
    let mut rc = cur.revision_config.clone();
    if let Some(p) = &patch.source_revision_config {
        new_revision |= merge_revision_config(&mut rc, p);
    }
    let secrets = patch.secrets.clone().filter(|s| !s.is_empty());
    if let Some(list) = &secrets {
        check_secret_names(list, sc.listener_id.is_some())?;
    }
    new_revision |= secrets.is_some();
    let secret_references = patch.secret_references.clone();
    if secret_references.is_some() || secrets.is_some() {
        check_secret_references(
            secret_references
                .as_deref()
                .unwrap_or(cur.secret_references),
            cur.source,
            sc.listener_id.is_some(),
            secrets.as_deref().unwrap_or(cur.secrets),
        )?;
    }
    new_revision |= secret_references.is_some();
    check_tag_build_on_push(rc.repo_ref.as_deref(), sc.build_on_push)?;
    check_scale_to_zero(&sc)?;
    rc.repo_commit_sha = None;
    Ok(PatchEffect {
        source_config: sc,
        secrets,
        secret_references,
        new_revision: new_revision.then_some(rc),
    })
}

/// The immutable fields of a PATCH's `source_config` (`integration_id`,
/// `repo_url`, `deployment_type`, `listener_id`,
/// `listener_config.k8s_namespace`): 400 naming the first one sent with a
/// value other than `current`'s (uuids compared as uuids).
fn check_immutable_source_config(current: &SourceConfig, p: &SourceConfig) -> Result<(), ApiError> {
    immutable(
        "source_config.integration_id",
        as_uuid(current.integration_id.as_ref()).as_ref(),
        as_uuid(p.integration_id.as_ref()).as_ref(),
    )?;
    immutable(
        "source_config.repo_url",
        current.repo_url.as_deref(),
        p.repo_url.as_deref(),
    )?;
    immutable(
        "source_config.deployment_type",
        current.deployment_type.as_deref(),
        p.deployment_type.as_deref(),
    )?;
    immutable(
        "source_config.listener_id",
        as_uuid(current.listener_id.as_ref()).as_ref(),
        as_uuid(p.listener_id.as_ref()).as_ref(),
    )?;
    let ns = |c: &Option<ListenerConfig>| c.as_ref().and_then(|c| c.k8s_namespace.clone());
    immutable(
        "source_config.listener_config",
        ns(&current.listener_config).as_deref(),
        ns(&p.listener_config).as_deref(),
    )
}

/// Merges the mutable fields a PATCH's `source_config` sends into `sc`:
/// `build_on_push`; `custom_url` unless the source is `github`;
/// `resource_spec` whole; `install_command` and `build_command`. Returns
/// whether the merge starts a revision (`resource_spec` or a command sent).
fn merge_source_config(sc: &mut SourceConfig, source: &str, p: &SourceConfig) -> bool {
    let mut new_revision = false;
    if let Some(b) = p.build_on_push {
        sc.build_on_push = Some(b);
    }
    if source != "github"
        && let Some(u) = &p.custom_url
    {
        sc.custom_url = Some(u.clone());
    }
    if let Some(spec) = &p.resource_spec {
        sc.resource_spec = Some(spec.clone());
        new_revision = true;
    }
    // Emulator choice (no source says): a build setting takes
    // effect in a new build, so a command sent starts a revision.
    for (dst, src) in [
        (&mut sc.install_command, &p.install_command),
        (&mut sc.build_command, &p.build_command),
    ] {
        if let Some(c) = src {
            *dst = Some(c.clone());
            new_revision = true;
        }
    }
    new_revision
}

/// Merges the fields a PATCH's `source_revision_config` sends (`repo_ref`,
/// `langgraph_config_path`, `image_uri`) into `rc`; returns whether any
/// was sent (each starts a revision).
fn merge_revision_config(rc: &mut SourceRevisionConfig, p: &SourceRevisionConfig) -> bool {
    let mut new_revision = false;
    for (dst, src) in [
        (&mut rc.repo_ref, &p.repo_ref),
        (&mut rc.langgraph_config_path, &p.langgraph_config_path),
        (&mut rc.image_uri, &p.image_uri),
    ] {
        if let Some(v) = src {
            *dst = Some(v.clone());
            new_revision = true;
        }
    }
    new_revision
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;
    use control_plane_wire::types::ListenerComputeConfig;
    use serde_json::json;

    fn create(source: &str) -> DeploymentCreate {
        serde_json::from_value(json!({
            "name": "my-app-1",
            "source": source,
            "source_config": {"repo_url": "https://github.com/o/r", "deployment_type": "dev"},
            "source_revision_config": {"repo_ref": "main", "langgraph_config_path": "langgraph.json",
                                       "image_uri": "docker.io/o/app:1"},
            "secrets": []
        }))
        .unwrap()
    }

    fn cloud() -> WorkspacePolicy<'static> {
        WorkspacePolicy {
            workspace_id: "ws-1",
            enterprise: false,
            requires_listener: false,
            listeners: vec![],
            integrations: vec![],
        }
    }

    fn detail(e: &ApiError) -> String {
        e.body()["detail"].as_str().unwrap_or_default().to_owned()
    }

    #[test]
    fn an_unknown_integration_id_is_refused_where_integrations_are_known() {
        let known = Uuid::parse_str("3f0d1c2e-0000-4000-8000-000000000001").unwrap();
        let ws = WorkspacePolicy {
            integrations: vec![known],
            ..cloud()
        };
        let with = |id: &str| {
            let mut r = create("github");
            r.source_config.integration_id = Some(id.to_owned());
            r
        };
        assert!(check_create(&with(&known.to_string()), &ws).is_ok());
        assert!(
            check_create(&with(&known.to_string().to_uppercase()), &ws).is_ok(),
            "a uuid compares by value"
        );
        let unknown = "3f0d1c2e-0000-4000-8000-0000000000ff";
        let e = check_create(&with(unknown), &ws).unwrap_err();
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        assert_eq!(detail(&e), format!("Integration ID {unknown} not found."));
        assert!(
            check_create(&with(unknown), &cloud()).is_ok(),
            "no integration seeded: any id"
        );
        assert!(check_create(&create("github"), &ws).is_ok(), "no id sent");
    }

    /// A reference of the variable `name` to the key `k` of the Secret
    /// `agent-env`.
    fn secret_ref(name: &str) -> SecretReference {
        SecretReference {
            name: name.into(),
            secret_name: "agent-env".into(),
            secret_key: "k".into(),
        }
    }

    #[test]
    fn secret_references_need_external_docker_and_a_listener() {
        let ok = check_secret_references(&[secret_ref("A")], "external_docker", true, &[]);
        assert!(ok.is_ok());
        for (refs, source, listener, secrets, want) in [
            (
                vec![secret_ref("A")],
                "github",
                true,
                vec![],
                "external_docker",
            ),
            (
                vec![secret_ref("A")],
                "external_docker",
                false,
                vec![],
                "listener_id",
            ),
            (
                vec![secret_ref("A"), secret_ref("A")],
                "external_docker",
                true,
                vec![],
                "twice",
            ),
            (
                vec![secret_ref("POSTGRES_URI")],
                "external_docker",
                true,
                vec![],
                "reserved",
            ),
            (
                vec![secret_ref("A")],
                "external_docker",
                true,
                vec![SecretValue::new("A", "v")],
                "both",
            ),
        ] {
            let e = check_secret_references(&refs, source, listener, &secrets).unwrap_err();
            assert_eq!(e.status(), StatusCode::BAD_REQUEST);
            assert!(detail(&e).contains(want), "{want}: {}", detail(&e));
        }
        assert!(check_secret_references(&[], "github", false, &[]).is_ok());
    }

    #[test]
    fn a_patch_replaces_the_secret_references_and_github_refuses_them() {
        // A PATCH replaces the list (`[]` included) and makes a revision; on
        // a github deployment it is refused.
        let sc = SourceConfig {
            listener_id: Some("6f1c2a3e-4b5d-4e6f-8a7b-9c0d1e2f3a4b".into()),
            ..Default::default()
        };
        let rc = SourceRevisionConfig::default();
        let current = [secret_ref("A")];
        let cur = Current {
            name: "app",
            source: "external_docker",
            source_config: &sc,
            revision_config: &rc,
            secrets: &[],
            secret_references: &current,
        };
        let eff = plan_patch(cur, &patch(json!({"secret_references": []}))).unwrap();
        assert_eq!(eff.secret_references, Some(vec![]));
        assert!(eff.new_revision.is_some());
        let eff = plan_patch(
            cur,
            &patch(json!({"secrets": [{"name": "A", "value": "v"}]})),
        );
        assert!(detail(&eff.unwrap_err()).contains("both"));
        let github = Current {
            source: "github",
            ..cur
        };
        let e = plan_patch(
            github,
            &patch(json!({"secret_references": [
                {"name": "B", "secret_name": "s", "secret_key": "k"}
            ]})),
        )
        .unwrap_err();
        assert!(detail(&e).contains("external_docker"));
    }

    #[test]
    fn names_must_be_lowercase_dns_like() {
        assert!(check_name("my-app-1").is_ok());
        for bad in ["", "My-App", "my_app", "app.1", "app 1", "ü"] {
            let e = check_name(bad).unwrap_err();
            assert_eq!(e.status(), StatusCode::BAD_REQUEST, "{bad}");
            assert!(detail(&e).contains("^[a-z0-9-]+$"));
        }
    }

    #[test]
    fn required_fields_depend_on_the_source() {
        assert!(check_create(&create("github"), &cloud()).is_ok());
        let mut r = create("github");
        r.source_revision_config.langgraph_config_path = None;
        assert!(detail(&check_create(&r, &cloud()).unwrap_err()).contains("langgraph_config_path"));
        let mut r = create("external_docker");
        assert!(check_create(&r, &cloud()).is_ok());
        r.source_revision_config.image_uri = None;
        assert!(detail(&check_create(&r, &cloud()).unwrap_err()).contains("image_uri"));
    }

    #[test]
    fn only_the_zero_types_scale_to_zero() {
        let mut r = create("github");
        r.source_config.resource_spec = Some(json!({"min_scale": 0}));
        for (ty, ok) in [
            ("dev", false),
            ("prod", false),
            ("dev_zero", true),
            ("dev_free_zero", true),
        ] {
            r.source_config.deployment_type = Some(ty.into());
            assert_eq!(check_create(&r, &cloud()).is_ok(), ok, "{ty}");
        }
        r.source_config.deployment_type = Some("dev".into());
        r.source_config.resource_spec = Some(json!({"min_scale": 1}));
        assert!(check_create(&r, &cloud()).is_ok());
        let mut image = create("external_docker");
        image.source_config.resource_spec = Some(json!({"min_scale": 0}));
        assert!(detail(&check_create(&image, &cloud()).unwrap_err()).contains("min_scale"));
    }

    #[test]
    fn tags_cannot_build_on_push() {
        let mut r = create("github");
        r.source_revision_config.repo_ref = Some("refs/tags/v1".into());
        r.source_config.build_on_push = Some(true);
        assert!(detail(&check_create(&r, &cloud()).unwrap_err()).contains("build_on_push"));
    }

    #[test]
    fn listener_placement_rules() {
        let listener = Listener {
            id: "6f1c2a3e-0000-4000-8000-000000000009".into(),
            compute_type: "k8s".into(),
            compute_id: "c".into(),
            compute_config: ListenerComputeConfig {
                k8s_namespaces: Some(vec!["team-a".into()]),
            },
            version: None,
            created_at: String::new(),
            updated_at: String::new(),
        };
        let ws = WorkspacePolicy {
            workspace_id: "ws-sh",
            enterprise: true,
            requires_listener: true,
            listeners: vec![&listener],
            integrations: vec![],
        };
        let r = create("external_docker");
        let e = check_create(&r, &ws).unwrap_err();
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        assert!(detail(&e).contains("listener_id' is required"));

        let mut r = create("external_docker");
        r.source_config.listener_id = Some(listener.id.to_uppercase());
        r.source_config.listener_config = Some(ListenerConfig {
            k8s_namespace: Some("team-a".into()),
        });
        assert!(check_create(&r, &ws).is_ok());
        r.source_config.listener_config = Some(ListenerConfig {
            k8s_namespace: Some("team-b".into()),
        });
        assert!(detail(&check_create(&r, &ws).unwrap_err()).contains("team-b"));
        r.source_config.listener_id = Some(Uuid::new_v4().to_string());
        assert!(detail(&check_create(&r, &ws).unwrap_err()).contains("not found"));

        let e = check_create(&r, &cloud()).unwrap_err();
        assert_eq!(e.status(), StatusCode::FORBIDDEN);
        assert!(detail(&e).contains("ws-1"));
    }

    fn current_config() -> (SourceConfig, SourceRevisionConfig) {
        (
            SourceConfig {
                repo_url: Some("https://github.com/o/r".into()),
                deployment_type: Some("dev".into()),
                build_on_push: Some(false),
                custom_url: Some("http://x/agents/1".into()),
                resource_spec: Some(json!({"min_scale": 1, "cpu": 1})),
                ..Default::default()
            },
            SourceRevisionConfig {
                repo_ref: Some("main".into()),
                langgraph_config_path: Some("langgraph.json".into()),
                repo_commit_sha: Some("abc".into()),
                ..Default::default()
            },
        )
    }

    fn patch(v: serde_json::Value) -> PatchBody {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn partial_source_config_merges_without_a_revision() {
        let (sc, rc) = current_config();
        let cur = Current {
            name: "app",
            source: "github",
            source_config: &sc,
            revision_config: &rc,
            secrets: &[],
            secret_references: &[],
        };
        let eff = plan_patch(
            cur,
            &patch(json!({"source_config": {"build_on_push": true, "custom_url": "http://evil"}})),
        )
        .unwrap();
        assert_eq!(eff.source_config.build_on_push, Some(true));
        assert_eq!(
            eff.source_config.custom_url, sc.custom_url,
            "github custom_url is kept"
        );
        assert_eq!(eff.source_config.resource_spec, sc.resource_spec);
        assert_eq!(eff.new_revision, None);
        assert_eq!(eff.secrets, None);
    }

    #[test]
    fn revision_triggers() {
        let (sc, rc) = current_config();
        let cur = Current {
            name: "app",
            source: "github",
            source_config: &sc,
            revision_config: &rc,
            secrets: &[],
            secret_references: &[],
        };
        let eff = plan_patch(
            cur,
            &patch(json!({"source_revision_config": {"repo_ref": "dev"}})),
        )
        .unwrap();
        let new = eff.new_revision.unwrap();
        assert_eq!(new.repo_ref.as_deref(), Some("dev"));
        assert_eq!(new.langgraph_config_path.as_deref(), Some("langgraph.json"));
        assert_eq!(new.repo_commit_sha, None);

        let eff = plan_patch(
            cur,
            &patch(json!({"source_revision_config": {"repo_ref": null}})),
        )
        .unwrap();
        assert_eq!(
            eff.new_revision, None,
            "null fields do not create a revision"
        );

        let eff = plan_patch(
            cur,
            &patch(json!({"source_config": {"resource_spec": {"max_scale": 3}}})),
        )
        .unwrap();
        assert!(eff.new_revision.is_some());
        assert_eq!(
            eff.source_config.resource_spec,
            Some(json!({"max_scale": 3})),
            "resource_spec is replaced whole"
        );

        let eff = plan_patch(cur, &patch(json!({"secrets": []}))).unwrap();
        assert_eq!(eff.new_revision, None, "an empty list means unchanged");
        assert_eq!(eff.secrets, None);

        let eff = plan_patch(
            cur,
            &patch(json!({"secrets": [{"name": "A", "value": "b"}]})),
        )
        .unwrap();
        assert!(eff.new_revision.is_some());
        assert_eq!(eff.secrets.unwrap().len(), 1);
    }

    #[test]
    fn immutable_fields_are_named() {
        let (sc, rc) = current_config();
        let cur = Current {
            name: "app",
            source: "github",
            source_config: &sc,
            revision_config: &rc,
            secrets: &[],
            secret_references: &[],
        };
        for (body, field) in [
            (json!({"name": "other"}), "'name'"),
            (json!({"source": "external_docker"}), "'source'"),
            (
                json!({"source_config": {"repo_url": "https://github.com/o/x"}}),
                "repo_url",
            ),
            (
                json!({"source_config": {"deployment_type": "prod"}}),
                "deployment_type",
            ),
            (
                json!({"source_config": {"integration_id": Uuid::new_v4()}}),
                "integration_id",
            ),
            (
                json!({"source_config": {"listener_id": Uuid::new_v4()}}),
                "listener_id",
            ),
            (
                json!({"source_config": {"listener_config": {"k8s_namespace": "x"}}}),
                "listener_config",
            ),
        ] {
            let e = plan_patch(cur, &patch(body)).unwrap_err();
            assert_eq!(e.status(), StatusCode::BAD_REQUEST);
            assert!(detail(&e).contains(field), "{field}: {}", detail(&e));
        }
        // Sending the same values is fine.
        let same = json!({"name": "app", "source": "github",
                          "source_config": {"repo_url": "https://github.com/o/r", "deployment_type": "dev"}});
        assert!(plan_patch(cur, &patch(same)).is_ok());
    }

    #[test]
    fn tag_rule_applies_to_merged_values() {
        let (sc, rc) = current_config();
        let cur = Current {
            name: "app",
            source: "github",
            source_config: &sc,
            revision_config: &rc,
            secrets: &[],
            secret_references: &[],
        };
        let e = plan_patch(
            cur,
            &patch(json!({"source_config": {"build_on_push": true},
                          "source_revision_config": {"repo_ref": "refs/tags/v2"}})),
        )
        .unwrap_err();
        assert!(detail(&e).contains("build_on_push"));
    }
}
