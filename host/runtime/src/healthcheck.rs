//! `envhost healthcheck`: can this machine (or container) serve a session?
//!
//! For Docker's `HEALTHCHECK` and Kubernetes' probes. It checks what a
//! session needs, the way a session does it: the project directory can be
//! read, bash starts and answers a command, python starts and answers,
//! and (with `--plugins`) every plugin in the project loads. One line per
//! check on stdout; exit status 0 when all pass, 1 otherwise. It starts
//! its own short-lived environments: it does not (and cannot) look inside
//! a session another process is serving.
//!
//! It owns the checks and their report; building environments is
//! `envhost-envs`' and `envhost-plugin`'s job.

use std::fs;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use envhost_core::text;
use envhost_core::{CancelFlag, CommandRequest, EventBus, Orchestrator, OrchestratorSettings};
use envhost_plugin::{self as plugin, DiscardSink, LogSink, PluginSettings};
use envhost_process::terminate_descendants;

/// What to check.
pub struct Checks {
    /// The session's settings for bash and python.
    pub settings: envhost_envs::Settings,
    /// How long each environment may take to answer.
    pub timeout: Duration,
    /// Load the project's plugins too, with these settings.
    pub plugins: Option<PluginSettings>,
}

/// Runs every check, writing one line per check; true when all passed.
pub fn run(checks: Checks, out: &mut dyn Write) -> std::io::Result<bool> {
    let mut healthy = true;
    let mut report = |ok: bool, line: String, out: &mut dyn Write| -> std::io::Result<()> {
        healthy &= ok;
        writeln!(out, "{} {line}", if ok { "ok  " } else { "FAIL" })
    };

    let project = &checks.settings.project_dir;
    match fs::read_dir(project) {
        Ok(_) => report(
            true,
            format!("project {}: readable", project.display()),
            out,
        )?,
        Err(err) => {
            report(
                false,
                format!("project {}: cannot be read ({err})", project.display()),
                out,
            )?;
            return Ok(false);
        }
    }

    // Where the environments below run, as a session started here would.
    report(
        true,
        envhost_process::isolation().describe().replace('\n', " "),
        out,
    )?;
    report(true, envhost_process::session_limits().describe(), out)?;
    let cancel = CancelFlag::new();
    let orchestrator = Orchestrator::new(
        OrchestratorSettings::new(checks.timeout),
        EventBus::new(),
        cancel.clone(),
    );
    for builtin in envhost_envs::builtins(&checks.settings) {
        match builtin {
            Ok(loaded) => {
                let name = loaded.name.to_string();
                if let Err(err) = crate::register(&orchestrator, loaded) {
                    report(false, format!("{name}: {err}"), out)?;
                }
            }
            Err(failure) => report(false, format!("{}: {}", failure.name, failure.reason), out)?,
        }
    }

    for (environment, command, expected) in [
        ("bash", "echo \"bash $BASH_VERSION\"", "bash "),
        (
            "python",
            "import sys; print('Python', sys.version.split()[0])",
            "Python ",
        ),
    ] {
        let started = Instant::now();
        let outcome = orchestrator.execute(&CommandRequest {
            environment: environment.to_owned(),
            command: command.to_owned(),
            timeout: Some(checks.timeout),
            yield_after: None,
            id: None,
        });
        let took = text::duration(started.elapsed());
        let answer = outcome.output.trim();
        if outcome.success && answer.starts_with(expected) {
            report(
                true,
                format!("{environment}: {answer}, answered in {took}"),
                out,
            )?;
        } else {
            report(
                false,
                format!("{environment}: failed after {took}: {answer}"),
                out,
            )?;
        }
    }

    if let Some(settings) = &checks.plugins {
        for (ok, line) in plugin_checks(project, settings, &checks.settings.output, &cancel) {
            report(ok, line, out)?;
        }
    }

    orchestrator.shutdown("health check done");
    terminate_descendants(Duration::from_secs(2));
    writeln!(out, "{}", if healthy { "healthy" } else { "unhealthy" })?;
    Ok(healthy)
}

/// Loads the project's plugins as a session would: one line for all that
/// loaded, or one per refusal and grants problem, each with whether it
/// passed.
fn plugin_checks(
    project: &std::path::Path,
    settings: &PluginSettings,
    output: &envhost_process::OutputLimits,
    cancel: &CancelFlag,
) -> Vec<(bool, String)> {
    let log: Arc<dyn LogSink> = Arc::new(DiscardSink);
    let started = Instant::now();
    let mut plugins = plugin::load(project, settings, output, cancel, log);
    let loaded = plugins.take_loaded().len();
    let result = plugins.finish();
    let took = text::duration(started.elapsed());
    let mut lines = Vec::new();
    if result.refused.is_empty() && result.config_problems.is_empty() {
        lines.push((true, format!("plugins: {loaded} loaded in {took}")));
    }
    for refused in &result.refused {
        lines.push((
            false,
            format!("plugin {}: {}", refused.name, refused.reason),
        ));
    }
    for problem in &result.config_problems {
        lines.push((false, format!("plugin grants: {problem}")));
    }
    lines
}
