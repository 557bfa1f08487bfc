//! A small client of the LangSmith API's datasets, for verification suites
//! read from a dataset (`spec.verify.suite.dataset`): a dataset found by
//! name, then its examples (inputs and reference outputs), one page. Only
//! the two reads a suite needs; the official `langsmith` client sends the
//! same requests (docs/control-plane-api.md, "LangSmith datasets": `GET
//! /datasets?name=`, `GET /examples?dataset=&limit=&offset=`, bare arrays,
//! `X-Api-Key`).
//!
//! Where the LangSmith API is, from the control plane's URL:
//! [`api_url`] (the inverse of the rule the official clients use to find
//! the control plane, docs/control-plane-api.md "Regions").

use std::time::Duration;

use secrecy::SecretString;
use serde::Deserialize;
use serde_json::Value;
use url::Url;

use crate::controlplane::ControlPlaneClient;

/// What a read of the LangSmith API can fail with. Messages never hold the
/// key.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The URL or the key cannot be used.
    #[error("LangSmith API: {0}")]
    InvalidConfig(String),
    /// No answer (connect, timeout, reset).
    #[error("LangSmith API {what}: {message}")]
    Unreachable {
        /// The request, e.g. `GET /datasets`.
        what: String,
        /// What failed.
        message: String,
    },
    /// An answer other than 200, with its status and its `detail`, as
    /// the control plane's errors are quoted
    /// ([`crate::controlplane::error::detail_text`]: the service's error
    /// shape only, the key redacted, bounded).
    #[error("LangSmith API {what}: HTTP {status}: {body}")]
    Status {
        /// The request.
        what: String,
        /// The HTTP status.
        status: u16,
        /// The answer's `detail`.
        body: String,
    },
    /// A 200 whose body is not the expected JSON.
    #[error("LangSmith API {what}: unexpected answer: {message}")]
    Decode {
        /// The request.
        what: String,
        /// What did not decode.
        message: String,
    },
}

impl Error {
    /// True when a later attempt may succeed (no answer, 429 or 5xx).
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Unreachable { .. } => true,
            Error::Status { status, .. } => *status == 429 || *status >= 500,
            _ => false,
        }
    }
}

/// One dataset (`GET /datasets`), the fields a suite reads.
#[derive(Clone, Debug, Deserialize)]
pub struct Dataset {
    /// Its id (uuid).
    pub id: String,
    /// Its name, unique in the workspace.
    pub name: String,
}

/// One example (`GET /examples`), the fields a suite reads.
#[derive(Clone, Debug, Deserialize)]
pub struct Example {
    /// Its id (uuid).
    pub id: String,
    /// The graph input.
    #[serde(default)]
    pub inputs: Value,
    /// The reference outputs (`null` when none).
    #[serde(default)]
    pub outputs: Option<Value>,
    /// Free metadata; a string `name` names the case.
    #[serde(default)]
    pub metadata: Option<Value>,
}

/// The LangSmith API of the control plane at `control_plane` (a base URL):
/// `https://api.host.langchain.com` → `https://api.smith.langchain.com`,
/// `https://{region}.api.host.langchain.com` →
/// `https://{region}.api.smith.langchain.com`; any other (a self-hosted
/// LangSmith, `https://HOST/api-host`) → its origin and path without
/// `/api-host`, then `/api/v1`. A text that is not a URL is returned as
/// given, for the caller's URL check to report.
pub fn api_url(control_plane: &str) -> String {
    let Ok(url) = Url::parse(control_plane.trim()) else {
        return control_plane.to_owned();
    };
    let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
    if host == "api.host.langchain.com" {
        return "https://api.smith.langchain.com".to_owned();
    }
    if let Some(region) = host.strip_suffix(".api.host.langchain.com")
        && !region.is_empty()
        && !region.contains('.')
    {
        return format!("https://{region}.api.smith.langchain.com");
    }
    let path = url.path().trim_end_matches('/');
    let path = path.strip_suffix("/api-host").unwrap_or(path);
    format!("{}{path}/api/v1", url.origin().ascii_serialization())
}

/// A client of one LangSmith API with one key.
#[derive(Clone, Debug)]
pub struct DatasetClient {
    http: reqwest::Client,
    base: Url,
    /// Redacted from the errors quoted.
    key: SecretString,
    /// Each request's limit.
    timeout: Duration,
}

impl DatasetClient {
    /// A client of the API at `base` through the HTTP client of the control
    /// plane `plane` ([`ControlPlaneClient::http`]): its key as `X-Api-Key`
    /// (as `Authorization: Bearer` for a bearer token) and its workspace as
    /// `X-Tenant-Id` (as the official client's `workspace_id`: an
    /// organization key needs it), its CA bundle, no redirects; each
    /// request within `timeout`. Errors: [`Error::InvalidConfig`] for a URL
    /// that does not parse.
    pub fn new(base: &str, plane: &ControlPlaneClient, timeout: Duration) -> Result<Self, Error> {
        let mut base =
            Url::parse(base).map_err(|e| Error::InvalidConfig(format!("URL {base:?}: {e}")))?;
        if !base.path().ends_with('/') {
            base.set_path(&format!("{}/", base.path()));
        }
        Ok(Self {
            http: plane.http().clone(),
            base,
            key: plane.api_key().clone(),
            timeout,
        })
    }

    /// The dataset named `name`, `None` when the workspace has none.
    /// Errors: as [`Self::get`].
    pub async fn dataset_named(&self, name: &str) -> Result<Option<Dataset>, Error> {
        let found: Vec<Dataset> = self
            .get("datasets", &[("name", name), ("limit", "1")])
            .await?;
        Ok(found.into_iter().find(|d| d.name == name))
    }

    /// The first `limit` examples of dataset `id` (one page, in the
    /// service's order). Errors: as [`Self::get`].
    pub async fn examples(&self, id: &str, limit: usize) -> Result<Vec<Example>, Error> {
        let limit = limit.to_string();
        self.get(
            "examples",
            &[("dataset", id), ("limit", &limit), ("offset", "0")],
        )
        .await
    }

    /// `GET {base}{path}?{query}` as JSON. Errors: [`Error::Unreachable`],
    /// [`Error::Status`], [`Error::Decode`].
    async fn get<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, &str)],
    ) -> Result<T, Error> {
        let what = format!("GET /{path}");
        let url = self
            .base
            .join(path)
            .map_err(|e| Error::InvalidConfig(e.to_string()))?;
        let unreachable = |e: reqwest::Error| Error::Unreachable {
            what: what.clone(),
            message: e.without_url().to_string(),
        };
        let resp = self
            .http
            .get(url)
            .query(query)
            .timeout(self.timeout)
            .send()
            .await
            .map_err(unreachable)?;
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.map_err(unreachable)?;
        if status != 200 {
            let body =
                crate::controlplane::error::detail_text(&bytes, std::slice::from_ref(&self.key));
            return Err(Error::Status { what, status, body });
        }
        serde_json::from_slice(&bytes).map_err(|e| Error::Decode {
            what,
            message: crate::controlplane::error::json_error_text(&e),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_langsmith_api_of_each_control_plane() {
        for (plane, want) in [
            (
                "https://api.host.langchain.com",
                "https://api.smith.langchain.com",
            ),
            (
                "https://eu.api.host.langchain.com/",
                "https://eu.api.smith.langchain.com",
            ),
            (
                "https://smith.example.com/api-host",
                "https://smith.example.com/api/v1",
            ),
            (
                "https://smith.example.com/lang/api-host/",
                "https://smith.example.com/lang/api/v1",
            ),
            ("http://127.0.0.1:8123/", "http://127.0.0.1:8123/api/v1"),
            ("not a url", "not a url"),
        ] {
            assert_eq!(api_url(plane), want, "{plane}");
            if plane.starts_with("https://") && plane.contains("api.host") {
                // The official clients' rule maps it back.
                assert_eq!(
                    crate::controlplane::endpoint::from_langsmith_endpoint(want),
                    plane.trim_end_matches('/')
                );
            }
        }
    }

    #[test]
    fn only_no_answer_429_and_5xx_are_transient() {
        let status = |status| Error::Status {
            what: "GET /datasets".into(),
            status,
            body: String::new(),
        };
        assert!(status(503).is_transient() && status(429).is_transient());
        assert!(!status(404).is_transient() && !status(401).is_transient());
        let unreachable = Error::Unreachable {
            what: "x".into(),
            message: "refused".into(),
        };
        assert!(unreachable.is_transient());
    }
}
