//! Adoption that tells the truth: the fields the control plane cannot change
//! on an existing deployment (source, repository, integration, type,
//! listener, name), compared between the desired deployment and a remote
//! one about to be adopted. A difference can never be converged by a PATCH,
//! so the operator stops with `Stalled`/`AdoptionMismatch` instead of
//! reporting a deployment that "equals the spec", and `agentctl diff` and
//! `apply` show and refuse the same difference.
//!
//! Source: docs/control-plane-api.md "Deployment" (the immutable fields) and
//! "Answer shapes" (`deployment_type` is filled by the service).

use crate::controlplane::types::{Deployment, DeploymentCreate, ListenerConfig};

/// The `deployment_type` a `github` create sends when the spec sets none
/// (the official Python CLI's default).
pub const GITHUB_DEFAULT_TYPE: &str = "dev";

/// One field the control plane cannot change whose remote value differs
/// from the desired one. None of these fields holds a secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// The field's path in the AgentDeployment spec, e.g.
    /// `sourceConfig.repoUrl`.
    pub field: &'static str,
    /// The desired value (what the spec says, or its default).
    pub desired: String,
    /// The remote deployment's value.
    pub remote: String,
}

/// The fields of `desired` that the control plane cannot change and whose
/// value on `remote` differs. `name_set` says whether the spec names the
/// deployment (`spec.name`): when it does not, adopting by id takes the
/// remote's name and the name is not compared. A field the remote does not
/// report (`null`) says nothing and is not compared; a `deployment_type`
/// unset in the spec counts as `dev` for `github` (what a create sends) and
/// is not compared for `external_docker` (the service fills its own).
/// Repository URLs are compared without a trailing `/` or `.git` and
/// without case. Pure.
pub fn mismatches(
    desired: &DeploymentCreate,
    remote: &Deployment,
    name_set: bool,
) -> Vec<Mismatch> {
    compared(desired, remote, name_set)
        .into_iter()
        .filter_map(|(field, want, have, same)| match (want, have) {
            (Some(w), Some(h)) if !same(w, h) => Some(Mismatch {
                field,
                desired: w.to_owned(),
                remote: h.to_owned(),
            }),
            _ => None,
        })
        .collect()
}

/// How two values of a field are the same.
type Same = fn(&str, &str) -> bool;

/// One field [`mismatches`] compares: its path in the spec, the desired
/// value, the remote's, and how they are the same.
type Compared<'a> = (&'static str, Option<&'a str>, Option<&'a str>, Same);

/// The fields [`mismatches`] compares, in the order it reports them:
/// `source`, `name` (when `name_set`), then the repository, integration,
/// type, listener and namespace of `sourceConfig`.
fn compared<'a>(
    desired: &'a DeploymentCreate,
    remote: &'a Deployment,
    name_set: bool,
) -> Vec<Compared<'a>> {
    let exact: Same = |a, b| a == b;
    let any_case: Same = |a, b| a.eq_ignore_ascii_case(b);
    let mut fields: Vec<Compared<'a>> = vec![(
        "source",
        Some(&desired.source),
        remote.source.as_deref(),
        exact,
    )];
    if name_set {
        fields.push(("name", Some(&desired.name), Some(&remote.name), exact));
    }
    let d = &desired.source_config;
    let r = &remote.source_config;
    let want_type = d
        .deployment_type
        .as_deref()
        .or((desired.source == "github").then_some(GITHUB_DEFAULT_TYPE));
    let namespace =
        |c: &'a Option<ListenerConfig>| c.as_ref().and_then(|l| l.k8s_namespace.as_deref());
    fields.extend([
        (
            "sourceConfig.repoUrl",
            d.repo_url.as_deref(),
            r.repo_url.as_deref(),
            same_repository as Same,
        ),
        (
            "sourceConfig.integrationId",
            d.integration_id.as_deref(),
            r.integration_id.as_deref(),
            any_case,
        ),
        (
            "sourceConfig.deploymentType",
            want_type,
            r.deployment_type.as_deref(),
            exact,
        ),
        (
            "sourceConfig.listenerId",
            d.listener_id.as_deref(),
            r.listener_id.as_deref(),
            any_case,
        ),
        (
            "sourceConfig.listenerConfig.k8sNamespace",
            namespace(&d.listener_config),
            namespace(&r.listener_config),
            exact,
        ),
    ]);
    fields
}

/// True when two repository URLs name the same repository: equal without
/// case, a trailing `/` or a trailing `.git`.
fn same_repository(a: &str, b: &str) -> bool {
    fn norm(u: &str) -> String {
        let u = u.trim().trim_end_matches('/');
        u.strip_suffix(".git").unwrap_or(u).to_ascii_lowercase()
    }
    norm(a) == norm(b)
}

/// The message of a refused adoption of `remote` (`name (id)`), naming
/// each differing field with both values and the way out. Pure.
pub fn mismatch_message(remote_name: &str, remote_id: &str, found: &[Mismatch]) -> String {
    let fields: Vec<String> = found
        .iter()
        .map(|m| format!("{}: spec {:?}, remote {:?}", m.field, m.desired, m.remote))
        .collect();
    format!(
        "remote deployment {remote_name} ({remote_id}) differs from the spec in fields the control plane cannot change: {}. Nothing was sent. Make the spec match the remote deployment (these fields may change until a deployment is adopted), or adopt another deployment",
        fields.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controlplane::types::{ListenerConfig, SourceConfig};

    fn desired(source: &str) -> DeploymentCreate {
        DeploymentCreate {
            name: "support".into(),
            source: source.into(),
            source_config: SourceConfig {
                repo_url: (source == "github").then(|| "https://github.com/acme/echo-agent".into()),
                integration_id: (source == "github")
                    .then(|| "3f0d1c2e-0000-4000-8000-000000000000".into()),
                ..Default::default()
            },
            source_revision_config: Default::default(),
            secrets: vec![],
            secret_references: vec![],
            display_name: None,
        }
    }

    fn remote_of(d: &DeploymentCreate) -> Deployment {
        let mut r: Deployment =
            serde_json::from_value(serde_json::json!({"id": "d-1", "name": d.name}))
                .expect("a minimal deployment");
        r.source = Some(d.source.clone());
        r.source_config = SourceConfig {
            deployment_type: d
                .source_config
                .deployment_type
                .clone()
                .or((d.source == "github").then(|| "dev".into())),
            ..d.source_config.clone()
        };
        r
    }

    #[test]
    fn an_equal_remote_has_no_mismatch() {
        for source in ["github", "external_docker"] {
            let d = desired(source);
            assert_eq!(mismatches(&d, &remote_of(&d), true), vec![], "{source}");
        }
    }

    #[test]
    fn each_immutable_field_that_differs_is_named_with_both_values() {
        type Edit = fn(&mut Deployment);
        let cases: &[(&str, Edit, &str, &str)] = &[
            (
                "source",
                |r| r.source = Some("external_docker".into()),
                "github",
                "external_docker",
            ),
            (
                "name",
                |r| r.name = "support-agent".into(),
                "support",
                "support-agent",
            ),
            (
                "sourceConfig.repoUrl",
                |r| r.source_config.repo_url = Some("https://github.com/acme/support-agent".into()),
                "https://github.com/acme/echo-agent",
                "https://github.com/acme/support-agent",
            ),
            (
                "sourceConfig.integrationId",
                |r| {
                    r.source_config.integration_id =
                        Some("aaaaaaaa-0000-4000-8000-000000000000".into())
                },
                "3f0d1c2e-0000-4000-8000-000000000000",
                "aaaaaaaa-0000-4000-8000-000000000000",
            ),
            (
                "sourceConfig.deploymentType",
                |r| r.source_config.deployment_type = Some("prod".into()),
                "dev",
                "prod",
            ),
        ];
        for (field, edit, want, have) in cases {
            let d = desired("github");
            let mut r = remote_of(&d);
            edit(&mut r);
            assert_eq!(
                mismatches(&d, &r, true),
                vec![Mismatch {
                    field,
                    desired: (*want).into(),
                    remote: (*have).into()
                }],
                "{field}"
            );
        }
    }

    #[test]
    fn listener_fields_are_compared_when_both_sides_tell() {
        let mut d = desired("external_docker");
        d.source_config.listener_id = Some("L1".into());
        d.source_config.listener_config = Some(ListenerConfig {
            k8s_namespace: Some("agents".into()),
        });
        let mut r = remote_of(&d);
        r.source_config.listener_id = Some("L2".into());
        r.source_config.listener_config = Some(ListenerConfig {
            k8s_namespace: Some("other".into()),
        });
        let fields: Vec<&str> = mismatches(&d, &r, true).iter().map(|m| m.field).collect();
        assert_eq!(
            fields,
            [
                "sourceConfig.listenerId",
                "sourceConfig.listenerConfig.k8sNamespace"
            ]
        );
    }

    #[test]
    fn what_the_remote_does_not_report_or_the_spec_leaves_to_it_is_not_compared() {
        let d = desired("github");
        let mut r = remote_of(&d);
        r.source = None;
        r.source_config.repo_url = None;
        r.source_config.integration_id = None;
        r.source_config.deployment_type = None;
        assert_eq!(mismatches(&d, &r, true), vec![]);
        // An image deployment whose type the spec leaves to the service.
        let d = desired("external_docker");
        let mut r = remote_of(&d);
        r.source_config.deployment_type = Some("prod".into());
        assert_eq!(mismatches(&d, &r, true), vec![]);
        // Adopting by id without spec.name takes the remote's name.
        let d = desired("github");
        let mut r = remote_of(&d);
        r.name = "support-agent".into();
        assert_eq!(mismatches(&d, &r, false), vec![]);
    }

    #[test]
    fn repository_urls_are_compared_as_repositories() {
        let d = desired("github");
        let mut r = remote_of(&d);
        r.source_config.repo_url = Some("https://GitHub.com/acme/echo-agent.git/".into());
        assert_eq!(mismatches(&d, &r, true), vec![]);
    }

    #[test]
    fn the_message_names_fields_values_and_the_way_out() {
        let m = mismatch_message(
            "support-agent",
            "d-1",
            &[Mismatch {
                field: "sourceConfig.deploymentType",
                desired: "prod".into(),
                remote: "dev".into(),
            }],
        );
        assert!(m.contains("support-agent (d-1)"), "{m}");
        assert!(
            m.contains("sourceConfig.deploymentType: spec \"prod\", remote \"dev\""),
            "{m}"
        );
        assert!(m.contains("Make the spec match"), "{m}");
    }
}
