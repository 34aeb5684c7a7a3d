//! bash commands that outlive the wait, over NDJSON: `yield_ms`, `wait`,
//! `input`, `interrupt`, `restart` and shutdown while a command runs.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{Host, Project, Reply, process_alive, wait_until_dead};

fn start(host: &mut Host, command: &str, yield_ms: u64) -> Reply {
    host.request(&json!({
        "type": "command", "environment": "bash", "command": command, "yield_ms": yield_ms
    }))
}

fn wait(host: &mut Host, timeout_ms: u64) -> Reply {
    host.request(&json!({"type": "wait", "environment": "bash", "timeout_ms": timeout_ms}))
}

fn input(host: &mut Host, text: &str) -> Reply {
    host.request(&json!({
        "type": "input", "environment": "bash", "text": text, "timeout_ms": 5000
    }))
}

fn interrupt(host: &mut Host) -> Reply {
    host.request(&json!({"type": "interrupt", "environment": "bash"}))
}

#[test]
fn a_read_prompt_is_answered_with_input() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let started = Instant::now();
    let reply = start(
        &mut host,
        "read -p 'Name: ' name; echo \"Hello, $name\"",
        30_000,
    );
    assert!(reply.running(), "{}", reply.0);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "a command waiting for input yields at once, not at yield_ms"
    );
    assert!(reply.output().starts_with("Name: "), "{}", reply.0);
    assert!(reply.output().contains("waiting for input"), "{}", reply.0);
    let screen = reply.screen("bash");
    assert!(screen.contains("read -p"), "{screen}");
    let reply = input(&mut host, "John\n");
    assert!(!reply.running(), "{}", reply.0);
    assert_eq!(reply.ok(), "Hello, John\n");
    assert_eq!(host.command("bash", "echo $name").ok(), "John\n");
    host.finish();
}

#[test]
fn a_counting_loop_is_read_piece_by_piece_with_wait_no_line_lost_or_repeated() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let mut reply = start(
        &mut host,
        "for i in $(seq 1 40); do echo line-$i; sleep 0.05; done",
        300,
    );
    assert!(reply.running(), "{}", reply.0);
    let mut text = reply.own_output();
    let mut answers = 1;
    while reply.running() {
        reply = wait(&mut host, 400);
        text.push_str(&reply.own_output());
        answers += 1;
        assert!(answers < 100, "it never ended");
    }
    assert!(reply.success(), "{}", reply.0);
    assert!(answers >= 3, "read in pieces: {answers} answers");
    let expected: String = (1..=40).map(|i| format!("line-{i}\n")).collect();
    assert_eq!(text, expected);
    // The screen shows no running command any more.
    assert!(!host.screen().screen("bash").contains("Running for"));
    host.finish();
}

#[test]
fn a_server_is_started_polled_and_interrupted_and_its_port_is_free_again() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
        listener.local_addr().expect("its address").port()
    };
    let reply = start(
        &mut host,
        &format!("python3 -u -m http.server {port} --bind 127.0.0.1"),
        1500,
    );
    assert!(reply.running(), "{}", reply.0);
    assert!(reply.output().contains("Serving HTTP"), "{}", reply.0);
    // Polled from outside while it runs.
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("the server answers");
    stream
        .write_all(b"GET / HTTP/1.0\r\n\r\n")
        .expect("send a request");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read the answer");
    assert!(answer.starts_with("HTTP/1.0 200"), "{answer}");
    let reply = wait(&mut host, 1000);
    assert!(reply.running());
    assert!(
        reply.output().contains("\"GET / HTTP/1.0\" 200"),
        "{}",
        reply.0
    );
    let reply = interrupt(&mut host);
    assert!(!reply.running(), "{}", reply.0);
    assert!(!reply.success());
    assert!(
        reply.output().contains("interrupted as asked"),
        "{}",
        reply.0
    );
    assert!(
        TcpListener::bind(("127.0.0.1", port)).is_ok(),
        "the port is free again"
    );
    assert_eq!(host.command("bash", "echo next").ok(), "next\n");
    host.finish();
}

#[test]
fn a_busy_shell_refuses_a_command_while_the_other_environments_serve() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let reply = start(&mut host, "sleep 30", 200);
    assert!(reply.running());
    let refused = host.command("bash", "echo no");
    assert!(refused.failed().contains("sleep 30"), "{}", refused.0);
    assert_eq!(host.command("python", "print(6 * 7)").ok(), "42\n");
    let reply = interrupt(&mut host);
    assert!(!reply.running());
    host.finish();
}

#[test]
fn late_output_through_tee_comes_with_the_running_command() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    host.command("bash", "exec > >(tee -a build.log) 2>&1").ok();
    let reply = start(&mut host, "echo start; sleep 1; echo end", 200);
    assert!(reply.running(), "{}", reply.0);
    let mut text = reply.own_output();
    let mut reply = reply;
    while reply.running() {
        reply = wait(&mut host, 2000);
        text.push_str(&reply.own_output());
    }
    assert_eq!(text, "start\nend\n");
    assert_eq!(host.command("bash", "echo after").ok(), "after\n");
    assert_eq!(project.read("build.log"), "start\nend\nafter\n");
    host.finish();
}

#[test]
fn an_interrupted_pipeline_leaves_no_grandchild_that_ignores_sigint() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let reply = start(
        &mut host,
        "bash -c 'sleep 1031 & echo $! > a.pid; sleep 1032 & echo $! > b.pid; wait' | cat",
        500,
    );
    assert!(reply.running(), "{}", reply.0);
    let reply = interrupt(&mut host);
    assert!(!reply.running(), "{}", reply.0);
    for file in ["a.pid", "b.pid"] {
        let pid = host.outer_pid(project.read(file).trim().parse().expect("a pid"));
        assert!(
            wait_until_dead(pid, Duration::from_secs(10)),
            "{file}: process {pid} survived the interrupt"
        );
    }
    host.finish();
}

#[test]
fn a_yielded_command_keeps_its_own_timeout() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let reply = host.request(&json!({
        "type": "command", "environment": "bash", "command": "echo begun; sleep 60",
        "yield_ms": 200, "timeout_ms": 1500
    }));
    assert!(reply.running(), "{}", reply.0);
    let reply = wait(&mut host, 30_000);
    assert!(!reply.running(), "{}", reply.0);
    let output = reply.failed();
    assert!(output.contains("its timeout"), "{output}");
    host.finish();
}

#[test]
fn restart_ends_the_running_command_and_the_shell_and_says_what_was_lost() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    host.command("bash", "mkdir -p sub && cd sub && export GONE=1")
        .ok();
    let reply = start(
        &mut host,
        "sleep 1041 & echo $! > ../job.pid; echo working; sleep 1042",
        300,
    );
    assert!(reply.running(), "{}", reply.0);
    let reply = host.request(&json!({"type": "restart", "environment": "bash"}));
    assert!(!reply.running(), "{}", reply.0);
    let output = reply.ok();
    assert!(output.contains("restarted"), "{output}");
    assert!(output.contains("sleep 1042"), "{output}");
    assert!(output.contains("background jobs"), "{output}");
    let job = host.outer_pid(project.read("job.pid").trim().parse().expect("a pid"));
    assert!(wait_until_dead(job, Duration::from_secs(10)));
    let reply = host.command("bash", "pwd; echo \"GONE=$GONE\"");
    assert_eq!(
        reply.ok(),
        format!("{}\nGONE=\n", project.canonical().display())
    );
    host.finish();
}

#[test]
fn shutdown_during_a_running_command_leaves_no_process() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let reply = start(
        &mut host,
        "sleep 1051 & echo $! > bg.pid; (setsid sleep 1052 & echo $! > escaped.pid); sleep 1053",
        500,
    );
    assert!(reply.running(), "{}", reply.0);
    let pids: Vec<i32> = ["bg.pid", "escaped.pid"]
        .iter()
        .map(|file| host.outer_pid(project.read(file).trim().parse().expect("a pid")))
        .collect();
    for pid in &pids {
        assert!(process_alive(*pid));
    }
    let (status, _) = host.finish();
    assert!(status.success(), "{status:?}");
    for pid in pids {
        assert!(
            wait_until_dead(pid, Duration::from_secs(10)),
            "process {pid} outlived the host"
        );
    }
}

#[test]
fn control_characters_typed_with_input_act_as_on_a_terminal() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    // Ctrl-D ends `cat`'s input; what was typed before it comes back.
    let reply = start(&mut host, "cat > typed.txt; echo \"cat ended\"", 300);
    assert!(reply.running(), "{}", reply.0);
    let reply = input(&mut host, "first line\n");
    assert!(reply.running(), "{}", reply.0);
    let reply = input(&mut host, "\u{4}");
    assert!(!reply.running(), "{}", reply.0);
    assert_eq!(reply.ok(), "cat ended\n");
    assert_eq!(project.read("typed.txt"), "first line\n");
    // Ctrl-C interrupts the foreground job; the shell and its state stay.
    host.command("bash", "export KEPT=yes").ok();
    let reply = start(&mut host, "sleep 1081; echo not reached", 300);
    assert!(reply.running(), "{}", reply.0);
    let reply = input(&mut host, "\u{3}");
    assert!(!reply.running(), "{}", reply.0);
    assert!(!reply.success(), "{}", reply.0);
    assert!(!reply.output().contains("not reached"), "{}", reply.0);
    assert!(
        reply.screen("bash").contains("Last exit code: 130"),
        "{}",
        reply.0
    );
    assert_eq!(host.command("bash", "echo $KEPT").ok(), "yes\n");
    host.finish();
}

#[test]
fn yield_after_makes_yielding_the_default_and_the_end_gives_the_commands_own_outcome() {
    let project = Project::new();
    let mut host = Host::builder()
        .args(["--yield-after", "300ms"])
        .start(project.path());
    // Quick commands answer as always.
    assert_eq!(host.command("bash", "echo quick").ok(), "quick\n");
    let reply = host.request(&json!({
        "type": "command", "environment": "bash",
        "command": "mkdir -p later && cd later && echo begun && sleep 1 && echo done && false"
    }));
    assert!(reply.running(), "{}", reply.0);
    assert!(
        reply.success(),
        "a running command has not failed: {}",
        reply.0
    );
    assert_eq!(reply.own_output(), "begun\n");
    // The screen shows what runs, for how long, how much it said, its last line.
    let screen = reply.screen("bash");
    for shown in [
        "Running for",
        "sleep 1",
        "Output so far",
        "last line: `begun`",
    ] {
        assert!(screen.contains(shown), "{shown:?} missing from:\n{screen}");
    }
    let mut reply = reply;
    while reply.running() {
        reply = wait(&mut host, 5000);
    }
    assert!(
        !reply.success(),
        "false was the command's last word: {}",
        reply.0
    );
    assert!(reply.output().contains("done"), "{}", reply.0);
    let screen = reply.screen("bash");
    assert!(screen.contains("later"), "the final directory: {screen}");
    assert!(screen.contains("Last exit code: 1"), "{screen}");
    assert!(!screen.contains("Running for"), "{screen}");
    host.finish();
}

#[test]
fn text_typed_into_a_command_that_never_reads_it_is_not_run_by_the_shell() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    host.command("bash", "export KEPT=yes").ok();
    // Whole lines: the shell would read them as its next commands.
    let reply = start(&mut host, "sleep 1", 200);
    assert!(reply.running(), "{}", reply.0);
    let reply = input(&mut host, "touch typed-ahead; echo ran\nsecond line\n");
    let mut reply = reply;
    while reply.running() {
        reply = wait(&mut host, 5000);
    }
    assert!(reply.success(), "{}", reply.0);
    assert!(!reply.output().contains("ran"), "{}", reply.0);
    assert!(reply.output().contains("discarded"), "{}", reply.0);
    // A partial line: it would be glued to the front of the next command.
    let reply = start(&mut host, "sleep 1", 200);
    assert!(reply.running(), "{}", reply.0);
    let mut reply = input(&mut host, "touch partial; echo half");
    while reply.running() {
        reply = wait(&mut host, 5000);
    }
    assert!(reply.success(), "{}", reply.0);
    let reply = host.command("bash", "echo \"next $KEPT\"");
    assert_eq!(reply.ok(), "next yes\n", "the shell and its state survive");
    let reply = host.command("bash", "ls");
    assert_eq!(reply.ok(), "", "nothing typed was run: {}", reply.0);
    host.finish();
}
