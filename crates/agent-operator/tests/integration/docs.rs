//! The documentation stays true: every operator flag is in
//! docs/CONFIGURATION.md (every example through the real API server and
//! agentctl: `shipped_manifests.rs`), every relative link of the docs
//! points at a file that exists, and README.md and docs/*.md name only
//! repository paths, `make` targets, flags of the project's binaries and
//! `kubectl get` columns that exist. No file of the repository cites the
//! API notes that used to live outside it: docs/control-plane-api.md is
//! the one source.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::CommandFactory;
use regex::Regex;

fn root() -> &'static Path {
    test_support::repo_root()
}

/// README.md and docs/*.md, each with its text.
fn markdown_files() -> Vec<(String, String)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.push(root().join("README.md"));
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p.strip_prefix(root()).unwrap().display().to_string();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect()
}

/// The lines of a Markdown text inside fenced code blocks, each with the
/// index of its block.
fn code_lines(text: &str) -> Vec<(usize, &str)> {
    let (mut inside, mut block, mut out) = (false, 0, Vec::new());
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            inside = !inside;
            block += 1;
        } else if inside {
            out.push((block, line));
        }
    }
    out
}

/// Inline code spans (`...`) of a Markdown text, outside fenced blocks.
fn code_spans(text: &str) -> Vec<String> {
    let mut inside = false;
    let mut spans = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            inside = !inside;
            continue;
        }
        if !inside {
            spans.extend(line.split('`').skip(1).step_by(2).map(str::to_owned));
        }
    }
    spans
}

#[test]
fn every_operator_flag_is_documented() {
    let out = Command::new(env!("CARGO_BIN_EXE_agent-operator"))
        .args(["run", "--help"])
        .output()
        .expect("running agent-operator run --help");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    let doc = std::fs::read_to_string(root().join("docs/CONFIGURATION.md")).unwrap();
    let flags: Vec<&str> = help
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("--"))
        .filter_map(|l| l.split([' ', '<']).next())
        .filter(|f| *f != "help")
        .collect();
    assert!(flags.len() >= 10, "{help}");
    let missing: Vec<&&str> = flags
        .iter()
        .filter(|f| !doc.contains(&format!("`--{f}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "flags missing from docs/CONFIGURATION.md: {missing:?}"
    );
}

/// The environment variable and default of every flag in the table of
/// docs/CONFIGURATION.md are those `agent-operator run --help` prints
/// (issue "A platform team installs it…", item 7: a default quoted in the
/// docs is the code's default). A default the help does not print (a
/// computed one such as "the resync interval") is not compared.
#[test]
fn configuration_defaults_and_variables_are_the_codes() {
    let out = Command::new(env!("CARGO_BIN_EXE_agent-operator"))
        .args(["run", "--help"])
        .output()
        .expect("running agent-operator run --help");
    let help = String::from_utf8_lossy(&out.stdout);
    // flag -> (env, default) as the help prints them.
    let mut from_help: BTreeMap<String, (Option<String>, Option<String>)> = BTreeMap::new();
    let mut flag = None;
    for line in help.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("--") {
            let name = rest.split([' ', '<', ',']).next().unwrap_or_default();
            flag = Some(name.to_owned());
            from_help.entry(name.to_owned()).or_default();
        } else if let Some(f) = &flag {
            let entry = from_help.get_mut(f).unwrap();
            if let Some(env) = line.strip_prefix("[env: ") {
                entry.0 = env.split('=').next().map(str::to_owned);
            } else if let Some(default) = line.strip_prefix("[default: ") {
                entry.1 = Some(default.trim_end_matches(']').to_owned());
            }
        }
    }
    let doc = std::fs::read_to_string(root().join("docs/CONFIGURATION.md")).unwrap();
    let mut compared = 0;
    let mut wrong = Vec::new();
    for row in doc.lines().filter(|l| l.starts_with("| `--")) {
        let cells: Vec<&str> = row.split(" | ").collect();
        let flag = cells[0].trim_start_matches("| `--");
        let flag = &flag[..flag.find('`').unwrap()];
        let Some((env, default)) = from_help.get(flag) else {
            wrong.push(format!("--{flag}: not a flag of `agent-operator run`"));
            continue;
        };
        let doc_env = cells[1].split('`').nth(1).map(str::to_owned);
        if &doc_env != env {
            wrong.push(format!("--{flag}: docs say {doc_env:?}, the help {env:?}"));
        }
        if let Some(default) = default {
            // A list default: comma-separated in the docs, as the
            // variable takes it; space-separated in the help.
            let doc_default = cells[2].trim().trim_matches('`').replace(',', " ");
            if &doc_default != default {
                wrong.push(format!(
                    "--{flag}: default {doc_default:?} in the docs, {default:?} in the code"
                ));
            }
            compared += 1;
        }
    }
    assert!(compared >= 15, "only {compared} defaults compared");
    assert!(
        wrong.is_empty(),
        "docs/CONFIGURATION.md:\n{}",
        wrong.join("\n")
    );
}

/// Every Helm value a doc sets (`--set`, `--set-json`, `--set-string`) is
/// a value of the chart's values.yaml, so that a renamed value fails here
/// rather than in a user's install.
#[test]
fn docs_set_only_helm_values_that_exist() {
    let values: serde_json::Value = yaml_serde::from_str(
        &std::fs::read_to_string(root().join("deploy/helm/agent-operator/values.yaml")).unwrap(),
    )
    .unwrap();
    let set = Regex::new(r#"--set(?:-json|-string)?[ =]'?"?([A-Za-z0-9_.]+)="#).unwrap();
    let mut seen = 0;
    let mut unknown = Vec::new();
    for (name, text) in markdown_files() {
        for (block, code) in code_lines(&text) {
            for c in set.captures_iter(code) {
                seen += 1;
                let path = &c[1];
                let found = path
                    .split('.')
                    .try_fold(&values, |v, key| v.get(key))
                    .is_some();
                if !found {
                    unknown.push(format!("{name}, code block {block}: {path}"));
                }
            }
        }
    }
    assert!(seen >= 3, "only {seen} --set found");
    assert!(
        unknown.is_empty(),
        "Helm values the chart does not have:\n{}",
        unknown.join("\n")
    );
}

/// Relative links `](path)` of the Markdown files under docs/ and README.md.
#[test]
fn relative_links_of_the_docs_resolve() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.push(root().join("README.md"));
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for part in text.split("](").skip(1) {
            let target = part.split(')').next().unwrap_or("");
            let path = target.split('#').next().unwrap_or("");
            // Only plain relative paths (not URLs, not regex text in tables).
            let plain = path
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c));
            if path.is_empty() || !plain {
                continue;
            }
            if !file.parent().unwrap().join(path).exists() {
                broken.push(format!("{}: {target}", file.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links: {broken:#?}");
}

/// Paths under the repository's top-level directories that README.md or a
/// doc names (in prose, code or links, root-relative) exist. Paths with a
/// placeholder (`{`, `*`, `<`, `...`) and parts of longer paths or URLs
/// (preceded by `/`, `.` or a word character) are not checked.
#[test]
fn docs_name_only_paths_that_exist() {
    let path = Regex::new(r"(?:crates|docs|deploy|hack|examples|crds|fuzz)/[A-Za-z0-9_.{}*<>/-]*")
        .unwrap();
    let mut missing = Vec::new();
    let mut checked = 0;
    for (file, text) in markdown_files() {
        for m in path.find_iter(&text) {
            let before = text[..m.start()].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || "/._-~$".contains(c)) {
                continue;
            }
            let p = m.as_str().trim_end_matches('.');
            if p.contains(['{', '*', '<', '>']) || p.contains("...") {
                continue;
            }
            checked += 1;
            if !root().join(p).exists() {
                missing.push(format!("{file}: {p}"));
            }
        }
    }
    assert!(
        checked >= 50,
        "only {checked} paths found: is the pattern right?"
    );
    assert!(
        missing.is_empty(),
        "docs name paths that do not exist: {missing:#?}"
    );
}

/// The targets of the Makefile (`name:` at the start of a line).
fn make_targets() -> BTreeSet<String> {
    let target = Regex::new(r"(?m)^([A-Za-z0-9_-]+):([^=]|$)").unwrap();
    let makefile = std::fs::read_to_string(root().join("Makefile")).unwrap();
    target
        .captures_iter(&makefile)
        .map(|c| c[1].to_owned())
        .collect()
}

/// The target a `make ...` command names: its first argument that is
/// neither an option nor a `VAR=value` assignment.
fn make_target_of(command: &str) -> Option<&str> {
    let mut words = command.split_whitespace();
    while let Some(w) = words.next() {
        if w == "make" {
            return words.find(|w| !w.starts_with('-') && !w.contains('='));
        }
        if !w.contains('=') && w != "$" {
            return None;
        }
    }
    None
}

/// Every `make TARGET` of README.md and docs/*.md (in a code span, or a
/// command line of a code block) is a target of the Makefile.
#[test]
fn docs_name_only_make_targets_that_exist() {
    let targets = make_targets();
    assert!(
        targets.contains("test") && targets.contains("demo"),
        "{targets:?}"
    );
    let mut unknown = Vec::new();
    let mut checked = 0;
    for (file, text) in markdown_files() {
        let commands = code_spans(&text)
            .into_iter()
            .chain(code_lines(&text).into_iter().map(|(_, l)| l.to_owned()));
        for command in commands {
            for part in command.split(['|', ';', '&', '(']) {
                if let Some(t) = make_target_of(part.trim()) {
                    checked += 1;
                    let t = t.trim_end_matches(['`', ',', '.', ')']);
                    if !targets.contains(t) {
                        unknown.push(format!("{file}: make {t}"));
                    }
                }
            }
        }
    }
    assert!(checked >= 10, "only {checked} make commands found");
    assert!(
        unknown.is_empty(),
        "docs name make targets the Makefile lacks: {unknown:#?}"
    );
}

/// The long flags (and visible aliases) of a binary and all its
/// subcommands, read from `--help`.
fn binary_flags(binary: &str) -> BTreeSet<String> {
    fn walk(binary: &str, path: &mut Vec<String>, flags: &mut BTreeSet<String>) {
        let out = Command::new(binary)
            .args(path.iter())
            .arg("--help")
            .output()
            .expect("running --help");
        assert!(out.status.success(), "{binary} {path:?} --help failed");
        let help = String::from_utf8_lossy(&out.stdout).into_owned();
        let flag = Regex::new(r"--[a-z][a-z0-9-]*").unwrap();
        let mut subcommands = Vec::new();
        let mut in_commands = false;
        for line in help.lines() {
            let trimmed = line.trim_start();
            if line.starts_with("Commands:") {
                in_commands = true;
                continue;
            }
            if in_commands {
                match trimmed.split_whitespace().next() {
                    Some(name) if line.starts_with("  ") && name != "help" => {
                        subcommands.push(name.to_owned())
                    }
                    Some(_) => {}
                    None => in_commands = false,
                }
                continue;
            }
            // An option line (`-f, --file <F>`, `--wait`) or a visible alias.
            let definition = trimmed.starts_with('-')
                || trimmed.starts_with("[alias")
                || trimmed.contains("[alias:")
                || trimmed.contains("[aliases:");
            if definition {
                let end = if trimmed.starts_with('-') {
                    trimmed.find("  ").unwrap_or(trimmed.len())
                } else {
                    trimmed.len()
                };
                let part = if trimmed.starts_with('-') {
                    &trimmed[..end]
                } else {
                    &trimmed[trimmed.find("[alias").unwrap()..]
                };
                flags.extend(flag.find_iter(part).map(|m| m.as_str().to_owned()));
            }
        }
        for sub in subcommands {
            path.push(sub);
            walk(binary, path, flags);
            path.pop();
        }
    }
    let mut flags = BTreeSet::new();
    walk(binary, &mut Vec::new(), &mut flags);
    flags
}

/// Long flags of the emulator, from its clap definition.
fn emulator_flags() -> BTreeSet<String> {
    let command = control_plane_emulator::cli::Args::command();
    let mut flags = BTreeSet::from(["--help".to_owned(), "--version".to_owned()]);
    for arg in command.get_arguments() {
        flags.extend(arg.get_long().map(|l| format!("--{l}")));
        flags.extend(
            arg.get_all_aliases()
                .into_iter()
                .flatten()
                .map(|a| format!("--{a}")),
        );
    }
    flags
}

/// Flags the fleet benchmark and `testenv` (crates/test-support/src/bin)
/// parse: their clap fields marked `#[arg(long)]`
/// (or `long = "x"`), and string literals `"--x"` of their source.
fn bench_flags() -> BTreeSet<String> {
    let literal = Regex::new(r#""(--[a-z][a-z0-9-]*)"#).unwrap();
    let field = Regex::new(
        r#"#\[arg\(([^\]]*)\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub\s+)?([a-z_][a-z0-9_]*)\s*:"#,
    )
    .unwrap();
    let long = Regex::new(r#"\blong\s*=\s*"([a-z0-9-]+)""#).unwrap();
    let bare_long = Regex::new(r"\blong\b").unwrap();
    let mut flags = BTreeSet::new();
    let mut dirs = vec![
        root().join("crates/agent-operator/benches"),
        root().join("crates/test-support/src/bin"),
    ];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let p = entry.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).unwrap();
                flags.extend(literal.captures_iter(&text).map(|c| c[1].to_owned()));
                for c in field.captures_iter(&text) {
                    if let Some(l) = long.captures(&c[1]) {
                        flags.insert(format!("--{}", &l[1]));
                    } else if bare_long.is_match(&c[1]) {
                        flags.insert(format!("--{}", c[2].replace('_', "-")));
                    }
                }
            }
        }
    }
    flags
}

/// Flags of other programs that the docs show (kubectl, helm, cargo and the
/// test harness, langgraph, kube-apiserver). A flag here is never checked;
/// add one only for a command that is not the project's.
const OTHER_PROGRAMS_FLAGS: &[&str] = &[
    // kubectl
    "--server-side",
    "--for",
    "--timeout",
    "--dry-run",
    "--field-selector",
    "--overwrite",
    "--from-literal",
    "--from-file",
    "--all",
    "--recursive",
    "--output",
    "--selector",
    "--namespace",
    "--all-namespaces",
    "--watch",
    "--type",
    "--sort-by",
    // helm
    "--set",
    "--set-json",
    "--create-namespace",
    "--strict",
    "--values",
    "--api-versions",
    "--reuse-values",
    // cargo and the libtest harness
    "--test",
    "--release",
    "--bins",
    "--bin",
    "--all-targets",
    "--workspace",
    "--locked",
    "--target",
    "--nocapture",
    "--bench",
    "--package",
    "--manifest-path",
    "--lib",
    // langgraph dev
    "--no-browser",
    "--no-reload",
    "--host",
    "--port",
    // kube-apiserver
    "--max-requests-inflight",
    "--max-mutating-requests-inflight",
    "--authorization-mode",
    "--watch-cache",
    // setpriv
    "--pdeathsig",
    // hack/envtest/install.sh: the oldest supported kube-apiserver
    "--oldest",
    // the official langgraph CLI (docs/control-plane-api.md)
    "--image-uri",
];

/// The flags each command of a line passes to `agentctl` or
/// `agent-operator`: a command (split at `|`, `;`, `&`, `#`) whose program,
/// after a `$ ` prompt and `VAR=value` assignments, is one of them (by any
/// path), or `cargo run ... --bin NAME -- ARGS`.
fn invocations(line: &str) -> Vec<(&'static str, Vec<String>)> {
    let mut out = Vec::new();
    for command in line.split(['|', ';', '&', '#']) {
        let words: Vec<&str> = command
            .split_whitespace()
            .skip_while(|w| *w == "$" || (w.contains('=') && !w.starts_with('-')))
            .collect();
        let Some(first) = words.first() else { continue };
        let (program, args) = if *first == "cargo" {
            let Some(bin) = words.windows(2).position(|w| w[0] == "--bin") else {
                continue;
            };
            let Some(dashes) = words.iter().position(|w| *w == "--") else {
                continue;
            };
            (words[bin + 1], &words[dashes + 1..])
        } else {
            (first.rsplit('/').next().unwrap_or(first), &words[1..])
        };
        let name = match program {
            "agentctl" => "agentctl",
            "agent-operator" => "agent-operator",
            _ => continue,
        };
        let flags = args
            .iter()
            .filter(|a| a.starts_with("--") && a.len() > 2)
            .map(|a| a.split(['=', '`', ',', ')']).next().unwrap().to_owned())
            .collect();
        out.push((name, flags));
    }
    out
}

/// Every `--flag` of README.md and docs/*.md is a flag of one of the
/// project's binaries (agent-operator, agentctl, control-plane-emulator, the
/// fleet benchmark) or of another program listed in
/// [`OTHER_PROGRAMS_FLAGS`]; a command line that runs `agentctl` or
/// `agent-operator` passes only flags that binary has.
#[test]
fn docs_name_only_flags_that_exist() {
    let operator = binary_flags(env!("CARGO_BIN_EXE_agent-operator"));
    let agentctl = binary_flags(env!("CARGO_BIN_EXE_agentctl"));
    assert!(operator.contains("--poll-interval-seconds"), "{operator:?}");
    assert!(
        operator.contains("--health-addr"),
        "visible aliases: {operator:?}"
    );
    assert!(
        agentctl.contains("--secret-from-env") && agentctl.contains("--graph-id"),
        "{agentctl:?}"
    );
    let mut known: BTreeSet<String> = operator.union(&agentctl).cloned().collect();
    known.extend(emulator_flags());
    known.extend(bench_flags());
    known.extend(OTHER_PROGRAMS_FLAGS.iter().map(|f| (*f).to_owned()));
    let by_binary = BTreeMap::from([("agent-operator", &operator), ("agentctl", &agentctl)]);

    let any_flag = Regex::new(r"(?:^|[^A-Za-z0-9_/-])(--[a-z][a-z0-9-]*)").unwrap();
    let mut unknown = BTreeSet::new();
    let mut invoked = 0;
    for (file, text) in markdown_files() {
        for c in any_flag.captures_iter(&text) {
            if !known.contains(&c[1]) {
                unknown.insert(format!("{file}: {}", &c[1]));
            }
        }
        let commands = code_spans(&text)
            .into_iter()
            .chain(code_lines(&text).into_iter().map(|(_, l)| l.to_owned()));
        for command in commands {
            for (binary, flags) in invocations(&command) {
                invoked += 1;
                for f in flags {
                    if !by_binary[binary].contains(&f) {
                        unknown.insert(format!("{file}: {binary} {f}"));
                    }
                }
            }
        }
    }
    assert!(invoked >= 10, "only {invoked} invocations found");
    assert!(
        unknown.is_empty(),
        "docs name flags no binary has: {unknown:#?}"
    );
}

/// The `kubectl get` columns of each kind, upper-cased as kubectl prints
/// them, keyed by every name kubectl accepts for the kind (plural, singular,
/// kind, short names, categories).
fn printer_columns() -> BTreeMap<String, BTreeSet<String>> {
    let mut by_name: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for entry in std::fs::read_dir(root().join("crds")).unwrap().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap();
        let crd: serde_json::Value = yaml_serde::from_str(&text).unwrap();
        let mut columns = BTreeSet::from(["NAME".to_owned(), "NAMESPACE".to_owned()]);
        for version in crd["spec"]["versions"].as_array().unwrap() {
            for column in version["additionalPrinterColumns"]
                .as_array()
                .into_iter()
                .flatten()
            {
                columns.insert(column["name"].as_str().unwrap().to_uppercase());
            }
        }
        let names = &crd["spec"]["names"];
        let mut aliases: Vec<String> = ["plural", "singular", "kind"]
            .iter()
            .filter_map(|k| names[k].as_str().map(str::to_lowercase))
            .collect();
        for list in ["shortNames", "categories"] {
            aliases.extend(
                names[list]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(str::to_owned)),
            );
        }
        for alias in aliases {
            by_name
                .entry(alias)
                .or_default()
                .extend(columns.iter().cloned());
        }
    }
    by_name
}

/// The header of every `kubectl get` output of the project's kinds in
/// README.md and docs/*.md, and every column named in prose ("the `X`
/// column", "columns `X`, `Y`", "adds `X`"), is a printer column of the
/// CRDs.
#[test]
fn docs_name_only_printer_columns_that_exist() {
    let columns = printer_columns();
    assert!(columns["agd"].contains("STATUS"), "{columns:?}");
    let all: BTreeSet<String> = columns.values().flatten().cloned().collect();
    let header = Regex::new(r"^\s*(?:NAMESPACE\s+)?NAME(?:\s+[A-Z][A-Z0-9-]*)+\s*$").unwrap();
    let get = Regex::new(r"kubectl get ([A-Za-z.,/-]+)").unwrap();
    let prose_before = Regex::new(r"`([A-Z][A-Z0-9-]*)` columns?\b").unwrap();
    let prose_after = Regex::new(
        r"(?:\bcolumns?:?|\badds) ((?:`[A-Z][A-Z0-9-]*`(?: \([a-z]+\))?(?:,? and |, )?)+)",
    )
    .unwrap();
    let token = Regex::new(r"`([A-Z][A-Z0-9-]*)`").unwrap();
    let mut wrong = Vec::new();
    let mut headers = 0;
    for (file, text) in markdown_files() {
        // Output blocks: the header after a `kubectl get` of our kinds.
        let mut allowed: Option<BTreeSet<String>> = None;
        let mut block = usize::MAX;
        for (b, line) in code_lines(&text) {
            if b != block {
                (block, allowed) = (b, None);
            }
            if let Some(c) = get.captures(line) {
                let kinds: Vec<String> = c[1]
                    .split(',')
                    .map(|k| k.split(['/', '.']).next().unwrap_or("").to_lowercase())
                    .collect();
                allowed = kinds.iter().all(|k| columns.contains_key(k)).then(|| {
                    kinds
                        .iter()
                        .flat_map(|k| columns[k].iter().cloned())
                        .collect()
                });
                continue;
            }
            if let Some(allowed) = &allowed
                && header.is_match(line)
            {
                headers += 1;
                for word in line.split_whitespace().filter(|w| !allowed.contains(*w)) {
                    wrong.push(format!("{file}: column {word} in `{}`", line.trim()));
                }
            }
        }
        // Prose.
        for line in text.lines() {
            let mut named: Vec<String> = prose_before
                .captures_iter(line)
                .map(|c| c[1].to_owned())
                .collect();
            for c in prose_after.captures_iter(line) {
                named.extend(token.captures_iter(&c[1]).map(|t| t[1].to_owned()));
            }
            for n in named.into_iter().filter(|n| !all.contains(n)) {
                wrong.push(format!("{file}: column {n}"));
            }
        }
    }
    assert!(headers >= 1, "no `kubectl get` output found in the docs");
    assert!(
        wrong.is_empty(),
        "docs name columns the CRDs do not have: {wrong:#?}"
    );
}

/// Calls `visit` with each file below `dir` and its text (bytes that are
/// not UTF-8 replaced), one file at a time, build output, caches and git's
/// own directory left out; returns how many files it read.
pub(crate) fn visit_repository_files(dir: &Path, mut visit: impl FnMut(&Path, &str)) -> usize {
    let mut files = 0;
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let p = entry.path();
            if p.is_dir() {
                if !matches!(
                    entry.file_name().to_str(),
                    Some("target" | ".cache" | ".git")
                ) {
                    dirs.push(p);
                }
                continue;
            }
            if let Ok(bytes) = std::fs::read(&p) {
                files += 1;
                visit(&p, &String::from_utf8_lossy(&bytes));
            }
        }
    }
    files
}

/// No file of the repository (outside target/, .cache/ and .git/) cites
/// the API notes that lived outside it, or any path of the `shared`
/// directory beside the repository: the repository stands alone, and
/// docs/control-plane-api.md is the source.
#[test]
fn no_file_cites_a_source_outside_the_repository() {
    // Spelled in pieces, so that this file does not match itself.
    let needles = [
        ["api-", "facts.md"].concat(),
        ["control-plane-and-", "agent-server.md"].concat(),
        ["../", "shared/"].concat(),
    ];
    let mut found = Vec::new();
    let files = visit_repository_files(root(), |p, text| {
        for (n, line) in text.lines().enumerate() {
            for needle in &needles {
                if line.contains(needle.as_str()) {
                    let rel = p.strip_prefix(root()).unwrap().display();
                    found.push(format!("{rel}:{}: {needle}", n + 1));
                }
            }
        }
    });
    assert!(files >= 100, "only {files} files scanned");
    assert!(
        found.is_empty(),
        "files cite sources outside the repository (cite a section of docs/control-plane-api.md instead): {found:#?}"
    );
}
