//! Child processes (etcd, kube-apiserver) that never outlive this process.
//!
//! Two mechanisms, because either alone leaks in some case:
//! - every child is started as `setpriv --pdeathsig KILL -- <binary> ...`, so the
//!   kernel sends it SIGKILL when its parent dies, even on `SIGKILL` of the test
//!   binary or a panic that skips destructors;
//! - [`ManagedProcess`] kills and reaps the child on drop, for the normal path.
//!
//! Linux delivers PDEATHSIG when the *thread* that forked the child exits, not
//! the process. Test runners and tokio's blocking pool end threads all the time,
//! so every child is forked by one dedicated thread that lives until the
//! process exits (see [`spawn_from_long_lived_thread`]).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;

use super::EnvTestError;

/// How many bytes of a log file [`ManagedProcess::log_tail`] reads at most.
const LOG_TAIL_BYTES: u64 = 64 * 1024;

type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Forks `command` from a thread that lives as long as the process, so that the
/// child's PDEATHSIG fires only when the whole process exits.
fn spawn_from_long_lived_thread(command: Command) -> std::io::Result<Child> {
    static SPAWNER: OnceLock<std::io::Result<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("envtest-spawner".to_owned())
            .spawn(move || {
                // The sender lives in a static, so this loop never ends: the
                // thread (the children's parent for PDEATHSIG) exits with the process.
                for (mut command, reply) in rx {
                    let _ = reply.send(command.spawn());
                }
            })
            .map(|_| tx)
    });
    let spawner = spawner
        .as_ref()
        .map_err(|e| std::io::Error::new(e.kind(), format!("starting the spawner thread: {e}")))?;
    let (reply_tx, reply_rx) = mpsc::channel();
    spawner
        .send((command, reply_tx))
        .map_err(|_| std::io::Error::other("the envtest spawner thread is gone"))?;
    reply_rx
        .recv()
        .map_err(|_| std::io::Error::other("the envtest spawner thread dropped the request"))?
}

/// A child process whose output goes to a log file; killed (SIGKILL) and reaped on drop.
pub(crate) struct ManagedProcess {
    name: &'static str,
    child: Option<Child>,
    log: PathBuf,
}

impl ManagedProcess {
    /// Starts `binary args...` under `setpriv --pdeathsig KILL`, with stdout and
    /// stderr appended to `log`.
    ///
    /// Errors: [`EnvTestError::SetprivMissing`] when `setpriv` is not on PATH;
    /// [`EnvTestError::Io`] when the log file cannot be created or the spawn fails.
    pub(crate) fn spawn(
        name: &'static str,
        binary: &Path,
        args: &[String],
        log: PathBuf,
    ) -> Result<Self, EnvTestError> {
        let stdout =
            File::create(&log).map_err(EnvTestError::io(format!("creating {}", log.display())))?;
        Self::spawn_to(name, binary, args, log, stdout)
    }

    /// Like [`spawn`](Self::spawn), appending to `log` instead of truncating
    /// it (a process started again keeps the earlier output).
    pub(crate) fn spawn_appending(
        name: &'static str,
        binary: &Path,
        args: &[String],
        log: PathBuf,
    ) -> Result<Self, EnvTestError> {
        let stdout = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(EnvTestError::io(format!("opening {}", log.display())))?;
        Self::spawn_to(name, binary, args, log, stdout)
    }

    fn spawn_to(
        name: &'static str,
        binary: &Path,
        args: &[String],
        log: PathBuf,
        stdout: File,
    ) -> Result<Self, EnvTestError> {
        let stderr = stdout
            .try_clone()
            .map_err(EnvTestError::io(format!("opening {}", log.display())))?;
        let mut command = Command::new("setpriv");
        command
            .arg("--pdeathsig")
            .arg("KILL")
            .arg("--")
            .arg(binary)
            .args(args)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr);
        tracing::debug!(name, binary = %binary.display(), ?args, "starting");
        let child = spawn_from_long_lived_thread(command).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                EnvTestError::SetprivMissing(e)
            } else {
                EnvTestError::Io {
                    context: format!("starting {name} ({})", binary.display()),
                    source: e,
                }
            }
        })?;
        Ok(Self {
            name,
            child: Some(child),
            log,
        })
    }

    /// `etcd` or `kube-apiserver`.
    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    /// Path of the log file holding the process's stdout and stderr.
    pub(crate) fn log(&self) -> &Path {
        &self.log
    }

    /// The exit status if the process has already exited, without blocking.
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// Whether the process was started, not killed, and has not exited.
    pub(crate) fn is_alive(&mut self) -> bool {
        self.child.is_some() && self.exited().is_none()
    }

    /// The last `lines` lines of the log file (best effort; empty when unreadable).
    pub(crate) fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log, lines)
    }

    /// Sends `signal` (a `kill` signal name such as `STOP` or `CONT`) to the
    /// running process with the system's `kill` command (no signal crate:
    /// a test helper, run twice per freeze). Returns whether it was sent.
    pub(crate) fn signal(&mut self, signal: &str) -> bool {
        let Some(pid) = self.child.as_ref().map(std::process::Child::id) else {
            return false;
        };
        std::process::Command::new("kill")
            .args([format!("-{signal}"), pid.to_string()])
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Kills the process with SIGKILL and reaps it. Idempotent.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Err(e) = child.kill() {
                tracing::debug!(name = self.name, error = %e, "kill failed (already exited?)");
            }
            let _ = child.wait();
            tracing::debug!(name = self.name, "stopped");
        }
    }
}

impl Drop for ManagedProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last `lines` lines of the file at `path` (reads at most the last 64 KiB).
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    let Ok(mut file) = File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(LOG_TAIL_BYTES)));
    let mut bytes = Vec::new();
    let _ = file.read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Name of the file holding the pid of the process that owns a temporary directory.
const OWNER_PID_FILE: &str = "owner.pid";

/// Records this process as the owner of the temporary directory `dir`.
///
/// Errors: [`EnvTestError::Io`] when the file cannot be written.
pub(crate) fn write_owner_pid(dir: &Path) -> Result<(), EnvTestError> {
    let path = dir.join(OWNER_PID_FILE);
    std::fs::write(&path, std::process::id().to_string())
        .map_err(EnvTestError::io(format!("writing {}", path.display())))
}

/// Deletes the directories `<parent>/<prefix>*` whose owner process (see
/// [`write_owner_pid`]) no longer exists: environments that were never dropped.
/// Best effort; directories without an owner file are left alone.
pub(crate) fn remove_stale_dirs(parent: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let ours = entry.file_name().to_string_lossy().starts_with(prefix)
            && entry.file_type().is_ok_and(|t| t.is_dir());
        if !ours {
            continue;
        }
        let Ok(pid) = std::fs::read_to_string(path.join(OWNER_PID_FILE)) else {
            continue;
        };
        let Ok(pid) = pid.trim().parse::<u32>() else {
            continue;
        };
        if !Path::new("/proc").join(pid.to_string()).exists() {
            match std::fs::remove_dir_all(&path) {
                Ok(()) => {
                    tracing::debug!(dir = %path.display(), pid, "removed stale envtest directory")
                }
                Err(e) => {
                    tracing::debug!(dir = %path.display(), error = %e, "cannot remove stale envtest directory")
                }
            }
        }
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it).
///
/// Racy by nature: another process may take it before our child binds it;
/// [`super::TestEnv::start`] retries with new ports when that happens.
pub(crate) fn free_port() -> Result<u16, EnvTestError> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(EnvTestError::io("finding a free port on 127.0.0.1"))?;
    let port = listener
        .local_addr()
        .map_err(EnvTestError::io("finding a free port on 127.0.0.1"))?
        .port();
    Ok(port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_directories_of_dead_owners_are_removed_and_others_kept() {
        let parent = tempfile::tempdir().unwrap();
        let make = |name: &str, owner: Option<&str>| {
            let dir = parent.path().join(name);
            std::fs::create_dir(&dir).unwrap();
            if let Some(pid) = owner {
                std::fs::write(dir.join(OWNER_PID_FILE), pid).unwrap();
            }
            dir
        };
        // Pids are below 2^22 on Linux, so this one cannot be alive.
        let dead = make("envtest-dead", Some("999999999"));
        let alive = make("envtest-alive", Some(&std::process::id().to_string()));
        let unowned = make("envtest-unowned", None);
        let other = make("other-dead", Some("999999999"));
        remove_stale_dirs(parent.path(), "envtest-");
        assert!(!dead.exists());
        assert!(alive.exists());
        assert!(unowned.exists());
        assert!(other.exists());
    }
}
