//! Reading the shell's terminal and its report socket, at all times.
//!
//! Someone must read the PTY at all times: a background job that writes to
//! the terminal between two commands (a server's log, `[1]+ Done`) would
//! otherwise block once the kernel's buffer is full. Whoever reads waits on
//! both the terminal and the report socket ([`ReportSocket`]), keeps only
//! the reports the shell itself wrote with the socket in its place, and,
//! when a report comes, reads the terminal until it has nothing more
//! before passing the report on, so that everything the command printed
//! comes before its report (see [`super::marker`] for why that read gets
//! it all).
//!
//! Two readers take turns, so that a command's round trip costs no thread
//! hand-over:
//!
//! - while a command runs (*busy*), the command loop reads, in
//!   [`PtyReader::next_events`], only as fast as it handles the output: a
//!   command printing gigabytes is slowed to the host's pace instead of
//!   filling its memory;
//! - between commands (*idle*), a thread reads and queues what comes, keeping
//!   only the newest [`IDLE_LIMIT`] bytes of output (the rest is counted as
//!   dropped) and every report.
//!
//! The right to read is a mutex around both descriptors and their parsers.
//! The thread waits for the descriptors to be ready on copies of its own,
//! without the mutex, and takes the mutex only to read, after checking that
//! no command has begun: a command that begins never waits for the thread
//! to wake up and let go (after an agent's pause, that hand-over from a
//! descheduled thread was most of the host's part of the round trip), and
//! output is never reordered (whatever the thread read is queued before it
//! lets go of the mutex, and the command loop takes the queue after taking
//! the mutex). A pipe wakes the thread when a command begins, so that it is
//! back to waiting for the next idle period before the command's output
//! comes, and when the reader stops; nothing else wakes it while the shell
//! is quiet. The thread takes over only once the shell has been idle for
//! [`HANDOVER_DELAY`]: an agent's commands usually follow each other
//! closely, and a command that begins before that costs the thread no
//! wake-up at all (the command loop then reads what came meanwhile itself,
//! as backlog). Output is left unread for at most that long.
//!
//! This module does not interpret output or decide anything about commands.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{ErrorKind, IoSliceMut, PipeReader, PipeWriter, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::socket::{ControlMessageOwned, MsgFlags, UnixCredentials, recvmsg};

use super::marker::{PromptReport, ReportParser};

/// Background output kept between commands.
pub const IDLE_LIMIT: usize = 64 * 1024;

const READ_SIZE: usize = 64 * 1024;

/// How long the shell stays idle before the thread takes over reading, and
/// how often the thread looks whether it is idle (ending a command does not
/// wake it: two thread wake-ups per command were a tenth of a round trip).
const HANDOVER_DELAY: Duration = Duration::from_millis(20);

/// Why bytes on the report socket were not taken as a report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Written by another process than the shell (a subshell, a program).
    ForeignSender { pid: i32 },
    /// Written by the shell while the socket was not at its place: from
    /// inside a command, through the copy bash keeps aside.
    OutOfPlace,
    /// Not a report at all.
    Garbled,
}

/// Something read from the terminal or the report socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReaderEvent {
    Output(Vec<u8>),
    Prompt(PromptReport),
    Refused(Refusal),
    /// Every holder of the shell's end of the report socket closed it: the
    /// shell can no longer report (it ended, or a command closed it).
    ReportsClosed,
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
    /// When the last command ended (the thread takes over after
    /// [`HANDOVER_DELAY`]).
    idle_since: Option<Instant>,
    /// The thread holds the read side (or is about to): a command that
    /// begins must wake it.
    polling: bool,
    dropped_bytes: u64,
    stop: bool,
}

impl Queue {
    fn push(&mut self, event: ReaderEvent) {
        match &event {
            ReaderEvent::Output(bytes) => self.output_bytes += bytes.len(),
            // Refusals say the same thing each time: one is enough.
            ReaderEvent::Refused(_) if self.events.contains(&event) => return,
            _ => {}
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

/// Where the shell must hold its end of the report socket when it reports.
#[derive(Debug, Clone, Copy)]
pub struct ReportPlace {
    /// The shell's pid: reports from any other process are refused.
    pub shell: i32,
    /// The descriptor number the socket has in the shell.
    pub fd: i32,
    /// The inode of the shell's end, as `/proc/<pid>/fd/<fd>` names it.
    pub inode: u64,
}

/// Looks at where the shell holds its end, through the shell's
/// `/proc/<pid>/fd` folder opened once: a look is then one `readlinkat`
/// (half the cost of a path through `/proc`, and it runs after every
/// command), and it can only ever look at that process (a pid used again
/// by another process is not the same folder).
struct PlaceCheck {
    place: ReportPlace,
    descriptors: Option<OwnedFd>,
    descriptor_name: String,
    expected: String,
}

impl PlaceCheck {
    fn new(place: ReportPlace) -> PlaceCheck {
        use std::os::unix::fs::OpenOptionsExt;
        let descriptors = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_PATH | nix::libc::O_DIRECTORY | nix::libc::O_CLOEXEC)
            .open(format!("/proc/{}/fd", place.shell))
            .ok()
            .map(OwnedFd::from);
        PlaceCheck {
            place,
            descriptors,
            descriptor_name: place.fd.to_string(),
            expected: format!("socket:[{}]", place.inode),
        }
    }

    /// Whether the shell holds its end at its place now.
    fn holds(&self) -> bool {
        let target = match &self.descriptors {
            Some(folder) => {
                nix::fcntl::readlinkat(Some(folder.as_raw_fd()), self.descriptor_name.as_str())
            }
            None => nix::fcntl::readlink(
                format!("/proc/{}/fd/{}", self.place.shell, self.place.fd).as_str(),
            ),
        };
        target.is_ok_and(|target| target.as_os_str() == self.expected.as_str())
    }
}

/// The host's end of the report socket.
pub struct ReportSocket {
    stream: UnixStream,
    place: PlaceCheck,
    parser: ReportParser,
    buffer: Vec<u8>,
    closed: bool,
}

impl ReportSocket {
    /// `stream` must have `SO_PASSCRED` set (the kernel then attaches the
    /// sender's pid to every message).
    pub fn new(stream: UnixStream, place: ReportPlace) -> ReportSocket {
        ReportSocket {
            stream,
            place: PlaceCheck::new(place),
            parser: ReportParser::default(),
            buffer: vec![0; 4096],
            closed: false,
        }
    }

    /// Takes what the socket holds now, without waiting, up to the first
    /// report (the last thing the shell writes at a prompt).
    fn drain_into(&mut self, events: &mut Vec<ReaderEvent>) {
        while !self.closed && self.read_into(events) {
            if matches!(events.last(), Some(ReaderEvent::Prompt(_))) {
                return;
            }
        }
    }

    /// Reads once, without waiting, and appends what it held; `false` when
    /// there was nothing to read.
    fn read_into(&mut self, events: &mut Vec<ReaderEvent>) -> bool {
        let mut space = nix::cmsg_space!(UnixCredentials);
        let mut iov = [IoSliceMut::new(&mut self.buffer)];
        let received = recvmsg::<()>(
            self.stream.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_DONTWAIT,
        );
        let (count, sender) = match received {
            Ok(message) => {
                let sender = message.cmsgs().ok().and_then(|mut cmsgs| {
                    cmsgs.find_map(|cmsg| match cmsg {
                        ControlMessageOwned::ScmCredentials(credentials) => Some(credentials.pid()),
                        _ => None,
                    })
                });
                (message.bytes, sender)
            }
            Err(nix::errno::Errno::EAGAIN) => return false,
            Err(nix::errno::Errno::EINTR) => return true,
            Err(_) => (0, None),
        };
        if count == 0 {
            self.closed = true;
            events.push(ReaderEvent::ReportsClosed);
            return false;
        }
        if sender != Some(self.place.place.shell) {
            events.push(ReaderEvent::Refused(Refusal::ForeignSender {
                pid: sender.unwrap_or(0),
            }));
            return true;
        }
        let (reports, garbled) = self.parser.feed(&self.buffer[..count]);
        if garbled {
            events.push(ReaderEvent::Refused(Refusal::Garbled));
        }
        for report in reports {
            if self.place.holds() {
                events.push(ReaderEvent::Prompt(report));
            } else {
                events.push(ReaderEvent::Refused(Refusal::OutOfPlace));
            }
        }
        true
    }
}

/// Both descriptors and their parsers: whoever holds this reads.
struct ReadSide {
    master: File,
    reports: ReportSocket,
    buffer: Vec<u8>,
    closed: bool,
}

/// Reads of the terminal after a report, at most: what the command wrote
/// before its report is at most what the kernel's terminal buffers hold
/// (64 KiB in transit and 4 KiB in the line discipline), and a background
/// job still writing must not keep the reader here.
const READS_AFTER_A_REPORT: usize = 4;

impl ReadSide {
    /// Polls the terminal and the report socket for up to `timeout`, and
    /// reads what is ready; after a report, the terminal is read until it
    /// has nothing more (at most [`READS_AFTER_A_REPORT`] reads) and the
    /// report comes after that output.
    fn poll_and_read(
        &mut self,
        timeout: PollTimeout,
        events: &mut Vec<ReaderEvent>,
    ) -> Result<(), nix::errno::Errno> {
        let (terminal_ready, socket_ready) = {
            let mut fds = vec![PollFd::new(self.master.as_fd(), PollFlags::POLLIN)];
            // A closed socket is always readable: it is no longer waited on.
            let socket_index = (!self.reports.closed).then(|| {
                fds.push(PollFd::new(self.reports.stream.as_fd(), PollFlags::POLLIN));
                fds.len() - 1
            });
            let ready = poll(&mut fds, timeout)?;
            let is_ready = |index: Option<usize>| {
                ready > 0 && index.is_some_and(|i| fds[i].any().unwrap_or(false))
            };
            (is_ready(Some(0)), is_ready(socket_index))
        };
        self.read_ready(terminal_ready, socket_ready, events);
        Ok(())
    }

    /// Takes what the terminal and the socket hold now, without waiting.
    fn take_ready(&mut self, events: &mut Vec<ReaderEvent>) {
        let mut fds = [
            PollFd::new(self.master.as_fd(), PollFlags::POLLIN),
            PollFd::new(self.reports.stream.as_fd(), PollFlags::POLLIN),
        ];
        if !matches!(poll(&mut fds, PollTimeout::ZERO), Ok(ready) if ready > 0) {
            return;
        }
        let terminal_ready = fds[0].any().unwrap_or(false);
        let socket_ready = fds[1].any().unwrap_or(false) && !self.reports.closed;
        self.read_ready(terminal_ready, socket_ready, events);
    }

    /// Reads the terminal if it is ready and the socket if it is; when the
    /// socket held a report, reads the terminal until it has nothing more
    /// first, so that the report follows everything written before it.
    fn read_ready(
        &mut self,
        terminal_ready: bool,
        socket_ready: bool,
        events: &mut Vec<ReaderEvent>,
    ) {
        if terminal_ready {
            self.read_terminal(events);
        }
        if !socket_ready {
            return;
        }
        let mut from_socket = Vec::new();
        self.reports.drain_into(&mut from_socket);
        if from_socket
            .iter()
            .any(|event| matches!(event, ReaderEvent::Prompt(_)))
        {
            self.read_terminal_dry(events);
        }
        events.append(&mut from_socket);
    }

    /// Reads the terminal until a poll finds nothing (which first moves
    /// the bytes still in the kernel's buffers: see [`super::marker`]).
    fn read_terminal_dry(&mut self, events: &mut Vec<ReaderEvent>) {
        for _ in 0..READS_AFTER_A_REPORT {
            if self.closed {
                return;
            }
            let mut fds = [PollFd::new(self.master.as_fd(), PollFlags::POLLIN)];
            if !matches!(poll(&mut fds, PollTimeout::ZERO), Ok(ready) if ready > 0) {
                return;
            }
            self.read_terminal(events);
        }
    }

    /// Reads the terminal once (it must be readable or hung up).
    fn read_terminal(&mut self, events: &mut Vec<ReaderEvent>) {
        match self.master.read(&mut self.buffer) {
            Ok(0) => self.closed = true,
            Ok(count) => push_output(events, &self.buffer[..count]),
            Err(err) if matches!(err.kind(), ErrorKind::Interrupted | ErrorKind::WouldBlock) => {}
            // EIO: every slave descriptor is closed.
            Err(_) => self.closed = true,
        }
        if self.closed {
            events.push(ReaderEvent::Closed);
        }
    }
}

/// Appends output to the last event when that is output too.
fn push_output(events: &mut Vec<ReaderEvent>, bytes: &[u8]) {
    if let Some(ReaderEvent::Output(last)) = events.last_mut() {
        last.extend_from_slice(bytes);
    } else {
        events.push(ReaderEvent::Output(bytes.to_vec()));
    }
}

struct Shared {
    queue: Mutex<Queue>,
    /// Copies of the terminal and report socket descriptors, that the idle
    /// thread waits on without holding [`Shared::side`]; reading is done
    /// only through the side.
    watch_terminal: OwnedFd,
    watch_reports: OwnedFd,
    /// Signalled when the reader must stop (the thread looks at the mode
    /// every [`HANDOVER_DELAY`] on its own).
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

/// The reading of one shell's terminal and report socket. Stops when
/// dropped.
pub struct PtyReader {
    shared: Arc<Shared>,
}

impl PtyReader {
    /// Starts with `master` (a duplicate of the PTY's master side) and the
    /// report socket, in busy mode: the shell's start-up is the first thing
    /// waited for.
    pub fn start(master: OwnedFd, reports: ReportSocket) -> std::io::Result<PtyReader> {
        let (wake_reader, wake_writer) = std::io::pipe()?;
        // Wake-ups must never block the command loop (one byte is enough).
        nix::fcntl::fcntl(
            wake_writer.as_raw_fd(),
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )?;
        let watch_terminal = master.try_clone()?;
        let watch_reports = OwnedFd::from(reports.stream.try_clone()?);
        let shared = Arc::new(Shared {
            watch_terminal,
            watch_reports,
            queue: Mutex::new(Queue {
                busy: true,
                ..Queue::default()
            }),
            mode: Condvar::new(),
            side: Mutex::new(ReadSide {
                master: File::from(master),
                reports,
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
        let polling = {
            let mut queue = self.shared.queue();
            queue.busy = true;
            queue.polling
        };
        if polling {
            // Out of its wait now, while the shell runs the command, rather
            // than when the command's output wakes it and the command loop.
            self.shared.wake();
        }
        // The queue's lock is never held while waiting for the read side
        // (the thread takes them in the other order). The thread holds the
        // side only while it reads, and queues what it read before letting
        // go: the queue is taken after the side, so nothing is missed.
        let mut side = self.shared.side();
        let (dropped_bytes, mut events) = {
            let mut queue = self.shared.queue();
            (std::mem::take(&mut queue.dropped_bytes), queue.take_all())
        };
        // What came since and nobody read yet is backlog too.
        side.take_ready(&mut events);
        drop(side);
        IdleBacklog {
            events,
            dropped_bytes,
        }
    }

    /// Back to idle mode: the thread reads from [`HANDOVER_DELAY`] on,
    /// until the next command.
    pub fn end_command(&self) {
        let mut queue = self.shared.queue();
        queue.busy = false;
        queue.idle_since = Some(Instant::now());
    }

    /// Busy mode: what the terminal and the socket have, waiting up to
    /// `timeout` for something. Empty when nothing came (or the terminal
    /// is closed).
    pub fn next_events(&self, timeout: Duration) -> Vec<ReaderEvent> {
        // The thread holds the side only for a read, never while it waits.
        let mut side = self.shared.side();
        // What the thread read before it let go comes first.
        let mut events = self.shared.queue().take_all();
        if !events.is_empty() || side.closed {
            return events;
        }
        let millis = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
        // Timed out or interrupted: the caller looks again.
        let _ = side.poll_and_read(PollTimeout::from(millis), &mut events);
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
            loop {
                if queue.stop {
                    return;
                }
                let idle_for = match (queue.busy, queue.idle_since) {
                    (false, Some(since)) => since.elapsed(),
                    // Idle from the start (never the case today: the shell's
                    // start-up is waited for in busy mode).
                    (false, None) => HANDOVER_DELAY,
                    (true, _) => Duration::ZERO,
                };
                if idle_for >= HANDOVER_DELAY {
                    queue.polling = true;
                    break;
                }
                queue = shared
                    .mode
                    .wait_timeout(queue, HANDOVER_DELAY - idle_for)
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .0;
            }
        }
        let (terminal_closed, reports_closed) = {
            let side = shared.side();
            (side.closed, side.reports.closed)
        };
        if terminal_closed {
            shared.queue().polling = false;
            return;
        }
        match wait_until_ready(shared, reports_closed) {
            Ok(woken) => {
                if woken {
                    let _ = (&shared.wake_reader).read(&mut scratch);
                }
            }
            Err(nix::errno::Errno::EINTR) => {}
            Err(_) => {
                shared.queue().polling = false;
                return;
            }
        }
        // A command that began meanwhile reads for itself; otherwise what
        // is ready is read and queued while the side is held.
        if !shared.queue().busy {
            let mut side = shared.side();
            if !shared.queue().busy {
                let mut events = Vec::new();
                side.take_ready(&mut events);
                let mut queue = shared.queue();
                for event in events {
                    queue.push(event);
                }
            }
        }
        shared.queue().polling = false;
    }
}

/// Waits, without a time limit and without holding the side, until the
/// terminal or the report socket (unless closed: a closed socket is always
/// readable) has something or the wake-up pipe has a byte. Returns whether
/// the pipe woke it.
fn wait_until_ready(shared: &Shared, reports_closed: bool) -> Result<bool, nix::errno::Errno> {
    let mut fds = vec![
        PollFd::new(shared.wake_reader.as_fd(), PollFlags::POLLIN),
        PollFd::new(shared.watch_terminal.as_fd(), PollFlags::POLLIN),
    ];
    if !reports_closed {
        fds.push(PollFd::new(shared.watch_reports.as_fd(), PollFlags::POLLIN));
    }
    poll(&mut fds, PollTimeout::NONE)?;
    Ok(fds[0].any().unwrap_or(false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bash::marker::Notes;

    /// A reader on a fresh terminal, with a report socket nobody writes to,
    /// and the terminal's other side to write as the shell would.
    fn reader_on_a_terminal() -> (PtyReader, File, UnixStream) {
        let pty = nix::pty::openpty(None, None).expect("a pseudo-terminal");
        let (host_end, shell_end) = UnixStream::pair().expect("a socket pair");
        let place = ReportPlace {
            shell: 0,
            fd: 0,
            inode: 0,
        };
        let reader = PtyReader::start(pty.master, ReportSocket::new(host_end, place))
            .expect("the reader starts");
        (reader, File::from(pty.slave), shell_end)
    }

    fn backlog_text(backlog: &IdleBacklog) -> String {
        let mut text = Vec::new();
        for event in &backlog.events {
            if let ReaderEvent::Output(bytes) = event {
                text.extend_from_slice(bytes);
            }
        }
        String::from_utf8_lossy(&text).into_owned()
    }

    #[test]
    fn output_between_commands_is_backlog_whether_or_not_the_thread_took_over() {
        // Before the hand-over delay (the command loop reads it when the
        // next command begins) and well after it (the thread read it).
        for pause in [Duration::from_millis(2), HANDOVER_DELAY * 10] {
            let (reader, mut shell_side, _reports) = reader_on_a_terminal();
            reader.end_command();
            shell_side.write_all(b"between\n").expect("write");
            thread::sleep(pause);
            let mut text = backlog_text(&reader.begin_command());
            // The terminal may pass the bytes on late on a loaded machine:
            // then they are still not the next command's.
            for _ in 0..100 {
                if text.contains("between") {
                    break;
                }
                reader.end_command();
                thread::sleep(Duration::from_millis(1));
                text += &backlog_text(&reader.begin_command());
            }
            assert!(text.contains("between"), "after {pause:?}: {text:?}");
        }
    }

    #[test]
    fn idle_queue_keeps_the_newest_output_and_every_report() {
        let mut queue = Queue::default();
        let report = PromptReport {
            seq: 1,
            exit_code: 0,
            flags: String::new(),
            notes: Notes::default(),
            cwd: "/".into(),
            jobs: String::new(),
        };
        queue.push(ReaderEvent::Output(vec![b'a'; IDLE_LIMIT]));
        queue.push(ReaderEvent::Prompt(report.clone()));
        queue.push(ReaderEvent::Refused(Refusal::OutOfPlace));
        queue.push(ReaderEvent::Refused(Refusal::OutOfPlace));
        queue.push(ReaderEvent::Output(vec![b'b'; 100]));
        assert_eq!(queue.output_bytes, IDLE_LIMIT);
        assert_eq!(queue.dropped_bytes, 100);
        let events = queue.take_all();
        assert_eq!(events.len(), 4, "{events:?}");
        assert_eq!(events[1], ReaderEvent::Prompt(report));
        assert_eq!(events[3], ReaderEvent::Output(vec![b'b'; 100]));
    }
}
