//! Client of an agent server: the endpoints a deployment serves at its
//! `{deployment_url}` (or a local `langgraph dev`): `GET /ok`, `GET /info`,
//! `POST /assistants/search` and the stateless `POST /runs/stream` with its
//! server-sent events.
//!
//! Source: docs/control-plane-api.md "Agent server" (endpoints, the key of
//! cloud deployments, answer shapes, paging header, the wire format and
//! event names of the stream).
//!
//! - [`client`]: [`AgentServerClient`], timeouts, `X-Api-Key`, paging.
//! - [`sse`]: a pure push parser of `text/event-stream` ([`SseParser`]).
//! - [`types`]: request bodies, [`Assistant`], typed [`RunEvent`]s.
//! - [`error`]: [`Error`], with [`Error::is_transient`].
//! - [`limits`]: [`limits::Limits`], the rate and concurrency bounds of agent server calls.

pub mod client;
pub mod error;
pub mod limits;
pub mod sse;
pub mod types;

pub use client::{AgentServerClient, AgentServerConfig, RunStream};
pub use error::Error;
pub use sse::{SseEvent, SseParser};
pub use types::{
    Assistant, AssistantPage, AssistantSearch, Cron, RunEvent, RunStreamRequest, ServerInfo,
    StreamMode,
};
