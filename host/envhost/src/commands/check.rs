//! `envhost check`: one report per plugin file on stdout; failure if any
//! file would be refused.

use std::io::{self, Write};
use std::sync::Arc;

use anyhow::bail;
use envhost_plugin::{self as plugin, LogSink, StderrSink};

use crate::cli::CheckArgs;

pub(crate) fn run(args: CheckArgs) -> anyhow::Result<()> {
    let settings = args.plugins.settings(args.grants.clone());
    let log: Arc<dyn LogSink> = Arc::new(StderrSink);
    let mut refused = 0;
    let mut stdout = io::stdout().lock();
    for (index, file) in args.files.iter().enumerate() {
        let report = plugin::check_file(file, &settings, Arc::clone(&log));
        if index > 0 {
            writeln!(stdout)?;
        }
        stdout.write_all(report.text.as_bytes())?;
        stdout.flush()?;
        if !report.ok {
            refused += 1;
        }
    }
    if refused > 0 {
        bail!(
            "{refused} of {} plugin file{} failed the check",
            args.files.len(),
            if args.files.len() == 1 { "" } else { "s" }
        );
    }
    Ok(())
}
