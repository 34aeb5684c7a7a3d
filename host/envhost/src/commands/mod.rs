//! One file per verb: each turns its parsed arguments into a library call
//! and an exit status (cargo's shape). The shared end of a session (stop
//! the host, the exit status from why it stopped) is here.

use std::process::ExitCode;

use envhost_runtime::{Host, Stopped};

use crate::cli::Command;

mod check;
mod healthcheck;
mod mcp;
mod repl;
mod serve;

/// Runs one command line.
pub(crate) fn run(command: Command) -> ExitCode {
    let result = match command {
        Command::Serve(args) => return serve::run(args),
        Command::Repl(args) => repl::run(args),
        Command::Mcp(args) => mcp::run(args),
        Command::Check(args) => check::run(args).map(|()| ExitCode::SUCCESS),
        Command::Distribution(command) => envhost_tools::distribution::run(command.into_plain())
            .map(|()| ExitCode::SUCCESS)
            .map_err(anyhow::Error::from),
        Command::Healthcheck(args) => return healthcheck::run(args),
        Command::Call(args) => return envhost_tools::call::run(args.into_plain()),
        Command::Test(args) => return envhost_tools::plugin_test::run(args.into_plain()),
        Command::CompilePlugin { baseline } => return envhost_plugin::serve_compile(baseline),
        Command::New(args) => envhost_tools::new_project::run(&args.into_plain())
            .map(|()| ExitCode::SUCCESS)
            .map_err(anyhow::Error::from),
    };
    // `{:#}` prints the whole chain: a library's error and each source
    // under it (`reading env/x.wasm: Permission denied`).
    result.unwrap_or_else(|err| {
        eprintln!("envhost: {err:#}");
        ExitCode::FAILURE
    })
}

/// Stops `host` after its front end stopped, and exits as that says.
fn stop(host: Host, stopped: Stopped) -> ExitCode {
    ExitCode::from(host.stop(stopped).exit_status())
}
