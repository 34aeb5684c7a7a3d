//! Checks on a request's JSON object shared by every message type.
//!
//! It must not know any message type.

use serde_json::{Map, Value};

/// Refuses a field the message type does not take (a typo is not ignored).
pub(crate) fn check_fields(object: &Map<String, Value>, known: &[&str]) -> Result<(), String> {
    match object.keys().find(|k| !known.contains(&k.as_str())) {
        None => Ok(()),
        Some(unknown) => Err(format!(
            "unknown field {unknown:?}; this message type takes: {}",
            known.join(", ")
        )),
    }
}

/// How a JSON value is named in messages ("a string", "an array").
pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A required string field; `missing` says what the field is for, after
/// "missing field NAME: ".
pub(crate) fn string(
    object: &Map<String, Value>,
    field: &str,
    missing: &str,
) -> Result<String, String> {
    match object.get(field) {
        Some(Value::String(s)) => Ok(s.clone()),
        None => Err(format!("missing field {field:?}: {missing}")),
        Some(other) => Err(format!(
            "field {field:?} must be a string, got {}",
            json_kind(other)
        )),
    }
}
