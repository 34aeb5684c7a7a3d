//! The built-in environments, native Rust in the host's process: bash,
//! python and the editor (seed 000, "Environment Designs").
//!
//! This module owns which built-ins exist and registers them with the
//! orchestrator in display order. Each built-in lives in its own submodule
//! and implements [`crate::environment::Environment`]; none of them knows
//! about the protocol, the screen's assembly or the others.

pub mod editor;

use crate::config::HostConfig;
use crate::environment::EnvironmentName;
use crate::events::EnvironmentKind;
use crate::orchestrator::Orchestrator;

/// Registers every built-in environment.
pub fn register_builtins(orchestrator: &mut Orchestrator, config: &HostConfig) {
    register_editor(orchestrator, config);
}

fn register_editor(orchestrator: &mut Orchestrator, config: &HostConfig) {
    let settings = editor::EditorSettings {
        project_dir: config.project_dir.clone(),
        allow_outside_project: config.allow_outside_project,
    };
    let registered = EnvironmentName::new(editor::NAME)
        .map_err(|e| e.to_string())
        .and_then(|name| {
            let environment =
                editor::EditorEnvironment::new(settings).map_err(|e| e.to_string())?;
            orchestrator
                .register(name, EnvironmentKind::Builtin, Box::new(environment), None)
                .map_err(|e| e.to_string())
        });
    if let Err(reason) = registered {
        orchestrator.record_load_failure(editor::NAME, &reason);
    }
}
