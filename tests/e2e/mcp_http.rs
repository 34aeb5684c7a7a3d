//! `envhost mcp --http` against hostile clients, with raw sockets: clients
//! that never send a request or send half of one, that open more
//! connections than the host has descriptors, that open session after
//! session, and that send what no MCP client library would (bad JSON, ids
//! no float can hold, methods envhost does not answer).
//!
//! Every host runs under `prlimit --nofile`, so that a host that holds
//! connections without limit runs out of its own descriptors, never the
//! machine's; every wait is bounded. The official Python SDK's tests
//! (tests/mcp-python) drive the same server as a well-behaved client.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{Host, Project, envhost_binary};

/// How long the host may take to start, or to answer a request that must
/// be answered; generous, for a loaded machine.
const DEADLINE: Duration = Duration::from_secs(60);

/// A running `envhost mcp --http 127.0.0.1:0` under `prlimit --nofile`,
/// with the port and the token it printed.
struct HttpHost {
    child: Child,
    port: u16,
    token: String,
}

impl HttpHost {
    fn start(project: &Project, open_files: u32, extra: &[&str]) -> HttpHost {
        let mut child = Command::new("prlimit")
            .arg(format!("--nofile={open_files}"))
            .arg("--")
            .arg(envhost_binary())
            .arg("mcp")
            .arg("--project")
            .arg(project.path())
            .args(["--http", "127.0.0.1:0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start prlimit (util-linux) with envhost mcp --http");
        let stderr = child.stderr.take().expect("stderr");
        let (lines_tx, lines) = mpsc::channel();
        // The reader runs to the end of stderr, so a full pipe never blocks
        // the host.
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { return };
                let _ = lines_tx.send(line);
            }
        });
        let (port, token) = Self::address_and_token(&lines);
        HttpHost { child, port, token }
    }

    fn address_and_token(lines: &Receiver<String>) -> (u16, String) {
        let deadline = Instant::now() + DEADLINE;
        let (mut port, mut token) = (None, None);
        while port.is_none() || token.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = lines.recv_timeout(left).unwrap_or_else(|_| {
                panic!("envhost mcp --http did not print its address and token")
            });
            if let Some(rest) = line.split_once("http://127.0.0.1:").map(|(_, rest)| rest) {
                port = rest.split('/').next().and_then(|p| p.parse().ok());
            }
            if line.contains("bearer token for this server") {
                token = line.rsplit(' ').next().map(str::to_owned);
            }
        }
        (port.unwrap_or_default(), token.unwrap_or_default())
    }

    fn pid(&self) -> u32 {
        // prlimit runs the command in its own process (it execs it).
        self.child.id()
    }

    fn open_files(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .expect("the host's /proc/PID/fd")
            .count()
    }

    /// The host's CPU time so far (user and system), in clock ticks.
    fn cpu_ticks(&self) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid()))
            .expect("the host's /proc/PID/stat");
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime")
    }

    fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect to the host");
        stream
            .set_read_timeout(Some(DEADLINE))
            .expect("read timeout");
        stream
    }

    /// One request on a fresh connection that the client closes after the
    /// answer, with the token unless `token` is false.
    fn request(&self, method: &str, body: &[u8], headers: &[(&str, &str)], token: bool) -> Answer {
        let mut stream = self.connect();
        let mut head = format!(
            "{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.port,
            body.len()
        );
        if token {
            head.push_str(&format!("Authorization: Bearer {}\r\n", self.token));
        }
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).expect("send the head");
        stream.write_all(body).expect("send the body");
        Answer::read(&mut stream)
    }

    fn post(&self, body: &Value, headers: &[(&str, &str)]) -> Answer {
        self.request("POST", body.to_string().as_bytes(), headers, true)
    }

    /// A fresh session: `initialize`, then `notifications/initialized`.
    fn session(&self) -> String {
        let answer = self.post(&initialize(json!(0)), &[]);
        assert_eq!(answer.status, 200, "initialize: {answer:?}");
        let id = answer
            .header("mcp-session-id")
            .unwrap_or_else(|| panic!("no session id: {answer:?}"))
            .to_owned();
        let initialized = self.post(
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            &[
                ("Mcp-Session-Id", &id),
                ("MCP-Protocol-Version", "2025-06-18"),
            ],
        );
        assert_eq!(initialized.status, 202, "{initialized:?}");
        id
    }
}

impl Drop for HttpHost {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn initialize(id: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}})
}

/// An HTTP answer as the host sent it.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    /// Reads the answer to the end of the connection (every request here
    /// says `Connection: close`).
    fn read(stream: &mut TcpStream) -> Answer {
        let mut raw = Vec::new();
        if let Err(err) = stream.read_to_end(&mut raw) {
            panic!(
                "no complete answer within {DEADLINE:?} ({err}); got {:?}",
                String::from_utf8_lossy(&raw)
            );
        }
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("not an HTTP answer: {text:?}"));
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|line| line.split(' ').nth(1))
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("no status line: {text:?}"));
        let headers: Vec<(String, String)> = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
            .collect();
        let chunked = headers
            .iter()
            .any(|(name, value)| name == "transfer-encoding" && value.contains("chunked"));
        let body = if chunked {
            unchunk(body)
        } else {
            body.to_owned()
        };
        Answer {
            status,
            headers,
            body,
        }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(found, _)| found == name)
            .map(|(_, value)| value.as_str())
    }

    /// The JSON-RPC message the answer carries: the body itself, or the
    /// last `data:` line of an event stream that holds one.
    fn message(&self) -> Value {
        serde_json::from_str(&self.raw_message())
            .unwrap_or_else(|err| panic!("no JSON-RPC message ({err}): {self:?}"))
    }

    /// The text of that message as sent, to check ids digit for digit.
    fn raw_message(&self) -> String {
        if self.header("content-type") == Some("text/event-stream") {
            self.body
                .lines()
                .filter_map(|line| line.strip_prefix("data: "))
                .rfind(|data| data.starts_with('{'))
                .unwrap_or_default()
                .to_owned()
        } else {
            self.body.clone()
        }
    }

    fn error_message(&self) -> String {
        self.message()["error"]["message"]
            .as_str()
            .unwrap_or_else(|| panic!("not a JSON-RPC error: {self:?}"))
            .to_owned()
    }
}

fn unchunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// Whether the host closed `stream` (end of file, or a reset) within
/// `limit`, reading and dropping whatever it sent first.
fn closed_within(stream: &mut TcpStream, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    let mut buffer = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        stream.set_read_timeout(Some(left)).expect("read timeout");
        match stream.read(&mut buffer) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(err) if matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return false;
            }
            Err(_) => return true,
        }
    }
}

/// Waits until `condition` holds, up to `limit`.
fn eventually(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        thread::sleep(Duration::from_millis(50));
    }
    condition()
}

/// A request head cut off in the middle of a header, as a slow or hostile
/// client leaves it.
fn half_a_head(port: u16, filler: usize) -> Vec<u8> {
    let mut head =
        format!("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Filler: ").into_bytes();
    head.extend(std::iter::repeat_n(b'a', filler));
    head
}

#[test]
fn silent_half_sent_and_idle_connections_are_closed_before_any_token_check() {
    let project = Project::new();
    let host = HttpHost::start(&project, 512, &["--header-timeout", "2s"]);
    let before = host.open_files();
    let mut silent: Vec<TcpStream> = (0..20).map(|_| host.connect()).collect();
    let mut half: Vec<TcpStream> = (0..20)
        .map(|_| {
            let mut stream = host.connect();
            stream
                .write_all(&half_a_head(host.port, 1024))
                .expect("send half a head");
            stream
        })
        .collect();
    // A client with the token that made one request and then keeps its
    // connection without a word.
    let mut idle = host.connect();
    let body = initialize(json!(1)).to_string();
    write!(
        idle,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        host.port,
        host.token,
        body.len()
    )
    .expect("send a request");
    let limit = Duration::from_secs(20);
    for (kind, streams) in [("silent", &mut silent), ("half-sent", &mut half)] {
        for (n, stream) in streams.iter_mut().enumerate() {
            assert!(
                closed_within(stream, limit),
                "{kind} connection {n} was still open after {limit:?} (header timeout 2s)"
            );
        }
    }
    assert!(
        closed_within(&mut idle, limit),
        "an idle connection with the token was still open after {limit:?} (header timeout 2s)"
    );
    assert!(
        eventually(limit, || host.open_files() <= before),
        "the host holds {} descriptors, {before} before the connections",
        host.open_files()
    );
}

#[test]
fn a_head_sent_a_byte_at_a_time_does_not_restart_the_header_timeout() {
    let project = Project::new();
    let host = HttpHost::start(&project, 512, &["--header-timeout", "2s"]);
    let mut stream = host.connect();
    stream
        .write_all(&half_a_head(host.port, 0))
        .expect("start a head");
    // One byte every 200 ms, far under the buffer limit: the timeout
    // counts from the head's start, not from the last byte, so the host
    // ends the connection about 2 s in; one byte at a time would
    // otherwise hold it for as long as the client likes.
    let started = Instant::now();
    let limit = Duration::from_secs(20);
    let closed = loop {
        if started.elapsed() > limit {
            break false;
        }
        if stream.write_all(b"a").is_err() {
            break true;
        }
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .expect("read timeout");
        match stream.read(&mut [0; 1024]) {
            Ok(_) => break true,
            Err(err) if matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break true,
        }
    };
    assert!(
        closed,
        "a head dripped a byte every 200 ms was still being read after {limit:?} (header timeout 2s)"
    );
    eprintln!("the dripped head was cut off after {:?}", started.elapsed());
}

#[test]
fn a_head_larger_than_the_limit_is_refused_at_once() {
    let project = Project::new();
    let host = HttpHost::start(&project, 512, &["--header-timeout", "60s"]);
    let mut stream = host.connect();
    // 64 KiB of a header that never ends: the host stops reading at its
    // limit and says so, long before its header timeout.
    stream
        .write_all(&half_a_head(host.port, 64 * 1024))
        .expect("send a long head");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("read timeout");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 431"),
        "a 64 KiB head got {answer:?} within 20 s"
    );
}

#[test]
fn a_client_without_the_token_cannot_keep_its_connection() {
    let project = Project::new();
    let host = HttpHost::start(&project, 512, &["--header-timeout", "60s"]);
    for path in ["/mcp", "/elsewhere"] {
        let mut stream = host.connect();
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: text/event-stream\r\n\r\n",
            host.port
        )
        .expect("send a request");
        let mut reader = BufReader::new(stream.try_clone().expect("clone"));
        let mut status = String::new();
        reader.read_line(&mut status).expect("the status line");
        assert!(
            status.starts_with("HTTP/1.1 401") || status.starts_with("HTTP/1.1 404"),
            "{path}: {status}"
        );
        // Asking again on the same connection must not hold it any longer:
        // the host closed it after its refusal.
        let _ = write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\r\n",
            host.port
        );
        let mut rest = String::new();
        let closed = {
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .expect("read timeout");
            // Whatever remains of the first answer, then the end.
            let mut reader = reader;
            loop {
                let mut line = String::new();
                match reader.read_line(&mut line) {
                    Ok(0) => break true,
                    Ok(_) => rest.push_str(&line),
                    Err(err)
                        if matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
                    {
                        break false;
                    }
                    Err(_) => break true,
                }
            }
        };
        assert!(closed, "{path}: the connection stayed open after a refusal");
        assert!(
            !rest.contains("HTTP/1.1"),
            "{path}: a second request on a refused connection was answered: {rest:?}"
        );
    }
}

#[test]
fn the_connection_cap_holds_before_the_token_and_a_client_with_it_still_gets_in() {
    let project = Project::new();
    let host = HttpHost::start(
        &project,
        256,
        &["--max-connections", "16", "--header-timeout", "2s"],
    );
    let before = host.open_files();
    let idle: Vec<TcpStream> = (0..80).map(|_| host.connect()).collect();
    thread::sleep(Duration::from_secs(1));
    let held = host.open_files();
    assert!(
        held <= before + 16 + 2,
        "with --max-connections 16 and 80 idle connections the host holds {held} descriptors ({before} before)"
    );
    // The idle ones are dropped after their 2 s, the next ones taken from
    // the queue: the client with the token is served in its turn.
    let started = Instant::now();
    let answer = host.post(&initialize(json!(7)), &[]);
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.message()["id"], 7);
    eprintln!(
        "a client with the token behind 80 idle connections was served in {:?}",
        started.elapsed()
    );
    drop(idle);
}

#[test]
fn accept_backs_off_when_the_host_runs_out_of_descriptors() {
    let project = Project::new();
    // Far more connections allowed than descriptors: the host's accept
    // fails with EMFILE until idle connections time out.
    let host = HttpHost::start(
        &project,
        64,
        &["--max-connections", "1000", "--header-timeout", "3s"],
    );
    let idle: Vec<TcpStream> = (0..100).map(|_| host.connect()).collect();
    thread::sleep(Duration::from_millis(500));
    let ticks_per_second = 100; // USER_HZ on Linux
    let (start_ticks, started) = (host.cpu_ticks(), Instant::now());
    thread::sleep(Duration::from_secs(2));
    let cpu = (host.cpu_ticks() - start_ticks) as f64
        / ticks_per_second as f64
        / started.elapsed().as_secs_f64();
    assert!(
        cpu < 0.10,
        "out of descriptors with connections waiting, the host used {:.0}% of a core",
        cpu * 100.0
    );
    let answer = host.post(&initialize(json!("after-emfile")), &[]);
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.message()["id"], "after-emfile");
    drop(idle);
}

#[test]
fn sessions_past_the_cap_get_503_and_a_sentence_and_idle_ones_end() {
    let project = Project::new();
    let host = HttpHost::start(
        &project,
        512,
        &["--max-sessions", "2", "--session-idle-timeout", "4s"],
    );
    let first = host.session();
    let second = host.session();
    let refused = host.post(&initialize(json!("third")), &[]);
    assert_eq!(refused.status, 503, "{refused:?}");
    assert!(refused.header("retry-after").is_some(), "{refused:?}");
    assert_eq!(refused.message()["id"], "third");
    let sentence = refused.error_message();
    assert!(
        sentence.contains("2 MCP sessions") && sentence.contains("--max-sessions"),
        "{sentence}"
    );
    // A session its client ends frees its place at once.
    let ended = host.request(
        "DELETE",
        b"",
        &[
            ("Mcp-Session-Id", &first),
            ("MCP-Protocol-Version", "2025-06-18"),
        ],
        true,
    );
    assert_eq!(ended.status, 202, "{ended:?}");
    host.session();
    // Idle ones end after --session-idle-timeout (nothing here touches
    // them), which frees their places; the id of one that ended is unknown
    // (404, as the transport says).
    assert!(
        eventually(Duration::from_secs(30), || host
            .post(&initialize(json!(9)), &[])
            .status
            == 200),
        "no session could start after the idle ones ended"
    );
    let gone = host.post(
        &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}),
        &[
            ("Mcp-Session-Id", &second),
            ("MCP-Protocol-Version", "2025-06-18"),
        ],
    );
    assert_eq!(gone.status, 404, "{gone:?}");
}

/// The same request over stdio, for the words it gets there.
fn stdio_error(request: &Value) -> String {
    let project = Project::new();
    let mut host = Host::builder().subcommand("mcp").start(project.path());
    host.send(&initialize(json!(0)));
    let _ = host.recv();
    host.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    host.send(request);
    let answer = host.recv();
    answer["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("not an error over stdio: {answer}"))
        .to_owned()
}

#[test]
fn json_rpc_errors_say_what_is_wrong_in_the_stdio_words_and_keep_the_id() {
    let project = Project::new();
    let host = HttpHost::start(&project, 512, &[]);

    // Not JSON: a parse error, 400 as for any malformed message.
    let not_json = host.request(
        "POST",
        b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ",
        &[],
        true,
    );
    assert_eq!(not_json.status, 400, "{not_json:?}");
    assert_eq!(not_json.header("content-type"), Some("application/json"));
    assert_eq!(not_json.message()["error"]["code"], -32700);
    assert_eq!(not_json.message()["id"], Value::Null);
    assert!(
        not_json
            .error_message()
            .starts_with("Parse error: the body is not JSON"),
        "{not_json:?}"
    );
    let batch = host.request("POST", b"[1, 2]", &[], true);
    assert_eq!(batch.status, 400, "{batch:?}");
    assert_eq!(batch.message()["error"]["code"], -32600);

    // An id no 64-bit integer holds comes back digit for digit.
    let huge = br#"{"jsonrpc": "2.0", "id": 18446744073709551617, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}"#;
    let answer = host.request("POST", huge, &[], true);
    assert_eq!(answer.status, 400, "{answer:?}");
    assert!(
        answer
            .raw_message()
            .contains(r#""id":18446744073709551617"#),
        "{answer:?}"
    );
    assert_eq!(answer.message()["error"]["code"], -32600);
    assert!(
        answer.error_message().contains("18446744073709551617"),
        "{answer:?}"
    );

    // Inside a session: the words stdio uses, and ids past 2^53 intact.
    let session = host.session();
    let headers = [
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-06-18"),
    ];
    let cases = [
        json!({"jsonrpc": "2.0", "id": 9007199254740993_i64, "method": "prompts/list"}),
        json!({"jsonrpc": "2.0", "id": "a string id", "method": "resources/read", "params": {"uri": "file:///etc/passwd"}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "nope", "arguments": {}}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": 3}}),
    ];
    for request in &cases {
        let answer = host.post(request, &headers);
        assert_eq!(answer.status, 200, "{request}: {answer:?}");
        let id = request["id"].to_string();
        assert!(
            answer.raw_message().contains(&format!(r#""id":{id}"#)),
            "{request}: {answer:?}"
        );
        let over_stdio = stdio_error(request);
        assert_eq!(answer.error_message(), over_stdio, "{request}");
        assert_ne!(
            request["method"].as_str(),
            Some(over_stdio.as_str()),
            "{request}: a bare method name is no sentence"
        );
    }

    // The stateless revision: a method envhost does not answer is 404
    // with -32601 (the transport's rule), in the same words.
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    });
    let modern = host.post(
        &json!({"jsonrpc": "2.0", "id": 11, "method": "prompts/list", "params": {"_meta": meta}}),
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "prompts/list"),
        ],
    );
    assert_eq!(modern.status, 404, "{modern:?}");
    assert_eq!(modern.message()["error"]["code"], -32601);
    assert!(
        modern
            .error_message()
            .starts_with("Unknown method: prompts/list."),
        "{modern:?}"
    );
}

#[test]
fn a_body_too_large_or_too_slow_is_refused_and_its_connection_ends() {
    let project = Project::new();
    let host = HttpHost::start(&project, 512, &["--header-timeout", "2s"]);
    let head = |length: usize| {
        format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n",
            host.port, host.token
        )
    };
    // 5 MiB announced: refused before a byte of it is read.
    let mut stream = host.connect();
    stream
        .write_all(head(5 * 1024 * 1024).as_bytes())
        .expect("send the head");
    let answer = Answer::read(&mut stream);
    assert_eq!(answer.status, 413, "{answer:?}");
    assert_eq!(answer.header("connection"), Some("close"));
    assert_eq!(answer.message()["error"]["code"], -32600);
    assert!(answer.error_message().contains("4 MiB"), "{answer:?}");
    // Ten bytes of a hundred, then nothing: after the header timeout the
    // host says so and ends the connection.
    let mut stream = host.connect();
    stream
        .write_all(format!("{}{{\"jsonrpc\"", head(100)).as_bytes())
        .expect("send part of a body");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("read timeout");
    let answer = Answer::read(&mut stream);
    assert_eq!(answer.status, 408, "{answer:?}");
    assert!(answer.body.contains("--header-timeout"), "{answer:?}");
}
