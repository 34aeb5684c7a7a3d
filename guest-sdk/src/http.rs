//! Outgoing HTTP for plugins: `GET` a URL through the host's
//! `wasi:http/outgoing-handler`, with failures as sentences the agent can
//! act on.
//!
//! The operator decides where a plugin may send requests
//! (`allowed-hosts` in `env/envhost.toml`, docs/plugin-network.md); every
//! other destination is refused by the host before anything is connected,
//! and [`HttpError`] then names the grant to ask for:
//!
//! ```no_run
//! use envhost_sdk::{Result, fail, http};
//!
//! fn fetch(url: &str) -> Result<String> {
//!     let response = http::get(url)?; // a refusal reads "cannot fetch ...: ask the operator to add ..."
//!     if !(200..300).contains(&response.status) {
//!         fail!("GET {url} answered {}", response.status);
//!     }
//!     Ok(String::from_utf8_lossy(&response.body).into_owned())
//! }
//! ```
//!
//! This module knows the WASI HTTP bindings and URLs; it knows nothing of
//! commands or screens.

use std::fmt;

use crate::bindings::wasi::http::outgoing_handler;
use crate::bindings::wasi::http::types::{
    ErrorCode, Fields, IncomingBody, Method, OutgoingRequest, Scheme,
};
use crate::bindings::wasi::io::streams::StreamError;

/// What a server answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// The status code (`200`, `404`, ...); any status is a response, not an
    /// error: check it.
    pub status: u16,
    /// The header fields as received (names in lower case).
    pub headers: Vec<(String, Vec<u8>)>,
    /// The whole body.
    pub body: Vec<u8>,
}

/// Why a request got no response (or one too large to keep). Its
/// `Display` is the sentence to show the agent.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HttpError {
    /// The URL is not `http://` or `https://` followed by a host.
    BadUrl { url: String, why: String },
    /// The host refused the destination: it is not in the plugin's
    /// `allowed-hosts`. `origin` is what the operator would grant
    /// (`https://example.com`, `http://127.0.0.1:9`).
    Denied { url: String, origin: String },
    /// The body was longer than the limit given to [`get_at_most`].
    TooLarge { url: String, limit: usize },
    /// Anything else: connection refused, a timeout, DNS, TLS, ... (the
    /// WASI error code, readable).
    Failed { url: String, why: String },
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpError::BadUrl { url, why } => write!(f, "cannot fetch {url}: {why}"),
            HttpError::Denied { url, origin } => write!(
                f,
                "cannot fetch {url}: ask the operator to add \"{origin}\" to allowed-hosts in env/envhost.toml"
            ),
            HttpError::TooLarge { url, limit } => write!(
                f,
                "cannot fetch {url}: its body is larger than {}, the most this plugin keeps",
                size(*limit)
            ),
            HttpError::Failed { url, why } => write!(f, "cannot fetch {url}: {why}"),
        }
    }
}

impl std::error::Error for HttpError {}

/// `scheme://host[:port]` of an `http(s)` URL as `allowed-hosts` writes
/// it (lower case, the port only when it is not the scheme's default):
/// `https://example.com`, `http://127.0.0.1:9`.
pub fn origin(url: &str) -> Result<String, HttpError> {
    Ok(Target::parse(url)?.origin())
}

/// `GET url`, the whole body read into memory (which counts against the
/// plugin's memory limit; see [`get_at_most`] for a bound).
pub fn get(url: &str) -> Result<Response, HttpError> {
    get_at_most(url, usize::MAX)
}

/// `GET url`, failing with [`HttpError::TooLarge`] as soon as the body
/// passes `limit` bytes (nothing more is read).
pub fn get_at_most(url: &str, limit: usize) -> Result<Response, HttpError> {
    let target = Target::parse(url)?;
    let failed = |code: ErrorCode| match code {
        ErrorCode::HttpRequestDenied => HttpError::Denied {
            url: url.to_owned(),
            origin: target.origin(),
        },
        other => HttpError::Failed {
            url: url.to_owned(),
            why: readable(&other),
        },
    };
    let request = OutgoingRequest::new(Fields::new());
    let scheme = if target.https {
        Scheme::Https
    } else {
        Scheme::Http
    };
    let accepted = request.set_method(&Method::Get).is_ok()
        && request.set_scheme(Some(&scheme)).is_ok()
        && request.set_authority(Some(&target.authority)).is_ok()
        && request.set_path_with_query(Some(&target.path)).is_ok();
    if !accepted {
        return Err(HttpError::BadUrl {
            url: url.to_owned(),
            why: "the host cannot read it as a request (check the host name and path)".to_owned(),
        });
    }
    let pending = outgoing_handler::handle(request, None).map_err(failed)?;
    pending.subscribe().block();
    let response = match pending.get() {
        Some(Ok(Ok(response))) => response,
        Some(Ok(Err(code))) => return Err(failed(code)),
        // Ready after `block`, and taken once: neither can happen.
        Some(Err(())) | None => {
            return Err(HttpError::Failed {
                url: url.to_owned(),
                why: "the host gave no response".to_owned(),
            });
        }
    };
    let status = response.status();
    let headers = response.headers().entries();
    let body = response.consume().map_err(|()| HttpError::Failed {
        url: url.to_owned(),
        why: "the host gave no body".to_owned(),
    })?;
    let body = read_body(body, limit).map_err(|error| match error {
        BodyError::TooLarge => HttpError::TooLarge {
            url: url.to_owned(),
            limit,
        },
        BodyError::Failed(code) => failed(code),
    })?;
    Ok(Response {
        status,
        headers,
        body,
    })
}

enum BodyError {
    TooLarge,
    Failed(ErrorCode),
}

fn read_body(body: IncomingBody, limit: usize) -> Result<Vec<u8>, BodyError> {
    let mut bytes = Vec::new();
    {
        // The stream is a child of the body: it must go before `finish`.
        let Ok(stream) = body.stream() else {
            return Err(BodyError::Failed(ErrorCode::InternalError(Some(
                "the body's stream was already taken".to_owned(),
            ))));
        };
        loop {
            match stream.blocking_read(64 * 1024) {
                Ok(chunk) => {
                    if chunk.len() > limit - bytes.len() {
                        return Err(BodyError::TooLarge);
                    }
                    bytes.extend(chunk);
                }
                Err(StreamError::Closed) => break,
                Err(StreamError::LastOperationFailed(error)) => {
                    let code = crate::bindings::wasi::http::types::http_error_code(&error)
                        .unwrap_or_else(|| ErrorCode::InternalError(Some(error.to_debug_string())));
                    return Err(BodyError::Failed(code));
                }
            }
        }
    }
    // Trailers: none are kept, and a failure here is after the whole body.
    drop(IncomingBody::finish(body));
    Ok(bytes)
}

/// An `http(s)` URL cut into what a request takes.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    https: bool,
    /// `host[:port]` as written (the host checks and canonicalises it).
    authority: String,
    /// Path and query; `/` when the URL has none; no fragment.
    path: String,
}

impl Target {
    fn parse(url: &str) -> Result<Target, HttpError> {
        let bad = |why: &str| HttpError::BadUrl {
            url: url.to_owned(),
            why: why.to_owned(),
        };
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(bad("a URL starts with http:// or https://"));
        };
        let https = match scheme.to_ascii_lowercase().as_str() {
            "http" => false,
            "https" => true,
            _ => return Err(bad("only http:// and https:// URLs can be fetched")),
        };
        let rest = rest.split('#').next().unwrap_or_default();
        let (authority, path) = match rest.find(['/', '?']) {
            Some(at) if rest[at..].starts_with('?') => (&rest[..at], format!("/{}", &rest[at..])),
            Some(at) => (&rest[..at], rest[at..].to_owned()),
            None => (rest, "/".to_owned()),
        };
        if authority.is_empty() {
            return Err(bad("the URL names no host"));
        }
        if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("a URL holds no spaces or control characters"));
        }
        Ok(Target {
            https,
            authority: authority.to_owned(),
            path,
        })
    }

    /// `scheme://host[:port]` as `allowed-hosts` writes it: lower case,
    /// the port only when it is not the scheme's default.
    fn origin(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        let default = if self.https { "443" } else { "80" };
        let authority = self.authority.to_ascii_lowercase();
        let host_and_port = authority.rsplit_once('@').map_or(&*authority, |(_, at)| at);
        // `[::1]:80` or `example.com:443`: the port follows the last colon
        // outside brackets.
        let host = match host_and_port.rsplit_once(':') {
            Some((host, port)) if !port.contains(']') && port == default => host,
            _ => host_and_port,
        };
        format!("{scheme}://{host}")
    }
}

/// A WASI HTTP error code in words: `connection refused`, `DNS timeout`.
fn readable(code: &ErrorCode) -> String {
    match code {
        ErrorCode::DnsError(payload) => match (&payload.rcode, payload.info_code) {
            (Some(rcode), _) => format!("DNS error ({rcode})"),
            (None, Some(info)) => format!("DNS error (info code {info})"),
            (None, None) => "DNS error".to_owned(),
        },
        ErrorCode::InternalError(Some(text)) => format!("internal error: {text}"),
        ErrorCode::HttpResponseTransferCoding(Some(coding))
        | ErrorCode::HttpResponseContentCoding(Some(coding)) => {
            format!("{} ({coding})", words(code))
        }
        _ => words(code),
    }
}

/// The variant's name as words: `ConnectionRefused` is `connection
/// refused`, `TlsCertificateError` is `TLS certificate error`.
fn words(code: &ErrorCode) -> String {
    let debug = format!("{code:?}");
    let name = debug
        .trim_start_matches("ErrorCode::")
        .split(['(', ' ', '{'])
        .next()
        .unwrap_or_default();
    let mut out: Vec<String> = Vec::new();
    let mut word = String::new();
    for c in name.chars() {
        if c.is_ascii_uppercase() && !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        word.push(c);
    }
    out.push(word);
    out.iter()
        .map(|word| match word.as_str() {
            "Dns" | "Tls" | "Http" | "Ip" | "Uri" => word.to_ascii_uppercase(),
            _ => word.to_ascii_lowercase(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A size as the host words it (its `text::bytes`): `512 B`, `64 KiB`,
/// `1.5 MiB`, `4.0 GiB`.
fn size(bytes: usize) -> String {
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64;
    let mut unit = "B";
    for next in ["KiB", "MiB", "GiB", "TiB"] {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = next;
    }
    if value.fract() == 0.0 && value >= 10.0 {
        format!("{value:.0} {unit}")
    } else {
        format!("{value:.1} {unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str) -> Target {
        Target::parse(url).expect("a URL")
    }

    #[test]
    fn urls_become_a_request_s_parts() {
        assert_eq!(
            target("https://example.com"),
            Target {
                https: true,
                authority: "example.com".into(),
                path: "/".into()
            }
        );
        let t = target("http://127.0.0.1:9/x?y=1#top");
        assert_eq!(
            (t.authority.as_str(), t.path.as_str()),
            ("127.0.0.1:9", "/x?y=1")
        );
        assert_eq!(target("https://a.org?q").path, "/?q");
        assert!(matches!(
            Target::parse("ftp://a.org/"),
            Err(HttpError::BadUrl { .. })
        ));
        assert!(matches!(
            Target::parse("a.org/x"),
            Err(HttpError::BadUrl { .. })
        ));
        assert!(matches!(
            Target::parse("https:///x"),
            Err(HttpError::BadUrl { .. })
        ));
    }

    #[test]
    fn the_origin_is_written_as_allowed_hosts_writes_it() {
        for (url, origin) in [
            ("http://127.0.0.1:9/x", "http://127.0.0.1:9"),
            ("https://Example.COM:443/", "https://example.com"),
            ("http://example.com:80", "http://example.com"),
            ("http://example.com:443", "http://example.com:443"),
            ("HTTPS://[::1]:8443/a", "https://[::1]:8443"),
            ("https://[::1]:443/a", "https://[::1]"),
            ("https://[::1]/a", "https://[::1]"),
        ] {
            assert_eq!(target(url).origin(), origin, "{url}");
        }
    }

    #[test]
    fn a_denial_names_the_grant_to_ask_for() {
        let denied = HttpError::Denied {
            url: "http://127.0.0.1:9/".into(),
            origin: "http://127.0.0.1:9".into(),
        };
        assert_eq!(
            denied.to_string(),
            "cannot fetch http://127.0.0.1:9/: ask the operator to add \"http://127.0.0.1:9\" to allowed-hosts in env/envhost.toml"
        );
        let large = HttpError::TooLarge {
            url: "https://a.org/".into(),
            limit: 64 * 1024,
        };
        assert_eq!(
            large.to_string(),
            "cannot fetch https://a.org/: its body is larger than 64 KiB, the most this plugin keeps"
        );
    }

    #[test]
    fn sizes_read_as_the_host_words_them() {
        assert_eq!(size(512), "512 B");
        assert_eq!(size(64 * 1024), "64 KiB");
        assert_eq!(size(1536 * 1024), "1.5 MiB");
        assert_eq!(size(4 << 30), "4.0 GiB");
    }

    #[test]
    fn error_codes_read_as_words() {
        assert_eq!(
            readable(&ErrorCode::ConnectionRefused),
            "connection refused"
        );
        assert_eq!(readable(&ErrorCode::DnsTimeout), "DNS timeout");
        assert_eq!(
            readable(&ErrorCode::TlsCertificateError),
            "TLS certificate error"
        );
        assert_eq!(
            readable(&ErrorCode::HttpResponseBodySize(Some(3))),
            "HTTP response body size"
        );
        assert_eq!(
            readable(&ErrorCode::InternalError(Some("boom".into()))),
            "internal error: boom"
        );
    }
}
