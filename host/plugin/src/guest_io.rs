//! Where a plugin's stdout, stderr and log lines go: into bounded memory,
//! one call at a time, then to the host's log (stderr) with the plugin's
//! name. Never to the host's stdout, which is the protocol channel.
//!
//! This module owns the WASI output streams given to plugins and the
//! per-call bound ([`PER_CALL_LIMIT`]), and hands the text over made safe
//! to show (`plugin_text`); past it, output is dropped and
//! counted (a write never fails, so a chatty plugin does not trap on a full
//! pipe). It must not decide what a call's failure means; it only keeps the
//! text (`instance` reads the stderr of a trapped call to name a panic).

use std::borrow::Cow;
use std::fmt;
use std::io::Write;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

use crate::plugin_text;

/// Bytes of stdout + stderr + log text kept per call.
pub const PER_CALL_LIMIT: usize = 64 * 1024;

/// Distinct notes the host keeps per call; more are counted.
const NOTES_LIMIT: usize = 5;

/// Largest write a guest is invited to make at once (WASI's usual 64 KiB
/// permit; bigger writes are split by the guest's libc).
const WRITE_PERMIT: usize = 64 * 1024;

/// How important a plugin's log line is (the WIT's `logging.level`, which
/// this module must not import: `host::logging` translates).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    /// Detail for the plugin's author.
    Debug,
    /// Normal operation.
    Info,
    /// Something the operator may want to know.
    Warn,
    /// Something went wrong.
    Error,
}

/// One thing a plugin said, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Said {
    Stdout(String),
    Stderr(String),
    Log(LogLevel, String),
}

/// What a plugin said during one call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallOutput {
    pub said: Vec<Said>,
    /// Bytes dropped past [`PER_CALL_LIMIT`].
    pub dropped_bytes: usize,
    /// What the host has to say about the call (a refused HTTP request),
    /// one line each, each once, for the agent's response.
    pub host_notes: Vec<String>,
    /// Notes past [`NOTES_LIMIT`].
    pub dropped_notes: usize,
}

impl CallOutput {
    /// Everything the plugin wrote to stderr, in order.
    pub fn stderr(&self) -> String {
        self.said
            .iter()
            .filter_map(|s| match s {
                Said::Stderr(text) => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Adds what a later call said.
    pub fn append(&mut self, later: CallOutput) {
        self.said.extend(later.said);
        self.dropped_bytes += later.dropped_bytes;
        for note in later.host_notes {
            self.add_note(note);
        }
        self.dropped_notes += later.dropped_notes;
    }

    fn add_note(&mut self, note: String) {
        if self.host_notes.contains(&note) {
            return;
        }
        if self.host_notes.len() < NOTES_LIMIT {
            self.host_notes.push(note);
        } else {
            self.dropped_notes += 1;
        }
    }

    /// The host's notes, one per line (empty when there are none).
    pub fn notes_text(&self) -> String {
        let mut text = self.host_notes.join("\n");
        if self.dropped_notes > 0 {
            text.push_str(&format!(
                "\n[envhost] ... and {} more like these",
                self.dropped_notes
            ));
        }
        text
    }

    /// Lines for the host's log, each prefixed with the plugin's name.
    pub fn log_lines(&self, plugin: &str) -> Vec<String> {
        let mut lines = Vec::new();
        for said in &self.said {
            let (tag, text) = match said {
                Said::Stdout(text) => ("stdout".to_owned(), text.as_str()),
                Said::Stderr(text) => ("stderr".to_owned(), text.as_str()),
                Said::Log(level, text) => (level_name(*level).to_owned(), text.as_str()),
            };
            for line in text.lines() {
                lines.push(format!("[plugin {plugin}] {tag}: {line}"));
            }
        }
        for note in &self.host_notes {
            lines.push(format!("[plugin {plugin}] host: {note}"));
        }
        if self.dropped_bytes > 0 {
            lines.push(format!(
                "[plugin {plugin}] ({} more bytes of output dropped: a call keeps at most {} bytes)",
                self.dropped_bytes, PER_CALL_LIMIT
            ));
        }
        lines
    }
}

/// The level as log lines show it.
pub fn level_name(level: LogLevel) -> &'static str {
    match level {
        LogLevel::Debug => "debug",
        LogLevel::Info => "info",
        LogLevel::Warn => "warn",
        LogLevel::Error => "error",
    }
}

/// Receives the host-log lines of plugins.
pub trait LogSink: Send + Sync {
    /// Takes one line a plugin wrote.
    fn line(&self, line: &str);
}

/// Drops every line: `envhost serve` without `-v`, where nobody may be
/// reading stderr and a chatty plugin must not fill the pipe and block the
/// host. (A failed call's stderr still reaches the agent in the response.)
pub struct DiscardSink;

impl LogSink for DiscardSink {
    fn line(&self, _: &str) {}
}

/// The host's stderr, one write per line: `envhost repl`, `envhost check`,
/// and `envhost serve -v`.
pub struct StderrSink;

impl LogSink for StderrSink {
    fn line(&self, line: &str) {
        let mut stderr = std::io::stderr().lock();
        let _ = writeln!(stderr, "{line}");
    }
}

#[derive(Default)]
struct Collected {
    output: CallOutput,
    kept: usize,
}

impl Collected {
    fn push_text(&mut self, stream: Stream, bytes: &[u8]) {
        let room = PER_CALL_LIMIT.saturating_sub(self.kept);
        let take = bytes.len().min(room);
        self.output.dropped_bytes += bytes.len() - take;
        if take == 0 {
            return;
        }
        self.kept += take;
        let text = String::from_utf8_lossy(&bytes[..take]);
        match (stream, self.output.said.last_mut()) {
            (Stream::Stdout, Some(Said::Stdout(last)))
            | (Stream::Stderr, Some(Said::Stderr(last))) => last.push_str(&text),
            (Stream::Stdout, _) => self.output.said.push(Said::Stdout(text.into_owned())),
            (Stream::Stderr, _) => self.output.said.push(Said::Stderr(text.into_owned())),
        }
    }

    fn push_log(&mut self, level: LogLevel, message: &str) {
        let room = PER_CALL_LIMIT.saturating_sub(self.kept);
        if message.len() > room {
            self.output.dropped_bytes += message.len();
            return;
        }
        self.kept += message.len();
        self.output.said.push(Said::Log(level, message.to_owned()));
    }
}

/// The output of one plugin instance; clones share it.
#[derive(Clone, Default)]
pub struct GuestOutput {
    collected: Arc<Mutex<Collected>>,
}

impl fmt::Debug for GuestOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GuestOutput")
    }
}

impl GuestOutput {
    pub fn new() -> Self {
        GuestOutput::default()
    }

    fn lock(&self) -> MutexGuard<'_, Collected> {
        // Writers only append; a panic mid-append leaves valid data.
        self.collected
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn stdout(&self) -> CapturedStream {
        CapturedStream {
            output: self.clone(),
            stream: Stream::Stdout,
        }
    }

    pub fn stderr(&self) -> CapturedStream {
        CapturedStream {
            output: self.clone(),
            stream: Stream::Stderr,
        }
    }

    /// The `logging.log` import.
    pub fn log(&self, level: LogLevel, message: &str) {
        self.lock().push_log(level, message);
    }

    /// A line from the host about the current call (made by the host, so
    /// not counted against what the plugin may say).
    pub fn note(&self, line: String) {
        self.lock().output.add_note(line);
    }

    /// What was said since the last take, made safe to show
    /// (`plugin_text`), and a fresh budget.
    pub fn take(&self) -> CallOutput {
        let mut output = {
            let mut collected = self.lock();
            collected.kept = 0;
            std::mem::take(&mut collected.output)
        };
        for said in &mut output.said {
            let (Said::Stdout(text) | Said::Stderr(text) | Said::Log(_, text)) = said;
            if let Cow::Owned(shown) = plugin_text::block(text) {
                *text = shown;
            }
        }
        output
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stream {
    Stdout,
    Stderr,
}

/// A WASI stdout or stderr that appends to a [`GuestOutput`].
#[derive(Clone)]
pub struct CapturedStream {
    output: GuestOutput,
    stream: Stream,
}

impl CapturedStream {
    fn append(&self, bytes: &[u8]) {
        self.output.lock().push_text(self.stream, bytes);
    }
}

impl IsTerminal for CapturedStream {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CapturedStream {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl OutputStream for CapturedStream {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_PERMIT)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CapturedStream {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for CapturedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.append(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_merges_writes_and_bounds_each_call() {
        let output = GuestOutput::new();
        let mut out = output.stdout();
        let mut err = output.stderr();
        out.write(Bytes::from_static(b"hello ")).unwrap();
        out.write(Bytes::from_static(b"world\n")).unwrap();
        output.log(LogLevel::Warn, "careful");
        err.write(Bytes::from_static(b"panicked at x\n")).unwrap();
        let taken = output.take();
        assert_eq!(
            taken.said,
            vec![
                Said::Stdout("hello world\n".into()),
                Said::Log(LogLevel::Warn, "careful".into()),
                Said::Stderr("panicked at x\n".into()),
            ]
        );
        assert_eq!(taken.stderr(), "panicked at x\n");
        assert_eq!(
            taken.log_lines("timer"),
            vec![
                "[plugin timer] stdout: hello world",
                "[plugin timer] warn: careful",
                "[plugin timer] stderr: panicked at x",
            ]
        );
        assert_eq!(output.take(), CallOutput::default(), "take starts afresh");

        let flood = vec![b'x'; PER_CALL_LIMIT + 10];
        out.write(Bytes::from(flood)).unwrap();
        output.log(LogLevel::Info, "lost");
        let taken = output.take();
        assert_eq!(taken.dropped_bytes, 10 + "lost".len());
        assert!(taken.log_lines("t").last().unwrap().contains("dropped"));
        // The budget is per call.
        output.log(LogLevel::Info, "kept");
        assert_eq!(
            output.take().said,
            vec![Said::Log(LogLevel::Info, "kept".into())]
        );
    }
}
