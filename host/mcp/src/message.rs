//! What is wrong with a message a client sent, found before rmcp sees it,
//! and the JSON-RPC error that says so, in the same words over stdio and
//! over HTTP.
//!
//! Left to itself rmcp drops a line that is not JSON without a word
//! (stdio), answers a body it cannot parse with `415` and its parser's
//! error (HTTP), answers the methods it knows but envhost does not serve
//! (`prompts/list`, `resources/read`, …) with nothing but the method's
//! name, and holds ids as 64-bit integers, so that it could not even echo
//! a larger one. Here each message is parsed with rmcp's own types, so
//! that exactly what rmcp takes passes, and a refusal carries the client's
//! id as the client wrote it, digit for digit.
//!
//! It must not know how a transport frames a message beyond the word for
//! one ([`Framing`]), nor HTTP statuses, nor any environment.

use std::collections::HashMap;

use rmcp::model::ClientJsonRpcMessage;
use serde::Serialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;

/// The requests envhost answers (what [`Session`](crate::session::Session)
/// serves); `ping` only before the stateless revision, which has none.
const ANSWERED: [&str; 4] = ["initialize", "ping", "tools/list", "tools/call"];

/// What a JSON-RPC message is, as the refusals describe it.
const SHAPE: &str = "A JSON-RPC message is an object with \"jsonrpc\": \"2.0\" and a \"method\" (with an \"id\" for a request), or an answer to the server's request.";

/// The first protocol revision without the `initialize` handshake.
const STATELESS_REVISION: &str = "2026-07-28";

/// How a transport frames one message: the words its refusals use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// One message per line (stdio).
    Line,
    /// One message per request body (HTTP POST).
    Body,
}

impl Framing {
    fn unit(self) -> &'static str {
        match self {
            Framing::Line => "line",
            Framing::Body => "body",
        }
    }

    fn advice(self) -> &'static str {
        match self {
            Framing::Line => "send one JSON-RPC message per line",
            Framing::Body => "send one JSON-RPC message as the body of each POST",
        }
    }
}

/// Why a message is refused; each is one JSON-RPC error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// Not JSON at all (-32700).
    NotJson,
    /// JSON, but not a message envhost can answer (-32600).
    InvalidRequest,
    /// A request for a method envhost does not answer (-32601).
    UnknownMethod,
    /// A known method whose parameters do not fit it (-32602).
    InvalidParams,
    /// The server holds as much as it may and cannot take this (-32000,
    /// the first code JSON-RPC leaves to servers).
    Busy,
}

impl Fault {
    fn code(self) -> i32 {
        match self {
            Fault::NotJson => -32700,
            Fault::InvalidRequest => -32600,
            Fault::UnknownMethod => -32601,
            Fault::InvalidParams => -32602,
            Fault::Busy => -32000,
        }
    }
}

/// A message refused, and the error that answers it.
#[derive(Debug)]
pub(crate) struct Refusal {
    /// The client's id exactly as it wrote it; `None` when the message
    /// had none, or one that cannot be echoed (then the answer says
    /// `null`).
    pub(crate) id: Option<Box<RawValue>>,
    pub(crate) fault: Fault,
    /// What is wrong and what to send instead.
    pub(crate) message: String,
    /// A notification, which over stdio nobody waits an answer for.
    pub(crate) notification: bool,
}

impl Refusal {
    pub(crate) fn new(id: Option<Box<RawValue>>, fault: Fault, message: String) -> Refusal {
        Refusal {
            id,
            fault,
            message,
            notification: false,
        }
    }

    /// The JSON-RPC error, as one JSON text (no newline).
    pub(crate) fn to_json(&self) -> Vec<u8> {
        #[derive(Serialize)]
        struct Answer<'a> {
            jsonrpc: &'static str,
            id: Option<&'a RawValue>,
            error: Error<'a>,
        }
        #[derive(Serialize)]
        struct Error<'a> {
            code: i32,
            message: &'a str,
        }
        let answer = Answer {
            jsonrpc: "2.0",
            id: self.id.as_deref(),
            error: Error {
                code: self.fault.code(),
                message: &self.message,
            },
        };
        // A RawValue is valid JSON and the rest are plain fields: this
        // cannot fail, and if it did the client would still get an error.
        serde_json::to_vec(&answer).unwrap_or_else(|_| {
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error"}}"#
                .to_vec()
        })
    }
}

/// A message that passed: what the transports need to know of it.
#[derive(Debug)]
pub(crate) struct Checked {
    /// Its id as the client wrote it, if it has one.
    pub(crate) id: Option<Box<RawValue>>,
    /// Its method, for a request or a notification.
    pub(crate) method: Option<String>,
}

impl Checked {
    /// Whether it is an `initialize` request (which opens a session).
    pub(crate) fn is_initialize(&self) -> bool {
        self.id.is_some() && self.method.as_deref() == Some("initialize")
    }
}

/// The sentence for a method envhost does not answer, over every transport.
pub(crate) fn unknown_method(method: &str) -> String {
    format!(
        "Unknown method: {method}. envhost answers initialize, ping, tools/list and tools/call."
    )
}

/// Whether `version` (an MCP protocol version) is the stateless revision
/// or a later one (dates in ISO form order as text).
pub(crate) fn is_stateless_revision(version: &str) -> bool {
    version >= STATELESS_REVISION
}

/// Checks one message. `declared_version` is the protocol version the
/// transport names besides the message (HTTP's `MCP-Protocol-Version`).
pub(crate) fn check(
    bytes: &[u8],
    framing: Framing,
    declared_version: Option<&str>,
) -> Result<Checked, Refusal> {
    let Ok(fields) = serde_json::from_slice::<HashMap<String, &RawValue>>(bytes) else {
        return Err(not_an_object(bytes, framing));
    };
    let id = fields.get("id").copied();
    if let Some(raw) = id
        && !rmcp_holds(raw)
    {
        return Err(Refusal::new(
            echoable(raw),
            Fault::InvalidRequest,
            format!(
                "Invalid request: the id {} is neither a string nor an integer from -2^63 to 2^63-1; envhost answers only those, so send one.",
                shown(raw)
            ),
        ));
    }
    let id = id.map(|raw| raw.to_owned());
    let method = match fields.get("method") {
        None => None,
        Some(raw) => match serde_json::from_str::<String>(raw.get()) {
            Ok(method) => Some(method),
            Err(_) => {
                return Err(Refusal::new(
                    id,
                    Fault::InvalidRequest,
                    format!(
                        "Invalid request: \"method\" must be a string, not {}. {SHAPE}",
                        shown(raw)
                    ),
                ));
            }
        },
    };
    if let (Some(_), Some(name)) = (&id, &method) {
        // `server/discover` opens the stateless revision; rmcp answers it.
        let answered = match name.as_str() {
            "server/discover" => true,
            "ping" => !message_version(&fields)
                .as_deref()
                .or(declared_version)
                .is_some_and(is_stateless_revision),
            name => ANSWERED.contains(&name),
        };
        if !answered {
            return Err(Refusal::new(id, Fault::UnknownMethod, unknown_method(name)));
        }
    }
    // rmcp's own parse, so that exactly what it takes passes.
    let Err(err) = serde_json::from_slice::<ClientJsonRpcMessage>(bytes) else {
        return Ok(Checked { id, method });
    };
    Err(match (id, method) {
        (Some(id), Some(method)) => Refusal::new(
            Some(id),
            Fault::InvalidParams,
            format!("Invalid params for {method}: {err}."),
        ),
        (None, Some(method)) => Refusal {
            notification: true,
            ..Refusal::new(
                None,
                Fault::InvalidParams,
                format!("Invalid params for {method}: {err}."),
            )
        },
        (id, None) => Refusal::new(
            id,
            Fault::InvalidRequest,
            format!("Invalid request: {err}. {SHAPE}"),
        ),
    })
}

/// The refusal of a text that is not a JSON object: not JSON at all, or
/// another kind of value.
fn not_an_object(bytes: &[u8], framing: Framing) -> Refusal {
    if let Err(err) = serde_json::from_slice::<IgnoredAny>(bytes) {
        return Refusal::new(
            None,
            Fault::NotJson,
            format!(
                "Parse error: the {} is not JSON ({err}); {}.",
                framing.unit(),
                framing.advice()
            ),
        );
    }
    Refusal::new(
        None,
        Fault::InvalidRequest,
        format!(
            "Invalid request: the {} holds {}, not an object. {SHAPE}",
            framing.unit(),
            json_kind(bytes)
        ),
    )
}

/// Whether rmcp can carry `id` (a string, or an integer that fits i64),
/// and so echo it unchanged.
fn rmcp_holds(id: &RawValue) -> bool {
    let text = id.get();
    text.starts_with('"') || text.parse::<i64>().is_ok()
}

/// `id` if the error may name it: JSON-RPC echoes numbers and strings,
/// and answers anything else with `null`.
fn echoable(id: &RawValue) -> Option<Box<RawValue>> {
    matches!(id.get().as_bytes().first(), Some(b'"' | b'-' | b'0'..=b'9')).then(|| id.to_owned())
}

/// The protocol version a request names in its `_meta`, if any.
fn message_version(fields: &HashMap<String, &RawValue>) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Params {
        #[serde(rename = "_meta")]
        meta: Option<HashMap<String, serde_json::Value>>,
    }
    let params: Params = serde_json::from_str(fields.get("params")?.get()).ok()?;
    params
        .meta?
        .get("io.modelcontextprotocol/protocolVersion")?
        .as_str()
        .map(str::to_owned)
}

/// A JSON value as a refusal shows it: whole when short, cut otherwise.
fn shown(raw: &RawValue) -> String {
    const LONGEST: usize = 40;
    let text = raw.get();
    match text.char_indices().nth(LONGEST) {
        None => text.to_owned(),
        Some((at, _)) => format!("{}… ({} bytes)", &text[..at], text.len()),
    }
}

/// What a JSON text that is not an object holds.
fn json_kind(bytes: &[u8]) -> &'static str {
    match bytes.trim_ascii_start().first() {
        Some(b'[') => "an array (a batch, which MCP no longer has)",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn refused(text: &str) -> (Value, Refusal) {
        let refusal = check(text.as_bytes(), Framing::Body, None).expect_err(text);
        let answer = serde_json::from_slice(&refusal.to_json()).expect("the answer is JSON");
        (answer, refusal)
    }

    #[test]
    fn what_rmcp_takes_passes() {
        let request = check(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            Framing::Line,
            None,
        )
        .expect("a plain request");
        assert_eq!(request.method.as_deref(), Some("tools/list"));
        assert!(!request.is_initialize());
        let notification = check(
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            Framing::Line,
            None,
        )
        .expect("a notification");
        assert!(notification.id.is_none());
        // rmcp hands these to the session (see `Session::on_custom_request`).
        assert!(
            check(
                br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":3}}"#,
                Framing::Line,
                None
            )
            .is_ok()
        );
        let initialize = br#"{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"0"}}}"#;
        assert!(
            check(initialize, Framing::Body, None)
                .unwrap()
                .is_initialize()
        );
    }

    #[test]
    fn each_fault_says_what_is_wrong_in_the_transports_words() {
        let (answer, refusal) = refused("{\"jsonrpc\": ");
        assert_eq!(refusal.fault, Fault::NotJson);
        assert_eq!(answer["id"], Value::Null);
        assert_eq!(answer["error"]["code"], -32700);
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("Parse error: the body is not JSON ("),
            "{message}"
        );
        assert!(message.ends_with("send one JSON-RPC message as the body of each POST."));
        let line = check(b"not json", Framing::Line, None).unwrap_err();
        assert!(
            line.message
                .starts_with("Parse error: the line is not JSON")
        );

        let (answer, _) = refused("[1,2]");
        assert_eq!(answer["error"]["code"], -32600);
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("an array")
        );

        let (answer, _) = refused(r#"{"jsonrpc":"2.0","id":7,"method":5}"#);
        assert_eq!(answer["id"], 7, "the client learns which request failed");
        assert_eq!(answer["error"]["code"], -32600);

        let (answer, _) = refused(r#"{"jsonrpc":"2.0","id":"p","method":"prompts/list"}"#);
        assert_eq!(answer["id"], "p");
        assert_eq!(answer["error"]["code"], -32601);
        assert_eq!(
            answer["error"]["message"],
            "Unknown method: prompts/list. envhost answers initialize, ping, tools/list and tools/call."
        );
    }

    #[test]
    fn ids_come_back_as_the_client_wrote_them() {
        for id in [
            "18446744073709551617",
            "1.5",
            "1e3",
            "-99999999999999999999",
        ] {
            let text = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#);
            let (_, refusal) = refused(&text);
            assert_eq!(refusal.fault, Fault::InvalidRequest, "{id}");
            let json = String::from_utf8(refusal.to_json()).unwrap();
            assert!(json.contains(&format!(r#""id":{id},"#)), "{id}: {json}");
            assert!(refusal.message.contains(id), "{id}: {}", refusal.message);
        }
        let (answer, _) = refused(r#"{"jsonrpc":"2.0","id":null,"method":"tools/list"}"#);
        assert_eq!(answer["id"], Value::Null);
        let (answer, _) = refused(r#"{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}"#);
        assert_eq!(answer["id"], Value::Null);
        // Within i64 rmcp carries the id itself, past 2^53 included.
        assert!(
            check(
                br#"{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/list"}"#,
                Framing::Body,
                None
            )
            .is_ok()
        );
        let long = format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"tools/list"}}"#,
            "9".repeat(5000)
        );
        let refusal = check(long.as_bytes(), Framing::Body, None).unwrap_err();
        assert!(refusal.message.len() < 300, "{}", refusal.message);
        let answer = String::from_utf8(refusal.to_json()).unwrap();
        assert!(answer.contains(&"9".repeat(5000)), "the whole id is echoed");
    }

    #[test]
    fn the_stateless_revision_has_no_ping() {
        let ping = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        assert!(check(ping, Framing::Body, None).is_ok());
        assert!(check(ping, Framing::Body, Some("2025-06-18")).is_ok());
        let refused = check(ping, Framing::Body, Some("2026-07-28")).unwrap_err();
        assert_eq!(refused.fault, Fault::UnknownMethod);
        let in_meta = br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        assert!(check(in_meta, Framing::Line, None).is_err());
    }
}
