//! Bash round trip: envhost against the floor of a raw bash over pipes.
//!
//! For `true` and `echo hello`, it times the full NDJSON round trip through
//! `envhost serve` (request line in, response line with the screen out) and
//! the same command sent to a plain `bash --norc --noprofile` over pipes
//! followed by a sentinel echo (the cheapest possible way to know a command
//! ended: the floor), and prints medians, p95 and their ratio. For context
//! it also times a bare bash in a pseudo-terminal whose `PROMPT_COMMAND`
//! prints a fixed marker (no envhost at all): the cost of the terminal
//! itself, which on a loaded machine grows with the kernel's work queue
//! latency. Then it times 100 MB of output through envhost (and through the
//! raw pipe) and reports the host's peak memory (VmHWM). Before that, against
//! the same run's plain `true`: `true` with `yield_ms` (it ends long before)
//! and `wait` on a command that yielded and has ended since.
//!
//! `cargo bench --bench bash_roundtrip` (add `--profile dev` for a quick
//! check; the numbers that count are from the release profile).
//! `ENVHOST_BENCH_ITERATIONS` sets the iterations per command (default 2000).
//! `ENVHOST_BENCH_BASELINE=<another envhost binary>` first times that
//! build against this one and prints this build's ratio to it (how a change
//! to the round trip is measured before and after); `--baseline-only` after
//! `--` stops there. The two run in alternating blocks, one at a time:
//! interleaving them command by command was measured to favour one side by
//! up to 15%, the work one host leaves behind after its answer (its shell
//! finishing its prompt code, the terminal's kernel worker) falling into
//! the other's time.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use support::{Serve, micros, summarize};

const WARM_UP: usize = 100;
const BIG_OUTPUT_BYTES: u64 = 100_000_000;

fn iterations() -> usize {
    std::env::var("ENVHOST_BENCH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

/// bash over pipes, a sentinel echo after each command.
struct RawBash {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    sequence: u64,
    line: String,
}

impl RawBash {
    fn start() -> RawBash {
        let mut child = Command::new("bash")
            .args(["--norc", "--noprofile"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start bash");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        RawBash {
            child,
            stdin,
            stdout,
            sequence: 0,
            line: String::new(),
        }
    }

    fn run(&mut self, command: &str) -> u64 {
        self.sequence += 1;
        let sentinel = format!("__SENTINEL_{}__", self.sequence);
        writeln!(self.stdin, "{command}\necho {sentinel} $?").expect("write");
        self.stdin.flush().expect("flush");
        let mut bytes = 0;
        loop {
            self.line.clear();
            let read = self.stdout.read_line(&mut self.line).expect("read");
            assert!(read > 0, "bash ended");
            if self.line.starts_with(&sentinel) {
                return bytes;
            }
            bytes += read as u64;
        }
    }

    fn stop(mut self) {
        drop(self.stdin);
        let _ = self.child.wait();
    }
}

/// bash in a pseudo-terminal, echo off, a marker printed before each prompt.
struct RawPty {
    _child: Box<dyn portable_pty::Child + Send + Sync>,
    writer: Box<dyn Write + Send>,
    reader: Box<dyn std::io::Read + Send>,
    pending: Vec<u8>,
}

const PTY_MARKER: &[u8] = b"\x1b]6973;floor\x07";

impl RawPty {
    fn start() -> RawPty {
        use portable_pty::{CommandBuilder, PtySize, native_pty_system};
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 40,
                cols: 120,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("openpty");
        if let Some(fd) = pair.master.as_raw_fd() {
            // SAFETY: the master is alive for this call.
            let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
            let mut mode = nix::sys::termios::tcgetattr(fd).expect("tcgetattr");
            mode.local_flags.remove(nix::sys::termios::LocalFlags::ECHO);
            nix::sys::termios::tcsetattr(fd, nix::sys::termios::SetArg::TCSANOW, &mode)
                .expect("tcsetattr");
        }
        let mut command = CommandBuilder::new("bash");
        command.args(["--norc", "--noprofile", "--noediting", "-i"]);
        command.env("PS1", "");
        command.env("PROMPT_COMMAND", "printf '\\e]6973;floor\\a'");
        let child = pair.slave.spawn_command(command).expect("spawn bash");
        let reader = pair.master.try_clone_reader().expect("reader");
        let writer = pair.master.take_writer().expect("writer");
        std::mem::forget(pair.master); // kept open for the bench's lifetime
        let mut pty = RawPty {
            _child: child,
            writer,
            reader,
            pending: Vec::new(),
        };
        pty.wait_marker();
        pty
    }

    fn wait_marker(&mut self) {
        let mut buffer = [0u8; 65536];
        loop {
            if let Some(at) = self
                .pending
                .windows(PTY_MARKER.len())
                .position(|w| w == PTY_MARKER)
            {
                self.pending.drain(..at + PTY_MARKER.len());
                return;
            }
            let count = self.reader.read(&mut buffer).expect("read pty");
            assert!(count > 0, "the pty closed");
            self.pending.extend_from_slice(&buffer[..count]);
        }
    }

    fn run(&mut self, command: &str) {
        writeln!(self.writer, "{command}").expect("write");
        self.wait_marker();
    }
}

/// Requests about commands that may yield, against the same run's plain
/// `true`: `true` sent with `yield_ms` (it ends long before), and `wait` on
/// a command that yielded and has ended since (fewer iterations: each
/// waits for a command to yield and end first).
fn yielding(envhost: &mut Serve, n: usize) {
    let plain = serde_json::json!({"type": "command", "environment": "bash", "command": "true"});
    let early = serde_json::json!({
        "type": "command", "environment": "bash", "command": "true", "yield_ms": 10_000
    });
    let started = serde_json::json!({
        "type": "command", "environment": "bash", "command": "sleep 0.01", "yield_ms": 1
    });
    let wait = serde_json::json!({"type": "wait", "environment": "bash", "timeout_ms": 10_000});
    let mut through_plain = Vec::with_capacity(n);
    let mut through_early = Vec::with_capacity(n);
    let mut through_wait = Vec::new();
    let mut yields = true;
    for i in 0..n {
        through_plain.push(envhost.round_trip(&plain).0);
        let (took, line) = envhost.round_trip(&early);
        assert!(
            !line.contains("\"running\":true"),
            "true with yield_ms: {line}"
        );
        through_early.push(took);
        if yields && i % 10 == 0 {
            let (_, line) = envhost.round_trip(&started);
            yields = line.contains("\"running\":true");
            if yields {
                std::thread::sleep(std::time::Duration::from_millis(30));
                let (took, line) = envhost.round_trip(&wait);
                assert!(!line.contains("\"running\":true"), "wait: {line}");
                through_wait.push(took);
            }
        }
    }
    let plain = summarize(&through_plain);
    println!(
        "requests that may yield, against the same run's plain `true` (median / p95, microseconds)"
    );
    let row = |name: &str, times: &[std::time::Duration]| {
        let stats = summarize(times);
        println!(
            "{:<34} {:>9.1} {:>9.1} {:>8.2}x {:>8.2}x",
            name,
            micros(stats.median),
            micros(stats.p95),
            micros(stats.median) / micros(plain.median),
            micros(stats.p95) / micros(plain.p95),
        );
    };
    row("true", &through_plain);
    row("true with yield_ms (ends early)", &through_early);
    if through_wait.is_empty() {
        println!(
            "wait on a command that ended: not measured (bash answered `sleep 0.01` with yield_ms 1 without yielding)"
        );
    } else {
        row(
            &format!("wait on a command that ended ({})", through_wait.len()),
            &through_wait,
        );
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing
    // useful either way: always run, quickly when only checked.
    let quick = std::env::args().any(|a| a == "--test" || a == "--list");
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let n = if quick { 50 } else { iterations() };
    let project = tempfile::tempdir().expect("project dir");
    let mut envhost = Serve::start(project.path(), &["--output-cap", "128KiB"]);
    let mut raw = RawBash::start();
    let mut pty = RawPty::start();
    if let Some(binary) = support::baseline_binary() {
        support::against_baseline(&binary, &[("bash", "true"), ("bash", "echo hello")], n);
        if std::env::args().any(|a| a == "--baseline-only") {
            envhost.stop();
            raw.stop();
            return;
        }
    }
    for _ in 0..WARM_UP {
        envhost.command("bash", "true");
        raw.run("true");
        pty.run("true");
    }

    println!("bash round trip, {n} iterations each (median / p95, microseconds)");
    println!(
        "{:<12} {:>11} {:>11} {:>9} {:>9} {:>9} {:>9} {:>11} {:>11}",
        "command",
        "envhost p50",
        "envhost p95",
        "floor p50",
        "floor p95",
        "ratio p50",
        "ratio p95",
        "bare pty p50",
        "bare pty p95"
    );
    let mut response_bytes = 0;
    for command in ["true", "echo hello"] {
        let mut through_host = Vec::with_capacity(n);
        let mut through_pipe = Vec::with_capacity(n);
        let mut through_pty = Vec::with_capacity(n);
        // Interleaved, so that machine noise hits all alike.
        for _ in 0..n {
            let (took, line) = envhost.command("bash", command);
            response_bytes = line.len();
            through_host.push(took);
            let started = Instant::now();
            raw.run(command);
            through_pipe.push(started.elapsed());
            let started = Instant::now();
            pty.run(command);
            through_pty.push(started.elapsed());
        }
        let host = summarize(&through_host);
        let pipe = summarize(&through_pipe);
        let bare = summarize(&through_pty);
        println!(
            "{:<12} {:>11.1} {:>11.1} {:>9.1} {:>9.1} {:>8.2}x {:>8.2}x {:>11.1} {:>11.1}",
            command,
            micros(host.median),
            micros(host.p95),
            micros(pipe.median),
            micros(pipe.p95),
            micros(host.median) / micros(pipe.median),
            micros(host.p95) / micros(pipe.p95),
            micros(bare.median),
            micros(bare.p95),
        );
    }
    println!("(an envhost response line, screen included, is {response_bytes} bytes)");
    yielding(&mut envhost, n);

    let big = if quick {
        BIG_OUTPUT_BYTES / 100
    } else {
        BIG_OUTPUT_BYTES
    };
    let command = format!("yes {} | head -c {big}", "y".repeat(99));
    let memory_before = envhost.peak_memory_kib();
    let (host_time, _) = envhost.command("bash", &command);
    let memory_after = envhost.peak_memory_kib();
    let started = Instant::now();
    let piped = raw.run(&command);
    let pipe_time = started.elapsed();
    assert_eq!(piped, big);
    println!(
        "{} MB of output: envhost {:.2} s ({:.0} MB/s), raw pipe {:.2} s; host peak memory (VmHWM) {:.1} MiB before, {:.1} MiB after",
        big / 1_000_000,
        host_time.as_secs_f64(),
        big as f64 / 1e6 / host_time.as_secs_f64(),
        pipe_time.as_secs_f64(),
        memory_before as f64 / 1024.0,
        memory_after as f64 / 1024.0,
    );
    envhost.stop();
    raw.stop();
    session_state(n);
}

/// The cost of recording the session: the same commands through a host
/// that records it (the default) and one started with
/// `--no-session-state`, interleaved. `true` runs no dump (it cannot
/// change the shell); `cd .` makes the prompt dump the shell's state but
/// the state stays the same (nothing is written); `x=$RANDOM` changes it
/// every time (the state file is rewritten and flushed to disk each time).
fn session_state(n: usize) {
    let on_project = tempfile::tempdir().expect("project dir");
    let off_project = tempfile::tempdir().expect("project dir");
    let mut on = Serve::start(on_project.path(), &[]);
    let mut off = Serve::start(off_project.path(), &["--no-session-state"]);
    for _ in 0..WARM_UP {
        on.command("bash", "true");
        off.command("bash", "true");
    }
    println!("session recording, {n} iterations each (median / p95, microseconds)");
    println!(
        "{:<12} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9}",
        "command", "on p50", "on p95", "off p50", "off p95", "ratio p50", "ratio p95"
    );
    for command in ["true", "cd .", "x=$RANDOM"] {
        let mut with = Vec::with_capacity(n);
        let mut without = Vec::with_capacity(n);
        for _ in 0..n {
            with.push(on.command("bash", command).0);
            without.push(off.command("bash", command).0);
        }
        let (with, without) = (summarize(&with), summarize(&without));
        println!(
            "{:<12} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>8.2}x {:>8.2}x",
            command,
            micros(with.median),
            micros(with.p95),
            micros(without.median),
            micros(without.p95),
            micros(with.median) / micros(without.median),
            micros(with.p95) / micros(without.p95),
        );
    }
    on.stop();
    off.stop();
}
