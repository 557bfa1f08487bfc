//! The data-plane pod policy, enforced by the operator itself: the rules of
//! the shipped ValidatingAdmissionPolicy (deploy/components/pod-policy/
//! policy.yaml, rendered the same by the Helm chart's
//! templates/podpolicy.yaml) as pure functions over a spec.
//!
//! The admission policy stops a hostile object before it is stored, but only
//! while it exists, and only at a create or a change of a field it polices:
//! an object stored before the policy (between `helm uninstall` and the next
//! install, or before the component was added) passes it untouched. The
//! operator, started with `--pod-policy` and the same two lists, refuses
//! such a spec before any request (`Stalled`, reason `PodPolicyRefused`),
//! so what the policy refuses is never deployed, whenever it was stored.
//!
//! The rules and their semantics are those of the policy, rule for rule:
//!
//! | policy validation | here |
//! | --- | --- |
//! | `hostPathVolumes`: a `resourceSpec.volumes` entry with `hostPath` | [`PodPolicy::check_deployment`] |
//! | `privileged`: an init container or sidecar whose `securityContext.privileged` is set to anything but `false` | the same |
//! | `addedCapabilities`: a non-empty `securityContext.capabilities.add` (`drop` is allowed) | the same |
//! | `rootUser`: a `securityContext.runAsUser` that is not an integer above 0 | the same |
//! | `resourceSpec.serviceAccountName` on `serviceAccountNames` (unset: allowed) | the same |
//! | `sourceConfig.listenerId` on `listenerIds`, any case (unset: allowed) | the same |
//! | AgentListener `spec.listenerId` on `listenerIds`, any case | [`PodPolicy::check_listener`] |
//!
//! A refusal names each failing rule with the field path, in the words of
//! the policy's `messageExpression`s, joined by `; `. Where the policy's CEL
//! would fail to evaluate (a `securityContext` that is not an object, a
//! `capabilities.add` without a size), its `failurePolicy: Fail` refuses
//! the object; so does this module, naming the field it cannot read.

use serde_json::{Map, Value};

use crate::api::deployment::AgentDeploymentSpec;

/// The prefix of every `resourceSpec` field path in a refusal.
const RESOURCE_SPEC: &str = "spec.sourceConfig.resourceSpec";

/// The data-plane pod policy's two lists, as the operator's flags give them
/// (`--pod-policy-service-account-names`, `--pod-policy-listener-ids`; the
/// policy's CEL variables `serviceAccountNames` and `listenerIds`). An empty
/// list allows none, like the policy's `[]`.
///
/// Source: deploy/components/pod-policy/policy.yaml (the variables and the
/// validations).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodPolicy {
    /// The values `resourceSpec.serviceAccountName` may take (compared
    /// exactly); an unset `serviceAccountName` is always allowed.
    pub service_account_names: Vec<String>,
    /// The listener uuids `sourceConfig.listenerId` and an AgentListener's
    /// `spec.listenerId` may name, compared case-insensitively.
    pub listener_ids: Vec<String>,
}

impl PodPolicy {
    /// The policy of two flag lists: each entry trimmed, empty entries
    /// dropped (`--pod-policy-listener-ids=` is an empty list).
    ///
    /// Errors: a ServiceAccount name that is not a DNS-1123 subdomain, or a
    /// listener id that is not a hyphenated uuid (the shapes the Helm
    /// chart's values.schema.json accepts), naming the flag and the entry:
    /// such an entry could never match.
    ///
    /// Source: deploy/components/pod-policy/policy.yaml, the variables
    /// `serviceAccountNames` and `listenerIds`;
    /// deploy/helm/agent-operator/values.schema.json, `podPolicy`.
    pub fn new<S: AsRef<str>>(
        service_account_names: &[S],
        listener_ids: &[S],
    ) -> Result<Self, String> {
        let entries = |list: &[S]| -> Vec<String> {
            list.iter()
                .map(|s| s.as_ref().trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect()
        };
        let policy = Self {
            service_account_names: entries(service_account_names),
            listener_ids: entries(listener_ids),
        };
        if let Some(bad) = policy
            .service_account_names
            .iter()
            .find(|n| !is_dns_subdomain(n))
        {
            return Err(format!(
                "--pod-policy-service-account-names: {bad:?} is not a ServiceAccount name (a DNS-1123 subdomain)"
            ));
        }
        if let Some(bad) = policy.listener_ids.iter().find(|id| !is_uuid(id)) {
            return Err(format!(
                "--pod-policy-listener-ids: {bad:?} is not a listener id (a hyphenated uuid)"
            ));
        }
        Ok(policy)
    }

    /// Checks an AgentDeployment's spec against every rule of the policy:
    /// `sourceConfig.resourceSpec` (hostPath volumes, privileged init
    /// containers and sidecars, added capabilities, `runAsUser` not an
    /// integer above 0, `serviceAccountName` not on the list) and
    /// `sourceConfig.listenerId` (not on the list, any case). A
    /// `listenerRef` is not checked here: it names an AgentListener, checked
    /// by [`Self::check_listener`]. Pure.
    ///
    /// Errors: every failing rule, each naming the field path and the rule
    /// in the policy's words, joined by `; `, e.g.
    /// `spec.sourceConfig.resourceSpec.serviceAccountName: root-sa is not on
    /// the data-plane pod policy's list serviceAccountNames`.
    ///
    /// Source: deploy/components/pod-policy/policy.yaml, the variables
    /// `hostPathVolumes`, `privileged`, `addedCapabilities`, `rootUser` and
    /// the first six validations.
    pub fn check_deployment(&self, spec: &AgentDeploymentSpec) -> Result<(), String> {
        let sc = &spec.source_config;
        let empty = Map::new();
        let rs = sc.resource_spec.as_ref().unwrap_or(&empty);
        let mut refusals = resource_spec_refusals(rs);
        if let Some(name) = rs.get("serviceAccountName")
            && !matches!(name, Value::String(n) if self.service_account_names.contains(n))
        {
            refusals.push(format!(
                "{RESOURCE_SPEC}.serviceAccountName: {} is not on the data-plane pod policy's list \
                 serviceAccountNames",
                cel_string(name)
            ));
        }
        if let Some(id) = &sc.listener_id
            && !self.allows_listener(id)
        {
            refusals.push(listener_refusal("spec.sourceConfig.listenerId", id));
        }
        joined(refusals)
    }

    /// Checks an AgentListener's `spec.listenerId` (or the one a
    /// `sourceConfig.listenerRef` resolves to, named `field`) against the
    /// list `listenerIds`, case-insensitively. Pure.
    ///
    /// Errors: `<field>: <id> is not on the data-plane pod policy's list
    /// listenerIds` (the policy's words, with `field` `spec.listenerId`).
    ///
    /// Source: deploy/components/pod-policy/policy.yaml, the variable
    /// `allowedListenerIds` and the last validation.
    pub fn check_listener(&self, field: &str, listener_id: &str) -> Result<(), String> {
        if self.allows_listener(listener_id) {
            Ok(())
        } else {
            Err(listener_refusal(field, listener_id))
        }
    }

    /// `id` is on the list `listenerIds`, any case (the policy's
    /// `lowerAscii()` on both sides).
    fn allows_listener(&self, id: &str) -> bool {
        self.listener_ids
            .iter()
            .any(|allowed| allowed.eq_ignore_ascii_case(id))
    }
}

fn listener_refusal(field: &str, id: &str) -> String {
    format!("{field}: {id} is not on the data-plane pod policy's list listenerIds")
}

/// `Ok` for no refusal, else the refusals joined by `; `.
fn joined(refusals: Vec<String>) -> Result<(), String> {
    if refusals.is_empty() {
        Ok(())
    } else {
        Err(refusals.join("; "))
    }
}

/// What the policy's list variables of a `resourceSpec` hold: the entries
/// (`volumes[NAME]`, `initContainers[NAME]`, `sidecars[NAME]`) that break
/// each rule, and the fields its CEL could not evaluate.
#[derive(Default)]
struct Findings {
    host_path_volumes: Vec<String>,
    privileged: Vec<String>,
    added_capabilities: Vec<String>,
    root_user: Vec<String>,
    /// `(field, what it should be)`: where the CEL fails to evaluate.
    unreadable: Vec<(String, &'static str)>,
}

/// The refusals of the four `resourceSpec` rules that look inside it, in
/// the policy's order (hostPath, privileged, capabilities, runAsUser), then
/// the fields the policy could not read.
fn resource_spec_refusals(rs: &Map<String, Value>) -> Vec<String> {
    findings(rs).refusals()
}

/// What the four `resourceSpec` rules find in `rs`: the hostPath volumes,
/// and in each init container and sidecar the privileged ones, the added
/// capabilities and the root users; a field of the wrong shape unreadable.
fn findings(rs: &Map<String, Value>) -> Findings {
    let mut f = Findings::default();
    match rs.get("volumes") {
        None => {}
        Some(Value::Array(volumes)) => {
            for (i, v) in volumes.iter().enumerate() {
                match v.as_object() {
                    Some(v) if v.contains_key("hostPath") => f
                        .host_path_volumes
                        .push(format!("volumes[{}]", entry_name(v, i))),
                    Some(_) => {}
                    None => f.unreadable.push((format!("volumes/{i}"), "an object")),
                }
            }
        }
        Some(_) => f.unreadable.push(("volumes".into(), "a list")),
    }
    for list in ["initContainers", "sidecars"] {
        match rs.get(list) {
            None => {}
            Some(Value::Array(containers)) => {
                for (i, c) in containers.iter().enumerate() {
                    match c.as_object() {
                        Some(c) => container(&mut f, &format!("{list}[{}]", entry_name(c, i)), c),
                        None => f.unreadable.push((format!("{list}/{i}"), "an object")),
                    }
                }
            }
            Some(_) => f.unreadable.push((list.into(), "a list")),
        }
    }
    f
}

impl Findings {
    /// The refusals of the findings, in the policy's order (hostPath,
    /// privileged, capabilities, runAsUser), then the fields the policy
    /// could not read.
    fn refusals(&self) -> Vec<String> {
        let rule = |entries: &[String], words: &str| {
            (!entries.is_empty())
                .then(|| format!("{RESOURCE_SPEC}.{}: {words}", entries.join(", ")))
        };
        [
            rule(
                &self.host_path_volumes,
                "hostPath volumes are forbidden by the data-plane pod policy",
            ),
            rule(
                &self.privileged,
                "securityContext.privileged is forbidden by the data-plane pod policy",
            ),
            rule(
                &self.added_capabilities,
                "securityContext.capabilities.add is forbidden by the data-plane pod policy (drop is allowed)",
            ),
            rule(
                &self.root_user,
                "securityContext.runAsUser must be a user id above 0 (not root) under the data-plane pod policy",
            ),
        ]
        .into_iter()
        .flatten()
        .chain(self.unreadable.iter().map(|(field, shape)| {
            format!(
                "{RESOURCE_SPEC}.{field} must be {shape} for the data-plane pod policy to check it"
            )
        }))
        .collect()
    }
}

/// The rules of one container (`at`: `initContainers[NAME]` or
/// `sidecars[NAME]`), as the policy's variables `privileged`,
/// `addedCapabilities` and `rootUser` test it.
fn container(f: &mut Findings, at: &str, c: &Map<String, Value>) {
    let sc = match c.get("securityContext") {
        None => return,
        Some(Value::Object(sc)) => sc,
        Some(_) => {
            f.unreadable
                .push((format!("{at}.securityContext"), "an object"));
            return;
        }
    };
    // `privileged != false`: anything but the boolean false, even "false".
    if sc
        .get("privileged")
        .is_some_and(|p| *p != Value::Bool(false))
    {
        f.privileged.push(at.to_owned());
    }
    match sc.get("capabilities") {
        None => {}
        Some(Value::Object(caps)) => match caps.get("add").map(cel_size) {
            None | Some(Some(0)) => {}
            Some(Some(_)) => f.added_capabilities.push(at.to_owned()),
            Some(None) => f
                .unreadable
                .push((format!("{at}.securityContext.capabilities.add"), "a list")),
        },
        Some(_) => f
            .unreadable
            .push((format!("{at}.securityContext.capabilities"), "an object")),
    }
    // `type(runAsUser) == int && runAsUser > 0`: 0, "1000", 1.5 are refused.
    if sc
        .get("runAsUser")
        .is_some_and(|u| u.as_i64().is_none_or(|u| u <= 0))
    {
        f.root_user.push(at.to_owned());
    }
}

/// CEL's `size()` of a JSON value: the length of a list, a string (in code
/// points) or a map; `None` where CEL's `size()` is an error.
fn cel_size(v: &Value) -> Option<usize> {
    match v {
        Value::Array(a) => Some(a.len()),
        Value::String(s) => Some(s.chars().count()),
        Value::Object(m) => Some(m.len()),
        _ => None,
    }
}

/// The entry's `name` as the policy's `string(x.name)` shows it; the index
/// where it has none.
fn entry_name(entry: &Map<String, Value>, index: usize) -> String {
    entry
        .get("name")
        .map_or_else(|| index.to_string(), cel_string)
}

/// A JSON value as CEL's `string()` shows it: a string as is, anything else
/// as JSON.
fn cel_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A DNS-1123 subdomain ([`crate::api::rules::DNS_SUBDOMAIN_PATTERN`], at
/// most 253 characters).
fn is_dns_subdomain(s: &str) -> bool {
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    s.len() <= 253 && s.split('.').all(label_ok)
}

/// A uuid in its hyphenated form ([`crate::api::listener::UUID_PATTERN`]).
fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const LISTENER_OK: &str = "0c9a4a0e-6f51-4e43-9d2a-8b7e6f5d4c3b";
    const LISTENER_OTHER: &str = "11111111-2222-4333-8444-555555555555";

    fn policy() -> PodPolicy {
        PodPolicy::new(&["agent-runner", "other-runner"], &[LISTENER_OK]).unwrap()
    }

    /// The clean self-hosted spec of the admission test
    /// (tests/integration/security_policy.rs `clean`), with `rs` merged into
    /// its resourceSpec and `sc` into its sourceConfig.
    fn spec(sc: Value, rs: Value) -> AgentDeploymentSpec {
        let mut resource_spec = json!({
            "serviceAccountName": "agent-runner",
            "labels": {"team": "support"},
            "volumes": [{"name": "scratch", "emptyDir": {}}],
            "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
            "initContainers": [{
                "name": "init", "image": "registry.example.com/init:1",
                "securityContext": {"privileged": false, "runAsUser": 1000,
                                    "allowPrivilegeEscalation": false,
                                    "capabilities": {"drop": ["ALL"]}}
            }],
            "sidecars": [{
                "name": "proxy", "image": "registry.example.com/proxy:1",
                "securityContext": {"runAsUser": 1000, "runAsNonRoot": true,
                                    "capabilities": {"add": []}}
            }]
        });
        for (k, v) in rs.as_object().unwrap() {
            resource_spec[k] = v.clone();
        }
        let mut source_config = json!({
            "customUrl": "https://agent.example.com",
            "listenerId": LISTENER_OK,
            "resourceSpec": resource_spec,
        });
        for (k, v) in sc.as_object().unwrap() {
            source_config[k] = v.clone();
        }
        serde_json::from_value(json!({
            "source": "external_docker",
            "sourceConfig": source_config,
            "sourceRevisionConfig": {"imageUri": "ghcr.io/acme/agent:1.0.0"},
        }))
        .expect("an AgentDeploymentSpec")
    }

    fn sidecar(security_context: Value) -> Value {
        json!([{"name": "proxy", "image": "registry.example.com/proxy:1",
                "securityContext": security_context}])
    }

    /// Asserts that the policy refuses each spec (the clean self-hosted
    /// one with the `sourceConfig` and `resourceSpec` changes of a case)
    /// with the case's whole message.
    fn assert_refused(cases: Vec<(&str, Value, Value, String)>) {
        let p = policy();
        for (what, sc, rs, message) in cases {
            assert_eq!(p.check_deployment(&spec(sc, rs)), Err(message), "{what}");
        }
    }

    /// hostPath volumes, and privileged containers (`privileged` given as a
    /// string too, `"false"` included).
    #[test]
    fn hostpath_volumes_and_privileged_containers_are_refused_with_their_messages() {
        let rs = RESOURCE_SPEC;
        // (what, sourceConfig changes, resourceSpec changes, the whole refusal)
        assert_refused(vec![
            (
                "hostPath volume",
                json!({}),
                json!({"volumes": [{"name": "scratch", "emptyDir": {}},
                                   {"name": "host", "hostPath": {"path": "/"}}]}),
                format!(
                    "{rs}.volumes[host]: hostPath volumes are forbidden by the data-plane pod policy"
                ),
            ),
            (
                "privileged init container",
                json!({}),
                json!({"initContainers": [{"name": "init", "image": "i:1",
                                           "securityContext": {"privileged": true}}]}),
                format!(
                    "{rs}.initContainers[init]: securityContext.privileged is forbidden by the data-plane pod policy"
                ),
            ),
            (
                "privileged sidecar, as a string",
                json!({}),
                json!({"sidecars": sidecar(json!({"privileged": "true"}))}),
                format!(
                    "{rs}.sidecars[proxy]: securityContext.privileged is forbidden by the data-plane pod policy"
                ),
            ),
            (
                "privileged \"false\" is not false",
                json!({}),
                json!({"sidecars": sidecar(json!({"privileged": "false"}))}),
                format!(
                    "{rs}.sidecars[proxy]: securityContext.privileged is forbidden by the data-plane pod policy"
                ),
            ),
        ]);
    }

    /// Added capabilities, and a `runAsUser` that is not a whole user id above 0.
    #[test]
    fn added_capabilities_and_root_users_are_refused_with_their_messages() {
        let rs = RESOURCE_SPEC;
        // (what, sourceConfig changes, resourceSpec changes, the whole refusal)
        assert_refused(vec![
            (
                "added capability",
                json!({}),
                json!({"sidecars": sidecar(json!({"capabilities": {"add": ["NET_ADMIN"]}}))}),
                format!(
                    "{rs}.sidecars[proxy]: securityContext.capabilities.add is forbidden by the data-plane pod policy (drop is allowed)"
                ),
            ),
            (
                "runAsUser 0",
                json!({}),
                json!({"sidecars": sidecar(json!({"runAsUser": 0}))}),
                format!(
                    "{rs}.sidecars[proxy]: securityContext.runAsUser must be a user id above 0 (not root) under the data-plane pod policy"
                ),
            ),
            (
                "runAsUser \"1000\" as a string",
                json!({}),
                json!({"sidecars": sidecar(json!({"runAsUser": "1000"}))}),
                format!(
                    "{rs}.sidecars[proxy]: securityContext.runAsUser must be a user id above 0 (not root) under the data-plane pod policy"
                ),
            ),
            (
                "runAsUser negative",
                json!({}),
                json!({"initContainers": [{"name": "init", "image": "i:1",
                                           "securityContext": {"runAsUser": -1}}]}),
                format!(
                    "{rs}.initContainers[init]: securityContext.runAsUser must be a user id above 0 (not root) under the data-plane pod policy"
                ),
            ),
            (
                "runAsUser 1.5",
                json!({}),
                json!({"sidecars": sidecar(json!({"runAsUser": 1.5}))}),
                format!(
                    "{rs}.sidecars[proxy]: securityContext.runAsUser must be a user id above 0 (not root) under the data-plane pod policy"
                ),
            ),
        ]);
    }

    /// A ServiceAccount or a listener not on the policy's lists.
    #[test]
    fn unlisted_service_accounts_and_listeners_are_refused_with_their_messages() {
        let rs = RESOURCE_SPEC;
        // (what, sourceConfig changes, resourceSpec changes, the whole refusal)
        assert_refused(vec![
            (
                "unlisted ServiceAccount",
                json!({}),
                json!({"serviceAccountName": "root-sa"}),
                format!(
                    "{rs}.serviceAccountName: root-sa is not on the data-plane pod policy's list serviceAccountNames"
                ),
            ),
            (
                "unlisted listener",
                json!({"listenerId": LISTENER_OTHER}),
                json!({}),
                format!(
                    "spec.sourceConfig.listenerId: {LISTENER_OTHER} is not on the data-plane pod policy's list listenerIds"
                ),
            ),
        ]);
    }

    /// Fields of a shape the policy cannot read.
    #[test]
    fn fields_the_policy_cannot_read_are_refused_with_their_messages() {
        let rs = RESOURCE_SPEC;
        // (what, sourceConfig changes, resourceSpec changes, the whole refusal)
        assert_refused(vec![
            (
                "a securityContext the policy cannot read",
                json!({}),
                json!({"sidecars": sidecar(json!("privileged"))}),
                format!(
                    "{rs}.sidecars[proxy].securityContext must be an object for the data-plane pod policy to check it"
                ),
            ),
            (
                "a capabilities.add without a size",
                json!({}),
                json!({"sidecars": sidecar(json!({"capabilities": {"add": 7}}))}),
                format!(
                    "{rs}.sidecars[proxy].securityContext.capabilities.add must be a list for the data-plane pod policy to check it"
                ),
            ),
        ]);
    }

    #[test]
    fn what_the_policy_admits_is_admitted() {
        // (what, sourceConfig changes, resourceSpec changes)
        let cases: Vec<(&str, Value, Value)> = vec![
            ("the clean self-hosted spec", json!({}), json!({})),
            (
                "an unset serviceAccountName, whatever the list",
                json!({}),
                json!({"serviceAccountName": null}),
            ),
            (
                "a listed listener in upper case",
                json!({"listenerId": LISTENER_OK.to_uppercase()}),
                json!({}),
            ),
            ("no listener", json!({"listenerId": null}), json!({})),
            (
                "capabilities.drop, and an empty add",
                json!({}),
                json!({"sidecars": sidecar(json!({"capabilities": {"drop": ["ALL"], "add": []}}))}),
            ),
            (
                "privileged false, runAsUser 1",
                json!({}),
                json!({"sidecars": sidecar(json!({"privileged": false, "runAsUser": 1}))}),
            ),
            (
                "containers without a securityContext",
                json!({}),
                json!({"sidecars": [{"name": "proxy", "image": "p:1"}], "initContainers": []}),
            ),
        ];
        let p = policy();
        for (what, sc, rs) in cases {
            let mut s = spec(sc, rs);
            // `null` stands for "remove the key".
            if let Some(rs) = s.source_config.resource_spec.as_mut() {
                rs.retain(|_, v| !v.is_null());
            }
            assert_eq!(p.check_deployment(&s), Ok(()), "{what}");
        }
        let mut bare = spec(json!({"listenerId": null}), json!({}));
        bare.source_config.resource_spec = None;
        assert_eq!(PodPolicy::default().check_deployment(&bare), Ok(()));
    }

    #[test]
    fn every_failing_rule_is_named_once_each_entry_listed() {
        let s = spec(
            json!({"listenerId": LISTENER_OTHER}),
            json!({
                "serviceAccountName": "root-sa",
                "volumes": [{"name": "a", "hostPath": {"path": "/"}},
                            {"name": "b", "hostPath": {"path": "/var"}}],
                "initContainers": [{"name": "init", "image": "i:1",
                                    "securityContext": {"privileged": true, "runAsUser": 0}}],
                "sidecars": sidecar(json!({"privileged": true,
                                           "capabilities": {"add": ["SYS_ADMIN"]}})),
            }),
        );
        let rs = RESOURCE_SPEC;
        assert_eq!(
            policy().check_deployment(&s),
            Err([
                format!("{rs}.volumes[a], volumes[b]: hostPath volumes are forbidden by the data-plane pod policy"),
                format!("{rs}.initContainers[init], sidecars[proxy]: securityContext.privileged is forbidden by the data-plane pod policy"),
                format!("{rs}.sidecars[proxy]: securityContext.capabilities.add is forbidden by the data-plane pod policy (drop is allowed)"),
                format!("{rs}.initContainers[init]: securityContext.runAsUser must be a user id above 0 (not root) under the data-plane pod policy"),
                format!("{rs}.serviceAccountName: root-sa is not on the data-plane pod policy's list serviceAccountNames"),
                format!("spec.sourceConfig.listenerId: {LISTENER_OTHER} is not on the data-plane pod policy's list listenerIds"),
            ]
            .join("; "))
        );
    }

    #[test]
    fn empty_lists_allow_no_service_account_and_no_listener() {
        let p = PodPolicy::new::<&str>(&[], &[]).unwrap();
        let err = p.check_deployment(&spec(json!({}), json!({}))).unwrap_err();
        assert!(
            err.contains("serviceAccountName: agent-runner is not on"),
            "{err}"
        );
        assert!(
            err.contains(&format!("listenerId: {LISTENER_OK} is not on")),
            "{err}"
        );
        assert!(p.check_listener("spec.listenerId", LISTENER_OK).is_err());
    }

    #[test]
    fn listener_ids_are_compared_in_any_case() {
        let upper = PodPolicy::new(&["a"], &[LISTENER_OK.to_uppercase().as_str()]).unwrap();
        // (listener id, admitted)
        let cases = [
            (LISTENER_OK.to_owned(), true),
            (LISTENER_OK.to_uppercase(), true),
            (LISTENER_OTHER.to_owned(), false),
        ];
        for (id, admitted) in cases {
            assert_eq!(
                policy().check_listener("spec.listenerId", &id).is_ok(),
                admitted,
                "{id}"
            );
            assert_eq!(
                upper.check_listener("spec.listenerId", &id).is_ok(),
                admitted,
                "{id}"
            );
        }
        assert_eq!(
            policy().check_listener("spec.listenerId", LISTENER_OTHER),
            Err(format!(
                "spec.listenerId: {LISTENER_OTHER} is not on the data-plane pod policy's list listenerIds"
            ))
        );
    }

    /// (service account names, listener ids, the policy or the start of
    /// the error).
    type FlagCase = (
        Vec<&'static str>,
        Vec<&'static str>,
        Result<PodPolicy, &'static str>,
    );

    #[test]
    fn flag_lists_are_trimmed_and_checked() {
        let cases: Vec<FlagCase> = vec![
            (
                vec![" agent-runner ", ""],
                vec![""],
                Ok(PodPolicy {
                    service_account_names: vec!["agent-runner".into()],
                    listener_ids: vec![],
                }),
            ),
            (
                vec!["Agent_Runner"],
                vec![],
                Err("--pod-policy-service-account-names: \"Agent_Runner\""),
            ),
            (
                vec![],
                vec!["0c9a4a0e6f514e439d2a8b7e6f5d4c3b"],
                Err("--pod-policy-listener-ids: \"0c9a4a0e6f514e439d2a8b7e6f5d4c3b\""),
            ),
        ];
        for (names, ids, expected) in cases {
            let got = PodPolicy::new(&names, &ids);
            match expected {
                Ok(p) => assert_eq!(got, Ok(p)),
                Err(start) => {
                    let err = got.unwrap_err();
                    assert!(err.starts_with(start), "{err}");
                }
            }
        }
        assert!(is_uuid(LISTENER_OK) && is_uuid(&LISTENER_OK.to_uppercase()));
        assert!(
            is_dns_subdomain("a.b-c.d") && !is_dns_subdomain("a..b") && !is_dns_subdomain("-a")
        );
    }
}
