//! Python commands that outlive the wait, over NDJSON: a command sent with
//! `yield_ms` answers with its output so far and keeps running; `wait`
//! reads on, `input` types into its stdin (`input()` works), `interrupt`
//! stops it and keeps the variables, `restart` starts afresh and says what
//! was lost, and shutting the host down leaves no process behind.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{Host, Project, Reply, process_alive, wait_until_dead};

fn python(host: &mut Host, code: &str) -> Reply {
    host.command("python", code)
}

fn yielding(host: &mut Host, code: &str, yield_ms: u64) -> Reply {
    host.send(&json!({
        "type": "command", "environment": "python", "command": code, "yield_ms": yield_ms
    }));
    Reply(host.recv())
}

fn control(host: &mut Host, message: Value) -> Reply {
    host.send(&message);
    Reply(host.recv())
}

fn wait(host: &mut Host, timeout_ms: u64) -> Reply {
    control(
        host,
        json!({"type": "wait", "environment": "python", "timeout_ms": timeout_ms}),
    )
}

fn input(host: &mut Host, text: &str) -> Reply {
    control(
        host,
        json!({"type": "input", "environment": "python", "text": text, "timeout_ms": 5000}),
    )
}

#[test]
fn input_is_answered_while_the_command_waits() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let started = Instant::now();
    let reply = yielding(
        &mut host,
        "name = input('Your name? ')\nprint('Hello', name)",
        20_000,
    );
    // It yields as soon as it waits for input, long before yield_ms.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took {:?}",
        started.elapsed()
    );
    assert!(reply.running(), "{}", reply.0);
    assert!(reply.success(), "{}", reply.0);
    let output = reply.output();
    assert!(output.starts_with("Your name? "), "{output}");
    assert!(output.contains("waiting for input"), "{output}");
    // While it waits, wait answers at once with the same news.
    let reply = wait(&mut host, 10_000);
    assert!(reply.running());
    assert!(
        reply.output().contains("waiting for input"),
        "{}",
        reply.output()
    );

    let reply = input(&mut host, "Ada\n");
    assert!(!reply.running(), "{}", reply.0);
    assert_eq!(reply.ok(), "Hello Ada\n");
    assert_eq!(python(&mut host, "name").ok(), "'Ada'\n");
    // A command sent without yield_ms still cannot wait for a keyboard.
    let output = python(&mut host, "input()").failed().to_owned();
    assert!(output.contains("input() is not available"), "{output}");
}

#[test]
fn stdin_takes_several_lines_and_ctrl_d_ends_it() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let reply = yielding(
        &mut host,
        "import sys, subprocess\ndata = sys.stdin.read()\nprint(repr(data))\n\
         print(subprocess.run(['cat'], capture_output=True).stdout)",
        500,
    );
    assert!(reply.running(), "{}", reply.0);
    assert!(
        reply.output().contains("waiting for input"),
        "{}",
        reply.output()
    );
    let reply = input(&mut host, "abc\ndéf\n\u{4}");
    assert!(!reply.running(), "{}", reply.0);
    // The subprocess reads the same, already ended, stdin.
    assert_eq!(reply.ok(), "'abc\\ndéf\\n'\nb''\n");
}

#[test]
fn a_long_loop_is_read_piece_by_piece_without_losing_or_repeating_a_line() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let reply = yielding(
        &mut host,
        // One write per line: print('line', i) writes its pieces one by
        // one (stdout is unbuffered), and an answer may fall between them.
        "import sys, time\nfor i in range(60):\n    sys.stdout.write(f'line {i}\\n')\n    time.sleep(0.03)",
        300,
    );
    assert!(reply.running(), "{}", reply.0);
    assert!(
        reply
            .output()
            .contains("[envhost] The command is still running"),
        "{}",
        reply.output()
    );
    let mut collected = reply.own_output();
    let mut answers = 1;
    let mut last = reply;
    while last.running() {
        last = wait(&mut host, 300);
        collected.push_str(&last.own_output());
        answers += 1;
        assert!(answers < 200, "never ended");
    }
    assert!(last.success());
    assert!(answers >= 3, "read in pieces: {answers}");
    let expected: String = (0..60).map(|i| format!("line {i}\n")).collect();
    assert_eq!(collected, expected);
    // Nothing runs any more.
    let reply = wait(&mut host, 100);
    assert!(!reply.success());
    assert!(
        reply.output().contains("Nothing is running"),
        "{}",
        reply.output()
    );
}

#[test]
fn interrupt_stops_the_command_and_keeps_the_variables() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    python(&mut host, "x = 5").ok();
    let reply = yielding(
        &mut host,
        "import time\nx = 6\nprint('started', flush=True)\nwhile True:\n    time.sleep(0.05)",
        500,
    );
    assert!(reply.running(), "{}", reply.0);
    assert!(
        reply.output().starts_with("started\n"),
        "{}",
        reply.output()
    );
    // A busy python refuses a new command; other environments serve.
    let refused = python(&mut host, "x").failed().to_owned();
    assert!(refused.contains("still running"), "{refused}");
    let reply = host.command("bash", "echo bash works");
    assert_eq!(reply.ok(), "bash works\n");

    let reply = control(
        &mut host,
        json!({"type": "interrupt", "environment": "python"}),
    );
    assert!(!reply.running(), "{}", reply.0);
    let output = reply.failed();
    assert!(output.contains("KeyboardInterrupt"), "{output}");
    assert!(
        output.contains("Variables and imports are kept"),
        "{output}"
    );
    assert!(!output.contains("started\n"), "already delivered: {output}");
    assert_eq!(python(&mut host, "x").ok(), "6\n");
}

#[test]
fn ctrl_c_typed_as_input_interrupts_input() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    python(&mut host, "kept = 1").ok();
    let reply = yielding(&mut host, "answer = input('? ')", 20_000);
    assert!(reply.running(), "{}", reply.0);
    let reply = input(&mut host, "\u{3}");
    assert!(!reply.running(), "{}", reply.0);
    assert!(
        reply.failed().contains("KeyboardInterrupt"),
        "{}",
        reply.output()
    );
    assert_eq!(python(&mut host, "kept").ok(), "1\n");
}

#[test]
fn restart_starts_a_fresh_interpreter_and_says_what_was_lost() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    python(
        &mut host,
        "import os\nx = 1\nos.makedirs('sub', exist_ok=True)\nos.chdir('sub')",
    )
    .ok();
    let old_pid: i32 = python(&mut host, "os.getpid()")
        .ok()
        .trim()
        .parse()
        .unwrap();
    let old_pid = host.outer_pid(old_pid);
    let reply = control(
        &mut host,
        json!({"type": "restart", "environment": "python"}),
    );
    let output = reply.ok().to_owned();
    assert!(
        output.contains("[Restarted python: a fresh interpreter in"),
        "{output}"
    );
    assert!(output.contains("the variables x"), "{output}");
    assert!(wait_until_dead(old_pid, Duration::from_secs(10)));
    let screen = reply.screen("python");
    let project_dir = project.canonical();
    assert!(
        screen.contains(&format!("Working directory: {}\n", project_dir.display())),
        "{screen}"
    );
    assert!(python(&mut host, "x").failed().contains("NameError"));

    // A restart during a running command ends it (and what it started).
    let reply = yielding(
        &mut host,
        "import os, subprocess, time\nchild = subprocess.Popen(['sleep', '300'])\n\
         print(os.getpid(), child.pid, flush=True)\nwhile True:\n    time.sleep(0.05)",
        1000,
    );
    assert!(reply.running());
    let pids: Vec<i32> = reply
        .own_output()
        .split_whitespace()
        .map(|n| n.parse().expect("a pid"))
        .collect();
    let pids = host.outer_pids(&pids);
    let reply = control(
        &mut host,
        json!({"type": "restart", "environment": "python"}),
    );
    let output = reply.ok().to_owned();
    assert!(output.contains("the running command"), "{output}");
    for pid in pids {
        assert!(wait_until_dead(pid, Duration::from_secs(10)), "{pid} lives");
    }
    assert_eq!(python(&mut host, "1 + 1").ok(), "2\n");
}

#[test]
fn shutdown_while_a_command_runs_leaves_no_process() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let reply = yielding(
        &mut host,
        "import os, subprocess, time\nchild = subprocess.Popen(['sleep', '300'])\n\
         print(os.getpid(), child.pid, flush=True)\nwhile True:\n    time.sleep(0.05)",
        1000,
    );
    assert!(reply.running(), "{}", reply.0);
    let pids: Vec<i32> = reply
        .own_output()
        .split_whitespace()
        .map(|n| n.parse().expect("a pid"))
        .collect();
    let pids = host.outer_pids(&pids);
    assert_eq!(pids.len(), 2);
    assert!(pids.iter().all(|&pid| process_alive(pid)));
    let (status, _) = host.finish();
    assert_eq!(status.code(), Some(0));
    for pid in pids {
        assert!(
            wait_until_dead(pid, Duration::from_secs(10)),
            "{pid} outlived the host"
        );
    }
}
