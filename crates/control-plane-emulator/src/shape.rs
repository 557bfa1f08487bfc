//! How the emulator's answers differ from an echo of the request: the
//! normalised view the real control plane gives, one [`Quirk`] at a time.
//!
//! Every quirk is on by default ([`ServiceShape::default`]), so every test
//! runs against the shape the real service answers in; each can be switched
//! off (`--without-quirk NAME`, or [`ServiceShape::without`]) so that tests
//! cover both shapes where the evidence conflicts or an older service
//! answered otherwise. [`Quirk::SecretsNeverRead`] is the one stronger form
//! that is off by default.
//!
//! Source of every quirk: docs/control-plane-api.md, "Answer shapes", which
//! names the official clients' regression tests that record it (the
//! Terraform provider's `deployment_regression_test.go` and
//! `deployment_*_acceptance_test.go`, the Go `langsmith` CLI's
//! `internal/hostbackend/client.go`).

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value, json};

/// One way the real service's answer differs from an echo of the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Quirk {
    /// A `github` deployment reads back the configured branch in
    /// `source_config.repo_branch`, the resolved commit in
    /// `source_revision_config.repo_ref` and the built image in
    /// `source_revision_config.image_uri`.
    GithubRefs,
    /// `secrets` reads back as `[]` until a revision of the deployment was
    /// `DEPLOYED` ("Before the first revision, the API returns []").
    SecretsUnread,
    /// `secrets` always reads back as `[]` (a stronger form of
    /// [`Quirk::SecretsUnread`]; off by default).
    SecretsNeverRead,
    /// `secret_references` is never echoed (`[]` in every answer).
    SecretReferencesUnechoed,
    /// `install_command` and `build_command` are never echoed (`null`).
    CommandsUnechoed,
    /// `listener_config` is never echoed (`null`).
    ListenerConfigUnechoed,
    /// An `external_docker` deployment reads back a materialised
    /// `resource_spec`: `min_scale` 1, `max_scale` 1, `cpu` 1, `memory_mb`
    /// 2048, and `null` for `cpu_limit`, `memory_limit_mb`, `labels`,
    /// `annotations`, `service_account_name`, under the keys that were sent.
    ResourceSpecDefaults,
    /// A `github` create without `source_config.deployment_type` or
    /// `build_on_push`, or an `external_docker` create without a
    /// `resource_spec` object, is answered 400.
    CreateRules,
    /// An `external_docker` create with `deployment_type` is answered 400
    /// (the provider's fake refuses it; an open pull request of the Python
    /// CLI sends it: conflicting evidence, so this quirk can be switched off).
    ExternalDeploymentType,
    /// `GET /v2/deployments?name=<exact>` filters on the exact name (off: the
    /// parameter is ignored, as an older service would).
    NameFilter,
}

impl Quirk {
    /// Every quirk with its flag name.
    pub const ALL: [(Quirk, &'static str); 10] = [
        (Quirk::GithubRefs, "github-refs"),
        (Quirk::SecretsUnread, "secrets-unread"),
        (Quirk::SecretsNeverRead, "secrets-never-read"),
        (
            Quirk::SecretReferencesUnechoed,
            "secret-references-unechoed",
        ),
        (Quirk::CommandsUnechoed, "commands-unechoed"),
        (Quirk::ListenerConfigUnechoed, "listener-config-unechoed"),
        (Quirk::ResourceSpecDefaults, "resource-spec-defaults"),
        (Quirk::CreateRules, "create-rules"),
        (Quirk::ExternalDeploymentType, "external-deployment-type"),
        (Quirk::NameFilter, "name-filter"),
    ];

    /// The flag name, e.g. `github-refs`.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(q, _)| *q == self)
            .map(|(_, n)| *n)
            .unwrap_or("?")
    }
}

impl fmt::Display for Quirk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses a flag name (`github-refs`, ...).
///
/// Errors: an unknown name; the message lists the known ones.
impl FromStr for Quirk {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .iter()
            .find(|(_, n)| *n == s.trim())
            .map(|(q, _)| *q)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|(_, n)| *n).collect();
                format!("unknown quirk {s:?}; known: {}", names.join(", "))
            })
    }
}

/// The set of quirks the emulator answers with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceShape {
    quirks: BTreeSet<Quirk>,
}

impl Default for ServiceShape {
    /// The shape of the real service: every quirk but
    /// [`Quirk::SecretsNeverRead`].
    fn default() -> Self {
        Self {
            quirks: Quirk::ALL
                .iter()
                .map(|(q, _)| *q)
                .filter(|q| *q != Quirk::SecretsNeverRead)
                .collect(),
        }
    }
}

impl ServiceShape {
    /// An emulator that echoes what it stored (the shape of this project's
    /// notes before the official clients' records were read).
    pub fn echo() -> Self {
        Self {
            quirks: BTreeSet::new(),
        }
    }

    /// True when `q` is on.
    pub fn has(&self, q: Quirk) -> bool {
        self.quirks.contains(&q)
    }

    /// This shape without `q`.
    pub fn without(mut self, q: Quirk) -> Self {
        self.quirks.remove(&q);
        self
    }

    /// This shape with `q`.
    pub fn with(mut self, q: Quirk) -> Self {
        self.quirks.insert(q);
        self
    }

    /// The quirks that are on, by flag name.
    pub fn names(&self) -> Vec<&'static str> {
        self.quirks.iter().map(|q| q.name()).collect()
    }
}

/// The defaults the service materialises in an `external_docker`
/// `resource_spec` ([`Quirk::ResourceSpecDefaults`]).
pub(crate) fn resource_spec_defaults() -> Map<String, Value> {
    match json!({
        "min_scale": 1,
        "max_scale": 1,
        "cpu": 1,
        "memory_mb": 2048,
        "cpu_limit": null,
        "memory_limit_mb": null,
        "labels": null,
        "annotations": null,
        "service_account_name": null,
    }) {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// What the answer needs to know about the deployment besides its stored
/// JSON view.
pub(crate) struct AnswerFacts<'a> {
    /// `github`, `external_docker`.
    pub source: &'a str,
    /// The configured ref of the latest revision (`repo_ref` as sent).
    pub configured_ref: Option<&'a str>,
    /// The commit the latest revision resolved (`github`).
    pub resolved_commit: Option<&'a str>,
    /// The image the latest revision built (`github`).
    pub built_image: Option<String>,
    /// A revision of the deployment reached `DEPLOYED`.
    pub ever_deployed: bool,
}

/// Reshapes the stored JSON view `v` of a deployment the way the real service
/// answers (every quirk of `shape` that is on).
pub(crate) fn answer(v: &mut Value, facts: &AnswerFacts<'_>, shape: &ServiceShape) {
    if shape.has(Quirk::GithubRefs) && facts.source == "github" {
        v["source_config"]["repo_branch"] = json!(facts.configured_ref);
        if let Some(commit) = facts.resolved_commit {
            v["source_revision_config"]["repo_ref"] = json!(commit);
        }
        if let Some(image) = &facts.built_image {
            v["source_revision_config"]["image_uri"] = json!(image);
        }
    }
    if shape.has(Quirk::SecretsNeverRead)
        || (shape.has(Quirk::SecretsUnread) && !facts.ever_deployed)
    {
        v["secrets"] = json!([]);
    }
    if shape.has(Quirk::SecretReferencesUnechoed) {
        v["secret_references"] = json!([]);
    }
    if let Value::Object(sc) = &mut v["source_config"] {
        if shape.has(Quirk::CommandsUnechoed) {
            sc.insert("install_command".into(), Value::Null);
            sc.insert("build_command".into(), Value::Null);
        }
        if shape.has(Quirk::ListenerConfigUnechoed) {
            sc.insert("listener_config".into(), Value::Null);
        }
        if shape.has(Quirk::ResourceSpecDefaults) && facts.source == "external_docker" {
            let mut rs = resource_spec_defaults();
            if let Some(Value::Object(sent)) = sc.get("resource_spec") {
                for (k, val) in sent {
                    rs.insert(k.clone(), val.clone());
                }
            }
            sc.insert("resource_spec".into(), Value::Object(rs));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(source: &str, ever_deployed: bool) -> AnswerFacts<'static> {
        AnswerFacts {
            source: if source == "github" {
                "github"
            } else {
                "external_docker"
            },
            configured_ref: Some("main"),
            resolved_commit: Some("0123456789abcdef0123456789abcdef01234567"),
            built_image: Some("registry.example/app:0123456".into()),
            ever_deployed,
        }
    }

    fn stored() -> Value {
        json!({
            "source_config": {"install_command": "npm ci", "build_command": "npm run build",
                "listener_config": {"k8s_namespace": "ns"}, "resource_spec": {"cpu": 2}},
            "source_revision_config": {"repo_ref": "main", "image_uri": null},
            "secrets": [{"name": "K", "value": "v"}],
            "secret_references": [{"name": "R", "secret_name": "s", "secret_key": "k"}],
        })
    }

    #[test]
    fn quirk_names_round_trip() {
        for (q, n) in Quirk::ALL {
            assert_eq!(n.parse::<Quirk>().unwrap(), q);
            assert_eq!(q.to_string(), n);
        }
        assert!("nope".parse::<Quirk>().unwrap_err().contains("github-refs"));
        assert!(!ServiceShape::default().has(Quirk::SecretsNeverRead));
        assert!(ServiceShape::default().has(Quirk::GithubRefs));
        assert!(ServiceShape::echo().names().is_empty());
    }

    #[test]
    fn the_real_shape_of_a_github_deployment() {
        let mut v = stored();
        answer(&mut v, &facts("github", false), &ServiceShape::default());
        assert_eq!(v["source_config"]["repo_branch"], "main");
        assert_eq!(
            v["source_revision_config"]["repo_ref"],
            "0123456789abcdef0123456789abcdef01234567"
        );
        assert_eq!(
            v["source_revision_config"]["image_uri"],
            "registry.example/app:0123456"
        );
        assert_eq!(v["secrets"], json!([]));
        assert_eq!(v["secret_references"], json!([]));
        assert_eq!(v["source_config"]["install_command"], Value::Null);
        assert_eq!(v["source_config"]["listener_config"], Value::Null);
        assert_eq!(
            v["source_config"]["resource_spec"],
            json!({"cpu": 2}),
            "defaults are materialised for external images only"
        );
        let mut after = stored();
        answer(&mut after, &facts("github", true), &ServiceShape::default());
        assert_eq!(after["secrets"][0]["name"], "K");
    }

    #[test]
    fn external_docker_reads_back_materialised_defaults() {
        let mut v = stored();
        answer(
            &mut v,
            &facts("external_docker", true),
            &ServiceShape::default(),
        );
        let rs = &v["source_config"]["resource_spec"];
        assert_eq!(rs["cpu"], 2, "what was sent wins");
        assert_eq!(rs["min_scale"], 1);
        assert_eq!(rs["memory_mb"], 2048);
        assert_eq!(rs["labels"], Value::Null);
        assert!(v["source_config"].get("repo_branch").is_none());
    }

    #[test]
    fn the_echo_shape_changes_nothing() {
        let mut v = stored();
        answer(&mut v, &facts("github", false), &ServiceShape::echo());
        assert_eq!(v, stored());
        let mut never = stored();
        answer(
            &mut never,
            &facts("github", true),
            &ServiceShape::echo().with(Quirk::SecretsNeverRead),
        );
        assert_eq!(never["secrets"], json!([]));
    }
}
