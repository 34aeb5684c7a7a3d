//! envhost's MCP front end: the environments the orchestrator holds, as
//! Model Context Protocol tools, over stdio or streamable HTTP.
//!
//! ```text
//! MCP client ─► transport (stdio | HTTP: token, Origin) ─► Session ─► Orchestrator
//!                                                     ◄── one text block: output + changed screen
//! ```
//!
//! This crate owns:
//!
//! - the tool list ([`tools`](crate::tools)): one tool per environment,
//!   named as the environment, described by its usage, then `screen`,
//!   `wait`, `input`, `interrupt` and `restart`; fixed for the life of the
//!   process, because clients ignore `tools/list_changed`;
//! - turning a tool call into the orchestrator's request and back
//!   ([`arguments`](crate::arguments), [`call`](crate::call),
//!   [`result`](crate::result)): commands yield after 25 s by default (under
//!   every client's own limit), progress notifications while they run, a
//!   client's cancellation interrupts them;
//! - one [`Session`](crate::session) per MCP session, which remembers the
//!   screen it last showed so that each result shows what changed;
//! - what is wrong with a client's message, in the same words over both
//!   transports, with its id as the client wrote it
//!   ([`message`](crate::message));
//! - the transports: stdio, where every bad line gets an error that says
//!   what is wrong ([`stdio`](crate::stdio)), and HTTP with a bearer token,
//!   an `Origin` rule and loopback by default ([`http`](crate::http)),
//!   bounded connections, header timeout and buffers before the token is
//!   checked ([`listen`](crate::listen)), and a checked body and a capped
//!   number of sessions after it ([`admission`](crate::admission)); the
//!   async runtime they need stays inside this crate.
//!
//! It must not know any particular environment nor the NDJSON wire format:
//! what it says about an environment comes from the orchestrator
//! ([`Orchestrator::describe`]), and events (the transcript, `-v`) are the
//! orchestrator's, as for every front end.

#![deny(missing_docs)]

mod admission;
mod answer;
mod arguments;
mod call;
mod error;
mod http;
mod listen;
mod message;
mod result;
mod session;
mod settings;
mod stdio;
mod stop;
mod token;
mod tools;

use std::sync::Arc;
use std::time::Duration;

use envhost_core::{CancelFlag, Orchestrator};

pub use crate::error::ServeError;
pub use crate::http::ALLOWED_ORIGIN_RULE;
pub use crate::settings::{
    DEFAULT_YIELD_AFTER, HttpLimits, HttpSettings, PROGRESS_EVERY, Settings,
};

/// Serves `host` to MCP clients, on stdin/stdout or (with `http`) over
/// streamable HTTP, until input ends or a signal arrives: the MCP peer of
/// the NDJSON and REPL front ends. The caller stops the host afterwards,
/// also after an error (nothing was served).
pub fn serve(
    host: &envhost_runtime::Host,
    settings: Settings,
    http: Option<HttpSettings>,
) -> Result<envhost_runtime::Stopped, ServeError> {
    let orchestrator = Arc::clone(host.orchestrator());
    let cancel = host.cancel().clone();
    let words = match http {
        None => serve_stdio(orchestrator, cancel, settings)?,
        Some(http) => serve_http(orchestrator, cancel, settings, http)?,
    };
    Ok(envhost_runtime::Stopped::Done(words))
}

/// Serves one MCP client on stdin/stdout until stdin closes or a signal
/// arrives; returns why it stopped. `cancel` is the host's flag: a signal
/// sets it, and every command runs with a child of it. The caller shuts
/// the orchestrator down afterwards.
pub fn serve_stdio(
    orchestrator: Arc<Orchestrator>,
    cancel: CancelFlag,
    settings: Settings,
) -> Result<String, ServeError> {
    let runtime = runtime()?;
    let shared = session::Shared::new(orchestrator, cancel, settings);
    let stopped = runtime.block_on(stdio::serve(shared));
    // A command still inside an environment holds a blocking thread; the
    // host's cancel flag (set by the stop) ends it, and the caller's
    // shutdown waits for it. Nothing here waits for stdin again.
    runtime.shutdown_background();
    stopped
}

/// Serves MCP clients over streamable HTTP until a signal arrives; all of
/// them share the orchestrator's environments. Returns why it stopped.
pub fn serve_http(
    orchestrator: Arc<Orchestrator>,
    cancel: CancelFlag,
    settings: Settings,
    http: HttpSettings,
) -> Result<String, ServeError> {
    let runtime = runtime()?;
    let shared = session::Shared::new(orchestrator, cancel, settings);
    let stopped = runtime.block_on(http::serve(shared, http));
    runtime.shutdown_timeout(Duration::from_secs(1));
    stopped
}

/// Commands run on the blocking pool (one thread per call in progress);
/// two workers carry the protocol.
fn runtime() -> Result<tokio::runtime::Runtime, ServeError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("envhost-mcp")
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)
}
