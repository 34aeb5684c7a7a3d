//! Plugin performance, in one run (not a test: it prints numbers).
//!
//! - Host start with 0, 1 and 20 plugins, cold (empty compiled-code cache)
//!   and warm (cached): the real `envhost serve`, from spawn to its answer
//!   to the first `{"type":"screen"}`. The 20 plugins are 20 distinct
//!   components (the timer with a different custom section each), so the
//!   cold start really compiles 20 times.
//! - Per-call cost of `handle-command` on the timer: the raw wasmtime call
//!   (generated bindings, nothing else) beside the whole host path
//!   (`PluginEnvironment::handle_command`: help routing, time limit, output
//!   capture), and the difference, which is the host's overhead.
//! - Screen cost with 20 plugins (`Orchestrator::screen`, help rendering
//!   included).
//!
//! Needs the guests built: `scripts/build-plugins`. Validate with
//! `cargo bench --profile dev --bench plugins`; real numbers come from the
//! release profile (`cargo bench --bench plugins`).

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use envhost_core::{CancelFlag, CommandContext};
use envhost_plugin::bench::RawPlugin;
use envhost_runtime::{Host, Settings, Stopped};
use support::{
    built_plugin, fmt_ms, hosted_plugins, per_call_ns, profile, summarize, time_to_first_screen,
};

const START_RUNS: usize = 5;
const CALLS: usize = 100_000;
const SCREENS: usize = 2_000;

fn main() {
    let timer = built_plugin("wasm32-wasip2/wasm-release/timer.wasm");
    let bytes = std::fs::read(&timer).expect("read timer.wasm");
    println!("envhost plugin bench ({} profile)", profile());
    println!(
        "timer.wasm: {} bytes; {} runs per start measurement (median, min)",
        bytes.len(),
        START_RUNS
    );
    println!();
    println!(
        "{:<44} {:>12} {:>12}",
        "host start (spawn → first screen)", "median", "min"
    );
    for count in [0usize, 1, 20] {
        let (cold, warm) = start_times(&bytes, count);
        println!(
            "{:<44} {:>12} {:>12}",
            format!("  {count} plugins, cold cache"),
            fmt_ms(summarize(&cold).median),
            fmt_ms(summarize(&cold).min)
        );
        println!(
            "{:<44} {:>12} {:>12}",
            format!("  {count} plugins, warm cache"),
            fmt_ms(summarize(&warm).median),
            fmt_ms(summarize(&warm).min)
        );
    }
    println!();
    calls(&bytes);
    println!();
    screens(&bytes);
}

/// The timer with a custom section naming `index`: a distinct component
/// (distinct hash, distinct cache entry) that behaves the same.
fn variant(bytes: &[u8], index: usize) -> Vec<u8> {
    let name = b"envhost-bench";
    let payload = format!("variant {index}");
    let mut body = Vec::new();
    leb128(&mut body, name.len() as u64);
    body.extend_from_slice(name);
    body.extend_from_slice(payload.as_bytes());
    let mut out = bytes.to_vec();
    out.push(0); // custom section
    leb128(&mut out, body.len() as u64);
    out.extend_from_slice(&body);
    out
}

fn leb128(out: &mut Vec<u8>, mut value: u64) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn project_with(bytes: &[u8], count: usize) -> tempfile::TempDir {
    let project = tempfile::tempdir().expect("project");
    std::fs::create_dir_all(project.path().join("env")).expect("env/");
    for index in 0..count {
        std::fs::write(
            project.path().join(format!("env/timer{index}.wasm")),
            variant(bytes, index),
        )
        .expect("write plugin");
    }
    project
}

/// Cold and warm start times for `count` plugins.
fn start_times(bytes: &[u8], count: usize) -> (Vec<Duration>, Vec<Duration>) {
    let project = project_with(bytes, count);
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    for _ in 0..START_RUNS {
        let cache = tempfile::tempdir().expect("cache");
        cold.push(start_once(project.path(), cache.path(), count));
        warm.push(start_once(project.path(), cache.path(), count));
    }
    (cold, warm)
}

fn start_once(project: &Path, cache: &Path, count: usize) -> Duration {
    let (took, line) = time_to_first_screen(project, cache);
    let sections = line.matches("\"max_lines\"").count();
    assert!(
        sections >= count,
        "expected {count} plugin sections: {line}"
    );
    took
}

fn calls(bytes: &[u8]) {
    // The raw call: generated bindings on a store, nothing of the host's.
    let project = project_with(bytes, 0);
    let path = project.path().join("env/timer.wasm");
    std::fs::write(&path, bytes).expect("write");
    let mut raw_plugin =
        RawPlugin::load("timer", &path, project.path(), None).expect("load the timer");
    raw_plugin.describe().expect("describe");
    let raw = per_call_ns(CALLS, || {
        raw_plugin.handle_command("reset").expect("raw call");
    });
    let raw_screen = per_call_ns(CALLS, || {
        raw_plugin.get_screen().expect("raw screen");
    });

    // The host's path: the loaded plugin environment, as the orchestrator
    // calls it.
    let mut environment = hosted_plugins(project.path(), None)
        .pop()
        .expect("the timer loads")
        .environment;
    let context = CommandContext::new(Duration::from_secs(120), CancelFlag::new());
    let hosted = per_call_ns(CALLS, || {
        let response = environment
            .handle_command("reset", &context)
            .expect("host call");
        assert!(response.success);
    });
    let hosted_screen = per_call_ns(CALLS, || {
        environment.screen().expect("screen");
    });

    println!("{:<44} {:>12}", "per call (timer, 100k calls)", "ns/call");
    println!(
        "{:<44} {:>12.0}",
        "  handle-command, raw wasmtime call", raw
    );
    println!(
        "{:<44} {:>12.0}",
        "  handle-command, through the host", hosted
    );
    println!(
        "{:<44} {:>12.0}   (target < 5000 ns; ratio host/raw {:.2})",
        "  host overhead",
        hosted - raw,
        hosted / raw
    );
    println!(
        "{:<44} {:>12.0}",
        "  get-screen, raw wasmtime call", raw_screen
    );
    println!(
        "{:<44} {:>12.0}",
        "  screen, through the host (help rendered)", hosted_screen
    );
}

fn screens(bytes: &[u8]) {
    let project = project_with(bytes, 20);
    // The host a session starts, with the 20 plugins and nothing else.
    let mut settings = Settings::new(project.path().to_owned(), "bench", Duration::from_secs(120));
    settings.builtins = false;
    settings.plugins.cache = envhost_plugin::CodeCache::Disabled;
    settings.plugin_output_to_stderr = false;
    let host = Host::start(settings).expect("start the host");
    assert_eq!(host.report().plugins.len(), 20, "{:?}", host.report());
    let orchestrator = host.orchestrator();
    // Before the first command the screen also holds the host's first
    // notice (where commands run), as a session's first screen does.
    let sections = orchestrator.screen().len();
    assert!(sections >= 20, "{sections} sections");
    for _ in 0..100 {
        orchestrator.screen();
    }
    let started = Instant::now();
    for _ in 0..SCREENS {
        let screen = orchestrator.screen();
        assert_eq!(screen.len(), sections);
    }
    let per_screen = started.elapsed() / SCREENS as u32;
    println!("{:<44} {:>12}", "screen with 20 plugins", "µs/screen");
    println!(
        "{:<44} {:>12.1}",
        "  Orchestrator::screen (20 timer sections)",
        per_screen.as_secs_f64() * 1e6
    );
    host.stop(Stopped::Done("measured".to_owned()));
}
