//! envhost's child processes and what their output becomes, shared by every
//! environment that runs a program (bash, python, and the interactive
//! programs plugins may start).
//!
//! This crate owns one mechanism per job:
//!
//! - which variables a child may see ([`SecretPolicy`]);
//! - how a program runs in its own pseudo-terminal ([`Pty`]);
//! - how a running job is interrupted with escalating signals
//!   ([`escalate`], [`DEFAULT_LADDER`]);
//! - how the host guarantees that no process it started outlives it
//!   ([`install_reaper`], [`spawn_managed`], [`terminate_descendants`]);
//! - whether a job is blocked waiting for terminal input
//!   ([`waiting_for_terminal`]), read from the process table
//!   ([`process_table`]);
//! - what a terminal would show, as plain text ([`TerminalText`]), kept
//!   within a byte cap with the whole text saved to a file
//!   ([`OutputCapture`]);
//! - the one buffer a command's response is put together in
//!   ([`CommandOutput`]);
//! - an interactive program driven at its prompt ([`Session`], [`Prompt`]),
//!   found on `PATH` ([`find_program`]), and seen from another thread while
//!   a wait reads it ([`SessionLive`]);
//! - non-blocking descriptors ([`set_nonblocking`]).
//!
//! It must not know any particular environment, the protocol or the screen.

#![deny(missing_docs)]

mod capture;
mod fd;
mod input_wait;
mod interrupt;
mod live;
mod output;
mod procfs;
mod program;
mod prompt;
mod pty;
mod reaper;
mod secrets;
mod session;
mod session_error;
mod terminal;

pub use crate::capture::{
    CapturedOutput, DEFAULT_CAP_BYTES, OutputCapture, OutputLimits, Overflow,
};
pub use crate::fd::set_nonblocking;
pub use crate::input_wait::{TerminalReader, waiting_for_terminal};
pub use crate::interrupt::{DEFAULT_LADDER, Escalation, escalate, signal_group};
pub use crate::live::SessionLive;
pub use crate::output::CommandOutput;
pub use crate::procfs::{ProcessInfo, process_table};
pub use crate::program::find_program;
pub use crate::prompt::Prompt;
pub use crate::pty::{Exit, OpenError, ProgramSpec, Pty, PtyProgram, SpawnError, TerminalSize};
pub use crate::reaper::{
    ManagedPid, TerminationReport, install as install_reaper, spawn_managed, terminate_descendants,
};
pub use crate::secrets::SecretPolicy;
pub use crate::session::{
    AtDeadline, COLUMNS as TERMINAL_COLUMNS, ROWS as TERMINAL_ROWS, Session, Waited,
};
pub use crate::session_error::SessionError;
pub use crate::terminal::TerminalText;
