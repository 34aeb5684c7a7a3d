//! Tiered compilation through the real binary: a plugin whose optimised
//! code is not cached starts on baseline code (wasmtime's Winch) and
//! answers at once; its optimised code is compiled in the background,
//! cached, and taken by the plugin's next fresh instance; an endless loop
//! on baseline code is stopped like one on optimised code; a host stopped
//! mid-compilation leaves no entry and no process behind.
//!
//! `--plugin-baseline-above 1` tiers the small Rust fixtures (by default
//! only plugins over 1 MiB are); the mid-compilation test needs a
//! compilation that lasts, so it uses the Python `tasks` plugin (17.5 MB).
//! Times are checked only with generous bounds that prove "it did not
//! hang".

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::{Host, Project, process_alive, wait_until_dead};
use crate::plugins::{host_builder, install};

/// A host on `project` (its own cold cache, a transcript) that tiers every
/// plugin and says what the background compilation did on stderr.
fn tiering_host(project: &Project) -> Host {
    host_builder(project)
        .args(["--plugin-baseline-above", "1", "--verbose"])
        .start(project.path())
}

/// The `environment_loaded` detail of `name`, from the transcript.
fn load_detail(project: &Project, name: &str) -> String {
    project
        .read("transcript.jsonl")
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("transcript line is JSON"))
        .filter(|event| event["event"] == "environment_loaded" && event["name"] == name)
        .filter_map(|event| event["detail"].as_str().map(str::to_owned))
        .next_back()
        .unwrap_or_else(|| panic!("no environment_loaded event for {name}"))
}

/// Files in the cache folder with this extension.
fn cache_files(cache: &Path, extension: &str) -> Vec<PathBuf> {
    std::fs::read_dir(cache)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .filter(|path| path.to_string_lossy().ends_with(extension))
                .collect()
        })
        .unwrap_or_default()
}

/// Waits (at most `limit`) until the cache holds a compiled entry.
fn wait_for_entry(cache: &Path, limit: Duration) -> Vec<PathBuf> {
    let deadline = Instant::now() + limit;
    loop {
        let entries = cache_files(cache, ".cwasm");
        if !entries.is_empty() || Instant::now() > deadline {
            return entries;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_cold_start_answers_on_baseline_code_then_caches_and_switches_to_optimised_code() {
    let project = Project::new();
    install(&project, &[("rogue", "rogue")]);
    let cache = project.path().join(".plugin-cache");
    let mut host = tiering_host(&project);
    assert_eq!(host.command("rogue", "count").ok(), "count = 1");
    let detail = load_detail(&project, "rogue");
    assert!(
        detail.contains("baseline code (optimised code compiling in the background"),
        "the first start runs baseline code: {detail}"
    );
    let entries = wait_for_entry(&cache, Duration::from_secs(120));
    assert_eq!(
        entries.len(),
        1,
        "the optimised code is cached: {entries:?}"
    );
    // The next fresh instance (after a failed call) takes the optimised code.
    let looped = host.command_with_timeout("rogue", "loop", 300);
    assert!(
        looped.failed().contains("ran past its time limit"),
        "{}",
        looped.0
    );
    assert_eq!(host.command("rogue", "count").ok(), "count = 1");
    let (status, stderr) = host.finish();
    assert!(status.success());
    assert!(
        stderr.contains(
            "envhost: plugin rogue: its optimised code was compiled in the background in"
        ) && stderr.contains("and cached; the next start uses it"),
        "{stderr}"
    );
    assert!(
        stderr.contains("plugin rogue: its fresh instance runs on its optimised code"),
        "{stderr}"
    );

    // The next start maps the optimised code from the cache.
    let mut host = tiering_host(&project);
    assert_eq!(host.command("rogue", "count").ok(), "count = 1");
    assert!(host.finish().0.success());
    let detail = load_detail(&project, "rogue");
    assert!(
        detail.contains("compiled code from the cache"),
        "the second start is warm: {detail}"
    );
}

#[test]
fn an_endless_loop_on_baseline_code_is_stopped_at_the_command_timeout() {
    let project = Project::new();
    install(&project, &[("rogue", "rogue")]);
    let mut host = tiering_host(&project);
    // The first command, so the first instance: baseline code.
    host.send(&serde_json::json!({
        "type": "command", "environment": "rogue", "command": "loop", "timeout_ms": 1_000
    }));
    let answer = host.recv_within(Duration::from_secs(60));
    let output = answer["response"]["output"].as_str().unwrap_or_default();
    assert!(
        output.starts_with(
            "The rogue plugin stopped during this command: it ran past its time limit of 1 s"
        ),
        "{answer}"
    );
    assert!(
        load_detail(&project, "rogue").contains("baseline code"),
        "{}",
        load_detail(&project, "rogue")
    );
    assert_eq!(host.command("rogue", "count").ok(), "count = 1");
    assert!(host.finish().0.success());
}

/// The host's children running `compile-plugin` (optimised: without
/// `--baseline`), with their nice value.
fn optimised_compilers(host_pid: u32) -> Vec<(i32, i64)> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.filter_map(Result::ok) {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the command name: state ppid ... nice is the 17th.
        let fields: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        let parent = fields.get(1).and_then(|p| p.parse::<u32>().ok());
        let nice = fields.get(16).and_then(|n| n.parse::<i64>().ok());
        let command = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let command = String::from_utf8_lossy(&command).replace('\0', " ");
        if parent == Some(host_pid)
            && command.contains("compile-plugin")
            && !command.contains("--baseline")
            && let Some(nice) = nice
        {
            found.push((pid, nice));
        }
    }
    found
}

#[test]
fn a_host_stopped_mid_background_compile_leaves_no_entry_and_no_process() {
    let built = crate::polyglot::built();
    let project = Project::new();
    let bytes = std::fs::read(built.components.join("tasks.wasm")).expect("read tasks.wasm");
    project.write("env/tasks.wasm", bytes);
    let cache = project.path().join(".plugin-cache");
    // The default threshold (1 MiB) tiers this 17.5 MB plugin.
    let mut host = host_builder(&project)
        .arg("--verbose")
        .start(project.path());
    assert_eq!(
        host.command("tasks", "add Write a failing test").ok(),
        "Added [ ] 1. Write a failing test"
    );
    assert!(
        load_detail(&project, "tasks").contains("baseline code"),
        "{}",
        load_detail(&project, "tasks")
    );
    // Cranelift takes seconds on this component: catch its compiler.
    let deadline = Instant::now() + Duration::from_secs(60);
    let compilers = loop {
        let compilers = optimised_compilers(host.pid());
        if !compilers.is_empty() || Instant::now() > deadline {
            break compilers;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        compilers.len(),
        1,
        "one background compiler runs (if it already finished, this machine compiles faster than expected)"
    );
    let (compiler, nice) = compilers[0];
    assert!(
        nice > 0,
        "the background compiler runs at a lower priority: nice {nice}"
    );
    assert!(
        cache_files(&cache, ".cwasm").is_empty(),
        "nothing cached before the compilation ends"
    );
    host.signal("TERM");
    let status = host.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    assert!(
        wait_until_dead(compiler, Duration::from_secs(10)),
        "the background compiler ended with the host"
    );
    assert!(!process_alive(compiler));
    assert!(
        cache_files(&cache, ".cwasm").is_empty() && cache_files(&cache, ".tmp").is_empty(),
        "no entry, whole or partial: {:?}",
        std::fs::read_dir(&cache).map(|d| d.count())
    );
    let stderr = host.stderr_after_exit();
    assert!(
        !stderr.contains("optimised code was compiled")
            && !stderr.contains("could not be compiled in the background"),
        "stopped, so neither compiled nor failed: {stderr}"
    );
}

#[test]
fn the_baseline_compilation_is_bounded_too() {
    let project = Project::new();
    install(&project, &[("rogue", "rogue")]);
    // Too little memory for any compiler: the baseline one is refused as
    // the optimised one would be, and the host serves the rest.
    let mut host = host_builder(&project)
        .args([
            "--plugin-baseline-above",
            "1",
            "--plugin-compile-memory",
            "8MiB",
        ])
        .start(project.path());
    let reply = host.command("bash", "echo still here");
    assert_eq!(reply.ok(), "still here\n");
    let refused = reply.screen("refused-plugins");
    assert!(
        refused.contains("plugin `rogue` (env/rogue.wasm) was refused: compiling it needed more memory than the 8.0 MiB the host allows (--plugin-compile-memory)"),
        "{refused}"
    );
    assert!(host.finish().0.success());
}
