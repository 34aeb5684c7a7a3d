//! Isolation: the programs the host starts for its environments run where
//! they cannot name the host.
//!
//! A filter that refuses system calls *aimed at the host's pid* cannot list
//! every way one process reaches another that shares its user, its PID
//! namespace and its cgroup tree (`prlimit`, `F_SETOWN`, `oom_score_adj`,
//! `sched_setattr`, a thread id, a cgroup file...). So the session's
//! programs do not share them: at start-up ([`configure`]) the host makes
//! one set of namespaces for the session —
//!
//! - a **PID namespace** the host is not in: no pid, thread id, `/proc`
//!   entry or pidfd of the host (or of the agent that started it) exists
//!   for what runs there;
//! - a **mount namespace** with a fresh `/proc` for that PID namespace and
//!   `/sys/fs/cgroup` mounted afresh, read-only, inside
//! - a **cgroup namespace** rooted at the session's own cgroup, so that no
//!   cgroup of the host can be seen or written, even by root;
//! - an **IPC namespace**;
//! - and, for a host without `CAP_SYS_ADMIN`, a **user namespace** that maps
//!   the host's user to itself (which is what lets an ordinary user make the
//!   others).
//!
//! PID 1 there is a small init: this binary, started as
//! `envhost-namespace-init` ([`init_main`]), which reaps orphans and dies
//! with the host (`PR_SET_PDEATHSIG`). When it ends, the kernel ends every
//! process in the namespace: nothing started there outlives the host, even
//! a host killed with SIGKILL.
//!
//! Every program then enters the namespaces between fork and exec
//! ([`crate::spawn`]): the forked child joins them with `setns` and makes
//! the program with `clone(CLONE_PARENT)`, so that the program is still the
//! host's own child — its pid, its exit status and its terminal are the
//! host's to see, in the host's numbering, exactly as before.
//!
//! Where no namespace can be made (a container whose seccomp profile
//! refuses `unshare`, a kernel without user namespaces for an unprivileged
//! host), or when the operator asks for it (`--isolation guard`), the host
//! falls back to the guard ([`crate::guard`]) and says what that does not
//! cover ([`Isolation::describe`]).
//!
//! This module knows namespaces and the init; nothing of environments.

use std::ffi::{CString, c_char};
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use nix::libc;

/// The name the init is started under (its `argv[0]`), which the binary's
/// `main` recognises before anything else ([`is_init`]).
pub const INIT_NAME: &str = "envhost-namespace-init";

/// How long making the namespaces may take before the host falls back.
const START_LIMIT: Duration = Duration::from_secs(10);

/// What the operator asked for (`--isolation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IsolationRequest {
    /// Namespaces where the kernel allows them, else the guard.
    #[default]
    Auto,
    /// Namespaces, or the host refuses to start.
    Namespaces,
    /// The guard only: the fallback, on purpose.
    Guard,
}

/// The isolation in force for the programs the host starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Isolation {
    /// The session's programs run in namespaces of their own.
    Namespaces {
        /// Whether a user namespace was needed (the host has no
        /// `CAP_SYS_ADMIN`): set-uid programs such as `sudo` then gain no
        /// privilege, and files of other users show as `nobody`.
        user_namespace: bool,
    },
    /// The fallback: programs share the host's namespaces.
    Guard {
        /// Why there are no namespaces, in words.
        why: String,
        /// Whether the seccomp guard is installed in every program (it
        /// needs `CAP_SYS_ADMIN` or no-new-privileges).
        filter: bool,
    },
}

impl Isolation {
    /// The level in one word, for logs and tests: `namespaces`,
    /// `user-namespaces` or `guard`.
    pub fn level(&self) -> &'static str {
        match self {
            Isolation::Namespaces {
                user_namespace: false,
            } => "namespaces",
            Isolation::Namespaces {
                user_namespace: true,
            } => "user-namespaces",
            Isolation::Guard { .. } => "guard",
        }
    }

    /// What is in force and, in the fallback, what it does not cover: the
    /// words the screen's first answer and `envhost healthcheck` show.
    pub fn describe(&self) -> String {
        match self {
            Isolation::Namespaces { user_namespace } => {
                let mut words = String::from(
                    "Isolation: namespaces. Commands run in PID, mount, IPC and cgroup \
                     namespaces of their own (`ps` shows the session's processes): no \
                     command can name envhost's process, its /proc entry or its cgroup.",
                );
                if *user_namespace {
                    words.push_str(
                        " envhost runs without CAP_SYS_ADMIN, so they are in a user namespace \
                         too: set-uid programs (sudo) gain no privilege there, and files of \
                         other users show as owned by nobody.",
                    );
                }
                words
            }
            Isolation::Guard { why, filter } => {
                let mut words = format!(
                    "Isolation: guard only (no namespaces: {why}). Commands share envhost's \
                     process namespace. "
                );
                if *filter {
                    words.push_str(
                        "A seccomp filter refuses signals, tracing and pidfds aimed at envhost's \
                         pid, but not other ways to reach it by its pid or its files: prlimit, \
                         fcntl F_SETOWN, scheduling, oom_score_adj, its threads by their ids, \
                         cgroup files.",
                    );
                } else {
                    words.push_str(
                        "No seccomp filter either (it needs CAP_SYS_ADMIN or no-new-privileges): \
                         a command can signal envhost like any process of the same user.",
                    );
                }
                words
            }
        }
    }
}

/// Why the session's namespaces cannot be made, in words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NoNamespaces(String);

impl From<String> for NoNamespaces {
    fn from(message: String) -> Self {
        NoNamespaces(message)
    }
}

/// The operator asked for namespaces (`--isolation namespaces`) and none
/// can be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot make namespaces for the session: {0}")]
pub struct IsolationUnavailable(NoNamespaces);

static MODE: OnceLock<Isolation> = OnceLock::new();

/// Decides the isolation, once, at start-up, and makes the session's
/// namespaces. Later calls return the first decision. `Err` only when
/// `request` is [`IsolationRequest::Namespaces`] and none can be made.
pub fn configure(request: IsolationRequest) -> Result<&'static Isolation, IsolationUnavailable> {
    if let Some(mode) = MODE.get() {
        return Ok(mode);
    }
    let decided = match request {
        IsolationRequest::Guard => guard("the operator asked for the guard (--isolation guard)"),
        IsolationRequest::Auto | IsolationRequest::Namespaces => match Namespaces::current() {
            Ok(namespaces) => Isolation::Namespaces {
                user_namespace: namespaces.user.is_some(),
            },
            Err(why) if request == IsolationRequest::Auto => guard(&why.to_string()),
            Err(why) => return Err(IsolationUnavailable(why)),
        },
    };
    Ok(MODE.get_or_init(|| decided))
}

fn guard(why: &str) -> Isolation {
    Isolation::Guard {
        why: why.to_owned(),
        filter: crate::guard::status().is_ok(),
    }
}

/// The isolation in force; the guard when [`configure`] was never called
/// (the library's own tests).
pub fn mode() -> &'static Isolation {
    MODE.get_or_init(|| guard("the host did not ask for namespaces"))
}

/// Whether programs enter the session's namespaces.
pub(crate) fn namespaced() -> bool {
    matches!(mode(), Isolation::Namespaces { .. })
}

/// Whether this process was started as the session's init.
pub fn is_init() -> bool {
    std::env::args_os()
        .next()
        .is_some_and(|name| name == INIT_NAME)
}

/// The session's namespaces, held open by the host for as long as it lives:
/// every program joins them through these descriptors.
#[derive(Debug)]
pub(crate) struct Namespaces {
    /// The init's pid, in the host's numbering.
    init: i32,
    user: Option<OwnedFd>,
    mount: OwnedFd,
    ipc: OwnedFd,
    cgroup: OwnedFd,
    pid: OwnedFd,
}

/// The live namespaces; replaced when their init has died.
static CURRENT: Mutex<Option<Arc<Namespaces>>> = Mutex::new(None);

impl Namespaces {
    /// The session's namespaces, made now if there are none yet or if their
    /// init has died (which ended everything in them).
    pub(crate) fn current() -> Result<Arc<Namespaces>, NoNamespaces> {
        let mut current = CURRENT.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(namespaces) = current.as_ref()
            && namespaces.alive()
        {
            return Ok(Arc::clone(namespaces));
        }
        if let Some(dead) = current.take() {
            dead.reap();
        }
        let made = Arc::new(make_on_keeper_thread()?);
        crate::session_init::register(made.init, end);
        *current = Some(Arc::clone(&made));
        Ok(made)
    }

    /// The descriptors a child joins, in the order it must: the user
    /// namespace first (it grants the rights to join the others), the PID
    /// namespace last (it only changes where the child's children are born).
    pub(crate) fn join_order(&self) -> Vec<(RawFd, libc::c_int)> {
        let mut order = Vec::with_capacity(5);
        if let Some(user) = &self.user {
            order.push((user.as_raw_fd(), libc::CLONE_NEWUSER));
        }
        order.push((self.mount.as_raw_fd(), libc::CLONE_NEWNS));
        order.push((self.ipc.as_raw_fd(), libc::CLONE_NEWIPC));
        order.push((self.cgroup.as_raw_fd(), libc::CLONE_NEWCGROUP));
        order.push((self.pid.as_raw_fd(), libc::CLONE_NEWPID));
        order
    }

    fn alive(&self) -> bool {
        crate::procfs::process_info(self.init).is_some_and(|p| p.state != 'Z' && p.state != 'X')
    }

    /// Collects the dead init's exit status.
    fn reap(&self) {
        let _ = nix::sys::wait::waitpid(
            nix::unistd::Pid::from_raw(self.init),
            Some(nix::sys::wait::WaitPidFlag::WNOHANG),
        );
        crate::reaper::unregister(self.init);
        crate::session_init::forget(self.init);
    }
}

/// Ends the session's namespaces: the init is killed and, with it, every
/// process left in them. At shutdown, after the polite round (the reaper
/// calls it through [`crate::session_init`]).
fn end() {
    let taken = CURRENT
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    if let Some(namespaces) = taken {
        let pid = nix::unistd::Pid::from_raw(namespaces.init);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        let _ = nix::sys::wait::waitpid(pid, None);
        crate::reaper::unregister(namespaces.init);
        crate::session_init::forget(namespaces.init);
    }
}

/// Makes the namespaces on a thread that lives as long as the host: the
/// init dies when the *thread* that started it ends (`PR_SET_PDEATHSIG`
/// follows the parent thread), and environments start programs from
/// threads that come and go.
fn make_on_keeper_thread() -> Result<Namespaces, NoNamespaces> {
    type Request = mpsc::Sender<Result<Namespaces, NoNamespaces>>;
    static KEEPER: OnceLock<Mutex<mpsc::Sender<Request>>> = OnceLock::new();
    let keeper = KEEPER.get_or_init(|| {
        let (requests, incoming) = mpsc::channel::<Request>();
        let spawned = thread::Builder::new()
            .name("envhost-namespaces".into())
            .spawn(move || {
                for reply in incoming {
                    let _ = reply.send(make());
                }
                // No sender left: the host is exiting. Stay, so that the
                // init is not killed before the host ends it.
                loop {
                    thread::park();
                }
            });
        if let Err(err) = spawned {
            eprintln!("envhost: cannot start the namespace thread ({err})");
        }
        Mutex::new(requests)
    });
    let (reply, answer) = mpsc::channel();
    keeper
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .send(reply)
        .map_err(|_| "the thread that makes namespaces is gone".to_owned())?;
    answer
        .recv()
        .map_err(|_| "the thread that makes namespaces did not answer".to_owned())?
}

/// Starts the init in new namespaces and opens them.
fn make() -> Result<Namespaces, NoNamespaces> {
    let user_namespace = !has_cap_sys_admin();
    // Every descriptor the child uses above the numbers it moves things
    // to (0-3): one of them at 3 would be replaced before exec.
    let exe = open_cloexec(c"/proc/self/exe", libc::O_PATH)
        .and_then(above_stdio)
        .map_err(|err| format!("cannot open this program to start the init ({err})"))?;
    let null = open_cloexec(c"/dev/null", libc::O_RDWR)
        .and_then(above_stdio)
        .map_err(|err| format!("cannot open /dev/null ({err})"))?;
    let (status_read, status_write) = pipe().map_err(|err| format!("no pipe ({err})"))?;
    let status_write = above_stdio(status_write).map_err(|err| format!("no pipe ({err})"))?;
    let (go_read, go_write) = pipe().map_err(|err| format!("no pipe ({err})"))?;
    let go_read = above_stdio(go_read).map_err(|err| format!("no pipe ({err})"))?;
    let joins = crate::containment::session_join_files();
    let argv_0 = CString::new(INIT_NAME).map_err(|err| err.to_string())?;
    let start = InitStart {
        keep_admin: user_namespace,
        exe: exe.as_raw_fd(),
        null: null.as_raw_fd(),
        status: status_write.as_raw_fd(),
        go: go_read.as_raw_fd(),
        joins: joins.iter().map(AsRawFd::as_raw_fd).collect(),
        argv: [argv_0.as_ptr(), std::ptr::null()],
        envp: [std::ptr::null()],
    };
    let mut flags = libc::CLONE_NEWPID | libc::CLONE_NEWNS | libc::CLONE_NEWIPC;
    if user_namespace {
        flags |= libc::CLONE_NEWUSER;
    }
    let init = crate::reaper::spawn_registered(|| {
        // SAFETY: a fork-like clone (no new stack, no shared memory); the
        // child only runs `start.run`, which makes system calls and never
        // allocates, then execs or exits.
        let pid = unsafe { libc::syscall(libc::SYS_clone, flags | libc::SIGCHLD, 0, 0, 0, 0) };
        if pid == 0 {
            // SAFETY: in the child, see above.
            unsafe { start.run() }
        }
        if pid < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(pid as i32)
        }
    })
    .map_err(|err| describe_clone_error(&err, user_namespace))?;
    drop(status_write);
    drop(go_read);
    drop(joins);
    let kill_init = |why: String| {
        let pid = nix::unistd::Pid::from_raw(init);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        let _ = nix::sys::wait::waitpid(pid, None);
        crate::reaper::unregister(init);
        why
    };
    if user_namespace && let Err(why) = map_user(init) {
        return Err(kill_init(why.to_string()).into());
    }
    if let Err(err) = write_all(&go_write, b"1") {
        return Err(kill_init(format!("cannot start the init ({err})")).into());
    }
    drop(go_write);
    if let Err(why) = await_ready(&status_read) {
        return Err(kill_init(why.to_string()).into());
    }
    let open = |name: &str| {
        let path = CString::new(format!("/proc/{init}/ns/{name}")).map_err(|e| e.to_string())?;
        open_cloexec(&path, libc::O_RDONLY)
            .map_err(|err| format!("cannot open the init's {name} namespace ({err})"))
    };
    let opened = (|| {
        Ok::<_, String>(Namespaces {
            init,
            user: if user_namespace {
                Some(open("user")?)
            } else {
                None
            },
            mount: open("mnt")?,
            ipc: open("ipc")?,
            cgroup: open("cgroup")?,
            pid: open("pid")?,
        })
    })();
    opened.map_err(|why| NoNamespaces::from(kill_init(why)))
}

fn describe_clone_error(err: &io::Error, user_namespace: bool) -> String {
    match err.raw_os_error() {
        Some(libc::EPERM) if user_namespace => format!(
            "the kernel refused a user namespace to this unprivileged host ({err}); \
             /proc/sys/kernel/unprivileged_userns_clone or a seccomp profile may forbid it"
        ),
        Some(libc::EPERM) => format!(
            "the kernel refused new namespaces ({err}); a container's seccomp profile \
             usually forbids unshare without CAP_SYS_ADMIN"
        ),
        Some(libc::ENOSPC) => format!("no namespace left ({err}; see /proc/sys/user/max_*)"),
        Some(libc::EINVAL) => format!("this kernel cannot make these namespaces ({err})"),
        _ => format!("cannot make namespaces ({err})"),
    }
}

/// Maps the host's user and group to themselves in the init's user
/// namespace (the only mapping an unprivileged process may write).
fn map_user(init: i32) -> Result<(), NoNamespaces> {
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    let write = |file: &str, text: String| {
        fs::write(format!("/proc/{init}/{file}"), text)
            .map_err(|err| format!("cannot write the user namespace's {file} ({err})"))
    };
    write("uid_map", format!("{uid} {uid} 1\n"))?;
    write("setgroups", "deny\n".to_owned())?;
    write("gid_map", format!("{gid} {gid} 1\n"))?;
    Ok(())
}

/// Waits until the init says `ready`, or why not, or ends.
fn await_ready(status: &OwnedFd) -> Result<(), NoNamespaces> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let deadline = Instant::now() + START_LIMIT;
    let mut said = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "the namespace init did not start within {}",
                envhost_core::text::duration(START_LIMIT)
            )
            .into());
        }
        let mut fds = [PollFd::new(status.as_fd(), PollFlags::POLLIN)];
        let millis = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
        match poll(&mut fds, PollTimeout::from(millis)) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
            Ok(_) => {}
            Err(err) => return Err(format!("cannot hear from the namespace init ({err})").into()),
        }
        let mut buffer = [0u8; 512];
        match nix::unistd::read(status.as_raw_fd(), &mut buffer) {
            Ok(0) => break,
            Ok(n) => said.extend_from_slice(&buffer[..n]),
            Err(nix::errno::Errno::EINTR) => {}
            Err(err) => return Err(format!("cannot hear from the namespace init ({err})").into()),
        }
        if said.len() > 4096 {
            break;
        }
    }
    let said = String::from_utf8_lossy(&said);
    let said = said.trim();
    if said == "ready" {
        Ok(())
    } else if said.is_empty() {
        Err("the namespace init ended before it was ready"
            .to_owned()
            .into())
    } else {
        Err(said
            .strip_prefix("error: ")
            .unwrap_or(said)
            .to_owned()
            .into())
    }
}

/// Everything the freshly cloned init does before it becomes
/// `envhost-namespace-init`, prepared by the host.
struct InitStart {
    /// In a new user namespace: the child has every capability there until
    /// it execs a program as an ordinary user; `CAP_SYS_ADMIN` is made
    /// ambient so that the init keeps it for its mounts (and drops it
    /// after).
    keep_admin: bool,
    exe: RawFd,
    null: RawFd,
    status: RawFd,
    go: RawFd,
    joins: Vec<RawFd>,
    argv: [*const c_char; 2],
    envp: [*const c_char; 1],
}

/// The descriptor number the init finds its status pipe at.
const INIT_STATUS_FD: RawFd = 3;

impl InitStart {
    /// In the cloned child: dies with the host, waits for the host's go
    /// (its user mapping is written), joins the session's cgroups, keeps
    /// only the status pipe and execs the init.
    ///
    /// # Safety
    /// Only in the child of a fork-like clone: system calls only.
    unsafe fn run(&self) -> ! {
        // SAFETY: plain system calls on descriptors the parent prepared.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            let mut byte = 0u8;
            if libc::read(self.go, (&raw mut byte).cast(), 1) != 1 {
                libc::_exit(1); // the host went away
            }
            for &join in &self.joins {
                libc::write(join, b"0".as_ptr().cast(), 1);
            }
            if self.keep_admin {
                set_capabilities(1 << CAP_SYS_ADMIN, 1 << CAP_SYS_ADMIN);
                libc::prctl(
                    libc::PR_CAP_AMBIENT,
                    libc::PR_CAP_AMBIENT_RAISE as libc::c_ulong,
                    CAP_SYS_ADMIN as libc::c_ulong,
                    0,
                    0,
                );
            }
            // Standard streams on /dev/null: the init must not hold the
            // host's stdout (the agent would wait for it to close).
            for target in 0..3 {
                libc::dup2(self.null, target);
            }
            // Above 3 (see `above_stdio`): dup2 clears close-on-exec.
            libc::dup2(self.status, INIT_STATUS_FD);
            libc::syscall(
                libc::SYS_close_range,
                (INIT_STATUS_FD + 1) as libc::c_uint,
                libc::c_uint::MAX,
                libc::CLOSE_RANGE_CLOEXEC as libc::c_uint,
            );
            libc::syscall(
                libc::SYS_execveat,
                self.exe,
                c"".as_ptr(),
                self.argv.as_ptr(),
                self.envp.as_ptr(),
                libc::AT_EMPTY_PATH,
            );
            let errno = *libc::__errno_location();
            let said = b"error: cannot start the namespace init (execveat failed with errno ";
            libc::write(INIT_STATUS_FD, said.as_ptr().cast(), said.len());
            let mut digits = [0u8; 12];
            let mut at = digits.len();
            let mut left = errno.unsigned_abs();
            loop {
                at -= 1;
                digits[at] = b'0' + (left % 10) as u8;
                left /= 10;
                if left == 0 || at == 0 {
                    break;
                }
            }
            libc::write(
                INIT_STATUS_FD,
                digits[at..].as_ptr().cast(),
                digits.len() - at,
            );
            libc::write(INIT_STATUS_FD, b")\n".as_ptr().cast(), 2);
            libc::_exit(127)
        }
    }
}

/// `CAP_SYS_ADMIN`'s number (linux/capability.h).
const CAP_SYS_ADMIN: u32 = 21;

/// Sets the calling thread's permitted and effective capabilities to
/// `keep` and its inheritable ones to `inheritable` (the first 32 only).
/// Async-signal-safe: one system call.
///
/// # Safety
/// A plain system call; for the init's child and the init itself.
unsafe fn set_capabilities(keep: u32, inheritable: u32) -> bool {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let data = [
        Data {
            effective: keep,
            permitted: keep,
            inheritable,
        },
        Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        },
    ];
    // SAFETY: valid header and two data records, as capset(2) expects.
    unsafe { libc::syscall(libc::SYS_capset, &raw const header, data.as_ptr()) == 0 }
}

/// `open` with `O_CLOEXEC`.
fn open_cloexec(path: &std::ffi::CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated path.
    let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor this call just opened.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `fd` moved to a number above the ones the init's standard streams and
/// status pipe take (close-on-exec).
fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > INIT_STATUS_FD {
        return Ok(fd);
    }
    // SAFETY: duplicates a descriptor this function owns.
    let moved = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, INIT_STATUS_FD + 1) };
    if moved < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor fcntl just made.
    Ok(unsafe { OwnedFd::from_raw_fd(moved) })
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: descriptors pipe2 just made.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn write_all(fd: &OwnedFd, bytes: &[u8]) -> io::Result<()> {
    let mut written = 0;
    while written < bytes.len() {
        match nix::unistd::write(fd, &bytes[written..]) {
            Ok(n) => written += n,
            Err(nix::errno::Errno::EINTR) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}

/// `CAP_SYS_ADMIN` in the effective set: making namespaces without a user
/// namespace needs it.
fn has_cap_sys_admin() -> bool {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("CapEff:"))
                .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << 21) != 0)
}

/// The init: PID 1 of the session's namespaces. Seals what the namespace
/// shows of the machine (a fresh `/proc`, `/sys/fs/cgroup` rooted at the
/// session's cgroup and read-only), says `ready` (or why not) on its status
/// pipe, then reaps orphans until the host kills it or dies.
pub fn init_main() -> ! {
    // Not dumpable: a command of the same user cannot trace it (commands
    // keep no CAP_SYS_PTRACE), so none can make it exit and end the
    // session's processes with it.
    let _ = nix::sys::prctl::set_dumpable(false);
    // What `ps` shows for PID 1 (exec through a descriptor names it after
    // the descriptor's number).
    let _ = nix::sys::prctl::set_name(c"envhost-init");
    let _ = fs::write("/proc/self/oom_score_adj", "-1000");
    // SAFETY: the descriptor the host put at this number.
    let status = unsafe { OwnedFd::from_raw_fd(INIT_STATUS_FD) };
    let said = match seal() {
        Ok(()) => "ready\n".to_owned(),
        Err(why) => format!("error: {why}\n"),
    };
    // The rights the mounts needed (kept across exec in a user namespace)
    // are of no further use: none is left.
    // SAFETY: plain system calls.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        );
        if !nix::unistd::geteuid().is_root() {
            set_capabilities(0, 0);
        }
    }
    let _ = write_all(&status, said.as_bytes());
    drop(status);
    if said != "ready\n" {
        std::process::exit(1);
    }
    reap_forever()
}

/// The init's own view of the machine, made safe before any program joins.
fn seal() -> Result<(), NoNamespaces> {
    use nix::mount::{MsFlags, mount};
    let _ = std::env::set_current_dir("/");
    // After joining the session's cgroups: the cgroup namespace is rooted
    // there.
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWCGROUP)
        .map_err(|err| format!("cannot make a cgroup namespace ({err})"))?;
    // Nothing mounted here propagates back to the host's mounts; the host's
    // new mounts (a disk plugged in) still show here.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_SLAVE,
        None::<&str>,
    )
    .map_err(|err| format!("cannot make the mounts private ({err})"))?;
    // The host's /proc goes first where it may (as root), so that no
    // command running as root can unmount the new one and find the host's
    // beneath; in a user namespace it is locked beneath the new one.
    let _ = nix::mount::umount2("/proc", nix::mount::MntFlags::MNT_DETACH);
    mount(
        Some("proc"),
        "/proc",
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(|err| format!("cannot mount a /proc for the namespace ({err})"))?;
    crate::containment::seal_cgroup_mounts().map_err(|failed| NoNamespaces(failed.to_string()))?;
    remount_mqueue();
    Ok(())
}

/// POSIX message queues are per IPC namespace, but a `/dev/mqueue` mounted
/// before shows the host's: mounted again, it shows the session's.
fn remount_mqueue() {
    use nix::mount::{MsFlags, mount};
    let mounted = fs::read_to_string("/proc/self/mountinfo")
        .is_ok_and(|info| info.lines().any(|line| line.contains(" /dev/mqueue ")));
    if mounted {
        let _ = mount(
            Some("mqueue"),
            "/dev/mqueue",
            Some("mqueue"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            None::<&str>,
        );
    }
}

/// Reaps every child (orphans re-parented to PID 1) as it ends.
fn reap_forever() -> ! {
    use nix::sys::signal::{SigSet, Signal};
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    let mut chld = SigSet::empty();
    chld.add(Signal::SIGCHLD);
    let _ = chld.thread_block();
    loop {
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL)) {
                Ok(WaitStatus::StillAlive) => break,
                Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => break, // ECHILD
            }
        }
        let _ = chld.wait();
    }
}
