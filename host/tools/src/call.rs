//! `envhost call FILE.wasm COMMAND...`: commands run against one plugin
//! through the host's own path, for its author.
//!
//! The plugin is loaded as a session loads `env/NAME.wasm` (name, grants
//! and pin, compile or cache, link, instantiate, describe, requests, the
//! sandbox), registered in an orchestrator of its own, and every command
//! goes through the orchestrator as an agent's would (routing by first
//! word, progressive help, traps and restarts). What it prints is a session
//! file (`session_file`): each command and its answer, then `$ screen` and
//! the plugin's section, so a call pasted into a `.session` file is a test.
//! No other environment starts (no bash, no python).
//!
//! It also holds the [`Runner`] that `envhost test` runs sessions with. It
//! must not know the session-file syntax beyond rendering answers.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use envhost_core::{
    CancelFlag, CommandRequest, EventBus, LoadedEnvironment, Orchestrator, OrchestratorSettings,
};
use envhost_plugin::{self as plugin, LogSink, PluginFile, StderrSink};
use envhost_process::OutputLimits;

use crate::session_file::{Action, Answer, render_step};

/// Exit status of a refused plugin.
pub const REFUSED: u8 = 2;

/// What `envhost call` runs.
pub struct CallArgs {
    /// The plugin file; the environment is named after its stem.
    pub file: PathBuf,

    /// The commands, one per argument (quote each: "put colour blue"); a
    /// newline in one starts its body.
    pub commands: Vec<String>,

    /// Which plugin, granted what, in which project.
    pub target: Target,
}

/// Which plugin, granted what, in which project: shared by `call` and
/// `test`.
pub struct Target {
    /// The grants file to apply, read as a session reads
    /// <project>/env/envhost.toml [default: nothing is granted].
    pub grants: Option<PathBuf>,

    /// The project directory its grants are relative to.
    pub project: PathBuf,

    /// The time each command may take.
    pub timeout: Duration,

    /// How the plugin is run; its `config_file` is the grants file.
    pub settings: plugin::PluginSettings,
}

/// One plugin loaded in an orchestrator of its own.
pub(crate) struct Runner {
    orchestrator: Orchestrator,
    name: String,
}

impl Runner {
    /// Loads `file` as a session would; the error is the refusal in words.
    pub(crate) fn start(
        file: &Path,
        target: &Target,
    ) -> Result<Result<Runner, String>, envhost_runtime::StartError> {
        let project = envhost_runtime::resolve_project(&target.project)?;
        // Before the plugin can start a program (a `programs` grant).
        envhost_runtime::contain(&envhost_runtime::ProcessSettings::default())?;
        let cancel = CancelFlag::new();
        let log: Arc<dyn LogSink> = Arc::new(StderrSink);
        let settings = target.settings.clone();
        let loaded = plugin::load_file(
            &PluginFile {
                path: file,
                apply_grants: target.grants.is_some(),
                sharing: 1,
            },
            &project,
            &settings,
            &OutputLimits::for_project(&project),
            &cancel,
            log,
        );
        let loaded = match loaded {
            Ok(loaded) => loaded,
            Err(reason) => return Ok(Err(reason)),
        };
        let orchestrator = Orchestrator::new(
            OrchestratorSettings::new(target.timeout),
            EventBus::new(),
            cancel,
        );
        let LoadedEnvironment {
            name,
            kind,
            environment,
            detail,
        } = loaded.environment;
        let shown = name.to_string();
        if let Err(err) = orchestrator.register(name, kind, environment, detail) {
            return Ok(Err(err.to_string()));
        }
        Ok(Ok(Runner {
            orchestrator,
            name: shown,
        }))
    }

    /// Runs one step: a command, or the screen.
    pub(crate) fn run(&self, action: &Action) -> Answer {
        match action {
            Action::Screen => Answer {
                success: true,
                output: self.section(),
            },
            Action::Command(command) => {
                let outcome = self.orchestrator.execute(&CommandRequest {
                    environment: self.name.clone(),
                    command: command.clone(),
                    timeout: None,
                    yield_after: None,
                    id: None,
                });
                Answer {
                    success: outcome.success,
                    output: outcome.output,
                }
            }
        }
    }

    /// The plugin's screen section, as the agent sees it.
    fn section(&self) -> String {
        self.orchestrator
            .screen()
            .get(&self.name)
            .map(|section| section.content.clone())
            .unwrap_or_default()
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        self.orchestrator.shutdown("the commands are done");
        envhost_runtime::stop_descendants();
    }
}

/// `envhost call`: 0 when every command succeeded, 1 when one failed, 2
/// when the plugin was refused.
pub fn run(args: CallArgs) -> ExitCode {
    let runner = match Runner::start(&args.file, &args.target) {
        Ok(Ok(runner)) => runner,
        Ok(Err(reason)) => {
            eprintln!("envhost: {reason}");
            return ExitCode::from(REFUSED);
        }
        Err(err) => {
            eprintln!("envhost: {err:#}");
            return ExitCode::from(REFUSED);
        }
    };
    let mut stdout = io::stdout().lock();
    let mut all_succeeded = true;
    let mut steps: Vec<Action> = args.commands.into_iter().map(Action::Command).collect();
    steps.push(Action::Screen);
    for action in &steps {
        let answer = runner.run(action);
        all_succeeded &= answer.success;
        for line in render_step(action, &answer) {
            if writeln!(stdout, "{line}").is_err() {
                return ExitCode::FAILURE;
            }
        }
    }
    if stdout.flush().is_err() {
        return ExitCode::FAILURE;
    }
    if all_succeeded {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
