//! The file messages: `read_file` and `write_file`, which move a project
//! file's bytes as base64 in chunks that fit a line.
//!
//! This module owns their fields, their validation and the base64 on both
//! sides. It must not know where the files are or what is allowed: the
//! front end hands the parsed request to the project's files.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use crate::fields::{self, BadField, Fields, check_fields, value};
use envhost_core::text::json_kind;

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
pub(crate) fn parse_read(fields: &Fields<'_>) -> Result<ReadFile, BadField> {
    check_fields(fields, &READ_FIELDS)?;
    let path = path(fields, READ_EXAMPLE)?;
    let offset = match value(fields, "offset")? {
        None | Some(Value::Null) => 0,
        Some(value) => value.as_u64().ok_or_else(|| {
            format!("field \"offset\" must be a whole number of bytes from 0, got {value}")
        })?,
    };
    let length = match value(fields, "length")? {
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
pub(crate) fn parse_write(fields: &Fields<'_>) -> Result<WriteFile, BadField> {
    check_fields(fields, &WRITE_FIELDS)?;
    let path = path(fields, WRITE_EXAMPLE)?;
    let encoded = fields::string(fields, "content_base64", || {
        format!(
            "missing field \"content_base64\": the bytes to write, in base64, e.g. {WRITE_EXAMPLE}"
        )
    })?;
    let content = STANDARD.decode(encoded).map_err(|err| {
        format!(
            "field \"content_base64\" is not standard base64 (RFC 4648, with padding, no line breaks): {err}"
        )
    })?;
    Ok(WriteFile {
        path,
        content,
        append: flag(fields, "append")?,
        more: flag(fields, "more")?,
    })
}

fn path(fields: &Fields<'_>, example: &str) -> Result<String, BadField> {
    fields::string(fields, "path", || {
        format!("missing field \"path\": the file, relative to the project, e.g. {example}")
    })
}

fn flag(fields: &Fields<'_>, field: &str) -> Result<bool, BadField> {
    match value(fields, field)? {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(value)) => Ok(value),
        Some(other) => Err(format!(
            "field {field:?} must be true or false, got {}",
            json_kind(&other)
        )
        .into()),
    }
}

/// Bytes as the `content_base64` of a `file` answer.
pub(crate) fn encode(content: &[u8]) -> String {
    STANDARD.encode(content)
}
