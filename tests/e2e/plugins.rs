//! WebAssembly plugins through the real binary: the timer with its
//! progressive help, the manual style, every refusal, every sandbox case
//! (the `rogue` fixture), the compiled-code cache and `envhost check`.
//!
//! The plugins are real components built from `plugins/` and
//! `tests/fixtures/` for wasm32-wasip2. The first test to need them builds
//! them with cargo (a no-op when `scripts/build-plugins` already did); if
//! that fails, the message says which command to run.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

use crate::harness::{Host, HostBuilder, Project, envhost_binary, target_dir, workspace};

fn guest_dir() -> PathBuf {
    target_dir().join("wasm32-wasip2").join("wasm-release")
}

/// Builds the guests once per test run (cargo makes it a no-op when they
/// are up to date).
fn guests() -> &'static Path {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let output = Command::new(cargo)
            .current_dir(workspace())
            .args([
                "build",
                "--target",
                "wasm32-wasip2",
                "--profile",
                "wasm-release",
                "-p",
                "timer-plugin",
                "-p",
                "sqlite-plugin",
                "-p",
                "gdb-plugin",
                "-p",
                "envhost-fixtures",
                "--lib",
                "--examples",
            ])
            .output()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        if output.status.success() {
            Ok(guest_dir())
        } else {
            Err(String::from_utf8_lossy(&output.stderr).into_owned())
        }
    });
    match built {
        Ok(dir) => dir,
        Err(cargo_said) => panic!(
            "the plugins and test fixtures (wasm32-wasip2 components) could not be built.\n\
             Run `scripts/build-plugins` first: it installs the wasm32-wasip2 target and builds them.\n\
             cargo said:\n{cargo_said}"
        ),
    }
}

/// A built guest: `timer`, `sqlite`, `gdb` or a fixture example name.
pub(crate) fn guest(name: &str) -> PathBuf {
    let dir = guests();
    let path = if ["timer", "sqlite", "gdb"].contains(&name) {
        dir.join(format!("{name}.wasm"))
    } else {
        dir.join("examples").join(format!("{name}.wasm"))
    };
    assert!(path.is_file(), "{} was not built", path.display());
    path
}

/// Copies guests into `<project>/env/` under the given environment names.
pub(crate) fn install(project: &Project, plugins: &[(&str, &str)]) {
    for (env_name, guest_name) in plugins {
        let bytes = std::fs::read(guest(guest_name)).expect("read guest");
        project.write(&format!("env/{env_name}.wasm"), bytes);
    }
}

/// A host on `project` with its own compiled-code cache and a transcript.
pub(crate) fn start(project: &Project, extra: &[&str]) -> Host {
    host_builder(project)
        .args(extra.iter().copied())
        .start(project.path())
}

/// The builder behind [`start`], for more options (variables).
pub(crate) fn host_builder(project: &Project) -> HostBuilder {
    let cache = project.path().join(".plugin-cache");
    let transcript = project.path().join("transcript.jsonl");
    Host::builder()
        .arg("--plugin-cache")
        .arg(cache.to_str().expect("utf-8 path"))
        .arg("--transcript")
        .arg(transcript.to_str().expect("utf-8 path"))
}

pub(crate) fn transcript(project: &Project) -> Vec<Value> {
    project
        .read("transcript.jsonl")
        .lines()
        .map(|line| serde_json::from_str(line).expect("transcript line is JSON"))
        .collect()
}

pub(crate) fn events<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event"] == kind).collect()
}

pub(crate) const TIMER_BEFORE_ANY_COMMAND: &str = "\
Timer: Stopped (0.00s)

Commands:
  start
    Start the timer from zero or resume after stop.
    Example:
      ```timer
      start
      ```

  stop
    Stop the timer and record elapsed time.
    Example:
      ```timer
      stop
      ```

  reset
    Reset timer to zero.
    Example:
      ```timer
      reset
      ```
";

#[test]
fn the_timer_plugin_works_with_progressive_help() {
    let project = Project::new();
    install(&project, &[("timer", "timer")]);
    let mut host = start(&project, &[]);

    let screen = host.screen();
    assert_eq!(
        screen.0["screen"]["timer"]["content"],
        TIMER_BEFORE_ANY_COMMAND
    );

    let started = host.command("timer", "start");
    assert_eq!(started.ok(), "Timer started");
    let after_start = started.screen("timer");
    assert!(after_start.starts_with("Timer: Running ("), "{after_start}");
    assert!(
        after_start.contains(
            "Commands:\n  start - Start the timer from zero or resume after stop\n\n  stop\n    Stop the timer and record elapsed time.\n"
        ),
        "start collapses to SHORT help, stop keeps LONG help:\n{after_start}"
    );

    let again = host.command("timer", "start");
    assert!(
        again.failed().starts_with("Timer already running"),
        "{}",
        again.0
    );

    let unknown = host.command("timer", "lap");
    assert_eq!(
        unknown.failed(),
        "Unknown command: lap\nAvailable: start, stop, reset\nThe Commands section of the timer screen shows how to use each one."
    );

    let stopped = host.command("timer", "stop");
    assert!(stopped.ok().starts_with("Elapsed: "), "{}", stopped.0);
    let after_stop = stopped.screen("timer");
    assert!(after_stop.starts_with("Timer: Stopped ("), "{after_stop}");
    assert!(
        after_stop.contains(
            "  start - Start the timer from zero or resume after stop\n  stop - Stop the timer and record elapsed time\n\n  reset\n    Reset timer to zero.\n"
        ),
        "{after_stop}"
    );
    assert!(
        host.command("timer", "stop")
            .failed()
            .starts_with("Timer not running"),
        "stop twice fails"
    );
    assert_eq!(host.command("timer", "reset").ok(), "Timer reset");

    let (status, _) = host.finish();
    assert!(status.success());
    let record = transcript(&project);
    let loaded = events(&record, "environment_loaded");
    let timer = loaded
        .iter()
        .find(|e| e["name"] == "timer")
        .expect("environment_loaded for timer");
    assert_eq!(timer["kind"], "plugin");
    assert!(
        timer["detail"]
            .as_str()
            .unwrap_or("")
            .contains("3 commands"),
        "{timer}"
    );
}

#[test]
fn a_manual_plugin_owns_its_whole_screen_and_gets_any_text() {
    let project = Project::new();
    install(&project, &[("notes", "manual")]);
    let mut host = start(&project, &[]);
    let first = host.screen();
    assert_eq!(
        first.0["screen"]["notes"]["content"],
        "Notes (0):\n\nSend any text to add a note."
    );
    assert_eq!(first.0["screen"]["notes"]["max_lines"], 20);
    let reply = host.command("notes", "buy milk and eggs");
    assert_eq!(reply.ok(), "Noted (1 so far)");
    let screen = reply.screen("notes");
    assert!(screen.contains("  1. buy milk and eggs"), "{screen}");
    assert!(!screen.contains("Commands:"), "no host help: {screen}");
    assert!(
        host.command("notes", "   ")
            .failed()
            .contains("Send some text")
    );
}

#[test]
fn every_refused_plugin_is_explained_and_the_rest_still_loads() {
    let project = Project::new();
    install(
        &project,
        &[
            ("timer", "timer"),
            ("wrong_signature", "wrong_signature"),
            ("missing_export", "missing_export"),
            ("missing_import", "missing_import"),
            ("wrong_version", "wrong_version"),
            ("other_world", "other_world"),
            ("duplicate_commands", "duplicate_commands"),
            ("describe_panics", "describe_panics"),
            ("bash", "timer"),
            ("my-timer", "timer"),
            ("_skipped", "timer"),
        ],
    );
    project.write("env/core_module.wasm", b"\0asm\x01\0\0\0");
    project.write("env/not_wasm.wasm", "this is text\n");
    project.write("env/README.md", "not a plugin, ignored\n");
    let mut host = start(&project, &[]);

    let screen = host.screen();
    let expected: &[(&str, &str)] = &[
        (
            "wrong_signature",
            "its function `handle-command` has the wrong signature: the host expects `handle-command: func(command: string) -> command-response`",
        ),
        (
            "wrong_signature",
            "the plugin has `handle-command: func(command: string, repeat: u32) -> record { output: string, success: bool }`",
        ),
        (
            "missing_export",
            "its export `envhost:environment/environment@0.1.0` lacks the function `get-screen`; the host expects `get-screen: func() -> screen-section` (from wit/v0.1.0)",
        ),
        (
            "missing_import",
            "it imports `log-level` from `envhost:environment/logging@0.1.0`, which this host does not provide",
        ),
        (
            "missing_import",
            "This host's `envhost:environment/logging@0.1.0` offers `log`",
        ),
        (
            "wrong_version",
            "it exports `envhost:environment/environment@0.3.0`, a version of the plugin interface this host does not speak: this host loads `envhost:environment/environment@0.1.0` or `envhost:environment/environment@0.2.0` or `envhost:environment/environment@0.2.1` (0.1.x or 0.2.x). Rebuild the plugin against this envhost's wit/v0.2.1",
        ),
        (
            "other_world",
            "it does not export the interface every plugin exports, `envhost:environment/environment@0.1.0` or `envhost:environment/environment@0.2.0` or `envhost:environment/environment@0.2.1` (the worlds of wit/v0.2.1, wit/v0.2.0 and wit/v0.1.0); it exports only `example:greeter/greet@1.0.0`",
        ),
        (
            "duplicate_commands",
            "two commands are named \"go\"; each command's first word must be unique",
        ),
        (
            "describe_panics",
            "it failed while describing itself: it panicked: no description today",
        ),
        (
            "core_module",
            "it is a core WebAssembly module, not a component",
        ),
        ("not_wasm", "it is not a WebAssembly file"),
        ("bash", "the name `bash` belongs to a built-in environment"),
        (
            "my-timer",
            "`my-timer` is not a valid environment name: it must be an identifier",
        ),
    ];
    let section = screen.0["screen"]["refused-plugins"]["content"]
        .as_str()
        .unwrap_or_else(|| panic!("no refused-plugins section: {}", screen.0));
    assert!(
        section
            .starts_with("11 plugins in env/ could not be loaded (the other environments work)."),
        "{section}"
    );
    for (plugin, fragment) in expected {
        let line = section
            .lines()
            .find(|line| {
                line.contains(&format!(
                    "plugin `{plugin}` (env/{plugin}.wasm) was refused: "
                ))
            })
            .unwrap_or_else(|| panic!("{plugin} is not listed:\n{section}"));
        assert!(
            line.contains(fragment),
            "{plugin}: {line:?} lacks {fragment:?}"
        );
    }
    assert!(
        !section.contains("_skipped"),
        "names starting with _ are skipped"
    );

    // The rest still loads and works; a refused plugin is not an environment.
    assert_eq!(host.command("timer", "start").ok(), "Timer started");
    let unknown = host.command("wrong_signature", "start");
    let output = unknown.failed();
    assert!(
        output.starts_with("Unknown environment: wrong_signature"),
        "{output}"
    );
    assert!(output.contains("timer"), "{output}");

    let (status, stderr) = host.finish();
    assert!(status.success());
    for (plugin, fragment) in expected {
        assert!(
            stderr.contains(&format!("plugin `{plugin}` ")) && stderr.contains(fragment),
            "stderr lacks {plugin}: {fragment}\n{stderr}"
        );
    }
    let record = transcript(&project);
    let failed = events(&record, "environment_failed");
    let refused: std::collections::BTreeSet<&str> = expected.iter().map(|(p, _)| *p).collect();
    assert_eq!(failed.len(), refused.len(), "{failed:?}");
}

#[test]
fn the_sandbox_grants_no_files_variables_network_or_processes() {
    let project = Project::new();
    install(&project, &[("rogue", "rogue")]);
    let secret = project.write("secret.txt", "the password is swordfish\n");
    let listener = TcpListener::bind("127.0.0.1:0").expect("listen on loopback");
    listener.set_nonblocking(true).expect("non-blocking");
    let port = listener.local_addr().expect("address").port();
    let mut host = Host::builder()
        .arg("--plugin-cache")
        .arg(
            project
                .path()
                .join(".plugin-cache")
                .to_str()
                .expect("utf-8"),
        )
        .env("ROGUE_TEST_SECRET_TOKEN", "hunter2")
        .env("ROGUE_VISIBLE", "plain")
        .start(project.path());

    for path in [
        secret.to_str().expect("utf-8"),
        "secret.txt",
        "/etc/passwd",
        "../",
    ] {
        let reply = host.command("rogue", &format!("read {path}"));
        let output = reply.failed();
        assert!(
            output.starts_with(&format!("cannot read {path}: ")),
            "{output}"
        );
        assert!(
            !output.contains("swordfish") && !output.contains("root:"),
            "{output}"
        );
    }
    assert_eq!(host.command("rogue", "env").ok(), "0 variables: ");
    assert!(
        host.command("rogue", "env ROGUE_VISIBLE")
            .failed()
            .contains("environment variable not found")
    );
    let connect = host.command("rogue", &format!("connect 127.0.0.1:{port}"));
    assert!(
        connect
            .failed()
            .starts_with(&format!("cannot connect to 127.0.0.1:{port}: ")),
        "{}",
        connect.0
    );
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "nothing may have connected"
    );
    let spawn = host.command("rogue", "spawn /bin/sh");
    assert!(
        spawn.failed().starts_with("cannot run /bin/sh: "),
        "{}",
        spawn.0
    );
    // None of that is a trap: the plugin kept its state throughout.
    assert_eq!(host.command("rogue", "count").ok(), "count = 1");
}

/// Runs `command` in `rogue` and checks it fails naming `cause`, that the
/// response says the state was lost, and that the plugin really was
/// restarted (its counter, at 2 or more before, starts again at 1).
fn assert_trap_survived(host: &mut Host, command: &str, timeout_ms: Option<u64>, cause: &str) {
    host.command("rogue", "count").ok();
    let before = host.command("rogue", "count");
    assert_ne!(before.ok(), "count = 1");
    let reply = match timeout_ms {
        Some(ms) => host.command_with_timeout("rogue", command, ms),
        None => host.command("rogue", command),
    };
    let output = reply.failed();
    assert!(
        output.starts_with(&format!(
            "The rogue plugin stopped during this command: {cause}"
        )),
        "{command}: {output}"
    );
    assert!(
        output.contains("Its state was lost: the host restarted the plugin"),
        "{output}"
    );
    assert!(
        reply.screen("rogue").starts_with("Count: 0\n"),
        "a fresh instance on screen"
    );
    assert_eq!(
        host.command("rogue", "count").ok(),
        "count = 1",
        "after {command} the state must be fresh"
    );
}

#[test]
fn traps_loops_memory_bombs_and_stack_overflows_are_survived() {
    let project = Project::new();
    install(&project, &[("rogue", "rogue"), ("timer", "timer")]);
    let mut host = start(&project, &[]);

    assert_trap_survived(
        &mut host,
        "loop",
        Some(300),
        "it ran past its time limit of 300 ms and was stopped",
    );
    assert_trap_survived(
        &mut host,
        "alloc 4096",
        None,
        "it ran out of memory: it tried to grow its memory to",
    );
    assert_trap_survived(
        &mut host,
        "grow 65536",
        None,
        "it ran out of memory: it tried to grow its memory to 4.0 GiB, over its limit of 256 MiB",
    );
    assert_trap_survived(
        &mut host,
        "panic the plugin lost its marbles",
        None,
        "it panicked: the plugin lost its marbles (at tests/fixtures/examples/rogue.rs:",
    );
    assert_trap_survived(&mut host, "recurse", None, "it overflowed its call stack");
    // The other environments never noticed.
    assert_eq!(host.command("timer", "start").ok(), "Timer started");

    let (status, _) = host.finish();
    assert!(status.success());
    let record = transcript(&project);
    let trapped: Vec<&str> = events(&record, "plugin_trapped")
        .iter()
        .filter_map(|e| e["cause"].as_str())
        .collect();
    for cause in [
        "timed out after 300 ms",
        "out of memory",
        "panic: the plugin lost its marbles",
        "stack overflow",
    ] {
        assert!(
            trapped.iter().any(|t| t.starts_with(cause)),
            "no plugin_trapped event for {cause}: {trapped:?}"
        );
    }
    assert!(!events(&record, "environment_restarted").is_empty());
    assert_eq!(events(&record, "command_timed_out").len(), 1);
}

#[test]
fn a_failing_screen_shows_an_error_in_its_own_section_only() {
    let project = Project::new();
    install(&project, &[("rogue", "rogue"), ("timer", "timer")]);
    let mut host = start(&project, &[]);
    assert_eq!(host.command("rogue", "count").ok(), "count = 1");
    let reply = host.command("rogue", "screen-panic");
    assert_eq!(reply.ok(), "the next screen will panic");
    let section = reply.screen("rogue");
    assert!(
        section.starts_with(
            "[Error getting screen from rogue: the plugin failed while drawing its screen: it panicked: the screen was asked to fail"
        ),
        "{section}"
    );
    assert!(
        reply.screen("timer").starts_with("Timer: Stopped"),
        "other sections intact"
    );
    let next = host.command("rogue", "count");
    let output = next.ok();
    assert!(
        output.starts_with("(Note: the rogue plugin failed while drawing its screen: it panicked"),
        "{output}"
    );
    assert!(
        output.ends_with("\n\ncount = 1"),
        "state was lost: {output}"
    );
    assert!(next.screen("rogue").starts_with("Count: 1\n"));
}

#[test]
fn plugin_output_stays_off_the_protocol_channel_and_is_bounded() {
    let project = Project::new();
    install(&project, &[("rogue", "rogue")]);
    let mut host = start(&project, &["-v", "--output-cap", "4KiB"]);
    // 200 KB to stdout and to stderr: the harness parses every stdout line
    // as JSON, so any of it leaking there would fail here.
    assert_eq!(
        host.command("rogue", "print 200000").ok(),
        "printed 200000 bytes"
    );
    assert_eq!(host.command("rogue", "log look here").ok(), "logged");

    let big = host.command("rogue", "big 300000");
    let output = big.ok();
    assert!(output.len() < 8 * 1024, "capped: {} bytes", output.len());
    let marker = output
        .lines()
        .find(|line| line.starts_with("[... output too long: 300000 bytes in all"))
        .unwrap_or_else(|| panic!("no cap marker in {output}"));
    let saved = marker
        .split("the full output is saved in ")
        .nth(1)
        .and_then(|rest| rest.split(" ...]").next())
        .unwrap_or_else(|| panic!("no saved file named in {marker}"));
    assert_eq!(std::fs::read(saved).expect("saved output").len(), 300_000);

    let (status, stderr) = host.finish();
    assert!(status.success());
    assert!(
        stderr.contains("[plugin rogue] stdout: xxxxxxxx"),
        "{stderr}"
    );
    assert!(
        stderr.contains("[plugin rogue] stderr: xxxxxxxx"),
        "{stderr}"
    );
    assert!(
        stderr.contains("more bytes of output dropped: a call keeps at most 65536 bytes"),
        "bounded: {}",
        &stderr[stderr.len().saturating_sub(2000)..]
    );
    assert!(stderr.contains("[plugin rogue] warn: look here"));
}

#[test]
fn plugin_chatter_is_not_written_to_stderr_without_verbose() {
    let project = Project::new();
    install(&project, &[("rogue", "rogue")]);
    let mut host = start(&project, &[]);
    assert_eq!(
        host.command("rogue", "print 1000").ok(),
        "printed 1000 bytes"
    );
    assert_eq!(host.command("rogue", "log quiet please").ok(), "logged");
    let (status, stderr) = host.finish();
    assert!(status.success());
    assert!(!stderr.contains("[plugin rogue]"), "{stderr}");
}

#[test]
fn sigterm_interrupts_a_running_plugin_and_the_host_exits_cleanly() {
    let project = Project::new();
    install(&project, &[("rogue", "rogue")]);
    let mut host = start(&project, &[]);
    assert_eq!(host.command("rogue", "count").ok(), "count = 1");
    host.send(&serde_json::json!({
        "type": "command", "environment": "rogue", "command": "loop", "timeout_ms": 600_000
    }));
    // Give the call a moment to start; the signal works either way.
    std::thread::sleep(Duration::from_millis(300));
    host.signal("TERM");
    let status = host.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
}

#[test]
fn compiled_code_is_cached_across_starts() {
    let project = Project::new();
    install(&project, &[("timer", "timer")]);
    let cache = project.path().join(".plugin-cache");
    let detail = |project: &Project| -> String {
        let record = transcript(project);
        let loaded = events(&record, "environment_loaded");
        loaded
            .iter()
            .find(|e| e["name"] == "timer")
            .and_then(|e| e["detail"].as_str())
            .unwrap_or_default()
            .to_owned()
    };

    let mut host = start(&project, &[]);
    assert_eq!(host.command("timer", "start").ok(), "Timer started");
    assert!(host.finish().0.success());
    assert!(
        detail(&project).contains("compiled and cached"),
        "{}",
        detail(&project)
    );
    let entries: Vec<PathBuf> = std::fs::read_dir(&cache)
        .expect("cache folder")
        .map(|e| e.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "cwasm"))
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert!(cache.join("key").is_file(), "the key that signs entries");
    assert!(entries[0].to_string_lossy().ends_with(".cwasm"));

    std::fs::remove_file(project.path().join("transcript.jsonl")).expect("reset transcript");
    let mut host = start(&project, &[]);
    assert_eq!(host.command("timer", "start").ok(), "Timer started");
    assert!(host.finish().0.success());
    assert!(
        detail(&project).contains("compiled code from the cache"),
        "{}",
        detail(&project)
    );

    // A damaged entry is not trusted: it is compiled again and replaced.
    std::fs::write(&entries[0], b"garbage").expect("damage the entry");
    std::fs::remove_file(project.path().join("transcript.jsonl")).expect("reset transcript");
    let mut host = start(&project, &[]);
    assert_eq!(host.command("timer", "start").ok(), "Timer started");
    assert!(host.finish().0.success());
    assert!(
        detail(&project).contains("compiled and cached"),
        "{}",
        detail(&project)
    );
}

/// Warm starts skip reading and hashing an unchanged plugin file; a file
/// replaced in place must still be the one that runs.
#[test]
fn a_replaced_plugin_never_runs_stale_cached_code() {
    let project = Project::new();
    install(&project, &[("tool", "timer")]);
    // A record of the file's hash is trusted only if the file had not
    // changed for two seconds when it was made (git's racy-index rule).
    std::thread::sleep(std::time::Duration::from_millis(2200));
    for _ in 0..2 {
        let mut host = start(&project, &[]);
        assert_eq!(host.command("tool", "start").ok(), "Timer started");
        assert!(host.finish().0.success());
    }
    let records = project.path().join(".plugin-cache/files");
    assert_eq!(
        std::fs::read_dir(&records).expect("hash records").count(),
        1,
        "the timer's hash is recorded"
    );
    // Same path, other plugin: the notes plugin owns its whole screen.
    install(&project, &[("tool", "manual")]);
    let mut host = start(&project, &[]);
    let reply = host.command("tool", "buy milk");
    assert_eq!(
        reply.ok(),
        "Noted (1 so far)",
        "the new file runs, not the cached timer"
    );
    assert!(host.finish().0.success());
}

/// `envhost check` on `files`, with nothing granted.
pub(crate) fn check(files: &[PathBuf], project: &Project) -> (bool, String) {
    check_with_grants(files, project, None)
}

/// `envhost check` on `files`, with `grants` (`--grants FILE`) if given.
pub(crate) fn check_with_grants(
    files: &[PathBuf],
    project: &Project,
    grants: Option<&Path>,
) -> (bool, String) {
    let mut command = Command::new(envhost_binary());
    command
        .arg("check")
        .arg("--plugin-cache")
        .arg(project.path().join(".plugin-cache"));
    if let Some(grants) = grants {
        command.arg("--grants").arg(grants);
    }
    let output = command.args(files).output().expect("run envhost check");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr),
    )
}

#[test]
fn envhost_check_reports_good_and_bad_plugins() {
    let project = Project::new();
    install(
        &project,
        &[("timer", "timer"), ("broken", "wrong_signature")],
    );
    let timer = project.path().join("env/timer.wasm");
    let broken = project.path().join("env/broken.wasm");

    let (ok, text) = check(std::slice::from_ref(&timer), &project);
    assert!(ok, "{text}");
    for fragment in [
        "timer.wasm: OK, loads as the environment `timer`",
        "description: Timer for tracking elapsed time",
        "style:       declarative: 3 commands",
        "    start - Start the timer from zero or resume after stop",
        "host imports used (",
        "    wasi:clocks/monotonic-clock@0.2",
        "sha256 ",
        "Its screen section, as the agent first sees it:\n  | Timer: Stopped (0.00s)\n  |\n  | Commands:\n  |   start\n",
    ] {
        assert!(text.contains(fragment), "lacks {fragment:?}:\n{text}");
    }

    let (ok, text) = check(std::slice::from_ref(&broken), &project);
    assert!(!ok, "{text}");
    assert!(text.contains("broken.wasm: REFUSED"), "{text}");
    assert!(text.contains("error: plugin `broken` ("), "{text}");
    assert!(
        text.contains("its function `handle-command` has the wrong signature"),
        "{text}"
    );
    assert!(
        text.contains("1 of 1 plugin file failed the check"),
        "{text}"
    );

    let (ok, text) = check(
        &[timer, broken, project.path().join("env/absent.wasm")],
        &project,
    );
    assert!(!ok);
    assert!(
        text.contains("2 of 3 plugin files failed the check"),
        "{text}"
    );
    assert!(text.contains("absent.wasm: REFUSED"), "{text}");
    assert!(text.contains("the file cannot be read"), "{text}");
}
