//! What a program's output becomes before it reaches the agent.
//!
//! Two mechanisms, shared by every environment that runs programs:
//! [`terminal`] turns what a terminal would *show* into plain text (ANSI
//! escapes removed, carriage-return redraws collapsed to their final state),
//! and [`capture`] keeps the result within a byte cap (head and tail kept,
//! the full text saved to a file the response names) in bounded memory. This
//! module never reads from a process itself; callers feed it bytes.

pub mod capture;
pub mod terminal;
