//! A plugin command that may outlive the agent's wait, as the host's
//! interactive calls and the environment share it.
//!
//! While such a command runs (on a worker thread), every wait of the plugin
//! on one of its programs says so here: the environment then knows that the
//! command is blocked on a program (so it may answer the agent and leave it
//! running), reads what the program printed so far, types the agent's input
//! into it and interrupts it. A command that is not waiting on a program
//! (pure WebAssembly work) is never left running. This module must not
//! know the WIT interfaces nor the agent's words.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use envhost_core::CancelFlag;
use envhost_process::SessionLive;

/// What the host calls and the environment share about one command.
#[derive(Debug, Default)]
pub(crate) struct LiveCall {
    /// The program the plugin waits on right now.
    current: Mutex<Option<Arc<SessionLive>>>,
    /// Every program whose output is being kept for this command.
    shown: Mutex<Vec<Arc<SessionLive>>>,
    /// Set to interrupt the command: the agent's `interrupt`, or the host's
    /// own cancellation passed on.
    cancel: CancelFlag,
    /// The agent asked for the interrupt (not Ctrl-C or a signal).
    asked: AtomicBool,
    /// The command has no time limit of its own: its waits on programs
    /// have none either.
    unlimited: bool,
}

impl LiveCall {
    /// A command with a time limit of its own (`limited`) or without.
    pub(crate) fn new(limited: bool) -> Self {
        LiveCall {
            unlimited: !limited,
            ..LiveCall::default()
        }
    }

    /// Whether the plugin's waits on its programs have no deadline.
    pub(crate) fn waits_unlimited(&self) -> bool {
        self.unlimited
    }

    /// The flag the command's call watches.
    pub(crate) fn cancel_flag(&self) -> &CancelFlag {
        &self.cancel
    }

    /// The plugin starts waiting on `session`'s program; its output is
    /// kept from now on (from the first wait of this command on it).
    pub(crate) fn waiting_on(&self, session: Arc<SessionLive>) -> WaitingOn<'_> {
        let mut shown = lock(&self.shown);
        if !shown.iter().any(|known| Arc::ptr_eq(known, &session)) {
            session.record(true);
            shown.push(Arc::clone(&session));
        }
        drop(shown);
        *lock(&self.current) = Some(session);
        WaitingOn(self)
    }

    /// The program the plugin is blocked on right now, if any.
    pub(crate) fn waited_on(&self) -> Option<Arc<SessionLive>> {
        lock(&self.current)
            .as_ref()
            .filter(|session| session.is_waiting())
            .cloned()
    }

    /// The text every program of this command printed since the last take.
    pub(crate) fn take_output(&self) -> String {
        lock(&self.shown)
            .iter()
            .map(|session| session.take())
            .collect()
    }

    /// Bytes of text the command's programs printed.
    pub(crate) fn output_bytes(&self) -> u64 {
        lock(&self.shown).iter().map(|s| s.total_bytes()).sum()
    }

    /// The last line any of them printed (the one waited on first).
    pub(crate) fn last_line(&self) -> Option<String> {
        if let Some(line) = self.waited_on().and_then(|session| session.last_line()) {
            return Some(line);
        }
        lock(&self.shown).iter().rev().find_map(|s| s.last_line())
    }

    /// Interrupts the command as the agent asked.
    pub(crate) fn interrupt(&self) {
        self.asked.store(true, Ordering::SeqCst);
        self.cancel.cancel();
    }

    /// Whether an interruption came from the agent's `interrupt`.
    pub(crate) fn interrupt_was_asked(&self) -> bool {
        self.asked.load(Ordering::SeqCst)
    }

    /// The command ended: its programs' output is no longer kept.
    pub(crate) fn finish(&self) {
        for session in lock(&self.shown).drain(..) {
            session.record(false);
        }
        *lock(&self.current) = None;
    }
}

/// The plugin waits on a program until this is dropped.
pub(crate) struct WaitingOn<'a>(&'a LiveCall);

impl Drop for WaitingOn<'_> {
    fn drop(&mut self) {
        *lock(&self.0.current) = None;
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
