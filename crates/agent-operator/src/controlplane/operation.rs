//! The fixed set of control plane operations, what each expects, and the
//! hook that observes every HTTP attempt (for metrics).
//!
//! Operation names and status classes are fixed `&'static str` values, so a
//! metric labelled with them has bounded cardinality (docs/METRICS.md:
//! bounded labels only). Expected statuses follow docs/control-plane-api.md "Errors" (201, 200 or
//! 204 per operation; any other status is a failure) and "Requests".

use std::fmt;
use std::time::Duration;

use reqwest::Method;

/// One control plane operation of [`super::ControlPlaneClient`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// `POST /v2/deployments` → 201.
    CreateDeployment,
    /// `GET /v2/deployments/{id}` → 200.
    GetDeployment,
    /// `PATCH /v2/deployments/{id}` → 200.
    PatchDeployment,
    /// `DELETE /v2/deployments/{id}` → 204.
    DeleteDeployment,
    /// `GET /v2/deployments` → 200.
    ListDeployments,
    /// `POST /v2/deployments/{id}/revisions` → 201 (200 accepted: the real
    /// status is not documented; docs/control-plane-api.md "Requests", Redeploy).
    Redeploy,
    /// `POST /v2/deployments/{id}/revisions/{revision_id}/redeploy` → 200
    /// with the Deployment (201 accepted too: the status is not documented;
    /// docs/control-plane-api.md "Requests", Redeploy an earlier revision).
    RedeployRevision,
    /// `GET /v2/deployments/{id}/revisions` → 200.
    ListRevisions,
    /// `GET /v2/deployments/{id}/revisions/{revision_id}` → 200.
    GetRevision,
    /// `GET /v2/listeners/{id}` → 200.
    GetListener,
    /// `GET /v2/listeners` → 200.
    ListListeners,
    /// `GET /v1/integrations/github/install` → 200 (docs/control-plane-api.md "Integrations
    /// (v1)", seen only in the official clients).
    ListIntegrations,
    /// `GET /v1/integrations/github/{integration_id}/repos` → 200 (docs/control-plane-api.md
    /// "Integrations (v1)", seen only in the official clients).
    ListIntegrationRepos,
    /// `POST /v1/projects/{id}/revisions/{revision_id}/build_logs` → 200: a
    /// read sent as POST (the query is the body; docs/control-plane-api.md "Logs", seen only in
    /// the official clients).
    BuildLogs,
    /// `POST /v1/projects/{id}/deploy_logs` or
    /// `POST /v1/projects/{id}/revisions/{revision_id}/deploy_logs` → 200: a
    /// read sent as POST (docs/control-plane-api.md "Logs").
    DeployLogs,
}

impl Operation {
    /// Every operation, e.g. to pre-register metric label values.
    pub const ALL: [Operation; 15] = [
        Operation::CreateDeployment,
        Operation::GetDeployment,
        Operation::PatchDeployment,
        Operation::DeleteDeployment,
        Operation::ListDeployments,
        Operation::Redeploy,
        Operation::RedeployRevision,
        Operation::ListRevisions,
        Operation::GetRevision,
        Operation::GetListener,
        Operation::ListListeners,
        Operation::ListIntegrations,
        Operation::ListIntegrationRepos,
        Operation::BuildLogs,
        Operation::DeployLogs,
    ];

    /// The fixed name given to [`RequestObserver::observe`], e.g.
    /// `get_deployment`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::CreateDeployment => "create_deployment",
            Operation::GetDeployment => "get_deployment",
            Operation::PatchDeployment => "patch_deployment",
            Operation::DeleteDeployment => "delete_deployment",
            Operation::ListDeployments => "list_deployments",
            Operation::Redeploy => "redeploy",
            Operation::RedeployRevision => "redeploy_revision",
            Operation::ListRevisions => "list_revisions",
            Operation::GetRevision => "get_revision",
            Operation::GetListener => "get_listener",
            Operation::ListListeners => "list_listeners",
            Operation::ListIntegrations => "list_integrations",
            Operation::ListIntegrationRepos => "list_integration_repos",
            Operation::BuildLogs => "build_logs",
            Operation::DeployLogs => "deploy_logs",
        }
    }

    /// The HTTP method of the operation.
    pub fn method(self) -> Method {
        match self {
            Operation::CreateDeployment
            | Operation::Redeploy
            | Operation::RedeployRevision
            | Operation::BuildLogs
            | Operation::DeployLogs => Method::POST,
            Operation::PatchDeployment => Method::PATCH,
            Operation::DeleteDeployment => Method::DELETE,
            Operation::GetDeployment
            | Operation::ListDeployments
            | Operation::ListRevisions
            | Operation::GetRevision
            | Operation::GetListener
            | Operation::ListListeners
            | Operation::ListIntegrations
            | Operation::ListIntegrationRepos => Method::GET,
        }
    }

    /// True for the log queries: sent as POST, but they change nothing
    /// (docs/control-plane-api.md "Logs").
    pub fn is_read_by_post(self) -> bool {
        matches!(self, Operation::BuildLogs | Operation::DeployLogs)
    }

    /// Which requests go first when the shared budget is short: GET and the
    /// log queries are reads (polls, drift checks, lookups), the rest
    /// mutations.
    pub fn priority(self) -> super::budget::Priority {
        match self.method() {
            Method::GET => super::budget::Priority::Read,
            _ if self.is_read_by_post() => super::budget::Priority::Read,
            _ => super::budget::Priority::Mutation,
        }
    }

    /// True for GET, DELETE and the log queries, which the client retries
    /// on transient failures. Other POSTs and PATCH are never retried: the
    /// API has no idempotency key (docs/control-plane-api.md "Requests", List), so a blind retry
    /// of a POST whose answer was lost could create a second deployment or
    /// revision.
    pub fn is_retried(self) -> bool {
        matches!(self.method(), Method::GET | Method::DELETE) || self.is_read_by_post()
    }

    /// The statuses that count as success (docs/control-plane-api.md "Requests"); any other
    /// status is an error, even another 2xx.
    pub fn success_statuses(self) -> &'static [u16] {
        match self {
            Operation::CreateDeployment => &[201],
            Operation::Redeploy | Operation::RedeployRevision => &[201, 200],
            Operation::DeleteDeployment => &[204],
            _ => &[200],
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Status class of an attempt that got an answer: `2xx`, `3xx`, `4xx` or
/// `5xx`. Codes outside 200–599 (reqwest never surfaces 1xx) count as `5xx`:
/// a misbehaving server.
pub fn status_class(status: u16) -> &'static str {
    match status {
        200..=299 => STATUS_CLASS_2XX,
        300..=399 => STATUS_CLASS_3XX,
        400..=499 => STATUS_CLASS_4XX,
        500..=599 => STATUS_CLASS_5XX,
        _ => STATUS_CLASS_5XX,
    }
}

/// Class of an attempt answered with a 2xx status.
pub const STATUS_CLASS_2XX: &str = "2xx";
/// Class of an attempt answered with a 3xx status (redirects are not followed).
pub const STATUS_CLASS_3XX: &str = "3xx";
/// Class of an attempt answered with a 4xx status.
pub const STATUS_CLASS_4XX: &str = "4xx";
/// Class of an attempt answered with a 5xx status.
pub const STATUS_CLASS_5XX: &str = "5xx";
/// Class of an attempt that hit the per-request timeout.
pub const STATUS_CLASS_TIMEOUT: &str = "timeout";
/// Class of an attempt that failed without an answer (refused, reset, TLS).
pub const STATUS_CLASS_TRANSPORT: &str = "transport";

/// Every status class, e.g. to pre-register metric label values.
pub const STATUS_CLASSES: [&str; 6] = [
    STATUS_CLASS_2XX,
    STATUS_CLASS_3XX,
    STATUS_CLASS_4XX,
    STATUS_CLASS_5XX,
    STATUS_CLASS_TIMEOUT,
    STATUS_CLASS_TRANSPORT,
];

/// Observes every control plane HTTP attempt, e.g. to count them in metrics.
pub trait RequestObserver: Send + Sync {
    /// Called once per HTTP attempt (a retried request is observed once per
    /// attempt): `operation` is one of [`Operation::as_str`] (such as
    /// `get_deployment`), `status_class` one of [`STATUS_CLASSES`] (`2xx`,
    /// `3xx`, `4xx`, `5xx`, `timeout`, `transport`); `elapsed` is the
    /// attempt's duration from send to the end of the body, excluding any
    /// rate-limit wait and retry backoff. Called on the request's task: keep
    /// it cheap and non-blocking.
    fn observe(&self, operation: &'static str, status_class: &'static str, elapsed: Duration);

    /// Called once per HTTP attempt of a client built with
    /// [`super::ClientConfig::plane`]: how long the attempt waited for a
    /// token of the control plane's budget (zero when one was there).
    /// Default: ignored.
    fn observe_token_wait(&self, plane: &PlaneLabel, waited: Duration) {
        let _ = (plane, waited);
    }

    /// Called when an answer slowed the budget of a client built with
    /// [`super::ClientConfig::plane`]: `cause` is one of
    /// [`SLOWDOWN_CAUSES`] (`429`, `503`, `502`, `504`, `timeout`).
    /// Default: ignored.
    fn observe_slowdown(&self, plane: &PlaneLabel, cause: &'static str) {
        let _ = (plane, cause);
    }
}

/// The AgentControlPlane a client serves, as metric labels (namespace and
/// name; never the key or the URL).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PlaneLabel {
    /// Namespace of the AgentControlPlane.
    pub namespace: String,
    /// Name of the AgentControlPlane.
    pub name: String,
}

/// Every answer that slows a budget down: 429 and 503 halve the rate and
/// pause for `Retry-After`; 502, 504 and a timeout halve the rate only.
pub const SLOWDOWN_CAUSES: [&str; 5] = ["429", "503", "502", "504", "timeout"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_methods_and_retry_rules() {
        let names: Vec<_> = Operation::ALL.iter().map(|o| o.as_str()).collect();
        assert_eq!(
            names,
            [
                "create_deployment",
                "get_deployment",
                "patch_deployment",
                "delete_deployment",
                "list_deployments",
                "redeploy",
                "redeploy_revision",
                "list_revisions",
                "get_revision",
                "get_listener",
                "list_listeners",
                "list_integrations",
                "list_integration_repos",
                "build_logs",
                "deploy_logs"
            ]
        );
        for op in Operation::ALL {
            let retried = op.is_retried();
            match op.method() {
                Method::POST if op.is_read_by_post() => assert!(retried, "{op}"),
                Method::POST | Method::PATCH => assert!(!retried, "{op}"),
                _ => assert!(retried, "{op}"),
            }
        }
        assert_eq!(Operation::CreateDeployment.success_statuses(), &[201]);
        assert_eq!(Operation::DeleteDeployment.success_statuses(), &[204]);
    }

    #[test]
    fn status_classes() {
        assert_eq!(status_class(204), "2xx");
        assert_eq!(status_class(302), "3xx");
        assert_eq!(status_class(429), "4xx");
        assert_eq!(status_class(503), "5xx");
        assert_eq!(status_class(999), "5xx");
    }
}
