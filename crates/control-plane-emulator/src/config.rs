//! Configuration of the emulator: API keys, workspaces, listeners, timings,
//! scenario rules and faults.
//!
//! Sources: docs/control-plane-api.md "Hosts and headers" (keys and workspaces) and
//! "Self-hosted placement and listeners"; everything else is an emulator choice,
//! documented field by field.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::str::FromStr;
use std::time::Duration;

use uuid::Uuid;

use super::faults::FaultConfig;
use super::scenario::ScenarioRule;
use super::shape::ServiceShape;
use super::workspace::same_workspace;

/// The API key accepted by a default emulator (public, not a secret: it only
/// opens a loopback test tool).
pub const DEMO_API_KEY: &str = "demo-api-key";

/// The workspace (tenant) id that [`DEMO_API_KEY`] belongs to.
pub const DEMO_WORKSPACE_ID: &str = "00000000-0000-4000-8000-000000000001";

/// Default limit of a request body, in bytes (1 MiB); a larger body is answered
/// 413. The real limit is not published (docs/control-plane-api.md "Rate limits").
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

/// An API key and the workspace it is valid for (docs/control-plane-api.md "Hosts and headers").
///
/// The same key may be listed several times with different workspaces (an
/// organization-wide key). `Debug` never prints the key.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// The value the client sends in `X-Api-Key`.
    pub key: String,
    /// The workspace id the client must send in `X-Tenant-Id`.
    pub workspace_id: String,
}

impl ApiKey {
    /// Builds a key entry.
    pub fn new(key: impl Into<String>, workspace_id: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            workspace_id: workspace_id.into(),
        }
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiKey")
            .field("key", &"[REDACTED]")
            .field("workspace_id", &self.workspace_id)
            .finish()
    }
}

/// Parses `KEY=WORKSPACE_ID` (the `--api-key` flag).
///
/// Errors: no `=`, or an empty key or workspace. The error text never contains
/// the key.
impl FromStr for ApiKey {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (key, ws) = s
            .split_once('=')
            .ok_or_else(|| "expected KEY=WORKSPACE_ID".to_owned())?;
        if key.is_empty() || ws.trim().is_empty() {
            return Err("expected KEY=WORKSPACE_ID with a non-empty key and workspace".into());
        }
        Ok(Self::new(key, ws.trim()))
    }
}

/// A listener seeded into a workspace at start (docs/control-plane-api.md
/// "Self-hosted placement and listeners"). A workspace with a listener is
/// treated as a self-hosted enterprise workspace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerSeed {
    /// Workspace the listener belongs to.
    pub workspace_id: String,
    /// Listener id.
    pub id: Uuid,
    /// `compute_id`, e.g. the cluster name.
    pub compute_id: String,
    /// `compute_config.k8s_namespaces`; `None` is sent as null and means "any
    /// namespace" (emulator choice: no source says what null allows).
    pub k8s_namespaces: Option<Vec<String>>,
}

/// Parses `WORKSPACE=LISTENER_ID:COMPUTE_ID[:ns1,ns2]` (the `--listener` flag).
///
/// Errors: missing `=` or `:`, a listener id that is not a uuid, an empty
/// compute id.
impl FromStr for ListenerSeed {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const SHAPE: &str = "expected WORKSPACE=LISTENER_ID:COMPUTE_ID[:ns1,ns2]";
        let (ws, rest) = s.split_once('=').ok_or(SHAPE)?;
        let mut parts = rest.splitn(3, ':');
        let id = parts.next().ok_or(SHAPE)?;
        let compute_id = parts.next().ok_or(SHAPE)?;
        let namespaces = parts.next();
        let id = Uuid::parse_str(id).map_err(|e| format!("listener id {id:?}: {e}"))?;
        if ws.is_empty() || compute_id.is_empty() {
            return Err(SHAPE.into());
        }
        let k8s_namespaces = namespaces.filter(|n| !n.is_empty()).map(|n| {
            n.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        });
        Ok(Self {
            workspace_id: ws.to_owned(),
            id,
            compute_id: compute_id.to_owned(),
            k8s_namespaces,
        })
    }
}

/// A GitHub integration seeded into a workspace at start, with the
/// repositories it can read (docs/control-plane-api.md "Integrations (v1)", seen only in the
/// official clients; served by `GET /v1/integrations/github/install` and
/// `GET /v1/integrations/github/{id}/repos`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntegrationSeed {
    /// Workspace the integration belongs to.
    pub workspace_id: String,
    /// Integration id (the `integration_id` of a `github` deployment).
    pub id: Uuid,
    /// Account or installation name.
    pub name: String,
    /// URLs of the repositories the integration can read (the first answers
    /// `default_branch` `main`, like every one: an emulator choice).
    pub repos: Vec<String>,
}

/// Parses `WORKSPACE=ID:NAME[:REPO_URL,REPO_URL...]` (the `--integration`
/// flag; repository URLs may contain `:`).
///
/// Errors: missing `=` or `:`, an id that is not a uuid, an empty name.
impl FromStr for IntegrationSeed {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const SHAPE: &str = "expected WORKSPACE=INTEGRATION_ID:NAME[:REPO_URL,...]";
        let (ws, rest) = s.split_once('=').ok_or(SHAPE)?;
        let mut parts = rest.splitn(3, ':');
        let id = parts.next().ok_or(SHAPE)?;
        let name = parts.next().ok_or(SHAPE)?.trim();
        let repos = parts
            .next()
            .map(|r| {
                r.split(',')
                    .map(str::trim)
                    .filter(|u| !u.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let id = Uuid::parse_str(id).map_err(|e| format!("integration id {id:?}: {e}"))?;
        if ws.is_empty() || name.is_empty() {
            return Err(SHAPE.into());
        }
        Ok(Self {
            workspace_id: ws.to_owned(),
            id,
            name: name.to_owned(),
            repos,
        })
    }
}

/// Everything the emulator is started with. [`Default`] gives one demo key
/// ([`DEMO_API_KEY`] for [`DEMO_WORKSPACE_ID`]), a 1 s step, a 2 s delete, no
/// listeners, no scenario rules and no faults.
#[derive(Clone, Debug)]
pub struct EmulatorConfig {
    /// Accepted API keys and their workspaces (docs/control-plane-api.md "Hosts and headers").
    pub api_keys: Vec<ApiKey>,
    /// Time a revision spends in each in-progress status (`AWAITING_BUILD`,
    /// `BUILDING`, `AWAITING_DEPLOY`, `DEPLOYING`). Default 1 s.
    pub step_duration: Duration,
    /// How long a deleted deployment answers GET with `AWAITING_DELETE` before
    /// it is gone (404). Default 2 s (docs/control-plane-api.md "Requests", Delete).
    pub delete_duration: Duration,
    /// Base URL used to build `source_config.custom_url`
    /// (`{public_url}/agents/{deployment_id}`); `None` derives it from the
    /// bound address (`http://127.0.0.1:PORT`).
    pub public_url: Option<String>,
    /// When set, every service-chosen `custom_url` is this URL instead of the
    /// built-in agent server (an external `langgraph dev` server, say).
    pub agent_server_url: Option<String>,
    /// `(MARK, URL)`: while a `github` deployment's active revision has
    /// `MARK` in its `repo_ref` (or `image_uri`), its `custom_url` reads
    /// `URL`: an emulator stand-in for revisions built from different code
    /// (the real service serves each revision's build at the one URL), so
    /// that tests can deploy a revision whose agent server answers
    /// differently. The first matching mark wins.
    pub agent_server_routes: Vec<(String, String)>,
    /// Address [`super::spawn`] binds. Default `127.0.0.1:0` (any free port).
    pub listen_addr: SocketAddr,
    /// Workspaces on a self-hosted enterprise plan (listeners allowed). A
    /// workspace with a seeded listener is one too.
    pub enterprise_workspaces: Vec<String>,
    /// Workspaces whose creates must name a listener (400 `'listener_id' is
    /// required` otherwise; docs/control-plane-api.md "Self-hosted placement and listeners").
    pub listener_required_workspaces: Vec<String>,
    /// Listeners seeded at start.
    pub listeners: Vec<ListenerSeed>,
    /// GitHub integrations seeded at start (none by default: then
    /// `GET /v1/integrations/github/install` answers `[]`).
    pub integrations: Vec<IntegrationSeed>,
    /// Scenario rules: which revisions fail, and how (first match wins).
    pub scenarios: Vec<ScenarioRule>,
    /// Injected faults (off by default).
    pub faults: FaultConfig,
    /// Largest accepted request body, in bytes; larger bodies get 413.
    pub max_body_bytes: usize,
    /// Whether the built-in agent server requires an `X-Api-Key` of the
    /// deployment's workspace, as cloud deployments do (docs/control-plane-api.md "Agent server").
    /// Default true.
    pub agent_server_auth: bool,
    /// How answers differ from an echo of the request (every quirk of the
    /// real service by default; see [`ServiceShape`]).
    pub shape: ServiceShape,
    /// Workspaces of an organisation where Deployment is not enabled: every
    /// control plane request is 403 with a detail that contains
    /// `not enabled` (docs/control-plane-api.md, "Credentials and refusals").
    pub deployment_disabled_workspaces: Vec<String>,
}

impl Default for EmulatorConfig {
    fn default() -> Self {
        Self {
            api_keys: vec![ApiKey::new(DEMO_API_KEY, DEMO_WORKSPACE_ID)],
            step_duration: Duration::from_secs(1),
            delete_duration: Duration::from_secs(2),
            public_url: None,
            agent_server_url: None,
            agent_server_routes: Vec::new(),
            listen_addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            enterprise_workspaces: Vec::new(),
            listener_required_workspaces: Vec::new(),
            listeners: Vec::new(),
            integrations: Vec::new(),
            scenarios: Vec::new(),
            faults: FaultConfig::default(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            agent_server_auth: true,
            shape: ServiceShape::default(),
            deployment_disabled_workspaces: Vec::new(),
        }
    }
}

impl EmulatorConfig {
    /// True when listeners are allowed for the workspace (self-hosted enterprise).
    pub fn is_enterprise(&self, workspace_id: &str) -> bool {
        self.enterprise_workspaces
            .iter()
            .any(|w| same_workspace(w, workspace_id))
            || self
                .listeners
                .iter()
                .any(|l| same_workspace(&l.workspace_id, workspace_id))
            || self.requires_listener(workspace_id)
    }

    /// True when Deployment is off for the workspace's organisation.
    pub fn deployment_disabled(&self, workspace_id: &str) -> bool {
        self.deployment_disabled_workspaces
            .iter()
            .any(|w| same_workspace(w, workspace_id))
    }

    /// True when creates in the workspace must name a listener.
    pub fn requires_listener(&self, workspace_id: &str) -> bool {
        self.listener_required_workspaces
            .iter()
            .any(|w| same_workspace(w, workspace_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_key_parses_and_never_shows_the_key() {
        let k: ApiKey = "s3cr3t=ws-1".parse().unwrap();
        assert_eq!(k.key, "s3cr3t");
        assert_eq!(k.workspace_id, "ws-1");
        assert!(!format!("{k:?}").contains("s3cr3t"));
        let err = "s3cr3t".parse::<ApiKey>().unwrap_err();
        assert!(!err.contains("s3cr3t"));
        assert!("=ws".parse::<ApiKey>().is_err());
    }

    #[test]
    fn listener_seed_parses_with_and_without_namespaces() {
        let l: ListenerSeed = "ws=6f1c2a3e-0000-4000-8000-000000000009:cluster-a:ns1, ns2"
            .parse()
            .unwrap();
        assert_eq!(l.workspace_id, "ws");
        assert_eq!(l.compute_id, "cluster-a");
        assert_eq!(
            l.k8s_namespaces,
            Some(vec!["ns1".to_owned(), "ns2".to_owned()])
        );
        let l: ListenerSeed = "ws=6f1c2a3e-0000-4000-8000-000000000009:c".parse().unwrap();
        assert_eq!(l.k8s_namespaces, None);
        assert!("ws=not-a-uuid:c".parse::<ListenerSeed>().is_err());
        assert!("ws:c".parse::<ListenerSeed>().is_err());
    }

    #[test]
    fn integration_seed_parses_urls_with_colons() {
        let i: IntegrationSeed = "ws=3f0d1c2e-0000-4000-8000-000000000000:acme:https://github.com/acme/a, https://github.com/acme/b"
            .parse()
            .unwrap();
        assert_eq!(i.name, "acme");
        assert_eq!(
            i.repos,
            ["https://github.com/acme/a", "https://github.com/acme/b"]
        );
        let bare: IntegrationSeed = "ws=3f0d1c2e-0000-4000-8000-000000000000:acme"
            .parse()
            .unwrap();
        assert!(bare.repos.is_empty());
        assert!("ws=nope:acme".parse::<IntegrationSeed>().is_err());
        assert!(
            "ws=3f0d1c2e-0000-4000-8000-000000000000:"
                .parse::<IntegrationSeed>()
                .is_err()
        );
    }

    #[test]
    fn workspace_ids_compare_as_uuids() {
        assert!(same_workspace(
            DEMO_WORKSPACE_ID,
            &DEMO_WORKSPACE_ID.to_uppercase()
        ));
        assert!(!same_workspace(DEMO_WORKSPACE_ID, "other"));
        let cfg = EmulatorConfig {
            listener_required_workspaces: vec!["w".into()],
            ..Default::default()
        };
        assert!(cfg.is_enterprise("w"));
        assert!(!cfg.is_enterprise(DEMO_WORKSPACE_ID));
    }
}
