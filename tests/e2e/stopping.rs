//! How the host ends: a signal stops it even when nobody reads its output,
//! and when it must die its last words on stdout say why.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{Host, Project, envhost_binary, process_alive, wait_until_dead};

/// Starts `sleep 1000` in the background of the host's bash; its pid.
fn background_sleep(host: &mut Host) -> i32 {
    let reply = host.command("bash", "sleep 1000 & echo $!");
    host.outer_pid(last_number(reply.ok()))
}

/// The last line of `output` (`[1] 123` is job control's line before it).
fn last_number(output: &str) -> i32 {
    let line = output.trim().lines().last().unwrap_or_default();
    line.trim()
        .parse()
        .unwrap_or_else(|_| panic!("no pid in {output:?}"))
}

#[test]
fn sigterm_stops_the_host_while_its_output_is_full_and_nobody_reads() {
    let project = Project::new();
    let mut child = Command::new(envhost_binary())
        .args(["serve", "--project"])
        .arg(project.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start envhost");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let request = json!({"type":"command","environment":"bash","command":"sleep 1000 & echo $!"});
    writeln!(stdin, "{request}").unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).expect("the first answer");
    let answer: serde_json::Value = serde_json::from_str(&line).unwrap();
    let sleep = crate::harness::outer_pid(
        child.id(),
        last_number(answer["response"]["output"].as_str().unwrap()),
    );
    assert!(process_alive(sleep));

    // 2000 screens of over a kilobyte each: far more than a pipe holds
    // (64 KiB by default, 1 MiB at most), and nobody reads them.
    let screens = "{\"type\":\"screen\"}\n".repeat(2000);
    stdin.write_all(screens.as_bytes()).unwrap();
    stdin.flush().unwrap();
    // The host fills the pipe (less what this reader's buffer took ahead)
    // and waits on it: the unread bytes stop growing.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut before = 0;
    loop {
        thread::sleep(Duration::from_millis(300));
        let unread = unread_bytes(stdout.get_ref());
        if unread >= 32 * 1024 && unread == before {
            break;
        }
        before = unread;
        assert!(
            Instant::now() < deadline,
            "the host never blocked on its output"
        );
    }

    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("envhost ignored SIGTERM while its output was full");
        }
        thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
    assert!(
        wait_until_dead(sleep, Duration::from_secs(5)),
        "the background sleep {sleep} outlived the host"
    );
    // What it wrote is whole lines, up to where it stopped.
    let mut rest = String::new();
    let _ = stdout.read_to_string(&mut rest);
    assert!(rest.lines().count() > 10, "{} lines", rest.lines().count());
}

/// Bytes written into the pipe `read_end` and not read yet.
fn unread_bytes(read_end: &impl AsRawFd) -> usize {
    let mut bytes: nix::libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer.
    match unsafe { nix::libc::ioctl(read_end.as_raw_fd(), nix::libc::FIONREAD, &mut bytes) } {
        0 => usize::try_from(bytes).unwrap_or(0),
        _ => 0,
    }
}

#[test]
fn a_deadly_signal_ends_the_host_with_last_words_after_the_answer_in_progress() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let sleep = background_sleep(&mut host);
    host.send(&json!({"type":"command","environment":"bash","command":"sleep 30; echo never","id":"long"}));
    thread::sleep(Duration::from_millis(500));
    host.signal("USR1");
    // The command in progress is answered first...
    let answer = host.recv();
    assert_eq!(answer["type"], "response", "{answer}");
    assert_eq!(answer["id"], "long");
    assert_eq!(answer["response"]["success"], false);
    // ... then the last words, then nothing.
    let last = host.recv();
    assert_eq!(last["type"], "error", "{last}");
    let message = last["message"].as_str().unwrap();
    assert!(
        message.starts_with("envhost received SIGUSR1 and stops"),
        "{message}"
    );
    let status = host.wait_exit(Duration::from_secs(30));
    assert_eq!(status.code(), Some(128 + 10));
    assert!(wait_until_dead(sleep, Duration::from_secs(5)));
}

#[test]
fn sigabrt_says_its_last_words_once() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let sleep = background_sleep(&mut host);
    host.signal("ABRT");
    let last = host.recv();
    assert_eq!(last["type"], "error", "{last}");
    assert!(
        last["message"]
            .as_str()
            .unwrap()
            .starts_with("envhost is aborting (SIGABRT)"),
        "{last}"
    );
    let status = host.wait_exit(Duration::from_secs(30));
    assert_eq!(status.code(), Some(128 + 6));
    assert!(wait_until_dead(sleep, Duration::from_secs(5)));
}

#[test]
fn a_host_that_cannot_start_says_why_on_stdout() {
    let output = Command::new(envhost_binary())
        .args(["serve", "--project", "/definitely/not/here"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let last: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(last["type"], "error");
    assert!(
        last["message"].as_str().unwrap().starts_with(
            "envhost cannot serve: the project directory /definitely/not/here cannot be used"
        ),
        "{last}"
    );
}
