//! One python command from its request to its end, across the answers it
//! takes: a command that yields is answered with its output so far and
//! answered again, with what came after, by each `wait` or `input` until it
//! ends.
//!
//! This module owns the output between answers: each answer's output goes
//! through its own [`CommandOutput`] (so each is capped, and saved to a file
//! past the cap, as any command's output is), and an answer never cuts a
//! character or a terminal escape sequence in two (those bytes wait for the
//! next answer), so no byte is lost or repeated between answers. It also
//! keeps what [`RunningCommand`] reports. It must not talk to the
//! interpreter.

use std::time::{Duration, Instant};

use envhost_core::{CommandContext, CommandResponse, RunningCommand};
use envhost_process::{CommandOutput, OutputLimits, TerminalText};

/// Bytes of the latest output kept for the "last line" the screen shows.
const TAIL_BYTES: usize = 4096;

/// How far back an unfinished escape sequence is looked for.
const ESCAPE_WINDOW: usize = 64;

/// A command between its request and its end.
pub struct Command {
    /// The code, as the agent sent it.
    pub text: String,
    started: Instant,
    /// Its time limit, if it has one, and when that runs out.
    pub limit: Option<Duration>,
    pub deadline: Option<Instant>,
    /// It called `input()` (or reads its stdin) and waits for a line.
    pub wants_input: bool,
    /// The output since the last answer.
    piece: CommandOutput,
    /// Bytes held back from `piece`: the start of a character or of an
    /// escape sequence that the next bytes complete.
    carry: Vec<u8>,
    total: u64,
    tail: Vec<u8>,
}

impl Command {
    /// A command sent now, with the context's limit.
    /// `label` names the files a long output is saved in (`python`,
    /// `python-NAME`).
    pub fn new(
        text: &str,
        context: &CommandContext,
        limits: &OutputLimits,
        label: &str,
    ) -> Command {
        let started = Instant::now();
        Command {
            text: text.to_owned(),
            started,
            limit: context.timeout,
            deadline: context.deadline(started),
            wants_input: false,
            piece: CommandOutput::new(limits, label),
            carry: Vec::new(),
            total: 0,
            tail: Vec::new(),
        }
    }

    /// The answer being put together: for the host's own lines and
    /// incidents.
    pub fn output(&mut self) -> &mut CommandOutput {
        &mut self.piece
    }

    /// When the agent sent it.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Takes bytes the interpreter wrote.
    pub fn feed(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.total += bytes.len() as u64;
        self.tail.extend_from_slice(bytes);
        if self.tail.len() > 2 * TAIL_BYTES {
            self.tail.drain(..self.tail.len() - TAIL_BYTES);
        }
        if self.carry.is_empty() {
            let whole = whole_prefix(bytes);
            self.piece.feed(&bytes[..whole]);
            self.carry.extend_from_slice(&bytes[whole..]);
        } else {
            self.carry.extend_from_slice(bytes);
            let bytes = std::mem::take(&mut self.carry);
            let whole = whole_prefix(&bytes);
            self.piece.feed(&bytes[..whole]);
            self.carry.extend_from_slice(&bytes[whole..]);
        }
    }

    /// The answer that leaves the command running: the output since the
    /// last answer; the next one starts empty.
    pub fn answer_running(&mut self) -> CommandResponse {
        let fresh = self.piece.empty_like();
        let piece = std::mem::replace(&mut self.piece, fresh);
        let mut response = piece.finish();
        response.success = true;
        response.running = true;
        response
    }

    /// The last answer: everything since the previous one, held-back bytes
    /// included; `success` is the command's outcome.
    pub fn answer_final(mut self, success: bool) -> CommandResponse {
        let carry = std::mem::take(&mut self.carry);
        self.piece.feed(&carry);
        self.piece.set_success(success);
        self.piece.finish()
    }

    /// What the screen and a busy refusal say about it.
    pub fn running(&self) -> RunningCommand {
        let text = TerminalText::clean(&self.tail);
        RunningCommand {
            command: self.text.clone(),
            started: self.started,
            output_bytes: self.total,
            last_line: text
                .lines()
                .rev()
                .map(str::trim_end)
                .find(|line| !line.is_empty())
                .map(str::to_owned),
            waiting_for_input: self.wants_input,
        }
    }
}

/// How much of `bytes` ends on a whole character and outside an escape
/// sequence; the rest waits for the bytes that complete it.
fn whole_prefix(bytes: &[u8]) -> usize {
    let window = bytes.len().saturating_sub(ESCAPE_WINDOW);
    let mut end = bytes.len();
    if let Some(at) = bytes[window..].iter().rposition(|&b| b == 0x1b)
        && !escape_complete(&bytes[window + at..])
    {
        end = window + at;
    }
    end - incomplete_utf8_suffix(&bytes[..end])
}

/// Whether the escape sequence `sequence` (starting with ESC) is complete.
fn escape_complete(sequence: &[u8]) -> bool {
    match sequence.get(1) {
        None => false,
        // CSI: parameters and intermediates, then a final byte.
        Some(b'[') => sequence[2..].iter().any(|&b| (0x40..=0x7e).contains(&b)),
        // OSC and string sequences: until BEL or ESC \.
        Some(b']' | b'P' | b'X' | b'^' | b'_') => {
            let body = &sequence[2..];
            body.contains(&0x07) || body.windows(2).any(|w| w == b"\x1b\\")
        }
        // Two-byte sequences (ESC 7, ESC c, ...).
        Some(_) => true,
    }
}

/// Bytes at the end of `bytes` that start a UTF-8 character not yet
/// complete.
fn incomplete_utf8_suffix(bytes: &[u8]) -> usize {
    for back in 1..=3.min(bytes.len()) {
        let byte = bytes[bytes.len() - back];
        if byte & 0xc0 == 0x80 {
            continue; // a continuation byte: look further back
        }
        let needed = match byte {
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf7 => 4,
            _ => 1,
        };
        return if needed > back { back } else { 0 };
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use envhost_core::CancelFlag;

    fn command() -> (tempfile::TempDir, Command) {
        let dir = tempfile::tempdir().unwrap();
        let limits = OutputLimits::for_project(dir.path());
        let context = CommandContext::new(Duration::from_secs(60), CancelFlag::new());
        (dir, Command::new("code", &context, &limits, "python"))
    }

    #[test]
    fn answers_never_cut_a_character_or_an_escape_sequence() {
        let (_dir, mut command) = command();
        let text = "héllo €\n";
        let bytes = text.as_bytes();
        command.feed(&bytes[..2]); // "h" and half of "é"
        assert_eq!(command.answer_running().output, "h");
        command.feed(&bytes[2..9]); // the rest of "é", "llo ", two bytes of "€"
        assert_eq!(command.answer_running().output, "éllo ");
        command.feed(&bytes[9..]);
        command.feed(b"\x1b[3");
        assert_eq!(command.answer_running().output, "€\n");
        command.feed(b"1mred\x1b[0m\n");
        assert_eq!(command.answer_final(true).output, "red\n");
    }

    #[test]
    fn the_running_account_counts_bytes_and_keeps_the_last_line() {
        let (_dir, mut command) = command();
        command.feed(b"first\nsecond line\n\n");
        let running = command.running();
        assert_eq!(running.output_bytes, 19);
        assert_eq!(running.last_line.as_deref(), Some("second line"));
        assert!(!running.waiting_for_input);
    }

    #[test]
    fn prefixes_stop_before_unfinished_pieces() {
        assert_eq!(whole_prefix(b"abc"), 3);
        assert_eq!(whole_prefix(b"ab\xe2\x82"), 2);
        assert_eq!(whole_prefix(b"ab\x1b"), 2);
        assert_eq!(whole_prefix(b"ab\x1b[1;3"), 2);
        assert_eq!(whole_prefix(b"ab\x1b[1;3m"), 8);
        assert_eq!(whole_prefix(b"ab\x1b]0;title"), 2);
        assert_eq!(whole_prefix(b"ab\x1b]0;title\x07"), 12);
        assert_eq!(whole_prefix(b"\xf0\x9f\x98"), 0);
        assert_eq!(whole_prefix(b"\xf0\x9f\x98\x80"), 4);
    }
}
