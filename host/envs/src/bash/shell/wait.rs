//! Waiting for a command's end: the state machine that reads the shell's
//! terminal and report socket until the prompt report for a command has
//! come with everything printed before it, or something else ends the wait
//! (the shell ending, a deadline, a cancellation, an interruption, a job
//! waiting for input, a lost report socket).
//!
//! The state ([`WaitState`]) outlives one wait, so a command can be waited
//! for in pieces: in the host's own thread until it yields, then by the
//! thread that collects a yielded command's output ([`Waiter`]). Reading
//! is the reader's ([`crate::bash::reader`]), which passes a report on only after
//! everything the terminal held before it; this module decides when the
//! output is all in (at the report, and for output through a pipe, once
//! the pipe is drained) and
//! watches the shell while it waits. It does not interrupt anything.

use std::cell::{Cell, RefCell};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::bash::marker::{PromptReport, UNKNOWN_SEQ};
use crate::bash::reader::{PtyReader, ReaderEvent, Refusal, ReportPlace};
use crate::bash::setup::PLUMBING_SINK;
use crate::bash::streams::PipeWatch;
use envhost_core::CancelFlag;
use envhost_process::{
    Exit, PtyProgram, TerminalReader, process_info, process_table, waiting_for_terminal,
};

/// How often a wait looks at the shell's life and the cancel flag.
pub(super) const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// When the first look for a job waiting on input happens; later looks are
/// spaced out up to [`MAX_PROBE_INTERVAL`], so long builds are barely
/// disturbed.
pub(super) const FIRST_PROBE: Duration = Duration::from_millis(100);
pub(super) const MAX_PROBE_INTERVAL: Duration = Duration::from_secs(1);
/// After the shell ends, how long to collect its last output.
pub(super) const FINAL_OUTPUT_WAIT: Duration = Duration::from_millis(100);
/// When the shell's output goes through a pipe: once the pipe is empty and
/// its readers wait for more, the terminal must have been quiet this long
/// (for what they wrote last to come through it) for the output to be in...
pub(super) const PIPE_QUIET: Duration = Duration::from_millis(20);
/// ... and the host waits at most this long after the report. Output that
/// comes later is shown with the next command's, said to be late.
pub(super) const PIPE_WAIT: Duration = Duration::from_secs(1);
/// After a report, how long the shell may take to leave its prompt code
/// (microseconds; a bound, not a delay).
const PLUMBING_WAIT: Duration = Duration::from_millis(20);
/// Looks at a shell still in its prompt code that only yield the core,
/// before the host sleeps between looks.
const YIELDS_BEFORE_SLEEPING: u32 = 3;
/// The pause between later looks.
const PLUMBING_LOOK_INTERVAL: Duration = Duration::from_micros(20);
/// A report for the awaited command has arrived; what remains before its
/// output is known to be complete.
pub(super) struct Reported {
    pub(super) report: PromptReport,
    pub(super) at: Instant,
    /// The shell's standard output and standard error, those that are
    /// pipes.
    pub(super) pipes: Option<PipeWatch>,
}
/// Whether the awaited command's output is all in.
pub(super) enum Settled {
    Yes,
    No,
    /// Its output goes through a pipe that was still busy at the bound.
    PipeStillDelivering,
}
impl Reported {
    pub(super) fn settled(&self, now: Instant, last_output: Instant) -> Settled {
        let Some(pipes) = &self.pipes else {
            return Settled::Yes;
        };
        let quiet = now.saturating_duration_since(last_output.max(self.at)) >= PIPE_QUIET;
        let drained = pipes.drained();
        if quiet && drained {
            Settled::Yes
        } else if now >= self.at + PIPE_WAIT {
            Settled::PipeStillDelivering
        } else {
            Settled::No
        }
    }

    /// When to look again if nothing arrives.
    pub(super) fn next_look(&self, now: Instant, last_output: Instant) -> Instant {
        let quiet_at = last_output.max(self.at) + PIPE_QUIET;
        quiet_at
            .max(now + Duration::from_millis(5))
            .min(self.at + PIPE_WAIT)
    }
}
/// What a wait ended on.
pub(super) enum Awaited {
    Prompt(PromptReport),
    Exited(Exit),
    Deadline,
    Cancelled,
    WaitingForInput(TerminalReader),
    ChannelLost,
    Interrupted,
    Abandoned,
}
/// Where the shell holds its end of the report socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ChannelState {
    /// At its number: the shell is between commands.
    AtPlace,
    /// Only at another number: bash's copy aside while a command runs.
    Aside,
    /// Nowhere: it can no longer report.
    Missing,
}
pub(super) struct Watch<'a> {
    pub(super) until: Instant,
    pub(super) cancel: Option<&'a CancelFlag>,
    /// Set when the agent asks to interrupt the command.
    pub(super) interrupt: Option<&'a CancelFlag>,
    /// Set when the command is to be left as it is (the shell is about to
    /// be ended).
    pub(super) abandon: Option<&'a CancelFlag>,
    pub(super) input: InputWatch<'a>,
}
impl<'a> Watch<'a> {
    /// Until `until`, nothing else watched.
    pub(super) fn until(until: Instant) -> Watch<'a> {
        Watch {
            until,
            cancel: None,
            interrupt: None,
            abandon: None,
            input: InputWatch::Off,
        }
    }
}
/// What to do about a foreground job seen waiting for terminal input.
#[derive(Clone, Copy)]
pub(super) enum InputWatch<'a> {
    /// Nothing (not looked for).
    Off,
    /// End the wait ([`Awaited::WaitingForInput`]).
    Stop,
    /// Say so in the flag (and clear it when it is no longer so) and go on
    /// waiting: a yielded command, whose agent can answer it.
    Flag(&'a AtomicBool),
}
impl InputWatch<'_> {
    pub(super) fn on(&self) -> bool {
        !matches!(self, InputWatch::Off)
    }
}
/// What the agent's side asks of a command that may outlive the wait,
/// shared with whoever waits for it.
#[derive(Default)]
pub struct Controls {
    /// Interrupt it with the ladder.
    pub interrupt: CancelFlag,
    /// Stop waiting for it at once: the shell is being ended.
    pub abandon: CancelFlag,
    /// Its foreground job looks blocked reading the terminal.
    pub waiting_for_input: AtomicBool,
}
/// One command between the line typed for it and its end: its number,
/// limit, and the state of the wait for it, kept between two waits so that
/// a command can be waited for in pieces (in the host's own thread until
/// it yields, then by the thread that collects its output).
pub struct Waiter {
    pub(super) seq: u64,
    pub(super) started: Instant,
    pub(super) limit: Duration,
    pub(super) deadline: Instant,
    pub(super) state: WaitState,
}
impl Waiter {
    /// When the command started.
    pub fn started(&self) -> Instant {
        self.started
    }
}
/// The state of one wait for a prompt report.
pub(super) struct WaitState {
    pub(super) seq: u64,
    pub(super) probe_interval: Duration,
    pub(super) next_probe: Instant,
    /// Seen waiting for input at the last look, with no output since.
    pub(super) suspect: bool,
    pub(super) closed: bool,
    pub(super) next_exit_check: Instant,
    pub(super) reported: Option<Reported>,
    pub(super) last_output: Instant,
}
impl WaitState {
    pub(super) fn new(seq: u64) -> WaitState {
        let now = Instant::now();
        WaitState {
            seq,
            probe_interval: FIRST_PROBE,
            next_probe: now + FIRST_PROBE,
            suspect: false,
            closed: false,
            next_exit_check: now,
            reported: None,
            last_output: now,
        }
    }
}

/// What a wait looks at: the shell's terminal and report socket, its
/// process, and where the sentences for the response go.
pub(super) struct Watched<'a> {
    pub(super) reader: &'a PtyReader,
    pub(super) pty: &'a PtyProgram,
    pub(super) terminal_path: &'a Path,
    pub(super) place: ReportPlace,
    /// Every holder of the shell's end of the socket has closed it.
    pub(super) channel_closed: &'a Cell<bool>,
    /// What the shell's standard output and error were when last looked at.
    pub(super) streams: &'a Streams,
    pub(super) notes: &'a Notes,
}

/// Whether the shell's standard output and error are pipes, as the shell
/// last found them. Only a command that could change the shell makes it
/// look (see `setup`): until the next look the answer stands, and every
/// command's output through such a pipe is waited for.
#[derive(Default)]
pub(super) struct Streams {
    stdout_pipe: Cell<bool>,
    stderr_pipe: Cell<bool>,
}

/// Sentences of the host's for the current command's response, each once.
#[derive(Default)]
pub(super) struct Notes(RefCell<Vec<String>>);

impl Notes {
    pub(super) fn add(&self, sentence: impl Into<String>) {
        let sentence = sentence.into();
        let mut notes = self.0.borrow_mut();
        if !notes.contains(&sentence) {
            notes.push(sentence);
        }
    }

    /// A report that was not taken, said in the response.
    pub(super) fn refused(&self, refusal: &Refusal) {
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
        self.add(format!(
            "Ignored a report of this command's end: {why}. Only the shell's own prompt, after the command, can end it."
        ));
    }

    pub(super) fn take(&self) -> Vec<String> {
        std::mem::take(&mut self.0.borrow_mut())
    }
}

impl Watched<'_> {
    /// The foreground job's process blocked reading the terminal, if any.
    pub(super) fn input_waiter(&self) -> Option<TerminalReader> {
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
        waiting_for_terminal(&members, self.terminal_path)
    }

    /// Where the shell holds its end of the report socket.
    pub(super) fn channel_state(&self) -> ChannelState {
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
    pub(super) fn shell_reading_without_channel(&self, reader: &TerminalReader) -> bool {
        reader.pid == self.pty.pid() && self.channel_state() != ChannelState::Aside
    }

    /// A stopped shell (SIGSTOP, from the command or outside) cannot get
    /// back to its prompt: continue it, and say so.
    pub(super) fn continue_if_stopped(&self) {
        if process_info(self.pty.pid()).is_some_and(|p| p.state == 'T') {
            let _ = kill(Pid::from_raw(self.pty.pid()), Signal::SIGCONT);
            self.notes
                .add("The shell itself was stopped (SIGSTOP); it was continued with SIGCONT.");
        }
    }

    /// Passes output to `sink` until the prompt report for `seq` arrives
    /// (with everything printed before it) or `watch` says to stop waiting.
    pub(super) fn await_prompt(
        &self,
        seq: u64,
        watch: &Watch<'_>,
        sink: &mut dyn FnMut(&[u8]),
    ) -> Awaited {
        self.await_with(&mut WaitState::new(seq), watch, sink)
    }

    /// [`await_prompt`](Shell::await_prompt), going on from `state`.
    pub(super) fn await_with(
        &self,
        state: &mut WaitState,
        watch: &Watch<'_>,
        sink: &mut dyn FnMut(&[u8]),
    ) -> Awaited {
        loop {
            let now = Instant::now();
            let mut wake = watch.until.min(now + POLL_INTERVAL);
            if watch.input.on() {
                wake = wake.min(state.next_probe);
            }
            if let Some(reported) = &state.reported {
                wake = reported.next_look(now, state.last_output);
            }
            let events = if state.closed {
                thread::sleep(Duration::from_millis(5));
                Vec::new()
            } else {
                self.reader.next_events(wake.saturating_duration_since(now))
            };
            for event in events {
                self.take_event(event, state, watch, sink);
            }
            if let Some(done) = &state.reported {
                match done.settled(Instant::now(), state.last_output) {
                    Settled::Yes => return Awaited::Prompt(done.report.clone()),
                    Settled::PipeStillDelivering => {
                        self.notes.add(format!(
                            "The shell's output goes through a pipe (e.g. exec > >(tee log)) that was still delivering {} after the command ended; what comes later is shown with the next command's output, marked as late.",
                            envhost_core::text::duration(PIPE_WAIT)
                        ));
                        return Awaited::Prompt(done.report.clone());
                    }
                    Settled::No => continue,
                }
            }
            // A system call: not for every chunk of a flood of output.
            if state.closed || Instant::now() >= state.next_exit_check {
                state.next_exit_check = Instant::now() + POLL_INTERVAL;
                if let Some(exit) = self.pty.exit() {
                    self.collect_final_output(state.closed, sink);
                    return Awaited::Exited(exit);
                }
            }
            if watch.abandon.is_some_and(CancelFlag::is_cancelled) {
                return Awaited::Abandoned;
            }
            if watch.cancel.is_some_and(CancelFlag::is_cancelled) {
                return Awaited::Cancelled;
            }
            if watch.interrupt.is_some_and(CancelFlag::is_cancelled) {
                return Awaited::Interrupted;
            }
            let now = Instant::now();
            if now >= watch.until {
                return Awaited::Deadline;
            }
            if (watch.input.on() || self.channel_closed.get())
                && now >= state.next_probe
                && let Some(awaited) = self.probe_input(state, watch, now)
            {
                if matches!(awaited, Awaited::ChannelLost)
                    && self.reported_meanwhile(state, watch, sink)
                {
                    continue;
                }
                return awaited;
            }
        }
    }

    /// Whether the report came after all, read now: a shell seen reading
    /// its terminal with its report socket in place may have reported just
    /// before it went back to reading (its report then waits in the socket;
    /// a shell continued after SIGSTOP does this), which is not a lost
    /// socket.
    fn reported_meanwhile(
        &self,
        state: &mut WaitState,
        watch: &Watch<'_>,
        sink: &mut dyn FnMut(&[u8]),
    ) -> bool {
        loop {
            let events = self.reader.next_events(Duration::ZERO);
            if events.is_empty() {
                return state.reported.is_some();
            }
            for event in events {
                self.take_event(event, state, watch, sink);
            }
        }
    }

    /// One event of the reader while a command is awaited.
    fn take_event(
        &self,
        event: ReaderEvent,
        state: &mut WaitState,
        watch: &Watch<'_>,
        sink: &mut dyn FnMut(&[u8]),
    ) {
        match event {
            ReaderEvent::Output(bytes) => {
                state.suspect = false;
                if let InputWatch::Flag(flag) = watch.input {
                    flag.store(false, Ordering::SeqCst);
                }
                state.last_output = Instant::now();
                sink(&bytes);
            }
            // Every report comes from the shell's own prompt (the
            // reader refuses any other), and the one command line
            // typed since the last prompt is this one: its number
            // can only differ if the command changed the shell's
            // copy of it (`__envhost_seq`, or `__envhost_load`
            // called by hand). The report still ends this command.
            ReaderEvent::Prompt(report) if state.reported.is_none() => {
                if report.seq != state.seq {
                    self.notes.add(format!(
                        "The command changed the number the shell reports its commands by (__envhost_seq, {}); its end was taken from the shell's own report all the same.",
                        if report.seq == UNKNOWN_SEQ { "to something not a number".to_owned() } else { format!("to {}", report.seq) }
                    ));
                }
                state.reported = Some(self.reported(report));
            }
            ReaderEvent::Prompt(_) => {} // a second prompt (after Ctrl-C)
            ReaderEvent::Refused(refusal) => self.notes.refused(&refusal),
            ReaderEvent::ReportsClosed => self.channel_closed.set(true),
            ReaderEvent::Closed => state.closed = true,
        }
    }

    /// Whether the shell waits for input the agent should give (or reads
    /// without its channel); probed less often the longer it runs.
    fn probe_input(
        &self,
        state: &mut WaitState,
        watch: &Watch<'_>,
        now: Instant,
    ) -> Option<Awaited> {
        self.continue_if_stopped();
        let waiting = self.input_waiter();
        match (&waiting, watch.input) {
            (Some(reader), _) if self.shell_reading_without_channel(reader) => {
                return Some(Awaited::ChannelLost);
            }
            (Some(reader), InputWatch::Stop) if state.suspect => {
                return Some(Awaited::WaitingForInput(reader.clone()));
            }
            (Some(_), InputWatch::Flag(flag)) if state.suspect => {
                flag.store(true, Ordering::SeqCst);
            }
            (Some(_), _) => state.suspect = true,
            (None, InputWatch::Flag(flag)) => {
                state.suspect = false;
                flag.store(false, Ordering::SeqCst);
            }
            (None, _) => state.suspect = false,
        }
        state.probe_interval = (state.probe_interval * 3 / 2).min(MAX_PROBE_INTERVAL);
        state.next_probe = now + state.probe_interval;
        None
    }

    /// A report for the awaited command arrived: what is still to come.
    pub(super) fn reported(&self, report: PromptReport) -> Reported {
        let notes = &report.notes;
        let streams = self.streams;
        if notes.looked_at_output {
            streams.stdout_pipe.set(notes.stdout_is_pipe);
        }
        if notes.looked_at_stderr {
            streams.stderr_pipe.set(notes.stderr_is_pipe);
        }
        let (stdout_pipe, stderr_pipe) = (streams.stdout_pipe.get(), streams.stderr_pipe.get());
        let pipes = (stdout_pipe || stderr_pipe).then(|| {
            self.wait_out_of_prompt_code();
            let mut watch = PipeWatch::default();
            if stdout_pipe {
                watch.add(self.pty.pid(), 1);
            }
            if stderr_pipe {
                watch.add(self.pty.pid(), 2);
            }
            watch
        });
        Reported {
            report,
            at: Instant::now(),
            pipes,
        }
    }

    /// Waits (at most [`PLUMBING_WAIT`]) until the shell has left the
    /// prompt code that wrote its report, where its standard output is the
    /// report socket and its standard error the sink: its streams are then
    /// the ones the commands write to, and can be opened to be watched.
    /// Only when one of them is a pipe: after most commands nothing looks.
    fn wait_out_of_prompt_code(&self) {
        let shell = self.pty.pid();
        let socket = format!("socket:[{}]", self.place.inode);
        let deadline = Instant::now() + PLUMBING_WAIT;
        let mut looks = 0;
        loop {
            let points_to = |fd: i32| std::fs::read_link(format!("/proc/{shell}/fd/{fd}"));
            let inside = points_to(1).is_ok_and(|target| target.as_os_str() == socket.as_str())
                || points_to(2).is_ok_and(|target| target.as_os_str() == PLUMBING_SINK);
            if !inside || Instant::now() >= deadline {
                return;
            }
            looks += 1;
            if looks <= YIELDS_BEFORE_SLEEPING {
                thread::yield_now();
            } else {
                thread::sleep(PLUMBING_LOOK_INTERVAL);
            }
        }
    }

    /// After the shell ended: what it printed last (`exit`, an error).
    pub(super) fn collect_final_output(&self, mut closed: bool, sink: &mut dyn FnMut(&[u8])) {
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
}
