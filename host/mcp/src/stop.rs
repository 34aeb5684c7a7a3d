//! The signals that stop the MCP server: SIGTERM, SIGINT and SIGHUP, as
//! for every front end. The server then sets the host's cancel flag, so
//! that a command in progress ends promptly, and stops serving; the caller
//! shuts the environments down and reaps every process.

use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::error::ServeError;

/// The watched signals.
pub(crate) struct Signals {
    terminate: Signal,
    interrupt: Signal,
    hang_up: Signal,
}

impl Signals {
    pub(crate) fn install() -> Result<Signals, ServeError> {
        let watch = |kind| signal(kind).map_err(ServeError::Runtime);
        Ok(Signals {
            terminate: watch(SignalKind::terminate())?,
            interrupt: watch(SignalKind::interrupt())?,
            hang_up: watch(SignalKind::hangup())?,
        })
    }

    /// The next signal's name.
    pub(crate) async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.terminate.recv() => "SIGTERM",
            _ = self.interrupt.recv() => "SIGINT",
            _ = self.hang_up.recv() => "SIGHUP",
        }
    }
}
