//! The limits every transfer runs under, and the HTTP client they run on.
//! A transfer is one request and the whole of its answer; it ends with a
//! sentence when no byte has moved for the stall timeout (while
//! connecting, waiting for the answer, between two pieces of it, or while
//! the server takes no more of an upload) and when it is not done by its
//! deadline, however steadily its bytes come — so a server that trickles
//! a byte a second cannot hold a command forever. Answers are read as
//! streams, never whole, so that the caller bounds them as they arrive.
//! Also the one wording of a network failure.
//!
//! This module knows HTTP and time; it does not know OCI, credentials or
//! digests.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt as _;
use futures_util::future::Either;
use tokio::time::Instant;

use crate::error::Error;

/// An answer's body, piece by piece.
pub(crate) type BodyStream =
    Pin<Box<dyn futures_util::Stream<Item = std::io::Result<Bytes>> + Send>>;

/// The most of an error answer read to explain it.
pub(crate) const MAX_EXPLANATION: u64 = 64 << 10;

/// The pieces an upload is handed to the connection in (each one a sign
/// of progress).
const UPLOAD_PIECE: usize = 64 << 10;

/// The limits of every transfer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// The longest a transfer may go without a byte moving.
    pub(crate) stall: Duration,
    /// The longest one transfer may take.
    pub(crate) deadline: Duration,
}

/// When a byte last moved in one transfer: the answer's stream and an
/// upload's body mark it as pieces go by.
#[derive(Clone)]
pub(crate) struct Progress {
    started: Instant,
    /// Milliseconds from `started` to the last movement.
    last: Arc<AtomicU64>,
}

impl Progress {
    fn new() -> Self {
        Progress {
            started: Instant::now(),
            last: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Something moved now.
    pub(crate) fn moved(&self) {
        let since = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(since, Ordering::Relaxed);
    }

    fn last_moved(&self) -> Instant {
        self.started + Duration::from_millis(self.last.load(Ordering::Relaxed))
    }
}

/// Runs one transfer under `limits`: `work` sends a request and reads its
/// answer, marking [`Progress`] as bytes move. It is dropped — which
/// closes its connection — when nothing moved for the stall timeout
/// ([`Error::Stalled`]) or when the deadline passes ([`Error::Deadline`]).
pub(crate) async fn limited<T, F>(
    limits: Limits,
    what: &str,
    host: &str,
    work: impl FnOnce(Progress) -> F,
) -> Result<T, Error>
where
    F: Future<Output = Result<T, Error>>,
{
    let progress = Progress::new();
    let watched = progress.clone();
    let watchdog = async move {
        loop {
            let due = watched.last_moved() + limits.stall;
            if Instant::now() >= due {
                return;
            }
            tokio::time::sleep_until(due).await;
        }
    };
    let work = std::pin::pin!(work(progress));
    let watchdog = std::pin::pin!(watchdog);
    let raced = futures_util::future::select(work, watchdog);
    match tokio::time::timeout(limits.deadline, raced).await {
        Ok(Either::Left((result, _))) => result,
        Ok(Either::Right(((), _))) => Err(Error::Stalled {
            what: what.to_owned(),
            host: host.to_owned(),
            limit: limits.stall,
        }),
        Err(_) => Err(Error::Deadline {
            what: what.to_owned(),
            host: host.to_owned(),
            limit: limits.deadline,
        }),
    }
}

/// Sends a request; its answer's status and headers are progress.
pub(crate) async fn send(
    request: reqwest::RequestBuilder,
    progress: &Progress,
    what: &str,
    host: &str,
) -> Result<reqwest::Response, Error> {
    let response = request
        .send()
        .await
        .map_err(|e| network_error(what, host, &e))?;
    progress.moved();
    Ok(response)
}

/// An answer's body as a stream whose every piece is progress.
pub(crate) fn body(response: reqwest::Response, progress: &Progress) -> BodyStream {
    let progress = progress.clone();
    Box::pin(response.bytes_stream().map(move |piece| {
        progress.moved();
        piece.map_err(|e| std::io::Error::other(describe(&e)))
    }))
}

/// `bytes` as a request body handed to the connection in pieces, each
/// taken piece progress (a server that stops taking them stalls). The
/// caller sets `Content-Length`.
pub(crate) fn upload(bytes: Bytes, progress: &Progress) -> reqwest::Body {
    let progress = progress.clone();
    let pieces = futures_util::stream::unfold(bytes, move |mut rest| {
        let progress = progress.clone();
        async move {
            if rest.is_empty() {
                return None;
            }
            let piece = rest.split_to(UPLOAD_PIECE.min(rest.len()));
            progress.moved();
            Some((Ok::<_, std::io::Error>(piece), rest))
        }
    });
    reqwest::Body::wrap_stream(pieces)
}

/// The first [`MAX_EXPLANATION`] bytes of an answer (the rest is never
/// read), as one line of at most 300 characters: what a server says when it
/// refuses.
pub(crate) async fn explanation(response: reqwest::Response, progress: &Progress) -> String {
    let mut stream = body(response, progress);
    let mut bytes = Vec::new();
    while (bytes.len() as u64) < MAX_EXPLANATION {
        match stream.next().await {
            Some(Ok(piece)) => {
                let room = MAX_EXPLANATION as usize - bytes.len();
                bytes.extend_from_slice(&piece[..piece.len().min(room)]);
            }
            Some(Err(_)) | None => break,
        }
    }
    one_line(&String::from_utf8_lossy(&bytes), 300)
}

fn one_line(text: &str, most: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(most) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
}

/// The HTTP client of every transfer: connecting is bounded by `stall`
/// (the rest of each transfer by [`limited`]); a redirect may not drop
/// TLS unless `plain_http_allowed` says the new address may be reached
/// without it, and at most 5 are followed. (reqwest drops the
/// `Authorization` header on a redirect to another host, port or scheme.)
pub(crate) fn http_client(
    stall: Duration,
    plain_http_allowed: impl Fn(&reqwest::Url) -> bool + Send + Sync + 'static,
) -> Result<reqwest::Client, Error> {
    reqwest::Client::builder()
        .connect_timeout(stall)
        .user_agent(concat!("envhost/", env!("CARGO_PKG_VERSION")))
        .redirect(reqwest::redirect::Policy::custom(move |attempt| {
            let url = attempt.url().clone();
            if url.scheme() == "http" && !plain_http_allowed(&url) {
                attempt.error(format!("redirected to plain HTTP ({url})"))
            } else if attempt.previous().len() >= 5 {
                attempt.error("more than 5 redirects")
            } else {
                attempt.follow()
            }
        }))
        .build()
        .map_err(|e| Error::Network {
            what: "setting up HTTPS".to_owned(),
            host: String::new(),
            detail: e.to_string(),
        })
}

/// A failure to reach `host` or to read from it, with every cause.
pub(crate) fn network_error(what: &str, host: &str, error: &reqwest::Error) -> Error {
    Error::Network {
        what: what.to_owned(),
        host: host.to_owned(),
        detail: describe(error),
    }
}

/// An error and each of its causes, joined by `: `.
fn describe(error: &reqwest::Error) -> String {
    use std::error::Error as _;
    let mut detail = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        detail.push_str(": ");
        detail.push_str(&cause.to_string());
        source = cause.source();
    }
    detail
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    fn limits(stall_ms: u64, deadline_ms: u64) -> Limits {
        Limits {
            stall: Duration::from_millis(stall_ms),
            deadline: Duration::from_millis(deadline_ms),
        }
    }

    #[test]
    fn steady_progress_runs_until_the_deadline() {
        let result: Result<(), Error> = runtime().block_on(limited(
            limits(200, 1000),
            "the thing",
            "host",
            |progress| async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    progress.moved();
                }
            },
        ));
        let error = result.unwrap_err();
        assert!(matches!(error, Error::Deadline { .. }), "{error}");
        assert!(error.to_string().contains("within 1s"), "{error}");
    }

    #[test]
    fn no_progress_ends_at_the_stall_timeout() {
        let started = std::time::Instant::now();
        let result: Result<(), Error> =
            runtime().block_on(limited(limits(200, 60_000), "the thing", "host", |_| {
                std::future::pending()
            }));
        let error = result.unwrap_err();
        assert!(matches!(error, Error::Stalled { .. }), "{error}");
        assert!(error.to_string().contains("nothing for 200ms"), "{error}");
        assert!(started.elapsed() < Duration::from_secs(30));
    }

    #[test]
    fn finished_work_is_its_own_result() {
        let result = runtime().block_on(limited(limits(200, 1000), "x", "h", |_| async {
            Ok::<_, Error>(7)
        }));
        assert_eq!(result.unwrap(), 7);
    }

    #[test]
    fn explanations_are_one_short_line() {
        assert_eq!(one_line("a\n  b\tc ", 300), "a b c");
        assert_eq!(one_line("abcdef", 3), "abc…");
    }
}
