//! The flags reference of a command (`agent-operator run`), generated
//! from its clap definition: the flag, its environment variable, its
//! default and its help, which the doc comments of the flag hold.

use std::fmt::Write as _;

use super::cell;

/// The table of the flags of `command` (`--help` and `--version` left out).
pub fn table(command: &clap::Command) -> String {
    let mut out = String::from("| Flag | Environment | Default | What |\n|---|---|---|---|\n");
    for arg in command.get_arguments() {
        let Some(long) = arg.get_long() else {
            continue;
        };
        if matches!(long, "help" | "version") || arg.is_hide_set() {
            continue;
        }
        let mut flag = format!("`--{long}`");
        let aliases: Vec<String> = arg
            .get_visible_aliases()
            .into_iter()
            .flatten()
            .map(|a| format!("`--{a}`"))
            .collect();
        if !aliases.is_empty() {
            let _ = write!(flag, " (alias {})", aliases.join(", "));
        }
        let takes_list = arg.get_value_delimiter().is_some()
            || matches!(arg.get_action(), clap::ArgAction::Append);
        if takes_list {
            flag.push_str(" (repeatable, or comma-separated)");
        }
        let env = arg
            .get_env()
            .map(|e| format!("`{}`", e.to_string_lossy()))
            .unwrap_or_default();
        let defaults: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        let default = if defaults.is_empty() {
            match arg.get_action() {
                clap::ArgAction::SetTrue => "off".to_owned(),
                _ => "–".to_owned(),
            }
        } else {
            format!("`{}`", defaults.join(","))
        };
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default();
        let _ = writeln!(out, "| {flag} | {env} | {default} | {} |", cell(&help));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, ArgAction, Command};

    #[test]
    fn each_flag_is_a_row_with_its_variable_default_and_help() {
        let command = Command::new("run")
            .arg(
                Arg::new("seconds")
                    .long("seconds")
                    .env("SECONDS_X")
                    .default_value("2")
                    .help("Seconds |between|\npolls."),
            )
            .arg(
                Arg::new("hosts")
                    .long("hosts")
                    .value_delimiter(',')
                    .default_values(["a", "b"])
                    .visible_alias("host"),
            )
            .arg(Arg::new("on").long("on").action(ArgAction::SetTrue));
        let text = table(&command);
        assert!(
            text.contains("| `--seconds` | `SECONDS_X` | `2` | Seconds \\|between\\| polls. |"),
            "{text}"
        );
        assert!(
            text.contains(
                "| `--hosts` (alias `--host`) (repeatable, or comma-separated) |  | `a,b` |  |"
            ),
            "{text}"
        );
        assert!(text.contains("| `--on` |  | off |  |"), "{text}");
        assert!(!text.contains("--help"), "{text}");
    }
}
