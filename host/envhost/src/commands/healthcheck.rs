//! `envhost healthcheck`: the report on stdout, exit status 1 if unhealthy.

use std::io::{self, Write};
use std::process::ExitCode;

use envhost_runtime::healthcheck::{self, Checks};
use envhost_runtime::{contain, resolve_project};

use crate::cli::HealthArgs;

pub(crate) fn run(args: HealthArgs) -> ExitCode {
    let mut stdout = io::stdout().lock();
    let project = match resolve_project(&args.project) {
        Ok(project) => project,
        Err(err) => {
            let _ = writeln!(stdout, "FAIL {err}\nunhealthy");
            return ExitCode::FAILURE;
        }
    };
    if let Err(err) = contain(&args.processes.settings()) {
        let _ = writeln!(stdout, "FAIL {err}\nunhealthy");
        return ExitCode::FAILURE;
    }
    let mut settings = envhost_envs::Settings::for_project(project);
    settings.python = args.python;
    let checks = Checks {
        settings,
        timeout: args.timeout,
        plugins: args
            .plugins
            .then(|| args.plugin_args.settings(args.plugin_config.clone())),
    };
    match healthcheck::run(checks, &mut stdout) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(err) => {
            eprintln!("envhost: cannot write the report: {err}");
            ExitCode::FAILURE
        }
    }
}
