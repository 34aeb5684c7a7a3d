//! The python environment under attack from the code it runs: forged
//! replies and requests on the driver's channels, an interpreter stopped
//! with SIGSTOP, the driver's descriptors closed, SIGINT ignored, output
//! printed by a background thread after its command ended, children that
//! ignore SIGINT left behind by an interrupted command. Each test
//! checks that the host's answer is the truth: the command's own output,
//! the state it really left, and a sentence that names what happened.

use std::time::Duration;

use crate::harness::{Host, Project, Reply, process_alive, wait_until_dead};

fn python(host: &mut Host, code: &str) -> Reply {
    host.command("python", code)
}

fn pid_of_python(host: &mut Host) -> i32 {
    let inner: i32 = python(host, "import os as _os\n_os.getpid()")
        .ok()
        .trim()
        .parse()
        .expect("a pid");
    host.outer_pid(inner)
}

/// Code that writes forged "done" replies (the format without a key, and
/// the keyed format with guessed tags, for every sequence number up to 64;
/// then a line too long to be the driver's and a line left unfinished)
/// to every pipe and socket it can find among its descriptors, and forged
/// requests into every pipe through a new opening of `/proc/self/fd/N`;
/// then prints, after the forgeries, what the command really outputs.
const FORGER: &str = r#"
import json, os, stat, time
fake = {"type": "done", "status": "ok", "cwd": "/forged", "variables": [["forged", "int"]]}
replies = [json.dumps(fake).encode() + b"\n"]
requests = [b'\n{"code": "injected = 1"}\n']
for seq in range(64):
    body = dict(fake, seq=seq)
    replies.append(b"0" * 64 + b" " + json.dumps(body).encode() + b"\n")
    request = {"seq": seq, "op": "run", "code": "injected = 1", "input": False}
    requests.append(b"\n" + b"0" * 64 + b" " + json.dumps(request).encode() + b"\n")
# Last, a line longer than any of the driver's, then one left unfinished,
# for the driver's next reply to run into.
unfinished = [b"x" * 70000, b"0" * 64 + b' {"type": "done", "seq": 1, "cwd": "/forged-']
targets = []
written = 0
for name in os.listdir("/proc/self/fd"):
    fd = int(name)
    if fd <= 2:
        continue
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        continue
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        continue
    targets.append(fd)
    for frame in replies:
        try:
            os.write(fd, frame)
            written += 1
        except OSError:
            pass
    try:
        with open("/proc/self/fd/%d" % fd, "wb", buffering=0) as pipe:
            for frame in requests:
                pipe.write(frame)
                written += 1
    except OSError:
        pass
for fd in targets:
    for frame in unfinished:
        try:
            os.write(fd, frame)
        except OSError:
            pass
time.sleep(0.5)
print("real output after", "forgeries" if written else "no forgery")
"#;

#[test]
fn forged_replies_and_requests_are_refused_and_never_shift_answers() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    python(&mut host, "before = 1").ok();
    let reply = python(&mut host, FORGER);
    let output = reply.ok();
    assert!(
        output.contains("real output after forgeries"),
        "the answer must be the command's own output: {output}"
    );
    assert!(
        output.contains("did not come from envhost's driver") && output.contains("ignored"),
        "the forgeries are reported: {output}"
    );
    let screen = reply.screen("python");
    let project_dir = project.canonical();
    assert!(
        screen.contains(&format!("Working directory: {}", project_dir.display())),
        "{screen}"
    );
    assert!(!screen.contains("forged"), "{screen}");
    assert!(screen.contains("before: int"), "{screen}");

    // Every later answer belongs to its own command: nothing carried over,
    // and no injected request ever ran.
    let reply = python(&mut host, "print('second', 'injected' in globals())");
    let output = reply.ok();
    assert!(output.starts_with("second False\n"), "{output}");
    assert!(!output.contains("real output"), "{output}");
    assert_eq!(python(&mut host, "before + 1").ok(), "2\n");
    assert_eq!(python(&mut host, "print('third')").ok(), "third\n");
}

#[test]
fn a_stopped_interpreter_is_continued_and_keeps_its_variables() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    python(&mut host, "x = 5").ok();
    let pid = pid_of_python(&mut host);
    let reply = host.command_with_timeout(
        "python",
        "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)\nprint('continued')",
        20_000,
    );
    let output = reply.ok();
    assert!(output.contains("continued"), "{output}");
    assert!(
        output.contains("Python was stopped (SIGSTOP") && output.contains("SIGCONT"),
        "{output}"
    );
    assert!(!output.contains("lost"), "{output}");
    assert_eq!(python(&mut host, "x").ok(), "5\n");
    assert_eq!(pid_of_python(&mut host), pid, "the same interpreter");
}

#[test]
fn a_stop_at_the_deadline_is_diagnosed_and_the_interrupt_keeps_the_variables() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    python(&mut host, "x = 6").ok();
    let pid = pid_of_python(&mut host);
    // Stopped, then (once continued) still busy: the interruption must
    // continue it first, so that KeyboardInterrupt can land.
    let reply = host.command_with_timeout(
        "python",
        "import os, signal, time\nos.kill(os.getpid(), signal.SIGSTOP)\ntime.sleep(60)",
        800,
    );
    let output = reply.failed();
    assert!(output.contains("KeyboardInterrupt"), "{output}");
    assert!(
        output.contains("Python was stopped (SIGSTOP") && output.contains("SIGCONT"),
        "{output}"
    );
    assert!(
        output.contains("Variables and imports are kept"),
        "{output}"
    );
    assert_eq!(python(&mut host, "x").ok(), "6\n");
    assert_eq!(pid_of_python(&mut host), pid);
}

#[test]
fn an_interrupt_asked_for_while_stopped_keeps_the_variables() {
    // The neighbour of the deadline's race: the agent's own interrupt of a
    // command that stopped itself (and, continued, would sleep for long).
    let project = Project::new();
    let mut host = Host::start(project.path());
    python(&mut host, "x = 8").ok();
    for round in 0..6 {
        let reply = host.request(&serde_json::json!({
            "type": "command", "environment": "python", "yield_ms": 300,
            "command": "import os, signal, time\nos.kill(os.getpid(), signal.SIGSTOP)\ntime.sleep(60)",
        }));
        assert!(reply.running(), "round {round}: {}", reply.0);
        let reply =
            host.request(&serde_json::json!({"type": "interrupt", "environment": "python"}));
        let output = reply.failed();
        assert!(
            output.contains("KeyboardInterrupt"),
            "round {round}: {output}"
        );
        assert!(
            output.contains("Variables and imports are kept"),
            "round {round}: {output}"
        );
        assert_eq!(python(&mut host, "x").ok(), "8\n", "round {round}");
    }
}

#[test]
fn code_that_closes_the_drivers_descriptors_is_diagnosed_as_such() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    python(&mut host, "x = 7").ok();
    let pid = pid_of_python(&mut host);
    let reply = python(
        &mut host,
        "import os\nos.closerange(3, 65536)\nprint('closed them')",
    );
    let output = reply.failed();
    assert!(output.contains("closed them"), "{output}");
    assert!(
        output.contains("The code closed the descriptors envhost talks to python through"),
        "{output}"
    );
    assert!(
        output.contains("its variables and imports are lost"),
        "{output}"
    );
    assert!(wait_until_dead(pid, Duration::from_secs(10)));
    let output = python(&mut host, "print('fresh')").ok().to_owned();
    assert!(output.contains("fresh"), "{output}");
    assert_ne!(pid_of_python(&mut host), pid);
}

#[test]
fn code_that_ignores_sigint_is_named_when_it_cannot_be_interrupted() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    python(&mut host, "x = 8").ok();
    let reply = host.command_with_timeout(
        "python",
        "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)",
        800,
    );
    let output = reply.failed();
    assert!(
        output.contains("Python ignores SIGINT (the code set signal.SIG_IGN for it)"),
        "{output}"
    );
    assert!(output.contains("ended with SIGTERM"), "{output}");
    assert!(
        output.contains("its variables and imports are lost"),
        "{output}"
    );
}

#[test]
fn code_that_swallows_keyboard_interrupt_is_said_not_to_stop() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let reply = host.command_with_timeout(
        "python",
        "import time\nwhile True:\n    try:\n        time.sleep(60)\n    except KeyboardInterrupt:\n        pass",
        800,
    );
    let output = reply.failed();
    assert!(
        output.contains("Python did not stop on KeyboardInterrupt (the code may be busy"),
        "{output}"
    );
    assert!(!output.contains("ignores SIGINT"), "{output}");
    assert!(output.contains("ended with SIGTERM"), "{output}");
}

/// A thread that reads one request off the driver's request pipe (the
/// read-only FIFO among the descriptors), as code reading descriptors it
/// does not own would, and keeps what it read. So that the thread, not the
/// driver, is the one reading when the next request arrives, a timer keeps
/// the driver busy in a signal handler for a while after the command ends.
const THIEF: &str = r#"
import fcntl, os, signal, stat, threading, time
stolen = []
def steal():
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if fd > 2 and stat.S_ISFIFO(os.fstat(fd).st_mode) and \
                    fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
                stolen.append(os.read(fd, 1 << 20))
                return
        except OSError:
            pass
threading.Thread(target=steal, daemon=True).start()
signal.signal(signal.SIGALRM, lambda *_: time.sleep(2))
signal.setitimer(signal.ITIMER_REAL, 0.3)
"#;

#[test]
fn a_request_taken_off_the_pipe_is_reported_and_the_namespace_kept() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    python(&mut host, "x = 1").ok();
    let pid = pid_of_python(&mut host);
    python(&mut host, THIEF).ok();
    // Sent while the driver sleeps in the timer's handler: only the thief
    // is reading the pipe.
    std::thread::sleep(Duration::from_millis(800));
    let reply = host.command_with_timeout("python", "x = 2", 3000);
    let output = reply.failed();
    assert!(
        output.contains("the code never reached python") && output.contains("nothing ran"),
        "{output}"
    );
    assert!(
        output.contains("Variables and imports are kept"),
        "{output}"
    );
    assert_eq!(python(&mut host, "x").ok(), "1\n");
    assert_eq!(python(&mut host, "len(stolen)").ok(), "1\n");
    assert_eq!(pid_of_python(&mut host), pid);
}

#[test]
fn output_printed_after_its_command_ended_is_shown_as_such_never_as_the_next_commands() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    // A thread (and a subprocess) that print a moment after the command
    // that started them has answered.
    let started = python(
        &mut host,
        "import threading, subprocess, sys\n\
         threading.Timer(0.3, lambda: print('late from a thread', flush=True)).start()\n\
         subprocess.Popen([sys.executable, '-c', \
         'import time; time.sleep(0.3); print(\"late from a process\", flush=True)'])\n\
         print('first')",
    )
    .ok()
    .to_owned();
    assert_eq!(started, "first\n");
    std::thread::sleep(Duration::from_millis(1500));
    let output = python(&mut host, "print('second')").ok().to_owned();
    let late_at = output
        .find("[Output that arrived after the previous command ended")
        .unwrap_or_else(|| panic!("the late output is announced: {output}"));
    let own_at = output
        .find("[This command's output:]")
        .unwrap_or_else(|| panic!("the command's own output is marked: {output}"));
    let late = &output[late_at..own_at];
    assert!(late.contains("late from a thread"), "{output}");
    assert!(late.contains("late from a process"), "{output}");
    assert_eq!(&output[own_at..], "[This command's output:]\nsecond\n");
    // Nothing arrived since: no announcement.
    assert_eq!(python(&mut host, "print('third')").ok(), "third\n");
    // Late output is not lost to a restart either.
    python(
        &mut host,
        "threading.Timer(0.3, lambda: print('late before the restart', flush=True)).start()",
    )
    .ok();
    std::thread::sleep(Duration::from_millis(1000));
    let restarted = host.request(&serde_json::json!({
        "type": "restart", "environment": "python"
    }));
    let output = restarted.ok();
    assert!(
        output.starts_with(
            "[Output that arrived after the previous command ended (from a background thread \
             or process):]\nlate before the restart\n[Restarted python"
        ),
        "{output}"
    );
}

/// The lines of `output` that are a number alone (`echo $!`).
fn pids_in(output: &str) -> Vec<i32> {
    output
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect()
}

#[test]
fn an_interrupted_command_leaves_no_process_that_ignores_sigint_and_spares_earlier_ones() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    // An earlier command's background job, which ignores SIGINT (sh's
    // background jobs do): not this command's to end.
    let earlier = pids_in(
        python(
            &mut host,
            "import subprocess\nsubprocess.run('sleep 300 & echo $!', shell=True)",
        )
        .ok(),
    );
    assert_eq!(earlier.len(), 1);
    let earlier = host.outer_pids(&earlier);
    // The command's own background jobs ignore SIGINT too, so the timeout's
    // KeyboardInterrupt (and the shell's SIGINT) leaves them running. (They
    // start after the command's first clock tick: /proc's start times
    // cannot tell one started within it from an earlier command's.)
    let reply = host.command_with_timeout(
        "python",
        "import subprocess, time\n\
         time.sleep(0.05)\n\
         subprocess.run('sleep 300 & echo $!; sleep 300 & echo $!; wait', shell=True)",
        1500,
    );
    assert!(!reply.success(), "{}", reply.0);
    let output = reply.output().to_owned();
    assert!(output.contains("KeyboardInterrupt"), "{output}");
    let strays = host.outer_pids(&pids_in(&output));
    assert_eq!(strays.len(), 2, "{output}");
    for pid in &strays {
        assert!(
            wait_until_dead(*pid, Duration::from_secs(5)),
            "{pid} outlived the interrupted command: {output}"
        );
    }
    // Two sleeps, and the shell too if python's kill had not yet landed.
    assert!(
        output.contains("[Ended ") && output.contains(" processes the command started that"),
        "{output}"
    );
    assert!(
        process_alive(earlier[0]),
        "an earlier command's job is kept"
    );
    assert_eq!(python(&mut host, "print('next')").ok(), "next\n");
    let (status, _) = host.finish();
    assert_eq!(status.code(), Some(0));
    assert!(wait_until_dead(earlier[0], Duration::from_secs(10)));
}
