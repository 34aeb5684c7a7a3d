//! Parsing: one line into a [`Request`], with an actionable message for
//! every kind of bad input.
//!
//! It must not know which environments exist.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::fields::{self, check_fields, json_kind};
use crate::files;
use crate::framing::RawLine;

/// answered with an error.
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Largest `timeout_ms` accepted: one day.
pub const MAX_TIMEOUT_MS: u64 = 24 * 60 * 60 * 1000;

const KNOWN_COMMAND_FIELDS: [&str; 5] = ["type", "environment", "command", "id", "timeout_ms"];
const KNOWN_SCREEN_FIELDS: [&str; 2] = ["type", "id"];
/// A well-formed request.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// Run `command` in `environment`.
    Command {
        /// The agent's `id`, to echo on the answer.
        id: Option<Value>,
        /// The environment to run it in.
        environment: String,
        /// The command's text.
        command: String,
        /// `timeout_ms`, when given.
        timeout: Option<Duration>,
    },
    /// Send the current screen.
    Screen {
        /// The agent's `id`, to echo on the answer.
        id: Option<Value>,
    },
    /// Send up to `length` bytes of a project file from `offset`.
    ReadFile {
        /// The agent's `id`, to echo on the answer.
        id: Option<Value>,
        /// The file, as given.
        path: String,
        /// Where to start (0 when not given).
        offset: u64,
        /// How many bytes at most (the host's maximum when not given).
        length: Option<u64>,
    },
    /// Write a chunk of a project file.
    WriteFile {
        /// The agent's `id`, to echo on the answer.
        id: Option<Value>,
        /// The file, as given.
        path: String,
        /// The bytes, decoded from base64.
        content: Vec<u8>,
        /// Continue the unfinished write of this file (rather than start it afresh).
        append: bool,
        /// More chunks follow (the file is put in place with the last one).
        more: bool,
    },
}

/// What a line turned out to be.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    /// A valid request.
    Request(Request),
    /// An empty or whitespace-only line: no answer.
    Blank,
    /// Not a valid request; the error says why.
    Invalid(ProtocolError),
}

/// A line that is not a valid request, with the id if one could be read.
#[derive(Debug, Clone, PartialEq)]
pub struct ProtocolError {
    /// What was wrong, and what to send instead.
    pub message: String,
    /// The `id`, when one could be read.
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

/// Every request type, as the error for an unknown one lists them.
const TYPES: &str = "\"command\", \"screen\", \"read_file\" or \"write_file\"";

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
                "missing field \"type\": expected {TYPES}, e.g. {EXAMPLE}"
            )));
        }
        Some(Value::String(kind)) => kind.as_str(),
        Some(other) => {
            return Err(fail(format!(
                "field \"type\" must be a string ({TYPES}), got {}",
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
        "read_file" => {
            let read = files::parse_read(object).map_err(&fail)?;
            Ok(Request::ReadFile {
                id,
                path: read.path,
                offset: read.offset,
                length: read.length,
            })
        }
        "write_file" => {
            let write = files::parse_write(object).map_err(&fail)?;
            Ok(Request::WriteFile {
                id,
                path: write.path,
                content: write.content,
                append: write.append,
                more: write.more,
            })
        }
        other => Err(fail(format!("unknown type {other:?}: expected {TYPES}"))),
    }
}

fn required_string(object: &Map<String, Value>, field: &str) -> Result<String, String> {
    fields::string(
        object,
        field,
        &format!("a command needs \"environment\" and \"command\" strings, e.g. {EXAMPLE}"),
    )
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

#[cfg(test)]
mod tests {
    use super::*;

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

    fn file_error(text: &str) -> String {
        error_of(text).message
    }

    #[test]
    fn file_requests_parse_with_their_defaults() {
        assert_eq!(
            parse(r#"{"type":"read_file","path":"a.bin","id":3}"#),
            Parsed::Request(Request::ReadFile {
                id: Some(Value::from(3)),
                path: "a.bin".into(),
                offset: 0,
                length: None
            })
        );
        assert_eq!(
            parse(r#"{"type":"read_file","path":"a","offset":10,"length":5}"#),
            Parsed::Request(Request::ReadFile {
                id: None,
                path: "a".into(),
                offset: 10,
                length: Some(5)
            })
        );
        assert_eq!(
            parse(r#"{"type":"write_file","path":"a","content_base64":"AP8=","more":true}"#),
            Parsed::Request(Request::WriteFile {
                id: None,
                path: "a".into(),
                content: vec![0, 255],
                append: false,
                more: true
            })
        );
    }

    #[test]
    fn bad_file_requests_say_what_to_send() {
        assert!(file_error(r#"{"type":"read_file"}"#).starts_with("missing field \"path\""));
        assert!(
            file_error(r#"{"type":"read_file","path":"a","offset":-1}"#).contains("\"offset\"")
        );
        assert!(file_error(r#"{"type":"read_file","path":"a","length":0}"#).contains("from 1"));
        assert!(
            file_error(r#"{"type":"read_file","path":"a","size":1}"#)
                .starts_with("unknown field \"size\"")
        );
        assert!(
            file_error(r#"{"type":"write_file","path":"a"}"#)
                .starts_with("missing field \"content_base64\"")
        );
        assert!(
            file_error(r#"{"type":"write_file","path":"a","content_base64":"not base64!"}"#)
                .contains("not standard base64")
        );
        assert!(
            file_error(r#"{"type":"write_file","path":"a","content_base64":"","append":"yes"}"#)
                .contains("true or false")
        );
        assert!(
            file_error(r#"{"type":"rename_file"}"#).contains("\"read_file\" or \"write_file\"")
        );
    }
}
