//! `envhost call FILE.wasm COMMAND...`: commands run against one plugin
//! through the host's own path, for its author.
//!
//! The plugin is loaded as a session loads `env/NAME.wasm` (name, grants
//! and pin, compile or cache, link, instantiate, describe, requests, the
//! sandbox), alone in a host started as every front end starts one
//! (`Host::start`, containment first), and every command
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
use std::time::Duration;

use envhost_core::{CommandRequest, Orchestrator};
use envhost_plugin as plugin;
use envhost_runtime::{Host, PluginSource, Settings, Stopped};

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

/// Why a plugin could not be run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RunnerError {
    /// The host could not start (the project, the containment).
    #[error(transparent)]
    Start(#[from] envhost_runtime::StartError),
    /// The plugin was refused: the sentence says why (already on stderr).
    #[error("{0}")]
    Refused(String),
}

/// One plugin alone in a host of its own.
pub(crate) struct Runner {
    /// `Some` until dropped.
    host: Option<Host>,
    name: String,
}

impl Runner {
    /// Starts a host with `file` as its only environment, loaded as a
    /// session loads each plugin of env/.
    pub(crate) fn start(file: &Path, target: &Target) -> Result<Runner, RunnerError> {
        let mut settings = Settings::new(target.project.clone(), "call", target.timeout);
        settings.builtins = false;
        settings.plugin_source = PluginSource::File {
            path: file.to_owned(),
            apply_grants: target.grants.is_some(),
        };
        settings.plugins = target.settings.clone();
        let host = Host::start(settings)?;
        let started = host.report();
        if let Some(refused) = started.refused.first() {
            let reason = refused.reason.clone();
            host.stop(Stopped::Done("the plugin was refused".to_owned()));
            return Err(RunnerError::Refused(reason));
        }
        let Some(name) = started.plugins.first().cloned() else {
            host.stop(Stopped::Done("no plugin loaded".to_owned()));
            return Err(RunnerError::Refused(format!(
                "{} did not load",
                file.display()
            )));
        };
        Ok(Runner {
            host: Some(host),
            name,
        })
    }

    fn orchestrator(&self) -> Option<&Orchestrator> {
        self.host.as_ref().map(|host| host.orchestrator().as_ref())
    }

    /// Runs one step: a command, or the screen.
    pub(crate) fn run(&self, action: &Action) -> Answer {
        match action {
            Action::Screen => Answer {
                success: true,
                output: self.section(),
            },
            Action::Command(command) => {
                let Some(orchestrator) = self.orchestrator() else {
                    return Answer {
                        success: false,
                        output: "the host has stopped".to_owned(),
                    };
                };
                let outcome = orchestrator.execute(&CommandRequest {
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
        self.orchestrator()
            .and_then(|orchestrator| orchestrator.screen().get(&self.name).cloned())
            .map(|section| section.content)
            .unwrap_or_default()
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        if let Some(host) = self.host.take() {
            host.stop(Stopped::Done("the commands are done".to_owned()));
        }
    }
}

/// `envhost call`: 0 when every command succeeded, 1 when one failed, 2
/// when the plugin was refused.
pub fn run(args: CallArgs) -> ExitCode {
    let runner = match Runner::start(&args.file, &args.target) {
        Ok(runner) => runner,
        // The host said why on stderr as it refused the plugin.
        Err(RunnerError::Refused(_)) => return ExitCode::from(REFUSED),
        Err(err) => {
            eprintln!("envhost: {err}");
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
