//! agentctl's exit codes and the one error type every command returns.
//!
//! A command returns `Ok(Exit)` when it ran to its end (0, or 1 when the
//! outcome is a failure: a revision failed, `diff` found changes), or a
//! [`CliError`] carrying the code of what went wrong. Control plane errors
//! are classified once, in [`CliError::plane`].

use std::process::ExitCode;

use agent_operator::controlplane::Error as CpError;
use agent_operator::converge;

/// The exit code table, shown by `agentctl --help` and in docs/AGENTCTL.md.
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0  success
  1  the command completed but the outcome is a failure (a revision ended
     BUILD_FAILED, DEPLOY_FAILED, CREATE_FAILED or INTERRUPTED; `diff` found
     changes; a run ended with an error event)
  2  usage or invalid input (bad flags or YAML, a spec the preflight rules
     refuse, a missing Secret document, missing configuration); nothing sent
  3  the control plane refused the request (4xx: bad key, forbidden, not
     found, conflict, validation) or its state blocks the command
  4  the control plane is unreachable or failing (connection, timeout, 5xx,
     429 after the client's retries)
  5  --wait timed out (the revision or deletion is still in progress)";

/// One exit code of the table [`EXIT_CODES_HELP`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Exit {
    /// 0: success.
    Success = 0,
    /// 1: completed, but the outcome is a failure.
    Failed = 1,
    /// 2: usage or invalid input; nothing was sent.
    Usage = 2,
    /// 3: the control plane refused the request, or its state blocks it.
    Rejected = 3,
    /// 4: the control plane is unreachable or failing.
    Unavailable = 4,
    /// 5: `--wait` timed out.
    TimedOut = 5,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> Self {
        ExitCode::from(e as u8)
    }
}

/// An error with its exit code. The message never holds the API key: the
/// control plane client redacts it from every error it builds.
#[derive(Debug)]
pub struct CliError {
    /// The exit code.
    pub exit: Exit,
    /// What went wrong, with its causes.
    pub error: anyhow::Error,
}

/// The result of a command.
pub type CliResult<T = Exit> = Result<T, CliError>;

impl CliError {
    /// An error with an explicit exit code.
    pub fn new(exit: Exit, error: impl Into<anyhow::Error>) -> Self {
        Self {
            exit,
            error: error.into(),
        }
    }

    /// Usage or invalid input (exit 2).
    pub fn usage(message: impl std::fmt::Display) -> Self {
        Self::new(Exit::Usage, anyhow::anyhow!("{message}"))
    }

    /// The exit code of a control plane error: transient (no answer, 5xx,
    /// 429/503 after retries) → 4; an invalid endpoint (bad URL, key or
    /// workspace that is not a header value) → 2; any other answer → 3.
    pub fn plane_exit(e: &CpError) -> Exit {
        if e.is_transient() {
            Exit::Unavailable
        } else if matches!(e, CpError::InvalidEndpoint(_)) {
            Exit::Usage
        } else {
            Exit::Rejected
        }
    }

    /// A control plane error while doing `what` (see [`CliError::plane_exit`]).
    pub fn plane(what: impl std::fmt::Display, e: CpError) -> Self {
        Self::new(
            Self::plane_exit(&e),
            anyhow::Error::new(e).context(what.to_string()),
        )
    }
}

impl From<converge::Error> for CliError {
    fn from(e: converge::Error) -> Self {
        let exit = match &e {
            converge::Error::Invalid(_) => Exit::Usage,
            converge::Error::ControlPlane { source, .. } => Self::plane_exit(source),
            converge::Error::Blocked(_) => Exit::Rejected,
            converge::Error::AgentServer { source, .. } if source.is_transient() => {
                Exit::Unavailable
            }
            converge::Error::AgentServer { .. } => Exit::Rejected,
        };
        Self::new(exit, e)
    }
}

/// Extension to give any error an exit code.
pub trait OrExit<T> {
    /// Maps the error to a [`CliError`] with `exit` and the context `what`.
    fn or_exit(self, exit: Exit, what: &str) -> CliResult<T>;
}

impl<T, E: Into<anyhow::Error>> OrExit<T> for Result<T, E> {
    fn or_exit(self, exit: Exit, what: &str) -> CliResult<T> {
        self.map_err(|e| CliError::new(exit, e.into().context(what.to_owned())))
    }
}

/// Extension for control plane results.
pub trait PlaneResult<T> {
    /// Maps a control plane error with [`CliError::plane`].
    fn plane(self, what: impl std::fmt::Display) -> CliResult<T>;
}

impl<T> PlaneResult<T> for Result<T, CpError> {
    fn plane(self, what: impl std::fmt::Display) -> CliResult<T> {
        self.map_err(|e| CliError::plane(what, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_plane_errors_map_to_their_codes() {
        let rejected = CpError::Unauthorized {
            detail: "bad key".into(),
        };
        assert_eq!(CliError::plane_exit(&rejected), Exit::Rejected);
        assert_eq!(
            CliError::plane_exit(&CpError::Transport("refused".into())),
            Exit::Unavailable
        );
        assert_eq!(
            CliError::plane_exit(&CpError::Server {
                status: 502,
                detail: String::new()
            }),
            Exit::Unavailable
        );
        assert_eq!(
            CliError::plane_exit(&CpError::InvalidEndpoint("x".into())),
            Exit::Usage
        );
        let e: CliError = converge::Error::Invalid("bad".into()).into();
        assert_eq!(e.exit, Exit::Usage);
        assert!(Exit::TimedOut > Exit::Failed);
    }
}
