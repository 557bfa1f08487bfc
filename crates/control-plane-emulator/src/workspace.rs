//! Who a control plane request is for: the authenticated workspace
//! ([`Tenant`], put in the request extensions by the authentication
//! middleware and read by the fault middleware and the handlers) and how two
//! workspace ids compare ([`same_workspace`]). A leaf, so the middlewares
//! and the configuration share it without importing each other.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use uuid::Uuid;

use super::errors::ApiError;

/// The authenticated workspace of a request (the workspace id as configured
/// with its key), put in the request extensions by the authentication
/// middleware (`auth::require_api_key`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Tenant(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Tenant {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Tenant>()
            .cloned()
            .ok_or_else(|| ApiError::unauthorized("Not authenticated."))
    }
}

/// Compares two workspace ids: as uuids when both parse (so case and the
/// braced/simple forms do not matter), else as exact strings.
pub(crate) fn same_workspace(a: &str, b: &str) -> bool {
    match (Uuid::parse_str(a.trim()), Uuid::parse_str(b.trim())) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}
