//! End-to-end tests: the real `envhost` binary, driven over NDJSON.
//!
//! One test binary with a module per area, so it links once. Every test
//! starts its own host on its own temporary project.

mod bash;
mod capabilities;
mod container;
mod distribution;
mod editor;
mod files;
mod harness;
mod mcp;
mod plugins;
mod polyglot;
mod protocol;
mod python;
mod repl;
