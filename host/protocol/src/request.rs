//! Parsing: one line into a [`Request`], with an actionable message for
//! every kind of bad input.
//!
//! A line is first split into its fields as raw JSON text, so that the
//! agent's `id` is kept exactly as written (an integer above 2^64 is not
//! rounded through a float), then each field the message type takes is
//! read and checked. It must not know which environments exist.

use std::time::Duration;

use envhost_core::{CommandRequest, Control, ControlRequest, RequestId};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::fields::{self, BadField, Fields, check_fields, value};
use crate::files;
use crate::framing::RawLine;
use envhost_core::text::json_kind;

/// The longest line read; a longer line is skipped in bounded memory and
/// answered with an error.
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Largest `timeout_ms` or `yield_ms` accepted: one day.
pub const MAX_TIMEOUT_MS: u64 = 24 * 60 * 60 * 1000;

/// The message types, as the errors list them.
const TYPES: &str = r#""command", "wait", "input", "interrupt", "restart", "close", "screen", "read_file" or "write_file""#;

/// A well-formed request.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// Run a command: `{"type":"command","environment":…,"command":…}`,
    /// optionally with `timeout_ms` and `yield_ms`.
    Command(CommandRequest),
    /// Go on with a running command (`wait`, `input`, `interrupt`),
    /// restart an environment (`restart`) or close a named instance
    /// (`close`).
    Control(ControlRequest),
    /// Send the current screen.
    Screen {
        /// The agent's `id`, to echo on the answer.
        id: Option<RequestId>,
    },
    /// Send up to `length` bytes of a project file from `offset`.
    ReadFile {
        /// The agent's `id`, to echo on the answer.
        id: Option<RequestId>,
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
        id: Option<RequestId>,
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

impl Request {
    /// The agent's `id`, to echo on the answer.
    pub fn id(&self) -> Option<&RequestId> {
        match self {
            Request::Command(command) => command.id.as_ref(),
            Request::Control(control) => control.id.as_ref(),
            Request::Screen { id }
            | Request::ReadFile { id, .. }
            | Request::WriteFile { id, .. } => id.as_ref(),
        }
    }
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
    pub id: Option<RequestId>,
}

impl ProtocolError {
    fn new(message: impl Into<String>) -> Self {
        ProtocolError {
            message: message.into(),
            id: None,
        }
    }

    fn with_id(mut self, id: Option<RequestId>) -> Self {
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
    let fields: Fields<'_> = match serde_json::from_str(text) {
        Ok(fields) => fields,
        // Not an object, or not JSON at all: the plain parse says which.
        Err(_) => {
            return Parsed::Invalid(ProtocolError::new(
                match serde_json::from_str::<&RawValue>(text) {
                    Err(err) => format!(
                        "invalid JSON: {err}. Each line must be one JSON object, e.g. {EXAMPLE}"
                    ),
                    Ok(value) => format!(
                        "expected a JSON object, got {}. Send e.g. {EXAMPLE}",
                        raw_kind(value)
                    ),
                },
            ));
        }
    };
    match parse_fields(&fields) {
        Ok(request) => Parsed::Request(request),
        Err(err) => Parsed::Invalid(err),
    }
}

fn parse_fields(fields: &Fields<'_>) -> Result<Request, ProtocolError> {
    let id = match fields.get("id") {
        None => None,
        Some(raw) => Some(RequestId::from_json(raw).map_err(|refused| {
            ProtocolError::new(format!(
                "field \"id\" must be a string or a number, got {}",
                refused.0
            ))
        })?),
    };
    let fail = |bad: BadField| ProtocolError::new(bad.0).with_id(id.clone());
    let kind = match value(fields, "type").map_err(&fail)? {
        None => {
            return Err(fail(
                format!("missing field \"type\": expected {TYPES}, e.g. {EXAMPLE}").into(),
            ));
        }
        Some(Value::String(kind)) => kind,
        Some(other) => {
            return Err(fail(
                format!(
                    "field \"type\" must be a string ({TYPES}), got {}",
                    json_kind(&other)
                )
                .into(),
            ));
        }
    };
    read_request(fields, &kind, id.clone()).map_err(fail)
}

/// The request of type `kind`, its fields checked.
fn read_request(
    fields: &Fields<'_>,
    kind: &str,
    id: Option<RequestId>,
) -> Result<Request, BadField> {
    let request = match kind {
        "command" => {
            check_fields(
                fields,
                &[
                    "type",
                    "environment",
                    "command",
                    "id",
                    "timeout_ms",
                    "yield_ms",
                ],
            )?;
            Request::Command(CommandRequest {
                environment: required_string(fields, "environment", kind)?,
                command: required_string(fields, "command", kind)?,
                timeout: millis(fields, "timeout_ms", 1)?,
                yield_after: millis(fields, "yield_ms", 1)?,
                id,
            })
        }
        "wait" => {
            check_fields(fields, &["type", "environment", "id", "timeout_ms"])?;
            control(
                fields,
                kind,
                id,
                Control::Wait {
                    timeout: millis(fields, "timeout_ms", 0)?,
                },
            )?
        }
        "input" => {
            check_fields(fields, &["type", "environment", "text", "id", "timeout_ms"])?;
            control(
                fields,
                kind,
                id,
                Control::Input {
                    text: required_string(fields, "text", kind)?,
                    timeout: millis(fields, "timeout_ms", 0)?,
                },
            )?
        }
        "interrupt" => {
            check_fields(fields, &["type", "environment", "id"])?;
            control(fields, kind, id, Control::Interrupt)?
        }
        "restart" => {
            check_fields(fields, &["type", "environment", "id"])?;
            control(fields, kind, id, Control::Restart)?
        }
        "close" => {
            check_fields(fields, &["type", "environment", "id"])?;
            control(fields, kind, id, Control::Close)?
        }
        "screen" => {
            check_fields(fields, &["type", "id"])?;
            Request::Screen { id }
        }
        "read_file" => {
            let read = files::parse_read(fields)?;
            Request::ReadFile {
                id,
                path: read.path,
                offset: read.offset,
                length: read.length,
            }
        }
        "write_file" => {
            let write = files::parse_write(fields)?;
            Request::WriteFile {
                id,
                path: write.path,
                content: write.content,
                append: write.append,
                more: write.more,
            }
        }
        other => return Err(format!("unknown type {other:?}: expected {TYPES}").into()),
    };
    Ok(request)
}

fn control(
    fields: &Fields<'_>,
    kind: &str,
    id: Option<RequestId>,
    control: Control,
) -> Result<Request, BadField> {
    Ok(Request::Control(ControlRequest {
        environment: required_string(fields, "environment", kind)?,
        control,
        id,
    }))
}

/// An example line of type `kind`, for error messages.
fn example(kind: &str) -> &'static str {
    match kind {
        "wait" => r#"{"type":"wait","environment":"bash","timeout_ms":10000}"#,
        "input" => r#"{"type":"input","environment":"bash","text":"yes\n"}"#,
        "interrupt" => r#"{"type":"interrupt","environment":"bash"}"#,
        "restart" => r#"{"type":"restart","environment":"bash"}"#,
        "close" => r#"{"type":"close","environment":"bash:server"}"#,
        _ => EXAMPLE,
    }
}

fn required_string(fields: &Fields<'_>, field: &str, kind: &str) -> Result<String, BadField> {
    fields::string(fields, field, || match kind {
        "command" => format!(
            "missing field {field:?}: a command needs \"environment\" and \"command\" strings, e.g. {EXAMPLE}"
        ),
        _ => format!(
            "missing field {field:?}: {} {kind} needs {}, e.g. {}",
            if kind == "input" || kind == "interrupt" {
                "an"
            } else {
                "a"
            },
            if kind == "input" {
                "\"environment\" and \"text\" strings"
            } else {
                "an \"environment\" string"
            },
            example(kind)
        ),
    })
}

/// A field of whole milliseconds from `min` to [`MAX_TIMEOUT_MS`]; `None`
/// when absent or null.
fn millis(fields: &Fields<'_>, field: &str, min: u64) -> Result<Option<Duration>, BadField> {
    let value = match value(fields, field) {
        Ok(None | Some(Value::Null)) => return Ok(None),
        Ok(Some(value)) => value.to_string(),
        // A number too large even for a float (1e400).
        Err(_) => fields
            .get(field)
            .map(|raw| raw.get().to_owned())
            .unwrap_or_default(),
    };
    let millis = value
        .parse::<u64>()
        .ok()
        .filter(|ms| (min..=MAX_TIMEOUT_MS).contains(ms));
    match millis {
        Some(ms) => Ok(Some(Duration::from_millis(ms))),
        None => Err(format!(
            "field {field:?} must be a whole number of milliseconds from {min} to {MAX_TIMEOUT_MS}, got {value}"
        ).into()),
    }
}

/// The kind of a JSON value known to be valid, from its first character.
fn raw_kind(raw: &RawValue) -> &'static str {
    match raw.get().trim_start().as_bytes().first() {
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        Some(b'{') => "an object",
        _ => "a number",
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

    fn id(text: &str) -> RequestId {
        let raw: Box<RawValue> = serde_json::from_str(text).unwrap();
        RequestId::from_json(&raw).unwrap()
    }

    fn request(text: &str) -> Request {
        match parse(text) {
            Parsed::Request(request) => request,
            other => panic!("expected a request for {text:?}, got {other:?}"),
        }
    }

    #[test]
    fn parses_commands_with_optional_fields() {
        let parsed = parse(
            r#"{"type":"command","environment":"bash","command":"ls","id":7,"timeout_ms":1500,"yield_ms":250}"#,
        );
        assert_eq!(
            parsed,
            Parsed::Request(Request::Command(CommandRequest {
                id: Some(RequestId::from(7_i64)),
                environment: "bash".into(),
                command: "ls".into(),
                timeout: Some(Duration::from_millis(1500)),
                yield_after: Some(Duration::from_millis(250)),
            }))
        );
        assert_eq!(
            parse("{\"type\":\"screen\",\"id\":\"a\"}\r"),
            Parsed::Request(Request::Screen {
                id: Some(RequestId::from("a"))
            })
        );
        assert_eq!(parse("   "), Parsed::Blank);
        assert_eq!(parse("\r"), Parsed::Blank);
    }

    #[test]
    fn parses_wait_input_interrupt_and_restart() {
        let control = |environment: &str, control: Control, id: Option<RequestId>| {
            Request::Control(ControlRequest {
                environment: environment.into(),
                control,
                id,
            })
        };
        assert_eq!(
            request(r#"{"type":"wait","environment":"bash"}"#),
            control("bash", Control::Wait { timeout: None }, None)
        );
        assert_eq!(
            request(r#"{"type":"wait","environment":"bash","timeout_ms":0,"id":"w"}"#),
            control(
                "bash",
                Control::Wait {
                    timeout: Some(Duration::ZERO)
                },
                Some(RequestId::from("w"))
            )
        );
        assert_eq!(
            request(
                r#"{"type":"input","environment":"python","text":"John\n\u0003","timeout_ms":500}"#
            ),
            control(
                "python",
                Control::Input {
                    text: "John\n\u{3}".into(),
                    timeout: Some(Duration::from_millis(500))
                },
                None
            )
        );
        assert_eq!(
            request(r#"{"type":"interrupt","environment":"sqlite","id":3}"#),
            control("sqlite", Control::Interrupt, Some(RequestId::from(3_i64)))
        );
        assert_eq!(
            request(r#"{"type":"restart","environment":"bash"}"#),
            control("bash", Control::Restart, None)
        );
        assert_eq!(
            request(r#"{"type":"close","environment":"bash:server","id":1}"#),
            control("bash:server", Control::Close, Some(RequestId::from(1_i64)))
        );
    }

    #[test]
    fn ids_are_kept_exactly_as_written() {
        for text in [
            "18446744073709551617",
            "-18446744073709551617",
            "123456789012345678901234567890",
            "1.50",
            "1e400",
            "0.1",
        ] {
            let line = format!(r#"{{"type":"screen","id":{text}}}"#);
            assert_eq!(request(&line).id(), Some(&id(text)), "{text}");
            let line = format!(r#"{{"type":"nope","id":{text}}}"#);
            assert_eq!(error_of(&line).id, Some(id(text)), "{text}");
        }
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
        assert_eq!(err.id, Some(RequestId::from("x")));
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
        for (line, fragment) in [
            (
                r#"{"type":"wait"}"#,
                "missing field \"environment\": a wait needs an \"environment\" string",
            ),
            (
                r#"{"type":"input","environment":"bash"}"#,
                "missing field \"text\": an input needs \"environment\" and \"text\" strings",
            ),
            (
                r#"{"type":"input","environment":"bash","text":5}"#,
                "field \"text\" must be a string, got a number",
            ),
            (
                r#"{"type":"wait","environment":"bash","timeout_ms":-1}"#,
                "\"timeout_ms\" must be a whole number of milliseconds from 0 to",
            ),
            (
                r#"{"type":"wait","environment":"bash","timeout_ms":1e400}"#,
                "from 0 to 86400000, got 1e400",
            ),
            (
                r#"{"type":"command","environment":"bash","command":"ls","yield_ms":0}"#,
                "\"yield_ms\" must be a whole number of milliseconds from 1 to",
            ),
            (
                r#"{"type":"command","environment":"bash","command":"ls","yield_ms":"5"}"#,
                "got \"5\"",
            ),
            (
                r#"{"type":"interrupt","environment":"bash","text":"x"}"#,
                "unknown field \"text\"; this message type takes: type, environment, id",
            ),
            (
                r#"{"type":"restart","environment":"bash","timeout_ms":5}"#,
                "unknown field \"timeout_ms\"",
            ),
            (
                r#"{"type":"wait","environment":"bash","yield_ms":5}"#,
                "unknown field \"yield_ms\"",
            ),
            (
                r#"{"type":"exec"}"#,
                r#"expected "command", "wait", "input", "interrupt", "restart", "close", "screen", "read_file" or "write_file""#,
            ),
            ("true", "expected a JSON object, got a boolean"),
            ("null", "expected a JSON object, got null"),
            ("1e400", "expected a JSON object, got a number"),
        ] {
            let message = error_of(line).message;
            assert!(message.contains(fragment), "{line}: {message}");
        }
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
                id: Some(RequestId::from(3_i64)),
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
