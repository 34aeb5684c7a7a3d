//! The NDJSON wire protocol (seed 000, "Agent-Orchestrator Communication
//! Protocol"), plus its optional, additive fields.
//!
//! This module owns framing (one JSON object per line, read in bounded
//! memory), parsing a line into a [`Request`] with an actionable message for
//! every kind of bad input, and encoding [`Reply`]s. It must not know which
//! environments exist or what they do: it hands a parsed request on and
//! serialises what comes back.
//!
//! Input, one object per line:
//! - `{"type":"command","environment":"bash","command":"ls"}`, optionally
//!   with `"id"` (a string or a number, echoed on the answer) and
//!   `"timeout_ms"` (a positive integer).
//! - `{"type":"screen"}`: the current screen without running anything (so an
//!   agent can see the environments before its first command).
//!
//! Output, exactly one line per non-blank input line:
//! `{"type":"response",...}`, `{"type":"screen",...}` or
//! `{"type":"error","message":...}`.
//!
//! Blank lines (empty or only whitespace) are skipped without an answer, as
//! JSON Lines / NDJSON readers conventionally do, so that a stray newline
//! after a message cannot shift the agent's request/answer pairing. A
//! trailing `\r` (CRLF line endings) is accepted.

use std::io::{self, BufRead, Write};
use std::time::Duration;

use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::{Map, Value};

use crate::screen::Screen;

/// Longest line accepted. Longer lines are skipped in bounded memory and
/// answered with an error.
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Largest `timeout_ms` accepted: one day.
pub const MAX_TIMEOUT_MS: u64 = 24 * 60 * 60 * 1000;

const KNOWN_COMMAND_FIELDS: [&str; 5] = ["type", "environment", "command", "id", "timeout_ms"];
const KNOWN_SCREEN_FIELDS: [&str; 2] = ["type", "id"];

/// One line of input as read from the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawLine {
    /// The bytes of the line, without its `\n`.
    Complete(Vec<u8>),
    /// The line was longer than the cap; its bytes were skipped.
    TooLong { length: u64 },
}

/// Reads newline-terminated lines, never holding more than `max_bytes` of one
/// line in memory.
pub struct LineReader<R> {
    inner: R,
    max_bytes: usize,
}

impl<R: BufRead> LineReader<R> {
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

/// A well-formed request.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    Command {
        id: Option<Value>,
        environment: String,
        command: String,
        timeout: Option<Duration>,
    },
    Screen {
        id: Option<Value>,
    },
}

/// What a line turned out to be.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    Request(Request),
    /// An empty or whitespace-only line: no answer.
    Blank,
    Invalid(ProtocolError),
}

/// A line that is not a valid request, with the id if one could be read.
#[derive(Debug, Clone, PartialEq)]
pub struct ProtocolError {
    pub message: String,
    pub id: Option<Value>,
}

impl ProtocolError {
    fn new(message: impl Into<String>) -> Self {
        ProtocolError {
            message: message.into(),
            id: None,
        }
    }

    fn with_id(mut self, id: Option<Value>) -> Self {
        self.id = id;
        self
    }
}

const EXAMPLE: &str = r#"{"type":"command","environment":"bash","command":"ls"}"#;

/// Parses one raw line.
pub fn parse_line(raw: &RawLine, max_bytes: usize) -> Parsed {
    let bytes = match raw {
        RawLine::TooLong { length } => {
            return Parsed::Invalid(ProtocolError::new(format!(
                "line too long: {length} bytes, the limit is {max_bytes} bytes; the line was skipped. \
                 Put large content in a file and refer to it in a shorter command."
            )));
        }
        RawLine::Complete(bytes) => bytes,
    };
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(err) => {
            return Parsed::Invalid(ProtocolError::new(format!(
                "invalid UTF-8 at byte offset {}: each line must be UTF-8 encoded JSON",
                err.valid_up_to()
            )));
        }
    };
    let text = text.strip_suffix('\r').unwrap_or(text);
    if text.trim().is_empty() {
        return Parsed::Blank;
    }
    let value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(err) => {
            return Parsed::Invalid(ProtocolError::new(format!(
                "invalid JSON: {err}. Each line must be one JSON object, e.g. {EXAMPLE}"
            )));
        }
    };
    let Value::Object(object) = value else {
        return Parsed::Invalid(ProtocolError::new(format!(
            "expected a JSON object, got {}. Send e.g. {EXAMPLE}",
            json_kind(&value)
        )));
    };
    match parse_object(&object) {
        Ok(request) => Parsed::Request(request),
        Err(err) => Parsed::Invalid(err),
    }
}

fn parse_object(object: &Map<String, Value>) -> Result<Request, ProtocolError> {
    let id = match object.get("id") {
        None => None,
        Some(value @ (Value::String(_) | Value::Number(_))) => Some(value.clone()),
        Some(other) => {
            return Err(ProtocolError::new(format!(
                "field \"id\" must be a string or a number, got {}",
                json_kind(other)
            )));
        }
    };
    let fail = |message: String| ProtocolError::new(message).with_id(id.clone());
    let kind = match object.get("type") {
        None => {
            return Err(fail(format!(
                "missing field \"type\": expected \"command\" or \"screen\", e.g. {EXAMPLE}"
            )));
        }
        Some(Value::String(kind)) => kind.as_str(),
        Some(other) => {
            return Err(fail(format!(
                "field \"type\" must be a string (\"command\" or \"screen\"), got {}",
                json_kind(other)
            )));
        }
    };
    match kind {
        "command" => {
            check_fields(object, &KNOWN_COMMAND_FIELDS).map_err(&fail)?;
            let environment = required_string(object, "environment").map_err(&fail)?;
            let command = required_string(object, "command").map_err(&fail)?;
            let timeout = match object.get("timeout_ms") {
                None | Some(Value::Null) => None,
                Some(value) => Some(parse_timeout(value).map_err(&fail)?),
            };
            Ok(Request::Command {
                id,
                environment,
                command,
                timeout,
            })
        }
        "screen" => {
            check_fields(object, &KNOWN_SCREEN_FIELDS).map_err(&fail)?;
            Ok(Request::Screen { id })
        }
        other => Err(fail(format!(
            "unknown type {other:?}: expected \"command\" or \"screen\""
        ))),
    }
}

fn check_fields(object: &Map<String, Value>, known: &[&str]) -> Result<(), String> {
    match object.keys().find(|k| !known.contains(&k.as_str())) {
        None => Ok(()),
        Some(unknown) => Err(format!(
            "unknown field {unknown:?}; this message type takes: {}",
            known.join(", ")
        )),
    }
}

fn required_string(object: &Map<String, Value>, field: &str) -> Result<String, String> {
    match object.get(field) {
        Some(Value::String(s)) => Ok(s.clone()),
        None => Err(format!(
            "missing field {field:?}: a command needs \"environment\" and \"command\" strings, e.g. {EXAMPLE}"
        )),
        Some(other) => Err(format!(
            "field {field:?} must be a string, got {}",
            json_kind(other)
        )),
    }
}

fn parse_timeout(value: &Value) -> Result<Duration, String> {
    let millis = value
        .as_u64()
        .filter(|ms| (1..=MAX_TIMEOUT_MS).contains(ms));
    match millis {
        Some(ms) => Ok(Duration::from_millis(ms)),
        None => Err(format!(
            "field \"timeout_ms\" must be a whole number of milliseconds from 1 to {MAX_TIMEOUT_MS}, got {value}"
        )),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// An answer to one line.
#[derive(Debug, Clone)]
pub enum Reply<'a> {
    Response {
        id: Option<&'a Value>,
        output: &'a str,
        success: bool,
        screen: &'a Screen,
    },
    Screen {
        id: Option<&'a Value>,
        screen: &'a Screen,
    },
    Error {
        id: Option<&'a Value>,
        message: &'a str,
    },
}

#[derive(Serialize)]
struct ResponseBody<'a> {
    output: &'a str,
    success: bool,
}

/// Serialises a screen as a JSON object whose keys keep display order.
struct WireScreen<'a>(&'a Screen);

#[derive(Serialize)]
struct WireSection<'a> {
    content: &'a str,
    max_lines: usize,
}

impl Serialize for WireScreen<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, section) in self.0.sections() {
            map.serialize_entry(
                name,
                &WireSection {
                    content: &section.content,
                    max_lines: section.max_lines,
                },
            )?;
        }
        map.end()
    }
}

impl Serialize for Reply<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        match self {
            Reply::Response {
                id,
                output,
                success,
                screen,
            } => {
                map.serialize_entry("type", "response")?;
                if let Some(id) = id {
                    map.serialize_entry("id", id)?;
                }
                map.serialize_entry(
                    "response",
                    &ResponseBody {
                        output,
                        success: *success,
                    },
                )?;
                map.serialize_entry("screen", &WireScreen(screen))?;
            }
            Reply::Screen { id, screen } => {
                map.serialize_entry("type", "screen")?;
                if let Some(id) = id {
                    map.serialize_entry("id", id)?;
                }
                map.serialize_entry("screen", &WireScreen(screen))?;
            }
            Reply::Error { id, message } => {
                map.serialize_entry("type", "error")?;
                if let Some(id) = id {
                    map.serialize_entry("id", id)?;
                }
                map.serialize_entry("message", message)?;
            }
        }
        map.end()
    }
}

/// Writes one reply as one line and flushes it.
///
/// The line is built in memory and written with one call: stdout's own
/// buffer is 1 KiB, so a typical answer (screen included) would otherwise
/// reach the agent in several pieces, each a wake-up for its reader.
pub fn write_reply(out: &mut (impl Write + ?Sized), reply: &Reply<'_>) -> io::Result<()> {
    let mut line = serde_json::to_vec(reply).map_err(io::Error::other)?;
    line.push(b'\n');
    out.write_all(&line)?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::environment::ScreenSection;

    fn parse(text: &str) -> Parsed {
        parse_line(&RawLine::Complete(text.as_bytes().to_vec()), 1024)
    }

    fn error_of(text: &str) -> ProtocolError {
        match parse(text) {
            Parsed::Invalid(err) => err,
            other => panic!("expected an error for {text:?}, got {other:?}"),
        }
    }

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

    #[test]
    fn parses_commands_with_optional_fields() {
        let parsed = parse(
            r#"{"type":"command","environment":"bash","command":"ls","id":7,"timeout_ms":1500}"#,
        );
        assert_eq!(
            parsed,
            Parsed::Request(Request::Command {
                id: Some(Value::from(7)),
                environment: "bash".into(),
                command: "ls".into(),
                timeout: Some(Duration::from_millis(1500)),
            })
        );
        assert_eq!(
            parse("{\"type\":\"screen\",\"id\":\"a\"}\r"),
            Parsed::Request(Request::Screen {
                id: Some(Value::from("a"))
            })
        );
        assert_eq!(parse("   "), Parsed::Blank);
        assert_eq!(parse("\r"), Parsed::Blank);
    }

    #[test]
    fn every_bad_input_has_an_actionable_message() {
        assert!(error_of("not json").message.starts_with("invalid JSON"));
        assert!(
            error_of("[1,2]")
                .message
                .starts_with("expected a JSON object, got an array")
        );
        assert!(error_of("{}").message.starts_with("missing field \"type\""));
        assert!(
            error_of(r#"{"type":5}"#)
                .message
                .contains("must be a string")
        );
        assert!(
            error_of(r#"{"type":"exec"}"#)
                .message
                .starts_with("unknown type \"exec\"")
        );
        let err = error_of(r#"{"type":"command","command":"ls","id":"x"}"#);
        assert!(err.message.starts_with("missing field \"environment\""));
        assert_eq!(err.id, Some(Value::from("x")));
        assert!(
            error_of(r#"{"type":"command","environment":"bash","command":3}"#)
                .message
                .contains("\"command\" must be a string, got a number")
        );
        assert!(
            error_of(r#"{"type":"command","environment":"bash","command":"ls","timeout":5}"#)
                .message
                .starts_with("unknown field \"timeout\"")
        );
        assert!(
            error_of(r#"{"type":"command","environment":"bash","command":"ls","timeout_ms":0}"#)
                .message
                .contains("from 1 to")
        );
        assert!(
            error_of(r#"{"type":"command","environment":"b","command":"c","id":[1]}"#)
                .message
                .contains("\"id\" must be a string or a number")
        );
        let invalid = RawLine::Complete(vec![b'{', 0xff, b'}']);
        match parse_line(&invalid, 10) {
            Parsed::Invalid(err) => {
                assert!(err.message.starts_with("invalid UTF-8 at byte offset 1"))
            }
            other => panic!("{other:?}"),
        }
        match parse_line(&RawLine::TooLong { length: 99 }, 10) {
            Parsed::Invalid(err) => assert!(err.message.starts_with("line too long: 99 bytes")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn replies_are_single_lines_with_ordered_screen() {
        let mut screen = Screen::new();
        screen.push(
            "bash",
            ScreenSection::new("Working directory: /p\nLast exit code: 0"),
        );
        screen.push("alpha", ScreenSection::with_max_lines("a", 3));
        let id = Value::from("req-1");
        let mut out = Vec::new();
        write_reply(
            &mut out,
            &Reply::Response {
                id: Some(&id),
                output: "hi\n",
                success: true,
                screen: &screen,
            },
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "{\"type\":\"response\",\"id\":\"req-1\",\"response\":{\"output\":\"hi\\n\",\"success\":true},\
             \"screen\":{\"bash\":{\"content\":\"Working directory: /p\\nLast exit code: 0\",\"max_lines\":50},\
             \"alpha\":{\"content\":\"a\",\"max_lines\":3}}}\n"
        );
        let mut out = Vec::new();
        write_reply(
            &mut out,
            &Reply::Error {
                id: None,
                message: "bad",
            },
        )
        .unwrap();
        assert_eq!(out, b"{\"type\":\"error\",\"message\":\"bad\"}\n");
    }
}
