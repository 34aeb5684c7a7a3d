//! Child-process plumbing shared by the environments that run programs
//! (bash, python, and the interactive programs plugins may start).
//!
//! It owns these mechanisms, one per submodule: which variables a child may
//! see ([`secrets`]), how a running job is interrupted with escalating
//! signals ([`interrupt`]), how the host guarantees that no process it
//! started outlives it ([`reaper`]), how a program runs in its own
//! pseudo-terminal ([`pty`]), and whether a job is blocked waiting for
//! terminal input ([`input_wait`]), read from the process table
//! ([`procfs`]). It must not know about any particular environment, the
//! protocol or the screen.

pub mod input_wait;
pub mod interrupt;
pub mod procfs;
pub mod pty;
pub mod reaper;
pub mod secrets;
