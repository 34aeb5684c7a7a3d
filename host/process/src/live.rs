//! A session seen from another thread while a wait reads it: the output
//! the wait has seen so far, typing into the program, Ctrl-C.
//!
//! A plugin command that outlives the agent's wait is still inside a
//! [`Session::wait`](crate::Session::wait) on a worker thread; the host
//! answers the agent meanwhile from a [`SessionLive`]: the text the wait has
//! read (the same text the wait will hand the plugin: echo of typed lines
//! left out), bounded, taken piece by piece so that no line is given twice,
//! and the means to type into the terminal or interrupt its foreground job
//! from another thread. It must not know about plugins or the protocol.

use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::Signal;
use nix::unistd::tcgetpgrp;

use crate::input_wait::waiting_for_terminal;
use crate::interrupt::signal_group;
use crate::procfs;
use crate::session_error::SessionError;

/// Most text kept between two takes; older text is dropped with a count.
const KEPT_BYTES: usize = 256 * 1024;

/// What another thread sees of a session, and may do to it.
pub struct SessionLive {
    program: String,
    pid: i32,
    /// The master side, duplicated: typing and the foreground group.
    terminal: OwnedFd,
    tty: Option<PathBuf>,
    /// A wait is reading the terminal right now.
    waiting: AtomicBool,
    seen: Mutex<Seen>,
}

/// The text seen while recording, and what of it was taken.
#[derive(Default)]
struct Seen {
    recording: bool,
    /// Finished lines not taken yet.
    lines: String,
    /// Bytes dropped from `lines` because nobody took them in time.
    dropped: u64,
    /// The line being written, as it stands.
    pending: String,
    /// How much of `pending` was taken already.
    pending_taken: usize,
    /// Bytes of text seen since recording started.
    total: u64,
    /// The last non-empty finished line seen.
    last_line: String,
}

impl SessionLive {
    pub(crate) fn new(program: &str, pid: i32, terminal: OwnedFd, tty: Option<PathBuf>) -> Self {
        SessionLive {
            program: program.to_owned(),
            pid,
            terminal,
            tty,
            waiting: AtomicBool::new(false),
            seen: Mutex::new(Seen::default()),
        }
    }

    fn seen(&self) -> MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The program's name, for messages.
    pub fn program(&self) -> &str {
        &self.program
    }

    /// Starts (afresh) or stops keeping what the waits read. Off, the
    /// waits pay nothing for it.
    pub fn record(&self, on: bool) {
        let mut seen = self.seen();
        *seen = Seen {
            recording: on,
            ..Seen::default()
        };
    }

    pub(crate) fn is_recording(&self) -> bool {
        self.seen().recording
    }

    /// Whether a wait is reading the terminal right now (the plugin is
    /// blocked on its program).
    pub fn is_waiting(&self) -> bool {
        self.waiting.load(Ordering::SeqCst)
    }

    pub(crate) fn set_waiting(&self, waiting: bool) {
        self.waiting.store(waiting, Ordering::SeqCst);
    }

    /// A finished line the wait keeps (not an echo).
    pub(crate) fn line(&self, line: &str) {
        let mut seen = self.seen();
        if !seen.recording {
            return;
        }
        seen.total += line.len() as u64;
        let shown = line.trim_end();
        if !shown.is_empty() {
            seen.last_line = shown.to_owned();
        }
        // The part of this line taken while it was pending is not given
        // again (if the line kept its start).
        let taken = std::mem::take(&mut seen.pending_taken);
        let rest = match line.get(taken..) {
            Some(rest) if line.starts_with(&seen.pending[..taken.min(seen.pending.len())]) => rest,
            _ => line,
        };
        seen.lines.push_str(rest);
        seen.pending.clear();
        if seen.lines.len() > KEPT_BYTES {
            let cut = seen
                .lines
                .ceil_char_boundary(seen.lines.len() - KEPT_BYTES / 2);
            seen.dropped += cut as u64;
            seen.lines.drain(..cut);
        }
    }

    /// A finished line the wait leaves out (the echo of a typed line).
    pub(crate) fn skip_line(&self) {
        let mut seen = self.seen();
        seen.pending.clear();
        seen.pending_taken = 0;
    }

    /// The line being written now (a prompt for input, a progress line).
    pub(crate) fn pending(&self, pending: String) {
        let mut seen = self.seen();
        if seen.recording && seen.pending != pending {
            if !pending.starts_with(&seen.pending[..seen.pending_taken.min(seen.pending.len())]) {
                seen.pending_taken = 0;
            }
            seen.pending = pending;
        }
    }

    /// The text seen since the last take: finished lines, then what stands
    /// of the line being written.
    pub fn take(&self) -> String {
        let mut seen = self.seen();
        let mut text = String::new();
        if seen.dropped > 0 {
            text.push_str(&format!(
                "[... {} of earlier output not shown here; the command's answer has it ...]\n",
                envhost_core::text::bytes(seen.dropped)
            ));
            seen.dropped = 0;
        }
        text.push_str(&std::mem::take(&mut seen.lines));
        let from = seen.pending_taken.min(seen.pending.len());
        if let Some(rest) = seen.pending.get(from..) {
            text.push_str(rest);
        }
        seen.pending_taken = seen.pending.len();
        text
    }

    /// Bytes of text seen since recording started.
    pub fn total_bytes(&self) -> u64 {
        self.seen().total
    }

    /// The last non-empty line seen (the line being written, if it has
    /// text), if any.
    pub fn last_line(&self) -> Option<String> {
        let seen = self.seen();
        let pending = seen.pending.trim_end();
        let last = if pending.trim_start().is_empty() {
            &seen.last_line
        } else {
            pending
        };
        (!last.is_empty()).then(|| last.to_owned())
    }

    /// Types `text` into the terminal (control characters included),
    /// waiting at most until `until` for the program to take it.
    pub fn type_text(&self, text: &str, until: Instant) -> Result<(), SessionError> {
        let mut rest = text.as_bytes();
        while !rest.is_empty() {
            match nix::unistd::write(self.terminal.as_fd(), rest) {
                Ok(written) => rest = &rest[written..],
                Err(Errno::EINTR) => {}
                Err(Errno::EAGAIN) => {
                    if Instant::now() >= until {
                        return Err(SessionError::OutOfTime {
                            program: self.program.clone(),
                        });
                    }
                    let mut fds = [PollFd::new(self.terminal.as_fd(), PollFlags::POLLOUT)];
                    let _ = poll(&mut fds, PollTimeout::from(50u16));
                }
                Err(Errno::EIO) => {
                    return Err(SessionError::Ended {
                        program: self.program.clone(),
                        status: "its terminal closed".to_owned(),
                    });
                }
                Err(err) => {
                    return Err(SessionError::Io {
                        program: self.program.clone(),
                        why: std::io::Error::from(err).to_string(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Ctrl-C: SIGINT to the terminal's foreground job (or the program's
    /// own group). `false` if it is gone.
    pub fn interrupt(&self) -> bool {
        let group = match tcgetpgrp(self.terminal.as_fd()) {
            Ok(group) if group.as_raw() > 1 => group.as_raw(),
            _ => self.pid,
        };
        signal_group(group, Signal::SIGINT)
    }

    /// Whether the terminal's foreground job is blocked reading it (it
    /// seems to wait for input). Reads the process table in `/proc`.
    pub fn reading_terminal(&self) -> bool {
        let Some(tty) = &self.tty else {
            return false;
        };
        let Ok(group) = tcgetpgrp(self.terminal.as_fd()) else {
            return false;
        };
        let members: Vec<i32> = procfs::process_table()
            .into_iter()
            .filter(|p| p.group == group.as_raw() && p.state != 'Z')
            .map(|p| p.pid)
            .collect();
        !members.is_empty() && waiting_for_terminal(&members, tty).is_some()
    }
}

impl std::fmt::Debug for SessionLive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionLive")
            .field("program", &self.program)
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

/// Marks a session as waited on for as long as it lives.
pub(crate) struct Waiting<'a>(pub(crate) &'a SessionLive);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.set_waiting(false);
    }
}
