//! The `envhost` command line: clap's definitions ([`cli`]) and one small
//! file per verb ([`commands`]) from its arguments to a library call.
//! Errors here are `anyhow` and end the process with a message; everything
//! below is typed.

#![deny(missing_docs)]

use std::process::ExitCode;

use clap::Parser;

mod cli;
mod commands;
mod plugin_args;
mod tool_args;

fn main() -> ExitCode {
    // The session's namespace init is this binary under another name: it
    // must do nothing else (it never returns).
    if envhost_process::is_namespace_init() {
        envhost_process::namespace_init_main();
    }
    // SAFETY: first thing in main, while the process has one thread.
    unsafe { envhost_process::hide_secrets_from_proc_environ() };
    commands::run(cli::Cli::parse().command)
}
