//! `envhost healthcheck`: the report on stdout, exit status 1 if unhealthy.

use std::io;
use std::process::ExitCode;

use envhost_runtime::{Settings, healthcheck};

use crate::cli::HealthArgs;

pub(crate) fn run(args: HealthArgs) -> ExitCode {
    let mut settings = Settings::new(args.project, "healthcheck", args.timeout);
    settings.python = args.python;
    settings.processes = args.processes.settings();
    settings.plugins = args.plugin_args.settings(args.plugin_config);
    let mut stdout = io::stdout().lock();
    match healthcheck::run(settings, args.plugins, &mut stdout) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(err) => {
            eprintln!("envhost: cannot write the report: {err}");
            ExitCode::FAILURE
        }
    }
}
