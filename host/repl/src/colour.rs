//! Colour for a person at a terminal: section headers, each command's
//! status (ok, failed, running), the lines of the screen a command changed,
//! the REPL's own notes and the prompt.
//!
//! Colour is on only when a person types at a terminal and reads one
//! (standard input and output are both terminals), `NO_COLOR` is unset or
//! empty and `TERM` is not `dumb`; otherwise every method returns its text
//! unchanged, so scripted use is byte for byte plain. Colour only wraps
//! text: it never changes what a person reads.

use std::io::IsTerminal;

use anstyle::{AnsiColor, Style};
use envhost_core::ScreenMarks;

const HEADER: Style = Style::new()
    .bold()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Cyan)));
const CHANGED: Style = Style::new()
    .bold()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Yellow)));
const OK: Style = Style::new()
    .bold()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Green)));
const FAILED: Style = Style::new()
    .bold()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Red)));
const RUNNING: Style = Style::new()
    .bold()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Magenta)));
const NOTE: Style = Style::new().dimmed();
const PROMPT: Style = Style::new()
    .bold()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Blue)));

/// A command's state, as its status line names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    Failed,
    Running,
}

impl Status {
    fn word(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Failed => "failed",
            Status::Running => "running",
        }
    }

    fn style(self) -> Style {
        match self {
            Status::Ok => OK,
            Status::Failed => FAILED,
            Status::Running => RUNNING,
        }
    }
}

/// Whether to colour, and the colouring.
#[derive(Debug, Clone, Copy)]
pub struct Colours {
    on: bool,
}

impl Colours {
    /// Colour when a person is at a terminal (see the module's rule).
    pub fn detect() -> Self {
        let terminals = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty());
        let dumb = std::env::var_os("TERM").is_some_and(|term| term == "dumb");
        Colours {
            on: terminals && !no_color && !dumb,
        }
    }

    /// Whether colour is on.
    pub fn enabled(&self) -> bool {
        self.on
    }

    /// No colour at all.
    pub fn off() -> Self {
        Colours { on: false }
    }

    #[cfg(test)]
    pub fn on() -> Self {
        Colours { on: true }
    }

    fn paint(&self, style: Style, text: &str) -> String {
        if self.on && !text.is_empty() {
            format!("{}{text}{}", style.render(), style.render_reset())
        } else {
            text.to_owned()
        }
    }

    /// The line that heads a command's output: `---- bash: ok ----`.
    pub fn status_line(&self, environment: &str, status: Status) -> String {
        format!(
            "---- {environment}: {} ----",
            self.paint(status.style(), status.word())
        )
    }

    /// A note of the REPL's own.
    pub fn note(&self, text: &str) -> String {
        self.paint(NOTE, text)
    }

    /// The prompt as shown (the plain one has the same width).
    pub fn prompt(&self, prompt: &str) -> String {
        self.paint(PROMPT, prompt)
    }
}

impl ScreenMarks for Colours {
    fn header(&self, line: &str) -> String {
        self.paint(HEADER, line)
    }

    fn changed(&self, line: &str) -> String {
        self.paint(CHANGED, line)
    }

    fn note(&self, line: &str) -> String {
        self.paint(NOTE, line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_is_plain_and_on_only_wraps() {
        let plain = Colours::off();
        assert_eq!(plain.status_line("bash", Status::Ok), "---- bash: ok ----");
        assert_eq!(ScreenMarks::header(&plain, "== BASH =="), "== BASH ==");
        let coloured = Colours::on();
        let line = coloured.status_line("bash", Status::Failed);
        assert_eq!(line, "---- bash: \u{1b}[1m\u{1b}[31mfailed\u{1b}[0m ----");
        assert_eq!(coloured.note(""), "");
    }
}
