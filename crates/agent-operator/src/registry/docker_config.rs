//! Registry credentials from a `kubernetes.io/dockerconfigjson` Secret: the
//! `.dockerconfigjson` key holds `{"auths": {"<registry>": {...}}}`, each
//! entry with `auth` (base64 of `user:password`) or `username` and
//! `password` (the format `docker login` and `kubectl create secret
//! docker-registry` write; docs/control-plane-api.md "Images").

use std::collections::BTreeMap;

use base64::Engine as _;
use secrecy::SecretString;
use serde::Deserialize;

/// The key of a `kubernetes.io/dockerconfigjson` Secret.
pub const DOCKER_CONFIG_KEY: &str = ".dockerconfigjson";

/// A user name and password for one registry. `Debug` shows the user only.
#[derive(Clone)]
pub struct Credentials {
    /// The user name.
    pub username: String,
    /// The password or token.
    pub password: SecretString,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"[REDACTED]")
            .finish()
    }
}

/// Why a `.dockerconfigjson` value cannot be used. The messages never
/// contain a credential.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DockerConfigError {
    /// Not JSON, or no `auths` object.
    #[error(
        "the Secret's .dockerconfigjson is not a Docker config (JSON with an \"auths\" object)"
    )]
    NotDockerConfig,
    /// The entry of `registry` has neither `auth` nor `username`/`password`,
    /// or its `auth` is not base64 of `user:password`.
    #[error(
        "the Secret's .dockerconfigjson entry for {registry} has no usable credentials (auth: base64 of user:password, or username and password)"
    )]
    BadEntry {
        /// The registry of the entry.
        registry: String,
    },
}

#[derive(Deserialize)]
struct DockerConfig {
    auths: BTreeMap<String, Entry>,
}

#[derive(Deserialize)]
struct Entry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
}

/// The host (and port) a Docker config key names: `https://`, a path
/// (`https://index.docker.io/v1/`) and case removed; Docker Hub's names
/// (`docker.io`, `index.docker.io`, `registry-1.docker.io`) are one.
pub fn registry_key(key: &str) -> String {
    let key = key
        .trim()
        .trim_start_matches("https://")
        .trim_start_matches("http://");
    let host = key
        .split('/')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    match host.as_str() {
        "docker.io" | "index.docker.io" | "registry-1.docker.io" => "docker.io".to_owned(),
        _ => host,
    }
}

/// The credentials for `registry` (a host, with its port if any) in the
/// `.dockerconfigjson` value `json`; `Ok(None)` when it has no entry for
/// that registry (the pull is then anonymous).
///
/// Errors: [`DockerConfigError`] when the value is not a Docker config or
/// the registry's entry is unusable.
pub fn credentials_for(
    json: &[u8],
    registry: &str,
) -> Result<Option<Credentials>, DockerConfigError> {
    let config: DockerConfig =
        serde_json::from_slice(json).map_err(|_| DockerConfigError::NotDockerConfig)?;
    let wanted = registry_key(registry);
    let Some((key, entry)) = config
        .auths
        .into_iter()
        .find(|(key, _)| registry_key(key) == wanted)
    else {
        return Ok(None);
    };
    let bad = || DockerConfigError::BadEntry {
        registry: registry_key(&key),
    };
    if let (Some(username), Some(password)) = (entry.username, entry.password) {
        return Ok(Some(Credentials {
            username,
            password: password.into(),
        }));
    }
    let auth = entry.auth.ok_or_else(bad)?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(auth.trim())
        .map_err(|_| bad())?;
    let text = String::from_utf8(decoded).map_err(|_| bad())?;
    let (username, password) = text.split_once(':').ok_or_else(bad)?;
    Ok(Some(Credentials {
        username: username.to_owned(),
        password: password.to_owned().into(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    #[test]
    fn entries_are_found_by_host_whatever_form_the_key_has() {
        let json = format!(
            r#"{{"auths": {{
                "https://index.docker.io/v1/": {{"auth": "{}"}},
                "Registry.Example.com:5000": {{"username": "u2", "password": "p2"}},
                "ghcr.io": {{"auth": "{}"}}
            }}}}"#,
            b64("hub:hubpass"),
            b64("gh:tok:en")
        );
        let cases = [
            ("docker.io", Some(("hub", "hubpass"))),
            ("index.docker.io", Some(("hub", "hubpass"))),
            ("registry.example.com:5000", Some(("u2", "p2"))),
            ("registry.example.com", None),
            ("ghcr.io", Some(("gh", "tok:en"))),
            ("quay.io", None),
        ];
        for (registry, want) in cases {
            let got = credentials_for(json.as_bytes(), registry).unwrap();
            let got = got
                .as_ref()
                .map(|c| (c.username.as_str(), c.password.expose_secret()));
            assert_eq!(got, want, "{registry}");
        }
    }

    #[test]
    fn unusable_configs_are_errors_that_name_no_credential() {
        assert_eq!(
            credentials_for(b"not json", "ghcr.io").unwrap_err(),
            DockerConfigError::NotDockerConfig
        );
        assert_eq!(
            credentials_for(br#"{"credsStore": "desktop"}"#, "ghcr.io").unwrap_err(),
            DockerConfigError::NotDockerConfig
        );
        for entry in [
            r#"{}"#.to_owned(),
            r#"{"auth": "%%%"}"#.to_owned(),
            format!(r#"{{"auth": "{}"}}"#, b64("no-colon-secret")),
            r#"{"username": "only-user"}"#.to_owned(),
        ] {
            let json = format!(r#"{{"auths": {{"ghcr.io": {entry}}}}}"#);
            let e = credentials_for(json.as_bytes(), "ghcr.io").unwrap_err();
            assert_eq!(
                e,
                DockerConfigError::BadEntry {
                    registry: "ghcr.io".to_owned()
                }
            );
            assert!(!e.to_string().contains("secret"), "{e}");
        }
    }

    #[test]
    fn debug_never_shows_the_password() {
        let c = Credentials {
            username: "u".to_owned(),
            password: "hunter2-password".to_owned().into(),
        };
        assert!(!format!("{c:?}").contains("hunter2"));
    }
}
