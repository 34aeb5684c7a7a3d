//! The settings a session runs with, resolved once at start-up.
//!
//! The CLI (or a test) builds a [`HostConfig`]; environments take the parts
//! they need when they are created. This module owns the defaults and their
//! documentation; it must not parse command lines or files itself.

use std::path::PathBuf;
use std::time::Duration;

use crate::output::capture::OutputLimits;
use crate::process::secrets::SecretPolicy;

/// Default time a command may run before it is interrupted: two minutes,
/// long enough for most builds and test runs, short enough that an agent
/// stuck on a command that never ends gets control back. Per command, the
/// `timeout_ms` field overrides it.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone)]
pub struct HostConfig {
    /// The project directory: where environments start, where the editor's
    /// paths are relative to, where `env/*.wasm` plugins are found.
    pub project_dir: PathBuf,
    pub default_timeout: Duration,
    pub output: OutputLimits,
    pub secrets: SecretPolicy,
    /// Let the editor open paths outside the project directory (`..`,
    /// absolute paths, symlinks leading out). Off by default.
    pub allow_outside_project: bool,
    /// The Python interpreter for the python environment (a path, or a
    /// command name looked up on `PATH`); `None` means `python3` on `PATH`.
    pub python: Option<PathBuf>,
}

impl HostConfig {
    /// Defaults for a project (which must already be an absolute path).
    pub fn for_project(project_dir: PathBuf) -> Self {
        HostConfig {
            output: OutputLimits::for_project(&project_dir),
            project_dir,
            default_timeout: DEFAULT_TIMEOUT,
            secrets: SecretPolicy::default(),
            allow_outside_project: false,
            python: None,
        }
    }
}
