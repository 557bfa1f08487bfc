//! The generated parts of the documentation: every list that the code
//! already holds is written from it, never by hand (STYLE "Docs"). Each is
//! a block of a Markdown page between two markers,
//!
//! ```text
//! <!-- generated: NAME (make generate) -->
//! ...
//! <!-- end generated: NAME -->
//! ```
//!
//! that `agent-operator docs` rewrites ([`BLOCKS`] says which page holds
//! which block) and that the integration test `reference_docs.rs` compares
//! with what the code generates now: a list that drifts from the code fails
//! there. The hand-written lines of the docs are the lines outside these
//! blocks (and outside the generated CRD reference, `docs/reference.md`).

pub mod alerts;
pub mod bench;
pub mod flags;
pub mod helm;
pub mod metrics;
pub mod reasons;

/// One generated block: the page that holds it and its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    /// The page, relative to the repository root.
    pub page: &'static str,
    /// The block's name in its markers.
    pub name: &'static str,
}

/// Every generated block of the docs.
pub const BLOCKS: [Block; 6] = [
    Block {
        page: "docs/CONFIGURATION.md",
        name: "flags",
    },
    Block {
        page: "docs/CONFIGURATION.md",
        name: "helm-values",
    },
    Block {
        page: "docs/METRICS.md",
        name: "metrics",
    },
    Block {
        page: "docs/METRICS.md",
        name: "alerts",
    },
    Block {
        page: "docs/TROUBLESHOOTING.md",
        name: "reasons",
    },
    Block {
        page: "docs/BENCHMARKS.md",
        name: "results",
    },
];

/// The repository files the blocks are generated from, besides the code:
/// the alert rules, the chart's values and schema, the benchmark results.
pub mod inputs {
    /// The alert rules (`alerts` block).
    pub const ALERTS: &str = "deploy/prometheus/alerts.yaml";
    /// The chart's values (`helm-values` block).
    pub const HELM_VALUES: &str = "deploy/helm/agent-operator/values.yaml";
    /// The chart's values schema (`helm-values` block).
    pub const HELM_SCHEMA: &str = "deploy/helm/agent-operator/values.schema.json";
    /// The benchmark results, one JSON object per line (`results` block).
    pub const BENCH_RESULTS: &str = "crates/agent-operator/benches/results.jsonl";
}

fn begin_marker(name: &str) -> String {
    format!("<!-- generated: {name} (make generate) -->")
}

fn end_marker(name: &str) -> String {
    format!("<!-- end generated: {name} -->")
}

/// The content of block `name` in `page` (between its markers, without
/// them), or `None` when the page has no such block.
pub fn block<'a>(page: &'a str, name: &str) -> Option<&'a str> {
    let begin = begin_marker(name);
    let start = page.find(&begin)? + begin.len();
    let end = page[start..].find(&end_marker(name))? + start;
    Some(page[start..end].trim_matches('\n'))
}

/// Rewrites each block of `blocks` under the repository root `root` with
/// what `generate` returns for its name, or with `check` writes nothing and
/// fails naming every block that differs (`agent-operator docs`,
/// `agentctl docs`). Errors: a page cannot be read or written, a block's
/// markers are missing, `generate` fails, or (with `check`) a block
/// differs.
pub fn write_blocks(
    root: &std::path::Path,
    blocks: impl IntoIterator<Item = Block>,
    check: bool,
    mut generate: impl FnMut(&str) -> anyhow::Result<String>,
) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let mut drifted = Vec::new();
    for block in blocks {
        let path = root.join(block.page);
        let page =
            std::fs::read_to_string(&path).with_context(|| format!("reading {}", block.page))?;
        let new = replace_block(&page, block.name, &generate(block.name)?)
            .with_context(|| format!("{}, block {}", block.page, block.name))?;
        if new == page {
            continue;
        }
        if check {
            drifted.push(format!("{} (block {})", block.page, block.name));
        } else {
            std::fs::write(&path, new).with_context(|| format!("writing {}", block.page))?;
            eprintln!("wrote {} ({})", block.page, block.name);
        }
    }
    anyhow::ensure!(
        drifted.is_empty(),
        "generated blocks that differ from the code (run `make generate`): {}",
        drifted.join(", ")
    );
    Ok(())
}

/// `page` with the content of its block `name` replaced by `content`.
pub fn replace_block(page: &str, name: &str, content: &str) -> anyhow::Result<String> {
    let begin = begin_marker(name);
    let start = page
        .find(&begin)
        .ok_or_else(|| anyhow::anyhow!("no marker {begin:?}"))?
        + begin.len();
    let end = page[start..]
        .find(&end_marker(name))
        .ok_or_else(|| anyhow::anyhow!("no end marker of block {name}"))?
        + start;
    Ok(format!(
        "{}\n{}\n{}",
        &page[..start],
        content.trim_matches('\n'),
        &page[end..]
    ))
}

/// The number of lines (markers included) of the generated blocks of
/// `page`: what the count of hand-written lines leaves out.
pub fn generated_lines(page: &str) -> usize {
    let mut inside = false;
    let mut count = 0;
    for line in page.lines() {
        let marker = line.starts_with("<!-- generated: ");
        if marker {
            inside = true;
        }
        if inside {
            count += 1;
        }
        if line.starts_with("<!-- end generated: ") {
            inside = false;
        }
    }
    count
}

/// A Markdown table cell: one line, `|` escaped.
pub fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_is_read_and_replaced_between_its_markers() {
        let page = "# T\n\nbefore\n<!-- generated: x (make generate) -->\nold\n<!-- end generated: x -->\nafter\n";
        assert_eq!(block(page, "x"), Some("old"));
        assert_eq!(block(page, "y"), None);
        let new = replace_block(page, "x", "new\nlines").unwrap();
        assert_eq!(block(&new, "x"), Some("new\nlines"));
        assert!(new.starts_with("# T\n\nbefore\n") && new.ends_with("\nafter\n"));
        assert_eq!(generated_lines(&new), 4);
        assert!(replace_block(page, "y", "z").is_err());
    }

    #[test]
    fn a_cell_is_one_line_with_its_pipes_escaped() {
        assert_eq!(cell("a |b\n  c"), "a \\|b c");
    }
}
