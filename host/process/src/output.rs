//! One command's output on its way to the response, for every environment
//! that runs a program: terminal bytes cleaned by [`TerminalText`], kept
//! within the cap by [`OutputCapture`], with the host's own lines before
//! and after them (which are never cut), and the incidents to report.
//!
//! It must not know which environment runs the program or how the program
//! is read: callers feed it bytes and say what happened.

use envhost_core::{CommandResponse, Incident};

use crate::capture::{OutputCapture, OutputLimits};
use crate::terminal::TerminalText;

/// The buffer a command's response is put together in.
pub struct CommandOutput {
    terminal: TerminalText,
    capture: OutputCapture,
    pending: String,
    /// The last complete non-empty line, for a summary of a running command.
    last_line: String,
    before: Vec<String>,
    after: Vec<String>,
    incidents: Vec<Incident>,
    success: bool,
}

impl CommandOutput {
    /// An empty buffer; `label` names the environment in saved output files.
    pub fn new(limits: &OutputLimits, label: &str) -> Self {
        CommandOutput::around(OutputCapture::new(limits, label))
    }

    /// An empty buffer with the same limits and label, for the output
    /// that follows an answer given while the command runs.
    pub fn empty_like(&self) -> Self {
        CommandOutput::around(self.capture.empty_like())
    }

    fn around(capture: OutputCapture) -> Self {
        CommandOutput {
            terminal: TerminalText::new(),
            capture,
            pending: String::new(),
            last_line: String::new(),
            before: Vec::new(),
            after: Vec::new(),
            incidents: Vec::new(),
            success: false,
        }
    }

    /// Adds bytes the program wrote to its terminal or pipes.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.terminal.feed(bytes, &mut self.pending);
        if !self.pending.is_empty() {
            if let Some(line) = self.pending.lines().rev().find(|l| !l.trim().is_empty()) {
                line.clone_into(&mut self.last_line);
            }
            self.capture.push(&self.pending);
            self.pending.clear();
        }
    }

    /// Bytes of (cleaned) output so far, the line still being written
    /// included.
    pub fn total_bytes(&self) -> u64 {
        self.capture.total_bytes() + self.terminal.pending().len() as u64
    }

    /// The line the program is on (a prompt waiting for an answer), else
    /// the last non-empty line it printed; `None` before any.
    pub fn last_line(&self) -> Option<String> {
        let current = self.terminal.pending();
        if !current.trim().is_empty() {
            return Some(current);
        }
        (!self.last_line.is_empty()).then(|| self.last_line.clone())
    }

    /// A line of the host's shown before the program's output.
    pub fn before(&mut self, line: String) {
        self.before.push(line);
    }

    /// A line of the host's shown after the program's output. Blank lines
    /// that end the output are dropped before the first one: an interrupted
    /// program leaves one after its `^C`.
    pub fn after(&mut self, line: String) {
        self.after.push(line);
    }

    /// Something to report about the command besides its output.
    pub fn incident(&mut self, incident: Incident) {
        self.incidents.push(incident);
    }

    /// Whether the command succeeded (it did not, until this says so).
    pub fn set_success(&mut self, success: bool) {
        self.success = success;
    }

    /// The response: the lines before, the output (capped), the lines
    /// after; the incidents, with the cap's own when the output was cut.
    pub fn finish(mut self) -> CommandResponse {
        self.terminal.finish(&mut self.pending);
        self.capture.push(&self.pending);
        let captured = self.capture.finish();
        let mut incidents = self.incidents;
        incidents.extend(captured.incident());
        let mut text = String::new();
        for line in &self.before {
            text.push_str(line);
            text.push('\n');
        }
        text.push_str(&captured.text);
        if !self.after.is_empty() {
            let kept = text.trim_end_matches('\n').len();
            text.truncate(kept);
            if !text.is_empty() {
                text.push('\n');
            }
        }
        for line in &self.after {
            text.push_str(line);
            text.push('\n');
        }
        CommandResponse {
            output: text,
            success: self.success,
            running: false,
            incidents,
            files: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> (tempfile::TempDir, OutputLimits) {
        let dir = tempfile::tempdir().expect("dir");
        let limits = OutputLimits::for_project(dir.path());
        (dir, limits)
    }

    #[test]
    fn host_lines_surround_the_cleaned_output() {
        let (_dir, limits) = limits();
        let mut output = CommandOutput::new(&limits, "test");
        output.before("[fresh start]".into());
        output.feed(b"\x1b[31mred\x1b[0m\r\n^C\r\n\r\n");
        output.after("[envhost] stopped".into());
        output.set_success(true);
        let response = output.finish();
        assert_eq!(
            response.output,
            "[fresh start]\nred\n^C\n[envhost] stopped\n"
        );
        assert!(response.success);
    }

    #[test]
    fn the_last_line_is_the_prompt_being_shown_or_the_last_one_printed() {
        let (_dir, limits) = limits();
        let mut output = CommandOutput::new(&limits, "test");
        assert_eq!(output.last_line(), None);
        output.feed(b"one\r\ntwo\r\n\r\n");
        assert_eq!(output.last_line().as_deref(), Some("two"));
        output.feed(b"Name: ");
        assert_eq!(output.last_line().as_deref(), Some("Name: "));
        assert_eq!(output.total_bytes(), 15);
    }

    #[test]
    fn output_without_host_lines_is_kept_whole() {
        let (_dir, limits) = limits();
        let mut output = CommandOutput::new(&limits, "test");
        output.feed(b"a\n\n");
        let response = output.finish();
        assert_eq!(response.output, "a\n\n");
        assert!(!response.success);
    }
}
