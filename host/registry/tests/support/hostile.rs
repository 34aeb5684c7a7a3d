//! A hostile "registry" for the tests: a small HTTP/1.1 server (std's
//! `TcpListener`, one thread per connection) on an address of this machine
//! that answers each request as the test's route says — a challenge naming
//! another auth realm, a body trickled a byte at a time, an endless body,
//! or headers and then silence — and records every request it was sent,
//! with its `Authorization` header.
//!
//! Everything it does is bounded, so that a client that does not stop
//! makes a test fail instead of hang: a trickle or a silence is held at
//! most [`HOLD`], an endless body is at most [`CAP`] bytes.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The longest a trickle or a silence is held.
pub const HOLD: Duration = Duration::from_secs(60);
/// The most bytes an endless body sends.
pub const CAP: u64 = 256 << 20;

/// How to answer one request.
pub enum Reply {
    /// A whole answer.
    Full {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// The status and headers and `first`, then one byte of body every
    /// `every`, never finishing (until [`HOLD`]).
    Trickle {
        status: u16,
        headers: Vec<(String, String)>,
        first: Vec<u8>,
        every: Duration,
    },
    /// The status and headers (with `Content-Length: declared` when
    /// given), then bytes as fast as they are taken, never finishing
    /// (until [`CAP`]).
    Endless {
        status: u16,
        headers: Vec<(String, String)>,
        declared: Option<u64>,
    },
    /// The status and headers, then nothing, the connection held open
    /// (until [`HOLD`]).
    Silent {
        status: u16,
        headers: Vec<(String, String)>,
    },
}

impl Reply {
    pub fn status(status: u16) -> Reply {
        Reply::Full {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    pub fn bytes(content_type: &str, body: Vec<u8>) -> Reply {
        Reply::Full {
            status: 200,
            headers: vec![("Content-Type".to_owned(), content_type.to_owned())],
            body,
        }
    }

    pub fn json(body: &str) -> Reply {
        Reply::bytes("application/json", body.as_bytes().to_vec())
    }

    /// `401` with `WWW-Authenticate: Bearer realm="REALM",service="SERVICE"`.
    pub fn bearer_challenge(realm: &str, service: &str) -> Reply {
        Reply::Full {
            status: 401,
            headers: vec![(
                "WWW-Authenticate".to_owned(),
                format!("Bearer realm=\"{realm}\",service=\"{service}\""),
            )],
            body: br#"{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}"#
                .to_vec(),
        }
    }

    /// `401` with `WWW-Authenticate: Basic realm="REALM"`.
    pub fn basic_challenge(realm: &str) -> Reply {
        Reply::Full {
            status: 401,
            headers: vec![(
                "WWW-Authenticate".to_owned(),
                format!("Basic realm=\"{realm}\""),
            )],
            body: Vec::new(),
        }
    }
}

/// A request the server was sent.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    /// The path with its query.
    pub path: String,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
}

/// A running hostile server; stopped (every thread joined) on drop.
pub struct HostileServer {
    /// `HOST:PORT`.
    pub address: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    sent: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

type Route = dyn Fn(&Seen) -> Reply + Send + Sync;

impl HostileServer {
    /// Listens on a free port of `host` and answers with `route`.
    pub fn start(host: &str, route: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind((host, 0)).expect("binding the hostile server");
        listener
            .set_nonblocking(true)
            .expect("nonblocking listener");
        let address = listener.local_addr().expect("address").to_string();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sent = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let route: Arc<Route> = Arc::new(route);
        let thread = {
            let (seen, sent, stop) = (seen.clone(), sent.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut connections = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let (seen, sent, stop, route) =
                                (seen.clone(), sent.clone(), stop.clone(), route.clone());
                            connections.push(std::thread::spawn(move || {
                                serve(stream, &*route, &seen, &sent, &stop)
                            }));
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
                for connection in connections {
                    let _ = connection.join();
                }
            })
        };
        HostileServer {
            address,
            seen,
            sent,
            stop,
            thread: Some(thread),
        }
    }

    /// The requests received so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("seen").clone()
    }

    /// The body bytes sent by trickles and endless answers so far.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }
}

impl Drop for HostileServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(
    stream: TcpStream,
    route: &Route,
    seen: &Mutex<Vec<Seen>>,
    sent: &AtomicU64,
    stop: &AtomicBool,
) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    // A client that stops reading makes a write wait; the timeout lets the
    // loops below see `stop`.
    let _ = stream.set_write_timeout(Some(Duration::from_millis(500)));
    let Ok(reader_stream) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(reader_stream);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or("").to_owned();
    let path = parts.next().unwrap_or("").to_owned();
    let mut authorization = None;
    let mut content_length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            let value = value.trim().to_owned();
            if name.eq_ignore_ascii_case("authorization") {
                authorization = Some(value);
            } else if name.eq_ignore_ascii_case("content-length") {
                content_length = value.parse().unwrap_or(0);
            }
        }
    }
    // The request's body is read and dropped (an upload, say).
    let _ = std::io::copy(
        &mut std::io::Read::take(&mut reader, content_length as u64),
        &mut std::io::sink(),
    );
    let request = Seen {
        method,
        path,
        authorization,
    };
    seen.lock().expect("seen").push(request.clone());
    let mut stream = stream;
    let head = |status: u16, headers: &[(String, String)], length: Option<u64>| {
        let mut head = format!(
            "HTTP/1.1 {status} {}\r\nConnection: close\r\n",
            reason(status)
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if let Some(length) = length {
            head.push_str(&format!("Content-Length: {length}\r\n"));
        }
        head.push_str("\r\n");
        head
    };
    let started = Instant::now();
    match route(&request) {
        Reply::Full {
            status,
            headers,
            body,
        } => {
            let _ = stream.write_all(head(status, &headers, Some(body.len() as u64)).as_bytes());
            let _ = stream.write_all(&body);
        }
        Reply::Trickle {
            status,
            headers,
            first,
            every,
        } => {
            if stream
                .write_all(head(status, &headers, None).as_bytes())
                .is_err()
                || stream.write_all(&first).is_err()
            {
                return;
            }
            while started.elapsed() < HOLD && !stop.load(Ordering::Relaxed) {
                if stream.write_all(b" ").is_err() {
                    return;
                }
                sent.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(every);
            }
        }
        Reply::Endless {
            status,
            headers,
            declared,
        } => {
            if stream
                .write_all(head(status, &headers, declared).as_bytes())
                .is_err()
            {
                return;
            }
            let chunk = vec![b' '; 64 << 10];
            while sent.load(Ordering::Relaxed) < CAP && !stop.load(Ordering::Relaxed) {
                match stream.write(&chunk) {
                    Ok(0) => return,
                    Ok(n) => {
                        sent.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                    Err(_) => return,
                }
            }
        }
        Reply::Silent { status, headers } => {
            if stream
                .write_all(head(status, &headers, None).as_bytes())
                .is_err()
            {
                return;
            }
            while started.elapsed() < HOLD && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        307 => "Temporary Redirect",
        401 => "Unauthorized",
        404 => "Not Found",
        500 => "Internal Server Error",
        _ => "Whatever",
    }
}
