//! What a container needs from envhost, through the real binary:
//! `envhost healthcheck` for Docker's HEALTHCHECK and Kubernetes' probes,
//! and correct behaviour as PID 1 of its own PID namespace (the process a
//! container starts), where every orphan in the container is re-parented
//! to it and the kernel delivers only the signals it handles.

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use crate::harness::{Host, Project, envhost_binary, process_alive, skip_without_pid_namespaces};

fn healthcheck(project: &std::path::Path, args: &[&str]) -> (bool, String) {
    let output = Command::new(envhost_binary())
        .arg("healthcheck")
        .arg("--project")
        .arg(project)
        .args(args)
        .output()
        .expect("run envhost healthcheck");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

#[test]
fn healthcheck_passes_where_a_session_can_run() {
    let project = Project::new();
    let (ok, report) = healthcheck(project.path(), &[]);
    assert!(ok, "{report}");
    let lines: Vec<&str> = report.lines().collect();
    assert!(lines[0].starts_with("ok   project "), "{report}");
    assert!(
        lines[1].starts_with("ok   Isolation: namespaces. Commands run in PID, mount"),
        "{report}"
    );
    assert!(
        lines[2].starts_with("ok   Session limits: 4096 processes"),
        "{report}"
    );
    assert!(lines[3].starts_with("ok   bash: bash "), "{report}");
    assert!(lines[4].starts_with("ok   python: Python 3."), "{report}");
    assert_eq!(lines.last(), Some(&"healthy"), "{report}");
}

#[test]
fn healthcheck_fails_with_the_reason() {
    let project = Project::new();
    let (ok, report) = healthcheck(project.path(), &["--python", "/nonexistent/python3"]);
    assert!(!ok, "{report}");
    assert!(report.contains("ok   bash: "), "{report}");
    assert!(
        report.contains("FAIL python: ") && report.contains("/nonexistent/python3"),
        "{report}"
    );
    assert!(report.ends_with("unhealthy\n"), "{report}");

    let (ok, report) = healthcheck(&project.path().join("missing"), &[]);
    assert!(!ok);
    assert!(report.starts_with("FAIL the project directory"), "{report}");

    // With --plugins, a plugin that would be refused fails the check.
    project.write("env/broken.wasm", "not a component");
    let (ok, report) = healthcheck(project.path(), &["--plugins", "--no-plugin-cache"]);
    assert!(!ok, "{report}");
    assert!(report.contains("FAIL plugin broken: "), "{report}");
    let (ok, report) = healthcheck(project.path(), &[]);
    assert!(ok, "plugins are not loaded without --plugins: {report}");
}

fn start_as_pid_1(project: &Project) -> Host {
    start_as_pid_1_with(project, &[])
}

/// [`start_as_pid_1`] with `args` for envhost.
fn start_as_pid_1_with(project: &Project, args: &[&str]) -> Host {
    Host::builder()
        .wrapped_in(["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"])
        .args(args.iter().copied())
        .start(project.path())
}

/// The processes below `pid`, as this (the outer) namespace numbers them.
fn descendants(pid: i32) -> Vec<i32> {
    let mut parents = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("read /proc").flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat"))
            && let Some(parent) = stat
                .rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().nth(1))
                .and_then(|parent| parent.parse::<i32>().ok())
        {
            parents.push((child, parent));
        }
    }
    let mut found = Vec::new();
    let mut queue = vec![pid];
    while let Some(next) = queue.pop() {
        for (child, parent) in &parents {
            if *parent == next {
                found.push(*child);
                queue.push(*child);
            }
        }
    }
    found
}

// Inside the namespace, from the python environment: the processes whose
// parent is PID 1 and that run `sleep`, and the zombies.
const ORPHANS_OF_PID_1: &str = "len([p for p in __import__('os').listdir('/proc') if p.isdigit() and open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[1] == '1' and open(f'/proc/{p}/comm').read().strip() == 'sleep'])";
const ZOMBIES: &str = "[p for p in __import__('os').listdir('/proc') if p.isdigit() and open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[0] == 'Z']";

#[test]
fn as_pid_1_every_orphan_in_the_container_is_reaped() {
    let test = "as_pid_1_every_orphan_in_the_container_is_reaped";
    if skip_without_pid_namespaces(test) {
        return;
    }
    // Where a container refuses namespaces (the guard), commands share
    // envhost's namespace and it is their init; where it allows them, the
    // session's own init is.
    for (args, parent) in [(&["--isolation", "guard"][..], "1\n"), (&[][..], "0\n")] {
        let project = Project::new();
        let mut host = start_as_pid_1_with(&project, args);
        assert_eq!(
            host.command("bash", "echo $PPID").ok(),
            parent,
            "{args:?}: envhost, or its session's init, is not PID 1"
        );
        orphans_are_reaped(&mut host);
        let (status, _) = host.finish();
        assert!(status.success(), "{status:?}");
    }
}

/// Twenty orphans: each subshell exits at once, leaving its `sleep` to the
/// namespace's init; none is left a zombie.
fn orphans_are_reaped(host: &mut Host) {
    host.command(
        "bash",
        "for i in $(seq 20); do ( sleep 1.5 & ); done; nohup sh -c 'sleep 1.5' >/dev/null 2>&1 & disown",
    )
    .ok();
    let orphans: usize = host
        .command("python", ORPHANS_OF_PID_1)
        .ok()
        .trim()
        .parse()
        .unwrap();
    assert!(
        orphans >= 20,
        "only {orphans} orphans were re-parented to PID 1"
    );
    // After they exit, none is left a zombie.
    thread::sleep(Duration::from_secs(2));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let zombies = host.command("python", ZOMBIES).ok().trim().to_owned();
        if zombies == "[]" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "zombies left in the namespace: {zombies}"
        );
        thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn as_pid_1_sigterm_ends_everything() {
    let test = "as_pid_1_sigterm_ends_everything";
    if skip_without_pid_namespaces(test) {
        return;
    }
    let project = Project::new();
    let mut host = start_as_pid_1(&project);
    host.command(
        "bash",
        "sleep 1000 & nohup sleep 1001 >/dev/null 2>&1 & ( sleep 1002 & ); echo ok",
    )
    .ok();
    host.command(
        "python",
        "import subprocess; child = subprocess.Popen(['sleep', '1003'])",
    )
    .ok();
    let unshare = host.pid() as i32;
    let inside = descendants(unshare);
    // unshare's one child is envhost, PID 1 inside.
    let envhost = *inside.first().expect("envhost under unshare");
    assert!(
        inside.len() >= 7,
        "expected envhost, bash, python and four sleeps: {inside:?}"
    );
    let status = Command::new("kill")
        .args(["-TERM", &envhost.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
    let status = host.wait_exit(Duration::from_secs(20));
    assert!(
        status.success(),
        "envhost as PID 1 exited with {status:?} on SIGTERM"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while inside.iter().any(|pid| process_alive(*pid)) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    let survivors: Vec<i32> = inside
        .into_iter()
        .filter(|pid| process_alive(*pid))
        .collect();
    assert!(
        survivors.is_empty(),
        "still running after SIGTERM: {survivors:?}"
    );
}
