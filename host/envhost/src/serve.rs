//! `envhost serve`: the NDJSON front end an agent talks to.
//!
//! It reads stdin on the main thread, one line at a time and never more
//! than one line's cap in memory, parses each with `protocol`, hands
//! commands to the orchestrator and writes exactly one answer per non-blank
//! line, in order. Reads wait on stdin and the signal self-pipe together, so
//! SIGTERM / SIGINT / SIGHUP stop the server even while it waits for input,
//! with no thread hand-off on the path of every command. It stops on end of
//! input, a signal, or a closed output, and then shuts everything down. It
//! must not know what any environment is.

use std::io::{BufRead, BufReader, Write};

use crate::signals::{self, InterruptibleInput};
use envhost_core::CancelFlag;
use envhost_core::Event;
use envhost_core::Orchestrator;
use envhost_protocol::{self as protocol, LineReader, Parsed, RawLine, Reply, Request};

/// Why the server stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    EndOfInput,
    Signal(&'static str),
    InputFailed(String),
    OutputClosed(String),
}

impl StopReason {
    pub fn describe(&self) -> String {
        match self {
            StopReason::EndOfInput => "end of input".to_owned(),
            StopReason::Signal(name) => format!("received {name}"),
            StopReason::InputFailed(err) => format!("reading input failed: {err}"),
            StopReason::OutputClosed(err) => format!("writing output failed: {err}"),
        }
    }
}

/// Serves stdin until it ends or a signal arrives. The caller shuts the
/// orchestrator down afterwards.
pub fn run_stdin(
    orchestrator: &Orchestrator,
    output: &mut dyn Write,
    cancel: &CancelFlag,
    max_line_bytes: usize,
) -> StopReason {
    match InterruptibleInput::new(std::io::stdin(), cancel) {
        Ok(input) => run(
            orchestrator,
            BufReader::with_capacity(64 * 1024, input),
            output,
            cancel,
            max_line_bytes,
        ),
        Err(err) => {
            eprintln!(
                "envhost: cannot watch for signals ({err}); stop the host by closing its input"
            );
            run(
                orchestrator,
                BufReader::with_capacity(64 * 1024, std::io::stdin()),
                output,
                cancel,
                max_line_bytes,
            )
        }
    }
}

/// Serves `input` until it ends, a signal arrives (the cancel flag is set)
/// or `output` is closed.
pub fn run(
    orchestrator: &Orchestrator,
    input: impl BufRead,
    output: &mut dyn Write,
    cancel: &CancelFlag,
    max_line_bytes: usize,
) -> StopReason {
    let mut reader = LineReader::new(input, max_line_bytes);
    loop {
        let next = reader.next_line();
        // A signal during the last command, or while lines were buffered:
        // stop before starting anything new.
        if cancel.is_cancelled() {
            return StopReason::Signal(match next.as_ref().err().and_then(signals::signal_of) {
                Some(signal) => signal.name(),
                None => "a signal",
            });
        }
        let raw = match next {
            Ok(Some(raw)) => raw,
            Ok(None) => return StopReason::EndOfInput,
            Err(err) => match signals::signal_of(&err) {
                Some(signal) => return StopReason::Signal(signal.name()),
                None => return StopReason::InputFailed(err.to_string()),
            },
        };
        if let Err(err) = answer(orchestrator, &raw, output, max_line_bytes) {
            return StopReason::OutputClosed(err.to_string());
        }
    }
}

fn answer(
    orchestrator: &Orchestrator,
    raw: &RawLine,
    output: &mut dyn Write,
    max_line_bytes: usize,
) -> std::io::Result<()> {
    let request = match protocol::parse_line(raw, max_line_bytes) {
        Parsed::Blank => return Ok(()),
        Parsed::Invalid(err) => {
            orchestrator.emit(Event::ProtocolError {
                message: err.message.clone(),
            });
            return protocol::write_reply(
                output,
                &Reply::Error {
                    id: err.id.as_ref(),
                    message: &err.message,
                },
            );
        }
        Parsed::Request(request) => request,
    };
    let outcome = match &request {
        Request::Screen { id } => {
            let screen = orchestrator.screen();
            return protocol::write_reply(
                output,
                &Reply::Screen {
                    id: id.as_ref(),
                    screen: &screen,
                },
            );
        }
        Request::Command(command) => orchestrator.execute(command),
        Request::Control(control) => orchestrator.control(control),
    };
    protocol::write_reply(
        output,
        &Reply::Response {
            id: request.id(),
            output: &outcome.output,
            success: outcome.success,
            running: outcome.running,
            screen: &outcome.screen,
        },
    )
}
