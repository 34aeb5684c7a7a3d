//! Why the MCP server could not start or stopped early. It must not know
//! the transports' workings, only what they report.

use std::net::SocketAddr;

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
    /// A limit of the HTTP server is out of range.
    #[error("{0}")]
    Limit(String),
    /// The MCP session over stdio could not start (the client never
    /// completed the handshake, or stdio failed).
    #[error("the MCP session did not start: {0}")]
    Session(String),
}
