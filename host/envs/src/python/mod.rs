//! The python environment: a persistent Python REPL whose screen shows the
//! working directory and the variables, most recently used first.
//!
//! One `python3` child runs a driver shipped inside the binary
//! ([`process`]); its namespace, imports and working directory persist from
//! command to command. This module owns what the agent sees: the lifecycle
//! (unused → running → ended or restarted), what a timeout, an exit or a
//! crash means and how the response says it, the output (terminal text,
//! capped with the shared [`OutputCapture`]) and the screen, built from what
//! the driver reported with the last command, so drawing it never talks to
//! python. Variable ordering lives in [`variables`].
//!
//! It must not know about the protocol or other environments, nor read
//! pipes or send signals itself (that is `process`).

mod process;
mod variables;

use std::path::PathBuf;

use nix::sys::signal::Signal;
use std::time::{Duration, Instant};

use crate::settings::Settings;
use envhost_core::text;
use envhost_core::{
    CancelFlag, CommandContext, CommandResponse, Environment, EnvironmentError, Incident,
    ScreenSection, Usage,
};
use envhost_process::{
    CommandOutput, DEFAULT_LADDER, Escalation, OutputLimits, escalate, signal_group,
};

use process::{Done, Ending, Interpreter, Launch, StartError, TalkError, Wait};
use variables::{MAX_SHOWN, RecentVariables, Variable};

pub use process::find_interpreter;

/// The one-line help under every form of the section.
const HELP: &str = "Any Python code. Variables and imports persist across commands.";

/// The section before the first command (minimal until used).
const READY: &str = "Python REPL (ready)";

/// What a new interpreter has lost, for responses and events.
const LOST: &str = "variables and imports";

/// How long an interpreter may take to start (the pyenv shim alone can take
/// a tenth of a second; a cold disk much more). Not part of the command's
/// own timeout.
const STARTUP_LIMIT: Duration = Duration::from_secs(30);

/// Room for the working directory, up to [`MAX_SHOWN`] variables, the
/// "more" line and the help.
const MAX_LINES: usize = MAX_SHOWN + 8;

/// Variables set for the interpreter on top of the host's (filtered) ones:
/// no pager may wait for a keypress nobody can give.
const EXTRA_VARIABLES: [(&str, &str); 2] = [("PAGER", "cat"), ("GIT_PAGER", "cat")];

/// Variables removed: they would change how the driver's interpreter runs
/// (PYTHONINSPECT would start an interactive prompt on exit).
const REMOVED_VARIABLES: [&str; 1] = ["PYTHONINSPECT"];

enum State {
    /// Nothing has run yet; no interpreter was started.
    Unused,
    Running(Interpreter),
    /// The interpreter ended (exit, crash); `how` says how. The next
    /// command starts a fresh one and says so.
    Ended {
        how: String,
    },
    /// Starting an interpreter failed; the next command tries again.
    StartFailed {
        message: String,
    },
}

/// The python environment: one persistent interpreter, its variables on
/// the screen.
pub struct PythonEnvironment {
    /// How to start python, or why it cannot be.
    launch: Result<Launch, String>,
    project_dir: PathBuf,
    output_limits: OutputLimits,
    state: State,
    variables: RecentVariables,
    /// `os.getcwd()` as of the last command.
    cwd: String,
}

impl PythonEnvironment {
    /// A python environment; the interpreter starts with the first command.
    pub fn new(config: &Settings) -> Self {
        let launch = find_interpreter(config.python.as_deref()).map(|program| {
            let mut environment = config.secrets.filtered_environment();
            environment.retain(|(name, _)| {
                !REMOVED_VARIABLES.iter().any(|r| name == r)
                    && !EXTRA_VARIABLES.iter().any(|(extra, _)| name == extra)
            });
            environment.extend(
                EXTRA_VARIABLES
                    .iter()
                    .map(|(name, value)| ((*name).into(), (*value).into())),
            );
            Launch {
                program,
                working_dir: config.project_dir.clone(),
                environment,
            }
        });
        PythonEnvironment {
            launch,
            project_dir: config.project_dir.clone(),
            output_limits: config.output.clone(),
            state: State::Unused,
            variables: RecentVariables::new(),
            cwd: config.project_dir.display().to_string(),
        }
    }

    /// One line for the "environment loaded" event.
    pub fn describe(&self) -> String {
        match &self.launch {
            Ok(launch) => format!("runs {}", launch.program.display()),
            Err(reason) => format!("unavailable: {reason}"),
        }
    }

    /// Notices an interpreter that ended between commands (a background
    /// thread called `os._exit`, the OOM killer...). One `waitpid`, no
    /// talking to python.
    fn notice_end(&mut self) {
        if let State::Running(interpreter) = &mut self.state
            && let Some(ending) = interpreter.ended_by_itself()
        {
            self.forget(ending);
        }
    }

    fn forget(&mut self, ending: Ending) {
        self.state = State::Ended {
            how: ending.describe(),
        };
        self.reset_view();
    }

    fn reset_view(&mut self) {
        self.variables.clear();
        self.cwd = self.project_dir.display().to_string();
    }

    /// Starts an interpreter into `self.state`; on failure the state says
    /// why and so does the returned message.
    fn start(&mut self, run: &mut CommandOutput, cancel: &CancelFlag) -> Result<(), String> {
        self.reset_view();
        let launch = match &self.launch {
            Ok(launch) => launch,
            Err(reason) => return Err(reason.clone()),
        };
        match Interpreter::start(launch, STARTUP_LIMIT, cancel, &mut |bytes| run.feed(bytes)) {
            Ok(interpreter) => {
                self.state = State::Running(interpreter);
                Ok(())
            }
            Err(err) => {
                let message = format!("{err}.");
                self.state = State::StartFailed {
                    message: message.clone(),
                };
                Err(match err {
                    StartError::EndedEarly { .. } => format!("{message} Its output is above."),
                    _ => message,
                })
            }
        }
    }

    fn absorb(&mut self, command: &str, done: Done) {
        self.cwd = done.cwd;
        let namespace = done
            .variables
            .into_iter()
            .map(|(name, type_name)| Variable { name, type_name })
            .collect();
        self.variables.update(command, namespace);
    }

    /// The code ran out of time (or the host was signalled): SIGINT, so that
    /// Python raises KeyboardInterrupt and keeps its namespace; SIGTERM and
    /// SIGKILL for the process group if it does not come back.
    fn interrupt(
        &mut self,
        command: &str,
        run: &mut CommandOutput,
        why: Interruption,
        cancel: &CancelFlag,
    ) {
        let State::Running(interpreter) = &mut self.state else {
            return;
        };
        let pid = interpreter.pid();
        let mut finished: Option<Result<Wait, TalkError>> = None;
        let escalation = escalate(
            &DEFAULT_LADDER,
            |signal| signal_group(pid, signal),
            |grace| match interpreter.wait(Instant::now() + grace, None, &mut |b| run.feed(b)) {
                Ok(Wait::Deadline) => false,
                other => {
                    finished = Some(other);
                    true
                }
            },
        );
        let cause = why.describe();
        match finished {
            Some(Ok(Wait::Done(done))) => {
                // Code blocked in os.system() does not see KeyboardInterrupt
                // (system() ignores SIGINT); its child does, and the code
                // may then simply finish.
                let what = if done.succeeded() {
                    "SIGINT was sent and the code then finished"
                } else {
                    "the code was interrupted (KeyboardInterrupt)"
                };
                self.absorb(command, done);
                run.after(format!(
                    "[{cause}: {what}. Variables and imports are kept.]"
                ));
                return;
            }
            Some(Ok(Wait::Ended(ending))) => {
                let how = match escalation {
                    Escalation::StoppedBy(signal) if signal != Signal::SIGINT => format!(
                        "Python did not stop on KeyboardInterrupt and was ended with {signal}"
                    ),
                    // It ended by itself (e.g. SIGINT's default action).
                    _ => format!("Python {}", ending.describe()),
                };
                run.after(format!("[{cause}. {how}; its {LOST} are lost.]"));
            }
            Some(Err(err)) => {
                interpreter.kill();
                run.after(format!(
                    "[{cause}. Python stopped answering properly ({err}) and was ended; its \
                     {LOST} are lost.]"
                ));
            }
            Some(Ok(Wait::Deadline | Wait::Cancelled)) | None => {
                let ending = interpreter.kill();
                run.after(format!(
                    "[{cause}. Python did not respond to SIGINT, SIGTERM or SIGKILL and was \
                     abandoned ({}); its {LOST} are lost.]",
                    ending.describe()
                ));
            }
        }
        run.incident(Incident::Restarted {
            reason: format!("{} and python did not come back", why.event()),
            lost: LOST.to_owned(),
        });
        self.reset_view();
        if matches!(why, Interruption::Cancelled) {
            // The host is stopping (or the operator pressed Ctrl-C): do not
            // start anything now; the next command will.
            self.state = State::Ended {
                how: "was ended after an interruption".to_owned(),
            };
            return;
        }
        match self.start(run, cancel) {
            Ok(()) => run.after("[A fresh interpreter is ready.]".to_owned()),
            Err(message) => run.after(format!(
                "[A fresh interpreter could not be started: {message}]"
            )),
        }
    }
}

/// Why running code was interrupted.
#[derive(Debug, Clone, Copy)]
enum Interruption {
    Timeout(Duration),
    Cancelled,
}

impl Interruption {
    fn describe(self) -> String {
        match self {
            Interruption::Timeout(after) => {
                format!("Timed out after {}", text::duration(after))
            }
            Interruption::Cancelled => text::capitalized(text::INTERRUPTED),
        }
    }

    fn event(self) -> String {
        match self {
            Interruption::Timeout(after) => {
                format!("timed out after {}", text::duration(after))
            }
            Interruption::Cancelled => text::INTERRUPTED.to_owned(),
        }
    }
}

impl Environment for PythonEnvironment {
    fn usage(&self) -> Usage {
        Usage {
            summary: HELP.to_owned(),
            commands: Vec::new(),
        }
    }

    fn handle_command(
        &mut self,
        command: &str,
        context: &CommandContext,
    ) -> Result<CommandResponse, EnvironmentError> {
        if let Err(reason) = &self.launch {
            return Err(EnvironmentError::Unavailable(reason.clone()));
        }
        let mut run = CommandOutput::new(&self.output_limits, "python");
        self.notice_end();
        if let State::Ended { how } = &self.state {
            run.before(format!(
                "[Started a fresh Python interpreter: the previous one {how}, so its {LOST} are \
                 gone.]"
            ));
            run.incident(Incident::Restarted {
                reason: format!("the previous interpreter {how}"),
                lost: LOST.to_owned(),
            });
        }
        if !matches!(self.state, State::Running(_))
            && let Err(message) = self.start(&mut run, &context.cancel)
        {
            run.after(format!("[Python could not be started: {message}]"));
            return Ok({
                run.set_success(false);
                run.finish()
            });
        }
        let State::Running(interpreter) = &mut self.state else {
            return Err(EnvironmentError::Failed(
                "the python interpreter is not running".to_owned(),
            ));
        };

        interpreter.collect_stray_output(&mut |b| run.feed(b));
        let limit = context
            .timeout
            .unwrap_or(crate::settings::LIMIT_WITHOUT_TIMEOUT);
        let deadline = Instant::now() + limit;
        // If the request cannot be delivered the interpreter is gone or
        // stuck; the wait below finds out which.
        let waited = interpreter
            .send(command, deadline)
            .and_then(|_| interpreter.wait(deadline, Some(&context.cancel), &mut |b| run.feed(b)));
        let success = match waited {
            Ok(Wait::Done(done)) => {
                let success = done.succeeded();
                self.absorb(command, done);
                success
            }
            Ok(Wait::Ended(ending)) => {
                run.after(format!(
                    "[Python {}. Its {LOST} are gone; the next command starts a fresh \
                     interpreter.]",
                    ending.describe()
                ));
                self.forget(ending);
                ending.exit_code() == Some(0)
            }
            Ok(Wait::Deadline) => {
                run.incident(Incident::TimedOut { after: limit });
                self.interrupt(
                    command,
                    &mut run,
                    Interruption::Timeout(limit),
                    &context.cancel,
                );
                false
            }
            Ok(Wait::Cancelled) => {
                self.interrupt(command, &mut run, Interruption::Cancelled, &context.cancel);
                false
            }
            Err(err) => {
                let ending = interpreter.kill();
                run.after(format!(
                    "[Python stopped answering properly ({err}) and was ended ({}). Its {LOST} \
                     are gone; the next command starts a fresh interpreter.]",
                    ending.describe()
                ));
                self.forget(ending);
                false
            }
        };
        Ok({
            run.set_success(success);
            run.finish()
        })
    }

    fn screen(&mut self) -> Result<ScreenSection, EnvironmentError> {
        self.notice_end();
        let content = match (&self.launch, &self.state) {
            (Err(reason), _) => format!("Python REPL (unavailable): {reason}"),
            (_, State::Unused) => format!("{READY}\n\n{HELP}"),
            (_, State::Running(_)) => self.running_screen(),
            (_, State::Ended { how }) => format!(
                "Python REPL (not running): the interpreter {how}; its {LOST} are gone. The \
                 next command starts a fresh interpreter.\n\n{HELP}"
            ),
            (_, State::StartFailed { message }) => format!(
                "Python REPL (could not start): {message} The next command tries again.\n\n{HELP}"
            ),
        };
        Ok(ScreenSection::with_max_lines(content, MAX_LINES))
    }

    fn shutdown(&mut self) {
        if let State::Running(interpreter) = std::mem::replace(&mut self.state, State::Unused) {
            interpreter.shutdown();
        }
    }
}

impl PythonEnvironment {
    /// The screen once running: working directory, variables by recent
    /// use, help.
    fn running_screen(&self) -> String {
        let mut text = format!("Working directory: {}\n\n", self.cwd);
        if self.variables.is_empty() {
            text.push_str("Variables: (none)\n");
        } else {
            text.push_str("Variables (by recent use):\n");
            let (shown, hidden) = self.variables.shown(MAX_SHOWN);
            for variable in shown {
                text.push_str(&format!("  {}: {}\n", variable.name, variable.type_name));
            }
            if hidden > 0 {
                text.push_str(&format!("  ... and {hidden} more\n"));
            }
        }
        text.push('\n');
        text.push_str(HELP);
        text
    }
}
