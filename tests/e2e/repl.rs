//! `envhost repl`, the front end for people, driven through a pipe the way
//! `scripts/demo` drives it.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{Project, envhost_binary};

/// Runs the REPL on `project` with `input`; returns (exit code, stdout).
fn repl(project: &Project, input: &str) -> (Option<i32>, String) {
    let mut child = Command::new(envhost_binary())
        .args(["repl", "--project"])
        .arg(project.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start envhost repl");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write the session");
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().expect("try_wait").is_none() {
        assert!(Instant::now() < deadline, "the REPL did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().expect("output");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

#[test]
fn commands_blocks_and_meta_commands_work_through_a_pipe() {
    let project = Project::new();
    let session = "\
bash: echo hello from bash
python:
def f(x):

    return x + 1

f(41)
.
:screen
this line has no environment
:quit
bash: echo never runs
";
    let (code, out) = repl(&project, session);
    assert_eq!(code, Some(0), "{out}");
    // The first screen, then each command echoed, its status and output.
    assert!(
        out.starts_with("envhost repl: environments bash, python, editor."),
        "{out}"
    );
    assert!(
        out.contains(
            ">>> bash:\n>>>   echo hello from bash\n---- bash: ok ----\nhello from bash\n"
        ),
        "{out}"
    );
    // A multi-line block with a blank line inside a function.
    assert!(out.contains(">>>   def f(x):\n"), "{out}");
    assert!(out.contains("---- python: ok ----\n42\n"), "{out}");
    // After a command, only the sections that changed are printed.
    let after_python = &out[out.find("---- python: ok ----").unwrap()..];
    assert!(
        after_python.contains("PYTHON ===================="),
        "{out}"
    );
    assert!(after_python.contains("(unchanged: bash, editor)"), "{out}");
    // :screen prints every section again.
    let tail = &out[out.rfind("(unchanged: bash, editor)").unwrap()..];
    assert!(
        tail.contains("BASH ====================") && tail.contains("EDITOR ===================="),
        "{out}"
    );
    assert!(
        out.contains("Start the line with an environment name and a colon"),
        "{out}"
    );
    // :quit stopped reading.
    assert!(!out.contains("never runs\n---- bash"), "{out}");
}

#[test]
fn end_of_input_stops_the_repl_and_its_shell() {
    let project = Project::new();
    let (code, out) = repl(&project, "bash: sleep 300 & echo $$ $! > pids\n");
    assert_eq!(code, Some(0), "{out}");
    for pid in project.read("pids").split_whitespace() {
        let pid: i32 = pid.parse().expect("pid");
        assert!(
            crate::harness::wait_until_dead(pid, Duration::from_secs(10)),
            "process {pid} (the shell or its job) outlived the REPL"
        );
    }
}
