//! Authentication of the control plane routes: `X-Api-Key` (or
//! `Authorization: Bearer <token>`) and `X-Tenant-Id`.
//!
//! Sources: docs/control-plane-api.md, "Hosts and headers" (header names
//! case-insensitive; missing or wrong key → 401, key of another workspace →
//! 403, both with a `detail` string) and "Credentials and refusals" (a
//! bearer token instead of the key, as the Go CLI sends one; a key without a
//! workspace → 403 whose detail says `requires workspace specification`;
//! an organisation without Deployment → 403 whose detail says `not
//! enabled`). Emulator choice: a bearer token is checked against the same
//! list as API keys; a key revoked at run time (`POST
//! /_emulator/api-keys/revoke`, as a key deleted in the LangSmith settings)
//! is answered as an unknown one, 401. The key is never echoed in a body or
//! a log.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::config::{ApiKey, EmulatorConfig};
use super::errors::ApiError;
use super::workspace::{Tenant, same_workspace};

/// A header as text (`None` when absent, empty or not visible ASCII).
pub(crate) fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

/// The token of an `Authorization: Bearer <token>` header.
pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = header(headers, "authorization")?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Decides who is calling: the configured workspace id, or 401/403.
pub(crate) fn authenticate(
    keys: &[ApiKey],
    key: Option<&str>,
    tenant: Option<&str>,
) -> Result<String, ApiError> {
    let key = key.ok_or_else(|| {
        ApiError::unauthorized("Missing API key: send it in the X-Api-Key header.")
    })?;
    let entries: Vec<&ApiKey> = keys.iter().filter(|k| k.key == key).collect();
    if entries.is_empty() {
        return Err(ApiError::unauthorized("Invalid API key."));
    }
    let tenant = tenant.ok_or_else(|| {
        ApiError::forbidden(
            "This API key requires workspace specification: send the workspace id in the X-Tenant-Id header.",
        )
    })?;
    entries
        .iter()
        .find(|k| same_workspace(&k.workspace_id, tenant))
        .map(|k| k.workspace_id.clone())
        .ok_or_else(|| {
            let shown: String = tenant.chars().take(64).collect();
            ApiError::forbidden(format!("The API key is not valid for workspace {shown}."))
        })
}

/// What the authentication middleware reads: the start configuration
/// (keys, and the workspaces where Deployment is off) and the keys revoked
/// since the start.
#[derive(Clone)]
pub(crate) struct Auth {
    /// The start configuration.
    pub config: Arc<EmulatorConfig>,
    /// Keys (or bearer tokens) revoked at run time: answered 401.
    pub revoked: Arc<Mutex<HashSet<String>>>,
}

impl Auth {
    /// True when `key` was revoked.
    fn is_revoked(&self, key: &str) -> bool {
        crate::sync::lock(&self.revoked).contains(key)
    }
}

/// Middleware on the control plane routes: answers 401/403 or puts the
/// [`Tenant`] in the request extensions.
pub(crate) async fn require_api_key(
    State(auth): State<Auth>,
    mut req: Request,
    next: Next,
) -> Response {
    let config = &auth.config;
    let key = header(req.headers(), "x-api-key").or_else(|| bearer(req.headers()));
    let who = if key.is_some_and(|k| auth.is_revoked(k)) {
        Err(ApiError::unauthorized("Invalid API key."))
    } else {
        authenticate(&config.api_keys, key, header(req.headers(), "x-tenant-id"))
    }
    .and_then(|ws| {
        if config.deployment_disabled(&ws) {
            Err(ApiError::forbidden(
                "LangSmith Deployment is not enabled for this organization.",
            ))
        } else {
            Ok(ws)
        }
    });
    match who {
        Ok(ws) => {
            req.extensions_mut().insert(Tenant(ws));
            next.run(req).await
        }
        Err(e) => {
            tracing::debug!(
                status = e.status().as_u16(),
                "request refused by authentication"
            );
            e.into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;

    fn keys() -> Vec<ApiKey> {
        vec![
            ApiKey::new("k1", "00000000-0000-4000-8000-000000000001"),
            ApiKey::new("org", "00000000-0000-4000-8000-000000000001"),
            ApiKey::new("org", "00000000-0000-4000-8000-000000000002"),
        ]
    }

    #[test]
    fn statuses_of_authentication() {
        let ws1 = "00000000-0000-4000-8000-000000000001";
        assert_eq!(authenticate(&keys(), Some("k1"), Some(ws1)).unwrap(), ws1);
        assert_eq!(
            authenticate(&keys(), Some("k1"), Some(&ws1.to_uppercase())).unwrap(),
            ws1,
            "workspace ids compare as uuids"
        );
        assert!(
            authenticate(
                &keys(),
                Some("org"),
                Some("00000000-0000-4000-8000-000000000002")
            )
            .is_ok()
        );
        let status = |k, t| authenticate(&keys(), k, t).unwrap_err().status();
        assert_eq!(status(None, Some(ws1)), StatusCode::UNAUTHORIZED);
        assert_eq!(status(Some("nope"), Some(ws1)), StatusCode::UNAUTHORIZED);
        assert_eq!(status(Some("k1"), None), StatusCode::FORBIDDEN);
        assert!(
            authenticate(&keys(), Some("org"), None)
                .unwrap_err()
                .body()
                .to_string()
                .contains("requires workspace specification")
        );
        assert_eq!(
            status(Some("k1"), Some("00000000-0000-4000-8000-000000000002")),
            StatusCode::FORBIDDEN
        );
    }

    #[test]
    fn bearer_tokens_are_read_from_the_authorization_header() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer(&h), None);
        h.insert("authorization", "Bearer tok".parse().unwrap());
        assert_eq!(bearer(&h), Some("tok"));
        h.insert("authorization", "bearer  tok2 ".parse().unwrap());
        assert_eq!(bearer(&h), Some("tok2"));
        h.insert("authorization", "Basic abc".parse().unwrap());
        assert_eq!(bearer(&h), None);
    }

    #[test]
    fn the_key_is_never_echoed() {
        for (k, t) in [("secret-key", Some("w")), ("secret-key", None)] {
            let e = authenticate(&keys(), Some(k), t).unwrap_err();
            assert!(!e.body().to_string().contains("secret-key"));
        }
    }

    /// A key revoked at run time is answered 401 on every route, the other
    /// key of its workspace still authenticates, and a reset restores it.
    #[tokio::test]
    async fn a_revoked_key_is_refused_and_the_other_key_still_works() {
        use axum::body::Body;
        use tower::ServiceExt;
        const WS: &str = "00000000-0000-4000-8000-000000000001";
        let state = crate::EmulatorState::new(
            EmulatorConfig {
                api_keys: vec![ApiKey::new("old", WS), ApiKey::new("new", WS)],
                ..Default::default()
            },
            "http://emu",
        );
        let status = |key: &'static str, method: &str, path: &str, body: &str| {
            let req = Request::builder()
                .method(method)
                .uri(path)
                .header("x-api-key", key)
                .header("x-tenant-id", WS)
                .header("content-type", "application/json")
                .body(Body::from(body.to_owned()))
                .unwrap();
            let router = crate::router(state.clone());
            async move { router.oneshot(req).await.unwrap().status() }
        };
        assert_eq!(
            status("old", "GET", "/v2/deployments", "").await,
            StatusCode::OK
        );
        assert_eq!(
            status(
                "old",
                "POST",
                "/_emulator/api-keys/revoke",
                r#"{"key": "old"}"#
            )
            .await,
            StatusCode::NO_CONTENT
        );
        assert_eq!(
            status("old", "GET", "/v2/deployments", "").await,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            status("old", "GET", "/api-host/v2/deployments", "").await,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            status("new", "GET", "/v2/deployments", "").await,
            StatusCode::OK
        );
        state.reset();
        assert_eq!(
            status("old", "GET", "/v2/deployments", "").await,
            StatusCode::OK
        );
    }
}
