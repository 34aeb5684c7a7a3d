//! Where programs run and what bounds them, decided once before any child
//! exists, and every descendant reaped at the end. It owns the calls into
//! `envhost-process` that are process-wide; it must not know environments.

use std::path::{Path, PathBuf};
use std::time::Duration;

use envhost_process::{configure_containment, install_reaper, terminate_descendants};

use crate::error::StartError;
use crate::settings::{IsolationLevel, ProcessSettings};

/// Decides where programs run and what bounds them, and installs the
/// reaper: before any program exists, so that nothing escapes.
pub fn contain(settings: &ProcessSettings) -> Result<(), StartError> {
    let defaults = envhost_process::Limits::default();
    let limits = envhost_process::Limits {
        processes: settings.max_processes,
        memory: settings.max_memory.unwrap_or(defaults.memory),
    };
    configure_containment(envhost_process::ContainmentSettings {
        cgroups: settings.cgroups,
        limits,
    });
    let request = match settings.isolation {
        IsolationLevel::Auto => envhost_process::IsolationRequest::Auto,
        IsolationLevel::Namespaces => envhost_process::IsolationRequest::Namespaces,
        IsolationLevel::Guard => envhost_process::IsolationRequest::Guard,
    };
    envhost_process::configure_isolation(request)
        .map_err(|err| StartError::Isolation(err.to_string()))?;
    install_reaper();
    Ok(())
}

/// What is in force, for the first answer's screen and the healthcheck.
pub fn in_force() -> String {
    format!(
        "{}\n{}",
        envhost_process::isolation().describe(),
        envhost_process::session_limits().describe()
    )
}

/// Ends every process the session's environments left, and says on stderr
/// which could not be stopped.
pub fn stop_descendants() {
    let report = terminate_descendants(Duration::from_secs(2));
    if !report.survivors.is_empty() {
        eprintln!(
            "envhost: {} process(es) could not be stopped: {:?}",
            report.survivors.len(),
            report.survivors
        );
    }
}

/// `path` as a canonical directory, or why it cannot be the project.
pub fn resolve_project(path: &Path) -> Result<PathBuf, StartError> {
    let resolved = path.canonicalize().map_err(|reason| StartError::Project {
        path: path.to_owned(),
        reason,
    })?;
    if !resolved.is_dir() {
        return Err(StartError::NotADirectory(resolved));
    }
    Ok(resolved)
}
