//! One control plane client per `AgentControlPlane`, shared by every resource
//! that uses it.
//!
//! [`ClientCache`] keeps one [`ControlPlaneClient`] per (namespace,
//! AgentControlPlane name), so that every AgentDeployment and AgentListener of
//! a control plane goes through the same client, hence the same client-side
//! rate-limit bucket (`spec.requestsPerSecond`, `spec.burst`). Each lookup reads
//! the AgentControlPlane and its Secrets from the Kubernetes API and rebuilds
//! the client when one of them changed: the AgentControlPlane's uid or
//! generation (its spec), or the `resourceVersion` of the API key Secret or of
//! the CA bundle Secret. A rotated API key is therefore used by the next
//! reconcile, without restarting the operator.
//!
//! The AgentControlPlane's `resourceVersion` is deliberately not part of the
//! fingerprint: status writes change it, and rebuilding on each of them would
//! reset the shared rate-limit bucket for nothing.
//!
//! Source: `control-plane-and-agent-server.md`, "Authentication" (the key and
//! workspace headers) and "Limits" (rate limits: not shown); `api-facts.md`,
//! "Hosts and headers" (self-hosted hosts) and "Errors" (429, `Retry-After`).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, ResourceExt};
use secrecy::SecretString;

use super::Error;
use super::resolve::Blocked;
use crate::api::SecretKeyRef;
use crate::api::conditions::reason;
use crate::api::control_plane::{AgentControlPlane, AgentControlPlaneSpec};
use crate::controlplane::{Budget, ClientConfig, ControlPlaneClient, RateLimit, RequestObserver};

/// What a cached client was built from; a difference means "rebuild".
#[derive(Clone, Debug, PartialEq, Eq)]
struct Fingerprint {
    /// uid of the AgentControlPlane (a deleted and re-created one is new).
    uid: Option<String>,
    /// `metadata.generation` of the AgentControlPlane (its spec).
    generation: Option<i64>,
    /// `resourceVersion` of the API key Secret.
    api_key_version: Option<String>,
    /// `resourceVersion` of the CA bundle Secret, if one is referenced.
    ca_bundle_version: Option<String>,
    /// Per-request timeout the client was built with.
    request_timeout: Duration,
}

struct Entry {
    fingerprint: Fingerprint,
    observer: Option<Arc<dyn RequestObserver>>,
    client: ControlPlaneClient,
}

/// The reflector stores of one controller: AgentControlPlanes and Secret
/// metadata.
type WatchStores = (Store<AgentControlPlane>, Store<PartialObjectMeta<Secret>>);

/// Cache of control plane clients keyed by (namespace, AgentControlPlane
/// name). Cheap to share: one per operator, in [`super::Context`].
#[derive(Default)]
pub struct ClientCache {
    entries: Mutex<HashMap<(String, String), Entry>>,
    /// The shared adaptive budget of each AgentControlPlane: kept apart from
    /// the clients so that a client rebuilt after a key rotation or a spec
    /// change keeps the bucket, its learned rate and a pending `Retry-After`.
    budgets: Mutex<HashMap<(String, String), Budget>>,
    /// Reflector stores of AgentControlPlanes and of Secret metadata filled
    /// by the controllers' watches: when a cached client's fingerprint still
    /// matches them, a pass reads nothing from the Kubernetes API.
    stores: Mutex<Vec<WatchStores>>,
}

impl fmt::Debug for ClientCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries = self.lock();
        f.debug_struct("ClientCache")
            .field("planes", &entries.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The client-side rate limit of a control plane: `requestsPerSecond` with
/// `burst` (default: `requestsPerSecond` rounded up, at least 1); `None` when
/// `requestsPerSecond` is unset or not a positive finite number.
pub fn rate_limit(spec: &AgentControlPlaneSpec) -> Option<RateLimit> {
    let rps = spec
        .requests_per_second
        .filter(|r| r.is_finite() && *r > 0.0)?;
    let default_burst = rps.ceil().clamp(1.0, f64::from(u32::MAX)) as u32;
    Some(RateLimit {
        requests_per_second: rps,
        burst: spec.burst.unwrap_or(default_burst).max(1),
    })
}

/// Reads `key` of the Secret `r` in `namespace`: its bytes and the Secret's
/// `resourceVersion`. `what` names the Secret's role in the messages (e.g.
/// `API key`). A missing Secret or key is `Ok(Err(Blocked))` with
/// [`reason::SECRET_NOT_FOUND`]; other API errors are `Err`. The messages
/// never contain the value.
async fn read_secret(
    client: &kube::Client,
    namespace: &str,
    plane: &str,
    what: &str,
    r: &SecretKeyRef,
) -> Result<Result<(Vec<u8>, Option<String>), Blocked>, Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let missing = |detail: String| Blocked {
        reason: reason::SECRET_NOT_FOUND,
        message: format!("AgentControlPlane {namespace}/{plane}: {what} {detail}"),
    };
    let Some(secret) = api.get_opt(&r.name).await.map_err(Error::Kube)? else {
        return Ok(Err(missing(format!(
            "Secret {namespace}/{} not found",
            r.name
        ))));
    };
    let value = secret
        .data
        .as_ref()
        .and_then(|d| d.get(&r.key))
        .map(|b| b.0.clone())
        .or_else(|| {
            secret
                .string_data
                .as_ref()
                .and_then(|d| d.get(&r.key))
                .map(|s| s.as_bytes().to_vec())
        });
    Ok(match value {
        Some(v) => Ok((v, secret.resource_version())),
        None => Err(missing(format!(
            "Secret {namespace}/{} has no key {:?}",
            r.name, r.key
        ))),
    })
}

/// True when an entry built with `built` may serve a caller that passes
/// `wanted`: a caller without an observer accepts any entry; a caller with one
/// needs an entry built with the same observer (same allocation).
fn observer_fits(
    built: &Option<Arc<dyn RequestObserver>>,
    wanted: &Option<Arc<dyn RequestObserver>>,
) -> bool {
    match (built, wanted) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some(b), Some(w)) => std::ptr::addr_eq(Arc::as_ptr(b), Arc::as_ptr(w)),
    }
}

impl ClientCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The client of the AgentControlPlane `name` in `namespace`, from the
    /// cache or (re)built when the AgentControlPlane or its Secrets changed.
    ///
    /// `request_timeout` is the per-request timeout of the client (part of
    /// the cache key's fingerprint); `observer` receives one observation per
    /// request (a caller with an observer never gets a client built with
    /// another one; a caller without one takes whatever is cached).
    ///
    /// Returns `Ok(Err(Blocked))` when the AgentControlPlane does not exist,
    /// reports `Stalled=True` (wrong key, forbidden workspace) or is not usable
    /// (reason [`reason::CONTROL_PLANE_NOT_READY`]) or a referenced Secret or
    /// key is missing ([`reason::SECRET_NOT_FOUND`]). Errors: Kubernetes API
    /// failures other than 404. Nothing returned ever contains the API key.
    pub async fn client_for(
        &self,
        kube: &kube::Client,
        namespace: &str,
        name: &str,
        request_timeout: Duration,
        observer: Option<Arc<dyn RequestObserver>>,
    ) -> Result<Result<ControlPlaneClient, Blocked>, Error> {
        if let Some(client) = self.cached_by_stores(namespace, name, request_timeout, &observer) {
            return Ok(Ok(client));
        }
        let api: Api<AgentControlPlane> = Api::namespaced(kube.clone(), namespace);
        let Some(plane) = api.get_opt(name).await.map_err(Error::Kube)? else {
            self.forget(namespace, name);
            return Ok(Err(Blocked {
                reason: reason::CONTROL_PLANE_NOT_READY,
                message: format!("AgentControlPlane {namespace}/{name} not found"),
            }));
        };
        if let Some(why) = stalled(&plane) {
            // Its AgentDeployments wait with a reason pointing at it instead
            // of each failing against the control plane.
            return Ok(Err(Blocked {
                reason: reason::CONTROL_PLANE_NOT_READY,
                message: format!("AgentControlPlane {namespace}/{name} is not ready: {why}"),
            }));
        }
        Ok(self
            .client_for_plane(kube, &plane, request_timeout, observer)
            .await?
            .map_err(|mut blocked| {
                if blocked.reason != reason::SECRET_NOT_FOUND {
                    blocked.reason = reason::CONTROL_PLANE_NOT_READY;
                }
                blocked
            }))
    }

    /// Like [`ClientCache::client_for`] (without the `Stalled` check), for an AgentControlPlane already
    /// read. Blocked reasons are from the control plane's own point of view:
    /// [`reason::SECRET_NOT_FOUND`] for a missing Secret or key, and
    /// [`reason::INVALID_SPEC`] when no client can be built from the spec (no
    /// region or url, a URL that does not parse or is plain HTTP to a
    /// non-loopback host, a CA bundle that is not PEM, an API key that is
    /// empty or not a valid header value).
    pub async fn client_for_plane(
        &self,
        kube: &kube::Client,
        plane: &AgentControlPlane,
        request_timeout: Duration,
        observer: Option<Arc<dyn RequestObserver>>,
    ) -> Result<Result<ControlPlaneClient, Blocked>, Error> {
        let namespace = plane
            .namespace()
            .ok_or(Error::MissingObjectKey("namespace"))?;
        let name = plane.name_any();
        let invalid = |message: String| Blocked {
            reason: reason::INVALID_SPEC,
            message: format!("AgentControlPlane {namespace}/{name}: {message}"),
        };
        let Some(base_url) = plane.spec.base_url() else {
            return Ok(Err(invalid("sets neither region nor url".into())));
        };
        let Some(credential_ref) = plane.spec.credential_ref() else {
            return Ok(Err(invalid(
                "sets neither apiKeySecretRef nor bearerTokenSecretRef".into(),
            )));
        };
        let what = if plane.spec.uses_bearer_token() {
            "bearer token"
        } else {
            "API key"
        };
        let (api_key, api_key_version) =
            match read_secret(kube, &namespace, &name, what, credential_ref).await? {
                Ok(v) => v,
                Err(blocked) => return Ok(Err(blocked)),
            };
        let (ca_bundle, ca_bundle_version) = match &plane.spec.ca_bundle_secret_ref {
            None => (None, None),
            Some(r) => match read_secret(kube, &namespace, &name, "CA bundle", r).await? {
                Ok((pem, version)) => (Some(pem), version),
                Err(blocked) => return Ok(Err(blocked)),
            },
        };
        let fingerprint = Fingerprint {
            uid: plane.uid(),
            generation: plane.metadata.generation,
            api_key_version,
            ca_bundle_version,
            request_timeout,
        };
        let key = (namespace.clone(), name.clone());
        let mut entries = self.lock();
        if let Some(entry) = entries.get(&key)
            && entry.fingerprint == fingerprint
            && observer_fits(&entry.observer, &observer)
        {
            return Ok(Ok(entry.client.clone()));
        }
        let api_key = String::from_utf8_lossy(&api_key).trim().to_owned();
        if api_key.is_empty() {
            let r = credential_ref;
            return Ok(Err(Blocked {
                reason: reason::SECRET_NOT_FOUND,
                message: format!(
                    "AgentControlPlane {namespace}/{name}: {what} Secret {namespace}/{} key {:?} is empty",
                    r.name, r.key
                ),
            }));
        }
        let mut config = ClientConfig::new(
            base_url,
            plane.spec.workspace_id.clone(),
            SecretString::from(api_key),
        );
        config.bearer = plane.spec.uses_bearer_token();
        config.timeout = request_timeout;
        config.ca_bundle_pem = ca_bundle;
        config.budget = Some(self.budget(&key, rate_limit(&plane.spec)));
        config.observer = observer.clone();
        let client = match ControlPlaneClient::new(config) {
            Ok(c) => c,
            Err(e) => {
                entries.remove(&key);
                return Ok(Err(invalid(e.to_string())));
            }
        };
        tracing::debug!(namespace = %namespace, name = %name, "built control plane client");
        entries.insert(
            key,
            Entry {
                fingerprint,
                observer,
                client: client.clone(),
            },
        );
        Ok(Ok(client))
    }

    /// Registers the reflector stores of one controller (one per watched
    /// namespace), read by [`ClientCache::client_for`].
    pub fn register_stores(
        &self,
        planes: Store<AgentControlPlane>,
        secrets: Store<PartialObjectMeta<Secret>>,
    ) {
        self.stores
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((planes, secrets));
    }

    /// The cached client of `namespace`/`name` when the stores show the
    /// AgentControlPlane and its Secrets unchanged since it was built (and
    /// not stalled); `None` means "read them from the API".
    fn cached_by_stores(
        &self,
        namespace: &str,
        name: &str,
        request_timeout: Duration,
        observer: &Option<Arc<dyn RequestObserver>>,
    ) -> Option<ControlPlaneClient> {
        let stores = self.stores.lock().unwrap_or_else(|p| p.into_inner());
        let plane_ref = ObjectRef::<AgentControlPlane>::new(name).within(namespace);
        let (plane, secrets) = stores
            .iter()
            .find_map(|(p, s)| p.get(&plane_ref).map(|plane| (plane, s)))?;
        if stalled(&plane).is_some() {
            return None;
        }
        let version = |r: &SecretKeyRef| {
            secrets
                .get(&ObjectRef::new(&r.name).within(namespace))
                .and_then(|m| m.resource_version())
        };
        let fingerprint = Fingerprint {
            uid: plane.uid(),
            generation: plane.metadata.generation,
            api_key_version: Some(version(plane.spec.credential_ref()?)?),
            ca_bundle_version: match &plane.spec.ca_bundle_secret_ref {
                None => None,
                Some(r) => Some(version(r)?),
            },
            request_timeout,
        };
        drop(stores);
        let entries = self.lock();
        let entry = entries.get(&(namespace.to_owned(), name.to_owned()))?;
        (entry.fingerprint == fingerprint && observer_fits(&entry.observer, observer))
            .then(|| entry.client.clone())
    }

    /// The budget of the AgentControlPlane `key` with `limit` as its
    /// ceiling (created on first use, its ceiling updated afterwards).
    fn budget(&self, key: &(String, String), limit: Option<RateLimit>) -> Budget {
        let mut budgets = self.budgets.lock().unwrap_or_else(|p| p.into_inner());
        let budget = budgets
            .entry(key.clone())
            .or_insert_with(|| Budget::new(limit));
        budget.set_limit(limit);
        budget.clone()
    }

    /// True while a `Retry-After` of the AgentControlPlane `namespace`/`name`
    /// is pending (nothing is sent to it meanwhile).
    pub fn paused(&self, namespace: &str, name: &str) -> bool {
        self.budgets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(namespace.to_owned(), name.to_owned()))
            .is_some_and(Budget::paused)
    }

    /// Drops the cached client and budget of `namespace`/`name`, if any
    /// (e.g. after the AgentControlPlane was deleted).
    pub fn forget(&self, namespace: &str, name: &str) {
        let key = (namespace.to_owned(), name.to_owned());
        self.lock().remove(&key);
        self.budgets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&key);
    }

    /// Number of cached clients.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when no client is cached.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}

/// `"<reason>: <message>"` of an AgentControlPlane that reports
/// `Stalled=True` for its current generation (wrong key, forbidden workspace).
fn stalled(plane: &AgentControlPlane) -> Option<String> {
    use crate::api::conditions::{TRUE, find};
    let status = plane.status.as_ref()?;
    let stalled = find(&status.conditions, crate::controller::status::STALLED)?;
    (stalled.status == TRUE && stalled.observed_generation == plane.metadata.generation)
        .then(|| format!("{}: {}", stalled.reason, stalled.message))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(rps: Option<f64>, burst: Option<u32>) -> AgentControlPlaneSpec {
        AgentControlPlaneSpec {
            region: Some("us".into()),
            url: None,
            workspace_id: "ws".into(),
            bearer_token_secret_ref: None,
            api_key_secret_ref: Some(SecretKeyRef {
                name: "k".into(),
                key: "api-key".into(),
            }),
            ca_bundle_secret_ref: None,
            requests_per_second: rps,
            burst,
        }
    }

    #[test]
    fn rate_limit_maps_the_spec_with_a_one_second_default_burst() {
        assert_eq!(rate_limit(&spec(None, None)), None);
        assert_eq!(rate_limit(&spec(None, Some(3))), None);
        assert_eq!(rate_limit(&spec(Some(0.0), None)), None);
        assert_eq!(rate_limit(&spec(Some(f64::NAN), None)), None);
        assert_eq!(
            rate_limit(&spec(Some(2.0), Some(1))),
            Some(RateLimit {
                requests_per_second: 2.0,
                burst: 1
            })
        );
        assert_eq!(rate_limit(&spec(Some(2.5), None)).unwrap().burst, 3);
        assert_eq!(rate_limit(&spec(Some(0.2), None)).unwrap().burst, 1);
        assert_eq!(rate_limit(&spec(Some(5.0), Some(0))).unwrap().burst, 1);
    }

    struct Counting;
    impl RequestObserver for Counting {
        fn observe(&self, _: &'static str, _: &'static str, _: Duration) {}
    }

    #[test]
    fn a_caller_with_an_observer_never_gets_another_observers_client() {
        let a: Arc<dyn RequestObserver> = Arc::new(Counting);
        let b: Arc<dyn RequestObserver> = Arc::new(Counting);
        assert!(observer_fits(&None, &None));
        assert!(observer_fits(&Some(a.clone()), &None));
        assert!(!observer_fits(&None, &Some(a.clone())));
        assert!(observer_fits(&Some(a.clone()), &Some(a.clone())));
        assert!(!observer_fits(&Some(a), &Some(b)));
    }
}
