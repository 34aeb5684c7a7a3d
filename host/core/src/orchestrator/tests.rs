use super::*;
use crate::environment::{EnvironmentError, ScreenSection};
use crate::events::{Observer, ObserverError, StampedEvent};
use std::sync::Arc;
use std::thread;

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
    let has_line = |outcome: &Outcome| outcome.screen.sections().any(|(key, _)| key == SESSION_KEY);

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
        Box::new(move |_| {
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
        orch.allow_instances("ruby", Box::new(|_| unreachable!())),
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
    fn interrupt(&mut self, context: &CommandContext) -> Result<CommandResponse, EnvironmentError> {
        self.record(context);
        self.running = None;
        Ok(CommandResponse::failure("^C interrupted\n"))
    }
    fn restart(&mut self, context: &CommandContext) -> Result<CommandResponse, EnvironmentError> {
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
