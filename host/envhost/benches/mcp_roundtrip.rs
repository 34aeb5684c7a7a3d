//! MCP against NDJSON: the same `echo hello` in bash, through `envhost mcp`
//! (a `tools/call` over stdio) and through `envhost serve` (a command
//! line), interleaved in one run; prints medians, p95 and their ratio, so
//! the cost of the MCP front end (JSON-RPC framing, the async runtime, the
//! hop to the blocking pool) is read against the NDJSON floor.
//!
//! The MCP side is driven with raw JSON-RPC lines, as any client writes
//! them, so the number is the server's and not a client library's.
//!
//! `cargo bench --bench mcp_roundtrip` (add `--profile dev` for a quick
//! check). `ENVHOST_BENCH_ITERATIONS` sets the iterations (default 1000).

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Serve, micros, profile, summarize};

const WARM_UP: usize = 50;
const COMMAND: &str = "echo hello";

/// A running `envhost mcp` on stdio, past its `initialize` handshake.
struct Mcp {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
    line: String,
}

impl Mcp {
    fn start(project: &Path) -> Mcp {
        let mut child = Command::new(env!("CARGO_BIN_EXE_envhost"))
            .arg("mcp")
            .arg("--project")
            .arg(project)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start envhost mcp");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut mcp = Mcp {
            child,
            stdin,
            stdout,
            next_id: 1,
            line: String::new(),
        };
        let params = json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "mcp_roundtrip", "version": "0"}
        });
        let (_, answer) = mcp.request("initialize", params);
        assert!(answer.contains("\"serverInfo\""), "initialize: {answer}");
        mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        mcp
    }

    fn send(&mut self, message: &Value) {
        let mut bytes = serde_json::to_vec(message).expect("message");
        bytes.push(b'\n');
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(&bytes).expect("write the request");
        stdin.flush().expect("flush");
    }

    /// Sends one request and reads up to its response (skipping any
    /// notification); the time is from the first byte written to the last
    /// byte of the response read.
    fn request(&mut self, method: &str, params: Value) -> (Duration, &str) {
        let id = self.next_id;
        self.next_id += 1;
        let started = Instant::now();
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let wanted = format!("\"id\":{id}");
        loop {
            self.line.clear();
            let read = self
                .stdout
                .read_line(&mut self.line)
                .expect("read the answer");
            assert!(read > 0, "envhost mcp closed its output");
            if self.line.contains(&wanted) {
                return (started.elapsed(), &self.line);
            }
        }
    }

    /// A `tools/call` that must succeed.
    fn call(&mut self, tool: &str, command: &str) -> (Duration, &str) {
        let params = json!({"name": tool, "arguments": {"command": command}});
        let (took, line) = self.request("tools/call", params);
        assert!(
            !line.contains("\"isError\":true"),
            "{tool}: {command:?} failed: {line}"
        );
        assert!(line.contains("hello"), "{tool}: {command:?}: {line}");
        (took, line)
    }

    fn stop(mut self) {
        self.stdin = None;
        let _ = self.child.wait();
    }
}

fn iterations() -> usize {
    std::env::var("ENVHOST_BENCH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let quick = std::env::args().any(|a| a == "--test");
    let n = if quick { 20 } else { iterations() };
    let ndjson_project = tempfile::tempdir().expect("project dir");
    let mcp_project = tempfile::tempdir().expect("project dir");
    let mut serve = Serve::start(ndjson_project.path(), &[]);
    let mut mcp = Mcp::start(mcp_project.path());
    for _ in 0..WARM_UP {
        serve.command("bash", COMMAND);
        mcp.call("bash", COMMAND);
    }
    let mut through_ndjson = Vec::with_capacity(n);
    let mut through_mcp = Vec::with_capacity(n);
    let (mut ndjson_bytes, mut mcp_bytes) = (0, 0);
    // Interleaved, so that machine noise hits both alike.
    for _ in 0..n {
        let (took, line) = serve.command("bash", COMMAND);
        ndjson_bytes = line.len();
        through_ndjson.push(took);
        let (took, line) = mcp.call("bash", COMMAND);
        mcp_bytes = line.len();
        through_mcp.push(took);
    }
    serve.stop();
    mcp.stop();

    let ndjson = summarize(&through_ndjson);
    let over_mcp = summarize(&through_mcp);
    println!(
        "`{COMMAND}` in bash, {n} iterations each, {} profile (microseconds)",
        profile()
    );
    println!(
        "{:<28} {:>9} {:>9} {:>15}",
        "front end", "p50", "p95", "response bytes"
    );
    println!(
        "{:<28} {:>9.0} {:>9.0} {:>15}",
        "NDJSON (envhost serve)",
        micros(ndjson.median),
        micros(ndjson.p95),
        ndjson_bytes
    );
    println!(
        "{:<28} {:>9.0} {:>9.0} {:>15}",
        "MCP stdio (envhost mcp)",
        micros(over_mcp.median),
        micros(over_mcp.p95),
        mcp_bytes
    );
    println!(
        "ratio MCP / NDJSON: p50 {:.2}, p95 {:.2}",
        micros(over_mcp.median) / micros(ndjson.median),
        micros(over_mcp.p95) / micros(ndjson.p95)
    );
}
