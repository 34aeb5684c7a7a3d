//! Interactive programs through a plugin, beside their floor (not a test:
//! it prints numbers).
//!
//! One command, `select 1;` in sqlite3, three ways:
//!
//! - **raw PTY**: sqlite3 in a pseudo-terminal, a line written and the
//!   terminal read until `sqlite> `: the floor for any PTY-driven program.
//! - **session**: the host's `interactive::Session` alone (send, then wait
//!   for the prompt: ANSI cleaning, echo removal, output capture).
//! - **envhost**: the whole path, the real `envhost serve` with the sqlite
//!   plugin over NDJSON (protocol, orchestrator, wasm call, host import,
//!   screen of every environment); and the same command sent with
//!   `yield_ms`, which runs it on a thread of its own (it ends long before
//!   it would yield).
//!
//! Prints the median and p95 of each and the ratios to the floor. Needs
//! sqlite3 and the plugins (`scripts/build-plugins`). Validate with
//! `cargo bench --profile dev --bench interactive`.

mod support;

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use envhost_process::{AtDeadline, OutputLimits, Prompt, Session, Waited, find_program};
use portable_pty::{CommandBuilder, PtySize, native_pty_system};
use support::{Serve, built_plugin, fmt_us, profile, summarize};

const ROUNDS: usize = 500;
const WARMUP: usize = 20;

fn main() {
    let Ok(sqlite3) = find_program("sqlite3") else {
        eprintln!("sqlite3 is not installed; nothing to measure");
        std::process::exit(2);
    };
    let plugin = built_plugin("wasm32-wasip2/wasm-release/sqlite.wasm");
    println!(
        "envhost interactive bench ({} profile): `select 1;` in sqlite3, {ROUNDS} rounds",
        profile()
    );
    let raw = raw_pty(&sqlite3);
    let session = host_session(&sqlite3);
    let (whole, yielding) = through_envhost(&plugin);
    println!();
    println!("{:<40} {:>10} {:>10} {:>8}", "", "median", "p95", "ratio");
    for (label, times) in [
        ("raw PTY (floor)", &raw),
        ("host session (send + wait)", &session),
        ("envhost serve + sqlite plugin", &whole),
        ("  the same with yield_ms (ends early)", &yielding),
    ] {
        let summary = summarize(times);
        println!(
            "{:<40} {:>10} {:>10} {:>7.1}x",
            label,
            fmt_us(summary.median),
            fmt_us(summary.p95),
            summary.median.as_secs_f64() / summarize(&raw).median.as_secs_f64()
        );
    }
}

fn raw_pty(sqlite3: &Path) -> Vec<Duration> {
    let pair = native_pty_system()
        .openpty(PtySize {
            rows: 1000,
            cols: 500,
            pixel_width: 0,
            pixel_height: 0,
        })
        .expect("pty");
    let mut command = CommandBuilder::new(sqlite3.as_os_str());
    command.arg("-interactive");
    command.env("TERM", "dumb");
    let mut child = pair.slave.spawn_command(command).expect("spawn sqlite3");
    drop(pair.slave);
    let mut reader = pair.master.try_clone_reader().expect("reader");
    let mut writer = pair.master.take_writer().expect("writer");
    let mut pending = Vec::new();
    let mut read_to_prompt = |pending: &mut Vec<u8>| {
        let mut buffer = [0u8; 65536];
        while !pending.ends_with(b"sqlite> ") {
            let n = reader.read(&mut buffer).expect("read");
            assert!(n > 0, "sqlite3 closed its terminal");
            pending.extend_from_slice(&buffer[..n]);
        }
        pending.clear();
    };
    read_to_prompt(&mut pending);
    let mut times = Vec::new();
    for round in 0..WARMUP + ROUNDS {
        let started = Instant::now();
        writer.write_all(b"select 1;\n").expect("write");
        read_to_prompt(&mut pending);
        if round >= WARMUP {
            times.push(started.elapsed());
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    times
}

fn host_session(sqlite3: &Path) -> Vec<Duration> {
    let dir = tempfile::tempdir().expect("dir");
    let limits = OutputLimits::for_project(dir.path());
    let environment = vec![(OsString::from("TERM"), OsString::from("dumb"))];
    let mut session = Session::start(
        "sqlite3",
        sqlite3,
        &["-interactive".to_owned()],
        dir.path(),
        environment,
    )
    .expect("start sqlite3");
    let prompt = Prompt::new("sqlite> ").expect("prompt");
    let far = || Instant::now() + Duration::from_secs(30);
    session
        .wait(
            &prompt,
            far(),
            AtDeadline::Interrupt,
            None,
            &limits,
            "bench",
        )
        .expect("banner");
    let mut times = Vec::new();
    for round in 0..WARMUP + ROUNDS {
        let started = Instant::now();
        session.send("select 1;", true, None, None).expect("send");
        let waited = session
            .wait(
                &prompt,
                far(),
                AtDeadline::Interrupt,
                None,
                &limits,
                "bench",
            )
            .expect("wait");
        assert!(
            matches!(&waited, Waited::Prompt { before, .. } if before == "1\n"),
            "{waited:?}"
        );
        if round >= WARMUP {
            times.push(started.elapsed());
        }
    }
    times
}

/// The whole path, plain and with `yield_ms` (the command then runs on a
/// thread of its own, and ends long before it would yield), interleaved.
fn through_envhost(plugin: &Path) -> (Vec<Duration>, Vec<Duration>) {
    let project = tempfile::tempdir().expect("project");
    std::fs::create_dir_all(project.path().join("env")).expect("env/");
    std::fs::copy(plugin, project.path().join("env/sqlite.wasm")).expect("copy plugin");
    std::fs::write(
        project.path().join("env/envhost.toml"),
        "[plugins.sqlite]\nprograms = [\"sqlite3\"]\n",
    )
    .expect("config");
    let cache = tempfile::tempdir().expect("cache");
    let cache_arg = cache.path().to_str().expect("UTF-8 cache path");
    let mut host = Serve::start(project.path(), &["--plugin-cache", cache_arg]);
    let yielding = serde_json::json!({
        "type": "command", "environment": "sqlite", "command": "select 1;", "yield_ms": 10_000
    });
    let mut plain = Vec::new();
    let mut early = Vec::new();
    for round in 0..WARMUP + ROUNDS {
        let (took, _) = host.command("sqlite", "select 1;");
        let (took_yielding, line) = host.round_trip(&yielding);
        assert!(
            line.contains("\"success\":true") && !line.contains("\"running\":true"),
            "{line}"
        );
        if round >= WARMUP {
            plain.push(took);
            early.push(took_yielding);
        }
    }
    host.stop();
    (plain, early)
}
