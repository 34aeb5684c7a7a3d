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
//! - the transports: stdio, where every bad line gets an error that says
//!   what is wrong ([`stdio`](crate::stdio)), and HTTP with a bearer token,
//!   an `Origin` rule and loopback by default ([`http`](crate::http)); the
//!   async runtime they need stays inside this crate.
//!
//! It must not know any particular environment nor the NDJSON wire format:
//! what it says about an environment comes from the orchestrator
//! ([`Orchestrator::describe`]), and events (the transcript, `-v`) are the
//! orchestrator's, as for every front end.

#![deny(missing_docs)]

mod arguments;
mod call;
mod http;
mod result;
mod session;
mod stdio;
mod stop;
mod token;
mod tools;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use envhost_core::{CancelFlag, Orchestrator};

pub use crate::http::ALLOWED_ORIGIN_RULE;

/// How long a command may run before its call answers with the output so
/// far, when the call does not say (`wait_seconds`) and the host has no
/// `--yield-after`: under the 60 s after which clients give up on a call.
pub const DEFAULT_YIELD_AFTER: Duration = Duration::from_secs(25);

/// How often a running call reports progress to a client that asked for it.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(3);

/// What the MCP server does beyond what the orchestrator settles.
#[derive(Debug, Clone)]
pub struct Settings {
    /// A command still running after this long answers with its output so
    /// far (a call's `wait_seconds` overrides it).
    pub yield_after: Duration,
    /// Add `structuredContent` to results. Off by default: some clients
    /// show the model only `structuredContent` when it is present, and the
    /// model would lose the output.
    pub structured_content: bool,
    /// How often a running call sends progress notifications.
    pub progress_every: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            yield_after: DEFAULT_YIELD_AFTER,
            structured_content: false,
            progress_every: PROGRESS_EVERY,
        }
    }
}

/// Where the HTTP server listens and whom it lets in.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// The address to listen on (loopback unless the operator says).
    pub address: SocketAddr,
    /// The file holding the bearer token clients must send; created with a
    /// fresh token when it does not exist. `None`: a fresh token, printed
    /// on stderr.
    pub token_file: Option<PathBuf>,
    /// Browser origins allowed besides the server's own (see
    /// [`ALLOWED_ORIGIN_RULE`]).
    pub allowed_origins: Vec<String>,
}

/// Why the server could not start or stopped early.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The async runtime could not be built.
    #[error("cannot start the MCP server's runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The HTTP address could not be bound.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The address asked for.
        address: SocketAddr,
        #[source]
        /// Why.
        source: std::io::Error,
    },
    /// The bearer token could not be read, made or written.
    #[error("{0}")]
    Token(String),
    /// An `--allow-origin` value is not an origin.
    #[error("{0}")]
    Origin(String),
    /// The MCP session over stdio could not start (the client never
    /// completed the handshake, or stdio failed).
    #[error("the MCP session did not start: {0}")]
    Session(String),
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
