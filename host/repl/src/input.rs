//! What reaches the REPL's loop from the thread that reads the terminal or
//! the script, and from the signal handler. Plain values, shared by the
//! loop and the line editor; it must not know how either works.

use envhost_runtime::signals::HostSignal;

/// What reaches the REPL's loop.
pub(crate) enum Input {
    /// An entry: a line, or at a terminal a whole block.
    Line(String),
    /// Ctrl-C at the prompt: the line was cleared.
    Cleared,
    /// The end of input (Ctrl-D at an empty prompt).
    End,
    /// A signal the host received (SIGINT, SIGTERM, SIGHUP).
    Signal(HostSignal),
}
