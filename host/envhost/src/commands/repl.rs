//! `envhost repl`: the REPL front end.

use std::process::ExitCode;

use envhost_runtime::Host;

use crate::cli::ReplArgs;

pub(crate) fn run(args: ReplArgs) -> anyhow::Result<ExitCode> {
    let host = Host::start(args.session.settings("repl"))?;
    let stopped = envhost_repl::serve(&host, args.open_figures);
    Ok(super::stop(host, stopped))
}
