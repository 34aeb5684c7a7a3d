//! The built-in environments, native Rust in the host's process: bash,
//! python and the editor (seed 000, "Environment Designs").
//!
//! This module owns which built-ins exist and registers them with the
//! orchestrator in display order. Each built-in lives in its own submodule
//! and implements [`crate::environment::Environment`]; none of them knows
//! about the protocol, the screen's assembly or the others.

use crate::config::HostConfig;
use crate::events::EnvironmentKind;
use crate::orchestrator::Orchestrator;

/// Registers every built-in environment.
pub fn register_builtins(orchestrator: &mut Orchestrator, config: &HostConfig) {
    let _ = (orchestrator, config, EnvironmentKind::Builtin);
}
