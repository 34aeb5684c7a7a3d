//! `envhost serve`'s standard output: the one stream the agent reads.
//!
//! It owns two promises. A write never blocks the host for good once a
//! signal has arrived: when stdout is a pipe or a socket it is made
//! non-blocking, and a full pipe (an agent that stopped reading) is waited
//! on together with the signal self-pipe, so SIGTERM stops the host even
//! then. And when the host must die, its last words are one
//! `{"type":"error","message":...}` line saying why, written only if stdout
//! takes it at once (on a line of its own if an answer was cut short).
//! It must not know what the answers say.

use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::poll::PollFlags;
use nix::sys::stat::{SFlag, fstat};

use envhost_protocol::{Reply, write_reply};

use envhost_runtime::signals::SignalWatch;

/// The last byte written to stdout was not a newline: an answer was cut
/// short, and last words must start on a new line.
static MID_LINE: AtomicBool = AtomicBool::new(false);

/// The last words were said: nothing more is written.
static SAID: AtomicBool = AtomicBool::new(false);

/// The line written from the SIGABRT handler, made before it can run.
static ABORT_LINE: OnceLock<Vec<u8>> = OnceLock::new();

/// What the host says when it aborts (`abort()`: an allocation that
/// failed, or a panic while panicking).
const ABORT_MESSAGE: &str = "envhost is aborting (SIGABRT): an internal failure it cannot \
     recover from, such as running out of memory. The session is over and the environments' \
     state is lost; start envhost again.";

/// stdout for the NDJSON server: writes that a signal ends when nobody
/// reads.
pub struct AgentOutput {
    stdout: io::Stdout,
    watch: Option<SignalWatch>,
    /// stdout's flags before it was made non-blocking, to put back.
    restore: Option<OFlag>,
}

impl AgentOutput {
    /// stdout, made non-blocking when it is a pipe or a socket and `watch`
    /// can wake its writes; otherwise written as it is (a terminal or a
    /// file does not fill up for good).
    pub fn new(watch: Option<SignalWatch>) -> Self {
        let stdout = io::stdout();
        let mut restore = None;
        if watch.is_some()
            && is_pipe_or_socket(&stdout)
            && let Ok(bits) = fcntl(stdout.as_raw_fd(), FcntlArg::F_GETFL)
        {
            let flags = OFlag::from_bits_truncate(bits);
            let nonblocking = flags | OFlag::O_NONBLOCK;
            if fcntl(stdout.as_raw_fd(), FcntlArg::F_SETFL(nonblocking)).is_ok() {
                restore = Some(flags);
            }
        }
        AgentOutput {
            stdout,
            watch,
            restore,
        }
    }
}

impl Write for AgentOutput {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            match nix::unistd::write(self.stdout.as_fd(), buf) {
                Ok(written) => {
                    if let Some(last) = buf[..written].last() {
                        MID_LINE.store(*last != b'\n', Ordering::SeqCst);
                    }
                    return Ok(written);
                }
                Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) => match &self.watch {
                    Some(watch) => watch.wait_for(self.stdout.as_fd(), PollFlags::POLLOUT)?,
                    None => return Err(Errno::EAGAIN.into()),
                },
                Err(err) => return Err(err.into()),
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for AgentOutput {
    fn drop(&mut self) {
        // Whoever shares this pipe after the host gets it as it was.
        if let Some(flags) = self.restore {
            let _ = fcntl(self.stdout.as_raw_fd(), FcntlArg::F_SETFL(flags));
        }
    }
}

fn is_pipe_or_socket(stdout: &io::Stdout) -> bool {
    fstat(stdout.as_raw_fd()).is_ok_and(|stat| {
        let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
        kind == SFlag::S_IFIFO || kind == SFlag::S_IFSOCK
    })
}

/// The host's last words: one error line saying why it dies, if stdout
/// takes it without waiting, and only once.
pub fn last_words(message: &str) {
    if SAID.swap(true, Ordering::SeqCst) {
        return;
    }
    let mut line = Vec::new();
    if write_reply(&mut line, &Reply::Error { id: None, message }).is_ok() {
        write_now(&line);
    }
}

/// From now on, `abort()` (and SIGABRT) says its last words before the
/// host dies. Call once, early.
pub fn say_last_words_on_abort() -> io::Result<()> {
    let mut line = Vec::new();
    write_reply(
        &mut line,
        &Reply::Error {
            id: None,
            message: ABORT_MESSAGE,
        },
    )?;
    let line = ABORT_LINE.get_or_init(|| line);
    // SAFETY: the action only reads and swaps atomics and calls write(2),
    // all async-signal-safe; it allocates nothing (the line was made
    // above).
    unsafe {
        signal_hook::low_level::register(signal_hook::consts::SIGABRT, move || {
            if !SAID.swap(true, Ordering::SeqCst) {
                write_now(line);
            }
        })?;
    }
    Ok(())
}

/// Writes `line` (after a newline if an answer was cut short) as far as
/// stdout takes it without blocking. Async-signal-safe.
fn write_now(line: &[u8]) {
    // SAFETY: descriptor 1 stays open for the life of the process (nothing
    // in the host closes it); `io::stdout()` is avoided here because its
    // first use may allocate, which a signal handler must not.
    let fd = unsafe { BorrowedFd::borrow_raw(1) };
    if MID_LINE.load(Ordering::SeqCst) {
        let _ = nix::unistd::write(fd, b"\n");
    }
    let mut rest = line;
    while !rest.is_empty() {
        match nix::unistd::write(fd, rest) {
            Ok(0) => return,
            Ok(written) => rest = &rest[written..],
            Err(Errno::EINTR) => {}
            Err(_) => return,
        }
    }
}
