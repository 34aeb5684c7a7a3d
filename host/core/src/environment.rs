//! The contract every environment implements, native or WebAssembly.
//!
//! This module owns the [`Environment`] trait and the small value types that
//! cross it: the command context (timeout, cancellation), the response, the
//! screen section, and the validated [`EnvironmentName`]. It must not know
//! about the NDJSON protocol, the event bus or any particular environment:
//! environments report what happened (a timeout, a restart) as
//! [`Incident`]s in their response and the orchestrator turns those into
//! events.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::help::CommandSpec;

/// Default `max_lines` of a screen section.
pub const DEFAULT_MAX_LINES: usize = 50;

/// A persistent, stateful environment: bash, python, the editor, or a plugin.
///
/// Calls are synchronous and strictly sequential: the orchestrator holds
/// the environment's own lock for each call, while other environments may
/// be called from other threads at the same time. An implementation must return from
/// [`handle_command`](Environment::handle_command) by the context's deadline
/// (give or take a grace period for interrupting what it runs), and promptly
/// once the context is cancelled.
pub trait Environment: Send {
    /// Executes one command and reports its output.
    ///
    /// Failures of the *command* (a non-zero exit, a Python exception, an
    /// edit outside a view) are a `CommandResponse` with `success: false`.
    /// `Err` is for failures of the *environment* itself (it cannot start,
    /// its child process vanished unexpectedly); the orchestrator shows those
    /// to the agent as a failed response naming the environment.
    fn handle_command(
        &mut self,
        command: &str,
        context: &CommandContext,
    ) -> Result<CommandResponse, EnvironmentError>;

    /// The environment's current state and how to use it.
    ///
    /// Called after every command, for every environment: it must be cheap.
    fn screen(&mut self) -> Result<ScreenSection, EnvironmentError>;

    /// Releases everything the environment holds: child processes, pseudo
    /// terminals, temporary files. Called once, when the host stops.
    fn shutdown(&mut self) {}

    /// What [`shutdown`](Environment::shutdown) would end now, one short
    /// phrase each in the agent's words ("the shell", "background job
    /// `./server`"), for the answer to closing an instance. Empty when it
    /// holds nothing (it never started).
    fn holdings(&self) -> Vec<String> {
        Vec::new()
    }

    /// How to use this environment, for front ends that describe it before
    /// any screen is shown (an MCP tool's description, the REPL's
    /// completion): a summary and the described commands — the same
    /// descriptions its screen's help is rendered from. Fixed for the
    /// environment's life.
    fn usage(&self) -> Usage {
        Usage::default()
    }

    /// What this environment's commands can touch beyond its own state,
    /// for front ends that declare it up front (an MCP tool's annotations).
    /// The default claims nothing and assumes the worst: an environment
    /// that runs arbitrary programs keeps it.
    fn reach(&self) -> Reach {
        Reach::UNBOUNDED
    }

    /// Where this environment's commands run now (its current directory),
    /// for environments that run arbitrary programs: after each answer the
    /// host looks there and in the project root (a bounded look, never a
    /// walk of the project) for files the command created or changed.
    /// `None` (the default): only the files the response names itself.
    fn working_dir(&self) -> Option<PathBuf> {
        None
    }

    // Commands that outlive the wait. A command whose context carries
    // `yield_after` and is still running then is left running: the
    // environment answers with the output so far and `running: true`, and
    // the agent goes on with `wait`, `input` or `interrupt`. Environments
    // whose commands always end within the call (the editor, WebAssembly
    // calls) keep the defaults: they never report a running command, so the
    // orchestrator never calls the three methods below on them.

    /// The command that yielded and has not ended, if any: `Some` from the
    /// answer that left it running until an answer (to `wait`, `input` or
    /// `interrupt`) has reported its end, so that its last output is never
    /// lost. Must be cheap: the orchestrator asks before every request to
    /// this environment and for every screen, where it shows the command
    /// above the environment's own section (so `screen` need not).
    fn running(&self) -> Option<RunningCommand> {
        None
    }

    /// Collects the running command's output produced since the last
    /// answer: returns as soon as the command ends (`running: false`, the
    /// command's own outcome) or once `context.yield_after` has passed
    /// (`running: true`). `context.timeout` is `None`: the command keeps the
    /// limit it started with.
    fn wait(&mut self, context: &CommandContext) -> Result<CommandResponse, EnvironmentError> {
        let _ = context;
        Ok(CommandResponse::failure(NOTHING_RUNNING))
    }

    /// Types `text` into the running command (its terminal, or its standard
    /// input), control characters included, then answers as
    /// [`wait`](Environment::wait) does.
    fn input(
        &mut self,
        text: &str,
        context: &CommandContext,
    ) -> Result<CommandResponse, EnvironmentError> {
        let _ = (text, context);
        Ok(CommandResponse::failure(NOTHING_RUNNING))
    }

    /// Interrupts the running command with the same ladder a timeout uses
    /// and answers with its final output (`running: false`).
    fn interrupt(&mut self, context: &CommandContext) -> Result<CommandResponse, EnvironmentError> {
        let _ = context;
        Ok(CommandResponse::failure(NOTHING_RUNNING))
    }

    /// Ends the environment (and whatever it runs) and starts a fresh one in
    /// the project directory; the output says what was lost, and an
    /// [`Incident::Restarted`] says it for the record (without one the
    /// orchestrator records the output). Called whether or not a command
    /// runs.
    fn restart(&mut self, context: &CommandContext) -> Result<CommandResponse, EnvironmentError> {
        let _ = context;
        Err(EnvironmentError::Failed(
            "this environment cannot be restarted".to_owned(),
        ))
    }

    // Crash-safe sessions. While the host records the session, the
    // orchestrator asks each environment for its state after every answered
    // request, before the answer leaves, and hands it to its
    // `StateKeeper`; a host started with `--resume` hands the last kept
    // state back before the first command. The state's format is the
    // environment's own: the orchestrator and the keeper only carry it.

    /// The environment's recoverable state if it changed since the last
    /// call (or since [`restore_state`](Environment::restore_state));
    /// `None` when it did not or when the environment keeps none. Called
    /// after every answered request while the session is recorded: it must
    /// be cheap when nothing changed.
    fn save_state(&mut self) -> Option<String> {
        None
    }

    /// Brings back a state [`save_state`](Environment::save_state) returned
    /// in an earlier host, and says in the agent's words what came back and
    /// what did not. `Err` when nothing could be restored.
    fn restore_state(
        &mut self,
        state: &str,
        context: &CommandContext,
    ) -> Result<String, EnvironmentError> {
        let _ = (state, context);
        Err(EnvironmentError::Failed(
            "this environment cannot restore a saved state".to_owned(),
        ))
    }
}

/// Where the orchestrator hands the environments' recoverable states (see
/// [`Environment::save_state`]): the session recorder of the front end.
pub trait StateKeeper: Send + Sync {
    /// Stores `state` as `environment`'s latest; returns once it is safe
    /// on disk. `Err` says in words why it could not be kept.
    fn keep(&self, environment: &str, state: &str) -> Result<(), String>;

    /// Drops `environment`'s kept state: the instance was closed, and a
    /// resumed session must not bring it back.
    fn forget(&self, environment: &str) {
        let _ = environment;
    }
}

/// What the host watches over every answer beyond the environment that
/// gave it (the session's limits): the orchestrator asks after each
/// answer and adds what it says after the answer's output.
pub trait HostWatch: Send + Sync {
    /// What happened since the last answer that the agent must hear, one
    /// sentence each; usually nothing.
    fn after_answer(&self) -> Vec<String>;
}

/// How to use an environment: what [`Environment::usage`] returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage {
    /// One or two sentences on what the environment takes ("Any bash
    /// command. Use & for background jobs.").
    pub summary: String,
    /// Its described commands, in the order its help lists them; empty for
    /// environments that take free text (bash, python) or own their screen.
    pub commands: Vec<CommandSpec>,
    /// Where a person's entry for it ends when typed over several lines
    /// (the REPL's rule); a front end need not know the environment.
    pub input: InputRule,
}

/// Where an entry typed over several lines ends, as [`Usage::input`] says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum InputRule {
    /// Described commands: content follows the commands whose example
    /// spans lines.
    #[default]
    Commands,
    /// A shell's: the entry ends where the shell would stop reading.
    Shell,
    /// Python's: the entry ends where the interactive interpreter would
    /// run it.
    Python,
}

/// What an environment's commands can touch beyond its own state: what
/// [`Environment::reach`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reach {
    /// A command may change or delete what is outside the environment
    /// (files, processes) in ways that cannot be undone.
    pub destructive: bool,
    /// A command may reach what is outside the host's control: other
    /// machines, the network, programs that do.
    pub open_world: bool,
}

impl Reach {
    /// Anything at all: what an environment that runs arbitrary programs
    /// (a shell, an interpreter) can do.
    pub const UNBOUNDED: Reach = Reach {
        destructive: true,
        open_world: true,
    };

    /// Only the environment's own state: nothing outside it changes.
    pub const CONTAINED: Reach = Reach {
        destructive: false,
        open_world: false,
    };
}

/// What the default [`Environment::wait`], [`Environment::input`] and
/// [`Environment::interrupt`] answer; the orchestrator words the refusal
/// itself before it gets that far.
const NOTHING_RUNNING: &str = "Nothing is running in this environment.";

/// A command that yielded and is still running, as the busy refusal and the
/// screen describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningCommand {
    /// The command's text, as the agent sent it.
    pub command: String,
    /// When it started.
    pub started: Instant,
    /// Bytes of output it has produced so far (delivered or not).
    pub output_bytes: u64,
    /// The last non-empty line of its output, cleaned for display.
    pub last_line: Option<String>,
    /// It looks blocked reading input (a prompt waiting for an answer).
    pub waiting_for_input: bool,
}

/// What the orchestrator hands an environment along with a command.
#[derive(Debug, Clone)]
pub struct CommandContext {
    /// How long the command may run before it is interrupted. `None` means
    /// no limit: a command that may yield runs until it ends, is
    /// interrupted, or the host stops, unless the agent gave it a timeout.
    pub timeout: Option<Duration>,
    /// Answer after this long with the output so far and leave the command
    /// running (`running: true`). `None`: wait for the command to end (or
    /// to reach its timeout). For [`Environment::wait`] and
    /// [`Environment::input`], how long to wait.
    pub yield_after: Option<Duration>,
    /// Set when the host is shutting down; long waits must watch it.
    pub cancel: CancelFlag,
}

impl CommandContext {
    /// A command may run for `timeout` and must stop once `cancel` is set;
    /// it does not yield.
    pub fn new(timeout: Duration, cancel: CancelFlag) -> Self {
        CommandContext {
            timeout: Some(timeout),
            yield_after: None,
            cancel,
        }
    }

    /// The same context, yielding after `after` (`None`: never).
    pub fn yielding_after(mut self, after: Option<Duration>) -> Self {
        self.yield_after = after;
        self
    }

    /// The same context with the limit `timeout` (`None`: no limit).
    pub fn limited_to(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// When a command that started at `started` reaches its limit, if it
    /// has one (and the limit can be represented).
    pub fn deadline(&self, started: Instant) -> Option<Instant> {
        self.timeout
            .and_then(|timeout| started.checked_add(timeout))
    }
}

/// A shared "stop what you are doing" flag, set by the signal handler.
///
/// A [`child`](CancelFlag::child) is a flag of its own that also reads as
/// set while its parent is: a front end cancels one request with it (an
/// MCP client's `notifications/cancelled`) and a signal still stops them
/// all.
#[derive(Debug, Clone, Default)]
pub struct CancelFlag {
    flag: Arc<AtomicBool>,
    parent: Option<Box<CancelFlag>>,
}

impl CancelFlag {
    /// A flag that is not set.
    pub fn new() -> Self {
        CancelFlag::default()
    }

    /// A new flag that reads as set when it is set or this one is;
    /// setting it leaves this one alone.
    pub fn child(&self) -> CancelFlag {
        CancelFlag {
            flag: Arc::default(),
            parent: Some(Box::new(self.clone())),
        }
    }

    /// Sets the flag: every holder sees it (and every child).
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::SeqCst);
    }

    /// Clears the flag once the interruption has been dealt with (the REPL
    /// keeps running after Ctrl-C). A parent's flag stays as it is.
    pub fn reset(&self) {
        self.flag.store(false, Ordering::SeqCst);
    }

    /// Whether the flag, or a parent's, is set.
    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::SeqCst) || self.parent.as_ref().is_some_and(|p| p.is_cancelled())
    }

    /// The flag itself (not its parent's), for `signal_hook::flag::register`.
    pub fn as_atomic(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.flag)
    }
}

/// The result of one command, plus the facts
/// the orchestrator needs to emit events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandResponse {
    /// What the agent reads: the command's output and the host's notes.
    pub output: String,
    /// Whether the command succeeded (while it runs: that nothing failed
    /// yet).
    pub success: bool,
    /// The command yielded and is still running; the agent goes on with
    /// `wait`, `input` or `interrupt`.
    pub running: bool,
    /// Notable things that happened while handling the command. They are not
    /// sent to the agent as such (the output already says them in words);
    /// they become events for the transcript and the console.
    pub incidents: Vec<Incident>,
    /// Files the host itself wrote for this command (figures, saved
    /// output), absolute paths. The orchestrator adds the files it finds
    /// changed in the environment's [`working_dir`](Environment::working_dir)
    /// and the project root, and describes them all to the agent.
    pub files: Vec<PathBuf>,
}

impl CommandResponse {
    /// A command that succeeded with `output`.
    pub fn success(output: impl Into<String>) -> Self {
        CommandResponse {
            output: output.into(),
            success: true,
            running: false,
            incidents: Vec::new(),
            files: Vec::new(),
        }
    }

    /// A command that has not ended yet: `output` is what it produced
    /// since the last answer. The orchestrator ends it with the sentence
    /// that says how to go on (the same words for every environment).
    pub fn still_running(output: impl Into<String>) -> Self {
        CommandResponse {
            output: output.into(),
            success: true,
            running: true,
            incidents: Vec::new(),
            files: Vec::new(),
        }
    }

    /// A command that failed; `output` says why.
    pub fn failure(output: impl Into<String>) -> Self {
        CommandResponse {
            output: output.into(),
            success: false,
            running: false,
            incidents: Vec::new(),
            files: Vec::new(),
        }
    }

    /// The same response, reporting `incident` too.
    pub fn with_incident(mut self, incident: Incident) -> Self {
        self.incidents.push(incident);
        self
    }
}

/// Something an environment reports about how a command went, beyond its
/// output. Each kind becomes an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incident {
    /// The command ran past its timeout and was interrupted.
    TimedOut {
        /// The timeout it ran past.
        after: Duration,
    },
    /// The environment had to be started afresh; `lost` says what state is
    /// gone (e.g. "shell variables and background jobs").
    Restarted {
        /// Why it had to start afresh.
        reason: String,
        /// What state is gone.
        lost: String,
    },
    /// A WebAssembly plugin trapped (panic, interrupt, out of memory, ...).
    Trapped {
        /// What happened, in a few words (`timed out after 5 s`, `panic: ...`).
        cause: String,
    },
    /// The output went over the cap; the full text is in `saved_to`.
    OutputCapped {
        /// The size of the whole output.
        total_bytes: u64,
        /// The file holding the whole output, if it could be saved.
        saved_to: Option<PathBuf>,
    },
}

/// One environment's part of the screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScreenSection {
    /// The text shown.
    pub content: String,
    /// Most lines shown; longer content is cut with a marker.
    pub max_lines: usize,
}

impl ScreenSection {
    /// A section of at most [`DEFAULT_MAX_LINES`] lines.
    pub fn new(content: impl Into<String>) -> Self {
        ScreenSection {
            content: content.into(),
            max_lines: DEFAULT_MAX_LINES,
        }
    }

    /// A section of at most `max_lines` lines.
    pub fn with_max_lines(content: impl Into<String>, max_lines: usize) -> Self {
        ScreenSection {
            content: content.into(),
            max_lines,
        }
    }
}

/// A failure of an environment itself, as opposed to a failed command.
#[derive(Debug, thiserror::Error)]
pub enum EnvironmentError {
    /// The environment cannot work on this machine (e.g. no `python3`).
    #[error("{0}")]
    Unavailable(String),
    /// Starting or talking to a child process or file failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        #[source]
        /// The error it met.
        source: std::io::Error,
    },
    /// Anything else, already phrased for the agent.
    #[error("{0}")]
    Failed(String),
}

impl EnvironmentError {
    /// An I/O error met while doing `context`.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        EnvironmentError::Io {
            context: context.into(),
            source,
        }
    }
}

/// A valid environment name: an identifier, as Python's
/// `str.isidentifier()` has it: a letter or `_`, then letters, digits or
/// `_`. Letters may be any Unicode letters, as in Python.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EnvironmentName(String);

impl EnvironmentName {
    /// `name`, if it is an identifier (a letter or `_`, then letters, digits
    /// or `_`).
    pub fn new(name: &str) -> Result<Self, InvalidName> {
        let mut chars = name.chars();
        let valid = match chars.next() {
            Some(first) => {
                (first.is_alphabetic() || first == '_')
                    && chars.all(|c| c.is_alphanumeric() || c == '_')
            }
            None => false,
        };
        if valid {
            Ok(EnvironmentName(name.to_owned()))
        } else {
            Err(InvalidName(name.to_owned()))
        }
    }

    /// `raw` with every character an identifier cannot hold replaced by
    /// `_`: the name a file stem or a reference suggests (it may still
    /// start with a digit; [`EnvironmentName::new`] says whether it is one).
    pub fn suggested_by(raw: &str) -> String {
        raw.chars()
            .map(|c| {
                if c.is_alphanumeric() || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }

    /// The named instance `name` of `kind` (`bash:server`); `name` is
    /// checked by [`instance::check_name`](crate::instance::check_name).
    pub(crate) fn instance(kind: &EnvironmentName, name: &str) -> Self {
        EnvironmentName(format!("{kind}:{name}"))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EnvironmentName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where an environment comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EnvironmentKind {
    /// Native Rust in the host's process: bash, python, the editor.
    Builtin,
    /// A WebAssembly component from the project's `env/` folder.
    Plugin,
}

/// An environment ready to be registered, as the crates that create
/// environments hand it to the binary that owns the orchestrator.
pub struct LoadedEnvironment {
    /// The name the agent addresses it by.
    pub name: EnvironmentName,
    /// Built in or a plugin.
    pub kind: EnvironmentKind,
    /// The environment itself.
    pub environment: Box<dyn Environment>,
    /// How it was loaded, for the record (e.g. the interpreter it runs).
    pub detail: Option<String>,
}

/// An environment that could not be created, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadFailure {
    /// The environment's name, as far as it is known.
    pub name: String,
    /// A sentence saying what went wrong and what to do about it.
    pub reason: String,
}

/// The reason an [`EnvironmentName`] was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid environment name {0:?}: a name must be an identifier (a letter or `_`, then letters, digits or `_`)"
)]
pub struct InvalidName(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_suggested_name_keeps_letters_digits_and_underscores() {
        assert_eq!(EnvironmentName::suggested_by("my-env.v2"), "my_env_v2");
        assert_eq!(EnvironmentName::suggested_by("données 1"), "données_1");
        assert_eq!(EnvironmentName::suggested_by("2fa"), "2fa");
    }

    #[test]
    fn names_follow_python_identifier_rules() {
        for good in ["bash", "_private", "timer2", "sql_lite", "données"] {
            assert!(EnvironmentName::new(good).is_ok(), "{good} should be valid");
        }
        for bad in ["", "2fast", "my-env", "has space", "dot.ted", "a/b"] {
            assert!(
                EnvironmentName::new(bad).is_err(),
                "{bad} should be invalid"
            );
        }
    }

    #[test]
    fn cancel_flag_is_shared_between_clones() {
        let flag = CancelFlag::new();
        let clone = flag.clone();
        assert!(!clone.is_cancelled());
        flag.cancel();
        assert!(clone.is_cancelled());
    }

    #[test]
    fn a_child_sees_its_parent_but_not_the_other_way() {
        let host = CancelFlag::new();
        let request = host.child();
        let other = host.child();
        request.cancel();
        assert!(request.is_cancelled());
        assert!(!host.is_cancelled() && !other.is_cancelled());
        host.cancel();
        assert!(other.is_cancelled());
        host.reset();
        assert!(!other.is_cancelled());
    }
}
