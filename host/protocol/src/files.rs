//! The file messages: `read_file` and `write_file`, which move a project
//! file's bytes as base64 in chunks that fit a line.
//!
//! This module owns their fields, their validation and the base64 on both
//! sides. It must not know where the files are or what is allowed: the
//! front end hands the parsed request to the project's files.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};

use crate::fields::{self, check_fields, json_kind};

const READ_FIELDS: [&str; 5] = ["type", "id", "path", "offset", "length"];
const WRITE_FIELDS: [&str; 6] = ["type", "id", "path", "content_base64", "append", "more"];
const READ_EXAMPLE: &str =
    r#"{"type":"read_file","path":"src/data.bin","offset":0,"length":1048576}"#;
const WRITE_EXAMPLE: &str =
    r#"{"type":"write_file","path":"src/data.bin","content_base64":"aGVsbG8K"}"#;

/// A `read_file` request's fields.
pub(crate) struct ReadFile {
    pub path: String,
    pub offset: u64,
    pub length: Option<u64>,
}

/// A `write_file` request's fields, the content decoded.
pub(crate) struct WriteFile {
    pub path: String,
    pub content: Vec<u8>,
    pub append: bool,
    pub more: bool,
}

/// `{"type":"read_file","path":P,"offset":N,"length":N}`.
pub(crate) fn parse_read(object: &Map<String, Value>) -> Result<ReadFile, String> {
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
    Ok(ReadFile {
        path,
        offset,
        length,
    })
}

/// `{"type":"write_file","path":P,"content_base64":B64,"append":bool,"more":bool}`.
pub(crate) fn parse_write(object: &Map<String, Value>) -> Result<WriteFile, String> {
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
    Ok(WriteFile {
        path,
        content,
        append: flag(object, "append")?,
        more: flag(object, "more")?,
    })
}

fn path(object: &Map<String, Value>, example: &str) -> Result<String, String> {
    fields::string(
        object,
        "path",
        &format!("the file, relative to the project, e.g. {example}"),
    )
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
