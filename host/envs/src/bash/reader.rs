//! Reading the shell's terminal, at all times.
//!
//! Someone must read the PTY at all times: a background job that writes to
//! the terminal between two commands (a server's log, `[1]+ Done`) would
//! otherwise block once the kernel's buffer is full. Whoever reads splits
//! the bytes into output and prompt reports with the one [`MarkerScanner`].
//!
//! Two readers take turns, so that a command's round trip costs no thread
//! hand-over:
//!
//! - while a command runs (*busy*), the command loop reads the PTY itself,
//!   in [`PtyReader::next_events`], only as fast as it handles the output:
//!   a command printing gigabytes is slowed to the host's pace instead of
//!   filling its memory;
//! - between commands (*idle*), a thread reads and queues what comes, keeping
//!   only the newest [`IDLE_LIMIT`] bytes of output (the rest is counted as
//!   dropped) and every prompt report.
//!
//! The right to read is a mutex around the PTY and the scanner. The thread
//! holds it only while it polls (200 ms at most) and a pipe wakes it when a
//! command begins, so the hand-over is immediate and never reorders output.
//!
//! This module does not interpret output or decide anything about commands.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{ErrorKind, PipeReader, PipeWriter, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use super::marker::{MarkerScanner, PromptReport, Scanned};

/// Background output kept between commands.
pub const IDLE_LIMIT: usize = 64 * 1024;

/// Longest the idle thread polls before looking at its instructions again.
const IDLE_POLL_MS: u16 = 200;

const READ_SIZE: usize = 64 * 1024;

/// Something read from the terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReaderEvent {
    Output(Vec<u8>),
    Prompt(PromptReport),
    /// Every process holding the terminal has closed it (the shell and its
    /// jobs are gone), or reading failed.
    Closed,
}

/// What the idle thread read, for the next command.
#[derive(Default)]
struct Queue {
    events: VecDeque<ReaderEvent>,
    output_bytes: usize,
    busy: bool,
    dropped_bytes: u64,
    stop: bool,
}

impl Queue {
    fn push(&mut self, event: ReaderEvent) {
        if let ReaderEvent::Output(bytes) = &event {
            self.output_bytes += bytes.len();
        }
        self.events.push_back(event);
        self.trim_to_idle_limit();
    }

    /// Drops the oldest output beyond [`IDLE_LIMIT`]; reports stay.
    fn trim_to_idle_limit(&mut self) {
        while self.output_bytes > IDLE_LIMIT {
            let Some(index) = self
                .events
                .iter()
                .position(|e| matches!(e, ReaderEvent::Output(_)))
            else {
                return;
            };
            let excess = self.output_bytes - IDLE_LIMIT;
            let Some(ReaderEvent::Output(bytes)) = self.events.get_mut(index) else {
                return;
            };
            if bytes.len() <= excess {
                let removed = bytes.len();
                self.events.remove(index);
                self.output_bytes -= removed;
                self.dropped_bytes += removed as u64;
            } else {
                bytes.drain(..excess);
                self.output_bytes -= excess;
                self.dropped_bytes += excess as u64;
            }
        }
    }

    fn take_all(&mut self) -> Vec<ReaderEvent> {
        self.output_bytes = 0;
        self.events.drain(..).collect()
    }
}

/// The PTY and the scanner: whoever holds this reads.
struct ReadSide {
    master: File,
    scanner: MarkerScanner,
    buffer: Vec<u8>,
    closed: bool,
}

impl ReadSide {
    /// Reads once (the PTY must be readable or hung up) and scans.
    fn read_into(&mut self, events: &mut Vec<ReaderEvent>) {
        let mut scanned = Vec::new();
        match self.master.read(&mut self.buffer) {
            Ok(0) => self.close(&mut scanned),
            Ok(count) => self.scanner.feed(&self.buffer[..count], &mut scanned),
            Err(err) if matches!(err.kind(), ErrorKind::Interrupted | ErrorKind::WouldBlock) => {}
            // EIO: every slave descriptor is closed.
            Err(_) => self.close(&mut scanned),
        }
        events.extend(scanned.into_iter().map(|piece| match piece {
            Scanned::Output(bytes) => ReaderEvent::Output(bytes),
            Scanned::Prompt(report) => ReaderEvent::Prompt(report),
        }));
        if self.closed {
            events.push(ReaderEvent::Closed);
        }
    }

    fn close(&mut self, scanned: &mut Vec<Scanned>) {
        self.scanner.flush(scanned);
        self.closed = true;
    }
}

struct Shared {
    queue: Mutex<Queue>,
    /// Signalled when the mode changes or the reader must stop.
    mode: Condvar,
    side: Mutex<ReadSide>,
    /// A byte here interrupts the idle thread's poll.
    wake_reader: PipeReader,
    wake_writer: PipeWriter,
}

impl Shared {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        // Both locks guard state that single operations keep consistent, so
        // a holder's panic leaves them usable.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn side(&self) -> MutexGuard<'_, ReadSide> {
        self.side.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wake(&self) {
        // A full pipe already holds a wake-up.
        let _ = (&self.wake_writer).write(&[1]);
    }
}

/// What was queued between two commands.
#[derive(Debug, Default)]
pub struct IdleBacklog {
    pub events: Vec<ReaderEvent>,
    /// Background output dropped because there was more than [`IDLE_LIMIT`].
    pub dropped_bytes: u64,
}

/// The reading of one shell's terminal. Stops when dropped.
pub struct PtyReader {
    shared: Arc<Shared>,
}

impl PtyReader {
    /// Starts with `master` (a duplicate of the PTY's master side), in busy
    /// mode: the shell's start-up is the first thing waited for.
    pub fn start(master: OwnedFd, scanner: MarkerScanner) -> std::io::Result<PtyReader> {
        let (wake_reader, wake_writer) = std::io::pipe()?;
        // Wake-ups must never block the command loop (one byte is enough).
        nix::fcntl::fcntl(
            wake_writer.as_raw_fd(),
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )?;
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                busy: true,
                ..Queue::default()
            }),
            mode: Condvar::new(),
            side: Mutex::new(ReadSide {
                master: File::from(master),
                scanner,
                buffer: vec![0; READ_SIZE],
                closed: false,
            }),
            wake_reader,
            wake_writer,
        });
        let thread_shared = Arc::clone(&shared);
        thread::Builder::new()
            .name("envhost-bash-pty".into())
            .spawn(move || idle_loop(&thread_shared))?;
        Ok(PtyReader { shared })
    }

    /// Switches to busy mode and hands over what arrived since the last
    /// command.
    pub fn begin_command(&self) -> IdleBacklog {
        let mut queue = self.shared.queue();
        queue.busy = true;
        let dropped_bytes = std::mem::take(&mut queue.dropped_bytes);
        let events = queue.take_all();
        drop(queue);
        self.shared.wake();
        IdleBacklog {
            events,
            dropped_bytes,
        }
    }

    /// Back to idle mode: the thread reads until the next command.
    pub fn end_command(&self) {
        self.shared.queue().busy = false;
        self.shared.mode.notify_all();
    }

    /// Busy mode: what the terminal has, waiting up to `timeout` for
    /// something. Empty when nothing came (or the terminal is closed).
    pub fn next_events(&self, timeout: Duration) -> Vec<ReaderEvent> {
        // Waits at most one idle poll for the thread to let go.
        let mut side = self.shared.side();
        // What the thread read before it let go comes first.
        let mut events = self.shared.queue().take_all();
        if !events.is_empty() || side.closed {
            return events;
        }
        let millis = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
        let mut fds = [PollFd::new(side.master.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(millis)) {
            Ok(ready) if ready > 0 => side.read_into(&mut events),
            _ => {} // timed out or interrupted: the caller looks again
        }
        events
    }
}

impl Drop for PtyReader {
    fn drop(&mut self) {
        self.shared.queue().stop = true;
        self.shared.mode.notify_all();
        self.shared.wake();
    }
}

/// The thread: reads while no command runs.
fn idle_loop(shared: &Shared) {
    let mut scratch = [0u8; 64];
    loop {
        {
            let mut queue = shared.queue();
            while queue.busy && !queue.stop {
                queue = shared
                    .mode
                    .wait(queue)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
            }
            if queue.stop {
                return;
            }
        }
        let mut side = shared.side();
        if side.closed {
            return;
        }
        let mut fds = [
            PollFd::new(side.master.as_fd(), PollFlags::POLLIN),
            PollFd::new(shared.wake_reader.as_fd(), PollFlags::POLLIN),
        ];
        let ready = match poll(&mut fds, PollTimeout::from(IDLE_POLL_MS)) {
            Ok(ready) => ready,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return,
        };
        if ready == 0 {
            continue;
        }
        let terminal_ready = fds[0].any().unwrap_or(false);
        if fds[1].any().unwrap_or(false) {
            let _ = (&shared.wake_reader).read(&mut scratch);
        }
        if !terminal_ready || shared.queue().busy {
            continue; // a command began: its loop reads from now on
        }
        let mut events = Vec::new();
        side.read_into(&mut events);
        let mut queue = shared.queue();
        for event in events {
            queue.push(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_queue_keeps_the_newest_output_and_every_report() {
        let mut queue = Queue::default();
        let report = PromptReport {
            seq: 1,
            exit_code: 0,
            flags: String::new(),
            cwd: "/".into(),
            jobs: String::new(),
        };
        queue.push(ReaderEvent::Output(vec![b'a'; IDLE_LIMIT]));
        queue.push(ReaderEvent::Prompt(report.clone()));
        queue.push(ReaderEvent::Output(vec![b'b'; 100]));
        assert_eq!(queue.output_bytes, IDLE_LIMIT);
        assert_eq!(queue.dropped_bytes, 100);
        let events = queue.take_all();
        assert_eq!(events.len(), 3);
        assert_eq!(events[1], ReaderEvent::Prompt(report));
        assert_eq!(events[2], ReaderEvent::Output(vec![b'b'; 100]));
    }
}
