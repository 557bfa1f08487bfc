//! The docs as reference: every generated block of a page (the flags, Helm
//! values, metrics, alerts, reasons and benchmark results tables, and
//! agentctl's commands, configuration and exit codes, between
//! `<!-- generated: NAME (make generate) -->` markers) is what the code
//! generates now, and no page or CRD description speaks of how the project
//! was made (sessions, issue numbers, commit hashes outside the generated
//! results) or names a path outside the repository.

use std::path::Path;
use std::process::Command;

use regex::Regex;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// `agent-operator docs --check` fails, naming the block, when a page's
/// block differs from what the code generates: a list changed in the code
/// (a flag, a metric, a reason, a Helm value, an alert, a benchmark row)
/// and not regenerated, or a generated line edited by hand.
#[test]
fn every_generated_block_is_what_the_code_generates() {
    let out = Command::new(env!("CARGO_BIN_EXE_agent-operator"))
        .args(["docs", "--check", "--root"])
        .arg(root())
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("running agent-operator docs --check");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Each block is there and not empty.
    for block in agent_operator::docgen::BLOCKS {
        let page = std::fs::read_to_string(root().join(block.page)).unwrap();
        let content = agent_operator::docgen::block(&page, block.name)
            .unwrap_or_else(|| panic!("{} has no block {}", block.page, block.name));
        assert!(
            content.lines().count() > 2,
            "{}: block {} is empty",
            block.page,
            block.name
        );
    }
}

/// `agentctl docs --check` fails, naming the block, when the command
/// reference of docs/AGENTCTL.md differs from agentctl's command line: run
/// on the repository (passes), then on a copy whose `commands` block lost
/// a row (fails, naming it).
#[test]
fn the_agentctl_reference_is_what_its_command_line_generates() {
    let check = |root: &Path| {
        Command::new(env!("CARGO_BIN_EXE_agentctl"))
            .args(["docs", "--check", "--root"])
            .arg(root)
            .env("RUST_BACKTRACE", "0")
            .output()
            .expect("running agentctl docs --check")
    };
    let out = check(root());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(root().join("docs/AGENTCTL.md")).unwrap();
    let commands = agent_operator::docgen::block(&page, "commands").expect("the commands block");
    assert!(
        commands.contains("| `agentctl deployments list` |"),
        "{commands}"
    );
    let planted = tempfile::tempdir().unwrap();
    std::fs::create_dir(planted.path().join("docs")).unwrap();
    let row = commands
        .lines()
        .find(|l| l.starts_with("| `agentctl redeploy"))
        .expect("the redeploy row");
    std::fs::write(
        planted.path().join("docs/AGENTCTL.md"),
        page.replacen(&format!("{row}\n"), "", 1),
    )
    .unwrap();
    let out = check(planted.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("docs/AGENTCTL.md (block commands)"),
        "a lost row must fail the check: {stderr}"
    );
}

/// The text of `page` outside its generated blocks.
fn hand_written(page: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in page.lines() {
        if line.starts_with("<!-- generated: ") {
            inside = true;
        }
        if !inside {
            out.push_str(line);
            out.push('\n');
        }
        if line.starts_with("<!-- end generated: ") {
            inside = false;
        }
    }
    out
}

/// Words about how the project was made, in `text`: each as `line: match`.
fn making_of(text: &str, crd: bool) -> Vec<String> {
    let mut patterns = vec![
        r"(?i)\bissues? #?[0-9]+",
        r"(?i)\bthe issue\b",
        r"(?i)\bsource: the issue\b",
        r"`[0-9a-f]{7,12}`",
        r"(/work/|\.\./shared/|/root/)",
    ];
    if !crd {
        // The CRDs embed Kubernetes' own schemas (`chapAuthSession`).
        patterns.push(r"(?i)\bsessions?\b");
    }
    let patterns: Vec<Regex> = patterns.iter().map(|p| Regex::new(p).unwrap()).collect();
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        for p in &patterns {
            // `/sessions` is LangSmith's API path of its tracing projects.
            let api_path =
                |m: &regex::Match| m.as_str() == "sessions" && line[..m.start()].ends_with('/');
            if let Some(m) = p.find_iter(line).find(|m| !api_path(m)) {
                // A hex-looking span must hold a digit and a letter.
                let s = m.as_str();
                if s.starts_with('`')
                    && !(s.chars().any(|c| c.is_ascii_digit())
                        && s.chars().any(|c| c.is_ascii_lowercase()))
                {
                    continue;
                }
                found.push(format!("{}: {s}", n + 1));
            }
        }
    }
    found
}

#[test]
fn no_doc_or_crd_description_speaks_of_how_the_project_was_made() {
    let mut pages = vec![root().join("README.md")];
    for dir in ["docs", "crds"] {
        for entry in std::fs::read_dir(root().join(dir)).unwrap() {
            pages.push(entry.unwrap().path());
        }
    }
    let mut found = Vec::new();
    for path in pages {
        let name = path.strip_prefix(root()).unwrap().display().to_string();
        let crd = name.starts_with("crds/");
        if !(name.ends_with(".md") || crd) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for hit in making_of(&hand_written(&text), crd) {
            found.push(format!("{name}:{hit}"));
        }
    }
    assert!(
        found.is_empty(),
        "words about how the project was made (say what the product does; history is in git and CHANGELOG.md):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_words_test_sees_what_it_looks_for() {
    let text = "ok\nAs measured this session at `6b1714c`.\nissue 30 says\n<!-- generated: x (make generate) -->\n`abc1234`\n<!-- end generated: x -->\n";
    let found = making_of(&hand_written(text), false);
    assert_eq!(found, ["2: `6b1714c`", "2: session", "3: issue 30"]);
    assert!(making_of("a `deadbe3f` and `agentctl`", false).len() == 1);
}
