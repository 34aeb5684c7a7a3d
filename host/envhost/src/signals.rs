//! Turning SIGTERM, SIGINT and SIGHUP into something a front end can act on.
//!
//! Signal handlers only set flags and write to pipes (signal-hook does the
//! async-signal-safe part). Every signal sets the shared [`CancelFlag`] at
//! once, so that a command in progress is interrupted promptly. Then:
//! - the NDJSON server reads stdin through [`InterruptibleInput`], which
//!   waits on stdin and a signal self-pipe together, so a signal ends a
//!   blocked read without a reader thread between the agent and the host;
//! - the REPL gets each signal as a message from [`watch`]'s thread, and
//!   decides (Ctrl-C interrupts the command, the others stop).

use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use envhost_core::CancelFlag;

const WATCHED: [i32; 3] = [SIGTERM, SIGINT, SIGHUP];

/// A signal the host acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostSignal {
    Terminate,
    Interrupt,
    HangUp,
}

impl HostSignal {
    fn from_number(number: i32) -> Self {
        match number {
            SIGTERM => HostSignal::Terminate,
            SIGINT => HostSignal::Interrupt,
            _ => HostSignal::HangUp,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            HostSignal::Terminate => "SIGTERM",
            HostSignal::Interrupt => "SIGINT",
            HostSignal::HangUp => "SIGHUP",
        }
    }
}

/// Starts a thread that, for every signal, cancels the running command and
/// passes the signal to `deliver`; the thread ends when `deliver` returns
/// `false` (its receiver is gone).
pub fn watch(
    cancel: CancelFlag,
    deliver: impl Fn(HostSignal) -> bool + Send + 'static,
) -> io::Result<()> {
    let mut signals = Signals::new(WATCHED)?;
    thread::Builder::new()
        .name("envhost-signals".into())
        .spawn(move || {
            for number in signals.forever() {
                cancel.cancel();
                if !deliver(HostSignal::from_number(number)) {
                    return;
                }
            }
        })?;
    Ok(())
}

/// The error [`InterruptibleInput::read`] returns when a signal arrived.
#[derive(Debug, thiserror::Error)]
#[error("interrupted by {}", .0.name())]
pub struct SignalArrived(pub HostSignal);

/// A reader (stdin) whose blocking reads end when a watched signal arrives.
pub struct InterruptibleInput<R> {
    inner: R,
    wake: UnixStream,
    last_signal: Arc<AtomicUsize>,
}

impl<R: Read + AsFd> InterruptibleInput<R> {
    /// Installs the handlers: each watched signal sets `cancel`, records
    /// itself and writes a byte to a self-pipe that `read` also waits on.
    pub fn new(inner: R, cancel: &CancelFlag) -> io::Result<Self> {
        let (wake, wake_writer) = UnixStream::pair()?;
        wake.set_nonblocking(true)?;
        let last_signal = Arc::new(AtomicUsize::new(0));
        for signal in WATCHED {
            signal_hook::flag::register(signal, cancel.as_atomic())?;
            signal_hook::flag::register_usize(signal, Arc::clone(&last_signal), signal as usize)?;
            signal_hook::low_level::pipe::register(signal, wake_writer.try_clone()?)?;
        }
        Ok(InterruptibleInput {
            inner,
            wake,
            last_signal,
        })
    }

    fn arrived(&self) -> Option<HostSignal> {
        match self.last_signal.load(Ordering::SeqCst) {
            0 => None,
            number => Some(HostSignal::from_number(number as i32)),
        }
    }
}

impl<R: Read + AsFd> Read for InterruptibleInput<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if let Some(signal) = self.arrived() {
                return Err(io::Error::other(SignalArrived(signal)));
            }
            let input = self.inner.as_fd();
            let wake: BorrowedFd<'_> = self.wake.as_fd();
            let mut fds = [
                PollFd::new(input, PollFlags::POLLIN),
                PollFd::new(wake, PollFlags::POLLIN),
            ];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(err) => return Err(err.into()),
            }
            let input_ready = fds[0].revents().is_some_and(|r| !r.is_empty());
            if fds[1].revents().is_some_and(|r| !r.is_empty()) && self.arrived().is_some() {
                continue; // reported at the top of the loop
            }
            if input_ready {
                match self.inner.read(buf) {
                    Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                    other => return other,
                }
            }
        }
    }
}

/// The signal behind an error from [`InterruptibleInput`], if any.
pub fn signal_of(err: &io::Error) -> Option<HostSignal> {
    err.get_ref()
        .and_then(|inner| inner.downcast_ref::<SignalArrived>())
        .map(|arrived| arrived.0)
}
