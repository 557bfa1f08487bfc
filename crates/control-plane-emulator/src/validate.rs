//! Request validation the way FastAPI and pydantic v2 do it: every error is
//! collected, each with a `loc`, a `msg` and a `type` (docs/control-plane-api.md "Errors").
//!
//! Sources: docs/control-plane-api.md "Errors" and "Requests" (the
//! request fields and which are required); the public API reference for the
//! `resource_spec` field names. Messages copy pydantic's wording. Emulator
//! choices: body errors carry no `input` (it could hold secret values), only
//! strict JSON types plus pydantic's documented lax coercions for booleans,
//! integers and numbers, and unknown object keys are dropped as pydantic drops
//! them.

use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::errors::issue;

/// The type of one field.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Ty {
    /// A string.
    Str,
    /// A boolean (lax: `"true"`, `"yes"`, `1`... are coerced).
    Bool,
    /// An integer with optional inclusive bounds.
    Int { ge: Option<i64>, le: Option<i64> },
    /// A number with optional inclusive bounds.
    Float { ge: Option<f64>, le: Option<f64> },
    /// A uuid string (kept as sent).
    Uuid,
    /// One of these strings.
    Enum(&'static [&'static str]),
    /// Any JSON object, kept as is.
    Dict,
    /// A JSON value of any type.
    Any,
    /// An object with these fields; other keys are dropped.
    Model(&'static [Field]),
    /// A list of values of this type.
    List(&'static Ty),
}

/// A field of a [`Ty::Model`]. An optional field also accepts `null`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Field {
    pub name: &'static str,
    pub ty: Ty,
    pub required: bool,
}

const fn req(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        required: true,
    }
}

const fn opt(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        required: false,
    }
}

const INT: Ty = Ty::Int { ge: None, le: None };
const NUM: Ty = Ty::Float { ge: None, le: None };
const DICT_LIST: Ty = Ty::List(&Ty::Dict);

/// Allowed values of `source` (docs/control-plane-api.md "Deployment"; the newer `internal_*`
/// kinds are not emulated).
pub(crate) const SOURCES: &[&str] = &["github", "external_docker"];
/// Allowed values of `source_config.deployment_type` (docs/control-plane-api.md "Deployment").
/// `dev_zero` and `dev_free_zero` are accepted by the Terraform provider.
pub(crate) const DEPLOYMENT_TYPES: &[&str] =
    &["dev_free", "dev", "prod", "dev_zero", "dev_free_zero"];

const NAME_ONLY: &[Field] = &[req("name", Ty::Str)];

/// `resource_spec` fields of the public API reference; `cpu` is 0.1–8
/// (docs/control-plane-api.md "Deployment").
const RESOURCE_SPEC: &[Field] = &[
    opt("min_scale", INT),
    opt("max_scale", INT),
    opt(
        "cpu",
        Ty::Float {
            ge: Some(0.1),
            le: Some(8.0),
        },
    ),
    opt("cpu_limit", NUM),
    opt("memory_mb", INT),
    opt("memory_limit_mb", INT),
    opt("queue_min_scale", INT),
    opt("queue_max_scale", INT),
    opt("queue_cpu", NUM),
    opt("queue_cpu_limit", NUM),
    opt("queue_memory_mb", INT),
    opt("queue_memory_limit_mb", INT),
    opt("orchestrator_cpu", NUM),
    opt("orchestrator_cpu_limit", NUM),
    opt("orchestrator_memory_mb", INT),
    opt("orchestrator_memory_limit_mb", INT),
    opt("orchestrator_min_scale", INT),
    opt("orchestrator_max_scale", INT),
    opt("executor_cpu", NUM),
    opt("executor_cpu_limit", NUM),
    opt("executor_memory_mb", INT),
    opt("executor_memory_limit_mb", INT),
    opt("redis_memory_mb", INT),
    opt("labels", Ty::Dict),
    opt("annotations", Ty::Dict),
    opt("service_account_name", Ty::Str),
    opt("image_pull_secrets", Ty::List(&Ty::Model(NAME_ONLY))),
    opt("volumes", DICT_LIST),
    opt("volume_mounts", DICT_LIST),
    opt("init_containers", DICT_LIST),
    opt("sidecars", DICT_LIST),
    opt("db_cpu", NUM),
    opt("db_cpu_limit", NUM),
    opt("db_memory_mb", INT),
    opt("db_memory_limit_mb", INT),
    opt("db_storage_gi", INT),
    opt("db_max_connections", INT),
];

const LISTENER_CONFIG: &[Field] = &[opt("k8s_namespace", Ty::Str)];

const SOURCE_CONFIG: &[Field] = &[
    opt("integration_id", Ty::Uuid),
    opt("repo_url", Ty::Str),
    opt("deployment_type", Ty::Enum(DEPLOYMENT_TYPES)),
    opt("build_on_push", Ty::Bool),
    opt("custom_url", Ty::Str),
    opt("resource_spec", Ty::Model(RESOURCE_SPEC)),
    opt("listener_id", Ty::Uuid),
    opt("listener_config", Ty::Model(LISTENER_CONFIG)),
    opt("install_command", Ty::Str),
    opt("build_command", Ty::Str),
];

/// `repo_commit_sha` is read-only: dropped from requests.
const SOURCE_REVISION_CONFIG: &[Field] = &[
    opt("repo_ref", Ty::Str),
    opt("langgraph_config_path", Ty::Str),
    opt("image_uri", Ty::Str),
];

const SECRET: &[Field] = &[req("name", Ty::Str), req("value", Ty::Str)];

/// `secret_references[]` (docs/control-plane-api.md "Deployment": `{name, secret_name,
/// secret_key}`).
const SECRET_REFERENCE: &[Field] = &[
    req("name", Ty::Str),
    req("secret_name", Ty::Str),
    req("secret_key", Ty::Str),
];

/// Body of `POST /v2/deployments` (docs/control-plane-api.md "Requests": five required fields).
pub(crate) const DEPLOYMENT_CREATE: Ty = Ty::Model(&[
    req("name", Ty::Str),
    req("source", Ty::Enum(SOURCES)),
    req("source_config", Ty::Model(SOURCE_CONFIG)),
    req("source_revision_config", Ty::Model(SOURCE_REVISION_CONFIG)),
    req("secrets", Ty::List(&Ty::Model(SECRET))),
    opt("secret_references", Ty::List(&Ty::Model(SECRET_REFERENCE))),
]);

/// Body of `PATCH /v2/deployments/{id}` (docs/control-plane-api.md "Requests": every field
/// optional; `name` and `source` are accepted only to be checked immutable).
pub(crate) const DEPLOYMENT_PATCH: Ty = Ty::Model(&[
    opt("name", Ty::Str),
    opt("source", Ty::Enum(SOURCES)),
    opt("source_config", Ty::Model(SOURCE_CONFIG)),
    opt("source_revision_config", Ty::Model(SOURCE_REVISION_CONFIG)),
    opt("secrets", Ty::List(&Ty::Model(SECRET))),
    opt("secret_references", Ty::List(&Ty::Model(SECRET_REFERENCE))),
    opt("display_name", Ty::Str),
]);

/// Optional body of `POST /v2/deployments/{id}/revisions`, as the Terraform
/// provider sends it (docs/control-plane-api.md, "Revisions by POST"):
/// the new revision's values; an omitted field keeps the previous
/// revision's.
pub(crate) const REVISION_CREATE: Ty = Ty::Model(&[
    opt("source_config", Ty::Model(SOURCE_CONFIG)),
    opt("source_revision_config", Ty::Model(SOURCE_REVISION_CONFIG)),
    opt("secrets", Ty::List(&Ty::Model(SECRET))),
    opt("secret_references", Ty::List(&Ty::Model(SECRET_REFERENCE))),
]);

/// Body of the agent server's `POST /assistants/search` (docs/control-plane-api.md "Agent server").
pub(crate) const ASSISTANT_SEARCH: Ty = Ty::Model(&[
    opt("metadata", Ty::Dict),
    opt("graph_id", Ty::Str),
    opt("name", Ty::Str),
    opt(
        "limit",
        Ty::Int {
            ge: Some(1),
            le: Some(1000),
        },
    ),
    opt(
        "offset",
        Ty::Int {
            ge: Some(0),
            le: None,
        },
    ),
    opt("sort_by", Ty::Str),
    opt("sort_order", Ty::Str),
]);

/// Body of the agent server's `POST /runs/stream` (docs/control-plane-api.md "Agent server").
pub(crate) const RUN_STREAM: Ty = Ty::Model(&[
    req("assistant_id", Ty::Str),
    opt("input", Ty::Any),
    opt("stream_mode", Ty::Any),
    opt("config", Ty::Dict),
    opt("metadata", Ty::Dict),
    opt("on_disconnect", Ty::Str),
    opt("on_completion", Ty::Str),
    opt("if_not_exists", Ty::Str),
    opt("stream_subgraphs", Ty::Bool),
]);

/// Validates and coerces `value` in place; returns every error found, each
/// with a location starting with `root` (e.g. `["body"]`).
pub(crate) fn check(value: &mut Value, ty: &Ty, root: &[Value]) -> Result<(), Vec<Value>> {
    let mut loc = root.to_vec();
    let mut errs = Vec::new();
    check_at(value, ty, &mut loc, &mut errs);
    if errs.is_empty() { Ok(()) } else { Err(errs) }
}

/// Adds one error of `kind` at `loc`, in FastAPI's shape ([`issue`]).
fn push(
    errs: &mut Vec<Value>,
    kind: &str,
    loc: &[Value],
    msg: impl Into<String>,
    ctx: Option<Value>,
) {
    errs.push(issue(kind, loc, msg, None, ctx));
}

/// Checks (and coerces) `value` as `ty` at `loc`, adding each error found
/// to `errs`.
fn check_at(value: &mut Value, ty: &Ty, loc: &mut Vec<Value>, errs: &mut Vec<Value>) {
    match ty {
        Ty::Any => {}
        Ty::Str => {
            if !value.is_string() {
                push(
                    errs,
                    "string_type",
                    loc,
                    "Input should be a valid string",
                    None,
                );
            }
        }
        Ty::Bool => check_bool(value, loc, errs),
        Ty::Int { ge, le } => check_int(value, *ge, *le, loc, errs),
        Ty::Float { ge, le } => check_float(value, *ge, *le, loc, errs),
        Ty::Uuid => check_uuid(value, loc, errs),
        Ty::Enum(allowed) => check_enum(value, allowed, loc, errs),
        Ty::Dict => {
            if !value.is_object() {
                push(
                    errs,
                    "dict_type",
                    loc,
                    "Input should be a valid dictionary",
                    None,
                );
            }
        }
        Ty::List(item) => check_list(value, item, loc, errs),
        Ty::Model(fields) => match value {
            Value::Object(map) => check_model(map, fields, loc, errs),
            _ => push(
                errs,
                "model_attributes_type",
                loc,
                "Input should be a valid dictionary or object to extract fields from",
                None,
            ),
        },
    }
}

/// A UUID: a string that parses as one (`uuid_parsing` with the parse
/// error), else `uuid_type`.
fn check_uuid(value: &Value, loc: &[Value], errs: &mut Vec<Value>) {
    match value {
        Value::String(s) => {
            if let Err(e) = Uuid::parse_str(s) {
                push(
                    errs,
                    "uuid_parsing",
                    loc,
                    format!("Input should be a valid UUID, {e}"),
                    Some(json!({ "error": e.to_string() })),
                );
            }
        }
        _ => push(
            errs,
            "uuid_type",
            loc,
            "UUID input should be a string, bytes or UUID object",
            None,
        ),
    }
}

/// One of the `allowed` strings, else `enum` naming them.
fn check_enum(value: &Value, allowed: &[&str], loc: &[Value], errs: &mut Vec<Value>) {
    if !value.as_str().is_some_and(|s| allowed.contains(&s)) {
        let expected = enum_expected(allowed);
        push(
            errs,
            "enum",
            loc,
            format!("Input should be {expected}"),
            Some(json!({ "expected": expected })),
        );
    }
}

/// A list whose every item is checked as `item` (located by its index),
/// else `list_type`.
fn check_list(value: &mut Value, item: &Ty, loc: &mut Vec<Value>, errs: &mut Vec<Value>) {
    match value {
        Value::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                loc.push(json!(i));
                check_at(v, item, loc, errs);
                loc.pop();
            }
        }
        _ => push(errs, "list_type", loc, "Input should be a valid list", None),
    }
}

/// The fields of a model: unknown keys dropped, each field checked at its
/// name (a null optional one passes), a missing required one `missing`.
fn check_model(
    map: &mut Map<String, Value>,
    fields: &[Field],
    loc: &mut Vec<Value>,
    errs: &mut Vec<Value>,
) {
    map.retain(|k, _| fields.iter().any(|f| f.name == k));
    for f in fields {
        loc.push(json!(f.name));
        match map.get_mut(f.name) {
            None if f.required => push(errs, "missing", loc, "Field required", None),
            None => {}
            Some(Value::Null) if !f.required => {}
            Some(v) => check_at(v, &f.ty, loc, errs),
        }
        loc.pop();
    }
}

fn check_bool(value: &mut Value, loc: &[Value], errs: &mut Vec<Value>) {
    const TRUE: &[&str] = &["1", "on", "t", "true", "y", "yes"];
    const FALSE: &[&str] = &["0", "off", "f", "false", "n", "no"];
    let coerced = match &*value {
        Value::Bool(_) => return,
        Value::String(s) => {
            let s = s.to_ascii_lowercase();
            if TRUE.contains(&s.as_str()) {
                Some(true)
            } else if FALSE.contains(&s.as_str()) {
                Some(false)
            } else {
                None
            }
        }
        Value::Number(n) => {
            let x = n.as_f64();
            if x == Some(1.0) {
                Some(true)
            } else if x == Some(0.0) {
                Some(false)
            } else {
                None
            }
        }
        _ => {
            push(
                errs,
                "bool_type",
                loc,
                "Input should be a valid boolean",
                None,
            );
            return;
        }
    };
    match coerced {
        Some(b) => *value = Value::Bool(b),
        None => push(
            errs,
            "bool_parsing",
            loc,
            "Input should be a valid boolean, unable to interpret input",
            None,
        ),
    }
}

fn check_int(
    value: &mut Value,
    ge: Option<i64>,
    le: Option<i64>,
    loc: &[Value],
    errs: &mut Vec<Value>,
) {
    let n = match &*value {
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => i,
            (None, Some(f)) if f.fract() == 0.0 && f.abs() < 9.0e15 => f as i64,
            _ => {
                push(
                    errs,
                    "int_from_float",
                    loc,
                    "Input should be a valid integer, got a number with a fractional part",
                    None,
                );
                return;
            }
        },
        Value::String(s) => match s.trim().parse::<i64>() {
            Ok(i) => i,
            Err(_) => {
                push(
                    errs,
                    "int_parsing",
                    loc,
                    "Input should be a valid integer, unable to parse string as an integer",
                    None,
                );
                return;
            }
        },
        _ => {
            push(
                errs,
                "int_type",
                loc,
                "Input should be a valid integer",
                None,
            );
            return;
        }
    };
    if let Some(e) = range_issue(n as f64, ge.map(|g| g as f64), le.map(|l| l as f64), loc) {
        errs.push(e);
    } else {
        *value = json!(n);
    }
}

fn check_float(
    value: &mut Value,
    ge: Option<f64>,
    le: Option<f64>,
    loc: &[Value],
    errs: &mut Vec<Value>,
) {
    let x = match &*value {
        Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
        Value::String(s) => match s.trim().parse::<f64>() {
            Ok(x) => x,
            Err(_) => {
                push(
                    errs,
                    "float_parsing",
                    loc,
                    "Input should be a valid number, unable to parse string as a number",
                    None,
                );
                return;
            }
        },
        _ => {
            push(
                errs,
                "float_type",
                loc,
                "Input should be a valid number",
                None,
            );
            return;
        }
    };
    if let Some(e) = range_issue(x, ge, le, loc) {
        errs.push(e);
    } else if value.is_string() {
        *value = json!(x);
    }
}

/// Formats a bound the way Python prints it (`1`, `0.1`).
fn py_num(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        json!(x as i64)
    } else {
        json!(x)
    }
}

fn range_issue(x: f64, ge: Option<f64>, le: Option<f64>, loc: &[Value]) -> Option<Value> {
    if let Some(g) = ge.filter(|g| x < *g || x.is_nan()) {
        let g = py_num(g);
        return Some(issue(
            "greater_than_equal",
            loc,
            format!("Input should be greater than or equal to {g}"),
            None,
            Some(json!({ "ge": g })),
        ));
    }
    if let Some(l) = le.filter(|l| x > *l || x.is_nan()) {
        let l = py_num(l);
        return Some(issue(
            "less_than_equal",
            loc,
            format!("Input should be less than or equal to {l}"),
            None,
            Some(json!({ "le": l })),
        ));
    }
    None
}

/// pydantic's wording of the allowed values: `'a', 'b' or 'c'`.
pub(crate) fn enum_expected(allowed: &[&str]) -> String {
    let quoted: Vec<String> = allowed.iter().map(|s| format!("'{s}'")).collect();
    match quoted.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// Parses a uuid path or query value; the error is pydantic's `uuid_parsing`
/// (FastAPI shows the input for path and query values).
pub(crate) fn parse_uuid(raw: &str, loc: &[Value]) -> Result<Uuid, Value> {
    Uuid::parse_str(raw).map_err(|e| {
        issue(
            "uuid_parsing",
            loc,
            format!("Input should be a valid UUID, {e}"),
            Some(json!(raw)),
            Some(json!({ "error": e.to_string() })),
        )
    })
}

/// The parsed query string of a request: pairs in order, FastAPI style (the
/// last value of a repeated scalar parameter wins).
#[derive(Clone, Debug, Default)]
pub(crate) struct QueryParams(Vec<(String, String)>);

impl QueryParams {
    /// Parses an `application/x-www-form-urlencoded` query string.
    pub fn parse(raw: Option<&str>) -> Self {
        QueryParams(
            raw.map(|q| {
                url::form_urlencoded::parse(q.as_bytes())
                    .into_owned()
                    .collect()
            })
            .unwrap_or_default(),
        )
    }

    /// The last value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// An integer parameter with a default and inclusive bounds; errors are
    /// pushed to `errs` with loc `["query", name]`.
    pub fn int(
        &self,
        name: &str,
        default: i64,
        ge: Option<i64>,
        le: Option<i64>,
        errs: &mut Vec<Value>,
    ) -> i64 {
        let Some(raw) = self.get(name) else {
            return default;
        };
        let loc = [json!("query"), json!(name)];
        let Ok(n) = raw.trim().parse::<i64>() else {
            errs.push(issue(
                "int_parsing",
                &loc,
                "Input should be a valid integer, unable to parse string as an integer",
                Some(json!(raw)),
                None,
            ));
            return default;
        };
        match range_issue(n as f64, ge.map(|g| g as f64), le.map(|l| l as f64), &loc) {
            Some(mut e) => {
                e["input"] = json!(raw);
                errs.push(e);
                default
            }
            None => n,
        }
    }

    /// A comma-separated list parameter (empty items dropped), or `None`.
    pub fn csv(&self, name: &str) -> Option<Vec<String>> {
        self.get(name).map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
    }

    /// A parameter that must be one of `allowed` (pydantic `enum` error).
    pub fn enumerated(
        &self,
        name: &str,
        allowed: &[&str],
        errs: &mut Vec<Value>,
    ) -> Option<String> {
        let raw = self.get(name)?;
        if allowed.contains(&raw) {
            return Some(raw.to_owned());
        }
        let expected = enum_expected(allowed);
        errs.push(issue(
            "enum",
            &[json!("query"), json!(name)],
            format!("Input should be {expected}"),
            Some(json!(raw)),
            Some(json!({ "expected": expected })),
        ));
        None
    }
}

/// Validates the paging parameters every list shares: `limit` 1–100 (default
/// 20) and `offset` ≥ 0 (default 0) (docs/control-plane-api.md "Requests", List).
pub(crate) fn paging(q: &QueryParams, errs: &mut Vec<Value>) -> (usize, usize) {
    let limit = q.int("limit", 20, Some(1), Some(100), errs);
    let offset = q.int("offset", 0, Some(0), None, errs);
    (limit.max(1) as usize, offset.max(0) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body() -> Vec<Value> {
        vec![json!("body")]
    }

    fn create_body() -> Value {
        json!({
            "name": "app",
            "source": "github",
            "source_config": {"repo_url": "https://github.com/o/r", "build_on_push": "yes",
                               "resource_spec": {"cpu": 1, "bogus": 1}, "unknown": 1},
            "source_revision_config": {"repo_ref": "main", "langgraph_config_path": "langgraph.json",
                                       "repo_commit_sha": "abc"},
            "secrets": [{"name": "A", "value": "b"}]
        })
    }

    #[test]
    fn valid_create_is_coerced_and_unknown_keys_dropped() {
        let mut v = create_body();
        check(&mut v, &DEPLOYMENT_CREATE, &body()).unwrap();
        assert_eq!(v["source_config"]["build_on_push"], json!(true));
        assert!(v["source_config"].get("unknown").is_none());
        assert!(v["source_config"]["resource_spec"].get("bogus").is_none());
        assert!(v["source_revision_config"].get("repo_commit_sha").is_none());
    }

    #[test]
    fn every_error_is_reported_with_its_location() {
        let mut v = json!({
            "name": 3,
            "source": "gitlab",
            "source_config": {"integration_id": "nope", "build_on_push": [], "resource_spec": {"cpu": 9}},
            "secrets": [{"name": "A"}]
        });
        let errs = check(&mut v, &DEPLOYMENT_CREATE, &body()).unwrap_err();
        let got: Vec<(String, Value)> = errs
            .iter()
            .map(|e| (e["type"].as_str().unwrap().to_owned(), e["loc"].clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("string_type".into(), json!(["body", "name"])),
                ("enum".into(), json!(["body", "source"])),
                (
                    "uuid_parsing".into(),
                    json!(["body", "source_config", "integration_id"])
                ),
                (
                    "bool_type".into(),
                    json!(["body", "source_config", "build_on_push"])
                ),
                (
                    "less_than_equal".into(),
                    json!(["body", "source_config", "resource_spec", "cpu"])
                ),
                ("missing".into(), json!(["body", "source_revision_config"])),
                ("missing".into(), json!(["body", "secrets", 0, "value"])),
            ]
        );
        assert_eq!(
            errs[1]["msg"],
            "Input should be 'github' or 'external_docker'"
        );
        assert_eq!(errs[4]["msg"], "Input should be less than or equal to 8");
        assert!(errs.iter().all(|e| e.get("input").is_none()));
    }

    #[test]
    fn top_level_must_be_an_object() {
        let errs = check(&mut json!([1]), &DEPLOYMENT_PATCH, &body()).unwrap_err();
        assert_eq!(errs[0]["type"], "model_attributes_type");
        assert_eq!(errs[0]["loc"], json!(["body"]));
    }

    #[test]
    fn patch_accepts_nulls_and_partial_objects() {
        let mut v = json!({"source_config": {"build_on_push": false}, "secrets": null});
        check(&mut v, &DEPLOYMENT_PATCH, &body()).unwrap();
        assert_eq!(
            v,
            json!({"source_config": {"build_on_push": false}, "secrets": null})
        );
    }

    #[test]
    fn query_limits_follow_fastapi() {
        let q = QueryParams::parse(Some("limit=0&offset=-1&x=1"));
        let mut errs = Vec::new();
        let _ = paging(&q, &mut errs);
        assert_eq!(errs.len(), 2);
        assert_eq!(errs[0]["type"], "greater_than_equal");
        assert_eq!(errs[0]["loc"], json!(["query", "limit"]));
        assert_eq!(errs[0]["input"], "0");
        assert_eq!(errs[0]["msg"], "Input should be greater than or equal to 1");
        let mut errs = Vec::new();
        let q = QueryParams::parse(Some("limit=101"));
        let _ = paging(&q, &mut errs);
        assert_eq!(errs[0]["msg"], "Input should be less than or equal to 100");
        let mut errs = Vec::new();
        let q = QueryParams::parse(Some("limit=abc"));
        let _ = paging(&q, &mut errs);
        assert_eq!(errs[0]["type"], "int_parsing");
        let mut errs = Vec::new();
        assert_eq!(
            paging(
                &QueryParams::parse(Some("limit=5&limit=7&offset=3")),
                &mut errs
            ),
            (7, 3)
        );
        assert!(errs.is_empty());
        assert_eq!(paging(&QueryParams::parse(None), &mut errs), (20, 0));
    }

    #[test]
    fn uuid_errors_match_pydantic() {
        let e = parse_uuid("not-a-uuid", &[json!("path"), json!("deployment_id")]).unwrap_err();
        assert_eq!(e["type"], "uuid_parsing");
        assert_eq!(e["loc"], json!(["path", "deployment_id"]));
        assert!(
            e["msg"]
                .as_str()
                .unwrap()
                .starts_with("Input should be a valid UUID, ")
        );
        assert_eq!(e["input"], "not-a-uuid");
    }

    #[test]
    fn enum_wording() {
        assert_eq!(enum_expected(&["a"]), "'a'");
        assert_eq!(
            enum_expected(&["dev_free", "dev", "prod"]),
            "'dev_free', 'dev' or 'prod'"
        );
    }
}
