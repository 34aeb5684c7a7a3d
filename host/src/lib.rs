//! envhost: persistent, stateful environments for AI agents.
//!
//! One binary gives an agent a bash shell, a Python REPL, a file editor and
//! any number of ad-hoc environments shipped as sandboxed WebAssembly
//! components, over newline-delimited JSON. After every command the agent
//! gets the output and a *screen*: every environment's state and how to use
//! it.
//!
//! Data flows one way:
//!
//! ```text
//! serve / repl (front ends) ─► protocol (NDJSON) ─► orchestrator ─► environment
//!                                                       │
//!                              response + screen ◄──────┘── events ─► observers
//! ```
//!
//! - [`environment`]: the trait every environment implements.
//! - [`orchestrator`]: routing, screen collection, panic containment.
//! - [`protocol`]: NDJSON framing, parsing and replies.
//! - [`screen`]: sections, order, `max_lines` truncation.
//! - [`events`]: the event bus and its observers (transcript, console).
//! - [`help`]: seed 001's progressive help, shared by the editor and plugins.
//! - [`envs`]: the built-in environments.
//! - [`plugin`]: ad-hoc environments as sandboxed WebAssembly components.
//! - [`process`], [`output`]: child processes and their output, shared by
//!   the environments that run programs.
//! - [`serve`], [`repl`], [`signals`]: the front ends.

pub mod config;
pub mod environment;
pub mod envs;
pub mod events;
pub mod help;
pub mod orchestrator;
pub mod output;
pub mod plugin;
pub mod process;
pub mod protocol;
pub mod repl;
pub mod screen;
pub mod serve;
pub mod signals;
