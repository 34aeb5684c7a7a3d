//! The orchestrator: the registry of environments, request routing, screen
//! collection, and the events that describe both.
//!
//! It owns the loaded environments in display order (bash, python, editor,
//! then plugins by name), turns a request into a response plus a fresh
//! screen, and guarantees that nothing an environment does (an error, a
//! panic, a failing screen) takes the host down. It must not know the wire
//! format (that is `protocol`) nor what any environment does inside.
//!
//! Several front-end threads may use one orchestrator at once (an MCP
//! client calls tools in parallel): every method takes `&self`, each
//! environment sits behind its own lock so that requests to one
//! environment run one at a time while other environments serve, and the
//! event bus has its own lock. A screen taken while another request is
//! inside an environment shows that environment's last section, marked
//! busy, instead of waiting for it.
//!
//! A kind given an [`InstanceFactory`] (bash, python) also has named
//! instances (`bash:server`): the first request to one creates it, its
//! section follows its kind's default section, and `close` ends it. They
//! are held apart from the environments registered at start-up, behind a
//! lock of their own, so that creating or closing one never waits for a
//! request inside another environment.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, TryLockError};
use std::time::{Duration, Instant};

use envhost_files::changes::{self, ProducedFile, Reported, Since};

use crate::environment::{
    CancelFlag, CommandContext, CommandResponse, Environment, EnvironmentError, EnvironmentKind,
    EnvironmentName, HostWatch, Incident, Reach, RunningCommand, StateKeeper, Usage,
};
use crate::events::{Event, EventBus, panic_message};
use crate::instance::{self, DEFAULT_MAX_INSTANCES, InstanceFactory};
use crate::request::{
    CommandRequest, Control, ControlRequest, DEFAULT_INPUT_WAIT, DEFAULT_WAIT, RequestId,
};
use crate::running;
use crate::screen::{NoticeSection, Screen};
use crate::text;

mod instances;
mod sections;
mod slot;
#[cfg(test)]
mod tests;

use slot::{Inside, Slot, View, display_rank};

/// How much of a command's output goes into a `command_finished` event.
const EVENT_OUTPUT_LIMIT: usize = 16 * 1024;

/// Lines of an error section on the screen.
const ERROR_SECTION_LINES: usize = 10;

/// The screen section that says the session's state is not being kept
/// (not an identifier, so no environment can take it).
const SESSION_KEY: &str = "session-state";

/// Lines of the session line's section (a reason may wrap).
const SESSION_LINES: usize = 4;

/// The answer's words when states are saved again.
const RESUMED_NOTE: &str = "[envhost] Session state is saved again: every environment's latest \
                            state is on disk.";

/// The session line on the screen of that answer.
const RESUMED_LINE: &str =
    "Session state is kept again: every environment's latest state is on disk.";

/// How the states handed to the keeper fare: the screen's session line.
#[derive(Default)]
struct Keeping {
    /// The states the keeper could not take, each environment's latest:
    /// handed to it again after every answer until it takes them.
    unsaved: Vec<(EnvironmentName, String)>,
    /// Why the last try failed, while states are not being saved.
    failing: Option<String>,
    /// States are saved again, and no answer's screen has said so yet.
    resumed: bool,
}

/// `response` with `note` (what the session keeping came to) after its
/// output.
fn with_keeping_note(mut response: CommandResponse, note: Option<String>) -> CommandResponse {
    if let Some(note) = note {
        if !response.output.is_empty() && !response.output.ends_with('\n') {
            response.output.push('\n');
        }
        response.output.push_str(&note);
        response.output.push('\n');
    }
    response
}

/// What the agent gets back for one request.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The command's output.
    pub output: String,
    /// Whether it succeeded (while it runs: that nothing failed yet).
    pub success: bool,
    /// The command is still running: the agent goes on with `wait`,
    /// `input` or `interrupt`.
    pub running: bool,
    /// The screen after it.
    pub screen: Screen,
    /// What happened beyond the output (a timeout, capped output and where
    /// it was saved), already said in the output's words.
    pub incidents: Vec<Incident>,
    /// Files the command created or changed inside the project, as far as
    /// the host knows (what it wrote itself, and a bounded look at the
    /// environment's working directory and the project root).
    pub files: Vec<ProducedFile>,
}

/// An environment as a front end describes it before any command (an MCP
/// server's tool list).
#[derive(Debug, Clone)]
pub struct Description {
    /// Its name.
    pub name: EnvironmentName,
    /// Built in or a plugin.
    pub kind: EnvironmentKind,
    /// How to use it.
    pub usage: Usage,
    /// What its commands can touch.
    pub reach: Reach,
    /// It has named instances (`bash:NAME`) besides itself.
    pub instances: bool,
}

/// Plugins rebuilt while the host runs (`--watch`): the orchestrator asks
/// before every command, whatever the front end, and the sentences it
/// hands back head that command's output.
pub trait Reload: Send + Sync {
    /// Swaps in (through [`Orchestrator::replace`])
    /// what changed on disk since the last command; one sentence per change
    /// the agent must hear, usually none.
    fn before_command(&self, orchestrator: &Orchestrator) -> Vec<String>;
}

/// Settings the orchestrator applies to every command.
#[derive(Debug, Clone)]
pub struct OrchestratorSettings {
    /// The time a command may take when it does not say and does not yield.
    pub default_timeout: Duration,
    /// Yield every command after this long unless it says otherwise
    /// (`--yield-after`); `None`: commands yield only when they ask to.
    pub yield_after: Option<Duration>,
    /// The project: answers name the files a command produced in it.
    /// `None`: answers name no files.
    pub project_dir: Option<PathBuf>,
    /// Files the host itself keeps writing (the transcript), as canonical
    /// paths: never named as files a command produced, though they change
    /// with every answer.
    pub own_files: Vec<PathBuf>,
    /// How many named instances of one kind (`bash:NAME`) may live at
    /// once (`--max-instances`).
    pub max_instances: usize,
}

impl OrchestratorSettings {
    /// Commands limited to `default_timeout`, yielding only when they ask.
    pub fn new(default_timeout: Duration) -> Self {
        OrchestratorSettings {
            default_timeout,
            yield_after: None,
            project_dir: None,
            own_files: Vec::new(),
            max_instances: DEFAULT_MAX_INSTANCES,
        }
    }

    /// The limit of a command that gives `timeout` (or not) and yields
    /// after `yield_after` (or not): its own `timeout` if it gives one;
    /// otherwise none if it yields (it runs until it ends, is interrupted,
    /// or the host stops: the agent decides with `wait`, `input` and
    /// `interrupt`); otherwise the default timeout.
    pub fn limit(
        &self,
        timeout: Option<Duration>,
        yield_after: Option<Duration>,
    ) -> Option<Duration> {
        match (timeout, yield_after) {
            (Some(timeout), _) => Some(timeout),
            (None, Some(_)) => None,
            (None, None) => Some(self.default_timeout),
        }
    }
}

/// Why an environment could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    #[error("an environment named {0} is already loaded")]
    /// An environment of that name is registered already.
    Duplicate(String),
    /// Instances were allowed for a kind that is not registered.
    #[error("no environment named {0} is loaded, so it cannot have instances")]
    NoSuchKind(String),
}

/// The registry of environments: it routes each request to its
/// environment and collects the screen after it, and nothing an
/// environment does (an error, a panic) takes it down.
pub struct Orchestrator {
    /// Behind a lock of its own so that a plugin rebuilt while the host
    /// runs can take its old instance's place through a shared reference
    /// (under every front end); each request holds its slot, not the list.
    slots: RwLock<Vec<Arc<Slot>>>,
    /// The named instances alive (`bash:server`), by name.
    instances: RwLock<Vec<Arc<Slot>>>,
    /// The kinds that have named instances, and how each makes one.
    factories: Vec<(EnvironmentName, InstanceFactory)>,
    notices: Vec<NoticeSection>,
    bus: Mutex<EventBus>,
    settings: OrchestratorSettings,
    cancel: CancelFlag,
    shut_down: AtomicBool,
    /// Where states go after each answer, while the session is recorded.
    keeper: Option<Box<dyn StateKeeper>>,
    watch: Option<Box<dyn HostWatch>>,
    /// Asked before every command for plugins rebuilt on disk (`--watch`).
    reload: Option<Box<dyn Reload>>,
    /// Whether the keeper keeps them: the screen's session line.
    keeping: Mutex<Keeping>,
    /// Shown with the first answer only (what a resumed session got back).
    /// Notices for the first answer only, each with whether it also
    /// heads that answer's output.
    first_notice: Mutex<Vec<(NoticeSection, bool)>>,
    /// The files answers named lately (so the next answer does not name
    /// them again).
    reported: Mutex<Reported>,
}

impl Orchestrator {
    /// An orchestrator with no environment yet; `cancel` is handed to every
    /// command.
    pub fn new(settings: OrchestratorSettings, bus: EventBus, cancel: CancelFlag) -> Self {
        Orchestrator {
            slots: RwLock::new(Vec::new()),
            instances: RwLock::default(),
            factories: Vec::new(),
            notices: Vec::new(),
            bus: Mutex::new(bus),
            settings,
            cancel,
            shut_down: AtomicBool::new(false),
            keeper: None,
            watch: None,
            reload: None,
            keeping: Mutex::default(),
            first_notice: Mutex::new(Vec::new()),
            reported: Mutex::default(),
        }
    }

    /// Records the session: after every answered request, the state of
    /// the environment that answered goes to `keeper` if it changed, before
    /// the answer is returned. A state the keeper cannot take (a full disk,
    /// a read-only folder) is handed to it again after every answer until
    /// it takes it; meanwhile the screen has a `session-state` section that
    /// says states are not being kept and why, and the answers where that
    /// starts and ends say so.
    pub fn keep_states(&mut self, keeper: Box<dyn StateKeeper>) {
        self.keeper = Some(keeper);
    }

    /// After every answer to a command or a control, `watch` says what the
    /// host saw meanwhile (the session reached a limit); its sentences
    /// follow the answer's output.
    pub fn watch_host(&mut self, watch: Box<dyn HostWatch>) {
        self.watch = Some(watch);
    }

    /// Before every command, `reload` may swap plugins rebuilt on disk in
    /// (through [`replace`](Orchestrator::replace)); its sentences head
    /// that command's output.
    pub fn reload_before_commands(&mut self, reload: Box<dyn Reload>) {
        self.reload = Some(reload);
    }

    /// Hands each `(environment, state)` back to its environment (before
    /// the first command) and returns, per environment, what came back in
    /// its words or why nothing did. An environment that is not registered
    /// gets an `Err`.
    pub fn restore_states(
        &self,
        states: &[(String, String)],
    ) -> Vec<(String, Result<String, String>)> {
        states
            .iter()
            .map(|(name, state)| {
                let slot = match self.open(name) {
                    Ok(slot) => slot,
                    Err(_) if instance::split(name).is_none() => {
                        return (
                            name.clone(),
                            Err("it is not loaded in this host".to_owned()),
                        );
                    }
                    Err(why) => return (name.clone(), Err(why)),
                };
                let context =
                    CommandContext::new(self.settings.default_timeout, self.cancel.clone());
                let mut inside = slot.enter("restore");
                let restored = catch_unwind(AssertUnwindSafe(|| {
                    inside.environment.restore_state(state, &context)
                }));
                let result = match restored {
                    Ok(Ok(words)) => Ok(words),
                    Ok(Err(err)) => Err(err.to_string()),
                    Err(panic) => Err(format!("panicked: {}", panic_message(panic.as_ref()))),
                };
                drop(inside);
                (name.clone(), result)
            })
            .collect()
    }

    /// Shows `notice` at the head of the first answered request's output
    /// and on its screen (and on screens asked for before it), then never
    /// again.
    pub fn announce_once(&self, notice: NoticeSection) {
        self.first_notice_with(notice, true);
    }

    /// Shows `notice` on the first answered request's screen (and on
    /// screens asked for before it), then never again; its output is left
    /// alone.
    pub fn show_once(&self, notice: NoticeSection) {
        self.first_notice_with(notice, false);
    }

    fn first_notice_with(&self, notice: NoticeSection, in_output: bool) {
        let mut notices = self
            .first_notice
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        notices.retain(|(kept, _)| kept.key != notice.key);
        notices.push((notice, in_output));
    }

    /// Hands the environment's state to the keeper if it changed, with
    /// every state the keeper could not take before (each environment's
    /// latest, until it is kept). Returns what the answer says about it:
    /// that states are no longer being saved (once, when the first fails),
    /// or that they are again (when they all are once more).
    fn keep_state(&self, slot: &Slot, environment: &mut Box<dyn Environment>) -> Option<String> {
        let keeper = self.keeper.as_ref()?;
        let saved = catch_unwind(AssertUnwindSafe(|| environment.save_state()));
        let state = match saved {
            Ok(state) => state,
            Err(panic) => {
                self.emit(Event::Error {
                    context: format!("{} state", slot.name),
                    message: format!("panicked: {}", panic_message(panic.as_ref())),
                });
                None
            }
        };
        let mut keeping = self.keeping.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(state) = state {
            keeping.unsaved.retain(|(name, _)| *name != slot.name);
            keeping.unsaved.push((slot.name.clone(), state));
        }
        if keeping.unsaved.is_empty() {
            return None;
        }
        let mut failure: Option<String> = None;
        keeping
            .unsaved
            .retain(|(name, state)| match keeper.keep(name.as_str(), state) {
                Ok(()) => false,
                Err(message) => {
                    failure.get_or_insert(message);
                    true
                }
            });
        let was_failing = keeping.failing.take();
        match failure {
            Some(reason) => {
                let note = match &was_failing {
                    None => Some(format!(
                        "[envhost] Session state is not being saved: {reason}. A host killed \
                         now would resume from states older than this answer; envhost tries \
                         again after every answer and says when states are saved again."
                    )),
                    Some(_) => None,
                };
                if was_failing.as_ref() != Some(&reason) {
                    self.emit(Event::Error {
                        context: "session state".to_owned(),
                        message: reason.clone(),
                    });
                }
                keeping.failing = Some(reason);
                keeping.resumed = false;
                note
            }
            None => was_failing.map(|_| {
                keeping.resumed = true;
                RESUMED_NOTE.to_owned()
            }),
        }
    }

    /// Adds an environment in its display position and records it.
    pub fn register(
        &self,
        name: EnvironmentName,
        kind: EnvironmentKind,
        environment: Box<dyn Environment>,
        detail: Option<String>,
    ) -> Result<(), RegisterError> {
        if self.slots().iter().any(|s| s.name == name) {
            return Err(RegisterError::Duplicate(name.to_string()));
        }
        self.emit(Event::EnvironmentLoaded {
            name: name.to_string(),
            kind,
            detail,
        });
        let usage = match catch_unwind(AssertUnwindSafe(|| environment.usage())) {
            Ok(usage) => usage,
            Err(panic) => {
                self.emit(Event::Error {
                    context: format!("{name} usage"),
                    message: format!("panicked: {}", panic_message(panic.as_ref())),
                });
                Usage::default()
            }
        };
        let mut slots = self.slots.write().unwrap_or_else(PoisonError::into_inner);
        if slots.iter().any(|s| s.name == name) {
            return Err(RegisterError::Duplicate(name.to_string()));
        }
        slots.push(Arc::new(Slot {
            name,
            kind,
            instance_of: None,
            usage,
            environment: Mutex::new(environment),
            view: Mutex::new(View::default()),
        }));
        slots.sort_by_key(|slot| display_rank(slot));
        Ok(())
    }

    /// Puts `environment` in the place of the plugin of that name, shutting
    /// the old one down first (a plugin rebuilt while the host runs), or
    /// adds it when there is none. A built-in is never replaced.
    pub fn replace(
        &self,
        name: EnvironmentName,
        kind: EnvironmentKind,
        environment: Box<dyn Environment>,
        detail: Option<String>,
    ) -> Result<(), RegisterError> {
        let mut slots = self.slots.write().unwrap_or_else(PoisonError::into_inner);
        let Some(index) = slots.iter().position(|s| s.name == name) else {
            drop(slots);
            return self.register(name, kind, environment, detail);
        };
        if slots[index].kind == EnvironmentKind::Builtin || kind == EnvironmentKind::Builtin {
            return Err(RegisterError::Duplicate(name.to_string()));
        }
        let old = slots.remove(index);
        drop(slots);
        // A request another thread still has inside the old instance ends
        // first (entering waits for it); none can enter it any more.
        let mut inside = old.enter("replace");
        let old_environment = &mut inside.environment;
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| old_environment.shutdown())) {
            self.emit(Event::Error {
                context: format!("{name} shutdown"),
                message: panic_message(panic.as_ref()),
            });
        }
        drop(inside);
        self.register(name, kind, environment, detail)
    }

    /// Records an environment that could not be loaded.
    pub fn record_load_failure(&self, name: &str, reason: &str) {
        self.emit(Event::EnvironmentFailed {
            name: name.to_owned(),
            reason: reason.to_owned(),
        });
    }

    /// Shows a non-environment section after the environments.
    pub fn add_notice(&mut self, notice: NoticeSection) {
        self.notices.push(notice);
    }

    /// The registered environments' names, in display order (named
    /// instances are in [`instance_names`](Orchestrator::instance_names)).
    pub fn environment_names(&self) -> Vec<String> {
        self.slots()
            .iter()
            .map(|s| s.name.as_str().to_owned())
            .collect()
    }

    /// How to use `environment` (its summary and described commands), for
    /// front ends that describe environments up front; without waiting for
    /// a request inside it. A named instance is used as its kind is.
    pub fn usage(&self, environment: &str) -> Option<Usage> {
        let base = instance::split(environment).map_or(environment, |(kind, _)| kind);
        self.slot(base).map(|slot| slot.usage.clone())
    }

    /// Every environment's name, kind, usage and reach, in display order.
    /// The usage is the one asked at registration; the reach waits for a
    /// request inside an environment to end: call it before serving.
    pub fn describe(&self) -> Vec<Description> {
        self.slots()
            .iter()
            .map(|slot| {
                let environment = slot
                    .environment
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                let reach = catch_unwind(AssertUnwindSafe(|| environment.reach())).unwrap_or_else(
                    |panic| {
                        self.emit(Event::Error {
                            context: format!("{} reach", slot.name),
                            message: format!("panicked: {}", panic_message(panic.as_ref())),
                        });
                        Reach::UNBOUNDED
                    },
                );
                Description {
                    name: slot.name.clone(),
                    kind: slot.kind,
                    usage: slot.usage.clone(),
                    reach,
                    instances: self.factory(slot.name.as_str()).is_some(),
                }
            })
            .collect()
    }

    /// The settings every command gets.
    pub fn settings(&self) -> &OrchestratorSettings {
        &self.settings
    }

    /// The time a command may take when it does not say.
    pub fn default_timeout(&self) -> Duration {
        self.settings.default_timeout
    }

    /// The command running in `environment` after it yielded, if any (and
    /// if no other request is inside the environment right now: then
    /// `None`, without waiting).
    pub fn running(&self, environment: &str) -> Option<RunningCommand> {
        let slot = self.slot(environment)?;
        let guard = match slot.environment.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        self.running_in(&slot, &**guard)
    }

    /// Emits an event from outside (the protocol layer's bad-input errors).
    pub fn emit(&self, event: Event) {
        self.bus
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .emit(event);
    }

    /// Runs one command and collects the screen that follows it.
    ///
    /// The command's limit is its own `timeout` if it gives one; otherwise,
    /// if it yields (its `yield_after`, or the host's `--yield-after`), it
    /// has none; otherwise the default timeout. A command sent to an
    /// environment whose earlier command still runs is refused with a
    /// response that names what runs and the ways on.
    pub fn execute(&self, request: &CommandRequest) -> Outcome {
        self.execute_with_cancel(request, &self.cancel)
    }

    /// [`execute`](Orchestrator::execute), where `cancel` stops the command
    /// as the host's cancellation does. Pass a [`CancelFlag::child`] of the
    /// host's flag, so that a signal still stops it: a front end cancels one
    /// request this way (an MCP client's `notifications/cancelled`).
    pub fn execute_with_cancel(&self, request: &CommandRequest, cancel: &CancelFlag) -> Outcome {
        let reloaded = match &self.reload {
            Some(reload) => reload.before_command(self),
            None => Vec::new(),
        };
        let mut outcome = self.execute_now(request, cancel);
        if !reloaded.is_empty() {
            outcome.output = format!("{}\n\n{}", reloaded.join("\n"), outcome.output);
        }
        outcome
    }

    fn execute_now(&self, request: &CommandRequest, cancel: &CancelFlag) -> Outcome {
        let yield_after = request.yield_after.or(self.settings.yield_after);
        let timeout = self.settings.limit(request.timeout, yield_after);
        self.emit(Event::CommandReceived {
            id: request.id.clone(),
            environment: request.environment.clone(),
            command: request.command.clone(),
            timeout_ms: timeout.map(duration_ms),
            yield_ms: yield_after.map(duration_ms),
        });
        let started = Instant::now();
        let response = match self.open(&request.environment) {
            Err(refusal) => CommandResponse::failure(refusal),
            Ok(slot) => {
                let slot = &*slot;
                let mut inside = slot.enter("command");
                match self.running_in(slot, &**inside.environment) {
                    Some(running) => CommandResponse::failure(running::busy_refusal(
                        slot.name.as_str(),
                        &running,
                        Instant::now(),
                    )),
                    None => {
                        let context =
                            CommandContext::new(self.settings.default_timeout, cancel.clone())
                                .limited_to(timeout)
                                .yielding_after(yield_after);
                        let since = Since::now();
                        let environment = &mut inside.environment;
                        let response = self.guarded(slot, || {
                            environment.handle_command(&request.command, &context)
                        });
                        let response = self.with_changed_files(&inside, response, since);
                        let kept = self.keep_state(slot, &mut inside.environment);
                        let response = self.noted(slot, &inside, response);
                        with_keeping_note(response, kept)
                    }
                }
            }
        };
        self.record_answer(
            request.id.as_ref(),
            &request.environment,
            &response,
            started,
        );
        self.outcome(response)
    }

    /// Goes on with the command running in an environment (wait for it,
    /// type into it, interrupt it), or restarts the environment, and
    /// collects the screen that follows.
    ///
    /// `wait`, `input` and `interrupt` when nothing runs answer
    /// `success: false` saying so. `wait` and `input` keep the command's
    /// own limit; they wait [`DEFAULT_WAIT`] and [`DEFAULT_INPUT_WAIT`]
    /// when the request does not say.
    pub fn control(&self, request: &ControlRequest) -> Outcome {
        self.control_with_cancel(request, &self.cancel)
    }

    /// [`control`](Orchestrator::control), where `cancel` ends the wait as
    /// the host's cancellation does (see
    /// [`execute_with_cancel`](Orchestrator::execute_with_cancel)).
    pub fn control_with_cancel(&self, request: &ControlRequest, cancel: &CancelFlag) -> Outcome {
        let id = request.id.clone();
        let environment = request.environment.clone();
        self.emit(match &request.control {
            Control::Wait { timeout } => Event::WaitRequested {
                id,
                environment,
                timeout_ms: duration_ms(timeout.unwrap_or(DEFAULT_WAIT)),
            },
            Control::Input { text, .. } => Event::InputTyped {
                id,
                environment,
                bytes: text.len(),
                text: excerpt(text, EVENT_OUTPUT_LIMIT),
            },
            Control::Interrupt => Event::InterruptRequested { id, environment },
            Control::Restart => Event::RestartRequested { id, environment },
            Control::Close => Event::CloseRequested { id, environment },
        });
        if request.control == Control::Close {
            let response = self.close(request);
            return self.outcome(response);
        }
        let Some(slot) = self.slot(&request.environment) else {
            let words = match instance::split(&request.environment) {
                Some(_) => CommandResponse::failure(
                    self.not_open(&request.environment, request.control.name()),
                ),
                None => self.unknown_environment(&request.environment),
            };
            return self.outcome(words);
        };
        let slot = &*slot;
        let mut inside = slot.enter(request.control.name());
        if request.control == Control::Restart {
            let context = CommandContext::new(self.settings.default_timeout, cancel.clone());
            let environment = &mut inside.environment;
            let response = self.guarded(slot, || environment.restart(&context));
            let kept = self.keep_state(slot, &mut inside.environment);
            let response = with_keeping_note(response, kept);
            drop(inside);
            self.record_restart(slot, &response);
            return self.outcome(response);
        }
        let Some(running) = self.running_in(slot, &**inside.environment) else {
            let refusal = running::nothing_running(slot.name.as_str(), request.control.name());
            drop(inside);
            return self.outcome(CommandResponse::failure(refusal));
        };
        let waiting =
            CommandContext::new(self.settings.default_timeout, cancel.clone()).limited_to(None);
        let environment = &mut inside.environment;
        let response = self.guarded(slot, || match &request.control {
            Control::Wait { timeout } => {
                environment.wait(&waiting.yielding_after(Some(timeout.unwrap_or(DEFAULT_WAIT))))
            }
            Control::Input { text, timeout } => environment.input(
                text,
                &waiting.yielding_after(Some(timeout.unwrap_or(DEFAULT_INPUT_WAIT))),
            ),
            Control::Interrupt | Control::Restart | Control::Close => {
                environment.interrupt(&waiting)
            }
        });
        let since = Since::before_now(running.started.elapsed());
        let response = self.with_changed_files(&inside, response, since);
        let kept = self.keep_state(slot, &mut inside.environment);
        let response = with_keeping_note(self.noted(slot, &inside, response), kept);
        drop(inside);
        self.record_answer(
            request.id.as_ref(),
            &request.environment,
            &response,
            running.started,
        );
        self.outcome(response)
    }

    fn slot(&self, name: &str) -> Option<Arc<Slot>> {
        if let Some(slot) = self.slots().iter().find(|s| s.name.as_str() == name) {
            return Some(Arc::clone(slot));
        }
        instance::split(name)?;
        self.instances
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|s| s.name.as_str() == name)
            .cloned()
    }

    /// The environments now, in display order (a plugin reloaded meanwhile
    /// is in the next list).
    fn slots(&self) -> Vec<Arc<Slot>> {
        self.slots
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn outcome(&self, response: CommandResponse) -> Outcome {
        let files = match &self.settings.project_dir {
            Some(project) => response
                .files
                .iter()
                .filter_map(|path| changes::describe(project, path))
                .collect(),
            None => Vec::new(),
        };
        let mut output = response.output;
        let first = std::mem::take(
            &mut *self
                .first_notice
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for (notice, in_output) in &first {
            if *in_output {
                output = format!("{}\n\n{output}", notice.section.content);
            }
        }
        let resumed = std::mem::take(
            &mut self
                .keeping
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .resumed,
        );
        let screen = self.screen_with(&first, resumed);
        Outcome {
            files,
            output,
            success: response.success,
            running: response.running,
            screen,
            incidents: response.incidents,
        }
    }

    /// The response, naming also the saved output and the files changed
    /// since `since` in the environment's working directory and the
    /// project root (for environments that have one), each once.
    fn with_changed_files(
        &self,
        inside: &Inside<'_>,
        mut response: CommandResponse,
        since: Since,
    ) -> CommandResponse {
        let Some(project) = &self.settings.project_dir else {
            return response;
        };
        for incident in &response.incidents {
            if let Incident::OutputCapped {
                saved_to: Some(path),
                ..
            } = incident
            {
                response.files.push(path.clone());
            }
        }
        let working_dir =
            catch_unwind(AssertUnwindSafe(|| inside.environment.working_dir())).unwrap_or(None);
        let mut reported = self.reported.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(dir) = working_dir {
            let found = reported.changed_since(project, &[dir, project.clone()], since);
            response.files.extend(found);
        }
        reported.remember(&response.files);
        drop(reported);
        let mut seen = std::collections::HashSet::new();
        let own = &self.settings.own_files;
        response
            .files
            .retain(|path| !own.contains(path) && seen.insert(path.clone()));
        response.files.truncate(changes::MAX_FILES);
        response
    }

    /// The environment's running command; a panic in it counts as none.
    fn running_in(&self, slot: &Slot, environment: &dyn Environment) -> Option<RunningCommand> {
        match catch_unwind(AssertUnwindSafe(|| environment.running())) {
            Ok(running) => running,
            Err(panic) => {
                self.emit(Event::Error {
                    context: format!("{} running", slot.name),
                    message: format!("panicked: {}", panic_message(panic.as_ref())),
                });
                None
            }
        }
    }

    /// A response still running gets the note that says how to go on.
    fn noted(
        &self,
        slot: &Slot,
        inside: &Inside<'_>,
        mut response: CommandResponse,
    ) -> CommandResponse {
        if response.running {
            let running = self.running_in(slot, &**inside.environment);
            if !response.output.is_empty() && !response.output.ends_with('\n') {
                response.output.push('\n');
            }
            response.output.push_str(&running::still_running_note(
                running.as_ref(),
                Instant::now(),
            ));
        }
        if let Some(watch) = &self.watch {
            for sentence in watch.after_answer() {
                if !response.output.is_empty() && !response.output.ends_with('\n') {
                    response.output.push('\n');
                }
                response.output.push_str("[envhost] ");
                response.output.push_str(&sentence);
                response.output.push('\n');
            }
        }
        response
    }

    /// Calls the environment; an error or a panic becomes a failed response
    /// (and an event), never a failure of the host.
    fn guarded(
        &self,
        slot: &Slot,
        call: impl FnOnce() -> Result<CommandResponse, EnvironmentError>,
    ) -> CommandResponse {
        let name = slot.name.as_str();
        match catch_unwind(AssertUnwindSafe(call)) {
            Ok(Ok(response)) => response,
            Ok(Err(err)) => {
                self.emit(Event::Error {
                    context: name.to_owned(),
                    message: err.to_string(),
                });
                CommandResponse::failure(format!("Environment error in {name}: {err}"))
            }
            Err(panic) => {
                let message = panic_message(panic.as_ref());
                self.emit(Event::Error {
                    context: name.to_owned(),
                    message: format!("panicked: {message}"),
                });
                CommandResponse::failure(format!(
                    "Environment error in {name}: internal failure (panic: {message}). \
                     The host is still running; this environment may have lost state."
                ))
            }
        }
    }

    /// The events of an answer about a command that started at `started`.
    fn record_answer(
        &self,
        id: Option<&RequestId>,
        environment: &str,
        response: &CommandResponse,
        started: Instant,
    ) {
        for incident in &response.incidents {
            self.emit(incident_event(environment, incident.clone()));
        }
        let duration_ms = started.elapsed().as_secs_f64() * 1000.0;
        let output = excerpt(&response.output, EVENT_OUTPUT_LIMIT);
        self.emit(if response.running {
            Event::CommandYielded {
                id: id.cloned(),
                environment: environment.to_owned(),
                duration_ms,
                output_bytes: response.output.len(),
                output,
            }
        } else {
            Event::CommandFinished {
                id: id.cloned(),
                environment: environment.to_owned(),
                success: response.success,
                duration_ms,
                output_bytes: response.output.len(),
                output,
            }
        });
    }

    /// A restart's events: the environment's own account of what was lost
    /// when it gives one, else its answer.
    fn record_restart(&self, slot: &Slot, response: &CommandResponse) {
        let name = slot.name.as_str();
        let mut recorded = false;
        for incident in &response.incidents {
            recorded |= matches!(incident, Incident::Restarted { .. });
            self.emit(incident_event(name, incident.clone()));
        }
        if response.success && !recorded {
            self.emit(Event::EnvironmentRestarted {
                name: name.to_owned(),
                reason: "the agent asked for a restart".to_owned(),
                lost: excerpt(&response.output, EVENT_OUTPUT_LIMIT),
            });
        }
    }

    fn unknown_environment(&self, name: &str) -> CommandResponse {
        let instances = self.instance_names();
        let mut available: Vec<String> = self.environment_names();
        available.extend(instances.iter().cloned());
        available.sort_unstable();
        let available = if available.is_empty() {
            "(none loaded)".to_owned()
        } else {
            available.join(", ")
        };
        let shown = if name.is_empty() { "(empty)" } else { name };
        CommandResponse::failure(format!(
            "Unknown environment: {shown}\nAvailable: {available}"
        ))
    }

    /// Shuts every environment down, once. A failing or panicking shutdown
    /// is recorded and the others still run. A request in progress in
    /// another thread is waited for: set the cancel flag first so that it
    /// ends promptly.
    pub fn shutdown(&self, reason: &str) {
        if self.shut_down.swap(true, Ordering::SeqCst) {
            return;
        }
        self.emit(Event::HostStopping {
            reason: reason.to_owned(),
        });
        let instances = std::mem::take(
            &mut *self
                .instances
                .write()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for slot in self.slots().iter().chain(&instances) {
            let mut inside = slot.enter("shutdown");
            let environment = &mut inside.environment;
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| environment.shutdown())) {
                let message = panic_message(panic.as_ref());
                eprintln!(
                    "envhost: shutting down {} failed: {message}",
                    slot.name.as_str()
                );
                self.emit(Event::Error {
                    context: format!("{} shutdown", slot.name),
                    message,
                });
            }
        }
    }
}

impl Drop for Orchestrator {
    fn drop(&mut self) {
        self.shutdown("orchestrator dropped");
    }
}

fn incident_event(environment: &str, incident: Incident) -> Event {
    let environment = environment.to_owned();
    match incident {
        Incident::TimedOut { after } => Event::CommandTimedOut {
            environment,
            after_ms: duration_ms(after),
        },
        Incident::Restarted { reason, lost } => Event::EnvironmentRestarted {
            name: environment,
            reason,
            lost,
        },
        Incident::Trapped { cause } => Event::PluginTrapped { environment, cause },
        Incident::OutputCapped {
            total_bytes,
            saved_to,
        } => Event::OutputCapped {
            environment,
            total_bytes,
            saved_to,
        },
    }
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// `text` cut to at most `limit` bytes on a character boundary, with a note.
fn excerpt(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    let (head, omitted) = text::head(text, limit);
    format!("{head}\n[... {omitted} more bytes not recorded]")
}
