//! GitHub integrations named instead of their uuid: resolving
//! `sourceConfig.integrationRef` to the wire `integration_id`, and checking
//! before the create that `repoUrl` is one of the integration's
//! repositories.
//!
//! Source: docs/control-plane-api.md "Integrations (v1)", seen only in the official
//! clients (not in the public API description):
//! `GET /v1/integrations/github/install` answers `[{"id", "installation_id",
//! "name"}]` and `GET /v1/integrations/github/{integration_id}/repos` answers
//! `[{"url", "default_branch", ...}]`.
//!
//! Cost: both lists are cached per control plane (base URL and workspace)
//! for [`CACHE_TTL`] and shared by every resource of the operator, and a
//! fetch in progress is shared by the callers that wait for it; so a fleet
//! of creates on one integration costs one request of each list per minute,
//! drawn from the control plane's shared budget like every request. A
//! change on GitHub (a repository granted to the app) is therefore seen
//! within [`CACHE_TTL`], on the next pass (a `Stalled` resource is checked
//! again on its slow resync or when it changes).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::report::{ReasonTable, reason_for};
use super::resolve::Blocked;
use crate::api::conditions::reason;
use crate::api::deployment::AgentDeploymentSpec;
use crate::controller::error::Error;
use crate::controlplane::types::{GithubIntegration, GithubRepository};
use crate::controlplane::{ControlPlaneClient, Error as CpError};

/// How long a list of integrations, or of one integration's repositories,
/// answers without a new request (60 s; a choice: no source gives a rate).
pub const CACHE_TTL: Duration = Duration::from_secs(60);

/// One cached list: filled by the first caller, shared while fresh; the
/// async mutex is held during the fetch so concurrent callers share it.
type Slot<T> = Arc<tokio::sync::Mutex<Option<(Instant, Arc<Vec<T>>)>>>;

/// The integration and repository lists of every control plane (one per
/// operator, in the context).
#[derive(Default)]
pub struct IntegrationCache {
    installs: Mutex<HashMap<String, Slot<GithubIntegration>>>,
    repos: Mutex<HashMap<(String, String), Slot<GithubRepository>>>,
}

impl std::fmt::Debug for IntegrationCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IntegrationCache")
    }
}

fn slot<K: std::hash::Hash + Eq, T>(map: &Mutex<HashMap<K, Slot<T>>>, key: K) -> Slot<T> {
    map.lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(key)
        .or_default()
        .clone()
}

/// The cached list of `slot` if younger than [`CACHE_TTL`], else `fetch`'s
/// answer (kept only on success).
async fn cached<T, Fut>(slot: Slot<T>, fetch: impl FnOnce() -> Fut) -> Result<Arc<Vec<T>>, CpError>
where
    Fut: std::future::Future<Output = Result<Vec<T>, CpError>>,
{
    let mut held = slot.lock().await;
    if let Some((at, list)) = held.as_ref()
        && at.elapsed() < CACHE_TTL
    {
        return Ok(list.clone());
    }
    let list = Arc::new(fetch().await?);
    *held = Some((Instant::now(), list.clone()));
    Ok(list)
}

impl IntegrationCache {
    /// The GitHub integrations of the control plane `plane` (cached; see
    /// [`CACHE_TTL`]). Errors: those of
    /// [`ControlPlaneClient::list_github_integrations`].
    pub async fn integrations(
        &self,
        plane: &str,
        cp: &ControlPlaneClient,
    ) -> Result<Arc<Vec<GithubIntegration>>, CpError> {
        cached(slot(&self.installs, plane.to_owned()), || {
            cp.list_github_integrations()
        })
        .await
    }

    /// The repositories of integration `id` on `plane` (cached). Errors:
    /// those of [`ControlPlaneClient::list_github_repositories`].
    pub async fn repositories(
        &self,
        plane: &str,
        cp: &ControlPlaneClient,
        id: &str,
    ) -> Result<Arc<Vec<GithubRepository>>, CpError> {
        cached(slot(&self.repos, (plane.to_owned(), id.to_owned())), || {
            cp.list_github_repositories(id)
        })
        .await
    }
}

/// The one integration whose `name` is `name` (ASCII case ignored, as
/// GitHub account names are). Errors: none or several match →
/// `IntegrationNotFound`, naming the integrations there are. Pure.
pub fn find_integration<'a>(
    integrations: &'a [GithubIntegration],
    name: &str,
) -> Result<&'a GithubIntegration, Blocked> {
    let found: Vec<&GithubIntegration> = integrations
        .iter()
        .filter(|i| {
            i.name
                .as_deref()
                .is_some_and(|n| n.eq_ignore_ascii_case(name))
        })
        .collect();
    match found.as_slice() {
        [one] => Ok(one),
        [] => {
            let names: Vec<&str> = integrations
                .iter()
                .filter_map(|i| i.name.as_deref())
                .collect();
            let known = if names.is_empty() {
                "the workspace has none".to_owned()
            } else {
                format!("the workspace has: {}", names.join(", "))
            };
            Err(Blocked {
                reason: reason::INTEGRATION_NOT_FOUND,
                message: format!(
                    "sourceConfig.integrationRef: no GitHub integration named {name:?} ({known}); install the GitHub app for that account, or set sourceConfig.integrationId"
                ),
            })
        }
        many => Err(Blocked {
            reason: reason::INTEGRATION_NOT_FOUND,
            message: format!(
                "sourceConfig.integrationRef: {} GitHub integrations are named {name:?} ({}); set sourceConfig.integrationId to the one to use",
                many.len(),
                many.iter()
                    .map(|i| i.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }),
    }
}

/// A repository URL in a comparable form: trimmed, lowercase (GitHub owner
/// and repository names ignore case), without a trailing `/` or `.git`.
pub fn normalize_repo_url(url: &str) -> String {
    let u = url.trim().to_ascii_lowercase();
    let u = u.trim_end_matches('/');
    u.strip_suffix(".git").unwrap_or(u).to_owned()
}

/// Checks that `repo_url` is among `repos` (compared with
/// [`normalize_repo_url`]). Errors: `RepositoryNotAccessible`, naming the
/// integration and the repository. Pure.
pub fn check_repository(
    integration: &str,
    repos: &[GithubRepository],
    repo_url: &str,
) -> Result<(), Blocked> {
    let want = normalize_repo_url(repo_url);
    if repos.iter().any(|r| normalize_repo_url(&r.url) == want) {
        return Ok(());
    }
    Err(Blocked {
        reason: reason::REPOSITORY_NOT_ACCESSIBLE,
        message: format!(
            "sourceConfig.repoUrl {repo_url} is not among the {} repositories of GitHub integration {integration:?}; grant the GitHub app access to it",
            repos.len()
        ),
    })
}

/// What a failed integration read means ([`ReasonTable::INTEGRATION_CHECK`]):
/// 401/403 → `Unauthorized`, 404 →
/// `IntegrationNotFound`, 400/422 → `InvalidSpec`; `None` for transient
/// errors and unexpected answers (retried with backoff). Pure.
fn blocked_by(what: &str, e: &CpError) -> Option<Blocked> {
    let reason = reason_for(&ReasonTable::INTEGRATION_CHECK, e)?;
    Some(Blocked {
        reason,
        message: format!("{what}: {e}"),
    })
}

/// With `sourceConfig.integrationRef` set: resolves it to the integration
/// id ([`find_integration`]) and checks `repoUrl` against the integration's
/// repositories ([`check_repository`]), through the shared `cache` (at most
/// one request of each list per [`CACHE_TTL`] and control plane). Without
/// it, no request and `Ok(Ok(None))`.
///
/// Returns `Ok(Ok(Some(id)))`, or `Ok(Err(Blocked))` for an input to fix.
/// Errors: transient or unexpected control plane errors
/// (`Error::ControlPlane`, operation `list GitHub integrations` or `list
/// GitHub repositories`) for the caller's backoff.
pub async fn resolve(
    cache: &IntegrationCache,
    plane: &str,
    cp: &ControlPlaneClient,
    spec: &AgentDeploymentSpec,
) -> Result<Result<Option<String>, Blocked>, Error> {
    let Some(r) = &spec.source_config.integration_ref else {
        return Ok(Ok(None));
    };
    let integrations = match cache.integrations(plane, cp).await {
        Ok(list) => list,
        Err(e) => {
            return match blocked_by("list GitHub integrations", &e) {
                Some(blocked) => Ok(Err(blocked)),
                None => Err(Error::ControlPlane {
                    operation: "list GitHub integrations",
                    source: e,
                }),
            };
        }
    };
    let id = match find_integration(&integrations, &r.name) {
        Ok(i) => i.id.clone(),
        Err(blocked) => return Ok(Err(blocked)),
    };
    let Some(repo_url) = spec.source_config.repo_url.as_deref() else {
        return Ok(Err(Blocked {
            reason: reason::INVALID_SPEC,
            message: "sourceConfig.integrationRef needs sourceConfig.repoUrl".into(),
        }));
    };
    let repos = match cache.repositories(plane, cp, &id).await {
        Ok(list) => list,
        Err(e) => {
            return match blocked_by(&format!("GitHub integration {:?} ({id})", r.name), &e) {
                Some(blocked) => Ok(Err(blocked)),
                None => Err(Error::ControlPlane {
                    operation: "list GitHub repositories",
                    source: e,
                }),
            };
        }
    };
    Ok(check_repository(&r.name, &repos, repo_url).map(|()| Some(id)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn integration(id: &str, name: &str) -> GithubIntegration {
        GithubIntegration {
            id: id.into(),
            installation_id: Some(serde_json::json!(42)),
            name: Some(name.into()),
        }
    }

    #[test]
    fn integrations_are_found_by_name_ignoring_case() {
        let list = [integration("a", "acme"), integration("b", "Globex")];
        assert_eq!(find_integration(&list, "ACME").unwrap().id, "a");
        assert_eq!(find_integration(&list, "globex").unwrap().id, "b");
        let missing = find_integration(&list, "initech").unwrap_err();
        assert_eq!(missing.reason, reason::INTEGRATION_NOT_FOUND);
        assert!(
            missing.message.contains("acme, Globex"),
            "{}",
            missing.message
        );
        let twice = [integration("a", "acme"), integration("c", "Acme")];
        let e = find_integration(&twice, "acme").unwrap_err();
        assert!(e.message.contains("2 GitHub integrations"), "{}", e.message);
        assert!(
            find_integration(&[], "acme")
                .unwrap_err()
                .message
                .contains("has none")
        );
    }

    #[test]
    fn repositories_compare_without_case_slash_or_git_suffix() {
        let repos = [GithubRepository {
            url: "https://github.com/Acme/Agent".into(),
            default_branch: Some("main".into()),
        }];
        for same in [
            "https://github.com/acme/agent",
            "https://github.com/acme/agent/",
            "https://github.com/acme/agent.git",
        ] {
            assert!(check_repository("acme", &repos, same).is_ok(), "{same}");
        }
        let e = check_repository("acme", &repos, "https://github.com/acme/other").unwrap_err();
        assert_eq!(e.reason, reason::REPOSITORY_NOT_ACCESSIBLE);
        assert!(e.message.contains("acme/other"), "{}", e.message);
    }

    #[test]
    fn read_errors_become_reasons_or_retries() {
        let nf = CpError::NotFound {
            detail: "Integration not found.".into(),
        };
        assert_eq!(
            blocked_by("x", &nf).unwrap().reason,
            reason::INTEGRATION_NOT_FOUND
        );
        assert!(blocked_by("x", &CpError::Timeout).is_none());
    }

    #[tokio::test]
    async fn a_fresh_list_is_shared_and_an_error_is_not_kept() {
        let slot: Slot<u8> = Default::default();
        let calls = std::sync::atomic::AtomicU32::new(0);
        let fetch = || async {
            calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(vec![1u8])
        };
        cached(slot.clone(), fetch).await.unwrap();
        cached(slot.clone(), fetch).await.unwrap();
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
        let other: Slot<u8> = Default::default();
        assert!(
            cached(other.clone(), || async { Err(CpError::Timeout) })
                .await
                .is_err()
        );
        assert!(other.lock().await.is_none());
    }
}
