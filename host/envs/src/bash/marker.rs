//! How the shell tells the host that a command is done, and how the host
//! knows it has read everything the command printed.
//!
//! **The report** travels on a private socket, never through the terminal:
//! nothing a command prints can end it. The host creates a socket pair per
//! shell and hands one end to bash at a fixed descriptor number
//! ([`super::setup`]); before every prompt the shell itself (from
//! `PROMPT_COMMAND`) writes
//!
//! ```text
//! R <seq> ; <exit code> ; <shell flags> ; <fence> ; <notes> NUL <working directory> NUL <jobs -l> NUL
//! ```
//!
//! `seq` is the number the host gave the command; `notes` are letters for
//! what the prompt code repaired or found (see [`Notes`]). The host accepts
//! a report only from the shell's own process (the kernel attaches the
//! sender's pid to every message, `SCM_CREDENTIALS`), and only while the
//! shell holds the socket at its place: every command runs inside
//! `eval … <fd>>&-`, so neither the command nor anything it starts holds the
//! descriptor (bash keeps a close-on-exec copy aside for the duration, which
//! is why the place is checked). [`ReportParser`] splits the byte stream
//! into reports; the checks are the reader's.
//!
//! **The fence** orders the two channels: the report may arrive before the
//! last bytes the command wrote to the terminal have come through the
//! kernel's terminal buffers. So after the report the prompt code writes
//! `ESC ] 6973 ; F ; <fence> BEL` to the terminal, with a fresh random
//! number from the shell (`$SRANDOM`, drawn only after the command ended,
//! so the command cannot print it in advance). Everything before that fence
//! on the terminal is the command's. [`FenceScanner`] removes fences from
//! the terminal stream and reports them. The report is written first and
//! the fence last: once the fence is read, the report is on the socket.
//!
//! This module owns both formats and does no I/O.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

/// The OSC number of the fence (an unassigned one: terminals ignore it).
const FENCE_PREFIX: &[u8] = b"\x1b]6973;F;";
/// Digits of a fence: a 32-bit random number (compared as text). Guessing
/// it would only end the collection of a command's output early (the rest
/// shows as late output), never its report.
const MAX_FENCE_DIGITS: usize = 20;
const BEL: u8 = 0x07;

/// A report's body is small (a path and a job list); anything longer is not
/// a report and is dropped.
const MAX_REPORT_BYTES: usize = 1 << 20;

/// What the prompt code noticed and repaired (letters in the report).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Notes {
    /// Standard input was not the terminal (`exec 0<…`); it was
    /// reconnected, since the shell reads its commands there.
    pub stdin_reconnected: bool,
    /// Standard output was closed (`exec 1>&-`); it was reopened on the
    /// terminal.
    pub stdout_reopened: bool,
    /// The shell's own terminal descriptor was found closed after the
    /// previous report; it was reopened.
    pub terminal_reopened: bool,
    /// Standard output is a pipe or socket (`exec > >(tee log)`): what the
    /// command wrote may still be on its way.
    pub stdout_is_pipe: bool,
    /// Whole lines were waiting on the terminal that the command never
    /// read (typed with `input`); they were discarded, not run.
    pub typed_discarded: bool,
}

impl Notes {
    fn parse(letters: &str) -> Notes {
        Notes {
            stdin_reconnected: letters.contains('0'),
            stdout_reopened: letters.contains('1'),
            terminal_reopened: letters.contains('t'),
            stdout_is_pipe: letters.contains('p'),
            typed_discarded: letters.contains('d'),
        }
    }
}

/// What the shell reported at a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptReport {
    /// The number of the command this prompt ends (0: the first prompt).
    pub seq: u64,
    /// `$?` of the command.
    pub exit_code: i32,
    /// `$-`: the shell's single-letter options (`e` = errexit, ...).
    pub flags: String,
    /// The fence written to the terminal just before (decimal digits).
    pub fence: String,
    /// What the prompt code noticed.
    pub notes: Notes,
    /// `$PWD`.
    pub cwd: PathBuf,
    /// The raw output of `jobs -l`.
    pub jobs: String,
}

impl PromptReport {
    pub fn errexit(&self) -> bool {
        self.flags.contains('e')
    }
}

/// The printf formats the prompt code uses (see the module docs).
pub struct ReportFormat;

impl ReportFormat {
    /// The fence, for printf (argument: the fence number).
    pub const FENCE: &'static str = "\\e]6973;F;%s\\a";
    /// The report's head (arguments: seq, status, flags, fence, notes, PWD).
    pub const HEAD: &'static str = "R%s;%s;%s;%s;%s\\0%s\\0";
    /// What ends a report (after `jobs -l`, or right after the head).
    pub const END: &'static str = "\\0";
}

/// Splits the report socket's bytes (from the shell only) into reports.
#[derive(Default)]
pub struct ReportParser {
    buffer: Vec<u8>,
}

impl ReportParser {
    /// Adds bytes; returns the reports they complete, and whether bytes
    /// were dropped as not being a report.
    pub fn feed(&mut self, bytes: &[u8]) -> (Vec<PromptReport>, bool) {
        self.buffer.extend_from_slice(bytes);
        let mut reports = Vec::new();
        let mut garbled = false;
        loop {
            // Resynchronise on the next `R` if the stream starts otherwise.
            match self.buffer.iter().position(|&b| b == b'R') {
                Some(0) => {}
                Some(at) => {
                    garbled = true;
                    self.buffer.drain(..at);
                }
                None => {
                    garbled |= !self.buffer.is_empty();
                    self.buffer.clear();
                    break;
                }
            }
            let nuls: Vec<usize> = self
                .buffer
                .iter()
                .enumerate()
                .filter(|(_, b)| **b == 0)
                .map(|(at, _)| at)
                .take(3)
                .collect();
            if nuls.len() < 3 {
                if self.buffer.len() > MAX_REPORT_BYTES {
                    garbled = true;
                    self.buffer.clear();
                }
                break;
            }
            let frame: Vec<u8> = self.buffer.drain(..=nuls[2]).collect();
            match parse_report(
                &frame[1..nuls[0]],
                &frame[nuls[0] + 1..nuls[1]],
                &frame[nuls[1] + 1..nuls[2]],
            ) {
                Some(report) => reports.push(report),
                None => garbled = true,
            }
        }
        (reports, garbled)
    }
}

fn parse_report(header: &[u8], cwd: &[u8], jobs: &[u8]) -> Option<PromptReport> {
    let header = std::str::from_utf8(header).ok()?;
    let mut fields = header.split(';');
    let seq = fields.next()?.parse().ok()?;
    let exit_code = fields.next()?.parse().ok()?;
    let flags = fields.next()?.to_owned();
    let fence = fields.next()?.to_owned();
    if fence.is_empty()
        || fence.len() > MAX_FENCE_DIGITS
        || !fence.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let notes = Notes::parse(fields.next()?);
    if fields.next().is_some() {
        return None;
    }
    Some(PromptReport {
        seq,
        exit_code,
        flags,
        fence,
        notes,
        cwd: PathBuf::from(OsString::from_vec(cwd.to_vec())),
        jobs: String::from_utf8_lossy(jobs).into_owned(),
    })
}

/// A piece of the terminal stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scanned {
    Output(Vec<u8>),
    Fence(String),
}

/// Removes fences from terminal bytes, across chunk boundaries, holding
/// back at most one fence's length.
#[derive(Default)]
pub struct FenceScanner {
    /// A possible fence cut off at the end of the last chunk.
    held: Vec<u8>,
}

impl FenceScanner {
    pub fn new() -> Self {
        FenceScanner::default()
    }

    /// Scans `data`, appending what it holds to `out`.
    pub fn feed(&mut self, data: &[u8], out: &mut Vec<Scanned>) {
        let joined;
        let input: &[u8] = if self.held.is_empty() {
            data
        } else {
            let mut held = std::mem::take(&mut self.held);
            held.extend_from_slice(data);
            joined = held;
            &joined
        };
        let mut from = 0;
        let mut text_start = 0;
        while let Some(offset) = input[from..].iter().position(|&b| b == 0x1b) {
            let at = from + offset;
            match fence_at(&input[at..]) {
                Candidate::Fence { value, length } => {
                    push_output(out, &input[text_start..at]);
                    out.push(Scanned::Fence(value));
                    from = at + length;
                    text_start = from;
                }
                Candidate::Partial => {
                    push_output(out, &input[text_start..at]);
                    self.held = input[at..].to_vec();
                    return;
                }
                Candidate::No => from = at + 1,
            }
        }
        push_output(out, &input[text_start..]);
    }

    /// Bytes held back as a possible fence, released as output (when the
    /// stream ends).
    pub fn flush(&mut self, out: &mut Vec<Scanned>) {
        let held = std::mem::take(&mut self.held);
        push_output(out, &held);
    }
}

enum Candidate {
    Fence {
        value: String,
        length: usize,
    },
    /// The bytes so far could still become a fence.
    Partial,
    No,
}

/// Whether `bytes` (starting at an ESC) start with a fence.
fn fence_at(bytes: &[u8]) -> Candidate {
    let prefix = bytes.len().min(FENCE_PREFIX.len());
    if bytes[..prefix] != FENCE_PREFIX[..prefix] {
        return Candidate::No;
    }
    if bytes.len() <= FENCE_PREFIX.len() {
        return Candidate::Partial;
    }
    let rest = &bytes[FENCE_PREFIX.len()..];
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits > MAX_FENCE_DIGITS {
        return Candidate::No;
    }
    match rest.get(digits) {
        None => Candidate::Partial,
        Some(&BEL) if digits > 0 => Candidate::Fence {
            value: String::from_utf8_lossy(&rest[..digits]).into_owned(),
            length: FENCE_PREFIX.len() + digits + 1,
        },
        Some(_) => Candidate::No,
    }
}

fn push_output(out: &mut Vec<Scanned>, bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    if let Some(Scanned::Output(last)) = out.last_mut() {
        last.extend_from_slice(bytes);
    } else {
        out.push(Scanned::Output(bytes.to_vec()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_in_pieces(bytes: &[u8], piece: usize) -> Vec<Scanned> {
        let mut scanner = FenceScanner::new();
        let mut out = Vec::new();
        for chunk in bytes.chunks(piece) {
            scanner.feed(chunk, &mut out);
        }
        scanner.flush(&mut out);
        let mut merged: Vec<Scanned> = Vec::new();
        for item in out {
            match (merged.last_mut(), item) {
                (Some(Scanned::Output(a)), Scanned::Output(b)) => a.extend_from_slice(&b),
                (_, item) => merged.push(item),
            }
        }
        merged
    }

    #[test]
    fn fences_are_found_at_every_chunk_size() {
        let mut stream = b"hello\r\n\x1b[31mred\x1b[0m\r\n".to_vec();
        stream.extend_from_slice(b"\x1b]6973;F;12345678901234567890\x07after");
        for piece in 1..stream.len() {
            assert_eq!(
                scan_in_pieces(&stream, piece),
                vec![
                    Scanned::Output(b"hello\r\n\x1b[31mred\x1b[0m\r\n".to_vec()),
                    Scanned::Fence("12345678901234567890".into()),
                    Scanned::Output(b"after".to_vec()),
                ],
                "piece size {piece}"
            );
        }
    }

    #[test]
    fn lookalikes_are_output() {
        for lookalike in [
            &b"\x1b]6973;F;\x07"[..],
            b"\x1b]6973;F;12a\x07",
            b"\x1b]6973;G;1\x07",
            b"\x1b]6973;F;123456789012345678901234\x07",
        ] {
            let mut stream = b"x".to_vec();
            stream.extend_from_slice(lookalike);
            assert_eq!(
                scan_in_pieces(&stream, 3),
                vec![Scanned::Output(stream.clone())],
                "{lookalike:?}"
            );
        }
    }

    #[test]
    fn an_unfinished_fence_is_released_on_flush() {
        let stream = b"x\x1b]6973;F;12".to_vec();
        assert_eq!(
            scan_in_pieces(&stream, 4),
            vec![Scanned::Output(stream.clone())]
        );
    }

    fn report_bytes(seq: u64, jobs: &str) -> Vec<u8> {
        let mut bytes = format!("R{seq};3;himBHs;42;1p\0").into_bytes();
        bytes.extend_from_slice(b"/tmp/a b;c\0");
        bytes.extend_from_slice(jobs.as_bytes());
        bytes.push(0);
        bytes
    }

    #[test]
    fn reports_are_parsed_across_chunks() {
        let mut stream = report_bytes(7, "[1]+ 42 Running sleep 9 &\n");
        stream.extend(report_bytes(8, ""));
        for piece in 1..stream.len() {
            let mut parser = ReportParser::default();
            let mut reports = Vec::new();
            for chunk in stream.chunks(piece) {
                let (mut found, garbled) = parser.feed(chunk);
                assert!(!garbled);
                reports.append(&mut found);
            }
            assert_eq!(reports.len(), 2, "piece {piece}");
            assert_eq!(reports[0].seq, 7);
            assert_eq!(reports[0].exit_code, 3);
            assert_eq!(reports[0].fence, "42");
            assert!(reports[0].notes.stdout_reopened && reports[0].notes.stdout_is_pipe);
            assert!(!reports[0].notes.stdin_reconnected);
            assert_eq!(reports[0].cwd, PathBuf::from("/tmp/a b;c"));
            assert_eq!(reports[0].jobs, "[1]+ 42 Running sleep 9 &\n");
            assert_eq!(reports[1].seq, 8);
        }
    }

    #[test]
    fn garbage_is_dropped_and_the_next_report_still_read() {
        let mut parser = ReportParser::default();
        let mut stream = b"junk\0more\0R1;x;;;\0/\0\0".to_vec();
        stream.extend(report_bytes(2, ""));
        let (reports, garbled) = parser.feed(&stream);
        assert!(garbled);
        assert_eq!(reports.len(), 1);
        assert_eq!(reports[0].seq, 2);
    }
}
