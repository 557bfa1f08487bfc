//! The log tail of a failed revision: which log explains the failure, and
//! the short, secret-free text that goes into the `Stalled` condition and the
//! `RevisionFailed` Warning event. Pure; the one read is in the reconciler.
//!
//! Source: docs/control-plane-api.md "Logs" (`build_logs` of a revision, `deploy_logs`; "the CLI
//! prints the last 30 build lines when a revision ends `BUILD_FAILED`"). A
//! condition message and an event note are read by people in `kubectl
//! describe` and by Argo CD and Flux, and an event note is refused by the API
//! server above 1 KiB, so the tail is short: at most [`TAIL_LINES`] lines of
//! at most [`LINE_CHARS`] characters, [`TAIL_CHARS`] in all, oldest first.

use secrecy::SecretString;

use crate::controlplane::types::{LogEntry, RevisionStatus};

/// Lines asked for, and most lines shown.
pub const TAIL_LINES: u32 = 8;
/// Most characters of one line shown (longer lines end with `…`).
pub const LINE_CHARS: usize = 160;
/// Most bytes of the whole tail (older lines are dropped first).
pub const TAIL_CHARS: usize = 640;

/// The log that explains a failed revision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureLog {
    /// The build log (`BUILD_FAILED`).
    Build,
    /// The server log of the revision (`DEPLOY_FAILED`).
    Deploy,
}

impl FailureLog {
    /// The log for a revision that ended in `status`, if one explains it.
    pub fn of(status: &RevisionStatus) -> Option<Self> {
        match status {
            RevisionStatus::BuildFailed => Some(Self::Build),
            RevisionStatus::DeployFailed => Some(Self::Deploy),
            _ => None,
        }
    }

    /// `build log` or `deploy log`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Build => "build log",
            Self::Deploy => "deploy log",
        }
    }
}

/// One line made fit for a condition (and for `agentctl`'s failure tail):
/// control characters and ANSI escape sequences removed, trimmed, secrets
/// redacted, cut at [`LINE_CHARS`].
pub fn clean(line: &str, secrets: &[SecretString]) -> String {
    let mut plain = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI `ESC [ ... final-byte`; any other escape drops one char.
            if chars.next_if_eq(&'[').is_some() {
                for n in chars.by_ref() {
                    if ('@'..='~').contains(&n) {
                        break;
                    }
                }
            } else {
                chars.next();
            }
        } else if c == '\t' {
            plain.push(' ');
        } else if !c.is_control() {
            plain.push(c);
        }
    }
    let redacted = crate::redact::text(plain.trim(), secrets);
    if redacted.chars().count() > LINE_CHARS {
        let mut cut: String = redacted.chars().take(LINE_CHARS - 1).collect();
        cut.push('…');
        cut
    } else {
        redacted
    }
}

/// The tail to show from `newest_first` (an answer with `order: desc`):
/// oldest first, one line per entry, blank lines skipped, within
/// [`TAIL_LINES`] and [`TAIL_CHARS`]. `None` when nothing is left.
pub fn tail(newest_first: &[LogEntry], secrets: &[SecretString]) -> Option<String> {
    let mut kept: Vec<String> = Vec::new();
    let mut total = 0;
    for entry in newest_first {
        let line = clean(&entry.message, secrets);
        if line.is_empty() {
            continue;
        }
        let len = line.len() + 1;
        if kept.len() == TAIL_LINES as usize || total + len > TAIL_CHARS {
            break;
        }
        total += len;
        kept.push(line);
    }
    kept.reverse();
    (!kept.is_empty()).then(|| kept.join("\n"))
}

/// The failure message with what the log says: the tail, that the log is
/// empty, or why it could not be read (the read is not repeated).
pub fn explained(base: &str, log: FailureLog, read: Result<Option<String>, String>) -> String {
    let name = log.name();
    match read {
        Ok(Some(t)) => format!("{base}. Last lines of the {name}:\n{t}"),
        Ok(None) => format!("{base}. The {name} is empty"),
        Err(e) => format!("{base}. The {name} could not be read: {e}"),
    }
}

/// The message a later pass keeps for the same failed revision: the one in
/// `previous` if it explains `base` (it holds the tail read when the
/// revision ended), else `base`. So a steady failure causes no status write
/// and no second log read.
pub fn kept(base: &str, previous: Option<&str>) -> String {
    match previous {
        Some(p)
            if p.len() > base.len() && p.starts_with(base) && p[base.len()..].starts_with(". ") =>
        {
            p.to_owned()
        }
        _ => base.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(message: &str) -> LogEntry {
        LogEntry {
            id: None,
            timestamp: None,
            level: Some("ERROR".into()),
            message: message.into(),
        }
    }

    #[test]
    fn which_log_explains_which_status() {
        assert_eq!(
            FailureLog::of(&RevisionStatus::BuildFailed),
            Some(FailureLog::Build)
        );
        assert_eq!(
            FailureLog::of(&RevisionStatus::DeployFailed),
            Some(FailureLog::Deploy)
        );
        assert_eq!(FailureLog::of(&RevisionStatus::CreateFailed), None);
        assert_eq!(FailureLog::of(&RevisionStatus::Deployed), None);
    }

    #[test]
    fn tail_is_oldest_first_clean_short_and_secret_free() {
        let key = SecretString::from("sk-live-123456");
        let newest_first = [
            entry("build failed"),
            entry(""),
            entry("\u{1b}[31merror:\u{1b}[0m token sk-live-123456 refused\r"),
            entry("installing\tdependencies"),
        ];
        assert_eq!(
            tail(&newest_first, &[key]).unwrap(),
            "installing dependencies\nerror: token [REDACTED] refused\nbuild failed"
        );
        assert_eq!(tail(&[entry("  ")], &[]), None);
    }

    #[test]
    fn tail_keeps_the_newest_lines_within_the_limits() {
        let long = "x".repeat(500);
        let many: Vec<LogEntry> = (0..20).rev().map(|i| entry(&format!("line {i}"))).collect();
        let t = tail(&many, &[]).unwrap();
        assert_eq!(t.lines().count(), TAIL_LINES as usize);
        assert_eq!(t.lines().last(), Some("line 19"));
        assert_eq!(t.lines().next(), Some("line 12"));
        let t = tail(
            &[
                entry(&long),
                entry(&long),
                entry(&long),
                entry(&long),
                entry(&long),
            ],
            &[],
        )
        .unwrap();
        assert!(
            t.lines()
                .all(|l| l.chars().count() == LINE_CHARS && l.ends_with('…'))
        );
        assert!(t.len() <= TAIL_CHARS, "{}", t.len());
    }

    #[test]
    fn explained_and_kept_messages() {
        let base = "revision r1 ended in BUILD_FAILED; change the spec or request a redeploy";
        let with = explained(base, FailureLog::Build, Ok(Some("a\nb".into())));
        assert_eq!(with, format!("{base}. Last lines of the build log:\na\nb"));
        assert_eq!(
            explained(base, FailureLog::Deploy, Ok(None)),
            format!("{base}. The deploy log is empty")
        );
        assert!(explained(base, FailureLog::Build, Err("404".into())).ends_with("read: 404"));
        assert_eq!(kept(base, Some(&with)), with);
        assert_eq!(kept(base, Some("revision r0 ended in BUILD_FAILED")), base);
        assert_eq!(kept(base, None), base);
        assert_eq!(kept(base, Some(base)), base);
    }
}
