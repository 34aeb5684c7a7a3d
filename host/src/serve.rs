//! `envhost serve`: the NDJSON front end an agent talks to.
//!
//! It reads lines on a reader thread (at most one line ahead, so memory stays
//! bounded however fast the agent writes), parses each with `protocol`,
//! hands commands to the orchestrator and writes exactly one answer per
//! non-blank line, in order. It stops on end of input, on SIGTERM / SIGINT /
//! SIGHUP, or when its output is closed, and then shuts everything down.
//! It must not know what any environment is.

use std::io::{BufRead, Write};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::thread;

use crate::environment::CancelFlag;
use crate::events::Event;
use crate::orchestrator::{CommandRequest, Orchestrator};
use crate::protocol::{self, LineReader, Parsed, RawLine, Reply, Request};
use crate::signals::{self, HostSignal};

enum Input {
    Line(RawLine),
    End,
    ReadFailed(std::io::Error),
    Signal(HostSignal),
}

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

/// Serves `input` until it ends or a signal arrives. The caller shuts the
/// orchestrator down afterwards.
pub fn run(
    orchestrator: &mut Orchestrator,
    input: Box<dyn BufRead + Send>,
    output: &mut dyn Write,
    cancel: &CancelFlag,
    max_line_bytes: usize,
) -> StopReason {
    // A rendezvous-sized channel: the reader is at most one line ahead.
    let (sender, receiver) = mpsc::sync_channel::<Input>(1);
    let (signal_sender, signal_receiver) = mpsc::channel::<Input>();
    let deliver = move |signal| signal_sender.send(Input::Signal(signal)).is_ok();
    if let Err(err) = signals::watch(cancel.clone(), deliver) {
        eprintln!("envhost: cannot watch for signals ({err}); stop the host by closing its input");
    }
    spawn_reader(input, max_line_bytes, sender);
    loop {
        let next = next_input(&receiver, &signal_receiver);
        if let Some(signal) = pending_signal(&signal_receiver, cancel) {
            return StopReason::Signal(signal.name());
        }
        let raw = match next {
            Input::Line(raw) => raw,
            Input::End => return StopReason::EndOfInput,
            Input::ReadFailed(err) => return StopReason::InputFailed(err.to_string()),
            Input::Signal(signal) => return StopReason::Signal(signal.name()),
        };
        if let Err(err) = answer(orchestrator, &raw, output, max_line_bytes) {
            return StopReason::OutputClosed(err.to_string());
        }
    }
}

/// Waits for a line or a signal, whichever comes first.
fn next_input(lines: &Receiver<Input>, signals: &Receiver<Input>) -> Input {
    loop {
        if let Ok(signal) = signals.try_recv() {
            return signal;
        }
        match lines.recv_timeout(std::time::Duration::from_millis(50)) {
            Ok(input) => return input,
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => return Input::End,
        }
    }
}

/// A signal that arrived while a command was running.
fn pending_signal(signals: &Receiver<Input>, cancel: &CancelFlag) -> Option<HostSignal> {
    match signals.try_recv() {
        Ok(Input::Signal(signal)) => Some(signal),
        _ if cancel.is_cancelled() => Some(HostSignal::Terminate),
        _ => None,
    }
}

fn spawn_reader(input: Box<dyn BufRead + Send>, max_line_bytes: usize, sender: SyncSender<Input>) {
    let spawned = thread::Builder::new()
        .name("envhost-stdin".into())
        .spawn(move || {
            let mut reader = LineReader::new(input, max_line_bytes);
            loop {
                let message = match reader.next_line() {
                    Ok(Some(raw)) => Input::Line(raw),
                    Ok(None) => Input::End,
                    Err(err) => Input::ReadFailed(err),
                };
                let last = !matches!(message, Input::Line(_));
                if sender.send(message).is_err() || last {
                    return;
                }
            }
        });
    if let Err(err) = spawned {
        eprintln!("envhost: cannot start the input reader: {err}");
    }
}

fn answer(
    orchestrator: &mut Orchestrator,
    raw: &RawLine,
    output: &mut dyn Write,
    max_line_bytes: usize,
) -> std::io::Result<()> {
    match protocol::parse_line(raw, max_line_bytes) {
        Parsed::Blank => Ok(()),
        Parsed::Invalid(err) => {
            orchestrator.emit(Event::ProtocolError {
                message: err.message.clone(),
            });
            protocol::write_reply(
                output,
                &Reply::Error {
                    id: err.id.as_ref(),
                    message: &err.message,
                },
            )
        }
        Parsed::Request(Request::Screen { id }) => {
            let screen = orchestrator.screen();
            protocol::write_reply(
                output,
                &Reply::Screen {
                    id: id.as_ref(),
                    screen: &screen,
                },
            )
        }
        Parsed::Request(Request::Command {
            id,
            environment,
            command,
            timeout,
        }) => {
            let request = CommandRequest {
                environment,
                command,
                timeout,
                id,
            };
            let outcome = orchestrator.execute(&request);
            protocol::write_reply(
                output,
                &Reply::Response {
                    id: request.id.as_ref(),
                    output: &outcome.output,
                    success: outcome.success,
                    screen: &outcome.screen,
                },
            )
        }
    }
}
