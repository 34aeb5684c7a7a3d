//! The host-side implementations of the WIT interfaces plugins import, one
//! file (or folder) per interface, all on [`HostState`](crate::state::HostState).
//!
//! This module declares them; it holds no code of its own.

mod interactive;
mod logging;
