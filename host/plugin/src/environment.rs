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
//! instance; this module drops it (and with its store every program the
//! plugin ran), instantiates a fresh one from the kept `PluginPre` with the
//! same grants, and says in the response that the state was lost. A screen
//! that fails shows an error in this section only, and the next response
//! says the state was lost. What the plugin was granted, and what it asked
//! for in vain, is shown under its own screen content; the operator's
//! time limit caps every command. This module must not know about the
//! protocol or other environments.

use std::sync::Arc;
use std::time::Duration;

use crate::failure::{CallFailure, FailureCause};
use crate::grants::Grants;
use crate::guest_io::{CallOutput, LogSink};
use crate::instance::{LiveInstance, start_described};
use crate::limits;
use crate::sandbox::Sandbox;
use crate::state::HostState;
use crate::wit::latest::PluginPre;
use envhost_core::text;
use envhost_core::truncate_lines;
use envhost_core::{
    CancelFlag, CommandContext, CommandResponse, Environment, EnvironmentError, Incident, Reach,
    ScreenSection, Usage,
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
    pub pre: PluginPre<HostState>,
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
    pre: PluginPre<HostState>,
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
        context: &CommandContext,
    ) -> CommandResponse {
        let mut text = format!(
            "The {} plugin stopped during this command: {}.",
            self.name, failure.cause
        );
        let (limit, capped) = self.command_limit(context);
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
        let (limit, _) = self.command_limit(context);
        let mut response = match self.instance() {
            Err(failure) => {
                let text = format!(
                    "The {} plugin is not running and could not be restarted: {}. The host will try again at the next command.",
                    self.name, failure.cause
                );
                CommandResponse::failure(text)
            }
            Ok(instance) => {
                let called = instance.handle_command(&sandbox, command, limit, &context.cancel);
                self.forward(&called.output);
                let timed_out_in_host = called.timed_out_in_host;
                match called.result {
                    Ok(answer) => {
                        let mut capture = OutputCapture::new(&self.output_limits, &self.name);
                        capture.push(&answer.output);
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
                        if timed_out_in_host {
                            // A program it ran was interrupted at the
                            // deadline; the plugin said so and survived.
                            response = response.with_incident(Incident::TimedOut { after: limit });
                        }
                        response
                    }
                    Err(failure) => self.failure_response(failure, context),
                }
            }
        };
        if let Some((note, incident)) = told {
            response.output = format!("{note}\n\n{}", response.output);
            response.incidents.insert(0, incident);
        }
        Ok(response)
    }

    fn screen(&mut self) -> Result<ScreenSection, EnvironmentError> {
        let cancel = self.cancel.clone();
        let sandbox = Arc::clone(&self.sandbox);
        let called = match self.instance() {
            Ok(instance) => instance.screen(&sandbox, &cancel),
            Err(failure) => {
                return Err(EnvironmentError::Failed(format!(
                    "the plugin is not running and could not be restarted: {}",
                    failure.cause
                )));
            }
        };
        self.forward(&called.output);
        match called.result {
            Ok(section) => {
                let content = cap_bytes(&section.content, SCREEN_BYTES_LIMIT);
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
                let recovery = self.recover();
                self.untold_restart = Some((
                    format!(
                        "(Note: the {} plugin failed while drawing its screen: {cause}. {recovery})",
                        self.name
                    ),
                    Incident::Restarted {
                        reason: format!("screen failed: {}", cause.short()),
                        lost: LOST.to_owned(),
                    },
                ));
                Err(EnvironmentError::Failed(format!(
                    "the plugin failed while drawing its screen: {cause}. {recovery}"
                )))
            }
        }
    }

    fn shutdown(&mut self) {
        let sandbox = Arc::clone(&self.sandbox);
        if let Some(instance) = self.instance.as_mut() {
            let called = instance.shutdown(&sandbox);
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
