//! Parsing: one line into a [`Request`], with an actionable message for
//! every kind of bad input.
//!
//! It must not know which environments exist.

use std::time::Duration;

use serde_json::{Map, Value};

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
}
