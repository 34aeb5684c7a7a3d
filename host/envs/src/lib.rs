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

pub use crate::builtins::{builtins, instance_factories};
pub use crate::editor::{EditorEnvironment, EditorSettings};
pub use crate::settings::Settings;
