//! The HTTP server's connections: how many it holds at once, how it takes
//! them from the listening socket, and what hyper allows each before it
//! has read a request.
//!
//! Every limit here applies before a request is read, so before the token
//! is checked: a client without the token holds at most one of
//! [`HttpLimits::max_connections`] places, for at most
//! [`HttpLimits::header_timeout`], with at most [`READ_BUFFER_BYTES`] of
//! its bytes in memory. Connections past the cap are not taken: they wait
//! in the kernel's queue, where they cost the host nothing, until a place
//! frees. When taking one fails for want of descriptors (EMFILE), the loop
//! waits [`ACCEPT_RETRY`] before it tries again instead of spinning on a
//! socket that stays readable.
//!
//! It must not know MCP, the token or the routes: it serves whatever hyper
//! service it is given.

use std::convert::Infallible;
use std::error::Error as StdError;
use std::io::ErrorKind;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::server::conn::http1;
use hyper::service::Service;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::settings::HttpLimits;

/// The most of a client's bytes hyper holds for one connection: a request
/// head must fit (a longer one gets `431` and the connection ends), and
/// the body is read through it in pieces. MCP clients send heads of a few
/// hundred bytes; hyper's default, about 400 KiB, let every half-sent head
/// cost that much.
pub(crate) const READ_BUFFER_BYTES: usize = 16 * 1024;

/// How long the loop waits after `accept` failed for a reason of the
/// host's (no descriptor or memory left) before it tries again.
pub(crate) const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// The connections the server holds and how it serves each.
pub(crate) struct Connections {
    places: Arc<Semaphore>,
    http: http1::Builder,
}

impl Connections {
    pub(crate) fn new(limits: &HttpLimits) -> Connections {
        let mut http = http1::Builder::new();
        // hyper's timer runs the header timeout: from when the connection
        // opens and from the end of each answer, so it closes a silent, a
        // half-sent and an idle connection alike.
        http.timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout)
            .max_buf_size(READ_BUFFER_BYTES);
        Connections {
            places: Arc::new(Semaphore::new(limits.max_connections)),
            http,
        }
    }

    /// Takes connections from `listener` and serves each with a clone of
    /// `service`, for ever (the caller stops it by dropping the future).
    pub(crate) async fn serve<S, B>(&self, listener: TcpListener, service: S) -> Infallible
    where
        S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Into<Box<dyn StdError + Send + Sync>>,
        B: Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn StdError + Send + Sync>>,
    {
        let mut failing = false;
        loop {
            // A place first: past the cap the next connection stays in the
            // kernel's queue. The semaphore is never closed.
            let Ok(place) = Arc::clone(&self.places).acquire_owned().await else {
                return std::future::pending().await;
            };
            let stream = accept(&listener, &mut failing).await;
            let connection = self
                .http
                .serve_connection(TokioIo::new(stream), service.clone());
            tokio::spawn(async move {
                // A client that hangs up or times out ends only its own
                // connection.
                let _ = connection.await;
                drop(place);
            });
        }
    }
}

/// The next connection. A connection that failed before it was taken is
/// that client's loss; any other failure (EMFILE, ENFILE, ENOMEM) is the
/// host's, said once on stderr and retried after [`ACCEPT_RETRY`].
async fn accept(listener: &TcpListener, failing: &mut bool) -> TcpStream {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                if std::mem::take(failing) {
                    eprintln!("envhost: accepting connections again");
                }
                return stream;
            }
            Err(err)
                if matches!(
                    err.kind(),
                    ErrorKind::ConnectionAborted
                        | ErrorKind::ConnectionReset
                        | ErrorKind::ConnectionRefused
                        | ErrorKind::Interrupted
                ) => {}
            Err(err) => {
                if !std::mem::replace(failing, true) {
                    eprintln!(
                        "envhost: cannot accept a connection ({err}); trying again every {} ms. If the host is out of open files, lower --max-connections or raise `ulimit -n`.",
                        ACCEPT_RETRY.as_millis()
                    );
                }
                tokio::time::sleep(ACCEPT_RETRY).await;
            }
        }
    }
}
