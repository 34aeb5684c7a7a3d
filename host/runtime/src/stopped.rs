//! Why and how a host stopped: the one answer every front end gives back,
//! from which the binary takes its exit status.

use crate::signals::HostSignal;

/// Why a front end stopped serving (and so the host stopped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopped {
    /// The input ended (the agent closed it, or `:quit`).
    EndOfInput,
    /// A signal arrived.
    Signal(HostSignal),
    /// Reading the input failed.
    InputFailed(String),
    /// Writing an answer failed (the reader went away).
    OutputClosed(String),
    /// The front end panicked (an internal error).
    Panicked(String),
    /// The front end could not serve at all (the MCP server failed).
    Failed(String),
    /// The front end's own words (an MCP client ended the session, the
    /// author tools finished their commands).
    Done(String),
}

impl Stopped {
    /// In a sentence, for the `host_stopping` event.
    pub fn describe(&self) -> String {
        match self {
            Stopped::EndOfInput => "end of input".to_owned(),
            Stopped::Signal(signal) => format!("received {}", signal.name()),
            Stopped::InputFailed(err) => format!("reading input failed: {err}"),
            Stopped::OutputClosed(err) => format!("writing output failed: {err}"),
            Stopped::Panicked(message) => format!("internal error (panic: {message})"),
            Stopped::Failed(err) => err.clone(),
            Stopped::Done(words) => words.clone(),
        }
    }

    /// The process's exit status: 128 + the signal for a deadly signal,
    /// 101 after a panic, 1 when the front end could not serve, else 0.
    pub fn exit_status(&self) -> u8 {
        match self {
            Stopped::Signal(HostSignal::Deadly(signal)) => 128u8.wrapping_add(*signal as u8),
            Stopped::Panicked(_) => 101,
            Stopped::Failed(_) => 1,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::signal::Signal;

    #[test]
    fn the_exit_status_says_how_the_host_stopped() {
        assert_eq!(Stopped::EndOfInput.exit_status(), 0);
        assert_eq!(Stopped::Signal(HostSignal::Terminate).exit_status(), 0);
        assert_eq!(
            Stopped::Signal(HostSignal::Deadly(Signal::SIGSEGV)).exit_status(),
            139
        );
        assert_eq!(Stopped::Panicked("boom".into()).exit_status(), 101);
        assert_eq!(Stopped::Failed("no runtime".into()).exit_status(), 1);
    }
}
