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
//! It owns the checks and their report; the host they run in is the one
//! every front end starts ([`Host::start`]), with bash, python and the
//! editor, and the project's plugins when asked.

use std::fs;
use std::io::Write;
use std::time::Instant;

use envhost_core::CommandRequest;
use envhost_core::text;

use crate::containment::resolve_project;
use crate::host::{Host, StartReport};
use crate::settings::{PluginSource, Settings};
use crate::stopped::Stopped;

/// Runs every check in a host started from `settings` (its timeout is how
/// long bash and python may each take; with `plugins`, the project's
/// plugins load too), writing one line per check; true when all passed.
pub fn run(mut settings: Settings, plugins: bool, out: &mut dyn Write) -> std::io::Result<bool> {
    let mut healthy = true;
    let mut report = |ok: bool, line: String, out: &mut dyn Write| -> std::io::Result<()> {
        healthy &= ok;
        writeln!(out, "{} {line}", if ok { "ok  " } else { "FAIL" })
    };

    let project = match resolve_project(&settings.project) {
        Ok(project) => project,
        Err(err) => {
            report(false, err.to_string(), out)?;
            writeln!(out, "unhealthy")?;
            return Ok(false);
        }
    };
    if let Err(err) = fs::read_dir(&project) {
        report(
            false,
            format!("project {}: cannot be read ({err})", project.display()),
            out,
        )?;
        writeln!(out, "unhealthy")?;
        return Ok(false);
    }
    settings.builtins = true;
    settings.plugin_source = if plugins {
        PluginSource::Project
    } else {
        PluginSource::None
    };
    settings.session_state = false;
    settings.resume = false;
    settings.watch = false;
    let timeout = settings.timeout;
    let host = match Host::start(settings) {
        Ok(host) => host,
        Err(err) => {
            report(false, err.to_string(), out)?;
            writeln!(out, "unhealthy")?;
            return Ok(false);
        }
    };
    report(
        true,
        format!("project {}: readable", host.project().display()),
        out,
    )?;
    // Where the environments below run, as a session started here would.
    report(
        true,
        envhost_process::isolation().describe().replace('\n', " "),
        out,
    )?;
    report(true, envhost_process::session_limits().describe(), out)?;
    for failure in &host.report().unavailable {
        report(false, format!("{}: {}", failure.name, failure.reason), out)?;
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
        let outcome = host.orchestrator().execute(&CommandRequest {
            environment: environment.to_owned(),
            command: command.to_owned(),
            timeout: Some(timeout),
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
    if plugins {
        for (ok, line) in plugin_checks(host.report()) {
            report(ok, line, out)?;
        }
    }
    host.stop(Stopped::Done("health check done".to_owned()));
    writeln!(out, "{}", if healthy { "healthy" } else { "unhealthy" })?;
    Ok(healthy)
}

/// One line for all the plugins that loaded, or one per refusal and grants
/// problem, each with whether it passed.
fn plugin_checks(started: &StartReport) -> Vec<(bool, String)> {
    let mut lines = Vec::new();
    if started.refused.is_empty() && started.config_problems.is_empty() {
        lines.push((
            true,
            format!(
                "plugins: {} loaded in {}",
                started.plugins.len(),
                text::duration(started.plugins_took)
            ),
        ));
    }
    for refused in &started.refused {
        lines.push((
            false,
            format!("plugin {}: {}", refused.name, refused.reason),
        ));
    }
    for problem in &started.config_problems {
        lines.push((false, format!("plugin grants: {problem}")));
    }
    lines
}
