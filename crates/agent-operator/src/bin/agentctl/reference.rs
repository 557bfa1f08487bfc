//! `agentctl docs` (hidden): the command reference of docs/AGENTCTL.md,
//! generated from agentctl's clap definition, as `agent-operator docs`
//! generates the operator's flags (`agent_operator::docgen`). Three blocks
//! of the page, between the same markers:
//!
//! - `commands`: every command (`agentctl deployments list`), its
//!   arguments, the first line of its help and its own flags;
//! - `configuration`: the flags every control plane command takes, with
//!   their environment variables and defaults;
//! - `exit-codes`: the exit codes, as `agentctl --help` prints them.
//!
//! `agentctl docs --check` fails on a block that differs from the code; the
//! integration test `reference_docs.rs` runs it.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context as _;
use clap::{ArgAction, Command};

/// The page that holds the blocks, relative to the repository root.
pub const PAGE: &str = "docs/AGENTCTL.md";

/// The blocks of [`PAGE`] this command writes.
pub const BLOCKS: [&str; 3] = ["commands", "configuration", "exit-codes"];

/// The command that declares the configuration flags every control plane
/// command shares (the `configuration` block): `deployments` declares them
/// global for its subcommands, the other commands flatten the same ones.
const PLANE_COMMAND: [&str; 1] = ["deployments"];

/// The content of the block `name` for the command line `cli`.
/// Errors: an unknown block, or a [`PLANE_COMMAND`] the command line lacks.
pub fn block(cli: &Command, name: &str) -> anyhow::Result<String> {
    let plane = find(cli, &PLANE_COMMAND).context("the command of the plane's flags")?;
    Ok(match name {
        "commands" => commands(cli, &shared_flags(plane)),
        "configuration" => configuration(plane),
        "exit-codes" => format!("```text\n{}\n```\n", crate::exit::EXIT_CODES_HELP),
        other => anyhow::bail!("no generated block {other:?}"),
    })
}

/// Rewrites the blocks of [`PAGE`] under `root`, or with `check` returns an
/// error naming those that differ. Errors: the page cannot be read or
/// written, a block's markers are missing, or (with `check`) a block
/// differs.
pub fn docs(cli: &Command, root: &Path, check: bool) -> anyhow::Result<()> {
    let blocks = BLOCKS.map(|name| agent_operator::docgen::Block { page: PAGE, name });
    agent_operator::docgen::write_blocks(root, blocks, check, |name| block(cli, name))
}

/// The subcommand of `cli` at `path`.
fn find<'a>(cli: &'a Command, path: &[&str]) -> Option<&'a Command> {
    path.iter()
        .try_fold(cli, |cmd, name| cmd.find_subcommand(name))
}

/// The long names of the flags of `plane` that carry an environment
/// variable: the configuration every control plane command shares.
fn shared_flags(plane: &Command) -> BTreeSet<String> {
    plane
        .get_arguments()
        .filter(|a| a.get_env().is_some())
        .filter_map(|a| a.get_long().map(str::to_owned))
        .collect()
}

/// The `commands` table: one row per command that runs (its subcommands
/// first), with its arguments, the first line of its help, and its flags
/// less the `shared` ones.
fn commands(cli: &Command, shared: &BTreeSet<String>) -> String {
    let mut rows = Vec::new();
    leaves(cli, "agentctl", &mut rows);
    let mut out = String::from("| Command | What | Flags |\n|---|---|---|\n");
    for (path, cmd) in rows {
        let about = cmd.get_about().map(|a| a.to_string()).unwrap_or_default();
        let flags: Vec<String> = cmd
            .get_arguments()
            .filter(|a| !a.is_hide_set() && !a.is_positional())
            .filter(|a| {
                a.get_long()
                    .is_some_and(|l| !matches!(l, "help" | "version") && !shared.contains(l))
            })
            .map(flag)
            .collect();
        let _ = writeln!(
            out,
            "| `{}` | {} | {} |",
            usage(&path, cmd),
            agent_operator::docgen::cell(&about),
            flags.join(", ")
        );
    }
    out
}

/// The commands under `cmd` that run, with their paths, depth first.
fn leaves<'a>(cmd: &'a Command, path: &str, out: &mut Vec<(String, &'a Command)>) {
    let subs: Vec<&Command> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .collect();
    if subs.is_empty() {
        out.push((path.to_owned(), cmd));
    }
    for sub in subs {
        leaves(sub, &format!("{path} {}", sub.get_name()), out);
    }
}

/// `path` and the positional arguments of `cmd`: `NAME`, `[NAME]` when
/// optional, `NAME...` when repeated.
fn usage(path: &str, cmd: &Command) -> String {
    let mut out = path.to_owned();
    for arg in cmd.get_positionals().filter(|a| !a.is_hide_set()) {
        let name = arg
            .get_value_names()
            .and_then(|n| n.first())
            .map(|n| n.to_string())
            .unwrap_or_else(|| arg.get_id().to_string().to_uppercase());
        let repeated = matches!(arg.get_action(), ArgAction::Append)
            || arg.get_num_args().is_some_and(|n| n.max_values() > 1);
        let name = if repeated { format!("{name}...") } else { name };
        if arg.is_required_set() {
            let _ = write!(out, " {name}");
        } else {
            let _ = write!(out, " [{name}]");
        }
    }
    out
}

/// A flag as the table shows it: `` `--timeout SECONDS` ``, `` `-f/--file FILE` ``.
fn flag(arg: &clap::Arg) -> String {
    let long = arg.get_long().unwrap_or_default();
    let name = match arg.get_short() {
        Some(s) => format!("-{s}/--{long}"),
        None => format!("--{long}"),
    };
    let takes_value = !matches!(
        arg.get_action(),
        ArgAction::SetTrue | ArgAction::SetFalse | ArgAction::Count | ArgAction::Help
    );
    if !takes_value {
        return format!("`{name}`");
    }
    let value = arg
        .get_value_names()
        .and_then(|n| n.first())
        .map(|n| n.to_string())
        .unwrap_or_else(|| long.to_uppercase().replace('-', "_"));
    format!("`{name} {value}`")
}

/// The `configuration` table: the flags of `plane` that carry an
/// environment variable, with their defaults and help.
fn configuration(plane: &Command) -> String {
    let mut only = plane.clone();
    let drop: Vec<String> = plane
        .get_arguments()
        .filter(|a| a.get_env().is_none())
        .map(|a| a.get_id().to_string())
        .collect();
    for id in drop {
        only = only.mut_arg(id, |a| a.hide(true));
    }
    agent_operator::docgen::flags::table(&only)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn every_command_that_runs_has_a_row_and_the_plane_flags_are_shared() {
        let cli = crate::Cli::command();
        let table = block(&cli, "commands").unwrap();
        for row in [
            "| `agentctl apply` |",
            "| `agentctl deployments list` |",
            "| `agentctl completions SHELL` |",
        ] {
            assert!(table.contains(row), "{row} missing from\n{table}");
        }
        assert!(
            !table.contains("agentctl docs"),
            "the hidden command is left out"
        );
        assert!(
            !table.contains("--workspace-id"),
            "the shared configuration is in its own table"
        );
        let config = block(&cli, "configuration").unwrap();
        assert!(config.contains("`AGENT_WORKSPACE_ID`"), "{config}");
        assert!(!config.contains("--name-contains"), "{config}");
    }
}
