//! One running bash in a pseudo-terminal, and the commands it runs.
//!
//! [`Shell`] starts `bash --noprofile --norc --noediting -i` in a fresh PTY
//! ([`crate::process::pty`]): its own session, the PTY as its controlling
//! terminal, echo off. No rc file runs, not even a system-wide one; the host types a
//! line that sources the session's set-up script instead. A command is written to the session's command file
//! and a short fixed line typed into the terminal makes the shell `eval` it
//! ([`super::setup`]); the command is done when the shell prints the prompt
//! report carrying the command's number ([`super::marker`]).
//!
//! While it waits, the shell is watched: past the timeout, or once the
//! foreground job is seen blocked reading the terminal twice in a row
//! ([`envhost_process::input_wait`]), the foreground job is interrupted with
//! the [`crate::process::interrupt`] ladder (SIGINT, SIGTERM, SIGKILL) until
//! the prompt comes back. Each signal goes to the terminal's foreground
//! process group, with a SIGINT to the shell itself so that it drops the
//! rest of a command list. If the shell dies instead, its exit status is
//! reported. Dropping a `Shell` ends its whole session (the shell and every
//! job it started, `nohup` ones included).
//!
//! This module knows nothing of responses, screens or restarts: it runs
//! what it is given and reports what happened.

use std::cell::Cell;
use std::ffi::OsString;
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::sys::termios::{self, LocalFlags, SetArg};
use nix::unistd::Pid;

use super::marker::{MarkerScanner, PromptReport};
use super::reader::{PtyReader, ReaderEvent};
use super::setup::SessionFiles;
use envhost_core::{CancelFlag, CommandContext};
use envhost_process::{DEFAULT_LADDER, Escalation, escalate, signal_group};
use envhost_process::{Exit, OpenError, ProgramSpec, Pty, PtyProgram, SpawnError, TerminalSize};
use envhost_process::{TerminalReader, process_table, waiting_for_terminal};

/// Terminal size. Programs lay out tables and progress bars to the width;
/// 120 columns keeps lines readable without wrapping most tables.
pub const ROWS: u16 = 40;
pub const COLUMNS: u16 = 120;

/// How long bash may take to show its first prompt.
const STARTUP_LIMIT: Duration = Duration::from_secs(10);
/// How often a wait looks at the shell's life and the cancel flag.
const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// When the first look for a job waiting on input happens; later looks are
/// spaced out up to [`MAX_PROBE_INTERVAL`], so long builds are barely
/// disturbed.
const FIRST_PROBE: Duration = Duration::from_millis(100);
const MAX_PROBE_INTERVAL: Duration = Duration::from_secs(1);
/// After a cancel, how long the interrupted command may take to finish.
const CANCEL_GRACE: Duration = Duration::from_secs(1);
/// After the shell ends, how long to collect its last output.
const FINAL_OUTPUT_WAIT: Duration = Duration::from_millis(100);
/// Grace between SIGTERM/SIGHUP and SIGKILL when ending the session.
const SESSION_GRACE: Duration = Duration::from_secs(1);

/// The `$?`-style code shown for an ended shell: 128 + N after signal N,
/// 1 when its status is unknown.
pub fn exit_code(exit: Exit) -> i32 {
    exit.status().unwrap_or(1)
}

/// Why a command was interrupted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopCause {
    /// Past the timeout; `reading` is set when the job was (also) found
    /// waiting for terminal input at that moment.
    Timeout {
        limit: Duration,
        reading: Option<TerminalReader>,
    },
    WaitingForInput {
        reader: TerminalReader,
        after: Duration,
    },
    /// The host received SIGINT/SIGTERM.
    Cancelled,
    /// A command abandoned earlier (after a cancel) was still running when
    /// the next one came.
    Leftover,
}

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// It finished by itself (or the shell ended).
    Completed,
    /// It was interrupted; `escalation` says by which signal.
    Stopped {
        cause: StopCause,
        escalation: Escalation,
    },
    /// Cancelled, and the shell did not come back within a short grace; the
    /// next command first settles it.
    Abandoned,
}

/// The result of [`Shell::run`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub ending: Ending,
    /// The shell is back at its prompt and reported this.
    pub report: Option<PromptReport>,
    /// The shell ended.
    pub exit: Option<Exit>,
}

impl Run {
    /// Neither back at the prompt nor ended: the shell must be replaced
    /// (unless the command was only abandoned).
    pub fn wedged(&self) -> bool {
        self.report.is_none() && self.exit.is_none() && self.ending != Ending::Abandoned
    }
}

/// Why bash could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("bash cannot be run: {0}")]
    NotRunnable(String),
    #[error("{context}: {source}")]
    Io {
        context: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("bash {exit} while starting{}", describe_output(.output))]
    ExitedAtStart { exit: Exit, output: String },
    #[error("bash did not show its first prompt within {limit:?}{}", describe_output(.output))]
    NoPrompt { limit: Duration, output: String },
    #[error("start-up was cancelled")]
    Cancelled,
}

fn describe_output(output: &str) -> String {
    let output = output.trim();
    if output.is_empty() {
        String::new()
    } else {
        format!("; it printed: {output}")
    }
}

fn io_error(context: &'static str) -> impl FnOnce(io::Error) -> StartError {
    move |source| StartError::Io { context, source }
}

impl From<OpenError> for StartError {
    fn from(err: OpenError) -> StartError {
        match err {
            OpenError::Duplicate(source) => StartError::Io {
                context: "duplicating the terminal",
                source,
            },
            other => StartError::NotRunnable(other.to_string()),
        }
    }
}

impl From<SpawnError> for StartError {
    fn from(err: SpawnError) -> StartError {
        StartError::NotRunnable(match err {
            SpawnError::NotStarted(_) => format!(
                "{err}. Install bash or make it reachable through the PATH envhost runs with"
            ),
            SpawnError::NoProcessId => "bash started without a process id".into(),
        })
    }
}

/// What a wait ended on.
enum Awaited {
    Prompt(PromptReport),
    Exited(Exit),
    Deadline,
    Cancelled,
    WaitingForInput(TerminalReader),
}

struct Watch<'a> {
    until: Instant,
    cancel: Option<&'a CancelFlag>,
    detect_input: bool,
}

/// A running bash.
pub struct Shell {
    /// bash in its terminal, whose master side is for typing and terminal
    /// settings.
    pty: PtyProgram,
    /// The slave side's path (`/dev/pts/N`).
    terminal_path: PathBuf,
    reader: PtyReader,
    /// Number of the last command sent.
    seq: u64,
    /// A command that was abandoned and whose prompt has not come yet.
    pending: Option<u64>,
    /// `set -x` was on at the last prompt.
    xtrace: bool,
    /// The shell itself got SIGINT during an interruption.
    interrupted_shell: Cell<bool>,
    terminated: bool,
}

impl Shell {
    /// Starts bash in `cwd` with exactly `environment`, and waits for its
    /// first prompt. Output printed before that prompt (normally none) is
    /// passed to `sink`.
    pub fn start(
        files: &SessionFiles,
        cwd: &Path,
        environment: Vec<(OsString, OsString)>,
        cancel: &CancelFlag,
        sink: &mut dyn FnMut(&[u8]),
    ) -> Result<(Shell, PromptReport), StartError> {
        let pty = Pty::open(TerminalSize {
            rows: ROWS,
            columns: COLUMNS,
        })?;
        let reader_fd = pty
            .duplicate()
            .map_err(io_error("duplicating the terminal"))?;
        // Before bash starts: it records the terminal's modes at start-up.
        set_terminal_mode(pty.terminal().as_fd()).map_err(io_error("setting the terminal mode"))?;
        let pty = pty.spawn(ProgramSpec {
            program: "bash".into(),
            args: ["--noprofile", "--norc", "--noediting", "-i"]
                .map(OsString::from)
                .to_vec(),
            cwd: cwd.to_owned(),
            environment,
        })?;
        let terminal_path = pty.tty_path().unwrap_or_default();
        let reader = PtyReader::start(reader_fd, MarkerScanner::new(files.format()))
            .map_err(io_error("starting the terminal reader"))?;
        let shell = Shell {
            pty,
            terminal_path,
            reader,
            seq: 0,
            pending: None,
            xtrace: false,
            interrupted_shell: Cell::new(false),
            terminated: false,
        };
        let mut output = Vec::new();
        let typed = shell.pty.terminal().write_all(files.init_line().as_bytes());
        if let Err(source) = typed {
            return Err(StartError::Io {
                context: "typing the set-up line",
                source,
            });
        }
        let watch = Watch {
            until: Instant::now() + STARTUP_LIMIT,
            cancel: Some(cancel),
            detect_input: false,
        };
        let awaited = shell.await_prompt(0, &watch, &mut |bytes| output.extend_from_slice(bytes));
        shell.reader.end_command();
        sink(&output);
        let printed = || envhost_process::TerminalText::clean(&output);
        match awaited {
            Awaited::Prompt(report) => Ok((shell, report)),
            Awaited::Exited(exit) => Err(StartError::ExitedAtStart {
                exit,
                output: printed(),
            }),
            Awaited::Cancelled => Err(StartError::Cancelled),
            Awaited::Deadline | Awaited::WaitingForInput(_) => Err(StartError::NoPrompt {
                limit: STARTUP_LIMIT,
                output: printed(),
            }),
        }
    }

    /// How the shell ended, if it has.
    pub fn exited(&self) -> Option<Exit> {
        self.pty.exit()
    }

    /// Output that arrived between commands (background jobs), and the
    /// report of an abandoned command if it came meanwhile.
    fn take_backlog(&mut self, sink: &mut dyn FnMut(&[u8])) {
        let backlog = self.reader.begin_command();
        if backlog.dropped_bytes > 0 {
            sink(
                format!(
                    "[... {} earlier bytes of background output were dropped ...]\n",
                    backlog.dropped_bytes
                )
                .as_bytes(),
            );
        }
        for event in backlog.events {
            match event {
                ReaderEvent::Output(bytes) => sink(&bytes),
                ReaderEvent::Prompt(report) if Some(report.seq) == self.pending => {
                    self.pending = None;
                }
                ReaderEvent::Prompt(_) | ReaderEvent::Closed => {}
            }
        }
    }

    /// Gets the shell back to its prompt if an abandoned command may still
    /// be running. `None` when nothing was left over.
    pub fn settle(&mut self, sink: &mut dyn FnMut(&[u8])) -> Option<Run> {
        self.pending?;
        self.take_backlog(sink);
        let Some(leftover) = self.pending else {
            self.reader.end_command();
            return None;
        };
        let watch = Watch {
            until: Instant::now() + CANCEL_GRACE,
            cancel: None,
            detect_input: false,
        };
        let run = match self.await_prompt(leftover, &watch, sink) {
            Awaited::Prompt(report) => Run {
                ending: Ending::Completed,
                report: Some(report),
                exit: None,
            },
            Awaited::Exited(exit) => Run {
                ending: Ending::Completed,
                report: None,
                exit: Some(exit),
            },
            _ => {
                let run = self.stop(leftover, StopCause::Leftover, sink);
                self.pending = None;
                self.absorb_interrupt(leftover, run, sink)
            }
        };
        if run.report.is_some() || run.exit.is_some() {
            self.pending = None;
        }
        self.reader.end_command();
        Some(run)
    }

    /// Runs `command` and waits for it within `context`'s timeout.
    pub fn run(
        &mut self,
        files: &mut SessionFiles,
        command: &str,
        context: &CommandContext,
        sink: &mut dyn FnMut(&[u8]),
    ) -> io::Result<Run> {
        self.take_backlog(sink);
        self.seq += 1;
        let seq = self.seq;
        let typed = files
            .command_line(seq, self.xtrace, command)
            .and_then(|line| {
                // A program may have turned echo back on (and exited
                // normally, so bash kept that state): the line typed next
                // must not be echoed.
                set_terminal_mode(self.pty.terminal().as_fd())?;
                self.pty.terminal().write_all(line.as_bytes())
            });
        let started = Instant::now();
        let limit = context
            .timeout
            .unwrap_or(crate::settings::LIMIT_WITHOUT_TIMEOUT);
        let awaited = match typed {
            Ok(()) => {
                let watch = Watch {
                    until: started + limit,
                    cancel: Some(&context.cancel),
                    detect_input: true,
                };
                self.await_prompt(seq, &watch, sink)
            }
            Err(err) => match self.exited() {
                Some(exit) => Awaited::Exited(exit),
                None => {
                    self.reader.end_command();
                    return Err(err);
                }
            },
        };
        let run = match awaited {
            Awaited::Prompt(report) => Run {
                ending: Ending::Completed,
                report: Some(report),
                exit: None,
            },
            Awaited::Exited(exit) => Run {
                ending: Ending::Completed,
                report: None,
                exit: Some(exit),
            },
            Awaited::Deadline => {
                let cause = StopCause::Timeout {
                    limit,
                    reading: self.input_waiter(),
                };
                let run = self.stop(seq, cause, sink);
                self.absorb_interrupt(seq, run, sink)
            }
            Awaited::WaitingForInput(reader) => {
                let after = started.elapsed();
                let run = self.stop(seq, StopCause::WaitingForInput { reader, after }, sink);
                self.absorb_interrupt(seq, run, sink)
            }
            Awaited::Cancelled => self.stop_after_cancel(seq, sink),
        };
        if run.ending == Ending::Abandoned {
            self.pending = Some(seq);
        }
        if let Some(report) = &run.report {
            self.xtrace = report.flags.contains('x');
        }
        self.reader.end_command();
        Ok(run)
    }

    /// Interrupts the foreground job with the signal ladder until the
    /// prompt for `seq` comes back or the shell ends.
    fn stop(&self, seq: u64, cause: StopCause, sink: &mut dyn FnMut(&[u8])) -> Run {
        let detect_input = matches!(cause, StopCause::WaitingForInput { .. });
        let mut outcome = None;
        let escalation = escalate(
            &DEFAULT_LADDER,
            |signal| self.signal_foreground(signal),
            |grace| {
                let watch = Watch {
                    until: Instant::now() + grace,
                    cancel: None,
                    detect_input,
                };
                match self.await_prompt(seq, &watch, sink) {
                    awaited @ (Awaited::Prompt(_) | Awaited::Exited(_)) => {
                        outcome = Some(awaited);
                        true
                    }
                    // Still running, or back to waiting for input: the next
                    // signal, now.
                    _ => false,
                }
            },
        );
        let (report, exit) = match outcome {
            Some(Awaited::Prompt(report)) => (Some(report), None),
            Some(Awaited::Exited(exit)) => (None, Some(exit)),
            _ => (None, self.exited()),
        };
        Run {
            ending: Ending::Stopped { cause, escalation },
            report,
            exit,
        }
    }

    /// The host is stopping: one SIGINT and a short wait, nothing more.
    fn stop_after_cancel(&self, seq: u64, sink: &mut dyn FnMut(&[u8])) -> Run {
        let delivered = self.signal_foreground(Signal::SIGINT);
        let watch = Watch {
            until: Instant::now() + CANCEL_GRACE,
            cancel: None,
            detect_input: false,
        };
        let escalation = if delivered {
            Escalation::StoppedBy(Signal::SIGINT)
        } else {
            Escalation::AlreadyGone
        };
        let stopped = |report, exit| Run {
            ending: Ending::Stopped {
                cause: StopCause::Cancelled,
                escalation,
            },
            report,
            exit,
        };
        match self.await_prompt(seq, &watch, sink) {
            Awaited::Prompt(report) => stopped(Some(report), None),
            Awaited::Exited(exit) => stopped(None, Some(exit)),
            _ => Run {
                ending: Ending::Abandoned,
                report: None,
                exit: None,
            },
        }
    }

    /// Sends `signal` to the terminal's foreground job, as Ctrl-C does for
    /// SIGINT. A job that ignores SIGINT and dies of a later signal would
    /// let bash go on with the rest of its command list (a loop, `a; b`),
    /// so for the later signals the shell itself gets SIGINT first: bash
    /// then abandons the list when the job ends. (First, so that bash has
    /// taken it before it can see the job end.)
    fn signal_foreground(&self, signal: Signal) -> bool {
        if self.exited().is_some() {
            return false;
        }
        let job = match self.pty.foreground_group() {
            Some(group) if group != self.pty.pid() => group,
            // bash itself is in the foreground (a builtin, a loop).
            _ => return self.pty.signal(signal),
        };
        if signal != Signal::SIGINT && self.pty.signal(Signal::SIGINT) {
            self.interrupted_shell.set(true);
        }
        signal_group(job, signal)
    }

    /// After the shell itself got SIGINT: bash may keep that interrupt
    /// pending and act on it at its next read, throwing away the start of
    /// the next command. An empty line now takes it (either way bash prints
    /// one more prompt), so the next command starts clean.
    fn absorb_interrupt(&mut self, seq: u64, run: Run, sink: &mut dyn FnMut(&[u8])) -> Run {
        if !self.interrupted_shell.replace(false) || run.report.is_none() {
            return run;
        }
        if self.pty.terminal().write_all(b"\n").is_err() {
            return run;
        }
        let watch = Watch {
            until: Instant::now() + CANCEL_GRACE,
            cancel: None,
            detect_input: false,
        };
        match self.await_prompt(seq, &watch, sink) {
            Awaited::Prompt(report) => Run {
                report: Some(report),
                ..run
            },
            Awaited::Exited(exit) => Run {
                report: None,
                exit: Some(exit),
                ..run
            },
            _ => {
                // Not back yet: the next command settles it first.
                self.pending = Some(seq);
                run
            }
        }
    }

    /// The foreground job's process blocked reading the terminal, if any.
    fn input_waiter(&self) -> Option<TerminalReader> {
        let foreground = self.pty.foreground_group()?;
        let members: Vec<i32> = if foreground == self.pty.pid() {
            vec![self.pty.pid()]
        } else {
            process_table()
                .into_iter()
                .filter(|p| p.group == foreground)
                .map(|p| p.pid)
                .collect()
        };
        waiting_for_terminal(&members, &self.terminal_path)
    }

    /// Passes output to `sink` until the prompt report for `seq` arrives or
    /// `watch` says to stop waiting.
    fn await_prompt(&self, seq: u64, watch: &Watch<'_>, sink: &mut dyn FnMut(&[u8])) -> Awaited {
        let mut probe_interval = FIRST_PROBE;
        let mut next_probe = Instant::now() + FIRST_PROBE;
        // Seen waiting for input at the last look, with no output since.
        let mut suspect = false;
        let mut closed = false;
        let mut next_exit_check = Instant::now();
        loop {
            let now = Instant::now();
            let mut wake = watch.until.min(now + POLL_INTERVAL);
            if watch.detect_input {
                wake = wake.min(next_probe);
            }
            let events = if closed {
                thread::sleep(Duration::from_millis(5));
                Vec::new()
            } else {
                self.reader.next_events(wake.saturating_duration_since(now))
            };
            let mut prompt = None;
            for event in events {
                match event {
                    ReaderEvent::Output(bytes) => {
                        suspect = false;
                        sink(&bytes);
                    }
                    ReaderEvent::Prompt(report) if report.seq == seq => prompt = Some(report),
                    ReaderEvent::Prompt(_) => {} // an earlier command's report
                    ReaderEvent::Closed => closed = true,
                }
            }
            if let Some(report) = prompt {
                return Awaited::Prompt(report);
            }
            // A system call: not for every chunk of a flood of output.
            if closed || Instant::now() >= next_exit_check {
                next_exit_check = Instant::now() + POLL_INTERVAL;
                if let Some(exit) = self.exited() {
                    self.collect_final_output(closed, sink);
                    return Awaited::Exited(exit);
                }
            }
            if watch.cancel.is_some_and(CancelFlag::is_cancelled) {
                return Awaited::Cancelled;
            }
            let now = Instant::now();
            if now >= watch.until {
                return Awaited::Deadline;
            }
            if watch.detect_input && now >= next_probe {
                match self.input_waiter() {
                    Some(reader) if suspect => return Awaited::WaitingForInput(reader),
                    Some(_) => suspect = true,
                    None => suspect = false,
                }
                probe_interval = (probe_interval * 3 / 2).min(MAX_PROBE_INTERVAL);
                next_probe = now + probe_interval;
            }
        }
    }

    /// After the shell ended: what it printed last (`exit`, an error).
    fn collect_final_output(&self, mut closed: bool, sink: &mut dyn FnMut(&[u8])) {
        let until = Instant::now() + FINAL_OUTPUT_WAIT;
        while !closed {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            for event in self.reader.next_events(left) {
                match event {
                    ReaderEvent::Output(bytes) => sink(&bytes),
                    ReaderEvent::Closed => closed = true,
                    ReaderEvent::Prompt(_) => {}
                }
            }
        }
    }

    /// Ends the shell and every process of its session: SIGHUP (what a
    /// closing terminal sends), SIGTERM and SIGCONT to each; SIGKILL to what
    /// is left after a grace period. Processes that left the session
    /// (`setsid`) are the reaper's, at host exit.
    pub fn terminate(&mut self) {
        if self.terminated {
            return;
        }
        self.terminated = true;
        for pid in self.pty.session_members() {
            let pid = Pid::from_raw(pid);
            let _ = kill(pid, Signal::SIGHUP);
            let _ = kill(pid, Signal::SIGTERM);
            let _ = kill(pid, Signal::SIGCONT);
        }
        let gone = |limit: Duration| {
            let deadline = Instant::now() + limit;
            loop {
                let _ = self.exited();
                if self.pty.session_members().is_empty() {
                    return true;
                }
                if Instant::now() >= deadline {
                    return false;
                }
                thread::sleep(Duration::from_millis(10));
            }
        };
        if !gone(SESSION_GRACE) {
            for pid in self.pty.session_members() {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            gone(SESSION_GRACE);
        }
        // Collect the shell's own exit status so it leaves no zombie.
        let deadline = Instant::now() + SESSION_GRACE;
        while self.exited().is_none() && Instant::now() < deadline {
            let _ = self.pty.signal(Signal::SIGKILL);
            thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Shell {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// Echo off (the host's typing must not show up as output), line editing
/// and signals on.
fn set_terminal_mode(terminal: BorrowedFd<'_>) -> io::Result<()> {
    let mut mode = termios::tcgetattr(terminal).map_err(io::Error::from)?;
    let echo = LocalFlags::ECHO | LocalFlags::ECHONL;
    let wanted = LocalFlags::ICANON | LocalFlags::ISIG;
    if !mode.local_flags.intersects(echo) && mode.local_flags.contains(wanted) {
        return Ok(());
    }
    mode.local_flags.remove(echo);
    mode.local_flags.insert(wanted);
    termios::tcsetattr(terminal, SetArg::TCSANOW, &mode).map_err(io::Error::from)
}
