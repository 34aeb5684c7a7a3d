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
//! R <seq> ; <exit code> ; <shell flags> ; <notes> NUL <working directory> NUL <jobs -l> NUL
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
//! **Ordering the two channels.** The report may arrive before the last
//! bytes the command wrote to the terminal have passed the kernel's
//! terminal buffers: a write to the shell's side of a PTY returns once the
//! bytes are queued, and a kernel worker moves them to the host's side
//! later. But a read or poll of the host's side that finds nothing waiting
//! first runs that pending work itself (Linux's `n_tty_read` and
//! `n_tty_poll` call `tty_buffer_flush_work`). So once the report is in,
//! reading the terminal until it has nothing more gets everything written
//! before the report (the reader does that, [`super::reader`]). Measured
//! here: right after the report, `FIONREAD` (which runs no pending work)
//! found the bytes still in transit 56 times in 20,000; a poll-and-read
//! missed none in 40,000, on a loaded machine.
//!
//! This module owns the report's format and does no I/O.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

/// The number of a report whose number is not one (the command changed
/// the shell's copy of it).
pub const UNKNOWN_SEQ: u64 = u64::MAX;

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
    /// Standard output is a pipe or socket (`exec > >(tee log)`): what the
    /// command wrote may still be on its way.
    pub stdout_is_pipe: bool,
    /// Standard error was closed when the command started (the command
    /// before it ran `exec 2>&-`); it was reopened on the terminal first.
    /// Standard error is looked at as a command starts, after a command
    /// that could change the shell: the prompt code's own redirection
    /// hides it from the prompt code.
    pub stderr_reopened: bool,
    /// Standard error was a pipe or socket when the command started
    /// (`exec 2> >(tee log)` before it).
    pub stderr_is_pipe: bool,
    /// Whole lines were waiting on the terminal that the command never
    /// read (typed with `input`); they were discarded, not run.
    pub typed_discarded: bool,
    /// The prompt code looked at standard input and output (after a
    /// command that could change the shell); otherwise they are as last
    /// looked at.
    pub looked_at_output: bool,
    /// Standard error was looked at as the command started.
    pub looked_at_stderr: bool,
}

impl Notes {
    fn parse(letters: &str) -> Notes {
        Notes {
            stdin_reconnected: letters.contains('0'),
            stdout_reopened: letters.contains('1'),
            stdout_is_pipe: letters.contains('p'),
            stderr_reopened: letters.contains('2'),
            stderr_is_pipe: letters.contains('P'),
            looked_at_output: letters.contains('l'),
            looked_at_stderr: letters.contains('e'),
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

    /// `set -x` is on.
    pub fn tracing(&self) -> bool {
        self.flags.contains('x')
    }
}

/// The printf formats the prompt code uses (see the module docs).
pub struct ReportFormat;

impl ReportFormat {
    /// The report's head (arguments: seq, status, flags, notes, PWD).
    pub const HEAD: &'static str = "R%s;%s;%s;%s\\0%s\\0";
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
    let seq = fields.next()?.parse().unwrap_or(UNKNOWN_SEQ);
    let exit_code = fields.next()?.parse().ok()?;
    let flags = fields.next()?.to_owned();
    let notes = Notes::parse(fields.next()?);
    if fields.next().is_some() {
        return None;
    }
    Some(PromptReport {
        seq,
        exit_code,
        flags,
        notes,
        cwd: PathBuf::from(OsString::from_vec(cwd.to_vec())),
        jobs: String::from_utf8_lossy(jobs).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report_bytes(seq: u64, jobs: &str) -> Vec<u8> {
        let mut bytes = format!("R{seq};3;himBHs;1pP\0").into_bytes();
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
            assert!(reports[0].notes.stdout_reopened && reports[0].notes.stdout_is_pipe);
            assert!(reports[0].notes.stderr_is_pipe && !reports[0].notes.stderr_reopened);
            assert!(!reports[0].notes.stdin_reconnected);
            assert_eq!(reports[0].cwd, PathBuf::from("/tmp/a b;c"));
            assert_eq!(reports[0].jobs, "[1]+ 42 Running sleep 9 &\n");
            assert_eq!(reports[1].seq, 8);
        }
    }

    #[test]
    fn garbage_is_dropped_and_the_next_report_still_read() {
        let mut parser = ReportParser::default();
        let mut stream = b"junk\0more\0R1;x;;\0/\0\0".to_vec();
        stream.extend(report_bytes(2, ""));
        let (reports, garbled) = parser.feed(&stream);
        assert!(garbled);
        assert_eq!(reports.len(), 1);
        assert_eq!(reports[0].seq, 2);
    }
}
