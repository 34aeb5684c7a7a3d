//! Turning signals into something a front end can act on.
//!
//! Signal handlers only set flags and write to pipes (signal-hook does the
//! async-signal-safe part). Every signal sets the shared [`CancelFlag`] at
//! once, so that a command in progress is interrupted promptly. Then:
//! - the NDJSON server reads stdin through [`InterruptibleInput`] and
//!   writes stdout through `stdout::AgentOutput`, which wait on their
//!   stream and a [`SignalWatch`]'s self-pipe together, so a signal ends a
//!   blocked read, and a write to an output nobody reads, without a thread
//!   between the agent and the host;
//! - the REPL gets each signal as a message from [`watch`]'s thread, and
//!   decides (Ctrl-C interrupts the command, the others stop).
//!
//! SIGTERM, SIGINT and SIGHUP ask the host to stop: it does, quietly, with
//! status 0. The other signals whose default action would end the host
//! silently ([`DEADLY`]: SIGQUIT, SIGUSR1, ... ) end it too, but the server
//! first says why on stdout; the faults (SIGSEGV, SIGBUS, SIGILL, SIGFPE)
//! are left to their default action, because wasmtime handles them for
//! WebAssembly traps.

use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::Signal;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use envhost_core::CancelFlag;

const WATCHED: [i32; 3] = [SIGTERM, SIGINT, SIGHUP];

/// Signals whose default action ends a program without a word: the server
/// stops as for SIGTERM, saying why on stdout first.
pub const DEADLY: [Signal; 11] = [
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGALRM,
    Signal::SIGVTALRM,
    Signal::SIGPROF,
    Signal::SIGXCPU,
    Signal::SIGXFSZ,
    Signal::SIGPWR,
    Signal::SIGIO,
    Signal::SIGABRT,
];

/// A signal the host acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostSignal {
    /// SIGTERM: stop quietly.
    Terminate,
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGHUP: the terminal went away.
    HangUp,
    /// One of [`DEADLY`].
    Deadly(Signal),
}

impl HostSignal {
    fn from_number(number: i32) -> Self {
        match number {
            SIGTERM => HostSignal::Terminate,
            SIGINT => HostSignal::Interrupt,
            SIGHUP => HostSignal::HangUp,
            other => match Signal::try_from(other) {
                Ok(signal) => HostSignal::Deadly(signal),
                Err(_) => HostSignal::Terminate,
            },
        }
    }

    /// The signal's name (`SIGTERM`).
    pub fn name(self) -> &'static str {
        match self {
            HostSignal::Terminate => "SIGTERM",
            HostSignal::Interrupt => "SIGINT",
            HostSignal::HangUp => "SIGHUP",
            HostSignal::Deadly(signal) => signal.as_str(),
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

/// The error a read or write ended by a signal returns.
#[derive(Debug, thiserror::Error)]
#[error("interrupted by {}", .0.name())]
pub struct SignalArrived(pub HostSignal);

/// The server's signals: each sets the cancel flag, records itself, and
/// makes a self-pipe readable that blocked reads and writes also wait on.
pub struct SignalWatch {
    wake: UnixStream,
    last_signal: Arc<AtomicUsize>,
}

impl SignalWatch {
    /// Installs the handlers for SIGTERM, SIGINT, SIGHUP and [`DEADLY`].
    pub fn install(cancel: &CancelFlag) -> io::Result<Self> {
        let (wake, wake_writer) = UnixStream::pair()?;
        wake.set_nonblocking(true)?;
        wake_writer.set_nonblocking(true)?;
        let last_signal = Arc::new(AtomicUsize::new(0));
        let deadly = DEADLY.iter().map(|signal| *signal as i32);
        for signal in WATCHED.into_iter().chain(deadly) {
            signal_hook::flag::register(signal, cancel.as_atomic())?;
            signal_hook::flag::register_usize(signal, Arc::clone(&last_signal), signal as usize)?;
            signal_hook::low_level::pipe::register(signal, wake_writer.try_clone()?)?;
        }
        Ok(SignalWatch { wake, last_signal })
    }

    /// A second handle on the same signals (for another stream).
    pub fn try_clone(&self) -> io::Result<Self> {
        Ok(SignalWatch {
            wake: self.wake.try_clone()?,
            last_signal: Arc::clone(&self.last_signal),
        })
    }

    /// The last signal that arrived, if any did.
    pub fn arrived(&self) -> Option<HostSignal> {
        match self.last_signal.load(Ordering::SeqCst) {
            0 => None,
            number => Some(HostSignal::from_number(number as i32)),
        }
    }

    /// Waits until `stream` is ready for `ready` or a signal arrives (then
    /// the error says which).
    pub fn wait_for(&self, stream: BorrowedFd<'_>, ready: PollFlags) -> io::Result<()> {
        loop {
            if let Some(signal) = self.arrived() {
                return Err(io::Error::other(SignalArrived(signal)));
            }
            let mut fds = [
                PollFd::new(stream, ready),
                PollFd::new(self.wake.as_fd(), PollFlags::POLLIN),
            ];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(err) => return Err(err.into()),
            }
            if fds[1].revents().is_some_and(|r| !r.is_empty()) && self.arrived().is_some() {
                continue; // reported at the top of the loop
            }
            // Ready, or hung up / in error: the read or write says which.
            if fds[0].revents().is_some_and(|r| !r.is_empty()) {
                return Ok(());
            }
        }
    }
}

/// A reader (stdin) whose blocking reads end when a watched signal arrives.
pub struct InterruptibleInput<R> {
    inner: R,
    watch: SignalWatch,
}

impl<R: Read + AsFd> InterruptibleInput<R> {
    /// Reads `inner`, waiting on it and `watch`'s signals together.
    pub fn new(inner: R, watch: SignalWatch) -> Self {
        InterruptibleInput { inner, watch }
    }
}

impl<R: Read + AsFd> Read for InterruptibleInput<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            self.watch.wait_for(self.inner.as_fd(), PollFlags::POLLIN)?;
            match self.inner.read(buf) {
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                other => return other,
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
