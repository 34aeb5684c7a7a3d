//! `envhost serve`: the NDJSON front end an agent talks to, a peer of the
//! REPL (`envhost-repl`) and MCP (`envhost-mcp`) over one
//! [`Host`](envhost_runtime::Host).
//!
//! It owns the wire (stdin and stdout, one request and one answer per
//! line) and the last words an agent reads when the host dies; it must not
//! know what any environment is, nor how the host is assembled.

#![deny(missing_docs)]

mod serve;
mod stdout;

pub use crate::serve::{run, serve};
pub use crate::stdout::{last_words, say_last_words_on_abort};
