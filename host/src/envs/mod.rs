//! The built-in environments, native Rust in the host's process: bash,
//! python and the editor (seed 000, "Environment Designs").
//!
//! This module owns which built-ins exist and registers them with the
//! orchestrator (which puts them in display order). Each built-in lives in
//! its own submodule and implements [`crate::environment::Environment`];
//! none of them knows about the protocol, the screen's assembly or the
//! others.

pub mod bash;
pub mod editor;
pub mod python;

use crate::config::HostConfig;
use crate::environment::{Environment, EnvironmentName};
use crate::events::EnvironmentKind;
use crate::orchestrator::Orchestrator;

/// Registers every built-in environment.
pub fn register_builtins(orchestrator: &mut Orchestrator, config: &HostConfig) {
    let bash = bash::BashEnvironment::new(config);
    register_builtin(orchestrator, "bash", Ok(Box::new(bash)), None);

    let python = python::PythonEnvironment::new(config);
    let detail = python.describe();
    register_builtin(orchestrator, "python", Ok(Box::new(python)), Some(detail));

    let editor = editor::EditorEnvironment::new(editor::EditorSettings {
        project_dir: config.project_dir.clone(),
        allow_outside_project: config.allow_outside_project,
    })
    .map(|editor| Box::new(editor) as Box<dyn Environment>)
    .map_err(|e| e.to_string());
    register_builtin(orchestrator, editor::NAME, editor, None);
}

/// Registers one built-in, or records why it could not be created.
fn register_builtin(
    orchestrator: &mut Orchestrator,
    name: &str,
    environment: Result<Box<dyn Environment>, String>,
    detail: Option<String>,
) {
    let registered = environment.and_then(|environment| {
        let name = EnvironmentName::new(name).map_err(|e| e.to_string())?;
        orchestrator
            .register(name, EnvironmentKind::Builtin, environment, detail)
            .map_err(|e| e.to_string())
    });
    if let Err(reason) = registered {
        orchestrator.record_load_failure(name, &reason);
    }
}
