//! The Helm values reference: every value of the chart's `values.yaml`, in
//! its order, with its type (from `values.schema.json`), its default and
//! the comment above it in `values.yaml`, which is where each value is
//! explained (one place: this table is generated from it).

use std::fmt::Write as _;

use serde_json::Value;

use super::cell;

/// The comment above each key of `values.yaml`, by dotted path (keys in
/// list items are not read: the chart's lists hold plain values).
fn comments(values_yaml: &str) -> Vec<(String, String)> {
    let key = regex::Regex::new(r"^( *)([A-Za-z0-9_]+):(.*)$").expect("a valid pattern");
    let mut out = Vec::new();
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut comment: Vec<String> = Vec::new();
    for line in values_yaml.lines() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() {
            comment.clear();
            continue;
        }
        if let Some(text) = trimmed.strip_prefix('#') {
            comment.push(text.trim().to_owned());
            continue;
        }
        let Some(c) = key.captures(line) else {
            comment.clear();
            continue;
        };
        let indent = c[1].len();
        while stack.last().is_some_and(|(i, _)| *i >= indent) {
            stack.pop();
        }
        let mut path: Vec<&str> = stack.iter().map(|(_, k)| k.as_str()).collect();
        path.push(&c[2]);
        out.push((path.join("."), comment.join(" ")));
        stack.push((indent, c[2].to_owned()));
        comment.clear();
    }
    out
}

fn at<'a>(
    root: &'a Value,
    path: &str,
    step: fn(&'a Value, &str) -> Option<&'a Value>,
) -> Option<&'a Value> {
    path.split('.').try_fold(root, step)
}

/// The table of values: `values_yaml` and `schema_json` are the chart's
/// files.
pub fn table(values_yaml: &str, schema_json: &str) -> anyhow::Result<String> {
    let values: Value = yaml_serde::from_str(values_yaml)?;
    let schema: Value = serde_json::from_str(schema_json)?;
    let mut out = String::from("| Value | Type | Default | What |\n|---|---|---|---|\n");
    for (path, comment) in comments(values_yaml) {
        // A key inside a value shown whole (a selector, resources), at any
        // depth, is not a value of its own.
        let keys: Vec<&str> = path.split('.').collect();
        let parent_shown_whole = (1..keys.len()).any(|n| {
            at(&schema, &keys[..n].join("."), |s, k| {
                s.get("properties")?.get(k)
            })
            .is_some_and(|p| p.get("properties").is_none())
        });
        if parent_shown_whole {
            continue;
        }
        let node = at(&schema, &path, |s, k| s.get("properties")?.get(k))
            .ok_or_else(|| anyhow::anyhow!("values.yaml: {path} is not in values.schema.json"))?;
        let default = at(&values, &path, |v, k| v.get(k))
            .ok_or_else(|| anyhow::anyhow!("values.yaml: {path} has no value"))?;
        let ty = node["type"].as_str().unwrap_or("any");
        // A group of values (its own rows below): no default of its own.
        let group = node.get("properties").is_some();
        let default = if group {
            String::new()
        } else {
            format!("`{}`", serde_json::to_string(default)?)
        };
        let _ = writeln!(
            out,
            "| `{path}` | {ty} | {} | {} |",
            cell(&default),
            cell(&comment)
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_value_gets_its_comment_type_and_default() {
        let values = "# header\n\n# The name.\nname: \"\"\n# A group.\ngroup:\n  # On or off.\n  enabled: false\n  selector:\n    matchLabels:\n      a: b\nlist: []\n";
        let schema = r#"{"properties": {"name": {"type": "string"}, "group": {"type": "object", "properties": {"enabled": {"type": "boolean"}, "selector": {"type": "object"}}}, "list": {"type": "array"}}}"#;
        let text = table(values, schema).unwrap();
        assert!(
            text.contains("| `name` | string | `\"\"` | The name. |"),
            "{text}"
        );
        assert!(
            text.contains("| `group` | object |  | A group. |"),
            "{text}"
        );
        assert!(
            text.contains("| `group.enabled` | boolean | `false` | On or off. |"),
            "{text}"
        );
        assert!(
            text.contains("| `group.selector` | object | `{\"matchLabels\":{\"a\":\"b\"}}` |  |"),
            "{text}"
        );
        assert!(!text.contains("matchLabels` |"), "{text}");
        assert!(text.contains("| `list` | array | `[]` |  |"), "{text}");
        assert!(table("unknown: 1\n", schema).is_err());
    }
}
