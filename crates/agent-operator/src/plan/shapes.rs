//! How the control plane reads a deployment back, field by field, and so
//! what a read can and cannot say about drift. Pure; used by
//! [`super::desired::compute_patch`] (the operator's decide step and
//! `agentctl apply`).
//!
//! The service does not echo the request: it "returns a normalized view",
//! and some fields it "never echoes back or reports in a shape of its own"
//! (the Terraform provider's regression tests). [`ANSWER_SHAPES`] is the one
//! table of those rules; each row names its source in
//! docs/control-plane-api.md, "Answer shapes", and is tested case by case
//! against the JSON fixtures in `crates/agent-operator/fixtures/answer-shapes/`
//! (each fixture names the official client test that records it).
//!
//! The rule behind every row: a field the service does not echo, echoes
//! normalised, or fills with a default is never drift. When a read says
//! nothing about a field, a change of the spec is found against what the
//! operator last sent ([`Memory::sent`], `status.unechoedHash`), never
//! against the read.

use serde_json::{Map, Value};

use crate::controlplane::types::{self as wire, DeploymentCreate, SecretReference, SecretValue};

/// How the service reads one field back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Echo {
    /// Read back as written: a difference is drift.
    AsWritten,
    /// Read back in a shape of its own: compared after normalising
    /// (see the row's rule).
    Normalised,
    /// Filled with the service's defaults: only the keys the spec sets are
    /// compared.
    Defaulted,
    /// Not read back, or read back empty when the service does not say: an
    /// empty or absent value is "unknown", never "differs"; a change of the
    /// spec is found against what was last sent.
    Unechoed,
}

/// One row of [`ANSWER_SHAPES`].
#[derive(Clone, Copy, Debug)]
pub struct FieldShape {
    /// The wire field, e.g. `source_revision_config.repo_ref`.
    pub field: &'static str,
    /// How the service reads it back.
    pub echo: Echo,
    /// The rule the operator applies.
    pub rule: &'static str,
    /// Where the shape is recorded (a section of docs/control-plane-api.md
    /// and the official client test it names).
    pub source: &'static str,
}

/// The answer shapes of the fields the operator writes (see the module
/// documentation).
pub const ANSWER_SHAPES: &[FieldShape] = &[
    FieldShape {
        field: "source_revision_config.repo_ref",
        echo: Echo::Normalised,
        rule: "github: the configured branch is read from source_config.repo_branch; \
               repo_ref is used only when repo_branch is absent and repo_ref is not a \
               resolved commit; otherwise unknown (compared with what was last sent). \
               The resolved commit and built image are provenance, never compared.",
        source: "Answer shapes: github refs (provider deployment_regression_test.go)",
    },
    FieldShape {
        field: "source_revision_config.image_uri",
        echo: Echo::Normalised,
        rule: "external_docker: compared when read (null, e.g. before the first \
               revision, is unknown); github: the built image, never compared (the spec \
               sets none).",
        source: "Answer shapes: github refs (provider deployment_regression_test.go)",
    },
    FieldShape {
        field: "source_revision_config.langgraph_config_path",
        echo: Echo::AsWritten,
        rule: "compared when the spec sets it and the read returns it (the whole \
               source_revision_config is null before the first revision)",
        source: "Answer shapes: github refs (provider deployment_regression_acceptance_test.go, \
                 deployment_cloud_acceptance_test.go)",
    },
    FieldShape {
        field: "secrets",
        echo: Echo::Unechoed,
        rule: "[] or null is unknown (read back so before the first revision); names \
               and values are compared only when the service returns them; a change of \
               the referenced Secrets is found against status.secretsHash.",
        source: "Answer shapes: secrets on read (provider deployment_secrets.go, \
                 deployment_cloud_acceptance_test.go)",
    },
    FieldShape {
        field: "display_name",
        echo: Echo::AsWritten,
        rule: "not taken on create (sent by PATCH once the deployment exists); null \
               until set; compared when the spec sets it; never cleared (a spec without \
               it sends nothing).",
        source: "Answer shapes: display_name (provider deployment_resource.go, \
                 deployment_regression_test.go)",
    },
    FieldShape {
        field: "secret_references",
        echo: Echo::Unechoed,
        rule: "[] or null is unknown; compared as a set only when the service returns \
               some; otherwise a change of the spec is found against status.unechoedHash.",
        source: "Answer shapes: a normalised read (provider deployment_offline_acceptance_test.go)",
    },
    FieldShape {
        field: "source_config.install_command",
        echo: Echo::Unechoed,
        rule: "null is unknown; compared only when the service returns a value; \
               otherwise against status.unechoedHash.",
        source: "Answer shapes: commands and listener settings (provider schema, \
                 deployment_offline_acceptance_test.go)",
    },
    FieldShape {
        field: "source_config.build_command",
        echo: Echo::Unechoed,
        rule: "as install_command",
        source: "Answer shapes: commands and listener settings",
    },
    FieldShape {
        field: "source_config.listener_config",
        echo: Echo::Unechoed,
        rule: "immutable and never compared",
        source: "Answer shapes: commands and listener settings",
    },
    FieldShape {
        field: "source_config.resource_spec",
        echo: Echo::Defaulted,
        rule: "external_docker reads back min_scale 1, max_scale 1, cpu 1, memory_mb 2048 \
               and nulls: only the keys the spec sets are compared, numbers by value \
               (1 equals 1.0); a write sends the merged object (the service replaces it \
               whole).",
        source: "Answer shapes: external_docker defaults (provider deployment_offline_acceptance_test.go)",
    },
    FieldShape {
        field: "source_config.deployment_type",
        echo: Echo::Defaulted,
        rule: "immutable; filled by the service (prod, dev); never compared",
        source: "Answer shapes: create by source",
    },
    FieldShape {
        field: "source_config.build_on_push",
        echo: Echo::Defaulted,
        rule: "compared only when the spec sets it (the service reports false when unset)",
        source: "Answer shapes: a normalised read",
    },
    FieldShape {
        field: "source_config.custom_url",
        echo: Echo::AsWritten,
        rule: "compared only when the spec sets it (the service sets it for github)",
        source: "docs/control-plane-api.md: Deployment",
    },
];

/// What the operator remembers of its own writes, for the fields a read may
/// not tell.
#[derive(Clone, Copy, Debug, Default)]
pub struct Memory<'a> {
    /// The desired secret values differ from those last sent, or from the
    /// values the service returned (see `desired::remote_secrets_differ`).
    pub send_secrets: bool,
    /// [`unechoed_hash`] of the desired state as last sent
    /// (`status.unechoedHash`); `None`: unknown (`agentctl apply`, or a
    /// status written before the field existed, or a deployment just
    /// adopted by `spec.deploymentId`), so a field the read does not tell
    /// is not sent: an adopted deployment keeps its own commands and
    /// references until the spec changes them.
    pub sent: Option<&'a str>,
}

impl Memory<'_> {
    /// A memory that knows only whether the secret values must be sent.
    pub fn secrets(send_secrets: bool) -> Self {
        Self {
            send_secrets,
            sent: None,
        }
    }
}

/// True when `r` is a resolved commit (7 to 64 hex digits), not a branch or
/// tag name: the wire crate's fact (docs/control-plane-api.md, "Answer
/// shapes"), shared with the emulator.
pub use control_plane_wire::types::is_resolved_commit;

/// The ref the service says the deployment is configured with, or `None`
/// when the read does not tell (row `source_revision_config.repo_ref`).
pub fn configured_ref(remote: &wire::Deployment) -> Option<&str> {
    fn nonempty(s: &Option<String>) -> Option<&str> {
        s.as_deref().filter(|v| !v.trim().is_empty())
    }
    nonempty(&remote.source_config.repo_branch).or_else(|| {
        nonempty(&remote.source_revision_config.repo_ref).filter(|r| !is_resolved_commit(r))
    })
}

/// The commit and image a `github` deployment's latest revision was built
/// from, as read (provenance: recorded, never compared).
pub fn provenance(remote: &wire::Deployment) -> (Option<String>, Option<String>) {
    if remote.source.as_deref() != Some("github") {
        return (None, None);
    }
    let rc = &remote.source_revision_config;
    // A commit is the read's `repo_commit_sha`, or a resolved `repo_ref`
    // beside a configured `repo_branch`.
    let commit = rc.repo_commit_sha.clone().or_else(|| {
        rc.repo_ref
            .clone()
            .filter(|r| is_resolved_commit(r) && remote.source_config.repo_branch.is_some())
    });
    (commit, rc.image_uri.clone())
}

/// The commit and image a `github` revision was built from, as the
/// revision reads them back (`repo_commit_sha`, and the built `image_uri`).
pub fn revision_provenance(rev: &wire::Revision) -> (Option<String>, Option<String>) {
    rev.source_revision_config
        .as_ref()
        .map(|c| (c.repo_commit_sha.clone(), c.image_uri.clone()))
        .unwrap_or_default()
}

/// Digest (hex, 16 bytes of sha256) of the desired values of the fields a
/// read may not tell: `repo_ref`, `install_command`, `build_command` and the
/// sorted `secret_references`. Kept in `status.unechoedHash` when sent.
pub fn unechoed_hash(desired: &DeploymentCreate) -> String {
    use sha2::{Digest, Sha256};
    let mut refs = desired.secret_references.clone();
    refs.sort();
    let v = serde_json::json!([
        desired.source_revision_config.repo_ref,
        desired.source_config.install_command,
        desired.source_config.build_command,
        refs,
    ]);
    let mut h = Sha256::new();
    h.update(v.to_string().as_bytes());
    hex::encode(&h.finalize()[..16])
}

/// What a read says about one field the spec may set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Said {
    /// The read shows the desired value (or the spec sets none).
    Same,
    /// The read shows another value: drift, or a change of the spec.
    Differs,
    /// The read does not tell.
    Unknown,
}

impl Said {
    /// Whether to send the field: it differs, or the read does not tell and
    /// the desired state changed since it was last sent.
    pub fn send(self, changed_since_sent: bool) -> bool {
        match self {
            Said::Same => false,
            Said::Differs => true,
            Said::Unknown => changed_since_sent,
        }
    }
}

/// A string field that is compared when the read returns a value
/// (`install_command`, `build_command`, `langgraph_config_path`, an
/// external image).
pub fn optional_echo(desired: &Option<String>, read: &Option<String>) -> Said {
    match (desired, read) {
        (None, _) => Said::Same,
        (Some(_), None) => Said::Unknown,
        (Some(d), Some(r)) if d == r => Said::Same,
        _ => Said::Differs,
    }
}

/// Row `source_revision_config.repo_ref`.
pub fn repo_ref(desired: &Option<String>, remote: &wire::Deployment) -> Said {
    match (desired, configured_ref(remote)) {
        (None, _) => Said::Same,
        (Some(_), None) => Said::Unknown,
        (Some(d), Some(r)) if d == r => Said::Same,
        _ => Said::Differs,
    }
}

/// Row `secret_references`: compared as a set when the read returns some.
pub fn secret_references(desired: &[SecretReference], read: &[SecretReference]) -> Said {
    if read.is_empty() {
        return if desired.is_empty() {
            Said::Same
        } else {
            Said::Unknown
        };
    }
    let (mut d, mut r) = (desired.to_vec(), read.to_vec());
    d.sort();
    r.sort();
    if d == r { Said::Same } else { Said::Differs }
}

/// Row `secrets`, names only (values: `desired::remote_secrets_differ`):
/// compared when the read returns some.
pub fn secret_names(desired: &[SecretValue], read: &[SecretValue]) -> Said {
    if read.is_empty() {
        return Said::Unknown;
    }
    let mut a: Vec<&str> = desired.iter().map(|s| s.name.as_str()).collect();
    let mut b: Vec<&str> = read.iter().map(|s| s.name.as_str()).collect();
    a.sort_unstable();
    b.sort_unstable();
    if a == b { Said::Same } else { Said::Differs }
}

/// JSON values equal as the service means them: numbers by value (`1` and
/// `1.0`), objects and arrays element by element.
pub fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => x == y,
            _ => x == y,
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_value(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_value(v, w)))
        }
        _ => a == b,
    }
}

/// Row `source_config.resource_spec`: true when every key the spec sets has
/// the same value in the read (defaults the service adds do not count).
pub fn resource_spec_holds(read: Option<&Value>, desired: &Map<String, Value>) -> bool {
    let Some(Value::Object(read)) = read else {
        return desired.is_empty();
    };
    desired
        .iter()
        .all(|(k, v)| read.get(k).is_some_and(|r| same_value(v, r)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_written_field_has_one_row_with_a_source() {
        let mut fields: Vec<&str> = ANSWER_SHAPES.iter().map(|r| r.field).collect();
        let n = fields.len();
        fields.sort_unstable();
        fields.dedup();
        assert_eq!(fields.len(), n, "one row per field");
        for row in ANSWER_SHAPES {
            assert!(!row.rule.is_empty() && !row.source.is_empty(), "{row:?}");
        }
    }

    #[test]
    fn commits_and_branches() {
        assert!(is_resolved_commit(
            "0123456789abcdef0123456789abcdef01234567"
        ));
        assert!(is_resolved_commit("abc1234"));
        assert!(!is_resolved_commit("main"));
        assert!(!is_resolved_commit("refs/tags/v1"));
        assert!(!is_resolved_commit("cafe"), "too short to be a commit");
    }

    #[test]
    fn numbers_compare_by_value() {
        use serde_json::json;
        assert!(same_value(&json!(1), &json!(1.0)));
        assert!(same_value(&json!({"a": [1, 2.0]}), &json!({"a": [1.0, 2]})));
        assert!(!same_value(&json!(1), &json!(2)));
        assert!(!same_value(&json!("1"), &json!(1)));
        let want = json!({"cpu": 1}).as_object().unwrap().clone();
        assert!(resource_spec_holds(
            Some(&json!({"cpu": 1.0, "min_scale": 1})),
            &want
        ));
        assert!(!resource_spec_holds(None, &want));
    }

    /// The table of answer shapes, case by case against the recorded
    /// fixtures: (fixture, desired change, memory, fields sent).
    mod fixtures {
        use super::super::*;
        use crate::controlplane::types::{Deployment, SecretValue};
        use crate::plan::desired::{compute_patch, patch_fields, remote_secrets_differ};
        use serde_json::{Value, json};

        fn fixture(name: &str) -> Deployment {
            let path = format!(
                "{}/fixtures/answer-shapes/{name}.json",
                env!("CARGO_MANIFEST_DIR")
            );
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            assert!(
                v["source"].as_str().is_some_and(|s| s.len() > 20),
                "{name} names its source"
            );
            serde_json::from_value(v["deployment"].clone()).unwrap()
        }

        fn github() -> DeploymentCreate {
            serde_json::from_value(json!({
                "name": "github-agent", "source": "github",
                "source_config": {"integration_id": "3f0d1c2e-0000-4000-8000-000000000000",
                    "repo_url": "https://github.com/acme/agent"},
                "source_revision_config": {"repo_ref": "main", "langgraph_config_path": "langgraph.json"},
                "secrets": [{"name": "API_TOKEN", "value": "token-value"}],
            }))
            .unwrap()
        }

        fn docker() -> DeploymentCreate {
            serde_json::from_value(json!({
                "name": "docker-agent", "source": "external_docker",
                "source_config": {"resource_spec": {"cpu": 1, "memory_mb": 2048}},
                "source_revision_config": {"image_uri": "registry.example/agent:v1"},
                "secrets": [{"name": "API_TOKEN", "value": "token-value"}],
                "secret_references": [{"name": "DB", "secret_name": "db", "secret_key": "url"}],
            }))
            .unwrap()
        }

        /// The fields sent for `desired` against `remote`, with the memory
        /// of `sent` (what was last sent, if known) and the secret values
        /// compared by hash as the operator does.
        fn sent(
            desired: &DeploymentCreate,
            remote: &Deployment,
            sent: Option<&DeploymentCreate>,
        ) -> Vec<&'static str> {
            let key = crate::plan::secrets_hash::HashKey::random();
            let hash = key.secrets_hash(&desired.secrets);
            let last = sent.map(unechoed_hash);
            let memory = Memory {
                send_secrets: remote_secrets_differ(&key, &hash, &remote.secrets),
                sent: last.as_deref(),
            };
            patch_fields(&compute_patch(desired, remote, &memory))
        }

        fn with(
            mut d: DeploymentCreate,
            f: impl FnOnce(&mut DeploymentCreate),
        ) -> DeploymentCreate {
            f(&mut d);
            d
        }

        #[test]
        fn github_refs() {
            let resolved = fixture("github-resolved-ref");
            let release = with(github(), |d| {
                d.source_revision_config.repo_ref = Some("release".into())
            });
            // The resolved commit and the built image are never drift.
            assert_eq!(sent(&github(), &resolved, Some(&github())), [""; 0]);
            assert_eq!(sent(&github(), &resolved, None), [""; 0]);
            // The configured branch is read from repo_branch.
            assert_eq!(
                sent(&release, &resolved, Some(&github())),
                ["source_revision_config"]
            );
            assert_eq!(
                sent(&release, &resolved, None),
                ["source_revision_config"],
                "drift on the branch is seen without memory"
            );
            // Without repo_branch, a ref that is not a commit is the branch.
            let plain = fixture("github-ref-without-branch");
            assert_eq!(sent(&github(), &plain, None), [""; 0]);
            assert_eq!(sent(&release, &plain, None), ["source_revision_config"]);
            // A commit alone tells nothing: a change of the spec is found
            // against what was sent, and nothing is sent without memory.
            let commit = fixture("github-commit-only");
            assert_eq!(sent(&github(), &commit, Some(&github())), [""; 0]);
            assert_eq!(
                sent(&release, &commit, Some(&github())),
                ["source_revision_config"]
            );
            assert_eq!(sent(&release, &commit, None), [""; 0]);
            assert_eq!(
                provenance(&resolved),
                (
                    Some("0123456789abcdef0123456789abcdef01234567".into()),
                    Some("registry.example/agent:built-image".into())
                )
            );
            assert_eq!(provenance(&plain), (None, None));
        }

        #[test]
        fn secrets_on_read() {
            let empty = fixture("secrets-before-first-revision");
            assert!(
                empty.source_revision_config.repo_ref.is_none(),
                "null reads as empty"
            );
            // [] before the first revision is unknown, never "differs".
            assert_eq!(sent(&github(), &empty, Some(&github())), [""; 0]);
            // Values and names are compared when the service returns them.
            let resolved = fixture("github-resolved-ref");
            let other_value = with(github(), |d| {
                d.secrets = vec![SecretValue::new("API_TOKEN", "new-value")]
            });
            assert_eq!(sent(&other_value, &resolved, Some(&github())), ["secrets"]);
            let renamed = with(github(), |d| {
                d.secrets = vec![SecretValue::new("OTHER", "token-value")]
            });
            assert_eq!(sent(&renamed, &resolved, Some(&github())), ["secrets"]);
        }

        #[test]
        fn external_docker_normalised() {
            let remote = fixture("external-docker-normalised");
            // Materialised defaults, cpu 1 read back as 1.0, unechoed
            // references and commands, display_name null: no drift.
            assert_eq!(sent(&docker(), &remote, Some(&docker())), [""; 0]);
            assert_eq!(sent(&docker(), &remote, None), [""; 0]);
            let commands = with(docker(), |d| {
                d.source_config.install_command = Some("npm ci".into())
            });
            assert_eq!(sent(&commands, &remote, Some(&commands)), [""; 0]);
            assert_eq!(
                sent(&commands, &remote, Some(&docker())),
                ["source_config.install_command", "secret_references"],
                "one digest covers the fields a read does not tell: each is sent again (one PATCH, one revision)"
            );
            let refs = with(docker(), |d| {
                d.secret_references[0].secret_key = "uri".into()
            });
            assert_eq!(sent(&refs, &remote, Some(&docker())), ["secret_references"]);
            let image = with(docker(), |d| {
                d.source_revision_config.image_uri = Some("registry.example/agent:v2".into())
            });
            assert_eq!(
                sent(&image, &remote, Some(&docker())),
                ["source_revision_config"]
            );
            let bigger = with(docker(), |d| {
                d.source_config.resource_spec = Some(json!({"cpu": 2}))
            });
            assert_eq!(
                sent(&bigger, &remote, Some(&docker())),
                ["source_config.resource_spec"]
            );
        }
    }
}
