//! Which built-ins exist, and their creation in display order.

use envhost_core::instance::InstanceFactory;
use envhost_core::{Environment, EnvironmentKind, EnvironmentName, LoadFailure, LoadedEnvironment};

use crate::bash::BashEnvironment;
use crate::editor::{self, EditorEnvironment, EditorSettings};
use crate::python::PythonEnvironment;
use crate::settings::Settings;

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
    .map_err(BuiltinUnavailable::Help);
    vec![
        builtin("bash", Ok(Box::new(bash)), None),
        builtin("python", Ok(Box::new(python)), Some(detail)),
        builtin(editor::NAME, editor, None),
    ]
}

/// The built-ins that can have named instances (`bash:server`,
/// `python:worker`), each with the factory that makes another one with
/// the same settings as the default.
pub fn instance_factories(settings: &Settings) -> Vec<(&'static str, InstanceFactory)> {
    let bash = settings.clone();
    let python = settings.clone();
    vec![
        (
            "bash",
            Box::new(move |name| {
                Box::new(BashEnvironment::instance(&bash, name)) as Box<dyn Environment>
            }),
        ),
        (
            "python",
            Box::new(move |name| {
                Box::new(PythonEnvironment::instance(&python, name)) as Box<dyn Environment>
            }),
        ),
    ]
}

/// Why a built-in could not be created.
#[derive(Debug, thiserror::Error)]
enum BuiltinUnavailable {
    #[error(transparent)]
    Help(envhost_core::HelpError),
    #[error(transparent)]
    Name(envhost_core::InvalidName),
}

fn builtin(
    name: &str,
    environment: Result<Box<dyn Environment>, BuiltinUnavailable>,
    detail: Option<String>,
) -> Result<LoadedEnvironment, LoadFailure> {
    environment
        .and_then(|environment| {
            let name = EnvironmentName::new(name).map_err(BuiltinUnavailable::Name)?;
            Ok(LoadedEnvironment {
                name,
                kind: EnvironmentKind::Builtin,
                environment,
                detail,
            })
        })
        .map_err(|reason| LoadFailure {
            name: name.to_owned(),
            reason: reason.to_string(),
        })
}
