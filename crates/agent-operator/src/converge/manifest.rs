//! The input of `agentctl apply -f` and `agentctl diff -f`: one YAML file of
//! one or more documents, as `kubectl apply -f` takes it.
//!
//! Read: `AgentDeployment`, `AgentListener`, `AgentAssistant` and
//! `AgentCron` documents (`apiVersion: agentserver.dev/v1alpha1`), and `v1`
//! `Secret` documents (`data`, base64,
//! or `stringData`) that resolve `spec.secrets[].valueFrom.secretKeyRef` of
//! the deployments in the same file (a reference to a Secret not in the file
//! may be resolved from the environment or from a Secret the caller read
//! from a cluster: [`Manifest::secret_values`]). `AgentControlPlane` documents are
//! skipped (the control plane comes from agentctl's flags); any other kind
//! is an error, so a typo in `kind` never passes silently. Empty documents
//! are skipped.
//!
//! An object without `metadata.namespace` is in `default`, as `kubectl`
//! would put it; a reference resolves in the namespace of the deployment.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use serde::Deserialize;

use crate::api::assistant::AgentAssistant;
use crate::api::cron::AgentCron;
use crate::api::deployment::AgentDeployment;
use crate::api::listener::AgentListener;
use crate::controller::resolve::{self, Blocked};
use crate::controlplane::types::SecretValue;

/// `apiVersion` of the custom resources.
pub const API_VERSION: &str = "agentserver.dev/v1alpha1";

/// Namespace of an object that names none.
pub const DEFAULT_NAMESPACE: &str = "default";

/// The documents of one file that `apply` and `diff` use.
#[derive(Clone, Debug, Default)]
pub struct Manifest {
    /// The `AgentDeployment` documents, in file order.
    pub deployments: Vec<AgentDeployment>,
    /// The `AgentAssistant` documents, in file order (applied after the
    /// deployments: [`super::agents`]).
    pub assistants: Vec<AgentAssistant>,
    /// The `AgentCron` documents, in file order (applied after the
    /// assistants).
    pub crons: Vec<AgentCron>,
    /// `Secret` documents by (namespace, name).
    secrets: BTreeMap<(String, String), Secret>,
    /// `AgentListener` documents by (namespace, name).
    listeners: BTreeMap<(String, String), AgentListener>,
    /// Variables that resolve a `secretKeyRef` whose Secret is not in the
    /// file, by the key's name ([`Manifest::with_env_fallback`]); `None`:
    /// such a reference is not resolved from the environment.
    env: Option<BTreeMap<String, String>>,
    /// Secrets read from a cluster by (namespace, name), for references that
    /// neither the file nor the environment resolve
    /// ([`Manifest::with_cluster_secrets`]).
    cluster: BTreeMap<(String, String), Secret>,
    /// Why a Secret of the cluster could not be read, by (namespace, name).
    cluster_unread: BTreeMap<(String, String), String>,
}

/// The namespace of an object's metadata, or [`DEFAULT_NAMESPACE`].
pub fn namespace_of(ns: &Option<String>) -> String {
    ns.clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned())
}

/// The `apiVersion`, `kind` and `metadata.name` of a document (empty when
/// absent).
fn kind_of(v: &serde_json::Value) -> (String, String, String) {
    let s = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_owned();
    let name = v
        .pointer("/metadata/name")
        .and_then(|x| x.as_str())
        .unwrap_or("")
        .to_owned();
    (s("apiVersion"), s("kind"), name)
}

/// `json` as a `T`, refusing a field `T` does not know with its path (as
/// `kubectl apply --validate=strict`: [`super::strict::unknown_fields`]).
fn strict<T>(what: &str, json: serde_json::Value) -> Result<T, String>
where
    T: serde::de::DeserializeOwned + serde::Serialize,
{
    let typed: T = serde_json::from_value(json.clone()).map_err(|e| format!("{what}: {e}"))?;
    let back = serde_json::to_value(&typed).map_err(|e| format!("{what}: {e}"))?;
    let unknown = super::strict::unknown_fields(&json, &back);
    if !unknown.is_empty() {
        return Err(format!(
            "{what}: unknown field{} {} (the API server refuses it with strict field validation)",
            if unknown.len() == 1 { "" } else { "s" },
            unknown.join(", ")
        ));
    }
    Ok(typed)
}

/// The namespaces and names of the documents [`Manifest::parse`] read so
/// far, by kind (listeners and Secrets are keyed in the manifest itself).
#[derive(Default)]
struct Seen {
    /// AgentDeployments.
    deployments: std::collections::BTreeSet<(String, String)>,
    /// AgentAssistants.
    assistants: std::collections::BTreeSet<(String, String)>,
    /// AgentCrons.
    crons: std::collections::BTreeSet<(String, String)>,
}

/// Reads `json` as a `T` ([`strict`]) and appends it to `list`, unless
/// `seen` already holds its namespace and `name`. `what` names the document
/// in errors.
///
/// Errors: as [`strict`], or the object listed twice.
fn push_once<T>(
    list: &mut Vec<T>,
    seen: &mut std::collections::BTreeSet<(String, String)>,
    what: &str,
    json: serde_json::Value,
    name: String,
) -> Result<(), String>
where
    T: kube::Resource + serde::de::DeserializeOwned + serde::Serialize,
{
    let object: T = strict(what, json)?;
    if !seen.insert((namespace_of(&object.meta().namespace), name)) {
        return Err(format!("{what}: listed twice"));
    }
    list.push(object);
    Ok(())
}

/// Document `n` of a file as JSON, as the API server reads it (a null
/// optional field absent); `None` for an empty document.
///
/// Errors: YAML syntax, a document that cannot be read as JSON or is not
/// an object.
fn document_json(
    n: usize,
    doc: yaml_serde::Deserializer<'_>,
) -> Result<Option<serde_json::Value>, String> {
    let value = yaml_serde::Value::deserialize(doc)
        .map_err(|e| format!("document {n}: not valid YAML: {e}"))?;
    if value.is_null() {
        return Ok(None);
    }
    let mut json = serde_json::to_value(&value)
        .map_err(|e| format!("document {n}: cannot be read as JSON: {e}"))?;
    if !json.is_object() {
        return Err(format!(
            "document {n}: not an object (a Kubernetes manifest)"
        ));
    }
    // As the API server reads it: a null optional field is absent.
    super::strict::drop_nulls(&mut json);
    Ok(Some(json))
}

impl Manifest {
    /// Parses the documents of `text`.
    ///
    /// Errors (a message naming the document, 1-based, and its kind and
    /// name): YAML syntax, a document that is not an object, an unknown
    /// `apiVersion`/`kind`, a field of the wrong shape or unknown to the
    /// kind (named by its path), a document without
    /// `metadata.name`, two objects with the same kind, namespace and name,
    /// and a file without any `AgentDeployment`. The rules of the
    /// `AgentAssistant` and `AgentCron` documents are checked apart
    /// (`converge::agents::check`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut m = Manifest::default();
        let mut seen = Seen::default();
        for (i, doc) in yaml_serde::Deserializer::from_str(text).enumerate() {
            let n = i + 1;
            let Some(json) = document_json(n, doc)? else {
                continue;
            };
            let (api_version, kind, name) = kind_of(&json);
            let what = format!("document {n} ({kind} {name:?})");
            if name.is_empty() {
                return Err(format!("{what}: metadata.name is missing"));
            }
            m.add(&mut seen, json, (&api_version, &kind, name), &what)?;
        }
        if m.deployments.is_empty() {
            return Err(format!(
                "no AgentDeployment ({API_VERSION}) document in the file"
            ));
        }
        Ok(m)
    }

    /// Adds one document of [`Manifest::parse`], given its `apiVersion`,
    /// `kind` and `metadata.name` (`what`: how errors name it).
    ///
    /// Errors: a field of the wrong shape or unknown to the kind, an object
    /// listed twice, a kind agentctl does not read.
    fn add(
        &mut self,
        seen: &mut Seen,
        json: serde_json::Value,
        (api_version, kind, name): (&str, &str, String),
        what: &str,
    ) -> Result<(), String> {
        let twice = || format!("{what}: listed twice");
        match (api_version, kind) {
            (API_VERSION, "AgentDeployment") => {
                push_once(
                    &mut self.deployments,
                    &mut seen.deployments,
                    what,
                    json,
                    name,
                )?;
            }
            (API_VERSION, "AgentListener") => {
                let l: AgentListener = strict(what, json)?;
                let key = (namespace_of(&l.metadata.namespace), name);
                if self.listeners.insert(key, l).is_some() {
                    return Err(twice());
                }
            }
            (API_VERSION, "AgentAssistant") => {
                push_once(&mut self.assistants, &mut seen.assistants, what, json, name)?;
            }
            (API_VERSION, "AgentCron") => {
                push_once(&mut self.crons, &mut seen.crons, what, json, name)?;
            }
            (API_VERSION, "AgentControlPlane") => {}
            ("v1", "Secret") => {
                let s: Secret = serde_json::from_value(json).map_err(|e| format!("{what}: {e}"))?;
                let key = (namespace_of(&s.metadata.namespace), name);
                if self.secrets.insert(key, s).is_some() {
                    return Err(twice());
                }
            }
            _ => {
                return Err(format!(
                    "{what}: apiVersion {api_version:?} kind {kind:?} is not read by agentctl \
                     (it reads {API_VERSION} AgentDeployment, AgentListener, AgentAssistant \
                     and AgentCron, and v1 Secret)"
                ));
            }
        }
        Ok(())
    }

    /// Lets a `secretKeyRef` whose Secret is not in the file take its value
    /// from `vars` (e.g. the process environment): the variable named like
    /// the reference's `key`. For pipelines that hold secrets in variables
    /// rather than in files. A Secret that is in the file is always used;
    /// a variable that is set comes before a Secret of the cluster
    /// ([`Manifest::with_cluster_secrets`]).
    pub fn with_env_fallback(mut self, vars: impl IntoIterator<Item = (String, String)>) -> Self {
        self.env = Some(vars.into_iter().collect());
        self
    }

    /// Adds `secrets`, read from a cluster, for the references that neither
    /// the file nor the environment resolve ([`Manifest::secrets_to_read`]);
    /// `unread` says why a Secret could not be read, by (namespace, name),
    /// for the message of a reference it leaves unresolved.
    pub fn with_cluster_secrets(
        mut self,
        secrets: impl IntoIterator<Item = Secret>,
        unread: impl IntoIterator<Item = ((String, String), String)>,
    ) -> Self {
        for s in secrets {
            let key = (
                namespace_of(&s.metadata.namespace),
                s.metadata.name.clone().unwrap_or_default(),
            );
            self.cluster.insert(key, s);
        }
        self.cluster_unread.extend(unread);
        self
    }

    /// The Secrets, as (namespace, name), that the AgentDeployments refer
    /// to (`spec.secrets[].valueFrom.secretKeyRef`,
    /// `spec.verify.apiKeySecretRef`) and that neither a document of the
    /// file nor (with [`Manifest::with_env_fallback`]) a variable resolves:
    /// those to read from the cluster. Sorted, each once.
    pub fn secrets_to_read(&self) -> Vec<(String, String)> {
        let mut out = std::collections::BTreeSet::new();
        for d in &self.deployments {
            let ns = namespace_of(&d.metadata.namespace);
            for (name, key) in secret_refs(d) {
                let place = (ns.clone(), name.to_owned());
                let in_env = self.env.as_ref().is_some_and(|e| e.contains_key(key));
                if !self.secrets.contains_key(&place) && !in_env {
                    out.insert(place);
                }
            }
        }
        out.into_iter().collect()
    }

    /// The values of `d.spec.secrets`: literal values, and
    /// `valueFrom.secretKeyRef` as [`Manifest::key_value`] resolves them, by
    /// the operator's own resolution ([`resolve::secret_values`] and
    /// [`resolve::key_value`]).
    ///
    /// Errors: the message of the first missing Secret, key or variable
    /// (naming `namespace/name`, and where it must be), or an entry with
    /// neither `value` nor `valueFrom`.
    pub fn secret_values(&self, d: &AgentDeployment) -> Result<Vec<SecretValue>, String> {
        let ns = namespace_of(&d.metadata.namespace);
        let lookup = |name: String, key: String| {
            let found = self.key_value(&ns, &name, &key);
            std::future::ready(Ok::<_, std::convert::Infallible>(found))
        };
        // The lookup never awaits: the future is ready at its first poll.
        match poll_ready(resolve::secret_values(&d.spec, lookup)) {
            Ok(Ok(values)) => Ok(values),
            Ok(Err(Blocked { message, .. })) => Err(message),
            Err(never) => match never {},
        }
    }

    /// The key of `spec.verify.apiKeySecretRef` of `d`, resolved like the
    /// secrets ([`Manifest::key_value`]); `None` without one.
    ///
    /// Errors: the missing Secret, key or variable, named.
    pub fn verify_key(&self, d: &AgentDeployment) -> Result<Option<String>, String> {
        let Some(r) = d
            .spec
            .verify
            .as_ref()
            .and_then(|v| v.api_key_secret_ref.as_ref())
        else {
            return Ok(None);
        };
        let ns = namespace_of(&d.metadata.namespace);
        self.key_value(&ns, &r.name, &r.key)
            .map(Some)
            .map_err(|b| format!("spec.verify.apiKeySecretRef: {}", b.message))
    }

    /// `key` of Secret `name` in `ns`, from the first that has the Secret:
    /// the file's Secret documents; with [`Manifest::with_env_fallback`],
    /// the environment variable named like the key, when it is set; the
    /// Secrets read from the cluster ([`Manifest::with_cluster_secrets`]).
    /// Errors name what is missing ([`resolve::key_value`]'s messages for a
    /// missing key) and where the value may come from.
    fn key_value(&self, ns: &str, name: &str, key: &str) -> Result<String, Blocked> {
        let place = (ns.to_owned(), name.to_owned());
        if let Some(secret) = self.secrets.get(&place) {
            return resolve::key_value(Some(secret), ns, name, key);
        }
        if let Some(value) = self.env.as_ref().and_then(|e| e.get(key)) {
            return Ok(value.clone());
        }
        if let Some(secret) = self.cluster.get(&place) {
            return resolve::key_value(Some(secret), ns, name, key);
        }
        Err(Blocked {
            reason: crate::api::conditions::reason::SECRET_NOT_FOUND,
            message: self.not_found(ns, name, key),
        })
    }

    /// The message of a Secret found nowhere: where agentctl looked, and
    /// where the value may come from.
    fn not_found(&self, ns: &str, name: &str, key: &str) -> String {
        let place = (ns.to_owned(), name.to_owned());
        let cluster = match self.cluster_unread.get(&place) {
            Some(why) => format!("the cluster could not be read ({why})"),
            None => "nor in the cluster of the current kubeconfig".to_owned(),
        };
        let env = match &self.env {
            Some(_) => format!(", and the environment variable {key} (its key) is not set"),
            None => String::new(),
        };
        format!(
            "Secret {ns}/{name} not found: it is not in the file, {cluster}{env}; add the v1 \
             Secret document (data or stringData) to the same file, create the Secret in the \
             cluster, or let the environment variable named like the key hold the value \
             (--secret-from-env)"
        )
    }

    /// The position in [`Manifest::deployments`] of the AgentDeployment
    /// `name` in `namespace`, if the file has it.
    pub fn deployment_index(&self, namespace: &str, name: &str) -> Option<usize> {
        self.deployments.iter().position(|d| {
            namespace_of(&d.metadata.namespace) == namespace
                && d.metadata.name.as_deref() == Some(name)
        })
    }

    /// The AgentAssistant `name` in `namespace`, if the file has it.
    pub fn assistant(&self, namespace: &str, name: &str) -> Option<&AgentAssistant> {
        self.assistants.iter().find(|a| {
            namespace_of(&a.metadata.namespace) == namespace
                && a.metadata.name.as_deref() == Some(name)
        })
    }

    /// `spec.listenerId` of the `AgentListener` `name` in `namespace`, if
    /// the file has it.
    pub fn listener_id(&self, namespace: &str, name: &str) -> Option<&str> {
        self.listeners
            .get(&(namespace.to_owned(), name.to_owned()))
            .map(|l| l.spec.listener_id.as_str())
    }
}

/// The (Secret name, key) of every Secret reference of `d`:
/// `spec.secrets[].valueFrom.secretKeyRef` of the entries without a literal
/// value, and `spec.verify.apiKeySecretRef`.
fn secret_refs(d: &AgentDeployment) -> Vec<(&str, &str)> {
    let from_secrets = d
        .spec
        .secrets
        .iter()
        .filter(|s| s.value.is_none())
        .filter_map(|s| s.value_from.as_ref())
        .map(|f| {
            (
                f.secret_key_ref.name.as_str(),
                f.secret_key_ref.key.as_str(),
            )
        });
    let verify = d
        .spec
        .verify
        .as_ref()
        .and_then(|v| v.api_key_secret_ref.as_ref())
        .map(|r| (r.name.as_str(), r.key.as_str()));
    from_secrets.chain(verify).collect()
}

/// Runs a future that is ready at its first poll (no IO inside).
fn poll_ready<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => unreachable!("a lookup in memory never waits"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
apiVersion: v1
kind: Secret
metadata: {name: env, namespace: default}
data:
  A: c2VjcmV0LWE=
stringData:
  B: secret-b
---
apiVersion: agentserver.dev/v1alpha1
kind: AgentDeployment
metadata: {name: agent}
spec:
  source: github
  secrets:
    - {name: A, valueFrom: {secretKeyRef: {name: env, key: A}}}
    - {name: B, valueFrom: {secretKeyRef: {name: env, key: B}}}
    - {name: C, value: plain}
---
"#;

    #[test]
    fn secrets_resolve_from_the_same_file() {
        let m = Manifest::parse(FILE).unwrap();
        assert_eq!(m.deployments.len(), 1);
        let values = m.secret_values(&m.deployments[0]).unwrap();
        let plain: Vec<(String, String)> = values
            .iter()
            .map(|s| {
                use secrecy::ExposeSecret;
                (s.name.clone(), s.value.expose_secret().to_owned())
            })
            .collect();
        assert_eq!(
            plain,
            [
                ("A".to_owned(), "secret-a".to_owned()),
                ("B".to_owned(), "secret-b".to_owned()),
                ("C".to_owned(), "plain".to_owned())
            ]
        );
    }

    #[test]
    fn a_missing_secret_is_named() {
        let file = FILE.replace("name: env, namespace: default", "name: other");
        let m = Manifest::parse(&file).unwrap();
        let e = m.secret_values(&m.deployments[0]).unwrap_err();
        assert!(e.contains("Secret default/env not found"), "{e}");
        assert!(e.contains("same file"), "{e}");
        let vars = [("OTHER".to_owned(), "x".to_owned())];
        let m = m.with_env_fallback(vars);
        let e = m.secret_values(&m.deployments[0]).unwrap_err();
        assert!(
            e.contains("environment variable A (its key) is not set"),
            "{e}"
        );
        let vars = [("A", "from-env-a"), ("B", "from-env-b")].map(|(k, v)| (k.into(), v.into()));
        let m = m.with_env_fallback(vars);
        let values = m.secret_values(&m.deployments[0]).unwrap();
        use secrecy::ExposeSecret;
        assert_eq!(values[1].value.expose_secret(), "from-env-b");
    }

    /// A Secret not in the file: the environment variable (when set) comes
    /// first, then the Secret read from the cluster; only what neither the
    /// file nor the environment resolves is to be read.
    #[test]
    fn a_secret_not_in_the_file_is_read_from_the_environment_then_the_cluster() {
        let file = FILE.replace("name: env, namespace: default", "name: other");
        let m = Manifest::parse(&file).unwrap();
        assert_eq!(
            m.secrets_to_read(),
            [("default".to_owned(), "env".to_owned())]
        );
        let both = [("A", "from-env-a"), ("B", "from-env-b")].map(|(k, v)| (k.into(), v.into()));
        assert!(
            m.clone()
                .with_env_fallback(both)
                .secrets_to_read()
                .is_empty()
        );
        let in_cluster: Secret = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "env", "namespace": "default"},
            "data": {"A": "Y2x1c3Rlci1h", "B": "Y2x1c3Rlci1i"},
        }))
        .unwrap();
        let only_a = [("A".to_owned(), "from-env-a".to_owned())];
        let m = m
            .with_env_fallback(only_a)
            .with_cluster_secrets([in_cluster], []);
        use secrecy::ExposeSecret;
        let values = m.secret_values(&m.deployments[0]).unwrap();
        let got: Vec<&str> = values.iter().map(|v| v.value.expose_secret()).collect();
        assert_eq!(got, ["from-env-a", "cluster-b", "plain"]);

        // Not read: the message says why and where the value may come from.
        let m = Manifest::parse(&file).unwrap().with_cluster_secrets(
            [],
            [(
                ("default".into(), "env".into()),
                "no cluster: no kubeconfig".into(),
            )],
        );
        let e = m.secret_values(&m.deployments[0]).unwrap_err();
        assert!(e.contains("Secret default/env not found"), "{e}");
        assert!(
            e.contains("the cluster could not be read (no cluster: no kubeconfig)"),
            "{e}"
        );
        assert!(e.contains("create the Secret in the cluster"), "{e}");
    }

    #[test]
    fn bad_documents_are_refused_with_their_place() {
        let e = Manifest::parse("a: [").unwrap_err();
        assert!(e.contains("document 1"), "{e}");
        let e =
            Manifest::parse("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n").unwrap_err();
        assert!(e.contains("ConfigMap") && e.contains("not read"), "{e}");
        let e = Manifest::parse("apiVersion: v1\nkind: Secret\nmetadata: {name: x}\n").unwrap_err();
        assert!(e.contains("no AgentDeployment"), "{e}");
        let twice = format!("{FILE}\n---\n{}", FILE.split("---").nth(1).unwrap());
        let e = Manifest::parse(&twice).unwrap_err();
        assert!(e.contains("listed twice"), "{e}");
        let e = Manifest::parse(&FILE.replace("source: github", "source: svn")).unwrap_err();
        assert!(e.contains("document 2") && e.contains("svn"), "{e}");
    }
}
