//! Where a control plane lives: the cloud regions, an explicit URL, or a
//! self-hosted installation under `/api-host`, and the transport rules
//! (HTTPS, plain HTTP only to loopback or with an explicit opt-in).
//!
//! Source: docs/control-plane-api.md "Hosts and headers" (the two cloud
//! hosts; self-hosted under the `/api-host` prefix) and "Regions".

use std::fmt;
use std::str::FromStr;

use url::Url;

use super::error::Error;

/// Control plane of the US cloud region (docs/control-plane-api.md "Hosts and headers").
pub const US_BASE_URL: &str = "https://api.host.langchain.com";
/// Control plane of the EU cloud region (docs/control-plane-api.md "Hosts and headers").
pub const EU_BASE_URL: &str = "https://eu.api.host.langchain.com";
/// Path prefix of a self-hosted control plane (docs/control-plane-api.md "Hosts and headers":
/// `{base_url}/api-host/v2/deployments`).
pub const SELF_HOSTED_PREFIX: &str = "/api-host";

/// A cloud data region: each has one control plane host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Region {
    /// The US region, [`US_BASE_URL`].
    Us,
    /// The EU region, [`EU_BASE_URL`].
    Eu,
}

impl Region {
    /// The base URL of the region's control plane (no trailing slash).
    pub fn base_url(self) -> &'static str {
        match self {
            Region::Us => US_BASE_URL,
            Region::Eu => EU_BASE_URL,
        }
    }

    /// The spelling used in configuration: `us` or `eu`.
    pub fn as_str(self) -> &'static str {
        match self {
            Region::Us => "us",
            Region::Eu => "eu",
        }
    }
}

impl fmt::Display for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses `us` or `eu` (case-insensitive). Errors: any other text.
impl FromStr for Region {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "us" => Ok(Region::Us),
            "eu" => Ok(Region::Eu),
            other => Err(format!("unknown region {other:?}; one of us, eu")),
        }
    }
}

/// The base URL of the control plane of cloud region `region`, by the naming
/// rule of the official CLI (docs/control-plane-api.md "Regions", seen only in the official CLI:
/// `{region}.api.smith.langchain.com` → `https://{region}.api.host.langchain.com`,
/// plain `api.smith.langchain.com` → the US host): `us` (any case, trimmed)
/// → [`US_BASE_URL`], any other `r` → `https://{r}.api.host.langchain.com`
/// (so `eu` → [`EU_BASE_URL`]). `region` is expected to be a DNS label (the
/// AgentControlPlane schema checks it); no request is made to check that the
/// region exists.
pub fn region_base_url(region: &str) -> String {
    let r = region.trim().to_ascii_lowercase();
    if r == "us" {
        US_BASE_URL.to_owned()
    } else {
        format!("https://{r}.api.host.langchain.com")
    }
}

/// The base URL of a self-hosted control plane: `host_url` with
/// [`SELF_HOSTED_PREFIX`] appended unless its path already ends with it.
///
/// `https://langsmith.example.com` → `https://langsmith.example.com/api-host`.
pub fn self_hosted_base_url(host_url: &str) -> String {
    let trimmed = host_url.trim().trim_end_matches('/');
    if trimmed.ends_with(SELF_HOSTED_PREFIX) {
        trimmed.to_owned()
    } else {
        format!("{trimmed}{SELF_HOSTED_PREFIX}")
    }
}

/// The control plane of a LangSmith API endpoint, as the official clients
/// derive it (docs/control-plane-api.md "Regions"): `api.smith.langchain.com`
/// → [`US_BASE_URL`], `{region}.api.smith.langchain.com` →
/// `https://{region}.api.host.langchain.com`, any other host is a
/// self-hosted LangSmith: its origin and path without a trailing `/api/v1`,
/// then [`SELF_HOSTED_PREFIX`] ([`self_hosted_base_url`]). This is how
/// `LANGSMITH_ENDPOINT`, the variable the platform's own tools read, names a
/// control plane.
///
/// `https://eu.api.smith.langchain.com` → `https://eu.api.host.langchain.com`;
/// `https://smith.example.com/api/v1` → `https://smith.example.com/api-host`.
/// A text that is not a URL is returned as given, so that the caller's URL
/// check reports it.
pub fn from_langsmith_endpoint(endpoint: &str) -> String {
    let Ok(url) = Url::parse(endpoint.trim()) else {
        return endpoint.to_owned();
    };
    let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
    if host == "api.smith.langchain.com" {
        return US_BASE_URL.to_owned();
    }
    if let Some(region) = host.strip_suffix(".api.smith.langchain.com")
        && !region.is_empty()
        && !region.contains('.')
    {
        return region_base_url(region);
    }
    let path = url.path().trim_end_matches('/');
    let path = path.strip_suffix("/api/v1").unwrap_or(path);
    self_hosted_base_url(&format!("{}{path}", url.origin().ascii_serialization()))
}

/// True when `url` names a loopback host (`localhost`, `127.0.0.0/8`, `::1`).
pub fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Parses and checks a base URL; returns it with a trailing `/` so that
/// relative paths (`v2/deployments`) keep any prefix such as `/api-host`.
///
/// Errors ([`Error::InvalidEndpoint`]): the URL does not parse, has a query or
/// fragment, carries credentials, is not `http(s)`, or is plain `http` to a
/// non-loopback host while `allow_insecure_http` is false.
pub fn parse_base_url(raw: &str, allow_insecure_http: bool) -> Result<Url, Error> {
    check_base_url(raw, allow_insecure_http, "the control plane URL")
        .map_err(Error::InvalidEndpoint)
}

/// The rules of [`parse_base_url`] for any HTTP API base URL, `noun` naming
/// it in the messages (e.g. `the agent server URL`); shared by the control
/// plane and agent server clients.
///
/// Errors: a message for the caller's own error type.
pub fn check_base_url(raw: &str, allow_insecure_http: bool, noun: &str) -> Result<Url, String> {
    let mut base = Url::parse(raw.trim().trim_end_matches('/')).map_err(|e| {
        // A URL that may carry credentials is not echoed.
        let shown = if raw.contains('@') { noun } else { raw };
        format!("{shown}: {e}")
    })?;
    if !base.username().is_empty() || base.password().is_some() {
        return Err(format!("{noun} must not carry credentials"));
    }
    match base.scheme() {
        "https" => {}
        "http" if is_loopback(&base) || allow_insecure_http => {}
        "http" => {
            return Err(format!(
                "{base}: plain http is only allowed to loopback hosts unless insecure HTTP is explicitly allowed"
            ));
        }
        other => return Err(format!("{base}: unsupported scheme {other}")),
    }
    if base.query().is_some() || base.fragment().is_some() {
        return Err(format!("{base}: a base URL has no query or fragment"));
    }
    if !base.path().ends_with('/') {
        let path = format!("{}/", base.path());
        base.set_path(&path);
    }
    Ok(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn langsmith_endpoints_name_their_control_plane() {
        for (endpoint, base) in [
            ("https://api.smith.langchain.com", US_BASE_URL),
            ("https://eu.api.smith.langchain.com/", EU_BASE_URL),
            (
                "https://apac.api.smith.langchain.com",
                "https://apac.api.host.langchain.com",
            ),
            (
                "https://smith.example.com",
                "https://smith.example.com/api-host",
            ),
            (
                "https://smith.example.com/api/v1",
                "https://smith.example.com/api-host",
            ),
            (
                "https://smith.example.com:8443/api/v1/",
                "https://smith.example.com:8443/api-host",
            ),
            (
                "https://smith.example.com/api-host",
                "https://smith.example.com/api-host",
            ),
            ("not a url", "not a url"),
        ] {
            assert_eq!(from_langsmith_endpoint(endpoint), base, "{endpoint}");
        }
    }

    #[test]
    fn regions_and_self_hosted_urls() {
        assert_eq!(Region::Us.base_url(), "https://api.host.langchain.com");
        assert_eq!(Region::Eu.base_url(), "https://eu.api.host.langchain.com");
        assert_eq!("EU".parse::<Region>().unwrap(), Region::Eu);
        assert!("asia".parse::<Region>().is_err());
        assert_eq!(
            self_hosted_base_url("https://ls.example.com/"),
            "https://ls.example.com/api-host"
        );
        assert_eq!(
            self_hosted_base_url("https://ls.example.com/api-host/"),
            "https://ls.example.com/api-host"
        );
    }

    #[test]
    fn any_region_maps_by_the_cli_naming_rule() {
        assert_eq!(region_base_url("us"), US_BASE_URL);
        assert_eq!(region_base_url("US"), US_BASE_URL);
        assert_eq!(region_base_url("eu"), EU_BASE_URL);
        assert_eq!(region_base_url("ap"), "https://ap.api.host.langchain.com");
        assert_eq!(
            region_base_url("us-west-2"),
            "https://us-west-2.api.host.langchain.com"
        );
        for r in [Region::Us, Region::Eu] {
            assert_eq!(region_base_url(r.as_str()), r.base_url());
        }
    }

    #[test]
    fn base_urls_are_checked() {
        assert_eq!(
            parse_base_url("https://h/api-host", false)
                .unwrap()
                .as_str(),
            "https://h/api-host/"
        );
        assert!(parse_base_url("http://[::1]:8080", false).is_ok());
        assert!(parse_base_url("http://LOCALHOST:1", false).is_ok());
        assert!(parse_base_url("http://10.0.0.1", false).is_err());
        assert!(parse_base_url("http://10.0.0.1", true).is_ok());
        let e = parse_base_url("https://user:hunter2@h", false).unwrap_err();
        assert!(!e.to_string().contains("hunter2"));
        assert!(parse_base_url("https://h/?x=1", false).is_err());
        assert!(parse_base_url("not a url", false).is_err());
    }
}
