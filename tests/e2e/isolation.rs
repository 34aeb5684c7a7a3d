//! Commands cannot name the host: they run in namespaces of their own, in a
//! session bounded by its cgroup.
//!
//! Each test is an attack that worked against the host when commands shared
//! its PID namespace and cgroup tree (a filter refused only the system calls
//! it listed, aimed at the host's pid): the command is handed the host's
//! real pid (and, where it matters, a thread id or its cgroup) as an
//! attacker would find them, and the test checks from outside that nothing
//! changed and that the host keeps answering. The fork bomb and the memory
//! hog run only with the host inside an outer cgroup of the test's own
//! (`pids.max`, memory limit), so that a regression cannot exhaust the
//! machine.

use std::fs;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use crate::harness::{GONE, Host, Project, process_alive, skip_unprivileged, wait_until_dead};

fn pids(output: &str) -> Vec<i32> {
    output
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect()
}

/// Whether the host answers a command that needs a fork, with its state.
fn still_serves(host: &mut Host) {
    let reply = host.command("bash", "/bin/echo still $((6 * 7))");
    assert_eq!(reply.ok(), "still 42\n", "{}", reply.0);
}

/// A field of `/proc/<pid>/status` or `limits` etc., read from outside.
fn proc_text(pid: u32, file: &str) -> String {
    fs::read_to_string(format!("/proc/{pid}/{file}")).unwrap_or_default()
}

fn isolation_section(reply: &crate::harness::Reply) -> String {
    reply.screen("isolation").to_owned()
}

#[test]
fn commands_run_in_namespaces_of_their_own_and_the_first_screen_says_so() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let agent = std::process::id();
    let h = host.pid();
    let reply = host.command(
        "bash",
        &format!(
            "echo \"me=$$ parent=$PPID\"; ps -e -o comm= | sort -u | tr '\\n' ' '; echo; \
             for pid in {h} {agent}; do kill -0 $pid 2>/dev/null && echo \"sees $pid\"; \
             [ -e /proc/$pid ] && echo \"proc $pid\"; done; echo done"
        ),
    );
    let output = reply.ok();
    assert!(output.contains("parent=0"), "{output}");
    assert!(!output.contains("sees "), "{output}");
    assert!(!output.contains("proc "), "{output}");
    // `ps` shows the session's processes: the init, the shell and ps.
    assert!(output.contains("bash"), "{output}");
    assert!(output.contains("envhost-init"), "{output}");
    let isolation = isolation_section(&reply);
    assert!(isolation.contains("Isolation: namespaces."), "{isolation}");
    assert!(isolation.contains("Session limits:"), "{isolation}");
    // Said once: the next screen has no such section.
    let reply = host.command("bash", "true");
    assert!(
        !reply.section_names().contains(&"isolation".to_owned()),
        "{}",
        reply.0
    );
    // python too.
    let reply = host.command(
        "python",
        "import os; print(os.getppid(), os.getpid() < 100)",
    );
    assert_eq!(reply.ok(), "0 True\n", "{}", reply.0);
    host.finish();
}

#[test]
fn prlimit_on_the_hosts_pid_changes_nothing() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let h = host.pid();
    let before = proc_text(h, "limits");
    let reply = host.command(
        "bash",
        &format!(
            "prlimit --pid {h} --nofile=4:4 --cpu=1:1 --fsize=0:0 --as=10000000:10000000 \
             --nproc=1:1; echo \"prlimit said $?\""
        ),
    );
    assert!(reply.output().contains("prlimit said"), "{}", reply.0);
    assert_eq!(proc_text(h, "limits"), before, "the host's limits changed");
    for _ in 0..3 {
        still_serves(&mut host);
    }
    let reply = host.command(
        "python",
        "open('x', 'w').write('y' * 100000); print('wrote')",
    );
    assert_eq!(reply.ok(), "wrote\n", "{}", reply.0);
    host.finish();
}

#[test]
fn sigio_from_a_descriptor_the_host_shares_cannot_reach_it() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let h = host.pid();
    // Every descriptor the interpreter holds (the driver's request pipe
    // among them, whose other end the host writes to) made to signal the
    // host with SIGIO, whose default action ends a process.
    let reply = host.command(
        "python",
        &format!(
            "import fcntl, os\n\
             owned = 0\n\
             for fd in range(3, 256):\n    \
                 try:\n        \
                     fcntl.fcntl(fd, fcntl.F_SETOWN, {h})\n        \
                     fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)\n        \
                     owned += 1\n    \
                 except OSError:\n        \
                     pass\n\
             print('owned', owned)"
        ),
    );
    assert!(reply.output().contains("owned"), "{}", reply.0);
    for round in 0..5 {
        let reply = host.command("python", &format!("print({round} * 2)"));
        assert_eq!(reply.ok(), format!("{}\n", round * 2), "{}", reply.0);
    }
    still_serves(&mut host);
    assert!(process_alive(h as i32));
    host.finish();
}

#[test]
fn the_hosts_threads_scheduling_and_oom_score_are_out_of_reach() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let h = host.pid();
    // Its threads start with the first command.
    still_serves(&mut host);
    // A thread other than the main one: the guard only ever listed the
    // host's pid.
    let thread = fs::read_dir(format!("/proc/{h}/task"))
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .find(|&tid| tid != h)
        .expect("the host has threads");
    let before = (
        proc_text(h, "oom_score_adj"),
        proc_text(h, "sched")
            .lines()
            .find(|l| l.starts_with("policy"))
            .map(str::to_owned),
        proc_text(h, "stat")
            .split(") ")
            .nth(1)
            .map(|rest| rest.split(' ').nth(16).unwrap_or("").to_owned()),
    );
    let reply = host.command(
        "bash",
        &format!(
            "echo 1000 > /proc/{h}/oom_score_adj; renice -n 19 -p {h} {thread}; \
             chrt -i -p 0 {h}; chrt -i -a -p 0 {h}; kill -STOP {thread}; echo attempted"
        ),
    );
    assert!(reply.output().contains("attempted"), "{}", reply.0);
    thread::sleep(Duration::from_millis(300));
    let state = proc_text(h, "stat");
    assert!(!state.contains(") T "), "the host was stopped: {state}");
    let after = (
        proc_text(h, "oom_score_adj"),
        proc_text(h, "sched")
            .lines()
            .find(|l| l.starts_with("policy"))
            .map(str::to_owned),
        proc_text(h, "stat")
            .split(") ")
            .nth(1)
            .map(|rest| rest.split(' ').nth(16).unwrap_or("").to_owned()),
    );
    assert_eq!(after, before, "(oom_score_adj, policy, nice) changed");
    still_serves(&mut host);
    host.finish();
}

/// The cgroup v2 mount, as this test sees it.
fn unified_mount() -> Option<PathBuf> {
    let mounts = fs::read_to_string("/proc/self/mountinfo").ok()?;
    mounts.lines().find_map(|line| {
        let (fields, after) = line.split_once(" - ")?;
        if !after.starts_with("cgroup2 ") {
            return None;
        }
        fields.split_whitespace().nth(4).map(PathBuf::from)
    })
}

#[test]
fn the_host_cannot_be_moved_frozen_or_killed_through_cgroup_files() {
    if !nix::unistd::geteuid().is_root()
        && skip_unprivileged(
            "the_host_cannot_be_moved_frozen_or_killed_through_cgroup_files",
            "root (only root may move another process between cgroups)",
        )
    {
        return;
    }
    let Some(unified) = unified_mount() else {
        skip_unprivileged(
            "the_host_cannot_be_moved_frozen_or_killed_through_cgroup_files",
            "a cgroup v2 mount",
        );
        return;
    };
    let project = Project::new();
    let mut host = Host::start(project.path());
    let h = host.pid();
    let cgroups_before = proc_text(h, "cgroup");
    let evil = format!("envhost-evil-{}", std::process::id());
    // As root, with every trick: remount writable, mount afresh, then move
    // the host's pid into a cgroup of the command's and kill or freeze it.
    let attack = format!(
        "mount -o remount,rw {u} 2>/dev/null; mkdir -p /tmp/cg-$$ && mount -t cgroup2 none /tmp/cg-$$ 2>/dev/null; \
         for root in {u} /tmp/cg-$$ /sys/fs/cgroup/freezer; do \
           mkdir -p $root/{evil} 2>/dev/null; \
           echo {h} > $root/{evil}/cgroup.procs 2>/dev/null; \
           echo {h} > $root/{evil}/tasks 2>/dev/null; \
           echo FROZEN > $root/{evil}/freezer.state 2>/dev/null; \
           echo 1 > $root/{evil}/cgroup.freeze 2>/dev/null; \
           echo 1 > $root/{evil}/cgroup.kill 2>/dev/null; \
         done; echo attempted",
        u = unified.display()
    );
    let reply = host.command("bash", &attack);
    assert!(reply.output().contains("attempted"), "{}", reply.0);
    thread::sleep(Duration::from_millis(300));
    let alive = process_alive(h as i32);
    let cgroups_after = proc_text(h, "cgroup");
    // Clean up whatever the attack made, from outside, before asserting.
    for root in [unified.clone(), PathBuf::from("/sys/fs/cgroup/freezer")] {
        let dir = root.join(&evil);
        if dir.exists() {
            let _ = fs::write(dir.join("freezer.state"), "THAWED");
            let _ = fs::write(dir.join("cgroup.freeze"), "0");
            let _ = fs::remove_dir(&dir);
        }
    }
    assert!(alive, "the host was killed through a cgroup");
    assert_eq!(cgroups_after, cgroups_before, "the host was moved");
    still_serves(&mut host);
    host.finish();
}

#[test]
fn the_sessions_cgroup_files_are_out_of_reach_of_its_commands() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let reply = host.command(
        "bash",
        "cat /proc/self/cgroup | cut -d: -f3 | sort -u | tr '\\n' ' '; echo; \
         touch /sys/fs/cgroup/x 2>&1 | grep -c 'Read-only' ; \
         find /sys/fs/cgroup -name 'envhost-*' | head -3; echo end",
    );
    let output = reply.ok();
    // Nothing above the session's own cgroup is named, or can be found.
    assert!(!output.contains("envhost-"), "{output}");
    assert!(output.contains("\n1\n"), "{output}");
    host.finish();
}

/// A command running as root may unmount what the init mounted: beneath
/// must be nothing of the host's (the init unmounted the host's `/proc` and
/// cgroup mounts before mounting its own, rather than covering them).
#[test]
fn a_root_command_that_unmounts_proc_and_cgroups_finds_nothing_of_the_host() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: runs commands as root, and the host runs as another user here");
        return;
    }
    let project = Project::new();
    let mut host = Host::start(project.path());
    let h = host.pid();
    // Never in the test's own mount namespace: against a host without
    // namespaces (a regression, or an older build) these commands would
    // unmount the machine's /proc and cgroups. The command checks first
    // and then does nothing else.
    let own = fs::read_link("/proc/self/ns/mnt").expect("the test's mount namespace");
    let reply = host.command(
        "bash",
        &format!(
            "if [ \"$(readlink /proc/self/ns/mnt)\" = '{own}' ]; then echo 'in the host mount namespace'; else \
             umount -l /sys/fs/cgroup 2>/dev/null; umount -l /proc; \
             for sub in /sys/fs/cgroup/*; do umount -l $sub 2>/dev/null; done; \
             ls /proc | wc -l; [ -e /proc/{h} ] && echo \"host's proc\"; \
             find /sys/fs/cgroup -name 'envhost-*' | head -3; \
             mount -t proc proc /proc && [ -e /proc/{h} ] && echo \"host in new proc\"; \
             mount -t cgroup2 none /mnt 2>/dev/null && find /mnt -name 'envhost-*' | head -3; \
             umount /mnt 2>/dev/null; fi; echo end",
            own = own.display()
        ),
    );
    let output = reply.ok();
    assert!(
        !output.contains("in the host mount namespace"),
        "commands run in the test's own mount namespace: {output}"
    );
    assert!(
        output.starts_with("0\n"),
        "the host's /proc was beneath: {output}"
    );
    assert!(!output.contains("host"), "{output}");
    assert!(!output.contains("envhost-"), "{output}");
    assert!(output.ends_with("end\n"), "{output}");
    still_serves(&mut host);
    host.finish();
}

#[test]
fn processes_in_the_namespace_end_with_a_host_killed_by_sigkill() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let reply = host.command(
        "bash",
        "sleep 1031 & echo $!; (setsid sh -c 'echo $$ > escaped.pid; exec sleep 1032' >/dev/null 2>&1 &)
until [ -s escaped.pid ]; do sleep 0.05; done; cat escaped.pid",
    );
    let inner = pids(reply.ok());
    assert_eq!(inner.len(), 2, "{}", reply.0);
    let outer = host.outer_pids(&inner);
    assert!(
        outer.iter().all(|&pid| pid != GONE && process_alive(pid)),
        "{outer:?}"
    );
    host.signal("KILL");
    for pid in outer {
        assert!(
            wait_until_dead(pid, Duration::from_secs(10)),
            "{pid} outlived a host killed with SIGKILL"
        );
    }
}

#[test]
fn the_guard_is_the_fallback_on_request_and_says_what_it_lacks() {
    let project = Project::new();
    let mut host = Host::builder()
        .args(["--isolation", "guard"])
        .start(project.path());
    let h = host.pid();
    let reply = host.command("bash", "echo $PPID");
    assert_eq!(reply.ok(), format!("{h}\n"), "{}", reply.0);
    let isolation = isolation_section(&reply);
    assert!(isolation.contains("Isolation: guard only"), "{isolation}");
    assert!(isolation.contains("prlimit"), "{isolation}");
    host.finish();
    // Namespaces on request: as root here, they are made.
    let mut host = Host::builder()
        .args(["--isolation", "namespaces"])
        .start(project.path());
    let reply = host.command("bash", "echo $PPID");
    assert_eq!(reply.ok(), "0\n", "{}", reply.0);
    host.finish();
}

/// An outer cgroup of the test's own, with a process and a memory limit,
/// that the host is started in: a regression of the session's limits then
/// cannot exhaust the machine. v1 hierarchies (as on this machine) or the
/// v2 root with the controllers enabled.
struct Outer {
    dirs: Vec<PathBuf>,
}

impl Outer {
    fn create(processes: u32, memory: u64) -> Result<Outer, String> {
        let name = format!("envhost-test-outer-{}-{}", std::process::id(), unique());
        let v1_pids = Path::new("/sys/fs/cgroup/pids");
        let v1_memory = Path::new("/sys/fs/cgroup/memory");
        let mut made = Outer { dirs: Vec::new() };
        let mut folder = |parent: &Path, limits: &[(&str, String)]| -> Result<(), String> {
            let dir = parent.join(&name);
            fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            made.dirs.push(dir.clone());
            for (file, value) in limits {
                fs::write(dir.join(file), value).map_err(|e| format!("cannot set {file}: {e}"))?;
            }
            Ok(())
        };
        if v1_pids.join("cgroup.procs").exists() && v1_memory.join("cgroup.procs").exists() {
            folder(v1_pids, &[("pids.max", processes.to_string())])?;
            folder(v1_memory, &[("memory.limit_in_bytes", memory.to_string())])?;
            return Ok(made);
        }
        let v2 = Path::new("/sys/fs/cgroup");
        let controllers = fs::read_to_string(v2.join("cgroup.subtree_control")).unwrap_or_default();
        if controllers.contains("pids") && controllers.contains("memory") {
            folder(
                v2,
                &[
                    ("pids.max", processes.to_string()),
                    ("memory.max", memory.to_string()),
                ],
            )?;
            return Ok(made);
        }
        Err("no cgroup with pids and memory controllers the test may write".to_owned())
    }

    /// Starts the host as a member of every folder.
    fn start(&self, project: &Path, args: &[&str]) -> Host {
        let joins: Vec<String> = self
            .dirs
            .iter()
            .map(|dir| format!("echo $$ > '{}'", dir.join("cgroup.procs").display()))
            .collect();
        Host::builder()
            .wrapped_in([
                "sh".to_owned(),
                "-c".to_owned(),
                format!(r#"{} && exec "$0" "$@""#, joins.join(" && ")),
            ])
            .args(args.iter().copied())
            .start(project)
    }
}

/// The outer cgroup's memory: more than the session's limit in these
/// tests, less than the hog asks for.
const OUTER_MEMORY: u64 = 768 << 20;

impl Drop for Outer {
    fn drop(&mut self) {
        for dir in &self.dirs {
            let _ = fs::write(dir.join("pids.max"), "0");
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        for dir in &self.dirs {
            while Instant::now() < deadline {
                let members =
                    pids(&fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default());
                if members.is_empty() {
                    break;
                }
                for pid in members {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
                thread::sleep(Duration::from_millis(20));
            }
            let _ = fs::remove_dir(dir);
        }
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[test]
fn a_fork_bomb_ends_at_the_sessions_process_limit_and_bash_forks_again() {
    let test = "a_fork_bomb_ends_at_the_sessions_process_limit_and_bash_forks_again";
    let outer = match Outer::create(600, OUTER_MEMORY) {
        Ok(outer) => outer,
        Err(why) => {
            skip_unprivileged(test, &why);
            return;
        }
    };
    let project = Project::new();
    let mut host = outer.start(project.path(), &["--max-processes", "200"]);
    let reply = host.command_with_timeout(
        "bash",
        "bomb() { bomb | bomb & }; bomb; sleep 3; echo launched",
        60_000,
    );
    let answer = reply.output().to_owned();
    assert!(
        answer.contains("process limit"),
        "the answer does not name the limit: {}",
        reply.0
    );
    // The shell can fork again, at once. (What the bomb printed while it
    // was ended may come first, as late output.)
    let reply = host.command_with_timeout("bash", "/bin/echo forked $((1 + 1))", 30_000);
    assert!(reply.success(), "{}", reply.0);
    assert!(
        reply.own_output().ends_with("\nforked 2\n") || reply.own_output() == "forked 2\n",
        "{}",
        reply.0
    );
    still_serves(&mut host);
    assert!(process_alive(host.pid() as i32));
    host.finish();
}

#[test]
fn a_memory_hog_ends_at_the_sessions_memory_limit_never_the_host() {
    let test = "a_memory_hog_ends_at_the_sessions_memory_limit_never_the_host";
    let outer = match Outer::create(600, OUTER_MEMORY) {
        Ok(outer) => outer,
        Err(why) => {
            skip_unprivileged(test, &why);
            return;
        }
    };
    let project = Project::new();
    let mut host = outer.start(project.path(), &["--max-memory", "256MiB"]);
    let h = host.pid();
    // The hog first makes the host the kernel's favourite victim, as it
    // could when it could name it.
    let reply = host.command_with_timeout(
        "bash",
        &format!(
            "echo 1000 > /proc/{h}/oom_score_adj 2>/dev/null; \
             python3 -c 'b = bytearray(900 * 1024 * 1024); b[::4096] = b\"x\" * len(b[::4096]); print(len(b))'; \
             echo \"exit $?\""
        ),
        60_000,
    );
    assert!(process_alive(h as i32), "the host was killed");
    let output = reply.output();
    assert!(output.contains("exit 137"), "{}", reply.0);
    assert!(
        output.contains("memory limit"),
        "the answer does not name the limit: {}",
        reply.0
    );
    still_serves(&mut host);
    host.finish();
}

#[test]
fn kill_by_any_number_reaches_neither_the_host_nor_the_agent() {
    let project = Project::new();
    // The agent: a throw-away `sh` leading a session of its own, the host
    // its child and a member of its process group (as an agent runs it).
    let mut host = Host::builder()
        .wrapped_in(["setsid", "--wait", "sh", "-c", r#""$0" "$@""#])
        .start(project.path());
    still_serves(&mut host);
    let agent = host.pid();
    let envhost = fs::read_to_string(format!("/proc/{agent}/task/{agent}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .next()
        .and_then(|pid| pid.parse::<u32>().ok())
        .expect("the host is the agent's child");
    let threads: Vec<String> = fs::read_dir(format!("/proc/{envhost}/task"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    for attack in [
        format!("kill -9 {envhost}"),
        format!("kill -9 -- -{agent}"),
        format!("kill -9 {agent}"),
        format!("for t in {}; do kill -9 $t; done", threads.join(" ")),
        "kill -KILL -1".to_owned(),
        format!("python3 -c 'import os; os.kill({envhost}, 9)'"),
        "pkill -9 envhost; pkill -9 -f 'envhost serve'".to_owned(),
    ] {
        let reply = host.command("bash", &format!("{attack}; echo after"));
        assert!(host.is_running(), "`{attack}` killed the host or the agent");
        assert!(process_alive(envhost as i32), "`{attack}` killed the host");
        assert!(reply.output().contains("after"), "{attack}: {}", reply.0);
        still_serves(&mut host);
    }
    host.finish();
}

#[test]
fn an_unprivileged_host_isolates_its_commands_in_a_user_namespace() {
    let test = "an_unprivileged_host_isolates_its_commands_in_a_user_namespace";
    if !nix::unistd::geteuid().is_root()
        && skip_unprivileged(test, "root (to start the host as another user)")
    {
        return;
    }
    let project = Project::new();
    std::os::unix::fs::chown(project.path(), Some(65534), Some(65534)).expect("chown the project");
    let mut host = Host::builder()
        .wrapped_in([
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
        ])
        .env("HOME", "/tmp")
        .args(["--python", "/usr/bin/python3"])
        .start(project.path());
    let h = host.pid();
    let limits = proc_text(h, "limits");
    let reply = host.command(
        "bash",
        &format!(
            "id -u; echo $PPID; prlimit --pid {h} --nofile=4:4; kill -STOP {h}; kill -9 {h}; \
             echo 1000 > /proc/{h}/oom_score_adj; echo done"
        ),
    );
    let output = reply.output();
    assert!(output.starts_with("65534\n0\n"), "{}", reply.0);
    assert!(output.contains("done"), "{}", reply.0);
    let isolation = isolation_section(&reply);
    assert!(isolation.contains("user namespace"), "{isolation}");
    thread::sleep(Duration::from_millis(200));
    assert!(
        !proc_text(h, "stat").contains(") T "),
        "the host was stopped"
    );
    assert_eq!(proc_text(h, "limits"), limits);
    let reply = host.command(
        "python",
        &format!(
            "import fcntl, os\n\
             for fd in range(3, 64):\n    \
                 try:\n        \
                     fcntl.fcntl(fd, fcntl.F_SETOWN, {h}); fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)\n    \
                 except OSError:\n        \
                     pass\n\
             print('tried')"
        ),
    );
    assert!(reply.output().contains("tried"), "{}", reply.0);
    for round in 0..3 {
        let reply = host.command("python", &format!("print({round} + 1)"));
        assert_eq!(reply.ok(), format!("{}\n", round + 1), "{}", reply.0);
    }
    still_serves(&mut host);
    host.finish();
}
