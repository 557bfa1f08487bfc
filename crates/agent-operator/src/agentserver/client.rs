//! HTTP client of an agent server (a deployment's `{deployment_url}`, or a
//! local `langgraph dev`).
//!
//! Source: docs/control-plane-api.md "Agent server" (endpoints, answer
//! shapes, the key of cloud deployments). `X-Api-Key` is sent when a key is given
//! (cloud deployments require it; `langgraph dev` needs none), from a
//! [`SecretString`] on a header marked sensitive, and cut out of any error
//! answer that repeats it. Redirects are not followed (the key would travel
//! to the redirect's host).
//!
//! Timeouts: `connect_timeout` for the TCP/TLS connect; `request_timeout`
//! for a whole plain request, and for the status line and headers of a run
//! stream; `stream_idle_timeout` between two reads of a run stream (the
//! server sends `:` heartbeats while a step runs, so a long run is fine as
//! long as bytes keep arriving).

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use secrecy::{ExposeSecret, SecretString};
use serde::de::DeserializeOwned;
use url::Url;

use super::error::Error;
use super::sse::SseParser;
use super::types::{
    Assistant, AssistantCreate, AssistantPage, AssistantPatch, AssistantSearch,
    AssistantVersionChange, Cron, CronCreate, CronPatch, CronSearch, RunEvent, RunStreamRequest,
    ServerInfo, Thread, ThreadPrune, ThreadPruned, ThreadSearch,
};

/// Header carrying the API key (docs/control-plane-api.md "Agent server").
pub const API_KEY_HEADER: &str = "x-api-key";
/// Header carrying the next offset of `/assistants/search` (docs/control-plane-api.md
/// "Agent server").
pub const PAGINATION_NEXT_HEADER: &str = "x-pagination-next";
/// Default connect timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default timeout of a plain request, and of the headers of a stream.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Default longest silence of a run stream between two reads.
pub const DEFAULT_STREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Largest plain answer body read, in bytes (16 MiB).
pub const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;
/// Page size [`AgentServerClient::search_all_assistants`] uses when the
/// search gives none.
pub const DEFAULT_SEARCH_PAGE: u32 = 100;
/// Most assistants [`AgentServerClient::search_all_assistants`] collects
/// before giving up with [`Error::Paging`].
pub const MAX_SEARCH_RESULTS: usize = 10_000;

/// How to reach one agent server. `Debug` never shows the key.
#[derive(Clone)]
pub struct AgentServerConfig {
    /// Base URL, e.g. `http://127.0.0.1:2024` or a deployment's URL (a path
    /// prefix is kept).
    pub url: String,
    /// API key sent as `X-Api-Key`; `None` sends no key.
    pub api_key: Option<SecretString>,
    /// See the module docs. Default [`DEFAULT_CONNECT_TIMEOUT`].
    pub connect_timeout: Duration,
    /// See the module docs. Default [`DEFAULT_REQUEST_TIMEOUT`].
    pub request_timeout: Duration,
    /// See the module docs. Default [`DEFAULT_STREAM_IDLE_TIMEOUT`].
    pub stream_idle_timeout: Duration,
    /// Allow plain `http://` to a host that is not loopback (the key would
    /// travel in clear text). Default false.
    pub allow_insecure_http: bool,
}

impl AgentServerConfig {
    /// A config for `url` with no key and the default timeouts.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            api_key: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            stream_idle_timeout: DEFAULT_STREAM_IDLE_TIMEOUT,
            allow_insecure_http: false,
        }
    }

    /// The same config with `X-Api-Key` set to `key`.
    pub fn with_api_key(mut self, key: SecretString) -> Self {
        self.api_key = Some(key);
        self
    }
}

impl fmt::Debug for AgentServerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentServerConfig")
            .field("url", &self.url)
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("stream_idle_timeout", &self.stream_idle_timeout)
            .field("allow_insecure_http", &self.allow_insecure_http)
            .finish()
    }
}

/// Typed client of one agent server. Cheap to clone.
#[derive(Clone)]
pub struct AgentServerClient {
    http: reqwest::Client,
    base: Url,
    api_key: Option<SecretString>,
    request_timeout: Duration,
    stream_idle_timeout: Duration,
}

impl fmt::Debug for AgentServerClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentServerClient")
            .field("base", &self.base.as_str())
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .finish_non_exhaustive()
    }
}

/// Parses the base URL; it gets a trailing `/` so that relative paths keep a
/// path prefix. Errors: [`Error::InvalidConfig`] for a URL that does not
/// parse, is not http(s), carries credentials, a query or a fragment, or is
/// plain http to a non-loopback host without the opt-in.
fn parse_url(raw: &str, allow_insecure_http: bool) -> Result<Url, Error> {
    crate::controlplane::endpoint::check_base_url(raw, allow_insecure_http, "the agent server URL")
        .map_err(Error::InvalidConfig)
}

impl AgentServerClient {
    /// Builds a client. Errors: [`Error::InvalidConfig`] (see the URL rules
    /// of [`AgentServerConfig::allow_insecure_http`]; a key that is not a
    /// valid header value).
    pub fn new(config: AgentServerConfig) -> Result<Self, Error> {
        crate::controlplane::client::install_crypto_provider();
        let base = parse_url(&config.url, config.allow_insecure_http)?;
        let mut headers = HeaderMap::new();
        if let Some(key) = &config.api_key {
            let mut value = HeaderValue::from_str(key.expose_secret().trim()).map_err(|_| {
                Error::InvalidConfig("the API key is not a valid header value".into())
            })?;
            value.set_sensitive(true);
            headers.insert(HeaderName::from_static(API_KEY_HEADER), value);
        }
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .connect_timeout(config.connect_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("agent-operator/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| Error::InvalidConfig(format!("HTTP client: {e}")))?;
        Ok(Self {
            http,
            base,
            api_key: config.api_key,
            request_timeout: config.request_timeout,
            stream_idle_timeout: config.stream_idle_timeout,
        })
    }

    /// The base URL (with a trailing `/`).
    pub fn base_url(&self) -> &str {
        self.base.as_str()
    }

    fn url(&self, path: &str) -> Result<Url, Error> {
        self.base
            .join(path)
            .map_err(|e| Error::InvalidConfig(format!("joining {path}: {e}")))
    }

    /// Sends `req`; on a non-2xx answer reads (a bounded part of) the body
    /// and returns the error. `assistant_id` names the assistant of a run.
    async fn send(
        &self,
        req: reqwest::RequestBuilder,
        assistant_id: Option<&str>,
    ) -> Result<reqwest::Response, Error> {
        let timeout = self.request_timeout;
        let resp = tokio::time::timeout(timeout, req.send())
            .await
            .map_err(|_| Error::Timeout(timeout))?
            .map_err(|e| Error::from_reqwest(e, timeout))?;
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        // The status decides the error; a body that does not arrive in time
        // only leaves the detail empty.
        let body = tokio::time::timeout(timeout, read_body(resp))
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        Err(Error::from_response_redacted(
            status,
            &body,
            assistant_id,
            self.api_key.as_slice(),
        ))
    }

    /// Sends `req` and decodes the whole JSON answer; also returns the
    /// response headers.
    async fn json<T: DeserializeOwned>(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<(T, HeaderMap), Error> {
        let timeout = self.request_timeout;
        let resp = self.send(req.timeout(timeout), None).await?;
        let headers = resp.headers().clone();
        let body = read_body(resp).await.map_err(|e| match e {
            Error::Timeout(_) => Error::Timeout(timeout),
            other => other,
        })?;
        let value = serde_json::from_slice(&body).map_err(|e| {
            Error::decode(format!(
                "not the expected JSON: {}",
                crate::controlplane::error::json_error_text(&e)
            ))
        })?;
        Ok((value, headers))
    }

    /// `GET /ok` → `{"ok": true}` (docs/control-plane-api.md "Agent server"). Errors: any
    /// [`Error`]; an answer without `ok: true` is [`Error::Decode`].
    pub async fn ok(&self) -> Result<(), Error> {
        let (v, _): (serde_json::Value, _) = self.json(self.http.get(self.url("ok")?)).await?;
        if v.get("ok") == Some(&serde_json::Value::Bool(true)) {
            Ok(())
        } else {
            Err(Error::decode("GET /ok did not answer {\"ok\": true}"))
        }
    }

    /// `GET /info` → version and flags (docs/control-plane-api.md "Agent server").
    pub async fn info(&self) -> Result<ServerInfo, Error> {
        Ok(self.json(self.http.get(self.url("info")?)).await?.0)
    }

    /// One page of `POST /assistants/search` (docs/control-plane-api.md "Agent server"): the bare
    /// array, and the next offset from `X-Pagination-Next` (an unparsable
    /// header is [`Error::Decode`]).
    pub async fn search_assistants(
        &self,
        search: &AssistantSearch,
    ) -> Result<AssistantPage, Error> {
        let req = self.http.post(self.url("assistants/search")?).json(search);
        let (assistants, headers): (Vec<Assistant>, _) = self.json(req).await?;
        let next_offset = match headers.get(PAGINATION_NEXT_HEADER) {
            None => None,
            Some(v) => Some(
                v.to_str()
                    .ok()
                    .and_then(|s| s.trim().parse::<u32>().ok())
                    .ok_or_else(|| Error::decode("X-Pagination-Next is not an offset"))?,
            ),
        };
        Ok(AssistantPage {
            assistants,
            next_offset,
        })
    }

    /// Every assistant matching `search`: pages from `search.offset` (page
    /// size `search.limit`, default [`DEFAULT_SEARCH_PAGE`]) following
    /// `X-Pagination-Next` until a page has none.
    ///
    /// Errors: those of [`Self::search_assistants`]; [`Error::Paging`] when
    /// the next offset does not advance or more than [`MAX_SEARCH_RESULTS`]
    /// assistants arrive.
    pub async fn search_all_assistants(
        &self,
        search: &AssistantSearch,
    ) -> Result<Vec<Assistant>, Error> {
        let mut query = search.clone();
        query.limit = Some(search.limit.unwrap_or(DEFAULT_SEARCH_PAGE));
        let mut offset = search.offset.unwrap_or(0);
        let mut all = Vec::new();
        loop {
            query.offset = Some(offset);
            let page = self.search_assistants(&query).await?;
            all.extend(page.assistants);
            if all.len() > MAX_SEARCH_RESULTS {
                return Err(Error::Paging(format!(
                    "more than {MAX_SEARCH_RESULTS} assistants; narrow the search"
                )));
            }
            match page.next_offset {
                None => return Ok(all),
                Some(next) if next <= offset => {
                    return Err(Error::Paging(format!(
                        "the server sent next offset {next} after offset {offset}"
                    )));
                }
                Some(next) => offset = next,
            }
        }
    }

    /// `GET /assistants/{id}` (docs/control-plane-api.md "Assistants"):
    /// the assistant at the version that serves; `None` for a 404.
    /// Errors: any other [`Error`].
    pub async fn get_assistant(&self, id: &str) -> Result<Option<Assistant>, Error> {
        let req = self.http.get(self.url(&format!("assistants/{id}"))?);
        match self.json(req).await {
            Ok((a, _)) => Ok(Some(a)),
            Err(Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `POST /assistants` (docs/control-plane-api.md "Assistants"): with
    /// `if_exists: do_nothing` a second create of the same id answers the
    /// first assistant unchanged. Errors: any [`Error`]; an unknown graph is
    /// [`Error::NotFound`] naming it.
    pub async fn create_assistant(&self, body: &AssistantCreate) -> Result<Assistant, Error> {
        let req = self.http.post(self.url("assistants")?).json(body);
        Ok(self.json(req).await?.0)
    }

    /// `PATCH /assistants/{id}` (docs/control-plane-api.md "Assistants"):
    /// one new version, `metadata` merged. Errors: any [`Error`].
    pub async fn patch_assistant(
        &self,
        id: &str,
        body: &AssistantPatch,
    ) -> Result<Assistant, Error> {
        let req = self
            .http
            .patch(self.url(&format!("assistants/{id}"))?)
            .json(body);
        Ok(self.json(req).await?.0)
    }

    /// `POST /assistants/{id}/latest` (docs/control-plane-api.md
    /// "Assistants"): `version` serves from now on. Errors: any [`Error`];
    /// an unknown version is [`Error::NotFound`].
    pub async fn set_latest_assistant_version(
        &self,
        id: &str,
        version: i64,
    ) -> Result<Assistant, Error> {
        let req = self
            .http
            .post(self.url(&format!("assistants/{id}/latest"))?)
            .json(&AssistantVersionChange { version });
        Ok(self.json(req).await?.0)
    }

    /// `DELETE /assistants/{id}` (docs/control-plane-api.md "Assistants");
    /// a 404 (already gone) is `Ok`. Errors: any other [`Error`].
    pub async fn delete_assistant(&self, id: &str) -> Result<(), Error> {
        let timeout = self.request_timeout;
        let req = self
            .http
            .delete(self.url(&format!("assistants/{id}"))?)
            .timeout(timeout);
        match self.send(req, None).await {
            Ok(_) | Err(Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `POST /runs/crons/search` (docs/control-plane-api.md "Crons"): the
    /// crons matching `search` (exact `metadata` pairs), one page. Errors:
    /// any [`Error`].
    pub async fn search_crons(&self, search: &CronSearch) -> Result<Vec<Cron>, Error> {
        let req = self.http.post(self.url("runs/crons/search")?).json(search);
        Ok(self.json(req).await?.0)
    }

    /// `POST /threads/search` (docs/control-plane-api.md "Crons", the last
    /// run): the threads matching `search` (exact `metadata` pairs), one
    /// page. Errors: any [`Error`].
    pub async fn search_threads(&self, search: &ThreadSearch) -> Result<Vec<Thread>, Error> {
        let req = self.http.post(self.url("threads/search")?).json(search);
        Ok(self.json(req).await?.0)
    }

    /// `POST /runs/crons` (docs/control-plane-api.md "Crons"): a new cron
    /// with a server-chosen `cron_id` (no idempotency key: each call makes
    /// one). Errors: any [`Error`]; a bad schedule is [`Error::Rejected`]
    /// (422), an unknown graph or assistant [`Error::NotFound`].
    pub async fn create_cron(&self, body: &CronCreate) -> Result<Cron, Error> {
        let req = self.http.post(self.url("runs/crons")?).json(body);
        Ok(self.json(req).await?.0)
    }

    /// `PATCH /runs/crons/{id}` (docs/control-plane-api.md "Crons"): the
    /// fields given, `metadata` merged. Errors: any [`Error`]; a cron that
    /// is gone is [`Error::NotFound`].
    pub async fn patch_cron(&self, id: &str, body: &CronPatch) -> Result<Cron, Error> {
        let req = self
            .http
            .patch(self.url(&format!("runs/crons/{id}"))?)
            .json(body);
        Ok(self.json(req).await?.0)
    }

    /// `DELETE /runs/crons/{id}` (docs/control-plane-api.md "Crons"); a
    /// 404 (already gone) is `Ok`. Errors: any other [`Error`].
    pub async fn delete_cron(&self, id: &str) -> Result<(), Error> {
        let timeout = self.request_timeout;
        let req = self
            .http
            .delete(self.url(&format!("runs/crons/{id}"))?)
            .timeout(timeout);
        match self.send(req, None).await {
            Ok(_) | Err(Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `POST /runs/stream`: starts a stateless run and returns its events as
    /// they arrive (docs/control-plane-api.md "Agent server"). The first event is normally
    /// [`RunEvent::Metadata`]; a failure of the run is a
    /// [`RunEvent::Error`] item; the stream ends after [`RunEvent::End`] or
    /// when the server closes it.
    ///
    /// Errors (before the first event): [`Error::AssistantNotFound`] naming
    /// `req.assistant_id` for a 404/422 about the assistant, any other
    /// status error, [`Error::Timeout`] when the headers do not arrive within
    /// the request timeout, [`Error::Transport`] (e.g. connection refused:
    /// transient). Stream items may be [`Error::IdleTimeout`],
    /// [`Error::Transport`] (dropped connection), or [`Error::Decode`] (data
    /// that is not JSON, an event over [`super::sse::MAX_EVENT_BYTES`]); the
    /// stream ends after an error item.
    pub async fn stream_run(&self, req: &RunStreamRequest) -> Result<RunStream, Error> {
        self.stream_at("runs/stream", req).await
    }

    /// `POST /threads/{thread_id}/runs/stream`: a run on thread
    /// `thread_id` (with `if_not_exists: create`, a new thread carrying the
    /// run's `metadata`), its events as [`Self::stream_run`] returns them
    /// (docs/control-plane-api.md "Agent server", runs kept on threads).
    /// Errors: as [`Self::stream_run`]; a thread that does not exist with
    /// `if_not_exists` absent is [`Error::NotFound`].
    pub async fn stream_thread_run(
        &self,
        thread_id: &str,
        req: &RunStreamRequest,
    ) -> Result<RunStream, Error> {
        self.stream_at(&format!("threads/{thread_id}/runs/stream"), req)
            .await
    }

    /// `POST /threads/prune` (docs/control-plane-api.md "Agent server",
    /// runs kept on threads): deletes `thread_ids` in one request; answers
    /// how many it deleted (ids that do not exist count nothing). Errors:
    /// any [`Error`].
    pub async fn prune_threads(&self, thread_ids: &[String]) -> Result<u64, Error> {
        let body = ThreadPrune {
            thread_ids: thread_ids.to_vec(),
            strategy: None,
        };
        let req = self.http.post(self.url("threads/prune")?).json(&body);
        let (answer, _): (ThreadPruned, _) = self.json(req).await?;
        Ok(answer.pruned_count)
    }

    /// A run's event stream, `req` sent to `path`.
    async fn stream_at(&self, path: &str, req: &RunStreamRequest) -> Result<RunStream, Error> {
        let http = self
            .http
            .post(self.url(path)?)
            .header(ACCEPT, HeaderValue::from_static("text/event-stream"))
            .json(req);
        let resp = self.send(http, Some(&req.assistant_id)).await?;
        let is_sse = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.to_ascii_lowercase().starts_with("text/event-stream"));
        if !is_sse {
            // Its body is not read: it is not the known shape, and is not
            // shown.
            drop(resp);
            return Err(Error::decode(format!(
                "POST /{path} did not answer text/event-stream"
            )));
        }
        let state = StreamState {
            resp: Some(resp),
            parser: SseParser::new(),
            pending: VecDeque::new(),
            idle: self.stream_idle_timeout,
            secrets: self.api_key.iter().cloned().collect(),
        };
        let inner = futures::stream::unfold(state, |mut s| async move {
            let item = s.next_item().await?;
            Some((item, s))
        });
        Ok(RunStream {
            inner: Box::pin(inner),
        })
    }
}

/// Reads a whole body (at most [`MAX_RESPONSE_BYTES`]).
async fn read_body(mut resp: reqwest::Response) -> Result<Bytes, Error> {
    let mut body = bytes::BytesMut::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| Error::from_reqwest(e, Duration::ZERO))?
    {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_RESPONSE_BYTES {
            return Err(Error::decode(format!(
                "the answer is larger than {MAX_RESPONSE_BYTES} bytes"
            )));
        }
    }
    Ok(body.freeze())
}

struct StreamState {
    /// `None` once the stream is over (closed, `end`, or an error).
    resp: Option<reqwest::Response>,
    parser: SseParser,
    pending: VecDeque<Result<RunEvent, Error>>,
    idle: Duration,
    /// What an `error` event must not repeat (the API key): its texts go
    /// into conditions, Events and logs (`spec.verify`, `agentctl`).
    secrets: Vec<SecretString>,
}

impl StreamState {
    /// The next item, reading from the network when none is buffered;
    /// `None` at the end. Nothing follows an error item.
    async fn next_item(&mut self) -> Option<Result<RunEvent, Error>> {
        loop {
            if let Some(item) = self.pending.pop_front() {
                if item.is_err() {
                    self.pending.clear();
                    self.resp = None;
                }
                return Some(item);
            }
            let resp = self.resp.as_mut()?;
            let read = match tokio::time::timeout(self.idle, resp.chunk()).await {
                Err(_) => Err(Error::IdleTimeout(self.idle)),
                Ok(r) => r.map_err(|e| Error::from_reqwest(e, self.idle)),
            };
            match read {
                Err(e) => {
                    self.resp = None;
                    return Some(Err(e));
                }
                Ok(None) => {
                    // The server closed the stream: some end with `end`,
                    // others just close (docs/control-plane-api.md "Agent server"). An event
                    // cut in the middle is dropped.
                    if self.parser.finish() {
                        tracing::debug!("agent server stream closed inside an event");
                    }
                    self.resp = None;
                    return None;
                }
                Ok(Some(chunk)) => match self.parser.push(&chunk) {
                    Err(e) => self.pending.push_back(Err(Error::decode(e.to_string()))),
                    Ok(events) => {
                        for e in events {
                            let item = match RunEvent::from_sse(&e.event, &e.data) {
                                Ok(RunEvent::Error { error, message }) => Ok(RunEvent::Error {
                                    error: crate::redact::text(&error, &self.secrets),
                                    message: crate::redact::text(&message, &self.secrets),
                                }),
                                other => other,
                            };
                            let end = matches!(item, Ok(RunEvent::End));
                            self.pending.push_back(item);
                            if end {
                                // Nothing after `end` belongs to the run.
                                self.resp = None;
                                break;
                            }
                        }
                    }
                },
            }
        }
    }
}

/// The events of one run, as they arrive; see
/// [`AgentServerClient::stream_run`].
pub struct RunStream {
    inner: Pin<Box<dyn Stream<Item = Result<RunEvent, Error>> + Send>>,
}

impl fmt::Debug for RunStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunStream").finish_non_exhaustive()
    }
}

impl Stream for RunStream {
    type Item = Result<RunEvent, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            parse_url("http://127.0.0.1:2024", false).unwrap().as_str(),
            "http://127.0.0.1:2024/"
        );
        assert_eq!(
            parse_url("https://h.example/agents/x", false)
                .unwrap()
                .join("ok")
                .unwrap()
                .as_str(),
            "https://h.example/agents/x/ok"
        );
        assert!(parse_url("http://h.example", false).is_err());
        assert!(parse_url("http://h.example", true).is_ok());
        let e = parse_url("https://u:secret@h.example", false).unwrap_err();
        assert!(!e.to_string().contains("secret"));
        assert!(parse_url("ftp://h.example", false).is_err());
    }

    use futures::StreamExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// What the scripted server does after reading a request.
    enum Step {
        /// Write these bytes and flush (one network write).
        Write(&'static [u8]),
        /// Wait this long.
        Sleep(Duration),
    }

    /// A one-connection HTTP server on loopback that answers with `steps`
    /// and hands back the request it read (head and body).
    async fn scripted(steps: Vec<Step>) -> (String, tokio::task::JoinHandle<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut req = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                let n = sock.read(&mut buf).await.unwrap();
                req.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&req).to_string();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let len = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap())
                        })
                        .unwrap_or(0);
                    if body.len() >= len {
                        break;
                    }
                }
                if n == 0 {
                    break;
                }
            }
            for step in steps {
                match step {
                    Step::Write(b) => {
                        if sock.write_all(b).await.is_err() {
                            break;
                        }
                        let _ = sock.flush().await;
                    }
                    Step::Sleep(d) => tokio::time::sleep(d).await,
                }
            }
            String::from_utf8_lossy(&req).into_owned()
        });
        (url, task)
    }

    const SSE_HEAD: &[u8] =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\nconnection: close\r\n\r\n";

    fn run_req() -> RunStreamRequest {
        RunStreamRequest {
            assistant_id: "agent".into(),
            input: Some(serde_json::json!({"x": 1})),
            stream_mode: Some(super::super::StreamMode::One("updates".into())),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn events_split_across_reads_heartbeats_and_end() {
        let mut steps = vec![Step::Write(SSE_HEAD)];
        let body: &'static [u8] =
            b": hb\r\n\r\nevent: metadata\r\ndata: {\"run_id\":\"r1\",\"attempt\":1}\r\n\r\n\
            event: updates\ndata: {\"echo\":\ndata: {\"x\":1}}\n\n\
            event: end\ndata: null\n\nevent: values\ndata: {}\n\n";
        // One network write per byte, so events are split everywhere.
        for i in 0..body.len() {
            steps.push(Step::Write(&body[i..i + 1]));
        }
        let (url, server) = scripted(steps).await;
        let key = SecretString::from("sk-test-key-1");
        let client = AgentServerClient::new(AgentServerConfig::new(url).with_api_key(key)).unwrap();
        let events: Vec<_> = client
            .stream_run(&run_req())
            .await
            .unwrap()
            .map(Result::unwrap)
            .collect()
            .await;
        assert_eq!(
            events,
            vec![
                RunEvent::Metadata {
                    run_id: "r1".into(),
                    attempt: Some(1)
                },
                RunEvent::Updates(serde_json::json!({"echo": {"x": 1}})),
                RunEvent::End,
            ],
            "nothing after end"
        );
        let req = server.await.unwrap();
        assert!(req.starts_with("POST /runs/stream HTTP/1.1"), "{req}");
        assert!(req.contains("x-api-key: sk-test-key-1"), "{req}");
        assert!(req.contains(r#""stream_mode":"updates""#), "{req}");
    }

    #[tokio::test]
    async fn error_event_missing_end_and_idle_timeout() {
        let (url, _server) = scripted(vec![
            Step::Write(SSE_HEAD),
            Step::Write(b"event: metadata\ndata: {\"run_id\":\"r\"}\n\n"),
            Step::Write(b"event: error\ndata: {\"error\":\"ValueError\",\"message\":\"boom\"}\n\n"),
        ])
        .await;
        let client = AgentServerClient::new(AgentServerConfig::new(url)).unwrap();
        let events: Vec<_> = client.stream_run(&run_req()).await.unwrap().collect().await;
        assert_eq!(events.len(), 2, "the stream just closes: {events:?}");
        assert!(matches!(
            &events[1],
            Ok(RunEvent::Error { error, message }) if error == "ValueError" && message == "boom"
        ));

        let (url, _server) = scripted(vec![
            Step::Write(SSE_HEAD),
            Step::Write(b"event: metadata\ndata: {\"run_id\":\"r\"}\n\n"),
            Step::Sleep(Duration::from_secs(5)),
        ])
        .await;
        let mut config = AgentServerConfig::new(url);
        config.stream_idle_timeout = Duration::from_millis(200);
        let client = AgentServerClient::new(config).unwrap();
        let started = std::time::Instant::now();
        let events: Vec<_> = client.stream_run(&run_req()).await.unwrap().collect().await;
        assert!(events[0].is_ok());
        let e = events[1].as_ref().unwrap_err();
        assert!(matches!(e, Error::IdleTimeout(_)), "{e}");
        assert!(e.is_transient());
        assert_eq!(events.len(), 2);
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    /// A run that fails with a message repeating the key (an agent that
    /// echoes its own request, a proxy's error text) streams an `error`
    /// event; what the client hands on, which becomes a condition message,
    /// an Event and a log line, shows no key.
    #[tokio::test]
    async fn an_error_event_that_echoes_the_key_is_redacted() {
        let (url, _server) = scripted(vec![
            Step::Write(SSE_HEAD),
            Step::Write(b"event: metadata\ndata: {\"run_id\":\"r\"}\n\n"),
            Step::Write(
                b"event: error\ndata: {\"error\":\"AuthError sk-test-key-3\",\"message\":\"bad x-api-key \\u0073k-test-key-3\"}\n\n",
            ),
        ])
        .await;
        let client = AgentServerClient::new(
            AgentServerConfig::new(url).with_api_key(SecretString::from("sk-test-key-3")),
        )
        .unwrap();
        let events: Vec<_> = client.stream_run(&run_req()).await.unwrap().collect().await;
        assert_eq!(
            events[1].as_ref().unwrap(),
            &RunEvent::Error {
                error: "AuthError [REDACTED]".into(),
                message: "bad x-api-key [REDACTED]".into(),
            }
        );
    }

    #[tokio::test]
    async fn error_answers_name_the_assistant_and_hide_the_key() {
        let (url, _server) = scripted(vec![Step::Write(
            b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: 47\r\nconnection: close\r\n\r\n{\"detail\":\"no assistant for key sk-test-key-2\"}",
        )])
        .await;
        let client = AgentServerClient::new(
            AgentServerConfig::new(url).with_api_key(SecretString::from("sk-test-key-2")),
        )
        .unwrap();
        let e = client.stream_run(&run_req()).await.unwrap_err();
        assert!(
            matches!(&e, Error::AssistantNotFound { assistant_id, .. } if assistant_id == "agent"),
            "{e}"
        );
        let shown = format!("{e} {e:?}");
        assert!(!shown.contains("sk-test-key-2"), "{shown}");
        assert!(
            e.to_string().ends_with(": no assistant for key [REDACTED]"),
            "{shown}"
        );

        let (url, _server) = scripted(vec![Step::Write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
        )])
        .await;
        let client = AgentServerClient::new(AgentServerConfig::new(url)).unwrap();
        let e = client.stream_run(&run_req()).await.unwrap_err();
        assert!(matches!(e, Error::Decode { .. }), "{e}");
    }

    #[tokio::test]
    async fn paging_follows_the_header_and_refuses_a_loop() {
        let page = |next: &'static str| -> &'static [u8] {
            match next {
                "2" => b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-pagination-next: 2\r\ncontent-length: 2\r\nconnection: close\r\n\r\n[]",
                _ => b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-pagination-next: 0\r\ncontent-length: 2\r\nconnection: close\r\n\r\n[]",
            }
        };
        let (url, _server) = scripted(vec![Step::Write(page("2"))]).await;
        let client = AgentServerClient::new(AgentServerConfig::new(url)).unwrap();
        let p = client
            .search_assistants(&AssistantSearch::default())
            .await
            .unwrap();
        assert_eq!(p.next_offset, Some(2));
        let (url, _server) = scripted(vec![Step::Write(page("0"))]).await;
        let client = AgentServerClient::new(AgentServerConfig::new(url)).unwrap();
        let e = client
            .search_all_assistants(&AssistantSearch::default())
            .await
            .unwrap_err();
        assert!(matches!(e, Error::Paging(_)), "{e}");
    }

    #[test]
    fn key_is_redacted() {
        let key = SecretString::from("sk-abc-123");
        // Echoed JSON-escaped inside the detail: found once decoded.
        let e = Error::from_response_redacted(
            reqwest::StatusCode::UNAUTHORIZED,
            br#"{"detail": "bad key \u0073k-abc-123"}"#,
            None,
            std::slice::from_ref(&key),
        );
        assert_eq!(
            e.to_string(),
            "agent server refused the credentials (401): bad key [REDACTED]"
        );
        let config = AgentServerConfig::new("http://127.0.0.1:1").with_api_key(key);
        assert!(!format!("{config:?}").contains("sk-abc"));
        let client = AgentServerClient::new(config).unwrap();
        assert!(!format!("{client:?}").contains("sk-abc"));
    }
}
