//! Error answers, shaped the way the real service (FastAPI) shapes them.
//!
//! Source: docs/control-plane-api.md "Errors": 400/401/403/404/409 bodies
//! are `{"detail": "<string>"}`; 422 is `{"detail": [{"loc", "msg",
//! "type"}]}`. 413, 429 and 5xx use the string shape too.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use uuid::Uuid;

/// An error answer: a status, a FastAPI-shaped JSON body and, for 429/503,
/// an optional `Retry-After` in whole seconds.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    status: StatusCode,
    body: Value,
    retry_after_secs: Option<u64>,
}

impl ApiError {
    /// Any status with a string `detail`.
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        Self {
            status,
            body: json!({ "detail": detail.into() }),
            retry_after_secs: None,
        }
    }

    /// 400 with a string detail (docs/control-plane-api.md "Errors").
    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, detail)
    }

    /// 401: missing or unknown API key (docs/control-plane-api.md "Hosts and headers").
    pub fn unauthorized(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, detail)
    }

    /// 403: key of another workspace, or a feature the workspace lacks.
    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, detail)
    }

    /// 404 with a string detail.
    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, detail)
    }

    /// 409 with a string detail.
    pub fn conflict(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, detail)
    }

    /// 404 `Deployment ID <id> not found.` (docs/control-plane-api.md "Errors").
    pub fn deployment_not_found(id: &Uuid) -> Self {
        Self::not_found(format!("Deployment ID {id} not found."))
    }

    /// 404 `Revision ID <id> not found.`
    pub fn revision_not_found(id: &Uuid) -> Self {
        Self::not_found(format!("Revision ID {id} not found."))
    }

    /// 404 `Listener ID <id> not found.` (docs/control-plane-api.md "Errors": names the id).
    pub fn listener_not_found(id: &Uuid) -> Self {
        Self::not_found(format!("Listener ID {id} not found."))
    }

    /// 413: the body is larger than `limit` bytes.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("Request body too large: the limit is {limit} bytes."),
        )
    }

    /// 422 `{"detail": [errors]}`; each error is built with [`issue`].
    pub fn validation(errors: Vec<Value>) -> Self {
        Self {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            body: json!({ "detail": errors }),
            retry_after_secs: None,
        }
    }

    /// Adds a `Retry-After` header (seconds).
    pub fn with_retry_after(mut self, secs: u64) -> Self {
        self.retry_after_secs = Some(secs);
        self
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The JSON body.
    pub fn body(&self) -> &Value {
        &self.body
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut res = (self.status, Json(self.body)).into_response();
        if let Some(secs) = self.retry_after_secs {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        res
    }
}

/// One pydantic-style validation error: `{"type", "loc", "msg"}` plus
/// optional `input` and `ctx`, as FastAPI sends them.
pub fn issue(
    kind: &str,
    loc: &[Value],
    msg: impl Into<String>,
    input: Option<Value>,
    ctx: Option<Value>,
) -> Value {
    let mut v = json!({ "type": kind, "loc": loc, "msg": msg.into() });
    if let Some(input) = input {
        v["input"] = input;
    }
    if let Some(ctx) = ctx {
        v["ctx"] = ctx;
    }
    v
}

/// FastAPI's answer for an unknown path: 404 `{"detail": "Not Found"}`.
pub async fn not_found_fallback() -> ApiError {
    ApiError::not_found("Not Found")
}

/// FastAPI's answer for a known path with another method: 405
/// `{"detail": "Method Not Allowed"}`.
pub async fn method_not_allowed_fallback() -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_names_the_id() {
        let id = Uuid::nil();
        let e = ApiError::deployment_not_found(&id);
        assert_eq!(e.status(), StatusCode::NOT_FOUND);
        assert_eq!(
            e.body(),
            &json!({"detail": "Deployment ID 00000000-0000-0000-0000-000000000000 not found."})
        );
    }

    #[test]
    fn validation_shape_and_retry_after() {
        let e = ApiError::validation(vec![issue(
            "missing",
            &[json!("body"), json!("name")],
            "Field required",
            None,
            None,
        )]);
        assert_eq!(e.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            e.body(),
            &json!({"detail": [{"type": "missing", "loc": ["body", "name"], "msg": "Field required"}]})
        );
        let res = ApiError::new(StatusCode::TOO_MANY_REQUESTS, "slow down")
            .with_retry_after(3)
            .into_response();
        assert_eq!(res.headers()[header::RETRY_AFTER], "3");
    }
}
