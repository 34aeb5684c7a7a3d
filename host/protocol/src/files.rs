//! The file messages: `read_file` and `write_file`, which move a project
//! file's bytes as base64 in chunks that fit a line.
//!
//! This module owns their fields, their validation and the base64 on both
//! sides. It must not know where the files are or what is allowed: the
//! front end hands the parsed request to the project's files.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};

use crate::request::{Request, check_fields, json_kind};

const READ_FIELDS: [&str; 5] = ["type", "id", "path", "offset", "length"];
const WRITE_FIELDS: [&str; 6] = ["type", "id", "path", "content_base64", "append", "more"];
const READ_EXAMPLE: &str =
    r#"{"type":"read_file","path":"src/data.bin","offset":0,"length":1048576}"#;
const WRITE_EXAMPLE: &str =
    r#"{"type":"write_file","path":"src/data.bin","content_base64":"aGVsbG8K"}"#;

/// `{"type":"read_file","path":P,"offset":N,"length":N}`.
pub(crate) fn parse_read(
    object: &Map<String, Value>,
    id: Option<Value>,
) -> Result<Request, String> {
    check_fields(object, &READ_FIELDS)?;
    let path = path(object, READ_EXAMPLE)?;
    let offset = match object.get("offset") {
        None | Some(Value::Null) => 0,
        Some(value) => value.as_u64().ok_or_else(|| {
            format!("field \"offset\" must be a whole number of bytes from 0, got {value}")
        })?,
    };
    let length = match object.get("length") {
        None | Some(Value::Null) => None,
        Some(value) => Some(value.as_u64().filter(|n| *n > 0).ok_or_else(|| {
            format!("field \"length\" must be a whole number of bytes from 1, got {value}")
        })?),
    };
    Ok(Request::ReadFile {
        id,
        path,
        offset,
        length,
    })
}

/// `{"type":"write_file","path":P,"content_base64":B64,"append":bool,"more":bool}`.
pub(crate) fn parse_write(
    object: &Map<String, Value>,
    id: Option<Value>,
) -> Result<Request, String> {
    check_fields(object, &WRITE_FIELDS)?;
    let path = path(object, WRITE_EXAMPLE)?;
    let content = match object.get("content_base64") {
        Some(Value::String(text)) => STANDARD.decode(text).map_err(|err| {
            format!(
                "field \"content_base64\" is not standard base64 (RFC 4648, with padding, no line breaks): {err}"
            )
        })?,
        None => {
            return Err(format!(
                "missing field \"content_base64\": the bytes to write, in base64, e.g. {WRITE_EXAMPLE}"
            ));
        }
        Some(other) => {
            return Err(format!(
                "field \"content_base64\" must be a string, got {}",
                json_kind(other)
            ));
        }
    };
    Ok(Request::WriteFile {
        id,
        path,
        content,
        append: flag(object, "append")?,
        more: flag(object, "more")?,
    })
}

fn path(object: &Map<String, Value>, example: &str) -> Result<String, String> {
    match object.get("path") {
        Some(Value::String(path)) => Ok(path.clone()),
        None => Err(format!(
            "missing field \"path\": the file, relative to the project, e.g. {example}"
        )),
        Some(other) => Err(format!(
            "field \"path\" must be a string, got {}",
            json_kind(other)
        )),
    }
}

fn flag(object: &Map<String, Value>, field: &str) -> Result<bool, String> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(value)) => Ok(*value),
        Some(other) => Err(format!(
            "field {field:?} must be true or false, got {}",
            json_kind(other)
        )),
    }
}

/// Bytes as the `content_base64` of a `file` answer.
pub(crate) fn encode(content: &[u8]) -> String {
    STANDARD.encode(content)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Parsed, RawLine, Reply, parse_line, write_reply};

    fn parse(text: &str) -> Parsed {
        parse_line(&RawLine::Complete(text.as_bytes().to_vec()), 1 << 20)
    }

    fn error_of(text: &str) -> String {
        match parse(text) {
            Parsed::Invalid(err) => err.message,
            other => panic!("expected an error for {text}, got {other:?}"),
        }
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
        assert!(error_of(r#"{"type":"read_file"}"#).starts_with("missing field \"path\""));
        assert!(error_of(r#"{"type":"read_file","path":"a","offset":-1}"#).contains("\"offset\""));
        assert!(error_of(r#"{"type":"read_file","path":"a","length":0}"#).contains("from 1"));
        assert!(
            error_of(r#"{"type":"read_file","path":"a","size":1}"#)
                .starts_with("unknown field \"size\"")
        );
        assert!(
            error_of(r#"{"type":"write_file","path":"a"}"#)
                .starts_with("missing field \"content_base64\"")
        );
        assert!(
            error_of(r#"{"type":"write_file","path":"a","content_base64":"not base64!"}"#)
                .contains("not standard base64")
        );
        assert!(
            error_of(r#"{"type":"write_file","path":"a","content_base64":"","append":"yes"}"#)
                .contains("true or false")
        );
        assert!(error_of(r#"{"type":"rename_file"}"#).contains("\"read_file\" or \"write_file\""));
    }

    #[test]
    fn file_answers_are_lines() {
        let id = Value::from("r");
        let mut out = Vec::new();
        write_reply(
            &mut out,
            &Reply::File {
                id: Some(&id),
                path: "a.bin",
                size: 2,
                offset: 0,
                content: &[0, 255],
                eof: true,
            },
        )
        .unwrap();
        write_reply(
            &mut out,
            &Reply::FileWritten {
                id: None,
                path: "a.bin",
                size: 2,
                complete: false,
            },
        )
        .unwrap();
        write_reply(
            &mut out,
            &Reply::Refused {
                id: None,
                message: "a.bin does not exist",
                reason: "not_found",
            },
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            concat!(
                r#"{"type":"file","id":"r","path":"a.bin","size":2,"offset":0,"content_base64":"AP8=","eof":true}"#,
                "\n",
                r#"{"type":"file_written","path":"a.bin","size":2,"complete":false}"#,
                "\n",
                r#"{"type":"error","message":"a.bin does not exist","reason":"not_found"}"#,
                "\n"
            )
        );
    }
}
