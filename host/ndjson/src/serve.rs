//! `envhost serve`: the NDJSON front end an agent talks to.
//!
//! It reads stdin on the main thread, one line at a time and never more
//! than one line's cap in memory, parses each with `protocol`, hands
//! commands to the orchestrator and writes exactly one answer per non-blank
//! line, in order, even when several requests are about one running
//! command (`wait`, `input`, `interrupt`). Reads and writes wait on their
//! stream and the signal self-pipe together, so a signal stops the server
//! even while it waits for input or for an agent that stopped reading, with
//! no thread hand-off on the path of every command. It stops on end of
//! input, a signal, or a closed output, and then shuts everything down. It
//! must not know what any environment is.

use std::io::{BufRead, BufReader, Write};

use crate::signals::{self, HostSignal, InterruptibleInput, SignalWatch};
use crate::stdout::AgentOutput;
use crate::watch::Watcher;
use envhost_core::CancelFlag;
use envhost_core::Event;
use envhost_core::{Orchestrator, RequestId};
use envhost_files::{FileError, ProjectFiles};
use envhost_protocol::{self as protocol, LineReader, Parsed, RawLine, Reply, Request};

/// Why the server stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    EndOfInput,
    Signal(HostSignal),
    InputFailed(String),
    OutputClosed(String),
}

impl StopReason {
    pub fn describe(&self) -> String {
        match self {
            StopReason::EndOfInput => "end of input".to_owned(),
            StopReason::Signal(signal) => format!("received {}", signal.name()),
            StopReason::InputFailed(err) => format!("reading input failed: {err}"),
            StopReason::OutputClosed(err) => format!("writing output failed: {err}"),
        }
    }
}

/// Serves stdin and stdout until input ends, a signal arrives or the
/// output is closed. The caller shuts the orchestrator down afterwards.
/// With a `watcher`, plugins rebuilt on disk are swapped in before each
/// command.
pub fn run_stdin(
    orchestrator: &mut Orchestrator,
    watcher: Option<Watcher>,
    files: &mut ProjectFiles,
    cancel: &CancelFlag,
    max_line_bytes: usize,
) -> StopReason {
    let watched = SignalWatch::install(cancel).and_then(|watch| {
        let for_output = watch.try_clone()?;
        Ok((watch, for_output))
    });
    match watched {
        Ok((watch, for_output)) => {
            let input = InterruptibleInput::new(std::io::stdin(), watch);
            let mut output = AgentOutput::new(Some(for_output));
            run(
                orchestrator,
                watcher,
                files,
                BufReader::with_capacity(64 * 1024, input),
                &mut output,
                cancel,
                max_line_bytes,
            )
        }
        Err(err) => {
            eprintln!(
                "envhost: cannot watch for signals ({err}); stop the host by closing its input"
            );
            let mut output = AgentOutput::new(None);
            run(
                orchestrator,
                watcher,
                files,
                BufReader::with_capacity(64 * 1024, std::io::stdin()),
                &mut output,
                cancel,
                max_line_bytes,
            )
        }
    }
}

/// Serves `input` until it ends, a signal arrives (the cancel flag is set)
/// or `output` is closed.
pub fn run(
    orchestrator: &mut Orchestrator,
    mut watcher: Option<Watcher>,
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
            return StopReason::Signal(
                next.as_ref()
                    .err()
                    .and_then(signals::signal_of)
                    .unwrap_or(HostSignal::Terminate),
            );
        }
        let raw = match next {
            Ok(Some(raw)) => raw,
            Ok(None) => return StopReason::EndOfInput,
            Err(err) => match signals::signal_of(&err) {
                Some(signal) => return StopReason::Signal(signal),
                None => return StopReason::InputFailed(err.to_string()),
            },
        };
        if let Err(err) = answer(
            orchestrator,
            watcher.as_mut(),
            files,
            &raw,
            output,
            max_line_bytes,
        ) {
            return match signals::signal_of(&err) {
                Some(signal) => StopReason::Signal(signal),
                None => StopReason::OutputClosed(err.to_string()),
            };
        }
    }
}

fn answer(
    orchestrator: &mut Orchestrator,
    watcher: Option<&mut Watcher>,
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
        Request::Command(command) => {
            let said = match watcher {
                Some(watcher) => watcher.refresh(orchestrator),
                None => Vec::new(),
            };
            let mut outcome = orchestrator.execute(command);
            if !said.is_empty() {
                outcome.output = format!("{}\n\n{}", said.join("\n"), outcome.output);
            }
            outcome
        }
        Request::Control(control) => orchestrator.control(control),
    };
    protocol::write_reply(
        output,
        &Reply::Response {
            id: request.id(),
            output: &outcome.output,
            success: outcome.success,
            running: outcome.running,
            files: &outcome.files,
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
