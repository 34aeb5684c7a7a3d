//! A file's bytes as numbered lines: where lines start and end, which line
//! ending they carry, whether the file is binary, and how a line is shown.
//!
//! This module owns the byte-level rules every other editor module relies
//! on, so that views, edits and search agree on what "line 42" is: lines end
//! at `\n`; a `\r` before it belongs to the ending, not the text; a file
//! that ends with a line ending has no extra empty line after it. It works
//! on bytes (a file need not be UTF-8) and must not do any I/O.

use std::borrow::Cow;

/// A file is binary if it holds a NUL byte (the rule git and grep use).
pub fn is_binary(bytes: &[u8]) -> bool {
    memchr::memchr(0, bytes).is_some()
}

/// Number of `\n` bytes.
pub fn count_newlines(bytes: &[u8]) -> usize {
    memchr::memchr_iter(b'\n', bytes).count()
}

/// Number of lines: a final line ending does not start another line. Only
/// the tests count a whole file's lines: a view counts no further than it
/// shows (`views::locate`), and is checked against this.
#[cfg(test)]
pub fn line_count(bytes: &[u8]) -> usize {
    if bytes.is_empty() {
        0
    } else {
        count_newlines(searchable(bytes)) + 1
    }
}

/// The bytes without the final line ending, so that a pattern matching at
/// the very end matches on the last line rather than on a line that does
/// not exist.
pub fn searchable(bytes: &[u8]) -> &[u8] {
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    if body.len() < bytes.len() {
        body.strip_suffix(b"\r").unwrap_or(body)
    } else {
        body
    }
}

/// One line: its text and the ending that follows it (`\n`, `\r\n`, or
/// nothing for a last line without one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    pub text: &'a [u8],
    pub ending: &'a [u8],
}

impl Line<'_> {
    /// Its bytes, ending included.
    pub fn len(&self) -> usize {
        self.text.len() + self.ending.len()
    }
}

/// The line that starts at byte `start` (a line start); `None` at the end
/// of the bytes.
pub fn line_starting_at(bytes: &[u8], start: usize) -> Option<Line<'_>> {
    let rest = bytes.get(start..).filter(|rest| !rest.is_empty())?;
    Some(match memchr::memchr(b'\n', rest) {
        Some(newline) => {
            // A `\r` is part of the ending only when a `\n` follows it.
            let text_end = if newline > 0 && rest[newline - 1] == b'\r' {
                newline - 1
            } else {
                newline
            };
            Line {
                text: &rest[..text_end],
                ending: &rest[text_end..=newline],
            }
        }
        None => Line {
            text: rest,
            ending: b"",
        },
    })
}

/// Every line of a file, endings kept, so that joining them gives the file
/// back byte for byte.
pub fn split_lines(bytes: &[u8]) -> Vec<Line<'_>> {
    let mut lines = Vec::new();
    let mut start = 0;
    while let Some(line) = line_starting_at(bytes, start) {
        start += line.len();
        lines.push(line);
    }
    lines
}

/// The byte offset where line `number` (1-based) starts, or the end of the
/// bytes if there are not that many lines.
pub fn line_start(bytes: &[u8], number: usize) -> usize {
    offset_after_lines(bytes, 0, number.saturating_sub(1))
}

/// Up to `limit` lines starting at byte `from` (a line start), text only.
pub fn lines_from(bytes: &[u8], from: usize, limit: usize) -> Vec<&[u8]> {
    let mut lines = Vec::new();
    let mut start = from;
    while lines.len() < limit && start < bytes.len() {
        match memchr::memchr(b'\n', &bytes[start..]) {
            Some(offset) => {
                // As in `split_lines`: a `\r` is part of the ending only
                // when a `\n` follows it.
                let text = &bytes[start..start + offset];
                lines.push(text.strip_suffix(b"\r").unwrap_or(text));
                start += offset + 1;
            }
            None => {
                lines.push(&bytes[start..]);
                start = bytes.len();
            }
        }
    }
    lines
}

/// The byte offset where the line `count` lines after the one starting at
/// `from` starts, or the end of the bytes if there are not that many.
pub fn offset_after_lines(bytes: &[u8], from: usize, count: usize) -> usize {
    /// Blocks whose line endings are all passed are counted at once (a
    /// vectorised count), not walked one ending at a time: finding line
    /// 90,000 of a file is then a scan, not 90,000 steps.
    const BLOCK: usize = 64 * 1024;
    if count == 0 {
        return from;
    }
    let mut at = from;
    let mut left = count;
    while bytes.len() - at > BLOCK {
        let in_block = count_newlines(&bytes[at..at + BLOCK]);
        if in_block >= left {
            break;
        }
        left -= in_block;
        at += BLOCK;
    }
    memchr::memchr_iter(b'\n', &bytes[at..])
        .nth(left - 1)
        .map_or(bytes.len(), |offset| at + offset + 1)
}

/// The line ending a file mostly uses, judged by its first line ending;
/// `\n` for a file without any.
pub fn dominant_ending(bytes: &[u8]) -> &'static [u8] {
    match memchr::memchr(b'\n', bytes) {
        Some(newline) if newline > 0 && bytes[newline - 1] == b'\r' => b"\r\n",
        _ => b"\n",
    }
}

/// Longest text shown for one line on the screen.
pub const MAX_SHOWN_CHARS: usize = 2000;

/// A line as the screen shows it: bytes that are not UTF-8 become U+FFFD,
/// and a very long line is cut with a note of how much is hidden.
pub fn display(text: &[u8]) -> Cow<'_, str> {
    let text = String::from_utf8_lossy(text);
    match text.char_indices().nth(MAX_SHOWN_CHARS) {
        None => text,
        Some((cut, _)) => {
            let hidden = text[cut..].chars().count();
            Cow::Owned(format!("{}… [{hidden} more characters]", &text[..cut]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_keep_their_endings() {
        let bytes = b"a\r\nb\n\nc";
        let lines = split_lines(bytes);
        assert_eq!(lines.len(), 4);
        assert_eq!((lines[0].text, lines[0].ending), (&b"a"[..], &b"\r\n"[..]));
        assert_eq!((lines[2].text, lines[2].ending), (&b""[..], &b"\n"[..]));
        assert_eq!((lines[3].text, lines[3].ending), (&b"c"[..], &b""[..]));
        let joined: Vec<u8> = lines
            .iter()
            .flat_map(|l| [l.text, l.ending].concat())
            .collect();
        assert_eq!(joined, bytes);
    }

    #[test]
    fn counting_lines() {
        assert_eq!(line_count(b""), 0);
        assert_eq!(line_count(b"\n"), 1);
        assert_eq!(line_count(b"a\nb"), 2);
        assert_eq!(line_count(b"a\nb\n"), 2);
        assert_eq!(line_count(b"a\r\nb\r\n"), 2);
        assert_eq!(searchable(b"a\r\n"), b"a");
        assert_eq!(searchable(b"a\r"), b"a\r");
    }

    #[test]
    fn windows_of_lines() {
        let bytes = b"1\n2\r\n3\n4";
        assert_eq!(lines_from(bytes, 2, 2), vec![&b"2"[..], &b"3"[..]]);
        assert_eq!(lines_from(bytes, 0, 10).len(), 4);
        assert_eq!(lines_from(b"a\r", 0, 1), vec![&b"a\r"[..]]);
        assert_eq!(split_lines(b"a\r")[0].text, b"a\r");
        assert_eq!(offset_after_lines(bytes, 0, 2), 5);
        assert_eq!(offset_after_lines(bytes, 0, 9), bytes.len());
        assert_eq!(line_start(bytes, 1), 0);
        assert_eq!(line_start(bytes, 3), 5);
        assert_eq!(line_start(bytes, 5), bytes.len());
        assert_eq!(
            line_starting_at(bytes, 2),
            Some(Line {
                text: b"2",
                ending: b"\r\n"
            })
        );
        assert_eq!(line_starting_at(bytes, 7).map(|l| l.ending), Some(&b""[..]));
        assert_eq!(line_starting_at(bytes, bytes.len()), None);
        assert_eq!(dominant_ending(b"a\r\nb\n"), b"\r\n");
        assert_eq!(dominant_ending(b"a"), b"\n");
    }

    #[test]
    fn far_lines_are_found_across_counted_blocks() {
        // Lines of every length around the block size, so that the line
        // asked for falls at the start, the middle and the end of a block.
        let mut bytes = Vec::new();
        let mut starts = vec![0];
        for n in 0..40_000usize {
            bytes.extend(std::iter::repeat_n(b'x', n % 13));
            bytes.extend_from_slice(if n % 3 == 0 { b"\r\n" } else { b"\n" });
            starts.push(bytes.len());
        }
        for number in [1, 2, 5_000, 9_999, 10_000, 20_001, 39_999, 40_000, 40_001] {
            assert_eq!(line_start(&bytes, number), starts[number - 1], "{number}");
        }
        assert_eq!(line_start(&bytes, 40_002), bytes.len());
        assert_eq!(
            offset_after_lines(&bytes, starts[7], 30_000),
            starts[30_007]
        );
    }

    #[test]
    fn display_is_lossless_where_it_can_be() {
        assert_eq!(display(b"caf\xe9"), "caf\u{fffd}");
        let long = "x".repeat(MAX_SHOWN_CHARS + 5);
        assert!(display(long.as_bytes()).ends_with("… [5 more characters]"));
        assert!(is_binary(b"a\0b"));
        assert!(!is_binary("é".as_bytes()));
    }
}
