//! Extractors whose rejections are FastAPI-shaped errors (never axum's plain
//! text, never a 500).
//!
//! Body rules copy FastAPI's request handler: without a `Content-Type` or with
//! `application/json` / `application/*+json` the body is parsed as JSON
//! (`json_invalid` at `["body", position]` when it does not parse); with any
//! other content type the body is not an object (`model_attributes_type` at
//! `["body"]`); an empty body is `missing` at `["body"]`. A body over the
//! limit is 413. Path ids must be uuids (`uuid_parsing` at
//! `["path", name]`), as in the public API reference.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, FromRequestParts, RawPathParams, Request};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use serde_json::{Value, json};
use uuid::Uuid;

use super::errors::{ApiError, issue};
use super::state::EmulatorState;
use super::validate::parse_uuid;

/// A request body parsed as JSON the way FastAPI does.
#[derive(Clone, Debug)]
pub(crate) struct JsonBody(pub Value);

/// A body that may be empty (the agent server's search): empty → `None`.
#[derive(Clone, Debug)]
pub(crate) struct OptionalJsonBody(pub Option<Value>);

fn is_json_content_type(ct: &str) -> bool {
    let mime = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match mime.split_once('/') {
        Some(("application", sub)) => sub == "json" || sub.ends_with("+json"),
        _ => false,
    }
}

fn body_error(rej: BytesRejection, limit: usize) -> ApiError {
    if rej.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::too_large(limit)
    } else {
        ApiError::bad_request("The request body could not be read.")
    }
}

/// Python's `json` messages for the common serde_json errors.
fn python_json_message(e: &serde_json::Error) -> String {
    let msg = e.to_string();
    let msg = msg.split(" at line ").next().unwrap_or(&msg);
    match msg {
        m if m.starts_with("EOF while parsing") || m == "expected value" => {
            "Expecting value".into()
        }
        "key must be a string" => "Expecting property name enclosed in double quotes".into(),
        "trailing characters" => "Extra data".into(),
        "expected `,` or `}`" | "expected `,` or `]`" => "Expecting ',' delimiter".into(),
        "expected `:`" => "Expecting ':' delimiter".into(),
        m => m.to_owned(),
    }
}

/// Character offset of a serde_json error (Python's `JSONDecodeError.pos`).
fn error_position(text: &str, e: &serde_json::Error) -> usize {
    if e.classify() == serde_json::error::Category::Eof {
        return text.chars().count();
    }
    let line = e.line().max(1);
    let before: usize = text
        .split_inclusive('\n')
        .take(line - 1)
        .map(|l| l.chars().count())
        .sum();
    let col = e.column().saturating_sub(1);
    before + col
}

/// Parses `bytes` as the JSON body of a request with content type `ct`.
pub(crate) fn parse_body(ct: Option<&str>, bytes: &[u8]) -> Result<Option<Value>, ApiError> {
    if bytes.is_empty() {
        return Ok(None);
    }
    if ct.is_some_and(|ct| !is_json_content_type(ct)) {
        return Err(ApiError::validation(vec![issue(
            "model_attributes_type",
            &[json!("body")],
            "Input should be a valid dictionary or object to extract fields from",
            None,
            None,
        )]));
    }
    serde_json::from_slice(bytes).map(Some).map_err(|e| {
        let text = String::from_utf8_lossy(bytes);
        let pos = error_position(&text, &e);
        ApiError::validation(vec![issue(
            "json_invalid",
            &[json!("body"), json!(pos)],
            "JSON decode error",
            Some(json!({})),
            Some(json!({ "error": python_json_message(&e) })),
        )])
    })
}

/// The 422 of a route whose body is required but empty (`missing` at `["body"]`).
pub(crate) fn missing_body() -> ApiError {
    ApiError::validation(vec![issue(
        "missing",
        &[json!("body")],
        "Field required",
        Some(Value::Null),
        None,
    )])
}

async fn read_body(req: Request, state: &EmulatorState) -> Result<Option<Value>, ApiError> {
    let ct = req
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap_or("application/octet-stream").to_owned());
    let limit = state.config().max_body_bytes;
    let bytes = Bytes::from_request(req, state)
        .await
        .map_err(|rej| body_error(rej, limit))?;
    parse_body(ct.as_deref(), &bytes)
}

impl FromRequest<EmulatorState> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &EmulatorState) -> Result<Self, Self::Rejection> {
        match read_body(req, state).await? {
            Some(v) => Ok(JsonBody(v)),
            None => Err(missing_body()),
        }
    }
}

impl FromRequest<EmulatorState> for OptionalJsonBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &EmulatorState) -> Result<Self, Self::Rejection> {
        read_body(req, state).await.map(OptionalJsonBody)
    }
}

/// The uuid path parameters of a request, in route order.
#[derive(Clone, Debug)]
pub(crate) struct PathIds(pub Vec<Uuid>);

impl PathIds {
    /// The `i`-th id (the nil uuid if the route has fewer: never panics).
    pub fn at(&self, i: usize) -> Uuid {
        self.0.get(i).copied().unwrap_or_default()
    }
}

impl<S: Send + Sync> FromRequestParts<S> for PathIds {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let params = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|_| {
                ApiError::validation(vec![issue(
                    "uuid_parsing",
                    &[json!("path")],
                    "Input should be a valid UUID",
                    None,
                    None,
                )])
            })?;
        let mut ids = Vec::new();
        let mut errs = Vec::new();
        for (name, value) in &params {
            match parse_uuid(value, &[json!("path"), json!(name)]) {
                Ok(id) => ids.push(id),
                Err(e) => errs.push(e),
            }
        }
        if errs.is_empty() {
            Ok(PathIds(ids))
        } else {
            Err(ApiError::validation(errs))
        }
    }
}

/// An agent server request's optional JSON body (absent: `{}`) as `T`, or a
/// 422 naming the decode error (the real server's FastAPI shape).
pub(crate) fn decode<T: serde::de::DeserializeOwned>(body: Option<Value>) -> Result<T, ApiError> {
    serde_json::from_value(body.unwrap_or_else(|| json!({}))).map_err(|e| {
        ApiError::validation(vec![
            json!({"type": "invalid", "loc": ["body"], "msg": e.to_string()}),
        ])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types() {
        assert!(is_json_content_type("application/json"));
        assert!(is_json_content_type("Application/JSON; charset=utf-8"));
        assert!(is_json_content_type("application/merge-patch+json"));
        assert!(!is_json_content_type("text/plain"));
        assert!(!is_json_content_type("application/x-www-form-urlencoded"));
    }

    #[test]
    fn bodies_are_parsed_like_fastapi() {
        assert_eq!(
            parse_body(None, b"{\"a\":1}").unwrap(),
            Some(json!({"a": 1}))
        );
        assert_eq!(parse_body(Some("application/json"), b"").unwrap(), None);
        let e = parse_body(Some("text/plain"), b"{}").unwrap_err();
        assert_eq!(e.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(e.body()["detail"][0]["type"], "model_attributes_type");
        let e = parse_body(Some("application/json"), b"{\"name\": }").unwrap_err();
        let d = &e.body()["detail"][0];
        assert_eq!(d["type"], "json_invalid");
        assert_eq!(d["loc"], json!(["body", 9]));
        assert_eq!(d["msg"], "JSON decode error");
        assert_eq!(d["ctx"]["error"], "Expecting value");
        let e = parse_body(None, b"{\n  \"a\": 1,\n  x}").unwrap_err();
        assert_eq!(e.body()["detail"][0]["loc"], json!(["body", 14]));
        assert_eq!(
            e.body()["detail"][0]["ctx"]["error"],
            "Expecting property name enclosed in double quotes"
        );
        let e = parse_body(None, b"{\"a\": 1").unwrap_err();
        assert_eq!(e.body()["detail"][0]["loc"], json!(["body", 7]));
    }
}
