//! What a request with the token must pass before rmcp serves it: its
//! body read whole within the header timeout and the size limit, checked
//! as a JSON-RPC message ([`message`](crate::message), with the words the
//! stdio transport uses), and a new session opened only under the cap.
//!
//! The HTTP statuses are the streamable HTTP transport's: `400` for a
//! message that is not one (bad JSON included: `415` is for a wrong
//! `Content-Type`), `404` with -32601 for a method the stateless revision
//! does not serve (before it, an unknown method is an ordinary JSON-RPC
//! error, `200`, because `404` there tells the client its session is gone),
//! `503` when the sessions are all taken (not `400`, `404` or `405`, which
//! the transport tells a client to read as a server of the old HTTP+SSE
//! kind).
//!
//! It must not know the token, the routes or the tools.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use envhost_core::Event;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Body as _, Incoming};
use hyper::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use hyper::{Method, Request, Response, StatusCode};
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use crate::answer::{Body, closing, plain, with_body};
use crate::message::{self, Fault, Framing, Refusal};
use crate::session::{Session, Shared};

/// The largest request body taken (rmcp's own limit, set to the same).
pub(crate) const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// The header a client names its session in.
const SESSION_HEADER: &str = "mcp-session-id";

/// The header a client names its protocol version in.
const VERSION_HEADER: &str = "mcp-protocol-version";

type Service = StreamableHttpService<Session, LocalSessionManager>;

/// The checks between the token and rmcp.
pub(crate) struct Admission {
    shared: Arc<Shared>,
    sessions: Arc<LocalSessionManager>,
    max_sessions: usize,
    session_idle_timeout: Duration,
    body_timeout: Duration,
    /// Held from the count of sessions until rmcp has made the new one, so
    /// that two `initialize` requests at once cannot both take the last
    /// place.
    opening: tokio::sync::Mutex<()>,
}

impl Admission {
    pub(crate) fn new(
        shared: Arc<Shared>,
        sessions: Arc<LocalSessionManager>,
        max_sessions: usize,
        session_idle_timeout: Duration,
        body_timeout: Duration,
    ) -> Admission {
        Admission {
            shared,
            sessions,
            max_sessions,
            session_idle_timeout,
            body_timeout,
            opening: tokio::sync::Mutex::new(()),
        }
    }

    /// Serves `request` through `service` if it passes; otherwise the
    /// answer that says what is wrong.
    pub(crate) async fn serve(
        &self,
        request: Request<Incoming>,
        service: &Service,
    ) -> Response<Body> {
        // rmcp reads only POST bodies of JSON, and answers the rest itself
        // (405, 406, 415, the session's event stream, DELETE).
        if request.method() != Method::POST || !is_json(request.headers().get(CONTENT_TYPE)) {
            return service.handle(request).await;
        }
        let (parts, body) = request.into_parts();
        let bytes = match self.read(body).await {
            Ok(bytes) => bytes,
            Err(answer) => return answer,
        };
        let version = parts
            .headers
            .get(VERSION_HEADER)
            .and_then(|value| value.to_str().ok());
        let checked = match message::check(&bytes, Framing::Body, version) {
            Ok(checked) => checked,
            Err(refusal) => {
                let status = match refusal.fault {
                    Fault::UnknownMethod if version.is_some_and(message::is_stateless_revision) => {
                        StatusCode::NOT_FOUND
                    }
                    Fault::UnknownMethod => StatusCode::OK,
                    _ => StatusCode::BAD_REQUEST,
                };
                return self.refuse(status, &refusal);
            }
        };
        let opens_session = checked.is_initialize() && !parts.headers.contains_key(SESSION_HEADER);
        let request = Request::from_parts(parts, Full::new(bytes));
        if !opens_session {
            return service.handle(request).await;
        }
        let _opening = self.opening.lock().await;
        if self.sessions.sessions.read().await.len() >= self.max_sessions {
            let refusal = Refusal::new(
                checked.id,
                Fault::Busy,
                format!(
                    "Too many sessions: envhost holds at most {} MCP sessions (--max-sessions) and all are open. A session ends when its client sends DELETE, or after {} s without a request (--session-idle-timeout); try again then.",
                    self.max_sessions,
                    self.session_idle_timeout.as_secs()
                ),
            );
            let mut answer = self.refuse(StatusCode::SERVICE_UNAVAILABLE, &refusal);
            answer.headers_mut().insert(
                RETRY_AFTER,
                HeaderValue::from(self.session_idle_timeout.as_secs()),
            );
            return answer;
        }
        service.handle(request).await
    }

    /// The whole body, within the size limit and the time limit.
    async fn read(&self, body: Incoming) -> Result<Bytes, Response<Body>> {
        // A body announced larger (Content-Length) is refused before a byte
        // of it is awaited; a chunked one, when it grows past the limit.
        if body.size_hint().lower() > MAX_BODY_BYTES as u64 {
            return Err(self.too_large());
        }
        match tokio::time::timeout(
            self.body_timeout,
            Limited::new(body, MAX_BODY_BYTES).collect(),
        )
        .await
        {
            Ok(Ok(collected)) => Ok(collected.to_bytes()),
            Ok(Err(err)) if err.downcast_ref::<LengthLimitError>().is_some() => {
                Err(self.too_large())
            }
            Ok(Err(err)) => Err(closing(plain(
                StatusCode::BAD_REQUEST,
                format!("Bad Request: the body could not be read ({err}).\n"),
            ))),
            Err(_) => Err(closing(plain(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "Request Timeout: the body did not arrive within {} s (--header-timeout); send it whole, at once.\n",
                    self.body_timeout.as_secs_f64()
                ),
            ))),
        }
    }

    /// The answer to a body over [`MAX_BODY_BYTES`]; the rest of the body
    /// is not read, so the connection ends.
    fn too_large(&self) -> Response<Body> {
        let refusal = Refusal::new(
            None,
            Fault::InvalidRequest,
            format!(
                "Invalid request: the body is larger than {} MiB; send each message smaller than that.",
                MAX_BODY_BYTES >> 20
            ),
        );
        closing(self.refuse(StatusCode::PAYLOAD_TOO_LARGE, &refusal))
    }

    /// The JSON-RPC error for `refusal`, recorded as the NDJSON server
    /// records a bad line.
    fn refuse(&self, status: StatusCode, refusal: &Refusal) -> Response<Body> {
        self.shared.orchestrator.emit(Event::ProtocolError {
            message: refusal.message.clone(),
        });
        with_body(status, "application/json", Bytes::from(refusal.to_json()))
    }
}

/// Whether a `Content-Type` is JSON, as rmcp decides it.
fn is_json(content_type: Option<&HeaderValue>) -> bool {
    content_type
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}
