//! What a plugin says, made safe to show: every text that comes from a
//! plugin (its description and help, its requests' reasons, its screen,
//! its responses, what it logs and prints, the panic or exception it dies
//! with, its file's name) passes through here before a person or an agent
//! sees it — on the screen, in a response, in `envhost check`, on the
//! REPL's or `-v`'s stderr.
//!
//! Terminal control sequences are what a terminal would make of them
//! (`envhost_process::TerminalText`: colours and cursor movement gone,
//! `\r` overwriting the line as it would on screen), so a plugin cannot
//! move the cursor to hide lines, erase them, retitle the window or write
//! the clipboard (OSC 52). Other control characters and the Unicode
//! controls that reorder text on screen (bidirectional overrides and
//! isolates) are removed. Texts that must stay on one line (a reason, a
//! summary) have their line breaks turned into spaces, and names are
//! shown with their control characters escaped, so that neither can add
//! lines to another section.
//!
//! This module imports nothing of this crate.

use std::borrow::Cow;

use envhost_process::TerminalText;

/// Whether `c` is shown by nobody as text: a control character other than
/// a line break or a tab, or a Unicode control that reorders the text
/// around it (U+202A-U+202E, U+2066-U+2069).
fn is_hidden(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

/// A text of any number of lines, as a terminal would show it, without
/// anything that would act on the terminal. Plain text comes back as is.
pub(crate) fn block(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_hidden) {
        return Cow::Borrowed(text);
    }
    let shown = TerminalText::clean(text.as_bytes());
    Cow::Owned(shown.chars().filter(|c| !is_hidden(*c)).collect())
}

/// A text that must stay on one line: [`block`], with line breaks and
/// tabs turned into spaces.
pub(crate) fn line(text: &str) -> String {
    block(text)
        .chars()
        .map(|c| if c == '\n' || c == '\t' { ' ' } else { c })
        .collect()
}

/// A name (a file's, a program's) for a message: every hidden character
/// and line break escaped as Rust would write it (`\n`, `\u{1b}`), so the
/// name is shown whole, on one line, and acts on nothing.
pub(crate) fn name(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| is_hidden(c) || c == '\n' || c == '\t') {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .map(|c| {
                if is_hidden(c) || c == '\n' || c == '\t' {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect(),
    )
}

/// Whether a text has anything [`block`] would change or remove, or a
/// line break: a text that must be one line exactly as written (a command
/// signature, a path) is refused for it rather than changed.
pub(crate) fn has_hidden_or_break(text: &str) -> bool {
    text.chars().any(|c| is_hidden(c) || c == '\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_left_alone() {
        let plain = "Timer: Stopped (0.00s)\n\tindented, and ünïcödé";
        assert!(matches!(block(plain), Cow::Borrowed(_)));
        assert!(matches!(name("my_env"), Cow::Borrowed(_)));
    }

    #[test]
    fn escape_sequences_cannot_act_on_the_terminal() {
        let hostile = "ok\n\x1b[1A\x1b[2K\rforged\x1b]52;c;cHduZWQ=\x07 \x1b[31mred\x1b[0m\x07\u{202e}txt.exe";
        let shown = block(hostile);
        assert_eq!(shown, "ok\nforged redtxt.exe");
        assert!(!shown.contains('\x1b'));
        assert_eq!(line("two\nlines\tand a tab"), "two lines and a tab");
        assert_eq!(line("50%\r100%"), "100%");
    }

    #[test]
    fn names_are_escaped_on_one_line() {
        assert_eq!(name("evil\nname\x1b[2J"), "evil\\nname\\u{1b}[2J");
        assert!(has_hidden_or_break("go\nnow"));
        assert!(has_hidden_or_break("go\x1b[1m"));
        assert!(!has_hidden_or_break("go <n> [--fast]"));
    }
}
