//! The thread that reads the shell's terminal.
//!
//! Someone must read the PTY at all times: a background job that writes to
//! the terminal between two commands (a server's log, `[1]+ Done`) would
//! otherwise block once the kernel's buffer is full. [`PtyReader`] runs one
//! thread per shell that reads the master side, splits the bytes into output
//! and prompt reports ([`MarkerScanner`]) and queues them for the command
//! loop.
//!
//! Memory is bounded in both modes. While a command runs (*busy*), the queue
//! holds at most [`BUSY_LIMIT`] bytes of output and the thread stops reading
//! until the command loop catches up, so a command printing gigabytes is
//! slowed to the host's pace instead of filling its memory. Between commands
//! (*idle*) only the newest [`IDLE_LIMIT`] bytes are kept and the rest is
//! counted as dropped; prompt reports are always kept.
//!
//! This module does not interpret output or decide anything about commands.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{ErrorKind, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use super::marker::{MarkerScanner, PromptReport, Scanned};

/// Output queued while a command runs before the reader waits.
pub const BUSY_LIMIT: usize = 1 << 20;

/// Background output kept between commands.
pub const IDLE_LIMIT: usize = 64 * 1024;

/// How often the thread looks at its stop flag while the terminal is quiet.
const STOP_CHECK: u16 = 200;

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
        if !self.busy {
            self.trim_to_idle_limit();
        }
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

struct Shared {
    queue: Mutex<Queue>,
    /// Signalled when an event is queued.
    readable: Condvar,
    /// Signalled when the command loop took events or the mode changed.
    room: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // The queue stays consistent if a holder panicked (single pushes).
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What was queued between two commands.
#[derive(Debug, Default)]
pub struct IdleBacklog {
    pub events: Vec<ReaderEvent>,
    /// Background output dropped because there was more than [`IDLE_LIMIT`].
    pub dropped_bytes: u64,
}

/// The reading thread of one shell's terminal. Stops when dropped.
pub struct PtyReader {
    shared: Arc<Shared>,
}

impl PtyReader {
    /// Starts reading `master` (a duplicate of the PTY's master side), in
    /// busy mode: the shell's start-up is the first thing waited for.
    pub fn start(master: OwnedFd, scanner: MarkerScanner) -> std::io::Result<PtyReader> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                busy: true,
                ..Queue::default()
            }),
            readable: Condvar::new(),
            room: Condvar::new(),
        });
        let thread_shared = Arc::clone(&shared);
        thread::Builder::new()
            .name("envhost-bash-pty".into())
            .spawn(move || read_loop(File::from(master), scanner, &thread_shared))?;
        Ok(PtyReader { shared })
    }

    /// Switches to busy mode and hands over what arrived since the last
    /// command.
    pub fn begin_command(&self) -> IdleBacklog {
        let mut queue = self.shared.lock();
        queue.busy = true;
        let dropped_bytes = std::mem::take(&mut queue.dropped_bytes);
        let events = queue.take_all();
        drop(queue);
        self.shared.room.notify_all();
        IdleBacklog {
            events,
            dropped_bytes,
        }
    }

    /// Switches to idle mode: from now on old output is dropped, not waited
    /// for.
    pub fn end_command(&self) {
        let mut queue = self.shared.lock();
        queue.busy = false;
        queue.trim_to_idle_limit();
        drop(queue);
        self.shared.room.notify_all();
    }

    /// Everything queued, waiting up to `timeout` for at least one event.
    pub fn next_events(&self, timeout: Duration) -> Vec<ReaderEvent> {
        let mut queue = self.shared.lock();
        if queue.events.is_empty() && !timeout.is_zero() {
            queue = self
                .shared
                .readable
                .wait_timeout_while(queue, timeout, |q| q.events.is_empty())
                .map(|(guard, _)| guard)
                .unwrap_or_else(|p| p.into_inner().0);
        }
        let events = queue.take_all();
        drop(queue);
        if !events.is_empty() {
            self.shared.room.notify_all();
        }
        events
    }
}

impl Drop for PtyReader {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.room.notify_all();
    }
}

fn read_loop(mut master: File, mut scanner: MarkerScanner, shared: &Shared) {
    let mut buffer = vec![0u8; READ_SIZE];
    let mut scanned = Vec::new();
    loop {
        if shared.lock().stop {
            return;
        }
        let mut fds = [PollFd::new(master.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(STOP_CHECK)) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => break,
        }
        let count = match master.read(&mut buffer) {
            Ok(0) => break,
            Ok(count) => count,
            Err(err) if err.kind() == ErrorKind::Interrupted => continue,
            Err(err) if err.kind() == ErrorKind::WouldBlock => continue,
            // EIO: every slave descriptor is closed.
            Err(_) => break,
        };
        scanner.feed(&buffer[..count], &mut scanned);
        if !deliver(shared, &mut scanned) {
            return;
        }
    }
    scanner.flush(&mut scanned);
    deliver(shared, &mut scanned);
    let mut queue = shared.lock();
    queue.push(ReaderEvent::Closed);
    drop(queue);
    shared.readable.notify_all();
}

/// Queues scanned pieces, waiting for room while a command runs. `false`
/// when asked to stop.
fn deliver(shared: &Shared, scanned: &mut Vec<Scanned>) -> bool {
    if scanned.is_empty() {
        return true;
    }
    let mut queue = shared.lock();
    while queue.busy && queue.output_bytes > BUSY_LIMIT && !queue.stop {
        queue = shared
            .room
            .wait(queue)
            .unwrap_or_else(|poisoned| poisoned.into_inner());
    }
    if queue.stop {
        return false;
    }
    for piece in scanned.drain(..) {
        queue.push(match piece {
            Scanned::Output(bytes) => ReaderEvent::Output(bytes),
            Scanned::Prompt(report) => ReaderEvent::Prompt(report),
        });
    }
    drop(queue);
    shared.readable.notify_all();
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_mode_keeps_the_newest_output_and_every_report() {
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

    #[test]
    fn busy_mode_keeps_everything() {
        let mut queue = Queue {
            busy: true,
            ..Queue::default()
        };
        queue.push(ReaderEvent::Output(vec![0; IDLE_LIMIT * 2]));
        assert_eq!(queue.output_bytes, IDLE_LIMIT * 2);
        assert_eq!(queue.dropped_bytes, 0);
    }
}
