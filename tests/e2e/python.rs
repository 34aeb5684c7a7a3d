//! The python environment through the real binary and a real python3:
//! code, output, tracebacks, the screen and its variable order, timeouts,
//! exits and crashes, the output cap, secrets, and a missing interpreter.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{Host, Project, Reply, process_alive, wait_until_dead};

/// The help line, and the line the default python adds on opening another.
const HELP: &str = "Any Python code. Variables and imports persist across commands.\nAnother python: send to \"python:NAME\" to open one (its own state and section); close ends it.";

fn python(host: &mut Host, code: &str) -> Reply {
    host.command("python", code)
}

/// The `  name: type` lines of the python section, in order.
fn variable_lines(reply: &Reply) -> Vec<String> {
    reply
        .screen("python")
        .lines()
        .filter(|line| line.starts_with("  "))
        .map(str::to_owned)
        .collect()
}

fn pid_of_python(host: &mut Host) -> i32 {
    let inner: i32 = python(host, "import os as _os\n_os.getpid()")
        .ok()
        .trim()
        .parse()
        .expect("a pid");
    host.outer_pid(inner)
}

/// Asserts that `needles` appear in `haystack` in this order.
fn assert_in_order(haystack: &str, needles: &[&str]) {
    let mut from = 0;
    for needle in needles {
        match haystack[from..].find(needle) {
            Some(at) => from += at + needle.len(),
            None => panic!("{needle:?} missing or out of order in:\n{haystack}"),
        }
    }
}

#[test]
fn screen_is_minimal_until_first_use_then_shows_directory_variables_and_help() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    assert_eq!(
        host.screen().screen("python"),
        format!("Python REPL (ready)\n\n{HELP}")
    );

    let reply = python(&mut host, "import os");
    assert_eq!(reply.ok(), "");
    assert_eq!(
        reply.screen("python"),
        format!(
            "Working directory: {}\n\nVariables: (none)\n\n{HELP}",
            project.canonical().display()
        )
    );

    let reply = python(&mut host, "x = 1");
    assert_eq!(
        reply.screen("python"),
        format!(
            "Working directory: {}\n\nVariables (by recent use):\n  x: int\n\n{HELP}",
            project.canonical().display()
        )
    );
}

#[test]
fn multi_line_code_runs_as_one_program_and_the_last_expression_is_shown() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let program = r#"import functools

def twice(f):
    @functools.wraps(f)
    def wrapper(x):

        return f(f(x))

    return wrapper

@twice
def inc(x):
    y = x + 1

    return y

class Counter:

    def __init__(self):
        self.n = 0

    def bump(self):
        self.n += 1
        return self.n

if __name__ == "__main__":
    print("running as", __name__)

c = Counter()
c.bump()
inc(40)"#;
    assert_eq!(python(&mut host, program).ok(), "running as __main__\n42\n");

    // As in a REPL: the value of a trailing expression, its repr, and
    // nothing for None.
    assert_eq!(python(&mut host, "c.bump()").ok(), "2\n");
    assert_eq!(python(&mut host, "'text'").ok(), "'text'\n");
    assert_eq!(python(&mut host, "None").ok(), "");
    assert_eq!(python(&mut host, "print('printed')").ok(), "printed\n");
    assert_eq!(python(&mut host, "z = inc(0)").ok(), "");
    assert_eq!(python(&mut host, "z").ok(), "2\n");
    // A one-line cell is one simple statement compiled at once; a compound
    // statement or several statements on one line are still a cell: only
    // a trailing expression shows, never those inside a loop or an `if`.
    assert_eq!(python(&mut host, "for i in range(3): i").ok(), "");
    assert_eq!(python(&mut host, "if True: 5").ok(), "");
    assert_eq!(python(&mut host, "1; 2").ok(), "2\n");
    assert_eq!(python(&mut host, "match = 3").ok(), "");
    assert_eq!(python(&mut host, "match").ok(), "3\n");
}

#[test]
fn printed_output_stderr_warnings_and_fd_writes_arrive_in_order() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let code = r#"import os, sys, subprocess, warnings
print("one")
sys.stderr.write("two\n")
warnings.warn("three")
os.write(1, b"four\n")
os.system("echo five")
subprocess.run(["sh", "-c", "echo six >&2"])
print("seven")"#;
    let output = python(&mut host, code).ok().to_owned();
    assert_in_order(
        &output,
        &[
            "one\n",
            "two\n",
            "UserWarning: three",
            "four\n",
            "five\n",
            "six\n",
            "seven\n",
        ],
    );

    // Terminal hygiene: colours stripped, carriage-return redraws collapsed.
    let output = python(
        &mut host,
        r#"print("\x1b[31mred\x1b[0m"); print("10%\r100%")"#,
    );
    assert_eq!(output.ok(), "red\n100%\n");
}

#[test]
fn exceptions_show_a_traceback_without_driver_frames_and_keep_the_namespace() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    python(&mut host, "kept = 1").ok();
    let reply = python(
        &mut host,
        "before = 2\ndef boom():\n    raise ValueError('bad value')\nboom()",
    );
    let output = reply.failed();
    assert!(
        output.starts_with("Traceback (most recent call last):\n"),
        "{output}"
    );
    assert_in_order(
        output,
        &[
            "File \"<python-input-2>\", line 4, in <module>",
            "boom()",
            "line 3, in boom",
            "raise ValueError('bad value')",
            "ValueError: bad value",
        ],
    );
    assert_eq!(
        output.matches("File ").count(),
        2,
        "driver frames: {output}"
    );
    assert!(!output.contains("envhost"), "driver frames: {output}");

    // Everything before the exception, in this command and earlier, stays.
    assert_eq!(python(&mut host, "kept + before").ok(), "3\n");
    let lines = variable_lines(&python(&mut host, "pass"));
    assert_eq!(lines, ["  kept: int", "  before: int", "  boom: function"]);
}

#[test]
fn syntax_errors_are_reported_like_python_and_nothing_runs() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let output = python(&mut host, "ran = True\nx = (").failed().to_owned();
    assert!(
        output.starts_with("  File \"<python-input-1>\", line 2\n"),
        "{output}"
    );
    assert!(output.contains("SyntaxError: "), "{output}");
    assert!(!output.contains("Traceback"), "{output}");
    let output = python(&mut host, "ran").failed().to_owned();
    assert!(
        output.contains("NameError: name 'ran' is not defined"),
        "{output}"
    );

    let output = python(&mut host, "import asyncio\nawait asyncio.sleep(0)")
        .failed()
        .to_owned();
    assert!(
        output.contains("SyntaxError: 'await' outside function"),
        "{output}"
    );
    assert!(
        output.contains("Top-level await is not supported"),
        "{output}"
    );
    assert!(output.contains("asyncio.run(main())"), "{output}");
}

#[test]
fn input_fails_at_once_with_a_clear_message() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    // With a timeout of a minute, an input() that waited would come back
    // as a timeout, not as this message.
    let reply = host.command_with_timeout("python", "name = input('Your name? ')", 60_000);
    let output = reply.failed();
    assert!(
        output.contains("EOFError: input() is not available"),
        "{output}"
    );
    assert!(output.contains("no stdin"), "{output}");
    assert!(!output.contains("Timed out"), "{output}");
    let reply = host.command_with_timeout("python", "import sys\nsys.stdin.read()", 60_000);
    assert_eq!(reply.ok(), "''\n");
}

#[test]
fn variables_are_listed_by_recent_use_without_private_names_modules_or_builtins() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    python(&mut host, "a = 1").ok();
    python(&mut host, "b = 'two'").ok();
    let reply = python(&mut host, "c = [3]");
    assert_eq!(
        variable_lines(&reply),
        ["  c: list", "  b: str", "  a: int"]
    );

    let reply = python(&mut host, "a += 1");
    assert_eq!(
        variable_lines(&reply),
        ["  a: int", "  c: list", "  b: str"]
    );

    // Several mentioned at once: to the front, in namespace order.
    let reply = python(&mut host, "total = b * a");
    assert_eq!(
        variable_lines(&reply),
        ["  a: int", "  b: str", "  total: str", "  c: list"]
    );

    let reply = python(
        &mut host,
        "import json\nfrom os import path\n_private = 1\nlen = len\n\
         def f(): pass\nclass Point: pass\np = Point()",
    );
    assert_eq!(
        variable_lines(&reply),
        [
            "  f: function",
            "  Point: Point",
            "  p: Point",
            "  a: int",
            "  b: str",
            "  total: str",
            "  c: list",
        ]
    );

    // A word inside another word does not count; deleting removes.
    let reply = python(&mut host, "del p\ntotals = [c]");
    assert_eq!(
        variable_lines(&reply),
        [
            "  c: list",
            "  totals: list",
            "  f: function",
            "  Point: Point",
            "  a: int",
            "  b: str",
            "  total: str",
        ]
    );
}

#[test]
fn at_most_a_hundred_variables_are_shown() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let reply = python(
        &mut host,
        "for i in range(150):\n    globals()[f'v{i}'] = i",
    );
    reply.ok();
    let lines = variable_lines(&reply);
    assert_eq!(lines.len(), 101, "{lines:?}");
    assert_eq!(lines[0], "  i: int");
    assert_eq!(lines[1], "  v0: int");
    assert_eq!(lines[99], "  v98: int");
    assert_eq!(lines[100], "  ... and 51 more");
    assert!(
        reply.max_lines("python") as usize >= reply.screen("python").lines().count(),
        "the section must fit in its max_lines"
    );
}

#[test]
fn a_timeout_interrupts_the_code_and_keeps_the_namespace() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    python(&mut host, "x = 41").ok();
    let pid = pid_of_python(&mut host);
    let reply = host.command_with_timeout(
        "python",
        "import time\nprint('started', flush=True)\ntime.sleep(60)\nx = 0",
        1000,
    );
    let output = reply.failed();
    assert_in_order(
        output,
        &[
            "started\n",
            "Traceback (most recent call last):",
            "time.sleep(60)",
            "KeyboardInterrupt",
            "[Timed out after 1 s: the code was interrupted (KeyboardInterrupt). \
             Variables and imports are kept.]",
        ],
    );
    assert_eq!(python(&mut host, "x + 1").ok(), "42\n");
    assert_eq!(pid_of_python(&mut host), pid, "same interpreter");
}

#[test]
fn an_interpreter_that_does_not_stop_is_restarted_and_the_loss_is_reported() {
    let project = Project::new();
    let transcript = project.path().join("session.jsonl");
    let mut host = Host::builder()
        .arg("--transcript")
        .arg(transcript.display().to_string())
        .start(project.path());
    python(&mut host, "x = 1").ok();
    let old_pid = pid_of_python(&mut host);
    // SIGINT ignored at the OS level: as unresponsive as code stuck in C.
    let reply = host.command_with_timeout(
        "python",
        "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)",
        1000,
    );
    let output = reply.failed();
    assert!(
        output.contains("[Timed out after 1 s. Python ignores SIGINT"),
        "{output}"
    );
    assert!(
        output.contains("its variables and imports are lost"),
        "{output}"
    );
    assert!(
        output.contains("[A fresh interpreter is ready.]"),
        "{output}"
    );
    assert!(
        reply.screen("python").contains("Variables: (none)"),
        "{}",
        reply.screen("python")
    );
    assert!(wait_until_dead(old_pid, Duration::from_secs(10)));

    let output = python(&mut host, "x").failed().to_owned();
    assert!(output.contains("NameError"), "{output}");
    assert!(
        !output.contains("[Started a fresh"),
        "already fresh: {output}"
    );
    assert_ne!(pid_of_python(&mut host), old_pid);

    // The timeout and the restart are events in the transcript.
    host.finish();
    let events: Vec<serde_json::Value> = std::fs::read_to_string(&transcript)
        .expect("transcript")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    let find = |kind: &str, key: &str| {
        events
            .iter()
            .find(|e| e["event"] == kind && e[key] == "python")
            .unwrap_or_else(|| panic!("no {kind} event for python in {events:?}"))
            .clone()
    };
    assert_eq!(find("command_timed_out", "environment")["after_ms"], 1000);
    let restarted = find("environment_restarted", "name");
    assert_eq!(restarted["lost"], "variables and imports");
}

#[test]
fn exits_and_crashes_end_the_interpreter_and_the_next_command_gets_a_fresh_one() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let cases = [
        ("exit()", "exited with code 0", true),
        ("import sys\nsys.exit(3)", "exited with code 3", false),
        ("import os\nos._exit(1)", "exited with code 1", false),
        (
            "import ctypes\nctypes.string_at(0)",
            "was killed by signal SIGSEGV (segmentation fault)",
            false,
        ),
    ];
    for (code, how, success) in cases {
        python(&mut host, "marker = 1").ok();
        let pid = pid_of_python(&mut host);
        let reply = python(&mut host, code);
        assert_eq!(reply.success(), success, "{code}: {}", reply.0);
        assert!(
            reply.output().contains(&format!(
                "[Python {how}. Its variables and imports are gone; the next command starts \
                 a fresh interpreter.]"
            )),
            "{code}: {}",
            reply.output()
        );
        assert!(
            reply.screen("python").starts_with(&format!(
                "Python REPL (not running): the interpreter {how};"
            )),
            "{code}: {}",
            reply.screen("python")
        );
        assert!(wait_until_dead(pid, Duration::from_secs(10)), "{code}");

        let reply = python(&mut host, "marker");
        let output = reply.failed();
        assert!(
            output.starts_with(&format!(
                "[Started a fresh Python interpreter: the previous one {how}, so its variables \
                 and imports are gone.]\n"
            )),
            "{code}: {output}"
        );
        assert!(output.contains("NameError"), "{code}: {output}");
        assert_ne!(pid_of_python(&mut host), pid, "{code}");
    }
    // The crash left a Python-level trace of where it happened.
    let reply = python(&mut host, "import ctypes\nctypes.string_at(0)");
    assert_in_order(
        reply.failed(),
        &[
            "Fatal Python error: Segmentation fault",
            "line 2 in <module>",
        ],
    );
}

#[test]
fn output_over_the_cap_keeps_head_and_tail_and_saves_the_rest() {
    let project = Project::new();
    let mut host = Host::builder()
        .args(["--output-cap", "2KiB"])
        .start(project.path());
    let reply = python(&mut host, "for i in range(2000):\n    print(f'line {i}')");
    let output = reply.ok();
    assert!(output.starts_with("line 0\nline 1\n"), "{output}");
    assert!(output.ends_with("line 1999\n"), "{output}");
    assert!(output.len() < 4096, "{} bytes", output.len());
    let saved = output
        .split("the full output is saved in ")
        .nth(1)
        .and_then(|rest| rest.split(" ...]").next())
        .unwrap_or_else(|| panic!("no saved file named in: {output}"));
    let saved = PathBuf::from(saved);
    assert!(saved.starts_with(project.canonical().join(".envhost/output")));
    let expected: String = (0..2000).map(|i| format!("line {i}\n")).collect();
    assert_eq!(
        std::fs::read_to_string(saved).expect("saved output"),
        expected
    );
}

#[test]
fn secrets_are_filtered_and_the_working_directory_starts_at_the_project() {
    let project = Project::new();
    let mut host = Host::builder()
        .env("MY_SERVICE_API_KEY", "hunter2")
        .env("GITHUB_TOKEN", "ghp_secret")
        .env("ENVHOST_VISIBLE", "visible")
        .args(["--pass-env", "GITHUB_TOKEN"])
        .start(project.path());
    let reply = python(
        &mut host,
        "import os\nprint(os.environ.get('MY_SERVICE_API_KEY'), os.environ.get('GITHUB_TOKEN'), \
         os.environ.get('ENVHOST_VISIBLE'))\nprint(os.getcwd())",
    );
    assert_eq!(
        reply.ok(),
        format!(
            "None ghp_secret visible\n{}\n",
            project.canonical().display()
        )
    );
    let reply = python(&mut host, "os.makedirs('sub')\nos.chdir('sub')");
    assert!(
        reply.screen("python").starts_with(&format!(
            "Working directory: {}\n",
            project.canonical().join("sub").display()
        )),
        "{}",
        reply.screen("python")
    );
    // A directory name that is not UTF-8 is shown, not fatal.
    let reply = python(&mut host, "os.makedirs(b'odd\\xff')\nos.chdir(b'odd\\xff')");
    reply.ok();
    assert!(
        reply.screen("python").starts_with(&format!(
            "Working directory: {}\n",
            project.canonical().join("sub/odd?").display()
        )),
        "{}",
        reply.screen("python")
    );
}

#[test]
fn without_python_the_section_says_so_commands_fail_and_the_host_keeps_serving() {
    let project = Project::new();
    let empty_path = Project::new();
    let missing = project.path().join("no-such-python");
    for (mut host, message) in [
        (
            Host::builder()
                .env("PATH", &empty_path.path().display().to_string())
                .start(project.path()),
            "python3 was not found on PATH. Install Python 3, or start envhost with --python \
             /path/to/python3."
                .to_owned(),
        ),
        (
            Host::builder()
                .arg("--python")
                .arg(missing.display().to_string())
                .start(project.path()),
            format!(
                "{} (given with --python) does not exist.",
                missing.display()
            ),
        ),
    ] {
        assert_eq!(
            host.screen().screen("python"),
            format!(
                "Python REPL (unavailable): {message}\nAnother python: send to \"python:NAME\" \
                 to open one (its own state and section); close ends it."
            )
        );
        let reply = python(&mut host, "1 + 1");
        assert!(reply.failed().contains(&message), "{}", reply.output());
        // Still serving, and still refusing the same way.
        let unknown = host.command("nonexistent", "x");
        assert!(
            unknown
                .failed()
                .starts_with("Unknown environment: nonexistent\nAvailable: "),
            "{}",
            unknown.output()
        );
        assert!(python(&mut host, "2").failed().contains(&message));
        let (status, _) = host.finish();
        assert_eq!(status.code(), Some(0));
    }
}

#[test]
fn an_interpreter_that_cannot_start_is_explained_and_retried() {
    let project = Project::new();
    let fake = project.write(
        "fake-python",
        "#!/bin/sh\necho 'this is not the python you need' >&2\nexit 1\n",
    );
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("make the fake python executable");
    let mut host = Host::builder()
        .arg("--python")
        .arg(fake.display().to_string())
        .start(project.path());
    let message = format!("{} exited with code 1 before it was ready.", fake.display());
    for _ in 0..2 {
        let reply = python(&mut host, "1 + 1");
        assert_eq!(
            reply.failed(),
            format!(
                "this is not the python you need\n[Python could not be started: {message} Its \
                 output is above.]\n"
            )
        );
        assert_eq!(
            reply.screen("python"),
            format!(
                "Python REPL (could not start): {message} The next command tries again.\n\n{HELP}"
            )
        );
    }
}

#[test]
fn a_python_given_with_the_flag_is_used() {
    let project = Project::new();
    let real = python_path();
    let mut host = Host::builder()
        .arg("--python")
        .arg(real.display().to_string())
        .start(project.path());
    let reply = python(&mut host, "import sys\nsys.executable");
    let shown = reply.ok().trim().trim_matches('\'').to_owned();
    assert_eq!(
        PathBuf::from(shown).canonicalize().expect("sys.executable"),
        real.canonicalize().expect("python path")
    );
}

/// The real interpreter behind `python3` on PATH (pyenv shims resolved by
/// asking python itself).
fn python_path() -> PathBuf {
    let output = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 runs");
    PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
}

#[test]
fn the_interpreter_has_its_own_session_and_nothing_outlives_the_host() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let reply = python(
        &mut host,
        "import os, subprocess\nchild = subprocess.Popen(['sleep', '300'])\n\
         print(os.getpid(), os.getsid(0), os.getpgid(0), child.pid)",
    );
    let numbers: Vec<i32> = reply
        .ok()
        .split_whitespace()
        .map(|n| n.parse().expect("a number"))
        .collect();
    let [pid, session, group, sleeper] = numbers[..] else {
        panic!("unexpected output {numbers:?}");
    };
    assert_eq!(session, pid, "python leads its own session");
    assert_eq!(group, pid, "and its own process group");
    let (pid, sleeper) = (host.outer_pid(pid), host.outer_pid(sleeper));
    let host_session = nix_session_of(host.pid() as i32);
    assert_ne!(nix_session_of(pid), host_session);

    let (status, _) = host.finish();
    assert_eq!(status.code(), Some(0));
    assert!(wait_until_dead(pid, Duration::from_secs(10)), "python");
    assert!(wait_until_dead(sleeper, Duration::from_secs(10)), "sleep");
}

fn nix_session_of(pid: i32) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let after_name = &stat[stat.rfind(')').expect("stat format") + 1..];
    after_name
        .split_whitespace()
        .nth(3)
        .and_then(|s| s.parse().ok())
        .expect("session field")
}

/// Sends python code that sleeps for five minutes, without waiting for its
/// answer, and returns once the code is running.
fn start_sleeping_command(host: &mut Host, project: &Project) {
    host.send(&json!({
        "type": "command",
        "environment": "python",
        "command": "open('started', 'w').close()\nimport time\ntime.sleep(300)",
    }));
    let started = project.path().join("started");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !started.exists() {
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigterm_to_the_host_interrupts_running_code_and_leaves_nothing_behind() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let pid = pid_of_python(&mut host);
    start_sleeping_command(&mut host, &project);
    host.signal("TERM");
    let answer = host.recv();
    assert_eq!(answer["type"], "response", "{answer}");
    let output = answer["response"]["output"].as_str().unwrap_or_default();
    assert!(
        output
            .contains("Interrupted because the host was asked to stop (Ctrl-C, SIGINT or SIGTERM)"),
        "{output}"
    );
    let status = host.wait_exit(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0));
    assert!(wait_until_dead(pid, Duration::from_secs(10)));
    assert!(!process_alive(pid));
}

#[test]
fn the_interpreter_dies_with_a_host_that_is_killed() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let pid = pid_of_python(&mut host);
    // Busy, so the driver cannot notice that its request pipe closed.
    start_sleeping_command(&mut host, &project);
    host.signal("KILL");
    host.wait_exit(Duration::from_secs(30));
    // No cleanup code ran in the host: only the parent-death signal can
    // have ended the interpreter.
    assert!(wait_until_dead(pid, Duration::from_secs(10)));
}
