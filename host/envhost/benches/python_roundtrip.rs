//! Round trip of python code through envhost, beside the floor: a raw
//! `python3` driven over pipes with a sentinel line.
//!
//! For each workload, the time from writing the request to having read the
//! whole answer: for envhost the NDJSON response line *with the screen*, for
//! the floor everything up to the sentinel. One run, both sides
//! interleaved so that machine noise hits them alike; medians, p95 and the
//! ratio of the medians are printed. Not a timed test: nothing is asserted.
//! `x = 1, yield_ms` is the same command sent with `yield_ms` (it ends long
//! before): what a command that may yield costs when it does not.
//! `wait, finished` is a `wait` on a command that yielded and has ended
//! since, beside envhost's own plain `x = 1` in the same run, each sent
//! after the same 40 ms pause.
//!
//! Run: `cargo bench --bench python_roundtrip` (add `--profile dev` for a
//! quick check; the numbers that count come from the release profile).
//! `ENVHOST_BENCH_ROUNDS` overrides the number of rounds per workload.
//! `ENVHOST_BENCH_BASELINE=<another envhost binary>` first times `x = 1`
//! through that build and this one (see `support::against_baseline`);
//! `--baseline-only` after `--` stops there.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use support::{Serve, millis, summarize};

/// The floor: read one JSON-encoded piece of code per line, run it as the
/// interactive interpreter would (the value of an expression is printed),
/// then print a sentinel line.
const FLOOR_PROGRAM: &str = r#"
import json, sys
namespace = {"__name__": "__main__"}
for line in sys.stdin:
    code = json.loads(line)
    exec(compile(code, "<bench>", "single"), namespace)
    sys.stdout.write("__SENTINEL_7f3a__\n")
    sys.stdout.flush()
"#;

const SENTINEL: &str = "__SENTINEL_7f3a__";

struct Workload {
    code: &'static str,
    rounds: usize,
    /// Sent with `yield_ms` (the command may yield, so it gets a stdin of
    /// its own; it ends long before).
    yield_ms: Option<u64>,
}

const WORKLOADS: [Workload; 3] = [
    Workload {
        code: "x = 1",
        rounds: 1000,
        yield_ms: None,
    },
    Workload {
        code: "x = 1",
        rounds: 1000,
        yield_ms: Some(10_000),
    },
    Workload {
        code: "sum(range(10**6))",
        rounds: 60,
        yield_ms: None,
    },
];

struct Floor {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Floor {
    fn start() -> Floor {
        let mut child = Command::new("python3")
            .args(["-u", "-c", FLOOR_PROGRAM])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start python3");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Floor {
            child,
            stdin,
            stdout,
        }
    }

    fn round_trip(&mut self, code: &str) -> (Duration, String) {
        let mut request = serde_json::to_vec(code).expect("request");
        request.push(b'\n');
        let started = Instant::now();
        self.stdin.write_all(&request).expect("write code");
        self.stdin.flush().expect("flush");
        let mut output = String::new();
        loop {
            let mut line = String::new();
            if self.stdout.read_line(&mut line).expect("read output") == 0 {
                panic!("the floor python ended; output so far: {output}");
            }
            if line.trim_end() == SENTINEL {
                break;
            }
            output.push_str(&line);
        }
        (started.elapsed(), output)
    }

    fn stop(mut self) {
        drop(self.stdin);
        let _ = self.child.wait();
    }
}

fn main() {
    let rounds_override: Option<usize> = std::env::var("ENVHOST_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok());
    if let Some(binary) = support::baseline_binary() {
        let n = rounds_override.unwrap_or(2000);
        support::against_baseline(&binary, &[("python", "x = 1")], n);
        if std::env::args().any(|a| a == "--baseline-only") {
            return;
        }
    }
    let project = tempfile::tempdir().expect("temporary project");
    let mut envhost = Serve::start(project.path(), &[]);
    let mut floor = Floor::start();

    // Warm up: starts envhost's interpreter, fills caches.
    envhost.command("python", "import os");
    for _ in 0..5 {
        envhost.command("python", "x = 1");
        floor.round_trip("x = 1");
    }

    println!("python round trip: envhost (response + screen) vs raw python3 over pipes");
    println!(
        "{:<20} {:>7} {:>12} {:>12} {:>12} {:>12} {:>8} {:>8}",
        "workload",
        "rounds",
        "envhost p50",
        "envhost p95",
        "floor p50",
        "floor p95",
        "p50 x",
        "p95 x"
    );
    for workload in &WORKLOADS {
        let rounds = rounds_override.unwrap_or(workload.rounds);
        let mut host_times = Vec::with_capacity(rounds);
        let mut floor_times = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let (elapsed, _) = match workload.yield_ms {
                None => envhost.command("python", workload.code),
                Some(yield_ms) => envhost.round_trip(&serde_json::json!({
                    "type": "command", "environment": "python",
                    "command": workload.code, "yield_ms": yield_ms,
                })),
            };
            host_times.push(elapsed);
            let (elapsed, _) = floor.round_trip(workload.code);
            floor_times.push(elapsed);
        }
        let through_host = summarize(&host_times);
        let through_floor = summarize(&floor_times);
        let (host_p50, host_p95) = (through_host.median, through_host.p95);
        let (floor_p50, floor_p95) = (through_floor.median, through_floor.p95);
        let name = match workload.yield_ms {
            None => workload.code.to_owned(),
            Some(_) => format!("{}, yield_ms", workload.code),
        };
        println!(
            "{:<20} {:>7} {:>10.3}ms {:>10.3}ms {:>10.3}ms {:>10.3}ms {:>7.2}x {:>7.2}x",
            name,
            rounds,
            millis(host_p50),
            millis(host_p95),
            millis(floor_p50),
            millis(floor_p95),
            millis(host_p50) / millis(floor_p50),
            millis(host_p95) / millis(floor_p95),
        );
    }

    // `wait` on a command that yielded and has finished since: what reading
    // the end of a long command costs, beside the same run's plain round
    // trip. A command that ends before it yields is skipped.
    let rounds = rounds_override.unwrap_or(300);
    let mut wait_times = Vec::with_capacity(rounds);
    let mut plain_times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let (_, line) = envhost.round_trip(&serde_json::json!({
            "type": "command", "environment": "python",
            "command": "import time\ntime.sleep(0.02)", "yield_ms": 1,
        }));
        if !line.contains("\"running\":true") {
            continue;
        }
        std::thread::sleep(Duration::from_millis(40));
        let (elapsed, line) = envhost.round_trip(&serde_json::json!({
            "type": "wait", "environment": "python", "timeout_ms": 10_000,
        }));
        assert!(line.contains("\"success\":true"), "wait failed: {line}");
        assert!(!line.contains("\"running\":true"), "still running: {line}");
        wait_times.push(elapsed);
        // After the same pause, so that both start from an idle machine.
        std::thread::sleep(Duration::from_millis(40));
        plain_times.push(envhost.command("python", "x = 1").0);
    }
    if wait_times.is_empty() {
        println!("wait, finished: every command ended before it could yield; nothing measured");
    } else {
        let waits = summarize(&wait_times);
        let plain = summarize(&plain_times);
        println!(
            "{:<20} {:>7} {:>10.3}ms {:>10.3}ms {:>10.3}ms {:>10.3}ms {:>7.2}x {:>7.2}x   \
             (beside envhost's own `x = 1`)",
            "wait, finished",
            wait_times.len(),
            millis(waits.median),
            millis(waits.p95),
            millis(plain.median),
            millis(plain.p95),
            millis(waits.median) / millis(plain.median),
            millis(waits.p95) / millis(plain.p95),
        );
    }

    // How much of envhost's time is the protocol and the screen alone.
    let rounds = rounds_override.unwrap_or(1000);
    let screen_times: Vec<Duration> = (0..rounds).map(|_| envhost.screen()).collect();
    let screens = summarize(&screen_times);
    println!(
        "{:<20} {:>7} {:>10.3}ms {:>10.3}ms   (envhost screen request alone, no python)",
        "screen only",
        rounds,
        millis(screens.median),
        millis(screens.p95),
    );
    envhost.stop();
    floor.stop();
    session_state(rounds_override.unwrap_or(500));
}

/// The cost of recording the session: the same code through a host that
/// records it (the default) and one started with `--no-session-state`,
/// interleaved. `x = 1` re-pickles `x` (it is named) and finds the state
/// unchanged; `n += 1` changes it every time (the state file is rewritten
/// and flushed to disk).
fn session_state(rounds: usize) {
    let on_project = tempfile::tempdir().expect("temporary project");
    let off_project = tempfile::tempdir().expect("temporary project");
    let mut on = Serve::start(on_project.path(), &[]);
    let mut off = Serve::start(off_project.path(), &["--no-session-state"]);
    for host in [&mut on, &mut off] {
        host.command("python", "import os\nn = 0\nx = 1");
    }
    println!("session recording, {rounds} rounds each (median / p95)");
    for code in ["x = 1", "n += 1"] {
        let mut with = Vec::with_capacity(rounds);
        let mut without = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            with.push(on.command("python", code).0);
            without.push(off.command("python", code).0);
        }
        let (with, without) = (summarize(&with), summarize(&without));
        println!(
            "{:<20} on {:>8.3}ms {:>8.3}ms  off {:>8.3}ms {:>8.3}ms  {:>6.2}x {:>6.2}x",
            code,
            millis(with.median),
            millis(with.p95),
            millis(without.median),
            millis(without.p95),
            millis(with.median) / millis(without.median),
            millis(with.p95) / millis(without.p95),
        );
    }
    on.stop();
    off.stop();
}
