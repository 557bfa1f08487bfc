//! Admission rules of the CRDs, shared by the schema (OpenAPI patterns and
//! CEL rules the API server enforces) and the operator's own check before
//! any remote call (`api::preflight`). Constants and rule
//! builders only: no CRD type is used here, so the types and
//! `api::resource_spec` can use them without a cycle.
//!
//! The rule of thumb (issue "Reliability under crashes, faults and hostile
//! input", item 5): whatever the control plane would refuse is refused at
//! admission with a message a human understands; where the real rule is
//! unknown, the CRD may be stricter than the service. Sources:
//! docs/control-plane-api.md "Deployment", "Build commands" and "Reserved
//! variable names".
//!
//! Every regular expression here is RE2 syntax (what the API server uses for
//! `pattern` and CEL `matches`) and also valid for the `regex` crate.
//!
//! The rules of the service itself (reserved secret names, build commands),
//! which the emulator enforces too, live in the `control-plane-wire` crate
//! ([`control_plane_wire::rules`]) and are re-exported here, so the CRD
//! schema, the preflight and the emulator share one copy.

pub use control_plane_wire::rules::{
    BUILD_COMMAND_MESSAGE, BUILD_COMMAND_PATTERN, MAX_COMMAND_LENGTH, RESERVED_NAMES,
    SELF_HOSTED_ONLY_NAMES, check_build_command,
};

/// A uuid in its canonical text form (any case), e.g. an integration,
/// listener or deployment id (docs/control-plane-api.md "Deployment": `integration_id`,
/// `listener_id`, `id` are uuids).
pub const UUID_PATTERN: &str =
    r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";

/// An environment variable name: `[A-Za-z_][A-Za-z0-9_]*` (POSIX portable
/// names; the agent server reads secrets as environment variables).
pub const ENV_NAME_PATTERN: &str = r"^[A-Za-z_][A-Za-z0-9_]*$";

/// A DNS-1123 label (Kubernetes namespace names, at most 63 characters).
pub const DNS_LABEL_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

/// A DNS-1123 subdomain (names of Kubernetes objects such as Secrets, at most
/// 253 characters).
pub const DNS_SUBDOMAIN_PATTERN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// A key of a Secret's `data` (Kubernetes' rule for ConfigMap and Secret keys).
pub const SECRET_KEY_PATTERN: &str = r"^[-._a-zA-Z0-9]+$";

/// A remote deployment name (docs/control-plane-api.md "Deployment": the official clients keep
/// names to `[a-z0-9-]`).
pub const DEPLOYMENT_NAME_PATTERN: &str = r"^[a-z0-9-]+$";

/// An `https://` URL with a host name or address, an optional port and a
/// path of printable ASCII (no spaces or control characters); `http://` only
/// for a loopback host. Applies to `repoUrl`, `customUrl` and the control
/// plane `url`.
pub const URL_PATTERN: &str = r"^(https://[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?|http://(localhost|127\.0\.0\.1|\[::1\]))(:[0-9]{1,5})?(/[!-~]*)?$";

/// An image reference in the grammar of the container registries
/// (`[registry[:port]/]repository[:tag][@digest]`, repository components in
/// lowercase): no spaces, no shell characters, no control characters.
pub const IMAGE_PATTERN: &str = r"^([A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*(:[0-9]{1,5})?/)?[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@[A-Za-z][A-Za-z0-9]*([-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$";

/// A git branch or `refs/tags/<tag>` as `git check-ref-format` allows it,
/// restricted to letters, digits, `.`, `_`, `-` and `/`: no `..`, no `//`,
/// no leading `/`, `-` or `.`, no trailing `/` or `.`.
pub const REPO_REF_PATTERN: &str = r"^[A-Za-z0-9_]([A-Za-z0-9._/-]*[A-Za-z0-9_-])?$";

/// Longest accepted `repoUrl`, `customUrl` or control plane `url`, in bytes.
pub const MAX_URL_LENGTH: u32 = 2048;
/// Longest accepted `imageUri`, in bytes.
pub const MAX_IMAGE_LENGTH: u32 = 512;
/// Longest accepted `repoRef`, in bytes (git's own limit is lower in practice).
pub const MAX_REF_LENGTH: u32 = 255;
/// Longest accepted `langgraphConfigPath`, in bytes.
pub const MAX_PATH_LENGTH: u32 = 1024;
/// Longest accepted secret name, in bytes.
pub const MAX_ENV_NAME_LENGTH: u32 = 256;
/// Most secrets of one AgentDeployment.
pub const MAX_SECRETS: u32 = 100;

/// `names` as a CEL list literal, e.g. `['A', 'B']`.
fn cel_list(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
    format!("[{}]", quoted.join(", "))
}

/// CEL rule on a secret's `name`: not one of [`RESERVED_NAMES`].
pub fn reserved_name_rule() -> String {
    format!("!(self in {})", cel_list(RESERVED_NAMES))
}

/// CEL message expression naming the reserved secret name.
pub const RESERVED_NAME_MESSAGE: &str = "'secret name ' + self + ' is reserved by the platform for its own use (docs/control-plane-api.md, Reserved variable names); remove it'";

/// CEL rule on the spec: the names of [`SELF_HOSTED_ONLY_NAMES`] only with a
/// listener (`sourceConfig.listenerId` or `listenerRef`).
pub fn self_hosted_names_rule() -> String {
    format!(
        "!has(self.secrets) || (has(self.sourceConfig) && (has(self.sourceConfig.listenerId) || has(self.sourceConfig.listenerRef))) || self.secrets.all(s, !(s.name in {}))",
        cel_list(SELF_HOSTED_ONLY_NAMES)
    )
}

/// Message of [`self_hosted_names_rule`].
pub fn self_hosted_names_message() -> String {
    format!(
        "secret names {} are allowed only on a self-hosted data plane (set sourceConfig.listenerId or listenerRef)",
        SELF_HOSTED_ONLY_NAMES.join(", ")
    )
}

/// CEL rule for a string that must match [`URL_PATTERN`].
pub fn url_rule() -> String {
    format!("self.matches('{}')", cel_escape(URL_PATTERN))
}

/// CEL rule for a string that must match [`IMAGE_PATTERN`].
pub fn image_rule() -> String {
    format!("self.matches('{}')", cel_escape(IMAGE_PATTERN))
}

/// CEL rule for an install or build command: [`BUILD_COMMAND_PATTERN`].
pub fn build_command_rule() -> String {
    format!("self.matches('{}')", cel_escape(BUILD_COMMAND_PATTERN))
}

/// CEL rule for a `repoRef`: [`REPO_REF_PATTERN`], no `..` and no `//`.
pub fn repo_ref_rule() -> String {
    format!(
        "self.matches('{}') && !self.contains('..') && !self.contains('//') && !self.endsWith('.lock')",
        cel_escape(REPO_REF_PATTERN)
    )
}

/// CEL rule for a path inside the repository: relative, no `..` segment, no
/// control characters, no backslash.
pub fn relative_path_rule() -> String {
    format!(
        "!self.startsWith('/') && !self.matches('{}') && !self.matches('{}')",
        cel_escape(r"(^|/)\.\.(/|$)"),
        cel_escape(r"[\x00-\x1f\x7f\\]")
    )
}

/// `pattern` written inside a single-quoted CEL string literal: backslashes
/// doubled (CEL string escapes) and single quotes escaped.
fn cel_escape(pattern: &str) -> String {
    pattern.replace('\\', "\\\\").replace('\'', "\\'")
}

/// CEL condition over the whole AgentDeployment (`oldSelf`): a remote
/// deployment exists, i.e. the operator recorded its id in
/// `status.deploymentId`. Until then every field may change: nothing on the
/// control plane depends on it yet (a typo found by `IntegrationNotFound`,
/// `RepositoryNotAccessible` or `NameConflict` can be fixed in place).
pub const REMOTE_EXISTS: &str = "has(oldSelf.status) && has(oldSelf.status.deploymentId)";

/// One admission check of a combined rule ([`all_of`]): a CEL condition
/// and the message a user reads when it is false.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    /// CEL condition that must hold (over `self`, and `oldSelf` in a
    /// transition rule).
    pub condition: String,
    /// Message when it does not: one line, plain text.
    pub message: String,
}

impl Check {
    /// The check `condition`, failing with `message`.
    pub fn new(condition: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            condition: condition.into(),
            message: message.into(),
        }
    }
}

/// `text` as a single-quoted CEL string literal ([`cel_escape`]).
fn cel_string(text: &str) -> String {
    format!("'{}'", cel_escape(text))
}

/// One CEL rule that holds when `skip` holds or else every check holds,
/// whose `messageExpression` names every check that fails, joined by `; `
/// (evaluated only when the rule fails, so it costs nothing on accepted
/// writes). The messages are concatenated rather than filtered and joined
/// as a list: kube-apiserver estimates the cost of a list's strings as if
/// each could be as long as a request, and refuses such a CRD.
///
/// Why one rule and not one per check: kube-apiserver runs every rule of a
/// CRD on every write of the object (status and metadata patches
/// included), and each field access in a rule builds the map of the
/// schema's properties at that level afresh (`AgentDeploymentSpec` has 20).
/// One rule reads the guard once, and `skip` (the spec did not change)
/// saves the checks on the writes that leave the spec as it was: the
/// operator's own. `hack/crd-write-cost.sh` measures what they cost.
pub fn all_of(skip: Option<&str>, checks: &[Check]) -> kube::core::Rule {
    let all = checks
        .iter()
        .map(|c| format!("({})", c.condition))
        .collect::<Vec<_>>()
        .join(" && ");
    let rule = match skip {
        Some(skip) => format!("{skip} || ({all})"),
        None => all,
    };
    let parts = checks
        .iter()
        .map(|c| {
            let message = cel_string(&format!("{SEPARATOR}{}", c.message));
            format!("(!({}) ? {message} : '')", c.condition)
        })
        .collect::<Vec<_>>()
        .join(" + ");
    let message = format!("({parts}){DROP_FIRST_SEPARATOR}");
    kube::core::Rule::new(rule).message(kube::core::Message::Expression(message))
}

/// What [`all_of`]'s `messageExpression` puts before each failing check's
/// message.
const SEPARATOR: &str = "; ";

/// How [`all_of`]'s `messageExpression` ends: without the first
/// [`SEPARATOR`].
const DROP_FIRST_SEPARATOR: &str = ".substring(2)";

/// The messages of a rule built by [`all_of`], read back from its
/// `messageExpression` in order (docs/reference.md lists them); `None` when
/// the expression has another shape. The expression is
/// `((!(c1) ? '; m1' : '') + (!(c2) ? '; m2' : '')).substring(2)`; a
/// condition may hold string literals and parentheses of its own, so it is
/// skipped by balance, not by searching for `?`.
pub fn all_of_messages(message_expression: &str) -> Option<Vec<String>> {
    let mut rest = message_expression
        .strip_prefix('(')?
        .strip_suffix(DROP_FIRST_SEPARATOR)?
        .strip_suffix(')')?;
    let mut messages = Vec::new();
    loop {
        let after = rest.strip_prefix("(!(")?;
        let end = balanced_end(after)?;
        let (message, after) = cel_literal(after[end..].strip_prefix(" ? ")?)?;
        messages.push(message.strip_prefix(SEPARATOR)?.to_owned());
        let after = after.strip_prefix(" : '')")?;
        if after.is_empty() {
            return Some(messages);
        }
        rest = after.strip_prefix(" + ")?;
    }
}

/// Byte offset just past the `)` that closes an already opened `(` in
/// `text`, skipping CEL string literals.
fn balanced_end(text: &str) -> Option<usize> {
    let mut depth = 1usize;
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            '\'' => loop {
                match chars.next()?.1 {
                    '\\' => {
                        chars.next()?;
                    }
                    '\'' => break,
                    _ => {}
                }
            },
            _ => {}
        }
    }
    None
}

/// The single-quoted CEL string literal at the start of `text` (as
/// [`cel_string`] writes it), unescaped, and what follows it.
fn cel_literal(text: &str) -> Option<(String, &str)> {
    let mut chars = text.strip_prefix('\'')?.char_indices();
    let mut out = String::new();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => out.push(chars.next()?.1),
            '\'' => return Some((out, &text[i + 2..])),
            c => out.push(c),
        }
    }
    None
}

/// `skip` of the AgentDeployment's transition rule ([`all_of`]): no remote
/// deployment exists yet ([`REMOTE_EXISTS`]), the write is a status write,
/// or the spec is unchanged.
///
/// A write of the status subresource keeps the stored spec, and a write of
/// the object keeps the stored status (kube-apiserver copies them before
/// validating), so a status that differs tells a status write, whose spec
/// is unchanged: told by the cheap test first, before the comparison of the
/// whole spec, which costs kube-apiserver more than the rest of such a
/// write's validation (its CEL evaluation looks every key up in the
/// schema). Measured in docs/BENCHMARKS.md, "Capacity".
pub fn uncreated_or_spec_unchanged() -> String {
    format!("!({REMOTE_EXISTS}) || self.status != oldSelf.status || self.spec == oldSelf.spec")
}

/// `skip` of a rule with `optionalOldSelf` ([`all_of`]): the value is
/// unchanged, so a write that leaves it as stored (a status or metadata
/// write) does not check it again. kube-apiserver would not refuse such a
/// write anyway: since Kubernetes 1.30 it ratchets, i.e. ignores the
/// errors of a value the write did not change.
pub const UNCHANGED: &str = "oldSelf.hasValue() && oldSelf.value() == self";

/// CEL condition over the whole AgentDeployment, checked once a remote
/// deployment exists ([`REMOTE_EXISTS`]): `spec.<path>` keeps its
/// effective value. `default` is the CEL expression that stands for an
/// unset field, with `{o}` for the object (`self` or `oldSelf`), so that
/// writing down the value already in effect (`deploymentType: dev` on a
/// `github` deployment that never set it) is accepted; `None`: set and unset
/// are different values.
pub fn frozen_condition(path: &str, default: Option<&str>) -> String {
    match default {
        Some(d) => format!(
            "(has(self.spec.{path}) ? self.spec.{path} : {}) == (has(oldSelf.spec.{path}) ? oldSelf.spec.{path} : {})",
            d.replace("{o}", "self"),
            d.replace("{o}", "oldSelf")
        ),
        None => format!(
            "has(self.spec.{path}) == has(oldSelf.spec.{path}) && (!has(self.spec.{path}) || self.spec.{path} == oldSelf.spec.{path})"
        ),
    }
}

/// Message of [`frozen_condition`] for `spec.<path>`.
pub fn frozen_message(path: &str) -> String {
    format!(
        "spec.{path} cannot change once the remote deployment exists (status.deploymentId is set): the control plane cannot change it on a deployment. It can change freely until the deployment is created. To change it now, create a new AgentDeployment"
    )
}

/// The fields of an AgentDeployment the control plane cannot change on an
/// existing deployment, with the CEL value of an unset one
/// ([`frozen_condition`]). Source: docs/control-plane-api.md "Deployment"
/// (the immutable fields).
pub const FROZEN_FIELDS: &[(&str, Option<&str>)] = &[
    ("source", None),
    ("name", Some("{o}.metadata.name")),
    ("sourceConfig.integrationId", None),
    ("sourceConfig.integrationRef", None),
    ("sourceConfig.repoUrl", None),
    (
        "sourceConfig.deploymentType",
        Some("({o}.spec.source == 'github' ? 'dev' : '')"),
    ),
    ("sourceConfig.listenerId", None),
    ("sourceConfig.listenerRef", None),
    ("sourceConfig.listenerConfig", None),
];

/// CEL condition over the whole AgentDeployment, checked once a remote
/// deployment exists: `spec.controlPlaneRef` names the same control plane
/// (its `kind` and `name`; unset counting as `AgentControlPlane` and
/// `default`). The deployment lives on that plane's
/// URL and workspace; a change would create a second deployment on the new
/// plane and leave the first one running unmanaged.
pub const CONTROL_PLANE_REF_CONDITION: &str = "(has(self.spec.controlPlaneRef) && has(self.spec.controlPlaneRef.name) ? self.spec.controlPlaneRef.name : 'default') == (has(oldSelf.spec.controlPlaneRef) && has(oldSelf.spec.controlPlaneRef.name) ? oldSelf.spec.controlPlaneRef.name : 'default') && (has(self.spec.controlPlaneRef) && has(self.spec.controlPlaneRef.kind) ? self.spec.controlPlaneRef.kind : 'AgentControlPlane') == (has(oldSelf.spec.controlPlaneRef) && has(oldSelf.spec.controlPlaneRef.kind) ? oldSelf.spec.controlPlaneRef.kind : 'AgentControlPlane')";

/// Message of [`CONTROL_PLANE_REF_CONDITION`]: what happens instead, and
/// the move recipe.
pub const CONTROL_PLANE_REF_MESSAGE: &str = "spec.controlPlaneRef cannot change once the remote deployment exists (status.deploymentId is set): the deployment lives on that control plane, and a change would leave it running unmanaged while a second one is created. To move to another control plane, create a new AgentDeployment (another metadata.name) on it and delete this one: its deletionPolicy decides whether the old deployment is deleted (Delete) or left running (Orphan); see docs/RENAME-AND-MOVE.md";

/// CEL condition over the whole AgentDeployment, checked once a remote
/// exists: `spec.deploymentId` is either unset (when it was) or the id in
/// `status.deploymentId`: adding the id already in effect is accepted,
/// naming another one or removing it is not. Before that, a mistyped id
/// (`AdoptionFailed`) can be corrected.
pub const DEPLOYMENT_ID_CONDITION: &str = "has(self.spec.deploymentId) ? self.spec.deploymentId == oldSelf.status.deploymentId : !has(oldSelf.spec.deploymentId)";

/// Message of [`DEPLOYMENT_ID_CONDITION`].
pub const DEPLOYMENT_ID_MESSAGE: &str = "spec.deploymentId cannot change or be removed once the remote deployment exists; it may only name the deployment in status.deploymentId. To manage another deployment, create a new AgentDeployment";

/// CEL condition over the whole AgentDeployment, checked once a remote
/// exists: the last entry of `spec.secrets` cannot be removed. The control
/// plane reads an empty `secrets` list as "unchanged" (docs/control-plane-api.md
/// "Requests", Patch), so the remote environment would keep the removed
/// variables while the spec says there are none. Removing some of them
/// works: the complete list without them is sent.
pub const SECRETS_KEPT_CONDITION: &str = "!has(oldSelf.spec.secrets) || size(oldSelf.spec.secrets) == 0 || (has(self.spec.secrets) && size(self.spec.secrets) > 0)";

/// Message of [`SECRETS_KEPT_CONDITION`].
pub const SECRETS_KEPT_MESSAGE: &str = "spec.secrets cannot become empty once the remote deployment exists: the control plane reads an empty environment as 'unchanged', so the variables would stay on the deployment. Keep at least one entry (to revoke a leaked value, rotate it at its issuer and point the entry at the new value), or create a new AgentDeployment";

/// CEL condition over the whole AgentDeployment, checked once a remote
/// exists: `spec.sourceConfig.<field>` cannot be removed (the control plane
/// cannot clear it: an omitted field is left as it is).
pub fn kept_condition(field: &str) -> String {
    format!("!has(oldSelf.spec.sourceConfig.{field}) || has(self.spec.sourceConfig.{field})")
}

/// Message of [`kept_condition`].
pub fn kept_message(field: &str, instead: &str) -> String {
    format!(
        "spec.sourceConfig.{field} cannot be removed once the remote deployment exists: the control plane keeps a value that is not sent, so the removal would not take effect; {instead}"
    )
}

/// The `sourceConfig` fields that cannot be removed once a remote exists,
/// with what to do instead ([`kept_condition`]). Source:
/// docs/control-plane-api.md "Deployment" (`custom_url` and
/// `build_on_push` cannot be cleared) and "Build commands".
pub const KEPT_FIELDS: &[(&str, &str)] = &[
    ("customUrl", "set the URL you want instead"),
    ("buildOnPush", "set it to false instead"),
    ("installCommand", "set the command you want instead"),
    ("buildCommand", "set the command you want instead"),
];

/// The checks of the AgentDeployment's transition rule except the
/// `resourceSpec` one (which `api::resource_spec` adds): the frozen fields,
/// `spec.deploymentId`, the secrets and the kept fields, in this order.
pub fn remote_exists_checks() -> Vec<Check> {
    let frozen = FROZEN_FIELDS
        .iter()
        .map(|(path, default)| Check::new(frozen_condition(path, *default), frozen_message(path)));
    let kept = KEPT_FIELDS
        .iter()
        .map(|(field, instead)| Check::new(kept_condition(field), kept_message(field, instead)));
    frozen
        .chain([
            Check::new(CONTROL_PLANE_REF_CONDITION, CONTROL_PLANE_REF_MESSAGE),
            Check::new(DEPLOYMENT_ID_CONDITION, DEPLOYMENT_ID_MESSAGE),
            Check::new(SECRETS_KEPT_CONDITION, SECRETS_KEPT_MESSAGE),
        ])
        .chain(kept)
        .collect()
}

/// CEL rule on the spec: no `sourceConfig.deploymentType` with `source:
/// external_docker`. The control plane refuses it there (400
/// "'source_config.deployment_type' is not allowed for source
/// 'external_docker'"), and both official CLIs leave it out for images
/// (docs/control-plane-api.md "Requests as the official clients send them").
pub const DEPLOYMENT_TYPE_IMAGE_RULE: &str =
    "self.source != 'external_docker' || !has(self.sourceConfig.deploymentType)";

/// Message of [`DEPLOYMENT_TYPE_IMAGE_RULE`] (and of the operator's own
/// check of objects stored before it).
pub const DEPLOYMENT_TYPE_IMAGE_MESSAGE: &str = "sourceConfig.deploymentType is only for source github: the control plane refuses it for external_docker (the platform chooses the type of an image deployment); remove it";

/// The deployment types that may scale to zero (docs/control-plane-api.md
/// "Deployment": `dev_zero`, `dev_free_zero`).
pub const SCALE_TO_ZERO_TYPES: [&str; 2] = ["dev_zero", "dev_free_zero"];

/// CEL rule on the spec: `resourceSpec.minScale` 0 only with a deployment
/// type that may scale to zero (docs/control-plane-api.md "Deployment":
/// the Terraform provider allows `min_scale` 0 only for `dev_zero`; the
/// project also allows `dev_free_zero`, the other type named for it). An
/// `external_docker` deployment has no type, so it cannot scale to zero.
pub const SCALE_TO_ZERO_RULE: &str = "!has(self.sourceConfig.resourceSpec) || !has(self.sourceConfig.resourceSpec.minScale) || self.sourceConfig.resourceSpec.minScale > 0 || (has(self.sourceConfig.deploymentType) && self.sourceConfig.deploymentType in ['dev_zero', 'dev_free_zero'])";

/// Message of [`SCALE_TO_ZERO_RULE`] (and of the operator's own check of
/// objects stored before it).
pub const SCALE_TO_ZERO_MESSAGE: &str = "sourceConfig.resourceSpec.minScale 0 (scale to zero) needs sourceConfig.deploymentType dev_zero or dev_free_zero: the control plane refuses it for other types, and an external_docker deployment has no type; set minScale to 1 or more";

/// The fields that only a `github` deployment reads: the platform builds it
/// from the repository, while an `external_docker` image is deployed as it
/// is (docs/control-plane-api.md "Deployment", "Build commands").
pub const GITHUB_ONLY_FIELDS: [&str; 5] = [
    "sourceConfig.buildOnPush",
    "sourceConfig.installCommand",
    "sourceConfig.buildCommand",
    "sourceRevisionConfig.repoRef",
    "sourceRevisionConfig.langgraphConfigPath",
];

/// CEL rule on the spec: none of [`GITHUB_ONLY_FIELDS`] on another source,
/// where the service would ignore them and the spec would say something
/// that never takes effect.
pub fn github_only_rule() -> String {
    let absent: Vec<String> = GITHUB_ONLY_FIELDS
        .iter()
        .map(|f| format!("!has(self.{f})"))
        .collect();
    format!("self.source == 'github' || ({})", absent.join(" && "))
}

/// Message of [`github_only_rule`].
pub const GITHUB_ONLY_MESSAGE: &str = "sourceConfig.buildOnPush, installCommand, buildCommand and sourceRevisionConfig.repoRef, langgraphConfigPath are only for source github: an external_docker image is deployed as it is, not built from a repository; remove them";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combined_rules_name_the_failing_checks_and_read_back() {
        let checks = [
            Check::new("(has(self.a) ? self.a : 'x') == 'y'", "it's a (first)"),
            Check::new("self.b != 'c) ? \\'d\\' :'", r"back\slash"),
            Check::new("true", "last"),
        ];
        let rule = all_of(Some("self == oldSelf"), &checks);
        assert!(rule.rule.starts_with("self == oldSelf || (((has(self.a)"));
        assert!(rule.rule.ends_with(" && (true))"));
        let Some(kube::core::Message::Expression(expr)) = &rule.message else {
            panic!("a messageExpression: {rule:?}");
        };
        assert!(expr.starts_with(
            "((!((has(self.a) ? self.a : 'x') == 'y') ? '; it\\'s a (first)' : '') + "
        ));
        assert!(expr.ends_with(" + (!(true) ? '; last' : '')).substring(2)"));
        let messages: Vec<&str> = checks.iter().map(|c| c.message.as_str()).collect();
        assert_eq!(all_of_messages(expr).unwrap(), messages);
        let one = "((!(x) ? '; only' : '')).substring(2)";
        assert_eq!(all_of_messages(one).unwrap(), ["only"]);
        for other in [
            "self.x",
            "((!(a ? 'm'",
            "'open",
            "'a' + 'b'",
            "().substring(2)",
        ] {
            assert_eq!(all_of_messages(other), None, "{other}");
        }
    }

    #[test]
    fn cel_literals_keep_the_patterns_intact() {
        // In CEL source every backslash of the pattern appears doubled.
        assert!(url_rule().contains(r"127\\.0\\.0\\.1"));
        assert!(!reserved_name_rule().contains("\n"));
        assert!(self_hosted_names_rule().contains("'PORT'"));
    }

    fn matches(pattern: &str, text: &str) -> bool {
        regex::Regex::new(pattern).unwrap().is_match(text)
    }

    #[test]
    fn patterns_accept_the_usual_and_refuse_the_hostile() {
        for ok in [
            "https://github.com/acme/agent",
            "https://git.example.com:8443/a/b.git",
            "http://127.0.0.1:8123/x",
            "http://localhost",
        ] {
            assert!(matches(URL_PATTERN, ok), "{ok}");
        }
        for bad in [
            "javascript:alert(1)",
            "http://example.com/a",
            "https://github.com/a b",
            "https://github.com/a\nb",
            "ftp://x",
            "https://",
        ] {
            assert!(!matches(URL_PATTERN, bad), "{bad}");
        }
        for ok in [
            "nginx",
            "nginx:1.27",
            "ghcr.io/acme/agent:1.0.0",
            "localhost:5000/agent",
            "registry.example.com:443/team/agent@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "docker.io/library/python:3.12-slim",
        ] {
            assert!(matches(IMAGE_PATTERN, ok), "{ok}");
        }
        for bad in [
            "ghcr.io/acme/agent:1; rm -rf /",
            "ghcr.io/Acme/Agent:1",
            "ghcr.io/acme/agent:1 ",
            "$(curl x)",
            "ghcr.io//agent",
            "",
        ] {
            assert!(!matches(IMAGE_PATTERN, bad), "{bad}");
        }
        for ok in ["main", "refs/tags/v1.2.3", "feature/x_y-z", "release-1.0"] {
            assert!(matches(REPO_REF_PATTERN, ok), "{ok}");
        }
        for bad in ["/main", "-x", "main/", "ma in", "main\u{0}", ".hidden"] {
            assert!(!matches(REPO_REF_PATTERN, bad), "{bad}");
        }
        assert!(matches(ENV_NAME_PATTERN, "OPENAI_API_KEY"));
        assert!(!matches(ENV_NAME_PATTERN, "MY-VAR"));
        assert!(!matches(ENV_NAME_PATTERN, "1X"));
        assert!(matches(
            UUID_PATTERN,
            "7d8b2f5e-3c1a-4e2b-9f6d-2a1b3c4d5e6f"
        ));
        assert!(!matches(UUID_PATTERN, "../../x"));
    }

    #[test]
    fn build_commands_allow_plain_commands_only() {
        for ok in [
            "npm ci",
            "yarn install --frozen-lockfile",
            "NODE_ENV=production pnpm run build",
            "npm run build -- --prod",
            "bun install @scope/pkg@1.2.3",
        ] {
            assert!(matches(BUILD_COMMAND_PATTERN, ok), "{ok}");
            assert_eq!(check_build_command("buildCommand", ok), Ok(()), "{ok}");
        }
        for bad in [
            "npm ci; rm -rf /",
            "npm ci && curl x",
            "npm ci || true",
            "npm ci | tee log",
            "echo `id`",
            "echo $(id)",
            "npm ci > out",
            "npm ci < in",
            "npm ci\nrm -rf /",
            "npm ci\u{7}",
            "echo 'x'",
            " npm ci",
            "",
        ] {
            assert!(!matches(BUILD_COMMAND_PATTERN, bad), "{bad:?}");
            let e = check_build_command("buildCommand", bad).unwrap_err();
            assert!(e.starts_with("buildCommand "), "{e}");
        }
        assert!(check_build_command("x", &"a".repeat(1025)).is_err());
        assert!(build_command_rule().contains("A-Za-z0-9"));
    }
}
