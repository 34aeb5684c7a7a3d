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
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::stdout::{self, AgentOutput};
use envhost_core::CancelFlag;
use envhost_core::Event;
use envhost_core::{Orchestrator, RequestId, panic_message};
use envhost_files::{FileError, ProjectFiles};
use envhost_protocol::{self as protocol, LineReader, Parsed, RawLine, Reply, Request};
use envhost_runtime::signals::{self, HostSignal, InterruptibleInput, SignalWatch};
use envhost_runtime::{Host, Stopped};

/// Serves stdin and stdout until input ends, a signal arrives or the
/// output is closed; a deadly signal or a panic is told on stdout before
/// it returns. The caller stops the host afterwards.
pub fn serve(host: &Host, max_line_bytes: usize) -> Stopped {
    let mut files = host.files();
    let served = catch_unwind(AssertUnwindSafe(|| {
        run_stdin(
            host.orchestrator(),
            &mut files,
            host.cancel(),
            max_line_bytes,
        )
    }));
    match served {
        Ok(Stopped::Signal(HostSignal::Deadly(signal))) => {
            stdout::last_words(&format!(
                "envhost received {} and stops: it shuts every environment down (their \
                 state is lost) and ends every process they started. SIGTERM or the end \
                 of input stop it quietly.",
                signal.as_str()
            ));
            Stopped::Signal(HostSignal::Deadly(signal))
        }
        Ok(stop) => stop,
        Err(panic) => {
            let message = panic_message(panic.as_ref());
            stdout::last_words(&format!(
                "envhost stops after an internal error (panic: {message}). It shuts every \
                 environment down (their state is lost); start it again to go on."
            ));
            Stopped::Panicked(message)
        }
    }
}

fn run_stdin(
    orchestrator: &Orchestrator,
    files: &mut ProjectFiles,
    cancel: &CancelFlag,
    max_line_bytes: usize,
) -> Stopped {
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
    orchestrator: &Orchestrator,
    files: &mut ProjectFiles,
    input: impl BufRead,
    output: &mut dyn Write,
    cancel: &CancelFlag,
    max_line_bytes: usize,
) -> Stopped {
    let mut reader = LineReader::new(input, max_line_bytes);
    loop {
        let next = reader.next_line();
        // A signal during the last command, or while lines were buffered:
        // stop before starting anything new.
        if cancel.is_cancelled() {
            return Stopped::Signal(
                next.as_ref()
                    .err()
                    .and_then(signals::signal_of)
                    .unwrap_or(HostSignal::Terminate),
            );
        }
        let raw = match next {
            Ok(Some(raw)) => raw,
            Ok(None) => return Stopped::EndOfInput,
            Err(err) => match signals::signal_of(&err) {
                Some(signal) => return Stopped::Signal(signal),
                None => return Stopped::InputFailed(err.to_string()),
            },
        };
        if let Err(err) = answer(orchestrator, files, &raw, output, max_line_bytes) {
            return match signals::signal_of(&err) {
                Some(signal) => Stopped::Signal(signal),
                None => Stopped::OutputClosed(err.to_string()),
            };
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
        Request::ReadFile { .. } | Request::WriteFile { .. } => {
            return answer_file_request(orchestrator, files, &request, output);
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
            files: &outcome.files,
            screen: &outcome.screen,
        },
    )
}

/// Reads or writes a project file for the agent, and answers.
fn answer_file_request(
    orchestrator: &Orchestrator,
    files: &mut ProjectFiles,
    request: &Request,
    output: &mut dyn Write,
) -> std::io::Result<()> {
    match request {
        Request::ReadFile {
            id,
            path,
            offset,
            length,
        } => match files.read(path, *offset, *length) {
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
        },
        Request::WriteFile {
            id,
            path,
            content,
            append,
            more,
        } => match files.write(path, content, *append, *more) {
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
        },
        _ => Ok(()),
    }
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
