//! What the built-ins are created from.

use std::path::PathBuf;

use envhost_process::{OutputLimits, SecretPolicy};

/// The settings the built-ins take from the session.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The project directory: where bash and python start, what the
    /// editor's paths are relative to.
    pub project_dir: PathBuf,
    /// How much of a command's output is returned, and where the rest goes.
    pub output: OutputLimits,
    /// Which environment variables bash and python may see.
    pub secrets: SecretPolicy,
    /// Let the editor open paths outside the project directory (`..`,
    /// absolute paths, symlinks leading out). Off by default.
    pub allow_outside_project: bool,
    /// The Python interpreter for the python environment (a path, or a
    /// command name looked up on `PATH`); `None` means `python3` on `PATH`.
    pub python: Option<PathBuf>,
    /// Keep each environment's recoverable state after every command, for
    /// a host started again with `--resume` (bash then dumps its state at
    /// every prompt). Off by default.
    pub session_state: bool,
}

impl Settings {
    /// Defaults for a project (which must already be an absolute path).
    pub fn for_project(project_dir: PathBuf) -> Self {
        Settings {
            output: OutputLimits::for_project(&project_dir),
            project_dir,
            secrets: SecretPolicy::default(),
            allow_outside_project: false,
            python: None,
            session_state: false,
        }
    }
}

/// How long bash and python let a command run when its context has no limit
/// (a command sent with `yield_ms` and no `timeout_ms`) until they learn to
/// yield; a day is "until it ends" for any command an agent waits on.
pub(crate) const LIMIT_WITHOUT_TIMEOUT: std::time::Duration =
    std::time::Duration::from_secs(24 * 3600);
