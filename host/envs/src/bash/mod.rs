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
//! - [`marker`]: the prompt report that ends a command, and why reading the
//!   terminal dry after it gets all the command's output;
//! - [`reader`]: reading the terminal and the report socket, during and
//!   between commands;
//! - [`streams`]: the shell's standard streams as `/proc` shows them;
//! - [`yielded`]: a command that outlived its wait, and the thread that
//!   keeps waiting for it between the agent's answers;
//! - [`jobs`], [`screen`]: the job table and the screen text.
//!
//! A command whose context carries `yield_after` is waited for in the
//! host's own thread until then; if it is still running, the shell moves to
//! a [`yielded::Yielded`] thread and the answer says so (`running: true`).
//! `wait`, `input` and `interrupt` go on with it there; when it ends, its
//! last answer carries the final output, notes and outcome, and the shell
//! comes back. Commands that end before they would yield (and every command
//! without `yield_after`) never leave the host's thread.

mod jobs;
mod marker;
mod reader;
mod screen;
mod setup;
mod shell;
mod state;
mod streams;
mod yielded;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::settings::Settings;
use envhost_core::text;
use envhost_core::{
    CommandContext, CommandResponse, Environment, EnvironmentError, Incident, RunningCommand,
    ScreenSection, Usage,
};
use envhost_process::{CommandOutput, Escalation, Exit, OutputLimits, SecretPolicy};

use self::jobs::parse_jobs;
use self::marker::PromptReport;
use self::screen::ShellStatus;
use self::setup::{SessionFiles, report_fd_number, shell_environment};
use self::shell::{Controls, Ending, Run, Shell, StartError, StopCause, exit_code};
use self::state::{Dump, KeptShell, could_change_state};
use self::yielded::{Answer, Yielded};

/// What a restart loses, in the words the agent reads.
const LOST_STATE: &str = "shell variables, functions, aliases and background jobs";

/// How to run a program that wants input, when nobody can type.
const GIVE_INPUT: &str = "Give input another way: a pipe or here-string (printf 'y\\n' | cmd, cmd <<< text), a file or </dev/null, or the program's non-interactive options.";

/// The persistent bash environment.
pub struct BashEnvironment {
    project_dir: PathBuf,
    limits: OutputLimits,
    /// Names the files its long outputs are saved in: `bash`, or
    /// `bash-NAME` for the instance `bash:NAME`.
    label: String,
    secrets: SecretPolicy,
    files: Option<SessionFiles>,
    shell: Option<Shell>,
    /// A command that yielded; the shell is with its thread meanwhile.
    yielded: Option<Yielded>,
    status: ShellStatus,
    /// `set -e` was on at the last prompt: a failing command will end the
    /// shell, which the response then explains.
    errexit: bool,
    /// `set -x` was on at the last prompt: the next prompt must turn it off.
    tracing: bool,
    /// The last prompt reported status 0 with tracing off: the next command
    /// line has nothing to carry over. Taken by the next command.
    clean_prompt: bool,
    /// The session is recorded: the prompt dumps the shell's state.
    record_state: bool,
    /// The fresh shell's dump: what is kept is what differs from it.
    baseline: Option<Dump>,
    /// The last dump read.
    current: Option<Dump>,
    /// A dump was asked for with the last command: read it after.
    dump_pending: bool,
    /// The state last handed out, so that an unchanged one is not.
    last_kept: Option<KeptShell>,
    /// Why the last dump could not be read (a command swapped the file):
    /// on the screen until one can.
    dump_refused: Option<String>,
}

impl BashEnvironment {
    /// A bash environment; the shell starts with the first command.
    pub fn new(config: &Settings) -> Self {
        BashEnvironment {
            project_dir: config.project_dir.clone(),
            limits: config.output.clone(),
            label: "bash".to_owned(),
            secrets: config.secrets.clone(),
            files: None,
            shell: None,
            yielded: None,
            status: ShellStatus::new(config.project_dir.clone()),
            errexit: false,
            tracing: false,
            clean_prompt: false,
            record_state: config.session_state,
            baseline: None,
            current: None,
            dump_pending: false,
            last_kept: None,
            dump_refused: None,
        }
    }

    /// The instance `bash:NAME` (named in its saved output files).
    pub fn instance(config: &Settings, name: &str) -> Self {
        BashEnvironment {
            label: format!("bash-{name}"),
            ..BashEnvironment::new(config)
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
            let files = SessionFiles::create_recording(
                &std::env::temp_dir(),
                report_fd_number(),
                self.record_state,
            )
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
        self.status.ended = None;
        self.shell = Some(shell);
        // What a fresh shell has: what is kept is what differs from it.
        self.baseline = self.read_dump();
        self.current = self.baseline.clone();
        self.dump_pending = false;
        Ok(())
    }

    /// The prompt's last dump of the shell's state, if the session is
    /// recorded and it is there.
    fn read_dump(&mut self) -> Option<Dump> {
        let read = self.files.as_ref()?.read_state()?;
        match read {
            Ok(bytes) => {
                self.dump_refused = None;
                Some(Dump::parse(&String::from_utf8_lossy(&bytes)))
            }
            Err(refusal) if refusal.is_missing() => None,
            Err(refusal) => {
                self.dump_refused = Some(refusal.to_string());
                None
            }
        }
    }

    /// The state to keep as of the last prompt.
    fn kept(&mut self) -> Option<KeptShell> {
        if std::mem::take(&mut self.dump_pending) {
            self.current = self.read_dump();
        }
        let baseline = self.baseline.as_ref()?;
        let now = self.current.as_ref()?;
        let jobs = self
            .status
            .jobs
            .iter()
            .filter(|job| job.is_running())
            .map(|job| job.command.clone())
            .collect();
        Some(now.kept(baseline, &self.status.cwd, self.status.last_exit_code, jobs))
    }

    /// What a prompt says about the shell, for the screen and for the
    /// next command line.
    fn record(&mut self, report: &PromptReport) {
        self.errexit = report.errexit();
        self.tracing = report.tracing();
        self.clean_prompt = report.exit_code == 0 && !self.tracing;
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

    /// The shell was lost with its state: end it, tell the agent (`told`,
    /// after the output) and the observers (`reason`), and keep `summary`
    /// on the screen until the next shell starts.
    fn lose_shell(
        &mut self,
        output: &mut CommandOutput,
        exit_code: i32,
        summary: &str,
        told: String,
        reason: String,
    ) {
        self.discard_shell(exit_code, summary);
        output.after(note(told));
        output.incident(Incident::Restarted {
            reason,
            lost: LOST_STATE.into(),
        });
    }

    /// Gets a shell ready for a command: replaces one that ended or is
    /// still busy with an abandoned command, starts one if there is none.
    fn ready_shell(
        &mut self,
        context: &CommandContext,
        output: &mut CommandOutput,
    ) -> Result<(), EnvironmentError> {
        if let Some(exit) = self.shell.as_ref().and_then(Shell::exited) {
            // It ended between commands (killed from outside).
            let told = format!(
                "The shell {exit} since the last command; a fresh shell was started in {}. Lost: {LOST_STATE}.",
                self.status.cwd.display()
            );
            self.lose_shell(
                output,
                exit_code(exit),
                &format!("The shell {exit}"),
                told,
                format!("the shell {exit} between commands"),
            );
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
        Ok(())
    }

    /// Runs `command`; `true` when it ended, `false` when it yielded (it
    /// then runs on with its own thread).
    fn run_command(
        &mut self,
        command: &str,
        context: &CommandContext,
        output: &mut CommandOutput,
    ) -> Result<bool, EnvironmentError> {
        self.ready_shell(context, output)?;
        let (Some(shell), Some(files)) = (self.shell.as_mut(), self.files.as_mut()) else {
            return Err(EnvironmentError::Failed("the shell did not start".into()));
        };
        // The prompt code looks at the shell only when it may have changed
        // (the state is dumped then too) or runs traced.
        let could_change = could_change_state(command, self.current.as_ref());
        if could_change || self.tracing {
            files.look_after_next();
        }
        if could_change && self.record_state {
            files.request_dump();
            self.dump_pending = true;
        }
        if std::mem::take(&mut self.clean_prompt) {
            files.nothing_to_carry_over();
        }
        let mut waiter = shell
            .begin(files, command, context, &mut |b| output.feed(b))
            .map_err(|e| EnvironmentError::io("cannot pass the command to the shell", e))?;
        let controls = Arc::new(Controls::default());
        let yield_at = context
            .yield_after
            .and_then(|after| Instant::now().checked_add(after));
        let ended = shell.proceed(
            &mut waiter,
            yield_at,
            &context.cancel,
            &controls,
            &mut |b| output.feed(b),
        );
        if let Some(run) = ended {
            self.conclude(run, Some(command), output);
            return Ok(true);
        }
        let Some(shell) = self.shell.take() else {
            return Err(EnvironmentError::Failed("the shell vanished".into()));
        };
        let yielded = Yielded::start(
            shell,
            waiter,
            command,
            output,
            context.cancel.clone(),
            controls,
        )
        .map_err(|e| EnvironmentError::io("cannot start waiting for the command", e))?;
        self.yielded = Some(yielded);
        Ok(false)
    }

    /// Waits for the yielded command until `until` (`None`: its end) and
    /// answers with its output since the last answer: still running, or
    /// its end with the notes and outcome a command gets.
    fn answer_yielded(
        &mut self,
        until: Option<Instant>,
        cancel: &envhost_core::CancelFlag,
    ) -> CommandResponse {
        let Some(yielded) = self.yielded.take() else {
            return CommandResponse::failure("Nothing is running in bash.");
        };
        let (still, answer) = yielded.wait(until, cancel);
        self.yielded = still;
        match answer {
            Answer::Running(output) => still_running(*output),
            Answer::Ended(ended) => {
                let yielded::Ended {
                    shell,
                    run,
                    mut output,
                } = *ended;
                self.shell = shell;
                match run {
                    Some(run) => self.conclude(run, None, &mut output),
                    None => {
                        self.discard_shell(self.status.last_exit_code, "The shell was lost");
                        output.after(note(format!(
                            "The shell was lost while the command ran; a fresh shell starts in {} with the next command; {LOST_STATE} are lost.",
                            self.status.cwd.display()
                        )));
                    }
                }
                output.finish()
            }
        }
    }

    /// Records what a run left behind and explains it in the output.
    /// `command` is the text that ran (`None` when settling a leftover).
    fn conclude(&mut self, run: Run, command: Option<&str>, output: &mut CommandOutput) {
        let errexit_was_on = self.errexit || command.is_some_and(mentions_errexit);
        for sentence in &run.notes {
            output.after(note(sentence.clone()));
        }
        match &run.report {
            Some(report) => {
                self.record(report);
                output.set_success(run.ending == Ending::Completed && report.exit_code == 0);
            }
            None => {
                self.clean_prompt = false;
                output.set_success(false);
            }
        }
        if let Ending::Stopped { cause, escalation } = &run.ending {
            output.after(note(describe_stop(
                cause,
                *escalation,
                run.report.is_some(),
            )));
            if run
                .report
                .as_ref()
                .is_some_and(|report| report.exit_code == 0)
            {
                output.after(note(
                    "It exited with code 0 when interrupted (as servers do on Ctrl-C), which the screen shows as the last exit code; the command still counts as failed because it did not end by itself.",
                ));
            }
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
            output.set_success(exit == Exit::Code(0));
            let told = format!(
                "The shell {exit}{why}. A fresh shell starts in {} with the next command; {LOST_STATE} are lost.",
                self.status.cwd.display()
            );
            self.lose_shell(
                output,
                exit_code(exit),
                &format!("The shell {exit}"),
                told,
                format!("the shell {exit}"),
            );
        } else if run.ending == Ending::ChannelLost {
            let told = format!(
                "The command closed the socket the shell reports the end of each command on (a descriptor the shell holds for the host), so the shell could no longer say when a command ends or with which exit code. It was ended; a fresh shell starts in {} with the next command; {LOST_STATE} are lost.",
                self.status.cwd.display()
            );
            self.lose_shell(
                output,
                self.status.last_exit_code,
                "The shell lost the socket it reports on and was ended",
                told,
                "the shell lost its report socket".into(),
            );
        } else if run.wedged() {
            let told = format!(
                "The shell did not come back to its prompt even after SIGKILL, so it was ended. A fresh shell starts in {} with the next command; {LOST_STATE} are lost.",
                self.status.cwd.display()
            );
            self.lose_shell(
                output,
                self.status.last_exit_code,
                "The shell stopped responding and was ended",
                told,
                "the shell stopped responding".into(),
            );
        }
    }
}

/// How long `wait` waits when the request does not say (the orchestrator
/// always says; a direct caller may not).
const DEFAULT_WAIT: Duration = Duration::from_secs(10);
/// How long `input` waits after typing when the request does not say.
const DEFAULT_INPUT_WAIT: Duration = Duration::from_secs(1);

/// The answer of a command still running: its output so far (the
/// orchestrator adds the sentence on how to go on).
fn still_running(output: CommandOutput) -> CommandResponse {
    let finished = output.finish();
    let mut response = CommandResponse::still_running(finished.output);
    response.incidents = finished.incidents;
    response
}

/// A command as quoted in a sentence: its first line, at most 80
/// characters.
fn shorten(command: &str) -> String {
    let line = command.lines().next().unwrap_or_default();
    let mut short: String = line.chars().take(80).collect();
    if short.len() < command.len() {
        short.push('…');
    }
    short
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
        StopCause::Interrupted => {
            format!("The command was interrupted as asked: {how}.{kept}")
        }
        StopCause::Leftover => {
            format!("The previous command was still running when this one came, so {how}.{kept}")
        }
    }
}

impl Environment for BashEnvironment {
    fn working_dir(&self) -> Option<std::path::PathBuf> {
        Some(self.status.cwd.clone())
    }

    fn usage(&self) -> Usage {
        Usage {
            summary: screen::HELP.to_owned(),
            commands: Vec::new(),
            input: envhost_core::InputRule::Shell,
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
        if let Some(yielded) = &self.yielded {
            // The orchestrator refuses first; this is the environment's own
            // guard.
            return Ok(CommandResponse::failure(format!(
                "bash is still running `{}`; go on with wait, input or interrupt first.",
                yielded.running().command
            )));
        }
        self.status.used = true;
        let mut output = CommandOutput::new(&self.limits, &self.label);
        if self.run_command(&command, context, &mut output)? {
            Ok(output.finish())
        } else {
            Ok(still_running(output))
        }
    }

    fn running(&self) -> Option<RunningCommand> {
        self.yielded.as_ref().map(Yielded::running)
    }

    fn wait(&mut self, context: &CommandContext) -> Result<CommandResponse, EnvironmentError> {
        let until = Instant::now().checked_add(context.yield_after.unwrap_or(DEFAULT_WAIT));
        Ok(self.answer_yielded(until, &context.cancel))
    }

    fn input(
        &mut self,
        text: &str,
        context: &CommandContext,
    ) -> Result<CommandResponse, EnvironmentError> {
        let Some(yielded) = &self.yielded else {
            return Ok(CommandResponse::failure("Nothing is running in bash."));
        };
        let mut typed_note = None;
        if yielded.ended() {
            typed_note = Some(note(
                "The command had already ended, so the input was not typed (the shell would have run it as a command).",
            ));
        } else if let Err(err) = yielded.type_text(text) {
            typed_note = Some(note(format!("The input could not be typed: {err}.")));
        }
        let until = Instant::now().checked_add(context.yield_after.unwrap_or(DEFAULT_INPUT_WAIT));
        let mut response = self.answer_yielded(until, &context.cancel);
        if let Some(sentence) = typed_note {
            response.output.push_str(&sentence);
            response.output.push('\n');
        }
        Ok(response)
    }

    fn interrupt(&mut self, context: &CommandContext) -> Result<CommandResponse, EnvironmentError> {
        let Some(yielded) = &self.yielded else {
            return Ok(CommandResponse::failure("Nothing is running in bash."));
        };
        yielded.interrupt();
        Ok(self.answer_yielded(None, &context.cancel))
    }

    fn restart(&mut self, context: &CommandContext) -> Result<CommandResponse, EnvironmentError> {
        let mut output = CommandOutput::new(&self.limits, &self.label);
        let mut lost = LOST_STATE.to_owned();
        if let Some(yielded) = self.yielded.take() {
            let command = yielded.running().command;
            let (shell, undelivered) = yielded.abandon();
            output = undelivered;
            self.shell = shell;
            lost = format!(
                "the running command `{}` (ended), and {LOST_STATE}",
                shorten(&command)
            );
        }
        self.discard_shell(0, "The shell was restarted");
        self.status = ShellStatus::new(self.project_dir.clone());
        self.status.used = true;
        self.errexit = false;
        self.start_shell(context, &mut output)?;
        output.after(note(format!(
            "The shell was restarted in {}. Lost: {lost}.",
            self.project_dir.display()
        )));
        output.incident(Incident::Restarted {
            reason: "restart was asked for".into(),
            lost,
        });
        output.set_success(true);
        Ok(output.finish())
    }

    fn save_state(&mut self) -> Option<String> {
        if !self.record_state || self.yielded.is_some() {
            return None;
        }
        if self.shell.is_none() {
            // The shell ended (`exit`, `set -e`): what is kept is a fresh
            // shell's state, in the directory the next one starts in.
            let fresh = KeptShell {
                cwd: self.status.cwd.clone(),
                last_exit_code: self.status.last_exit_code,
                ..KeptShell::default()
            };
            if self.last_kept.as_ref() == Some(&fresh) {
                return None;
            }
            let text = serde_json::to_string(&fresh).ok()?;
            self.last_kept = Some(fresh);
            return Some(text);
        }
        // Fast path: no dump since the last state, and what every prompt
        // reports (directory, exit code, jobs) is the same.
        if !self.dump_pending
            && let Some(last) = &self.last_kept
            && last.cwd == self.status.cwd
            && last.last_exit_code == self.status.last_exit_code
            && self
                .status
                .jobs
                .iter()
                .filter(|job| job.is_running())
                .count()
                == last.jobs.len()
            && self
                .status
                .jobs
                .iter()
                .filter(|job| job.is_running())
                .zip(&last.jobs)
                .all(|(job, kept)| job.command == *kept)
        {
            return None;
        }
        let kept = self.kept()?;
        if self.last_kept.as_ref() == Some(&kept) {
            return None;
        }
        let text = serde_json::to_string(&kept).ok()?;
        self.last_kept = Some(kept);
        Some(text)
    }

    fn restore_state(
        &mut self,
        state: &str,
        context: &CommandContext,
    ) -> Result<String, EnvironmentError> {
        let kept: KeptShell = serde_json::from_str(state).map_err(|e| {
            EnvironmentError::Failed(format!("the saved shell state is unreadable: {e}"))
        })?;
        let mut output = CommandOutput::new(&self.limits, &self.label);
        self.ready_shell(context, &mut output)?;
        let files = self.files.as_ref().ok_or_else(|| {
            EnvironmentError::Failed("the shell's private folder is missing".into())
        })?;
        let path = files
            .write_restore(&kept.restore_script())
            .map_err(|e| EnvironmentError::io("cannot write the restore script", e))?;
        let quoted = path.to_string_lossy().replace('\'', r"'\''");
        self.status.used = true;
        let ran = self.run_command(&format!(". '{quoted}'"), context, &mut output);
        if let Some(files) = &self.files {
            files.remove(&path);
        }
        ran?;
        let said = output.finish().output;
        let mut words = kept.describe();
        if self.status.cwd != kept.cwd {
            words.push_str(&format!(
                " The working directory {} is gone; the shell is in {}.",
                kept.cwd.display(),
                self.status.cwd.display()
            ));
        }
        let said = said.trim();
        if !said.is_empty() {
            words.push_str(&format!(" Restoring said: {said}"));
        }
        // Written with the next answer: the saved state still names what
        // did not come back (the jobs), and must stop saying so.
        self.last_kept = None;
        Ok(words)
    }

    fn screen(&mut self) -> Result<ScreenSection, EnvironmentError> {
        // Killed from outside since the last command: say so already (one
        // non-blocking waitpid; the replacement starts with the next command).
        // (While a command runs, the orchestrator shows it above this.)
        if self.status.ended.is_none()
            && let Some(exit) = self.shell.as_ref().and_then(Shell::exited)
        {
            let mut status = self.status.clone();
            status.jobs.clear();
            status.ended = Some(format!(
                "The shell {exit}; a fresh shell starts in this directory with the next command."
            ));
            return Ok(ScreenSection::new(status.render(&|_| false)));
        }
        let shell = self.shell.as_ref().map(Shell::pid);
        let job_alive =
            |group| shell.is_some_and(|shell| envhost_process::child_in_group(shell, group));
        let mut text = self.status.render(&job_alive);
        if let Some(refused) = &self.dump_refused {
            text.push_str(&format!(
                "\n\nSession state: not saved after the last command: {refused}."
            ));
        }
        Ok(ScreenSection::new(text))
    }

    fn holdings(&self) -> Vec<String> {
        if self.shell.is_none() && self.yielded.is_none() {
            return Vec::new();
        }
        let mut held = vec!["the shell".to_owned()];
        held.extend(
            self.status
                .jobs
                .iter()
                .filter(|job| job.is_running())
                .map(|job| format!("background job %{} `{}`", job.number, job.command)),
        );
        held
    }

    fn shutdown(&mut self) {
        if let Some(yielded) = self.yielded.take() {
            let (shell, _) = yielded.abandon();
            self.shell = shell;
        }
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
