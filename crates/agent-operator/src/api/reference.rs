//! The CRD reference (`docs/reference.md`), generated from the same schemas
//! the API server enforces ([`super::crds`]): one table per object (spec,
//! status and their nested objects) with each field's type, whether it is
//! required, its allowed values, range, pattern, default and description,
//! plus the validation rules (CEL) of each object. `make generate` writes it;
//! `crates/agent-operator/tests/integration/crds.rs` fails when the committed file drifts from the types.

use std::fmt::Write as _;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;

/// Nested objects not expanded (Kubernetes' own types, documented upstream).
const UPSTREAM: &[&str] = &["volumes", "volumeMounts"];

/// The reference as Markdown.
pub fn markdown() -> String {
    let mut out = String::from(
        "# CRD reference\n\n\
         Generated from the CRD schemas by `make generate` (`agent-operator \
         reference --out docs/reference.md`); `tests/integration/crds.rs` fails when this file \
         drifts from the Rust types. API group `agentserver.dev`, version \
         `v1alpha1`, category `agents`. Units are in each description.\n",
    );
    for crd in super::crds() {
        let names = &crd.spec.names;
        let version = &crd.spec.versions[0];
        let _ = write!(
            out,
            "\n## {} (`{}`)\n\nShort names: {}. Scope: {}.\n",
            names.kind,
            names.plural,
            names
                .short_names
                .as_ref()
                .map(|s| s
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", "))
                .unwrap_or_default(),
            crd.spec.scope
        );
        if let Some(columns) = &version.additional_printer_columns {
            out.push_str("\n`kubectl get` columns: ");
            let cols: Vec<String> = columns
                .iter()
                .map(|c| {
                    let wide = if c.priority.unwrap_or(0) > 0 {
                        " (wide)"
                    } else {
                        ""
                    };
                    format!("`{}`{wide}", c.name.to_uppercase())
                })
                .collect();
            out.push_str(&cols.join(", "));
            out.push_str(".\n");
        }
        let Some(root) = version
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
        else {
            continue;
        };
        for part in ["spec", "status"] {
            if let Some(schema) = root.properties.as_ref().and_then(|p| p.get(part)) {
                object(&mut out, &format!("{}.{part}", names.kind), schema);
            }
        }
    }
    out
}

/// Escapes a cell: pipes, and newlines as `<br>`.
fn cell(text: &str) -> String {
    text.trim()
        .replace('|', "\\|")
        .replace("\n\n", "<br>")
        .replace('\n', " ")
}

fn type_of(s: &JSONSchemaProps) -> String {
    match s.type_.as_deref() {
        Some("array") => {
            let item = items(s).map_or_else(|| "any".into(), type_of);
            format!("[]{item}")
        }
        Some("object") if s.additional_properties.is_some() && s.properties.is_none() => {
            "map".into()
        }
        Some(t) => t.to_owned(),
        None if s.x_kubernetes_int_or_string == Some(true) => "int-or-string".into(),
        None => "any".into(),
    }
}

fn constraints(s: &JSONSchemaProps) -> String {
    let mut parts = Vec::new();
    if let Some(values) = &s.enum_ {
        let v: Vec<String> = values
            .iter()
            .map(|v| format!("`{}`", v.0.as_str().map_or(v.0.to_string(), str::to_owned)))
            .collect();
        parts.push(format!("one of {}", v.join(", ")));
    }
    match (s.minimum, s.maximum) {
        (Some(a), Some(b)) => parts.push(format!("{a}–{b}")),
        (Some(a), None) => parts.push(format!("≥ {a}")),
        (None, Some(b)) => parts.push(format!("≤ {b}")),
        _ => {}
    }
    if let Some(n) = s.max_length {
        parts.push(format!("at most {n} characters"));
    }
    if let Some(n) = s.max_items {
        parts.push(format!("at most {n} items"));
    }
    if let Some(p) = &s.pattern {
        parts.push(format!("pattern `{}`", p.replace('|', "\\|")));
    }
    if let Some(d) = &s.default {
        parts.push(format!("default `{}`", d.0));
    }
    parts.join("; ")
}

/// Items schema of an array, if it is one schema.
fn items(s: &JSONSchemaProps) -> Option<&JSONSchemaProps> {
    match s.items.as_ref()? {
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrArray::Schema(s) => Some(s),
        _ => None,
    }
}

/// One table for `schema` (an object) at `path`, then one per nested object.
fn object(out: &mut String, path: &str, schema: &JSONSchemaProps) {
    let Some(props) = &schema.properties else {
        return;
    };
    let required = schema.required.clone().unwrap_or_default();
    let _ = write!(out, "\n### `{path}`\n\n");
    if let Some(rules) = &schema.x_kubernetes_validations {
        out.push_str("Rules:\n");
        for r in rules {
            // A combined rule (`rules::all_of`) lists each of its checks.
            let messages = r
                .message_expression
                .as_deref()
                .and_then(super::rules::all_of_messages)
                .unwrap_or_else(|| vec![r.message.clone().unwrap_or_else(|| r.rule.clone())]);
            for message in messages {
                let _ = writeln!(out, "- {}", cell(&message));
            }
        }
        out.push('\n');
    }
    out.push_str("| Field | Type | Required | Values | Description |\n|---|---|---|---|---|\n");
    let mut nested = Vec::new();
    for (name, prop) in props {
        let _ = writeln!(
            out,
            "| `{name}` | {} | {} | {} | {} |",
            type_of(prop),
            if required.contains(name) { "yes" } else { "" },
            cell(&constraints(prop)),
            cell(prop.description.as_deref().unwrap_or(""))
        );
        if UPSTREAM.contains(&name.as_str()) || name == "conditions" {
            continue;
        }
        let target = match prop.type_.as_deref() {
            Some("array") => items(prop)
                .filter(|i| i.properties.is_some())
                .map(|i| (format!("{path}.{name}[]"), i)),
            Some("object") if prop.properties.is_some() => Some((format!("{path}.{name}"), prop)),
            _ => None,
        };
        if let Some(t) = target {
            nested.push(t);
        }
    }
    for (p, s) in nested {
        object(out, &p, s);
    }
}
