//! Reading a manifest as the API server does, for `agentctl`: a `null`
//! where an optional object, list or value goes means "absent" (an empty
//! `sourceConfig:` in YAML is `null`), and a field the type does not know is
//! refused with its path, as `kubectl apply --validate=strict` refuses it,
//! instead of being dropped without a word.
//!
//! Hand-rolled on purpose: serde's `deny_unknown_fields` cannot be set on
//! the CRD types (it would refuse objects written by a newer operator), so
//! the unknown fields are found by comparing the document with the typed
//! object written back ([`unknown_fields`]).

use serde_json::Value;

/// Removes every object member whose value is `null`, at any depth (also
/// inside lists). Pure.
pub fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// True for a value that a typed object may leave out when written back:
/// an empty list or object.
fn empty(value: &Value) -> bool {
    match value {
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// The paths (`spec.sourceConfig.repoURL`, `spec.secrets[0].vaule`) of the
/// members of `document` that `typed` (the same document deserialized and
/// serialized again) does not have: fields the type does not know. Empty
/// lists and objects are not reported (a type may omit them); `status` is
/// not looked at (the API server ignores it on a create). Pure.
pub fn unknown_fields(document: &Value, typed: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(document, typed, "", &mut out);
    out.retain(|p| p != "status" && !p.starts_with("status."));
    out
}

fn walk(document: &Value, typed: &Value, path: &str, out: &mut Vec<String>) {
    let join = |key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        }
    };
    match (document, typed) {
        (Value::Object(d), Value::Object(t)) => {
            for (key, value) in d {
                match t.get(key) {
                    Some(tv) => walk(value, tv, &join(key), out),
                    None if empty(value) => {}
                    None => out.push(join(key)),
                }
            }
        }
        (Value::Array(d), Value::Array(t)) if d.len() == t.len() => {
            for (i, (dv, tv)) in d.iter().zip(t).enumerate() {
                walk(dv, tv, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nulls_are_absent_at_any_depth() {
        let mut v = json!({"spec": {"sourceConfig": null, "secrets": [{"name": "A", "valueFrom": null}],
                                    "sourceRevisionConfig": {"imageUri": "x", "repoRef": null}}});
        drop_nulls(&mut v);
        assert_eq!(
            v,
            json!({"spec": {"secrets": [{"name": "A"}], "sourceRevisionConfig": {"imageUri": "x"}}})
        );
    }

    #[test]
    fn unknown_fields_are_named_by_path_and_known_ones_are_not() {
        let document = json!({
            "metadata": {"name": "a"},
            "spec": {"source": "github", "sourceConfig": {"repoURL": "x", "repoUrl": "y"},
                     "secrets": [{"name": "A", "vaule": "v"}], "secretReferences": [],
                     "extra": {}},
            "status": {"anything": 1}
        });
        let typed = json!({
            "metadata": {"name": "a"},
            "spec": {"source": "github", "sourceConfig": {"repoUrl": "y"},
                     "secrets": [{"name": "A"}]}
        });
        assert_eq!(
            unknown_fields(&document, &typed),
            ["spec.secrets[0].vaule", "spec.sourceConfig.repoURL"]
        );
        assert!(unknown_fields(&typed, &typed).is_empty());
    }
}
