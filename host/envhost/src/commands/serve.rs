//! `envhost serve`: the NDJSON front end.

use std::process::ExitCode;

use envhost_protocol::DEFAULT_MAX_LINE_BYTES;
use envhost_runtime::Host;

use crate::cli::ServeArgs;

pub(crate) fn run(args: ServeArgs) -> ExitCode {
    if let Err(err) = envhost_ndjson::say_last_words_on_abort() {
        eprintln!("envhost: cannot prepare for an abort ({err})");
    }
    let mut settings = args.session.settings("serve");
    // Plugins' own output goes to stderr only where someone reads it: an
    // agent may never drain stderr, and a full pipe would block the host.
    settings.plugin_output_to_stderr = settings.verbose;
    let host = match Host::start(settings) {
        Ok(host) => host,
        Err(err) => {
            eprintln!("envhost: {err}");
            // The agent reads stdout, maybe not stderr.
            envhost_ndjson::last_words(&format!("envhost cannot serve: {err}"));
            return ExitCode::FAILURE;
        }
    };
    let stopped = envhost_ndjson::serve(&host, DEFAULT_MAX_LINE_BYTES);
    super::stop(host, stopped)
}
