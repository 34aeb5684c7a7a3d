//! The python environment: a persistent Python REPL whose screen shows the
//! working directory and the variables, most recently used first.
//!
//! One `python3` child runs a driver shipped inside the binary
//! ([`process`], talking through [`channel`]); its namespace, imports and
//! working directory persist from command to command. This module owns what
//! the agent sees: the lifecycle (unused → running → ended or restarted), a
//! command's way from its request to its last answer (answered at once, or
//! yielding and answered again by `wait` and `input` until it ends or is
//! interrupted; [`command`] keeps its output between answers), what a
//! timeout, a stop, an exit or a crash means and how the response says it,
//! and the screen, built from what the driver reported with the last
//! command, so drawing it never talks to python. Variable ordering lives in
//! [`variables`].
//!
//! It must not know about the protocol or other environments, nor read
//! pipes or send signals itself (that is `process`).

mod channel;
mod command;
mod figures;
mod kept;
mod process;
mod variables;

use std::path::PathBuf;

use nix::sys::signal::Signal;
use std::time::{Duration, Instant};

use crate::settings::Settings;
use envhost_core::text;
use envhost_core::{
    CancelFlag, CommandContext, CommandResponse, Environment, EnvironmentError, Incident,
    RunningCommand, ScreenSection, Usage,
};
use envhost_process::{
    CommandOutput, DEFAULT_LADDER, Escalation, OutputLimits, escalate, signal_group,
};

use channel::Done;
use command::Command;
use figures::Figures;
use process::{Ending, Interpreter, Launch, StartError, TalkError, Wait, is_stopped};
use variables::{MAX_SHOWN, RecentVariables, Variable};

pub use process::{NoInterpreter, find_interpreter};

/// The one-line help under every form of the section.
const HELP: &str = "Any Python code. Variables and imports persist across commands.";

/// The section before the first command (minimal until used).
const READY: &str = "Python REPL (ready)";

/// What a new interpreter has lost, for responses and events.
const LOST: &str = "variables and imports";

/// How often a long wait looks whether the interpreter was stopped.
const STOP_CHECK: Duration = Duration::from_secs(1);

/// How long an interruption waits to hand the driver its `sync` request.
const SYNC_SEND_LIMIT: Duration = Duration::from_millis(200);

/// How long an interruption waits for the `sync` answer that follows the
/// interrupted code's `done` (the driver is idle then: it answers at once).
const SYNC_ANSWER_LIMIT: Duration = Duration::from_millis(500);

/// What the response says when the driver's channel is gone.
const CHANNEL_LOST: &str = "The code closed the descriptors envhost talks to python through (or \
     reused their numbers), so envhost can no longer tell when code finishes.";

/// How often a command that says it waits for input is looked at in
/// `/proc`, and for how long, before the claim is dropped.
const INPUT_CHECK: Duration = Duration::from_millis(10);
const INPUT_HINT_LIMIT: Duration = Duration::from_millis(500);

/// How long `wait` and `input` wait when the context does not say (the
/// orchestrator always does).
const DEFAULT_WAIT: Duration = Duration::from_secs(10);
const DEFAULT_INPUT_WAIT: Duration = Duration::from_secs(1);

/// How long a command without a limit may take to be handed to the driver.
const SEND_LIMIT: Duration = Duration::from_secs(60);

/// Variable names a restart lists as lost before "and N more".
const LOST_NAMES_SHOWN: usize = 10;

/// Longest command quoted on one line.
const QUOTED_CHARS: usize = 60;

/// The answer to `wait`, `input` or `interrupt` with nothing running (the
/// orchestrator words its own refusal before it gets here).
const NOTHING_RUNNING: &str = "Nothing is running in python.";

/// How long an interpreter may take to start (the pyenv shim alone can take
/// a tenth of a second; a cold disk much more). Not part of the command's
/// own timeout.
const STARTUP_LIMIT: Duration = Duration::from_secs(30);

/// Room for the working directory, up to [`MAX_SHOWN`] variables, the
/// "more" line, the latest figures and the help.
const MAX_LINES: usize = MAX_SHOWN + 8 + figures::SHOWN + 2;

/// Variables set for the interpreter on top of the host's (filtered) ones:
/// no pager may wait for a keypress nobody can give.
const EXTRA_VARIABLES: [(&str, &str); 2] = [("PAGER", "cat"), ("GIT_PAGER", "cat")];

/// Variables removed: they would change how the driver's interpreter runs
/// (PYTHONINSPECT would start an interactive prompt on exit).
const REMOVED_VARIABLES: [&str; 1] = ["PYTHONINSPECT"];

enum State {
    /// Nothing has run yet; no interpreter was started.
    Unused,
    Running(Box<Interpreter>),
    /// The interpreter ended (exit, crash); `how` says how. The next
    /// command starts a fresh one and says so.
    Ended {
        how: String,
    },
    /// Starting an interpreter failed; the next command tries again.
    StartFailed {
        message: String,
    },
}

/// Why an interpreter was not started, as the agent reads it.
#[derive(Debug, thiserror::Error)]
enum NotStarted {
    #[error("{0}")]
    NoInterpreter(NoInterpreter),
    /// It ended before it was ready (the message ends with a full stop).
    #[error("{0} Its output is above.")]
    EndedEarly(String),
    #[error("{0}")]
    Failed(String),
}

/// The python environment: one persistent interpreter, its variables on
/// the screen.
pub struct PythonEnvironment {
    /// How to start python, or why it cannot be.
    launch: Result<Launch, NoInterpreter>,
    project_dir: PathBuf,
    output_limits: OutputLimits,
    /// Names the files its long outputs are saved in: `python`, or
    /// `python-NAME` for the instance `python:NAME`.
    output_label: String,
    state: State,
    variables: RecentVariables,
    /// `os.getcwd()` as of the last command.
    cwd: String,
    /// The command between its request and its last answer (it yielded,
    /// or is being answered).
    busy: Option<Command>,
    /// The latest figures saved, for the screen.
    figures: Figures,
    /// Where the driver keeps its state, when the session is recorded.
    kept: Option<kept::StateFile>,
}

impl PythonEnvironment {
    /// The instance `python:NAME` (named in its saved output files).
    pub fn instance(config: &Settings, name: &str) -> Self {
        PythonEnvironment {
            output_label: format!("python-{name}"),
            ..PythonEnvironment::new(config)
        }
    }

    /// A python environment; the interpreter starts with the first command.
    pub fn new(config: &Settings) -> Self {
        // Without its private folder the session keeps no python state (the
        // resumed answer then says python starts fresh).
        let kept = config
            .session_state
            .then(kept::StateFile::create)
            .and_then(Result::ok);
        let launch = find_interpreter(config.python.as_deref()).map(|program| {
            let mut environment = config.secrets.filtered_environment();
            environment.retain(|(name, _)| {
                !REMOVED_VARIABLES.iter().any(|r| name == r)
                    && !EXTRA_VARIABLES.iter().any(|(extra, _)| name == extra)
            });
            environment.extend(
                EXTRA_VARIABLES
                    .iter()
                    .map(|(name, value)| ((*name).into(), (*value).into())),
            );
            if let Some(kept) = &kept {
                environment.push(("ENVHOST_STATE_FILE".into(), kept.path().into()));
            }
            Launch {
                program,
                working_dir: config.project_dir.clone(),
                environment,
            }
        });
        PythonEnvironment {
            launch,
            project_dir: config.project_dir.clone(),
            output_limits: config.output.clone(),
            output_label: "python".to_owned(),
            state: State::Unused,
            variables: RecentVariables::new(),
            cwd: config.project_dir.display().to_string(),
            busy: None,
            figures: Figures::default(),
            kept,
        }
    }

    /// One line for the "environment loaded" event.
    pub fn describe(&self) -> String {
        match &self.launch {
            Ok(launch) => format!("runs {}", launch.program.display()),
            Err(reason) => format!("unavailable: {reason}"),
        }
    }

    /// Notices an interpreter that ended between commands (a background
    /// thread called `os._exit`, the OOM killer...). One `waitpid`, no
    /// talking to python. A command still running finds out itself, so
    /// that its answer says it.
    fn notice_end(&mut self) {
        if self.busy.is_none()
            && let State::Running(interpreter) = &mut self.state
            && let Some(ending) = interpreter.ended_by_itself()
        {
            self.forget(ending);
        }
    }

    /// Ends the running interpreter, if any, and forgets it.
    fn kill(&mut self) -> Ending {
        let ending = match &mut self.state {
            State::Running(interpreter) => interpreter.kill(),
            _ => Ending { status: None },
        };
        self.forget(ending);
        ending
    }

    fn forget(&mut self, ending: Ending) {
        self.state = State::Ended {
            how: ending.describe(),
        };
        self.reset_view();
    }

    fn reset_view(&mut self) {
        if let Some(kept) = &mut self.kept {
            kept.forget();
        }
        self.variables.clear();
        self.cwd = self.project_dir.display().to_string();
    }

    /// Starts an interpreter into `self.state`; on failure the state says
    /// why and so does the returned message.
    fn start(&mut self, command: &mut Command, cancel: &CancelFlag) -> Result<(), NotStarted> {
        self.reset_view();
        let launch = match &self.launch {
            Ok(launch) => launch,
            Err(reason) => return Err(NotStarted::NoInterpreter(reason.clone())),
        };
        match Interpreter::start(launch, STARTUP_LIMIT, cancel, &mut |b| command.feed(b)) {
            Ok(interpreter) => {
                self.state = State::Running(Box::new(interpreter));
                Ok(())
            }
            Err(err) => {
                let message = format!("{err}.");
                self.state = State::StartFailed {
                    message: message.clone(),
                };
                Err(match err {
                    StartError::EndedEarly { .. } => NotStarted::EndedEarly(message),
                    _ => NotStarted::Failed(message),
                })
            }
        }
    }

    fn absorb(&mut self, command: &str, done: Done) {
        if done.kept
            && let Some(kept) = self.kept.as_mut()
        {
            kept.written();
        }
        self.cwd = done.cwd;
        let namespace = done
            .variables
            .into_iter()
            .map(|(name, type_name)| Variable { name, type_name })
            .collect();
        self.variables.update(command, namespace);
    }

    /// Waits for the running command until `answer_by` (`None`: until it
    /// ends or reaches its limit) and answers: with its output so far and
    /// `running`, or with the end of it. A wait is cut into slices: between
    /// them an interpreter found stopped (SIGSTOP: it can run nothing, not
    /// even a signal handler) is continued and the answer says so, and a
    /// command that says it waits for input is checked in `/proc` and, if
    /// it really does, answered at once.
    fn drive(&mut self, answer_by: Option<Instant>, cancel: &CancelFlag) -> CommandResponse {
        let mut hint_since: Option<Instant> = None;
        loop {
            let (State::Running(interpreter), Some(command)) = (&mut self.state, &mut self.busy)
            else {
                return self.conclude_without_interpreter();
            };
            let now = Instant::now();
            if command.deadline.is_some_and(|deadline| now >= deadline) {
                let limit = command.limit.unwrap_or_default();
                return self.conclude_interrupted(Interruption::Timeout(limit), cancel);
            }
            let mut until = now + STOP_CHECK;
            for bound in [answer_by, command.deadline].into_iter().flatten() {
                until = until.min(bound);
            }
            if hint_since.is_some() {
                until = until.min(now + INPUT_CHECK);
            }
            match interpreter.wait(until, Some(cancel), &mut |b| command.feed(b)) {
                Ok(Wait::Done(done)) => return self.conclude_done(done),
                Ok(Wait::InputWanted) => {
                    if interpreter.reads_input() {
                        command.wants_input = true;
                        return self.answer_running();
                    }
                    hint_since = Some(now);
                }
                Ok(Wait::Deadline) => {
                    let now = Instant::now();
                    if let Some(since) = hint_since {
                        if interpreter.reads_input() {
                            command.wants_input = true;
                            return self.answer_running();
                        }
                        if now.duration_since(since) > INPUT_HINT_LIMIT {
                            hint_since = None;
                        }
                    }
                    if answer_by.is_some_and(|t| now >= t) {
                        interpreter.collect_stray_output(&mut |b| command.feed(b));
                        command.wants_input = interpreter.reads_input();
                        return self.answer_running();
                    }
                    // Near its deadline the interruption continues it,
                    // after its signal (see `interrupt_ladder`).
                    if command
                        .deadline
                        .is_none_or(|deadline| now + STOP_CHECK < deadline)
                    {
                        continue_if_stopped(interpreter, command.output());
                    }
                }
                Ok(Wait::Cancelled) => {
                    return self.conclude_interrupted(Interruption::Cancelled, cancel);
                }
                Ok(Wait::Ended(ending)) => return self.conclude_ended(ending),
                Ok(Wait::ChannelLost) => return self.conclude_lost(),
                // Only an interruption sends a sync; answered here, the
                // request never reached the driver.
                Ok(Wait::Synced) => return self.conclude_never_reached("Python"),
                Err(err) => return self.conclude_broken(&err),
            }
        }
    }

    /// The answer that leaves the running command running.
    fn answer_running(&mut self) -> CommandResponse {
        let Some(command) = self.busy.as_mut() else {
            return CommandResponse::failure(NOTHING_RUNNING);
        };
        if let State::Running(interpreter) = &mut self.state
            && let Some(sentence) = interpreter.take_tampering().sentence()
        {
            command.output().after(sentence);
        }
        command.answer_running()
    }

    /// The last answer of the running command, with what the driver set
    /// aside.
    fn conclude(&mut self, mut command: Command, success: bool) -> CommandResponse {
        if let State::Running(interpreter) = &mut self.state
            && let Some(sentence) = interpreter.take_tampering().sentence()
        {
            command.output().after(sentence);
        }
        command.answer_final(success)
    }

    fn conclude_done(&mut self, done: Done) -> CommandResponse {
        let Some(mut command) = self.busy.take() else {
            return CommandResponse::failure(NOTHING_RUNNING);
        };
        let success = done.succeeded();
        let figures = self.figures.take(&self.project_dir, &done.figures);
        for figure in &figures {
            command.output().after(figure.sentence());
        }
        self.absorb(&command.text, done);
        let mut response = self.conclude(command, success);
        response
            .files
            .extend(figures.into_iter().map(|figure| figure.path));
        response
    }

    fn conclude_ended(&mut self, ending: Ending) -> CommandResponse {
        let Some(mut command) = self.busy.take() else {
            return CommandResponse::failure(NOTHING_RUNNING);
        };
        command.output().after(format!(
            "[Python {}. Its {LOST} are gone; the next command starts a fresh interpreter.]",
            ending.describe()
        ));
        self.forget(ending);
        self.conclude(command, ending.exit_code() == Some(0))
    }

    fn conclude_lost(&mut self) -> CommandResponse {
        let Some(mut command) = self.busy.take() else {
            return CommandResponse::failure(NOTHING_RUNNING);
        };
        let ending = self.kill();
        command.output().after(format!(
            "[{CHANNEL_LOST} The interpreter was ended ({}); its {LOST} are lost. The next \
             command starts a fresh interpreter.]",
            ending.describe()
        ));
        self.conclude(command, false)
    }

    fn conclude_broken(&mut self, err: &TalkError) -> CommandResponse {
        let Some(mut command) = self.busy.take() else {
            return CommandResponse::failure(NOTHING_RUNNING);
        };
        let ending = self.kill();
        command.output().after(format!(
            "[Python stopped answering properly ({err}) and was ended ({}). Its {LOST} are gone; \
             the next command starts a fresh interpreter.]",
            ending.describe()
        ));
        self.conclude(command, false)
    }

    fn conclude_never_reached(&mut self, cause: &str) -> CommandResponse {
        let Some(mut command) = self.busy.take() else {
            return CommandResponse::failure(NOTHING_RUNNING);
        };
        command.output().after(format!(
            "[{cause}: the code never reached python: something in the interpreter read or \
             garbled the request on the driver's request channel, so nothing ran. Variables and \
             imports are kept.]"
        ));
        self.conclude(command, false)
    }

    fn conclude_without_interpreter(&mut self) -> CommandResponse {
        let Some(mut command) = self.busy.take() else {
            return CommandResponse::failure(NOTHING_RUNNING);
        };
        let how = match &self.state {
            State::Ended { how } => how.clone(),
            _ => "is not running".to_owned(),
        };
        command.output().after(format!(
            "[Python {how}. Its {LOST} are gone; the next command starts a fresh interpreter.]"
        ));
        self.conclude(command, false)
    }

    /// The running command is interrupted (its time ran out, the agent
    /// asked, or the host is stopping): SIGINT, so that Python raises
    /// KeyboardInterrupt and keeps its namespace; SIGTERM and SIGKILL for
    /// the process group if it does not come back. A stopped interpreter is
    /// continued first, or no signal could land.
    fn conclude_interrupted(&mut self, why: Interruption, cancel: &CancelFlag) -> CommandResponse {
        let Some(mut command) = self.busy.take() else {
            return CommandResponse::failure(NOTHING_RUNNING);
        };
        if let Interruption::Timeout(after) = why {
            command.output().incident(Incident::TimedOut { after });
        }
        let success = self.interrupt(&mut command, why, cancel);
        self.conclude(command, success)
    }

    /// Runs the interrupt ladder on `command`; `true` only if the code then
    /// finished by itself without raising.
    fn interrupt(&mut self, command: &mut Command, why: Interruption, cancel: &CancelFlag) -> bool {
        let State::Running(interpreter) = &mut self.state else {
            return false;
        };
        let ignores_sigint = interpreter.ignores_sigint();
        // If the request never reached the driver (something in the
        // interpreter read it off the pipe), the driver is idle and answers
        // this at once; if the code runs, it answers after the code.
        let _ = interpreter.send_sync(Instant::now() + SYNC_SEND_LIMIT);
        let (escalation, finished, continued) = interrupt_ladder(interpreter, command);
        if continued {
            command.output().after(STOPPED_AND_CONTINUED.to_owned());
        }
        let cause = why.describe();
        match finished {
            Some(Ok(Wait::Done(done))) => {
                // Code blocked in os.system() does not see KeyboardInterrupt
                // (system() ignores SIGINT); its child does, and the code
                // may then simply finish.
                let succeeded = done.succeeded();
                let what = if succeeded {
                    "SIGINT was sent and the code then finished"
                } else {
                    "the code was interrupted (KeyboardInterrupt)"
                };
                // The sync's answer follows at once; take it now so that it
                // is not left for the next command.
                let _ = interpreter.wait(Instant::now() + SYNC_ANSWER_LIMIT, None, &mut |b| {
                    command.feed(b)
                });
                let ended = interpreter.end_strays_of_command(command.started().elapsed());
                self.absorb(&command.text, done);
                command.output().after(format!(
                    "[{cause}: {what}. Variables and imports are kept.]"
                ));
                if ended > 0 {
                    command.output().after(strays_ended(ended));
                }
                return succeeded && matches!(why, Interruption::Requested);
            }
            Some(Ok(Wait::Synced)) => {
                command.output().after(format!(
                    "[{cause}: the code never reached python: something in the interpreter read \
                     or garbled the request on the driver's request channel, so nothing ran. \
                     Variables and imports are kept.]"
                ));
                return false;
            }
            Some(Ok(Wait::Ended(ending))) => {
                let how = how_python_ended(&escalation, ignores_sigint, &ending);
                command
                    .output()
                    .after(format!("[{cause}. {how}; its {LOST} are lost.]"));
            }
            Some(Ok(Wait::ChannelLost)) => {
                let ending = interpreter.kill();
                command.output().after(format!(
                    "[{cause}. {CHANNEL_LOST} The interpreter was ended ({}); its {LOST} are \
                     lost.]",
                    ending.describe()
                ));
            }
            Some(Err(err)) => {
                interpreter.kill();
                command.output().after(format!(
                    "[{cause}. Python stopped answering properly ({err}) and was ended; its \
                     {LOST} are lost.]"
                ));
            }
            Some(Ok(Wait::Deadline | Wait::Cancelled | Wait::InputWanted)) | None => {
                let ending = interpreter.kill();
                command.output().after(format!(
                    "[{cause}. Python did not respond to SIGINT, SIGTERM or SIGKILL and was \
                     abandoned ({}); its {LOST} are lost.]",
                    ending.describe()
                ));
            }
        }
        self.restart_after_loss(command, why, cancel);
        false
    }

    /// The interpreter was lost to an interruption: says so, and starts a
    /// fresh one unless the host is stopping.
    fn restart_after_loss(
        &mut self,
        command: &mut Command,
        why: Interruption,
        cancel: &CancelFlag,
    ) {
        command.output().incident(Incident::Restarted {
            reason: format!("{} and python did not come back", why.event()),
            lost: LOST.to_owned(),
        });
        self.reset_view();
        if matches!(why, Interruption::Cancelled) {
            // The host is stopping (or the operator pressed Ctrl-C): do not
            // start anything now; the next command will.
            self.state = State::Ended {
                how: "was ended after an interruption".to_owned(),
            };
            return;
        }
        match self.start(command, cancel) {
            Ok(()) => command
                .output()
                .after("[A fresh interpreter is ready.]".to_owned()),
            Err(message) => command.output().after(format!(
                "[A fresh interpreter could not be started: {message}]"
            )),
        }
    }

    /// Types `text` into the running command: plain text goes to its
    /// stdin; Ctrl-C (`\u{3}`) sends SIGINT, as a terminal would; Ctrl-D
    /// (`\u{4}`) ends its stdin. Returns notes for the answer.
    fn type_into(&mut self, text: &str) -> Vec<String> {
        let (State::Running(interpreter), Some(command)) = (&mut self.state, &mut self.busy) else {
            return Vec::new();
        };
        let mut notes = Vec::new();
        let mut closed = false;
        let mut dropped = 0;
        let mut type_run = |run: &str, closed: bool, interpreter: &mut Interpreter| {
            if !run.is_empty() && (closed || !interpreter.type_input(run.as_bytes())) {
                dropped += run.len();
            }
        };
        let mut run_start = 0;
        for (at, c) in text.char_indices() {
            if c != '\u{3}' && c != '\u{4}' {
                continue;
            }
            type_run(&text[run_start..at], closed, interpreter);
            run_start = at + c.len_utf8();
            if c == '\u{3}' {
                interpreter.signal(Signal::SIGINT);
            } else {
                interpreter.close_input();
                closed = true;
            }
        }
        type_run(&text[run_start..], closed, interpreter);
        if dropped > 0 {
            notes.push(if closed {
                format!(
                    "[{} typed after Ctrl-D went nowhere: the command's input had ended.]",
                    text::bytes(dropped as u64)
                )
            } else {
                format!(
                    "[The command has no input to type into ({} dropped): only code sent with \
                     yield_ms (or under --yield-after) reads what is typed.]",
                    text::bytes(dropped as u64)
                )
            });
        }
        command.wants_input = false;
        notes
    }

    /// What a restart loses, in words: the variables by name (the first
    /// few), imports, and the command it ends.
    fn loss(&self, ended: Option<&Command>) -> String {
        let mut lost = Vec::new();
        let (shown, hidden) = self.variables.shown(LOST_NAMES_SHOWN);
        if !shown.is_empty() {
            let names: Vec<&str> = shown.iter().map(|v| v.name.as_str()).collect();
            let more = if hidden > 0 {
                format!(" and {hidden} more")
            } else {
                String::new()
            };
            lost.push(format!("the variables {}{more}", names.join(", ")));
        }
        if matches!(self.state, State::Running(_)) {
            lost.push("imports and anything else the interpreter held".to_owned());
        }
        if let Some(command) = ended {
            lost.push(format!(
                "the running command ({}), which was ended",
                quoted(&command.text)
            ));
        }
        if lost.is_empty() {
            "nothing (no interpreter was running)".to_owned()
        } else {
            lost.join("; ")
        }
    }
}

/// Shown before output that arrived while no command ran.
const LATE_OUTPUT_HEADER: &str = "[Output that arrived after the previous command ended (from a background thread or process):]\n";

/// Shown after it, where the command's own output starts.
const OWN_OUTPUT_HEADER: &str = "[This command's output:]\n";

/// Gives `command` what background threads and processes wrote while no
/// command ran, under a line saying so, so that it is neither lost nor
/// taken for the command's own output (`own_follows`: a line then marks
/// where that starts).
fn take_late_output(interpreter: &mut Interpreter, command: &mut Command, own_follows: bool) {
    let mut late = Vec::new();
    interpreter.collect_stray_output(&mut |b| late.extend_from_slice(b));
    if late.is_empty() {
        return;
    }
    command.feed(LATE_OUTPUT_HEADER.as_bytes());
    command.feed(&late);
    if !late.ends_with(b"\n") {
        command.feed(b"\n");
    }
    if own_follows {
        command.feed(OWN_OUTPUT_HEADER.as_bytes());
    }
}

/// Said when the interpreter was found stopped and was continued.
const STOPPED_AND_CONTINUED: &str = "[Python was stopped (SIGSTOP or a similar signal: state T), \
     so it could not go on; envhost continued it with SIGCONT.]";

/// Continues an interpreter that is stopped (state `T`), saying so.
fn continue_if_stopped(interpreter: &Interpreter, run: &mut CommandOutput) {
    if interpreter.is_stopped() {
        interpreter.signal(Signal::SIGCONT);
        run.after(STOPPED_AND_CONTINUED.to_owned());
    }
}

/// A command's first line, quoted, cut at [`QUOTED_CHARS`].
fn quoted(command: &str) -> String {
    text::quoted(command, QUOTED_CHARS)
}

/// SIGINT, then SIGTERM, then SIGKILL to the interpreter's group, each
/// given its grace to end the command: how far it went, how the wait for
/// the command ended (`None`: it never did), and whether the interpreter
/// was found stopped and continued.
///
/// A stopped interpreter is continued only once the signal is pending, so
/// that it meets the signal as it resumes, inside the call that stopped
/// it. Continued first, it would race ahead into its next blocking call
/// (`time.sleep`) and take the signal just before entering it: Python
/// checks for signals after a call returns, not before a sleep starts, so
/// KeyboardInterrupt would wait for the sleep to end (one run in three,
/// measured, before this order).
fn interrupt_ladder(
    interpreter: &mut Interpreter,
    command: &mut Command,
) -> (Escalation, Option<Result<Wait, TalkError>>, bool) {
    let pid = interpreter.pid();
    let mut finished: Option<Result<Wait, TalkError>> = None;
    let mut continued = false;
    let escalation = escalate(
        &DEFAULT_LADDER,
        |signal| {
            let sent = signal_group(pid, signal);
            if is_stopped(pid) {
                signal_group(pid, Signal::SIGCONT);
                continued = true;
            }
            sent
        },
        |grace| {
            let until = Instant::now() + grace;
            loop {
                match interpreter.wait(until, None, &mut |b| command.feed(b)) {
                    Ok(Wait::Deadline) => return false,
                    // The code asked for input after all: not an end.
                    Ok(Wait::InputWanted) => continue,
                    other => {
                        finished = Some(other);
                        return true;
                    }
                }
            }
        },
    );
    (escalation, finished, continued)
}

/// The note for the processes an interrupted command left running.
fn strays_ended(ended: usize) -> String {
    format!(
        "[Ended {} the command started that {} still running after it was \
         interrupted (SIGTERM, then SIGKILL): {} SIGINT. Processes started by \
         earlier commands are not touched.]",
        text::counted(ended, "process"),
        if ended == 1 { "was" } else { "were" },
        if ended == 1 {
            "it ignores"
        } else {
            "they ignore"
        },
    )
}

/// How Python ended while the ladder ran.
fn how_python_ended(escalation: &Escalation, ignores_sigint: bool, ending: &Ending) -> String {
    match escalation {
        Escalation::StoppedBy(signal) if *signal != Signal::SIGINT => {
            if ignores_sigint {
                format!(
                    "Python ignores SIGINT (the code set signal.SIG_IGN for it), so \
                     KeyboardInterrupt could not stop the code; it was ended with \
                     {signal}"
                )
            } else {
                format!(
                    "Python did not stop on KeyboardInterrupt (the code may be busy \
                     in C code that does not check for signals, or catch \
                     KeyboardInterrupt) and was ended with {signal}"
                )
            }
        }
        // It ended by itself (e.g. SIGINT's default action).
        _ => format!("Python {}", ending.describe()),
    }
}

/// Why running code was interrupted.
#[derive(Debug, Clone, Copy)]
enum Interruption {
    Timeout(Duration),
    /// The agent sent `interrupt`.
    Requested,
    Cancelled,
}

impl Interruption {
    fn describe(self) -> String {
        match self {
            Interruption::Timeout(after) => {
                format!("Timed out after {}", text::duration(after))
            }
            Interruption::Requested => "Interrupted as asked".to_owned(),
            Interruption::Cancelled => text::capitalized(text::INTERRUPTED),
        }
    }

    fn event(self) -> String {
        match self {
            Interruption::Timeout(after) => {
                format!("timed out after {}", text::duration(after))
            }
            Interruption::Requested => "was interrupted at the agent's request".to_owned(),
            Interruption::Cancelled => text::INTERRUPTED.to_owned(),
        }
    }
}

impl Environment for PythonEnvironment {
    fn working_dir(&self) -> Option<PathBuf> {
        Some(PathBuf::from(&self.cwd))
    }

    fn usage(&self) -> Usage {
        Usage {
            summary: HELP.to_owned(),
            commands: Vec::new(),
            input: envhost_core::InputRule::Python,
        }
    }

    fn handle_command(
        &mut self,
        text: &str,
        context: &CommandContext,
    ) -> Result<CommandResponse, EnvironmentError> {
        if let Err(reason) = &self.launch {
            return Err(EnvironmentError::Unavailable(reason.to_string()));
        }
        if let Some(running) = &self.busy {
            // The orchestrator refuses first; this only guards the state.
            return Ok(CommandResponse::failure(format!(
                "python is still running {}; go on with wait, input or interrupt first.",
                quoted(&running.text)
            )));
        }
        let mut command = Command::new(text, context, &self.output_limits, &self.output_label);
        self.notice_end();
        if let State::Ended { how } = &self.state {
            command.output().before(format!(
                "[Started a fresh Python interpreter: the previous one {how}, so its {LOST} are \
                 gone.]"
            ));
            command.output().incident(Incident::Restarted {
                reason: format!("the previous interpreter {how}"),
                lost: LOST.to_owned(),
            });
        }
        if !matches!(self.state, State::Running(_))
            && let Err(message) = self.start(&mut command, &context.cancel)
        {
            command
                .output()
                .after(format!("[Python could not be started: {message}]"));
            return Ok(command.answer_final(false));
        }
        let State::Running(interpreter) = &mut self.state else {
            return Err(EnvironmentError::Failed(
                "the python interpreter is not running".to_owned(),
            ));
        };
        take_late_output(interpreter, &mut command, true);
        // A command that may yield gets a stdin the agent can type into;
        // any other keeps /dev/null, so that input() fails at once instead
        // of waiting for a keyboard nobody has.
        let takes_input = context.yield_after.is_some();
        let send_by = command
            .deadline
            .unwrap_or_else(|| Instant::now() + SEND_LIMIT);
        // If the request cannot be delivered the interpreter is gone or
        // stuck; the wait finds out which.
        let sent = interpreter.send_code(text, takes_input, send_by);
        self.busy = Some(command);
        if let Err(err) = sent {
            return Ok(self.conclude_broken(&err));
        }
        let answer_by = context.yield_after.map(|after| Instant::now() + after);
        Ok(self.drive(answer_by, &context.cancel))
    }

    fn running(&self) -> Option<RunningCommand> {
        self.busy.as_ref().map(Command::running)
    }

    fn wait(&mut self, context: &CommandContext) -> Result<CommandResponse, EnvironmentError> {
        let Some(command) = &self.busy else {
            return Ok(CommandResponse::failure(NOTHING_RUNNING));
        };
        if command.wants_input {
            // Waiting longer cannot help: only input can.
            let answer_by = Some(Instant::now());
            return Ok(self.drive(answer_by, &context.cancel));
        }
        let answer_by = Instant::now() + context.yield_after.unwrap_or(DEFAULT_WAIT);
        Ok(self.drive(Some(answer_by), &context.cancel))
    }

    fn input(
        &mut self,
        text: &str,
        context: &CommandContext,
    ) -> Result<CommandResponse, EnvironmentError> {
        if self.busy.is_none() {
            return Ok(CommandResponse::failure(NOTHING_RUNNING));
        }
        let notes = self.type_into(text);
        if let Some(command) = self.busy.as_mut() {
            for note in notes {
                command.output().before(note);
            }
        }
        let answer_by = Instant::now() + context.yield_after.unwrap_or(DEFAULT_INPUT_WAIT);
        Ok(self.drive(Some(answer_by), &context.cancel))
    }

    fn interrupt(&mut self, context: &CommandContext) -> Result<CommandResponse, EnvironmentError> {
        if self.busy.is_none() {
            return Ok(CommandResponse::failure(NOTHING_RUNNING));
        }
        Ok(self.conclude_interrupted(Interruption::Requested, &context.cancel))
    }

    fn restart(&mut self, context: &CommandContext) -> Result<CommandResponse, EnvironmentError> {
        if let Err(reason) = &self.launch {
            return Err(EnvironmentError::Unavailable(reason.to_string()));
        }
        let ended = self.busy.take();
        let was_running = ended.is_some();
        let lost = self.loss(ended.as_ref());
        // What the ended command printed since its last answer comes first:
        // no output is lost.
        let mut answer = match ended {
            Some(mut command) => {
                if let State::Running(interpreter) = &mut self.state {
                    interpreter.collect_stray_output(&mut |b| command.feed(b));
                }
                command
            }
            None => {
                let mut answer = Command::new("", context, &self.output_limits, &self.output_label);
                if let State::Running(interpreter) = &mut self.state {
                    take_late_output(interpreter, &mut answer, false);
                }
                answer
            }
        };
        match std::mem::replace(&mut self.state, State::Unused) {
            // With a command running the driver reads no request: end it
            // at once; an idle one may run its atexit handlers.
            State::Running(mut interpreter) if was_running => {
                interpreter.kill();
            }
            State::Running(interpreter) => interpreter.shutdown(),
            _ => {}
        }
        self.reset_view();
        let started = self.start(&mut answer, &context.cancel);
        let directory = self.project_dir.display().to_string();
        let text = match &started {
            Ok(()) => {
                format!("[Restarted python: a fresh interpreter in {directory}. Lost: {lost}.]")
            }
            Err(message) => format!(
                "[Python was ended (lost: {lost}), but a fresh interpreter could not be started: \
                 {message} The next command tries again.]"
            ),
        };
        answer.output().after(text);
        answer.output().incident(Incident::Restarted {
            reason: "the agent asked for a restart".to_owned(),
            lost: LOST.to_owned(),
        });
        Ok(answer.answer_final(started.is_ok()))
    }

    fn save_state(&mut self) -> Option<String> {
        if self.busy.is_some() {
            return None;
        }
        self.kept.as_mut()?.changed()
    }

    fn restore_state(
        &mut self,
        state: &str,
        context: &CommandContext,
    ) -> Result<String, EnvironmentError> {
        let saved: kept::Kept = serde_json::from_str(state).map_err(|err| {
            EnvironmentError::Failed(format!("the saved python state is unreadable: {err}"))
        })?;
        let Some(kept) = self.kept.as_ref() else {
            return Err(EnvironmentError::Failed(
                "this host keeps no python state".to_owned(),
            ));
        };
        let path = kept
            .write_restore(state)
            .map_err(|err| EnvironmentError::io("cannot write the restore file", err))?;
        let answer = self.handle_command(&kept::restore_code(&path), context);
        if let Some(kept) = &self.kept {
            kept.remove(&path);
        }
        let answer = answer?;
        Ok(kept::describe(&saved, &answer.output))
    }

    fn screen(&mut self) -> Result<ScreenSection, EnvironmentError> {
        self.notice_end();
        // Keep a yielded command's output flowing while the agent works
        // elsewhere: it waits in its answer, not in a full pipe.
        if let (State::Running(interpreter), Some(command)) = (&mut self.state, &mut self.busy) {
            interpreter.collect_stray_output(&mut |b| command.feed(b));
        }
        let content = match (&self.launch, &self.state) {
            (Err(reason), _) => format!("Python REPL (unavailable): {reason}"),
            (_, State::Unused) => format!("{READY}\n\n{HELP}"),
            (_, State::Running(_)) => self.running_screen(),
            (_, State::Ended { how }) => format!(
                "Python REPL (not running): the interpreter {how}; its {LOST} are gone. The \
                 next command starts a fresh interpreter.\n\n{HELP}"
            ),
            (_, State::StartFailed { message }) => format!(
                "Python REPL (could not start): {message} The next command tries again.\n\n{HELP}"
            ),
        };
        Ok(ScreenSection::with_max_lines(content, MAX_LINES))
    }

    fn holdings(&self) -> Vec<String> {
        match self.state {
            State::Running(_) => vec!["the python interpreter".to_owned()],
            _ => Vec::new(),
        }
    }

    fn shutdown(&mut self) {
        let busy = self.busy.take().is_some();
        match std::mem::replace(&mut self.state, State::Unused) {
            // A running command would keep the driver from reading its
            // cue to exit: end it at once.
            State::Running(mut interpreter) if busy => {
                interpreter.kill();
            }
            State::Running(interpreter) => interpreter.shutdown(),
            _ => {}
        }
    }
}

impl PythonEnvironment {
    /// The screen once running: working directory, variables by recent
    /// use, help.
    fn running_screen(&self) -> String {
        let mut text = format!("Working directory: {}\n\n", self.cwd);
        if self.variables.is_empty() {
            text.push_str("Variables: (none)\n");
        } else {
            text.push_str("Variables (by recent use):\n");
            let (shown, hidden) = self.variables.shown(MAX_SHOWN);
            for variable in shown {
                text.push_str(&format!("  {}: {}\n", variable.name, variable.type_name));
            }
            if hidden > 0 {
                text.push_str(&format!("  ... and {hidden} more\n"));
            }
        }
        text.push('\n');
        if let Some(figures) = self.figures.screen_lines() {
            text.push_str(&figures);
            text.push('\n');
        }
        if let Some(refused) = self.kept.as_ref().and_then(kept::StateFile::refused) {
            text.push_str(&format!(
                "Session state: not saved after the last command: {refused}.\n\n"
            ));
        }
        text.push_str(HELP);
        text
    }
}
