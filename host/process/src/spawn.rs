//! Starting a program: what happens in the child between fork and exec.
//!
//! Every program the host starts for an environment goes through here, so
//! that each one is isolated ([`crate::isolation`]: it joins the session's
//! namespaces, where the host cannot be named), contained
//! ([`crate::containment`]: it joins its own cgroup and the session's
//! limits before it can fork anything), and so that its exit status is
//! collected by its environment, never by the reaper's sweeper
//! ([`crate::reaper`]). Where there are no namespaces it is guarded instead
//! ([`crate::guard`]).
//!
//! With namespaces, the forked child joins them with `setns` and then makes
//! the program with `clone(CLONE_PARENT)`: joining a PID namespace only
//! changes where the caller's *children* are born, and `CLONE_PARENT` makes
//! that child the host's own (so the host waits for it, signals it and
//! reads its `/proc` entry in its own numbering, as before). The forked
//! child passes the program's pid back on a pipe and exits.
//!
//! [`spawn_managed_command`] is for a program with pipes (python), whose
//! set-up the [`ChildSetup`] options say (a session of its own, descriptors
//! kept open); [`crate::Pty::spawn`] uses the same set-up with a terminal:
//! a new session with the terminal as its controlling terminal, default
//! signal dispositions, every inherited descriptor closed except the
//! standard three and those passed on purpose (moved to the numbers the
//! program expects).
//!
//! The closures run in a forked copy of a multi-threaded process: they make
//! system calls only and never allocate.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, ExitStatus};
use std::sync::Arc;

use nix::libc;

use crate::containment::Enclosure;
use crate::guard;
use crate::isolation::{self, Namespaces};
use crate::reaper::{self, ManagedPid};

/// A descriptor handed to the program at a number of its choosing.
#[derive(Debug)]
pub struct PassedFd {
    /// The host's descriptor (close-on-exec in the host).
    pub fd: OwnedFd,
    /// The number it has in the program.
    pub at: RawFd,
}

/// How the program relates to terminals and sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seat {
    /// A new session, with the terminal on fd 0 as its controlling
    /// terminal; signals reset; other descriptors closed.
    Terminal,
    /// A new session without a terminal (pipes): its own process group,
    /// out of reach of the host's terminal signals.
    Detached,
}

/// The `oom_score_adj` every program starts with: when the machine runs out
/// of memory, the kernel ends the session's processes before the host.
const PROGRAM_OOM_SCORE_ADJ: &[u8] = b"500";

/// A namespace's descriptor and its kind (`CLONE_NEW…`), for `setns`.
type NamespaceJoin = (RawFd, libc::c_int);

/// Everything the child does before exec, prepared in the parent.
pub(crate) struct ChildSetup {
    /// `cgroup.procs` files to write `0` to.
    joins: Vec<RawFd>,
    /// The session's namespaces, joined in order; kept alive while the
    /// child may still join them.
    namespaces: Option<(Arc<Namespaces>, Vec<NamespaceJoin>)>,
    /// The program's folder again after joining the mount namespace (which
    /// moves the caller to its root).
    cwd: Option<CString>,
    /// Where the forked child writes the program's pid (with namespaces).
    pid_report: Option<(OwnedFd, OwnedFd)>,
    guard: Option<&'static [libc::sock_filter]>,
    seat: Seat,
    /// Without namespaces: the program gets SIGKILL when the host dies
    /// (with them, the end of the namespaces' init does it).
    die_with_host: Option<libc::pid_t>,
    /// (host descriptor, number in the program).
    passed: Vec<(RawFd, RawFd)>,
}

impl ChildSetup {
    /// The set-up for a program in `seat`, contained in `enclosure`,
    /// starting in `cwd`, with `passed` descriptors.
    pub(crate) fn new(
        enclosure: &Enclosure,
        seat: Seat,
        cwd: &Path,
        passed: &[PassedFd],
    ) -> io::Result<ChildSetup> {
        let namespaces = if isolation::namespaced() {
            let namespaces = Namespaces::current().map_err(io::Error::other)?;
            let order = namespaces.join_order();
            Some((namespaces, order))
        } else {
            None
        };
        let pid_report = match &namespaces {
            Some(_) => Some(pipe()?),
            None => None,
        };
        Ok(ChildSetup {
            joins: enclosure.join_fds(),
            cwd: match &namespaces {
                Some(_) => Some(CString::new(cwd.as_os_str().as_bytes())?),
                None => None,
            },
            guard: match &namespaces {
                Some(_) => None,
                None => guard::prepared(),
            },
            die_with_host: match (&namespaces, seat) {
                (None, Seat::Detached) => Some(nix::unistd::getpid().as_raw()),
                _ => None,
            },
            namespaces,
            pid_report,
            seat,
            passed: passed.iter().map(|p| (p.fd.as_raw_fd(), p.at)).collect(),
        })
    }

    /// In the child, between fork and exec: each step makes only system
    /// calls (nothing allocates), in this order.
    fn run(&self) -> io::Result<()> {
        self.join_cgroups();
        self.enter_namespaces()?;
        self.take_seat()?;
        self.place_descriptors()?;
        self.arm_death_signal()?;
        self.lower_oom_priority();
        // SAFETY: in the child between fork and exec, as above; both make
        // only system calls.
        unsafe {
            guard::drop_ptrace_capability();
            if let Some(program) = self.guard {
                guard::install(program);
            }
        }
        Ok(())
    }

    /// Before anything else: whatever the program forks from now on is
    /// born in its cgroups. A failure (the cgroup vanished) leaves it in
    /// the host's, still a descendant.
    fn join_cgroups(&self) {
        for &join in &self.joins {
            // SAFETY: a write of one byte from a static to a descriptor the
            // parent prepared.
            unsafe { libc::write(join, b"0".as_ptr().cast(), 1) };
        }
    }

    /// Joins the session's namespaces and forks the program there (born in
    /// the PID namespace, the host's child); this process reports its pid
    /// and exits. Nothing to do without namespaces.
    fn enter_namespaces(&self) -> io::Result<()> {
        let Some((_, order)) = &self.namespaces else {
            return Ok(());
        };
        // SAFETY: plain system calls on descriptors and memory the parent
        // prepared.
        unsafe {
            for &(fd, kind) in order {
                if libc::setns(fd, kind) == -1 {
                    return Err(io::Error::last_os_error());
                }
            }
            if let Some(cwd) = &self.cwd
                && libc::chdir(cwd.as_ptr()) == -1
            {
                return Err(io::Error::last_os_error());
            }
            let program = libc::syscall(
                libc::SYS_clone,
                libc::CLONE_PARENT | libc::SIGCHLD,
                0,
                0,
                0,
                0,
            );
            if program == -1 {
                return Err(io::Error::last_os_error());
            }
            if program > 0 {
                if let Some((_, report)) = &self.pid_report {
                    let pid = program as i32;
                    libc::write(
                        report.as_raw_fd(),
                        (&raw const pid).cast(),
                        size_of::<i32>(),
                    );
                }
                libc::_exit(0);
            }
        }
        Ok(())
    }

    /// A session of its own: on the terminal (default signals, the
    /// terminal as its controlling one, inherited descriptors closed on
    /// exec), or detached.
    fn take_seat(&self) -> io::Result<()> {
        // SAFETY: plain system calls.
        unsafe {
            match self.seat {
                Seat::Terminal => {
                    for signal in [
                        libc::SIGCHLD,
                        libc::SIGHUP,
                        libc::SIGINT,
                        libc::SIGQUIT,
                        libc::SIGTERM,
                        libc::SIGALRM,
                    ] {
                        libc::signal(signal, libc::SIG_DFL);
                    }
                    if libc::setsid() == -1 {
                        return Err(io::Error::last_os_error());
                    }
                    if libc::ioctl(0, libc::TIOCSCTTY as _, 0) == -1 {
                        return Err(io::Error::last_os_error());
                    }
                    // Descriptors the host did not open with close-on-exec
                    // (or inherited from whoever started it) stay out of the
                    // program. Linux 5.11+; older kernels keep the std
                    // default.
                    libc::syscall(
                        libc::SYS_close_range,
                        3 as libc::c_uint,
                        libc::c_uint::MAX,
                        libc::CLOSE_RANGE_CLOEXEC as libc::c_uint,
                    );
                }
                Seat::Detached => {
                    if libc::setsid() == -1 {
                        return Err(io::Error::last_os_error());
                    }
                }
            }
        }
        Ok(())
    }

    /// The descriptors passed to the program, at their numbers and kept
    /// across exec.
    fn place_descriptors(&self) -> io::Result<()> {
        for &(fd, at) in &self.passed {
            // SAFETY: descriptors the parent prepared.
            let failed = unsafe {
                if fd == at {
                    libc::fcntl(fd, libc::F_SETFD, 0) == -1
                } else {
                    libc::dup2(fd, at) == -1
                }
            };
            if failed {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }

    /// Killed when the host dies; refused when it already has.
    fn arm_death_signal(&self) -> io::Result<()> {
        let Some(host) = self.die_with_host else {
            return Ok(());
        };
        // SAFETY: plain system calls.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            if libc::getppid() != host {
                // The host died before the parent-death signal was armed.
                return Err(io::Error::other(
                    "the host exited while the program started",
                ));
            }
        }
        Ok(())
    }

    /// The program goes before the host when memory runs out.
    fn lower_oom_priority(&self) {
        // SAFETY: open, write and close of a /proc file, from statics.
        unsafe {
            let adjust = libc::open(
                c"/proc/self/oom_score_adj".as_ptr(),
                libc::O_WRONLY | libc::O_CLOEXEC,
            );
            if adjust >= 0 {
                libc::write(
                    adjust,
                    PROGRAM_OOM_SCORE_ADJ.as_ptr().cast(),
                    PROGRAM_OOM_SCORE_ADJ.len(),
                );
                libc::close(adjust);
            }
        }
    }
}

/// A started program: its pid in the host's numbering, registered with the
/// reaper (and holding its cgroup).
pub(crate) struct Spawned {
    pub(crate) pid: i32,
    pub(crate) managed: ManagedPid,
}

/// Starts `command` with `setup` (added after the command's own set-up:
/// standard streams, folder), contained in `enclosure`; with namespaces the
/// program is the forked child's clone, and the forked child is reaped here.
pub(crate) fn spawn(
    command: &mut Command,
    setup: ChildSetup,
    mut enclosure: Enclosure,
) -> io::Result<Spawned> {
    let report = setup.pid_report.as_ref().map(|(read, _)| read.as_raw_fd());
    let namespaced = setup.namespaces.is_some();
    let setup = Arc::new(setup);
    let in_child = Arc::clone(&setup);
    // SAFETY: `run` makes async-signal-safe system calls only and does not
    // allocate (everything was prepared in the parent).
    unsafe {
        command.pre_exec(move || in_child.run());
    }
    let mut forked = None;
    let pid = reaper::spawn_registered(|| {
        let child = command.spawn()?;
        let pid = match report {
            Some(read) => read_pid(read)?,
            None => i32::try_from(child.id()).map_err(io::Error::other)?,
        };
        forked = Some(child);
        Ok(pid)
    })?;
    if namespaced && let Some(mut forked) = forked {
        // It exited right after the clone; the sweeper may have reaped it.
        let _ = forked.wait();
    }
    drop(setup);
    enclosure.started();
    Ok(Spawned {
        pid,
        managed: ManagedPid::registered(pid).holding(enclosure),
    })
}

/// The program's pid, which the forked child wrote before it exited (it has
/// exited: `spawn` returned after its end of std's own pipe closed).
fn read_pid(read: RawFd) -> io::Result<i32> {
    let mut pid: i32 = 0;
    // SAFETY: reads into a local of the size asked.
    let got = unsafe { libc::read(read, (&raw mut pid).cast(), size_of::<i32>()) };
    if got == size_of::<i32>() as isize && pid > 0 {
        Ok(pid)
    } else {
        Err(io::Error::other(
            "the program was started but its pid was not passed back",
        ))
    }
}

/// The pid report's pipe: non-blocking, so that a forked child that died
/// before writing (it cannot, short of SIGKILL) never leaves the host
/// waiting on the write end it holds itself.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    use nix::fcntl::OFlag;
    let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
    Ok((read, write))
}

/// A program started with pipes ([`spawn_managed_command`]): the host's own
/// child, which only its environment waits for.
#[derive(Debug)]
pub struct ManagedChild {
    pid: i32,
    exit: Option<ExitStatus>,
    /// Holds the registration and the program's cgroup; dropping it kills
    /// whatever is still in that cgroup.
    managed: ManagedPid,
}

impl ManagedChild {
    /// The program's pid (the host's numbering), also its process group and
    /// session.
    pub fn id(&self) -> i32 {
        self.pid
    }

    /// How it ended, if it has: one non-blocking `waitpid`, whose answer is
    /// kept.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if let Some(exit) = self.exit {
            return Ok(Some(exit));
        }
        let mut status = 0;
        loop {
            // SAFETY: waits for the host's own child; `status` is a local.
            let got = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
            match got {
                0 => return Ok(None),
                -1 if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) => continue,
                -1 => return Err(io::Error::last_os_error()),
                _ => {
                    let exit = ExitStatus::from_raw(status);
                    self.exit = Some(exit);
                    return Ok(Some(exit));
                }
            }
        }
    }

    /// SIGKILL to the program (not its group), unless it has been waited for.
    pub fn kill(&mut self) -> io::Result<()> {
        if self.exit.is_some() {
            return Ok(());
        }
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.pid),
            nix::sys::signal::Signal::SIGKILL,
        )
        .map_err(io::Error::from)
    }

    /// The registration, which holds the program's cgroup.
    pub fn managed(&self) -> &ManagedPid {
        &self.managed
    }
}

/// Starts `command` (a program with pipes: its standard streams, folder and
/// variables set by the caller) in a session of its own, isolated,
/// contained in a cgroup named after `label`, with `kept` descriptors open
/// in it at their own numbers; its pid registered so that its exit status
/// stays the caller's. Dropping the [`ManagedChild`] kills whatever is
/// still in its cgroup.
pub fn spawn_managed_command(
    command: &mut Command,
    label: &str,
    kept: &[RawFd],
) -> io::Result<ManagedChild> {
    let enclosure = Enclosure::create(label);
    let cwd = command
        .get_current_dir()
        .map(Path::to_owned)
        .map_or_else(std::env::current_dir, Ok)?;
    let mut setup = ChildSetup::new(&enclosure, Seat::Detached, &cwd, &[])?;
    setup.passed = kept.iter().map(|&fd| (fd, fd)).collect();
    let spawned = spawn(command, setup, enclosure)?;
    Ok(ManagedChild {
        pid: spawned.pid,
        exit: None,
        managed: spawned.managed,
    })
}
