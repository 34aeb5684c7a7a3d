//! One running bash in a pseudo-terminal, and the commands it runs.
//!
//! [`Shell`] starts `bash --noprofile --norc --noediting -i` in a fresh PTY
//! ([`envhost_process::Pty`]): its own session and cgroup, the PTY as its
//! controlling terminal, echo off, and one end of a private socket at a
//! fixed descriptor number. No rc file runs, not even a system-wide one; the
//! host types a line that sources the session's set-up script instead. A
//! short fixed line typed into the terminal makes the shell `eval` the
//! command with that socket closed ([`super::setup`]); the command is done
//! when the shell itself reports on the socket with the command's number,
//! and everything it printed before is in once the terminal has been read
//! dry after the report ([`super::marker`]). If the shell's output goes
//! through a pipe (`exec > >(tee log)`), the host also waits, for a bounded
//! time, until that pipe is empty and the terminal quiet
//! ([`super::streams`]).
//!
//! A command is begun ([`Shell::begin`]) and then waited for
//! ([`Shell::proceed`]), in one go or in pieces: a command that may outlive
//! the wait stops being waited for at its yield point and is picked up
//! again later, from another thread if need be ([`wait`] keeps the state
//! of the wait between the pieces). While it waits, the shell is watched:
//! past the timeout, when the agent asks, or once the foreground job is
//! seen blocked reading the terminal twice in a row (unless the command has
//! yielded and the agent can answer it), the foreground job is interrupted
//! with the ladder (SIGINT, SIGTERM, SIGKILL) until the prompt comes back.
//! Each signal goes to the terminal's foreground process group, with a
//! SIGINT to the shell itself so that it drops the rest of a command list. What is left of an interrupted job (children that
//! ignore SIGINT) is ended with its process group once the prompt is back.
//! If the shell dies instead, its exit status is reported; if it can no
//! longer report (a command closed the socket), it is seen back at its
//! prompt and reported as such. Dropping a `Shell` ends everything it
//! started: its session, and its cgroup with what left the session.
//!
//! This module knows nothing of responses, screens or restarts: it runs
//! what it is given and reports what happened.

use std::cell::{Cell, RefCell};
use std::ffi::OsString;
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::sys::termios::{self, LocalFlags, SetArg};
use nix::unistd::Pid;

mod wait;

use self::wait::{Awaited, InputWatch, Notes, Streams, WaitState, Watch, Watched};
pub use self::wait::{Controls, Waiter};
use super::marker::PromptReport;
use super::reader::{PtyReader, ReaderEvent, ReportPlace, ReportSocket};
use super::setup::{SessionFiles, TypedMark};
use envhost_core::{CancelFlag, CommandContext, text};
use envhost_process::{DEFAULT_LADDER, Escalation, escalate, signal_group};
use envhost_process::{
    Exit, OpenError, PassedFd, ProgramSpec, Pty, PtyProgram, SpawnError, TerminalSize,
};
use envhost_process::{TerminalReader, process_info, process_table};

/// Terminal size. Programs lay out tables and progress bars to the width;
/// 120 columns keeps lines readable without wrapping most tables.
pub const ROWS: u16 = 40;
pub const COLUMNS: u16 = 120;

/// How long bash may take to show its first prompt.
const STARTUP_LIMIT: Duration = Duration::from_secs(10);
/// After a cancel, how long the interrupted command may take to finish.
const CANCEL_GRACE: Duration = Duration::from_secs(1);
/// Grace between SIGTERM/SIGHUP and SIGKILL when ending the session.
const SESSION_GRACE: Duration = Duration::from_secs(1);
/// Grace between SIGTERM and SIGKILL for what is left of an interrupted
/// job once the shell is back at its prompt.
const LEFTOVER_GRACE: Duration = Duration::from_millis(500);

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
    /// The agent asked (`interrupt`).
    Interrupted,
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
    /// The shell came back to its prompt without its report socket (a
    /// command closed it): it can no longer say when a command ends.
    ChannelLost,
}

/// The result of [`Shell::run`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub ending: Ending,
    /// The shell is back at its prompt and reported this.
    pub report: Option<PromptReport>,
    /// The shell ended.
    pub exit: Option<Exit>,
    /// What the host noticed on the way, in sentences (refused reports,
    /// repairs, output that may come late).
    pub notes: Vec<String>,
}

impl Run {
    fn new(ending: Ending, report: Option<PromptReport>, exit: Option<Exit>) -> Run {
        Run {
            ending,
            report,
            exit,
            notes: Vec::new(),
        }
    }

    /// Neither back at the prompt nor ended: the shell must be replaced
    /// (unless the command was only abandoned).
    pub fn wedged(&self) -> bool {
        self.report.is_none()
            && self.exit.is_none()
            && !matches!(self.ending, Ending::Abandoned | Ending::ChannelLost)
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
            SpawnError::NotStarted { .. } => format!(
                "{err}. Install bash or make it reachable through the PATH envhost runs with"
            ),
        })
    }
}

/// Shown before output that arrived between two commands.
const LATE_OUTPUT_HEADER: &str = "[envhost] Output that arrived after the previous command ended (from background jobs, or through a redirection such as exec > >(tee log)):\n";
/// Shown after it, before the command's own output.
const OWN_OUTPUT_HEADER: &str = "[envhost] This command's output:\n";

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
    /// The shell itself got SIGINT during an interruption.
    interrupted_shell: Cell<bool>,
    /// Where the shell must hold its report socket.
    place: ReportPlace,
    /// Every holder of the shell's end of the socket has closed it.
    channel_closed: Cell<bool>,
    streams: Streams,
    /// Process groups of jobs interrupted during the current command.
    interrupted_jobs: RefCell<Vec<i32>>,
    /// Sentences for the current command's response.
    notes: Notes,
    /// Set before text is typed into a running command.
    typed: TypedMark,
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
        let (host_end, shell_end) =
            report_socket().map_err(io_error("creating the shell's report socket"))?;
        let inode = std::fs::File::from(
            shell_end
                .try_clone()
                .map_err(io_error("creating the shell's report socket"))?,
        )
        .metadata()
        .map_err(io_error("creating the shell's report socket"))?
        .ino();
        let pty = pty.spawn_with(
            ProgramSpec {
                program: "bash".into(),
                args: ["--noprofile", "--norc", "--noediting", "-i"]
                    .map(OsString::from)
                    .to_vec(),
                cwd: cwd.to_owned(),
                environment,
            },
            vec![PassedFd {
                fd: shell_end,
                at: files.report_fd(),
            }],
        )?;
        let terminal_path = pty.tty_path().unwrap_or_default();
        let place = ReportPlace {
            shell: pty.pid(),
            fd: files.report_fd(),
            inode,
        };
        let reader = PtyReader::start(reader_fd, ReportSocket::new(host_end, place))
            .map_err(io_error("starting the terminal reader"))?;
        let shell = Shell {
            pty,
            terminal_path,
            reader,
            seq: 0,
            pending: None,
            interrupted_shell: Cell::new(false),
            place,
            channel_closed: Cell::new(false),
            streams: Streams::default(),
            interrupted_jobs: RefCell::new(Vec::new()),
            notes: Notes::default(),
            typed: files.typed_mark(),
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
            cancel: Some(cancel),
            ..Watch::until(Instant::now() + STARTUP_LIMIT)
        };
        let awaited = shell
            .watched()
            .await_prompt(0, &watch, &mut |bytes| output.extend_from_slice(bytes));
        shell.reader.end_command();
        sink(&output);
        let printed = || envhost_process::TerminalText::clean(&output);
        match awaited {
            Awaited::Prompt(report) => Ok((shell, report)),
            Awaited::Exited(exit) => Err(StartError::ExitedAtStart {
                exit,
                output: printed(),
            }),
            Awaited::Cancelled | Awaited::Interrupted | Awaited::Abandoned => {
                Err(StartError::Cancelled)
            }
            Awaited::Deadline | Awaited::WaitingForInput(_) | Awaited::ChannelLost => {
                Err(StartError::NoPrompt {
                    limit: STARTUP_LIMIT,
                    output: printed(),
                })
            }
        }
    }

    /// Another descriptor of the terminal's master side, for typing into a
    /// running command.
    pub fn terminal_copy(&self) -> io::Result<std::fs::File> {
        self.pty.terminal().try_clone()
    }

    /// What must be set before text is typed with that copy.
    pub fn typed_mark(&self) -> TypedMark {
        self.typed.clone()
    }

    /// What a wait for a prompt report looks at.
    fn watched(&self) -> Watched<'_> {
        Watched {
            reader: &self.reader,
            pty: &self.pty,
            terminal_path: &self.terminal_path,
            place: self.place,
            channel_closed: &self.channel_closed,
            streams: &self.streams,
            notes: &self.notes,
        }
    }

    /// The shell's pid, in the host's numbering.
    pub fn pid(&self) -> i32 {
        self.pty.pid()
    }

    /// How the shell ended, if it has.
    pub fn exited(&self) -> Option<Exit> {
        self.pty.exit()
    }

    /// Output that arrived between commands (background jobs, a redirection
    /// through a pipe that delivered late), marked as such, and the report
    /// of an abandoned command if it came meanwhile.
    fn take_backlog(&mut self, sink: &mut dyn FnMut(&[u8])) {
        let backlog = self.reader.begin_command();
        let mut announced = false;
        let mut announce = |sink: &mut dyn FnMut(&[u8])| {
            if !announced {
                announced = true;
                sink(LATE_OUTPUT_HEADER.as_bytes());
            }
        };
        if backlog.dropped_bytes > 0 {
            announce(sink);
            sink(
                format!(
                    "[... {} earlier bytes of it were dropped ...]\n",
                    backlog.dropped_bytes
                )
                .as_bytes(),
            );
        }
        for event in backlog.events {
            match event {
                ReaderEvent::Output(bytes) => {
                    announce(sink);
                    sink(&bytes);
                }
                ReaderEvent::Prompt(report) if Some(report.seq) == self.pending => {
                    self.pending = None;
                }
                ReaderEvent::Refused(refusal) => self.notes.refused(&refusal),
                ReaderEvent::ReportsClosed => self.channel_closed.set(true),
                ReaderEvent::Prompt(_) | ReaderEvent::Closed => {}
            }
        }
        if announced {
            sink(b"\n");
            sink(OWN_OUTPUT_HEADER.as_bytes());
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
        let watch = Watch::until(Instant::now() + CANCEL_GRACE);
        let run = match self.watched().await_prompt(leftover, &watch, sink) {
            Awaited::Prompt(report) => Run::new(Ending::Completed, Some(report), None),
            Awaited::Exited(exit) => Run::new(Ending::Completed, None, Some(exit)),
            Awaited::ChannelLost => Run::new(Ending::ChannelLost, None, None),
            _ => {
                let run = self.stop(leftover, StopCause::Leftover, sink);
                self.pending = None;
                self.absorb_interrupt(leftover, run, sink)
            }
        };
        if run.report.is_some() || run.exit.is_some() {
            self.pending = None;
        }
        let run = self.finish_run(run);
        self.reader.end_command();
        Some(run)
    }

    /// Types `command` for the shell to run (after handing `sink` what came
    /// since the last command) and returns what waits for its end. Its
    /// limit is `context`'s timeout (none: a day).
    pub fn begin(
        &mut self,
        files: &mut SessionFiles,
        command: &str,
        context: &CommandContext,
        sink: &mut dyn FnMut(&[u8]),
    ) -> io::Result<Waiter> {
        self.take_backlog(sink);
        self.seq += 1;
        let seq = self.seq;
        let typed = files.command_line(seq, command).and_then(|line| {
            // A program may have turned echo back on (and exited
            // normally, so bash kept that state): the line typed next
            // must not be echoed.
            set_terminal_mode(self.pty.terminal().as_fd())?;
            // The kill character first: it erases a partial line typed
            // with `input` that the last command never read, which
            // would otherwise be glued to the front of this one.
            let mut typed = Vec::with_capacity(line.len() + 1);
            typed.push(KILL_CHARACTER);
            typed.extend_from_slice(line.as_bytes());
            self.pty.terminal().write_all(&typed)
        });
        if let Err(err) = typed
            && self.exited().is_none()
        {
            self.reader.end_command();
            return Err(err);
        }
        let started = Instant::now();
        let limit = context
            .timeout
            .unwrap_or(crate::settings::LIMIT_WITHOUT_TIMEOUT);
        Ok(Waiter {
            seq,
            started,
            limit,
            deadline: started
                .checked_add(limit)
                .unwrap_or(started + crate::settings::LIMIT_WITHOUT_TIMEOUT),
            state: WaitState::new(seq),
        })
    }

    /// Waits for the command `waiter` waits for: until it ends (`Some`, the
    /// shell back at its prompt or ended), or until `yield_at` (`None`, the
    /// command still running; [`Controls::waiting_for_input`] says whether
    /// it looks blocked on input). Without `yield_at` it waits to the end:
    /// past the command's limit, or when `controls` ask, it is interrupted
    /// with the ladder; a command waiting for terminal input is stopped,
    /// or, with `yield_at`, yields at once for the agent to answer it.
    pub fn proceed(
        &mut self,
        waiter: &mut Waiter,
        yield_at: Option<Instant>,
        cancel: &CancelFlag,
        controls: &Controls,
        sink: &mut dyn FnMut(&[u8]),
    ) -> Option<Run> {
        self.proceed_watching(waiter, yield_at, cancel, controls, false, sink)
    }

    /// [`proceed`](Shell::proceed) for a command that has yielded: input
    /// waits are only flagged, never stopped.
    pub fn proceed_yielded(
        &mut self,
        waiter: &mut Waiter,
        yield_at: Option<Instant>,
        cancel: &CancelFlag,
        controls: &Controls,
        sink: &mut dyn FnMut(&[u8]),
    ) -> Option<Run> {
        self.proceed_watching(waiter, yield_at, cancel, controls, true, sink)
    }

    fn proceed_watching(
        &mut self,
        waiter: &mut Waiter,
        yield_at: Option<Instant>,
        cancel: &CancelFlag,
        controls: &Controls,
        yielded: bool,
        sink: &mut dyn FnMut(&[u8]),
    ) -> Option<Run> {
        let seq = waiter.seq;
        let until = yield_at.map_or(waiter.deadline, |at| at.min(waiter.deadline));
        let input = match (yield_at, yielded) {
            (_, true) => InputWatch::Flag(&controls.waiting_for_input),
            // Yielding: an input wait ends this wait (the command yields at
            // once, for the agent to answer it).
            (Some(_), false) => InputWatch::Stop,
            (None, false) => InputWatch::Stop,
        };
        let watch = Watch {
            until,
            cancel: Some(cancel),
            interrupt: Some(&controls.interrupt),
            abandon: Some(&controls.abandon),
            input,
        };
        let awaited = self.watched().await_with(&mut waiter.state, &watch, sink);
        let run = match awaited {
            Awaited::Prompt(report) => Run::new(Ending::Completed, Some(report), None),
            Awaited::Exited(exit) => Run::new(Ending::Completed, None, Some(exit)),
            Awaited::ChannelLost => Run::new(Ending::ChannelLost, None, None),
            Awaited::Deadline if Instant::now() < waiter.deadline => return None,
            Awaited::WaitingForInput(_) if yield_at.is_some() => {
                controls.waiting_for_input.store(true, Ordering::SeqCst);
                return None;
            }
            Awaited::Abandoned => return None,
            Awaited::Deadline => {
                let cause = StopCause::Timeout {
                    limit: waiter.limit,
                    reading: self.watched().input_waiter(),
                };
                let run = self.stop(seq, cause, sink);
                self.absorb_interrupt(seq, run, sink)
            }
            Awaited::WaitingForInput(reader) => {
                let after = waiter.started.elapsed();
                let run = self.stop(seq, StopCause::WaitingForInput { reader, after }, sink);
                self.absorb_interrupt(seq, run, sink)
            }
            Awaited::Interrupted => {
                let run = self.stop(seq, StopCause::Interrupted, sink);
                self.absorb_interrupt(seq, run, sink)
            }
            Awaited::Cancelled => self.stop_after_cancel(seq, sink),
        };
        if run.ending == Ending::Abandoned {
            self.pending = Some(seq);
        }
        let run = self.finish_run(run);
        self.reader.end_command();
        Some(run)
    }

    /// Ends what is left of interrupted jobs and hands over the notes.
    fn finish_run(&self, mut run: Run) -> Run {
        let jobs = std::mem::take(&mut *self.interrupted_jobs.borrow_mut());
        if run.exit.is_none() && run.ending != Ending::Abandoned {
            let ended = end_leftover_jobs(&jobs);
            if ended > 0 {
                self.notes.add(format!(
                    "{} of the interrupted command kept running (they ignore SIGINT, e.g. background children of a script); {} ended.",
                    text::counted(ended, "process"),
                    if ended == 1 { "it was" } else { "they were" }
                ));
            }
        }
        if let Some(report) = &run.report {
            let notes = &report.notes;
            if notes.stdin_reconnected {
                self.notes.add("The command pointed the shell's standard input away from the terminal (e.g. exec 0</dev/null); the shell reads its commands from there, so it was reconnected to the terminal.");
            }
            if notes.stdout_reopened {
                self.notes.add("The command closed the shell's standard output (e.g. exec 1>&-); it was reopened on the terminal, so later commands print again.");
            }
            if notes.stderr_reopened {
                self.notes.add("The previous command closed the shell's standard error (e.g. exec 2>&-); it was reopened on the terminal before this command.");
            }
            if notes.typed_discarded {
                self.notes.add("Text typed with input that the command did not read was discarded when it ended, so the shell did not run it as commands.");
            }
        }
        run.notes.append(&mut self.notes.take());
        run
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
                    input: if detect_input {
                        InputWatch::Stop
                    } else {
                        InputWatch::Off
                    },
                    ..Watch::until(Instant::now() + grace)
                };
                match self.watched().await_prompt(seq, &watch, sink) {
                    awaited @ (Awaited::Prompt(_) | Awaited::Exited(_) | Awaited::ChannelLost) => {
                        outcome = Some(awaited);
                        true
                    }
                    // Still running, or back to waiting for input: the next
                    // signal, now.
                    _ => false,
                }
            },
        );
        let ending = Ending::Stopped { cause, escalation };
        match outcome {
            Some(Awaited::Prompt(report)) => Run::new(ending, Some(report), None),
            Some(Awaited::Exited(exit)) => Run::new(ending, None, Some(exit)),
            Some(Awaited::ChannelLost) => Run::new(Ending::ChannelLost, None, None),
            _ => Run::new(ending, None, self.exited()),
        }
    }

    /// The host is stopping: one SIGINT and a short wait, nothing more.
    fn stop_after_cancel(&self, seq: u64, sink: &mut dyn FnMut(&[u8])) -> Run {
        let delivered = self.signal_foreground(Signal::SIGINT);
        let watch = Watch::until(Instant::now() + CANCEL_GRACE);
        let escalation = if delivered {
            Escalation::StoppedBy(Signal::SIGINT)
        } else {
            Escalation::AlreadyGone
        };
        let ending = Ending::Stopped {
            cause: StopCause::Cancelled,
            escalation,
        };
        match self.watched().await_prompt(seq, &watch, sink) {
            Awaited::Prompt(report) => Run::new(ending, Some(report), None),
            Awaited::Exited(exit) => Run::new(ending, None, Some(exit)),
            Awaited::ChannelLost => Run::new(Ending::ChannelLost, None, None),
            _ => Run::new(Ending::Abandoned, None, None),
        }
    }

    /// Sends `signal` to the terminal's foreground job, as Ctrl-C does for
    /// SIGINT. A job that ignores SIGINT and dies of a later signal would
    /// let bash go on with the rest of its command list (a loop, `a; b`),
    /// so for the later signals the shell itself gets SIGINT first: bash
    /// then abandons the list when the job ends. (First, so that bash has
    /// taken it before it can see the job end.) The job's group is
    /// remembered, to end what is left of it once the prompt is back.
    fn signal_foreground(&self, signal: Signal) -> bool {
        if self.exited().is_some() {
            return false;
        }
        let job = match self.pty.foreground_group() {
            Some(group) if group != self.pty.pid() => group,
            // bash itself is in the foreground (a builtin, a loop).
            _ => return self.pty.signal(signal),
        };
        {
            let mut jobs = self.interrupted_jobs.borrow_mut();
            if !jobs.contains(&job) {
                jobs.push(job);
            }
        }
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
        let watch = Watch::until(Instant::now() + CANCEL_GRACE);
        match self.watched().await_prompt(seq, &watch, sink) {
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

    /// Ends the shell and everything it started: SIGHUP (what a closing
    /// terminal sends), SIGTERM and SIGCONT to each process of its session
    /// and of its cgroup (processes that left the session with `setsid`);
    /// after a grace period SIGKILL to the session and `cgroup.kill` to the
    /// cgroup. Without cgroups, processes that left the session are the
    /// reaper's, at host exit.
    pub fn terminate(&mut self) {
        if self.terminated {
            return;
        }
        self.terminated = true;
        let enclosure = self.pty.enclosure();
        let mut everyone = self.pty.session_members();
        everyone.extend(enclosure.members());
        for pid in everyone {
            let pid = Pid::from_raw(pid);
            let _ = kill(pid, Signal::SIGHUP);
            let _ = kill(pid, Signal::SIGTERM);
            let _ = kill(pid, Signal::SIGCONT);
        }
        let gone = |limit: Duration| {
            let deadline = Instant::now() + limit;
            loop {
                let _ = self.exited();
                if self.pty.session_members().is_empty()
                    && enclosure.members().iter().all(|&pid| {
                        process_info(pid).is_none_or(|p| p.state == 'Z' || p.state == 'X')
                    })
                {
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
            enclosure.kill();
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

/// The report socket: the host's end, with the sender's credentials
/// attached to every message, and the shell's end.
fn report_socket() -> io::Result<(UnixStream, OwnedFd)> {
    let (host, shell) = UnixStream::pair()?;
    nix::sys::socket::setsockopt(&host, nix::sys::socket::sockopt::PassCred, &true)?;
    host.set_nonblocking(true)?;
    Ok((host, OwnedFd::from(shell)))
}

/// Ends what is left of interrupted jobs: their process groups get SIGTERM
/// (and SIGCONT), then SIGKILL after [`LEFTOVER_GRACE`]. Returns how many
/// processes were left.
fn end_leftover_jobs(groups: &[i32]) -> usize {
    let members = |group: i32| -> Vec<i32> {
        process_table()
            .into_iter()
            .filter(|p| p.group == group && p.state != 'Z' && p.state != 'X')
            .map(|p| p.pid)
            .collect()
    };
    let mut left = 0;
    for &group in groups {
        let count = members(group).len();
        if count == 0 {
            continue;
        }
        left += count;
        signal_group(group, Signal::SIGTERM);
        signal_group(group, Signal::SIGCONT);
        let deadline = Instant::now() + LEFTOVER_GRACE;
        while !members(group).is_empty() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        if !members(group).is_empty() {
            signal_group(group, Signal::SIGKILL);
        }
    }
    left
}

/// Ctrl-U, the terminal's kill character ("erase the line typed so far").
const KILL_CHARACTER: u8 = 0x15;

/// Echo off (the host's typing must not show up as output), line editing
/// and signals on, and Ctrl-U as the kill character.
fn set_terminal_mode(terminal: BorrowedFd<'_>) -> io::Result<()> {
    let mut mode = termios::tcgetattr(terminal).map_err(io::Error::from)?;
    let echo = LocalFlags::ECHO | LocalFlags::ECHONL;
    let wanted = LocalFlags::ICANON | LocalFlags::ISIG;
    let kill = termios::SpecialCharacterIndices::VKILL as usize;
    if !mode.local_flags.intersects(echo)
        && mode.local_flags.contains(wanted)
        && mode.control_chars[kill] == KILL_CHARACTER
    {
        return Ok(());
    }
    mode.local_flags.remove(echo);
    mode.local_flags.insert(wanted);
    mode.control_chars[kill] = KILL_CHARACTER;
    termios::tcsetattr(terminal, SetArg::TCSANOW, &mode).map_err(io::Error::from)
}
