//! Containment: each program the host starts, with everything it starts, in
//! one place from which all of it can be ended for certain.
//!
//! Where the machine allows it, that place is a *cgroup v2* of its own
//! (Linux 5.14 or later, for `cgroup.kill`): at start-up the host creates
//! `envhost-<pid>-<random>` below its own cgroup (and holds a lock on it
//! for as long as it lives), and each program started through
//! [`crate::spawn`] joins a fresh child cgroup between fork and exec, so it
//! and every process it ever forks (a daemon that double-forks, a program
//! that forks and exits in a tight loop, a job that calls `setsid`) stays in
//! it. [`Enclosure::kill`] writes `cgroup.kill`: the kernel kills every
//! member at once, with no process table to race against. No controller is
//! enabled, so nothing here limits or accounts; it only groups.
//!
//! The cgroup is unavailable without a cgroup v2 mount, without
//! `cgroup.kill`, or when the host's cgroup is not writable (an unprivileged
//! user without systemd delegation, a container whose `/sys/fs/cgroup` is
//! read-only), and when turned off (`--no-cgroups`). Then every program
//! still gets an [`Enclosure`] that holds nothing: containment falls back to
//! what the callers and the reaper always do, which is documented in
//! `docs/security.md`: process groups and sessions signalled as a whole
//! (which a forking loop cannot escape unless it leaves its group), the host
//! as child subreaper, and a sweep of `/proc` at shutdown.
//!
//! This module knows cgroups and pids, nothing of environments.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// How long a kill waits for the cgroup to empty before leaving its removal
/// to the host's shutdown.
const EMPTY_WAIT: Duration = Duration::from_secs(2);

/// The host's lock on its folder of cgroups: released by the kernel when
/// the host ends, however it ends, which is how another host tells a
/// folder left by a dead host (whatever its pid namespace) from a live one.
static BASE_LOCK: OnceLock<File> = OnceLock::new();

/// How the host contains what it starts, decided once at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Containment {
    /// Each program in a cgroup of its own below this folder.
    Cgroups {
        /// The host's folder of cgroups (`…/envhost-<pid>`).
        base: PathBuf,
    },
    /// Process groups, sessions and the subreaper only.
    ProcessTree {
        /// Why there are no cgroups, in words.
        reason: String,
    },
}

static MODE: OnceLock<Containment> = OnceLock::new();

/// Decides how to contain programs: cgroups if `use_cgroups` and the
/// machine allows it. Called once at start-up by [`crate::install_reaper`]'s
/// caller through [`configure`]; later calls return the first decision.
pub fn configure(use_cgroups: bool) -> &'static Containment {
    MODE.get_or_init(|| {
        if !use_cgroups {
            return Containment::ProcessTree {
                reason: "cgroups were turned off (--no-cgroups)".into(),
            };
        }
        match create_base() {
            Ok(base) => Containment::Cgroups { base },
            Err(reason) => Containment::ProcessTree { reason },
        }
    })
}

/// The decision, making it (with cgroups allowed) if nobody has.
pub fn mode() -> &'static Containment {
    configure(true)
}

/// `<cgroup2 mount><the host's cgroup>/envhost-<pid>-<random>`, created
/// and locked.
fn create_base() -> Result<PathBuf, String> {
    let own = own_cgroup()
        .ok_or("the host's cgroup v2 is unknown (no `0::` line in /proc/self/cgroup)")?;
    let (mount, root) = cgroup2_mount().ok_or("no cgroup v2 file system is mounted")?;
    let relative = own
        .strip_prefix(&root)
        .map(Path::to_owned)
        .unwrap_or_else(|_| own.clone());
    let relative = relative.strip_prefix("/").unwrap_or(&relative).to_owned();
    let parent = mount.join(relative);
    // Creating a folder and locking it is one step for the hosts sharing
    // this parent: none takes another's new folder for a dead one's.
    let parent_lock = open_dir(&parent)
        .map_err(|err| format!("cannot open the cgroup {} ({err})", parent.display()))?;
    lock(&parent_lock, true);
    remove_stale(&parent);
    let base = parent.join(format!(
        "envhost-{}-{:08x}",
        std::process::id(),
        random_u32()
    ));
    if let Err(err) = fs::create_dir(&base) {
        return Err(format!(
            "cannot create the cgroup {} ({err}); this needs root or a delegated cgroup",
            base.display()
        ));
    }
    if !base.join("cgroup.kill").exists() {
        let _ = fs::remove_dir(&base);
        return Err("the kernel has no cgroup.kill (Linux 5.14 or later is needed)".into());
    }
    let held = open_dir(&base).ok().filter(|dir| lock(dir, false));
    let Some(held) = held else {
        let _ = fs::remove_dir(&base);
        return Err(format!("cannot lock the cgroup {}", base.display()));
    };
    let _ = BASE_LOCK.set(held);
    Ok(base)
}

fn open_dir(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_DIRECTORY | nix::libc::O_CLOEXEC)
        .open(path)
}

/// An exclusive `flock` on `dir`, waiting for it or not. `true` if held.
fn lock(dir: &File, wait: bool) -> bool {
    let operation = if wait {
        nix::libc::LOCK_EX
    } else {
        nix::libc::LOCK_EX | nix::libc::LOCK_NB
    };
    // SAFETY: flock on a descriptor this function borrows.
    unsafe { nix::libc::flock(dir.as_raw_fd(), operation) == 0 }
}

/// 32 random bits for a name (not a secret).
fn random_u32() -> u32 {
    use std::io::Read;
    let mut bytes = [0u8; 4];
    if File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .is_err()
    {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        return nanos ^ std::process::id();
    }
    u32::from_ne_bytes(bytes)
}

/// Whether `name` is one a host gives its folder, `envhost-<pid>-<8 hex
/// digits>`: other folders beside it (a test's, another tool's named
/// `envhost-…`) are never taken for a dead host's.
fn is_host_folder_name(name: &str) -> bool {
    let Some((pid, random)) = name
        .strip_prefix("envhost-")
        .and_then(|rest| rest.split_once('-'))
    else {
        return false;
    };
    !pid.is_empty()
        && pid.bytes().all(|b| b.is_ascii_digit())
        && random.len() == 8
        && random.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Cgroups left by hosts that died without cleaning up (killed with
/// SIGKILL): whatever still runs in them has nobody to end it, so it is
/// killed, and the folders are removed. A folder is left by a dead host
/// when nobody holds its lock.
fn remove_stale(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        if !is_host_folder_name(&entry.file_name().to_string_lossy()) {
            continue;
        }
        let base = entry.path();
        let Ok(dir) = open_dir(&base) else {
            continue;
        };
        if !lock(&dir, false) {
            continue; // its host is alive
        }
        if let Ok(children) = fs::read_dir(&base) {
            for child in children.filter_map(Result::ok) {
                if child.path().is_dir() {
                    kill_cgroup(&child.path());
                    let _ = fs::remove_dir(child.path());
                }
            }
        }
        let _ = fs::remove_dir(&base);
    }
}

/// The host's own cgroup v2 path, from `/proc/self/cgroup`.
fn own_cgroup() -> Option<PathBuf> {
    let text = fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("0::"))
        .map(PathBuf::from)
}

/// Where the cgroup v2 file system is mounted, and which of its folders is
/// the mount's root, from `/proc/self/mountinfo`.
fn cgroup2_mount() -> Option<(PathBuf, PathBuf)> {
    let text = fs::read_to_string("/proc/self/mountinfo").ok()?;
    text.lines().find_map(|line| {
        let (fields, after) = line.split_once(" - ")?;
        if after.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        let mut fields = fields.split_whitespace();
        let root = fields.nth(3)?;
        let mount = fields.next()?;
        Some((
            PathBuf::from(unescape(mount)),
            PathBuf::from(unescape(root)),
        ))
    })
}

/// mountinfo escapes spaces, tabs, newlines and backslashes as `\ooo`.
fn unescape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut chars = field.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            let digits: String = chars.by_ref().take(3).collect();
            match u8::from_str_radix(&digits, 8) {
                Ok(byte) => out.push(byte as char),
                Err(_) => {
                    out.push('\\');
                    out.push_str(&digits);
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// One program's cgroup (or nothing, without cgroups).
#[derive(Debug)]
pub struct Enclosure {
    dir: Option<PathBuf>,
    /// `cgroup.procs`, open until the program has started: the child joins
    /// by writing `0` to it between fork and exec.
    join: Option<File>,
}

impl Enclosure {
    /// A fresh cgroup named after `label` (a program's name), or an empty
    /// enclosure when the host has no cgroups or this one cannot be made.
    pub fn create(label: &str) -> Enclosure {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let Containment::Cgroups { base } = mode() else {
            return Enclosure::none();
        };
        let label: String = label
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .take(32)
            .collect();
        let dir = base.join(format!("{label}-{}", NEXT.fetch_add(1, Ordering::Relaxed)));
        if fs::create_dir(&dir).is_err() {
            return Enclosure::none();
        }
        match OpenOptions::new()
            .write(true)
            .custom_flags(nix::libc::O_CLOEXEC)
            .open(dir.join("cgroup.procs"))
        {
            Ok(join) => Enclosure {
                dir: Some(dir),
                join: Some(join),
            },
            Err(_) => {
                let _ = fs::remove_dir(&dir);
                Enclosure::none()
            }
        }
    }

    /// An enclosure that contains nothing (the fallback).
    pub fn none() -> Enclosure {
        Enclosure {
            dir: None,
            join: None,
        }
    }

    /// Whether this is a real cgroup.
    pub fn is_cgroup(&self) -> bool {
        self.dir.is_some()
    }

    /// The descriptor a child writes `0` to, between fork and exec, to join.
    pub(crate) fn join_fd(&self) -> Option<RawFd> {
        self.join.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// The program has started (and joined): the host's copy of the join
    /// descriptor is no longer needed.
    pub(crate) fn started(&mut self) {
        self.join = None;
    }

    /// The living members (empty without a cgroup).
    pub fn members(&self) -> Vec<i32> {
        let Some(dir) = &self.dir else {
            return Vec::new();
        };
        fs::read_to_string(dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.trim().parse().ok())
            .collect()
    }

    /// Sends `signal` to every member: the polite round before a kill, for
    /// processes that left the program's session.
    pub fn signal_all(&self, signal: nix::sys::signal::Signal) {
        for pid in self.members() {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal);
        }
    }

    /// Kills every member at once and waits (briefly) until they are gone.
    /// `true` when the cgroup is empty (always, without a cgroup).
    pub fn kill(&self) -> bool {
        let Some(dir) = &self.dir else {
            return true;
        };
        kill_cgroup(dir)
    }
}

impl Drop for Enclosure {
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take() {
            kill_cgroup(&dir);
            // Busy if a member is stuck in the kernel: the host's shutdown
            // tries again.
            let _ = fs::remove_dir(&dir);
        }
    }
}

/// Writes `cgroup.kill` and waits up to [`EMPTY_WAIT`] for `populated 0`.
fn kill_cgroup(dir: &Path) -> bool {
    let populated = || {
        fs::read_to_string(dir.join("cgroup.events"))
            .map(|events| events.lines().any(|line| line == "populated 1"))
            .unwrap_or(false)
    };
    if !populated() {
        return true;
    }
    let _ = OpenOptions::new()
        .write(true)
        .open(dir.join("cgroup.kill"))
        .and_then(|mut file| file.write_all(b"1"));
    let deadline = Instant::now() + EMPTY_WAIT;
    while populated() {
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(5));
    }
    true
}

/// At host shutdown: kills what is left in every cgroup the host made and
/// removes them. Returns the pids still present (should be none).
pub fn end_all() -> Vec<i32> {
    let Some(Containment::Cgroups { base }) = MODE.get() else {
        return Vec::new();
    };
    let mut survivors = Vec::new();
    if let Ok(entries) = fs::read_dir(base) {
        for entry in entries.filter_map(Result::ok) {
            let dir = entry.path();
            if !dir.is_dir() {
                continue;
            }
            if !kill_cgroup(&dir) {
                survivors.extend(
                    fs::read_to_string(dir.join("cgroup.procs"))
                        .unwrap_or_default()
                        .lines()
                        .filter_map(|line| line.trim().parse::<i32>().ok()),
                );
            }
            let _ = fs::remove_dir(&dir);
        }
    }
    let _ = fs::remove_dir(base);
    survivors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape(r"/sys/fs/cgroup\040x"), "/sys/fs/cgroup x");
        assert_eq!(unescape("/plain"), "/plain");
    }

    #[test]
    fn folders_of_dead_hosts_are_removed_and_those_of_live_ones_kept() {
        let Containment::Cgroups { base } = mode() else {
            crate::tests_support::skip_unprivileged("cgroups", &format!("{:?}", mode()));
            return;
        };
        let parent = base.parent().expect("the host's cgroup");
        let dead = parent.join("envhost-0-deadbeef");
        let live = parent.join("envhost-0-a11fe000");
        fs::create_dir(&dead).unwrap();
        fs::create_dir(dead.join("bash-0")).unwrap();
        fs::create_dir(&live).unwrap();
        let other = parent.join(format!("envhost-test-private-{}-0", std::process::id()));
        fs::create_dir(&other).unwrap();
        fs::create_dir(other.join("envhost-1-00000000")).unwrap();
        let held = open_dir(&live).unwrap();
        assert!(lock(&held, false));
        remove_stale(parent);
        assert!(!dead.exists(), "a folder nobody holds is removed");
        assert!(live.exists(), "a held folder is kept");
        assert!(base.exists(), "this host's own folder is kept");
        assert!(
            other.join("envhost-1-00000000").exists(),
            "a folder not named as a host names its own is not a host's"
        );
        drop(held);
        fs::remove_dir(&live).unwrap();
        fs::remove_dir(other.join("envhost-1-00000000")).unwrap();
        fs::remove_dir(&other).unwrap();
    }

    #[test]
    fn only_names_a_host_gives_are_taken_for_hosts() {
        assert!(is_host_folder_name("envhost-123-0badcafe"));
        for name in [
            "envhost-test-private-1-2",
            "envhost-123-0badcaf",
            "envhost-123-0badcafez",
            "envhost--0badcafe",
            "envhost-bash-1-0",
            "other-1-0badcafe",
        ] {
            assert!(!is_host_folder_name(name), "{name}");
        }
    }

    #[test]
    fn an_empty_enclosure_holds_nothing_and_kills_nothing() {
        let enclosure = Enclosure::none();
        assert!(!enclosure.is_cgroup());
        assert!(enclosure.members().is_empty());
        assert!(enclosure.kill());
        assert_eq!(enclosure.join_fd(), None);
    }
}
