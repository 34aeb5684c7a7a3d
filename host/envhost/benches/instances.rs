//! The round trip with several shells open: `true` in the default bash of
//! a host with eight live named instances (`bash:i1` … `bash:i8`, each with
//! a section on every screen) against a host with none, and `true` in one
//! of the instances against the same host's default; interleaved, so that
//! machine noise hits all alike. Prints medians, p95 and ratios; asserts
//! nothing.
//!
//! `cargo bench --bench instances` (`--profile dev` for a quick check).
//! `ENVHOST_BENCH_ITERATIONS` sets the iterations (default 1000).

mod support;

use std::time::Duration;

use support::{Serve, micros, summarize};

const WARM_UP: usize = 50;
const INSTANCES: usize = 8;

fn iterations() -> usize {
    std::env::var("ENVHOST_BENCH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--test" || a == "--list");
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let n = if quick { 30 } else { iterations() };
    let one_project = tempfile::tempdir().expect("project dir");
    let many_project = tempfile::tempdir().expect("project dir");
    let mut one = Serve::start(one_project.path(), &[]);
    let mut many = Serve::start(many_project.path(), &[]);
    for index in 1..=INSTANCES {
        let (_, line) = many.command(&format!("bash:i{index}"), "cd /tmp");
        assert!(
            line.contains("\"success\":true"),
            "opening bash:i{index}: {line}"
        );
    }
    let (_, line) = many.command("bash", "true");
    assert!(
        line.contains(&format!("\"bash:i{INSTANCES}\"")),
        "the instances' sections are on the screen: {line}"
    );
    let screen_bytes = (one.command("bash", "true").1.len(), line.len());
    for _ in 0..WARM_UP {
        one.command("bash", "true");
        many.command("bash", "true");
        many.command("bash:i1", "true");
    }
    let mut alone = Vec::with_capacity(n);
    let mut beside = Vec::with_capacity(n);
    let mut inside = Vec::with_capacity(n);
    for _ in 0..n {
        alone.push(one.command("bash", "true").0);
        beside.push(many.command("bash", "true").0);
        inside.push(many.command("bash:i1", "true").0);
    }
    let base = summarize(&alone);
    println!(
        "`true`, {n} iterations each, against a host with no instances (median / p95, microseconds)"
    );
    let row = |name: &str, times: &[Duration]| {
        let stats = summarize(times);
        println!(
            "{:<44} {:>9.1} {:>9.1} {:>8.2}x {:>8.2}x",
            name,
            micros(stats.median),
            micros(stats.p95),
            micros(stats.median) / micros(base.median),
            micros(stats.p95) / micros(base.p95),
        );
    };
    row("bash, no instances", &alone);
    row("bash, eight live instances", &beside);
    row("bash:i1, eight live instances", &inside);
    println!(
        "(a response line is {} bytes with no instances, {} with eight)",
        screen_bytes.0, screen_bytes.1
    );
    one.stop();
    many.stop();
}
