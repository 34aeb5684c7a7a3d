//! The built-in environments, native Rust in the host's process: bash,
//! python and the editor (seed 000, "Environment Designs").
//!
//! This module owns which built-ins exist and registers them with the
//! orchestrator in display order. Each built-in lives in its own submodule
//! and implements [`crate::environment::Environment`]; none of them knows
//! about the protocol, the screen's assembly or the others.

pub mod bash;

use crate::config::HostConfig;
use crate::environment::{Environment, EnvironmentName};
use crate::events::EnvironmentKind;
use crate::orchestrator::Orchestrator;

/// Registers every built-in environment.
pub fn register_builtins(orchestrator: &mut Orchestrator, config: &HostConfig) {
    register_builtin(
        orchestrator,
        "bash",
        Box::new(bash::BashEnvironment::new(config)),
    );
}

fn register_builtin(
    orchestrator: &mut Orchestrator,
    name: &str,
    environment: Box<dyn Environment>,
) {
    let registered = EnvironmentName::new(name)
        .map_err(|e| e.to_string())
        .and_then(|valid| {
            orchestrator
                .register(valid, EnvironmentKind::Builtin, environment, None)
                .map_err(|e| e.to_string())
        });
    if let Err(reason) = registered {
        orchestrator.record_load_failure(name, &reason);
    }
}
