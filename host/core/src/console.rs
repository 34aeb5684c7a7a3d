//! The `-v` observer: a human-readable account of the session on stderr.
//!
//! One short line per event, prefixed with the local-independent UTC time of
//! day, so a person watching a session (or a plugin author debugging one)
//! sees commands, their durations, timeouts and failures as they happen. It
//! never writes to stdout, which belongs to the protocol.

use std::io::Write;
use std::path::Path;

use crate::environment::EnvironmentKind;
use crate::events::{Event, Observer, ObserverError, StampedEvent};

/// Longest command or output excerpt shown on one console line.
const EXCERPT_CHARS: usize = 80;

#[derive(Default)]
/// The `-v` observer: one line per event on stderr.
pub struct ConsoleObserver;

impl ConsoleObserver {
    /// An observer that writes to stderr.
    pub fn new() -> Self {
        ConsoleObserver
    }
}

impl Observer for ConsoleObserver {
    fn name(&self) -> &str {
        "console"
    }

    fn observe(&mut self, stamped: &StampedEvent) -> Result<(), ObserverError> {
        let stamp = humantime::format_rfc3339_millis(stamped.at).to_string();
        // Keep only the time of day: HH:MM:SS.mmm.
        let time = stamp.get(11..23).unwrap_or(&stamp);
        let line = describe(&stamped.event);
        let mut stderr = std::io::stderr().lock();
        writeln!(stderr, "[{time}] {line}")?;
        Ok(())
    }
}

/// One line describing an event for a person.
pub fn describe(event: &Event) -> String {
    match event {
        Event::HostStarted {
            version,
            project,
            mode,
        } => format!(
            "envhost {version} started ({mode}) in {}",
            project.display()
        ),
        Event::HostStopping { reason } => format!("stopping: {reason}"),
        Event::EnvironmentLoaded { name, kind, detail } => {
            let kind = kind_word(*kind);
            match detail {
                Some(detail) => format!("loaded {kind} environment {name}: {detail}"),
                None => format!("loaded {kind} environment {name}"),
            }
        }
        Event::EnvironmentFailed { name, reason } => {
            format!("environment {name} failed to load: {reason}")
        }
        Event::EnvironmentRestarted { name, reason, lost } => {
            format!("{name} restarted ({reason}); lost: {lost}")
        }
        Event::CommandReceived {
            environment,
            command,
            ..
        } => format!("{environment} <- {}", excerpt(command)),
        Event::CommandFinished {
            environment,
            success,
            duration_ms,
            output_bytes,
            output,
            ..
        } => format!(
            "{environment} -> {} in {duration_ms:.1} ms, {output_bytes} bytes{}",
            if *success { "ok" } else { "FAILED" },
            excerpt_after_colon(output)
        ),
        Event::CommandYielded {
            environment,
            duration_ms,
            output_bytes,
            output,
            ..
        } => format!(
            "{environment} -> still running after {duration_ms:.1} ms, {output_bytes} bytes{}",
            excerpt_after_colon(output)
        ),
        Event::WaitRequested {
            environment,
            timeout_ms,
            ..
        } => format!("{environment} <- wait (up to {timeout_ms} ms)"),
        Event::InputTyped {
            environment, text, ..
        } => format!("{environment} <- input {}", excerpt(text)),
        Event::InterruptRequested { environment, .. } => format!("{environment} <- interrupt"),
        Event::RestartRequested { environment, .. } => format!("{environment} <- restart"),
        Event::CloseRequested { environment, .. } => format!("{environment} <- close"),
        Event::EnvironmentClosed { name, ended } => format!("{name} closed; ended: {ended}"),
        Event::CommandTimedOut {
            environment,
            after_ms,
        } => format!("{environment} timed out after {after_ms} ms"),
        Event::OutputCapped {
            environment,
            total_bytes,
            saved_to,
        } => output_capped(environment, *total_bytes, saved_to.as_deref()),
        Event::PluginTrapped { environment, cause } => {
            format!("plugin {environment} trapped: {cause}")
        }
        Event::FileRead {
            path,
            offset,
            bytes,
        } => format!("sent {path}: {bytes} bytes from offset {offset}"),
        Event::FileWritten {
            path,
            bytes,
            complete,
        } => file_written(path, *bytes, *complete),
        Event::FileRefused { path, reason, .. } => format!("refused file {path} ({reason})"),
        Event::ProtocolError { message } => format!("bad input: {message}"),
        Event::Error { context, message } => format!("error in {context}: {message}"),
    }
}

fn output_capped(environment: &str, total_bytes: u64, saved_to: Option<&Path>) -> String {
    match saved_to {
        Some(path) => format!(
            "{environment} output capped ({total_bytes} bytes, full text in {})",
            path.display()
        ),
        None => format!("{environment} output capped ({total_bytes} bytes)"),
    }
}

fn file_written(path: &str, bytes: u64, complete: bool) -> String {
    if complete {
        format!("wrote {path} ({bytes} bytes)")
    } else {
        format!("writing {path}: {bytes} bytes so far")
    }
}

fn kind_word(kind: EnvironmentKind) -> &'static str {
    match kind {
        EnvironmentKind::Builtin => "built-in",
        EnvironmentKind::Plugin => "plugin",
    }
}

/// `: ` and the excerpt of `output`; nothing when it is empty.
fn excerpt_after_colon(output: &str) -> String {
    if output.is_empty() {
        String::new()
    } else {
        format!(": {}", excerpt(output))
    }
}

/// The first line of `text`, cut to a console-friendly length.
fn excerpt(text: &str) -> String {
    let first_line = text.lines().next().unwrap_or("");
    let more_lines = text.lines().nth(1).is_some();
    let mut out: String = first_line.chars().take(EXCERPT_CHARS).collect();
    if more_lines || first_line.chars().count() > EXCERPT_CHARS {
        out.push_str(" …");
    }
    format!("{out:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_finished_commands_briefly() {
        let line = describe(&Event::CommandFinished {
            id: None,
            environment: "bash".into(),
            success: false,
            duration_ms: 12.34,
            output_bytes: 3,
            output: "boom\nsecond line".into(),
        });
        assert_eq!(line, "bash -> FAILED in 12.3 ms, 3 bytes: \"boom …\"");
    }
}
