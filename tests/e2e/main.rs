//! End-to-end tests: the real `envhost` binary, driven over NDJSON.
//!
//! One test binary with a module per area, so it links once. Every test
//! starts its own host on its own temporary project.

mod authors;
mod bash;
mod bash_running;
mod bash_trust;
mod capabilities;
mod container;
mod containment;
mod distribution;
mod editor;
mod editor_integrity;
mod figures;
mod files;
mod harness;
mod hostile;
mod hostile_files;
mod instances;
mod isolation;
mod loopback_http;
mod mcp;
mod mcp_http;
mod network;
mod new_project;
mod plugin_state;
mod plugins;
mod polyglot;
mod protocol;
mod python;
mod python_running;
mod python_trust;
mod repl;
mod running;
mod session;
mod stopping;
mod tiering;
mod versions;
