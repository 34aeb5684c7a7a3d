//! Containment: the session's programs, with everything they start, in one
//! place from which all of it can be bounded and ended for certain.
//!
//! At start-up ([`configure`]) the host makes `envhost-<pid>-<random>` below
//! its own cgroup (and holds an `flock` on it for as long as it lives), in
//! the cgroup v2 hierarchy and in each cgroup v1 hierarchy that holds a
//! controller v2 does not offer here (`pids`, `memory`, `cpu`). That
//! folder carries the **session's limits**: `pids.max` (a fork bomb stops
//! there, and the host outside it can still fork) and `memory.max` (a
//! memory hog is ended by the kernel inside it, never the host), and groups
//! the session for the CPU scheduler (one competitor for the host's threads,
//! and no real-time scheduling: a new `cpu` group gets no real-time
//! runtime). Inside it, `session/` holds the session's namespace init
//! ([`crate::isolation`]), whose cgroup namespace is rooted there — so no
//! program can see or raise the limits one level up — and, in cgroup v2,
//! one child cgroup per program ([`Enclosure`]) that the host can kill with
//! everything that program ever started (`cgroup.kill`: no process table to
//! race against). The host itself stays outside everything it limits.
//!
//! Cgroups are unavailable without a cgroup mount the host may write (an
//! unprivileged user without systemd delegation, a container whose
//! `/sys/fs/cgroup` is read-only), and when turned off (`--no-cgroups`).
//! Then nothing is limited, and containment falls back to what the callers
//! and the reaper always do: process groups and sessions signalled as a
//! whole, the host as child subreaper, a sweep of `/proc` at shutdown (and,
//! with namespaces, the end of the namespace's init). The screen says which
//! limits are in force ([`limits`]).
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

use envhost_core::text;
use nix::fcntl::{Flock, FlockArg};

/// How long a kill waits for the cgroup to empty before leaving its removal
/// to the host's shutdown.
const EMPTY_WAIT: Duration = Duration::from_secs(2);

/// How long the host waits for another host's lock on their shared parent
/// before it leaves the sweep of dead hosts' folders for another time.
const PARENT_LOCK_WAIT: Duration = Duration::from_secs(2);

/// The processes a session may have at once unless the operator says
/// otherwise (`--max-processes`): a build with many compilers and a test
/// suite fit; a fork bomb stops there.
pub const DEFAULT_MAX_PROCESSES: u64 = 4096;

/// The host's locks on its folders of cgroups: released by the kernel when
/// the host ends, however it ends, which is how another host tells a
/// folder left by a dead host (whatever its pid namespace) from a live one.
static HELD: OnceLock<Vec<Flock<File>>> = OnceLock::new();

/// The limits the operator asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most processes (and threads) at once; `None` for no limit.
    pub processes: Option<u64>,
    /// Most memory, in bytes; `None` for no limit.
    pub memory: Option<u64>,
}

impl Default for Limits {
    /// [`DEFAULT_MAX_PROCESSES`], and three quarters of the machine's memory
    /// (the rest for the host, the agent and the system).
    fn default() -> Self {
        Limits {
            processes: Some(DEFAULT_MAX_PROCESSES),
            memory: machine_memory().map(|bytes| bytes / 4 * 3),
        }
    }
}

/// The machine's memory (`MemTotal`).
pub fn machine_memory() -> Option<u64> {
    let info = fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|line| line.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// What [`configure`] is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContainmentSettings {
    /// Use cgroups where the machine allows it.
    pub cgroups: bool,
    /// The session's limits.
    pub limits: Limits,
}

impl Default for ContainmentSettings {
    fn default() -> Self {
        ContainmentSettings {
            cgroups: true,
            limits: Limits::default(),
        }
    }
}

/// How the host contains what it starts, decided once at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Containment {
    /// Each program in a cgroup v2 of its own below this folder.
    Cgroups {
        /// The host's folder of cgroups (`…/envhost-<pid>-<random>`).
        base: PathBuf,
    },
    /// No cgroup per program: process groups, sessions and the subreaper.
    ProcessTree {
        /// Why there are no cgroups, in words.
        reason: String,
    },
}

/// The session's folders and the limits in force.
#[derive(Debug)]
struct Session {
    /// The cgroup v2 folder, when there is one.
    unified: Option<PathBuf>,
    /// The cgroup v1 folders (one per hierarchy used), with their controller.
    legacy: Vec<(String, PathBuf)>,
    limits: LimitsInForce,
}

/// Which limits hold, and where the kernel counts what they refused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LimitsInForce {
    /// The process limit and the file that counts the forks it refused:
    /// cgroup v2 counts them where the limit is, v1 where the fork was.
    processes: Option<(u64, PathBuf)>,
    /// The memory limit and the file that counts the processes the kernel
    /// ended for it (`memory.events` in v2, `memory.oom_control` in v1).
    memory: Option<(u64, PathBuf)>,
    /// Why a limit asked for is not in force.
    missing: Vec<String>,
}

impl LimitsInForce {
    /// The process limit, if in force.
    pub fn processes(&self) -> Option<u64> {
        self.processes.as_ref().map(|(limit, _)| *limit)
    }

    /// The memory limit in bytes, if in force.
    pub fn memory(&self) -> Option<u64> {
        self.memory.as_ref().map(|(limit, ..)| *limit)
    }

    /// The process limit and the file counting the forks it refused.
    pub(crate) fn processes_watched(&self) -> Option<&(u64, PathBuf)> {
        self.processes.as_ref()
    }

    /// The memory limit and the file counting the processes ended for it.
    pub(crate) fn memory_watched(&self) -> Option<&(u64, PathBuf)> {
        self.memory.as_ref()
    }

    /// One sentence for the screen and `envhost healthcheck`.
    pub fn describe(&self) -> String {
        let mut held = Vec::new();
        if let Some(processes) = self.processes() {
            held.push(format!("{processes} processes (--max-processes)"));
        }
        if let Some(memory) = self.memory() {
            held.push(format!("{} of memory (--max-memory)", text::bytes(memory)));
        }
        let mut words = if held.is_empty() {
            "Session limits: none.".to_owned()
        } else {
            format!(
                "Session limits: {}; envhost itself is outside them.",
                held.join(" and ")
            )
        };
        if !self.missing.is_empty() {
            words.push_str(&format!(" Not in force: {}.", self.missing.join("; ")));
        }
        words
    }

    /// What the kernel has refused or ended under these limits so far.
    pub fn counters(&self) -> LimitCounters {
        let forks_refused = self
            .processes
            .as_ref()
            .and_then(|(_, events)| read_counter(events, "max"))
            .unwrap_or(0);
        let oom_kills = self
            .memory
            .as_ref()
            .and_then(|(_, events)| read_counter(events, "oom_kill"))
            .unwrap_or(0);
        LimitCounters {
            forks_refused,
            oom_kills,
        }
    }
}

/// `name N` from a flat-keyed cgroup file.
fn read_counter(file: &Path, name: &str) -> Option<u64> {
    fs::read_to_string(file).ok()?.lines().find_map(|line| {
        let (key, value) = line.split_once(' ')?;
        (key == name).then(|| value.trim().parse().ok())?
    })
}

/// Counts of what the session's limits refused or ended, to compare
/// before and after a command.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimitCounters {
    /// Forks refused at the process limit.
    pub forks_refused: u64,
    /// Processes the kernel's out-of-memory killer ended at the memory limit.
    pub oom_kills: u64,
}

static MODE: OnceLock<Containment> = OnceLock::new();
static SESSION: OnceLock<Session> = OnceLock::new();

/// Decides how to contain programs and makes the session's cgroups with
/// their limits. Called once at start-up, before the namespaces (whose
/// init joins them) and before any program; later calls return the first
/// decision.
pub fn configure(settings: ContainmentSettings) -> &'static Containment {
    MODE.get_or_init(|| {
        let (mode, session) = decide(settings);
        let _ = SESSION.set(session);
        mode
    })
}

/// The decision, making it (with cgroups and the default limits) if
/// nobody has.
pub fn mode() -> &'static Containment {
    configure(ContainmentSettings::default())
}

/// The session's limits in force.
pub fn limits() -> &'static LimitsInForce {
    mode();
    static NONE: OnceLock<LimitsInForce> = OnceLock::new();
    SESSION
        .get()
        .map(|session| &session.limits)
        .unwrap_or_else(|| NONE.get_or_init(LimitsInForce::default))
}

fn decide(settings: ContainmentSettings) -> (Containment, Session) {
    let mut session = Session {
        unified: None,
        legacy: Vec::new(),
        limits: LimitsInForce::default(),
    };
    if !settings.cgroups {
        let reason = "cgroups were turned off (--no-cgroups)".to_owned();
        session.limits.missing = asked(&settings.limits)
            .into_iter()
            .map(|what| format!("{what} ({reason})"))
            .collect();
        return (Containment::ProcessTree { reason }, session);
    }
    let name = format!("envhost-{}-{:08x}", std::process::id(), random_u32());
    let mut held = Vec::new();
    let mode = match create_unified(&name, &mut held) {
        Ok(base) => {
            session.unified = Some(base.clone());
            Containment::Cgroups { base }
        }
        Err(reason) => Containment::ProcessTree {
            reason: reason.to_string(),
        },
    };
    let offered = session
        .unified
        .as_deref()
        .map(unified_controllers)
        .unwrap_or_default();
    for controller in ["pids", "memory", "cpu"] {
        if offered.iter().any(|c| c == controller) {
            continue;
        }
        if let Some(base) = create_legacy(controller, &name, &mut held) {
            session.legacy.push((controller.to_owned(), base));
        }
    }
    session.limits = apply_limits(&settings.limits, &session, &offered);
    let _ = HELD.set(held);
    (mode, session)
}

/// The limits asked for, in words.
fn asked(limits: &Limits) -> Vec<&'static str> {
    let mut asked = Vec::new();
    if limits.processes.is_some() {
        asked.push("the process limit");
    }
    if limits.memory.is_some() {
        asked.push("the memory limit");
    }
    asked
}

/// Writes the limits where their controller is: cgroup v2's folder when it
/// offers it, else the v1 hierarchy's.
fn apply_limits(limits: &Limits, session: &Session, offered: &[String]) -> LimitsInForce {
    let mut in_force = LimitsInForce::default();
    let place = |controller: &str| -> Option<(PathBuf, bool)> {
        if offered.iter().any(|c| c == controller) {
            return session.unified.clone().map(|dir| (dir, true));
        }
        session
            .legacy
            .iter()
            .find(|(c, _)| c == controller)
            .map(|(_, dir)| (dir.clone(), false))
    };
    if let Some(limit) = limits.processes {
        match place("pids") {
            Some((dir, unified)) => match fs::write(dir.join("pids.max"), limit.to_string()) {
                Ok(()) => {
                    let counted = if unified { dir } else { dir.join("session") };
                    in_force.processes = Some((limit, counted.join("pids.events")));
                }
                Err(err) => in_force
                    .missing
                    .push(format!("the process limit (cannot write pids.max: {err})")),
            },
            None => in_force.missing.push(
                "the process limit (no pids controller in a cgroup envhost may write)".to_owned(),
            ),
        }
    }
    if let Some(limit) = limits.memory {
        match place("memory") {
            Some((dir, unified)) => {
                let file = if unified {
                    "memory.max"
                } else {
                    "memory.limit_in_bytes"
                };
                let events = if unified {
                    "memory.events"
                } else {
                    "memory.oom_control"
                };
                // v1 counts where the processes are, as for forks.
                let counted = if unified {
                    dir.join(events)
                } else {
                    dir.join("session").join(events)
                };
                match fs::write(dir.join(file), limit.to_string()) {
                    Ok(()) => in_force.memory = Some((limit, counted)),
                    Err(err) => in_force
                        .missing
                        .push(format!("the memory limit (cannot write {file}: {err})")),
                }
            }
            None => in_force.missing.push(
                "the memory limit (no memory controller in a cgroup envhost may write)".to_owned(),
            ),
        }
    }
    in_force
}

/// Why the session's cgroup cannot be made or sealed, in words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct CgroupError(String);

impl From<String> for CgroupError {
    fn from(message: String) -> Self {
        CgroupError(message)
    }
}

impl From<&str> for CgroupError {
    fn from(message: &str) -> Self {
        CgroupError(message.to_owned())
    }
}

/// `<cgroup2 mount><the host's cgroup>/NAME` with `session/` in it,
/// created and locked; controllers the host's cgroup can hand down are
/// enabled for it.
fn create_unified(name: &str, held: &mut Vec<Flock<File>>) -> Result<PathBuf, CgroupError> {
    let own = own_cgroup("0", "")
        .ok_or("the host's cgroup v2 is unknown (no `0::` line in /proc/self/cgroup)")?;
    let (mount, root) = cgroup_mount(|fstype, _| fstype == "cgroup2")
        .ok_or("no cgroup v2 file system is mounted")?;
    let parent = below(&mount, &root, &own);
    sweep_dead_hosts(&parent, true);
    // Pids and memory for the session's folder, where the host's cgroup may
    // hand them down (the root cgroup; a cgroup without processes). Refused
    // otherwise (a process in the host's cgroup): v1 or nothing then.
    let _ = fs::write(parent.join("cgroup.subtree_control"), "+pids +memory +cpu");
    let base = parent.join(name);
    if let Err(err) = fs::create_dir(&base) {
        return Err(format!(
            "cannot create the cgroup {} ({err}); this needs root or a delegated cgroup",
            base.display()
        )
        .into());
    }
    if !base.join("cgroup.kill").exists() {
        let _ = fs::remove_dir(&base);
        return Err("the kernel has no cgroup.kill (Linux 5.14 or later is needed)".into());
    }
    let Some(lock) = lock_path(&base) else {
        let _ = fs::remove_dir(&base);
        return Err(format!("cannot lock the cgroup {}", base.display()).into());
    };
    if let Err(err) = fs::create_dir(base.join("session")) {
        let _ = fs::remove_dir(&base);
        return Err(format!(
            "cannot create the cgroup {}/session ({err})",
            base.display()
        )
        .into());
    }
    held.push(lock);
    Ok(base)
}

/// The controllers cgroup v2 offers the session's folder.
fn unified_controllers(base: &Path) -> Vec<String> {
    fs::read_to_string(base.join("cgroup.controllers"))
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// `NAME/session` in the v1 hierarchy of `controller`, below the host's
/// cgroup there, created and locked; `None` where there is no such
/// hierarchy or the host may not write it.
fn create_legacy(controller: &str, name: &str, held: &mut Vec<Flock<File>>) -> Option<PathBuf> {
    let (mount, root) = cgroup_mount(|fstype, options| {
        fstype == "cgroup" && options.split(',').any(|option| option == controller)
    })?;
    let own = own_cgroup_v1(controller)?;
    let parent = below(&mount, &root, &own);
    sweep_dead_hosts(&parent, false);
    let base = parent.join(name);
    fs::create_dir(&base).ok()?;
    let Some(lock) = lock_path(&base) else {
        let _ = fs::remove_dir(&base);
        return None;
    };
    if fs::create_dir(base.join("session")).is_err() {
        let _ = fs::remove_dir(&base);
        return None;
    }
    held.push(lock);
    Some(base)
}

/// The host's cgroup folder in the hierarchy mounted at `mount` (whose own
/// root is `root`).
fn below(mount: &Path, root: &Path, own: &Path) -> PathBuf {
    let relative = own.strip_prefix(root).unwrap_or(own);
    let relative = relative.strip_prefix("/").unwrap_or(relative);
    mount.join(relative)
}

fn open_dir(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_DIRECTORY | nix::libc::O_CLOEXEC | nix::libc::O_NOFOLLOW)
        .open(path)
}

/// An exclusive `flock` on the folder `dir` if nobody holds one; never
/// waits. Held until the guard is dropped (or the host ends).
fn lock(dir: File) -> Option<Flock<File>> {
    Flock::lock(dir, FlockArg::LockExclusiveNonblock).ok()
}

/// [`lock`] on the folder at `path`.
fn lock_path(path: &Path) -> Option<Flock<File>> {
    open_dir(path).ok().and_then(lock)
}

/// 32 random bits for a name (not a secret).
fn random_u32() -> u32 {
    let mut bytes = [0u8; 4];
    if getrandom(&mut bytes).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        return nanos ^ std::process::id();
    }
    u32::from_ne_bytes(bytes)
}

fn getrandom(bytes: &mut [u8]) -> io::Result<()> {
    // SAFETY: the buffer is valid for its length.
    let got = unsafe { nix::libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if got == bytes.len() as isize {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
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

/// Folders left by hosts that died without cleaning up (killed with
/// SIGKILL): whatever still runs in them has nobody to end it, so it is
/// killed, and the folders are removed. A folder is left by a dead host
/// when nobody holds its lock. The hosts sharing `parent` take turns
/// (a lock on `parent`), so that none takes another's new folder, not yet
/// locked, for a dead one's; a parent someone holds for longer than
/// [`PARENT_LOCK_WAIT`] only means no sweep this time.
fn sweep_dead_hosts(parent: &Path, unified: bool) {
    let deadline = Instant::now() + PARENT_LOCK_WAIT;
    let _turn = loop {
        if let Some(turn) = lock_path(parent) {
            break turn;
        }
        if Instant::now() >= deadline {
            return;
        }
        thread::sleep(Duration::from_millis(10));
    };
    remove_stale(parent, unified);
}

fn remove_stale(parent: &Path, unified: bool) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        if !is_host_folder_name(&entry.file_name().to_string_lossy()) {
            continue;
        }
        let base = entry.path();
        let Some(_dead) = lock_path(&base) else {
            continue; // its host is alive
        };
        if unified {
            kill_cgroup(&base);
        } else {
            kill_legacy(&base);
        }
        remove_tree(&base);
    }
}

/// Removes a cgroup folder and the cgroups below it, deepest first.
fn remove_tree(dir: &Path) {
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.filter_map(Result::ok) {
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                remove_tree(&entry.path());
            }
        }
    }
    let _ = fs::remove_dir(dir);
}

/// The host's own cgroup path in hierarchy `id` (`0` for v2), from
/// `/proc/self/cgroup`.
fn own_cgroup(id: &str, controllers: &str) -> Option<PathBuf> {
    let text = fs::read_to_string("/proc/self/cgroup").ok()?;
    let prefix = format!("{id}:{controllers}:");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .map(PathBuf::from)
}

/// The host's cgroup path in the v1 hierarchy holding `controller`.
fn own_cgroup_v1(controller: &str) -> Option<PathBuf> {
    let text = fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let _id = fields.next()?;
        let controllers = fields.next()?;
        let path = fields.next()?;
        controllers
            .split(',')
            .any(|c| c == controller)
            .then(|| PathBuf::from(path))
    })
}

/// One mount from `/proc/self/mountinfo`.
#[derive(Debug, Clone)]
struct MountEntry {
    /// Where it is mounted.
    point: PathBuf,
    /// The folder of its file system mounted there.
    root: PathBuf,
    fstype: String,
    /// The file system's own options (`rw,memory`).
    options: String,
}

fn mounts() -> Vec<MountEntry> {
    let text = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let (fields, after) = line.split_once(" - ")?;
            let mut after = after.split_whitespace();
            let fstype = after.next()?.to_owned();
            let _source = after.next()?;
            let options = after.next().unwrap_or("").to_owned();
            let mut fields = fields.split_whitespace();
            let root = fields.nth(3)?;
            let point = fields.next()?;
            Some(MountEntry {
                point: PathBuf::from(unescape(point)),
                root: PathBuf::from(unescape(root)),
                fstype,
                options,
            })
        })
        .collect()
}

/// Where a cgroup file system matching `wanted(fstype, options)` is
/// mounted, and which of its folders is the mount's root.
fn cgroup_mount(wanted: impl Fn(&str, &str) -> bool) -> Option<(PathBuf, PathBuf)> {
    mounts()
        .into_iter()
        .find(|mount| wanted(&mount.fstype, &mount.options))
        .map(|mount| (mount.point, mount.root))
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

/// `cgroup.procs` of every `session/` folder, for the session's init to
/// join between clone and exec (its cgroup namespace is rooted there).
pub(crate) fn session_join_files() -> Vec<File> {
    let Some(session) = SESSION.get() else {
        return Vec::new();
    };
    session
        .unified
        .iter()
        .chain(session.legacy.iter().map(|(_, dir)| dir))
        .filter_map(|base| open_procs(&base.join("session")).ok())
        .collect()
}

/// `cgroup.procs` of the v1 `session/` folders, which every program joins.
fn legacy_join_files() -> Vec<File> {
    let Some(session) = SESSION.get() else {
        return Vec::new();
    };
    session
        .legacy
        .iter()
        .filter_map(|(_, base)| open_procs(&base.join("session")).ok())
        .collect()
}

fn open_procs(dir: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .custom_flags(nix::libc::O_CLOEXEC | nix::libc::O_NOFOLLOW)
        .open(dir.join("cgroup.procs"))
}

/// In the session's init, with its new cgroup namespace: `/sys/fs/cgroup`
/// mounted afresh, read-only. Mounts made in a cgroup namespace show only
/// the folders below its root (the session's), so even a command that runs
/// as root, remounts them writable or mounts its own finds no cgroup of
/// the host there. Where a hierarchy cannot be mounted again its folder is
/// left empty; where `/sys/fs/cgroup` cannot be covered, the namespaces are
/// refused.
pub(crate) fn seal_cgroup_mounts() -> Result<(), CgroupError> {
    use nix::mount::{MntFlags, MsFlags, mount, umount2};
    let top = Path::new("/sys/fs/cgroup");
    let found: Vec<MountEntry> = mounts()
        .into_iter()
        .filter(|m| m.point == top || m.point.starts_with(top))
        .collect();
    if found.is_empty() {
        return Ok(());
    }
    // Unmounted where the namespace may (as root): a command running as
    // root could otherwise unmount what covers them. In a user namespace
    // the mounts inherited from the host's are locked instead (unmounting
    // fails with EINVAL, for the init and for every command alike), so
    // mounting over them hides them for good.
    let covered = found.iter().find(|m| m.point == top).cloned();
    if covered.is_some() {
        let _ = umount2(top, MntFlags::MNT_DETACH);
    } else {
        for entry in found.iter().rev() {
            let _ = umount2(&entry.point, MntFlags::MNT_DETACH);
        }
    }
    let sealed = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    let cgroup_options = |options: &str| -> String {
        options
            .split(',')
            .filter(|option| *option != "rw" && *option != "ro")
            .collect::<Vec<_>>()
            .join(",")
    };
    let mount_cgroup = |entry: &MountEntry| {
        let data = cgroup_options(&entry.options);
        let _ = mount(
            Some(entry.fstype.as_str()),
            &entry.point,
            Some(entry.fstype.as_str()),
            sealed | MsFlags::MS_RDONLY,
            Some(data.as_str()).filter(|data| !data.is_empty()),
        );
    };
    match covered {
        Some(entry) if entry.fstype == "tmpfs" => {
            mount(
                Some("cgroup"),
                top,
                Some("tmpfs"),
                sealed,
                Some("mode=755,size=64k"),
            )
            .map_err(|err| format!("cannot mount a tmpfs on /sys/fs/cgroup ({err})"))?;
            for entry in found.iter().filter(|m| m.point != top) {
                let _ = fs::create_dir_all(&entry.point);
                if entry.fstype.starts_with("cgroup") {
                    mount_cgroup(entry);
                }
            }
            let _ = mount(
                None::<&str>,
                top,
                None::<&str>,
                MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | sealed,
                Some("mode=755,size=64k"),
            );
        }
        Some(entry) if entry.fstype.starts_with("cgroup") => mount_cgroup(&entry),
        _ => {
            for entry in found.iter().filter(|m| m.fstype.starts_with("cgroup")) {
                mount_cgroup(entry);
            }
        }
    }
    Ok(())
}

/// One program's cgroup (or nothing, without cgroups v2), and the v1
/// folders it joins for the session's limits.
#[derive(Debug)]
pub struct Enclosure {
    dir: Option<PathBuf>,
    /// `cgroup.procs` files, open until the program has started: the
    /// child joins by writing `0` to each between fork and exec.
    joins: Vec<File>,
}

impl Enclosure {
    /// A fresh cgroup named after `label` (a program's name), or an
    /// enclosure that only joins the session's v1 folders when the host has
    /// no cgroup v2 or this one cannot be made.
    pub fn create(label: &str) -> Enclosure {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let mut joins = legacy_join_files();
        let Containment::Cgroups { base } = mode() else {
            return Enclosure { dir: None, joins };
        };
        let label: String = label
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .take(32)
            .collect();
        let dir = base
            .join("session")
            .join(format!("{label}-{}", NEXT.fetch_add(1, Ordering::Relaxed)));
        if fs::create_dir(&dir).is_err() {
            return Enclosure { dir: None, joins };
        }
        match open_procs(&dir) {
            Ok(join) => {
                // The program's own cgroup last: it is the one it stays in
                // for the kill.
                joins.push(join);
                Enclosure {
                    dir: Some(dir),
                    joins,
                }
            }
            Err(_) => {
                let _ = fs::remove_dir(&dir);
                Enclosure { dir: None, joins }
            }
        }
    }

    /// An enclosure that contains nothing (the fallback).
    pub fn none() -> Enclosure {
        Enclosure {
            dir: None,
            joins: Vec::new(),
        }
    }

    /// Whether this is a real cgroup.
    pub fn is_cgroup(&self) -> bool {
        self.dir.is_some()
    }

    /// The descriptors a child writes `0` to, between fork and exec, to
    /// join.
    pub(crate) fn join_fds(&self) -> Vec<RawFd> {
        self.joins.iter().map(AsRawFd::as_raw_fd).collect()
    }

    /// The program has started (and joined): the host's copies of the join
    /// descriptors are no longer needed.
    pub(crate) fn started(&mut self) {
        self.joins.clear();
    }

    /// The living members (empty without a cgroup).
    pub fn members(&self) -> Vec<i32> {
        let Some(dir) = &self.dir else {
            return Vec::new();
        };
        read_pids(&dir.join("cgroup.procs"))
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

fn read_pids(file: &Path) -> Vec<i32> {
    fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .filter(|&pid: &i32| pid > 0)
        .collect()
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

/// A cgroup v1 folder has no `cgroup.kill`: its members (and those of the
/// folders below) get SIGKILL until none is left. `true` when empty.
fn kill_legacy(dir: &Path) -> bool {
    let deadline = Instant::now() + EMPTY_WAIT;
    loop {
        let members = legacy_members(dir);
        if members.is_empty() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        for pid in members {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        thread::sleep(Duration::from_millis(5));
    }
}

fn legacy_members(dir: &Path) -> Vec<i32> {
    let mut members = read_pids(&dir.join("cgroup.procs"));
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.filter_map(Result::ok) {
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                members.extend(legacy_members(&entry.path()));
            }
        }
    }
    members
}

/// Every process of the session the host can see through its cgroups
/// (pids in the host's numbering); empty without cgroups.
pub fn session_members() -> Vec<i32> {
    let Some(session) = SESSION.get() else {
        return Vec::new();
    };
    let mut members = if let Some(base) = &session.unified {
        legacy_members(&base.join("session"))
    } else if let Some((_, base)) = session.legacy.first() {
        legacy_members(&base.join("session"))
    } else {
        Vec::new()
    };
    members.sort_unstable();
    members.dedup();
    members
}

/// At host shutdown: kills what is left in every cgroup the host made and
/// removes them. Returns the pids still present (should be none).
pub fn end_all() -> Vec<i32> {
    let Some(session) = SESSION.get() else {
        return Vec::new();
    };
    let mut survivors = Vec::new();
    if let Some(base) = &session.unified {
        if !kill_cgroup(base) {
            survivors.extend(legacy_members(base));
        }
        remove_tree(base);
    }
    for (_, base) in &session.legacy {
        if !kill_legacy(base) {
            survivors.extend(legacy_members(base));
        }
        remove_tree(base);
    }
    survivors.sort_unstable();
    survivors.dedup();
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
        fs::create_dir_all(dead.join("session/bash-0")).unwrap();
        fs::create_dir(&live).unwrap();
        let other = parent.join(format!("envhost-test-private-{}-0", std::process::id()));
        fs::create_dir(&other).unwrap();
        fs::create_dir(other.join("envhost-1-00000000")).unwrap();
        let held = lock_path(&live).expect("lock the live folder");
        remove_stale(parent, true);
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
        assert!(enclosure.join_fds().is_empty());
    }

    #[test]
    fn limits_say_what_holds_and_what_does_not() {
        let limits = LimitsInForce {
            processes: Some((64, PathBuf::from("/nowhere/pids.events"))),
            memory: None,
            missing: vec!["the memory limit (no memory controller)".to_owned()],
        };
        assert_eq!(
            limits.describe(),
            "Session limits: 64 processes (--max-processes); envhost itself is outside them. \
             Not in force: the memory limit (no memory controller)."
        );
        assert_eq!(limits.counters(), LimitCounters::default());
    }

    #[test]
    fn counters_are_read_from_flat_keyed_files() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("pids.events"), "max 7\n").unwrap();
        fs::write(
            dir.path().join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
        )
        .unwrap();
        let limits = LimitsInForce {
            processes: Some((64, dir.path().join("pids.events"))),
            memory: Some((1 << 30, dir.path().join("memory.oom_control"))),
            missing: Vec::new(),
        };
        assert_eq!(
            limits.counters(),
            LimitCounters {
                forks_refused: 7,
                oom_kills: 2
            }
        );
    }
}
