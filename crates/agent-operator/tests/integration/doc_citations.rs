//! Every citation of a section resolves. Code, manifests and docs cite a
//! page of the documentation by a heading (`docs/control-plane-api.md
//! "Errors"`, `[BEHAVIOUR.md](BEHAVIOUR.md), "Request discipline"`) or by
//! the bold lead-in of a list item (`"create, crash-safe"`); a heading
//! renamed or cut while shortening a page must not leave a docstring
//! pointing at nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use regex::Regex;

fn root() -> &'static Path {
    test_support::repo_root()
}

/// The anchors of a Markdown page: its headings and the bold lead-ins of
/// its list items and paragraphs, each also without a trailing ` (...)` or
/// `: ...` (so `"AgentDeployment"` names `## AgentDeployment (`agd`)`).
fn anchors(page: &str) -> BTreeSet<String> {
    let heading = Regex::new(r"^#+\s+(.+?)\s*$").unwrap();
    let bold = Regex::new(r"^\s*(?:- |\d+\. )?\*\*([^*]+?)\.?\*\*").unwrap();
    let mut out = BTreeSet::new();
    for line in page.lines() {
        for c in heading
            .captures(line)
            .into_iter()
            .chain(bold.captures(line))
        {
            let anchor = c[1].to_owned();
            for cut in [" (", ": "] {
                if let Some((head, _)) = anchor.split_once(cut) {
                    out.insert(head.to_owned());
                }
            }
            out.insert(anchor);
        }
    }
    out
}

/// The citations `(page, section)` in `text`: a page name ending in `.md`
/// (bare, a path, or a Markdown link), an optional `,` or `section`, then
/// the section in double quotes (escaped ones too, as in Rust strings; a
/// page name that ends a string literal, `("docs/X.md", "...")`, is an
/// argument, not a citation: its own test reads that block). A
/// section wrapped over lines reads as one line: comment markers (`///`,
/// `//!`, `//`, `#`) and indentation at the breaks are dropped.
fn citations(text: &str) -> Vec<(String, String)> {
    let cite = Regex::new(
        r#"([A-Za-z-]+\.md)(?:\]\([^)]*\))?(?:\\")?,?\s+(?:section\s+)?\\?"([^"\\]{2,80})\\?""#,
    )
    .unwrap();
    let wrap = Regex::new(r"\s*\n\s*(?://[/!]?|#)?\s*").unwrap();
    cite.captures_iter(text)
        .map(|c| (c[1].to_owned(), wrap.replace_all(&c[2], " ").into_owned()))
        .collect()
}

/// The citations in the files of `dir` (as
/// [`visit_repository_files`](super::docs::visit_repository_files) reads
/// them) that name a page of `pages` and no anchor of it: each as
/// `path: page "section"`.
fn unresolved(dir: &Path, pages: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut found = Vec::new();
    super::docs::visit_repository_files(dir, |p, text| {
        for (page, section) in citations(text) {
            if pages.get(&page).is_some_and(|a| !a.contains(&section)) {
                let rel = p.strip_prefix(dir).unwrap_or(p).display().to_string();
                found.push(format!("{rel}: {page} \"{section}\""));
            }
        }
    });
    found.sort();
    found
}

/// README.md and every page of docs/, by file name, with their anchors.
fn pages(dir: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    let mut files = vec![dir.join("README.md")];
    files.extend(
        std::fs::read_dir(dir.join("docs"))
            .unwrap()
            .flatten()
            .map(|e| e.path()),
    );
    for p in files {
        if p.extension().is_some_and(|x| x == "md") {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            out.insert(name, anchors(&std::fs::read_to_string(&p).unwrap()));
        }
    }
    out
}

#[test]
fn every_cited_section_of_the_docs_exists() {
    let pages = pages(root());
    assert!(pages.len() >= 10, "only {} pages read", pages.len());
    let found = unresolved(root(), &pages);
    assert!(
        found.is_empty(),
        "citations of a section no page has (cite a heading or a bold lead-in that exists):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_citation_test_sees_a_cited_section_that_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("docs")).unwrap();
    std::fs::write(dir.path().join("README.md"), "# Agents\n").unwrap();
    std::fs::write(
        dir.path().join("docs/API.md"),
        "# Notes\n## Errors (all of them)\n- **retry**: later\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("lib.rs"),
        "/// As docs/API.md \"Errors\" and API.md, \"retry\" say; see\n/// docs/API.md \"Rate\n/// limits\" and [API.md](API.md), \"Gone\".\n",
    )
    .unwrap();
    let found = unresolved(dir.path(), &pages(dir.path()));
    assert_eq!(
        found,
        ["lib.rs: API.md \"Gone\"", "lib.rs: API.md \"Rate limits\""]
    );
}
