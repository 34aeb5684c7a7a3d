//! MCP over streamable HTTP: rmcp's service behind hyper, at `/mcp`, for
//! any number of clients sharing the host's environments.
//!
//! Whoever reaches the port could run any command, so every request must
//! carry the bearer token (checked here, before rmcp sees the request); the
//! `Host` header must name the address the server listens on (rmcp's check,
//! against DNS rebinding); and the `Origin` rule ([`ALLOWED_ORIGIN_RULE`],
//! rmcp's check with our list) keeps web pages out. What a client costs
//! before the token is checked is bounded by [`listen`](crate::listen)
//! (connections, header timeout, buffer), and a refusal before the token
//! ends its connection, so that a client without the token cannot keep
//! one; what a request with the token must pass before rmcp (its body, the
//! session cap) is [`admission`](crate::admission).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use hyper::{Request, Response, StatusCode};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::admission::{self, Admission};
use crate::answer::{Body, closing, plain};
use crate::error::ServeError;
use crate::listen::Connections;
use crate::session::{Session, Shared};
use crate::settings::HttpSettings;
use crate::stop;
use crate::token::BearerToken;

/// The path MCP is served at.
const PATH: &str = "/mcp";

/// Which browser origins may call the server, as the docs and `--help` say.
pub const ALLOWED_ORIGIN_RULE: &str = "A request without an Origin header (MCP clients outside a \
    browser send none) is let in; a request with one is let in only if it is the server's own \
    origin (http://127.0.0.1:PORT, http://localhost:PORT, http://[::1]:PORT for the port it \
    listens on) or an origin given with --allow-origin. Any other gets 403 Forbidden, so that a \
    web page open in a browser on this machine cannot drive the environments.";

/// Serves until a signal arrives.
pub(crate) async fn serve(shared: Arc<Shared>, http: HttpSettings) -> Result<String, ServeError> {
    for origin in &http.allowed_origins {
        check_origin(origin)?;
    }
    check_limits(&http)?;
    let mut signals = stop::Signals::install()?;
    let token = Arc::new(BearerToken::obtain(http.token_file.as_deref())?);
    let listener = TcpListener::bind(http.address)
        .await
        .map_err(|source| ServeError::Bind {
            address: http.address,
            source,
        })?;
    let address = listener.local_addr().map_err(|source| ServeError::Bind {
        address: http.address,
        source,
    })?;
    let stop = CancellationToken::new();
    let limits = &http.limits;
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(limits.session_idle_timeout);
    let sessions = Arc::new(sessions);
    let service = StreamableHttpService::new(
        {
            let shared = Arc::clone(&shared);
            move || Ok(Session::new(Arc::clone(&shared)))
        },
        Arc::clone(&sessions),
        config(address, &http.allowed_origins, stop.child_token()),
    );
    let admission = Arc::new(Admission::new(
        Arc::clone(&shared),
        sessions,
        limits.max_sessions,
        limits.session_idle_timeout,
        limits.header_timeout,
    ));
    let connections = Connections::new(limits);
    if !address.ip().is_loopback() {
        eprintln!(
            "envhost: warning: listening on {address}, which other machines may reach; every request still needs the token"
        );
    }
    eprintln!("envhost: MCP over HTTP at http://{address}{PATH}");
    let answer = hyper::service::service_fn(move |request| {
        let service = service.clone();
        let token = Arc::clone(&token);
        let admission = Arc::clone(&admission);
        async move { Ok::<_, Infallible>(route(request, &service, &token, &admission).await) }
    });
    let signal = tokio::select! {
        never = connections.serve(listener, answer) => match never {},
        signal = signals.next() => signal,
    };
    shared.cancel.cancel();
    stop.cancel();
    Ok(format!("received {signal}"))
}

/// Limits of zero would refuse every client or close every connection at
/// once.
fn check_limits(http: &HttpSettings) -> Result<(), ServeError> {
    let limits = &http.limits;
    let zero = [
        (limits.max_connections == 0, "--max-connections"),
        (limits.header_timeout.is_zero(), "--header-timeout"),
        (limits.max_sessions == 0, "--max-sessions"),
        (
            limits.session_idle_timeout.is_zero(),
            "--session-idle-timeout",
        ),
    ];
    match zero.iter().find(|(is_zero, _)| *is_zero) {
        Some((_, flag)) => Err(ServeError::Limit(format!(
            "{flag} must be more than 0 (it is a limit on what the server holds, not a way to turn the limit off)"
        ))),
        None => Ok(()),
    }
}

fn config(
    address: SocketAddr,
    extra_origins: &[String],
    stop: CancellationToken,
) -> StreamableHttpServerConfig {
    let port = address.port();
    let mut origins = vec![
        format!("http://127.0.0.1:{port}"),
        format!("http://localhost:{port}"),
        format!("http://[::1]:{port}"),
    ];
    origins.extend(extra_origins.iter().cloned());
    let config = StreamableHttpServerConfig::default()
        .with_max_request_body_bytes(admission::MAX_BODY_BYTES)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_cancellation_token(stop);
    let ip = address.ip();
    if ip.is_unspecified() {
        // Any name may reach an address that listens everywhere; the token
        // guards it.
        config.disable_allowed_hosts()
    } else if ip.is_loopback() {
        config
    } else {
        let shown = match ip {
            std::net::IpAddr::V6(v6) => format!("[{v6}]"),
            v4 => v4.to_string(),
        };
        config.with_allowed_hosts([
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "::1".to_owned(),
            shown,
        ])
    }
}

/// An `--allow-origin` value must be `scheme://host[:port]`, as browsers
/// send it.
fn check_origin(origin: &str) -> Result<(), ServeError> {
    let valid = origin.split_once("://").is_some_and(|(scheme, rest)| {
        matches!(scheme, "http" | "https")
            && !rest.is_empty()
            && !rest.contains('/')
            && !rest.contains(char::is_whitespace)
    });
    if valid {
        Ok(())
    } else {
        Err(ServeError::Origin(format!(
            "--allow-origin {origin:?} is not an origin: write it as a browser sends it, e.g. http://localhost:6274 (scheme, host and port, no path)"
        )))
    }
}

async fn route(
    request: Request<Incoming>,
    service: &StreamableHttpService<Session, LocalSessionManager>,
    token: &BearerToken,
    admission: &Admission,
) -> Response<Body> {
    if request.uri().path() != PATH {
        return closing(plain(
            StatusCode::NOT_FOUND,
            format!(
                "envhost serves MCP at {PATH}; nothing is at {}\n",
                request.uri().path()
            ),
        ));
    }
    let authorization = request.headers().get(AUTHORIZATION).map(|v| v.as_bytes());
    if !token.accepts(authorization) {
        let mut response = plain(
            StatusCode::UNAUTHORIZED,
            "Unauthorized: send the header `Authorization: Bearer TOKEN` with the token envhost \
             printed when it started (or the one in its --token-file).\n"
                .to_owned(),
        );
        response.headers_mut().insert(
            WWW_AUTHENTICATE,
            hyper::header::HeaderValue::from_static("Bearer realm=\"envhost\""),
        );
        return closing(response);
    }
    admission.serve(request, service).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_origins_are_written_as_browsers_send_them() {
        assert!(check_origin("http://localhost:6274").is_ok());
        assert!(check_origin("https://app.example.com").is_ok());
        for bad in ["localhost:6274", "http://x/path", "ftp://x", "http://", "*"] {
            assert!(check_origin(bad).is_err(), "{bad}");
        }
    }
}
