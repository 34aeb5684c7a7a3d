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
//! and everything it printed before is in once the report's fence has come
//! through the terminal ([`super::marker`]). If the shell's output goes
//! through a pipe (`exec > >(tee log)`), the host also waits, for a bounded
//! time, until that pipe is empty and the terminal quiet
//! ([`super::streams`]).
//!
//! While it waits, the shell is watched: past the timeout, or once the
//! foreground job is seen blocked reading the terminal twice in a row
//! ([`envhost_process::input_wait`]), the foreground job is interrupted with
//! the [`crate::process::interrupt`] ladder (SIGINT, SIGTERM, SIGKILL) until
//! the prompt comes back. Each signal goes to the terminal's foreground
//! process group, with a SIGINT to the shell itself so that it drops the
//! rest of a command list. What is left of an interrupted job (children that
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
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::sys::termios::{self, LocalFlags, SetArg};
use nix::unistd::Pid;

use super::marker::PromptReport;
use super::reader::{PtyReader, ReaderEvent, Refusal, ReportPlace, ReportSocket};
use super::setup::SessionFiles;
use super::streams::{PipeWatch, StreamKind, stream_kind};
use envhost_core::{CancelFlag, CommandContext};
use envhost_process::{DEFAULT_LADDER, Escalation, escalate, signal_group};
use envhost_process::{
    Exit, OpenError, PassedFd, ProgramSpec, Pty, PtyProgram, SpawnError, TerminalSize,
};
use envhost_process::{TerminalReader, process_info, process_table, waiting_for_terminal};

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
/// After the report, how long its fence may take to come through the
/// terminal (normally microseconds; a bound, not a delay).
const FENCE_WAIT: Duration = Duration::from_secs(2);
/// When the shell's output goes through a pipe: once the pipe is empty and
/// its readers wait for more, the terminal must have been quiet this long
/// (for what they wrote last to come through it) for the output to be in...
const PIPE_QUIET: Duration = Duration::from_millis(20);
/// ... and the host waits at most this long after the report. Output that
/// comes later is shown with the next command's, said to be late.
const PIPE_WAIT: Duration = Duration::from_secs(1);
/// Before a command, how long the shell may take to get from its report to
/// the end of its prompt code (microseconds; a bound, not a delay).
const IDLE_WAIT: Duration = Duration::from_millis(20);
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
            SpawnError::NoProcessId => "bash started without a process id".into(),
        })
    }
}

/// Shown before output that arrived between two commands.
const LATE_OUTPUT_HEADER: &str = "[envhost] Output that arrived after the previous command ended (from background jobs, or through a redirection such as exec > >(tee log)):\n";
/// Shown after it, before the command's own output.
const OWN_OUTPUT_HEADER: &str = "[envhost] This command's output:\n";

/// A report for the awaited command has arrived; what remains before its
/// output is known to be complete.
struct Reported<'a> {
    report: PromptReport,
    at: Instant,
    /// Its fence has come through the terminal.
    fenced: bool,
    /// The shell's standard output and error, when they are pipes.
    stdout: Option<PipeWatch>,
    stderr: Option<&'a PipeWatch>,
}

/// Whether the awaited command's output is all in.
enum Settled {
    Yes,
    No,
    /// Its output goes through a pipe that was still busy at the bound.
    PipeStillDelivering,
}

impl Reported<'_> {
    fn through_pipes(&self) -> bool {
        self.stdout.is_some() || self.stderr.is_some()
    }

    fn settled(&self, now: Instant, last_output: Instant) -> Settled {
        if !self.fenced && now < self.at + FENCE_WAIT {
            return Settled::No;
        }
        if !self.through_pipes() {
            return Settled::Yes;
        }
        let quiet = now.saturating_duration_since(last_output.max(self.at)) >= PIPE_QUIET;
        let drained = self.stdout.as_ref().is_none_or(PipeWatch::drained)
            && self.stderr.is_none_or(PipeWatch::drained);
        if quiet && drained {
            Settled::Yes
        } else if now >= self.at + PIPE_WAIT {
            Settled::PipeStillDelivering
        } else {
            Settled::No
        }
    }

    /// When to look again if nothing arrives.
    fn next_look(&self, now: Instant, last_output: Instant) -> Instant {
        if !self.fenced {
            return self.at + FENCE_WAIT;
        }
        let quiet_at = last_output.max(self.at) + PIPE_QUIET;
        quiet_at
            .max(now + Duration::from_millis(5))
            .min(self.at + PIPE_WAIT)
    }
}

/// What a wait ended on.
enum Awaited {
    Prompt(PromptReport),
    Exited(Exit),
    Deadline,
    Cancelled,
    WaitingForInput(TerminalReader),
    ChannelLost,
}

/// Where the shell holds its end of the report socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChannelState {
    /// At its number: the shell is between commands.
    AtPlace,
    /// Only at another number: bash's copy aside while a command runs.
    Aside,
    /// Nowhere: it can no longer report.
    Missing,
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
    /// Where the shell must hold its report socket.
    place: ReportPlace,
    /// Every holder of the shell's end of the socket has closed it.
    channel_closed: Cell<bool>,
    /// Process groups of jobs interrupted during the current command.
    interrupted_jobs: RefCell<Vec<i32>>,
    /// Sentences for the current command's response.
    notes: RefCell<Vec<String>>,
    /// The shell's standard error is a pipe (checked before each command).
    stderr_pipe: Option<PipeWatch>,
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
            xtrace: false,
            interrupted_shell: Cell::new(false),
            place,
            channel_closed: Cell::new(false),
            interrupted_jobs: RefCell::new(Vec::new()),
            notes: RefCell::new(Vec::new()),
            stderr_pipe: None,
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
            Awaited::Deadline | Awaited::WaitingForInput(_) | Awaited::ChannelLost => {
                Err(StartError::NoPrompt {
                    limit: STARTUP_LIMIT,
                    output: printed(),
                })
            }
        }
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
                ReaderEvent::Refused(refusal) => self.refused(&refusal),
                ReaderEvent::ReportsClosed => self.channel_closed.set(true),
                ReaderEvent::Prompt(_) | ReaderEvent::Fence(_) | ReaderEvent::Closed => {}
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
        let watch = Watch {
            until: Instant::now() + CANCEL_GRACE,
            cancel: None,
            detect_input: false,
        };
        let run = match self.await_prompt(leftover, &watch, sink) {
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

    /// Runs `command` and waits for it within `context`'s timeout.
    pub fn run(
        &mut self,
        files: &mut SessionFiles,
        command: &str,
        context: &CommandContext,
        sink: &mut dyn FnMut(&[u8]),
    ) -> io::Result<Run> {
        self.take_backlog(sink);
        let repair_stderr = self.check_stderr();
        self.seq += 1;
        let seq = self.seq;
        let typed = files
            .command_line(seq, self.xtrace, repair_stderr, command)
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
            Awaited::Prompt(report) => Run::new(Ending::Completed, Some(report), None),
            Awaited::Exited(exit) => Run::new(Ending::Completed, None, Some(exit)),
            Awaited::ChannelLost => Run::new(Ending::ChannelLost, None, None),
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
        let run = self.finish_run(run);
        self.reader.end_command();
        Ok(run)
    }

    /// Ends what is left of interrupted jobs and hands over the notes.
    fn finish_run(&self, mut run: Run) -> Run {
        let jobs = std::mem::take(&mut *self.interrupted_jobs.borrow_mut());
        if run.exit.is_none() && run.ending != Ending::Abandoned {
            let ended = end_leftover_jobs(&jobs);
            if ended > 0 {
                self.note(format!(
                    "{ended} process{} of the interrupted command kept running (they ignore SIGINT, e.g. background children of a script); {} ended.",
                    if ended == 1 { "" } else { "es" },
                    if ended == 1 { "it was" } else { "they were" }
                ));
            }
        }
        if let Some(report) = &run.report {
            let notes = &report.notes;
            if notes.stdin_reconnected {
                self.note("The command pointed the shell's standard input away from the terminal (e.g. exec 0</dev/null); the shell reads its commands from there, so it was reconnected to the terminal.");
            }
            if notes.stdout_reopened {
                self.note("The command closed the shell's standard output (e.g. exec 1>&-); it was reopened on the terminal, so later commands print again.");
            }
            if notes.terminal_reopened {
                self.note("The command closed the descriptor the shell writes its prompt marks to; it was reopened.");
            }
        }
        run.notes.append(&mut self.notes.borrow_mut());
        run
    }

    /// Records a sentence for the current command's response (once).
    fn note(&self, sentence: impl Into<String>) {
        let sentence = sentence.into();
        let mut notes = self.notes.borrow_mut();
        if !notes.contains(&sentence) {
            notes.push(sentence);
        }
    }

    fn refused(&self, refusal: &Refusal) {
        let why = match refusal {
            Refusal::ForeignSender { pid } => format!(
                "a process other than the shell (pid {pid}) wrote to the shell's report socket"
            ),
            Refusal::OutOfPlace => {
                "the shell wrote a report from inside the running command".to_owned()
            }
            Refusal::Garbled => {
                "the shell's report socket carried something that is not a report".to_owned()
            }
        };
        self.note(format!(
            "Ignored a report of this command's end: {why}. Only the shell's own prompt, after the command, can end it."
        ));
    }

    /// Before a command: is the shell's standard error closed (repair it
    /// first) or a pipe (wait for it at the end)? Its prompt code cannot
    /// tell, since the plumbing's own redirection hides it there.
    fn check_stderr(&mut self) -> bool {
        let shell = self.pty.pid();
        self.stderr_pipe = None;
        // Just after a report the shell may still be inside the plumbing,
        // whose standard error goes to /dev/zero (a sink nothing else
        // uses) for its duration: look once it is out.
        // Microseconds when it is: yielding, not sleeping, keeps the round
        // trip short.
        let deadline = Instant::now() + IDLE_WAIT;
        while in_plumbing(shell) && Instant::now() < deadline {
            thread::yield_now();
        }
        match stream_kind(shell, 2) {
            StreamKind::Closed => {
                self.note("The previous command closed the shell's standard error (e.g. exec 2>&-); it was reopened on the terminal before this command.");
                true
            }
            StreamKind::Pipe => {
                let mut watch = PipeWatch::default();
                watch.add(shell, 2);
                self.stderr_pipe = Some(watch);
                false
            }
            StreamKind::Other => false,
        }
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
        let ending = Ending::Stopped {
            cause: StopCause::Cancelled,
            escalation,
        };
        match self.await_prompt(seq, &watch, sink) {
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

    /// Where the shell holds its end of the report socket.
    fn channel_state(&self) -> ChannelState {
        if self.channel_closed.get() {
            return ChannelState::Missing;
        }
        let target = format!("socket:[{}]", self.place.inode);
        let Ok(entries) = std::fs::read_dir(format!("/proc/{}/fd", self.place.shell)) else {
            return ChannelState::Missing;
        };
        let mut state = ChannelState::Missing;
        for entry in entries.filter_map(Result::ok) {
            if std::fs::read_link(entry.path()).is_ok_and(|t| t.as_os_str() == target.as_str()) {
                if entry.file_name().to_str() == Some(&self.place.fd.to_string()) {
                    return ChannelState::AtPlace;
                }
                state = ChannelState::Aside;
            }
        }
        state
    }

    /// The shell itself reads the terminal: a `read` in the command, or the
    /// shell back at its prompt without having reported (its socket gone).
    fn shell_reading_without_channel(&self, reader: &TerminalReader) -> bool {
        reader.pid == self.pty.pid() && self.channel_state() != ChannelState::Aside
    }

    /// A stopped shell (SIGSTOP, from the command or outside) cannot get
    /// back to its prompt: continue it, and say so.
    fn continue_if_stopped(&self) {
        if process_info(self.pty.pid()).is_some_and(|p| p.state == 'T') {
            let _ = kill(Pid::from_raw(self.pty.pid()), Signal::SIGCONT);
            self.note("The shell itself was stopped (SIGSTOP); it was continued with SIGCONT.");
        }
    }

    /// Passes output to `sink` until the prompt report for `seq` arrives
    /// (with everything printed before it) or `watch` says to stop waiting.
    fn await_prompt(&self, seq: u64, watch: &Watch<'_>, sink: &mut dyn FnMut(&[u8])) -> Awaited {
        let mut probe_interval = FIRST_PROBE;
        let mut next_probe = Instant::now() + FIRST_PROBE;
        // Seen waiting for input at the last look, with no output since.
        let mut suspect = false;
        let mut closed = false;
        let mut next_exit_check = Instant::now();
        let mut fences: Vec<String> = Vec::new();
        let mut reported: Option<Reported> = None;
        let mut last_output = Instant::now();
        loop {
            let now = Instant::now();
            let mut wake = watch.until.min(now + POLL_INTERVAL);
            if watch.detect_input {
                wake = wake.min(next_probe);
            }
            if let Some(reported) = &reported {
                wake = reported.next_look(now, last_output);
            }
            let events = if closed {
                thread::sleep(Duration::from_millis(5));
                Vec::new()
            } else {
                self.reader.next_events(wake.saturating_duration_since(now))
            };
            for event in events {
                match event {
                    ReaderEvent::Output(bytes) => {
                        suspect = false;
                        last_output = Instant::now();
                        sink(&bytes);
                    }
                    ReaderEvent::Fence(fence) => {
                        if let Some(reported) = &mut reported {
                            reported.fenced |= reported.report.fence == fence;
                        } else {
                            fences.push(fence);
                        }
                    }
                    ReaderEvent::Prompt(report) if report.seq == seq && reported.is_none() => {
                        reported = Some(self.reported(report, &fences));
                    }
                    ReaderEvent::Prompt(_) => {} // an earlier command's report
                    ReaderEvent::Refused(refusal) => self.refused(&refusal),
                    ReaderEvent::ReportsClosed => self.channel_closed.set(true),
                    ReaderEvent::Closed => closed = true,
                }
            }
            if let Some(done) = &reported {
                match done.settled(Instant::now(), last_output) {
                    Settled::Yes => return Awaited::Prompt(done.report.clone()),
                    Settled::PipeStillDelivering => {
                        self.note(format!(
                            "The shell's output goes through a pipe (e.g. exec > >(tee log)) that was still delivering {} after the command ended; what comes later is shown with the next command's output, marked as late.",
                            envhost_core::text::duration(PIPE_WAIT)
                        ));
                        return Awaited::Prompt(done.report.clone());
                    }
                    Settled::No => continue,
                }
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
            if (watch.detect_input || self.channel_closed.get()) && now >= next_probe {
                self.continue_if_stopped();
                match self.input_waiter() {
                    Some(reader) if self.shell_reading_without_channel(&reader) => {
                        return Awaited::ChannelLost;
                    }
                    Some(reader) if suspect && watch.detect_input => {
                        return Awaited::WaitingForInput(reader);
                    }
                    Some(_) => suspect = true,
                    None => suspect = false,
                }
                probe_interval = (probe_interval * 3 / 2).min(MAX_PROBE_INTERVAL);
                next_probe = now + probe_interval;
            }
        }
    }

    /// A report for the awaited command arrived: what is still to come.
    fn reported(&self, report: PromptReport, fences: &[String]) -> Reported<'_> {
        let stdout = report.notes.stdout_is_pipe.then(|| {
            let mut watch = PipeWatch::default();
            watch.add(self.pty.pid(), 1);
            watch
        });
        Reported {
            fenced: fences.contains(&report.fence),
            report,
            at: Instant::now(),
            stdout,
            stderr: self.stderr_pipe.as_ref(),
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
                    _ => {}
                }
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

/// Whether `shell` runs its prompt code, whose standard error goes to the
/// sink set up for it, `/dev/zero` (see [`super::setup`]).
fn in_plumbing(shell: i32) -> bool {
    std::fs::read_link(format!("/proc/{shell}/fd/2"))
        .is_ok_and(|target| target.as_os_str() == super::setup::PLUMBING_SINK)
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
