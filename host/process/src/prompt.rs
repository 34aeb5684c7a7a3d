//! Watching a program's terminal output for its prompt.
//!
//! The bytes go through `output::terminal` (ANSI stripped, `\r` redraws
//! collapsed), so a prompt is written as it looks (`sqlite> `, `\(gdb\) `).
//! A prompt counts only at the very end of what the program has printed so
//! far — a program at its prompt prints nothing more until it gets input —
//! and is searched for within the last [`SEARCH_WINDOW`] bytes, so a wait
//! stays linear in the output. The terminal's echo of the lines typed since
//! the previous wait is left out of the text. Output before the prompt is
//! kept within the host's output cap (`output::capture`: head and tail,
//! the whole text saved to a file). This module neither reads nor writes
//! the terminal.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use regex::Regex;

use crate::capture::{OutputCapture, OutputLimits};
use crate::live::SessionLive;
use crate::terminal::TerminalText;

/// How far back from the end of the output a prompt may start.
pub const SEARCH_WINDOW: usize = 4 * 1024;

/// A prompt pattern, compiled to match only at the end of the text.
#[derive(Debug, Clone)]
pub struct Prompt {
    anchored: Regex,
}

/// Why a prompt pattern cannot be waited for; the message says what to
/// give instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadPrompt(String);

impl From<String> for BadPrompt {
    fn from(message: String) -> Self {
        BadPrompt(message)
    }
}

impl Prompt {
    /// A prompt matching the regular expression `pattern` at the end of the
    /// output; a pattern that could match nothing or too much is refused
    /// with a reason.
    pub fn new(pattern: &str) -> Result<Prompt, BadPrompt> {
        if pattern.is_empty() {
            return Err("the prompt pattern is empty; give the regular expression the program's prompt matches, e.g. `sqlite> `".to_owned().into());
        }
        let plain = Regex::new(pattern).map_err(|err| {
            format!("the prompt {pattern:?} is not a valid regular expression: {err}")
        })?;
        if plain.is_match("") {
            return Err(format!(
                "the prompt {pattern:?} matches empty text, so it would match anywhere; give the text the program's prompt shows"
            ).into());
        }
        let anchored = Regex::new(&format!("(?:{pattern})\\z")).map_err(|err| {
            format!("the prompt {pattern:?} is not a valid regular expression: {err}")
        })?;
        Ok(Prompt { anchored })
    }

    /// [`Prompt::new`], remembering the last few patterns: a plugin waits
    /// for the same prompt after every line it sends, and compiling the
    /// regex again each time cost more than the whole round trip to the
    /// program. Shared by every thread (a command that may yield runs on a
    /// thread of its own). Refused patterns are not remembered.
    pub fn cached(pattern: &str) -> Result<Prompt, BadPrompt> {
        const KEPT: usize = 16;
        static RECENT: Mutex<Vec<(String, Prompt)>> = Mutex::new(Vec::new());
        let recent = || RECENT.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(prompt) = recent()
            .iter()
            .find(|(known, _)| known == pattern)
            .map(|(_, prompt)| prompt.clone())
        {
            return Ok(prompt);
        }
        let prompt = Prompt::new(pattern)?;
        let mut recent = recent();
        if recent.len() == KEPT {
            recent.remove(0);
        }
        recent.push((pattern.to_owned(), prompt.clone()));
        Ok(prompt)
    }
}

/// What one wait has seen so far.
pub struct PromptWatch {
    terminal: TerminalText,
    /// Finished lines not yet handed to `capture` (the search window).
    recent: String,
    capture: OutputCapture,
    /// Lines typed since the previous wait whose echo is still expected.
    echo: VecDeque<String>,
    /// Where the text is shown as it comes, while another thread watches.
    live: Option<Arc<SessionLive>>,
}

/// The output before a prompt, and the prompt's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub before: String,
    pub prompt: String,
}

impl PromptWatch {
    /// `typed`: the lines sent since the previous wait, in order.
    pub fn new(limits: &OutputLimits, label: &str, typed: Vec<String>) -> Self {
        PromptWatch {
            terminal: TerminalText::new(),
            recent: String::new(),
            capture: OutputCapture::new(limits, label),
            echo: typed.into(),
            live: None,
        }
    }

    /// Shows the text kept, as it comes, on `live` too.
    pub fn showing_on(mut self, live: Arc<SessionLive>) -> Self {
        self.live = Some(live);
        self
    }

    /// Takes more terminal bytes.
    pub fn feed(&mut self, bytes: &[u8]) {
        let mut finished = String::new();
        self.terminal.feed(bytes, &mut finished);
        self.take_lines(&finished);
        if let Some(live) = &self.live {
            live.pending(self.terminal.pending());
        }
    }

    fn take_lines(&mut self, finished: &str) {
        for line in finished.split_inclusive('\n') {
            if self.is_echo(line) {
                if let Some(live) = &self.live {
                    live.skip_line();
                }
                continue;
            }
            if let Some(live) = &self.live {
                live.line(line);
            }
            self.recent.push_str(line);
        }
        if self.recent.len() > 2 * SEARCH_WINDOW {
            let keep_from = self
                .recent
                .ceil_char_boundary(self.recent.len() - SEARCH_WINDOW);
            self.capture.push(&self.recent[..keep_from]);
            self.recent.drain(..keep_from);
        }
    }

    /// Drops the echo of a typed line: the first finished lines, while they
    /// end with the next typed line (a continuation prompt may precede it).
    fn is_echo(&mut self, line: &str) -> bool {
        let Some(typed) = self.echo.front() else {
            return false;
        };
        let shown = line.trim_end_matches(['\n', '\r']).trim_end();
        let typed = typed.trim_end();
        let echoed = if typed.is_empty() {
            shown.is_empty()
        } else {
            shown.ends_with(typed)
        };
        if echoed {
            self.echo.pop_front();
        } else {
            // Output came first: nothing more is an echo.
            self.echo.clear();
        }
        echoed
    }

    /// The prompt, if the output now ends with it.
    pub fn find(&self, prompt: &Prompt) -> Option<(usize, String)> {
        let pending = self.terminal.pending();
        let mut text = String::with_capacity(self.recent.len() + pending.len());
        text.push_str(&self.recent);
        text.push_str(&pending);
        let window_start = text.ceil_char_boundary(text.len().saturating_sub(SEARCH_WINDOW));
        let found = prompt.anchored.find(&text[window_start..])?;
        Some((window_start + found.start(), found.as_str().to_owned()))
    }

    /// Ends the wait at a prompt found by [`find`](PromptWatch::find): the
    /// output before it, within the cap.
    pub fn finish_at(mut self, start: usize, prompt: String) -> Found {
        let pending = self.terminal.pending();
        let mut text = std::mem::take(&mut self.recent);
        text.push_str(&pending);
        let start = start.min(text.len());
        self.capture.push(&text[..start]);
        Found {
            before: self.capture.finish().text,
            prompt,
        }
    }

    /// Ends the wait without a prompt (the program ended, or time ran out
    /// and the prompt never came): everything seen.
    pub fn finish(mut self) -> String {
        let mut rest = String::new();
        self.terminal.finish(&mut rest);
        self.take_lines(&rest);
        let recent = std::mem::take(&mut self.recent);
        self.capture.push(&recent);
        self.capture.finish().text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch(typed: &[&str]) -> PromptWatch {
        let limits = OutputLimits::for_project(std::path::Path::new("/nonexistent"));
        PromptWatch::new(
            &limits,
            "test",
            typed.iter().map(|s| s.to_string()).collect(),
        )
    }

    #[test]
    fn finds_the_prompt_only_at_the_end() {
        let prompt = Prompt::new(r"sqlite> ").unwrap();
        let mut w = watch(&["select 'sqlite> ';"]);
        w.feed(b"select 'sqlite> ';\r\nsqlite> \r\n");
        assert_eq!(
            w.find(&prompt),
            None,
            "a prompt inside output is not the end"
        );
        w.feed(b"\x1b[1msqlite\x1b[0m> ");
        let (start, text) = w.find(&prompt).unwrap();
        assert_eq!(text, "sqlite> ");
        let found = w.finish_at(start, text);
        assert_eq!(found.before, "sqlite> \n", "echo dropped, output kept");
    }

    #[test]
    fn continuation_prompts_and_echoes_are_dropped() {
        let prompt = Prompt::new(r"(sqlite|   \.\.\.)> ").unwrap();
        let mut w = watch(&["select", "1;"]);
        w.feed(b"select\r\n   ...> 1;\r\n1\r\nsqlite> ");
        let (start, text) = w.find(&prompt).unwrap();
        assert_eq!(w.finish_at(start, text).before, "1\n");
    }

    #[test]
    fn output_before_an_echo_stops_echo_removal() {
        let mut w = watch(&["print 1"]);
        w.feed(b"warning: something\nprint 1\n$1 = 1\n");
        assert_eq!(w.finish(), "warning: something\nprint 1\n$1 = 1\n");
        let mut empty = watch(&[""]);
        empty.feed(b"\r\nreal output\n");
        assert_eq!(empty.finish(), "real output\n");
    }

    #[test]
    fn long_output_is_searched_only_near_the_end() {
        let prompt = Prompt::new(r"\(gdb\) ").unwrap();
        let mut w = watch(&[]);
        for i in 0..5000 {
            w.feed(format!("line {i}\n").as_bytes());
        }
        w.feed(b"(gdb) ");
        let (start, text) = w.find(&prompt).unwrap();
        let before = w.finish_at(start, text).before;
        assert!(before.starts_with("line 0\nline 1\n"), "{}", &before[..40]);
        assert!(before.ends_with("line 4999\n"));
        assert_eq!(before.lines().count(), 5000);
    }

    #[test]
    fn multibyte_output_is_cut_between_characters_and_kept_whole() {
        let prompt = Prompt::new(r"\(gdb\) ").unwrap();
        let mut w = watch(&[]);
        // 42 bytes a line, most of them halves of `é`: the windows' edges
        // fall inside characters.
        let line = format!("a{}\n", "é".repeat(20));
        for _ in 0..1000 {
            w.feed(line.as_bytes());
        }
        w.feed("é(gdb) ".as_bytes());
        let (start, text) = w.find(&prompt).unwrap();
        let before = w.finish_at(start, text).before;
        assert_eq!(before, format!("{}é", line.repeat(1000)));
    }

    #[test]
    fn cached_prompts_match_like_fresh_ones() {
        let first = Prompt::cached(r"sqlite> ").unwrap();
        let again = Prompt::cached(r"sqlite> ").unwrap();
        let mut watch = watch(&[]);
        watch.feed(b"1\nsqlite> ");
        assert_eq!(watch.find(&first), watch.find(&again));
        assert!(watch.find(&first).is_some());
        assert!(Prompt::cached("(").is_err());
        assert!(
            Prompt::cached("(").is_err(),
            "refusals are not cached as successes"
        );
    }

    #[test]
    fn bad_prompts_are_refused_with_reasons() {
        assert!(Prompt::new("").unwrap_err().to_string().contains("empty"));
        assert!(
            Prompt::new("(")
                .unwrap_err()
                .to_string()
                .contains("not a valid regular expression")
        );
        assert!(
            Prompt::new("x*")
                .unwrap_err()
                .to_string()
                .contains("matches empty text")
        );
    }
}
