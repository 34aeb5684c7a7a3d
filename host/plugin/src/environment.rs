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
//! state was lost. A screen that fails shows an error in this section only;
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
//! the section last drawn. `restart` starts a fresh instance. This module
//! must not know about the protocol or other environments.

use std::sync::Arc;
use std::time::Duration;

use crate::exports::PluginPre;
use crate::failure::{CallFailure, FailureCause};
use crate::grants::Grants;
use crate::guest_io::{CallOutput, LogSink};
use crate::instance::{Called, LiveInstance, start_described};
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

/// Everything a plugin environment needs besides its instance.
pub struct PluginParts {
    pub name: String,
    pub sandbox: Arc<Sandbox>,
    pub pre: PluginPre,
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
    /// busy on the command's thread).
    last_section: Option<ScreenSection>,
    /// The thread commands that may yield run on, once one did.
    worker: Option<Worker>,
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
            worker: None,
        }
    }

    fn forward(&self, output: &CallOutput) {
        for line in output.log_lines(&self.name) {
            self.log.line(&line);
        }
    }

    /// A fresh, described instance, or why not.
    fn restart(&mut self) -> Result<(), CallFailure> {
        self.instance = None;
        let (instance, _, output) = start_described(&self.sandbox, &self.pre, &self.grants)?;
        self.forward(&output);
        self.instance = Some(instance);
        Ok(())
    }

    /// The instance, restarting it first if an earlier restart failed.
    fn instance(&mut self) -> Result<&mut LiveInstance, CallFailure> {
        if self.instance.is_none() {
            self.restart()?;
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
    /// one unusable, whatever the cause) and the words for the agent.
    fn recover(&mut self) -> String {
        if self.cancel.is_cancelled() {
            self.instance = None;
            return "Its state was lost; the host was interrupted, so the plugin starts afresh at its next command.".to_owned();
        }
        match self.restart() {
            Ok(()) => "Its state was lost: the host restarted the plugin, and the next command runs in a fresh instance.".to_owned(),
            Err(again) => format!(
                "Its state was lost, and restarting it failed too ({}); the host will try again at the next command.",
                again.cause
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
        let recovery = self.recover();
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
            lost: LOST.to_owned(),
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
        match called.result {
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
                response
            }
            Err(failure) => self.failure_response(failure, (limit, capped)),
        }
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
                let recovery = self.recover();
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
                let recovery = self.recover();
                CommandResponse::failure(format!(
                    "The {} plugin's command failed inside the host ({why}). {recovery}",
                    self.name
                ))
                .with_incident(Incident::Restarted {
                    reason: why,
                    lost: LOST.to_owned(),
                })
            }
        }
    }
}

impl Environment for PluginEnvironment {
    /// The sandbox keeps a plugin to its own state unless the operator
    /// granted more: a writable folder lets it change files; a program
    /// runs outside the sandbox and may do anything, the network included.
    fn reach(&self) -> Reach {
        let programs = !self.grants.programs.is_empty();
        Reach {
            destructive: programs || self.grants.directories.iter().any(|d| d.writable),
            open_world: programs,
        }
    }

    fn usage(&self) -> Usage {
        match &self.help {
            Some(help) => Usage {
                summary: format!("The commands of the {} plugin.", self.name),
                commands: help.commands().to_vec(),
            },
            None => Usage {
                summary: format!(
                    "The {} plugin takes free text; its screen says how to use it.",
                    self.name
                ),
                commands: Vec::new(),
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
        let section = self.draw_screen();
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
        let wait = context.yield_after.unwrap_or(Duration::ZERO);
        Ok(self.settle(|yielded| yielded.wait(wait, &context.cancel)))
    }

    fn input(
        &mut self,
        text: &str,
        context: &CommandContext,
    ) -> Result<CommandResponse, EnvironmentError> {
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
        Ok(self.settle(|yielded| yielded.interrupt(&context.cancel)))
    }

    fn restart(&mut self, _: &CommandContext) -> Result<CommandResponse, EnvironmentError> {
        // A command still running is interrupted and its end waited for.
        self.yielded = None;
        self.untold_restart = None;
        let reason = "the agent asked for a restart".to_owned();
        match self.restart() {
            Ok(()) => Ok(CommandResponse::success(format!(
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
        self.shut_down();
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
                let content = plugin_text::block(&cap_bytes(&section.content, SCREEN_BYTES_LIMIT))
                    .into_owned();
                let max_lines = usize::try_from(section.max_lines.max(1)).unwrap_or(usize::MAX);
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
                        "(Note: the {} plugin failed while drawing its screen: {cause}. Its state was lost; this command runs in a fresh instance.)",
                        self.name
                    ),
                    Incident::Restarted {
                        reason: format!("screen failed: {}", cause.short()),
                        lost: LOST.to_owned(),
                    },
                ));
                Err(EnvironmentError::Failed(format!(
                    "the plugin failed while drawing its screen: {cause}. Its state was lost; it starts afresh at its next command"
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
