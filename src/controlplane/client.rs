//! HTTP client of the control plane's deployment, revision and listener
//! endpoints.
//!
//! Source: `control-plane-and-agent-server.md`, "Endpoints" and
//! "Authentication"; `api-facts.md`, "Hosts and headers", "Requests" and
//! "Errors". Every request carries `X-Api-Key` and `X-Tenant-Id`; the key is a
//! [`SecretString`] marked sensitive on the header, so neither `Debug` of the
//! client nor any error ever shows it.

use std::fmt;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode};
use secrecy::{ExposeSecret, SecretString};
use serde::Serialize;
use serde::de::DeserializeOwned;
use url::Url;

use super::error::{Error, parse_retry_after};
use super::types::{Deployment, DeploymentCreate, DeploymentPatch, Listener, Page, Revision};

/// Header carrying the API key.
pub const API_KEY_HEADER: &str = "x-api-key";
/// Header carrying the workspace id.
pub const TENANT_HEADER: &str = "x-tenant-id";
/// Default per-request timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest `limit` the list endpoints accept (facts "Requests": 1–100).
pub const MAX_PAGE_SIZE: u32 = 100;

/// How to reach and authenticate to one control plane.
#[derive(Clone)]
pub struct ClientConfig {
    /// Base URL without `/v2`, e.g. `https://api.host.langchain.com` or
    /// `https://host/api-host` (self-hosted).
    pub base_url: String,
    /// Workspace id, sent as `X-Tenant-Id`.
    pub workspace_id: String,
    /// API key, sent as `X-Api-Key`.
    pub api_key: SecretString,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Allow plain `http://` to a host that is not loopback.
    pub allow_insecure_http: bool,
    /// Extra PEM CA bundle trusted for a self-hosted control plane.
    pub ca_bundle_pem: Option<Vec<u8>>,
    /// Client-side rate limit (token bucket) of this control plane, if any.
    pub rate_limit: Option<RateLimit>,
    /// Receives one observation per request (for metrics), if set.
    pub observer: Option<std::sync::Arc<dyn RequestObserver>>,
}

/// A token bucket: `requests_per_second` refill rate, `burst` capacity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateLimit {
    /// Sustained requests per second (> 0).
    pub requests_per_second: f64,
    /// Requests allowed at once after an idle period (>= 1).
    pub burst: u32,
}

/// Observes every control plane request, e.g. to count them in metrics.
pub trait RequestObserver: Send + Sync {
    /// Called once per HTTP attempt: `operation` is a fixed name such as
    /// `get_deployment`, `status_class` one of `2xx`, `4xx`, `5xx`, `timeout`,
    /// `transport`; `elapsed` is the attempt's duration.
    fn observe(&self, operation: &'static str, status_class: &'static str, elapsed: Duration);
}

impl ClientConfig {
    /// A config with the default timeout and no extra CA.
    pub fn new(
        base_url: impl Into<String>,
        workspace_id: impl Into<String>,
        api_key: SecretString,
    ) -> Self {
        Self {
            base_url: base_url.into(),
            workspace_id: workspace_id.into(),
            api_key,
            timeout: DEFAULT_TIMEOUT,
            allow_insecure_http: false,
            ca_bundle_pem: None,
            rate_limit: None,
            observer: None,
        }
    }
}

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientConfig")
            .field("base_url", &self.base_url)
            .field("workspace_id", &self.workspace_id)
            .field("api_key", &"[REDACTED]")
            .field("timeout", &self.timeout)
            .field("allow_insecure_http", &self.allow_insecure_http)
            .finish()
    }
}

/// Query parameters of `GET /v2/deployments` (facts "Requests": List).
#[derive(Clone, Debug, Default, Serialize)]
pub struct ListDeployments {
    /// Page size, 1–100 (service default 20).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Items to skip.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<u32>,
    /// Substring filter on the name (there is no exact-name filter).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name_contains: Option<String>,
    /// Deployment status filter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// `dev_free`, `dev` or `prod`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deployment_type: Option<String>,
    /// Comma-separated deployment ids.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deployment_ids: Option<String>,
}

/// Query parameters of `GET /v2/deployments/{id}/revisions`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ListRevisions {
    /// Page size, 1–100 (service default 20).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Items to skip.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<u32>,
    /// Comma-separated revision statuses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// Typed client of one control plane (one base URL, one workspace, one key).
#[derive(Clone)]
pub struct ControlPlaneClient {
    http: reqwest::Client,
    base: Url,
    workspace_id: String,
}

impl fmt::Debug for ControlPlaneClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControlPlaneClient")
            .field("base", &self.base.as_str())
            .field("workspace_id", &self.workspace_id)
            .finish_non_exhaustive()
    }
}

/// Installs the `ring` rustls provider as the process default if none is set.
/// reqwest and kube in this crate are built without a provider of their own.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

impl ControlPlaneClient {
    /// Builds a client.
    ///
    /// Errors: [`Error::InvalidEndpoint`] when the URL does not parse, is not
    /// http(s), or is plain HTTP to a non-loopback host without
    /// `allow_insecure_http`; when the API key is not a valid header value; or
    /// when the CA bundle is not PEM.
    pub fn new(config: ClientConfig) -> Result<Self, Error> {
        install_crypto_provider();
        let mut base = Url::parse(config.base_url.trim_end_matches('/'))
            .map_err(|e| Error::InvalidEndpoint(format!("{}: {e}", config.base_url)))?;
        match base.scheme() {
            "https" => {}
            "http" if is_loopback(&base) || config.allow_insecure_http => {}
            "http" => {
                return Err(Error::InvalidEndpoint(format!(
                    "{base}: plain http is only allowed to loopback hosts unless insecure HTTP is explicitly allowed"
                )));
            }
            other => {
                return Err(Error::InvalidEndpoint(format!(
                    "{base}: unsupported scheme {other}"
                )));
            }
        }
        // Url::join replaces the last segment unless the path ends in '/'.
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        let mut key = HeaderValue::from_str(config.api_key.expose_secret()).map_err(|_| {
            Error::InvalidEndpoint("the API key is not a valid header value".into())
        })?;
        key.set_sensitive(true);
        let tenant = HeaderValue::from_str(&config.workspace_id).map_err(|_| {
            Error::InvalidEndpoint("the workspace id is not a valid header value".into())
        })?;
        let mut headers = HeaderMap::new();
        headers.insert(HeaderName::from_static(API_KEY_HEADER), key);
        headers.insert(HeaderName::from_static(TENANT_HEADER), tenant);
        let mut builder = reqwest::Client::builder()
            .default_headers(headers)
            .timeout(config.timeout)
            .connect_timeout(config.timeout.min(Duration::from_secs(10)))
            .user_agent(concat!("agent-operator/", env!("CARGO_PKG_VERSION")));
        if let Some(pem) = &config.ca_bundle_pem {
            for cert in reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| Error::InvalidEndpoint(format!("CA bundle: {e}")))?
            {
                builder = builder.add_root_certificate(cert);
            }
        }
        let http = builder
            .build()
            .map_err(|e| Error::InvalidEndpoint(format!("HTTP client: {e}")))?;
        Ok(Self {
            http,
            base,
            workspace_id: config.workspace_id,
        })
    }

    /// The base URL requests go to (with a trailing `/`).
    pub fn base_url(&self) -> &str {
        self.base.as_str()
    }

    fn url(&self, path: &str) -> Result<Url, Error> {
        self.base
            .join(path.trim_start_matches('/'))
            .map_err(|e| Error::InvalidEndpoint(format!("{path}: {e}")))
    }

    /// Sends one request and returns the status and body of a success answer.
    async fn send<B: Serialize, Q: Serialize>(
        &self,
        method: Method,
        path: &str,
        query: Option<&Q>,
        body: Option<&B>,
    ) -> Result<(StatusCode, bytes::Bytes), Error> {
        let mut req = self.http.request(method, self.url(path)?);
        if let Some(q) = query {
            req = req.query(q);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.map_err(Error::from_reqwest)?;
        let status = resp.status();
        let retry_after = parse_retry_after(resp.headers().get(reqwest::header::RETRY_AFTER));
        let bytes = resp.bytes().await.map_err(Error::from_reqwest)?;
        if status.is_success() {
            Ok((status, bytes))
        } else {
            Err(Error::from_response(status, retry_after, &bytes))
        }
    }

    async fn json<T: DeserializeOwned, B: Serialize, Q: Serialize>(
        &self,
        method: Method,
        path: &str,
        query: Option<&Q>,
        body: Option<&B>,
    ) -> Result<T, Error> {
        let (status, bytes) = self.send(method, path, query, body).await?;
        serde_json::from_slice(&bytes).map_err(|e| Error::decode(status, &e, &bytes))
    }

    /// `POST /v2/deployments` → 201 with the Deployment (facts "Requests").
    /// Never retried: there is no idempotency key, so a blind retry could
    /// create a second deployment.
    pub async fn create_deployment(&self, body: &DeploymentCreate) -> Result<Deployment, Error> {
        self.json(Method::POST, "v2/deployments", None::<&()>, Some(body))
            .await
    }

    /// `GET /v2/deployments/{id}` → the Deployment.
    pub async fn get_deployment(&self, id: &str) -> Result<Deployment, Error> {
        self.json(
            Method::GET,
            &format!("v2/deployments/{id}"),
            None::<&()>,
            None::<&()>,
        )
        .await
    }

    /// `PATCH /v2/deployments/{id}` with only the fields to change → the
    /// Deployment. A body with `source_revision_config` creates a revision.
    pub async fn patch_deployment(
        &self,
        id: &str,
        patch: &DeploymentPatch,
    ) -> Result<Deployment, Error> {
        self.json(
            Method::PATCH,
            &format!("v2/deployments/{id}"),
            None::<&()>,
            Some(patch),
        )
        .await
    }

    /// `DELETE /v2/deployments/{id}` → 204. Deletion is asynchronous: GET keeps
    /// answering (status `AWAITING_DELETE`) until it returns 404.
    pub async fn delete_deployment(&self, id: &str) -> Result<(), Error> {
        self.send(
            Method::DELETE,
            &format!("v2/deployments/{id}"),
            None::<&()>,
            None::<&()>,
        )
        .await
        .map(|_| ())
    }

    /// `GET /v2/deployments` → one page.
    pub async fn list_deployments(
        &self,
        query: &ListDeployments,
    ) -> Result<Page<Deployment>, Error> {
        self.json(Method::GET, "v2/deployments", Some(query), None::<&()>)
            .await
    }

    /// Every deployment matching `query`, paging with `limit`/`offset` until a
    /// short page. `query.limit`/`offset` are overridden.
    pub async fn list_all_deployments(
        &self,
        query: &ListDeployments,
    ) -> Result<Vec<Deployment>, Error> {
        let mut all = Vec::new();
        let mut q = query.clone();
        q.limit = Some(MAX_PAGE_SIZE);
        let mut offset = 0u32;
        loop {
            q.offset = Some(offset);
            let page = self.list_deployments(&q).await?;
            let n = page.resources.len() as u32;
            all.extend(page.resources);
            if n < MAX_PAGE_SIZE {
                return Ok(all);
            }
            offset += n;
        }
    }

    /// Exact-name lookup: lists with `name_contains` and keeps the deployment
    /// whose name equals `name` (facts "Requests": there is no exact filter).
    pub async fn find_deployment_by_name(&self, name: &str) -> Result<Option<Deployment>, Error> {
        let found = self
            .list_all_deployments(&ListDeployments {
                name_contains: Some(name.to_owned()),
                ..Default::default()
            })
            .await?;
        Ok(found.into_iter().find(|d| d.name == name))
    }

    /// `GET /v2/deployments/{id}/revisions` → one page, newest first.
    pub async fn list_revisions(
        &self,
        deployment_id: &str,
        query: &ListRevisions,
    ) -> Result<Page<Revision>, Error> {
        self.json(
            Method::GET,
            &format!("v2/deployments/{deployment_id}/revisions"),
            Some(query),
            None::<&()>,
        )
        .await
    }

    /// `GET /v2/deployments/{id}/revisions/{revision_id}` → the Revision.
    pub async fn get_revision(
        &self,
        deployment_id: &str,
        revision_id: &str,
    ) -> Result<Revision, Error> {
        self.json(
            Method::GET,
            &format!("v2/deployments/{deployment_id}/revisions/{revision_id}"),
            None::<&()>,
            None::<&()>,
        )
        .await
    }

    /// `POST /v2/deployments/{id}/revisions`: a new revision with the current
    /// configuration (redeploy) → the Revision.
    pub async fn redeploy(&self, deployment_id: &str) -> Result<Revision, Error> {
        self.json(
            Method::POST,
            &format!("v2/deployments/{deployment_id}/revisions"),
            None::<&()>,
            None::<&()>,
        )
        .await
    }

    /// `GET /v2/listeners/{listener_id}` → the Listener (403 unless the
    /// organization is self-hosted enterprise).
    pub async fn get_listener(&self, listener_id: &str) -> Result<Listener, Error> {
        self.json(
            Method::GET,
            &format!("v2/listeners/{listener_id}"),
            None::<&()>,
            None::<&()>,
        )
        .await
    }

    /// `GET /v2/listeners` → one page.
    pub async fn list_listeners(&self, limit: u32, offset: u32) -> Result<Page<Listener>, Error> {
        self.json(
            Method::GET,
            "v2/listeners",
            Some(&[("limit", limit), ("offset", offset)]),
            None::<&()>,
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(url: &str) -> ClientConfig {
        ClientConfig::new(url, "ws", SecretString::from("super-secret-key"))
    }

    #[test]
    fn plain_http_only_to_loopback_unless_allowed() {
        assert!(ControlPlaneClient::new(cfg("http://127.0.0.1:8585")).is_ok());
        assert!(ControlPlaneClient::new(cfg("http://localhost:8585/api-host")).is_ok());
        let err = ControlPlaneClient::new(cfg("http://cp.example.com")).unwrap_err();
        assert!(matches!(err, Error::InvalidEndpoint(_)));
        let mut c = cfg("http://cp.example.com");
        c.allow_insecure_http = true;
        assert!(ControlPlaneClient::new(c).is_ok());
        assert!(ControlPlaneClient::new(cfg("ftp://x")).is_err());
    }

    #[test]
    fn paths_keep_the_api_host_prefix() {
        let c = ControlPlaneClient::new(cfg("https://example.com/api-host")).unwrap();
        assert_eq!(
            c.url("v2/deployments").unwrap().as_str(),
            "https://example.com/api-host/v2/deployments"
        );
        let c = ControlPlaneClient::new(cfg("https://api.host.langchain.com/")).unwrap();
        assert_eq!(
            c.url("v2/deployments/x").unwrap().as_str(),
            "https://api.host.langchain.com/v2/deployments/x"
        );
    }

    #[test]
    fn debug_never_shows_the_key() {
        let c = cfg("https://example.com");
        assert!(!format!("{c:?}").contains("super-secret-key"));
        let client = ControlPlaneClient::new(c).unwrap();
        assert!(!format!("{client:?}").contains("super-secret-key"));
    }
}
