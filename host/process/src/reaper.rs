//! No orphans: every process the host starts, and everything those start,
//! ends when the host ends.
//!
//! The host makes itself a *child subreaper* (Linux `PR_SET_CHILD_SUBREAPER`):
//! a process orphaned anywhere below it (a `nohup … &` job whose shell died,
//! a daemon that double-forked) is re-parented to the host instead of to
//! init. At shutdown [`terminate_descendants`] signals and reaps the whole
//! tree below the host. While the host runs, a sweeper thread reaps those
//! re-parented orphans as they exit, so they do not linger as zombies.
//!
//! Environments keep waiting for their *own* children (bash, python) with
//! their usual `wait` calls; they register those pids with
//! [`spawn_managed`] so the sweeper never steals their exit status.
//!
//! Where cgroups are available ([`crate::containment`]), every program's
//! tree is also killed through its cgroup at shutdown, which no forking
//! loop can outrun; the sweep below is then a second net. Without cgroups
//! the sweep is the mechanism: it signals each descendant's process group
//! as well as the process (a loop that forks and exits stays in its group,
//! and a group signal reaches the members forked while it is delivered),
//! and repeats until nothing is left.
//!
//! This module knows nothing of environments; it only knows pids.

use std::collections::BTreeSet;
use std::io;
use std::sync::{Mutex, MutexGuard, Once};
use std::thread;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;

use super::containment::{self, Enclosure};
use super::procfs;

/// Pids whose exit status belongs to an environment, not to the sweeper.
static MANAGED: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// Set while [`terminate_descendants`] hunts: the sweeper leaves zombies
/// alone, since each one still names its process group (the way to reach a
/// process that forks and exits faster than the process table is read).
static HUNTING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn managed() -> MutexGuard<'static, BTreeSet<i32>> {
    // A panic while holding this lock cannot leave the set inconsistent
    // (single inserts and removes), so a poisoned lock is still usable.
    MANAGED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Makes the host the subreaper of everything it starts, decides how
/// programs are contained (cgroups unless [`crate::configure_containment`]
/// said otherwise first) and guarded, and starts the sweeper thread. Call
/// once, early; later calls do nothing.
pub fn install() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        containment::mode();
        crate::guard::prepare();
        if let Err(err) = nix::sys::prctl::set_child_subreaper(true) {
            eprintln!(
                "envhost: cannot become a child subreaper ({err}); processes that detach from \
                 their shell may outlive the host"
            );
        }
        start_sweeper();
    });
}

fn start_sweeper() {
    let signals = match signal_hook::iterator::Signals::new([signal_hook::consts::SIGCHLD]) {
        Ok(signals) => signals,
        Err(err) => {
            eprintln!(
                "envhost: cannot watch SIGCHLD ({err}); exited orphans are reaped at shutdown only"
            );
            return;
        }
    };
    let spawned = thread::Builder::new()
        .name("envhost-reaper".into())
        .spawn(move || {
            let mut signals = signals;
            for _ in signals.forever() {
                reap_exited_orphans();
            }
        });
    if let Err(err) = spawned {
        eprintln!("envhost: cannot start the reaper thread ({err})");
    }
}

/// A registered child pid; unregisters itself when dropped. When it holds
/// the program's cgroup ([`crate::spawn_managed_command`], the PTY spawn),
/// dropping it also kills whatever is still in that cgroup: the program's
/// environment is done with it.
#[derive(Debug)]
pub struct ManagedPid {
    pid: i32,
    enclosure: Enclosure,
}

impl ManagedPid {
    /// The guard of a pid [`spawn_registered`] registered.
    pub(crate) fn registered(pid: i32) -> ManagedPid {
        ManagedPid {
            pid,
            enclosure: Enclosure::none(),
        }
    }

    /// The process id.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The same registration, holding the program's cgroup.
    pub(crate) fn holding(mut self, enclosure: Enclosure) -> ManagedPid {
        self.enclosure = enclosure;
        self
    }

    /// The program's cgroup (empty without cgroups).
    pub fn enclosure(&self) -> &Enclosure {
        &self.enclosure
    }
}

impl Drop for ManagedPid {
    fn drop(&mut self) {
        // Kill first: the program's own exit status is no longer wanted, and
        // once unregistered the sweeper reaps it.
        self.enclosure.kill();
        managed().remove(&self.pid);
    }
}

/// Runs `spawn` and registers the pid it reports, holding the registry lock
/// throughout so that the sweeper cannot reap the child in between.
pub fn spawn_managed<T, E>(
    spawn: impl FnOnce() -> Result<T, E>,
    pid_of: impl FnOnce(&T) -> Option<u32>,
) -> Result<(T, Option<ManagedPid>), E> {
    let mut registry = managed();
    let child = spawn()?;
    let guard = pid_of(&child)
        .and_then(|pid| i32::try_from(pid).ok())
        .map(|pid| {
            registry.insert(pid);
            ManagedPid {
                pid,
                enclosure: Enclosure::none(),
            }
        });
    Ok((child, guard))
}

/// Runs `spawn`, which starts a process and returns its pid, holding the
/// registry lock throughout, and registers the pid: the sweeper leaves its
/// exit status to whoever started it (see [`unregister`]).
pub(crate) fn spawn_registered(spawn: impl FnOnce() -> io::Result<i32>) -> io::Result<i32> {
    let mut registry = managed();
    let pid = spawn()?;
    registry.insert(pid);
    Ok(pid)
}

/// The pids environments manage (their shells, interpreters and programs).
pub(crate) fn managed_pids() -> Vec<i32> {
    managed().iter().copied().collect()
}

/// Gives a pid registered with [`spawn_registered`] back to the sweeper.
pub(crate) fn unregister(pid: i32) {
    managed().remove(&pid);
}

/// Reaps children of the host that are zombies and not managed by an
/// environment: orphans re-parented to the host that have since exited.
pub fn reap_exited_orphans() {
    if HUNTING.load(std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    let me = std::process::id() as i32;
    let registry = managed();
    for process in procfs::process_table() {
        if process.parent == me && process.state == 'Z' && !registry.contains(&process.pid) {
            let _ = waitpid(Pid::from_raw(process.pid), Some(WaitPidFlag::WNOHANG));
        }
    }
}

/// What [`terminate_descendants`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TerminationReport {
    /// Processes that were still running and got SIGTERM.
    pub terminated: usize,
    /// Processes that ignored SIGTERM for the grace period and got SIGKILL.
    pub killed: usize,
    /// Processes still present after SIGKILL (should be none).
    pub survivors: Vec<i32>,
}

/// Ends every process below the host: SIGTERM (and SIGCONT, so stopped jobs
/// can act on it), up to `grace` to exit, then SIGKILL, through each
/// program's cgroup and through the process table; reaps them all.
pub fn terminate_descendants(grace: Duration) -> TerminationReport {
    use std::sync::atomic::Ordering;
    let me = std::process::id() as i32;
    let mut report = TerminationReport::default();
    HUNTING.store(true, Ordering::SeqCst);
    let living = living_descendants(me);
    report.terminated = living.len();
    if !wait_until_gone(me, grace) {
        report.killed = living_descendants(me).len();
        containment::end_all();
        // Until nothing is left: a process forked while the last round was
        // being sent is in the next snapshot, or its group is.
        let deadline = Instant::now() + Duration::from_secs(2);
        while !living_descendants(me).is_empty() && Instant::now() < deadline {
            signal_tree(me, &[Signal::SIGKILL], &mut BTreeSet::new());
            thread::sleep(Duration::from_millis(5));
        }
    }
    crate::session_init::end();
    HUNTING.store(false, Ordering::SeqCst);
    report.survivors.extend(containment::end_all());
    report
        .survivors
        .extend(living_descendants(me).iter().map(|p| p.pid));
    report.survivors.sort_unstable();
    report.survivors.dedup();
    reap_all_children();
    report
}

/// Sends `signals` to every descendant not in `done` and to every process
/// group a descendant (living, or a zombie not yet reaped) belongs to,
/// except the host's own group; adds them to `done`.
fn signal_tree(me: i32, signals: &[Signal], done: &mut BTreeSet<i32>) {
    let table = procfs::process_table();
    let own_group = nix::unistd::getpgrp().as_raw();
    let mut groups = BTreeSet::new();
    for process in procfs::descendants(&table, me) {
        if process.state != 'Z' && process.state != 'X' && done.insert(process.pid) {
            for &signal in signals {
                let _ = kill(Pid::from_raw(process.pid), signal);
            }
        }
        if process.group > 1 && process.group != own_group {
            groups.insert(process.group);
        }
    }
    for group in groups {
        // Groups are negative in `done`, apart from pids.
        if done.insert(-group) {
            for &signal in signals {
                let _ = nix::sys::signal::killpg(Pid::from_raw(group), signal);
            }
        }
    }
}

/// Descendants that are not zombies, but for the namespaces' init (which
/// heeds no signal but SIGKILL, and ends last, with everything left in its
/// namespaces: [`crate::session_init`]).
fn living_descendants(me: i32) -> Vec<procfs::ProcessInfo> {
    let table = procfs::process_table();
    let init = crate::session_init::pid();
    procfs::descendants(&table, me)
        .into_iter()
        .filter(|p| p.state != 'Z' && p.state != 'X' && Some(p.pid) != init)
        .collect()
}

/// SIGTERM and SIGCONT to everything below the host and every group seen
/// there, again for what appears (a process forked meanwhile, a group first
/// seen through a zombie), until nothing is left or `limit` has passed.
/// Zombies are left for the next round's snapshot (they name their
/// groups); the hunt reaps them when it is over.
fn wait_until_gone(me: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    let mut signalled = BTreeSet::new();
    loop {
        signal_tree(me, &[Signal::SIGTERM, Signal::SIGCONT], &mut signalled);
        if living_descendants(me).is_empty() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// Collects every exited child, managed or not (used at shutdown only).
fn reap_all_children() {
    loop {
        match waitpid(None::<Pid>, Some(WaitPidFlag::WNOHANG)) {
            Ok(nix::sys::wait::WaitStatus::StillAlive) => return,
            Ok(_) => continue,
            Err(Errno::EINTR) => continue,
            Err(_) => return, // ECHILD: no children left
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawn_managed_registers_and_unregisters() {
        let (child, guard) = spawn_managed(
            || std::process::Command::new("true").spawn(),
            |c| Some(c.id()),
        )
        .unwrap();
        let guard = guard.unwrap();
        assert!(managed().contains(&guard.pid()));
        let mut child = child;
        child.wait().unwrap();
        let pid = guard.pid();
        drop(guard);
        assert!(!managed().contains(&pid));
    }
}
