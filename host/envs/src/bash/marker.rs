//! The prompt marker: how the shell tells the host that a command is done.
//!
//! Before every prompt, the shell itself (from `PROMPT_COMMAND`, see
//! [`super::setup`]) writes a *prompt report* to its terminal, framed by
//! three escape sequences that carry a per-session random token:
//!
//! ```text
//! ESC ] 6973 ; <token> ; B ; <seq> ; <exit code> ; <shell flags> BEL
//! <working directory>
//! ESC ] 6973 ; <token> ; J BEL
//! <output of `jobs -l`>
//! ESC ] 6973 ; <token> ; E BEL
//! ```
//!
//! `seq` is the number the host gave the command, so a report left over from
//! an earlier command (or printed again by `cat`ting an old log) is never
//! taken for the current one. The token comes from the operating system's
//! random source and never appears in the shell's variables as the bytes
//! above (the format string holds `\e`, not the escape byte), so neither
//! prompt-like text nor `set`/`declare -p` output can end a command early.
//!
//! This module owns the format and [`MarkerScanner`], the streaming parser
//! that splits terminal bytes into command output and prompt reports. It
//! does no I/O.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

/// The OSC number of the frames (an unassigned one: terminals ignore it).
const OSC_NUMBER: &str = "6973";

/// The body of a report is tiny (a path and a job list); anything longer
/// cannot be a real report and is passed through as output.
const MAX_REPORT_BYTES: usize = 1 << 20;

const ESC: u8 = 0x1b;
const BEL: u8 = 0x07;

/// A fresh random token: 128 bits from the OS, as hex.
pub fn new_token() -> String {
    let mut bytes = [0u8; 16];
    let from_os = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if from_os.is_err() {
        // std's hasher keys are themselves seeded from the OS.
        use std::hash::{BuildHasher, Hasher};
        for chunk in bytes.chunks_mut(8) {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or_default(),
            );
            chunk.copy_from_slice(&hasher.finish().to_le_bytes());
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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

/// The printf format strings the shell uses; see the module docs.
pub struct MarkerFormat {
    token: String,
}

impl MarkerFormat {
    pub fn new(token: impl Into<String>) -> Self {
        MarkerFormat {
            token: token.into(),
        }
    }

    /// printf format for the head (args: seq, status, flags, PWD) including
    /// the J frame.
    pub fn head_format(&self) -> String {
        format!(
            "\\e]{OSC_NUMBER};{token};B;%s;%s;%s\\a%s\\e]{OSC_NUMBER};{token};J\\a",
            token = self.token
        )
    }

    /// printf format for the final frame.
    pub fn end_format(&self) -> String {
        format!("\\e]{OSC_NUMBER};{};E\\a", self.token)
    }

    /// The bytes every frame starts with.
    fn prefix(&self) -> Vec<u8> {
        format!("\x1b]{OSC_NUMBER};{};", self.token).into_bytes()
    }

    /// The bytes a report starts with.
    fn begin(&self) -> Vec<u8> {
        let mut begin = self.prefix();
        begin.extend_from_slice(b"B;");
        begin
    }

    /// The complete bytes of a report, as the shell prints it.
    #[cfg(test)]
    pub fn render(&self, report: &PromptReport) -> Vec<u8> {
        let prefix = self.prefix();
        let mut bytes = self.begin();
        bytes.extend_from_slice(
            format!("{};{};{}\x07", report.seq, report.exit_code, report.flags).as_bytes(),
        );
        bytes.extend_from_slice(report.cwd.as_os_str().as_encoded_bytes());
        bytes.extend_from_slice(&prefix);
        bytes.extend_from_slice(b"J\x07");
        bytes.extend_from_slice(report.jobs.as_bytes());
        bytes.extend_from_slice(&prefix);
        bytes.extend_from_slice(b"E\x07");
        bytes
    }
}

/// A piece of the terminal stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scanned {
    Output(Vec<u8>),
    Prompt(PromptReport),
}

enum State {
    /// Ordinary output; `held` is a possible start of a report cut off at
    /// the end of the last chunk.
    Text { held: Vec<u8> },
    /// Inside a report, after its begin frame; `searched` bytes of `body`
    /// hold no frame.
    Report { body: Vec<u8>, searched: usize },
}

/// Splits terminal bytes into output and prompt reports, across chunk
/// boundaries, in memory bounded by [`MAX_REPORT_BYTES`].
///
/// A report runs from its begin frame to the first end frame. A begin frame
/// inside a report means the first was not a real report (a stray or
/// replayed fragment): it is released as output and the new one is read
/// instead, so no fragment can swallow the real report that follows it.
pub struct MarkerScanner {
    begin: Vec<u8>,
    jobs_frame: Vec<u8>,
    end_frame: Vec<u8>,
    state: State,
}

impl MarkerScanner {
    pub fn new(format: &MarkerFormat) -> Self {
        let mut jobs_frame = format.prefix();
        jobs_frame.extend_from_slice(b"J\x07");
        let mut end_frame = format.prefix();
        end_frame.extend_from_slice(b"E\x07");
        MarkerScanner {
            begin: format.begin(),
            jobs_frame,
            end_frame,
            state: State::Text { held: Vec::new() },
        }
    }

    /// Scans `data`, appending what it holds to `out`.
    pub fn feed(&mut self, data: &[u8], out: &mut Vec<Scanned>) {
        let mut rest = self.step(data, out);
        while let Some(more) = rest {
            if more.is_empty() {
                return;
            }
            rest = self.step(&more, out);
        }
    }

    /// Processes `input` until it is used up (`None`) or the state changes
    /// part-way (the unprocessed remainder is returned).
    fn step(&mut self, input: &[u8], out: &mut Vec<Scanned>) -> Option<Vec<u8>> {
        match &mut self.state {
            State::Text { held } if held.is_empty() => {
                let after = self.scan_text(input, out)?;
                Some(input[after..].to_vec())
            }
            State::Text { held } => {
                let mut joined = std::mem::take(held);
                joined.extend_from_slice(input);
                let after = self.scan_text(&joined, out)?;
                joined.drain(..after);
                Some(joined)
            }
            State::Report { body, searched } => {
                body.extend_from_slice(input);
                let overlap = self.end_frame.len().max(self.begin.len());
                let start = searched.saturating_sub(overlap);
                let end = find(&body[start..], &self.end_frame).map(|at| start + at);
                let again = find(&body[start..], &self.begin).map(|at| start + at);
                let mut body = std::mem::take(body);
                match (end, again) {
                    (_, Some(again)) if end.is_none_or(|end| again < end) => {
                        let mut fragment = self.begin.clone();
                        fragment.extend_from_slice(&body[..again]);
                        push_output(out, &fragment);
                        body.drain(..again + self.begin.len());
                        self.state = State::Report {
                            body: Vec::new(),
                            searched: 0,
                        };
                        Some(body)
                    }
                    (Some(end), _) => {
                        self.state = State::Text { held: Vec::new() };
                        self.finish_report(&body[..end], out);
                        body.drain(..end + self.end_frame.len());
                        Some(body)
                    }
                    (None, _) if body.len() > MAX_REPORT_BYTES => {
                        let mut raw = self.begin.clone();
                        raw.append(&mut body);
                        self.state = State::Text { held: Vec::new() };
                        push_output(out, &raw);
                        None
                    }
                    (None, _) => {
                        let searched = body.len();
                        self.state = State::Report { body, searched };
                        None
                    }
                }
            }
        }
    }

    /// Scans text for a begin frame. Emits the output before it. Returns
    /// the index just past the frame when a report starts (the state is
    /// then `Report`), or `None` when the input is used up.
    fn scan_text(&mut self, input: &[u8], out: &mut Vec<Scanned>) -> Option<usize> {
        let mut from = 0;
        while let Some(offset) = input[from..].iter().position(|&b| b == ESC) {
            let at = from + offset;
            let candidate = &input[at..];
            if candidate.len() >= self.begin.len() {
                if candidate.starts_with(&self.begin) {
                    push_output(out, &input[..at]);
                    self.state = State::Report {
                        body: Vec::new(),
                        searched: 0,
                    };
                    return Some(at + self.begin.len());
                }
            } else if self.begin.starts_with(candidate) {
                push_output(out, &input[..at]);
                self.state = State::Text {
                    held: candidate.to_vec(),
                };
                return None;
            }
            from = at + 1;
        }
        push_output(out, input);
        None
    }

    fn finish_report(&mut self, body: &[u8], out: &mut Vec<Scanned>) {
        match parse_report(body, &self.jobs_frame) {
            Some(report) => out.push(Scanned::Prompt(report)),
            None => {
                // Not a report after all (a forgery or a garbled one): show it.
                let mut raw = self.begin.clone();
                raw.extend_from_slice(body);
                raw.extend_from_slice(&self.end_frame);
                push_output(out, &raw);
            }
        }
    }

    /// Bytes held back as a possible report start or an unfinished report,
    /// released as output (when the stream ends).
    pub fn flush(&mut self, out: &mut Vec<Scanned>) {
        match std::mem::replace(&mut self.state, State::Text { held: Vec::new() }) {
            State::Text { held } => push_output(out, &held),
            State::Report { body, .. } => {
                let mut raw = self.begin.clone();
                raw.extend_from_slice(&body);
                push_output(out, &raw);
            }
        }
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

/// `<seq>;<status>;<flags>BEL<pwd><jobs frame><jobs>` (after `…;B;`).
fn parse_report(body: &[u8], jobs_frame: &[u8]) -> Option<PromptReport> {
    let header_end = body.iter().position(|&b| b == BEL)?;
    let header = std::str::from_utf8(&body[..header_end]).ok()?;
    let mut fields = header.splitn(3, ';');
    let seq = fields.next()?.parse().ok()?;
    let exit_code = fields.next()?.parse().ok()?;
    let flags = fields.next()?.to_owned();
    let rest = &body[header_end + 1..];
    let split = find(rest, jobs_frame)?;
    let cwd = PathBuf::from(OsString::from_vec(rest[..split].to_vec()));
    let jobs = String::from_utf8_lossy(&rest[split + jobs_frame.len()..]).into_owned();
    Some(PromptReport {
        seq,
        exit_code,
        flags,
        cwd,
        jobs,
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return None;
    }
    let first = needle[0];
    let mut from = 0;
    while let Some(offset) = haystack[from..=haystack.len() - needle.len()]
        .iter()
        .position(|&b| b == first)
    {
        let at = from + offset;
        if haystack[at..].starts_with(needle) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(seq: u64) -> PromptReport {
        PromptReport {
            seq,
            exit_code: 3,
            flags: "himBHs".into(),
            cwd: PathBuf::from("/tmp/a b;c"),
            jobs: "[1]+ 42 Running                 sleep 9 &\r\n".into(),
        }
    }

    fn scan_in_pieces(bytes: &[u8], piece: usize) -> Vec<Scanned> {
        let format = MarkerFormat::new("0123abcd");
        let mut scanner = MarkerScanner::new(&format);
        let mut out = Vec::new();
        for chunk in bytes.chunks(piece) {
            scanner.feed(chunk, &mut out);
        }
        scanner.flush(&mut out);
        // Merge adjacent outputs so the result does not depend on chunking.
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
    fn splits_output_and_reports_at_every_chunk_size() {
        let format = MarkerFormat::new("0123abcd");
        let mut stream = b"hello\r\n\x1b[31mred\x1b[0m\r\n".to_vec();
        stream.extend(format.render(&report(7)));
        stream.extend_from_slice(b"after");
        for piece in 1..stream.len() {
            let scanned = scan_in_pieces(&stream, piece);
            assert_eq!(
                scanned,
                vec![
                    Scanned::Output(b"hello\r\n\x1b[31mred\x1b[0m\r\n".to_vec()),
                    Scanned::Prompt(report(7)),
                    Scanned::Output(b"after".to_vec()),
                ],
                "piece size {piece}"
            );
        }
    }

    #[test]
    fn lookalikes_and_other_tokens_are_output() {
        let other = MarkerFormat::new("ffffffff");
        let mut stream = b"$ bash-5.2$ <<<PROMPT>>> \x1b]6973;0123abc;B;1;0;x\x07".to_vec();
        stream.extend(other.render(&report(1)));
        let scanned = scan_in_pieces(&stream, 5);
        assert_eq!(scanned, vec![Scanned::Output(stream.clone())]);
    }

    #[test]
    fn a_malformed_report_is_shown_not_swallowed() {
        let format = MarkerFormat::new("0123abcd");
        let mut stream = format.begin();
        stream.extend_from_slice(b"not-a-number;0;x\x07/\x1b]6973;0123abcd;E\x07");
        let scanned = scan_in_pieces(&stream, 3);
        assert_eq!(scanned, vec![Scanned::Output(stream.clone())]);
    }

    #[test]
    fn fragments_cannot_swallow_the_real_report() {
        let format = MarkerFormat::new("0123abcd");
        let real = format.render(&report(7));
        // An unfinished report, a stray end frame alone, a stray jobs frame.
        let mut fragment = format.begin();
        fragment.extend_from_slice(b"6;0;x\x07/old");
        let mut stray = format.prefix();
        stray.extend_from_slice(b"E\x07 ");
        let mut jobs = format.prefix();
        jobs.extend_from_slice(b"J\x07 ");
        for noise in [fragment, stray, jobs] {
            let mut stream = noise.clone();
            stream.extend_from_slice(b"text ");
            stream.extend_from_slice(&real);
            for piece in 1..stream.len() {
                let mut expected_output = noise.clone();
                expected_output.extend_from_slice(b"text ");
                assert_eq!(
                    scan_in_pieces(&stream, piece),
                    vec![Scanned::Output(expected_output), Scanned::Prompt(report(7))],
                    "piece size {piece}"
                );
            }
        }
    }

    #[test]
    fn an_unfinished_report_is_released_on_flush() {
        let format = MarkerFormat::new("0123abcd");
        let mut stream = b"x".to_vec();
        stream.extend(format.begin());
        stream.extend_from_slice(b"1;0;");
        assert_eq!(
            scan_in_pieces(&stream, 4),
            vec![Scanned::Output(stream.clone())]
        );
    }

    #[test]
    fn tokens_are_random_hex() {
        let a = new_token();
        let b = new_token();
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
