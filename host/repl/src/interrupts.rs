//! Which command a signal stops.
//!
//! SIGTERM and SIGHUP (and the other signals that stop the host) cancel
//! every command at once, as in `serve`. Ctrl-C (SIGINT) at a terminal
//! stops the command in the foreground only, as at a shell, and leaves the
//! commands left running in other environments alone: while the REPL
//! follows a command it interrupts that command itself (the REPL's loop
//! sees the signal between two pieces of output). The host's cancel flag,
//! which every running command watches, is set only for a command that
//! has not yielded in time to be followed (one whose environment cannot
//! yield, such as the editor's search or a WebAssembly call): then there is
//! no other way to stop it. A script's Ctrl-C cancels at once, as it always
//! did.
//!
//! This module owns that decision; it must not know the environments.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::Duration;

use envhost_core::CancelFlag;
use envhost_runtime::signals::HostSignal;

/// What the REPL is doing, as the signal thread sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Reading a line, showing an answer, or following a command.
    Other,
    /// Inside a call that cannot be followed yet (a command's first look).
    Starting,
}

/// Shared between the REPL's loop and the signal thread.
#[derive(Clone)]
pub struct Interrupts {
    cancel: CancelFlag,
    state: Arc<Mutex<Phase>>,
    /// Counts the calls, so that a late check knows it is the same one.
    call: Arc<AtomicU64>,
    /// A script's Ctrl-C cancels at once.
    follows: bool,
    /// How long a Ctrl-C waits for the call to yield before it cancels.
    grace: Duration,
}

impl Interrupts {
    /// For a REPL that follows commands (`follows`) or not; `grace` is how
    /// long a command may take before its first answer.
    pub fn new(cancel: CancelFlag, follows: bool, grace: Duration) -> Self {
        Interrupts {
            cancel,
            state: Arc::new(Mutex::new(Phase::Other)),
            call: Arc::new(AtomicU64::new(0)),
            follows,
            grace,
        }
    }

    /// Runs `call` (a command's first answer): a Ctrl-C meanwhile cancels
    /// it if it has not answered within the grace period.
    pub fn starting<T>(&self, call: impl FnOnce() -> T) -> T {
        self.call.fetch_add(1, Ordering::SeqCst);
        self.set(Phase::Starting);
        let answer = call();
        self.set(Phase::Other);
        answer
    }

    /// Called by the signal thread for each signal, before the REPL hears
    /// of it.
    pub fn arrived(&self, signal: HostSignal) {
        if signal != HostSignal::Interrupt || !self.follows {
            self.cancel.cancel();
            return;
        }
        if *self.lock() != Phase::Starting {
            return;
        }
        let call = self.call.load(Ordering::SeqCst);
        let later = self.clone();
        let spawned = thread::Builder::new()
            .name("envhost-repl-ctrl-c".into())
            .spawn(move || {
                thread::sleep(later.grace);
                if *later.lock() == Phase::Starting && later.call.load(Ordering::SeqCst) == call {
                    later.cancel.cancel();
                }
            });
        if spawned.is_err() {
            self.cancel.cancel();
        }
    }

    fn set(&self, phase: Phase) {
        *self.lock() = phase;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Phase> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: Duration = Duration::from_millis(50);

    #[test]
    fn ctrl_c_cancels_only_a_call_that_does_not_answer_in_time() {
        let cancel = CancelFlag::new();
        let interrupts = Interrupts::new(cancel.clone(), true, GRACE);
        // At the prompt or while following: the REPL acts, nothing is
        // cancelled.
        interrupts.arrived(HostSignal::Interrupt);
        thread::sleep(GRACE * 3);
        assert!(!cancel.is_cancelled());
        // A call that answers within the grace period is not cancelled.
        interrupts.starting(|| {
            interrupts.arrived(HostSignal::Interrupt);
            thread::sleep(GRACE / 5);
        });
        thread::sleep(GRACE * 3);
        assert!(!cancel.is_cancelled());
        // One that does not answer is.
        interrupts.starting(|| {
            interrupts.arrived(HostSignal::Interrupt);
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while !cancel.is_cancelled() && std::time::Instant::now() < deadline {
                thread::sleep(Duration::from_millis(5));
            }
        });
        assert!(cancel.is_cancelled());
    }

    #[test]
    fn other_signals_and_a_scripts_ctrl_c_cancel_at_once() {
        let cancel = CancelFlag::new();
        Interrupts::new(cancel.clone(), true, GRACE).arrived(HostSignal::Terminate);
        assert!(cancel.is_cancelled());
        let cancel = CancelFlag::new();
        Interrupts::new(cancel.clone(), false, GRACE).arrived(HostSignal::Interrupt);
        assert!(cancel.is_cancelled());
    }
}
