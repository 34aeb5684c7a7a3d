//! Small HTTP servers on 127.0.0.1 for the tests of plugins' outgoing
//! HTTP: each runs on a thread of its test, counts the connections it
//! accepted and the `Host` headers it read, and stops when dropped.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How a test server treats a connection.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Reads the request and answers `200` with a short body ([`BODY`]);
    /// a path `/status/N` gets status N (and the same body), `/bytes/N`
    /// `200` with N bytes of `x`.
    Answer,
    /// Accepts and keeps the connection, never answering.
    Silent,
}

/// An HTTP server on 127.0.0.1, on a thread of this test; it stops when
/// dropped.
pub struct Server {
    pub port: u16,
    accepted: Arc<AtomicUsize>,
    /// The `Host` header of each request it read.
    pub hosts: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

pub const BODY: &str = "hello from the loopback server";

impl Server {
    pub fn start(behaviour: Behaviour) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        listener.set_nonblocking(true).expect("non-blocking");
        let port = listener.local_addr().expect("address").port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let hosts = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::spawn({
            let (accepted, hosts, stop) = (accepted.clone(), hosts.clone(), stop.clone());
            move || {
                // Silent connections stay open until the server stops.
                let mut held: Vec<TcpStream> = Vec::new();
                while !stop.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            accepted.fetch_add(1, Ordering::SeqCst);
                            match behaviour {
                                Behaviour::Silent => held.push(stream),
                                Behaviour::Answer => answer(stream, &hosts),
                            }
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            }
        });
        Server {
            port,
            accepted,
            hosts,
            stop,
            thread: Some(thread),
        }
    }

    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn answer(mut stream: TcpStream, hosts: &Mutex<Vec<String>>) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut request = Vec::new();
    let mut buffer = [0u8; 4096];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buffer[..n]),
        }
    }
    let text = String::from_utf8_lossy(&request);
    if let Some(host) = text
        .lines()
        .find_map(|line| line.strip_prefix("host: ").or(line.strip_prefix("Host: ")))
    {
        hosts.lock().expect("hosts").push(host.trim().to_owned());
    }
    let path = text.split_whitespace().nth(1).unwrap_or("/");
    let number = |prefix: &str| {
        path.strip_prefix(prefix)
            .and_then(|n| n.parse::<usize>().ok())
    };
    let (status, body) = match (number("/status/"), number("/bytes/")) {
        (Some(status), _) => (status, BODY.to_owned()),
        (None, Some(size)) => (200, "x".repeat(size)),
        (None, None) => (200, BODY.to_owned()),
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status} Status {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}
