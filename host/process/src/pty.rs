//! A program running in its own pseudo-terminal: the mechanism the bash
//! environment and the programs plugins drive (`plugin::interactive`)
//! share.
//!
//! [`Pty::open`] opens a portable-pty pair of a given size and keeps a
//! duplicate of its master side as a [`File`], which the caller may set up
//! (terminal modes, non-blocking) and duplicate further before
//! [`Pty::spawn`] starts the program: in its own session with the terminal
//! as its controlling terminal, in the given folder, with exactly the given
//! environment, registered with [`reaper::spawn_managed`] so that its exit
//! status is collected here ([`PtyProgram::exit`]) and never by the sweeper.
//! The host keeps no slave side open, so reading the master side ends once
//! the program and everything it started have closed the terminal.
//! [`PtyProgram`] also finds and signals the terminal's foreground process
//! group: the job a shell runs, or the program itself.
//!
//! It must not read or interpret what the program prints, decide when or
//! how hard to interrupt it, or end its session: reading, time limits and
//! the shutdown policy are the callers' (`envs::bash::shell`,
//! `plugin::interactive::session`), whose `Drop` ends the session and reaps
//! the program. Dropping a [`PtyProgram`] by itself only closes the host's
//! side of the terminal.

use std::cell::Cell;
use std::ffi::OsString;
use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Pid, tcgetpgrp};
use portable_pty::{CommandBuilder, MasterPty, PtySize, SlavePty, native_pty_system};

use super::interrupt::signal_group;
use super::procfs;
use super::reaper::{self, ManagedPid};

/// The terminal's size, which programs read to lay out their output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TerminalSize {
    /// Lines.
    pub rows: u16,
    /// Columns.
    pub columns: u16,
}

/// Why no pseudo-terminal could be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("no pseudo-terminal: {0:#}")]
    /// The system has no terminal to give.
    NoTerminal(anyhow::Error),
    #[error("the pseudo-terminal has no descriptor")]
    /// The terminal's controller side has no descriptor.
    NoDescriptor,
    #[error("duplicating the terminal: {0}")]
    /// The terminal's descriptor could not be duplicated.
    Duplicate(#[source] io::Error),
}

/// Why the program could not be started in the terminal.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// Not found, not executable, no such folder...: portable-pty's reason.
    #[error("{0:#}")]
    NotStarted(anyhow::Error),
    #[error("it started without a process id")]
    /// The program started but has no process id.
    NoProcessId,
}

/// What to run in the terminal.
#[derive(Debug, Clone)]
pub struct ProgramSpec {
    /// A path, or a name looked up in `environment`'s `PATH`.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// The directory it starts in.
    pub cwd: PathBuf,
    /// Exactly the variables the program sees: it inherits none of the
    /// host's (secrets among them).
    pub environment: Vec<(OsString, OsString)>,
}

/// An open pseudo-terminal whose program has not started yet.
pub struct Pty {
    master: Box<dyn MasterPty + Send>,
    slave: Box<dyn SlavePty + Send>,
    terminal: File,
}

impl Pty {
    /// A fresh pseudo-terminal of `size`.
    pub fn open(size: TerminalSize) -> Result<Pty, OpenError> {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: size.rows,
                cols: size.columns,
                pixel_width: 0,
                pixel_height: 0,
            })
            .map_err(OpenError::NoTerminal)?;
        let raw = pair.master.as_raw_fd().ok_or(OpenError::NoDescriptor)?;
        // SAFETY: `raw` belongs to `pair.master`, which is alive here; the
        // borrow only lasts for the duplication.
        let master = unsafe { BorrowedFd::borrow_raw(raw) };
        let terminal = File::from(master.try_clone_to_owned().map_err(OpenError::Duplicate)?);
        Ok(Pty {
            master: pair.master,
            slave: pair.slave,
            terminal,
        })
    }

    /// The master side, to set up before the program starts (a program
    /// such as bash records the terminal's modes when it starts).
    pub fn terminal(&self) -> &File {
        &self.terminal
    }

    /// One more descriptor of the master side (same open file: a
    /// non-blocking flag set on one holds for all).
    pub fn duplicate(&self) -> io::Result<OwnedFd> {
        self.terminal.as_fd().try_clone_to_owned()
    }

    /// Starts `spec` in this terminal.
    pub fn spawn(self, spec: ProgramSpec) -> Result<PtyProgram, SpawnError> {
        let mut command = CommandBuilder::new(spec.program);
        command.args(spec.args);
        command.env_clear();
        for (name, value) in spec.environment {
            command.env(name, value);
        }
        command.cwd(spec.cwd.into_os_string());
        let Pty {
            master,
            slave,
            terminal,
        } = self;
        let (child, managed) =
            reaper::spawn_managed(|| slave.spawn_command(command), |c| c.process_id())
                .map_err(SpawnError::NotStarted)?;
        // The program and its jobs hold the slave side; the host must not,
        // or it would never see the terminal hang up.
        drop(slave);
        let pid = child
            .process_id()
            .and_then(|p| i32::try_from(p).ok())
            .ok_or(SpawnError::NoProcessId)?;
        Ok(PtyProgram {
            pid,
            _child: child,
            _managed: managed,
            master,
            terminal,
            exit: Cell::new(None),
        })
    }
}

/// How the program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this status.
    Code(i32),
    /// A signal killed it.
    Signal(Signal),
    /// Its status was collected elsewhere (should not happen: the program
    /// is managed).
    Unknown,
}

impl Exit {
    /// The status a shell would report in `$?`: the code, or 128 + N after
    /// signal N. `None` when unknown; each caller has its own stand-in.
    pub fn status(self) -> Option<i32> {
        match self {
            Exit::Code(code) => Some(code),
            Exit::Signal(signal) => Some(128 + signal as i32),
            Exit::Unknown => None,
        }
    }
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exit::Code(code) => write!(f, "exited with code {code}"),
            Exit::Signal(signal) => write!(f, "was killed by {}", signal.as_str()),
            Exit::Unknown => write!(f, "ended"),
        }
    }
}

/// A program started by [`Pty::spawn`]: the leader of its own session,
/// the terminal's controlling process.
pub struct PtyProgram {
    pid: i32,
    // Held for the program's life. Field order is drop order: the pid goes
    // back to the reaper's sweeper (`_managed`) before the terminal closes,
    // so a program that the hang-up ends is still reaped.
    _child: Box<dyn portable_pty::Child + Send + Sync>,
    _managed: Option<ManagedPid>,
    master: Box<dyn MasterPty + Send>,
    terminal: File,
    exit: Cell<Option<Exit>>,
}

impl PtyProgram {
    /// The program's pid, which is also its session's and its own process
    /// group's id.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The master side: what the program prints is read here and what is
    /// typed to it written here.
    pub fn terminal(&self) -> &File {
        &self.terminal
    }

    /// The slave side's path (`/dev/pts/N`), as the program's own
    /// descriptors name it.
    pub fn tty_path(&self) -> Option<PathBuf> {
        self.master
            .tty_name()
            .or_else(|| std::fs::read_link(format!("/proc/{}/fd/0", self.pid)).ok())
    }

    /// How the program ended, if it has: one non-blocking `waitpid`, whose
    /// answer is kept.
    pub fn exit(&self) -> Option<Exit> {
        if let Some(exit) = self.exit.get() {
            return Some(exit);
        }
        let exit = loop {
            break match waitpid(Pid::from_raw(self.pid), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(_, code)) => Exit::Code(code),
                Ok(WaitStatus::Signaled(_, signal, _)) => Exit::Signal(signal),
                Err(Errno::EINTR) => continue,
                Ok(_) => return None,
                Err(_) => Exit::Unknown,
            };
        };
        self.exit.set(Some(exit));
        Some(exit)
    }

    /// The terminal's foreground process group (the job a shell runs, or
    /// the program's own group), if the terminal names one.
    pub fn foreground_group(&self) -> Option<i32> {
        match tcgetpgrp(self.terminal.as_fd()) {
            Ok(group) if group.as_raw() > 1 => Some(group.as_raw()),
            _ => None,
        }
    }

    /// Sends `signal` to the program alone. `false` if it is gone.
    pub fn signal(&self, signal: Signal) -> bool {
        kill(Pid::from_raw(self.pid), signal).is_ok()
    }

    /// Sends `signal` to the terminal's foreground process group, as the
    /// terminal's Ctrl-C does for SIGINT, or to the program's own group
    /// when the terminal names none. `false` if that group is gone.
    pub fn signal_foreground(&self, signal: Signal) -> bool {
        signal_group(self.foreground_group().unwrap_or(self.pid), signal)
    }

    /// The living processes of the program's session: the program and
    /// whatever it started that did not leave the session (`setsid`).
    pub fn session_members(&self) -> Vec<i32> {
        let host = std::process::id() as i32;
        procfs::process_table()
            .into_iter()
            .filter(|p| p.session == self.pid && p.pid != host && p.state != 'Z' && p.state != 'X')
            .map(|p| p.pid)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::io::{ErrorKind, Read, Write};
    use std::path::Path;
    use std::thread;
    use std::time::{Duration, Instant};

    use super::*;

    const SIZE: TerminalSize = TerminalSize {
        rows: 24,
        columns: 80,
    };

    /// A hang guard, not a timing assertion.
    const PATIENCE: Duration = Duration::from_secs(20);

    fn spec(program: &str, args: &[&str], cwd: &Path) -> ProgramSpec {
        ProgramSpec {
            program: program.into(),
            args: args.iter().map(OsString::from).collect(),
            cwd: cwd.to_owned(),
            environment: vec![(
                OsString::from("PATH"),
                std::env::var_os("PATH").unwrap_or_default(),
            )],
        }
    }

    /// Ends what a test started: the caller's job in real use.
    struct Ended(PtyProgram);

    impl Drop for Ended {
        fn drop(&mut self) {
            for pid in self.0.session_members() {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            let deadline = Instant::now() + PATIENCE;
            while self.0.exit().is_none() && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(10));
            }
        }
    }

    fn wait_for_exit(program: &PtyProgram) -> Exit {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(exit) = program.exit() {
                return exit;
            }
            assert!(Instant::now() < deadline, "the program did not end");
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Everything the program printed until the terminal hung up.
    fn read_to_hangup(terminal: &File) -> String {
        let mut text = Vec::new();
        let mut buffer = [0u8; 4096];
        let mut terminal = terminal;
        loop {
            match terminal.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => text.extend_from_slice(&buffer[..n]),
                Err(err) if err.kind() == ErrorKind::Interrupted => {}
                // Linux: EIO once every holder of the slave side closed it.
                Err(_) => break,
            }
        }
        String::from_utf8_lossy(&text).replace("\r\n", "\n")
    }

    fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + PATIENCE;
        while !done() {
            assert!(Instant::now() < deadline, "{what}");
            thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn runs_in_its_folder_with_exactly_its_environment_and_reports_its_code() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = spec(
            "sh",
            &["-c", r#"echo "[$GIVEN|$HOME|$(pwd)|$(tty)]"; exit 3"#],
            dir.path(),
        );
        spec.environment
            .push((OsString::from("GIVEN"), OsString::from("yes")));
        let program = Pty::open(SIZE).unwrap().spawn(spec).unwrap();
        let tty = program.tty_path().unwrap();
        let printed = read_to_hangup(program.terminal());
        let cwd = dir.path().canonicalize().unwrap();
        assert_eq!(
            printed,
            format!("[yes||{}|{}]\n", cwd.display(), tty.display())
        );
        let exit = wait_for_exit(&program);
        assert_eq!(exit, Exit::Code(3));
        assert_eq!(exit.status(), Some(3));
        assert_eq!(exit.to_string(), "exited with code 3");
        assert_eq!(program.exit(), Some(Exit::Code(3)), "the answer is kept");
    }

    #[test]
    fn the_terminal_is_set_up_before_the_program_starts() {
        let dir = tempfile::tempdir().unwrap();
        let pty = Pty::open(SIZE).unwrap();
        let mut mode = nix::sys::termios::tcgetattr(pty.terminal().as_fd()).unwrap();
        mode.local_flags.remove(nix::sys::termios::LocalFlags::ECHO);
        nix::sys::termios::tcsetattr(
            pty.terminal().as_fd(),
            nix::sys::termios::SetArg::TCSANOW,
            &mode,
        )
        .unwrap();
        let extra = File::from(pty.duplicate().unwrap());
        let program = pty
            .spawn(spec("sh", &["-c", "stty -a; stty size"], dir.path()))
            .unwrap();
        let printed = read_to_hangup(&extra);
        assert!(printed.contains("-echo "), "{printed}");
        assert!(printed.ends_with("24 80\n"), "{printed}");
        wait_for_exit(&program);
    }

    #[test]
    fn a_signal_ending_follows_the_shell_convention() {
        let dir = tempfile::tempdir().unwrap();
        let program = Ended(
            Pty::open(SIZE)
                .unwrap()
                .spawn(spec("sleep", &["30"], dir.path()))
                .unwrap(),
        );
        let pid = program.0.pid();
        // Alone in its session, the program is the foreground group.
        assert_eq!(program.0.foreground_group(), Some(pid));
        assert_eq!(program.0.session_members(), [pid]);
        assert_eq!(program.0.exit(), None);
        assert!(program.0.signal_foreground(Signal::SIGTERM));
        let exit = wait_for_exit(&program.0);
        assert_eq!(exit, Exit::Signal(Signal::SIGTERM));
        assert_eq!(exit.status(), Some(143));
        assert_eq!(exit.to_string(), "was killed by SIGTERM");
    }

    #[test]
    fn the_foreground_group_is_the_job_a_shell_runs() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = spec("sh", &["-i"], dir.path());
        spec.environment
            .push((OsString::from("PS1"), OsString::from("$ ")));
        let program = Ended(Pty::open(SIZE).unwrap().spawn(spec).unwrap());
        let shell = program.0.pid();
        program.0.terminal().write_all(b"sleep 30\n").unwrap();
        wait_until("the job never became the foreground", || {
            program
                .0
                .foreground_group()
                .is_some_and(|group| group != shell)
        });
        let job = program.0.foreground_group().unwrap();
        let members = program.0.session_members();
        assert!(
            members.contains(&shell) && members.contains(&job),
            "{members:?}"
        );
        // Ctrl-C reaches the job, not the shell.
        assert!(program.0.signal_foreground(Signal::SIGINT));
        wait_until("the shell did not get the terminal back", || {
            program.0.foreground_group() == Some(shell)
        });
        assert_eq!(program.0.exit(), None, "the shell survives");
    }

    #[test]
    fn a_missing_program_is_not_started() {
        let dir = tempfile::tempdir().unwrap();
        let refused =
            Pty::open(SIZE)
                .unwrap()
                .spawn(spec("envhost-no-such-program", &[], dir.path()));
        let Err(SpawnError::NotStarted(why)) = refused else {
            panic!("a missing program started");
        };
        assert!(
            format!("{why:#}").contains("envhost-no-such-program"),
            "{why:#}"
        );
    }
}
