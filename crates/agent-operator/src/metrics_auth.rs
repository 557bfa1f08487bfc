//! Authorization of `/metrics` (`--metrics-authorization`), the way
//! kube-rbac-proxy does it, in process: the scraper sends its
//! ServiceAccount token as `Authorization: Bearer <token>`; the operator asks
//! the API server who it is (TokenReview, `authentication.k8s.io/v1`) and
//! whether that identity may `get` the non-resource URL `/metrics`
//! (SubjectAccessReview, `authorization.k8s.io/v1`). No token or an unknown
//! one is 401, a known identity without the grant is 403, an API server that
//! does not answer within [`REVIEW_TIMEOUT`] is 503. A verdict is kept for
//! [`VERDICT_TTL`] per token (keyed by its SHA-256, never the token), so a
//! scrape every 30 s costs the API server two reviews a minute at most.
//!
//! Source: Kubernetes API reference, TokenReview and SubjectAccessReview
//! (the same reviews kube-rbac-proxy and controller-runtime's
//! `WithAuthenticationAndAuthorization` filter send).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};

/// How long a verdict about one token is reused.
pub const VERDICT_TTL: Duration = Duration::from_secs(60);
/// How long each review may take before the scrape is answered 503.
pub const REVIEW_TIMEOUT: Duration = Duration::from_secs(5);
/// Most verdicts kept; the cache is emptied when it is full.
const MAX_VERDICTS: usize = 1024;

/// The answer to one scrape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The token's identity may `get /metrics`: 200.
    Allowed,
    /// No bearer token, or the API server does not know it: 401.
    Unauthenticated,
    /// A known identity without the grant: 403.
    Forbidden,
    /// A review failed or timed out: 503 (not cached).
    Unavailable,
}

/// The reviewer of `/metrics` scrapes; shared by every request.
pub struct MetricsAuth {
    client: kube::Client,
    verdicts: Mutex<HashMap<[u8; 32], (Verdict, Instant)>>,
}

impl std::fmt::Debug for MetricsAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsAuth").finish_non_exhaustive()
    }
}

/// The bearer token of an `Authorization` header value, if it is one.
pub fn bearer(header: Option<&str>) -> Option<SecretString> {
    let value = header?.trim();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty())
        .then(|| SecretString::from(token.to_owned()))
}

impl MetricsAuth {
    /// A reviewer that asks the API server of `client`.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            verdicts: Mutex::new(HashMap::new()),
        }
    }

    /// The verdict for a scrape with this `Authorization` header value.
    pub async fn check(&self, authorization: Option<&str>) -> Verdict {
        let Some(token) = bearer(authorization) else {
            return Verdict::Unauthenticated;
        };
        let key: [u8; 32] = Sha256::digest(token.expose_secret().as_bytes()).into();
        if let Some((verdict, at)) = self.verdicts.lock().expect("lock").get(&key).copied()
            && at.elapsed() < VERDICT_TTL
        {
            return verdict;
        }
        let verdict = self.review(token).await;
        if verdict != Verdict::Unavailable {
            let mut verdicts = self.verdicts.lock().expect("lock");
            if verdicts.len() >= MAX_VERDICTS {
                verdicts.clear();
            }
            verdicts.insert(key, (verdict, Instant::now()));
        }
        verdict
    }

    async fn review(&self, token: SecretString) -> Verdict {
        let reviews: Api<TokenReview> = Api::all(self.client.clone());
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.expose_secret().to_owned()),
                ..Default::default()
            },
            ..Default::default()
        };
        let answer = tokio::time::timeout(
            REVIEW_TIMEOUT,
            reviews.create(&PostParams::default(), &review),
        )
        .await;
        let status = match answer {
            Ok(Ok(review)) => review.status.unwrap_or_default(),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "TokenReview of a /metrics scrape failed");
                return Verdict::Unavailable;
            }
            Err(_) => return Verdict::Unavailable,
        };
        let Some(user) = status.user.filter(|_| status.authenticated == Some(true)) else {
            return Verdict::Unauthenticated;
        };
        let access: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let question = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                uid: user.uid,
                groups: user.groups,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some("/metrics".to_owned()),
                    verb: Some("get".to_owned()),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        match tokio::time::timeout(
            REVIEW_TIMEOUT,
            access.create(&PostParams::default(), &question),
        )
        .await
        {
            Ok(Ok(answer)) if answer.status.as_ref().is_some_and(|s| s.allowed) => Verdict::Allowed,
            Ok(Ok(_)) => Verdict::Forbidden,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "SubjectAccessReview of a /metrics scrape failed");
                Verdict::Unavailable
            }
            Err(_) => Verdict::Unavailable,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bearer_token_is_taken() {
        let token = |h: Option<&str>| bearer(h).map(|t| t.expose_secret().to_owned());
        assert_eq!(token(Some("Bearer abc")), Some("abc".to_owned()));
        assert_eq!(token(Some("bearer  abc ")), Some("abc".to_owned()));
        assert_eq!(token(Some("Basic abc")), None);
        assert_eq!(token(Some("Bearer ")), None);
        assert_eq!(token(Some("abc")), None);
        assert_eq!(token(None), None);
    }
}
