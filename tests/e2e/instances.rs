//! Several shells at once, over NDJSON: `bash:NAME` and `python:NAME`
//! instances with their own state and screen section, `close`, the limit
//! on open instances, the refusals of bad addresses, and `--resume`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{GONE, Host, Project, Reply, process_alive, wait_until_dead};

fn control(host: &mut Host, kind: &str, environment: &str) -> Reply {
    host.request(&json!({"type": kind, "environment": environment}))
}

fn yielding(host: &mut Host, environment: &str, command: &str, yield_ms: u64) -> Reply {
    host.request(&json!({
        "type": "command", "environment": environment, "command": command, "yield_ms": yield_ms
    }))
}

/// Where each key starts in the raw answer line (serde_json's maps sort
/// their keys, so the order is read from the text).
fn key_position(line: &str, key: &str) -> usize {
    line.find(&format!("\"{key}\":{{\"content\""))
        .unwrap_or_else(|| panic!("no {key} section in {line}"))
}

/// The done-when of issue #34: a server runs in `bash:server`, is tested
/// from `bash`, its log is read in its own section and answers, it is
/// interrupted, and nothing it started outlives `close`.
#[test]
fn a_server_in_one_instance_is_tested_from_another_then_interrupted_and_closed() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    host.command("bash", "export MINE=default").ok();

    let started = yielding(
        &mut host,
        "bash:server",
        "python3 -u -m http.server 0 --bind 127.0.0.1",
        1500,
    );
    assert!(started.running(), "{}", started.0);
    let mut log = started.own_output();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !log.contains("Serving HTTP") {
        assert!(
            Instant::now() < deadline,
            "the server never said its port: {log}"
        );
        let more =
            host.request(&json!({"type": "wait", "environment": "bash:server", "timeout_ms": 500}));
        log.push_str(&more.own_output());
    }
    let port: u16 = log
        .split(" port ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|port| port.parse().ok())
        .unwrap_or_else(|| panic!("no port in {log}"));
    let section = started.screen("bash:server");
    assert!(section.contains("http.server"), "{section}");
    assert!(!started.screen("bash").contains("http.server"));

    // From the default shell, which keeps its own state meanwhile.
    let fetched = host.command(
        "bash",
        &format!(
            "echo $MINE; python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{port}/').status)\""
        ),
    );
    assert_eq!(fetched.ok(), "default\n200\n");
    // The server's log is read in its own instance, apart from bash's.
    let served =
        host.request(&json!({"type": "wait", "environment": "bash:server", "timeout_ms": 2000}));
    assert!(served.running(), "{}", served.0);
    assert!(
        served.output().contains("\"GET / HTTP/1.1\" 200"),
        "{}",
        served.0
    );
    assert!(!fetched.output().contains("GET /"), "{}", fetched.0);

    let stopped = control(&mut host, "interrupt", "bash:server");
    assert!(!stopped.running(), "{}", stopped.0);
    assert!(
        !stopped.screen("bash:server").contains("http.server"),
        "{}",
        stopped.0
    );
    let refused = host.command(
        "bash",
        &format!(
            "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}))\" 2>/dev/null && echo open || echo refused"
        ),
    );
    assert!(refused.output().contains("refused"), "{}", refused.0);

    // A job and a command left running in the instance end with it.
    host.command("bash:server", "sleep 300 & echo $! > job.pid")
        .ok();
    let job = host.outer_pid(project.read("job.pid").trim().parse().expect("a pid"));
    assert_ne!(job, GONE);
    assert!(process_alive(job));
    let running = yielding(
        &mut host,
        "bash:server",
        "sh -c 'echo $$ > run.pid; exec sleep 301'",
        500,
    );
    assert!(running.running(), "{}", running.0);
    let command = host.outer_pid(project.read("run.pid").trim().parse().expect("a pid"));
    assert!(process_alive(command));

    let closed = control(&mut host, "close", "bash:server");
    let words = closed.ok();
    assert!(
        words.starts_with("Closed bash:server: ended the shell"),
        "{words}"
    );
    assert!(words.contains("background job %1 `sleep 300`"), "{words}");
    assert!(
        words.contains("the running command `sh -c 'echo"),
        "{words}"
    );
    assert!(!closed.section_names().contains(&"bash:server".to_owned()));
    assert!(
        wait_until_dead(job, Duration::from_secs(10)),
        "the job outlived close"
    );
    assert!(
        wait_until_dead(command, Duration::from_secs(10)),
        "the running command outlived close"
    );

    // Closed means gone: going on with it is refused, a command reopens it
    // fresh in the project directory.
    let gone = control(&mut host, "wait", "bash:server");
    assert!(
        gone.failed()
            .starts_with("bash:server is not open, so there is nothing to wait"),
        "{}",
        gone.0
    );
    let fresh = host.command("bash:server", "pwd; jobs | wc -l");
    assert_eq!(
        fresh.ok(),
        format!("{}\n0\n", project.canonical().display())
    );
    let (status, _) = host.finish();
    assert!(status.success());
}

#[test]
fn each_instance_keeps_its_own_state_and_section_after_its_kind() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    host.command("bash:a", "cd /tmp && X=1 && false").failed();
    assert_eq!(
        host.command("bash", "echo \"[$X]\"; pwd").ok(),
        format!("[]\n{}\n", project.canonical().display())
    );
    let a = host.command("bash:a", "echo \"[$X]\"; pwd");
    assert_eq!(a.ok(), "[1]\n/tmp\n");
    assert!(a.screen("bash:a").contains("/tmp"), "{}", a.0);
    host.command("python:w", "v = 42").ok();
    let default = host.command("python", "'v' in globals()");
    assert_eq!(default.ok().trim(), "False");
    assert!(
        default.screen("python:w").contains("v: int"),
        "{}",
        default.0
    );
    assert_eq!(host.command("python:w", "v + 1").ok().trim(), "43");

    // Sections: each instance after its kind's default; the default's help
    // says once how to open another.
    host.send(&json!({"type": "screen"}));
    let line = host.recv_text();
    let order: Vec<usize> = ["bash", "bash:a", "python", "python:w", "editor"]
        .iter()
        .map(|key| key_position(&line, key))
        .collect();
    assert!(order.windows(2).all(|pair| pair[0] < pair[1]), "{line}");
    let screen: Value = serde_json::from_str(&line).unwrap();
    let text = |key: &str| {
        screen["screen"][key]["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(text("bash").contains("Another bash: send to \"bash:NAME\""));
    assert!(text("python").contains("Another python: send to \"python:NAME\""));
    assert!(
        !text("bash:a").contains("Another bash"),
        "{}",
        text("bash:a")
    );

    // Long output is saved in a file named for the instance.
    for (instance, code, stem) in [
        ("bash:a", "seq 1 100000", "bash-a-"),
        ("python:w", "print('x' * 300000)", "python-w-"),
    ] {
        let long = host.command(instance, code);
        let text = long.ok();
        let saved = text
            .split("the full output is saved in ")
            .nth(1)
            .and_then(|rest| rest.split(&[' ', ']', '\n'][..]).next())
            .unwrap_or_else(|| panic!("{instance} names its saved output: {}", long.0));
        let name = std::path::Path::new(saved)
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or_default();
        assert!(
            name.starts_with(stem),
            "{instance} saved its output as {saved}"
        );
        assert!(
            std::fs::metadata(saved).is_ok_and(|m| m.len() > 100_000),
            "{saved}"
        );
    }

    // Timeouts and restart act on the instance alone.
    let slow = host.command_with_timeout("bash:a", "sleep 20", 500);
    assert!(slow.failed().contains("(its timeout)"), "{}", slow.0);
    assert_eq!(host.command("bash:a", "echo $X").ok(), "1\n");
    let restarted = control(&mut host, "restart", "bash:a");
    assert!(restarted.success(), "{}", restarted.0);
    assert_eq!(host.command("bash:a", "echo \"[$X]\"").ok(), "[]\n");
    assert_eq!(host.command("python:w", "v").ok().trim(), "42");
    host.finish();
}

#[test]
fn bad_addresses_and_too_many_instances_are_refused_in_words_and_nothing_is_created() {
    let project = Project::new();
    let mut host = Host::builder()
        .args(["--max-instances", "2"])
        .start(project.path());
    let long = format!("bash:{}", "x".repeat(33));
    for (environment, expected) in [
        (
            "bash:",
            "bash: names no instance: put a name after the colon",
        ),
        ("bash:my server", "bash:my server is not an instance name"),
        ("bash:..", "bash:.. is not an instance name"),
        ("bash:a:b", "bash:a:b is not an instance name"),
        (
            long.as_str(),
            "is 33 characters long; an instance name has at most 32",
        ),
        (
            "editor:x",
            "editor has one instance only: send to editor itself",
        ),
        ("ruby:x", "Unknown environment kind ruby in ruby:x"),
        (":x", "Unknown environment kind (empty) in :x"),
    ] {
        let refused = host.command(environment, "echo created > created.txt");
        let words = refused.failed();
        assert!(words.contains(expected), "{environment}: {words}");
        assert!(
            refused.section_names().iter().all(|key| !key.contains(':')),
            "{environment}: {:?}",
            refused.section_names()
        );
    }
    assert!(!project.path().join("created.txt").exists());

    let default = control(&mut host, "close", "bash");
    let words = default.failed();
    assert!(
        words.starts_with("bash is the default bash and cannot be closed"),
        "{words}"
    );
    assert!(
        words.contains(r#"{"type":"restart","environment":"bash"}"#),
        "{words}"
    );
    let editor = control(&mut host, "close", "editor");
    assert!(
        editor
            .failed()
            .starts_with("editor cannot be closed: only named instances (bash:NAME, python:NAME)"),
        "{}",
        editor.0
    );
    let missing = control(&mut host, "close", "bash:nope");
    assert!(
        missing
            .failed()
            .starts_with("bash:nope is not open, so there is nothing to close"),
        "{}",
        missing.0
    );

    host.command("bash:one", "true").ok();
    host.command("bash:two", "true").ok();
    let third = host.command("bash:three", "echo created > created.txt");
    let words = third.failed();
    assert!(
        words.starts_with("bash:three was not opened: 2 instances of bash are open"),
        "{words}"
    );
    assert!(words.contains("Open: bash:one, bash:two."), "{words}");
    assert!(
        words.contains(r#"{"type":"close","environment":"bash:one"}"#),
        "{words}"
    );
    assert!(!third.section_names().contains(&"bash:three".to_owned()));
    // The limit is per kind.
    host.command("python:p", "1").ok();
    control(&mut host, "close", "bash:one").ok();
    host.command("bash:three", "true").ok();
    assert!(!project.path().join("created.txt").exists());
    let (status, _) = host.finish();
    assert!(status.success());
}

#[test]
fn instances_come_back_on_resume_and_a_closed_one_does_not() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    host.command("bash:srv", "cd /tmp && export K=kept").ok();
    host.command("python:p", "z = 5").ok();
    host.command("bash:gone", "export G=1").ok();
    control(&mut host, "close", "bash:gone").ok();
    let (status, _) = host.finish();
    assert!(status.success());

    let mut host = Host::builder().arg("--resume").start(project.path());
    let first = host.command("bash:srv", "echo $K; pwd");
    let output = first.output();
    assert!(output.contains("Session resumed"), "{output}");
    assert!(output.contains("- bash:srv: restored"), "{output}");
    assert!(output.contains("kept\n/tmp\n"), "{output}");
    assert!(!output.contains("bash:gone"), "{output}");
    assert!(!first.section_names().contains(&"bash:gone".to_owned()));
    assert_eq!(host.command("python:p", "z").ok().trim(), "5");
    host.finish();
}
