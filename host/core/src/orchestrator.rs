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
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, TryLockError};
use std::thread;
use std::time::{Duration, Instant};

use envhost_files::changes::{self, ProducedFile, Reported, Since};

use crate::environment::{
    CancelFlag, CommandContext, CommandResponse, Environment, EnvironmentError, EnvironmentKind,
    EnvironmentName, HostWatch, Incident, Reach, RunningCommand, ScreenSection, StateKeeper, Usage,
};
use crate::events::{Event, EventBus, panic_message};
use crate::instance::{self, DEFAULT_MAX_INSTANCES, InstanceFactory};
use crate::request::{
    CommandRequest, Control, ControlRequest, DEFAULT_INPUT_WAIT, DEFAULT_WAIT, RequestId,
};
use crate::running;
use crate::screen::{NoticeSection, Screen};
use crate::text;

/// How much of a command's output goes into a `command_finished` event.
const EVENT_OUTPUT_LIMIT: usize = 16 * 1024;

/// Lines of an error section on the screen.
const ERROR_SECTION_LINES: usize = 10;

/// Display order of the built-in environments; plugins follow, by name.
const BUILTIN_ORDER: [&str; 3] = ["bash", "python", "editor"];

/// How long a screen waits for an environment that another thread holds
/// without a request inside (it is drawing its own screen) before it shows
/// the environment as busy.
const SCREEN_PATIENCE: Duration = Duration::from_millis(100);

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

struct Slot {
    name: EnvironmentName,
    kind: EnvironmentKind,
    /// For a named instance (`bash:server`), its kind (`bash`).
    instance_of: Option<EnvironmentName>,
    /// How to use it, asked once: it is fixed for the environment's life.
    usage: Usage,
    environment: Mutex<Box<dyn Environment>>,
    view: Mutex<View>,
}

/// What other threads see of an environment while a request is inside it.
#[derive(Default)]
struct View {
    /// The request inside, and since when.
    inside: Option<(&'static str, Instant)>,
    /// The section last shown.
    last: Option<ScreenSection>,
}

/// A request inside an environment: holds its lock, and marks the
/// environment busy for screens taken meanwhile until dropped.
struct Inside<'a> {
    slot: &'a Slot,
    environment: MutexGuard<'a, Box<dyn Environment>>,
}

impl Slot {
    fn enter(&self, what: &'static str) -> Inside<'_> {
        let environment = self
            .environment
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.view().inside = Some((what, Instant::now()));
        Inside {
            slot: self,
            environment,
        }
    }

    fn view(&self) -> MutexGuard<'_, View> {
        self.view.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The environment for a screen, or the busy section to show instead.
    fn for_screen(&self) -> Result<MutexGuard<'_, Box<dyn Environment>>, ScreenSection> {
        let began = Instant::now();
        loop {
            match self.environment.try_lock() {
                Ok(environment) => return Ok(environment),
                Err(TryLockError::Poisoned(poisoned)) => return Ok(poisoned.into_inner()),
                Err(TryLockError::WouldBlock) => {}
            }
            let view = self.view();
            let busy = match view.inside {
                Some(inside) => Some(inside),
                None if began.elapsed() >= SCREEN_PATIENCE => Some(("screen", began)),
                None => None,
            };
            if let Some((what, since)) = busy {
                return Err(busy_section(view.last.as_ref(), what, since.elapsed()));
            }
            drop(view);
            thread::sleep(Duration::from_millis(1));
        }
    }
}

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        self.slot.view().inside = None;
    }
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

    /// Lets `kind` (a registered environment: bash, python) have named
    /// instances (`bash:NAME`), each made by `factory` on its first
    /// request.
    pub fn allow_instances(
        &mut self,
        kind: &str,
        factory: InstanceFactory,
    ) -> Result<(), RegisterError> {
        let Some(slot) = self.slot(kind) else {
            return Err(RegisterError::NoSuchKind(kind.to_owned()));
        };
        let name = slot.name.clone();
        self.factories.retain(|(known, _)| *known != name);
        self.factories.push((name, factory));
        Ok(())
    }

    /// The kinds that have named instances (bash, python), in display order.
    pub fn instance_kinds(&self) -> Vec<String> {
        self.slots()
            .iter()
            .filter(|slot| self.factory(slot.name.as_str()).is_some())
            .map(|slot| slot.name.as_str().to_owned())
            .collect()
    }

    /// The named instances alive (`bash:server`), in display order.
    pub fn instance_names(&self) -> Vec<String> {
        self.instances
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|slot| slot.name.to_string())
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

    fn factory(&self, kind: &str) -> Option<&InstanceFactory> {
        self.factories
            .iter()
            .find(|(known, _)| known.as_str() == kind)
            .map(|(_, factory)| factory)
    }

    /// The environment `name` names, creating it if it is a named instance
    /// not yet alive; or the words that refuse it (an unknown environment,
    /// a bad instance name, a kind with one instance, too many instances).
    fn open(&self, name: &str) -> Result<Arc<Slot>, String> {
        if let Some(slot) = self.slot(name) {
            return Ok(slot);
        }
        let (kind, instance_name) = self.instance_address(name)?;
        let mut instances = self
            .instances
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        // Another thread may have opened it since the look above.
        if let Some(slot) = instances.iter().find(|s| s.name.as_str() == name) {
            return Ok(Arc::clone(slot));
        }
        let live: Vec<&str> = instances
            .iter()
            .filter(|slot| slot.instance_of.as_ref() == Some(&kind))
            .map(|slot| slot.name.as_str())
            .collect();
        if live.len() >= self.settings.max_instances {
            return Err(instance::too_many(name, kind.as_str(), &live));
        }
        let Some(factory) = self.factory(kind.as_str()) else {
            return Err(instance::single(kind.as_str(), &self.instance_kinds()));
        };
        let environment = catch_unwind(AssertUnwindSafe(factory)).map_err(|panic| {
            format!(
                "{name} could not be created (internal failure: {}); the host is still running.",
                panic_message(panic.as_ref())
            )
        })?;
        let usage = self.usage(kind.as_str()).unwrap_or_default();
        let slot = Arc::new(Slot {
            name: EnvironmentName::instance(&kind, instance_name),
            kind: EnvironmentKind::Builtin,
            instance_of: Some(kind.clone()),
            usage,
            environment: Mutex::new(environment),
            view: Mutex::new(View::default()),
        });
        instances.push(Arc::clone(&slot));
        instances.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
        drop(instances);
        self.emit(Event::EnvironmentLoaded {
            name: name.to_owned(),
            kind: EnvironmentKind::Builtin,
            detail: Some(format!("another instance of {kind}")),
        });
        Ok(slot)
    }

    /// `name` as `(kind, instance name)` if it is a valid address of an
    /// instance of a kind that has them; otherwise the words that refuse
    /// it.
    fn instance_address<'n>(&self, name: &'n str) -> Result<(EnvironmentName, &'n str), String> {
        let Some((kind, instance_name)) = instance::split(name) else {
            return Err(self.unknown_environment(name).output);
        };
        let kinds = self.instance_kinds();
        let Some(slot) = self.slot(kind) else {
            return Err(instance::unknown_kind(name, kind, &kinds));
        };
        if self.factory(kind).is_none() {
            return Err(instance::single(kind, &kinds));
        }
        instance::check_name(kind, instance_name).map_err(|err| format!("{err}."))?;
        Ok((slot.name.clone(), instance_name))
    }

    /// Ends the named instance `request` is for and everything it runs,
    /// and removes it (and its kept state); refuses a default instance or
    /// one that is not open.
    fn close(&self, request: &ControlRequest) -> CommandResponse {
        let name = request.environment.as_str();
        if self.slots().iter().any(|s| s.name.as_str() == name) {
            let default = self.factory(name).is_some();
            return CommandResponse::failure(instance::not_closable(
                name,
                default,
                &self.instance_kinds(),
            ));
        }
        let removed = {
            let mut instances = self
                .instances
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            instances
                .iter()
                .position(|s| s.name.as_str() == name)
                .map(|index| instances.remove(index))
        };
        let Some(slot) = removed else {
            return CommandResponse::failure(self.not_open(name, "close"));
        };
        // No new request finds it now; one inside it is waited for.
        let mut inside = slot.enter("close");
        let running = self.running_in(&slot, &**inside.environment);
        let mut ended =
            catch_unwind(AssertUnwindSafe(|| inside.environment.holdings())).unwrap_or_default();
        if let Some(running) = running {
            ended.push(format!(
                "the running command {}",
                running::quoted_command(&running.command)
            ));
        }
        let environment = &mut inside.environment;
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| environment.shutdown())) {
            self.emit(Event::Error {
                context: format!("{name} shutdown"),
                message: panic_message(panic.as_ref()),
            });
        }
        drop(inside);
        if let Some(keeper) = &self.keeper {
            self.keeping
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .unsaved
                .retain(|(kept, _)| *kept != slot.name);
            keeper.forget(name);
        }
        let ended = if ended.is_empty() {
            "nothing was running in it".to_owned()
        } else {
            format!("ended {}", text::listed(&ended))
        };
        self.emit(Event::EnvironmentClosed {
            name: name.to_owned(),
            ended: ended.clone(),
        });
        CommandResponse::success(instance::closed(name, &ended))
    }

    /// Why a request that needs a live environment found none at `name`.
    fn not_open(&self, name: &str, what: &str) -> String {
        match self.instance_address(name) {
            Ok((kind, _)) => {
                let live: Vec<String> = self
                    .instance_names()
                    .into_iter()
                    .filter(|open| instance::split(open).is_some_and(|(k, _)| k == kind.as_str()))
                    .collect();
                instance::not_open(name, what, kind.as_str(), &live)
            }
            Err(why) => why,
        }
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

    /// Every environment's section, in display order, then the notices. An
    /// environment with a running command shows it first; one that another
    /// request is inside shows its last section, marked busy.
    pub fn screen(&self) -> Screen {
        // A screen asked for before the first command shows the first
        // notice too; the first command's answer says it and ends it.
        let first = self
            .first_notice
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        self.screen_with(&first, false)
    }

    /// The screen, with `first` (the notice of the first answer) and,
    /// when states are saved again after they were not (`resumed`), a
    /// session line that says so. While states are not being saved, the
    /// session line says that, on every screen.
    fn screen_with(&self, first: &[(NoticeSection, bool)], resumed: bool) -> Screen {
        let mut screen = Screen::new();
        let instances = self
            .instances
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for slot in &self.slots() {
            let mut section = self.section(slot);
            if self.factory(slot.name.as_str()).is_some() {
                section = with_instance_hint(section, slot.name.as_str());
            }
            screen.push(slot.name.as_str(), section);
            for instance in instances
                .iter()
                .filter(|instance| instance.instance_of.as_ref() == Some(&slot.name))
            {
                screen.push(instance.name.as_str(), self.section(instance));
            }
        }
        for notice in &self.notices {
            screen.push(notice.key.clone(), notice.section.clone());
        }
        let failing = self
            .keeping
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .failing
            .clone();
        let line = match failing {
            Some(reason) => Some(format!(
                "Session state is not being kept: {reason}. envhost tries again after every answer."
            )),
            None => resumed.then(|| RESUMED_LINE.to_owned()),
        };
        for (notice, _) in first {
            screen.push(notice.key.clone(), notice.section.clone());
        }
        if let Some(line) = line {
            screen.push(
                SESSION_KEY,
                ScreenSection::with_max_lines(line, SESSION_LINES),
            );
        }
        screen
    }

    fn section(&self, slot: &Slot) -> ScreenSection {
        let mut environment = match slot.for_screen() {
            Ok(environment) => environment,
            Err(busy) => return busy,
        };
        // The guard stays outside the unwinding closure: a panicking screen
        // does not poison the environment's lock.
        let section = match catch_unwind(AssertUnwindSafe(|| environment.screen())) {
            Ok(Ok(section)) => section,
            Ok(Err(err)) => {
                drop(environment);
                return self.failed_section(slot, err.to_string());
            }
            Err(panic) => {
                drop(environment);
                let message = format!("panic: {}", panic_message(panic.as_ref()));
                return self.failed_section(slot, message);
            }
        };
        let section = match self.running_in(slot, &**environment) {
            Some(running) => with_running_block(section, &running),
            None => section,
        };
        slot.view().last = Some(section.clone());
        section
    }

    fn failed_section(&self, slot: &Slot, message: String) -> ScreenSection {
        let name = slot.name.as_str();
        let section = error_section(name, &message);
        slot.view().last = Some(section.clone());
        self.emit(Event::Error {
            context: format!("{name} screen"),
            message,
        });
        section
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

fn display_rank(slot: &Slot) -> (usize, String) {
    let builtin = BUILTIN_ORDER
        .iter()
        .position(|b| *b == slot.name.as_str() && slot.kind == EnvironmentKind::Builtin);
    match builtin {
        Some(position) => (position, String::new()),
        None => (BUILTIN_ORDER.len(), slot.name.to_string()),
    }
}

/// `section` (a default instance's) with the one line that says how to
/// open another instance of its kind.
fn with_instance_hint(section: ScreenSection, kind: &str) -> ScreenSection {
    ScreenSection::with_max_lines(
        format!("{}\n{}", section.content, instance::hint(kind)),
        section.max_lines.saturating_add(1),
    )
}

fn error_section(name: &str, message: &str) -> ScreenSection {
    ScreenSection::with_max_lines(
        format!("[Error getting screen from {name}: {message}]"),
        ERROR_SECTION_LINES,
    )
}

/// `section` headed by the block that shows its running command; the block
/// adds to the section's lines rather than pushing its own lines out.
fn with_running_block(section: ScreenSection, running: &RunningCommand) -> ScreenSection {
    let block = running::screen_block(running, Instant::now());
    let block_lines = block.lines().count() + 1;
    ScreenSection::with_max_lines(
        format!("{block}\n{}", section.content),
        section.max_lines.saturating_add(block_lines),
    )
}

/// The section shown while another request (`what`, for `busy_for`) is
/// inside the environment: the last one shown, under a line saying so.
fn busy_section(last: Option<&ScreenSection>, what: &str, busy_for: Duration) -> ScreenSection {
    let line = running::busy_line(what, busy_for, last.is_some());
    match last {
        Some(last) => ScreenSection::with_max_lines(
            format!("{line}\n{}", last.content),
            last.max_lines.saturating_add(1),
        ),
        None => ScreenSection::new(line),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::environment::EnvironmentError;
    use crate::events::{Observer, ObserverError, StampedEvent};
    use std::sync::Arc;

    struct Echo {
        screens: usize,
    }
    impl Environment for Echo {
        fn handle_command(
            &mut self,
            command: &str,
            context: &CommandContext,
        ) -> Result<CommandResponse, EnvironmentError> {
            match command {
                "panic" => panic!("echo exploded"),
                "cancelled?" => Ok(CommandResponse::success(
                    context.cancel.is_cancelled().to_string(),
                )),
                "fail" => Err(EnvironmentError::Failed("child vanished".into())),
                "slow" => Ok(CommandResponse::failure("took too long").with_incident(
                    Incident::TimedOut {
                        after: context.timeout.unwrap_or_default(),
                    },
                )),
                other => Ok(CommandResponse::success(other)),
            }
        }
        fn screen(&mut self) -> Result<ScreenSection, EnvironmentError> {
            self.screens += 1;
            Ok(ScreenSection::new(format!("screens: {}", self.screens)))
        }
    }

    struct BrokenScreen;
    impl Environment for BrokenScreen {
        fn handle_command(
            &mut self,
            _: &str,
            _: &CommandContext,
        ) -> Result<CommandResponse, EnvironmentError> {
            Ok(CommandResponse::success(""))
        }
        fn screen(&mut self) -> Result<ScreenSection, EnvironmentError> {
            panic!("screen exploded")
        }
        fn shutdown(&mut self) {
            panic!("shutdown exploded")
        }
    }

    struct Recorder(Arc<Mutex<Vec<Event>>>);
    impl Observer for Recorder {
        fn name(&self) -> &str {
            "recorder"
        }
        fn observe(&mut self, e: &StampedEvent) -> Result<(), ObserverError> {
            self.0.lock().unwrap().push(e.event.clone());
            Ok(())
        }
    }

    fn orchestrator() -> (Orchestrator, Arc<Mutex<Vec<Event>>>) {
        orchestrator_with(OrchestratorSettings::new(Duration::from_secs(7)))
    }

    fn orchestrator_with(settings: OrchestratorSettings) -> (Orchestrator, Arc<Mutex<Vec<Event>>>) {
        let events = Arc::new(Mutex::new(Vec::new()));
        let mut bus = EventBus::new();
        bus.subscribe(Box::new(Recorder(Arc::clone(&events))));
        let orch = Orchestrator::new(settings, bus, CancelFlag::new());
        for (name, kind) in [
            ("zeta", EnvironmentKind::Plugin),
            ("python", EnvironmentKind::Builtin),
            ("alpha", EnvironmentKind::Plugin),
            ("bash", EnvironmentKind::Builtin),
        ] {
            orch.register(
                EnvironmentName::new(name).unwrap(),
                kind,
                Box::new(Echo { screens: 0 }),
                None,
            )
            .unwrap();
        }
        (orch, events)
    }

    fn request(env: &str, command: &str) -> CommandRequest {
        CommandRequest {
            environment: env.into(),
            command: command.into(),
            timeout: None,
            yield_after: None,
            id: None,
        }
    }

    /// Keeps every state a command hands it (the command is the state).
    struct Stateful(Option<String>);
    impl Environment for Stateful {
        fn handle_command(
            &mut self,
            command: &str,
            _: &CommandContext,
        ) -> Result<CommandResponse, EnvironmentError> {
            if command != "nothing" {
                self.0 = Some(command.to_owned());
            }
            Ok(CommandResponse::success(""))
        }
        fn screen(&mut self) -> Result<ScreenSection, EnvironmentError> {
            Ok(ScreenSection::new(""))
        }
        fn save_state(&mut self) -> Option<String> {
            self.0.take()
        }
    }

    /// Keeps states in memory, or refuses them while `full` is set.
    #[derive(Clone, Default)]
    struct Disk {
        full: Arc<AtomicBool>,
        kept: Arc<Mutex<Vec<(String, String)>>>,
    }
    impl StateKeeper for Disk {
        fn keep(&self, environment: &str, state: &str) -> Result<(), String> {
            if self.full.load(Ordering::SeqCst) {
                return Err("the disk is full".to_owned());
            }
            self.kept
                .lock()
                .unwrap()
                .push((environment.to_owned(), state.to_owned()));
            Ok(())
        }
    }

    #[test]
    fn states_not_kept_are_said_once_shown_and_kept_when_the_keeper_takes_them_again() {
        let mut orch = Orchestrator::new(
            OrchestratorSettings::new(Duration::from_secs(7)),
            EventBus::new(),
            CancelFlag::new(),
        );
        for name in ["bash", "python"] {
            orch.register(
                EnvironmentName::new(name).unwrap(),
                EnvironmentKind::Builtin,
                Box::new(Stateful(None)),
                None,
            )
            .unwrap();
        }
        let disk = Disk::default();
        orch.keep_states(Box::new(disk.clone()));
        let has_line =
            |outcome: &Outcome| outcome.screen.sections().any(|(key, _)| key == SESSION_KEY);

        let kept = orch.execute(&request("bash", "a=1"));
        assert_eq!(kept.output, "");
        assert!(!has_line(&kept));

        disk.full.store(true, Ordering::SeqCst);
        let refused = orch.execute(&request("bash", "a=2"));
        assert!(
            refused
                .output
                .starts_with("[envhost] Session state is not being saved: the disk is full."),
            "{}",
            refused.output
        );
        for outcome in [
            orch.execute(&request("python", "x=1")),
            orch.execute(&request("bash", "nothing")),
        ] {
            assert_eq!(outcome.output, "", "said once");
            let (_, line) = outcome
                .screen
                .sections()
                .find(|(key, _)| *key == SESSION_KEY)
                .expect("the session line");
            assert_eq!(
                line.content,
                "Session state is not being kept: the disk is full. envhost tries again after every answer."
            );
        }
        assert!(orch.screen().sections().any(|(key, _)| key == SESSION_KEY));

        // Room again: an answer that changes nothing keeps what was not kept.
        disk.full.store(false, Ordering::SeqCst);
        let again = orch.execute(&request("bash", "nothing"));
        assert_eq!(again.output, format!("{RESUMED_NOTE}\n"));
        let (_, line) = again
            .screen
            .sections()
            .find(|(key, _)| *key == SESSION_KEY)
            .expect("the session line");
        assert_eq!(line.content, RESUMED_LINE);
        let mut kept = disk.kept.lock().unwrap().clone();
        kept.sort();
        assert_eq!(
            kept,
            [
                ("bash".to_owned(), "a=1".to_owned()),
                ("bash".to_owned(), "a=2".to_owned()),
                ("python".to_owned(), "x=1".to_owned()),
            ]
        );
        let after = orch.execute(&request("bash", "nothing"));
        assert_eq!(after.output, "");
        assert!(!has_line(&after));
    }

    /// Counts its shutdowns in a shared counter.
    struct Stoppable(Arc<Mutex<usize>>, &'static str);
    impl Environment for Stoppable {
        fn handle_command(
            &mut self,
            _: &str,
            _: &CommandContext,
        ) -> Result<CommandResponse, EnvironmentError> {
            Ok(CommandResponse::success(self.1))
        }
        fn screen(&mut self) -> Result<ScreenSection, EnvironmentError> {
            Ok(ScreenSection::new(self.1))
        }
        fn shutdown(&mut self) {
            *self.0.lock().unwrap() += 1;
        }
    }

    #[test]
    fn a_replaced_plugin_is_shut_down_and_a_builtin_is_never_replaced() {
        let (orch, _) = orchestrator();
        let stopped = Arc::new(Mutex::new(0));
        let name = |n: &str| EnvironmentName::new(n).unwrap();
        let plugin = |word| Box::new(Stoppable(Arc::clone(&stopped), word));
        orch.replace(name("kv"), EnvironmentKind::Plugin, plugin("old"), None)
            .unwrap();
        assert_eq!(orch.execute(&request("kv", "x")).output, "old", "added");
        orch.replace(name("kv"), EnvironmentKind::Plugin, plugin("new"), None)
            .unwrap();
        assert_eq!(*stopped.lock().unwrap(), 1, "the old one was shut down");
        let outcome = orch.execute(&request("kv", "x"));
        assert_eq!(outcome.output, "new");
        assert_eq!(outcome.screen.get("kv").unwrap().content, "new");
        let names: Vec<&str> = outcome.screen.sections().map(|(n, _)| n).collect();
        assert_eq!(names, ["bash", "python", "alpha", "kv", "zeta"]);
        assert!(
            orch.replace(name("bash"), EnvironmentKind::Plugin, plugin("evil"), None)
                .is_err()
        );
        assert_eq!(orch.execute(&request("bash", "hi")).output, "hi");
    }

    /// Counts what it ends, to show `close` shuts an instance down once.
    struct Holder {
        shut: Arc<Mutex<usize>>,
    }
    impl Environment for Holder {
        fn handle_command(
            &mut self,
            command: &str,
            _: &CommandContext,
        ) -> Result<CommandResponse, EnvironmentError> {
            Ok(CommandResponse::success(command))
        }
        fn screen(&mut self) -> Result<ScreenSection, EnvironmentError> {
            Ok(ScreenSection::new("holder"))
        }
        fn holdings(&self) -> Vec<String> {
            vec!["the shell".into(), "background job %1 `x`".into()]
        }
        fn shutdown(&mut self) {
            *self.shut.lock().unwrap() += 1;
        }
    }

    fn with_instances(max: usize) -> (Orchestrator, Events, Arc<Mutex<usize>>) {
        let settings = OrchestratorSettings {
            max_instances: max,
            ..OrchestratorSettings::new(Duration::from_secs(7))
        };
        let (mut orch, events) = orchestrator_with(settings);
        let shut = Arc::new(Mutex::new(0));
        let counter = Arc::clone(&shut);
        orch.allow_instances(
            "bash",
            Box::new(move || {
                Box::new(Holder {
                    shut: Arc::clone(&counter),
                }) as Box<dyn Environment>
            }),
        )
        .unwrap();
        (orch, events, shut)
    }

    #[test]
    fn instances_open_on_first_use_show_after_their_kind_and_close() {
        let (mut orch, events, shut) = with_instances(2);
        assert_eq!(
            orch.allow_instances("ruby", Box::new(|| unreachable!())),
            Err(RegisterError::NoSuchKind("ruby".into()))
        );
        let first = orch.execute(&request("bash:b", "hi"));
        assert_eq!(first.output, "hi");
        orch.execute(&request("bash:a", "x"));
        let screen = orch.screen();
        let keys: Vec<&str> = screen.sections().map(|(key, _)| key).collect();
        assert_eq!(
            keys,
            ["bash", "bash:a", "bash:b", "python", "alpha", "zeta"]
        );
        assert_eq!(orch.instance_names(), ["bash:a", "bash:b"]);
        assert!(
            orch.screen()
                .get("bash")
                .unwrap()
                .content
                .ends_with("\nAnother bash: send to \"bash:NAME\" to open one (its own state and section); close ends it.")
        );
        assert_eq!(orch.screen().get("bash:a").unwrap().content, "holder");
        let full = orch.execute(&request("bash:c", "x"));
        assert!(
            full.output
                .starts_with("bash:c was not opened: 2 instances of bash are open"),
            "{}",
            full.output
        );
        assert!(orch.screen().get("bash:c").is_none());

        let closed = orch.control(&control("bash:a", Control::Close));
        assert!(closed.success);
        assert_eq!(
            closed.output,
            "Closed bash:a: ended the shell and background job %1 `x`. Its section is gone; a \
             command sent to bash:a opens a fresh one."
        );
        assert_eq!(*shut.lock().unwrap(), 1);
        assert!(closed.screen.get("bash:a").is_none());
        let again = orch.control(&control("bash:a", Control::Close));
        assert!(
            again
                .output
                .starts_with("bash:a is not open, so there is nothing to close")
        );
        let default = orch.control(&control("bash", Control::Close));
        assert!(!default.success);
        assert!(default.output.contains("restart"), "{}", default.output);
        for (name, words) in [
            ("python:x", "python has one instance only"),
            ("ruby:x", "Unknown environment kind ruby in ruby:x"),
            ("bash:", "bash: names no instance"),
            ("bash:a b", "bash:a b is not an instance name"),
        ] {
            let refused = orch.execute(&request(name, "x"));
            assert!(!refused.success);
            assert!(
                refused.output.starts_with(words),
                "{name}: {}",
                refused.output
            );
        }
        orch.shutdown("test");
        assert_eq!(*shut.lock().unwrap(), 2, "the instance left is shut down");
        let events = events.lock().unwrap();
        assert!(events.iter().any(|e| matches!(
            e,
            Event::EnvironmentClosed { name, .. } if name == "bash:a"
        )));
        assert!(events.iter().any(|e| matches!(
            e,
            Event::EnvironmentLoaded { name, .. } if name == "bash:b"
        )));
    }

    #[test]
    fn screen_order_is_builtins_then_plugins_by_name() {
        let (orch, _) = orchestrator();
        let outcome = orch.execute(&request("bash", "hi"));
        let names: Vec<&str> = outcome.screen.sections().map(|(n, _)| n).collect();
        assert_eq!(names, ["bash", "python", "alpha", "zeta"]);
        assert_eq!(outcome.output, "hi");
        assert!(outcome.success);
    }

    #[test]
    fn one_request_is_cancelled_alone_and_the_hosts_flag_still_reaches_it() {
        let (orch, _) = orchestrator();
        let host = orch.cancel.clone();
        let own = host.child();
        own.cancel();
        let asked = |cancel: &CancelFlag| {
            orch.execute_with_cancel(&request("bash", "cancelled?"), cancel)
                .output
        };
        assert_eq!(asked(&own), "true");
        assert_eq!(orch.execute(&request("bash", "cancelled?")).output, "false");
        let other = host.child();
        host.cancel();
        assert_eq!(asked(&other), "true");
    }

    #[test]
    fn descriptions_come_in_display_order_and_assume_the_worst() {
        let (orch, _) = orchestrator();
        let described = orch.describe();
        let names: Vec<&str> = described.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["bash", "python", "alpha", "zeta"]);
        assert_eq!(described[2].kind, EnvironmentKind::Plugin);
        assert_eq!(described[0].reach, Reach::UNBOUNDED);
        assert_eq!(described[0].usage, Usage::default());
    }

    #[test]
    fn unknown_environment_lists_available_sorted() {
        let (orch, _) = orchestrator();
        let outcome = orch.execute(&request("ruby", "puts 1"));
        assert!(!outcome.success);
        assert_eq!(
            outcome.output,
            "Unknown environment: ruby\nAvailable: alpha, bash, python, zeta"
        );
    }

    #[test]
    fn panics_and_errors_become_failed_responses() {
        let (orch, events) = orchestrator();
        let outcome = orch.execute(&request("alpha", "panic"));
        assert!(!outcome.success);
        assert!(outcome.output.contains("Environment error in alpha"));
        assert!(outcome.output.contains("echo exploded"));
        let outcome = orch.execute(&request("alpha", "fail"));
        assert_eq!(outcome.output, "Environment error in alpha: child vanished");
        // And the environment still answers.
        assert!(orch.execute(&request("alpha", "ok")).success);
        let errors = events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| matches!(e, Event::Error { .. }))
            .count();
        assert_eq!(errors, 2);
    }

    #[test]
    fn incidents_become_events_and_default_timeout_is_passed() {
        let (orch, events) = orchestrator();
        orch.execute(&request("bash", "slow"));
        let events = events.lock().unwrap();
        assert!(events.contains(&Event::CommandTimedOut {
            environment: "bash".into(),
            after_ms: 7000
        }));
        assert!(matches!(
            events.last(),
            Some(Event::CommandFinished { success: false, .. })
        ));
    }

    #[test]
    fn broken_screen_shows_error_in_its_section_only() {
        let (orch, _) = orchestrator();
        orch.register(
            EnvironmentName::new("broken").unwrap(),
            EnvironmentKind::Plugin,
            Box::new(BrokenScreen),
            None,
        )
        .unwrap();
        let outcome = orch.execute(&request("bash", "x"));
        let broken = outcome.screen.get("broken").unwrap();
        assert!(
            broken
                .content
                .starts_with("[Error getting screen from broken: panic: screen exploded")
        );
        assert_eq!(broken.max_lines, ERROR_SECTION_LINES);
        assert_eq!(outcome.screen.get("bash").unwrap().content, "screens: 1");
        orch.shutdown("test"); // the panicking shutdown is survived
    }

    struct Described;
    impl Environment for Described {
        fn handle_command(
            &mut self,
            _: &str,
            _: &CommandContext,
        ) -> Result<CommandResponse, EnvironmentError> {
            Ok(CommandResponse::success(""))
        }
        fn screen(&mut self) -> Result<ScreenSection, EnvironmentError> {
            Ok(ScreenSection::new(""))
        }
        fn usage(&self) -> Usage {
            Usage {
                summary: "Counts things.".into(),
                commands: Vec::new(),
                ..Usage::default()
            }
        }
    }

    #[test]
    fn usage_is_asked_once_and_given_without_locking() {
        let (orch, _) = orchestrator();
        orch.register(
            EnvironmentName::new("counter").unwrap(),
            EnvironmentKind::Plugin,
            Box::new(Described),
            None,
        )
        .unwrap();
        assert_eq!(orch.usage("counter").unwrap().summary, "Counts things.");
        assert_eq!(orch.usage("bash"), Some(Usage::default()));
        assert_eq!(orch.usage("nowhere"), None);
    }

    #[test]
    fn duplicate_names_are_refused() {
        let (orch, _) = orchestrator();
        let err = orch
            .register(
                EnvironmentName::new("bash").unwrap(),
                EnvironmentKind::Plugin,
                Box::new(Echo { screens: 0 }),
                None,
            )
            .unwrap_err();
        assert_eq!(err, RegisterError::Duplicate("bash".into()));
    }

    #[test]
    fn excerpt_respects_char_boundaries() {
        assert_eq!(excerpt("héllo", 2), "h\n[... 5 more bytes not recorded]");
        assert_eq!(excerpt("abc", 3), "abc");
    }

    /// A command that yields: "long" runs for three parts (one per answer),
    /// "prompt" waits for a line of input; every context is recorded.
    struct Yielder {
        running: Option<RunningCommand>,
        part: usize,
        contexts: Contexts,
        typed: Typed,
    }

    impl Yielder {
        fn start(&mut self, command: &str, waiting: bool) {
            self.running = Some(RunningCommand {
                command: command.into(),
                started: Instant::now(),
                output_bytes: 7,
                last_line: Some("part 1".into()),
                waiting_for_input: waiting,
            });
            self.part = 1;
        }
        fn record(&self, context: &CommandContext) {
            self.contexts
                .lock()
                .unwrap()
                .push((context.timeout, context.yield_after));
        }
    }

    impl Environment for Yielder {
        fn handle_command(
            &mut self,
            command: &str,
            context: &CommandContext,
        ) -> Result<CommandResponse, EnvironmentError> {
            self.record(context);
            if context.yield_after.is_none() {
                return Ok(CommandResponse::success(format!("{command} done")));
            }
            self.start(command, command == "prompt");
            Ok(CommandResponse::still_running("part 1"))
        }
        fn screen(&mut self) -> Result<ScreenSection, EnvironmentError> {
            Ok(ScreenSection::with_max_lines("Yielder at rest", 3))
        }
        fn running(&self) -> Option<RunningCommand> {
            self.running.clone()
        }
        fn wait(&mut self, context: &CommandContext) -> Result<CommandResponse, EnvironmentError> {
            self.record(context);
            self.part += 1;
            if self.part < 3 {
                return Ok(CommandResponse::still_running(format!(
                    "part {}\n",
                    self.part
                )));
            }
            self.running = None;
            Ok(CommandResponse::success("part 3\nend\n"))
        }
        fn input(
            &mut self,
            text: &str,
            context: &CommandContext,
        ) -> Result<CommandResponse, EnvironmentError> {
            self.typed.lock().unwrap().push(text.to_owned());
            self.wait(context)
        }
        fn interrupt(
            &mut self,
            context: &CommandContext,
        ) -> Result<CommandResponse, EnvironmentError> {
            self.record(context);
            self.running = None;
            Ok(CommandResponse::failure("^C interrupted\n"))
        }
        fn restart(
            &mut self,
            context: &CommandContext,
        ) -> Result<CommandResponse, EnvironmentError> {
            self.record(context);
            self.running = None;
            Ok(CommandResponse::success(
                "Started afresh; lost: everything.",
            ))
        }
    }

    /// Each context's limit and yield, as the environment saw them.
    type Contexts = Arc<Mutex<Vec<(Option<Duration>, Option<Duration>)>>>;
    /// What was typed into the environment.
    type Typed = Arc<Mutex<Vec<String>>>;
    type Events = Arc<Mutex<Vec<Event>>>;

    fn with_yielder(settings: OrchestratorSettings) -> (Orchestrator, Events, Contexts, Typed) {
        let (orch, events) = orchestrator_with(settings);
        let contexts: Contexts = Arc::default();
        let typed = Arc::new(Mutex::new(Vec::new()));
        orch.register(
            EnvironmentName::new("job").unwrap(),
            EnvironmentKind::Plugin,
            Box::new(Yielder {
                running: None,
                part: 0,
                contexts: Arc::clone(&contexts),
                typed: Arc::clone(&typed),
            }),
            None,
        )
        .unwrap();
        (orch, events, contexts, typed)
    }

    fn yielding(env: &str, command: &str, after_ms: u64) -> CommandRequest {
        CommandRequest {
            yield_after: Some(Duration::from_millis(after_ms)),
            ..request(env, command)
        }
    }

    fn control(env: &str, control: Control) -> ControlRequest {
        ControlRequest {
            environment: env.into(),
            control,
            id: Some(RequestId::from(9_i64)),
        }
    }

    #[test]
    fn a_command_that_yields_has_no_limit_unless_it_gives_one() {
        let (orch, events, contexts, _) =
            with_yielder(OrchestratorSettings::new(Duration::from_secs(7)));
        orch.execute(&request("job", "plain"));
        orch.execute(&yielding("job", "long", 250));
        orch.control(&control("job", Control::Interrupt));
        orch.execute(&CommandRequest {
            timeout: Some(Duration::from_secs(3)),
            ..yielding("job", "long", 250)
        });
        let contexts = contexts.lock().unwrap().clone();
        assert_eq!(
            contexts,
            [
                (Some(Duration::from_secs(7)), None),
                (None, Some(Duration::from_millis(250))),
                (None, None),
                (
                    Some(Duration::from_secs(3)),
                    Some(Duration::from_millis(250))
                ),
            ]
        );
        let received: Vec<(Option<u64>, Option<u64>)> = events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                Event::CommandReceived {
                    timeout_ms,
                    yield_ms,
                    ..
                } => Some((*timeout_ms, *yield_ms)),
                _ => None,
            })
            .collect();
        assert_eq!(
            received,
            [
                (Some(7000), None),
                (None, Some(250)),
                (Some(3000), Some(250))
            ]
        );
    }

    #[test]
    fn yield_after_in_the_settings_makes_every_command_yield() {
        let settings = OrchestratorSettings {
            yield_after: Some(Duration::from_secs(2)),
            ..OrchestratorSettings::new(Duration::from_secs(7))
        };
        let (orch, _, contexts, _) = with_yielder(settings);
        let outcome = orch.execute(&request("job", "long"));
        assert!(outcome.running);
        orch.control(&control("job", Control::Interrupt));
        orch.execute(&yielding("job", "long", 100));
        let contexts = contexts.lock().unwrap().clone();
        assert_eq!(contexts[0], (None, Some(Duration::from_secs(2))));
        assert_eq!(contexts[2], (None, Some(Duration::from_millis(100))));
    }

    #[test]
    fn a_running_command_is_waited_for_piece_by_piece_and_blocks_new_commands() {
        let (orch, events, contexts, _) =
            with_yielder(OrchestratorSettings::new(Duration::from_secs(7)));
        let first = orch.execute(&yielding("job", "long", 100));
        assert!(first.running && first.success);
        assert!(
            first
                .output
                .starts_with("part 1\n[envhost] The command is still running ("),
            "{}",
            first.output
        );
        assert!(first.output.contains("Go on with wait"));
        let section = first.screen.get("job").unwrap();
        assert!(
            section.content.starts_with("Running for "),
            "{}",
            section.content
        );
        assert!(section.content.contains("`long`"));
        assert!(section.content.ends_with("\nYielder at rest"));
        assert_eq!(section.max_lines, 3 + section.content.lines().count() - 1);

        let refused = orch.execute(&request("job", "ls"));
        assert!(!refused.success && !refused.running);
        assert!(
            refused
                .output
                .starts_with("job is still running `long` (for "),
            "{}",
            refused.output
        );
        // Other environments still serve.
        assert_eq!(orch.execute(&request("bash", "hi")).output, "hi");

        let second = orch.control(&control("job", Control::Wait { timeout: None }));
        assert!(second.running);
        assert!(second.output.starts_with("part 2\n[envhost]"));
        let last = orch.control(&control(
            "job",
            Control::Wait {
                timeout: Some(Duration::from_millis(30)),
            },
        ));
        assert!(!last.running && last.success);
        assert_eq!(last.output, "part 3\nend\n");
        assert_eq!(last.screen.get("job").unwrap().content, "Yielder at rest");
        let contexts = contexts.lock().unwrap().clone();
        assert_eq!(
            &contexts[1..],
            [
                (None, Some(DEFAULT_WAIT)),
                (None, Some(Duration::from_millis(30)))
            ]
        );

        let nothing = orch.control(&control("job", Control::Wait { timeout: None }));
        assert!(!nothing.success);
        assert!(
            nothing
                .output
                .starts_with("Nothing is running in job, so there is nothing to wait for")
        );
        let events = events.lock().unwrap();
        let yielded = events
            .iter()
            .filter(|e| matches!(e, Event::CommandYielded { .. }))
            .count();
        assert_eq!(yielded, 2);
        assert!(events.iter().any(|e| matches!(
            e,
            Event::CommandFinished { id: Some(id), success: true, .. } if id.json() == "9"
        )));
        assert!(
            events
                .iter()
                .any(|e| matches!(e, Event::WaitRequested { timeout_ms: 30, .. }))
        );
    }

    #[test]
    fn input_interrupt_and_restart_reach_the_environment() {
        let (orch, events, contexts, typed) =
            with_yielder(OrchestratorSettings::new(Duration::from_secs(7)));
        let prompt = orch.execute(&yielding("job", "prompt", 100));
        assert!(
            prompt
                .output
                .contains("It seems to be waiting for input: answer it with input.")
        );
        assert!(
            prompt
                .screen
                .get("job")
                .unwrap()
                .content
                .contains("It seems to be waiting for input")
        );
        let answered = orch.control(&control(
            "job",
            Control::Input {
                text: "John\n".into(),
                timeout: None,
            },
        ));
        assert!(answered.running);
        assert_eq!(typed.lock().unwrap().as_slice(), ["John\n"]);
        assert_eq!(
            contexts.lock().unwrap()[1],
            (None, Some(DEFAULT_INPUT_WAIT))
        );
        let stopped = orch.control(&control("job", Control::Interrupt));
        assert!(!stopped.success && !stopped.running);
        assert_eq!(stopped.output, "^C interrupted\n");
        for control_request in [
            Control::Interrupt,
            Control::Input {
                text: "x".into(),
                timeout: None,
            },
        ] {
            let name = control_request.name();
            let outcome = orch.control(&control("job", control_request));
            assert!(!outcome.success, "{name}");
            assert!(
                outcome.output.starts_with("Nothing is running in job"),
                "{name}"
            );
        }
        orch.execute(&yielding("job", "long", 100));
        let restarted = orch.control(&control("job", Control::Restart));
        assert!(restarted.success);
        assert!(orch.execute(&request("job", "x")).success);
        let refused = orch.control(&control("bash", Control::Restart));
        assert_eq!(
            refused.output,
            "Environment error in bash: this environment cannot be restarted"
        );
        let unknown = orch.control(&control("ruby", Control::Interrupt));
        assert!(unknown.output.starts_with("Unknown environment: ruby"));
        let events = events.lock().unwrap();
        assert!(events.contains(&Event::InputTyped {
            id: Some(RequestId::from(9_i64)),
            environment: "job".into(),
            bytes: 5,
            text: "John\n".into()
        }));
        assert!(
            events
                .iter()
                .any(|e| matches!(e, Event::InterruptRequested { .. }))
        );
        assert!(
            events
                .iter()
                .any(|e| matches!(e, Event::RestartRequested { .. }))
        );
        assert!(events.iter().any(|e| matches!(
            e,
            Event::EnvironmentRestarted { name, lost, .. } if name == "job" && lost.contains("lost: everything")
        )));
    }

    /// Holds its command until released, to show what other threads see.
    struct Blocker {
        entered: Arc<AtomicBool>,
        release: Arc<AtomicBool>,
    }

    impl Environment for Blocker {
        fn handle_command(
            &mut self,
            _: &str,
            _: &CommandContext,
        ) -> Result<CommandResponse, EnvironmentError> {
            self.entered.store(true, Ordering::SeqCst);
            while !self.release.load(Ordering::SeqCst) {
                thread::sleep(Duration::from_millis(2));
            }
            Ok(CommandResponse::success("released"))
        }
        fn screen(&mut self) -> Result<ScreenSection, EnvironmentError> {
            Ok(ScreenSection::new("Blocker idle"))
        }
    }

    #[test]
    fn other_threads_use_other_environments_while_one_is_busy() {
        fn shareable<T: Send + Sync>(_: &T) {}
        let (orch, _) = orchestrator();
        let entered = Arc::new(AtomicBool::new(false));
        let release = Arc::new(AtomicBool::new(false));
        orch.register(
            EnvironmentName::new("slow").unwrap(),
            EnvironmentKind::Plugin,
            Box::new(Blocker {
                entered: Arc::clone(&entered),
                release: Arc::clone(&release),
            }),
            None,
        )
        .unwrap();
        shareable(&orch);
        // The section the screen shows while the environment is busy.
        orch.screen();
        thread::scope(|scope| {
            let busy = scope.spawn(|| orch.execute(&request("slow", "hold")));
            while !entered.load(Ordering::SeqCst) {
                thread::sleep(Duration::from_millis(1));
            }
            let other = orch.execute(&request("python", "meanwhile"));
            assert_eq!(other.output, "meanwhile");
            let section = other.screen.get("slow").unwrap();
            assert!(
                section
                    .content
                    .starts_with("[Busy: handling a command request for "),
                "{}",
                section.content
            );
            assert!(section.content.ends_with("\nBlocker idle"));
            release.store(true, Ordering::SeqCst);
            let done = busy.join().unwrap();
            assert_eq!(done.output, "released");
            assert_eq!(done.screen.get("slow").unwrap().content, "Blocker idle");
        });
    }
}
