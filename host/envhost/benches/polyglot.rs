//! Plugins in three languages side by side, in one run (not a test: it
//! prints numbers): the Rust `timer`, the Python `tasks` (componentize-py)
//! and the JavaScript `regex` (componentize-js).
//!
//! For each:
//! - size of the component;
//! - host start, cold (empty compiled-code cache) and warm (cached): the
//!   real `envhost serve` with that one plugin, from spawn to its answer to
//!   the first `{"type":"screen"}`. Cold twice: as the host does it (a
//!   plugin over 1 MiB starts on Winch's baseline code while Cranelift
//!   compiles for the cache in the background), and with Cranelift's code
//!   compiled at once (`--plugin-baseline-above 64MiB`, the host before
//!   tiering), with their ratio;
//! - a fresh instance (`PluginPre::instantiate` + `describe`): what a
//!   restart after a trap costs;
//! - per-call cost of `handle-command` on baseline (Winch) code, raw, and
//!   its ratio to the optimised code's;
//! - per-call cost of `handle-command` and `get-screen`: the raw wasmtime
//!   call (generated bindings, nothing else) beside the host's path
//!   (`PluginEnvironment`: help routing, time limit, output capture, help
//!   rendering; a screen asked for again with no call in between is the
//!   kept section for a plugin whose screen changes only when called), and
//!   the ratio of the command's to the Rust timer;
//! - what the plugin adds to every other environment's answer: bash `true`
//!   through `envhost serve` with the plugin loaded, beside a host without
//!   it (the floor), in alternating blocks. `tasks` and `regex` say their
//!   screens change only when called (`screen-changes`), so the host does
//!   not ask them after bash's commands; the `timer` shows the time and is
//!   asked every time.
//!
//! Needs the plugins built: `scripts/build-plugins`. Validate with
//! `cargo bench --profile dev --bench polyglot`; real numbers come from the
//! release profile (`cargo bench --bench polyglot`).

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use envhost_core::{CancelFlag, CommandContext};
use envhost_plugin::bench::RawPlugin;
use support::{
    fmt_ms, hosted_plugins, per_call_ns, profile, summarize, target_dir, time_to_first_screen_with,
};

/// Cold starts compile 12-18 MB components for seconds each: few runs.
const COLD_RUNS: usize = 2;
const WARM_RUNS: usize = 7;
const INSTANCES: usize = 20;
const CALLS: usize = 20_000;
/// bash `true` round trips: blocks of `BASH_BLOCK` calls, alternating
/// between the host with the plugin and the one without.
const BASH_BLOCKS: usize = 20;
const BASH_BLOCK: usize = 25;

struct Subject {
    language: &'static str,
    name: &'static str,
    path: PathBuf,
    /// Commands that leave the state as it is, run in a loop.
    setup: &'static [&'static str],
    command: &'static str,
}

struct Measured {
    size: u64,
    cold: Vec<Duration>,
    cold_optimised: Vec<Duration>,
    warm: Vec<Duration>,
    instantiate: Duration,
    raw_call: f64,
    raw_call_baseline: f64,
    host_call: f64,
    raw_screen: f64,
    host_screen: f64,
    /// Median bash `true` round trip with the plugin loaded, and without.
    bash_with: Duration,
    bash_without: Duration,
}

fn main() {
    let target = target_dir();
    let subjects = [
        Subject {
            language: "Rust",
            name: "timer",
            path: target.join("wasm32-wasip2/wasm-release/timer.wasm"),
            setup: &[],
            command: "reset",
        },
        Subject {
            language: "Python",
            name: "tasks",
            path: target.join("polyglot/tasks.wasm"),
            setup: &[
                "add Read the spec\nWrite the parser",
                "note 1 see section 4",
            ],
            command: "show 1",
        },
        Subject {
            language: "JavaScript",
            name: "regex",
            path: target.join("polyglot/regex.wasm"),
            setup: &["pattern /(\\d+)-(\\d+)/g", "sample order 12-34 shipped"],
            command: "escape a.b*c",
        },
    ];
    for subject in &subjects {
        if !subject.path.is_file() {
            eprintln!(
                "{} is missing: run `scripts/build-plugins` first (it builds every plugin).",
                subject.path.display()
            );
            std::process::exit(2);
        }
    }
    println!("envhost polyglot plugin bench ({} profile)", profile());
    println!(
        "host start = spawn → answer to the first screen; cold: {COLD_RUNS} runs, warm: {WARM_RUNS} runs (median, min); {CALLS} calls per call measure"
    );
    let measured: Vec<Measured> = subjects.iter().map(measure).collect();
    report(&subjects, &measured);
}

fn measure(subject: &Subject) -> Measured {
    eprintln!("measuring {} ({})...", subject.name, subject.language);
    let bytes = std::fs::read(&subject.path).expect("read the component");
    let project = tempfile::tempdir().expect("project");
    std::fs::create_dir_all(project.path().join("env")).expect("env/");
    std::fs::write(
        project.path().join(format!("env/{}.wasm", subject.name)),
        &bytes,
    )
    .expect("install the plugin");

    let mut cold = Vec::new();
    let mut cold_optimised = Vec::new();
    let cache = tempfile::tempdir().expect("cache");
    for _ in 0..COLD_RUNS {
        let empty = tempfile::tempdir().expect("empty cache");
        cold.push(start_once(project.path(), empty.path(), subject.name, &[]));
        let empty = tempfile::tempdir().expect("empty cache");
        cold_optimised.push(start_once(
            project.path(),
            empty.path(),
            subject.name,
            &["--plugin-baseline-above", "64MiB"],
        ));
    }
    // Fill the warm cache once (`check` compiles optimised code at once; a
    // session that ends at its first screen would stop its background
    // compilation), then time starts that hit it.
    let checked = std::process::Command::new(env!("CARGO_BIN_EXE_envhost"))
        .arg("check")
        .arg("--plugin-cache")
        .arg(cache.path())
        .arg(project.path().join(format!("env/{}.wasm", subject.name)))
        .output()
        .expect("run envhost check");
    assert!(checked.status.success(), "envhost check refused the plugin");
    let warm: Vec<Duration> = (0..WARM_RUNS)
        .map(|_| start_once(project.path(), cache.path(), subject.name, &[]))
        .collect();

    // The raw calls: generated bindings on a store, nothing of the host's;
    // nothing granted (the sandbox's defaults, as for a plugin without an
    // entry in env/envhost.toml).
    let file = project.path().join(format!("env/{}.wasm", subject.name));
    let mut raw_plugin = RawPlugin::load(subject.name, &file, project.path(), Some(cache.path()))
        .expect("load the plugin");
    let mut instantiations = Vec::new();
    for _ in 0..INSTANCES {
        let started = Instant::now();
        raw_plugin
            .instantiate_and_describe()
            .expect("instantiate and describe");
        instantiations.push(started.elapsed());
    }
    raw_plugin.describe().expect("describe");
    for command in subject.setup {
        let (output, success) = raw_plugin.handle_command(command).expect("setup call");
        assert!(success, "{command}: {output}");
    }
    let raw_call = per_call_ns(CALLS, || {
        let (_, success) = raw_plugin
            .handle_command(subject.command)
            .expect("raw call");
        assert!(success);
    });
    let raw_screen = per_call_ns(CALLS, || {
        raw_plugin.get_screen().expect("raw screen");
    });
    // The same raw call on baseline (Winch) code: what a session's first
    // start runs until its optimised code is compiled.
    let empty = tempfile::tempdir().expect("empty cache");
    let mut baseline = RawPlugin::load_baseline(subject.name, &file, project.path(), empty.path())
        .expect("load the plugin on baseline code");
    baseline.describe().expect("describe");
    for command in subject.setup {
        let (output, success) = baseline.handle_command(command).expect("setup call");
        assert!(success, "{command}: {output}");
    }
    let raw_call_baseline = per_call_ns(CALLS, || {
        let (_, success) = baseline.handle_command(subject.command).expect("raw call");
        assert!(success);
    });

    // The host's path: the loaded plugin environment, as the orchestrator
    // calls it.
    let mut environment = hosted_plugins(project.path(), Some(cache.path()))
        .pop()
        .expect("the plugin loads")
        .environment;
    let context = CommandContext::new(Duration::from_secs(120), CancelFlag::new());
    for command in subject.setup {
        let response = environment
            .handle_command(command, &context)
            .expect("setup");
        assert!(response.success, "{command}: {}", response.output);
    }
    let host_call = per_call_ns(CALLS, || {
        let response = environment
            .handle_command(subject.command, &context)
            .expect("host call");
        assert!(response.success);
    });
    let host_screen = per_call_ns(CALLS, || {
        environment.screen().expect("screen");
    });

    let (bash_with, bash_without) = bash_beside(project.path(), cache.path());

    Measured {
        size: bytes.len() as u64,
        cold,
        cold_optimised,
        warm,
        instantiate: summarize(&instantiations).median,
        raw_call,
        raw_call_baseline,
        host_call,
        raw_screen,
        host_screen,
        bash_with,
        bash_without,
    }
}

/// Median bash `true` round trips through a host with the project's
/// plugin (its code in `cache`) and through one with no plugin, in
/// alternating blocks.
fn bash_beside(project: &Path, cache: &Path) -> (Duration, Duration) {
    let cache = cache.to_str().expect("a UTF-8 cache path");
    let empty = tempfile::tempdir().expect("a project without plugins");
    let mut hosts = [
        support::Serve::start(project, &["--plugin-cache", cache]),
        support::Serve::start(empty.path(), &["--plugin-cache", cache]),
    ];
    let mut samples = [Vec::new(), Vec::new()];
    for host in &mut hosts {
        for _ in 0..BASH_BLOCK {
            host.command("bash", "true");
        }
    }
    for block in 0..BASH_BLOCKS {
        for turn in 0..2 {
            let which = (block + turn) % 2;
            for _ in 0..BASH_BLOCK {
                samples[which].push(hosts[which].command("bash", "true").0);
            }
        }
    }
    for host in hosts {
        host.stop();
    }
    (summarize(&samples[0]).median, summarize(&samples[1]).median)
}

fn start_once(project: &Path, cache: &Path, name: &str, extra: &[&str]) -> Duration {
    let (took, line) = time_to_first_screen_with(project, cache, extra);
    assert!(
        line.contains(&format!("\"{name}\":{{\"content\"")),
        "no {name} section: {line}"
    );
    took
}

fn report(subjects: &[Subject], measured: &[Measured]) {
    let header = |title: &str| {
        print!("\n{title:<36}");
        for subject in subjects {
            print!(
                " {:>20}",
                format!("{} ({})", subject.name, subject.language)
            );
        }
        println!();
    };
    let row = |label: &str, cell: &dyn Fn(&Measured) -> String| {
        print!("{label:<36}");
        for m in measured {
            print!(" {:>20}", cell(m));
        }
        println!();
    };
    let rust = &measured[0];

    header("load");
    row("  component size", &|m| {
        format!("{:.1} MiB", m.size as f64 / (1 << 20) as f64)
    });
    row("  host start, cold cache (median)", &|m| {
        fmt_ms(summarize(&m.cold).median)
    });
    row("  host start, cold cache (min)", &|m| {
        fmt_ms(summarize(&m.cold).min)
    });
    row("  cold, optimised at once (median)", &|m| {
        fmt_ms(summarize(&m.cold_optimised).median)
    });
    row("  cold: tiered / optimised at once", &|m| {
        ratio(
            summarize(&m.cold).median.as_secs_f64(),
            summarize(&m.cold_optimised).median.as_secs_f64(),
        )
    });
    row("  host start, warm cache (median)", &|m| {
        fmt_ms(summarize(&m.warm).median)
    });
    row("  host start, warm cache (min)", &|m| {
        fmt_ms(summarize(&m.warm).min)
    });
    row("  fresh instance + describe (median)", &|m| {
        format!("{:.3} ms", m.instantiate.as_secs_f64() * 1e3)
    });

    header("per call (ns)");
    row("  handle-command, raw wasmtime call", &|m| {
        format!("{:.0}", m.raw_call)
    });
    row("  handle-command, raw, baseline code", &|m| {
        format!("{:.0}", m.raw_call_baseline)
    });
    row("  baseline / optimised (raw call)", &|m| {
        ratio(m.raw_call_baseline, m.raw_call)
    });
    row("  handle-command, through the host", &|m| {
        format!("{:.0}", m.host_call)
    });
    row("  host overhead (host - raw)", &|m| {
        format!("{:.0}", m.host_call - m.raw_call)
    });
    row("  get-screen, raw wasmtime call", &|m| {
        format!("{:.0}", m.raw_screen)
    });
    // A plugin that said its screen changes only when called is not asked
    // again until the next call into it: this is then the kept section.
    row("  screen, through the host, again", &|m| {
        format!("{:.0}", m.host_screen)
    });

    header("bash `true` beside it (median)");
    row("  with the plugin loaded", &|m| {
        format!("{:.0} µs", m.bash_with.as_secs_f64() * 1e6)
    });
    row("  without it (floor, same run)", &|m| {
        format!("{:.0} µs", m.bash_without.as_secs_f64() * 1e6)
    });
    row("  with / without", &|m| {
        format!(
            "{:.2}x",
            m.bash_with.as_secs_f64() / m.bash_without.as_secs_f64()
        )
    });

    header("ratio to the Rust timer");
    row("  warm start", &|m| {
        ratio(
            summarize(&m.warm).median.as_secs_f64(),
            summarize(&rust.warm).median.as_secs_f64(),
        )
    });
    row("  handle-command through the host", &|m| {
        ratio(m.host_call, rust.host_call)
    });
}

fn ratio(value: f64, base: f64) -> String {
    format!("{:.1}x", value / base)
}
