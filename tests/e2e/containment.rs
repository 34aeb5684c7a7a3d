//! Every process an environment starts can be ended for certain, and none
//! of them can end the host.
//!
//! The fork-hopper (a process that forks and exits in a tight loop, so that
//! it is never in a snapshot of the process table for long) runs only with
//! the host inside a cgroup whose `pids.max` bounds the whole tree, so that
//! a failure cannot exhaust the machine; without a pids controller the test
//! is skipped with a reason.

use std::fs;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use crate::harness::{
    Host, Project, process_alive, skip_unprivileged, skip_without_pid_namespaces, wait_until_dead,
};

fn pids(output: &str) -> Vec<i32> {
    output
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect()
}

/// A cgroup with a pids controller and `pids.max` set, for one test;
/// everything in it is killed and the cgroup removed when dropped.
struct PidsLimit {
    dir: PathBuf,
}

impl PidsLimit {
    /// A fresh cgroup holding at most `max` tasks, or why there is none.
    fn create(max: u32) -> Result<PidsLimit, String> {
        let name = format!("envhost-test-{}-{}", std::process::id(), unique());
        let v1 = Path::new("/sys/fs/cgroup/pids");
        let v2 = Path::new("/sys/fs/cgroup");
        let parent = if v1.join("cgroup.procs").exists() {
            v1.to_owned()
        } else if fs::read_to_string(v2.join("cgroup.subtree_control"))
            .is_ok_and(|controllers| controllers.split_whitespace().any(|c| c == "pids"))
        {
            v2.to_owned()
        } else {
            return Err("no cgroup with a pids controller (v1 pids hierarchy, or pids enabled at the v2 root)".into());
        };
        let dir = parent.join(name);
        fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let limit = PidsLimit { dir };
        fs::write(limit.dir.join("pids.max"), max.to_string())
            .map_err(|e| format!("cannot set pids.max: {e}"))?;
        Ok(limit)
    }

    /// Starts the host as a member of this cgroup, before it makes the
    /// session's cgroups (below its own).
    fn start(&self, args: &[&str], project: &Path) -> Host {
        let procs = self.dir.join("cgroup.procs");
        Host::builder()
            .wrapped_in([
                "sh".to_owned(),
                "-c".to_owned(),
                format!(r#"echo $$ > '{}' && exec "$0" "$@""#, procs.display()),
            ])
            .args(args.iter().copied())
            .start(project)
    }

    /// The living members, the host's session cgroups below it included.
    fn members(&self) -> Vec<i32> {
        fn walk(dir: &Path, found: &mut Vec<i32>) {
            found.extend(pids(
                &fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default(),
            ));
            for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
                if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                    walk(&entry.path(), found);
                }
            }
        }
        let mut found = Vec::new();
        walk(&self.dir, &mut found);
        found
            .into_iter()
            .filter(|pid| process_alive(*pid))
            .collect()
    }

    /// Removes the folders below it (left by a host that could not), then
    /// itself.
    fn remove(dir: &Path) {
        for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                Self::remove(&entry.path());
            }
        }
        let _ = fs::remove_dir(dir);
    }

    /// Waits up to `limit` for the cgroup to hold no living process.
    fn empties_within(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if self.members().is_empty() {
                return true;
            }
            thread::sleep(Duration::from_millis(50));
        }
        self.members().is_empty()
    }
}

impl Drop for PidsLimit {
    fn drop(&mut self) {
        // No new task can start; kill what is there until nothing is.
        let _ = fs::write(self.dir.join("pids.max"), "0");
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            let members = self.members();
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
        Self::remove(&self.dir);
    }
}

/// Whether the host can install its guard: it runs with this process's
/// credentials, and needs CAP_SYS_ADMIN or no-new-privileges.
fn guard_possible() -> bool {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .map(|value| value.trim().to_owned())
    };
    let cap_sys_admin = field("CapEff:")
        .and_then(|hex| u64::from_str_radix(&hex, 16).ok())
        .is_some_and(|caps| caps & (1 << 21) != 0);
    cap_sys_admin || field("NoNewPrivs:").as_deref() == Some("1")
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A program that forks and exits in a tight loop, in its own session;
/// each generation lives a few microseconds.
const FORK_HOPPER: &str = r#"(setsid perl -e 'open(my $f, ">", "hopping"); close($f); while (1) { exit 0 if fork() }' >/dev/null 2>&1 &)
until [ -e hopping ]; do sleep 0.05; done; echo hopping"#;

fn fork_hopper_does_not_outlive_the_host(args: &[&str]) {
    let limit = match PidsLimit::create(200) {
        Ok(limit) => limit,
        Err(reason) => {
            skip_unprivileged(
                "the fork-hopper test",
                &format!("a bounded process count ({reason})"),
            );
            return;
        }
    };
    let project = Project::new();
    let mut host = limit.start(args, project.path());
    let reply = host.command("bash", FORK_HOPPER);
    assert_eq!(reply.ok(), "hopping\n", "{}", reply.0);
    thread::sleep(Duration::from_millis(300));
    assert!(
        limit.members().len() >= 2,
        "the hopper runs next to the host"
    );
    let (status, _) = host.finish();
    assert!(status.success(), "{status:?}");
    assert!(
        limit.empties_within(Duration::from_secs(15)),
        "processes outlived the host: {:?}",
        limit.members()
    );
}

#[test]
fn a_fork_hopper_does_not_outlive_the_host() {
    fork_hopper_does_not_outlive_the_host(&[]);
}

#[test]
fn a_fork_hopper_that_keeps_its_process_group_does_not_outlive_the_host_without_cgroups() {
    fork_hopper_does_not_outlive_the_host(&["--no-cgroups"]);
}

#[test]
fn a_timed_out_pipeline_leaves_no_grandchild_that_ignores_sigint() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    // Background children of a non-interactive shell ignore SIGINT.
    let reply = host.command_with_timeout(
        "bash",
        "bash -c 'sleep 1017 & echo $! > a.pid; sleep 1018 & echo $! > b.pid; wait' | cat",
        1000,
    );
    assert!(reply.failed().contains("its timeout"), "{}", reply.0);
    for file in ["a.pid", "b.pid"] {
        let pid = host.outer_pid(project.read(file).trim().parse().expect("a pid"));
        assert!(
            wait_until_dead(pid, Duration::from_secs(10)),
            "{file}: process {pid} survived the timeout"
        );
    }
    // Background jobs started before are not the timed-out command's.
    let job = pids(host.command("bash", "sleep 1019 & echo $!").ok())[0];
    let job = host.outer_pid(job);
    host.command_with_timeout("bash", "sleep 60 | cat", 500);
    assert!(process_alive(job), "a background job was ended");
    host.finish();
}

/// Runs the host as an agent would, its child and a member of the agent's
/// process group, where the agent is a throw-away `sh` leading a session of
/// its own: an attack the guard misses ends that session, never the test
/// run. (`Host::pid` and `is_running` are then the agent's.)
fn start_under_an_agent(project: &Project) -> Host {
    guarded()
        .wrapped_in(["setsid", "--wait", "sh", "-c", r#""$0" "$@""#])
        .start(project.path())
}

/// A host whose commands run beside it behind the guard: the fallback
/// where no namespace can be made, forced. (In namespaces, commands cannot
/// name the host at all: `isolation.rs`.)
fn guarded() -> crate::harness::HostBuilder {
    Host::builder().args(["--isolation", "guard"])
}

#[test]
fn the_shell_cannot_kill_the_host_or_the_agent() {
    if !guard_possible()
        && skip_unprivileged(
            "the_shell_cannot_kill_the_host_or_the_agent",
            "CAP_SYS_ADMIN",
        )
    {
        return;
    }
    let project = Project::new();
    let mut host = start_under_an_agent(&project);
    for attack in [
        "kill -9 $PPID",
        // The host's process group, which holds the agent.
        "kill -9 -- -$(ps -o pgid= $PPID | tr -d ' ')",
        // Unquoted, ps's padding splits this into `-` and the group
        // leader's pid: the agent, by pid. (This one, unguarded, once
        // killed the script that ran the test suite.)
        "kill -9 -- -$(ps -o pgid= $PPID)",
        // The agent, as the host's parent.
        "kill -9 $(ps -o ppid= $PPID)",
        "python3 -c 'import os, sys; os.kill(int(sys.argv[1]), 9)' $PPID",
        "bash -c 'kill -9 $(ps -o ppid= $PPID)'",
    ] {
        let reply = host.command("bash", &format!("{attack}; echo after"));
        assert!(
            host.is_running(),
            "`{attack}` killed the host or the agent that started it"
        );
        assert!(reply.output().contains("after"), "{attack}: {}", reply.0);
        assert_eq!(
            host.command("bash", "echo alive").ok(),
            "alive\n",
            "{attack}"
        );
    }
    host.finish();
}

/// `kill -1` from root signals every process on the machine but init: it
/// is tried only inside a PID namespace of its own (`sh` its init, the
/// host the next process), so that if the guard ever misses it, it ends
/// that namespace and nothing else.
#[test]
fn kill_minus_one_does_not_reach_the_host() {
    let test = "kill_minus_one_does_not_reach_the_host";
    if !guard_possible() && skip_unprivileged(test, "CAP_SYS_ADMIN") {
        return;
    }
    if skip_without_pid_namespaces(test) {
        return;
    }
    let project = Project::new();
    let mut host = guarded()
        .wrapped_in([
            "unshare",
            "--pid",
            "--fork",
            "--mount-proc",
            "--kill-child",
            "sh",
            "-c",
            r#""$0" "$@""#,
        ])
        .start(project.path());
    assert_eq!(
        host.command("bash", "ps -o pid= $PPID | tr -d ' '").ok(),
        "2\n",
        "the host is the second process of its namespace"
    );
    let reply = host.command("bash", "kill -KILL -1; echo after");
    assert!(host.is_running(), "`kill -KILL -1` killed the host");
    assert!(reply.output().contains("after"), "{}", reply.0);
    assert_eq!(host.command("bash", "echo alive").ok(), "alive\n");
    host.finish();
}

#[test]
fn python_code_cannot_kill_the_host() {
    if !guard_possible() && skip_unprivileged("python_code_cannot_kill_the_host", "CAP_SYS_ADMIN") {
        return;
    }
    let project = Project::new();
    let mut host = guarded().start(project.path());
    let reply = host.command(
        "python",
        "import os, signal\ntry:\n    os.kill(os.getppid(), signal.SIGKILL)\nexcept OSError as e:\n    print('refused', e.errno)",
    );
    assert!(host.is_running(), "python killed the host");
    assert!(reply.output().contains("refused"), "{}", reply.0);
    host.finish();
}

/// The cgroup v2 folder process `pid` is in, where cgroup v2 is mounted.
fn cgroup2_folder_of(pid: u32) -> Option<PathBuf> {
    let own = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let own = own
        .lines()
        .find_map(|line| line.strip_prefix("0::"))?
        .to_owned();
    let mounts = fs::read_to_string("/proc/self/mountinfo").ok()?;
    mounts.lines().find_map(|line| {
        let (fields, after) = line.split_once(" - ")?;
        if !after.starts_with("cgroup2 ") {
            return None;
        }
        let fields: Vec<&str> = fields.split_whitespace().collect();
        let (root, mount) = (fields.get(3)?, fields.get(4)?);
        let relative = own
            .strip_prefix(root)
            .unwrap_or(&own)
            .trim_start_matches('/');
        Some(Path::new(mount).join(relative))
    })
}

/// Whether the host made its folder of cgroups (`envhost-<pid>-<random>`
/// next to its own cgroup v2), as it does wherever the machine allows.
fn host_uses_cgroups(host: &Host) -> bool {
    let pid = host.pid();
    let prefix = format!("envhost-{pid}-");
    cgroup2_folder_of(pid)
        .and_then(|folder| fs::read_dir(folder).ok())
        .is_some_and(|entries| {
            entries
                .filter_map(Result::ok)
                .any(|entry| entry.file_name().to_string_lossy().starts_with(&prefix))
        })
}

/// A cgroup v2 of the test's own, for hosts whose folders of cgroups no
/// other host may sweep: every host that starts removes the folders that
/// killed hosts left next to its own, so a killed host's folder in the
/// shared cgroup is anyone's. Killed and removed when dropped.
struct PrivateCgroup(PathBuf);

impl PrivateCgroup {
    fn create() -> Option<PrivateCgroup> {
        let parent = cgroup2_folder_of(std::process::id())?;
        let dir = parent.join(format!(
            "envhost-test-private-{}-{}",
            std::process::id(),
            unique()
        ));
        fs::create_dir(&dir).ok()?;
        Some(PrivateCgroup(dir))
    }

    /// Starts the host as a member of this cgroup.
    fn start(&self, project: &Path) -> Host {
        self.start_with(Host::builder(), project)
    }

    /// [`PrivateCgroup::start`] with `builder`'s settings.
    fn start_with(&self, builder: crate::harness::HostBuilder, project: &Path) -> Host {
        let procs = self.0.join("cgroup.procs");
        builder
            .wrapped_in([
                "sh".to_owned(),
                "-c".to_owned(),
                format!(r#"echo $$ > '{}' && exec "$0" "$@""#, procs.display()),
            ])
            .start(project)
    }
}

impl Drop for PrivateCgroup {
    fn drop(&mut self) {
        fn remove(dir: &Path) {
            if let Ok(entries) = fs::read_dir(dir) {
                for entry in entries.filter_map(Result::ok) {
                    if entry.path().is_dir() {
                        remove(&entry.path());
                    }
                }
            }
            let _ = fs::write(dir.join("cgroup.kill"), "1");
            let deadline = Instant::now() + Duration::from_secs(5);
            while fs::remove_dir(dir).is_err() && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(20));
            }
        }
        remove(&self.0);
    }
}

#[test]
fn a_restarted_shell_takes_every_process_it_started_with_it() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let reply = host.command(
        "bash",
        "(setsid sh -c 'echo $$ > escaped.pid; exec sleep 1021' >/dev/null 2>&1 &)
until [ -s escaped.pid ]; do sleep 0.05; done; cat escaped.pid",
    );
    let escaped = host.outer_pid(pids(reply.ok())[0]);
    assert!(process_alive(escaped));
    // Without cgroups a process that left the shell's session lives until
    // the host ends (the fallback the no-orphan tests cover).
    if !host_uses_cgroups(&host)
        && skip_unprivileged(
            "a_restarted_shell_takes_every_process_it_started_with_it",
            "a writable cgroup v2",
        )
    {
        return;
    }
    let reply = host.command("bash", "exit 0");
    assert!(reply.output().contains("fresh shell"), "{}", reply.0);
    assert!(
        wait_until_dead(escaped, Duration::from_secs(10)),
        "a process that left the shell's session outlived the shell"
    );
    host.finish();
}

#[test]
fn processes_of_a_killed_host_are_ended_by_the_next_host() {
    let test = "processes_of_a_killed_host_are_ended_by_the_next_host";
    let Some(cgroup) = PrivateCgroup::create() else {
        skip_unprivileged(test, "a writable cgroup v2");
        return;
    };
    let project = Project::new();
    // Behind the guard: in namespaces, what a killed host started ends with
    // it (`isolation::processes_in_the_namespace_end_with_a_host_killed_by_sigkill`);
    // beside it, only the next host's sweep ends it.
    let mut host = cgroup.start_with(guarded(), project.path());
    let reply = host.command(
        "bash",
        "(setsid sh -c 'echo $$ > left.pid; exec sleep 1071' >/dev/null 2>&1 &)
until [ -s left.pid ]; do sleep 0.05; done; cat left.pid",
    );
    let left = pids(reply.ok())[0];
    if !host_uses_cgroups(&host) && skip_unprivileged(test, "a writable cgroup v2") {
        return;
    }
    // SIGKILL: the host cannot clean up after itself.
    host.signal("KILL");
    host.wait_exit(Duration::from_secs(10));
    thread::sleep(Duration::from_millis(200));
    // Where the machine still mounts cgroup v1 controllers, the session's
    // v1 folders sit at the hierarchy's root beside every host's, so any
    // host starting meanwhile (a test running beside this one) may be the
    // one that sweeps it: then there is nothing left to check here.
    if !process_alive(left) {
        eprintln!("{test}: another host swept the killed host's processes first");
        return;
    }
    let other = Project::new();
    let mut next = cgroup.start(other.path());
    assert_eq!(next.command("bash", "echo up").ok(), "up\n");
    assert!(
        wait_until_dead(left, Duration::from_secs(10)),
        "a process the killed host started outlived the next host's start"
    );
    next.finish();
}

/// Hosts sweep the cgroup folders dead hosts left beside their own; a
/// folder there that is not a host's (here the test's own cgroup, named
/// `envhost-test-private-…`) is not one, and what runs in it is left alone.
/// (Before, every `envhost-…` folder was taken for a dead host's, and a
/// host starting beside it killed the programs of the host inside it.)
#[test]
fn a_host_sweeps_only_the_folders_of_hosts() {
    let test = "a_host_sweeps_only_the_folders_of_hosts";
    let Some(cgroup) = PrivateCgroup::create() else {
        skip_unprivileged(test, "a writable cgroup v2");
        return;
    };
    let project = Project::new();
    let mut inside = cgroup.start(project.path());
    let reply = inside.command("bash", "sleep 1072 & echo $!");
    let sleeper = inside.outer_pid(pids(reply.ok())[0]);
    if !host_uses_cgroups(&inside) && skip_unprivileged(test, "a writable cgroup v2") {
        return;
    }
    // A host beside the test's cgroup sweeps when it starts.
    let elsewhere = Project::new();
    let mut beside = Host::start(elsewhere.path());
    assert_eq!(beside.command("bash", "echo up").ok(), "up\n");
    thread::sleep(Duration::from_millis(200));
    assert!(
        process_alive(sleeper),
        "a host beside it killed a program of a live host"
    );
    beside.finish();
    inside.finish();
}

/// A host killed with SIGKILL cannot remove its private folders (bash's
/// start-up script, command file and variable dump; python's state): the
/// next host that starts a shell or an interpreter removes them, and only
/// those of dead hosts.
#[test]
fn private_files_of_a_killed_host_are_removed_by_the_next_host() {
    let temp = tempfile::tempdir().expect("a temporary folder");
    let tmpdir = temp.path().display().to_string();
    let folders = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(temp.path())
            .expect("list the temporary folder")
            .filter_map(Result::ok)
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("envhost-bash-") || name.starts_with("envhost-python-"))
            .collect();
        names.sort();
        names
    };
    let project = Project::new();
    let mut killed = Host::builder().env("TMPDIR", &tmpdir).start(project.path());
    killed.command("bash", "secret=1").ok();
    killed.command("python", "secret = 1").ok();
    let left = folders();
    assert_eq!(
        left.len(),
        2,
        "one folder each for bash and python: {left:?}"
    );
    let mut alive = Host::builder().env("TMPDIR", &tmpdir).start(project.path());
    alive.command("bash", "true").ok();
    let with_alive = folders();
    killed.signal("KILL");
    killed.wait_exit(Duration::from_secs(10));
    assert_eq!(
        folders(),
        with_alive,
        "nothing removes them but another host"
    );

    let mut next = Host::builder().env("TMPDIR", &tmpdir).start(project.path());
    next.command("bash", "true").ok();
    next.command("python", "1").ok();
    let now = folders();
    for name in &left {
        assert!(
            !now.contains(name),
            "{name} of the killed host is still there: {now:?}"
        );
    }
    for name in with_alive.iter().filter(|name| !left.contains(name)) {
        assert!(
            now.contains(name),
            "{name} of a live host was removed: {now:?}"
        );
    }
    next.finish();
    alive.finish();
    assert!(
        folders().is_empty(),
        "hosts that stop remove their own: {:?}",
        folders()
    );
}

/// Every other way the guard closes, tried from python at the host's pid:
/// each must fail with EPERM (1). Signal 0 and `PTRACE_SEIZE` would do no
/// harm if they got through, so a guard that fails shows as a wrong errno,
/// not as a dead host.
const OTHER_WAYS_TO_THE_HOST: &str = r#"
import ctypes, os, platform, signal, sys
host = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
numbers = {
    "x86_64": dict(tkill=200, tgkill=234, rt_sigqueueinfo=129, rt_tgsigqueueinfo=297,
                   ptrace=101, process_vm_readv=310, process_vm_writev=311),
    "aarch64": dict(tkill=130, tgkill=131, rt_sigqueueinfo=138, rt_tgsigqueueinfo=240,
                    ptrace=117, process_vm_readv=270, process_vm_writev=271),
}[platform.machine()]
info = ctypes.create_string_buffer(128)
ctypes.c_int.from_buffer(info, 8).value = -1  # si_code SI_QUEUE, allowed to another process
byte = ctypes.create_string_buffer(1)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
local = iovec(ctypes.cast(byte, ctypes.c_void_p), 1)
remote = iovec(0x1000, 1)
def call(name, *args):
    ctypes.set_errno(0)
    result = libc.syscall(numbers[name], *args)
    return ctypes.get_errno() if result == -1 else "succeeded"
results = {
    "tkill": call("tkill", host, 0),
    "tgkill": call("tgkill", host, host, 0),
    "rt_sigqueueinfo": call("rt_sigqueueinfo", host, 0, info),
    "rt_tgsigqueueinfo": call("rt_tgsigqueueinfo", host, host, 0, info),
    "ptrace": call("ptrace", 0x4206, host, 0, 0),
    "process_vm_readv": call("process_vm_readv", host, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0),
    "process_vm_writev": call("process_vm_writev", host, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0),
}
try:
    os.pidfd_open(host)
    results["pidfd_open"] = "succeeded"
except OSError as e:
    results["pidfd_open"] = e.errno
# pidfd_send_signal also takes a /proc/<pid> folder as the process's handle.
proc = os.open(f"/proc/{host}", os.O_RDONLY | os.O_DIRECTORY)
try:
    signal.pidfd_send_signal(proc, 0)
    results["pidfd_send_signal"] = "succeeded"
except OSError as e:
    results["pidfd_send_signal"] = e.errno
for name, outcome in results.items():
    print(name, outcome)
"#;

#[test]
fn no_other_system_call_reaches_the_host() {
    if !guard_possible()
        && skip_unprivileged("no_other_system_call_reaches_the_host", "CAP_SYS_ADMIN")
    {
        return;
    }
    let project = Project::new();
    project.write("ways.py", OTHER_WAYS_TO_THE_HOST);
    let mut host = guarded().start(project.path());
    let reply = host.command("bash", "python3 ways.py $PPID");
    assert!(host.is_running(), "the attempts killed the host");
    let output = reply.ok();
    let names = [
        "tkill",
        "tgkill",
        "rt_sigqueueinfo",
        "rt_tgsigqueueinfo",
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "pidfd_open",
        "pidfd_send_signal",
    ];
    for name in names {
        assert!(
            output.lines().any(|line| line == format!("{name} 1")),
            "{name} was not refused with EPERM:\n{output}"
        );
    }
    host.finish();
}

/// Opens, from a program the host started, what `/proc/<host>` gives to
/// whoever may trace the host: its stdout and stderr to write a forged
/// answer into, its stdin opened for writing to send a command in the
/// agent's name, and its memory. Prints one line per attempt. (Its
/// environment is not among them: some kernels let anyone of its user read
/// `/proc/<pid>/environ`, traceable or not; docs/security.md.)
const REACH_THE_HOSTS_DESCRIPTORS: &str = r#"
import os, sys
host = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1] else os.getppid()
forged = b'{"type":"response","response":{"output":"FORGED","success":true}}\n'
injected = b'{"type":"command","environment":"bash","command":"touch injected"}\n'
def write(path, data):
    with open(path, "wb", buffering=0) as f:
        f.write(data)
def attempt(name, action):
    try:
        action()
        print(name, "succeeded")
    except OSError as e:
        print(name, "refused", e.errno)
attempt("stdout", lambda: write(f"/proc/{host}/fd/1", forged))
attempt("stderr", lambda: write(f"/proc/{host}/fd/2", forged))
attempt("stdin", lambda: write(f"/proc/{host}/fd/0", injected))
attempt("mem", lambda: os.close(os.open(f"/proc/{host}/mem", os.O_RDONLY)))
"#;

fn assert_all_refused(output: &str) {
    for name in ["stdout", "stderr", "stdin", "mem"] {
        assert!(
            output
                .lines()
                .any(|line| line.starts_with(&format!("{name} refused "))),
            "{name} was reached through /proc:\n{output}"
        );
    }
}

/// The host's `/proc/<pid>/environ` shows the environment it was started
/// with, and the kernel lets processes read it that may not trace the host:
/// the secrets kept out of the commands' environment must not be there.
#[test]
fn commands_cannot_read_withheld_secrets_in_the_hosts_proc_environ() {
    let project = Project::new();
    let mut host = guarded()
        .env("DEMO_API_KEY", "marker-withheld-1")
        .env("DEMO_TOKEN", "marker-passed-2")
        .env("DEMO_PLAIN", "plain-value")
        .args(["--pass-env", "DEMO_TOKEN"])
        .start(project.path());
    // The plain variable proves the file was read; the passed-through
    // secret, that the host still has its variables.
    let from_bash = host
        .command(
            "bash",
            "tr '\\0' '\\n' < /proc/$PPID/environ | grep -c '^DEMO_PLAIN=plain-value$'; \
             tr '\\0' '\\n' < /proc/$PPID/environ | grep -c marker-; \
             echo \"${DEMO_API_KEY:-unset} $DEMO_TOKEN\"",
        )
        .output()
        .to_owned();
    assert_eq!(from_bash, "1\n0\nunset marker-passed-2\n");
    let from_python = host
        .command(
            "python",
            "import os\nblock = open(f'/proc/{os.getppid()}/environ', 'rb').read()\n\
             print(b'DEMO_PLAIN=plain-value' in block, b'marker-' in block)",
        )
        .ok()
        .to_owned();
    assert_eq!(from_python, "True False\n");
    host.finish();
}

#[test]
fn commands_cannot_reach_the_hosts_descriptors_or_memory() {
    for guard in [false, true] {
        let project = Project::new();
        project.write("reach.py", REACH_THE_HOSTS_DESCRIPTORS);
        let mut host = if guard { guarded() } else { Host::builder() }.start(project.path());
        let h = host.pid();
        // Any forged line would reach the harness first, and fail to parse
        // as an answer or be taken for this one. The host's real pid, as an
        // attacker would find it: in namespaces there is no /proc entry for
        // it; behind the guard there is, closed to the commands.
        assert_all_refused(host.command("bash", &format!("python3 reach.py {h}")).ok());
        assert_all_refused(
            host.command(
                "python",
                &format!(
                    "import runpy, sys\nsys.argv = ['reach.py', '{h}']\nrunpy.run_path('reach.py')"
                ),
            )
            .ok(),
        );
        let listing = host.command("bash", "ls").ok().to_owned();
        assert!(!listing.contains("injected"), "{listing}");
        assert!(!project.path().join("injected").exists());
        host.finish();
    }
}
