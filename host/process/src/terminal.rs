//! Terminal output to plain text.
//!
//! Programs write for a terminal: colours and cursor movements as ANSI
//! escape sequences, progress bars redrawn in place with `\r`. An agent needs
//! what the terminal would finally show, as text. [`TerminalText`] runs the
//! bytes through a VT parser (`vte`, the parser behind Alacritty) and keeps
//! a model of the current line with a cursor, so that `50%\r100%\n` becomes
//! `100%\n`, `\x1b[31mred\x1b[0m` becomes `red`, and `\x1b[2K\r` erases.
//! Multi-line cursor movement (cursor up) is not modelled: each line is
//! final once a newline ends it.

use vte::{Params, Parser, Perform};

/// A line longer than this (in characters) without a newline is emitted as
/// is, so that memory stays bounded on output with no newlines at all.
const MAX_LINE_CHARS: usize = 64 * 1024;

/// Streaming terminal-to-text conversion.
pub struct TerminalText {
    parser: Parser,
    screen: LineModel,
    /// The start of a UTF-8 character split across `feed` calls. vte 0.15.0
    /// mishandles such splits (the byte after the completed character is
    /// lost), so characters are reassembled here and vte only ever sees
    /// whole ones.
    split_char: Vec<u8>,
}

impl Default for TerminalText {
    fn default() -> Self {
        TerminalText::new()
    }
}

impl TerminalText {
    /// Nothing seen yet.
    pub fn new() -> Self {
        TerminalText {
            parser: Parser::new(),
            screen: LineModel::default(),
            split_char: Vec::with_capacity(4),
        }
    }

    /// Feeds raw bytes; appends the text of every line they complete to
    /// `out`. Partial lines stay pending until a newline or [`finish`].
    ///
    /// [`finish`]: TerminalText::finish
    pub fn feed(&mut self, mut bytes: &[u8], out: &mut String) {
        self.screen.out = std::mem::take(out);
        if !self.split_char.is_empty() {
            let needed = utf8_length(self.split_char[0]);
            while self.split_char.len() < needed
                && bytes.first().is_some_and(|&b| is_continuation(b))
            {
                self.split_char.push(bytes[0]);
                bytes = &bytes[1..];
            }
            if self.split_char.len() < needed && bytes.is_empty() {
                *out = std::mem::take(&mut self.screen.out);
                return; // still incomplete: wait for more
            }
            // Complete, or cut short by a non-continuation byte (then vte
            // prints a replacement character, as for any invalid UTF-8).
            let split = std::mem::take(&mut self.split_char);
            self.parser.advance(&mut self.screen, &split);
        }
        let whole = bytes.len() - incomplete_suffix_len(bytes);
        self.parser.advance(&mut self.screen, &bytes[..whole]);
        self.split_char.extend_from_slice(&bytes[whole..]);
        *out = std::mem::take(&mut self.screen.out);
    }

    /// Appends the pending partial line, if any, to `out`.
    pub fn finish(&mut self, out: &mut String) {
        if !self.split_char.is_empty() {
            // A character cut off at the very end is invalid UTF-8.
            self.split_char.clear();
            self.screen.put('\u{fffd}');
        }
        self.screen.flush_line(out);
    }

    /// The line being written, as it stands (not yet ended by a newline):
    /// for programs whose prompt is the last thing they print.
    pub fn pending(&self) -> String {
        self.screen.pending()
    }

    /// Converts a complete piece of terminal output in one go.
    pub fn clean(bytes: &[u8]) -> String {
        let mut terminal = TerminalText::new();
        let mut out = String::new();
        terminal.feed(bytes, &mut out);
        terminal.finish(&mut out);
        out
    }
}

fn is_continuation(byte: u8) -> bool {
    byte & 0xC0 == 0x80
}

/// Length of the UTF-8 sequence a lead byte starts (1 for anything else).
fn utf8_length(lead: u8) -> usize {
    match lead {
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => 1,
    }
}

/// How many bytes at the end of `bytes` are the start of a character whose
/// remaining bytes have not arrived yet.
fn incomplete_suffix_len(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(3) {
        let byte = bytes[bytes.len() - back];
        if is_continuation(byte) {
            continue;
        }
        return if utf8_length(byte) > back { back } else { 0 };
    }
    0
}

/// The line being written, with a cursor, plus finished text. Most output
/// only ever appends to its line (the cursor at its end, or back at its
/// start just before the newline a terminal ends a line with: `\r\n`), so
/// the line is kept as text until something overwrites or erases part of
/// it, and only then as one cell per character: output is copied once, not
/// character by character into cells and back.
#[derive(Default)]
struct LineModel {
    /// The line while it has only been appended to.
    text: String,
    /// Characters in `text`.
    text_chars: usize,
    /// The line once modelled cell by cell (`text` is then empty).
    cells: Vec<char>,
    modelled: bool,
    cursor: usize,
    out: String,
}

impl LineModel {
    fn flush_line(&mut self, out: &mut String) {
        if self.modelled {
            out.extend(self.cells.iter());
            self.cells.clear();
            self.modelled = false;
        } else {
            out.push_str(&self.text);
            self.text.clear();
            self.text_chars = 0;
        }
        self.cursor = 0;
    }

    /// Switches to one cell per character.
    fn model(&mut self) {
        if !self.modelled {
            self.cells.extend(self.text.chars());
            self.text.clear();
            self.text_chars = 0;
            self.modelled = true;
        }
    }

    fn line_chars(&self) -> usize {
        if self.modelled {
            self.cells.len()
        } else {
            self.text_chars
        }
    }

    fn pending(&self) -> String {
        if self.modelled {
            self.cells.iter().collect()
        } else {
            self.text.clone()
        }
    }

    fn newline(&mut self) {
        let mut out = std::mem::take(&mut self.out);
        self.flush_line(&mut out);
        out.push('\n');
        self.out = out;
    }

    fn put(&mut self, c: char) {
        if self.cursor == self.line_chars() && self.line_chars() >= MAX_LINE_CHARS {
            let mut out = std::mem::take(&mut self.out);
            self.flush_line(&mut out);
            self.out = out;
        }
        if !self.modelled {
            if self.cursor == self.text_chars {
                self.text.push(c);
                self.text_chars += 1;
                self.cursor += 1;
                return;
            }
            self.model();
        }
        if self.cursor == self.cells.len() {
            self.cells.push(c);
        } else if self.cursor < self.cells.len() {
            self.cells[self.cursor] = c;
        } else {
            self.cells.resize(self.cursor, ' ');
            self.cells.push(c);
        }
        self.cursor += 1;
    }
}

fn first_param(params: &Params, default: usize) -> usize {
    params
        .iter()
        .next()
        .and_then(|p| p.first().copied())
        .map(usize::from)
        .filter(|&n| n != 0)
        .unwrap_or(default)
}

impl Perform for LineModel {
    fn print(&mut self, c: char) {
        self.put(c);
    }

    fn execute(&mut self, byte: u8) {
        match byte {
            b'\n' | 0x0b | 0x0c => self.newline(),
            b'\r' => self.cursor = 0,
            b'\t' => self.put('\t'),
            0x08 => self.cursor = self.cursor.saturating_sub(1),
            _ => {} // bell and other controls have no text
        }
    }

    fn csi_dispatch(
        &mut self,
        params: &Params,
        _intermediates: &[u8],
        _ignore: bool,
        action: char,
    ) {
        match action {
            // Erase in line: 0 = cursor to end, 1 = start to cursor, 2 = all.
            'K' => {
                self.model();
                let mode = params
                    .iter()
                    .next()
                    .and_then(|p| p.first().copied())
                    .unwrap_or(0);
                match mode {
                    0 => self.cells.truncate(self.cursor),
                    1 => {
                        let end = (self.cursor + 1).min(self.cells.len());
                        self.cells[..end].fill(' ');
                    }
                    _ => self.cells.clear(),
                }
            }
            'G' | '`' => self.cursor = first_param(params, 1) - 1,
            'C' => self.cursor += first_param(params, 1),
            'D' => self.cursor = self.cursor.saturating_sub(first_param(params, 1)),
            _ => {} // colours (m), screen clears, cursor up/down: no text
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_colours_and_titles() {
        assert_eq!(
            TerminalText::clean(b"\x1b[1;31mred\x1b[0m plain\x1b]0;title\x07\n"),
            "red plain\n"
        );
    }

    #[test]
    fn carriage_return_redraws_keep_the_final_state() {
        assert_eq!(
            TerminalText::clean(b"10%\r50%\r100%\ndone\n"),
            "100%\ndone\n"
        );
        assert_eq!(TerminalText::clean(b"abcdef\rXY\n"), "XYcdef\n");
        assert_eq!(TerminalText::clean(b"line\r\n"), "line\n");
        assert_eq!(
            TerminalText::clean(b"long progress\r\x1b[Kshort\n"),
            "short\n"
        );
        assert_eq!(TerminalText::clean(b"working...\x1b[2K\rok\n"), "ok\n");
    }

    #[test]
    fn backspace_and_cursor_moves() {
        assert_eq!(TerminalText::clean(b"abc\x08\x08X\n"), "aXc\n");
        assert_eq!(TerminalText::clean(b"a\x1b[3CZ\n"), "a   Z\n");
        assert_eq!(TerminalText::clean(b"hello\x1b[1GJ\n"), "Jello\n");
    }

    #[test]
    fn streaming_across_chunk_boundaries() {
        let mut terminal = TerminalText::new();
        let mut out = String::new();
        for chunk in [
            &b"\x1b[3"[..],
            b"2mgre",
            b"en\x1b[0m 1\r",
            b"green 2\n\xc3",
            b"\xa9t\xc3\xa9",
        ] {
            terminal.feed(chunk, &mut out);
        }
        assert_eq!(out, "green 2\n");
        terminal.finish(&mut out);
        assert_eq!(out, "green 2\nété");
    }

    #[test]
    fn the_pending_line_is_visible_before_its_newline() {
        let mut terminal = TerminalText::new();
        let mut out = String::new();
        terminal.feed(b"1\r\n\x1b[1msqlite\x1b[0m> ", &mut out);
        assert_eq!(out, "1\n");
        assert_eq!(terminal.pending(), "sqlite> ");
    }

    #[test]
    fn invalid_utf8_becomes_replacement_characters() {
        assert_eq!(TerminalText::clean(b"a\xffb\n"), "a\u{fffd}b\n");
        assert_eq!(TerminalText::clean(b"a\xc3"), "a\u{fffd}");
    }

    #[test]
    fn characters_split_at_every_byte_survive() {
        let text = "aé€𝄞z\n";
        let mut terminal = TerminalText::new();
        let mut out = String::new();
        for byte in text.as_bytes() {
            terminal.feed(std::slice::from_ref(byte), &mut out);
        }
        assert_eq!(out, text);
    }

    #[test]
    fn endless_lines_stay_bounded() {
        let bytes = vec![b'x'; MAX_LINE_CHARS * 3 + 5];
        let mut terminal = TerminalText::new();
        let mut out = String::new();
        terminal.feed(&bytes, &mut out);
        assert_eq!(out.len(), MAX_LINE_CHARS * 3);
        assert!(terminal.screen.line_chars() <= MAX_LINE_CHARS);
    }
}
