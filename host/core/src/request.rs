//! What a front end asks of the orchestrator: run a command, or go on with
//! one that is still running (wait for it, type into it, interrupt it), or
//! restart an environment; and the agent's correlation id, kept exactly.
//!
//! This module owns the request values and the defaults every front end
//! shares (how long `wait` and `input` wait when the agent does not say).
//! It must not know the wire format: a front end parses its own messages
//! into these.

use std::fmt;
use std::time::Duration;

use serde::Serialize;
use serde_json::value::RawValue;

/// How long a `wait` waits for more output when the agent does not say.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(10);

/// How long an `input` waits for the answer to what it typed when the agent
/// does not say: long enough for a prompt to react, short enough to type
/// the next answer soon.
pub const DEFAULT_INPUT_WAIT: Duration = Duration::from_secs(1);

/// A command as the orchestrator receives it, protocol details stripped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandRequest {
    /// The environment it is for.
    pub environment: String,
    /// The command's text.
    pub command: String,
    /// Per-command limit. When absent the host's default applies, unless
    /// the command yields: then it has no limit (see
    /// [`Orchestrator::execute`](crate::Orchestrator::execute)).
    pub timeout: Option<Duration>,
    /// Answer after this long with the output so far and leave the command
    /// running. When absent the host's `--yield-after` setting applies.
    pub yield_after: Option<Duration>,
    /// The agent's correlation id, kept for the record.
    pub id: Option<RequestId>,
}

/// A request about an environment's running command, or to restart it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlRequest {
    /// The environment it is for.
    pub environment: String,
    /// What to do.
    pub control: Control,
    /// The agent's correlation id, kept for the record.
    pub id: Option<RequestId>,
}

/// What a [`ControlRequest`] asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// The running command's new output: answers when it ends or after
    /// `timeout` ([`DEFAULT_WAIT`] when absent).
    Wait {
        /// How long to wait.
        timeout: Option<Duration>,
    },
    /// Types `text` into the running command, then answers as `Wait` does
    /// (after [`DEFAULT_INPUT_WAIT`] when `timeout` is absent).
    Input {
        /// What to type, control characters included.
        text: String,
        /// How long to wait for the answer.
        timeout: Option<Duration>,
    },
    /// Stops the running command as a timeout would.
    Interrupt,
    /// Ends the environment and starts a fresh one.
    Restart,
    /// Ends a named instance (`bash:server`) and everything it runs, and
    /// removes it; a default instance cannot be closed.
    Close,
}

impl Control {
    /// The request's name, as the agent sends it and the record shows it.
    pub fn name(&self) -> &'static str {
        match self {
            Control::Wait { .. } => "wait",
            Control::Input { .. } => "input",
            Control::Interrupt => "interrupt",
            Control::Restart => "restart",
            Control::Close => "close",
        }
    }
}

/// An agent's correlation id: a JSON string or number, kept as the exact
/// JSON text it arrived as, so that it is echoed exactly (an integer above
/// 2^64, or `1.50`, comes back as written, not rounded through a float).
#[derive(Clone)]
pub struct RequestId(Box<RawValue>);

/// The reason a JSON value cannot be an id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("an id must be a string or a number, got {0}")]
pub struct InvalidId(pub &'static str);

impl RequestId {
    /// `raw` as an id, if it is a JSON string or number. `raw` is trusted to
    /// be valid JSON (serde_json only makes valid `RawValue`s).
    pub fn from_json(raw: &RawValue) -> Result<Self, InvalidId> {
        let text = raw.get().trim();
        match text.as_bytes().first() {
            Some(b'"' | b'-' | b'0'..=b'9') => match RawValue::from_string(text.to_owned()) {
                Ok(raw) => Ok(RequestId(raw)),
                Err(_) => Err(InvalidId("invalid JSON")),
            },
            Some(b'[') => Err(InvalidId("an array")),
            Some(b'{') => Err(InvalidId("an object")),
            Some(b't' | b'f') => Err(InvalidId("a boolean")),
            Some(b'n') => Err(InvalidId("null")),
            _ => Err(InvalidId("invalid JSON")),
        }
    }

    /// The id's JSON text, exactly as it arrived (`42`, `"req-1"`).
    pub fn json(&self) -> &str {
        self.0.get()
    }

    /// The id as a JSON value (a number beyond what a float holds exactly
    /// is rounded: echo [`json`](RequestId::json) instead).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::from_str(self.0.get()).unwrap_or(serde_json::Value::Null)
    }

    fn from_serialized(value: impl Serialize) -> Self {
        // Strings and integers always serialise.
        match serde_json::value::to_raw_value(&value) {
            Ok(raw) => RequestId(raw),
            Err(_) => RequestId(RawValue::NULL.to_owned()),
        }
    }
}

impl From<&str> for RequestId {
    fn from(text: &str) -> Self {
        RequestId::from_serialized(text)
    }
}

impl From<String> for RequestId {
    fn from(text: String) -> Self {
        RequestId::from_serialized(text)
    }
}

impl From<i64> for RequestId {
    fn from(number: i64) -> Self {
        RequestId::from_serialized(number)
    }
}

impl From<u64> for RequestId {
    fn from(number: u64) -> Self {
        RequestId::from_serialized(number)
    }
}

impl PartialEq for RequestId {
    fn eq(&self, other: &Self) -> bool {
        self.json() == other.json()
    }
}

impl Eq for RequestId {}

impl fmt::Debug for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RequestId({})", self.json())
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.json())
    }
}

impl Serialize for RequestId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn numbers_keep_their_exact_text() {
        for text in [
            "18446744073709551617",
            "-99999999999999999999999",
            "1.50",
            "1e400",
            "7",
        ] {
            let id = RequestId::from_json(&raw(text)).unwrap();
            assert_eq!(id.json(), text);
            assert_eq!(serde_json::to_string(&id).unwrap(), text);
        }
        let id = RequestId::from_json(&raw(r#""a\u0041""#)).unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), r#""a\u0041""#);
    }

    #[test]
    fn other_values_are_refused_by_kind() {
        for (text, kind) in [
            ("[1]", "an array"),
            ("{}", "an object"),
            ("true", "a boolean"),
            ("null", "null"),
        ] {
            assert_eq!(RequestId::from_json(&raw(text)), Err(InvalidId(kind)));
        }
    }

    #[test]
    fn ids_made_in_code_serialise_as_json() {
        assert_eq!(RequestId::from("x\"y").json(), r#""x\"y""#);
        assert_eq!(RequestId::from(42_i64).json(), "42");
        assert_eq!(
            RequestId::from(u64::MAX).to_value(),
            serde_json::json!(u64::MAX)
        );
    }
}
