//! What the built-ins are created from, and their creation in display
//! order.

use std::path::PathBuf;

use envhost_core::{Environment, EnvironmentKind, EnvironmentName, LoadFailure, LoadedEnvironment};
use envhost_process::{OutputLimits, SecretPolicy};

use crate::bash::BashEnvironment;
use crate::editor::{self, EditorEnvironment, EditorSettings};
use crate::python::PythonEnvironment;

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
        }
    }
}

/// Creates every built-in, in display order: each one ready to register,
/// or the reason it could not be created.
pub fn builtins(settings: &Settings) -> Vec<Result<LoadedEnvironment, LoadFailure>> {
    let bash = BashEnvironment::new(settings);
    let python = PythonEnvironment::new(settings);
    let detail = python.describe();
    let editor = EditorEnvironment::new(EditorSettings {
        project_dir: settings.project_dir.clone(),
        allow_outside_project: settings.allow_outside_project,
    })
    .map(|editor| Box::new(editor) as Box<dyn Environment>)
    .map_err(|e| e.to_string());
    vec![
        builtin("bash", Ok(Box::new(bash)), None),
        builtin("python", Ok(Box::new(python)), Some(detail)),
        builtin(editor::NAME, editor, None),
    ]
}

fn builtin(
    name: &str,
    environment: Result<Box<dyn Environment>, String>,
    detail: Option<String>,
) -> Result<LoadedEnvironment, LoadFailure> {
    environment
        .and_then(|environment| {
            let name = EnvironmentName::new(name).map_err(|e| e.to_string())?;
            Ok(LoadedEnvironment {
                name,
                kind: EnvironmentKind::Builtin,
                environment,
                detail,
            })
        })
        .map_err(|reason| LoadFailure {
            name: name.to_owned(),
            reason,
        })
}
