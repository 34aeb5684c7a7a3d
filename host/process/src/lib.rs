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
//! - where a program runs: in the session's namespaces, where it cannot
//!   name the host ([`configure_isolation`], [`Isolation`]; their init is
//!   this binary started as [`namespace_init_main`]), or, where none can be
//!   made, beside the host behind a guard ([`guard_status`]);
//! - how a program starts: in a cgroup of its own, within the session's
//!   limits, where the machine allows it ([`Enclosure`],
//!   [`configure_containment`], [`session_limits`]), its exit status its
//!   environment's ([`spawn_managed_command`], [`Pty::spawn`]);
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
//! - non-blocking descriptors ([`set_nonblocking`]);
//! - the private folders a program's plumbing lives in, removed with their
//!   owner and swept when their host died ([`PrivateFolder`]).
//!
//! It must not know any particular environment, the protocol or the screen.

#![deny(missing_docs)]

mod capture;
mod containment;
mod fd;
mod guard;
mod input_wait;
mod interrupt;
mod isolation;
mod limit_watch;
mod live;
mod output;
mod private_folder;
mod procfs;
mod program;
mod prompt;
mod pty;
mod reaper;
mod secrets;
mod session;
mod session_error;
mod session_init;
mod spawn;
mod terminal;

#[cfg(test)]
mod tests_support;

pub use crate::capture::{
    CapturedOutput, DEFAULT_CAP_BYTES, DEFAULT_SPILL_LIMIT_BYTES, OutputCapture, OutputLimits,
    Overflow,
};
pub use crate::containment::{
    Containment, ContainmentSettings, DEFAULT_MAX_PROCESSES, Enclosure, LimitCounters, Limits,
    LimitsInForce, configure as configure_containment, limits as session_limits, machine_memory,
    session_members,
};
pub use crate::fd::set_nonblocking;
pub use crate::guard::{GuardUnavailable, status as guard_status};
pub use crate::input_wait::{TerminalReader, waiting_for_any_input, waiting_for_terminal};
pub use crate::interrupt::{DEFAULT_LADDER, Escalation, escalate, signal_group};
pub use crate::isolation::{
    INIT_NAME as NAMESPACE_INIT_NAME, Isolation, IsolationRequest,
    configure as configure_isolation, init_main as namespace_init_main,
    is_init as is_namespace_init, mode as isolation,
};
pub use crate::limit_watch::{LimitWatch, Relief, relieve_process_limit};
pub use crate::live::SessionLive;
pub use crate::output::CommandOutput;
pub use crate::private_folder::PrivateFolder;
pub use crate::procfs::{
    ProcessInfo, child_in_group, descendants, ignored_signals, process_info, process_table,
    start_tick, tick_ago,
};
pub use crate::program::{
    ProgramNotFound, find_program, is_executable_file, search_path, search_path_in,
};
pub use crate::prompt::{BadPrompt, Prompt};
pub use crate::pty::{Exit, OpenError, ProgramSpec, Pty, PtyProgram, SpawnError, TerminalSize};
pub use crate::reaper::{
    ManagedPid, TerminationReport, install as install_reaper, spawn_managed, terminate_descendants,
};
pub use crate::secrets::{SecretPolicy, hide_from_proc_environ as hide_secrets_from_proc_environ};
pub use crate::session::{
    AtDeadline, COLUMNS as TERMINAL_COLUMNS, ROWS as TERMINAL_ROWS, Session, Waited,
};
pub use crate::session_error::SessionError;
pub use crate::spawn::{ManagedChild, PassedFd, spawn_managed_command};
pub use crate::terminal::TerminalText;
