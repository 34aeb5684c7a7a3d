//! The bash environment: a persistent shell that never hangs the agent.
//!
//! One bash runs in a pseudo-terminal for the whole session; working
//! directory, variables, aliases, functions and background jobs persist
//! between commands. Each command's output (stdout and stderr as the
//! terminal shows them, cleaned of escapes and redraws, capped) is the
//! response; the screen shows the working directory, the last exit code and
//! the background jobs.
//!
//! This module owns the environment's policy: when a shell is started and
//! restarted, what each outcome means for the agent (the sentences added to
//! the output, `success`, incidents), and the screen state. The mechanisms
//! live in the submodules:
//!
//! - [`shell`]: one bash process, its PTY, running and interrupting commands;
//! - [`setup`]: its private files (set-up script, command file) and its
//!   environment variables;
//! - [`marker`]: the prompt report that ends a command;
//! - [`reader`]: reading the terminal, during and between commands;
//! - [`jobs`], [`screen`]: the job table and the screen text.

mod jobs;
mod marker;
mod reader;
mod screen;
mod setup;
mod shell;

use std::path::PathBuf;
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::settings::Settings;
use envhost_core::text;
use envhost_core::{
    CommandContext, CommandResponse, Environment, EnvironmentError, Incident, ScreenSection, Usage,
};
use envhost_process::{CommandOutput, Escalation, Exit, OutputLimits, SecretPolicy};

use self::jobs::parse_jobs;
use self::marker::{PromptReport, new_token};
use self::screen::ShellStatus;
use self::setup::{SessionFiles, shell_environment};
use self::shell::{Ending, Run, Shell, StartError, StopCause, exit_code};

/// What a restart loses, in the words the agent reads.
const LOST_STATE: &str = "shell variables, functions, aliases and background jobs";

/// How to run a program that wants input, when nobody can type.
const GIVE_INPUT: &str = "Give input another way: a pipe or here-string (printf 'y\\n' | cmd, cmd <<< text), a file or </dev/null, or the program's non-interactive options.";

/// The persistent bash environment.
pub struct BashEnvironment {
    project_dir: PathBuf,
    limits: OutputLimits,
    secrets: SecretPolicy,
    files: Option<SessionFiles>,
    shell: Option<Shell>,
    status: ShellStatus,
    /// `set -e` was on at the last prompt: a failing command will end the
    /// shell, which the response then explains.
    errexit: bool,
}

impl BashEnvironment {
    /// A bash environment; the shell starts with the first command.
    pub fn new(config: &Settings) -> Self {
        BashEnvironment {
            project_dir: config.project_dir.clone(),
            limits: config.output.clone(),
            secrets: config.secrets.clone(),
            files: None,
            shell: None,
            status: ShellStatus::new(config.project_dir.clone()),
            errexit: false,
        }
    }

    /// Starts a shell in the last working directory (the project directory
    /// if that is gone).
    fn start_shell(
        &mut self,
        context: &CommandContext,
        output: &mut CommandOutput,
    ) -> Result<(), EnvironmentError> {
        let mut cwd = self.status.cwd.clone();
        if !cwd.is_dir() {
            if self.status.used && cwd != self.project_dir {
                output.after(note(format!(
                    "The last working directory {} no longer exists; the shell starts in the project directory.",
                    cwd.display()
                )));
            }
            cwd = self.project_dir.clone();
        }
        if self.files.is_none() {
            let files = SessionFiles::create(&std::env::temp_dir(), &new_token())
                .map_err(|e| EnvironmentError::io("cannot create the shell's private folder", e))?;
            self.files = Some(files);
        }
        let Some(files) = &self.files else {
            return Err(EnvironmentError::Failed(
                "the shell's private folder is missing".into(),
            ));
        };
        let environment = shell_environment(&self.secrets, files);
        let (shell, report) = Shell::start(files, &cwd, environment, &context.cancel, &mut |b| {
            output.feed(b)
        })
        .map_err(|err| match err {
            StartError::NotRunnable(_) => EnvironmentError::Unavailable(err.to_string()),
            other => EnvironmentError::Failed(other.to_string()),
        })?;
        self.record(&report);
        self.errexit = report.errexit();
        self.status.ended = None;
        self.shell = Some(shell);
        Ok(())
    }

    fn record(&mut self, report: &PromptReport) {
        self.status.cwd = report.cwd.clone();
        self.status.last_exit_code = report.exit_code;
        self.status.jobs = parse_jobs(&report.jobs);
    }

    /// The shell is gone (or must go): end its session and say so on the
    /// screen until the next one starts.
    fn discard_shell(&mut self, exit_code: i32, summary: &str) {
        if let Some(mut shell) = self.shell.take() {
            shell.terminate();
        }
        self.status.last_exit_code = exit_code;
        self.status.jobs.clear();
        self.status.ended = Some(format!(
            "{summary}; a fresh shell starts in this directory with the next command."
        ));
    }

    fn run_command(
        &mut self,
        command: &str,
        context: &CommandContext,
        output: &mut CommandOutput,
    ) -> Result<(), EnvironmentError> {
        if let Some(exit) = self.shell.as_ref().and_then(Shell::exited) {
            // It ended between commands (killed from outside).
            self.discard_shell(exit_code(exit), &format!("The shell {exit}"));
            output.after(note(format!(
                "The shell {exit} since the last command; a fresh shell was started in {}. Lost: {LOST_STATE}.",
                self.status.cwd.display()
            )));
            output.incident(Incident::Restarted {
                reason: format!("the shell {exit} between commands"),
                lost: LOST_STATE.into(),
            });
        }
        if self.shell.is_none() {
            self.start_shell(context, output)?;
        }
        let Some(shell) = self.shell.as_mut() else {
            return Err(EnvironmentError::Failed("the shell did not start".into()));
        };
        if let Some(run) = shell.settle(&mut |b| output.feed(b)) {
            let settled = run.report.is_some();
            self.conclude(run, None, output);
            if !settled {
                // The fresh shell runs the command.
                self.start_shell(context, output)?;
            }
        }
        let (Some(shell), Some(files)) = (self.shell.as_mut(), self.files.as_mut()) else {
            return Err(EnvironmentError::Failed("the shell did not start".into()));
        };
        let run = shell
            .run(files, command, context, &mut |b| output.feed(b))
            .map_err(|e| EnvironmentError::io("cannot pass the command to the shell", e))?;
        self.conclude(run, Some(command), output);
        Ok(())
    }

    /// Records what a run left behind and explains it in the output.
    /// `command` is the text that ran (`None` when settling a leftover).
    fn conclude(&mut self, run: Run, command: Option<&str>, output: &mut CommandOutput) {
        let errexit_was_on = self.errexit || command.is_some_and(mentions_errexit);
        match &run.report {
            Some(report) => {
                self.record(report);
                self.errexit = report.errexit();
                output.set_success(run.ending == Ending::Completed && report.exit_code == 0);
            }
            None => output.set_success(false),
        }
        if let Ending::Stopped { cause, escalation } = &run.ending {
            output.after(note(describe_stop(
                cause,
                *escalation,
                run.report.is_some(),
            )));
            if let StopCause::Timeout { limit, .. } = cause {
                output.incident(Incident::TimedOut { after: *limit });
            }
        }
        if run.ending == Ending::Abandoned {
            output.after(note(format!(
                "The command was {}. It had not ended a second after SIGINT; the next command stops it first.",
                text::INTERRUPTED
            )));
        }
        if let Some(exit) = run.exit {
            let why = if errexit_was_on && exit != Exit::Code(0) {
                " (`set -e` was on, so a failing command ended it)"
            } else {
                ""
            };
            self.discard_shell(exit_code(exit), &format!("The shell {exit}"));
            output.set_success(exit == Exit::Code(0));
            output.after(note(format!(
                "The shell {exit}{why}. A fresh shell starts in {} with the next command; {LOST_STATE} are lost.",
                self.status.cwd.display()
            )));
            output.incident(Incident::Restarted {
                reason: format!("the shell {exit}"),
                lost: LOST_STATE.into(),
            });
        } else if run.wedged() {
            self.discard_shell(
                self.status.last_exit_code,
                "The shell stopped responding and was ended",
            );
            output.after(note(format!(
                "The shell did not come back to its prompt even after SIGKILL, so it was ended. A fresh shell starts in {} with the next command; {LOST_STATE} are lost.",
                self.status.cwd.display()
            )));
            output.incident(Incident::Restarted {
                reason: "the shell stopped responding".into(),
                lost: LOST_STATE.into(),
            });
        }
    }
}

/// Whether a command turns `set -e` on (`set -e`, `set -eu`, `set -o
/// errexit`), to explain a shell that ends right after.
fn mentions_errexit(command: &str) -> bool {
    command.contains("errexit")
        || command
            .split_whitespace()
            .collect::<Vec<_>>()
            .windows(2)
            .any(|pair| {
                pair[0] == "set"
                    && pair[1].starts_with('-')
                    && !pair[1].starts_with("--")
                    && pair[1].contains('e')
            })
}

/// A sentence of the host's, marked as such in the output.
fn note(sentence: impl Into<String>) -> String {
    format!("[envhost] {}", sentence.into())
}

/// A sentence about an interruption.
fn describe_stop(cause: &StopCause, escalation: Escalation, kept_state: bool) -> String {
    let how = match escalation {
        Escalation::StoppedBy(Signal::SIGINT) => {
            "it was stopped with SIGINT (like Ctrl-C)".to_owned()
        }
        Escalation::StoppedBy(Signal::SIGTERM) => {
            "it ignored SIGINT and was stopped with SIGTERM".to_owned()
        }
        Escalation::StoppedBy(signal) => format!(
            "it ignored SIGINT and SIGTERM and was stopped with {}",
            signal.as_str()
        ),
        Escalation::AlreadyGone => "it ended as it was being stopped".to_owned(),
        Escalation::Unresponsive => "even SIGKILL did not bring the shell back".to_owned(),
    };
    let kept = if kept_state {
        " The shell kept its state (working directory, variables, background jobs)."
    } else {
        ""
    };
    match cause {
        StopCause::Timeout { limit, reading } => {
            let mut sentence = format!(
                "The command was still running after {} (its timeout), so {how}.{kept}",
                text::duration(*limit)
            );
            if let Some(reader) = reading {
                sentence.push_str(&format!(
                    " It was waiting for input from the terminal ({} is reading it). {GIVE_INPUT}",
                    reader.name
                ));
            }
            sentence
        }
        StopCause::WaitingForInput { reader, after } => format!(
            "The command was waiting for input from the terminal ({} is reading it), which nobody can type into here, so after {} {how}.{kept} {GIVE_INPUT}",
            reader.name,
            text::duration(Duration::from_millis(after.as_millis() as u64))
        ),
        StopCause::Cancelled => {
            format!("The command was {}, so {how}.{kept}", text::INTERRUPTED)
        }
        StopCause::Leftover => {
            format!("The previous command was still running when this one came, so {how}.{kept}")
        }
    }
}

impl Environment for BashEnvironment {
    fn usage(&self) -> Usage {
        Usage {
            summary: screen::HELP.to_owned(),
            commands: Vec::new(),
        }
    }

    fn handle_command(
        &mut self,
        command: &str,
        context: &CommandContext,
    ) -> Result<CommandResponse, EnvironmentError> {
        if command.contains('\0') {
            return Ok(CommandResponse::failure(
                "The command contains a NUL character, which bash cannot take. Remove it (write binary data with printf '\\0' instead).",
            ));
        }
        // What a terminal's CR-to-NL translation would have done.
        let command = command.replace("\r\n", "\n");
        self.status.used = true;
        let mut output = CommandOutput::new(&self.limits, "bash");
        self.run_command(&command, context, &mut output)?;
        Ok(output.finish())
    }

    fn screen(&mut self) -> Result<ScreenSection, EnvironmentError> {
        // Killed from outside since the last command: say so already (one
        // non-blocking waitpid; the replacement starts with the next command).
        if self.status.ended.is_none()
            && let Some(exit) = self.shell.as_ref().and_then(Shell::exited)
        {
            let mut status = self.status.clone();
            status.jobs.clear();
            status.ended = Some(format!(
                "The shell {exit}; a fresh shell starts in this directory with the next command."
            ));
            return Ok(ScreenSection::new(status.render()));
        }
        Ok(ScreenSection::new(self.status.render()))
    }

    fn shutdown(&mut self) {
        if let Some(mut shell) = self.shell.take() {
            shell.terminate();
        }
        self.files = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errexit_is_recognised_in_commands() {
        for yes in [
            "set -e; false",
            "set -euo pipefail\nmake",
            "set -o errexit",
            "  set -xe",
        ] {
            assert!(mentions_errexit(yes), "{yes}");
        }
        for no in ["echo set -x", "set -x", "set --", "reset -e"] {
            assert!(!mentions_errexit(no), "{no}");
        }
    }
}
