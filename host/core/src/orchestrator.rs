//! The orchestrator: the registry of environments, command routing, screen
//! collection, and the events that describe both.
//!
//! It owns the loaded environments in display order (bash, python, editor,
//! then plugins by name), turns a command into a response plus a fresh
//! screen, and guarantees that nothing an environment does (an error, a
//! panic, a failing screen) takes the host down. It must not know the wire
//! format (that is `protocol`) nor what any environment does inside.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use crate::environment::{
    CancelFlag, CommandContext, CommandResponse, Environment, EnvironmentKind, EnvironmentName,
    Incident, ScreenSection,
};
use crate::events::{Event, EventBus, panic_message};
use crate::screen::{NoticeSection, Screen};
use crate::text;

/// How much of a command's output goes into a `command_finished` event.
const EVENT_OUTPUT_LIMIT: usize = 16 * 1024;

/// Lines of an error section on the screen.
const ERROR_SECTION_LINES: usize = 10;

/// Display order of the built-in environments; plugins follow, by name.
const BUILTIN_ORDER: [&str; 3] = ["bash", "python", "editor"];

/// A command as the orchestrator receives it, protocol details stripped.
#[derive(Debug, Clone)]
pub struct CommandRequest {
    /// The environment it is for.
    pub environment: String,
    /// The command's text.
    pub command: String,
    /// Per-command timeout; the host's default applies when absent.
    pub timeout: Option<Duration>,
    /// The agent's correlation id, kept for the record.
    pub id: Option<serde_json::Value>,
}

/// What the agent gets back for one command.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The command's output.
    pub output: String,
    /// Whether it succeeded.
    pub success: bool,
    /// The screen after it.
    pub screen: Screen,
}

struct Slot {
    name: EnvironmentName,
    kind: EnvironmentKind,
    environment: Box<dyn Environment>,
}

/// Settings the orchestrator applies to every command.
#[derive(Debug, Clone)]
pub struct OrchestratorSettings {
    /// The time a command may take when it does not say.
    pub default_timeout: Duration,
}

/// Why an environment could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    #[error("an environment named {0} is already loaded")]
    /// An environment of that name is registered already.
    Duplicate(String),
}

/// The registry of environments: it routes each command to its
/// environment and collects the screen after it, and nothing an
/// environment does (an error, a panic) takes it down.
pub struct Orchestrator {
    slots: Vec<Slot>,
    notices: Vec<NoticeSection>,
    bus: EventBus,
    settings: OrchestratorSettings,
    cancel: CancelFlag,
    shut_down: bool,
}

impl Orchestrator {
    /// An orchestrator with no environment yet; `cancel` is handed to every
    /// command.
    pub fn new(settings: OrchestratorSettings, bus: EventBus, cancel: CancelFlag) -> Self {
        Orchestrator {
            slots: Vec::new(),
            notices: Vec::new(),
            bus,
            settings,
            cancel,
            shut_down: false,
        }
    }

    /// Adds an environment in its display position and records it.
    pub fn register(
        &mut self,
        name: EnvironmentName,
        kind: EnvironmentKind,
        environment: Box<dyn Environment>,
        detail: Option<String>,
    ) -> Result<(), RegisterError> {
        if self.slots.iter().any(|s| s.name == name) {
            return Err(RegisterError::Duplicate(name.to_string()));
        }
        self.bus.emit(Event::EnvironmentLoaded {
            name: name.to_string(),
            kind,
            detail,
        });
        self.slots.push(Slot {
            name,
            kind,
            environment,
        });
        self.slots.sort_by_key(display_rank);
        Ok(())
    }

    /// Records an environment that could not be loaded.
    pub fn record_load_failure(&mut self, name: &str, reason: &str) {
        self.bus.emit(Event::EnvironmentFailed {
            name: name.to_owned(),
            reason: reason.to_owned(),
        });
    }

    /// Shows a non-environment section after the environments.
    pub fn add_notice(&mut self, notice: NoticeSection) {
        self.notices.push(notice);
    }

    /// The registered environments' names, in display order.
    pub fn environment_names(&self) -> Vec<&str> {
        self.slots.iter().map(|s| s.name.as_str()).collect()
    }

    /// The time a command may take when it does not say.
    pub fn default_timeout(&self) -> Duration {
        self.settings.default_timeout
    }

    /// Emits an event from outside (the protocol layer's bad-input errors).
    pub fn emit(&mut self, event: Event) {
        self.bus.emit(event);
    }

    /// Runs one command and collects the screen that follows it.
    pub fn execute(&mut self, request: &CommandRequest) -> Outcome {
        let timeout = request.timeout.unwrap_or(self.settings.default_timeout);
        self.bus.emit(Event::CommandReceived {
            id: request.id.clone(),
            environment: request.environment.clone(),
            command: request.command.clone(),
            timeout_ms: duration_ms(timeout),
        });
        let started = Instant::now();
        let response = self.dispatch(request, timeout);
        let elapsed = started.elapsed();
        for incident in &response.incidents {
            self.bus
                .emit(incident_event(&request.environment, incident.clone()));
        }
        self.bus.emit(Event::CommandFinished {
            id: request.id.clone(),
            environment: request.environment.clone(),
            success: response.success,
            duration_ms: elapsed.as_secs_f64() * 1000.0,
            output_bytes: response.output.len(),
            output: excerpt(&response.output, EVENT_OUTPUT_LIMIT),
        });
        Outcome {
            output: response.output,
            success: response.success,
            screen: self.screen(),
        }
    }

    fn dispatch(&mut self, request: &CommandRequest, timeout: Duration) -> CommandResponse {
        let Some(slot) = self
            .slots
            .iter_mut()
            .find(|s| s.name.as_str() == request.environment)
        else {
            return self.unknown_environment(&request.environment);
        };
        let context = CommandContext::new(timeout, self.cancel.clone());
        let environment = &mut slot.environment;
        let result = catch_unwind(AssertUnwindSafe(|| {
            environment.handle_command(&request.command, &context)
        }));
        let name = slot.name.to_string();
        match result {
            Ok(Ok(response)) => response,
            Ok(Err(err)) => {
                self.bus.emit(Event::Error {
                    context: name.clone(),
                    message: err.to_string(),
                });
                CommandResponse::failure(format!("Environment error in {name}: {err}"))
            }
            Err(panic) => {
                let message = panic_message(panic.as_ref());
                self.bus.emit(Event::Error {
                    context: name.clone(),
                    message: format!("panicked: {message}"),
                });
                CommandResponse::failure(format!(
                    "Environment error in {name}: internal failure (panic: {message}). \
                     The host is still running; this environment may have lost state."
                ))
            }
        }
    }

    fn unknown_environment(&self, name: &str) -> CommandResponse {
        let mut available: Vec<&str> = self.environment_names();
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

    /// Every environment's section, in display order, then the notices.
    pub fn screen(&mut self) -> Screen {
        let mut screen = Screen::new();
        let mut failures = Vec::new();
        for slot in &mut self.slots {
            let environment = &mut slot.environment;
            let name = slot.name.as_str();
            let section = match catch_unwind(AssertUnwindSafe(|| environment.screen())) {
                Ok(Ok(section)) => section,
                Ok(Err(err)) => {
                    failures.push((name.to_owned(), err.to_string()));
                    error_section(name, &err.to_string())
                }
                Err(panic) => {
                    let message = format!("panic: {}", panic_message(panic.as_ref()));
                    failures.push((name.to_owned(), message.clone()));
                    error_section(name, &message)
                }
            };
            screen.push(name, section);
        }
        for notice in &self.notices {
            screen.push(notice.key.clone(), notice.section.clone());
        }
        for (name, message) in failures {
            self.bus.emit(Event::Error {
                context: format!("{name} screen"),
                message,
            });
        }
        screen
    }

    /// Shuts every environment down, once. A failing or panicking shutdown
    /// is recorded and the others still run.
    pub fn shutdown(&mut self, reason: &str) {
        if self.shut_down {
            return;
        }
        self.shut_down = true;
        self.bus.emit(Event::HostStopping {
            reason: reason.to_owned(),
        });
        for slot in &mut self.slots {
            let environment = &mut slot.environment;
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| environment.shutdown())) {
                let message = panic_message(panic.as_ref());
                eprintln!(
                    "envhost: shutting down {} failed: {message}",
                    slot.name.as_str()
                );
                self.bus.emit(Event::Error {
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

fn error_section(name: &str, message: &str) -> ScreenSection {
    ScreenSection::with_max_lines(
        format!("[Error getting screen from {name}: {message}]"),
        ERROR_SECTION_LINES,
    )
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
    use std::sync::{Arc, Mutex};

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
        let events = Arc::new(Mutex::new(Vec::new()));
        let mut bus = EventBus::new();
        bus.subscribe(Box::new(Recorder(Arc::clone(&events))));
        let mut orch = Orchestrator::new(
            OrchestratorSettings {
                default_timeout: Duration::from_secs(7),
            },
            bus,
            CancelFlag::new(),
        );
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
            id: None,
        }
    }

    #[test]
    fn screen_order_is_builtins_then_plugins_by_name() {
        let (mut orch, _) = orchestrator();
        let outcome = orch.execute(&request("bash", "hi"));
        let names: Vec<&str> = outcome.screen.sections().map(|(n, _)| n).collect();
        assert_eq!(names, ["bash", "python", "alpha", "zeta"]);
        assert_eq!(outcome.output, "hi");
        assert!(outcome.success);
    }

    #[test]
    fn unknown_environment_lists_available_sorted() {
        let (mut orch, _) = orchestrator();
        let outcome = orch.execute(&request("ruby", "puts 1"));
        assert!(!outcome.success);
        assert_eq!(
            outcome.output,
            "Unknown environment: ruby\nAvailable: alpha, bash, python, zeta"
        );
    }

    #[test]
    fn panics_and_errors_become_failed_responses() {
        let (mut orch, events) = orchestrator();
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
        let (mut orch, events) = orchestrator();
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
        let (mut orch, _) = orchestrator();
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

    #[test]
    fn duplicate_names_are_refused() {
        let (mut orch, _) = orchestrator();
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
}
