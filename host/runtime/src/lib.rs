//! The host every front end serves: [`Host::start`] assembles what a
//! session needs (containment and limits, the reaper, the event bus and its
//! observers, the built-in environments and the plugins, the session
//! recorder and `--resume`, reload with `--watch`), and [`Host::stop`]
//! shuts it down and says why, as one [`Stopped`].
//!
//! It must not know any front end (NDJSON, the REPL, MCP), the command line
//! (its [`Settings`] is a plain struct) or any environment by name.

#![deny(missing_docs)]

mod containment;
mod error;
pub mod healthcheck;
mod host;
mod reload;
mod resume;
mod session;
mod settings;
pub mod signals;
mod stopped;
mod watch;

pub use crate::containment::{contain, in_force, resolve_project, stop_descendants};
pub use crate::error::StartError;
pub use crate::host::{Host, StartReport, register};
pub use crate::settings::{IsolationLevel, PluginSource, ProcessSettings, Settings};
pub use crate::signals::HostSignal;
pub use crate::stopped::Stopped;
