//! The operator's own check of an AgentDeployment spec before any remote
//! call ([`check`]), for rules the schema cannot express. The patterns and
//! rule lists it applies live in [`super::rules`].

use std::collections::BTreeSet;

use super::deployment::{AgentDeploymentSpec, Source};
use super::resource_spec;
use super::rules::{
    DEPLOYMENT_TYPE_IMAGE_MESSAGE, GITHUB_ONLY_MESSAGE, RESERVED_NAMES, SCALE_TO_ZERO_MESSAGE,
    SCALE_TO_ZERO_TYPES, SELF_HOSTED_ONLY_NAMES, check_build_command,
};

/// What the operator checks itself before any remote call, for rules the
/// schema cannot express or for objects stored before a rule existed (the
/// API server does not validate stored objects again). Returns a message for
/// `Stalled`/`InvalidSpec` naming the field and the rule.
///
/// Errors: the first broken rule, as a human-readable message.
pub fn check(remote_name: &str, spec: &AgentDeploymentSpec) -> Result<(), String> {
    check_remote_name(remote_name)?;
    check_source_config(spec)?;
    let with_listener =
        spec.source_config.listener_id.is_some() || spec.source_config.listener_ref.is_some();
    let secrets = check_secrets(spec, with_listener)?;
    check_source_fields(spec)?;
    check_secret_references(spec, with_listener, &secrets)?;
    match spec.verify.as_ref().and_then(|v| v.suite.as_ref()) {
        Some(suite) => suite.validate(),
        None => Ok(()),
    }
}

/// The remote deployment name: 1-63 lowercase letters, digits and `-`.
fn check_remote_name(remote_name: &str) -> Result<(), String> {
    let name_ok = !remote_name.is_empty()
        && remote_name.len() <= 63
        && remote_name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !name_ok {
        return Err(format!(
            "the remote deployment name {remote_name:?} must be 1-63 lowercase letters, digits \
             and '-' (the control plane refuses other names); set spec.name"
        ));
    }
    Ok(())
}

/// `sourceConfig`: its `resourceSpec` ([`resource_spec::check`]), its
/// install and build commands, at most one of `integrationId` and
/// `integrationRef`.
fn check_source_config(spec: &AgentDeploymentSpec) -> Result<(), String> {
    let sc = &spec.source_config;
    if let Some(rs) = &sc.resource_spec {
        resource_spec::check(rs)?;
    }
    for (field, command) in [
        ("sourceConfig.installCommand", &sc.install_command),
        ("sourceConfig.buildCommand", &sc.build_command),
    ] {
        if let Some(command) = command {
            check_build_command(field, command)?;
        }
    }
    if sc.integration_id.is_some() && sc.integration_ref.is_some() {
        return Err(
            "set at most one of sourceConfig.integrationId and sourceConfig.integrationRef".into(),
        );
    }
    Ok(())
}

/// `secrets`: each name an environment variable name, not reserved, not
/// for self-hosted data planes only unless `with_listener`, listed once.
/// Returns the names.
fn check_secrets(
    spec: &AgentDeploymentSpec,
    with_listener: bool,
) -> Result<BTreeSet<&str>, String> {
    let mut seen = BTreeSet::new();
    for s in &spec.secrets {
        let valid = regex_lite_env_name(&s.name);
        if !valid {
            return Err(format!(
                "secret name {:?} is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)",
                s.name
            ));
        }
        if RESERVED_NAMES.contains(&s.name.as_str()) {
            return Err(format!(
                "secret name {} is reserved by the platform for its own use",
                s.name
            ));
        }
        if !with_listener && SELF_HOSTED_ONLY_NAMES.contains(&s.name.as_str()) {
            return Err(format!(
                "secret name {} is allowed only on a self-hosted data plane (set \
                 sourceConfig.listenerId or listenerRef)",
                s.name
            ));
        }
        if !seen.insert(s.name.as_str()) {
            return Err(format!("secret name {} is listed twice", s.name));
        }
    }
    Ok(seen)
}

/// `secretReferences`: only for `external_docker` on a self-hosted data
/// plane (`with_listener`); each name an environment variable name, not
/// reserved, not among the `secrets` names, listed once.
fn check_secret_references(
    spec: &AgentDeploymentSpec,
    with_listener: bool,
    secrets: &BTreeSet<&str>,
) -> Result<(), String> {
    if !spec.secret_references.is_empty() {
        if spec.source != Source::ExternalDocker {
            return Err("secretReferences are only for source external_docker".into());
        }
        if !with_listener {
            return Err("secretReferences need a self-hosted data plane: set \
                 sourceConfig.listenerId or listenerRef"
                .into());
        }
    }
    let mut seen_refs = BTreeSet::new();
    for r in &spec.secret_references {
        if !regex_lite_env_name(&r.name) {
            return Err(format!(
                "secretReferences name {:?} is not an environment variable name \
                 ([A-Za-z_][A-Za-z0-9_]*)",
                r.name
            ));
        }
        if RESERVED_NAMES.contains(&r.name.as_str()) {
            return Err(format!(
                "secretReferences name {} is reserved by the platform for its own use",
                r.name
            ));
        }
        if secrets.contains(r.name.as_str()) {
            return Err(format!(
                "{} is both in secrets and in secretReferences; each environment variable \
                 comes from one place",
                r.name
            ));
        }
        if !seen_refs.insert(r.name.as_str()) {
            return Err(format!("secretReferences name {} is listed twice", r.name));
        }
    }
    Ok(())
}

/// The rules about which source may set which field, and scale to zero
/// (the CEL rules `DEPLOYMENT_TYPE_IMAGE_RULE`, `github_only_rule` and
/// `SCALE_TO_ZERO_RULE` of [`super::rules`]), for objects stored before them.
///
/// Errors: the rule's message.
fn check_source_fields(spec: &AgentDeploymentSpec) -> Result<(), String> {
    let (sc, rc) = (&spec.source_config, &spec.source_revision_config);
    if spec.source == Source::ExternalDocker {
        if sc.deployment_type.is_some() {
            return Err(DEPLOYMENT_TYPE_IMAGE_MESSAGE.into());
        }
        let github_only = sc.build_on_push.is_some()
            || sc.install_command.is_some()
            || sc.build_command.is_some()
            || rc.repo_ref.is_some()
            || rc.langgraph_config_path.is_some();
        if github_only {
            return Err(GITHUB_ONLY_MESSAGE.into());
        }
    }
    let min_scale = sc
        .resource_spec
        .as_ref()
        .and_then(|rs| rs.get("minScale"))
        .and_then(serde_json::Value::as_f64);
    let zero_type = sc
        .deployment_type
        .is_some_and(|t| SCALE_TO_ZERO_TYPES.contains(&t.as_str()));
    if min_scale == Some(0.0) && !zero_type {
        return Err(SCALE_TO_ZERO_MESSAGE.into());
    }
    Ok(())
}

/// True when `name` matches [`super::rules::ENV_NAME_PATTERN`].
fn regex_lite_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preflight_names_the_broken_rule() {
        let spec: AgentDeploymentSpec = serde_json::from_value(serde_json::json!({
            "source": "external_docker",
            "sourceRevisionConfig": {"imageUri": "ghcr.io/acme/agent:1"},
            "secrets": [{"name": "PORT", "value": "1"}]
        }))
        .unwrap();
        assert!(check("agent", &spec).unwrap_err().contains("self-hosted"));
        assert!(check("my.agent", &spec).unwrap_err().contains("spec.name"));
        let mut ok = spec.clone();
        ok.secrets[0].name = "OPENAI_API_KEY".into();
        assert_eq!(check("agent", &ok), Ok(()));
        ok.secrets.push(ok.secrets[0].clone());
        assert!(check("agent", &ok).unwrap_err().contains("twice"));
        ok.secrets[1].name = "LANGCHAIN_API_KEY".into();
        assert!(check("agent", &ok).unwrap_err().contains("reserved"));
        ok.secrets[1].name = "1X".into();
        assert!(check("agent", &ok).unwrap_err().contains("environment"));
        ok.secrets.pop();
        ok.source_config.build_command = Some("npm run build; curl x".into());
        assert!(
            check("agent", &ok)
                .unwrap_err()
                .starts_with("sourceConfig.buildCommand ")
        );
    }

    /// An AgentDeploymentSpec from its JSON.
    fn spec_of(v: serde_json::Value) -> AgentDeploymentSpec {
        serde_json::from_value(v).unwrap()
    }

    /// An image may set none of the fields of a GitHub source, nor scale to
    /// zero.
    #[test]
    fn preflight_checks_which_source_sets_what_and_scale_to_zero() {
        let image = |sc: serde_json::Value, rc: serde_json::Value| {
            let mut rc = rc;
            rc["imageUri"] = "ghcr.io/acme/agent:1".into();
            spec_of(
                serde_json::json!({"source": "external_docker", "sourceConfig": sc,
                                    "sourceRevisionConfig": rc}),
            )
        };
        let none = serde_json::json!({});
        assert_eq!(check("agent", &image(none.clone(), none.clone())), Ok(()));
        for (sc, rc) in [
            (serde_json::json!({"buildOnPush": false}), none.clone()),
            (
                serde_json::json!({"installCommand": "npm ci"}),
                none.clone(),
            ),
            (
                serde_json::json!({"buildCommand": "npm run build"}),
                none.clone(),
            ),
            (none.clone(), serde_json::json!({"repoRef": "main"})),
            (
                none.clone(),
                serde_json::json!({"langgraphConfigPath": "langgraph.json"}),
            ),
        ] {
            let err = check("agent", &image(sc.clone(), rc.clone())).unwrap_err();
            assert_eq!(err, GITHUB_ONLY_MESSAGE, "{sc} {rc}");
        }
        let zero = serde_json::json!({"resourceSpec": {"minScale": 0}});
        assert_eq!(
            check("agent", &image(zero.clone(), none.clone())),
            Err(SCALE_TO_ZERO_MESSAGE.into())
        );
    }

    /// A GitHub source scales to zero only with a `*_zero` deployment type.
    #[test]
    fn preflight_lets_github_scale_to_zero_only_with_a_zero_deployment_type() {
        let github = |ty: Option<&str>, min: u32| {
            let mut sc = serde_json::json!({"repoUrl": "https://github.com/acme/agent",
                "integrationId": "6f1c2a3e-4b5d-4e6f-8a7b-9c0d1e2f3a4b",
                "resourceSpec": {"minScale": min}});
            if let Some(ty) = ty {
                sc["deploymentType"] = ty.into();
            }
            spec_of(serde_json::json!({"source": "github", "sourceConfig": sc,
                "sourceRevisionConfig": {"repoRef": "main", "langgraphConfigPath": "langgraph.json"}}))
        };
        for (ty, min, ok) in [
            (None, 0, false),
            (Some("dev"), 0, false),
            (Some("prod"), 0, false),
            (Some("dev_zero"), 0, true),
            (Some("dev_free_zero"), 0, true),
            (None, 1, true),
            (Some("prod"), 2, true),
        ] {
            assert_eq!(
                check("agent", &github(ty, min)).is_ok(),
                ok,
                "{ty:?} minScale {min}"
            );
        }
    }

    #[test]
    fn preflight_checks_secret_references() {
        let spec = |extra: serde_json::Value| -> AgentDeploymentSpec {
            let mut v = serde_json::json!({
                "source": "external_docker",
                "sourceConfig": {"listenerId": "6f1c2a3e-4b5d-4e6f-8a7b-9c0d1e2f3a4b"},
                "sourceRevisionConfig": {"imageUri": "ghcr.io/acme/agent:1"},
                "secrets": [{"name": "LOG_LEVEL", "value": "info"}],
                "secretReferences": [
                    {"name": "OPENAI_API_KEY", "secretName": "agent-env", "secretKey": "openai"}
                ]
            });
            for (k, val) in extra.as_object().unwrap() {
                v[k] = val.clone();
            }
            serde_json::from_value(v).unwrap()
        };
        assert_eq!(check("agent", &spec(serde_json::json!({}))), Ok(()));
        let no_listener = spec(serde_json::json!({"sourceConfig": {}}));
        assert!(
            check("agent", &no_listener)
                .unwrap_err()
                .contains("self-hosted")
        );
        let github = spec(serde_json::json!({
            "source": "github",
            "sourceRevisionConfig": {"repoRef": "main"}
        }));
        assert!(
            check("agent", &github)
                .unwrap_err()
                .contains("external_docker")
        );
        let both = spec(serde_json::json!({
            "secrets": [{"name": "OPENAI_API_KEY", "value": "x"}]
        }));
        assert!(check("agent", &both).unwrap_err().contains("both"));
        let twice = spec(serde_json::json!({"secretReferences": [
            {"name": "A", "secretName": "s", "secretKey": "k"},
            {"name": "A", "secretName": "s", "secretKey": "j"}
        ]}));
        assert!(check("agent", &twice).unwrap_err().contains("twice"));
        let reserved = spec(serde_json::json!({"secretReferences": [
            {"name": "POSTGRES_URI", "secretName": "s", "secretKey": "k"}
        ]}));
        assert!(check("agent", &reserved).unwrap_err().contains("reserved"));
    }
}
