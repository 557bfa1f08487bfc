//! The image registries of `external_docker` deployments, read through the
//! OCI distribution API (the `oci-client` crate): which digest a tag names
//! today, and whether that image offers `linux/amd64`, the only platform the
//! control plane runs (docs/control-plane-api.md "Images": the official CLI
//! checks this before it deploys an image).
//!
//! A resolution costs one `HEAD` of the manifest (Docker Hub does not count a
//! `HEAD` as a pull); the manifest itself (and, for a single-platform image,
//! its config blob) is read only the first time this process sees a digest,
//! to learn its platforms. `oci-client` asks `GET /v2/` before each request
//! to a registry that hands out no token (an open one), so a resolution of a
//! known digest costs 2 requests there and 1 once a token is cached. Each registry host has its own budget
//! ([`RegistryClient::new`]): a resolution that finds it spent is not sent
//! and says when to try again ([`Error::Budget`], jittered), so that many
//! AgentDeployments of one registry never burst against it.
//!
//! Plain `http://` is used only for loopback registries (`localhost`,
//! `127.0.0.0/8`, `::1`), by the control planes' own rule.

pub mod docker_config;
pub mod reference;

use std::collections::{HashMap, HashSet};
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::Duration;

use governor::clock::{Clock as _, DefaultClock};
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::{
    IMAGE_MANIFEST_LIST_MEDIA_TYPE, IMAGE_MANIFEST_MEDIA_TYPE, OCI_IMAGE_INDEX_MEDIA_TYPE,
    OCI_IMAGE_MEDIA_TYPE, OciManifest,
};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

pub use reference::ImageRef;
use secrecy::ExposeSecret;

pub use docker_config::{Credentials, DockerConfigError, credentials_for};

/// The platform the control plane runs (docs/control-plane-api.md "Images").
pub const REQUIRED_PLATFORM: &str = "linux/amd64";

/// Resolutions per second per registry host, by default.
pub const DEFAULT_RATE_PER_HOST: u32 = 2;

/// Resolutions a registry host may take at once before the rate applies.
pub const DEFAULT_BURST_PER_HOST: u32 = 10;

/// Digests whose platforms this process remembers (beyond, it forgets them
/// all and reads manifests again).
const CHECKED_DIGESTS: usize = 10_000;

/// What a tag names today.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// `sha256:<hex>` of the manifest (or index) the reference names.
    pub digest: String,
    /// The image by digest, `<registry>/<repository>@<digest>`: what a
    /// pinned deployment sends as `image_uri`.
    pub pinned: String,
}

/// Why a resolution failed. Messages name the image and the registry, never
/// a credential.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The image reference does not parse.
    #[error("imageUri {image:?} is not an image reference: {detail}")]
    InvalidReference {
        /// The reference as given.
        image: String,
        /// The parser's words.
        detail: String,
    },
    /// 401, or a token refused: the credentials are wrong or missing.
    #[error(
        "registry {registry} refused the credentials for {image} (401 or denied): set spec.imagePullSecretRef to a kubernetes.io/dockerconfigjson Secret that can pull it"
    )]
    Unauthorized {
        /// The registry host.
        registry: String,
        /// The image.
        image: String,
    },
    /// The repository or the tag does not exist.
    #[error("registry {registry} has no image {image} (manifest or repository unknown)")]
    NotFound {
        /// The registry host.
        registry: String,
        /// The image.
        image: String,
    },
    /// The image offers no `linux/amd64`.
    #[error(
        "image {image} ({digest}) offers {offered}, not linux/amd64, the only platform the control plane runs: build it for linux/amd64 (docker buildx --platform linux/amd64)"
    )]
    WrongPlatform {
        /// The image.
        image: String,
        /// Its digest.
        digest: String,
        /// The platforms it offers (`os/arch`, comma-separated).
        offered: String,
    },
    /// Unreachable, a timeout, 5xx or 429: tried again with backoff.
    #[error("registry {registry} unavailable for {image}: {detail}")]
    Unavailable {
        /// The registry host.
        registry: String,
        /// The image.
        image: String,
        /// What failed (status or transport error).
        detail: String,
    },
    /// This process's budget for the registry is spent: nothing was sent.
    #[error("registry {registry}: request budget spent, next resolution in {wait:?}")]
    Budget {
        /// The registry host.
        registry: String,
        /// When to try again (jittered).
        wait: Duration,
    },
    /// Any other answer the client does not understand.
    #[error("registry {registry} answered for {image} what the operator cannot use: {detail}")]
    Other {
        /// The registry host.
        registry: String,
        /// The image.
        image: String,
        /// The client's words.
        detail: String,
    },
}

type HostLimiter = RateLimiter<String, DefaultKeyedStateStore<String>, DefaultClock>;

/// Which OCI client serves a resolution: plain HTTP (loopback) or HTTPS,
/// the registry host, and a SHA-256 of the credentials (`None`: anonymous).
type ClientKey = (bool, String, Option<[u8; 32]>);

/// At most this many OCI clients are kept (one per registry and set of
/// credentials); past it the cache starts again empty.
const MAX_CLIENTS: usize = 256;

/// The registry client of the operator: one per process, shared.
///
/// Credentials never cross from one AgentDeployment to another: oci-client
/// keeps the first credentials it is given for a registry host (and the
/// tokens they earn) for every later request to that host, so one shared
/// OCI client would let a resolution without `imagePullSecretRef` pull with
/// another namespace's Secret, and let wrong credentials stick. Each
/// registry host and set of credentials gets its own OCI client instead.
pub struct RegistryClient {
    clients: Mutex<HashMap<ClientKey, Client>>,
    budget: HostLimiter,
    checked: Mutex<HashSet<String>>,
}

impl std::fmt::Debug for RegistryClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryClient").finish_non_exhaustive()
    }
}

impl Default for RegistryClient {
    fn default() -> Self {
        Self::new(DEFAULT_RATE_PER_HOST, DEFAULT_BURST_PER_HOST)
    }
}

/// Whether `registry` (a host with an optional port) is a loopback host, by
/// the control planes' rule ([`crate::controlplane::endpoint::is_loopback`]).
pub fn is_loopback(registry: &str) -> bool {
    url::Url::parse(&format!("http://{registry}/"))
        .is_ok_and(|u| crate::controlplane::endpoint::is_loopback(&u))
}

/// The `os/arch` platforms of an image config blob (`{"os", "architecture"}`).
fn config_platform(config: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(config).ok()?;
    Some(format!(
        "{}/{}",
        value["os"].as_str()?,
        value["architecture"].as_str()?
    ))
}

impl RegistryClient {
    /// A client allowing each registry host `rate` resolutions per second
    /// after a burst of `burst` (both at least 1).
    pub fn new(rate: u32, burst: u32) -> Self {
        crate::controlplane::client::install_crypto_provider();
        let quota = Quota::per_second(NonZeroU32::new(rate).unwrap_or(NonZeroU32::MIN))
            .allow_burst(NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN));
        Self {
            clients: Mutex::new(HashMap::new()),
            budget: RateLimiter::keyed(quota),
            checked: Mutex::new(HashSet::new()),
        }
    }

    /// The OCI client for `registry` with `credentials`: plain HTTP on
    /// loopback, else HTTPS; its own for each set of credentials (see
    /// [`RegistryClient`]).
    fn client_for(&self, registry: &str, credentials: Option<&Credentials>) -> Client {
        use sha2::Digest as _;
        let http = is_loopback(registry);
        let fingerprint = credentials.map(|c| {
            let mut h = sha2::Sha256::new();
            h.update(c.username.as_bytes());
            h.update([0]);
            h.update(c.password.expose_secret().as_bytes());
            <[u8; 32]>::from(h.finalize())
        });
        let key = (http, registry.to_owned(), fingerprint);
        let mut clients = self
            .clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(client) = clients.get(&key) {
            return client.clone();
        }
        if clients.len() >= MAX_CLIENTS {
            clients.clear();
        }
        let client = Client::new(ClientConfig {
            protocol: if http {
                ClientProtocol::Http
            } else {
                ClientProtocol::Https
            },
            // The operator never pulls an index's image by platform: it reads
            // the index itself.
            platform_resolver: None,
            ..ClientConfig::default()
        });
        clients.insert(key, client.clone());
        client
    }

    /// The digest `image` names today and its pinned form, after checking
    /// (once per digest and process) that it offers `linux/amd64`.
    ///
    /// Errors: see [`Error`]; [`Error::Budget`] sends nothing.
    pub async fn resolve(
        &self,
        image: &str,
        credentials: Option<&Credentials>,
    ) -> Result<Resolved, Error> {
        let reference = ImageRef::parse(image)
            .map_err(|e| Error::InvalidReference {
                image: image.to_owned(),
                detail: e.to_owned(),
            })?
            .to_oci();
        let registry = reference.registry().to_owned();
        self.within_budget(&registry)?;
        let client = &self.client_for(&registry, credentials);
        let auth = match credentials {
            Some(c) => {
                RegistryAuth::Basic(c.username.clone(), c.password.expose_secret().to_owned())
            }
            None => RegistryAuth::Anonymous,
        };
        let digest = client
            .fetch_manifest_digest(&reference, &auth)
            .await
            .map_err(|e| classify(e, &registry, image))?;
        let pinned = format!("{registry}/{}@{digest}", reference.repository());
        if !self.is_checked(&digest) {
            check_platform(client, &auth, &registry, image, &digest, &pinned).await?;
            self.remember_checked(&digest);
        }
        Ok(Resolved { digest, pinned })
    }

    /// Takes a request of `registry`'s budget.
    ///
    /// Errors: [`Error::Budget`] when the budget is spent, with the wait
    /// until it allows one (jittered); nothing is sent.
    fn within_budget(&self, registry: &str) -> Result<(), Error> {
        let Err(not_until) = self.budget.check_key(&registry.to_owned()) else {
            return Ok(());
        };
        let wait = not_until.wait_time_from(DefaultClock::default().now());
        Err(Error::Budget {
            registry: registry.to_owned(),
            // ± 25 %, as `controller::jittered` (not imported: the
            // controller holds this client).
            wait: wait
                .max(Duration::from_millis(100))
                .mul_f64(rand::random_range(0.75..1.25)),
        })
    }

    /// Whether the image was already checked for its platform
    /// ([`check_platform`]) by its digest.
    fn is_checked(&self, digest: &str) -> bool {
        self.checked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(digest)
    }

    /// Remembers that the image `digest` offers the platform (all
    /// forgotten once [`CHECKED_DIGESTS`] are remembered).
    fn remember_checked(&self, digest: &str) {
        let mut checked = self
            .checked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if checked.len() >= CHECKED_DIGESTS {
            checked.clear();
        }
        checked.insert(digest.to_owned());
    }
}

/// The `os/arch` platforms the manifest `reference` (by digest) offers: an
/// index's entries, or a single image's config.
async fn platforms(
    client: &Client,
    reference: &Reference,
    auth: &RegistryAuth,
) -> Result<Vec<String>, OciDistributionError> {
    let accepted = [
        OCI_IMAGE_INDEX_MEDIA_TYPE,
        IMAGE_MANIFEST_LIST_MEDIA_TYPE,
        OCI_IMAGE_MEDIA_TYPE,
        IMAGE_MANIFEST_MEDIA_TYPE,
    ];
    let (raw, _) = client.pull_manifest_raw(reference, auth, &accepted).await?;
    let manifest: OciManifest = serde_json::from_slice(&raw)?;
    match manifest {
        OciManifest::ImageIndex(index) => Ok(index
            .manifests
            .iter()
            .filter_map(|entry| entry.platform.as_ref())
            .map(|p| format!("{}/{}", p.os, p.architecture))
            .collect()),
        OciManifest::Image(image) => {
            let mut config = Vec::new();
            client
                .pull_blob(reference, &image.config, &mut config)
                .await?;
            Ok(config_platform(&config).into_iter().collect())
        }
    }
}

/// Checks that the image `digest` of `image` (`pinned`: its reference by
/// digest) offers [`REQUIRED_PLATFORM`] (reads its manifest, and its config
/// for a single image).
///
/// Errors: [`Error::WrongPlatform`] naming the platforms offered; a failed
/// read ([`classify`]).
async fn check_platform(
    client: &Client,
    auth: &RegistryAuth,
    registry: &str,
    image: &str,
    digest: &str,
    pinned: &str,
) -> Result<(), Error> {
    let by_digest = ImageRef::parse(pinned)
        .map(|r| r.to_oci())
        .map_err(|e| Error::Other {
            registry: registry.to_owned(),
            image: image.to_owned(),
            detail: format!("the digest {digest} does not form a reference: {e}"),
        })?;
    let platforms = platforms(client, &by_digest, auth)
        .await
        .map_err(|e| classify(e, registry, image))?;
    if !platforms.iter().any(|p| p == REQUIRED_PLATFORM) {
        return Err(Error::WrongPlatform {
            image: image.to_owned(),
            digest: digest.to_owned(),
            offered: if platforms.is_empty() {
                "no platform".to_owned()
            } else {
                platforms.join(", ")
            },
        });
    }
    Ok(())
}

/// The [`Error`] an `oci-client` error is for `image` on `registry`.
fn classify(e: OciDistributionError, registry: &str, image: &str) -> Error {
    let registry = registry.to_owned();
    let image = image.to_owned();
    let has = |envelope: &oci_client::errors::OciEnvelope, codes: &[OciErrorCode]| {
        envelope.errors.iter().any(|err| codes.contains(&err.code))
    };
    use OciErrorCode as C;
    match e {
        OciDistributionError::UnauthorizedError { .. }
        | OciDistributionError::AuthenticationFailure(_) => Error::Unauthorized { registry, image },
        OciDistributionError::ImageManifestNotFoundError(_) => Error::NotFound { registry, image },
        OciDistributionError::RegistryError { envelope, .. }
            if has(&envelope, &[C::Unauthorized, C::Denied]) =>
        {
            Error::Unauthorized { registry, image }
        }
        OciDistributionError::RegistryError { envelope, .. }
            if has(
                &envelope,
                &[C::ManifestUnknown, C::NameUnknown, C::NotFound],
            ) =>
        {
            Error::NotFound { registry, image }
        }
        OciDistributionError::RegistryError { envelope, .. }
            if has(&envelope, &[C::Toomanyrequests]) =>
        {
            Error::Unavailable {
                registry,
                image,
                detail: "429 too many requests".to_owned(),
            }
        }
        OciDistributionError::ServerError { code, .. }
            if code == 401 || code == 404 || code == 429 || code >= 500 =>
        {
            by_status(code, registry, image)
        }
        OciDistributionError::RequestError(e) => Error::Unavailable {
            registry,
            image,
            detail: transport(&e),
        },
        other => Error::Other {
            registry,
            image,
            detail: other.to_string(),
        },
    }
}

/// The [`Error`] of a registry's answer by its HTTP status (401, 404, 429
/// or 5xx) for `image` on `registry`.
fn by_status(code: u16, registry: String, image: String) -> Error {
    match code {
        401 => Error::Unauthorized { registry, image },
        404 => Error::NotFound { registry, image },
        _ => Error::Unavailable {
            registry,
            image,
            detail: format!("HTTP {code}"),
        },
    }
}

/// A transport error in words, without the URL (it may carry a user name).
fn transport(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".to_owned()
    } else if e.is_connect() {
        "connection failed".to_owned()
    } else {
        "the connection broke".to_owned()
    }
}

/// The registry host (and port) of `image`, as credentials are looked up
/// for it ([`credentials_for`]); `None` when it does not parse.
pub fn registry_of(image: &str) -> Option<String> {
    ImageRef::parse(image).ok().map(|r| r.registry)
}

/// The host (and port) the client sends the requests of `image` to: the
/// registry of [`registry_of`], with Docker Hub's `docker.io` as the host
/// that serves it (`index.docker.io`). `None` when it does not parse.
pub fn request_host_of(image: &str) -> Option<String> {
    ImageRef::parse(image)
        .ok()
        .map(|r| r.request_host().to_owned())
}

/// The digest (`sha256:<hex>`) an image reference names, if it names one
/// (`repo@sha256:...` or `repo:tag@sha256:...`).
pub fn digest_of(image: &str) -> Option<String> {
    ImageRef::parse(image).ok().and_then(|r| r.digest)
}

/// Whether two image references name the same image: the same registry and
/// repository, and the same digest where both carry one (`repo:tag@digest`
/// and `repo@digest` are the same image), else the same tag.
pub fn same_image(a: &str, b: &str) -> bool {
    let (Ok(a), Ok(b)) = (ImageRef::parse(a), ImageRef::parse(b)) else {
        return a == b;
    };
    if a.registry != b.registry || a.repository != b.repository {
        return false;
    }
    match (&a.digest, &b.digest) {
        (Some(x), Some(y)) => x == y,
        (None, None) => a.tag == b.tag,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::report::{Classified, ErrorClass};

    #[test]
    fn each_registry_and_set_of_credentials_has_its_own_oci_client() {
        let registry = RegistryClient::default();
        let creds = |user: &str, password: &str| Credentials {
            username: user.to_owned(),
            password: password.to_owned().into(),
        };
        let count = || registry.clients.lock().unwrap().len();
        let _ = registry.client_for("127.0.0.1:5000", None);
        let _ = registry.client_for("127.0.0.1:5000", Some(&creds("team-a", "one")));
        let _ = registry.client_for("127.0.0.1:5000", Some(&creds("team-a", "two")));
        let _ = registry.client_for("127.0.0.1:5000", Some(&creds("team-b", "one")));
        let _ = registry.client_for("registry.example.com", Some(&creds("team-a", "one")));
        assert_eq!(
            count(),
            5,
            "anonymous, three sets of credentials, another host"
        );
        // The same ones again: the same clients (their tokens are kept).
        let _ = registry.client_for("127.0.0.1:5000", None);
        let _ = registry.client_for("127.0.0.1:5000", Some(&creds("team-a", "one")));
        assert_eq!(count(), 5);
        // "ab" + "c" and "a" + "bc" are not the same credentials.
        let _ = registry.client_for("127.0.0.1:5000", Some(&creds("ab", "c")));
        let _ = registry.client_for("127.0.0.1:5000", Some(&creds("a", "bc")));
        assert_eq!(count(), 7);
    }

    #[test]
    fn loopback_registries_are_the_only_plain_http_ones() {
        for (registry, loopback) in [
            ("127.0.0.1:5000", true),
            ("localhost", true),
            ("localhost:8080", true),
            ("[::1]:5000", true),
            ("registry.example.com", false),
            ("registry.example.com:5000", false),
            ("127.0.0.1.nip.io", false),
        ] {
            assert_eq!(is_loopback(registry), loopback, "{registry}");
        }
    }

    #[test]
    fn the_same_image_by_tag_and_by_digest_is_the_same_image() {
        let d = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let e = "sha256:1123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let cases = [
            (
                format!("ghcr.io/acme/agent:v1@{d}"),
                format!("ghcr.io/acme/agent@{d}"),
                true,
            ),
            (
                format!("ghcr.io/acme/agent@{d}"),
                format!("ghcr.io/acme/agent@{e}"),
                false,
            ),
            (
                format!("ghcr.io/acme/agent:v1@{d}"),
                "ghcr.io/acme/agent:v1".to_owned(),
                false,
            ),
            (
                "ghcr.io/acme/agent:v1".to_owned(),
                "ghcr.io/acme/agent:v1".to_owned(),
                true,
            ),
            (
                "ghcr.io/acme/agent:v1".to_owned(),
                "ghcr.io/acme/agent:v2".to_owned(),
                false,
            ),
            (
                format!("ghcr.io/acme/agent@{d}"),
                format!("ghcr.io/acme/other@{d}"),
                false,
            ),
            (
                "acme/agent:v1".to_owned(),
                "docker.io/acme/agent:v1".to_owned(),
                true,
            ),
        ];
        for (a, b, same) in cases {
            assert_eq!(same_image(&a, &b), same, "{a} vs {b}");
        }
    }

    #[test]
    fn a_digest_is_read_from_a_reference_that_names_one() {
        let d = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        for (image, want) in [
            (format!("ghcr.io/acme/agent@{d}"), Some(d)),
            (format!("ghcr.io/acme/agent:v1@{d}"), Some(d)),
            ("ghcr.io/acme/agent:v1".to_owned(), None),
            ("not an image".to_owned(), None),
        ] {
            assert_eq!(digest_of(&image).as_deref(), want, "{image}");
        }
    }

    #[test]
    fn a_config_blob_names_its_platform() {
        assert_eq!(
            config_platform(br#"{"os": "linux", "architecture": "arm64", "config": {}}"#),
            Some("linux/arm64".to_owned())
        );
        assert_eq!(config_platform(b"{}"), None);
        assert_eq!(config_platform(b"not json"), None);
    }

    #[tokio::test]
    async fn a_spent_budget_sends_nothing_and_says_when_to_try_again() {
        // Port 9 (discard) on loopback: a request would fail as unavailable;
        // the budget answers before any is sent.
        let client = RegistryClient::new(1, 1);
        let image = "127.0.0.1:9/acme/agent:v1";
        let first = client.resolve(image, None).await.unwrap_err();
        assert!(matches!(first, Error::Unavailable { .. }), "{first:?}");
        match client.resolve(image, None).await.unwrap_err() {
            Error::Budget { registry, wait } => {
                assert_eq!(registry, "127.0.0.1:9");
                assert!(
                    wait > Duration::ZERO && wait <= Duration::from_millis(1300),
                    "{wait:?}"
                );
            }
            other => panic!("{other:?}"),
        }
        // Another host has its own budget.
        let other = client
            .resolve("127.0.0.1:7/acme/agent:v1", None)
            .await
            .unwrap_err();
        assert!(matches!(other, Error::Unavailable { .. }), "{other:?}");
    }

    #[test]
    fn errors_never_name_a_credential_and_are_classified() {
        let e = Error::Unauthorized {
            registry: "ghcr.io".to_owned(),
            image: "ghcr.io/acme/agent:v1".to_owned(),
        };
        assert_eq!(e.class(), ErrorClass::Unauthorized);
        assert!(e.to_string().contains("imagePullSecretRef"), "{e}");
        let e = Error::WrongPlatform {
            image: "i".to_owned(),
            digest: "sha256:x".to_owned(),
            offered: "linux/arm64".to_owned(),
        };
        assert_eq!(e.class(), ErrorClass::Rejected);
        assert_eq!(
            Error::Budget {
                registry: "r".to_owned(),
                wait: Duration::from_secs(1)
            }
            .class(),
            ErrorClass::Transient
        );
    }
}
