//! What every benchmark of the binary needs, once: summary statistics and
//! number formatting (`stats.rs`, shared with the other crates' benches),
//! an NDJSON client for a real `envhost serve`, the start-up timing of a
//! host (spawn to its first screen), and where the build's artifacts are.
//!
//! Benchmarks measure and print; they assert only that what they measure
//! worked (a failed command would make its timing meaningless).

#![allow(dead_code)] // each benchmark uses a different part

mod stats;

pub use stats::*;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// The plugins of `project` loaded as the host loads them (nothing
/// granted, compiled code kept in `cache` if given), asserting that none
/// was refused.
pub fn hosted_plugins(
    project: &Path,
    cache: Option<&Path>,
) -> Vec<envhost_core::LoadedEnvironment> {
    let settings = envhost_plugin::PluginSettings {
        cache: cache.map_or(envhost_plugin::CodeCache::Disabled, |dir| {
            envhost_plugin::CodeCache::Directory(dir.to_owned())
        }),
        ..envhost_plugin::PluginSettings::default()
    };
    let mut plugins = envhost_plugin::load(
        project,
        &settings,
        &envhost_process::OutputLimits::for_project(project),
        &envhost_core::CancelFlag::new(),
        std::sync::Arc::new(envhost_plugin::DiscardSink),
    );
    let loaded = plugins.take_loaded();
    let report = plugins.finish();
    assert!(report.refused.is_empty(), "{:?}", report.refused);
    loaded
        .into_iter()
        .map(|plugin| plugin.environment)
        .collect()
}

/// The workspace's target folder (`CARGO_TARGET_DIR` or `<workspace>/target`).
pub fn target_dir() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("the envhost crate is host/envhost in the workspace");
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|dir| {
            if dir.is_absolute() {
                dir
            } else {
                root.join(dir)
            }
        })
        .unwrap_or_else(|| root.join("target"))
}

/// A built plugin, or a clear exit telling how to build it.
pub fn built_plugin(relative: &str) -> PathBuf {
    let path = target_dir().join(relative);
    if !path.is_file() {
        eprintln!(
            "{} is missing: run `scripts/build-plugins` first (it builds the plugins).",
            path.display()
        );
        std::process::exit(2);
    }
    path
}

/// Another build of envhost to time beside this one, interleaved in the
/// same run (`ENVHOST_BENCH_BASELINE=<path to its binary>`): how a change
/// is measured before and after without the machine's noise of two runs.
pub fn baseline_binary() -> Option<PathBuf> {
    let path = PathBuf::from(std::env::var_os("ENVHOST_BENCH_BASELINE")?);
    if !path.is_file() {
        eprintln!(
            "ENVHOST_BENCH_BASELINE={} is not a file: give the path of another envhost binary.",
            path.display()
        );
        std::process::exit(2);
    }
    Some(path)
}

/// This build against another (`binary`, from [`baseline_binary`]): `n`
/// round trips of each `(environment, command)` through each, printed as
/// medians, p95 and this build's ratio to the other. They run in blocks
/// that alternate between the two (and which goes first), one host busy at
/// a time: interleaving them command by command was measured to favour one
/// side by up to 15% (the work one host leaves behind after its answer, its
/// shell finishing its prompt code or the terminal's kernel worker, falls
/// into the other's time), where the blocks give 1.00x for a build against
/// itself. `ENVHOST_BENCH_ARGS` and `ENVHOST_BENCH_BASELINE_ARGS` add
/// arguments to this build's `serve` and to the other's (a setting one of
/// them lacks, such as `--no-session-state`).
pub fn against_baseline(binary: &Path, commands: &[(&str, &str)], n: usize) {
    const BLOCKS: usize = 20;
    const WARM_UP: usize = 100;
    let baseline_project = tempfile::tempdir().expect("project dir");
    let own_project = tempfile::tempdir().expect("project dir");
    let words = |name: &str| std::env::var(name).unwrap_or_default();
    let (baseline_args, own_args) = (
        words("ENVHOST_BENCH_BASELINE_ARGS"),
        words("ENVHOST_BENCH_ARGS"),
    );
    let mut baseline = Serve::start_binary(
        binary,
        baseline_project.path(),
        &baseline_args.split_whitespace().collect::<Vec<_>>(),
    );
    let mut own = Serve::start(
        own_project.path(),
        &own_args.split_whitespace().collect::<Vec<_>>(),
    );
    for (environment, command) in commands {
        for _ in 0..WARM_UP {
            own.command(environment, command);
            baseline.command(environment, command);
        }
    }
    println!(
        "against the baseline build {} (median / p95, microseconds)",
        binary.display()
    );
    println!(
        "{:<14} {:>11} {:>11} {:>12} {:>12} {:>9} {:>9}",
        "command",
        "envhost p50",
        "envhost p95",
        "baseline p50",
        "baseline p95",
        "ratio p50",
        "ratio p95"
    );
    let per_block = n.div_ceil(BLOCKS);
    for (environment, command) in commands {
        let mut through_own = Vec::with_capacity(n);
        let mut through_baseline = Vec::with_capacity(n);
        for block in 0..BLOCKS {
            for turn in 0..2 {
                let (serve, times) = if (block + turn) % 2 == 0 {
                    (&mut own, &mut through_own)
                } else {
                    (&mut baseline, &mut through_baseline)
                };
                for _ in 0..per_block {
                    times.push(serve.command(environment, command).0);
                }
            }
        }
        let mine = summarize(&through_own);
        let theirs = summarize(&through_baseline);
        println!(
            "{:<14} {:>11.1} {:>11.1} {:>12.1} {:>12.1} {:>8.2}x {:>8.2}x",
            command,
            micros(mine.median),
            micros(mine.p95),
            micros(theirs.median),
            micros(theirs.p95),
            micros(mine.median) / micros(theirs.median),
            micros(mine.p95) / micros(theirs.p95),
        );
    }
    baseline.stop();
    own.stop();
}

/// A running `envhost serve`, driven over NDJSON as an agent would.
pub struct Serve {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    line: String,
}

impl Serve {
    /// `envhost serve` of this build, or of the one named by
    /// `ENVHOST_BENCH_BINARY` (to run a benchmark on an older build).
    pub fn start(project: &Path, extra_args: &[&str]) -> Serve {
        let binary = std::env::var_os("ENVHOST_BENCH_BINARY").map_or_else(
            || PathBuf::from(env!("CARGO_BIN_EXE_envhost")),
            PathBuf::from,
        );
        Serve::start_binary(&binary, project, extra_args)
    }

    /// [`Serve::start`] with another build of envhost (a baseline to
    /// compare with, see [`baseline_binary`]).
    pub fn start_binary(binary: &Path, project: &Path, extra_args: &[&str]) -> Serve {
        let mut child = Command::new(binary)
            .arg("serve")
            .arg("--project")
            .arg(project)
            .args(extra_args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start envhost serve");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Serve {
            child,
            stdin,
            stdout,
            line: String::new(),
        }
    }

    /// Sends one request line and reads the answer line; the time is from
    /// the first byte written to the last byte read.
    pub fn round_trip(&mut self, request: &serde_json::Value) -> (Duration, &str) {
        let mut bytes = serde_json::to_vec(request).expect("request");
        bytes.push(b'\n');
        self.line.clear();
        let stdin = self.stdin.as_mut().expect("stdin open");
        let started = Instant::now();
        stdin.write_all(&bytes).expect("write the request");
        stdin.flush().expect("flush");
        self.stdout
            .read_line(&mut self.line)
            .expect("read the answer");
        (started.elapsed(), &self.line)
    }

    /// Runs a command that must succeed; returns its time and answer line.
    pub fn command(&mut self, environment: &str, command: &str) -> (Duration, &str) {
        let request = serde_json::json!({
            "type": "command", "environment": environment, "command": command
        });
        let (took, line) = self.round_trip(&request);
        assert!(
            line.contains("\"success\":true"),
            "{environment}: {command:?} failed: {line}"
        );
        (took, line)
    }

    /// A `{"type":"screen"}` round trip: protocol and screens, no command.
    pub fn screen(&mut self) -> Duration {
        self.round_trip(&serde_json::json!({"type": "screen"})).0
    }

    /// The host's peak resident memory (VmHWM), in KiB.
    pub fn peak_memory_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the host's /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM")
    }

    pub fn stop(mut self) {
        self.stdin = None;
        let _ = self.child.wait();
    }
}

/// Time from spawning `envhost serve` to having its first screen, with the
/// compiled-plugin cache in `cache`; returns that time and the screen line.
pub fn time_to_first_screen(project: &Path, cache: &Path) -> (Duration, String) {
    time_to_first_screen_with(project, cache, &[])
}

/// [`time_to_first_screen`] with more arguments for `envhost serve`.
pub fn time_to_first_screen_with(
    project: &Path,
    cache: &Path,
    extra: &[&str],
) -> (Duration, String) {
    let started = Instant::now();
    let cache = cache.to_str().expect("UTF-8 cache path");
    let mut args = vec!["--plugin-cache", cache];
    args.extend_from_slice(extra);
    let mut host = Serve::start(project, &args);
    let line = host
        .round_trip(&serde_json::json!({"type": "screen"}))
        .1
        .to_owned();
    let took = started.elapsed();
    host.stop();
    (took, line)
}
