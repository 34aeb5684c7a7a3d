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
//! This module knows nothing of environments; it only knows pids.

use std::collections::BTreeSet;
use std::sync::{Mutex, MutexGuard, Once};
use std::thread;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;

use super::procfs;

/// Pids whose exit status belongs to an environment, not to the sweeper.
static MANAGED: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

fn managed() -> MutexGuard<'static, BTreeSet<i32>> {
    // A panic while holding this lock cannot leave the set inconsistent
    // (single inserts and removes), so a poisoned lock is still usable.
    MANAGED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Makes the host the subreaper of everything it starts and starts the
/// sweeper thread. Call once, early; later calls do nothing.
pub fn install() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
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

/// A registered child pid; unregisters itself when dropped.
#[derive(Debug)]
pub struct ManagedPid(i32);

impl ManagedPid {
    /// The process id.
    pub fn pid(&self) -> i32 {
        self.0
    }
}

impl Drop for ManagedPid {
    fn drop(&mut self) {
        managed().remove(&self.0);
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
            ManagedPid(pid)
        });
    Ok((child, guard))
}

/// Reaps children of the host that are zombies and not managed by an
/// environment: orphans re-parented to the host that have since exited.
pub fn reap_exited_orphans() {
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
/// can act on it), up to `grace` to exit, then SIGKILL; reaps them all.
pub fn terminate_descendants(grace: Duration) -> TerminationReport {
    let me = std::process::id() as i32;
    let mut report = TerminationReport::default();
    let living = living_descendants(me);
    for pid in &living {
        let pid = Pid::from_raw(*pid);
        let _ = kill(pid, Signal::SIGTERM);
        let _ = kill(pid, Signal::SIGCONT);
    }
    report.terminated = living.len();
    if !wait_until_gone(me, grace) {
        let stubborn = living_descendants(me);
        report.killed = stubborn.len();
        for pid in stubborn {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        wait_until_gone(me, Duration::from_secs(2));
    }
    report.survivors = living_descendants(me);
    reap_all_children();
    report
}

/// Descendants that are not zombies.
fn living_descendants(me: i32) -> Vec<i32> {
    let table = procfs::process_table();
    procfs::descendants(&table, me)
        .into_iter()
        .filter(|p| p.state != 'Z' && p.state != 'X')
        .map(|p| p.pid)
        .collect()
}

/// Reaps as it waits, since re-parented processes become the host's zombies.
fn wait_until_gone(me: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        reap_all_children();
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
