//! What the MCP server does beyond what the orchestrator settles: how long
//! a call waits before it answers with the output so far, how often it
//! reports progress, where the HTTP server listens, whom it lets in and how
//! much it holds for its clients. Plain values; it must not know the
//! transports or the tools.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

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
    /// [`ALLOWED_ORIGIN_RULE`](crate::http::ALLOWED_ORIGIN_RULE)).
    pub allowed_origins: Vec<String>,
    /// How much the server holds for its clients.
    pub limits: HttpLimits,
}

/// How much the HTTP server holds for its clients, whoever they are: the
/// connection limits apply before a request is read, so before the token
/// is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpLimits {
    /// Connections held at once; further ones wait in the kernel's queue
    /// until one closes.
    pub max_connections: usize,
    /// How long a connection may take to send a request's headers, counted
    /// from when it opens or from the end of the previous answer (so an
    /// idle connection is closed after it too), and then the request's body.
    pub header_timeout: Duration,
    /// MCP sessions held at once; past it a new session is refused until
    /// one ends.
    pub max_sessions: usize,
    /// A session that gets no request for this long ends.
    pub session_idle_timeout: Duration,
}

impl Default for HttpLimits {
    /// Room for a few dozen clients, each with its streams, far under the
    /// usual 1024 open files; a header timeout no client on a working
    /// network comes near; sessions that outlive a person's pause between
    /// two requests.
    fn default() -> Self {
        HttpLimits {
            max_connections: 256,
            header_timeout: Duration::from_secs(10),
            max_sessions: 64,
            session_idle_timeout: Duration::from_secs(30 * 60),
        }
    }
}
