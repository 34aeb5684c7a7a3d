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
use envhost_core::{Orchestrator, RequestId};
use envhost_files::{FileError, ProjectFiles};
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
    files: &mut ProjectFiles,
    output: &mut dyn Write,
    cancel: &CancelFlag,
    max_line_bytes: usize,
) -> StopReason {
    match InterruptibleInput::new(std::io::stdin(), cancel) {
        Ok(input) => run(
            orchestrator,
            files,
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
                files,
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
    files: &mut ProjectFiles,
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
        if let Err(err) = answer(orchestrator, files, &raw, output, max_line_bytes) {
            return StopReason::OutputClosed(err.to_string());
        }
    }
}

fn answer(
    orchestrator: &Orchestrator,
    files: &mut ProjectFiles,
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
        Request::ReadFile {
            id,
            path,
            offset,
            length,
        } => {
            return match files.read(path, *offset, *length) {
                Ok(chunk) => {
                    orchestrator.emit(Event::FileRead {
                        path: path.clone(),
                        offset: *offset,
                        bytes: chunk.content.len() as u64,
                    });
                    protocol::write_reply(
                        output,
                        &Reply::File {
                            id: id.as_ref(),
                            path,
                            size: chunk.size,
                            offset: chunk.offset,
                            content: &chunk.content,
                            eof: chunk.eof,
                        },
                    )
                }
                Err(err) => refuse(orchestrator, output, id.as_ref(), path, &err),
            };
        }
        Request::WriteFile {
            id,
            path,
            content,
            append,
            more,
        } => {
            return match files.write(path, content, *append, *more) {
                Ok(written) => {
                    orchestrator.emit(Event::FileWritten {
                        path: path.clone(),
                        bytes: written.size,
                        complete: written.complete,
                    });
                    protocol::write_reply(
                        output,
                        &Reply::FileWritten {
                            id: id.as_ref(),
                            path,
                            size: written.size,
                            complete: written.complete,
                        },
                    )
                }
                Err(err) => refuse(orchestrator, output, id.as_ref(), path, &err),
            };
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

/// The answer to a file request that could not be done.
fn refuse(
    orchestrator: &Orchestrator,
    output: &mut dyn Write,
    id: Option<&RequestId>,
    path: &str,
    err: &FileError,
) -> std::io::Result<()> {
    let message = err.to_string();
    orchestrator.emit(Event::FileRefused {
        path: path.to_owned(),
        reason: err.reason().to_owned(),
        message: message.clone(),
    });
    protocol::write_reply(
        output,
        &Reply::Refused {
            id,
            message: &message,
            reason: err.reason(),
        },
    )
}
