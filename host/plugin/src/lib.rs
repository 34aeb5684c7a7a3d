//! envhost's WebAssembly host: ad-hoc environments as sandboxed components
//! ("plugins").
//!
//! A plugin is a component for a world of `envhost:environment@0.2.0`
//! (`wit/v0.2.0`) or of the frozen 0.1.0 (`wit/v0.1.0`), saved as
//! `<project>/env/NAME.wasm`. At start-up
//! [`load`] reads the operator's `env/envhost.toml`, finds the plugins,
//! type-checks each with its grants (pin, compile, link, instantiate,
//! describe, requests) and returns the good ones as environments with the
//! refused ones in words; [`check_file`] runs the same checks on one file
//! for `envhost check`.
//!
//! Inside, each module has one job and the imports between them run one way
//! (`scripts/check-module-cycles` holds that):
//!
//! ```text
//! wit, plugin_text  (import nothing of this crate)
//! limits ◄─ guest_io ◄─ live_call ◄─ state ◄─ host ◄─ sandbox ◄─ failure
//!        ◄─ exports ◄─ instance ◄─ yielding ◄─ environment
//!        ◄─ load (loader, cache, file_hashes, refusals) ◄─ check
//! grants (config_file)  ◄─ state, host, load, check
//! ```
//!
//! - `wit`: the generated bindings, one module per WIT version, and the
//!   versions' names;
//! - `exports`: which version a component speaks, its optional exports, and
//!   calling any version with the latest types;
//! - `plugin_text`: what a plugin says, made safe to show;
//! - `limits`: every time and memory limit of a call, and the clock;
//! - `guest_io`: plugins' stdout, stderr and log lines, bounded;
//! - `live_call`: a command that may outlive the agent's wait, as the host
//!   calls and the environment share it;
//! - `state`: what a store holds;
//! - `host`: the host-side implementations of the WIT imports;
//! - `sandbox`: the engine and the linker;
//! - `instance`, `failure`: one live instance and why a call failed;
//! - `yielding`: a command left running on a worker thread while it waits
//!   on a program;
//! - `environment`: a plugin as an `Environment` (help, restarts);
//! - `grants`: the grants file, and what each plugin may do;
//! - `load`: discovery, the load steps, the compiled-code cache, refusals;
//! - `check`: the `envhost check` report.
//!
//! It must not know the orchestrator, the protocol or the built-in
//! environments.

#![deny(missing_docs)]

#[doc(hidden)]
mod background;
pub mod bench;
mod check;
mod engine_config;
mod environment;
mod exports;
mod failure;
mod grants;
mod guest_io;
mod host;
mod instance;
mod kept_state;
mod limits;
mod live_call;
mod load;
mod plugin_text;
mod sandbox;
mod settings;
mod state;
mod wit;
mod yielding;

pub use crate::check::{CheckReport, check_as, check_file};
pub use crate::grants::config_file::Verify;
pub use crate::grants::pins::{
    GrantsFile, GrantsFileError, PinEditError, PinnedEntry, VerifyChange, grants_file, with_pin,
};
pub use crate::guest_io::{DiscardSink, LogSink, StderrSink};
pub use crate::limits::{
    DEFAULT_COMPILE_MEMORY, DEFAULT_COMPILE_TIME, DEFAULT_MAX_PLUGIN_SIZE, DEFAULT_MAX_PLUGINS,
    DEFAULT_MEMORY_LIMIT, DEFAULT_OPEN_FILES,
};
pub use crate::load::cache::{CodeCache, content_sha256};
pub use crate::load::compile::{COMPILE_SUBCOMMAND, serve_compile};
pub use crate::load::names::{
    MAX_NAME_BYTES, NameRefusal, plugin_name, reads_like_builtin, reads_like_plugin,
};
pub use crate::load::{
    LoadReport, Plugin, PluginFile, Plugins, file_sha256, load, load_changed, load_file,
};
pub use crate::settings::{PluginSettings, plugin_dir};

/// A plugin file's name for the host's own sentences, as every refusal
/// shows it: control characters and line breaks escaped (`\n`, `\u{1b}`),
/// so that a name in env/ cannot add a line to an answer or act on a
/// terminal.
pub fn shown_file_name(name: &str) -> std::borrow::Cow<'_, str> {
    plugin_text::name(name)
}
