//! The operator's and the plugin author's commands, as a library: the
//! distribution commands that change a project's plugins (`add`,
//! `install`, `update`, `verify`, `remove`, `list`, `publish`:
//! [`distribution`]), `new` ([`new_project`]: a plugin project from
//! templates), `call` ([`call`]: commands against one plugin through the
//! host's own path) and `test` ([`plugin_test`]: session files run against
//! a plugin, with their syntax in `session_file`).
//!
//! It must not know the command line (clap: the binary turns its flags
//! into the plain argument structs here) nor the protocol's front ends
//! (NDJSON, the REPL, MCP): nothing here serves an agent.

pub mod call;
pub mod distribution;
pub mod new_project;
pub mod plugin_test;
mod session_file;
