//! envhost's built-in environments, native Rust in the host's process:
//! bash, python and the file editor.
//!
//! This crate owns which built-ins exist and how each works; each lives in
//! its own module and implements [`envhost_core::Environment`]. It hands
//! them over as [`LoadedEnvironment`](envhost_core::LoadedEnvironment)s ([`builtins`]); it must not know the
//! orchestrator, the protocol, the screen's assembly or the plugins, and
//! the built-ins do not know each other.

#![deny(missing_docs)]

mod bash;
mod builtins;
mod editor;
mod python;
mod settings;

pub use crate::builtins::builtins;
pub use crate::editor::{EditorEnvironment, EditorSettings};
pub use crate::settings::Settings;

/// How long bash and python let a command run when its context has no limit
/// (a command sent with `yield_ms` and no `timeout_ms`) until they learn to
/// yield; a day is "until it ends" for any command an agent waits on.
const LIMIT_WITHOUT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(24 * 3600);
