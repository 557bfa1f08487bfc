//! Pure mapping between an `AgentDeployment` spec (camelCase) and the control
//! plane's wire types (snake_case), and the minimal PATCH that makes a remote
//! deployment equal to the spec. No IO here.
//!
//! Source: docs/control-plane-api.md "Deployment" and "Requests" (which
//! fields create a revision, `resource_spec` replaced whole, an empty
//! `secrets` list meaning "unchanged").

use serde_json::{Map, Value};

use super::shapes::{self, Memory};
use crate::api::deployment::{self as crd, AgentDeploymentSpec};
use crate::api::resource_spec;
use crate::controlplane::types::{
    self as wire, Deployment, DeploymentCreate, DeploymentPatch, SecretReference, SecretValue,
};
use crate::plan::secrets_hash::HashKey;

/// Maps `spec.sourceConfig` to the wire `source_config`. `integrationRef` has
/// no wire field: the pass resolves it to `integration_id` before a create
/// (see `controller::integrations`).
pub fn source_config(spec: &crd::SourceConfig) -> wire::SourceConfig {
    wire::SourceConfig {
        integration_id: spec.integration_id.clone(),
        repo_url: spec.repo_url.clone(),
        deployment_type: spec.deployment_type.map(|t| t.as_str().to_owned()),
        build_on_push: spec.build_on_push,
        repo_branch: None,
        custom_url: spec.custom_url.clone(),
        resource_spec: spec
            .resource_spec
            .as_ref()
            // An unknown key cannot pass the schema; `api::preflight::check`
            // stops such a spec before any request.
            .map(|rs| Value::Object(resource_spec::to_wire(rs).unwrap_or_default())),
        listener_id: spec.listener_id.clone(),
        listener_config: spec.listener_config.as_ref().map(|l| wire::ListenerConfig {
            k8s_namespace: l.k8s_namespace.clone(),
        }),
        install_command: spec.install_command.clone(),
        build_command: spec.build_command.clone(),
    }
}

/// Maps `spec.sourceRevisionConfig` to the wire `source_revision_config`.
pub fn source_revision_config(spec: &crd::SourceRevisionConfig) -> wire::SourceRevisionConfig {
    wire::SourceRevisionConfig {
        repo_ref: spec.repo_ref.clone(),
        langgraph_config_path: spec.langgraph_config_path.clone(),
        image_uri: spec.image_uri.clone(),
        repo_commit_sha: None,
    }
}

/// Maps `spec.secretReferences` (camelCase) to the wire `secret_references`
/// (snake_case), sorted by name so that the order of the list never counts
/// as a difference.
pub fn secret_references(spec: &[crd::DeploymentSecretReference]) -> Vec<SecretReference> {
    let mut out: Vec<SecretReference> = spec
        .iter()
        .map(|r| SecretReference {
            name: r.name.clone(),
            secret_name: r.secret_name.clone(),
            secret_key: r.secret_key.clone(),
        })
        .collect();
    out.sort();
    out
}

/// The create body for a spec, its remote name and its resolved secrets.
pub fn create_body(
    name: &str,
    spec: &AgentDeploymentSpec,
    secrets: Vec<SecretValue>,
) -> DeploymentCreate {
    DeploymentCreate {
        name: name.to_owned(),
        source: spec.source.as_str().to_owned(),
        source_config: source_config(&spec.source_config),
        source_revision_config: source_revision_config(&spec.source_revision_config),
        secrets,
        secret_references: secret_references(&spec.secret_references),
        display_name: spec.display_name.clone(),
    }
}

/// `current` with every key of `desired` set: the object to send, since the
/// service replaces `resource_spec` whole on PATCH.
fn merged(current: Option<&Value>, desired: &Map<String, Value>) -> Value {
    let mut out = match current {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    for (k, v) in desired {
        out.insert(k.clone(), v.clone());
    }
    Value::Object(out)
}

/// The desired value is set and not the current one.
fn differs<T: PartialEq>(desired: &Option<T>, current: &Option<T>) -> bool {
    desired.is_some() && desired != current
}

/// The minimal PATCH that makes `remote` equal to `desired`, or an empty
/// patch, read through the answer shapes of [`shapes::ANSWER_SHAPES`]: a
/// field the service does not echo, echoes normalised, or fills with a
/// default is never drift; when the read does not tell, a field is sent
/// only when the desired state changed since it was last sent
/// (`memory.sent`).
///
/// - `source_config`: only the mutable fields the spec sets and that differ
///   (`build_on_push`, `custom_url`, `install_command`, `build_command`,
///   `resource_spec` merged with the current object, only the keys the spec
///   sets compared). Immutable fields (`integration_id`, `repo_url`,
///   `deployment_type`, `listener_*`) are never sent.
/// - `source_revision_config`: the spec's values, only when one of them
///   differs (it creates a revision); `repo_ref` is compared with the
///   configured branch ([`shapes::configured_ref`]), never with a resolved
///   commit.
/// - `secrets`: the full list, only when a name or value differs; an empty
///   desired list is never sent (the service reads `[]` as "unchanged").
///   `memory.send_secrets` says the values differ (from the ones last sent,
///   or from the ones the service returns: [`remote_secrets_differ`]);
///   names are compared here when the service returns some. The service
///   replaces the whole list, so a secret the remote has and the spec does
///   not list is removed by the same PATCH.
/// - `secret_references`: the full desired list when it differs from the
///   remote's as a set, or, when the service returns none, when the desired
///   state changed since last sent; an empty list is sent to remove the
///   remote's last references.
/// - `display_name`: when the spec sets one and the remote's differs (never
///   cleared: a spec without it sends nothing).
pub fn compute_patch(
    desired: &DeploymentCreate,
    remote: &wire::Deployment,
    memory: &Memory<'_>,
) -> DeploymentPatch {
    let changed = memory
        .sent
        .is_some_and(|sent| sent != shapes::unechoed_hash(desired));
    let sc = source_config_patch(&desired.source_config, &remote.source_config, changed);
    let mut patch = DeploymentPatch {
        source_config: (sc != wire::SourceConfig::default()).then_some(sc),
        source_revision_config: revision_patch(desired, remote, changed),
        ..DeploymentPatch::default()
    };

    if !desired.secrets.is_empty()
        && (memory.send_secrets
            || shapes::secret_names(&desired.secrets, &remote.secrets) == shapes::Said::Differs)
    {
        patch.secrets = Some(desired.secrets.clone());
    }

    if shapes::secret_references(&desired.secret_references, &remote.secret_references)
        .send(changed)
    {
        let mut refs = desired.secret_references.clone();
        refs.sort();
        patch.secret_references = Some(refs);
    }
    // Set when the spec has one and it differs; never cleared.
    if differs(&desired.display_name, &remote.display_name) {
        patch.display_name = desired.display_name.clone();
    }
    patch
}

/// The `source_config` of [`compute_patch`]: the mutable fields the spec
/// (`d`) sets that differ from the remote's (`r`), `resource_spec` merged
/// with the remote's; `changed`: the desired state changed since it was
/// last sent. The default (empty) when none differs.
fn source_config_patch(
    d: &wire::SourceConfig,
    r: &wire::SourceConfig,
    changed: bool,
) -> wire::SourceConfig {
    let mut sc = wire::SourceConfig::default();
    if differs(&d.build_on_push, &r.build_on_push) {
        sc.build_on_push = d.build_on_push;
    }
    if differs(&d.custom_url, &r.custom_url) {
        sc.custom_url = d.custom_url.clone();
    }
    if shapes::optional_echo(&d.install_command, &r.install_command).send(changed) {
        sc.install_command = d.install_command.clone();
    }
    if shapes::optional_echo(&d.build_command, &r.build_command).send(changed) {
        sc.build_command = d.build_command.clone();
    }
    if let Some(Value::Object(want)) = &d.resource_spec
        && !shapes::resource_spec_holds(r.resource_spec.as_ref(), want)
    {
        sc.resource_spec = Some(merged(r.resource_spec.as_ref(), want));
    }
    sc
}

/// The `source_revision_config` of [`compute_patch`]: the spec's values
/// (no commit) when its ref, config path or image differs from the
/// remote's (`changed`: the desired state changed since it was last sent),
/// else `None`.
fn revision_patch(
    desired: &DeploymentCreate,
    remote: &wire::Deployment,
    changed: bool,
) -> Option<wire::SourceRevisionConfig> {
    let d = &desired.source_revision_config;
    let r = &remote.source_revision_config;
    let image = match (&d.image_uri, &r.image_uri) {
        _ if remote.source.as_deref() == Some("github") => shapes::Said::Same,
        // `repo:tag@sha256:x` read back for `repo@sha256:x` sent (or the
        // other way) is the same image, not drift.
        (Some(want), Some(read)) if crate::registry::same_image(want, read) => shapes::Said::Same,
        _ => shapes::optional_echo(&d.image_uri, &r.image_uri),
    };
    (shapes::repo_ref(&d.repo_ref, remote).send(changed)
        || shapes::optional_echo(&d.langgraph_config_path, &r.langgraph_config_path).send(changed)
        || image.send(changed))
    .then(|| wire::SourceRevisionConfig {
        repo_commit_sha: None,
        ..d.clone()
    })
}

/// True when the service returned secret values and they differ from the
/// desired ones: the keyed hash ([`HashKey::secrets_hash`]) of the returned
/// names and values is not `desired_hash` (the hash of the desired values
/// under the same key, the `status.secretsHash` form). No value is compared
/// or kept outside the hash.
///
/// A response that returns no secrets (`[]` or `null`: the service reads
/// back `[]` before the first revision) or unusable values (an empty value,
/// or one made only of `*`: a service that does not return or masks values)
/// says nothing about them: `false`, and only a change of the desired
/// values is sent (row `secrets` of [`shapes::ANSWER_SHAPES`]).
pub fn remote_secrets_differ(key: &HashKey, desired_hash: &str, remote: &[SecretValue]) -> bool {
    remote_secrets_compare(key, desired_hash, remote) == Some(true)
}

/// Whether the secret values the service returned differ from the desired
/// ones (`Some(true)`), equal them (`Some(false)`), or cannot be compared
/// (`None`: no values, or unusable ones; see [`remote_secrets_differ`]).
pub fn remote_secrets_compare(
    key: &HashKey,
    desired_hash: &str,
    remote: &[SecretValue],
) -> Option<bool> {
    use secrecy::ExposeSecret;
    let returned = !remote.is_empty()
        && remote.iter().all(|s| {
            let v = s.value.expose_secret();
            !v.is_empty() && !v.chars().all(|c| c == '*')
        });
    returned.then(|| key.secrets_hash(remote) != desired_hash)
}

/// The PATCH still due after the service answered a PATCH with `answer`:
/// empty when the service holds every value sent; anything else is a value
/// it drops or normalizes in a way no answer-shape rule explains
/// (docs/control-plane-api.md "Requests"). `sent` is the hash of the values
/// the service does not echo, as last sent. The operator and `agentctl
/// apply` read a PATCH back with this one function.
pub fn patch_read_back(
    key: &HashKey,
    body: &DeploymentCreate,
    answer: &Deployment,
    secrets_hash: &str,
    sent: Option<&str>,
) -> DeploymentPatch {
    let memory = Memory {
        send_secrets: remote_secrets_differ(key, secrets_hash, &answer.secrets),
        sent,
    };
    compute_patch(body, answer, &memory)
}

/// True when the patch creates a revision (docs/control-plane-api.md "Requests": non-null
/// `source_revision_config` values, `resource_spec` or `secrets`). A new
/// `install_command` or `build_command` is counted too: no source says,
/// but a build setting only takes effect in a new build, so the operator
/// treats it like `resource_spec` (and the emulator starts a revision). For
/// `secret_references` no source says either: this project assumes it
/// does, like `secrets`, since the agent server's environment changes.
pub fn creates_revision(patch: &DeploymentPatch) -> bool {
    patch.source_revision_config.is_some()
        || patch.secrets.is_some()
        || patch.secret_references.is_some()
        || patch.source_config.as_ref().is_some_and(|s| {
            s.resource_spec.is_some() || s.install_command.is_some() || s.build_command.is_some()
        })
}

/// Hex of the first 16 bytes of sha256 over `parts`, each preceded by a
/// separator: the digest behind [`fingerprint`] and [`patch_fingerprint`].
fn digest<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for part in parts {
        h.update(b"\0");
        h.update(part);
    }
    hex::encode(&h.finalize()[..16])
}

/// Fingerprint of a desired state: hex sha256 (first 16 bytes) of the
/// request body without its secrets, the keyed `secrets_hash` of the
/// secrets, and `extra` (e.g. the control plane and the redeploy request).
/// Two passes with the same inputs get the same value, so a request the
/// service rejected is recognised without keeping any secret.
pub fn fingerprint(body: &DeploymentCreate, secrets_hash: &str, extra: &[&str]) -> String {
    let without_secrets = serde_json::to_vec(&DeploymentCreate {
        secrets: Vec::new(),
        ..body.clone()
    })
    .unwrap_or_default();
    // The display name is not in the create body: added when set, so that
    // the fingerprints of other resources stay what they were.
    let display = body.display_name.as_deref().map(str::as_bytes);
    digest(
        [without_secrets.as_slice(), secrets_hash.as_bytes()]
            .into_iter()
            .chain(extra.iter().map(|e| e.as_bytes()))
            .chain(display),
    )
}

/// Fingerprint of a PATCH body (hex sha256, first 16 bytes), with secret
/// values replaced by `secrets_hash`, so that it can be kept in status.
pub fn patch_fingerprint(patch: &DeploymentPatch, secrets_hash: &str) -> String {
    let without_secrets = serde_json::to_vec(&DeploymentPatch {
        secrets: None,
        ..patch.clone()
    })
    .unwrap_or_default();
    let secrets = patch.secrets.as_ref().map(|_| secrets_hash.as_bytes());
    digest(std::iter::once(without_secrets.as_slice()).chain(secrets))
}

/// Names of the top-level fields a PATCH sets, e.g.
/// `["source_config.resource_spec", "secrets"]` (never values).
pub fn patch_fields(patch: &DeploymentPatch) -> Vec<&'static str> {
    let mut fields = Vec::new();
    if let Some(sc) = &patch.source_config {
        if sc.build_on_push.is_some() {
            fields.push("source_config.build_on_push");
        }
        if sc.custom_url.is_some() {
            fields.push("source_config.custom_url");
        }
        if sc.install_command.is_some() {
            fields.push("source_config.install_command");
        }
        if sc.build_command.is_some() {
            fields.push("source_config.build_command");
        }
        if sc.resource_spec.is_some() {
            fields.push("source_config.resource_spec");
        }
    }
    if patch.source_revision_config.is_some() {
        fields.push("source_revision_config");
    }
    if patch.secrets.is_some() {
        fields.push("secrets");
    }
    if patch.secret_references.is_some() {
        fields.push("secret_references");
    }
    if patch.display_name.is_some() {
        fields.push("display_name");
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::deployment::Source;
    use serde_json::json;

    fn spec() -> AgentDeploymentSpec {
        serde_json::from_value(json!({
            "source": "github",
            "sourceConfig": {
                "integrationId": "3f0d1c2e-0000-4000-8000-000000000000",
                "repoUrl": "https://github.com/acme/agent",
                "deploymentType": "dev",
                "buildOnPush": false,
                "resourceSpec": {"minScale": 1}
            },
            "sourceRevisionConfig": {"repoRef": "main", "langgraphConfigPath": "langgraph.json"}
        }))
        .unwrap()
    }

    fn remote_of(create: &DeploymentCreate) -> wire::Deployment {
        wire::Deployment {
            id: "d".into(),
            tenant_id: None,
            display_name: None,
            is_preview: None,
            name: create.name.clone(),
            source: Some(create.source.clone()),
            source_config: wire::SourceConfig {
                custom_url: Some("http://x".into()),
                resource_spec: Some(json!({"min_scale": 1, "cpu": 1})),
                ..create.source_config.clone()
            },
            source_revision_config: wire::SourceRevisionConfig {
                repo_commit_sha: Some("abc".into()),
                ..create.source_revision_config.clone()
            },
            secrets: create.secrets.clone(),
            secret_references: create.secret_references.clone(),
            status: Some("READY".into()),
            latest_revision_id: Some("r".into()),
            active_revision_id: None,
            image_version: None,
            created_at: None,
            updated_at: None,
        }
    }

    #[test]
    fn maps_camel_case_spec_to_snake_case_wire() {
        let body = create_body("my-agent", &spec(), vec![SecretValue::new("A", "b")]);
        let v = serde_json::to_value(&body).unwrap();
        assert_eq!(v["source"], "github");
        assert_eq!(
            v["source_config"]["integration_id"],
            "3f0d1c2e-0000-4000-8000-000000000000"
        );
        assert_eq!(v["source_config"]["build_on_push"], false);
        assert_eq!(v["source_config"]["resource_spec"]["min_scale"], 1);
        assert_eq!(
            v["source_revision_config"]["langgraph_config_path"],
            "langgraph.json"
        );
        assert_eq!(v["secrets"][0]["value"], "b");
        assert_eq!(spec().source, Source::Github);
    }

    #[test]
    fn unchanged_remote_needs_no_patch() {
        let body = create_body("a", &spec(), vec![SecretValue::new("A", "b")]);
        assert!(compute_patch(&body, &remote_of(&body), &Memory::secrets(false)).is_empty());
    }

    /// `spec.displayName`: never in the create body, sent by PATCH when it
    /// differs (no revision), never cleared.
    #[test]
    fn display_name_is_patched_never_created_never_cleared() {
        let mut named = spec();
        named.display_name = Some("Support agent".into());
        let body = create_body("a", &named, vec![]);
        let sent = serde_json::to_value(body.as_sent()).unwrap();
        assert!(sent.get("display_name").is_none(), "{sent}");
        let mut remote = remote_of(&body);
        let patch = compute_patch(&body, &remote, &Memory::secrets(false));
        assert_eq!(patch.display_name.as_deref(), Some("Support agent"));
        assert_eq!(patch_fields(&patch), ["display_name"]);
        assert!(!creates_revision(&patch));
        let wire = serde_json::to_value(&patch).unwrap();
        assert_eq!(wire, json!({"display_name": "Support agent"}));
        remote.display_name = Some("Support agent".into());
        assert!(compute_patch(&body, &remote, &Memory::secrets(false)).is_empty());
        remote.display_name = Some("Renamed in the UI".into());
        assert_eq!(
            compute_patch(&body, &remote, &Memory::secrets(false)).display_name,
            Some("Support agent".into()),
            "set back like any field"
        );
        // Removed from the spec: the remote value stays.
        let plain = create_body("a", &spec(), vec![]);
        assert!(compute_patch(&plain, &remote, &Memory::secrets(false)).is_empty());
        // A new display name is a new desired state.
        assert_ne!(fingerprint(&body, "h", &[]), fingerprint(&plain, "h", &[]));
    }

    #[test]
    fn an_image_read_back_by_tag_and_digest_is_the_image_sent_by_digest() {
        let d = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let e = "sha256:1123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let image_spec = |image: &str| -> AgentDeploymentSpec {
            serde_json::from_value(json!({
                "source": "external_docker",
                "sourceRevisionConfig": {"imageUri": image}
            }))
            .unwrap()
        };
        let cases = [
            (
                format!("r.example/acme/agent@{d}"),
                format!("r.example/acme/agent:v1@{d}"),
                false,
            ),
            (
                format!("r.example/acme/agent@{d}"),
                format!("r.example/acme/agent@{d}"),
                false,
            ),
            (
                format!("r.example/acme/agent@{e}"),
                format!("r.example/acme/agent:v1@{d}"),
                true,
            ),
            (
                format!("r.example/acme/agent@{e}"),
                format!("r.example/acme/agent@{d}"),
                true,
            ),
            (
                "r.example/acme/agent:v1".to_owned(),
                "r.example/acme/agent:v1".to_owned(),
                false,
            ),
            (
                "r.example/acme/agent:v1".to_owned(),
                format!("r.example/acme/agent:v1@{d}"),
                true,
            ),
        ];
        for (sent, read, patched) in cases {
            let body = create_body("a", &image_spec(&sent), vec![]);
            let mut remote = remote_of(&body);
            remote.source_config.custom_url = None;
            remote.source_revision_config.image_uri = Some(read.clone());
            let patch = compute_patch(&body, &remote, &Memory::secrets(false));
            assert_eq!(
                patch.source_revision_config.is_some(),
                patched,
                "{sent} read back as {read}: {patch:?}"
            );
        }
    }

    #[test]
    fn repo_ref_change_patches_only_the_revision_config() {
        let body = create_body("a", &spec(), vec![]);
        let remote = remote_of(&body);
        let mut s = spec();
        s.source_revision_config.repo_ref = Some("v2".into());
        let patch = compute_patch(
            &create_body("a", &s, vec![]),
            &remote,
            &Memory::secrets(false),
        );
        assert_eq!(
            serde_json::to_value(&patch).unwrap(),
            json!({"source_revision_config": {"repo_ref": "v2", "langgraph_config_path": "langgraph.json"}})
        );
    }

    #[test]
    fn build_on_push_alone_creates_no_revision_and_resource_spec_is_merged() {
        let body = create_body("a", &spec(), vec![]);
        let remote = remote_of(&body);
        let mut s = spec();
        s.source_config.build_on_push = Some(true);
        s.source_config.resource_spec = Some(json!({"minScale": 2}).as_object().unwrap().clone());
        let patch = compute_patch(
            &create_body("a", &s, vec![]),
            &remote,
            &Memory::secrets(false),
        );
        assert_eq!(
            serde_json::to_value(&patch).unwrap(),
            json!({"source_config": {"build_on_push": true, "resource_spec": {"min_scale": 2, "cpu": 1}}})
        );
    }

    #[test]
    fn build_commands_map_to_the_wire_and_a_change_is_a_revision() {
        let mut s = spec();
        s.source_config.install_command = Some("npm ci".into());
        s.source_config.build_command = Some("npm run build".into());
        let body = create_body("a", &s, vec![]);
        let v = serde_json::to_value(&body).unwrap();
        assert_eq!(v["source_config"]["install_command"], "npm ci");
        assert_eq!(v["source_config"]["build_command"], "npm run build");
        let remote = remote_of(&body);
        assert!(compute_patch(&body, &remote, &Memory::secrets(false)).is_empty());
        s.source_config.build_command = Some("npm run build:prod".into());
        let patch = compute_patch(
            &create_body("a", &s, vec![]),
            &remote,
            &Memory::secrets(false),
        );
        assert_eq!(
            serde_json::to_value(&patch).unwrap(),
            json!({"source_config": {"build_command": "npm run build:prod"}})
        );
        assert!(creates_revision(&patch));
        assert_eq!(patch_fields(&patch), ["source_config.build_command"]);
    }

    #[test]
    fn changed_secret_value_sends_all_secrets() {
        let body = create_body("a", &spec(), vec![SecretValue::new("A", "old")]);
        let remote = remote_of(&body);
        let new = create_body("a", &spec(), vec![SecretValue::new("A", "new")]);
        let key = HashKey::random();
        let stored = key.secrets_hash(&body.secrets);
        let changed = key.secrets_hash(&new.secrets) != stored;
        assert!(changed, "a changed value changes the hash");
        let patch = compute_patch(&new, &remote, &Memory::secrets(changed));
        assert_eq!(patch.secrets.as_ref().map(Vec::len), Some(1));
        assert!(patch.source_config.is_none() && patch.source_revision_config.is_none());
        assert!(creates_revision(&patch));
        let same = key.secrets_hash(&[SecretValue::new("A", "old")]);
        assert_eq!(same, stored, "same values, same hash");
        assert!(!stored.contains("old"));
        assert!(compute_patch(&body, &remote, &Memory::secrets(false)).is_empty());
    }

    #[test]
    fn a_renamed_secret_is_sent_even_with_the_same_hash_input_order() {
        let body = create_body("a", &spec(), vec![SecretValue::new("A", "v")]);
        let remote = remote_of(&body);
        let renamed = create_body("a", &spec(), vec![SecretValue::new("B", "v")]);
        assert!(
            compute_patch(&renamed, &remote, &Memory::secrets(false))
                .secrets
                .is_some()
        );
        let key = HashKey::random();
        let h1 = key.secrets_hash(&[SecretValue::new("A", "1"), SecretValue::new("B", "2")]);
        let h2 = key.secrets_hash(&[SecretValue::new("B", "2"), SecretValue::new("A", "1")]);
        assert_eq!(h1, h2);
    }

    #[test]
    fn secret_references_are_mapped_and_patched_as_a_set() {
        let mut s = spec();
        s.source = Source::ExternalDocker;
        s.secret_references = serde_json::from_value(json!([
            {"name": "B", "secretName": "env", "secretKey": "b"},
            {"name": "A", "secretName": "env", "secretKey": "a"}
        ]))
        .unwrap();
        let body = create_body("a", &s, vec![]);
        let v = serde_json::to_value(&body).unwrap();
        assert_eq!(
            v["secret_references"],
            json!([
                {"name": "A", "secret_name": "env", "secret_key": "a"},
                {"name": "B", "secret_name": "env", "secret_key": "b"}
            ])
        );
        let mut remote = remote_of(&body);
        remote.secret_references.reverse();
        assert!(
            compute_patch(&body, &remote, &Memory::secrets(false)).is_empty(),
            "order"
        );
        remote.secret_references[0].secret_key = "other".into();
        let patch = compute_patch(&body, &remote, &Memory::secrets(false));
        assert_eq!(
            patch.secret_references.as_ref(),
            Some(&body.secret_references)
        );
        assert!(patch.secrets.is_none() && creates_revision(&patch));
        assert_eq!(patch_fields(&patch), ["secret_references"]);
        // Removing every reference sends an empty list.
        let none = create_body("a", &spec(), vec![]);
        assert_eq!(
            compute_patch(&none, &remote, &Memory::secrets(false)).secret_references,
            Some(vec![])
        );
        // A body without references does not carry the key at all.
        assert!(
            serde_json::to_value(&none)
                .unwrap()
                .get("secret_references")
                .is_none()
        );
    }

    #[test]
    fn remote_secret_values_are_compared_by_keyed_hash() {
        let desired = [SecretValue::new("A", "v1"), SecretValue::new("B", "v2")];
        let key = HashKey::random();
        let hash = key.secrets_hash(&desired);
        let same = [SecretValue::new("B", "v2"), SecretValue::new("A", "v1")];
        assert!(!remote_secrets_differ(&key, &hash, &same));
        let changed = [SecretValue::new("A", "v1"), SecretValue::new("B", "x")];
        assert!(remote_secrets_differ(&key, &hash, &changed));
        let extra = [
            SecretValue::new("A", "v1"),
            SecretValue::new("B", "v2"),
            SecretValue::new("C", "v3"),
        ];
        assert!(remote_secrets_differ(&key, &hash, &extra));
        let masked = [SecretValue::new("A", "****"), SecretValue::new("B", "")];
        assert!(
            !remote_secrets_differ(&key, &hash, &masked),
            "values not returned"
        );
        // Under another key (rotated): every returned value differs.
        assert!(remote_secrets_differ(&HashKey::random(), &hash, &same));
        // A body with a differing value sends the whole list.
        let body = create_body("a", &spec(), desired.to_vec());
        let mut remote = remote_of(&body);
        remote.secrets = changed.to_vec();
        let differ = remote_secrets_differ(&key, &hash, &remote.secrets);
        assert_eq!(
            compute_patch(&body, &remote, &Memory::secrets(differ))
                .secrets
                .map(|s| s.len()),
            Some(2)
        );
    }

    #[test]
    fn fingerprints_follow_the_inputs_and_never_show_a_value() {
        let body = create_body("a", &spec(), vec![SecretValue::new("A", "s3cret")]);
        let key = HashKey::random();
        let hash = key.secrets_hash(&body.secrets);
        let f = fingerprint(&body, &hash, &["cp", ""]);
        assert_eq!(f, fingerprint(&body, &hash, &["cp", ""]));
        assert_ne!(f, fingerprint(&body, &hash, &["cp", "redeploy-1"]));
        let other = key.secrets_hash(&[SecretValue::new("A", "other")]);
        assert_ne!(f, fingerprint(&body, &other, &["cp", ""]));
        assert!(!f.contains("s3cret") && f.len() == 32);
        let patch = DeploymentPatch {
            secrets: Some(body.secrets.clone()),
            ..Default::default()
        };
        assert_ne!(
            patch_fingerprint(&patch, &hash),
            patch_fingerprint(&patch, &other)
        );
        assert_eq!(
            patch_fingerprint(&DeploymentPatch::default(), &hash),
            patch_fingerprint(&DeploymentPatch::default(), &other),
            "a patch without secrets does not depend on them"
        );
    }
}
