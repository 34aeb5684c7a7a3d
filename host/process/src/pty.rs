//! A program running in its own pseudo-terminal: the mechanism the bash
//! environment and the programs plugins drive (`plugin::interactive`)
//! share.
//!
//! [`Pty::open`] opens a pseudo-terminal pair of a given size and keeps its
//! master side as a [`File`], which the caller may set up (terminal modes,
//! non-blocking) and duplicate further before [`Pty::spawn`] starts the
//! program through [`crate::spawn`]: in its own session with the terminal
//! as its controlling terminal, in its own cgroup where the machine allows
//! it, guarded against signalling the host, in the given folder, with
//! exactly the given environment and no inherited descriptor but the
//! terminal and those passed on purpose ([`Pty::spawn_with`]). Its pid is
//! registered with the reaper so that its exit status is collected here
//! ([`PtyProgram::exit`]) and never by the sweeper. The host keeps no slave
//! side open, so reading the master side ends once the program and
//! everything it started have closed the terminal. [`PtyProgram`] also
//! finds and signals the terminal's foreground process group: the job a
//! shell runs, or the program itself.
//!
//! It must not read or interpret what the program prints, decide when or
//! how hard to interrupt it, or end its session: reading, time limits and
//! the shutdown policy are the callers' (`envs::bash::shell`,
//! `plugin::interactive::session`). Dropping a [`PtyProgram`] closes the
//! host's side of the terminal and kills whatever is left in the program's
//! cgroup (nothing more without cgroups).

use std::cell::Cell;
use std::ffi::OsString;
use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use nix::errno::Errno;
use nix::pty::{Winsize, openpty};
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Pid, tcgetpgrp};

use super::containment::Enclosure;
use super::interrupt::signal_group;
use super::procfs;
use super::reaper::ManagedPid;
use super::spawn::{self, ChildSetup, PassedFd, Seat};

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
    #[error("no pseudo-terminal: {0}")]
    /// The system has no terminal to give.
    NoTerminal(#[source] io::Error),
    #[error("duplicating the terminal: {0}")]
    /// The terminal's descriptor could not be duplicated.
    Duplicate(#[source] io::Error),
}

/// Why the program could not be started in the terminal.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// Not found, not executable, no such folder...
    #[error("cannot start {program}: {source}")]
    NotStarted {
        /// The program as given.
        program: String,
        /// The operating system's reason.
        #[source]
        source: io::Error,
    },
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
    slave: OwnedFd,
    terminal: File,
    tty_path: Option<PathBuf>,
}

impl Pty {
    /// A fresh pseudo-terminal of `size`.
    pub fn open(size: TerminalSize) -> Result<Pty, OpenError> {
        let winsize = Winsize {
            ws_row: size.rows,
            ws_col: size.columns,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pair = openpty(Some(&winsize), None).map_err(|e| OpenError::NoTerminal(e.into()))?;
        for fd in [&pair.master, &pair.slave] {
            nix::fcntl::fcntl(
                std::os::fd::AsRawFd::as_raw_fd(fd),
                nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
            )
            .map_err(|e| OpenError::NoTerminal(e.into()))?;
        }
        let tty_path = nix::unistd::ttyname(pair.slave.as_fd()).ok();
        Ok(Pty {
            slave: pair.slave,
            terminal: File::from(pair.master),
            tty_path,
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
        self.spawn_with(spec, Vec::new())
    }

    /// Starts `spec` in this terminal with `passed` descriptors open in it
    /// at the numbers they name (every other inherited descriptor is
    /// closed). The host's copies are closed once the program has started.
    pub fn spawn_with(
        self,
        spec: ProgramSpec,
        passed: Vec<PassedFd>,
    ) -> Result<PtyProgram, SpawnError> {
        let Pty {
            slave,
            terminal,
            tty_path,
        } = self;
        let program_name = spec.program.to_string_lossy().into_owned();
        let not_started = |source| SpawnError::NotStarted {
            program: program_name.clone(),
            source,
        };
        let label = std::path::Path::new(&spec.program)
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_else(|| "program".into());
        let enclosure = Enclosure::create(&label);
        let stdio = || slave.try_clone().map(Stdio::from);
        let mut command = Command::new(&spec.program);
        command
            .args(&spec.args)
            .env_clear()
            .envs(spec.environment.iter().map(|(k, v)| (k, v)))
            .current_dir(&spec.cwd)
            .stdin(stdio().map_err(not_started)?)
            .stdout(stdio().map_err(not_started)?)
            .stderr(stdio().map_err(not_started)?);
        let setup =
            ChildSetup::new(&enclosure, Seat::Terminal, &spec.cwd, &passed).map_err(not_started)?;
        let spawned = spawn::spawn(&mut command, setup, enclosure).map_err(not_started)?;
        // The program and its jobs hold the slave side; the host must not,
        // or it would never see the terminal hang up.
        drop(command);
        drop(slave);
        drop(passed);
        Ok(PtyProgram {
            pid: spawned.pid,
            managed: spawned.managed,
            terminal,
            tty_path,
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
    // Field order is drop order: the cgroup is killed and the pid goes back
    // to the reaper's sweeper (`managed`) before the terminal closes, so a
    // program that the hang-up ends is still reaped.
    managed: ManagedPid,
    terminal: File,
    tty_path: Option<PathBuf>,
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
        self.tty_path
            .clone()
            .or_else(|| std::fs::read_link(format!("/proc/{}/fd/0", self.pid)).ok())
    }

    /// The program's cgroup (empty without cgroups): everything it started,
    /// wherever that went.
    pub fn enclosure(&self) -> &Enclosure {
        self.managed.enclosure()
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
        let Err(why @ SpawnError::NotStarted { .. }) = refused else {
            panic!("a missing program started");
        };
        assert!(why.to_string().contains("envhost-no-such-program"), "{why}");
    }

    /// Reads lines from the terminal until one parses as a number.
    fn read_number(terminal: &File) -> i32 {
        let mut text = Vec::new();
        let mut buffer = [0u8; 256];
        let mut terminal = terminal;
        let deadline = Instant::now() + PATIENCE;
        while Instant::now() < deadline {
            let n = terminal.read(&mut buffer).expect("read the terminal");
            text.extend_from_slice(&buffer[..n]);
            let printed = String::from_utf8_lossy(&text);
            if let Some(number) = printed
                .lines()
                .filter(|_| printed.ends_with('\n'))
                .find_map(|line| line.trim().parse().ok())
            {
                return number;
            }
        }
        panic!("no number printed: {:?}", String::from_utf8_lossy(&text));
    }

    #[test]
    fn a_program_cannot_signal_the_host() {
        crate::guard::prepare();
        if let Err(reason) = crate::guard::status() {
            crate::tests_support::skip_unprivileged("the guard", &reason.to_string());
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let program = Ended(
            Pty::open(SIZE)
                .unwrap()
                .spawn(spec(
                    "sh",
                    &["-c", "kill -CONT $PPID 2>/dev/null; echo $?"],
                    dir.path(),
                ))
                .unwrap(),
        );
        assert_eq!(read_number(program.0.terminal()), 1, "kill was refused");
    }

    #[test]
    fn a_program_and_what_leaves_its_session_are_killed_with_its_cgroup() {
        if !matches!(
            crate::containment::mode(),
            crate::containment::Containment::Cgroups { .. }
        ) {
            crate::tests_support::skip_unprivileged(
                "cgroups",
                &format!("{:?}", crate::containment::mode()),
            );
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let program = Pty::open(SIZE)
            .unwrap()
            .spawn(spec(
                "sh",
                &[
                    "-c",
                    "setsid sleep 300 >/dev/null 2>&1 & echo $!; exec sleep 300",
                ],
                dir.path(),
            ))
            .unwrap();
        let escaped = read_number(program.terminal());
        assert!(program.enclosure().is_cgroup());
        wait_until("the escaped process is not in the cgroup", || {
            program.enclosure().members().contains(&escaped)
        });
        drop(program);
        wait_until("the escaped process survived", || {
            procfs::process_info(escaped).is_none_or(|p| p.state == 'Z')
        });
    }
}
