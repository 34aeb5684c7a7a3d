//! envhost's NDJSON wire protocol, plus its optional, additive fields.
//!
//! This crate owns framing (one JSON object per line, read in bounded
//! memory), parsing a line into a [`Request`] with an actionable message for
//! every kind of bad input, and encoding [`Reply`]s. It must not know which
//! environments exist or what they do: it hands a parsed request on and
//! serialises what comes back.
//!
//! Input, one object per line, each optionally with `"id"` (a string or a
//! number, echoed on the answer exactly as written):
//! - `{"type":"command","environment":"bash","command":"ls"}`, optionally
//!   with `"timeout_ms"` and `"yield_ms"` (positive integers: its limit, and
//!   when to answer with the output so far and leave it running).
//! - `{"type":"wait","environment":"bash"}` (optional `"timeout_ms"`),
//!   `{"type":"input","environment":"bash","text":"y\n"}` (optional
//!   `"timeout_ms"`), `{"type":"interrupt","environment":"bash"}`: go on with
//!   a command that is still running; `{"type":"restart","environment":"bash"}`.
//! - `{"type":"screen"}`: the current screen without running anything (so an
//!   agent can see the environments before its first command).
//! - `{"type":"read_file","path":P}` and
//!   `{"type":"write_file","path":P,"content_base64":B64}`: a project file's
//!   bytes, moved in base64 chunks that fit a line (see `files`).
//!
//! Output, exactly one line per non-blank input line:
//! `{"type":"response",...}` (with `"running":true` in the response only
//! while the command still runs), `{"type":"screen",...}`,
//! `{"type":"file",...}`, `{"type":"file_written",...}` or
//! `{"type":"error","message":...}` (with a one-word `"reason"` when a file
//! request is refused).
//!
//! Blank lines (empty or only whitespace) are skipped without an answer, as
//! JSON Lines / NDJSON readers conventionally do, so that a stray newline
//! after a message cannot shift the agent's request/answer pairing. A
//! trailing `\r` (CRLF line endings) is accepted.

#![deny(missing_docs)]

mod fields;
mod files;
mod framing;
mod reply;
mod request;

pub use crate::framing::{LineReader, RawLine};
pub use crate::reply::{Reply, write_reply};
pub use crate::request::{DEFAULT_MAX_LINE_BYTES, Parsed, ProtocolError, Request, parse_line};
