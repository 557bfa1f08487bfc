//! The primitives the pieces of the emulator's shared state are built on: a
//! lock that survives a panicked holder, and the shutdown signal. A leaf:
//! the state and the middlewares (`stats`, `faults`) use it, it uses none of
//! them.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;

/// Locks a mutex, recovering the data if a previous holder panicked (the
/// emulator never answers 500 because of a poisoned lock).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The shutdown signal of one emulator (cheap to clone): the server stops
/// accepting connections and hung fault requests are released once it is
/// raised. Raised once, never lowered.
#[derive(Clone, Debug)]
pub(crate) struct Shutdown(Arc<watch::Sender<bool>>);

impl Shutdown {
    /// A signal not raised yet.
    pub fn new() -> Self {
        Self(Arc::new(watch::channel(false).0))
    }

    /// Raises the signal.
    pub fn raise(&self) {
        self.0.send_replace(true);
    }

    /// Resolves once the signal is raised (at once if it already is).
    pub async fn raised(&self) {
        let mut rx = self.0.subscribe();
        let _ = rx.wait_for(|stop| *stop).await;
    }

    /// Sleeps `d`, or less if the signal is raised meanwhile.
    pub async fn sleep(&self, d: Duration) {
        tokio::select! {
            _ = tokio::time::sleep(d) => {}
            _ = self.raised() => {}
        }
    }
}
