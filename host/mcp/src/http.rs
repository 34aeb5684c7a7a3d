//! MCP over streamable HTTP: rmcp's service behind hyper, at `/mcp`, for
//! any number of clients sharing the host's environments.
//!
//! Whoever reaches the port could run any command, so every request must
//! carry the bearer token (checked here, before rmcp sees the request); the
//! `Host` header must name the address the server listens on (rmcp's check,
//! against DNS rebinding); and the `Origin` rule ([`ALLOWED_ORIGIN_RULE`],
//! rmcp's check with our list) keeps web pages out.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::error::ServeError;
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

type Body = BoxBody<Bytes, Infallible>;

/// Serves until a signal arrives.
pub(crate) async fn serve(shared: Arc<Shared>, http: HttpSettings) -> Result<String, ServeError> {
    for origin in &http.allowed_origins {
        check_origin(origin)?;
    }
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
    let service = StreamableHttpService::new(
        {
            let shared = Arc::clone(&shared);
            move || Ok(Session::new(Arc::clone(&shared)))
        },
        Arc::new(LocalSessionManager::default()),
        config(address, &http.allowed_origins, stop.child_token()),
    );
    if !address.ip().is_loopback() {
        eprintln!(
            "envhost: warning: listening on {address}, which other machines may reach; every request still needs the token"
        );
    }
    eprintln!("envhost: MCP over HTTP at http://{address}{PATH}");
    let signal = loop {
        tokio::select! {
            accepted = listener.accept() => {
                // A failed accept (too many open files) is the client's
                // loss, not the server's.
                if let Ok((stream, _)) = accepted {
                    let service = service.clone();
                    let token = Arc::clone(&token);
                    tokio::spawn(async move {
                        let answer = hyper::service::service_fn(move |request| {
                            let service = service.clone();
                            let token = Arc::clone(&token);
                            async move { Ok::<_, Infallible>(route(request, &service, &token).await) }
                        });
                        // A client that hangs up mid-answer ends only its connection.
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), answer)
                            .await;
                    });
                }
            }
            signal = signals.next() => break signal,
        }
    };
    shared.cancel.cancel();
    stop.cancel();
    Ok(format!("received {signal}"))
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
) -> Response<Body> {
    if request.uri().path() != PATH {
        return plain(
            StatusCode::NOT_FOUND,
            format!(
                "envhost serves MCP at {PATH}; nothing is at {}\n",
                request.uri().path()
            ),
        );
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
        return response;
    }
    service.handle(request).await
}

fn plain(status: StatusCode, text: String) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
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
