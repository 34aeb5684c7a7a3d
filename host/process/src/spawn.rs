//! Starting a program: what happens in the child between fork and exec.
//!
//! Every program the host starts goes through here, so that each one is
//! contained ([`crate::containment`]: it joins its own cgroup before it can
//! fork anything) and guarded ([`crate::guard`]: it cannot signal the host),
//! and so that its exit status is collected by its environment, never by
//! the reaper's sweeper ([`crate::reaper`]).
//!
//! [`spawn_managed_command`] is for a program with pipes (python):
//! containment and guard are added to the caller's `Command`, whose own
//! set-up (a session, descriptors kept open) runs first. [`ChildSetup`] is
//! the whole set-up of a program in a pseudo-terminal, which
//! [`crate::Pty::spawn`] uses: a new session with the terminal as its
//! controlling terminal, default signal dispositions, every inherited
//! descriptor closed except the standard three and those passed on purpose
//! (moved to the numbers the program expects), then the cgroup and the
//! guard.
//!
//! The closures run in a forked copy of a multi-threaded process: they make
//! system calls only and never allocate.

use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

use nix::libc;

use crate::containment::Enclosure;
use crate::guard;
use crate::reaper::{self, ManagedPid};

/// A descriptor handed to the program at a number of its choosing.
#[derive(Debug)]
pub struct PassedFd {
    /// The host's descriptor (close-on-exec in the host).
    pub fd: OwnedFd,
    /// The number it has in the program.
    pub at: RawFd,
}

/// Everything the child does before exec, prepared in the parent.
pub(crate) struct ChildSetup {
    /// `cgroup.procs` of the program's cgroup.
    join: Option<RawFd>,
    guard: Option<&'static [libc::sock_filter]>,
    /// New session, terminal on fd 0 as the controlling terminal, signals
    /// reset, other descriptors closed.
    terminal: bool,
    /// (host descriptor, number in the program).
    passed: Vec<(RawFd, RawFd)>,
}

impl ChildSetup {
    /// The set-up for a program in a pseudo-terminal.
    pub(crate) fn for_terminal(enclosure: &Enclosure, passed: &[PassedFd]) -> ChildSetup {
        use std::os::fd::AsRawFd;
        ChildSetup {
            join: enclosure.join_fd(),
            guard: guard::prepared(),
            terminal: true,
            passed: passed.iter().map(|p| (p.fd.as_raw_fd(), p.at)).collect(),
        }
    }

    /// Only the cgroup and the guard (the caller's `Command` does the rest).
    fn contain_only(enclosure: &Enclosure) -> ChildSetup {
        ChildSetup {
            join: enclosure.join_fd(),
            guard: guard::prepared(),
            terminal: false,
            passed: Vec::new(),
        }
    }

    /// Adds the set-up to `command`, to run after the command's own.
    pub(crate) fn attach(self, command: &mut Command) {
        // SAFETY: `run` makes async-signal-safe system calls only and does
        // not allocate (the vector was filled in the parent).
        unsafe {
            command.pre_exec(move || self.run());
        }
    }

    /// In the child, between fork and exec.
    fn run(&self) -> io::Result<()> {
        // SAFETY: plain system calls on descriptors the parent prepared.
        unsafe {
            if let Some(join) = self.join {
                // Before anything else: whatever the program forks from now
                // on is born in its cgroup. A failure (the cgroup vanished)
                // leaves it in the host's cgroup, still a descendant.
                libc::write(join, b"0".as_ptr().cast(), 1);
            }
            if self.terminal {
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
                // Descriptors the host did not open with close-on-exec (or
                // inherited from whoever started it) stay out of the
                // program. Linux 5.11+; older kernels keep the std default.
                libc::syscall(
                    libc::SYS_close_range,
                    3 as libc::c_uint,
                    libc::c_uint::MAX,
                    libc::CLOSE_RANGE_CLOEXEC as libc::c_uint,
                );
                for &(fd, at) in &self.passed {
                    if fd == at {
                        if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                            return Err(io::Error::last_os_error());
                        }
                    } else if libc::dup2(fd, at) == -1 {
                        return Err(io::Error::last_os_error());
                    }
                }
            }
            guard::drop_ptrace_capability();
            if let Some(program) = self.guard {
                guard::install(program);
            }
        }
        Ok(())
    }
}

/// Starts `command` (a program with pipes, set up by the caller) contained
/// in a cgroup named after `label` and guarded, its pid registered so that
/// its exit status stays the caller's. The [`ManagedPid`] holds the cgroup:
/// dropping it kills whatever is still in there.
pub fn spawn_managed_command(
    command: &mut Command,
    label: &str,
) -> io::Result<(Child, Option<ManagedPid>)> {
    let mut enclosure = Enclosure::create(label);
    ChildSetup::contain_only(&enclosure).attach(command);
    let (child, managed) = reaper::spawn_managed(|| command.spawn(), |c| Some(c.id()))?;
    enclosure.started();
    Ok((child, managed.map(|managed| managed.holding(enclosure))))
}
