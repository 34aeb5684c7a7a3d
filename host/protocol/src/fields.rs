//! A request line's fields, read one by one: shared by every message type.
//!
//! A line is split into its fields as raw JSON text first (so an `id` is
//! kept exactly as written); this module reads a field when a message type
//! asks for it, with the sentence to send back when it is wrong. It must
//! not know any message type.

use std::collections::BTreeMap;

use envhost_core::text::json_kind;
use serde_json::Value;
use serde_json::value::RawValue;

/// A field that is missing or wrong: the sentence to send back, which
/// says what to send instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct BadField(pub(crate) String);

impl From<String> for BadField {
    fn from(message: String) -> Self {
        BadField(message)
    }
}

/// A line's fields, each still raw JSON text.
pub(crate) type Fields<'a> = BTreeMap<String, &'a RawValue>;

/// The field `name` read as JSON; `None` when absent.
pub(crate) fn value(fields: &Fields<'_>, name: &str) -> Result<Option<Value>, BadField> {
    match fields.get(name) {
        None => Ok(None),
        Some(raw) => serde_json::from_str(raw.get())
            .map(Some)
            .map_err(|err| BadField(format!("field {name:?} cannot be read: {err}"))),
    }
}

/// Refuses a field the message type does not take (a typo is not ignored).
pub(crate) fn check_fields(fields: &Fields<'_>, known: &[&str]) -> Result<(), BadField> {
    match fields.keys().find(|k| !known.contains(&k.as_str())) {
        None => Ok(()),
        Some(unknown) => Err(format!(
            "unknown field {unknown:?}; this message type takes: {}",
            known.join(", ")
        )
        .into()),
    }
}

/// A required string field; `missing` is the whole sentence for its absence.
pub(crate) fn string(
    fields: &Fields<'_>,
    field: &str,
    missing: impl FnOnce() -> String,
) -> Result<String, BadField> {
    match value(fields, field)? {
        Some(Value::String(s)) => Ok(s),
        None => Err(missing().into()),
        Some(other) => Err(format!(
            "field {field:?} must be a string, got {}",
            json_kind(&other)
        )
        .into()),
    }
}
