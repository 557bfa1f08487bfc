//! Output formats of the list and get commands: aligned columns, JSON or
//! YAML. Secret values never reach the output: [`redact_deployment`] replaces
//! them before any format is printed.

use agent_operator::controlplane::types::Deployment;
use serde::Serialize;
use serde_json::Value;

use crate::exit::{CliResult, Exit, OrExit};

/// `--output`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Aligned columns (get: one field per line).
    Table,
    /// The wire objects (snake_case) as pretty-printed JSON.
    Json,
    /// The wire objects (snake_case) as YAML.
    Yaml,
}

/// Aligned columns: a header row, then `rows`.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        padded.join("  ").trim_end().to_owned() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out += &line(row.iter().map(String::as_str).collect());
    }
    out
}

/// `field: value` lines, the names aligned.
pub fn fields(pairs: &[(&str, String)]) -> String {
    let w = pairs.iter().map(|(k, _)| k.len() + 1).max().unwrap_or(0);
    pairs
        .iter()
        .map(|(k, v)| format!("{:<w$} {v}\n", format!("{k}:")))
        .collect()
}

/// Prints `value` as JSON or YAML (`output` must not be `Table`).
pub fn print_structured<T: Serialize>(value: &T, output: Output) -> CliResult<()> {
    let text = match output {
        Output::Yaml => yaml_serde::to_string(value).or_exit(Exit::Failed, "encoding YAML")?,
        _ => serde_json::to_string_pretty(value).or_exit(Exit::Failed, "encoding JSON")?,
    };
    println!("{}", text.trim_end());
    Ok(())
}

/// Prints `text` with exactly one trailing newline.
pub fn print_text(text: &str) {
    println!("{}", text.trim_end());
}

/// A deployment as JSON with every `secrets[].value` replaced by
/// `<hidden>` (the service may return the values; agentctl never prints
/// them).
pub fn redact_deployment(d: &Deployment) -> Value {
    let mut v = serde_json::to_value(d).unwrap_or(Value::Null);
    if let Some(Value::Array(items)) = v.get_mut("secrets") {
        for item in items {
            if item.get("value").is_some() {
                item["value"] = Value::from("<hidden>");
            }
        }
    }
    v
}

/// `-` for an absent value.
pub fn or_dash(v: Option<&str>) -> String {
    v.filter(|s| !s.is_empty()).unwrap_or("-").to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployments_are_printed_without_secret_values() {
        let d: Deployment = serde_json::from_value(serde_json::json!({
            "id": "d", "name": "a", "secrets": [{"name": "K", "value": "s3cret"}]
        }))
        .unwrap();
        let v = redact_deployment(&d).to_string();
        assert!(v.contains("<hidden>") && !v.contains("s3cret"), "{v}");
    }

    #[test]
    fn tables_align() {
        let t = table(&["A", "B"], &[vec!["long-value".into(), "x".into()]]);
        assert_eq!(t, "A           B\nlong-value  x\n");
        assert_eq!(
            fields(&[("id", "1".into()), ("name", "n".into())]),
            "id:   1\nname: n\n"
        );
    }
}
