//! A loaded plugin as an [`Environment`]: help, routing, bounded output, and
//! recovery from traps.
//!
//! A plugin that describes commands gets the host's progressive help (long
//! help until a command is first used, short after) from
//! `help.rs`, exactly like the editor: the host routes by first word
//! (answering unknown words itself, without calling the plugin), tracks
//! which commands were used, and renders the help under the plugin's own
//! state text. A plugin that describes none owns its whole section.
//!
//! A call that fails (trap, panic, time limit, memory limit) poisons the
//! instance; this module drops it (and with its store every file and
//! program the plugin held), instantiates a fresh one from the kept
//! `PluginPre` with the same grants, and says in the response that the
//! state was lost — or, for a plugin that exports `state`, puts back the
//! snapshot it gave after its last command (`kept_state`) and says whether
//! that worked. The same snapshot is the plugin's state in the session
//! file, restored by `--resume`. A screen that fails shows an error in this section only;
//! the plugin is not called again (not even for its screen) until the
//! agent's next command to it, which starts a fresh instance and says the
//! state was lost — so a plugin whose screen is slow delays the other
//! environments' answers once, by its screen limit at most. After the
//! host's cancellation (Ctrl-C, SIGTERM) nothing is restarted until the
//! next command either. What the plugin was granted, and what it asked
//! for in vain, is shown under its own screen content; the operator's
//! time limit caps every command. A command that may yield, to a plugin
//! granted programs, runs on a thread of its own (`yielding`) and is left
//! running while the plugin waits on a program; meanwhile the screen shows
//! the section last drawn. A plugin that said its screen changes only when
//! called (`screen-changes`, 0.2.1) is asked for it only after a call into
//! it; until the next one the section last drawn stands, so commands to
//! other environments do not wait for it. `restart` starts a fresh
//! instance. This module must not know about the protocol or other
//! environments.

use std::sync::Arc;
use std::time::Duration;

use crate::exports::PluginPre;
use crate::failure::{CallFailure, FailureCause};
use crate::grants::Grants;
use crate::guest_io::{CallOutput, LogSink};
use crate::instance::{Called, LiveInstance, start_described};
use crate::kept_state::{KeptState, Restored};
use crate::limits;
use crate::plugin_text;
use crate::sandbox::Sandbox;
use crate::wit::latest::CommandResponse as WitResponse;
use crate::yielding::{self, EndedCall, Progress, Worker, Yielded};
use envhost_core::text;
use envhost_core::truncate_lines;
use envhost_core::{
    CancelFlag, CommandContext, CommandResponse, Environment, EnvironmentError, Incident, Reach,
    RunningCommand, ScreenSection, Usage,
};
use envhost_core::{CommandHelp, CommandSpec};
use envhost_process::{OutputCapture, OutputLimits};

/// Largest screen content taken from a plugin, in bytes; the rest is cut
/// with a marker (lines are cut to `max_lines` afterwards, by the screen).
pub const SCREEN_BYTES_LIMIT: usize = 64 * 1024;

/// What a restart loses, for the agent and the record.
const LOST: &str = "all of the plugin's in-memory state, and any program it was running";

/// What a restart loses when the plugin's state came back from its
/// snapshot.
const LOST_PROGRAMS: &str =
    "any program it was running (its state came back from its last snapshot)";

/// Everything a plugin environment needs besides its instance.
pub struct PluginParts {
    pub name: String,
    pub sandbox: Arc<Sandbox>,
    pub pre: PluginPre,
    /// The optimised code, once compiled in the background, for the next
    /// fresh instance (`load::tiering`).
    pub upgrade: crate::load::tiering::Upgrade,
    pub instance: LiveInstance,
    pub commands: Vec<CommandSpec>,
    /// What the operator granted; every fresh instance gets the same.
    pub grants: Arc<Grants>,
    /// Lines about granted and refused powers, shown under the plugin's
    /// own content (see `grants::screen_lines`); empty for most plugins.
    pub powers: Vec<String>,
    pub output_limits: OutputLimits,
    pub log: Arc<dyn LogSink>,
    /// The host's cancellation, watched during screen calls.
    pub cancel: CancelFlag,
}

pub struct PluginEnvironment {
    name: String,
    sandbox: Arc<Sandbox>,
    pre: PluginPre,
    upgrade: crate::load::tiering::Upgrade,
    /// `None` after a failure whose restart failed too; retried on the next
    /// call.
    instance: Option<LiveInstance>,
    help: Option<CommandHelp>,
    grants: Arc<Grants>,
    powers: Vec<String>,
    output_limits: OutputLimits,
    log: Arc<dyn LogSink>,
    cancel: CancelFlag,
    /// A restart the agent has not been told about yet (after a failed
    /// screen), with its incident.
    untold_restart: Option<(String, Incident)>,
    /// A command left running while it waits on a program, with its time
    /// limit and whether the operator's cap set it.
    yielded: Option<(Yielded, Duration, bool)>,
    /// The section last drawn: shown while a command runs (its instance is
    /// busy on the command's thread), and while nothing called into a
    /// plugin whose screen changes only when called.
    last_section: Option<ScreenSection>,
    /// Whether `last_section` was drawn after the last call into the
    /// instance (cleared by every entry point that may call it).
    drawn_since_last_call: bool,
    /// The thread commands that may yield run on, once one did.
    worker: Option<Worker>,
    /// The plugin's last snapshot (`state` export).
    kept: KeptState,
    /// What a restart at the start of the current command did with the
    /// snapshot, for its response.
    restored_now: Option<Restored>,
}

impl PluginEnvironment {
    pub fn new(parts: PluginParts) -> Self {
        let help = if parts.commands.is_empty() {
            None
        } else {
            // Checked at load time (`refusals::check_description`), so this
            // cannot fail; a plugin whose help cannot be built was refused.
            CommandHelp::new(&parts.name, parts.commands).ok()
        };
        PluginEnvironment {
            name: parts.name,
            sandbox: parts.sandbox,
            pre: parts.pre,
            upgrade: parts.upgrade,
            instance: Some(parts.instance),
            help,
            grants: parts.grants,
            powers: parts.powers,
            output_limits: parts.output_limits,
            log: parts.log,
            cancel: parts.cancel,
            untold_restart: None,
            yielded: None,
            last_section: None,
            drawn_since_last_call: false,
            worker: None,
            kept: KeptState::default(),
            restored_now: None,
        }
    }

    fn forward(&self, output: &CallOutput) {
        for line in output.log_lines(&self.name) {
            self.log.line(&line);
        }
    }

    /// A fresh, described instance with the last snapshot put back (when
    /// one is kept), or why not.
    fn restart(&mut self) -> Result<Restored, CallFailure> {
        self.instance = None;
        self.drawn_since_last_call = false;
        // Started on baseline code: a fresh instance is where the optimised
        // code, once compiled in the background, takes over.
        if let Some(optimised) = self.upgrade.take() {
            self.pre = optimised;
            self.log.line(&format!(
                "envhost: plugin {}: its fresh instance runs on its optimised code, compiled in the background",
                self.name
            ));
        }
        let (mut instance, _, output) = start_described(&self.sandbox, &self.pre, &self.grants)?;
        self.forward(&output);
        let (restored, output) = self.kept.restore_into(&mut instance, &self.sandbox);
        self.forward(&output);
        if let Restored::Failed(_) = restored {
            // The failed call left that instance unusable.
            let (fresh, _, output) = start_described(&self.sandbox, &self.pre, &self.grants)?;
            self.forward(&output);
            instance = fresh;
        }
        self.instance = Some(instance);
        Ok(restored)
    }

    /// The instance, restarting it first if an earlier restart failed.
    fn instance(&mut self) -> Result<&mut LiveInstance, CallFailure> {
        if self.instance.is_none() {
            let restored = self.restart()?;
            self.restored_now = Some(restored);
        }
        self.instance.as_mut().ok_or_else(|| CallFailure {
            cause: FailureCause::Other {
                message: "the plugin has no running instance".into(),
            },
            detail: String::new(),
            stderr: String::new(),
        })
    }

    /// After a failed call: a fresh instance (a failed call leaves the old
    /// one unusable, whatever the cause), with the last snapshot put back,
    /// and the words for the agent and what was lost.
    fn recover(&mut self) -> (String, String) {
        if self.cancel.is_cancelled() {
            self.instance = None;
            if self.kept.has_snapshot() {
                return (
                    "The host was interrupted, so the plugin starts afresh at its next command, from the snapshot it gave after its last command.".to_owned(),
                    LOST_PROGRAMS.to_owned(),
                );
            }
            return (
                "Its state was lost; the host was interrupted, so the plugin starts afresh at its next command.".to_owned(),
                LOST.to_owned(),
            );
        }
        match self.restart() {
            Ok(Restored::Nothing) => (
                "Its state was lost: the host restarted the plugin, and the next command runs in a fresh instance.".to_owned(),
                LOST.to_owned(),
            ),
            Ok(restored) if restored.came_back() => (
                format!(
                    "The host restarted the plugin and {}; the next command runs in the restored instance.",
                    restored.clause()
                ),
                LOST_PROGRAMS.to_owned(),
            ),
            Ok(restored) => (
                format!(
                    "The host restarted the plugin, but {}; the next command runs in a fresh instance.",
                    restored.clause()
                ),
                LOST.to_owned(),
            ),
            Err(again) => (
                format!(
                    "Its state was lost, and restarting it failed too ({}); the host will try again at the next command.",
                    again.cause
                ),
                LOST.to_owned(),
            ),
        }
    }

    /// The command's time: the agent's (or the host's default), capped by
    /// the operator's `time-limit` for this plugin.
    fn command_limit(&self, context: &CommandContext) -> (Duration, bool) {
        limits::command_limit(context.timeout, self.grants.time_limit)
    }

    fn failure_response(
        &mut self,
        failure: CallFailure,
        (limit, capped): (Duration, bool),
    ) -> CommandResponse {
        let mut text = format!(
            "The {} plugin stopped during this command: {}.",
            self.name, failure.cause
        );
        if capped && failure.cause.is_timeout() {
            text.push_str(&format!(
                "\n(The operator limits this plugin's commands to {} in {}; a longer timeout_ms does not raise that.)",
                text::duration(limit),
                self.grants.entry_name()
            ));
        }
        let stderr = failure.stderr.trim();
        match &failure.cause {
            // The panic's message is the cause already.
            FailureCause::Panicked { .. } => {}
            FailureCause::Uncaught { traceback, .. } => {
                text.push_str(&format!("\n{}", last_lines(traceback, 20)));
            }
            _ if !stderr.is_empty() => text.push_str(&format!(
                "\nIt wrote to stderr before it stopped:\n{}",
                last_lines(stderr, 10)
            )),
            _ => {}
        }
        let (recovery, lost) = self.recover();
        text.push('\n');
        text.push_str(&recovery);
        let mut response = CommandResponse::failure(text).with_incident(Incident::Trapped {
            cause: failure.cause.short(),
        });
        if failure.cause.is_timeout() {
            response = response.with_incident(Incident::TimedOut { after: limit });
        }
        response.with_incident(Incident::Restarted {
            reason: failure.cause.short(),
            lost,
        })
    }
}

impl PluginEnvironment {
    /// The agent's response for a finished command call.
    fn respond(
        &mut self,
        called: Called<WitResponse>,
        (limit, capped): (Duration, bool),
    ) -> CommandResponse {
        self.forward(&called.output);
        // The host's own lines (a refused HTTP request) end the response.
        let notes = called.output.notes_text();
        let mut response = match called.result {
            Ok(answer) => {
                let mut capture = OutputCapture::new(&self.output_limits, &self.name);
                capture.push(&plugin_text::block(&answer.output));
                let captured = capture.finish();
                let incident = captured.incident();
                let mut response = if answer.success {
                    CommandResponse::success(captured.text)
                } else {
                    CommandResponse::failure(captured.text)
                };
                if let Some(incident) = incident {
                    response = response.with_incident(incident);
                }
                if called.timed_out_in_host {
                    // A program it ran was interrupted at the deadline; the
                    // plugin said so and survived.
                    response = response.with_incident(Incident::TimedOut { after: limit });
                }
                self.take_snapshot(response)
            }
            Err(failure) => self.failure_response(failure, (limit, capped)),
        };
        if !notes.is_empty() {
            if !response.output.is_empty() && !response.output.ends_with('\n') {
                response.output.push('\n');
            }
            response.output.push_str(&notes);
        }
        response
    }

    /// After a command that returned: the plugin's snapshot, when it
    /// exports `state`. A snapshot call that fails leaves the instance
    /// unusable: the response then says so, and what came back.
    fn take_snapshot(&mut self, mut response: CommandResponse) -> CommandResponse {
        let Some(instance) = self.instance.as_mut() else {
            return response;
        };
        let (taken, output) = self.kept.take(instance, &self.sandbox, &self.cancel);
        self.forward(&output);
        let Err(failure) = taken else {
            return response;
        };
        let (recovery, lost) = self.recover();
        response.output = format!(
            "{}\n[envhost] The {} plugin failed while giving its snapshot after this command: {}. {recovery} This command's changes to its state are lost.",
            response.output.trim_end_matches('\n'),
            self.name,
            failure.cause
        );
        response.with_incident(Incident::Restarted {
            reason: format!("snapshot failed: {}", failure.cause.short()),
            lost,
        })
    }

    /// Runs a command that may yield on a thread of its own: the plugin
    /// may run programs, and a command blocked on one outlives the wait.
    fn start_yielding(&mut self, command: &str, context: &CommandContext) -> CommandResponse {
        let (limit, capped) = self.command_limit(context);
        if self.worker.is_none() {
            match Worker::start() {
                Ok(worker) => self.worker = Some(worker),
                Err(why) => {
                    return CommandResponse::failure(format!(
                        "The {} plugin could not run this command: {why}.",
                        self.name
                    ));
                }
            }
        }
        if self.last_section.is_none() {
            // What the screen shows while the instance is busy elsewhere.
            self.last_section = self.draw_screen().ok();
        }
        let (Some(worker), Some(instance)) = (self.worker.as_ref(), self.instance.take()) else {
            return CommandResponse::failure(format!("The {} plugin is not running.", self.name));
        };
        let limited = context.timeout.is_some() || capped;
        let sandbox = Arc::clone(&self.sandbox);
        match Yielded::start(worker, instance, sandbox, command, limit, limited) {
            Ok(yielded) => {
                self.yielded = Some((yielded, limit, capped));
                let wait = context.yield_after.unwrap_or(Duration::ZERO);
                self.settle(|yielded| yielded.wait(wait, &context.cancel))
            }
            Err(why) => {
                self.worker = None;
                let (recovery, _) = self.recover();
                CommandResponse::failure(format!(
                    "The {} plugin could not run this command: {why}. {recovery}",
                    self.name
                ))
            }
        }
    }

    /// Goes on with the command left running, `how` says how, and turns
    /// where it stands into the agent's response.
    fn settle(&mut self, how: impl FnOnce(&mut Yielded) -> Progress) -> CommandResponse {
        let Some((yielded, limit, capped)) = self.yielded.as_mut() else {
            return CommandResponse::failure(format!("Nothing is running in {}.", self.name));
        };
        let (limit, capped) = (*limit, *capped);
        match how(yielded) {
            Progress::Running(output) => {
                CommandResponse::still_running(plugin_text::block(&output).into_owned())
            }
            Progress::Ended(ended) => {
                let EndedCall {
                    instance,
                    called,
                    shown,
                } = *ended;
                self.yielded = None;
                self.instance = Some(instance);
                let mut response = self.respond(called, (limit, capped));
                response.output = yielding::unseen(&response.output, &shown);
                response
            }
            Progress::Lost(why) => {
                self.yielded = None;
                self.instance = None;
                let (recovery, lost) = self.recover();
                CommandResponse::failure(format!(
                    "The {} plugin's command failed inside the host ({why}). {recovery}",
                    self.name
                ))
                .with_incident(Incident::Restarted { reason: why, lost })
            }
        }
    }
}

impl Environment for PluginEnvironment {
    /// The sandbox keeps a plugin to its own state unless the operator
    /// granted more: a writable folder lets it change files; a program
    /// runs outside the sandbox and may do anything, the network included;
    /// a granted host is reached, and a request may change what it holds.
    fn reach(&self) -> Reach {
        let programs = !self.grants.programs.is_empty();
        let network = !self.grants.allowed_hosts.is_empty();
        Reach {
            destructive: programs || network || self.grants.directories.iter().any(|d| d.writable),
            open_world: programs || network,
        }
    }

    fn usage(&self) -> Usage {
        match &self.help {
            Some(help) => Usage {
                summary: format!("The commands of the {} plugin.", self.name),
                commands: help.commands().to_vec(),
                ..Usage::default()
            },
            None => Usage {
                summary: format!(
                    "The {} plugin takes free text; its screen says how to use it.",
                    self.name
                ),
                ..Usage::default()
            },
        }
    }

    fn handle_command(
        &mut self,
        command: &str,
        context: &CommandContext,
    ) -> Result<CommandResponse, EnvironmentError> {
        if let Some(help) = &mut self.help
            && let Err(unknown) = help.route(command)
        {
            return Ok(CommandResponse::failure(unknown.to_string()));
        }
        self.drawn_since_last_call = false;
        let told = self.untold_restart.take();
        let sandbox = Arc::clone(&self.sandbox);
        let limits = self.command_limit(context);
        let may_yield = context.yield_after.is_some() && !self.grants.programs.is_empty();
        // An earlier command left running is the orchestrator's to refuse
        // this one for; should one slip through, it ends first.
        self.yielded = None;
        let mut response = match self.instance() {
            Err(failure) => {
                let text = format!(
                    "The {} plugin is not running and could not be restarted: {}. The host will try again at the next command.",
                    self.name, failure.cause
                );
                CommandResponse::failure(text)
            }
            Ok(instance) if !may_yield => {
                let called = instance.handle_command(&sandbox, command, limits.0, &context.cancel);
                self.respond(called, limits)
            }
            Ok(_) => self.start_yielding(command, context),
        };
        if let Some(restored) = self.restored_now.take()
            && restored != Restored::Nothing
        {
            // The instance was started afresh for this command.
            response.output = format!(
                "(The {} plugin was started afresh for this command: {}.)\n\n{}",
                self.name,
                restored.clause(),
                response.output
            );
        }
        if let Some((note, incident)) = told {
            response.output = format!("{note}\n\n{}", response.output);
            response.incidents.insert(0, incident);
        }
        Ok(response)
    }

    fn screen(&mut self) -> Result<ScreenSection, EnvironmentError> {
        if self.yielded.is_some() {
            // The instance is busy on the command's thread.
            return Ok(self.last_section.clone().unwrap_or_else(|| {
                ScreenSection::new(format!("(the {} plugin is busy with a command)", self.name))
            }));
        }
        if self.drawn_since_last_call
            && let Some(section) = &self.last_section
            && self
                .instance
                .as_ref()
                .is_some_and(LiveInstance::screen_changes_only_when_called)
        {
            return Ok(section.clone());
        }
        // A section with the host's one-time note is not kept: the next
        // screen is drawn again, without it.
        let shows_note_once = self.kept.has_screen_note();
        let section = self.draw_screen();
        self.drawn_since_last_call = section.is_ok() && !shows_note_once;
        if let Ok(section) = &section {
            self.last_section = Some(section.clone());
        }
        section
    }

    fn running(&self) -> Option<RunningCommand> {
        self.yielded
            .as_ref()
            .map(|(yielded, _, _)| yielded.running())
    }

    fn wait(&mut self, context: &CommandContext) -> Result<CommandResponse, EnvironmentError> {
        self.drawn_since_last_call = false;
        let wait = context.yield_after.unwrap_or(Duration::ZERO);
        Ok(self.settle(|yielded| yielded.wait(wait, &context.cancel)))
    }

    fn input(
        &mut self,
        text: &str,
        context: &CommandContext,
    ) -> Result<CommandResponse, EnvironmentError> {
        self.drawn_since_last_call = false;
        let wait = context.yield_after.unwrap_or(Duration::ZERO);
        let mut untyped = None;
        let response = self.settle(|yielded| {
            if let Err(why) = yielded.type_text(text) {
                untyped = Some(why);
            }
            yielded.wait(wait, &context.cancel)
        });
        Ok(match untyped {
            None => response,
            Some(why) => CommandResponse {
                output: format!(
                    "[envhost] The text was not typed: {why}.\n{}",
                    response.output
                ),
                ..response
            },
        })
    }

    fn interrupt(&mut self, context: &CommandContext) -> Result<CommandResponse, EnvironmentError> {
        self.drawn_since_last_call = false;
        Ok(self.settle(|yielded| yielded.interrupt(&context.cancel)))
    }

    fn restart(&mut self, _: &CommandContext) -> Result<CommandResponse, EnvironmentError> {
        // A command still running is interrupted and its end waited for.
        self.yielded = None;
        self.untold_restart = None;
        let reason = "the agent asked for a restart".to_owned();
        // A restart asked for is a fresh start: the snapshot goes too.
        self.kept.clear();
        match self.restart() {
            Ok(_) => Ok(CommandResponse::success(format!(
                "Started the {} plugin afresh. Lost: {LOST}.",
                self.name
            ))
            .with_incident(Incident::Restarted {
                reason,
                lost: LOST.to_owned(),
            })),
            Err(failure) => Err(EnvironmentError::Failed(format!(
                "the {} plugin could not be started afresh: {}; the host will try again at the next command",
                self.name, failure.cause
            ))),
        }
    }

    fn shutdown(&mut self) {
        // A command still running is interrupted and its end waited for.
        self.yielded = None;
        self.worker = None;
        // Before the host reaps its processes: a compiler it kills would
        // otherwise read as a failed compilation.
        self.sandbox.background().stop();
        self.shut_down();
    }

    /// The plugin's last snapshot (base64), when it changed.
    fn save_state(&mut self) -> Option<String> {
        self.kept.saved_if_changed()
    }

    /// Puts a snapshot saved by an earlier host back into the instance
    /// (fresh: no command has run yet).
    fn restore_state(
        &mut self,
        state: &str,
        _: &CommandContext,
    ) -> Result<String, EnvironmentError> {
        self.kept
            .load_saved(state)
            .map_err(|unusable| EnvironmentError::Failed(unusable.to_string()))?;
        if !self.kept.has_snapshot() {
            return Ok("it had no state to keep; it starts fresh.".to_owned());
        }
        let restored = self.restart().map_err(|failure| {
            EnvironmentError::Failed(format!("it could not be started: {}", failure.cause))
        })?;
        match restored {
            Restored::CameBack(_) => Ok(format!("{}.", restored.clause())),
            Restored::Nothing => Err(EnvironmentError::Failed(
                "it no longer exports `state`".to_owned(),
            )),
            other => Err(EnvironmentError::Failed(other.clause())),
        }
    }
}

impl PluginEnvironment {
    fn draw_screen(&mut self) -> Result<ScreenSection, EnvironmentError> {
        let cancel = self.cancel.clone();
        let sandbox = Arc::clone(&self.sandbox);
        // Never restarted here: a plugin that is not running waits for the
        // agent's next command to it.
        let Some(instance) = self.instance.as_mut() else {
            return Err(EnvironmentError::Failed(format!(
                "the {} plugin is not running; it starts afresh at its next command",
                self.name
            )));
        };
        let called = instance.screen(&sandbox, &cancel);
        self.forward(&called.output);
        match called.result {
            Ok(section) => {
                let mut content =
                    plugin_text::block(&cap_bytes(&section.content, SCREEN_BYTES_LIMIT))
                        .into_owned();
                let mut max_lines = usize::try_from(section.max_lines.max(1)).unwrap_or(usize::MAX);
                if let Some(note) = self.kept.screen_note() {
                    content = format!("{note}\n{content}");
                    max_lines = max_lines.saturating_add(1);
                }
                if self.help.is_none() && self.powers.is_empty() {
                    return Ok(ScreenSection::with_max_lines(content, max_lines));
                }
                // The plugin's max_lines bounds its own content; what the
                // host adds (powers, help) is always shown whole.
                let mut state = truncate_lines(&content, max_lines)
                    .trim_end_matches('\n')
                    .to_owned();
                if !self.powers.is_empty() {
                    if !state.is_empty() {
                        state.push_str("\n\n");
                    }
                    state.push_str(&self.powers.join("\n"));
                }
                let whole = match &self.help {
                    None => state,
                    Some(help) => help.screen_with_state(&state),
                };
                let lines = whole.lines().count().max(1);
                Ok(ScreenSection::with_max_lines(whole, lines))
            }
            Err(failure) => {
                let cause = failure.cause;
                // Dropped now (its store, files and programs with it); the
                // next command to it starts a fresh one.
                self.instance = None;
                self.untold_restart = Some((
                    format!(
                        "(Note: the {} plugin failed while drawing its screen: {cause}. This command runs in a fresh instance.)",
                        self.name
                    ),
                    Incident::Restarted {
                        reason: format!("screen failed: {}", cause.short()),
                        lost: if self.kept.has_snapshot() {
                            LOST_PROGRAMS.to_owned()
                        } else {
                            LOST.to_owned()
                        },
                    },
                ));
                Err(EnvironmentError::Failed(format!(
                    "the plugin failed while drawing its screen: {cause}. It starts afresh at its next command{}",
                    if self.kept.has_snapshot() {
                        ", from the snapshot it gave after its last command"
                    } else {
                        "; its state was lost"
                    }
                )))
            }
        }
    }

    fn shut_down(&mut self) {
        let sandbox = Arc::clone(&self.sandbox);
        let Some(limit) = sandbox.shutdown_limit() else {
            // The plugins before it used up the time all get together.
            self.instance = None;
            return;
        };
        if let Some(instance) = self.instance.as_mut() {
            let called = instance.shutdown(&sandbox, limit);
            self.forward(&called.output);
            if let Err(failure) = called.result {
                self.log.line(&format!(
                    "[plugin {}] shutdown failed: {}",
                    self.name, failure.cause
                ));
            }
        }
        self.instance = None;
    }
}

/// `text` cut to at most `limit` bytes on a character boundary, with a
/// marker line when cut.
fn cap_bytes(content: &str, limit: usize) -> String {
    if content.len() <= limit {
        return content.to_owned();
    }
    let (head, omitted) = text::head(content, limit);
    format!("{head}\n[... screen content cut: {omitted} more bytes]")
}

fn last_lines(text: &str, count: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(count);
    lines[start..]
        .iter()
        .map(|line| format!("  {line}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_screen_bytes_on_character_boundaries() {
        assert_eq!(cap_bytes("short", 10), "short");
        let capped = cap_bytes("ééééé", 3);
        assert!(
            capped.starts_with("é\n[... screen content cut: 8 more bytes]"),
            "{capped}"
        );
    }

    #[test]
    fn keeps_the_last_lines_of_stderr() {
        assert_eq!(last_lines("a\nb\nc", 2), "  b\n  c");
    }
}
