//! Turning SIGTERM, SIGINT and SIGHUP into messages for a front end.
//!
//! Signals are received on a dedicated thread (signal-hook's iterator), so
//! the handler itself only sets flags. Each signal sets the shared
//! [`CancelFlag`] at once, so that a command in progress is interrupted
//! promptly, and is then sent as a [`HostSignal`] to the front end, which
//! decides what it means (the NDJSON server stops; the REPL interrupts the
//! command on Ctrl-C and stops on the others).

use std::thread;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::environment::CancelFlag;

/// A signal the host acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostSignal {
    Terminate,
    Interrupt,
    HangUp,
}

impl HostSignal {
    pub fn name(self) -> &'static str {
        match self {
            HostSignal::Terminate => "SIGTERM",
            HostSignal::Interrupt => "SIGINT",
            HostSignal::HangUp => "SIGHUP",
        }
    }
}

/// Starts the signal thread. Every signal cancels the running command and
/// is then passed to `deliver`; the thread ends when `deliver` returns
/// `false` (its receiver is gone).
pub fn watch(
    cancel: CancelFlag,
    deliver: impl Fn(HostSignal) -> bool + Send + 'static,
) -> std::io::Result<()> {
    let mut signals = Signals::new([SIGTERM, SIGINT, SIGHUP])?;
    thread::Builder::new()
        .name("envhost-signals".into())
        .spawn(move || {
            for number in signals.forever() {
                let signal = match number {
                    SIGTERM => HostSignal::Terminate,
                    SIGINT => HostSignal::Interrupt,
                    _ => HostSignal::HangUp,
                };
                cancel.cancel();
                if !deliver(signal) {
                    return;
                }
            }
        })?;
    Ok(())
}
