//! HTTP client of the control plane's deployment, revision and listener
//! endpoints.
//!
//! Source: docs/control-plane-api.md "Hosts and headers", "Requests" and
//! "Errors". Every request carries `X-Api-Key` and `X-Tenant-Id`; the key is a
//! [`SecretString`] marked sensitive on the header, so neither `Debug` of the
//! client nor any error ever shows it. Redirects are not followed (a redirect
//! to another host would carry the key along): a 3xx is an error.
//!
//! Each HTTP attempt takes a token of the client's rate limit
//! ([`RateLimit`]), is reported to the [`RequestObserver`], and is bounded by
//! the per-request timeout. GET and DELETE are retried on transient failures
//! ([`RetryPolicy`]); POST and PATCH never are.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use backon::Retryable;
use bytes::Bytes;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use secrecy::{ExposeSecret, SecretString};
use serde::Serialize;
use serde::de::DeserializeOwned;
use url::Url;

use super::budget::Budget;
use super::error::Error;
use super::merge::with_merged_resource_spec;
use super::operation::{
    Operation, PlaneLabel, STATUS_CLASS_TIMEOUT, STATUS_CLASS_TRANSPORT, status_class,
};
use super::response::{check_status_redacted, decode_body};
use super::types::{
    Deployment, DeploymentCreate, DeploymentPatch, GithubIntegration, GithubRepository, Listener,
    LogPage, LogQuery, Page, Revision, ValidationError,
};

pub use super::endpoint::Region;
pub use super::limit::RateLimit;
pub use super::operation::RequestObserver;
pub use super::retry::RetryPolicy;

/// Header carrying the API key (docs/control-plane-api.md "Hosts and headers").
pub const API_KEY_HEADER: &str = "x-api-key";
/// Header carrying the workspace id (docs/control-plane-api.md "Hosts and headers").
pub const TENANT_HEADER: &str = "x-tenant-id";
/// Default per-request (per-attempt) timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest answer body the client reads, in bytes (16 MiB; a page of 100
/// deployments is a few hundred KiB). The real limit is not documented (docs/control-plane-api.md
/// "Rate limits").
pub const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;
/// Largest `limit` the list endpoints accept (docs/control-plane-api.md "Requests": 1–100); the
/// page size of the `list_all_*` methods.
pub const MAX_PAGE_SIZE: u32 = 100;

/// How to reach and authenticate to one control plane.
#[derive(Clone)]
pub struct ClientConfig {
    /// Base URL without `/v2`, e.g. `https://api.host.langchain.com` or
    /// `https://host/api-host` (self-hosted). See [`Region`] and
    /// [`ClientConfig::self_hosted`].
    pub base_url: String,
    /// Workspace id, sent as `X-Tenant-Id`.
    pub workspace_id: String,
    /// API key, sent as `X-Api-Key` (or, with `bearer`, the token sent as
    /// `Authorization: Bearer <token>`); never shown by `Debug`, logs or
    /// errors.
    pub api_key: SecretString,
    /// Send `api_key` as a bearer token (`Authorization: Bearer`) instead
    /// of `X-Api-Key` (docs/control-plane-api.md, "Credentials and
    /// refusals"). Default false.
    pub bearer: bool,
    /// Timeout of one HTTP attempt (connect, send and read the whole body).
    /// Default [`DEFAULT_TIMEOUT`].
    pub timeout: Duration,
    /// Allow plain `http://` to a host that is not loopback. Default false.
    pub allow_insecure_http: bool,
    /// Extra PEM CA bundle trusted for a self-hosted control plane.
    pub ca_bundle_pem: Option<Vec<u8>>,
    /// Client-side rate limit (token bucket) of this control plane, shared by
    /// every clone of the client; every attempt, retries included, takes a
    /// token. `None` (default) = no limit unless [`ClientConfig::budget`] is
    /// set. Used as the ceiling of a new [`Budget`] when `budget` is `None`.
    pub rate_limit: Option<RateLimit>,
    /// The shared adaptive budget of this control plane (see
    /// [`super::budget`]): every client built with a clone of it draws from
    /// the same bucket, and a 429/503 seen by one slows all of them. `None`
    /// (default): a budget of its own when `rate_limit` is set, else none.
    pub budget: Option<Budget>,
    /// Fixed buckets every attempt also takes a token from, after
    /// `budget`: the declared share of a workspace and the ceiling of the
    /// base URL (see `controller::planes`). Never slowed by answers.
    /// Default none.
    pub caps: Vec<Budget>,
    /// Longest wait for budget tokens (or a `Retry-After` pause) before an
    /// attempt gives up with [`Error::Deferred`] instead of waiting; `None`
    /// (default) waits as long as it takes. The operator sets it so that a
    /// pass never holds a reconcile permit while its control plane is paused.
    pub max_token_wait: Option<Duration>,
    /// The AgentControlPlane this client serves, as the labels of
    /// [`RequestObserver::observe_token_wait`] and
    /// [`RequestObserver::observe_slowdown`]; `None` (default): those are not
    /// reported.
    pub plane: Option<PlaneLabel>,
    /// Receives one observation per HTTP attempt (for metrics), if set.
    pub observer: Option<Arc<dyn RequestObserver>>,
    /// How GET and DELETE are retried. Default: 4 attempts within 30 s,
    /// backoff 200 ms doubling up to 5 s, with jitter.
    pub retry: RetryPolicy,
}

impl ClientConfig {
    /// A config for `base_url` with the default timeout and retries, no
    /// extra CA, no rate limit and no observer.
    pub fn new(
        base_url: impl Into<String>,
        workspace_id: impl Into<String>,
        api_key: SecretString,
    ) -> Self {
        Self {
            base_url: base_url.into(),
            workspace_id: workspace_id.into(),
            api_key,
            bearer: false,
            timeout: DEFAULT_TIMEOUT,
            allow_insecure_http: false,
            ca_bundle_pem: None,
            rate_limit: None,
            budget: None,
            caps: Vec::new(),
            max_token_wait: None,
            plane: None,
            observer: None,
            retry: RetryPolicy::default(),
        }
    }

    /// A config for the control plane of a cloud region (docs/control-plane-api.md "Hosts and
    /// headers").
    pub fn for_region(
        region: Region,
        workspace_id: impl Into<String>,
        api_key: SecretString,
    ) -> Self {
        Self::new(region.base_url(), workspace_id, api_key)
    }

    /// A config for a self-hosted control plane at `host_url`: requests go
    /// under `{host_url}/api-host` (docs/control-plane-api.md "Hosts and headers").
    pub fn self_hosted(
        host_url: &str,
        workspace_id: impl Into<String>,
        api_key: SecretString,
    ) -> Self {
        Self::new(
            super::endpoint::self_hosted_base_url(host_url),
            workspace_id,
            api_key,
        )
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
            .field("ca_bundle_pem", &self.ca_bundle_pem.as_ref().map(Vec::len))
            .field("rate_limit", &self.rate_limit)
            .field("observer", &self.observer.is_some())
            .field("retry", &self.retry)
            .finish()
    }
}

/// Query parameters of `GET /v2/deployments` (docs/control-plane-api.md "Requests": List).
#[derive(Clone, Debug, Default, Serialize)]
pub struct ListDeployments {
    /// Page size, 1–100 (service default 20).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Items to skip.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<u32>,
    /// Exact-name filter (docs/control-plane-api.md, "Requests as the
    /// official clients send them": seen in the Go CLI; an older service
    /// ignores it, so callers still match the name themselves).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Substring filter on the name (ignores case).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name_contains: Option<String>,
    /// Deployment status filter, e.g. `READY` (comma-separated for several).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// `dev_free`, `dev` or `prod`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deployment_type: Option<String>,
    /// Comma-separated deployment ids (uuids).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deployment_ids: Option<String>,
}

/// Query parameters of `GET /v2/deployments/{id}/revisions` (docs/control-plane-api.md
/// "Requests": Revisions).
#[derive(Clone, Debug, Default, Serialize)]
pub struct ListRevisions {
    /// Page size, 1–100 (service default 20).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Items to skip.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<u32>,
    /// Comma-separated revision statuses, e.g. `DEPLOYED,BUILD_FAILED`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// Typed client of one control plane (one base URL, one workspace, one key).
///
/// Cheap to clone; clones share the connection pool and the rate limit.
#[derive(Clone)]
pub struct ControlPlaneClient {
    http: reqwest::Client,
    base: Url,
    workspace_id: String,
    retry: RetryPolicy,
    budget: Option<Budget>,
    caps: Vec<Budget>,
    max_token_wait: Option<Duration>,
    plane: Option<PlaneLabel>,
    observer: Option<Arc<dyn RequestObserver>>,
    /// The API key, kept only to redact it from error answers that repeat
    /// it (never logged; not in `Debug`).
    api_key: SecretString,
    bearer: bool,
    /// The secret values this client and its clones sent in request bodies
    /// (`secrets[].value` of creates and patches), the latest
    /// [`REMEMBERED_SECRETS`]: an error answer of any later request, a GET
    /// included, is redacted of them too (a `detail` may repeat a stored
    /// value although the request that provoked it carried none).
    sent_secrets: Arc<std::sync::Mutex<std::collections::VecDeque<SecretString>>>,
}

/// How many sent secret values a client remembers for redaction.
const REMEMBERED_SECRETS: usize = 1024;

impl fmt::Debug for ControlPlaneClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControlPlaneClient")
            .field("base", &self.base.as_str())
            .field("workspace_id", &self.workspace_id)
            .field("retry", &self.retry)
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

/// The API key and every `secrets[].value` of `req`'s JSON body.
fn sensitive_values(api_key: &SecretString, req: &reqwest::Request) -> Vec<SecretString> {
    fn walk(v: &serde_json::Value, out: &mut Vec<SecretString>) {
        match v {
            serde_json::Value::Object(map) => {
                for (k, child) in map {
                    if k == "secrets"
                        && let serde_json::Value::Array(items) = child
                    {
                        for item in items {
                            if let Some(value) = item.get("value").and_then(|x| x.as_str()) {
                                out.push(SecretString::from(value));
                            }
                        }
                    }
                    walk(child, out);
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
            _ => {}
        }
    }
    let mut out = vec![api_key.clone()];
    if let Some(body) = req.body().and_then(|b| b.as_bytes())
        && let Ok(v) = serde_json::from_slice::<serde_json::Value>(body)
    {
        walk(&v, &mut out);
    }
    out
}

/// Installs the `ring` rustls provider as the process default if none is set.
/// reqwest and kube in this crate are built without a provider of their own.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Percent-encodes one path segment: every byte but the unreserved
/// characters of RFC 3986.
fn encode_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Reads a whole answer body, refusing one over [`MAX_RESPONSE_BYTES`]
/// ([`Error::Decode`], without any of its bytes) so that a broken or hostile
/// server cannot exhaust memory.
/// Microseconds since the Unix epoch, now (0 before 1970).
fn unix_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

async fn read_body(mut resp: reqwest::Response, status: StatusCode) -> Result<Bytes, Error> {
    let mut body = bytes::BytesMut::new();
    while let Some(chunk) = resp.chunk().await.map_err(Error::from_reqwest)? {
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(Error::Decode {
                status: status.as_u16(),
                message: format!("the answer is larger than {MAX_RESPONSE_BYTES} bytes"),
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

/// Something with an id, to de-duplicate list pages.
trait Identified {
    fn id(&self) -> &str;
}

impl Identified for Deployment {
    fn id(&self) -> &str {
        &self.id
    }
}

impl Identified for Revision {
    fn id(&self) -> &str {
        &self.id
    }
}

impl Identified for Listener {
    fn id(&self) -> &str {
        &self.id
    }
}

/// Pages through a list with `limit` = [`MAX_PAGE_SIZE`] from offset 0 until
/// a page is short or empty, or brings no new id (a server that ignores
/// `offset`); items already seen (shifted by concurrent creates) are skipped.
async fn collect_pages<T, F, Fut>(mut fetch: F) -> Result<Vec<T>, Error>
where
    T: Identified,
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<Page<T>, Error>>,
{
    let mut all: Vec<T> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut offset = 0u32;
    loop {
        let page = fetch(offset).await?;
        let n = page.resources.len();
        let mut new = 0usize;
        for item in page.resources {
            if seen.insert(item.id().to_owned()) {
                new += 1;
                all.push(item);
            }
        }
        if n < MAX_PAGE_SIZE as usize || new == 0 {
            return Ok(all);
        }
        offset = match offset.checked_add(n as u32) {
            Some(o) => o,
            None => return Ok(all),
        };
    }
}

impl ControlPlaneClient {
    /// Builds a client.
    ///
    /// Errors: [`Error::InvalidEndpoint`] when the URL does not parse, is not
    /// http(s), carries credentials, or is plain HTTP to a non-loopback host
    /// without `allow_insecure_http`; when the API key or workspace id is not
    /// a valid header value; when the CA bundle is not PEM; or when the rate
    /// limit is not positive.
    pub fn new(config: ClientConfig) -> Result<Self, Error> {
        install_crypto_provider();
        let base = super::endpoint::parse_base_url(&config.base_url, config.allow_insecure_http)?;
        let credential = if config.bearer {
            format!("Bearer {}", config.api_key.expose_secret())
        } else {
            config.api_key.expose_secret().to_owned()
        };
        let mut key = HeaderValue::from_str(&credential).map_err(|_| {
            Error::InvalidEndpoint("the API key is not a valid header value".into())
        })?;
        key.set_sensitive(true);
        let tenant = HeaderValue::from_str(&config.workspace_id).map_err(|_| {
            Error::InvalidEndpoint("the workspace id is not a valid header value".into())
        })?;
        let mut headers = HeaderMap::new();
        let credential_header = if config.bearer {
            reqwest::header::AUTHORIZATION
        } else {
            HeaderName::from_static(API_KEY_HEADER)
        };
        headers.insert(credential_header, key);
        headers.insert(HeaderName::from_static(TENANT_HEADER), tenant);
        let mut builder = reqwest::Client::builder()
            .default_headers(headers)
            .timeout(config.timeout)
            .connect_timeout(config.timeout.min(Duration::from_secs(10)))
            .redirect(reqwest::redirect::Policy::none())
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
        if let Some(limit) = &config.rate_limit {
            limit.period()?;
        }
        let budget = config
            .budget
            .or_else(|| config.rate_limit.map(|l| Budget::new(Some(l))));
        Ok(Self {
            http,
            base,
            workspace_id: config.workspace_id,
            retry: config.retry,
            budget,
            caps: config.caps,
            max_token_wait: config.max_token_wait,
            plane: config.plane,
            observer: config.observer,
            api_key: config.api_key,
            bearer: config.bearer,
            sent_secrets: Arc::default(),
        })
    }

    /// What an error answer to `req` must not repeat: the API key, the
    /// secret values `req` carries, and those this client sent before
    /// (which `req`'s are added to).
    fn echoes_of(&self, req: &reqwest::Request) -> Vec<SecretString> {
        let mut echoes = sensitive_values(&self.api_key, req);
        let mut sent = self.sent_secrets.lock().unwrap_or_else(|p| p.into_inner());
        for value in echoes.iter().skip(1) {
            let known = sent
                .iter()
                .any(|s| s.expose_secret() == value.expose_secret());
            if !known {
                if sent.len() == REMEMBERED_SECRETS {
                    sent.pop_front();
                }
                sent.push_back(value.clone());
            }
        }
        echoes.extend(sent.iter().cloned());
        echoes
    }

    /// The base URL requests go to (with a trailing `/`).
    pub fn base_url(&self) -> &str {
        self.base.as_str()
    }

    /// The HTTP client of this control plane: its credential and
    /// `X-Tenant-Id` as default headers, its CA bundle, no redirects. For
    /// the other APIs of the same install that take the same credential
    /// ([`crate::langsmith::DatasetClient`]); it bypasses this client's
    /// budget, retries and redaction, which the caller owns.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// The workspace id sent as `X-Tenant-Id`.
    pub fn workspace_id(&self) -> &str {
        &self.workspace_id
    }

    /// The API key, for the agent servers of this control plane's
    /// deployments (docs/control-plane-api.md "Agent server": the key of the
    /// organization that owns them). A [`SecretString`]: never printed.
    pub fn api_key(&self) -> &SecretString {
        &self.api_key
    }

    /// True when the credential is a bearer token
    /// ([`ClientConfig::bearer`]), not an API key.
    pub fn uses_bearer(&self) -> bool {
        self.bearer
    }

    /// `{base}/seg1/seg2/...`; each segment is percent-encoded, so an id
    /// cannot change the path (`a/b` or `a?b` stay one segment and reach the
    /// service, which answers 422 or 404).
    ///
    /// Errors: an empty, `.` or `..` segment cannot be put in a URL path (URL
    /// parsers remove dot segments, even percent-encoded ones), so it is
    /// refused before sending with the [`Error::Validation`] the service gives
    /// any invalid id (loc `["path"]`, type `path_segment`).
    fn url(&self, segments: &[&str]) -> Result<Url, Error> {
        if let Some(bad) = segments
            .iter()
            .find(|s| s.is_empty() || **s == "." || **s == "..")
        {
            return Err(Error::Validation {
                errors: vec![ValidationError {
                    loc: vec![serde_json::Value::from("path")],
                    msg: format!("{bad:?} cannot be sent as a path segment"),
                    kind: "path_segment".into(),
                }],
            });
        }
        let mut url = self.base.clone();
        let encoded: Vec<String> = segments.iter().map(|s| encode_segment(s)).collect();
        let path = format!("{}{}", self.base.path(), encoded.join("/"));
        url.set_path(&path);
        Ok(url)
    }

    /// Builds the request of `op` once (it is cloned for each attempt).
    fn request<Q: Serialize + ?Sized, B: Serialize + ?Sized>(
        &self,
        op: Operation,
        segments: &[&str],
        query: Option<&Q>,
        body: Option<&B>,
    ) -> Result<reqwest::Request, Error> {
        let mut req = self.http.request(op.method(), self.url(segments)?);
        if let Some(q) = query {
            req = req.query(q);
        }
        if let Some(b) = body {
            let bytes = serde_json::to_vec(b)
                .map_err(|e| Error::InvalidEndpoint(format!("encoding the request body: {e}")))?;
            req = req
                .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                .body(bytes);
        }
        req.build()
            .map_err(|e| Error::InvalidEndpoint(format!("building the request: {e}")))
    }

    /// One HTTP attempt: waits for a rate-limit token (and a place in the
    /// window, [`super::budget::Slot`]), checks that no `Retry-After` began
    /// meanwhile, sends, tells the budget of a 429 or 503 as soon as its
    /// headers are there, reads the whole body, reports to the observer,
    /// and checks the status.
    ///
    /// Each attempt is logged at debug level (target
    /// `agent_operator::controlplane::client`) with its AgentControlPlane
    /// and the wall-clock microseconds at which it was sent and its answer
    /// (status and headers) or error came: the fleet benchmark reads them
    /// to count requests sent after the client received a 429.
    async fn attempt(
        &self,
        op: Operation,
        req: reqwest::Request,
    ) -> Result<(StatusCode, Bytes), Error> {
        let slots = self.take_tokens(op.priority()).await?;
        // What an error answer must not repeat into our errors, conditions
        // and logs: the API key and the secret values this request carries.
        let echoes = self.echoes_of(&req);
        self.confirm_unpaused(op, &slots)?;
        let sent_at = unix_micros();
        let started = Instant::now();
        let (answer, answered_at) = self.send(req).await;
        let elapsed = started.elapsed();
        if let Err(e @ Error::Timeout) = &answer {
            self.slowed_down("timeout", false, e);
        }
        let class = match &answer {
            Ok((status, _, _)) => status_class(status.as_u16()),
            Err(Error::Timeout) => STATUS_CLASS_TIMEOUT,
            Err(_) => STATUS_CLASS_TRANSPORT,
        };
        let plane = self.plane.as_ref();
        tracing::debug!(
            operation = op.as_str(),
            status_class = class,
            status = answer.as_ref().ok().map(|a| a.0.as_u16()),
            elapsed_ms = elapsed.as_millis() as u64,
            namespace = plane.map_or("", |p| p.namespace.as_str()),
            control_plane = plane.map_or("", |p| p.name.as_str()),
            sent_unix_us = sent_at,
            answered_unix_us = answered_at,
            "control plane request"
        );
        if let Some(observer) = &self.observer {
            observer.observe(op.as_str(), class, elapsed);
        }
        let (status, retry_after, body) = answer?;
        // Error answers, and log lines (which may print anything), are
        // cleaned of the key and the values this request carried.
        let body = if op.success_statuses().contains(&status.as_u16()) && !op.is_read_by_post() {
            body
        } else {
            crate::redact::bytes(body, &echoes)
        };
        let checked = check_status_redacted(op, status, retry_after.as_ref(), &body, &echoes);
        self.account(&checked);
        drop(slots);
        checked?;
        Ok((status, body))
    }

    /// Sends `req` and reads its answer: the status, `Retry-After` and
    /// body, and the wall-clock microseconds at which the status and
    /// headers (or the error) came.
    async fn send(
        &self,
        req: reqwest::Request,
    ) -> (Result<(StatusCode, Option<HeaderValue>, Bytes), Error>, u64) {
        let mut answered_at = None;
        let answer = async {
            let resp = self.http.execute(req).await.map_err(Error::from_reqwest)?;
            let status = resp.status();
            let retry_after = resp.headers().get(RETRY_AFTER).cloned();
            answered_at = Some(unix_micros());
            self.throttled_at_headers(status, retry_after.as_ref());
            let body = read_body(resp, status).await?;
            Ok((status, retry_after, body))
        }
        .await;
        (answer, answered_at.unwrap_or_else(unix_micros))
    }

    /// What a checked answer tells the budget: a 429 or 503, a 502 or 504
    /// slow it down; anything else is a success.
    fn account(&self, checked: &Result<(), Error>) {
        match checked {
            Err(e @ Error::RateLimited { status, .. }) => {
                self.slowed_down(if *status == 429 { "429" } else { "503" }, true, e)
            }
            Err(e @ Error::Server { status: 502, .. }) => self.slowed_down("502", false, e),
            Err(e @ Error::Server { status: 504, .. }) => self.slowed_down("504", false, e),
            _ => {
                if let Some(budget) = &self.budget {
                    budget.on_success();
                }
            }
        }
    }

    /// Checks, right before sending, that no `Retry-After` of the budget
    /// began while the request waited for its tokens (it took the budget's
    /// before the 429 came, then waited for a cap's).
    ///
    /// Errors: [`Error::Deferred`] until the pause ends; nothing is sent.
    fn confirm_unpaused(&self, op: Operation, slots: &[super::budget::Slot]) -> Result<(), Error> {
        let Some(retry_in) = slots.iter().find_map(|s| s.confirm().err()) else {
            return Ok(());
        };
        let plane = self.plane.as_ref();
        tracing::debug!(
            operation = op.as_str(),
            namespace = plane.map_or("", |p| p.namespace.as_str()),
            control_plane = plane.map_or("", |p| p.name.as_str()),
            "control plane request held back: a Retry-After began while it waited"
        );
        Err(Error::Deferred {
            retry_in,
            cause: self.budget.as_ref().and_then(Budget::cause),
        })
    }

    /// A 429 or 503 tells the budget at once, from its status and
    /// `Retry-After` header, before its body is read: from then on no
    /// request of the budget goes out while the pause runs.
    fn throttled_at_headers(&self, status: StatusCode, retry_after: Option<&HeaderValue>) {
        if let Some(budget) = &self.budget
            && matches!(status.as_u16(), 429 | 503)
        {
            budget.on_throttled(super::error::parse_retry_after(retry_after));
        }
    }

    /// Takes one token of the budget and of each cap, waiting at most
    /// `max_token_wait` in all; reports the wait to the observer. Returns
    /// the slots to hold until the answer (the budget's first).
    ///
    /// Errors: [`Error::Deferred`] when a token (or the end of a pause) is
    /// further away than the rest of `max_token_wait`. Tokens already taken
    /// from earlier buckets are spent.
    async fn take_tokens(
        &self,
        priority: super::Priority,
    ) -> Result<Vec<super::budget::Slot>, Error> {
        let mut waited = Duration::ZERO;
        let mut slots = Vec::with_capacity(1 + self.caps.len());
        for bucket in self.budget.iter().chain(self.caps.iter()) {
            let left = self.max_token_wait.map(|m| m.saturating_sub(waited));
            match bucket.acquire_within(priority, left).await {
                Ok((w, slot)) => {
                    waited += w;
                    slots.push(slot);
                }
                Err(retry_in) => {
                    return Err(Error::Deferred {
                        retry_in,
                        cause: self.budget.as_ref().and_then(Budget::cause),
                    });
                }
            }
        }
        if let (Some(observer), Some(plane)) = (&self.observer, &self.plane) {
            observer.observe_token_wait(plane, waited);
        }
        Ok(slots)
    }

    /// An answer that slows the budget: 429 and 503 (`throttled`; the
    /// budget was told at their headers, [`Self::throttled_at_headers`]);
    /// 502, 504 and timeouts halve it and drop its window. `answer` is
    /// kept as the budget's cause ([`Budget::note_cause`]).
    fn slowed_down(&self, cause: &'static str, throttled: bool, answer: &Error) {
        if let Some(budget) = &self.budget {
            budget.note_cause(answer.stable_summary());
            if !throttled {
                budget.on_slowdown();
            }
        }
        if let (Some(observer), Some(plane)) = (&self.observer, &self.plane) {
            observer.observe_slowdown(plane, cause);
        }
    }

    /// Runs `req` for `op`: once for POST and PATCH; for GET and DELETE,
    /// retried on transient errors as the [`RetryPolicy`] says. Returns the
    /// status and the success body.
    async fn execute(
        &self,
        op: Operation,
        req: reqwest::Request,
    ) -> Result<(StatusCode, Bytes), Error> {
        let once = || async {
            let attempt = req.try_clone().ok_or_else(|| {
                Error::InvalidEndpoint("the request body cannot be sent twice".into())
            })?;
            self.attempt(op, attempt).await
        };
        if !op.is_retried() || self.retry.max_attempts <= 1 {
            return once().await;
        }
        let policy = self.retry;
        let first_started = Instant::now();
        once.retry(policy.backoff())
            // A deferred attempt was not sent: the caller requeues it for
            // when the budget allows it, rather than waiting here.
            .when(|e| e.is_transient() && !matches!(e, Error::Deferred { .. }))
            .adjust(move |e, backoff| policy.next_delay(e, backoff, first_started.elapsed()))
            .notify(|e, delay| {
                tracing::debug!(
                    operation = op.as_str(),
                    error = %e,
                    delay_ms = delay.as_millis() as u64,
                    "retrying control plane request"
                );
            })
            .await
    }

    async fn json<T: DeserializeOwned>(
        &self,
        op: Operation,
        req: reqwest::Request,
    ) -> Result<T, Error> {
        let (status, body) = self.execute(op, req).await?;
        decode_body(status, &body)
    }

    /// `POST /v2/deployments` → 201 with the Deployment (docs/control-plane-api.md "Requests",
    /// Create). The body is sent as the official clients send it
    /// ([`DeploymentCreate::as_sent`]: a `github` create carries
    /// `deployment_type` and `build_on_push`, an `external_docker` one a
    /// `resource_spec` object).
    ///
    /// Never retried, not even after a timeout or a 5xx: there is no
    /// idempotency key, so a blind retry of a create whose answer was lost
    /// could create a second deployment. After a transient error, look the
    /// deployment up by name ([`ControlPlaneClient::find_deployment_by_name`])
    /// before creating again. Errors: 400 (rules), 403 (listener on a
    /// non-enterprise workspace), 409 (name taken), 422, and transport errors.
    pub async fn create_deployment(&self, body: &DeploymentCreate) -> Result<Deployment, Error> {
        let body = &body.as_sent();
        let req = self.request(
            Operation::CreateDeployment,
            &["v2", "deployments"],
            None::<&()>,
            Some(body),
        )?;
        self.json(Operation::CreateDeployment, req).await
    }

    /// `GET /v2/deployments/{id}` → the Deployment. Retried on transient
    /// errors. Errors: 404 (detail names the id; also once an asynchronous
    /// delete is over), 422 (id not a uuid).
    pub async fn get_deployment(&self, id: &str) -> Result<Deployment, Error> {
        let req = self.request(
            Operation::GetDeployment,
            &["v2", "deployments", id],
            None::<&()>,
            None::<&()>,
        )?;
        self.json(Operation::GetDeployment, req).await
    }

    /// `PATCH /v2/deployments/{id}` with only the fields to change → the
    /// Deployment (docs/control-plane-api.md "Requests", Patch). A non-null `repo_ref`,
    /// `langgraph_config_path` or `image_uri`, a `resource_spec`, or a
    /// non-empty `secrets` creates a new revision; `build_on_push` alone does
    /// not; an empty `secrets` list means "unchanged". `resource_spec` is
    /// replaced whole: see [`ControlPlaneClient::patch_deployment_merged`].
    ///
    /// Never retried (no idempotency key: a repeated patch could create a
    /// second revision). Errors: 400 (immutable field, tag with
    /// `build_on_push`), 404, 409 (being deleted), 422.
    pub async fn patch_deployment(
        &self,
        id: &str,
        patch: &DeploymentPatch,
    ) -> Result<Deployment, Error> {
        let req = self.request(
            Operation::PatchDeployment,
            &["v2", "deployments", id],
            None::<&()>,
            Some(patch),
        )?;
        self.json(Operation::PatchDeployment, req).await
    }

    /// Like [`ControlPlaneClient::patch_deployment`], but a partial
    /// `source_config.resource_spec` changes only the fields it names: the
    /// deployment is read first (`GET`) and the partial object is merged into
    /// its current `resource_spec` with JSON Merge Patch rules (a `null`
    /// removes a field; see [`super::merge`]), because the service replaces
    /// the whole object (docs/control-plane-api.md "Deployment"). Without a `resource_spec` this
    /// is a plain PATCH.
    ///
    /// Not atomic: a change made by someone else between the GET and the
    /// PATCH is overwritten (the API has no precondition header). Errors:
    /// those of the GET, then those of the PATCH.
    pub async fn patch_deployment_merged(
        &self,
        id: &str,
        patch: &DeploymentPatch,
    ) -> Result<Deployment, Error> {
        let partial = patch
            .source_config
            .as_ref()
            .is_some_and(|sc| sc.resource_spec.is_some());
        if !partial {
            return self.patch_deployment(id, patch).await;
        }
        let current = self.get_deployment(id).await?;
        self.patch_deployment(id, &with_merged_resource_spec(&current, patch))
            .await
    }

    /// `DELETE /v2/deployments/{id}` → 204. Retried on transient errors.
    ///
    /// Deletion is asynchronous (docs/control-plane-api.md "Requests", Delete): GET keeps
    /// answering with status `AWAITING_DELETE` until it returns 404. A 404
    /// here means the deployment is already gone: callers treat it as
    /// success (a retried DELETE whose first answer was lost may see it).
    pub async fn delete_deployment(&self, id: &str) -> Result<(), Error> {
        let req = self.request(
            Operation::DeleteDeployment,
            &["v2", "deployments", id],
            None::<&()>,
            None::<&()>,
        )?;
        self.execute(Operation::DeleteDeployment, req)
            .await
            .map(|_| ())
    }

    /// `GET /v2/deployments` → one page (`{"resources", "offset"}`, newest
    /// first). Retried on transient errors. Errors: 422 for a `limit` outside
    /// 1–100, a bad `deployment_type` or a non-uuid in `deployment_ids`.
    pub async fn list_deployments(
        &self,
        query: &ListDeployments,
    ) -> Result<Page<Deployment>, Error> {
        let req = self.request(
            Operation::ListDeployments,
            &["v2", "deployments"],
            Some(query),
            None::<&()>,
        )?;
        self.json(Operation::ListDeployments, req).await
    }

    /// Every deployment matching `query`'s filters, paging with
    /// `limit` = [`MAX_PAGE_SIZE`] and `offset` to the end (until a short
    /// page). `query.limit`/`offset` are ignored. Errors: those of
    /// [`ControlPlaneClient::list_deployments`].
    pub async fn list_all_deployments(
        &self,
        query: &ListDeployments,
    ) -> Result<Vec<Deployment>, Error> {
        collect_pages(|offset| {
            let q = ListDeployments {
                limit: Some(MAX_PAGE_SIZE),
                offset: Some(offset),
                ..query.clone()
            };
            async move { self.list_deployments(&q).await }
        })
        .await
    }

    /// Every deployment named exactly `name`, previews excepted: lists with
    /// the exact `name` filter and `name_contains` (as the Go CLI does), and
    /// keeps the deployments whose name equals `name` and that the service
    /// does not mark `is_preview` (a pull-request preview may share its
    /// parent's name; the Go CLI skips them too). One request on a service with
    /// the exact filter; a service that ignores it answers the
    /// `name_contains` matches, paged to the end (docs/control-plane-api.md,
    /// "Requests as the official clients send them"). Errors: those of
    /// [`ControlPlaneClient::list_deployments`].
    pub async fn deployments_named(&self, name: &str) -> Result<Vec<Deployment>, Error> {
        let found = self
            .list_all_deployments(&ListDeployments {
                name: Some(name.to_owned()),
                name_contains: Some(name.to_owned()),
                ..Default::default()
            })
            .await?;
        Ok(found
            .into_iter()
            .filter(|d| d.name == name && !d.preview())
            .collect())
    }

    /// Exact-name lookup: the first of [`Self::deployments_named`].
    pub async fn find_deployment_by_name(&self, name: &str) -> Result<Option<Deployment>, Error> {
        Ok(self.deployments_named(name).await?.into_iter().next())
    }

    /// `GET /v2/deployments/{id}/revisions` → one page, newest first.
    /// Retried on transient errors. Errors: 404 (deployment), 422.
    pub async fn list_revisions(
        &self,
        deployment_id: &str,
        query: &ListRevisions,
    ) -> Result<Page<Revision>, Error> {
        let req = self.request(
            Operation::ListRevisions,
            &["v2", "deployments", deployment_id, "revisions"],
            Some(query),
            None::<&()>,
        )?;
        self.json(Operation::ListRevisions, req).await
    }

    /// Every revision of a deployment matching `query.status`, newest first,
    /// paging to the end. Errors: those of
    /// [`ControlPlaneClient::list_revisions`].
    pub async fn list_all_revisions(
        &self,
        deployment_id: &str,
        query: &ListRevisions,
    ) -> Result<Vec<Revision>, Error> {
        collect_pages(|offset| {
            let q = ListRevisions {
                limit: Some(MAX_PAGE_SIZE),
                offset: Some(offset),
                ..query.clone()
            };
            async move { self.list_revisions(deployment_id, &q).await }
        })
        .await
    }

    /// `GET /v2/deployments/{id}/revisions/{revision_id}` → the Revision.
    /// Retried on transient errors. Errors: 404 (deployment or revision; the
    /// detail names the id), 422.
    pub async fn get_revision(
        &self,
        deployment_id: &str,
        revision_id: &str,
    ) -> Result<Revision, Error> {
        let req = self.request(
            Operation::GetRevision,
            &["v2", "deployments", deployment_id, "revisions", revision_id],
            None::<&()>,
            None::<&()>,
        )?;
        self.json(Operation::GetRevision, req).await
    }

    /// `POST /v2/deployments/{id}/revisions`: a new revision with the current
    /// configuration (redeploy) → the Revision (docs/control-plane-api.md "Requests", Redeploy).
    ///
    /// Never retried: a repeated redeploy creates another revision. Errors:
    /// 404, 409 (being deleted), 422.
    pub async fn redeploy(&self, deployment_id: &str) -> Result<Revision, Error> {
        let req = self.request(
            Operation::Redeploy,
            &["v2", "deployments", deployment_id, "revisions"],
            None::<&()>,
            None::<&()>,
        )?;
        self.json(Operation::Redeploy, req).await
    }

    /// `POST /v1/projects/{deployment_id}/revisions/{revision_id}/build_logs`
    /// → one page of the revision's build log (docs/control-plane-api.md "Logs", seen only in the
    /// official clients). A read sent as POST: retried on transient errors.
    ///
    /// Errors: 404 (unknown deployment or revision), 422, transport errors.
    pub async fn build_logs(
        &self,
        deployment_id: &str,
        revision_id: &str,
        query: &LogQuery,
    ) -> Result<LogPage, Error> {
        let req = self.request(
            Operation::BuildLogs,
            &[
                "v1",
                "projects",
                deployment_id,
                "revisions",
                revision_id,
                "build_logs",
            ],
            None::<&()>,
            Some(query),
        )?;
        self.json(Operation::BuildLogs, req).await
    }

    /// `POST /v1/projects/{deployment_id}/deploy_logs` (the server log of the
    /// deployment) or, with a revision,
    /// `POST /v1/projects/{deployment_id}/revisions/{revision_id}/deploy_logs`
    /// → one page of the server log (docs/control-plane-api.md "Logs"). A read sent as POST:
    /// retried on transient errors.
    ///
    /// Errors: 404 (unknown deployment or revision), 422, transport errors.
    pub async fn deploy_logs(
        &self,
        deployment_id: &str,
        revision_id: Option<&str>,
        query: &LogQuery,
    ) -> Result<LogPage, Error> {
        let segments: Vec<&str> = match revision_id {
            Some(rid) => vec![
                "v1",
                "projects",
                deployment_id,
                "revisions",
                rid,
                "deploy_logs",
            ],
            None => vec!["v1", "projects", deployment_id, "deploy_logs"],
        };
        let req = self.request(Operation::DeployLogs, &segments, None::<&()>, Some(query))?;
        self.json(Operation::DeployLogs, req).await
    }

    /// `POST /v2/deployments/{id}/revisions/{revision_id}/redeploy`: a new
    /// revision with the configuration of the earlier revision `revision_id`
    /// (rollback; docs/control-plane-api.md "Requests", Redeploy an earlier revision) → the
    /// Deployment, whose `latest_revision_id` is the new revision (the
    /// answer of the public API reference's "redeploy revision" page, as the
    /// emulator serves it).
    ///
    /// Never retried: a repeated request creates another revision. Errors:
    /// 404 (deployment or revision), 409 (being deleted), 422.
    pub async fn redeploy_revision(
        &self,
        deployment_id: &str,
        revision_id: &str,
    ) -> Result<Deployment, Error> {
        let req = self.request(
            Operation::RedeployRevision,
            &[
                "v2",
                "deployments",
                deployment_id,
                "revisions",
                revision_id,
                "redeploy",
            ],
            None::<&()>,
            None::<&()>,
        )?;
        self.json(Operation::RedeployRevision, req).await
    }

    /// `GET /v2/listeners/{listener_id}` → the Listener. Retried on transient
    /// errors. Errors (docs/control-plane-api.md "Errors"): 403 unless the organization is
    /// self-hosted enterprise (the detail names the workspace), 404 (the
    /// detail names the id), 422 (id not a uuid).
    pub async fn get_listener(&self, listener_id: &str) -> Result<Listener, Error> {
        let req = self.request(
            Operation::GetListener,
            &["v2", "listeners", listener_id],
            None::<&()>,
            None::<&()>,
        )?;
        self.json(Operation::GetListener, req).await
    }

    /// `GET /v2/listeners?limit=&offset=` → one page (docs/control-plane-api.md "Requests",
    /// Listeners). Retried on transient errors. Errors: 403 as for
    /// [`ControlPlaneClient::get_listener`], 422 for a `limit` outside 1–100.
    pub async fn list_listeners(&self, limit: u32, offset: u32) -> Result<Page<Listener>, Error> {
        let req = self.request(
            Operation::ListListeners,
            &["v2", "listeners"],
            Some(&[("limit", limit), ("offset", offset)]),
            None::<&()>,
        )?;
        self.json(Operation::ListListeners, req).await
    }

    /// Every listener of the workspace, paging to the end. Errors: those of
    /// [`ControlPlaneClient::list_listeners`].
    pub async fn list_all_listeners(&self) -> Result<Vec<Listener>, Error> {
        collect_pages(|offset| self.list_listeners(MAX_PAGE_SIZE, offset)).await
    }

    /// `GET /v1/integrations/github/install` → the GitHub integrations of the
    /// workspace, a bare JSON array `[{id, installation_id, name}]` (docs/control-plane-api.md
    /// "Integrations (v1)", seen only in the official clients: not in the
    /// public API description, shape not documented beyond these fields).
    /// Retried on transient errors. Errors: as any read (401, 403, 5xx).
    pub async fn list_github_integrations(&self) -> Result<Vec<GithubIntegration>, Error> {
        let req = self.request(
            Operation::ListIntegrations,
            &["v1", "integrations", "github", "install"],
            None::<&()>,
            None::<&()>,
        )?;
        self.json(Operation::ListIntegrations, req).await
    }

    /// `GET /v1/integrations/github/{integration_id}/repos` → the
    /// repositories the integration can read, a bare JSON array
    /// `[{url, default_branch, ...}]` (docs/control-plane-api.md "Integrations (v1)", seen only
    /// in the official clients). Retried on transient errors. Errors: 404
    /// for an unknown integration (emulator; not documented), 422 for an id
    /// that is not a uuid, and those of any read.
    pub async fn list_github_repositories(
        &self,
        integration_id: &str,
    ) -> Result<Vec<GithubRepository>, Error> {
        let req = self.request(
            Operation::ListIntegrationRepos,
            &["v1", "integrations", "github", integration_id, "repos"],
            None::<&()>,
            None::<&()>,
        )?;
        self.json(Operation::ListIntegrationRepos, req).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(url: &str) -> ClientConfig {
        ClientConfig::new(url, "ws", SecretString::from("super-secret-key"))
    }

    /// The request head `config`'s client sends for one GET, read by a bare
    /// TCP listener (lowercased).
    async fn request_head(mut config: impl FnMut(&str) -> ClientConfig) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 8192];
            let n = sock.read(&mut buf).await.unwrap();
            let body = br#"{"detail":"no such"}"#;
            let head = format!(
                "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            sock.write_all(head.as_bytes()).await.unwrap();
            sock.write_all(body).await.unwrap();
            String::from_utf8_lossy(&buf[..n]).to_lowercase()
        });
        let c = ControlPlaneClient::new(config(&url)).unwrap();
        let e = c
            .get_deployment("3c90c3cc-0d44-4b50-8888-8dd25736052a")
            .await
            .unwrap_err();
        assert!(matches!(e, Error::NotFound { .. }), "{e}");
        server.await.unwrap()
    }

    #[tokio::test]
    async fn the_credential_is_an_api_key_or_a_bearer_token() {
        let head = request_head(cfg).await;
        assert!(head.contains("x-api-key: super-secret-key"), "{head}");
        assert!(!head.contains("authorization"), "{head}");
        let head = request_head(|url| {
            let mut c = cfg(url);
            c.bearer = true;
            c
        })
        .await;
        assert!(
            head.contains("authorization: bearer super-secret-key"),
            "{head}"
        );
        assert!(!head.contains("x-api-key"), "{head}");
        assert!(head.contains("x-tenant-id: ws"), "{head}");
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
    fn paths_keep_the_api_host_prefix_and_encode_ids() {
        let c = ControlPlaneClient::new(cfg("https://example.com/api-host")).unwrap();
        assert_eq!(
            c.url(&["v2", "deployments"]).unwrap().as_str(),
            "https://example.com/api-host/v2/deployments"
        );
        let c = ControlPlaneClient::new(cfg("https://api.host.langchain.com/")).unwrap();
        assert_eq!(
            c.url(&["v2", "deployments", "x"]).unwrap().as_str(),
            "https://api.host.langchain.com/v2/deployments/x"
        );
        assert_eq!(
            c.url(&["v2", "deployments", "../a/b?c#d"])
                .unwrap()
                .as_str(),
            "https://api.host.langchain.com/v2/deployments/..%2Fa%2Fb%3Fc%23d"
        );
        for bad in ["..", ".", ""] {
            let e = c.url(&["v2", "deployments", bad]).unwrap_err();
            assert!(matches!(e, Error::Validation { .. }), "{bad:?}: {e}");
        }
        assert_eq!(
            c.url(&["v2", "deployments", "é 1"]).unwrap().as_str(),
            "https://api.host.langchain.com/v2/deployments/%C3%A9%201"
        );
        let c = ControlPlaneClient::new(ClientConfig::self_hosted(
            "https://ls.example.com",
            "ws",
            SecretString::from("k"),
        ))
        .unwrap();
        assert_eq!(c.base_url(), "https://ls.example.com/api-host/");
        let c = ControlPlaneClient::new(ClientConfig::for_region(
            Region::Eu,
            "ws",
            SecretString::from("k"),
        ))
        .unwrap();
        assert_eq!(c.base_url(), "https://eu.api.host.langchain.com/");
    }

    #[test]
    fn debug_never_shows_the_key() {
        let c = cfg("https://example.com");
        assert!(!format!("{c:?}").contains("super-secret-key"));
        let client = ControlPlaneClient::new(c).unwrap();
        assert!(!format!("{client:?}").contains("super-secret-key"));
    }

    #[test]
    fn invalid_rate_limits_are_refused() {
        let mut c = cfg("https://example.com");
        c.rate_limit = Some(RateLimit {
            requests_per_second: 0.0,
            burst: 1,
        });
        assert!(matches!(
            ControlPlaneClient::new(c),
            Err(Error::InvalidEndpoint(_))
        ));
    }
}
