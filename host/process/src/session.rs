//! One interactive program in a pseudo-terminal, driven like a person at
//! its prompt (what plugins' `interactive` import runs).
//!
//! [`Session::start`] runs the program (already resolved and granted) in a
//! fresh PTY ([`crate::Pty`]): its own session with the terminal as
//! its controlling terminal, in the project folder, with exactly the
//! environment it is given, its exit status collected by this module alone.
//! There is no reader thread: like pexpect, the terminal is read only while
//! a plugin waits, so a program that prints between calls blocks on a full
//! terminal, as it would with nobody at the keyboard.
//!
//! A wait past the command's deadline interrupts the terminal's foreground
//! job with the `process::interrupt` ladder (SIGINT, SIGTERM, SIGKILL)
//! until the prompt comes back or the program ends; a wait past a shorter
//! limit of the plugin's own only stops waiting. Dropping a `Session` hangs up the
//! terminal's whole session (SIGHUP, then SIGKILL to whatever is left, the
//! program and anything it started, e.g. gdb's inferior) and reaps the
//! program.
//!
//! This module decides nothing about grants or what a plugin is told.

use std::cell::RefCell;
use std::ffi::OsString;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use envhost_core::CancelFlag;

use crate::capture::OutputLimits;
use crate::fd::{is_hung_up, set_nonblocking};
use crate::interrupt::{DEFAULT_LADDER, Escalation, escalate};
use crate::live::{SessionLive, Waiting};
use crate::prompt::{Prompt, PromptWatch};
use crate::pty::{ProgramSpec, Pty, PtyProgram, TerminalSize};
use crate::session_error::SessionError;

/// The terminal's size: wide and tall, so programs wrap and paginate as
/// little as possible.
pub const ROWS: u16 = 1000;
/// ... and its width.
pub const COLUMNS: u16 = 500;

/// How often a wait looks at the deadline and the host's cancellation.
const POLL_INTERVAL: Duration = Duration::from_millis(POLL_INTERVAL_MS as u64);
const POLL_INTERVAL_MS: u16 = 50;
/// How long a program gets to show its prompt after a Ctrl-C of the host.
const CANCEL_SETTLE: Duration = Duration::from_millis(500);
/// How long a hung-up program gets to end before SIGKILL.
const HANGUP_GRACE: Duration = Duration::from_millis(500);
/// How long an ended program's exit status is waited for.
const REAP_WAIT: Duration = Duration::from_secs(2);
/// Most bytes read from the terminal at once.
const READ_SIZE: usize = 64 * 1024;

/// Most typed lines remembered for echo removal between two waits.
const TYPED_LINES_KEPT: usize = 1000;

/// What to do when a wait's time is up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtDeadline {
    /// Interrupt the foreground job until the prompt is back (the
    /// command's own time is up).
    Interrupt,
    /// Stop waiting; the program runs on (the plugin's shorter limit).
    LeaveRunning,
}

/// How a wait ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waited {
    /// The prompt appeared; the output before it and the prompt's text.
    Prompt {
        /// The output before the prompt.
        before: String,
        /// The prompt as it appeared.
        prompt: String,
    },
    /// The deadline passed first; `how` says whether and how the program
    /// was interrupted. `output` is everything seen.
    TimedOut {
        /// Everything seen.
        output: String,
        /// Whether and how the program was interrupted.
        how: String,
    },
    /// The program ended.
    Exited {
        /// Everything seen.
        output: String,
        /// Its exit status.
        status: i32,
    },
    /// The host was interrupted (Ctrl-C in the REPL, SIGTERM); the
    /// program got SIGINT, and `how` says whether its prompt came back.
    Cancelled {
        /// Everything seen.
        output: String,
        /// Whether its prompt came back.
        how: String,
    },
}

/// A running program in its own terminal.
pub struct Session {
    /// As shown in messages (`sqlite3`).
    program: String,
    /// The program in its terminal, whose master side is non-blocking.
    pty: PtyProgram,
    /// Read while typing, not yet seen by a wait.
    unread: Vec<u8>,
    /// Lines typed since the last wait (their echo is left out).
    typed: Vec<String>,
    /// Every holder of the terminal closed it.
    hung_up: bool,
    /// What another thread sees of the waits, and may do meanwhile.
    live: Arc<SessionLive>,
}

impl Session {
    /// Starts `path` (shown as `program`) with `args` in `cwd`, with exactly
    /// `environment`.
    pub fn start(
        program: &str,
        path: &Path,
        args: &[String],
        cwd: &Path,
        environment: Vec<(OsString, OsString)>,
    ) -> Result<Session, SessionError> {
        let cannot =
            |why: String| SessionError::CannotStart(format!("{program} cannot be started: {why}"));
        let pty = Pty::open(TerminalSize {
            rows: ROWS,
            columns: COLUMNS,
        })
        .map_err(|e| cannot(e.to_string()))?;
        set_nonblocking(pty.terminal().as_fd())
            .map_err(|e| cannot(format!("terminal mode: {e}")))?;
        let pty = pty
            .spawn(ProgramSpec {
                program: path.as_os_str().to_owned(),
                args: args.iter().map(OsString::from).collect(),
                cwd: cwd.to_owned(),
                environment,
            })
            .map_err(|e| cannot(e.to_string()))?;
        let terminal = pty
            .terminal()
            .try_clone()
            .map_err(|e| cannot(format!("terminal: {e}")))?;
        let live = SessionLive::new(program, pty.pid(), terminal.into(), pty.tty_path());
        Ok(Session {
            program: program.to_owned(),
            pty,
            unread: Vec::new(),
            typed: Vec::new(),
            hung_up: false,
            live: Arc::new(live),
        })
    }

    /// The program's name, for messages.
    pub fn program(&self) -> &str {
        &self.program
    }

    /// The session as another thread sees it while a wait runs: the text
    /// read so far (once [`SessionLive::record`] is on), typing, Ctrl-C.
    pub fn live(&self) -> Arc<SessionLive> {
        Arc::clone(&self.live)
    }

    /// The program's process id.
    pub fn pid(&self) -> i32 {
        self.pty.pid()
    }

    /// The exit status (128 + N after signal N) once the program ended; -1
    /// if its status was lost.
    pub fn exit_status(&self) -> Option<i32> {
        self.pty.exit().map(|exit| exit.status().unwrap_or(-1))
    }

    fn ended_error(&self) -> SessionError {
        let status = match self.exit_status() {
            Some(code) => format!("exit status {code}"),
            None => "its terminal closed".to_owned(),
        };
        SessionError::Ended {
            program: self.program.clone(),
            status,
        }
    }

    /// Types `text`; `line` adds Enter. Bounded by `until`.
    pub fn send(
        &mut self,
        text: &str,
        line: bool,
        until: Option<Instant>,
        cancel: Option<&CancelFlag>,
    ) -> Result<(), SessionError> {
        if self.hung_up || self.exit_status().is_some() {
            return Err(self.ended_error());
        }
        let mut bytes = text.as_bytes().to_vec();
        if line {
            bytes.push(b'\n');
            self.typed.extend(text.split('\n').map(str::to_owned));
            if self.typed.len() > TYPED_LINES_KEPT {
                let excess = self.typed.len() - TYPED_LINES_KEPT;
                self.typed.drain(..excess);
            }
        }
        let mut written = 0;
        while written < bytes.len() {
            match self.pty.terminal().write(&bytes[written..]) {
                Ok(n) => written += n,
                Err(err) if err.kind() == ErrorKind::Interrupted => {}
                Err(err) if err.kind() == ErrorKind::WouldBlock => {
                    // The program is not reading: keep its output flowing
                    // (it may be blocked writing) while waiting to type.
                    if until.is_some_and(|u| Instant::now() >= u)
                        || cancel.is_some_and(CancelFlag::is_cancelled)
                    {
                        return Err(SessionError::OutOfTime {
                            program: self.program.clone(),
                        });
                    }
                    let flags = PollFlags::POLLIN | PollFlags::POLLOUT;
                    if self.poll(flags, POLL_INTERVAL_MS)? {
                        self.read_into_unread()?;
                    }
                }
                Err(err) if is_hung_up(&err) => {
                    self.hung_up = true;
                    return Err(self.ended_error());
                }
                Err(err) => {
                    return Err(SessionError::Io {
                        program: self.program.clone(),
                        why: err.to_string(),
                    });
                }
            }
        }
        Ok(())
    }

    /// `true` when the terminal is ready for `flags` (or hung up).
    fn poll(&self, flags: PollFlags, timeout_ms: u16) -> Result<bool, SessionError> {
        let mut fds = [PollFd::new(self.pty.terminal().as_fd(), flags)];
        match poll(&mut fds, PollTimeout::from(timeout_ms)) {
            Ok(0) | Err(Errno::EINTR) => Ok(false),
            Ok(_) => Ok(true),
            Err(err) => Err(SessionError::Io {
                program: self.program.clone(),
                why: err.to_string(),
            }),
        }
    }

    fn read_into_unread(&mut self) -> Result<(), SessionError> {
        let mut buffer = vec![0u8; READ_SIZE];
        if let Some(n) = self.read_once(&mut buffer)? {
            self.unread.extend_from_slice(&buffer[..n]);
        }
        Ok(())
    }

    /// One read: `Some(n)` bytes, or `None` when nothing is there (or the
    /// terminal hung up, which is remembered).
    fn read_once(&mut self, buffer: &mut [u8]) -> Result<Option<usize>, SessionError> {
        loop {
            return match self.pty.terminal().read(buffer) {
                Ok(0) => {
                    self.hung_up = true;
                    Ok(None)
                }
                Ok(n) => Ok(Some(n)),
                Err(err) if err.kind() == ErrorKind::Interrupted => continue,
                Err(err) if err.kind() == ErrorKind::WouldBlock => Ok(None),
                // Linux: EIO once every holder of the slave side closed it.
                Err(err) if is_hung_up(&err) => {
                    self.hung_up = true;
                    Ok(None)
                }
                Err(err) => Err(SessionError::Io {
                    program: self.program.clone(),
                    why: err.to_string(),
                }),
            };
        }
    }

    /// Waits for `prompt` until `until`; past it, interrupts the program
    /// and waits for the prompt to come back, or leaves it running, as
    /// `at_deadline` says. Output is cleaned and capped with `limits`
    /// (`label` names a saved file).
    pub fn wait(
        &mut self,
        prompt: &Prompt,
        until: Instant,
        at_deadline: AtDeadline,
        cancel: Option<&CancelFlag>,
        limits: &OutputLimits,
        label: &str,
    ) -> Result<Waited, SessionError> {
        let live = Arc::clone(&self.live);
        live.set_waiting(true);
        let _waiting = Waiting(&live);
        let mut watch = PromptWatch::new(limits, label, std::mem::take(&mut self.typed));
        if live.is_recording() {
            watch = watch.showing_on(Arc::clone(&live));
        }
        let waited = self.wait_watching(watch, prompt, until, at_deadline, cancel);
        // The prompt it ended at is not output.
        live.skip_line();
        waited
    }

    fn wait_watching(
        &mut self,
        mut watch: PromptWatch,
        prompt: &Prompt,
        until: Instant,
        at_deadline: AtDeadline,
        cancel: Option<&CancelFlag>,
    ) -> Result<Waited, SessionError> {
        if self.hung_up && self.unread.is_empty() {
            return Err(self.ended_error());
        }
        match self.watch_until(&mut watch, prompt, until, cancel)? {
            Watched::Prompt(start, text) => {
                let found = watch.finish_at(start, text);
                return Ok(Waited::Prompt {
                    before: found.before,
                    prompt: found.prompt,
                });
            }
            Watched::Hung => return Ok(self.exited(watch)),
            Watched::Cancelled => return self.interrupted_by_host(watch, prompt),
            Watched::Deadline if at_deadline == AtDeadline::LeaveRunning => {
                return Ok(Waited::TimedOut {
                    output: watch.finish(),
                    how: format!(
                        "{} is still running (wait again, or interrupt it)",
                        self.program
                    ),
                });
            }
            Watched::Deadline => {}
        }
        Ok(self.interrupted_at_deadline(watch, prompt))
    }

    /// Ctrl-C, as the user meant it: the program's job is interrupted and
    /// the program kept, back at its prompt if that comes quickly.
    fn interrupted_by_host(
        &mut self,
        mut watch: PromptWatch,
        prompt: &Prompt,
    ) -> Result<Waited, SessionError> {
        let _ = self.pty.signal_foreground(Signal::SIGINT);
        let settle = Instant::now() + CANCEL_SETTLE;
        let how = match self.watch_until(&mut watch, prompt, settle, None)? {
            Watched::Prompt(start, text) => {
                let found = watch.finish_at(start, text);
                return Ok(Waited::Cancelled {
                    output: found.before,
                    how: format!(
                        "interrupted with SIGINT; {} is back at its prompt",
                        self.program
                    ),
                });
            }
            Watched::Hung => {
                let status = self.reap();
                format!(
                    "interrupted with SIGINT; {} ended (exit status {status})",
                    self.program
                )
            }
            _ => "interrupted with SIGINT; its prompt did not come back".to_owned(),
        };
        Ok(Waited::Cancelled {
            output: watch.finish(),
            how,
        })
    }

    /// Past the deadline: interrupt as a terminal would, until the prompt
    /// comes back or the program ends.
    fn interrupted_at_deadline(&mut self, mut watch: PromptWatch, prompt: &Prompt) -> Waited {
        // The ladder calls its two closures in turn, never at once, so they
        // can share the session.
        let mut last: Option<Watched> = None;
        let session = RefCell::new(&mut *self);
        let escalation = escalate(
            &DEFAULT_LADDER,
            |signal| session.borrow().pty.signal_foreground(signal),
            |grace| {
                let until = Instant::now() + grace;
                let watched = session
                    .borrow_mut()
                    .watch_until(&mut watch, prompt, until, None);
                let done = matches!(watched, Ok(Watched::Prompt(..) | Watched::Hung));
                last = watched.ok();
                done
            },
        );
        let how = match escalation {
            Escalation::StoppedBy(signal) => format!("interrupted with {}", signal.as_str()),
            Escalation::AlreadyGone => "it ended by itself".to_owned(),
            Escalation::Unresponsive => {
                "it ignored SIGINT, SIGTERM and SIGKILL (its foreground job may be stuck in the kernel)"
                    .to_owned()
            }
        };
        match last {
            Some(Watched::Prompt(start, text)) => {
                let found = watch.finish_at(start, text);
                Waited::TimedOut {
                    output: found.before,
                    how: format!("{how}; {} is back at its prompt", self.program),
                }
            }
            Some(Watched::Hung) => {
                let status = self.reap();
                Waited::TimedOut {
                    output: watch.finish(),
                    how: format!("{how}; {} ended (exit status {status})", self.program),
                }
            }
            _ => Waited::TimedOut {
                output: watch.finish(),
                how: format!("{how}; its prompt did not come back"),
            },
        }
    }

    fn exited(&mut self, watch: PromptWatch) -> Waited {
        let status = self.reap();
        Waited::Exited {
            output: watch.finish(),
            status,
        }
    }

    /// After the terminal hung up: the program's exit status, waiting a
    /// moment for it (a program may close its terminal and then exit), and
    /// ending it if it lingers without a terminal.
    fn reap(&mut self) -> i32 {
        let deadline = Instant::now() + REAP_WAIT;
        loop {
            if let Some(status) = self.exit_status() {
                return status;
            }
            if Instant::now() >= deadline {
                self.end_session();
                return self.exit_status().unwrap_or(-1);
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Reads and feeds `watch` until the prompt, a hang-up, `until` or a
    /// cancellation.
    fn watch_until(
        &mut self,
        watch: &mut PromptWatch,
        prompt: &Prompt,
        until: Instant,
        cancel: Option<&CancelFlag>,
    ) -> Result<Watched, SessionError> {
        let mut buffer = vec![0u8; READ_SIZE];
        loop {
            if !self.unread.is_empty() {
                watch.feed(&std::mem::take(&mut self.unread));
            }
            while let Some(n) = self.read_once(&mut buffer)? {
                watch.feed(&buffer[..n]);
            }
            if let Some((start, text)) = watch.find(prompt) {
                return Ok(Watched::Prompt(start, text));
            }
            if self.hung_up {
                return Ok(Watched::Hung);
            }
            if cancel.is_some_and(CancelFlag::is_cancelled) {
                return Ok(Watched::Cancelled);
            }
            let now = Instant::now();
            if now >= until {
                return Ok(Watched::Deadline);
            }
            let wait = (until - now).min(POLL_INTERVAL);
            let wait_ms = u16::try_from(wait.as_millis())
                .unwrap_or(POLL_INTERVAL_MS)
                .max(1);
            self.poll(PollFlags::POLLIN, wait_ms)?;
        }
    }

    /// Sends SIGINT to the foreground job, as Ctrl-C would.
    pub fn interrupt(&mut self) -> Result<(), SessionError> {
        if self.hung_up || self.exit_status().is_some() {
            return Err(self.ended_error());
        }
        self.pty.signal_foreground(Signal::SIGINT);
        Ok(())
    }

    /// Hangs up the terminal's session and makes sure all of it ends.
    fn end_session(&mut self) {
        for pid in self.pty.session_members() {
            let _ = kill(Pid::from_raw(pid), Signal::SIGHUP);
            let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
        }
        let deadline = Instant::now() + HANGUP_GRACE;
        while self.exit_status().is_none() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        // The program, and anything it started in its session (gdb's
        // inferior, a job), whether or not the program is gone already.
        for pid in self.pty.session_members() {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        let deadline = Instant::now() + REAP_WAIT;
        while self.exit_status().is_none() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
    }
}

enum Watched {
    Prompt(usize, String),
    Hung,
    Deadline,
    Cancelled,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.end_session();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procfs;
    use crate::program::find_program;

    fn shell() -> (Session, Prompt, OutputLimits, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let path = find_program("sh").unwrap();
        let environment = vec![
            (
                OsString::from("PATH"),
                std::env::var_os("PATH").unwrap_or_default(),
            ),
            (OsString::from("PS1"), OsString::from("test$ ")),
        ];
        let session =
            Session::start("sh", &path, &["-i".to_owned()], dir.path(), environment).unwrap();
        let limits = OutputLimits::for_project(dir.path());
        (session, Prompt::new(r"test\$ ").unwrap(), limits, dir)
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(20)
    }

    fn alive(pid: i32) -> bool {
        procfs::process_info(pid).is_some_and(|p| p.state != 'Z' && p.state != 'X')
    }

    #[test]
    fn answers_at_the_prompt_without_the_echo_and_ends_when_dropped() {
        let (mut session, prompt, limits, _dir) = shell();
        let first = session
            .wait(&prompt, soon(), AtDeadline::Interrupt, None, &limits, "t")
            .unwrap();
        assert!(matches!(first, Waited::Prompt { .. }), "{first:?}");
        session.send("echo $((6 * 7))", true, None, None).unwrap();
        let answer = session
            .wait(&prompt, soon(), AtDeadline::Interrupt, None, &limits, "t")
            .unwrap();
        assert_eq!(
            answer,
            Waited::Prompt {
                before: "42\n".into(),
                prompt: "test$ ".into()
            }
        );
        let pid = session.pid();
        assert!(alive(pid));
        drop(session);
        assert!(!alive(pid), "the program outlived its session");
    }

    /// Waits on another thread, as a plugin command that yielded does.
    fn wait_elsewhere(
        mut session: Session,
        prompt: Prompt,
        limits: OutputLimits,
    ) -> thread::JoinHandle<(Session, Waited)> {
        thread::spawn(move || {
            let waited = session
                .wait(&prompt, soon(), AtDeadline::Interrupt, None, &limits, "t")
                .unwrap();
            (session, waited)
        })
    }

    /// Takes from `live` until `expected` has been seen whole.
    fn take_until(live: &SessionLive, expected: &str) -> String {
        let deadline = soon();
        let mut seen = String::new();
        while !seen.contains(expected) {
            assert!(
                Instant::now() < deadline,
                "never saw {expected:?}: {seen:?}"
            );
            seen.push_str(&live.take());
            thread::sleep(Duration::from_millis(10));
        }
        seen
    }

    #[test]
    fn another_thread_reads_the_output_piece_by_piece_while_a_wait_runs() {
        let (mut session, prompt, limits, _dir) = shell();
        session
            .wait(&prompt, soon(), AtDeadline::Interrupt, None, &limits, "t")
            .unwrap();
        let live = session.live();
        live.record(true);
        session
            .send(
                "for i in 1 2 3; do echo line $i; sleep 0.2; done",
                true,
                None,
                None,
            )
            .unwrap();
        let waiting = wait_elsewhere(session, prompt, limits);
        let first = take_until(&live, "line 1\n");
        assert!(live.is_waiting());
        let rest = take_until(&live, "line 3\n");
        let (_session, waited) = waiting.join().unwrap();
        // Nothing given twice, no echo, and the wait's own answer agrees.
        assert_eq!(
            format!("{first}{rest}{}", live.take()),
            "line 1\nline 2\nline 3\n"
        );
        assert_eq!(
            waited,
            Waited::Prompt {
                before: "line 1\nline 2\nline 3\n".into(),
                prompt: "test$ ".into()
            }
        );
        assert!(!live.is_waiting());
        assert_eq!(live.total_bytes(), 21);
        assert_eq!(live.last_line().as_deref(), Some("line 3"));
    }

    #[test]
    fn another_thread_types_into_a_program_that_waits_for_input() {
        let (mut session, prompt, limits, _dir) = shell();
        session
            .wait(&prompt, soon(), AtDeadline::Interrupt, None, &limits, "t")
            .unwrap();
        let live = session.live();
        live.record(true);
        session
            .send(
                "printf 'Name? '; read name; echo \"Hello $name\"",
                true,
                None,
                None,
            )
            .unwrap();
        let waiting = wait_elsewhere(session, prompt.clone(), limits);
        assert_eq!(take_until(&live, "Name? "), "Name? ");
        let deadline = soon();
        while !live.reading_terminal() {
            assert!(Instant::now() < deadline, "the read was never seen");
            thread::sleep(Duration::from_millis(10));
        }
        live.type_text("John\n", soon()).unwrap();
        let (mut session, waited) = waiting.join().unwrap();
        assert!(
            matches!(&waited, Waited::Prompt { before, .. } if before == "Name? John\nHello John\n"),
            "{waited:?}"
        );
        assert_eq!(live.take(), "John\nHello John\n");

        // Ctrl-C from the other thread stops the foreground job.
        session
            .send("sleep 30; echo finished", true, None, None)
            .unwrap();
        let limits = OutputLimits::for_project(_dir.path());
        let waiting = wait_elsewhere(session, prompt, limits);
        thread::sleep(Duration::from_millis(300));
        assert!(live.interrupt());
        let (_session, waited) = waiting.join().unwrap();
        assert!(
            matches!(&waited, Waited::Prompt { before, .. } if !before.contains("finished")),
            "{waited:?}"
        );
    }

    #[test]
    fn a_deadline_interrupts_the_foreground_job_and_keeps_the_program() {
        let (mut session, prompt, limits, _dir) = shell();
        session
            .wait(&prompt, soon(), AtDeadline::Interrupt, None, &limits, "t")
            .unwrap();
        session.send("sleep 30", true, None, None).unwrap();
        let until = Instant::now() + Duration::from_millis(200);
        let waited = session
            .wait(&prompt, until, AtDeadline::Interrupt, None, &limits, "t")
            .unwrap();
        let Waited::TimedOut { how, .. } = waited else {
            panic!("{waited:?}");
        };
        assert_eq!(how, "interrupted with SIGINT; sh is back at its prompt");
        session.send("echo still here", true, None, None).unwrap();
        let after = session
            .wait(&prompt, soon(), AtDeadline::Interrupt, None, &limits, "t")
            .unwrap();
        assert!(
            matches!(&after, Waited::Prompt { before, .. } if before == "still here\n"),
            "{after:?}"
        );
    }

    #[test]
    fn a_shorter_limit_of_the_plugin_only_stops_waiting() {
        let (mut session, prompt, limits, _dir) = shell();
        session
            .wait(&prompt, soon(), AtDeadline::Interrupt, None, &limits, "t")
            .unwrap();
        session
            .send("sleep 1; echo done", true, None, None)
            .unwrap();
        let until = Instant::now() + Duration::from_millis(100);
        let waited = session
            .wait(&prompt, until, AtDeadline::LeaveRunning, None, &limits, "t")
            .unwrap();
        assert_eq!(
            waited,
            Waited::TimedOut {
                output: String::new(),
                how: "sh is still running (wait again, or interrupt it)".into()
            }
        );
        let later = session
            .wait(&prompt, soon(), AtDeadline::Interrupt, None, &limits, "t")
            .unwrap();
        assert!(
            matches!(&later, Waited::Prompt { before, .. } if before == "done\n"),
            "{later:?}"
        );
    }

    #[test]
    fn an_exit_is_reported_with_its_status_and_then_refused() {
        let (mut session, prompt, limits, _dir) = shell();
        session
            .wait(&prompt, soon(), AtDeadline::Interrupt, None, &limits, "t")
            .unwrap();
        session.send("exit 3", true, None, None).unwrap();
        let waited = session
            .wait(&prompt, soon(), AtDeadline::Interrupt, None, &limits, "t")
            .unwrap();
        assert!(
            matches!(waited, Waited::Exited { status: 3, .. }),
            "{waited:?}"
        );
        assert_eq!(session.exit_status(), Some(3));
        let refused = session.send("echo hi", true, None, None).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "sh has ended (exit status 3); start it again to go on"
        );
    }
}
