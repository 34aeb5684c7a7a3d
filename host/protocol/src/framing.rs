//! Framing: one JSON object per line, read in bounded memory.
//!
//! This module owns where a line ends and what happens to a line too long
//! to hold; it must not know what a line means.

use std::io::{self, BufRead};

/// One line of input as read from the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawLine {
    /// The bytes of the line, without its `\n`.
    Complete(Vec<u8>),
    /// The line was longer than the cap; its bytes were skipped.
    TooLong {
        /// How long the line was.
        length: u64,
    },
}

/// Reads newline-terminated lines, never holding more than `max_bytes` of one
/// line in memory.
pub struct LineReader<R> {
    inner: R,
    max_bytes: usize,
}

impl<R: BufRead> LineReader<R> {
    /// Reads lines of `inner`, holding at most `max_bytes` of one.
    pub fn new(inner: R, max_bytes: usize) -> Self {
        LineReader { inner, max_bytes }
    }

    /// The next line, or `None` at end of input. A final line without a
    /// newline is still a line.
    pub fn next_line(&mut self) -> io::Result<Option<RawLine>> {
        let mut line = Vec::new();
        let mut length: u64 = 0;
        let mut overflow = false;
        loop {
            let available = match self.inner.fill_buf() {
                Ok(buf) => buf,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => return Err(err),
            };
            if available.is_empty() {
                // End of input.
                if length == 0 {
                    return Ok(None);
                }
                break;
            }
            let (chunk, found_newline) = match available.iter().position(|&b| b == b'\n') {
                Some(at) => (&available[..at], true),
                None => (available, false),
            };
            length += chunk.len() as u64;
            if !overflow {
                if line.len() + chunk.len() > self.max_bytes {
                    overflow = true;
                    line = Vec::new();
                } else {
                    line.extend_from_slice(chunk);
                }
            }
            let consumed = chunk.len() + usize::from(found_newline);
            self.inner.consume(consumed);
            if found_newline {
                break;
            }
        }
        if overflow {
            Ok(Some(RawLine::TooLong { length }))
        } else {
            Ok(Some(RawLine::Complete(line)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_lines_with_bounded_memory() {
        let input = b"short\n0123456789abcdef\nlast-without-newline".to_vec();
        let mut reader = LineReader::new(io::BufReader::with_capacity(4, &input[..]), 10);
        assert_eq!(
            reader.next_line().unwrap(),
            Some(RawLine::Complete(b"short".to_vec()))
        );
        assert_eq!(
            reader.next_line().unwrap(),
            Some(RawLine::TooLong { length: 16 })
        );
        assert_eq!(
            reader.next_line().unwrap(),
            Some(RawLine::TooLong { length: 20 })
        );
        assert_eq!(reader.next_line().unwrap(), None);
    }

    #[test]
    fn empty_lines_are_lines() {
        let input = b"\n\nx\n".to_vec();
        let mut reader = LineReader::new(&input[..], 10);
        assert_eq!(reader.next_line().unwrap(), Some(RawLine::Complete(vec![])));
        assert_eq!(reader.next_line().unwrap(), Some(RawLine::Complete(vec![])));
        assert_eq!(
            reader.next_line().unwrap(),
            Some(RawLine::Complete(b"x".to_vec()))
        );
        assert_eq!(reader.next_line().unwrap(), None);
    }
}
